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
    int low;                                 /* v's lowest set bit */
    if (v == 0) {
        low = 1;
        while (low < n)
            low *= 2;
    } else {
        low = v & -v;
        int parent = ((v & (v - 1)) + root) % n;
        dt_recv(buf, nbytes, parent, TAG, comm);
    }
    /* children v + m for the powers of two m below the lowest set bit */
    for (int m = 1; m < low; m *= 2)
        if (v + m < n)
            dt_send(buf, nbytes, (v + m + root) % n, TAG, comm);
}
