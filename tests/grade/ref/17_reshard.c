/* Exercise 17, dtlab's own answer: the walk of lib/parallel/checkpoint_reshard.c, whose
 * functions are private to it (static), in the exercise's types. Each old map's spans
 * are pieces, never expanded run by run; the new rank's runs are cut into segments at
 * every place where a piece begins or ends (piece_at), so that the same pieces hold all
 * of a segment, and each segment comes from the lowest old rank that holds it (where
 * dtlab prefers a shard it reads anyway; the exercise asks for the lowest). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "exercises.h"

int ex_span_runs(const ex_span *s, int n, ex_run *out)
{
    int k = 0;
    for (int j = 0; j < n; j++)
        for (size_t b = 0; b < s[j].count && s[j].len > 0; b++) {
            size_t a = s[j].start + b * s[j].stride;
            if (k > 0 && out[k - 1].start + out[k - 1].len == a)
                out[k - 1].len += s[j].len;
            else
                out[k++] = (ex_run){ a, s[j].len };
        }
    return k;
}

/* checkpoint_reshard.c's piece_at: 1 when a run of span s holds at, with in *stop the
 * end of that run and in *el at's element (off: the span's first element); else 0,
 * with in *stop the start of its next run after at (SIZE_MAX: none). */
static int piece_at(const ex_span *s, size_t off, size_t at, size_t *stop, size_t *el)
{
    if (s->len == 0 || s->count == 0) {
        *stop = SIZE_MAX;
        return 0;
    }
    if (at < s->start) {
        *stop = s->start;
        return 0;
    }
    size_t b = s->count == 1 ? 0 : (at - s->start) / s->stride;
    size_t a = s->start + b * s->stride;
    if (b < s->count && at < a + s->len) {
        *stop = a + s->len;
        *el = off + b * s->len + (at - a);
        return 1;
    }
    *stop = b + 1 < s->count ? a + s->stride : SIZE_MAX;
    return 0;
}

int ex_reshard_reads(const ex_span *need, int nneed, const ex_span *const *old,
                     const int *nold, int N, ex_read *out)
{
    int n = 0;
    size_t dst = 0;
    for (int j = 0; j < nneed; j++)
        for (size_t b = 0; b < need[j].count && need[j].len > 0; b++) {
            size_t a = need[j].start + b * need[j].stride, end = a + need[j].len;
            for (size_t at = a; at < end;) {
                size_t stop = end, s, el = 0, src = 0;
                int from = -1;
                for (int k = 0; k < N; k++) {
                    size_t off = 0;
                    for (int i = 0; i < nold[k]; i++) {
                        const ex_span *p = &old[k][i];
                        if (piece_at(p, off, at, &s, &el) && from < 0) {
                            from = k;
                            src = el;
                        }
                        if (from < 0 || from == k)
                            stop = s < stop ? s : stop;
                        off += p->count * p->len;
                    }
                }
                ex_read *last = n > 0 ? &out[n - 1] : NULL;
                if (last && last->rank == from && last->src + last->len == src &&
                    last->dst + last->len == dst)
                    last->len += stop - at;
                else
                    out[n++] = (ex_read){ from, src, dst, stop - at };
                dst += stop - at;
                at = stop;
            }
        }
    return n;
}

size_t ex_reshard_nbytes(const ex_read *r, int n)
{
    size_t nbytes = 0;
    for (int i = 0; i < n; i++)
        nbytes += r[i].len * sizeof(float);
    return nbytes;
}

void ex_reshard_apply(const ex_read *r, int n, const float *const *old, float *buf,
                      size_t nbuf)
{
    memset(buf, 0, nbuf * sizeof *buf);
    for (int i = 0; i < n; i++)
        memcpy(buf + r[i].dst, old[r[i].rank] + r[i].src, r[i].len * sizeof *buf);
}
