/* Grading exercise 01, the ring's arithmetic. Pure functions, checked against what they
 * must mean rather than against dtlab's answer: chunks are contiguous, cover the buffer
 * and differ by at most one; a simulation of the ring with the learner's schedule must
 * leave rank r with chunk r summed over every rank (reduce-scatter) and every rank with
 * every chunk (allgather), and what a rank receives must be what its left neighbour
 * sends. */
#include "grade.h"

enum { NMAX = 17 };

/* Checks the chunks of count over n; returns 0, a failure noted, at the first bad one. */
static int check_chunks(size_t count, int n)
{
    size_t next = 0, q = count / n, extra = count % n;
    for (int i = 0; i < n; i++) {
        size_t lo = 7, hi = 3;
        ex_chunk_bounds(count, n, i, &lo, &hi);
        size_t want = q + ((size_t)i < extra);
        HT_EXPECT(lo == next, "count %zu over %d ranks: chunk %d starts at %zu, but "
                  "chunk %d ended at %zu (chunks must be contiguous, in order)",
                  count, n, i, lo, i - 1, next);
        HT_EXPECT(hi >= lo && hi - lo == want, "count %zu over %d ranks: chunk %d is "
                  "[%zu, %zu), %zu elements; expected %zu (the first %zu chunks hold "
                  "one more)", count, n, i, lo, hi, hi - lo, want, extra);
        if (ht_nbad)
            return 0;
        next = hi;
    }
    HT_EXPECT(next == count, "count %zu over %d ranks: the chunks end at %zu", count, n,
              next);
    return ht_nbad == 0;
}

START_TEST(chunk_bounds)
{
    static const size_t counts[] = { 0, 1, 2, 5, 16, 17, 100, 101, 1023, 4096, 999983,
                                     (size_t)1 << 33 };
    int ok = 1;
    for (size_t k = 0; k < sizeof counts / sizeof counts[0] && ok; k++)
        for (int n = 1; n <= NMAX && ok; n++)
            ok = check_chunks(counts[k], n);
    HT_VERDICT();
}
END_TEST

/* Checks that rank r receives at step s what its left neighbour sends; returns 0 and
 * notes a failure otherwise. */
static int consistent(int (*send)(int, int, int), int (*recv)(int, int, int),
                      const char *what, int n, int s)
{
    for (int r = 0; r < n; r++) {
        int left = (r - 1 + n) % n, got = recv(r, n, s), sent = send(left, n, s);
        if (got < 0 || got >= n || sent < 0 || sent >= n) {
            ht_fail("%s, %d ranks, step %d: rank %d sends chunk %d and rank %d receives "
                    "chunk %d; chunks are numbered 0..%d", what, n, s, left, sent, r, got,
                    n - 1);
            return 0;
        }
        if (got != sent) {
            ht_fail("%s, %d ranks, step %d: rank %d receives chunk %d, but its left "
                    "neighbour %d sends chunk %d", what, n, s, r, got, left, sent);
            return 0;
        }
    }
    return 1;
}

/* The members of a set of up to 32 (a bit each) as text: "{0, 2, 3}". */
static const char *set_text(unsigned set, int n, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "{");
    for (int i = 0; i < n && k < len; i++)
        if (set >> i & 1)
            k += (size_t)snprintf(buf + k, len - k, "%s%d", k > 1 ? ", " : "", i);
    if (k < len)
        snprintf(buf + k, len - k, "}");
    return buf;
}

