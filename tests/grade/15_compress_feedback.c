/* Grading exercise 15, sign compression with a scale and error feedback. Pure functions
 * (no MPI, run at one rank), each against what it must mean, computed here in double:
 *
 *   pack      ex_sign_compress: every bit of every byte (bit i % 8 of byte i / 8, the
 *             lowest first; 1 for v >= 0, -0 and +0 included; 0 past n), counts that
 *             are and are not multiples of 8, 0 to 1001; nothing written past the
 *             (n + 7) / 8 bytes, which hold garbage on entry; the scale, mean |v|
 *   unpack    ex_sign_decompress: +-scale by the bits, garbage past n ignored
 *   bytes     what ex_ef_step says its message takes: the packed bits and the scale
 *   feedback  ex_ef_step, six steps on its own residual for several n: after each step
 *             the bits, the scale, the update and the residual e against the truth
 *             computed in double from the e the step began with; a wrong e is told
 *             what it looks like (not updated, g's residual alone, the scale of g)
 *   tracks    forty steps of a gradient whose coordinates differ a hundredfold: the sum
 *             of the updates plus the last e is the sum of the gradients, and the
 *             updates track the gradients where, without feedback (the grader's own
 *             run), they drift away */
#include <math.h>
#include <stdlib.h>
#include "grade.h"

static unsigned long long rng;

static double uni(void)             /* [0, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

enum { GUARD = 8 };                 /* guard bytes after the packed bits */
#define GARBAGE 0xA5                /* what bits hold on entry */

static size_t nbytes_of(size_t n) { return (n + 7) / 8; }

static int bit_of(const unsigned char *bits, size_t i)
{
    return bits[i / 8] >> (i % 8) & 1;
}

/* The byte b of the message of the signs s[0..n) (s[i] 1 for v >= 0). */
static unsigned want_byte(const int *s, size_t n, size_t b)
{
    unsigned w = 0;
    for (size_t j = 0; j < 8 && 8 * b + j < n; j++)
        w |= (unsigned)s[8 * b + j] << j;
    return w;
}

static unsigned reversed(unsigned x)
{
    unsigned r = 0;
    for (int j = 0; j < 8; j++)
        r |= (x >> j & 1) << (7 - j);
    return r;
}

/* The first fault of the packed bits of the signs s (n of them), into why; 0 if none. */
static int bits_fault(const unsigned char *bits, const int *s, size_t n, const char *what,
                      char *why, size_t len)
{
    size_t nb = nbytes_of(n);
    for (size_t b = 0; b < nb; b++) {
        unsigned want = want_byte(s, n, b), got = bits[b];
        if (got == want)
            continue;
        size_t k = n - 8 * b < 8 ? n - 8 * b : 8;       /* the elements in byte b */
        const char *like = "";
        if (got == reversed(want) && k == 8)
            like = ": its bits are in reverse order (element 8b + j is bit j, the lowest "
                   "first)";
        else if (k < 8 && got == (want << (8 - k) & 0xff))
            like = ": the last byte, short of 8 elements, holds them at the top; element "
                   "8b + j is bit j, the lowest first, whatever n";
        else if (k < 8 && (got & ((1u << k) - 1)) == want)
            like = ": the bits past n must be 0 (bits holds anything on entry: set every "
                   "byte, do not only OR into it)";
        else if (k == 8 && got == (want | GARBAGE))
            like = ": bits held garbage on entry: set every byte, do not only OR into it";
        else if (k < 8 && got == GARBAGE)
            like = ": the last byte, short of 8 elements, was never written";
        snprintf(why, len, "%s, n = %zu: byte %zu (elements %zu..%zu) is 0x%02x, expected "
                 "0x%02x%s", what, n, b, 8 * b, 8 * b + k - 1, got, want, like);
        return 1;
    }
    for (size_t b = nb; b < nb + GUARD; b++)
        if (bits[b] != GARBAGE) {
            snprintf(why, len, "%s, n = %zu: byte %zu was written, past the message's "
                     "(n + 7) / 8 = %zu bytes", what, n, b, nb);
            return 1;
        }
    return 0;
}

static unsigned char *garbage_bytes(size_t n)
{
    unsigned char *p = malloc(nbytes_of(n) + GUARD);
    DT_REQUIRE(p != NULL, "out of memory");
    memset(p, GARBAGE, nbytes_of(n) + GUARD);
    return p;
}

/* a within tol of b, relative */
static int close_rel(double a, double b, double tol)
{
    return fabs(a - b) <= tol * fabs(b) + 1e-30;
}

/* ==== pack and unpack ==== */

static const size_t NS[] = { 0, 1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 100, 1001 };
enum { NNS = (int)(sizeof NS / sizeof NS[0]) };

