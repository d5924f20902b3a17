/* Unit tests of lib/nn's CUDA kernels (nn_kernels.cu) against its CPU loops, the
 * reference. No MPI.
 *
 * Every operation of nn.h that has a kernel, on shapes past what one launch covers: the
 * kernels run NN_THREADS = 256 threads a block and at most 4096 blocks, so element-wise
 * work of more than 256 * 4096 = 1,048,576 items wraps round the grid-stride loop; the
 * cross-entropy kernel takes one block a row, so more than 4096 rows wrap round the
 * grid and a row of more than 256 classes (here 1500 and 70001, past 1024 and 65535)
 * wraps round the block. In turn:
 *   - the linear layer (cuBLAS, the bias and column-sum kernels): y with and without a
 *     bias; dW and db accumulated onto what was there, dx overwritten; dx and db NULL;
 *     and mixed precision's products on the tensor cores (dt_nn_half_products: inputs
 *     holding fp16 values), which leave the host's products as they were, bit for bit;
 *   - ReLU and GELU, forward and backward, out of place and in place, with exact zeros
 *     among the inputs (ReLU's derivative there is 0 on both sides);
 *   - softmax cross-entropy: the summed loss and dlogits, dlogits NULL and in place, a
 *     row of huge logits;
 *   - SGD with momentum, plain SGD without state, and Adam, three steps each with fresh
 *     gradients.
 * Each case first holds the CPU path to a plain double-precision computation written
 * here; then, where there is a GPU, runs the kernel (through dti_nn_cuda_*, the
 * launchers nn.h's functions call for device pointers) on the same inputs and holds it
 * to the CPU's result, to fp32 rounding. Without a GPU the CPU half runs alone and main
 * says once "GPU comparisons skipped: no GPU": never a silent pass. scripts/gpu-check.sh
 * fails a run that prints it.
 *
 *   build/tests/unit_gpu_nn
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda.h"
#include "half.h"
#include "nn/nn.h"
#include "nn/nn_cuda.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* Past the grid: 4096 blocks of 256 threads cover 2^20 items per sweep. */
#define PAST_GRID ((size_t)256 * 4096 + 4097)

/* ==== helpers ==== */

static int gpu;          /* set by main: 1 when a GPU can be used */

/* The GPU's result against the CPU's (float against float), as unit_require_close. */
static void require_gpu_close(const float *d_got, const float *cpu, size_t n, double tol,
                              const char *what)
{
    float *got = unit_from_gpu(d_got, n * sizeof(float));
    double *want = unit_doubles(n);
    for (size_t i = 0; i < n; i++)
        want[i] = cpu[i];
    unit_require_close(got, want, n, tol, what);
    free(got);
    free(want);
}

/* ==== the linear layer ==== */

static const int lin_shapes[][3] = {    /* B, in, out */
    { 1, 1, 1 },
    { 3, 1100, 5 },        /* in past 1024: cuBLAS's long dot products */
    { 1030, 3, 1100 },     /* B*out past the grid (bias), out past a block (column sums) */
    { 7, 300, 2049 },
};
#define NLIN (int)(sizeof lin_shapes / sizeof lin_shapes[0])

