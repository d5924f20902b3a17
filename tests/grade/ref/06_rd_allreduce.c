/* Exercise 06, dtlab's own answer: dt_allreduce_rd in lib/collectives/allreduce.c. */
#include "exercises.h"

void ex_rd_allreduce(float *buf, int count, MPI_Comm comm)
{
    dt_allreduce_rd(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, comm);
}