START_TEST(pack)
{
    char why[400];
    rng = 1501;
    for (int t = 0; t < NNS && ht_nbad == 0; t++) {
        size_t n = NS[t];
        float *v = gr_floats((int)n);
        int *s = malloc((n + 1) * sizeof *s);
        DT_REQUIRE(s != NULL, "out of memory");
        double sum = 0;
        for (size_t i = 0; i < n; i++) {
            double u = uni();
            v[i] = u < 0.05 ? 0.0f : u < 0.1 ? -0.0f : (float)(4 * uni() - 2);
            s[i] = v[i] >= 0;
            sum += fabs(v[i]);
        }
        unsigned char *bits = garbage_bytes(n);
        float sc = ex_sign_compress(v, n, bits);
        double want = n ? sum / (double)n : 0;
        if (bits_fault(bits, s, n, "ex_sign_compress", why, sizeof why))
            ht_fail("%s", why);
        else
            HT_EXPECT(close_rel(sc, want, 1e-5), "ex_sign_compress, n = %zu: the scale is "
                      "%.9g, expected mean |v| = %.9g%s", n, sc, want, n == 0 ? " (no "
                      "value: 0)" : "");
        free(v);
        free(s);
        free(bits);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(unpack)
{
    rng = 1502;
    for (int t = 0; t < NNS && ht_nbad == 0; t++) {
        size_t n = NS[t];
        unsigned char *bits = garbage_bytes(n);
        for (size_t b = 0; b < nbytes_of(n); b++)
            bits[b] = (unsigned char)(256 * uni());      /* past n: garbage, ignored */
        float scale = 0.3125f + (float)t, *out = gr_guarded_data((int)n, 0, 0);
        for (size_t i = 0; i < n; i++)
            out[i] = GR_GUARD_VAL;
        ex_sign_decompress(bits, scale, n, out);
        int at;
        if (gr_guard_hit(out, (int)n, &at)) {
            ht_fail("ex_sign_decompress, n = %zu: out was written outside its %zu floats, "
                    "%s", n, n, gr_outside(at, (int)n));
        } else {
            for (size_t i = 0; i < n; i++) {
                float want = bit_of(bits, i) ? scale : -scale;
                if (out[i] != want) {
                    ht_fail("ex_sign_decompress, n = %zu, scale %g: out[%zu] is %g, "
                            "expected %g: bit %zu of byte %zu is %d%s", n, scale, i, out[i],
                            want, i % 8, i / 8, bit_of(bits, i), out[i] == -want ? " (1 "
                            "is +scale, 0 is -scale; the lowest bit is element 8b)" : "");
                    break;
                }
            }
        }
        gr_free_guarded(out);
        free(bits);
    }
    HT_VERDICT();
}
END_TEST

/* ==== the bytes of a step ==== */

START_TEST(bytes)
{
    rng = 1503;
    for (size_t n = 0; n <= 1001 && ht_nbad == 0; n += n < 70 ? 1 : 931) {
        float *g = gr_floats((int)n), *e = gr_floats((int)n), *up = gr_floats((int)n), sc;
        for (size_t i = 0; i < n; i++) {
            g[i] = (float)(2 * uni() - 1);
            e[i] = 0;
        }
        unsigned char *bits = garbage_bytes(n);
        size_t got = ex_ef_step(g, e, n, bits, &sc, up);
        size_t want = nbytes_of(n) + sizeof(float);
        HT_EXPECT(got == want, "ex_ef_step, n = %zu: returns %zu bytes, expected %zu: "
                  "(n + 7) / 8 bytes of bits and the %zu of the scale%s", n, got, want,
                  sizeof(float), n % 8 && got == n / 8 + sizeof(float) ? " (n / 8 drops "
                  "the last byte, short of 8 elements, that travels too)" : got == n / 8 +
                  1 + sizeof(float) && n % 8 == 0 ? " (n / 8 + 1 counts a byte too many "
                  "when n is a multiple of 8)" : got == nbytes_of(n) ? " (the scale "
                  "travels too)" : got == n * sizeof(float) ? " (that is the gradient "
                  "uncompressed)" : "");
        free(g);
        free(e);
        free(up);
        free(bits);
    }
    HT_VERDICT();
}
END_TEST

/* ==== error feedback ==== */

/* A gradient of n floats for step t: coordinate i has a mean of its own, some a
 * hundred times smaller than others, either sign, and noise around it. */
static void gradient(float *g, size_t n, int t, double noise)
{
    for (size_t i = 0; i < n; i++) {
        double base = (i % 3 == 0 ? 1.0 : i % 3 == 1 ? 0.01 : 0.1) * (i % 4 < 2 ? 1 : -1);
        double u = sin(1.7 * (double)i + 2.3 * t + 0.1 * (double)(i * i % 7));
        g[i] = (float)(base * (1 + noise * u));
    }
}

/* One ex_ef_step on g from the learner's e, checked against the truth in double from
 * the same e; returns 0 (with why) at the first fault. */
static int step_fault(const float *g, float *e, size_t n, int t, char *why, size_t len)
{
    float *e0 = gr_copy(e, (int)n), *up = gr_floats((int)n), sc;
    int *s = malloc((n + 1) * sizeof *s);
    double *v = malloc((n + 1) * sizeof *v), sum = 0, sum_g = 0;
    DT_REQUIRE(s != NULL && v != NULL, "out of memory");
    unsigned char *bits = garbage_bytes(n);
    ex_ef_step(g, e, n, bits, &sc, up);

    for (size_t i = 0; i < n; i++) {
        v[i] = (double)g[i] + e0[i];
        sum += fabs(v[i]);
        sum_g += fabs(g[i]);
    }
    double S = n ? sum / (double)n : 0;
    for (size_t i = 0; i < n; i++) {    /* a sign too close to call: the learner's */
        int tie = fabs(v[i]) <= 1e-6 * (fabs(g[i]) + fabs(e0[i]));
        s[i] = tie ? bit_of(bits, i) : v[i] >= 0;
    }
    int bad = 1, alone = n > 0 && close_rel(sc, sum_g / (double)n, 1e-4);
    for (size_t i = 0; i < n && alone; i++) {   /* the step of g alone, e dropped? */
        double sg = g[i] >= 0 ? sum_g / (double)n : -sum_g / (double)n;
        alone = bit_of(bits, i) == (g[i] >= 0) && fabs(e[i] - (g[i] - sg)) <=
                1e-6 * fabs(g[i]) + 2e-4 * fabs(sg) + 1e-30;
    }
    char what[64];
    snprintf(what, sizeof what, "ex_ef_step, step %d", t);
    if (alone && fabs(S - sum_g / (double)n) > 1e-4 * S) {
        snprintf(why, len, "%s, n = %zu: the message, the update and e are those of g "
                 "alone (e = g - C(g)): the residual carried in, e before this step, was "
                 "dropped; compress v = g + e, and keep e = v - C(v)", what, n);
    } else if (bits_fault(bits, s, n, what, why, len)) {
        size_t m = strlen(why);
        snprintf(why + m, len - m, " (the message holds the signs of v = g + e)");
    } else if (!close_rel(sc, S, 1e-4)) {
        snprintf(why, len, "%s, n = %zu: the scale is %.9g, expected mean |g + e| = "
                 "%.9g%s", what, n, sc, S, close_rel(sc, sum_g / (double)n, 1e-4) ? ": it "
                 "is mean |g|, the gradient's alone; the scale is of what is compressed, "
                 "v = g + e" : "");
    } else {
        size_t i = 0;
        while (i < n && up[i] == (s[i] ? sc : -sc))
            i++;
        if (i < n) {
            snprintf(why, len, "%s, n = %zu: update[%zu] is %.9g, expected %.9g, the "
                     "decompressed message (the scale %.9g, bit %d)", what, n, i, up[i],
                     s[i] ? sc : -sc, sc, s[i]);
        } else {
            i = 0;
            double tol = 0;
            while (i < n) {
                double want = v[i] - (s[i] ? S : -S);
                tol = 1e-6 * fabs(v[i]) + 2e-4 * S + 1e-30;
                if (fabs(e[i] - want) > tol)
                    break;
                i++;
            }
            if (i < n) {
                double want = v[i] - (s[i] ? S : -S);
                double alone = (double)g[i] - (g[i] >= 0 ? sum_g / (double)n :
                                                             -sum_g / (double)n);
                const char *like = "";
                if (e[i] == e0[i] && want != e0[i])
                    like = ": e was not updated; what this step lost, v - update, is "
                           "carried to the next";
                else if (fabs(e[i] - alone) <= tol)
                    like = ": it is g - C(g), the residual of the gradient alone: the "
                           "residual carried in was dropped (compress v = g + e, and keep "
                           "v - C(v))";
                else if (fabs(e[i]) <= tol && fabs(want) > tol)
                    like = ": e was set to 0; it keeps what this step lost, v - update";
                else if (fabs(e[i] + want) <= tol)
                    like = ": the sign is wrong: e = v - update, what the update missed";
                snprintf(why, len, "%s, n = %zu: e[%zu] is %.9g, expected %.9g = (g + e) - "
                         "update, g = %.9g, e before = %.9g, update = %.9g%s", what, n, i,
                         e[i], want, g[i], e0[i], up[i], like);
            } else {
                bad = 0;
            }
        }
    }
    free(e0);
    free(up);
    free(s);
    free(v);
    free(bits);
    return bad;
}

START_TEST(feedback)
{
    static const size_t ns[] = { 1, 5, 8, 13, 100, 1003 };
    char why[600];
    for (int k = 0; k < 6 && ht_nbad == 0; k++) {
        size_t n = ns[k];
        float *g = gr_floats((int)n), *e = gr_floats((int)n);
        for (size_t i = 0; i < n; i++)
            e[i] = 0;
        for (int t = 0; t < 6 && ht_nbad == 0; t++) {
            gradient(g, n, t, 0.5);
            if (step_fault(g, e, n, t, why, sizeof why))
                ht_fail("%s", why);
        }
        free(g);
        free(e);
    }
    HT_VERDICT();
}
END_TEST

/* Forty steps: with feedback the updates add up to the gradients, less the last e;
 * without it (the grader's own run, in double) they drift, the small coordinates sent
 * as large as the mean every step. */
START_TEST(tracks)
{
    enum { N = 64, T = 40 };
    float g[N], e[N], up[N], sc;
    unsigned char bits[N / 8];
    double sg[N] = { 0 }, su[N] = { 0 }, sn[N] = { 0 };
    for (int i = 0; i < N; i++)
        e[i] = 0;
    for (int t = 0; t < T; t++) {
        gradient(g, N, t, 0.2);
        ex_ef_step(g, e, N, bits, &sc, up);
        double m = 0;
        for (int i = 0; i < N; i++)
            m += fabs(g[i]);
        for (int i = 0; i < N; i++) {
            sg[i] += g[i];
            su[i] += up[i];
            sn[i] += g[i] >= 0 ? m / N : -m / N;       /* without feedback */
        }
    }
    int worst = 0, wn = 0;
    double gmax = 0;
    for (int i = 0; i < N; i++) {
        if (fabs(su[i] - sg[i]) > fabs(su[worst] - sg[worst]))
            worst = i;
        if (fabs(sn[i] - sg[i]) > fabs(sn[wn] - sg[wn]))
            wn = i;
        gmax = fmax(gmax, fabs(g[i]));
    }
    for (int i = 0; i < N && ht_nbad == 0; i++)
        HT_EXPECT(fabs(su[i] + e[i] - sg[i]) <= 1e-4 * T * gmax, "after %d steps, "
                  "element %d: the updates add up to %.6g and the last e is %.6g, but the "
                  "gradients add up to %.6g: with feedback nothing is lost, so the updates "
                  "plus the last e are the gradients", T, i, su[i], e[i], sg[i]);
    double drift = fabs(su[worst] - sg[worst]), nofb = fabs(sn[wn] - sg[wn]);
    HT_EXPECT(ht_nbad || drift <= 0.25 * nofb, "after %d steps the sum of the updates is "
              "%.4g away from the sum of the gradients (element %d), where without "
              "feedback it is %.4g away: with feedback it tracks them, within the last "
              "residual", T, drift, worst, nofb);
    HT_VERDICT();
}
END_TEST

/* dtlab's compression (lib/parallel/compress.c) is the answer. */
#define CODEC "dti_(encode|decode|codec_words|compressor_[a-z_]*|compress_[a-z_]*)|" \
              "dt_compress_[a-z_]*"
static const gr_rule rules[] = {
    { "ex_sign_compress", CODEC, "pack the bits yourself; dtlab's codec is the answer" },
    { "ex_sign_decompress", CODEC,
      "unpack the bits yourself; dtlab's codec is the answer" },
    { "ex_ef_step", CODEC, "build the step from your ex_sign_compress and "
      "ex_sign_decompress; dtlab's codec with its error buffer is the answer" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "pack", 3, GR_PURE, pack, 1,
          "bit i%8 of byte i/8, lowest first, 0 past n; n 0..1001; the scale, mean |v|",
          "ex_sign_compress" },
        { "unpack", 1, GR_PURE, unpack, 1,
          "+scale for a 1, -scale for a 0, bits past n ignored", "ex_sign_decompress" },
        { "bytes", 2, GR_PURE, bytes, 1,
          "a step's message: (n + 7) / 8 bytes of bits and a float's, n 0..70 and 1001",
          "ex_ef_step ex_sign_compress ex_sign_decompress" },
        { "feedback", 3, GR_PURE, feedback, 1,
          "six steps: bits, scale, update and the residual e against the truth, in double",
          "ex_ef_step ex_sign_compress ex_sign_decompress" },
        { "tracks", 1, GR_PURE, tracks, 1,
          "forty steps: the updates plus e sum to the gradients; no drift, as without "
          "feedback", "ex_ef_step ex_sign_compress ex_sign_decompress" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "15_compress_feedback",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]) });
}
