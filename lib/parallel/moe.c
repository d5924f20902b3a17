/* Mixture of experts (train --mode moe): a layer of E experts, each token sent to its
 * top-k of them, the experts spread over the ranks; here the layer (dti_moe_*,
 * moe_layer.h) and the MLP around it; moe_gpt.c puts the same layer in the GPT, in
 * place of the MLP of every other block, the experts being MLPs of their own.
 *
 * The model. Layer mid = layers / 2 of the MLP (a hidden -> hidden layer, so layers >= 3)
 * becomes an MoE layer; the others stay as they are:
 *
 *     x (B, H) --gate: linear H -> E, softmax--> p (B, E) --top-k--> experts e1 (, e2)
 *     y = x + p[e1] * expert_e1(x) (+ p[e2] * expert_e2(x))
 *     expert_e(x) = act(x W_e^T + b_e),   W_e (H, H)
 *
 * The gate's probabilities weigh the experts' outputs (not renormalised over the k
 * chosen), and the layer is a residual: a token whose expert is full passes through
 * unchanged (dropped). The load-balancing loss of Switch Transformer is added to the
 * cross-entropy: aux = alpha * E * sum_e f_e * P_e over the global batch, f_e the
 * fraction of tokens whose first choice is e, P_e the mean probability of e. Its gradient
 * alpha * E * f_e / B reaches every p[e] (f_e counts, it has no gradient): experts that
 * get many tokens are made less likely. The reported loss is the cross-entropy; the aux
 * loss is printed beside it.
 *
 * The ranks. Rank r holds experts [r E/N, (r+1) E/N); everything else (the other layers
 * and the gate) is replicated and data parallel, its gradients summed over the ranks.
 * An expert lives on one rank only, so its gradient needs no allreduce: the rank that
 * holds it already has the sum over every token that visited it.
 *
 * Groups and capacity (GShard). The global batch is cut into G groups of T tokens (G a
 * multiple of N, each rank G/N consecutive groups). In each group every expert has C
 * slots, C = ceil(capacity * k * T / E) (at most T); tokens take slots in token order,
 * all first choices before any second choice, and a choice that finds its expert full
 * is dropped (moe_route.c). Fixed slots make fixed messages:
 *
 *   rank r's send buffer: [to rank q][its group g][q's expert j][slot c][H floats]
 *
 *            to rank 0                 to rank 1              (N = 2, E = 4, G/N = 1)
 *       | e0: c0 c1 c2 | e1: c0 .. | e2: c0 c1 c2 | e3: c0 .. |
 *
 * so dt_alltoall moves G/N * E/N * C * H floats between every pair of ranks, filled or
 * not (unfilled slots are zeros; a small all-to-all of counts tells each expert how
 * many slots are filled, and it computes only those).
 *
 * One step, on every rank:
 *   1. forward the layers before mid on this rank's B/N rows, a group at a time
 *   2. gate, softmax, top-k; route each group into slots; one dt_allreduce of the
 *      routing counts (f_e for the aux loss, and the books)
 *   3. dispatch: all-to-all of the slots (and of the counts); each expert runs on the
 *      filled slots of every group, in group order
 *   4. combine: all-to-all back; y = x + sum of p * expert output
 *   5. forward the layers after mid, cross-entropy, backward down to mid
 *   6. backward of the MoE layer: the gradients of the expert outputs (p * dy) go to the
 *      experts by all-to-all, the experts' backward, the gradients of their inputs come
 *      back by all-to-all; then the gate's softmax and linear backward
 *   7. backward of the layers before mid; the replicated gradients summed (below)
 *   8. the optimizer on everything this rank holds
 * Four all-to-alls of slots a step, each (N-1) * G/N * E/N * C * H * 4 bytes per rank;
 * the trace marks them (coll "moe") dispatch, combine, grad-dispatch and grad-combine.
 *
 * The reference. Routing depends only on the groups, never on the ranks: the same run on
 * fewer ranks with the same --moe-groups routes, fills and drops alike, and each expert
 * sees the same rows in the same order. But routing is a cliff: a rounding difference
 * of 1e-7 in a weight can flip a token to another expert, and from there the runs part.
 * An allreduce sums the replicated gradients in an order that depends on N, so moe
 * keeps each group's gradient apart, allgathers them and sums them in group order, on
 * any number of ranks the same. The price: the allgather sends (N-1) G/N copies of
 * those gradients per rank where an allreduce sends 2 (N-1)/N, N/2 times the bytes
 * for G = N. In return the 1-rank run with G groups, the reference, ends with the same
 * weights bit for bit, the same dropped counts, and the same losses (to the last digit
 * or so: the loss itself is summed over the ranks with an allreduce).
 *
 * On a GPU (on_device) the whole step runs there: the weights, their gradients and
 * optimizer state, the activations, the slots and the scratch live in device memory
 * (moe_init); the products go to cuBLAS through lib/nn, and the loops over tokens
 * (softmax, top-k, routing, the slots, combine, their backward, the step's figures, the
 * sum over groups) to the kernels of moe_kernels.cu, each a copy of its host loop in
 * moe_route.c. The all-to-alls and the allgather move device buffers. What crosses to
 * the host each step is what it needs as numbers: the filled-slot counts (they size the
 * experts' products and are the all-to-all of counts) with the routed counts, and the
 * step's figures (the books, the aux loss), read by dt_memcpy_number; the batch goes up
 * by dt_memcpy_input. Nothing is allocated inside a step.
 *
 * The GPU against the CPU. Routing, slots, combine and the sums over groups add the
 * same numbers in the same order on both sides (the kernels use no fused multiply-add),
 * but cuBLAS rounds its products differently from OpenBLAS, and CUDA's expf can differ
 * from the C library's in the last bit. So a GPU run follows the CPU run to rounding
 * (scripts/gpu-check.sh holds the weights to 1e-4) only while no choice flips: a token
 * whose two best experts are nearly tied may go to the other one on the GPU, and from
 * there the runs part. On either side alone, any number of ranks gives the same weights
 * bit for bit (cuBLAS, as OpenBLAS, gives a product of one shape the same bits each
 * time).
 *
 * Not supported, refused by dti_moe_check: fp16, checkpoints, --accum.
 *
 * The code: the layer's buffers (dti_moe_init), its forward and backward, the sums over
 * groups and the optimizer, the books; then the MLP's side (dti_train_moe). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "cuda.h"
#include "moe_layer.h"
#include "nn/gpt.h"
#include "p2p.h"
#include "trace.h"

/* ==== the buffers ==== */

