/* Exercise 07: DDP's gradient buckets. Cut a model's layers into buckets of about
 * cap_bytes, from the last layer backwards, then make every rank's gradients the mean
 * over the ranks with one allreduce per bucket, bucket 0 first.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=07 */
#include <stdint.h>
#include "exercises.h"

int ex_ddp_buckets(const size_t *off, int nl, size_t esize, size_t cap_bytes,
                   int *bucket_of)
{
    /* TODO(exercise): walk the layers from the LAST (nl - 1) down to 0, keeping the
     * number of the open bucket and the bytes in it. Layer i takes
     * (off[i+1] - off[i]) * esize bytes. Before adding a layer, close the open bucket
     * (start the next number, with 0 bytes) if the bucket is not empty and the layer
     * would take it past cap_bytes. Write bucket_of[i]; return the number of buckets. */
    (void)off; (void)nl; (void)esize; (void)cap_bytes; (void)bucket_of;
    EX_TODO();
}

/* Bucket b is grads[*lo, *hi): its layers are consecutive, so it runs from the start of
 * its first layer to the end of its last. Empty when no layer is in bucket b. */
static void bucket_bounds(const size_t *off, int nl, const int *bucket_of, int b,
                          size_t *lo, size_t *hi)
{
    *lo = SIZE_MAX;
    *hi = 0;
    for (int i = 0; i < nl; i++) {
        if (bucket_of[i] == b) {
            *lo = off[i] < *lo ? off[i] : *lo;
            *hi = off[i + 1] > *hi ? off[i + 1] : *hi;
        }
    }
    if (*hi < *lo)
        *lo = *hi;
}

void ex_ddp_sync(float *grads, const size_t *off, int nl, const int *bucket_of, int nb,
                 MPI_Comm comm)
{
    int n;                                  /* ranks */
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    for (int b = 0; b < nb; b++) {
        size_t lo, hi;
        bucket_bounds(off, nl, bucket_of, b, &lo, &hi);
        /* TODO(exercise): sum grads[lo, hi) over the ranks of comm, in place, with one
         * dt_allreduce (collectives.h; MPI_IN_PLACE as sendbuf, MPI_FLOAT, MPI_SUM).
         * Every rank goes through the buckets in the same order, 0 first. */
        (void)grads; (void)lo; (void)hi;
        EX_TODO();
    }
    /* TODO(exercise): the allreduces summed; data parallelism wants the MEAN. Turn
     * every one of the off[nl] sums into the mean over the n ranks. */
    (void)n;
    EX_TODO();
}
