/* Tests of dtviz's model (viz/model.h): no window, no MPI.
 *
 * The model says, at every position, which ranks' contributions each cell of each rank's
 * buffer holds. It is held here to a reference written from the definitions of the
 * algorithms (the ring, the binomial tree, recursive doubling, pairwise exchange), not
 * from lib/schedule: only dt_chunk_bounds is shared. For every built-in algorithm, at
 * 1, 2, 3, 4, 5, 7, 16 and 64 ranks, on counts that do not divide evenly and counts
 * below the rank count (empty chunks), the tests check every frame's phase, step and
 * messages, the masks at every position, the bytes each rank sends against the
 * reference and the formula, and the arithmetic of positions. Then the traces that the
 * lessons and build/train wrote, against the built-in algorithm at the same rank count
 * and count; and hand-written traces that the viewer must survive. Then what a new user
 * read wrong once (issue 17): the counters dv_pos_describe words, the colours (no event
 * kind or arrow near a rank's), alltoall's send buffers, calls on sub-communicators, and
 * a training mode's own messages, which are no call.
 *
 *   build/tests/viz_model                     built-ins and hand-written traces
 *   DTVIZ_TRACES=DIR build/tests/viz_model    also DIR/NN_lesson-N.trace, DIR/train-*.trace
 *                                             (CK_FORK=no to debug under gdb)
 */
#include <check.h>
#include "unit.h"
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "draw.h"
#include "model.h"
#include "schedule.h"
#include "timetable.h"

/* Fails with a message only when cond is false (ck_assert_msg is slow inside loops). */
#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

static const int RANKS[] = { 1, 2, 3, 4, 5, 7, 16, 64 };
#define NRANKS_TESTED ((int)(sizeof RANKS / sizeof RANKS[0]))
#define NALGO 12
#define NREF 10         /* the collectives; ring attention (10, 11) has its own test */
#define ZIGZAG 11

/* The built-ins in the order model.h promises, and their colls. */
static const char *const ALGO[NALGO] = {
    "ring-allreduce", "reduce-scatter", "allgather", "naive-allreduce", "tree-bcast",
    "tree-reduce", "rd-allreduce", "alltoall", "tree-gather", "tree-scatter",
    "ring-attention", "ring-attention-zigzag"
};
static const char *const COLL[NALGO] = {
    "allreduce_ring", "reduce_scatter_ring", "allgather_ring", "allreduce_naive",
    "bcast_tree", "reduce_tree", "allreduce_rd", "alltoall_pairwise", "gather_tree",
    "scatter_tree", "attention_ring", "attention_ring"
};

static dv_mask bit(int r) { return (dv_mask)1 << r; }
static dv_mask all_ranks(int n) { return n >= 64 ? ~(dv_mask)0 : bit(n) - 1; }

/* ==== the reference: each algorithm from its definition ==== */

typedef struct {
    int src, dst;
    long long lo, hi;      /* elements of the receiver's buffer */
    int add;               /* 1: the receiver adds it in; 0: copies it */
    dv_mask carry;         /* 0: the sender's masks of [lo, hi); else this mask */
    long long slo, shi;    /* elements of the sender's buffer it comes from */
} ref_msg;

typedef struct { const char *phase; int step, first, n; } ref_frame;

typedef struct {
    int N, algo;
    long long count;
    dv_class cls;
    ref_frame fr[2 * DV_MAX_RANKS + 4];
    int nf;
    ref_msg *msg;
    int nmsg, cap;
    double sent[DV_MAX_RANKS];       /* elements each rank sends in the call */
    long long b[4 * DV_MAX_RANKS];   /* cell boundaries, ascending, no repeats */
    int nb;
} ref;

static long long blk_lo(const ref *R, int i)    /* chunk i starts here; chunk N at count */
{
    size_t lo, hi;
    if (i >= R->N)
        return R->count;
    dt_chunk_bounds((size_t)R->count, R->N, i, &lo, &hi);
    return (long long)lo;
}

static void frame(ref *R, const char *phase, int step)
{
    R->fr[R->nf++] = (ref_frame){ phase, step, R->nmsg, 0 };
}

/* A message of the current frame; sends counts what the sender's send event moves. */
static void msg(ref *R, int src, int dst, long long lo, long long hi, int add,
                dv_mask carry, long long sends)
{
    R->sent[src] += (double)sends;
    if (lo == hi)                     /* an empty chunk: nothing to show */
        return;
    if (R->nmsg == R->cap) {
        R->cap = R->cap ? 2 * R->cap : 64;
        R->msg = realloc(R->msg, (size_t)R->cap * sizeof *R->msg);
    }
    R->msg[R->nmsg++] = (ref_msg){ src, dst, lo, hi, add, carry, lo, hi };
    R->fr[R->nf - 1].n++;
}

static void whole(ref *R, int src, int dst, int add)
{
    msg(R, src, dst, 0, R->count, add, 0, R->count);
}

static int md(int a, int n) { return ((a % n) + n) % n; }

/* Ring reduce-scatter: at step s rank r sends chunk (r-s-1) mod N right, which adds it.
 * After N-1 steps rank r's chunk r holds every rank. */
static void ring_rs(ref *R)
{
    for (int s = 0; s < R->N - 1; s++) {
        frame(R, "reduce-scatter", s);
        for (int r = 0; r < R->N; r++) {
            int c = md(r - s - 1, R->N);
            msg(R, r, (r + 1) % R->N, blk_lo(R, c), blk_lo(R, c + 1), 1, 0,
                blk_lo(R, c + 1) - blk_lo(R, c));
        }
    }
}

/* Ring allgather: rank r starts with chunk r, passes on at step s the chunk it got at
 * step s-1, i.e. chunk (r-s) mod N; the receiver copies it. */
static void ring_ag(ref *R)
{
    for (int s = 0; s < R->N - 1; s++) {
        frame(R, "allgather", s);
        for (int r = 0; r < R->N; r++) {
            int c = md(r - s, R->N);
            msg(R, r, (r + 1) % R->N, blk_lo(R, c), blk_lo(R, c + 1), 0, 0,
                blk_lo(R, c + 1) - blk_lo(R, c));
        }
    }
}

/* Binomial tree, root 0: v > 0 hangs under v minus its lowest set bit, and gets its data
 * in round K-1-log2(lowest bit), K = ceil(log2 N); its subtree is v .. v+lowbit-1. */
static int log2c(int n) { int k = 0; while ((1 << k) < n) k++; return k; }
static int tparent(int v) { return v & (v - 1); }
static int tround(int v, int N) { return log2c(N) - 1 - log2c(v & -v); }
static int tsize(int v, int N) { return (v & -v) < N - v ? (v & -v) : N - v; }

/* Recursive doubling: p = largest power of two <= N; ranks 2i, 2i+1 (i < N-p) fold into
 * the odd one; active ranks are numbered in order and swap with vrank XOR 2^s. */
static int rd_vrank(int r, int extra)
{
    return r < 2 * extra ? (r % 2 ? r / 2 : -1) : r - extra;
}
static int rd_rank(int v, int extra) { return v < extra ? 2 * v + 1 : v + extra; }

/* Adds x to the cell boundaries R->b, kept ascending without repeats. */
static void add_bound(ref *R, long long x)
{
    int j = 0;
    while (j < R->nb && R->b[j] < x)
        j++;
    if (j < R->nb && R->b[j] == x)
        return;
    REQUIRE(R->nb < (int)(sizeof R->b / sizeof R->b[0]), "reference: too many cells");
    memmove(R->b + j + 1, R->b + j, (size_t)(R->nb - j) * sizeof R->b[0]);
    R->b[j] = x;
    R->nb++;
}

static void ref_build(ref *R, int algo, int N, long long count)
{
    free(R->msg);
    memset(R, 0, sizeof *R);
    R->N = N;
    R->algo = algo;
    R->count = count;
    int K = log2c(N), p = 1;
    while (2 * p <= N)
        p *= 2;
    switch (algo) {
    case 0: ring_rs(R); ring_ag(R); break;
    case 1: ring_rs(R); break;
    case 2: ring_ag(R); break;
    case 3:
        for (int s = 1; s < N; s++) { frame(R, "reduce", s - 1); whole(R, s, 0, 1); }
        for (int s = 1; s < N; s++) { frame(R, "bcast", s - 1); whole(R, 0, s, 0); }
        break;
    case 4:
        for (int k = 0; k < K; k++) {
            frame(R, "bcast", k);
            for (int v = 1; v < N; v++)
                if (tround(v, N) == k)
                    whole(R, tparent(v), v, 0);
        }
        break;
    case 5:
        for (int t = 0; t < K; t++) {
            frame(R, "reduce", t);
            for (int v = 1; v < N; v++)
                if (tround(v, N) == K - 1 - t)
                    whole(R, v, tparent(v), 1);
        }
        break;
    case 6:
        if (N == 1)
            break;
        if (p != N) {
            frame(R, "fold", 0);
            for (int i = 0; i < N - p; i++)
                whole(R, 2 * i, 2 * i + 1, 1);
        }
        for (int s = 0; (1 << s) < p; s++) {
            frame(R, "exchange", s);
            for (int r = 0; r < N; r++)
                if (rd_vrank(r, N - p) >= 0)
                    whole(R, r, rd_rank(rd_vrank(r, N - p) ^ (1 << s), N - p), 1);
        }
        if (p != N) {
            frame(R, "unfold", 0);
            for (int i = 0; i < N - p; i++)
                whole(R, 2 * i + 1, 2 * i, 0);
        }
        break;
    case 7:   /* step s: r's block for r+s (send buffer block r+s) lands in the
               * receiver's block r, as {r} */
        for (int s = 1; s < N; s++) {
            frame(R, "exchange", s);
            for (int r = 0; r < N; r++) {
                int d = (r + s) % N, n = R->nmsg;
                msg(R, r, d, blk_lo(R, r), blk_lo(R, r + 1), 0, bit(r),
                    blk_lo(R, d + 1) - blk_lo(R, d));
                if (R->nmsg > n) {
                    R->msg[n].slo = blk_lo(R, d);
                    R->msg[n].shi = blk_lo(R, d + 1);
                }
            }
        }
        break;
    case 8:   /* a subtree's blocks go up at once */
    case 9:   /* and come down in bcast's rounds */
        for (int t = 0; t < K; t++) {
            frame(R, algo == 8 ? "gather" : "scatter", t);
            for (int v = 1; v < N; v++) {
                long long lo = blk_lo(R, v), hi = blk_lo(R, v + tsize(v, N));
                if (algo == 8 && tround(v, N) == K - 1 - t)
                    msg(R, v, tparent(v), lo, hi, 0, 0, hi - lo);
                if (algo == 9 && tround(v, N) == t)
                    msg(R, tparent(v), v, lo, hi, 0, 0, hi - lo);
            }
        }
        break;
    }
    R->cls = algo == 4 || algo == 9 ? DV_CLASS_ROOTED
           : algo == 2 || algo == 7 || algo == 8 ? DV_CLASS_BLOCKS : DV_CLASS_REDUCE;

    /* cells: the ends of the buffer, of every message, and of every block (blocks) */
    add_bound(R, 0);
    add_bound(R, count);
    for (int i = 0; i < R->nmsg; i++) {
        add_bound(R, R->msg[i].lo);
        add_bound(R, R->msg[i].hi);
    }
    for (int i = 1; R->cls == DV_CLASS_BLOCKS && i < N; i++)
        add_bound(R, blk_lo(R, i));
}

