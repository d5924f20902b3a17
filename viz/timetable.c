/* Training timetables (timetable.h): a training trace laid out as the papers draw it,
 * one row per rank, with the measures of each step.
 *
 * The build walks the events a few times and sorts, so a trace of E events builds in
 * O(E log E) time and O(E) memory whatever its values:
 *   1. mode      the "# train" header where the events agree, else what they look like
 *   2. pieces    rank by rank (thread by thread of a rank, where the trace records
 *                threads: the events are first put in (rank, thread, t0) order): compute events (one block each, but a pp stage's layers
 *                of one operation in a row make one), pp's and dp's messages
 *                (an exchange's send and receive are one block, so are the pieces of one
 *                message), collective calls cut into each rank's share as dv_model
 *                cuts them, and the marks that name communication. A span mark swallows
 *                the calls it holds (the innermost mark holding a call wins); an instant
 *                one ("ddp bucket" in older traces) names the call that follows it.
 *   3. steps     a piece without a step of its own takes the step of the last event on
 *                its rank, at or before its begin, that records one
 *   4. matching  the k-th send a->b of a coll meets the k-th receive on b from a (MPI
 *                keeps order per pair, so the events' order is the messages' order):
 *                the waits, and pp's arrows
 *   5. order     the blocks by rank, lane and begin, and their dv_model calls; then
 *                train_algos.c measures the steps and indexes the blocks for the queries
 * The trace is never trusted: micro-batches outside int are dropped, peers out of range
 * left unmatched, waits kept inside their blocks, and every sum and share made finite. */
#include "timetable.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_internal.h"
#include "schedule.h"

#define MAX_OPEN 8          /* calls of different colls a rank may have open at once */
#define MAX_SEEN 8          /* phases an open call remembers, to see a phase come back */
#define CALL_LOOK 8         /* calls of a coll searched back for one holding a block */

typedef struct {
    dv_tt_block b;
    int known;              /* b.step came from the trace */
    int ev;                 /* an event of the communication it holds, -1: for b.call */
    double s0, s1;          /* the span of that communication on this rank */
} piece;

typedef struct { double t0, t1, sent; int first, mark, attach, piece; unsigned vias; } seg;
typedef struct { const char *coll; int a, b, ev; } end;        /* a message's end */
typedef struct { int piece, row, rank; double t0, t1; } wstretch;

typedef struct {
    const dt_trace *t;
    const dv_model *m;
    dv_tt *tt;
    piece *p;   size_t np, capp;
    seg *sg;    size_t nsg, capsg;
    dvi_key *st; size_t nst, capst; /* (rank, t): a step begun, idx = the step */
    int *ev_piece, *ev_seg, *mk, *mkpiece;
    char *ev_op, *mkused;
    double *tree;
    int pp_like, micro_labels;
    int gpt_units;          /* a GPT's trace ("model gpt", "layers" its units), else 0 */
} bld;

/* ==== small tools ==== */

/* A new zeroed element at the end of the array *arr of *n (dvi_grow's growth), or NULL
 * out of memory. */
static void *push(void *arr, size_t *n, size_t *cap, size_t sz)
{
    if (dvi_grow(arr, cap, *n + 1, sz) != 0)
        return NULL;
    void *e = *(char **)arr + (*n)++ * sz;
    memset(e, 0, sz);
    return e;
}

static int begins(const char *name, const char *lit) { return strncmp(name, lit, strlen(lit)) == 0; }

static int raw_coll(const char *coll) { return dvi_is(coll, "pipeline") || dvi_is(coll, "dp") || dvi_is(coll, "-"); }

/* ==== 2. pieces ==== */

static piece *new_piece(bld *b, const dt_event *e, int lane, double t0, double t1)
{
    piece *p = push(&b->p, &b->np, &b->capp, sizeof *b->p);
    if (p == NULL)
        return NULL;
    p->b = (dv_tt_block){ .rank = e->rank, .thread = e->thread, .lane = lane, .kind = lane ? DV_TT_COMM : DV_TT_OTHER,
                          .t0 = t0, .t1 = t1, .step = e->step, .micro = dvi_micro(e),
                          .layer = e->chunk >= 0 ? e->chunk : -1, .chunk = -1, .call = -1 };
    p->known = e->step >= 0;
    p->ev = -1;
    return p;
}

/* Layer (a GPT's unit) l as a label names it: "L2", or the GPT's "emb", "b1", "head" */
static void layer_name(const bld *b, int l, char *out, size_t len)
{
    if (b->gpt_units <= 0)
        snprintf(out, len, "L%d", l);
    else if (l == 0)
        snprintf(out, len, "emb");
    else if (l == b->gpt_units - 1)
        snprintf(out, len, "head");
    else
        snprintf(out, len, "b%d", l - 1);
}

/* The GPT's units from the "# train" settings ("model gpt ... layers U"); without
 * them (a trace without its header), from the events: a GPT's compute names the parts
 * of its blocks ("forward-attn"), and its units are the highest one computed + 1; 0 for
 * the MLP's */
static int gpt_units_of(const char *settings, const dt_trace *t)
{
    const char *g = strstr(settings, "model gpt"), *l = strstr(settings, "layers ");
    if (g && l)
        return atoi(l + 7);
    int parts = 0, top = -1;
    for (size_t i = 0; i < t->n; i++) {
        const char *part;
        const dt_event *e = &t->ev[i];
        if (e->kind != DT_EV_COMPUTE || !dvi_is(e->coll, "train") || !dt_train_dir(e->phase, &part))
            continue;
        parts |= *part != '\0';
        top = e->chunk > top ? e->chunk : top;
    }
    return parts ? top + 1 : 0;
}

