/* The harness of the grading suites: tests/grade/NN_topic.c, and an instructor's hidden
 * tests (make grade EXTRA_TESTS=DIR), each a program linked with one learner file.
 *
 * A suite is a table of cases. Each case is a Check test (looped over its variants) worth
 * some points, run on every rank at once through tests/harness.h: ranks note failures
 * with HT_EXPECT and end the test with HT_VERDICT(), so all ranks pass or fail together
 * and none is left waiting. tests/grade/grade.sh runs each case alone, under mpiexec
 * with a time limit, at every rank count it takes, and turns the results into points:
 *
 *     build/grade/learner/02_reduce_scatter --list           the cases, no MPI needed
 *     mpiexec -n 3 build/grade/learner/02_reduce_scatter --case uneven
 *
 * A case's points are won only when it passes at every rank count. Messages should
 * help a learner: say which rank, count and element, what was expected and what came,
 * and, where a typical mistake is recognised (the sum where the mean was due, the data
 * of rank 0 where the root's was due, a chunk one off), say so.
 *
 * Like harness.h this header holds function bodies: each suite is a program of its own,
 * and this is how they share one harness. */
#ifndef DT_TESTS_GRADE_H
#define DT_TESTS_GRADE_H

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>
#include "harness.h"
#include "exercises.h"

enum { GR_PURE = 1, GR_MPI = 0 };

typedef struct {
    const char *name;     /* what --case takes: letters, digits, '_' */
    int points;
    int pure;             /* GR_PURE: no communication, run at 1 rank only */
    const TTest *test;    /* START_TEST(name) ... END_TEST, ending in HT_VERDICT() */
    int loops;            /* variants: the test gets _i = 0 .. loops-1 */
    const char *what;     /* one line for the points table: what the case checks */
} gr_case;

/* ==== test data ==== */

/* Element counts every multi-rank case should try at n ranks: none, one, fewer than the
 * ranks, not a multiple of n, and one whose chunks exceed MPI's eager limit (16 KiB on
 * MPICH's shared memory), so that a send/recv order that can deadlock does. */
static inline int gr_count(int i, int n)
{
    switch (i) {
    case 0: return 0;
    case 1: return 1;
    case 2: return n > 1 ? n - 1 : 2;
    case 3: return 7 * n + 3;
    default: return 12345 * n + n / 2 + 1;     /* ~48 KiB per chunk, uneven */
    }
}
#define GR_NCOUNTS 5

/* The index into gr_count of the j-th count a case tries (j < GR_NCOUNTS), the most
 * telling first: 7n+3 (every chunk holds several elements, of two sizes), the large
 * one, then n-1, 1 and 0. */
static inline int gr_telling(int j)
{
    static const int order[GR_NCOUNTS] = { 3, 4, 2, 1, 0 };
    return order[j];
}

/* 1 on every rank while no rank has failed, 0 on every rank once one has: a case stops
 * at its first failure, all ranks together (a rank that stopped alone would leave the
 * others waiting). Collective over MPI_COMM_WORLD. */
static inline int gr_all_ok(void) { return ht_agree(ht_nbad == 0); }

/* Runs check(comm, count, seed0 + i) for the counts gr_count(i, n) in gr_telling's
 * order, n the number of ranks, and stops after the first count where a rank failed.
 * Rank 0 says each count on stderr first, so that a rerun that hangs shows where.
 * Collective over MPI_COMM_WORLD. */
static inline void gr_each_count(void (*check)(MPI_Comm comm, int count, unsigned seed),
                                 MPI_Comm comm, unsigned seed0)
{
    for (int j = 0; j < GR_NCOUNTS && gr_all_ok(); j++) {
        int count = gr_count(gr_telling(j), ht_size);
        if (ht_rank == 0)
            fprintf(stderr, "%s: count %d at %d ranks\n", tcase_name(), count, ht_size);
        check(comm, count, seed0 + (unsigned)gr_telling(j));
    }
}

/* A communicator of all ranks numbered backwards: rank r of MPI_COMM_WORLD is rank
 * n-1-r in it, so code that asks MPI_COMM_WORLD for its rank goes wrong. Collective;
 * free it with MPI_Comm_free. */
