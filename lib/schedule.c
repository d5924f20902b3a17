/* The pure arithmetic of every algorithm (see schedule.h). */
#include "schedule.h"

/* ==== chunks ==== */

void dt_chunk_bounds(size_t count, int n, int i, size_t *lo, size_t *hi)
{
    size_t base = count / (size_t)n, extra = count % (size_t)n, k = (size_t)i;
    /* the first `extra` chunks are one element longer */
    *lo = k * base + (k < extra ? k : extra);
    *hi = *lo + base + (k < extra ? 1 : 0);
}

/* ==== ring ====
 *
 * Reduce-scatter, 3 ranks, chunks a b c. At step s rank r sends chunk (r-s-1) mod n
 * and receives chunk (r-s-2) mod n from its left neighbour, adding its own share:
 *
 *     step   rank 0            rank 1            rank 2
 *      0     send c, recv b    send a, recv c    send b, recv a
 *      1     send b, recv a    send c, recv b    send a, recv c
 *
 * After step 1 rank 0 holds a = a0+a1+a2, rank 1 b, rank 2 c: rank r owns chunk r.
 * Allgather then starts from there: at step s rank r passes on chunk (r-s) mod n. */

static int mod(int a, int n) { return ((a % n) + n) % n; }

int dt_ring_rs_send_chunk(int rank, int n, int step) { return mod(rank - step - 1, n); }
int dt_ring_rs_recv_chunk(int rank, int n, int step) { return mod(rank - step - 2, n); }
int dt_ring_ag_send_chunk(int rank, int n, int step) { return mod(rank - step, n); }
int dt_ring_ag_recv_chunk(int rank, int n, int step) { return mod(rank - step - 1, n); }

/* ==== binomial tree ====
 *
 * 8 ranks, root 0 (virtual ranks shown; real rank = (v + root) mod n):
 *
 *     round 0:  0 -> 4
 *     round 1:  0 -> 2            4 -> 6
 *     round 2:  0 -> 1   2 -> 3   4 -> 5   6 -> 7
 *
 * v's parent is v with its lowest set bit cleared; v's children are v + 2^k for each
 * 2^k below that lowest set bit (and below n). */

static int lowbit_or_top(int v, int n)
{
    if (v != 0)
        return v & -v;
    int top = 1;
    while (top < n)
        top <<= 1;
    return top;
}

int dt_tree_parent(int rank, int root, int n)
{
    int v = mod(rank - root, n);
    if (v == 0)
        return -1;
    return mod((v & (v - 1)) + root, n);
}

int dt_tree_children(int rank, int root, int n, int *children)
{
    int v = mod(rank - root, n), k = 0;
    for (int m = lowbit_or_top(v, n) >> 1; m > 0; m >>= 1)
        if (v + m < n)
            children[k++] = mod(v + m + root, n);
    return k;
}

int dt_tree_round(int rank, int root, int n)
{
    int v = mod(rank - root, n);
    if (v == 0)
        return -1;
    return dt_log2_ceil(n) - 1 - dt_log2_ceil(v & -v);
}

int dt_tree_subtree_size(int rank, int root, int n)
{
    int v = mod(rank - root, n);
    int span = lowbit_or_top(v, n);
    return (v + span < n ? span : n - v);
}

/* ==== recursive doubling ==== */

int dt_pow2_floor(int n)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}

int dt_log2_ceil(int n)
{
    int k = 0;
    while ((1 << k) < n)
        k++;
    return k;
}

/* Ranks 0..2*extra-1 fold in pairs: even ranks sit out, odd rank 2i+1 becomes active
 * rank i. The rest shift down: rank r >= 2*extra becomes r - extra. */
int dt_rd_vrank(int rank, int n)
{
    int extra = n - dt_pow2_floor(n);
    if (rank < 2 * extra)
        return (rank % 2) ? rank / 2 : -1;
    return rank - extra;
}

int dt_rd_rank(int vrank, int n)
{
    int extra = n - dt_pow2_floor(n);
    return vrank < extra ? 2 * vrank + 1 : vrank + extra;
}

int dt_rd_steps(int n) { return dt_log2_ceil(dt_pow2_floor(n)); }

