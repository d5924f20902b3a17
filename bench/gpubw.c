/* gpubw: the reduction kernel's bandwidth beside a device-to-device copy of the same
 * bytes, on one GPU. No MPI: one process, run it directly.
 *
 *   build/bench/gpubw                      256 MiB per buffer, median of 20 calls
 *   build/bench/gpubw --size 1G --iters 50
 *   build/bench/gpubw --device cpu         the same on host memory (the logic, anywhere)
 *
 * What it times, each call between two CUDA events (a host clock on the CPU), after
 * --warmup untimed calls; the median of --iters:
 *
 *   copy        cudaMemcpyAsync(dst, src, N, device to device): N read + N written
 *   copy+sync   the same, then cudaStreamSynchronize inside the timed region: a
 *               library call that returns when its copy is done pays that too
 *   reduce      dti_cuda_reduce(in, src, dst), dst = src + in (float sum), the kernel
 *               the ring collectives run on every chunk they receive (lib/ops_kernels.cu):
 *               2N read + N written. It waits for its stream before it returns (cuda.h)
 * Everything runs on the calling thread's stream (cudaStreamPerThread), as lib/ does.
 *   h2d, d2h    cudaMemcpyAsync between pinned host memory and the GPU: the ceiling
 *               of the staging transport (DT_P2P=staging), N each way
 *
 * GB/s = bytes moved / time, GB = 10^9. The reduce's ratio is taken against copy+sync,
 * the copy timed the way the library's call is; against the bare copy too.
 *
 * Inputs are random non-zero floats drawn on the host; every element of the reduce's
 * output (poisoned first) is compared with the CPU's src[i] + in[i] (exact: one IEEE
 * addition either way). Exit status: 0 when the check passed (or there is no GPU:
 * it says so and measures nothing), 1 when it failed, 2 on a usage error.
 * The last line is for scripts: "gpubw: result copy_GBps=... ratio=...". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cuda_runtime.h>
#include "dt.h"
#include "cuda.h"

static const char usage[] =
    "usage: gpubw [options]\n"
    "Times dtlab's reduction kernel beside a device-to-device copy of the same bytes.\n"
    "  --size B            bytes per buffer (default 256M; K, M, G suffixes), 1K to 4G\n"
    "  --iters K           timed calls per measurement, median taken (default 20)\n"
    "  --warmup W          untimed calls before each measurement (default 3)\n"
    "  --device cuda|cpu   where the buffers live (default cuda)\n"
    "  --help              this text\n";

/* ==== timing: CUDA events on the GPU, a host clock on the CPU ==== */

#define ST cudaStreamPerThread          /* lib/'s stream: cuda.h */

typedef enum { COPY, COPY_SYNC, REDUCE, H2D, D2H, NWHAT } what_t;
static const char *what_name[NWHAT] = {"copy", "copy+sync", "reduce", "h2d", "d2h"};
static const int what_passes[NWHAT] = {2, 2, 3, 2, 2};   /* N-byte passes over memory */

typedef struct {
    int gpu;
    size_t nbytes, count;           /* per buffer; count floats */
    float *in, *src, *dst;          /* where --device says */
    float *pinned;                  /* gpu: pinned host buffer of nbytes, for h2d, d2h */
    cudaEvent_t ev[2];
} bench_t;

static double host_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One call of what w measures. */
static void call(const bench_t *b, what_t w)
{
    if (!b->gpu) {                  /* the host: memcpy and the CPU loop (dst in place) */
        if (w == REDUCE) dt_reduce_cpu(b->in, b->dst, b->count, DT_F32, DT_OP_SUM);
        else memcpy(b->dst, b->src, b->nbytes);
        return;
    }
    switch (w) {
    case COPY: case COPY_SYNC:
        DT_CHECK_CUDA(cudaMemcpyAsync(b->dst, b->src, b->nbytes, cudaMemcpyDeviceToDevice, ST));
        if (w == COPY_SYNC) DT_CHECK_CUDA(cudaStreamSynchronize(ST));
        break;
    case REDUCE: dti_cuda_reduce(b->in, b->src, b->dst, b->count, DT_F32, DT_OP_SUM); break;
    case H2D:
        DT_CHECK_CUDA(cudaMemcpyAsync(b->dst, b->pinned, b->nbytes, cudaMemcpyHostToDevice, ST));
        break;
    case D2H:
        DT_CHECK_CUDA(cudaMemcpyAsync(b->pinned, b->src, b->nbytes, cudaMemcpyDeviceToHost, ST));
        break;
    default: break;
    }
}

