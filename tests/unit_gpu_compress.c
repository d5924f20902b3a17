/* Unit tests of ddp's gradient codecs on the GPU (lib/parallel/compress_kernels.cu)
 * against the host's (dti_encode, dti_decode in compress.c), the reference. For fp16,
 * int8 and sign, with and without error feedback: a bucket of awkward length (1, 31, 32,
 * 33, 1007) cut into P = 1, 3 or 4 chunks, encoded on the GPU at once (a block a
 * chunk) against each chunk encoded on the host: every payload word the same, the
 * scale word the same (sign's mean may differ in its last bit: its sum runs in another
 * order; the payload then still agrees unless a value sits exactly on zero), the errors
 * written back the same to that last bit; decoding, plain and added, the same bits. A
 * chunk holding inf has a NaN scale on both sides. Without a GPU the host codecs run
 * alone and main says once "GPU comparisons skipped: no GPU".
 *
 *   build/tests/unit_gpu_compress
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parallel/compress_cuda.h"
#include "parallel/parallel_internal.h"
#include "schedule.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

static int gpu;
static const size_t lens[] = { 1, 31, 32, 33, 1007 };
static const int parts[] = { 1, 3, 4 };
#define NLENS 5
#define NPARTS 3

static uint64_t rng = 0x853c49e6748fea9bull;
static float uniform(float lo, float hi)
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return lo + (hi - lo) * (float)((rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24);
}

static void *to_gpu(const void *h, size_t nbytes)
{
    void *d = dti_cuda_malloc(nbytes ? nbytes : 1);
    dti_cuda_memcpy(d, h, nbytes);
    return d;
}

static void from_gpu(void *h, const void *d, size_t nbytes)
{
    dti_cuda_memcpy(h, d, nbytes);
}

static float ulps(float a, float b)
{
    if (isnan(a) && isnan(b))
        return 0;
    return fabsf(a - b) / fmaxf(fmaxf(fabsf(a), fabsf(b)) * 0x1p-23f, 0x1p-149f);
}

/* the host codes and the kernels' for one codec, length, chunk count and feedback */
static void one(dt_compress k, size_t n, int P, int feedback, int with_inf)
{
    float *x = malloc(n * 4), *e = malloc(n * 4), *eh = malloc(n * 4), *eg = malloc(n * 4);
    for (size_t i = 0; i < n; i++) {
        x[i] = uniform(-2, 2) * ldexpf(1, (int)uniform(-12, 3));
        e[i] = feedback ? uniform(-0.01f, 0.01f) : 0;
    }
    if (with_inf)
        x[n / 2] = INFINITY;
    size_t a, b;
    dt_chunk_bounds(n, P, 0, &a, &b);
    size_t W = dti_codec_words(k, b - a);
    uint32_t *want = calloc((size_t)P * W, 4), *got = calloc((size_t)P * W, 4);
    memcpy(eh, e, n * 4);
    for (int j = 0; j < P; j++) {
        dt_chunk_bounds(n, P, j, &a, &b);
        dti_encode(k, x + a, b - a, feedback ? eh + a : NULL, want + (size_t)j * W);
    }
    float *dx = to_gpu(x, n * 4), *de = to_gpu(e, n * 4);
    uint32_t *dw = dti_cuda_malloc((size_t)P * W * 4);
    dti_compress_cuda_encode(k, dx, n, P, feedback ? de : NULL, dw, W);
    from_gpu(got, dw, (size_t)P * W * 4);
    from_gpu(eg, de, n * 4);
    for (int j = 0; j < P; j++) {
        dt_chunk_bounds(n, P, j, &a, &b);
        size_t used = dti_codec_words(k, b - a), head = k == DT_COMPRESS_FP16 ? 0 : 1;
        const uint32_t *w = want + (size_t)j * W, *g = got + (size_t)j * W;
        if (head) {
            float sw, sg;
            memcpy(&sw, w, 4);
            memcpy(&sg, g, 4);
            REQUIRE(isnan(sw) == isnan(sg) && ulps(sw, sg) <= (k == DT_COMPRESS_SIGN ? 1 : 0),
                    "%s n %zu P %d chunk %d: scale %.9g, host %.9g", dt_compress_name(k), n,
                    P, j, (double)sg, (double)sw);
        }
        for (size_t i = head; i < used; i++)
            REQUIRE(w[i] == g[i], "%s n %zu P %d chunk %d word %zu: 0x%08x, host 0x%08x",
                    dt_compress_name(k), n, P, j, i, g[i], w[i]);
    }
    float xmax = 0;              /* sign: a scale's last bit moves each error by as much */
    for (size_t i = 0; i < n; i++)
        xmax = isfinite(x[i]) && fabsf(x[i]) > xmax ? fabsf(x[i]) : xmax;
    for (size_t i = 0; feedback && i < n; i++)
        REQUIRE(memcmp(&eh[i], &eg[i], 4) == 0 ||
                (k == DT_COMPRESS_SIGN && fabsf(eh[i] - eg[i]) <= 1e-6f * xmax),
                "%s n %zu P %d: error[%zu] %.9g, host %.9g", dt_compress_name(k), n, P, i,
                (double)eg[i], (double)eh[i]);
    /* decoding the host's codes, plain and added onto x */
    float *dh = malloc(n * 4), *dg = malloc(n * 4);
    dti_cuda_memcpy(dw, want, (size_t)P * W * 4);
    for (int add = 0; add < 2; add++) {
        memcpy(dh, x, n * 4);
        dti_cuda_memcpy(dx, x, n * 4);
        for (int j = 0; j < P; j++) {
            dt_chunk_bounds(n, P, j, &a, &b);
            dti_decode(k, want + (size_t)j * W, b - a, dh + a, add);
            dti_compress_cuda_decode(k, dw + (size_t)j * W, b - a, dx + a, add);
        }
        from_gpu(dg, dx, n * 4);
        for (size_t i = 0; i < n; i++)
            REQUIRE(memcmp(&dh[i], &dg[i], 4) == 0 || (isnan(dh[i]) && isnan(dg[i])),
                    "%s decode add %d [%zu]: %.9g, host %.9g", dt_compress_name(k), add, i,
                    (double)dg[i], (double)dh[i]);
    }
    dti_cuda_free(dx); dti_cuda_free(de); dti_cuda_free(dw);
    free(x); free(e); free(eh); free(eg); free(want); free(got); free(dh); free(dg);
}

