/* The built-in schedules: what each collective of lib/collectives records, synthesised
 * from lib/schedule without running it (see model.h).
 *
 * Each generator below mirrors one collective line by line: the same loops, the same
 * dt_trace_phase / dt_trace_step context, the same send / recv / reduce events in the
 * same order, and the same early returns for one rank. Three things differ from a real
 * trace: a chunk moves as one event (no 256 KiB segments), the elements are 4-byte
 * floats, and time is the step's index in the call: frame f runs from t = f to f + 1.
 * The call mark sits at t = 0. So a built-in model and the model of a lesson's trace at
 * the same rank count show the same frames and the same masks. */
#include "model.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "units.h"

#define ESIZE 4                         /* floats */

const char *const dv_algos[] = {
    "ring-allreduce", "reduce-scatter", "allgather", "naive-allreduce", "tree-bcast",
    "tree-reduce", "rd-allreduce", "alltoall", "tree-gather", "tree-scatter",
    "ring-attention", "ring-attention-zigzag", NULL
};

static const char *const algo_colls[] = {
    "allreduce_ring", "reduce_scatter_ring", "allgather_ring", "allreduce_naive",
    "bcast_tree", "reduce_tree", "allreduce_rd", "alltoall_pairwise", "gather_tree",
    "scatter_tree", "attention_ring", "attention_ring"
};

#define NALGOS ((int)(sizeof algo_colls / sizeof algo_colls[0]))

int dv_algo_index(const char *name)
{
    for (int i = 0; name != NULL && i < NALGOS; i++)
        if (strcmp(name, dv_algos[i]) == 0)
            return i;
    return -1;
}

const char *dv_algo_coll(int algo)
{
    return algo >= 0 && algo < NALGOS ? algo_colls[algo] : NULL;
}


/* ==== the event writer: dt_trace_phase / dt_trace_step / dt_trace_add in one ==== */

typedef struct {
    dt_trace *t;
    size_t cap;
    int failed;                 /* out of memory */
    int rank, n;                /* the rank being written, of n */
    long long count;            /* the call's buffer, in elements */
    const char *coll;
} gen;

/* Element i of the buffer's n chunks (dt_chunk_bounds): chunk i starts at lo(i), and
 * lo(n) = count, so chunks i .. j-1 are [lo(i), lo(j)). */
static long long chunk_lo(const gen *g, int i)
{
    if (i >= g->n)
        return g->count;
    size_t lo, hi;
    dt_chunk_bounds((size_t)g->count, g->n, i, &lo, &hi);
    return (long long)lo;
}

static long long bytes_of(long long lo, long long hi)
{
    long long e = hi - lo;
    return e > LLONG_MAX / ESIZE ? LLONG_MAX : e * ESIZE;
}

/* One event of rank g->rank in frame f (t0 = f, t1 = f + 1), on elements [lo, hi). */
static void add(gen *g, int f, dt_event_kind kind, int peer, const char *phase, int step,
                int chunk, long long lo, long long hi)
{
    dt_trace *t = g->t;
    if (g->failed)
        return;
    if (t->n == g->cap) {
        size_t ncap = g->cap ? 2 * g->cap : 256;
        dt_event *p = realloc(t->ev, ncap * sizeof *p);
        if (p == NULL) {
            g->failed = 1;
            return;
        }
        t->ev = p;
        g->cap = ncap;
    }
    dt_event *e = &t->ev[t->n++];
    memset(e, 0, sizeof *e);
    e->t0 = f;
    e->t1 = kind == DT_EV_MARK ? f : f + 1;
    e->rank = g->rank;
    e->peer = peer;
    e->kind = kind;
    snprintf(e->coll, sizeof e->coll, "%s", g->coll);
    snprintf(e->phase, sizeof e->phase, "%s", phase);
    e->step = step;
    e->chunk = chunk;
    e->lo = lo;
    e->hi = hi;
    e->nbytes = bytes_of(lo, hi);
}

