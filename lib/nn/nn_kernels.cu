/* The CUDA side of lib/nn: the same operations as the CPU loops in lib/nn, on device
 * pointers. The matrix products go to cuBLAS; the element-wise work (bias, activations,
 * optimizers), the bias gradient and the softmax cross-entropy are kernels here. The CPU
 * path is the reference: a GPU test runs each function both ways on the same inputs and
 * compares to rounding (the GPU sums in another order and fuses multiply-adds).
 *
 * Every launcher checks its launches and returns with its work queued, not done
 * (dti_cuda_queued; device.cu's "Queued work" says where the host waits instead: where
 * results change hands, a number is read, or a compute event or step is timed; DT_SYNC=1
 * waits after every launcher, to find one that faults). Everything runs on
 * cudaStreamPerThread, the calling thread's own stream, cuBLAS included, so the kernels
 * and the products of one thread run in the order they were queued, and its copies
 * after them; and a wait is for that stream alone, not the whole GPU, so the main
 * thread's compute and DDP's communication thread (its copies and reductions on its own
 * stream, device.cu) overlap instead of waiting for each other. */
#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include "cuda.h"
#include "errors.h"
#include "nn_cuda.h"
#include "nn.h"
#include "nn_device.cuh"

/* ==== cuBLAS, loaded on the first product ====
 *
 * cuBLAS is a shared library of several hundred megabytes (with cuBLASLt, which it
 * loads). Linked as usual, every process of a CUDA build maps it at start, 70 ms on the
 * CPU of a test machine, even a rank that never touches a GPU: the test suite starts
 * thousands. So it is opened here, on the first product, by dlopen: the toolkit's copy
 * that the build was compiled against (DT_CUBLAS, the Makefile's), else the one the
 * dynamic linker finds by its version's name. The six functions dtlab calls are looked
 * up by their exported names (cublas_v2.h's cublasCreate is cublasCreate_v2, ...). */
#define DT_STR2(x) #x
#define DT_STR(x) DT_STR2(x)
#ifndef DT_CUBLAS
#define DT_CUBLAS "libcublas.so." DT_STR(CUBLAS_VER_MAJOR)
#endif

static struct {
    cublasStatus_t (*create)(cublasHandle_t *);
    cublasStatus_t (*math_mode)(cublasHandle_t, cublasMath_t);
    cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t);
    cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                            int, const float *, const float *, int, const float *, int,
                            const float *, float *, int);
    cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                              int, int, const void *, const void *, cudaDataType,
                              int, const void *, cudaDataType, int, const void *, void *,
                              cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    const char *(*status)(cublasStatus_t);
} cb;

static void *cublas_symbol(void *lib, const char *name)
{
    void *f = dlsym(lib, name);
    if (!f)
        dti_die(__FILE__, __LINE__, "cuBLAS has no %s: %s", name, dlerror());
    return f;
}

