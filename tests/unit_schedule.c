/* Unit tests of lib/schedule.c: the arithmetic every algorithm, the viewer and the
 * exercise tests share. No MPI: the schedules are run on paper, here on bitmasks.
 *
 * The idea: give every (rank, chunk) a set of ranks whose data it holds, one bit per rank,
 * and play the schedule step by step using nothing but the schedule functions. A reduction
 * ORs two sets (and must never OR overlapping sets: that would count a rank twice); a copy
 * replaces one. If the schedule is right, the sets end full exactly where the header says.
 *
 *   build/tests/unit_schedule            (CK_FORK=no to debug under gdb)
 */
#include <check.h>
#include "unit.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "schedule.h"

/* Fails the test with a message only when cond is false. (ck_assert_msg records a mark
 * point on every success, which is slow inside loops of millions.) */
#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* Independent references, written the slow obvious way. */
static int ref_log2_ceil(int n) { int k = 0; while ((1 << k) < n) k++; return k; }
static int ref_pow2_floor(int n) { int p = 1; while (p * 2 <= n) p *= 2; return p; }
static int popcount64(uint64_t x) { int c = 0; for (; x; x &= x - 1) c++; return c; }

/* ==== chunks ==== */

/* Chunk i of n is [lo, hi): contiguous, in order, covering [0, count) once, and the first
 * count % n chunks one element longer than the rest. */
static void check_chunks(size_t count, int n)
{
    size_t prev_hi = 0;
    for (int i = 0; i < n; i++) {
        size_t lo = (size_t)-1, hi = (size_t)-1;
        dt_chunk_bounds(count, n, i, &lo, &hi);
        size_t want = count / (size_t)n + ((size_t)i < count % (size_t)n ? 1 : 0);
        REQUIRE(lo == prev_hi, "count %zu n %d chunk %d: lo %zu, want %zu (gap or overlap)",
                count, n, i, lo, prev_hi);
        REQUIRE(hi >= lo && hi - lo == want, "count %zu n %d chunk %d: [%zu, %zu) has %zu "
                "elements, want %zu", count, n, i, lo, hi, hi - lo, want);
        prev_hi = hi;
    }
    REQUIRE(prev_hi == count, "count %zu n %d: chunks end at %zu", count, n, prev_hi);
}

START_TEST(test_chunk_bounds)
{
    for (size_t count = 0; count <= 300; count++)
        for (int n = 1; n <= 40; n++)
            check_chunks(count, n);
    static const size_t big[] = { 1000003, ((size_t)1 << 31) + 5, ((size_t)1 << 40) + 7 };
    static const int ns[] = { 1, 2, 3, 7, 64, 1000, 4099 };
    for (size_t b = 0; b < sizeof big / sizeof big[0]; b++)
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            check_chunks(big[b], ns[k]);
}
END_TEST

/* ==== ring ==== */

enum { RING_MAX = 16 };
typedef uint32_t set32;     /* bit q: rank q's data is in */

/* have[r][c]: the ranks whose data rank r's chunk c holds. */
typedef struct { set32 have[RING_MAX][RING_MAX]; } ring_state;

/* One reduce-scatter step: every rank sends a chunk right and adds the chunk from its left.
 * All sends of a step happen at once, so they read the state from before the step. */
static void ring_rs_step(ring_state *st, int n, int s)
{
    ring_state old = *st;
    for (int r = 0; r < n; r++) {
        int right = dt_ring_right(r, n);
        int sc = dt_ring_rs_send_chunk(r, n, s);
        int rc = dt_ring_rs_recv_chunk(right, n, s);
        REQUIRE(sc >= 0 && sc < n && rc >= 0 && rc < n,
                "n %d step %d: rank %d sends chunk %d, rank %d receives chunk %d (out of range)",
                n, s, r, sc, right, rc);
        REQUIRE(sc == rc, "reduce-scatter n %d step %d: rank %d sends chunk %d but its right "
                "neighbour %d receives chunk %d", n, s, r, sc, right, rc);
        REQUIRE((old.have[r][sc] & old.have[right][rc]) == 0, "reduce-scatter n %d step %d: "
                "rank %d adds chunk %d holding ranks %#x to its own holding %#x: a rank "
                "counted twice", n, s, right, rc, old.have[r][sc], old.have[right][rc]);
        st->have[right][rc] = old.have[right][rc] | old.have[r][sc];
    }
    /* The header's invariant: after step s the chunk r received holds s+2 ranks. */
    for (int r = 0; r < n; r++) {
        int rc = dt_ring_rs_recv_chunk(r, n, s);
        REQUIRE(popcount64(st->have[r][rc]) == s + 2, "reduce-scatter n %d step %d: rank %d's "
                "chunk %d holds %d ranks, want s+2 = %d", n, s, r, rc,
                popcount64(st->have[r][rc]), s + 2);
        if (s > 0)
            REQUIRE(dt_ring_rs_send_chunk(r, n, s) == dt_ring_rs_recv_chunk(r, n, s - 1),
                    "reduce-scatter n %d: rank %d at step %d sends chunk %d, not the chunk %d "
                    "it received at step %d", n, r, s, dt_ring_rs_send_chunk(r, n, s),
                    dt_ring_rs_recv_chunk(r, n, s - 1), s - 1);
    }
}

