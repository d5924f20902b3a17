/* The viewer's model, pass 4 (see model.c for passes 1 to 3, model.h for the words):
 * one call, from its events, into what the viewer steps through:
 *
 *   frames    (phase, step): phases in the order each rank runs them (a topological
 *             order, the earliest begin breaking ties), steps ascending within a phase
 *   messages  receives merged per sender, receiver and chunk, each with the sender's
 *             cells it comes from; a receiver that reduced in the frame adds
 *   cells     the boundaries of what moved (and of the members' blocks), at most
 *             DV_MAX_CELLS of them
 *   masks     what each rank's cells hold before the call, by the call's class
 *
 * model.c hands over every call's events (dvi_build_calls, at the end); one scratch,
 * sized for the largest call, serves them all, so a call of e events builds in
 * O(e log e) time and allocates nothing but what it adds to the model. The trace is
 * never trusted: ranges are clipped to the call's buffer, byte counts are summed in
 * double, and no value is used as a size. */
#include "model.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "schedule.h"

/* ==== 4. one call ==== */

/* A receive or send range: rank a got from (or sent to) peer p in frame f. */
typedef struct {
    int f, a, p, chunk;
    long long lo, hi;
    double nbytes;
    int c0, c1;
    unsigned vias;          /* bit v: a piece came by transport v (dv_msg.vias) */
} rng;

static int by_range(const void *x, const void *y)
{
    const rng *a = x, *b = y;
    DVI_CMP(a->f, b->f);
    DVI_CMP(a->a, b->a);
    DVI_CMP(a->p, b->p);
    DVI_CMP(a->chunk, b->chunk);
    DVI_CMP(a->lo, b->lo);
    return 0;
}

/* Messages: by frame, sender (p), receiver (a), first cell. */
static int by_msg(const void *x, const void *y)
{
    const rng *a = x, *b = y;
    DVI_CMP(a->f, b->f);
    DVI_CMP(a->p, b->p);
    DVI_CMP(a->a, b->a);
    DVI_CMP(a->c0, b->c0);
    return 0;
}

/* Sorts r[0..n) and merges the segments of one chunk: same frame, ranks and chunk, each
 * starting where the one before ends (or inside it). Returns the new n. */
static size_t merge_ranges(rng *r, size_t n)
{
    size_t k = 0;
    qsort(r, n, sizeof *r, by_range);
    for (size_t i = 0; i < n; i++) {
        rng *p = k ? &r[k - 1] : NULL;
        if (p && p->f == r[i].f && p->a == r[i].a && p->p == r[i].p &&
            p->chunk == r[i].chunk && r[i].lo <= p->hi) {
            if (r[i].hi > p->hi)
                p->hi = r[i].hi;
            p->nbytes += r[i].nbytes;
            p->vias |= r[i].vias;
        } else {
            r[k++] = r[i];
        }
    }
    return k;
}

/* A frame being found: (phase order, step) of one event. */
typedef struct { int phase, prank, step, li; double t0; } fkey;

static int by_phase(const void *x, const void *y)
{
    const fkey *a = x, *b = y;
    DVI_CMP(a->phase, b->phase);
    DVI_CMP(a->li, b->li);
    return 0;
}

static int by_frame(const void *x, const void *y)
{
    const fkey *a = x, *b = y;
    DVI_CMP(a->prank, b->prank);
    DVI_CMP(a->step, b->step);
    DVI_CMP(a->li, b->li);
    return 0;
}

/* One phase of a call: its keys are fk[first .. end) once fk is sorted by phase. */
typedef struct { double t0; int phase, first, end, prank; } phase_run;

typedef struct { int from, to; } edge;

static int by_edge(const void *x, const void *y)
{
    const edge *a = x, *b = y;
    DVI_CMP(a->from, b->from);
    DVI_CMP(a->to, b->to);
    return 0;
}

static const phase_run *sort_runs;

/* Phases by when they first begin, then by name index: the tie-break of the order. */
static int by_begin(const void *x, const void *y)
{
    const phase_run *a = &sort_runs[*(const int *)x], *b = &sort_runs[*(const int *)y];
    DVI_CMP(a->t0, b->t0);
    DVI_CMP(a->phase, b->phase);
    return 0;
}

