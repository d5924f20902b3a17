/* Reduce-scatter: the element-wise reduction of everyone's buffer, cut into n blocks,
 * with block r left on rank r (MPI_Reduce_scatter_block). The ring version is also the
 * first half of the ring allreduce (allreduce.c), which is why its core works in place
 * on a whole buffer. */
#include <limits.h>
#include <stdint.h>
#include "collectives.h"
#include "buf.h"
#include "internal.h"
#include "ops.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"

#define TAG (DT_TAG_BASE + 7)

/* ==== ring ====
 *
 * The ranks stand in a ring, sending right and receiving from the left. The buffer is
 * cut into n chunks (dt_chunk_bounds). At each step a rank sends the partial sum it has
 * been building to its right neighbour, and adds its own data to the partial sum that
 * arrives from its left. 3 ranks, chunks a b c, x_r the value on rank r:
 *
 *        +--> 0 --> 1 --> 2 --+
 *        |                    |
 *        +--------------------+
 *
 *     step   rank 0            rank 1            rank 2
 *      0     send c, recv b    send a, recv c    send b, recv a
 *            b = b0+b2         c = c1+c0         a = a2+a1
 *      1     send b, recv a    send c, recv b    send a, recv c
 *            a = a0+a2+a1      b = b1+b0+b2      c = c2+c1+c0
 *
 * At step s rank r sends chunk (r-s-1) mod n and receives chunk (r-s-2) mod n
 * (dt_ring_rs_send_chunk, dt_ring_rs_recv_chunk): the chunk it sends is the one it
 * received, and added to, at the step before.
 *
 * Invariant: after step s, the chunk rank r last received holds the reduction of s+2
 * ranks' data; after the n-1 steps rank r owns chunk r, fully reduced. The other chunks
 * of its buffer hold partial results, to be overwritten (by the allgather of an
 * allreduce) or ignored.
 *
 * Cost, S bytes in the whole buffer: n-1 steps; each rank sends and receives
 * (n-1)/n * S and reduces as many bytes; every link of the ring is busy at every step.
 *
 * Input and output: the rank's own data is read from src and results are written to
 * buf (src == buf works in place). The first send is of pure own data, so it goes from
 * src; every chunk that arrives is combined with src straight into buf. So buf needs no
 * copy of the input first: of the chunks this phase writes, each is written before it is
 * read, and the one it never writes (chunk r-1, sent at step 0) the allgather fills. */
