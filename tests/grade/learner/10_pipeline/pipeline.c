/* Exercise 10: pipeline timetables. P stages each hold a run of layers; a step's batch
 * is cut into M micro-batches. Each stage runs 2M operations, the forward F m and the
 * backward B m of every micro-batch m. You write the order a stage runs them in (GPipe
 * or 1F1B), then play every stage's order on one clock to see when each one runs.
 * No MPI here: the pipeline is played on paper, on arrays.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=10 */
#include <stdlib.h>
#include "exercises.h"

/* Appends the operation (kind, micro) to ops at *k. */
static void put(dt_pp_op *ops, int *k, char kind, int micro)
{
    ops[*k] = (dt_pp_op){ .kind = kind, .micro = micro };
    (*k)++;
}

int ex_pp_order(int schedule, int P, int M, int s, dt_pp_op *ops)
{
    int k = 0;      /* the next free place in ops */
    if (schedule == 0) {                /* GPipe: every forward, then every backward */
        for (int m = 0; m < M; m++)
            put(ops, &k, 'F', m);
        for (int m = 0; m < M; m++)
            put(ops, &k, 'B', m);
        return k;
    }
    /* 1F1B: the warm-up forwards; then a forward and a backward in turn while forwards
     * remain; then the backwards left */
    int w = P - s - 1 < M ? P - s - 1 : M;
    for (int m = 0; m < w; m++)
        put(ops, &k, 'F', m);
    for (int m = 0; m < M; m++) {
        if (w + m < M)
            put(ops, &k, 'F', w + m);
        put(ops, &k, 'B', m);
    }
    return k;
}

/* Where (kind, micro) comes in a stage's order ops[0 .. n-1], or -1. */
static int find(const dt_pp_op *ops, int n, char kind, int micro)
{
    for (int k = 0; k < n; k++)
        if (ops[k].kind == kind && ops[k].micro == micro)
            return k;
    return -1;
}

int ex_pp_timetable(int schedule, int P, int M, int tb, int *start)
{
    int n = 2 * M;
    /* ops[s*n + k]: stage s's k-th operation, in the order ex_pp_order gives */
    dt_pp_op *ops = malloc((size_t)P * n * sizeof *ops);
    DT_REQUIRE(ops != NULL, "out of memory for %d x %d operations", P, n);
    for (int s = 0; s < P; s++)
        ex_pp_order(schedule, P, M, s, ops + (size_t)s * n);
    for (int i = 0; i < P * n; i++)
        start[i] = -1;          /* -1: not placed on the clock yet */

    int left = P * n, end = 0;          /* operations not placed yet; the latest end */
    while (left > 0) {
        for (int s = 0; s < P; s++) {
            for (int k = 0; k < n; k++) {
                if (start[s * n + k] >= 0)
                    continue;
                dt_pp_op o = ops[s * n + k];
                int t = 0;              /* after the stage's previous operation */
                if (k > 0) {
                    if (start[s * n + k - 1] < 0)
                        break;
                    t = start[s * n + k - 1] + (ops[s * n + k - 1].kind == 'F' ? 1 : tb);
                }
                int d = o.kind == 'F' ? s - 1 : s + 1;     /* the stage it waits on */
                if (d >= 0 && d < P) {
                    int dk = find(ops + d * n, n, o.kind, o.micro);
                    if (start[d * n + dk] < 0)
                        break;          /* not placed yet: the next round */
                    int dend = start[d * n + dk] + (o.kind == 'F' ? 1 : tb);
                    t = dend > t ? dend : t;
                }
                start[s * n + k] = t;
                left--;
                int e = t + (o.kind == 'F' ? 1 : tb);
                end = e > end ? e : end;
            }
        }
    }
    free(ops);
    return end;
}
