/* The optimizers (see nn.h): SGD with momentum, and Adam.
 *
 * Both are element-wise: parameter i moves by an amount that depends only on its own
 * gradient and its own state. That is what lets ZeRO give each rank a slice of the
 * parameters and the optimizer state for that slice alone: the rank updates its slice
 * exactly as a single process would update the same elements of the whole model.
 *
 *   SGD:   v = mu v + g                     p -= lr v             (mu = 0: plain SGD)
 *   Adam:  m = b1 m + (1 - b1) g            (mean of g, running)
 *          v = b2 v + (1 - b2) g^2          (mean of g^2, running)
 *          mhat = m / (1 - b1^t),  vhat = v / (1 - b2^t)   (m, v start at 0: this undoes
 *                                                           their pull towards 0 early on)
 *          p -= lr mhat / (sqrt(vhat) + eps)
 *
 * State: SGD keeps v (one float per parameter); Adam keeps m and v interleaved,
 * parameter i's at state[2i] and state[2i+1], so that a slice of parameters [a, b)
 * has its state in one piece, [2a, 2b). */
#include <math.h>
#include "buf.h"
#include "nn.h"
#include "nn_cuda.h"
#include "nn_internal.h"

int dt_optim_state_per_param(dt_optim_kind kind)
{
    DT_REQUIRE(kind == DT_SGD || kind == DT_ADAM, "unknown optimizer %d", (int)kind);
    return kind == DT_SGD ? 1 : 2;
}

/* Parameters [i0, i1) of a step; each parameter its own, so lib/nn's threads
 * (nn_internal.h) may take any of them */
struct step_args {
    const dt_optim_config *o;
    float *params;
    const float *grads;
    float *state;
    float bc1, bc2;              /* Adam's bias corrections */
};

DTI_NN_WIDE static void update(void *ctx, size_t i0, size_t i1)
{
    struct step_args *a = ctx;
    float *params = a->params, *state = a->state, lr = a->o->lr;
    const float *grads = a->grads;
    if (a->o->kind == DT_SGD) {
        float mu = a->o->momentum, *v = state;      /* (n) */
        if (v == NULL) {
            for (size_t i = i0; i < i1; i++)
                params[i] -= lr * grads[i];
            return;
        }
        for (size_t i = i0; i < i1; i++) {
            v[i] = mu * v[i] + grads[i];
            params[i] -= lr * v[i];
        }
        return;
    }
    float b1 = a->o->beta1, b2 = a->o->beta2, eps = a->o->eps, bc1 = a->bc1, bc2 = a->bc2;
    for (size_t i = i0; i < i1; i++) {
        float g = grads[i], *m = state + 2 * i, *v = m + 1;   /* (m, v) of parameter i */
        *m = b1 * *m + (1.0f - b1) * g;
        *v = b2 * *v + (1.0f - b2) * g * g;
        float mhat = *m / bc1, vhat = *v / bc2;
        params[i] -= lr * mhat / (sqrtf(vhat) + eps);
    }
}

/* Plain SGD (momentum 0) needs no state: state may then be NULL. The loops are
 * element-wise, so the compiler runs them on vector registers (the Makefile's
 * -fno-math-errno makes sqrtf one instruction, not a call that might set errno; sqrt
 * and division round correctly either way, so the results are the same bit for bit). */
void dt_optim_step(const dt_optim_config *o, int step, float *params, const float *grads,
                   float *state, size_t n)
{
    DT_REQUIRE(o != NULL, "dt_optim_step: optimizer config is NULL");
    dt_optim_state_per_param(o->kind);
    if (o->kind == DT_ADAM)
        DT_REQUIRE(step >= 1 && o->beta1 >= 0 && o->beta1 < 1 && o->beta2 >= 0 &&
                   o->beta2 < 1, "Adam needs step >= 1 and betas in [0, 1): step %d, "
                   "beta1 %g, beta2 %g", step, (double)o->beta1, (double)o->beta2);
    if (n == 0)
        return;
    DT_REQUIRE(params && grads, "dt_optim_step: params and grads must not be NULL");
    DT_REQUIRE(state || (o->kind == DT_SGD && o->momentum == 0.0f),
               "dt_optim_step: state is NULL (only plain SGD, momentum 0, goes without)");
    const void *p[] = { params, grads, state };
    if (dti_nn_on_gpu("dt_optim_step", p, 3)) {
        dti_nn_cuda_optim_step((int)o->kind, o->lr, o->momentum, o->beta1, o->beta2,
                               o->eps, step, params, grads, state, n);
        return;
    }
    struct step_args g = { o, params, grads, state, 0.0f, 0.0f };
    if (o->kind == DT_ADAM) {
        g.bc1 = (float)(1.0 - pow((double)o->beta1, step));
        g.bc2 = (float)(1.0 - pow((double)o->beta2, step));
    }
    dti_nn_parallel(n, 4 * n, update, &g);
}
