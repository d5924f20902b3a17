/* The GPT's operations (gpt.c) on the GPU: the same contracts as gpt.h's functions, on
 * device pointers. gpt.c's loops are the reference, and each kernel here computes what
 * its loop computes, on the same layout:
 *
 *   gpt.c's loop                 kernel here                 one ... per
 *   dt_embed_forward             embed_forward_kernel        thread a float of out
 *   dt_embed_backward            embed_backward_kernel       thread a column (rows in order)
 *   dt_layernorm_forward         ln_forward_kernel           block a row
 *   dt_layernorm_backward        ln_backward_rows_kernel     block a row (dx)
 *                                ln_backward_cols_kernel     thread a column (dw, db)
 *   dt_attention_forward         attn_forward_kernel         block a query row (b, h, i)
 *   dt_attention_backward        attn_backward_rows_kernel   block a query row: dS, dq
 *                                attn_backward_cols_kernel   block a key row j: dk, dv
 *   the residual add, own_rows   add_kernel, copy_rows_kernel  thread a float
 *
 * A sum over rows into one output (the embeddings' and LayerNorm's weight gradients)
 * is one thread's, walking the rows in the loop's order: no atomicAdd, so the result is
 * the same on every run, and for the embeddings (additions alone) the CPU's bits. A sum
 * along a row (LayerNorm's mean, a softmax's maximum and sum) is a block's: each thread
 * takes every 256th element, then a tree over the threads (block_reduce); that adds in
 * another order than the loop and nvcc fuses multiply-adds, so these agree with the CPU
 * to rounding, and are the same from run to run.
 *
 * Attention, for one head of one sequence, P = att (T, T), with scale = 1/sqrt(d):
 *
 *   forward, block (b, h, i):   s_j = scale q_i.k_j  (j <= i)      threads over j
 *                               P_ij = exp(s_j - max) / sum        two block reductions
 *                               y_i = sum_j P_ij v_j               threads over d
 *   backward, rows  (b, h, i):  dP_ij = dy_i.v_j,  D = sum_j P_ij dP_ij   threads over j
 *                               dS_ij = P_ij (dP_ij - D)           into datt
 *                               dq_i = scale sum_j dS_ij k_j       threads over d
 *   backward, cols  (b, h, j):  dv_j = sum_{i >= j} P_ij dy_i      threads over d
 *                               dk_j = scale sum_{i >= j} dS_ij q_i
 *
 * The columns need every row's dS: a second kernel, which the stream runs after the
 * first. Above the diagonal (j > i) att and datt are written 0, as the CPU writes them.
 * Plain kernels, no cuBLAS: each query row's work is T d multiply-adds, done by one
 * block, enough for the small models dtlab trains.
 *
 * Every launch goes on the calling thread's stream (cudaStreamPerThread) and is checked
 * and counted (DTI_LAUNCHED); the launchers return with their work queued, not done
 * (device.cu's "Queued work"), but for the embeddings' forward, which waits once to
 * read back whether every token was in the vocabulary (as the cross-entropy reads its
 * bad-label flag). Nothing is allocated per call: that flag is the one scratch, kept
 * per thread. */
#include <cuda_runtime.h>
#include <math.h>
#include "cuda.h"
#include "errors.h"
#include "nn_cuda.h"
#include "nn_device.cuh"


/* ==== the embeddings ==== */

/* out[r, c] = wte[tok[r], c] + wpe[p_t, c], r = b*T + t. A token outside 0..V-1 leaves
 * its row alone and records N - r in *bad (atomicMax: the largest is the first such row
 * in order b, t, the one the CPU names; 0 stays "none"). */
static __global__ void embed_forward_kernel(const int *tok, const float *wte,
                                            const float *wpe, const int *pos, float *out,
                                            int T, int C, int V, size_t N, int *bad)
{
    FOR_EACH(i, N * C) {
        size_t r = i / C;
        int c = (int)(i % C), t = (int)(r % T), id = tok[r];
        if (id < 0 || id >= V) {
            if (c == 0)
                atomicMax(bad, (int)(N - r));
            continue;
        }
        int p = pos ? pos[t] : t;
        out[i] = wte[(size_t)id * C + c] + wpe[(size_t)p * C + c];
    }
}

