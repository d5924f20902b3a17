/* The CUDA side of mode moe (moe_cuda.h): the loops over tokens of moe_route.c as
 * kernels, for a run whose state lives on the GPU. moe_route.c is the reference, and
 * each kernel here is a copy of its loop, line for line, on the same layout:
 *
 *   host loop (moe_route.c)      kernel here                     one thread per
 *   dti_moe_softmax              softmax_kernel                  row
 *   dti_moe_softmax_backward     softmax_backward_kernel         row
 *   dti_moe_topk                 topk_kernel                     row
 *   dti_moe_route_groups         route_kernel                    group (tokens in order)
 *   dti_moe_stats                stats_kernel                    expert, + one: drops
 *   dti_moe_set_loss, _aux       set_loss_kernel, aux_kernel     the one number; expert
 *   dti_moe_scatter              scatter_kernel (after a memset) float of a kept choice
 *   dti_moe_combine              combine_kernel                  float of y
 *   dti_moe_slots_backward       dp_kernel, dys_kernel           row; float of a choice
 *   dti_moe_x_backward           x_backward_kernel               float of dx
 *   dti_moe_sum_groups           sum_groups_kernel               float of the sum
 *
 * Where a host loop walks something in order (routing's tokens, a sum over groups or
 * rows), the kernel's thread walks it in the same order; where the host's elements are
 * independent, each is a thread of a grid-stride loop. Products and sums are written
 * __fmul_rn and __fadd_rn, which nvcc never fuses into a multiply-add (the host's
 * x86-64 build has no FMA either): from the same inputs these kernels give the host's
 * bits, but for expf (CUDA's is within 2 ulp, the C library's closer), so the softmax
 * agrees to rounding. tests/unit_gpu_moe.c holds every kernel to its loop.
 *
 * Every launch goes on the calling thread's stream, cudaStreamPerThread, and is checked
 * and counted (DTI_LAUNCHED); the launchers return without waiting. The thread's next
 * kernel, cuBLAS product or copy runs after them; moe.c waits before a collective or
 * the host reads what they wrote. They allocate nothing. */
#include <cuda_runtime.h>
#include <math.h>
#include "cuda.h"
#include "errors.h"
#include "moe_cuda.h"

#define MOE_THREADS 256

/* Blocks for a grid-stride loop over n items: one item a thread, at most 4096 blocks
 * (the loop covers the rest), at least one (a launch of 0 blocks is an error). */
static int blocks(size_t n)
{
    size_t b = (n + MOE_THREADS - 1) / MOE_THREADS;
    return b < 1 ? 1 : b > 4096 ? 4096 : (int)b;
}

/* The grid-stride loop: i = this thread's first item, then every gridDim * blockDim. */
#define FOR_EACH(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n); \
         i += (size_t)gridDim.x * blockDim.x)

#define LAUNCH(n) blocks(n), MOE_THREADS, 0, cudaStreamPerThread

/* Floats in one rank's slot buffers (all N ranks' blocks), as moe_route.c's. */
static size_t slot_floats(dti_moe_dims d)
{
    return (size_t)d.N * d.Gl * d.El * d.C * d.H;
}

/* ==== the gate ==== */

/* dti_moe_softmax: row b of x (B, E) into p (p may be x: each p_b[e] is written after
 * x_b[e] is read, by the row's one thread). */
static __global__ void softmax_kernel(const float *x, float *p, int B, int E)
{
    FOR_EACH(b, B) {
        const float *x_b = x + b * E;               /* (E) */
        float *p_b = p + b * E;                     /* (E) */
        float m = x_b[0], sum = 0.0f;
        for (int e = 1; e < E; e++)
            m = x_b[e] > m ? x_b[e] : m;
        for (int e = 0; e < E; e++) {
            p_b[e] = expf(__fsub_rn(x_b[e], m));    /* the largest is exp(0) = 1 */
            sum = __fadd_rn(sum, p_b[e]);
        }
        for (int e = 0; e < E; e++)
            p_b[e] = __fdiv_rn(p_b[e], sum);
    }
}

