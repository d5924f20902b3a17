/* Unit tests of lib/nn: the model, the optimizers and the data, on the CPU. No MPI.
 *
 * - the linear layer against a naive triple loop on odd shapes (accumulating dW, db;
 *   overwriting dx; without bias), with OpenBLAS's sgemm and with the plain loops, and
 *   the two against each other on shapes larger than sgemm's blocks: close, each the
 *   same on every call, and different bit for bit (so the switch really switches);
 * - the activations against their formulas, GELU's derivative against differences;
 * - softmax cross-entropy against a direct computation, and with huge logits;
 * - the hand-written backward of whole MLPs (ReLU and GELU, 1 to 4 layers) against
 *   central differences of a double-precision forward written here, for every
 *   parameter and for the input;
 * - two half-batches accumulate to the whole batch's gradient;
 * - the same seed gives the same weights and data; a layer's weights depend on (seed, l)
 *   only;
 * - SGD and Adam against values worked out by hand, and any split of the parameters
 *   updates exactly as the whole;
 * - the IDX loader on files written here: a good one, and truncated, mislabelled,
 *   mismatched, huge-headed, empty and missing ones, each refused with a sentence;
 * - a short serial training run whose loss goes clearly down;
 * - broken preconditions (a label out of range, a batch larger than the activations)
 *   stop the program with a message (status 1).
 *
 *   build/tests/unit_nn
 */
#include <check.h>
#include "unit.h"
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "nn/nn.h"
#include "nn/nn_internal.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* ==== helpers ==== */

static double gelu_d(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

static double act_d(dt_act a, double x)
{
    return a == DT_RELU ? (x > 0 ? x : 0.0) : gelu_d(x);
}

/* ==== shapes ==== */

START_TEST(test_shapes)
{
    dt_mlp_config c = { .in = 5, .hidden = 7, .out = 3, .layers = 3, .act = DT_RELU };
    ck_assert_int_eq(dt_mlp_layer_in(&c, 0), 5);
    ck_assert_int_eq(dt_mlp_layer_in(&c, 2), 7);
    ck_assert_int_eq(dt_mlp_layer_out(&c, 1), 7);
    ck_assert_int_eq(dt_mlp_layer_out(&c, 2), 3);
    ck_assert_uint_eq(dt_mlp_layer_size(&c, 0), 7 * 5 + 7);
    ck_assert_uint_eq(dt_mlp_layer_size(&c, 1), 7 * 7 + 7);
    ck_assert_uint_eq(dt_mlp_layer_size(&c, 2), 3 * 7 + 3);
    ck_assert_uint_eq(dt_mlp_layer_offset(&c, 0), 0);
    ck_assert_uint_eq(dt_mlp_layer_offset(&c, 2), 42 + 56);
    ck_assert_uint_eq(dt_mlp_layer_offset(&c, 3), 42 + 56 + 24);
    ck_assert_uint_eq(dt_mlp_nparams(&c), 42 + 56 + 24);
    dt_mlp_config one = { .in = 5, .hidden = 0, .out = 3, .layers = 1, .act = DT_GELU };
    ck_assert_int_eq(dt_mlp_layer_in(&one, 0), 5);
    ck_assert_int_eq(dt_mlp_layer_out(&one, 0), 3);
    ck_assert_uint_eq(dt_mlp_nparams(&one), 18);
}
END_TEST

/* ==== the linear layer against a naive triple loop ==== */

static const int lin_shapes[][3] = {    /* B, in, out */
    { 1, 1, 1 }, { 3, 5, 7 }, { 7, 13, 5 }, { 5, 17, 9 }, { 2, 33, 4 }, { 9, 8, 16 },
    { 67, 301, 129 }, { 130, 1029, 33 },
};
#define NLIN (int)(sizeof lin_shapes / sizeof lin_shapes[0])

/* Loop index: shape _i % NLIN, with sgemm (_i < NLIN) or the loops. */
START_TEST(test_linear)
{
    int k = _i % NLIN, B = lin_shapes[k][0], in = lin_shapes[k][1], out = lin_shapes[k][2];
    dt_set_blas(_i < NLIN);
    double tol = in > 100 || B > 100 ? 1e-5 : 1e-6;    /* fp32 sums of hundreds of terms */
    float *x = unit_random_floats((size_t)B * in, -2, 2);
    float *W = unit_random_floats((size_t)out * in, -1, 1);
    float *b = unit_random_floats(out, -1, 1), *dy = unit_random_floats((size_t)B * out, -1, 1);
    float *dW = unit_random_floats((size_t)out * in, -1, 1), *db = unit_random_floats(out, -1, 1);
    float *dx = unit_random_floats((size_t)B * in, 1e30, 2e30);     /* must be overwritten */
    float *y = malloc((size_t)B * out * sizeof *y);
    double *want_y = malloc((size_t)B * out * sizeof *want_y);
    double *want_dW = malloc((size_t)out * in * sizeof *want_dW);
    double *want_db = malloc((size_t)out * sizeof *want_db);
    double *want_dx = malloc((size_t)B * in * sizeof *want_dx);
    /* the definitions, one element at a time */
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++) {
            double s = b[o];
            for (int i = 0; i < in; i++)
                s += (double)x[r * in + i] * W[o * in + i];
            want_y[r * out + o] = s;
        }
    for (int o = 0; o < out; o++) {
        double s = db[o];
        for (int r = 0; r < B; r++)
            s += dy[r * out + o];
        want_db[o] = s;
        for (int i = 0; i < in; i++) {
            double t = dW[o * in + i];
            for (int r = 0; r < B; r++)
                t += (double)dy[r * out + o] * x[r * in + i];
            want_dW[o * in + i] = t;
        }
    }
    for (int r = 0; r < B; r++)
        for (int i = 0; i < in; i++) {
            double s = 0;
            for (int o = 0; o < out; o++)
                s += (double)dy[r * out + o] * W[o * in + i];
            want_dx[r * in + i] = s;
        }

    dt_linear_forward(x, W, b, y, B, in, out);
    unit_require_close(y, want_y, (size_t)B * out, tol, "y");
    dt_linear_forward(x, W, NULL, y, B, in, out);          /* no bias */
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++)
            want_y[r * out + o] -= b[o];
    unit_require_close(y, want_y, (size_t)B * out, tol, "y without bias");

    float *dW0 = unit_copy_floats(dW, (size_t)out * in);
    /* zero bubble's split: dx alone (no x, no dW), then dW and db alone (no W, no dx),
     * the same bits as the one call below */
    float *dWs = unit_copy_floats(dW, (size_t)out * in), *dbs = unit_copy_floats(db, out);
    float *dxs = unit_random_floats((size_t)B * in, 1e30, 2e30);
    dt_linear_backward(NULL, W, dy, dxs, NULL, NULL, B, in, out);
    dt_linear_backward(x, NULL, dy, NULL, dWs, dbs, B, in, out);
    dt_linear_backward(x, W, dy, dx, dW, db, B, in, out);
    ck_assert_msg(!memcmp(dWs, dW, (size_t)out * in * sizeof *dW) &&
                  !memcmp(dbs, db, out * sizeof *db) &&
                  !memcmp(dxs, dx, (size_t)B * in * sizeof *dx),
                  "the split backward differs from the whole (B %d, in %d, out %d)", B, in,
                  out);
    free(dWs); free(dbs); free(dxs);
    unit_require_close(dW, want_dW, (size_t)out * in, tol, "dW");
    unit_require_close(db, want_db, out, tol, "db");
    unit_require_close(dx, want_dx, (size_t)B * in, tol, "dx");
    /* without dx and db: dW alone, the same */
    dt_linear_backward(x, W, dy, NULL, dW0, NULL, B, in, out);
    unit_require_close(dW0, want_dW, (size_t)out * in, tol, "dW (no dx, no db)");

    dt_set_blas(1);
    free(x); free(W); free(b); free(dy); free(dW); free(db); free(dx); free(y); free(dW0);
    free(want_y); free(want_dW); free(want_db); free(want_dx);
}
END_TEST