/* One allgather step: every rank sends a finished chunk right; the receiver replaces its
 * copy. Sending a chunk that is not finished would spread a partial result. */
static void ring_ag_step(ring_state *st, int n, int s, set32 full)
{
    ring_state old = *st;
    for (int r = 0; r < n; r++) {
        int right = dt_ring_right(r, n);
        int sc = dt_ring_ag_send_chunk(r, n, s);
        int rc = dt_ring_ag_recv_chunk(right, n, s);
        REQUIRE(sc >= 0 && sc < n && rc >= 0 && rc < n,
                "n %d step %d: rank %d sends chunk %d, rank %d receives chunk %d (out of range)",
                n, s, r, sc, right, rc);
        REQUIRE(sc == rc, "allgather n %d step %d: rank %d sends chunk %d but its right "
                "neighbour %d receives chunk %d", n, s, r, sc, right, rc);
        REQUIRE(old.have[r][sc] == full, "allgather n %d step %d: rank %d sends chunk %d "
                "holding only ranks %#x", n, s, r, sc, old.have[r][sc]);
        st->have[right][rc] = old.have[r][sc];
    }
    for (int r = 0; r < n; r++) {
        int want = s == 0 ? r : dt_ring_ag_recv_chunk(r, n, s - 1);
        REQUIRE(dt_ring_ag_send_chunk(r, n, s) == want, "allgather n %d: rank %d at step %d "
                "sends chunk %d, want %d (%s)", n, r, s, dt_ring_ag_send_chunk(r, n, s), want,
                s == 0 ? "its own chunk" : "the one it received at the step before");
    }
}

/* Reduce-scatter from everyone's own data, then allgather: a ring allreduce on paper. */
START_TEST(test_ring_allreduce)
{
    for (int n = 1; n <= RING_MAX; n++) {
        set32 full = (set32)((1ull << n) - 1);
        ring_state st;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++)
                st.have[r][c] = (set32)1 << r;
        for (int s = 0; s < n - 1; s++)
            ring_rs_step(&st, n, s);
        for (int r = 0; r < n; r++)
            REQUIRE(st.have[r][r] == full, "after reduce-scatter on %d ranks rank %d's chunk %d "
                    "holds ranks %#x, want all %#x", n, r, r, st.have[r][r], full);
        for (int s = 0; s < n - 1; s++)
            ring_ag_step(&st, n, s, full);
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++)
                REQUIRE(st.have[r][c] == full, "after allgather on %d ranks rank %d's chunk %d "
                        "holds ranks %#x, want all %#x", n, r, c, st.have[r][c], full);
    }
}
END_TEST

/* The allgather alone, as dt_allgather runs it: rank r starts with only chunk r. */
START_TEST(test_ring_allgather_alone)
{
    for (int n = 1; n <= RING_MAX; n++) {
        set32 full = (set32)((1ull << n) - 1);
        ring_state st;
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++)
                st.have[r][c] = c == r ? full : 0;
        for (int s = 0; s < n - 1; s++)
            ring_ag_step(&st, n, s, full);
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++)
                REQUIRE(st.have[r][c] == full, "allgather alone on %d ranks: rank %d lacks "
                        "chunk %d", n, r, c);
    }
}
END_TEST

START_TEST(test_ring_neighbours)
{
    for (int n = 1; n <= 64; n++)
        for (int r = 0; r < n; r++) {
            int left = dt_ring_left(r, n), right = dt_ring_right(r, n);
            REQUIRE(left >= 0 && left < n && right >= 0 && right < n,
                    "n %d rank %d: neighbours %d, %d out of range", n, r, left, right);
            REQUIRE(dt_ring_left(right, n) == r && dt_ring_right(left, n) == r,
                    "n %d rank %d: left and right are not inverse", n, r);
            REQUIRE(right == (r + 1) % n, "n %d rank %d: right is %d", n, r, right);
        }
}
END_TEST

