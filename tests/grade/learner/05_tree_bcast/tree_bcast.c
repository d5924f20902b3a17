/* Exercise 05: a binomial-tree broadcast. The root's buffer reaches every rank in
 * ceil(log2 n) rounds, because every rank that has the data passes it on: the number
 * of holders doubles each round. The tree is drawn on virtual ranks, numbered from the
 * root, so that any rank can be the root.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=05 */
#include "exercises.h"

#define TAG 5      /* any tag below DT_TAG_BASE is yours */

void ex_tree_bcast(float *buf, int count, int root, MPI_Comm comm)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    size_t nbytes = (size_t)count * sizeof(float);

    int v = (rank - root + n) % n;          /* virtual rank: the root is 0 */
    int mask = 1;                           /* the root: every power of two below n */
    while (mask < n)
        mask <<= 1;
    if (v != 0) {                           /* from the parent: v without its lowest bit */
        int low = v & -v;
        dt_recv(buf, nbytes, (v - low + root) % n, TAG, comm);
        mask = low;
    }
    /* the children v + m, for the powers of two m below mask, the largest first */
    for (int m = mask >> 1; m > 0; m >>= 1)
        if (v + m < n)
            dt_send(buf, nbytes, (v + m + root) % n, TAG, comm);
}
