/* The pure arithmetic of every algorithm: who talks to whom, and which chunk moves,
 * at each step. No MPI, no memory: the collectives, the viewer and the exercise tests
 * all call these, so what the viewer animates is what the code does.
 *
 * Ranks are 0..n-1. A buffer of `count` elements is cut into n chunks; when count does
 * not divide by n, the first count % n chunks hold one element more. */
#ifndef DT_SCHEDULE_H
#define DT_SCHEDULE_H

#include <stddef.h>

/* ==== chunks ==== */

/* Chunk i of n over count elements is [*lo, *hi). Chunks are contiguous, in order,
 * cover every element once, and differ in size by at most one. */
void dt_chunk_bounds(size_t count, int n, int i, size_t *lo, size_t *hi);

/* ==== ring ==== */

static inline int dt_ring_left(int rank, int n)  { return (rank - 1 + n) % n; }
static inline int dt_ring_right(int rank, int n) { return (rank + 1) % n; }

/* Reduce-scatter on a ring, steps s = 0..n-2. At step s, rank r sends the chunk it has
 * been summing to its right neighbour and receives one from its left, which it adds its
 * own data to. Invariant: after step s the chunk rank r last received holds the sum of
 * s+2 ranks' data; after n-1 steps rank r owns chunk r, fully reduced. */
int dt_ring_rs_send_chunk(int rank, int n, int step);
int dt_ring_rs_recv_chunk(int rank, int n, int step);

/* Allgather on a ring, steps s = 0..n-2. Rank r starts owning chunk r, sends at step s
 * the chunk it received at step s-1, and after n-1 steps holds every chunk. */
int dt_ring_ag_send_chunk(int rank, int n, int step);
int dt_ring_ag_recv_chunk(int rank, int n, int step);

/* ==== binomial tree ====
 * Ranks are renumbered relative to the root, v = (rank - root + n) % n. Virtual rank v > 0
 * receives from v minus its lowest set bit; it then sends to v + 2^k for every 2^k below
 * its lowest set bit (the root: below the smallest power of two >= n), largest 2^k first.
 * A broadcast takes ceil(log2 n) rounds. */

/* The parent of rank, or -1 for the root. */
int dt_tree_parent(int rank, int root, int n);

/* Writes rank's children into children[] (at most 31), farthest first (v + 2^k for
 * decreasing k: the order a broadcast sends in), and returns how many there are. */
int dt_tree_children(int rank, int root, int n, int *children);

/* The round (0-based) in which rank receives from its parent, -1 for the root: virtual
 * rank v receives in round ceil(log2 n) - 1 - log2(lowest set bit of v). Broadcast and
 * scatter run the rounds forwards, reduce and gather backwards, every rank counting
 * every round so that all ranks agree on the step number. */
int dt_tree_round(int rank, int root, int n);

/* Number of ranks in the subtree under rank, rank included (consecutive virtual ranks
 * v .. v+size-1): what a binomial gather or scatter moves through it. */
int dt_tree_subtree_size(int rank, int root, int n);

/* ==== recursive doubling ====
 * For n ranks, let p be the largest power of two <= n and extra = n - p. The first
 * 2*extra ranks pair up (2i, 2i+1): the even one hands its data to the odd one and
 * sits out; the p remaining ranks run log2 p exchange steps with partner v XOR 2^s;
 * at the end the odd ones hand the result back. */

int dt_pow2_floor(int n);     /* largest power of two <= n (n >= 1) */
int dt_log2_ceil(int n);      /* smallest k with 2^k >= n */

/* The rank's number among the p active ranks, or -1 if it sits out. */
int dt_rd_vrank(int rank, int n);
/* The real rank of active rank v. */
int dt_rd_rank(int vrank, int n);
/* Number of exchange steps (log2 p). */
int dt_rd_steps(int n);
/* The real rank this rank exchanges with at step s (rank must be active). */
int dt_rd_partner(int rank, int n, int step);
/* For the first 2*extra ranks: the rank paired with this one during the fold; -1 if none. */
int dt_rd_fold_peer(int rank, int n);

/* ==== pairwise exchange (all-to-all) ====
 * Steps s = 1..n-1: rank r sends its block for (r+s) % n and receives the block from
 * (r-s+n) % n. Step 0 is the local copy of its own block. */
static inline int dt_a2a_send_peer(int rank, int n, int step) { return (rank + step) % n; }
static inline int dt_a2a_recv_peer(int rank, int n, int step) { return (rank - step + n) % n; }

#endif /* DT_SCHEDULE_H */
