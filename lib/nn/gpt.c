/* The transformer of gpt.h: its layout, initialisation, operations, blocks, the whole
 * model's forward and backward, and sampling.
 *
 * The time goes where the MLP's does, into matrix products: per block and token,
 * 12 C^2 multiply-adds in the linear layers (qkv 3C^2, wo C^2, the MLP 8C^2) and 2 T C
 * in attention (q k^T and att v), each twice more in backward. Those go through sgemm
 * (dt_linear_* and dti_sgemm_ld) unless DT_BLAS=0 chose the plain loops; LayerNorm,
 * the softmax and the embeddings are plain loops either way. On device pointers the
 * linear layers go to cuBLAS (nn_kernels.cu) and the operations here to the kernels of
 * gpt_kernels.cu, attention's products included. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "gpt.h"
#include "nn.h"
#include "nn_cuda.h"
#include "nn_internal.h"
#include "schedule.h"

/* ==== the shape and the layout ==== */

const char *dt_gpt_config_error(const dt_gpt_config *c)
{
    static __thread char why[160];
    if (c->vocab < 2 || c->vocab > 65536)
        snprintf(why, sizeof why, "the vocabulary must hold 2 to 65536 tokens, not %d",
                 c->vocab);
    else if (c->seq < 1 || c->seq > 4096)
        snprintf(why, sizeof why, "the sequence must be 1 to 4096 tokens long, not %d",
                 c->seq);
    else if (c->heads < 1 || c->embed < 1 || c->embed > 8192)
        snprintf(why, sizeof why, "--embed must be 1 to 8192 and --heads 1 or more "
                 "(%d, %d)", c->embed, c->heads);
    else if (c->embed % c->heads)
        snprintf(why, sizeof why, "--embed %d is not a multiple of --heads %d: each head "
                 "takes embed/heads columns", c->embed, c->heads);
    else if (c->layers < 1 || c->layers > 256)
        snprintf(why, sizeof why, "--layers must be 1 to 256, not %d", c->layers);
    else
        return NULL;
    return why;
}

static void check_config(const dt_gpt_config *c)
{
    DT_REQUIRE(c != NULL, "the GPT's configuration is NULL");
    const char *why = dt_gpt_config_error(c);
    DT_REQUIRE(why == NULL, "%s", why);
}

static int head_dim(const dt_gpt_config *c) { return c->embed / c->heads; }

size_t dt_gpt_attn_size(const dt_gpt_config *c, int heads)
{
    size_t C = (size_t)c->embed, hd = (size_t)heads * head_dim(c);
    return 2 * C + 3 * hd * C + 3 * hd + C * hd + C + 2 * C;
}

size_t dt_gpt_mlp_size(const dt_gpt_config *c, int ffn)
{
    size_t C = (size_t)c->embed, F = (size_t)ffn;
    return F * C + F + C * F + C;
}

size_t dt_gpt_block_size(const dt_gpt_config *c, int heads, int ffn)
{
    return dt_gpt_attn_size(c, heads) + dt_gpt_mlp_size(c, ffn);
}

void dt_gpt_block_at(const dt_gpt_config *c, int heads, int ffn, float *base,
                     dt_gpt_block *p)
{
    size_t C = (size_t)c->embed, hd = (size_t)heads * head_dim(c);
    float *q = base;
    p->ln1_w = q; q += C;
    p->ln1_b = q; q += C;
    p->wqkv = q; q += 3 * hd * C;
    p->bqkv = q; q += 3 * hd;
    p->wo = q; q += C * hd;
    p->bo = q; q += C;
    p->ln2_w = q; q += C;
    p->ln2_b = q; q += C;
    dt_gpt_mlp_at(c, ffn, q, p);
}

void dt_gpt_mlp_at(const dt_gpt_config *c, int ffn, float *base, dt_gpt_block *p)
{
    size_t C = (size_t)c->embed, F = (size_t)ffn;
    float *q = base;
    p->w1 = q; q += F * C;
    p->b1 = q; q += F;
    p->w2 = q; q += C * F;
    p->b2 = q;
}

int dt_gpt_units(const dt_gpt_config *c) { return c->layers + 2; }

size_t dt_gpt_unit_size(const dt_gpt_config *c, int u)
{
    DT_REQUIRE(u >= 0 && u < dt_gpt_units(c), "dt_gpt_unit_size: unit %d of %d", u,
               dt_gpt_units(c));
    if (u == 0)
        return ((size_t)c->vocab + c->seq) * c->embed;
    if (u == c->layers + 1)
        return 2 * (size_t)c->embed;
    return dt_gpt_block_size(c, c->heads, 4 * c->embed);
}

size_t dt_gpt_unit_offset(const dt_gpt_config *c, int u)
{
    DT_REQUIRE(u >= 0 && u <= dt_gpt_units(c), "dt_gpt_unit_offset: unit %d of %d", u,
               dt_gpt_units(c));
    size_t off = 0;
    for (int i = 0; i < u; i++)
        off += dt_gpt_unit_size(c, i);
    return off;
}

size_t dt_gpt_nparams(const dt_gpt_config *c)
{
    check_config(c);
    return dt_gpt_unit_offset(c, dt_gpt_units(c));
}

/* The whole block u-1's tensors in the flat array p */
static void block_of(const dt_gpt_config *c, const float *p, int l, dt_gpt_block *b)
{
    dt_gpt_block_at(c, c->heads, 4 * c->embed,
                     (float *)p + dt_gpt_unit_offset(c, 1 + l), b);
}

/* ==== initial weights ==== */

/* n values uniform in +-std*sqrt(3) (standard deviation std), from (seed, unit, tensor) */
static void fill(float *w, size_t n, double std, unsigned long long seed, int unit,
                 int tensor)
{
    uint64_t s = (uint64_t)seed ^ ((uint64_t)(unit + 1) * 0xd1b54a32d192ed03ull)
                 ^ ((uint64_t)(tensor + 1) * 0x9e3779b97f4a7c15ull);
    double bound = std * sqrt(3.0);
    for (size_t i = 0; i < n; i++)
        w[i] = (float)((2.0 * dti_nn_uniform(&s) - 1.0) * bound);
}

static void constant(float *w, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        w[i] = v;
}

void dt_gpt_init(const dt_gpt_config *c, unsigned long long seed, float *params)
{
    check_config(c);
    DT_REQUIRE(params != NULL, "dt_gpt_init: params is NULL");
    DT_REQUIRE(!dt_is_device_ptr(params), "dt_gpt_init fills host memory; initialise a "
               "host copy and dt_memcpy it to the GPU");
    size_t C = (size_t)c->embed, V = (size_t)c->vocab, S = (size_t)c->seq;
    double std = 0.02, proj = 0.02 / sqrt(2.0 * c->layers);
    fill(params, V * C, std, seed, 0, 0);                        /* wte */
    fill(params + V * C, S * C, std, seed, 0, 1);                /* wpe */
    for (int l = 0; l < c->layers; l++) {
        dt_gpt_block p;
        block_of(c, params, l, &p);
        int u = 1 + l;
        constant(p.ln1_w, C, 1.0f);
        constant(p.ln1_b, C, 0.0f);
        fill(p.wqkv, 3 * C * C, std, seed, u, 0);
        constant(p.bqkv, 3 * C, 0.0f);
        fill(p.wo, C * C, proj, seed, u, 1);
        constant(p.bo, C, 0.0f);
        constant(p.ln2_w, C, 1.0f);
        constant(p.ln2_b, C, 0.0f);
        dt_gpt_mlp_init(c, seed, l, 0, &p);
    }
    float *lnf = params + dt_gpt_unit_offset(c, c->layers + 1);
    constant(lnf, C, 1.0f);
    constant(lnf + C, C, 0.0f);
}

void dt_gpt_mlp_init(const dt_gpt_config *c, unsigned long long seed, int l, int e,
                     const dt_gpt_block *p)
{
    check_config(c);
    size_t C = (size_t)c->embed, F = 4 * C;
    double std = 0.02, proj = 0.02 / sqrt(2.0 * c->layers);
    fill(p->w1, F * C, std, seed, 1 + l, 2 + 2 * e);
    constant(p->b1, F, 0.0f);
    fill(p->w2, C * F, proj, seed, 1 + l, 3 + 2 * e);
    constant(p->b2, C, 0.0f);
}

/* ==== the operations ==== */

/* Each operation runs where its buffers are (dti_nn_on_gpu: all on the host, or all on
 * the GPU, else it stops with a message): on the GPU through its launcher in
 * gpt_kernels.cu (nn_cuda.h), on the host through the loops below, the reference. */

/* Each operation's loop is a body over items [i0, i1), rows or blocks of DTI_NN_COLS
 * columns, that lib/nn's threads share (nn_internal.h); with one thread the body over all
 * the items is the plain loop. */

/* [i0, i1) of a blocks of DTI_NN_COLS columns of C, as columns */
static void col_block(size_t k0, size_t k1, int C, int *i0, int *i1)
{
    *i0 = (int)k0 * DTI_NN_COLS;
    *i1 = (int)k1 * DTI_NN_COLS < C ? (int)k1 * DTI_NN_COLS : C;
}

static size_t col_blocks(int C) { return (size_t)(C + DTI_NN_COLS - 1) / DTI_NN_COLS; }

