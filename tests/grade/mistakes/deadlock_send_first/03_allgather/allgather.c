/* Planted mistake for exercise 03: every rank sends to the right, then receives from the
 * left, in two calls. Small chunks pass (MPI buffers them: the send returns at once),
 * but once a chunk is past MPI's eager limit a send waits for its receive, which every
 * rank only posts after its own send: all wait forever. The fix: one dt_sendrecv. */
#include "exercises.h"

enum { TAG = 3 };

void ex_ring_allgather(float *buf, int count, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);

    for (int s = 0; s < n - 1; s++) {
        size_t slo, shi, rlo, rhi;
        dt_chunk_bounds((size_t)count, n, dt_ring_ag_send_chunk(rank, n, s), &slo, &shi);
        dt_chunk_bounds((size_t)count, n, dt_ring_ag_recv_chunk(rank, n, s), &rlo, &rhi);
        /* the mistake: a send, then a receive, on every rank */
        dt_send(buf + slo, (shi - slo) * sizeof *buf, right, TAG, comm);
        dt_recv(buf + rlo, (rhi - rlo) * sizeof *buf, left, TAG, comm);
    }
}
