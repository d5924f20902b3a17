/* The harness of the multi-rank suites (tests/mpi_*.c): Check, run on every rank at once.
 *
 * A multi-rank test is a test every rank runs, in the same order, in one process per
 * rank (Check's CK_NOFORK: a forked child could not talk MPI). The danger is a failure
 * seen by one rank only: it would leave that rank's test early while the others wait in
 * the next collective, forever. So no test asserts on what one rank saw; instead
 *
 *   - each rank notes its own failures with HT_EXPECT (printed to stderr, with the rank),
 *   - at the end of the test HT_VERDICT() agrees on them across MPI_COMM_WORLD, and every
 *     rank passes or fails the test together, with the first failure of the lowest
 *     failing rank as the message.
 *
 * Only rank 0 prints Check's report, and its closing line "N%: Checks: X, Failures: Y,
 * Errors: Z" appears once. The exit status is agreed too: 0 when every test passed.
 *
 * This header holds function bodies, which dtlab's library headers never do: each suite
 * is linked alone (the Makefile builds one binary per tests/mpi_*.c), and this is how the
 * suites share one harness instead of two copies of it. */
#ifndef DT_TESTS_HARNESS_H
#define DT_TESTS_HARNESS_H

#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include "dt.h"

static int ht_rank, ht_size;      /* in MPI_COMM_WORLD */

/* A suite's first call: dt_init, then ht_rank and ht_size. */
static inline void ht_init(int *argc, char ***argv)
{
    dt_init(argc, argv);
    ht_rank = dt_rank();
    ht_size = dt_size();
}

/* ==== calling MPI politely ====
 *
 * MPICH's blocking collectives spin while they wait. With more ranks than cores (5 ranks
 * on a 2-core CI machine) a spinning rank holds the core its peer needs, and one
 * MPI_Allreduce takes tens of milliseconds instead of microseconds. So the suites call
 * MPI's collectives, references included, in their nonblocking form and wait with
 * dt_waitall, which yields the core between tests (p2p.h):
 *
 *     HT_MPI(MPI_Iallreduce(x, y, n, MPI_FLOAT, MPI_SUM, comm, &ht_req));
 *
 * The result is still MPI's own. */
static MPI_Request ht_req;
#define HT_MPI(icall) do { DT_CHECK_MPI(icall); dt_waitall(1, &ht_req); } while (0)

/* ==== agreeing ==== */

/* 1 on every rank when ok is true on every rank. Collective over MPI_COMM_WORLD. */
static int ht_agree(int ok)
{
    int all = 0;
    HT_MPI(MPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD, &ht_req));
    return all;
}

/* The failures this rank has seen in the current test, and the first one's text. */
static int ht_nbad;
static char ht_first[512];

__attribute__((format(printf, 1, 2)))
static void ht_fail(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ht_nbad == 0)
        snprintf(ht_first, sizeof ht_first, "%s", msg);
    if (ht_nbad < 8)
        fprintf(stderr, "rank %d: FAILED: %s\n", ht_rank, msg);
    ht_nbad++;
}

/* Notes a failure on this rank; never leaves the test (the other ranks carry on). */
#define HT_EXPECT(cond, ...) do { if (!(cond)) ht_fail(__VA_ARGS__); } while (0)

/* Agrees on the failures of the test so far: returns their number over all ranks (the
 * same on every rank) and, when there are some, leaves the lowest failing rank in
 * ht_first_rank and its first failure in ht_first. Resets the count. Collective. */
static int ht_first_rank;
static int ht_agree_failures(void)
{
    int mine = ht_nbad, total = 0, who = ht_nbad ? ht_rank : ht_size;
    HT_MPI(MPI_Iallreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &ht_req));
    if (total) {
        HT_MPI(MPI_Iallreduce(&who, &ht_first_rank, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD,
                              &ht_req));
        HT_MPI(MPI_Ibcast(ht_first, sizeof ht_first, MPI_CHAR, ht_first_rank, MPI_COMM_WORLD,
                          &ht_req));
    }
    ht_nbad = 0;
    return total;
}

/* Ends a test: every rank passes, or every rank fails it with the same message. A macro
 * so that Check reports the test's own file and line. */
#define HT_VERDICT() do { \
        int ht_total_ = ht_agree_failures(); \
        ck_assert_msg(ht_total_ == 0, "%d failed check(s) over %d ranks; the first, on " \
                      "rank %d: %s", ht_total_, ht_size, ht_first_rank, ht_first); \
    } while (0)

/* Resets the failure count when a test begins (a fixture, so a test that failed earlier
 * leaves nothing behind). */
static void ht_setup(void) { ht_nbad = 0; }

/* ==== running ==== */

/* A table of looped tests: each becomes a test case of its own name, run n times (the
 * loop index picks the test's variant), with the failure count reset first. */
typedef struct {
    const char *name;
    const TTest *test;
    int n;
} ht_case;

static inline void ht_add_cases(Suite *s, const ht_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, ht_setup, NULL);
        tcase_add_loop_test(tc, cases[i].test, 0, cases[i].n);
        suite_add_tcase(s, tc);
    }
}

/* Runs the suite on every rank: no fork, rank 0 reports, and when a test failed it ends
 * with a line "failed: <the first failure's message>", which ht_failure then holds on
 * every rank (HT_VERDICT gives every rank the same message). Returns the exit status,
 * the same on every rank: 0 if every test passed. Call between dt_init and dt_finalize;
 * it frees the suite. */
static char ht_failure[1024];
static inline int ht_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, ht_rank == 0 ? CK_NORMAL : CK_SILENT);
    int failed = srunner_ntests_failed(sr);
    ht_failure[0] = '\0';
    if (failed) {
        TestResult **tr = srunner_failures(sr);
        snprintf(ht_failure, sizeof ht_failure, "%s", tr_msg(tr[0]));
        if (ht_rank == 0)
            printf("failed: %s\n", ht_failure);
        free(tr);
    }
    fflush(stdout);
    srunner_free(sr);
    return ht_agree(failed == 0) ? 0 : 1;
}

#endif /* DT_TESTS_HARNESS_H */