/* A binary min-heap of ints. */
static void heap_push(int *h, size_t *n, int v)
{
    size_t i = (*n)++;
    for (; i > 0 && h[(i - 1) / 2] > v; i = (i - 1) / 2)
        h[i] = h[(i - 1) / 2];
    h[i] = v;
}

static int heap_pop(int *h, size_t *n)
{
    int top = h[0], v = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && h[c + 1] < h[c])
            c++;
        if (h[c] >= v)
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = v;
    return top;
}

/* Scratch for one call, sized for the largest call, and the room that m->frames and
 * m->msgs have: they grow call by call. */
typedef struct {
    fkey *fk;
    phase_run *runs;
    int *evf;               /* local event -> frame in the call */
    rng *recv, *send;
    rng *attn;              /* ring attention: the reduce events (the blocks attended) */
    edge *edges;
    int *adj, *indeg, *heap, *byk, *keypos, *done;
    dv_mask *red;           /* per frame: the ranks that reduced in it */
    long long *bound;
    int *first_send, *first_recv;    /* per rank and cell, the OTHER rule */
    size_t capf, capm;
} scratch;

/* Cell c0 holding element lo (floor) and c1 the first boundary at or after hi (ceil). */
static void cells_of(const dv_call *c, long long lo, long long hi, int *c0, int *c1)
{
    int a = 0, z = c->ncells;        /* largest a with cell_lo[a] <= lo */
    while (z - a > 1) {
        int mid = a + (z - a) / 2;
        if (c->cell_lo[mid] <= lo) a = mid; else z = mid;
    }
    int y = 0, w = c->ncells;        /* smallest y with cell_lo[y] >= hi */
    while (y < w) {
        int mid = y + (w - y) / 2;
        if (c->cell_lo[mid] >= hi) w = mid; else y = mid + 1;
    }
    if (hi <= lo)
        a = y;                       /* an empty range sits on a boundary */
    *c0 = a;
    *c1 = y < a ? a : y;
}

/* Element i of count cut into n near-equal parts (dt_chunk_bounds): part i starts there. */
static long long part_lo(long long count, int n, int i)
{
    if (i >= n)
        return count;
    size_t lo, hi;
    dt_chunk_bounds((size_t)count, n, i, &lo, &hi);
    return (long long)lo;
}

static dv_class class_of(const char *coll)
{
    static const struct { const char *base; dv_class cls; } tab[] = {
        { "allreduce", DV_CLASS_REDUCE }, { "reduce", DV_CLASS_REDUCE },
        { "bcast", DV_CLASS_ROOTED }, { "scatter", DV_CLASS_ROOTED },
        { "gather", DV_CLASS_BLOCKS }, { "allgather", DV_CLASS_BLOCKS },
        { "alltoall", DV_CLASS_BLOCKS },
    };
    size_t len = strcspn(coll, "_");
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++)
        if (strlen(tab[i].base) == len && strncmp(coll, tab[i].base, len) == 0)
            return tab[i].cls;
    return DV_CLASS_OTHER;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* The buffer's cells: every boundary of what moved or was attended (ring attention),
 * in [0, count], and of the N members' blocks. */
static void make_cells(dv_call *c, long long count, int N, scratch *s, size_t nrecv,
                       size_t nsend, size_t nattn)
{
    if (count <= 0) {                /* nothing known of the buffer: one cell */
        c->ncells = 1;
        c->cell_lo[0] = 0;
        c->cell_lo[1] = 1;
        c->count = 1;
        return;
    }
    size_t nb = 0;
    s->bound[nb++] = 0;
    s->bound[nb++] = count;
    for (int pass = 0; pass < 3; pass++) {
        const rng *r = pass == 2 ? s->attn : pass ? s->send : s->recv;
        for (size_t i = 0, n = pass == 2 ? nattn : pass ? nsend : nrecv; i < n; i++) {
            s->bound[nb++] = r[i].lo < count ? r[i].lo : count;
            s->bound[nb++] = r[i].hi < count ? r[i].hi : count;
        }
    }
    if (c->cls == DV_CLASS_BLOCKS)
        for (int v = 1; v < N; v++)
            s->bound[nb++] = part_lo(count, N, v);
    qsort(s->bound, nb, sizeof *s->bound, cmp_ll);
    size_t k = 0;
    for (size_t i = 0; i < nb; i++)
        if (k == 0 || s->bound[i] != s->bound[k - 1])
            s->bound[k++] = s->bound[i];
    if (k - 1 <= DV_MAX_CELLS) {
        c->ncells = (int)(k - 1);
        memcpy(c->cell_lo, s->bound, k * sizeof *s->bound);
    } else {                         /* too many: even cells (count >= k - 1 > 64 here) */
        c->ncells = DV_MAX_CELLS;
        for (int i = 0; i <= DV_MAX_CELLS; i++)
            c->cell_lo[i] = part_lo(count, DV_MAX_CELLS, i);
    }
    c->count = c->cell_lo[c->ncells];
}

