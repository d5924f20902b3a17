/* Lesson 15: tensor parallelism, one layer's matrix cut over the ranks.
 *
 * What it teaches: when a layer is too big for one device, cut its weight
 * matrix. Megatron-LM pairs the layers: the first of a pair is cut by its
 * output columns, so each rank computes some of the hidden features whole; the
 * activation works feature by feature, so each rank feeds its features
 * straight into its slice of the second layer, cut by its input rows; the
 * pair's output is the sum of the ranks' partial outputs: one allreduce
 * forward (and one for the input gradient, backward). The simpler scheme cuts
 * every layer by columns and allgathers every output: twice the collectives.
 * This lesson trains both, counts their bytes, and checks both against serial
 * training.
 *
 * Run:  mpiexec -n 4 build/lessons/15_tp
 *       mpiexec -n 3 build/lessons/15_tp --hidden 120
 *       mpiexec -n 2 build/lessons/15_tp --trace tp.trace
 */
#include <math.h>
#include <stdio.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 15_tp [options]\n"
    "Trains an MLP with tensor parallelism over the N ranks, Megatron pairs "
    "and the\n"
    "allgather scheme, beside serial training.\n"
    "  --steps S           training steps, 1 to 200 (default 6)\n"
    "  --hidden H          width of the hidden layers, a multiple of N, 1 to "
    "4096\n"
    "                      (default 60, or the next multiple of N: 63 on 7)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TOL_EXP = 5 };

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 6;
    int H = (60 + n - 1) / n * n;        /* 60, or the next multiple of N */
    dt_int_option io[] = {{"steps", 1, 200, &steps}, {"hidden", 1, 4096, &H}};
    dt_parse_int_options(argc, argv, io, 2, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 10, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_TP, &set);
    c.model.hidden = H;
    c.model.layers = 4;
    c.steps = steps;
    c.batch = 64;
    char why[256];
    if (dt_train_check(&c, n, why, sizeof why))  /* N does not divide H */
        dt_usage_error(usage, why);

    /* ==== the idea: a layer pair, cut over the ranks ==== */
    int shown = n < 5 ? n : 5, h = H / n;
    dt_printf0("Tensor parallel on %d rank%s: every rank holds 1/%d of each "
               "weight matrix and\nsees the whole batch (%d rows). Layers 0-1 "
               "and 2-3 are Megatron pairs; x is\nwhole on every rank, h_t = "
               "rank t's %d of the %d hidden features:\n\n", n,
               n == 1 ? "" : "s", n, c.batch, h, H);
    dt_printf0("          layer 0: rows of W cut     layer 1: columns of W "
               "cut\n");
    for (int t = 0; t < shown; t++) {
        int mid = t == (shown - 1) / 2;            /* where the sum is drawn */
        dt_printf0("  rank %d  x -> W0[%3d..%3d, :] -> relu -> W1[:, %3d..%3d]"
                   " -> y%d %s\n", t, t * h, (t + 1) * h - 1, t * h,
                   (t + 1) * h - 1, t, n == 1 ? "= y" : mid ? "-+- sum" : " |");
    }
    if (n > shown)
        dt_printf0("  ...\n");
    dt_printf0("\nsum: an allreduce. Forward: no communication inside the "
               "pair, one allreduce\nof the (B, out) partial outputs at its "
               "end. Backward: one allreduce of the\ninput gradient. The "
               "allgather scheme cuts every layer by rows of W (output\n"
               "columns) and allgathers each output: a collective per layer "
               "each way, not\nper pair.\n\n");

    /* ==== the library calls: Megatron, allgather, serial ==== */
    dt_train_result meg, gat, ref;
    c.tp_style = DT_TP_MEGATRON;
    dt_train(&c, MPI_COMM_WORLD, &meg);
    c.tp_style = DT_TP_ALLGATHER;
    dt_train(&c, MPI_COMM_WORLD, &gat);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    const dt_train_result *run[2] = {&meg, &gat};
    double diff[2];
    for (int k = 0; k < 2; k++)
        diff[k] = dt_params_max_diff(run[k]->params, ref.params, ref.nparams,
                                     MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    char a[32], b[32], p[32];
    dt_printf0("Bytes sent per step, and weights held, on each rank:\n"
               "  rank   Megatron  allgather    weights\n");
    dt_printf_ordered("  %4d  %9s  %9s  %9s\n", rank,
                      dt_format_bytes((double)meg.bytes_sent / steps, a,
                                      sizeof a),
                      dt_format_bytes((double)gat.bytes_sent / steps, b,
                                      sizeof b),
                      dt_format_bytes((double)meg.peak_params, p, sizeof p));
    double mb = (double)meg.bytes_sent_max, gb = (double)gat.bytes_sent_max;
    size_t np = dt_mlp_nparams(&c.model);
    if (n > 1)
        dt_printf0("The allgather scheme sends %.2f times Megatron's bytes "
                   "(busiest rank).\nEach rank holds 1/%d of the %zu weights; "
                   "the whole model is %s.\n", gb / mb, n, np,
                   dt_format_bytes(np * 4.0, a, sizeof a));
    else
        dt_printf0("With one rank nothing is cut and nothing sent. Try "
                   "-n 4.\n");
    dt_printf0("Time per step: Megatron %.2f ms, allgather %.2f ms.\n",
               meg.seconds_per_step * 1e3, gat.seconds_per_step * 1e3);

    /* ==== the check ==== */
    double tol = pow(10, -TOL_EXP);
    int ok = diff[0] <= tol && diff[1] <= tol;
    dt_printf0("\ncheck: tensor parallel against serial training, max |weight "
               "difference|\n       Megatron %.3g, allgather %.3g (limit "
               "1e-%d): %s\n", diff[0], diff[1], TOL_EXP,
               ok ? "PASS" : "FAIL");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&meg);
    dt_train_result_free(&gat);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
