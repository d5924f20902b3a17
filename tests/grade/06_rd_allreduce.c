/* Grading exercise 06, the recursive-doubling allreduce. Every rank starts with data of
 * its own (rd_fill: quarters and a power of two of its own, so any order of adding gives
 * the exact sum, and a partial sum tells whose data it holds) and
 * must end with exactly what MPI_Iallreduce gives, the same bits on every rank, with
 * nothing written past the buffer. At 3 and 5 ranks the fold is exercised, at 2 and 4
 * the plain exchanges.
 *
 * The small counts fit MPI's eager limit, where a send returns before its receive is
 * posted; the large one does not, so two partners that both send first wait for ever.
 *
 * Two cases hold it to the algorithm. rd_traffic counts the bytes each rank sends and
 * receives through dtlab's p2p (dt_bytes_sent, dt_bytes_received): recursive doubling
 * moves the whole buffer at every step, log2 p times (p the largest power of two <= n),
 * plus one buffer each way for a folded pair; a ring gives the right sum but other
 * bytes. rounds counts the rounds the messages took (gr_rounds_end): log2 p, +2 for the
 * fold and the unfold; an exchange done as a send then a receive takes two. */
#include <stdlib.h>
#include "grade.h"

enum { K_SMALL = 1, K_LARGE = 2, K_TRAFFIC = 3, K_SUB = 4, K_ROUNDS = 5 };

/* Rank r's data for seed, count floats: dt_fill_test_data's quarters (-4 .. 4) plus
 * 64 * 2^r, so that a sum of some ranks' data tells which ranks (the quarters of 8
 * ranks add up to less than 32 either way), even where a rank's quarter is 0: the sum
 * stays exact in any order. */
static void rd_fill(float *x, int count, unsigned seed, int r)
{
    dt_fill_test_data(x, count, MPI_FLOAT, MPI_SUM, seed, r);
    for (int i = 0; i < count; i++)
        x[i] += 64.0f * (float)(1u << r);
}

/* The ranks whose starting data buf (count floats) is the sum of, a bit each, at n
 * ranks; 0 when it is no such sum (or n is too large to try every subset). */
static unsigned sum_of(const float *buf, int count, unsigned seed, int n)
{
    if (n > 8)
        return 0;
    float *x = malloc(((size_t)n * count + 1) * sizeof *x);
    float *sum = malloc(((size_t)count + 1) * sizeof *sum);
    DT_REQUIRE(x != NULL && sum != NULL, "out of memory");
    for (int j = 0; j < n; j++)
        rd_fill(x + (size_t)j * count, count, seed, j);
    unsigned found = 0;
    for (unsigned m = 1; m < 1u << n && !found; m++) {
        memset(sum, 0, (size_t)count * sizeof *sum);
        for (int j = 0; j < n; j++)
            if (m >> j & 1)
                for (int i = 0; i < count; i++)
                    sum[i] += x[(size_t)j * count + i];
        if (!memcmp(buf, sum, (size_t)count * sizeof *buf))
            found = m;
    }
    free(sum);
    free(x);
    return found;
}

/* "0, 2" for the ranks of a mask. */
static const char *ranks_of(unsigned mask, char *s, size_t len)
{
    size_t k = 0;
    s[0] = '\0';
    for (int q = 0; q < 32 && k < len; q++)
        if (mask >> q & 1)
            k += (size_t)snprintf(s + k, len - k, k ? ", %d" : "%d", q);
    return s;
}

/* Notes why buf (count floats) differs from want, MPI's sum, after an allreduce on
 * comm, naming the typical mistakes where they are recognisable. Collective over comm:
 * the ranks share whose data each holds, so that a fold or an unfold left out is named
 * as such on every rank, whichever rank reports. Ranks are comm's. */
