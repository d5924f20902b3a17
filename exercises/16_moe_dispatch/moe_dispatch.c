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
    /* TODO(exercise): C = ceil(factor * k * T / E), with the product rounded to 6
     * decimals before the ceiling (round(v * 1e6) / 1e6), then at least 1 and at most T.
     * 0 when there are no tokens. */
    (void)factor; (void)k; (void)T; (void)E;
    EX_TODO();
}

void ex_moe_route(const float *logits, int T, int E, int k, int *choice, float *weight)
{
    /* TODO(exercise): for each token t, row t of logits (T, E):
     *     p = softmax(row)          subtract the row's max before expf
     *     choice[t*k + 0]           the most probable expert, the lower index on a tie
     *     choice[t*k + 1] (k = 2)   the most probable of the others
     *     weight[t*k + j]           p of choice j: as it is for k = 1; for k = 2,
     *                               divided by the sum of the two chosen */
    (void)logits; (void)T; (void)E; (void)k; (void)choice; (void)weight;
    EX_TODO();
}

int ex_moe_assign(const int *choice, int T, int k, int E, int C, int *slot, int *kept,
                  int *drop)
{
    /* TODO(exercise): every token's first choice in token order, then (k = 2) every
     * second choice: each takes its expert's next free slot, 0 .. C-1, or is dropped
     * (slot -1) when the expert has C already. kept[e], drop[e]: expert e's choices
     * taken and dropped (set all E of each). Return the dropped in all. */
    (void)choice; (void)T; (void)k; (void)E; (void)C; (void)slot; (void)kept; (void)drop;
    EX_TODO();
}

int ex_moe_send_layout(const int *choice, const int *slot, int T, int k, int E, int N,
                       int *counts, int *sdispls, int *order)
{
    /* TODO(exercise): the kept choices (slot >= 0) go to their expert's rank, expert e
     * on rank e / (E / N). counts[r]: how many go to rank r; sdispls[r]: the sum of
     * counts[0 .. r-1] (exclusive: sdispls[0] = 0); order: the send buffer's rows, one
     * token index per row, expert 0's tokens in token order, then expert 1's, ...
     * Return the rows. */
    (void)choice; (void)slot; (void)T; (void)k; (void)E; (void)N; (void)counts;
    (void)sdispls; (void)order;
    EX_TODO();
}
