/* Grading exercise 07, DDP's gradient buckets.
 *
 * ex_ddp_buckets is pure: it is checked against the rule written out again here (not
 * against dtlab's dt_ddp_buckets), on layouts chosen to hit its corners: one-element
 * layers, layers larger than the cap, a cap of 0 and of SIZE_MAX, buckets filled to the
 * cap exactly, layers too large for an int.
 *
 * ex_ddp_sync is checked twice: its values against MPI's own allreduce divided by the
 * number of ranks, and its messages through dtlab's step hook (collectives.h), which
 * every step-wise collective calls with the count of the buffer it works on. The calls
 * the hook sees must be one allreduce per non-empty bucket, in bucket order 0, 1, ... */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "grade.h"

enum { NLMAX = 8 };

/* ==== the rule, written out again ==== */

/* Walks the layers in backward order (nl-1 down to 0) when backward is 1, else in
 * forward order (a learner's mistake, to recognise it). Closes the open bucket before a
 * layer that would take it past cap bytes (past or up to cap when at_cap is 1, another
 * mistake). Writes bucket_of and returns the number of buckets. */
static int rule(const size_t *off, int nl, size_t esize, size_t cap, int backward,
                int at_cap, int *bucket_of)
{
    int nb = 0;
    size_t fill = 0;
    for (int k = 0; k < nl; k++) {
        int i = backward ? nl - 1 - k : k;
        size_t nbytes = (off[i + 1] - off[i]) * esize;
        int over = at_cap ? fill + nbytes >= cap : fill + nbytes > cap;
        if (fill > 0 && over) {
            nb++;
            fill = 0;
        }
        fill += nbytes;
        bucket_of[i] = nb;
    }
    return nb + 1;
}