/* The masks before the call: st[r * (nb-1) + j] for interval j = [b[j], b[j+1]). */
static void ref_init(const ref *R, dv_mask *st)
{
    int ni = R->nb - 1;
    for (int r = 0; r < R->N; r++)
        for (int j = 0; j < ni; j++) {
            dv_mask m = 0;
            if (R->cls == DV_CLASS_REDUCE)
                m = bit(r);
            else if (R->cls == DV_CLASS_ROOTED)
                m = r == 0 ? bit(0) : 0;
            else if (R->b[j] >= blk_lo(R, r) && R->b[j + 1] <= blk_lo(R, r + 1))
                m = bit(r);
            st[r * ni + j] = m;
        }
}

/* Frame f, every message reading the masks from before the frame. */
static void ref_step(const ref *R, int f, dv_mask *st, dv_mask *old)
{
    int ni = R->nb - 1;
    memcpy(old, st, (size_t)R->N * ni * sizeof *st);
    for (int i = R->fr[f].first; i < R->fr[f].first + R->fr[f].n; i++) {
        const ref_msg *q = &R->msg[i];
        for (int j = 0; j < ni; j++) {
            if (R->b[j] < q->lo || R->b[j + 1] > q->hi)
                continue;
            dv_mask in = q->carry ? q->carry : old[q->src * ni + j];
            st[q->dst * ni + j] = q->add ? st[q->dst * ni + j] | in : in;
        }
    }
}

/* ==== checks any model must pass ==== */

/* The arrays hang together: calls own consecutive frames, frames consecutive messages,
 * every index and rank in range, cells ascending. */
static void check_struct(const dv_model *m, const char *what)
{
    REQUIRE(m->nranks >= 1 && m->nranks <= DV_MAX_RANKS, "%s: nranks %d", what, m->nranks);
    REQUIRE(m->t_end > m->t_begin, "%s: t_end %g <= t_begin %g", what, m->t_end, m->t_begin);
    int f = 0, q = 0, pos = 0;
    for (int c = 0; c < m->ncalls; c++) {
        const dv_call *C = &m->calls[c];
        REQUIRE(C->first_frame == f && C->nframes >= 0 && C->first_pos == pos,
                "%s: call %d starts at frame %d (want %d), position %d (want %d)", what, c,
                C->first_frame, f, C->first_pos, pos);
        REQUIRE(C->ncells >= 1 && C->ncells <= DV_MAX_CELLS, "%s: call %d has %d cells",
                what, c, C->ncells);
        REQUIRE(C->cell_lo[C->ncells] == C->count, "%s: call %d: cells end at %lld, count "
                "%lld", what, c, C->cell_lo[C->ncells], C->count);
        for (int i = 0; i < C->ncells; i++)
            REQUIRE(C->cell_lo[i] <= C->cell_lo[i + 1], "%s: call %d: cell %d runs "
                    "backwards", what, c, i);
        REQUIRE(C->init != NULL, "%s: call %d has no init masks", what, c);
        REQUIRE(C->members != 0 && (C->members & ~all_ranks(m->nranks)) == 0 &&
                C->size == __builtin_popcountll(C->members), "%s: call %d: members %#llx, "
                "size %d", what, c, (unsigned long long)C->members, C->size);
        for (int r = 0; r < m->nranks; r++)
            for (int i = 0; i < C->ncells && !(C->members >> r & 1); i++)
                REQUIRE(C->init[r * C->ncells + i] == 0, "%s: call %d: rank %d is no member "
                        "but holds %#llx", what, c, r,
                        (unsigned long long)C->init[r * C->ncells + i]);
        REQUIRE(C->cls != DV_CLASS_ROOTED || (C->root >= 0 && C->root < m->nranks),
                "%s: call %d is rooted at %d", what, c, C->root);
        for (int k = 0; k < C->nframes; k++, f++) {
            const dv_frame *F = &m->frames[f];
            REQUIRE(F->call == c && F->first_msg == q && F->nmsg >= 0, "%s: frame %d: "
                    "call %d, first message %d (want %d, %d)", what, f, F->call,
                    F->first_msg, c, q);
            REQUIRE(memchr(F->phase, '\0', sizeof F->phase) != NULL, "%s: frame %d: phase "
                    "not terminated", what, f);
            for (int i = 0; i < F->nmsg; i++, q++) {
                const dv_msg *M = &m->msgs[q];
                REQUIRE(M->src >= 0 && M->src < m->nranks && M->dst >= 0 &&
                        M->dst < m->nranks && M->c0 >= 0 && M->c0 <= M->c1 &&
                        M->c1 <= C->ncells && M->s0 >= 0 && M->s0 <= M->s1 &&
                        M->s1 <= C->ncells, "%s: message %d: %d -> %d, cells [%d, %d) from "
                        "[%d, %d) of %d", what, q, M->src, M->dst, M->c0, M->c1, M->s0,
                        M->s1, C->ncells);
                REQUIRE((C->members >> M->src & 1) && (C->members >> M->dst & 1), "%s: "
                        "message %d: %d -> %d, but the call's members are %#llx", what, q,
                        M->src, M->dst, (unsigned long long)C->members);
            }
        }
        pos += C->nframes + 1;
    }
    REQUIRE(f == m->nframes && q == m->nmsgs, "%s: %d frames and %d messages used of %d "
            "and %d", what, f, q, m->nframes, m->nmsgs);
    REQUIRE(m->npos == (m->ncalls ? pos : 1), "%s: npos %d, want %d", what, m->npos,
            m->ncalls ? pos : 1);
}

/* Positions: split walks the calls in order; time and at_time agree; masks never lose a
 * bit from one position to the next in a reduction (keep_bits); bytes sent only grow;
 * strict: times increase. (Not in a real trace: ranks run ahead, so a frame, or the next
 * call, can begin before the one before it has ended everywhere.) */
static void check_positions(const dv_model *m, int strict, int keep_bits, const char *what)
{
    int c, k;
    dv_pos_split(m, -5, &c, &k);
    REQUIRE(m->ncalls ? (c == 0 && k == 0) : c == -1, "%s: split(-5) = %d,%d", what, c, k);
    dv_pos_split(m, m->npos + 7, &c, &k);
    REQUIRE(m->ncalls == 0 || (c == m->ncalls - 1 && k == m->calls[c].nframes),
            "%s: split(npos+7) = %d,%d", what, c, k);
    double *time = malloc((size_t)m->npos * sizeof *time);
    for (int p = 0, wc = 0, wk = 0; p < m->npos; p++) {
        dv_pos_split(m, p, &c, &k);
        if (m->ncalls) {
            REQUIRE(c == wc && k == wk, "%s: position %d is %d,%d, want %d,%d", what, p, c,
                    k, wc, wk);
            if (++wk > m->calls[wc].nframes) { wc++; wk = 0; }
        }
        time[p] = dv_pos_time(m, p);
        REQUIRE(isfinite(time[p]), "%s: position %d: time %g", what, p, time[p]);
        REQUIRE(!strict || p == 0 || time[p] > time[p - 1], "%s: time goes from %.9g at "
                "position %d to %.9g at %d", what, time[p - 1], p - 1, time[p], p);
    }
    for (int p = 0; p < m->npos; p++) {
        int want = 0;                        /* the last position whose time <= t */
        for (int q = 0; q < m->npos; q++)
            if (time[q] <= time[p])
                want = q;
        int got = dv_pos_at_time(m, time[p]);
        REQUIRE(got == want, "%s: at_time(time(%d) = %.9g) = %d, want %d", what, p, time[p],
                got, want);
    }
    REQUIRE(dv_pos_at_time(m, time[0] - 1e9) == 0, "%s: at_time(-inf) != 0", what);
    REQUIRE(dv_pos_at_time(m, m->t_end + 1e9) == m->npos - 1, "%s: at_time(+inf) != last",
            what);
    free(time);

    for (c = 0; c < m->ncalls; c++) {
        const dv_call *C = &m->calls[c];
        size_t n = (size_t)m->nranks * C->ncells;
        dv_mask *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        double sa[DV_MAX_RANKS], sb[DV_MAX_RANKS];
        dv_state(m, c, 0, a);
        REQUIRE(memcmp(a, C->init, n * sizeof *a) == 0, "%s: call %d: state at 0 != init",
                what, c);
        dv_bytes_sent(m, c, 0, sa);
        for (int r = 0; r < m->nranks; r++)
            REQUIRE(sa[r] == 0, "%s: call %d: rank %d sent %g before any frame", what, c, r,
                    sa[r]);
        for (k = 1; k <= C->nframes; k++) {
            dv_state(m, c, k, b);
            dv_bytes_sent(m, c, k, sb);
            for (size_t i = 0; i < n; i++)
                REQUIRE(!keep_bits || C->cls != DV_CLASS_REDUCE || (a[i] & ~b[i]) == 0,
                        "%s: call %d (%s): rank %zu cell %zu loses bits at k = %d: %#llx -> "
                        "%#llx", what, c, C->coll, i / C->ncells, i % C->ncells, k,
                        (unsigned long long)a[i], (unsigned long long)b[i]);
            for (int r = 0; r < m->nranks; r++)
                REQUIRE(sb[r] >= sa[r] && isfinite(sb[r]), "%s: call %d: rank %d's bytes go "
                        "from %g to %g at k = %d", what, c, r, sa[r], sb[r], k);
            memcpy(a, b, n * sizeof *a);
            memcpy(sa, sb, sizeof sa);
        }
        double expect[DV_MAX_RANKS];
        char text[256];
        if (dv_formula(m, c, expect, text, sizeof text))
            for (int r = 0; r < m->nranks; r++)
                REQUIRE(isfinite(expect[r]) && expect[r] >= 0, "%s: call %d: formula says "
                        "rank %d sends %g", what, c, r, expect[r]);
        free(a);
        free(b);
    }
}

/* Call c of m against the reference: class, cells, frames, messages, masks at every
 * position, bytes (elements of esize bytes) against the reference and the formula. */