/* Every buffer of dti_moe_init: where it points, what the run's books count it as
 * (DTI_PARAMS, DTI_GRADS, DTI_OPTIM, DTI_ACTS: dti_alloc, where the run lives), or
 * SCRATCH (dt_malloc there, uncounted, as lib/nn's scratch is) or HOST (host memory:
 * what the host reads or keeps), and its bytes (0: none). Written once, for
 * dti_moe_init and dti_moe_free alike. */
enum { SCRATCH = -1, HOST = -2 };
typedef struct {
    void **p;
    int what;
    size_t nbytes;
} moe_buf;

#define MOE_NBUFS(nl) (16 + 32 * (nl))

static int moe_buffers(dti_moe *m, moe_buf *b, int apart)
{
    size_t f = sizeof(float), i4 = sizeof(int), d8 = sizeof(double);
    size_t Bl = (size_t)m->Bl, H = (size_t)m->H, E = (size_t)m->E, k = (size_t)m->k;
    size_t S = (size_t)dt_optim_state_per_param(m->cfg->optim.kind);
    size_t nb = (size_t)m->N * m->Gl * m->El, nslot = m->N * m->blk * f;
    size_t nwide = m->N * m->blkf * f;
    int n = 0;
#define BUF(ptr, what, bytes) (b[n++] = (moe_buf){ (void **)&(ptr), (what), (bytes) })
    BUF(m->pg, DTI_GRADS, m->G * m->nd * f);
    BUF(m->labels, SCRATCH, Bl * i4);
    BUF(m->st, SCRATCH, m->nl * (size_t)m->nst * d8);
    BUF(m->dy, SCRATCH, Bl * H * f);
    BUF(m->dx, SCRATCH, Bl * H * f);
    BUF(m->tmp, SCRATCH, Bl * H * f);
    BUF(m->zero, SCRATCH, apart ? Bl * H * f : 0);
    BUF(m->dp, SCRATCH, Bl * E * f);
    BUF(m->dh, SCRATCH, m->gpt ? (size_t)m->C * m->F * f : 0);
    BUF(m->st_h, HOST, m->nl * (size_t)m->nst * d8);
    for (int i = 0; i < m->nl; i++) {
        dti_moe_layer *l = &m->ly[i];
        BUF(l->gate, DTI_PARAMS, m->ng * f);
        BUF(l->ggate, DTI_GRADS, m->ng * f);
        BUF(l->ex, DTI_PARAMS, m->El * m->nx * f);
        BUF(l->gex, DTI_GRADS, m->El * m->nx * f);
        BUF(l->sgate, DTI_OPTIM, m->ng * S * f);
        BUF(l->sex, DTI_OPTIM, m->El * m->nx * S * f);
        BUF(l->h, DTI_ACTS, Bl * H * f);
        BUF(l->res, DTI_ACTS, apart ? Bl * H * f : 0);
        BUF(l->prob, DTI_ACTS, Bl * E * f);
        BUF(l->choice, DTI_ACTS, Bl * k * i4);
        BUF(l->slot, DTI_ACTS, Bl * k * i4);
        BUF(l->counts, DTI_ACTS, m->ncounts * i4);
        BUF(l->y, DTI_ACTS, Bl * H * f);
        float **slots[] = { &l->xs, &l->xe, &l->ye, &l->ys, &l->dys, &l->dye, &l->dxe,
                            &l->dxs };
        for (int j = 0; j < 8; j++)
            BUF(*slots[j], DTI_ACTS, nslot);
        BUF(l->ze, DTI_ACTS, nwide);
        BUF(l->ge, DTI_ACTS, m->gpt ? nwide : 0);
        BUF(l->aux, SCRATCH, E * f);
        BUF(l->counts_h, HOST, m->ncounts * i4);
        BUF(l->ns, HOST, nb * i4);
        BUF(l->ne, HOST, nb * i4);
    }
#undef BUF
    DT_REQUIRE(n <= MOE_NBUFS(m->nl), "moe_buffers: %d buffers, room for %d", n,
               MOE_NBUFS(m->nl));
    return n;
}

