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