struct embed_args {
    const int *tok, *pos;
    const float *wte, *wpe, *dout;
    float *out, *dwte, *dwpe;
    int B, T, C;
};

/* rows r = b*T + t in [r0, r1) */
DTI_NN_WIDE static void embed_rows(void *ctx, size_t r0, size_t r1)
{
    struct embed_args *g = ctx;
    int T = g->T, C = g->C;
    for (size_t r = r0; r < r1; r++) {
        int t = (int)(r % T);
        const float *e = g->wte + (size_t)g->tok[r] * C;
        const float *p = g->wpe + (size_t)(g->pos ? g->pos[t] : t) * C;
        float *o = g->out + r * C;                                  /* (C) each */
        for (int i = 0; i < C; i++)
            o[i] = e[i] + p[i];
    }
}

/* rows with the same token (or position) add to the same row of dwte (dwpe): blocks of
 * columns, each column's rows in order b, t */
DTI_NN_WIDE static void embed_cols(void *ctx, size_t k0, size_t k1)
{
    struct embed_args *g = ctx;
    int T = g->T, C = g->C, i0, i1;
    col_block(k0, k1, C, &i0, &i1);
    for (int b = 0; b < g->B; b++)
        for (int t = 0; t < T; t++) {
            const float *d = g->dout + ((size_t)b * T + t) * C;         /* (C) */
            float *e = g->dwte + (size_t)g->tok[(size_t)b * T + t] * C;
            float *p = g->dwpe + (size_t)(g->pos ? g->pos[t] : t) * C;
            for (int i = i0; i < i1; i++) {
                e[i] += d[i];
                p[i] += d[i];
            }
        }
}

void dt_embed_forward(const int *tok, const float *wte, const float *wpe, const int *pos,
                      float *out, int B, int T, int C, int V)
{
    const void *ptrs[] = { tok, wte, wpe, pos, out };
    if (dti_nn_on_gpu("dt_embed_forward", ptrs, 5)) {     /* checks the tokens too */
        dti_nn_cuda_embed_forward(tok, wte, wpe, pos, out, B, T, C, V);
        return;
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int id = tok[(size_t)b * T + t];
            DT_REQUIRE(id >= 0 && id < V, "dt_embed_forward: token %d at (%d, %d) is not "
                       "in the vocabulary (0..%d)", id, b, t, V - 1);
        }
    struct embed_args g = { .tok = tok, .pos = pos, .wte = wte, .wpe = wpe, .out = out,
                            .B = B, .T = T, .C = C };
    dti_nn_parallel((size_t)B * T, 3 * (size_t)B * T * C, embed_rows, &g);
}

void dt_embed_backward(const int *tok, const float *dout, const int *pos, float *dwte,
                       float *dwpe, int B, int T, int C)
{
    const void *ptrs[] = { tok, dout, pos, dwte, dwpe };
    if (dti_nn_on_gpu("dt_embed_backward", ptrs, 5)) {
        dti_nn_cuda_embed_backward(tok, dout, pos, dwte, dwpe, B, T, C);
        return;
    }
    struct embed_args g = { .tok = tok, .pos = pos, .dout = dout, .dwte = dwte,
                            .dwpe = dwpe, .B = B, .T = T, .C = C };
    dti_nn_parallel(col_blocks(C), 3 * (size_t)B * T * C, embed_cols, &g);
}

struct ln_args {
    const float *x, *w, *b, *dy;
    float *y, *mean, *rstd, *dx, *dw, *db;
    int N, C;
};

DTI_NN_WIDE static void ln_forward_rows(void *ctx, size_t r0, size_t r1)
{
    struct ln_args *g = ctx;
    int C = g->C;
    const float *w = g->w, *b = g->b;
    for (size_t r = r0; r < r1; r++) {
        const float *x_r = g->x + r * C;                                       /* (C) */
        float *y_r = g->y + r * C;
        float m = 0.0f, v = 0.0f;
        for (int i = 0; i < C; i++)
            m += x_r[i];
        m /= C;
        for (int i = 0; i < C; i++)
            v += (x_r[i] - m) * (x_r[i] - m);
        v /= C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        for (int i = 0; i < C; i++)
            y_r[i] = (x_r[i] - m) * s * w[i] + b[i];
        g->mean[r] = m;
        g->rstd[r] = s;
    }
}

void dt_layernorm_forward(const float *x, const float *w, const float *b, float *y,
                          float *mean, float *rstd, int N, int C)
{
    const void *ptrs[] = { x, w, b, y, mean, rstd };
    if (dti_nn_on_gpu("dt_layernorm_forward", ptrs, 6)) {
        dti_nn_cuda_layernorm_forward(x, w, b, y, mean, rstd, N, C);
        return;
    }
    struct ln_args g = { .x = x, .w = w, .b = b, .y = y, .mean = mean, .rstd = rstd,
                         .N = N, .C = C };
    dti_nn_parallel((size_t)N, 2 * (size_t)N * C, ln_forward_rows, &g);
}

/* With xhat = (x - mean) rstd and g = dy * w (the gradient of xhat):
 *   dw += dy xhat,  db += dy,  dx += rstd (g - mean(g) - xhat mean(g xhat))
 * the last because xhat depends on x through the mean and the variance too. dx row by
 * row (ln_backward_rows); dw and db, sums over the rows, by blocks of columns, each
 * column's rows in order (ln_backward_cols). */
DTI_NN_WIDE static void ln_backward_rows(void *ctx, size_t r0, size_t r1)
{
    struct ln_args *g = ctx;
    int C = g->C;
    const float *w = g->w;
    for (size_t r = r0; r < r1; r++) {
        const float *x_r = g->x + r * C, *dy_r = g->dy + r * C;                /* (C) */
        float *dx_r = g->dx + r * C;
        float m = g->mean[r], s = g->rstd[r], gm = 0.0f, gxm = 0.0f;
        for (int i = 0; i < C; i++) {
            float xhat = (x_r[i] - m) * s, gi = dy_r[i] * w[i];
            gm += gi;
            gxm += gi * xhat;
        }
        gm /= C;
        gxm /= C;
        for (int i = 0; i < C; i++) {
            float xhat = (x_r[i] - m) * s, gi = dy_r[i] * w[i];
            dx_r[i] += s * (gi - gm - xhat * gxm);
        }
    }
}

DTI_NN_WIDE static void ln_backward_cols(void *ctx, size_t k0, size_t k1)
{
    struct ln_args *g = ctx;
    int C = g->C, i0, i1;
    col_block(k0, k1, C, &i0, &i1);
    for (int r = 0; r < g->N; r++) {
        const float *x_r = g->x + (size_t)r * C, *dy_r = g->dy + (size_t)r * C;
        float m = g->mean[r], s = g->rstd[r];
        for (int i = i0; i < i1; i++) {
            float xhat = (x_r[i] - m) * s;
            g->dw[i] += dy_r[i] * xhat;
            g->db[i] += dy_r[i];
        }
    }
}

void dt_layernorm_backward(const float *x, const float *w, const float *mean,
                           const float *rstd, const float *dy, float *dx, float *dw,
                           float *db, int N, int C)
{
    DT_REQUIRE((dw == NULL) == (db == NULL) && (dx == NULL || w != NULL), "dt_layernorm_"
               "backward: dw and db both or neither; dx needs w");
    const void *ptrs[] = { x, w, mean, rstd, dy, dx, dw, db };
    if (dti_nn_on_gpu("dt_layernorm_backward", ptrs, 8)) {
        dti_nn_cuda_layernorm_backward(x, w, mean, rstd, dy, dx, dw, db, N, C);
        return;
    }
    struct ln_args g = { .x = x, .w = w, .dy = dy, .mean = (float *)mean,
                         .rstd = (float *)rstd, .dx = dx, .dw = dw, .db = db, .N = N,
                         .C = C };
    if (dx)
        dti_nn_parallel((size_t)N, 3 * (size_t)N * C, ln_backward_rows, &g);
    if (dw)
        dti_nn_parallel(col_blocks(C), 2 * (size_t)N * C, ln_backward_cols, &g);
}

/* Row i of one head's scores, att_i[0..i], in place: the softmax over j <= i (the
 * causal mask: position i sees itself and what came before), zeros after. */
DTI_NN_WIDE static void softmax_causal(float *att_i, int i, int T)
{
    float m = att_i[0], sum = 0.0f;
    for (int j = 1; j <= i; j++)
        m = att_i[j] > m ? att_i[j] : m;
    for (int j = 0; j <= i; j++) {
        att_i[j] = expf(att_i[j] - m);
        sum += att_i[j];
    }
    for (int j = 0; j <= i; j++)
        att_i[j] /= sum;
    for (int j = i + 1; j < T; j++)
        att_i[j] = 0.0f;
}

/* One head of one sequence: q, k, v (T, d) with rows ld floats apart, y (T, d) with
 * rows ldy apart; att (T, T) */