void dti_moe_init(dti_moe *m, dti_run *r, int gpt, int H, int F, int T, int nl,
                  const int *at, size_t nmodel, int res_apart)
{
    const dt_train_config *cfg = r->cfg;
    memset(m, 0, sizeof *m);
    m->r = r;
    m->cfg = cfg;
    m->dev = r->where == DT_CUDA;
    m->gpt = gpt;
    m->N = r->size;
    m->rank = r->rank;
    m->E = dt_moe_experts(cfg, m->N);
    m->El = m->E / m->N;
    m->k = cfg->topk;
    m->G = dt_moe_groups(cfg, m->N);
    m->Gl = m->G / m->N;
    m->T = T;
    m->C = dt_moe_capacity(cfg, m->N);
    m->H = H;
    m->F = F;
    m->Bl = m->Gl * T;
    m->d = (dti_moe_dims){ .N = m->N, .E = m->E, .El = m->El, .k = m->k, .Gl = m->Gl,
                           .T = T, .C = m->C, .H = H };
    m->nl = nl;
    m->ly = dti_calloc(nl, sizeof *m->ly);
    for (int i = 0; i < nl; i++)
        m->ly[i].at = at[i];
    m->ng = (size_t)m->E * H + m->E;
    m->nx = gpt ? 2 * (size_t)H * F + F + H : (size_t)H * H + H;
    m->nmodel = nmodel;
    m->nd = nmodel + nl * m->ng;
    m->blk = (size_t)m->Gl * m->El * m->C * H;
    m->blkf = (size_t)m->Gl * m->El * m->C * F;
    m->ncounts = (size_t)m->Gl * (2 * m->E + 1);
    m->nst = DTI_MOE_NST(m->E);
    moe_buf *b = dti_calloc(MOE_NBUFS(nl), sizeof *b);
    int nb = moe_buffers(m, b, res_apart);
    for (int i = 0; i < nb; i++) {
        if (b[i].nbytes == 0) {
            *b[i].p = NULL;
        } else if (b[i].what == HOST) {
            *b[i].p = dti_calloc(b[i].nbytes, 1);
        } else if (b[i].what == SCRATCH) {
            *b[i].p = dt_malloc(b[i].nbytes, r->where);
            dt_memzero(*b[i].p, b[i].nbytes);
        } else {
            *b[i].p = dti_alloc(r, b[i].what, b[i].nbytes, 0);
        }
    }
    free(b);
    for (int i = 0; i < nl; i++) {
        dti_moe_layer *l = &m->ly[i];
        if (!res_apart)
            l->res = l->h;
        l->routed = l->counts;
        l->kept = l->counts + (size_t)m->Gl * m->E;
        l->dropped = l->counts + (size_t)2 * m->Gl * m->E;
    }
}

void dti_moe_free(dti_moe *m)
{
    int apart = m->nl > 0 && m->ly[0].res != m->ly[0].h;
    moe_buf *b = dti_calloc(MOE_NBUFS(m->nl), sizeof *b);
    int nb = moe_buffers(m, b, apart);
    for (int i = 0; i < nb; i++) {
        if (b[i].nbytes == 0)
            continue;
        if (b[i].what == HOST)
            free(*b[i].p);
        else if (b[i].what == SCRATCH)
            dt_free(*b[i].p);
        else
            dti_free(m->r, b[i].what, *b[i].p, b[i].nbytes);
    }
    free(b);
    free(m->ly);
}

/* The block of group gl of rank s for local expert je, at the experts' side: its first
 * slot's index (times H or F: its first float), and *rows, the filled slots. */
static size_t block_at(const dti_moe_layer *l, const dti_moe *m, int s, int gl, int je,
                       int *rows)
{
    size_t b = ((size_t)s * m->Gl + gl) * m->El + je;
    *rows = l->ne[b];
    return b * m->C;
}

float *dti_moe_group_grad(const dti_moe *m, int g)
{
    return m->pg + ((size_t)m->rank * m->Gl + g) * m->nd;
}

void dti_moe_step_begin(dti_moe *m)
{
    dt_memzero(dti_moe_group_grad(m, 0), m->Gl * m->nd * sizeof(float));
    for (int i = 0; i < m->nl; i++)
        dt_memzero(m->ly[i].gex, m->El * m->nx * sizeof(float));
    dt_memzero(m->st, m->nl * (size_t)m->nst * sizeof(double));
}

/* The replicated weights' gradient: every group's part, gathered on every rank, summed
 * in group order 0 .. G-1. Any number of ranks adds the same numbers in the same order,
 * so routing, which a rounding difference could flip, stays the same too (an
 * allreduce sums in an order that depends on N). */
void dti_moe_sum_groups_into(dti_moe *m, float *const *dst, const size_t *n, int nseg)
{
    dti_cuda_settle();          /* the kernels queued (device.cu), before a collective */
    dt_allgather(MPI_IN_PLACE, 0, MPI_FLOAT, m->pg, (int)(m->Gl * m->nd), MPI_FLOAT,
                 m->r->comm);
    size_t off = 0;
    for (int i = 0; i < nseg; off += n[i], i++)
        dti_moe_sum_groups(m->pg + off, m->nd, m->G, n[i], dst[i]);
    DT_REQUIRE(off == m->nmodel, "dti_moe_sum_groups_into: %zu floats, the model side "
               "has %zu", off, m->nmodel);
    for (int i = 0; i < m->nl; i++, off += m->ng)
        dti_moe_sum_groups(m->pg + off, m->nd, m->G, m->ng, m->ly[i].ggate);
}

