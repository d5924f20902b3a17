/* Lesson 17: mixed precision, an overflow shown, skipped and recovered.
 *
 * What it teaches: fp16 halves the bytes of weights and gradients, in memory
 * and on the wire, but holds nothing above 65504 and nothing below 2^-24.
 * Small gradients would flush to zero, so the loss is multiplied by a scale S
 * before backward and the optimizer divides S out again, in fp32, on fp32
 * master weights. Too large an S and a gradient overflows to inf: the step is
 * skipped (no update) and S halved; after a window of clean steps S doubles
 * again, to find the largest scale that fits. This lesson starts from a scale
 * far too large, so you can watch the first steps overflow, the scaler back
 * off, and training go on; then it counts the gradient bytes of fp16 against
 * fp32. Last, bf16: fp32's range in 16 bits, and why it needs no loss scale.
 *
 * The code: lib/parallel/mixed.c (dt_scaler_update is the rule; dti_scaler_decide
 * agrees on an overflow over the ranks and applies it; dti_master_step unscales
 * into the fp32 master weights; its comment is the lesson's long form),
 * lib/parallel/hybrid.c (dti_train_hybrid: where a step calls them).
 *
 * Run:  mpiexec -n 4 build/lessons/17_mixed
 *       mpiexec -n 4 build/lessons/17_mixed --scale-log2 16 --window 3
 *       mpiexec -n 2 build/lessons/17_mixed --trace mixed.trace
 *
 * --trace records one run, the fp16 one with its loss scaler; the fp32 and serial
 * runs after it are left out.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 17_mixed [options]\n"
    "Trains an MLP with DDP in fp16 with dynamic loss scaling, starting from "
    "a scale\n"
    "that overflows; prints the scaler's decisions, and fp16's bytes against "
    "fp32's.\n"
    "  --steps S           training steps, 2 to 200 (default 24)\n"
    "  --scale-log2 E      initial loss scale 2^E, 0 to 60 (default 28)\n"
    "  --window W          clean steps before the scale doubles, 1 to 10^6\n"
    "                      (default 8; real runs use 2000)\n"
    DT_COMMON_USAGE
    "                      (one run: fp16, the scaler at work)\n"
    "  --help              this text\n";

enum { TOL_EXP = 5, MAXSTEPS = 200 };

/* dt_train calls this on rank 0 after each step: the loss and the scaler's
 * verdict (the part of the step's report from "overflow" or "scale" on). The
 * scale the step used goes into ctx, for the check. */
