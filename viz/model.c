/* The viewer's model: a trace cut into calls, frames, messages and cells (see model.h).
 *
 * The build runs in four passes, each a sort or a linear walk, so a trace of E events
 * builds in O(E log E) time and O(E) memory whatever its values:
 *
 *   1. names     every coll and phase is interned to a small integer
 *   2. segments  each rank's events are cut into its calls: a "call" mark opens one;
 *                without marks a change of coll, or a (phase, step) that goes back,
 *                does. Compute events and other marks belong to no call, and neither
 *                do the transfers of colls without marks in a trace that has some.
 *   3. calls     rank r's j-th segment of a coll meets the other ranks' j-th ones that
 *                it exchanges messages with (a union-find over the peers: one call per
 *                communicator); calls are sorted by their earliest event
 *   4. one call  its members (the ranks with events in it and their peers), frames
 *                (phase, step), messages (receives merged per sender, receiver and
 *                chunk, each with the sender's cells it comes from), cells (the
 *                boundaries of what moved) and the masks before: model_call.c
 *
 * Passes 1 to 3 are here, then dv_model_build, which runs them, sorts the events by
 * call and hands them to pass 4; model_internal.h is what the two files share.
 *
 * The trace is never trusted: ranks and peers are checked, ranges are clipped to the
 * call's buffer, byte counts are summed in double, and no value is used as a size. */
#include "model.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"

#define MAX_OPEN 8          /* marked calls a rank may have open at once (threads) */
#define MAX_SEEN 16         /* phases a segment remembers, to see a phase come back */

/* ==== transports in words ==== */

void dv_vias_text(unsigned vias, char *buf, size_t len)
{
    size_t n = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int v = 1; v < DT_TRACE_NVIA && n < len; v++)
        if (vias >> v & 1)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "+" : "",
                                  dt_trace_via_name(v));
}

/* ==== 1. names ==== */

typedef struct {
    char (*s)[32];          /* name i, NUL-terminated */
    size_t n, cap;
    int *slot;              /* open addressing: name index + 1, 0 empty */
    size_t nslot;           /* a power of two, at least twice n */
} names;