static void compute_label(const bld *b, const dt_event *e, dv_tt_block *k)
{
    char mi[16] = "", ly[24] = "";
    if (k->micro >= 0 && (b->pp_like || b->micro_labels))
        snprintf(mi, sizeof mi, "%d", k->micro);
    const char *part;
    char dir = dt_train_dir(e->phase, &part);
    if (k->layer >= 0 && !b->pp_like) {      /* " b1", and the GPT's part: " b1 attn" */
        ly[0] = ' ';
        layer_name(b, k->layer, ly + 1, sizeof ly - 1);
        if (*part)
            snprintf(ly + strlen(ly), sizeof ly - strlen(ly), " %s", part);
    }
    if (dir) {
        k->kind = dir == 'F' ? DV_TT_FORWARD : DV_TT_BACKWARD;
        snprintf(k->label, sizeof k->label, "%c%.7s%.15s", dir, mi, ly);
    } else if (dvi_is(e->phase, "optimizer")) {
        k->kind = DV_TT_OPTIMIZER;
        snprintf(k->label, sizeof k->label, "opt");
    } else if (k->layer >= 0) {             /* lesson 27's "attn 2": ring step 2 */
        snprintf(k->label, sizeof k->label, "%.12s %d", e->phase, k->layer);
    } else {
        snprintf(k->label, sizeof k->label, "%.23s", e->phase);
    }
}

/* The pipeline operation a rank is in (its mark comes before the compute it holds: a
 * mark begins where its operation does). */
typedef struct { char kind; double t0, t1; int step, micro, chunk; } pipe_op;

/* pp's compute event e inside operation op: a W's compute ("backward" to the model,
 * which does not know the schedule) is a W block; with several chunks a stage, the
 * chunk's letter follows the label ("F3b": micro-batch 3, the stage's chunk 1). */
static void op_label(const bld *b, const dt_event *e, const pipe_op *op, dv_tt_block *k)
{
    int P = b->tt->stages > 0 ? b->tt->stages : 1, mi = dvi_micro(e);
    if (!b->pp_like || op->kind == 0 || e->t0 < op->t0 || e->t0 > op->t1 ||
        e->step != op->step || (mi >= 0 && mi != op->micro) || k->micro < 0)
        return;
    if (op->kind == 'W' && (k->kind == DV_TT_BACKWARD || k->kind == DV_TT_OTHER)) {
        k->kind = DV_TT_WEIGHTS;
        snprintf(k->label, sizeof k->label, "W%d", k->micro);
    }
    if (b->tt->v > 1 && op->chunk >= 0 && k->kind != DV_TT_OTHER) {
        size_t n = strlen(k->label);
        k->chunk = op->chunk / P;
        if (k->chunk < 26)
            snprintf(k->label + n, sizeof k->label - n, "%c", 'a' + k->chunk);
        else
            snprintf(k->label + n, sizeof k->label - n, ":%d", k->chunk);
    }
}

/* What a pipeline message carries: 'A' activations, 'G' gradients, 0 unknown. An
 * exchange (one sendrecv with one peer) is read from the pipeline operation around it
 * on its rank, op: inside a forward what arrives is activations and what leaves is
 * gradients (for the stage before), inside a backward the reverse; without one, by
 * direction: activations go to higher ranks. */
static char what_of(const dt_event *e, char op)
{
    if (dvi_is(e->phase, "activations")) return 'A';
    if (dvi_is(e->phase, "gradients")) return 'G';
    if (!dvi_is(e->phase, "exchange")) return 0;
    int in = e->kind == DT_EV_RECV;
    if (op) return (op == 'F') == in ? 'A' : 'G';
    return (e->peer < e->rank) == in ? 'A' : 'G';
}

static void msg_label(const dt_event *e, char op, char *out, size_t len)
{
    char w = dvi_is(e->coll, "pipeline") ? what_of(e, op) : 0;
    int m = dvi_micro(e);
    if (w && m >= 0)
        snprintf(out, len, "%s %d", w == 'A' ? "act" : "grad", m);
    else if (w)
        snprintf(out, len, "%s", w == 'A' ? "act" : "grad");
    else
        snprintf(out, len, "%.23s", dvi_is(e->phase, "-") ? dt_event_kind_name(e->kind) : e->phase);
}

static const struct { const char *coll, *phase, *name, *sep; dv_tt_role role; } mark_names[] = {
    { "ddp", "bucket", "bucket", " ", DV_TT_ROLE_BUCKET },
    { "fsdp", "gather", "AG", " L", DV_TT_ROLE_GATHER },
    { "fsdp", "reduce-scatter", "RS", " L", DV_TT_ROLE_RS },
    { "fsdp", "free", "free", " L", DV_TT_ROLE_OTHER },
    { "fsdp", "gather-updated", "AG upd", " L", DV_TT_ROLE_OTHER },
    { "tp", "f", "f", " L", DV_TT_ROLE_OTHER },
    { "tp", "g", "g", " L", DV_TT_ROLE_OTHER },
    { "tp", "gather", "gather", " L", DV_TT_ROLE_OTHER },
    { "tp", "ag", "ag", " L", DV_TT_ROLE_OTHER },
    { "tp", "rs", "rs", " L", DV_TT_ROLE_OTHER },
    { "tp", "ln", "sum LN", NULL, DV_TT_ROLE_OTHER },
    { "cp", "kv", "kv", " L", DV_TT_ROLE_OTHER },
    { "cp", "dkv", "dkv", " L", DV_TT_ROLE_OTHER },
    { "pp", "tie", "tie wte", NULL, DV_TT_ROLE_OTHER },
    { "dp-threads", "lock-wait", "lock", NULL, DV_TT_ROLE_LOCK },
};

