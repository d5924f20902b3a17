/* Mixture of experts (train --mode moe): the MLP with its middle hidden layer replaced
 * by E experts, each token sent to its top-k of them, the experts spread over the ranks.
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
 * Not supported, refused by dti_moe_check: fp16, checkpoints, --accum. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "cuda.h"
#include "moe.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "trace.h"

/* ==== this rank's part ==== */

typedef struct {
    dti_run *r;
    const dt_train_config *cfg;
    const dt_mlp_config *c;
    int dev;                 /* the run lives on the GPU: so does every buffer below that
                                is not marked host */
    dti_moe_dims d;          /* the shape of the slots, for moe_route.c's loops */
    int N, rank;
    int E, El, k;            /* experts, experts per rank, top-k */
    int G, Gl, T, C;         /* groups, per rank, tokens per group, slots per expert */
    int H, mid, Bl;          /* hidden width, the MoE layer, rows on this rank */
    dti_model front, back;   /* layers [0, mid) and (mid, L): replicated */
    dti_acts *fa, *ba;       /* [Gl] what their forward keeps, group by group */
    size_t nd;               /* replicated weights: front.n + back.n + ng */
    float *pg;               /* [G][nd] each group's gradient of the replicated weights */
    size_t ng, nx;           /* gate weights E*H + E; one expert's H*H + H */
    float *gate, *ggate;     /* W (E, H) then b (E), and its gradient */
    float *ex, *gex;         /* this rank's El experts, nx floats each, and gradients */
    float *state[4];         /* optimizer state of front, back, gate, experts */
    /* forward, kept for backward */
    float *h;                /* (Bl, H) the MoE layer's input */
    float *prob;             /* (Bl, E) the gate's probabilities */
    int *choice, *slot;      /* (Bl, k) expert and slot of each choice (-1: dropped) */
    int *counts;             /* routed (Gl, E) choices per expert in each group, kept
                                (Gl, E) slots filled, dropped (Gl): ncounts ints */
    int *routed, *kept, *dropped;   /* into counts */
    int *counts_h;           /* host: a copy of counts, read each step */
    size_t ncounts;
    float *y;                /* (Bl, H) the MoE layer's output */
    /* the slots, N * blk floats each, laid out [rank][group][expert][slot][H]: at the
     * tokens' ranks (xs, ys, dys, dxs) and at the experts' (xe, ze, ye, dye, dxe) */
    size_t blk;              /* floats to one rank: Gl * El * C * H */
    float *xs, *xe, *ze, *ye, *ys, *dys, *dye, *dxe, *dxs;
    int *ns, *ne;            /* host: [rank][group][expert] filled slots sent, received */
    size_t dispatch_bytes;   /* what the last dispatch all-to-all sent (measured) */
    /* the step: its labels (Bl), its figures (DTI_MOE_NST(E) doubles; st_h their host
     * copy), the aux loss's gradient of each p[e] (E) */
    int *labels;
    double *st, *st_h;
    float *aux;
    /* backward scratch */
    float *dy, *dx, *dp, *tmp;
} moe;

/* Fills W (out, in) then b (out) as dt_mlp_init fills a layer, from lib/nn's generator
 * seeded with seed: He's bound sqrt(6 / in) when an activation follows (act 1),
 * 1/sqrt(in) when not; b zero. Wb on the host or the device. */
static void init_linear(int in, int out, int act, unsigned long long seed, float *Wb)
{
    dt_mlp_config one = { .in = in, .hidden = out, .out = act ? 1 : out,
                          .layers = act ? 2 : 1, .act = DT_RELU };
    float *w = dti_calloc(dt_mlp_nparams(&one), sizeof(float));
    dt_mlp_init(&one, seed, w);
    dt_memcpy(Wb, w, ((size_t)out * in + out) * sizeof(float));
    free(w);
}

/* The seeds of the gate and of expert e: each its own stream, whatever the ranks. */
static unsigned long long gate_seed(unsigned long long s)
{
    return s ^ 0x6a09e667f3bcc909ull;
}

