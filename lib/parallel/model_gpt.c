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
 * first and the last stage sum the two copies' gradients (dti_model_tied_sum), as
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
 * The GPT runs on the host so far. */
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "parallel_internal.h"
#include "trace.h"

/* ==== the cut and the layout ==== */

/* The unit and part under way on clock k, from the part done last: forward a block's
 * attention, then its MLP; backward its recomputed forward (full: the cut's
 * recompute), its MLP, its attention */
static void under_way(const dti_gpt_clock *k, int full, int *u, int *part)
{
    int back = k->phase[0] == 'b', ended = dt_gpt_part_last(k->done_part, back);
    if (!back) {
        *u = ended ? k->done_u + 1 : k->done_u;
        *part = ended ? DT_GPT_ATTN : DT_GPT_MLP;
    } else if (ended) {
        *u = k->done_u - 1;
        *part = full ? DT_GPT_RECOMPUTE : DT_GPT_MLP;
    } else {
        *u = k->done_u;
        *part = k->done_part == DT_GPT_RECOMPUTE ? DT_GPT_MLP : DT_GPT_ATTN;
    }
}

/* Tensor parallelism's sum inside a block (the cut's): the part's compute so far is
 * one event, the allreduce a tp mark (as the MLP's, model.c: "g" in forward and in a
 * recomputed forward, "f" in backward), and the part's compute goes on after it */
static void tp_sum(float *x, size_t n, void *ctx)
{
    dti_model *m = ctx;
    dti_gpt_clock *k = m->clock;
    int u = -1, part = DT_GPT_UNIT;
    if (k) {
        under_way(k, m->cut.recompute == DT_GPT_RECOMPUTE_FULL, &u, &part);
        dti_compute_part(k->phase, dt_gpt_part_name(part), k->step, u, k->micro, k->t0);
    }
    double t0 = dt_trace_now();
    dti_tp_allreduce(m, x, n);
    if (k == NULL)
        return;
    int forward = k->phase[0] == 'f' || part == DT_GPT_RECOMPUTE;
    dti_mark("tp", forward ? "g" : "f", k->step, u, k->micro < 0 ? 0 : (size_t)k->micro,
             k->micro < 0 ? 0 : (size_t)k->micro + 1, n * dti_work_size(m->run), t0);
    k->t0 = dt_trace_now();
}

void dti_gpt_model_init(dti_model *m, dti_run *r, int l0, int l1, MPI_Comm tp, int Bmax)
{
    const dt_gpt_config *g = &r->cfg->gpt;
    int units = dt_gpt_units(g);
    DT_REQUIRE(r->where == DT_CPU, "the GPT trains on the host so far");
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
    m->cut = (dt_gpt_cut){ g->heads / m->T, 4 * g->embed / m->T, m->t == 0,
                           m->T > 1 ? tp_sum : NULL, m, r->cfg->recompute };
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

void dti_gpt_acts_alloc(const dti_model *m, int B, dti_acts *a)
{
    memset(a, 0, sizeof *a);
    a->B = B;
    a->run = m->run;
    a->gpt = malloc(sizeof *a->gpt);
    a->tok = malloc((size_t)B * m->g->seq * sizeof *a->tok);
    DT_REQUIRE(a->gpt && a->tok, "out of host memory");
    dt_gpt_stage_acts_alloc(m->g, &m->cut, m->l0, m->l1, B, m->g->seq, a->gpt);
    size_t scratch;
    size_t all = dt_gpt_stage_acts_floats(m->g, &m->cut, m->l0, m->l1, B, m->g->seq,
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
    free(a->tok);
    memset(a, 0, sizeof *a);
}

/* ==== forward and backward ==== */

void dti_gpt_clock_part(int u, int part, void *clock)
{
    dti_gpt_clock *k = clock;
    k->done_u = u;
    k->done_part = part;
    if (dt_gpt_part_last(part, k->phase[0] == 'b')) {
        k->last = part;
        return;
    }
    dti_compute_part(k->phase, dt_gpt_part_name(part), k->step, u, k->micro, k->t0);
    k->t0 = dt_trace_now();
}

void dti_gpt_clock_end(dti_gpt_clock *k, int u)
{
    dti_compute_part(k->phase, dt_gpt_part_name(k->last), k->step, u, k->micro, k->t0);
    k->t0 = dt_trace_now();
}

/* A compute event per part (dti_gpt_clock); in fp16, once a unit is done, its output
 * (forward) or the stream's gradient and the unit's gradients (backward) rounded and
 * added to the fp16 sums first */
typedef struct {
    dti_model *m;
    dti_acts *a;
    int B;
    dti_gpt_clock clock;
    void (*layer_done)(int i, void *ctx);
    void *ctx;
} unit_clock;

static void part_finished(int u, int part, void *ctx)
{
    unit_clock *k = ctx;
    dti_gpt_clock_part(u, part, &k->clock);
    if (!dt_gpt_part_last(part, k->clock.phase[0] == 'b'))
        return;
    dti_model *m = k->m;
    int i = u - m->l0, fp16 = m->type != MPI_FLOAT;
    size_t N = (size_t)k->B * m->g->seq;
    if (fp16 && k->clock.phase[0] == 'f') {
        size_t width = u == m->g->layers + 1 ? m->g->vocab : m->g->embed;
        dti_round_to(m->type, dt_gpt_unit_output(m->g, k->a->gpt, u), N * width);
    } else if (fp16) {
        dti_round_to(m->type, k->a->gpt->dres, N * m->g->embed);
        size_t n = m->off[i + 1] - m->off[i];
        dti_accumulate((char *)m->grads + m->off[i] * 2, m->type, m->gf + m->off[i], n);
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
    int T = m->g->seq;
    DT_REQUIRE(B >= 1 && B <= a->B, "the GPT's forward: %d sequences, buffers for %d", B,
               a->B);
    if (m->l0 == 0)                 /* the first stage: the tokens, sent as floats */
        for (size_t i = 0; i < (size_t)B * T; i++)
            a->tok[i] = (int)x_in[i];
    unit_clock k = { m, a, B, { "forward", step, micro, dt_trace_now(), 0, m->l0 - 1,
                                DT_GPT_UNIT }, NULL, NULL };
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
                                DT_GPT_UNIT }, layer_done, ctx };
    int fp16 = m->type != MPI_FLOAT;
    if (fp16)                       /* this micro-batch's gradients, as floats */
        memset(m->gf, 0, m->n * sizeof(float));
    m->clock = &k.clock;
    dt_gpt_backward_stage(m->g, &m->cut, m->l0, m->l1, weights(m), a->gpt, dy, a->tok, dx,
                          B, m->g->seq, fp16 ? m->gf : m->grads, part_finished, &k);
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

/* Megatron's way: the first stage's wte (the embedding) and the last stage's copy (the
 * head) are one weight held twice; each stage's backward gave its copy the gradient
 * of its own use, and the weight's gradient is their sum, which both then hold */
void dti_gpt_model_tied_sum(dti_model *m, int step)
{
    if (m->tie == MPI_COMM_NULL)
        return;
    size_t n = (size_t)m->g->vocab * m->g->embed, es = dti_work_size(m->run);
    double t0 = dt_trace_now();
    dt_allreduce(MPI_IN_PLACE, (char *)m->grads + m->tie_off * es, (int)n, m->type, MPI_SUM,
                 m->tie);
    dti_mark("pp", "tie", step, -1, 0, 0, n * es, t0);
}
