/* Unit tests of the GPT of lib/nn/gpt.h and its text, on the CPU. No MPI.
 *
 * - each operation's backward (the embeddings, LayerNorm and its accumulating dx,
 *   causal attention) against central differences of a double-precision forward
 *   written here; attention's weights 0 above the diagonal, rows summing to 1;
 *   outputs and scratch filled with NaN first, so that nothing stale is read;
 * - a whole block, and the whole model with its loss, the same way, for every
 *   parameter (and the block's input), at odd shapes with T < seq; unit_done's order;
 *   a position's logits depend on no later token and no other sequence, and are those
 *   of a shorter or smaller batch;
 * - all of it with OpenBLAS's sgemm and with the plain loops; the two on a larger model:
 *   close, each the same bits on every call, and not the same bits as each other;
 * - the threads of lib/nn's own loops (dt_set_blas_threads 1, 2, 3): the loss, logits,
 *   every gradient and an Adam step the same bits, with sgemm and with the loops;
 * - a block cut in two for tensor parallelism (heads 1 | 2, MLP columns 17 | 31, bias on
 *   one side), two threads standing for the two ranks and dt_gpt_cut's sum between
 *   them, gives the whole block's output and gradients to rounding; so does the whole
 *   model cut so (dt_gpt_forward_cut, dt_gpt_backward_cut);
 * - the model as two pipeline stages, split at every unit: the whole model's logits and
 *   gradients bit for bit, but wte's, whose two copies' gradients add up to the whole's;
 * - the initial weights: the same per seed, a tensor's values a function of (seed,
 *   unit, tensor) alone (the same at another depth but for wo's and w2's scale, at
 *   another vocabulary or sequence length), LayerNorms 1 and 0, biases 0, std 0.02;
 * - the layout: units, sizes (12C^2 + 13C a whole block), offsets, dt_gpt_block_at's
 *   order, the activations' floats, bad configurations named;
 * - texts: loaded from files written here; missing, empty, NUL, binary, a directory
 *   refused with a sentence naming the file, 1 control byte in 20 still text; the
 *   generated text; batches (y is x shifted by one, a slice of the global batch is
 *   those rows of it); the unigram entropy;
 * - a short serial training run on the generated text ends clearly below the text's
 *   unigram entropy; sampling is deterministic per seed and stays in the vocabulary;
 * - broken preconditions (a token out of the vocabulary, T larger than the
 *   activations or the model, a bad shape, an empty prompt, a text shorter than a
 *   sequence) stop the program (status 1) with the message that names them.
 *
 *   build/tests/unit_gpt
 */
#include <check.h>
#include "unit.h"
#include <cblas.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "nn/gpt.h"
#include "nn/nn.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* ==== helpers ==== */

static void random_tokens(int *tok, size_t n, int V)
{
    for (size_t i = 0; i < n; i++)
        tok[i] = (int)unit_uniform(0, V);
}

static const char *path_name(int blas) { return blas ? "sgemm" : "loops"; }

/* ==== the reference: the forward in double, from the definitions ==== */

static void ref_linear(const double *x, const double *W, const double *b, double *y, int N,
                       int in, int out)        /* y (N, out) = x (N, in) W^T (+ b) */
{
    for (int r = 0; r < N; r++)
        for (int o = 0; o < out; o++) {
            double s = b ? b[o] : 0.0;
            for (int i = 0; i < in; i++)
                s += x[(size_t)r * in + i] * W[(size_t)o * in + i];
            y[(size_t)r * out + o] = s;
        }
}

static void ref_layernorm(const double *x, const double *w, const double *b, double *y,
                          int N, int C)
{
    for (int r = 0; r < N; r++) {
        const double *x_r = x + (size_t)r * C;
        double m = 0, v = 0;
        for (int i = 0; i < C; i++)
            m += x_r[i] / C;
        for (int i = 0; i < C; i++)
            v += (x_r[i] - m) * (x_r[i] - m) / C;
        for (int i = 0; i < C; i++)
            y[(size_t)r * C + i] = (x_r[i] - m) / sqrt(v + 1e-5) * w[i] + b[i];
    }
}

static double ref_gelu(double x)
{
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* qkv (B, T, 3 H d) -> y (B, T, H d); att (B, H, T, T) or NULL */
static void ref_attention(const double *qkv, double *att, double *y, int B, int T, int H,
                          int d)
{
    int hd = H * d;
    double w[64];                                /* T <= 64 */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const double *q = qkv + ((size_t)b * T + i) * 3 * hd + h * d;
                double m = -INFINITY, z = 0;
                for (int j = 0; j <= i; j++) {
                    const double *k = qkv + ((size_t)b * T + j) * 3 * hd + hd + h * d;
                    double s = 0;
                    for (int e = 0; e < d; e++)
                        s += q[e] * k[e];
                    w[j] = s / sqrt((double)d);
                    m = fmax(m, w[j]);
                }
                for (int j = 0; j <= i; j++)
                    z += w[j] = exp(w[j] - m);
                for (int e = 0; e < d; e++) {
                    double s = 0;
                    for (int j = 0; j <= i; j++)
                        s += w[j] / z * qkv[((size_t)b * T + j) * 3 * hd + 2 * hd + h * d + e];
                    y[((size_t)b * T + i) * hd + h * d + e] = s;
                }
                for (int j = 0; att && j < T; j++)
                    att[(((size_t)b * H + h) * T + i) * T + j] = j <= i ? w[j] / z : 0.0;
            }
}

/* A block's tensors in the order gpt.h gives, for hd = heads * d query columns and F
 * MLP columns; returns the block's size. Written out here, not taken from gpt.c, so
 * that the layout test can hold dt_gpt_block_at to it. */
typedef struct {
    const double *ln1_w, *ln1_b, *wqkv, *bqkv, *wo, *bo, *ln2_w, *ln2_b, *w1, *b1, *w2, *b2;
} ref_block;

static size_t ref_block_at(size_t C, size_t hd, size_t F, const double *base, ref_block *r)
{
    const double *q = base;
    r->ln1_w = q; q += C;
    r->ln1_b = q; q += C;
    r->wqkv = q; q += 3 * hd * C;
    r->bqkv = q; q += 3 * hd;
    r->wo = q; q += C * hd;
    r->bo = q; q += C;
    r->ln2_w = q; q += C;
    r->ln2_b = q; q += C;
    r->w1 = q; q += F * C;
    r->b1 = q; q += F;
    r->w2 = q; q += C * F;
    r->b2 = q; q += C;
    return (size_t)(q - base);
}

/* A whole block: x (B, T, C) -> out (B, T, C), out != x */
static void ref_block_forward(int C, int H, const ref_block *p, const double *x,
                              double *out, int B, int T)
{
    size_t N = (size_t)B * T, F = 4 * (size_t)C;
    double *ln = calloc(N * C, sizeof *ln), *qkv = calloc(N * 3 * C, sizeof *qkv);
    double *y = calloc(N * C, sizeof *y), *x2 = calloc(N * C, sizeof *x2);
    double *h = calloc(N * F, sizeof *h);
    ref_layernorm(x, p->ln1_w, p->ln1_b, ln, (int)N, C);
    ref_linear(ln, p->wqkv, p->bqkv, qkv, (int)N, C, 3 * C);
    ref_attention(qkv, NULL, y, B, T, H, C / H);
    ref_linear(y, p->wo, p->bo, x2, (int)N, C, C);
    for (size_t i = 0; i < N * C; i++)
        x2[i] += x[i];
    ref_layernorm(x2, p->ln2_w, p->ln2_b, ln, (int)N, C);
    ref_linear(ln, p->w1, p->b1, h, (int)N, C, (int)F);
    for (size_t i = 0; i < N * F; i++)
        h[i] = ref_gelu(h[i]);
    ref_linear(h, p->w2, p->b2, out, (int)N, (int)F, C);
    for (size_t i = 0; i < N * C; i++)
        out[i] += x2[i];
    free(ln); free(qkv); free(y); free(x2); free(h);
}

/* The whole model's mean cross-entropy of tok (B, T) against tgt (B, T). */
static double ref_model_loss(const dt_gpt_config *c, const double *p, const int *tok,
                             const int *tgt, int B, int T)
{
    int C = c->embed, V = c->vocab, N = B * T;
    size_t emb = ((size_t)V + c->seq) * C, bs = 12 * (size_t)C * C + 13 * (size_t)C;
    const double *wte = p, *wpe = p + (size_t)V * C, *lnf = p + emb + c->layers * bs;
    double *x = malloc((size_t)N * C * sizeof *x), *nx = malloc((size_t)N * C * sizeof *nx);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < C; i++)
            x[(size_t)r * C + i] = wte[(size_t)tok[r] * C + i] + wpe[(size_t)(r % T) * C + i];
    for (int l = 0; l < c->layers; l++) {
        ref_block rb;
        ref_block_at(C, C, 4 * C, p + emb + l * bs, &rb);
        ref_block_forward(C, c->heads, &rb, x, nx, B, T);
        double *t = x; x = nx; nx = t;
    }
    ref_layernorm(x, lnf, lnf + C, nx, N, C);
    double loss = 0, logit[64];                  /* V <= 64 */
    for (int r = 0; r < N; r++) {
        double m = -INFINITY, z = 0;
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int i = 0; i < C; i++)
                s += nx[(size_t)r * C + i] * wte[(size_t)v * C + i];
            logit[v] = s;
            m = fmax(m, s);
        }
        for (int v = 0; v < V; v++)
            z += exp(logit[v] - m);
        loss += log(z) + m - logit[tgt[r]];
    }
    free(x); free(nx);
    return loss / N;
}

static double dot_d(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ==== the operations against differences ==== */

/* Each test's scalar is <dy, op(inputs)>: its gradient is what backward gives for dy. */
typedef struct {
    const int *tok;
    const double *wte, *wpe, *dy;
    int B, T, C;
} embed_ctx;

static double embed_f(const void *ctx)
{
    const embed_ctx *e = ctx;
    double s = 0;
    for (int r = 0; r < e->B * e->T; r++)
        for (int i = 0; i < e->C; i++)
            s += e->dy[(size_t)r * e->C + i] * (e->wte[(size_t)e->tok[r] * e->C + i] +
                                               e->wpe[(size_t)(r % e->T) * e->C + i]);
    return s;
}

/* Tokens repeat (their rows of dwte add up), T < seq (wpe's last rows get nothing),
 * and the gradients accumulate onto what was there. */
START_TEST(test_embed)
{
    enum { B = 3, T = 5, C = 7, V = 11, S = 8 };
    int tok[B * T] = { 3, 0, 10, 3, 3,   7, 7, 1, 0, 10,   2, 9, 3, 5, 6 };
    float *wte = unit_random_floats(V * C, -1, 1), *wpe = unit_random_floats(S * C, -1, 1);
    float *out = unit_nan_floats(B * T * C), *dy = unit_random_floats(B * T * C, -1, 1);
    float *dwte = unit_random_floats(V * C, -1, 1), *dwpe = unit_random_floats(S * C, -1, 1);
    double *wte_d = unit_to_double(wte, V * C), *wpe_d = unit_to_double(wpe, S * C);
    double *dy_d = unit_to_double(dy, B * T * C), *want = malloc(B * T * C * sizeof *want);
    double *gte = malloc(V * C * sizeof *gte), *gpe = malloc(S * C * sizeof *gpe);
    for (int r = 0; r < B * T; r++)
        for (int i = 0; i < C; i++)
            want[r * C + i] = wte_d[tok[r] * C + i] + wpe_d[(r % T) * C + i];
    dt_embed_forward(tok, wte, wpe, NULL, out, B, T, C, V);
    unit_require_near(out, want, B * T * C, 1e-7, 1.0, "embedding");

    embed_ctx e = { tok, wte_d, wpe_d, dy_d, B, T, C };
    unit_numeric_grad(embed_f, &e, wte_d, V * C, gte);
    unit_numeric_grad(embed_f, &e, wpe_d, S * C, gpe);
    for (int j = 0; j < V * C; j++)
        gte[j] += dwte[j];                      /* accumulating */
    for (int j = 0; j < S * C; j++)
        gpe[j] += dwpe[j];
    dt_embed_backward(tok, dy, NULL, dwte, dwpe, B, T, C);
    unit_require_near(dwte, gte, V * C, 1e-6, 1.0, "dwte");
    unit_require_near(dwpe, gpe, S * C, 1e-6, 1.0, "dwpe");
    free(wte); free(wpe); free(out); free(dy); free(dwte); free(dwpe);
    free(wte_d); free(wpe_d); free(dy_d); free(want); free(gte); free(gpe);
}
END_TEST

typedef struct {
    const double *x, *w, *b, *dy;
    int N, C;
} ln_ctx;

static double ln_f(const void *ctx)
{
    const ln_ctx *l = ctx;
    double *y = malloc((size_t)l->N * l->C * sizeof *y);
    ref_layernorm(l->x, l->w, l->b, y, l->N, l->C);
    double s = dot_d(y, l->dy, (size_t)l->N * l->C);
    free(y);
    return s;
}

/* Rows of another mean and spread each; dx, dw and db accumulate onto random values. */
START_TEST(test_layernorm)
{
    enum { N = 5, C = 13 };
    float *x = unit_random_floats(N * C, -1, 1), *w = unit_random_floats(C, 0.5, 1.5);
    float *b = unit_random_floats(C, -0.5, 0.5), *dy = unit_random_floats(N * C, -1, 1);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < C; i++)
            x[r * C + i] = x[r * C + i] * (0.3f + r) + 2.0f * r - 3.0f;
    float *y = unit_nan_floats(N * C), *mean = unit_nan_floats(N), *rstd = unit_nan_floats(N);
    float *dx = unit_random_floats(N * C, -1, 1), *dw = unit_random_floats(C, -1, 1);
    float *db = unit_random_floats(C, -1, 1);
    double *xd = unit_to_double(x, N * C), *wd = unit_to_double(w, C), *bd = unit_to_double(b, C);
    double *dyd = unit_to_double(dy, N * C), *want = malloc(N * C * sizeof *want);
    double *gx = malloc(N * C * sizeof *gx), *gw = malloc(C * sizeof *gw);
    double *gb = malloc(C * sizeof *gb);

    ref_layernorm(xd, wd, bd, want, N, C);
    dt_layernorm_forward(x, w, b, y, mean, rstd, N, C);
    unit_require_near(y, want, N * C, 4e-6, 1.0, "LayerNorm y");
    for (int r = 0; r < N; r++) {
        double m = 0, v = 0;
        for (int i = 0; i < C; i++)
            m += xd[r * C + i] / C;
        for (int i = 0; i < C; i++)
            v += (xd[r * C + i] - m) * (xd[r * C + i] - m) / C;
        REQUIRE(fabs(mean[r] - m) < 1e-6 * fmax(1, fabs(m)) &&
                fabs(rstd[r] - 1 / sqrt(v + 1e-5)) < 1e-6 / sqrt(v + 1e-5),
                "row %d: mean %.9g rstd %.9g, want %.9g %.9g", r, mean[r], rstd[r], m,
                1 / sqrt(v + 1e-5));
    }

    ln_ctx l = { xd, wd, bd, dyd, N, C };
    unit_numeric_grad(ln_f, &l, xd, N * C, gx);
    unit_numeric_grad(ln_f, &l, wd, C, gw);
    unit_numeric_grad(ln_f, &l, bd, C, gb);
    for (int j = 0; j < N * C; j++)
        gx[j] += dx[j];                         /* dx ACCUMULATES */
    for (int j = 0; j < C; j++)
        gw[j] += dw[j], gb[j] += db[j];
    dt_layernorm_backward(x, w, mean, rstd, dy, dx, dw, db, N, C);
    unit_require_near(dx, gx, N * C, 1e-5, 1.0, "LayerNorm dx (accumulated)");
    unit_require_near(dw, gw, C, 1e-5, 1.0, "LayerNorm dw");
    unit_require_near(db, gb, C, 1e-5, 1.0, "LayerNorm db");
    free(x); free(w); free(b); free(dy); free(y); free(mean); free(rstd); free(dx);
    free(dw); free(db); free(xd); free(wd); free(bd); free(dyd); free(want); free(gx);
    free(gw); free(gb);
}
END_TEST

