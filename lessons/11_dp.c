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
 * The code: lib/parallel/dp.c (dti_train_dp's loop: worker_step, server_step,
 * publish; its comment has the traffic per step and the asynchrony).
 *
 * Run:  mpiexec -n 4 build/lessons/11_dp
 *       mpiexec -n 4 build/lessons/11_dp --async 1   (less stale: still behind)
 *       mpiexec -n 3 build/lessons/11_dp --trace dp.trace   (then dtviz it)
 *
 * --trace records one run, the synchronous one: in dtviz every worker's gradients
 * go up to rank 0 and the weights come back down, all through the server's link;
 * dttrace's bytes per rank are those of the lesson's byte table.
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
    "                      (one run: the synchronous server)\n"
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
    size_t P = dt_mlp_nparams(&c.model), psi = P * sizeof(float);
    /* The messages of dp.c: the weights go with an 8-byte header (dp_hdr: the
     * version and the loss scale), the gradients after their 8-byte loss sum. */
    enum { HDR = 8 };

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
               "gradient of its B/N = %d rows of\nthe global batch of B = %d:\n\n"
               "     +-------------------------------+\n"
               "     | server: weights, optimizer    |\n"
               "     +-------------------------------+\n"
               "  %s%s\n  %s     gradients up, weights down\n  %s\n\n",
               n, n == 1 ? "" : "s", c.batch / n, c.batch, arrows,
               n > W ? " ..." : "", feet, names);
    char form[160] = "";                  /* P = (16+1)x64 + (64+1)x64 + ... */
    for (int l = 0, k = 0; l < c.model.layers; l++)
        k += snprintf(form + k, sizeof form - k, "%s(%d+1)x%d", l ? " + " : "",
                      dt_mlp_layer_in(&c.model, l),
                      dt_mlp_layer_out(&c.model, l));
    dt_printf0("The model has P = %s = %zu weights\n((in+1) x out per "
               "layer: a matrix and a bias), so one copy of them is\nPsi = 4P "
               "= %zu bytes.\n", form, P, psi);
    dt_printf0("One synchronous step: workers send gradients (Psi each), the "
               "server sums\nthem, steps, and sends Psi of weights back to "
               "each. The server's link carries\nW' = %d Psi each way per "
               "step (W' = N-1: it computes its own share); a\nworker's link, "
               "1 Psi.\n\n", n - 1);

    /* ==== the library calls: synchronous, asynchronous, serial ==== */
    dt_train_result sync, async, ref;
    dt_train(&c, MPI_COMM_WORLD, &sync);
    size_t recv_sync = dt_bytes_received();  /* dt_train reset it at start */
    dt_trace_pause(1);                  /* --trace: the synchronous run alone, above */
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

    /* ==== the numbers: bytes through each rank's link ====
     * Over S steps a worker sends S gradients and gets S-1 versions of the
     * weights (no one computes on the last); the server, W' times as many. */
    int S = steps, Wo = n - 1, server = rank == 0;
    unsigned long long msg = psi + HDR, want_sent, want_recv;
    want_sent = server ? (unsigned long long)Wo * (S - 1) * msg : S * msg;
    want_recv = server ? (unsigned long long)Wo * S * msg : (S - 1) * msg;
    char fs[48], fr[48];
    if (server) {
        snprintf(fs, sizeof fs, "%d x %d x %llu", Wo, S - 1, msg);
        snprintf(fr, sizeof fr, "%d x %d x %llu", Wo, S, msg);
    } else {
        snprintf(fs, sizeof fs, "%d x %llu", S, msg);
        snprintf(fr, sizeof fr, "%d x %llu", S - 1, msg);
    }
    dt_printf0("Bytes through each rank's link, synchronous run: S = %d steps, "
               "W' = %d. Each\ntransfer is Psi + 8 = %llu bytes: the weights "
               "after 8 bytes of version and loss\nscale, the gradients after "
               "their 8-byte loss. The server sends W'(S-1)(Psi+8)\nand "
               "receives W'S(Psi+8); a worker sends S(Psi+8) and receives "
               "(S-1)(Psi+8).\n"
               "  rank  role      sent B                     received B\n",
               S, Wo, msg);
    dt_printf_ordered("  %4d  %-6s  %8zu = %-15s  %8zu = %s\n", rank,
                      server ? "server" : "worker", sync.bytes_sent, fs,
                      recv_sync, fr);
    int bytes_ok = sync.bytes_sent == want_sent && recv_sync == want_recv;
    MPI_Allreduce(MPI_IN_PLACE, &bytes_ok, 1, MPI_INT, MPI_LAND,
                  MPI_COMM_WORLD);
    if (n == 1)
        dt_printf0("One rank is server and only worker: nothing crosses a "
                   "link. Try -n 4.\n");
    else
        dt_printf0("Per step, in Psi: the server sends W'(S-1)/S = %.2f (the "
                   "last step's weights\nare never sent) and receives W' = %d; "
                   "a worker sends 1 and receives\n(S-1)/S = %.2f. The server "
                   "moves W' = %d times a worker's bytes. A ring\nallreduce "
                   "would move 2(N-1)/N = %.2f Psi per rank per step, on every "
                   "link alike.\n", (double)Wo * (S - 1) / S, Wo,
                   (double)(S - 1) / S, Wo, 2.0 * (n - 1) / n);

    /* ==== the check ==== */
    int ok = diff <= pow(10, -TOL_EXP) && bytes_ok;
    dt_printf0("\ncheck: synchronous dp against serial training, max |weight "
               "difference|\n       %.3g (limit 1e-%d), and the bytes "
               "against their formulas: %s\n", diff, TOL_EXP,
               ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/parallel/dp.c (dti_train_dp, worker_step, "
               "server_step, publish)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&sync);
    dt_train_result_free(&async);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