/* Column c of dwte and dwpe: rows r = b*T + t in order, each adding dout[r, c] to its
 * token's row and its position's, as embed_cols does; one thread owns the column, so
 * two rows with the same token never race. */
static __global__ void embed_backward_kernel(const int *tok, const float *dout,
                                             const int *pos, float *dwte, float *dwpe,
                                             int T, int C, size_t N)
{
    FOR_EACH(c, C)
        for (size_t r = 0; r < N; r++) {
            int t = (int)(r % T);
            float d = dout[r * C + c];
            dwte[(size_t)tok[r] * C + c] += d;
            dwpe[(size_t)(pos ? pos[t] : t) * C + c] += d;
        }
}

/* The flag of embed_forward_kernel, one int per thread on its GPU (made on first use,
 * freed by the process's exit) */
static int *embed_flag(void)
{
    static thread_local int *flag;
    if (!flag)
        flag = (int *)dti_cuda_malloc(sizeof(int));
    return flag;
}

/* The host needs one answer, whether every token was in the vocabulary, before it goes
 * on: the CPU stops the program at a bad token, and a kernel cannot. So this launcher
 * waits once, for that int (and, when it is set, reads the token to name it). */
extern "C" void dti_nn_cuda_embed_forward(const int *tok, const float *wte,
                                          const float *wpe, const int *pos, float *out,
                                          int B, int T, int C, int V)
{
    size_t N = (size_t)B * T;
    if (N == 0 || C <= 0)
        return;
    int *bad = embed_flag(), got;
    DT_CHECK_CUDA(cudaMemsetAsync(bad, 0, sizeof(int), cudaStreamPerThread));
    DTI_LAUNCHED();
    embed_forward_kernel<<<LAUNCH_ITEMS(N * C)>>>(tok, wte, wpe, pos, out, T, C, V, N,
                                                  bad);
    DTI_LAUNCHED();
    dti_cuda_read_number(&got, bad, sizeof got);
    if (got) {
        size_t r = N - (size_t)got;
        int id;
        dti_cuda_read_number(&id, tok + r, sizeof id);
        dti_die(__FILE__, __LINE__, "dt_embed_forward: token %d at (%d, %d) is not in the "
                "vocabulary (0..%d)", id, (int)(r / T), (int)(r % T), V - 1);
    }
}

/* The tokens are those forward checked: backward has no V to check them against (as on
 * the CPU). */
extern "C" void dti_nn_cuda_embed_backward(const int *tok, const float *dout,
                                           const int *pos, float *dwte, float *dwpe,
                                           int B, int T, int C)
{
    size_t N = (size_t)B * T;
    if (N == 0 || C <= 0)
        return;
    embed_backward_kernel<<<LAUNCH_ITEMS(C)>>>(tok, dout, pos, dwte, dwpe, T, C, N);
    DTI_LAUNCHED();
}

/* ==== LayerNorm ==== */

/* Row r: mean, then the biased variance around it (two passes, as the CPU), rstd,
 * y = (x - mean) rstd w + b */
static __global__ void ln_forward_kernel(const float *x, const float *w, const float *b,
                                         float *y, float *mean, float *rstd, size_t N,
                                         int C)
{
    __shared__ float sh[NN_THREADS];
    FOR_EACH_ROW(r, N) {
        const float *x_r = x + r * C;                                          /* (C) */
        float *y_r = y + r * C;
        float m = 0.0f, v = 0.0f;
        FOR_EACH_COL(i, C)
            m += x_r[i];
        m = block_reduce(sh, m, 0) / C;
        FOR_EACH_COL(i, C)
            v += (x_r[i] - m) * (x_r[i] - m);
        v = block_reduce(sh, v, 0) / C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        FOR_EACH_COL(i, C)
            y_r[i] = (x_r[i] - m) * s * w[i] + b[i];
        if (threadIdx.x == 0) {
            mean[r] = m;
            rstd[r] = s;
        }
    }
}