/* Seconds of one call (events on this thread's stream, else the host clock). */
static double time_call(const bench_t *b, what_t w)
{
    if (!b->gpu) {
        double t0 = host_now();
        call(b, w);
        return host_now() - t0;
    }
    float ms;
    DT_CHECK_CUDA(cudaEventRecord(b->ev[0], ST));
    call(b, w);
    DT_CHECK_CUDA(cudaEventRecord(b->ev[1], ST));
    DT_CHECK_CUDA(cudaEventSynchronize(b->ev[1]));
    DT_CHECK_CUDA(cudaEventElapsedTime(&ms, b->ev[0], b->ev[1]));
    return ms * 1e-3;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, c = *(const double *)y;
    return (a > c) - (a < c);
}

/* The median of iters timed calls after warmup untimed ones; *lo, *hi: the extremes. */
static double median_time(const bench_t *b, what_t w, int warmup, int iters, double *lo,
                          double *hi)
{
    double *t = malloc(iters * sizeof *t);
    DT_REQUIRE(t != NULL, "gpubw: out of host memory");
    for (int i = 0; i < warmup; i++)
        time_call(b, w);
    for (int i = 0; i < iters; i++)
        t[i] = time_call(b, w);
    qsort(t, iters, sizeof *t, by_value);
    double m = iters % 2 ? t[iters / 2] : 0.5 * (t[iters / 2 - 1] + t[iters / 2]);
    *lo = t[0];
    *hi = t[iters - 1];
    free(t);
    return m;
}

/* ==== inputs and the check ==== */

/* Random non-zero floats, +-[0.5, 1.5): xorshift64*, the same on every run. */
static void fill_random(float *x, size_t count, uint64_t seed)
{
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < count; i++) {
        s ^= s >> 12; s ^= s << 25; s ^= s >> 27;
        uint64_t r = s * 0x2545F4914F6CDD1Dull;
        float v = 0.5f + (float)(r >> 40) / (float)(1 << 24);
        x[i] = (r & 1) ? -v : v;
    }
}

/* Puts host arrays into b's buffers (a copy on the GPU, memcpy on the CPU). */
static void put(const bench_t *b, float *dev, const float *host)
{
    if (b->gpu) dti_cuda_memcpy(dev, host, b->nbytes);
    else memcpy(dev, host, b->nbytes);
}

/* One reduce on fresh inputs, its output poisoned first; every element against the
 * CPU's sum. Returns the number of wrong elements (prints the first few). */
static size_t check_reduce(const bench_t *b)
{
    size_t n = b->count, wrong = 0;
    float *hin = malloc(b->nbytes), *hsrc = malloc(b->nbytes), *got = malloc(b->nbytes);
    DT_REQUIRE(hin && hsrc && got, "gpubw: out of host memory for the check");
    fill_random(hin, n, 31);
    fill_random(hsrc, n, 32);
    for (size_t i = 0; i < n; i++)
        got[i] = NAN;
    put(b, b->in, hin);
    put(b, b->src, hsrc);
    put(b, b->dst, b->gpu ? got : hsrc);        /* the CPU reduces dst in place */
    call(b, REDUCE);
    if (b->gpu) dti_cuda_memcpy(got, b->dst, b->nbytes);
    else memcpy(got, b->dst, b->nbytes);
    for (size_t i = 0; i < n; i++) {
        float want = hsrc[i] + hin[i];
        if (got[i] != want) {              /* NaN (unwritten) is never equal */
            if (wrong < 3)
                fprintf(stderr, "gpubw: element %zu is %g, the CPU says %g\n", i,
                        (double)got[i], (double)want);
            wrong++;
        }
    }
    free(hin);
    free(hsrc);
    free(got);
    return wrong;
}

/* ==== main ==== */

static void bad_usage(const char *why)
{
    fprintf(stderr, "gpubw: %s\n%s", why, usage);
    exit(2);
}

