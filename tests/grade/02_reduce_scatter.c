/* Grading exercise 02, the ring reduce-scatter. Every rank fills its buffer with its own
 * data (dt_fill_test_data: quarters, so every sum is exact in any order), MPI sums the
 * whole buffer for reference (MPI_Iallreduce), and after ex_ring_reduce_scatter chunk r
 * of rank r must equal chunk r of MPI's sum, exactly. The counts are gr_count's: empty
 * chunks, uneven ones, and chunks past MPI's eager limit.
 *
 * When a chunk is wrong the suite looks for the mistake behind it: the full sum sitting
 * in another chunk (the schedule shifted), or the chunk holding the data of some ranks
 * only (a step missing, or data copied where it should be added). */
#include <stdlib.h>
#include "grade.h"

/* ==== what went wrong ==== */

/* The ranks of a mask, as "0, 2, 3". */
static const char *ranks_of(unsigned mask, char *s, size_t len)
{
    size_t k = 0;
    s[0] = '\0';
    for (int q = 0; q < 32 && k < len; q++)
        if (mask >> q & 1)
            k += (size_t)snprintf(s + k, len - k, k ? ", %d" : "%d", q);
    return s;
}

/* A hint for a chunk r that is wrong on rank r: "" when none fits. Looks for the full
 * sum in another chunk, then for the sum of a subset of the ranks (inputs rebuilt from
 * the seed), then for the rank's own data added twice. Chunks of one element are too
 * small to tell apart by chance, so they get no hint. A shifted schedule, the most
 * common mistake, is also named in *lead, which opens the message (so that it stays
 * on the first line of the grader's table). */
static const char *diagnose(const float *buf, const float *want, int count, int rank,
                            int n, unsigned seed, char *lead, size_t len)
{
    static char hint[320];
    size_t lo, hi;
    dt_chunk_bounds((size_t)count, n, rank, &lo, &hi);
    hint[0] = '\0';
    lead[0] = '\0';
    for (int c = 0; c < n; c++) {
        size_t clo, chi;
        dt_chunk_bounds((size_t)count, n, c, &clo, &chi);
        if (c == rank || chi - clo < 2)
            continue;
        size_t k = clo;
        while (k < chi && buf[k] == want[k])
            k++;
        if (k == chi) {
            int off = (c - rank + n) % n;
            snprintf(lead, len, "your chunks are off by %d: chunk %d, not chunk %d, "
                     "holds its full sum; ", off <= n / 2 ? off : n - off, c, rank);
            if (gr_hints())
                snprintf(hint, sizeof hint, ". At step s rank r sends chunk (r-s-1) mod "
                         "n and receives chunk (r-s-2) mod n (dt_ring_rs_send_chunk, "
                         "dt_ring_rs_recv_chunk), to end owning chunk r");
            else
                snprintf(hint, sizeof hint, ". Which chunk does rank r send at step 0, "
                         "and which does it own after the n-1 steps?");
            return hint;
        }
    }
    if (hi - lo < 2)
        return hint;
    size_t k = lo;
    while (k < hi && buf[k] == want[k])
        k++;
    if (k == hi - 1 && (size_t)count % n != 0) {
        snprintf(hint, sizeof hint, "; only its last element is wrong: chunks differ in "
                 "size (the first count %% n hold one more), take their bounds from "
                 "dt_chunk_bounds");
        return hint;
    }

    /* x[q]: rank q's input, rebuilt as the test made it */
    float *x = malloc((size_t)n * (size_t)count * sizeof *x);
    DT_REQUIRE(x != NULL, "out of memory");
    for (int q = 0; q < n; q++)
        dt_fill_test_data(x + (size_t)q * count, count, MPI_FLOAT, MPI_SUM, seed, q);
    const float *own = x + (size_t)rank * count;
    unsigned found = 0;           /* the ranks whose data sum to the chunk, a bit each */
    for (unsigned m = 1; n <= 12 && m < (1u << n) && !found; m++) {
        size_t i = lo;
        for (; i < hi; i++) {
            float s = 0;
            for (int q = 0; q < n; q++)
                if (m >> q & 1)
                    s += x[(size_t)q * count + i];
            if (s != buf[i])
                break;
        }
        if (i == hi)
            found = m;
    }
    k = lo;
    while (k < hi && buf[k] == want[k] + own[k])
        k++;
    free(x);

    char who[64];
    if (found == 1u << rank)
        snprintf(hint, sizeof hint, "; it still holds this rank's own data only: what "
                 "arrives from the left must be added into the chunk it belongs to");
    else if ((found & (found - 1)) == 0 && found)
        snprintf(hint, sizeof hint, "; it holds rank %s's data only: what arrives "
                 "must be ADDED to your own data (+=), not copied over it",
                 ranks_of(found, who, sizeof who));
    else if (found)
        snprintf(hint, sizeof hint, "; it holds the sum of ranks %s only, not of all %d: "
                 "a step missing (there are n-1), or a chunk passed on before its sum "
                 "was added?", ranks_of(found, who, sizeof who), n);
    else if (k == hi)
        snprintf(hint, sizeof hint, "; it holds the sum plus this rank's data once more: "
                 "your own data was added twice");
    return hint;
}