int dt_rd_partner(int rank, int n, int step)
{
    return dt_rd_rank(dt_rd_vrank(rank, n) ^ (1 << step), n);
}

int dt_rd_fold_peer(int rank, int n)
{
    int extra = n - dt_pow2_floor(n);
    if (rank >= 2 * extra)
        return -1;
    return rank ^ 1;
}

/* ==== pipeline timetables ====
 *
 * Every schedule is one formula on two lists of stage s: its forward table F[0..n-1]
 * and its backward table B[0..n-1] (n = vM), of which it runs w = dt_pp_warmup_v
 * forwards first:
 *
 *     position   0 .. w-1        w, w+1, ... in pairs        2n-w .. 2n-1
 *     runs       F[0] .. F[w-1]  F[w] B[0] F[w+1] B[1] ...   B[n-w] .. B[n-1]
 *                 warm-up         steady 1F1B                 cool-down
 *
 * so F[t] sits at t (t < w) or 2t - w, and B[i] at w + 2i + 1 (i < n - w) or n + i.
 *   GPipe, 1F1B   F[t] = F t and B[i] = B i; w = M (GPipe: all forwards first) or
 *                 min(P-s-1, M).
 *   interleaved   the tables run group by group (schedule.h): F through chunks 0 .. v-1,
 *                 B through chunks v-1 .. 0, each chunk over the group's micro-batches
 *                 in increasing order; w = min((v-1) g + P-s-1, n), g the first group's
 *                 size. P = 2, M = 4, v = 2, groups {0,1} {2,3}:
 *                     F  F0a F1a F0b F1b F2a F3a F2b F3b
 *                     B  B0b B1b B0a B1a B2b B3b B2a B3a
 *   zb-h1         1F1B's order, and after B i the W of micro-batch i - s (i >= s); the
 *                 last min(s, M) W's follow the last B. W's before F[t] (t >= w):
 *                 max(t-w-s, 0); before B[i]: max(i-s, 0).
 * A stage stashes a micro-batch (of one chunk) at its F and frees it at its B (zb-h1:
 * at its W): during the steady phase it holds the w warm-up ones plus the one just run
 * forward, w + 1 (or n when w = n); zb-h1 holds, besides 1F1B's P-s, the s whose W it
 * has put off: min(P, M). */

#include <limits.h>     /* INT_MAX: the bounds on the counts */
#include <stdarg.h>     /* the drawing at the end of the section */
#include <stdio.h>
#include <stdlib.h>

enum { GPIPE = 0, ONE_F_ONE_B = 1, INTERLEAVED = 2, ZB_H1 = 3 };   /* as in schedule.h */

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

int dt_pp_valid(int schedule, int P, int M, int v)
{
    if (schedule < GPIPE || schedule > ZB_H1 || P < 1 || M < 1 || v < 1)
        return 0;
    if (v != 1 && schedule != INTERLEAVED)
        return 0;
    return (long long)P * v * M <= (1 << 24);      /* every count and index fits an int */
}

static int pp_bad(int schedule, int P, int M, int v, int s)
{
    return !dt_pp_valid(schedule, P, M, v) || s < 0 || s >= P;
}

/* Costs: tb >= 1 and tw >= 0 (zb-h1: tw >= 1, its W is an operation of its own), and a
 * step that fits in an int (dt_pp_slots_v is below this bound). */
static int pp_bad_costs(int schedule, int P, int M, int v, int tb, int tw)
{
    if (pp_bad(schedule, P, M, v, 0) || tb < 1 || tw < (schedule == ZB_H1 ? 1 : 0))
        return 1;
    long long most = ((long long)v * imax(M, P) + imin(M, P)) * (1LL + tb + tw)
                     + (long long)P * tb;
    return most > INT_MAX / 2;
}

/* The slots an operation takes: a fused backward does dx and dW, tb + tw. */
static int pp_cost(int schedule, char kind, int tb, int tw)
{
    if (kind == 'F')
        return 1;
    if (kind == 'W')
        return tw;
    return schedule == ZB_H1 ? tb : tb + tw;
}

/* Interleaved's groups: k = M / P groups of consecutive micro-batches (one group when
 * M < P), cut as dt_chunk_bounds cuts elements. The group holding micro-batch m starts
 * at *lo and holds *g. (v = 1 never looks at them: its tables are F m and B m.) */
