/* Lesson 11: data parallelism with a parameter server, synchronous and
 * asynchronous.
 *
 * What it teaches: the simplest way to train on N ranks. Every rank (a worker)
 * computes the gradient of its share of the global batch; one rank, the
 * server, adds them up, steps the optimizer and sends the new weights back.
 * Synchronous, it is serial training with the batch cut in pieces: the same
 * weights, to rounding. But every byte goes through the server's one link, so
 * the server sends and receives W' times what a worker does (W' = the workers
 * it talks to): the link saturates as N grows. With --async K a worker goes on
 * computing on weights up to K updates old instead of waiting for the round
 * trip: faster, but each update applies a stale gradient, and the loss shows
 * it.
 *
 * Run:  mpiexec -n 4 build/lessons/11_dp
 *       mpiexec -n 4 build/lessons/11_dp --async 1   (less stale: still behind)
 *       mpiexec -n 3 build/lessons/11_dp --trace dp.trace   (then dtviz it)
 */
#include <math.h>
#include <stdio.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 11_dp [options]\n"
    "Trains a small MLP with a parameter server (rank 0 serves and computes "
    "too),\n"
    "synchronously and with stale weights, beside serial training.\n"
    "  --steps S           training steps, 2 to 200 (default 12)\n"
    "  --async K           staleness of the asynchronous run: step s computes "
    "on the\n"
    "                      weights of step s-1-K, 1 to 50 (default 2)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TOL_EXP = 5 };            /* weights equal to serial within 1e-5 */

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 12, K = 2;
    dt_int_option io[] = {{"steps", 2, 200, &steps}, {"async", 1, 50, &K}};
    dt_parse_int_options(argc, argv, io, 2, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_DP, &set);
    c.model.hidden = 64;
    c.model.layers = 3;
    c.steps = steps;
    c.batch = (120 + n - 1) / n * n;     /* 120, or the next multiple of N */
    dt_train_usage_check(&c, "11_dp");  /* else a usage error: exit 2 */
    size_t psi = dt_mlp_nparams(&c.model) * sizeof(float);

    /* ==== the idea: a picture of the server and its workers ==== */
    int W = n < 6 ? n : 6;               /* workers drawn */
    char arrows[96] = "", feet[96] = "", names[96] = "";
    for (int j = 0, a = 0, b = 0, d = 0; j < W; j++) {
        const char *gap = j ? "     " : "   ";
        a += snprintf(arrows + a, sizeof arrows - a, "%s^ |", gap);
        b += snprintf(feet + b, sizeof feet - b, "%s| v", gap);
        d += snprintf(names + d, sizeof names - d, "  rank %d", j);
    }
    dt_printf0("A parameter server on %d rank%s. Rank 0 holds the weights and "
               "the optimizer;\nevery rank, rank 0 included, computes the "
               "gradient of its %d rows of the\nglobal batch of %d:\n\n"
               "     +-------------------------------+\n"
               "     | server: weights, optimizer    |\n"
               "     +-------------------------------+\n"
               "  %s%s\n  %s     gradients up, weights down\n  %s\n\n",
               n, n == 1 ? "" : "s", c.batch / n, c.batch, arrows,
               n > W ? " ..." : "", feet, names);
    dt_printf0("One synchronous step: workers send gradients (Psi = %zu bytes "
               "each),\nthe server sums them, steps, and sends Psi of weights "
               "back to each.\nThe server's link carries W' = %d Psi each way "
               "per step (W' = N-1: it\ncomputes its own share); a worker's "
               "link, 1 Psi.\n\n", psi, n - 1);

    /* ==== the library calls: synchronous, asynchronous, serial ==== */
    dt_train_result sync, async, ref;
    dt_train(&c, MPI_COMM_WORLD, &sync);
    size_t recv_sync = dt_bytes_received();  /* dt_train reset it at start */
    c.async = K;
    dt_train(&c, MPI_COMM_WORLD, &async);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    double diff = dt_params_max_diff(sync.params, ref.params, ref.nparams,
                                     MPI_COMM_WORLD);

    /* ==== the numbers: loss curves side by side ==== */
    dt_printf0("Loss per step. With --async %d, step s computes on the weights "
               "made by step\ns-%d: the gradient points where the weights "
               "were, not where they are.\n\n"
               "  step    serial      sync  async %d\n", K, K + 1, K);
    for (int s = 0; s < steps; s++)
        dt_printf0("  %4d  %8.5f  %8.5f  %8.5f\n", s + 1,
                   rank == 0 ? ref.loss[s] : 0.0, sync.loss[s],
                   async.loss[s]);
    float gain_sync = sync.loss[0] - sync.loss[steps - 1];
    float gain_async = async.loss[0] - async.loss[steps - 1];
    dt_printf0("Over %d steps the loss fell by %.4f synchronous; with stale "
               "weights it %s\nby %.4f.", steps, gain_sync,
               gain_async >= 0 ? "fell" : "rose", fabs(gain_async));
    if (gain_async < gain_sync)
        dt_printf0(" Staleness costs progress: a stale gradient acts like "
                   "extra momentum\n(on top of SGD's %.2f here), and steps "
                   "that overshoot can make the loss climb.",
                   (double)c.optim.momentum);
    dt_printf0("\n\n");

    /* ==== the numbers: bytes through each rank's link ==== */
    char a[32], b[32];
    dt_printf0("Bytes through each rank's link, synchronous run (%d steps, "
               "Psi = %s):\n"
               "  rank  role            sent  received  per step (Psi)\n",
               steps, dt_format_bytes((double)psi, a, sizeof a));
    dt_printf_ordered("  %4d  %-6s  %10s  %8s  %.2f out, %.2f in\n", rank,
                      rank == 0 ? "server" : "worker",
                      dt_format_bytes((double)sync.bytes_sent, a, sizeof a),
                      dt_format_bytes((double)recv_sync, b, sizeof b),
                      (double)sync.bytes_sent / steps / psi,
                      (double)recv_sync / steps / psi);
    if (n == 1)
        dt_printf0("One rank is server and only worker: nothing crosses a "
                   "link. Try -n 4.\n");
    else
        dt_printf0("The server moves W' = %d times a worker's bytes (the last "
                   "step's weights\nare never sent, and headers add a "
                   "little). A ring allreduce would\nmove 2(N-1)/N = %.2f Psi "
                   "per rank per step, on every link alike.\n", n - 1,
                   2.0 * (n - 1) / n);

    /* ==== the check ==== */
    int ok = diff <= pow(10, -TOL_EXP);
    dt_printf0("\ncheck: synchronous dp against serial training, max |weight "
               "difference|\n       %.3g (limit 1e-%d): %s\n", diff, TOL_EXP,
               ok ? "PASS" : "FAIL");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&sync);
    dt_train_result_free(&async);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
