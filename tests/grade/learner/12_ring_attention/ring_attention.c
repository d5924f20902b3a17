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
    float mx = -INFINITY, sum = 0.0f;
    for (int j = 0; j < n; j++)
        mx = s[j] > mx ? s[j] : mx;
    memset(o, 0, (size_t)d * sizeof *o);
    for (int j = 0; j < n; j++) {
        float p = expf(s[j] - mx);          /* <= 1: no overflow */
        sum += p;
        for (int e = 0; e < d; e++)
            o[e] += p * v[(size_t)j * d + e];
    }
    *m = mx;
    *l = sum;
}

void ex_softmax_merge(float *m, float *l, float *o, float m2, float l2, const float *o2,
                      int d)
{
    float mn = *m > m2 ? *m : m2;
    if (mn == -INFINITY)                    /* both empty: nothing to merge */
        return;
    float a = expf(*m - mn), b = expf(m2 - mn);
    *l = *l * a + l2 * b;
    for (int e = 0; e < d; e++)
        o[e] = o[e] * a + o2[e] * b;
    *m = mn;
}

int ex_ring_source(int r, int C, int step)
{
    return ((r - step) % C + C) % C;
}

int ex_cp_chunk(int r, int C, int zigzag, int a)
{
    return zigzag && a == 1 ? 2 * C - 1 - r : r;
}

int ex_block_kind(int r, int C, int zigzag, int step, int a, int b)
{
    int qc = ex_cp_chunk(r, C, zigzag, a);
    int kc = ex_cp_chunk(ex_ring_source(r, C, step), C, zigzag, b);
    return kc < qc ? EX_ATTN_FULL : kc == qc ? EX_ATTN_DIAG : EX_ATTN_SKIP;
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
    int nc = zigzag ? 2 : 1;
    float scale = 1.0f / sqrtf((float)d);
    float *s = malloc((size_t)n * sizeof *s), *po = malloc((size_t)d * sizeof *po);
    DT_REQUIRE(s != NULL && po != NULL, "out of memory");
    for (int a = 0; a < nc; a++)
        for (int b = 0; b < nc; b++) {
            int kind = ex_block_kind(r, C, zigzag, step, a, b);
            if (kind == EX_ATTN_SKIP)
                continue;
            const float *kb = k + (size_t)b * n * d, *vb = v + (size_t)b * n * d;
            for (int i = 0; i < n; i++) {
                int row = a * n + i;
                int seen = kind == EX_ATTN_FULL ? n : i + 1;    /* key j <= query i */
                for (int j = 0; j < seen; j++)
                    s[j] = dot(q + (size_t)row * d, kb + (size_t)j * d, d) * scale;
                float pm, pl;
                ex_attn_partial(s, vb, seen, d, &pm, &pl, po);
                ex_softmax_merge(&m[row], &l[row], o + (size_t)row * d, pm, pl, po, d);
            }
        }
    free(s);
    free(po);
}
