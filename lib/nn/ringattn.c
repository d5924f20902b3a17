/* Causal attention against its keys a block at a time (gpt.h, "attention a block of keys
 * at a time"): the arithmetic of ring attention, plain loops on one head.
 *
 *   for each block of keys and values (any order):
 *       s_j  = q . k_j / sqrt(d)                  for the keys at or before the query
 *       m'   = max(m, max_j s_j)
 *       l    = l e^(m - m') + sum_j e^(s_j - m')
 *       o    = o e^(m - m') + sum_j e^(s_j - m') v_j
 *       m    = m'
 *   finish:  o = o / l,  lse = m + log l
 *
 * Backward needs no running state: with lse kept, p_j = e^(s_j - lse) is the finished
 * softmax itself, block by block, and D = sum_e dout_e o_e stands for sum_j p_j dp_j.
 * The host's loops, the reference for whatever runs the blocks faster. Forward and
 * backward run where their buffers are (dti_nn_on_gpu: all on the host or all on the
 * GPU): on the GPU through ringattn_kernels.cu (nn_cuda.h), which needs no scratch
 * (NULL there), else through the loops here. */
#include <math.h>
#include <string.h>
#include "errors.h"
#include "gpt.h"
#include "nn_cuda.h"
#include "nn_internal.h"

/* The keys of a block query position p sees: those at or before it, j < n */
static int seen(int p, int Tk, int k0)
{
    int n = p - k0 + 1;
    return n < 0 ? 0 : n > Tk ? Tk : n;
}

static float dot(const float *a, const float *b, int d)
{
    float s = 0.0f;
    for (int e = 0; e < d; e++)
        s += a[e] * b[e];
    return s;
}

void dt_attn_block_init(float *m, float *l, float *o, int ldo, int Tq, int d)
{
    for (int i = 0; i < Tq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
        memset(o + (size_t)i * ldo, 0, (size_t)d * sizeof(float));
    }
}

void dt_attn_block_forward(const float *q, int ldq, const float *k, const float *v,
                           int ldk, int Tq, int Tk, int q0, int k0, int d, float *m,
                           float *l, float *o, int ldo, float *scratch)
{
    const void *ptrs[] = { q, k, v, m, l, o, scratch };
    if (dti_nn_on_gpu("dt_attn_block_forward", ptrs, 7)) {
        dti_nn_cuda_attn_block_forward(q, ldq, k, v, ldk, Tq, Tk, q0, k0, d, m, l, o, ldo);
        return;
    }
    float scale = 1.0f / sqrtf((float)d);
    for (int i = 0; i < Tq; i++) {
        int n = seen(q0 + i, Tk, k0);
        if (n == 0)
            continue;                       /* the whole block is in this query's future */
        const float *q_i = q + (size_t)i * ldq;
        float *s = scratch, mx = m[i], sum = 0.0f, *o_i = o + (size_t)i * ldo;
        for (int j = 0; j < n; j++) {
            s[j] = dot(q_i, k + (size_t)j * ldk, d) * scale;
            mx = s[j] > mx ? s[j] : mx;
        }
        float corr = expf(m[i] - mx);       /* 0 before the first block: m = -inf */
        for (int e = 0; e < d; e++)
            o_i[e] *= corr;
        for (int j = 0; j < n; j++) {
            float p = expf(s[j] - mx);
            const float *v_j = v + (size_t)j * ldk;
            sum += p;
            for (int e = 0; e < d; e++)
                o_i[e] += p * v_j[e];
        }
        l[i] = l[i] * corr + sum;
        m[i] = mx;
    }
}

void dt_attn_block_finish(const float *m, const float *l, float *o, int ldo, float *lse,
                          int Tq, int d)
{
    for (int i = 0; i < Tq; i++) {
        DT_REQUIRE(l[i] > 0.0f, "dt_attn_block_finish: query row %d met no key", i);
        float *o_i = o + (size_t)i * ldo;
        for (int e = 0; e < d; e++)
            o_i[e] /= l[i];
        lse[i] = m[i] + logf(l[i]);
    }
}

void dt_attn_block_delta(const float *o, const float *dout, int ldo, int Tq, int d,
                         float *D)
{
    for (int i = 0; i < Tq; i++)
        D[i] = dot(o + (size_t)i * ldo, dout + (size_t)i * ldo, d);
}

void dt_attn_block_backward(const float *q, int ldq, const float *k, const float *v,
                            int ldk, int Tq, int Tk, int q0, int k0, int d, const float *lse,
                            const float *D, const float *dout, int ldo, float *dq,
                            float *dk, float *dv)
{
    const void *ptrs[] = { q, k, v, lse, D, dout, dq, dk, dv };
    if (dti_nn_on_gpu("dt_attn_block_backward", ptrs, 9)) {
        dti_nn_cuda_attn_block_backward(q, ldq, k, v, ldk, Tq, Tk, q0, k0, d, lse, D, dout,
                                        ldo, dq, dk, dv);
        return;
    }
    float scale = 1.0f / sqrtf((float)d);
    for (int i = 0; i < Tq; i++) {
        int n = seen(q0 + i, Tk, k0);
        const float *q_i = q + (size_t)i * ldq, *do_i = dout + (size_t)i * ldo;
        float *dq_i = dq + (size_t)i * ldq;
        for (int j = 0; j < n; j++) {
            const float *k_j = k + (size_t)j * ldk, *v_j = v + (size_t)j * ldk;
            float *dk_j = dk + (size_t)j * ldk, *dv_j = dv + (size_t)j * ldk;
            float p = expf(dot(q_i, k_j, d) * scale - lse[i]);
            float ds = p * (dot(do_i, v_j, d) - D[i]) * scale;
            for (int e = 0; e < d; e++) {
                dv_j[e] += p * do_i[e];
                dq_i[e] += ds * k_j[e];
                dk_j[e] += ds * q_i[e];
            }
        }
    }
}

void dt_cp_zigzag(int r, int C, int T, int *first, int *second)
{
    DT_REQUIRE(C >= 1 && r >= 0 && r < C && T >= 2 * C && T % (2 * C) == 0,
               "dt_cp_zigzag: rank %d of %d, a sequence of %d (a multiple of %d)", r, C, T,
               2 * C);
    int n = T / (2 * C);
    *first = r * n;
    *second = (2 * C - 1 - r) * n;
}

long dt_cp_pairs(int a, int b, int n)
{
    long pairs = 0;
    for (int i = 0; i < n; i++)
        pairs += seen(a + i, n, b);
    return pairs;
}