/* dti_moe_softmax_backward: dx may be dp (the row's dot is taken before any write). */
static __global__ void softmax_backward_kernel(const float *p, const float *dp, float *dx,
                                               int B, int E)
{
    FOR_EACH(b, B) {
        const float *p_b = p + b * E, *dp_b = dp + b * E;
        float *dx_b = dx + b * E;
        float dot = 0.0f;
        for (int e = 0; e < E; e++)
            dot = __fadd_rn(dot, __fmul_rn(p_b[e], dp_b[e]));
        for (int e = 0; e < E; e++)
            dx_b[e] = __fmul_rn(p_b[e], __fsub_rn(dp_b[e], dot));
    }
}

/* dti_moe_topk: the largest first; a tie goes to the lower index (only a strictly
 * larger p replaces best, experts in order); the second choice is never the first. */
static __global__ void topk_kernel(const float *p, int B, int E, int k, int *choice)
{
    FOR_EACH(b, B) {
        const float *p_b = p + b * E;
        int *c_b = choice + b * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if ((j == 0 || e != c_b[0]) && (best < 0 || p_b[e] > p_b[best]))
                    best = e;
            c_b[j] = best;
        }
    }
}

/* ==== routing ==== */

/* dti_moe_route on group g, by the group's one thread: every first choice in token
 * order, then every second; a choice that finds its expert's C slots full is dropped.
 * The choices come from topk_kernel, so 0 <= e < E (the host's check cannot fail). */
static __global__ void route_kernel(dti_moe_dims d, const int *choice, int *slot,
                                    int *routed, int *kept, int *dropped)
{
    int T = d.T, k = d.k, E = d.E, C = d.C;
    FOR_EACH(g, d.Gl) {
        const int *c_g = choice + g * T * k;        /* (T, k) */
        int *s_g = slot + g * T * k;                /* (T, k) */
        int *r_g = routed + g * E, *k_g = kept + g * E;
        for (int e = 0; e < E; e++)
            r_g[e] = k_g[e] = 0;
        int drop = 0;
        for (int j = 0; j < k; j++)                 /* first choices, then second */
            for (int t = 0; t < T; t++) {
                int e = c_g[(size_t)t * k + j];
                r_g[e]++;
                if (k_g[e] < C) {
                    s_g[(size_t)t * k + j] = k_g[e]++;
                } else {
                    s_g[(size_t)t * k + j] = -1;
                    drop++;
                }
            }
        dropped[g] = drop;
    }
}

/* ==== the step's figures ==== */

/* dti_moe_stats: thread e < E adds expert e's entries, each in the host's order (groups
 * in order, then rows in order); thread E adds the dropped choices, groups in order. */
static __global__ void stats_kernel(dti_moe_dims d, const float *prob, const int *choice,
                                    const int *routed, const int *dropped, double *st)
{
    int E = d.E, k = d.k, B = d.Gl * d.T;
    FOR_EACH(e, E + 1) {
        if (e == (size_t)E) {
            double s = st[DTI_MOE_DROP(E)];
            for (int g = 0; g < d.Gl; g++)
                s += dropped[g];
            st[DTI_MOE_DROP(E)] = s;
            continue;
        }
        double r = st[DTI_MOE_ROUTED * E + e];
        for (int g = 0; g < d.Gl; g++)
            r += routed[(size_t)g * E + e];
        double f = st[DTI_MOE_FIRST * E + e], p = st[DTI_MOE_PSUM * E + e];
        for (int t = 0; t < B; t++) {
            if (choice[(size_t)t * k] == (int)e)
                f += 1;
            p += prob[(size_t)t * E + e];
        }
        st[DTI_MOE_ROUTED * E + e] = r;
        st[DTI_MOE_FIRST * E + e] = f;
        st[DTI_MOE_PSUM * E + e] = p;
    }
}

static __global__ void set_loss_kernel(double *st, int E, double loss)
{
    st[DTI_MOE_LOSS(E)] = loss;
}

/* dti_moe_aux, in double: divisions and products only, nothing to fuse. */
static __global__ void aux_kernel(const double *st, double alpha, int E, int B, float *aux)
{
    FOR_EACH(e, E) {
        double f = st[DTI_MOE_FIRST * E + e] / B;
        aux[e] = (float)(alpha * E * f / B);
    }
}

/* ==== the slots ==== */

/* dti_moe_scatter, after xs is zeroed: item (t, j, i) copies x[t][i] into choice j's
 * slot. Two kept choices never share a slot, so no two threads write one float. */