void dti_moe_optimize(dti_moe *m)
{
    for (int i = 0; i < m->nl; i++) {
        dti_master_step(m->r, m->ly[i].gate, NULL, m->ly[i].ggate, m->ly[i].sgate, m->ng);
        dti_master_step(m->r, m->ly[i].ex, NULL, m->ly[i].gex, m->ly[i].sex,
                        m->El * m->nx);
    }
}

/* ==== forward and backward of an MoE layer ==== */

/* The trace's mark for one all-to-all of slots (coll "moe", phase dispatch, combine,
 * grad-dispatch or grad-combine, chunk -1; trace.h) spanning [t0, now], after the
 * collective recorded its own events; nbytes = the send buffer, N * blk floats. */
static void mark(const dti_moe *m, const char *phase, int step, double t0)
{
    dti_mark("moe", phase, step, -1, 0, 0, m->N * m->blk * sizeof(float), t0);
}

/* One all-to-all of slots, send (N * blk floats) to recv, marked as phase. */
static void slots_alltoall(dti_moe *m, const float *send, float *recv, const char *phase,
                           int step)
{
    dti_cuda_settle();          /* the kernels queued (device.cu), before a collective */
    double tm = dti_mark_begin();
    dt_alltoall(send, (int)m->blk, MPI_FLOAT, recv, (int)m->blk, MPI_FLOAT, m->r->comm);
    mark(m, phase, step, tm);
}

/* Local expert je of layer l: the GPT's MLP's tensors (w1, b1, w2, b2) in w */
static dt_gpt_block expert_mlp(const dti_moe *m, float *w)
{
    dt_gpt_block p;
    dt_gpt_mlp_at(&m->cfg->gpt, m->F, w, &p);
    return p;
}

/* Expert je's forward on the rows of one block of slots, at slot index i */
static void expert_forward(dti_moe *m, dti_moe_layer *l, int je, size_t i, int rows)
{
    size_t H = (size_t)m->H, F = (size_t)m->F;
    float *W = l->ex + je * m->nx;
    if (m->gpt) {
        dt_gpt_block p = expert_mlp(m, W);
        dt_gpt_mlp_forward(&p, l->xe + i * H, l->ze + i * F, l->ge + i * F, l->ye + i * H,
                           rows, m->H, m->F, 1);
    } else {
        dt_linear_forward(l->xe + i * H, W, W + H * H, l->ze + i * H, rows, m->H, m->H);
        dt_act_forward(m->cfg->model.act, l->ze + i * H, l->ye + i * H, (size_t)rows * H);
    }
}

/* Its backward: dye at i the gradient of its output (overwritten), dxe at i that of its
 * input; the gradients added to gex's */
static void expert_backward(dti_moe *m, dti_moe_layer *l, int je, size_t i, int rows)
{
    size_t H = (size_t)m->H, F = (size_t)m->F;
    float *W = l->ex + je * m->nx, *dW = l->gex + je * m->nx;
    if (m->gpt) {
        dt_gpt_block p = expert_mlp(m, W), g = expert_mlp(m, dW);
        dt_gpt_mlp_backward(&p, l->xe + i * H, l->ze + i * F, l->ge + i * F, l->dye + i * H,
                            m->dh, l->dxe + i * H, &g, rows, m->H, m->F);
    } else {
        dt_act_backward(m->cfg->model.act, l->ze + i * H, l->dye + i * H, l->dye + i * H,
                        (size_t)rows * H);
        dt_linear_backward(l->xe + i * H, W, l->dye + i * H, l->dxe + i * H, dW,
                           dW + H * H, rows, m->H, m->H);
    }
}

/* Which of m's layers l is */
static int layer_index(const dti_moe *m, const dti_moe_layer *l)
{
    return (int)(l - m->ly);
}

