/* The arithmetic of mode moe (moe.h), no MPI: the model's shape from a configuration,
 * what can run, the gate's softmax, and the routing of tokens into slots, plain loops
 * on host arrays that tests/unit_moe.c checks alone. moe.c trains with them.
 *
 * One group of T = 6 tokens, E = 3 experts, top-1, capacity factor 1: C = 2 slots per
 * expert. Tokens take slots in token order; the third token for expert 1 is dropped:
 *
 *     token      0  1  2  3  4  5
 *     expert     1  0  1  1  2  0
 *     slot       0  0  1  -  0  1        dropped: 1 (token 3)
 *
 * With top-2, every first choice is placed before any second choice (GShard), so that
 * a full expert drops second choices first. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "errors.h"
#include "moe.h"
#include "parallel_internal.h"

/* ==== the shape ==== */

int dt_moe_experts(const dt_train_config *c, int n)
{
    return c->experts > 0 ? c->experts : 2 * n;
}

int dt_moe_groups(const dt_train_config *c, int n)
{
    return c->moe_groups > 0 ? c->moe_groups : n;
}

int dt_moe_layer(const dt_mlp_config *m) { return m->layers / 2; }

size_t dt_moe_nparams(const dt_train_config *c, int n)
{
    const dt_mlp_config *m = &c->model;
    size_t E = (size_t)dt_moe_experts(c, n), H = (size_t)m->hidden;
    return dt_mlp_nparams(m) - dt_mlp_layer_size(m, dt_moe_layer(m)) + E * H + E +
           E * (H * H + H);
}

int dt_moe_capacity(const dt_train_config *c, int n)
{
    int G = dt_moe_groups(c, n);
    return dti_moe_capacity(c->capacity, c->topk, c->batch / G, dt_moe_experts(c, n));
}

#define WHY(...) do { snprintf(why, len, __VA_ARGS__); return -1; } while (0)

int dti_moe_check(const dt_train_config *c, int n, char *why, size_t len)
{
    int E = dt_moe_experts(c, n), G = dt_moe_groups(c, n), k = c->topk;
    if (c->model.layers < 3)
        WHY("mode moe replaces a hidden -> hidden layer by experts: it needs --layers "
            "3 or more, not %d", c->model.layers);
    if (c->precision != DT_FP32)
        WHY("mode moe trains in fp32 only");
    if (c->checkpoint_dir || c->resume_dir)
        WHY("mode moe cannot be checkpointed yet");
    if (c->accum > 1)
        WHY("--accum is not for mode moe (one batch a step)");
    if (E < 1 || E % n)
        WHY("%d experts cannot be shared evenly by %d ranks: --experts must be a "
            "multiple of %d", E, n, n);
    if (k < 1 || k > 2 || k > E)
        WHY("--topk must be 1 or 2 and at most the experts (%d), not %d", E, k);
    if (!(c->capacity > 0 && isfinite(c->capacity)))
        WHY("the capacity factor must be a positive number");
    if (!(c->aux_loss >= 0 && isfinite(c->aux_loss)))
        WHY("the load-balancing loss weight must be 0 or more");
    if (G < 1 || G % n)
        WHY("%d token groups cannot be shared evenly by %d ranks: --moe-groups must be "
            "a multiple of %d", G, n, n);
    if (c->batch % G)
        WHY("a batch of %d tokens cannot be cut into %d groups of equal size", c->batch,
            G);
    double nd = (double)dt_moe_nparams(c, n) - (double)E * c->model.hidden *
                (c->model.hidden + 1);
    if ((double)G * nd > (1 << 26))
        WHY("%d groups' gradients of %.0f replicated weights each would take %.0f MiB: "
            "too many (at most 256 MiB; fewer groups)", G, nd, G * nd / 262144);
    /* nine slot buffers of G/N groups x E experts x C slots x H floats (moe_init) */
    double slots = 9.0 * G / n * E * dt_moe_capacity(c, n) * c->model.hidden;
    if (slots > (1 << 28))
        WHY("the slots of the all-to-alls would take %.0f MiB per rank: too many (at "
            "most 1 GiB; fewer experts or groups, or a smaller capacity)",
            slots / 262144);
    return 0;
}

/* ==== the slots ==== */

int dti_moe_capacity(double factor, int k, int T, int E)
{
    DT_REQUIRE(factor > 0 && k >= 1 && T >= 1 && E >= 1, "dti_moe_capacity: factor %g, "
               "k %d, T %d, E %d", factor, k, T, E);
    double v = factor * k * T / E;
    v = round(v * 1e6) / 1e6;            /* 1.1f * 80 / 8 = 11.0000002: 11, not 12 */
    double C = ceil(v);
    return C < 1 ? 1 : C > T ? T : (int)C;
}

/* ==== the gate: softmax over the experts ==== */

void dti_moe_softmax(const float *x, float *p, int B, int E)
{
    for (int b = 0; b < B; b++) {
        const float *x_b = x + (size_t)b * E;       /* (E) */
        float *p_b = p + (size_t)b * E;             /* (E) */
        float m = x_b[0], sum = 0.0f;
        for (int e = 1; e < E; e++)
            m = x_b[e] > m ? x_b[e] : m;
        for (int e = 0; e < E; e++) {
            p_b[e] = expf(x_b[e] - m);              /* the largest is exp(0) = 1 */
            sum += p_b[e];
        }
        for (int e = 0; e < E; e++)
            p_b[e] /= sum;
    }
}

void dti_moe_softmax_backward(const float *p, const float *dp, float *dx, int B, int E)
{
    for (int b = 0; b < B; b++) {
        const float *p_b = p + (size_t)b * E, *dp_b = dp + (size_t)b * E;
        float *dx_b = dx + (size_t)b * E;
        float dot = 0.0f;
        for (int e = 0; e < E; e++)
            dot += p_b[e] * dp_b[e];
        for (int e = 0; e < E; e++)
            dx_b[e] = p_b[e] * (dp_b[e] - dot);
    }
}

/* ==== top-k and routing ==== */

void dti_moe_topk(const float *p, int B, int E, int k, int *choice)
{
    DT_REQUIRE(k >= 1 && k <= 2 && k <= E, "dti_moe_topk: top-%d of %d experts", k, E);
    for (int b = 0; b < B; b++) {
        const float *p_b = p + (size_t)b * E;
        int *c_b = choice + (size_t)b * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if ((j == 0 || e != c_b[0]) && (best < 0 || p_b[e] > p_b[best]))
                    best = e;
            c_b[j] = best;
        }
    }
}

int dti_moe_route(const int *choice, int T, int k, int E, int C, int *slot,
                  int *routed, int *kept)
{
    memset(routed, 0, (size_t)E * sizeof *routed);
    memset(kept, 0, (size_t)E * sizeof *kept);
    int dropped = 0;
    for (int j = 0; j < k; j++)                  /* first choices, then second */
        for (int t = 0; t < T; t++) {
            int e = choice[(size_t)t * k + j];
            DT_REQUIRE(e >= 0 && e < E, "dti_moe_route: token %d chose expert %d of %d",
                       t, e, E);
            routed[e]++;
            if (kept[e] < C) {
                slot[(size_t)t * k + j] = kept[e]++;
            } else {
                slot[(size_t)t * k + j] = -1;
                dropped++;
            }
        }
    return dropped;
}