typedef struct {
    const double *qkv, *dy;
    int B, T, H, d;
} att_ctx;

static double att_f(const void *ctx)
{
    const att_ctx *a = ctx;
    size_t ny = (size_t)a->B * a->T * a->H * a->d;
    double *y = malloc(ny * sizeof *y);
    ref_attention(a->qkv, NULL, y, a->B, a->T, a->H, a->d);
    double s = dot_d(y, a->dy, ny);
    free(y);
    return s;
}

static const int att_shapes[][4] = { { 2, 5, 3, 3 }, { 1, 7, 2, 5 }, { 3, 1, 1, 2 } };
#define NATT (int)(sizeof att_shapes / sizeof att_shapes[0])

/* Loop index: the shape (B, T, H, d); each with sgemm and with the loops. */
START_TEST(test_attention)
{
    int B = att_shapes[_i][0], T = att_shapes[_i][1], H = att_shapes[_i][2];
    int d = att_shapes[_i][3];
    size_t nq = (size_t)B * T * 3 * H * d, ny = (size_t)B * T * H * d;
    size_t na = (size_t)B * H * T * T;
    float *qkv = unit_random_floats(nq, -1.5, 1.5), *dy = unit_random_floats(ny, -1, 1);
    double *qd = unit_to_double(qkv, nq), *dyd = unit_to_double(dy, ny);
    double *want_att = malloc(na * sizeof *want_att), *want_y = malloc(ny * sizeof *want_y);
    double *gq = malloc(nq * sizeof *gq);
    ref_attention(qd, want_att, want_y, B, T, H, d);
    att_ctx ac = { qd, dyd, B, T, H, d };
    unit_numeric_grad(att_f, &ac, qd, nq, gq);
    char what[64];
    for (int blas = 1; blas >= 0; blas--) {
        dt_set_blas(blas);
        float *att = unit_nan_floats(na), *y = unit_nan_floats(ny), *datt = unit_nan_floats(na);
        float *dqkv = unit_nan_floats(nq);
        dt_attention_forward(qkv, att, y, B, T, H, d);
        for (int bh = 0; bh < B * H; bh++)
            for (int i = 0; i < T; i++) {
                const float *row = att + ((size_t)bh * T + i) * T;
                double sum = 0;
                for (int j = 0; j < T; j++) {
                    REQUIRE(j <= i || row[j] == 0.0f, "%s: att[%d][%d][%d] = %g above the "
                            "diagonal", path_name(blas), bh, i, j, row[j]);
                    sum += row[j];
                }
                REQUIRE(fabs(sum - 1) < 1e-6, "%s: row %d of att[%d] sums to %.9g",
                        path_name(blas), i, bh, sum);
            }
        snprintf(what, sizeof what, "att (%s)", path_name(blas));
        unit_require_near(att, want_att, na, 1e-6, 1.0, what);
        snprintf(what, sizeof what, "y (%s)", path_name(blas));
        unit_require_near(y, want_y, ny, 1e-6, 1.0, what);
        dt_attention_backward(qkv, att, dy, datt, dqkv, B, T, H, d);
        snprintf(what, sizeof what, "dqkv (%s)", path_name(blas));
        unit_require_near(dqkv, gq, nq, 2e-6, 1.0, what);
        free(att); free(y); free(datt); free(dqkv);
    }
    dt_set_blas(1);
    free(qkv); free(dy); free(qd); free(dyd); free(want_att); free(want_y); free(gq);
}
END_TEST

/* ==== a block ==== */

/* A block's activations and backward's scratch (a->blk[0], a->s), as the library lays
 * them out for a model of one layer c, cut or whole, filled with NaN. */
static void block_acts(const dt_gpt_config *c, const dt_gpt_cut *cut, int B, int T,
                       dt_gpt_acts *a)
{
    ck_assert_int_eq(c->layers, 1);
    dt_gpt_acts_alloc(c, cut, B, T, a);
    for (size_t i = 0; i < a->floats; i++)
        a->mem[i] = NAN;
}

/* Random block parameters: every tensor matters (LayerNorm weights around 1, biases
 * not 0) and attention is far from uniform. */
static void ln_weights(float *w, int C)
{
    for (int i = 0; i < C; i++)
        w[i] = (float)unit_uniform(0.5, 1.5);
}

static float *random_block(const dt_gpt_config *c, dt_gpt_block *p)
{
    int C = c->embed;
    float *w = unit_random_floats(dt_gpt_block_size(c, c->heads, 4 * C), -0.4, 0.4);
    dt_gpt_block_at(c, c->heads, 4 * C, w, p);
    ln_weights(p->ln1_w, C);
    ln_weights(p->ln2_w, C);
    return w;
}

typedef struct {
    const dt_gpt_config *c;
    const double *p, *x, *dy;
    int B, T;
} block_ctx;

static double block_f(const void *ctx)
{
    const block_ctx *k = ctx;
    int C = k->c->embed;
    size_t n = (size_t)k->B * k->T * C;
    double *out = malloc(n * sizeof *out);
    ref_block rb;
    ref_block_at(C, C, 4 * C, k->p, &rb);
    ref_block_forward(C, k->c->heads, &rb, k->x, out, k->B, k->T);
    double s = dot_d(out, k->dy, n);
    free(out);
    return s;
}

/* The whole block's output, its input's gradient and every parameter's, with sgemm and
 * the loops: C = 12, 3 heads of 4, 48 MLP columns, 2 sequences of 5. */
START_TEST(test_block)
{
    dt_gpt_config c = { .vocab = 11, .seq = 7, .embed = 12, .heads = 3, .layers = 1 };
    enum { B = 2, T = 5, C = 12 };
    size_t N = B * T, np = dt_gpt_block_size(&c, c.heads, 4 * C);
    dt_gpt_block p, g;
    float *w = random_block(&c, &p), *x = unit_random_floats(N * C, -2, 2);
    float *dy = unit_random_floats(N * C, -1, 1);
    double *pd = unit_to_double(w, np), *xd = unit_to_double(x, N * C);
    double *dyd = unit_to_double(dy, N * C);
    double *want = malloc(N * C * sizeof *want), *gp = malloc(np * sizeof *gp);
    double *gx = malloc(N * C * sizeof *gx);
    ref_block rb;
    ref_block_at(C, C, 4 * C, pd, &rb);
    ref_block_forward(C, c.heads, &rb, xd, want, B, T);
    block_ctx k = { &c, pd, xd, dyd, B, T };
    unit_numeric_grad(block_f, &k, pd, np, gp);
    unit_numeric_grad(block_f, &k, xd, N * C, gx);

    dt_gpt_cut whole = { .heads = c.heads, .ffn = 4 * C, .bias = 1 };
    char what[64];
    for (int blas = 1; blas >= 0; blas--) {
        dt_set_blas(blas);
        dt_gpt_acts a;
        block_acts(&c, &whole, B, T, &a);
        float *out = unit_nan_floats(N * C), *grads = calloc(np, sizeof *grads);
        dt_gpt_block_at(&c, c.heads, 4 * C, grads, &g);
        memcpy(a.blk[0].x, x, N * C * sizeof *x);
        dt_gpt_block_forward(&c, &whole, &p, &a.blk[0], out, B, T);
        snprintf(what, sizeof what, "block output (%s)", path_name(blas));
        unit_require_near(out, want, N * C, 2e-6, 1.0, what);
        memcpy(out, dy, N * C * sizeof *dy);                /* dx in place */
        dt_gpt_block_backward(&c, &whole, &p, &a.blk[0], &a.s, out, &g, B, T);
        snprintf(what, sizeof what, "block dx (%s)", path_name(blas));
        unit_require_near(out, gx, N * C, 4e-6, 0.0, what);
        snprintf(what, sizeof what, "block parameter gradient (%s)", path_name(blas));
        unit_require_near(grads, gp, np, 4e-6, 0.0, what);
        dt_gpt_acts_free(&a);
        free(out); free(grads);
    }
    dt_set_blas(1);
    free(w); free(x); free(dy); free(pd); free(xd); free(dyd); free(want); free(gp);
    free(gx);
}
END_TEST

/* ==== a block cut for tensor parallelism ==== */

/* Two threads stand for two ranks that share a block. dt_gpt_cut's sum: each publishes
 * its partial; rank 0 adds rank 1's to its own; rank 1 copies the total (the same bits
 * on both, as an allreduce gives). Barriers between, so no one reads a half-made sum. */
typedef struct {
    pthread_barrier_t bar;
    float *part[2];
} pair;

typedef struct {
    pair *pr;
    int rank;
    const dt_gpt_config *c;
    dt_gpt_cut cut;
    dt_gpt_acts a;
    /* a block (test_cut) */
    dt_gpt_block p, g;
    float *out, *dx;
    int B, T;
    /* a whole model cut so (test_cut_model) */
    const float *params;
    float *grads, *dl;
    const int *tok, *tgt;
    const float *logits;
    int done[16], ndone;
    float *wgrads;                  /* test_split: the split backward's gradients */
} rank_part;

static void pair_sum(float *x, size_t n, void *ctx)
{
    rank_part *r = ctx;
    pair *pr = r->pr;
    pr->part[r->rank] = x;
    pthread_barrier_wait(&pr->bar);
    if (r->rank == 0)
        for (size_t i = 0; i < n; i++)
            x[i] += pr->part[1][i];
    pthread_barrier_wait(&pr->bar);
    if (r->rank == 1)
        memcpy(x, pr->part[0], n * sizeof *x);
    pthread_barrier_wait(&pr->bar);
}

static void *rank_run(void *arg)
{
    rank_part *r = arg;
    dt_gpt_block_forward(r->c, &r->cut, &r->p, &r->a.blk[0], r->out, r->B, r->T);
    dt_gpt_block_backward(r->c, &r->cut, &r->p, &r->a.blk[0], &r->a.s, r->dx, &r->g, r->B,
                          r->T);
    return NULL;
}

static void rank_done(int u, int part, void *ctx)   /* units done, in order */
{
    rank_part *r = ctx;
    if (!dt_gpt_part_last(part, 0))
        return;
    if (r->ndone < 16)
        r->done[r->ndone] = u;
    r->ndone++;
}

static void *rank_run_model(void *arg)       /* forward, the loss, backward */
{
    rank_part *r = arg;
    int N = r->B * r->T, V = r->c->vocab;
    r->logits = dt_gpt_forward_cut(r->c, &r->cut, r->params, r->tok, r->B, r->T, &r->a,
                                   rank_done, r);
    dt_xent(r->logits, r->tgt, N, V, 1.0f / N, r->dl);
    dt_gpt_backward_cut(r->c, &r->cut, r->params, &r->a, r->dl, r->tok, r->B, r->T,
                        r->grads, NULL, NULL);
    return NULL;
}

/* Sequence parallelism's two operators for the pair (dt_gpt_cut's gather and
 * scatter): rank k holds positions [p0, p1) of every sequence, dt_gpt_sp_positions's.
 * gather: each rank copies both ranks' rows into its all; scatter: each rank's rows of
 * the sum all_0 + all_1 (the same order on both, as pair_sum's). */
static void pair_rows(const float *src, float *dst, int B, int T, int C, int k)
{
    int p0, p1;
    dt_gpt_sp_positions(T, 2, k, &p0, &p1);
    size_t w = (size_t)(p1 - p0) * C;
    for (int b = 0; b < B; b++)
        memcpy(dst + ((size_t)b * T + p0) * C, src + b * w, w * sizeof(float));
}

static void pair_gather(const float *mine, float *all, int B, int T, int C, void *ctx)
{
    rank_part *r = ctx;
    pair *pr = r->pr;
    pr->part[r->rank] = (float *)mine;
    pthread_barrier_wait(&pr->bar);
    for (int k = 0; k < 2; k++)
        pair_rows(pr->part[k], all, B, T, C, k);
    pthread_barrier_wait(&pr->bar);
}

static void pair_scatter(const float *all, float *mine, int B, int T, int C, void *ctx)
{
    rank_part *r = ctx;
    pair *pr = r->pr;
    pr->part[r->rank] = (float *)all;
    pthread_barrier_wait(&pr->bar);
    int p0, p1;
    dt_gpt_sp_positions(T, 2, r->rank, &p0, &p1);
    size_t w = (size_t)(p1 - p0) * C;
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < w; i++) {
            size_t at = ((size_t)b * T + p0) * C + i;
            mine[b * w + i] = pr->part[0][at] + pr->part[1][at];
        }
    pthread_barrier_wait(&pr->bar);
}

/* Runs fn on two threads, ranks 0 and 1 */
static void run_pair(rank_part r[2], void *(*fn)(void *))
{
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&th[k], NULL, fn, &r[k]), 0);
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_join(th[k], NULL), 0);
}

/* Copies between a whole block w and one rank's cut p of heads [h0, h0 + nh) and MLP
 * columns [f0, f0 + nf), to the cut (to_cut 1) or back: that rank's rows of each third
 * of wqkv and of bqkv, its columns of wo and w2, its rows of w1 and b1; and with shared
 * 1 the tensors every rank holds whole (LayerNorms, bo, b2). */
static void mv(float *whole, float *cut, size_t n, int to_cut)
{
    if (to_cut)
        memcpy(cut, whole, n * sizeof *cut);
    else
        memcpy(whole, cut, n * sizeof *cut);
}

