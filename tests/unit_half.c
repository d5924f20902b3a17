/* Unit tests of lib/half.c, IEEE binary16 in software. No MPI.
 *
 * A half has only 65,536 bit patterns, so half -> float is tested on every one of them,
 * and float -> half on every boundary that matters: the exact value of every half, the
 * midpoint between every two neighbours (ties go to the even one), one float ulp either
 * side of each midpoint, overflow, subnormals, signed zeros and NaNs. Then millions of
 * random floats. Two references, each independent of lib/half.c:
 *   - a decoder and a nearest-value search over the table of all halves, written here
 *     the slow obvious way;
 *   - the compiler's own _Float16, where it has one (gcc >= 12 on x86-64).
 *
 *   build/tests/unit_half
 */
#include <check.h>
#include "unit.h"
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "half.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float ffrom(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static int is_half_nan(dt_half h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

/* ==== reference 1: written from the definition ==== */

/* (-1)^s * 2^(e-15) * 1.m, or 2^-14 * 0.m for e = 0. */
static float ref_to_float(dt_half h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    float v;
    if (e == 31)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexpf((float)m, -24);
    else
        v = ldexpf((float)(m | 1024), e - 25);
    return (h & 0x8000) ? -v : v;
}

/* Every non-negative half value in order: val[h] for h = 0 .. 0x7bff, and val[0x7c00]
 * = 65536, where the next half would be if the exponent did not run out. Rounding to
 * nearest picks between two neighbours of this table; rounding up to 65536 means inf. */
static double val[0x7c01];

static void make_table(void)
{
    for (int h = 0; h < 0x7c00; h++)
        val[h] = ref_to_float((dt_half)h);
    val[0x7c00] = 65536.0;
}

/* Round to nearest, ties to even, by search: not by bit tricks. x must not be NaN. */
static dt_half ref_to_half(float x)
{
    dt_half sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (a >= 65536.0)
        return sign | 0x7c00;
    int lo = 0, hi = 0x7c00;          /* val[lo] <= a < val[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (val[mid] <= a) lo = mid; else hi = mid;
    }
    double below = a - val[lo], above = val[hi] - a;    /* exact in double */
    int h = below < above ? lo : above < below ? hi : (lo % 2 == 0 ? lo : hi);
    return sign | (dt_half)h;
}

/* ==== reference 2: the compiler's _Float16 ==== */

#ifdef __FLT16_MAX__
static float cc_to_float(dt_half h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }
static dt_half cc_to_half(float f)
{
    _Float16 x = (_Float16)f;
    dt_half h;
    memcpy(&h, &x, 2);
    return h;
}
#endif

/* ==== half -> float ==== */

START_TEST(test_to_float_exhaustive)
{
    for (uint32_t i = 0; i < 65536; i++) {
        dt_half h = (dt_half)i;
        float got = dt_half_to_float(h), want = ref_to_float(h);
        if (is_half_nan(h)) {
            REQUIRE(isnan(got), "half %#06x (NaN) -> float %a (%#010x), want a NaN", i, got,
                    fbits(got));
            continue;
        }
        REQUIRE(fbits(got) == fbits(want), "half %#06x -> float %a (%#010x), want %a (%#010x)",
                i, got, fbits(got), want, fbits(want));
#ifdef __FLT16_MAX__
        REQUIRE(fbits(got) == fbits(cc_to_float(h)), "half %#06x -> float %a, _Float16 says %a",
                i, got, cc_to_float(h));
#endif
    }
}
END_TEST

/* half -> float -> half gives back the same bits (NaNs stay NaN, quiet). */
START_TEST(test_round_trip_exhaustive)
{
    for (uint32_t i = 0; i < 65536; i++) {
        dt_half h = (dt_half)i, back = dt_float_to_half(dt_half_to_float(h));
        if (is_half_nan(h))
            REQUIRE(is_half_nan(back) && (back & 0x200), "NaN %#06x came back as %#06x, not a "
                    "quiet NaN", i, back);
        else
            REQUIRE(back == h, "half %#06x -> float %a -> half %#06x", i, dt_half_to_float(h),
                    back);
    }
}
END_TEST

/* The array forms agree with the scalar ones and stop at n. */
START_TEST(test_arrays)
{
    static dt_half h[65536 + 1];
    static float f[65536 + 1];
    for (uint32_t i = 0; i < 65536; i++) h[i] = (dt_half)i;
    f[65536] = 1234.5f;
    dt_halves_to_floats(h, f, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        float s = dt_half_to_float((dt_half)i);
        REQUIRE(fbits(f[i]) == fbits(s) || (isnan(f[i]) && isnan(s)),
                "dt_halves_to_floats[%u] = %a, dt_half_to_float says %a", i, f[i], s);
    }
    REQUIRE(f[65536] == 1234.5f, "dt_halves_to_floats wrote past n");
    for (uint32_t i = 0; i < 65536; i++) f[i] = ldexpf((float)i - 32768.0f, -7) * 1.37f;
    h[65536] = 0xabcd;
    dt_floats_to_halves(f, h, 65536);
    for (uint32_t i = 0; i < 65536; i++)
        REQUIRE(h[i] == dt_float_to_half(f[i]), "dt_floats_to_halves[%u] of %a = %#06x, "
                "dt_float_to_half says %#06x", i, f[i], h[i], dt_float_to_half(f[i]));
    REQUIRE(h[65536] == 0xabcd, "dt_floats_to_halves wrote past n");
    dt_floats_to_halves(f, h, 0);
    dt_halves_to_floats(h, f, 0);
    REQUIRE(h[0] == dt_float_to_half(f[0]), "n = 0 changed something");
}
END_TEST