/* A block named by mark e: its label, role, and micro-batch (tp's marks have one; the
 * others' lo..hi are elements). */
static void mark_piece(const bld *b, piece *q, const dt_event *e)
{
    const char *name = e->phase, *sep = " ";
    for (size_t i = 0; i < sizeof mark_names / sizeof mark_names[0]; i++)
        if (dvi_is(e->coll, mark_names[i].coll) && dvi_is(e->phase, mark_names[i].phase)) {
            name = mark_names[i].name;
            sep = mark_names[i].sep;
            q->b.role = mark_names[i].role;
        }
    if (e->chunk >= 0 && sep != NULL) {     /* NULL: the chunk is not in the name */
        char full[48], ly[16];             /* then cut to the label's 23 characters */
        layer_name(b, e->chunk, ly, sizeof ly);
        if (strcmp(sep, " L") == 0)        /* a layer: " L2", or the GPT's " b1" */
            snprintf(full, sizeof full, "%.12s %s", name, ly);
        else
            snprintf(full, sizeof full, "%.12s%.2s%d", name, sep, e->chunk);
        snprintf(q->b.label, sizeof q->b.label, "%.23s", full);
    } else
        snprintf(q->b.label, sizeof q->b.label, "%.23s", name);
    q->b.micro = dvi_is(e->coll, "tp") ? dvi_micro(e) : -1;
}

/* The rightmost leaf in [0, p] of the max-tree tr whose value is >= x, or -1. */
static int rightmost(const double *tr, int node, int lo, int hi, int p, double x)
{
    if (lo > p || tr[node] < x)
        return -1;
    if (hi - lo == 1)
        return lo;
    int mid = lo + (hi - lo) / 2;
    int r = rightmost(tr, 2 * node + 1, mid, hi, p, x);
    return r >= 0 ? r : rightmost(tr, 2 * node, lo, mid, p, x);
}

/* One open call of a rank (dv_model's segments): its coll, where it stands. */
typedef struct { int seg; const char *coll, *phase; int step, nseen; const char *seen[MAX_SEEN]; } open_call;

static int goes_back(const open_call *o, const dt_event *e)
{
    if (o->phase && dvi_is(e->phase, o->phase))
        return e->step < o->step;
    for (int i = 0; i < o->nseen; i++)
        if (dvi_is(e->phase, o->seen[i]))
            return 1;
    return 0;
}

/* The segment of in-call event i: a call mark opens one; another event joins the open
 * call of its coll unless its (phase, step) goes back. -1: out of memory. */
static int cut(bld *b, open_call *open, int *nopen, size_t i)
{
    const dt_event *e = &b->t->ev[i];
    int k = 0;
    while (k < *nopen && !dvi_is(e->coll, open[k].coll))
        k++;
    if (k == *nopen || e->kind == DT_EV_MARK || goes_back(&open[k], e)) {
        if (k == *nopen && *nopen == MAX_OPEN)
            k = 0;                                  /* forget the oldest */
        if (k < *nopen)
            memmove(&open[k], &open[k + 1], (size_t)(*nopen - k - 1) * sizeof *open), (*nopen)--;
        seg *s = push(&b->sg, &b->nsg, &b->capsg, sizeof *b->sg);
        if (s == NULL)
            return -1;
        *s = (seg){ e->t0, e->t1, 0, (int)i, -1, -1, -1, 0 };
        k = (*nopen)++;
        open[k] = (open_call){ .seg = (int)b->nsg - 1, .coll = e->coll };
    }
    open_call *o = &open[k];
    if (e->kind != DT_EV_MARK) {
        if (o->phase && !dvi_is(e->phase, o->phase) && o->nseen < MAX_SEEN)
            o->seen[o->nseen++] = o->phase;
        o->phase = e->phase;
        o->step = e->step;
    }
    seg *s = &b->sg[o->seg];
    s->t0 = e->t0 < s->t0 ? e->t0 : s->t0;
    s->t1 = e->t1 > s->t1 ? e->t1 : s->t1;
    s->sent += e->kind == DT_EV_SEND ? (double)e->nbytes : 0;
    s->vias |= dv_via_bit(e);
    b->ev_seg[i] = o->seg;
    return 0;
}

/* A step begins on e's rank no later than e. */
static int note_start(bld *b, const dt_event *e)
{
    if (e->step < 0)
        return 0;
    dvi_key *s = push(&b->st, &b->nst, &b->capst, sizeof *b->st);
    if (s == NULL)
        return -1;
    *s = (dvi_key){ e->rank, 0, 0, e->step, e->t0 };
    return 0;
}

/* pp's or dp's send or receive i into a block: with the event before it, the other
 * half of an exchange (one sendrecv) or another piece of one message, when that one is
 * the single event of block last; else a new block. Returns the block for the next
 * event to join, -1 none, -2 out of memory. */
