/* Point-to-point: the one place that moves bytes (see p2p.h). */
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "p2p.h"
#include "buf.h"
#include "cuda.h"
#include "internal.h"
#include "mailbox.h"
#include "ops.h"
#include "trace.h"

/* MPI counts are ints: dt_isend and dt_irecv take at most this; dt_send and the others
 * cut a larger message into pieces (mailbox.c). */
#define NB_MAX ((size_t)1 << 30)
#define MAX_REQS 64

/* Atomic: DDP's communication thread sends while the main thread may too. */
static _Atomic size_t bytes_sent, bytes_received, messages_sent;

size_t dt_bytes_sent(void) { return bytes_sent; }
size_t dt_bytes_received(void) { return bytes_received; }
size_t dt_messages_sent(void) { return messages_sent; }
static _Atomic unsigned long long wait_ns;    /* atomic doubles would need libatomic */
double dt_wait_seconds(void) { return (double)wait_ns * 1e-9; }
void dt_bytes_reset(void) { bytes_sent = bytes_received = messages_sent = 0; wait_ns = 0; }

/* ==== the log of messages (p2p.h) ====
 * A message's seq is its place among this rank's messages with the same peer, tag and
 * direction: MPI delivers those in order, so the k-th send from a to b with tag t is
 * the k-th receive at b from a with tag t. A dt_irecv waits in pending, seq taken when
 * it was posted, until the dt_waitall that completes it notes it. */
enum { LOG_PAIRS = 256, LOG_PENDING = 64 };
static struct {
    dt_p2p_note *notes;            /* NULL: not logging */
    int cap, n;                    /* n counts past cap too */
    struct { int peer, tag, count[2]; } pair[LOG_PAIRS];
    int npair;
    struct { MPI_Request req; dt_p2p_note note; } pending[LOG_PENDING];
    int npending;
} lg;

void dt_p2p_log_start(dt_p2p_note *notes, int cap)
{
    lg.notes = notes;
    lg.cap = notes ? cap : 0;
    lg.n = lg.npair = lg.npending = 0;
}

int dt_p2p_log_stop(void)
{
    lg.notes = NULL;
    return lg.n;
}

static void log_add(dt_p2p_note note)
{
    if (lg.n < lg.cap)
        lg.notes[lg.n] = note;
    lg.n++;
}

/* A note of a message with peer (already in MPI_COMM_WORLD), its seq counted. */
static dt_p2p_note log_note(int send, int peer, int tag)
{
    dt_p2p_note note = { send, peer < 0 ? -1 : peer, tag, 0 };
    int i = 0;
    while (i < lg.npair && (lg.pair[i].peer != note.peer || lg.pair[i].tag != tag))
        i++;
    if (i == lg.npair && i < LOG_PAIRS)
        lg.pair[lg.npair++] = (typeof(lg.pair[0])){ note.peer, tag, {0, 0} };
    if (i < LOG_PAIRS)
        note.seq = lg.pair[i].count[send]++;
    return note;
}

/* Notes the pending receives among reqs (their handles before dt_waitall cleared them),
 * which have now arrived. */
static void log_arrived(int n, const MPI_Request *reqs)
{
    for (int i = 0; i < lg.npending; i++)
        for (int j = 0; j < n; j++)
            if (reqs[j] == lg.pending[i].req) {
                log_add(lg.pending[i].note);
                lg.pending[i--] = lg.pending[--lg.npending];
                break;
            }
}

/* ==== waiting ==== */

/* A failed request: MPI_Testall/Waitall say only "see the statuses", so find the status
 * that failed and say what it means. A truncated message is the usual one here: the
 * ranks disagree on a count or a datatype, which the collectives cannot see locally. */
