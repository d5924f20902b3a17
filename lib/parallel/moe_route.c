/* The arithmetic of mode moe (moe.h), no MPI: the model's shape from a configuration,
 * what can run, the gate's softmax, the routing of tokens into slots, and the rest of a
 * step's loops over tokens, plain loops on host arrays that tests/unit_moe.c checks
 * alone. moe.c trains with them. A call whose output is on the GPU goes to the kernel of
 * the same name (moe_kernels.cu), which mirrors the loop here line for line.
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
#include "buf.h"
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

int dt_moe_gpt_layers(const dt_gpt_config *g) { return g->layers / 2; }

int dt_moe_gpt_layer_of(const dt_gpt_config *g, int l)
{
    return l >= 0 && l < g->layers && l % 2 == 1 ? l / 2 : -1;
}

size_t dt_moe_nparams(const dt_train_config *c, int n)
{
    size_t E = (size_t)dt_moe_experts(c, n);
    if (c->kind == DT_MODEL_GPT) {
        const dt_gpt_config *g = &c->gpt;
        size_t C = (size_t)g->embed, mlp = dt_gpt_mlp_size(g, 4 * g->embed);
        return dt_gpt_nparams(g) + dt_moe_gpt_layers(g) * (E * C + E + (E - 1) * mlp);
    }
    const dt_mlp_config *m = &c->model;
    size_t H = (size_t)m->hidden;
    return dt_mlp_nparams(m) - dt_mlp_layer_size(m, dt_moe_layer(m)) + E * H + E +
           E * (H * H + H);
}

int dt_moe_group_tokens(const dt_train_config *c, int n)
{
    int G = dt_moe_groups(c, n);
    return c->batch / G * (c->kind == DT_MODEL_GPT ? c->gpt.seq : 1);
}

int dt_moe_capacity(const dt_train_config *c, int n)
{
    return dti_moe_capacity(c->capacity, c->topk, dt_moe_group_tokens(c, n),
                            dt_moe_experts(c, n));
}

#define WHY(...) do { snprintf(why, len, __VA_ARGS__); return -1; } while (0)

int dti_moe_check(const dt_train_config *c, int n, char *why, size_t len)
{
    int E = dt_moe_experts(c, n), G = dt_moe_groups(c, n), k = c->topk;
    int gpt = c->kind == DT_MODEL_GPT;
    if (!gpt && c->model.layers < 3)
        WHY("mode moe replaces a hidden -> hidden layer by experts: it needs --layers "
            "3 or more, not %d", c->model.layers);
    if (gpt && c->gpt.layers < 2)
        WHY("mode moe puts experts in place of the MLP of every other block (blocks 1, "
            "3, ...): the GPT needs --layers 2 or more, not %d", c->gpt.layers);
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
        WHY("a batch of %d %s cannot be cut into %d groups of equal size", c->batch,
            gpt ? "sequences" : "tokens", G);
    /* the experts' floats, and the width of their input and hidden rows */
    double H = gpt ? c->gpt.embed : c->model.hidden, F = gpt ? 4 * H : H;
    double nl = gpt ? dt_moe_gpt_layers(&c->gpt) : 1;
    double nx = gpt ? 2 * H * F + F + H : H * (H + 1);
    double nd = (double)dt_moe_nparams(c, n) - nl * E * nx;
    if ((double)G * nd > (1 << 26))
        WHY("%d groups' gradients of %.0f replicated weights each would take %.0f MiB: "
            "too many (at most 256 MiB; fewer groups)", G, nd, G * nd / 262144);
    /* eight slot buffers H wide and two F wide (one for the MLP) of G/N groups x E
     * experts x C slots, for each MoE layer (dti_moe_init) */
    double slots = nl * (8 * H + (gpt ? 2 * F : H)) * G / n * E * dt_moe_capacity(c, n);
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
    if (dt_is_device_ptr(p)) {
        dti_moe_cuda_softmax(x, p, B, E);
        return;
    }
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
    if (dt_is_device_ptr(dx)) {
        dti_moe_cuda_softmax_backward(p, dp, dx, B, E);
        return;
    }
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
    if (dt_is_device_ptr(choice)) {
        dti_moe_cuda_topk(p, B, E, k, choice);
        return;
    }
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

void dti_moe_route_groups(dti_moe_dims d, const int *choice, int *slot, int *routed,
                          int *kept, int *dropped)
{
    if (dt_is_device_ptr(slot)) {
        dti_moe_cuda_route_groups(d, choice, slot, routed, kept, dropped);
        return;
    }
    for (int g = 0; g < d.Gl; g++) {
        size_t t0 = (size_t)g * d.T;
        dropped[g] = dti_moe_route(choice + t0 * d.k, d.T, d.k, d.E, d.C, slot + t0 * d.k,
                                   routed + (size_t)g * d.E, kept + (size_t)g * d.E);
    }
}

/* ==== the step's figures ==== */

void dti_moe_stats(dti_moe_dims d, const float *prob, const int *choice, const int *routed,
                   const int *dropped, double *st)
{
    if (dt_is_device_ptr(st)) {
        dti_moe_cuda_stats(d, prob, choice, routed, dropped, st);
        return;
    }
    int E = d.E, k = d.k, B = d.Gl * d.T;
    for (int g = 0; g < d.Gl; g++) {
        st[DTI_MOE_DROP(E)] += dropped[g];
        for (int e = 0; e < E; e++)
            st[DTI_MOE_ROUTED * E + e] += routed[(size_t)g * E + e];
    }
    for (int t = 0; t < B; t++) {
        st[DTI_MOE_FIRST * E + choice[(size_t)t * k]] += 1;
        for (int e = 0; e < E; e++)
            st[DTI_MOE_PSUM * E + e] += prob[(size_t)t * E + e];
    }
}

