/* Lesson 25: elastic training: a rank lost, and the job going on without it.
 *
 * What it teaches: a node can vanish mid-run (a hardware fault, a preempted machine, the
 * out-of-memory killer). A synchronous job cannot step without it, so the launcher ends
 * the job; what saves the work is a checkpoint, and an agent that starts the job again:
 * torchrun --nnodes 2:4 --max-restarts 3, or dtlab's scripts/elastic.sh. When a rank
 * dies, the ranks that remain (--replace: as many, a new node in the lost one's place)
 * start again from the last checkpoint, resharded for them, down to --min ranks:
 *
 *     4 ranks  1 2 3 [3] 4 5 6 [6] 7 8 x      rank 1 killed at the end of step 8
 *     3 ranks                      7 8 9 [9] 10 11 12 [12]     resumed from [6]
 *
 * The lesson trains twice, never stopped and with a rank killed (the test hook
 * DT_TEST_KILL=R:K), and shows the losses and weights equal to rounding, the steps
 * trained twice, and the bytes each rank read to rebuild its part of the state.
 *
 * The code: scripts/elastic.sh, lib/parallel/checkpoint.c (dti_ckpt_start),
 * lib/parallel/checkpoint_reshard.c (ck_reshard), lib/parallel/books.c (dti_step_end).
 *
 * Run:  build/lessons/25_elastic       (it starts mpiexec; under mpiexec, rank 0 does)
 *       build/lessons/25_elastic -n 5 --min 3 --kill-rank 0 --kill-step 7 --mode ddp
 *       build/lessons/25_elastic --replace --keep elastic-run
 */
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "dt.h"

static const char usage[] =
    "usage: 25_elastic [options]      (under mpiexec -n K, rank 0 runs it)\n"
    "Trains a small MLP on N ranks twice: never stopped, and under scripts/elastic.sh\n"
    "with a rank killed mid-run, the job going on from the last checkpoint.\n"
    "  -n N                ranks to start with, 2 to 16 (default 4)\n"
    "  --min M             fewest ranks the job may go on with, 1 to N (default N-1)\n"
    "  --replace           restart on N ranks (a replacement node), not N-1\n"
    "  --steps S           training steps, 2 to 200 (default 12)\n"
    "  --every E           a checkpoint every E steps, 1 to S (default 3)\n"
    "  --kill-rank R       the rank killed, 0 to N-1 (default 1)\n"
    "  --kill-step K       at the end of step K, 1 to S (default 8)\n"
    "  --mode M            fsdp|ddp (default fsdp); --adam: Adam, not SGD\n"
    "  --keep DIR          keep the runs' files in DIR, a new or empty folder\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { MAXS = 200, MAXR = 16, MAXW = 1 << 16, PATHLEN = PATH_MAX + 64 };
typedef struct { int N, M, replace, S, E, R, K, adam; const char *mode, *keep; } lesson;

/* What a run printed: the loss of each step per job (a "train:" line starts a job),
 * each job's ranks, and from the summary the bytes each rank read at the resume. */
typedef struct {
    double loss[2][MAXS + 1];
    int jobs, ranks[2], shards[MAXR];
    long long params, read[MAXR], state[MAXR];
} outcome;

static char root[PATH_MAX], wdir[PATH_MAX];    /* ROOT/ of the repository; the runs' folder */

/* The file a word of a command names: W/x is x in the runs' folder (W: the folder), a
 * relative path with a '/' (build/train) is in the repository; any other word is itself.
 * Returns word or buf (PATHLEN bytes). */
static const char *real(const char *word, char *buf)
{
    if (word[0] == 'W' && (word[1] == '/' || word[1] == 0))
        snprintf(buf, PATHLEN, "%s%s", wdir, word + 1);
    else if (strchr(word, '/') != NULL && word[0] != '/' && word[0] != '.')
        snprintf(buf, PATHLEN, "%s%s", root, word);
    else
        return word;
    return buf;
}

/* Runs line, a command as the lesson prints it (words split at spaces, no quotes, each
 * through real()): VAR=VALUE words, the program and its words, >OUT 2>ERR </dev/null,
 * with MPIEXEC_TIMEOUT=limit (dt_run_child: the environment a nested mpiexec needs).
 * Returns its exit status, 128 + a signal, or -1 (errno) when it could not start. */
