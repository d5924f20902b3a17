/* Lesson 15: tensor parallelism, one layer's matrix cut over the ranks.
 *
 * What it teaches: when a layer is too big for one device, cut its weight
 * matrix. Megatron-LM pairs the layers: the first of a pair is cut by its
 * outputs (rows of W, which is out x in), so each rank computes some of the
 * hidden features whole; the activation works feature by feature, so each rank
 * feeds its features straight into its slice of the second layer, cut by its
 * inputs (columns of W); the
 * pair's output is the sum of the ranks' partial outputs: one allreduce
 * forward (and one for the input gradient, backward). The simpler scheme cuts
 * every layer by outputs and allgathers every output: twice the collectives.
 * This lesson trains both, counts their bytes, and checks both against serial
 * training.
 *
 * The code: lib/parallel/tp.c (dti_tp_split picks each layer's cut;
 * dti_tp_allreduce is g and f, dti_tp_allgather_cols the simpler scheme's
 * gather; its comment is the lesson's long form), lib/parallel/model.c
 * (dti_model_forward, dti_model_backward: where each layer calls them).
 *
 * Run:  mpiexec -n 4 build/lessons/15_tp
 *       mpiexec -n 3 build/lessons/15_tp --hidden 120
 *       mpiexec -n 2 build/lessons/15_tp --trace tp.trace
 *
 * --trace records one run, Megatron's: in dtviz a g ends each pair's forward and
 * an f each pair's backward, but layers 0-1's (the input needs no gradient).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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
    "                      (one run: Megatron's pairs)\n"
    "  --help              this text\n";

enum { TOL_EXP = 5 };

/* The bytes this rank sends in one collective, measured on its own: 'a' a
 * dt_allreduce of n floats, 'g' a dt_allgather of blocks of n floats, 'r' the
 * reduce of one double to rank 0 (the step's loss). What the formulas of the
 * training's bytes are made of. */
