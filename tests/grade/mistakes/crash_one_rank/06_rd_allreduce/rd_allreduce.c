/* Planted mistake for exercise 06: a debugging line left behind in the fold writes
 * through a null pointer. Only the rank that receives in the fold runs it: rank 1, at
 * 3 and 5 ranks. Rank 1 dies of signal 11 (a segmentation fault) while the others wait
 * for it; the grader must name the rank and the signal at once, not wait for its time
 * limit. (The pointer is volatile so that the compiler really stores through it.) */
#include <stdlib.h>
#include "exercises.h"

#define TAG 6

static float *volatile last_fold;      /* meant to be set to tmp; never is: NULL */

static void add(float *buf, const float *x, int count)
{
    for (int i = 0; i < count; i++)
        buf[i] += x[i];
}

void ex_rd_allreduce(float *buf, int count, MPI_Comm comm)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    if (count == 0 || n == 1)
        return;
    size_t nbytes = (size_t)count * sizeof(float);
    float *tmp = malloc(nbytes);
    DT_REQUIRE(tmp != NULL, "out of memory");
    int peer = dt_rd_fold_peer(rank, n), active = dt_rd_vrank(rank, n) >= 0;

    if (peer >= 0 && !active) {
        dt_send(buf, nbytes, peer, TAG, comm);
    } else if (peer >= 0) {
        dt_recv(tmp, nbytes, peer, TAG, comm);
        last_fold[0] = tmp[0];                 /* the mistake: last_fold is NULL */
        add(buf, tmp, count);
    }
    for (int s = 0; active && s < dt_rd_steps(n); s++) {
        int partner = dt_rd_partner(rank, n, s);
        dt_sendrecv(buf, nbytes, partner, tmp, nbytes, partner, TAG, comm);
        add(buf, tmp, count);
    }
    if (peer >= 0 && active)
        dt_send(buf, nbytes, peer, TAG, comm);
    else if (peer >= 0)
        dt_recv(buf, nbytes, peer, TAG, comm);
    free(tmp);
}
