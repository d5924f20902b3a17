/* stepbench: the time of one training step of dtlab's MLP on one CPU process, the
 * serial step every mode is built from: forward, softmax cross-entropy, backward, the
 * optimizer. bench/torch_step.py does the same in PyTorch eager with the same shapes,
 * data and threads, and bench/step_vs_torch.sh prints the two side by side.
 *
 *   build/bench/stepbench --hidden 1024 --batch 256 --threads 1
 *   DT_BLAS=0 build/bench/stepbench ...          the plain loops (the reference)
 *
 * It prints one line: "stepbench: H x L batch B threads T blas|loops sgd|adam relu|gelu:
 * median M ms a step (min, max over N steps), loss first -> last". Timing: W warm-up
 * steps, then steps until --seconds have passed (at least 5, at most --max-steps), each
 * timed alone; the median is the figure to quote. No MPI: run it without mpiexec. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nn/nn.h"

static const char usage[] =
    "usage: stepbench [options]   (one process, no mpiexec)\n"
    "Times one training step of the MLP in --in -> --hidden x (--layers - 1) -> --out.\n"
    "  --in N --hidden N --out N --layers L   shape (default 784, 1024, 10, 4)\n"
    "  --batch B           rows a step (default 256)\n"
    "  --threads T         OpenBLAS threads (default: all this process may run on)\n"
    "  --optim sgd|adam    SGD with momentum 0.9 (default) or Adam\n"
    "  --act relu|gelu     (default relu)\n"
    "  --warmup W          steps not timed (default 3)\n"
    "  --seconds S         time steps until S seconds have passed (default 1)\n"
    "  --max-steps N       but no more than N (default 500)\n"
    "  --help              this text\n"
    "DT_BLAS=0 in the environment multiplies with the plain loops instead of sgemm.\n";

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static __attribute__((noreturn)) void bad(const char *why)
{
    fprintf(stderr, "stepbench: %s\nTry 'stepbench --help' for usage.\n", why);
    exit(2);
}

/* a whole number in [lo, hi], or bad() naming the option */
static int number(const char *opt, const char *s, int lo, int hi)
{
    char *end, why[128];
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        snprintf(why, sizeof why, "--%s must be a whole number from %d to %d, not '%.20s'",
                 opt, lo, hi, s);
        bad(why);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    dt_mlp_config c = { .in = 784, .hidden = 1024, .out = 10, .layers = 4, .act = DT_RELU };
    dt_optim_config o = { .kind = DT_SGD, .lr = 0.01f, .momentum = 0.9f, .beta1 = 0.9f,
                          .beta2 = 0.999f, .eps = 1e-8f };
    int B = 256, threads = dt_cores(), warmup = 3, max_steps = 500;
    double seconds = 1;
    static const struct option opts[] = {
        {"in", 1, NULL, 'i'}, {"hidden", 1, NULL, 'H'}, {"out", 1, NULL, 'o'},
        {"layers", 1, NULL, 'L'}, {"batch", 1, NULL, 'b'}, {"threads", 1, NULL, 't'},
        {"optim", 1, NULL, 'O'}, {"act", 1, NULL, 'a'}, {"warmup", 1, NULL, 'w'},
        {"seconds", 1, NULL, 's'}, {"max-steps", 1, NULL, 'm'}, {"help", 0, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int opt;
    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        const char *name = optind > 1 ? argv[optind - 1] + 2 : "";
        switch (opt) {
        case 'i': c.in = number("in", optarg, 1, 1 << 16); break;
        case 'H': c.hidden = number("hidden", optarg, 1, 1 << 16); break;
        case 'o': c.out = number("out", optarg, 1, 1 << 16); break;
        case 'L': c.layers = number("layers", optarg, 1, 64); break;
        case 'b': B = number("batch", optarg, 1, 1 << 16); break;
        case 't': threads = number("threads", optarg, 1, 256); break;
        case 'w': warmup = number("warmup", optarg, 0, 1000); break;
        case 'm': max_steps = number("max-steps", optarg, 5, 1000000); break;
        case 's': {
            char *end;
            seconds = strtod(optarg, &end);
            if (!*optarg || *end || !(seconds > 0 && seconds <= 3600))
                bad("--seconds must be more than 0 and at most 3600");
            break;
        }
        case 'O':
            if (strcmp(optarg, "sgd") && strcmp(optarg, "adam"))
                bad("--optim must be sgd or adam");
            o.kind = strcmp(optarg, "adam") ? DT_SGD : DT_ADAM;
            break;
        case 'a':
            if (strcmp(optarg, "relu") && strcmp(optarg, "gelu"))
                bad("--act must be relu or gelu");
            c.act = strcmp(optarg, "gelu") ? DT_RELU : DT_GELU;
            break;
        case 'h': fputs(usage, stdout); return 0;
        case ':': {
            char why[96];
            snprintf(why, sizeof why, "option '%.40s' needs a value", name);
            bad(why);
        }
        default: {
            char why[96];
            snprintf(why, sizeof why, "unknown option '%.40s'", argv[optind - 1]);
            bad(why);
        }
        }
    }
    if (optind < argc)
        bad("stepbench takes no arguments besides its options");
    if (dt_blas_env_error())
        bad(dt_blas_env_error());
    dt_set_blas_threads(threads);

    /* the data: a synthetic set of 8 batches, cycled; the model from seed 1 */
    dt_dataset d;
    dt_data_synthetic(&d, 8 * B, c.in, c.out, 1);
    size_t np = dt_mlp_nparams(&c);
    float *p = malloc(np * sizeof *p), *g = malloc(np * sizeof *g);
    float *st = calloc(np * dt_optim_state_per_param(o.kind), sizeof *st);
    float *x = malloc(sizeof(float) * B * c.in), *dl = malloc(sizeof(float) * B * c.out);
    int *y = malloc(sizeof(int) * B);
    double *t = malloc(sizeof(double) * max_steps);
    if (!p || !g || !st || !x || !dl || !y || !t) {
        fprintf(stderr, "stepbench: out of memory\n");
        return 1;
    }
    dt_mlp_init(&c, 1, p);
    dt_mlp_acts a;
    dt_mlp_acts_alloc(&c, B, 0, &a);

    float first = 0, loss = 0;
    int n = 0;
    double start = 0;
    for (int s = 0; n < max_steps && (n < 5 || now() - start < seconds); s++) {
        if (s == warmup)
            start = now();
        double t0 = now();
        dt_data_batch(&d, s, B, 0, B, x, y);
        const float *logits = dt_mlp_forward(&c, p, x, B, &a);
        loss = dt_xent(logits, y, B, c.out, 1.0f / B, dl) / B;
        memset(g, 0, np * sizeof *g);
        dt_mlp_backward(&c, p, &a, dl, B, g, NULL, NULL);
        dt_optim_step(&o, s + 1, p, g, st, np);
        if (s == 0)
            first = loss;
        if (s >= warmup)
            t[n++] = now() - t0;
    }
    qsort(t, n, sizeof *t, cmp_double);
    printf("stepbench: %d-%dx%d-%d batch %d threads %d %s %s %s: median %.3f ms a step "
           "(%.3f .. %.3f over %d steps), loss %.4f -> %.4f\n", c.in, c.hidden,
           c.layers - 1, c.out, B, dt_blas() ? dt_blas_threads() : 1,
           dt_blas() ? "blas" : "loops", o.kind == DT_SGD ? "sgd" : "adam",
           c.act == DT_RELU ? "relu" : "gelu", 1e3 * t[n / 2], 1e3 * t[0], 1e3 * t[n - 1],
           n, (double)first, (double)loss);
    dt_mlp_acts_free(&a);
    dt_data_free(&d);
    free(p); free(g); free(st); free(x); free(dl); free(y); free(t);
    return 0;
}