/* sgemm against the loops on one large layer: within rounding of each other; each the
 * same bits on a second call; and not the same bits as each other, which is how the
 * test knows dt_set_blas chose (the sums run in another order). */
START_TEST(test_blas_vs_loops)
{
    enum { B = 96, IN = 700, OUT = 300 };
    float *x = unit_random_floats((size_t)B * IN, -1, 1);
    float *W = unit_random_floats((size_t)OUT * IN, -1, 1);
    float *b = unit_random_floats(OUT, -1, 1), *dy = unit_random_floats((size_t)B * OUT, -1, 1);
    float *y[3], *dx[3], *dW[3];
    for (int k = 0; k < 3; k++) {       /* sgemm, sgemm again, loops */
        y[k] = malloc(sizeof(float) * B * OUT);
        dx[k] = malloc(sizeof(float) * B * IN);
        dW[k] = calloc((size_t)OUT * IN, sizeof(float));
        dt_set_blas(k < 2);
        ck_assert_int_eq(dt_blas(), k < 2);
        dt_linear_forward(x, W, b, y[k], B, IN, OUT);
        dt_linear_backward(x, W, dy, dx[k], dW[k], NULL, B, IN, OUT);
    }
    dt_set_blas(1);
    REQUIRE(memcmp(y[0], y[1], sizeof(float) * B * OUT) == 0 &&
            memcmp(dx[0], dx[1], sizeof(float) * B * IN) == 0 &&
            memcmp(dW[0], dW[1], sizeof(float) * OUT * IN) == 0,
            "sgemm gave different bits on a second call");
    REQUIRE(memcmp(y[0], y[2], sizeof(float) * B * OUT) != 0,
            "sgemm and the loops agree bit for bit: did dt_set_blas(0) choose the loops?");
    struct { float **v; size_t n; const char *what; } c[] = {
        { y, (size_t)B * OUT, "y" }, { dx, (size_t)B * IN, "dx" }, { dW, (size_t)OUT * IN, "dW" } };
    for (int k = 0; k < 3; k++) {
        double *want = malloc(sizeof(double) * c[k].n);
        for (size_t j = 0; j < c[k].n; j++)
            want[j] = c[k].v[2][j];
        unit_require_close(c[k].v[0], want, c[k].n, 1e-5, c[k].what);
        free(want);
    }
    for (int k = 0; k < 3; k++)
        free(y[k]), free(dx[k]), free(dW[k]);
    free(x); free(W); free(b); free(dy);
}
END_TEST

/* ==== activations ==== */

START_TEST(test_activations)
{
    /* ReLU, its derivative 0 at 0 */
    float x[5] = { -2.0f, -0.0f, 0.0f, 0.5f, 3.0f }, y[5], d[5], one[5] = { 1, 1, 1, 1, 1 };
    dt_act_forward(DT_RELU, x, y, 5);
    dt_act_backward(DT_RELU, x, one, d, 5);
    const float want_y[5] = { 0, 0, 0, 0.5f, 3 }, want_d[5] = { 0, 0, 0, 1, 1 };
    for (int i = 0; i < 5; i++) {
        REQUIRE(y[i] == want_y[i], "relu(%g) = %g", x[i], y[i]);
        REQUIRE(d[i] == want_d[i], "relu'(%g) = %g, want %g", x[i], d[i], want_d[i]);
    }
    /* GELU (tanh form): values of PyTorch's gelu(approximate='tanh') */
    float gx[3] = { 1.0f, -1.0f, 2.5f }, gy[3];
    const double gwant[3] = { 0.8411919906082768, -0.15880800939172324, 2.484915733910001 };
    dt_act_forward(DT_GELU, gx, gy, 3);
    for (int i = 0; i < 3; i++)
        REQUIRE(fabs(gy[i] - gwant[i]) < 1e-6, "gelu(%g) = %.9g, want %.9g", gx[i], gy[i],
                gwant[i]);
    /* GELU's derivative against central differences of the double formula, on
     * [-8, 8], times a random upstream gradient; and in place (dx == dy) */
    enum { N = 401 };
    float xs[N], dys[N], dxs[N], inplace[N];
    for (int i = 0; i < N; i++) {
        xs[i] = (float)(-8.0 + 16.0 * i / (N - 1));
        dys[i] = inplace[i] = (float)unit_uniform(-2, 2);
    }
    dt_act_backward(DT_GELU, xs, dys, dxs, N);
    dt_act_backward(DT_GELU, xs, inplace, inplace, N);
    for (int i = 0; i < N; i++) {
        double h = 1e-5, v = xs[i];
        double fd = (gelu_d(v + h) - gelu_d(v - h)) / (2 * h) * dys[i];
        REQUIRE(fabs(dxs[i] - fd) < 2e-6 * fmax(1.0, fabs(fd)),
                "gelu'(%g) * %g = %.9g, differences give %.9g", v, (double)dys[i],
                (double)dxs[i], fd);
        REQUIRE(inplace[i] == dxs[i], "gelu backward in place differs at %d", i);
    }
    /* forward in place */
    float ip[3] = { 1.0f, -1.0f, 2.5f };
    dt_act_forward(DT_GELU, ip, ip, 3);
    for (int i = 0; i < 3; i++)
        REQUIRE(ip[i] == gy[i], "gelu forward in place differs at %d", i);
    /* GELU over [-12, 12] against the double formula, relative (the float argument
     * of e^-2u, up to 2u = 30 here, carries its rounding into e^-2u: 2e-6), 401 values
     * at once (the vector loop) and each alone (its tail): the same bits wherever an
     * element sits */
    float gs[N], gv[N], g1;
    for (int i = 0; i < N; i++)
        gs[i] = (float)(-12.0 + 24.0 * i / (N - 1));
    dt_act_forward(DT_GELU, gs, gv, N);
    for (int i = 0; i < N; i++) {
        REQUIRE(fabs(gv[i] - gelu_d(gs[i])) < 4e-6 * fmax(1e-6, fabs(gelu_d(gs[i]))),
                "gelu(%g) = %.9g, want %.9g", (double)gs[i], (double)gv[i], gelu_d(gs[i]));
        dt_act_forward(DT_GELU, gs + i, &g1, 1);
        REQUIRE(g1 == gv[i], "gelu(%g) alone %.9g, in an array %.9g", (double)gs[i],
                (double)g1, (double)gv[i]);
    }
}
END_TEST