/* ==== float -> half: every boundary ==== */

/* Checks one float against both references; returns nothing, fails the test. */
static void check_to_half(float x, const char *what)
{
    dt_half got = dt_float_to_half(x), want = ref_to_half(x);
    REQUIRE(got == want, "%s: float %a (%.9g, %#010x) -> half %#06x, want %#06x", what, x, x,
            fbits(x), got, want);
#ifdef __FLT16_MAX__
    REQUIRE(got == cc_to_half(x), "%s: float %a (%.9g) -> half %#06x, _Float16 says %#06x",
            what, x, x, got, cc_to_half(x));
#endif
}

/* Every pair of neighbours (h, h+1) among the finite halves of either sign, and the last
 * finite one with the overflow boundary: the midpoint m = (a+b)/2 is exact in float
 * (it needs 12 significant bits). m rounds to whichever of h, h+1 is even; the float just
 * above m rounds up, the float just below rounds down. */
START_TEST(test_midpoints_exhaustive)
{
    for (uint32_t h = 0; h <= 0x7bff; h++) {
        float a = (float)val[h], b = (float)val[h + 1];
        float m = (a + b) / 2;
        REQUIRE((double)m * 2 == val[h] + val[h + 1], "midpoint of %#06x not exact", h);
        dt_half even = (h % 2 == 0) ? (dt_half)h : (dt_half)(h + 1);
        for (int s = 0; s < 2; s++) {
            float sg = s ? -1.0f : 1.0f;
            dt_half sb = s ? 0x8000 : 0;
            float up = nextafterf(m, INFINITY), down = nextafterf(m, 0.0f);
            REQUIRE(dt_float_to_half(sg * m) == (sb | even), "float %a, the midpoint of halves "
                    "%#06x and %#06x, -> %#06x, want the even one %#06x", sg * m, sb | h,
                    sb | (h + 1), dt_float_to_half(sg * m), sb | even);
            REQUIRE(dt_float_to_half(sg * up) == (sb | (h + 1)), "float %a, just above the "
                    "midpoint of %#06x and %#06x, -> %#06x", sg * up, sb | h, sb | (h + 1),
                    dt_float_to_half(sg * up));
            REQUIRE(dt_float_to_half(sg * down) == (sb | h), "float %a, just below the midpoint "
                    "of %#06x and %#06x, -> %#06x", sg * down, sb | h, sb | (h + 1),
                    dt_float_to_half(sg * down));
            check_to_half(sg * a, "exact half");
            check_to_half(sg * m, "midpoint");
            check_to_half(sg * up, "midpoint + 1 ulp");
            check_to_half(sg * down, "midpoint - 1 ulp");
            /* A quarter of the way: not a tie, so plainly the nearer one. */
            check_to_half(sg * (a + (b - a) / 4), "quarter way");
            check_to_half(sg * (b - (b - a) / 4), "three quarters way");
        }
    }
}
END_TEST

