/* Exercise 02: the ring reduce-scatter, the first half of the ring allreduce. Every rank
 * holds a buffer of count floats; afterwards rank r's chunk r holds the sum of chunk r
 * over all the ranks. Built from dt_sendrecv and exercise 01's arithmetic.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=02 */
#include <stdlib.h>
#include "exercises.h"

enum { TAG = 2 };       /* any tag below DT_TAG_BASE is yours */

void ex_ring_reduce_scatter(float *buf, int count, MPI_Comm comm)
{
    /* the library's ring, in place */
    dti_ring_reduce_scatter(buf, buf, count, MPI_FLOAT, MPI_SUM, comm,
                            "ex_ring_reduce_scatter");
}