static double sent_by(char what, int n)
{
    float *x = calloc((size_t)n * (dt_size() + 1) + 1, sizeof(float));
    double v = 0, sum = 0;
    size_t before = dt_bytes_sent();
    if (what == 'a')
        dt_allreduce(MPI_IN_PLACE, x, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    else if (what == 'g')
        dt_allgather(x, n, MPI_FLOAT, x + n, n, MPI_FLOAT, MPI_COMM_WORLD);
    else
        dt_reduce(&v, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    free(x);
    return (double)(dt_bytes_sent() - before);
}

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
    dt_printf0("          layer 0: outputs cut       layer 1: inputs cut\n"
               "          (rows of W)                (columns of W)\n");
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
               "allgather scheme cuts every layer by its outputs (rows of\n"
               "W) and allgathers each output: a collective per layer "
               "each way, not per\npair.\n\n");

    /* ==== the library calls: Megatron, allgather, serial ==== */
    dt_train_result meg, gat, ref;
    c.tp_style = DT_TP_MEGATRON;
    dt_train(&c, MPI_COMM_WORLD, &meg);
    dt_trace_pause(1);                  /* --trace: Megatron's run alone, above */
    c.tp_style = DT_TP_ALLGATHER;
    dt_train(&c, MPI_COMM_WORLD, &gat);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    const dt_train_result *run[2] = {&meg, &gat};
    double diff[2];
    for (int k = 0; k < 2; k++)
        diff[k] = dt_params_max_diff(run[k]->params, ref.params, ref.nparams,
                                     MPI_COMM_WORLD);

    /* ==== the numbers: bytes and weights, beside their formulas ==== */
    dt_printf0("Bytes sent per step, and weights held, on each rank, in KiB:\n"
               "  rank   Megatron  allgather    weights\n");
    dt_printf_ordered("  %4d  %9.1f  %9.1f  %9.1f\n", rank,
                      meg.bytes_sent / 1024.0 / steps, gat.bytes_sent / 1024.0 /
                      steps, meg.peak_params / 1024.0);
    /* per step, one micro-batch of B rows: Megatron's g after layers 1 and 3,
     * its f before layer 2 (layer 0 needs no input gradient); the allgather
     * scheme's gather after every layer, its f before layers 3, 2, 1 */
    int B = c.batch, out = c.model.out, in = c.model.in, wo = (out + n - 1) / n;
    double aH = sent_by('a', B * H), aO = sent_by('a', B * out);
    double gH = sent_by('g', B * h), gO = sent_by('g', B * wo), r = sent_by('r', 1);
    double fm = 2 * aH + aO + r, fg = 3 * gH + gO + 3 * aH + r;
    /* the weights a rank holds: an output cut keeps h rows of W and h biases,
     * an input cut h columns of W and the whole bias */
    double w[4] = {h * (in + 1.0), H * (h + 1.0), h * (H + 1.0), out * (h + 1.0)};
    double fw = 4 * (w[0] + w[1] + w[2] + w[3]);
    int mine = meg.bytes_sent == fm * steps && gat.bytes_sent == fg * steps &&
               meg.peak_params == fw, agree = 0;
    MPI_Allreduce(&mine, &agree, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    double mb = (double)meg.bytes_sent_max, gb = (double)gat.bytes_sent_max;
    size_t np = dt_mlp_nparams(&c.model);
    if (n > 1) {
        dt_printf0("\nPer step, with B = %d rows: Megatron sums after layers 1 "
                   "and 3 (g) and before\nlayer 2 (f; layer 0's input needs no "
                   "gradient); the allgather scheme gathers\nafter each of the 4 "
                   "layers and sums before layers 3, 2 and 1. With a(n) and g(n)\n"
                   "the bytes one dt_allreduce of n floats, or one dt_allgather "
                   "of blocks of n\nfloats, sends from a rank (each measured "
                   "alone; below 64 KiB dt_allreduce takes\nrecursive doubling: "
                   "lesson 09), and l those of the loss on its way to rank 0,\n"
                   "on rank 0:\n", B);
        dt_printf0("  Megatron  = 2 a(B x H) + a(B x out) + l\n"
                   "            = 2 x %.0f + %.0f + %.0f = %.0f\n"
                   "  allgather = 3 g(B x H/N) + g(B x ceil(out/N)) + 3 a(B x H) "
                   "+ l\n            = 3 x %.0f + %.0f + 3 x %.0f + %.0f = %.0f\n",
                   aH, aO, r, fm, gH, gO, aH, r, fg);
        if (n & (n - 1))
            dt_printf0("(%d is not a power of two: recursive doubling folds some "
                       "ranks into others first,\nso ranks send different amounts; "
                       "each is checked against its own a, g, l.)\n", n);
        dt_printf0("On the busiest rank the allgather scheme sends %.0f / %.0f = "
                   "%.2f times\nMegatron's bytes.\n", gb / steps, mb / steps,
                   gb / mb);
        dt_printf0("Weights on a rank, h = H/N = %d (an output cut keeps h rows "
                   "of W and h biases,\nan input cut h columns of W and the whole "
                   "bias):\n"
                   "  h(in+1) + H(h+1) + h(H+1) + out(h+1) = %.0f + %.0f + %.0f "
                   "+ %.0f floats\n  = %.0f bytes, a little over 4P/N = 4 x %zu/%d "
                   "= %.0f bytes: the input\n  cuts' whole biases.\n", h, w[0],
                   w[1], w[2], w[3], fw, np, n, 4.0 * np / n);
    } else {
        dt_printf0("With one rank nothing is cut and nothing sent. Try "
                   "-n 4.\n");
    }

    /* ==== the numbers: time per step ==== */
    dt_timing tm = dt_train_step_timing(&meg), tg = dt_train_step_timing(&gat);
    double sm = dt_timing_spread(tm), sg = dt_timing_spread(tg);
    int enough = tm.runs >= 3;           /* steps to tell a difference from noise */
    char how[96];
    dt_train_step_words(&meg, how, sizeof how);
    dt_printf0("\nTime per step, %s:\n"
               "  Megatron   %8.3f ms +-%3.0f%%%s\n"
               "  allgather  %8.3f ms +-%3.0f%%%s\n", how, tm.median * 1e3,
               100 * sm, n > 1 ? "   (3 collectives a step)" : "", tg.median * 1e3,
               100 * sg, n > 1 ? "   (7 collectives a step)" : "");
    if (n > 1 && enough && dt_timing_compare(tm, tg) > 0)   /* slower beyond the noise */
        dt_printf0("Megatron was slower, by more than the runs spread, with "
                   "fewer collectives and\nfewer bytes: nothing in it costs "
                   "more, so the likely cause is the machine: the\nruns came "
                   "one after the other, and it was busier during Megatron's.\n");
    dt_timing_note(sm > sg ? sm : sg, n == 1 ? "With one rank nothing is sent "
                   "and both schemes compute the same: the two times differ "
                   "only by the machine's noise." : "These steps are short and mostly "
                   "communication: with ranks taking turns on the cores, each "
                   "message step of a collective can cost a scheduler switch, "
                   "which favours the scheme with fewer collectives (Megatron) "
                   "even more than its bytes do, by an amount that changes from "
                   "run to run.");

    /* ==== the check ==== */
    double tol = pow(10, -TOL_EXP);
    int ok = diff[0] <= tol && diff[1] <= tol && agree;
    dt_printf0("\ncheck: tensor parallel against serial training, max |weight "
               "difference|\n       Megatron %.3g, allgather %.3g (limit "
               "1e-%d);\n       bytes and weights on every rank as the "
               "formulas: %s\n       %s\n", diff[0], diff[1], TOL_EXP,
               agree ? "yes" : "NO", ok ? "PASS" : "FAIL");
    dt_printf0("\nThe code: lib/parallel/tp.c (dti_tp_split, dti_tp_allreduce, "
               "dti_tp_allgather_cols)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&meg);
    dt_train_result_free(&gat);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