static int message(bld *b, size_t i, int last)
{
    const dt_event *ev = b->t->ev, *e = &ev[i], *f = &ev[i - (i > 0)];
    double sent = e->kind == DT_EV_SEND ? (double)e->nbytes : 0;
    int joins = last >= 0 && b->ev_piece[i - 1] == last && dvi_is(e->coll, f->coll);
    piece *q = joins ? &b->p[last] : NULL;
    if (joins && f->kind != e->kind && dvi_is(e->phase, "exchange") &&
        dvi_is(f->phase, "exchange") && e->t0 == f->t0 && e->t1 == f->t1) {
        const dt_event *in = e->kind == DT_EV_RECV ? e : f, *out = in == e ? f : e;
        char a[24], c[24];
        msg_label(in, b->ev_op[in - ev], a, sizeof a);
        msg_label(out, b->ev_op[out - ev], c, sizeof c);
        snprintf(q->b.label, sizeof q->b.label, "%.10s + %.10s", a, c);
        q->b.micro = dvi_micro(in);
        q->b.nbytes += sent;
        q->b.vias |= dv_via_bit(e);
        b->ev_piece[i] = last;
        return -1;
    }
    if (joins && f->kind == e->kind && f->peer == e->peer && dvi_is(e->phase, f->phase) &&
        e->lo == f->lo && e->hi == f->hi) {
        q->s0 = q->b.t0 = fmin(q->b.t0, e->t0);
        q->s1 = q->b.t1 = fmax(q->b.t1, e->t1);
        q->b.nbytes += sent;
        q->b.vias |= dv_via_bit(e);
        b->ev_piece[i] = last;
        return last;
    }
    if ((q = new_piece(b, e, 1, e->t0, e->t1)) == NULL)
        return -2;
    q->known = 0;                                   /* dp's weights carry a version */
    q->b.layer = -1;
    q->b.nbytes = sent;
    q->b.vias = dv_via_bit(e);
    q->ev = (int)i;
    q->s0 = e->t0;
    q->s1 = e->t1;
    msg_label(e, b->ev_op[i], q->b.label, sizeof q->b.label);
    return b->ev_piece[i] = (int)(q - b->p);
}

/* One rank's marks (their events at b->mk[0 .. nmk)) and calls (b->sg[seg0 ..)) into
 * blocks: each call joins the innermost span mark holding it, found in a max-tree of
 * the marks' ends; else an instant mark just before it (no other mark between) names
 * it; else it is a block of its own. */
static int name_calls(bld *b, size_t seg0, int nmk)
{
    const dt_event *ev = b->t->ev;
    int sz = 1;
    while (sz < nmk)
        sz *= 2;
    for (int j = 0; j < 2 * sz; j++)
        b->tree[j] = -INFINITY;
    for (int j = 0; j < nmk; j++) {
        const dt_event *e = &ev[b->mk[j]];
        b->tree[sz + j] = e->t1 > e->t0 ? e->t1 : -INFINITY;
        b->mkused[j] = 0;
    }
    for (int j = sz - 1; j >= 1; j--)
        b->tree[j] = fmax(b->tree[2 * j], b->tree[2 * j + 1]);
    int pending = -1, j = 0;
    for (size_t k = seg0; k < b->nsg; k++) {
        seg *s = &b->sg[k];
        int a = 0, z = nmk;                     /* marks with t0 <= s->t0: [0, a) */
        while (a < z) {
            int mid = a + (z - a) / 2;
            if (ev[b->mk[mid]].t0 <= s->t0) a = mid + 1; else z = mid;
        }
        s->mark = nmk ? rightmost(b->tree, 1, 0, sz, a - 1, s->t1) : -1;
        /* an instant mark before it, with no other mark between, names it */
        for (; j < a; j++) {
            const dt_event *e = &ev[b->mk[j]];
            pending = e->t1 == e->t0 && !dvi_is(e->phase, "free") ? j : -1;
        }
        if (s->mark < 0 && pending >= 0) {
            s->attach = pending;
            b->mkused[pending] = 1;
        }
        pending = -1;
    }
    for (int k = 0; k < nmk; k++) {
        const dt_event *e = &ev[b->mk[k]];
        b->mkpiece[k] = -1;
        if (b->mkused[k])
            continue;
        piece *q = new_piece(b, e, 1, e->t0, e->t1);
        if (q == NULL)
            return -1;
        mark_piece(b, q, e);
        b->mkpiece[k] = (int)(q - b->p);
    }
    for (size_t k = seg0; k < b->nsg; k++) {
        seg *s = &b->sg[k];
        piece *q;
        if (s->mark >= 0) {
            q = &b->p[b->mkpiece[s->mark]];
        } else {
            const dt_event *e = &ev[s->attach >= 0 ? b->mk[s->attach] : s->first];
            if ((q = new_piece(b, e, 1, s->t0, s->t1)) == NULL)
                return -1;
            q->known = s->attach >= 0 && e->step >= 0;
            q->b.layer = s->attach >= 0 ? q->b.layer : -1;
            q->b.micro = -1;
            if (s->attach >= 0)
                mark_piece(b, q, e);
            else
                snprintf(q->b.label, sizeof q->b.label, "%.23s", e->coll);
            if (s->attach < 0 && strcmp(b->tt->mode, "ddp") == 0 && begins(e->coll, "allreduce"))
                q->b.role = DV_TT_ROLE_BUCKET;
            if (s->attach < 0 && strcmp(b->tt->mode, "fsdp") == 0)
                q->b.role = begins(e->coll, "allgather") ? DV_TT_ROLE_GATHER
                          : begins(e->coll, "reduce_scatter") ? DV_TT_ROLE_RS : q->b.role;
        }
        q->b.nbytes += s->sent;
        q->b.vias |= s->vias;
        if (q->ev < 0)
            q->ev = s->first, q->s0 = s->t0, q->s1 = s->t1;
        s->piece = (int)(q - b->p);
    }
    return 0;
}


