/* Grading exercise 14, the all-to-all by pairwise exchange:
 *
 *   schedule   ex_a2a_steps and ex_a2a_partner for N = 1..64 ranks (no MPI): the fewest
 *              steps (N-1 for even N, N for odd N); at every step each rank's partner
 *              is a rank whose partner is it (no rank in two exchanges at once); every
 *              two ranks meet exactly once. Any schedule with these properties passes.
 *   displs     ex_a2a_displs: exclusive prefix sums, zeros among the counts, n 0..9
 *   alltoallv  ex_alltoallv against MPI's own (MPI_Ialltoallv) on the same buffers:
 *              every block of every size, counts 0 to ~49 KiB a block that do not
 *              divide, blocks laid out backwards with gaps between them that must stay
 *              untouched; a wrong element is told what it is instead (which rank's
 *              block for whom, which element)
 *   sub_comm   the same on communicators numbering the ranks backwards, all and halves
 *   bytes      what ex_alltoallv returns, and what dtlab's p2p saw it send: every block
 *              but its own, once, in bytes
 * The MPI cases run at 1, 2, 3, 4, 5 and 7 ranks: the schedule of odd N is not that of
 * even N. A block larger than MPI's eager limit makes two ranks that both send first
 * wait for each other: the grader names that deadlock within GRADE_WAIT. */
#include <stdlib.h>
#include "grade.h"

/* ==== the schedule ==== */

/* The first fault of the schedule for N ranks, into why; 0 when there is none. */
static int schedule_fault(int N, char *why, size_t len)
{
    int want = N % 2 ? N : N - 1, steps = ex_a2a_steps(N);
    if (steps != want) {
        snprintf(why, len, "N = %d: ex_a2a_steps is %d, expected %d: there are N(N-1)/2 "
                 "pairs, and a step holds at most %d of them (%s)", N, steps, want, N / 2,
                 N % 2 ? "odd N: every rank sits out one step" : "even N: nobody sits out");
        return 1;
    }
    int *met = calloc((size_t)N * N, sizeof *met);     /* met[a N + b]: the step + 1 */
    DT_REQUIRE(met != NULL, "out of memory");
    int bad = 0;
    for (int k = 0; k < steps && !bad; k++)
        for (int r = 0; r < N && !bad; r++) {
            int p = ex_a2a_partner(r, N, k);
            if (p < 0 || p >= N) {
                snprintf(why, len, "N = %d, step %d: rank %d's partner is %d, not a rank "
                         "(0..%d)", N, k, r, p, N - 1);
                bad = 1;
            } else if (ex_a2a_partner(p, N, k) != r) {
                int q = ex_a2a_partner(p, N, k);
                snprintf(why, len, "N = %d, step %d: rank %d's partner is %d, but rank "
                         "%d's is %d: %s", N, k, r, p, p, q, q == p ? "it sits out, and "
                         "rank r would wait for it forever" : "a rank in two exchanges "
                         "at once, or one waiting for a partner busy elsewhere: the "
                         "partner's partner must be the rank itself");
                bad = 1;
            } else if (p != r && met[r * N + p]) {
                snprintf(why, len, "N = %d: ranks %d and %d meet at step %d and again at "
                         "step %d: every two ranks meet exactly once", N, r, p,
                         met[r * N + p] - 1, k);
                bad = 1;
            } else if (p != r) {
                met[r * N + p] = k + 1;
            }
        }
    for (int a = 0; a < N && !bad; a++)
        for (int b = a + 1; b < N && !bad; b++)
            if (!met[a * N + b]) {
                snprintf(why, len, "N = %d: ranks %d and %d never meet in the %d steps, "
                         "so their blocks are never exchanged", N, a, b, steps);
                bad = 1;
            }
    free(met);
    if (bad && N % 2 && gr_hints())
        snprintf(why + strlen(why), len - strlen(why), ". For odd N, the partner of r "
                 "at step k is (k - r) mod N; the rank with 2r = k (mod N) sits out");
    return bad;
}

