/* Planted mistake for exercise 02: the chunks are one off. At step s the rank sends
 * chunk (rank - s) instead of (rank - s - 1), and receives (rank - s - 1) instead of
 * (rank - s - 2): a consistent ring, so nothing hangs and every sum is complete, but
 * rank r ends owning chunk r+1 instead of chunk r. */
#include <stdlib.h>
#include "exercises.h"

enum { TAG = 2 };

void ex_ring_reduce_scatter(float *buf, int count, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);
    size_t lo0, hi0;
    dt_chunk_bounds((size_t)count, n, 0, &lo0, &hi0);
    float *in = malloc((hi0 - lo0 + 1) * sizeof *in);
    DT_REQUIRE(in != NULL, "ex_ring_reduce_scatter: out of memory");

    for (int s = 0; s < n - 1; s++) {
        int sc = (rank - s + n) % n;            /* the mistake: should be rank - s - 1 */
        int rc = (rank - s - 1 + n) % n;        /* and this rank - s - 2 */
        size_t slo, shi, rlo, rhi;
        dt_chunk_bounds((size_t)count, n, sc, &slo, &shi);
        dt_chunk_bounds((size_t)count, n, rc, &rlo, &rhi);
        dt_sendrecv(buf + slo, (shi - slo) * sizeof *buf, right,
                    in, (rhi - rlo) * sizeof *in, left, TAG, comm);
        for (size_t i = rlo; i < rhi; i++)
            buf[i] += in[i - rlo];
    }
    free(in);
}
