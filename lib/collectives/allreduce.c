/* Allreduce: every rank ends with the element-wise reduction (sum, max, min, prod) of
 * everyone's buffer (MPI_Allreduce). It is the collective of data-parallel training:
 * after the backward pass, each rank's gradients are summed over all ranks.
 *
 * Three algorithms, one lesson: the naive parameter server moves the least data per
 * worker but funnels everything through one rank; recursive doubling takes the fewest
 * steps; the ring sends the fewest bytes per rank for large buffers. dt_allreduce picks
 * between the last two by size, as MPI libraries do. */
#include <stdlib.h>
#include <string.h>
#include "collectives.h"
#include "buf.h"
#include "internal.h"
#include "ops.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"

#define TAG_NAIVE (DT_TAG_BASE + 8)
#define TAG_RD    (DT_TAG_BASE + 9)
/* the ring uses the tags of reduce_scatter.c and allgather.c */

/* Checks the arguments every allreduce takes. */
static void check_args(const char *fn, const void *sendbuf, void *recvbuf, int count,
                       MPI_Datatype type, MPI_Op op)
{
    DT_REQUIRE(count >= 0, "%s: count is %d; it must be 0 or more", fn, count);
    (void)dt_op_of(op);        /* these two abort with a message for an op or type */
    (void)dt_type_size(type);  /* dtlab does not know */
    DT_REQUIRE(recvbuf != MPI_IN_PLACE, "%s: MPI_IN_PLACE goes in sendbuf, not recvbuf", fn);
    DT_REQUIRE(sendbuf != NULL || count == 0, "%s: sendbuf is NULL but count is %d", fn, count);
    DT_REQUIRE(recvbuf != NULL || count == 0, "%s: recvbuf is NULL but count is %d", fn, count);
}

/* Checks the arguments, copies the input into recvbuf unless in place (naive and rd work
 * on recvbuf), and returns the element size. */
static size_t start(const char *fn, const void *sendbuf, void *recvbuf, int count,
                    MPI_Datatype type, MPI_Op op)
{
    check_args(fn, sendbuf, recvbuf, count, type, op);
    size_t esize = dt_type_size(type);
    if (sendbuf != MPI_IN_PLACE)
        dt_memcpy(recvbuf, sendbuf, (size_t)count * esize);
    return esize;
}

/* ==== choosing ==== */

int dt_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                 MPI_Op op, MPI_Comm comm)
{
    check_args("dt_allreduce", sendbuf, recvbuf, count, type, op);   /* in the user's words */
    const char *algo = getenv("DT_ALLREDUCE_ALGO");
    if (algo != NULL && algo[0] != '\0') {
        if (strcmp(algo, "ring") == 0)
            return dt_allreduce_ring(sendbuf, recvbuf, count, type, op, comm);
        if (strcmp(algo, "naive") == 0)
            return dt_allreduce_naive(sendbuf, recvbuf, count, type, op, comm);
        if (strcmp(algo, "rd") == 0)
            return dt_allreduce_rd(sendbuf, recvbuf, count, type, op, comm);
        DT_REQUIRE(0, "DT_ALLREDUCE_ALGO=%s is not an allreduce algorithm; use ring, "
                   "naive or rd (or unset it to let dtlab choose)", algo);
    }
    /* Every rank must choose the same: the inputs are the same on every rank. Small
     * buffers: few steps matter more than bytes. Fewer elements than ranks: the ring's
     * chunks would be empty, its steps pure latency. */
    int n;
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    DT_REQUIRE(count >= 0, "dt_allreduce: count is %d; it must be 0 or more", count);
    if ((size_t)count * dt_type_size(type) < DT_ALLREDUCE_RD_MAX || count < n)
        return dt_allreduce_rd(sendbuf, recvbuf, count, type, op, comm);
    return dt_allreduce_ring(sendbuf, recvbuf, count, type, op, comm);
}

