/* Lesson 25: elastic training: a rank lost, and the job going on without it.
 *
 * What it teaches: a node can vanish mid-run (a hardware fault, a preempted machine, the
 * out-of-memory killer). A synchronous job cannot step without it, so the launcher ends
 * the job; what saves the work is a checkpoint, and an agent that starts the job again.
 * torchrun is such an agent:
 *
 *     torchrun --nnodes 2:4 --nproc-per-node 1 --max-restarts 3 train.py
 *
 * starts when 2 to 4 nodes meet at its rendezvous; when a worker fails it stops the
 * others, the nodes that remain meet again (a new world size, new ranks), and train.py
 * loads the last checkpoint, resharded for them. dtlab's agent is scripts/elastic.sh:
 * it runs mpiexec, and when a rank dies it starts the job again from DIR/latest on one
 * rank fewer (--replace: as many), down to --min. The lesson trains twice, never
 * stopped and with a rank killed (the test hook DT_TEST_KILL=R:K), and shows the same
 * losses and weights to rounding, the steps trained twice, and the bytes each rank read:
 *
 *     4 ranks  1 2 3 [3] 4 5 6 [6] 7 8 x      rank 1 killed at the end of step 8
 *     3 ranks                      7 8 9 [9] 10 11 12 [12]     resumed from [6]
 *
 * fsdp's M ranks each hold (1+S) Psi / M floats of weights and optimizer state (S = 1
 * for SGD with momentum, 2 for Adam); ddp's ranks all of (1+S) Psi. A new rank's slice
 * of fsdp's state starts and ends inside old shards, and an old shard's CRC covers its
 * whole file: so a rank reads every old shard its slice touches, whole, and checks it.
 *
 * The code: scripts/elastic.sh, lib/parallel/checkpoint.c (dti_ckpt_start),
 * lib/parallel/checkpoint_reshard.c (ck_reshard), lib/parallel/run.c (dti_step_end:
 * DT_TEST_KILL).
 *
 * Run:  build/lessons/25_elastic
 *       build/lessons/25_elastic -n 5 --min 3 --kill-rank 0 --kill-step 7 --mode ddp
 *       build/lessons/25_elastic --replace --keep elastic-run
 * It starts mpiexec itself; under mpiexec, rank 0 does it all and the others wait.
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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "dt.h"

extern char **environ;

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
    "  --keep DIR          the runs' files into DIR, a new or empty folder (default:\n"
    "                      a temporary folder, removed at the end)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { MAXS = 200, MAXR = 16, MAXW = 1 << 16 };

/* What a run printed: the loss of each step per job (a "train:" line starts a job),
 * each job's ranks, and from the summary the bytes each rank read at the resume. */
typedef struct { double loss[2][MAXS + 1]; int jobs, ranks[2], shards[MAXR]; long long
                 params, read[MAXR], state[MAXR]; } outcome;
typedef struct { int N, M, replace, S, E, R, K, adam; const char *mode, *keep; } lesson;

/* Runs the shell command cmd under MPIEXEC_TIMEOUT=limit. Returns its exit status, or
 * 128 + the signal that ended it. */