START_TEST(test_linear)
{
    int B = lin_shapes[_i][0], in = lin_shapes[_i][1], out = lin_shapes[_i][2];
    size_t nx = (size_t)B * in, nW = (size_t)out * in, ny = (size_t)B * out;
    float *x = unit_random_floats(nx, -2, 2), *W = unit_random_floats(nW, -1, 1);
    float *b = unit_random_floats(out, -1, 1), *dy = unit_random_floats(ny, -1, 1);
    float *dW0 = unit_random_floats(nW, -1, 1), *db0 = unit_random_floats(out, -1, 1);
    float *y = malloc(ny * sizeof *y), *y0 = malloc(ny * sizeof *y0);
    float *dW = malloc(nW * sizeof *dW), *db = malloc(out * sizeof *db);
    float *dx = unit_random_floats(nx, 1e30, 2e30);     /* must be overwritten */
    double *want_y = unit_doubles(ny), *want_dW = unit_doubles(nW), *want_db = unit_doubles(out);
    double *want_dx = unit_doubles(nx);
    memcpy(dW, dW0, nW * sizeof *dW);
    memcpy(db, db0, out * sizeof *db);

    /* the CPU path against the definitions, in double */
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int i = 0; i < in; i++)
                s += (double)x[(size_t)r * in + i] * W[(size_t)o * in + i];
            want_y[(size_t)r * out + o] = s;
        }
    for (int o = 0; o < out; o++) {
        double s = db0[o];
        for (int r = 0; r < B; r++)
            s += dy[(size_t)r * out + o];
        want_db[o] = s;
        for (int i = 0; i < in; i++) {
            double t = dW0[(size_t)o * in + i];
            for (int r = 0; r < B; r++)
                t += (double)dy[(size_t)r * out + o] * x[(size_t)r * in + i];
            want_dW[(size_t)o * in + i] = t;
        }
    }
    for (int r = 0; r < B; r++)
        for (int i = 0; i < in; i++) {
            double s = 0;
            for (int o = 0; o < out; o++)
                s += (double)dy[(size_t)r * out + o] * W[(size_t)o * in + i];
            want_dx[(size_t)r * in + i] = s;
        }
    dt_linear_forward(x, W, b, y, B, in, out);
    unit_require_close(y, want_y, ny, 1e-5, "cpu y");
    dt_linear_forward(x, W, NULL, y0, B, in, out);
    dt_linear_backward(x, W, dy, dx, dW, db, B, in, out);
    unit_require_close(dW, want_dW, nW, 1e-5, "cpu dW");
    unit_require_close(db, want_db, out, 1e-5, "cpu db");
    unit_require_close(dx, want_dx, nx, 1e-5, "cpu dx");

    if (unit_use_gpu(gpu)) {
        float *d_x = unit_to_gpu(x, nx * 4), *d_W = unit_to_gpu(W, nW * 4);
        float *d_b = unit_to_gpu(b, out * 4);
        float *d_dy = unit_to_gpu(dy, ny * 4);
        float *d_y = unit_to_gpu(dx, ny * 4);                   /* junk to overwrite */
        float *d_dW = unit_to_gpu(dW0, nW * 4), *d_db = unit_to_gpu(db0, out * 4);
        float *d_dW2 = unit_to_gpu(dW0, nW * 4), *junk = unit_random_floats(nx, 1e30, 2e30);
        float *d_dx = unit_to_gpu(junk, nx * 4);
        dti_nn_cuda_linear_forward(d_x, d_W, d_b, d_y, B, in, out, 0);
        require_gpu_close(d_y, y, ny, 1e-5, "gpu y vs cpu");
        dti_nn_cuda_linear_forward(d_x, d_W, NULL, d_y, B, in, out, 0);
        require_gpu_close(d_y, y0, ny, 1e-5, "gpu y (no bias) vs cpu");
        dti_nn_cuda_linear_backward(d_x, d_W, d_dy, d_dx, d_dW, d_db, B, in, out, 0);
        require_gpu_close(d_dW, dW, nW, 1e-5, "gpu dW vs cpu");
        require_gpu_close(d_db, db, out, 1e-5, "gpu db vs cpu");
        require_gpu_close(d_dx, dx, nx, 1e-5, "gpu dx vs cpu");
        dti_nn_cuda_linear_backward(d_x, d_W, d_dy, NULL, d_dW2, NULL, B, in, out, 0);
        require_gpu_close(d_dW2, dW, nW, 1e-5, "gpu dW (no dx, no db) vs cpu");
        dti_cuda_free(d_x); dti_cuda_free(d_W); dti_cuda_free(d_b); dti_cuda_free(d_dy);
        dti_cuda_free(d_y); dti_cuda_free(d_dW); dti_cuda_free(d_db); dti_cuda_free(d_dW2);
        dti_cuda_free(d_dx); free(junk);
    }
    free(x); free(W); free(b); free(dy); free(dW0); free(db0); free(y); free(y0);
    free(dW); free(db); free(dx);
    free(want_y); free(want_dW); free(want_db); free(want_dx);
}
END_TEST

/* Mixed precision's products (dt_nn_half_products): inputs holding fp16 values, on the
 * tensor cores, against the CPU's fp32 products of the same values. The CPU half holds
 * the setting to change nothing on the host, bit for bit. */
