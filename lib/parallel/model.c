/* This rank's part of the MLP: the layers [l0, l1) of its pipeline stage, each whole
 * or cut over the tensor-parallel group (tp.c), with forward and backward of one
 * micro-batch. Serial training is the case l0 = 0, l1 = L, T = 1: the same chain as
 * dt_mlp_forward/backward (lib/nn/mlp.c), layer by layer:
 *
 *   x[0] --linear 0--> z[0] --act--> x[1] --linear 1--> z[1] --act--> ... x[nl]
 *
 * A stage that ends before the last layer applies the activation to its last z, so
 * what it sends on (x[nl]) is the next stage's input; the last layer has none, and its
 * output is the logits. In backward a stage receives the gradient of x[nl] and sends
 * back that of x[0].
 *
 * In fp16 the weights and gradients are fp16 (m->params and m->grads); a layer's
 * weights are widened to fp32 for the arithmetic (m->wf) and its gradients computed in
 * fp32 (m->gf) and added to the fp16 sums; every activation and activation gradient
 * is rounded to fp16, as it would be stored. */
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "parallel_internal.h"
#include "schedule.h"
#include "trace.h"

/* ==== shapes ==== */

static int full_in(const dti_model *m, int i) { return dt_mlp_layer_in(m->c, m->l0 + i); }
static int full_out(const dti_model *m, int i) { return dt_mlp_layer_out(m->c, m->l0 + i); }

/* Columns of x[i] and of z[i] on this rank. */
static int x_width(const dti_model *m, int i)
{
    return m->split[i] == DTI_ROW ? m->in[i] : full_in(m, i);
}

static int z_width(const dti_model *m, int i)
{
    return m->split[i] == DTI_COL ? m->out[i] : full_out(m, i);
}

int dti_model_in_width(const dti_model *m)
{
    if (m->g)                      /* tokens, or the residual stream (its rows here) */
        return m->l0 == 0 ? m->g->seq : dti_gpt_model_rows(m) * m->g->embed;
    return x_width(m, 0);
}

int dti_model_out_width(const dti_model *m)
{
    if (m->g)                      /* logits, or the residual stream (its rows here) */
        return m->l1 == dt_gpt_units(m->g) ? m->lpe * m->g->vocab
                                           : dti_gpt_model_rows(m) * m->g->embed;
    return z_width(m, m->nl - 1);
}

void dti_model_tie(dti_model *m, MPI_Comm pp_comm)
{
    if (m->g)
        dti_gpt_model_tie(m, pp_comm);
}

void dti_model_cp(dti_model *m, MPI_Comm cp_comm, int Bmax)
{
    DT_REQUIRE(m->g != NULL, "context parallelism is the GPT's");
    dti_gpt_model_cp(m, cp_comm, Bmax);
}

void dti_model_labels(const dti_model *m, const int *y, int *mine, int B)
{
    int T = 0, seq = m->g ? m->g->seq : 1;
    const int *pos = m->cp ? dti_cp_positions(m->cp, &T) : NULL;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < m->lpe; i++)
            mine[(size_t)b * m->lpe + i] = y[(size_t)b * seq + (pos ? pos[i] : i)];
}

void dti_model_shared_sums(dti_model *m, int step)
{
    if (m->g)
        dti_gpt_model_shared_sums(m, step);
}

void dti_model_tie_sync(dti_model *m, float *w, float *state, int S)
{
    if (m->g)
        dti_gpt_model_tie_sync(m, w, state, S);
}

static int is_last_layer(const dti_model *m, int i) { return m->l0 + i == m->c->layers - 1; }

/* ==== the model a run trains, whichever it is ==== */

int dti_units(const dt_train_config *c)
{
    return c->kind == DT_MODEL_GPT ? dt_gpt_units(&c->gpt) : c->model.layers;
}

size_t dti_nparams(const dt_train_config *c)
{
    return c->kind == DT_MODEL_GPT ? dt_gpt_nparams(&c->gpt) : dt_mlp_nparams(&c->model);
}

void dti_init_weights(const dt_train_config *c, float *full)
{
    if (c->kind == DT_MODEL_GPT)
        dt_gpt_init(&c->gpt, c->seed, full);
    else
        dt_mlp_init(&c->model, c->seed, full);
}

int dti_data_cols(const dt_train_config *c)
{
    return c->kind == DT_MODEL_GPT ? c->gpt.seq : c->model.in;
}

int dti_labels_per_example(const dt_train_config *c)
{
    return c->kind == DT_MODEL_GPT ? c->gpt.seq : 1;
}

void dti_batch(const dt_train_config *c, int step, int B, int first, int count,
               float *x, int *y)
{
    if (c->kind != DT_MODEL_GPT) {
        dt_data_batch(c->data, step, B, first, count, x, y);
        return;
    }
    size_t n = (size_t)count * c->gpt.seq;
    int *tok = malloc((n ? n : 1) * sizeof *tok);
    DT_REQUIRE(tok != NULL, "out of host memory");
    dt_text_batch(c->text, step, B, c->gpt.seq, first, count, tok, y);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)tok[i];
    free(tok);
}