START_TEST(rs_schedule)
{
    for (int n = 1; n <= NMAX && !ht_nbad; n++) {
        /* who[r][c]: the ranks whose data chunk c of rank r holds (a bit per rank) */
        unsigned who[NMAX][NMAX], before[NMAX][NMAX];
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++)
                who[r][c] = 1u << r;
        for (int s = 0; s < n - 1 && !ht_nbad; s++) {
            if (!consistent(ex_ring_rs_send_chunk, ex_ring_rs_recv_chunk,
                            "reduce-scatter", n, s))
                break;
            memcpy(before, who, sizeof who);
            for (int r = 0; r < n; r++) {
                int c = ex_ring_rs_send_chunk(r, n, s), right = (r + 1) % n;
                if (before[right][c] & before[r][c])
                    ht_fail("reduce-scatter, %d ranks, step %d: rank %d sends chunk "
                            "%d to rank %d, which already holds some of the same ranks' "
                            "data: they would be added twice", n, s, r, c, right);
                who[right][c] |= before[r][c];
            }
        }
        for (int r = 0; r < n && !ht_nbad; r++) {
            if (who[r][r] == (1u << n) - 1)
                continue;
            char has[128], full[48] = "";
            for (int c = 0; c < n; c++)
                if (who[r][c] == (1u << n) - 1)
                    snprintf(full, sizeof full, "; the full sum is in its chunk %d", c);
            ht_fail("reduce-scatter, %d ranks: after the %d step(s) rank %d's chunk %d "
                    "holds the data of ranks %s only, not of all %d%s (rank r must end "
                    "owning chunk r)", n, n - 1, r, r, set_text(who[r][r], n, has,
                    sizeof has), n, full);
        }
    }
    HT_VERDICT();
}
END_TEST

START_TEST(ag_schedule)
{
    for (int n = 1; n <= NMAX && !ht_nbad; n++) {
        unsigned have[NMAX], before[NMAX];      /* a bit per chunk */
        for (int r = 0; r < n; r++)
            have[r] = 1u << r;
        for (int s = 0; s < n - 1 && !ht_nbad; s++) {
            if (!consistent(ex_ring_ag_send_chunk, ex_ring_ag_recv_chunk, "allgather",
                            n, s))
                break;
            memcpy(before, have, sizeof have);
            for (int r = 0; r < n; r++) {
                int c = ex_ring_ag_send_chunk(r, n, s);
                HT_EXPECT(before[r] >> c & 1, "allgather, %d ranks, step %d: rank %d "
                          "sends chunk %d, which it does not hold yet", n, s, r, c);
                have[(r + 1) % n] |= 1u << c;
            }
        }
        for (int r = 0; r < n && !ht_nbad; r++)
            if (have[r] != (1u << n) - 1) {
                char has[128];
                ht_fail("allgather, %d ranks: after the %d step(s) rank %d holds chunks "
                        "%s only, not all %d", n, n - 1, r,
                        set_text(have[r], n, has, sizeof has), n);
            }
    }
    HT_VERDICT();
}
END_TEST

/* The arithmetic is the exercise: lib/schedule.h's answers may not stand in for it. */
#define SCHED_WHY "write the arithmetic yourself; lib/schedule.h's dt_chunk_bounds and " \
                  "dt_ring_* are the answer"
static const gr_rule rules[] = {
    { "ex_chunk_bounds", "dt_chunk_bounds", SCHED_WHY },
    { "ex_ring_rs_send_chunk", "dt_ring_(rs|ag)_(send|recv)_chunk", SCHED_WHY },
    { "ex_ring_rs_recv_chunk", "dt_ring_(rs|ag)_(send|recv)_chunk", SCHED_WHY },
    { "ex_ring_ag_send_chunk", "dt_ring_(rs|ag)_(send|recv)_chunk", SCHED_WHY },
    { "ex_ring_ag_recv_chunk", "dt_ring_(rs|ag)_(send|recv)_chunk", SCHED_WHY },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "chunk_bounds", 2, GR_PURE, chunk_bounds, 1,
          "chunks contiguous, covering, sizes differing by at most 1", "ex_chunk_bounds" },
        { "rs_schedule", 2, GR_PURE, rs_schedule, 1,
          "a simulated ring reduce-scatter at 1-17 ranks: chunk r summed on rank r",
          "ex_ring_rs_send_chunk ex_ring_rs_recv_chunk" },
        { "ag_schedule", 2, GR_PURE, ag_schedule, 1,
          "a simulated ring allgather at 1-17 ranks leaves every chunk everywhere",
          "ex_ring_ag_send_chunk ex_ring_ag_recv_chunk" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "01_ring_schedule",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]) });
}
