/* The mixture-of-experts model (moe.c) and its routing arithmetic (moe_route.c).
 *
 * dt_moe_* are for programs (train, lesson 19, the tests): the model's shape and the
 * capacity, from a configuration. dti_moe_* are the pure routing steps moe.c uses and
 * tests/unit_moe.c checks: host arrays, no MPI. */
#ifndef DT_MOE_H
#define DT_MOE_H

#include <stddef.h>
#include "parallel.h"

/* ==== the model's shape (moe_route.c) ==== */

/* Experts on n ranks: c->experts, or 2 per rank when it is 0. */
int dt_moe_experts(const dt_train_config *c, int n);
/* Token groups on n ranks: c->moe_groups, or one per rank when it is 0. */
int dt_moe_groups(const dt_train_config *c, int n);
/* Which layer of the MLP the MoE layer replaces: layers / 2 (1 .. layers - 2). */
int dt_moe_layer(const dt_mlp_config *m);
/* Weights of the whole model on n ranks: the MLP's, less the replaced layer, plus the
 * gate (E x hidden + E) and E experts (hidden x hidden + hidden each). The layout of
 * train --dump: layers before the MoE layer | gate W, b | expert 0 W, b | ... |
 * expert E-1 | the layers after. */
size_t dt_moe_nparams(const dt_train_config *c, int n);
/* Slots per expert per group on n ranks (see dti_moe_capacity). */
int dt_moe_capacity(const dt_train_config *c, int n);

/* ==== routing (moe_route.c) ==== */

/* C, the slots each expert has in a group of T tokens: ceil(factor * k * T / E), at
 * least 1 and at most T (an expert gets each token at most once). The factor is a
 * float such as 1.1f, a hair above 1.1: the product is rounded to 6 digits before the
 * ceiling, so that 1.1 x 80 / 8 gives 11 slots, not 12. */
int dti_moe_capacity(double factor, int k, int T, int E);

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

#endif /* DT_MOE_H */
