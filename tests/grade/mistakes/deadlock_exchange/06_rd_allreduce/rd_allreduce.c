/* Planted mistake for exercise 06: each exchange is dt_send to the partner, then
 * dt_recv from it. Both partners send first. A small message fits MPI's eager buffer,
 * so the send returns and the sums come out right; a large one waits for its receive,
 * which neither partner ever posts: a deadlock. The fix: dt_sendrecv. */
#include <stdlib.h>
#include "exercises.h"

#define TAG 6

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
        add(buf, tmp, count);
    }
    for (int s = 0; active && s < dt_rd_steps(n); s++) {
        int partner = dt_rd_partner(rank, n, s);
        dt_send(buf, nbytes, partner, TAG, comm);      /* the mistake: both send first */
        dt_recv(tmp, nbytes, partner, TAG, comm);
        add(buf, tmp, count);
    }
    if (peer >= 0 && active)
        dt_send(buf, nbytes, peer, TAG, comm);
    else if (peer >= 0)
        dt_recv(buf, nbytes, peer, TAG, comm);
    free(tmp);
}
