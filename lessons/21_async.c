/* Lesson 21: synchronous against asynchronous gradient accumulation, with a
 * straggler.
 *
 * What it teaches: a parameter server adds up the workers' gradients. In the
 * synchronous run every worker waits, every step, until the sum of that step
 * is made and its new weights come back, so all go at the pace of the
 * slowest: one slow worker (a straggler) makes the others wait about its
 * delay, every step. In the asynchronous run (dp --async K) a worker does not
 * wait for the newest weights: step s computes on the weights made by step
 * s-1-K, so it runs up to K steps ahead. The price is stale gradients (the
 * loss curve shows it); what it buys against a straggler is slack, not
 * speed: the server still needs every worker's gradient for every update, so
 * once the fast workers are K steps ahead they wait as before. The lesson
 * runs both, with the straggler and without, and prints the loss curves, the
 * time of each step and how long every rank waited, beside a simple model, and
 * how far the timings spread.
 *
 * The code: lib/parallel/dp.c (dti_train_dp, worker_step, server_step, fetch),
 * lib/parallel/books.c (dti_step_begin: the straggler's sleep).
 *
 * Run:  mpiexec -n 4 build/lessons/21_async
 *       mpiexec -n 5 build/lessons/21_async --slow-ms 40 --async 4
 *       mpiexec -n 3 build/lessons/21_async --trace async.trace  (then dtviz it)
 *
 * --trace records one run, the asynchronous one with the straggler: in dtviz the
 * other workers run up to K steps ahead of it, then wait.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 21_async [options]\n"
    "Trains a small MLP with a parameter server (rank 0 serves and computes too),\n"
    "synchronously and asynchronously, with the last rank a straggler and without.\n"
    "  --steps S           training steps, 2 to 100 (default 10)\n"
    "  --async K           step s of the asynchronous run computes on the weights\n"
    "                      of step s-1-K, 1 to 20 (default 2)\n"
    "  --slow-ms D         the straggler sleeps D ms before each step, 1 to 500\n"
    "                      (default 20)\n"
    DT_COMMON_USAGE
    "                      (one run: --async K with the straggler)\n"
    "  --help              this text\n";

enum { TOL_EXP = 5, RUNS = 4 };    /* sync equals serial within 1e-5 */

/* Rank 0 notes the time each step's update was made (dt_train calls it there). */
typedef struct {
    double t0;
    double *ms;                    /* [steps]: ms since the run began */
} clock_ctx;