static void cut_map(const dt_gpt_config *c, const dt_gpt_block *w, const dt_gpt_block *p,
                    int h0, int nh, int f0, int nf, int to_cut, int shared)
{
    size_t C = c->embed, d = C / c->heads, hd = nh * d, F = 4 * C;
    if (shared) {
        mv(w->ln1_w, p->ln1_w, C, to_cut);
        mv(w->ln1_b, p->ln1_b, C, to_cut);
        mv(w->bo, p->bo, C, to_cut);
        mv(w->ln2_w, p->ln2_w, C, to_cut);
        mv(w->ln2_b, p->ln2_b, C, to_cut);
        mv(w->b2, p->b2, C, to_cut);
    }
    for (size_t k = 0; k < 3; k++)              /* q, k, v */
        for (size_t i = 0; i < hd; i++) {
            mv(w->wqkv + (k * C + h0 * d + i) * C, p->wqkv + (k * hd + i) * C, C, to_cut);
            mv(w->bqkv + k * C + h0 * d + i, p->bqkv + k * hd + i, 1, to_cut);
        }
    for (size_t o = 0; o < C; o++) {
        mv(w->wo + o * C + h0 * d, p->wo + o * hd, hd, to_cut);
        mv(w->w2 + o * F + f0, p->w2 + o * nf, nf, to_cut);
    }
    mv(w->w1 + (size_t)f0 * C, p->w1, nf * C, to_cut);
    mv(w->b1 + f0, p->b1, nf, to_cut);
}

/* The whole block, then rank 0 with head 0 and MLP columns 0..16 and rank 1 with heads
 * 1, 2 and columns 17..47 (which adds the biases bo and b2: _i 0 rank 0, _i 1 rank 1);
 * both ranks' outputs and input gradients equal the whole block's, to rounding, and
 * each other's bit for bit; their gradients put together are the whole block's. Also
 * with the loops (_i 2, 3). */
START_TEST(test_cut)
{
    int blas = _i < 2, biased = _i % 2;
    dt_gpt_config c = { .vocab = 11, .seq = 7, .embed = 12, .heads = 3, .layers = 1 };
    enum { B = 2, T = 5, C = 12, F = 48 };
    const int h0[2] = { 0, 1 }, nh[2] = { 1, 2 }, f0[2] = { 0, 17 }, nf[2] = { 17, 31 };
    size_t N = B * T, np = dt_gpt_block_size(&c, c.heads, F);
    dt_set_blas(blas);
    dt_gpt_block p, g;
    float *w = random_block(&c, &p), *x = unit_random_floats(N * C, -2, 2);
    float *dy = unit_random_floats(N * C, -1, 1);

    /* the whole block */
    dt_gpt_cut whole = { .heads = c.heads, .ffn = F, .bias = 1 };
    dt_gpt_acts a;
    block_acts(&c, &whole, B, T, &a);
    float *out = unit_nan_floats(N * C), *dx = malloc(N * C * sizeof *dx);
    float *grads = calloc(np, sizeof *grads);
    dt_gpt_block_at(&c, c.heads, F, grads, &g);
    memcpy(a.blk[0].x, x, N * C * sizeof *x);
    dt_gpt_block_forward(&c, &whole, &p, &a.blk[0], out, B, T);
    memcpy(dx, dy, N * C * sizeof *dx);
    dt_gpt_block_backward(&c, &whole, &p, &a.blk[0], &a.s, dx, &g, B, T);

    /* the two ranks */
    pair pr;
    ck_assert_int_eq(pthread_barrier_init(&pr.bar, NULL, 2), 0);
    rank_part r[2];
    float *rw[2], *rg[2];
    for (int k = 0; k < 2; k++) {
        size_t n = dt_gpt_block_size(&c, nh[k], nf[k]);
        r[k] = (rank_part){ .pr = &pr, .rank = k, .c = &c, .B = B, .T = T,
                            .cut = { nh[k], nf[k], k == biased, pair_sum, &r[k] } };
        rw[k] = unit_nan_floats(n);
        rg[k] = calloc(n, sizeof(float));
        dt_gpt_block_at(&c, nh[k], nf[k], rw[k], &r[k].p);
        dt_gpt_block_at(&c, nh[k], nf[k], rg[k], &r[k].g);
        cut_map(&c, &p, &r[k].p, h0[k], nh[k], f0[k], nf[k], 1, 1);
        for (size_t i = 0; i < n; i++)
            REQUIRE(!isnan(rw[k][i]), "rank %d: float %zu of its cut is not set", k, i);
        block_acts(&c, &r[k].cut, B, T, &r[k].a);
        memcpy(r[k].a.blk[0].x, x, N * C * sizeof *x);
        r[k].out = unit_nan_floats(N * C);
        r[k].dx = malloc(N * C * sizeof(float));       /* dout, then the input's gradient */
        memcpy(r[k].dx, dy, N * C * sizeof *dy);
    }
    run_pair(r, rank_run);
    pthread_barrier_destroy(&pr.bar);

    double *want = unit_to_double(out, N * C), *want_dx = unit_to_double(dx, N * C);
    double *want_g = unit_to_double(grads, np);
    float *got_g = unit_nan_floats(np);
    dt_gpt_block got;
    dt_gpt_block_at(&c, c.heads, F, got_g, &got);
    char what[80];
    for (int k = 0; k < 2; k++) {
        snprintf(what, sizeof what, "rank %d's output (%s)", k, path_name(blas));
        unit_require_near(r[k].out, want, N * C, 2e-6, 1.0, what);
        snprintf(what, sizeof what, "rank %d's dx (%s)", k, path_name(blas));
        unit_require_near(r[k].dx, want_dx, N * C, 2e-6, 0.0, what);
        cut_map(&c, &got, &r[k].g, h0[k], nh[k], f0[k], nf[k], 0, k == 0);
    }
    REQUIRE(memcmp(r[0].out, r[1].out, N * C * sizeof(float)) == 0 &&
            memcmp(r[0].dx, r[1].dx, N * C * sizeof(float)) == 0,
            "the two ranks' outputs or input gradients differ");
    size_t shared[6][2] = {     /* offsets of the tensors both hold whole, and sizes */
        { r[0].g.ln1_w - rg[0], 2 * C }, { r[0].g.bo - rg[0], 3 * C }, { r[0].g.b2 - rg[0], C },
        { r[1].g.ln1_w - rg[1], 2 * C }, { r[1].g.bo - rg[1], 3 * C }, { r[1].g.b2 - rg[1], C } };
    for (int t = 0; t < 3; t++)
        REQUIRE(memcmp(rg[0] + shared[t][0], rg[1] + shared[t + 3][0],
                       shared[t][1] * sizeof(float)) == 0,
                "the two ranks' gradients of a tensor both hold whole differ (%d)", t);
    snprintf(what, sizeof what, "the ranks' gradients put together (%s)", path_name(blas));
    unit_require_near(got_g, want_g, np, 2e-6, 0.0, what);

    dt_set_blas(1);
    for (int k = 0; k < 2; k++) {
        dt_gpt_acts_free(&r[k].a);
        free(rw[k]); free(rg[k]); free(r[k].out); free(r[k].dx);
    }
    dt_gpt_acts_free(&a);
    free(w); free(x); free(dy); free(out); free(dx); free(grads); free(want);
    free(want_dx); free(want_g); free(got_g);
}
END_TEST

/* ==== the whole model ==== */

/* Random parameters for the model c, as random_block's */
static float *random_model(const dt_gpt_config *c)
{
    int C = c->embed;
    float *p = unit_random_floats(dt_gpt_nparams(c), -0.5, 0.5);
    for (int l = 0; l < c->layers; l++) {
        dt_gpt_block b;
        dt_gpt_block_at(c, c->heads, 4 * C, p + dt_gpt_unit_offset(c, 1 + l), &b);
        ln_weights(b.ln1_w, C);
        ln_weights(b.ln2_w, C);
    }
    ln_weights(p + dt_gpt_unit_offset(c, c->layers + 1), C);
    return p;
}

typedef struct {
    const dt_gpt_config *c;
    const double *p;
    const int *tok, *tgt;
    int B, T;
} model_ctx;

static double model_f(const void *ctx)
{
    const model_ctx *m = ctx;
    return ref_model_loss(m->c, m->p, m->tok, m->tgt, m->B, m->T);
}

/* record_done, a dt_gpt_part_fn: done_order the units in the order they completed
 * (their last part, forward or backward as done_backward says), done_parts every call
 * as (unit, part) */
static int done_order[16], ndone, done_parts[64][2], nparts, done_backward;
static void record_done(int u, int part, void *ctx)
{
    (void)ctx;
    if (nparts < 64)
        done_parts[nparts][0] = u, done_parts[nparts][1] = part;
    nparts++;
    if (!dt_gpt_part_last(part, done_backward))
        return;
    if (ndone < 16)
        done_order[ndone] = u;
    ndone++;
}

static void record_reset(int backward)
{
    ndone = nparts = 0;
    done_backward = backward;
}

/* Checks grads (params' layout) against want tensor by tensor, each relative to its own
 * largest element but at least 1% of the largest of all (a tensor whose gradient is 0,
 * as the keys' bias, carries the rounding of the others). */
static void require_model_grads(const dt_gpt_config *c, const float *grads,
                                const double *want, double tol, const char *path)
{
    static const char *const names[12] = { "ln1_w", "ln1_b", "wqkv", "bqkv", "wo", "bo",
                                           "ln2_w", "ln2_b", "w1", "b1", "w2", "b2" };
    size_t np = dt_gpt_nparams(c), C = c->embed, at[64];
    const char *name[64];
    int nt = 0, L = c->layers;
    double big = 0;
    ck_assert_int_le(L, 5);
    for (size_t j = 0; j < np; j++)
        big = fmax(big, fabs(want[j]));
    at[nt] = 0, name[nt++] = "wte";
    at[nt] = (size_t)c->vocab * C, name[nt++] = "wpe";
    for (int l = 0; l < L; l++) {
        ref_block rb;
        const double *base = want + dt_gpt_unit_offset(c, 1 + l);
        ref_block_at(C, C, 4 * C, base, &rb);
        const double *t[12] = { rb.ln1_w, rb.ln1_b, rb.wqkv, rb.bqkv, rb.wo, rb.bo,
                                rb.ln2_w, rb.ln2_b, rb.w1, rb.b1, rb.w2, rb.b2 };
        for (int k = 0; k < 12; k++)
            at[nt] = (size_t)(t[k] - want), name[nt++] = names[k];
    }
    at[nt] = dt_gpt_unit_offset(c, L + 1), name[nt++] = "lnf_w";
    at[nt] = at[nt - 1] + C, name[nt++] = "lnf_b";
    at[nt] = np;
    for (int k = 0; k < nt; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s (unit %d) gradient (%s), from its start", name[k],
                 k < 2 ? 0 : k < 2 + 12 * L ? 1 + (k - 2) / 12 : L + 1, path);
        unit_require_near(grads + at[k], want + at[k], at[k + 1] - at[k], tol, 0.01 * big, what);
    }
    double num = 0, den = 0;                    /* and as one relative error */
    for (size_t j = 0; j < np; j++) {
        num += (grads[j] - want[j]) * (grads[j] - want[j]);
        den += want[j] * want[j];
    }
    REQUIRE(den > 0 && sqrt(num / den) < tol, "%s: the gradient's relative error is %g",
            path, sqrt(num / den));
}

static const dt_gpt_config fd_models[] = {
    { .vocab = 11, .seq = 7, .embed = 12, .heads = 3, .layers = 2 },
    { .vocab = 5, .seq = 4, .embed = 6, .heads = 2, .layers = 1 },
};
static const int fd_batch[][2] = { { 2, 5 }, { 3, 4 } };     /* B, T */
#define NFD (int)(sizeof fd_models / sizeof fd_models[0])

/* forward + dt_xent (scale 1/(B T)) + backward against the differences of the double
 * forward's mean loss, for every parameter; with sgemm and with the loops; into
 * activations for more sequences and positions than used. */
START_TEST(test_model_fd)
{
    const dt_gpt_config *c = &fd_models[_i];
    int B = fd_batch[_i][0], T = fd_batch[_i][1], V = c->vocab, N = B * T, L = c->layers;
    size_t np = dt_gpt_nparams(c);
    float *params = random_model(c);
    int *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    random_tokens(tok, N, V);
    random_tokens(tgt, N, V);
    double *pd = unit_to_double(params, np), *want = malloc(np * sizeof *want);
    double ref = ref_model_loss(c, pd, tok, tgt, B, T);
    model_ctx m = { c, pd, tok, tgt, B, T };
    unit_numeric_grad(model_f, &m, pd, np, want);

    for (int blas = 1; blas >= 0; blas--) {
        dt_set_blas(blas);
        dt_gpt_acts a;
        dt_gpt_acts_alloc(c, NULL, B + 1, c->seq, &a);
        const float *logits = dt_gpt_forward(c, params, tok, B, T, &a);
        float *dl = malloc((size_t)N * V * sizeof *dl), *grads = calloc(np, sizeof *grads);
        float loss = dt_xent(logits, tgt, N, V, 1.0f / N, dl) / N;
        REQUIRE(fabs(loss - ref) < 1e-5 * ref, "%s: mean loss %.9g, the double forward "
                "gives %.9g", path_name(blas), loss, ref);
        record_reset(1);
        dt_gpt_backward(c, params, &a, dl, tok, B, T, grads, record_done, NULL);
        REQUIRE(ndone == L + 2, "units done %d times for %d units", ndone, L + 2);
        for (int k = 0; k < L + 2; k++)
            REQUIRE(done_order[k] == L + 1 - k, "unit done %d was unit %d, want %d (last "
                    "to first)", k, done_order[k], L + 1 - k);
        /* the parts: the head whole, each block's MLP then its attention, the embeddings */
        REQUIRE(nparts == 2 * L + 2, "%d parts done for %d blocks", nparts, L);
        for (int k = 0; k < nparts; k++) {
            int u = k == 0 ? L + 1 : k == nparts - 1 ? 0 : L - (k - 1) / 2;
            int part = k == 0 || k == nparts - 1 ? DT_GPT_UNIT
                     : (k - 1) % 2 == 0 ? DT_GPT_MLP : DT_GPT_ATTN;
            REQUIRE(done_parts[k][0] == u && done_parts[k][1] == part, "backward's part %d: "
                    "unit %d part %d, want unit %d part %d", k, done_parts[k][0],
                    done_parts[k][1], u, part);
        }
        require_model_grads(c, grads, want, 1e-5, path_name(blas));
        /* wpe's rows from T on: no gradient at all */
        for (size_t j = (size_t)V * c->embed + (size_t)T * c->embed;
             j < ((size_t)V + c->seq) * c->embed; j++)
            REQUIRE(grads[j] == 0.0f, "%s: wpe's gradient beyond T = %d is %g at %zu",
                    path_name(blas), T, grads[j], j);
        /* a second backward accumulates: twice the gradient */
        dt_gpt_backward(c, params, &a, dl, tok, B, T, grads, NULL, NULL);
        for (size_t j = 0; j < np; j++)
            want[j] *= 2;
        require_model_grads(c, grads, want, 1e-5, path_name(blas));
        for (size_t j = 0; j < np; j++)
            want[j] /= 2;
        dt_gpt_acts_free(&a);
        free(dl); free(grads);
    }
    dt_set_blas(1);
    free(params); free(tok); free(tgt); free(pd); free(want);
}
END_TEST

