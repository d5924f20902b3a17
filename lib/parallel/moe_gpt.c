/* Mixture of experts in the GPT (train --mode moe --model gpt): the MLP of every other
 * block (1, 3, ...: Switch Transformer's and GShard's choice) becomes moe.c's layer of
 * E experts, each expert an MLP of the block's shape (C -> 4C, GELU, -> C), each token
 * (a position of a sequence) sent to its top-k experts by a gate that reads the output
 * of the block's second LayerNorm:
 *
 *     x2 = x + attn(ln1(x))                          replicated, as in the dense GPT
 *     u = ln2(x2) --gate, softmax, top-k--> experts e1 (, e2)
 *     out = x2 + p[e1] * mlp_e1(u) (+ p[e2] * mlp_e2(u))
 *
 * so the block keeps its residual: a token its expert had no room for passes through
 * with x2. Everything but the experts (embeddings, attention, LayerNorms, the dense
 * blocks, the gates) is replicated, data parallel over the ranks; the experts are
 * spread over them (rank r holds experts [r E/N, (r+1) E/N) of every MoE block).
 *
 * The tokens. The batch's B sequences are cut into G groups of B/G sequences (G a
 * multiple of N; a rank takes G/N consecutive groups), and a group's T = B/G x seq
 * positions are routed together, with C slots per expert (moe.c). Every product of
 * the replicated part runs a group at a time, and each group keeps its own gradient of
 * the replicated weights, summed in group order at the end of the step: so any number
 * of ranks with the same --moe-groups adds the same numbers in the same order, routes
 * the same tokens to the same experts, and ends with the same weights bit for bit, the
 * 1-rank run being the reference (moe.c says why routing needs it).
 *
 * One step, on every rank, a group at a time except inside the MoE layers:
 *   1. the embeddings; then block after block: a dense block whole; an MoE block's
 *      attention half and ln2, then the MoE layer on every local group at once
 *      (dispatch all-to-all, the experts, combine all-to-all)
 *   2. the final LayerNorm, the head (tied to wte) and the loss; the step's routing
 *      figures summed over the ranks (the aux loss's f_e, the books)
 *   3. backward block by block, the MoE layer's two all-to-alls inside each MoE block
 *   4. the replicated gradients summed in group order (allgather), the optimizer
 * So each MoE block costs 4 all-to-alls a step, as the MLP's one MoE layer does.
 *
 * The weights live here in the dense GPT's unit order with each MoE block's MLP taken
 * out (its attention part only: ln1 .. ln2_b); gates and experts live in moe.c's
 * layers. --dump writes dt_moe_nparams' layout (moe.h). The GPT runs on the host. */
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "moe_layer.h"
#include "trace.h"

/* Block l's MLP is an MoE layer */
static int is_moe(const dt_gpt_config *g, int l)
{
    return dt_moe_gpt_layer_of(g, l) >= 0;
}

/* Floats of unit u here: an MoE block's attention part, else the unit whole */
static size_t unit_floats(const dt_gpt_config *g, int u)
{
    if (u >= 1 && u <= g->layers && is_moe(g, u - 1))
        return dt_gpt_attn_size(g, g->heads);
    return dt_gpt_unit_size(g, u);
}

/* The GPT's side of the run: its replicated weights, where each unit starts in them,
 * and each local group's activations */
typedef struct {
    const dt_gpt_config *g;
    int L, C, S, Bg, Ng;     /* blocks, width, positions, sequences and tokens a group */
    size_t *off;             /* [L + 3] unit u's first float in w; off[L + 2] = n */
    size_t n;
    float *w, *grads, *state;
    dt_gpt_acts *a;          /* [Gl] */
    size_t acts_bytes;       /* what forward keeps, every group */
    dt_gpt_cut whole;
} side;

/* Block l's tensors in p (w or a gradient row, laid out as w): an MoE block's MLP
 * tensors are empty */
static dt_gpt_block block(const side *s, const float *p, int l)
{
    dt_gpt_block b;
    dt_gpt_block_at(s->g, s->g->heads, is_moe(s->g, l) ? 0 : 4 * s->C,
                    (float *)p + s->off[1 + l], &b);
    return b;
}