/* dt_trace_call: the mark every collective records on entry. */
static void call_mark(gen *g)
{
    add(g, 0, DT_EV_MARK, -1, "call", -1, -1, 0, g->count);
}

/* A whole-buffer transfer (chunk 0, [0, count)), as the tree and naive algorithms move. */
static void whole(gen *g, int f, dt_event_kind kind, int peer, const char *phase, int step)
{
    add(g, f, kind, peer, phase, step, 0, 0, g->count);
}

/* ==== the collectives, one generator each ==== */

/* dti_ring_reduce_scatter (reduce_scatter.c), frames f0 .. f0+n-2. */
static void ring_rs(gen *g, int f0)
{
    int r = g->rank, n = g->n;
    for (int s = 0; s < n - 1; s++) {
        int sc = dt_ring_rs_send_chunk(r, n, s), rc = dt_ring_rs_recv_chunk(r, n, s);
        long long rlo = chunk_lo(g, rc), rhi = chunk_lo(g, rc + 1);
        add(g, f0 + s, DT_EV_SEND, dt_ring_right(r, n), "reduce-scatter", s, sc,
            chunk_lo(g, sc), chunk_lo(g, sc + 1));
        add(g, f0 + s, DT_EV_RECV, dt_ring_left(r, n), "reduce-scatter", s, rc, rlo, rhi);
        if (rhi > rlo)                     /* dti_reduce_into records nothing for 0 */
            add(g, f0 + s, DT_EV_REDUCE, -1, "reduce-scatter", s, rc, rlo, rhi);
    }
}

/* dti_ring_allgather (allgather.c), frames f0 .. f0+n-2. */
static void ring_ag(gen *g, int f0)
{
    int r = g->rank, n = g->n;
    for (int s = 0; s < n - 1; s++) {
        int sc = dt_ring_ag_send_chunk(r, n, s), rc = dt_ring_ag_recv_chunk(r, n, s);
        add(g, f0 + s, DT_EV_SEND, dt_ring_right(r, n), "allgather", s, sc,
            chunk_lo(g, sc), chunk_lo(g, sc + 1));
        add(g, f0 + s, DT_EV_RECV, dt_ring_left(r, n), "allgather", s, rc,
            chunk_lo(g, rc), chunk_lo(g, rc + 1));
    }
}

static void allreduce_ring(gen *g)
{
    call_mark(g);
    ring_rs(g, 0);
    ring_ag(g, g->n - 1);
}

static void reduce_scatter_ring(gen *g) { call_mark(g); ring_rs(g, 0); }
static void allgather_ring(gen *g) { call_mark(g); ring_ag(g, 0); }

/* dt_allreduce_naive: workers' buffers into rank 0 one by one, then the sum back out. */
static void allreduce_naive(gen *g)
{
    int r = g->rank, n = g->n;
    call_mark(g);
    for (int s = 1; s < n; s++) {
        if (r == 0) {
            whole(g, s - 1, DT_EV_RECV, s, "reduce", s - 1);
            whole(g, s - 1, DT_EV_REDUCE, -1, "reduce", s - 1);
        } else if (r == s) {
            whole(g, s - 1, DT_EV_SEND, 0, "reduce", s - 1);
        }
    }
    for (int s = 1; s < n; s++) {
        int f = n - 1 + s - 1;
        if (r == 0)
            whole(g, f, DT_EV_SEND, s, "bcast", s - 1);
        else if (r == s)
            whole(g, f, DT_EV_RECV, 0, "bcast", s - 1);
    }
}

/* dt_bcast (binomial tree, root 0): round k is frame k. */
static void bcast_tree(gen *g)
{
    int r = g->rank, n = g->n, children[32];
    int nc = dt_tree_children(r, 0, n, children), mine = dt_tree_round(r, 0, n);
    call_mark(g);
    for (int k = 0; k < dt_log2_ceil(n); k++) {
        if (k == mine)
            whole(g, k, DT_EV_RECV, dt_tree_parent(r, 0, n), "bcast", k);
        for (int i = 0; i < nc; i++)
            if (dt_tree_round(children[i], 0, n) == k)
                whole(g, k, DT_EV_SEND, children[i], "bcast", k);
    }
}

