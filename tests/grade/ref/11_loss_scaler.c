/* Exercise 11, dtlab's own answer: the rule of dt_scaler_update (lib/parallel/mixed.c),
 * and the step as the library's modes take it (dti_scaler_decide): agree, update,
 * unscale. Written out, not called: the exercise's rules forbid the library's scaler,
 * and the planted mistakes (tests/grade/mistakes/) are graded as learners' files. */
#include <math.h>
#include "exercises.h"

int ex_scaler_update(dt_scaler *s, int found_inf)
{
    if (found_inf) {
        s->scale *= s->cfg.backoff;
        s->clean = 0;
        return 0;
    }
    if (++s->clean >= s->cfg.window) {
        s->scale *= s->cfg.growth;
        s->clean = 0;
    }
    return 1;
}

int ex_scaler_step(dt_scaler *s, float *grads, size_t n, MPI_Comm comm)
{
    int found = 0;
    for (size_t i = 0; i < n && !found; i++)
        found = !isfinite(grads[i]);
    /* any rank's overflow skips the step on every rank */
    dt_allreduce(MPI_IN_PLACE, &found, 1, MPI_INT, MPI_MAX, comm);
    float scale = s->scale;         /* the grads were made with this one */
    if (!ex_scaler_update(s, found))
        return 0;
    for (size_t i = 0; i < n; i++)
        grads[i] /= scale;
    return 1;
}
