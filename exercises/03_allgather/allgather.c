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

    /* TODO(exercise): run the n-1 steps of the ring. At step s:
     *   1. the chunk this rank sends and the one it receives: dt_ring_ag_send_chunk and
     *      dt_ring_ag_recv_chunk; where each lies in buf: dt_chunk_bounds;
     *   2. send one to the right while receiving the other from the left, straight into
     *      its place in buf (sizes in bytes, not elements).
     * Send and receive in ONE call, dt_sendrecv. A dt_send followed by a dt_recv, on
     * every rank, waits forever once a chunk is too large for MPI to buffer. */
    (void)buf; (void)count; (void)left; (void)right;
    EX_TODO();
}
