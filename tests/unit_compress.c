/* Unit tests of lib/parallel/compress.c's codecs, the ones ddp --compress sends
 * gradients with. No MPI.
 *
 *   - fp16: every value back within half an fp16 ulp (2^-11 relative for normal halves,
 *     2^-25 absolute below them), inf and NaN kept, beyond 65520 inf;
 *   - int8: every value back within s/2, s = max|x| / 127 the chunk's scale; zeros, an
 *     all-zero chunk, huge and tiny values side by side; a chunk with inf or NaN decodes
 *     as NaN throughout (compress.c's rule);
 *   - sign: every value decodes to +-s, s = mean|x|, the sign of x (0 counts as +);
 *   - error feedback over 1000 steps of biased random gradients: |e| stays below
 *     q/(1-q) max|g|, q = sqrt(1 - 1/n) (the bound derived in compress.c), and so does
 *     the gap between the sum of what was sent and the sum of the gradients; without
 *     feedback that gap passes the bound and keeps growing (so the test fails if
 *     feedback is removed).
 * Counts 0, 1, primes, and past a word's worth of values.
 *
 *   build/tests/unit_compress
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "half.h"
#include "parallel/parallel_internal.h"

static const size_t counts[] = { 0, 1, 2, 3, 5, 7, 31, 32, 33, 101, 1009 };
#define NCOUNTS (sizeof counts / sizeof counts[0])
#define MAXN 1009

static uint64_t rng = 88172645463325252ull;

static double uniform(void)          /* [0, 1), xorshift64 */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* Values over many magnitudes, both signs: +-10^u, u in [lo, hi). */
static void fill(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((uniform() < 0.5 ? -1 : 1) * pow(10, lo + (hi - lo) * uniform()));
}

/* Encodes and decodes n values of x with k; the decoded values in y, the scale in *s. */
static void round_trip(dt_compress k, const float *x, size_t n, float *y, float *s)
{
    static uint32_t w[MAXN + 2];
    size_t W = dti_codec_words(k, n);
    ck_assert_msg(W <= MAXN + 2, "%zu words for %zu values", W, n);
    w[W] = 0xdeadbeef;
    dti_encode(k, x, n, NULL, w);
    ck_assert_msg(w[W] == 0xdeadbeef, "%s: encoding %zu values wrote past its %zu words",
                  dt_compress_name(k), n, W);
    if (k != DT_COMPRESS_FP16)
        memcpy(s, &w[0], sizeof *s);
    for (size_t i = 0; i < n; i++)
        y[i] = 12345.0f;                           /* dti_decode must overwrite */
    dti_decode(k, w, n, y, 0);
}

START_TEST(test_words)
{
    for (size_t i = 0; i < NCOUNTS; i++) {
        size_t n = counts[i];
        ck_assert(dti_codec_words(DT_COMPRESS_FP16, n) == (n + 1) / 2);
        ck_assert(dti_codec_words(DT_COMPRESS_INT8, n) == 1 + (n + 3) / 4);
        ck_assert(dti_codec_words(DT_COMPRESS_SIGN, n) == 1 + (n + 31) / 32);
    }
}
END_TEST

START_TEST(test_fp16)
{
    static float x[MAXN], y[MAXN];
    float s;
    for (size_t c = 0; c < NCOUNTS; c++) {
        size_t n = counts[c];
        fill(x, n, -9, 4.8);                      /* subnormal halves to 63000 */
        round_trip(DT_COMPRESS_FP16, x, n, y, &s);
        for (size_t i = 0; i < n; i++) {
            double ax = fabs(x[i]), bound = ax >= 0x1p-14 ? ax * 0x1p-11 : 0x1p-25;
            ck_assert_msg(fabs((double)y[i] - x[i]) <= bound, "fp16, n %zu: x[%zu] = "
                          "%.9g came back %.9g, more than %.3g off", n, i, (double)x[i],
                          (double)y[i], bound);
        }
    }
    float odd[5] = { INFINITY, -INFINITY, NAN, 70000.0f, -0.0f };
    round_trip(DT_COMPRESS_FP16, odd, 5, y, &s);
    ck_assert(y[0] == INFINITY && y[1] == -INFINITY && isnan(y[2]) && y[3] == INFINITY);
    ck_assert(y[4] == 0 && signbit(y[4]));
}
END_TEST