/* ==== the whole model one unit at a time ==== */

size_t dti_unit_size(const dt_train_config *c, int u)
{
    return c->kind == DT_MODEL_GPT ? dt_gpt_unit_size(&c->gpt, u)
                                   : dt_mlp_layer_size(&c->model, u);
}

size_t dti_unit_offset(const dt_train_config *c, int u)
{
    return c->kind == DT_MODEL_GPT ? dt_gpt_unit_offset(&c->gpt, u)
                                   : dt_mlp_layer_offset(&c->model, u);
}

int dti_unit_tied(const dt_train_config *c, int u)
{
    return c->kind == DT_MODEL_GPT && u == dt_gpt_units(&c->gpt) - 1 ? 0 : -1;
}

void dti_unit_acts_alloc(const dt_train_config *c, int B, dt_device_kind where,
                         MPI_Datatype type, dti_unit_acts *a)
{
    memset(a, 0, sizeof *a);
    a->c = c;
    a->B = B;
    a->type = type;
    a->fp16 = type != MPI_FLOAT;
    if (c->kind == DT_MODEL_GPT) {
        const dt_gpt_config *g = &c->gpt;    /* whole blocks, recomputed as c says */
        size_t ntok = (size_t)B * g->seq;
        a->cut = dt_gpt_whole(g, c->recompute);
        size_t scratch, all = dt_gpt_acts_floats(g, &a->cut, B, g->seq, &scratch);
        dt_gpt_acts_alloc_on(g, &a->cut, B, g->seq, where == DT_CUDA, &a->gpt);
        a->tok = dt_malloc(ntok * sizeof *a->tok, where);       /* (dti_gpt_tokens) */
        dt_memzero(a->tok, ntok * sizeof *a->tok);
        a->htok = where == DT_CUDA ? dti_calloc(ntok, sizeof *a->htok) : NULL;
        a->kept = (all - scratch) * sizeof(float);
        return;
    }
    const dt_mlp_config *m = &c->model;
    dt_mlp_acts_alloc(m, B, where == DT_CUDA, &a->mlp);
    for (int l = 0; l < m->layers; l++)     /* what forward keeps: every layer's in, out */
        a->kept += (size_t)B * (dt_mlp_layer_in(m, l) + dt_mlp_layer_out(m, l)) *
                   sizeof(float);
    size_t ngx = m->layers > 1 ? (size_t)B * m->hidden : 0;
    a->gx[0] = dt_malloc(2 * ngx * sizeof(float), where);
    a->gx[1] = a->gx[0] + ngx;
}

void dti_unit_acts_free(dti_unit_acts *a)
{
    if (a->c->kind == DT_MODEL_GPT) {
        dt_gpt_acts_free(&a->gpt);
        dt_free(a->tok);
        free(a->htok);
    } else {
        dt_mlp_acts_free(&a->mlp);
        dt_free(a->gx[0]);
    }
    memset(a, 0, sizeof *a);
}

const float *dti_unit_forward(dti_unit_acts *a, int u, const float *W, const float *Wt,
                              const float *x, int B, int step)
{
    const dt_train_config *c = a->c;
    double t0 = dt_trace_now();
    if (c->kind == DT_MODEL_GPT) {
        const dt_gpt_config *g = &c->gpt;
        if (u == 0)                           /* the tokens, sent as floats */
            dti_gpt_tokens(x, B, g->seq, g->seq, NULL, a->htok, a->tok);
        dti_gpt_clock k = { "forward", step, -1, t0, 0, 0, 0 };
        dt_gpt_unit_forward(g, &a->cut, u, W, Wt, a->tok, &a->gpt, B, g->seq,
                            dti_gpt_clock_part, &k);
        if (a->fp16)                          /* the unit's output, stored as fp16 */
            dti_round_to(a->type, dt_gpt_unit_output(g, &a->gpt, u), (size_t)B * g->seq *
                           (u == dt_gpt_units(g) - 1 ? g->vocab : g->embed));
        dti_gpt_clock_end(&k, u);
        return u == dt_gpt_units(g) - 1 ? a->gpt.logits : NULL;
    }
    /* the MLP's layer u: z = x W^T + b, then the activation (none after the last) */
    const dt_mlp_config *m = &c->model;
    dt_mlp_acts *k = &a->mlp;
    int in = dt_mlp_layer_in(m, u), out = dt_mlp_layer_out(m, u);
    if (u == 0) {
        dt_memcpy_input(k->x[0], x, (size_t)B * m->in * sizeof(float));   /* the batch */
        if (a->fp16)
            dti_round_to(a->type, k->x[0], (size_t)B * m->in);
        t0 = dt_trace_now();
    }
    size_t nz = (size_t)B * out;
    int was = dt_nn_half_products(a->fp16 && a->type == DT_HALF);   /* half_products */
    dt_linear_forward(k->x[u], W, W + (size_t)out * in, k->z[u], B, in, out);
    dt_nn_half_products(was);
    if (a->fp16)
        dti_round_to(a->type, k->z[u], nz);
    if (u < m->layers - 1) {
        dt_act_forward(m->act, k->z[u], k->x[u + 1], nz);
        if (a->fp16)
            dti_round_to(a->type, k->x[u + 1], nz);
    }
    dti_compute_event("forward", step, u, -1, t0);
    return k->x[u + 1];
}

