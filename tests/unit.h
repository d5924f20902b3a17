/* What the unit suites (no MPI) share: running a suite and turning its verdict into
 * main's exit status. Include it after <check.h>. */
#ifndef DT_TESTS_UNIT_H
#define DT_TESTS_UNIT_H

#include <check.h>

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

#endif /* DT_TESTS_UNIT_H */
