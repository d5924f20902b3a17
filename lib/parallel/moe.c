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
 * Not supported, refused by dti_moe_check: fp16, checkpoints, --accum. On a GPU
 * (on_device) moe keeps its whole state in host memory and computes on the CPU:
 * r->where is set to DT_CPU for the run, so that the same code runs everywhere. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "moe.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "trace.h"

/* ==== this rank's part ==== */

typedef struct {
    dti_run *r;
    const dt_train_config *cfg;
    const dt_mlp_config *c;
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
    int *routed, *kept;      /* (Gl, E) choices per expert in each group, slots filled */
    float *y;                /* (Bl, H) the MoE layer's output */
    /* the slots, N * blk floats each, laid out [rank][group][expert][slot][H]: at the
     * tokens' ranks (xs, ys, dys, dxs) and at the experts' (xe, ze, ye, dye, dxe) */
    size_t blk;              /* floats to one rank: Gl * El * C * H */
    float *xs, *xe, *ze, *ye, *ys, *dys, *dye, *dxe, *dxs;
    int *ns, *ne;            /* [rank][group][expert] filled slots sent, received */
    size_t dispatch_bytes;   /* what the last dispatch all-to-all sent (measured) */
    /* backward scratch */
    float *dy, *dx, *dp, *tmp;
} moe;

/* Fills W (out, in) then b (out) as dt_mlp_init fills a layer, from lib/nn's generator
 * seeded with seed: He's bound sqrt(6 / in) when an activation follows (act 1),
 * 1/sqrt(in) when not; b zero. */
