/* Grading exercise 03, the ring allgather. Rank r's buffer starts with its own data in
 * chunk r (dt_fill_test_data) and junk everywhere else: the value -100 - r, which no
 * test data takes, so that a junk value found later names the rank it came from. MPI
 * gathers the same chunks for reference (MPI_Iallgatherv, with dt_chunk_bounds' counts
 * and offsets); after ex_ring_allgather every rank's buffer must equal it, exactly. The
 * counts are gr_count's: empty chunks, uneven ones, and chunks past MPI's eager limit,
 * where a rank that sends before it receives waits forever.
 *
 * When an element is wrong the suite says what it holds instead: junk (a chunk never
 * received, or passed on before it arrived) or another chunk (received into the wrong
 * place). */
#include <stdlib.h>
#include "grade.h"

static float junk(int rank) { return -100.0f - (float)rank; }

/* ==== what went wrong ==== */

/* A hint for element k of chunk c, wrong: "" when none fits. */
static const char *diagnose(const float *buf, const float *want, int count, int rank,
                            int n, int c, size_t k)
{
    static char hint[320];
    int h = gr_hints();
    hint[0] = '\0';
    if (c == rank) {
        snprintf(hint, sizeof hint, ": this rank's own chunk, right on entry, was "
                 "overwritten by a receive%s", h ? " (at step s rank r receives chunk "
                 "(r-s-1) mod n, never its own)" : "");
        return hint;
    }
    for (int q = 0; q < n; q++)
        if (buf[k] == junk(q)) {
            if (q == rank)
                snprintf(hint, sizeof hint, ": the junk this rank started with, so chunk "
                         "%d never arrived here%s", c, h ? " (n-1 steps; at step s "
                         "receive chunk (r-s-1) mod n, dt_ring_ag_recv_chunk)" : "");
            else
                snprintf(hint, sizeof hint, ": the junk rank %d started with, so a rank "
                         "passed on chunk %d before it had received it%s", q, c,
                         h ? " (at step s rank r sends chunk (r-s) mod n: at step 0 its "
                         "own, then the one it received the step before)" : "");
            return hint;
        }
    size_t lo, hi;
    dt_chunk_bounds((size_t)count, n, c, &lo, &hi);
    for (int d = 0; d < n; d++) {
        size_t dlo, dhi;
        dt_chunk_bounds((size_t)count, n, d, &dlo, &dhi);
        size_t len = hi - lo < dhi - dlo ? hi - lo : dhi - dlo, i = 0;
        if (d == c || len < 2)
            continue;
        while (i < len && buf[lo + i] == want[dlo + i])
            i++;
        if (i == len) {
            snprintf(hint, sizeof hint, ": chunk %d holds chunk %d's data, so it was "
                     "received into the wrong place%s", c, d, h ? " (the chunk received "
                     "at step s is (r-s-1) mod n; its bounds come from dt_chunk_bounds)"
                     : " (its bounds come from dt_chunk_bounds)");
            return hint;
        }
    }
    return hint;
}

/* ==== the checks ==== */

/* Runs ex_ring_allgather on comm over count floats and checks every element against
 * MPI_Iallgatherv of the same chunks. */
static void check_ag(MPI_Comm comm, int count, unsigned seed)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    float *buf = gr_guarded_data(count, seed, rank), *want = gr_floats(count);
    int *counts = malloc((size_t)n * sizeof *counts);
    int *offs = malloc((size_t)n * sizeof *offs);
    DT_REQUIRE(counts && offs, "out of memory");
    for (int q = 0; q < n; q++) {
        size_t lo, hi;
        dt_chunk_bounds((size_t)count, n, q, &lo, &hi);
        counts[q] = (int)(hi - lo);
        offs[q] = (int)lo;
    }
    /* this rank's data in its own chunk, junk elsewhere */
    for (int k = 0; k < count; k++)
        if (k < offs[rank] || k >= offs[rank] + counts[rank])
            buf[k] = junk(rank);
    HT_MPI(MPI_Iallgatherv(buf + offs[rank], counts[rank], MPI_FLOAT, want, counts, offs,
                           MPI_FLOAT, comm, &ht_req));

    ex_ring_allgather(buf, count, comm);

    if (gr_guards_ok(buf, count))
        for (int c = 0; c < n; c++) {
            int k = offs[c], end = offs[c] + counts[c];
            while (k < end && buf[k] == want[k])
                k++;
            if (k < end) {
                ht_fail("count %d%s: element %d, in chunk %d (rank %d's), is %g, "
                        "expected %g%s", count, gr_on(comm), k, c, c, buf[k], want[k],
                        diagnose(buf, want, count, rank, n, c, (size_t)k));
                break;
            }
        }
    gr_free_guarded(buf);
    free(want);
    free(counts);
    free(offs);
}

