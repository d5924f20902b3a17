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

    /* room for one incoming chunk: count / n floats */
    float *in = malloc((size_t)count / n * sizeof *in);
    DT_REQUIRE(in != NULL, "ex_ring_reduce_scatter: out of memory");

    for (int s = 0; s < n - 1; s++) {
        int sc = dt_ring_rs_send_chunk(rank, n, s), rc = dt_ring_rs_recv_chunk(rank, n, s);
        size_t slo, shi, rlo, rhi;
        dt_chunk_bounds((size_t)count, n, sc, &slo, &shi);
        dt_chunk_bounds((size_t)count, n, rc, &rlo, &rhi);
        dt_sendrecv(buf + slo, (shi - slo) * sizeof(float), right,
                    in, (rhi - rlo) * sizeof(float), left, TAG, comm);
        for (size_t i = rlo; i < rhi; i++)
            buf[i] += in[i - rlo];
    }
    free(in);
}