/* dx_r += rstd (g - mean(g) - xhat mean(g xhat)), g = dy w: ln_backward_rows's formula,
 * its two means block sums */
static __global__ void ln_backward_rows_kernel(const float *x, const float *w,
                                               const float *mean, const float *rstd,
                                               const float *dy, float *dx, size_t N, int C)
{
    __shared__ float sh[NN_THREADS];
    FOR_EACH_ROW(r, N) {
        const float *x_r = x + r * C, *dy_r = dy + r * C;                      /* (C) */
        float *dx_r = dx + r * C;
        float m = mean[r], s = rstd[r], gm = 0.0f, gxm = 0.0f;
        FOR_EACH_COL(i, C) {
            float xhat = (x_r[i] - m) * s, gi = dy_r[i] * w[i];
            gm += gi;
            gxm += gi * xhat;
        }
        gm = block_reduce(sh, gm, 0) / C;
        gxm = block_reduce(sh, gxm, 0) / C;
        FOR_EACH_COL(i, C) {
            float xhat = (x_r[i] - m) * s, gi = dy_r[i] * w[i];
            dx_r[i] += s * (gi - gm - xhat * gxm);
        }
    }
}

/* Column i of dw and db: dw += dy xhat, db += dy, the rows in order, one thread a
 * column (as ln_backward_cols) */
static __global__ void ln_backward_cols_kernel(const float *x, const float *mean,
                                               const float *rstd, const float *dy,
                                               float *dw, float *db, size_t N, int C)
{
    FOR_EACH(i, C) {
        float sw = dw[i], sb = db[i];
        for (size_t r = 0; r < N; r++) {
            float d = dy[r * C + i], xhat = (x[r * C + i] - mean[r]) * rstd[r];
            sw += d * xhat;
            sb += d;
        }
        dw[i] = sw;
        db[i] = sb;
    }
}

extern "C" void dti_nn_cuda_layernorm_forward(const float *x, const float *w, const float *b,
                                              float *y, float *mean, float *rstd, int N,
                                              int C)
{
    if (N <= 0 || C <= 0)
        return;
    ln_forward_kernel<<<LAUNCH_ROWS(N)>>>(x, w, b, y, mean, rstd, (size_t)N, C);
    DTI_LAUNCHED();
}

/* dx NULL: the weights' part alone; dw (and db) NULL: dx alone */
extern "C" void dti_nn_cuda_layernorm_backward(const float *x, const float *w,
                                               const float *mean, const float *rstd,
                                               const float *dy, float *dx, float *dw,
                                               float *db, int N, int C)
{
    if (N <= 0 || C <= 0)
        return;
    if (dx) {
        ln_backward_rows_kernel<<<LAUNCH_ROWS(N)>>>(x, w, mean, rstd, dy, dx, (size_t)N, C);
        DTI_LAUNCHED();
    }
    if (dw) {
        ln_backward_cols_kernel<<<LAUNCH_ITEMS(C)>>>(x, mean, rstd, dy, dw, db, (size_t)N,
                                                     C);
        DTI_LAUNCHED();
    }
}

/* ==== causal attention ==== */

/* Where one head's rows are: qkv (B, T, 3 hd) holds q, k, v side by side (k at hd, v at
 * 2 hd), head h at h*d in each, rows ld = 3 hd apart; y and dy (B, T, hd) rows hd apart;
 * att and datt (B, H, T, T), head (b, h)'s matrix at (b H + h) T T. */
struct head_at {
    size_t q, y, att;           /* offsets of (b, h)'s first row in qkv, y, att */
    size_t ld, hd;
};