static int launch(const char *cmd, int limit)
{
    char t[16];
    snprintf(t, sizeof t, "%d", limit);
    setenv("MPIEXEC_TIMEOUT", t, 1);
    fflush(stdout);
    int st = system(cmd);
    return st == -1 ? 127 : WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Removes from the environment what mpiexec gave this process (a nested mpiexec would
 * take it for its own), the test hooks and DT_TRACE: the runs this lesson starts get
 * their own. */
static void clean_env(void)
{
    static const char *drop[] = {"PMI_", "PMIX_", "HYDI_", "HYDRA_", "MPI_LOCAL", "DT_TEST_",
                                 "DT_TRACE=", "MPIR_CVAR_CH3_INTERFACE"};
    for (char **e = environ; *e; e++)
        for (size_t d = 0; d < sizeof drop / sizeof *drop; d++)
            if (!strncmp(*e, drop[d], strlen(drop[d]))) {
                char name[128];
                snprintf(name, sizeof name, "%.*s", (int)strcspn(*e, "="), *e);
                unsetenv(name);
                e = environ - 1;                /* environ changed: from the start */
                break;
            }
}

/* s quoted for the shell where it needs it (one of 4 buffers, reused in turn). */
static const char *q(const char *s)
{
    static char buf[4][4 * PATH_MAX + 3];
    static int i;
    char *o = buf[i++ % 4], *p = o;
    if (strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=+-")
        == strlen(s) && *s)
        return s;
    for (*p++ = '\''; *s && p < o + 4 * PATH_MAX - 2; s++)
        p = *s == '\'' ? stpcpy(p, "'\\''") : (*p = *s, p + 1);
    return strcpy(p, "'"), o;
}

/* Reads a run's stdout into o (train's summary unwrapped first: a long line goes on
 * after a newline and 4 spaces). */
static void parse(const char *path, int S, outcome *o)
{
    static char text[1 << 20];
    memset(o, 0, sizeof *o);
    for (int s = 0; s <= MAXS; s++)
        o->loss[0][s] = o->loss[1][s] = NAN;
    FILE *f = fopen(path, "r");
    text[f ? fread(text, 1, sizeof text - 1, f) : 0] = 0;
    if (f)
        fclose(f);
    for (char *p = text; (p = strstr(p, "\n    ")) != NULL;)
        memmove(p, p + 4, strlen(p + 4) + 1), *p = ' ';
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        int s, r, j = o->jobs - 1;
        double x;
        long long b;
        char *p = strstr(line, " parameters");
        if (sscanf(line, "train: %*s on %d rank", &r) == 1 && o->jobs < 2)
            o->ranks[o->jobs++] = r;
        while (p && p > line && p[-1] >= '0' && p[-1] <= '9')
            o->params = atoll(--p);
        if (j >= 0 && sscanf(line, "step %d loss %lf", &s, &x) == 2 && s >= 1 && s <= S)
            o->loss[j][s] = x;
        for (p = strstr(line, "rank "); p; p = strstr(p + 5, "rank "))
            if (sscanf(p, "rank %d read %lld bytes from %d", &r, &b, &s) >= 2 && r >= 0 &&
                r < MAXR && strstr(p, "its state is "))
                o->read[r] = b, o->shards[r] = s,
                o->state[r] = atoll(strstr(p, "its state is ") + 13);
    }
}

/* Prints text with the repository's paths from its root and the runs' folder as W. */
static void show(const char *text, const char *root, const char *w)
{
    for (const char *p = text; *p; p++)
        if (!strncmp(p, w, strlen(w)))
            printf("W"), p += strlen(w) - 1;
        else if (!strncmp(p, root, strlen(root)))
            p += strlen(root) - 1;
        else
            putchar(*p);
}

