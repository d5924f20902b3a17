/* Exercise 12: ring attention's arithmetic. A sequence too long for one rank is cut
 * into chunks across the ranks; the keys and values pass around a ring, a block at a
 * time, and each query row folds every block it sees into a running partial result,
 * the online softmax. You write the partial, the merge of two partials, and the ring's
 * bookkeeping: which block a rank holds at each step, and what the causal mask leaves
 * of it. No MPI here: the ring is played on arrays.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=12 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "exercises.h"

void ex_attn_partial(const float *s, const float *v, int n, int d, float *m, float *l,
                     float *o)
{
    /* TODO(exercise): *m = the largest of s[0..n); *l = sum_j e^(s_j - m);
     * o[e] = sum_j e^(s_j - m) v[j*d + e]. Over no key (n == 0): m = -INFINITY, l = 0,
     * o all 0. Why subtract m: e^s overflows a float past s = 88.7, and is 0 below
     * s = -103; every e^(s_j - m) lies in (0, 1]. */
    (void)s; (void)v; (void)n; (void)d; (void)m; (void)l; (void)o;
    EX_TODO();
}

void ex_softmax_merge(float *m, float *l, float *o, float m2, float l2, const float *o2,
                      int d)
{
    /* TODO(exercise): the new maximum is the larger of *m and m2. Each side's l and o
     * were summed relative to its own maximum: rescale each by e^(its m - the new m)
     * before adding them, then keep the new maximum in *m. Two empty partials (both
     * maxima -INFINITY) stay empty: e^(-inf - (-inf)) is NaN. */
    (void)m; (void)l; (void)o; (void)m2; (void)l2; (void)o2; (void)d;
    EX_TODO();
}

int ex_ring_source(int r, int C, int step)
{
    /* TODO(exercise): at step 0 a rank holds its own block; at each step it passes the
     * block in hand to its right and receives the one its left neighbour held. Mind the
     * wrap-around: in C, -1 % 4 is -1. */
    (void)r; (void)C; (void)step;
    EX_TODO();
}

int ex_cp_chunk(int r, int C, int zigzag, int a)
{
    /* TODO(exercise): plain: chunk r of C. Zig-zag: chunk r (a = 0) and chunk 2C-1-r
     * (a = 1) of 2C, one from each end of the sequence. */
    (void)r; (void)C; (void)zigzag; (void)a;
    EX_TODO();
}

int ex_block_kind(int r, int C, int zigzag, int step, int a, int b)
{
    /* TODO(exercise): the queries are rank r's chunk a, the keys chunk b of the rank
     * whose block r holds at step (ex_ring_source). The chunks are of equal length, so
     * their places in the sequence (ex_cp_chunk) decide: keys of an earlier chunk are
     * all seen (EX_ATTN_FULL), of the same chunk seen up to the query's own position
     * (EX_ATTN_DIAG), of a later chunk never (EX_ATTN_SKIP). */
    (void)r; (void)C; (void)zigzag; (void)step; (void)a; (void)b;
    EX_TODO();
}

static float dot(const float *a, const float *b, int d)
{
    float s = 0.0f;
    for (int e = 0; e < d; e++)
        s += a[e] * b[e];
    return s;
}

void ex_ring_step(int r, int C, int zigzag, int step, int n, int d, const float *q,
                  const float *k, const float *v, float *m, float *l, float *o)
{
    int nc = zigzag ? 2 : 1;                    /* chunks a rank holds */
    float scale = 1.0f / sqrtf((float)d);
    /* s: one row's scores against up to n keys; po: d floats of a partial's o */
    float *s = malloc((size_t)n * sizeof *s), *po = malloc((size_t)d * sizeof *po);
    DT_REQUIRE(s != NULL && po != NULL, "out of memory");
    /* TODO(exercise): for each query chunk a and key chunk b (0 .. nc-1), ask
     * ex_block_kind what the mask leaves; skip a block it hides. Else, for each query
     * row i of chunk a (row a*n + i of q, m, l and o): the scores of the keys it sees,
     * dot(q_row, k_row, d) * scale, with key rows b*n + j (all n keys, or j = 0..i on
     * the diagonal); their partial (ex_attn_partial, values v from row b*n); merged
     * into the row's running m, l and o (ex_softmax_merge). */
    (void)r; (void)C; (void)step; (void)q; (void)k; (void)v; (void)m; (void)l; (void)o;
    (void)nc; (void)scale; (void)dot;
    free(s);
    free(po);
    EX_TODO();
}