/* The host's exp (layers.c: plain arithmetic, so that GELU's loops are vectorised)
 * against double precision's over [-87, 87], relative; and the clamp beyond. */
START_TEST(test_exp)
{
    double worst = 0, at = 0;
    for (int i = 0; i <= 870000; i++) {
        float y = (float)(-87.0 + 174.0 * i / 870000);
        double e = fabs((double)dti_nn_exp(y) / exp((double)y) - 1.0);
        if (e > worst)
            worst = e, at = y;
    }
    REQUIRE(worst < 3e-7, "exp off by %g relative at %g", worst, at);
    REQUIRE(dti_nn_exp(0.0f) == 1.0f && dti_nn_exp(200.0f) == dti_nn_exp(87.0f) &&
            dti_nn_exp(-200.0f) == dti_nn_exp(-87.0f) && dti_nn_exp(-87.0f) > 0.0f,
            "exp(0) %g, exp(200) %g, exp(-200) %g", (double)dti_nn_exp(0.0f),
            (double)dti_nn_exp(200.0f), (double)dti_nn_exp(-200.0f));
}
END_TEST

/* An output that partly overlaps the input is refused (the loops assume it does not). */
START_TEST(test_act_overlap)
{
    float v[8] = { 0 };
    dt_act_forward(DT_GELU, v, v + 1, 7);
}
END_TEST

/* ==== softmax cross-entropy ==== */

START_TEST(test_xent)
{
    enum { B = 4, C = 5 };
    float *l = unit_random_floats(B * C, -4, 4), dl[B * C];
    int y[B] = { 0, 4, 2, 2 };
    float scale = 0.25f;
    double want_loss = 0, want_dl[B * C];
    for (int r = 0; r < B; r++) {
        double z = 0;
        for (int c = 0; c < C; c++)
            z += exp((double)l[r * C + c]);
        want_loss += log(z) - l[r * C + y[r]];
        for (int c = 0; c < C; c++)
            want_dl[r * C + c] = scale * (exp((double)l[r * C + c]) / z - (c == y[r]));
    }
    float loss = dt_xent(l, y, B, C, scale, dl);
    REQUIRE(fabs(loss - want_loss) < 1e-5 * want_loss, "loss %.9g, want %.9g", loss, want_loss);
    unit_require_close(dl, want_dl, B * C, 1e-6, "dlogits");
    REQUIRE(dt_xent(l, y, B, C, scale, NULL) == loss, "loss without dlogits differs");
    float inplace = dt_xent(l, y, B, C, scale, l);           /* dlogits over logits */
    REQUIRE(inplace == loss, "loss in place differs");
    unit_require_close(l, want_dl, B * C, 1e-6, "dlogits in place");
    free(l);

    /* huge logits: the row maximum is subtracted, so nothing overflows */
    /* (the maximum is nowhere first: subtracting l[0] instead would overflow) */
    float big[4 * 3] = { -1000, 1000, 500,   -1e30f, 0, 1e30f,
                         88.8f, 88.8f, 88.8f,   -1e30f, -1e30f, -1e30f };
    int by[4] = { 2, 0, 0, 2 };
    float bd[12];
    float bl = dt_xent(big, by, 4, 3, 1.0f, bd);
    double bwant = 500 + 2e30 + log(3.0) + log(3.0);
    REQUIRE(isfinite(bl) && fabs(bl - bwant) < 1e-6 * bwant, "huge logits: loss %g, want %g",
            bl, bwant);
    for (int r = 0; r < 4; r++) {
        double s = 0;
        for (int c = 0; c < 3; c++) {
            REQUIRE(isfinite(bd[r * 3 + c]), "huge logits: dlogits[%d][%d] = %g", r, c,
                    bd[r * 3 + c]);
            s += bd[r * 3 + c];
        }
        REQUIRE(fabs(s) < 1e-6, "huge logits: row %d of dlogits sums to %g, not 0", r, s);
    }
    REQUIRE(fabs(bd[1] - 1.0) < 1e-6 && fabs(bd[2] + 1.0) < 1e-6, "row 0: p = (0, 1, 0), "
            "label 2: dlogits (%g %g %g), want (0 1 -1)", bd[0], bd[1], bd[2]);
    REQUIRE(fabs(bd[6] - 1.0 / 3 + 1) < 1e-6, "equal logits: dlogits[2][0] = %g", bd[6]);
}
END_TEST

START_TEST(test_xent_bad_label)
{
    float l[6] = { 0, 1, 2, 3, 4, 5 }, d[6];
    int y[2] = { 1, 3 };                /* 3 is not one of 3 classes */
    dt_xent(l, y, 2, 3, 1.0f, d);
}
END_TEST

/* ==== the whole model against finite differences ==== */

/* The forward of the MLP in double, straight from the definitions: the mean loss over
 * B rows. Widths up to 64. */
