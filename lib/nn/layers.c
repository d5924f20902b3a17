/* The layers of the MLP (see nn.h): linear, the activations, softmax cross-entropy.
 *
 * Each function is a plain loop over host memory, the reference; when its pointers are
 * on the GPU it hands the same call to its CUDA twin (nn_cuda.h, nn_kernels.cu).
 *
 * The linear layer is where the time goes: B*in*out multiply-adds each way. On the host
 * it is three matrix products, which OpenBLAS's sgemm does (blas.c) unless DT_BLAS=0
 * chose the loops. The loops are ordered so that the innermost one walks memory
 * contiguously (rows of x, W, dW, dx), never with a stride; but they read all of W for
 * every row of x, and a W larger than the cache then comes from memory B times, which
 * is what sgemm's tiles avoid (5-10x on a CPU). Shapes as in nn.h:
 * x (B, in), W (out, in), b (out), y (B, out). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "nn.h"
#include "nn_cuda.h"
#include "nn_internal.h"

int dti_nn_on_gpu(const char *fn, const void *const *ptrs, int n)
{
    int gpu = -1;
    for (int i = 0; i < n; i++) {
        if (ptrs[i] == NULL)
            continue;
        int d = dt_is_device_ptr(ptrs[i]);
        DT_REQUIRE(gpu < 0 || gpu == d, "%s: some buffers are on the GPU and some on the "
                   "host; all of them must be on one side", fn);
        gpu = d;
    }
    return gpu == 1;
}

static void check_shape(const char *fn, int B, int in, int out)
{
    DT_REQUIRE(B >= 0 && in > 0 && out > 0,
               "%s: bad shape B=%d in=%d out=%d (B >= 0, in and out >= 1)", fn, B, in, out);
}

/* ==== linear: y = x W^T + b ==== */

/* Neither works in place: y, and dx, dW, db, must not overlap the inputs. */

/* The dot product of two rows of n floats, in eight running sums. One sum would make
 * every addition wait for the one before; eight independent sums fill a vector register
 * (the compiler may not reorder float additions itself, since that changes rounding).
 * They are combined in a fixed order, so the result is the same on every run. */
static float dot(const float *a, const float *b, int n)
{
    float s[8] = { 0 };
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++)
            s[k] += a[i + k] * b[i + k];
    float tail = 0.0f;
    for (; i < n; i++)
        tail += a[i] * b[i];
    return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7])) + tail;
}

/* The bias with sgemm, on the threads of lib/nn's loops (nn_internal.h). Forward: rows
 * [r0, r1) of y (B, out) = b. Backward: db += the column sums of dy (B, out), blocks of
 * columns [k0, k1), each column's rows in order, as the loops add them. */
struct bias_args {
    const float *dy, *b;
    float *y;                    /* forward: y; backward: db */
    int out, B;
};

static void bias_forward(void *ctx, size_t r0, size_t r1)
{
    struct bias_args *g = ctx;
    for (size_t r = r0; r < r1; r++)
        memcpy(g->y + r * g->out, g->b, sizeof(float) * g->out);
}

DTI_NN_WIDE static void bias_backward(void *ctx, size_t k0, size_t k1)
{
    struct bias_args *g = ctx;
    int out = g->out, o0 = (int)k0 * DTI_NN_COLS, o1 = (int)k1 * DTI_NN_COLS;
    o1 = o1 < out ? o1 : out;
    for (int r = 0; r < g->B; r++)
        for (int o = o0; o < o1; o++)
            g->y[o] += g->dy[(size_t)r * out + o];
}

/* nn.h: per thread, as each thread computes its own micro-batch or replica */
static _Thread_local int half_products;

int dt_nn_half_products(int on)
{
    int was = half_products;
    half_products = on != 0;
    return was;
}