/* ==== binomial tree ==== */

enum { TREE_MAX = 33 };

START_TEST(test_log2_pow2)
{
    for (int n = 1; n <= 5000; n++) {
        REQUIRE(dt_log2_ceil(n) == ref_log2_ceil(n), "dt_log2_ceil(%d) = %d, want %d",
                n, dt_log2_ceil(n), ref_log2_ceil(n));
        REQUIRE(dt_pow2_floor(n) == ref_pow2_floor(n), "dt_pow2_floor(%d) = %d, want %d",
                n, dt_pow2_floor(n), ref_pow2_floor(n));
    }
}
END_TEST

/* Walks the subtree under rank (rank included): counts visits per rank, tracks the
 * smallest and largest virtual rank met, returns the number of ranks. */
static int tree_walk(int rank, int root, int n, int *visits, int *vmin, int *vmax)
{
    int ch[64], size = 1, v = (rank - root + n) % n;
    visits[rank]++;
    if (v < *vmin) *vmin = v;
    if (v > *vmax) *vmax = v;
    int k = dt_tree_children(rank, root, n, ch);
    for (int j = 0; j < k; j++)
        size += tree_walk(ch[j], root, n, visits, vmin, vmax);
    return size;
}

START_TEST(test_tree)
{
    for (int n = 1; n <= TREE_MAX; n++)
        for (int root = 0; root < n; root++) {
            int visits[TREE_MAX] = { 0 };
            int ready[TREE_MAX];       /* the round after which a rank has the data */
            REQUIRE(dt_tree_parent(root, root, n) == -1, "n %d: root %d has parent %d",
                    n, root, dt_tree_parent(root, root, n));
            for (int rank = 0; rank < n; rank++) {
                int v = (rank - root + n) % n;
                int ch[64];
                for (int j = 0; j < 64; j++) ch[j] = -7;
                int k = dt_tree_children(rank, root, n, ch);
                REQUIRE(k >= 0 && k <= 31, "n %d root %d: rank %d has %d children", n, root,
                        rank, k);
                REQUIRE(ch[k] == -7, "n %d root %d: dt_tree_children(%d) wrote past the %d "
                        "children it returned", n, root, rank, k);
                if (rank != root) {
                    /* Contract: v receives from v minus its lowest set bit. */
                    int vp = v & (v - 1);
                    REQUIRE(dt_tree_parent(rank, root, n) == (vp + root) % n, "n %d root %d: "
                            "parent of %d is %d, want %d", n, root, rank,
                            dt_tree_parent(rank, root, n), (vp + root) % n);
                }
                /* Contract: children v + 2^j for 2^j below v's lowest set bit (the root:
                 * below the smallest power of two >= n), largest 2^j first, those < n.
                 * (Largest 2^j is not always largest subtree: for n = 5 the root's child
                 * 4 has a subtree of 1, its child 2 one of 2.) */
                int lim = v == 0 ? (1 << ref_log2_ceil(n)) : (v & -v);
                int want = 0;
                for (int b = lim >> 1; b >= 1; b >>= 1) {
                    if (v + b >= n) continue;
                    REQUIRE(want < k && ch[want] == (v + b + root) % n, "n %d root %d: rank "
                            "%d's child %d is %d, want %d", n, root, rank, want,
                            want < k ? ch[want] : -1, (v + b + root) % n);
                    want++;
                }
                REQUIRE(k == want, "n %d root %d: rank %d has %d children, want %d", n, root,
                        rank, k, want);
                int sum = 1;
                for (int j = 0; j < k; j++) {
                    REQUIRE(ch[j] >= 0 && ch[j] < n && ch[j] != rank, "n %d root %d: rank %d "
                            "has child %d", n, root, rank, ch[j]);
                    REQUIRE(dt_tree_parent(ch[j], root, n) == rank, "n %d root %d: %d is a "
                            "child of %d whose parent is %d", n, root, ch[j], rank,
                            dt_tree_parent(ch[j], root, n));
                    sum += dt_tree_subtree_size(ch[j], root, n);
                }
                REQUIRE(dt_tree_subtree_size(rank, root, n) == sum, "n %d root %d: subtree "
                        "of %d has size %d, its children's sum to %d", n, root, rank,
                        dt_tree_subtree_size(rank, root, n), sum);
            }
            /* Every child list is now known to be right (so walks end): the subtree under
             * each rank is the consecutive virtual ranks v .. v+size-1. */
            for (int rank = 0; rank < n; rank++) {
                int v = (rank - root + n) % n, sz = dt_tree_subtree_size(rank, root, n);
                int vis[TREE_MAX] = { 0 }, vmin = n, vmax = -1;
                int size = tree_walk(rank, root, n, vis, &vmin, &vmax);
                REQUIRE(size == sz && vmin == v && vmax == v + size - 1, "n %d root %d: "
                        "subtree of %d holds %d ranks, virtual %d..%d, want %d..%d", n, root,
                        rank, size, vmin, vmax, v, v + sz - 1);
            }
            REQUIRE(dt_tree_subtree_size(root, root, n) == n, "n %d: root %d's subtree has "
                    "size %d", n, root, dt_tree_subtree_size(root, root, n));
            int vmin = n, vmax = -1;
            tree_walk(root, root, n, visits, &vmin, &vmax);
            for (int rank = 0; rank < n; rank++)
                REQUIRE(visits[rank] == 1, "n %d root %d: a walk from the root reaches rank "
                        "%d %d times", n, root, rank, visits[rank]);
            /* A broadcast on the tree: a rank sends to its children one per round, in the
             * order given, starting the round after it received. The last rank to get the
             * data has it after ceil(log2 n) rounds. Parents come first in virtual order. */
            int rounds = 0;
            for (int v = 0; v < n; v++) {
                int rank = (v + root) % n, ch[64];
                if (v == 0) ready[rank] = 0;
                int k = dt_tree_children(rank, root, n, ch);
                for (int j = 0; j < k; j++) {
                    ready[ch[j]] = ready[rank] + j + 1;
                    if (ready[ch[j]] > rounds) rounds = ready[ch[j]];
                }
            }
            REQUIRE(rounds == ref_log2_ceil(n), "n %d root %d: a broadcast on the tree takes "
                    "%d rounds, want ceil(log2 n) = %d", n, root, rounds, ref_log2_ceil(n));
            /* dt_tree_round: a rank receives in a round after its parent received, inside
             * ceil(log2 n) rounds, and a parent sends to one child per round. */
            for (int rank = 0; rank < n; rank++) {
                int r = dt_tree_round(rank, root, n), p = dt_tree_parent(rank, root, n);
                int ch[64], k = dt_tree_children(rank, root, n, ch);
                REQUIRE(rank == root ? r == -1 : (r > dt_tree_round(p, root, n) &&
                        r < ref_log2_ceil(n)), "n %d root %d: rank %d receives in round %d, "
                        "its parent %d in round %d", n, root, rank, r, p,
                        p < 0 ? -1 : dt_tree_round(p, root, n));
                for (int j = 1; j < k; j++)
                    REQUIRE(dt_tree_round(ch[j], root, n) > dt_tree_round(ch[j - 1], root, n),
                            "n %d root %d: rank %d's children %d and %d receive in rounds "
                            "%d and %d", n, root, rank, ch[j - 1], ch[j],
                            dt_tree_round(ch[j - 1], root, n), dt_tree_round(ch[j], root, n));
            }
        }
}
END_TEST