static void check_call(const dv_model *m, int c, const ref *R, double esize,
                       const char *what)
{
    const dv_call *C = &m->calls[c];
    int N = R->N, ni = R->nb - 1;
    REQUIRE(C->cls == R->cls, "%s: class %d, want %d", what, C->cls, R->cls);
    REQUIRE(C->cls != DV_CLASS_ROOTED || C->root == 0, "%s: root %d, want 0", what, C->root);
    REQUIRE(C->count == R->count, "%s: count %lld, want %lld", what, C->count, R->count);
    REQUIRE(C->ncells == ni, "%s: %d cells, want %d", what, C->ncells, ni);
    for (int j = 0; j <= ni; j++)
        REQUIRE(C->cell_lo[j] == R->b[j], "%s: cell %d starts at %lld, want %lld", what, j,
                C->cell_lo[j], R->b[j]);
    REQUIRE(C->nframes == R->nf, "%s: %d frames, want %d", what, C->nframes, R->nf);

    for (int k = 0; k < R->nf; k++) {
        const dv_frame *F = &m->frames[C->first_frame + k];
        const ref_frame *G = &R->fr[k];
        REQUIRE(strcmp(F->phase, G->phase) == 0 && F->step == G->step, "%s: frame %d is "
                "%s %d, want %s %d", what, k, F->phase, F->step, G->phase, G->step);
        REQUIRE(dv_phase_text(C->coll, F->phase)[0] != '\0', "%s: no text for phase %s",
                what, F->phase);
        int matched = 0;
        unsigned char used[4 * DV_MAX_RANKS] = { 0 };    /* each reference message once */
        REQUIRE(G->n <= (int)sizeof used, "reference: %d messages in a frame", G->n);
        for (int i = 0; i < F->nmsg; i++) {
            const dv_msg *M = &m->msgs[F->first_msg + i];
            if (M->c0 == M->c1)                  /* an empty chunk: not compared */
                continue;
            long long lo = C->cell_lo[M->c0], hi = C->cell_lo[M->c1];
            int found = 0;
            for (int j = G->first; j < G->first + G->n && !found; j++) {
                const ref_msg *q = &R->msg[j];
                found = !used[j - G->first] && q->src == M->src && q->dst == M->dst &&
                        q->lo == lo && q->hi == hi && q->add == M->add;
                used[j - G->first] |= found;
                if (found)
                    REQUIRE(esize == 0 || fabs(M->nbytes - (double)(hi - lo) * esize) < 0.5,
                            "%s: frame %d: %d -> %d carries %g bytes, want %g", what, k,
                            M->src, M->dst, M->nbytes, (double)(hi - lo) * esize);
                /* where it comes from: alltoall's send buffer block for the receiver */
                if (found && q->shi > q->slo)
                    REQUIRE(M->s0 >= 0 && M->s0 < M->s1 && M->s1 <= C->ncells &&
                            C->cell_lo[M->s0] == q->slo && C->cell_lo[M->s1] == q->shi,
                            "%s: frame %d: %d -> %d comes from the sender's cells [%d, %d), "
                            "want elements [%lld, %lld)", what, k, M->src, M->dst, M->s0,
                            M->s1, q->slo, q->shi);
            }
            REQUIRE(found, "%s: frame %d (%s %d): unexpected message %d -> %d [%lld, %lld) "
                    "%s", what, k, G->phase, G->step, M->src, M->dst, lo, hi,
                    M->add ? "add" : "copy");
            matched++;
        }
        REQUIRE(matched == G->n, "%s: frame %d (%s %d): %d messages, want %d", what, k,
                G->phase, G->step, matched, G->n);
    }

    dv_mask *st = malloc((size_t)N * ni * sizeof *st + 1), *old = malloc((size_t)N * ni *
                         sizeof *st + 1), *got = malloc((size_t)N * C->ncells * sizeof *got);
    ref_init(R, st);
    for (int k = 0; k <= R->nf; k++) {
        if (k > 0)
            ref_step(R, k - 1, st, old);
        dv_state(m, c, k, got);
        for (int r = 0; r < N; r++)
            for (int j = 0; j < ni; j++)
                REQUIRE(got[r * C->ncells + j] == st[r * ni + j], "%s: after %d frames rank "
                        "%d cell %d [%lld, %lld) holds %#llx, want %#llx", what, k, r, j,
                        R->b[j], R->b[j + 1], (unsigned long long)got[r * C->ncells + j],
                        (unsigned long long)st[r * ni + j]);
    }
    free(st);
    free(old);
    free(got);

    double sent[DV_MAX_RANKS], expect[DV_MAX_RANKS];
    char text[256] = "";
    dv_bytes_sent(m, c, C->nframes, sent);
    REQUIRE(dv_formula(m, c, expect, text, sizeof text) == 1 && text[0], "%s: no formula",
            what);
    for (int r = 0; r < N; r++) {
        double want = R->sent[r] * esize;
        REQUIRE(esize == 0 || fabs(sent[r] - want) <= 1e-9 * want + 0.5, "%s: rank %d sent "
                "%.0f bytes, want %.0f", what, r, sent[r], want);
        REQUIRE(fabs(expect[r] - sent[r]) <= 1e-9 * sent[r] + 0.5, "%s: rank %d sent %.0f "
                "bytes, the formula (%s) says %.0f", what, r, sent[r], text, expect[r]);
    }
}

/* ==== built-in algorithms ==== */

START_TEST(test_algo_names)
{
    for (int a = 0; a < NALGO; a++) {
        REQUIRE(dv_algos[a] && strcmp(dv_algos[a], ALGO[a]) == 0, "dv_algos[%d] is %s, "
                "want %s", a, dv_algos[a] ? dv_algos[a] : "NULL", ALGO[a]);
        REQUIRE(dv_algo_index(ALGO[a]) == a, "dv_algo_index(%s) != %d", ALGO[a], a);
        REQUIRE(strcmp(dv_algo_coll(a), COLL[a]) == 0, "dv_algo_coll(%d) = %s, want %s", a,
                dv_algo_coll(a), COLL[a]);
    }
    REQUIRE(dv_algos[NALGO] == NULL, "dv_algos has more than %d entries", NALGO);
    REQUIRE(dv_algo_index("ring") == -1 && dv_algo_index("") == -1, "unknown names index");
    REQUIRE(dv_phase_text("no_such_coll", "no-such-phase")[0] == '\0', "unknown phase text");

    dv_model m;
    char err[256];
    int bad[][2] = { { -1, 4 }, { NALGO, 4 }, { 0, 0 }, { 0, DV_MAX_RANKS + 1 }, { 0, -3 } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        REQUIRE(dv_model_algo(&m, bad[i][0], bad[i][1], 10, err, sizeof err) == -1 && err[0],
                "dv_model_algo(algo %d, %d ranks) should fail with a message", bad[i][0],
                bad[i][1]);
    }
    err[0] = '\0';
    REQUIRE(dv_model_algo(&m, 0, 4, -1, err, sizeof err) == -1 && err[0], "count -1 accepted");
}
END_TEST

/* One algorithm (the loop index) at every rank count and count. */
START_TEST(test_algo)
{
    int a = _i;
    ref R = { 0 };
    char what[160], err[256];
    for (int ni = 0; ni < NRANKS_TESTED; ni++) {
        int N = RANKS[ni];
        long long counts[] = { 1, N > 1 ? N - 1 : 2, N + 1, 3LL * N + 2, 10LL * N,
                               (1LL << 33) + 5 };
        for (size_t ci = 0; ci < sizeof counts / sizeof counts[0]; ci++) {
            long long count = counts[ci];
            snprintf(what, sizeof what, "%s, %d ranks, count %lld", ALGO[a], N, count);
            dv_model m;
            REQUIRE(dv_model_algo(&m, a, N, count, err, sizeof err) == 0, "%s: %s", what, err);
            REQUIRE(m.nranks == N && !m.from_trace && strstr(m.title, ALGO[a]), "%s: "
                    "nranks %d, from_trace %d, title '%s'", what, m.nranks, m.from_trace,
                    m.title);
            check_struct(&m, what);
            check_positions(&m, 1, 1, what);
            ref_build(&R, a, N, count);
            if (m.ncalls == 0) {
                REQUIRE(N == 1, "%s: no call", what);
            } else {
                REQUIRE(m.ncalls == 1 && strcmp(m.calls[0].coll, COLL[a]) == 0, "%s: %d "
                        "calls, the first %s", what, m.ncalls, m.calls[0].coll);
                check_call(&m, 0, &R, 4, what);
            }
            dv_model_free(&m);
        }
    }
    free(R.msg);
}
END_TEST

/* Count 0: every collective returns before dt_trace_call, so a built-in has no call. */
START_TEST(test_algo_empty)
{
    char what[96], err[256];
    for (int a = 0; a < NALGO; a++)
        for (int ni = 0; ni < NRANKS_TESTED; ni++) {
            dv_model m;
            snprintf(what, sizeof what, "%s, %d ranks, count 0", ALGO[a], RANKS[ni]);
            if (a == ZIGZAG && RANKS[ni] > DV_MAX_CELLS / 2) {   /* 2N chunks: refused */
                REQUIRE(dv_model_algo(&m, a, RANKS[ni], 0, err, sizeof err) == -1 && err[0],
                        "%s: accepted", what);
                continue;
            }
            REQUIRE(dv_model_algo(&m, a, RANKS[ni], 0, err, sizeof err) == 0, "%s: %s", what,
                    err);
            check_struct(&m, what);
            check_positions(&m, 0, 1, what);
            REQUIRE(m.ncalls == 0 && m.npos == 1, "%s: %d calls, %d positions; the library "
                    "records nothing for count 0", what, m.ncalls, m.npos);
            dv_model_free(&m);
        }
}
END_TEST

/* ==== ring attention, from its definition ==== */

/* Chunk i of count in P parts (dt_chunk_bounds: the cut the built-ins use). */
static void chunk(long long count, int P, int i, long long *lo, long long *hi)
{
    size_t a, b;
    dt_chunk_bounds((size_t)count, P, i, &a, &b);
    *lo = (long long)a;
    *hi = (long long)b;
}

/* The rank whose block holds position x: the plain cut gives rank j part j of N, the
 * zig-zag cut parts j and 2N-1-j of 2N. */
static int attn_owner(int zz, int N, long long count, long long x)
{
    int P = zz ? 2 * N : N;
    for (int i = 0; i < P; i++) {
        long long lo, hi;
        chunk(count, P, i, &lo, &hi);
        if (x >= lo && x < hi)
            return i < N ? i : 2 * N - 1 - i;
    }
    return -1;
}

/* The causal verdict for rank r's queries against the keys [k0, k1), pair by pair:
 * query i sees key j when j <= i. */
static dv_attn attn_verdict(int zz, int N, long long count, int r, long long k0, long long k1)
{
    long long seen = 0, all = 0;
    for (long long i = 0; i < count; i++) {
        if (attn_owner(zz, N, count, i) != r)
            continue;
        for (long long j = k0; j < k1; j++, all++)
            seen += j <= i;
    }
    return seen == 0 ? DV_ATTN_SKIP : seen == all ? DV_ATTN_FULL : DV_ATTN_PART;
}

/* Every position k: rank r holds rank (r - min(k, N-1))'s block, has attended blocks
 * r, r-1, ..., r-k+1 (each with the causal verdict), and step k+1 sends the block in
 * hand to r+1, copied; the bytes are every block but the right neighbour's. */
