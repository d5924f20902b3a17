/* Unit tests of mixed precision's kernels (lib/parallel/mixed_kernels.cu) against the
 * host loops of mixed.c, the reference: bit for bit, on one buffer longer than a grid
 * sweep (4096 blocks of 256 threads) and one of a few elements, with the values where
 * fp16 rounding is hardest among random ones: 65504 (the largest half), 65519.99 (the
 * last float below the rounding to inf), 65520 (inf), 2^-24 (the smallest subnormal) and
 * half of it (a tie, to 0), 3 * 2^-25 (a tie, up), subnormals, -0, inf, -inf and NaN
 * (a NaN must stay a NaN; its payload may differ). In turn: rounding to half and back,
 * half or float to float times a scale (unscaling gradients), float to half or float,
 * accumulating float into half or float, and the overflow check with the bad element
 * first, in the middle, last or nowhere. Without a GPU the host loops run against
 * lib/half.c alone and main says once "GPU comparisons skipped: no GPU".
 *
 *   build/tests/unit_gpu_mixed
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "half.h"
#include "internal.h"
#include "parallel/mixed_cuda.h"
#include "parallel/parallel_internal.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

static int gpu;
static const size_t sizes[] = { (size_t)256 * 4096 + 4097, 7 };
#define NSIZES 2

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float uniform(float lo, float hi)
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return lo + (hi - lo) * (float)((rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24);
}

/* n floats: random magnitudes from 2^-30 to 2^17, both signs, the hard values spread in */
static float *values(size_t n)
{
    static const float hard[] = { 65504.0f, 65519.99f, 65520.0f, 0x1p-24f, 0x1p-25f,
                                  0x1.8p-24f, 3e-6f, -0.0f, INFINITY, -INFINITY, NAN,
                                  -65504.0f, 1.0f + 0x1p-11f, 1.0f + 0x1.8p-11f };
    float *x = malloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++)
        x[i] = (i % 97 < sizeof hard / sizeof hard[0]) && i % 5 == 0 && i > 0
                   ? hard[(i / 5) % (sizeof hard / sizeof hard[0])]
                   : (uniform(0, 1) < 0.5f ? -1.0f : 1.0f) * ldexpf(1.0f, (int)uniform(-30, 17)) *
                         uniform(1.0f, 2.0f);
    return x;
}

/* the same bits, or both NaN (floats) / both NaN halves */
static void require_same(const void *got, const void *want, size_t n, int half,
                         const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (half) {
            uint16_t g = ((const uint16_t *)got)[i], w = ((const uint16_t *)want)[i];
            int gn = (g & 0x7c00) == 0x7c00 && (g & 0x3ff), wn = (w & 0x7c00) == 0x7c00 && (w & 0x3ff);
            REQUIRE(g == w || (gn && wn), "%s[%zu]: half 0x%04x, want 0x%04x", what, i, g, w);
        } else {
            float g = ((const float *)got)[i], w = ((const float *)want)[i];
            REQUIRE(memcmp(&g, &w, 4) == 0 || (isnan(g) && isnan(w)),
                    "%s[%zu] = %.9g, want %.9g", what, i, (double)g, (double)w);
        }
    }
}

/* ==== the host loops against lib/half.c (always) ==== */

START_TEST(test_host_round)
{
    size_t n = sizes[_i];
    float *x = values(n), *y = malloc(n * sizeof *y);
    memcpy(y, x, n * sizeof *y);
    dti_round_half(y, n);
    for (size_t i = 0; i < n; i++) {
        float want = dt_half_to_float(dt_float_to_half(x[i]));
        REQUIRE(memcmp(&want, &y[i], 4) == 0 || (isnan(want) && isnan(y[i])),
                "round[%zu] of %.9g = %.9g, want %.9g", i, (double)x[i], (double)y[i],
                (double)want);
    }
    free(x); free(y);
}
END_TEST

/* ==== the kernels against the host loops ==== */

