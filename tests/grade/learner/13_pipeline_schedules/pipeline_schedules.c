/* Exercise 13: today's pipeline schedules. Exercise 10's 1F1B leaves each stage idle
 * (P-1)/(M+P-1) of a step. Two schedules cut that bubble: interleaved 1F1B gives each
 * stage v chunks of layers, so a micro-batch goes round the stages v times and the
 * bubble shrinks v-fold; ZB-H1 cuts the backward into B (the input's gradient, which
 * the stage before waits for) and W (the weights' gradient, which nobody waits for) and
 * puts the W's off to fill the tail. You write the order one stage runs its operations
 * in; the grader plays every stage's order together on a clock.
 * No MPI here: the pipeline is played on paper, on arrays.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=13 */
#include <stdlib.h>
#include "exercises.h"

/* Appends the operation (kind, micro, chunk) to ops at *k. */
static void put(dt_pp_op *ops, int *k, char kind, int micro, int chunk)
{
    ops[*k] = (dt_pp_op){ .kind = kind, .micro = micro, .chunk = chunk };
    (*k)++;
}

int ex_il_groups(int P, int M, int *g)
{
    int k = M >= P ? M / P : 1;
    for (int i = 0; i < k; i++)
        g[i] = M / k + (i < M % k);         /* the larger groups first */
    return k;
}

dt_pp_op ex_il_table(int P, int M, int v, int fwd, int t)
{
    int *g = malloc((size_t)M * sizeof *g);
    DT_REQUIRE(g != NULL, "out of memory for %d groups", M);
    ex_il_groups(P, M, g);
    int i = 0, lo = 0;
    while (t >= v * g[i]) {             /* the group entry t falls in */
        t -= v * g[i];
        lo += g[i];
        i++;
    }
    int n = g[i], j = t / n;            /* j: the j-th chunk the group goes through */
    free(g);
    return (dt_pp_op){ .kind = fwd ? 'F' : 'B', .micro = lo + t % n,
                       .chunk = fwd ? j : v - 1 - j };
}

int ex_il_order(int P, int M, int v, int s, dt_pp_op *ops)
{
    int k = 0, n = v * M;
    int *g = malloc((size_t)M * sizeof *g);
    DT_REQUIRE(g != NULL, "out of memory for %d groups", M);
    ex_il_groups(P, M, g);
    int w = (v - 1) * g[0] + P - s - 1;
    if (w > n)
        w = n;
    free(g);
    for (int t = 0; t < w; t++)                 /* warm-up */
        ops[k++] = ex_il_table(P, M, v, 1, t);
    for (int i = 0; i < n; i++) {               /* steady, then cool-down */
        if (w + i < n)
            ops[k++] = ex_il_table(P, M, v, 1, w + i);
        ops[k++] = ex_il_table(P, M, v, 0, i);
    }
    return k;
}

int ex_zb_order(int P, int M, int s, dt_pp_op *ops)
{
    int k = 0, d = s;               /* d: how far W m is put off behind B m */
    int w = P - s - 1 < M ? P - s - 1 : M;
    for (int m = 0; m < w; m++)
        put(ops, &k, 'F', m, 0);
    for (int m = 0; m < M; m++) {
        if (w + m < M)
            put(ops, &k, 'F', w + m, 0);
        put(ops, &k, 'B', m, 0);
        if (m >= d)
            put(ops, &k, 'W', m - d, 0);
    }
    for (int m = M - d > 0 ? M - d : 0; m < M; m++)     /* the W's left */
        put(ops, &k, 'W', m, 0);
    return k;
}