/* Position t's logits depend on tokens 0..t of its own sequence only: changing token t0
 * of sequence 0 leaves its positions before t0 and all of sequence 1 the same bits, and
 * changes position t0; the logits of a batch of one, or of the first 3 positions, are
 * those of the whole batch's rows (to rounding: sgemm may block a smaller product
 * otherwise). With sgemm and with the loops. */
START_TEST(test_model_independence)
{
    const dt_gpt_config *c = &fd_models[0];
    enum { B = 2, T = 5, T0 = 2, TS = 3 };
    int V = c->vocab, C = c->embed;
    float *params = random_model(c);
    int tok[B * T], tok2[B * T], one[T], pre[B * TS];
    random_tokens(tok, B * T, V);
    memcpy(tok2, tok, sizeof tok);
    tok2[T0] = (tok[T0] + 1) % V;
    memcpy(one, tok + T, sizeof one);
    for (int b = 0; b < B; b++)
        memcpy(pre + b * TS, tok + b * T, TS * sizeof *pre);
    (void)C;
    for (int blas = 1; blas >= 0; blas--) {
        dt_set_blas(blas);
        dt_gpt_acts a;
        dt_gpt_acts_alloc(c, NULL, B, T, &a);
        size_t n = (size_t)B * T * V, row = (size_t)T * V;
        float *base = malloc(n * sizeof *base), *l = malloc(n * sizeof *l);
        memcpy(base, dt_gpt_forward(c, params, tok, B, T, &a), n * sizeof *base);
        memcpy(l, dt_gpt_forward(c, params, tok2, B, T, &a), n * sizeof *l);
        REQUIRE(memcmp(base, l, (size_t)T0 * V * sizeof *l) == 0, "%s: changing token %d "
                "changed the logits before it", path_name(blas), T0);
        REQUIRE(memcmp(base + row, l + row, row * sizeof *l) == 0, "%s: changing a token "
                "of sequence 0 changed sequence 1's logits", path_name(blas));
        REQUIRE(memcmp(base + T0 * V, l + T0 * V, (size_t)V * sizeof *l) != 0, "%s: changing "
                "token %d left its own logits as they were", path_name(blas), T0);
        double *want = unit_to_double(base + row, row);
        char what[64];
        snprintf(what, sizeof what, "sequence 1 alone (%s)", path_name(blas));
        unit_require_near(dt_gpt_forward(c, params, one, 1, T, &a), want, row, 1e-6, 1.0, what);
        free(want);
        const float *lp = dt_gpt_forward(c, params, pre, B, TS, &a);
        for (int b = 0; b < B; b++) {
            want = unit_to_double(base + b * row, (size_t)TS * V);
            snprintf(what, sizeof what, "sequence %d's first %d (%s)", b, TS,
                     path_name(blas));
            unit_require_near(lp + (size_t)b * TS * V, want, (size_t)TS * V, 1e-6, 1.0, what);
            free(want);
        }
        dt_gpt_acts_free(&a);
        free(base); free(l);
    }
    dt_set_blas(1);
    free(params);
}
END_TEST

/* sgemm and the loops on a larger model (C = 64, 4 heads of 16, T = 32 of 40): each the
 * same bits on a second call, within rounding of each other, and not the same bits
 * (so dt_set_blas really chose). */
START_TEST(test_model_blas_vs_loops)
{
    dt_gpt_config c = { .vocab = 67, .seq = 40, .embed = 64, .heads = 4, .layers = 2 };
    enum { B = 2, T = 32, N = B * T };
    size_t np = dt_gpt_nparams(&c), nl = (size_t)N * c.vocab;
    float *params = malloc(np * sizeof *params), *dl = malloc(nl * sizeof *dl);
    int tok[N], tgt[N];
    dt_gpt_init(&c, 11, params);
    random_tokens(tok, N, c.vocab);
    random_tokens(tgt, N, c.vocab);
    float *logits[4], *grads[4];
    dt_gpt_acts a;
    dt_gpt_acts_alloc(&c, NULL, B, T, &a);
    for (int k = 0; k < 4; k++) {               /* sgemm, sgemm, loops, loops */
        dt_set_blas(k < 2);
        logits[k] = malloc(nl * sizeof(float));
        grads[k] = calloc(np, sizeof(float));
        memcpy(logits[k], dt_gpt_forward(&c, params, tok, B, T, &a), nl * sizeof(float));
        dt_xent(logits[k], tgt, N, c.vocab, 1.0f / N, dl);
        dt_gpt_backward(&c, params, &a, dl, tok, B, T, grads[k], NULL, NULL);
    }
    dt_set_blas(1);
    for (int k = 0; k < 4; k += 2)
        REQUIRE(memcmp(logits[k], logits[k + 1], nl * sizeof(float)) == 0 &&
                memcmp(grads[k], grads[k + 1], np * sizeof(float)) == 0,
                "%s: different bits on a second call", path_name(k == 0));
    REQUIRE(memcmp(grads[0], grads[2], np * sizeof(float)) != 0, "sgemm and the loops agree "
            "bit for bit: did dt_set_blas(0) choose the loops?");
    double *want = unit_to_double(logits[2], nl);
    unit_require_near(logits[0], want, nl, 1e-5, 0.0, "sgemm's logits against the loops'");
    free(want);
    want = unit_to_double(grads[2], np);
    require_model_grads(&c, grads[0], want, 2e-5, "sgemm against the loops");
    free(want);
    dt_gpt_acts_free(&a);
    for (int k = 0; k < 4; k++)
        free(logits[k]), free(grads[k]);
    free(params); free(dl);
}
END_TEST

/* The threads of lib/nn's own loops (LayerNorm, attention's heads, GELU, the adds, the
 * cross-entropy, the biases' sums, the embeddings, Adam; nn_internal.h) at 1, 2 and 3
 * (dt_set_blas_threads): the same bits. A shape whose every such loop is large enough
 * to be shared out (DTI_NN_PAR_MIN) and shares unevenly: 185 rows (5 sequences of 37),
 * 20 (sequence, head) pairs, 112 columns (7 blocks of 16), 4 heads of 28. _i 0 with
 * sgemm, its products held to one thread of OpenBLAS: OpenBLAS's sgemm is not always
 * the same bits on 1 and 2 threads (0.3.21: dx = dy W of wqkv here, 185 x 112 x 336,
 * differs in a last bit), and this test is of dtlab's loops; _i 1 with the loops. */
START_TEST(test_threads)
{
    dt_gpt_config c = { .vocab = 67, .seq = 40, .embed = 112, .heads = 4, .layers = 2 };
    dt_optim_config o = { .kind = DT_ADAM, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.999f,
                          .eps = 1e-8f };
    enum { B = 5, T = 37, N = B * T, K = 3 };
    int keep = dt_blas_threads();
    size_t np = dt_gpt_nparams(&c), nl = (size_t)N * c.vocab;
    float *params = random_model(&c), *dl = malloc(nl * sizeof *dl);
    float *logits[K], *grads[K], *stepped[K], loss[K];
    int tok[N], tgt[N];
    random_tokens(tok, N, c.vocab);
    random_tokens(tgt, N, c.vocab);
    dt_set_blas(_i == 0);
    dt_gpt_acts a;
    dt_gpt_acts_alloc(&c, NULL, B, T, &a);
    for (int k = 0; k < K; k++) {
        dt_set_blas_threads(k + 1);
        openblas_set_num_threads(1);           /* sgemm alike (above); dtlab's loops not */
        logits[k] = malloc(nl * sizeof(float));
        grads[k] = calloc(np, sizeof(float));
        stepped[k] = unit_copy_floats(params, np);
        float *state = calloc(2 * np, sizeof(float));
        memcpy(logits[k], dt_gpt_forward(&c, params, tok, B, T, &a), nl * sizeof(float));
        loss[k] = dt_xent(logits[k], tgt, N, c.vocab, 1.0f / N, dl);
        dt_gpt_backward(&c, params, &a, dl, tok, B, T, grads[k], NULL, NULL);
        dt_optim_step(&o, 1, stepped[k], grads[k], state, np);
        free(state);
    }
    dt_set_blas_threads(keep);
    dt_set_blas(1);
    for (int k = 1; k < K; k++) {
        REQUIRE(memcmp(&loss[k], &loss[0], sizeof loss[0]) == 0, "%s: the loss on %d "
                "threads %.9g, on 1 %.9g", path_name(_i == 0), k + 1, (double)loss[k],
                (double)loss[0]);
        REQUIRE(memcmp(logits[k], logits[0], nl * sizeof(float)) == 0, "%s: the logits "
                "on %d threads are not those on 1, bit for bit", path_name(_i == 0), k + 1);
        for (size_t i = 0; i < np; i++)
            REQUIRE(memcmp(&grads[k][i], &grads[0][i], sizeof(float)) == 0 &&
                    memcmp(&stepped[k][i], &stepped[0][i], sizeof(float)) == 0,
                    "%s: parameter %zu's gradient (%.9g) or Adam's step (%.9g) on %d "
                    "threads, on 1 %.9g, %.9g", path_name(_i == 0), i,
                    (double)grads[k][i], (double)stepped[k][i], k + 1,
                    (double)grads[0][i], (double)stepped[0][i]);
    }
    dt_gpt_acts_free(&a);
    for (int k = 0; k < K; k++)
        free(logits[k]), free(grads[k]), free(stepped[k]);
    free(params); free(dl);
}
END_TEST

/* The whole model cut in two as test_cut's block, every block alike
 * (dt_gpt_forward_cut, dt_gpt_backward_cut; the embeddings and lnf whole on both
 * ranks): both ranks' logits are the whole model's to rounding and each other's bit for
 * bit, forward's unit_done goes 0, 1, ..., L+1, and the ranks' gradients put together
 * are the whole model's (those of the tensors both hold whole, the same bits on both).
 * _i 0 with sgemm, 1 with the loops; _i 2, 3 the same with sequence parallelism
 * (positions 0..2 on rank 0, 3..4 on rank 1): the LayerNorms' gradients are each
 * rank's rows' part, and their sum the whole model's; the stream's region takes the
 * rows of a rank only. */
/* The pair's cuts of the model c: rank k holds heads h0[k] .. of nh[k] and MLP columns
 * f0[k] .. of nf[k] (with sp, sequence parallelism's rows too; with split, activations
 * that keep what W reads), its parameters params's, its gradients zero, its
 * activations allocated, its floats rn[k]; the caller frees them */
static const int h0[2] = { 0, 1 }, nh[2] = { 1, 2 }, f0[2] = { 0, 17 }, nf[2] = { 17, 31 };
static void pair_model(const dt_gpt_config *c, const float *params, pair *pr,
                       rank_part r[2], const int *tok, const int *tgt, int B, int T, int sp,
                       int split, size_t rn[2])
{
    int V = c->vocab, C = c->embed, L = c->layers, N = B * T;
    size_t np = dt_gpt_nparams(c), emb = ((size_t)V + c->seq) * C;
    for (int k = 0; k < 2; k++) {
        r[k] = (rank_part){ .pr = pr, .rank = k, .c = c, .B = B, .T = T, .tok = tok,
                            .tgt = tgt, .cut = { nh[k], nf[k], k == 0, pair_sum, &r[k] } };
        if (sp) {
            r[k].cut.sp = 2;
            r[k].cut.sp_rank = k;
            r[k].cut.gather = pair_gather;
            r[k].cut.scatter = pair_scatter;
        }
        r[k].cut.split = split;
        rn[k] = dt_gpt_cut_nparams(c, &r[k].cut);
        size_t bs = dt_gpt_block_size(c, nh[k], nf[k]);
        ck_assert_uint_eq(rn[k], emb + L * bs + 2 * C);
        float *rp = unit_nan_floats(rn[k]);
        memcpy(rp, params, emb * sizeof *rp);
        memcpy(rp + rn[k] - 2 * C, params + np - 2 * C, 2 * C * sizeof *rp);
        for (int l = 0; l < L; l++) {
            dt_gpt_block w, p;
            dt_gpt_block_at(c, c->heads, 4 * C, (float *)params + dt_gpt_unit_offset(c, 1 + l),
                            &w);
            dt_gpt_block_at(c, nh[k], nf[k], rp + emb + l * bs, &p);
            cut_map(c, &w, &p, h0[k], nh[k], f0[k], nf[k], 1, 1);
        }
        for (size_t i = 0; i < rn[k]; i++)
            REQUIRE(!isnan(rp[i]), "rank %d: parameter %zu of its cut is not set", k, i);
        r[k].params = rp;
        r[k].grads = calloc(rn[k], sizeof(float));
        r[k].dl = malloc((size_t)N * V * sizeof(float));
        dt_gpt_acts_alloc(c, &r[k].cut, B, T, &r[k].a);
    }
}