static void explain_failure(int err, int n, const MPI_Status *st)
{
    for (int i = 0; err == MPI_ERR_IN_STATUS && i < n; i++)
        if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) {
            int cls = 0;
            MPI_Error_class(st[i].MPI_ERROR, &cls);
            dti_die(__FILE__, __LINE__, "a message from or to rank %d failed: %s%s",
                    st[i].MPI_SOURCE, dti_mpi_error_string(st[i].MPI_ERROR),
                    cls == MPI_ERR_TRUNCATE ? " (" DTI_TOO_LONG ")" : "");
        }
    dti_die(__FILE__, __LINE__, "waiting for messages failed: %s", dti_mpi_error_string(err));
}

/* ==== time limits ====
 *
 * A rank that died on another host, or is stuck in a loop, or a deadlock, leaves its
 * peers waiting forever, and mpiexec's MPIEXEC_TIMEOUT then kills every rank without
 * saying who was stuck. So dtlab's waits have limits of their own, and the rank that
 * reaches one names the rank it was waiting for (in MPI_COMM_WORLD) and, when a
 * collective set the trace context, the step:
 *
 *   MPIEXEC_TIMEOUT=T   every wait stops T - max(3, T/10) seconds after dt_init, a little
 *                       before mpiexec would kill the job, so that dtlab can speak first;
 *   DT_TIMEOUT=S        one wait may take S seconds (DT_TIMEOUT=0: no limits at all).
 *
 * Waits form chains: in a ring, rank 1 waits for rank 0, which waits for rank 2, which is
 * stuck. A rank whose peer is itself waiting (the board, watch.c: ranks on the same host)
 * gives that peer up to GRACE seconds more to speak first, so the message names the end
 * of the chain. Both limits go through dti_die, so MPI_Abort ends the job.
 * DT_WAIT=block waits inside MPI_Waitall, where no limit is checked.
 *
 * Not every wait the job's deadline ends is stuck: a job with more work than its limit
 * (a loaded machine, a long benchmark) reaches the deadline in the middle of ordinary
 * waits of milliseconds. A real stall keeps its peers waiting from the moment it began
 * until the deadline, so a wait that had begun less than SHORT_WAIT seconds, and less
 * than half the job's time, before the deadline is reported as the job running out of
 * time, not as a deadlock. (A stall that began in those last seconds looks the same, and
 * is called so too: raising the limit shows it.) */
#define GRACE 1.0
#define SHORT_WAIT 5.0

static struct {
    double deadline;        /* dti_now() after which every wait stops; 0: none */
    double per_wait;        /* DT_TIMEOUT; 0: no limit */
    double job, margin;     /* MPIEXEC_TIMEOUT, and how much earlier dtlab stops */
} lim;

void dti_p2p_limits(double start, double job, double per_wait)
{
    lim.per_wait = per_wait > 0 ? per_wait : 0;
    lim.job = job;
    lim.margin = job / 10 > 3 ? job / 10 : 3;
    lim.deadline = job - lim.margin >= 1 ? start + job - lim.margin : 0;
}

/* t0: when the wait began; now: when it stopped (the deadline, plus any GRACE). src and
 * dst: the world ranks still waited for (a message from src; dst to take this rank's),
 * -1 for none; n: the MPI requests waited for, for when neither is known. */
