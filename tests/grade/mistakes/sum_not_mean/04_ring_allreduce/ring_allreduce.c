/* Planted mistake for exercise 04: ex_allreduce_mean forgets the division and returns
 * the sum. Right at 1 rank, where the two agree; n times too large at n ranks. The fix:
 * between the two phases, divide this rank's own chunk by n. */
#include "exercises.h"

void ex_ring_allreduce(float *buf, int count, MPI_Comm comm)
{
    ex_ring_reduce_scatter(buf, count, comm);
    ex_ring_allgather(buf, count, comm);
}

void ex_allreduce_mean(float *buf, int count, MPI_Comm comm)
{
    ex_ring_reduce_scatter(buf, count, comm);
    /* the mistake: no division of the own chunk by the number of ranks */
    ex_ring_allgather(buf, count, comm);
}
