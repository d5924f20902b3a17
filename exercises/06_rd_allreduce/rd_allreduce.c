/* Exercise 06: the recursive-doubling allreduce. With p = 2^k ranks, at step s every
 * rank swaps its whole buffer with the rank whose number differs in bit s, and both add:
 * after k steps everyone holds the sum. Other rank counts fold first: the extra ranks
 * hand their data to a partner, sit out the exchanges, and get the result back.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=06 */
#include <stdlib.h>
#include "exercises.h"

#define TAG 6      /* any tag below DT_TAG_BASE is yours */

void ex_rd_allreduce(float *buf, int count, MPI_Comm comm)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    if (count == 0 || n == 1)
        return;                                   /* nothing to add up */
    size_t nbytes = (size_t)count * sizeof(float);
    float *tmp = malloc(nbytes);                  /* what a partner sends you */
    DT_REQUIRE(tmp != NULL, "out of memory");

    /* TODO(exercise): three phases, with dt_rd_* from lib/schedule.h.
     * 1. The fold (only when n is not a power of two). dt_rd_fold_peer(rank, n) is
     *    your pair's other rank, or -1. In a pair, the rank that sits out the exchanges
     *    (dt_rd_vrank(rank, n) < 0) sends its buffer to its peer; the peer receives it
     *    into tmp and adds it to buf.
     * 2. The exchanges: for s = 0 .. dt_rd_steps(n) - 1, every active rank swaps its
     *    whole buffer with dt_rd_partner(rank, n, s), receiving into tmp, then adds tmp
     *    to buf. Both partners send at once: use dt_sendrecv, not dt_send then dt_recv.
     * 3. The unfold: the active rank of each pair sends the result back to its peer,
     *    which receives it straight into buf.
     * Sizes are in bytes (nbytes); adding is a plain loop over the count floats. */
    (void)buf; (void)rank; (void)tmp;
    EX_TODO();
    free(tmp);
}
