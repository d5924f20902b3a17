/* Ring attention's blocks (ringattn.c) on the GPU: dt_attn_block_forward and
 * dt_attn_block_backward on device pointers, the same contracts. ringattn.c's loops are
 * the reference; each kernel computes what they compute, on the same layout and the same
 * global positions (query row i at q0 + i sees key row j at k0 + j when j < n_i, n_i =
 * seen(q0 + i, Tk, k0)):
 *
 *   ringattn.c's loop          kernel here          one block of 256 threads per
 *   dt_attn_block_forward      block_fwd_kernel     query row i: m, l, o_i
 *   dt_attn_block_backward     block_dq_kernel      query row i: dq_i
 *                              block_dkv_kernel     key row j: dk_j, dv_j
 *
 * forward, row i (nothing when n_i = 0, as on the host):
 *   1. s_j = scale q_i.k_j, threads over j < n_i;  m' = max(m, max_j s_j)  block_reduce
 *   2. corr = e^(m - m');  o_i *= corr                                     threads over e
 *   3. keys a tile of 256 at a time: p_j = e^(s_j - m') into shared memory (s_j made
 *      again: no scratch per row), then o_i[e] += p_j v_j[e], j in order  threads over e
 *   4. l = l corr + sum_j p_j (block_reduce), m = m'                       thread 0
 * backward, with p = e^(scale q_i.k_j - lse_i), ds = p (dout_i.v_j - D_i) scale:
 *   dq:  row i, keys j < n_i a tile at a time: ds into shared memory, then
 *        dq_i[e] += ds_ij k_j[e], j in order                               threads over e
 *   dkv: row j, the queries that see it (q0 + i >= k0 + j) a tile at a time: p, ds into
 *        shared memory, then dv_j[e] += p_ij dout_i[e], dk_j[e] += ds_ij q_i[e], i in order
 * Each output element belongs to one thread, which adds into it in the host's order: no
 * atomicAdd, the same bits on every run. A score is made once per kernel that needs it
 * (the forward twice, backward's two kernels once each) rather than kept: nothing is
 * allocated, and the scratch the host needs is not used. The sums over keys of l and the
 * max are block trees (nn_device.cuh) and nvcc fuses multiply-adds: equal to the host's
 * to rounding.
 *
 * Every launch goes on the calling thread's stream (cudaStreamPerThread), checked and
 * counted (DTI_LAUNCHED); the launchers return with the work queued. */
#include <cuda_runtime.h>
#include <math.h>
#include "cuda.h"
#include "errors.h"
#include "nn_cuda.h"
#include "nn_device.cuh"


/* The keys of a block query position p sees: those at or before it, j < n (ringattn.c's) */
static __device__ int seen(int p, int Tk, int k0)
{
    int n = p - k0 + 1;
    return n < 0 ? 0 : n > Tk ? Tk : n;
}

static __device__ float dot(const float *a, const float *b, int d)
{
    float s = 0.0f;
    for (int e = 0; e < d; e++)
        s += a[e] * b[e];
    return s;
}

/* ==== forward ==== */

static __global__ void block_fwd_kernel(const float *q, int ldq, const float *k,
                                        const float *v, int ldk, int Tq, int Tk, int q0,
                                        int k0, int d, float scale, float *m, float *l,
                                        float *o, int ldo)
{
    __shared__ float sh[NN_THREADS], p[NN_THREADS];
    FOR_EACH_ROW(i, Tq) {
        int n = seen(q0 + i, Tk, k0);
        if (n == 0)
            continue;                       /* the whole block is in this query's future */
        const float *q_i = q + (size_t)i * ldq;
        float *o_i = o + (size_t)i * ldo, mi = m[i], mx = -INFINITY, sum = 0.0f;
        FOR_EACH_COL(j, n)
            mx = fmaxf(mx, dot(q_i, k + (size_t)j * ldk, d) * scale);
        mx = fmaxf(mi, block_reduce(sh, mx, 1));
        float corr = expf(mi - mx);         /* 0 before the first block: m = -inf */
        FOR_EACH_COL(e, d)
            o_i[e] *= corr;
        for (int j0 = 0; j0 < n; j0 += NN_THREADS) {
            int j = j0 + threadIdx.x, w = n - j0 < NN_THREADS ? n - j0 : NN_THREADS;
            float pj = j < n ? expf(dot(q_i, k + (size_t)j * ldk, d) * scale - mx) : 0.0f;
            p[threadIdx.x] = pj;
            sum += pj;
            __syncthreads();                /* the tile's p, before o reads them */
            FOR_EACH_COL(e, d) {
                float s = o_i[e];
                for (int t = 0; t < w; t++)
                    s += p[t] * v[(size_t)(j0 + t) * ldk + e];
                o_i[e] = s;
            }
            __syncthreads();                /* all have read p before the next tile */
        }
        sum = block_reduce(sh, sum, 0);     /* its barriers: every thread has read m[i] */
        if (threadIdx.x == 0) {
            l[i] = l[i] * corr + sum;
            m[i] = mx;
        }
    }
}

