/* gptstep: the time of one training step of dtlab's GPT (lib/nn/gpt.h) on one CPU
 * process: forward, cross-entropy of every position's next byte, backward, the
 * optimizer. stepbench's twin for the transformer; bench/gpt_vs_torch.py runs it beside
 * the same model in PyTorch, and checks its gradients against PyTorch's with --dump.
 *
 *   build/bench/gptstep --layers 4 --embed 128 --seq 64 --batch 8 --threads 1
 *   DT_BLAS=0 build/bench/gptstep ...          the plain loops (the reference)
 *   build/bench/gptstep --dump /tmp/g          one step's inputs and outputs, as files
 *
 * It prints one line: "gptstep: L4 H4 C128 T64 batch 8 threads 1 blas adam: median M ms
 * a step (min .. max over N steps), loss first -> last; cpu P ms a step". Timing as
 * stepbench's: W warm-up steps, then steps until --seconds have passed (at least 5, at
 * most --max-steps), each timed alone; the median is the figure to quote. P is the
 * median CPU time a step, every thread's: on a machine that other work shares, the
 * wall's times grow with the wait for a core and P does not (but OpenBLAS's threads
 * spin while they wait for work, so with 2 threads or more P counts that too). No MPI.
 *
 * --dump DIR writes, for step 0 from the initial weights (seed 1) and then exits:
 *   params.f32   the initial weights, float32 little-endian, dt_gpt's flat layout
 *   tokens.i32   targets.i32   the batch, (B, T) int32 each
 *   loss.txt     the mean loss over the B*T positions, %.9g
 *   grads.f32    the gradient of that mean loss, params' layout
 *   config.json  {vocab, seq, embed, heads, layers, batch, T} */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "errors.h"
#include "nn/gpt.h"
#include "nn/nn.h"
#include "prog.h"

static const char usage[] =
    "usage: gptstep [options]   (one process, no mpiexec)\n"
    "Times one training step of the GPT (lib/nn/gpt.h) on a text, byte tokens.\n"
    "  --layers L --heads H --embed C --seq T   shape (default 4, 4, 128, 64)\n"
    "  --batch B           sequences of T tokens a step (default 8)\n"
    "  --threads N         OpenBLAS threads (default: all this process may run on)\n"
    "  --optim sgd|adam    Adam, lr 3e-3 (default), or SGD with momentum 0.9, lr 0.01\n"
    "  --text FILE         the text (default: a licence every Debian system has)\n"
    "  --warmup W          steps not timed (default 3)\n"
    "  --seconds S         time steps until S seconds have passed (default 1)\n"
    "  --max-steps N       but no more than N (default 500)\n"
    "  --dump DIR          write step 0's weights, batch, loss and gradients to DIR\n"
    "                      (made if missing) and exit, untimed\n"
    "  --help              this text\n"
    "DT_BLAS=0 in the environment multiplies with the plain loops instead of sgemm.\n";

/* seconds on a clock: the wall's, or the CPU time of every thread of this process */
enum { WALL = CLOCK_MONOTONIC, CPU = CLOCK_PROCESS_CPUTIME_ID };
static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* a whole number in [lo, hi] for --opt, or the usage error that names it */
static int int_arg(const char *opt, int lo, int hi)
{
    int v;
    char why[128];
    if (dt_parse_int(optarg, lo, hi, &v)) {
        snprintf(why, sizeof why, "--%s must be a whole number from %d to %d, not '%.20s'",
                 opt, lo, hi, optarg);
        dt_usage_error(NULL, why);
    }
    return v;
}

/* ==== a step's gradients, and --dump ==== */

/* Forward of x (B, T), the mean cross-entropy against y (B, T), backward into g
 * (zeroed first): returns the mean loss; dl (B*T, V) scratch */
static float grads(const dt_gpt_config *c, const float *p, const int *x, const int *y,
                   int B, int T, dt_gpt_acts *a, float *dl, float *g)
{
    size_t N = (size_t)B * T;
    const float *logits = dt_gpt_forward(c, p, x, B, T, a);        /* (B*T, V) */
    float loss = dt_xent(logits, y, (int)N, c->vocab, 1.0f / N, dl) / N;
    memset(g, 0, dt_gpt_nparams(c) * sizeof *g);
    dt_gpt_backward(c, p, a, dl, x, B, T, g, NULL, NULL);
    return loss;
}