static __global__ void scatter_kernel(dti_moe_dims d, const float *x, const int *choice,
                                      const int *slot, float *xs)
{
    int H = d.H, k = d.k;
    FOR_EACH(n, (size_t)d.Gl * d.T * k * H) {
        size_t tj = n / H, i = n % H;               /* choice tj = t * k + j */
        int t = (int)(tj / k);
        long at = dti_moe_slot_at(d, choice[tj], slot[tj], t);
        if (at >= 0)
            xs[at + i] = x[(size_t)t * H + i];
    }
}

/* dti_moe_combine: y[t][i] = x[t][i], then + p * ys over the kept choices j in order. */
static __global__ void combine_kernel(dti_moe_dims d, const float *x, const float *prob,
                                      const int *choice, const int *slot, const float *ys,
                                      float *y)
{
    int H = d.H, k = d.k, E = d.E;
    FOR_EACH(n, (size_t)d.Gl * d.T * H) {
        int t = (int)(n / H);
        size_t i = n % H;
        float v = x[n];
        for (int j = 0; j < k; j++) {
            int e = choice[(size_t)t * k + j];
            long at = dti_moe_slot_at(d, e, slot[(size_t)t * k + j], t);
            if (at < 0)
                continue;
            float p = prob[(size_t)t * E + e];
            v = __fadd_rn(v, __fmul_rn(p, ys[at + i]));
        }
        y[n] = v;
    }
}

/* dti_moe_slots_backward's dp, row t by one thread: aux, then + dy_t . ys[slot] for each
 * kept choice j in order (the dot one running sum, i in order). */
static __global__ void dp_kernel(dti_moe_dims d, const float *dy, const int *choice,
                                 const int *slot, const float *ys, const float *aux,
                                 float *dp)
{
    int H = d.H, k = d.k, E = d.E;
    FOR_EACH(t, (size_t)d.Gl * d.T) {
        float *dp_t = dp + t * E;
        const float *dy_t = dy + t * H;
        for (int e = 0; e < E; e++)
            dp_t[e] = aux[e];
        for (int j = 0; j < k; j++) {
            int e = choice[t * k + j];
            long at = dti_moe_slot_at(d, e, slot[t * k + j], (int)t);
            if (at < 0)
                continue;
            float s = 0.0f;
            for (int i = 0; i < H; i++)
                s = __fadd_rn(s, __fmul_rn(dy_t[i], ys[at + i]));
            dp_t[e] = __fadd_rn(dp_t[e], s);
        }
    }
}

/* dti_moe_slots_backward's dys, after it is zeroed: item (t, j, i) writes p * dy[t][i]
 * into choice j's slot. */
static __global__ void dys_kernel(dti_moe_dims d, const float *dy, const float *prob,
                                  const int *choice, const int *slot, float *dys)
{
    int H = d.H, k = d.k, E = d.E;
    FOR_EACH(n, (size_t)d.Gl * d.T * k * H) {
        size_t tj = n / H, i = n % H;
        int t = (int)(tj / k), e = choice[tj];
        long at = dti_moe_slot_at(d, e, slot[tj], t);
        if (at >= 0)
            dys[at + i] = __fmul_rn(prob[(size_t)t * E + e], dy[(size_t)t * H + i]);
    }
}

/* dti_moe_x_backward: dx[t][i] = dy[t][i], + dxs over the kept choices j in order,
 * + dgate[t][i]. */
static __global__ void x_backward_kernel(dti_moe_dims d, const float *dy, const int *choice,
                                         const int *slot, const float *dxs,
                                         const float *dgate, float *dx)
{
    int H = d.H, k = d.k;
    FOR_EACH(n, (size_t)d.Gl * d.T * H) {
        int t = (int)(n / H);
        size_t i = n % H;
        float v = dy[n];
        for (int j = 0; j < k; j++) {
            long at = dti_moe_slot_at(d, choice[(size_t)t * k + j],
                                      slot[(size_t)t * k + j], t);
            if (at >= 0)
                v = __fadd_rn(v, dxs[at + i]);
        }
        dx[n] = __fadd_rn(v, dgate[n]);
    }
}

/* ==== the replicated weights' gradient ==== */

/* dti_moe_sum_groups: float j adds the G groups' in order 0 .. G-1, from 0. */
static __global__ void sum_groups_kernel(const float *pg, size_t stride, int G, size_t n,
                                         float *dst)
{
    FOR_EACH(j, n) {
        float sum = 0.0f;
        for (int g = 0; g < G; g++)
            sum = __fadd_rn(sum, pg[(size_t)g * stride + j]);
        dst[j] = sum;
    }
}