static int same(const int *a, const int *b, int nl)
{
    for (int i = 0; i < nl; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* ==== ex_ddp_buckets ==== */

typedef struct {
    int nl;
    size_t elems[NLMAX];     /* elements per layer */
    size_t esize, cap;
} layout;

/* "layers of [5, 1, 2] elements, 4 bytes each, cap 0 bytes" */
static void describe(const layout *L, char *s, size_t len)
{
    int k = snprintf(s, len, "layers of [");
    for (int i = 0; i < L->nl && k < (int)len; i++)
        k += snprintf(s + k, len - k, "%s%zu", i ? ", " : "", L->elems[i]);
    if (k < (int)len) {
        if (L->cap == SIZE_MAX)
            snprintf(s + k, len - k, "] elements, %zu bytes each, cap SIZE_MAX",
                     L->esize);
        else
            snprintf(s + k, len - k, "] elements, %zu bytes each, cap %zu bytes",
                     L->esize, L->cap);
    }
}

/* Checks one layout; notes one failure at most, with the reason. */
static void check_layout(const layout *L)
{
    size_t off[NLMAX + 1] = { 0 };
    for (int i = 0; i < L->nl; i++)
        off[i + 1] = off[i] + L->elems[i];
    int want[NLMAX], got[NLMAX], other[NLMAX];
    int wnb = rule(off, L->nl, L->esize, L->cap, 1, 0, want);
    for (int i = 0; i < NLMAX; i++)
        got[i] = -7;
    int nb = ex_ddp_buckets(off, L->nl, L->esize, L->cap, got);
    char d[200];
    describe(L, d, sizeof d);

    for (int i = 0; i < L->nl; i++) {
        if (got[i] == -7) {
            ht_fail("%s: bucket_of[%d] was not written; every layer belongs to a bucket",
                    d, i);
            return;
        }
    }
    if (L->nl < NLMAX && got[L->nl] != -7) {
        ht_fail("%s: bucket_of[%d] was written, past the last layer (nl = %d)", d, L->nl,
                L->nl);
        return;
    }
    if (same(got, want, L->nl)) {
        HT_EXPECT(nb == wnb, "%s: the buckets are right, but it returned %d; there are "
                  "%d buckets (0..%d): return how many", d, nb, wnb, wnb - 1);
        return;
    }
    if (L->nl > 1 && got[0] == 0) {
        int fnb = rule(off, L->nl, L->esize, L->cap, 0, 0, other);
        int rev = 1;
        for (int i = 0; i < L->nl; i++)
            rev = rev && got[i] == fnb - 1 - other[i];
        if (same(got, other, L->nl) || rev) {
            ht_fail("%s: layer 0 is in bucket 0, as if filled forwards; buckets must be "
                    "filled from the LAST layer: bucket 0 holds layer nl-1 = %d "
                    "(backward makes its gradients first), and each layer joins the "
                    "open bucket walking down to layer 0", d, L->nl - 1);
            return;
        }
    }
    rule(off, L->nl, L->esize, L->cap, 1, 1, other);
    if (same(got, other, L->nl)) {
        ht_fail("%s: a bucket was closed on reaching the cap exactly; a bucket may hold "
                "cap bytes: close it only before a layer would take it PAST the cap "
                "(> cap, not >= cap)", d);
        return;
    }
    rule(off, L->nl, 1, L->cap, 1, 0, other);
    if (L->esize != 1 && same(got, other, L->nl)) {
        ht_fail("%s: the buckets were cut by elements; the cap is in bytes: layer i "
                "takes (off[i+1] - off[i]) * esize bytes", d);
        return;
    }
    /* otherwise: the first layer, walking backwards, whose bucket is wrong, and why */
    size_t fill = 0;
    int open = 0;
    for (int i = L->nl - 1; i >= 0; i--) {
        size_t nbytes = L->elems[i] * L->esize;
        if (got[i] != want[i]) {
            if (fill == 0)
                ht_fail("%s: layer %d went to bucket %d; expected %d: walking from layer "
                        "%d down, bucket %d was still empty when layer %d (%zu bytes) "
                        "came, and an empty bucket takes a layer however large (a layer "
                        "larger than the cap is a bucket of its own)", d, i, got[i],
                        want[i], L->nl - 1, open, i, nbytes);
            else if (want[i] == open)
                ht_fail("%s: layer %d went to bucket %d; expected %d: walking from layer "
                        "%d down, bucket %d held %zu bytes when layer %d (%zu bytes) "
                        "came, and %zu + %zu <= cap: it joins that bucket", d, i, got[i],
                        want[i], L->nl - 1, open, fill, i, nbytes, fill, nbytes);
            else
                ht_fail("%s: layer %d went to bucket %d; expected %d: walking from layer "
                        "%d down, bucket %d held %zu bytes when layer %d (%zu bytes) "
                        "came, and %zu + %zu > cap: bucket %d is closed and layer %d "
                        "starts bucket %d", d, i, got[i], want[i], L->nl - 1, open, fill,
                        i, nbytes, fill, nbytes, open, i, open + 1);
            return;
        }
        if (want[i] != open) {
            open = want[i];
            fill = 0;
        }
        fill += nbytes;
    }
    ht_fail("%s: it returned %d buckets; expected %d", d, nb, wnb);   /* not reached */
}

static const size_t G = (size_t)1 << 30;

/* Ordinary layouts: several buckets, one-element layers, buckets filled to the cap. */
static const layout ordinary[] = {
    { 5, { 1, 1, 1, 1, 1 }, 4, 8 },                 /* 2 layers a bucket, exactly */
    { 6, { 1, 2, 3, 4, 5, 6 }, 4, 40 },             /* differs from forward filling */
    { 5, { 100, 3, 50, 7, 2 }, 4, 64 },             /* large layers alone */
    { 4, { 4, 4, 4, 4 }, 2, 16 },                   /* fp16, exactly 2 a bucket */
    { 4, { 3, 3, 3, 3 }, 8, 50 },                   /* doubles */
    { 3, { 6, 6, 6 }, 2, 24 },
    { 7, { 10, 1, 1, 9, 2, 2, 30 }, 4, 48 },
    { 3, { 3, 1000, 3 }, 4, 100 },                  /* a large layer between small */
};

/* Corners: a cap of 0 or SIZE_MAX, one layer, a first layer larger than the cap,
 * layers too large for an int. */
static const layout corners[] = {
    { 3, { 5, 1, 2 }, 4, 0 },                       /* every layer alone */
    { 4, { 10, 20, 30, 1 }, 4, SIZE_MAX },          /* one bucket */
    { 1, { 1000 }, 4, 16 },                         /* one layer, larger than the cap */
    { 1, { 1 }, 4, 0 },
    { 3, { 2, 2, 500 }, 4, 100 },                   /* the first layer seen is large */
    { 3, { (size_t)8 << 30, 3, (size_t)4 << 30 }, 4, G },
    { 4, { (size_t)1 << 31, (size_t)1 << 31, 1, 1 }, 2, (size_t)8 << 30 },
};

START_TEST(buckets)
{
    for (size_t k = 0; k < sizeof ordinary / sizeof ordinary[0] && !ht_nbad; k++)
        check_layout(&ordinary[k]);
    HT_VERDICT();
}
END_TEST

START_TEST(buckets_edges)
{
    for (size_t k = 0; k < sizeof corners / sizeof corners[0] && !ht_nbad; k++)
        check_layout(&corners[k]);
    HT_VERDICT();
}
END_TEST

/* ==== ex_ddp_sync ==== */

/* The layers of a gradient of c floats: 6 layers of uneven sizes (3:1:4:1:5:2). */
enum { NL = 6 };
static void layers_of(size_t c, size_t *off)
{
    static const int w[NL] = { 3, 1, 4, 1, 5, 2 };
    int cum = 0;
    off[0] = 0;
    for (int i = 0; i < NL; i++) {
        cum += w[i];
        off[i + 1] = c * cum / 16;
    }
}

/* Three ways to bucket them: about a third of the bytes a bucket, one layer a bucket
 * (cap 0), one bucket for all (cap SIZE_MAX). */
enum { NWAYS = 3 };
static size_t cap_of(int way, size_t c)
{
    return way == 0 ? c * sizeof(float) * 3 / 10 : way == 1 ? 0 : SIZE_MAX;
}
static const char *way_name[NWAYS] = { "a few buckets", "a bucket per layer",
                                       "one bucket" };

/* The calls the step hook sees: a call starts when the collective, the buffer or the
 * count changes, or when the first phase of an algorithm starts again (rd: fold, or
 * exchange when nothing was folded; ring: reduce-scatter; naive: reduce). */
enum { MAXCALLS = 32 };
static struct {
    int ncalls;                      /* may exceed MAXCALLS; counts[] keeps the first */
    int counts[MAXCALLS];
    char other[32];                  /* a collective other than an allreduce, if any */
    char coll[32], phase[24];        /* the last step seen */
    const void *buf;
    int count;
} seen;

static void watch(const char *coll, const char *phase, int step, const void *buf,
                  int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)type; (void)comm; (void)ctx;
    int first = !strcmp(phase, "fold") || !strcmp(phase, "reduce-scatter") ||
                !strcmp(phase, "reduce") ||
                (!strcmp(phase, "exchange") && strcmp(seen.phase, "fold") != 0);
    if (seen.ncalls == 0 || strcmp(coll, seen.coll) || buf != seen.buf ||
        count != seen.count || (step == 0 && first)) {
        if (seen.ncalls < MAXCALLS)
            seen.counts[seen.ncalls] = count;
        seen.ncalls++;
        if (strncmp(coll, "allreduce", 9) != 0 && !seen.other[0])
            snprintf(seen.other, sizeof seen.other, "%s", coll);
    }
    snprintf(seen.coll, sizeof seen.coll, "%s", coll);
    snprintf(seen.phase, sizeof seen.phase, "%s", phase);
    seen.buf = buf;
    seen.count = count;
}

/* "12, 40, 7" */
static void list(const int *v, int n, char *s, size_t len)
{
    int k = 0;
    s[0] = '\0';
    for (int i = 0; i < n && k < (int)len - 1; i++)
        k += snprintf(s + k, len - k, "%s%d", i ? ", " : "", v[i]);
}

/* Compares the calls seen with one allreduce per non-empty bucket in bucket order. */
static void check_calls(const size_t *off, const int *bucket_of, int nb, size_t c,
                        const char *way)
{
    int want[NLMAX], nwant = 0, layer[NLMAX], nlayer = 0;
    for (int b = 0; b < nb; b++) {
        size_t lo = SIZE_MAX, hi = 0;
        for (int i = 0; i < NL; i++) {
            if (bucket_of[i] == b) {
                lo = off[i] < lo ? off[i] : lo;
                hi = off[i + 1] > hi ? off[i + 1] : hi;
            }
        }
        if (hi > lo)
            want[nwant++] = (int)(hi - lo);
    }
    for (int i = NL - 1; i >= 0; i--)
        if (off[i + 1] > off[i])
            layer[nlayer++] = (int)(off[i + 1] - off[i]);

    int ok = seen.ncalls == nwant && !seen.other[0];
    for (int k = 0; ok && k < nwant; k++)
        ok = seen.counts[k] == want[k];
    if (ok)
        return;

    int shown = seen.ncalls < MAXCALLS ? seen.ncalls : MAXCALLS;
    char w[120], g[120], why[200] = "";
    list(want, nwant, w, sizeof w);
    list(seen.counts, shown, g, sizeof g);
    int rev = seen.ncalls == nwant && nwant > 1, sameorder = rev;
    for (int k = 0; rev && k < nwant; k++) {
        rev = seen.counts[k] == want[nwant - 1 - k];
        sameorder = sameorder && seen.counts[k] == want[k];
    }
    int perlayer = seen.ncalls == nlayer && nlayer != nwant;
    for (int k = 0; perlayer && k < nlayer; k++)
        perlayer = seen.counts[k] == layer[k] || seen.counts[k] == layer[nlayer - 1 - k];

    if (seen.ncalls == 0)
        snprintf(why, sizeof why, "no dtlab allreduce ran: each non-empty bucket goes "
                 "through dt_allreduce (this test cannot see MPI's own MPI_Allreduce)");
    else if (seen.other[0])
        snprintf(why, sizeof why, "dt_%s ran; each bucket takes one dt_allreduce",
                 seen.other);
    else if (rev && !sameorder)
        snprintf(why, sizeof why, "the buckets went out last first: bucket 0 (the last "
                 "layers, which backward finishes first) must go first, then 1, 2, ...");
    else if (seen.ncalls == 1 && nwant > 1 && (size_t)seen.counts[0] == c)
        snprintf(why, sizeof why, "one allreduce of the whole gradient; DDP sends one "
                 "per bucket, so that the first can start while backward goes on");
    else if (perlayer)
        snprintf(why, sizeof why, "one allreduce per layer; the layers of a bucket go "
                 "together, in one call on grads[lo, hi) of the bucket");
    else
        snprintf(why, sizeof why, "bucket b is the elements of the layers with "
                 "bucket_of[i] == b");
    ht_fail("count %zu, %s: the allreduces seen had counts [%s]%s; expected one per "
            "non-empty bucket in bucket order 0, 1, ...: [%s]. %s", c, way, g,
            seen.ncalls > shown ? " ..." : "", w, why);
}

/* Runs ex_ddp_sync on comm, count gr_count(_i), for each way of bucketing; checks the
 * values (values = 1) or, on MPI_COMM_WORLD, the calls (values = 0). */
static void sync_case(int i, int values, MPI_Comm comm)
{
    int n, rank;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &rank);
    size_t c = (size_t)gr_count(i, n), off[NL + 1];
    layers_of(c, off);
    float *mine = malloc((c + 1) * sizeof *mine);
    float *grads = malloc((c + 1) * sizeof *grads), *sum = malloc((c + 1) * sizeof *sum);
    DT_REQUIRE(mine && grads && sum, "out of memory");
    for (int way = 0; way < NWAYS && !ht_nbad; way++) {
        int bucket_of[NL];
        int nb = rule(off, NL, sizeof(float), cap_of(way, c), 1, 0, bucket_of);
        dt_fill_test_data(mine, (int)c, MPI_FLOAT, MPI_SUM, 70 + 3 * i + way, rank);
        memcpy(grads, mine, c * sizeof *grads);
        HT_MPI(MPI_Iallreduce(mine, sum, (int)c, MPI_FLOAT, MPI_SUM, comm, &ht_req));
        memset(&seen, 0, sizeof seen);
        if (!values)
            dt_set_step_hook(watch, NULL);
        ex_ddp_sync(grads, off, NL, bucket_of, nb, comm);
        dt_set_step_hook(NULL, NULL);
        if (!values) {
            if (n > 1)                  /* at 1 rank no collective takes a step */
                check_calls(off, bucket_of, nb, c, way_name[way]);
            continue;
        }
        for (size_t e = 0; e < c; e++) {
            double want = (double)sum[e] / n, tol = 1e-6 + 1e-5 * fabs(want);
            if (fabs(grads[e] - want) <= tol)
                continue;
            int l = 0;
            while (off[l + 1] <= e)
                l++;
            const char *hint = "";
            if (n > 1 && sum[e] != 0 && fabsf(grads[e] - sum[e]) <= tol * n)
                hint = ": looks like the SUM over the ranks, not the MEAN: divide by the "
                       "number of ranks";
            else if (n > 1 && fabs(grads[e] - mine[e]) <= tol)
                hint = ": still this rank's own gradient, as if its bucket was never "
                       "sent";
            else if (n > 1 && fabs(grads[e] - (double)mine[e] / n) <= tol)
                hint = ": this rank's own gradient divided by the ranks, as if its "
                       "bucket was never summed (is it inside the range you sent?)";
            else if (n > 1 && want != 0 && fabs(grads[e] * n - want) <= tol * n)
                hint = ": the mean divided by the number of ranks once more";
            ht_fail("count %zu, %s%s: element %zu (layer %d, bucket %d) is %g; "
                    "expected %g, the mean over %d ranks%s", c, way_name[way],
                    gr_on(comm), e, l, bucket_of[l], grads[e], want, n, hint);
            break;
        }
    }
    free(sum);
    free(grads);
    free(mine);
}

