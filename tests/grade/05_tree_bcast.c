/* Grading exercise 05, the binomial-tree broadcast. Every rank starts with data of its
 * own (dt_fill_test_data differs per rank), so only a broadcast from the right root
 * leaves the right values: afterwards every rank must hold exactly what MPI_Ibcast
 * gives, for every root and every count, with nothing written past the buffer; on
 * MPI_COMM_WORLD, then on communicators that number the ranks otherwise.
 *
 * Two cases hold it to the tree. tree_traffic counts the bytes each rank sends and
 * receives through dtlab's p2p (dt_bytes_sent, dt_bytes_received): the tree and the
 * naive broadcast both deliver the buffer once to every rank, but the tree's root
 * sends ceil(log2 n) buffers and the naive root n - 1. rounds counts the rounds the
 * messages took (gr_rounds_end: the longest chain of messages, each sent after the one
 * its sender waited for): ceil(log2 n) when every rank serves its farthest child first,
 * more when a rank serves its nearest child first, whose subtree is smallest. */
#include <stdlib.h>
#include "grade.h"

enum { K_ROOT0 = 1, K_ANY = 2, K_TRAFFIC = 3, K_SUB = 4, K_ROUNDS = 5 };   /* seeds differ between cases */

/* Which rank of comm (n ranks) started with what buf (count floats) holds, or -1. */
static int whose(const float *buf, int count, unsigned seed, int n)
{
    float *tmp = malloc(((size_t)count + 1) * sizeof *tmp);
    DT_REQUIRE(tmp != NULL, "out of memory");
    int who = -1;
    for (int j = 0; j < n && who < 0; j++) {
        dt_fill_test_data(tmp, count, MPI_FLOAT, MPI_SUM, seed, j);
        if (!memcmp(buf, tmp, (size_t)count * sizeof *buf))
            who = j;
    }
    free(tmp);
    return who;
}

/* Notes why buf (count floats) differs from want, the root's data, after a broadcast on
 * comm, naming the typical mistakes where they are recognisable; got is the bytes this
 * rank received. Collective over comm: the ranks share whose data each holds, since
 * "rank 0 holds its own data" means one thing when the root lost its data to rank 0's
 * and another when nothing moved. Ranks are comm's. */
