/* The mixture-of-experts model (moe.c) and its routing arithmetic (moe_route.c).
 *
 * dt_moe_* are for programs (train, lesson 19, the tests): the model's shape and the
 * capacity, from a configuration. dti_moe_* are the pure routing steps moe.c uses and
 * tests/unit_moe.c checks, no MPI: plain loops on host arrays, the reference, which hand
 * a call whose output is on the GPU to its kernel (moe_cuda.h; tests/unit_gpu_moe.c holds
 * each kernel to its loop). */
#ifndef DT_MOE_H
#define DT_MOE_H

#include <stddef.h>
#include "moe_cuda.h"    /* dti_moe_dims, dti_moe_slot_at, DTI_MOE_FIRST ... */
#include "parallel.h"

/* ==== the model's shape (moe_route.c) ==== */

/* Experts on n ranks: c->experts, or 2 per rank when it is 0. */
int dt_moe_experts(const dt_train_config *c, int n);
/* Token groups on n ranks: c->moe_groups, or one per rank when it is 0. */
int dt_moe_groups(const dt_train_config *c, int n);
/* Which layer of the MLP the MoE layer replaces: layers / 2 (1 .. layers - 2). */
int dt_moe_layer(const dt_mlp_config *m);
/* The GPT's MoE layers: the MLPs of every other block, blocks 1, 3, ...: layers / 2 of
 * them. dt_moe_gpt_layer_of: which of them block l's MLP is (block 2i + 1 holds the
 * i-th), or -1 for a dense block. */
int dt_moe_gpt_layers(const dt_gpt_config *g);
int dt_moe_gpt_layer_of(const dt_gpt_config *g, int l);
/* Weights of the whole model on n ranks. The MLP: its own, less the replaced layer, plus
 * the gate (E x hidden + E) and E experts (hidden x hidden + hidden each); the layout
 * of train --dump: layers before the MoE layer | gate W, b | expert 0 W, b | ... |
 * expert E-1 | the layers after. The GPT: its own, with the MLP of each MoE block
 * replaced by the gate (E x embed + E) and E experts, each an MLP in the block's MLP
 * layout (w1, b1, w2, b2); the layout of --dump: gpt.h's units in order, an MoE block
 * holding its attention part (ln1 .. ln2_b) | gate W, b | expert 0 | ... | expert
 * E-1. */
size_t dt_moe_nparams(const dt_train_config *c, int n);
/* Tokens in a group on n ranks: the batch / groups, times the sequence for the GPT. */
int dt_moe_group_tokens(const dt_train_config *c, int n);
/* Slots per expert per group on n ranks (see dti_moe_capacity). */
int dt_moe_capacity(const dt_train_config *c, int n);

/* ==== routing (moe_route.c) ==== */

/* C, the slots each expert has in a group of T tokens: ceil(factor * k * T / E), at
 * least 1 and at most T (an expert gets each token at most once). The factor is a
 * float such as 1.1f, a hair above 1.1: the product is rounded to 6 digits before the
 * ceiling, so that 1.1 x 80 / 8 gives 11 slots, not 12. */
int dti_moe_capacity(double factor, int k, int T, int E);

/* The next three run where their output is: host, or device (all pointers there). */

/* Softmax of each of the B rows of x (B, E) into p (B, E); p may be x. */
void dti_moe_softmax(const float *x, float *p, int B, int E);
/* Its backward: dx[e] = p[e] (dp[e] - sum_j p[j] dp[j]) per row; dx may be dp. */
void dti_moe_softmax_backward(const float *p, const float *dp, float *dx, int B, int E);

/* The k (1 or 2) experts of each row of p (B, E), largest probability first, the lower
 * index winning a tie: choice (B, k). */
void dti_moe_topk(const float *p, int B, int E, int k, int *choice);

/* Routes one group of T tokens with choices (T, k) to E experts of C slots each, as
 * GShard does: first every token's first choice in token order, then every second
 * choice; a choice finding its expert full is dropped. Writes slot (T, k): the slot
 * taken, or -1 for a dropped choice; routed[E]: the choices that asked for each expert;
 * kept[E]: the ones it took (kept[e] <= C, slots 0 .. kept[e]-1 filled). Returns the
 * choices dropped. */
int dti_moe_route(const int *choice, int T, int k, int E, int C, int *slot,
                  int *routed, int *kept);

/* ==== one step's loops over this rank's tokens (moe_route.c) ====
 *
 * What moe.c does between the products of the gate and of the experts, on the B = Gl * T
 * rows of a rank (d, moe_cuda.h), every group at once. Each runs where its output is,
 * host or device, all its pointers on that side; none works in place. On the device
 * they only queue their kernels: the caller waits before the host or another rank reads
 * what they wrote (a dt_memcpy does). choice, slot (B, k) as dti_moe_topk and
 * dti_moe_route make them. */

/* dti_moe_route on each of the Gl groups of T tokens: slot (B, k), routed and kept
 * (Gl, E), dropped (Gl) its return value. */
void dti_moe_route_groups(dti_moe_dims d, const int *choice, int *slot, int *routed,
                          int *kept, int *dropped);
/* Adds the step's routing figures to st (DTI_MOE_NST(E) doubles, moe_cuda.h): each
 * group's dropped choices and routed counts, group by group; then each row's first
 * choice and its probabilities prob (B, E), row by row. */
void dti_moe_stats(dti_moe_dims d, const float *prob, const int *choice, const int *routed,
                   const int *dropped, double *st);
/* st[DTI_MOE_LOSS(E)] = loss. */
void dti_moe_set_loss(double *st, int E, double loss);
/* The load-balancing loss's gradient for every p[e] of every row, from st summed over
 * the batch of B rows: aux[e] = alpha * E * f_e / B, f_e = st[DTI_MOE_FIRST * E + e] / B,
 * in double (E floats). */
void dti_moe_aux(const double *st, double alpha, int E, int B, float *aux);

/* The token side's slots xs (N * Gl * El * C * H floats): the row x (B, H) of each kept
 * choice at dti_moe_slot_at, zeros in every slot not filled. */
void dti_moe_scatter(dti_moe_dims d, const float *x, const int *choice, const int *slot,
                     float *xs);
/* y (B, H) = x + p[e] * ys[slot of e], over the kept choices in order, ys the experts'
 * outputs come back (laid out as xs), p[e] from prob (B, E). */
void dti_moe_combine(dti_moe_dims d, const float *x, const float *prob, const int *choice,
                     const int *slot, const float *ys, float *y);
/* Backward of the combine, dy (B, H) the gradient of y: dp (B, E) = aux + dy . ys[slot]
 * for each kept choice's expert; dys (as xs) = p[e] * dy at each kept choice's slot,
 * zeros elsewhere. */
void dti_moe_slots_backward(dti_moe_dims d, const float *dy, const float *prob,
                            const int *choice, const int *slot, const float *ys,
                            const float *aux, float *dp, float *dys);
/* dx (B, H) = dy + dxs[slot] over the kept choices in order + dgate: the residual's,
 * the experts' (come back, laid out as xs) and the gate's gradients of x. */
void dti_moe_x_backward(dti_moe_dims d, const float *dy, const int *choice,
                        const int *slot, const float *dxs, const float *dgate, float *dx);

/* dst[j] = the sum of pg[g * stride + j] over g = 0 .. G-1 in that order, from 0, for
 * j < n: the same additions on any number of ranks. */
void dti_moe_sum_groups(const float *pg, size_t stride, int G, size_t n, float *dst);

#endif /* DT_MOE_H */