static void print_step(const dt_step_report *r, void *ctx)
{
    float *used = ctx;
    const char *v = strstr(r->extra, "overflow");
    if (v == NULL)
        v = strstr(r->extra, "scale");
    const char *num = v ? strstr(v, "scale ") : NULL;
    used[r->step - 1] = num ? strtof(num + 6, NULL) : NAN;
    printf("  %4d  %7.5f  %s\n", r->step, (double)r->loss, v ? v : "");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 24, E = 28, window = 8;
    dt_int_option io[] = {{"steps", 2, MAXSTEPS, &steps},
                          {"scale-log2", 0, 60, &E},
                          {"window", 1, 1000000, &window}};
    dt_parse_int_options(argc, argv, io, 3, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_DDP, &set);
    c.model.hidden = 64;
    c.model.layers = 3;
    c.steps = steps;
    c.batch = (120 + n - 1) / n * n;     /* 120, or the next multiple of N */
    c.precision = DT_FP16;
    c.scaler.init = ldexpf(1, E);
    c.scaler.window = window;
    dt_train_usage_check(&c, "17_mixed");  /* else a usage error: exit 2 */

    /* ==== the idea ==== */
    double S = c.scaler.init;
    dt_printf0("DDP on %d rank%s in fp16. One step:\n\n"
               "  master (fp32) --round--> weights (fp16) --forward, backward "
               "of S x loss-->\n  gradients (fp16) --allreduce (fp16)--> any "
               "inf or NaN?\n"
               "     yes: skip the step, S = S / 2\n"
               "     no:  master -= lr x gradients / S (in fp32); after %d "
               "clean steps in\n          a row, S = 2 S\n\n"
               "The scale starts at 2^%d = %.0f. The gradient of the logits,\n"
               "(softmax - onehot) / batch, is then up to S / batch = %.0f: "
               "%s\nfp16's 65504. A weight's gradient sums activation x logit "
               "gradient over the\n%d rows of the batch, so there the 1/batch "
               "cancels: S must stay under 65504\nover the largest weight "
               "gradient, which only training finds out.\n\n"
               "  step     loss  the scaler\n",
               n, n == 1 ? "" : "s", window, E, S, S / c.batch,
               S / c.batch > 65504 ? "far past" : "within", c.batch);

    /* ==== the library call, step by step ==== */
    dt_train_result h, f, ref;
    float used[MAXSTEPS];
    c.on_step = print_step;
    c.ctx = used;
    dt_train(&c, MPI_COMM_WORLD, &h);
    dt_trace_pause(1);                  /* --trace: the fp16 run alone, above */
    c.on_step = NULL;
    int skipped = 0;
    for (int s = 0; s < steps; s++)
        skipped += h.skipped[s];
    dt_printf0("\n%d of %d steps skipped; the weights moved on the other "
               "%d.\n", skipped, steps, steps - skipped);
    for (int s = 0; s < steps && rank == 0 && h.skipped[0]; s++)
        if (!h.skipped[s]) {                 /* the first scale that fitted */
            dt_printf0("The first clean step used S = 2^%.0f: the largest "
                       "gradients are of the\norder of 65504 / S = %.2f (the "
                       "weights did not move while S fell), not 1/%d.\n",
                       log2(used[s]), 65504 / used[s], c.batch);
            break;
        }

    /* ==== the same in fp32 (the bytes, the equality), and serially ==== */
    c.precision = DT_FP32;
    dt_train(&c, MPI_COMM_WORLD, &f);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    double diff = dt_params_max_diff(f.params, ref.params, ref.nparams,
                                     MPI_COMM_WORLD);
    /* replay the decisions with the public scaler: each step must have used
     * the scale the rule gives after the overflows before it (what on_step
     * saw, on rank 0) */
    int rule = 1;
    dt_scaler sc;
    dt_scaler_init(&sc, &c.scaler);
    for (int k = 0; k < steps && rank == 0; k++) {
        rule &= fabsf(used[k] - sc.scale) <= 1e-5f * sc.scale;
        dt_scaler_update(&sc, h.skipped[k]);
    }
    MPI_Bcast(&rule, 1, MPI_INT, 0, MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    double b16 = (double)h.bytes_sent_max / steps;
    double b32 = (double)f.bytes_sent_max / steps;
    size_t P = dt_mlp_nparams(&c.model);
    double ring = 2.0 * (n - 1) / n * (double)P;    /* ring: x bytes each */
    if (n > 1)
        dt_printf0("\nBytes sent per step by the busiest rank, for P = %zu "
                   "weights:\n"
                   "        measured  the ring, 2(N-1)/N x wP  difference\n"
                   "  fp16  %8.0f  2x%d/%d x 2 x %zu = %8.0f  %6.0f\n"
                   "  fp32  %8.0f  2x%d/%d x 4 x %zu = %8.0f  %6.0f\n"
                   "The differences: the step's loss, a double on its way to "
                   "rank 0 (8 bytes);\nin fp16 also the overflow flag, an int "
                   "every rank must agree on (an allreduce);\nand chunks N does "
                   "not divide evenly. Ratio %.0f / %.0f = %.3f: half.\n", P,
                   b16, n - 1, n, P, 2 * ring, b16 - 2 * ring, b32, n - 1, n, P,
                   4 * ring, b32 - 4 * ring, b16, b32, b16 / b32);
    else
        dt_printf0("\nOne rank sends nothing; try -n 4 to see fp16 halve the "
                   "bytes.\n");
    dt_printf0("Final loss: fp16 %.5f, fp32 %.5f (fp32 skipped no step).\n",
               h.loss[steps - 1], f.loss[steps - 1]);

    /* ==== bf16: fp32's exponent, fewer digits, no scale ==== */
    dt_printf0("\nbf16 keeps fp32's 8 exponent bits and 8 significant bits; fp16 has 5 "
               "and 11.\nWhat each keeps of a gradient of size g (the relative error of "
               "the value\nstored; 1 = lost):\n       g      fp16      bf16\n");
    int fp16_lost = 0, bf16_lost = 0;
    for (int e = -2; e >= -12; e -= 2) {
        float g = 1.37f * powf(10, (float)e);
        double eh = fabs(dt_half_to_float(dt_float_to_half(g)) - g) / g;
        double eb = fabs(dt_bf16_to_float(dt_float_to_bf16(g)) - g) / g;
        fp16_lost += eh >= 0.5, bf16_lost += eb >= 0.5;
        dt_printf0("  %6.0e  %8.1e  %8.1e\n", (double)g, eh, eb);
    }
    dt_printf0("fp16 lost %d of these %d sizes (below 2^-24 = 6e-8 nothing is left, "
               "below 6e-5\ndigits go), bf16 %d: it stores 1e-12 as well as 1, to about "
               "%.1g, so a gradient\nneeds no scale to survive, at the cost of precision "
               "everywhere.\nThe same training, no scale at all:\n", fp16_lost, 6,
               bf16_lost, ldexp(1, -9));
    dt_train_result u, bf;
    c.precision = DT_FP16, c.scaler.init = 1, c.scaler.window = 1000000;
    dt_train(&c, MPI_COMM_WORLD, &u);
    c.precision = DT_BF16;
    dt_train(&c, MPI_COMM_WORLD, &bf);
    double du = dt_params_max_diff(u.params, f.params, f.nparams, MPI_COMM_WORLD);
    double db = dt_params_max_diff(bf.params, f.params, f.nparams, MPI_COMM_WORLD);
    dt_printf0("  fp16, scale 1: final loss %.5f, max |weight - fp32's| %.3g\n"
               "  bf16, no scale: final loss %.5f, max |weight - fp32's| %.3g\n"
               "  (fp32: %.5f)\n", u.loss[steps - 1], du, bf.loss[steps - 1], db,
               f.loss[steps - 1]);
    int bf_trains = bf.loss[steps - 1] < bf.loss[0];
    dt_printf0("%s\n", du > 2 * db ? "Unscaled fp16 strays further from fp32 than bf16: its "
               "small gradients lost digits or\nvanished." : db > 2 * du ? "bf16 strays "
               "further here: its 8 bits round every value, and this model's\ngradients are "
               "large enough for fp16 unscaled." : "The two stray about as far on this small "
               "model: its gradients stay above fp16's\nfloor; the table above shows where "
               "they would not.");
    dt_train_result_free(&u);
    dt_train_result_free(&bf);

    /* ==== the check ==== */
    int moved = 0;                   /* updates the last step's loss reflects */
    for (int s = 0; s + 1 < steps; s++)
        moved += !h.skipped[s];
    int recovered = moved < 5 || h.loss[steps - 1] < h.loss[0];
    int half = n == 1 || b16 <= 0.55 * b32;
    int ok = diff <= pow(10, -TOL_EXP) && rule && recovered && half && bf_trains &&
             bf16_lost == 0;
    dt_printf0("\ncheck: every step used the scale the rule gives "
               "(dt_scaler_update): %s\n"
               "       training recovered (the loss fell below step 1's): %s\n"
               "       fp16 gradient bytes about half of fp32's: %s\n"
               "       fp32 DDP against serial, max |weight difference| %.3g "
               "(limit 1e-%d)\n       bf16 kept every size and trained without a "
               "scale: %s\n       %s\n", rule ? "yes" : "NO",
               moved < 5 ? "too few updates" : recovered ? "yes" : "NO",
               half ? "yes" : "NO", diff, TOL_EXP, bf16_lost == 0 && bf_trains ? "yes" :
               "NO", ok ? "PASS" : "FAIL");
    dt_printf0("\nThe code: lib/parallel/mixed.c (dt_scaler_update, "
               "dti_scaler_decide, dti_master_step), lib/half.c (dt_float_to_bf16)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&h);
    dt_train_result_free(&f);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