static __device__ head_at head_of(size_t bh, int T, int H, int d)
{
    size_t b = bh / H, h = bh % H, hd = (size_t)H * d, ld = 3 * hd;
    head_at a = { b * T * ld + h * d, b * T * hd + h * d, bh * T * T, ld, hd };
    return a;
}

static __device__ float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int e = 0; e < n; e++)
        s += a[e] * b[e];
    return s;
}

/* Query row i of head (b, h), row = (b H + h) T + i: its scores against keys 0..i, the
 * softmax of them into att (0 after i), then y_i = sum_j att_ij v_j (head_forward) */
static __global__ void attn_forward_kernel(const float *qkv, float *att, float *y, int B,
                                           int T, int H, int d, float scale)
{
    __shared__ float sh[NN_THREADS];
    FOR_EACH_ROW(row, (size_t)B * H * T) {
        int i = (int)(row % T);
        head_at a = head_of(row / T, T, H, d);
        const float *q = qkv + a.q, *k = q + a.hd, *v = q + 2 * a.hd;    /* (T, d), ld */
        const float *q_i = q + (size_t)i * a.ld;
        float *att_i = att + a.att + (size_t)i * T, *y_i = y + a.y + (size_t)i * a.hd;
        float m = -INFINITY, sum = 0.0f;
        FOR_EACH_COL(j, i + 1) {
            float s = dot(q_i, k + (size_t)j * a.ld, d) * scale;
            att_i[j] = s;
            m = fmaxf(m, s);
        }
        m = block_reduce(sh, m, 1);
        FOR_EACH_COL(j, i + 1) {        /* each thread its own j's, as above */
            att_i[j] = expf(att_i[j] - m);
            sum += att_i[j];
        }
        sum = block_reduce(sh, sum, 0);
        FOR_EACH_COL(j, T)
            att_i[j] = j <= i ? att_i[j] / sum : 0.0f;
        __syncthreads();                /* the whole row of att, before y reads it */
        FOR_EACH_COL(e, d) {
            float s = 0.0f;
            for (int j = 0; j <= i; j++)
                s += att_i[j] * v[(size_t)j * a.ld + e];
            y_i[e] = s;
        }
    }
}

/* Query row i of head (b, h): dP_ij = dy_i . v_j, then dS_ij = P_ij (dP_ij - D) into
 * datt, D = sum_j P_ij dP_ij (0 after i); then dq_i = scale sum_j dS_ij k_j, written */
static __global__ void attn_backward_rows_kernel(const float *qkv, const float *att,
                                                 const float *dy, float *datt, float *dqkv,
                                                 int B, int T, int H, int d, float scale)
{
    __shared__ float sh[NN_THREADS];
    FOR_EACH_ROW(row, (size_t)B * H * T) {
        int i = (int)(row % T);
        head_at a = head_of(row / T, T, H, d);
        const float *k = qkv + a.q + a.hd, *v = qkv + a.q + 2 * a.hd;   /* (T, d), ld */
        const float *P = att + a.att + (size_t)i * T, *dy_i = dy + a.y + (size_t)i * a.hd;
        float *dS = datt + a.att + (size_t)i * T, *dq_i = dqkv + a.q + (size_t)i * a.ld;
        float D = 0.0f;
        FOR_EACH_COL(j, i + 1) {
            dS[j] = dot(dy_i, v + (size_t)j * a.ld, d);                 /* dP_ij */
            D += P[j] * dS[j];
        }
        D = block_reduce(sh, D, 0);
        FOR_EACH_COL(j, T)              /* each thread its own j's, as above */
            dS[j] = j <= i ? P[j] * (dS[j] - D) : 0.0f;
        __syncthreads();                /* the whole row of dS, before dq reads it */
        FOR_EACH_COL(e, d) {
            float s = 0.0f;
            for (int j = 0; j <= i; j++)
                s += scale * dS[j] * k[(size_t)j * a.ld + e];
            dq_i[e] = s;
        }
    }
}