START_TEST(sync_mean)
{
    sync_case(_i, 1, MPI_COMM_WORLD);
    HT_VERDICT();
}
END_TEST

START_TEST(sync_order)
{
    sync_case(_i, 0, MPI_COMM_WORLD);
    HT_VERDICT();
}
END_TEST

static void sync_world(void *ctx) { sync_case(*(int *)ctx, 1, MPI_COMM_WORLD); }

/* The mean on two halves, even and odd ranks, each numbered backwards (gr_split): the
 * mean over comm's ranks, not MPI_COMM_WORLD's. A failure is run again on
 * MPI_COMM_WORLD to tell whether comm is to blame. */
START_TEST(sync_sub_comm)
{
    MPI_Comm half = gr_split();
    int i = _i;
    sync_case(i, 1, half);
    gr_sub_comm_ok(sync_world, &i);
    MPI_Comm_free(&half);
    HT_VERDICT();
}
END_TEST

/* The buckets are the exercise, and the sync goes through dtlab's allreduce (whose
 * calls sync_order watches), not MPI's. */
static const gr_rule rules[] = {
    { "ex_ddp_buckets", "dti?_ddp_[a-z_]*",
      "the exercise is to cut the buckets yourself; dtlab's dt_ddp_buckets does it for "
      "you" },
    { "ex_ddp_sync", GR_MPI_COLLECTIVES "|dti?_ddp_[a-z_]*",
      "sum each bucket with dtlab's dt_allreduce (collectives.h), one call per bucket; "
      "MPI's collectives and dtlab's DDP internals are not this exercise" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "buckets", 3, GR_PURE, buckets, 1,
          "buckets from the last layer back, closed before passing the cap",
          "ex_ddp_buckets" },
        { "buckets_edges", 1, GR_PURE, buckets_edges, 1,
          "cap 0 and SIZE_MAX, one layer, layers larger than the cap or an int",
          "ex_ddp_buckets" },
        { "sync_mean", 2, GR_MPI, sync_mean, GR_NCOUNTS,
          "every rank's gradients become the mean over the ranks", "ex_ddp_sync" },
        { "sync_order", 1, GR_MPI, sync_order, GR_NCOUNTS,
          "one dt_allreduce per bucket, in bucket order 0, 1, ...", "ex_ddp_sync" },
        { "sync_sub_comm", 1, GR_MPI, sync_sub_comm, GR_NCOUNTS,
          "the mean over comm's ranks, on two halves of the ranks", "ex_ddp_sync" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "07_ddp_buckets",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "do all ranks start the same allreduces, in the same order, with "
                    "the same counts? A rank that skips an empty bucket the others send, "
                    "or walks the buckets in another order, leaves them waiting. On "
                    "another communicator (sync_sub_comm): is comm passed to every "
                    "dt_allreduce?" });
}