static void explain(const float *buf, const float *want, int count, unsigned seed,
                    MPI_Comm comm)
{
    int r, n, bad = 0, outside = 0;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    while (bad < count && buf[bad] == want[bad])
        bad++;
    if (bad == count)
        outside = gr_guard_hit(buf, count, &bad);
    unsigned all = n < 32 ? (1u << n) - 1 : ~0u, active = 0, out = 0;
    unsigned mine = bad == count ? all : outside ? 0 : sum_of(buf, count, seed, n);
    unsigned *held = malloc((size_t)n * sizeof *held);
    DT_REQUIRE(held != NULL, "out of memory");
    HT_MPI(MPI_Iallgather(&mine, 1, MPI_UNSIGNED, held, 1, MPI_UNSIGNED, comm, &ht_req));
    for (int j = 0; j < n; j++)
        if (dt_rd_vrank(j, n) >= 0)
            active |= 1u << j;
    /* out: the ranks that sit out whose data is in no other rank's buffer */
    for (int e = 0; e < n && active != all; e++) {
        int lost = dt_rd_vrank(e, n) < 0;
        for (int q = 0; q < n && lost; q++)
            lost = q == e || (held[q] != 0 && !(held[q] >> e & 1));
        if (lost)
            out |= 1u << e;
    }
    int unfold = 0;                 /* a rank that sits out and holds its own data only */
    for (int e = 0; e < n && !unfold; e++)
        unfold = dt_rd_vrank(e, n) < 0 && held[e] == 1u << e;
    free(held);
    if (bad == count && !outside)
        return;

    char who[64];
    const char *on = gr_on(comm);
    int sits_out = dt_rd_vrank(r, n) < 0, peer = dt_rd_fold_peer(r, n);
    if (outside)
        ht_fail("rank %d, %d ranks, count %d%s: %s was overwritten (sizes are count * "
                "sizeof(float) bytes, no more)", r, n, count, on, gr_outside(bad, count));
    else if (out)
        ht_fail("rank %d, %d ranks, count %d%s: the fold was left out: the data of rank "
                "%s, which sits out the exchanges, is in no other rank's sum%s. Before "
                "the exchanges, each rank that sits out hands its buffer to its pair's "
                "other rank, which adds it in", r, n, count, on,
                ranks_of(out, who, sizeof who), unfold ? ", and it never got a result "
                "back (the unfold is missing too)" : "");
    else if (unfold && mine == 1u << r && sits_out)
        ht_fail("rank %d still holds its own data (%d ranks, count %d%s): it sits out "
                "the exchanges, and its pair's other rank, rank %d, never handed it the "
                "result (the unfold, after the exchanges)", r, n, count, on, peer);
    else if (mine == 1u << r)
        ht_fail("rank %d still holds its own data (%d ranks, count %d%s): what it "
                "received from its partners was never added in", r, n, count, on);
    else if (mine && mine == (all & ~(1u << r)))
        ht_fail("rank %d holds the sum over every rank but itself (%d ranks, count "
                "%d%s): did it replace its buffer by its partner's instead of adding?",
                r, n, count, on);
    else if (mine)
        ht_fail("rank %d holds the sum over ranks %s only, of %d (count %d%s): a step "
                "missing, or a partner of the wrong step?", r,
                ranks_of(mine, who, sizeof who), n, count, on);
    else
        ht_fail("rank %d, %d ranks, count %d%s: element %d is %g, expected %g (the sum "
                "over all ranks)", r, n, count, on, bad, (double)buf[bad],
                (double)want[bad]);
}

/* What recursive doubling sends from this rank, in buffers of the whole count: log2 p
 * exchanges for an active rank; a folded pair's even rank sends its data once, its odd
 * rank the result once more. Received is the same. */
static int rd_buffers(int r, int n)
{
    int peer = dt_rd_fold_peer(r, n);
    if (dt_rd_vrank(r, n) < 0)
        return 1;
    return dt_rd_steps(n) + (peer >= 0);
}