static void side_init(side *s, dti_run *r, int Gl)
{
    const dt_train_config *cfg = r->cfg;
    const dt_gpt_config *g = &cfg->gpt;
    size_t S = (size_t)dt_optim_state_per_param(cfg->optim.kind), f = sizeof(float);
    memset(s, 0, sizeof *s);
    s->g = g;
    s->L = g->layers;
    s->C = g->embed;
    s->S = g->seq;
    s->Bg = cfg->batch / dt_moe_groups(cfg, r->size);
    s->Ng = s->Bg * s->S;
    s->whole = dt_gpt_whole(g, DT_GPT_KEEP);
    s->off = dti_calloc((size_t)s->L + 3, sizeof *s->off);
    for (int u = 0; u < s->L + 2; u++)
        s->off[u + 1] = s->off[u] + unit_floats(g, u);
    s->n = s->off[s->L + 2];
    s->w = dti_alloc(r, DTI_PARAMS, s->n * f, 0);
    s->grads = dti_alloc(r, DTI_GRADS, s->n * f, 0);
    s->state = dti_alloc(r, DTI_OPTIM, s->n * S * f, 0);
    /* the dense GPT's initial weights, less the MoE blocks' MLPs */
    float *full = dti_calloc(dt_gpt_nparams(g), sizeof(float));
    dt_gpt_init(g, cfg->seed, full);
    for (int u = 0; u < s->L + 2; u++)
        memcpy(s->w + s->off[u], full + dt_gpt_unit_offset(g, u),
               unit_floats(g, u) * sizeof(float));
    free(full);
    s->a = dti_calloc(Gl, sizeof *s->a);
    size_t scratch, all = dt_gpt_acts_floats(g, NULL, s->Bg, s->S, &scratch);
    s->acts_bytes = (all - scratch) * sizeof(float) * Gl;
    for (int i = 0; i < Gl; i++)
        dt_gpt_acts_alloc(g, NULL, s->Bg, s->S, &s->a[i]);
    dti_held(r, DTI_ACTS, s->acts_bytes, 1);
}

static void side_free(side *s, dti_run *r, int Gl)
{
    size_t S = (size_t)dt_optim_state_per_param(r->cfg->optim.kind), f = sizeof(float);
    dti_held(r, DTI_ACTS, s->acts_bytes, 0);
    for (int i = 0; i < Gl; i++)
        dt_gpt_acts_free(&s->a[i]);
    free(s->a);
    dti_free(r, DTI_PARAMS, s->w, s->n * f);
    dti_free(r, DTI_GRADS, s->grads, s->n * f);
    dti_free(r, DTI_OPTIM, s->state, s->n * S * f);
    free(s->off);
}

/* The gates' and this rank's experts' initial weights: gate i from the gate's seed and
 * its block, expert e of block l as gpt.h's dt_gpt_mlp_init (expert 0 the dense
 * block's MLP) */
static void experts_init(dti_moe *m, const side *s, unsigned long long seed)
{
    for (int i = 0; i < m->nl; i++) {
        dti_moe_layer *l = &m->ly[i];
        int b = l->at - 1;
        dti_moe_init_linear(s->C, m->E, 0, dti_moe_gate_seed(seed) ^
                            (0x3c6ef372fe94f82bull * (unsigned long long)(b + 1)), l->gate);
        for (int j = 0; j < m->El; j++) {
            dt_gpt_block p;
            dt_gpt_mlp_at(s->g, m->F, l->ex + j * m->nx, &p);
            dt_gpt_mlp_init(s->g, seed, b, m->rank * m->El + j, &p);
        }
    }
}

/* ==== one step ==== */

/* Forward of every local group, the MoE layers between; returns this rank's
 * cross-entropy sum, the logits' gradients (scaled by scale) left in each group's
 * logits */
