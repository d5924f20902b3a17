/* What the unit suites (no MPI) share: running a suite and turning its verdict into
 * main's exit status. Include it after <check.h>. */
#ifndef DT_TESTS_UNIT_H
#define DT_TESTS_UNIT_H

#include <check.h>
#include <math.h>

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

#endif /* DT_TESTS_UNIT_H */