/* ==== recursive doubling ==== */

START_TEST(test_rd)
{
    for (int n = 1; n <= TREE_MAX; n++) {
        int p = ref_pow2_floor(n), extra = n - p, steps = ref_log2_ceil(p);
        REQUIRE(dt_rd_steps(n) == steps, "n %d: dt_rd_steps %d, want %d", n, dt_rd_steps(n),
                steps);
        int active = 0;
        for (int r = 0; r < n; r++) {
            int v = dt_rd_vrank(r, n);
            int sits_out = r < 2 * extra && r % 2 == 0;
            REQUIRE((v < 0) == sits_out, "n %d: rank %d has vrank %d; it should %s", n, r, v,
                    sits_out ? "sit out (even, among the first 2*extra)" : "be active");
            if (v >= 0) {
                active++;
                REQUIRE(v < p && dt_rd_rank(v, n) == r, "n %d: rank %d -> vrank %d -> rank %d",
                        n, r, v, v < p ? dt_rd_rank(v, n) : -1);
            }
            int fp = dt_rd_fold_peer(r, n);
            REQUIRE(fp == (r < 2 * extra ? (r ^ 1) : -1), "n %d: fold peer of %d is %d", n, r,
                    fp);
            if (fp >= 0)
                REQUIRE(dt_rd_fold_peer(fp, n) == r, "n %d: fold peers %d, %d not symmetric",
                        n, r, fp);
        }
        REQUIRE(active == p, "n %d: %d active ranks, want %d", n, active, p);
        for (int v = 0; v < p; v++)
            REQUIRE(dt_rd_vrank(dt_rd_rank(v, n), n) == v, "n %d: vrank %d -> rank %d -> %d",
                    n, v, dt_rd_rank(v, n), dt_rd_vrank(dt_rd_rank(v, n), n));
        for (int s = 0; s < steps; s++)
            for (int v = 0; v < p; v++) {
                int r = dt_rd_rank(v, n), q = dt_rd_partner(r, n, s);
                REQUIRE(q >= 0 && q < n && q != r && dt_rd_vrank(q, n) == (v ^ (1 << s)),
                        "n %d step %d: rank %d (vrank %d) exchanges with %d, want vrank %d",
                        n, s, r, v, q, v ^ (1 << s));
                REQUIRE(dt_rd_partner(q, n, s) == r, "n %d step %d: %d's partner is %d whose "
                        "partner is %d", n, s, r, q, dt_rd_partner(q, n, s));
            }

        /* The allreduce on paper: fold, exchange and combine, hand back. */
        uint64_t have[TREE_MAX], old[TREE_MAX], full = (n == 64) ? ~0ull : (1ull << n) - 1;
        for (int r = 0; r < n; r++) have[r] = 1ull << r;
        for (int r = 0; r < 2 * extra; r += 2) {
            int odd = dt_rd_fold_peer(r, n);
            REQUIRE((have[odd] & have[r]) == 0, "n %d: fold overlaps", n);
            have[odd] |= have[r];
        }
        for (int s = 0; s < steps; s++) {
            for (int r = 0; r < n; r++) old[r] = have[r];
            for (int v = 0; v < p; v++) {
                int r = dt_rd_rank(v, n), q = dt_rd_partner(r, n, s);
                REQUIRE((old[r] & old[q]) == 0, "n %d step %d: ranks %d and %d combine "
                        "overlapping sets %#llx, %#llx", n, s, r, q,
                        (unsigned long long)old[r], (unsigned long long)old[q]);
                have[r] = old[r] | old[q];
            }
        }
        for (int r = 0; r < 2 * extra; r += 2)
            have[r] = have[dt_rd_fold_peer(r, n)];
        for (int r = 0; r < n; r++)
            REQUIRE(have[r] == full, "rd allreduce on %d ranks: rank %d ends with ranks %#llx",
                    n, r, (unsigned long long)have[r]);
    }
}
END_TEST