DTI_NN_WIDE
static void head_forward(const float *q, const float *k, const float *v, int ld,
                         float *att, float *y, int ldy, int T, int d)
{
    float scale = 1.0f / sqrtf((float)d);
    if (dt_blas()) {
        dti_sgemm_ld(0, 1, T, T, d, scale, q, ld, k, ld, 0.0f, att, T);   /* q k^T */
        for (int i = 0; i < T; i++)
            softmax_causal(att + (size_t)i * T, i, T);
        dti_sgemm_ld(0, 0, T, d, T, 1.0f, att, T, v, ld, 0.0f, y, ldy);   /* att v */
        return;
    }
    for (int i = 0; i < T; i++) {
        const float *q_i = q + (size_t)i * ld;
        float *att_i = att + (size_t)i * T, *y_i = y + (size_t)i * ldy;
        for (int j = 0; j <= i; j++) {
            const float *k_j = k + (size_t)j * ld;
            float s = 0.0f;
            for (int e = 0; e < d; e++)
                s += q_i[e] * k_j[e];
            att_i[j] = s * scale;
        }
        softmax_causal(att_i, i, T);
        for (int e = 0; e < d; e++)
            y_i[e] = 0.0f;
        for (int j = 0; j <= i; j++) {
            const float *v_j = v + (size_t)j * ld;
            for (int e = 0; e < d; e++)
                y_i[e] += att_i[j] * v_j[e];
        }
    }
}

/* Its backward. With P = att and dP = dy v^T:
 *   dv = P^T dy
 *   dS_ij = P_ij (dP_ij - sum_k P_ik dP_ik)        (the softmax's Jacobian, row by row)
 *   dq = scale dS k,   dk = scale dS^T q
 * dS is zero above the diagonal, as P is. q, k, v, dq, dk, dv have rows ld apart, dy
 * ldy apart; datt (T, T) is scratch. */
DTI_NN_WIDE
static void head_backward(const float *q, const float *k, const float *v, int ld,
                          const float *att, const float *dy, int ldy, float *datt,
                          float *dq, float *dk, float *dv, int T, int d)
{
    float scale = 1.0f / sqrtf((float)d);
    if (dt_blas())
        dti_sgemm_ld(0, 1, T, T, d, 1.0f, dy, ldy, v, ld, 0.0f, datt, T);     /* dP */
    else
        for (int i = 0; i < T; i++)
            for (int j = 0; j <= i; j++) {
                const float *dy_i = dy + (size_t)i * ldy, *v_j = v + (size_t)j * ld;
                float s = 0.0f;
                for (int e = 0; e < d; e++)
                    s += dy_i[e] * v_j[e];
                datt[(size_t)i * T + j] = s;
            }
    for (int i = 0; i < T; i++) {
        const float *P = att + (size_t)i * T;
        float *dS = datt + (size_t)i * T, dot = 0.0f;
        for (int j = 0; j <= i; j++)
            dot += P[j] * dS[j];
        for (int j = 0; j <= i; j++)
            dS[j] = P[j] * (dS[j] - dot);
        for (int j = i + 1; j < T; j++)
            dS[j] = 0.0f;
    }
    if (dt_blas()) {
        dti_sgemm_ld(1, 0, T, d, T, 1.0f, att, T, dy, ldy, 0.0f, dv, ld);     /* P^T dy */
        dti_sgemm_ld(0, 0, T, d, T, scale, datt, T, k, ld, 0.0f, dq, ld);     /* dS k */
        dti_sgemm_ld(1, 0, T, d, T, scale, datt, T, q, ld, 0.0f, dk, ld);     /* dS^T q */
        return;
    }
    for (int i = 0; i < T; i++)
        for (int e = 0; e < d; e++) {
            dq[(size_t)i * ld + e] = 0.0f;
            dk[(size_t)i * ld + e] = 0.0f;
            dv[(size_t)i * ld + e] = 0.0f;
        }
    for (int i = 0; i < T; i++) {
        const float *P = att + (size_t)i * T, *dS = datt + (size_t)i * T;
        const float *q_i = q + (size_t)i * ld, *dy_i = dy + (size_t)i * ldy;
        float *dq_i = dq + (size_t)i * ld;
        for (int j = 0; j <= i; j++) {
            const float *k_j = k + (size_t)j * ld;
            float *dk_j = dk + (size_t)j * ld, *dv_j = dv + (size_t)j * ld;
            for (int e = 0; e < d; e++) {
                dv_j[e] += P[j] * dy_i[e];
                dq_i[e] += scale * dS[j] * k_j[e];
                dk_j[e] += scale * dS[j] * q_i[e];
            }
        }
    }
}

/* Pairs (b, h) = (k / H, k % H), k in [k0, k1): each writes its own head's att, datt
 * and columns of y and dqkv */
struct attn_args {
    const float *qkv, *att_in, *dy;
    float *att, *y, *datt, *dqkv;
    int H, T, d;
};

DTI_NN_WIDE static void attn_forward_heads(void *ctx, size_t k0, size_t k1)
{
    struct attn_args *g = ctx;
    int H = g->H, T = g->T, d = g->d;
    size_t hd = (size_t)H * d, ld = 3 * hd;
    for (size_t k = k0; k < k1; k++) {
        size_t b = k / H, h = k % H;
        const float *q = g->qkv + b * T * ld + h * d;                  /* (T, d), ld */
        head_forward(q, q + hd, q + 2 * hd, (int)ld, g->att + k * T * T,
                     g->y + b * T * hd + h * d, (int)hd, T, d);
    }
}

DTI_NN_WIDE static void attn_backward_heads(void *ctx, size_t k0, size_t k1)
{
    struct attn_args *g = ctx;
    int H = g->H, T = g->T, d = g->d;
    size_t hd = (size_t)H * d, ld = 3 * hd;
    for (size_t k = k0; k < k1; k++) {
        size_t b = k / H, h = k % H, o = b * T * ld + h * d;
        const float *q = g->qkv + o;
        float *dq = g->dqkv + o;
        head_backward(q, q + hd, q + 2 * hd, (int)ld, g->att_in + k * T * T,
                      g->dy + b * T * hd + h * d, (int)hd, g->datt + k * T * T, dq,
                      dq + hd, dq + 2 * hd, T, d);
    }
}

/* The heads on lib/nn's threads, each head's products on one thread of OpenBLAS */
static void attn_run(size_t work, dti_nn_body fn, struct attn_args *g, int B)
{
    int was = dti_nn_threads(work) > 1 ? dti_sgemm_threads(1) : 0;
    dti_nn_parallel((size_t)B * g->H, work, fn, g);
    if (was)
        dti_sgemm_threads(was);
}

void dt_attention_forward(const float *qkv, float *att, float *y, int B, int T, int H,
                          int d)
{
    const void *ptrs[] = { qkv, att, y };
    if (dti_nn_on_gpu("dt_attention_forward", ptrs, 3)) {
        dti_nn_cuda_attention_forward(qkv, att, y, B, T, H, d);
        return;
    }
    struct attn_args g = { .qkv = qkv, .att = att, .y = y, .H = H, .T = T, .d = d };
    attn_run((size_t)B * H * T * (T + 2 * d), attn_forward_heads, &g, B);
}

void dt_attention_backward(const float *qkv, const float *att, const float *dy,
                           float *datt, float *dqkv, int B, int T, int H, int d)
{
    const void *ptrs[] = { qkv, att, dy, datt, dqkv };
    if (dti_nn_on_gpu("dt_attention_backward", ptrs, 5)) {
        dti_nn_cuda_attention_backward(qkv, att, dy, datt, dqkv, B, T, H, d);
        return;
    }
    struct attn_args g = { .qkv = qkv, .att_in = att, .dy = dy, .datt = datt,
                           .dqkv = dqkv, .H = H, .T = T, .d = d };
    attn_run((size_t)B * H * T * (2 * T + 4 * d), attn_backward_heads, &g, B);
}

/* ==== a block ==== */

struct add_args {
    float *dst;
    const float *src;
};

DTI_NN_WIDE static void add_values(void *ctx, size_t i0, size_t i1)
{
    struct add_args *g = ctx;
    for (size_t i = i0; i < i1; i++)
        g->dst[i] += g->src[i];
}

static void add(float *dst, const float *src, size_t n)      /* dst += src */
{
    const void *ptrs[] = { dst, src };
    if (dti_nn_on_gpu("the GPT's residual add", ptrs, 2)) {
        dti_nn_cuda_add(dst, src, n);
        return;
    }
    struct add_args g = { dst, src };
    dti_nn_parallel(n, 2 * n, add_values, &g);
}

dt_gpt_cut dt_gpt_whole(const dt_gpt_config *c, int recompute)
{
    return (dt_gpt_cut){ c->heads, 4 * c->embed, 1, NULL, NULL, recompute, 0, 0, NULL,
                         NULL, 0, NULL, NULL, NULL, 0 };
}

/* ==== sequence parallelism's rows ==== */

void dt_gpt_sp_positions(int T, int n, int r, int *p0, int *p1)
{
    size_t lo, hi;
    dt_chunk_bounds((size_t)T, n, r, &lo, &hi);
    *p0 = (int)lo;
    *p1 = (int)hi;
}

static int sp_on(const dt_gpt_cut *k) { return k->sp > 1; }
static int cp_on(const dt_gpt_cut *k) { return k->cp > 1; }

/* The rows of the residual stream's region this rank holds: B x T, or with sequence
 * parallelism B x its positions */