/* dt_reduce: the bcast tree backwards; step t is round K-1-t. */
static void reduce_tree(gen *g)
{
    int r = g->rank, n = g->n, children[32], K = dt_log2_ceil(n);
    int nc = dt_tree_children(r, 0, n, children), mine = dt_tree_round(r, 0, n);
    call_mark(g);
    for (int t = 0; t < K; t++) {
        int k = K - 1 - t;
        for (int i = 0; i < nc; i++) {
            if (dt_tree_round(children[i], 0, n) != k)
                continue;
            whole(g, t, DT_EV_RECV, children[i], "reduce", t);
            whole(g, t, DT_EV_REDUCE, -1, "reduce", t);
        }
        if (k == mine)
            whole(g, t, DT_EV_SEND, dt_tree_parent(r, 0, n), "reduce", t);
    }
}

/* dt_allreduce_rd: fold (if n is no power of two), log2 p exchanges, unfold. */
static void allreduce_rd(gen *g)
{
    int r = g->rank, n = g->n;
    call_mark(g);
    if (n == 1)
        return;
    int active = dt_rd_vrank(r, n) >= 0, peer = dt_rd_fold_peer(r, n);
    int folding = dt_pow2_floor(n) != n, f = 0;
    if (folding) {
        if (peer >= 0 && !active) {
            whole(g, f, DT_EV_SEND, peer, "fold", 0);
        } else if (peer >= 0) {
            whole(g, f, DT_EV_RECV, peer, "fold", 0);
            whole(g, f, DT_EV_REDUCE, -1, "fold", 0);
        }
        f++;
    }
    for (int s = 0; s < dt_rd_steps(n); s++, f++) {
        if (!active)
            continue;
        int partner = dt_rd_partner(r, n, s);
        whole(g, f, DT_EV_SEND, partner, "exchange", s);
        whole(g, f, DT_EV_RECV, partner, "exchange", s);
        whole(g, f, DT_EV_REDUCE, -1, "exchange", s);
    }
    if (folding) {
        if (peer >= 0 && active)
            whole(g, f, DT_EV_SEND, peer, "unfold", 0);
        else if (peer >= 0)
            whole(g, f, DT_EV_RECV, peer, "unfold", 0);
    }
}

/* dt_alltoall (pairwise): steps 1..n-1 are frames 0..n-2; block j is chunk j. */
static void alltoall_pairwise(gen *g)
{
    int r = g->rank, n = g->n;
    call_mark(g);
    for (int s = 1; s < n; s++) {
        int dst = dt_a2a_send_peer(r, n, s), src = dt_a2a_recv_peer(r, n, s);
        add(g, s - 1, DT_EV_SEND, dst, "exchange", s, dst, chunk_lo(g, dst),
            chunk_lo(g, dst + 1));
        add(g, s - 1, DT_EV_RECV, src, "exchange", s, src, chunk_lo(g, src),
            chunk_lo(g, src + 1));
    }
}

/* dt_gather (binomial tree, root 0): a subtree's blocks v .. v+size-1 move at once. */
static void gather_tree(gen *g)
{
    int r = g->rank, n = g->n, children[32], K = dt_log2_ceil(n);
    int nc = dt_tree_children(r, 0, n, children), mine = dt_tree_round(r, 0, n);
    int size = dt_tree_subtree_size(r, 0, n);
    call_mark(g);
    for (int t = 0; t < K; t++) {
        int k = K - 1 - t;
        for (int i = 0; i < nc; i++) {
            if (dt_tree_round(children[i], 0, n) != k)
                continue;
            int c = children[i], cs = dt_tree_subtree_size(c, 0, n);
            add(g, t, DT_EV_RECV, c, "gather", t, c, chunk_lo(g, c), chunk_lo(g, c + cs));
        }
        if (k == mine)
            add(g, t, DT_EV_SEND, dt_tree_parent(r, 0, n), "gather", t, r, chunk_lo(g, r),
                chunk_lo(g, r + size));
    }
}