static void load_cublas(void)
{
    const char *names[] = { DT_CUBLAS, "libcublas.so." DT_STR(CUBLAS_VER_MAJOR) };
    void *lib = NULL;
    for (int i = 0; i < 2 && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        dti_die(__FILE__, __LINE__, "cuBLAS could not be loaded (%s): %s", names[0],
                dlerror());
    cb.create = (cublasStatus_t (*)(cublasHandle_t *))cublas_symbol(lib, "cublasCreate_v2");
    cb.math_mode = (cublasStatus_t (*)(cublasHandle_t, cublasMath_t))
        cublas_symbol(lib, "cublasSetMathMode");
    cb.set_stream = (cublasStatus_t (*)(cublasHandle_t, cudaStream_t))
        cublas_symbol(lib, "cublasSetStream_v2");
    cb.sgemm = (decltype(cb.sgemm))cublas_symbol(lib, "cublasSgemm_v2");
    cb.gemm_ex = (decltype(cb.gemm_ex))cublas_symbol(lib, "cublasGemmEx");
    cb.status = (const char *(*)(cublasStatus_t))cublas_symbol(lib, "cublasGetStatusString");
}

#define DT_CHECK_CUBLAS(call) \
    do { cublasStatus_t s_ = (call); \
         if (s_ != CUBLAS_STATUS_SUCCESS) \
             dti_die(__FILE__, __LINE__, "%s failed: %s", #call, cb.status(s_)); \
    } while (0)

/* ==== cuBLAS: one handle per thread ==== */

/* A cuBLAS handle holds the library's context on the current GPU (created on the first
 * product, after dt_init has chosen this rank's GPU) and is meant to be reused: creating
 * one costs far more than a small product. Each thread that multiplies gets its own,
 * made on its first product (a thread_local initialised by a call): a handle keeps a
 * workspace for its products, and two threads computing at once through one handle
 * (dp-threads' replicas) could share it. The handles are never destroyed: the process's
 * exit releases them, and destroying one from an atexit handler could run after the
 * CUDA runtime has already been torn down (a thread that ends leaks its handle: dtlab's
 * threads live as long as their run).
 *
 * The math mode stays the default, true fp32: TF32 tensor cores would keep 10 bits of
 * mantissa instead of 23, and the GPU would no longer agree with the CPU to rounding.
 *
 * The stream is cudaStreamPerThread, which names the stream of whichever thread makes
 * the call: the products run on the caller's stream, in order with its kernels. (A
 * handle left on stream 0 would use the legacy default stream, which waits for every
 * other stream of the device, the communication thread's included.) */
static cublasHandle_t create_handle(void)
{
    cublasHandle_t h;
    load_cublas();
    DT_CHECK_CUBLAS(cb.create(&h));
    DT_CHECK_CUBLAS(cb.math_mode(h, CUBLAS_DEFAULT_MATH));
    DT_CHECK_CUBLAS(cb.set_stream(h, cudaStreamPerThread));
    return h;
}

static cublasHandle_t blas(void)
{
    static thread_local cublasHandle_t h = create_handle();
    return h;
}

/* cublasSgemm on this thread's handle (made, and cuBLAS loaded, before the call); with
 * half (mixed precision: nn.h's dt_nn_half_products), the same product of fp32 matrices
 * holding fp16 values on the tensor cores: cuBLAS converts A and B to fp16 (exact for
 * such values), multiplies them there and sums in fp32 into C. */
static cublasStatus_t sgemm(int half, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const float *alpha, const float *A, int lda,
                            const float *B, int ldb, const float *beta, float *C, int ldc)
{
    cublasHandle_t h = blas();
    dti_book(DTI_BOOK_LAUNCH, 1);
    if (half)
        return cb.gemm_ex(h, ta, tb, m, n, k, alpha, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb,
                          beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F_FAST_16F,
                          CUBLAS_GEMM_DEFAULT);
    return cb.sgemm(h, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* ==== linear layer ==== */

/* Row-major and column-major. dtlab stores a (rows, cols) matrix row after row; cuBLAS
 * reads memory column after column. The same bytes read column-major are the transpose:
 * a row-major (r, c) matrix with leading dimension c IS the column-major (c, r) matrix,
 * its transpose, with leading dimension c. So each row-major product P = A B is asked
 * of cuBLAS as its transpose, P^T = B^T A^T, where every ^T costs nothing: it is how
 * cuBLAS already sees our data. In the calls below "(c, r) col" names what cuBLAS sees.
 *
 *   cublasSgemm(h, opA, opB, m, n, k, &alpha, A, lda, B, ldb, &beta, C, ldc)
 *   computes C = alpha op(A) op(B) + beta C with op(A) (m, k), op(B) (k, n), C (m, n),
 *   all column-major; lda is the number of rows of A as stored (before op). */

/* y[b, j] += bias[j] for the (B, out) matrix y, flattened: item i is row i / out,
 * column i % out. */
static __global__ void add_bias_kernel(float *y, const float *bias, size_t rows, int out)
{
    size_t total = rows * out;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x)
        y[i] += bias[i % out];
}

/* db[j] += sum over rows b of dy[b, j]. A block takes CS_COLS neighbouring columns with
 * CS_LANES lanes of rows each: lane r sums rows r, r + CS_LANES, ... of its column (the
 * threads of a warp read 32 neighbouring floats of one row: coalesced), then the first
 * lane adds the lanes' partial sums, in lane order, to db[j]. Each thread adds B/8 rows,
 * not all B, and 8 times as many threads work (one thread per column would leave the GPU
 * nearly idle when out is small: the 10 classes of the last layer). Always the same
 * order, so the same bits on every run; not the CPU loop's order (rows one after
 * another), so it agrees with the loop to rounding. */
#define CS_COLS 32
#define CS_LANES 8
static __global__ void col_sum_kernel(const float *dy, float *db, int B, int out)
{
    __shared__ float part[CS_LANES][CS_COLS];
    int c = threadIdx.x % CS_COLS, lane = threadIdx.x / CS_COLS;
    /* j0 is the same for every thread of the block: the barriers are reached by all */
    for (size_t j0 = (size_t)blockIdx.x * CS_COLS; j0 < (size_t)out;
         j0 += (size_t)gridDim.x * CS_COLS) {
        size_t j = j0 + c;
        float s = 0.0f;
        if (j < (size_t)out)
            for (int b = lane; b < B; b += CS_LANES)
                s += dy[(size_t)b * out + j];
        part[lane][c] = s;
        __syncthreads();
        if (lane == 0 && j < (size_t)out) {
            float t = db[j];
            for (int r = 0; r < CS_LANES; r++)
                t += part[r][c];
            db[j] = t;
        }
        __syncthreads();               /* part is reused by the next columns */
    }
}

/* y = x W^T + b: x (B, in), W (out, in), b (out) or NULL, y (B, out). */
extern "C" void dti_nn_cuda_linear_forward(const float *x, const float *W, const float *b,
                                           float *y, int B, int in, int out, int half)
{
    DT_REQUIRE(B >= 0 && in > 0 && out > 0,
               "linear layer of %d rows, %d inputs, %d outputs", B, in, out);
    if (B == 0)
        return;
    const float one = 1.0f, zero = 0.0f;
    /* y^T (out, B) = W (out, in) x^T (in, B), column-major:
     *   A = W  stored as W^T (in, out) col, lda = in;  op T gives W   (m = out, k = in)
     *   B = x  stored as x^T (in, B)   col, ldb = in;  op N keeps x^T (k = in,  n = B)
     *   C = y  stored as y^T (out, B)  col, ldc = out */
    DT_CHECK_CUBLAS(sgemm(half, CUBLAS_OP_T, CUBLAS_OP_N, out, B, in,
                          &one, W, in, x, in, &zero, y, out));
    if (b) {
        size_t total = (size_t)B * out;
        add_bias_kernel<<<LAUNCH_ITEMS(total)>>>(
            y, b, (size_t)B, out);
        dti_book(DTI_BOOK_LAUNCH, 1);
    }
    dti_cuda_queued();
}

/* dW += dy^T x, db += column sums of dy, dx = dy W (dx, db may be NULL). */
extern "C" void dti_nn_cuda_linear_backward(const float *x, const float *W, const float *dy,
                                            float *dx, float *dW, float *db,
                                            int B, int in, int out, int half)
{
    DT_REQUIRE(B >= 0 && in > 0 && out > 0,
               "linear layer of %d rows, %d inputs, %d outputs", B, in, out);
    if (B == 0)                /* no rows: nothing to add, and dx (0, in) is empty */
        return;
    const float one = 1.0f, zero = 0.0f;
    /* dW^T (in, out) += x^T (in, B) dy (B, out), column-major:
     *   A = x   stored as x^T (in, B)   col, lda = in;  op N keeps x^T (m = in, k = B)
     *   B = dy  stored as dy^T (out, B) col, ldb = out; op T gives dy   (k = B,  n = out)
     *   C = dW  stored as dW^T (in, out) col, ldc = in; beta = 1 accumulates */
    if (dW)
        DT_CHECK_CUBLAS(sgemm(half, CUBLAS_OP_N, CUBLAS_OP_T, in, out, B,
                              &one, x, in, dy, out, &one, dW, in));
    if (db) {
        int blocks = (out + CS_COLS - 1) / CS_COLS;
        col_sum_kernel<<<blocks < 4096 ? blocks : 4096, CS_COLS * CS_LANES, 0,
                         cudaStreamPerThread>>>(dy, db, B, out);
        dti_book(DTI_BOOK_LAUNCH, 1);
    }
    if (dx) {
        /* dx^T (in, B) = W^T (in, out) dy^T (out, B), column-major:
         *   A = W   stored as W^T (in, out) col, lda = in;  op N (m = in,  k = out)
         *   B = dy  stored as dy^T (out, B) col, ldb = out; op N (k = out, n = B)
         *   C = dx  stored as dx^T (in, B)  col, ldc = in;  beta = 0 overwrites */
        DT_CHECK_CUBLAS(sgemm(half, CUBLAS_OP_N, CUBLAS_OP_N, in, B, out,
                              &one, W, in, dy, out, &zero, dx, in));
    }
    dti_cuda_queued();
}

/* ==== activations ==== */

/* GELU, tanh approximation:  gelu(x) = x/2 (1 + tanh(u)),  u = s (x + c x^3),
 * s = sqrt(2/pi), c = 0.044715. Its exact derivative, with t = tanh(u):
 *   gelu'(x) = (1 + t)/2 + x/2 (1 - t^2) s (1 + 3 c x^2).
 * The same constants and expressions as layers.c. Each thread reads element i before it
 * writes it, so both kernels work in place (y == x, dx == dy). */
#define GELU_S 0.7978845608028654f
#define GELU_C 0.044715f

static __global__ void act_forward_kernel(int act, const float *x, float *y, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        if (act == DT_RELU) {
            y[i] = v > 0.0f ? v : 0.0f;
        } else {
            float u = GELU_S * (v + GELU_C * v * v * v);
            y[i] = 0.5f * v * (1.0f + tanhf(u));
        }
    }
}

/* dx = act'(x) dy; ReLU's derivative is taken as 0 at x = 0. */
static __global__ void act_backward_kernel(int act, const float *x, const float *dy,
                                           float *dx, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float v = x[i];
        if (act == DT_RELU) {
            dx[i] = v > 0.0f ? dy[i] : 0.0f;
        } else {
            float u = GELU_S * (v + GELU_C * v * v * v);
            float t = tanhf(u);
            float d = 0.5f * (1.0f + t)
                    + 0.5f * v * (1.0f - t * t) * GELU_S * (1.0f + 3.0f * GELU_C * v * v);
            dx[i] = d * dy[i];
        }
    }
}

extern "C" void dti_nn_cuda_act_forward(int act, const float *x, float *y, size_t n)
{
    DT_REQUIRE(act == DT_RELU || act == DT_GELU, "unknown activation %d", act);
    if (n == 0)
        return;
    act_forward_kernel<<<LAUNCH_ITEMS(n)>>>(act, x, y, n);
    dti_book(DTI_BOOK_LAUNCH, 1);
    dti_cuda_queued();
}

extern "C" void dti_nn_cuda_act_backward(int act, const float *x, const float *dy, float *dx,
                                         size_t n)
{
    DT_REQUIRE(act == DT_RELU || act == DT_GELU, "unknown activation %d", act);
    if (n == 0)
        return;
    act_backward_kernel<<<LAUNCH_ITEMS(n)>>>(act, x, dy, dx, n);
    dti_book(DTI_BOOK_LAUNCH, 1);
    dti_cuda_queued();
}

/* ==== softmax cross-entropy ==== */

/* One block per row of logits (B, C), for rows blockIdx.x, + gridDim.x, ...
 * Stable softmax: with m the row's maximum, p_j = e^(l_j - m) / s, s = sum_j e^(l_j - m),
 * so no exponential overflows. The row's loss is -log p_y = log s - (l_y - m), written to
 * rowloss[row] in double, as the CPU path adds it (xent_sum_kernel adds the rows up).
 * dlogits_j = scale (p_j - [j == y]), unless dlogits is NULL (the loss alone).
 * A label outside 0..C-1 stores row + 1 in *bad (atomicMax: the host reports the last
 * such row) and leaves that row alone.
 * dlogits may be logits: l_y is read before the first barrier, so before any thread
 * writes, and each thread then reads and writes only its own columns j = t + k*256. */
static __global__ void xent_kernel(const float *logits, const int *labels, int B, int C,
                                   float scale, float *dlogits, double *rowloss, int *bad)
{
    __shared__ float sh[NN_THREADS];
    int t = threadIdx.x;
    for (int row = blockIdx.x; row < B; row += gridDim.x) {
        const float *l = logits + (size_t)row * C;     /* (C) */
        int y = labels[row];
        if (y < 0 || y >= C) {          /* the same y for the whole block: no thread waits */
            if (t == 0)
                atomicMax(bad, row + 1);
            continue;
        }
        float ly = l[y];

        float m = -INFINITY;
        for (int j = t; j < C; j += NN_THREADS)
            m = fmaxf(m, l[j]);
        m = block_reduce(sh, m, 1);

        float s = 0.0f;
        for (int j = t; j < C; j += NN_THREADS)
            s += expf(l[j] - m);
        s = block_reduce(sh, s, 0);

        if (t == 0)
            rowloss[row] = (double)logf(s) - (double)(ly - m);
        if (dlogits) {
            float *d = dlogits + (size_t)row * C;      /* (C) */
            for (int j = t; j < C; j += NN_THREADS) {
                float p = expf(l[j] - m) / s;
                d[j] = scale * (p - (j == y ? 1.0f : 0.0f));
            }
        }
    }
}

/* The sum of the B row losses, in a fixed order: one block, thread t adding rows t,
 * t + NN_THREADS, ... in double, then a tree over the threads (the same order on every
 * run, a different one from the CPU's loop: the two agree to rounding). Thread 0 writes
 * the total into out->total beside the bad-label flag, so that the host reads both in
 * one copy. */
typedef struct {
    double total;
    int bad;
} xent_out;

static __global__ void xent_sum_kernel(const double *rowloss, int B, xent_out *out)
{
    __shared__ double sh[NN_THREADS];
    int t = threadIdx.x;
    double v = 0.0;
    for (int i = t; i < B; i += NN_THREADS)
        v += rowloss[i];
    sh[t] = v;
    __syncthreads();
    for (int s = NN_THREADS / 2; s > 0; s >>= 1) {
        if (t < s)
            sh[t] += sh[t + s];
        __syncthreads();
    }
    if (t == 0)
        out->total = sh[0];
}

/* Scratch kept between calls, grown to the largest batch seen (one allocation for the
 * run in practice: a step allocates nothing): the row losses, and the total with the
 * bad-label flag. Per thread (dp-threads' replicas each take a loss); the process's exit
 * frees them. */
static thread_local double *xent_dloss;
static thread_local xent_out *xent_dout;
static thread_local int xent_cap;

static void xent_scratch(int B)
{
    if (!xent_dout)
        xent_dout = (xent_out *)dti_cuda_malloc(sizeof(xent_out));
    if (B <= xent_cap)
        return;
    if (xent_dloss)
        dti_cuda_free(xent_dloss);
    xent_dloss = (double *)dti_cuda_malloc((size_t)B * sizeof(double));
    xent_cap = B;
}

/* Returns the sum of the B row losses; dlogits may be NULL, or logits (in place). The
 * host waits once, for the one number it needs (the total and the flag, 16 bytes). */
extern "C" float dti_nn_cuda_xent(const float *logits, const int *labels, int B, int C,
                                  float scale, float *dlogits)
{
    DT_REQUIRE(B >= 0 && C > 0, "cross-entropy of %d rows of %d classes", B, C);
    if (B == 0)
        return 0.0f;
    xent_scratch(B);
    DT_CHECK_CUDA(cudaMemsetAsync(xent_dout, 0, sizeof(xent_out), cudaStreamPerThread));
    dti_book(DTI_BOOK_LAUNCH, 1);
    int blocks = B < 4096 ? B : 4096;
    xent_kernel<<<blocks, NN_THREADS, 0, cudaStreamPerThread>>>(logits, labels, B, C, scale,
                                                              dlogits, xent_dloss,
                                                              &xent_dout->bad);
    DTI_LAUNCHED();
    xent_sum_kernel<<<1, NN_THREADS, 0, cudaStreamPerThread>>>(xent_dloss, B, xent_dout);
    DTI_LAUNCHED();
    xent_out got;
    dti_cuda_read_number(&got, xent_dout, sizeof got);
    if (got.bad) {
        int y;
        dti_cuda_read_number(&y, labels + (got.bad - 1), sizeof(int));
        dti_die(__FILE__, __LINE__, "dt_xent: label %d of row %d is not a class (0..%d)",
                y, got.bad - 1, C - 1);
    }
    return (float)got.total;
}

/* ==== optimizers ==== */

/* SGD with momentum, state = the velocity v:  v = mu v + g;  p -= lr v.
 * Plain SGD (momentum 0) may go without state: v NULL, p -= lr g. */
static __global__ void sgd_kernel(float *p, const float *g, float *v, float lr, float mu,
                                  size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        if (v) {
            v[i] = mu * v[i] + gi;
            gi = v[i];
        }
        p[i] -= lr * gi;
    }
}