static double ref_loss(const dt_mlp_config *c, const double *p, const double *x,
                       const int *y, int B)
{
    double total = 0;
    for (int r = 0; r < B; r++) {
        double cur[64], next[64];
        for (int i = 0; i < c->in; i++)
            cur[i] = x[r * c->in + i];
        for (int l = 0; l < c->layers; l++) {
            int in = dt_mlp_layer_in(c, l), out = dt_mlp_layer_out(c, l);
            const double *W = p + dt_mlp_layer_offset(c, l), *b = W + out * in;
            for (int o = 0; o < out; o++) {
                double s = b[o];
                for (int i = 0; i < in; i++)
                    s += W[o * in + i] * cur[i];
                next[o] = l < c->layers - 1 ? act_d(c->act, s) : s;
            }
            memcpy(cur, next, (size_t)out * sizeof *cur);
        }
        double m = cur[0], z = 0;
        for (int k = 1; k < c->out; k++)
            m = fmax(m, cur[k]);
        for (int k = 0; k < c->out; k++)
            z += exp(cur[k] - m);
        total += log(z) + m - cur[y[r]];
    }
    return total / B;
}

/* ref_loss's arguments, for unit_numeric_grad: the loss as a function of p or x. */
typedef struct {
    const dt_mlp_config *c;
    const double *p, *x;
    const int *y;
    int B;
} loss_ctx;

static double loss_f(const void *ctx)
{
    const loss_ctx *lc = ctx;
    return ref_loss(lc->c, lc->p, lc->x, lc->y, lc->B);
}

static int done_order[8], ndone;
static void record_done(int l, void *ctx)
{
    (void)ctx;
    if (ndone < 8)
        done_order[ndone] = l;
    ndone++;
}

static const dt_mlp_config fd_configs[] = {
    { .in = 6, .hidden = 8, .out = 5, .layers = 3, .act = DT_RELU },
    { .in = 6, .hidden = 8, .out = 5, .layers = 3, .act = DT_GELU },
    { .in = 7, .hidden = 0, .out = 4, .layers = 1, .act = DT_GELU },
    { .in = 5, .hidden = 9, .out = 3, .layers = 4, .act = DT_RELU },
    { .in = 9, .hidden = 4, .out = 6, .layers = 2, .act = DT_GELU },
};
#define NFD (int)(sizeof fd_configs / sizeof fd_configs[0])

START_TEST(test_backward_fd)
{
    const dt_mlp_config *c = &fd_configs[_i];
    enum { B = 4 };
    size_t np = dt_mlp_nparams(c), nx = (size_t)B * c->in;
    float *params = malloc(np * sizeof *params);
    dt_mlp_init(c, 42 + _i, params);
    for (int l = 0; l < c->layers; l++) {  /* biases not zero, so they matter */
        int in = dt_mlp_layer_in(c, l), out = dt_mlp_layer_out(c, l);
        float *b = params + dt_mlp_layer_offset(c, l) + (size_t)out * in;
        for (int o = 0; o < out; o++)
            b[o] = (float)unit_uniform(-0.5, 0.5);
    }
    float *x = unit_random_floats(nx, -2, 2);
    int y[B];
    for (int r = 0; r < B; r++)
        y[r] = (int)unit_uniform(0, c->out);

    /* the library: forward, loss with scale 1/B, backward */
    dt_mlp_acts a;
    dt_mlp_acts_alloc(c, B, 0, &a);
    const float *logits = dt_mlp_forward(c, params, x, B, &a);
    float *dlogits = malloc((size_t)B * c->out * sizeof *dlogits);
    float loss = dt_xent(logits, y, B, c->out, 1.0f / B, dlogits);
    float *grads = calloc(np, sizeof *grads);
    ndone = 0;
    dt_mlp_backward(c, params, &a, dlogits, B, grads, record_done, NULL);
    REQUIRE(ndone == c->layers, "layer_done called %d times for %d layers", ndone, c->layers);
    for (int k = 0; k < c->layers; k++)
        REQUIRE(done_order[k] == c->layers - 1 - k, "layer_done call %d was for layer %d, "
                "want %d (last to first)", k, done_order[k], c->layers - 1 - k);

    /* the input's gradient, by the same chain written out with the per-layer calls
     * (what a pipeline stage does to pass gradients back); its parameter gradients
     * must equal dt_mlp_backward's */
    float *grads2 = calloc(np, sizeof *grads2), *gx = NULL;
    const float *dy = dlogits;
    float *bufs[2] = { malloc((size_t)B * 64 * sizeof(float)),
                       malloc((size_t)B * 64 * sizeof(float)) };
    for (int l = c->layers - 1; l >= 0; l--) {
        int in = dt_mlp_layer_in(c, l), out = dt_mlp_layer_out(c, l);
        size_t off = dt_mlp_layer_offset(c, l);
        float *dx = bufs[l % 2];
        dt_linear_backward(a.x[l], params + off, dy, dx, grads2 + off,
                           grads2 + off + (size_t)out * in, B, in, out);
        if (l > 0)
            dt_act_backward(c->act, a.z[l - 1], dx, dx, (size_t)B * in);
        dy = gx = dx;
    }
    REQUIRE(memcmp(grads, grads2, np * sizeof *grads) == 0,
            "dt_mlp_backward differs from the same chain of per-layer calls");

    /* the reference, in double */
    double *pd = unit_to_double(params, np), *xd = unit_to_double(x, nx);
    double *gp = malloc(np * sizeof *gp), *gxd = malloc(nx * sizeof *gxd);
    double ref = ref_loss(c, pd, xd, y, B);
    REQUIRE(fabs(loss / B - ref) < 1e-5 * fmax(1.0, ref), "forward: mean loss %.9g, the "
            "double forward gives %.9g", loss / B, ref);
    loss_ctx lc = { c, pd, xd, y, B };
    unit_numeric_grad(loss_f, &lc, pd, np, gp);
    unit_numeric_grad(loss_f, &lc, xd, nx, gxd);
    unit_require_close(grads, gp, np, 2e-5, "parameter gradient");
    unit_require_close(gx, gxd, nx, 2e-5, "input gradient");
    /* and as one relative error over all of them */
    double num = 0, den = 0;
    for (size_t j = 0; j < np; j++) {
        num += (grads[j] - gp[j]) * (grads[j] - gp[j]);
        den += gp[j] * gp[j];
    }
    REQUIRE(den > 0 && sqrt(num / den) < 1e-5, "parameter gradient: relative error %g",
            sqrt(num / den));

    dt_mlp_acts_free(&a);
    free(params); free(x); free(dlogits); free(grads); free(grads2); free(bufs[0]);
    free(bufs[1]); free(pd); free(xd); free(gp); free(gxd);
}
END_TEST