static unsigned long hash32(const char *s, size_t len)
{
    unsigned long h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

/* The index of name s (char[32], maybe without its NUL), adding it. -1: out of memory. */
static int intern(names *t, const char *s)
{
    size_t len = strnlen(s, 31);
    if (2 * (t->n + 1) > t->nslot) {
        size_t ns = t->nslot ? 2 * t->nslot : 64;
        int *slot = calloc(ns, sizeof *slot);
        if (slot == NULL)
            return -1;
        for (size_t i = 0; i < t->n; i++) {
            size_t h = hash32(t->s[i], strlen(t->s[i])) & (ns - 1);
            while (slot[h])
                h = (h + 1) & (ns - 1);
            slot[h] = (int)i + 1;
        }
        free(t->slot);
        t->slot = slot;
        t->nslot = ns;
    }
    size_t h = hash32(s, len) & (t->nslot - 1);
    for (; t->slot[h]; h = (h + 1) & (t->nslot - 1)) {
        const char *o = t->s[t->slot[h] - 1];
        if (strlen(o) == len && memcmp(o, s, len) == 0)
            return t->slot[h] - 1;
    }
    if (dvi_grow(&t->s, &t->cap, t->n + 1, sizeof *t->s))
        return -1;
    memcpy(t->s[t->n], s, len);
    t->s[t->n][len] = '\0';
    t->slot[h] = (int)t->n + 1;
    return (int)t->n++;
}

/* ==== 2. segments: one rank's share of one call ==== */

typedef struct {
    int rank, coll, j, call;
    double t0;              /* its earliest event */
    dv_mask peers;          /* the ranks its sends and receives name */
} seg;

typedef struct {
    int seg, coll;
    int phase, step;        /* of its last event; phase -1 before the first */
    int nseen, seen[MAX_SEEN];
} open_seg;

/* 1 when (phase, step) comes before where segment o stands: a phase it has left, or a
 * lower step in its current phase. A new call of the same coll begins there. */
static int goes_back(const open_seg *o, int phase, int step)
{
    if (phase == o->phase)
        return step < o->step;
    for (int i = 0; i < o->nseen; i++)
        if (o->seen[i] == phase)
            return 1;
    return 0;
}

static void advance(open_seg *o, int phase, int step)
{
    if (phase != o->phase && o->nseen < MAX_SEEN)
        o->seen[o->nseen++] = phase;
    o->phase = phase;
    o->step = step;
}

typedef struct {
    const dt_trace *t;
    names nm;               /* the colls with call marks first: names 0 .. ncallcolls-1 */
    int ncallcolls;
    int by_marks;           /* only the colls with call marks make calls */
    int *ev_seg;            /* per event: its segment, -1 none */
    int *ev_phase;          /* per event in a call: its phase name */
    seg *segs;
    size_t nsegs, capsegs;
} builder;

static int new_seg(builder *b, open_seg *o, int rank, int coll, double t0)
{
    if (b->nsegs >= INT_MAX || dvi_grow(&b->segs, &b->capsegs, b->nsegs + 1, sizeof *b->segs))
        return -1;
    b->segs[b->nsegs] = (seg){ .rank = rank, .coll = coll, .t0 = t0 };
    *o = (open_seg){ .seg = (int)b->nsegs, .coll = coll, .phase = -1 };
    b->nsegs++;
    return 0;
}

/* Pass 2: walks each rank's events in time order and gives each its segment. A trace
 * that marks its calls (or is a training run's) cuts only the marked colls: the rest is
 * a program's own point-to-point traffic (pp's activations, dp's weights). */
static int cut_segments(builder *b)
{
    const dt_trace *t = b->t;
    open_seg marked[MAX_OPEN], cur = { .seg = -1 };
    int nmarked = 0, rank = -1, train = t->train[0] != '\0';
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        if (e->kind == DT_EV_MARK && strncmp(e->phase, "call", 32) == 0) {
            if (intern(&b->nm, e->coll) < 0)
                return -1;
        } else if (e->kind == DT_EV_COMPUTE && strncmp(e->coll, "train", 32) == 0) {
            train = 1;
        }
    }
    b->ncallcolls = (int)b->nm.n;
    b->by_marks = b->ncallcolls > 0 || train;
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        b->ev_seg[i] = -1;
        if (e->rank != rank) {
            rank = e->rank;
            nmarked = 0;
            cur.seg = -1;
        }
        if (!dt_event_in_call(e))
            continue;
        int coll = intern(&b->nm, e->coll), phase = intern(&b->nm, e->phase);
        if (coll < 0 || phase < 0)
            return -1;
        if (b->by_marks && coll >= b->ncallcolls)
            continue;                                   /* not a collective's */
        b->ev_phase[i] = phase;
        open_seg *o = NULL;
        if (e->kind == DT_EV_MARK) {
            /* a new call of coll: it replaces an open one of the same coll */
            int k = 0;
            while (k < nmarked && marked[k].coll != coll)
                k++;
            if (k == nmarked && nmarked == MAX_OPEN)
                k = 0;                                  /* forget the oldest */
            if (k < nmarked) {
                memmove(&marked[k], &marked[k + 1], (size_t)(nmarked - k - 1) * sizeof *marked);
                nmarked--;
            }
            cur.seg = -1;
            o = &marked[nmarked++];
            if (new_seg(b, o, rank, coll, e->t0))
                return -1;
        } else {
            if (cur.seg >= 0 && cur.coll != coll)
                cur.seg = -1;                           /* the coll changed */
            if (cur.seg >= 0 && !goes_back(&cur, phase, e->step)) {
                o = &cur;
            } else if (cur.seg < 0) {
                for (int k = 0; k < nmarked && o == NULL; k++)
                    if (marked[k].coll == coll && !goes_back(&marked[k], phase, e->step))
                        o = &marked[k];
            }
            if (o == NULL) {
                o = &cur;
                if (new_seg(b, o, rank, coll, e->t0))
                    return -1;
            }
            advance(o, phase, e->step);
        }
        b->ev_seg[i] = o->seg;
        seg *s = &b->segs[o->seg];
        if (e->t0 < s->t0)
            s->t0 = e->t0;
        if ((e->kind == DT_EV_SEND || e->kind == DT_EV_RECV) && e->peer >= 0 &&
            e->peer < t->nranks && e->peer != rank)
            s->peers |= (dv_mask)1 << e->peer;
    }
    return 0;
}

/* ==== 3. calls: the j-th segments of a coll that talk to each other ==== */

static const seg *sort_segs;     /* qsort has no context argument */

static int by_coll_index(const void *a, const void *b)
{
    const seg *x = &sort_segs[*(const int *)a], *y = &sort_segs[*(const int *)b];
    DVI_CMP(x->coll, y->coll);
    DVI_CMP(*(const int *)a, *(const int *)b);
    return 0;
}

static int by_coll_j(const void *a, const void *b)
{
    const seg *x = &sort_segs[*(const int *)a], *y = &sort_segs[*(const int *)b];
    DVI_CMP(x->coll, y->coll);
    DVI_CMP(x->j, y->j);
    DVI_CMP(*(const int *)a, *(const int *)b);
    return 0;
}