static void pp_group(int P, int M, int m, int *lo, int *g)
{
    int k = M >= P ? M / P : 1, big = M / k + 1, extra = M % k;
    int i = m < extra * big ? m / big : extra + (m - extra * big) / (big - 1);
    size_t l, h;
    dt_chunk_bounds((size_t)M, k, i, &l, &h);
    *lo = (int)l;
    *g = (int)(h - l);
}

/* Entry t of the forward table (fwd = 1) or the backward table (fwd = 0). Group [lo,
 * lo+g) fills the entries [v lo, v (lo+g)), g per chunk. */
static dt_pp_op pp_table(int P, int M, int v, int fwd, int t)
{
    int lo, g;
    pp_group(P, M, t / v, &lo, &g);
    int r = t - v * lo, j = r / g;
    return (dt_pp_op){ .kind = fwd ? 'F' : 'B', .micro = lo + r % g,
                       .chunk = fwd ? j : v - 1 - j };
}

/* Where (micro, chunk) sits in the forward or backward table: pp_table's inverse. */
static int pp_table_index(int P, int M, int v, int fwd, int micro, int chunk)
{
    int lo, g;
    pp_group(P, M, micro, &lo, &g);
    return v * lo + (fwd ? chunk : v - 1 - chunk) * g + micro - lo;
}

int dt_pp_nops(int schedule, int P, int M, int v)
{
    if (pp_bad(schedule, P, M, v, 0))
        return -1;
    return schedule == ZB_H1 ? 3 * M : 2 * v * M;
}

int dt_pp_warmup_v(int schedule, int P, int M, int v, int s)
{
    if (pp_bad(schedule, P, M, v, s))
        return -1;
    if (schedule == GPIPE)
        return M;
    int lo, g;
    pp_group(P, M, 0, &lo, &g);
    return imin((v - 1) * g + P - s - 1, v * M);
}

/* Stage s's order, read off the tables as the comment at the top of the section says. */
static int pp_fill(int schedule, int P, int M, int v, int s, dt_pp_op *ops)
{
    int n = v * M, w = dt_pp_warmup_v(schedule, P, M, v, s), k = 0, zb = schedule == ZB_H1;
    for (int t = 0; t < w; t++)
        ops[k++] = pp_table(P, M, v, 1, t);
    for (int i = 0; i < n; i++) {
        if (w + i < n)
            ops[k++] = pp_table(P, M, v, 1, w + i);
        ops[k++] = pp_table(P, M, v, 0, i);
        if (zb && i >= s)
            ops[k++] = (dt_pp_op){ .kind = 'W', .micro = i - s, .chunk = 0 };
    }
    for (int m = imax(M - s, 0); zb && m < M; m++)
        ops[k++] = (dt_pp_op){ .kind = 'W', .micro = m, .chunk = 0 };
    return k;
}

int dt_pp_order_v(int schedule, int P, int M, int v, int s, dt_pp_op *ops)
{
    if (pp_bad(schedule, P, M, v, s))
        return -1;
    return pp_fill(schedule, P, M, v, s, ops);
}

int dt_pp_index_v(int schedule, int P, int M, int v, int s, char kind, int micro,
                  int chunk)
{
    if (pp_bad(schedule, P, M, v, s) || micro < 0 || micro >= M || chunk < 0 || chunk >= v)
        return -1;
    int n = v * M, w = dt_pp_warmup_v(schedule, P, M, v, s), zb = schedule == ZB_H1;
    if (kind == 'F') {
        int t = pp_table_index(P, M, v, 1, micro, chunk);
        return t < w ? t : 2 * t - w + (zb ? imax(t - w - s, 0) : 0);
    }
    if (kind == 'B') {
        int i = pp_table_index(P, M, v, 0, micro, chunk);
        return (i < n - w ? w + 2 * i + 1 : n + i) + (zb ? imax(i - s, 0) : 0);
    }
    if (kind == 'W' && zb)          /* right after B (micro + s), or among the last */
        return micro + s < M ? dt_pp_index_v(schedule, P, M, v, s, 'B', micro + s, 0) + 1
                             : 2 * M + micro;
    return -1;
}