static void explain(const float *buf, const float *want, int count, int root,
                    unsigned seed, size_t got, MPI_Comm comm)
{
    int r, n, bad = 0, outside = 0;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    while (bad < count && buf[bad] == want[bad])
        bad++;
    if (bad == count)
        outside = gr_guard_hit(buf, count, &bad);
    int mine = outside ? -1 : bad == count ? root : whose(buf, count, seed, n);
    int *who = malloc((size_t)n * sizeof *who);
    DT_REQUIRE(who != NULL, "out of memory");
    HT_MPI(MPI_Iallgather(&mine, 1, MPI_INT, who, 1, MPI_INT, comm, &ht_req));
    int root_has_0 = root != 0 && who[root] == 0;
    free(who);
    size_t nb = (size_t)count * sizeof(float);
    const char *on = gr_on(comm);

    if (bad == count && !outside)
        return;
    if (outside)
        ht_fail("rank %d, count %d, root %d%s: %s was overwritten (sizes are count * "
                "sizeof(float) bytes, no more)", r, count, root, on,
                gr_outside(bad, count));
    else if (mine == 0 && root != 0 && (r != 0 || root_has_0))
        ht_fail("rank %d holds rank 0's data, not the root's (root %d), at %d ranks, "
                "count %d%s: the tree hangs from rank 0%s", r, root, n, count, on,
                gr_hints() ? ". Number the ranks from the root, v = (rank - root + n) % "
                "n, and back: rank = (v + root) % n" : ", whatever the root");
    else if (r != root && got > 0 && got < nb)
        ht_fail("rank %d received %zu bytes, but count %d floats make %zu bytes "
                "(root %d, %d ranks%s): dt_send and dt_recv take bytes, count * "
                "sizeof(float)", r, got, count, nb, root, n, on);
    else if (mine == r)
        ht_fail("rank %d still holds its own data after the broadcast (root %d, %d "
                "ranks, count %d%s): it never received the root's", r, root, n, count,
                on);
    else if (mine >= 0)
        ht_fail("rank %d holds rank %d's data, not the root's (root %d), at %d ranks, "
                "count %d%s", r, mine, root, n, count, on);
    else
        ht_fail("rank %d, root %d, %d ranks, count %d%s: element %d is %g, expected %g "
                "(the root's)", r, root, n, count, on, bad, (double)buf[bad],
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

/* The rounds of one broadcast from root, on MPI_COMM_WORLD: ceil(log2 n). Only the
 * root looks at the order it served its children in (its own messages, gr_notes), so
 * the message is the root's. */
static void check_rounds(int rounds, int count, int root)
{
    int n = ht_size, K = dt_log2_ceil(n);
    if (rounds == K || ht_rank != root)
        return;
    if (rounds < 0) {
        ht_fail("root %d, %d ranks, count %d: more than %d messages from one rank in one "
                "broadcast", root, n, count, GR_NOTES);
        return;
    }
    /* the virtual ranks the root sent to, in order (its notes: sends only) */
    char order[96] = "";
    int k = 0, prev = n, rising = 0, sends = 0;
    for (int i = 0; i < GR_NOTES && gr_notes[i].send == 1 && k < (int)sizeof order - 8;
         i++, sends++) {
        int v = (gr_notes[i].peer - root + n) % n;
        rising = rising || v > prev;
        prev = v;
        k += snprintf(order + k, sizeof order - (size_t)k, "%s%d", i ? ", " : "",
                      gr_notes[i].peer);
    }
    const char *why = "";
    if (sends == n - 1 && n - 1 > K)
        why = ". The root sent to every other rank itself: that is the naive broadcast";
    else if (rising)
        why = gr_hints() ? ". The root served its nearest children first: send to the "
              "farthest child first, v + m for m from the largest power of two below n "
              "down to 1, so that the largest subtree starts passing the data on at once"
              : ". The root served a nearer child before a farther one: the far "
              "subtree, the largest, waits a round for nothing";
    ht_fail("root %d, %d ranks, count %d: the broadcast took %d rounds (the longest "
            "chain of messages, each sent after the one it waited for); a binomial tree "
            "takes ceil(log2 %d) = %d, every holder passing the data on in every round. "
            "The root sent to ranks %s, in that order%s", root, n, count, rounds, n, K,
            order, why);
}

/* One broadcast of count = gr_count(ci, n) floats from root on comm, each rank starting
 * from its own data, checked against MPI_Ibcast (and, with traffic, for its bytes;
 * with rounds, on MPI_COMM_WORLD only, for its rounds). */
enum { TRAFFIC = 1, ROUNDS = 2 };
static void run_one(int kase, int ci, int root, int how, MPI_Comm comm)
{
    int rank, count = gr_count(ci, ht_size);
    MPI_Comm_rank(comm, &rank);
    unsigned seed = (unsigned)(kase * 1000 + ci * 16 + root);
    float *buf = gr_guarded_data(count, seed, rank), *want = gr_copy(buf, count);
    HT_MPI(MPI_Ibcast(want, count, MPI_FLOAT, root, comm, &ht_req));

    dt_bytes_reset();
    if (how & ROUNDS) {
        memset(gr_notes, 0xff, sizeof gr_notes);        /* send -1: no note */
        gr_rounds_start();
    }
    ex_tree_bcast(buf, count, root, comm);
    size_t sent = dt_bytes_sent(), got = dt_bytes_received();
    int rounds = how & ROUNDS ? gr_rounds_end() : 0;

    explain(buf, want, count, root, seed, got, comm);
    if ((how & TRAFFIC) && ht_nbad == 0)
        check_traffic(sent, got, count, root);
    if ((how & ROUNDS) && gr_all_ok())
        check_rounds(rounds, count, root);
    gr_free_guarded(buf);
    free(want);
}

/* Every count of gr_count from each root in [r0, r1], stopping at the first count where
 * some rank failed (agreed, so every rank stops together). */
static void run_roots(int kase, int r0, int r1, int how)
{
    for (int ci = 0; ci < GR_NCOUNTS; ci++) {
        for (int root = r0; root <= r1; root++)
            run_one(kase, ci, root, how, MPI_COMM_WORLD);
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

/* On comm, a communicator other than MPI_COMM_WORLD: count gr_count(ci) from the
 * roots 0 .. (ht_size+1)/2 - 1, each taken modulo comm's size (the halves of gr_split
 * differ in size, and must run as many broadcasts). */
typedef struct { int ci; MPI_Comm comm; } sub_run;

static void sub_roots(void *ctx)
{
    sub_run *s = ctx;
    int n;
    MPI_Comm_size(s->comm, &n);
    for (int j = 0; j < (ht_size + 1) / 2; j++)
        run_one(K_SUB, s->ci, j % n, 0, s->comm);
}

static void sub_roots_world(void *ctx)
{
    sub_run s = *(sub_run *)ctx;
    s.comm = MPI_COMM_WORLD;
    sub_roots(&s);
}

/* All ranks numbered backwards, then two halves, even and odd ranks, each numbered
 * backwards (gr_split): code that takes its rank or the size from MPI_COMM_WORLD builds
 * the wrong tree. A count that fails is run again on MPI_COMM_WORLD to tell whether
 * comm is to blame. */
START_TEST(sub_comm)
{
    for (int k = 0; k < 2 && gr_all_ok(); k++) {
        MPI_Comm comm = k ? gr_split() : gr_backwards();
        for (int ci = 0; ci < GR_NCOUNTS; ci++) {
            sub_run s = { gr_telling(ci), comm };
            sub_roots(&s);
            if (!gr_sub_comm_ok(sub_roots_world, &s))
                break;
        }
        MPI_Comm_free(&comm);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(tree_traffic)
{
    run_roots(K_TRAFFIC, 0, ht_size - 1, TRAFFIC);
    HT_VERDICT();
}
END_TEST

/* Counts 1 and 7n+3 from every root: ceil(log2 n) rounds (0-byte messages count too). */
START_TEST(rounds)
{
    for (int ci = 1; ci <= 3 && gr_all_ok(); ci += 2)
        for (int root = 0; root < ht_size && gr_all_ok(); root++)
            run_one(K_ROUNDS, ci, root, ROUNDS, MPI_COMM_WORLD);
    HT_VERDICT();
}
END_TEST

/* The tree is the exercise: no collective may broadcast instead. */
static const gr_rule rules[] = {
    { "ex_tree_bcast", GR_DT_COLLECTIVES "|" GR_MPI_COLLECTIVES,
      "the exercise is to write the tree yourself, from dt_send and dt_recv; dtlab's "
      "and MPI's collectives do it for you" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "root0", 2, GR_MPI, root0, 1,
          "root 0: every rank ends with the root's data, as MPI_Bcast, every count",
          "ex_tree_bcast" },
        { "any_root", 2, GR_MPI, any_root, 1,
          "every root 0..n-1: the tree hangs from the root, not from rank 0",
          "ex_tree_bcast" },
        { "sub_comm", 2, GR_MPI, sub_comm, 1,
          "the same on communicators numbering the ranks backwards, all and in halves",
          "ex_tree_bcast" },
        { "tree_traffic", 2, GR_MPI, tree_traffic, 1,
          "bytes: each rank receives once; the root sends ceil(log2 n) buffers, not n-1",
          "ex_tree_bcast" },
        { "rounds", 2, GR_MPI, rounds, 1,
          "ceil(log2 n) rounds: every holder passes the data on, farthest child first",
          "ex_tree_bcast" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "05_tree_bcast",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "a rank waiting for a parent that never sends to it: does every "
                    "rank compute the same tree (virtual ranks from the same root, "
                    "parent and children of each other), does each rank receive from "
                    "its parent BEFORE it sends, and does every rank but the root "
                    "receive exactly once? On another communicator (sub_comm): are "
                    "rank and size those of comm, not of MPI_COMM_WORLD?",
        /* 7: at the third level, virtual ranks 1 and 2 have children too (at 5 ranks
         * only 0 has one there): a tree right up to 5 ranks can still go wrong */
        .ranks = "7" });
}