static size_t region_rows(const dt_gpt_cut *k, int B, int T)
{
    if (!sp_on(k))
        return (size_t)B * T;
    int p0, p1;
    dt_gpt_sp_positions(T, k->sp, k->sp_rank, &p0, &p1);
    return (size_t)B * (p1 - p0);
}

/* This rank's rows of all (B, T, C) into mine (B, p1 - p0, C): with every rank holding
 * the same all, the transpose of a gather */
static void own_rows(const dt_gpt_cut *k, const float *all, float *mine, int B, int T,
                     int C)
{
    int p0, p1;
    dt_gpt_sp_positions(T, k->sp, k->sp_rank, &p0, &p1);
    size_t w = (size_t)(p1 - p0) * C;
    const void *ptrs[] = { all, mine };
    if (dti_nn_on_gpu("the GPT's own rows", ptrs, 2)) {       /* B rows of w floats */
        dti_nn_cuda_copy_rows(mine, w, all + (size_t)p0 * C, (size_t)T * C, w, (size_t)B);
        return;
    }
    for (int b = 0; b < B; b++)
        memcpy(mine + b * w, all + ((size_t)b * T + p0) * C, w * sizeof(float));
}

/* dst = src, n floats: between two device buffers a copy queued on the GPU, else
 * dt_memcpy's (memcpy between two host buffers; across, counted, and waited for) */
static void copy(float *dst, const float *src, size_t n)
{
    if (dt_is_device_ptr(dst) && dt_is_device_ptr(src))
        dti_nn_cuda_copy_rows(dst, n, src, n, n, 1);
    else
        dt_memcpy(dst, src, n * sizeof(float));
}

void dt_gpt_mlp_forward(const dt_gpt_block *p, const float *x, float *h, float *g,
                        float *y, int n, int C, int F, int bias)
{
    dt_linear_forward(x, p->w1, p->b1, h, n, C, F);                     /* (n, F) */
    dt_act_forward(DT_GELU, h, g, (size_t)n * F);
    dt_linear_forward(g, p->w2, bias ? p->b2 : NULL, y, n, F, C);       /* (n, C) */
}

void dt_gpt_mlp_backward(const dt_gpt_block *p, const float *x, const float *h,
                         const float *g, const float *dy, float *dh, float *dx,
                         const dt_gpt_block *gr, int n, int C, int F)
{
    dt_linear_backward(g, p->w2, dy, dh, gr->w2, gr->b2, n, F, C);      /* dg (n, F) */
    dt_act_backward(DT_GELU, h, dh, dh, (size_t)n * F);                 /* dh */
    dt_linear_backward(x, p->w1, dh, dx, gr->w1, gr->b1, n, C, F);      /* dx (n, C) */
}

void dt_gpt_block_attn_forward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                               const dt_gpt_block *p, dt_gpt_block_acts *a, int B, int T)
{
    int C = c->embed, d = head_dim(c), H = cut->heads, hd = H * d, N = B * T;
    int sp = sp_on(cut), n = (int)region_rows(cut, B, T);
    /* x2 = x + attn(ln1(x)): q, k, v of this rank's heads, their attention, and the
     * output projection (partial sums when the heads are cut: g adds them up; with
     * sequence parallelism ln1 and the add on this rank's n rows, an allgather before
     * wqkv, a reduce-scatter after wo) */
    dt_layernorm_forward(a->x, p->ln1_w, p->ln1_b, a->ln1, a->ln1_mean, a->ln1_rstd, n, C);
    const float *in = a->ln1;
    if (sp) {
        cut->gather(a->ln1, a->wide, B, T, C, cut->ctx);
        in = a->wide;
    }
    dt_linear_forward(in, p->wqkv, p->bqkv, a->qkv, N, C, 3 * hd);      /* (N, 3hd) */
    if (cp_on(cut))             /* the ring: the other ranks' keys and values (att: lse) */
        cut->attend(a->qkv, a->y, a->att, B, T, H, d, cut->ctx);
    else
        dt_attention_forward(a->qkv, a->att, a->y, B, T, H, d);         /* (N, hd) */
    dt_linear_forward(a->y, p->wo, cut->bias ? p->bo : NULL, sp ? a->part : a->x2, N, hd,
                      C);
    if (sp)
        cut->scatter(a->part, a->x2, B, T, C, cut->ctx);
    else if (cut->sum)
        cut->sum(a->x2, (size_t)N * C, cut->ctx);
    add(a->x2, a->x, (size_t)n * C);
}

void dt_gpt_block_mlp_forward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                              const dt_gpt_block *p, dt_gpt_block_acts *a, float *out,
                              int B, int T)
{
    int C = c->embed, F = cut->ffn, N = B * T;
    int sp = sp_on(cut), n = (int)region_rows(cut, B, T);
    /* out = x2 + mlp(ln2(x2)): C -> F (this rank's columns), GELU, F -> C */
    dt_layernorm_forward(a->x2, p->ln2_w, p->ln2_b, a->ln2, a->ln2_mean, a->ln2_rstd, n,
                         C);
    if (sp) {
        cut->gather(a->ln2, a->wide, B, T, C, cut->ctx);
        dt_gpt_mlp_forward(p, a->wide, a->h, a->g, a->part, N, C, F, cut->bias);
        cut->scatter(a->part, out, B, T, C, cut->ctx);
    } else {
        dt_gpt_mlp_forward(p, a->ln2, a->h, a->g, out, N, C, F, cut->bias);
        if (cut->sum)
            cut->sum(out, (size_t)N * C, cut->ctx);
    }
    add(out, a->x2, (size_t)n * C);
}

void dt_gpt_block_forward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                          const dt_gpt_block *p, dt_gpt_block_acts *a, float *out,
                          int B, int T)
{
    dt_gpt_block_attn_forward(c, cut, p, a, B, T);
    dt_gpt_block_mlp_forward(c, cut, p, a, out, B, T);
}

/* dx is the residual stream's gradient. Each sub-block is y = x + f(ln(x)), so
 * dx = dy + ln'(f'(dy)): the skip path's gradient stays in dx and LayerNorm's backward
 * adds the other to it. */
void dt_gpt_block_mlp_backward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                               const dt_gpt_block *p, const dt_gpt_block_acts *a,
                               dt_gpt_scratch *s, float *dx, const dt_gpt_block *g, int B,
                               int T)
{
    int C = c->embed, F = cut->ffn, N = B * T;
    int n = (int)region_rows(cut, B, T);
    /* the MLP: w2, GELU, w1, then ln2 (f sums the partial gradients of ln2's output) */
    if (sp_on(cut)) {
        /* the gradient of the output, every rank's rows (the reduce-scatter's
         * transpose); ln2's output gathered again; the partial gradients of ln2's
         * output reduce-scattered (the allgather's transpose) */
        cut->gather(dx, a->part, B, T, C, cut->ctx);
        cut->gather(a->ln2, s->wide, B, T, C, cut->ctx);
        dt_gpt_mlp_backward(p, s->wide, a->h, a->g, a->part, s->dh, s->dln, g, N, C, F);
        cut->scatter(s->dln, s->mine, B, T, C, cut->ctx);
        dt_layernorm_backward(a->x2, p->ln2_w, a->ln2_mean, a->ln2_rstd, s->mine, dx,
                              g->ln2_w, g->ln2_b, n, C);                /* dx2 */
        return;
    }
    dt_gpt_mlp_backward(p, a->ln2, a->h, a->g, dx, s->dh, s->dln, g, N, C, F);
    if (cut->sum)
        cut->sum(s->dln, (size_t)N * C, cut->ctx);
    dt_layernorm_backward(a->x2, p->ln2_w, a->ln2_mean, a->ln2_rstd, s->dln, dx,
                          g->ln2_w, g->ln2_b, N, C);                    /* dx2 */
}

void dt_gpt_block_attn_backward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                                const dt_gpt_block *p, const dt_gpt_block_acts *a,
                                dt_gpt_scratch *s, float *dx, const dt_gpt_block *g, int B,
                                int T)
{
    int C = c->embed, d = head_dim(c), H = cut->heads, hd = H * d, N = B * T;
    /* selective recomputation: the probabilities again, from q and k (and y, the same
     * bits as forward's) */
    if (cut->recompute == DT_GPT_RECOMPUTE_SELECTIVE && !cp_on(cut))
        dt_attention_forward(a->qkv, a->att, a->y, B, T, H, d);
    /* attention: wo, the heads, wqkv, then ln1 (sequence parallelism: as the MLP's) */
    int sp = sp_on(cut), n = (int)region_rows(cut, B, T);
    const float *dout = dx, *in = a->ln1;
    if (sp) {
        cut->gather(dx, a->part, B, T, C, cut->ctx);
        cut->gather(a->ln1, s->wide, B, T, C, cut->ctx);
        dout = a->part;
        in = s->wide;
    }
    dt_linear_backward(a->y, p->wo, dout, s->dy, g->wo, g->bo, N, hd, C);   /* (N, hd) */
    if (cp_on(cut))
        cut->attend_backward(a->qkv, a->y, a->att, s->dy, s->dqkv, B, T, H, d, cut->ctx);
    else
        dt_attention_backward(a->qkv, a->att, s->dy, s->datt, s->dqkv, B, T, H, d);
    dt_linear_backward(in, p->wqkv, s->dqkv, s->dln, g->wqkv, g->bqkv, N, C, 3 * hd);
    float *dln = s->dln;
    if (sp) {
        cut->scatter(s->dln, s->mine, B, T, C, cut->ctx);
        dln = s->mine;
    } else if (cut->sum) {
        cut->sum(s->dln, (size_t)N * C, cut->ctx);
    }
    dt_layernorm_backward(a->x, p->ln1_w, a->ln1_mean, a->ln1_rstd, dln, dx, g->ln1_w,
                          g->ln1_b, n, C);
}