__attribute__((noreturn))
static void die_waiting(int src, int dst, int n, double t0, double now, int by_wait)
{
    char what[200], where[96], ctx[160], whom[32] = "a rank", limit[128];
    if (src >= 0 && dst >= 0)
        snprintf(what, sizeof what, "a message from rank %d, and for rank %d to take "
                 "this rank's", src, dst);
    else if (src >= 0)
        snprintf(what, sizeof what, "a message from rank %d", src);
    else if (dst >= 0)
        snprintf(what, sizeof what, "rank %d to take this rank's message (a large "
                 "message waits for its receiver)", dst);
    else
        snprintf(what, sizeof what, "%d MPI request%s not from dtlab's send and receive "
                 "(a barrier, a nonblocking collective, dt_isend or dt_irecv)", n,
                 n == 1 ? "" : "s");
    if (src >= 0 || dst >= 0)
        snprintf(whom, sizeof whom, "rank %d", src >= 0 ? src : dst);
    dti_trace_where(where, sizeof where);
    if (!where[0])
        ctx[0] = '\0';
    else if (src >= 0 || dst >= 0)
        snprintf(ctx, sizeof ctx, " (%s?)", where);
    else
        snprintf(ctx, sizeof ctx, " (the last dtlab step of this thread: %s)", where);
    double before = lim.deadline - t0;           /* waited when the deadline came */
    if (!by_wait && before < SHORT_WAIT && before < (lim.job - lim.margin) / 2)
        dti_die(__FILE__, __LINE__, "the job's time limit is nearly reached "
                "(MPIEXEC_TIMEOUT=%g s; dtlab stops %g s before it, to speak before mpiexec "
                "ends the job): this rank had waited only %.1f s for %s%s, so nothing "
                "looks stuck; the job needs more time than the limit (a loaded machine, "
                "or more work): raise MPIEXEC_TIMEOUT", lim.job, lim.margin,
                before > 0 ? before : 0, what, ctx);
    if (by_wait)
        snprintf(limit, sizeof limit, "DT_TIMEOUT=%g s a wait", lim.per_wait);
    else
        snprintf(limit, sizeof limit, "dtlab stops %g s before MPIEXEC_TIMEOUT=%g would, "
                 "to say who", lim.margin, lim.job);
    dti_die(__FILE__, __LINE__, "waited %.1f s for %s%s: %s may have died, be stuck, or "
            "the ranks disagree on the order of messages (a deadlock) [%s]", now - t0,
            what, ctx, whom, limit);
}

/* When a wait that began at t0 must stop: 0 for never; *by_wait when DT_TIMEOUT decides. */
static double wait_stop(double t0, int *by_wait)
{
    double stop = lim.deadline;
    *by_wait = lim.per_wait > 0 && (stop == 0 || t0 + lim.per_wait < stop);
    return *by_wait ? t0 + lim.per_wait : stop;
}

void dti_p2p_poll(double t0, int src_w, int dst_w)
{
    int by_wait;
    double stop = wait_stop(t0, &by_wait), now;
    if (stop == 0 || (now = dti_now()) <= stop)
        return;
    int whom = src_w >= 0 ? src_w : dst_w;
    if (now < stop + GRACE && whom >= 0 && dti_watch_is_waiting(whom))
        return;                       /* that rank waits too: let it speak first */
    die_waiting(src_w, dst_w, 0, t0, now, by_wait);
}

/* MPICH's MPI_Wait spins on the CPU until the message arrives. With one rank per core
 * that is the fastest thing to do; with more ranks than cores the spinning rank holds
 * the core that the rank it waits for needs in order to send. Polite waiting asks MPI
 * whether it is done (MPI_Testall also drives MPICH's progress engine) and, if not,
 * gives the core away with sched_yield before asking again, until the time limit. */
static int wait_politely(int n, MPI_Request *reqs, MPI_Status *st)
{
    int by_wait;
    double t0 = dti_now(), stop = wait_stop(t0, &by_wait);
    int err, done = 0;
    dti_watch_waiting(1);
    while ((err = MPI_Testall(n, reqs, &done, st)) == MPI_SUCCESS && !done) {
        sched_yield();
        double now;
        if (stop > 0 && (now = dti_now()) > stop)
            die_waiting(-1, -1, n, t0, now, by_wait);
    }
    dti_watch_waiting(-1);
    return err;
}