static unsigned long long expert_seed(unsigned long long s, int e)
{
    return s ^ (0xbb67ae8584caa73bull * (unsigned long long)(e + 1));
}

/* Every buffer of moe_init beyond the two models': where it points, what the run's books
 * count it as (DTI_PARAMS, DTI_GRADS, DTI_OPTIM, DTI_ACTS: dti_alloc, where the run
 * lives), or SCRATCH (dt_malloc there, uncounted, as lib/nn's scratch is) or HOST (host
 * memory: what the host reads or keeps), and its bytes. Written once, for moe_init and
 * moe_free alike. */
enum { SCRATCH = -1, HOST = -2 };
typedef struct {
    void **p;
    int what;
    size_t nbytes;
} moe_buf;

#define MOE_NBUFS 40

static int moe_buffers(moe *m, moe_buf *b)
{
    size_t f = sizeof(float), i4 = sizeof(int), d8 = sizeof(double);
    size_t Bl = (size_t)m->Bl, H = (size_t)m->H, E = (size_t)m->E, k = (size_t)m->k;
    size_t S = (size_t)dt_optim_state_per_param(m->cfg->optim.kind);
    size_t nst = (size_t)DTI_MOE_NST(m->E), nb = (size_t)m->N * m->Gl * m->El;
    size_t nopt[4] = { m->front.n, m->back.n, m->ng, m->El * m->nx };
    int n = 0;
#define BUF(ptr, what, bytes) (b[n++] = (moe_buf){ (void **)&(ptr), (what), (bytes) })
    BUF(m->gate, DTI_PARAMS, m->ng * f);
    BUF(m->ggate, DTI_GRADS, m->ng * f);
    BUF(m->ex, DTI_PARAMS, m->El * m->nx * f);
    BUF(m->gex, DTI_GRADS, m->El * m->nx * f);
    for (int i = 0; i < 4; i++)
        BUF(m->state[i], DTI_OPTIM, nopt[i] * S * f);
    BUF(m->pg, DTI_GRADS, m->G * m->nd * f);
    BUF(m->h, DTI_ACTS, Bl * H * f);
    BUF(m->prob, DTI_ACTS, Bl * E * f);
    BUF(m->choice, DTI_ACTS, Bl * k * i4);
    BUF(m->slot, DTI_ACTS, Bl * k * i4);
    BUF(m->counts, DTI_ACTS, m->ncounts * i4);
    BUF(m->y, DTI_ACTS, Bl * H * f);
    float **slots[] = { &m->xs, &m->xe, &m->ze, &m->ye, &m->ys, &m->dys, &m->dye,
                        &m->dxe, &m->dxs };
    for (int i = 0; i < 9; i++)
        BUF(*slots[i], DTI_ACTS, m->N * m->blk * f);
    BUF(m->labels, SCRATCH, Bl * i4);
    BUF(m->st, SCRATCH, nst * d8);
    BUF(m->aux, SCRATCH, E * f);
    BUF(m->dy, SCRATCH, Bl * H * f);
    BUF(m->dx, SCRATCH, Bl * H * f);
    BUF(m->tmp, SCRATCH, Bl * H * f);
    BUF(m->dp, SCRATCH, Bl * E * f);
    BUF(m->counts_h, HOST, m->ncounts * i4);
    BUF(m->st_h, HOST, nst * d8);
    BUF(m->ns, HOST, nb * i4);
    BUF(m->ne, HOST, nb * i4);
#undef BUF
    DT_REQUIRE(n <= MOE_NBUFS, "moe_buffers: %d buffers, room for %d", n, MOE_NBUFS);
    return n;
}