void dti_unit_backward(dti_unit_acts *a, int u, const float *W, const float *Wt,
                       const float *dlogits, float *dW, float *dWt, int B, int step)
{
    const dt_train_config *c = a->c;
    double t0 = dt_trace_now();
    if (c->kind == DT_MODEL_GPT) {
        const dt_gpt_config *g = &c->gpt;
        dti_gpt_clock k = { "backward", step, -1, t0, 0, 0, 0 };
        dt_gpt_unit_backward(g, &a->cut, u, W, Wt, &a->gpt, dlogits, a->tok, dW, dWt, B,
                             g->seq, dti_gpt_clock_part, &k);
        if (a->fp16)                          /* the stream's gradient, as fp16 */
            dti_round_to(a->type, a->gpt.dres, (size_t)B * g->seq * g->embed);
        dti_gpt_clock_end(&k, u);
        return;
    }
    /* the MLP's layer u, from dy (the logits' gradient for the last) */
    const dt_mlp_config *m = &c->model;
    dt_mlp_acts *k = &a->mlp;
    int in = dt_mlp_layer_in(m, u), out = dt_mlp_layer_out(m, u);
    const float *dy = u == m->layers - 1 ? dlogits : a->dy;         /* (B, out) */
    float *dx = u > 0 ? a->gx[u % 2] : NULL;                        /* (B, in) */
    int was = dt_nn_half_products(a->fp16 && a->type == DT_HALF);
    dt_linear_backward(k->x[u], W, dy, dx, dW, dW + (size_t)out * in, B, in, out);
    dt_nn_half_products(was);
    if (u > 0) {
        dt_act_backward(m->act, k->z[u - 1], dx, dx, (size_t)B * in);
        if (a->fp16)
            dti_round_to(a->type, dx, (size_t)B * in);
    }
    a->dy = dx;
    dti_compute_event("backward", step, u, -1, t0);
}

/* ==== this rank's part ==== */

void dti_model_init(dti_model *m, dti_run *r, int l0, int l1, MPI_Comm tp,
                    dt_tp_style style, int Bmax)
{
    if (r->cfg->kind == DT_MODEL_GPT) {
        dti_gpt_model_init(m, r, l0, l1, tp, Bmax);
        return;
    }
    const dt_mlp_config *c = &r->cfg->model;
    DT_REQUIRE(0 <= l0 && l0 < l1 && l1 <= c->layers, "dti_model_init: layers [%d, %d) "
               "of %d", l0, l1, c->layers);
    memset(m, 0, sizeof *m);
    m->c = c;
    m->tie = MPI_COMM_NULL;
    m->lpe = 1;
    m->classes = c->out;
    m->run = r;
    m->l0 = l0;
    m->l1 = l1;
    m->nl = l1 - l0;
    m->tp = tp;
    MPI_Comm_size(tp, &m->T);
    MPI_Comm_rank(tp, &m->t);
    m->Bmax = Bmax;
    int nl = m->nl;
    m->split = malloc(nl * sizeof *m->split);
    m->in = malloc(nl * sizeof *m->in);
    m->out = malloc(nl * sizeof *m->out);
    m->lo = malloc(nl * sizeof *m->lo);
    m->hi = malloc(nl * sizeof *m->hi);
    m->off = malloc((nl + 1) * sizeof *m->off);
    DT_REQUIRE(m->split && m->in && m->out && m->lo && m->hi && m->off, "out of memory");

    size_t biggest = 0, wide = 0, scratch = 0;
    m->off[0] = 0;
    for (int i = 0; i < nl; i++) {
        int in = full_in(m, i), out = full_out(m, i);
        size_t lo = 0, hi = (size_t)out;
        m->split[i] = dti_tp_split(c, l0 + i, m->T, style);
        m->in[i] = in;
        m->out[i] = out;
        if (m->split[i] == DTI_COL || m->split[i] == DTI_COL_GATHER) {
            dt_chunk_bounds((size_t)out, m->T, m->t, &lo, &hi);
            m->out[i] = (int)(hi - lo);
        } else if (m->split[i] == DTI_ROW) {
            dt_chunk_bounds((size_t)in, m->T, m->t, &lo, &hi);
            m->in[i] = (int)(hi - lo);
        }
        m->lo[i] = (int)lo;
        m->hi[i] = (int)hi;
        size_t size = (size_t)m->out[i] * m->in[i] + m->out[i];
        m->off[i + 1] = m->off[i] + size;
        if (size > biggest)
            biggest = size;
        if ((size_t)(in > out ? in : out) > wide)
            wide = (size_t)(in > out ? in : out);
        size_t s = dti_tp_scratch(m->T, Bmax, in, out);
        if (s > scratch)
            scratch = s;
    }
    m->n = m->off[nl];
    m->type = dti_work_type(r);
    size_t es = dti_work_size(r);
    m->params = dti_alloc(r, DTI_PARAMS, m->n * es, 0);
    m->grads = dti_alloc(r, DTI_GRADS, m->n * es, 0);
    dt_device_kind where = r->where;
    if (m->type != MPI_FLOAT) {
        m->wf = dt_malloc(biggest * sizeof(float), where);
        m->gf = dt_malloc(biggest * sizeof(float), where);
    }
    for (int k = 0; k < 2; k++)
        m->gx[k] = dt_malloc((size_t)Bmax * wide * sizeof(float), where);
    m->tmp = dt_malloc((scratch + (size_t)Bmax * wide) * sizeof(float), where);
    m->dzl = m->tmp + scratch;
}