void dt_waitall(int n, MPI_Request *reqs)
{
    MPI_Status small[MAX_REQS], *st = n <= MAX_REQS ? small : malloc(sizeof *st * (size_t)n);
    DT_REQUIRE(st != NULL, "out of memory");
    MPI_Request posted[MAX_REQS];       /* for the log: the handles, before they clear */
    int logged = lg.npending > 0 && n <= MAX_REQS;
    if (logged)
        memcpy(posted, reqs, (size_t)n * sizeof *reqs);
    int err, done = 0;
    double t0 = dti_now();
    if (!dt_polite())
        err = MPI_Waitall(n, reqs, st);
    else if ((err = MPI_Testall(n, reqs, &done, st)) == MPI_SUCCESS && !done)
        err = wait_politely(n, reqs, st);
    wait_ns += (unsigned long long)((dti_now() - t0) * 1e9);
    if (err != MPI_SUCCESS)
        explain_failure(err, n, st);
    if (st != small)
        free(st);
    if (logged)
        log_arrived(n, posted);
}

void dt_barrier(MPI_Comm comm)
{
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ibarrier(comm, &req));
    dt_waitall(1, &req);
}

/* ==== staging ====
 *
 * Device data crosses through pinned host buffers: pinned (page-locked) memory is what
 * the GPU's copy engine reads and writes directly, so the copies run at full speed.
 * Two buffers, one per direction, grown on demand, and the events that mark where the
 * GPU has got to in a pipeline of copies (mailbox.c, "staged pieces"). Each thread has
 * its own (DDP's communication thread sends while the main thread computes and may send
 * too): freed when the thread ends, the main thread's by dt_finalize. Without a GPU the
 * buffers are plain memory: the CPU tests stage host data through them too
 * (dti_p2p_stage_host), to run the pipeline's logic every day. */
typedef struct {
    struct { void *p; size_t nbytes; int pinned; } buf[2];
    void *ev[DTI_MAX_PIECES];
} stage_state;

static pthread_key_t stage_key;
static pthread_once_t stage_once = PTHREAD_ONCE_INIT;

static void stage_release(void *arg)
{
    stage_state *st = arg;
    for (int i = 0; st && i < 2; i++)
        if (st->buf[i].p && st->buf[i].pinned)
            dti_cuda_host_free(st->buf[i].p);
        else
            free(st->buf[i].p);
    for (int i = 0; st && i < DTI_MAX_PIECES; i++)
        if (st->ev[i])
            dti_cuda_event_free(st->ev[i]);
    free(st);
}

static void stage_key_make(void)
{
    DT_REQUIRE(pthread_key_create(&stage_key, stage_release) == 0,
               "cannot create a thread-local key for p2p staging");
}

static stage_state *stage_of_thread(void)
{
    pthread_once(&stage_once, stage_key_make);
    stage_state *st = pthread_getspecific(stage_key);
    if (st == NULL) {
        st = calloc(1, sizeof *st);
        DT_REQUIRE(st != NULL, "out of host memory");
        pthread_setspecific(stage_key, st);
    }
    return st;
}

void *dti_p2p_staging(int slot, size_t nbytes)
{
    stage_state *st = stage_of_thread();
    if (st->buf[slot].nbytes < nbytes || !st->buf[slot].p) {
        if (st->buf[slot].pinned)
            dti_cuda_host_free(st->buf[slot].p);
        else
            free(st->buf[slot].p);
        st->buf[slot].pinned = dti_gpu_count() > 0;
        st->buf[slot].p = st->buf[slot].pinned ? dti_cuda_host_alloc(nbytes)
                                               : malloc(nbytes ? nbytes : 1);
        DT_REQUIRE(st->buf[slot].p != NULL, "out of host memory (%zu bytes)", nbytes);
        st->buf[slot].nbytes = nbytes;
    }
    return st->buf[slot].p;
}

void *dti_p2p_event(int i)
{
    stage_state *st = stage_of_thread();
    if (!st->ev[i])
        st->ev[i] = dti_cuda_event_new();
    return st->ev[i];
}

void dti_p2p_fini(void)
{
    dti_mb_fini();
    pthread_once(&stage_once, stage_key_make);
    stage_release(pthread_getspecific(stage_key));
    pthread_setspecific(stage_key, NULL);
}

