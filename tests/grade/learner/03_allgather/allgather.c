/* Exercise 03: the ring allgather, the second half of the ring allreduce. Every rank
 * starts with its own chunk of the buffer, chunk r on rank r; afterwards every rank
 * holds every chunk, each at its place. Built from dt_sendrecv and exercise 01's
 * arithmetic.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=03 */
#include "exercises.h"

enum { TAG = 3 };       /* any tag below DT_TAG_BASE is yours */

void ex_ring_allgather(float *buf, int count, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);

    /* the n-1 steps of the ring: pass a chunk right, take the left's into its place */
    for (int s = 0; s < n - 1; s++) {
        size_t slo, shi, rlo, rhi;
        dt_chunk_bounds((size_t)count, n, dt_ring_ag_send_chunk(rank, n, s), &slo, &shi);
        dt_chunk_bounds((size_t)count, n, dt_ring_ag_recv_chunk(rank, n, s), &rlo, &rhi);
        dt_sendrecv(buf + slo, (shi - slo) * sizeof *buf, right, buf + rlo,
                    (rhi - rlo) * sizeof *buf, left, TAG, comm);
    }
}