void dti_model_init_chunks(dti_model *m, dti_run *r, int v, int P, int p, MPI_Comm tp,
                           dt_tp_style style, int Bmax)
{
    int units = dti_units(r->cfg);
    DT_REQUIRE(v >= 1 && P >= 1 && 0 <= p && p < P && units % (v * P) == 0,
               "dti_model_init_chunks: %d units in %d x %d chunks", units, v, P);
    memset(m, 0, sizeof *m);
    dti_model *ch = calloc((size_t)v, sizeof *ch);
    int *cnl = malloc((v + 1) * sizeof *cnl);
    DT_REQUIRE(ch && cnl, "out of host memory");
    size_t es = dti_work_size(r), n = 0;
    cnl[0] = 0;
    for (int j = 0; j < v; j++) {                 /* chunk j: virtual stage j P + p */
        size_t l0, l1;
        dt_chunk_bounds((size_t)units, v * P, j * P + p, &l0, &l1);
        dti_model_init(&ch[j], r, (int)l0, (int)l1, tp, style, Bmax);
        cnl[j + 1] = cnl[j] + ch[j].nl;
        n += ch[j].n;
    }
    m->off = malloc((cnl[v] + 1) * sizeof *m->off);
    DT_REQUIRE(m->off != NULL, "out of host memory");
    m->off[0] = 0;
    for (int j = 0, i = 0; j < v; j++)           /* the chunks' units, in chunk order */
        for (int k = 0; k < ch[j].nl; k++, i++)
            m->off[i + 1] = m->off[i] + (ch[j].off[k + 1] - ch[j].off[k]);
    /* one block of weights and one of gradients: the chunks' own go (first, so that
     * the books' peak is the stage's, not twice it), the chunks see theirs in them */
    for (int j = 0; j < v; j++) {
        dti_free(r, DTI_PARAMS, ch[j].params, ch[j].n * es);
        dti_free(r, DTI_GRADS, ch[j].grads, ch[j].n * es);
    }
    m->params = dti_alloc(r, DTI_PARAMS, n * es, 0);
    m->grads = dti_alloc(r, DTI_GRADS, n * es, 0);
    for (int j = 0; j < v; j++) {
        ch[j].params = (char *)m->params + m->off[cnl[j]] * es;
        ch[j].grads = (char *)m->grads + m->off[cnl[j]] * es;
    }
    /* to the rest of the run, one model: chunk 0's shape, all the units */
    m->c = ch[0].c;
    m->g = ch[0].g;
    m->cut = ch[0].cut;
    m->tie = MPI_COMM_NULL;
    m->lpe = ch[0].lpe;
    m->classes = ch[0].classes;
    m->run = r;
    m->l0 = ch[0].l0;                  /* the first and the last unit: the GPT's tie */
    m->l1 = ch[v - 1].l1;              /* (dti_model_tie) asks for nothing else */
    m->nl = cnl[v];
    m->tp = tp;
    m->T = ch[0].T;
    m->t = ch[0].t;
    m->n = n;
    m->type = ch[0].type;
    m->Bmax = Bmax;
    if (m->g)                          /* wte: in chunk 0 on stage 0, at the end of the */
        m->tie_off = m->l0 == 0 ? 0    /* last chunk on stage P-1 */
                   : m->l1 == units ? m->off[cnl[v - 1]] + ch[v - 1].tie_off : 0;
    m->v = v;
    m->chunk = ch;
    m->chunk_nl = cnl;
}