static void moe_init(moe *m, dti_run *r)
{
    const dt_train_config *cfg = r->cfg;
    memset(m, 0, sizeof *m);
    m->r = r;
    m->cfg = cfg;
    m->c = &cfg->model;
    m->dev = r->where == DT_CUDA;
    m->N = r->size;
    m->rank = r->rank;
    m->E = dt_moe_experts(cfg, m->N);
    m->El = m->E / m->N;
    m->k = cfg->topk;
    m->G = dt_moe_groups(cfg, m->N);
    m->Gl = m->G / m->N;
    m->T = cfg->batch / m->G;
    m->C = dt_moe_capacity(cfg, m->N);
    m->H = m->c->hidden;
    m->mid = dt_moe_layer(m->c);
    m->Bl = m->Gl * m->T;
    m->d = (dti_moe_dims){ .N = m->N, .E = m->E, .El = m->El, .k = m->k, .Gl = m->Gl,
                           .T = m->T, .C = m->C, .H = m->H };
    int H = m->H, E = m->E;

    /* the replicated layers, from the MLP's initial weights */
    dti_model_init(&m->front, r, 0, m->mid, MPI_COMM_SELF, DT_TP_MEGATRON, m->T);
    dti_model_init(&m->back, r, m->mid + 1, m->c->layers, MPI_COMM_SELF, DT_TP_MEGATRON,
                   m->T);
    float *full = dti_calloc(dt_mlp_nparams(m->c), sizeof(float));
    dt_mlp_init(m->c, cfg->seed, full);
    dti_model_take(&m->front, full, m->front.params);
    dti_model_take(&m->back, full, m->back.params);
    free(full);
    m->fa = dti_calloc(m->Gl, sizeof *m->fa);
    m->ba = dti_calloc(m->Gl, sizeof *m->ba);
    for (int g = 0; g < m->Gl; g++) {
        dti_acts_alloc(&m->front, m->T, &m->fa[g]);
        dti_acts_alloc(&m->back, m->T, &m->ba[g]);
    }

    /* the gate (replicated), this rank's experts, and the rest, all zero */
    m->ng = (size_t)E * H + E;
    m->nx = (size_t)H * H + H;
    m->nd = m->front.n + m->back.n + m->ng;
    m->blk = (size_t)m->Gl * m->El * m->C * H;
    m->ncounts = (size_t)m->Gl * (2 * E + 1);
    moe_buf b[MOE_NBUFS];
    int nb = moe_buffers(m, b);
    for (int i = 0; i < nb; i++) {
        if (b[i].what == HOST) {
            *b[i].p = dti_calloc(b[i].nbytes, 1);
        } else if (b[i].what == SCRATCH) {
            *b[i].p = dt_malloc(b[i].nbytes, r->where);
            dt_memzero(*b[i].p, b[i].nbytes);
        } else {
            *b[i].p = dti_alloc(r, b[i].what, b[i].nbytes, 0);
        }
    }
    m->routed = m->counts;
    m->kept = m->counts + (size_t)m->Gl * E;
    m->dropped = m->counts + (size_t)2 * m->Gl * E;
    init_linear(H, E, 0, gate_seed(cfg->seed), m->gate);
    for (int j = 0; j < m->El; j++)
        init_linear(H, H, 1, expert_seed(cfg->seed, m->rank * m->El + j),
                    m->ex + j * m->nx);
}

static void moe_free(moe *m)
{
    moe_buf b[MOE_NBUFS];
    int nb = moe_buffers(m, b);
    for (int i = 0; i < nb; i++) {
        if (b[i].what == HOST)
            free(*b[i].p);
        else if (b[i].what == SCRATCH)
            dt_free(*b[i].p);
        else
            dti_free(m->r, b[i].what, *b[i].p, b[i].nbytes);
    }
    for (int g = 0; g < m->Gl; g++) {
        dti_acts_free(&m->fa[g]);
        dti_acts_free(&m->ba[g]);
    }
    dti_model_free(&m->front);
    dti_model_free(&m->back);
    free(m->fa);
    free(m->ba);
}

/* Before a collective reads device buffers, or the host reads what they sum to: the
 * kernels this thread queued are done (another rank may copy from them directly,
 * through CUDA IPC). Nothing on the CPU. */