int main(int argc, char **argv)
{
    /* Initialization */
    bench_t b = {.gpu = 1, .nbytes = (size_t)256 << 20};
    int iters = 20, warmup = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage, stdout); return 0; }
        if (!v) bad_usage("an option without its value, or an unknown argument");
        i++;
        if (!strcmp(a, "--size")) {
            if (dt_parse_size(v, &b.nbytes) || b.nbytes < 1024 || b.nbytes > ((size_t)4 << 30))
                bad_usage("--size wants a size from 1K to 4G, like 256M");
        } else if (!strcmp(a, "--iters")) {
            if (dt_parse_int(v, 1, 100000, &iters)) bad_usage("--iters wants 1 to 100000");
        } else if (!strcmp(a, "--warmup")) {
            if (dt_parse_int(v, 0, 100000, &warmup)) bad_usage("--warmup wants 0 to 100000");
        } else if (!strcmp(a, "--device")) {
            if (strcmp(v, "cuda") && strcmp(v, "cpu")) bad_usage("--device wants cuda or cpu");
            b.gpu = !strcmp(v, "cuda");
        } else {
            bad_usage("unknown option");
        }
    }
    b.nbytes -= b.nbytes % sizeof(float);
    b.count = b.nbytes / sizeof(float);

    char name[256] = "cpu";
    if (b.gpu) {
        if (dti_cuda_device_count() == 0) {
            printf("gpubw: no GPU here (%s): nothing measured\n", dti_cuda_why_none());
            return 0;
        }
        dti_cuda_set_device(0);
        dti_cuda_device_name(0, name, sizeof name);
        b.in = dti_cuda_malloc(b.nbytes);
        b.src = dti_cuda_malloc(b.nbytes);
        b.dst = dti_cuda_malloc(b.nbytes);
        b.pinned = dti_cuda_host_alloc(b.nbytes);
        DT_CHECK_CUDA(cudaEventCreate(&b.ev[0]));
        DT_CHECK_CUDA(cudaEventCreate(&b.ev[1]));
    } else {
        b.in = malloc(b.nbytes);
        b.src = malloc(b.nbytes);
        b.dst = malloc(b.nbytes);
        DT_REQUIRE(b.in && b.src && b.dst, "gpubw: cannot allocate 3 x %zu bytes", b.nbytes);
    }

    /* The check first: the kernel must be right before it is timed */
    size_t wrong = check_reduce(&b);

    /* Update: every measurement on random inputs */
    float *h = malloc(b.nbytes);
    DT_REQUIRE(h != NULL, "gpubw: out of host memory");
    fill_random(h, b.count, 1);
    put(&b, b.in, h);
    fill_random(h, b.count, 2);
    put(&b, b.src, h);
    put(&b, b.dst, h);
    if (b.gpu) memcpy(b.pinned, h, b.nbytes);
    free(h);

    double t[NWHAT] = {0}, lo[NWHAT], hi[NWHAT], gbps[NWHAT] = {0};
    int nwhat = b.gpu ? NWHAT : REDUCE + 1;
    for (int w = 0; w < nwhat; w++) {
        if (!b.gpu && w == COPY_SYNC) continue;             /* the same as copy there */
        t[w] = median_time(&b, w, warmup, iters, &lo[w], &hi[w]);
        gbps[w] = (double)what_passes[w] * b.nbytes / 1e9 / t[w];
    }
    if (!b.gpu) { t[COPY_SYNC] = t[COPY]; gbps[COPY_SYNC] = gbps[COPY]; }

    /* Draw */
    char sz[32];
    printf("gpubw: %s, %s per buffer, float sum, median of %d calls after %d warm-up "
           "(%s)\n", name, dt_format_bytes((double)b.nbytes, sz, sizeof sz), iters, warmup,
           b.gpu ? "CUDA events" : "host clock");
    printf("  %-10s  %-34s  %10s  %10s  %10s  %9s\n", "what", "call", "bytes moved",
           "median us", "min..max", "GB/s");
    static const char *calls[NWHAT] = {
        "cudaMemcpyAsync D2D", "cudaMemcpyAsync D2D + stream sync",
        "dti_cuda_reduce dst = src + in", "cudaMemcpyAsync pinned -> GPU",
        "cudaMemcpyAsync GPU -> pinned"};
    for (int w = 0; w < nwhat; w++) {
        if (!b.gpu && w == COPY_SYNC) continue;
        char range[32];
        snprintf(range, sizeof range, "%.0f..%.0f", lo[w] * 1e6, hi[w] * 1e6);
        printf("  %-10s  %-34s  %7d x N  %10.1f  %10s  %9.1f\n", what_name[w],
               b.gpu ? calls[w] : w == REDUCE ? "dt_reduce_cpu inout += in" : "memcpy",
               what_passes[w], t[w] * 1e6, range, gbps[w]);
    }
    double ratio = gbps[REDUCE] / gbps[COPY_SYNC], bare = gbps[REDUCE] / gbps[COPY];
    printf("reduce / copy+sync = %.2f, reduce / copy = %.2f (aim: 0.9; N = %zu bytes)\n",
           ratio, bare, b.nbytes);
    printf("check: every element of dst = src + in against the CPU: %zu wrong, %s\n",
           wrong, wrong ? "FAIL" : "PASS");
    printf("gpubw: result device=%s copy_GBps=%.1f copysync_GBps=%.1f reduce_GBps=%.1f "
           "h2d_GBps=%.1f d2h_GBps=%.1f ratio=%.3f ratio_bare=%.3f wrong=%zu\n",
           b.gpu ? "cuda" : "cpu", gbps[COPY], gbps[COPY_SYNC], gbps[REDUCE], gbps[H2D],
           gbps[D2H], ratio, bare, wrong);

    /* De-Initialization */
    if (b.gpu) {
        DT_CHECK_CUDA(cudaEventDestroy(b.ev[0]));
        DT_CHECK_CUDA(cudaEventDestroy(b.ev[1]));
        dti_cuda_host_free(b.pinned);
        dti_cuda_free(b.in);
        dti_cuda_free(b.src);
        dti_cuda_free(b.dst);
    } else {
        free(b.in);
        free(b.src);
        free(b.dst);
    }
    return wrong ? 1 : 0;
}