/* ==== pairwise exchange ==== */

START_TEST(test_alltoall_peers)
{
    for (int n = 1; n <= TREE_MAX; n++)
        for (int r = 0; r < n; r++) {
            uint64_t sent = 1ull << r, got = 1ull << r;
            REQUIRE(dt_a2a_send_peer(r, n, 0) == r && dt_a2a_recv_peer(r, n, 0) == r,
                    "n %d: step 0 of rank %d is not the local copy", n, r);
            for (int s = 1; s < n; s++) {
                int to = dt_a2a_send_peer(r, n, s), from = dt_a2a_recv_peer(r, n, s);
                REQUIRE(to >= 0 && to < n && from >= 0 && from < n, "n %d step %d rank %d: "
                        "peers %d, %d out of range", n, s, r, to, from);
                REQUIRE(dt_a2a_recv_peer(to, n, s) == r, "n %d step %d: %d sends to %d, who "
                        "receives from %d", n, s, r, to, dt_a2a_recv_peer(to, n, s));
                sent |= 1ull << to;
                got |= 1ull << from;
            }
            uint64_t full = (1ull << n) - 1;
            REQUIRE(sent == full && got == full, "n %d: rank %d does not meet every rank", n, r);
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("schedule");
    tcase_add_test(tc, test_chunk_bounds);
    tcase_add_test(tc, test_ring_neighbours);
    tcase_add_test(tc, test_ring_allreduce);
    tcase_add_test(tc, test_ring_allgather_alone);
    tcase_add_test(tc, test_log2_pow2);
    tcase_add_test(tc, test_tree);
    tcase_add_test(tc, test_rd);
    tcase_add_test(tc, test_alltoall_peers);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
