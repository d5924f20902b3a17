/* Grading exercise 04, the ring allreduce: the sum, and the mean that data parallelism
 * takes of gradients. Every rank fills its buffer with its own data (dt_fill_test_data:
 * quarters, so every sum is exact in any order); MPI sums the same buffers for reference
 * (MPI_Iallreduce). After ex_ring_allreduce every element on every rank must equal MPI's
 * sum exactly; after ex_allreduce_mean, MPI's sum divided by the number of ranks, to a
 * small relative tolerance (dividing before summing rounds a little differently, and
 * is not wrong). The counts are gr_count's.
 *
 * The grader links dtlab's own exercises 02 and 03, so a mistake found here is in this
 * file. When a mean is wrong the suite says what it looks like instead: the sum, the
 * mean divided once more, this rank's own data. */
#include <math.h>
#include <stdlib.h>
#include "grade.h"

/* ==== the checks ==== */

/* The chunk (dt_chunk_bounds) element k of count lies in, over n ranks. */
static int chunk_of(size_t k, int count, int n)
{
    int c = 0;
    size_t lo, hi;
    dt_chunk_bounds((size_t)count, n, c, &lo, &hi);
    while (k >= hi)
        dt_chunk_bounds((size_t)count, n, ++c, &lo, &hi);
    return c;
}

/* a within a small relative tolerance of b: sums of the same n quarters, divided by n
 * before or after, differ by a few roundings of float */
static int close_to(float a, float b)
{
    return fabsf(a - b) <= 1e-5f * fabsf(b) + 1e-6f;
}

/* Runs fn, ex_ring_allreduce or ex_allreduce_mean, on comm over count floats and checks
 * every element: the sum exactly, or the mean (sum / n) to close_to. */
static void check(void (*fn)(float *, int, MPI_Comm), int mean, MPI_Comm comm, int count,
                  unsigned seed)
{
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    float *buf = gr_guarded_data(count, seed, rank), *sum = gr_floats(count);
    float *own = gr_copy(buf, count);
    HT_MPI(MPI_Iallreduce(buf, sum, count, MPI_FLOAT, MPI_SUM, comm, &ht_req));

    fn(buf, count, comm);

    int k = count;                      /* the first wrong element, or count */
    if (gr_guards_ok(buf, count))
        for (k = 0; k < count; k++)
            if (mean ? !close_to(buf[k], sum[k] / (float)n) : buf[k] != sum[k])
                break;
    if (k < count) {
        float got = buf[k], want = mean ? sum[k] / (float)n : sum[k];
        int c = chunk_of((size_t)k, count, n);
        size_t lo, hi;
        dt_chunk_bounds((size_t)count, n, rank, &lo, &hi);
        size_t j = lo;
        while (j < hi && (mean ? close_to(buf[j], sum[j] / (float)n) : buf[j] == sum[j]))
            j++;
        const char *hint = "";
        char owner[160];
        snprintf(owner, sizeof owner, " After the reduce-scatter rank %d owns chunk %d, "
                 "summed: it divides that chunk, before the allgather.", c, c);
        if (n > 1 && mean && close_to(got, sum[k]) && c != rank && hi > lo && j == hi)
            hint = "this rank's own chunk is right, but the chunk below arrived as a SUM: "
                   "its owner must divide it BEFORE the allgather, so that it travels "
                   "divided.";
        else if (n > 1 && mean && close_to(got, sum[k]))
            hint = "it looks like the SUM; the MEAN was due: no chunk arrived divided by "
                   "the number of ranks (was one divided at all, and was it the chunk "
                   "its rank owns after the reduce-scatter, whole?).";
        else if (n > 1 && mean && close_to(got, want / (float)n))
            hint = "it looks like the mean divided by the number of ranks once more: "
                   "each element must be divided once, by its chunk's owner.";
        else if (n > 1 && c != rank && hi > lo && j == hi)
            hint = "only this rank's own chunk is right: the reduce-scatter leaves "
                   "each rank one chunk, and the allgather hands them round.";
        else if (n > 1 && got == own[k])
            hint = "it still holds this rank's own data: nothing was reduced.";
        ht_fail("count %d%s: %s%slement %d (in chunk %d) is %g, expected %g, the %s "
                "over all ranks (%d ranks).%s", count, gr_on(comm), hint,
                hint[0] ? " E" : "e", k, c, got, want, mean ? "mean" : "sum", n,
                mean && n > 1 && hint[0] && gr_hints() ? owner : "");
    }
    gr_free_guarded(buf);
    free(sum);
    free(own);
}

static void check_sum(MPI_Comm comm, int count, unsigned seed)
{
    check(ex_ring_allreduce, 0, comm, count, seed);
}

