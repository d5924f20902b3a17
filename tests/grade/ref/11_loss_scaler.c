/* Exercise 11, dtlab's own answer: dt_scaler_update (lib/parallel/mixed.c), and the
 * step as the library's modes take it (dti_scaler_decide): agree, update, unscale. */
#include <math.h>
#include "exercises.h"

int ex_scaler_update(dt_scaler *s, int found_inf)
{
    return dt_scaler_update(s, found_inf);
}

int ex_scaler_step(dt_scaler *s, float *grads, size_t n, MPI_Comm comm)
{
    int found = 0;
    for (size_t i = 0; i < n && !found; i++)
        found = !isfinite(grads[i]);
    /* any rank's overflow skips the step on every rank */
    dt_allreduce(MPI_IN_PLACE, &found, 1, MPI_INT, MPI_MAX, comm);
    float scale = s->scale;         /* the grads were made with this one */
    if (!dt_scaler_update(s, found))
        return 0;
    for (size_t i = 0; i < n; i++)
        grads[i] /= scale;
    return 1;
}