/* The ring sends every chunk but one once: (n-1)/n of the buffer. Rank r passes on
 * chunks r, r-1, ..., r-n+2; the one it never sends is chunk r+1, the last it gets. */
static void check_bytes(MPI_Comm comm, int count, unsigned seed)
{
    float *buf = gr_guarded_data(count, seed, ht_rank);
    dt_bytes_reset();
    ex_ring_allgather(buf, count, comm);
    size_t sent = dt_bytes_sent(), lo, hi;
    int right = dt_ring_right(ht_rank, ht_size);
    dt_chunk_bounds((size_t)count, ht_size, right, &lo, &hi);
    size_t want = ht_size == 1 ? 0 : ((size_t)count - (hi - lo)) * sizeof(float);
    HT_EXPECT(sent == want, "count %d: this rank sent %zu bytes through dt_send, "
              "dt_recv and dt_sendrecv; the ring passes on every chunk but the one "
              "it gets last (its right neighbour's), once: %zu bytes%s", count, sent,
              want, sent == 0 ? " (MPI's own calls do not count: the exercise is to "
              "build the ring from dtlab's p2p)" : "");
    gr_guards_ok(buf, count);          /* a write outside the buffer costs this case too */
    gr_free_guarded(buf);
}

/* ==== cases ==== */

START_TEST(gather)
{
    gr_each_count(check_ag, MPI_COMM_WORLD, 300);
    HT_VERDICT();
}
END_TEST

/* The same on two communicators other than MPI_COMM_WORLD: all ranks numbered
 * backwards (rank r of MPI_COMM_WORLD is rank n-1-r), then two halves, even and odd
 * ranks, each numbered backwards (gr_split: the size differs too). Code that asks
 * MPI_COMM_WORLD for its rank starts from the wrong chunk; a count that fails is run
 * again on MPI_COMM_WORLD to tell whether that is why. */
START_TEST(sub_comm)
{
    MPI_Comm back = gr_backwards();
    gr_each_count_on(check_ag, back, 310);
    MPI_Comm_free(&back);
    if (gr_all_ok()) {
        MPI_Comm half = gr_split();
        gr_each_count_on(check_ag, half, 330);
        MPI_Comm_free(&half);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(bytes)
{
    gr_each_count(check_bytes, MPI_COMM_WORLD, 320);
    HT_VERDICT();
}
END_TEST

/* The ring is the exercise: no collective may do it instead. */
static const gr_rule rules[] = {
    { "ex_ring_allgather", GR_DT_COLLECTIVES "|" GR_MPI_COLLECTIVES,
      "the exercise is to write the ring yourself, from dt_sendrecv and the schedule "
      "of lib/schedule.h; dtlab's and MPI's collectives do it for you" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "gather", 4, GR_MPI, gather, 1,
          "every rank ends with every rank's chunk, counts 0, 1, n-1, 7n+3, large",
          "ex_ring_allgather" },
        { "sub_comm", 2, GR_MPI, sub_comm, 1,
          "the same on communicators numbering the ranks backwards, all and in halves",
          "ex_ring_allgather" },
        { "bytes", 2, GR_MPI, bytes, 1,
          "each rank sends (n-1)/n of the buffer: every chunk but one, once",
          "ex_ring_allgather" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "03_allgather",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "every rank sending before it receives? Once a chunk is larger "
                    "than MPI's eager limit, dt_send waits for its receive to be posted, "
                    "and no rank gets to receive. dt_sendrecv sends to the right and "
                    "receives from the left at once" });
}
