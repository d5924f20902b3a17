/* Exercise 04, dtlab's own answer: the sum is lib/collectives/allreduce.c's ring; the
 * mean runs the same two phases and divides between them. */
#include "exercises.h"

void ex_ring_allreduce(float *buf, int count, MPI_Comm comm)
{
    dt_allreduce_ring(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, comm);
}

/* After the reduce-scatter rank r owns chunk r, summed over every rank: dividing that
 * chunk alone divides every element exactly once, and the allgather hands the means
 * to everyone. */
void ex_allreduce_mean(float *buf, int count, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    dti_ring_reduce_scatter(buf, buf, count, MPI_FLOAT, MPI_SUM, comm,
                            "ex_allreduce_mean");
    size_t lo, hi;
    dt_chunk_bounds((size_t)count, n, rank, &lo, &hi);
    for (size_t i = lo; i < hi; i++)
        buf[i] /= (float)n;
    dti_ring_allgather(buf, count, MPI_FLOAT, comm, "ex_allreduce_mean");
}
