/* Exercise 02, dtlab's own answer: the ring in lib/collectives/reduce_scatter.c, in
 * place (src == buf). */
#include "exercises.h"

void ex_ring_reduce_scatter(float *buf, int count, MPI_Comm comm)
{
    dti_ring_reduce_scatter(buf, buf, count, MPI_FLOAT, MPI_SUM, comm,
                            "ex_ring_reduce_scatter");
}
