/* This rank's part of the GPT (lib/nn/gpt.h), behind dti_model, so that the modes
 * written against dti_model (serial, ddp, tp, dp) train it as they train the MLP.
 *
 * Units, as gpt.h numbers them: 0 the embeddings, 1 + l block l, L + 1 the final
 * LayerNorm (and the head, tied to the embeddings). DDP buckets them in backward's
 * order (L + 1 first, 0 last); the trace records a compute event per unit.
 *
 * Tensor parallelism, Megatron's way, over T ranks: rank t owns heads [h0, h1) of
 * every block whole (their rows of q, k and v in wqkv, their columns of wo) and
 * columns [f0, f1) of the MLP (rows of w1, columns of w2); the embeddings, the head
 * and the LayerNorms are on every rank, and every rank computes the same gradient for
 * them. In each block forward sums the partial outputs of wo and of w2 over the group
 * (g, an allreduce), and backward the partial gradients of ln1's and ln2's outputs (f):
 * two allreduces each way per block, of (B, T, C) floats.
 *
 *   heads 0..5 over T = 2:   rank 0: heads 0 1 2    rank 1: heads 3 4 5
 *   wqkv rows  (3C, C):      q rows of my heads | k rows of my heads | v rows of mine
 *
 * Pipeline stages take whole units. The head is tied to the embedding (wte), so a last
 * stage without unit 0 holds a copy of wte after lnf, and after each backward the
 * first and the last stage sum the two copies' gradients (dti_model_shared_sums), as
 * Megatron-LM does: the copies start equal and take equal updates, so they stay one
 * weight, and the sum is the gradient serial training gives it.
 *
 * fp16 (mixed.c's helpers): the weights and gradients are fp16; forward widens the
 * stage's weights to floats (m->wf) and backward computes the gradients in floats (m->gf),
 * adding each unit's to its fp16 sums as the unit is done; the residual stream between
 * units, the logits and the stream's gradient are rounded to fp16 as they would be
 * stored (the activations inside a block stay floats: a simplification the MLP's model.c
 * does not make).
 *
 * Where the run lives (r->where): on the host, or on this rank's GPU, where everything
 * of a step is, the weights, their gradients, the activations (gpt.h's _on), the
 * tokens and the labels; the tokens come as floats in the batch, on the host, and go up
 * as ints with it (dti_gpt_tokens). Context parallelism's ring attention (cp.c,
 * lib/nn/ringattn.c) is the host's alone: run.c refuses --cp on the GPU. */
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "parallel_internal.h"
#include "trace.h"

/* ==== the cut and the layout ==== */

/* The sum inside a block: "g" in forward, "f" in backward */
static void tp_sum(float *x, size_t n, void *ctx)
{
    dti_model *m = ctx;
    int u, forward;
    double t0 = dti_gpt_comm_begin(m, &u, &forward);
    dti_tp_allreduce(m, x, n);
    dti_gpt_comm_end(m, "tp", forward ? "g" : "f", u, n * dti_work_size(m->run), t0);
}

/* ==== sequence parallelism's collectives (gpt.h's gather and scatter) ====
 * Tensor-parallel rank k holds positions [p0_k, p1_k) of every sequence
 * (dt_gpt_sp_positions). The collectives move equal blocks, so a rank's rows travel in
 * a block of B x most x C (most: the most positions a rank holds), zeros after its
 * own; in fp16 as fp16, half the bytes (as dti_tp_allreduce's sums). m->sp_buf holds
 * T + 1 blocks of floats, m->sp_wire their fp16. Traced as tp marks "ag" (allgather)
 * and "rs" (reduce-scatter). */

static int sp_most(const dti_model *m)
{
    return (m->g->seq + m->T - 1) / m->T;
}

/* Between rank k's rows of all (B, T, C), or its own rows mine (B, p1 - p0, C), and a
 * block (B, most, C): to_block 1 packs (zeros after a sequence's rows), 0 unpacks. One
 * 2-D copy of B rows of (p1 - p0) C floats, host or device (dti_copy_block). */