START_TEST(schedule)
{
    char why[400];
    for (int N = 1; N <= 64; N++)
        if (schedule_fault(N, why, sizeof why)) {
            ht_fail("%s", why);
            break;
        }
    HT_VERDICT();
}
END_TEST

/* ==== the displacements ==== */

START_TEST(displs)
{
    static const int counts[][9] = {
        { 0 }, { 5 }, { 3, 0, 4, 1 }, { 0, 0, 7 }, { 2, 9, 0, 0, 1, 13, 6 },
        { 1, 1, 1, 1, 1, 1, 1, 1, 1 }, { 0, 0, 0, 0 },
    };
    static const int ns[] = { 0, 1, 4, 3, 7, 9, 4 };
    for (int t = 0; t < (int)(sizeof ns / sizeof ns[0]) && ht_nbad == 0; t++) {
        int n = ns[t], d[10], total = 0, want[9];
        for (int j = 0; j < 10; j++)
            d[j] = -77;                                 /* d[n] must stay so */
        for (int j = 0; j < n; j++) {
            want[j] = total;
            total += counts[t][j];
        }
        int got = ex_a2a_displs(counts[t], n, d);
        char list[80] = "";
        for (int j = 0; j < n; j++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", j ? " " : "",
                     counts[t][j]);
        for (int j = 0; j < n; j++)
            if (d[j] != want[j]) {
                ht_fail("counts %s: displs[%d] is %d, expected %d%s", list, j, d[j],
                        want[j], d[j] == want[j] + counts[t][j] ? ": the sum up to and "
                        "INCLUDING count j, where block j starts after it ends (block j "
                        "starts after blocks 0 .. j-1)" : "");
                break;
            }
        HT_EXPECT(ht_nbad || d[n] == -77, "counts %s (n = %d): displs[%d] was written, "
                  "past the n entries", list, n, n);
        HT_EXPECT(ht_nbad || got == total, "counts %s: returns %d, expected the total, "
                  "%d", list, got, total);
    }
    HT_VERDICT();
}
END_TEST

/* ==== the all-to-all ====
 *
 * Rank r sends blk(r, j) floats to rank j: about count/n, give or take one, by a rule
 * every rank can compute, so that the blocks differ in size and sum to counts that do
 * not divide. Element i of rank r's block for j holds 1 + r + 8 j + 64 i (exact in a
 * float up to i = 2^18), so a wrong element says where it came from. The blocks lie
 * backwards (block n-1 first) with gaps between them, in send and recv alike. */

static int blk(int r, int j, int count, int n, unsigned seed)
{
    int c = count / n + (int)((5u * (unsigned)r + 3u * (unsigned)j + seed) % 4) - 1;
    return c < 0 ? 0 : c;
}

static float value(int r, int j, int i) { return (float)(1 + r + 8 * j + 64 * i); }

/* Lays n blocks of the counts c out backwards with a gap of 1 or 2 floats before
 * each; returns the floats the layout spans. */
static int layout(const int *c, int n, int *displs)
{
    int at = 0;
    for (int j = n - 1; j >= 0; j--) {
        at += 1 + j % 2;
        displs[j] = at;
        at += c[j];
    }
    return at + 1;
}

typedef struct {
    int n, rank, span_s, span_r;
    int *sc, *sd, *rc, *rd;           /* 4 n ints, one allocation */
    float *send, *recv, *mpi;         /* recv guarded, mpi its twin */
} a2a;