/* n bytes to dir/name, or a line on stderr and status 1 */
static void put(const char *dir, const char *name, const void *data, size_t nbytes)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(data, 1, nbytes, f) == nbytes;
    if (f && fclose(f) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "gptstep: cannot write %s: %s\n", path, strerror(errno));
        exit(1);
    }
}

/* The files of the header, in dir: the weights p, the batch x, y (B, T), its mean
 * loss and the gradients g */
static void dump(const char *dir, const dt_gpt_config *c, const float *p, const int *x,
                 const int *y, int B, int T, float loss, const float *g)
{
    size_t np = dt_gpt_nparams(c), N = (size_t)B * T;
    char text[512];
    put(dir, "params.f32", p, np * sizeof *p);
    put(dir, "tokens.i32", x, N * sizeof *x);
    put(dir, "targets.i32", y, N * sizeof *y);
    put(dir, "grads.f32", g, np * sizeof *g);
    snprintf(text, sizeof text, "%.9g\n", (double)loss);
    put(dir, "loss.txt", text, strlen(text));
    snprintf(text, sizeof text, "{\"vocab\": %d, \"seq\": %d, \"embed\": %d, \"heads\": %d, "
             "\"layers\": %d, \"batch\": %d, \"T\": %d}\n", c->vocab, c->seq, c->embed,
             c->heads, c->layers, B, T);
    put(dir, "config.json", text, strlen(text));
    printf("gptstep: wrote step 0 (loss %.6f, %zu parameters, %s) to %s\n", (double)loss,
           np, dt_blas() ? "sgemm" : "the loops", dir);
}

/* --dump's folder: there, or made; else a usage error. Its files are little-endian. */
static void check_dump(const char *dir)
{
    const unsigned one = 1;
    struct stat st;
    char why[4200];
    if (!*dir)
        dt_usage_error(NULL, "--dump needs a folder, not ''");
    if (*(const unsigned char *)&one != 1)
        dt_usage_error(NULL, "--dump writes little-endian files, and this machine is "
                       "big-endian");
    errno = 0;
    if (stat(dir, &st) == 0 ? !S_ISDIR(st.st_mode) : mkdir(dir, 0755) != 0) {
        snprintf(why, sizeof why, "--dump: cannot use '%s' as a folder: %s", dir,
                 errno ? strerror(errno) : "it is a file");
        dt_usage_error(NULL, why);
    }
}

/* ==== the timed steps ==== */

