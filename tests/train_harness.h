/* What the two training suites share, tests/mpi_train.c (the MLP) and tests/mpi_gpt.c
 * (the GPT): the fp32 limits; a table of cases (every mode and option N ranks can run,
 * each a dt_train_config), the configuration every case starts from, and the cases and
 * layouts both run (serial, async dp, the pipeline's schedules, every hybrid layout);
 * a run with the checks every result must pass whatever the mode; the comparison with
 * the suite's serial reference; the closing table of the largest differences per row;
 * the check of dt_train_check's refusals; and running it all. Each suite writes its own
 * model, its serial reference, the rest of its cases and its 16-bit limits.
 *
 * Like harness.h, which it includes, it holds function bodies: each suite is one .c
 * file, linked alone. */
#ifndef DT_TESTS_TRAIN_HARNESS_H
#define DT_TESTS_TRAIN_HARNESS_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "harness.h"
#include "parallel/parallel.h"

/* ==== the fp32 limits ====
 * A parallel mode adds the same numbers as serial training in another order (a batch's
 * gradient as a sum of per-rank shards, a layer's output as a sum of partial products,
 * micro-batches one after another), each sum within a few float ulps (1e-7 relative) of
 * serial's, and a case's few steps end within about 1e-6 of serial's weights. A run in
 * fp32 is held to the reference within TT_PARAM_ATOL + TT_PARAM_RTOL |w| for every
 * weight and TT_LOSS_RTOL, relative, for every step's loss. Each suite says why in
 * detail, what it measured against these limits, and how far above them a real mistake
 * lands. */
#define TT_PARAM_ATOL 1e-5
#define TT_PARAM_RTOL 1e-4
#define TT_LOSS_RTOL 1e-5

/* ==== the cases ==== */

enum { TT_STEPS = 5, TT_BATCH = 24 };  /* a case's steps and global batch, by default */
static const char *const tt_opt[2] = { "sgd", "adam" };      /* [adam]: for the names */

static inline const char *tt_optim(const dt_train_config *c)   /* "sgd" or "adam" */
{
    return tt_opt[c->optim.kind == DT_ADAM];
}

typedef struct {
    char name[80];
    int kind;                    /* the suite's K_FP32, ... */
    int buckets;                 /* ddp's gradient buckets a step (0: not checked) */
    dt_train_config c;
    dt_dataset data;             /* the case's own data set, where c.data points at it */
} tt_case;

enum { TT_MAXCASES = 128 };
static tt_case tt_cases[TT_MAXCASES];
static int tt_ncases;

/* A configuration of mode m for TT_STEPS steps of a global batch of TT_BATCH from seed
 * 7, with SGD+momentum (adam 0: lr 0.1, momentum 0.9) or Adam (adam_lr), eps as given;
 * no parallel layout yet; on the GPU where the rank has one. The suite adds the model
 * and its data. */
static dt_train_config tt_base(dt_mode m, int adam, float adam_lr, float eps)
{
    dt_train_config c;
    dt_train_defaults(&c);
    c.mode = m;
    c.optim = (dt_optim_config){ .kind = adam ? DT_ADAM : DT_SGD, .lr = adam ? adam_lr : 0.1f,
                                 .momentum = adam ? 0 : 0.9f, .beta1 = 0.9f,
                                 .beta2 = 0.999f, .eps = eps };
    c.steps = TT_STEPS;
    c.batch = TT_BATCH;
    c.seed = 7;
    c.dp = c.tp = c.pp = 1;
    c.on_device = dt_device() == DT_CUDA;
    c.on_step = NULL;
    return c;
}

/* Adds a case whose global batch B must divide by `need`: the multiple of need nearest
 * above TT_BATCH. Returns it, for what the suite notes beside. */
__attribute__((format(printf, 4, 5)))
static tt_case *tt_add(int kind, dt_train_config c, int need, const char *fmt, ...)
{
    DT_REQUIRE(tt_ncases < TT_MAXCASES, "more than %d cases", TT_MAXCASES);
    tt_case *t = &tt_cases[tt_ncases++];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
    c.batch = need * ((TT_BATCH + need - 1) / need);
    t->kind = kind;
    t->c = c;
    return t;
}

/* Adds serial training (on one rank: N = 1), sgd and adam, the suite's serial
 * configurations with SGD and with Adam. */
static void tt_add_serial(int kind, int N, dt_train_config sgd, dt_train_config adam)
{
    if (N == 1) {
        tt_add(kind, sgd, 1, "serial %s", tt_optim(&sgd));
        tt_add(kind, adam, 1, "serial %s", tt_optim(&adam));
    }
}

/* Adds asynchronous dp, workers K updates behind, from c1 and c2, the suite's dp
 * configurations: K = 1 on N >= 2 ranks, and K = 2 with a dedicated server on N >= 3. */