int dt_pp_peak_stash_v(int schedule, int P, int M, int v, int s)
{
    if (pp_bad(schedule, P, M, v, s))
        return -1;
    if (schedule == ZB_H1)
        return imin(P, M);
    int w = dt_pp_warmup_v(schedule, P, M, v, s);
    return w < v * M ? w + 1 : v * M;
}

int dt_pp_messages_v(int schedule, int P, int M, int v, int s)
{
    if (pp_bad(schedule, P, M, v, s))
        return -1;
    if (P == 1)                /* every chunk boundary is inside the one rank */
        return 0;
    return M * (2 * v - (s == 0) - (s == P - 1));
}

int dt_pp_slots_v(int schedule, int P, int M, int v, int tb, int tw)
{
    if (pp_bad_costs(schedule, P, M, v, tb, tw))
        return -1;
    if (schedule == ZB_H1)
        return imax(M, P) + (P - 1) * tb + M * (tb + tw);
    return (v * imax(M, P) + imin(M, P) - 1) * (1 + tb + tw);
}

double dt_pp_bubble_v(int schedule, int P, int M, int v, int tb, int tw)
{
    int T = dt_pp_slots_v(schedule, P, M, v, tb, tw);
    if (T < 0)
        return -1;
    int busy = (schedule == ZB_H1 ? M : v * M) * (1 + tb + tw);
    return (double)(T - busy) / T;
}

/* The operation op of stage s waits for besides its stage's previous one: stage *ds,
 * position *dk. Op's virtual stage is c = chunk P + s; F waits for F of c-1 (none at
 * c = 0), B for B of c+1 (at the last, c = vP-1, for its own F: the loss turns F into
 * B), W for its own B. */
static void pp_dep(int schedule, int P, int M, int v, int s, dt_pp_op op, int *ds, int *dk)
{
    int c = op.chunk * P + s, d = c;
    char kind = op.kind == 'W' ? 'B' : op.kind;
    if (op.kind == 'F')
        d = c - 1;
    else if (op.kind == 'B' && c < v * P - 1)
        d = c + 1;
    else if (op.kind == 'B')
        kind = 'F';
    *ds = d < 0 ? -1 : d % P;
    *dk = d < 0 ? -1 : dt_pp_index_v(schedule, P, M, v, *ds, kind, op.micro, d / P);
}

/* The clock, played forward: the placed operations of a stage are a prefix of its order;
 * in each round every stage places its next ones, start = max(end of its previous
 * operation, end of the operation it depends on), for as long as that dependency is
 * already placed. Rounds repeat until all are placed; a round without progress would be
 * a deadlock (an order whose stages wait on each other), reported as -1.
 *
 * GPipe, tb = 1: F m at stage s starts at m + s; the last forward ends at M+P-1; B m at
 * stage s starts at (M+P-1) + m + (P-1-s); the step ends at 2(M+P-1). Every stage is
 * busy 2M of those slots: idle (P-1)/(M+P-1). 1F1B ends at the same slot: it changes
 * the order, not the length of the critical path (stage 0's forwards, the last stage,
 * stage 0's backwards). Interleaved (M >= P) idles as many slots as 1F1B, but its slots
 * are chunks', 1/v of a stage's work; zb-h1's step is stage 0's work and one wait
 * (schedule.h). */
static int pp_clock(int schedule, int P, int M, int v, int tb, int tw, const dt_pp_op *ops,
                    int *start)
{
    int n = dt_pp_nops(schedule, P, M, v), left = P * n, nslots = 0;
    for (int i = 0; i < P * n; i++)
        start[i] = -1;
    while (left > 0) {
        int progress = 0;
        for (int s = 0; s < P; s++) {
            const dt_pp_op *o = ops + (size_t)s * n;
            int *row = start + (size_t)s * n;
            int k = 0;
            while (k < n && row[k] >= 0)
                k++;
            for (; k < n; k++) {
                int t = k > 0 ? row[k - 1] + pp_cost(schedule, o[k - 1].kind, tb, tw) : 0;
                int ds, dk;
                pp_dep(schedule, P, M, v, s, o[k], &ds, &dk);
                if (ds >= 0) {
                    int d = start[(size_t)ds * n + dk];
                    if (d < 0)
                        break;
                    char dkind = ops[(size_t)ds * n + dk].kind;
                    t = imax(t, d + pp_cost(schedule, dkind, tb, tw));
                }
                row[k] = t;
                nslots = imax(nslots, t + pp_cost(schedule, o[k].kind, tb, tw));
                left--;
                progress = 1;
            }
        }
        if (!progress)
            return -1;
    }
    return nslots;
}

