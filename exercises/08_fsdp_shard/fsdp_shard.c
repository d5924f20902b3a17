/* Exercise 08: FSDP's shards. A flat parameter of n floats is padded with zeros to N*s
 * floats, s = ceil(n / N), and rank k keeps only [k*s, (k+1)*s). Cut it, gather it back
 * whole, and sum the gradients so that each rank gets only its own shard of the sum.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=08 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "exercises.h"

size_t ex_shard_size(size_t n, int N)
{
    /* TODO(exercise): the fewest floats per rank with which N ranks cover all n:
     * n / N rounded UP (C's / rounds down, which would leave the last n % N floats on
     * no rank). */
    (void)n; (void)N;
    EX_TODO();
}

void ex_shard(const float *full, size_t n, float *shard, int rank, int N)
{
    /* TODO(exercise): shard[j], for j in 0..s-1, is element rank * s + j of the padded
     * array: full[rank * s + j] while that is below n, else 0 (padding). Mind that
     * with n < N a whole shard may be padding. */
    (void)full; (void)n; (void)shard; (void)rank; (void)N;
    EX_TODO();
}

/* A zeroed scratch of N*s floats, the padded parameter (at least 1 float, so that an
 * empty one is not NULL). Free it with free(). */
static float *padded_scratch(size_t n, int N, size_t *s)
{
    *s = ex_shard_size(n, N);
    DT_REQUIRE(*s <= (size_t)INT_MAX / (size_t)N, "%zu floats over %d ranks: more than "
               "the collectives' int counts can reach", n, N);
    float *p = calloc(*s * (size_t)N + 1, sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory (%zu floats)", *s * (size_t)N);
    return p;
}

void ex_unshard(const float *shard, size_t n, float *full, MPI_Comm comm)
{
    int N;                                  /* ranks */
    DT_CHECK_MPI(MPI_Comm_size(comm, &N));
    size_t s;
    float *pad = padded_scratch(n, N, &s);
    /* TODO(exercise): gather every rank's s floats into pad, in rank order, with
     * dt_allgather (collectives.h); then copy the first n floats into full. full holds
     * n floats only: the padding stays behind. */
    (void)shard; (void)full;
    EX_TODO();
    free(pad);
}

void ex_reduce_scatter_grad(const float *grad, size_t n, float *gshard, MPI_Comm comm)
{
    int N;
    DT_CHECK_MPI(MPI_Comm_size(comm, &N));
    size_t s;
    float *pad = padded_scratch(n, N, &s);
    /* TODO(exercise): copy the n floats of grad into pad (the rest stays 0), sum pad
     * over the ranks with dt_reduce_scatter_block (MPI_IN_PLACE as sendbuf, recvcount
     * s: this rank's block of the sum is left at the front of pad), and copy that
     * block into gshard. grad is the caller's: do not change it. */
    (void)grad; (void)gshard;
    EX_TODO();
    free(pad);
}