void dti_ring_reduce_scatter(const void *src, void *buf, int count, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm, const char *coll)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    size_t esize = dt_type_size(type);
    if (n == 1 && count > 0)
        dt_memcpy(buf, src, (size_t)count * esize);    /* no-op in place */
    if (n == 1 || count == 0)
        return;
    char *b = buf;
    const char *in = src;
    int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);

    /* Each step moves its chunk in segments of at most dt_p2p_segment bytes: what one
     * mailbox slot of the p2p layer holds, so a segment is one message, and one the
     * next can overlap. On the host (256 KiB) a segment is also added in while it is
     * still in the cache it arrived in (measured on 2 cores, 2 ranks, 64 MiB: 31 ms a
     * call with whole chunks, 18 ms with segments of 256 KiB; 64 KiB to 4 MiB all do
     * about as well). On a GPU (16 MiB) each segment costs a fixed overhead of copies
     * and a kernel launch, so segments are larger. Every rank cuts every chunk into the
     * same nseg segments, those of the largest chunk (chunk 0); a shorter chunk's last
     * segments are empty, and both sides then agree on 0 bytes. (All ranks' buffers are
     * on the host, or all on GPUs, so all agree on the segment too.) */
    size_t lo0, hi0;
    dt_chunk_bounds((size_t)count, n, 0, &lo0, &hi0);
    size_t seg = dt_p2p_segment(dt_is_device_ptr(buf)) / esize;
    if (seg == 0 || seg > hi0 - lo0)
        seg = hi0 - lo0;
    size_t nseg = (hi0 - lo0 + seg - 1) / seg;
    /* One incoming segment, from this thread's scratch (kept between calls), with 16
     * bytes to spare: each segment is received at the same offset within 16 bytes as
     * the spot of buf it is added into, so the three buffers of the reduction line up
     * for the wide loads of the GPU kernel (ops_kernels.cu) even when the chunk starts
     * at an odd element. */
    char *tmp = dti_scratch(DTI_SCRATCH_SEG, seg * esize + 16, buf);

    for (int s = 0; s < n - 1; s++) {
        int sc = dt_ring_rs_send_chunk(rank, n, s), rc = dt_ring_rs_recv_chunk(rank, n, s);
        size_t slo, shi, rlo, rhi;
        dt_chunk_bounds((size_t)count, n, sc, &slo, &shi);
        dt_chunk_bounds((size_t)count, n, rc, &rlo, &rhi);
        const char *from = s == 0 ? in : b;      /* step 0 sends own data */
        dt_trace_phase(coll, "reduce-scatter");
        for (size_t k = 0; k < nseg; k++) {
            /* segment k of each chunk, clipped to the chunk: [a, z) */
            size_t sa = slo + k * seg, sz = sa + seg, ra = rlo + k * seg, rz = ra + seg;
            sa = sa < shi ? sa : shi; sz = sz < shi ? sz : shi;
            ra = ra < rhi ? ra : rhi; rz = rz < rhi ? rz : rhi;
            char *into = tmp + ((uintptr_t)(b + ra * esize) & 15);
            dt_trace_step(s, sc, sa, sz, rc, ra, rz);
            /* b = in op (the segment from the left): through a mailbox, the sum reads
             * the left rank's slot directly; else the segment lands in into first */
            dti_sendrecv_reduce(from + sa * esize, (sz - sa) * esize, right,
                                in + ra * esize, b + ra * esize, (int)(rz - ra), type, op,
                                into, left, TAG, comm);
        }
        dti_step_done(coll, "reduce-scatter", s, buf, count, type, comm);
    }
}

/* The ring runs on a whole buffer of n * recvcount elements, whose chunk r under
 * dt_chunk_bounds is exactly block r: on recvbuf itself when in place, else on a copy
 * of sendbuf (the input must not change). Block r is then moved to the front. */
int dt_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    int in_place = sendbuf == MPI_IN_PLACE;
    DT_REQUIRE(recvbuf != MPI_IN_PLACE, "dt_reduce_scatter_block: MPI_IN_PLACE goes in "
               "sendbuf, not recvbuf");
    DT_REQUIRE(recvcount >= 0, "dt_reduce_scatter_block: recvcount is %d; it must be 0 "
               "or more", recvcount);
    DT_REQUIRE(recvcount <= INT_MAX / n, "dt_reduce_scatter_block: %d ranks times "
               "recvcount %d elements is more than an int can count", n, recvcount);
    (void)dt_op_of(op);        /* aborts with a message for an op dtlab does not know */
    DT_REQUIRE(in_place || sendbuf != NULL || recvcount == 0,
               "dt_reduce_scatter_block: sendbuf is NULL but recvcount is %d", recvcount);
    DT_REQUIRE(recvbuf != NULL || recvcount == 0,
               "dt_reduce_scatter_block: recvbuf is NULL but recvcount is %d", recvcount);
    size_t blk = (size_t)recvcount * dt_type_size(type);
    if (recvcount == 0)
        return MPI_SUCCESS;
    dt_trace_call("reduce_scatter_ring", (size_t)n * recvcount, dt_type_size(type));

    /* results go to scratch (kept by this thread between calls); sendbuf is only read */
    char *work = recvbuf;
    if (!in_place)
        work = dti_scratch(DTI_SCRATCH_WORK, (size_t)n * blk, recvbuf);
    dti_ring_reduce_scatter(in_place ? recvbuf : sendbuf, work, n * recvcount, type, op,
                            comm, "reduce_scatter_ring");
    /* block r sits at r * blk; for r > 0 it does not overlap the front block */
    dt_memcpy(recvbuf, work + (size_t)rank * blk, blk);
    return MPI_SUCCESS;
}