START_TEST(test_codecs)
{
    dt_compress k = (dt_compress)(DT_COMPRESS_FP16 + _i);
    /* the host alone: a chunk's decoded codes stay within what the codec promises */
    for (int li = 0; li < NLENS; li++) {
        size_t n = lens[li], W = dti_codec_words(k, n);
        float *x = malloc(n * 4), *y = malloc(n * 4);
        uint32_t *w = calloc(W, 4);
        for (size_t i = 0; i < n; i++)
            x[i] = uniform(-1, 1);
        dti_encode(k, x, n, NULL, w);
        dti_decode(k, w, n, y, 0);
        float s = 0;
        memcpy(&s, w, 4);
        for (size_t i = 0; i < n; i++)
            REQUIRE(k == DT_COMPRESS_SIGN ? fabsf(fabsf(y[i]) - s) == 0
                    : fabsf(y[i] - x[i]) <= (k == DT_COMPRESS_INT8 ? s / 2 * 1.0001f : 1e-3f),
                    "%s host [%zu]: %g from %g", dt_compress_name(k), i, (double)y[i],
                    (double)x[i]);
        free(x); free(y); free(w);
    }
    if (!unit_use_gpu(gpu))
        return;
    for (int li = 0; li < NLENS; li++)
        for (int pi = 0; pi < NPARTS; pi++)
            for (int fb = 0; fb < 2; fb++)
                one(k, lens[li], parts[pi], fb, 0);
    one(k, 1007, 3, 0, 1);
}
END_TEST

int main(void)
{
    gpu = unit_probe_gpu_or_say("unit_gpu_compress", "the host codecs are checked alone");
    Suite *su = suite_create("gpu_compress");
    TCase *tc = tcase_create("gpu_compress");
    tcase_add_loop_test(tc, test_codecs, 0, 3);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(su, tc);
    return unit_run(su);
}