START_TEST(test_cut_model)
{
    const dt_gpt_config *c = &fd_models[0];
    enum { B = 2, T = 5, N = B * T };
    int blas = _i % 2 == 0, sp = _i >= 2, V = c->vocab, C = c->embed, L = c->layers;
    dt_set_blas(blas);
    size_t np = dt_gpt_nparams(c), emb = ((size_t)V + c->seq) * C;
    float *params = random_model(c), *grads = calloc(np, sizeof *grads);
    float *dl = malloc((size_t)N * V * sizeof *dl);
    int tok[N], tgt[N];
    random_tokens(tok, N, V);
    random_tokens(tgt, N, V);
    dt_gpt_acts a;
    dt_gpt_acts_alloc(c, NULL, B, T, &a);
    double *want = unit_to_double(dt_gpt_forward(c, params, tok, B, T, &a), (size_t)N * V);
    dt_xent(a.logits, tgt, N, V, 1.0f / N, dl);
    dt_gpt_backward(c, params, &a, dl, tok, B, T, grads, NULL, NULL);

    pair pr;
    ck_assert_int_eq(pthread_barrier_init(&pr.bar, NULL, 2), 0);
    rank_part r[2];
    size_t rn[2];
    pair_model(c, params, &pr, r, tok, tgt, B, T, sp, 0, rn);
    for (int k = 0; k < 2 && sp; k++) {
        /* the region's floats: per block x, ln1, x2, ln2 and 4 statistics a row, out,
         * dres, lnf's 2; n rows instead of N; the scratch's wide, mine, part */
        dt_gpt_cut tp = r[k].cut;
        tp.sp = 0;
        size_t n = k == 0 ? 3 * B : 2 * B, sc;
        size_t want = dt_gpt_acts_floats(c, &tp, B, T, NULL)
                      - ((size_t)L * (4 * C + 4) + 2 * C + 2) * (N - n)
                      + (size_t)(2 * N + n) * C;
        ck_assert_uint_eq(dt_gpt_acts_floats(c, &r[k].cut, B, T, &sc), want);
    }
    run_pair(r, rank_run_model);
    pthread_barrier_destroy(&pr.bar);

    char what[80];
    for (int k = 0; k < 2; k++) {
        snprintf(what, sizeof what, "rank %d's logits (%s)", k, path_name(blas));
        unit_require_near(r[k].logits, want, (size_t)N * V, 2e-6, 1.0, what);
        REQUIRE(r[k].ndone == L + 2, "rank %d: forward's units done %d times", k,
                r[k].ndone);
        for (int u = 0; u < L + 2; u++)
            REQUIRE(r[k].done[u] == u, "rank %d: forward's unit done %d was unit %d",
                    k, u, r[k].done[u]);
    }
    REQUIRE(memcmp(r[0].logits, r[1].logits, (size_t)N * V * sizeof(float)) == 0,
            "the two ranks' logits differ");
    REQUIRE(memcmp(r[0].grads, r[1].grads, emb * sizeof(float)) == 0 &&
            (sp || memcmp(r[0].grads + rn[0] - 2 * C, r[1].grads + rn[1] - 2 * C,
                          2 * C * sizeof(float)) == 0),
            "the two ranks' gradients of the embeddings or lnf differ");
    if (sp) {             /* the LayerNorms': rank 1's part added to rank 0's */
        for (int j = 0; j < 2 * C; j++)
            r[0].grads[rn[0] - 2 * C + j] += r[1].grads[rn[1] - 2 * C + j];
        for (int l = 0; l < L; l++) {
            dt_gpt_block g0, g1;
            dt_gpt_block_at(c, nh[0], nf[0], r[0].grads + emb +
                            l * dt_gpt_block_size(c, nh[0], nf[0]), &g0);
            dt_gpt_block_at(c, nh[1], nf[1], r[1].grads + emb +
                            l * dt_gpt_block_size(c, nh[1], nf[1]), &g1);
            for (int j = 0; j < C; j++) {
                g0.ln1_w[j] += g1.ln1_w[j];
                g0.ln1_b[j] += g1.ln1_b[j];
                g0.ln2_w[j] += g1.ln2_w[j];
                g0.ln2_b[j] += g1.ln2_b[j];
            }
        }
    }
    float *got = unit_nan_floats(np);
    memcpy(got, r[0].grads, emb * sizeof *got);
    memcpy(got + np - 2 * C, r[0].grads + rn[0] - 2 * C, 2 * C * sizeof *got);
    for (int k = 0; k < 2; k++)
        for (int l = 0; l < L; l++) {
            dt_gpt_block w, g;
            dt_gpt_block_at(c, c->heads, 4 * C, got + dt_gpt_unit_offset(c, 1 + l), &w);
            dt_gpt_block_at(c, nh[k], nf[k], r[k].grads + emb +
                            l * dt_gpt_block_size(c, nh[k], nf[k]), &g);
            cut_map(c, &w, &g, h0[k], nh[k], f0[k], nf[k], 0, k == 0);
        }
    double *want_g = unit_to_double(grads, np);
    require_model_grads(c, got, want_g, 1e-5, "the ranks' gradients put together");

    dt_set_blas(1);
    for (int k = 0; k < 2; k++) {
        dt_gpt_acts_free(&r[k].a);
        free((float *)r[k].params); free(r[k].grads); free(r[k].dl);
    }
    dt_gpt_acts_free(&a);
    free(params); free(grads); free(dl); free(want); free(got); free(want_g);
}
END_TEST

/* The model as a pipeline of two stages, units [0, s) and [s, L+2) for every s: the
 * first sends the residual stream, the last (with its copy of wte, for the head)
 * returns the logits, and backward passes the stream's gradient back. Every logit and
 * every gradient is the whole model's, bit for bit (the same sums in the same order),
 * but wte's, whose two copies' gradients add up to the whole's (to rounding: the head's
 * and the embeddings' parts are summed in another order). With sgemm and the loops. */
START_TEST(test_stages)
{
    const dt_gpt_config *c = &fd_models[0];
    enum { B = 2, T = 5, N = B * T };
    int V = c->vocab, C = c->embed, L = c->layers, U = L + 2;
    size_t np = dt_gpt_nparams(c), nte = (size_t)V * C;
    float *params = random_model(c), *dl = malloc((size_t)N * V * sizeof *dl);
    int tok[N], tgt[N];
    random_tokens(tok, N, V);
    random_tokens(tgt, N, V);
    for (int blas = 1; blas >= 0; blas--) {
        dt_set_blas(blas);
        dt_gpt_acts a;
        dt_gpt_acts_alloc(c, NULL, B, T, &a);
        float *grads = calloc(np, sizeof *grads), *logits = malloc((size_t)N * V * 4);
        memcpy(logits, dt_gpt_forward(c, params, tok, B, T, &a), (size_t)N * V * 4);
        dt_xent(logits, tgt, N, V, 1.0f / N, dl);
        dt_gpt_backward(c, params, &a, dl, tok, B, T, grads, NULL, NULL);
        dt_gpt_acts_free(&a);
        for (int s = 1; s < U; s++) {
            size_t off = dt_gpt_unit_offset(c, s), n0 = off, n1 = np - off + nte;
            ck_assert_uint_eq(dt_gpt_stage_size(c, NULL, 0, s), n0);
            ck_assert_uint_eq(dt_gpt_stage_size(c, NULL, s, U), n1);
            float *p1 = malloc(n1 * sizeof *p1), *g0 = calloc(n0, sizeof *g0);
            float *g1 = calloc(n1, sizeof *g1), *dx = unit_nan_floats((size_t)N * C);
            memcpy(p1, params + off, (np - off) * sizeof *p1);
            memcpy(p1 + np - off, params, nte * sizeof *p1);       /* wte's copy */
            dt_gpt_acts a0, a1;
            dt_gpt_stage_acts_alloc(c, NULL, 0, s, B, T, &a0);
            dt_gpt_stage_acts_alloc(c, NULL, s, U, B, T, &a1);
            const float *x = dt_gpt_forward_stage(c, NULL, 0, s, params, tok, NULL, B, T,
                                                  &a0, NULL, NULL);
            record_reset(0);
            const float *l = dt_gpt_forward_stage(c, NULL, s, U, p1, NULL, x, B, T, &a1,
                                                  record_done, NULL);
            REQUIRE(ndone == U - s && done_order[0] == s, "stage [%d, %d): forward's "
                    "units done %d times, first %d", s, U, ndone, done_order[0]);
            REQUIRE(done_parts[0][1] == (s <= L ? DT_GPT_ATTN : DT_GPT_UNIT), "stage [%d, "
                    "%d): forward's first part %d", s, U, done_parts[0][1]);
            REQUIRE(memcmp(l, logits, (size_t)N * V * sizeof *l) == 0, "%s, stages split "
                    "at unit %d: the logits differ from the whole model's",
                    path_name(blas), s);
            record_reset(1);
            dt_gpt_backward_stage(c, NULL, s, U, p1, &a1, dl, NULL, dx, B, T, g1,
                                  record_done, NULL);
            REQUIRE(ndone == U - s && done_order[0] == U - 1 && done_order[ndone - 1] == s,
                    "stage [%d, %d): backward's units done %d times, first %d", s, U,
                    ndone, done_order[0]);
            dt_gpt_backward_stage(c, NULL, 0, s, params, &a0, dx, tok, NULL, B, T, g0,
                                  NULL, NULL);
            REQUIRE(memcmp(g0 + nte, grads + nte, (n0 - nte) * sizeof *g0) == 0 &&
                    memcmp(g1, grads + off, (np - off) * sizeof *g1) == 0,
                    "%s, stages split at unit %d: gradients other than wte's differ from "
                    "the whole model's", path_name(blas), s);
            for (size_t j = 0; j < nte; j++)
                g0[j] += g1[np - off + j];
            double *want = unit_to_double(grads, nte);
            char what[80];
            snprintf(what, sizeof what, "wte's two gradients (%s, split at %d)",
                     path_name(blas), s);
            unit_require_near(g0, want, nte, 1e-6, 0.0, what);
            dt_gpt_acts_free(&a0);
            dt_gpt_acts_free(&a1);
            free(p1); free(g0); free(g1); free(dx); free(want);
        }
        free(grads); free(logits);
    }
    dt_set_blas(1);
    free(params); free(dl);
}
END_TEST

/* ==== activation recomputation ====
 * Full and selective recomputation against keeping everything, on the whole model and
 * on two stages split after block 0: the same logits and gradients, bit for bit (the
 * same operations on the same numbers), and the activations' floats as counted: full
 * keeps a block's x (N, C) and shares one block's rest, selective keeps all but the
 * probabilities (B, heads, T, T), which one buffer shared by the blocks holds. */
START_TEST(test_recompute)
{
    const dt_gpt_config *c = &fd_models[0];
    enum { B = 2, T = 5, N = B * T };
    int V = c->vocab, C = c->embed, L = c->layers, U = L + 2, H = c->heads;
    size_t np = dt_gpt_nparams(c), nte = (size_t)V * C, F = 4 * (size_t)C;
    float *params = random_model(c), *dl = malloc((size_t)N * V * sizeof *dl);
    int tok[N], tgt[N];
    random_tokens(tok, N, V);
    random_tokens(tgt, N, V);
    size_t att = (size_t)B * H * T * T, block = N * (8 * (size_t)C + 2 * F + 4) + att;
    float *logits[3], *grads[3];
    for (int rc = 0; rc < 3; rc++) {
        dt_gpt_cut cut = { .heads = H, .ffn = 4 * C, .bias = 1, .recompute = rc };
        dt_gpt_acts a;
        dt_gpt_acts_alloc(c, &cut, B, T, &a);
        size_t scratch, kept = rc == DT_GPT_RECOMPUTE_FULL ? L * (size_t)N * C + block - N * C
                              : rc == DT_GPT_RECOMPUTE_SELECTIVE ? L * (block - att) + att
                              : L * block;
        ck_assert_uint_eq(dt_gpt_acts_floats(c, &cut, B, T, &scratch) - scratch,
                          kept + N * (2 * (size_t)C + 2 + V));
        ck_assert_uint_eq(a.floats, kept + N * (2 * (size_t)C + 2 + V) + scratch);
        logits[rc] = malloc((size_t)N * V * sizeof(float));
        grads[rc] = calloc(np, sizeof(float));
        memcpy(logits[rc], dt_gpt_forward_cut(c, &cut, params, tok, B, T, &a, NULL, NULL),
               (size_t)N * V * sizeof(float));
        dt_xent(logits[rc], tgt, N, V, 1.0f / N, dl);
        dt_gpt_backward_cut(c, &cut, params, &a, dl, tok, B, T, grads[rc], NULL, NULL);
        dt_gpt_acts_free(&a);
        REQUIRE(memcmp(logits[rc], logits[0], (size_t)N * V * sizeof(float)) == 0 &&
                memcmp(grads[rc], grads[0], np * sizeof(float)) == 0, "recompute %d: "
                "the logits or gradients differ from keeping everything", rc);
        if (rc == 0)
            continue;
        /* two stages, split after block 0: the second's x comes from the first */
        size_t off = dt_gpt_unit_offset(c, 2), n1 = np - off + nte;
        float *p1 = malloc(n1 * sizeof *p1), *g0 = calloc(off, sizeof *g0);
        float *g1 = calloc(n1, sizeof *g1), *dx = unit_nan_floats((size_t)N * C);
        memcpy(p1, params + off, (np - off) * sizeof *p1);
        memcpy(p1 + np - off, params, nte * sizeof *p1);
        dt_gpt_acts a0, a1;
        dt_gpt_stage_acts_alloc(c, &cut, 0, 2, B, T, &a0);
        dt_gpt_stage_acts_alloc(c, &cut, 2, U, B, T, &a1);
        const float *x = dt_gpt_forward_stage(c, &cut, 0, 2, params, tok, NULL, B, T, &a0,
                                              NULL, NULL);
        dt_gpt_forward_stage(c, &cut, 2, U, p1, NULL, x, B, T, &a1, NULL, NULL);
        dt_gpt_backward_stage(c, &cut, 2, U, p1, &a1, dl, NULL, dx, B, T, g1, NULL, NULL);
        dt_gpt_backward_stage(c, &cut, 0, 2, params, &a0, dx, tok, NULL, B, T, g0, NULL,
                              NULL);
        REQUIRE(memcmp(g0 + nte, grads[0] + nte, (off - nte) * sizeof *g0) == 0 &&
                memcmp(g1, grads[0] + off, (np - off) * sizeof *g1) == 0, "recompute %d, "
                "two stages: the gradients other than wte's differ", rc);
        dt_gpt_acts_free(&a0);
        dt_gpt_acts_free(&a1);
        free(p1); free(g0); free(g1); free(dx);
    }
    for (int rc = 0; rc < 3; rc++) {
        free(logits[rc]);
        free(grads[rc]);
    }
    free(params); free(dl);
}
END_TEST

/* ==== zero bubble's split backward ====
 * B (dt_gpt_backward_stage_input) then W (_weights) against the fused backward, on
 * the same forward's activations and onto the same nonzero gradients: every gradient
 * and the stream's gradient a stage sends back the same bits. Whole (keeping
 * everything, and with selective recomputation), as two stages split after block 0,
 * and over the pair cut for tensor parallelism, with and without sequence
 * parallelism; with sgemm and with the loops. The split's floats as counted (gpt.h),
 * and W's parts in backward's order. */
static void *rank_run_split(void *arg)      /* forward, the loss, fused, then B and W */
{
    rank_part *r = arg;
    int N = r->B * r->T, U = dt_gpt_units(r->c);
    r->logits = dt_gpt_forward_cut(r->c, &r->cut, r->params, r->tok, r->B, r->T, &r->a,
                                   NULL, NULL);
    dt_xent(r->logits, r->tgt, N, r->c->vocab, 1.0f / N, r->dl);
    dt_gpt_backward_cut(r->c, &r->cut, r->params, &r->a, r->dl, r->tok, r->B, r->T,
                        r->grads, NULL, NULL);
    dt_gpt_backward_stage_input(r->c, &r->cut, 0, U, r->params, &r->a, r->dl, NULL, r->B,
                                r->T, NULL, NULL);
    dt_gpt_backward_stage_weights(r->c, &r->cut, 0, U, &r->a, r->tok, r->B, r->T,
                                  r->wgrads, NULL, NULL);
    return NULL;
}

/* fused and split backward of stage [u0, u1) from dy on a, onto g1 and g2 (equal on
 * entry), the stream's gradients to dx1 and dx2 */
