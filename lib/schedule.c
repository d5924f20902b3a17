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
 * Both schedules are one formula with w = dt_pp_warmup forwards first (GPipe: w = M):
 *
 *     position   0 .. w-1        w, w+1, ... in pairs     2M-w .. 2M-1
 *     runs       F0 .. F(w-1)    F(w) B0 F(w+1) B1 ...    B(M-w) .. B(M-1)
 *                 warm-up         steady 1F1B              cool-down
 *
 * so F m sits at m (m < w) or 2m - w, and B m at w + 2m + 1 (m < M - w) or M + m.
 * A stage stashes a micro-batch at its F and frees it at its B: during the steady phase
 * it holds the w warm-up ones plus the one just run forward, w + 1 = min(P-s, M) (or M
 * when w = M), which is why 1F1B needs P stashes where GPipe needs M. */

#include <limits.h>     /* for the drawing at the end of the section */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int dt_pp_warmup(int schedule, int P, int M, int s)
{
    if (schedule == 0)
        return M;
    return P - s - 1 < M ? P - s - 1 : M;
}

static int pp_bad(int schedule, int P, int M, int s)
{
    return (schedule != 0 && schedule != 1) || P < 1 || M < 1 || s < 0 || s >= P;
}

/* The operation at position k of stage s: the inverse of dt_pp_index. */
static dt_pp_op pp_op_at(int schedule, int P, int M, int s, int k)
{
    int w = dt_pp_warmup(schedule, P, M, s);
    if (k < w)
        return (dt_pp_op){ 'F', k };
    if (k >= 2 * M - w)
        return (dt_pp_op){ 'B', k - M };
    int j = k - w;
    return j % 2 == 0 ? (dt_pp_op){ 'F', w + j / 2 } : (dt_pp_op){ 'B', (j - 1) / 2 };
}

int dt_pp_index(int schedule, int P, int M, int s, char kind, int micro)
{
    if (pp_bad(schedule, P, M, s) || micro < 0 || micro >= M)
        return -1;
    int w = dt_pp_warmup(schedule, P, M, s);
    if (kind == 'F')
        return micro < w ? micro : 2 * micro - w;
    if (kind == 'B')
        return micro < M - w ? w + 2 * micro + 1 : M + micro;
    return -1;
}

int dt_pp_order(int schedule, int P, int M, int s, dt_pp_op *ops)
{
    if (pp_bad(schedule, P, M, s))
        return -1;
    for (int k = 0; k < 2 * M; k++)
        ops[k] = pp_op_at(schedule, P, M, s, k);
    return 2 * M;
}

int dt_pp_peak_stash(int schedule, int P, int M, int s)
{
    if (pp_bad(schedule, P, M, s))
        return -1;
    int w = dt_pp_warmup(schedule, P, M, s);
    return w < M ? w + 1 : M;
}

double dt_pp_bubble(int P, int M)
{
    return (double)(P - 1) / (double)(M + P - 1);
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
 * stage 0's backwards). */
int dt_pp_timetable(int schedule, int P, int M, int tb, int *start)
{
    if (pp_bad(schedule, P, M, 0) || tb < 1)
        return -1;
    int n = 2 * M, left = P * n, nslots = 0;
    for (int i = 0; i < P * n; i++)
        start[i] = -1;
    while (left > 0) {
        int progress = 0;
        for (int s = 0; s < P; s++) {
            int *row = start + (size_t)s * n;
            int k = 0;
            while (k < n && row[k] >= 0)
                k++;
            for (; k < n; k++) {
                dt_pp_op op = pp_op_at(schedule, P, M, s, k);
                int t = 0;
                if (k > 0) {
                    dt_pp_op prev = pp_op_at(schedule, P, M, s, k - 1);
                    t = row[k - 1] + (prev.kind == 'F' ? 1 : tb);
                }
                int dep = op.kind == 'F' ? s - 1 : s + 1;   /* the stage it waits on */
                if (dep >= 0 && dep < P) {
                    int d = start[(size_t)dep * n
                                  + dt_pp_index(schedule, P, M, dep, op.kind, op.micro)];
                    if (d < 0)
                        break;
                    int dend = d + (op.kind == 'F' ? 1 : tb);
                    t = dend > t ? dend : t;
                }
                row[k] = t;
                int end = t + (op.kind == 'F' ? 1 : tb);
                nslots = end > nslots ? end : nslots;
                left--;
                progress = 1;
            }
        }
        if (!progress)
            return -1;
    }
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

int dt_pp_draw(int schedule, int P, int M, int tb, char *buf, size_t len)
{
    if (pp_bad(schedule, P, M, 0) || tb < 1 || (buf == NULL && len > 0))
        return -1;
    int n = 2 * M;
    int *start = malloc((size_t)P * n * sizeof *start);
    if (start == NULL)
        return -1;
    int nslots = dt_pp_timetable(schedule, P, M, tb, start);
    int w = 2, sw = 1;                     /* cell width ("F12"), stage number width */
    for (int v = M - 1; v >= 10; v /= 10)
        w++;
    for (int v = P - 1; v >= 10; v /= 10)
        sw++;
    char cell[16];
    size_t at = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int s = 0; s < P; s++) {
        pp_put(buf, len, &at, "stage %*d |", sw, s);
        for (int t = 0; t < nslots; t++) {
            dt_pp_op op = { '.', -1 };     /* what runs in slot t: a short search */
            for (int k = 0; k < n; k++) {
                dt_pp_op o = pp_op_at(schedule, P, M, s, k);
                int t0 = start[(size_t)s * n + k];
                if (t >= t0 && t < t0 + (o.kind == 'F' ? 1 : tb))
                    op = o;
            }
            if (op.micro >= 0)
                snprintf(cell, sizeof cell, "%c%d", op.kind, op.micro);
            else
                snprintf(cell, sizeof cell, ".");
            if (t + 1 < nslots)
                pp_put(buf, len, &at, " %-*s", w, cell);
            else
                pp_put(buf, len, &at, " %s\n", cell);
        }
    }
    free(start);
    return at > (size_t)INT_MAX ? -1 : (int)at;
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