void dti_model_free(dti_model *m)
{
    for (int j = 0; j < m->v; j++) {   /* their weights and gradients are m's */
        m->chunk[j].params = m->chunk[j].grads = NULL;
        dti_model_free(&m->chunk[j]);
    }
    free(m->chunk);
    free(m->chunk_nl);
    size_t es = dti_work_size(m->run);
    dti_free(m->run, DTI_PARAMS, m->params, m->n * es);
    dti_free(m->run, DTI_GRADS, m->grads, m->n * es);
    if (m->g && m->wf) {              /* the GPT's are counted (model_gpt.c) */
        dti_free(m->run, DTI_PARAMS, m->wf, m->n * sizeof(float));
        dti_free(m->run, DTI_GRADS, m->gf, m->n * sizeof(float));
        m->wf = m->gf = NULL;
    }
    dt_free(m->wf);
    dt_free(m->gf);
    dt_free(m->gx[0]);
    dt_free(m->gx[1]);
    dt_free(m->tmp);
    dt_free(m->sp_buf);
    dt_free(m->sp_wire);
    dt_free(m->sp_ln);
    dti_cp_free(m->cp);
    free(m->split);
    free(m->in);
    free(m->out);
    free(m->lo);
    free(m->hi);
    free(m->off);
    if (m->g && m->tie != MPI_COMM_NULL)
        MPI_Comm_free(&m->tie);
    memset(m, 0, sizeof *m);
}

/* ==== weights in and out ==== */

/* Copies local layer i between the whole model's layout (full) and the local one
 * (local): to_local 1 fills local, 0 fills full. */
static void move_layer(const dti_model *m, int i, float *full, float *local, int to_local)
{
    int in_f = full_in(m, i), out_f = full_out(m, i);
    int in = m->in[i], out = m->out[i], lo = m->lo[i];
    float *Wf = full + dt_mlp_layer_offset(m->c, m->l0 + i);   /* (out_f, in_f) */
    float *bf = Wf + (size_t)out_f * in_f;
    float *W = local + m->off[i];                               /* (out, in) */
    float *b = W + (size_t)out * in;
    float *Wsrc = Wf, *bsrc = bf;                               /* where in full */
    switch (m->split[i]) {
    case DTI_COL: case DTI_COL_GATHER:
        Wsrc = Wf + (size_t)lo * in_f;                          /* rows lo.. */
        bsrc = bf + lo;
        break;
    case DTI_ROW:
        Wsrc = Wf + lo;                                         /* columns lo.. */
        break;
    default:
        break;
    }
    if (to_local) {
        dti_copy_block(W, (size_t)in, Wsrc, (size_t)in_f, out, in, sizeof(float));
        dt_memcpy(b, bsrc, (size_t)out * sizeof(float));
    } else {
        dti_copy_block(Wsrc, (size_t)in_f, W, (size_t)in, out, in, sizeof(float));
        if (m->split[i] != DTI_ROW || m->t == 0)   /* a ROW bias is on every rank */
            dt_memcpy(bsrc, b, (size_t)out * sizeof(float));
    }
}

void dti_model_take(const dti_model *m, const float *full, float *dst)
{
    for (int j = 0; j < m->v; j++)
        dti_model_take(&m->chunk[j], full, dst + m->off[m->chunk_nl[j]]);
    if (m->v)
        return;
    if (m->g) {
        dti_gpt_model_move(m, (float *)full, dst, 1);
        return;
    }
    for (int i = 0; i < m->nl; i++)
        move_layer(m, i, (float *)full, dst, 1);
}

void dti_model_put(const dti_model *m, const float *src, float *full)
{
    for (int j = 0; j < m->v; j++)
        dti_model_put(&m->chunk[j], src + m->off[m->chunk_nl[j]], full);
    if (m->v)
        return;
    if (m->g) {
        dti_gpt_model_move(m, full, (float *)src, 0);
        return;
    }
    for (int i = 0; i < m->nl; i++)
        move_layer(m, i, full, (float *)src, 0);
}

int dti_model_nspans(const dti_model *m)
{
    int n = 0;
    for (int j = 0; j < m->v; j++)
        n += dti_model_nspans(&m->chunk[j]);
    if (m->v)
        return n;
    return m->g ? dti_gpt_model_spans(m, NULL) : 2 * m->nl;
}