static void stage_both(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0, int u1,
                       const float *p, dt_gpt_acts *a, const float *dy, const int *tok,
                       float *dx1, float *dx2, float *g1, float *g2, int B, int T)
{
    dt_gpt_backward_stage(c, cut, u0, u1, p, a, dy, tok, dx1, B, T, g1, NULL, NULL);
    dt_gpt_backward_stage_input(c, cut, u0, u1, p, a, dy, dx2, B, T, NULL, NULL);
    record_reset(1);
    dt_gpt_backward_stage_weights(c, cut, u0, u1, a, tok, B, T, g2, record_done, NULL);
    REQUIRE(ndone == u1 - u0, "W: %d units done, not %d", ndone, u1 - u0);
    for (int i = 0; i < ndone; i++)
        REQUIRE(done_order[i] == u1 - 1 - i, "W: unit %d done %dth", done_order[i], i);
}

START_TEST(test_split)
{
    const dt_gpt_config *c = &fd_models[0];
    enum { B = 2, T = 5, N = B * T };
    int blas = _i % 2 == 0, kind = _i / 2, V = c->vocab, C = c->embed, L = c->layers;
    int U = L + 2;
    dt_set_blas(blas);
    size_t np = dt_gpt_nparams(c), nte = (size_t)V * C, F = 4 * (size_t)C;
    float *params = random_model(c), *dl = malloc((size_t)N * V * sizeof *dl);
    int tok[N], tgt[N];
    random_tokens(tok, N, V);
    random_tokens(tgt, N, V);
    if (kind < 2) {                  /* whole: keep, selective */
        dt_gpt_cut cut = dt_gpt_whole(c, kind ? DT_GPT_RECOMPUTE_SELECTIVE : DT_GPT_KEEP);
        dt_gpt_cut split = cut;
        split.split = 1;
        size_t sc0, sc1, f0 = dt_gpt_acts_floats(c, &cut, B, T, &sc0);
        ck_assert_uint_eq(dt_gpt_acts_floats(c, &split, B, T, &sc1),
                          f0 + L * (size_t)N * (7 * C + F) + (size_t)N * (V + C));
        ck_assert_uint_eq(sc1, sc0);
        float *g1 = unit_random_floats(np, -1, 1), *g2 = malloc(np * sizeof *g2);
        memcpy(g2, g1, np * sizeof *g2);
        dt_gpt_acts a;
        dt_gpt_acts_alloc(c, &split, B, T, &a);
        dt_xent(dt_gpt_forward_cut(c, &split, params, tok, B, T, &a, NULL, NULL), tgt, N, V,
                1.0f / N, dl);
        stage_both(c, &split, 0, U, params, &a, dl, tok, NULL, NULL, g1, g2, B, T);
        REQUIRE(memcmp(g1, g2, np * sizeof *g1) == 0, "whole, recompute %d (%s): the "
                "split backward's gradients differ from the fused one's", kind,
                path_name(blas));
        dt_gpt_acts_free(&a);
        /* two stages, split after block 0: the stream's gradient sent back too */
        size_t off = dt_gpt_unit_offset(c, 2), n1 = np - off + nte;
        float *p1 = malloc(n1 * sizeof *p1), *h1 = unit_random_floats(n1, -1, 1);
        float *h2 = malloc(n1 * sizeof *h2), *dx1 = unit_nan_floats((size_t)N * C);
        float *dx2 = unit_nan_floats((size_t)N * C);
        memcpy(h2, h1, n1 * sizeof *h2);
        memcpy(g2, g1, off * sizeof *g2);
        memcpy(p1, params + off, (np - off) * sizeof *p1);
        memcpy(p1 + np - off, params, nte * sizeof *p1);
        dt_gpt_acts a0, a1;
        dt_gpt_stage_acts_alloc(c, &split, 0, 2, B, T, &a0);
        dt_gpt_stage_acts_alloc(c, &split, 2, U, B, T, &a1);
        const float *x = dt_gpt_forward_stage(c, &split, 0, 2, params, tok, NULL, B, T, &a0,
                                              NULL, NULL);
        dt_gpt_forward_stage(c, &split, 2, U, p1, NULL, x, B, T, &a1, NULL, NULL);
        stage_both(c, &split, 2, U, p1, &a1, dl, NULL, dx1, dx2, h1, h2, B, T);
        REQUIRE(memcmp(dx1, dx2, (size_t)N * C * sizeof *dx1) == 0 &&
                memcmp(h1, h2, n1 * sizeof *h1) == 0, "recompute %d (%s), the last stage: "
                "the split backward's dx or gradients differ", kind, path_name(blas));
        stage_both(c, &split, 0, 2, params, &a0, dx1, tok, NULL, NULL, g1, g2, B, T);
        REQUIRE(memcmp(g1, g2, off * sizeof *g1) == 0, "recompute %d (%s), the first "
                "stage: the split backward's gradients differ", kind, path_name(blas));
        dt_gpt_acts_free(&a0);
        dt_gpt_acts_free(&a1);
        free(p1); free(h1); free(h2); free(dx1); free(dx2); free(g1); free(g2);
    } else {                         /* the pair: tp, tp with sp */
        pair pr;
        ck_assert_int_eq(pthread_barrier_init(&pr.bar, NULL, 2), 0);
        rank_part r[2];
        size_t rn[2];
        pair_model(c, params, &pr, r, tok, tgt, B, T, kind == 3, 1, rn);
        for (int k = 0; k < 2; k++) {
            free(r[k].grads);         /* nonzero: the backwards add to them */
            r[k].grads = unit_random_floats(rn[k], -1, 1);
            r[k].wgrads = unit_copy_floats(r[k].grads, rn[k]);
        }
        run_pair(r, rank_run_split);
        pthread_barrier_destroy(&pr.bar);
        for (int k = 0; k < 2; k++) {
            REQUIRE(memcmp(r[k].grads, r[k].wgrads, rn[k] * sizeof(float)) == 0, "rank %d "
                    "of the pair%s (%s): the split backward's gradients differ", k,
                    kind == 3 ? " with sp" : "", path_name(blas));
            dt_gpt_acts_free(&r[k].a);
            free((float *)r[k].params); free(r[k].grads); free(r[k].wgrads); free(r[k].dl);
        }
    }
    dt_set_blas(1);
    free(params); free(dl);
}
END_TEST

/* ==== attention a block of keys at a time (ring attention's arithmetic) ====
 * One head of T = 24 positions, d = 8, against dt_attention_forward/backward: the
 * queries cut into C = 3 chunks as a plain cut and into 2C zig-zag chunks (two a rank),
 * each chunk's attention taken over every chunk of keys in ring order (its own first,
 * then from the rank on its left, ...), finished, and its backward summed block by
 * block: the outputs and every gradient within float rounding of the whole attention's.
 * And the causal pairs: equal on every rank zig-zag, 2C-1 to 1 (about) cut plainly. */
START_TEST(test_ring_attention)
{
    enum { T = 24, d = 8, C = 3, ld = 3 * d };
    float *qkv = unit_random_floats((size_t)T * ld, -1, 1), att[T * T], y[T * d];
    float *dy = unit_random_floats((size_t)T * d, -1, 1), datt[T * T], dqkv[T * ld];
    dt_attention_forward(qkv, att, y, 1, T, 1, d);
    dt_attention_backward(qkv, att, dy, datt, dqkv, 1, T, 1, d);
    for (int zig = 0; zig < 2; zig++) {
        int nq = zig ? 2 * C : C, n = T / nq, first[2 * C];
        for (int r = 0; r < C; r++) {               /* the chunks in ring order */
            if (zig)
                dt_cp_zigzag(r, C, T, &first[r], &first[2 * C - 1 - r]);
            else
                first[r] = r * n;
        }
        float o[T * d], m[T], l[T], lse[T], D[T], scratch[T], g[T * ld];
        memset(g, 0, sizeof g);
        for (int a = 0; a < nq; a++) {              /* a query chunk against every key chunk */
            int q0 = first[a];
            dt_attn_block_init(m + q0, l + q0, o + q0 * d, d, n, d);
            for (int st = 0; st < nq; st++) {
                int k0 = first[(a - st + nq) % nq];
                dt_attn_block_forward(qkv + q0 * ld, ld, qkv + k0 * ld + d,
                                      qkv + k0 * ld + 2 * d, ld, n, n, q0, k0, d, m + q0,
                                      l + q0, o + q0 * d, d, scratch);
            }
            dt_attn_block_finish(m + q0, l + q0, o + q0 * d, d, lse + q0, n, d);
            dt_attn_block_delta(o + q0 * d, dy + q0 * d, d, n, d, D + q0);
            for (int st = 0; st < nq; st++) {
                int k0 = first[(a + st) % nq];     /* backward the other way round */
                dt_attn_block_backward(qkv + q0 * ld, ld, qkv + k0 * ld + d,
                                       qkv + k0 * ld + 2 * d, ld, n, n, q0, k0, d, lse + q0,
                                       D + q0, dy + q0 * d, d, g + q0 * ld, g + k0 * ld + d,
                                       g + k0 * ld + 2 * d);
            }
        }
        double *wy = unit_to_double(y, T * d), *wg = unit_to_double(dqkv, T * ld);
        char what[64];
        snprintf(what, sizeof what, "the output, by blocks (%s)", zig ? "zig-zag" : "plain");
        unit_require_close(o, wy, T * d, 2e-6, what);
        snprintf(what, sizeof what, "the gradients, by blocks (%s)", zig ? "zig-zag" : "plain");
        unit_require_close(g, wg, T * ld, 2e-6, what);
        free(wy);
        free(wg);
    }
    /* the causal pairs per rank: every (query, key) chunk pair of its chunks */
    enum { T2 = 120 };
    long plain[C], zz[C];
    for (int r = 0; r < C; r++) {
        int a, b, n = T2 / C, h = T2 / (2 * C);
        plain[r] = 0, zz[r] = 0;
        for (int k = 0; k < C; k++)
            plain[r] += dt_cp_pairs(r * n, k * n, n);
        dt_cp_zigzag(r, C, T2, &a, &b);
        for (int k = 0; k < 2 * C; k++)
            zz[r] += dt_cp_pairs(a, k * h, h) + dt_cp_pairs(b, k * h, h);
    }
    for (int r = 1; r < C; r++)
        REQUIRE(zz[r] == zz[0], "zig-zag: rank %d has %ld causal pairs, rank 0 %ld", r, zz[r],
                zz[0]);
    REQUIRE(zz[0] * C == (long)T2 * (T2 + 1) / 2, "zig-zag: %ld pairs a rank, %d ranks, not "
            "the %ld of the whole", zz[0], C, (long)T2 * (T2 + 1) / 2);
    REQUIRE(plain[C - 1] > (2 * C - 2) * plain[0], "plain cut: the last rank %ld pairs, the "
            "first %ld, want about %d to 1", plain[C - 1], plain[0], 2 * C - 1);
    free(qkv);
    free(dy);
}
END_TEST

/* ==== initialisation ==== */

static float *init_model(const dt_gpt_config *c, unsigned long long seed)
{
    float *p = malloc(dt_gpt_nparams(c) * sizeof *p);
    ck_assert_ptr_nonnull(p);
    dt_gpt_init(c, seed, p);
    return p;
}

static void require_const(const float *p, size_t n, float v, const char *what)
{
    for (size_t i = 0; i < n; i++)
        REQUIRE(p[i] == v, "%s[%zu] = %g, want %g", what, i, p[i], v);
}

/* mean ~0, standard deviation std within 3%, every value within +-std sqrt(3) */
static void require_uniform(const float *p, size_t n, double std, const char *what)
{
    double s = 0, s2 = 0, bound = std * sqrt(3.0) * (1 + 1e-6);
    for (size_t i = 0; i < n; i++) {
        REQUIRE(fabs(p[i]) <= bound, "%s[%zu] = %g, beyond +-%g", what, i, p[i], bound);
        s += p[i];
        s2 += (double)p[i] * p[i];
    }
    double mean = s / n, sd = sqrt(s2 / n - mean * mean);
    REQUIRE(fabs(mean) < 4 * std / sqrt((double)n) && fabs(sd - std) < 0.03 * std,
            "%s: mean %g, standard deviation %g, want 0 and %g", what, mean, sd, std);
}

