/* Exercise 12, dtlab's own answer: the ring step is lib/nn/ringattn.c's
 * dt_attn_block_forward on each pair of chunks, its causal mask taken from the chunks'
 * positions (dt_cp_zigzag); the partial and the merge, which the library does in one
 * pass, written out. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "exercises.h"

void ex_attn_partial(const float *s, const float *v, int n, int d, float *m, float *l,
                     float *o)
{
    *m = -INFINITY;
    *l = 0.0f;
    memset(o, 0, (size_t)d * sizeof *o);
    for (int j = 0; j < n; j++)
        *m = fmaxf(*m, s[j]);
    for (int j = 0; j < n; j++) {
        float p = expf(s[j] - *m);
        *l += p;
        for (int e = 0; e < d; e++)
            o[e] += p * v[(size_t)j * d + e];
    }
}

void ex_softmax_merge(float *m, float *l, float *o, float m2, float l2, const float *o2,
                      int d)
{
    float mn = fmaxf(*m, m2);
    if (mn == -INFINITY)
        return;                             /* two empty partials: still empty */
    float a = expf(*m - mn), b = expf(m2 - mn);
    for (int e = 0; e < d; e++)
        o[e] = o[e] * a + o2[e] * b;
    *l = *l * a + l2 * b;
    *m = mn;
}

int ex_ring_source(int r, int C, int step)
{
    return (r - step % C + C) % C;
}

int ex_cp_chunk(int r, int C, int zigzag, int a)
{
    int first, second;
    if (!zigzag)
        return r;
    dt_cp_zigzag(r, C, 2 * C, &first, &second);   /* chunks of one position */
    return a ? second : first;
}

int ex_block_kind(int r, int C, int zigzag, int step, int a, int b)
{
    int qc = ex_cp_chunk(r, C, zigzag, a);
    int kc = ex_cp_chunk(ex_ring_source(r, C, step), C, zigzag, b);
    return kc < qc ? EX_ATTN_FULL : kc > qc ? EX_ATTN_SKIP : EX_ATTN_DIAG;
}

void ex_ring_step(int r, int C, int zigzag, int step, int n, int d, const float *q,
                  const float *k, const float *v, float *m, float *l, float *o)
{
    int nc = zigzag ? 2 : 1, src = ex_ring_source(r, C, step);
    float *scratch = malloc((size_t)n * sizeof *scratch);
    DT_REQUIRE(scratch != NULL, "out of memory");
    for (int a = 0; a < nc; a++)
        for (int b = 0; b < nc; b++) {
            size_t qa = (size_t)a * n, kb = (size_t)b * n;
            dt_attn_block_forward(q + qa * d, d, k + kb * d, v + kb * d, d, n, n,
                                  ex_cp_chunk(r, C, zigzag, a) * n,
                                  ex_cp_chunk(src, C, zigzag, b) * n, d, m + qa, l + qa,
                                  o + qa * d, d, scratch);
        }
    free(scratch);
}