/* The masks before the call (model.h: "mask"); blocks are counted among the members. */
static void init_masks(dv_call *c, int nranks, dv_mask part, scratch *s, const rng *recv,
                       size_t nrecv, const rng *send, size_t nsend)
{
    int nc = c->ncells, N = c->size;
    dv_mask *m = c->init;
    memset(m, 0, (size_t)nranks * nc * sizeof *m);
    dv_mask receivers = 0, senders = 0;
    for (size_t i = 0; i < nrecv; i++)
        receivers |= (dv_mask)1 << recv[i].a;
    for (size_t i = 0; i < nsend; i++)
        senders |= (dv_mask)1 << send[i].a;
    c->root = -1;
    if (c->cls == DV_CLASS_ROOTED)
        for (int r = 0; r < nranks && c->root < 0; r++)
            if ((part >> r & 1) && !(receivers >> r & 1))
                c->root = r;
    if (c->cls == DV_CLASS_REDUCE) {
        for (int r = 0; r < nranks; r++)
            for (int k = 0; k < nc && (c->members >> r & 1); k++)
                m[r * nc + k] = (dv_mask)1 << r;
    } else if (c->cls == DV_CLASS_ROOTED && c->root >= 0) {
        for (int k = 0; k < nc; k++)
            m[c->root * nc + k] = (dv_mask)1 << c->root;
    } else if (c->cls == DV_CLASS_BLOCKS) {
        /* a gather's ranges are in virtual order, v = rank - root, root = sends nothing */
        int root = 0, gather = strncmp(c->coll, "gather", 6) == 0;
        for (int r = nranks - 1; r >= 0 && gather; r--)
            if ((part >> r & 1) && !(senders >> r & 1))
                root = dv_call_index(c, r);
        for (int r = 0; r < nranks; r++) {
            int i = dv_call_index(c, r), v = gather ? (i - root + N) % N : i;
            if (i < 0)
                continue;                           /* not a member */
            long long lo = part_lo(c->count, N, v), hi = part_lo(c->count, N, v + 1);
            for (int k = 0; k < nc && hi > lo; k++)
                if (c->cell_lo[k] < hi && c->cell_lo[k + 1] > lo)
                    m[r * nc + k] = (dv_mask)1 << r;
        }
    } else {
        /* a cell holds {r} when rank r sends it before it receives it */
        for (int i = 0; i < nranks * nc; i++)
            s->first_send[i] = s->first_recv[i] = INT_MAX;
        for (int pass = 0; pass < 2; pass++) {
            const rng *r = pass ? send : recv;
            int *first = pass ? s->first_send : s->first_recv;
            for (size_t i = 0, n = pass ? nsend : nrecv; i < n; i++)
                for (int k = r[i].c0; k < r[i].c1; k++)
                    if (r[i].f < first[r[i].a * nc + k])
                        first[r[i].a * nc + k] = r[i].f;
        }
        for (int i = 0; i < nranks * nc; i++)
            if (s->first_send[i] < INT_MAX && s->first_send[i] <= s->first_recv[i])
                m[i] = (dv_mask)1 << (i / nc);
    }
}

/* Ring attention (model.h): c->attn_frame from the blocks each rank attended, and its
 * own block (what it attends first, at step 0) as the masks before the call, in place
 * of init_masks' rule for a rank that recorded that step. -1: out of memory. */
