/* Exercise 14, dtlab's own answer. The schedule is the round robin of a tournament
 * (the 1-factorization of the complete graph): for odd N, r and (k - r) mod N meet at
 * step k; for even N the last rank takes the one left over on the circle of N - 1.
 * The exchange is dt_sendrecv's, one partner a step, as lib/collectives/alltoall.c
 * does with its shifted schedule. */
#include <string.h>
#include "exercises.h"

enum { TAG = 14 };

int ex_a2a_steps(int N)
{
    return N - 1 + N % 2;
}

int ex_a2a_partner(int r, int N, int k)
{
    int m = N - 1 + N % 2;                  /* the circle: every rank, or all but N-1 */
    if (r == m) {                           /* N-1 of even N: the one left over */
        for (int q = 0; q < m; q++)
            if ((2 * q) % m == k % m)
                return q;
    }
    int p = (k + m - r % m) % m;
    return p == r && m < N ? N - 1 : p;
}

int ex_a2a_displs(const int *counts, int n, int *displs)
{
    int at = 0;
    for (int j = 0; j < n; at += counts[j], j++)
        displs[j] = at;
    return at;
}

size_t ex_alltoallv(const float *send, const int *scounts, const int *sdispls, float *recv,
                    const int *rcounts, const int *rdispls, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    size_t nbytes = 0;
    memcpy(recv + rdispls[rank], send + sdispls[rank],
           (size_t)rcounts[rank] * sizeof *recv);
    for (int k = 0; k < ex_a2a_steps(n); k++) {
        int p = ex_a2a_partner(rank, n, k);
        if (p != rank) {
            dt_sendrecv(send + sdispls[p], (size_t)scounts[p] * sizeof *send, p,
                        recv + rdispls[p], (size_t)rcounts[p] * sizeof *recv, p,
                        TAG, comm);
            nbytes += (size_t)scounts[p] * sizeof *send;
        }
    }
    return nbytes;
}
