/* Exercise 17: resharding a checkpoint. A checkpoint written by N ranks holds, per old
 * rank, a region of floats and its map: the parameters of the whole model they hold.
 * Resuming on M ranks, each new rank finds which old regions, and which ranges of them,
 * hold the parameters its own map needs, reads them, and rebuilds its buffer.
 * No MPI here: the reads are planned and applied, not sent.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=17 */
#include <stdlib.h>
#include <string.h>
#include "exercises.h"

int ex_span_runs(const ex_span *s, int n, ex_run *out)
{
    int k = 0;
    for (int j = 0; j < n; j++) {
        for (size_t b = 0; b < s[j].count; b++) {
            size_t a = s[j].start + b * s[j].stride;
            if (s[j].len == 0)
                continue;
            if (k > 0 && out[k - 1].start + out[k - 1].len == a)
                out[k - 1].len += s[j].len;             /* touches the run before */
            else
                out[k++] = (ex_run){ a, s[j].len };
        }
    }
    return k;
}

/* The runs of n spans, in a new array (freed by the caller), their number in *nr. */
static ex_run *runs_of(const ex_span *s, int n, int *nr)
{
    size_t room = 1;
    for (int j = 0; j < n; j++)
        room += s[j].count;
    ex_run *r = malloc(room * sizeof *r);
    *nr = ex_span_runs(s, n, r);
    return r;
}

int ex_reshard_reads(const ex_span *need, int nneed, const ex_span *const *old,
                     const int *nold, int N, ex_read *out)
{
    int nn, n = 0;
    ex_run *want = runs_of(need, nneed, &nn);
    ex_run **have = malloc((size_t)N * sizeof *have);
    int *nh = malloc((size_t)N * sizeof *nh);
    for (int k = 0; k < N; k++)
        have[k] = runs_of(old[k], nold[k], &nh[k]);

    size_t dst = 0;
    for (int i = 0; i < nn; i++) {
        size_t p = want[i].start, end = p + want[i].len;
        while (p < end) {
            /* the lowest old rank with a run that holds p, and where p lies in it */
            int from = -1;
            size_t src = 0, stop = end;
            for (int k = 0; k < N && from < 0; k++) {
                size_t off = 0;
                for (int j = 0; j < nh[k]; j++) {
                    const ex_run *o = &have[k][j];
                    if (o->start <= p && p < o->start + o->len) {
                        from = k;
                        src = off + (p - o->start);
                        if (o->start + o->len < stop)
                            stop = o->start + o->len;
                        break;
                    }
                    off += o->len;
                }
                /* a lower rank's next run takes over where it begins */
                for (int j = 0; from < 0 && j < nh[k]; j++)
                    if (have[k][j].start > p && have[k][j].start < stop)
                        stop = have[k][j].start;
            }
            if (from < 0)
                abort();                                /* no old rank holds p */
            size_t len = stop - p;
            ex_read *last = n > 0 ? &out[n - 1] : NULL;
            if (last && last->rank == from && last->src + last->len == src &&
                last->dst + last->len == dst)
                last->len += len;                       /* contiguous: merged */
            else
                out[n++] = (ex_read){ from, src, dst, len };
            dst += len;
            p = stop;
        }
    }
    for (int k = 0; k < N; k++)
        free(have[k]);
    free(have);
    free(nh);
    free(want);
    return n;
}

size_t ex_reshard_nbytes(const ex_read *r, int n)
{
    size_t floats = 0;
    for (int i = 0; i < n; i++)
        floats += r[i].len;
    return floats * sizeof(float);
}

void ex_reshard_apply(const ex_read *r, int n, const float *const *old, float *buf,
                      size_t nbuf)
{
    memset(buf, 0, nbuf * sizeof *buf);                 /* the padding is 0 */
    for (int i = 0; i < n; i++)
        memcpy(buf + r[i].dst, old[r[i].rank] + r[i].src, r[i].len * sizeof *buf);
}