START_TEST(test_linear_half)
{
    int B = lin_shapes[_i][0], in = lin_shapes[_i][1], out = lin_shapes[_i][2];
    size_t nx = (size_t)B * in, nW = (size_t)out * in, ny = (size_t)B * out;
    float *x = unit_random_floats(nx, -2, 2), *W = unit_random_floats(nW, -1, 1);
    float *dy = unit_random_floats(ny, -1, 1);
    for (size_t i = 0; i < nx; i++)             /* fp16 values, as the fp16 modes keep */
        x[i] = dt_half_to_float(dt_float_to_half(x[i]));
    for (size_t i = 0; i < nW; i++)
        W[i] = dt_half_to_float(dt_float_to_half(W[i]));
    for (size_t i = 0; i < ny; i++)
        dy[i] = dt_half_to_float(dt_float_to_half(dy[i]));
    float *y = malloc(ny * 4), *yh = malloc(ny * 4), *dx = malloc(nx * 4);
    float *dW = calloc(nW, 4), *dWh = calloc(nW, 4);
    dt_linear_forward(x, W, NULL, y, B, in, out);
    dt_linear_backward(x, W, dy, dx, dW, NULL, B, in, out);
    int was = dt_nn_half_products(1);
    dt_linear_forward(x, W, NULL, yh, B, in, out);
    dt_linear_backward(x, W, dy, NULL, dWh, NULL, B, in, out);
    REQUIRE(dt_nn_half_products(was) == 1 && dt_nn_half_products(was) == was,
            "dt_nn_half_products returns the setting it replaced");
    REQUIRE(memcmp(y, yh, ny * 4) == 0 && memcmp(dW, dWh, nW * 4) == 0,
            "the host's products changed with dt_nn_half_products (%d, %d, %d)", B, in, out);
    if (unit_use_gpu(gpu)) {
        float *d_x = unit_to_gpu(x, nx * 4), *d_W = unit_to_gpu(W, nW * 4);
        float *d_dy = unit_to_gpu(dy, ny * 4);
        float *d_y = unit_to_gpu(y, ny * 4), *d_dx = unit_to_gpu(dx, nx * 4);
        float *d_dW = unit_to_gpu(dWh, nW * 4);
        dti_cuda_memzero(d_dW, nW * 4);
        dti_nn_cuda_linear_forward(d_x, d_W, NULL, d_y, B, in, out, 1);
        dti_nn_cuda_linear_backward(d_x, d_W, d_dy, d_dx, d_dW, NULL, B, in, out, 1);
        require_gpu_close(d_y, y, ny, 1e-5, "tensor cores' y vs cpu");
        require_gpu_close(d_dW, dW, nW, 1e-5, "tensor cores' dW vs cpu");
        require_gpu_close(d_dx, dx, nx, 1e-5, "tensor cores' dx vs cpu");
        dti_cuda_free(d_x); dti_cuda_free(d_W); dti_cuda_free(d_dy); dti_cuda_free(d_y);
        dti_cuda_free(d_dx); dti_cuda_free(d_dW);
    }
    free(x); free(W); free(dy); free(y); free(yh); free(dx); free(dW); free(dWh);
}
END_TEST

/* ==== activations ==== */

static const size_t act_sizes[] = { 1, 1000, PAST_GRID };
#define NACTS (int)(2 * sizeof act_sizes / sizeof act_sizes[0])

START_TEST(test_act)
{
    dt_act a = _i % 2 ? DT_GELU : DT_RELU;
    size_t n = act_sizes[_i / 2];
    const char *name = a == DT_GELU ? "gelu" : "relu";
    float *x = unit_random_floats(n, -6, 6), *dy = unit_random_floats(n, -1, 1);
    for (size_t i = 0; i < n; i += 97)
        x[i] = 0.0f;                                 /* ReLU's kink, exactly */
    float *y = malloc(n * sizeof *y), *dx = malloc(n * sizeof *dx);
    double *want_y = unit_doubles(n), *want_dx = unit_doubles(n);
    for (size_t i = 0; i < n; i++) {
        double v = x[i];
        if (a == DT_RELU) {
            want_y[i] = v > 0 ? v : 0;
            want_dx[i] = v > 0 ? dy[i] : 0;
        } else {
            const double s = 0.7978845608028654, c = 0.044715;
            double t = tanh(s * (v + c * v * v * v));
            want_y[i] = 0.5 * v * (1 + t);
            want_dx[i] = (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * s * (1 + 3 * c * v * v))
                       * dy[i];
        }
    }
    dt_act_forward(a, x, y, n);
    dt_act_backward(a, x, dy, dx, n);
    unit_require_close(y, want_y, n, 1e-6, name);
    unit_require_close(dx, want_dx, n, 1e-6, name);

    if (unit_use_gpu(gpu)) {
        float *d_x = unit_to_gpu(x, n * 4), *d_dy = unit_to_gpu(dy, n * 4);
        float *d_y = dti_cuda_malloc(n * 4), *d_dx = dti_cuda_malloc(n * 4);
        dti_nn_cuda_act_forward((int)a, d_x, d_y, n);
        require_gpu_close(d_y, y, n, 1e-6, "gpu forward vs cpu");
        dti_nn_cuda_act_backward((int)a, d_x, d_dy, d_dx, n);
        require_gpu_close(d_dx, dx, n, 1e-6, "gpu backward vs cpu");
        dti_nn_cuda_act_backward((int)a, d_x, d_dy, d_dy, n);       /* in place */
        require_gpu_close(d_dy, dx, n, 1e-6, "gpu backward in place vs cpu");
        dti_nn_cuda_act_forward((int)a, d_x, d_x, n);               /* in place */
        require_gpu_close(d_x, y, n, 1e-6, "gpu forward in place vs cpu");
        dti_cuda_free(d_x); dti_cuda_free(d_dy); dti_cuda_free(d_y); dti_cuda_free(d_dx);
    }
    free(x); free(dy); free(y); free(dx); free(want_y); free(want_dx);
}
END_TEST

