/* What the unit suites (no MPI) share: running a suite and turning its verdict into
 * main's exit status. Include it after <check.h>. */
#ifndef DT_TESTS_UNIT_H
#define DT_TESTS_UNIT_H

#include <check.h>
#include <math.h>
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

/* Fails the test unless |got - want| <= tol * scale for every element, scale =
 * max(1, max |want|): float results against a double-precision reference. */
static inline void unit_require_close(const float *got, const double *want, size_t n,
                                      double tol, const char *what)
{
    double scale = 1.0;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * scale))
            ck_abort_msg("%s[%zu] = %.9g, want %.9g (tolerance %g)", what, i,
                         (double)got[i], want[i], tol * scale);
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

#endif /* DT_TESTS_UNIT_H */