int dti_model_spans(const dti_model *m, dti_span *sp)
{
    if (m->v) {                       /* chunk by chunk: the GPT's copy of wte, at the */
        int n = 0;                    /* end of the last, stays last */
        for (int j = 0; j < m->v; j++)
            n += dti_model_spans(&m->chunk[j], sp + n);
        return n;
    }
    if (m->g)
        return dti_gpt_model_spans(m, sp);
    int n = 0;
    for (int i = 0; i < m->nl; i++) {
        size_t in_f = (size_t)full_in(m, i), out_f = (size_t)full_out(m, i);
        size_t W = dt_mlp_layer_offset(m->c, m->l0 + i), b = W + out_f * in_f;
        size_t cols = (size_t)m->in[i], rows = (size_t)m->out[i], lo = (size_t)m->lo[i];
        switch (m->split[i]) {
        case DTI_COL: case DTI_COL_GATHER:         /* rows lo.. of W, and of b */
            sp[n++] = (dti_span){ W + lo * in_f, rows * in_f, 1, 0 };
            sp[n++] = (dti_span){ b + lo, rows, 1, 0 };
            break;
        case DTI_ROW:                              /* columns lo.. of every row; all b */
            sp[n++] = (dti_span){ W + lo, cols, rows, in_f };
            sp[n++] = (dti_span){ b, rows, 1, 0 };
            break;
        default:
            sp[n++] = (dti_span){ W, rows * cols, 1, 0 };
            sp[n++] = (dti_span){ b, rows, 1, 0 };
            break;
        }
    }
    return n;
}

/* ==== activations ==== */

void dti_acts_alloc(const dti_model *m, int B, dti_acts *a)
{
    if (m->g) {
        dti_gpt_acts_alloc(m, B, a);
        return;
    }
    int nl = m->nl;
    int own_out = !is_last_layer(m, nl - 1);     /* x[nl] apart from z[nl-1] */
    size_t total = 0;
    for (int i = 0; i < nl; i++)
        total += (size_t)B * (x_width(m, i) + z_width(m, i));
    if (own_out)
        total += (size_t)B * z_width(m, nl - 1);
    a->B = B;
    a->mem = dt_malloc(total * sizeof(float), m->run->where);
    a->run = m->run;
    a->bytes = total * sizeof(float);
    dti_held(a->run, DTI_ACTS, a->bytes, 1);
    a->x = malloc((nl + 1) * sizeof *a->x);
    a->z = malloc(nl * sizeof *a->z);
    DT_REQUIRE(a->x && a->z, "out of host memory");
    float *p = a->mem;
    for (int i = 0; i < nl; i++) {
        a->x[i] = p;
        p += (size_t)B * x_width(m, i);
        a->z[i] = p;
        p += (size_t)B * z_width(m, i);
    }
    a->x[nl] = own_out ? p : a->z[nl - 1];
}

void dti_acts_free(dti_acts *a)
{
    if (a == NULL)
        return;
    if (a->gpt) {
        dti_gpt_acts_free(a);
        return;
    }
    if (a->run && a->mem)
        dti_held(a->run, DTI_ACTS, a->bytes, 0);
    dt_free(a->mem);
    free(a->x);
    free(a->z);
    memset(a, 0, sizeof *a);
}

/* ==== forward and backward ==== */

/* The trace's mark for one of tensor parallelism's collectives on layer l, spanning
 * [t0, now] (coll "tp", phase f, g or gather, chunk = layer, lo..hi = micro..micro+1;
 * trace.h), after the collective has recorded its own events. Nothing with T = 1,
 * where nothing was sent. */
static void tp_mark(const dti_model *m, const char *phase, int step, int l, int micro,
                    size_t nbytes, double t0)
{
    if (m->T > 1)
        dti_mark("tp", phase, step, l, micro < 0 ? 0 : (size_t)micro,
                 micro < 0 ? 0 : (size_t)micro + 1, nbytes, t0);
}

/* Layer i's weights as fp32: in place in fp32, widened into m->wf in fp16. */
static const float *weights(dti_model *m, int i)
{
    size_t size = m->off[i + 1] - m->off[i];
    if (m->type == MPI_FLOAT)
        return (const float *)m->params + m->off[i];
    dti_to_float((const char *)m->params + m->off[i] * 2, m->type, m->wf, size, 1.0f);
    return m->wf;
}

static void round_if_half(const dti_model *m, float *x, size_t n)
{
    dti_round_to(m->type, x, n);               /* fp16 or bf16; nothing in fp32 */
}

/* In fp16 the GPU's products run on the tensor cores (nn.h, dt_nn_half_products): their
 * inputs hold fp16 values but for the first layer's, the batch, which the tensor cores
 * round to fp16 as autocast does. Returns the setting to restore. */
static int half_products(const dti_model *m)
{
    return dt_nn_half_products(m->type == DT_HALF);
}

