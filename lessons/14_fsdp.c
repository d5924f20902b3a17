/* Lesson 14: FSDP / ZeRO, the training state cut into shards: the memory
 * table.
 *
 * What it teaches: DDP keeps N copies of everything: weights, gradients, and
 * the optimizer state, which with Adam in mixed precision is the biggest part
 * (an fp32 master weight, m and v: 12 bytes per weight, against 2 + 2 for the
 * fp16 weight and gradient). ZeRO gives each rank 1/N of each layer and keeps
 * only what that shard needs: stage 1 shards the optimizer state, stage 2 the
 * gradients too, stage 3 the weights too (gathered one layer at a time, when
 * used, then freed). This lesson trains each stage, in fp32 and fp16, and
 * prints the peak bytes rank 0 held beside the formulas; in fp32 each stage
 * reaches serial training's weights. Then stage 3 with --prefetch (FSDP2's
 * explicit prefetching): the next layer's gather runs on a communication
 * thread while this layer computes; it costs at most one more gathered layer
 * and saves, at best, every gather but the first; same weights, bit for bit.
 *
 * The code: lib/parallel/fsdp.c (dti_train_fsdp; layer_acquire gathers a layer
 * for stage 3, layer_reduce reduce-scatters its gradient, update steps the own
 * shards and, in stages 1 and 2, gathers them back; prefetched hands the next
 * gather to prefetch_thread; its comment is the lesson's long form),
 * lib/collectives/allgather.c (dt_allgather),
 * lib/collectives/reduce_scatter.c (dt_reduce_scatter_block).
 *
 * Run:  mpiexec -n 4 build/lessons/14_fsdp
 *       mpiexec -n 2 build/lessons/14_fsdp --hidden 256
 *       mpiexec -n 4 build/lessons/14_fsdp --trace fsdp.trace  (gathers, dtviz)
 *
 * --trace records one run, the one with --prefetch: in dtviz each layer's gather
 * (AG) runs on the communication thread beside the compute of the layer before it.
 *       mpiexec -n 2 build/lessons/14_fsdp --hidden 512  (prefetch's time)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 14_fsdp [options]\n"
    "Trains an MLP (Adam) with ZeRO stages 1, 2 and 3 in fp32 and fp16; "
    "prints the\n"
    "peak memory per rank beside the formulas, and checks fp32 against "
    "serial;\nthen stage 3 with and without --prefetch: the memory and the "
    "step time.\n"
    "  --steps S           training steps, 1 to 100 (default 3; the prefetch\n"
    "                      runs take at least 6, steps 2.. timed)\n"
    "  --hidden H          width of the hidden layers, 4 to 1024 (default 64)\n"
    DT_COMMON_USAGE
    "                      (one run: stage 3 with --prefetch, gathers beside "
    "compute)\n"
    "  --help              this text\n";

/* Adam divides each step by sqrt(v): a gradient that nearly cancels (a sum of
 * large terms ending near 0) carries its rounding, which depends on the order
 * of the sum, into its step at full relative size. So Adam's weights differ
 * from serial's by up to about lr/1000 where SGD's differ by 1e-7; a real
 * mistake is above 1e-3. */
enum { TOL_EXP = 4 };

/* The ZeRO formulas in dtlab's three columns, bytes per rank: w bytes per
 * working weight and gradient (4 fp32, 2 fp16), M per master weight (0 in
 * fp32, where the working weights are the masters; 4 in fp16), Kb of optimizer
 * state (8: Adam's m, v). */
