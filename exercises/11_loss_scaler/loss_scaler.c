/* Exercise 11: the dynamic loss scaler of mixed-precision training. fp16 gradients
 * that are too small flush to zero, so the loss is multiplied by a scale before
 * backward; the optimizer divides it out again. Too large a scale overflows to inf: the
 * step is skipped and the scale backed off. You write the scaler's rule, then the end of
 * a step on one rank of many, where every rank must take the same decision.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=11 */
#include <math.h>
#include "exercises.h"

int ex_scaler_update(dt_scaler *s, int found_inf)
{
    /* TODO(exercise): s->cfg holds backoff, growth and window; s->scale and s->clean
     * are the state (clean: clean steps in a row since the scale last changed).
     *   overflow: scale *= backoff, clean back to 0, return 0 (skip the step);
     *   clean:    one more clean step; after cfg.window of them in a row,
     *             scale *= growth and clean back to 0; return 1 (apply the step). */
    (void)s; (void)found_inf;
    EX_TODO();
}

int ex_scaler_step(dt_scaler *s, float *grads, size_t n, MPI_Comm comm)
{
    /* Did this rank's backward overflow? An inf or a NaN anywhere in its gradients. */
    int found = 0;
    for (size_t i = 0; i < n && !found; i++)
        found = !isfinite(grads[i]);

    /* TODO(exercise):
     *   1. Agree with the other ranks: the step is skipped everywhere if ANY rank found
     *      an overflow. One int, one dt_allreduce (collectives.h) with MPI_MAX.
     *   2. Note the scale the gradients were made with, then update the scaler with
     *      ex_scaler_update (every rank with the same flag, so they stay equal).
     *   3. Skipped: return 0 and leave grads alone. Applied: divide every gradient by
     *      the scale noted in 2 (not the updated one) and return 1. */
    (void)s; (void)grads; (void)comm;
    EX_TODO();
}