/* dt_scatter (binomial tree, root 0): the mirror of the gather, in bcast's rounds. */
static void scatter_tree(gen *g)
{
    int r = g->rank, n = g->n, children[32];
    int nc = dt_tree_children(r, 0, n, children), mine = dt_tree_round(r, 0, n);
    int size = dt_tree_subtree_size(r, 0, n);
    call_mark(g);
    for (int k = 0; k < dt_log2_ceil(n); k++) {
        if (k == mine)
            add(g, k, DT_EV_RECV, dt_tree_parent(r, 0, n), "scatter", k, r, chunk_lo(g, r),
                chunk_lo(g, r + size));
        for (int i = 0; i < nc; i++) {
            if (dt_tree_round(children[i], 0, n) != k)
                continue;
            int c = children[i], cs = dt_tree_subtree_size(c, 0, n);
            add(g, k, DT_EV_SEND, c, "scatter", k, c, chunk_lo(g, c), chunk_lo(g, c + cs));
        }
    }
}

/* ==== ring attention (model.h, "ring attention"; lesson 27's ring_pass) ==== */

/* Member j's block: under the plain cut part j of n (one chunk), under zig-zag parts j
 * and 2n-1-j of 2n (dt_cp_zigzag's rule, with dt_chunk_bounds' parts so that any count
 * will do). Writes the chunks' numbers into ch and returns how many. */
static int attn_block(int zigzag, int j, int n, int ch[2])
{
    ch[0] = j;
    ch[1] = 2 * n - 1 - j;
    return zigzag ? 2 : 1;
}

/* Elements [lo, hi) of chunk i of count cut into parts parts. */
static void attn_chunk(const gen *g, int parts, int i, long long *lo, long long *hi)
{
    size_t a, b;
    dt_chunk_bounds((size_t)g->count, parts, i, &a, &b);
    *lo = (long long)a;
    *hi = (long long)b;
}

/*   step s (frame s), rank r of n:
 *       attend   its queries to the block in hand, rank r-s's      (reduce, per chunk)
 *       send     that block to rank r+1                 s < n-1   (send, per chunk)
 *       receive  rank r-s-1's block from rank r-1       s < n-1   (recv, per chunk)
 * so after step s rank r has attended blocks r, r-1, ..., r-s and holds r-s-1. */
static void attention_ring(gen *g, int zigzag)
{
    int r = g->rank, n = g->n, parts = zigzag ? 2 * n : n, ch[2];
    long long lo, hi;
    call_mark(g);
    for (int s = 0; s < n; s++) {
        int src = (r - s + n) % n, next = (r - s - 1 + n) % n;
        for (int i = 0, nc = attn_block(zigzag, src, n, ch); i < nc; i++) {
            attn_chunk(g, parts, ch[i], &lo, &hi);
            if (hi > lo)
                add(g, s, DT_EV_REDUCE, -1, "ring", s, ch[i], lo, hi);
        }
        if (s == n - 1)
            break;                          /* the last block stays: nothing moves */
        for (int i = 0, nc = attn_block(zigzag, src, n, ch); i < nc; i++) {
            attn_chunk(g, parts, ch[i], &lo, &hi);
            add(g, s, DT_EV_SEND, dt_ring_right(r, n), "ring", s, ch[i], lo, hi);
        }
        for (int i = 0, nc = attn_block(zigzag, next, n, ch); i < nc; i++) {
            attn_chunk(g, parts, ch[i], &lo, &hi);
            add(g, s, DT_EV_RECV, dt_ring_left(r, n), "ring", s, ch[i], lo, hi);
        }
    }
}