static int launch(const char *line, int limit)
{
    static char words[8192], path[50][PATHLEN], timeout[32];
    const char *argv[48], *add[8], *out = NULL, *err = NULL;
    int n = 0, k = 0;
    snprintf(timeout, sizeof timeout, "MPIEXEC_TIMEOUT=%d", limit);
    add[k++] = timeout;
    snprintf(words, sizeof words, "%s", line);
    for (char *w = strtok(words, " "); w != NULL && n < 47; w = strtok(NULL, " ")) {
        if (n == 0 && strchr(w, '=') != NULL && k < 7)
            add[k++] = w;
        else if (strncmp(w, "2>", 2) == 0)
            err = real(w + 2, path[48]);
        else if (w[0] == '>')
            out = real(w + 1, path[49]);
        else if (w[0] != '<')                           /* stdin is /dev/null */
            argv[n] = real(w, path[n]), n++;
    }
    argv[n] = NULL;
    add[k] = NULL;
    return dt_run_child(argv, add, out, err);
}

/* Whether run i (1: never stopped, 2: elastic), prog, failed (rc, else why): if so one
 * sentence, with the first line it wrote on stderr (W/err), and the lesson stops. */
static int failed(int i, const char *prog, int rc, const char *why, const char *err)
{
    char what[200], line[200] = "", path[PATHLEN];
    if (rc == 0 && why == NULL)
        return 0;
    if (rc < 0)
        snprintf(what, sizeof what, "could not start %s: %s", prog, strerror(errno));
    else if (rc > 0 || why == NULL)
        snprintf(what, sizeof what, "%s ended with exit %d", prog, rc);
    else
        snprintf(what, sizeof what, "%s %s", prog, why);
    FILE *f = rc >= 0 ? fopen(real(err, path), "r") : NULL;
    if (f != NULL && fgets(line, sizeof line, f) != NULL)
        line[strcspn(line, "\n")] = 0;
    if (f != NULL)
        fclose(f);
    printf("\n25_elastic: run %d: %s%s%s%s, so the lesson stops here.\n", i, what, *line ?
           " (its stderr: \"" : "", line, *line ? "\")" : "");
    return 1;
}

/* Prints lead, then text with the repository's paths from its root and the runs'
 * folder as W. */
static void show(const char *lead, const char *p)
{
    fputs(lead, stdout);
    while (*p != 0) {
        if (strncmp(p, wdir, strlen(wdir)) == 0) {
            putchar('W');
            p += strlen(wdir);
        } else if (strncmp(p, root, strlen(root)) == 0) {
            p += strlen(root);
        } else {
            putchar(*p++);
        }
    }
}

/* Reads what a run printed, W/name, into o (train keeps a line within 80 columns; those
 * read here are shorter, never wrapped). */
static void parse(const char *name, int S, outcome *o)
{
    char line[1024], path[PATHLEN];
    FILE *f = fopen(real(name, path), "r");
    memset(o, 0, sizeof *o);
    for (int s = 0; s <= MAXS; s++)
        o->loss[0][s] = o->loss[1][s] = NAN;
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        int s, r, k;
        double x;
        long long b, st;
        if (sscanf(line, "train: %*s on %d rank%*[s,] MLP %*s %*s %lld", &r, &o->params) >= 1 &&
            o->jobs < 2)
            o->ranks[o->jobs++] = r;                    /* a job starts */
        if (sscanf(line, "step %d loss %lf", &s, &x) == 2 && o->jobs > 0 && s >= 1 && s <= S)
            o->loss[o->jobs - 1][s] = x;
        if (sscanf(line, "checkpoint: rank %d read %lld bytes from %d shard%*[s;] its state "
                   "is %lld", &r, &b, &k, &st) == 4 && r >= 0 && r < MAXR) {
            o->read[r] = b;
            o->shards[r] = k;
            o->state[r] = st;
        }
    }
    if (f != NULL)
        fclose(f);
}