typedef struct { double t0; int coll, j, id; } call_key;

static int by_time(const void *a, const void *b)
{
    const call_key *x = a, *y = b;
    DVI_CMP(x->t0, y->t0);
    DVI_CMP(x->coll, y->coll);
    DVI_CMP(x->j, y->j);
    DVI_CMP(x->id, y->id);
    return 0;
}

/* The set of rank r in a union-find over ranks (up[r] == r: r leads it). */
static int find(int *up, int r)
{
    while (up[r] != r)
        r = up[r] = up[up[r]];
    return r;
}

/* Pass 3: numbers each coll's segments per rank (j), groups them by (coll, j), splits
 * each group into the sets of ranks that exchange messages (one call per communicator:
 * the j-th allreduce of rank 0 on {0, 1} is not the one of rank 2 on {2, 3}), and orders
 * the calls by time. Returns the number of calls, or -1. */
static int group_calls(builder *b)
{
    int n = (int)b->nsegs, ncalls = 0, rc = -1;
    int *idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    call_key *keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    int *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (idx == NULL || keys == NULL || order == NULL)
        goto out;
    sort_segs = b->segs;
    for (int i = 0; i < n; i++)
        idx[i] = i;
    /* segments were made rank by rank, so within a coll the index order is rank order */
    qsort(idx, (size_t)n, sizeof *idx, by_coll_index);
    for (int i = 0, j = 0; i < n; i++) {
        seg *s = &b->segs[idx[i]], *p = i ? &b->segs[idx[i - 1]] : NULL;
        j = (p && p->coll == s->coll && p->rank == s->rank) ? j + 1 : 0;
        s->j = j;
    }
    qsort(idx, (size_t)n, sizeof *idx, by_coll_j);
    for (int i = 0, end; i < n; i = end) {
        const seg *g = &b->segs[idx[i]];
        int up[DV_MAX_RANKS], segof[DV_MAX_RANKS], callof[DV_MAX_RANKS];
        for (end = i; end < n && b->segs[idx[end]].coll == g->coll &&
                      b->segs[idx[end]].j == g->j; end++)
            ;
        for (int r = 0; r < DV_MAX_RANKS; r++)
            up[r] = r, segof[r] = -1, callof[r] = -1;
        for (int q = i; q < end; q++)
            segof[b->segs[idx[q]].rank] = idx[q];
        for (int q = i; q < end; q++) {            /* a message joins its two ranks */
            const seg *s = &b->segs[idx[q]];
            for (int p = 0; p < DV_MAX_RANKS; p++)
                if ((s->peers >> p & 1) && segof[p] >= 0)
                    up[find(up, s->rank)] = find(up, p);
        }
        for (int q = i; q < end; q++) {            /* a call per set, in rank order */
            seg *s = &b->segs[idx[q]];
            int r = find(up, s->rank);
            if (callof[r] < 0) {
                callof[r] = ncalls;
                keys[ncalls] = (call_key){ .t0 = s->t0, .coll = s->coll, .j = s->j,
                                           .id = ncalls };
                ncalls++;
            }
            call_key *k = &keys[callof[r]];
            if (s->t0 < k->t0)
                k->t0 = s->t0;
            s->call = callof[r];
        }
    }
    qsort(keys, (size_t)ncalls, sizeof *keys, by_time);
    for (int c = 0; c < ncalls; c++)
        order[keys[c].id] = c;
    for (int i = 0; i < n; i++)
        b->segs[i].call = order[b->segs[i].call];
    rc = ncalls;
out:
    free(idx);
    free(keys);
    free(order);
    return rc;
}


/* ==== building and freeing ==== */