void dti_moe_forward(dti_moe *m, dti_moe_layer *l, int step)
{
    int Bl = m->Bl, E = m->E, H = m->H, k = m->k, li = layer_index(m, l);
    const float *x = l->h;
    double t0 = dt_trace_now();
    /* the gate: probabilities and choices, then each group's slots. A group at a time,
     * as every product here: sgemm's rounding of a row depends on how many rows the
     * call has, and a group's T rows are the same on any number of ranks */
    for (int g = 0; g < m->Gl; g++)
        dt_linear_forward(x + (size_t)g * m->T * H, l->gate, l->gate + (size_t)E * H,
                          l->prob + (size_t)g * m->T * E, m->T, H, E);
    dti_moe_softmax(l->prob, l->prob, Bl, E);
    dti_moe_topk(l->prob, Bl, E, k, l->choice);
    dti_moe_route_groups(m->d, l->choice, l->slot, l->routed, l->kept, l->dropped);
    dti_moe_stats(m->d, l->prob, l->choice, l->routed, l->dropped,
                  m->st + (size_t)li * m->nst);
    /* the slots: each kept choice's token; the host needs the filled count of every
     * block (it sizes the experts' products), and the routed ones for the books */
    dti_moe_scatter(m->d, x, l->choice, l->slot, l->xs);
    dt_memcpy_number(l->counts_h, l->counts, m->ncounts * sizeof(int));
    const int *kept = l->counts_h + (size_t)m->Gl * E;
    for (int q = 0; q < m->N; q++)
        for (int g = 0; g < m->Gl; g++)
            for (int je = 0; je < m->El; je++)
                l->ns[((size_t)q * m->Gl + g) * m->El + je] =
                    kept[(size_t)g * E + q * m->El + je];
    dti_compute_part("forward", m->gpt ? "moe" : NULL, step, l->at, -1, t0);

    /* dispatch: the counts (host), then the slots (the copy of the counts waited for
     * the kernels above) */
    int nb = m->Gl * m->El;
    double tm = dti_mark_begin();
    dt_alltoall(l->ns, nb, MPI_INT, l->ne, nb, MPI_INT, m->r->comm);
    size_t sent0 = dt_bytes_sent();
    dt_alltoall(l->xs, (int)m->blk, MPI_FLOAT, l->xe, (int)m->blk, MPI_FLOAT, m->r->comm);
    l->dispatch_bytes = dt_bytes_sent() - sent0;
    mark(m, "dispatch", step, tm);

    /* the experts, each on the filled slots of every group in group order */
    t0 = dt_trace_now();
    dt_memzero(l->ye, m->N * m->blk * sizeof(float));
    for (int je = 0; je < m->El; je++)
        for (int s = 0; s < m->N; s++)
            for (int gl = 0; gl < m->Gl; gl++) {
                int rows;
                size_t i = block_at(l, m, s, gl, je, &rows);
                expert_forward(m, l, je, i, rows);
            }
    dti_compute_part("forward", m->gpt ? "moe" : NULL, step, l->at, -1, t0);

    /* combine: y = res + p * expert output, choices in order */
    slots_alltoall(m, l->ye, l->ys, "combine", step);
    t0 = dt_trace_now();
    dti_moe_combine(m->d, l->res, l->prob, l->choice, l->slot, l->ys, l->y);
    dti_compute_part("forward", m->gpt ? "moe" : NULL, step, l->at, -1, t0);
}

void dti_moe_backward(dti_moe *m, dti_moe_layer *l, const float *dy, int step)
{
    int Bl = m->Bl, E = m->E, H = m->H, li = layer_index(m, l);
    const float *x = l->h;
    double t0 = dt_trace_now();
    /* dp = aux + dy . (expert output) for each kept choice; the experts get p * dy */
    dti_moe_slots_backward(m->d, dy, l->prob, l->choice, l->slot, l->ys, l->aux, m->dp,
                           l->dys);
    dti_compute_part("backward", m->gpt ? "moe" : NULL, step, l->at, -1, t0);
    slots_alltoall(m, l->dys, l->dye, "grad-dispatch", step);

    /* the experts' backward, blocks in the order of forward */
    t0 = dt_trace_now();
    dt_memzero(l->dxe, m->N * m->blk * sizeof(float));
    for (int je = 0; je < m->El; je++)
        for (int s = 0; s < m->N; s++)
            for (int gl = 0; gl < m->Gl; gl++) {
                int rows;
                size_t i = block_at(l, m, s, gl, je, &rows);
                expert_backward(m, l, je, i, rows);
            }
    dti_compute_part("backward", m->gpt ? "moe" : NULL, step, l->at, -1, t0);
    slots_alltoall(m, l->dxe, l->dxs, "grad-combine", step);

    /* the gate's part, then dx = the residual's (dy when it adds h) + what came back
     * from the experts + the gate's part */
    t0 = dt_trace_now();
    dti_moe_softmax_backward(l->prob, m->dp, m->dp, Bl, E);
    for (int g = 0; g < m->Gl; g++) {          /* the gate's gradient, group by group */
        size_t t0g = (size_t)g * m->T;
        float *dW = dti_moe_group_grad(m, g) + m->nmodel + (size_t)li * m->ng;
        dt_linear_backward(x + t0g * H, l->gate, m->dp + t0g * E, m->tmp + t0g * H, dW,
                           dW + (size_t)E * H, m->T, H, E);
    }
    dti_moe_x_backward(m->d, l->res == l->h ? dy : m->zero, l->choice, l->slot, l->dxs,
                       m->tmp, m->dx);
    dti_compute_part("backward", m->gpt ? "moe" : NULL, step, l->at, -1, t0);
}

double dti_moe_figures(dti_moe *m, double loss)
{
    int E = m->E, B = m->G * m->T;
    size_t n = m->nl * (size_t)m->nst;
    dti_moe_set_loss(m->st, E, loss);
    dti_cuda_settle();          /* the kernels queued (device.cu), before a collective */
    dt_allreduce(MPI_IN_PLACE, m->st, (int)n, MPI_DOUBLE, MPI_SUM, m->r->comm);
    dt_memcpy_number(m->st_h, m->st, n * sizeof(double));
    double aux = 0;
    for (int i = 0; i < m->nl; i++) {
        const double *st = m->st_h + (size_t)i * m->nst;
        dti_moe_aux(m->st + (size_t)i * m->nst, (double)m->cfg->aux_loss, E, B,
                    m->ly[i].aux);
        for (int e = 0; e < E; e++) {
            double f = st[DTI_MOE_FIRST * E + e] / B, P = st[DTI_MOE_PSUM * E + e] / B;
            aux += (double)m->cfg->aux_loss * E * f * P;
        }
    }
    return aux;
}

