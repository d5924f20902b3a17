/* Point-to-point: the one place that moves bytes (see p2p.h). */
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
void dt_bytes_reset(void)
{
    bytes_sent = bytes_received = messages_sent = 0;
    dti_p2p_wait_reset();
}

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

/* ==== nonblocking messages of device data ====
 * MPI cannot read device memory (Debian's MPICH is not CUDA-aware), so dt_isend of device
 * data copies it into a staging buffer of the request's own (pinned host memory,
 * dti_p2p_stage_take) and hands MPI that; dt_irecv of device data receives into one,
 * which the wait that completes the request copies on to the GPU. Each thread notes its
 * staged requests here until then: a request of device data is completed by dt_waitall
 * or dt_test, never by MPI_Wait or MPI_Test themselves. Under dti_p2p_stage_host (the
 * tests) host data is staged the same way, so the CPU runs this every day. */
static _Thread_local struct {
    MPI_Request req;
    void *stage;
    void *dst;                  /* a receive's buffer; NULL for a send */
    size_t nbytes;
} staged[DTI_MAX_STAGED];
static _Thread_local int nstaged;

static int staged_find(MPI_Request req)
{
    for (int k = 0; req != MPI_REQUEST_NULL && k < nstaged; k++)
        if (staged[k].req == req)
            return k;
    return -1;
}

/* Request k has completed: its data to the GPU (a receive), its buffer back */
static void staged_done(int k)
{
    if (staged[k].dst)
        dti_p2p_copy(staged[k].dst, staged[k].stage, staged[k].nbytes);   /* h2d */
    dti_p2p_stage_give(staged[k].stage);
    staged[k] = staged[--nstaged];
}

/* ==== waiting (polite, with time limits: p2p_wait.c) ==== */

void dt_waitall(int n, MPI_Request *reqs)
{
    MPI_Request posted[MAX_REQS];       /* for the log: the handles, before they clear */
    int logged = lg.npending > 0 && n <= MAX_REQS;
    if (logged)
        memcpy(posted, reqs, (size_t)n * sizeof *reqs);
    int mine[DTI_MAX_STAGED], nmine = 0;    /* the staged among reqs, in rising order */
    for (int k = 0; k < nstaged; k++)
        for (int j = 0; j < n; j++)
            if (reqs[j] == staged[k].req) {
                mine[nmine++] = k;
                break;
            }
    dti_p2p_wait(n, reqs);
    if (logged)
        log_arrived(n, posted);
    for (int i = nmine - 1; i >= 0; i--)    /* from the last: staged_done moves the last */
        staged_done(mine[i]);
}

int dt_test(MPI_Request *req)
{
    int k = staged_find(*req), done = 0;
    DT_CHECK_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
    if (done && k >= 0)
        staged_done(k);
    return done;
}

void dti_p2p_fini(void)
{
    dti_mb_fini();
    dti_p2p_stage_fini();
}

/* ==== exchanges ==== */

/* A send to this rank itself is legal MPI, and the likely cause of a stuck wait in the
 * algorithms dtlab teaches: the board notes it, for such a wait to name (watch.c). */
static void note_self_send(int dst, MPI_Comm comm)
{
    int me;
    if (MPI_Comm_rank(comm, &me) == MPI_SUCCESS && dst == me)
        dti_watch_sent_to_self();
}

/* After an exchange: the log, the byte counters and the trace. */
static void account(const void *sbuf, size_t snbytes, int dst, dt_via svia,
                    const void *rbuf, size_t rnbytes, int src, dt_via rvia, int tag,
                    MPI_Comm comm, double t0, double t1)
{
    if (lg.notes) {                     /* the send first: both left in one round */
        if (sbuf)
            log_add(log_note(1, dti_p2p_world_rank(dst, comm), tag));
        if (rbuf)
            log_add(log_note(0, dti_p2p_world_rank(src, comm), tag));
    }
    if (sbuf) {
        bytes_sent += snbytes;
        messages_sent++;
        if (dt_trace_enabled())
            dt_trace_add_via(DT_EV_SEND, dti_p2p_world_rank(dst, comm), snbytes, t0, t1,
                             dt_via_name(svia));
    }
    if (rbuf) {
        bytes_received += rnbytes;
        if (dt_trace_enabled())
            dt_trace_add_via(DT_EV_RECV, dti_p2p_world_rank(src, comm), rnbytes, t0, t1,
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
    if (sbuf)
        note_self_send(dst, comm);
    dti_mb_exchange(sbuf, snbytes, dst, rbuf, rnbytes, src, tag, comm, red, &sv, &rv,
                    &idle);
    dti_p2p_waited(idle);
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
    static char empty;
    MPI_Request req;
    void *wire = buf ? buf : &empty;
    int stage = nbytes > 0 && (dt_is_device_ptr(buf) || dti_p2p_stage_host_on());
    if (stage) {                        /* device data: through a buffer of its own */
        DT_REQUIRE(nstaged < DTI_MAX_STAGED, "%s: more than %d nonblocking messages of "
                   "device data in flight on one thread; wait for some first", fn,
                   DTI_MAX_STAGED);
        wire = dti_p2p_stage_take(nbytes);
        if (send)
            dti_p2p_copy(wire, buf, nbytes);                            /* d2h */
    }
    if (send)
        note_self_send(peer, comm);
    if (send)
        DT_CHECK_MPI(MPI_Isend(wire, (int)nbytes, MPI_BYTE, peer, tag, comm, &req));
    else
        DT_CHECK_MPI(MPI_Irecv(wire, (int)nbytes, MPI_BYTE, peer, tag, comm, &req));
    if (stage)
        staged[nstaged++] = (typeof(staged[0])){ req, wire, send ? NULL : buf, nbytes };
    double t = dt_trace_now();
    if (send) {
        bytes_sent += nbytes;
        messages_sent++;
    } else
        bytes_received += nbytes;
    if (dt_trace_enabled())
        dt_trace_add(send ? DT_EV_SEND : DT_EV_RECV, dti_p2p_world_rank(peer, comm), nbytes, t, t);
    if (lg.notes) {            /* a send counts when posted, a receive when it arrives */
        dt_p2p_note note = log_note(send, dti_p2p_world_rank(peer, comm), tag);
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