const float *dti_model_forward(dti_model *m, dti_acts *a, const float *x_in, int B,
                               int step, int micro)
{
    if (m->g)
        return dti_gpt_model_forward(m, a, x_in, B, step, micro);
    DT_REQUIRE(B >= 1 && B <= a->B && B <= m->Bmax, "dti_model_forward: %d rows, "
               "buffers for %d", B, a->B < m->Bmax ? a->B : m->Bmax);
    /* x_in on the host is the data loader's batch, on its way up (counted as the
     * batch in the device books); from a device buffer (a stage's received input, a
     * replica's rows) the copy stays on the GPU */
    dt_memcpy_input(a->x[0], x_in, (size_t)B * x_width(m, 0) * sizeof(float));
    int was = half_products(m);
    for (int i = 0; i < m->nl; i++) {
        int in = m->in[i], out = m->out[i], l = m->l0 + i;
        double t0 = dt_trace_now();
        const float *W = weights(m, i);                 /* (out, in) */
        const float *b = W + (size_t)out * in;          /* (out) */
        switch (m->split[i]) {
        case DTI_WHOLE: case DTI_COL:
            dt_linear_forward(a->x[i], W, b, a->z[i], B, in, out);
            break;
        case DTI_ROW:           /* partial sums; the bias is added once, by rank 0 */
            dt_linear_forward(a->x[i], W, m->t == 0 ? b : NULL, a->z[i], B, in, out);
            dti_compute_event("forward", step, l, micro, t0);
            t0 = dt_trace_now();
            dti_tp_allreduce(m, a->z[i], (size_t)B * out);             /* g */
            tp_mark(m, "g", step, l, micro, (size_t)B * out * dti_work_size(m->run), t0);
            t0 = dt_trace_now();
            break;
        case DTI_COL_GATHER:    /* a layer narrower than T leaves some ranks none */
            if (out > 0)
                dt_linear_forward(a->x[i], W, b, m->dzl, B, in, out);
            dti_compute_event("forward", step, l, micro, t0);
            t0 = dt_trace_now();
            dti_tp_allgather_cols(m, m->dzl, a->z[i], B, full_out(m, i));
            tp_mark(m, "gather", step, l, micro,
                    (size_t)B * full_out(m, i) * dti_work_size(m->run), t0);
            t0 = dt_trace_now();
            break;
        }
        size_t nz = (size_t)B * z_width(m, i);
        round_if_half(m, a->z[i], nz);
        if (!is_last_layer(m, i)) {
            dt_act_forward(m->c->act, a->z[i], a->x[i + 1], nz);
            round_if_half(m, a->x[i + 1], nz);
        }
        dti_compute_event("forward", step, l, micro, t0);
    }
    dt_nn_half_products(was);
    return a->x[m->nl];
}

/* Layer i's output gradient dz (B, z_width) as its weights see it: a gathered layer's
 * own columns (into m->dzl), else dz itself. */
static const float *own_cols(dti_model *m, int i, const float *dz, int B)
{
    if (m->split[i] != DTI_COL_GATHER)
        return dz;
    dti_copy_block(m->dzl, (size_t)m->out[i], dz + m->lo[i], (size_t)full_out(m, i), B,
                   m->out[i], sizeof(float));
    return m->dzl;
}

/* After layer i's products wrote dxi, the gradient of x[i]: summed over the tp group
 * where x[i] is whole on every rank (f), rounded in fp16, and, for i > 0, taken through
 * the activation of layer i-1 into dz_prev (dxi itself, or B's z[i-1]). */
static void input_grad_on(dti_model *m, dti_acts *a, int i, float *dxi, float *dz_prev,
                          int B, int step, int micro)
{
    int l = m->l0 + i;
    size_t nx = (size_t)B * x_width(m, i);
    double t0;
    if (m->split[i] == DTI_COL || m->split[i] == DTI_COL_GATHER) {
        t0 = dt_trace_now();
        dti_tp_allreduce(m, dxi, nx);                                  /* f */
        tp_mark(m, "f", step, l, micro, nx * dti_work_size(m->run), t0);
    }
    round_if_half(m, dxi, nx);
    if (i > 0) {                         /* through the activation of layer i-1 */
        t0 = dt_trace_now();
        dt_act_backward(m->c->act, a->z[i - 1], dxi, dz_prev, nx);
        round_if_half(m, dz_prev, nx);
        dti_compute_event("backward", step, l - 1, micro, t0);
    }
}