extern "C" void dti_nn_cuda_attn_block_forward(const float *q, int ldq, const float *k,
                                               const float *v, int ldk, int Tq, int Tk,
                                               int q0, int k0, int d, float *m, float *l,
                                               float *o, int ldo)
{
    if (Tq <= 0 || Tk <= 0 || d <= 0)
        return;
    float scale = 1.0f / sqrtf((float)d);                  /* as the host's */
    block_fwd_kernel<<<LAUNCH_ROWS(Tq)>>>(q, ldq, k, v, ldk, Tq, Tk, q0, k0, d, scale, m, l,
                                          o, ldo);
    DTI_LAUNCHED();
}

/* ==== backward ==== */

/* Query row i: dq_i += sum_j ds_ij k_j over the keys it sees */
static __global__ void block_dq_kernel(const float *q, int ldq, const float *k,
                                       const float *v, int ldk, int Tq, int Tk, int q0,
                                       int k0, int d, float scale, const float *lse,
                                       const float *D, const float *dout, int ldo,
                                       float *dq)
{
    __shared__ float ds[NN_THREADS];
    FOR_EACH_ROW(i, Tq) {
        int n = seen(q0 + i, Tk, k0);
        const float *q_i = q + (size_t)i * ldq, *do_i = dout + (size_t)i * ldo;
        float *dq_i = dq + (size_t)i * ldq;
        for (int j0 = 0; j0 < n; j0 += NN_THREADS) {
            int j = j0 + threadIdx.x, w = n - j0 < NN_THREADS ? n - j0 : NN_THREADS;
            float s = 0.0f;
            if (j < n) {
                const float *k_j = k + (size_t)j * ldk, *v_j = v + (size_t)j * ldk;
                float pj = expf(dot(q_i, k_j, d) * scale - lse[i]);
                s = pj * (dot(do_i, v_j, d) - D[i]) * scale;
            }
            ds[threadIdx.x] = s;
            __syncthreads();
            FOR_EACH_COL(e, d) {
                float a = dq_i[e];
                for (int t = 0; t < w; t++)
                    a += ds[t] * k[(size_t)(j0 + t) * ldk + e];
                dq_i[e] = a;
            }
            __syncthreads();
        }
    }
}

/* Key row j: dv_j += sum_i p_ij dout_i, dk_j += sum_i ds_ij q_i over the queries that see
 * it, i >= k0 + j - q0 (every one of them sees all keys up to its own position) */
static __global__ void block_dkv_kernel(const float *q, int ldq, const float *k,
                                        const float *v, int ldk, int Tq, int Tk, int q0,
                                        int k0, int d, float scale, const float *lse,
                                        const float *D, const float *dout, int ldo,
                                        float *dk, float *dv)
{
    __shared__ float p[NN_THREADS], ds[NN_THREADS];
    FOR_EACH_ROW(j, Tk) {
        int i1 = k0 + j - q0 > 0 ? k0 + j - q0 : 0;    /* the first query that sees j */
        const float *k_j = k + (size_t)j * ldk, *v_j = v + (size_t)j * ldk;
        float *dk_j = dk + (size_t)j * ldk, *dv_j = dv + (size_t)j * ldk;
        for (int i0 = i1; i0 < Tq; i0 += NN_THREADS) {
            int i = i0 + threadIdx.x, w = Tq - i0 < NN_THREADS ? Tq - i0 : NN_THREADS;
            float pi = 0.0f, s = 0.0f;
            if (i < Tq) {
                const float *q_i = q + (size_t)i * ldq, *do_i = dout + (size_t)i * ldo;
                pi = expf(dot(q_i, k_j, d) * scale - lse[i]);
                s = pi * (dot(do_i, v_j, d) - D[i]) * scale;
            }
            p[threadIdx.x] = pi;
            ds[threadIdx.x] = s;
            __syncthreads();
            FOR_EACH_COL(e, d) {
                float a = dv_j[e], b = dk_j[e];
                for (int t = 0; t < w; t++) {
                    size_t r = (size_t)(i0 + t);
                    a += p[t] * dout[r * ldo + e];
                    b += ds[t] * q[r * ldq + e];
                }
                dv_j[e] = a;
                dk_j[e] = b;
            }
            __syncthreads();
        }
    }
}

/* The two kernels add into different outputs (dq; dk and dv): one after the other on the
 * stream, in either order */
extern "C" void dti_nn_cuda_attn_block_backward(const float *q, int ldq, const float *k,
                                                const float *v, int ldk, int Tq, int Tk,
                                                int q0, int k0, int d, const float *lse,
                                                const float *D, const float *dout, int ldo,
                                                float *dq, float *dk, float *dv)
{
    if (Tq <= 0 || Tk <= 0 || d <= 0)
        return;
    float scale = 1.0f / sqrtf((float)d);
    block_dq_kernel<<<LAUNCH_ROWS(Tq)>>>(q, ldq, k, v, ldk, Tq, Tk, q0, k0, d, scale, lse,
                                         D, dout, ldo, dq);
    DTI_LAUNCHED();
    block_dkv_kernel<<<LAUNCH_ROWS(Tk)>>>(q, ldq, k, v, ldk, Tq, Tk, q0, k0, d, scale, lse,
                                          D, dout, ldo, dk, dv);
    DTI_LAUNCHED();
}