static void attention_plain(gen *g) { attention_ring(g, 0); }
static void attention_zigzag(gen *g) { attention_ring(g, 1); }

static void (*const generators[])(gen *) = {
    allreduce_ring, reduce_scatter_ring, allgather_ring, allreduce_naive, bcast_tree,
    reduce_tree, allreduce_rd, alltoall_pairwise, gather_tree, scatter_tree,
    attention_plain, attention_zigzag
};

/* ==== the public functions ==== */

int dv_algo_trace(int algo, int nranks, long long count, dt_trace *t, char *err,
                  size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (algo < 0 || algo >= NALGOS) {
        snprintf(err, errlen, "there is no built-in algorithm number %d (0..%d)", algo,
                 NALGOS - 1);
        return -1;
    }
    if (nranks < 1 || nranks > DV_MAX_RANKS) {
        snprintf(err, errlen, "%s needs 1 to %d ranks, not %d", dv_algos[algo],
                 DV_MAX_RANKS, nranks);
        return -1;
    }
    if (count < 0) {
        snprintf(err, errlen, "the buffer cannot hold %lld elements", count);
        return -1;
    }
    if (generators[algo] == attention_zigzag && nranks > DV_MAX_CELLS / 2) {
        snprintf(err, errlen, "%s needs 1 to %d ranks (2N chunks, %d cells at most), not %d",
                 dv_algos[algo], DV_MAX_CELLS / 2, DV_MAX_CELLS, nranks);
        return -1;
    }
    t->version = DT_TRACE_VERSION;
    t->nranks = nranks;
    snprintf(t->program, sizeof t->program, "%s", dv_algos[algo]);
    gen g = { .t = t, .n = nranks, .count = count, .coll = algo_colls[algo] };
    /* every collective returns before dt_trace_call when there is nothing to move */
    for (g.rank = 0; g.rank < nranks && count > 0 && !g.failed; g.rank++)
        generators[algo](&g);
    if (g.failed) {
        dt_trace_free(t);
        memset(t, 0, sizeof *t);
        snprintf(err, errlen, "out of memory writing the schedule of %s", dv_algos[algo]);
        return -1;
    }
    return 0;
}

int dv_model_algo(dv_model *m, int algo, int nranks, long long count, char *err,
                  size_t errlen)
{
    dt_trace t;
    memset(m, 0, sizeof *m);
    if (dv_algo_trace(algo, nranks, count, &t, err, errlen) != 0)
        return -1;
    if (dv_model_build(m, &t, err, errlen) != 0)
        return -1;
    char size[32];
    dt_format_bytes((double)count * ESIZE, size, sizeof size);
    m->from_trace = 0;
    snprintf(m->title, sizeof m->title, "%s, %d rank%s, %s", dv_algos[algo], nranks,
             nranks == 1 ? "" : "s", size);
    return 0;
}

/* ==== what the cost model says: dv_formula ==== */

/* Elements in parts i .. i+k-1 of count cut into n parts (dt_chunk_bounds). */
static double parts(long long count, int n, int i, int k)
{
    size_t lo, hi, end = (size_t)count;
    dt_chunk_bounds((size_t)count, n, i, &lo, &hi);
    if (i + k < n)
        dt_chunk_bounds((size_t)count, n, i + k, &end, &hi);
    return (double)(end - lo);
}

/* The root of a rooted call: the viewer's, or (reduce, gather) the rank that received
 * and never sent. The first member when nothing says. */
static int call_root(const dv_model *m, const dv_call *c)
{
    if (c->root >= 0 && c->root < m->nranks)
        return c->root;
    dv_mask got = 0, gave = 0;
    for (int f = 0; f < c->nframes; f++) {
        const dv_frame *fr = &m->frames[c->first_frame + f];
        for (int i = 0; i < fr->nmsg; i++) {
            const dv_msg *g = &m->msgs[fr->first_msg + i];
            if (g->src >= 0 && g->src < m->nranks && g->dst >= 0 && g->dst < m->nranks) {
                gave |= (dv_mask)1 << g->src;
                got |= (dv_mask)1 << g->dst;
            }
        }
    }
    for (int r = 0; r < m->nranks; r++)
        if ((got >> r & 1) && !(gave >> r & 1))
            return r;
    return __builtin_ctzll(c->members | (dv_mask)1 << 63);
}

