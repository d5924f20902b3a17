/* The harness of the grading suites: tests/grade/NN_topic.c, and an instructor's hidden
 * tests (make grade EXTRA_TESTS=DIR), each a program linked with one learner file.
 *
 * A suite is a table of cases (gr_case) with the exercise's rules (gr_rule: what the
 * learner's functions may not call) and its deadlock hint, all in a gr_suite that main()
 * hands to gr_run. Each case is a Check test (looped over its variants) worth some
 * points, run on every rank at once through tests/harness.h: ranks note failures with
 * HT_EXPECT and end the test with HT_VERDICT(), so all ranks pass or fail together and
 * none is left waiting. After each case every rank writes its verdict line (gr_verdict).
 * tests/grade/grade.sh runs the cases under mpiexec with time limits at every rank
 * count and turns the verdicts into points:
 *
 *     build/grade/learner/02_reduce_scatter --list           the cases, no MPI needed
 *     build/grade/learner/02_reduce_scatter --rules          the rules, the hint
 *     mpiexec -n 3 build/grade/learner/02_reduce_scatter --case sum,bytes
 *
 * A case's points are won only when every rank reported it passed, at every rank count.
 * Messages should help a learner: say which rank, count and element, what was expected
 * and what came, and, where a typical mistake is recognised (the sum where the mean was
 * due, the data of rank 0 where the root's was due, a chunk one off), say so; the steps
 * of the answer only when the instructor asked for them (gr_hints).
 *
 * Like harness.h this header holds function bodies: each suite is a program of its own,
 * and this is how they share one harness. */
#ifndef DT_TESTS_GRADE_H
#define DT_TESTS_GRADE_H

#include <fcntl.h>
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
    const char *uses;     /* the learner's functions it runs, space-separated; NULL: all */
} gr_case;

/* What a learner's function must not call: the collective it is meant to implement,
 * dtlab's or MPI's. grade.sh reads the names each function of the learner's file calls
 * (itself and the static helpers it calls, from the object file's relocations), and a
 * case that uses a function calling a name that forbid matches loses its points:
 * "ex_f calls NAME: why". */
typedef struct {
    const char *function;  /* the learner's function, e.g. "ex_ring_allreduce" */
    const char *forbid;    /* a POSIX extended regex over whole names it may not call */
    const char *why;       /* what to do instead */
} gr_rule;

/* Every collective of MPI, blocking or not (and its PMPI_ name). */
#define GR_MPI_COLLECTIVES \
    "P?MPI_(I|I?[Nn]eighbor_)?([Aa]ll)?([Rr]educe|[Gg]ather|[Ss]catter|[Bb]cast|" \
    "[Aa]lltoall|[Ss]can|[Ee]xscan|[Bb]arrier)[A-Za-z_]*"
/* Every collective of dtlab (collectives.h), and the internal rings they share. */
#define GR_DT_COLLECTIVES \
    "dt_(allreduce|reduce_scatter|reduce|allgather|gather|bcast|scatter|alltoall)" \
    "(_[a-z0-9_]*)?|dti_ring_[a-z_]*"

/* An exercise's suite: its cases, its rules, and the hint its deadlocks get. */
typedef struct {
    const char *exercise;  /* "02_reduce_scatter" */
    const gr_case *cases;
    int ncases;
    const gr_rule *rules;
    int nrules;
    const char *deadlock;  /* after dtlab's "rank r waited ... for rank q": what to check */
    const char *ranks;     /* rank counts graded beyond GRADE_RANKS' default "1 2 3 4 5",
                            * where the algorithm's edge cases lie (a tree's second level
                            * of non-powers of two: "6 7"); NULL: none */
} gr_suite;

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

/* The ranks cut in two halves, the even ranks of MPI_COMM_WORLD and the odd ones, each
 * half numbered backwards: code that takes its rank or the size from MPI_COMM_WORLD goes
 * wrong. At 1 rank it is that rank. Collective; free it with MPI_Comm_free. */
static inline MPI_Comm gr_split(void)
{
    MPI_Comm half;
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, ht_rank % 2, ht_size - ht_rank, &half));
    return half;
}

/* 1 when the instructor asked for step-by-step hints (make grade HINTS=1): only then
 * may a message spell out the answer ("at step s rank r sends chunk ..."). */
