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
    /* TODO(exercise): k = M / P groups (one when M < P), every micro-batch in one, in
     * order; the first M % k groups hold one more than the others. Write the sizes
     * g[0 .. k-1] and return k. (Each group then holds P .. 2P-1 micro-batches when
     * M >= P: why at least P, and why the larger first, README.md says.) */
    (void)P; (void)M; (void)g;
    EX_TODO();
}

dt_pp_op ex_il_table(int P, int M, int v, int fwd, int t)
{
    /* TODO(exercise): the t-th forward (fwd 1) or backward (fwd 0) of a stage. The
     * table runs group by group (ex_il_groups; g has room for M sizes): a group of
     * size n starting at micro-batch lo fills v n entries, n a chunk. Forwards go
     * through chunk 0 first, then 1, ..., v-1; backwards through chunk v-1 first,
     * then v-2, ..., 0 (the gradient comes back from the last layers). E.g. P = 2,
     * M = 5, v = 2: groups of 3 and 2 (a, b: chunks 0, 1):
     *     forwards   F0a F1a F2a F0b F1b F2b | F3a F4a F3b F4b
     *     backwards  B0b B1b B2b B0a B1a B2a | B3b B4b B3a B4a  */
    (void)P; (void)M; (void)v; (void)fwd; (void)t;
    EX_TODO();
}

int ex_il_order(int P, int M, int v, int s, dt_pp_op *ops)
{
    int k = 0;      /* the next free place in ops */
    /* TODO(exercise): stage s's 2vM operations, with put() or ops[k++] = ex_il_table().
     *   warm-up:  w = (v-1) g + P-s-1 forwards (g: the first group's size), at most
     *             vM: the table's forwards 0 .. w-1;
     *   steady:   while forwards remain, the next forward, then the next backward;
     *   cool-down: the backwards left.
     * So v = 1 is exercise 10's 1F1B. */
    (void)P; (void)M; (void)v; (void)s; (void)ops; (void)k; (void)put;
    EX_TODO();
}

int ex_zb_order(int P, int M, int s, dt_pp_op *ops)
{
    int k = 0;      /* the next free place in ops */
    /* TODO(exercise): stage s's 3M operations, chunk 0: 1F1B's order of F and B
     * (warm-up min(P-s-1, M) forwards, then F and B in turn, then the B's left), with
     * W m put off by s micro-batches: right after B (m+s); the W's of the last
     * min(s, M) micro-batches, which have no B that late, after the last B, in
     * increasing m. */
    (void)P; (void)M; (void)s; (void)ops; (void)k;
    EX_TODO();
}