static void tt_add_async(int kind, int N, dt_train_config c1, dt_train_config c2)
{
    if (N >= 2) {
        c1.async = 1;
        tt_add(kind, c1, N, "dp async 1 %s", tt_optim(&c1));
    }
    if (N >= 3) {
        c2.async = 2;
        c2.dedicated_server = 1;
        tt_add(kind, c2, N - 1, "dp async 2 dedicated server %s", tt_optim(&c2));
    }
}

/* ==== layouts ==== */

enum { TT_PP_VARIANTS = 6 };

/* Adds pipeline variant i of TT_PP_VARIANTS of c, a pp configuration whose model the
 * suite has cut for the ranks: GPipe (i < 3) or 1F1B, with 1, 2 or 4 micro-batches. */
static void tt_add_pp(int kind, dt_train_config c, int i)
{
    c.schedule = (dt_pp_schedule)(i / 3);
    c.micro = 1 << (i % 3);
    tt_add(kind, c, c.micro, "pp %s micro %d %s", i / 3 ? "1f1b" : "gpipe", c.micro,
           tt_optim(&c));
}

/* Adds today's schedules of c on N >= 2 stages, whose units the caller made 2N (two
 * chunks a stage): interleaved 1F1B with 2 chunks a stage and 3 micro-batches (more
 * than, as many as and fewer than the stages, as N goes 2 .. 5), and with zb 1, ZB-H1
 * (the split backward, B and W) with 3 + N % 2. */
static void tt_add_pp_today(int kind, dt_train_config c, int N, int zb)
{
    if (N < 2)
        return;
    c.schedule = DT_PP_INTERLEAVED;
    c.virtual_stages = 2;
    c.micro = 3;
    tt_add(kind, c, c.micro, "pp interleaved v 2 micro 3 %s", tt_optim(&c));
    if (!zb)
        return;
    c.schedule = DT_PP_ZBH1;
    c.virtual_stages = 1;
    c.micro = 3 + N % 2;
    tt_add(kind, c, c.micro, "pp zb-h1 micro %d %s", c.micro, tt_optim(&c));
}

/* The hybrid layouts of N ranks: every D*T*P = N, T and then P rising. tt_nlayouts
 * counts them; tt_layout gives c layout k (its dp, tp and pp), with 2 micro-batches
 * where P > 1 (else 1) and the schedule alternating with T + P. */
static int tt_nlayouts(int N)
{
    int n = 0;
    for (int T = 1; T <= N; T++)
        for (int P = 1; P <= N; P++)
            n += N % (T * P) == 0;
    return n;
}

static void tt_layout(dt_train_config *c, int N, int k)
{
    for (int T = 1; T <= N; T++)
        for (int P = 1; P <= N; P++)
            if (N % (T * P) == 0 && k-- == 0) {
                c->dp = N / (T * P);
                c->tp = T;
                c->pp = P;
                c->micro = P > 1 ? 2 : 1;
                c->schedule = (dt_pp_schedule)((T + P) % 2);
                return;
            }
    DT_REQUIRE(0, "no hybrid layout %d of %d ranks", k, N);
}

/* ==== a run ==== */

/* Trains c on MPI_COMM_WORLD into res (the caller frees it: dt_train_result_free) and
 * checks what every run must give: c->steps steps, each loss finite; bytes sent within
 * their max, and some on more than one rank; messages no more than bytes; the weights'
 * and (on some rank) the activations' memory counted; and, on the host, no GPU work in
 * the device books. Returns the seconds dt_train took. Collective. */
static double tt_train(const char *name, const dt_train_config *c, dt_train_result *res)
{
    double t0 = MPI_Wtime();
    dt_train(c, MPI_COMM_WORLD, res);
    double took = MPI_Wtime() - t0;
    int S = c->steps;
    HT_EXPECT(res->steps == S, "%s: %d steps in the result, want %d", name, res->steps, S);
    HT_EXPECT(res->bytes_sent <= res->bytes_sent_max, "%s: bytes_sent %zu above the max "
              "%zu", name, res->bytes_sent, res->bytes_sent_max);
    HT_EXPECT(ht_size == 1 || res->bytes_sent_max > 0, "%s: no bytes sent on %d ranks",
              name, ht_size);
    HT_EXPECT(res->peak_params > 0, "%s: peak memory of the weights is 0", name);
    unsigned long long acts = res->peak_acts;  /* a dp server computes nothing: any rank */
    HT_MPI(MPI_Iallreduce(MPI_IN_PLACE, &acts, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                          MPI_COMM_WORLD, &ht_req));
    HT_EXPECT(acts > 0, "%s: no activations counted", name);
    /* every message carries at least one byte, and a message of more than the bytes
     * sent cannot be: messages <= bytes; some sent exactly where bytes were */
    HT_EXPECT(res->messages_sent <= res->bytes_sent &&
              (res->bytes_sent == 0) == (res->messages_sent == 0),
              "%s: %zu messages counted for %zu bytes", name, res->messages_sent,
              res->bytes_sent);
    const dt_device_books *b = &res->books;
    if (!c->on_device)
        HT_EXPECT(b->launches + b->waits + b->allocs + b->tensors + b->inputs +
                  b->numbers == 0, "%s: a run on the host counted GPU work: %llu launches, "
                  "%llu waits, %llu allocations, %llu tensor copies, %llu batch copies, "
                  "%llu numbers", name, b->launches, b->waits, b->allocs, b->tensors,
                  b->inputs, b->numbers);
    for (int s = 0; s < S; s++)
        HT_EXPECT(isfinite(res->loss[s]), "%s: loss of step %d is %g", name, s + 1,
                  (double)res->loss[s]);
    return took;
}