/* ==== ring: reduce-scatter, then allgather ====
 *
 * 4 ranks, buffer cut into chunks a b c d, x_r the value on rank r.
 *
 *   reduce-scatter (3 steps): partial sums travel round the ring, each rank adding its
 *   share, until rank r holds chunk r summed over everyone:
 *
 *     step   rank 0        rank 1        rank 2        rank 3       (send / recv+add)
 *      0     d / c         a / d         b / a         c / b
 *      1     c / b         d / c         a / d         b / a
 *      2     b / a         c / b         d / c         a / d
 *     then   a=Σa          b=Σb          c=Σc          d=Σd
 *
 *   allgather (3 steps): the finished chunks travel round the ring, copied, not added:
 *
 *     step   rank 0        rank 1        rank 2        rank 3       (send / recv)
 *      0     a / d         b / a         c / b         d / c
 *      1     d / c         a / d         b / a         c / b
 *      2     c / b         d / c         a / d         b / a
 *     then   Σa Σb Σc Σd on every rank
 *
 * Invariant: after the reduce-scatter rank r owns chunk r, fully reduced (the chunk the
 * allgather starts from); after the allgather every rank holds every reduced chunk, the
 * same bits on every rank, since each chunk was reduced once and then copied.
 *
 * Cost, S bytes: 2(n-1) steps; each rank sends 2(n-1)/n * S (and receives as much),
 * which tends to 2S however many ranks there are: the bandwidth-optimal allreduce
 * (baidu-allreduce, Horovod, NCCL's ring). Its 2(n-1) steps make it slow for small
 * buffers, where recursive doubling wins. */
int dt_allreduce_ring(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                      MPI_Op op, MPI_Comm comm)
{
    check_args("dt_allreduce_ring", sendbuf, recvbuf, count, type, op);
    if (count == 0)
        return MPI_SUCCESS;
    dt_trace_call("allreduce_ring", (size_t)count, dt_type_size(type));
    /* no copy of sendbuf into recvbuf: the reduce-scatter reads sendbuf and writes recvbuf */
    const void *src = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
    dti_ring_reduce_scatter(src, recvbuf, count, type, op, comm, "allreduce_ring");
    dti_ring_allgather(recvbuf, count, type, comm, "allreduce_ring");
    return MPI_SUCCESS;
}

/* ==== naive: the parameter server ====
 *
 * Rank 0 plays the server: the workers send it their whole buffers one after the
 * other, it reduces them, and sends the result back to each.
 *
 *          1   2   3                  4 ranks:
 *           \  |  /                   reduce  step 0: 1 -> 0   step 1: 2 -> 0   step 2: 3 -> 0
 *            v v v   x1, x2, x3       bcast   step 0: 0 -> 1   step 1: 0 -> 2   step 2: 0 -> 3
 *              0     sum = x0+x1+x2+x3
 *           /  |  \
 *          v   v   v sum
 *          1   2   3
 *
 * Invariant: after reduce step s, rank 0 holds x0 op x1 op ... op x_{s+1}; after bcast
 * step s, ranks 0..s+1 hold the result.
 *
 * Cost, S bytes: each worker sends S and receives S, but rank 0 receives (n-1) * S and
 * sends (n-1) * S, one message after another, in 2(n-1) steps: its link is the
 * bottleneck, and the time grows linearly with n. The ring spreads the same work over
 * every link. */
int dt_allreduce_naive(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    size_t nbytes = start("dt_allreduce_naive", sendbuf, recvbuf, count, type, op) * count;
    if (count == 0)
        return MPI_SUCCESS;
    dt_trace_call("allreduce_naive", (size_t)count, nbytes / (size_t)count);

    /* one worker's data, at rank 0 only; scratch kept by this thread between calls */
    void *tmp = rank == 0 ? dti_scratch(DTI_SCRATCH_PEER, nbytes, recvbuf) : NULL;
    for (int s = 1; s < n; s++) {
        dt_trace_phase("allreduce_naive", "reduce");
        if (rank == 0) {
            dt_trace_step(s - 1, -1, 0, 0, 0, 0, (size_t)count);
            dt_recv(tmp, nbytes, s, TAG_NAIVE, comm);
            dt_reduce_local(tmp, recvbuf, count, type, op);
        } else if (rank == s) {
            dt_trace_step(s - 1, 0, 0, (size_t)count, -1, 0, 0);
            dt_send(recvbuf, nbytes, 0, TAG_NAIVE, comm);
        }
        dti_step_done("allreduce_naive", "reduce", s - 1, recvbuf, count, type, comm);
    }
    for (int s = 1; s < n; s++) {
        dt_trace_phase("allreduce_naive", "bcast");
        if (rank == 0) {
            dt_trace_step(s - 1, 0, 0, (size_t)count, -1, 0, 0);
            dt_send(recvbuf, nbytes, s, TAG_NAIVE, comm);
        } else if (rank == s) {
            dt_trace_step(s - 1, -1, 0, 0, 0, 0, (size_t)count);
            dt_recv(recvbuf, nbytes, 0, TAG_NAIVE, comm);
        }
        dti_step_done("allreduce_naive", "bcast", s - 1, recvbuf, count, type, comm);
    }
    return MPI_SUCCESS;
}