/* Copies between device and staging memory, recorded as d2h / h2d. */
static void staged_copy(void *dst, const void *src, size_t nbytes, dt_event_kind kind)
{
    double t0 = dt_trace_now();
    dti_cuda_memcpy(dst, src, nbytes);
    dt_trace_add(kind, -1, nbytes, t0, dt_trace_now());
}

void dti_p2p_copy(void *dst, const void *src, size_t nbytes)
{
    int d = dt_is_device_ptr(dst), s = dt_is_device_ptr(src);
    if (!d && !s)
        memcpy(dst, src, nbytes);
    else
        staged_copy(dst, src, nbytes, d && s ? DT_EV_COPY : d ? DT_EV_H2D : DT_EV_D2H);
}

void dti_p2p_copy_queue(void *dst, const void *src, size_t nbytes, int dev)
{
    if (dev)
        dti_cuda_memcpy_async(dst, src, nbytes);
    else
        memcpy(dst, src, nbytes);
}

/* Traces name peers by their rank in MPI_COMM_WORLD, whatever communicator carried the
 * message (tensor- and pipeline-parallel groups are sub-communicators). */
static int world_rank_of(int peer, MPI_Comm comm)
{
    if (peer < 0 || comm == MPI_COMM_WORLD)
        return peer;
    MPI_Group g, world;
    int out = -1;
    DT_CHECK_MPI(MPI_Comm_group(comm, &g));
    DT_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    DT_CHECK_MPI(MPI_Group_translate_ranks(g, 1, &peer, world, &out));
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    return out == MPI_UNDEFINED ? -1 : out;
}

int dti_p2p_world_rank(int peer, MPI_Comm comm) { return world_rank_of(peer, comm); }

/* ==== exchanges ==== */

/* After an exchange: the log, the byte counters and the trace. */
static void account(const void *sbuf, size_t snbytes, int dst, dt_via svia,
                    const void *rbuf, size_t rnbytes, int src, dt_via rvia, int tag,
                    MPI_Comm comm, double t0, double t1)
{
    if (lg.notes) {                     /* the send first: both left in one round */
        if (sbuf)
            log_add(log_note(1, world_rank_of(dst, comm), tag));
        if (rbuf)
            log_add(log_note(0, world_rank_of(src, comm), tag));
    }
    if (sbuf) {
        bytes_sent += snbytes;
        messages_sent++;
        if (dt_trace_enabled())
            dt_trace_add_via(DT_EV_SEND, world_rank_of(dst, comm), snbytes, t0, t1,
                             dt_via_name(svia));
    }
    if (rbuf) {
        bytes_received += rnbytes;
        if (dt_trace_enabled())
            dt_trace_add_via(DT_EV_RECV, world_rank_of(src, comm), rnbytes, t0, t1,
                             dt_via_name(rvia));
    }
}

/* The whole of send, recv and sendrecv: sbuf NULL means no send, rbuf NULL no receive;
 * red: reduce what arrives into rbuf instead of copying it (dti_sendrecv_reduce).
 * mailbox.c moves the bytes: through the mailboxes where this host has them, else
 * through MPI, device data staged through pinned host memory a piece at a time. */
static void exchange(const void *sbuf, size_t snbytes, int dst,
                     void *rbuf, size_t rnbytes, int src, int tag, MPI_Comm comm,
                     const dti_mb_reduce *red)
{
    dt_via sv = DT_VIA_MPI, rv = DT_VIA_MPI;
    double t0 = dt_trace_now(), idle = 0;
    dti_mb_exchange(sbuf, snbytes, dst, rbuf, rnbytes, src, tag, comm, red, &sv, &rv,
                    &idle);
    wait_ns += (unsigned long long)(idle * 1e9);
    account(sbuf, snbytes, dst, sv, rbuf, rnbytes, src, rv, tag, comm, t0, dt_trace_now());
}