static void a2a_new(a2a *a, MPI_Comm comm, int count, unsigned seed)
{
    MPI_Comm_rank(comm, &a->rank);
    MPI_Comm_size(comm, &a->n);
    int n = a->n;
    a->sc = malloc(4 * (size_t)n * sizeof *a->sc);
    DT_REQUIRE(a->sc != NULL, "out of memory");
    a->sd = a->sc + n, a->rc = a->sc + 2 * n, a->rd = a->sc + 3 * n;
    for (int j = 0; j < n; j++) {
        a->sc[j] = blk(a->rank, j, count, n, seed);
        a->rc[j] = blk(j, a->rank, count, n, seed);
    }
    a->span_s = layout(a->sc, n, a->sd);
    a->span_r = layout(a->rc, n, a->rd);
    a->send = gr_floats(a->span_s);
    for (int i = 0; i < a->span_s; i++)
        a->send[i] = -1.0f;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < a->sc[j]; i++)
            a->send[a->sd[j] + i] = value(a->rank, j, i);
    a->recv = gr_guarded_data(a->span_r, seed, a->rank);
    for (int i = 0; i < a->span_r; i++)
        a->recv[i] = GR_GUARD_VAL;    /* the gaps must keep it */
    a->mpi = gr_copy(a->recv, a->span_r);
}

static void a2a_free(a2a *a)
{
    free(a->sc);
    free(a->send);
    gr_free_guarded(a->recv);
    free(a->mpi);
}

/* What float x of a received buffer is, for a message. */
static const char *what_is(float x)
{
    static char s[96];
    long v = (long)x - 1;
    if (x == GR_GUARD_VAL)
        snprintf(s, sizeof s, "untouched");
    else if (x == -1.0f)
        snprintf(s, sizeof s, "a float of a gap in the sender's buffer");
    else if (x >= 1 && (float)(v + 1) == x)
        snprintf(s, sizeof s, "element %ld of rank %ld's block for rank %ld", v / 64,
                 v % 8, v / 8 % 8);
    else
        snprintf(s, sizeof s, "%g", x);
    return s;
}

static void check_a2a(MPI_Comm comm, int count, unsigned seed)
{
    a2a a;
    a2a_new(&a, comm, count, seed);
    HT_MPI(MPI_Ialltoallv(a.send, a.sc, a.sd, MPI_FLOAT, a.mpi, a.rc, a.rd, MPI_FLOAT, comm,
                          &ht_req));
    ex_alltoallv(a.send, a.sc, a.sd, a.recv, a.rc, a.rd, comm);
    int at;
    if (gr_guard_hit(a.recv, a.span_r, &at)) {
        ht_fail("count %d%s: recv was written outside its %d floats, %s", count,
                gr_on(comm), a.span_r, gr_outside(at, a.span_r));
    } else {
        int k = 0;
        while (k < a.span_r && a.recv[k] == a.mpi[k])
            k++;
        if (k < a.span_r) {
            int j = -1;                          /* the block k lies in, or a gap */
            for (int q = 0; q < a.n; q++)
                if (k >= a.rd[q] && k < a.rd[q] + a.rc[q])
                    j = q;
            char want[96];
            snprintf(want, sizeof want, "%s", what_is(a.mpi[k]));
            if (j < 0)
                ht_fail("count %d%s: recv[%d], between the blocks, was written (it "
                        "holds %s): only rcounts[j] floats from rdispls[j] are rank j's",
                        count, gr_on(comm), k, what_is(a.recv[k]));
            else
                ht_fail("count %d%s: recv[%d], element %d of the block from rank %d "
                        "(rdispls[%d] = %d, rcounts[%d] = %d), is %s; expected %s%s",
                        count, gr_on(comm), k, k - a.rd[j], j, j, a.rd[j], j, a.rc[j],
                        what_is(a.recv[k]), want, a.recv[k] == GR_GUARD_VAL ? ": that "
                        "block never arrived (did this rank and rank j exchange?)" : "");
        }
    }
    a2a_free(&a);
}

START_TEST(alltoallv)
{
    gr_each_count(check_a2a, MPI_COMM_WORLD, 1400);
    HT_VERDICT();
}
END_TEST

START_TEST(sub_comm)
{
    MPI_Comm back = gr_backwards();
    gr_each_count_on(check_a2a, back, 1410);
    MPI_Comm_free(&back);
    if (gr_all_ok()) {
        MPI_Comm half = gr_split();
        gr_each_count_on(check_a2a, half, 1430);
        MPI_Comm_free(&half);
    }
    HT_VERDICT();
}
END_TEST