void dt_linear_forward(const float *x, const float *W, const float *b, float *y,
                       int B, int in, int out)
{
    check_shape("dt_linear_forward", B, in, out);
    if (B == 0)
        return;
    DT_REQUIRE(x && W && y, "dt_linear_forward: x, W and y must not be NULL");
    const void *p[] = { x, W, b, y };
    if (dti_nn_on_gpu("dt_linear_forward", p, 4)) {
        dti_nn_cuda_linear_forward(x, W, b, y, B, in, out, half_products);
        return;
    }
    if (dt_blas()) {                /* y = x W^T (+ b, put in y first) */
        if (b) {
            struct bias_args g = { .b = b, .y = y, .out = out };
            dti_nn_parallel((size_t)B, (size_t)B * out, bias_forward, &g);
        }
        dti_sgemm(0, 1, B, out, in, 1.0f, x, W, b ? 1.0f : 0.0f, y);
        return;
    }
    /* y[b][o] = b[o] + sum_i x[b][i] W[o][i]: row b of x against row o of W, both
     * contiguous, because W is stored (out, in). */
    for (int r = 0; r < B; r++) {
        const float *x_r = x + (size_t)r * in;      /* (in) */
        float *y_r = y + (size_t)r * out;           /* (out) */
        for (int o = 0; o < out; o++) {
            const float *W_o = W + (size_t)o * in;  /* (in) */
            y_r[o] = (b ? b[o] : 0.0f) + dot(x_r, W_o, in);
        }
    }
}

void dt_linear_backward(const float *x, const float *W, const float *dy,
                        float *dx, float *dW, float *db, int B, int in, int out)
{
    check_shape("dt_linear_backward", B, in, out);
    if (B == 0)
        return;
    DT_REQUIRE(dy && (W || !dx) && (dW ? x != NULL : db == NULL), "dt_linear_backward: "
               "dy must not be NULL, nor W with dx, nor x with dW; without dW, no db");
    const void *p[] = { x, W, dy, dx, dW, db };
    if (dti_nn_on_gpu("dt_linear_backward", p, 6)) {
        dti_nn_cuda_linear_backward(x, W, dy, dx, dW, db, B, in, out, half_products);
        return;
    }
    if (dt_blas()) {                /* dW += dy^T x; db += column sums; dx = dy W */
        if (dW)
            dti_sgemm(1, 0, out, in, B, 1.0f, dy, x, 1.0f, dW);
        if (db) {
            struct bias_args g = { .dy = dy, .y = db, .out = out, .B = B };
            dti_nn_parallel((size_t)(out + DTI_NN_COLS - 1) / DTI_NN_COLS, (size_t)B * out,
                            bias_backward, &g);
        }
        if (dx)
            dti_sgemm(0, 0, B, in, out, 1.0f, dy, W, 0.0f, dx);
        return;
    }
    /* dW[o][i] += sum_r dy[r][o] x[r][i], and db[o] += sum_r dy[r][o]: for each output
     * o, row o of dW (in floats, it stays in cache) gathers row r of x scaled by
     * dy[r][o], rows r = 0, 1, ... in order. Adding them straight into dW in that order
     * means two half-batches, one call after the other, round exactly as the whole. */
    for (int o = 0; dW && o < out; o++) {
        float *dW_o = dW + (size_t)o * in;          /* (in) */
        for (int r = 0; r < B; r++) {
            const float *x_r = x + (size_t)r * in;  /* (in) */
            float g = dy[(size_t)r * out + o];
            for (int i = 0; i < in; i++)
                dW_o[i] += g * x_r[i];
            if (db)
                db[o] += g;
        }
    }
    if (dx == NULL)
        return;
    /* dx[r][i] = sum_o dy[r][o] W[o][i]: row r of dx gathers the rows of W, each scaled
     * by one number of dy. */
    for (int r = 0; r < B; r++) {
        const float *dy_r = dy + (size_t)r * out;   /* (out) */
        float *dx_r = dx + (size_t)r * in;          /* (in) */
        for (int i = 0; i < in; i++)
            dx_r[i] = 0.0f;
        for (int o = 0; o < out; o++) {
            const float *W_o = W + (size_t)o * in;  /* (in) */
            float g = dy_r[o];
            for (int i = 0; i < in; i++)
                dx_r[i] += g * W_o[i];
        }
    }
}

/* ==== activations ==== */

/* GELU, the tanh approximation of GPT-2 (and llm.c):
 *     gelu(x) = 0.5 x (1 + tanh(u)),   u = s (x + c x^3),   s = sqrt(2/pi), c = 0.044715
 * and its exact derivative (the chain rule through tanh, tanh' = 1 - tanh^2):
 *     gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) s (1 + 3 c x^2),   t = tanh(u)
 * Computed as what they are, with the sigmoid: 0.5 (1 + tanh u) = sig = 1 / (1 + e^-2u)
 * and 0.5 (1 - t^2) = 2 sig (1 - sig), 1 - sig = e^-2u sig. Written with tanh, 1 + t
 * loses every digit where t is near -1 (x below about -4); with the sigmoid each factor
 * keeps float's precision.
 * ReLU is max(x, 0), with derivative 1 for x > 0 and 0 otherwise (0 at x = 0 too). */