void dt_send(const void *buf, size_t nbytes, int dst, int tag, MPI_Comm comm)
{
    DT_REQUIRE(buf != NULL || nbytes == 0, "dt_send: NULL buffer with %zu bytes", nbytes);
    static const char empty;
    exchange(buf ? buf : &empty, nbytes, dst, NULL, 0, -1, tag, comm, NULL);
}

void dt_recv(void *buf, size_t nbytes, int src, int tag, MPI_Comm comm)
{
    DT_REQUIRE(buf != NULL || nbytes == 0, "dt_recv: NULL buffer with %zu bytes", nbytes);
    static char empty;
    exchange(NULL, 0, -1, buf ? buf : &empty, nbytes, src, tag, comm, NULL);
}

void dt_sendrecv(const void *sbuf, size_t snbytes, int dst,
                 void *rbuf, size_t rnbytes, int src, int tag, MPI_Comm comm)
{
    DT_REQUIRE(sbuf != NULL || snbytes == 0, "dt_sendrecv: NULL send buffer");
    DT_REQUIRE(rbuf != NULL || rnbytes == 0, "dt_sendrecv: NULL receive buffer");
    static const char sempty;
    static char rempty;
    exchange(sbuf ? sbuf : &sempty, snbytes, dst, rbuf ? rbuf : &rempty, rnbytes, src,
             tag, comm, NULL);
}

void dti_sendrecv_reduce(const void *sbuf, size_t snbytes, int dst, const void *own,
                         void *out, int count, MPI_Datatype type, MPI_Op op, void *tmp,
                         int src, int tag, MPI_Comm comm)
{
    static const char sempty;
    static char rempty;
    dti_mb_reduce red = { own, type, op, tmp };
    size_t rnbytes = (size_t)count * dt_type_size(type);
    exchange(sbuf ? sbuf : &sempty, snbytes, dst, rnbytes ? out : &rempty, rnbytes, src,
             tag, comm, rnbytes ? &red : NULL);
}

/* ==== nonblocking ==== */

static MPI_Request post_one(int send, void *buf, size_t nbytes, int peer, int tag,
                            MPI_Comm comm, const char *fn)
{
    DT_REQUIRE(buf != NULL || nbytes == 0, "%s: NULL buffer with %zu bytes", fn, nbytes);
    DT_REQUIRE(nbytes <= NB_MAX, "%s: %zu bytes; at most %zu in one nonblocking message",
               fn, nbytes, NB_MAX);
    DT_REQUIRE(!buf || !dt_is_device_ptr(buf), "%s takes host buffers only; use dt_send "
               "and dt_recv for device data", fn);
    static char empty;
    MPI_Request req;
    if (send)
        DT_CHECK_MPI(MPI_Isend(buf ? buf : &empty, (int)nbytes, MPI_BYTE, peer, tag, comm,
                               &req));
    else
        DT_CHECK_MPI(MPI_Irecv(buf ? buf : &empty, (int)nbytes, MPI_BYTE, peer, tag, comm,
                               &req));
    double t = dt_trace_now();
    if (send) {
        bytes_sent += nbytes;
        messages_sent++;
    } else
        bytes_received += nbytes;
    if (dt_trace_enabled())
        dt_trace_add(send ? DT_EV_SEND : DT_EV_RECV, world_rank_of(peer, comm), nbytes, t, t);
    if (lg.notes) {            /* a send counts when posted, a receive when it arrives */
        dt_p2p_note note = log_note(send, world_rank_of(peer, comm), tag);
        if (send || lg.npending == LOG_PENDING)
            log_add(note);
        else
            lg.pending[lg.npending++] = (typeof(lg.pending[0])){ req, note };
    }
    return req;
}

MPI_Request dt_isend(const void *buf, size_t nbytes, int dst, int tag, MPI_Comm comm)
{
    return post_one(1, (void *)buf, nbytes, dst, tag, comm, "dt_isend");
}

MPI_Request dt_irecv(void *buf, size_t nbytes, int src, int tag, MPI_Comm comm)
{
    return post_one(0, buf, nbytes, src, tag, comm, "dt_irecv");
}