static void settle(const moe *m)
{
    if (m->dev)
        dti_cuda_stream_sync();
}

/* The block of group gl of rank s for local expert je, at the experts' side: its first
 * float, and *rows, the filled slots. */
static size_t block_at(const moe *m, int s, int gl, int je, int *rows)
{
    size_t b = ((size_t)s * m->Gl + gl) * m->El + je;
    *rows = m->ne[b];
    return b * m->C * m->H;
}

/* Where local group g's gradient of the replicated weights goes: front, back, gate. */
static float *group_grad(const moe *m, int g)
{
    return m->pg + ((size_t)m->rank * m->Gl + g) * m->nd;
}

/* The replicated weights' gradient: every group's part, gathered on every rank, summed
 * in group order 0 .. G-1 into front.grads, back.grads and ggate. Any number of ranks
 * adds the same numbers in the same order, so routing, which a rounding difference
 * could flip, stays the same too (an allreduce sums in an order that depends on N). */
static void sum_groups(moe *m)
{
    settle(m);
    dt_allgather(MPI_IN_PLACE, 0, MPI_FLOAT, m->pg, (int)(m->Gl * m->nd), MPI_FLOAT,
                 m->r->comm);
    float *dst[3] = { m->front.grads, m->back.grads, m->ggate };
    size_t n[3] = { m->front.n, m->back.n, m->ng }, off = 0;
    for (int i = 0; i < 3; off += n[i], i++)
        dti_moe_sum_groups(m->pg + off, m->nd, m->G, n[i], dst[i]);
}

/* ==== forward and backward of the MoE layer ==== */

/* The trace's mark for one all-to-all of slots (coll "moe", phase dispatch, combine,
 * grad-dispatch or grad-combine, chunk -1; trace.h) spanning [t0, now], after the
 * collective recorded its own events; nbytes = the send buffer, N * blk floats. */
static void mark(const moe *m, const char *phase, int step, double t0)
{
    dti_mark("moe", phase, step, -1, 0, 0, m->N * m->blk * sizeof(float), t0);
}

/* One all-to-all of slots, send (N * blk floats) to recv, marked as phase. */
static void slots_alltoall(moe *m, const float *send, float *recv, const char *phase,
                           int step)
{
    settle(m);
    double tm = dti_mark_begin();
    dt_alltoall(send, (int)m->blk, MPI_FLOAT, recv, (int)m->blk, MPI_FLOAT, m->r->comm);
    mark(m, phase, step, tm);
}

/* Forward of the rows x (Bl, H) through the MoE layer into m->y; adds this rank's
 * routing figures to m->st, and leaves the counts in m->counts_h. */