/* ==== gradient accumulation ==== */

/* Rows 0..3 then rows 4..7, each with scale 1/8, add up to rows 0..7 at once; with
 * sgemm (_i 0) and the loops (_i 1). */
START_TEST(test_accumulation)
{
    dt_set_blas(_i == 0);
    dt_mlp_config c = { .in = 10, .hidden = 12, .out = 4, .layers = 3, .act = DT_GELU };
    enum { B = 8, H = 4 };
    size_t np = dt_mlp_nparams(&c);
    float *params = malloc(np * sizeof *params), *x = unit_random_floats(B * 10, -1, 1);
    float *whole = calloc(np, sizeof *whole), *halves = calloc(np, sizeof *halves);
    float dl[B * 4];
    int y[B] = { 0, 1, 2, 3, 3, 2, 1, 0 };
    dt_mlp_init(&c, 7, params);
    dt_mlp_acts a;
    dt_mlp_acts_alloc(&c, B, 0, &a);

    const float *logits = dt_mlp_forward(&c, params, x, B, &a);
    float loss = dt_xent(logits, y, B, 4, 1.0f / B, dl);
    dt_mlp_backward(&c, params, &a, dl, B, whole, NULL, NULL);

    float part = 0;
    for (int h = 0; h < 2; h++) {
        logits = dt_mlp_forward(&c, params, x + h * H * 10, H, &a);
        part += dt_xent(logits, y + h * H, H, 4, 1.0f / B, dl);
        dt_mlp_backward(&c, params, &a, dl, H, halves, NULL, NULL);
    }
    REQUIRE(fabsf(loss - part) < 1e-5f * loss, "loss %g, halves add to %g", loss, part);
    double *want = malloc(np * sizeof *want);
    for (size_t j = 0; j < np; j++)
        want[j] = whole[j];
    unit_require_close(halves, want, np, 1e-6, "gradient of two half-batches");
    dt_set_blas(1);
    dt_mlp_acts_free(&a);
    free(params); free(x); free(whole); free(halves); free(want);
}
END_TEST

START_TEST(test_batch_too_big)
{
    dt_mlp_config c = { .in = 3, .hidden = 4, .out = 2, .layers = 2, .act = DT_RELU };
    float params[64] = { 0 }, x[5 * 3] = { 0 };
    dt_mlp_acts a;
    dt_mlp_acts_alloc(&c, 4, 0, &a);
    dt_mlp_forward(&c, params, x, 5, &a);    /* 5 rows into room for 4 */
}
END_TEST

/* ==== determinism of the initial weights and the data ==== */

START_TEST(test_init)
{
    dt_mlp_config c3 = { .in = 20, .hidden = 16, .out = 5, .layers = 3, .act = DT_RELU };
    dt_mlp_config c5 = c3;
    c5.layers = 5;
    c5.out = 7;
    size_t n3 = dt_mlp_nparams(&c3), n5 = dt_mlp_nparams(&c5);
    float *p = malloc(n3 * sizeof *p), *q = malloc(n3 * sizeof *q), *r = malloc(n5 * sizeof *r);
    dt_mlp_init(&c3, 1234, p);
    dt_mlp_init(&c3, 1234, q);
    REQUIRE(memcmp(p, q, n3 * sizeof *p) == 0, "same seed, different weights");
    dt_mlp_init(&c3, 1235, q);
    size_t same = 0;
    for (size_t j = 0; j < n3; j++)
        same += p[j] == q[j];
    REQUIRE(same < n3 / 4, "seeds 1234 and 1235 share %zu of %zu values (the biases are "
            "zero in both)", same, n3);
    /* layers 0 and 1 (20->16, 16->16) are the same in a deeper model with another out */
    dt_mlp_init(&c5, 1234, r);
    size_t first2 = dt_mlp_layer_offset(&c3, 2);
    REQUIRE(memcmp(p, r, first2 * sizeof *p) == 0, "layers 0-1 depend on the model's depth");
    /* W uniform in +-sqrt(6/in) (hidden) or +-1/sqrt(in) (last): within the bound,
     * spread over it, mean near 0; b = 0 */
    for (int l = 0; l < c5.layers; l++) {
        int in = dt_mlp_layer_in(&c5, l), out = dt_mlp_layer_out(&c5, l);
        const float *W = r + dt_mlp_layer_offset(&c5, l), *b = W + (size_t)out * in;
        double bound = (l < c5.layers - 1 ? sqrt(6.0) : 1.0) / sqrt(in);
        double sum = 0, sq = 0, n = (double)out * in;
        for (int j = 0; j < out * in; j++) {
            REQUIRE(fabs(W[j]) <= bound, "layer %d: |W| = %g > %g", l, W[j], bound);
            sum += W[j];
            sq += (double)W[j] * W[j];
        }
        double sd = sqrt(sq / n), want_sd = bound / sqrt(3.0);
        REQUIRE(fabs(sum / n) < 0.15 * bound && fabs(sd - want_sd) < 0.15 * want_sd,
                "layer %d: mean %g, sd %g, want about 0 and %g", l, sum / n, sd, want_sd);
        for (int o = 0; o < out; o++)
            REQUIRE(b[o] == 0.0f, "layer %d: bias %d is %g, not 0", l, o, b[o]);
    }
    free(p); free(q); free(r);
}
END_TEST

