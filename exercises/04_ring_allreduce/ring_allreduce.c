/* Exercise 04: the ring allreduce, from the two halves you wrote in exercises 02 and 03,
 * and the mean over the ranks that data-parallel training takes of its gradients.
 * (The grader links dtlab's own 02 and 03 beside this file, so this exercise is graded
 * on its own.)
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=04 */
#include "exercises.h"

void ex_ring_allreduce(float *buf, int count, MPI_Comm comm)
{
    /* TODO(exercise): the sum over the ranks is a reduce-scatter (rank r ends owning
     * chunk r, summed) followed by an allgather (every rank gets every summed chunk):
     * ex_ring_reduce_scatter, then ex_ring_allgather, on the same buffer. */
    (void)buf; (void)count; (void)comm;
    EX_TODO();
}

void ex_allreduce_mean(float *buf, int count, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));

    /* TODO(exercise): the same two phases, with a division between them. After the
     * reduce-scatter this rank owns chunk `rank` (dt_chunk_bounds), fully summed:
     * divide that chunk, and only that one, by n. The allgather then hands the means
     * round. Each element is divided once, by one rank: n times less work than
     * dividing the whole buffer on every rank. */
    (void)buf; (void)count; (void)rank; (void)n;
    EX_TODO();
}