/* Key row j of head (b, h): dv_j = sum_{i >= j} P_ij dy_i and dk_j = scale sum_{i >= j}
 * dS_ij q_i (the rows i < j have P_ij = dS_ij = 0), written; one thread an element */
static __global__ void attn_backward_cols_kernel(const float *qkv, const float *att,
                                                 const float *dy, const float *datt,
                                                 float *dqkv, int B, int T, int H, int d,
                                                 float scale)
{
    FOR_EACH_ROW(row, (size_t)B * H * T) {
        int j = (int)(row % T);
        head_at a = head_of(row / T, T, H, d);
        const float *q = qkv + a.q, *dy_h = dy + a.y;
        const float *P = att + a.att, *dS = datt + a.att;                 /* (T, T) */
        float *dk_j = dqkv + a.q + a.hd + (size_t)j * a.ld, *dv_j = dk_j + a.hd;
        FOR_EACH_COL(e, d) {
            float sk = 0.0f, sv = 0.0f;
            for (int i = j; i < T; i++) {
                size_t ij = (size_t)i * T + j;
                sv += P[ij] * dy_h[(size_t)i * a.hd + e];
                sk += scale * dS[ij] * q[(size_t)i * a.ld + e];
            }
            dk_j[e] = sk;
            dv_j[e] = sv;
        }
    }
}

extern "C" void dti_nn_cuda_attention_forward(const float *qkv, float *att, float *y, int B,
                                              int T, int H, int d)
{
    size_t rows = (size_t)B * H * T;
    if (rows == 0 || d <= 0)
        return;
    float scale = 1.0f / sqrtf((float)d);                  /* as head_forward's */
    attn_forward_kernel<<<LAUNCH_ROWS(rows)>>>(qkv, att, y, B, T, H, d, scale);
    DTI_LAUNCHED();
}

extern "C" void dti_nn_cuda_attention_backward(const float *qkv, const float *att,
                                               const float *dy, float *datt, float *dqkv,
                                               int B, int T, int H, int d)
{
    size_t rows = (size_t)B * H * T;
    if (rows == 0 || d <= 0)
        return;
    float scale = 1.0f / sqrtf((float)d);
    attn_backward_rows_kernel<<<LAUNCH_ROWS(rows)>>>(qkv, att, dy, datt, dqkv, B, T, H, d,
                                                     scale);
    DTI_LAUNCHED();
    /* no reduction there: a block of d threads (whole warps) when d is below 256 */
    int threads = d < NN_THREADS ? (d + 31) / 32 * 32 : NN_THREADS;
    attn_backward_cols_kernel<<<nn_blocks(rows, 1), threads, 0, cudaStreamPerThread>>>(
        qkv, att, dy, datt, dqkv, B, T, H, d, scale);
    DTI_LAUNCHED();
}

/* ==== the residual add, and rows copied ==== */

static __global__ void add_kernel(float *dst, const float *src, size_t n)
{
    FOR_EACH(i, n)
        dst[i] += src[i];
}

/* rows rows of width floats: row r from src + r sld to dst + r dld */
static __global__ void copy_rows_kernel(float *dst, size_t dld, const float *src,
                                        size_t sld, size_t width, size_t rows)
{
    FOR_EACH(i, rows * width) {
        size_t r = i / width, c = i % width;
        dst[r * dld + c] = src[r * sld + c];
    }
}

extern "C" void dti_nn_cuda_add(float *dst, const float *src, size_t n)
{
    if (n == 0)
        return;
    add_kernel<<<LAUNCH_ITEMS(n)>>>(dst, src, n);
    DTI_LAUNCHED();
}

extern "C" void dti_nn_cuda_copy_rows(float *dst, size_t dld, const float *src, size_t sld,
                                      size_t width, size_t rows)
{
    if (width == 0 || rows == 0)
        return;
    copy_rows_kernel<<<LAUNCH_ITEMS(rows * width)>>>(dst, dld, src, sld, width, rows);
    DTI_LAUNCHED();
}