static void check_attn(const dv_model *m, int c, int zz, int N, long long count,
                       const char *what)
{
    const dv_call *C = &m->calls[c];
    int nc = C->ncells, own[DV_MAX_CELLS];
    REQUIRE(C->ring_attn && C->attn_frame != NULL && C->nframes == N && C->count == count,
            "%s: ring_attn %d, %d frames, count %lld", what, C->ring_attn, C->nframes,
            C->count);
    dv_attn verdict[DV_MAX_RANKS][DV_MAX_CELLS];
    for (int x = 0; x < nc; x++) {
        long long lo = C->cell_lo[x], hi = C->cell_lo[x + 1];
        own[x] = attn_owner(zz, N, count, lo);
        REQUIRE(hi > lo && own[x] >= 0 && attn_owner(zz, N, count, hi - 1) == own[x],
                "%s: cell %d [%lld, %lld) is not inside one rank's block", what, x, lo, hi);
        for (int r = 0; r < N; r++)
            verdict[r][x] = attn_verdict(zz, N, count, r, lo, hi);
    }
    dv_mask held[DV_MAX_RANKS * DV_MAX_CELLS];
    unsigned char done[DV_MAX_RANKS * DV_MAX_CELLS];
    for (int k = 0; k <= N; k++) {
        dv_attn_state(m, c, k, held, done);
        for (int r = 0; r < N; r++)
            for (int x = 0; x < nc; x++) {
                int h = ((r - (k < N ? k : N - 1)) % N + N) % N, s = ((r - own[x]) % N + N) % N;
                REQUIRE(held[r * nc + x] == (own[x] == h ? bit(h) : 0), "%s, after %d steps: "
                        "rank %d cell %d holds %#llx, want rank %d's block", what, k, r, x,
                        (unsigned long long)held[r * nc + x], h);
                int want = s < k ? (int)verdict[r][x] : DV_ATTN_NOT_YET;
                REQUIRE(done[r * nc + x] == want, "%s, after %d steps: rank %d's output at "
                        "cell %d is %d, want %d", what, k, r, x, done[r * nc + x], want);
                REQUIRE(dv_attn_causal(C, r, x) == verdict[r][x], "%s: dv_attn_causal(%d, "
                        "%d) = %d, want %d", what, r, x, dv_attn_causal(C, r, x),
                        verdict[r][x]);
            }
        if (k == N)
            break;
        const dv_frame *F = &m->frames[C->first_frame + k];
        int cells = 0;
        for (int i = 0; i < F->nmsg; i++) {
            const dv_msg *g = &m->msgs[F->first_msg + i];
            REQUIRE(g->dst == (g->src + 1) % N && !g->add, "%s, step %d: a message %d -> %d, "
                    "add %d", what, k + 1, g->src, g->dst, g->add);
            for (int x = g->c0; x < g->c1; x++, cells++)
                REQUIRE(own[x] == ((g->src - k) % N + N) % N, "%s, step %d: rank %d sends "
                        "cell %d, not of rank %d's block", what, k + 1, g->src, x,
                        ((g->src - k) % N + N) % N);
        }
        REQUIRE(cells == (k < N - 1 ? nc : 0), "%s, step %d: the messages carry %d cells, "
                "want %d", what, k + 1, cells, k < N - 1 ? nc : 0);
    }
    double sent[DV_MAX_RANKS], expect[DV_MAX_RANKS];
    char text[256];
    dv_bytes_sent(m, c, N, sent);
    REQUIRE(dv_formula(m, c, expect, text, sizeof text) && strstr(text, "(N-1)/N"), "%s: no "
            "formula", what);
    for (int r = 0; r < N; r++) {
        double keep = 0;
        for (long long i = 0; i < count && N > 1; i++)
            keep += attn_owner(zz, N, count, i) == (r + 1) % N;
        double want = N > 1 ? C->esize * (double)(count - keep) : 0;
        REQUIRE(fabs(sent[r] - want) < 0.5 && fabs(expect[r] - want) < 0.5, "%s: rank %d "
                "sent %.0f bytes, the formula says %.0f, want %.0f", what, r, sent[r],
                expect[r], want);
    }
}

/* The built-ins, plain (_i 0) and zig-zag (1), at odd and even rank counts, counts that
 * divide and counts that do not. */
START_TEST(test_ring_attention)
{
    static const int ns[] = { 1, 2, 3, 4, 5, 7, 16 };
    char what[160], err[256];
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        int N = ns[i];
        long long counts[] = { 7LL * N + 3, 16LL * N };
        for (int ci = 0; ci < 2; ci++) {
            dv_model m;
            snprintf(what, sizeof what, "%s, %d ranks, count %lld", ALGO[10 + _i], N,
                     counts[ci]);
            REQUIRE(dv_model_algo(&m, 10 + _i, N, counts[ci], err, sizeof err) == 0, "%s: %s",
                    what, err);
            check_struct(&m, what);
            check_positions(&m, 1, 1, what);
            REQUIRE(m.ncalls == 1, "%s: %d calls", what, m.ncalls);
            check_attn(&m, 0, _i, N, counts[ci], what);
            dv_model_free(&m);
        }
    }
}
END_TEST

START_TEST(test_ring_attention_text)
{
    dv_model m;
    char err[256], s[512];
    REQUIRE(dv_model_algo(&m, 10, 3, 300, err, sizeof err) == 0, "%s", err);
    dv_step_text(&m, 0, s, sizeof s);
    REQUIRE(strstr(s, "attends its queries") && strstr(s, "right neighbour"), "step 1: %s", s);
    dv_step_text(&m, 2, s, sizeof s);
    REQUIRE(strstr(s, "last step") && strstr(s, "nothing moves"), "step 3: %s", s);
    dv_step_text(&m, 3, s, sizeof s);
    REQUIRE(strncmp(s, "done:", 5) == 0, "the end: %s", s);
    dv_model_free(&m);
    REQUIRE(dv_model_algo(&m, ZIGZAG, DV_MAX_CELLS / 2 + 1, 300, err, sizeof err) == -1 &&
            strstr(err, "ranks"), "zig-zag at %d ranks: '%s'", DV_MAX_CELLS / 2 + 1, err);
}
END_TEST

/* ==== hand-written traces ==== */

static const char HEAD2[] = "# dtlab-trace 1\n# ranks 2\n# program handmade\n";

/* Reads text as a trace (it must parse) and builds m; returns dv_model_build's result. */
static int build_text(dv_model *m, const char *text, char *err, size_t len)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    REQUIRE(f != NULL, "fmemopen failed");
    dt_trace t;
    int rc = dt_trace_read_stream(f, "text", &t, err, len);
    fclose(f);
    REQUIRE(rc == 0, "the reader refuses a test trace: %s", err);
    memset(m, 0, sizeof *m);
    return dv_model_build(m, &t, err, len);
}

/* Builds text, which must succeed, and runs every check a model must pass. */
static void build_ok(dv_model *m, const char *text, const char *what)
{
    char err[256] = "";
    REQUIRE(build_text(m, text, err, sizeof err) == 0, "%s: build failed: %s", what, err);
    check_struct(m, what);
    check_positions(m, 0, 0, what);
}

/* A 2-rank ring allreduce of 4 floats, chunk 0 received in two segments. */
static const char RING2[] =
    "0.0 0.0 0 mark -1 allreduce_ring call -1 -1 0 4 16\n"
    "0.1 0.2 0 send 1 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "0.1 0.2 0 recv 1 allreduce_ring reduce-scatter 0 0 0 1 4\n"
    "0.1 0.2 0 reduce -1 allreduce_ring reduce-scatter 0 0 0 1 4\n"
    "0.2 0.3 0 recv 1 allreduce_ring reduce-scatter 0 0 1 2 4\n"
    "0.2 0.3 0 reduce -1 allreduce_ring reduce-scatter 0 0 1 2 4\n"
    "0.3 0.4 0 send 1 allreduce_ring allgather 0 0 0 2 8\n"
    "0.3 0.4 0 recv 1 allreduce_ring allgather 0 1 2 4 8\n"
    "0.0 0.0 1 mark -1 allreduce_ring call -1 -1 0 4 16\n"
    "0.1 0.2 1 send 0 allreduce_ring reduce-scatter 0 0 0 2 8\n"
    "0.1 0.2 1 recv 0 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "0.1 0.2 1 reduce -1 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "0.3 0.4 1 send 0 allreduce_ring allgather 0 1 2 4 8\n"
    "0.3 0.4 1 recv 0 allreduce_ring allgather 0 0 0 2 8\n";

START_TEST(test_trace_ring)
{
    char text[4096];
    snprintf(text, sizeof text, "%s%s", HEAD2, RING2);
    dv_model m;
    build_ok(&m, text, "2-rank ring");
    REQUIRE(m.ncalls == 1 && m.nframes == 2 && m.from_trace, "%d calls, %d frames",
            m.ncalls, m.nframes);
    const dv_frame *F = &m.frames[0];
    REQUIRE(strcmp(F->phase, "reduce-scatter") == 0 && F->nmsg == 2, "frame 0: %s, %d "
            "messages (two segments of chunk 0 are one message)", F->phase, F->nmsg);
    for (int i = 0; i < 2; i++) {
        const dv_msg *M = &m.msgs[F->first_msg + i];
        REQUIRE(M->add && M->nbytes == 8, "message %d -> %d: add %d, %g bytes", M->src,
                M->dst, M->add, M->nbytes);
    }
    ref R = { 0 };
    ref_build(&R, 0, 2, 4);
    check_call(&m, 0, &R, 4, "2-rank ring");
    free(R.msg);
    dv_model_free(&m);

    /* the same twice without call marks: (phase, step) going back starts a new call */
    char *p = text + snprintf(text, sizeof text, "%s", HEAD2);
    for (int rank = 0; rank < 2; rank++)
        for (int rep = 0; rep < 2; rep++)
            for (const char *l = RING2; *l; l = strchr(l, '\n') + 1) {
                double t0, t1;
                int r, at;                    /* at: where the kind begins */
                sscanf(l, "%lf %lf %n%d", &t0, &t1, &at, &r);
                if (r == rank && strncmp(strchr(l + at, ' ') + 1, "mark", 4) != 0)
                    p += sprintf(p, "%.1f %.1f %.*s", t0 + rep, t1 + rep,
                                 (int)(strchr(l, '\n') + 1 - (l + at)), l + at);
            }
    build_ok(&m, text, "two rings without marks");
    REQUIRE(m.ncalls == 2 && m.nframes == 4, "without marks: %d calls, %d frames (want 2, "
            "4)", m.ncalls, m.nframes);
    dv_mask st[2 * DV_MAX_CELLS];
    for (int c = 0; c < 2; c++) {
        dv_state(&m, c, m.calls[c].nframes, st);
        for (int i = 0; i < 2 * m.calls[c].ncells; i++)
            REQUIRE(st[i] == 3, "call %d: rank %d cell %d holds %#llx at the end", c,
                    i / m.calls[c].ncells, i % m.calls[c].ncells, (unsigned long long)st[i]);
    }
    dv_model_free(&m);
}
END_TEST

START_TEST(test_trace_limits)
{
    dv_model m;
    char err[256] = "", text[1024];
    /* more ranks than masks have bits */
    snprintf(text, sizeof text, "# dtlab-trace 1\n# ranks %d\n"
             "0.0 0.1 %d send 0 allreduce_ring reduce-scatter 0 0 0 4 16\n"
             "0.0 0.1 0 recv %d allreduce_ring reduce-scatter 0 0 0 4 16\n",
             DV_MAX_RANKS + 1, DV_MAX_RANKS, DV_MAX_RANKS);
    REQUIRE(build_text(&m, text, err, sizeof err) == -1 && err[0], "%d ranks: built",
            DV_MAX_RANKS + 1);
    REQUIRE(m.ncalls == 0 && m.calls == NULL && m.trace.ev == NULL, "a failed build leaves "
            "a model behind");
    dv_model_free(&m);
    err[0] = '\0';
    snprintf(text, sizeof text, "# dtlab-trace 1\n# ranks 1000\n");
    REQUIRE(build_text(&m, text, err, sizeof err) == -1 && err[0], "1000 ranks: built");
    dv_model_free(&m);

    /* compute only; nothing at all */
    snprintf(text, sizeof text, "%s0.5 0.7 0 compute -1 train forward 0 -1 0 0 0\n"
             "0.6 0.9 1 compute -1 train backward 0 -1 0 0 0\n", HEAD2);
    build_ok(&m, text, "compute only");
    int c, k;
    dv_pos_split(&m, 0, &c, &k);
    REQUIRE(m.npos == 1 && m.ncalls == 0 && c == -1, "compute only: npos %d, %d calls, "
            "call %d", m.npos, m.ncalls, c);
    dv_model_free(&m);
    build_ok(&m, HEAD2, "no events");
    REQUIRE(m.npos == 1 && m.ncalls == 0, "no events: npos %d", m.npos);
    dv_model_free(&m);

    /* more distinct chunks than cells */
    char *big = malloc(64 * 1024), *p = big + sprintf(big, "%s", HEAD2);
    p += sprintf(p, "0 0 0 mark -1 allgather_ring call -1 -1 0 1000 4000\n");
    for (int s = 0; s < 150; s++)
        p += sprintf(p, "%d %d 0 recv 1 allgather_ring allgather %d %d %d %d 4\n", s + 1,
                     s + 2, s, s, 3 * s, 3 * s + 1);
    build_ok(&m, big, "150 chunks");
    REQUIRE(m.ncalls == 1 && m.calls[0].ncells == DV_MAX_CELLS, "150 chunks: %d cells",
            m.ncalls ? m.calls[0].ncells : -1);
    dv_model_free(&m);
    free(big);
}
END_TEST

