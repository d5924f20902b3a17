/* Exercise 01, dtlab's own answer: lib/schedule.c. */
#include "exercises.h"

void ex_chunk_bounds(size_t count, int n, int i, size_t *lo, size_t *hi)
{
    dt_chunk_bounds(count, n, i, lo, hi);
}

int ex_ring_rs_send_chunk(int rank, int n, int step)
{
    return dt_ring_rs_send_chunk(rank, n, step);
}

int ex_ring_rs_recv_chunk(int rank, int n, int step)
{
    return dt_ring_rs_recv_chunk(rank, n, step);
}

int ex_ring_ag_send_chunk(int rank, int n, int step)
{
    return dt_ring_ag_send_chunk(rank, n, step);
}

int ex_ring_ag_recv_chunk(int rank, int n, int step)
{
    return dt_ring_ag_recv_chunk(rank, n, step);
}
