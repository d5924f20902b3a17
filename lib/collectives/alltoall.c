/* All-to-all: rank r's block j goes to rank j, which stores it as its block r
 * (MPI_Alltoall): a transpose of the (rank x block) matrix. Mixture-of-experts layers
 * and some tensor-parallel layouts use it to re-shard data. */
#include "collectives.h"
#include "buf.h"
#include "internal.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"

#define TAG (DT_TAG_BASE + 10)

/* ==== pairwise exchange ====
 *
 * 3 ranks, rank r sending blocks r0 r1 r2 (rj goes to rank j):
 *
 *        sendbuf          recvbuf
 *     0: 00 01 02   -->   00 10 20
 *     1: 10 11 12   -->   01 11 21
 *     2: 20 21 22   -->   02 12 22
 *
 * At step s (1..n-1) rank r sends its block for rank r+s and receives the block of rank
 * r-s (mod n; dt_a2a_send_peer, dt_a2a_recv_peer); step 0 is the copy of its own block.
 *
 *     step   rank 0              rank 1              rank 2
 *      0     keep 00             keep 11             keep 22
 *      1     01 -> 1, 20 <- 2    12 -> 2, 01 <- 0    20 -> 0, 12 <- 1
 *      2     02 -> 2, 10 <- 1    10 -> 0, 21 <- 2    21 -> 1, 02 <- 0
 *
 * Every step pairs each rank with one sender and one receiver, so no rank is swamped.
 *
 * Invariant: after step s, rank r holds the blocks of ranks r, r-1, ..., r-s (mod n).
 *
 * Cost, blocks of S bytes: n-1 steps; each rank sends and receives (n-1) * S, all of
 * it needed: all-to-all cannot be made cheaper in bytes, only in steps.
 *
 * In place, the blocks to send are overwritten by the ones received (rank 0 above
 * receives 20 into the slot of 02 before sending 02), so the input is copied first. */
int dt_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    int in_place = sendbuf == MPI_IN_PLACE;
    size_t blk = dti_check_blocks("dt_alltoall", sendbuf, sendcount, sendtype,
                                  recvbuf, recvcount, recvtype, n);
    if (recvcount == 0)
        return MPI_SUCCESS;
    dt_trace_call("alltoall_pairwise", (size_t)n * recvcount, dt_type_size(recvtype));

    char *r = recvbuf;
    const char *s = sendbuf;
    if (in_place) {                  /* the copy goes to scratch, kept between calls */
        char *copy = dti_scratch(DTI_SCRATCH_TREE, (size_t)n * blk, recvbuf);
        dt_memcpy(copy, recvbuf, (size_t)n * blk);
        s = copy;
    }

    if (!in_place)                                 /* step 0: keep my own block */
        dt_memcpy(r + (size_t)rank * blk, s + (size_t)rank * blk, blk);

    for (int step = 1; step < n; step++) {
        int dst = dt_a2a_send_peer(rank, n, step), src = dt_a2a_recv_peer(rank, n, step);
        dt_trace_phase("alltoall_pairwise", "exchange");
        dt_trace_step(step, dst, (size_t)dst * recvcount, (size_t)(dst + 1) * recvcount,
                      src, (size_t)src * recvcount, (size_t)(src + 1) * recvcount);
        dt_sendrecv(s + (size_t)dst * blk, blk, dst, r + (size_t)src * blk, blk, src,
                    TAG, comm);
        dti_step_done("alltoall_pairwise", "exchange", step, recvbuf, n * recvcount,
                      recvtype, comm);
    }
    return MPI_SUCCESS;
}