START_TEST(test_synthetic)
{
    enum { N = 1003, F = 12, K = 5 };
    dt_dataset a, b, c;
    dt_data_synthetic(&a, N, F, K, 99);
    dt_data_synthetic(&b, N, F, K, 99);
    dt_data_synthetic(&c, N, F, K, 100);
    ck_assert_int_eq(a.n, N);
    ck_assert_int_eq(a.features, F);
    ck_assert_int_eq(a.classes, K);
    REQUIRE(memcmp(a.x, b.x, sizeof(float) * N * F) == 0 &&
            memcmp(a.y, b.y, sizeof(int) * N) == 0, "same seed, different data");
    REQUIRE(memcmp(a.x, c.x, sizeof(float) * N * F) != 0, "seeds 99 and 100 give the same data");
    int count[K] = { 0 };
    for (int i = 0; i < N; i++) {
        REQUIRE(a.y[i] >= 0 && a.y[i] < K, "label %d of example %d", a.y[i], i);
        count[a.y[i]]++;
    }
    for (int k = 0; k < K; k++)
        REQUIRE(count[k] == N / K || count[k] == N / K + 1, "class %d: %d examples of %d",
                k, count[k], N);
    int runs = 0;                       /* shuffled, not 0 1 2 3 4 0 1 ... */
    for (int i = 1; i < N; i++)
        runs += a.y[i] == (a.y[i - 1] + 1) % K;
    REQUIRE(runs < N / 2, "labels are not shuffled");
    for (int i = 0; i < N * F; i++)
        REQUIRE(isfinite(a.x[i]) && fabsf(a.x[i]) <= 7, "x[%d] = %g", i, a.x[i]);  /* 1 + 6 */
    dt_data_free(&a);
    dt_data_free(&b);
    dt_data_free(&c);
    REQUIRE(a.x == NULL && a.n == 0, "dt_data_free leaves the set non-empty");
}
END_TEST

/* Global batch s is examples s*B .. s*B+B-1, wrapping; a share is rows of it. */
START_TEST(test_batches)
{
    dt_dataset d;
    dt_data_synthetic(&d, 10, 3, 2, 5);
    float x[4 * 3];
    int y[4];
    dt_data_batch(&d, 2, 4, 0, 4, x, y);          /* examples 8, 9, 0, 1 */
    const int want[4] = { 8, 9, 0, 1 };
    for (int r = 0; r < 4; r++) {
        REQUIRE(y[r] == d.y[want[r]] && memcmp(x + r * 3, d.x + want[r] * 3, 12) == 0,
                "step 2 row %d is not example %d", r, want[r]);
    }
    dt_data_batch(&d, 2, 4, 1, 2, x, y);          /* rows 1, 2: examples 9, 0 */
    REQUIRE(y[0] == d.y[9] && y[1] == d.y[0] && memcmp(x, d.x + 27, 12) == 0 &&
            memcmp(x + 3, d.x, 12) == 0, "rows [1, 3) of step 2 are not examples 9 and 0");
    dt_data_batch(&d, 1000000000, 7, 6, 1, x, y); /* (7e9 + 6) mod 10 = 6: no overflow */
    REQUIRE(y[0] == d.y[6] && memcmp(x, d.x + 18, 12) == 0, "step 1e9: not example 6");
    dt_data_free(&d);
}
END_TEST

/* ==== optimizers ==== */

START_TEST(test_sgd)
{
    /* by hand: lr 0.1, momentum 0.9, p = 1, gradients 0.5, -1, 2:
     *   v = 0.5           p = 1 - 0.05 = 0.95
     *   v = 0.45 - 1      p = 0.95 + 0.055 = 1.005
     *   v = -0.495 + 2    p = 1.005 - 0.1505 = 0.8545 */
    dt_optim_config o = { .kind = DT_SGD, .lr = 0.1f, .momentum = 0.9f };
    float p = 1.0f, v = 0.0f;
    const float g[3] = { 0.5f, -1.0f, 2.0f };
    const double want_p[3] = { 0.95, 1.005, 0.8545 }, want_v[3] = { 0.5, -0.55, 1.505 };
    ck_assert_int_eq(dt_optim_state_per_param(DT_SGD), 1);
    for (int t = 0; t < 3; t++) {
        dt_optim_step(&o, t + 1, &p, &g[t], &v, 1);
        REQUIRE(fabs(p - want_p[t]) < 1e-6 && fabs(v - want_v[t]) < 1e-6,
                "SGD step %d: p %.9g v %.9g, want %.9g %.9g", t + 1, p, v, want_p[t], want_v[t]);
    }
    /* plain SGD without state: p -= lr g */
    o.momentum = 0.0f;
    float q[2] = { 1.0f, -1.0f }, gq[2] = { 0.5f, 0.25f };
    dt_optim_step(&o, 1, q, gq, NULL, 2);
    REQUIRE(fabsf(q[0] - 0.95f) < 1e-7f && fabsf(q[1] + 1.025f) < 1e-7f,
            "plain SGD: %g %g, want 0.95 -1.025", q[0], q[1]);
}
END_TEST

START_TEST(test_adam)
{
    /* by hand: lr 0.01, b1 0.9, b2 0.999, eps 1e-8, p = 1, gradients 0.5 then -1:
     *   t=1: m = 0.05, v = 0.00025; mhat = 0.5, vhat = 0.25; p = 1 - 0.01*0.5/0.5 = 0.99
     *   t=2: m = 0.045 - 0.1 = -0.055, v = 0.00024975 + 0.001 = 0.00124975;
     *        mhat = -0.055/0.19 = -0.289474, vhat = 0.00124975/0.001999 = 0.625188;
     *        p = 0.99 + 0.01 * 0.289474/0.790688 = 0.993661 */
    dt_optim_config o = { .kind = DT_ADAM, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
                          .eps = 1e-8f };
    ck_assert_int_eq(dt_optim_state_per_param(DT_ADAM), 2);
    float p = 1.0f, st[2] = { 0, 0 };
    float g = 0.5f;
    dt_optim_step(&o, 1, &p, &g, st, 1);
    /* (1 - 0.999 is 0.00099999 in float, so v agrees to about 5 digits) */
    REQUIRE(fabs(p - 0.99) < 1e-6 && fabs(st[0] - 0.05) < 1e-7 &&
            fabs(st[1] - 0.00025) < 2e-5 * 0.00025,
            "Adam step 1: p %.9g m %.9g v %.9g, want 0.99 0.05 0.00025", p, st[0], st[1]);
    g = -1.0f;
    dt_optim_step(&o, 2, &p, &g, st, 1);
    double mhat = -0.055 / (1 - 0.81), vhat = 0.00124975 / (1 - 0.998001);
    double want = 0.99 - 0.01 * mhat / (sqrt(vhat) + 1e-8);
    REQUIRE(fabs(want - 0.993661) < 1e-6, "the hand computation is wrong: %.9g", want);
    REQUIRE(fabs(p - want) < 1e-6 && fabs(st[0] + 0.055) < 1e-7 &&
            fabs(st[1] - 0.00124975) < 2e-5 * 0.00124975,
            "Adam step 2: p %.9g m %.9g v %.9g, want %.9g -0.055 0.00124975", p, st[0],
            st[1], want);
}
END_TEST