static void sp_block(const dti_model *m, int k, float *rows, int whole, float *block,
                     int B, int T, int C, int to_block)
{
    int p0, p1, most = sp_most(m);
    dt_gpt_sp_positions(T, m->T, k, &p0, &p1);
    size_t w = (size_t)(p1 - p0) * C, ld = (size_t)most * C;
    float *r = whole ? rows + (size_t)p0 * C : rows;
    size_t rld = whole ? (size_t)T * C : w;
    if (to_block && w < ld)           /* the padding: the whole block, then the rows */
        dt_memzero(block, (size_t)B * ld * sizeof(float));
    if (to_block)
        dti_copy_block(block, ld, r, rld, B, (int)w, sizeof(float));
    else
        dti_copy_block(r, rld, block, ld, B, (int)w, sizeof(float));
}

static void sp_gather(const float *mine, float *all, int B, int T, int C, void *ctx)
{
    dti_model *m = ctx;
    int u, forward, fp32 = m->type == MPI_FLOAT;
    size_t block = (size_t)B * sp_most(m) * C, es = dti_work_size(m->run);
    double t0 = dti_gpt_comm_begin(m, &u, &forward);
    float *send = m->sp_buf, *recv = send + block;
    sp_block(m, m->t, (float *)mine, 0, send, B, T, C, 1);
    if (fp32) {
        dt_allgather(send, (int)block, MPI_FLOAT, recv, (int)block, MPI_FLOAT, m->tp);
    } else {
        char *ws = m->sp_wire, *wr = ws + block * es;
        dti_from_float(send, ws, m->type, block);
        dt_allgather(ws, (int)block, m->type, wr, (int)block, m->type, m->tp);
        dti_to_float(wr, m->type, recv, block * m->T, 1.0f);
    }
    for (int k = 0; k < m->T; k++)
        sp_block(m, k, all, 1, recv + k * block, B, T, C, 0);
    dti_gpt_comm_end(m, "tp", "ag", u, block * m->T * es, t0);
}

static void sp_scatter(const float *all, float *mine, int B, int T, int C, void *ctx)
{
    dti_model *m = ctx;
    int u, forward, fp32 = m->type == MPI_FLOAT;
    size_t block = (size_t)B * sp_most(m) * C, es = dti_work_size(m->run);
    double t0 = dti_gpt_comm_begin(m, &u, &forward);
    float *send = m->sp_buf, *recv = send + block * m->T;
    for (int k = 0; k < m->T; k++)
        sp_block(m, k, (float *)all, 1, send + k * block, B, T, C, 1);
    if (fp32) {
        dt_reduce_scatter_block(send, recv, (int)block, MPI_FLOAT, MPI_SUM, m->tp);
    } else {
        char *ws = m->sp_wire, *wr = ws + block * m->T * es;
        dti_from_float(send, ws, m->type, block * m->T);
        dt_reduce_scatter_block(ws, wr, (int)block, m->type, MPI_SUM, m->tp);
        dti_to_float(wr, m->type, recv, block, 1.0f);
    }
    sp_block(m, m->t, mine, 0, recv, B, T, C, 0);
    dti_gpt_comm_end(m, "tp", "rs", u, block * m->T * es, t0);
}

int dti_gpt_model_rows(const dti_model *m)
{
    if (m->cp)
        return m->lpe;
    if (!m->cut.sp)
        return m->g->seq;
    int p0, p1;
    dt_gpt_sp_positions(m->g->seq, m->T, m->t, &p0, &p1);
    return p1 - p0;
}