/* ==== the launchers ==== */

extern "C" void dti_moe_cuda_softmax(const float *x, float *p, int B, int E)
{
    if (B <= 0)
        return;
    softmax_kernel<<<LAUNCH(B)>>>(x, p, B, E);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_softmax_backward(const float *p, const float *dp, float *dx,
                                              int B, int E)
{
    if (B <= 0)
        return;
    softmax_backward_kernel<<<LAUNCH(B)>>>(p, dp, dx, B, E);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_topk(const float *p, int B, int E, int k, int *choice)
{
    DT_REQUIRE(k >= 1 && k <= 2 && k <= E, "dti_moe_topk: top-%d of %d experts", k, E);
    if (B <= 0)
        return;
    topk_kernel<<<LAUNCH(B)>>>(p, B, E, k, choice);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_route_groups(dti_moe_dims d, const int *choice, int *slot,
                                          int *routed, int *kept, int *dropped)
{
    if (d.Gl <= 0)
        return;
    route_kernel<<<LAUNCH(d.Gl)>>>(d, choice, slot, routed, kept, dropped);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_stats(dti_moe_dims d, const float *prob, const int *choice,
                                   const int *routed, const int *dropped, double *st)
{
    stats_kernel<<<LAUNCH(d.E + 1)>>>(d, prob, choice, routed, dropped, st);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_set_loss(double *st, int E, double loss)
{
    set_loss_kernel<<<1, 1, 0, cudaStreamPerThread>>>(st, E, loss);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_aux(const double *st, double alpha, int E, int B, float *aux)
{
    aux_kernel<<<LAUNCH(E)>>>(st, alpha, E, B, aux);
    DTI_LAUNCHED();
}

/* Zeroes n floats at p on the thread's stream (a launch; no wait). */
static void zero_async(float *p, size_t n)
{
    DT_CHECK_CUDA(cudaMemsetAsync(p, 0, n * sizeof(float), cudaStreamPerThread));
    dti_book(DTI_BOOK_LAUNCH, 1);
}

extern "C" void dti_moe_cuda_scatter(dti_moe_dims d, const float *x, const int *choice,
                                     const int *slot, float *xs)
{
    zero_async(xs, slot_floats(d));
    size_t n = (size_t)d.Gl * d.T * d.k * d.H;
    if (n == 0)
        return;
    scatter_kernel<<<LAUNCH(n)>>>(d, x, choice, slot, xs);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_combine(dti_moe_dims d, const float *x, const float *prob,
                                     const int *choice, const int *slot, const float *ys,
                                     float *y)
{
    size_t n = (size_t)d.Gl * d.T * d.H;
    if (n == 0)
        return;
    combine_kernel<<<LAUNCH(n)>>>(d, x, prob, choice, slot, ys, y);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_slots_backward(dti_moe_dims d, const float *dy,
                                            const float *prob, const int *choice,
                                            const int *slot, const float *ys,
                                            const float *aux, float *dp, float *dys)
{
    zero_async(dys, slot_floats(d));
    size_t B = (size_t)d.Gl * d.T, n = B * d.k * d.H;
    if (n == 0)
        return;
    dp_kernel<<<LAUNCH(B)>>>(d, dy, choice, slot, ys, aux, dp);
    DTI_LAUNCHED();
    dys_kernel<<<LAUNCH(n)>>>(d, dy, prob, choice, slot, dys);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_x_backward(dti_moe_dims d, const float *dy, const int *choice,
                                        const int *slot, const float *dxs,
                                        const float *dgate, float *dx)
{
    size_t n = (size_t)d.Gl * d.T * d.H;
    if (n == 0)
        return;
    x_backward_kernel<<<LAUNCH(n)>>>(d, dy, choice, slot, dxs, dgate, dx);
    DTI_LAUNCHED();
}

extern "C" void dti_moe_cuda_sum_groups(const float *pg, size_t stride, int G, size_t n,
                                        float *dst)
{
    if (n == 0)
        return;
    sum_groups_kernel<<<LAUNCH(n)>>>(pg, stride, G, n, dst);
    DTI_LAUNCHED();
}