static void moe_forward(moe *m, const float *x, int step)
{
    int Bl = m->Bl, E = m->E, H = m->H, k = m->k;
    double t0 = dt_trace_now();
    /* the gate: probabilities and choices, then each group's slots. A group at a time,
     * as every product here: sgemm's rounding of a row depends on how many rows the
     * call has, and a group's T rows are the same on any number of ranks */
    for (int g = 0; g < m->Gl; g++)
        dt_linear_forward(x + (size_t)g * m->T * H, m->gate, m->gate + (size_t)E * H,
                          m->prob + (size_t)g * m->T * E, m->T, H, E);
    dti_moe_softmax(m->prob, m->prob, Bl, E);
    dti_moe_topk(m->prob, Bl, E, k, m->choice);
    dti_moe_route_groups(m->d, m->choice, m->slot, m->routed, m->kept, m->dropped);
    dti_moe_stats(m->d, m->prob, m->choice, m->routed, m->dropped, m->st);
    /* the slots: each kept choice's token; the host needs the filled count of every
     * block (it sizes the experts' products), and the routed ones for the books */
    dti_moe_scatter(m->d, x, m->choice, m->slot, m->xs);
    dt_memcpy_number(m->counts_h, m->counts, m->ncounts * sizeof(int));
    const int *kept = m->counts_h + (size_t)m->Gl * E;
    for (int q = 0; q < m->N; q++)
        for (int g = 0; g < m->Gl; g++)
            for (int je = 0; je < m->El; je++)
                m->ns[((size_t)q * m->Gl + g) * m->El + je] =
                    kept[(size_t)g * E + q * m->El + je];
    dti_compute_event("forward", step, m->mid, -1, t0);

    /* dispatch: the counts (host), then the slots (the copy of the counts waited for
     * the kernels above) */
    int nb = m->Gl * m->El;
    double tm = dti_mark_begin();
    dt_alltoall(m->ns, nb, MPI_INT, m->ne, nb, MPI_INT, m->r->comm);
    size_t sent0 = dt_bytes_sent();
    dt_alltoall(m->xs, (int)m->blk, MPI_FLOAT, m->xe, (int)m->blk, MPI_FLOAT, m->r->comm);
    m->dispatch_bytes = dt_bytes_sent() - sent0;
    mark(m, "dispatch", step, tm);

    /* the experts, each on the filled slots of every group in group order */
    t0 = dt_trace_now();
    dt_memzero(m->ye, m->N * m->blk * sizeof(float));
    for (int je = 0; je < m->El; je++) {
        const float *W = m->ex + je * m->nx, *b = W + (size_t)H * H;
        for (int s = 0; s < m->N; s++)
            for (int gl = 0; gl < m->Gl; gl++) {
                int rows;
                size_t at = block_at(m, s, gl, je, &rows);
                dt_linear_forward(m->xe + at, W, b, m->ze + at, rows, H, H);
                dt_act_forward(m->c->act, m->ze + at, m->ye + at, (size_t)rows * H);
            }
    }
    dti_compute_event("forward", step, m->mid, -1, t0);

    /* combine: y = x + p * expert output, choices in order */
    slots_alltoall(m, m->ye, m->ys, "combine", step);
    t0 = dt_trace_now();
    dti_moe_combine(m->d, x, m->prob, m->choice, m->slot, m->ys, m->y);
    dti_compute_event("forward", step, m->mid, -1, t0);
}

/* Backward of the MoE layer: dy (Bl, H) is the gradient of its output, x its input;
 * m->aux[e] the aux loss's gradient for p[e] (every row alike). Accumulates the gate's
 * and the experts' gradients; writes the gradient of x into m->dx. */
static void moe_backward(moe *m, const float *x, const float *dy, int step)
{
    int Bl = m->Bl, E = m->E, H = m->H;
    double t0 = dt_trace_now();
    /* dp = aux + dy . (expert output) for each kept choice; the experts get p * dy */
    dti_moe_slots_backward(m->d, dy, m->prob, m->choice, m->slot, m->ys, m->aux, m->dp,
                           m->dys);
    dti_compute_event("backward", step, m->mid, -1, t0);
    slots_alltoall(m, m->dys, m->dye, "grad-dispatch", step);

    /* the experts' backward, blocks in the order of forward */
    t0 = dt_trace_now();
    dt_memzero(m->dxe, m->N * m->blk * sizeof(float));
    for (int je = 0; je < m->El; je++) {
        const float *W = m->ex + je * m->nx;
        float *dW = m->gex + je * m->nx, *db = dW + (size_t)H * H;
        for (int s = 0; s < m->N; s++)
            for (int gl = 0; gl < m->Gl; gl++) {
                int rows;
                size_t at = block_at(m, s, gl, je, &rows);
                dt_act_backward(m->c->act, m->ze + at, m->dye + at, m->dye + at,
                                (size_t)rows * H);
                dt_linear_backward(m->xe + at, W, m->dye + at, m->dxe + at, dW, db, rows,
                                   H, H);
            }
    }
    dti_compute_event("backward", step, m->mid, -1, t0);
    slots_alltoall(m, m->dxe, m->dxs, "grad-combine", step);

    /* the gate's part, then dx = dy (the residual) + what came back from the experts +
     * the gate's part */
    t0 = dt_trace_now();
    dti_moe_softmax_backward(m->prob, m->dp, m->dp, Bl, E);
    for (int g = 0; g < m->Gl; g++) {          /* the gate's gradient, group by group */
        size_t t0g = (size_t)g * m->T;
        float *dW = group_grad(m, g) + m->front.n + m->back.n;
        dt_linear_backward(x + t0g * H, m->gate, m->dp + t0g * E, m->tmp + t0g * H, dW,
                           dW + (size_t)E * H, m->T, H, E);
    }
    dti_moe_x_backward(m->d, dy, m->choice, m->slot, m->dxs, m->tmp, m->dx);
    dti_compute_event("backward", step, m->mid, -1, t0);
}