void dti_gpt_model_init(dti_model *m, dti_run *r, int l0, int l1, MPI_Comm tp, int Bmax)
{
    const dt_gpt_config *g = &r->cfg->gpt;
    int units = dt_gpt_units(g);
    memset(m, 0, sizeof *m);
    m->g = g;
    m->run = r;
    m->l0 = l0;
    m->l1 = l1;
    m->nl = l1 - l0;
    m->tp = tp;
    m->tie = MPI_COMM_NULL;
    MPI_Comm_size(tp, &m->T);
    MPI_Comm_rank(tp, &m->t);
    m->Bmax = Bmax;
    m->lpe = g->seq;
    m->classes = g->vocab;
    m->type = dti_work_type(r);
    DT_REQUIRE(g->heads % m->T == 0, "%d heads cannot be shared by %d tensor-parallel "
               "ranks", g->heads, m->T);
    int sp = r->cfg->sp && m->T > 1;
    /* zero bubble's pipeline: the activations keep what W reads (gpt.h) */
    int pipe = r->cfg->mode == DT_MODE_PP || r->cfg->mode == DT_MODE_HYBRID;
    int split = pipe && r->cfg->schedule == DT_PP_ZBH1;
    m->cut = (dt_gpt_cut){ g->heads / m->T, 4 * g->embed / m->T, m->t == 0,
                           m->T > 1 ? tp_sum : NULL, m, r->cfg->recompute, sp ? m->T : 0,
                           m->t, sp ? sp_gather : NULL, sp ? sp_scatter : NULL, 0, NULL,
                           NULL, NULL, split };   /* cp: dti_gpt_model_cp */
    m->off = malloc((m->nl + 1) * sizeof *m->off);
    DT_REQUIRE(m->off != NULL, "out of host memory");
    size_t C = (size_t)g->embed;
    m->off[0] = 0;
    for (int i = 0; i < m->nl; i++) {
        int u = l0 + i;
        size_t size = u == 0 ? ((size_t)g->vocab + g->seq) * C
                      : u == units - 1 ? 2 * C + (l0 > 0 ? (size_t)g->vocab * C : 0)
                      : dt_gpt_block_size(g, m->cut.heads, m->cut.ffn);
        m->off[i + 1] = m->off[i] + size;
    }
    m->n = m->off[m->nl];
    DT_REQUIRE(m->n == dt_gpt_stage_size(g, &m->cut, l0, l1), "the GPT's local layout: "
               "%zu floats, gpt.h says %zu", m->n, dt_gpt_stage_size(g, &m->cut, l0, l1));
    /* the head's weights: wte in unit 0, or the last stage's copy after lnf */
    m->tie_off = l0 == 0 ? 0 : l1 == units ? m->off[m->nl - 1] + 2 * C : 0;
    size_t es = dti_work_size(r);
    m->params = dti_alloc(r, DTI_PARAMS, m->n * es, 0);
    m->grads = dti_alloc(r, DTI_GRADS, m->n * es, 0);
    if (m->type != MPI_FLOAT) {       /* fp16: the stage's weights and gradients as floats */
        m->wf = dti_alloc(r, DTI_PARAMS, m->n * sizeof(float), 0);
        m->gf = dti_alloc(r, DTI_GRADS, m->n * sizeof(float), 0);
        if (m->T > 1)                 /* the tp sums' fp16 buffer (dti_tp_allreduce) */
            m->tmp = dt_malloc((size_t)Bmax * g->seq * C * sizeof(float), r->where);
    }
    if (sp) {                         /* sequence parallelism's blocks, T + 1 */
        size_t n = (size_t)(m->T + 1) * Bmax * sp_most(m) * C;
        m->sp_buf = dt_malloc(n * sizeof(float), r->where);
        if (m->type != MPI_FLOAT)
            m->sp_wire = dt_malloc(n * dti_work_size(r), r->where);
        /* the LayerNorms' gradients, 2C floats at most 2 a unit (sp_ln_sum) */
        m->sp_ln = dt_malloc(2 * (size_t)m->nl * 2 * C * dti_work_size(r), r->where);
    }
}

/* The spans of the whole model that local unit i holds, in local order, into sp (at
 * most 14); shared[k] 1 where every tensor-parallel rank holds the same span, 2 for
 * the last stage's copy of wte (the first stage's is the one written back). */