/* Values a reader accepts and a model must survive: peers -1 on receives, ranges far
 * outside the call's buffer or near LLONG_MAX, calls of count 0, events before any call,
 * colls the viewer does not know, steps near INT_MAX, a reduce with nothing received. */
static const char *const ODD[] = {
    "0 1 0 recv -1 allreduce_ring reduce-scatter 0 0 0 4 16\n"
    "0 1 1 send -1 allreduce_ring reduce-scatter 0 0 0 4 16\n",
    "0 0 0 mark -1 allreduce_ring call -1 -1 0 4 16\n"
    "0 1 0 recv 1 allreduce_ring reduce-scatter 0 0 100 200 400\n"
    "0 1 1 send 0 allreduce_ring reduce-scatter 0 0 100 200 400\n",
    "0 0 0 mark -1 allreduce_ring call -1 -1 0 9223372036854775807 9223372036854775807\n"
    "0 1 0 recv 1 allreduce_ring reduce-scatter 0 0 9223372036854775000 "
    "9223372036854775807 9223372036854775807\n"
    "0 1 0 reduce -1 allreduce_ring reduce-scatter 0 0 0 9223372036854775807 1\n"
    "0 1 1 recv 0 allreduce_ring allgather 2147483647 0 1 9223372036854775806 0\n",
    "0 0 0 mark -1 bcast_tree call -1 -1 0 0 0\n"
    "0 0 1 mark -1 bcast_tree call -1 -1 0 0 0\n"
    "0 0 0 mark -1 bcast_tree call -1 -1 0 0 0\n",
    "0 1 0 recv 1 gather_tree gather 0 1 4 8 16\n"
    "1 1 0 mark -1 gather_tree call -1 -1 0 8 32\n"
    "2 3 0 recv 1 gather_tree gather 0 1 4 8 16\n"
    "2 3 1 send 0 gather_tree gather 0 1 4 8 16\n",
    "0 1 0 recv 1 mine step 5 -1 0 0 0\n"
    "0 1 1 send 0 mine step 5 -1 3 9 24\n"
    "1 2 1 recv 0 mine step 4 -1 3 9 24\n"
    "1 2 0 reduce -1 - - -1 -1 0 0 0\n"
    "3 4 0 copy -1 mine step 2147483647 -1 0 5 20\n",
    "0 0 1 mark -1 alltoall_pairwise call -1 -1 0 6 24\n"
    "0 1 1 recv 1 alltoall_pairwise exchange 1 1 3 6 12\n"
    "0 1 1 recv 0 alltoall_pairwise exchange 1 0 0 3 12\n"
    "0 1 0 reduce -1 alltoall_pairwise exchange 1 0 0 3 12\n",
    "0 0 0 mark -1 reduce_scatter_ring call -1 -1 0 5 20\n"
    "0 0 1 mark -1 allreduce_rd call -1 -1 0 5 20\n"
    "5 6 0 recv 1 reduce_scatter_ring reduce-scatter 0 0 0 5 20\n"
    "5 6 1 recv 0 allreduce_rd exchange 0 0 0 5 20\n"
    "1 2 0 recv 1 reduce_scatter_ring allgather 7 0 5 5 0\n",
};

START_TEST(test_trace_odd)
{
    char text[2048], what[32];
    for (size_t i = 0; i < sizeof ODD / sizeof ODD[0]; i++) {
        snprintf(text, sizeof text, "%s%s", HEAD2, ODD[i]);
        snprintf(what, sizeof what, "odd trace %zu", i);
        dv_model m;
        build_ok(&m, text, what);
        dv_model_free(&m);
    }
}
END_TEST

/* Hand-written calls, and the masks every cell of each rank holds after k frames. An
 * unknown coll: rank r holds {r} where it sends before it receives. Every frame reads the
 * masks from before it: a swap by copy swaps, a chain of adds moves one hop a frame. */
static const struct {
    const char *name, *text;
    int nranks, nframes;
    dv_mask want[3][3];          /* [k][rank] */
} RULES[] = {
    { "unknown coll: rank 0 sends [0, 4) to 1, which sends it back",
      "0 0 0 mark -1 mine call -1 -1 0 4 16\n"
      "1 2 0 send 1 mine there 0 -1 0 4 16\n"
      "3 4 0 recv 1 mine back 0 -1 0 4 16\n"
      "0 0 1 mark -1 mine call -1 -1 0 4 16\n"
      "1 2 1 recv 0 mine there 0 -1 0 4 16\n"
      "3 4 1 send 0 mine back 0 -1 0 4 16\n",
      2, 2, { { 1, 0 }, { 1, 1 }, { 1, 1 } } },
    { "a swap by copy in one frame",
      "0 0 0 mark -1 mine call -1 -1 0 4 16\n"
      "1 2 0 send 1 mine swap 0 -1 0 4 16\n"
      "1 2 0 recv 1 mine swap 0 -1 0 4 16\n"
      "0 0 1 mark -1 mine call -1 -1 0 4 16\n"
      "1 2 1 send 0 mine swap 0 -1 0 4 16\n"
      "1 2 1 recv 0 mine swap 0 -1 0 4 16\n",
      2, 1, { { 1, 2 }, { 2, 1 } } },
    { "a chain of adds 0 -> 1 -> 2 in one frame",
      "0 0 0 mark -1 allreduce_ring call -1 -1 0 4 16\n"
      "1 2 0 send 1 allreduce_ring reduce-scatter 0 0 0 4 16\n"
      "0 0 1 mark -1 allreduce_ring call -1 -1 0 4 16\n"
      "1 2 1 recv 0 allreduce_ring reduce-scatter 0 0 0 4 16\n"
      "1 2 1 send 2 allreduce_ring reduce-scatter 0 0 0 4 16\n"
      "2 2 1 reduce -1 allreduce_ring reduce-scatter 0 0 0 4 16\n"
      "0 0 2 mark -1 allreduce_ring call -1 -1 0 4 16\n"
      "1 2 2 recv 1 allreduce_ring reduce-scatter 0 0 0 4 16\n"
      "2 2 2 reduce -1 allreduce_ring reduce-scatter 0 0 0 4 16\n",
      3, 1, { { 1, 2, 4 }, { 1, 3, 6 } } },
};

START_TEST(test_trace_rules)
{
    char text[2048];
    const int i = _i;
    snprintf(text, sizeof text, "# dtlab-trace 1\n# ranks %d\n%s", RULES[i].nranks,
             RULES[i].text);
    dv_model m;
    build_ok(&m, text, RULES[i].name);
    REQUIRE(m.ncalls == 1 && m.calls[0].nframes == RULES[i].nframes, "%s: %d calls, the "
            "first of %d frames", RULES[i].name, m.ncalls, m.ncalls ? m.calls[0].nframes : -1);
    const dv_call *C = &m.calls[0];
    dv_mask st[3 * DV_MAX_CELLS];
    for (int k = 0; k <= RULES[i].nframes; k++) {
        dv_state(&m, 0, k, st);
        for (int r = 0; r < m.nranks; r++)
            for (int j = 0; j < C->ncells; j++)
                REQUIRE(st[r * C->ncells + j] == RULES[i].want[k][r], "%s: after %d frames "
                        "rank %d cell %d holds %#llx, want %#llx", RULES[i].name, k, r, j,
                        (unsigned long long)st[r * C->ncells + j],
                        (unsigned long long)RULES[i].want[k][r]);
    }
    double expect[3];
    char t[64];
    REQUIRE(C->cls != DV_CLASS_OTHER || dv_formula(&m, 0, expect, t, sizeof t) == 0,
            "%s: a formula for an unknown coll", RULES[i].name);
    dv_model_free(&m);
}
END_TEST

/* Phases in the order the ranks run them, not the order some event first begins: a rank
 * with nothing to do posts its next receive at once. 3 ranks, recursive doubling: rank 0
 * folds into rank 1 and waits for the unfold (from t = 0.3) while ranks 1 and 2 exchange
 * (from t = 0.4); 09_allreduce_compare at 3 ranks writes such traces. */
START_TEST(test_trace_order)
{
    static const char text[] = "# dtlab-trace 1\n# ranks 3\n"
        "0.0 0.0 0 mark -1 allreduce_rd call -1 -1 0 4 16\n"
        "0.1 0.2 0 send 1 allreduce_rd fold 0 0 0 4 16\n"
        "0.3 0.9 0 recv 1 allreduce_rd unfold 0 0 0 4 16\n"
        "0.0 0.0 1 mark -1 allreduce_rd call -1 -1 0 4 16\n"
        "0.1 0.2 1 recv 0 allreduce_rd fold 0 0 0 4 16\n"
        "0.2 0.2 1 reduce -1 allreduce_rd fold 0 0 0 4 16\n"
        "0.4 0.5 1 send 2 allreduce_rd exchange 0 0 0 4 16\n"
        "0.4 0.5 1 recv 2 allreduce_rd exchange 0 0 0 4 16\n"
        "0.5 0.5 1 reduce -1 allreduce_rd exchange 0 0 0 4 16\n"
        "0.6 0.7 1 send 0 allreduce_rd unfold 0 0 0 4 16\n"
        "0.0 0.0 2 mark -1 allreduce_rd call -1 -1 0 4 16\n"
        "0.4 0.5 2 send 1 allreduce_rd exchange 0 0 0 4 16\n"
        "0.4 0.5 2 recv 1 allreduce_rd exchange 0 0 0 4 16\n"
        "0.5 0.5 2 reduce -1 allreduce_rd exchange 0 0 0 4 16\n";
    dv_model m;
    build_ok(&m, text, "rd, 3 ranks");
    REQUIRE(m.ncalls == 1, "rd, 3 ranks: %d calls", m.ncalls);
    ref R = { 0 };
    ref_build(&R, 6, 3, 4);
    check_call(&m, 0, &R, 4, "rd, 3 ranks, rank 0 waiting early");
    free(R.msg);
    dv_model_free(&m);
}
END_TEST

/* ==== transports (issue 19) ==== */

/* A 2-rank ring allreduce of 4 floats, version 2: rank 0 gets chunk 0 in two pieces,
 * by shm and by mpi (a small last piece), rank 1 gets chunk 1 by shm; the allgather
 * records no transport. */
