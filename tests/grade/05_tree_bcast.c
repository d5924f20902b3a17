/* Grading exercise 05, the binomial-tree broadcast. Every rank starts with data of its
 * own (dt_fill_test_data differs per rank), so only a broadcast from the right root
 * leaves the right values: afterwards every rank must hold exactly what MPI_Ibcast
 * gives, for every root and every count, with nothing written past the buffer.
 *
 * The last case counts the bytes each rank sends and receives through dtlab's p2p
 * (dt_bytes_sent, dt_bytes_received). Both the tree and the naive broadcast deliver the
 * buffer once to every rank, but the tree's root sends ceil(log2 n) buffers, one per
 * round, and the naive root n - 1: a naive broadcast passes the first two cases and
 * loses the third. */
#include <stdlib.h>
#include "grade.h"

enum { K_ROOT0 = 1, K_ANY = 2, K_TRAFFIC = 3 };   /* seeds differ between cases */

/* Which rank's starting data buf (count floats) holds, or -1 if none. */
static int whose(const float *buf, int count, unsigned seed)
{
    float *tmp = malloc(((size_t)count + 1) * sizeof *tmp);
    DT_REQUIRE(tmp != NULL, "out of memory");
    int who = -1;
    for (int j = 0; j < ht_size && who < 0; j++) {
        dt_fill_test_data(tmp, count, MPI_FLOAT, MPI_SUM, seed, j);
        if (!memcmp(buf, tmp, (size_t)count * sizeof *buf))
            who = j;
    }
    free(tmp);
    return who;
}

/* Notes why buf (count floats) differs from want, the root's data, naming the typical
 * mistakes where they are recognisable; got is the bytes this rank received. Collective:
 * the ranks share whose data each holds, since "rank 0 holds its own data" means one
 * thing when the root lost its data to rank 0's and another when nothing moved. */
static void explain(const float *buf, const float *want, int count, int root,
                    unsigned seed, size_t got)
{
    int r = ht_rank, n = ht_size, bad = 0, outside = 0;
    while (bad < count && buf[bad] == want[bad])
        bad++;
    if (bad == count)
        outside = gr_guard_hit(buf, count, &bad);
    int mine = outside ? -1 : bad == count ? root : whose(buf, count, seed);
    int *who = malloc((size_t)n * sizeof *who);
    DT_REQUIRE(who != NULL, "out of memory");
    HT_MPI(MPI_Iallgather(&mine, 1, MPI_INT, who, 1, MPI_INT, MPI_COMM_WORLD, &ht_req));
    int root_has_0 = root != 0 && who[root] == 0;
    free(who);
    size_t nb = (size_t)count * sizeof(float);

    if (bad == count && !outside)
        return;
    if (outside)
        ht_fail("rank %d, count %d, root %d: %s was overwritten (sizes are count * "
                "sizeof(float) bytes, no more)", r, count, root, gr_outside(bad, count));
    else if (mine == 0 && root != 0 && (r != 0 || root_has_0))
        ht_fail("rank %d holds rank 0's data, not the root's (root %d), at %d ranks, "
                "count %d: the tree hangs from rank 0. Number the ranks from the root, "
                "v = (rank - root + n) %% n, and back: rank = (v + root) %% n", r, root,
                n, count);
    else if (r != root && got > 0 && got < nb)
        ht_fail("rank %d received %zu bytes, but count %d floats make %zu bytes "
                "(root %d, %d ranks): dt_send and dt_recv take bytes, count * "
                "sizeof(float)", r, got, count, nb, root, n);
    else if (mine == r)
        ht_fail("rank %d still holds its own data after the broadcast (root %d, %d "
                "ranks, count %d): it never received the root's. Does every rank but the "
                "root receive once from its parent?", r, root, n, count);
    else if (mine >= 0)
        ht_fail("rank %d holds rank %d's data, not the root's (root %d), at %d ranks, "
                "count %d", r, mine, root, n, count);
    else
        ht_fail("rank %d, root %d, %d ranks, count %d: element %d is %g, expected %g "
                "(the root's)", r, root, n, count, bad, (double)buf[bad],
                (double)want[bad]);
}

/* Notes what is wrong with the bytes this rank sent and received in one broadcast of
 * count floats from root: every rank but the root receives the buffer once; the root
 * sends it once to each of its ceil(log2 n) children, one per round. */