/* Every stage's order, one after another (P * dt_pp_nops ops; the caller frees it). */
static dt_pp_op *pp_orders(int schedule, int P, int M, int v)
{
    int n = dt_pp_nops(schedule, P, M, v);
    dt_pp_op *ops = malloc((size_t)P * n * sizeof *ops);
    for (int s = 0; ops != NULL && s < P; s++)
        pp_fill(schedule, P, M, v, s, ops + (size_t)s * n);
    return ops;
}

int dt_pp_timetable_v(int schedule, int P, int M, int v, int tb, int tw, int *start)
{
    if (pp_bad_costs(schedule, P, M, v, tb, tw))
        return -1;
    dt_pp_op *ops = pp_orders(schedule, P, M, v);
    if (ops == NULL)
        return -1;
    int nslots = pp_clock(schedule, P, M, v, tb, tw, ops, start);
    free(ops);
    return nslots;
}

/* Appends to buf as snprintf would, counting what does not fit. */
__attribute__((format(printf, 4, 5)))
static void pp_put(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    size_t room = *at < len ? len - *at : 0;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(room ? buf + *at : NULL, room, fmt, ap);
    va_end(ap);
    *at += (size_t)(k > 0 ? k : 0);
}

int dt_pp_draw_v(int schedule, int P, int M, int v, int tb, int tw, char *buf, size_t len)
{
    if (pp_bad_costs(schedule, P, M, v, tb, tw) || v > 26 || (buf == NULL && len > 0))
        return -1;
    int n = dt_pp_nops(schedule, P, M, v);
    int *start = malloc((size_t)P * n * sizeof *start);
    dt_pp_op *ops = pp_orders(schedule, P, M, v);
    int nslots = start && ops ? pp_clock(schedule, P, M, v, tb, tw, ops, start) : -1;
    if (nslots < 0) {
        free(start);
        free(ops);
        return -1;
    }
    int w = 2 + (v > 1), sw = 1;       /* cell width ("F12", "F12b"), stage number width */
    for (int x = M - 1; x >= 10; x /= 10)
        w++;
    for (int x = P - 1; x >= 10; x /= 10)
        sw++;
    char cell[24];
    size_t at = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int s = 0; s < P; s++) {
        const dt_pp_op *o = ops + (size_t)s * n;
        const int *row = start + (size_t)s * n;
        pp_put(buf, len, &at, "stage %*d |", sw, s);
        for (int t = 0, k = 0; t < nslots; t++) {
            while (k < n && row[k] + pp_cost(schedule, o[k].kind, tb, tw) <= t)
                k++;                   /* the operations of a stage run one after another */
            if (k < n && row[k] <= t) {        /* "B3", or with chunks "B3b" */
                char letter[2] = { v > 1 ? (char)('a' + o[k].chunk) : '\0', '\0' };
                snprintf(cell, sizeof cell, "%c%d%s", o[k].kind, o[k].micro, letter);
            } else
                snprintf(cell, sizeof cell, ".");
            if (t + 1 < nslots)
                pp_put(buf, len, &at, " %-*s", w, cell);
            else
                pp_put(buf, len, &at, " %s\n", cell);
        }
    }
    free(start);
    free(ops);
    return at > (size_t)INT_MAX ? -1 : (int)at;
}

/* The functions of GPipe and 1F1B alone, as they were before the others came. */

static int pp_old(int schedule) { return schedule == GPIPE || schedule == ONE_F_ONE_B; }

int dt_pp_warmup(int schedule, int P, int M, int s)
{
    return pp_old(schedule) ? dt_pp_warmup_v(schedule, P, M, 1, s) : -1;
}

