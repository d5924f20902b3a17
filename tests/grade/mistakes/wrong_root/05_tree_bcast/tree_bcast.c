/* Planted mistake for exercise 05: the tree is built on the real ranks, so it always
 * hangs from rank 0. Right when the root is 0; for any other root every rank ends with
 * rank 0's data instead of the root's. The fix: v = (rank - root + n) % n, and real
 * rank = (v + root) % n. */
#include "exercises.h"

#define TAG 5

void ex_tree_bcast(float *buf, int count, int root, MPI_Comm comm)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    size_t nbytes = (size_t)count * sizeof(float);
    (void)root;

    int v = rank;                               /* the mistake: not shifted by root */
    int low = v ? v & -v : 1;
    while (v == 0 && low < n)
        low <<= 1;                              /* the root: every power of two < n */
    if (v != 0)
        dt_recv(buf, nbytes, v & (v - 1), TAG, comm);
    for (int m = low >> 1; m > 0; m >>= 1)
        if (v + m < n)
            dt_send(buf, nbytes, v + m, TAG, comm);
}
