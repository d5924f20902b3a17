/* Allgather: every rank contributes a block, and every rank ends with all of them, in
 * rank order (MPI_Allgather). The ring version is also the second half of the ring
 * allreduce (allreduce.c), which is why its core works in place on a whole buffer. */
#include "collectives.h"
#include "buf.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"

#define TAG (DT_TAG_BASE + 6)

/* ==== ring ====
 *
 * The ranks stand in a ring; each sends only to its right neighbour and receives only
 * from its left one. The buffer is cut into n chunks (dt_chunk_bounds); rank r starts
 * with chunk r and, at each step, passes on the chunk it received at the step before:
 *
 *        +--> 0 --> 1 --> 2 --+          3 ranks, chunks a b c
 *        |                    |
 *        +--------------------+
 *
 *     step   rank 0            rank 1            rank 2
 *      -     holds a           holds b           holds c
 *      0     send a, recv c    send b, recv a    send c, recv b
 *      1     send c, recv b    send a, recv c    send b, recv a
 *      -     holds a b c       holds a b c       holds a b c
 *
 * At step s rank r sends chunk (r-s) mod n and receives chunk (r-s-1) mod n
 * (dt_ring_ag_send_chunk, dt_ring_ag_recv_chunk).
 *
 * Invariant: after step s, rank r holds chunks r, r-1, ..., r-s-1 (mod n).
 *
 * Cost, S bytes in the whole buffer: n-1 steps; each rank sends and receives
 * (n-1)/n * S, the least any allgather can, and every link of the ring is busy at every
 * step, so the time barely grows with n for large S. */
void dti_ring_allgather(void *buf, int count, MPI_Datatype type, MPI_Comm comm,
                        const char *coll)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    size_t esize = dt_type_size(type);
    char *b = buf;
    int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);

    /* Device data moves in segments of dt_p2p_segment bytes, each a message that fits
     * a mailbox slot (CUDA IPC between ranks sharing a GPU; a whole chunk larger than
     * the outbox would go the slow way, staged through the host). Host data moves a
     * whole chunk per message: MPI's large-message path reads it straight from the
     * sender's memory, one copy, where a mailbox makes two. Every rank cuts every
     * chunk like chunk 0, the largest, as the reduce-scatter does. */
    size_t lo0, hi0;
    dt_chunk_bounds((size_t)count, n, 0, &lo0, &hi0);
    size_t seg = hi0 - lo0;
    if (dt_is_device_ptr(buf) && dt_p2p_segment(1) / esize < seg)
        seg = dt_p2p_segment(1) / esize;
    size_t nseg = seg ? (hi0 - lo0 + seg - 1) / seg : 1;

    for (int s = 0; s < n - 1; s++) {
        int sc = dt_ring_ag_send_chunk(rank, n, s), rc = dt_ring_ag_recv_chunk(rank, n, s);
        size_t slo, shi, rlo, rhi;
        dt_chunk_bounds((size_t)count, n, sc, &slo, &shi);
        dt_chunk_bounds((size_t)count, n, rc, &rlo, &rhi);
        dt_trace_phase(coll, "allgather");
        for (size_t k = 0; k < nseg; k++) {
            /* segment k of each chunk, clipped to it; with count < n some chunks are
             * empty: both sides then agree on 0 bytes */
            size_t sa = slo + k * seg, sz = sa + seg, ra = rlo + k * seg, rz = ra + seg;
            sa = sa < shi ? sa : shi; sz = sz < shi ? sz : shi;
            ra = ra < rhi ? ra : rhi; rz = rz < rhi ? rz : rhi;
            dt_trace_step(s, sc, sa, sz, rc, ra, rz);
            dt_sendrecv(b + sa * esize, (sz - sa) * esize, right,
                        b + ra * esize, (rz - ra) * esize, left, TAG, comm);
        }
        dti_step_done(coll, "allgather", s, buf, count, type, comm);
    }
}

/* recvbuf holds n blocks of recvcount; chunk r of it under dt_chunk_bounds is exactly
 * block r, so the ring runs on recvbuf once each rank's block is in its place. */
int dt_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    int in_place = sendbuf == MPI_IN_PLACE;
    size_t blk = dti_check_blocks("dt_allgather", sendbuf, sendcount, sendtype,
                                  recvbuf, recvcount, recvtype, n);
    if (recvcount == 0)
        return MPI_SUCCESS;
    dt_trace_call("allgather_ring", (size_t)n * recvcount, dt_type_size(recvtype));

    if (!in_place)
        dt_memcpy((char *)recvbuf + (size_t)rank * blk, sendbuf, blk);
    dti_ring_allgather(recvbuf, n * recvcount, recvtype, comm, "allgather_ring");
    return MPI_SUCCESS;
}
