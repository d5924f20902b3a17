/* Lesson 13: gradient accumulation, K micro-batches, then one allreduce.
 *
 * What it teaches: a rank's share of the global batch need not go through the
 * model at once. Cut into K micro-batches, each goes forward and backward in
 * turn, adding its gradient into the same buffer, and only after the last one
 * are the gradients summed over the ranks and the optimizer stepped. Gradients
 * are sums, so the result is the gradient of the whole batch: the same weights
 * as one big batch, to rounding. What changes: the activations held are those
 * of one micro-batch (K times fewer), and the communication per step does not
 * grow with K, since it happens once per step.
 *
 * The code: lib/parallel/hybrid.c (dti_train_hybrid cuts each rank's rows into
 * M = K micro-batches), lib/parallel/pp.c (dti_pp_step: with one stage, the
 * micro-batches one after the other, their gradients adding up; only the last
 * backward reports layers done), lib/parallel/ddp.c (dti_ddp_layer_done,
 * dti_ddp_finish: the buckets, once per step).
 *
 * Run:  mpiexec -n 4 build/lessons/13_accum
 *       mpiexec -n 3 build/lessons/13_accum --accum 8
 *       mpiexec -n 2 build/lessons/13_accum --trace accum.trace
 *
 * --trace records one run, the one with accumulation: in dtviz each step is K
 * forwards and backwards without a message, then the one allreduce.
 */
#include <math.h>
#include <stdio.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 13_accum [options]\n"
    "Trains an MLP with DDP and gradient accumulation (K micro-batches per "
    "step),\n"
    "beside DDP without it and serial training.\n"
    "  --steps S           training steps, 1 to 200 (default 6)\n"
    "  --accum K           micro-batches per step, 1 to 48; K must divide "
    "each\n"
    "                      rank's rows of the global batch: 240 rows, or a few\n"
    "                      more so that N ranks share them in fours (default 4)\n"
    DT_COMMON_USAGE
    "                      (one run: accumulation over K micro-batches)\n"
    "  --help              this text\n";

