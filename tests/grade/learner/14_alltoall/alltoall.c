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
    return N % 2 ? N : N - 1;
}

int ex_a2a_partner(int r, int N, int k)
{
    int m = N % 2 ? N : N - 1;              /* the ranks on the circle */
    if (r == m)                             /* even N: rank N-1, off the circle, */
        return k * ((m + 1) / 2) % m;       /* meets the r with 2r = k (mod m) */
    int p = ((k - r) % m + m) % m;
    if (p == r && m < N)                    /* the one that would sit out */
        return N - 1;
    return p;
}

int ex_a2a_displs(const int *counts, int n, int *displs)
{
    int total = 0;
    for (int j = 0; j < n; j++) {
        displs[j] = total;
        total += counts[j];
    }
    return total;
}

size_t ex_alltoallv(const float *send, const int *scounts, const int *sdispls, float *recv,
                    const int *rcounts, const int *rdispls, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));

    memcpy(recv + rdispls[rank], send + sdispls[rank],   /* its own block: a copy */
           (size_t)rcounts[rank] * sizeof *recv);
    size_t nbytes = 0;
    for (int k = 0; k < ex_a2a_steps(n); k++) {
        int p = ex_a2a_partner(rank, n, k);
        if (p == rank)
            continue;                       /* this rank sits out this step */
        size_t snb = (size_t)scounts[p] * sizeof *send;
        size_t rnb = (size_t)rcounts[p] * sizeof *recv;
        dt_sendrecv(send + sdispls[p], snb, p, recv + rdispls[p], rnb, p, TAG, comm);
        nbytes += snb;
    }
    return nbytes;
}