START_TEST(test_init)
{
    dt_gpt_config c = { .vocab = 67, .seq = 40, .embed = 64, .heads = 4, .layers = 2 };
    size_t np = dt_gpt_nparams(&c), C = c.embed;
    float *a = init_model(&c, 5), *b = init_model(&c, 5), *o = init_model(&c, 6);
    REQUIRE(memcmp(a, b, np * sizeof *a) == 0, "the same seed gave other weights");
    size_t same = 0;
    for (size_t j = 0; j < np; j++)
        same += a[j] == o[j];
    /* only the constants agree: per block 13 C (LayerNorms and biases), lnf's 2 C */
    size_t constants = 2 * C + c.layers * (2 * C + 3 * C + C + 2 * C + 4 * C + C);
    REQUIRE(same == constants, "seeds 5 and 6: %zu of %zu values equal, want the %zu "
            "constants only", same, np, constants);

    /* the constants, and the standard deviations */
    require_uniform(a, (size_t)c.vocab * C, 0.02, "wte");
    require_uniform(a + (size_t)c.vocab * C, (size_t)c.seq * C, 0.02, "wpe");
    double proj = 0.02 / sqrt(2.0 * c.layers);
    for (int l = 0; l < c.layers; l++) {
        dt_gpt_block p;
        dt_gpt_block_at(&c, c.heads, 4 * C, a + dt_gpt_unit_offset(&c, 1 + l), &p);
        require_const(p.ln1_w, C, 1.0f, "ln1_w");
        require_const(p.ln1_b, C, 0.0f, "ln1_b");
        require_const(p.bqkv, 3 * C, 0.0f, "bqkv");
        require_const(p.bo, C, 0.0f, "bo");
        require_const(p.ln2_w, C, 1.0f, "ln2_w");
        require_const(p.ln2_b, C, 0.0f, "ln2_b");
        require_const(p.b1, 4 * C, 0.0f, "b1");
        require_const(p.b2, C, 0.0f, "b2");
        require_uniform(p.wqkv, 3 * C * C, 0.02, "wqkv");
        require_uniform(p.w1, 4 * C * C, 0.02, "w1");
        require_uniform(p.wo, C * C, proj, "wo");
        require_uniform(p.w2, 4 * C * C, proj, "w2");
    }
    float *lnf = a + dt_gpt_unit_offset(&c, c.layers + 1);
    require_const(lnf, C, 1.0f, "lnf_w");
    require_const(lnf + C, C, 0.0f, "lnf_b");

    /* (seed, unit, tensor) alone: at 3 layers, blocks 0 and 1 are the same but for the
     * scale of wo and w2, sqrt(2 L) = sqrt(4) then sqrt(6); blocks differ from each
     * other; another vocabulary and sequence length leave wte's and wpe's common rows */
    dt_gpt_config c3 = c, cv = c;
    c3.layers = 3;
    cv.vocab = 50, cv.seq = 23;
    float *d = init_model(&c3, 5), *e = init_model(&cv, 5);
    REQUIRE(memcmp(a, d, ((size_t)c.vocab + c.seq) * C * sizeof *a) == 0,
            "3 layers: other embeddings");
    REQUIRE(memcmp(a, e, (size_t)cv.vocab * C * sizeof *a) == 0 &&
            memcmp(a + (size_t)c.vocab * C, e + (size_t)cv.vocab * C,
                   (size_t)cv.seq * C * sizeof *a) == 0,
            "another vocabulary and sequence length: other rows of wte or wpe");
    double ratio = sqrt(4.0) / sqrt(6.0);
    for (int l = 0; l < c.layers; l++) {
        dt_gpt_block p2, p3;
        dt_gpt_block_at(&c, c.heads, 4 * C, a + dt_gpt_unit_offset(&c, 1 + l), &p2);
        dt_gpt_block_at(&c3, c.heads, 4 * C, d + dt_gpt_unit_offset(&c3, 1 + l), &p3);
        REQUIRE(memcmp(p2.ln1_w, p3.ln1_w, (size_t)(p2.wo - p2.ln1_w) * sizeof(float)) == 0
                && memcmp(p2.bo, p3.bo, (size_t)(p2.w2 - p2.bo) * sizeof(float)) == 0,
                "block %d: 3 layers gave other values besides wo and w2", l);
        for (size_t i = 0; i < 4 * C * C; i++) {
            double w2 = p2.w2[i] * ratio, w3 = p3.w2[i];
            REQUIRE(fabs(w3 - w2) <= 1e-6 * fabs(w2) + 1e-12, "block %d: w2[%zu] %.9g at 3 "
                    "layers, %.9g at 2, not in the ratio sqrt(4/6)", l, i, w3, p2.w2[i]);
        }
        for (size_t i = 0; i < C * C; i++) {
            double w2 = p2.wo[i] * ratio, w3 = p3.wo[i];
            REQUIRE(fabs(w3 - w2) <= 1e-6 * fabs(w2) + 1e-12, "block %d: wo[%zu] %.9g at 3 "
                    "layers, %.9g at 2, not in the ratio sqrt(4/6)", l, i, w3, p2.wo[i]);
        }
    }
    dt_gpt_block q0, q1;
    dt_gpt_block_at(&c, c.heads, 4 * C, a + dt_gpt_unit_offset(&c, 1), &q0);
    dt_gpt_block_at(&c, c.heads, 4 * C, a + dt_gpt_unit_offset(&c, 2), &q1);
    REQUIRE(memcmp(q0.wqkv, q1.wqkv, C * sizeof(float)) != 0 &&
            memcmp(q0.wqkv, q0.w1, C * sizeof(float)) != 0 &&
            memcmp(a, a + (size_t)c.vocab * C, C * sizeof(float)) != 0,
            "two units or two tensors start with the same values");
    free(a); free(b); free(o); free(d); free(e);
}
END_TEST

/* ==== the layout ==== */

START_TEST(test_layout)
{
    const dt_gpt_config cs[] = {
        { .vocab = 11, .seq = 7, .embed = 12, .heads = 3, .layers = 2 },
        { .vocab = 256, .seq = 64, .embed = 48, .heads = 6, .layers = 3 },
        { .vocab = 2, .seq = 1, .embed = 5, .heads = 5, .layers = 1 },
    };
    for (int k = 0; k < 3; k++) {
        const dt_gpt_config *c = &cs[k];
        size_t C = c->embed, L = c->layers, bs = 12 * C * C + 13 * C, sum = 0;
        REQUIRE(dt_gpt_config_error(c) == NULL, "a good configuration refused: %s",
                dt_gpt_config_error(c));
        ck_assert_int_eq(dt_gpt_units(c), (int)L + 2);
        ck_assert_uint_eq(dt_gpt_block_size(c, c->heads, 4 * c->embed), bs);
        ck_assert_uint_eq(dt_gpt_unit_size(c, 0), ((size_t)c->vocab + c->seq) * C);
        ck_assert_uint_eq(dt_gpt_unit_size(c, (int)L + 1), 2 * C);
        for (int u = 0; u < dt_gpt_units(c); u++) {
            if (u >= 1 && u <= (int)L)
                ck_assert_uint_eq(dt_gpt_unit_size(c, u), bs);
            ck_assert_uint_eq(dt_gpt_unit_offset(c, u), sum);
            sum += dt_gpt_unit_size(c, u);
        }
        ck_assert_uint_eq(dt_gpt_unit_offset(c, dt_gpt_units(c)), sum);
        ck_assert_uint_eq(dt_gpt_nparams(c), sum);
        ck_assert_uint_eq(sum, ((size_t)c->vocab + c->seq) * C + L * bs + 2 * C);
        /* dt_gpt_block_at in gpt.h's order, whole and cut: the tensors side by side,
         * ending at the block's size */
        int d = c->embed / c->heads;
        for (int h = 1; h <= c->heads; h++)
            for (int f = 1; f <= 4 * c->embed; f += 4 * c->embed - 1) {
                size_t n = dt_gpt_block_size(c, h, f), hd = (size_t)h * d;
                ck_assert_uint_eq(n, 6 * C + hd * (4 * C + 3) + (size_t)f * (2 * C + 1));
                double *dbase = calloc(n, sizeof *dbase);
                float *fbase = calloc(n, sizeof *fbase);
                ref_block r;
                dt_gpt_block p;
                ck_assert_uint_eq(ref_block_at(C, hd, f, dbase, &r), n);
                dt_gpt_block_at(c, h, f, fbase, &p);
                const double *rt[12] = { r.ln1_w, r.ln1_b, r.wqkv, r.bqkv, r.wo, r.bo,
                                         r.ln2_w, r.ln2_b, r.w1, r.b1, r.w2, r.b2 };
                float *pt[12] = { p.ln1_w, p.ln1_b, p.wqkv, p.bqkv, p.wo, p.bo, p.ln2_w,
                                  p.ln2_b, p.w1, p.b1, p.w2, p.b2 };
                for (int t = 0; t < 12; t++)
                    REQUIRE(pt[t] - fbase == rt[t] - dbase, "config %d, %d heads, %d "
                            "columns: tensor %d at %td, want %td", k, h, f, t,
                            pt[t] - fbase, rt[t] - dbase);
                free(dbase);
                free(fbase);
            }
    }
    /* the activations: what forward keeps and backward's scratch, whole and cut
     * (per block x, ln1, x2, ln2, means and rstds, qkv, y, h, g, att; out, lnf, logits;
     * the scratch dres, dln, dy, dqkv, dh, datt) */
    const dt_gpt_config *c = &cs[0];
    const dt_gpt_cut cuts[2] = { { .heads = 3, .ffn = 48, .bias = 1 },
                                 { .heads = 2, .ffn = 17, .bias = 0 } };
    for (int k = 0; k < 2; k++) {
        enum { B = 3, T = 5 };
        size_t N = B * T, C = c->embed, hd = (size_t)cuts[k].heads * (C / c->heads);
        size_t F = cuts[k].ffn, att = (size_t)B * cuts[k].heads * T * T, scratch;
        size_t block = N * (4 * C + 4 * hd + 2 * F + 4) + att;
        size_t want_s = N * (2 * C + 4 * hd + F) + att;
        size_t want = c->layers * block + N * (2 * C + 2 + c->vocab) + want_s;
        ck_assert_uint_eq(dt_gpt_acts_floats(c, &cuts[k], B, T, &scratch), want);
        ck_assert_uint_eq(scratch, want_s);
        if (k == 0)
            ck_assert_uint_eq(dt_gpt_acts_floats(c, NULL, B, T, NULL), want);
        dt_gpt_acts a;
        dt_gpt_acts_alloc(c, k ? &cuts[k] : NULL, B, T, &a);
        ck_assert_uint_eq(a.floats, want);
        REQUIRE(a.s.datt + att == a.mem + want, "the scratch does not end the allocation");
        dt_gpt_acts_free(&a);
    }
    /* bad configurations, each named with its number */
    struct { dt_gpt_config c; const char *says; } bad[] = {
        { { .vocab = 11, .seq = 7, .embed = 10, .heads = 3, .layers = 2 }, "10" },
        { { .vocab = 11, .seq = 7, .embed = 12, .heads = 3, .layers = 0 }, "0" },
        { { .vocab = 1, .seq = 7, .embed = 12, .heads = 3, .layers = 2 }, "1" },
        { { .vocab = 11, .seq = 0, .embed = 12, .heads = 3, .layers = 2 }, "0" },
        { { .vocab = 11, .seq = 7, .embed = 12, .heads = 0, .layers = 2 }, "0" },
        { { .vocab = 11, .seq = 7, .embed = 0, .heads = 3, .layers = 2 }, "0" },
    };
    for (int k = 0; k < (int)(sizeof bad / sizeof bad[0]); k++) {
        const char *why = dt_gpt_config_error(&bad[k].c);
        REQUIRE(why != NULL && strlen(why) > 20 && strstr(why, bad[k].says),
                "bad configuration %d: \"%s\"", k, why ? why : "(NULL)");
    }
    REQUIRE(strstr(dt_gpt_config_error(&bad[0].c), "heads") != NULL,
            "heads not dividing the width: \"%s\"", dt_gpt_config_error(&bad[0].c));
}
END_TEST

/* ==== texts ==== */

static char dir[256];

static void text_setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dt_unit_gpt_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("unit_gpt: mkdtemp");
        exit(EXIT_FAILURE);
    }
}

static void text_teardown(void)            /* the files, a folder, then dir */
{
    DIR *d = opendir(dir);
    char p[600];
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0)
                rmdir(p);
        }
    if (d != NULL)
        closedir(d);
    if (rmdir(dir) != 0)
        fprintf(stderr, "unit_gpt: could not remove %s\n", dir);
}