static int attn_frames(dv_call *c, int nranks, const rng *attn, size_t nattn)
{
    int nc = c->ncells;
    c->attn_frame = malloc((size_t)nranks * nc * sizeof *c->attn_frame);
    if (c->attn_frame == NULL)
        return -1;
    for (int i = 0; i < nranks * nc; i++)
        c->attn_frame[i] = -1;
    dv_mask first = 0;                  /* the ranks that attended in frame 0 */
    for (size_t i = 0; i < nattn; i++)
        for (int k = attn[i].c0; k < attn[i].c1; k++) {
            int *f = &c->attn_frame[attn[i].a * nc + k];
            *f = *f < 0 || attn[i].f < *f ? attn[i].f : *f;
            first |= attn[i].f == 0 ? (dv_mask)1 << attn[i].a : 0;
        }
    for (int r = 0; r < nranks; r++)
        for (int k = 0; k < nc && (first >> r & 1); k++)
            c->init[r * nc + k] = c->attn_frame[r * nc + k] == 0 ? (dv_mask)1 << r : 0;
    return 0;
}

/* Numbers the phases of a call (runs[q].prank). Each rank runs its phases one after
 * another, so "A then B on some rank" is an edge A -> B, and the phases are put in a
 * topological order (Kahn's algorithm), taking among those free to go the one that
 * began first: a rank that sits a phase out (recursive doubling's fold) or starts the
 * next one early cannot reorder them. A cycle (a trace at odds with itself) is broken
 * at the phase that began first. s->evf[li] holds each non-mark event's run. */
static void order_phases(const dt_trace *t, const int *ev, size_t nev, scratch *s,
                         size_t nruns)
{
    size_t ne = 0, nh = 0, next = 0;
    int rank = -1, prev = -1;
    for (size_t i = 0; i < nev; i++) {
        const dt_event *e = &t->ev[ev[i]];
        if (e->kind == DT_EV_MARK)
            continue;
        if (e->rank != rank)
            rank = e->rank, prev = -1;
        if (prev >= 0 && prev != s->evf[i])
            s->edges[ne++] = (edge){ prev, s->evf[i] };
        prev = s->evf[i];
    }
    qsort(s->edges, ne, sizeof *s->edges, by_edge);
    size_t k = 0;
    for (size_t i = 0; i < ne; i++)
        if (k == 0 || by_edge(&s->edges[i], &s->edges[k - 1]) != 0)
            s->edges[k++] = s->edges[i];
    ne = k;
    /* adjacency: edges from q are edges[adj[q] .. adj[q+1]) */
    for (size_t q = 0; q <= nruns; q++)
        s->adj[q] = 0, s->indeg[q] = 0;
    for (size_t i = 0; i < ne; i++) {
        s->adj[s->edges[i].from + 1]++;
        s->indeg[s->edges[i].to]++;
    }
    for (size_t q = 0; q < nruns; q++)
        s->adj[q + 1] += s->adj[q];
    sort_runs = s->runs;
    for (size_t q = 0; q < nruns; q++)
        s->byk[q] = (int)q, s->done[q] = 0;
    qsort(s->byk, nruns, sizeof *s->byk, by_begin);
    for (size_t p = 0; p < nruns; p++)
        s->keypos[s->byk[p]] = (int)p;
    for (size_t q = 0; q < nruns; q++)
        if (s->indeg[q] == 0)
            heap_push(s->heap, &nh, s->keypos[q]);
    for (int n = 0; (size_t)n < nruns;) {
        if (nh == 0) {                               /* a cycle: break it */
            while (s->done[s->byk[next]])
                next++;
            heap_push(s->heap, &nh, (int)next);
        }
        int q = s->byk[heap_pop(s->heap, &nh)];
        if (s->done[q])
            continue;
        s->done[q] = 1;
        s->runs[q].prank = n++;
        for (int i = s->adj[q]; i < s->adj[q + 1]; i++) {
            int w = s->edges[i].to;
            if (!s->done[w] && --s->indeg[w] == 0)
                heap_push(s->heap, &nh, s->keypos[w]);
        }
    }
}

/* The cells [*s0, *s1) that rank a sent to rank p in frame f, from send[0..n) sorted by
 * frame, rank and peer (merge_ranges); left alone when it recorded no such send. */