/* Rank 0: the two runs, the table, the checks. Returns 1 when every check passed. */
static int run_lesson(const lesson *L)
{
    /* ==== setup: train and the script from this program's path, the runs' folder ==== */
    char bin[PATH_MAX] = "./build/lessons/25_elastic", root[PATH_MAX], w[PATH_MAX],
         train[PATH_MAX + 8], script[PATH_MAX + 32], f[7][PATH_MAX + 16], cmd[2][8192];
    ssize_t n = readlink("/proc/self/exe", bin, sizeof bin - 1);
    bin[n > 0 ? n : (ssize_t)strlen(bin)] = 0;
    *strrchr(bin, '/') = 0, *strrchr(bin, '/') = 0;             /* ROOT/build */
    snprintf(root, sizeof root, "%s", bin);
    strrchr(root, '/')[1] = 0;                                  /* ROOT/ */
    snprintf(train, sizeof train, "%s/train", bin);
    snprintf(script, sizeof script, "%sscripts/elastic.sh", root);
    if (access(train, X_OK) || access(script, X_OK))
        return printf("25_elastic: %s or %s is missing (build with make; run the lesson "
                      "from build/lessons)\n", train, script), 0;
    snprintf(w, sizeof w, L->keep ? "%s" : "%s/dtlab-elastic.XXXXXX", L->keep ? L->keep :
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    DT_REQUIRE(L->keep ? mkdir(w, 0755) == 0 || errno == EEXIST : mkdtemp(w) != NULL,
               "cannot make the folder %s: %s", w, strerror(errno));
    const char *name[7] = {"full.out", "full.err", "elastic.out", "elastic.err",
                           "full.f32", "elastic.f32", "ck"};
    for (int i = 0; i < 7; i++)
        snprintf(f[i], sizeof f[i], "%s/%s", w, name[i]);
    const char *tl = getenv("MPIEXEC_TIMEOUT"), *mpiexec = getenv("MPIEXEC");
    int limit = tl && atoi(tl) > 0 ? atoi(tl) - (atoi(tl) > 10 ? 5 : 0) : 240, S = L->S,
        B = L->N * (L->N - 1);
    char targs[256];
    B *= (24 + B - 1) / B;                      /* 24, or a multiple of N and N-1 */
    clean_env();
    snprintf(targs, sizeof targs, " --mode %s --steps %d --hidden 16 --layers 3 --examples"
             " 200 --batch %d --device %s%s", L->mode, S, B, dt_device() == DT_CUDA ?
             "cuda" : "cpu", L->adam ? " --optim adam --lr 0.01" : "");
    snprintf(cmd[0], sizeof cmd[0], "%s -n %d %s%s --dump %s >%s 2>%s </dev/null",
             q(mpiexec ? mpiexec : "mpiexec"), L->N, q(train), targs, q(f[4]), q(f[0]),
             q(f[1]));                          /* never stopped */
    snprintf(cmd[1], sizeof cmd[1], "DT_TEST_KILL=%d:%d %s -n %d --min %d --max-restarts "
             "1%s -- %s%s --every %d --checkpoint %s --dump %s >%s 2>%s </dev/null", L->R,
             L->K, q(script), L->N, L->M, L->replace ? " --replace" : "", q(train), targs,
             L->E, q(f[6]), q(f[5]), q(f[2]), q(f[3]));   /* elastic */

    /* ==== the idea, and the two runs ==== */
    printf("\nThe same training twice, %s on %d ranks: once never stopped, once with rank "
           "%d\nkilled at the end of step %d (SIGKILL: no word, no clean-up, as a lost "
           "node).\nThen scripts/elastic.sh starts the job again from the last checkpoint "
           "(every\n%d steps) on %d ranks: %s,\nas torchrun --nnodes %d:%d "
           "--max-restarts 1 would.\n\n1. ", L->mode, L->N, L->R, L->K, L->E, L->replace ?
           L->N : L->N - 1, L->replace ? "a new node takes the lost rank's place" :
           "the ranks that remain", L->M, L->N);
    show(cmd[0], root, w);
    double t0 = MPI_Wtime();
    int rc1 = launch(cmd[0], limit), left = limit - (int)(MPI_Wtime() - t0);
    printf("\n   exit %d\n2. ", rc1);
    show(cmd[1], root, w);
    printf("\n   (W: the runs' folder)\n");
    int rc2 = launch(cmd[1], left > 5 ? left : 5);
    printf("   exit %d; what it said on stderr:\n", rc2);
    FILE *e = fopen(f[3], "r");
    for (char line[512]; e && fgets(line, sizeof line, e);)
        if (!strncmp(line, "elastic.sh:", 11) || !strncmp(line, "dtlab: rank", 11) ||
            !strncmp(line, "DT_TEST_KILL", 12) || !strncmp(line, "train:", 6))
            printf("     "), show(line, root, w);
    if (e)
        fclose(e);

    /* ==== the numbers: the losses side by side ==== */
    outcome a, b;
    parse(f[0], S, &a);
    parse(f[2], S, &b);
    int from = 0, twice = 0, M = b.jobs == 2 ? b.ranks[1] : 0;
    for (int s = 1; s <= S && M && isnan(b.loss[1][s]); s++)
        from = s;                               /* the checkpoint it resumed from */
    printf("\nLoss per step: never stopped, and the elastic job's, on %d ranks, then %d\n"
           "  step  never stopped  |  %2d ranks  %2d ranks  |  difference\n", L->N, M,
           L->N, M);
    double dmax = 0;
    for (int s = 1; s <= S; s++) {
        double x = a.loss[0][s], y = b.loss[0][s], z = b.loss[1][s];
        double d = fabs((isnan(z) ? y : z) - x) / fabs(x);
        char c[2][16] = {"", ""};
        if (!isnan(y))
            snprintf(c[0], 16, "%.6f", y);
        if (!isnan(z))
            snprintf(c[1], 16, "%.6f", z);
        dmax = isnan(d) ? INFINITY : fmax(dmax, d);
        twice += !isnan(y) && !isnan(z);
        printf("  %4d  %13.6f  |  %8s  %8s  |  %10.2g%s\n", s, x, c[0], c[1], d,
               !isnan(y) && !isnan(z) ? "  trained twice" : "");
    }
    printf("The %d step%s after the checkpoint of step %d died with the rank and %s "
           "trained\nagain: the price of a checkpoint every %d steps.\n", twice,
           twice == 1 ? "" : "s", from, twice == 1 ? "was" : "were", L->E);

    /* ==== the numbers: the bytes each rank read at the resume ==== */
    int St = L->adam ? 2 : 1, fsdp = !strcmp(L->mode, "fsdp"), N = L->N, any = 0;
    double state = 4.0 * (1 + St) * (double)a.params, old = state / (fsdp ? N : 1);
    char from_what[80] = "rank 0's old shard, all of it,";
    if (fsdp)
        snprintf(from_what, sizeof from_what, "the N = %d old shards, each", N);
    printf("\nAt the resume each of the M = %d ranks rebuilt its part of the state,\n%s "
           "(S = %d: %s; Psi = %lld weights),\nfrom %s (1+S) Psi%s x 4 = %.0f bytes. "
           "In bytes:\n  rank     read  old shards  k x shard   its part  (1+S) Psi%s x "
           "4\n", M, fsdp ? "(1+S) Psi / M floats in fsdp" : "all (1+S) Psi floats in ddp",
           St, L->adam ? "Adam's two moments" : "SGD's momentum", a.params, from_what,
           fsdp ? " / N" : "", old, fsdp ? " / M" : "");
    for (int r = 0; r < M && r < MAXR; r++, any |= b.read[r - 1] > 0) {
        int k = fsdp ? (int)((r + 1LL) * N + M - 1) / M - (int)((long long)r * N / M) : 1;
        printf("  %4d  %7lld  %10d  %2d x %-6.0f  %8lld  %17.0f\n", r, b.read[r],
               b.shards[r], k, old, b.state[r], state / (fsdp ? M : 1));
    }
    printf("%s", !any ? "  (train printed no bytes read per rank: did it reshard?)\n" :
           fsdp ? "k: the old shards rank r's slice touches, ceil((r+1)N/M) - floor(rN/M)"
           ". The slice\nbegins and ends inside old shards, and a shard's CRC-32 covers "
           "its whole file, so\na rank reads each of them whole, checks it, and keeps its "
           "part (train pads each\nlayer to a multiple of the ranks); rank 0 also reads "
           "the run's own state (the\nstep, the losses so far).\n" : "Every rank reads "
           "rank 0's shard, whole; rank 0's also holds the run's own state.\n");

    /* ==== the checks ==== */
    static float wt[2][MAXW];
    long nw[2];
    for (int i = 0; i < 2; i++) {
        FILE *d = fopen(f[4 + i], "rb");
        nw[i] = d ? (long)fread(wt[i], sizeof(float), MAXW, d) : -1;
        if (d)
            fclose(d);
    }
    double wmax = nw[0] > 0 && nw[0] == nw[1] ? 0 : INFINITY, tol = L->replace ? 0 : 1e-5;
    for (long i = 0; i < nw[0] && nw[0] == nw[1]; i++)
        wmax = fmax(wmax, fabs((double)wt[0][i] - wt[1][i]) / (1 + fabs(wt[0][i])));
    int ok_run = rc1 == 0 && rc2 == 0 && M == (L->replace ? L->N : L->N - 1);
    int ok_loss = dmax <= tol, ok_w = wmax <= tol;
    printf("\ncheck: lost rank %d, finished on %d ranks from step %d (exits %d, %d): %s\n",
           L->R, M, from, rc2, rc1, ok_run ? "PASS" : "FAIL");
    printf("check: losses as printed, largest relative difference %.3g (limit %s): %s\n",
           dmax, L->replace ? "0, bit for bit" : "1e-5", ok_loss ? "PASS" : "FAIL");
    printf("check: %ld weights, largest difference %.3g x (1 + |w|) (limit %s): %s\n",
           nw[0], wmax, L->replace ? "0, bit for bit" : "1e-5", ok_w ? "PASS" : "FAIL");
    if (!L->replace)
        printf("(%d ranks add the gradients in another order than %d: the same sums, "
               "rounded\ndifferently. With --replace they are equal bit for bit.)\n",
               L->N - 1, L->N);
    printf("The runs' files: %s\nThe code: scripts/elastic.sh, lib/parallel/checkpoint.c "
           "(dti_ckpt_start), lib/parallel/checkpoint_reshard.c (ck_reshard), "
           "lib/parallel/run.c (dti_step_end)\n", L->keep ? L->keep : "removed (--keep DIR "
           "keeps them)");
    fflush(stdout);

    /* ==== teardown ==== */
    if (!L->keep && snprintf(cmd[0], sizeof cmd[0], "rm -rf %s", q(w)) > 0)
        launch(cmd[0], limit);
    return ok_run && ok_loss && ok_w;
}

int main(int argc, char **argv)
{
    /* ==== setup: the options ==== */
    dt_init(&argc, &argv);
    lesson L = {.N = 4, .M = -1, .S = 12, .E = 3, .R = 1, .K = 8, .mode = "fsdp"};
    char why[200] = "";
    static const struct option lo[] = {{"min", 1, NULL, 'm'}, {"replace", 0, NULL, 'p'},
        {"steps", 1, NULL, 's'}, {"every", 1, NULL, 'e'}, {"kill-rank", 1, NULL, 'r'},
        {"kill-step", 1, NULL, 'k'}, {"mode", 1, NULL, 'o'}, {"adam", 0, NULL, 'a'},
        {"keep", 1, NULL, 'd'}, {"help", 0, NULL, 'h'}, DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    opterr = 0;                                 /* dt_usage_error speaks, on rank 0 */
    for (int opt, li = -1; !*why && (opt = getopt_long(argc, argv, ":hn:", lo, &li)) != -1;
         li = -1) {
        int *v = opt == 'n' ? &L.N : opt == 'm' ? &L.M : opt == 's' ? &L.S : opt == 'e' ?
                 &L.E : opt == 'r' ? &L.R : opt == 'k' ? &L.K : NULL;
        if (v && dt_parse_int(optarg, 0, 100000, v))
            snprintf(why, sizeof why, "%s%s wants a whole number, not '%.40s'", li < 0 ?
                     "-" : "--", li < 0 ? "n" : lo[li].name, optarg);
        else if (opt == 'p' || opt == 'a')
            *(opt == 'p' ? &L.replace : &L.adam) = 1;
        else if (opt == 'o' || opt == 'd')
            *(opt == 'o' ? &L.mode : &L.keep) = optarg;
        else if (opt == 'h')
            dt_usage_help(usage);
        else if (!v && opt != DT_OPT_DEVICE && opt != DT_OPT_TRACE)
            dt_bad_option(opt, argv, why, sizeof why);  /* ':' no value, '?' unknown */
    }
    L.M = L.M < 0 ? L.N - 1 : L.M;
#define BAD(cond, ...) if (!*why && (cond)) snprintf(why, sizeof why, __VA_ARGS__)
    BAD(optind < argc, "unexpected argument '%.40s'", argv[optind]);
    BAD(L.N < 2 || L.N > MAXR, "-n must be 2 to %d ranks (one to lose), not %d", MAXR, L.N);
    BAD(L.S < 2 || L.S > MAXS, "--steps must be 2 to %d, not %d", MAXS, L.S);
    BAD(L.E < 1 || L.E > L.S, "--every must be 1 to --steps (%d), not %d", L.S, L.E);
    BAD(L.K < 1 || L.K > L.S, "--kill-step must be 1 to --steps (%d), not %d", L.S, L.K);
    BAD(L.R >= L.N, "--kill-rank must be a rank, 0 to %d, not %d", L.N - 1, L.R);
    BAD(L.M < 1 || L.M > L.N, "--min must be 1 to -n (%d), not %d", L.N, L.M);
    BAD(L.M == L.N && !L.replace, "--min %d: a job that may not lose a rank gives up at "
        "the first loss (add --replace, or lower --min)", L.M);
    BAD(strcmp(L.mode, "fsdp") && strcmp(L.mode, "ddp"), "--mode must be fsdp or ddp, "
        "not '%.40s'", L.mode);
    if (*why)
        dt_usage_error(usage, why);
    dt_check_output("--keep", L.keep, 1);
    DIR *d = L.keep && dt_rank() == 0 ? opendir(L.keep) : NULL;
    int used = 0;                               /* --keep: a new or empty folder */
    for (struct dirent *x; d && (x = readdir(d)) != NULL;)
        used |= strcmp(x->d_name, ".") && strcmp(x->d_name, "..");
    if (d)
        closedir(d);
    MPI_Bcast(&used, 1, MPI_INT, 0, MPI_COMM_WORLD);
    BAD(used, "--keep %.60s: the folder is not empty (the script would resume what it "
        "holds)", L.keep);
    if (*why)
        dt_usage_error(usage, why);
    dt_print_devices();

    /* ==== the lesson, on rank 0; the others wait without taking a core ==== */
    int ok = dt_rank() == 0 ? run_lesson(&L) : 0;
    MPI_Request q;
    MPI_Ibcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD, &q);
    for (int done = 0; MPI_Test(&q, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done;)
        nanosleep(&(struct timespec){0, 20000000}, NULL);

    /* ==== teardown ==== */
    dt_finalize();
    return ok ? 0 : 1;
}