/* Adam, state = (m, v) per parameter, interleaved: mv[2i] = m_i, mv[2i+1] = v_i
 *   m = b1 m + (1 - b1) g;   v = b2 v + (1 - b2) g^2
 *   p -= lr (m / bc1) / (sqrt(v / bc2) + eps),   bc1 = 1 - b1^step, bc2 = 1 - b2^step
 * The bias corrections bc1, bc2 undo the pull toward 0 of m and v starting at 0; they
 * are the same for every element, so the host computes them once. */
static __global__ void adam_kernel(float *p, const float *g, float *mv, float lr,
                                   float b1, float b2, float eps, float bc1, float bc2,
                                   size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float gi = g[i];
        float mi = b1 * mv[2 * i] + (1.0f - b1) * gi;
        float vi = b2 * mv[2 * i + 1] + (1.0f - b2) * gi * gi;
        mv[2 * i] = mi;
        mv[2 * i + 1] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        p[i] -= lr * mhat / (sqrtf(vhat) + eps);
    }
}

/* kind is a dt_optim_kind; state (the layout of nn.h) may be NULL for SGD with momentum
 * 0 only. The bias corrections are computed as the CPU path computes them, in double. */
extern "C" void dti_nn_cuda_optim_step(int kind, float lr, float momentum, float beta1,
                                       float beta2, float eps, int step, float *params,
                                       const float *grads, float *state, size_t n)
{
    DT_REQUIRE(kind == DT_SGD || kind == DT_ADAM, "unknown optimizer %d", kind);
    DT_REQUIRE(kind == DT_SGD || step >= 1, "Adam step %d: steps count from 1", step);
    DT_REQUIRE(state || (kind == DT_SGD && momentum == 0.0f),
               "optimizer state is NULL (only plain SGD, momentum 0, goes without)");
    if (n == 0)
        return;
    if (kind == DT_SGD) {
        sgd_kernel<<<LAUNCH_ITEMS(n)>>>(params, grads, state,
                                                                        lr, momentum, n);
        dti_book(DTI_BOOK_LAUNCH, 1);
    } else {
        float bc1 = (float)(1.0 - pow((double)beta1, step));
        float bc2 = (float)(1.0 - pow((double)beta2, step));
        adam_kernel<<<LAUNCH_ITEMS(n)>>>(
            params, grads, state, lr, beta1, beta2, eps, bc1, bc2, n);
        dti_book(DTI_BOOK_LAUNCH, 1);
    }
    dti_cuda_queued();
}