#define GELU_S 0.7978845608028654f
#define GELU_C 0.044715f

/* e^y in plain float arithmetic, so that the compiler can run GELU's loops on vector
 * registers (a call to the C library's tanhf cannot be: it took 40% of a GELU MLP's
 * training step). e^y = 2^n e^r with n = round(y / ln 2), |r| <= ln(2)/2, e^r by its
 * Taylor series to r^7 (error below 2e-8 relative), 2^n made from its exponent bits;
 * y is clamped to [-87, 87], where 2^n stays a normal float. Relative error about
 * 2e-7; unit_nn holds it to double precision's exp. Every element takes the same path,
 * so a result does not depend on where it sits in the array. (The Makefile's
 * -fno-trapping-math lets GCC turn the clamps into vector min and max.) */
static inline float exp_fast(float y)
{
    y = y > 87.0f ? 87.0f : y;
    y = y < -87.0f ? -87.0f : y;
    int n = (int)(y * 1.44269504f + 128.5f) - 128;      /* round(y / ln 2), |n| <= 126 */
    float r = (y - n * 0.693145752f) - n * 1.42860677e-6f;   /* ln 2 in two parts */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120
              + r * (1.0f / 720 + r * (1.0f / 5040)))))));
    union { int i; float f; } two = { .i = (n + 127) << 23 };    /* 2^n */
    return p * two.f;
}

float dti_nn_exp(float y) { return exp_fast(y); }

/* The loops below run on vector registers whether or not their output is their input
 * (ivdep): right when the two are the same array or apart, as each element is read
 * before it is written; wrong if they partly overlap, which is refused. */
static int apart_or_same(const float *a, const float *b, size_t n)
{
    return a == b || a + n <= b || b + n <= a;
}

static void check_act(const char *fn, dt_act a)
{
    DT_REQUIRE(a == DT_RELU || a == DT_GELU, "%s: unknown activation %d", fn, (int)a);
}

/* Values [i0, i1): y = act(x), or dx = act'(x) dy (y for dx), each value its own, so a
 * thread of lib/nn's loops (nn_internal.h) can take any of them. Both work in place
 * (y == x, dx == dy): each element is read before it is written. */
struct act_args {
    dt_act a;
    const float *x, *dy;
    float *y;
};

DTI_NN_WIDE static void act_forward(void *ctx, size_t i0, size_t i1)
{
    struct act_args *g = ctx;
    const float *x = g->x;
    float *y = g->y;
    if (g->a == DT_RELU) {
#pragma GCC ivdep
        for (size_t i = i0; i < i1; i++)
            y[i] = x[i] > 0.0f ? x[i] : 0.0f;
    } else {
#pragma GCC ivdep
        for (size_t i = i0; i < i1; i++) {
            float v = x[i];
            float sig = 1.0f / (1.0f + exp_fast(-2.0f * GELU_S * (v + GELU_C * v * v * v)));
            y[i] = v * sig;
        }
    }
}

DTI_NN_WIDE static void act_backward(void *ctx, size_t i0, size_t i1)
{
    struct act_args *g = ctx;
    const float *x = g->x, *dy = g->dy;
    float *dx = g->y;
    if (g->a == DT_RELU) {
#pragma GCC ivdep
        for (size_t i = i0; i < i1; i++) {
            float d = dy[i];          /* read whatever x says: a select, not a branch, */
            dx[i] = x[i] > 0.0f ? d : 0.0f;    /* which the compiler vectorises */
        }
    } else {
#pragma GCC ivdep
        for (size_t i = i0; i < i1; i++) {
            float v = x[i];
            float e = exp_fast(-2.0f * GELU_S * (v + GELU_C * v * v * v));
            float sig = 1.0f / (1.0f + e);
            float local = sig + 2.0f * sig * (e * sig) * v * GELU_S
                                * (1.0f + 3.0f * GELU_C * v * v);
            dx[i] = local * dy[i];
        }
    }
}