static double forward(side *s, dti_moe *m, const int *tok, const int *labels,
                      float scale, int step)
{
    const dt_gpt_config *g = s->g;
    size_t NC = (size_t)s->Ng * s->C;
    double t0;
    for (int gi = 0; gi < m->Gl; gi++) {
        dti_gpt_clock k = { "forward", step, gi, dt_trace_now(), 0, 0, 0 };
        dt_gpt_unit_forward(g, NULL, 0, s->w, NULL, tok + (size_t)gi * s->Ng, &s->a[gi],
                            s->Bg, s->S, dti_gpt_clock_part, &k);
        dti_gpt_clock_end(&k, 0);
    }
    for (int l = 0; l < s->L; l++) {
        int u = 1 + l;
        if (!is_moe(g, l)) {
            for (int gi = 0; gi < m->Gl; gi++) {
                dti_gpt_clock k = { "forward", step, gi, dt_trace_now(), 0, 0, 0 };
                dt_gpt_unit_forward(g, NULL, u, s->w + s->off[u], NULL, NULL, &s->a[gi],
                                    s->Bg, s->S, dti_gpt_clock_part, &k);
                dti_gpt_clock_end(&k, u);
            }
            continue;
        }
        /* attention and ln2 a group at a time; the experts on every group at once */
        dti_moe_layer *ly = &m->ly[dt_moe_gpt_layer_of(g, l)];
        dt_gpt_block p = block(s, s->w, l);
        for (int gi = 0; gi < m->Gl; gi++) {
            t0 = dt_trace_now();
            dt_gpt_block_acts *b = &s->a[gi].blk[l];
            dt_gpt_block_attn_forward(g, &s->whole, &p, b, s->Bg, s->S);
            dti_compute_part("forward", "attn", step, u, gi, t0);
            t0 = dt_trace_now();            /* ln2: the MoE layer's input */
            dt_layernorm_forward(b->x2, p.ln2_w, p.ln2_b, b->ln2, b->ln2_mean, b->ln2_rstd,
                                 s->Ng, s->C);
            memcpy(ly->h + gi * NC, b->ln2, NC * sizeof(float));
            memcpy(ly->res + gi * NC, b->x2, NC * sizeof(float));
            dti_compute_part("forward", "moe", step, u, gi, t0);
        }
        dti_moe_forward(m, ly, step);
        for (int gi = 0; gi < m->Gl; gi++)
            memcpy(dt_gpt_unit_output(g, &s->a[gi], u), ly->y + gi * NC,
                   NC * sizeof(float));
    }
    double loss = 0;
    for (int gi = 0; gi < m->Gl; gi++) {
        t0 = dt_trace_now();
        dt_gpt_unit_forward(g, NULL, s->L + 1, s->w + s->off[s->L + 1], s->w, NULL,
                            &s->a[gi], s->Bg, s->S, NULL, NULL);
        float *logits = s->a[gi].logits;
        loss += dt_xent(logits, labels + (size_t)gi * s->Ng, s->Ng, g->vocab, scale,
                        logits);
        dti_compute_event("forward", step, s->L + 1, gi, t0);
    }
    return loss;
}

/* Backward of every local group into its row of m->pg, the MoE layers between */
static void backward(side *s, dti_moe *m, const int *tok, int step)
{
    const dt_gpt_config *g = s->g;
    size_t NC = (size_t)s->Ng * s->C;
    int L = s->L;
    double t0;
    for (int gi = 0; gi < m->Gl; gi++) {
        t0 = dt_trace_now();
        float *gg = dti_moe_group_grad(m, gi);
        dt_gpt_unit_backward(g, NULL, L + 1, s->w + s->off[L + 1], s->w, &s->a[gi],
                             s->a[gi].logits, NULL, gg + s->off[L + 1], gg, s->Bg, s->S,
                             NULL, NULL);
        dti_compute_event("backward", step, L + 1, gi, t0);
    }
    for (int l = L - 1; l >= 0; l--) {
        int u = 1 + l;
        if (!is_moe(g, l)) {
            for (int gi = 0; gi < m->Gl; gi++) {
                dti_gpt_clock k = { "backward", step, gi, dt_trace_now(), 0, 0, 0 };
                float *gg = dti_moe_group_grad(m, gi);
                dt_gpt_unit_backward(g, NULL, u, s->w + s->off[u], NULL, &s->a[gi], NULL,
                                     NULL, gg + s->off[u], NULL, s->Bg, s->S,
                                     dti_gpt_clock_part, &k);
                dti_gpt_clock_end(&k, u);
            }
            continue;
        }
        /* the experts on every group at once (m->dx: the gradient of ln2's output),
         * then ln2 and attention a group at a time; the stream's gradient (dres) keeps
         * the residual's part */
        dti_moe_layer *ly = &m->ly[dt_moe_gpt_layer_of(g, l)];
        for (int gi = 0; gi < m->Gl; gi++)
            memcpy(m->dy + gi * NC, s->a[gi].dres, NC * sizeof(float));
        dti_moe_backward(m, ly, m->dy, step);
        dt_gpt_block p = block(s, s->w, l);
        for (int gi = 0; gi < m->Gl; gi++) {
            t0 = dt_trace_now();
            dt_gpt_block_acts *b = &s->a[gi].blk[l];
            dt_gpt_block gp = block(s, dti_moe_group_grad(m, gi), l);
            dt_layernorm_backward(b->x2, p.ln2_w, b->ln2_mean, b->ln2_rstd, m->dx + gi * NC,
                                  s->a[gi].dres, gp.ln2_w, gp.ln2_b, s->Ng, s->C);
            dti_compute_part("backward", "moe", step, u, gi, t0);
            t0 = dt_trace_now();
            dt_gpt_block_attn_backward(g, &s->whole, &p, b, &s->a[gi].s, s->a[gi].dres,
                                       &gp, s->Bg, s->S);
            dti_compute_part("backward", "attn", step, u, gi, t0);
        }
    }
    for (int gi = 0; gi < m->Gl; gi++) {
        t0 = dt_trace_now();
        dt_gpt_unit_backward(g, NULL, 0, s->w, NULL, &s->a[gi], NULL,
                             tok + (size_t)gi * s->Ng, dti_moe_group_grad(m, gi), NULL,
                             s->Bg, s->S, NULL, NULL);
        dti_compute_event("backward", step, 0, gi, t0);
    }
}