static void sent_cells(const rng *send, size_t n, int f, int a, int p, int *s0, int *s1)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {                    /* the first at or after (f, a, p) */
        size_t mid = lo + (hi - lo) / 2;
        const rng *x = &send[mid];
        if (x->f < f || (x->f == f && (x->a < a || (x->a == a && x->p < p))))
            lo = mid + 1;
        else
            hi = mid;
    }
    for (int found = 0; lo < n && send[lo].f == f && send[lo].a == a && send[lo].p == p;
         lo++, found = 1) {
        *s0 = found && *s0 < send[lo].c0 ? *s0 : send[lo].c0;
        *s1 = found && *s1 > send[lo].c1 ? *s1 : send[lo].c1;
    }
}

/* Pass 4 for call ci, whose events are ev[0..nev) (indices into the trace); ev_phase
 * and names are pass 1's (model_internal.h). */
static int build_call(dv_model *m, scratch *s, int ci, const int *ev, size_t nev,
                      const int *ev_phase, char (*names)[32])
{
    const dt_trace *t = &m->trace;
    int nr = m->nranks;
    dv_call *c = &m->calls[ci];
    const dt_event *e0 = &t->ev[ev[0]];
    memcpy(c->coll, e0->coll, sizeof c->coll);
    c->coll[sizeof c->coll - 1] = '\0';
    c->cls = class_of(c->coll);
    c->from_sender = strncmp(c->coll, "alltoall", 8) == 0;
    c->ring_attn = strncmp(c->coll, "attention_ring", sizeof c->coll) == 0;
    c->t0 = e0->t0;
    c->t1 = e0->t1;

    /* the marks say the buffer; the other events make the frames */
    long long mark_count = -1;
    double esize = 0;
    dv_mask part = 0, members = 0;
    size_t nfk = 0;
    for (size_t i = 0; i < nev; i++) {
        const dt_event *e = &t->ev[ev[i]];
        part |= (dv_mask)1 << e->rank;
        if ((e->kind == DT_EV_SEND || e->kind == DT_EV_RECV) && e->peer >= 0 && e->peer < nr)
            members |= (dv_mask)1 << e->peer;
        c->t0 = e->t0 < c->t0 ? e->t0 : c->t0;
        c->t1 = e->t1 > c->t1 ? e->t1 : c->t1;
        if (e->kind == DT_EV_MARK) {
            if (e->hi > mark_count) {
                mark_count = e->hi;
                esize = e->hi > 0 ? (double)e->nbytes / (double)e->hi : 0;
            }
            continue;
        }
        s->fk[nfk++] = (fkey){ .phase = ev_phase[ev[i]], .step = e->step,
                               .li = (int)i, .t0 = e->t0 };
    }

    c->members = members | part;
    c->size = __builtin_popcountll(c->members);

    /* frames: phases in order (order_phases), steps ascending within a phase */
    qsort(s->fk, nfk, sizeof *s->fk, by_phase);
    size_t nruns = 0;
    for (size_t i = 0; i < nfk; i++) {
        if (i == 0 || s->fk[i].phase != s->fk[i - 1].phase)
            s->runs[nruns++] = (phase_run){ .t0 = s->fk[i].t0, .phase = s->fk[i].phase,
                                            .first = (int)i };
        phase_run *r = &s->runs[nruns - 1];
        r->t0 = s->fk[i].t0 < r->t0 ? s->fk[i].t0 : r->t0;
        r->end = (int)i + 1;
        s->evf[s->fk[i].li] = (int)nruns - 1;       /* for now: the event's phase run */
    }
    order_phases(t, ev, nev, s, nruns);
    for (size_t q = 0; q < nruns; q++)
        for (int i = s->runs[q].first; i < s->runs[q].end; i++)
            s->fk[i].prank = s->runs[q].prank;
    qsort(s->fk, nfk, sizeof *s->fk, by_frame);

    int nf = 0;
    c->first_frame = m->nframes;
    for (size_t i = 0; i < nfk; i++) {
        const dt_event *e = &t->ev[ev[s->fk[i].li]];
        if (i == 0 || s->fk[i].prank != s->fk[i - 1].prank || s->fk[i].step != s->fk[i - 1].step) {
            if (m->nframes == INT_MAX ||
                dvi_grow(&m->frames, &s->capf, (size_t)m->nframes + 1, sizeof *m->frames))
                return -1;
            dv_frame *fr = &m->frames[m->nframes++];
            memset(fr, 0, sizeof *fr);
            fr->call = ci;
            memcpy(fr->phase, names[s->fk[i].phase], sizeof fr->phase);
            fr->step = s->fk[i].step;
            fr->t0 = e->t0;
            fr->t1 = e->t1;
            s->red[nf++] = 0;
        }
        dv_frame *fr = &m->frames[m->nframes - 1];
        fr->t0 = e->t0 < fr->t0 ? e->t0 : fr->t0;
        fr->t1 = e->t1 > fr->t1 ? e->t1 : fr->t1;
        s->evf[s->fk[i].li] = nf - 1;
    }
    c->nframes = nf;

    /* what moved: receives (the messages) and sends, segments merged */
    size_t nrecv = 0, nsend = 0, nattn = 0;
    for (size_t i = 0; i < nev; i++) {
        const dt_event *e = &t->ev[ev[i]];
        int f = s->evf[i], peer = e->peer >= 0 && e->peer < nr ? e->peer : -1;
        rng r = { .f = f, .a = e->rank, .p = peer, .chunk = e->chunk, .lo = e->lo,
                  .hi = e->hi, .nbytes = (double)e->nbytes,
                  .vias = dv_via_bit(e) };
        if (e->kind == DT_EV_RECV && peer >= 0)
            s->recv[nrecv++] = r;
        else if (e->kind == DT_EV_SEND)
            s->send[nsend++] = r;
        else if (e->kind == DT_EV_REDUCE && c->ring_attn)
            s->attn[nattn++] = r;           /* a block attended, not a sum: copies */
        else if (e->kind == DT_EV_REDUCE)
            s->red[f] |= (dv_mask)1 << e->rank;
    }
    nrecv = merge_ranges(s->recv, nrecv);
    nsend = merge_ranges(s->send, nsend);

    long long count = mark_count;
    if (count < 0) {                     /* no mark: the buffer is what moved */
        count = 0;
        for (size_t i = 0; i < nrecv; i++)
            count = s->recv[i].hi > count ? s->recv[i].hi : count;
        for (size_t i = 0; i < nsend; i++)
            count = s->send[i].hi > count ? s->send[i].hi : count;
        for (size_t i = 0; i < nattn; i++)
            count = s->attn[i].hi > count ? s->attn[i].hi : count;
    }
    c->esize = esize;
    make_cells(c, count, c->size, s, nrecv, nsend, nattn);
    for (int pass = 0; pass < 3; pass++) {
        rng *r = pass == 2 ? s->attn : pass ? s->send : s->recv;
        for (size_t i = 0, n = pass == 2 ? nattn : pass ? nsend : nrecv; i < n; i++) {
            if (count <= 0) {            /* one cell for a buffer of unknown size */
                r[i].c0 = 0;
                r[i].c1 = 1;
                continue;
            }
            long long lo = r[i].lo < count ? r[i].lo : count;
            long long hi = r[i].hi < count ? r[i].hi : count;
            cells_of(c, lo, hi, &r[i].c0, &r[i].c1);
        }
    }

    /* the sends are sorted by frame, then rank: one entry per (frame, rank) that sent */
    size_t nsent = 0;
    for (size_t i = 0; i < nsend; i++)
        nsent += i == 0 || s->send[i].f != s->send[i - 1].f || s->send[i].a != s->send[i - 1].a;
    size_t nmask = (size_t)nr * c->ncells;
    c->init = malloc(nmask * sizeof *c->init);
    c->sent = malloc((nsent ? nsent : 1) * sizeof *c->sent);
    if (c->init == NULL || c->sent == NULL)
        return -1;
    init_masks(c, nr, part, s, s->recv, nrecv, s->send, nsend);
    if (c->ring_attn && attn_frames(c, nr, s->attn, nattn))
        return -1;
    for (size_t i = 0; i < nsend; i++) {
        const rng *r = &s->send[i];
        if (i > 0 && r->f == s->send[i - 1].f && r->a == s->send[i - 1].a) {
            c->sent[c->nsent - 1].nbytes += r->nbytes;
        } else {
            c->sent[c->nsent++] = (dv_sent){ r->f, r->a, r->nbytes };
        }
    }

    /* messages: one per (sender, receiver) and run of cells in each frame */
    qsort(s->recv, nrecv, sizeof *s->recv, by_msg);
    size_t k = 0;
    for (size_t i = 0; i < nrecv; i++) {
        rng *p = k ? &s->recv[k - 1] : NULL, *r = &s->recv[i];
        if (p && p->f == r->f && p->p == r->p && p->a == r->a && r->c0 <= p->c1) {
            p->c1 = r->c1 > p->c1 ? r->c1 : p->c1;
            p->nbytes += r->nbytes;
            p->vias |= r->vias;
        } else {
            s->recv[k++] = *r;
        }
    }
    if (dvi_grow(&m->msgs, &s->capm, (size_t)m->nmsgs + k, sizeof *m->msgs))
        return -1;
    size_t next = 0;
    for (int f = 0; f < nf; f++) {
        dv_frame *fr = &m->frames[c->first_frame + f];
        fr->first_msg = m->nmsgs;
        for (; next < k && s->recv[next].f == f; next++) {
            const rng *r = &s->recv[next];
            dv_msg *g = &m->msgs[m->nmsgs++];
            *g = (dv_msg){ .src = r->p, .dst = r->a, .c0 = r->c0, .c1 = r->c1, .s0 = r->c0,
                           .s1 = r->c1, .add = (int)(s->red[f] >> r->a & 1),
                           .nbytes = r->nbytes, .vias = r->vias };
            sent_cells(s->send, nsend, f, r->p, r->a, &g->s0, &g->s1);
            fr->nmsg++;
        }
    }
    return 0;
}