/* Rank 0: the two runs, the table, the checks. Returns 1 when every check passed. */
static int run_lesson(const lesson *L)
{
    /* ==== setup: train beside lessons/, scripts/ in the repository, the runs' folder ==== */
    char build[PATH_MAX] = "./build/lessons/25_elastic", train[PATHLEN], script[PATHLEN],
         targs[256], cmd[2][1024], path[PATHLEN];
    ssize_t n = readlink("/proc/self/exe", build, sizeof build - 1);
    if (n > 0)
        build[n] = 0;
    *strrchr(build, '/') = 0;                           /* ROOT/BUILD/lessons */
    *strrchr(build, '/') = 0;                           /* ROOT/BUILD */
    snprintf(root, sizeof root, "%s", build);
    strrchr(root, '/')[1] = 0;                          /* ROOT/ */
    snprintf(train, sizeof train, "%s/train", build);
    snprintf(script, sizeof script, "%sscripts/elastic.sh", root);
    if (access(train, X_OK) != 0 || access(script, X_OK) != 0) {
        printf("25_elastic: %s or %s is missing (build with make; run the lesson from "
               "build/lessons)\n", train, script);
        return 0;
    }
    snprintf(wdir, sizeof wdir, "%s/dtlab-elastic.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR")
             : "/tmp");
    if (L->keep != NULL)
        snprintf(wdir, sizeof wdir, "%s", L->keep);
    int made = L->keep ? mkdir(wdir, 0755) == 0 || errno == EEXIST : mkdtemp(wdir) != NULL;
    DT_REQUIRE(made, "cannot make the folder %s: %s", wdir, strerror(errno));
    int limit = 240, tl = getenv("MPIEXEC_TIMEOUT") ? atoi(getenv("MPIEXEC_TIMEOUT")) : 0;
    if (tl > 0)                                         /* both runs, with 5 s to spare */
        limit = tl > 10 ? tl - 5 : tl;

    /* ==== the two commands, as the lesson prints and runs them (W: the runs' folder) ==== */
    int B = L->N * (L->N - 1);                  /* a batch that N and N-1 ranks split evenly: */
    B *= (24 + B - 1) / B;                      /* 24, or the next multiple of N(N-1) */
    snprintf(targs, sizeof targs, "%s/train --mode %s --steps %d --hidden 16 --layers 3 "
             "--examples 200 --batch %d --device %s%s", build + strlen(root), L->mode, L->S,
             B, dt_device() == DT_CUDA ? "cuda" : "cpu", L->adam ? " --optim adam --lr 0.01" : "");
    snprintf(cmd[0], sizeof cmd[0], "%s -n %d %s --dump W/full.f32 >W/full.out 2>W/full.err "
             "</dev/null", getenv("MPIEXEC") ? getenv("MPIEXEC") : "mpiexec", L->N, targs);
    snprintf(cmd[1], sizeof cmd[1], "DT_TEST_KILL=%d:%d scripts/elastic.sh -n %d --min %d "
             "--max-restarts 1%s -- %s --every %d --checkpoint W/ck --dump W/elastic.f32 "
             ">W/elastic.out 2>W/elastic.err </dev/null", L->R, L->K, L->N, L->M,
             L->replace ? " --replace" : "", targs, L->E);

    /* ==== the idea, and the two runs ==== */
    printf("\nThe same training twice, %s on %d ranks: once never stopped, once with rank "
           "%d\nkilled at the end of step %d (SIGKILL: no word, no clean-up, as a lost "
           "node).\nThen scripts/elastic.sh starts the job again from the last checkpoint "
           "(every\n%d steps) on %d ranks: %s,\nas torchrun --nnodes %d:%d "
           "--max-restarts 1 would.\n\n1. %s", L->mode, L->N, L->R, L->K, L->E,
           L->replace ? L->N : L->N - 1, L->replace ? "a new node takes the lost rank's "
           "place" : "the ranks that remain", L->M, L->N, cmd[0]);
    const char *mpiexec = getenv("MPIEXEC") ? getenv("MPIEXEC") : "mpiexec";
    double t0 = MPI_Wtime();
    int rc1 = launch(cmd[0], limit), left = limit - (int)(MPI_Wtime() - t0), rc2 = -1, ok = 0;
    outcome a, b;
    parse("W/full.out", L->S, &a);
    if (failed(1, mpiexec, rc1, a.jobs ? NULL : "printed no training", "W/full.err"))
        goto teardown;                          /* nothing to compare the elastic job with */
    printf("\n   exit %d\n2. %s\n   (W: the runs' folder)\n", rc1, cmd[1]);
    rc2 = launch(cmd[1], left > 5 ? left : 5);
    printf("   exit %d; what it said on stderr:\n", rc2);
    FILE *e = fopen(real("W/elastic.err", path), "r");
    char line[1024];
    while (e != NULL && fgets(line, sizeof line, e) != NULL) {
        if (strncmp(line, "elastic.sh:", 11) == 0 || strncmp(line, "dtlab: rank", 11) == 0 ||
            strncmp(line, "DT_TEST_KILL", 12) == 0 || strncmp(line, "train:", 6) == 0)
            show("     ", line);
    }
    if (e != NULL)
        fclose(e);
    parse("W/elastic.out", L->S, &b);
    if (failed(2, "scripts/elastic.sh", rc2, b.jobs == 2 ? NULL : b.jobs ? "never started "
               "the job again" : "printed no training", "W/elastic.err"))
        goto teardown;

    /* ==== the numbers: the losses side by side ==== */
    int N = L->N, M = b.jobs == 2 ? b.ranks[1] : 0, from = 0, twice = 0;
    for (int s = 1; s <= L->S && M > 0 && isnan(b.loss[1][s]); s++)
        from = s;                                   /* the checkpoint it resumed from */
    printf("\nLoss per step: never stopped, and the elastic job's, on %d ranks, then %d\n"
           "  step  never stopped  |  %2d ranks  %2d ranks  |  difference\n", N, M, N, M);
    double dmax = 0;
    for (int s = 1; s <= L->S; s++) {
        double x = a.loss[0][s], y = b.loss[0][s], z = b.loss[1][s];
        double d = fabs((isnan(z) ? y : z) - x) / fabs(x);
        char c[2][16] = {"", ""};
        if (!isnan(y))
            snprintf(c[0], sizeof c[0], "%.6f", y);
        if (!isnan(z))
            snprintf(c[1], sizeof c[1], "%.6f", z);
        dmax = isnan(d) ? INFINITY : fmax(dmax, d);
        twice += !isnan(y) && !isnan(z);
        printf("  %4d  %13.6f  |  %8s  %8s  |  %10.2g%s\n", s, x, c[0], c[1], d,
               !isnan(y) && !isnan(z) ? "  trained twice" : "");
    }
    if (from > 0)
        printf("The %d step%s after the checkpoint of step %d died with the rank and %s "
               "trained\nagain: the price of a checkpoint every %d steps.\n", twice,
               twice == 1 ? "" : "s", from, twice == 1 ? "was" : "were", L->E);
    else
        printf("No checkpoint was complete when the rank died (the first is at step %d): "
               "the job\nstarted again from step 1 and trained its %d steps again.\n",
               L->E, twice);

    /* ==== the numbers: the bytes each rank read at the resume ==== */
    int S = L->adam ? 2 : 1, fsdp = strcmp(L->mode, "fsdp") == 0, any = 0;
    double state = 4.0 * (1 + S) * (double)a.params, old = state / (fsdp ? N : 1);
    char from_what[80] = "rank 0's old shard, all of it,";
    if (fsdp)
        snprintf(from_what, sizeof from_what, "the N = %d old shards, each", N);
    int recut = from > 0 && M != N;     /* nothing re-cut: say why, not a table of 0s */
    if (!recut)
        printf(from == 0 ? "\nNothing was read at the restart: there was no checkpoint.\n"
               : "\nWith --replace the job came back on the same %d ranks, the layout that "
               "wrote the\ncheckpoint: each rank read its own shard, whole, and nothing "
               "was resharded.\n", N);
    else
        printf("\nAt the resume each of the M = %d ranks rebuilt its part of the state,\n%s "
               "(S = %d: %s; Psi = %lld weights),\nfrom %s (1+S) Psi%s x 4 = %.0f bytes. "
               "In bytes:\n  rank     read  old shards  k x shard   its part  (1+S) Psi%s "
               "x 4\n", M, fsdp ? "(1+S) Psi / M floats in fsdp" : "all (1+S) Psi floats "
               "in ddp", S, L->adam ? "Adam's two moments" : "SGD's momentum", a.params,
               from_what, fsdp ? " / N" : "", old, fsdp ? " / M" : "");
    for (int r = 0; recut && r < M && r < MAXR; r++) {
        int k = fsdp ? ((r + 1) * N + M - 1) / M - r * N / M : 1;  /* old shards it touches */
        printf("  %4d  %7lld  %10d  %2d x %-6.0f  %8lld  %17.0f\n", r, b.read[r],
               b.shards[r], k, old, b.state[r], state / (fsdp ? M : 1));
        any = any || b.read[r] > 0;
    }
    if (recut && !any)
        printf("  (train printed no bytes read per rank: did it reshard?)\n");
    else if (recut && fsdp)
        printf("k: the old shards rank r's slice touches, ceil((r+1)N/M) - floor(rN/M). The "
               "slice\nbegins and ends inside old shards, and a shard's CRC-32 covers its "
               "whole file, so\na rank reads each of them whole, checks it, and keeps its "
               "part (train pads each\nlayer to a multiple of the ranks); rank 0 also reads "
               "the run's own state (the\nstep, the losses so far).\n");
    else if (recut)
        printf("Every rank reads rank 0's shard, whole; rank 0's also holds the run's own "
               "state.\n");

    /* ==== the checks: the run, the losses, the weights train dumped ==== */
    static float w[2][MAXW];
    const char *dump[2] = {"W/full.f32", "W/elastic.f32"};
    long nw[2];
    for (int i = 0; i < 2; i++) {
        FILE *d = fopen(real(dump[i], path), "rb");
        nw[i] = d != NULL ? (long)fread(w[i], sizeof(float), MAXW, d) : -1;
        if (d != NULL)
            fclose(d);
    }
    double wmax = nw[0] > 0 && nw[0] == nw[1] ? 0 : INFINITY, tol = L->replace ? 0 : 1e-5;
    for (long i = 0; i < nw[0] && nw[0] == nw[1]; i++)
        wmax = fmax(wmax, fabs((double)w[0][i] - w[1][i]) / (1 + fabs(w[0][i])));
    const char *lim = L->replace ? "0, bit for bit" : "1e-5";
    int ok_run = rc1 == 0 && rc2 == 0 && M == (L->replace ? N : N - 1);
    int ok_loss = dmax <= tol, ok_w = wmax <= tol;
    printf("\ncheck: lost rank %d, finished on %d ranks from step %d (exits %d, %d): %s\n",
           L->R, M, from, rc2, rc1, ok_run ? "PASS" : "FAIL");
    printf("check: losses as printed, largest relative difference %.3g (limit %s): %s\n",
           dmax, lim, ok_loss ? "PASS" : "FAIL");
    if (nw[0] > 0 && nw[0] == nw[1])
        printf("check: %ld weights, largest difference %.3g x (1 + |w|) (limit %s): %s\n",
               nw[0], wmax, lim, ok_w ? "PASS" : "FAIL");
    else
        printf("check: the runs dumped %ld and %ld weights: FAIL\n", nw[0], nw[1]);
    if (!L->replace)
        printf("(%d ranks add the gradients in another order than %d: the same sums, "
               "rounded\ndifferently. With --replace they are equal bit for bit.)\n", N - 1, N);
    printf("The runs' files: %s\nThe code: scripts/elastic.sh, lib/parallel/checkpoint.c "
           "(dti_ckpt_start), lib/parallel/checkpoint_reshard.c (ck_reshard), "
           "lib/parallel/books.c (dti_step_end)\n", L->keep ? L->keep : "removed (--keep DIR "
           "keeps them)");

    ok = ok_run && ok_loss && ok_w;

