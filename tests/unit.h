/* What the unit suites (no MPI) share: running a suite and turning its verdict into
 * main's exit status; and, in tests/unit.c (linked into every tests/unit_*.c, not into
 * the viewer's tests/viz_*.c, which use unit_run alone), random numbers that reproduce,
 * buffers, float results held to a double reference, and central differences. Include
 * it after <check.h>. */
#ifndef DT_TESTS_UNIT_H
#define DT_TESTS_UNIT_H

#include <check.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda.h"

/* Runs every test of s (forked, Check's default) and frees it; returns 0 when all
 * passed, 1 otherwise. */
static inline int unit_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

/* The GPU suites' copies: a device copy of nbytes of host memory (dti_cuda_free it),
 * and a host copy of nbytes of device memory (free it). */
static inline void *unit_to_gpu(const void *h, size_t nbytes)
{
    void *d = dti_cuda_malloc(nbytes ? nbytes : 1);
    dti_cuda_memcpy(d, h, nbytes);
    return d;
}

static inline void *unit_from_gpu(const void *d, size_t nbytes)
{
    void *h = malloc(nbytes ? nbytes : 1);
    ck_assert_ptr_nonnull(h);
    dti_cuda_memcpy(h, d, nbytes);
    return h;
}

/* Whether a GPU can be used, asked in a child process: CUDA must not be initialised in
 * main before Check forks the tests (a forked child cannot use its parent's context).
 * For the GPU suites (unit_gpu_*, unit_books): each says once when it skips. */
static inline int unit_probe_gpu(void)
{
    pid_t pid = fork();
    if (pid == 0)
        _exit(dti_cuda_device_count() > 0 ? 0 : 1);
    int status = 1;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

/* In a forked test of a GPU suite, when gpu (its main's unit_probe_gpu_or_say): the GPU
 * made current, its context made here in the child, never in main; and the device count
 * dt_init would set, so that lib/ takes device pointers for what they are. Returns gpu. */
int unit_use_gpu(int gpu);

/* unit_probe_gpu for a GPU suite's main: where there is no GPU, says so once, as
 * "SUITE: GPU comparisons skipped: no GPU (why); ALONE" (ALONE: what the suite checks
 * without one), which scripts/gpu-check.sh fails on a GPU machine. */
static inline int unit_probe_gpu_or_say(const char *suite, const char *alone)
{
    int gpu = unit_probe_gpu();
    if (!gpu)
        printf("%s: GPU comparisons skipped: no GPU (%s); %s\n", suite,
               DTI_CUDA_BUILT ? "none usable" : "built without CUDA", alone);
    fflush(stdout);
    return gpu;
}

/* ==== tests/unit.c ==== */

/* Random numbers, xorshift64*: the same sequence in every run, so failures reproduce.
 * unit_seed restarts it (the default seed: 0x9e3779b97f4a7c15); a suite that wants
 * another calls it in main, before unit_run, and every forked test starts from there.
 * unit_uniform is uniform in [lo, hi). */
void unit_seed(uint64_t seed);
double unit_uniform(double lo, double hi);

/* New buffers of n elements (a failed allocation fails the test; n = 0 is fine); the
 * caller frees them. Floats uniform in [lo, hi); floats all NaN (to be overwritten
 * before they are read); a copy of src; doubles left unset; src widened to double. */
float *unit_random_floats(size_t n, double lo, double hi);
float *unit_nan_floats(size_t n);
float *unit_copy_floats(const float *src, size_t n);
double *unit_doubles(size_t n);
double *unit_to_double(const float *src, size_t n);

/* Fails the test unless |got - want| <= tol * scale for every element, scale =
 * max(least, max |want|): float results against a double-precision reference, relative
 * to the size of the whole array (an element near 0 carries the rounding of the sums
 * that made it). unit_require_close: least 1. */
void unit_require_near(const float *got, const double *want, size_t n, double tol,
                       double least, const char *what);
static inline void unit_require_close(const float *got, const double *want, size_t n,
                                      double tol, const char *what)
{
    unit_require_near(got, want, n, tol, 1.0, what);
}

/* Central differences of f at v[j], j = 0..n-1, into g[j]: (f(v+h) - f(v-h)) / 2h, h =
 * 1e-5, in double; v lies in what ctx points to, and is left as it was. */
typedef double (*unit_fn)(const void *ctx);
void unit_numeric_grad(unit_fn f, const void *ctx, double *v, size_t n, double *g);

#endif /* DT_TESTS_UNIT_H */