static inline int gr_hints(void)
{
    const char *h = getenv("GRADE_HINTS");
    return h && !strcmp(h, "1");
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
 * numbers the ranks backwards (gr_backwards) and what this rank is in it. It blames
 * nothing: whether comm is to blame, gr_sub_comm_ok finds out (below; the suites use
 * gr_on). Kept for the hidden suites written with it. The text lasts until the next
 * call. */
static inline const char *gr_where(MPI_Comm comm)
{
    static char where[160];
    int rank;
    MPI_Comm_rank(comm, &rank);
    where[0] = '\0';
    if (comm != MPI_COMM_WORLD)
        snprintf(where, sizeof where, " on a communicator that numbers the ranks "
                 "backwards, where this rank is rank %d", rank);
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

/* ==== rounds ====
 *
 * How many rounds an algorithm took, whatever it sent: between gr_rounds_start and
 * gr_rounds_end dtlab's p2p notes each rank's messages in order (p2p.h), and the end
 * replays them on a logical clock per rank, starting at 0:
 *   - a send goes out in round clock + 1, which becomes the clock (a rank sends one
 *     message a round: a parent with two children needs two rounds);
 *   - a receive moves the clock up to the round its message went out in.
 * A dt_sendrecv is its send, then its receive: an exchange is one round for both
 * partners. The largest clock is the number of rounds, the longest causal chain of
 * messages: ceil(log2 n) for a binomial tree done right, n-1 for a ring's phase. */
enum { GR_NOTES = 4096 };
static dt_p2p_note gr_notes[GR_NOTES];

static inline void gr_rounds_start(void) { dt_p2p_log_start(gr_notes, GR_NOTES); }

/* The rounds since gr_rounds_start, the same on every rank; -1 when a rank noted more
 * than GR_NOTES messages. Collective over MPI_COMM_WORLD. */
static inline int gr_rounds_end(void)
{
    int mine = dt_p2p_log_stop(), n = ht_size, total = 0, rounds = 0;
    int over = ht_agree(mine <= GR_NOTES) == 0;
    if (over)
        return -1;
    int *cnt = malloc(3 * (size_t)n * sizeof *cnt), *off = cnt + n, *at = cnt + 2 * n;
    DT_REQUIRE(cnt != NULL, "out of memory");
    int words = 4 * mine;           /* a note is four ints */
    HT_MPI(MPI_Iallgather(&words, 1, MPI_INT, cnt, 1, MPI_INT, MPI_COMM_WORLD, &ht_req));
    for (int r = 0; r < n; r++) {
        off[r] = total;
        total += cnt[r];
    }
    dt_p2p_note *all = malloc(((size_t)total / 4 + 1) * sizeof *all);
    int *round = malloc(((size_t)total / 4 + 1) * sizeof *round);
    DT_REQUIRE(all != NULL && round != NULL, "out of memory");
    HT_MPI(MPI_Iallgatherv(gr_notes, words, MPI_INT, all, cnt, off, MPI_INT,
                           MPI_COMM_WORLD, &ht_req));
    for (int r = 0; r < n; r++) {     /* in notes from here on */
        cnt[r] /= 4;
        off[r] /= 4;
        at[r] = 0;
    }
    for (int i = 0; i < total / 4; i++)
        round[i] = -1;
    int *clock = calloc((size_t)n, sizeof *clock), moved = 1;
    DT_REQUIRE(clock != NULL, "out of memory");
    while (moved) {                   /* each pass takes every note it can */
        moved = 0;
        for (int r = 0; r < n; r++)
            while (at[r] < cnt[r]) {
                const dt_p2p_note *e = &all[off[r] + at[r]];
                if (e->send) {
                    round[off[r] + at[r]] = ++clock[r];
                } else if (e->peer >= 0 && e->peer < n) {
                    int q = e->peer, k = 0;     /* the send this receive took */
                    while (k < cnt[q] && !(all[off[q] + k].send && all[off[q] + k].peer == r
                           && all[off[q] + k].tag == e->tag && all[off[q] + k].seq == e->seq))
                        k++;
                    if (k < cnt[q] && round[off[q] + k] < 0)
                        break;                  /* not replayed yet: come back later */
                    if (k < cnt[q] && round[off[q] + k] > clock[r])
                        clock[r] = round[off[q] + k];
                }
                at[r]++;
                moved = 1;
            }
    }
    for (int r = 0; r < n; r++)
        rounds = clock[r] > rounds ? clock[r] : rounds;
    free(clock);
    free(round);
    free(all);
    free(cnt);
    return rounds;
}

/* ==== sub-communicators ====
 *
 * Every exercise that takes a comm is graded on one other than MPI_COMM_WORLD too
 * (gr_split, gr_backwards). When a check fails there, the same check runs again on
 * MPI_COMM_WORLD, so that the message blames the communicator only when that is the
 * mistake: code that passes on MPI_COMM_WORLD and fails on comm takes a rank or a size
 * from MPI_COMM_WORLD; code that fails on both has another mistake, which the case on
 * MPI_COMM_WORLD describes. */

/* For a message about a run on comm: "" for MPI_COMM_WORLD, else " (on a communicator
 * other than MPI_COMM_WORLD: rank 1 of 2 there, rank 2 of 4 in MPI_COMM_WORLD)". The
 * text lasts until the next call. */
static inline const char *gr_on(MPI_Comm comm)
{
    static char on[128];
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    on[0] = '\0';
    if (comm != MPI_COMM_WORLD)
        snprintf(on, sizeof on, " (on a communicator other than MPI_COMM_WORLD: rank %d "
                 "of %d there, rank %d of %d in MPI_COMM_WORLD)", rank, n, ht_rank,
                 ht_size);
    return on;
}

/* To call after a check on a communicator other than MPI_COMM_WORLD. When no rank
 * failed it, returns 1. Else runs again(ctx), the same check on MPI_COMM_WORLD, whose
 * own failures are dropped, and opens this rank's first failure with what that showed:
 * "only on a communicator other than MPI_COMM_WORLD ... every rank and size must come
 * from comm", or "(it fails on MPI_COMM_WORLD too)"; returns 0. Collective over
 * MPI_COMM_WORLD. */
static inline int gr_sub_comm_ok(void (*again)(void *ctx), void *ctx)
{
    if (gr_all_ok())
        return 1;
    static char first[sizeof ht_first];
    int nbad = ht_nbad;
    memcpy(first, ht_first, sizeof first);
    ht_nbad = 0;
    again(ctx);
    int world_ok = gr_all_ok();
    ht_nbad = nbad;
    if (nbad)
        snprintf(ht_first, sizeof ht_first, "%s%s", world_ok ? "fails only on a "
                 "communicator other than MPI_COMM_WORLD (every rank and size must come "
                 "from comm, never MPI_COMM_WORLD): " : "fails on MPI_COMM_WORLD too: ",
                 first);
    return 0;
}

/* gr_each_count on comm, a communicator other than MPI_COMM_WORLD, with gr_sub_comm_ok
 * after each count: at the first count where a rank failed, that count runs again on
 * MPI_COMM_WORLD to tell whether comm is to blame. Collective over MPI_COMM_WORLD. */
typedef struct {
    void (*check)(MPI_Comm comm, int count, unsigned seed);
    int count;
    unsigned seed;
} gr_recheck;

static inline void gr_recheck_world(void *ctx)
{
    gr_recheck *r = ctx;
    r->check(MPI_COMM_WORLD, r->count, r->seed);
}

static inline void gr_each_count_on(void (*check)(MPI_Comm comm, int count, unsigned seed),
                                    MPI_Comm comm, unsigned seed0)
{
    for (int j = 0; j < GR_NCOUNTS; j++) {
        gr_recheck r = { check, gr_count(gr_telling(j), ht_size),
                         seed0 + (unsigned)gr_telling(j) };
        if (ht_rank == 0)
            fprintf(stderr, "%s: count %d at %d ranks, on a sub-communicator\n",
                    tcase_name(), r.count, ht_size);
        check(comm, r.count, r.seed);
        if (!gr_sub_comm_ok(gr_recheck_world, &r))
            break;
    }
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
    printf("usage: %s [--list] [--rules] [--case NAME[,NAME...]]\n"
           "The grading suite of exercise %s: runs every case, or some, on the ranks of\n"
           "MPI_COMM_WORLD. make grade runs it for you; it prints the command that\n"
           "reproduces a failure.\n"
           "  --list        print the cases (name, points, pure|mpi, what, uses) and exit\n"
           "  --rules       print what the learner's functions may not call, and the\n"
           "                exercise's deadlock hint, and exit\n"
           "  --case NAMES  run only these cases, in the suite's order\n", prog, exercise);
}

/* A bad command line: MPI is started first, so that rank 0 alone speaks whether the
 * suite runs under mpiexec or alone; then dt_usage_error ends every rank, status 2, with
 * the sentence and its "Try 'PROG --help' for usage." line. */
__attribute__((noreturn))
static void gr_bad_args(char **argv, const char *why)
{
    int one = 1;                    /* only the program's name: dt_init reads no option */
    char **av = argv;
    dt_init(&one, &av);
    dt_usage_error(NULL, why);
}

/* Where the verdicts go. grade.sh names a file of its own (GRADE_VERDICTS) and a token
 * only this run knows (GRADE_TOKEN); gr_run opens the file and takes both out of the
 * environment (and /proc/self/environ) before any of the learner's code runs. The
 * learner's code may print only with printf and puts (grade.sh's rules), to stdout,
 * which grade.sh reads for messages and never for verdicts; it calls nothing that
 * could open, name or write this file. By hand (no GRADE_VERDICTS) the verdicts go to
 * stderr, with the token "-". */
static char gr_token[80] = "-";
static int gr_vfd = 2;

static void gr_take_token(void)
{
    char *t = getenv("GRADE_TOKEN"), *v = getenv("GRADE_VERDICTS");
    if (t != NULL) {
        snprintf(gr_token, sizeof gr_token, "%s", t);
        memset(t, 0, strlen(t));
        unsetenv("GRADE_TOKEN");
    }
    if (v != NULL) {
        gr_vfd = open(v, O_WRONLY | O_APPEND | O_CLOEXEC);  /* -1: no verdicts, no points */
        memset(v, 0, strlen(v));
        unsetenv("GRADE_VERDICTS");
    }
}

/* This rank's verdict on a case, one write(2) so that ranks' lines never mix:
 *     @grade TOKEN CASE RANK NRANKS pass
 *     @grade TOKEN CASE RANK NRANKS fail MESSAGE     (the message on rank 0 only)
 * grade.sh gives a case its points only when every rank wrote "pass", once: a case that
 * ends early (exit() in the learner's code, a crash, a deadlock) writes nothing. */
static void gr_verdict(const char *name, int pass, const char *msg)
{
    char line[1400];
    int k = snprintf(line, sizeof line, "@grade %s %s %d %d %s", gr_token, name, ht_rank,
                     ht_size, pass ? "pass" : "fail");
    if (!pass && ht_rank == 0 && msg[0])
        k += snprintf(line + k, sizeof line - (size_t)k - 1, " %s", msg);
    if (k > (int)sizeof line - 2)
        k = (int)sizeof line - 2;
    for (int i = 0; i < k; i++)
        if (line[i] == '\n')
            line[i] = ' ';
    line[k++] = '\n';
    if (gr_vfd < 0 || write(gr_vfd, line, (size_t)k) < 0) { /* no verdict, no points */ }
}

/* 1 when name is one of the comma-separated names in list. */
static int gr_listed(const char *list, const char *name)
{
    size_t len = strlen(name);
    for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, name, len) && (p[len] == ',' || p[len] == '\0'))
            return 1;
    return 0;
}