static const char VIA2[] =
    "# dtlab-trace 2\n# ranks 2\n# program handmade\n"
    "0.0 0.0 0 mark -1 allreduce_ring call -1 -1 0 4 16 -\n"
    "0.1 0.2 0 send 1 allreduce_ring reduce-scatter 0 1 2 4 8 shm\n"
    "0.1 0.2 0 recv 1 allreduce_ring reduce-scatter 0 0 0 1 4 shm\n"
    "0.2 0.3 0 recv 1 allreduce_ring reduce-scatter 0 0 1 2 4 mpi\n"
    "0.3 0.4 0 send 1 allreduce_ring allgather 0 0 0 2 8 -\n"
    "0.3 0.4 0 recv 1 allreduce_ring allgather 0 1 2 4 8 -\n"
    "0.0 0.0 1 mark -1 allreduce_ring call -1 -1 0 4 16 -\n"
    "0.1 0.2 1 send 0 allreduce_ring reduce-scatter 0 0 0 2 8 shm\n"
    "0.1 0.2 1 recv 0 allreduce_ring reduce-scatter 0 1 2 4 8 shm\n"
    "0.3 0.4 1 send 0 allreduce_ring allgather 0 1 2 4 8 -\n"
    "0.3 0.4 1 recv 0 allreduce_ring allgather 0 0 0 2 8 -\n";

/* Each message keeps the transports of its receives (both, when its pieces went two
 * ways), and the position line names those of the step the arrows show. */
START_TEST(test_vias)
{
    char s[512];
    dv_vias_text(0, s, sizeof s);
    REQUIRE(strcmp(s, "") == 0, "no transport: '%s'", s);
    dv_vias_text(1u << 3, s, sizeof s);
    REQUIRE(strcmp(s, "shm") == 0, "shm: '%s'", s);
    dv_vias_text(0x1e, s, sizeof s);
    REQUIRE(strcmp(s, "mpi+staging+shm+ipc") == 0, "all four: '%s'", s);
    dv_vias_text(0x1e, s, 6);
    REQUIRE(strcmp(s, "mpi+s") == 0, "cut to 6 bytes: '%s'", s);

    dv_model m;
    build_ok(&m, VIA2, "transports");
    REQUIRE(m.ncalls == 1 && m.nframes == 2, "%d calls, %d frames", m.ncalls, m.nframes);
    const dv_frame *f = &m.frames[0];
    for (int i = 0; i < f->nmsg; i++) {
        const dv_msg *g = &m.msgs[f->first_msg + i];
        unsigned want = g->dst == 0 ? (1u << 1 | 1u << 3) : 1u << 3;
        REQUIRE(g->vias == want, "message %d -> %d: transports %#x, want %#x", g->src,
                g->dst, g->vias, want);
    }
    for (int i = 0; i < m.frames[1].nmsg; i++)
        REQUIRE(m.msgs[m.frames[1].first_msg + i].vias == 0, "the allgather names one");
    dv_pos_describe(&m, 0, s, sizeof s);
    REQUIRE(strcmp(s, "position 0 of 0..2: call 1 of 1, allreduce_ring on ranks 0,1: 0 of 2 "
                   "steps done, next: step 1 of 2 (reduce-scatter) via mpi+shm") == 0,
            "position 0: %s", s);
    dv_pos_describe(&m, 1, s, sizeof s);
    REQUIRE(strstr(s, "(allgather)") != NULL && strstr(s, "via") == NULL,
            "position 1 names a transport it has not: %s", s);
    dv_model_free(&m);

    /* the same trace as version 1 (the via column cut off): no transport anywhere */
    char v1[sizeof VIA2];
    size_t n = 0;
    for (const char *p = VIA2; *p; p++) {
        const char *eol = strchr(p, '\n'), *sp = eol;
        if (p[0] != '#')
            while (sp > p && sp[-1] != ' ')
                sp--;
        memcpy(v1 + n, p, (size_t)(sp - p) - (p[0] != '#'));
        n += (size_t)(sp - p) - (p[0] != '#');
        v1[n++] = '\n';
        p = eol;
    }
    v1[n] = '\0';
    v1[14] = '1';                                          /* "# dtlab-trace 1" */
    build_ok(&m, v1, "transports, version 1");
    for (int i = 0; i < m.nmsgs; i++)
        REQUIRE(m.msgs[i].vias == 0, "a version 1 trace names a transport");
    dv_pos_describe(&m, 0, s, sizeof s);
    REQUIRE(strstr(s, "via") == NULL, "version 1: %s", s);
    dv_model_free(&m);
}
END_TEST

/* ==== what a new user read wrong (issue 17): counters, colours, communicators ==== */

/* The counters say one thing each, in the same words everywhere (dv_pos_describe): a
 * position counted from 0 of 0..npos-1; the steps done, k of F; the step the arrows
 * show, k+1 of F, with its phase; and the sentence under them about that same step. */
START_TEST(test_counters)
{
    char s[512], want[512], text[512], err[256];
    dv_model m;
    REQUIRE(dv_model_algo(&m, 0, 4, 1000, err, sizeof err) == 0, "%s", err);
    dv_pos_describe(&m, 3, s, sizeof s);
    REQUIRE(strcmp(s, "position 3 of 0..6: call 1 of 1, allreduce_ring on ranks 0-3: 3 of 6 "
                   "steps done, next: step 4 of 6 (allgather)") == 0, "position 3: %s", s);
    dv_pos_describe(&m, 99, s, sizeof s);
    REQUIRE(strcmp(s, "position 6 of 0..6: call 1 of 1, allreduce_ring on ranks 0-3: 6 of 6 "
                   "steps done, call finished") == 0, "the last position: %s", s);
    dv_step_text(&m, 6, text, sizeof text);
    REQUIRE(strstr(text, "done") != NULL, "the last position says '%s'", text);
    dv_model_free(&m);

    static const int ns[] = { 1, 2, 3, 5, 16 };
    for (int a = 0; a < NALGO; a++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            REQUIRE(dv_model_algo(&m, a, ns[i], 1000, err, sizeof err) == 0, "%s", err);
            for (int p = 0; p < m.npos; p++) {
                int c, k;
                dv_pos_split(&m, p, &c, &k);
                dv_pos_describe(&m, p, s, sizeof s);
                snprintf(want, sizeof want, "position %d of 0..%d: ", p, m.npos - 1);
                REQUIRE(strncmp(s, want, strlen(want)) == 0, "%s at %d: %s", ALGO[a], ns[i], s);
                if (c < 0)
                    continue;
                const dv_call *C = &m.calls[c];
                if (k < C->nframes)
                    snprintf(want, sizeof want, ": %d of %d steps done, next: step %d of %d "
                             "(%s)", k, C->nframes, k + 1, C->nframes,
                             m.frames[C->first_frame + k].phase);
                else
                    snprintf(want, sizeof want, ": %d of %d steps done, call finished", k,
                             C->nframes);
                REQUIRE(strlen(s) > strlen(want) && strcmp(s + strlen(s) - strlen(want),
                        want) == 0, "%s at %d ranks, position %d: '%s' does not end '%s'",
                        ALGO[a], ns[i], p, s, want);
                dv_step_text(&m, p, text, sizeof text);
                REQUIRE(text[0] != '\0', "%s at %d ranks, position %d: no sentence", ALGO[a],
                        ns[i], p);
                if (a != 7 || k == C->nframes)
                    continue;
                /* alltoall: "next: step s" is the step whose arrows go a distance of s,
                 * and the sentence names that distance */
                const dv_frame *F = &m.frames[C->first_frame + k];
                for (int j = 0; j < F->nmsg; j++) {
                    const dv_msg *M = &m.msgs[F->first_msg + j];
                    REQUIRE((M->dst - M->src + ns[i]) % ns[i] == k + 1, "alltoall at %d: step "
                            "%d's arrow %d -> %d", ns[i], k + 1, M->src, M->dst);
                }
                snprintf(want, sizeof want, "block for rank r+%d ", k + 1);
                REQUIRE(strstr(text, want) != NULL, "alltoall at %d ranks, step %d of %d: "
                        "'%s'", ns[i], k + 1, C->nframes, text);
            }
            dv_model_free(&m);
        }
}
END_TEST

/* CIELAB (D65) of an sRGB colour, for a distance the eye agrees with. */
static void lab_of(SDL_Color c, double *L, double *A, double *B)
{
    double v[3] = { c.r / 255.0, c.g / 255.0, c.b / 255.0 };
    for (int i = 0; i < 3; i++)
        v[i] = v[i] <= 0.04045 ? v[i] / 12.92 : pow((v[i] + 0.055) / 1.055, 2.4);
    double x = (0.4124 * v[0] + 0.3576 * v[1] + 0.1805 * v[2]) / 0.95047;
    double y = 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2];
    double z = (0.0193 * v[0] + 0.1192 * v[1] + 0.9505 * v[2]) / 1.08883;
    double f[3] = { x, y, z };
    for (int i = 0; i < 3; i++)
        f[i] = f[i] > 0.008856 ? cbrt(f[i]) : 7.787 * f[i] + 16.0 / 116;
    *L = 116 * f[1] - 16;
    *A = 500 * (f[0] - f[1]);
    *B = 200 * (f[1] - f[2]);
}

/* Euclidean distances in RGB (*rgb) and in CIELAB (returned). */
static double color_dist(SDL_Color a, SDL_Color b, double *rgb)
{
    double la[3], lb[3];
    *rgb = sqrt((double)(a.r - b.r) * (a.r - b.r) + (double)(a.g - b.g) * (a.g - b.g) +
                (double)(a.b - b.b) * (a.b - b.b));
    lab_of(a, &la[0], &la[1], &la[2]);
    lab_of(b, &lb[0], &lb[1], &lb[2]);
    return sqrt((la[0] - lb[0]) * (la[0] - lb[0]) + (la[1] - lb[1]) * (la[1] - lb[1]) +
                (la[2] - lb[2]) * (la[2] - lb[2]));
}

/* A rank's colour means that rank: no event kind or arrow comes near any of the 64, and
 * no two kinds come near each other. */
START_TEST(test_colors)
{
    double rgb, lab;
    for (int k = 0; k < DV_C_N; k++) {
        SDL_Color c = dv_kind_color((dv_color_kind)k);
        for (int r = 0; r < DV_MAX_RANKS; r++) {
            lab = color_dist(c, dv_rank_color(r), &rgb);
            REQUIRE(rgb >= 60 && lab >= 20, "kind %d (%d,%d,%d) is %.0f (RGB), %.1f (Lab) "
                    "from rank %d's colour", k, c.r, c.g, c.b, rgb, lab, r);
        }
        for (int j = 0; j < k; j++) {
            lab = color_dist(c, dv_kind_color((dv_color_kind)j), &rgb);
            REQUIRE(rgb >= 60 && lab >= 15, "kinds %d and %d are %.0f (RGB), %.1f (Lab) "
                    "apart", j, k, rgb, lab);
        }
    }
}
END_TEST

/* Pixels of colour c in box. */
static int pixels_of(const SDL_Surface *s, SDL_Rect box, SDL_Color c)
{
    int n = 0;
    for (int y = box.y; y < box.y + box.h; y++)
        for (int x = box.x; x < box.x + box.w; x++) {
            Uint8 r, g, b;
            SDL_GetRGB(((const Uint32 *)((const Uint8 *)s->pixels + y * s->pitch))[x],
                       s->format, &r, &g, &b);
            n += r == c.r && g == c.g && b == c.b;
        }
    return n;
}

/* Alltoall draws each rank's send buffer beside its receive buffer: the send blocks in
 * the rank's colour, left of the receive blocks, and the arrows start at the block for
 * the receiver (check_call holds s0, s1 to the reference). */