static int unit_spans(const dti_model *m, int i, dti_span *sp, unsigned char *shared)
{
    const dt_gpt_config *g = m->g;
    int u = m->l0 + i, n = 0;
    size_t base = dt_gpt_unit_offset(g, u);
#define SPAN(start, len, count, stride, sh) \
    (sp[n] = (dti_span){ (start), (len), (count), (stride) }, shared[n++] = (sh))
    if (u == 0 || u == dt_gpt_units(g) - 1) {          /* embeddings, final LayerNorm */
        SPAN(base, dt_gpt_unit_size(g, u), 1, 0, 1);
        if (u > 0 && m->l0 > 0)                        /* and the head's copy of wte */
            SPAN(0, (size_t)g->vocab * g->embed, 1, 0, 2);
        return n;
    }
    size_t C = (size_t)g->embed, F = 4 * C, d = C / g->heads;
    size_t hd = (size_t)m->cut.heads * d, h0 = (size_t)m->t * hd;        /* columns */
    size_t fl = (size_t)m->cut.ffn, f0 = (size_t)m->t * fl;
    /* the whole block's offsets, in dt_gpt_block_at's order */
    size_t wqkv = base + 2 * C, bqkv = wqkv + 3 * C * C, wo = bqkv + 3 * C;
    size_t bo = wo + C * C, ln2 = bo + C, w1 = ln2 + 2 * C, b1 = w1 + F * C;
    size_t w2 = b1 + F, b2 = w2 + C * F;
    SPAN(base, 2 * C, 1, 0, 1);                                       /* ln1 w, b */
    for (size_t p = 0; p < 3; p++)                    /* my heads' rows of q, k, v */
        SPAN(wqkv + (p * C + h0) * C, hd * C, 1, 0, 0);
    for (size_t p = 0; p < 3; p++)
        SPAN(bqkv + p * C + h0, hd, 1, 0, 0);
    SPAN(wo + h0, hd, C, C, 0);                       /* my columns of every row */
    SPAN(bo, C, 1, 0, 1);
    SPAN(ln2, 2 * C, 1, 0, 1);
    SPAN(w1 + f0 * C, fl * C, 1, 0, 0);
    SPAN(b1 + f0, fl, 1, 0, 0);
    SPAN(w2 + f0, fl, C, F, 0);
    SPAN(b2, C, 1, 0, 1);
#undef SPAN
    return n;
}

/* The spans this rank's floats hold, in order, the last stage's copy of wte left out:
 * it comes last, and a checkpoint takes what follows the mapped floats for padding
 * (dti_model_tie_sync refills it after a resume) */
int dti_gpt_model_spans(const dti_model *m, dti_span *sp)
{
    int n = 0;
    dti_span one[16];
    unsigned char sh[16];
    for (int i = 0; i < m->nl; i++) {
        int k = unit_spans(m, i, one, sh);
        for (int j = 0; j < k; j++)
            if (sh[j] != 2) {
                if (sp)
                    sp[n] = one[j];
                n++;
            }
    }
    return n;
}

void dti_gpt_model_move(const dti_model *m, float *full, float *local, int to_local)
{
    dti_span sp[16];
    unsigned char shared[16];
    float *at = local;
    for (int i = 0; i < m->nl; i++) {
        int k = unit_spans(m, i, sp, shared);
        for (int j = 0; j < k; j++) {
            size_t ld = sp[j].count > 1 ? sp[j].stride : sp[j].len;
            float *whole = full + sp[j].start;
            if (to_local)
                dti_copy_block(at, sp[j].len, whole, ld, (int)sp[j].count, (int)sp[j].len,
                               sizeof(float));
            else if (!shared[j] || (shared[j] == 1 && m->t == 0))  /* what all hold:
                                                                      rank 0 writes */
                dti_copy_block(whole, ld, at, sp[j].len, (int)sp[j].count, (int)sp[j].len,
                               sizeof(float));
            at += sp[j].len * sp[j].count;
        }
    }
    DT_REQUIRE((size_t)(at - local) == m->n, "the GPT's spans cover %zu floats of %zu",
               (size_t)(at - local), m->n);
}

/* ==== activations ==== */

/* ==== context parallelism: the ring's attention in the blocks (cp.c) ==== */

static void cp_attend(const float *qkv, float *y, float *lse, int B, int T, int H, int d,
                      void *ctx)
{
    dti_cp_attend(ctx, qkv, y, lse, B, T, H, d);
}

static void cp_attend_backward(const float *qkv, const float *y, const float *lse,
                               const float *dy, float *dqkv, int B, int T, int H, int d,
                               void *ctx)
{
    dti_cp_attend_backward(ctx, qkv, y, lse, dy, dqkv, B, T, H, d);
}