/* Checks that y is x through int8 with scale s = max|x| / 127, within s/2. */
static void check_int8(const float *x, const float *y, size_t n, float s,
                       const char *what)
{
    double max = 0;
    for (size_t i = 0; i < n; i++)
        max = fabs(x[i]) > max ? fabs(x[i]) : max;
    ck_assert_msg(s == (float)(max / 127), "int8 %s, n %zu: scale %.9g, want "
                  "max|x|/127 = %.9g", what, n, (double)s, max / 127);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)y[i] - x[i]) <= 0.5 * s * (1 + 1e-5), "int8 %s, n "
                      "%zu: x[%zu] = %.9g came back %.9g, more than s/2 = %.3g off", what,
                      n, i, (double)x[i], (double)y[i], 0.5 * s);
}

START_TEST(test_int8)
{
    static float x[MAXN], y[MAXN];
    float s;
    for (size_t c = 0; c < NCOUNTS; c++) {
        size_t n = counts[c];
        fill(x, n, -3, 1);
        for (size_t i = 0; i < n; i += 7)
            x[i] = 0;                                             /* zeros among them */
        round_trip(DT_COMPRESS_INT8, x, n, y, &s);
        check_int8(x, y, n, s, "random");
        memset(x, 0, n * sizeof *x);
        round_trip(DT_COMPRESS_INT8, x, n, y, &s);
        check_int8(x, y, n, s, "all zero");
        for (size_t i = 0; i < n; i++)
            ck_assert(y[i] == 0);
        fill(x, n, -30, -29);                                     /* tiny */
        round_trip(DT_COMPRESS_INT8, x, n, y, &s);
        check_int8(x, y, n, s, "tiny");
        fill(x, n, -30, 38.4);                                    /* tiny to 2.5e38 */
        round_trip(DT_COMPRESS_INT8, x, n, y, &s);
        check_int8(x, y, n, s, "huge and tiny");
    }
    /* a value that is not finite: the whole chunk decodes as NaN */
    for (int bad = 0; bad < 2; bad++) {
        fill(x, 33, -3, 1);
        x[17] = bad ? NAN : -INFINITY;
        for (int k = DT_COMPRESS_INT8; k <= DT_COMPRESS_SIGN; k++) {
            round_trip((dt_compress)k, x, 33, y, &s);
            for (size_t i = 0; i < 33; i++)
                ck_assert_msg(isnan(y[i]), "%s with %s at 17: y[%zu] = %g, want NaN",
                              dt_compress_name(k), bad ? "NaN" : "-inf", i, (double)y[i]);
        }
    }
}
END_TEST

START_TEST(test_sign)
{
    static float x[MAXN], y[MAXN];
    float s;
    for (size_t c = 0; c < NCOUNTS; c++) {
        size_t n = counts[c];
        fill(x, n, -4, 0);
        for (size_t i = 0; i < n; i += 5)
            x[i] = i % 10 ? 0.0f : -0.0f;                         /* both zeros: + */
        round_trip(DT_COMPRESS_SIGN, x, n, y, &s);
        double sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += fabs(x[i]);
        ck_assert_msg(fabs(s - (n ? sum / n : 0)) <= 1e-6 * s, "sign, n %zu: scale %.9g, "
                      "want mean|x| %.9g", n, (double)s, n ? sum / n : 0);
        for (size_t i = 0; i < n; i++)
            ck_assert_msg(y[i] == (x[i] >= 0 ? s : -s), "sign, n %zu: x[%zu] = %g "
                          "decoded %g, want %g", n, i, (double)x[i], (double)y[i],
                          (double)(x[i] >= 0 ? s : -s));
    }
    /* decode with add = 1 adds */
    uint32_t w[4];
    float a[3] = { 1, -2, 3 }, b[3] = { 10, 10, 10 };
    dti_encode(DT_COMPRESS_SIGN, a, 3, NULL, w);
    dti_decode(DT_COMPRESS_SIGN, w, 3, b, 1);
    ck_assert(b[0] == 12 && b[1] == 8 && b[2] == 12);
}
END_TEST