void dt_gpt_block_backward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                           const dt_gpt_block *p, const dt_gpt_block_acts *a,
                           dt_gpt_scratch *s, float *dx, const dt_gpt_block *g, int B,
                           int T)
{
    dt_gpt_block_mlp_backward(c, cut, p, a, s, dx, g, B, T);
    dt_gpt_block_attn_backward(c, cut, p, a, s, dx, g, B, T);
}

/* ==== a block's backward in two (zero bubble, gpt.h) ====
 * B: the halves above with every dt_linear_backward's dW NULL and LayerNorm's rows
 * only, the output gradients each weight's product reads going to the block's own
 * buffers (a->dmlp .. a->in2) rather than to the scratch the blocks share, with the
 * same values. W: the products skipped, in the halves' order, from those. */
static void mlp_input(const dt_gpt_config *c, const dt_gpt_cut *cut,
                      const dt_gpt_block *p, const dt_gpt_block_acts *a,
                      dt_gpt_scratch *s, float *dx, int B, int T)
{
    int C = c->embed, F = cut->ffn, N = B * T;
    int sp = sp_on(cut), n = (int)region_rows(cut, B, T);
    if (sp) {                                   /* as dt_gpt_block_mlp_backward's */
        cut->gather(dx, a->dmlp, B, T, C, cut->ctx);
        cut->gather(a->ln2, a->in2, B, T, C, cut->ctx);
    } else {
        copy(a->dmlp, dx, (size_t)N * C);
    }
    dt_linear_backward(NULL, p->w2, a->dmlp, a->dh, NULL, NULL, N, F, C);     /* dg */
    dt_act_backward(DT_GELU, a->h, a->dh, a->dh, (size_t)N * F);                /* dh */
    float *dln = sp ? s->dln : a->dln2;
    dt_linear_backward(NULL, p->w1, a->dh, dln, NULL, NULL, N, C, F);
    if (sp)
        cut->scatter(s->dln, a->dln2, B, T, C, cut->ctx);
    else if (cut->sum)
        cut->sum(a->dln2, (size_t)N * C, cut->ctx);
    dt_layernorm_backward(a->x2, p->ln2_w, a->ln2_mean, a->ln2_rstd, a->dln2, dx, NULL,
                          NULL, n, C);                                  /* dx2 */
}

static void mlp_weights(const dt_gpt_config *c, const dt_gpt_cut *cut,
                        const dt_gpt_block_acts *a, const dt_gpt_block *g, int B, int T)
{
    int C = c->embed, F = cut->ffn, N = B * T, n = (int)region_rows(cut, B, T);
    dt_linear_backward(a->g, NULL, a->dmlp, NULL, g->w2, g->b2, N, F, C);
    const float *in = sp_on(cut) ? a->in2 : a->ln2;
    dt_linear_backward(in, NULL, a->dh, NULL, g->w1, g->b1, N, C, F);
    dt_layernorm_backward(a->x2, NULL, a->ln2_mean, a->ln2_rstd, a->dln2, NULL, g->ln2_w,
                          g->ln2_b, n, C);
}

static void attn_input(const dt_gpt_config *c, const dt_gpt_cut *cut,
                       const dt_gpt_block *p, const dt_gpt_block_acts *a,
                       dt_gpt_scratch *s, float *dx, int B, int T)
{
    int C = c->embed, d = head_dim(c), H = cut->heads, hd = H * d, N = B * T;
    int sp = sp_on(cut), n = (int)region_rows(cut, B, T);
    if (cut->recompute == DT_GPT_RECOMPUTE_SELECTIVE && !cp_on(cut))
        dt_attention_forward(a->qkv, a->att, a->y, B, T, H, d);
    if (sp) {                                   /* as dt_gpt_block_attn_backward's */
        cut->gather(dx, a->dattn, B, T, C, cut->ctx);
        cut->gather(a->ln1, a->in1, B, T, C, cut->ctx);
    } else {
        copy(a->dattn, dx, (size_t)N * C);
    }
    dt_linear_backward(NULL, p->wo, a->dattn, s->dy, NULL, NULL, N, hd, C);
    if (cp_on(cut))
        cut->attend_backward(a->qkv, a->y, a->att, s->dy, a->dqkv, B, T, H, d, cut->ctx);
    else
        dt_attention_backward(a->qkv, a->att, s->dy, s->datt, a->dqkv, B, T, H, d);
    float *dln = sp ? s->dln : a->dln1;
    dt_linear_backward(NULL, p->wqkv, a->dqkv, dln, NULL, NULL, N, C, 3 * hd);
    if (sp)
        cut->scatter(s->dln, a->dln1, B, T, C, cut->ctx);
    else if (cut->sum)
        cut->sum(a->dln1, (size_t)N * C, cut->ctx);
    dt_layernorm_backward(a->x, p->ln1_w, a->ln1_mean, a->ln1_rstd, a->dln1, dx, NULL,
                          NULL, n, C);
}

static void attn_weights(const dt_gpt_config *c, const dt_gpt_cut *cut,
                         const dt_gpt_block_acts *a, const dt_gpt_block *g, int B, int T)
{
    int C = c->embed, hd = cut->heads * head_dim(c), N = B * T;
    int n = (int)region_rows(cut, B, T);
    dt_linear_backward(a->y, NULL, a->dattn, NULL, g->wo, g->bo, N, hd, C);
    const float *in = sp_on(cut) ? a->in1 : a->ln1;
    dt_linear_backward(in, NULL, a->dqkv, NULL, g->wqkv, g->bqkv, N, C, 3 * hd);
    dt_layernorm_backward(a->x, NULL, a->ln1_mean, a->ln1_rstd, a->dln1, NULL, g->ln1_w,
                          g->ln1_b, n, C);
}

/* ==== the whole model ==== */

static dt_gpt_cut whole_of(const dt_gpt_config *c, const dt_gpt_cut *cut)
{
    return cut ? *cut : dt_gpt_whole(c, DT_GPT_KEEP);
}

size_t dt_gpt_cut_nparams(const dt_gpt_config *c, const dt_gpt_cut *cut)
{
    check_config(c);
    dt_gpt_cut k = whole_of(c, cut);
    return ((size_t)c->vocab + c->seq) * c->embed
           + c->layers * dt_gpt_block_size(c, k.heads, k.ffn) + 2 * (size_t)c->embed;
}



/* ==== a range of units: a pipeline stage ==== */

static int first_block(int u0) { return u0 > 0 ? u0 - 1 : 0; }
static int end_block(const dt_gpt_config *c, int u1) { return u1 - 1 < c->layers ? u1 - 1
                                                                                 : c->layers; }
static int has_final(const dt_gpt_config *c, int u1) { return u1 == c->layers + 2; }

static void check_stage(const dt_gpt_config *c, int u0, int u1)
{
    check_config(c);
    DT_REQUIRE(0 <= u0 && u0 < u1 && u1 <= dt_gpt_units(c), "the GPT's units %d..%d (of "
               "%d)", u0, u1, dt_gpt_units(c));
}

size_t dt_gpt_stage_size(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0, int u1)
{
    check_stage(c, u0, u1);
    dt_gpt_cut k = whole_of(c, cut);
    size_t C = (size_t)c->embed, n = 0;
    if (u0 == 0)
        n += ((size_t)c->vocab + c->seq) * C;
    n += (size_t)(end_block(c, u1) - first_block(u0)) * dt_gpt_block_size(c, k.heads, k.ffn);
    if (has_final(c, u1))
        n += 2 * C + (u0 > 0 ? (size_t)c->vocab * C : 0);        /* lnf, wte's copy */
    return n;
}

/* Where a stage's lnf and the head's weights (wte, or its copy) are in its flat array */
static size_t stage_lnf(const dt_gpt_config *c, const dt_gpt_cut *k, int u0)
{
    return (u0 == 0 ? ((size_t)c->vocab + c->seq) * c->embed : 0)
           + (size_t)(c->layers - first_block(u0)) * dt_gpt_block_size(c, k->heads, k->ffn);
}

static size_t stage_wte(const dt_gpt_config *c, const dt_gpt_cut *k, int u0)
{
    return u0 == 0 ? 0 : stage_lnf(c, k, u0) + 2 * (size_t)c->embed;
}

/* The residual stream entering block l (l = L: leaving the last block): blk[l].x when
 * block l is this stage's, else the stage's own a->out */
static float *stream(const dt_gpt_config *c, dt_gpt_acts *a, int l)
{
    return l < c->layers && a->blk[l].x ? a->blk[l].x : a->out;
}

float *dt_gpt_unit_output(const dt_gpt_config *c, dt_gpt_acts *a, int u)
{
    return u == c->layers + 1 ? a->logits : stream(c, a, u);
}