/* ==== softmax cross-entropy ==== */

static const int xent_shapes[][2] = {   /* B, C */
    { 1, 1 }, { 5, 3 },
    { 4103, 7 },           /* rows past the grid's 4096 blocks */
    { 9, 1500 },           /* a row past a block's 256 threads, and past 1024 */
    { 2, 70001 },          /* past 65535 */
};
#define NXENT (int)(sizeof xent_shapes / sizeof xent_shapes[0])

START_TEST(test_xent)
{
    int B = xent_shapes[_i][0], C = xent_shapes[_i][1];
    size_t n = (size_t)B * C;
    float scale = 1.0f / (float)B;
    float *l = unit_random_floats(n, -5, 5), *d = malloc(n * sizeof *d);
    int *y = malloc(B * sizeof *y);
    for (int r = 0; r < B; r++)
        y[r] = r == 0 ? C - 1 : r == 1 ? 0 : (int)unit_uniform(0, C);
    if (B > 1)                                  /* a row whose exp() would overflow */
        for (int c = 0; c < C; c++)
            l[(size_t)C + c] = (float)unit_uniform(-1e4, 1e4);
    double *want_d = unit_doubles(n), want_loss = 0;
    for (int r = 0; r < B; r++) {
        const float *l_r = l + (size_t)r * C;        /* (C) */
        double m = l_r[0], s = 0;
        for (int c = 1; c < C; c++)
            m = fmax(m, l_r[c]);
        for (int c = 0; c < C; c++)
            s += exp(l_r[c] - m);
        want_loss += log(s) - (l_r[y[r]] - m);
        for (int c = 0; c < C; c++)
            want_d[(size_t)r * C + c] = scale * (exp(l_r[c] - m) / s - (c == y[r]));
    }
    float loss = dt_xent(l, y, B, C, scale, d);
    REQUIRE(fabs(loss - want_loss) <= 1e-5 * fmax(1, fabs(want_loss)),
            "cpu loss %.9g, want %.9g", (double)loss, want_loss);
    unit_require_close(d, want_d, n, 1e-6, "cpu dlogits");

    if (unit_use_gpu(gpu)) {
        float *d_l = unit_to_gpu(l, n * 4), *d_d = dti_cuda_malloc(n * 4);
        int *d_y = unit_to_gpu(y, B * sizeof *y);
        float g = dti_nn_cuda_xent(d_l, d_y, B, C, scale, d_d);
        REQUIRE(fabsf(g - loss) <= 1e-5f * fmaxf(1, fabsf(loss)),
                "gpu loss %.9g, cpu %.9g", (double)g, (double)loss);
        require_gpu_close(d_d, d, n, 1e-6, "gpu dlogits vs cpu");
        g = dti_nn_cuda_xent(d_l, d_y, B, C, scale, NULL);          /* the loss alone */
        REQUIRE(fabsf(g - loss) <= 1e-5f * fmaxf(1, fabsf(loss)),
                "gpu loss (dlogits NULL) %.9g, cpu %.9g", (double)g, (double)loss);
        g = dti_nn_cuda_xent(d_l, d_y, B, C, scale, d_l);           /* in place */
        REQUIRE(fabsf(g - loss) <= 1e-5f * fmaxf(1, fabsf(loss)),
                "gpu loss (in place) %.9g, cpu %.9g", (double)g, (double)loss);
        require_gpu_close(d_l, d, n, 1e-6, "gpu dlogits in place vs cpu");
        dti_cuda_free(d_l); dti_cuda_free(d_d); dti_cuda_free(d_y);
    }
    free(l); free(d); free(y); free(want_d);
}
END_TEST