/* ==== error feedback ==== */

static double norm(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i] * v[i];
    return sqrt(s);
}

/* T steps of sign compression of gradients g = m + noise, with m large on odd
 * coordinates and small on even ones (what sign gets wrong every step), with or
 * without feedback. Returns the gap |sum sent - sum g| after T/2 and T steps, the
 * largest |e| seen, and max|g|. */
static void run_feedback(size_t n, int T, int feedback, double gap[2], double *emax,
                         double *gmax)
{
    static float g[MAXN], e[MAXN], sent[MAXN];
    static double diff[MAXN], ed[MAXN];
    static uint32_t w[MAXN];
    memset(e, 0, sizeof e);
    memset(diff, 0, sizeof diff);
    *emax = *gmax = 0;
    for (int t = 1; t <= T; t++) {
        for (size_t i = 0; i < n; i++) {
            g[i] = (float)((i % 2 ? 1.0 : 0.01) + 0.2 * (uniform() - 0.5));
            ed[i] = g[i];
        }
        *gmax = fmax(*gmax, norm(ed, n));
        dti_encode(DT_COMPRESS_SIGN, g, n, feedback ? e : NULL, w);
        dti_decode(DT_COMPRESS_SIGN, w, n, sent, 0);
        for (size_t i = 0; i < n; i++) {
            diff[i] += (double)sent[i] - g[i];
            ed[i] = e[i];
        }
        *emax = fmax(*emax, norm(ed, n));
        if (t == T / 2 || t == T)
            gap[t == T] = norm(diff, n);
    }
}

START_TEST(test_feedback)
{
    /* the bound grows as n^1.5 (q/(1-q) is about 2n); the gap without feedback as
     * T sqrt(n): 1000 steps pass the bound up to a few hundred values */
    static const size_t ns[] = { 1, 2, 7, 33, 101 };
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        size_t n = ns[k];
        double q = sqrt(1 - 1.0 / n), gap[2], emax, gmax;
        run_feedback(n, 1000, 1, gap, &emax, &gmax);
        double bound = q / (1 - q) * gmax * (1 + 1e-4) + 1e-6;
        ck_assert_msg(emax <= bound, "n %zu: |e| reached %.4g, above the bound %.4g",
                      n, emax, bound);
        ck_assert_msg(gap[1] <= bound, "n %zu, with feedback: |sum sent - sum g| = %.4g "
                      "after 1000 steps, above the bound %.4g", n, gap[1], bound);
        run_feedback(n, 1000, 0, gap, &emax, &gmax);
        if (n == 1) {             /* one value: sign times |v| is exact, nothing lost */
            ck_assert_msg(gap[1] <= 1e-3, "n 1: a gap of %g", gap[1]);
            continue;
        }
        ck_assert_msg(gap[1] > bound && gap[1] > 1.5 * gap[0], "n %zu, without feedback: "
                      "the gap is %.4g after 500 steps and %.4g after 1000; it should "
                      "pass the bound %.4g and keep growing", n, gap[0], gap[1], bound);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("compress");
    TCase *tc = tcase_create("compress");
    tcase_add_test(tc, test_words);
    tcase_add_test(tc, test_fp16);
    tcase_add_test(tc, test_int8);
    tcase_add_test(tc, test_sign);
    tcase_add_test(tc, test_feedback);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