int dv_formula(const dv_model *m, int call, double *expect, char *text, size_t len)
{
    if (text != NULL && len > 0)
        text[0] = '\0';
    if (m == NULL || call < 0 || call >= m->ncalls)
        return 0;
    /* the cost model counts in the communicator: N members, rank r the r-th of them,
     * and x[r] what it sends, copied to expect[] by rank at the end */
    const dv_call *c = &m->calls[call];
    int N = c->size > 0 ? c->size : 1, root = dv_call_index(c, call_root(m, c)), kids[32];
    long long n = c->count;
    double E = c->esize, S = (double)n * E, nominal = 0, x[DV_MAX_RANKS] = { 0 };
    char s[32], v[32], on[64];
    const char *fmt = NULL;
    root = root < 0 ? 0 : root;
    for (int r = 0; r < m->nranks; r++)
        expect[r] = 0;
    if (strcmp(c->coll, "allreduce_ring") == 0 ||
        strcmp(c->coll, "reduce_scatter_ring") == 0 || strcmp(c->coll, "allgather_ring") == 0) {
        int both = strcmp(c->coll, "allreduce_ring") == 0;
        int rs = both || c->coll[0] == 'r', ag = both || c->coll[0] == 'a';
        for (int r = 0; r < N; r++)
            for (int st = 0; st < N - 1; st++)
                x[r] += E * ((rs ? parts(n, N, dt_ring_rs_send_chunk(r, N, st), 1) : 0) +
                             (ag ? parts(n, N, dt_ring_ag_send_chunk(r, N, st), 1) : 0));
        nominal = (rs + ag) * (N - 1) * S / N;
        fmt = rs && ag ? "ring: each rank sends 2(N-1)/N x S = %s (S = %s%s)"
                       : "ring: each rank sends (N-1)/N x S = %s (S = %s%s)";
    } else if (strcmp(c->coll, "allreduce_naive") == 0 || strcmp(c->coll, "bcast_naive") == 0) {
        int bc = c->coll[0] == 'b', top = bc ? root : 0;    /* the naive allreduce: rank 0 */
        for (int r = 0; r < N; r++)
            x[r] = r == top ? (N - 1) * S : bc ? 0 : S;
        nominal = (N - 1) * S;
        fmt = bc ? "naive: the root sends (N-1) x S = %s (S = %s%s)"
                 : "naive: rank 0 sends (N-1) x S = %s, the others S = %s%s";
    } else if (strcmp(c->coll, "bcast_tree") == 0 || strcmp(c->coll, "reduce_tree") == 0) {
        int up = c->coll[0] == 'r';
        for (int r = 0; r < N; r++)
            x[r] = up ? (r == root ? 0 : S) : dt_tree_children(r, root, N, kids) * S;
        nominal = up ? S : dt_log2_ceil(N) * S;
        fmt = up ? "tree: every rank but the root sends S once = %s (S = %s%s)"
                 : "tree: S to each child; the root ceil(log2 N) x S = %s (S = %s%s)";
    } else if (strcmp(c->coll, "gather_tree") == 0 || strcmp(c->coll, "scatter_tree") == 0) {
        int up = c->coll[0] == 'g';
        for (int r = 0; r < N; r++) {
            int v = (r - root + N) % N, nk = dt_tree_children(r, root, N, kids);
            if (up && r != root)
                x[r] = E * parts(n, N, v, dt_tree_subtree_size(r, root, N));
            for (int i = 0; !up && i < nk; i++)
                x[r] += E * parts(n, N, (kids[i] - root + N) % N,
                                  dt_tree_subtree_size(kids[i], root, N));
        }
        nominal = (N - 1) * S / N;
        fmt = up ? "tree: the root gets (N-1)/N x S = %s up the subtrees (S = %s%s)"
                 : "tree: the root sends (N-1)/N x S = %s down the subtrees (S = %s%s)";
    } else if (strcmp(c->coll, "allreduce_rd") == 0) {
        for (int r = 0; r < N && N > 1; r++) {
            int active = dt_rd_vrank(r, N) >= 0, folded = dt_rd_fold_peer(r, N) >= 0;
            x[r] = active ? (dt_rd_steps(N) + folded) * S : S;
        }
        nominal = dt_rd_steps(N) * S;
        fmt = "rd: each of the p = 2^k <= N active ranks sends k x S = %s (S = %s%s)";
    } else if (c->ring_attn) {
        /* a rank passes on every block but its right neighbour's, which would come back */
        dv_mask own[DV_MAX_RANKS] = { 0 };
        int rank_of[DV_MAX_RANKS], v = 0;
        for (int r = 0; r < m->nranks; r++)
            if (dv_call_index(c, r) >= 0)
                rank_of[v++] = r;
        for (int q = 0; q < N && c->init != NULL; q++)
            for (int k = 0; k < c->ncells; k++)
                if (c->init[rank_of[q] * c->ncells + k] >> rank_of[q] & 1)
                    own[q] |= (dv_mask)1 << k;
        for (int q = 0; q < N && N > 1; q++) {
            double keep = 0;
            for (int k = 0; k < c->ncells; k++)
                if (own[(q + 1) % N] >> k & 1)
                    keep += (double)(c->cell_lo[k + 1] - c->cell_lo[k]);
            x[q] = S - E * keep;
        }
        nominal = (N - 1) * S / N;
        fmt = "ring attention: each rank passes on N-1 of the N blocks, (N-1)/N x S = %s "
              "(S = %s, every position's K and V%s)";
    } else if (strcmp(c->coll, "alltoall_pairwise") == 0) {
        for (int r = 0; r < N; r++)
            x[r] = S - E * parts(n, N, r, 1);
        nominal = (N - 1) * S / N;
        fmt = "pairwise: each rank sends (N-1)/N x S = %s (S = %s%s)";
    }
    if (fmt == NULL)
        return 0;
    for (int r = 0; r < m->nranks; r++)
        if (dv_call_index(c, r) >= 0)
            expect[r] = x[dv_call_index(c, r)];
    dt_format_bytes(nominal, v, sizeof v);
    dt_format_bytes(S, s, sizeof s);
    on[0] = '\0';
    if (N < m->nranks)                                  /* a sub-communicator */
        snprintf(on, sizeof on, ", N = %d", N);
    if (text != NULL && len > 0)
        snprintf(text, len, fmt, v, s, on);
    return 1;
}