/* Writes n bytes to dir/name; returns the path (static, one per name slot) */
static const char *write_text(const char *name, const void *data, size_t n)
{
    static char paths[16][320];
    static int k;
    ck_assert_int_lt(k, 16);
    snprintf(paths[k], sizeof paths[k], "%s/%s", dir, name);
    FILE *f = fopen(paths[k], "wb");
    ck_assert_ptr_nonnull(f);
    if (n)
        ck_assert_uint_eq(fwrite(data, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
    return paths[k++];
}

/* A refused load: -1, nothing kept, a sentence naming the file and saying why. */
static void refused(const char *path, const char *words)
{
    dt_text t;
    char err[400] = "";
    memset(&t, 0x55, sizeof t);
    REQUIRE(dt_text_load(&t, path, err, sizeof err) == -1, "'%s' accepted (%s)", path, words);
    REQUIRE(t.n == 0 && t.tok == NULL, "a refused load left a text behind");
    REQUIRE(strstr(err, path) != NULL && strstr(err, words) != NULL,
            "message \"%s\" should name %s and say \"%s\"", err, path, words);
}

START_TEST(test_text_load)
{
    /* UTF-8, tabs, carriage returns, a form feed: text */
    const char good[] = "The quick brown fox.\r\n\tJumps \xc3\xbc" "ber den Hund.\f\n";
    const char *p = write_text("good.txt", good, sizeof good - 1);
    dt_text t;
    char err[400] = "";
    REQUIRE(dt_text_load(&t, p, err, sizeof err) == 0, "a good text refused: %s", err);
    REQUIRE(t.n == (int)sizeof good - 1 && memcmp(t.tok, good, sizeof good - 1) == 0,
            "a text of %zu bytes loaded as %d tokens, or other ones", sizeof good - 1, t.n);
    REQUIRE(strstr(t.source, "good.txt") != NULL, "source \"%s\"", t.source);
    dt_text_free(&t);
    REQUIRE(t.n == 0 && t.tok == NULL, "dt_text_free left a text behind");

    /* 1 control byte in 20 is still text; 6 in 100 is not */
    char ctl[100];
    for (int i = 0; i < 100; i++)
        ctl[i] = (char)('a' + i % 26);
    for (int i = 0; i < 5; i++)
        ctl[i * 20 + 7] = (char)(1 + i);
    p = write_text("five.txt", ctl, sizeof ctl);
    REQUIRE(dt_text_load(&t, p, err, sizeof err) == 0, "5 control bytes in 100 refused: %s",
            err);
    dt_text_free(&t);
    ctl[50] = 0x7f;
    refused(write_text("six.bin", ctl, sizeof ctl), "control character");

    char missing[300];
    snprintf(missing, sizeof missing, "%s/no-such-file", dir);
    refused(missing, "No such file");
    refused(write_text("empty.txt", "", 0), "empty");
    refused(write_text("nul.txt", "abc\0def\n", 8), "NUL");
    unsigned char bin[256];                     /* every byte but 0: 1 in 8 control */
    for (int i = 0; i < 256; i++)
        bin[i] = (unsigned char)((i * 37 + 11) % 255 + 1);
    refused(write_text("random.bin", bin, sizeof bin), "control character");
    char sub[320];
    snprintf(sub, sizeof sub, "%s/folder", dir);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    refused(sub, sub);
    /* a short err, or none: cut, never overrun */
    char small[8];
    REQUIRE(dt_text_load(&t, missing, small, sizeof small) == -1 && strlen(small) == 7,
            "a short err: \"%s\"", small);
    REQUIRE(dt_text_load(&t, missing, NULL, 0) == -1, "err NULL: not refused");
}
END_TEST

/* The generated text: the same per seed, another for another seed, exactly n bytes of
 * sentences "the A N V the [A ]N. ": lower-case words, single spaces, full stops, and
 * the last word of each sentence a noun. */
START_TEST(test_text_generate)
{
    static const char *const nouns[] = {
        "cat", "dog", "rank", "ring", "model", "worker", "server", "message", "bucket",
        "layer", "token", "head", "stage", "shard", "batch", "river", "garden", "teacher" };
    dt_text a, b, o;
    dt_text_generate(&a, 3001, 5);
    dt_text_generate(&b, 3001, 5);
    dt_text_generate(&o, 3001, 6);
    REQUIRE(a.n == 3001 && b.n == 3001 && o.n == 3001, "%d, %d and %d bytes, want 3001",
            a.n, b.n, o.n);
    REQUIRE(memcmp(a.tok, b.tok, 3001) == 0, "the same seed gave another text");
    REQUIRE(memcmp(a.tok, o.tok, 3001) != 0, "seeds 5 and 6 gave the same text");
    int spaces = 0, stops = 0;
    for (int i = 0; i < a.n; i++) {
        int ch = a.tok[i];
        REQUIRE((ch >= 'a' && ch <= 'z') || ch == ' ' || ch == '.' || ch == '\n',
                "byte %d is %d", i, ch);
        REQUIRE(!(ch == ' ' && i > 0 && a.tok[i - 1] == ' '), "two spaces at %d: \"%.40s\"",
                i, (const char *)a.tok + (i > 20 ? i - 20 : 0));
        spaces += ch == ' ';
        stops += ch == '.';
        if (ch != '.')
            continue;
        int s = i;
        while (s > 0 && a.tok[s - 1] != ' ')
            s--;
        int known = 0;
        for (int k = 0; k < (int)(sizeof nouns / sizeof nouns[0]); k++)
            known |= (int)strlen(nouns[k]) == i - s &&
                     memcmp(nouns[k], a.tok + s, (size_t)(i - s)) == 0;
        REQUIRE(known, "the sentence ending at %d ends in \"%.*s\", not a noun", i, i - s,
                (const char *)a.tok + s);
    }
    REQUIRE(spaces > a.n / 10 && stops > a.n / 80, "%d spaces and %d full stops in %d bytes",
            spaces, stops, a.n);
    dt_text_free(&a); dt_text_free(&b); dt_text_free(&o);
}
END_TEST

/* Where row x (T) with its targets y lies in the text: its start, or -1 */
static long window_of(const dt_text *t, const int *x, const int *y, int T)
{
    for (long s = 0; s + T < t->n; s++) {
        int j = 0;
        while (j < T && x[j] == t->tok[s + j] && y[j] == t->tok[s + j + 1])
            j++;
        if (j == T)
            return s;
    }
    return -1;
}

/* Every sequence is a window of the text, y its x shifted by one; a sequence depends on
 * s*B + i alone (sequence 2 of step 3 of 5 is sequence 7 of step 1 of 10); batches mix
 * the text; a slice [first, first + count) of the global batch is those rows of it,
 * and nothing beyond is written. */
START_TEST(test_text_batch)
{
    dt_text t;
    dt_text_generate(&t, 500, 2);
    enum { B = 5, T = 9 };
    int x[B * T], y[B * T], xs[2 * B * T], ys[2 * B * T];
    const int steps[3] = { 0, 3, 1000000000 };
    long starts[3 * B];
    for (int k = 0; k < 3; k++) {
        int s = steps[k];
        dt_text_batch(&t, s, B, T, 0, B, x, y);
        for (int i = 0; i < B; i++) {
            starts[k * B + i] = window_of(&t, x + i * T, y + i * T, T);
            REQUIRE(starts[k * B + i] >= 0, "step %d sequence %d is no window of the text "
                    "with y its x shifted by one", s, i);
        }
        /* slices of the global batch: the same rows, as data parallelism needs */
        const int cut[5][2] = { { 0, 2 }, { 2, 3 }, { 4, 1 }, { 1, 0 }, { 0, 5 } };
        for (int c = 0; c < 5; c++) {
            int first = cut[c][0], count = cut[c][1];
            memset(xs, 0xff, sizeof xs);
            dt_text_batch(&t, s, B, T, first, count, xs, ys);
            REQUIRE(memcmp(xs, x + first * T, (size_t)count * T * sizeof *x) == 0 &&
                    memcmp(ys, y + first * T, (size_t)count * T * sizeof *y) == 0,
                    "step %d: sequences [%d, %d) differ from those of the whole batch", s,
                    first, first + count);
            REQUIRE(xs[count * T] == -1, "step %d: wrote beyond %d sequences", s, count);
        }
    }
    dt_text_batch(&t, 3, B, T, 2, 1, x, y);
    dt_text_batch(&t, 1, 2 * B, T, 7, 1, xs, ys);
    REQUIRE(memcmp(x, xs, T * sizeof *x) == 0 && memcmp(y, ys, T * sizeof *y) == 0,
            "sequence 2 of step 3 (batches of 5) is not sequence 7 of step 1 (of 10)");
    int distinct = 0;
    for (int i = 0; i < 3 * B; i++) {
        int seen = 0;
        for (int k = 0; k < i; k++)
            seen |= starts[k] == starts[i];
        distinct += !seen;
    }
    REQUIRE(distinct >= 3 * B - 2, "%d distinct starts among %d sequences", distinct, 3 * B);
    dt_text_free(&t);
}
END_TEST

START_TEST(test_text_unigram)
{
    unsigned char buf[1000];
    dt_text t = { .n = 1000, .tok = buf };
    memset(buf, 'q', sizeof buf);
    REQUIRE(dt_text_unigram_bits(&t) == 0.0, "one byte repeated: %g bits",
            dt_text_unigram_bits(&t));
    for (int i = 0; i < 1000; i++)
        buf[i] = i % 2 ? 'a' : 'b';
    REQUIRE(fabs(dt_text_unigram_bits(&t) - 1.0) < 1e-12, "two bytes equally often: %.15g "
            "bits", dt_text_unigram_bits(&t));
    for (int i = 0; i < 1000; i++)
        buf[i] = (unsigned char)(i % 8 < 4 ? i % 8 : 200 + i % 2);   /* 1/8 x4, 1/4 x2 */
    REQUIRE(fabs(dt_text_unigram_bits(&t) - 2.5) < 1e-12, "1/8, 1/8, 1/8, 1/8, 1/4, 1/4: "
            "%.15g bits, want 2.5", dt_text_unigram_bits(&t));
}
END_TEST

/* ==== training and sampling ==== */

/* A tiny model, serial, Adam, on the generated text: the first loss is ln V (the
 * initial weights predict nothing), the mean of the last 5 ends clearly below the
 * text's unigram entropy (in nats), the best a model that ignores context can do.
 * With the plain loops: 0.1 s, as with sgemm, but 6 times faster than sgemm under
 * valgrind (which runs OpenBLAS's many small products slowly). */
START_TEST(test_train)
{
    dt_gpt_config c = { .vocab = 128, .seq = 16, .embed = 24, .heads = 2, .layers = 1 };
    dt_optim_config o = { .kind = DT_ADAM, .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.99f,
                          .eps = 1e-8f };
    enum { B = 8, T = 16, N = B * T, STEPS = 120 };
    dt_text t;
    dt_text_generate(&t, 20000, 1);
    double unigram = dt_text_unigram_bits(&t) * log(2.0);
    size_t np = dt_gpt_nparams(&c);
    float *p = init_model(&c, 1), *g = malloc(np * sizeof *g);
    float *st = calloc(2 * np, sizeof *st), *dl = malloc((size_t)N * c.vocab * sizeof *dl);
    int x[N], y[N];
    dt_gpt_acts a;
    dt_gpt_acts_alloc(&c, NULL, B, T, &a);
    dt_set_blas(0);
    double first = 0, last = 0;
    for (int s = 0; s < STEPS; s++) {
        dt_text_batch(&t, s, B, T, 0, B, x, y);
        const float *logits = dt_gpt_forward(&c, p, x, B, T, &a);
        double loss = dt_xent(logits, y, N, c.vocab, 1.0f / N, dl) / N;
        if (s == 0)
            first = loss;
        memset(g, 0, np * sizeof *g);
        dt_gpt_backward(&c, p, &a, dl, x, B, T, g, NULL, NULL);
        dt_optim_step(&o, s + 1, p, g, st, np);
        if (s >= STEPS - 5)
            last += loss / 5;
    }
    REQUIRE(fabs(first - log(128.0)) < 0.05, "the first loss %g, want about ln 128 = %g",
            first, log(128.0));
    REQUIRE(isfinite(last) && last < 0.85 * unigram, "loss from %g to %g nats; the "
            "unigram entropy is %g", first, last, unigram);
    dt_set_blas(1);
    dt_gpt_acts_free(&a);
    dt_text_free(&t);
    free(p); free(g); free(st); free(dl);
}
END_TEST

/* Temperature 0: the most likely token (forward's own argmax), the same every time;
 * temperature 0.8: the same tokens for the same seed, others for another; every token
 * in the vocabulary; a prompt longer than seq (its last seq tokens are the context). */
START_TEST(test_sample)
{
    dt_gpt_config c = { .vocab = 11, .seq = 7, .embed = 12, .heads = 3, .layers = 2 };
    enum { LEN = 10, NS = 20 };
    float *p = random_model(&c);
    int prompt[LEN], a[NS], b[NS], o[NS];
    random_tokens(prompt, LEN, c.vocab);
    dt_gpt_sample(&c, p, prompt, LEN, NS, 0.0f, 1, a);
    dt_gpt_sample(&c, p, prompt, LEN, NS, 0.0f, 2, b);
    REQUIRE(memcmp(a, b, sizeof a) == 0, "temperature 0 gave other tokens");
    dt_gpt_acts acts;
    dt_gpt_acts_alloc(&c, NULL, 1, c.seq, &acts);
    const float *l = dt_gpt_forward(&c, p, prompt + LEN - c.seq, 1, c.seq, &acts);
    const float *last = l + (size_t)(c.seq - 1) * c.vocab;
    int best = 0;
    for (int v = 1; v < c.vocab; v++)
        best = last[v] > last[best] ? v : best;
    REQUIRE(a[0] == best, "temperature 0: token %d first, the logits' largest is %d", a[0],
            best);
    dt_gpt_acts_free(&acts);
    dt_gpt_sample(&c, p, prompt, LEN, NS, 0.8f, 3, a);
    dt_gpt_sample(&c, p, prompt, LEN, NS, 0.8f, 3, b);
    dt_gpt_sample(&c, p, prompt, LEN, NS, 0.8f, 4, o);
    REQUIRE(memcmp(a, b, sizeof a) == 0, "the same seed gave other tokens");
    REQUIRE(memcmp(a, o, sizeof a) != 0, "seeds 3 and 4 gave the same %d tokens", NS);
    for (int i = 0; i < NS; i++)
        REQUIRE(a[i] >= 0 && a[i] < c.vocab && o[i] >= 0 && o[i] < c.vocab,
                "token %d: %d or %d, not in 0..%d", i, a[i], o[i], c.vocab - 1);
    dt_gpt_sample(&c, p, prompt, 1, 0, 1.0f, 1, a);       /* nothing asked: fine */
    free(p);
}
END_TEST

/* ==== broken preconditions ==== */

/* Runs fn in a child whose stderr comes back here: fails unless the child stops with
 * status 1 (dtlab's abort path) and says words, so that a precondition that is not
 * checked cannot pass by dying of something else further on. */
static void dies_saying(void (*fn)(void), const char *words)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 2);
        fn();
        _exit(0);
    }
    close(fd[1]);
    char msg[2048];
    size_t n = 0;
    for (ssize_t k; n + 1 < sizeof msg && (k = read(fd[0], msg + n, sizeof msg - 1 - n)) > 0;)
        n += (size_t)k;
    msg[n] = '\0';
    close(fd[0]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    REQUIRE(WIFEXITED(status) && WEXITSTATUS(status) == 1 && strstr(msg, words) != NULL,
            "want status 1 and \"%s\"; got %s %d, \"%s\"", words,
            WIFEXITED(status) ? "status" : "signal",
            WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), msg);
}

static const dt_gpt_config tiny = { .vocab = 5, .seq = 4, .embed = 6, .heads = 2,
                                    .layers = 1 };
static float tiny_params[1024];

static void forward_tok(const int *tok, int T, int room)
{
    dt_gpt_acts a;
    dt_gpt_acts_alloc(&tiny, NULL, 1, room, &a);
    dt_gpt_forward(&tiny, tiny_params, tok, 1, T, &a);
}

static void token_is_V(void) { forward_tok((const int[3]){ 1, 5, 2 }, 3, 3); }
static void token_negative(void) { forward_tok((const int[3]){ 1, 2, -1 }, 3, 3); }
static void T_beyond_acts(void) { forward_tok((const int[4]){ 1, 2, 3, 4 }, 4, 3); }
static void T_beyond_seq(void)
{
    dt_gpt_acts a;
    dt_gpt_acts_alloc(&tiny, NULL, 1, 5, &a);   /* the model reads at most 4 */
}
static void bad_config(void)
{
    dt_gpt_config c = tiny;
    c.embed = 7;
    dt_gpt_nparams(&c);
}
static void empty_prompt(void)
{
    int prompt[1] = { 1 }, out[2];
    dt_gpt_sample(&tiny, tiny_params, prompt, 0, 2, 0.0f, 1, out);
}
static void text_too_short(void)
{
    unsigned char buf[8] = "abcdefgh";
    dt_text t = { .n = 8, .tok = buf };
    int x[8], y[8];
    dt_text_batch(&t, 0, 1, 8, 0, 1, x, y);     /* 8 tokens: a sequence of 8 needs 9 */
}

START_TEST(test_preconditions)
{
    ck_assert_uint_le(dt_gpt_nparams(&tiny), 1024);
    dies_saying(token_is_V, "token 5 at (0, 1) is not in the vocabulary");
    dies_saying(token_negative, "token -1 at (0, 2) is not in the vocabulary");
    dies_saying(T_beyond_acts, "1 sequences of 4 tokens, activations for 1 of 3");
    dies_saying(T_beyond_seq, "of at most 4");
    dies_saying(bad_config, "--embed 7 is not a multiple of --heads 2");
    dies_saying(empty_prompt, "a prompt of 0 tokens");
    dies_saying(text_too_short, "a sequence of 8 needs 9");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpt");
    TCase *tc = tcase_create("model");
    tcase_add_test(tc, test_embed);
    tcase_add_test(tc, test_layernorm);
    tcase_add_loop_test(tc, test_attention, 0, NATT);
    tcase_add_test(tc, test_block);
    tcase_add_loop_test(tc, test_cut, 0, 4);
    tcase_add_loop_test(tc, test_model_fd, 0, NFD);
    tcase_add_test(tc, test_model_independence);
    tcase_add_test(tc, test_model_blas_vs_loops);
    tcase_add_loop_test(tc, test_threads, 0, 2);
    tcase_add_loop_test(tc, test_cut_model, 0, 4);
    tcase_add_test(tc, test_stages);
    tcase_add_test(tc, test_recompute);
    tcase_add_loop_test(tc, test_split, 0, 8);
    tcase_add_test(tc, test_ring_attention);
    tcase_add_test(tc, test_init);
    tcase_add_test(tc, test_layout);
    tcase_add_test(tc, test_train);
    tcase_add_test(tc, test_sample);
    tcase_add_test(tc, test_preconditions);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    TCase *tx = tcase_create("text");
    tcase_add_unchecked_fixture(tx, text_setup, text_teardown);
    tcase_add_test(tx, test_text_load);
    tcase_add_test(tx, test_text_generate);
    tcase_add_test(tx, test_text_batch);
    tcase_add_test(tx, test_text_unigram);
    tcase_set_timeout(tx, 60);
    suite_add_tcase(s, tx);
    return unit_run(s);
}