teardown:
    if (L->keep == NULL)
        launch("rm -rf W", limit);
    return ok;
}

int main(int argc, char **argv)
{
    /* ==== setup: the options ==== */
    dt_init(&argc, &argv);
    lesson L = {.N = 4, .M = -1, .S = 12, .E = 3, .R = 1, .K = 8, .mode = "fsdp"};
    int *number[128] = {['n'] = &L.N, ['m'] = &L.M, ['s'] = &L.S, ['e'] = &L.E,
                        ['r'] = &L.R, ['k'] = &L.K};
    const struct option lo[] = {{"min", 1, NULL, 'm'}, {"replace", 0, &L.replace, 1},
        {"steps", 1, NULL, 's'}, {"every", 1, NULL, 'e'}, {"kill-rank", 1, NULL, 'r'},
        {"kill-step", 1, NULL, 'k'}, {"mode", 1, NULL, 'o'}, {"adam", 0, &L.adam, 1},
        {"keep", 1, NULL, 'd'}, {"help", 0, NULL, 'h'}, DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    char why[200] = "";
    opterr = 0;                                 /* dt_usage_error speaks, on rank 0 */
    while (*why == 0) {
        int li = -1, opt = getopt_long(argc, argv, ":hn:", lo, &li);
        if (opt == -1)
            break;
        if (opt == 'h')
            dt_usage_help(usage);
        if (opt == 'o')
            L.mode = optarg;
        if (opt == 'd')
            L.keep = optarg;
        if (opt == ':' || opt == '?')                       /* no value, or unknown */
            dt_bad_option(opt, argv, why, sizeof why);
        if (opt > 0 && opt < 128 && number[opt] && dt_parse_int(optarg, 0, 100000, number[opt]))
            snprintf(why, sizeof why, "%s%s wants a whole number, not '%.40s'",
                     li < 0 ? "-" : "--", li < 0 ? "n" : lo[li].name, optarg);
    }
    L.M = L.M < 0 ? L.N - 1 : L.M;             /* --min: N-1 unless given */
#define REFUSE(cond, ...) if (*why == 0 && (cond)) snprintf(why, sizeof why, __VA_ARGS__)
    REFUSE(optind < argc, "unexpected argument '%.40s'", argv[optind]);
    REFUSE(L.N < 2 || L.N > MAXR, "-n must be 2 to %d ranks (one to lose), not %d", MAXR, L.N);
    REFUSE(L.S < 2 || L.S > MAXS, "--steps must be 2 to %d, not %d", MAXS, L.S);
    REFUSE(L.E < 1 || L.E > L.S, "--every must be 1 to --steps (%d), not %d", L.S, L.E);
    REFUSE(L.K < 1 || L.K > L.S, "--kill-step must be 1 to --steps (%d), not %d", L.S, L.K);
    REFUSE(L.R >= L.N, "--kill-rank must be a rank, 0 to %d, not %d", L.N - 1, L.R);
    REFUSE(L.M < 1 || L.M > L.N, "--min must be 1 to -n (%d), not %d", L.N, L.M);
    REFUSE(L.M == L.N && !L.replace, "--min %d: a job that may not lose a rank gives up at "
           "the first loss (add --replace, or lower --min)", L.M);
    REFUSE(strcmp(L.mode, "fsdp") != 0 && strcmp(L.mode, "ddp") != 0, "--mode must be fsdp "
           "or ddp, not '%.40s'", L.mode);
    if (*why != 0)
        dt_usage_error(usage, why);
    dt_check_output("--keep", L.keep, 1);
    int used = 0;                               /* --keep: a new or empty folder */
    DIR *d = L.keep != NULL && dt_rank() == 0 ? opendir(L.keep) : NULL;
    for (struct dirent *x = d ? readdir(d) : NULL; x != NULL; x = readdir(d))
        used = used || (strcmp(x->d_name, ".") != 0 && strcmp(x->d_name, "..") != 0);
    if (d != NULL)
        closedir(d);
    DT_CHECK_MPI(MPI_Bcast(&used, 1, MPI_INT, 0, MPI_COMM_WORLD));
    REFUSE(used, "--keep %.60s: the folder is not empty (the script would resume what it "
           "holds)", L.keep);
    if (*why != 0)
        dt_usage_error(usage, why);
    dt_print_devices();

    /* ==== the lesson, on rank 0; the others wait without taking a core ==== */
    int ok = dt_rank() == 0 ? run_lesson(&L) : 0;
    MPI_Request q;
    DT_CHECK_MPI(MPI_Ibcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD, &q));
    for (int done = 0; MPI_Test(&q, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;)
        nanosleep(&(struct timespec){0, 20000000}, NULL);

    /* ==== teardown ==== */
    dt_finalize();
    return ok ? 0 : 1;
}