/* Each rank sends every block but its own, once: the sum of its scounts but its own,
 * in bytes. What ex_alltoallv returns must say so, and dtlab's p2p must have seen it. */
static void check_bytes(MPI_Comm comm, int count, unsigned seed)
{
    a2a a;
    a2a_new(&a, comm, count, seed);
    size_t want = 0, all = 0;
    for (int j = 0; j < a.n; j++) {
        all += (size_t)a.sc[j];
        if (j != a.rank)
            want += (size_t)a.sc[j] * sizeof(float);
    }
    dt_bytes_reset();
    size_t got = ex_alltoallv(a.send, a.sc, a.sd, a.recv, a.rc, a.rd, comm);
    size_t sent = dt_bytes_sent(), own = (size_t)a.sc[a.rank] * sizeof(float);
    HT_EXPECT(sent == want, "count %d: this rank sent %zu bytes through dtlab's p2p; the "
              "all-to-all sends every block but its own once, %zu bytes%s", count, sent,
              want, sent == 0 && want ? " (MPI's own calls do not count: the exercise is "
              "to exchange the blocks with dtlab's p2p)" : sent == want + own ? " (its own "
              "block too: that one is a copy)" : "");
    HT_EXPECT(ht_nbad || got == want, "count %d: ex_alltoallv returns %zu, expected %zu, "
              "the bytes this rank sent%s", count, got, want, got == all - (size_t)
              a.sc[a.rank] && want ? ": that is the FLOATS sent; bytes are floats times "
              "sizeof(float)" : got == want + own && own ? ": its own block counted too, "
              "which is copied, not sent" : got == all * sizeof(float) && own ? ": its own "
              "block counted too, which is copied, not sent" : "");
    a2a_free(&a);
}

START_TEST(bytes)
{
    gr_each_count(check_bytes, MPI_COMM_WORLD, 1420);
    HT_VERDICT();
}
END_TEST

/* The exchange is the exercise: no collective may do it instead. */
static const gr_rule rules[] = {
    { "ex_alltoallv", GR_DT_COLLECTIVES "|" GR_MPI_COLLECTIVES,
      "the exercise is to exchange the blocks yourself, pair by pair, with dt_sendrecv "
      "in the steps of ex_a2a_partner; dtlab's and MPI's all-to-all do it for you" },
    { "ex_a2a_partner", GR_DT_COLLECTIVES "|" GR_MPI_COLLECTIVES "|dt_a2a_[a-z_]*",
      "the schedule is arithmetic of your own (dtlab's dt_a2a_* shift the ranks; they do "
      "not pair them)" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "schedule", 3, GR_PURE, schedule, 1,
          "N = 1..64: the fewest steps; partners pair up; every two ranks meet once",
          "ex_a2a_steps ex_a2a_partner" },
        { "displs", 2, GR_PURE, displs, 1,
          "the blocks packed: exclusive prefix sums of the counts, and the total",
          "ex_a2a_displs" },
        { "alltoallv", 3, GR_MPI, alltoallv, 1,
          "MPI's Alltoallv on every rank: blocks of uneven sizes, 0 to large, with gaps",
          "ex_alltoallv ex_a2a_steps ex_a2a_partner" },
        { "sub_comm", 2, GR_MPI, sub_comm, 1,
          "the same on communicators numbering the ranks backwards, all and in halves",
          "ex_alltoallv ex_a2a_steps ex_a2a_partner" },
        { "bytes", 2, GR_MPI, bytes, 1,
          "every block but its own sent once; the bytes returned are those sent",
          "ex_alltoallv ex_a2a_steps ex_a2a_partner" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "14_alltoall",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "do both partners of an exchange send before they receive? Once a "
                    "block is larger than MPI's eager limit, dt_send waits for its "
                    "receive, and two ranks that both send first wait forever; "
                    "dt_sendrecv sends and receives at once. And do the partners agree: "
                    "is the partner's partner at this step this rank?",
        .ranks = "7" });
}