static void on_step(const dt_step_report *rep, void *ctx)
{
    clock_ctx *k = ctx;
    k->ms[rep->step - 1] = (MPI_Wtime() - k->t0) * 1e3;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), S = 10, K = 2, D = 20;
    dt_int_option io[] = {{"steps", 2, 100, &S}, {"async", 1, 20, &K},
                          {"slow-ms", 1, 500, &D}};
    dt_parse_int_options(argc, argv, io, 3, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_DP, &set);
    c.model.hidden = 24;                 /* small: gradients of 4.4 KiB */
    c.model.layers = 3;
    c.optim.lr = 0.03f;
    c.steps = S;
    c.batch = (120 + n - 1) / n * n;     /* 120, or the next multiple of N */
    c.slow_rank = n - 1;                 /* the last rank is the straggler */
    dt_train_usage_check(&c, "21_async");   /* else a usage error: exit 2 */

    /* ==== the idea ==== */
    dt_printf0("A parameter server on %d rank%s: rank 0 holds the weights and the "
               "optimizer\nand computes its share of the batch too; every rank "
               "sends its gradient\nto it and gets the new weights back. Rank %d "
               "is a straggler: it sleeps\nD = %d ms before each of its steps, as a "
               "slower GPU would.\n\n"
               "  synchronous  step s computes on the weights of step s-1: "
               "everyone waits\n               for the slowest gradient of step "
               "s-1, every step\n"
               "  --async %-4d step s computes on the weights of step s-%d: a "
               "worker runs\n               up to %d steps ahead, on stale "
               "weights\n\n", n, n == 1 ? "" : "s", n - 1, D, K, K + 1, K);
    if (n == 1)
        dt_printf0("With one rank there is no one to wait for: the straggler is "
                   "the server and\nthe only worker, and --async only makes its "
                   "gradients stale. Try -n 4.\n\n");

    /* ==== the library calls: sync and async, with the straggler and without ==== */
    dt_train_result res[RUNS], ref;
    double *ms[RUNS];
    for (int i = 0; i < RUNS; i++) {
        dt_train_config ci = c;
        ci.async = i >= 2 ? K : 0;
        ci.slow_ms = i % 2 ? D : 0;
        ms[i] = calloc((size_t)S, sizeof(double));
        DT_REQUIRE(ms[i] != NULL, "out of host memory");
        clock_ctx k = { MPI_Wtime(), ms[i] };
        ci.on_step = on_step;
        ci.ctx = &k;
        dt_trace_pause(!(ci.async && ci.slow_ms));  /* --trace: that run alone */
        dt_train(&ci, MPI_COMM_WORLD, &res[i]);
    }
    dt_trace_pause(1);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);   /* one rank, and no straggler */
    dt_train_result *sync = &res[1], *async = &res[3];

    /* ==== the numbers: the loss curves, by step and by time ==== */
    dt_printf0("Loss per step, with the straggler, and when the server made each "
               "update\n(ms since the run began):\n\n"
               "  step    serial  |      sync   at ms  |  async %-2d   at ms\n", K);
    for (int s = 0; s < S; s++)
        dt_printf0("  %4d  %8.5f  |  %8.5f  %6.0f  |  %8.5f  %6.0f\n", s + 1,
                   rank == 0 ? ref.loss[s] : 0.0, sync->loss[s], ms[1][s],
                   async->loss[s], ms[3][s]);
    dt_printf0("The synchronous curve is serial training's. The asynchronous one "
               "lags: its\ngradients point where the weights were %d steps ago. "
               "And by the clock\nit is no faster: the server made update s only "
               "when the straggler's\ngradient of step s came, in both runs.\n\n",
               K + 1);

    /* ==== the numbers: time between updates, with its spread ==== */
    double gap[RUNS], sp[RUNS], dts[100];    /* ms between the server's updates */
    char cell[RUNS][32];
    for (int i = 0; i < RUNS; i++) {
        for (int s = 1; s < S; s++)
            dts[s - 1] = ms[i][s] - ms[i][s - 1];
        gap[i] = (ms[i][S - 1] - ms[i][0]) / (S - 1);
        sp[i] = dt_timing_spread(dt_timing_of(dts, S - 1));
        snprintf(cell[i], sizeof cell[i], i == 2 ? "%5.1f in bursts" : "%5.1f +-%.0f%%",
                 gap[i], 100 * sp[i]);
    }
    MPI_Bcast(sp, RUNS, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    double slack = fmax(sp[1], sp[3]), noise = fmax(slack, sp[0]);
    dt_printf0("ms between the server's updates, the mean of steps 2..%d (+-: how they "
               "spread):\n                  sync            async\n  no straggler    "
               "%-14s  %s\n  straggler       %-14s  %-14s  model: D = %d, plus its own "
               "work\n", S, cell[0], cell[2], cell[1], cell[3], D);
    if (n > 1)
        dt_printf0("Without a straggler the asynchronous server takes gradients in bursts "
                   "(workers\nrun ahead and queue them), so its updates come unevenly. "
                   "With the straggler an\nupdate comes D after the last, plus the "
                   "work the straggler does after its sleep:\n%.1f ms here, against "
                   "%.1f ms between updates without the straggler. %s\n\n",
                   gap[1] - D, gap[0], gap[1] - D <= gap[0] * (1 + slack) ?
                   "The\nothers' work fits inside its sleep." :
                   "That work\nalone took longer than a whole update did without "
                   "the straggler, though it is\nthe same work: the machine was "
                   "slower during that run (see the note).");

    /* ==== the numbers: waiting, every rank, beside the model ==== */
    dt_printf0("Seconds each rank spent waiting (in dtlab's waits), and the model for "
               "the\nruns with the straggler (S = %d steps, D = %d ms):\n\n"
               "  rank  role               sync  async  |  slow: sync   model  "
               "|  async  model\n", S, D);
    double fast_sync = (S - 1) * D * 1e-3, fast_async = (S - 1 - K) * D * 1e-3;
    if (fast_async < 0)
        fast_async = 0;
    int slow = rank == n - 1, server = rank == 0;
    double m_sync = n == 1 || slow ? 0 : server ? S * D * 1e-3 : fast_sync;
    double m_async = n == 1 || slow ? 0 : server ? S * D * 1e-3 : fast_async;
    /* a departure: off the model by more than what this rank waits without a
     * straggler (for the others' work, and for a core), the spread, and 1 ms (the
     * table's last digit) */
    int off_s = n > 1 && fabs(sync->wait_seconds - m_sync) > res[0].wait_seconds +
                slack * m_sync + 1e-3;
    int off_a = n > 1 && fabs(async->wait_seconds - m_async) > res[2].wait_seconds +
                slack * m_async + 1e-3;
    dt_printf_ordered("  %4d  %-15s  %5.3f  %5.3f  |       %5.3f  %5.3f%s |  %5.3f  "
                      "%5.3f%s\n", rank, slow ? "straggler" : server ? "server, worker"
                      : "worker", res[0].wait_seconds, res[2].wait_seconds,
                      sync->wait_seconds, m_sync, off_s ? "*" : " ", async->wait_seconds,
                      m_async, off_a ? "*" : "");
    int off = off_s || off_a;
    MPI_Allreduce(MPI_IN_PLACE, &off, 1, MPI_INT, MPI_LOR, MPI_COMM_WORLD);
    if (n > 1)
        dt_printf0("The model: the server needs the straggler's gradient for "
                   "every update, so it\nwaits about D every step, in both runs "
                   "(S x D). A synchronous worker waits\nfor the weights of step "
                   "s-1 before step s: about D each step but the first,\n(S-1) x "
                   "D. An asynchronous one runs K = %d steps ahead first, so it "
                   "waits\n(S-1-K) x D; the K x D it saved come at the end, when "
                   "it has finished and\nthe run waits for the straggler (MPI "
                   "sends a message this small at once and\nlets the sender go "
                   "on, so that end is not in dtlab's waits). The straggler\n"
                   "itself waits for no one. Bounded staleness absorbs a worker "
                   "that is slow for\nup to K steps; one always slow still sets "
                   "the pace. Only a server that\napplies each gradient as it "
                   "comes, and lets the fast workers take more\nbatches, stops "
                   "waiting for it (its gradients then the stalest of all).\n",
                   K);
    if (n > 1 && !off)
        dt_printf0("Every wait is the model's within what that rank waits without the "
                   "straggler\n(for the others' work, and for a core), the spread "
                   "(+-%.0f%%) and 1 ms.\n", 100 * slack);
    else if (n > 1)
        dt_printf0("*: off the model by more than the rank's wait without the "
                   "straggler, the spread\n(+-%.0f%%) and 1 ms. Above it: the straggler's"
                   " own work after its sleep adds\nto each wait (the model counts D "
                   "only), and a rank may wait for a core (see the\nnote). Below it: "
                   "the first steps ran before the straggler fell behind.\n",
                   100 * slack);
    dt_timing_note(noise, "It shows in the waits without a straggler (time spent "
                   "waiting for a core, not for a message) and in the margin the waits "
                   "with one are held to; the straggler's sleep D still stands out, and "
                   "the checks do not depend on timing.");
    dt_printf0("\n");

    /* ==== the checks ==== */
    double d_sync = dt_params_max_diff(sync->params, ref.params, ref.nparams,
                                       MPI_COMM_WORLD);
    double d_async = dt_params_max_diff(async->params, res[2].params, ref.nparams,
                                        MPI_COMM_WORLD);
    int ok_sync = d_sync <= pow(10, -TOL_EXP), ok_same = d_async == 0;
    /* a worker's weights are K steps old: within S <= K steps no update reaches a loss */
    int can_fall = S > K, ok_fall = !can_fall || async->loss[S - 1] < async->loss[0];
    dt_printf0("check: synchronous with the straggler against serial training, "
               "max |weight\n       difference| %.3g (limit 1e-%d): %s\n", d_sync,
               TOL_EXP, ok_sync ? "PASS" : "FAIL");
    dt_printf0("check: asynchronous with the straggler against without it: the "
               "same weights,\n       bit for bit (the staleness is exactly K, "
               "whatever the timing): %s\n", ok_same ? "PASS" : "FAIL");
    if (can_fall)
        dt_printf0("check: the asynchronous loss went down, %.5f to %.5f: %s\n",
                   async->loss[0], async->loss[S - 1], ok_fall ? "PASS" : "FAIL");
    else
        dt_printf0("check: the asynchronous loss is not checked: with --async %d a worker's "
                   "weights are\n       %d steps old, so in %d steps no update reaches its "
                   "loss (try --steps %d)\n", K, K, S, K + 2);
    dt_printf0("The code: lib/parallel/dp.c (dti_train_dp, worker_step, server_step, "
               "fetch), lib/parallel/books.c (dti_step_begin)\n");

    /* ==== teardown ==== */
    for (int i = 0; i < RUNS; i++) {
        dt_train_result_free(&res[i]);
        free(ms[i]);
    }
    dt_train_result_free(&ref);
    dt_data_free(&set);
    dt_finalize();
    return ok_sync && ok_same && ok_fall ? 0 : 1;
}