/* ==== every call ==== */

int dvi_build_calls(dv_model *m, int ncalls, const int *cstart, const int *cev, size_t most,
                    const int *ev_phase, char (*names)[32])
{
    scratch s = { 0 };
    int rc = -1;
    s.fk = malloc(most * sizeof *s.fk);
    s.runs = malloc(most * sizeof *s.runs);
    s.evf = malloc(most * sizeof *s.evf);
    s.recv = malloc(most * sizeof *s.recv);
    s.send = malloc(most * sizeof *s.send);
    s.attn = malloc(most * sizeof *s.attn);
    s.red = malloc(most * sizeof *s.red);
    s.edges = malloc(most * sizeof *s.edges);
    s.adj = malloc((most + 1) * sizeof *s.adj);
    s.indeg = malloc((most + 1) * sizeof *s.indeg);
    s.heap = malloc(most * sizeof *s.heap);
    s.byk = malloc(most * sizeof *s.byk);
    s.keypos = malloc(most * sizeof *s.keypos);
    s.done = malloc(most * sizeof *s.done);
    s.bound = malloc((2 * most + DV_MAX_RANKS + 2) * sizeof *s.bound);
    s.first_send = malloc((size_t)DV_MAX_RANKS * DV_MAX_CELLS * sizeof *s.first_send);
    s.first_recv = malloc((size_t)DV_MAX_RANKS * DV_MAX_CELLS * sizeof *s.first_recv);
    if (!s.fk || !s.runs || !s.evf || !s.recv || !s.send || !s.attn || !s.red || !s.bound ||
        !s.first_send || !s.first_recv || !s.edges || !s.adj || !s.indeg || !s.heap ||
        !s.byk || !s.keypos || !s.done)
        goto out;
    m->ncalls = ncalls;
    for (int c = 0; c < ncalls; c++) {
        if (build_call(m, &s, c, cev + cstart[c], (size_t)(cstart[c + 1] - cstart[c]),
                       ev_phase, names))
            goto out;
        m->calls[c].first_pos = m->npos;
        m->npos += m->calls[c].nframes + 1;
    }
    rc = 0;
out:
    free(s.fk);
    free(s.runs);
    free(s.evf);
    free(s.recv);
    free(s.send);
    free(s.attn);
    free(s.red);
    free(s.edges);
    free(s.adj);
    free(s.indeg);
    free(s.heap);
    free(s.byk);
    free(s.keypos);
    free(s.done);
    free(s.bound);
    free(s.first_send);
    free(s.first_recv);
    return rc;
}