__attribute__((format(printf, 4, 5)))
static int fail(dv_model *m, char *err, size_t errlen, const char *fmt, ...)
{
    dv_model_free(m);
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A training run's settings, "mode pp schedule 1f1b stages 4" (the "# train" line), as
 * the title "train: mode pp, schedule 1f1b, stages 4": the words in pairs. */
static void train_title(char *buf, size_t len, const char *s)
{
    size_t n = (size_t)snprintf(buf, len, "train:");
    for (int word = 0; n < len; word++) {
        s += strspn(s, " \t");
        int w = (int)strcspn(s, " \t");
        if (w == 0)
            break;
        n += (size_t)snprintf(buf + n, len - n, "%s%.*s", word % 2 || word == 0 ? " " : ", ",
                              w, s);
        s += w;
    }
}

int dv_model_build(dv_model *m, dt_trace *t, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->trace = *t;                       /* taken over: freed with m */
    memset(t, 0, sizeof *t);
    const dt_trace *tr = &m->trace;
    if (tr->nranks > DV_MAX_RANKS)
        return fail(m, err, errlen, "the trace has %d ranks; dtviz shows at most %d",
                    tr->nranks, DV_MAX_RANKS);
    if (tr->nranks < 1 || (tr->n > 0 && tr->ev == NULL))
        return fail(m, err, errlen, "the trace has %d ranks; it needs at least one",
                    tr->nranks);
    if (tr->n >= INT_MAX)
        return fail(m, err, errlen, "the trace has %zu events; dtviz shows at most %d",
                    tr->n, INT_MAX - 1);
    for (size_t i = 0; i < tr->n; i++)
        if (tr->ev[i].rank < 0 || tr->ev[i].rank >= tr->nranks)
            return fail(m, err, errlen, "event %zu is of rank %d, but the trace has %d ranks",
                        i, tr->ev[i].rank, tr->nranks);
    m->nranks = tr->nranks;
    m->from_trace = 1;
    if (tr->train[0] != '\0')
        train_title(m->title, sizeof m->title, tr->train);
    else
        snprintf(m->title, sizeof m->title, "%s",
                 tr->program[0] && strcmp(tr->program, "-") != 0 ? tr->program : "trace");

    /* the span of every event, never empty */
    m->t_begin = 0;
    m->t_end = 1;
    for (size_t i = 0; i < tr->n; i++) {
        const dt_event *e = &tr->ev[i];
        m->t_begin = i == 0 || e->t0 < m->t_begin ? e->t0 : m->t_begin;
        m->t_end = i == 0 || e->t1 > m->t_end ? e->t1 : m->t_end;
    }
    if (!(m->t_end > m->t_begin)) {
        double end = m->t_begin + 1;
        if (!(end > m->t_begin) || !isfinite(end))
            end = nextafter(m->t_begin, INFINITY);
        if (!isfinite(end))
            m->t_begin = nextafter(m->t_begin, -INFINITY), end = DBL_MAX;
        m->t_end = end;
    }

    builder b = { .t = tr };
    int *cstart = NULL, *cev = NULL, rc = -1;
    size_t n = tr->n ? tr->n : 1;
    b.ev_seg = malloc(n * sizeof *b.ev_seg);
    b.ev_phase = malloc(n * sizeof *b.ev_phase);
    if (b.ev_seg == NULL || b.ev_phase == NULL || cut_segments(&b))
        goto out;
    int ncalls = group_calls(&b);
    if (ncalls < 0)
        goto out;

    /* each call's events, in trace order (counting sort) */
    cstart = calloc((size_t)ncalls + 1, sizeof *cstart);
    cev = malloc(n * sizeof *cev);
    m->calls = calloc(ncalls ? (size_t)ncalls : 1, sizeof *m->calls);
    if (cstart == NULL || cev == NULL || m->calls == NULL)
        goto out;
    for (size_t i = 0; i < tr->n; i++)
        if (b.ev_seg[i] >= 0)
            cstart[b.segs[b.ev_seg[i]].call + 1]++;
    size_t most = 1;
    for (int c = 0; c < ncalls; c++) {
        most = (size_t)cstart[c + 1] > most ? (size_t)cstart[c + 1] : most;
        cstart[c + 1] += cstart[c];
    }
    for (size_t i = 0; i < tr->n; i++)
        if (b.ev_seg[i] >= 0)
            cev[cstart[b.segs[b.ev_seg[i]].call]++] = (int)i;
    for (int c = ncalls; c > 0; c--)            /* cstart[c] ran on to the end of call c */
        cstart[c] = cstart[c - 1];
    cstart[0] = 0;

    if (dvi_build_calls(m, ncalls, cstart, cev, most, b.ev_phase, b.nm.s))
        goto out;
    if (m->npos < 1)
        m->npos = 1;
    rc = 0;
out:
    free(b.nm.s);
    free(b.nm.slot);
    free(b.ev_seg);
    free(b.ev_phase);
    free(b.segs);
    free(cstart);
    free(cev);
    if (rc != 0)
        return fail(m, err, errlen, "out of memory building the model of %zu events",
                    tr->n);
    return 0;
}

void dv_model_free(dv_model *m)
{
    if (m == NULL)
        return;
    for (int c = 0; m->calls != NULL && c < m->ncalls; c++) {
        free(m->calls[c].init);
        free(m->calls[c].sent);
        free(m->calls[c].attn_frame);
    }
    free(m->calls);
    free(m->frames);
    free(m->msgs);
    dt_trace_free(&m->trace);
    memset(m, 0, sizeof *m);
}