/* The events [lo, hi) of one rank into pieces. */
static int walk_rank(bld *b, size_t lo, size_t hi)
{
    const dt_event *ev = b->t->ev;
    open_call open[MAX_OPEN];
    int nopen = 0, nmk = 0, last_msg = -1;
    size_t seg0 = b->nsg;
    pipe_op op = { 0 };             /* the last pipeline operation begun */
    int prev_compute = -1;          /* the piece of the event just before, if compute */
    for (size_t i = lo; i < hi; i++) {
        const dt_event *e = &ev[i];
        if (e->kind != DT_EV_COMPUTE)
            prev_compute = -1;
        if (e->kind == DT_EV_COMPUTE || dvi_pipe_op(e) || dvi_named_mark(e) ||
            (e->kind == DT_EV_MARK && dvi_is(e->coll, "train")))
            if (note_start(b, e))
                return -1;
        if (e->kind == DT_EV_COMPUTE) {
            /* a pp stage of several layers records one event per layer: the operation
             * (F3) is one block, so the events right after each other merge */
            piece *prev = prev_compute >= 0 ? &b->p[prev_compute] : NULL;
            dv_tt_block k = { .kind = DV_TT_OTHER, .micro = dvi_micro(e),
                              .layer = e->chunk >= 0 ? e->chunk : -1, .chunk = -1 };
            compute_label(b, e, &k);
            op_label(b, e, &op, &k);
            if (b->pp_like && prev != NULL && k.micro >= 0 && prev->b.step == e->step &&
                prev->b.micro == k.micro && prev->b.kind == k.kind && k.kind != DV_TT_OTHER &&
                strcmp(prev->b.label, k.label) == 0 && e->t0 >= prev->b.t1) {
                prev->b.t1 = e->t1;
                last_msg = -1;
                continue;
            }
            piece *q = new_piece(b, e, 0, e->t0, e->t1);
            if (q == NULL)
                return -1;
            q->b.kind = k.kind;
            q->b.chunk = k.chunk;
            memcpy(q->b.label, k.label, sizeof k.label);
            prev_compute = (int)(q - b->p);
            last_msg = -1;
            continue;
        } else if (dvi_pipe_op(e)) {
            op = (pipe_op){ e->phase[0] == 'f' ? 'F' : e->phase[0] == 'w' ? 'W' : 'B', e->t0,
                            e->t1, e->step, dvi_micro(e), e->chunk >= 0 ? e->chunk : -1 };
        } else if (dvi_named_mark(e)) {
            b->mk[nmk++] = (int)i;
        } else if (raw_coll(e->coll) && (e->kind == DT_EV_SEND || e->kind == DT_EV_RECV)) {
            b->ev_op[i] = op.kind && e->t0 <= op.t1 && dvi_is(e->coll, "pipeline") ? op.kind
                                                                                  : 0;
            if ((last_msg = message(b, i, i > lo ? last_msg : -1)) == -2)
                return -1;
            continue;
        } else if (dt_event_in_call(e) && !raw_coll(e->coll) && !dvi_is(e->coll, "attention_ring")) {
            /* (ring attention's call is drawn by its "kv" marks and "attn" compute) */
            if (cut(b, open, &nopen, i))
                return -1;
        }
        last_msg = -1;
    }
    if (name_calls(b, seg0, nmk))
        return -1;
    for (size_t i = lo; i < hi; i++)
        if (b->ev_seg[i] >= 0)
            b->ev_piece[i] = b->sg[b->ev_seg[i]].piece;
    return 0;
}

/* ==== 3. steps ==== */

/* Gives every piece without a step of its own the step of the last event before it
 * (at or before its begin) on its rank that names one: compute, a pipeline operation,
 * a step or a named mark; the rank's first such step when none comes before; ranks
 * without any use every rank's; step 1 when the trace names none. -1: out of memory. */
static int assign_steps(bld *b)
{
    size_t n = b->nst;
    dvi_key *g = malloc((n ? n : 1) * sizeof *g);
    size_t *first = calloc((size_t)b->tt->nranks + 1, sizeof *first);
    if (g == NULL || first == NULL) {
        free(g);
        free(first);
        return -1;
    }
    if (n)
        qsort(b->st, n, sizeof *b->st, dvi_key_cmp);
    for (size_t i = 0; i < n; i++) {
        g[i] = b->st[i];
        g[i].k0 = 0;
        first[b->st[i].k0 + 1]++;
    }
    qsort(g, n, sizeof *g, dvi_key_cmp);
    for (int r = 0; r < b->tt->nranks; r++)
        first[r + 1] += first[r];
    for (size_t i = 0; i < b->np; i++) {
        piece *q = &b->p[i];
        size_t k = first[q->b.rank + 1] - first[q->b.rank], lo = 0, hi;
        const dvi_key *s = k ? b->st + first[q->b.rank] : g;
        if (q->known)
            continue;
        k = k ? k : n;
        for (hi = k; lo < hi;) {                    /* begun by t0: [0, lo) */
            size_t mid = lo + (hi - lo) / 2;
            if (s[mid].t <= q->b.t0) lo = mid + 1; else hi = mid;
        }
        q->b.step = k == 0 ? 1 : s[lo ? lo - 1 : 0].idx;
    }
    free(g);
    free(first);
    return 0;
}

/* ==== 4. matching: waits and arrows ==== */