void dti_gpt_model_cp(dti_model *m, MPI_Comm cp_comm, int Bmax)
{
    DT_REQUIRE(!m->cut.sp && m->cp == NULL, "context parallelism: with sequence "
               "parallelism, or twice");
    DT_REQUIRE(m->run->where == DT_CPU, "context parallelism's ring attention runs on the "
               "host only (lib/nn/ringattn.c)");
    m->cp = dti_cp_new(cp_comm, m->g->seq, Bmax, m->cut.heads, m->g->embed / m->g->heads);
    int T;
    m->cut.pos = dti_cp_positions(m->cp, &T);
    DT_CHECK_MPI(MPI_Comm_size(cp_comm, &m->cut.cp));
    m->cut.attend = cp_attend;
    m->cut.attend_backward = cp_attend_backward;
    m->lpe = T;                       /* its positions of every sequence */
}

/* The positions of each sequence this rank's forward and backward run on: the model's
 * seq, or with context parallelism its own (the labels per example, m->lpe) */
static int positions(const dti_model *m)
{
    return m->cp ? m->lpe : m->g->seq;
}

void dti_gpt_tokens(const float *x, int B, int T, int seq, const int *pos, int *host,
                    int *tok)
{
    int up = dt_is_device_ptr(tok);
    int *t = up ? host : tok;
    DT_REQUIRE(t != NULL && !dt_is_device_ptr(x), "the GPT's tokens: the batch must be on "
               "the host%s", up && host == NULL ? ", and a host buffer on their way up" : "");
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)
            t[(size_t)b * T + i] = (int)x[(size_t)b * seq + (pos ? pos[i] : i)];
    if (up)
        dt_memcpy_input(tok, t, (size_t)B * T * sizeof *tok);
}

void dti_gpt_acts_alloc(const dti_model *m, int B, dti_acts *a)
{
    dt_device_kind where = m->run->where;
    size_t ntok = (size_t)B * positions(m);
    memset(a, 0, sizeof *a);
    a->B = B;
    a->run = m->run;
    a->gpt = malloc(sizeof *a->gpt);
    a->tok = dt_malloc(ntok * sizeof *a->tok, where);
    a->htok = where == DT_CUDA ? malloc(ntok * sizeof *a->htok) : NULL;
    DT_REQUIRE(a->gpt && (where != DT_CUDA || a->htok), "out of host memory");
    dt_gpt_stage_acts_alloc_on(m->g, &m->cut, m->l0, m->l1, B, positions(m),
                               where == DT_CUDA, a->gpt);
    size_t scratch;
    size_t all = dt_gpt_stage_acts_floats(m->g, &m->cut, m->l0, m->l1, B, positions(m),
                                          &scratch);
    a->bytes = (all - scratch) * sizeof(float);     /* what forward keeps */
    dti_held(a->run, DTI_ACTS, a->bytes, 1);
}

void dti_gpt_acts_free(dti_acts *a)
{
    if (a->run && a->gpt)
        dti_held(a->run, DTI_ACTS, a->bytes, 0);
    if (a->gpt)
        dt_gpt_acts_free(a->gpt);
    free(a->gpt);
    dt_free(a->tok);
    free(a->htok);
    memset(a, 0, sizeof *a);
}

/* ==== forward and backward ==== */

/* A compute event per part (dti_gpt_clock); in fp16, once a unit is done, its output
 * (forward) or the stream's gradient and the unit's gradients (backward) rounded and
 * added to the fp16 sums first. A split backward's B has only the stream's gradient
 * to round, its W only the gradients to add. */
enum { BACK_INPUT = 1, BACK_WEIGHTS = 2, BACK_BOTH = 3 };
typedef struct {
    dti_model *m;
    dti_acts *a;
    int B;
    dti_gpt_clock clock;
    void (*layer_done)(int i, void *ctx);
    void *ctx;
    int back;                   /* backward: what it computes, BACK_* */
} unit_clock;