static void formula(int zero, double P, int N, int w, int M, int Kb,
                    double f[3])
{
    f[0] = zero < 3 ? w * P + M * P / N : (w + M) * P / N;
    f[1] = zero == 1 ? w * P : w * P / N;
    f[2] = Kb * P / N;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), steps = 3, hidden = 64;
    dt_int_option io[] = {{"steps", 1, 100, &steps},
                          {"hidden", 4, 1024, &hidden}};
    dt_parse_int_options(argc, argv, io, 2, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_FSDP, &set);
    c.model.hidden = hidden;
    c.model.layers = 8;
    c.optim.kind = DT_ADAM;
    c.optim.lr = 0.01f;
    c.steps = steps;
    c.batch = (120 + n - 1) / n * n;     /* 120, or the next multiple of N */
    dt_train_usage_check(&c, "14_fsdp");  /* else a usage error: exit 2 */
    double P = (double)dt_mlp_nparams(&c.model);

    /* ==== the idea: who keeps what ==== */
    dt_printf0("ZeRO on %d rank%s: every layer is cut into %d shard%s, one per "
               "rank. Per rank,\nwith P weights (w bytes each: 4 in fp32, 2 "
               "in fp16; M = 4 bytes of fp32\nmaster weight in fp16, none in "
               "fp32; Adam's m and v: 8 bytes):\n\n"
               "  stage  params         grads   optimizer   what is sharded\n"
               "  ddp    wP + MP        wP      8P          nothing\n"
               "    1    wP + MP/N      wP      8P/N        optimizer state "
               "(and masters)\n"
               "    2    wP + MP/N      wP/N    8P/N        + gradients\n"
               "    3    (w + M)P/N     wP/N    8P/N        + weights\n\n"
               "In fp16 that is the ZeRO paper's 2 + 2 + 12 bytes a weight: "
               "stage 3 holds\n16P/N where DDP holds 16P.\n\n", n,
               n == 1 ? "" : "s", n, n == 1 ? "" : "s");

    /* ==== the library calls: stages 1..3 in fp32 and fp16, then serial ==== */
    dt_trace_pause(1);                  /* --trace: the prefetch run alone, below */
    dt_train_result res[2][3], ref;
    for (int prec = 0; prec < 2; prec++)
        for (int z = 1; z <= 3; z++) {
            c.zero = z;
            c.precision = prec ? DT_FP16 : DT_FP32;
            dt_train(&c, MPI_COMM_WORLD, &res[prec][z - 1]);
        }
    c.precision = DT_FP32;
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    double diff[3];
    for (int z = 0; z < 3; z++)
        diff[z] = dt_params_max_diff(res[0][z].params, ref.params,
                                     ref.nparams, MPI_COMM_WORLD);

    /* ==== the numbers: the memory table ==== */
    const double kib = 1024;
    int L = c.model.layers;
    dt_printf0("Peak KiB held by rank 0, measured (formula), for P = %zu + %d x %zu "
               "+ %zu\n= %.0f weights (out x in + out: layer 0, layers 1-%d, layer "
               "%d):\n\n"
               "  ZeRO prec      params           grads       optimizer    "
               "       total\n", dt_mlp_layer_size(&c.model, 0), L - 2,
               dt_mlp_layer_size(&c.model, 1), dt_mlp_layer_size(&c.model, L - 1),
               P, L - 2, L - 1);
    for (int prec = 0; prec < 2; prec++)
        for (int z = 1; z <= 3; z++) {
            const dt_train_result *r = &res[prec][z - 1];
            double f[3], got[3] = {(double)r->peak_params,
                                   (double)r->peak_grads,
                                   (double)r->peak_optim};
            formula(z, P, n, prec ? 2 : 4, prec ? 4 : 0, 8, f);
            dt_printf0("   %d   %s", z, prec ? "fp16" : "fp32");
            for (int k = 0; k < 3; k++)
                dt_printf0(" %6.1f (%5.1f)", got[k] / kib, f[k] / kib);
            dt_printf0(" %6.1f (%5.1f)\n", (got[0] + got[1] + got[2]) / kib,
                       (f[0] + f[1] + f[2]) / kib);
        }

    /* ==== the numbers: what the formula leaves out, byte for byte ==== */
    size_t Pp = 0, big = 0, nmax = 0;     /* padded weights, largest layer padded,
                                             largest layer */
    for (int l = 0; l < L; l++) {
        size_t nl = dt_mlp_layer_size(&c.model, l), pl = (nl + n - 1) / n * n;
        Pp += pl;
        big = pl > big ? pl : big;
        nmax = nl > nmax ? nl : nmax;
    }
    dt_printf0("\nMeasured = the formula on padded layers + what is held for a "
               "moment (KiB,\nthe three columns summed):\n\n"
               "  ZeRO prec  %8s  %8s  %9s  %8s  %9s  %9s\n"
               "             %8s  %8s  %9s  %8s  %9s\n", "formula", "+padding",
               "+gathered", "+whole", "+floats", "=measured", "", "", "layer",
               "gradient", "(fp16)");
    int mem_ok = 1;
    for (int prec = 0; prec < 2; prec++)
        for (int z = 1; z <= 3; z++) {
            const dt_train_result *r = &res[prec][z - 1];
            int w = prec ? 2 : 4;
            double f[3], fp[3], got[3] = {(double)r->peak_params,
                                          (double)r->peak_grads,
                                          (double)r->peak_optim};
            formula(z, P, n, w, prec ? 4 : 0, 8, f);
            formula(z, (double)Pp, n, w, prec ? 4 : 0, 8, fp);
            double gather = z == 3 ? (double)big * w : 0;   /* params */
            double whole = z > 1 ? (double)big * w : 0;     /* grads */
            double fl = prec ? 4.0 * nmax : 0;              /* each of the two */
            double want[3] = {fp[0] + gather + fl, fp[1] + whole + fl, fp[2]};
            for (int k = 0; k < 3; k++)
                mem_ok &= got[k] == want[k];
            double F = f[0] + f[1] + f[2], pad = fp[0] + fp[1] + fp[2] - F;
            dt_printf0("   %d   %s  %8.1f  %8.1f  %9.1f  %8.1f  %9.1f  %9.1f"
                       "%s\n", z, prec ? "fp16" : "fp32", F / kib, pad / kib,
                       gather / kib, whole / kib, 2 * fl / kib,
                       (got[0] + got[1] + got[2]) / kib,
                       got[0] == want[0] && got[1] == want[1] && got[2] == want[2]
                       ? "" : "  (not as explained!)");
        }
    dt_printf0("\npadding: each layer rounded up to N equal shards, Pp = sum of "
               "N ceil(n_l / N) =\n  %zu weights for P = %.0f. gathered layer "
               "(stage 3) and whole gradient (stages\n  2, 3): the largest "
               "padded layer, w x %zu bytes, held while it is used or cut.\n"
               "  as floats (fp16): one layer's weights and gradients, 2 x 4 x "
               "%zu bytes: the\n  CPU computes fp16 values in fp32.\n", Pp, P,
               big, nmax);

    /* ==== the numbers: bytes on the wire ==== */
    int bytes_ok = 1;
    if (n == 1) {
        dt_printf0("\nWith one rank nothing is cut: every stage holds it all. "
                   "Try -n 4.\n");
    } else {
        double W = 4.0 * Pp;            /* the padded weights, fp32 */
        dt_printf0("\nBytes sent per step by rank 0, fp32, for 4Pp = 4 x %zu = "
                   "%.0f bytes of weights\n(a reduce-scatter or an allgather of "
                   "them sends (N-1)/N x 4Pp):\n\n"
                   "  stage  measured  formula\n", Pp, W);
        for (int z = 1; z <= 3; z++) {
            int k = z == 3 ? 3 : 2;
            double got = (double)res[0][z - 1].bytes_sent / steps;
            double want = k * (n - 1) * W / n;
            bytes_ok &= got == want;
            dt_printf0("    %d  %9.0f  %d(N-1)/N x 4Pp = %dx%d/%d x %.0f = %.0f\n",
                       z, got, k, k, n - 1, n, W, want);
        }
        dt_printf0("\nStages 1 and 2 reduce-scatter the gradients and allgather "
                   "the updated weights;\nstage 3 gathers the weights twice "
                   "(forward and backward) and reduce-scatters\nthe gradients: "
                   "1.5 times stages 1 and 2, to hold 1/N of the weights.\n");
    }

    /* ==== prefetch: stage 3, the next layer gathered while this one computes ==== */
    c.zero = 3;
    c.steps = steps < 6 ? 6 : steps;          /* steps 2.. are timed */
    dt_train_result jit, pre;
    dt_train(&c, MPI_COMM_WORLD, &jit);
    c.prefetch = 1;
    dt_trace_pause(0);
    dt_train(&c, MPI_COMM_WORLD, &pre);
    dt_trace_pause(1);
    c.prefetch = 0;
    /* the gathers of a step: layers 0 .. L-1, then L-1 .. 0; prefetched, two in a
     * row are held at once (padded layers: `big` is the largest) */
    size_t two = 0;
    for (int i = 0; i + 1 < 2 * L; i++) {
        int a = i < L ? i : 2 * L - 1 - i, b = i + 1 < L ? i + 1 : 2 * L - 2 - i;
        size_t na = dt_mlp_layer_size(&c.model, a), nb = dt_mlp_layer_size(&c.model, b);
        size_t both = (na + n - 1) / n * n + (nb + n - 1) / n * n;
        two = both > two ? both : two;
    }
    double more = (double)pre.peak_params - (double)jit.peak_params;
    int same = dt_rank() == 0 &&
               !memcmp(pre.params, jit.params, ref.nparams * sizeof(float));
    mem_ok &= more == 4.0 * (two - big);
    dt_printf0("\n--prefetch (stage 3, fp32): a communication thread gathers "
               "layer l+1 while\nlayer l computes (and in backward l-1 while l "
               "does). Peak params on rank 0:\n  just in time %.1f KiB, "
               "prefetched %.1f KiB: %.0f bytes more\n  = 4 x (%zu - %zu): the "
               "largest two gathers in a row less the largest one,\n  at most one "
               "more gathered layer (4 x %zu = %zu bytes).\n",
               jit.peak_params / kib, pre.peak_params / kib, more, two, big,
               big, 4 * big);
    dt_timing tj = dt_train_step_timing(&jit), tp = dt_train_step_timing(&pre);
    double cj = dt_train_compute_timing(&jit).median;
    double sj = dt_timing_spread(tj), sp = dt_timing_spread(tp);
    char how[96];
    dt_train_step_words(&jit, how, sizeof how);
    dt_printf0("Time per step, %s:\n"
               "  just in time   %8.3f ms +-%3.0f%%  (gather, compute, gather, ...)\n"
               "  --prefetch     %8.3f ms +-%3.0f%%  (the next gather during "
               "compute)\n  compute alone  %8.3f ms        (forward, backward, "
               "loss, optimizer)\n  communication added %.3f ms just in time; "
               "prefetch %s %.3f ms.\n", how, tj.median * 1e3,
               100 * sj, tp.median * 1e3, 100 * sp, cj * 1e3, (tj.median - cj) * 1e3,
               tp.median <= tj.median ? "saved" : "cost",
               fabs(tj.median - tp.median) * 1e3);
    dt_timing_note(sj > sp ? sj : sp, n == 1 ? "With one rank a gather is a "
                   "copy: there is little to hide." : "Prefetch needs a core for "
                   "each rank's communication thread: with ranks and their "
                   "threads taking turns, it hides less, or costs time; with a "
                   "core each, it hides every gather but the first, as long as "
                   "a layer computes longer than the next one takes to gather.");
    int agreed[3] = {mem_ok, bytes_ok, same};
    MPI_Bcast(agreed, 3, MPI_INT, 0, MPI_COMM_WORLD);

    /* ==== the check ==== */
    double tol = pow(10, -TOL_EXP);
    int ok = diff[0] <= tol && diff[1] <= tol && diff[2] <= tol && agreed[0] &&
             agreed[1] && agreed[2];
    dt_printf0("\ncheck: fp32 ZeRO against serial training (Adam), max "
               "|weight difference|\n       stage 1 %.3g, stage 2 %.3g, "
               "stage 3 %.3g (limit 1e-%d, Adam);\n       memory as explained, "
               "byte for byte: %s; bytes sent as the formula: %s;\n       "
               "prefetched weights = just in time's, bit for bit: %s\n       %s\n",
               diff[0], diff[1], diff[2], TOL_EXP, agreed[0] ? "yes" : "NO",
               agreed[1] ? "yes" : "NO", agreed[2] ? "yes" : "NO",
               ok ? "PASS" : "FAIL");
    dt_printf0("\nThe code: lib/parallel/fsdp.c (dti_train_fsdp, layer_acquire, "
               "prefetched, layer_reduce, update)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&jit);
    dt_train_result_free(&pre);
    for (int prec = 0; prec < 2; prec++)
        for (int z = 0; z < 3; z++)
            dt_train_result_free(&res[prec][z]);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
