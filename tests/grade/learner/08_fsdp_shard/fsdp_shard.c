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
    return n / N + (n % N != 0);            /* rounded up */
}

void ex_shard(const float *full, size_t n, float *shard, int rank, int N)
{
    size_t s = ex_shard_size(n, N);
    for (size_t j = 0; j < s; j++) {
        size_t e = (size_t)rank * s + j;    /* its place in the padded array */
        shard[j] = e < n ? full[e] : 0.0f;
    }
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
    dt_allgather(shard, (int)s, MPI_FLOAT, pad, (int)s, MPI_FLOAT, comm);
    memcpy(full, pad, n * sizeof(float));   /* the padding stays behind */
    free(pad);
}

void ex_reduce_scatter_grad(const float *grad, size_t n, float *gshard, MPI_Comm comm)
{
    int N;
    DT_CHECK_MPI(MPI_Comm_size(comm, &N));
    size_t s;
    float *pad = padded_scratch(n, N, &s);
    memcpy(pad, grad, n * sizeof(float));
    dt_reduce_scatter_block(MPI_IN_PLACE, pad, (int)s, MPI_FLOAT, MPI_SUM, comm);
    memcpy(gshard, pad, s * sizeof(float)); /* my block of the sum, at the front */
    free(pad);
}
