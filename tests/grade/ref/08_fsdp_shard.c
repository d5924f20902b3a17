/* Exercise 08, dtlab's own answer: what lib/parallel/fsdp.c does inline for each layer
 * (fsdp_init cuts the shards, layer_acquire gathers them, layer_reduce sums the
 * gradients), with dtlab's allgather and reduce-scatter on the zero-padded array. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "exercises.h"

size_t ex_shard_size(size_t n, int N)
{
    return n / (size_t)N + (n % (size_t)N != 0);      /* ceil(n / N), without overflow */
}

void ex_shard(const float *full, size_t n, float *shard, int rank, int N)
{
    size_t s = ex_shard_size(n, N), start = (size_t)rank * s;
    for (size_t j = 0; j < s; j++)
        shard[j] = start + j < n ? full[start + j] : 0.0f;
}

/* The padded array, N*s floats (at least 1, so that malloc never returns NULL for 0). */
static float *padded(size_t n, int N, size_t *s)
{
    *s = ex_shard_size(n, N);
    DT_REQUIRE(*s <= (size_t)INT_MAX / (size_t)N, "%zu floats over %d ranks: more than "
               "an int can count", n, N);
    float *p = calloc(*s * (size_t)N + 1, sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory (%zu floats)", *s * (size_t)N);
    return p;
}

void ex_unshard(const float *shard, size_t n, float *full, MPI_Comm comm)
{
    int N;
    DT_CHECK_MPI(MPI_Comm_size(comm, &N));
    size_t s;
    float *pad = padded(n, N, &s);
    dt_allgather(shard, (int)s, MPI_FLOAT, pad, (int)s, MPI_FLOAT, comm);
    memcpy(full, pad, n * sizeof *full);
    free(pad);
}

void ex_reduce_scatter_grad(const float *grad, size_t n, float *gshard, MPI_Comm comm)
{
    int N;
    DT_CHECK_MPI(MPI_Comm_size(comm, &N));
    size_t s;
    float *pad = padded(n, N, &s);                     /* zeros past n */
    memcpy(pad, grad, n * sizeof *pad);
    dt_reduce_scatter_block(MPI_IN_PLACE, pad, (int)s, MPI_FLOAT, MPI_SUM, comm);
    memcpy(gshard, pad, s * sizeof *gshard);           /* block rank, now at the front */
    free(pad);
}