/* ==== one sentence per phase: dv_phase_text ==== */

static const struct { const char *coll, *phase, *text; } phase_texts[] = {
    { "allreduce_ring", "reduce-scatter",
      "each rank sends one chunk to its right neighbour, which adds it to its own" },
    { "allreduce_ring", "allgather",
      "each rank passes a finished chunk on to its right neighbour, which keeps it" },
    { "reduce_scatter_ring", "reduce-scatter",
      "each rank sends one chunk to its right neighbour, which adds it to its own" },
    { "allgather_ring", "allgather",
      "each rank passes the block it got last on to its right neighbour" },
    { "allreduce_naive", "reduce",
      "one worker sends its whole buffer to rank 0, which adds it to the sum" },
    { "allreduce_naive", "bcast", "rank 0 sends the finished sum to one worker at a time" },
    { "allreduce_rd", "fold",
      "the first ranks pair up: each even one hands its buffer to the odd one" },
    { "allreduce_rd", "exchange",
      "partners swap whole buffers and both add: each group of sums doubles" },
    { "allreduce_rd", "unfold", "the odd ranks of the folded pairs hand the result back" },
    { "bcast_tree", "bcast", "every rank that has the data sends it to one more: holders double" },
    { "bcast_naive", "bcast", "the root sends the whole buffer to the next rank in turn" },
    { "reduce_tree", "reduce",
      "ranks send their partial sums up the tree; each parent adds them to its own" },
    { "gather_tree", "gather",
      "ranks send their subtree's blocks up the tree; each parent appends them" },
    { "scatter_tree", "scatter",
      "each rank sends a child the blocks of that child's whole subtree" },
    { "alltoall_pairwise", "exchange",
      "at step s each rank r sends its block for rank r+s to it and gets r-s's block for r" },
    { "attention_ring", "ring",
      "each rank attends its queries to the K/V block in hand while it passes that block "
      "on to its right neighbour" },
};