/* ==== recursive doubling ====
 *
 * With p = 2^k ranks: at step s every rank swaps its whole buffer with the rank whose
 * number differs in bit s, and both reduce. 4 ranks:
 *
 *     step 0:  0 <-> 1   2 <-> 3      0,1 hold x0+x1      2,3 hold x2+x3
 *     step 1:  0 <-> 2   1 <-> 3      all hold x0+x1+x2+x3
 *
 * Other rank counts fold first. With n = p + extra ranks (p the largest power of two
 * <= n), the first 2*extra ranks pair up: the even one hands its buffer to the odd one
 * and sits out; the p remaining ranks run the exchange; the odd ones hand the result
 * back. 6 ranks (p = 4, extra = 2; active ranks numbered 0..3 by dt_rd_vrank):
 *
 *     fold:      0 -> 1   2 -> 3                  active: 1 3 4 5
 *     step 0:    1 <-> 3   4 <-> 5                (active 0<->1, 2<->3)
 *     step 1:    1 <-> 4   3 <-> 5                (active 0<->2, 1<->3)
 *     unfold:    1 -> 0   3 -> 2
 *
 * Invariant: after step s, each active rank holds the reduction over its group of 2^(s+1)
 * active ranks (those agreeing with it above bit s), each folded pair counting as one.
 * Both partners of a step combine the same two buffers, and every dtlab op is
 * commutative, so all ranks end with the same result (to the bit for sums and
 * products; max and min may pick +0 or -0 differently when both are present).
 *
 * Cost, S bytes: log2 p steps (+2 when folding); each active rank sends log2(p) * S.
 * More bytes than the ring, far fewer steps: the choice for small buffers, where each
 * step's latency dominates. */
int dt_allreduce_rd(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                    MPI_Op op, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    size_t nbytes = start("dt_allreduce_rd", sendbuf, recvbuf, count, type, op) * count;
    if (count > 0)
        dt_trace_call("allreduce_rd", (size_t)count, nbytes / (size_t)count);
    if (count == 0 || n == 1)
        return MPI_SUCCESS;

    void *tmp = dti_scratch(DTI_SCRATCH_PEER, nbytes, recvbuf);   /* the partner's buffer */
    int active = dt_rd_vrank(rank, n) >= 0;
    int peer = dt_rd_fold_peer(rank, n);              /* -1 outside the folded pairs */
    int folding = dt_pow2_floor(n) != n;

    if (folding) {
        dt_trace_phase("allreduce_rd", "fold");
        if (peer >= 0 && !active) {
            dt_trace_step(0, 0, 0, (size_t)count, -1, 0, 0);
            dt_send(recvbuf, nbytes, peer, TAG_RD, comm);
        } else if (peer >= 0) {
            dt_trace_step(0, -1, 0, 0, 0, 0, (size_t)count);
            dt_recv(tmp, nbytes, peer, TAG_RD, comm);
            dt_reduce_local(tmp, recvbuf, count, type, op);
        }
        dti_step_done("allreduce_rd", "fold", 0, recvbuf, count, type, comm);
    }

    for (int s = 0; s < dt_rd_steps(n); s++) {
        dt_trace_phase("allreduce_rd", "exchange");
        if (active) {
            int partner = dt_rd_partner(rank, n, s);
            dt_trace_step(s, 0, 0, (size_t)count, 0, 0, (size_t)count);
            dt_sendrecv(recvbuf, nbytes, partner, tmp, nbytes, partner, TAG_RD, comm);
            dt_reduce_local(tmp, recvbuf, count, type, op);
        }
        dti_step_done("allreduce_rd", "exchange", s, recvbuf, count, type, comm);
    }

    if (folding) {
        dt_trace_phase("allreduce_rd", "unfold");
        if (peer >= 0 && active) {
            dt_trace_step(0, 0, 0, (size_t)count, -1, 0, 0);
            dt_send(recvbuf, nbytes, peer, TAG_RD, comm);
        } else if (peer >= 0) {
            dt_trace_step(0, -1, 0, 0, 0, 0, (size_t)count);
            dt_recv(recvbuf, nbytes, peer, TAG_RD, comm);
        }
        dti_step_done("allreduce_rd", "unfold", 0, recvbuf, count, type, comm);
    }
    return MPI_SUCCESS;
}