void dt_act_forward(dt_act a, const float *x, float *y, size_t n)
{
    check_act("dt_act_forward", a);
    if (n == 0)
        return;
    DT_REQUIRE(x && y, "dt_act_forward: x and y must not be NULL");
    const void *p[] = { x, y };
    if (dti_nn_on_gpu("dt_act_forward", p, 2)) {
        dti_nn_cuda_act_forward((int)a, x, y, n);
        return;
    }
    DT_REQUIRE(apart_or_same(x, y, n), "dt_act_forward: y partly overlaps x");
    struct act_args g = { a, x, NULL, y };
    dti_nn_parallel(n, 2 * n, act_forward, &g);
}

void dt_act_backward(dt_act a, const float *x, const float *dy, float *dx, size_t n)
{
    check_act("dt_act_backward", a);
    if (n == 0)
        return;
    DT_REQUIRE(x && dy && dx, "dt_act_backward: x, dy and dx must not be NULL");
    const void *p[] = { x, dy, dx };
    if (dti_nn_on_gpu("dt_act_backward", p, 3)) {
        dti_nn_cuda_act_backward((int)a, x, dy, dx, n);
        return;
    }
    DT_REQUIRE(apart_or_same(x, dx, n) && apart_or_same(dy, dx, n),
               "dt_act_backward: dx partly overlaps x or dy");
    struct act_args g = { a, x, dy, dx };
    dti_nn_parallel(n, 3 * n, act_backward, &g);
}

/* ==== softmax cross-entropy ==== */

/* For one row of logits l (C) with label y:
 *     p_c = exp(l_c - m) / sum_k exp(l_k - m),   m = max_k l_k
 *     loss = -log p_y = log(sum_k exp(l_k - m)) - (l_y - m)
 *     dloss/dl_c = p_c - [c == y]
 * Subtracting the row's maximum changes nothing mathematically and keeps exp() from
 * overflowing: the largest term is exp(0) = 1, so the sum lies in [1, C]. dlogits may be
 * logits (in place), or NULL when only the loss is wanted.
 * xent_rows does rows [r0, r1), a share of lib/nn's threads (nn_internal.h): each row's
 * loss to loss[r] (double), and its row of dlogits; dt_xent adds the losses in row
 * order, as one loop over the rows would. */
struct xent_args {
    const float *logits;
    const int *labels;
    int C;
    float scale;
    float *dlogits;
    double *loss;
};

DTI_NN_WIDE static void xent_rows(void *ctx, size_t r0, size_t r1)
{
    struct xent_args *g = ctx;
    int C = g->C;
    for (size_t r = r0; r < r1; r++) {
        const float *l_r = g->logits + r * C;      /* (C) */
        int y = g->labels[r];
        float m = l_r[0];
        for (int c = 1; c < C; c++)
            m = l_r[c] > m ? l_r[c] : m;
        float sum = 0.0f;
        for (int c = 0; c < C; c++)
            sum += expf(l_r[c] - m);
        g->loss[r] = (double)logf(sum) - (double)(l_r[y] - m);
        if (g->dlogits) {
            float *d_r = g->dlogits + r * C;       /* (C) */
            for (int c = 0; c < C; c++) {
                float pc = expf(l_r[c] - m) / sum;
                d_r[c] = g->scale * (pc - (c == y ? 1.0f : 0.0f));
            }
        }
    }
}

float dt_xent(const float *logits, const int *labels, int B, int C, float scale,
              float *dlogits)
{
    DT_REQUIRE(B >= 0 && C > 0, "dt_xent: bad shape B=%d C=%d", B, C);
    if (B == 0)
        return 0.0f;
    DT_REQUIRE(logits && labels, "dt_xent: logits and labels must not be NULL");
    const void *p[] = { logits, labels, dlogits };
    if (dti_nn_on_gpu("dt_xent", p, 3))
        return dti_nn_cuda_xent(logits, labels, B, C, scale, dlogits);
    for (int r = 0; r < B; r++)
        DT_REQUIRE(labels[r] >= 0 && labels[r] < C, "dt_xent: label %d of row %d is not "
                   "a class (0..%d)", labels[r], r, C - 1);
    /* the rows on lib/nn's threads, each row's loss kept, then added up in row order */
    double *loss = malloc((size_t)B * sizeof *loss), total = 0.0;      /* (B) */
    DT_REQUIRE(loss != NULL, "dt_xent: out of host memory");
    struct xent_args g = { logits, labels, C, scale, dlogits, loss };
    dti_nn_parallel((size_t)B, 2 * (size_t)B * C, xent_rows, &g);
    for (int r = 0; r < B; r++)
        total += loss[r];
    free(loss);
    return (float)total;
}
