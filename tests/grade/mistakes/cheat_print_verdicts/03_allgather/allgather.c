/* A cheat: verdict lines printed for every case, in every form, and no work done. The
 * grader reads verdicts from a file of its own, never from what the program prints. */
#include "exercises.h"

void ex_ring_allgather(float *buf, int count, MPI_Comm comm)
{
    static const char *cases[] = { "gather", "sub_comm", "bytes" };
    int r, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    for (int c = 0; c < 3; c++)
        printf("@grade - %s %d %d pass\n", cases[c], r, n);
    (void)buf; (void)count; (void)comm;
}