void dti_moe_set_loss(double *st, int E, double loss)
{
    if (dt_is_device_ptr(st))
        dti_moe_cuda_set_loss(st, E, loss);     /* the value travels as an argument */
    else
        st[DTI_MOE_LOSS(E)] = loss;
}

void dti_moe_aux(const double *st, double alpha, int E, int B, float *aux)
{
    if (dt_is_device_ptr(aux)) {
        dti_moe_cuda_aux(st, alpha, E, B, aux);
        return;
    }
    for (int e = 0; e < E; e++) {
        double f = st[DTI_MOE_FIRST * E + e] / B;
        aux[e] = (float)(alpha * E * f / B);
    }
}

/* ==== the slots: out to the experts and back ==== */

/* Floats in the slot buffers of one rank's slots (all N ranks' blocks). */
static size_t slot_floats(dti_moe_dims d)
{
    return (size_t)d.N * d.Gl * d.El * d.C * d.H;
}

void dti_moe_scatter(dti_moe_dims d, const float *x, const int *choice, const int *slot,
                     float *xs)
{
    if (dt_is_device_ptr(xs)) {
        dti_moe_cuda_scatter(d, x, choice, slot, xs);
        return;
    }
    int B = d.Gl * d.T, k = d.k, H = d.H;
    memset(xs, 0, slot_floats(d) * sizeof(float));
    for (int t = 0; t < B; t++)
        for (int j = 0; j < k; j++) {
            long at = dti_moe_slot_at(d, choice[(size_t)t * k + j], slot[(size_t)t * k + j],
                                      t);
            if (at >= 0)
                memcpy(xs + at, x + (size_t)t * H, H * sizeof(float));
        }
}

/* Choice j of row t: its expert *e, its gate probability *p (prob (B, E)), and where it
 * sits in the slots (dti_moe_slot_at: -1 when dropped). */
static long choice_at(dti_moe_dims d, const int *choice, const int *slot, const float *prob,
                      int t, int j, int *e, float *p)
{
    *e = choice[(size_t)t * d.k + j];
    *p = prob[(size_t)t * d.E + *e];
    return dti_moe_slot_at(d, *e, slot[(size_t)t * d.k + j], t);
}

void dti_moe_combine(dti_moe_dims d, const float *x, const float *prob, const int *choice,
                     const int *slot, const float *ys, float *y)
{
    if (dt_is_device_ptr(y)) {
        dti_moe_cuda_combine(d, x, prob, choice, slot, ys, y);
        return;
    }
    int B = d.Gl * d.T, H = d.H;
    memcpy(y, x, (size_t)B * H * sizeof(float));
    for (int t = 0; t < B; t++)
        for (int j = 0; j < d.k; j++) {
            int e;
            float p, *y_t = y + (size_t)t * H;
            long at = choice_at(d, choice, slot, prob, t, j, &e, &p);
            for (int i = 0; at >= 0 && i < H; i++)
                y_t[i] += p * ys[at + i];
        }
}

/* a . b over n floats, one running sum in order (the kernel's dot adds alike) */
static float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

void dti_moe_slots_backward(dti_moe_dims d, const float *dy, const float *prob,
                            const int *choice, const int *slot, const float *ys,
                            const float *aux, float *dp, float *dys)
{
    if (dt_is_device_ptr(dys)) {
        dti_moe_cuda_slots_backward(d, dy, prob, choice, slot, ys, aux, dp, dys);
        return;
    }
    int B = d.Gl * d.T, H = d.H, E = d.E;
    memset(dys, 0, slot_floats(d) * sizeof(float));
    for (int t = 0; t < B; t++) {
        float *dp_t = dp + (size_t)t * E;
        const float *dy_t = dy + (size_t)t * H;
        memcpy(dp_t, aux, E * sizeof(float));
        for (int j = 0; j < d.k; j++) {
            int e;
            float p;
            long at = choice_at(d, choice, slot, prob, t, j, &e, &p);
            if (at < 0)
                continue;
            dp_t[e] += dot(dy_t, ys + at, H);
            for (int i = 0; i < H; i++)
                dys[at + i] = p * dy_t[i];
        }
    }
}

void dti_moe_x_backward(dti_moe_dims d, const float *dy, const int *choice,
                        const int *slot, const float *dxs, const float *dgate, float *dx)
{
    if (dt_is_device_ptr(dx)) {
        dti_moe_cuda_x_backward(d, dy, choice, slot, dxs, dgate, dx);
        return;
    }
    int B = d.Gl * d.T, k = d.k, H = d.H;
    memcpy(dx, dy, (size_t)B * H * sizeof(float));
    for (int t = 0; t < B; t++)
        for (int j = 0; j < k; j++) {
            long at = dti_moe_slot_at(d, choice[(size_t)t * k + j], slot[(size_t)t * k + j],
                                      t);
            float *dx_t = dx + (size_t)t * H;
            for (int i = 0; at >= 0 && i < H; i++)
                dx_t[i] += dxs[at + i];
        }
    for (size_t i = 0; i < (size_t)B * H; i++)
        dx[i] += dgate[i];
}

/* ==== the replicated weights' gradient ==== */

void dti_moe_sum_groups(const float *pg, size_t stride, int G, size_t n, float *dst)
{
    if (dt_is_device_ptr(dst)) {
        dti_moe_cuda_sum_groups(pg, stride, G, n, dst);
        return;
    }
    for (size_t j = 0; j < n; j++) {
        float sum = 0.0f;
        for (int g = 0; g < G; g++)
            sum += pg[(size_t)g * stride + j];
        dst[j] = sum;
    }
}