/* ==== the books ==== */

typedef struct {
    double *routed;          /* [E] choices routed to each expert, over the run */
    double dropped, choices; /* over the run */
    double busiest;          /* sum over steps of busiest expert / mean */
    double nodrop;           /* the largest capacity factor a step needed */
    double rows;             /* expert rows this rank computed, over the run */
    int steps;
} books;

/* The step's figures into the report's extra and the books. st: summed over ranks. */
static void step_books(moe *m, books *bk, const double *st, double aux, char *extra,
                       size_t len)
{
    int E = m->E;
    double mean = (double)m->cfg->batch * m->k / E, most = 0;
    for (int e = 0; e < E; e++) {
        bk->routed[e] += st[DTI_MOE_ROUTED * E + e];
        if (st[DTI_MOE_ROUTED * E + e] > most)
            most = st[DTI_MOE_ROUTED * E + e];
    }
    bk->dropped += st[DTI_MOE_DROP(E)];
    bk->choices += (double)m->cfg->batch * m->k;
    bk->busiest += most / mean;
    bk->steps++;
    /* the largest over the ranks, on rank 0: the fullest expert of any group (what the
     * capacity must cover to drop nothing), and the most expert rows a rank computed */
    int mine[2] = { 0, 0 }, most2[2];
    const int *routed = m->counts_h;          /* (Gl, E), read in moe_forward */
    for (size_t i = 0; i < (size_t)m->Gl * E; i++)
        mine[0] = routed[i] > mine[0] ? routed[i] : mine[0];
    for (size_t i = 0; i < (size_t)m->N * m->Gl * m->El; i++)
        mine[1] += m->ne[i];
    bk->rows += mine[1];
    MPI_Reduce(mine, most2, 2, MPI_INT, MPI_MAX, 0, m->r->comm);   /* books: MPI's own */
    if (m->rank == 0) {
        double need = (double)most2[0] * E / ((double)m->k * m->T);
        bk->nodrop = need > bk->nodrop ? need : bk->nodrop;
        snprintf(extra, len, "aux %.5f  dropped %.0f  busiest expert %.2fx  no-drop "
                 "capacity %.2f  busiest rank %d rows", aux, st[DTI_MOE_DROP(E)],
                 most / mean, need, most2[1]);
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

/* The run's summary (rank 0): the traffic, the tokens per expert, the drops. */
static void moe_summary(moe *m, const books *bk)
{
    dti_run *r = m->r;
    int N = m->N, E = m->E, w = N + 2;
    /* per rank: tokens sent to each rank in the last dispatch, bytes, expert rows */
    double *mine = dti_calloc(w, sizeof(double));
    double *all = dti_calloc((size_t)N * w, sizeof(double));
    for (int q = 0; q < N; q++)
        for (int i = 0; i < m->Gl * m->El; i++)
            mine[q] += m->ns[(size_t)q * m->Gl * m->El + i];
    mine[N] = (double)m->dispatch_bytes;
    mine[N + 1] = bk->rows;
    MPI_Gather(mine, w, MPI_DOUBLE, all, w, MPI_DOUBLE, 0, r->comm);   /* books */

    double slot_bytes = (double)m->blk * sizeof(float);
    dti_summary(r, "moe: %d experts, %d per rank, top-%d; %d groups of %d tokens, "
                "capacity factor %g: C = %d slots per expert per group", E, m->El, m->k,
                m->G, m->T, (double)m->cfg->capacity, m->C);
    dti_summary(r, "all-to-all: 4 a step (dispatch, combine, and both in backward), "
                "each G/N %d x E/N %d x C %d x H %d floats = %.0f bytes to every "
                "other rank: (N-1) x %.0f = %.0f bytes per rank (model)", m->Gl, m->El,
                m->C, m->H, slot_bytes, slot_bytes, (N - 1) * slot_bytes);
    summary_values(r, "  measured, the last dispatch, bytes sent per rank:", all + N, N,
                   w, 1, 8);
    dti_summary(r, "tokens sent in the last dispatch (row: from rank, column: to rank):");
    for (int s = -1; s < N && s < 8; s++) {        /* s = -1: the column heads */
        char head[16];
        snprintf(head, sizeof head, s < 0 ? "  from \\ to" : "  %9d", s);
        double ranks[8] = { 0, 1, 2, 3, 4, 5, 6, 7 };
        summary_values(r, head, s < 0 ? ranks : all + (size_t)s * w, N, 1, 6, 8);
    }
    summary_values(r, "tokens routed to each expert (all steps, before the capacity "
                   "cut):", bk->routed, E, 1, 1, 16);
    summary_values(r, "expert rows computed per rank (all steps):", all + N + 1, N, w, 1,
                   8);
    dti_summary(r, "dropped %.0f of %.0f choices (%.1f%%); the capacity factor that "
                "drops none: %.2f (the largest a step needed); busiest expert / mean "
                "%.2f (mean over steps)", bk->dropped, bk->choices,
                100 * bk->dropped / (bk->choices > 0 ? bk->choices : 1), bk->nodrop,
                bk->busiest / (bk->steps > 0 ? bk->steps : 1));
    free(mine);
    free(all);
}

/* ==== training ==== */

void dti_train_moe(dti_run *r)
{
    const dt_train_config *cfg = r->cfg;
    moe m;
    moe_init(&m, r);
    int E = m.E, Bl = m.Bl, B = cfg->batch, nst = DTI_MOE_NST(E);
    float *x = dti_calloc((size_t)Bl * m.c->in, sizeof(float));     /* the batch, host */
    int *y = dti_calloc((size_t)Bl, sizeof(int));
    const double *st = m.st_h;
    books bk = { .routed = dti_calloc(E, sizeof(double)) };

    int T = m.T, H = m.H;
    for (int step = 1; step <= cfg->steps; step++) {
        dti_step_begin(r, step);
        dt_memzero(group_grad(&m, 0), m.Gl * m.nd * sizeof(float));
        dt_memzero(m.gex, m.El * m.nx * sizeof(float));
        dt_memzero(m.st, nst * sizeof(double));
        dt_data_batch(cfg->data, step - 1, B, m.rank * Bl, Bl, x, y);
        dt_memcpy_input(m.labels, y, (size_t)Bl * sizeof(int));

        /* forward: the layers before, a group at a time (the batch goes up there); the
         * MoE layer on this rank's rows; the layers after and the loss, a group at a
         * time */
        for (int g = 0; g < m.Gl; g++) {
            const float *h = dti_model_forward(&m.front, &m.fa[g],
                                               x + (size_t)g * T * m.c->in, T, step, g);
            dt_memcpy(m.h + (size_t)g * T * H, h, (size_t)T * H * sizeof(float));
        }
        moe_forward(&m, m.h, step);
        double loss = 0;
        for (int g = 0; g < m.Gl; g++) {
            const float *yg = m.y + (size_t)g * T * H;
            float *logits = (float *)dti_model_forward(&m.back, &m.ba[g], yg, T, step, g);
            double t0 = dt_trace_now();
            loss += dt_xent(logits, m.labels + (size_t)g * T, T, m.c->out, 1.0f / B,
                            logits);
            dti_compute_event("loss", step, -1, g, t0);
        }
        dti_moe_set_loss(m.st, E, loss);

        /* the figures of the whole batch: f_e for the aux loss, and the books */
        settle(&m);
        dt_allreduce(MPI_IN_PLACE, m.st, nst, MPI_DOUBLE, MPI_SUM, r->comm);
        dt_memcpy_number(m.st_h, m.st, nst * sizeof(double));
        dti_moe_aux(m.st, (double)cfg->aux_loss, E, B, m.aux);
        double auxloss = 0;
        for (int e = 0; e < E; e++) {
            double f = st[DTI_MOE_FIRST * E + e] / B, P = st[DTI_MOE_PSUM * E + e] / B;
            auxloss += (double)cfg->aux_loss * E * f * P;
        }

        /* backward, each group's gradient of the replicated weights kept apart */
        for (int g = 0; g < m.Gl; g++) {
            dt_memzero(m.back.grads, m.back.n * sizeof(float));
            dti_model_backward(&m.back, &m.ba[g], m.ba[g].x[m.back.nl],
                               m.dy + (size_t)g * T * H, T, step, g, NULL, NULL);
            dt_memcpy(group_grad(&m, g) + m.front.n, m.back.grads,
                      m.back.n * sizeof(float));
        }
        moe_backward(&m, m.h, m.dy, step);
        for (int g = 0; g < m.Gl; g++) {
            dt_memzero(m.front.grads, m.front.n * sizeof(float));
            dti_model_backward(&m.front, &m.fa[g], m.dx + (size_t)g * T * H, NULL, T,
                               step, g, NULL, NULL);
            dt_memcpy(group_grad(&m, g), m.front.grads, m.front.n * sizeof(float));
        }
        /* the replicated gradients summed in group order; the experts' are whole */
        sum_groups(&m);

        char extra[160] = "", scaler[32];
        dti_scaler_decide(r, 0, r->comm, scaler, sizeof scaler);      /* fp32: steps */
        double t0 = dt_trace_now();
        dti_master_step(r, m.front.params, NULL, m.front.grads, m.state[0], m.front.n);
        dti_master_step(r, m.back.params, NULL, m.back.grads, m.state[1], m.back.n);
        dti_master_step(r, m.gate, NULL, m.ggate, m.state[2], m.ng);
        dti_master_step(r, m.ex, NULL, m.gex, m.state[3], m.El * m.nx);
        dti_compute_event("optimizer", step, -1, -1, t0);

        step_books(&m, &bk, st, auxloss, extra, sizeof extra);
        dti_step_end(r, step, (float)(st[DTI_MOE_LOSS(E)] / B), 0, extra);
    }
    moe_summary(&m, &bk);

    /* the final weights in dt_moe_nparams' layout: rank 0 the replicated parts, every
     * rank its experts (read from the device after the steps) */
    float *owned = dti_calloc(r->nparams, sizeof(float));
    size_t og = dt_mlp_layer_offset(m.c, m.mid), ox = og + m.ng;
    size_t oback = ox + (size_t)E * m.nx, mlp_back = dt_mlp_layer_offset(m.c, m.mid + 1);
    if (m.rank == 0) {
        float *full = dti_calloc(dt_mlp_nparams(m.c), sizeof(float));
        dti_model_put(&m.front, m.front.params, full);
        dti_model_put(&m.back, m.back.params, full);
        memcpy(owned, full, og * sizeof(float));
        memcpy(owned + oback, full + mlp_back,
               (dt_mlp_nparams(m.c) - mlp_back) * sizeof(float));
        dt_memcpy(owned + og, m.gate, m.ng * sizeof(float));
        free(full);
    }
    dt_memcpy(owned + ox + (size_t)m.rank * m.El * m.nx, m.ex,
              m.El * m.nx * sizeof(float));
    dti_result_params(r, owned);

    free(owned);
    free(bk.routed);
    free(y);
    free(x);
    moe_free(&m);
}