/* Updating [0, n) at once equals updating [0, k) and [k, n) with their own states, bit
 * for bit, over several steps: what ZeRO relies on. A state is laid out as nn.h says:
 * S floats per parameter, interleaved, so the slice [a, b) owns state [a*S, b*S). */
START_TEST(test_optim_slices)
{
    enum { N = 37, K = 11, STEPS = 4 };
    dt_optim_config opts[2] = {
        { .kind = DT_SGD, .lr = 0.05f, .momentum = 0.9f },
        { .kind = DT_ADAM, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f },
    };
    for (int k = 0; k < 2; k++) {
        const dt_optim_config *o = &opts[k];
        int S = dt_optim_state_per_param(o->kind);
        float *p = unit_random_floats(N, -1, 1), *q = unit_copy_floats(p, N);
        float whole[2 * N] = { 0 }, lo[2 * K] = { 0 }, hi[2 * (N - K)] = { 0 };
        for (int t = 1; t <= STEPS; t++) {
            float *g = unit_random_floats(N, -1, 1);
            dt_optim_step(o, t, p, g, whole, N);
            dt_optim_step(o, t, q, g, lo, K);
            dt_optim_step(o, t, q + K, g + K, hi, N - K);
            free(g);
        }
        REQUIRE(memcmp(p, q, sizeof(float) * N) == 0, "%s: the slices update differently "
                "from the whole", k ? "Adam" : "SGD");
        REQUIRE(memcmp(whole, lo, sizeof(float) * K * S) == 0 &&
                memcmp(whole + K * S, hi, sizeof(float) * (N - K) * S) == 0,
                "%s: the state of the slices differs from the whole's", k ? "Adam" : "SGD");
        free(p);
        free(q);
    }
}
END_TEST

/* ==== IDX files ==== */

static char dir[256];

static void idx_setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dt_unit_nn_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("unit_nn: mkdtemp");
        exit(EXIT_FAILURE);
    }
}

static void idx_teardown(void)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        char p[600];
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                unlink(p);
            }
        closedir(d);
    }
    if (rmdir(dir) != 0)
        fprintf(stderr, "unit_nn: could not remove %s\n", dir);
}

/* Writes an IDX file: the 4-byte magic, ndims big-endian 32-bit sizes, then len bytes. */
static const char *write_idx(const char *name, uint32_t magic, int ndims,
                             const uint32_t *dims, const unsigned char *data, size_t len)
{
    static char p[32][320];             /* one per file a test writes, kept */
    static int k;
    ck_assert_int_lt(k, 32);
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    FILE *f = fopen(p[k], "wb");
    ck_assert_ptr_nonnull(f);
    uint32_t words[4] = { magic, ndims > 0 ? dims[0] : 0, ndims > 1 ? dims[1] : 0,
                          ndims > 2 ? dims[2] : 0 };
    for (int w = 0; w <= ndims; w++) {
        unsigned char be[4] = { words[w] >> 24, words[w] >> 16 & 255, words[w] >> 8 & 255,
                                words[w] & 255 };
        ck_assert_uint_eq(fwrite(be, 1, 4, f), 4);
    }
    if (len)
        ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    return p[k++];
}

/* 3 images of 2x3 pixels, labels 1, 0, 9 */
static unsigned char pix[18], lab[3] = { 1, 0, 9 };
static const uint32_t idims[3] = { 3, 2, 3 }, ldims[1] = { 3 };
static void fill_pixels(void)
{
    for (int i = 0; i < 18; i++)
        pix[i] = (unsigned char)(i * 15);
}

START_TEST(test_idx_good)
{
    fill_pixels();
    const char *im = write_idx("img", 0x803, 3, idims, pix, 18);
    const char *lb = write_idx("lab", 0x801, 1, ldims, lab, 3);
    dt_dataset d;
    char err[256];
    int rc = dt_data_load_idx(&d, im, lb, err, sizeof err);
    REQUIRE(rc == 0, "a good IDX pair refused: %s", err);
    ck_assert_int_eq(d.n, 3);
    ck_assert_int_eq(d.features, 6);
    ck_assert_int_eq(d.classes, 10);
    for (int i = 0; i < 18; i++)
        REQUIRE(fabsf(d.x[i] - pix[i] / 255.0f) < 1e-7f, "pixel %d: %g, want %g", i, d.x[i],
                pix[i] / 255.0);
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(d.y[i], lab[i]);
    dt_data_free(&d);
    /* labels beyond 9: classes = max + 1 */
    unsigned char lab12[3] = { 11, 0, 3 };
    lb = write_idx("lab12", 0x801, 1, ldims, lab12, 3);
    REQUIRE(dt_data_load_idx(&d, im, lb, err, sizeof err) == 0, "refused: %s", err);
    ck_assert_int_eq(d.classes, 12);
    dt_data_free(&d);
}
END_TEST

/* Each broken pair must give -1, an empty set, and a message naming the file and
 * containing the words given. */
static void refused(const char *im, const char *lb, const char *file, const char *words)
{
    dt_dataset d;
    char err[256];
    memset(&d, 0x55, sizeof d);
    int rc = dt_data_load_idx(&d, im, lb, err, sizeof err);
    REQUIRE(rc == -1, "accepted a broken file (%s)", words);
    REQUIRE(d.n == 0 && d.x == NULL && d.y == NULL, "a refused load left data behind");
    REQUIRE(strstr(err, file) != NULL && strstr(err, words) != NULL,
            "message \"%s\" should name %s and say \"%s\"", err, file, words);
}

