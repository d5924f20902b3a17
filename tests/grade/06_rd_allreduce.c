/* Grading exercise 06, the recursive-doubling allreduce. Every rank starts with data of
 * its own (dt_fill_test_data: quarters, so any order of adding gives the exact sum) and
 * must end with exactly what MPI_Iallreduce gives, the same bits on every rank, with
 * nothing written past the buffer. At 3 and 5 ranks the fold is exercised, at 2 and 4
 * the plain exchanges.
 *
 * The small counts fit MPI's eager limit, where a send returns before its receive is
 * posted; the large one does not, so two partners that both send first wait for ever.
 *
 * The last case counts the bytes each rank sends and receives through dtlab's p2p
 * (dt_bytes_sent, dt_bytes_received): recursive doubling moves the whole buffer at every
 * step, log2 p times (p the largest power of two <= n), plus one buffer each way for a
 * folded pair. A ring, or dt_allreduce (which picks the ring for large buffers), gives
 * the right sum but other bytes, and loses that case. */
#include <stdlib.h>
#include "grade.h"

enum { K_SMALL = 1, K_LARGE = 2, K_TRAFFIC = 3 };   /* seeds differ between cases */

/* 1 when buf (count floats) equals the sum over the ranks whose bit is set in mask of
 * their starting data, 0 if not. */
static int is_sum_of(const float *buf, int count, unsigned seed, unsigned mask)
{
    float *sum = calloc((size_t)count + 1, sizeof *sum);
    float *x = malloc(((size_t)count + 1) * sizeof *x);
    DT_REQUIRE(sum != NULL && x != NULL, "out of memory");
    for (int j = 0; j < ht_size; j++) {
        if (!(mask >> j & 1))
            continue;
        dt_fill_test_data(x, count, MPI_FLOAT, MPI_SUM, seed, j);
        for (int i = 0; i < count; i++)
            sum[i] += x[i];
    }
    int same = !memcmp(buf, sum, (size_t)count * sizeof *buf);
    free(sum);
    free(x);
    return same;
}

/* Notes why buf (count floats) differs from want, MPI's sum, naming the typical
 * mistakes where they are recognisable. */
static void explain(const float *buf, const float *want, int count, unsigned seed)
{
    int r = ht_rank, n = ht_size, bad = 0, outside = 0;
    while (bad < count && buf[bad] == want[bad])
        bad++;
    if (bad == count)
        outside = gr_guard_hit(buf, count, &bad);
    if (bad == count && !outside)
        return;
    unsigned all = (1u << n) - 1, active = 0;
    for (int j = 0; j < n; j++)
        if (dt_rd_vrank(j, n) >= 0)
            active |= 1u << j;
    int sits_out = dt_rd_vrank(r, n) < 0;

    if (outside)
        ht_fail("rank %d, %d ranks, count %d: %s was overwritten (sizes are count * "
                "sizeof(float) bytes, no more)", r, n, count, gr_outside(bad, count));
    else if (is_sum_of(buf, count, seed, 1u << r))
        ht_fail("rank %d still holds its own data (%d ranks, count %d)%s", r, n, count,
                sits_out ? ": it sits out the exchanges, so its partner must hand it the "
                "result at the end (the unfold)" : ": it added nothing");
    else if (active != all && is_sum_of(buf, count, seed, active))
        ht_fail("rank %d holds the sum over the active ranks only (%d ranks, count %d): "
                "the data of the ranks that sit out is missing. In the fold, even rank "
                "2i hands its buffer to 2i+1, which adds it, before the exchanges", r, n,
                count);
    else if (is_sum_of(buf, count, seed, all & ~(1u << r)))
        ht_fail("rank %d holds the sum over every rank but itself (%d ranks, count %d): "
                "did it replace its buffer by its partner's instead of adding?", r, n,
                count);
    else
        ht_fail("rank %d, %d ranks, count %d: element %d is %g, expected %g (the sum "
                "over all ranks)", r, n, count, bad, (double)buf[bad], (double)want[bad]);
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
                "another algorithm's: a ring, a parameter server, or dt_allreduce, which "
                "takes the ring for large buffers?", r, sent, got,
                (double)sent / (double)nb, (double)got / (double)nb, n, count, want,
                dt_pow2_floor(n), k, role);
}

/* One allreduce of count = gr_count(ci, n) floats, each rank starting from its own data,
 * checked against MPI_Iallreduce (and, with traffic, for its bytes). */
static void run_one(int kase, int ci, int traffic)
{
    int count = gr_count(ci, ht_size);
    unsigned seed = (unsigned)(kase * 1000 + ci);
    float *buf = gr_guarded_data(count, seed, ht_rank), *want = gr_copy(buf, count);
    HT_MPI(MPI_Iallreduce(MPI_IN_PLACE, want, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                          &ht_req));

    dt_bytes_reset();
    ex_rd_allreduce(buf, count, MPI_COMM_WORLD);
    size_t sent = dt_bytes_sent(), got = dt_bytes_received();

    explain(buf, want, count, seed);
    if (traffic && ht_nbad == 0)
        check_traffic(sent, got, count);
    gr_free_guarded(buf);
    free(want);
}

/* Counts gr_count(c0..c1), stopping at the first where some rank failed (agreed, so
 * every rank stops together). */
static void run_counts(int kase, int c0, int c1, int traffic)
{
    for (int ci = c0; ci <= c1; ci++) {
        run_one(kase, ci, traffic);
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

START_TEST(rd_traffic)
{
    run_counts(K_TRAFFIC, 0, GR_NCOUNTS - 1, 1);
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "small_counts", 4, GR_MPI, small_counts, 1,
          "counts 0, 1, n-1, 7n+3: the exact sum on every rank, folded ranks included" },
        { "large_count", 4, GR_MPI, large_count, 1,
          "past MPI's eager limit: the partners of an exchange must not both send first"
        },
        { "rd_traffic", 4, GR_MPI, rd_traffic, 1,
          "bytes: log2 p whole buffers per rank (+1 in a folded pair), not a ring's" },
    };
    return gr_main(argc, argv, "06_rd_allreduce", cases, sizeof cases / sizeof cases[0]);
}
