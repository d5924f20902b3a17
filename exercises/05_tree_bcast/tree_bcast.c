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

    /* TODO(exercise): three steps.
     * 1. Your virtual rank v: the root is 0, the rank after it 1, and so on, wrapping
     *    around at n.
     * 2. Unless v is 0, receive the buffer from your parent: v with its lowest set bit
     *    cleared (v & (v - 1)), turned back into a real rank.
     * 3. Send the buffer to your children v + m, for m = the powers of two below v's
     *    lowest set bit (the root: all powers of two below n), largest m first, only
     *    those with v + m < n. Again, turn v + m back into a real rank.
     * dt_recv and dt_send (lib/p2p.h) take sizes in bytes: nbytes. */
    (void)buf; (void)root; (void)rank; (void)n; (void)nbytes;
    EX_TODO();
}