/* ==== comparing ==== */

/* got against want on this rank, |got - want| <= atol + rtol |scale| (scale NULL:
 * want itself; mpi_gpt's compression: the reference's path, relative to the steps that
 * moved the weight). Returns the largest |got - want| / limit (1 is the limit); notes
 * the first few failures, and with DT_TEST_VERBOSE rank 0 prints the worst element. */
static double tt_compare(const char *name, const char *what, const float *got,
                         const float *want, const float *scale, size_t n, double atol,
                         double rtol)
{
    double worst = 0;
    int bad = 0;
    size_t wi = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        double lim = atol + rtol * fabs(scale ? scale[i] : want[i]);
        double r = isfinite(d) ? d / lim : INFINITY;
        if (r > worst) {
            worst = r;
            wi = i;
        }
        if (!(r <= 1) && bad++ < 3)
            ht_fail("%s: %s[%zu] = %.9g, the reference has %.9g (difference %.3g, limit "
                    "%.3g)", name, what, i, (double)got[i], (double)want[i], d, lim);
    }
    if (getenv("DT_TEST_VERBOSE") && n && ht_rank == 0)
        printf("  %s: worst %s[%zu] = %.9g, reference %.9g\n", name, what, wi,
               (double)got[wi], (double)want[wi]);
    return worst;
}

/* ==== the closing table ==== */

/* What the cases compared: a row per mode (its fp32 cases; async dp's among dp's), then
 * compress, fp16 and bf16. */
enum { TT_ROW_COMPRESS = DT_NMODES, TT_ROW_FP16, TT_ROW_BF16, TT_NROWS };
static struct { double param, loss; int runs; } tt_seen[TT_NROWS];

/* Notes a case's largest differences from the reference, weights dp and losses dl as
 * fractions of their limits, in row; with DT_TEST_VERBOSE prints the case's line (its
 * time, the steps it skipped). On rank 0; elsewhere it does nothing. */
static void tt_note(int row, const char *name, double took, int skipped, double dp,
                    double dl)
{
    if (ht_rank != 0)
        return;
    tt_seen[row].param = fmax(tt_seen[row].param, dp);
    tt_seen[row].loss = fmax(tt_seen[row].loss, dl);
    tt_seen[row].runs++;
    if (getenv("DT_TEST_VERBOSE"))
        printf("%-40s %5.0f ms  skipped %2d  worst/limit: weights %.3g, loss %.3g\n", name,
               took * 1e3, skipped, dp, dl);
}

/* Prints the table's rows that ran (the suite prints the line above them: its limits).
 * On rank 0; elsewhere it does nothing. */
static void tt_report(void)
{
    for (int m = 0; ht_rank == 0 && m < TT_NROWS; m++)
        if (tt_seen[m].runs)
            printf("  %-8s %2d runs  weights %.3f  loss %.3f\n",
                   m < DT_NMODES ? dt_mode_name((dt_mode)m) : m == TT_ROW_COMPRESS
                   ? "compress" : m == TT_ROW_FP16 ? "fp16" : "bf16",
                   tt_seen[m].runs, tt_seen[m].param, tt_seen[m].loss);
}

/* ==== refusals ==== */

/* A configuration dt_train_check must refuse on nranks ranks with a sentence naming
 * word, or (word NULL) accept. */
typedef struct {
    const char *name, *word;
    dt_train_config c;
    int nranks;
} tt_refusal;

/* Holds dt_train_check to each of r[0..n-1]. */
static void tt_check_refusals(const tt_refusal *r, int n)
{
    for (int i = 0; i < n; i++) {
        char why[256] = "";
        int rc = dt_train_check(&r[i].c, r[i].nranks, why, sizeof why);
        if (!r[i].word)
            HT_EXPECT(rc == 0, "%s: dt_train_check refused it: %s", r[i].name, why);
        else
            HT_EXPECT(rc == -1 && strstr(why, r[i].word), "%s: dt_train_check returned "
                      "%d ('%s'), want -1 and a sentence naming '%s'", r[i].name, rc, why,
                      r[i].word);
    }
}

/* ==== running ==== */

/* The suite: test_check once (case "check"), then test_mode once per case ("modes").
 * Returns ht_run's status. Collective. */
static int tt_run(const char *name, const TTest *check, const TTest *mode)
{
    Suite *s = suite_create(name);
    const ht_case tcs[] = { { "check", check, 1 }, { "modes", mode, tt_ncases } };
    ht_add_cases(s, tcs, 2);
    return ht_run(s);
}

#endif /* DT_TESTS_TRAIN_HARNESS_H */