int main(int argc, char **argv)
{
    dt_gpt_config c = { .vocab = 256, .seq = 64, .embed = 128, .heads = 4, .layers = 4 };
    dt_optim_config o = { .kind = DT_ADAM, .lr = 3e-3f, .momentum = 0.9f, .beta1 = 0.9f,
                          .beta2 = 0.999f, .eps = 1e-8f };
    int B = 8, threads = dt_cores(), warmup = 3, max_steps = 500;
    double seconds = 1;
    const char *text = NULL, *dir = NULL;
    static const struct option opts[] = {
        {"layers", 1, NULL, 'L'}, {"heads", 1, NULL, 'H'}, {"embed", 1, NULL, 'C'},
        {"seq", 1, NULL, 'T'}, {"batch", 1, NULL, 'b'}, {"threads", 1, NULL, 't'},
        {"optim", 1, NULL, 'O'}, {"text", 1, NULL, 'x'}, {"warmup", 1, NULL, 'w'},
        {"seconds", 1, NULL, 's'}, {"max-steps", 1, NULL, 'm'}, {"dump", 1, NULL, 'd'},
        {"help", 0, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int opt;
    char why[160];
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (opt) {
        case 'L': c.layers = int_arg("layers", 1, 256); break;
        case 'H': c.heads = int_arg("heads", 1, 1024); break;
        case 'C': c.embed = int_arg("embed", 1, 8192); break;
        case 'T': c.seq = int_arg("seq", 1, 4096); break;
        case 'b': B = int_arg("batch", 1, 1 << 16); break;
        case 't': threads = int_arg("threads", 1, 256); break;
        case 'w': warmup = int_arg("warmup", 0, 1000); break;
        case 'm': max_steps = int_arg("max-steps", 5, 1000000); break;
        case 'x': text = optarg; break;
        case 'd': dir = optarg; break;
        case 's': {
            char *end;
            seconds = strtod(optarg, &end);
            if (!*optarg || *end || !(seconds > 0 && seconds <= 3600))
                dt_usage_error(NULL, "--seconds must be more than 0 and at most 3600");
            break;
        }
        case 'O':
            if (strcmp(optarg, "sgd") && strcmp(optarg, "adam"))
                dt_usage_error(NULL, "--optim must be sgd or adam");
            o.kind = strcmp(optarg, "adam") ? DT_SGD : DT_ADAM;
            o.lr = o.kind == DT_ADAM ? 3e-3f : 0.01f;
            break;
        case 'h': fputs(usage, stdout); return 0;
        default:
            dt_bad_option(opt, argv, why, sizeof why);
            dt_usage_error(NULL, why);
        }
    }
    if (optind < argc) {
        snprintf(why, sizeof why, "unexpected argument '%.60s'", argv[optind]);
        dt_usage_error(NULL, why);
    }
    if (dt_gpt_config_error(&c))
        dt_usage_error(NULL, dt_gpt_config_error(&c));
    if (dt_blas_env_error())
        dt_usage_error(NULL, dt_blas_env_error());
    if (dir)
        check_dump(dir);
    dt_set_blas_threads(threads);

    /* the text and the model from seed 1; T = seq, every position of the model used */
    int T = c.seq;
    dt_text t;
    if (text == NULL) {
        dt_text_default(&t, 1);
    } else if (dt_text_load(&t, text, why, sizeof why) != 0) {
        dt_usage_error(NULL, why);
    }
    if (t.n <= T) {
        snprintf(why, sizeof why, "the text (%.60s) has %d bytes, and a sequence of %d "
                 "needs %d", t.source, t.n, T, T + 1);
        dt_usage_error(NULL, why);
    }
    size_t np = dt_gpt_nparams(&c), N = (size_t)B * T;
    float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g);
    float *st = calloc(np * dt_optim_state_per_param(o.kind), sizeof *st);
    float *dl = malloc(N * c.vocab * sizeof *dl);
    int *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    double *tm = malloc(sizeof(double) * max_steps), *cpu = malloc(sizeof(double) * max_steps);
    DT_REQUIRE(p && g && st && dl && x && y && tm && cpu, "gptstep: out of host memory");
    dt_gpt_init(&c, 1, p);
    dt_gpt_acts a;
    dt_gpt_acts_alloc(&c, NULL, B, T, &a);
    if (dir) {                                   /* step 0, untimed, into files */
        dt_text_batch(&t, 0, B, T, 0, B, x, y);
        dump(dir, &c, p, x, y, B, T, grads(&c, p, x, y, B, T, &a, dl, g), g);
        max_steps = 0;                           /* and no timed steps */
    }

    float first = 0, loss = 0;
    int n = 0;
    double start = 0;
    for (int s = 0; n < max_steps && (n < 5 || clock_s(WALL) - start < seconds); s++) {
        if (s == warmup)
            start = clock_s(WALL);
        double t0 = clock_s(WALL), c0 = clock_s(CPU);
        dt_text_batch(&t, s, B, T, 0, B, x, y);                     /* x, y (B, T) */
        loss = grads(&c, p, x, y, B, T, &a, dl, g);
        dt_optim_step(&o, s + 1, p, g, st, np);
        if (s == 0)
            first = loss;
        if (s >= warmup) {
            cpu[n] = clock_s(CPU) - c0;
            tm[n++] = clock_s(WALL) - t0;
        }
    }
    dt_timing wall = dt_timing_of(tm, n), busy = dt_timing_of(cpu, n);
    double lo = n ? tm[0] : 0, hi = lo;
    for (int i = 1; i < n; i++) {
        lo = tm[i] < lo ? tm[i] : lo;
        hi = tm[i] > hi ? tm[i] : hi;
    }
    if (n > 0)
        printf("gptstep: L%d H%d C%d T%d batch %d threads %d %s %s: median %.3f ms a "
               "step (%.3f .. %.3f over %d steps), loss %.4f -> %.4f; cpu %.3f ms a step\n",
               c.layers, c.heads, c.embed, T, B, dt_blas() ? dt_blas_threads() : 1,
               dt_blas() ? "blas" : "loops", o.kind == DT_SGD ? "sgd" : "adam",
               1e3 * wall.median, 1e3 * lo, 1e3 * hi, n, (double)first, (double)loss,
               1e3 * busy.median);
    dt_gpt_acts_free(&a);
    dt_text_free(&t);
    free(p); free(g); free(st); free(dl); free(x); free(y); free(tm); free(cpu);
    return 0;
}