static void part_finished(int u, int part, void *ctx)
{
    unit_clock *k = ctx;
    dti_gpt_clock_part(u, part, &k->clock);
    if (!dt_gpt_part_last(part, k->clock.phase[0] == 'b'))
        return;
    dti_model *m = k->m;
    int i = u - m->l0, fp16 = m->type != MPI_FLOAT;
    size_t N = (size_t)k->B * positions(m), n = (size_t)k->B * dti_gpt_model_rows(m);
    if (fp16 && k->clock.phase[0] == 'f') {           /* the logits, or the stream */
        size_t all = u == m->g->layers + 1 ? N * m->g->vocab : n * m->g->embed;
        dti_round_to(m->type, dt_gpt_unit_output(m->g, k->a->gpt, u), all);
    } else if (fp16) {
        if (k->back & BACK_INPUT)
            dti_round_to(m->type, k->a->gpt->dres, n * m->g->embed);
        size_t n = m->off[i + 1] - m->off[i];
        if (k->back & BACK_WEIGHTS)
            dti_accumulate((char *)m->grads + m->off[i] * 2, m->type, m->gf + m->off[i],
                           n);
    }
    dti_gpt_clock_end(&k->clock, u);
    if (k->layer_done)
        k->layer_done(i, k->ctx);
    k->clock.t0 = dt_trace_now();
}

/* The stage's weights as floats: in place in fp32, widened into m->wf in fp16 */
static const float *weights(dti_model *m)
{
    if (m->type == MPI_FLOAT)
        return m->params;
    dti_to_float(m->params, m->type, m->wf, m->n, 1.0f);
    return m->wf;
}

const float *dti_gpt_model_forward(dti_model *m, dti_acts *a, const float *x_in, int B,
                                   int step, int micro)
{
    int T = positions(m), seq = m->g->seq;
    DT_REQUIRE(B >= 1 && B <= a->B, "the GPT's forward: %d sequences, buffers for %d", B,
               a->B);
    if (m->l0 == 0)                 /* the first stage: the tokens, sent as floats (with
                                       context parallelism, those at its positions) */
        dti_gpt_tokens(x_in, B, T, seq, m->cp ? m->cut.pos : NULL, a->htok, a->tok);
    unit_clock k = { m, a, B, { "forward", step, micro, dt_trace_now(), 0, m->l0 - 1,
                                DT_GPT_UNIT }, NULL, NULL, 0 };
    m->clock = &k.clock;
    const float *out = dt_gpt_forward_stage(m->g, &m->cut, m->l0, m->l1, weights(m),
                                            a->tok, x_in, B, T, a->gpt, part_finished, &k);
    m->clock = NULL;
    return out;
}

void dti_gpt_model_backward(dti_model *m, dti_acts *a, const float *dy, float *dx, int B,
                            int step, int micro, void (*layer_done)(int i, void *ctx),
                            void *ctx)
{
    unit_clock k = { m, a, B, { "backward", step, micro, dt_trace_now(), 0, m->l1,
                                DT_GPT_UNIT }, layer_done, ctx, BACK_BOTH };
    int fp16 = m->type != MPI_FLOAT;
    if (fp16)                       /* this micro-batch's gradients, as floats */
        dt_memzero(m->gf, m->n * sizeof(float));
    m->clock = &k.clock;
    dt_gpt_backward_stage(m->g, &m->cut, m->l0, m->l1, weights(m), a->gpt, dy, a->tok, dx,
                          B, positions(m), fp16 ? m->gf : m->grads, part_finished, &k);
    m->clock = NULL;
}

/* Zero bubble's B and W (gpt.h's split backward): the stream's gradient, then the
 * weights', traced under the same names as dti_gpt_model_backward's parts; in fp16 W
 * computes the micro-batch's gradients as floats and adds each unit's to the fp16
 * sums, as the fused backward does */
void dti_gpt_model_backward_input(dti_model *m, dti_acts *a, const float *dy, float *dx,
                                  int B, int step, int micro)
{
    unit_clock k = { m, a, B, { "backward", step, micro, dt_trace_now(), 0, m->l1,
                                DT_GPT_UNIT }, NULL, NULL, BACK_INPUT };
    m->clock = &k.clock;
    dt_gpt_backward_stage_input(m->g, &m->cut, m->l0, m->l1, weights(m), a->gpt, dy, dx,
                                B, positions(m), part_finished, &k);
    m->clock = NULL;
}