/* ==== the books ==== */

struct dti_moe_books {
    double *routed;          /* [E] choices routed to each expert, over the run */
    double dropped, choices; /* over the run */
    double busiest;          /* sum over steps and layers of busiest expert / mean */
    double nodrop;           /* the largest capacity factor a step needed */
    double rows;             /* expert rows this rank computed, over the run */
    int steps;
};

dti_moe_books *dti_moe_books_new(const dti_moe *m)
{
    dti_moe_books *bk = dti_calloc(1, sizeof *bk);
    bk->routed = dti_calloc(m->E, sizeof(double));
    return bk;
}

void dti_moe_step_books(dti_moe *m, dti_moe_books *bk, double aux, char *extra,
                        size_t len)
{
    int E = m->E;
    double mean = (double)m->G * m->T * m->k / E, most = 0, dropped = 0;
    int mine[2] = { 0, 0 }, most2[2];
    for (int i = 0; i < m->nl; i++) {
        const double *st = m->st_h + (size_t)i * m->nst;
        double top = 0;
        for (int e = 0; e < E; e++) {
            bk->routed[e] += st[DTI_MOE_ROUTED * E + e];
            top = st[DTI_MOE_ROUTED * E + e] > top ? st[DTI_MOE_ROUTED * E + e] : top;
        }
        most = top > most ? top : most;
        dropped += st[DTI_MOE_DROP(E)];
        bk->busiest += top / mean;
        bk->choices += (double)m->G * m->T * m->k;
        /* the fullest expert of any group (what the capacity must cover to drop
         * nothing), and the expert rows this rank computed */
        const int *routed = m->ly[i].counts_h;     /* (Gl, E), read in forward */
        for (size_t j = 0; j < (size_t)m->Gl * E; j++)
            mine[0] = routed[j] > mine[0] ? routed[j] : mine[0];
        for (size_t j = 0; j < (size_t)m->N * m->Gl * m->El; j++)
            mine[1] += m->ly[i].ne[j];
    }
    bk->dropped += dropped;
    bk->steps++;
    bk->rows += mine[1];
    /* the largest over the ranks, on rank 0 */
    dti_mpi_reduce(mine, most2, 2, MPI_INT, MPI_MAX, 0, m->r->comm);   /* books: MPI's own */
    if (m->rank == 0) {
        double need = (double)most2[0] * E / ((double)m->k * m->T);
        bk->nodrop = need > bk->nodrop ? need : bk->nodrop;
        snprintf(extra, len, "aux %.5f  dropped %.0f  busiest expert %.2fx  no-drop "
                 "capacity %.2f  busiest rank %d rows", aux, dropped, most / mean, need,
                 most2[1]);
    }
}

/* A summary line: head, then n values x[i * stride], each in width columns (at most
 * max of them, then "..."). */
static void summary_values(dti_run *r, const char *head, const double *x, int n,
                           size_t stride, int width, int max)
{
    char line[320];
    int used = snprintf(line, sizeof line, "%s", head);
    for (int i = 0; i < n && i < max; i++)
        used += snprintf(line + used, sizeof line - used, " %*.0f", width, x[i * stride]);
    dti_summary(r, "%s%s", line, n > max ? " ..." : "");
}