enum { TOL_EXP = 5 };

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 6, K = 4;
    dt_int_option io[] = {{"steps", 1, 200, &steps}, {"accum", 1, 48, &K}};
    dt_parse_int_options(argc, argv, io, 2, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_DDP, &set);
    c.model.hidden = 64;
    c.model.layers = 3;
    c.steps = steps;
    int rows = ((240 + n - 1) / n + 3) / 4 * 4;  /* 240/N, up to a multiple of 4 */
    c.batch = rows * n;                          /* 240 for 1 to 6 ranks */
    c.accum = K;
    if (rows % K) {                              /* only --accum can fail */
        char why[256];
        int len = snprintf(why, sizeof why, "--accum %d does not divide the %d rows "
                           "of each rank; try", K, rows);
        for (int k = 1, first = 1; k <= 48 && k <= rows; k++)
            if (rows % k == 0 && len < (int)sizeof why - 8) {
                len += snprintf(why + len, sizeof why - len, "%s %d", first ? "" : ",",
                                k);
                first = 0;
            }
        dt_usage_error(usage, why);
    }
    dt_train_usage_check(&c, "13_accum");           /* else a usage error: exit 2 */
    int mb = rows / K;

    /* ==== the idea: one step, on every rank ==== */
    dt_printf0("DDP on %d rank%s, global batch %d: each rank has %d rows, cut "
               "into K = %d\nmicro-batches of %d. One step, on every "
               "rank:\n\n", n, n == 1 ? "" : "s", c.batch, rows, K, mb);
    for (int k = 0; k < K; k++)
        if (K <= 5 || k < 2 || k == K - 1)
            dt_printf0("  micro-batch %2d: forward, backward, grads += its "
                       "gradient%s\n", k,
                       k < K - 1 ? "   (no communication)" : "");
        else if (k == 2)
            dt_printf0("  ...\n");
    dt_printf0("  then: allreduce the grads (in buckets), optimizer step\n\n"
               "Each micro-batch's loss is divided by the global batch, %d, "
               "not by %d:\nso the K gradients add up to the gradient of the "
               "whole batch.\n\n", c.batch, mb);

    /* ==== the library calls: accum K, accum 1 (one big batch), serial ==== */
    dt_train_result acc, big, ref;
    dt_train(&c, MPI_COMM_WORLD, &acc);
    dt_trace_pause(1);                  /* --trace: the accumulation run alone, above */
    c.accum = 1;
    dt_train(&c, MPI_COMM_WORLD, &big);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    const dt_train_result *pair[3][2] = {{&acc, &ref}, {&big, &ref},
                                         {&acc, &big}};
    double diff[3];
    for (int k = 0; k < 3; k++)
        diff[k] = dt_params_max_diff(pair[k][0]->params, pair[k][1]->params,
                                     ref.nparams, MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    dt_printf0("Loss per step:\n  step   accum %-2d  accum 1   serial\n", K);
    for (int s = 0; s < steps; s++)
        dt_printf0("  %4d  %8.5f %8.5f %8.5f\n", s + 1, acc.loss[s],
                   big.loss[s], rank == 0 ? ref.loss[s] : 0.0);
    double per_acc = (double)acc.bytes_sent_max / steps;
    double per_big = (double)big.bytes_sent_max / steps;
    size_t P = dt_mlp_nparams(&c.model);
    double G = (double)P * sizeof(float), ring = 2.0 * (n - 1) / n * G;
    /* what the measured bytes are made of: G fits one bucket, so the ring runs once
     * on all P values; its chunks are uneven when N does not divide P, and the
     * busiest rank's share of them is the most any rank sends (dt_compress_bytes) */
    double chunks = 0;
    for (int r = 0; r < n; r++) {
        double b = (double)dt_compress_bytes(DT_COMPRESS_NONE, P, n, r);
        chunks = b > chunks ? b : chunks;
    }
    double uneven = chunks - ring, rest = per_big - chunks;
    if (n > 1) {
        dt_printf0("\nBytes sent per step by the busiest rank, for G = 4P = 4 x %zu "
                   "= %.0f bytes\nof gradients:\n"
                   "  accum %-2d                         %8.0f\n"
                   "  accum 1                          %8.0f\n"
                   "  the ring, 2(N-1)/N G = 2x%d/%d x G %8.0f\n"
                   "The same: one allreduce of the gradients per step, whatever "
                   "K. Measured is\nabove the ring by %.0f bytes:\n", P, G,
                   K, per_acc, per_big, n - 1, n, ring, per_big - ring);
        if (G <= c.bucket_kb * 1024.0)
            dt_printf0("  %4.0f  chunks N does not divide evenly: %zu values cut "
                       "in %d, the busiest\n        rank's chunks the larger "
                       "(dt_compress_bytes)\n"
                       "  %4.0f  %s\n", uneven, P, n, rest, rest == sizeof(double)
                       ? "the step's loss: one double, sent towards rank 0"
                       : "the step's loss (a double, sent towards rank 0) and "
                       "other small messages");
        else
            dt_printf0("  the step's loss (a double, sent towards rank 0), and "
                       "chunks N does not\n  divide evenly in each bucket.\n");
    }
    else
        dt_printf0("\nOne rank sends nothing, accumulating or not. Try "
                   "-n 4.\n");
    dt_printf0("Activations held at once: one micro-batch, %d / K = %d / %d = %d "
               "rows, not %d.\n", rows, rows, K, mb, rows);

    /* ==== the numbers: time per step ==== */
    dt_timing ta = dt_train_step_timing(&acc), tb = dt_train_step_timing(&big);
    double sa = dt_timing_spread(ta), sb = dt_timing_spread(tb);
    int enough = ta.runs >= 3;           /* steps to tell a difference from noise */
    char how[96];
    dt_train_step_words(&acc, how, sizeof how);
    dt_printf0("\nTime per step, %s:\n  accum %-2d  %8.3f ms +-%3.0f%%\n"
               "  accum 1   %8.3f ms +-%3.0f%%\n", how, K, ta.median * 1e3,
               100 * sa, tb.median * 1e3, 100 * sb);
    if (!enough)
        dt_printf0("Too few steps to tell a difference from noise: try --steps "
                   "10.\n");
    else if (K > 1 && dt_timing_compare(ta, tb) > 0)   /* slower beyond the noise */
        dt_printf0("Accumulating was slower, by more than the runs spread. The "
                   "arithmetic and the\nbytes are the same, but each of the K "
                   "passes pays a layer's fixed costs again on\n1/K of the rows, "
                   "and the buckets can leave only during the last "
                   "micro-batch's\nbackward (the gradients are complete only "
                   "then): overlap hides the allreduces\nbehind 1/K of backward, "
                   "not all of it. Or the machine was busier during the first\n"
                   "run: the two came one after the other.\n");
    else if (K > 1 && dt_timing_compare(ta, tb) < 0)
        dt_printf0("Accumulating was faster, by more than the runs spread: "
                   "nothing in it is\ncheaper (the same arithmetic, the same "
                   "bytes), so this is the machine: the two\nruns came one "
                   "after the other, and it was busier during the second.\n");
    else if (K > 1)
        dt_printf0("They differ by less than the runs spread (the ranges "
                   "median +- spread\noverlap): about the same time, as the same "
                   "arithmetic and bytes should take.\n");
    else
        dt_printf0("With K = 1 both runs train the same way: any difference is "
                   "the machine's.\n");
    dt_timing_note(sa > sb ? sa : sb, n == 1 ? "With one rank nothing is sent: "
                   "the two runs differ by the K smaller passes alone, which "
                   "the machine's noise can hide." : "These steps are short "
                   "and mostly waiting for the allreduce, so a rank that waits "
                   "its turn for a core costs either run more than the K "
                   "smaller passes do: which of the two comes out ahead changes "
                   "from run to run.");

    /* ==== the check ==== */
    double tol = pow(10, -TOL_EXP);
    int ok = diff[0] <= tol && diff[1] <= tol && diff[2] <= tol &&
             per_acc <= per_big;
    dt_printf0("\ncheck: max |weight difference| (limit 1e-%d)\n"
               "       accum %d vs serial %.3g, accum 1 vs serial %.3g,\n"
               "       accum %d vs accum 1 %.3g; bytes per step %s with K: "
               "%s\n", TOL_EXP, K, diff[0], diff[1], K, diff[2],
               per_acc <= per_big ? "do not grow" : "GROW",
               ok ? "PASS" : "FAIL");
    dt_printf0("\nThe code: lib/parallel/hybrid.c (dti_train_hybrid), lib/parallel/pp.c "
               "(dti_pp_step), lib/parallel/ddp.c (dti_ddp_layer_done, "
               "dti_ddp_finish)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&acc);
    dt_train_result_free(&big);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