START_TEST(test_idx_bad)
{
    fill_pixels();
    const char *im = write_idx("img", 0x803, 3, idims, pix, 18);
    const char *lb = write_idx("lab", 0x801, 1, ldims, lab, 3);
    const char *t = write_idx("trunc", 0x803, 3, idims, pix, 17);
    refused(t, lb, t, "truncated");
    t = write_idx("trunclab", 0x801, 1, ldims, lab, 2);
    refused(im, t, t, "truncated");
    t = write_idx("long", 0x803, 3, idims, pix, 18 + 0);
    FILE *f = fopen(t, "ab");                       /* one byte too many */
    ck_assert_ptr_nonnull(f);
    fputc(0, f);
    fclose(f);
    refused(t, lb, t, "bytes after the data");
    t = write_idx("magic", 0x804, 3, idims, pix, 18);
    refused(t, lb, t, "0x00000804");
    const uint32_t ten[1] = { 10 };
    t = write_idx("lab10", 0x801, 1, ten, pix, 10);
    refused(t, lb, t, "not an IDX images file");    /* labels where images go */
    const uint32_t two[1] = { 2 };
    t = write_idx("two", 0x801, 1, two, lab, 2);
    refused(im, t, "3 images", "2 labels");
    /* a header claiming 4 billion images of 65536 x 65536 pixels, in a tiny file */
    const uint32_t huge[3] = { 0xffffffffu, 65536, 65536 };
    t = write_idx("huge", 0x803, 3, huge, pix, 18);
    refused(t, lb, t, "more than the file holds");
    const uint32_t zero[3] = { 3, 0, 3 };
    t = write_idx("zero", 0x803, 3, zero, pix, 18);
    refused(t, lb, t, "leaves no data");
    t = write_idx("short", 0x803, 1, idims, NULL, 0);      /* header cut after n */
    refused(t, lb, t, "too short");
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no-such-file", dir);
    refused(missing, lb, missing, "cannot open");
    refused(im, missing, missing, "cannot open");
    refused(dir, lb, dir, "not a regular file");
}
END_TEST

/* Every cut of a good file is refused; every header byte changed at random gives a
 * load or a refusal, never a crash (and with AddressSanitizer, no bad access). */
START_TEST(test_idx_cuts)
{
    fill_pixels();
    const char *lb = write_idx("lab", 0x801, 1, ldims, lab, 3);
    unsigned char file[16 + 18];
    const char *im = write_idx("img", 0x803, 3, idims, pix, 18);
    FILE *f = fopen(im, "rb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fread(file, 1, sizeof file, f), sizeof file);
    fclose(f);
    char cut[320], err[256];
    snprintf(cut, sizeof cut, "%s/cut", dir);
    dt_dataset d;
    for (size_t len = 0; len <= sizeof file; len++) {
        for (int trial = 0; trial < (len == sizeof file ? 200 : 1); trial++) {
            unsigned char buf[sizeof file];
            memcpy(buf, file, sizeof file);
            if (trial > 0)                  /* the whole file, one header byte changed */
                buf[(int)unit_uniform(0, 16)] = (unsigned char)unit_uniform(0, 256);
            f = fopen(cut, "wb");
            ck_assert_ptr_nonnull(f);
            if (len)
                ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
            fclose(f);
            int rc = dt_data_load_idx(&d, cut, lb, err, sizeof err);
            if (len < sizeof file)
                REQUIRE(rc == -1 && strstr(err, cut), "a file cut to %zu of %zu bytes: rc "
                        "%d, message \"%s\"", len, sizeof file, rc, err);
            REQUIRE(rc == -1 || (d.n == 3 && d.features == 6), "accepted a header that "
                    "does not match the file: n %d, features %d", d.n, d.features);
            if (rc == 0)
                dt_data_free(&d);
        }
    }
}
END_TEST

/* ==== a short training run ==== */

/* 50 steps on the synthetic set, serial: the loss of the last 5 steps is under half
 * that of the first 5. ReLU with SGD and momentum, GELU with Adam. */
START_TEST(test_train)
{
    dt_mlp_config c = { .in = 16, .hidden = 32, .out = 4, .layers = 3,
                        .act = _i ? DT_GELU : DT_RELU };
    dt_optim_config o = _i ? (dt_optim_config){ .kind = DT_ADAM, .lr = 0.01f, .beta1 = 0.9f,
                                                .beta2 = 0.999f, .eps = 1e-8f }
                           : (dt_optim_config){ .kind = DT_SGD, .lr = 0.05f, .momentum = 0.9f };
    enum { B = 32, STEPS = 50 };
    dt_dataset d;
    dt_data_synthetic(&d, 512, c.in, c.out, 3);
    size_t np = dt_mlp_nparams(&c);
    float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g);
    float *st = calloc(np * dt_optim_state_per_param(o.kind), sizeof *st);
    float x[B * 16], dl[B * 4];
    int y[B];
    dt_mlp_init(&c, 3, p);
    dt_mlp_acts a;
    dt_mlp_acts_alloc(&c, B, 0, &a);
    double first = 0, last = 0;
    for (int s = 0; s < STEPS; s++) {
        dt_data_batch(&d, s, B, 0, B, x, y);
        const float *logits = dt_mlp_forward(&c, p, x, B, &a);
        float loss = dt_xent(logits, y, B, c.out, 1.0f / B, dl) / B;
        memset(g, 0, np * sizeof *g);
        dt_mlp_backward(&c, p, &a, dl, B, g, NULL, NULL);
        dt_optim_step(&o, s + 1, p, g, st, np);
        if (s < 5)
            first += loss / 5;
        if (s >= STEPS - 5)
            last += loss / 5;
    }
    REQUIRE(isfinite(last) && last < 0.5 * first, "%s: loss went from %g to %g",
            _i ? "GELU + Adam" : "ReLU + SGD", first, last);
    dt_mlp_acts_free(&a);
    dt_data_free(&d);
    free(p); free(g); free(st);
}
END_TEST

int main(void)
{
    unit_seed(0x2545f4914f6cdd1dull);   /* this suite's numbers since it began */
    Suite *s = suite_create("nn");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, test_shapes);
    tcase_add_loop_test(tc, test_linear, 0, 2 * NLIN);
    tcase_add_test(tc, test_blas_vs_loops);
    tcase_add_test(tc, test_activations);
    tcase_add_test(tc, test_exp);
    tcase_add_exit_test(tc, test_act_overlap, 1);
    tcase_add_test(tc, test_xent);
    tcase_add_exit_test(tc, test_xent_bad_label, 1);
    tcase_add_loop_test(tc, test_backward_fd, 0, NFD);
    tcase_add_loop_test(tc, test_accumulation, 0, 2);
    tcase_add_exit_test(tc, test_batch_too_big, 1);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_synthetic);
    tcase_add_test(tc, test_batches);
    tcase_add_test(tc, test_sgd);
    tcase_add_test(tc, test_adam);
    tcase_add_test(tc, test_optim_slices);
    tcase_add_loop_test(tc, test_train, 0, 2);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    TCase *io = tcase_create("idx");
    tcase_add_unchecked_fixture(io, idx_setup, idx_teardown);
    tcase_add_test(io, test_idx_good);
    tcase_add_test(io, test_idx_bad);
    tcase_add_test(io, test_idx_cuts);
    tcase_set_timeout(io, 60);
    suite_add_tcase(s, io);
    return unit_run(s);
}