int dt_pp_order(int schedule, int P, int M, int s, dt_pp_op *ops)
{
    return pp_old(schedule) ? dt_pp_order_v(schedule, P, M, 1, s, ops) : -1;
}

int dt_pp_index(int schedule, int P, int M, int s, char kind, int micro)
{
    return pp_old(schedule) ? dt_pp_index_v(schedule, P, M, 1, s, kind, micro, 0) : -1;
}

int dt_pp_peak_stash(int schedule, int P, int M, int s)
{
    return pp_old(schedule) ? dt_pp_peak_stash_v(schedule, P, M, 1, s) : -1;
}

double dt_pp_bubble(int P, int M)
{
    return dt_pp_bubble_v(ONE_F_ONE_B, P, M, 1, 1, 0);
}

int dt_pp_timetable(int schedule, int P, int M, int tb, int *start)
{
    return pp_old(schedule) ? dt_pp_timetable_v(schedule, P, M, 1, tb, 0, start) : -1;
}

int dt_pp_draw(int schedule, int P, int M, int tb, char *buf, size_t len)
{
    return pp_old(schedule) ? dt_pp_draw_v(schedule, P, M, 1, tb, 0, buf, len) : -1;
}

/* ==== DDP buckets ==== */

/* Bad input, or a step that would not fit in an int (its length is at most 3L + cL + 1). */
static int ddp_bad(int L, int B, int c)
{
    return L < 1 || B < 1 || B > L || c < 0 || (3LL + c) * L + 1 > INT_MAX / 2;
}

void dt_ddp_bucket_layers(int L, int B, int b, int *lo, int *hi)
{
    size_t p, q;              /* positions in backward order: layer L-1 is position 0 */
    if (ddp_bad(L, B, 0) || b < 0 || b >= B) {
        *lo = *hi = -1;
        return;
    }
    dt_chunk_bounds((size_t)L, B, b, &p, &q);
    *lo = L - (int)q;
    *hi = L - (int)p;
}

/* The thread in bucket order: bucket b starts when it is ready (the backward of its
 * lowest layer lo has ended, at L + 2 (L - lo); without overlap, backward's end 3L) and
 * the thread is free. */
int dt_ddp_timetable(int L, int B, int c, int overlap, int *fwd, int *bwd, int *ar0,
                     int *ar1, int *opt)
{
    if (ddp_bad(L, B, c) || (overlap != 0 && overlap != 1))
        return -1;
    for (int i = 0; i < L; i++) {
        if (fwd)
            fwd[i] = i;
        if (bwd)
            bwd[i] = L + 2 * (L - 1 - i);
    }
    int free_at = 0;
    for (int b = 0; b < B; b++) {
        int lo, hi;
        dt_ddp_bucket_layers(L, B, b, &lo, &hi);
        int ready = overlap ? L + 2 * (L - lo) : 3 * L;
        int t = ready > free_at ? ready : free_at;
        free_at = t + c * (hi - lo);
        if (ar0)
            ar0[b] = t;
        if (ar1)
            ar1[b] = free_at;
    }
    if (opt)                  /* the last bucket, layer 0's, is ready when backward ends */
        *opt = free_at;
    return free_at + 1;
}

/* In layers: bucket k holds [lo, hi), so p_k = L - hi (the layers above it) and
 * L - q_k = lo (the layers below it, whose backward is still to come). */
int dt_ddp_hidden(int L, int B, int c, int overlap)
{
    if (ddp_bad(L, B, c) || (overlap != 0 && overlap != 1))
        return -1;
    int hidden = overlap ? INT_MAX : 0;
    for (int k = 0; overlap && k < B; k++) {
        int lo, hi;
        dt_ddp_bucket_layers(L, B, k, &lo, &hi);
        int bound = c * (L - hi) + 2 * lo;
        hidden = bound < hidden ? bound : hidden;
    }
    return hidden;
}

int dt_ddp_hidden_best(int L, int B, int c)
{
    if (ddp_bad(L, B, c))
        return -1;
    int lo, hi;
    dt_ddp_bucket_layers(L, B, B - 1, &lo, &hi);
    int all_but_last = c * (L - (hi - lo));
    return all_but_last < 2 * L ? all_but_last : 2 * L;
}
