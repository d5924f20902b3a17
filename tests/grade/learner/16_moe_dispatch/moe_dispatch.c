/* Exercise 16: MoE dispatch. A mixture-of-experts layer sends each token to k of E
 * experts, chosen by a gate: a softmax over the token's E logits, the top-k of it. Each
 * expert has room for C tokens, its capacity; the rest are dropped. The experts live on
 * N ranks, and one all-to-all carries every kept token to its expert's rank.
 * No MPI here: the routing is computed and the all-to-all laid out, not sent.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=16 */
#include <math.h>
#include "exercises.h"

int ex_moe_capacity(double factor, int k, int T, int E)
{
    if (T == 0)
        return 0;
    double v = round(factor * k * T / E * 1e6) / 1e6;  /* 1.1f * 80 / 8: 11, not 12 */
    int C = (int)ceil(v);
    return C < 1 ? 1 : C > T ? T : C;
}

void ex_moe_route(const float *logits, int T, int E, int k, int *choice, float *weight)
{
    for (int t = 0; t < T; t++) {
        const float *x_t = logits + (size_t)t * E;         /* (E) */
        int *c_t = choice + (size_t)t * k;                 /* (k) */
        float *w_t = weight + (size_t)t * k;               /* (k) */
        float m = x_t[0], sum = 0.0f;
        for (int e = 1; e < E; e++)
            m = x_t[e] > m ? x_t[e] : m;
        for (int e = 0; e < E; e++)
            sum += expf(x_t[e] - m);
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if ((j == 0 || e != c_t[0]) && (best < 0 || x_t[e] > x_t[best]))
                    best = e;                              /* a tie keeps the lower */
            c_t[j] = best;
            w_t[j] = expf(x_t[best] - m) / sum;
        }
        if (k == 2) {
            float s = w_t[0] + w_t[1];
            w_t[0] /= s;
            w_t[1] /= s;
        }
    }
}

int ex_moe_assign(const int *choice, int T, int k, int E, int C, int *slot, int *kept,
                  int *drop)
{
    int dropped = 0;
    for (int e = 0; e < E; e++)
        kept[e] = drop[e] = 0;
    for (int j = 0; j < k; j++)                        /* first choices, then second */
        for (int t = 0; t < T; t++) {
            int i = t * k + j, e = choice[i];
            if (kept[e] < C) {
                slot[i] = kept[e]++;
            } else {
                slot[i] = -1;
                drop[e]++;
                dropped++;
            }
        }
    return dropped;
}

int ex_moe_send_layout(const int *choice, const int *slot, int T, int k, int E, int N,
                       int *counts, int *sdispls, int *order)
{
    int El = E / N, rows = 0;
    for (int r = 0; r < N; r++)
        counts[r] = 0;
    for (int e = 0; e < E; e++)                        /* by expert, then token */
        for (int t = 0; t < T; t++)
            for (int j = 0; j < k; j++)
                if (choice[t * k + j] == e && slot[t * k + j] >= 0) {
                    order[rows++] = t;
                    counts[e / El]++;
                }
    int at = 0;
    for (int r = 0; r < N; r++) {
        sdispls[r] = at;
        at += counts[r];
    }
    return rows;
}
