/* Exercise 14: the all-to-all by pairwise exchange. Rank r's block j goes to rank j,
 * which keeps it as its block r: a transpose of the (rank x block) matrix, the
 * collective of mixture-of-experts layers (tokens to their experts and back). Blocks
 * differ in size, as tokens per expert do: MPI_Alltoallv's counts and displacements.
 * You write the schedule that pairs the ranks off, step by step, then the exchange.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=14 */
#include <string.h>
#include "exercises.h"

enum { TAG = 14 };      /* any tag below DT_TAG_BASE is yours */

int ex_a2a_steps(int N)
{
    /* TODO(exercise): the fewest steps that pair every two of N ranks once: each step
     * holds at most N/2 pairs, and there are N(N-1)/2 of them. */
    (void)N;
    EX_TODO();
}

int ex_a2a_partner(int r, int N, int k)
{
    /* TODO(exercise): the round robin (README.md's picture). For odd N the ranks sit
     * on a circle of m = N: at step k, r and (k - r) mod m are partners, and the one
     * rank that is its own partner sits out (returns r). For even N the circle holds
     * m = N - 1 ranks, and rank N - 1, off the circle, takes the one that would sit
     * out. Mind C's %: (k - r) % m is negative when k < r. */
    (void)r; (void)N; (void)k;
    EX_TODO();
}

int ex_a2a_displs(const int *counts, int n, int *displs)
{
    /* TODO(exercise): where each block starts when they are packed one after another
     * (an exclusive prefix sum), and the total. */
    (void)counts; (void)n; (void)displs;
    EX_TODO();
}

size_t ex_alltoallv(const float *send, const int *scounts, const int *sdispls, float *recv,
                    const int *rcounts, const int *rdispls, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));

    /* TODO(exercise): this rank's own block is a copy, from send + sdispls[rank] to
     * recv + rdispls[rank]. Then, step by step, the block for the partner goes out and
     * the partner's block comes in, at once, in one dt_sendrecv (two ranks that both
     * dt_send first wait for each other forever once a block is large). Sizes are in
     * bytes: a count of floats times sizeof(float). Return the bytes sent to others. */
    (void)send; (void)scounts; (void)sdispls; (void)recv; (void)rcounts; (void)rdispls;
    (void)rank; (void)n;
    EX_TODO();
}