const char *dv_phase_text(const char *coll, const char *phase)
{
    for (size_t i = 0; coll && phase && i < sizeof phase_texts / sizeof phase_texts[0]; i++)
        if (strcmp(coll, phase_texts[i].coll) == 0 && strcmp(phase, phase_texts[i].phase) == 0)
            return phase_texts[i].text;
    return "";
}

/* What a finished call has done, by coll. */
static const struct { const char *coll, *text; } done_texts[] = {
    { "allreduce_ring", "done: every rank holds the sum of every rank's buffer" },
    { "allreduce_naive", "done: every rank holds the sum of every rank's buffer" },
    { "allreduce_rd", "done: every rank holds the sum of every rank's buffer" },
    { "reduce_scatter_ring", "done: rank r's chunk r holds the sum of every rank's chunk r" },
    { "allgather_ring", "done: every rank holds every rank's block" },
    { "bcast_tree", "done: every rank holds the root's buffer" },
    { "bcast_naive", "done: every rank holds the root's buffer" },
    { "reduce_tree", "done: the root holds the sum of every rank's buffer" },
    { "gather_tree", "done: the root holds every rank's block, in rank order" },
    { "scatter_tree", "done: every rank holds its own block of the root's buffer" },
    { "alltoall_pairwise", "done: block j of rank r's receive buffer is block r of rank j's "
      "send buffer: the blocks are transposed" },
    { "attention_ring", "done: every rank's queries have met every key block; the outputs "
      "are finished, o / l (and lse = m + log l kept for backward)" },
};

void dv_step_text(const dv_model *m, int pos, char *buf, size_t len)
{
    int call, k;
    if (buf == NULL || len == 0)
        return;
    buf[0] = '\0';
    dv_pos_split(m, pos, &call, &k);
    if (call < 0)
        return;
    const dv_call *c = &m->calls[call];
    if (k >= c->nframes) {
        for (size_t i = 0; i < sizeof done_texts / sizeof done_texts[0]; i++)
            if (strcmp(c->coll, done_texts[i].coll) == 0)
                snprintf(buf, len, "%s", done_texts[i].text);
        return;
    }
    const dv_frame *f = &m->frames[c->first_frame + k];
    /* alltoall: the distance its arrows go, said in the words of the arrows themselves */
    int N = c->size, d = -1;
    for (int i = 0; c->from_sender && i < f->nmsg && d != -2; i++) {
        const dv_msg *g = &m->msgs[f->first_msg + i];
        int a = dv_call_index(c, g->src), b = dv_call_index(c, g->dst);
        int di = a >= 0 && b >= 0 ? (b - a + N) % N : -2;
        d = d == -1 || d == di ? di : -2;
    }
    if (c->ring_attn && f->nmsg == 0)
        snprintf(buf, len, "the last step: each rank attends its queries to the block in "
                 "hand, and nothing moves");
    else if (d > 0)
        snprintf(buf, len, "each rank r sends its block for rank r+%d to that rank, and "
                 "gets from rank r-%d its block for r (ranks counted mod %d)", d, d, N);
    else
        snprintf(buf, len, "%s", dv_phase_text(c->coll, f->phase));
}
