/* Exercise 01: the ring's arithmetic. Which elements make up each chunk, and which chunk
 * each rank sends and receives at each step of the ring reduce-scatter and allgather.
 * No MPI here: exercises 02 and 03 move the data these functions describe.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=01 */
#include "exercises.h"

void ex_chunk_bounds(size_t count, int n, int i, size_t *lo, size_t *hi)
{
    /* TODO(exercise): set *lo and *hi so that chunk i is [*lo, *hi). The first
     * count % n chunks get count / n + 1 elements, the others count / n. */
    (void)count; (void)n; (void)i; (void)lo; (void)hi;
    EX_TODO();
}

int ex_ring_rs_send_chunk(int rank, int n, int step)
{
    /* TODO(exercise): at step 0 a rank sends the chunk just before its own (its left
     * neighbour's number); each step after, one further back. Mind the wrap-around. */
    (void)rank; (void)n; (void)step;
    EX_TODO();
}

int ex_ring_rs_recv_chunk(int rank, int n, int step)
{
    /* TODO(exercise): a rank receives what its LEFT neighbour sends at the same step. */
    (void)rank; (void)n; (void)step;
    EX_TODO();
}

int ex_ring_ag_send_chunk(int rank, int n, int step)
{
    /* TODO(exercise): at step 0 a rank sends its own chunk; after that, the chunk it
     * received at the step before. */
    (void)rank; (void)n; (void)step;
    EX_TODO();
}

int ex_ring_ag_recv_chunk(int rank, int n, int step)
{
    /* TODO(exercise): again, what the left neighbour sends at this step. */
    (void)rank; (void)n; (void)step;
    EX_TODO();
}
