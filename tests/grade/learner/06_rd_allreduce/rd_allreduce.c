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

    int peer = dt_rd_fold_peer(rank, n);          /* the pair's other rank, or -1 */
    int active = dt_rd_vrank(rank, n) >= 0;       /* takes part in the exchanges */

    /* 1. the fold: the rank that sits out hands its data to its peer */
    if (peer >= 0 && !active) {
        dt_send(buf, nbytes, peer, TAG, comm);
    } else if (peer >= 0) {
        dt_recv(tmp, nbytes, peer, TAG, comm);
        for (int i = 0; i < count; i++)
            buf[i] += tmp[i];
    }
    /* 2. the exchanges: swap whole buffers with the partner, both at once, and add */
    if (active)
        for (int s = 0; s < dt_rd_steps(n); s++) {
            int partner = dt_rd_partner(rank, n, s);
            dt_sendrecv(buf, nbytes, partner, tmp, nbytes, partner, TAG, comm);
            for (int i = 0; i < count; i++)
                buf[i] += tmp[i];
        }
    /* 3. the unfold: the sum back to the rank that sat out */
    if (peer >= 0 && active)
        dt_send(buf, nbytes, peer, TAG, comm);
    else if (peer >= 0)
        dt_recv(buf, nbytes, peer, TAG, comm);
    free(tmp);
}
