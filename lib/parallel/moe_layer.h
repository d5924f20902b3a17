/* Internal: the mixture-of-experts layer (moe.c), shared by the two models' moe runs:
 * the MLP's (moe.c, one MoE layer in place of a hidden layer) and the GPT's (moe_gpt.c,
 * one in place of the MLP of every other block). moe.c's opening comment tells the
 * layer's step; this header is what a model's side calls.
 *
 * A model's side owns its replicated weights and their activations, and gives the layer
 * its input rows, h (Bl, H), and the rows the residual adds, res (the same rows for the
 * MLP; for the GPT the block's stream before ln2, h being ln2's output). Forward leaves
 * the layer's output y (Bl, H) = res + the experts' weighted outputs; backward, from the
 * gradient of y, leaves the gradient of h in m->dx (with the residual's dy added when
 * res is h). Between the two, the model's side sums its own replicated gradients group
 * by group in m->pg, beside the gates' (dti_moe_sum_groups_into sums both). */
#ifndef DT_MOE_LAYER_H
#define DT_MOE_LAYER_H

#include "moe.h"
#include "parallel_internal.h"

/* One MoE layer on this rank. */
typedef struct {
    int at;                  /* what it stands in, as the trace numbers it: the MLP's
                                layer, or the GPT's unit (its block + 1) */
    float *gate, *ggate;     /* W (E, H) then b (E), replicated; its gradient (summed) */
    float *ex, *gex;         /* this rank's El experts, nx floats each, and gradients */
    float *sgate, *sex;      /* their optimizer state */
    /* forward, kept for backward */
    float *h, *res;          /* (Bl, H) the experts' input; what the residual adds */
    float *prob;             /* (Bl, E) the gate's probabilities */
    int *choice, *slot;      /* (Bl, k) expert and slot of each choice (-1: dropped) */
    int *counts;             /* routed (Gl, E) choices per expert in each group, kept
                                (Gl, E) slots filled, dropped (Gl): ncounts ints */
    int *routed, *kept, *dropped;   /* into counts */
    int *counts_h;           /* host: a copy of counts, read each step */
    float *y;                /* (Bl, H) the layer's output */
    /* the slots, laid out [rank][group][expert][slot][width]: at the tokens' ranks (xs,
     * ys, dys, dxs) and at the experts' (xe, ze, ge, ye, dye, dxe); H wide, but ze and
     * ge (the experts' hidden rows) F wide, ge the GPT's only */
    float *xs, *xe, *ze, *ge, *ye, *ys, *dys, *dye, *dxe, *dxs;
    int *ns, *ne;            /* host: [rank][group][expert] filled slots sent, received */
    float *aux;              /* (E) the load-balancing loss's gradient of each p[e] */
    size_t dispatch_bytes;   /* what the last dispatch all-to-all sent (measured) */
} dti_moe_layer;

/* This rank's part of every MoE layer, and what they share. */
typedef struct {
    dti_run *r;
    const dt_train_config *cfg;
    int dev;                 /* the run lives on the GPU: so does every buffer that is
                                not marked host */
    int gpt;                 /* experts are the GPT's MLPs (H -> F -> H, GELU), else one
                                linear layer H -> H and the MLP's activation */
    dti_moe_dims d;          /* the shape of the slots, for moe_route.c's loops */
    int N, rank;
    int E, El, k;            /* experts, experts per rank, top-k */
    int G, Gl, T, C;         /* groups, per rank, tokens per group, slots per expert */
    int H, F, Bl;            /* width, experts' hidden width, token rows on this rank */
    int nl;                  /* MoE layers */
    dti_moe_layer *ly;       /* [nl] */
    size_t ng, nx;           /* a gate's floats E*H + E; an expert's */
    size_t nmodel, nd;       /* the model side's replicated floats; + nl gates */
    float *pg;               /* [G][nd] each group's gradient of the replicated weights:
                                the model side's (nmodel), then each layer's gate */
    size_t blk, blkf;        /* slot floats to one rank: Gl * El * C * H, and * F */
    size_t ncounts;
    int nst;                 /* DTI_MOE_NST(E): a layer's figures */
    double *st, *st_h;       /* (nl, nst) the step's figures (the loss in layer 0's),
                                summed over the ranks; st_h their host copy */
    int *labels;             /* (Bl) the step's labels, where the run is (the MLP's) */
    float *dy, *dx, *tmp;    /* (Bl, H) scratch */
    float *zero;             /* (Bl, H) zeros: the residual's part when res is not h */
    float *dp;               /* (Bl, E) */
    float *dh;               /* (C, F) an expert's backward (GPT) */
} dti_moe;

/* Sets up m for r's run: gpt 1 for the GPT's experts (MLPs H -> F -> H), 0 for the
 * MLP's (H -> H); T tokens a group; nl layers standing in the layers or units at[] (the
 * trace's numbering); the model side's nmodel replicated floats. The gates and experts
 * are left zero for the caller to fill; res is h unless res_apart. */
void dti_moe_init(dti_moe *m, dti_run *r, int gpt, int H, int F, int T, int nl,
                  const int *at, size_t nmodel, int res_apart);
void dti_moe_free(dti_moe *m);

/* Local group g's row of m->pg (the model side's gradient first) */
float *dti_moe_group_grad(const dti_moe *m, int g);
/* The start of a step: every local group's gradient, the experts' and the figures zero */
void dti_moe_step_begin(dti_moe *m);
/* Forward of layer ly on ly->h and ly->res into ly->y; its routing figures added to
 * its row of m->st */
void dti_moe_forward(dti_moe *m, dti_moe_layer *ly, int step);
/* Backward of layer ly from dy (Bl, H), the gradient of ly->y: the gates' gradient of
 * each group into m->pg, the experts' into ly->gex, the gradient of ly->h into m->dx
 * (plus dy when ly->res is ly->h) */
void dti_moe_backward(dti_moe *m, dti_moe_layer *ly, const float *dy, int step);
/* After forward: loss (this rank's cross-entropy sum) and every layer's figures summed
 * over the ranks; each layer's aux gradient set; returns the aux loss (every layer's) */
double dti_moe_figures(dti_moe *m, double loss);
/* The replicated gradients: every group's row gathered and summed in group order, the
 * model side's nmodel floats into the nseg destinations dst[i] (n[i] floats each, one
 * after another), each gate's into its ggate */
void dti_moe_sum_groups_into(dti_moe *m, float *const *dst, const size_t *n, int nseg);
/* The optimizer on the gates and this rank's experts */
void dti_moe_optimize(dti_moe *m);

/* The run's books: routing and traffic over the steps, for the step lines and the
 * summary */
typedef struct dti_moe_books dti_moe_books;
dti_moe_books *dti_moe_books_new(const dti_moe *m);
/* The step's figures into extra (rank 0) and the books */
void dti_moe_step_books(dti_moe *m, dti_moe_books *bk, double aux, char *extra,
                        size_t len);
/* The run's summary (rank 0), and the books freed */
void dti_moe_summary(dti_moe *m, dti_moe_books *bk);

/* The MLP's side's initial weights (moe.c), which the GPT's gates take too: W (out,
 * in) then b (out) as dt_mlp_init fills a layer (act 1: an activation follows), from
 * seed; and the gate's seed from the run's */
void dti_moe_init_linear(int in, int out, int act, unsigned long long seed, float *Wb);
unsigned long long dti_moe_gate_seed(unsigned long long s);

#endif /* DT_MOE_LAYER_H */