/* The final weights in dt_moe_nparams' layout (moe.h): rank 0 the replicated parts and
 * the gates, every rank its experts */
static void result(side *s, dti_moe *m, dti_run *r)
{
    float *owned = dti_calloc(r->nparams, sizeof(float));
    size_t o = 0;
    for (int u = 0; u < s->L + 2; u++) {
        size_t n = unit_floats(s->g, u);
        if (m->rank == 0)
            memcpy(owned + o, s->w + s->off[u], n * sizeof(float));
        o += n;
        if (u >= 1 && u <= s->L && is_moe(s->g, u - 1)) {
            const dti_moe_layer *ly = &m->ly[dt_moe_gpt_layer_of(s->g, u - 1)];
            if (m->rank == 0)
                memcpy(owned + o, ly->gate, m->ng * sizeof(float));
            o += m->ng;
            memcpy(owned + o + (size_t)m->rank * m->El * m->nx, ly->ex,
                   m->El * m->nx * sizeof(float));
            o += (size_t)m->E * m->nx;
        }
    }
    DT_REQUIRE(o == r->nparams, "moe_gpt: %zu weights written, the layout has %zu", o,
               r->nparams);
    dti_result_params(r, owned);
    free(owned);
}

void dti_train_moe_gpt(dti_run *r)
{
    const dt_train_config *cfg = r->cfg;
    const dt_gpt_config *g = &cfg->gpt;
    int N = r->size, Gl = dt_moe_groups(cfg, N) / N, B = cfg->batch;
    side s;
    side_init(&s, r, Gl);
    int nl = dt_moe_gpt_layers(g);
    int *at = dti_calloc(nl, sizeof *at);
    for (int l = 0; l < g->layers; l++)           /* the unit: the trace's numbering */
        if (is_moe(g, l))
            at[dt_moe_gpt_layer_of(g, l)] = 1 + l;
    dti_moe m;
    dti_moe_init(&m, r, 1, s.C, 4 * s.C, s.Ng, nl, at, s.n, 1);
    free(at);
    experts_init(&m, &s, cfg->seed);

    int rows = m.Gl * s.Bg;                       /* this rank's sequences */
    size_t ntok = (size_t)rows * s.S;
    float *x = dti_calloc(ntok, sizeof(float));
    int *tok = dti_calloc(ntok, sizeof(int)), *labels = dti_calloc(ntok, sizeof(int));
    dti_moe_books *bk = dti_moe_books_new(&m);
    float scale = 1.0f / ((float)B * s.S);

    for (int step = 1; step <= cfg->steps; step++) {
        dti_step_begin(r, step);
        dti_moe_step_begin(&m);
        dti_batch(cfg, step - 1, B, m.rank * rows, rows, x, labels);
        for (size_t i = 0; i < ntok; i++)
            tok[i] = (int)x[i];
        double loss = forward(&s, &m, tok, labels, scale, step);
        double auxloss = dti_moe_figures(&m, loss);
        backward(&s, &m, tok, step);
        dti_moe_sum_groups_into(&m, &s.grads, &s.n, 1);

        char extra[160] = "", scaler[32];
        dti_scaler_decide(r, 0, r->comm, scaler, sizeof scaler);      /* fp32: steps */
        double t0 = dt_trace_now();
        dti_master_step(r, s.w, NULL, s.grads, s.state, s.n);
        dti_moe_optimize(&m);
        dti_compute_event("optimizer", step, -1, -1, t0);

        dti_moe_step_books(&m, bk, auxloss, extra, sizeof extra);
        dti_step_end(r, step, (float)(m.st_h[DTI_MOE_LOSS(m.E)] / ((double)B * s.S)), 0,
                     extra);
    }
    dti_moe_summary(&m, bk);
    result(&s, &m, r);

    free(labels);
    free(tok);
    free(x);
    dti_moe_free(&m);
    side_free(&s, r, Gl);
}
