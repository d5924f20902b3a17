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
    /* TODO(exercise): fill ops[0 .. 2M-1] with put(ops, &k, 'F' or 'B', m).
     *   GPipe (schedule 0): every forward F0 .. F(M-1), then every backward B0 .. B(M-1).
     *   1F1B (schedule 1): first w = min(P-s-1, M) warm-up forwards F0 .. F(w-1); then,
     *   while forwards remain, one forward and one backward in turn (F(w) B0 F(w+1)
     *   B1 ...); then the backwards that remain, in increasing m.
     * Stage s needs the warm-up: the stages after it still have micro-batches to push
     * through before the first gradient comes back to s. */
    (void)schedule; (void)P; (void)M; (void)s; (void)put;
    (void)ops; (void)k;
    EX_TODO();
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

    /* TODO(exercise): set start[s*n + k] for every stage s and place k, and return the
     * slots the whole step takes (the latest end). A forward lasts 1 slot, a backward
     * tb. An operation starts at the later of
     *   - the end of the stage's previous operation (0 for its first), and
     *   - the end of the operation it waits on: F m waits on F m of stage s-1 (none at
     *     stage 0), B m on B m of stage s+1 (none at the last stage).
     * find(ops + dep*n, n, kind, m) tells where that operation sits on stage dep. Its
     * start may still be -1: place stages in rounds, each stage going as far along its
     * order as it can, until every start is set. */
    (void)tb; (void)find;
    free(ops);
    EX_TODO();
}