/* The activations' floats of a stage: per block x, ln1, x2, ln2 (n, C), four (n) means
 * and rstds, qkv (N, 3hd), y (N, hd), h and g (N, F), att (B, heads, T, T); out
 * (n, C); with the final unit lnf (N, C), its mean and rstd (n), logits (N, V). The
 * scratch: dres (n, C), dln (N, C), and with blocks dy (N, hd), dqkv (N, 3hd), dh
 * (N, F), datt (B, heads, T, T); sequence parallelism's wide (N, C) and mine (n, C),
 * and with blocks their part (N, C). n = N but with sequence parallelism (this rank's
 * rows); hd and F: the cut's. Recomputed, what a block keeps is its x alone (full) or
 * all but att (selective), and one block's worth of the rest is shared by the
 * blocks. Split (zero bubble's W), each block keeps too dmlp and dattn (N, C), dh
 * (N, F), dqkv (N, 3hd), dln1 and dln2 (n, C), with sp in1 and in2 (N, C); the final
 * unit dlogits (N, V) and dlnf (n, C); unit 0 with sp demb (N, C). */
size_t dt_gpt_stage_acts_floats(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                int u1, int B, int T, size_t *scratch)
{
    check_stage(c, u0, u1);
    dt_gpt_cut k = whole_of(c, cut);
    size_t N = (size_t)B * T, n = region_rows(&k, B, T), C = (size_t)c->embed;
    size_t F = (size_t)k.ffn, hd = (size_t)k.heads * head_dim(c);
    size_t att = (size_t)B * k.heads * T * (cp_on(&k) ? 1 : T);  /* cp: lse */
    size_t blocks = (size_t)(end_block(c, u1) - first_block(u0));
    size_t block = n * (4 * C + 4) + N * (4 * hd + 2 * F) + att, kept = block, shared = 0;
    if (k.recompute == DT_GPT_RECOMPUTE_FULL)
        kept = n * C, shared = block - n * C;
    else if (k.recompute == DT_GPT_RECOMPUTE_SELECTIVE)
        kept = block - att, shared = att;
    size_t s = (n + N) * C + (blocks ? N * (4 * hd + F) + att : 0);
    if (sp_on(&k))
        s += (N + n) * C + (blocks ? N * C : 0);
    size_t split = 0, wide = sp_on(&k) ? N * C : 0;   /* what W reads */
    if (k.split)
        split = blocks * (N * (2 * C + F + 3 * hd) + 2 * n * C + 2 * wide)
                + (has_final(c, u1) ? N * c->vocab + n * C : 0) + (u0 == 0 ? wide : 0);
    if (scratch)
        *scratch = s;
    return blocks * kept + (blocks ? shared : 0) + n * C
           + (has_final(c, u1) ? N * (C + (size_t)c->vocab) + 2 * n : 0) + split + s;
}

size_t dt_gpt_acts_floats(const dt_gpt_config *c, const dt_gpt_cut *cut, int B, int T,
                          size_t *scratch)
{
    return dt_gpt_stage_acts_floats(c, cut, 0, dt_gpt_units(c), B, T, scratch);
}

void dt_gpt_stage_acts_alloc_on(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                int u1, int B, int T, int on_device, dt_gpt_acts *a)
{
    check_stage(c, u0, u1);
    DT_REQUIRE(B >= 1 && T >= 1 && T <= c->seq, "dt_gpt_acts_alloc: %d sequences of %d "
               "(1 or more, of at most %d)", B, T, c->seq);
    dt_gpt_cut k = whole_of(c, cut);
    DT_REQUIRE(!cp_on(&k) || k.recompute != DT_GPT_RECOMPUTE_SELECTIVE, "the GPT's "
               "activations: selective recomputation with context parallelism (ring "
               "attention keeps no probabilities to recompute)");
    DT_REQUIRE(!k.split || k.recompute != DT_GPT_RECOMPUTE_FULL, "the GPT's activations: "
               "a split backward with full recomputation (W needs every block's "
               "activations, which full recomputation keeps one block at a time)");
    memset(a, 0, sizeof *a);
    a->B = B;
    a->T = T;
    a->u0 = u0;
    a->u1 = u1;
    a->split = k.split;
    a->floats = dt_gpt_stage_acts_floats(c, &k, u0, u1, B, T, NULL);
    a->on_device = on_device;
    if (on_device) {                  /* zeroed, as calloc's (queued on the GPU) */
        a->mem = dt_malloc(a->floats * sizeof(float), DT_CUDA);
        dt_memzero(a->mem, a->floats * sizeof(float));
    } else {
        a->mem = calloc(a->floats, sizeof(float));
    }
    a->blk = calloc((size_t)c->layers, sizeof *a->blk);
    DT_REQUIRE(a->mem && a->blk, "out of host memory for the GPT's activations");
    size_t N = (size_t)B * T, n = region_rows(&k, B, T), C = (size_t)c->embed;
    size_t F = (size_t)k.ffn, hd = (size_t)k.heads * head_dim(c);
    size_t att = (size_t)B * k.heads * T * (cp_on(&k) ? 1 : T);  /* cp: lse */
    int b0 = first_block(u0), b1 = end_block(c, u1);
    float *q = a->mem;
#define TAKE(ptr, n) do { (ptr) = q; q += (n); } while (0)
    /* each block's own, then (recomputed) what the blocks share: the first block's
     * pointers, copied to the others (sequence parallelism: n rows in the stream's
     * region, N elsewhere) */
    int full = k.recompute == DT_GPT_RECOMPUTE_FULL;
    int sel = k.recompute == DT_GPT_RECOMPUTE_SELECTIVE;
    for (int l = b0; l < b1; l++) {
        dt_gpt_block_acts *b = &a->blk[l];
        TAKE(b->x, n * C);
        if (full)
            continue;
        TAKE(b->ln1, n * C);
        TAKE(b->ln1_mean, n);
        TAKE(b->ln1_rstd, n);
        TAKE(b->qkv, N * 3 * hd);
        if (!sel)
            TAKE(b->att, att);
        TAKE(b->y, N * hd);
        TAKE(b->x2, n * C);
        TAKE(b->ln2, n * C);
        TAKE(b->ln2_mean, n);
        TAKE(b->ln2_rstd, n);
        TAKE(b->h, N * F);
        TAKE(b->g, N * F);
        if (!k.split)
            continue;
        TAKE(b->dmlp, N * C);
        TAKE(b->dattn, N * C);
        TAKE(b->dh, N * F);
        TAKE(b->dqkv, N * 3 * hd);
        TAKE(b->dln1, n * C);
        TAKE(b->dln2, n * C);
        if (sp_on(&k)) {
            TAKE(b->in1, N * C);
            TAKE(b->in2, N * C);
        }
    }
    if (b1 > b0 && (full || sel)) {
        dt_gpt_block_acts w = a->blk[b0];
        if (full) {
            TAKE(w.ln1, n * C);
            TAKE(w.ln1_mean, n);
            TAKE(w.ln1_rstd, n);
            TAKE(w.qkv, N * 3 * hd);
            TAKE(w.y, N * hd);
            TAKE(w.x2, n * C);
            TAKE(w.ln2, n * C);
            TAKE(w.ln2_mean, n);
            TAKE(w.ln2_rstd, n);
            TAKE(w.h, N * F);
            TAKE(w.g, N * F);
        }
        TAKE(w.att, att);
        for (int l = b0; l < b1; l++) {
            float *x = a->blk[l].x;
            if (full)
                a->blk[l] = w;
            a->blk[l].x = x;
            a->blk[l].att = w.att;
        }
    }
    TAKE(a->out, n * C);
    if (has_final(c, u1)) {
        TAKE(a->lnf, N * C);
        TAKE(a->lnf_mean, n);
        TAKE(a->lnf_rstd, n);
        TAKE(a->logits, N * c->vocab);
        if (k.split) {
            TAKE(a->dlogits, N * c->vocab);
            TAKE(a->dlnf, n * C);
        }
    }
    if (k.split && u0 == 0 && sp_on(&k))
        TAKE(a->demb, N * C);
    TAKE(a->dres, n * C);
    TAKE(a->s.dln, N * C);
    if (b1 > b0) {
        TAKE(a->s.dy, N * hd);
        TAKE(a->s.dqkv, N * 3 * hd);
        TAKE(a->s.dh, N * F);
        TAKE(a->s.datt, att);
    }
    if (sp_on(&k)) {                  /* sequence parallelism's scratch */
        TAKE(a->s.wide, N * C);
        TAKE(a->s.mine, n * C);
        float *part = NULL;
        if (b1 > b0)
            TAKE(part, N * C);
        for (int l = b0; l < b1; l++) {
            a->blk[l].wide = a->s.wide;
            a->blk[l].part = part;
        }
    }
#undef TAKE
    DT_REQUIRE((size_t)(q - a->mem) == a->floats, "the GPT's activations: %zu floats "
               "taken of %zu", (size_t)(q - a->mem), a->floats);
}

void dt_gpt_stage_acts_alloc(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                             int u1, int B, int T, dt_gpt_acts *a)
{
    dt_gpt_stage_acts_alloc_on(c, cut, u0, u1, B, T, 0, a);
}

void dt_gpt_acts_alloc_on(const dt_gpt_config *c, const dt_gpt_cut *cut, int B, int T,
                          int on_device, dt_gpt_acts *a)
{
    dt_gpt_stage_acts_alloc_on(c, cut, 0, dt_gpt_units(c), B, T, on_device, a);
}