/* Notes what is wrong with the bytes this rank sent and received in one allreduce. */
static void check_traffic(size_t sent, size_t got, int count)
{
    int r = ht_rank, n = ht_size, k = dt_rd_steps(n), want = n > 1 ? rd_buffers(r, n) : 0;
    size_t nb = (size_t)count * sizeof(float);
    if (nb == 0)
        return;
    const char *role = n == 1 ? "one rank: nothing to send"
        : dt_rd_vrank(r, n) < 0 ? "it sits out: its data to its partner, the sum back"
        : dt_rd_fold_peer(r, n) >= 0 ? "log2 p exchanges, then the sum to its peer"
        : "one whole buffer per exchange, log2 p of them";
    if (sent == want * nb && got == want * nb)
        return;
    if (sent + got == 0)
        ht_fail("rank %d sent and received no bytes through dtlab's p2p (%d ranks, "
                "count %d): this case counts what dt_sendrecv, dt_send and dt_recv move, "
                "so use them. Recursive doubling sends %d buffer(s) from it (%s)", r, n,
                count, want, role);
    else
        ht_fail("rank %d sent %zu and received %zu bytes (%.2f and %.2f buffers) at %d "
                "ranks, count %d; recursive doubling sends and receives %d buffer(s) "
                "each way (p = %d, log2 p = %d; %s). The sum is right, the bytes are "
                "another algorithm's: a ring, or a parameter server?", r, sent, got,
                (double)sent / (double)nb, (double)got / (double)nb, n, count, want,
                dt_pow2_floor(n), k, role);
}

/* Notes what is wrong with the rounds one allreduce took on MPI_COMM_WORLD: log2 p
 * exchanges, each one round for both partners, and one round each for the fold and
 * the unfold when n is not a power of two. */
static void check_rounds(int rounds, int count)
{
    int n = ht_size, k = dt_rd_steps(n), fold = dt_pow2_floor(n) != n;
    int want = n == 1 ? 0 : k + 2 * fold;
    if (rounds == want || ht_rank != 0)
        return;
    const char *why = "";
    if (rounds == 2 * k + 2 * fold && k > 0)
        why = ": each exchange took two rounds, one partner receiving before it sent. "
              "dt_sendrecv sends and receives at once, one round for both";
    else if (rounds > want)
        why = ": more steps than log2 p, or messages passed on one after another "
              "where they could go at once";
    ht_fail("%d ranks, count %d: the allreduce took %d rounds (the longest chain of "
            "messages, each sent after the one it waited for); recursive doubling takes "
            "log2 p = %d%s = %d%s", n, count, rounds, k,
            fold ? ", +1 to fold and +1 to unfold" : "", want, why);
}

/* One allreduce of count = gr_count(ci, n) floats on comm, each rank starting from its
 * own data, checked against MPI_Iallreduce (and, on MPI_COMM_WORLD, with TRAFFIC for
 * its bytes, with ROUNDS for its rounds). */
enum { TRAFFIC = 1, ROUNDS = 2 };
static void run_one(int kase, int ci, int how, MPI_Comm comm)
{
    int rank, count = gr_count(ci, ht_size);
    MPI_Comm_rank(comm, &rank);
    unsigned seed = (unsigned)(kase * 1000 + ci);
    float *buf = gr_guarded_data(count, seed, rank);
    rd_fill(buf, count, seed, rank);
    float *want = gr_copy(buf, count);
    HT_MPI(MPI_Iallreduce(MPI_IN_PLACE, want, count, MPI_FLOAT, MPI_SUM, comm, &ht_req));

    dt_bytes_reset();
    if (how & ROUNDS)
        gr_rounds_start();
    ex_rd_allreduce(buf, count, comm);
    size_t sent = dt_bytes_sent(), got = dt_bytes_received();
    int rounds = how & ROUNDS ? gr_rounds_end() : 0;

    explain(buf, want, count, seed, comm);
    if ((how & TRAFFIC) && ht_nbad == 0)
        check_traffic(sent, got, count);
    if ((how & ROUNDS) && gr_all_ok())
        check_rounds(rounds, count);
    gr_free_guarded(buf);
    free(want);
}

/* Counts gr_count(c0..c1), stopping at the first where some rank failed (agreed, so
 * every rank stops together). */
static void run_counts(int kase, int c0, int c1, int how)
{
    for (int ci = c0; ci <= c1; ci++) {
        run_one(kase, ci, how, MPI_COMM_WORLD);
        if (!gr_all_ok())
            break;
    }
}

