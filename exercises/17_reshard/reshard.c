/* Exercise 17: resharding a checkpoint. A checkpoint written by N ranks holds, per old
 * rank, a region of floats and its map: the parameters of the whole model they hold.
 * Resuming on M ranks, each new rank finds which old regions, and which ranges of them,
 * hold the parameters its own map needs, reads them, and rebuilds its buffer.
 * No MPI here: the reads are planned and applied, not sent.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=17 */
#include <stdlib.h>
#include <string.h>
#include "exercises.h"

int ex_span_runs(const ex_span *s, int n, ex_run *out)
{
    /* TODO(exercise): span j holds s[j].count runs of s[j].len parameters, run b
     * beginning at s[j].start + b * s[j].stride. Write them to out in order, leaving
     * out runs of len 0, and merging a run into the one before when it begins where
     * that one ends. Return how many runs you wrote. */
    (void)s; (void)n; (void)out;
    EX_TODO();
}

int ex_reshard_reads(const ex_span *need, int nneed, const ex_span *const *old,
                     const int *nold, int N, ex_read *out)
{
    /* TODO(exercise): walk need's runs in order, dst counting the buffer's elements.
     * For each parameter p, find the lowest old rank k with a run holding it; p is
     * element (the lengths of k's runs before that one) + (p - run start) of k's
     * region. Take as many parameters at once as stay with the same rank (up to the
     * end of your run, of k's run, or where a lower rank's run begins), and merge a
     * read into the one before when it continues it in both the old region and the
     * buffer. Return how many reads you wrote. */
    (void)need; (void)nneed; (void)old; (void)nold; (void)N; (void)out;
    EX_TODO();
}

size_t ex_reshard_nbytes(const ex_read *r, int n)
{
    /* TODO(exercise): the bytes the n reads move; the floats are 4 bytes each. */
    (void)r; (void)n;
    EX_TODO();
}

void ex_reshard_apply(const ex_read *r, int n, const float *const *old, float *buf,
                      size_t nbuf)
{
    /* TODO(exercise): copy each read's len floats from old[rank] + src to buf + dst;
     * every element of buf no read fills (the padding after the map) is 0. buf holds
     * anything on entry. */
    (void)r; (void)n; (void)old; (void)buf; (void)nbuf;
    EX_TODO();
}