/* main() of a suite. Runs the cases asked for one after another, each on every rank,
 * and after each case every rank writes its verdict (gr_verdict). Exit status: 0 when
 * every case run passed, 1 when one failed, 2 for bad arguments (on every rank). */
static int gr_run(int argc, char **argv, const gr_suite *su)
{
    const char *only = NULL, *ex = su->exercise;
    int list = 0, rules = 0, help = 0;
    char why[200];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list")) {
            list = 1;
        } else if (!strcmp(argv[i], "--rules")) {
            rules = 1;
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
        gr_usage(argv[0], ex);
        return 0;
    }
    if (list + rules > 1 || ((list || rules) && only))
        gr_bad_args(argv, "--list, --rules and --case do not go together");
    if (list) {
        for (int c = 0; c < su->ncases; c++)
            printf("%s\t%d\t%s\t%s\t%s\n", su->cases[c].name, su->cases[c].points,
                   su->cases[c].pure ? "pure" : "mpi", su->cases[c].what,
                   su->cases[c].uses ? su->cases[c].uses : "-");
        return 0;
    }
    if (rules) {
        for (int r = 0; r < su->nrules; r++)
            printf("rule\t%s\t%s\t%s\n", su->rules[r].function, su->rules[r].forbid,
                   su->rules[r].why);
        if (su->deadlock)
            printf("deadlock\t%s\n", su->deadlock);
        if (su->ranks)
            printf("ranks\t%s\n", su->ranks);
        return 0;
    }
    for (const char *p = only; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        size_t len = strcspn(p, ",");
        int c = 0;
        while (c < su->ncases && !(strlen(su->cases[c].name) == len &&
                                   !strncmp(su->cases[c].name, p, len)))
            c++;
        if (c == su->ncases) {
            snprintf(why, sizeof why, "no case '%.*s' in exercise %s (--list shows them)",
                     (int)(len < 60 ? len : 60), p, ex);
            gr_bad_args(argv, why);
        }
    }

    gr_take_token();
    dt_init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &ht_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ht_size);
    struct sigaction sa = {.sa_sigaction = gr_crashed, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 4; i++)
        sigaction(gr_signals[i], &sa, &gr_next[i]);

    int status = 0;
    for (int c = 0; c < su->ncases; c++) {
        const gr_case *k = &su->cases[c];
        if (only && !gr_listed(only, k->name))
            continue;
        Suite *s = suite_create(ex);
        ht_add_cases(s, &(ht_case){ k->name, k->test, k->loops }, 1);
        int failed = ht_run(s);
        gr_verdict(k->name, !failed, ht_failure);
        status |= failed;
    }
    dt_finalize();
    return status;
}

/* main() of a suite without rules (hidden suites written before gr_run). */
static inline int gr_main(int argc, char **argv, const char *exercise, const gr_case *cases,
                          int ncases)
{
    return gr_run(argc, argv, &(gr_suite){ .exercise = exercise, .cases = cases,
                                          .ncases = ncases });
}

#endif /* DT_TESTS_GRADE_H */
