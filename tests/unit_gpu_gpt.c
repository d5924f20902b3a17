/* Unit tests of the GPT's CUDA kernels (lib/nn/gpt_kernels.cu) against gpt.c's CPU
 * loops, the reference (which tests/unit_gpt.c holds to central differences). No MPI.
 *
 * Each operation of gpt.h runs twice on the same random inputs (different in every
 * test), through its public function: on host buffers (the loops) and on device buffers
 * (dispatched to the kernels). Shapes divide nothing evenly (B=3, T=7, H=2, d=5, C=10,
 * V=13), and some go past what one launch covers: the row kernels take one block of 256
 * threads a row and at most 4096 blocks, so more than 4096 rows wrap round the grid and
 * a row longer than 256 round the block; element-wise kernels wrap past 2^20 items. In
 * turn:
 *   - the embeddings, with and without context parallelism's positions; backward adds
 *     onto random gradients, tokens repeating: the CPU's bits exactly (additions alone,
 *     in the CPU's order); a token out of the vocabulary stops the program (status 1);
 *   - LayerNorm: y, mean, rstd; backward's dx, dw, db added onto random values, whole,
 *     dx alone and the weights' alone;
 *   - causal attention: att (exact zeros above the diagonal), y; backward's dqkv and
 *     datt (exact zeros above the diagonal too);
 *   - the residual add and the row copies gpt.c's own rows and copies use;
 *   - the whole model, dt_gpt_forward and dt_gpt_backward with every buffer on the GPU
 *     (dt_gpt_acts_alloc_on), and with full and selective recomputation and the split
 *     (zero-bubble) backward: the logits and every tensor's gradient, added onto random
 *     gradients.
 * Device outputs start as NaN, so that an element a kernel forgets fails. Without a GPU
 * the CPU halves run alone and main says once "GPU comparisons skipped: no GPU": never a
 * silent pass. scripts/gpu-check.sh fails a run that prints it.
 *
 *   build/tests/unit_gpu_gpt
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
#include "buf.h"
#include "cuda.h"
#include "nn/gpt.h"
#include "nn/nn_cuda.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* Past the grid: 4096 blocks of 256 threads cover 2^20 items per sweep. */
#define PAST_GRID ((size_t)256 * 4096 + 4097)

/* ==== helpers ==== */

static int gpu;          /* set by main: 1 when a GPU can be used */

/* A device buffer of n NaNs, for outputs that must be written */
static float *nan_gpu(size_t n)
{
    float *h = unit_nan_floats(n), *d = unit_to_gpu(h, n * sizeof *h);
    free(h);
    return d;
}

/* The GPU's result against the CPU's, within tol of the largest |cpu| (at least 1e-6) */
static void require_gpu_close(const float *d_got, const float *cpu, size_t n, double tol,
                              const char *what)
{
    float *got = unit_from_gpu(d_got, n * sizeof(float));
    double *want = unit_to_double(cpu, n);
    unit_require_near(got, want, n, tol, 1e-6, what);
    free(got);
    free(want);
}