static int cmp_end(const void *x, const void *y)
{
    const end *a = x, *b = y;
    int c = strncmp(a->coll, b->coll, 32);
    if (c) return c;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    if (a->b != b->b) return a->b < b->b ? -1 : 1;
    return (a->ev > b->ev) - (a->ev < b->ev);
}

static int cmp_wait(const void *x, const void *y)
{
    const wstretch *a = x, *b = y;
    if (a->piece != b->piece) return a->piece < b->piece ? -1 : 1;
    if (a->row != b->row) return a->row < b->row ? -1 : 1;
    return (a->t0 > b->t0) - (a->t0 < b->t0);
}

static int cmp_arrow(const void *x, const void *y)
{
    const dv_tt_arrow *a = x, *b = y;
    if (a->t0 != b->t0) return a->t0 < b->t0 ? -1 : 1;
    return (a->src > b->src) - (a->src < b->src);
}

/* Rank x of a matched pair waited from t0 to t1 (nothing if t1 <= t0). */
static int add_wait(bld *b, wstretch **w, size_t *nw, size_t *cap, int x, double t0, double t1)
{
    if (b->ev_piece[x] < 0)
        return 0;
    t0 = fmax(t0, b->p[b->ev_piece[x]].b.t0);      /* within its block */
    t1 = fmin(t1, b->p[b->ev_piece[x]].b.t1);
    if (!(t1 > t0))
        return 0;
    wstretch *s = push(w, nw, cap, sizeof **w);
    if (s == NULL)
        return -1;
    *s = (wstretch){ b->ev_piece[x], b->p[b->ev_piece[x]].b.row, b->t->ev[x].rank, t0, t1 };
    return 0;
}

/* The row of (rank, thread) in tt->rows (sorted), or the rank's main row. */
static int row_of(const dv_tt *tt, int rank, int thread)
{
    int lo = 0, hi = tt->nrows;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const dv_tt_row *w = &tt->rows[mid];
        if (w->rank < rank || (w->rank == rank && w->thread < thread)) lo = mid + 1; else hi = mid;
    }
    if (lo < tt->nrows && tt->rows[lo].rank == rank && tt->rows[lo].thread == thread)
        return lo;
    return thread != 0 ? row_of(tt, rank, 0) : 0;
}

static int match(bld *b)
{
    const dt_event *ev = b->t->ev;
    dv_tt *tt = b->tt;
    size_t n = b->t->n ? b->t->n : 1, ns = 0, nr = 0, nw = 0, capw = 0, capa = 0, na = 0;
    end *s = malloc(n * sizeof *s), *r = malloc(n * sizeof *r);
    wstretch *w = NULL;
    int rc = -1;
    if (s == NULL || r == NULL)
        goto out;
    for (size_t i = 0; i < b->t->n; i++) {
        const dt_event *e = &ev[i];
        if (e->peer < 0 || e->peer >= tt->nranks)
            continue;
        if (e->kind == DT_EV_SEND)
            s[ns++] = (end){ e->coll, e->rank, e->peer, (int)i };
        else if (e->kind == DT_EV_RECV)
            r[nr++] = (end){ e->coll, e->peer, e->rank, (int)i };
    }
    qsort(s, ns, sizeof *s, cmp_end);
    qsort(r, nr, sizeof *r, cmp_end);
    int last_piece = -1;
    for (size_t i = 0, j = 0; i < ns && j < nr;) {
        int c = cmp_end(&(end){ s[i].coll, s[i].a, s[i].b, 0 }, &(end){ r[j].coll, r[j].a, r[j].b, 0 });
        if (c) {
            i += c < 0;
            j += c > 0;
            continue;
        }
        int x = s[i++].ev, y = r[j++].ev;            /* the k-th send meets the k-th receive */
        const dt_event *se = &ev[x], *re = &ev[y];
        if (add_wait(b, &w, &nw, &capw, y, re->t0, fmin(se->t0, re->t1)) ||
            add_wait(b, &w, &nw, &capw, x, se->t0, fmin(re->t0, se->t1)))
            goto out;
        if (!dvi_is(se->coll, "pipeline"))
            continue;
        if (na > 0 && b->ev_piece[x] >= 0 && b->ev_piece[x] == last_piece &&
            tt->arrows[na - 1].dst == re->rank) {   /* the next piece of one message */
            tt->arrows[na - 1].t1 = fmax(tt->arrows[na - 1].t1, re->t1);
            continue;
        }
        last_piece = b->ev_piece[x];
        dv_tt_arrow *a = push(&tt->arrows, &na, &capa, sizeof *a);
        if (a == NULL)
            goto out;
        char what = what_of(se, b->ev_op[x]);
        what = what ? what : what_of(re, b->ev_op[y]);
        *a = (dv_tt_arrow){ se->rank, re->rank,
                            b->ev_piece[x] >= 0 ? b->p[b->ev_piece[x]].b.row
                                                : row_of(tt, se->rank, se->thread),
                            b->ev_piece[y] >= 0 ? b->p[b->ev_piece[y]].b.row
                                                : row_of(tt, re->rank, re->thread),
                            se->t0, re->t1,
                            b->ev_piece[x] >= 0 ? b->p[b->ev_piece[x]].b.step : se->step,
                            dvi_micro(se), what ? what : se->rank < re->rank ? 'A' : 'G' };
    }
    tt->narrows = (int)na;
    if (na)
        qsort(tt->arrows, na, sizeof *tt->arrows, cmp_arrow);
    for (size_t i = 0; i < b->np; i++) {         /* a wait for the lock: all waiting */
        const dv_tt_block *k = &b->p[i].b;
        wstretch *x;
        if (k->role != DV_TT_ROLE_LOCK || !(k->t1 > k->t0))
            continue;
        if ((x = push(&w, &nw, &capw, sizeof *w)) == NULL)
            goto out;
        *x = (wstretch){ (int)i, k->row, k->rank, k->t0, k->t1 };
    }

    /* each piece's stretches merged: its waits, and its wait as their length */
    if (nw)
        qsort(w, nw, sizeof *w, cmp_wait);
    tt->waits = malloc((nw ? nw : 1) * sizeof *tt->waits);
    if (tt->waits == NULL)
        goto out;
    for (size_t i = 0; i < nw;) {
        wstretch cur = w[i++];
        while (i < nw && w[i].piece == cur.piece && w[i].t0 <= cur.t1)
            cur.t1 = fmax(cur.t1, w[i++].t1);
        tt->waits[tt->nwaits++] = (dv_tt_wait){ cur.rank, cur.row, cur.t0, cur.t1 };
        b->p[cur.piece].b.wait += cur.t1 - cur.t0;
    }
    for (size_t i = 0; i < (size_t)tt->nwaits; i++)  /* by row, then t0 */
        w[i] = (wstretch){ 0, tt->waits[i].row, tt->waits[i].rank, tt->waits[i].t0,
                           tt->waits[i].t1 };
    if (nw)
        qsort(w, (size_t)tt->nwaits, sizeof *w, cmp_wait);
    for (size_t i = 0; i < (size_t)tt->nwaits; i++)
        tt->waits[i] = (dv_tt_wait){ w[i].rank, w[i].row, w[i].t0, w[i].t1 };
    rc = 0;
out:
    free(s);
    free(r);
    free(w);
    return rc;
}