static inline MPI_Comm gr_backwards(void)
{
    MPI_Comm back;
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, ht_size - ht_rank, &back));
    return back;
}

/* For a message about a run on comm: "" for MPI_COMM_WORLD, else a note that comm
 * numbers the ranks backwards (gr_backwards) and what this rank is in it. The text
 * lasts until the next call. */
static inline const char *gr_where(MPI_Comm comm)
{
    static char where[160];
    int rank;
    MPI_Comm_rank(comm, &rank);
    where[0] = '\0';
    if (comm != MPI_COMM_WORLD)
        snprintf(where, sizeof where, " on a communicator that numbers the ranks "
                 "backwards, where this rank is rank %d (every rank and size must come "
                 "from comm, never MPI_COMM_WORLD)", rank);
    return where;
}

/* ==== checking buffers ==== */

enum { GR_GUARD = 16 };        /* guard floats on each side of a gr_guarded_data buffer */
#define GR_GUARD_VAL 1234.5f   /* what the guards hold: no test data takes this value */

/* count floats, not set, with room for one more so that count 0 is a real buffer too.
 * Free with free(). */
static inline float *gr_floats(int count)
{
    float *p = malloc(((size_t)count + 1) * sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory");
    return p;
}

/* A gr_floats copy of src[0..count). */
static inline float *gr_copy(const float *src, int count)
{
    return memcpy(gr_floats(count), src, (size_t)count * sizeof *src);
}

/* count floats holding rank's test data for seed (dt_fill_test_data, MPI_SUM), with
 * GR_GUARD guard floats on each side that a write outside the buffer changes. Free
 * with gr_free_guarded. */
static inline float *gr_guarded_data(int count, unsigned seed, int rank)
{
    float *p = malloc(((size_t)count + 2 * GR_GUARD) * sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory");
    for (int i = 0; i < count + 2 * GR_GUARD; i++)
        p[i] = GR_GUARD_VAL;
    dt_fill_test_data(p + GR_GUARD, count, MPI_FLOAT, MPI_SUM, seed, rank);
    return p + GR_GUARD;
}

static inline void gr_free_guarded(float *buf) { free(buf - GR_GUARD); }

/* 1 when a guard float around buf (count floats, from gr_guarded_data) was changed;
 * buf[*at] is then the first one, *at < 0 before the buffer, *at >= count after it. */
static inline int gr_guard_hit(const float *buf, int count, int *at)
{
    for (int g = 0; g < 2 * GR_GUARD; g++) {
        int i = g < GR_GUARD ? g - GR_GUARD : count + g - GR_GUARD;  /* before, after */
        if (buf[i] != GR_GUARD_VAL) {
            *at = i;
            return 1;
        }
    }
    return 0;
}

/* 1 when the guards around buf (count floats, from gr_guarded_data) are untouched;
 * else notes a failure that names count and the index written, and returns 0. */
static inline int gr_guards_ok(const float *buf, int count)
{
    int i;
    if (!gr_guard_hit(buf, count, &i))
        return 1;
    ht_fail("count %d: buf[%d] was written, outside the buffer's %d elements", count, i,
            count);
    return 0;
}

/* Where guard float buf[at] (gr_guard_hit) lies, for a message: "float k after the end
 * of the buffer" or "float k before the start of the buffer", k from 0. The text lasts
 * until the next call. */
static inline const char *gr_outside(int at, int count)
{
    static char where[64];
    snprintf(where, sizeof where, "float %d %s of the buffer",
             at < 0 ? -at - 1 : at - count,
             at < 0 ? "before the start" : "after the end");
    return where;
}

/* ==== running ==== */

/* What dt_init had installed for each signal gr_crashed catches: dtlab's handler. */
static const int gr_signals[4] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
static struct sigaction gr_next[4];

static void gr_crashed(int sig, siginfo_t *info, void *uctx)
{
    /* async-signal-safe: write(2) only, then dtlab's handler (which tells dtlab's watcher
     * that the death was explained) or, without one, die of the same signal */
    char msg[96], num[12];
    int k = 0, r = ht_rank;
    const char *head = "rank ", *mid = ": crashed with signal ";
    for (const char *p = head; *p; p++) msg[k++] = *p;
    int j = 0;
    do { num[j++] = (char)('0' + r % 10); r /= 10; } while (r);
    while (j) msg[k++] = num[--j];
    for (const char *p = mid; *p; p++) msg[k++] = *p;
    r = sig;
    do { num[j++] = (char)('0' + r % 10); r /= 10; } while (r);
    while (j) msg[k++] = num[--j];
    const char *tail = sig == SIGSEGV ? " (segmentation fault: a pointer or an index "
                       "outside its buffer)\n" : sig == SIGFPE ? " (arithmetic: a "
                       "division by zero?)\n" : "\n";
    for (const char *p = tail; *p && k < (int)sizeof msg - 1; p++) msg[k++] = *p;
    if (write(2, msg, (size_t)k) < 0) { /* nothing more can be done */ }
    for (int i = 0; i < 4; i++)
        if (gr_signals[i] == sig && (gr_next[i].sa_flags & SA_SIGINFO))
            gr_next[i].sa_sigaction(sig, info, uctx);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void gr_usage(const char *prog, const char *exercise)
{
    printf("usage: %s [--list] [--case NAME]\n"
           "The grading suite of exercise %s: runs every case, or one, on the ranks of\n"
           "MPI_COMM_WORLD. make grade runs it for you; it prints the command that\n"
           "reproduces a failure.\n"
           "  --list        print the cases (name, points, pure|mpi, what) and exit\n"
           "  --case NAME   run only this case\n", prog, exercise);
}

/* A bad command line: MPI is started first, so that rank 0 alone speaks whether the
 * suite runs under mpiexec or alone; then dt_usage_error ends every rank, status 2. */
__attribute__((noreturn))
static void gr_bad_args(char **argv, const char *why)
{
    int one = 1;                    /* only the program's name: dt_init reads no option */
    char hint[160], **av = argv;
    const char *slash = strrchr(argv[0], '/');
    snprintf(hint, sizeof hint, "Try '%s --help' for the options.\n",
             slash ? slash + 1 : argv[0]);
    dt_init(&one, &av);
    dt_usage_error(hint, why);
}

/* main() of a suite. Exit status: 0 when every case run passed, 1 when one failed, 2 for
 * bad arguments (on every rank). */
static int gr_main(int argc, char **argv, const char *exercise, const gr_case *cases,
                   int ncases)
{
    const char *only = NULL;
    int list = 0, help = 0;
    char why[160];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            help = 1;
        } else if (!strcmp(argv[i], "--case")) {
            if (i + 1 == argc || argv[i + 1][0] == '-')
                gr_bad_args(argv, "option '--case' needs a value");
            only = argv[++i];
        } else {
            snprintf(why, sizeof why, "unknown argument '%s'", argv[i]);
            gr_bad_args(argv, why);
        }
    }
    if (help) {
        gr_usage(argv[0], exercise);
        return 0;
    }
    if (list && only)
        gr_bad_args(argv, "--list and --case do not go together");
    if (list) {
        for (int c = 0; c < ncases; c++)
            printf("%s\t%d\t%s\t%s\n", cases[c].name, cases[c].points,
                   cases[c].pure ? "pure" : "mpi", cases[c].what);
        return 0;
    }
    int found = only == NULL;
    for (int c = 0; c < ncases && !found; c++)
        found = !strcmp(cases[c].name, only);
    if (!found) {
        snprintf(why, sizeof why, "no case '%.60s' in exercise %s (--list shows them)",
                 only, exercise);
        gr_bad_args(argv, why);
    }

    dt_init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &ht_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ht_size);
    struct sigaction sa = {.sa_sigaction = gr_crashed, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++)
        sigaction(gr_signals[i], &sa, &gr_next[i]);

    ht_case run[ncases];            /* the cases asked for, as harness.h runs them */
    int nrun = 0;
    for (int c = 0; c < ncases; c++)
        if (!only || !strcmp(cases[c].name, only))
            run[nrun++] = (ht_case){ cases[c].name, cases[c].test, cases[c].loops };
    Suite *s = suite_create(exercise);
    ht_add_cases(s, run, (size_t)nrun);
    int status = ht_run(s);
    dt_finalize();
    return status;
}

#endif /* DT_TESTS_GRADE_H */
