/* Faults on purpose: the last rank dies or stops in the middle of a ring allreduce, or
 * of a large message through p2p's mailboxes, and dtlab must end the whole job soon,
 * with one line on stderr naming the rank. tests/faults.sh runs every case under
 * mpiexec and checks the status, the time and the line.
 *
 *     MPIEXEC_TIMEOUT=30 mpiexec -n 3 build/tests/faults CASE     (faults --list)
 *
 * Every rank runs ROUNDS allreduces of data that differs per rank, checked against
 * MPI_Allreduce. In round 1, at the first step of the ring (the step hook), the last
 * rank does what CASE says while the others wait for its messages. At 1 rank the ring
 * has no steps, so the fault happens just before the round. Case overtime has no fault
 * but never stops: the job's time limit ends it in the middle of short waits, and the
 * line must say the job ran out of time, not that a rank is stuck. COUNT is large
 * enough that at up to 5 ranks each message of the ring (a chunk) takes a mailbox
 * between ranks of one host (p2p.h, "transports"), so the ranks die holding slots.
 *
 * The mb- cases run a ring of dt_sendrecv instead: each round every rank sends MB_BYTES
 * (8 slots of 256 KiB: a mailbox message as large as an outbox) to its right. In round 1 one
 * page of the last rank's buffer, where the third piece goes, is made inaccessible, so
 * the copy of that piece faults at a known point: for mb-stall in the receive buffer
 * (two pieces taken, six slots held: its left neighbour's next message finds too few
 * free slots, goes by MPI and waits for the stalled rank to take it), for
 * mb-die in the send buffer (two doorbells rung, then death). */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "dt.h"

#define ROUNDS 3
#define COUNT 100003              /* not a multiple of 2, 3, 4 or 5 ranks */
#define MB_BYTES ((size_t)2 << 20)

static const struct { const char *name, *what; } cases[] = {
    {"none", "no fault: every round must pass and the job end with status 0"},
    {"kill", "the last rank kills itself with SIGKILL"},
    {"segv", "the last rank writes through a NULL pointer (SIGSEGV)"},
    {"require", "the last rank fails a DT_REQUIRE check"},
    {"exit", "the last rank calls exit(3) without dt_finalize"},
    {"stuck", "the last rank sleeps forever; the others wait for its messages"},
    {"overtime", "no fault, but rounds without end: MPIEXEC_TIMEOUT must stop the job"},
    {"mb-stall", "the last rank stops while it takes a 2 MiB mailbox message, holding "
                 "six slots; its left neighbour's next message waits for it"},
    {"mb-die", "the last rank dies (SIGKILL) while it sends a 2 MiB mailbox message, "
               "two doorbells rung"},
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

/* ==== the mailbox cases ==== */

static void stall_forever(int sig) { (void)sig; for (;;) pause(); }
static void die_at_once(int sig) { (void)sig; raise(SIGKILL); }

/* Byte j of round r's message from rank src (a fault test: it need only differ). */
static unsigned char mb_byte(int src, int r, size_t j)
{
    return (unsigned char)(j * 131 + (j >> 12) * 7 + (size_t)src * 31 + (size_t)r);
}

/* ROUNDS rounds of a ring of MB_BYTES, each checked; in round 1 the last rank makes the
 * page at its third piece inaccessible, in its receive buffer (mb-stall) or its send
 * buffer (mb-die), with a handler for the fault that stops or kills it. */
static void mb_rounds(void)
{
    int rank = dt_rank(), n = dt_size();
    int right = (rank + 1) % n, left = (rank + n - 1) % n;
    long page = sysconf(_SC_PAGESIZE);
    size_t at = 2 * dt_p2p_segment(0);         /* the third piece's first byte */
    DT_REQUIRE(n > 1, "faults: case %s needs 2 ranks or more", fault);
    unsigned char *s, *r;
    DT_REQUIRE(posix_memalign((void **)&s, (size_t)page, MB_BYTES) == 0 &&
               posix_memalign((void **)&r, (size_t)page, MB_BYTES) == 0, "out of memory");
    for (round_no = 0; round_no < ROUNDS; round_no++) {
        for (size_t j = 0; j < MB_BYTES; j++)
            s[j] = mb_byte(rank, round_no, j);
        if (round_no == 1 && rank == n - 1) {
            int stall = !strcmp(fault, "mb-stall");
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = stall ? stall_forever : die_at_once;
            sigaction(SIGSEGV, &sa, NULL);
            DT_REQUIRE(mprotect((stall ? r : s) + at, (size_t)page, PROT_NONE) == 0,
                       "faults: mprotect failed");
        }
        dt_sendrecv(s, MB_BYTES, right, r, MB_BYTES, left, 0, MPI_COMM_WORLD);
        for (size_t j = 0; j < MB_BYTES; j++)
            DT_REQUIRE(r[j] == mb_byte(left, round_no, j), "faults: round %d: byte %zu "
                       "from rank %d is wrong", round_no, j, left);
        /* A send returns once its pieces are in the slots, before its receiver has
         * taken them, so a rank may start round 1 while its right neighbour still
         * holds round 0's slots; its message would go by MPI, and the fault would hit
         * MPI's copy instead of the mailbox's. Every rank past round 0 has given its
         * slots back, so after this barrier round 1's messages all take a mailbox. */
        if (round_no == 0)
            DT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    free(s);
    free(r);
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

    if (!strncmp(fault, "mb-", 3)) {
        mb_rounds();
        dt_printf0("faults: case %s: %d rounds done at %d ranks\n", fault, ROUNDS, dt_size());
        dt_finalize();
        return 0;
    }
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
