/* Exercise 16, dtlab's own answer: lib/parallel/moe_route.c's capacity, softmax, top-k
 * and routing (dti_moe_capacity, dti_moe_softmax, dti_moe_topk, dti_moe_route). dtlab
 * weighs each kept choice by its gate probability as it is; the exercise renormalises
 * top-2's over the two chosen, as GShard does, and that division is done here. dtlab's
 * all-to-all carries whole slot blocks (dti_moe_slot_at); the send layout of the
 * exercise, the kept tokens only, by expert then token, is built here by hand. */
#include <stdlib.h>
#include "exercises.h"
#include "parallel/moe.h"

int ex_moe_capacity(double factor, int k, int T, int E)
{
    return T > 0 ? dti_moe_capacity(factor, k, T, E) : 0;
}

void ex_moe_route(const float *logits, int T, int E, int k, int *choice, float *weight)
{
    float *p = malloc(((size_t)T * E + 1) * sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory");
    dti_moe_softmax(logits, p, T, E);
    dti_moe_topk(p, T, E, k, choice);
    for (int t = 0; t < T; t++) {
        const float *p_t = p + (size_t)t * E;
        const int *c_t = choice + (size_t)t * k;
        float sum = k == 2 ? p_t[c_t[0]] + p_t[c_t[1]] : 1.0f;
        for (int j = 0; j < k; j++)
            weight[(size_t)t * k + j] = p_t[c_t[j]] / sum;
    }
    free(p);
}

int ex_moe_assign(const int *choice, int T, int k, int E, int C, int *slot, int *kept,
                  int *drop)
{
    int *routed = malloc((size_t)E * sizeof *routed);
    DT_REQUIRE(routed != NULL, "out of memory");
    int dropped = dti_moe_route(choice, T, k, E, C, slot, routed, kept);
    for (int e = 0; e < E; e++)
        drop[e] = routed[e] - kept[e];
    free(routed);
    return dropped;
}

int ex_moe_send_layout(const int *choice, const int *slot, int T, int k, int E, int N,
                       int *counts, int *sdispls, int *order)
{
    int El = E / N, rows = 0;
    for (int r = 0; r < N; r++)
        counts[r] = 0;
    for (int e = 0; e < E; e++)
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (choice[(size_t)t * k + j] == e && slot[(size_t)t * k + j] >= 0) {
                    order[rows++] = t;
                    counts[e / El]++;
                }
    for (int r = 0, at = 0; r < N; at += counts[r++])
        sdispls[r] = at;
    return rows;
}