START_TEST(test_alltoall_buffers)
{
    char err[256];
    static const int ns[] = { 2, 4, 7 };
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        dv_model m;
        REQUIRE(dv_model_algo(&m, 7, ns[i], 1000, err, sizeof err) == 0, "%s", err);
        for (int p = 0; p < m.npos; p++) {
            dv_layout L;
            dv_view v = { .pos = p };
            dv_layout_compute(&m, p, 1280, 800, &L);
            REQUIRE(L.send_x0 > 0 && dv_layout_send_cell(&L, 0, L.ncells - 1).x +
                    L.cell_w <= dv_layout_cell(&L, 0, 0).x, "alltoall at %d: no send buffer "
                    "left of the receive buffer", ns[i]);
            SDL_Surface *s = dv_render_surface(&m, &v, 1280, 800, err, sizeof err);
            REQUIRE(s != NULL, "%s", err);
            for (int r = 0; r < ns[i]; r++)
                for (int c = 0; c < L.ncells; c++) {
                    SDL_Rect b = dv_layout_send_cell(&L, r, c);
                    REQUIRE(pixels_of(s, b, dv_rank_color(r)) > b.w * b.h / 2, "alltoall at "
                            "%d, position %d: rank %d's send cell %d is not its colour", ns[i],
                            p, r, c);
                }
            SDL_FreeSurface(s);
        }
        dv_model_free(&m);
    }
}
END_TEST

/* A hybrid run at 4 ranks: tensor-parallel pairs {0,1} and {2,3} each allreduce (rd),
 * then the data-parallel pairs {0,2} and {1,3} each ring-allreduce 4 floats; pipeline
 * traffic beside them, which is no call. Each call stays on its communicator. */
static const char HYBRID[] = "# dtlab-trace 1\n# ranks 4\n# program train\n"
    "# train mode hybrid dp 2 tp 2 pp 1\n"
    "0.0 0.0 0 mark -1 allreduce_rd call -1 -1 0 4 16\n"
    "0.1 0.2 0 send 1 allreduce_rd exchange 0 0 0 4 16\n"
    "0.1 0.2 0 recv 1 allreduce_rd exchange 0 0 0 4 16\n"
    "0.2 0.2 0 reduce -1 allreduce_rd exchange 0 0 0 4 16\n"
    "0.3 0.4 0 compute -1 train forward 1 0 0 0 0\n"
    "0.5 0.6 0 send 1 pipeline activations 1 0 0 1 64\n"
    "1.0 1.0 0 mark -1 allreduce_ring call -1 -1 0 4 16\n"
    "1.1 1.2 0 send 2 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "1.1 1.2 0 recv 2 allreduce_ring reduce-scatter 0 0 0 2 8\n"
    "1.2 1.2 0 reduce -1 allreduce_ring reduce-scatter 0 0 0 2 8\n"
    "1.3 1.4 0 send 2 allreduce_ring allgather 0 0 0 2 8\n"
    "1.3 1.4 0 recv 2 allreduce_ring allgather 0 1 2 4 8\n"
    "0.0 0.0 1 mark -1 allreduce_rd call -1 -1 0 4 16\n"
    "0.1 0.2 1 send 0 allreduce_rd exchange 0 0 0 4 16\n"
    "0.1 0.2 1 recv 0 allreduce_rd exchange 0 0 0 4 16\n"
    "0.2 0.2 1 reduce -1 allreduce_rd exchange 0 0 0 4 16\n"
    "0.5 0.6 1 recv 0 pipeline activations 1 0 0 1 64\n"
    "1.0 1.0 1 mark -1 allreduce_ring call -1 -1 0 4 16\n"
    "1.1 1.2 1 send 3 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "1.1 1.2 1 recv 3 allreduce_ring reduce-scatter 0 0 0 2 8\n"
    "1.2 1.2 1 reduce -1 allreduce_ring reduce-scatter 0 0 0 2 8\n"
    "1.3 1.4 1 send 3 allreduce_ring allgather 0 0 0 2 8\n"
    "1.3 1.4 1 recv 3 allreduce_ring allgather 0 1 2 4 8\n"
    "0.0 0.0 2 mark -1 allreduce_rd call -1 -1 0 4 16\n"
    "0.1 0.2 2 send 3 allreduce_rd exchange 0 0 0 4 16\n"
    "0.1 0.2 2 recv 3 allreduce_rd exchange 0 0 0 4 16\n"
    "0.2 0.2 2 reduce -1 allreduce_rd exchange 0 0 0 4 16\n"
    "1.0 1.0 2 mark -1 allreduce_ring call -1 -1 0 4 16\n"
    "1.1 1.2 2 send 0 allreduce_ring reduce-scatter 0 0 0 2 8\n"
    "1.1 1.2 2 recv 0 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "1.2 1.2 2 reduce -1 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "1.3 1.4 2 send 0 allreduce_ring allgather 0 1 2 4 8\n"
    "1.3 1.4 2 recv 0 allreduce_ring allgather 0 0 0 2 8\n"
    "0.0 0.0 3 mark -1 allreduce_rd call -1 -1 0 4 16\n"
    "0.1 0.2 3 send 2 allreduce_rd exchange 0 0 0 4 16\n"
    "0.1 0.2 3 recv 2 allreduce_rd exchange 0 0 0 4 16\n"
    "0.2 0.2 3 reduce -1 allreduce_rd exchange 0 0 0 4 16\n"
    "1.0 1.0 3 mark -1 allreduce_ring call -1 -1 0 4 16\n"
    "1.1 1.2 3 send 1 allreduce_ring reduce-scatter 0 0 0 2 8\n"
    "1.1 1.2 3 recv 1 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "1.2 1.2 3 reduce -1 allreduce_ring reduce-scatter 0 1 2 4 8\n"
    "1.3 1.4 3 send 1 allreduce_ring allgather 0 1 2 4 8\n"
    "1.3 1.4 3 recv 1 allreduce_ring allgather 0 0 0 2 8\n";

START_TEST(test_subcomms)
{
    static const struct { const char *coll; dv_mask members; const char *on; } want[] = {
        { "allreduce_rd", 0x3, "on ranks 0,1:" }, { "allreduce_rd", 0xc, "on ranks 2,3:" },
        { "allreduce_ring", 0x5, "on ranks 0,2:" }, { "allreduce_ring", 0xa, "on ranks 1,3:" },
    };
    char s[512];
    dv_model m;
    build_ok(&m, HYBRID, "hybrid");
    REQUIRE(strcmp(m.title, "train: mode hybrid, dp 2, tp 2, pp 1") == 0, "title '%s'",
            m.title);
    REQUIRE(m.ncalls == 4, "hybrid: %d calls, want 4 (two per communicator kind; the "
            "pipeline's messages are none)", m.ncalls);
    for (int c = 0; c < 4; c++) {
        const dv_call *C = &m.calls[c];
        REQUIRE(strcmp(C->coll, want[c].coll) == 0 && C->members == want[c].members &&
                C->size == 2 && C->nframes == (c < 2 ? 1 : 2), "call %d: %s on %#llx (size "
                "%d, %d frames), want %s on %#llx", c, C->coll,
                (unsigned long long)C->members, C->size, C->nframes, want[c].coll,
                (unsigned long long)want[c].members);
        dv_pos_describe(&m, C->first_pos, s, sizeof s);
        REQUIRE(strstr(s, want[c].on) != NULL, "call %d: '%s' does not say '%s'", c, s,
                want[c].on);
        /* every member ends with both members' sums; the others hold nothing */
        dv_mask st[4 * DV_MAX_CELLS];
        dv_state(&m, c, C->nframes, st);
        for (int r = 0; r < 4; r++)
            for (int i = 0; i < C->ncells; i++)
                REQUIRE(st[r * C->ncells + i] == (C->members >> r & 1 ? C->members : 0),
                        "call %d: rank %d cell %d ends with %#llx", c, r, i,
                        (unsigned long long)st[r * C->ncells + i]);
        /* the cost model at N = 2: what each member sent, and nothing for the others */
        double expect[4], sent[4];
        char text[256];
        REQUIRE(dv_formula(&m, c, expect, text, sizeof text) == 1 && strstr(text, "N = 2"),
                "call %d: formula '%s'", c, text);
        dv_bytes_sent(&m, c, C->nframes, sent);
        for (int r = 0; r < 4; r++)
            REQUIRE(expect[r] == (C->members >> r & 1 ? 16 : 0) && sent[r] == expect[r],
                    "call %d: rank %d sent %g bytes, the formula (%s) says %g", c, r, sent[r],
                    text, expect[r]);
    }
    dv_model_free(&m);

    /* a rank alone on its communicator: a call of its own, with nothing to move */
    static const char alone[] = "# dtlab-trace 1\n# ranks 3\n"
        "0.0 0.0 0 mark -1 allreduce_rd call -1 -1 0 4 16\n"
        "0.1 0.2 0 send 1 allreduce_rd exchange 0 0 0 4 16\n"
        "0.1 0.2 0 recv 1 allreduce_rd exchange 0 0 0 4 16\n"
        "0.2 0.2 0 reduce -1 allreduce_rd exchange 0 0 0 4 16\n"
        "0.0 0.0 1 mark -1 allreduce_rd call -1 -1 0 4 16\n"
        "0.1 0.2 1 send 0 allreduce_rd exchange 0 0 0 4 16\n"
        "0.1 0.2 1 recv 0 allreduce_rd exchange 0 0 0 4 16\n"
        "0.2 0.2 1 reduce -1 allreduce_rd exchange 0 0 0 4 16\n"
        "0.0 0.0 2 mark -1 allreduce_rd call -1 -1 0 4 16\n";
    build_ok(&m, alone, "alone");
    REQUIRE(m.ncalls == 2 && m.calls[0].members == 0x3 && m.calls[0].nframes == 1 &&
            m.calls[1].members == 0x4 && m.calls[1].size == 1 && m.calls[1].nframes == 0,
            "alone: %d calls", m.ncalls);
    dv_model_free(&m);
}
END_TEST

/* In a trace that marks its calls, a training mode's own messages are no call; in one
 * without marks (hand-written, old lessons) every transfer still counts. */
START_TEST(test_unmarked_traffic)
{
    static const char pp[] =
        "0.1 0.2 0 send 1 pipeline activations 1 0 0 1 64\n"
        "0.1 0.2 1 recv 0 pipeline activations 1 0 0 1 64\n"
        "0.3 0.4 1 send 0 pipeline gradients 1 0 0 1 64\n"
        "0.3 0.4 0 recv 1 pipeline gradients 1 0 0 1 64\n";
    static const char mark[] = "0.0 0.0 0 mark -1 reduce_tree call -1 -1 0 1 8\n"
                               "0.0 0.0 1 mark -1 reduce_tree call -1 -1 0 1 8\n"
                               "0.6 0.7 1 send 0 reduce_tree reduce 0 0 0 1 8\n"
                               "0.6 0.7 0 recv 1 reduce_tree reduce 0 0 0 1 8\n";
    char text[2048];
    dv_model m;
    snprintf(text, sizeof text, "%s%s", HEAD2, pp);
    build_ok(&m, text, "pipeline traffic alone");
    REQUIRE(m.ncalls >= 1 && strcmp(m.calls[0].coll, "pipeline") == 0, "without marks the "
            "transfers make calls: %d calls", m.ncalls);
    dv_model_free(&m);
    snprintf(text, sizeof text, "%s%s%s", HEAD2, pp, mark);
    build_ok(&m, text, "pipeline traffic and a marked reduce");
    REQUIRE(m.ncalls == 1 && strcmp(m.calls[0].coll, "reduce_tree") == 0 &&
            m.calls[0].nframes == 1, "with marks: %d calls, the first %s", m.ncalls,
            m.ncalls ? m.calls[0].coll : "-");
    REQUIRE(m.trace.n == 8, "the pipeline's events left the trace: %zu", m.trace.n);
    dv_model_free(&m);
    snprintf(text, sizeof text, "%s# train mode pp schedule 1f1b stages 2 micro 1\n%s", HEAD2,
             pp);
    build_ok(&m, text, "a training trace without marks");
    REQUIRE(m.ncalls == 0 && strcmp(m.title, "train: mode pp, schedule 1f1b, stages 2, "
            "micro 1") == 0, "%d calls, title '%s'", m.ncalls, m.title);
    dv_model_free(&m);
}
END_TEST

