/* Faults on purpose: the last rank dies or stops in the middle of a ring allreduce, and
 * dtlab must end the whole job soon, with one line on stderr naming the rank.
 * tests/faults.sh runs every case under mpiexec and checks the status, the time and
 * the line.
 *
 *     MPIEXEC_TIMEOUT=30 mpiexec -n 3 build/tests/faults CASE     (faults --list)
 *
 * Every rank runs ROUNDS allreduces of data that differs per rank, checked against
 * MPI_Allreduce. In round 1, at the first step of the ring (the step hook), the last
 * rank does what CASE says while the others wait for its messages. At 1 rank the ring
 * has no steps, so the fault happens just before the round. Case overtime has no fault
 * but never stops: the job's time limit ends it in the middle of short waits, and the
 * line must say the job ran out of time, not that a rank is stuck. */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dt.h"

#define ROUNDS 3
#define COUNT 1001                /* not a multiple of 2, 3, 4 or 5 ranks */

static const struct { const char *name, *what; } cases[] = {
    {"none", "no fault: every round must pass and the job end with status 0"},
    {"kill", "the last rank kills itself with SIGKILL"},
    {"segv", "the last rank writes through a NULL pointer (SIGSEGV)"},
    {"require", "the last rank fails a DT_REQUIRE check"},
    {"exit", "the last rank calls exit(3) without dt_finalize"},
    {"stuck", "the last rank sleeps forever; the others wait for its messages"},
    {"overtime", "no fault, but rounds without end: MPIEXEC_TIMEOUT must stop the job"},
};

static const char *fault;         /* the case being run */
static int *volatile nowhere;     /* never set: NULL; volatile, so the store is real */
static int round_no;

static void do_fault(void)
{
    if (!strcmp(fault, "kill")) {
        raise(SIGKILL);
    } else if (!strcmp(fault, "segv")) {
        *nowhere = 1;
    } else if (!strcmp(fault, "require")) {
        DT_REQUIRE(round_no != 1, "faults: the broken precondition of case 'require'");
    } else if (!strcmp(fault, "exit")) {
        exit(3);
    } else if (!strcmp(fault, "stuck")) {
        for (;;)
            sleep(1);
    }
}

static void hook(const char *coll, const char *phase, int step, const void *buf,
                 int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)coll; (void)phase; (void)buf; (void)count; (void)type; (void)comm; (void)ctx;
    if (round_no == 1 && step == 0 && dt_rank() == dt_size() - 1)
        do_fault();
}

int main(int argc, char **argv)
{
    int ncases = (int)(sizeof cases / sizeof cases[0]);
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (int i = 0; i < ncases; i++)
            printf("%s\t%s\n", cases[i].name, cases[i].what);
        return 0;
    }
    dt_init(&argc, &argv);
    const char *usage = "usage: mpiexec -n N faults CASE   (faults --list: the cases)\n";
    if (argc != 2)
        dt_usage_error(usage, NULL);
    for (int i = 0; i < ncases && !fault; i++)
        if (!strcmp(argv[1], cases[i].name))
            fault = cases[i].name;
    if (!fault)
        dt_usage_error(usage, "unknown case");

    int rank = dt_rank();
    float *x = malloc(COUNT * sizeof *x), *got = malloc(COUNT * sizeof *x),
          *want = malloc(COUNT * sizeof *x);
    DT_REQUIRE(x && got && want, "out of memory");
    dt_set_step_hook(hook, NULL);
    int rounds = strcmp(fault, "overtime") ? ROUNDS : INT_MAX;
    for (round_no = 0; round_no < rounds; round_no++) {
        dt_fill_test_data(x, COUNT, MPI_FLOAT, MPI_SUM, (unsigned)round_no, rank);
        if (round_no == 1 && dt_size() == 1)
            do_fault();
        dt_allreduce_ring(x, got, COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        MPI_Request req;
        DT_CHECK_MPI(MPI_Iallreduce(x, want, COUNT, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                    &req));
        dt_waitall(1, &req);
        if (!dt_check_close(got, want, COUNT, MPI_FLOAT, 1e-6, "faults", MPI_COMM_WORLD))
            DT_REQUIRE(0, "faults: round %d: dt_allreduce_ring differs from MPI's",
                       round_no);
    }
    dt_printf0("faults: case %s: %d rounds done at %d ranks\n", fault, ROUNDS, dt_size());
    free(x);
    free(got);
    free(want);
    dt_finalize();
    return 0;
}