void dti_gpt_model_backward_weights(dti_model *m, dti_acts *a, int B, int step, int micro,
                                    void (*layer_done)(int i, void *ctx), void *ctx)
{
    unit_clock k = { m, a, B, { "backward", step, micro, dt_trace_now(), 0, m->l1,
                                DT_GPT_UNIT }, layer_done, ctx, BACK_WEIGHTS };
    int fp16 = m->type != MPI_FLOAT;
    if (fp16)
        dt_memzero(m->gf, m->n * sizeof(float));
    m->clock = &k.clock;
    float *grads = fp16 ? m->gf : m->grads;
    dt_gpt_backward_stage_weights(m->g, &m->cut, m->l0, m->l1, a->gpt, a->tok, B,
                                  positions(m), grads, part_finished, &k);
    m->clock = NULL;
}

/* ==== the tied embedding ==== */

void dti_gpt_model_tie(dti_model *m, MPI_Comm pp_comm)
{
    int s, P, units = dt_gpt_units(m->g);
    MPI_Comm_rank(pp_comm, &s);
    MPI_Comm_size(pp_comm, &P);
    if (P == 1)
        return;
    int ends = m->l0 == 0 || m->l1 == units;
    DT_CHECK_MPI(MPI_Comm_split(pp_comm, ends ? 0 : MPI_UNDEFINED, s, &m->tie));
}

/* After a resume: the first stage's wte and its optimizer state (S floats a weight)
 * to the last stage's copy, which a checkpoint does not map */
void dti_gpt_model_tie_sync(dti_model *m, float *w, float *state, int S)
{
    if (m->tie == MPI_COMM_NULL)
        return;
    size_t n = (size_t)m->g->vocab * m->g->embed;
    dt_bcast(w + m->tie_off, (int)n, MPI_FLOAT, 0, m->tie);
    if (S > 0)
        dt_bcast(state + m->tie_off * S, (int)(n * S), MPI_FLOAT, 0, m->tie);
}

/* Sequence parallelism: each tensor-parallel rank's gradients of the LayerNorms (ln1,
 * ln2 of its blocks, lnf) are its rows' part (gpt.h); their sum over the ranks is the
 * gradient, which every rank then holds. One allreduce of them all, packed: 2C floats
 * at each of the spans' starts at[]. */
static void sp_ln_sum(dti_model *m, int step)
{
    if (!m->cut.sp)
        return;
    const dt_gpt_config *g = m->g;
    size_t C = (size_t)g->embed, es = dti_work_size(m->run), n = 2 * C;
    size_t ln2 = dt_gpt_attn_size(g, m->cut.heads) - 2 * C;   /* in a block */
    size_t *at = dti_calloc(2 * (size_t)m->nl, sizeof *at);   /* host */
    int ns = 0;
    for (int i = 0; i < m->nl; i++) {
        int u = m->l0 + i;
        if (u >= 1 && u <= g->layers)                           /* a block: ln1, ln2 */
            at[ns++] = m->off[i], at[ns++] = m->off[i] + ln2;
        else if (u == g->layers + 1)                            /* lnf */
            at[ns++] = m->off[i];
    }
    char *buf = m->sp_ln, *grads = m->grads;        /* where the run lives */
    for (int j = 0; j < ns; j++)
        dt_memcpy(buf + j * n * es, grads + at[j] * es, n * es);
    double t0 = dt_trace_now();
    if (ns > 0)
        dt_allreduce(MPI_IN_PLACE, buf, (int)(ns * n), m->type, MPI_SUM, m->tp);
    dti_mark("tp", "ln", step, -1, 0, 0, ns * n * es, t0);
    for (int j = 0; j < ns; j++)
        dt_memcpy(grads + at[j] * es, buf + j * n * es, n * es);
    free(at);
}

/* Megatron's way: the first stage's wte (the embedding) and the last stage's copy (the
 * head) are one weight held twice; each stage's backward gave its copy the gradient
 * of its own use, and the weight's gradient is their sum, which both then hold */
void dti_gpt_model_shared_sums(dti_model *m, int step)
{
    sp_ln_sum(m, step);
    if (m->tie == MPI_COMM_NULL)
        return;
    size_t n = (size_t)m->g->vocab * m->g->embed, es = dti_work_size(m->run);
    double t0 = dt_trace_now();
    dt_allreduce(MPI_IN_PLACE, (char *)m->grads + m->tie_off * es, (int)n, m->type, MPI_SUM,
                 m->tie);
    dti_mark("pp", "tie", step, -1, 0, 0, n * es, t0);
}
