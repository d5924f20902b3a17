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
    int b = 0;
    size_t fill = 0;                        /* bytes in the open bucket */
    for (int i = nl - 1; i >= 0; i--) {     /* the last layer first */
        size_t nbytes = (off[i + 1] - off[i]) * esize;
        if (fill > 0 && fill + nbytes > cap_bytes) {
            b++;                            /* full: open the next bucket */
            fill = 0;
        }
        fill += nbytes;
        bucket_of[i] = b;
    }
    return b + 1;
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
        if (hi > lo)
            dt_allreduce(MPI_IN_PLACE, grads + lo, (int)(hi - lo), MPI_FLOAT, MPI_SUM,
                         comm);
    }
    for (size_t i = 0; i < off[nl]; i++)    /* the sums into means */
        grads[i] /= (float)n;
}