/* ==== optimizers ==== */

static const dt_optim_config optims[] = {
    { .kind = DT_SGD, .lr = 0.1f, .momentum = 0.9f },
    { .kind = DT_SGD, .lr = 0.05f },                            /* no state */
    { .kind = DT_ADAM, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f },
};
static const size_t optim_sizes[] = { 5, PAST_GRID };
#define NOPT (int)(sizeof optims / sizeof optims[0])
#define NOPTS (int)(NOPT * sizeof optim_sizes / sizeof optim_sizes[0])

START_TEST(test_optim)
{
    const dt_optim_config *o = &optims[_i % NOPT];
    size_t n = optim_sizes[_i / NOPT];
    int S = o->kind == DT_SGD && o->momentum == 0.0f ? 0 : dt_optim_state_per_param(o->kind);
    float *p = unit_random_floats(n, -1, 1), *st = S ? calloc(n * S, sizeof *st) : NULL;
    double *want_p = unit_doubles(n), *want_s = unit_doubles(n * (S ? S : 1));
    for (size_t i = 0; i < n; i++)
        want_p[i] = p[i];
    memset(want_s, 0, n * (S ? S : 1) * sizeof *want_s);
    float *d_p = NULL, *d_st = NULL;
    if (unit_use_gpu(gpu)) {
        d_p = unit_to_gpu(p, n * 4);
        if (S) {
            d_st = dti_cuda_malloc(n * S * 4);
            dti_cuda_memzero(d_st, n * S * 4);
        }
    }
    for (int step = 1; step <= 3; step++) {
        float *g = unit_random_floats(n, -2, 2);
        /* the plain formulas, in double */
        double bc1 = 1 - pow(o->beta1, step), bc2 = 1 - pow(o->beta2, step);
        for (size_t i = 0; i < n; i++) {
            if (o->kind == DT_SGD) {
                double v = g[i];
                if (S)
                    v = want_s[i] = o->momentum * want_s[i] + g[i];
                want_p[i] -= o->lr * v;
            } else {
                double *m = want_s + 2 * i, *v = m + 1;
                *m = o->beta1 * *m + (1 - o->beta1) * g[i];
                *v = o->beta2 * *v + (1 - o->beta2) * (double)g[i] * g[i];
                want_p[i] -= o->lr * (*m / bc1) / (sqrt(*v / bc2) + o->eps);
            }
        }
        dt_optim_step(o, step, p, g, st, n);
        unit_require_close(p, want_p, n, 1e-5, "cpu params");
        if (S)
            unit_require_close(st, want_s, n * S, 1e-5, "cpu state");
        if (gpu) {
            float *d_g = unit_to_gpu(g, n * 4);
            dti_nn_cuda_optim_step((int)o->kind, o->lr, o->momentum, o->beta1, o->beta2,
                                   o->eps, step, d_p, d_g, d_st, n);
            require_gpu_close(d_p, p, n, 1e-6, "gpu params vs cpu");
            if (S)
                require_gpu_close(d_st, st, n * S, 1e-6, "gpu state vs cpu");
            dti_cuda_free(d_g);
        }
        free(g);
    }
    if (gpu) {
        dti_cuda_free(d_p);
        if (d_st)
            dti_cuda_free(d_st);
    }
    free(p); free(st); free(want_p); free(want_s);
}
END_TEST

/* ==== main ==== */

int main(void)
{
    gpu = unit_probe_gpu_or_say("unit_gpu_nn", "the CPU paths are checked alone");
    Suite *s = suite_create("gpu_nn");
    TCase *tc = tcase_create("gpu_nn");
    tcase_add_loop_test(tc, test_linear, 0, NLIN);
    tcase_add_loop_test(tc, test_linear_half, 0, NLIN);
    tcase_add_loop_test(tc, test_act, 0, NACTS);
    tcase_add_loop_test(tc, test_xent, 0, NXENT);
    tcase_add_loop_test(tc, test_optim, 0, NOPTS);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