START_TEST(test_kernels)
{
    if (!unit_use_gpu(gpu))
        return;
    size_t n = sizes[_i];
    float *x = values(n), *s = values(n);
    for (size_t i = 0; i < n; i++)       /* the accumulated part: finite, smaller */
        s[i] = isfinite(s[i]) ? s[i] * 0x1p-8f : 1.0f;
    dt_half *h = malloc(n * sizeof *h);
    dt_floats_to_halves(x, h, n);
    for (int half = 0; half < 2; half++) {
        MPI_Datatype t = half ? DT_HALF : MPI_FLOAT;
        size_t es = half ? 2 : 4;
        const void *src = half ? (const void *)h : (const void *)x;

        /* round */
        if (half) {
            float *want = malloc(n * 4);
            memcpy(want, x, n * 4);
            dti_round_half(want, n);
            float *d = unit_to_gpu(x, n * 4);
            dti_mixed_cuda_round_half(d, n);
            float *got = unit_from_gpu(d, n * 4);
            require_same(got, want, n, 0, "round_half");
            free(want); free(got); dti_cuda_free(d);
        }
        /* to float, times a scale */
        for (int k = 0; k < 2; k++) {
            float mul = k ? 1.0f / 65536.0f : 1.0f, *want = malloc(n * 4);
            dti_to_float(src, t, want, n, mul);
            void *ds = unit_to_gpu(src, n * es);
            float *dd = dti_cuda_malloc(n * 4);
            dti_mixed_cuda_to_float(ds, half, dd, n, mul);
            float *got = unit_from_gpu(dd, n * 4);
            require_same(got, want, n, 0, half ? "to_float(half)" : "to_float(float)");
            free(want); free(got); dti_cuda_free(ds); dti_cuda_free(dd);
        }
        /* from float */
        {
            void *want = malloc(n * es);
            dti_from_float(x, want, t, n);
            float *ds = unit_to_gpu(x, n * 4);
            void *dd = dti_cuda_malloc(n * es);
            dti_mixed_cuda_from_float(ds, dd, half, n);
            void *got = unit_from_gpu(dd, n * es);
            require_same(got, want, n, half, half ? "from_float(half)" : "from_float(float)");
            free(want); free(got); dti_cuda_free(ds); dti_cuda_free(dd);
        }
        /* accumulate */
        {
            void *want = malloc(n * es);
            memcpy(want, src, n * es);
            dti_accumulate(want, t, s, n);
            void *dd = unit_to_gpu(src, n * es);
            float *ds = unit_to_gpu(s, n * 4);
            dti_mixed_cuda_accumulate(dd, half, ds, n);
            void *got = unit_from_gpu(dd, n * es);
            require_same(got, want, n, half, half ? "accumulate(half)" : "accumulate(float)");
            free(want); free(got); dti_cuda_free(dd); dti_cuda_free(ds);
        }
        /* the overflow check: nowhere, first, middle, last */
        {
            float *f = malloc(n * 4);
            for (size_t i = 0; i < n; i++)
                f[i] = isfinite(x[i]) && fabsf(x[i]) < 60000.0f ? x[i] : 1.0f;
            size_t at[] = { (size_t)-1, 0, n / 2, n - 1 };
            for (int a = 0; a < 4; a++) {
                void *buf = malloc(n * es);
                float *g = malloc(n * 4);
                memcpy(g, f, n * 4);
                if (at[a] != (size_t)-1)
                    g[at[a]] = a % 2 ? INFINITY : NAN;
                if (half)
                    dt_floats_to_halves(g, buf, n);
                else
                    memcpy(buf, g, n * 4);
                int want = dti_nonfinite(buf, t, n);
                REQUIRE(want == (at[a] != (size_t)-1), "host nonfinite: %d at case %d", want, a);
                void *d = unit_to_gpu(buf, n * es);
                int got = dti_mixed_cuda_nonfinite(d, half, n);
                REQUIRE(got == want, "nonfinite(%s) case %d: %d, want %d", half ? "half" : "float",
                        a, got, want);
                free(buf); free(g); dti_cuda_free(d);
            }
            free(f);
        }
    }
    free(x); free(s); free(h);
}
END_TEST

int main(void)
{
    gpu = unit_probe_gpu_or_say("unit_gpu_mixed", "the host loops are checked alone");
    Suite *su = suite_create("gpu_mixed");
    TCase *tc = tcase_create("gpu_mixed");
    tcase_add_loop_test(tc, test_host_round, 0, NSIZES);
    tcase_add_loop_test(tc, test_kernels, 0, NSIZES);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(su, tc);
    return unit_run(su);
}