START_TEST(test_special_values)
{
    /* Overflow: 65504 is the largest half; the rounding boundary to inf is 65520. */
    REQUIRE(dt_float_to_half(65504.0f) == 0x7bff, "65504 -> %#06x", dt_float_to_half(65504.0f));
    REQUIRE(dt_float_to_half(65520.0f) == 0x7c00, "65520 (tie, 65504 is odd) -> %#06x, want inf",
            dt_float_to_half(65520.0f));
    REQUIRE(dt_float_to_half(nextafterf(65520.0f, 0)) == 0x7bff, "just below 65520 -> %#06x",
            dt_float_to_half(nextafterf(65520.0f, 0)));
    REQUIRE(dt_float_to_half(-65520.0f) == 0xfc00, "-65520 -> %#06x", dt_float_to_half(-65520.0f));
    static const float big[] = { 65536.0f, 1e5f, 1e10f, 3e38f, FLT_MAX, INFINITY };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
        REQUIRE(dt_float_to_half(big[i]) == 0x7c00, "%g -> %#06x, want inf", big[i],
                dt_float_to_half(big[i]));
        REQUIRE(dt_float_to_half(-big[i]) == 0xfc00, "%g -> %#06x, want -inf", -big[i],
                dt_float_to_half(-big[i]));
    }
    /* Zeros keep their sign. */
    REQUIRE(dt_float_to_half(0.0f) == 0x0000, "0 -> %#06x", dt_float_to_half(0.0f));
    REQUIRE(dt_float_to_half(-0.0f) == 0x8000, "-0 -> %#06x, want -0", dt_float_to_half(-0.0f));
    REQUIRE(fbits(dt_half_to_float(0x8000)) == 0x80000000u, "half -0 -> float %a",
            dt_half_to_float(0x8000));
    /* Subnormals: the smallest half is 2^-24; 2^-25 is the tie between it and 0. */
    REQUIRE(dt_float_to_half(ldexpf(1, -24)) == 0x0001, "2^-24 -> %#06x",
            dt_float_to_half(ldexpf(1, -24)));
    REQUIRE(dt_float_to_half(ldexpf(1, -25)) == 0x0000, "2^-25 (tie) -> %#06x, want 0",
            dt_float_to_half(ldexpf(1, -25)));
    REQUIRE(dt_float_to_half(nextafterf(ldexpf(1, -25), 1)) == 0x0001, "just above 2^-25 -> "
            "%#06x", dt_float_to_half(nextafterf(ldexpf(1, -25), 1)));
    REQUIRE(dt_float_to_half(-ldexpf(1, -25)) == 0x8000, "-2^-25 -> %#06x, want -0",
            dt_float_to_half(-ldexpf(1, -25)));
    REQUIRE(dt_float_to_half(ldexpf(3, -25)) == 0x0002, "3*2^-25 (tie of 1 and 2) -> %#06x",
            dt_float_to_half(ldexpf(3, -25)));
    REQUIRE(dt_float_to_half(ldexpf(1, -14)) == 0x0400, "2^-14 -> %#06x",
            dt_float_to_half(ldexpf(1, -14)));
    REQUIRE(dt_float_to_half(ldexpf(1023, -24)) == 0x03ff, "largest subnormal -> %#06x",
            dt_float_to_half(ldexpf(1023, -24)));
    static const float tiny[] = { 1e-8f, 1e-20f, 1e-38f, 1e-40f /* float subnormal */,
                                  1e-45f, ldexpf(1, -26), ldexpf(1.9999f, -26) };
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) {
        check_to_half(tiny[i], "tiny");
        check_to_half(-tiny[i], "tiny");
    }
    REQUIRE(dt_float_to_half(1e-40f) == 0 && dt_float_to_half(-1e-40f) == 0x8000,
            "float subnormals do not go to signed zero");
    /* Infinities */
    REQUIRE(dt_half_to_float(0x7c00) == INFINITY && dt_half_to_float(0xfc00) == -INFINITY,
            "half inf -> %a, %a", dt_half_to_float(0x7c00), dt_half_to_float(0xfc00));
    /* NaNs of every shape stay NaN and come out quiet, including payloads only in the
     * 13 low bits that float -> half drops (a careless shift makes them inf). */
    static const uint32_t nans[] = { 0x7fc00000u, 0x7f800001u, 0x7f800fffu, 0x7f801000u,
                                     0x7fbfffffu, 0x7fffffffu, 0xff800001u, 0xffc00000u };
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        dt_half h = dt_float_to_half(ffrom(nans[i]));
        REQUIRE(is_half_nan(h) && (h & 0x200), "NaN %#010x -> half %#06x, want a quiet NaN",
                nans[i], h);
    }
}
END_TEST

/* ==== float -> half: random ==== */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next32(void)       /* xorshift64*: fixed seed, so failures reproduce */
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

START_TEST(test_random)
{
    enum { N = 4 << 20 };
    for (int i = 0; i < N; i++) {
        /* Any float at all (most are far outside half's range) ... */
        float x = ffrom(next32());
        if (isnan(x)) {
            REQUIRE(is_half_nan(dt_float_to_half(x)), "NaN %#010x -> half %#06x", fbits(x),
                    dt_float_to_half(x));
            continue;
        }
        check_to_half(x, "random bits");
        /* ... and one whose exponent lands in or near half's range (2^-27 .. 2^17). */
        uint32_t u = next32();
        uint32_t e = 100 + (u >> 23) % 45;
        x = ffrom((u & 0x807fffffu) | (e << 23));
        check_to_half(x, "random in range");
    }
}
END_TEST

int main(void)
{
    make_table();
    Suite *s = suite_create("half");
    TCase *tc = tcase_create("half");
    tcase_add_test(tc, test_to_float_exhaustive);
    tcase_add_test(tc, test_round_trip_exhaustive);
    tcase_add_test(tc, test_arrays);
    tcase_add_test(tc, test_midpoints_exhaustive);
    tcase_add_test(tc, test_special_values);
    tcase_add_test(tc, test_random);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
#ifndef __FLT16_MAX__
    printf("unit_half: this compiler has no _Float16; checking against the table only\n");
#endif
    return unit_run(s);
}
