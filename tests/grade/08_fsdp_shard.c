/* Grading exercise 08, FSDP's shards.
 *
 * The padded picture (s = ceil(n / N); rank k owns [k*s, (k+1)*s) of the array padded
 * with zeros to N*s) is written out again here and every function is held to it: the
 * pure ones over many n and N, including n = 0, n < N (ranks that own only padding) and
 * n a multiple of N; ex_unshard against the whole parameter it was cut from;
 * ex_reduce_scatter_grad against MPI's own allreduce of the padded gradients. Output
 * buffers carry a guard past their end, so a write past it is caught. */
#include <math.h>
#include <stdlib.h>
#include "grade.h"

enum { GUARD = 8 };                 /* floats checked past the end of an output */
static const float SENTINEL = 1e9f; /* never a test value */

static size_t ceil_div(size_t n, int N) { return n / (size_t)N + (n % (size_t)N != 0); }

/* The counts a multi-rank case tries: gr_count's, and a multiple of the ranks. */
enum { NVARIANTS = GR_NCOUNTS + 1 };
static size_t count_of(int i, int N)
{
    return i < GR_NCOUNTS ? (size_t)gr_count(i, N) : (size_t)3 * N;
}

static float *alloc_floats(size_t n)
{
    float *p = malloc((n + 1) * sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory (%zu floats)", n);
    return p;
}

static void fill(float *p, size_t n, float v)
{
    for (size_t i = 0; i < n; i++)
        p[i] = v;
}

/* The index of the first guard float (past n) that changed, or -1. */
static long guard_hit(const float *p, size_t n)
{
    for (size_t g = 0; g < GUARD; g++)
        if (p[n + g] != SENTINEL)
            return (long)g;
    return -1;
}

/* ==== the pure functions ==== */

START_TEST(shard_size)
{
    static const size_t ns[] = { 10, 101, 7, 17, 1023, 999983, 0, 1, 2, 3, 5, 8, 16, 100,
                                 4096, ((size_t)1 << 33) + 1, ((size_t)1 << 40) + 7 };
    for (size_t k = 0; k < sizeof ns / sizeof ns[0] && !ht_nbad; k++) {
        for (int N = 1; N <= 17 && !ht_nbad; N++) {
            size_t n = ns[k], s = ex_shard_size(n, N), want = ceil_div(n, N);
            if (s == want)
                continue;
            size_t f = n / (size_t)N * (size_t)N;
            if (s == n / (size_t)N)
                ht_fail("ex_shard_size(n %zu, N %d) is %zu, floor(n/N): the elements "
                        "past N*floor(n/N) = %zu, %zu..%zu, would be on no rank; a shard "
                        "is s = ceil(n/N) = %zu, the last padded with zeros",
                        n, N, s, f, f, n - 1, want);
            else
                ht_fail("ex_shard_size(n %zu, N %d) is %zu; expected ceil(n/N) = %zu, "
                        "the fewest per rank that N ranks can cover n with", n, N, s,
                        want);
        }
    }
    HT_VERDICT();
}
END_TEST

START_TEST(shard)
{
    enum { NMAX = 9 };
    float full[200], shard[100 + GUARD];
    for (size_t e = 0; e < 200; e++)
        full[e] = (float)(e + 1);                 /* the value names the element */
    for (int N = 1; N <= NMAX && !ht_nbad; N++) {
        const size_t ns[] = { 0, 1, (size_t)N - 1, (size_t)N, (size_t)N + 1,
                              2 * (size_t)N + 1, 7 * (size_t)N + 3, 100 };
        for (size_t k = 0; k < sizeof ns / sizeof ns[0] && !ht_nbad; k++) {
            size_t n = ns[k], s = ceil_div(n, N);
            for (int r = 0; r < N && !ht_nbad; r++) {
                fill(shard, s + GUARD, SENTINEL);
                ex_shard(full, n, shard, r, N);
                for (size_t j = 0; j < s; j++) {
                    size_t e = (size_t)r * s + j;
                    float want = e < n ? full[e] : 0.0f;
                    if (shard[j] == want)
                        continue;
                    if (shard[j] == SENTINEL)
                        ht_fail("n %zu over %d ranks: rank %d's shard[%zu] was not "
                                "written; all s = ceil(n/N) = %zu elements of a shard "
                                "are, with zeros past n", n, N, r, j, s);
                    else if (e >= n)
                        ht_fail("n %zu over %d ranks: rank %d's shard[%zu] is %g; it is "
                                "padding (element %zu of the padded array, past n): 0",
                                n, N, r, j, shard[j], e);
                    else if (shard[j] >= 1 && shard[j] <= (float)n)
                        ht_fail("n %zu over %d ranks: rank %d's shard[%zu] holds element "
                                "%.0f of full; expected element %zu = rank * s + j, with "
                                "s = ceil(n/N) = %zu", n, N, r, j, shard[j] - 1, e, s);
                    else
                        ht_fail("n %zu over %d ranks: rank %d's shard[%zu] is %g; "
                                "expected full[%zu] = %g", n, N, r, j, shard[j], e, want);
                    break;
                }
                long g = ht_nbad ? -1 : guard_hit(shard, s);
                HT_EXPECT(g < 0, "n %zu over %d ranks: rank %d wrote shard[%zu], past "
                          "its s = ceil(n/N) = %zu floats", n, N, r, s + (size_t)g, s);
            }
        }
    }
    HT_VERDICT();
}
END_TEST

/* ==== unshard ==== */

static void check_bytes(const char *fn, size_t sent, size_t n, size_t s, int N);

/* Runs ex_unshard on comm for count variant i and checks full; with bytes, on
 * MPI_COMM_WORLD, checks the bytes sent instead. */
static void check_unshard(int i, MPI_Comm comm, int bytes)
{
    int N, k;
    MPI_Comm_size(comm, &N);
    MPI_Comm_rank(comm, &k);
    size_t n = count_of(i, ht_size), s = ceil_div(n, N), t = n / (size_t)N;
    float *P = alloc_floats(n), *shard = alloc_floats(s), *full = alloc_floats(n + GUARD);
    /* the same parameter on every rank; each rank passes its own shard of it */
    dt_fill_test_data(P, (int)n, MPI_FLOAT, MPI_SUM, 80 + i, 0);
    for (size_t j = 0; j < s; j++)
        shard[j] = k * s + j < n ? P[k * s + j] : 0.0f;
    fill(full, n + GUARD, SENTINEL);
    dt_bytes_reset();
    ex_unshard(shard, n, full, comm);
    if (bytes) {
        check_bytes("ex_unshard", dt_bytes_sent(), n, s, N);
        goto out;
    }

    for (size_t e = 0; e < n; e++) {
        if (full[e] == P[e])
            continue;
        /* blocks of t = floor(n/N) gathered instead of s: full[e] from (e/t)*s + e%t */
        size_t x = t > 0 && t != s ? e / t * s + e % t : n;
        const char *hint = "";
        if (full[e] == SENTINEL)
            hint = ": not written";
        else if (x < n && full[e] == P[x] && e >= t)
            hint = ": that is element (e/t)*s + e%t, as if blocks of t = floor(n/N) "
                   "were gathered; each rank's shard is s = ceil(n/N) floats, padding "
                   "included";
        else if (full[e] == 0.0f)
            hint = ": 0, as if that part of the padded scratch was never gathered into";
        ht_fail("count %zu, %d ranks (s = %zu)%s: full[%zu] is %g; expected %g, which "
                "rank %zu holds at shard[%zu]%s", n, N, s, gr_on(comm), e, full[e], P[e],
                e / s, e % s, hint);
        break;
    }
    long g = guard_hit(full, n);
    HT_EXPECT(g < 0, "count %zu, %d ranks (s = %zu)%s: full[%zu] was written, past the n "
              "floats of full: the padding must be left out (gather into a scratch of "
              "N*s floats, then copy the first n)", n, N, s, gr_on(comm), n + (size_t)g);
out:
    free(full);
    free(shard);
    free(P);
}

START_TEST(unshard)
{
    check_unshard(_i, MPI_COMM_WORLD, 0);
    HT_VERDICT();
}
END_TEST

/* ==== reduce-scatter of the gradient ==== */

/* Runs ex_reduce_scatter_grad on comm for count variant i and checks gshard; with
 * bytes, on MPI_COMM_WORLD, checks the bytes sent instead. */
static void check_grad(int i, MPI_Comm comm, int bytes)
{
    int N, k;
    MPI_Comm_size(comm, &N);
    MPI_Comm_rank(comm, &k);
    size_t n = count_of(i, ht_size), s = ceil_div(n, N), t = n / (size_t)N, P = s * N;
    float *grad = alloc_floats(n), *copy = alloc_floats(n), *pad = alloc_floats(P);
    float *sum = alloc_floats(P), *gshard = alloc_floats(s + GUARD);
    dt_fill_test_data(grad, (int)n, MPI_FLOAT, MPI_SUM, 90 + i, k);
    memcpy(copy, grad, n * sizeof *grad);
    fill(pad, P, 0.0f);
    memcpy(pad, grad, n * sizeof *grad);
    HT_MPI(MPI_Iallreduce(pad, sum, (int)P, MPI_FLOAT, MPI_SUM, comm, &ht_req));
    fill(gshard, s + GUARD, SENTINEL);
    dt_bytes_reset();
    ex_reduce_scatter_grad(grad, n, gshard, comm);
    if (bytes) {
        check_bytes("ex_reduce_scatter_grad", dt_bytes_sent(), n, s, N);
        goto out;
    }

    const float *want = sum + k * s;
    for (size_t j = 0; j < s; j++) {
        size_t e = k * s + j;
        double tol = 1e-6 + 1e-6 * fabs(want[j]);
        if (fabs(gshard[j] - want[j]) <= tol)
            continue;
        const char *hint = "";
        if (gshard[j] == SENTINEL)
            hint = ": not written";
        else if (e >= n)
            hint = ": it is padding, past n, whose gradient is 0: pad the gradient with "
                   "zeros to N*s before the reduce-scatter";
        else if (N > 1 && want[j] != 0 && fabs(gshard[j] * N - want[j]) <= tol * N)
            hint = ": looks like the MEAN; here the gradient's shard is the SUM over the "
                   "ranks";
        else if (N > 1 && fabs(gshard[j] - pad[e]) <= tol)
            hint = ": this rank's own gradient, not summed over the ranks";
        else if (j < t && t != s && k * t + j < n &&
                 fabs(gshard[j] - sum[k * t + j]) <= tol)
            hint = ": that is the sum of element k*t + j, as if shards were t = "
                   "floor(n/N) floats; a shard is s = ceil(n/N), padding included";
        else if (gshard[j] == 0.0f)
            hint = ": 0, as if this element was left out: rank k's shard is elements "
                   "[k*s, (k+1)*s) of the padded gradient";
        ht_fail("count %zu, %d ranks (s = %zu)%s: gshard[%zu] (element %zu) is %g; "
                "expected %g, the sum over the ranks%s", n, N, s, gr_on(comm), j, e,
                gshard[j], want[j], hint);
        break;
    }
    long g = guard_hit(gshard, s);
    HT_EXPECT(g < 0, "count %zu, %d ranks%s: gshard[%zu] was written, past the shard's s "
              "= ceil(n/N) = %zu floats", n, N, gr_on(comm), s + (size_t)g, s);
    HT_EXPECT(!memcmp(copy, grad, n * sizeof *grad), "count %zu, %d ranks: grad was "
              "changed; it is the caller's, to read only (pad a copy)", n, N);
out:
    free(gshard);
    free(sum);
    free(pad);
    free(copy);
    free(grad);
}

START_TEST(reduce_scatter)
{
    check_grad(_i, MPI_COMM_WORLD, 0);
    HT_VERDICT();
}
END_TEST

/* ==== on a sub-communicator ==== */

static void again_world(void *ctx)
{
    int i = *(int *)ctx;
    check_unshard(i, MPI_COMM_WORLD, 0);
    check_grad(i, MPI_COMM_WORLD, 0);
}

/* Both on two halves of the ranks, even and odd, each numbered backwards (gr_split):
 * N and k are comm's. A failure is run again on MPI_COMM_WORLD to tell whether comm is
 * to blame. */
START_TEST(sub_comm)
{
    MPI_Comm half = gr_split();
    int i = _i;
    check_unshard(i, half, 0);
    if (gr_all_ok())
        check_grad(i, half, 0);
    gr_sub_comm_ok(again_world, &i);
    MPI_Comm_free(&half);
    HT_VERDICT();
}
END_TEST

/* ==== bytes ==== */

/* Notes what is wrong with the bytes fn sent from this rank: a ring allgather or
 * reduce-scatter over the N*s padded floats sends every block but one, (N-1)*s floats;
 * an allreduce twice that. */
static void check_bytes(const char *fn, size_t sent, size_t n, size_t s, int N)
{
    size_t want = (size_t)(N - 1) * s * sizeof(float);
    if (sent == want)
        return;
    const char *why = "";
    if (sent == 0)
        why = ": MPI's own collectives do not count here; the shards go through dtlab's "
              "collectives (dt_allgather, dt_reduce_scatter_block), which use dtlab's p2p";
    else if (sent == 2 * want)
        why = ": twice a reduce-scatter, as an allreduce sends; each rank needs only "
              "its own shard of the sum";
    else if (sent > want)
        why = ": more than the ring of dtlab's collective over the padded array";
    ht_fail("count %zu, %d ranks (s = %zu): %s sent %zu bytes from this rank; over the "
            "N*s = %zu padded floats, the ring sends every block but one, (N-1)*s floats "
            "= %zu bytes%s", n, N, s, fn, sent, (size_t)N * s, want, why);
}

START_TEST(unshard_bytes)
{
    check_unshard(_i, MPI_COMM_WORLD, 1);
    HT_VERDICT();
}
END_TEST

START_TEST(grad_bytes)
{
    check_grad(_i, MPI_COMM_WORLD, 1);
    HT_VERDICT();
}
END_TEST

/* The shards go through dtlab's allgather and reduce-scatter, as the README says: the
 * exercise is the padding around them. MPI's collectives, and any other of dtlab's
 * (a whole allreduce, a gather and a broadcast), are not. */
#define OTHERS "dt_(allreduce(_[a-z]+)?|reduce|gather|bcast(_naive)?|scatter|alltoall)|" \
               "dti_ring_[a-z_]*|" GR_MPI_COLLECTIVES
static const gr_rule rules[] = {
    { "ex_unshard", OTHERS "|dt_reduce_scatter_block",
      "gather the shards with dt_allgather into the padded scratch (collectives.h); "
      "MPI's collectives, and dtlab's others, are not this exercise" },
    { "ex_reduce_scatter_grad", OTHERS "|dt_allgather",
      "sum the padded gradient with dt_reduce_scatter_block (collectives.h): each rank "
      "needs only its shard of the sum; an allreduce, or MPI's collectives, are not "
      "this exercise" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "shard_size", 1, GR_PURE, shard_size, 1,
          "s = ceil(n / N), for n from 0 to past 2^32 and N from 1 to 17",
          "ex_shard_size" },
        { "shard", 2, GR_PURE, shard, 1,
          "rank k's shard is [k*s, (k+1)*s) of full, zeros past n", "ex_shard" },
        { "unshard", 2, GR_MPI, unshard, NVARIANTS,
          "the shards gathered give back the whole parameter, padding left out",
          "ex_unshard" },
        { "reduce_scatter", 2, GR_MPI, reduce_scatter, NVARIANTS,
          "rank k gets shard k of the gradients summed, zeros in the padding",
          "ex_reduce_scatter_grad" },
        { "sub_comm", 1, GR_MPI, sub_comm, NVARIANTS,
          "both on two halves of the ranks: N and k come from comm",
          "ex_unshard ex_reduce_scatter_grad" },
        { "unshard_bytes", 1, GR_MPI, unshard_bytes, NVARIANTS,
          "the unshard sends (N-1)*s floats: a ring allgather of the padded array",
          "ex_unshard" },
        { "grad_bytes", 1, GR_MPI, grad_bytes, NVARIANTS,
          "the gradient sends (N-1)*s floats: a reduce-scatter, not an allreduce",
          "ex_reduce_scatter_grad" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "08_fsdp_shard",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "do all ranks call the collective, with the same count s? A rank "
                    "that returns early (an empty shard, n = 0) while the others gather "
                    "leaves them waiting. On two halves (sub_comm): N and k from comm?" });
}
