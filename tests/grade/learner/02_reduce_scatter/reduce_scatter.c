/* Exercise 02: the ring reduce-scatter, the first half of the ring allreduce. Every rank
 * holds a buffer of count floats; afterwards rank r's chunk r holds the sum of chunk r
 * over all the ranks. Built from dt_sendrecv and exercise 01's arithmetic.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=02 */
#include <stdlib.h>
#include "exercises.h"

enum { TAG = 2 };       /* any tag below DT_TAG_BASE is yours */

void ex_ring_reduce_scatter(float *buf, int count, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);

    /* Room for one incoming chunk. Chunk 0 is the largest (the first chunks get the
     * extra elements); one float more, so that count 0 allocates too. */
    size_t lo0, hi0;
    dt_chunk_bounds((size_t)count, n, 0, &lo0, &hi0);
    float *in = malloc((hi0 - lo0 + 1) * sizeof *in);
    DT_REQUIRE(in != NULL, "ex_ring_reduce_scatter: out of memory");

    /* the n-1 steps of the ring: send a chunk right, add the left's into its place */
    for (int s = 0; s < n - 1; s++) {
        size_t slo, shi, rlo, rhi;
        dt_chunk_bounds((size_t)count, n, dt_ring_rs_send_chunk(rank, n, s), &slo, &shi);
        dt_chunk_bounds((size_t)count, n, dt_ring_rs_recv_chunk(rank, n, s), &rlo, &rhi);
        dt_sendrecv(buf + slo, (shi - slo) * sizeof *buf, right, in, (rhi - rlo) * sizeof *in,
                    left, TAG, comm);
        for (size_t i = rlo; i < rhi; i++)
            buf[i] += in[i - rlo];
    }

    free(in);
}