void dti_moe_summary(dti_moe *m, dti_moe_books *bk)
{
    dti_run *r = m->r;
    const dti_moe_layer *l = &m->ly[0];
    int N = m->N, E = m->E, w = N + 2;
    /* per rank: tokens sent to each rank in the last dispatch, bytes, expert rows */
    double *mine = dti_calloc(w, sizeof(double));
    double *all = dti_calloc((size_t)N * w, sizeof(double));
    for (int q = 0; q < N; q++)
        for (int i = 0; i < m->Gl * m->El; i++)
            mine[q] += l->ns[(size_t)q * m->Gl * m->El + i];
    mine[N] = (double)l->dispatch_bytes;
    mine[N + 1] = bk->rows;
    dti_mpi_gather(mine, w, MPI_DOUBLE, all, 0, r->comm);   /* books */

    double slot_bytes = (double)m->blk * sizeof(float);
    const char *first = m->nl > 1 ? " (the first MoE layer's)" : "";
    if (m->nl > 1) {
        char at[160];
        int used = snprintf(at, sizeof at, "moe: %d MoE layers, in place of the MLP of "
                            "block", m->nl);
        for (int i = 0; i < m->nl && used < (int)sizeof at; i++)
            used += snprintf(at + used, sizeof at - used, "%s %d", i ? "," : "",
                             m->ly[i].at - m->gpt);     /* the GPT's: units */
        dti_summary(r, "%s", at);
    }
    dti_summary(r, "moe: %d experts, %d per rank, top-%d; %d groups of %d tokens, "
                "capacity factor %g: C = %d slots per expert per group", E, m->El, m->k,
                m->G, m->T, (double)m->cfg->capacity, m->C);
    dti_summary(r, "all-to-all: 4 a step%s (dispatch, combine, and both in backward), "
                "each G/N %d x E/N %d x C %d x H %d floats = %.0f bytes to every "
                "other rank: (N-1) x %.0f = %.0f bytes per rank (model)",
                m->nl > 1 ? " per MoE layer" : "", m->Gl, m->El, m->C, m->H, slot_bytes,
                slot_bytes, (N - 1) * slot_bytes);
    char head[96];
    snprintf(head, sizeof head, "  measured, the last dispatch%s, bytes sent per rank:",
             first);
    summary_values(r, head, all + N, N, w, 1, 8);
    dti_summary(r, "tokens sent in the last dispatch%s (row: from rank, column: to "
                "rank):", first);
    for (int s = -1; s < N && s < 8; s++) {        /* s = -1: the column heads */
        char rh[16];
        snprintf(rh, sizeof rh, s < 0 ? "  from \\ to" : "  %9d", s);
        double ranks[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
        summary_values(r, rh, s < 0 ? ranks : all + (size_t)s * w, N, 1, 6, 8);
    }
    summary_values(r, m->nl > 1 ? "tokens routed to each expert (all steps and MoE "
                   "layers, before the capacity cut):" : "tokens routed to each expert "
                   "(all steps, before the capacity cut):", bk->routed, E, 1, 1, 16);
    summary_values(r, "expert rows computed per rank (all steps):", all + N + 1, N, w, 1,
                   8);
    int samples = bk->steps * m->nl;
    dti_summary(r, "dropped %.0f of %.0f choices (%.1f%%); the capacity factor that "
                "drops none: %.2f (the largest a step needed); busiest expert / mean "
                "%.2f (mean over steps%s)", bk->dropped, bk->choices,
                100 * bk->dropped / (bk->choices > 0 ? bk->choices : 1), bk->nodrop,
                bk->busiest / (samples > 0 ? samples : 1),
                m->nl > 1 ? " and layers" : "");
    free(mine);
    free(all);
    free(bk->routed);
    free(bk);
}

/* ==== the MLP around its MoE layer ==== */

/* Fills W (out, in) then b (out) as dt_mlp_init fills a layer, from lib/nn's generator
 * seeded with seed: He's bound sqrt(6 / in) when an activation follows (act 1),
 * 1/sqrt(in) when not; b zero. Wb on the host or the device. */
void dti_moe_init_linear(int in, int out, int act, unsigned long long seed, float *Wb)
{
    dt_mlp_config one = { .in = in, .hidden = out, .out = act ? 1 : out,
                          .layers = act ? 2 : 1, .act = DT_RELU };
    float *w = dti_calloc(dt_mlp_nparams(&one), sizeof(float));
    dt_mlp_init(&one, seed, w);
    dt_memcpy(Wb, w, ((size_t)out * in + out) * sizeof(float));
    free(w);
}

/* The seeds of the gate and of expert e: each its own stream, whatever the ranks. */
unsigned long long dti_moe_gate_seed(unsigned long long s)
{
    return s ^ 0x6a09e667f3bcc909ull;
}

static unsigned long long expert_seed(unsigned long long s, int e)
{
    return s ^ (0xbb67ae8584caa73bull * (unsigned long long)(e + 1));
}

void dti_train_moe(dti_run *r)
{
    const dt_train_config *cfg = r->cfg;
    const dt_mlp_config *c = &cfg->model;
    int N = r->size, G = dt_moe_groups(cfg, N), Gl = G / N, T = cfg->batch / G;
    int mid = dt_moe_layer(c), H = c->hidden, B = cfg->batch;
    size_t S = (size_t)dt_optim_state_per_param(cfg->optim.kind), f = sizeof(float);

    /* the replicated layers before and after the MoE layer, from the MLP's initial
     * weights, with what their forward keeps, group by group */
    dti_model front, back;
    dti_model_init(&front, r, 0, mid, MPI_COMM_SELF, DT_TP_MEGATRON, T);
    dti_model_init(&back, r, mid + 1, c->layers, MPI_COMM_SELF, DT_TP_MEGATRON, T);
    float *full = dti_calloc(dt_mlp_nparams(c), sizeof(float));
    dt_mlp_init(c, cfg->seed, full);
    dti_model_take(&front, full, front.params);
    dti_model_take(&back, full, back.params);
    free(full);
    dti_acts *fa = dti_calloc(Gl, sizeof *fa), *ba = dti_calloc(Gl, sizeof *ba);
    for (int g = 0; g < Gl; g++) {
        dti_acts_alloc(&front, T, &fa[g]);
        dti_acts_alloc(&back, T, &ba[g]);
    }
    float *sfront = dti_alloc(r, DTI_OPTIM, front.n * S * f, 0);
    float *sback = dti_alloc(r, DTI_OPTIM, back.n * S * f, 0);

    /* the MoE layer: its gate (replicated), this rank's experts */
    dti_moe m;
    dti_moe_init(&m, r, 0, H, H, T, 1, &mid, front.n + back.n, 0);
    dti_moe_layer *l = &m.ly[0];
    dti_moe_init_linear(H, m.E, 0, dti_moe_gate_seed(cfg->seed), l->gate);
    for (int j = 0; j < m.El; j++)
        dti_moe_init_linear(H, H, 1, expert_seed(cfg->seed, m.rank * m.El + j),
                            l->ex + j * m.nx);

    int Bl = m.Bl;
    float *x = dti_calloc((size_t)Bl * c->in, sizeof(float));     /* the batch, host */
    int *y = dti_calloc((size_t)Bl, sizeof(int));
    dti_moe_books *bk = dti_moe_books_new(&m);
    float *dst[2] = { front.grads, back.grads };
    size_t nseg[2] = { front.n, back.n };

    for (int step = 1; step <= cfg->steps; step++) {
        dti_step_begin(r, step);
        dti_moe_step_begin(&m);
        dt_data_batch(cfg->data, step - 1, B, m.rank * Bl, Bl, x, y);
        dt_memcpy_input(m.labels, y, (size_t)Bl * sizeof(int));

        /* forward: the layers before, a group at a time (the batch goes up there); the
         * MoE layer on this rank's rows; the layers after and the loss, a group at a
         * time */
        for (int g = 0; g < Gl; g++) {
            const float *h = dti_model_forward(&front, &fa[g], x + (size_t)g * T * c->in,
                                               T, step, g);
            dt_memcpy(l->h + (size_t)g * T * H, h, (size_t)T * H * sizeof(float));
        }
        dti_moe_forward(&m, l, step);
        double loss = 0;
        for (int g = 0; g < Gl; g++) {
            const float *yg = l->y + (size_t)g * T * H;
            float *logits = (float *)dti_model_forward(&back, &ba[g], yg, T, step, g);
            double t0 = dt_trace_now();
            loss += dt_xent(logits, m.labels + (size_t)g * T, T, c->out, 1.0f / B, logits);
            dti_compute_event("loss", step, -1, g, t0);
        }
        /* the figures of the whole batch: f_e for the aux loss, and the books */
        double auxloss = dti_moe_figures(&m, loss);

        /* backward, each group's gradient of the replicated weights kept apart */
        for (int g = 0; g < Gl; g++) {
            dt_memzero(back.grads, back.n * sizeof(float));
            dti_model_backward(&back, &ba[g], ba[g].x[back.nl], m.dy + (size_t)g * T * H,
                               T, step, g, NULL, NULL);
            dt_memcpy(dti_moe_group_grad(&m, g) + front.n, back.grads,
                      back.n * sizeof(float));
        }
        dti_moe_backward(&m, l, m.dy, step);
        for (int g = 0; g < Gl; g++) {
            dt_memzero(front.grads, front.n * sizeof(float));
            dti_model_backward(&front, &fa[g], m.dx + (size_t)g * T * H, NULL, T, step, g,
                               NULL, NULL);
            dt_memcpy(dti_moe_group_grad(&m, g), front.grads, front.n * sizeof(float));
        }
        /* the replicated gradients summed in group order; the experts' are whole */
        dti_moe_sum_groups_into(&m, dst, nseg, 2);

        char extra[160] = "", scaler[32];
        dti_scaler_decide(r, 0, r->comm, scaler, sizeof scaler);      /* fp32: steps */
        double t0 = dt_trace_now();
        dti_master_step(r, front.params, NULL, front.grads, sfront, front.n);
        dti_master_step(r, back.params, NULL, back.grads, sback, back.n);
        dti_moe_optimize(&m);
        dti_compute_event("optimizer", step, -1, -1, t0);

        dti_moe_step_books(&m, bk, auxloss, extra, sizeof extra);
        dti_step_end(r, step, (float)(m.st_h[DTI_MOE_LOSS(m.E)] / B), 0, extra);
    }
    dti_moe_summary(&m, bk);

    /* the final weights in dt_moe_nparams' layout: rank 0 the replicated parts, every
     * rank its experts (read from the device after the steps) */
    float *owned = dti_calloc(r->nparams, sizeof(float));
    size_t og = dt_mlp_layer_offset(c, mid), ox = og + m.ng;
    size_t oback = ox + (size_t)m.E * m.nx, mlp_back = dt_mlp_layer_offset(c, mid + 1);
    if (m.rank == 0) {
        full = dti_calloc(dt_mlp_nparams(c), sizeof(float));
        dti_model_put(&front, front.params, full);
        dti_model_put(&back, back.params, full);
        memcpy(owned, full, og * sizeof(float));
        memcpy(owned + oback, full + mlp_back,
               (dt_mlp_nparams(c) - mlp_back) * sizeof(float));
        dt_memcpy(owned + og, l->gate, m.ng * sizeof(float));
        free(full);
    }
    dt_memcpy(owned + ox + (size_t)m.rank * m.El * m.nx, l->ex,
              m.El * m.nx * sizeof(float));
    dti_result_params(r, owned);

    free(owned);
    free(y);
    free(x);
    dti_moe_free(&m);
    dti_free(r, DTI_OPTIM, sfront, front.n * S * f);
    dti_free(r, DTI_OPTIM, sback, back.n * S * f);
    for (int g = 0; g < Gl; g++) {
        dti_acts_free(&fa[g]);
        dti_acts_free(&ba[g]);
    }
    dti_model_free(&front);
    dti_model_free(&back);
    free(fa);
    free(ba);
}