/* The GPU's result the CPU's bits */
static void require_gpu_same(const float *d_got, const float *cpu, size_t n,
                             const char *what)
{
    float *got = unit_from_gpu(d_got, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        REQUIRE(memcmp(&got[i], &cpu[i], sizeof(float)) == 0, "%s[%zu] = %.9g, the "
                "CPU's %.9g", what, i, (double)got[i], (double)cpu[i]);
    free(got);
}

/* att or datt (B H, T, T) from the GPU: exactly 0 above the diagonal */
static void require_gpu_causal(const float *d_att, size_t heads, int T, const char *what)
{
    size_t n = heads * T * T;
    float *a = unit_from_gpu(d_att, n * sizeof(float));
    for (size_t k = 0; k < heads; k++)
        for (int i = 0; i < T; i++)
            for (int j = i + 1; j < T; j++)
                REQUIRE(a[(k * T + i) * T + j] == 0.0f, "%s: head %zu row %d column %d "
                        "is %g, not 0", what, k, i, j, (double)a[(k * T + i) * T + j]);
    free(a);
}

static int *random_tokens(size_t n, int V)
{
    int *tok = malloc((n ? n : 1) * sizeof *tok);
    ck_assert_ptr_nonnull(tok);
    for (size_t i = 0; i < n; i++)
        tok[i] = (int)unit_uniform(0, V);
    return tok;
}

/* ==== the embeddings ==== */

static const int emb_shapes[][6] = {    /* B, T, C, V, wpe's rows S, positions given */
    { 3, 7, 10, 13, 7, 0 },
    { 3, 7, 10, 13, 11, 1 },             /* context parallelism: rows at positions */
    { 1, 1, 1, 2, 1, 0 },
    { 5, 300, 700, 13, 300, 0 },         /* N C past the grid, C past a block */
};
#define NEMB (int)(sizeof emb_shapes / sizeof emb_shapes[0])

START_TEST(test_embed)
{
    unit_seed(0x1000 + _i);
    const int *s = emb_shapes[_i];
    int B = s[0], T = s[1], C = s[2], V = s[3], S = s[4];
    size_t N = (size_t)B * T, n = N * C;
    int *tok = random_tokens(N, V), *pos = NULL;
    if (s[5]) {
        pos = malloc(T * sizeof *pos);
        for (int t = 0; t < T; t++)
            pos[t] = (3 * t + 2) % S;                 /* distinct, out of order */
    }
    float *wte = unit_random_floats((size_t)V * C, -1, 1);
    float *wpe = unit_random_floats((size_t)S * C, -1, 1);
    float *dout = unit_random_floats(n, -1, 1), *out = unit_nan_floats(n);
    float *dwte0 = unit_random_floats((size_t)V * C, -1, 1);
    float *dwpe0 = unit_random_floats((size_t)S * C, -1, 1);
    float *dwte = unit_copy_floats(dwte0, (size_t)V * C);
    float *dwpe = unit_copy_floats(dwpe0, (size_t)S * C);
    dt_embed_forward(tok, wte, wpe, pos, out, B, T, C, V);
    dt_embed_backward(tok, dout, pos, dwte, dwpe, B, T, C);
    for (size_t i = 0; i < n; i++)
        REQUIRE(isfinite(out[i]), "cpu out[%zu] = %g", i, (double)out[i]);

    if (unit_use_gpu(gpu)) {
        int *d_tok = unit_to_gpu(tok, N * sizeof *tok);
        int *d_pos = pos ? unit_to_gpu(pos, T * sizeof *pos) : NULL;
        float *d_wte = unit_to_gpu(wte, (size_t)V * C * 4);
        float *d_wpe = unit_to_gpu(wpe, (size_t)S * C * 4);
        float *d_out = nan_gpu(n), *d_dout = unit_to_gpu(dout, n * 4);
        float *d_dwte = unit_to_gpu(dwte0, (size_t)V * C * 4);
        float *d_dwpe = unit_to_gpu(dwpe0, (size_t)S * C * 4);
        dt_embed_forward(d_tok, d_wte, d_wpe, d_pos, d_out, B, T, C, V);
        require_gpu_same(d_out, out, n, "gpu out");
        dt_embed_backward(d_tok, d_dout, d_pos, d_dwte, d_dwpe, B, T, C);
        require_gpu_same(d_dwte, dwte, (size_t)V * C, "gpu dwte");
        require_gpu_same(d_dwpe, dwpe, (size_t)S * C, "gpu dwpe");
        dti_cuda_free(d_tok); dti_cuda_free(d_wte); dti_cuda_free(d_wpe);
        dti_cuda_free(d_out); dti_cuda_free(d_dout); dti_cuda_free(d_dwte);
        dti_cuda_free(d_dwpe);
        if (d_pos)
            dti_cuda_free(d_pos);
    }
    free(tok); free(pos); free(wte); free(wpe); free(dout); free(out); free(dwte0);
    free(dwpe0); free(dwte); free(dwpe);
}
END_TEST

/* A token out of the vocabulary (V, then -1) stops the program with status 1: on the
 * GPU where there is one (after a good call, so that CUDA itself is known to work),
 * else on the CPU */
START_TEST(test_bad_token)
{
    enum { B = 2, T = 3, C = 4, V = 5 };
    int tok[B * T] = { 0, 1, 2, 3, 4, 0 };
    float *wte = unit_random_floats(V * C, -1, 1), *wpe = unit_random_floats(T * C, -1, 1);
    float out[B * T * C];
    if (unit_use_gpu(gpu)) {
        int *d_tok = unit_to_gpu(tok, sizeof tok);
        float *d_wte = unit_to_gpu(wte, V * C * 4), *d_wpe = unit_to_gpu(wpe, T * C * 4);
        float *d_out = nan_gpu(B * T * C);
        dt_embed_forward(d_tok, d_wte, d_wpe, NULL, d_out, B, T, C, V);
        tok[_i ? 2 : 4] = _i ? -1 : V;
        dti_cuda_memcpy(d_tok, tok, sizeof tok);
        dt_embed_forward(d_tok, d_wte, d_wpe, NULL, d_out, B, T, C, V);
    } else {
        tok[_i ? 2 : 4] = _i ? -1 : V;
        dt_embed_forward(tok, wte, wpe, NULL, out, B, T, C, V);
    }
}
END_TEST

/* ==== LayerNorm ==== */

static const int ln_shapes[][2] = {     /* N, C */
    { 21, 10 }, { 1, 1 },
    { 4103, 3 },           /* rows past the grid's 4096 blocks */
    { 7, 1500 },           /* a row past a block's 256 threads */
};
#define NLN (int)(sizeof ln_shapes / sizeof ln_shapes[0])

START_TEST(test_layernorm)
{
    unit_seed(0x2000 + _i);
    int N = ln_shapes[_i][0], C = ln_shapes[_i][1];
    size_t n = (size_t)N * C;
    float *x = unit_random_floats(n, -2, 2), *w = unit_random_floats(C, 0.5, 1.5);
    float *b = unit_random_floats(C, -1, 1), *dy = unit_random_floats(n, -1, 1);
    float *y = unit_nan_floats(n), *mean = unit_nan_floats(N), *rstd = unit_nan_floats(N);
    float *dx0 = unit_random_floats(n, -1, 1), *dw0 = unit_random_floats(C, -1, 1);
    float *db0 = unit_random_floats(C, -1, 1);
    float *dx = unit_copy_floats(dx0, n), *dw = unit_copy_floats(dw0, C);
    float *db = unit_copy_floats(db0, C);
    dt_layernorm_forward(x, w, b, y, mean, rstd, N, C);
    dt_layernorm_backward(x, w, mean, rstd, dy, dx, dw, db, N, C);
    for (size_t i = 0; i < n; i++)
        REQUIRE(isfinite(y[i]) && isfinite(dx[i]), "cpu y or dx [%zu] not finite", i);

    if (unit_use_gpu(gpu)) {
        float *d_x = unit_to_gpu(x, n * 4), *d_w = unit_to_gpu(w, C * 4);
        float *d_b = unit_to_gpu(b, C * 4);
        float *d_dy = unit_to_gpu(dy, n * 4), *d_y = nan_gpu(n), *d_mean = nan_gpu(N);
        float *d_rstd = nan_gpu(N);
        dt_layernorm_forward(d_x, d_w, d_b, d_y, d_mean, d_rstd, N, C);
        /* y carries the mean's last bit times rstd (up to 1/sqrt(1e-5) = 316, where a
         * row's values are close): a wider tolerance than mean's and rstd's */
        require_gpu_close(d_y, y, n, 3e-5, "gpu y");
        require_gpu_close(d_mean, mean, N, 1e-5, "gpu mean");
        require_gpu_close(d_rstd, rstd, N, 1e-5, "gpu rstd");
        /* backward from the CPU's mean and rstd: the same inputs as the CPU's */
        float *c_mean = unit_to_gpu(mean, N * 4), *c_rstd = unit_to_gpu(rstd, N * 4);
        float *d_dx = unit_to_gpu(dx0, n * 4), *d_dw = unit_to_gpu(dw0, C * 4);
        float *d_db = unit_to_gpu(db0, C * 4);
        dt_layernorm_backward(d_x, d_w, c_mean, c_rstd, d_dy, d_dx, d_dw, d_db, N, C);
        require_gpu_close(d_dx, dx, n, 2e-5, "gpu dx");
        require_gpu_close(d_dw, dw, C, 2e-5, "gpu dw");
        require_gpu_close(d_db, db, C, 2e-5, "gpu db");
        dti_cuda_memcpy(d_dx, dx0, n * 4);                      /* dx alone */
        dti_cuda_memcpy(d_dw, dw0, C * 4);
        dt_layernorm_backward(d_x, d_w, c_mean, c_rstd, d_dy, d_dx, NULL, NULL, N, C);
        require_gpu_close(d_dx, dx, n, 2e-5, "gpu dx alone");
        require_gpu_same(d_dw, dw0, C, "gpu dw untouched by dx alone");
        dti_cuda_memcpy(d_dx, dx0, n * 4);                      /* the weights' alone */
        dti_cuda_memcpy(d_db, db0, C * 4);
        dt_layernorm_backward(d_x, NULL, c_mean, c_rstd, d_dy, NULL, d_dw, d_db, N, C);
        require_gpu_close(d_dw, dw, C, 2e-5, "gpu dw alone");
        require_gpu_close(d_db, db, C, 2e-5, "gpu db alone");
        require_gpu_same(d_dx, dx0, n, "gpu dx untouched by the weights' alone");
        dti_cuda_free(d_x); dti_cuda_free(d_w); dti_cuda_free(d_b); dti_cuda_free(d_dy);
        dti_cuda_free(d_y); dti_cuda_free(d_mean); dti_cuda_free(d_rstd);
        dti_cuda_free(c_mean); dti_cuda_free(c_rstd); dti_cuda_free(d_dx);
        dti_cuda_free(d_dw); dti_cuda_free(d_db);
    }
    free(x); free(w); free(b); free(dy); free(y); free(mean); free(rstd); free(dx0);
    free(dw0); free(db0); free(dx); free(dw); free(db);
}
END_TEST

/* ==== causal attention ==== */

static const int attn_shapes[][4] = {   /* B, T, H, d */
    { 3, 7, 2, 5 }, { 1, 1, 1, 1 },
    { 2, 700, 3, 5 },      /* B H T rows past the grid, a row of T past a block */
    { 2, 9, 1, 300 },      /* d past a block */
};
#define NATTN (int)(sizeof attn_shapes / sizeof attn_shapes[0])

START_TEST(test_attention)
{
    unit_seed(0x3000 + _i);
    int B = attn_shapes[_i][0], T = attn_shapes[_i][1], H = attn_shapes[_i][2];
    int d = attn_shapes[_i][3];
    size_t N = (size_t)B * T, hd = (size_t)H * d, heads = (size_t)B * H;
    size_t nqkv = N * 3 * hd, ny = N * hd, natt = heads * T * T;
    float *qkv = unit_random_floats(nqkv, -2, 2), *dy = unit_random_floats(ny, -1, 1);
    float *att = unit_nan_floats(natt), *y = unit_nan_floats(ny);
    float *datt = unit_nan_floats(natt), *dqkv = unit_nan_floats(nqkv);
    dt_attention_forward(qkv, att, y, B, T, H, d);
    dt_attention_backward(qkv, att, dy, datt, dqkv, B, T, H, d);
    for (size_t i = 0; i < nqkv; i++)
        REQUIRE(isfinite(dqkv[i]), "cpu dqkv[%zu] = %g", i, (double)dqkv[i]);

    if (unit_use_gpu(gpu)) {
        float *d_qkv = unit_to_gpu(qkv, nqkv * 4), *d_dy = unit_to_gpu(dy, ny * 4);
        float *d_att = nan_gpu(natt), *d_y = nan_gpu(ny);
        dt_attention_forward(d_qkv, d_att, d_y, B, T, H, d);
        require_gpu_close(d_att, att, natt, 2e-5, "gpu att");
        require_gpu_causal(d_att, heads, T, "gpu att");
        require_gpu_close(d_y, y, ny, 2e-5, "gpu y");
        /* backward from the CPU's att: the same inputs as the CPU's */
        float *c_att = unit_to_gpu(att, natt * 4), *d_datt = nan_gpu(natt);
        float *d_dqkv = nan_gpu(nqkv);
        dt_attention_backward(d_qkv, c_att, d_dy, d_datt, d_dqkv, B, T, H, d);
        require_gpu_close(d_datt, datt, natt, 1e-4, "gpu datt");
        require_gpu_causal(d_datt, heads, T, "gpu datt");
        require_gpu_close(d_dqkv, dqkv, nqkv, 1e-4, "gpu dqkv");
        dti_cuda_free(d_qkv); dti_cuda_free(d_dy); dti_cuda_free(d_att);
        dti_cuda_free(d_y); dti_cuda_free(c_att); dti_cuda_free(d_datt);
        dti_cuda_free(d_dqkv);
    }
    free(qkv); free(dy); free(att); free(y); free(datt); free(dqkv);
}
END_TEST

/* ==== the residual add and row copies ==== */

static const size_t add_sizes[] = { 1, 1000, PAST_GRID };
#define NADD (int)(sizeof add_sizes / sizeof add_sizes[0])

START_TEST(test_add)
{
    unit_seed(0x4000 + _i);
    size_t n = add_sizes[_i];
    float *dst = unit_random_floats(n, -1, 1), *src = unit_random_floats(n, -1, 1);
    float *sum = malloc(n * sizeof *sum);
    for (size_t i = 0; i < n; i++)
        sum[i] = dst[i] + src[i];
    if (unit_use_gpu(gpu)) {
        float *d_dst = unit_to_gpu(dst, n * 4), *d_src = unit_to_gpu(src, n * 4);
        dti_nn_cuda_add(d_dst, d_src, n);
        require_gpu_same(d_dst, sum, n, "gpu dst + src");
        dti_cuda_free(d_dst); dti_cuda_free(d_src);
    }
    free(dst); free(src); free(sum);
}
END_TEST

static const size_t copy_shapes[][4] = {  /* rows, width, source's and dest's rows apart */
    { 3, 17, 40, 17 },     /* own_rows: B rows of (p1 - p0) C out of T C */
    { 1, 1000, 1000, 1000 },               /* a plain copy */
    { 5, 300000, 300011, 300003 },         /* past the grid */
};
#define NCOPY (int)(sizeof copy_shapes / sizeof copy_shapes[0])

START_TEST(test_copy_rows)
{
    unit_seed(0x5000 + _i);
    size_t rows = copy_shapes[_i][0], w = copy_shapes[_i][1];
    size_t sld = copy_shapes[_i][2], dld = copy_shapes[_i][3];
    size_t ns = rows * sld, nd = rows * dld;
    float *src = unit_random_floats(ns, -1, 1), *dst = unit_random_floats(nd, -1, 1);
    float *want = unit_copy_floats(dst, nd);
    for (size_t r = 0; r < rows; r++)
        memcpy(want + r * dld, src + r * sld, w * sizeof *want);
    if (unit_use_gpu(gpu)) {
        float *d_src = unit_to_gpu(src, ns * 4), *d_dst = unit_to_gpu(dst, nd * 4);
        dti_nn_cuda_copy_rows(d_dst, dld, d_src, sld, w, rows);
        require_gpu_same(d_dst, want, nd, "gpu rows copied (and the gaps kept)");
        dti_cuda_free(d_src); dti_cuda_free(d_dst);
    }
    free(src); free(dst); free(want);
}
END_TEST

/* ==== the whole model ==== */

static const dt_gpt_config model = { .vocab = 13, .seq = 9, .embed = 10, .heads = 2,
                                     .layers = 2 };
enum { MB = 3, MT = 7 };               /* T < seq */
static const char *const model_runs[] = { "keep", "full recomputation",
                                          "selective recomputation", "split backward" };
#define NMODEL (int)(sizeof model_runs / sizeof model_runs[0])

/* Forward, then backward into grads, of the way run v: params, tok, dlogits and grads
 * all on the host or all on the GPU (on_device), the activations with them. The logits
 * are copied to logits (host). */
static void run_model(int v, int on_device, const float *params, const int *tok,
                      const float *dlogits, float *grads, float *logits)
{
    const dt_gpt_config *c = &model;
    int units = dt_gpt_units(c);
    dt_gpt_cut k = dt_gpt_whole(c, v == 1 ? DT_GPT_RECOMPUTE_FULL
                                   : v == 2 ? DT_GPT_RECOMPUTE_SELECTIVE : DT_GPT_KEEP);
    k.split = v == 3;
    dt_gpt_acts a;
    dt_gpt_acts_alloc_on(c, v ? &k : NULL, MB, MT, on_device, &a);
    const float *lg = v ? dt_gpt_forward_cut(c, &k, params, tok, MB, MT, &a, NULL, NULL)
                        : dt_gpt_forward(c, params, tok, MB, MT, &a);
    dt_memcpy(logits, lg, (size_t)MB * MT * c->vocab * sizeof(float));
    if (v == 0) {
        dt_gpt_backward(c, params, &a, dlogits, tok, MB, MT, grads, NULL, NULL);
    } else if (v == 3) {
        dt_gpt_backward_stage_input(c, &k, 0, units, params, &a, dlogits, NULL, MB, MT,
                                    NULL, NULL);
        dt_gpt_backward_stage_weights(c, &k, 0, units, &a, tok, MB, MT, grads, NULL, NULL);
    } else {
        dt_gpt_backward_cut(c, &k, params, &a, dlogits, tok, MB, MT, grads, NULL, NULL);
    }
    dt_gpt_acts_free(&a);
}

/* Where each tensor of the model's flat array p starts, and the end: wte, wpe, each
 * block's twelve (dt_gpt_block_at's order), lnf's two. Returns how many tensors. */
static int tensor_starts(const float *p, size_t *at)
{
    const dt_gpt_config *c = &model;
    int n = 0;
    at[n++] = 0;
    at[n++] = (size_t)c->vocab * c->embed;
    for (int l = 0; l < c->layers; l++) {
        dt_gpt_block b;
        dt_gpt_block_at(c, c->heads, 4 * c->embed,
                        (float *)p + dt_gpt_unit_offset(c, 1 + l), &b);
        const float *t[] = { b.ln1_w, b.ln1_b, b.wqkv, b.bqkv, b.wo, b.bo, b.ln2_w,
                             b.ln2_b, b.w1, b.b1, b.w2, b.b2 };
        for (int i = 0; i < 12; i++)
            at[n++] = (size_t)(t[i] - p);
    }
    size_t lnf = dt_gpt_unit_offset(c, c->layers + 1);
    at[n++] = lnf;
    at[n++] = lnf + c->embed;
    at[n] = dt_gpt_nparams(c);
    return n;
}

START_TEST(test_model)
{
    unit_seed(0x6000 + _i);
    const dt_gpt_config *c = &model;
    size_t np = dt_gpt_nparams(c), N = (size_t)MB * MT, nl = N * c->vocab;
    float *params = malloc(np * sizeof *params), *logits = unit_nan_floats(nl);
    dt_gpt_init(c, 0x5eed + _i, params);
    int *tok = random_tokens(N, c->vocab);
    float *dlogits = unit_random_floats(nl, -1, 1);
    float *g0 = unit_random_floats(np, -0.01, 0.01), *grads = unit_copy_floats(g0, np);
    run_model(_i, 0, params, tok, dlogits, grads, logits);
    for (size_t i = 0; i < np; i++)
        REQUIRE(isfinite(grads[i]), "cpu grads[%zu] = %g", i, (double)grads[i]);

    if (unit_use_gpu(gpu)) {
        float *d_params = unit_to_gpu(params, np * 4), *d_grads = unit_to_gpu(g0, np * 4);
        float *d_dlogits = unit_to_gpu(dlogits, nl * 4), *got = unit_nan_floats(nl);
        int *d_tok = unit_to_gpu(tok, N * sizeof *tok);
        run_model(_i, 1, d_params, d_tok, d_dlogits, d_grads, got);
        double *want = unit_to_double(logits, nl);
        unit_require_near(got, want, nl, 1e-4, 1e-6, "gpu logits");
        /* each tensor's gradient to its own largest value */
        size_t at[2 + 12 * 2 + 2 + 1];
        int nt = tensor_starts(params, at);
        float *g = unit_from_gpu(d_grads, np * sizeof(float));
        for (int t = 0; t < nt; t++) {
            double *w = unit_to_double(grads + at[t], at[t + 1] - at[t]);
            char what[64];
            snprintf(what, sizeof what, "gpu gradient of tensor %d (%s)", t, model_runs[_i]);
            unit_require_near(g + at[t], w, at[t + 1] - at[t], 1e-4, 1e-6, what);
            free(w);
        }
        free(g); free(want); free(got);
        dti_cuda_free(d_params); dti_cuda_free(d_grads); dti_cuda_free(d_dlogits);
        dti_cuda_free(d_tok);
    }
    free(params); free(logits); free(tok); free(dlogits); free(g0); free(grads);
}
END_TEST

/* ==== main ==== */

int main(void)
{
    gpu = unit_probe_gpu_or_say("unit_gpu_gpt", "the CPU paths are run alone");
    Suite *s = suite_create("gpu_gpt");
    TCase *tc = tcase_create("gpu_gpt");
    tcase_add_loop_test(tc, test_embed, 0, NEMB);
    tcase_add_loop_exit_test(tc, test_bad_token, 1, 0, 2);
    tcase_add_loop_test(tc, test_layernorm, 0, NLN);
    tcase_add_loop_test(tc, test_attention, 0, NATTN);
    tcase_add_loop_test(tc, test_add, 0, NADD);
    tcase_add_loop_test(tc, test_copy_rows, 0, NCOPY);
    tcase_add_loop_test(tc, test_model, 0, NMODEL);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