/* ==== the checks ==== */

/* Runs ex_ring_reduce_scatter on comm over count floats and checks chunk rank of comm
 * against MPI's sum. */
static void check_rs(MPI_Comm comm, int count, unsigned seed)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    float *buf = gr_guarded_data(count, seed, rank), *want = gr_floats(count);
    HT_MPI(MPI_Iallreduce(buf, want, count, MPI_FLOAT, MPI_SUM, comm, &ht_req));

    ex_ring_reduce_scatter(buf, count, comm);

    size_t lo, hi;
    dt_chunk_bounds((size_t)count, n, rank, &lo, &hi);
    if (gr_guards_ok(buf, count))
        for (size_t k = lo; k < hi; k++)
            if (buf[k] != want[k]) {
                char lead[160];
                const char *hint = diagnose(buf, want, count, rank, n, seed, lead,
                                            sizeof lead);
                ht_fail("count %d: %schunk %d is [%zu, %zu)%s; element %zu is %g, "
                        "expected %g, the sum over all ranks (%d ranks)%s", count, lead, rank,
                        lo, hi, gr_on(comm), k, buf[k], want[k], n, hint);
                break;
            }
    gr_free_guarded(buf);
    free(want);
}

/* The ring sends every chunk but the rank's own, once: (n-1)/n of the buffer. */
static void check_bytes(MPI_Comm comm, int count, unsigned seed)
{
    float *buf = gr_guarded_data(count, seed, ht_rank);
    dt_bytes_reset();
    ex_ring_reduce_scatter(buf, count, comm);
    size_t sent = dt_bytes_sent(), lo, hi;
    dt_chunk_bounds((size_t)count, ht_size, ht_rank, &lo, &hi);
    size_t want = ((size_t)count - (hi - lo)) * sizeof(float);
    char but[160] = "";
    for (int c = 0; c < ht_size && sent != want && sent != 0; c++) {
        size_t clo, chi;
        dt_chunk_bounds((size_t)count, ht_size, c, &clo, &chi);
        if (c != ht_rank && sent == ((size_t)count - (chi - clo)) * sizeof(float)) {
            snprintf(but, sizeof but, ": every chunk but chunk %d, as if the "
                     "schedule were shifted (see the case sum)", c);
            break;
        }
    }
    HT_EXPECT(sent == want, "count %d: this rank sent %zu bytes through dt_send, "
              "dt_recv and dt_sendrecv%s; the ring sends every chunk but its own once, "
              "%zu bytes%s", count, sent, but, want, sent == 0 ? " (MPI's own calls do "
              "not count: the exercise is to build the ring from dtlab's p2p)" : "");
    gr_guards_ok(buf, count);          /* a write outside the buffer costs this case too */
    gr_free_guarded(buf);
}

/* ==== cases ==== */

START_TEST(sum)
{
    gr_each_count(check_rs, MPI_COMM_WORLD, 200);
    HT_VERDICT();
}
END_TEST

/* The same on two communicators other than MPI_COMM_WORLD: all ranks numbered
 * backwards (rank r of MPI_COMM_WORLD is rank n-1-r), then two halves, even and odd
 * ranks, each numbered backwards (gr_split: the size differs too). Code that asks
 * MPI_COMM_WORLD for its rank or size owns the wrong chunk or cuts the wrong chunks;
 * a count that fails is run again on MPI_COMM_WORLD to tell whether that is why. */
START_TEST(sub_comm)
{
    MPI_Comm back = gr_backwards();
    gr_each_count_on(check_rs, back, 210);
    MPI_Comm_free(&back);
    if (gr_all_ok()) {
        MPI_Comm half = gr_split();
        gr_each_count_on(check_rs, half, 230);
        MPI_Comm_free(&half);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(bytes)
{
    gr_each_count(check_bytes, MPI_COMM_WORLD, 220);
    HT_VERDICT();
}
END_TEST

/* The ring is the exercise: no collective may do it instead. */
static const gr_rule rules[] = {
    { "ex_ring_reduce_scatter", GR_DT_COLLECTIVES "|" GR_MPI_COLLECTIVES,
      "the exercise is to write the ring yourself, from dt_sendrecv and the schedule "
      "of lib/schedule.h; dtlab's and MPI's collectives do it for you" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "sum", 6, GR_MPI, sum, 1,
          "chunk r of rank r is the sum over the ranks, counts 0, 1, n-1, 7n+3, large",
          "ex_ring_reduce_scatter" },
        { "sub_comm", 2, GR_MPI, sub_comm, 1,
          "the same on communicators numbering the ranks backwards, all and in halves",
          "ex_ring_reduce_scatter" },
        { "bytes", 2, GR_MPI, bytes, 1,
          "each rank sends (n-1)/n of the buffer: every chunk but its own, once",
          "ex_ring_reduce_scatter" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "02_reduce_scatter",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "every rank sending before it receives? Once a chunk is larger "
                    "than MPI's eager limit, dt_send waits for its receive to be posted, "
                    "and no rank gets to receive. dt_sendrecv sends to the right and "
                    "receives from the left at once" });
}