void dt_gpt_acts_alloc(const dt_gpt_config *c, const dt_gpt_cut *cut, int B, int T,
                       dt_gpt_acts *a)
{
    dt_gpt_acts_alloc_on(c, cut, B, T, 0, a);
}

void dt_gpt_acts_free(dt_gpt_acts *a)
{
    if (a == NULL)
        return;
    if (a->on_device)
        dt_free(a->mem);
    else
        free(a->mem);
    free(a->blk);
    memset(a, 0, sizeof *a);
}

static void check_run(const char *fn, const dt_gpt_config *c, const dt_gpt_acts *a,
                      int u0, int u1, int B, int T)
{
    check_config(c);
    DT_REQUIRE(B >= 1 && B <= a->B && T >= 1 && T <= a->T && T <= c->seq, "%s: %d "
               "sequences of %d tokens, activations for %d of %d (model: at most %d)",
               fn, B, T, a->B, a->T, c->seq);
    DT_REQUIRE(u0 == a->u0 && u1 == a->u1, "%s: units %d..%d, activations for %d..%d",
               fn, u0, u1, a->u0, a->u1);
}

/* ==== one unit ==== */

const char *dt_gpt_part_name(int part)
{
    return part == DT_GPT_ATTN ? "attn" : part == DT_GPT_MLP ? "mlp"
         : part == DT_GPT_RECOMPUTE ? "recompute" : NULL;
}

void dt_gpt_unit_forward(const dt_gpt_config *c, const dt_gpt_cut *cut, int u,
                         const float *pu, const float *wte, const int *tok,
                         dt_gpt_acts *a, int B, int T, dt_gpt_part_fn done, void *ctx)
{
    dt_gpt_cut k = whole_of(c, cut);
    int C = c->embed, V = c->vocab, N = B * T, L = c->layers;
    DT_REQUIRE(u >= 0 && u <= L + 1, "dt_gpt_unit_forward: unit %d of %d", u, L + 2);
    if (u == 0) {                                  /* the embeddings: wte, then wpe */
        DT_REQUIRE(tok != NULL, "dt_gpt_forward: the embeddings need the tokens");
        if (sp_on(&k)) {                           /* all rows, this rank's kept */
            dt_embed_forward(tok, pu, pu + (size_t)V * C, NULL, a->s.wide, B, T, C, V);
            own_rows(&k, a->s.wide, stream(c, a, 0), B, T, C);
        } else {
            dt_embed_forward(tok, pu, pu + (size_t)V * C, cp_on(&k) ? k.pos : NULL,
                             stream(c, a, 0), B, T, C, V);
        }
    } else if (u <= L) {                           /* block u - 1 */
        dt_gpt_block p;
        dt_gpt_block_at(c, k.heads, k.ffn, (float *)pu, &p);
        dt_gpt_block_attn_forward(c, &k, &p, &a->blk[u - 1], B, T);
        if (done)
            done(u, DT_GPT_ATTN, ctx);
        dt_gpt_block_mlp_forward(c, &k, &p, &a->blk[u - 1], stream(c, a, u), B, T);
        if (done)
            done(u, DT_GPT_MLP, ctx);
        return;
    } else if (sp_on(&k)) {                        /* lnf on this rank's rows, */
        dt_layernorm_forward(a->out, pu, pu + C, a->s.mine, a->lnf_mean, a->lnf_rstd,
                             (int)region_rows(&k, B, T), C);
        k.gather(a->s.mine, a->lnf, B, T, C, k.ctx);   /* gathered for the head */
        dt_linear_forward(a->lnf, wte, NULL, a->logits, N, C, V);
    } else {                                       /* lnf, and the head: wte^T */
        dt_layernorm_forward(a->out, pu, pu + C, a->lnf, a->lnf_mean, a->lnf_rstd, N, C);
        dt_linear_forward(a->lnf, wte, NULL, a->logits, N, C, V);
    }
    if (done)
        done(u, DT_GPT_UNIT, ctx);
}

void dt_gpt_unit_backward(const dt_gpt_config *c, const dt_gpt_cut *cut, int u,
                          const float *pu, const float *wte, dt_gpt_acts *a,
                          const float *dlogits, const int *tok, float *gu, float *dwte,
                          int B, int T, dt_gpt_part_fn done, void *ctx)
{
    dt_gpt_cut k = whole_of(c, cut);
    int C = c->embed, V = c->vocab, N = B * T, L = c->layers;
    DT_REQUIRE(u >= 0 && u <= L + 1, "dt_gpt_unit_backward: unit %d of %d", u, L + 2);
    int n = (int)region_rows(&k, B, T);
    if (u == L + 1) {              /* the head (into wte's gradient), then lnf */
        dt_linear_backward(a->lnf, wte, dlogits, a->s.dln, dwte, NULL, N, C, V);
        float *dln = a->s.dln;
        if (sp_on(&k)) {           /* every rank has the same dln: its own rows */
            own_rows(&k, a->s.dln, a->s.mine, B, T, C);
            dln = a->s.mine;
        }
        dt_memzero(a->dres, (size_t)n * C * sizeof(float));
        dt_layernorm_backward(a->out, pu, a->lnf_mean, a->lnf_rstd, dln, a->dres, gu,
                              gu + C, n, C);
    } else if (u >= 1) {
        dt_gpt_block p, g;
        dt_gpt_block_at(c, k.heads, k.ffn, (float *)pu, &p);
        dt_gpt_block_at(c, k.heads, k.ffn, gu, &g);
        /* full recomputation: the block's forward again, into the buffers it shares
         * (its output, the next block's input, is written again with the same bits) */
        if (k.recompute == DT_GPT_RECOMPUTE_FULL) {
            dt_gpt_block_forward(c, &k, &p, &a->blk[u - 1], stream(c, a, u), B, T);
            if (done)
                done(u, DT_GPT_RECOMPUTE, ctx);
        }
        dt_gpt_block_mlp_backward(c, &k, &p, &a->blk[u - 1], &a->s, a->dres, &g, B, T);
        if (done)
            done(u, DT_GPT_MLP, ctx);
        dt_gpt_block_attn_backward(c, &k, &p, &a->blk[u - 1], &a->s, a->dres, &g, B, T);
        if (done)
            done(u, DT_GPT_ATTN, ctx);
        return;
    } else if (sp_on(&k)) {        /* the stream's gradient, every rank's rows */
        k.gather(a->dres, a->s.wide, B, T, C, k.ctx);
        dt_embed_backward(tok, a->s.wide, NULL, gu, gu + (size_t)V * C, B, T, C);
    } else {
        dt_embed_backward(tok, a->dres, cp_on(&k) ? k.pos : NULL, gu, gu + (size_t)V * C, B,
                          T, C);
    }
    if (done)
        done(u, DT_GPT_UNIT, ctx);
}

/* ==== a stage: its units one after another ==== */

/* Where unit u starts in a stage's flat array (the head's wte: stage_wte) */
static size_t stage_unit(const dt_gpt_config *c, const dt_gpt_cut *k, int u0, int u)
{
    size_t off = u0 == 0 && u > 0 ? ((size_t)c->vocab + c->seq) * c->embed : 0;
    int blocks = (u < c->layers + 1 ? u : c->layers + 1) - 1 - first_block(u0);
    return off + (blocks > 0 ? (size_t)blocks * dt_gpt_block_size(c, k->heads, k->ffn)
                             : 0);
}

const float *dt_gpt_forward_stage(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                  int u1, const float *params, const int *tok,
                                  const float *x_in, int B, int T, dt_gpt_acts *a,
                                  dt_gpt_part_fn done, void *ctx)
{
    check_stage(c, u0, u1);
    check_run("dt_gpt_forward", c, a, u0, u1, B, T);
    dt_gpt_cut k = whole_of(c, cut);
    if (u0 > 0) {                                /* the stream from the stage before */
        DT_REQUIRE(x_in != NULL, "dt_gpt_forward: a later stage needs its input");
        copy(stream(c, a, u0 - 1), x_in, region_rows(&k, B, T) * c->embed);
    }
    const float *wte = params + stage_wte(c, &k, u0);
    for (int u = u0; u < u1; u++) {
        dt_gpt_unit_forward(c, &k, u, params + stage_unit(c, &k, u0, u), wte, tok, a, B, T,
                            done, ctx);
    }
    return has_final(c, u1) ? a->logits : stream(c, a, u1 - 1);
}

void dt_gpt_backward_stage(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0, int u1,
                           const float *params, dt_gpt_acts *a, const float *dy,
                           const int *tok, float *dx, int B, int T, float *grads,
                           dt_gpt_part_fn done, void *ctx)
{
    check_stage(c, u0, u1);
    check_run("dt_gpt_backward", c, a, u0, u1, B, T);
    dt_gpt_cut k = whole_of(c, cut);
    size_t N = region_rows(&k, B, T), w = stage_wte(c, &k, u0);
    if (!has_final(c, u1))             /* the gradient of the stream this stage sent */
        copy(a->dres, dy, N * c->embed);
    for (int u = u1 - 1; u >= u0; u--) {
        size_t o = stage_unit(c, &k, u0, u);
        dt_gpt_unit_backward(c, &k, u, params + o, params + w, a, dy, tok, grads + o,
                             grads + w, B, T, done, ctx);
    }
    if (u0 > 0 && dx)                  /* the gradient of the stream this stage got */
        copy(dx, a->dres, N * c->embed);
}