START_TEST(small_counts)
{
    run_counts(K_SMALL, 0, GR_NCOUNTS - 2, 0);
    HT_VERDICT();
}
END_TEST

START_TEST(large_count)
{
    run_counts(K_LARGE, GR_NCOUNTS - 1, GR_NCOUNTS - 1, 0);
    HT_VERDICT();
}
END_TEST

/* count gr_count(ci) on a communicator other than MPI_COMM_WORLD, then (for
 * gr_sub_comm_ok) on MPI_COMM_WORLD. */
typedef struct { int ci; MPI_Comm comm; } sub_run;
static void sub_one(void *ctx) { sub_run *s = ctx; run_one(K_SUB, s->ci, 0, s->comm); }
static void sub_world(void *ctx) { run_one(K_SUB, ((sub_run *)ctx)->ci, 0, MPI_COMM_WORLD); }

/* All ranks numbered backwards, then two halves, even and odd ranks, each numbered
 * backwards (gr_split): code that takes its rank or the size from MPI_COMM_WORLD pairs
 * the wrong partners. A count that fails is run again on MPI_COMM_WORLD to tell
 * whether comm is to blame. */
START_TEST(sub_comm)
{
    for (int k = 0; k < 2 && gr_all_ok(); k++) {
        MPI_Comm comm = k ? gr_split() : gr_backwards();
        for (int j = 0; j < GR_NCOUNTS; j++) {
            sub_run s = { gr_telling(j), comm };
            sub_one(&s);
            if (!gr_sub_comm_ok(sub_world, &s))
                break;
        }
        MPI_Comm_free(&comm);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(rd_traffic)
{
    run_counts(K_TRAFFIC, 0, GR_NCOUNTS - 1, TRAFFIC);
    HT_VERDICT();
}
END_TEST

/* Counts 1 and 7n+3: log2 p rounds, +2 with a fold (0-byte messages count too). */
START_TEST(rounds)
{
    for (int ci = 1; ci <= 3 && gr_all_ok(); ci += 2)
        run_one(K_ROUNDS, ci, ROUNDS, MPI_COMM_WORLD);
    HT_VERDICT();
}
END_TEST

/* Recursive doubling is the exercise: no collective may do it instead. */
static const gr_rule rules[] = {
    { "ex_rd_allreduce", GR_DT_COLLECTIVES "|" GR_MPI_COLLECTIVES,
      "the exercise is to write recursive doubling yourself, from dt_sendrecv, dt_send "
      "and dt_recv; dtlab's and MPI's collectives do it for you" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "small_counts", 3, GR_MPI, small_counts, 1,
          "counts 0, 1, n-1, 7n+3: the exact sum on every rank, folded ranks included",
          "ex_rd_allreduce" },
        { "large_count", 3, GR_MPI, large_count, 1,
          "past MPI's eager limit: the partners of an exchange must not both send first",
          "ex_rd_allreduce" },
        { "sub_comm", 2, GR_MPI, sub_comm, 1,
          "the same on communicators numbering the ranks backwards, all and in halves",
          "ex_rd_allreduce" },
        { "rd_traffic", 2, GR_MPI, rd_traffic, 1,
          "bytes: log2 p whole buffers per rank (+1 in a folded pair), not a ring's",
          "ex_rd_allreduce" },
        { "rounds", 2, GR_MPI, rounds, 1,
          "log2 p rounds (+2 with a fold): an exchange is one round for both partners",
          "ex_rd_allreduce" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "06_rd_allreduce",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "two partners that both send first (past MPI's eager limit dt_send "
                    "waits for the receive: exchange with dt_sendrecv), a rank that sits "
                    "out waiting for a result its pair never sends, or partners taken "
                    "from the real ranks instead of the active ones? On another "
                    "communicator (sub_comm): are rank and size those of comm?",
        /* 7: three folded pairs around a core of four (5 ranks fold one pair, 6 two) */
        .ranks = "7" });
}