/* ==== 5. the blocks in order (train_algos.c measures them) ==== */

static const dv_call *sort_calls;       /* qsort has no context argument */

static int cmp_call(const void *x, const void *y)
{
    const dv_call *a = &sort_calls[*(const int *)x], *b = &sort_calls[*(const int *)y];
    int c = strncmp(a->coll, b->coll, 32);
    return c ? c : (a->t0 > b->t0) - (a->t0 < b->t0);
}

/* The call of coll with rank among its members whose span holds [s0, s1]: the
 * latest-starting of CALL_LOOK (two groups of a hybrid run reduce at once). */
static int find_call(const dv_model *m, const int *byc, const char *coll, int rank, double s0,
                     double s1)
{
    int lo = 0, hi = m->ncalls;                 /* calls before (coll, s0]: [0, lo) */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2, c = strncmp(m->calls[byc[mid]].coll, coll, 32);
        if (c < 0 || (c == 0 && m->calls[byc[mid]].t0 <= s0)) lo = mid + 1; else hi = mid;
    }
    for (int k = lo - 1; k >= 0 && k >= lo - CALL_LOOK; k--) {
        const dv_call *c = &m->calls[byc[k]];
        if (strncmp(c->coll, coll, 32) != 0)
            break;
        if (c->t1 >= s1 && rank >= 0 && rank < DV_MAX_RANKS && (c->members >> rank & 1))
            return byc[k];
    }
    return -1;
}

/* Orders the pieces into tt->blocks (by row, lane, t0) and finds their calls. */
static int lay_out(bld *b)
{
    dv_tt *tt = b->tt;
    size_t n = b->np;
    dvi_key *o = malloc((n ? n : 1) * sizeof *o);
    int *byc = malloc((b->m->ncalls ? (size_t)b->m->ncalls : 1) * sizeof *byc);
    tt->blocks = malloc((n ? n : 1) * sizeof *tt->blocks);
    if (o == NULL || byc == NULL || tt->blocks == NULL) {
        free(o);
        free(byc);
        return -1;
    }
    for (int c = 0; c < b->m->ncalls; c++)
        byc[c] = c;
    sort_calls = b->m->calls;
    qsort(byc, (size_t)b->m->ncalls, sizeof *byc, cmp_call);
    for (size_t i = 0; i < n; i++)
        o[i] = (dvi_key){ b->p[i].b.row, b->p[i].b.lane, 0, (int)i, b->p[i].b.t0 };
    qsort(o, n, sizeof *o, dvi_key_cmp);
    for (size_t k = 0; k < n; k++) {
        const piece *q = &b->p[o[k].idx];
        tt->blocks[k] = q->b;
        if (q->ev >= 0)
            tt->blocks[k].call = find_call(b->m, byc, b->t->ev[q->ev].coll, tt->blocks[k].rank,
                                           q->s0, q->s1);
    }
    tt->nblocks = (int)n;
    free(o);
    free(byc);
    return 0;
}

/* ==== building and freeing ==== */