static void check_mean(MPI_Comm comm, int count, unsigned seed)
{
    check(ex_allreduce_mean, 1, comm, count, seed);
}

/* The ring allreduce sends 2(n-1)/n of the buffer: the reduce-scatter every chunk but
 * the rank's own (r), the allgather every chunk but the one it gets last (r+1). */
static void check_bytes(MPI_Comm comm, int count, unsigned seed)
{
    size_t lo, hi, lo1, hi1, want = 0;
    dt_chunk_bounds((size_t)count, ht_size, ht_rank, &lo, &hi);
    int right = dt_ring_right(ht_rank, ht_size);
    dt_chunk_bounds((size_t)count, ht_size, right, &lo1, &hi1);
    if (ht_size > 1)
        want = (2 * (size_t)count - (hi - lo) - (hi1 - lo1)) * sizeof(float);
    for (int m = 0; m < 2; m++) {
        float *buf = gr_guarded_data(count, seed, ht_rank);
        dt_bytes_reset();
        (m ? ex_allreduce_mean : ex_ring_allreduce)(buf, count, comm);
        size_t sent = dt_bytes_sent();
        HT_EXPECT(sent == want, "count %d: %s sent %zu bytes from this rank; the "
                  "ring sends 2(n-1)/n of the buffer, %zu bytes: build it from "
                  "ex_ring_reduce_scatter and ex_ring_allgather, once each", count,
                  m ? "ex_allreduce_mean" : "ex_ring_allreduce", sent, want);
        gr_guards_ok(buf, count);      /* a write outside the buffer costs this case too */
        gr_free_guarded(buf);
    }
}

/* ==== cases ==== */

START_TEST(sum)
{
    gr_each_count(check_sum, MPI_COMM_WORLD, 400);
    HT_VERDICT();
}
END_TEST

START_TEST(mean)
{
    gr_each_count(check_mean, MPI_COMM_WORLD, 410);
    HT_VERDICT();
}
END_TEST

/* Both on two communicators other than MPI_COMM_WORLD: all ranks numbered backwards,
 * then two halves, even and odd ranks, each numbered backwards (gr_split: the size
 * differs too, so a mean divided by the size of MPI_COMM_WORLD is wrong). A count that
 * fails is run again on MPI_COMM_WORLD to tell whether comm is to blame. */
START_TEST(sub_comm)
{
    for (int k = 0; k < 4 && gr_all_ok(); k++) {
        MPI_Comm comm = k % 2 ? gr_split() : gr_backwards();
        gr_each_count_on(k < 2 ? check_sum : check_mean, comm, 430 + 10 * (unsigned)k);
        MPI_Comm_free(&comm);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(bytes)
{
    gr_each_count(check_bytes, MPI_COMM_WORLD, 420);
    HT_VERDICT();
}
END_TEST

/* The allreduce is built from the exercises 02 and 03 (ex_ring_reduce_scatter and
 * ex_ring_allgather, which the grader links as dtlab wrote them): no collective may do
 * it instead. */
static const gr_rule rules[] = {
    { "ex_ring_allreduce", GR_DT_COLLECTIVES "|" GR_MPI_COLLECTIVES,
      "build it from ex_ring_reduce_scatter and ex_ring_allgather (exercises 02 and "
      "03); dtlab's and MPI's collectives do it for you" },
    { "ex_allreduce_mean", GR_DT_COLLECTIVES "|" GR_MPI_COLLECTIVES,
      "build it from ex_ring_reduce_scatter and ex_ring_allgather (exercises 02 and "
      "03), dividing between the two; dtlab's and MPI's collectives do it for you" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "sum", 2, GR_MPI, sum, 1,
          "ex_ring_allreduce: MPI's sum on every rank, counts 0, 1, n-1, 7n+3, large",
          "ex_ring_allreduce" },
        { "mean", 2, GR_MPI, mean, 1,
          "ex_allreduce_mean: the sum over n on every rank, counts 0, 1, n-1, 7n+3, "
          "large", "ex_allreduce_mean" },
        { "sub_comm", 2, GR_MPI, sub_comm, 1,
          "both on communicators numbering the ranks backwards, all and in halves",
          "ex_ring_allreduce ex_allreduce_mean" },
        { "bytes", 2, GR_MPI, bytes, 1,
          "both send 2(n-1)/n of the buffer: a reduce-scatter and an allgather",
          "ex_ring_allreduce ex_allreduce_mean" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "04_ring_allreduce",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "do all ranks call the two phases in the same order, the same "
                    "number of times, with the same count? A rank that skips a phase "
                    "(at count 0, or at 1 rank) leaves its neighbours waiting" });
}
