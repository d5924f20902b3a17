/* Exercise 13, dtlab's own answer: lib/schedule.c. The groups are cut as
 * dt_chunk_bounds cuts elements; a stage's forwards and backwards, read off its order,
 * are the tables every stage shares. */
#include <stdlib.h>
#include "exercises.h"

int ex_il_groups(int P, int M, int *g)
{
    int k = M >= P ? M / P : 1;
    for (int i = 0; i < k; i++) {
        size_t lo, hi;
        dt_chunk_bounds((size_t)M, k, i, &lo, &hi);
        g[i] = (int)(hi - lo);
    }
    return k;
}

dt_pp_op ex_il_table(int P, int M, int v, int fwd, int t)
{
    int n = dt_pp_nops(DT_PP_INTERLEAVED, P, M, v);
    dt_pp_op *ops = malloc((size_t)n * sizeof *ops), op = { .kind = '?' };
    DT_REQUIRE(ops != NULL, "out of memory");
    dt_pp_order_v(DT_PP_INTERLEAVED, P, M, v, 0, ops);
    for (int k = 0, i = 0; k < n; k++)
        if (ops[k].kind == (fwd ? 'F' : 'B') && i++ == t)
            op = ops[k];
    free(ops);
    return op;
}

int ex_il_order(int P, int M, int v, int s, dt_pp_op *ops)
{
    return dt_pp_order_v(DT_PP_INTERLEAVED, P, M, v, s, ops);
}

int ex_zb_order(int P, int M, int s, dt_pp_op *ops)
{
    return dt_pp_order_v(DT_PP_ZBH1, P, M, 1, s, ops);
}