/* ==== traces the lessons and build/train wrote ($DTVIZ_TRACES) ==== */

/* The built-ins a lesson's trace is compared with, by its number. */
static int lesson_algos(int lesson, int *algos)
{
    switch (lesson) {
    case 3: algos[0] = 4; return 1;
    case 4: algos[0] = 5; return 1;
    case 5: algos[0] = 8; algos[1] = 9; return 2;
    case 6: algos[0] = 2; return 1;
    case 7: algos[0] = 1; return 1;
    case 8: algos[0] = 0; return 1;
    case 9: algos[0] = 3; algos[1] = 6; algos[2] = 0; return 3;
    case 10: algos[0] = 7; return 1;
    }
    return 0;
}

/* The rank that sends nothing in call c (the root of a reduce or gather), or -1. */
static int silent_rank(const dv_model *m, int c)
{
    dv_mask senders = 0;
    const dv_call *C = &m->calls[c];
    for (int f = C->first_frame; f < C->first_frame + C->nframes; f++)
        for (int i = 0; i < m->frames[f].nmsg; i++)
            senders |= bit(m->msgs[m->frames[f].first_msg + i].src);
    for (int r = 0; r < m->nranks; r++)
        if (!(senders & bit(r)))
            return r;
    return -1;
}

/* Every call of a lesson's trace whose coll is one of the lesson's algorithms, against
 * the built-in at the same rank count and count: the reference's checks, then the
 * built-in model's frames and masks. Returns how many calls were compared. */
static int compare_lesson(const dv_model *m, int lesson, const char *file)
{
    int algos[3], na = lesson_algos(lesson, algos), compared = 0;
    char what[512], err[256];
    ref R = { 0 };
    for (int a = 0; a < na; a++)
        for (int c = 0; c < m->ncalls; c++) {
            const dv_call *C = &m->calls[c];
            if (strcmp(C->coll, COLL[algos[a]]) != 0)
                continue;
            int root = C->cls == DV_CLASS_ROOTED ? C->root : silent_rank(m, c);
            if ((algos[a] == 4 || algos[a] == 5 || algos[a] >= 8) && root != 0 &&
                m->nranks > 1)
                continue;                     /* the built-ins have root 0 */
            snprintf(what, sizeof what, "%s, call %d (%s, count %lld)", file, c, C->coll,
                     C->count);
            REQUIRE(C->esize > 0, "%s: esize %g", what, C->esize);
            ref_build(&R, algos[a], m->nranks, C->count);
            check_call(m, c, &R, C->esize, what);

            dv_model b;
            REQUIRE(dv_model_algo(&b, algos[a], m->nranks, C->count, err, sizeof err) == 0,
                    "%s: built-in: %s", what, err);
            REQUIRE(b.ncalls == 1 && b.calls[0].nframes == C->nframes && b.calls[0].ncells ==
                    C->ncells, "%s: the built-in has %d frames, %d cells", what,
                    b.ncalls ? b.calls[0].nframes : -1, b.ncalls ? b.calls[0].ncells : -1);
            size_t n = (size_t)m->nranks * C->ncells;
            dv_mask *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
            for (int k = 0; k <= C->nframes; k++) {
                const dv_frame *F = &m->frames[C->first_frame + k], *G = &b.frames[k];
                REQUIRE(k == C->nframes || (strcmp(F->phase, G->phase) == 0 &&
                        F->step == G->step), "%s: frame %d is %s %d, the built-in's %s %d",
                        what, k, F->phase, F->step, G->phase, G->step);
                dv_state(m, c, k, x);
                dv_state(&b, 0, k, y);
                REQUIRE(memcmp(x, y, n * sizeof *x) == 0, "%s: masks after %d frames differ "
                        "from the built-in's", what, k);
            }
            free(x);
            free(y);
            dv_model_free(&b);
            compared++;
        }
    free(R.msg);
    return compared;
}

/* Lesson 27's trace: its two passes (the plain cut, then zig-zag) against the built-ins
 * and the definition (check_attn), and its timetable: on every rank, each ring step's
 * "attn s" lies inside "kv s", the transfer of the next block, in both passes. */
static int check_lesson27(const dv_model *m, const char *file)
{
    char what[512], err[256];
    int N = m->nranks;
    REQUIRE(m->ncalls == 2, "%s: %d calls, want the two passes", file, m->ncalls);
    for (int c = 0; c < 2; c++) {
        const dv_call *C = &m->calls[c];
        snprintf(what, sizeof what, "%s, call %d (%s, count %lld)", file, c, C->coll, C->count);
        REQUIRE(C->esize > 0, "%s: esize %g", what, C->esize);
        check_attn(m, c, c, N, C->count, what);
    }
    dv_tt tt;
    REQUIRE(dv_tt_build(&tt, m, err, sizeof err) == 0, "%s: timetable: %s", file, err);
    REQUIRE(tt.nsteps == 2, "%s: %d timetable steps, want 2", file, tt.nsteps);
    for (int p = 1; p <= 2; p++)
        for (int r = 0; r < N; r++)
            for (int st = 0; st < N; st++) {
                char a[24], k[24];
                const dv_tt_block *A = NULL, *K = NULL;
                snprintf(a, sizeof a, "attn %d", st);
                snprintf(k, sizeof k, "kv %d", st);
                for (int b = 0; b < tt.nblocks; b++) {
                    const dv_tt_block *B = &tt.blocks[b];
                    if (B->rank == r && B->step == p && strcmp(B->label, a) == 0)
                        A = B;
                    if (B->rank == r && B->step == p && strcmp(B->label, k) == 0)
                        K = B;
                }
                REQUIRE(A != NULL && A->lane == 0, "%s: pass %d rank %d: no '%s'", file, p, r, a);
                REQUIRE((K != NULL) == (st < N - 1), "%s: pass %d rank %d: '%s' %s", file, p,
                        r, k, K ? "after the last step" : "missing");
                REQUIRE(K == NULL || (K->lane == 1 && K->t0 <= A->t0 && A->t1 <= K->t1),
                        "%s: pass %d rank %d: '%s' [%g, %g] is not under '%s' [%g, %g]", file,
                        p, r, a, A->t0, A->t1, k, K->t0, K->t1);
            }
    dv_tt_free(&tt);
    return 2;
}

/* A DDP training trace: every ring allreduce ends with every cell of its members holding
 * every member. */
static int check_ddp(const dv_model *m, const char *file)
{
    int rings = 0;
    for (int c = 0; c < m->ncalls; c++) {
        const dv_call *C = &m->calls[c];
        if (strcmp(C->coll, "allreduce_ring") != 0)
            continue;
        dv_mask *st = malloc((size_t)m->nranks * C->ncells * sizeof *st);
        dv_state(m, c, C->nframes, st);
        for (int i = 0; i < m->nranks * C->ncells; i++)
            REQUIRE(st[i] == (C->members >> (i / C->ncells) & 1 ? C->members : 0), "%s: call "
                    "%d (count %lld, members %#llx): rank %d cell %d ends with %#llx", file, c,
                    C->count, (unsigned long long)C->members, i / C->ncells, i % C->ncells,
                    (unsigned long long)st[i]);
        free(st);
        rings++;
    }
    return rings;
}

START_TEST(test_real_traces)
{
    const char *dir = getenv("DTVIZ_TRACES");
    if (dir == NULL || dir[0] == '\0') {
        printf("viz_model: DTVIZ_TRACES is not set: skipping the lessons' traces\n");
        return;
    }
    DIR *d = opendir(dir);
    REQUIRE(d != NULL, "DTVIZ_TRACES=%s: cannot open the directory", dir);
    struct dirent *e;
    int files = 0;
    char path[4096], err[512];
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".trace") != 0)
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        dt_trace t;
        REQUIRE(dt_trace_read(path, &t, err, sizeof err) == 0, "%s", err);
        dv_model m;
        REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s: %s", path, err);
        REQUIRE(m.from_trace, "%s: from_trace is 0", path);
        check_struct(&m, e->d_name);
        check_positions(&m, 0, 1, e->d_name);
        int lesson = 0, found = -1;
        if (sscanf(e->d_name, "%2d_", &lesson) == 1 && lesson_algos(lesson, (int[3]){0})) {
            found = compare_lesson(&m, lesson, e->d_name);
            REQUIRE(found > 0 || m.nranks == 1, "%s: no call to compare", e->d_name);
        } else if (strncmp(e->d_name, "27_", 3) == 0) {
            found = check_lesson27(&m, e->d_name);
        } else if (strncmp(e->d_name, "train-ddp", 9) == 0) {
            found = check_ddp(&m, e->d_name);
            REQUIRE(found > 0 || m.nranks == 1, "%s: no ring allreduce", e->d_name);
        }
        for (int c = 0; strncmp(e->d_name, "train-", 6) == 0 && c < m.ncalls; c++)
            REQUIRE(strcmp(m.calls[c].coll, "pipeline") != 0 && strcmp(m.calls[c].coll,
                    "dp") != 0, "%s: call %d is a training mode's own traffic (%s)",
                    e->d_name, c, m.calls[c].coll);
        printf("viz_model: %s: %d ranks, %d calls, %d positions", e->d_name, m.nranks,
               m.ncalls, m.npos);
        if (found >= 0)
            printf(", %d calls checked", found);
        printf("\n");
        dv_model_free(&m);
        files++;
    }
    closedir(d);
    REQUIRE(files > 0, "DTVIZ_TRACES=%s holds no .trace file", dir);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("viz_model");
    TCase *tc = tcase_create("builtin");
    tcase_add_test(tc, test_algo_names);
    tcase_add_loop_test(tc, test_algo, 0, NREF);
    tcase_add_loop_test(tc, test_ring_attention, 0, 2);
    tcase_add_test(tc, test_algo_empty);
    tcase_add_test(tc, test_counters);
    tcase_add_test(tc, test_colors);
    tcase_add_test(tc, test_alltoall_buffers);
    tcase_add_test(tc, test_ring_attention_text);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    TCase *tr = tcase_create("traces");
    tcase_add_test(tr, test_trace_ring);
    tcase_add_test(tr, test_trace_limits);
    tcase_add_test(tr, test_trace_odd);
    tcase_add_loop_test(tr, test_trace_rules, 0, (int)(sizeof RULES / sizeof RULES[0]));
    tcase_add_test(tr, test_trace_order);
    tcase_add_test(tr, test_subcomms);
    tcase_add_test(tr, test_unmarked_traffic);
    tcase_add_test(tr, test_real_traces);
    tcase_add_test(tr, test_vias);
    tcase_set_timeout(tr, 120);
    suite_add_tcase(s, tr);
    return unit_run(s);
}