/* ==== a stage's backward in two (zero bubble) ==== */

/* Unit u's B: dt_gpt_unit_backward's work on the stream's gradient, the weights' left
 * to unit_weights (the head's dlogits and lnf's dy kept; unit 0's dy stays in a->dres,
 * or with sp is gathered into a->demb, as the fused backward gathers it) */
static void unit_input(const dt_gpt_config *c, const dt_gpt_cut *k, int u,
                       const float *pu, const float *wte, dt_gpt_acts *a,
                       const float *dlogits, int B, int T, dt_gpt_part_fn done, void *ctx)
{
    int C = c->embed, V = c->vocab, N = B * T, L = c->layers;
    int n = (int)region_rows(k, B, T);
    if (u == L + 1) {              /* the head's dx, then lnf's */
        float *dln = sp_on(k) ? a->s.dln : a->dlnf;
        copy(a->dlogits, dlogits, (size_t)N * V);
        dt_linear_backward(NULL, wte, dlogits, dln, NULL, NULL, N, C, V);
        if (sp_on(k))
            own_rows(k, a->s.dln, a->dlnf, B, T, C);
        dt_memzero(a->dres, (size_t)n * C * sizeof(float));
        dt_layernorm_backward(a->out, pu, a->lnf_mean, a->lnf_rstd, a->dlnf, a->dres,
                              NULL, NULL, n, C);
    } else if (u >= 1) {
        dt_gpt_block p;
        dt_gpt_block_at(c, k->heads, k->ffn, (float *)pu, &p);
        mlp_input(c, k, &p, &a->blk[u - 1], &a->s, a->dres, B, T);
        if (done)
            done(u, DT_GPT_MLP, ctx);
        attn_input(c, k, &p, &a->blk[u - 1], &a->s, a->dres, B, T);
        if (done)
            done(u, DT_GPT_ATTN, ctx);
        return;
    } else if (sp_on(k)) {         /* the stream's gradient, every rank's rows */
        k->gather(a->dres, a->demb, B, T, C, k->ctx);
    }
    if (done)
        done(u, DT_GPT_UNIT, ctx);
}

/* Unit u's W: the products unit_input skipped, in dt_gpt_unit_backward's order */
static void unit_weights(const dt_gpt_config *c, const dt_gpt_cut *k, int u,
                         dt_gpt_acts *a, const int *tok, float *gu, float *dwte, int B,
                         int T, dt_gpt_part_fn done, void *ctx)
{
    int C = c->embed, V = c->vocab, N = B * T, L = c->layers;
    if (u == L + 1) {
        dt_linear_backward(a->lnf, NULL, a->dlogits, NULL, dwte, NULL, N, C, V);
        dt_layernorm_backward(a->out, NULL, a->lnf_mean, a->lnf_rstd, a->dlnf, NULL, gu,
                              gu + C, (int)region_rows(k, B, T), C);
    } else if (u >= 1) {
        dt_gpt_block g;
        dt_gpt_block_at(c, k->heads, k->ffn, gu, &g);
        mlp_weights(c, k, &a->blk[u - 1], &g, B, T);
        if (done)
            done(u, DT_GPT_MLP, ctx);
        attn_weights(c, k, &a->blk[u - 1], &g, B, T);
        if (done)
            done(u, DT_GPT_ATTN, ctx);
        return;
    } else {
        DT_REQUIRE(tok != NULL, "dt_gpt_backward_stage_weights: the embeddings need the "
                   "tokens");
        dt_embed_backward(tok, sp_on(k) ? a->demb : a->dres, cp_on(k) ? k->pos : NULL, gu,
                          gu + (size_t)V * C, B, T, C);
    }
    if (done)
        done(u, DT_GPT_UNIT, ctx);
}

static void check_split(const char *fn, const dt_gpt_config *c, const dt_gpt_cut *k,
                        const dt_gpt_acts *a, int u0, int u1, int B, int T)
{
    check_stage(c, u0, u1);
    check_run(fn, c, a, u0, u1, B, T);
    DT_REQUIRE(k->split && a->split, "%s: the activations keep what W needs only when "
               "allocated with a cut whose split is 1 (and the calls get that cut)", fn);
}

void dt_gpt_backward_stage_input(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                 int u1, const float *params, dt_gpt_acts *a,
                                 const float *dy, float *dx, int B, int T,
                                 dt_gpt_part_fn done, void *ctx)
{
    dt_gpt_cut k = whole_of(c, cut);
    check_split("dt_gpt_backward_stage_input", c, &k, a, u0, u1, B, T);
    size_t N = region_rows(&k, B, T), w = stage_wte(c, &k, u0);
    if (!has_final(c, u1))             /* the gradient of the stream this stage sent */
        copy(a->dres, dy, N * c->embed);
    for (int u = u1 - 1; u >= u0; u--)
        unit_input(c, &k, u, params + stage_unit(c, &k, u0, u), params + w, a, dy, B, T,
                   done, ctx);
    if (u0 > 0 && dx)                  /* the gradient of the stream this stage got */
        copy(dx, a->dres, N * c->embed);
}

void dt_gpt_backward_stage_weights(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                   int u1, dt_gpt_acts *a, const int *tok, int B, int T,
                                   float *grads, dt_gpt_part_fn done, void *ctx)
{
    dt_gpt_cut k = whole_of(c, cut);
    check_split("dt_gpt_backward_stage_weights", c, &k, a, u0, u1, B, T);
    size_t w = stage_wte(c, &k, u0);
    for (int u = u1 - 1; u >= u0; u--) {
        size_t o = stage_unit(c, &k, u0, u);
        unit_weights(c, &k, u, a, tok, grads + o, grads + w, B, T, done, ctx);
    }
}

const float *dt_gpt_forward_cut(const dt_gpt_config *c, const dt_gpt_cut *cut,
                                const float *params, const int *tok, int B, int T,
                                dt_gpt_acts *a, dt_gpt_part_fn done, void *ctx)
{
    return dt_gpt_forward_stage(c, cut, 0, dt_gpt_units(c), params, tok, NULL, B, T, a,
                                done, ctx);
}

void dt_gpt_backward_cut(const dt_gpt_config *c, const dt_gpt_cut *cut,
                         const float *params, dt_gpt_acts *a, const float *dlogits,
                         const int *tok, int B, int T, float *grads,
                         dt_gpt_part_fn done, void *ctx)
{
    dt_gpt_backward_stage(c, cut, 0, dt_gpt_units(c), params, a, dlogits, tok, NULL, B, T,
                          grads, done, ctx);
}

const float *dt_gpt_forward(const dt_gpt_config *c, const float *params, const int *tok,
                            int B, int T, dt_gpt_acts *a)
{
    return dt_gpt_forward_cut(c, NULL, params, tok, B, T, a, NULL, NULL);
}

void dt_gpt_backward(const dt_gpt_config *c, const float *params, dt_gpt_acts *a,
                     const float *dlogits, const int *tok, int B, int T, float *grads,
                     dt_gpt_part_fn done, void *ctx)
{
    dt_gpt_backward_cut(c, NULL, params, a, dlogits, tok, B, T, grads, done, ctx);
}

/* ==== sampling ==== */

void dt_gpt_sample(const dt_gpt_config *c, const float *params, const int *prompt,
                   int len, int n, float temperature, unsigned long long seed, int *out)
{
    check_config(c);
    DT_REQUIRE(len >= 1 && n >= 0, "dt_gpt_sample: a prompt of %d tokens (1 or more)", len);
    DT_REQUIRE(!dt_is_device_ptr(params), "dt_gpt_sample reads the logits on the host: "
               "pass it a host copy of the weights");
    int S = c->seq, V = c->vocab;
    int *ctx = malloc(((size_t)len + n) * sizeof *ctx);
    float *p = malloc((size_t)V * sizeof *p);
    DT_REQUIRE(ctx && p, "out of host memory");
    memcpy(ctx, prompt, (size_t)len * sizeof *ctx);
    dt_gpt_acts a;
    dt_gpt_acts_alloc(c, NULL, 1, S, &a);
    uint64_t rs = (uint64_t)seed * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < n; i++) {
        int have = len + i, T = have < S ? have : S;
        const float *logits = dt_gpt_forward(c, params, ctx + have - T, 1, T, &a);
        const float *last = logits + (size_t)(T - 1) * V;               /* (V) */
        int pick = 0;
        for (int v = 1; v < V; v++)
            pick = last[v] > last[pick] ? v : pick;
        if (temperature > 0.0f) {           /* draw from softmax(last / temperature) */
            double sum = 0.0, u;
            for (int v = 0; v < V; v++)
                sum += p[v] = expf((last[v] - last[pick]) / temperature);
            u = dti_nn_uniform(&rs) * sum;
            for (pick = 0; pick < V - 1 && (u -= p[pick]) > 0.0; pick++)
                ;
        }
        ctx[have] = out[i] = pick;
    }
    dt_gpt_acts_free(&a);
    free(ctx);
    free(p);
}