static void init_linear(int in, int out, int act, unsigned long long seed, float *Wb)
{
    dt_mlp_config one = { .in = in, .hidden = out, .out = act ? 1 : out,
                          .layers = act ? 2 : 1, .act = DT_RELU };
    float *w = dti_calloc(dt_mlp_nparams(&one), sizeof(float));
    dt_mlp_init(&one, seed, w);
    memcpy(Wb, w, ((size_t)out * in + out) * sizeof(float));
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

static void moe_init(moe *m, dti_run *r)
{
    const dt_train_config *cfg = r->cfg;
    memset(m, 0, sizeof *m);
    m->r = r;
    m->cfg = cfg;
    m->c = &cfg->model;
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
    int H = m->H, E = m->E, Bl = m->Bl, k = m->k;

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

    /* the gate (replicated) and this rank's experts */
    m->ng = (size_t)E * H + E;
    m->nx = (size_t)H * H + H;
    m->gate = dti_alloc(r, DTI_PARAMS, m->ng * sizeof(float), 1);
    m->ggate = dti_alloc(r, DTI_GRADS, m->ng * sizeof(float), 1);
    init_linear(H, E, 0, gate_seed(cfg->seed), m->gate);
    m->ex = dti_alloc(r, DTI_PARAMS, m->El * m->nx * sizeof(float), 1);
    m->gex = dti_alloc(r, DTI_GRADS, m->El * m->nx * sizeof(float), 1);
    for (int j = 0; j < m->El; j++)
        init_linear(H, H, 1, expert_seed(cfg->seed, m->rank * m->El + j),
                    m->ex + j * m->nx);
    int S = dt_optim_state_per_param(cfg->optim.kind);
    size_t n[4] = { m->front.n, m->back.n, m->ng, m->El * m->nx };
    for (int i = 0; i < 4; i++)
        m->state[i] = dti_alloc(r, DTI_OPTIM, n[i] * S * sizeof(float), 1);

    m->nd = m->front.n + m->back.n + m->ng;
    m->pg = dti_alloc(r, DTI_GRADS, m->G * m->nd * sizeof(float), 1);
    m->h = dti_calloc((size_t)Bl * H, sizeof(float));
    m->prob = dti_calloc((size_t)Bl * E, sizeof(float));
    m->choice = dti_calloc((size_t)Bl * k, sizeof(int));
    m->slot = dti_calloc((size_t)Bl * k, sizeof(int));
    m->routed = dti_calloc((size_t)m->Gl * E, sizeof(int));
    m->kept = dti_calloc((size_t)m->Gl * E, sizeof(int));
    m->y = dti_calloc((size_t)Bl * H, sizeof(float));
    m->blk = (size_t)m->Gl * m->El * m->C * H;
    float **bufs[] = { &m->xs, &m->xe, &m->ze, &m->ye, &m->ys, &m->dys, &m->dye,
                       &m->dxe, &m->dxs };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        *bufs[i] = dti_calloc(m->N * m->blk, sizeof(float));
    m->ns = dti_calloc((size_t)m->N * m->Gl * m->El, sizeof(int));
    m->ne = dti_calloc((size_t)m->N * m->Gl * m->El, sizeof(int));
    m->dy = dti_calloc((size_t)Bl * H, sizeof(float));
    m->dx = dti_calloc((size_t)Bl * H, sizeof(float));
    m->tmp = dti_calloc((size_t)Bl * H, sizeof(float));
    m->dp = dti_calloc((size_t)Bl * E, sizeof(float));
}

static void moe_free(moe *m)
{
    dti_run *r = m->r;
    int S = dt_optim_state_per_param(m->cfg->optim.kind);
    size_t n[4] = { m->front.n, m->back.n, m->ng, m->El * m->nx };
    for (int i = 0; i < 4; i++)
        dti_free(r, DTI_OPTIM, m->state[i], n[i] * S * sizeof(float));
    dti_free(r, DTI_PARAMS, m->gate, m->ng * sizeof(float));
    dti_free(r, DTI_GRADS, m->ggate, m->ng * sizeof(float));
    dti_free(r, DTI_PARAMS, m->ex, m->El * m->nx * sizeof(float));
    dti_free(r, DTI_GRADS, m->gex, m->El * m->nx * sizeof(float));
    dti_free(r, DTI_GRADS, m->pg, m->G * m->nd * sizeof(float));
    for (int g = 0; g < m->Gl; g++) {
        dti_acts_free(&m->fa[g]);
        dti_acts_free(&m->ba[g]);
    }
    dti_model_free(&m->front);
    dti_model_free(&m->back);
    void *p[] = { m->fa, m->ba, m->h, m->prob, m->choice, m->slot, m->routed, m->kept,
                  m->y, m->xs, m->xe, m->ze, m->ye, m->ys, m->dys, m->dye, m->dxe, m->dxs,
                  m->ns, m->ne, m->dy, m->dx, m->tmp, m->dp };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        free(p[i]);
}

/* Where choice j of local token t sits in the token side's slot buffers (in floats),
 * or -1 when it was dropped. */
static long slot_at(const moe *m, int t, int j)
{
    int e = m->choice[(size_t)t * m->k + j], s = m->slot[(size_t)t * m->k + j];
    if (s < 0)
        return -1;
    int q = e / m->El, je = e % m->El, g = t / m->T;
    return (long)((((size_t)q * m->Gl + g) * m->El + je) * m->C + s) * m->H;
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
    dt_allgather(MPI_IN_PLACE, 0, MPI_FLOAT, m->pg, (int)(m->Gl * m->nd), MPI_FLOAT,
                 m->r->comm);
    float *dst[3] = { m->front.grads, m->back.grads, m->ggate };
    size_t n[3] = { m->front.n, m->back.n, m->ng }, off = 0;
    for (int i = 0; i < 3; off += n[i], i++)
        for (size_t j = 0; j < n[i]; j++) {
            float sum = 0.0f;
            for (int g = 0; g < m->G; g++)
                sum += m->pg[(size_t)g * m->nd + off + j];
            dst[i][j] = sum;
        }
}

static float dot(const float *a, const float *b, int n)
{
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* ==== forward and backward of the MoE layer ==== */

/* Takes t0 for a mark: 0 without tracing. */
/* The trace's mark for one all-to-all of slots (coll "moe", phase dispatch, combine,
 * grad-dispatch or grad-combine, chunk -1; trace.h) spanning [t0, now], after the
 * collective recorded its own events; nbytes = the send buffer, N * blk floats. */
static void mark(const moe *m, const char *phase, int step, double t0)
{
    dti_mark("moe", phase, step, -1, 0, 0, m->N * m->blk * sizeof(float), t0);
}

/* The figures of one step, summed over the ranks (dt_allreduce, doubles): first-choice
 * counts [E], gate probability sums [E], choices routed to each expert [E], dropped
 * choices, the cross-entropy sum. */
enum { ST_FIRST = 0, ST_PSUM = 1, ST_ROUTED = 2 };
#define ST_DROP(E) (3 * (E))
#define ST_LOSS(E) (3 * (E) + 1)

/* Forward of the rows x (Bl, H) through the MoE layer into m->y; adds this rank's
 * routing counts to st. */
static void moe_forward(moe *m, const float *x, double *st, int step)
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
    for (int g = 0; g < m->Gl; g++) {
        size_t t0g = (size_t)g * m->T;
        st[ST_DROP(E)] += dti_moe_route(m->choice + t0g * k, m->T, k, E, m->C,
                                        m->slot + t0g * k, m->routed + (size_t)g * E,
                                        m->kept + (size_t)g * E);
        for (int e = 0; e < E; e++)
            st[ST_ROUTED * E + e] += m->routed[(size_t)g * E + e];
    }
    for (int t = 0; t < Bl; t++) {
        st[ST_FIRST * E + m->choice[(size_t)t * k]] += 1;
        for (int e = 0; e < E; e++)
            st[ST_PSUM * E + e] += m->prob[(size_t)t * E + e];
    }
    /* the slots: each kept choice's token, and the filled count of every block */
    memset(m->xs, 0, m->N * m->blk * sizeof(float));
    for (int t = 0; t < Bl; t++)
        for (int j = 0; j < k; j++) {
            long at = slot_at(m, t, j);
            if (at >= 0)
                memcpy(m->xs + at, x + (size_t)t * H, H * sizeof(float));
        }
    for (int q = 0; q < m->N; q++)
        for (int g = 0; g < m->Gl; g++)
            for (int je = 0; je < m->El; je++)
                m->ns[((size_t)q * m->Gl + g) * m->El + je] =
                    m->kept[(size_t)g * E + q * m->El + je];
    dti_compute_event("forward", step, m->mid, -1, t0);

    /* dispatch */
    int nb = m->Gl * m->El;
    double tm = dti_mark_begin();
    dt_alltoall(m->ns, nb, MPI_INT, m->ne, nb, MPI_INT, m->r->comm);
    size_t sent0 = dt_bytes_sent();
    dt_alltoall(m->xs, (int)m->blk, MPI_FLOAT, m->xe, (int)m->blk, MPI_FLOAT, m->r->comm);
    m->dispatch_bytes = dt_bytes_sent() - sent0;
    mark(m, "dispatch", step, tm);

    /* the experts, each on the filled slots of every group in group order */
    t0 = dt_trace_now();
    memset(m->ye, 0, m->N * m->blk * sizeof(float));
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
    tm = dti_mark_begin();
    dt_alltoall(m->ye, (int)m->blk, MPI_FLOAT, m->ys, (int)m->blk, MPI_FLOAT, m->r->comm);
    mark(m, "combine", step, tm);
    t0 = dt_trace_now();
    memcpy(m->y, x, (size_t)Bl * H * sizeof(float));
    for (int t = 0; t < Bl; t++)
        for (int j = 0; j < k; j++) {
            long at = slot_at(m, t, j);
            if (at < 0)
                continue;
            float p = m->prob[(size_t)t * E + m->choice[(size_t)t * k + j]];
            float *y_t = m->y + (size_t)t * H;
            for (int i = 0; i < H; i++)
                y_t[i] += p * m->ys[at + i];
        }
    dti_compute_event("forward", step, m->mid, -1, t0);
}

/* Backward of the MoE layer: dy (Bl, H) is the gradient of its output, x its input;
 * aux[e] the aux loss's gradient for p[e] (every row alike). Accumulates the gate's and
 * the experts' gradients; writes the gradient of x into m->dx. */
static void moe_backward(moe *m, const float *x, const float *dy, const float *aux,
                         int step)
{
    int Bl = m->Bl, E = m->E, H = m->H, k = m->k;
    double t0 = dt_trace_now();
    /* dp = aux + dy . (expert output) for each kept choice; the experts get p * dy */
    memset(m->dys, 0, m->N * m->blk * sizeof(float));
    for (int t = 0; t < Bl; t++) {
        float *dp_t = m->dp + (size_t)t * E;
        const float *dy_t = dy + (size_t)t * H;
        memcpy(dp_t, aux, E * sizeof(float));
        for (int j = 0; j < k; j++) {
            long at = slot_at(m, t, j);
            if (at < 0)
                continue;
            int e = m->choice[(size_t)t * k + j];
            float p = m->prob[(size_t)t * E + e];
            dp_t[e] += dot(dy_t, m->ys + at, H);
            for (int i = 0; i < H; i++)
                m->dys[at + i] = p * dy_t[i];
        }
    }
    dti_compute_event("backward", step, m->mid, -1, t0);
    double tm = dti_mark_begin();
    dt_alltoall(m->dys, (int)m->blk, MPI_FLOAT, m->dye, (int)m->blk, MPI_FLOAT,
                m->r->comm);
    mark(m, "grad-dispatch", step, tm);

    /* the experts' backward, blocks in the order of forward */
    t0 = dt_trace_now();
    memset(m->dxe, 0, m->N * m->blk * sizeof(float));
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
    tm = dti_mark_begin();
    dt_alltoall(m->dxe, (int)m->blk, MPI_FLOAT, m->dxs, (int)m->blk, MPI_FLOAT,
                m->r->comm);
    mark(m, "grad-combine", step, tm);

    /* dx = dy (the residual) + what came back from the experts + the gate's part */
    t0 = dt_trace_now();
    memcpy(m->dx, dy, (size_t)Bl * H * sizeof(float));
    for (int t = 0; t < Bl; t++)
        for (int j = 0; j < k; j++) {
            long at = slot_at(m, t, j);
            float *dx_t = m->dx + (size_t)t * H;
            for (int i = 0; at >= 0 && i < H; i++)
                dx_t[i] += m->dxs[at + i];
        }
    dti_moe_softmax_backward(m->prob, m->dp, m->dp, Bl, E);
    for (int g = 0; g < m->Gl; g++) {          /* the gate's gradient, group by group */
        size_t t0g = (size_t)g * m->T;
        float *dW = group_grad(m, g) + m->front.n + m->back.n;
        dt_linear_backward(x + t0g * H, m->gate, m->dp + t0g * E, m->tmp + t0g * H, dW,
                           dW + (size_t)E * H, m->T, H, E);
    }
    for (size_t i = 0; i < (size_t)Bl * H; i++)
        m->dx[i] += m->tmp[i];
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
        bk->routed[e] += st[ST_ROUTED * E + e];
        if (st[ST_ROUTED * E + e] > most)
            most = st[ST_ROUTED * E + e];
    }
    bk->dropped += st[ST_DROP(E)];
    bk->choices += (double)m->cfg->batch * m->k;
    bk->busiest += most / mean;
    bk->steps++;
    /* the largest over the ranks, on rank 0: the fullest expert of any group (what the
     * capacity must cover to drop nothing), and the most expert rows a rank computed */
    int mine[2] = { 0, 0 }, most2[2];
    for (size_t i = 0; i < (size_t)m->Gl * E; i++)
        mine[0] = m->routed[i] > mine[0] ? m->routed[i] : mine[0];
    for (size_t i = 0; i < (size_t)m->N * m->Gl * m->El; i++)
        mine[1] += m->ne[i];
    bk->rows += mine[1];
    MPI_Reduce(mine, most2, 2, MPI_INT, MPI_MAX, 0, m->r->comm);   /* books: MPI's own */
    if (m->rank == 0) {
        double need = (double)most2[0] * E / ((double)m->k * m->T);
        bk->nodrop = need > bk->nodrop ? need : bk->nodrop;
        snprintf(extra, len, "aux %.5f  dropped %.0f  busiest expert %.2fx  no-drop "
                 "capacity %.2f  busiest rank %d rows", aux, st[ST_DROP(E)], most / mean,
                 need, most2[1]);
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
    dt_device_kind where = r->where;
    r->where = DT_CPU;                   /* moe keeps its state on the host (see above) */
    const dt_train_config *cfg = r->cfg;
    moe m;
    moe_init(&m, r);
    int E = m.E, Bl = m.Bl, B = cfg->batch, nst = 3 * E + 2;
    float *x = dti_calloc((size_t)Bl * m.c->in, sizeof(float));
    int *y = dti_calloc((size_t)Bl, sizeof(int));
    double *st = dti_calloc(nst, sizeof(double));
    float *aux = dti_calloc(E, sizeof(float));
    books bk = { .routed = dti_calloc(E, sizeof(double)) };

    int T = m.T, in = m.c->in, H = m.H;
    for (int step = 1; step <= cfg->steps; step++) {
        dti_step_begin(r, step);
        memset(group_grad(&m, 0), 0, m.Gl * m.nd * sizeof(float));
        memset(m.gex, 0, m.El * m.nx * sizeof(float));
        memset(st, 0, nst * sizeof(double));
        dt_data_batch(cfg->data, step - 1, B, m.rank * Bl, Bl, x, y);

        /* forward: the layers before, a group at a time; the MoE layer on this rank's
         * rows; the layers after and the loss, a group at a time */
        for (int g = 0; g < m.Gl; g++) {
            const float *h = dti_model_forward(&m.front, &m.fa[g], x + (size_t)g * T * in,
                                               T, step, g);
            memcpy(m.h + (size_t)g * T * H, h, (size_t)T * H * sizeof(float));
        }
        moe_forward(&m, m.h, st, step);
        for (int g = 0; g < m.Gl; g++) {
            const float *yg = m.y + (size_t)g * T * H;
            float *logits = (float *)dti_model_forward(&m.back, &m.ba[g], yg, T, step, g);
            double t0 = dt_trace_now();
            st[ST_LOSS(E)] += dt_xent(logits, y + (size_t)g * T, T, m.c->out, 1.0f / B,
                                      logits);
            dti_compute_event("loss", step, -1, g, t0);
        }

        /* the counts of the whole batch: f_e for the aux loss, and the books */
        dt_allreduce(MPI_IN_PLACE, st, nst, MPI_DOUBLE, MPI_SUM, r->comm);
        double auxloss = 0;
        for (int e = 0; e < E; e++) {
            double f = st[ST_FIRST * E + e] / B, P = st[ST_PSUM * E + e] / B;
            auxloss += (double)cfg->aux_loss * E * f * P;
            aux[e] = (float)((double)cfg->aux_loss * E * f / B);
        }

        /* backward, each group's gradient of the replicated weights kept apart */
        for (int g = 0; g < m.Gl; g++) {
            dt_memzero(m.back.grads, m.back.n * sizeof(float));
            dti_model_backward(&m.back, &m.ba[g], m.ba[g].x[m.back.nl],
                               m.dy + (size_t)g * T * H, T, step, g, NULL, NULL);
            memcpy(group_grad(&m, g) + m.front.n, m.back.grads, m.back.n * sizeof(float));
        }
        moe_backward(&m, m.h, m.dy, aux, step);
        for (int g = 0; g < m.Gl; g++) {
            dt_memzero(m.front.grads, m.front.n * sizeof(float));
            dti_model_backward(&m.front, &m.fa[g], m.dx + (size_t)g * T * H, NULL, T,
                               step, g, NULL, NULL);
            memcpy(group_grad(&m, g), m.front.grads, m.front.n * sizeof(float));
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
        dti_step_end(r, step, (float)(st[ST_LOSS(E)] / B), 0, extra);
    }
    moe_summary(&m, &bk);

    /* the final weights in dt_moe_nparams' layout: rank 0 the replicated parts, every
     * rank its experts */
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
        memcpy(owned + og, m.gate, m.ng * sizeof(float));
        free(full);
    }
    memcpy(owned + ox + (size_t)m.rank * m.El * m.nx, m.ex, m.El * m.nx * sizeof(float));
    dti_result_params(r, owned);

    free(owned);
    free(bk.routed);
    free(aux);
    free(st);
    free(y);
    free(x);
    moe_free(&m);
    r->where = where;
}
