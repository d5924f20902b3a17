/* Planted mistake 1f1b_no_warmup: 1F1B without its warm-up. Every stage alternates one
 * forward and one backward from the start (F0 B0 F1 B1 ...), so a stage waits for each
 * gradient before it sends the next micro-batch on: the pipeline never fills. The
 * timetable below is right; it plays whatever order ex_pp_order gives. */
#include <stdlib.h>
#include "exercises.h"

int ex_pp_order(int schedule, int P, int M, int s, dt_pp_op *ops)
{
    (void)P; (void)s;
    int k = 0;
    if (schedule == 0) {
        for (int m = 0; m < M; m++)
            ops[k++] = (dt_pp_op){ 'F', m };
        for (int m = 0; m < M; m++)
            ops[k++] = (dt_pp_op){ 'B', m };
        return k;
    }
    for (int m = 0; m < M; m++) {       /* the mistake: no warm-up forwards first */
        ops[k++] = (dt_pp_op){ 'F', m };
        ops[k++] = (dt_pp_op){ 'B', m };
    }
    return k;
}

static int find(const dt_pp_op *ops, int n, char kind, int micro)
{
    for (int k = 0; k < n; k++)
        if (ops[k].kind == kind && ops[k].micro == micro)
            return k;
    return -1;
}

int ex_pp_timetable(int schedule, int P, int M, int tb, int *start)
{
    int n = 2 * M, left = P * n, end = 0;
    dt_pp_op *ops = malloc((size_t)P * n * sizeof *ops);
    DT_REQUIRE(ops != NULL, "out of memory");
    for (int s = 0; s < P; s++)
        ex_pp_order(schedule, P, M, s, ops + (size_t)s * n);
    for (int i = 0; i < P * n; i++)
        start[i] = -1;
    while (left > 0) {
        for (int s = 0; s < P; s++) {
            for (int k = 0; k < n; k++) {
                if (start[s * n + k] >= 0)
                    continue;
                dt_pp_op o = ops[s * n + k];
                int t = 0;
                if (k > 0) {
                    if (start[s * n + k - 1] < 0)
                        break;
                    t = start[s * n + k - 1] + (ops[s * n + k - 1].kind == 'F' ? 1 : tb);
                }
                int d = o.kind == 'F' ? s - 1 : s + 1;
                if (d >= 0 && d < P) {
                    int dk = find(ops + d * n, n, o.kind, o.micro);
                    if (start[d * n + dk] < 0)
                        break;
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