__attribute__((format(printf, 4, 5)))
static int fail(dv_tt *tt, char *err, size_t errlen, const char *fmt, ...)
{
    dv_tt_free(tt);
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The events of m's trace in (rank, thread, t0) order, into *by_thread (owned; its ev
 * malloc'd) when some event names a thread other than 0; else *t is m's trace as it is.
 * Returns 0, or -1 out of memory. */
static int thread_order(const dv_model *m, dt_trace *by_thread, const dt_trace **t)
{
    const dt_trace *src = &m->trace;
    size_t i, n = src->n;
    *t = src;
    for (i = 0; i < n && src->ev[i].thread == 0; i++)
        ;
    if (i == n)
        return 0;
    dvi_key *o = malloc(n * sizeof *o);
    *by_thread = *src;
    by_thread->ev = malloc(n * sizeof *by_thread->ev);
    if (o == NULL || by_thread->ev == NULL) {
        free(o);
        free(by_thread->ev);
        by_thread->ev = NULL;
        return -1;
    }
    for (i = 0; i < n; i++)
        o[i] = (dvi_key){ src->ev[i].rank, src->ev[i].thread, 0, (int)i, src->ev[i].t0 };
    qsort(o, n, sizeof *o, dvi_key_cmp);
    for (i = 0; i < n; i++)
        by_thread->ev[i] = src->ev[o[i].idx];
    free(o);
    *t = by_thread;
    return 0;
}

/* tt->rows from t's events in (rank, thread) order: each rank's thread 0, then the
 * threads its events name. 0, or -1 out of memory. */
static int make_rows(dv_tt *tt, const dt_trace *t)
{
    size_t cap = (size_t)tt->nranks, n = 0, i = 0;
    for (size_t k = 1; k < t->n; k++)              /* the groups after the first */
        cap += t->ev[k].rank != t->ev[k - 1].rank || t->ev[k].thread != t->ev[k - 1].thread;
    tt->rows = malloc((cap + 1) * sizeof *tt->rows);
    if (tt->rows == NULL)
        return -1;
    for (int r = 0; r < tt->nranks; r++) {
        tt->rows[n++] = (dv_tt_row){ r, 0 };
        for (; i < t->n && t->ev[i].rank <= r; i++)
            if (t->ev[i].rank == r && t->ev[i].thread > tt->rows[n - 1].thread && n < cap)
                tt->rows[n++] = (dv_tt_row){ r, t->ev[i].thread };
    }
    tt->nrows = (int)n;
    return 0;
}

int dv_tt_build(dv_tt *tt, const dv_model *m, char *err, size_t errlen)
{
    memset(tt, 0, sizeof *tt);
    if (m == NULL || m->nranks < 1 || m->nranks > DV_MAX_RANKS || !dv_tt_is_training(&m->trace))
        return fail(tt, err, errlen, "this is not a training trace: it has no '# train' line "
                    "and no compute events of train (write one with build/train --trace)");
    dt_trace by_thread = { 0 };
    const dt_trace *t = &m->trace;
    size_t n = t->n ? t->n : 1;
    bld b = { .t = t, .m = m, .tt = tt };
    int rc = -1;
    tt->nranks = m->nranks;
    tt->slots = !m->from_trace;
    if (thread_order(m, &by_thread, &t) || make_rows(tt, t))
        goto out;
    b.t = t;
    b.ev_piece = malloc(n * sizeof *b.ev_piece);
    b.ev_seg = malloc(n * sizeof *b.ev_seg);
    b.ev_op = calloc(n, 1);
    b.mk = malloc(n * sizeof *b.mk);
    b.mkpiece = malloc(n * sizeof *b.mkpiece);
    b.mkused = malloc(n);
    b.tree = malloc((4 * n + 2) * sizeof *b.tree);
    if (!b.ev_piece || !b.ev_seg || !b.ev_op || !b.mk || !b.mkpiece || !b.mkused || !b.tree)
        goto out;
    b.pp_like = dvi_tt_mode(tt, &m->trace, b.mk, &b.micro_labels);
    b.gpt_units = gpt_units_of(tt->settings, t);
    for (size_t i = 0; i < t->n; i++)
        b.ev_piece[i] = b.ev_seg[i] = -1;
    for (size_t lo = 0, hi; lo < t->n; lo = hi) {      /* rank by rank, thread by thread */
        for (hi = lo + 1; hi < t->n && t->ev[hi].rank == t->ev[lo].rank &&
                          t->ev[hi].thread == t->ev[lo].thread; hi++)
            ;
        if (walk_rank(&b, lo, hi))
            goto out;
    }
    for (size_t i = 0; i < b.np; i++)
        b.p[i].b.row = row_of(tt, b.p[i].b.rank, b.p[i].b.thread);
    if (assign_steps(&b) || match(&b) || lay_out(&b) || dvi_tt_measure(tt))
        goto out;
    tt->t_begin = INFINITY;
    tt->t_end = -INFINITY;
    for (int k = 0; k < tt->nblocks; k++) {
        tt->t_begin = fmin(tt->t_begin, tt->blocks[k].t0);
        tt->t_end = fmax(tt->t_end, tt->blocks[k].t1);
        tt->vias |= tt->blocks[k].vias;
    }
    if (!(tt->t_end > tt->t_begin))                 /* the model's span is never empty */
        tt->t_begin = m->t_begin, tt->t_end = m->t_end;
    rc = 0;
out:
    free(b.p);
    free(b.sg);
    free(b.st);
    free(b.ev_piece);
    free(b.ev_seg);
    free(b.ev_op);
    free(b.mk);
    free(b.mkpiece);
    free(b.mkused);
    free(b.tree);
    free(by_thread.ev);
    if (rc != 0)
        return fail(tt, err, errlen, "out of memory building the timetable of %zu events", t->n);
    return 0;
}

void dv_tt_free(dv_tt *tt)
{
    if (tt == NULL)
        return;
    free(tt->rows);
    free(tt->blocks);
    free(tt->waits);
    free(tt->arrows);
    free(tt->steps);
    free(tt->lane_first);
    free(tt->lane_reach);
    free(tt->step_order);
    free(tt->step_reach);
    free(tt->held);
    memset(tt, 0, sizeof *tt);
}
