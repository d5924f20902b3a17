/* p2p's lower half, waiting (see p2p.h and mailbox.h): polite waits and their time
 * limits, the barrier, the time spent waiting, and the world rank of a peer that names
 * the rank waited for. Below p2p.c and the transports (mailbox.c), which wait through
 * it; it calls neither. */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "p2p.h"
#include "core.h"
#include "errors.h"
#include "internal.h"
#include "mailbox.h"
#include "trace.h"

#define MAX_REQS 64

/* ==== the time spent waiting (dt_wait_seconds) ==== */

static _Atomic unsigned long long wait_ns;    /* atomic doubles would need libatomic */
double dt_wait_seconds(void) { return (double)wait_ns * 1e-9; }
void dti_p2p_waited(double seconds) { wait_ns += (unsigned long long)(seconds * 1e9); }
void dti_p2p_wait_reset(void) { wait_ns = 0; }

/* ==== failures ==== */

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
    char what[360], where[96], ctx[160], whom[32] = "a rank", limit[128];
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
    size_t k = strlen(what);
    int other = src >= 0 ? src : dst;
    if ((src >= 0 && src == dti_me.rank) || (dst >= 0 && dst == dti_me.rank))
        snprintf(what + k, sizeof what - k, ", which is this rank itself: a rank that "
                 "sends to itself or receives from itself waits for its own other half, "
                 "which it never reaches");
    else if (other >= 0 && dti_watch_has_sent_to_self(other))
        snprintf(what + k, sizeof what - k, " (rank %d has sent a message to itself: one "
                 "meant for this rank?)", other);
    else if (other >= 0 && dti_watch_has_sent_to_self(dti_me.rank))
        snprintf(what + k, sizeof what - k, " (this rank has sent a message to itself: "
                 "one meant for rank %d?)", other);
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
    if (now < stop + GRACE && whom >= 0 && whom != dti_me.rank &&
        dti_watch_is_waiting(whom))
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

/* Waits for n requests, politely or not (dt_polite()); a failed one explained */
static void wait_all(int n, MPI_Request *reqs)
{
    MPI_Status small[MAX_REQS], *st = n <= MAX_REQS ? small : malloc(sizeof *st * (size_t)n);
    DT_REQUIRE(st != NULL, "out of memory");
    int err, done = 0;
    if (!dt_polite())
        err = MPI_Waitall(n, reqs, st);
    else if ((err = MPI_Testall(n, reqs, &done, st)) == MPI_SUCCESS && !done)
        err = wait_politely(n, reqs, st);
    if (err != MPI_SUCCESS)
        explain_failure(err, n, st);
    if (st != small)
        free(st);
}

void dti_p2p_wait(int n, MPI_Request *reqs)
{
    double t0 = dti_now();
    wait_all(n, reqs);
    dti_p2p_waited(dti_now() - t0);
}

void dt_barrier(MPI_Comm comm)
{
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ibarrier(comm, &req));
    dti_p2p_wait(1, &req);
}

/* ==== MPI's own collectives, waited for politely (p2p.h), not counted as waiting ====
 * Measured at 5 ranks on 2 cores: a blocking MPI_Allreduce of one double took 11 ms, the
 * same call begun with MPI_Iallreduce and waited for politely 0.04 ms. */

void dti_mpi_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm)
{
    MPI_Request req;
    DT_CHECK_MPI(MPI_Iallreduce(sbuf, rbuf, count, type, op, comm, &req));
    wait_all(1, &req);
}

void dti_mpi_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ibcast(buf, count, type, root, comm, &req));
    wait_all(1, &req);
}

void dti_mpi_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                    int root, MPI_Comm comm)
{
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ireduce(sbuf, rbuf, count, type, op, root, comm, &req));
    wait_all(1, &req);
}

void dti_mpi_gather(const void *sbuf, int count, MPI_Datatype type, void *rbuf, int root,
                    MPI_Comm comm)
{
    MPI_Request req;
    DT_CHECK_MPI(MPI_Igather(sbuf, count, type, rbuf, count, type, root, comm, &req));
    wait_all(1, &req);
}

void dti_comm_dup(MPI_Comm comm, MPI_Comm *copy)
{
    MPI_Request req;
    DT_CHECK_MPI(MPI_Comm_idup(comm, copy, &req));
    wait_all(1, &req);
}

/* Traces name peers by their rank in MPI_COMM_WORLD, whatever communicator carried the
 * message (tensor- and pipeline-parallel groups are sub-communicators). */
int dti_p2p_world_rank(int peer, MPI_Comm comm)
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