void dti_model_backward(dti_model *m, dti_acts *a, const float *dy, float *dx, int B,
                        int step, int micro, void (*layer_done)(int i, void *ctx),
                        void *ctx)
{
    if (m->g) {
        dti_gpt_model_backward(m, a, dy, dx, B, step, micro, layer_done, ctx);
        return;
    }
    int nl = m->nl;
    DT_REQUIRE(B >= 1 && B <= a->B && B <= m->Bmax, "dti_model_backward: %d rows", B);
    const float *dz = dy;                            /* gradient of z[i] (B, z_width) */
    int was = half_products(m);
    if (!is_last_layer(m, nl - 1)) {                 /* dy is that of act(z[nl-1]) */
        size_t n = (size_t)B * z_width(m, nl - 1);
        dt_act_backward(m->c->act, a->z[nl - 1], dy, m->gx[0], n);
        round_if_half(m, m->gx[0], n);
        dz = m->gx[0];
    }
    for (int i = nl - 1; i >= 0; i--) {
        int in = m->in[i], out = m->out[i], l = m->l0 + i;
        double t0 = dt_trace_now();
        const float *W = weights(m, i);
        float *dW = m->type == MPI_FLOAT ? (float *)m->grads + m->off[i] : m->gf;
        if (m->type != MPI_FLOAT)
            dt_memzero(m->gf, (m->off[i + 1] - m->off[i]) * sizeof(float));
        float *db = dW + (size_t)out * in;
        /* the input gradient: into the free buffer, or the caller's dx for layer 0 */
        float *dxi = i > 0 ? (dz == m->gx[0] ? m->gx[1] : m->gx[0]) : dx;
        const float *dyl = own_cols(m, i, dz, B);
        if (out > 0)
            dt_linear_backward(a->x[i], W, dyl, dxi, dW, db, B, in, out);
        else if (dxi)                    /* no columns: no part in the sum */
            dt_memzero(dxi, (size_t)B * in * sizeof(float));
        if (m->type != MPI_FLOAT)
            dti_accumulate((char *)m->grads + m->off[i] * 2, m->type, m->gf,
                           m->off[i + 1] - m->off[i]);
        dti_compute_event("backward", step, l, micro, t0);
        if (layer_done)
            layer_done(i, ctx);
        if (dxi == NULL)
            continue;
        input_grad_on(m, a, i, dxi, dxi, B, step, micro);
        dz = dxi;
    }
    dt_nn_half_products(was);
}

/* Zero bubble's B: as dti_model_backward without the weights' products; each layer's
 * output gradient dz[i] overwrites z[i], which only B needed (W needs x[i] and dz[i]). */
void dti_model_backward_input(dti_model *m, dti_acts *a, const float *dy, float *dx,
                              int B, int step, int micro)
{
    if (m->g) {
        dti_gpt_model_backward_input(m, a, dy, dx, B, step, micro);
        return;
    }
    int nl = m->nl;
    DT_REQUIRE(B >= 1 && B <= a->B && B <= m->Bmax, "dti_model_backward_input: %d rows", B);
    int was = half_products(m);
    size_t n = (size_t)B * z_width(m, nl - 1);
    if (!is_last_layer(m, nl - 1)) {                 /* dy is that of act(z[nl-1]) */
        dt_act_backward(m->c->act, a->z[nl - 1], dy, a->z[nl - 1], n);
        round_if_half(m, a->z[nl - 1], n);
    } else {
        dt_memcpy(a->z[nl - 1], dy, n * sizeof(float));
    }
    for (int i = nl - 1; i >= 0; i--) {
        int in = m->in[i], out = m->out[i], l = m->l0 + i;
        float *dxi = i > 0 ? m->gx[0] : dx;          /* the gradient of x[i] */
        if (dxi == NULL)
            break;
        double t0 = dt_trace_now();
        const float *dyl = own_cols(m, i, a->z[i], B);
        if (out > 0)
            dt_linear_backward(NULL, weights(m, i), dyl, dxi, NULL, NULL, B, in, out);
        else
            dt_memzero(dxi, (size_t)B * in * sizeof(float));
        dti_compute_event("backward", step, l, micro, t0);
        input_grad_on(m, a, i, dxi, i > 0 ? a->z[i - 1] : NULL, B, step, micro);
    }
    dt_nn_half_products(was);
}

/* Zero bubble's W: the weights' gradients from x[i] and the dz[i] B left in z[i]. */
void dti_model_backward_weights(dti_model *m, dti_acts *a, int B, int step, int micro,
                                void (*layer_done)(int i, void *ctx), void *ctx)
{
    if (m->g) {
        dti_gpt_model_backward_weights(m, a, B, step, micro, layer_done, ctx);
        return;
    }
    int was = half_products(m);
    for (int i = m->nl - 1; i >= 0; i--) {
        int in = m->in[i], out = m->out[i], l = m->l0 + i;
        double t0 = dt_trace_now();
        float *dW = m->type == MPI_FLOAT ? (float *)m->grads + m->off[i] : m->gf;
        if (m->type != MPI_FLOAT)
            dt_memzero(m->gf, (m->off[i + 1] - m->off[i]) * sizeof(float));
        const float *dyl = own_cols(m, i, a->z[i], B);
        if (out > 0)
            dt_linear_backward(a->x[i], NULL, dyl, NULL, dW, dW + (size_t)out * in, B, in,
                               out);
        if (m->type != MPI_FLOAT)
            dti_accumulate((char *)m->grads + m->off[i] * 2, m->type, m->gf,
                           m->off[i + 1] - m->off[i]);
        dti_compute_event("backward", step, l, micro, t0);
        if (layer_done)
            layer_done(i, ctx);
    }
    dt_nn_half_products(was);
}