static void check_traffic(size_t sent, size_t got, int count, int root)
{
    int r = ht_rank, n = ht_size, K = dt_log2_ceil(n);
    size_t nb = (size_t)count * sizeof(float);
    if (nb == 0)
        return;
    if (r != root && got == 0)
        ht_fail("rank %d received no bytes through dtlab's p2p (root %d, %d ranks, count "
                "%d): this case counts what dt_recv and dt_sendrecv move, so use them. "
                "Each rank but the root receives the buffer once, %zu bytes", r, root, n,
                count, nb);
    else if (r != root && got != nb)
        ht_fail("rank %d received %zu bytes (root %d, %d ranks, count %d); it must "
                "receive the buffer exactly once, %zu bytes, from its parent", r, got,
                root, n, count, nb);
    else if (r == root && got != 0)
        ht_fail("the root, rank %d, received %zu bytes (%d ranks, count %d); it holds "
                "the data already and receives nothing", r, got, n, count);
    else if (r == root && sent == (size_t)(n - 1) * nb && n - 1 > K)
        ht_fail("the root, rank %d, sent %d buffers at %d ranks, one to every other "
                "rank: that is the naive broadcast, n - 1 rounds. In a binomial tree "
                "the root sends ceil(log2 %d) = %d, one per round, and the ranks that "
                "already hold the data pass it on", r, n - 1, n, n, K);
    else if (r == root && sent != (size_t)K * nb)
        ht_fail("the root, rank %d, sent %zu bytes (%.2f buffers) at %d ranks, count "
                "%d; in a binomial tree it sends one buffer to each of its ceil(log2 %d) "
                "= %d children, %zu bytes", r, sent, (double)sent / (double)nb, n, count,
                n, K, (size_t)K * nb);
    else if (r != root && sent > (size_t)(K - 1) * nb)
        ht_fail("rank %d sent %zu bytes (%.2f buffers) at %d ranks, count %d, root %d; "
                "a rank other than the root has at most ceil(log2 n) - 1 = %d children",
                r, sent, (double)sent / (double)nb, n, count, root, K - 1);
}

/* One broadcast of count = gr_count(ci, n) floats from root, each rank starting from its
 * own data, checked against MPI_Ibcast (and, with traffic, for its bytes). */
static void run_one(int kase, int ci, int root, int traffic)
{
    int count = gr_count(ci, ht_size);
    unsigned seed = (unsigned)(kase * 1000 + ci * 16 + root);
    float *buf = gr_guarded_data(count, seed, ht_rank), *want = gr_copy(buf, count);
    HT_MPI(MPI_Ibcast(want, count, MPI_FLOAT, root, MPI_COMM_WORLD, &ht_req));

    dt_bytes_reset();
    ex_tree_bcast(buf, count, root, MPI_COMM_WORLD);
    size_t sent = dt_bytes_sent(), got = dt_bytes_received();

    explain(buf, want, count, root, seed, got);
    if (traffic && ht_nbad == 0)
        check_traffic(sent, got, count, root);
    gr_free_guarded(buf);
    free(want);
}

/* Every count of gr_count from each root in [r0, r1], stopping at the first count where
 * some rank failed (agreed, so every rank stops together). */
static void run_roots(int kase, int r0, int r1, int traffic)
{
    for (int ci = 0; ci < GR_NCOUNTS; ci++) {
        for (int root = r0; root <= r1; root++)
            run_one(kase, ci, root, traffic);
        if (!gr_all_ok())
            break;
    }
}

START_TEST(root0)
{
    run_roots(K_ROOT0, 0, 0, 0);
    HT_VERDICT();
}
END_TEST

START_TEST(any_root)
{
    run_roots(K_ANY, 0, ht_size - 1, 0);
    HT_VERDICT();
}
END_TEST

START_TEST(tree_traffic)
{
    run_roots(K_TRAFFIC, 0, ht_size - 1, 1);
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "root0", 3, GR_MPI, root0, 1,
          "root 0: every rank ends with the root's data, as MPI_Bcast, every count" },
        { "any_root", 4, GR_MPI, any_root, 1,
          "every root 0..n-1: the tree hangs from the root, not from rank 0" },
        { "tree_traffic", 3, GR_MPI, tree_traffic, 1,
          "bytes: each rank receives once; the root sends ceil(log2 n) buffers, not n-1"
        },
    };
    return gr_main(argc, argv, "05_tree_bcast", cases, sizeof cases / sizeof cases[0]);
}
