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
    if (found_inf) {                    /* overflow: back off, skip the step */
        s->scale *= s->cfg.backoff;
        s->clean = 0;
        return 0;
    }
    if (++s->clean == s->cfg.window) {  /* a window of clean steps: grow */
        s->scale *= s->cfg.growth;
        s->clean = 0;
    }
    return 1;
}

int ex_scaler_step(dt_scaler *s, float *grads, size_t n, MPI_Comm comm)
{
    /* Did this rank's backward overflow? An inf or a NaN anywhere in its gradients. */
    int found = 0;
    for (size_t i = 0; i < n && !found; i++)
        found = !isfinite(grads[i]);

    /* the step is skipped on every rank if any rank overflowed */
    dt_allreduce(MPI_IN_PLACE, &found, 1, MPI_INT, MPI_MAX, comm);
    float scale = s->scale;             /* the scale the gradients were made with */
    int apply = ex_scaler_update(s, found);
    if (apply)
        for (size_t i = 0; i < n; i++)
            grads[i] /= scale;
    return apply;
}
