/* Lesson 20: compressed gradients, fewer bytes for each step's allreduce.
 *
 * What it teaches: DDP sends every gradient as a 4-byte float, twice around
 * the ring. Gradients can travel smaller: as fp16 (2 bytes), as int8 with a
 * scale per chunk (1 byte), or as one sign bit with the chunk's mean |g| as
 * its scale (1 bit, 32 times fewer bytes). fp16 halves still add up on the
 * way; int8 and sign codes do not, so they take 1-bit Adam's compressed
 * allreduce: an all-to-all of compressed chunks, each rank sums its chunk,
 * compresses it again, and an allgather shares them. Sign loses a lot each
 * step; error feedback keeps what was lost and adds it to the next step's
 * gradient, so nothing is lost for good, only delayed. This lesson trains
 * the same model each way and prints the losses side by side and the bytes
 * each rank sent, measured, beside the model's formula with the numbers put in.
 *
 * The code: lib/parallel/compress.c (dti_encode, dti_decode,
 * dti_compressor_allreduce, dt_compress_bytes), lib/parallel/ddp.c
 * (reduce_bucket), lib/collectives/allreduce.c (dt_allreduce_ring).
 *
 * Run:  mpiexec -n 4 build/lessons/20_compress
 *       mpiexec -n 3 build/lessons/20_compress --steps 30
 *       mpiexec -n 2 build/lessons/20_compress --trace compress.trace
 *
 * --trace records one run, sign with error feedback: in dtviz each step's bucket
 * goes through the all-to-all and the allgather of sign codes.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 20_compress [options]\n"
    "Trains an MLP with DDP, its gradients uncompressed, as fp16, int8 and sign\n"
    "(with and without error feedback); prints the losses and the bytes sent.\n"
    "  --steps S           training steps, 2 to 200 (default 10)\n"
    DT_COMMON_USAGE
    "                      (one run: sign, with error feedback)\n"
    "  --help              this text\n";

enum { NV = 5, TOL_EXP = 5 };

static const struct {
    const char *name;
    dt_compress k;
    int feedback;
} variant[NV] = {
    {"none", DT_COMPRESS_NONE, 1}, {"fp16", DT_COMPRESS_FP16, 1},
    {"int8", DT_COMPRESS_INT8, 1}, {"sign", DT_COMPRESS_SIGN, 1},
    {"sign -ef", DT_COMPRESS_SIGN, 0},
};

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 10;
    dt_int_option io[] = {{"steps", 2, 200, &steps}};
    dt_parse_int_options(argc, argv, io, 1, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_DDP, &set);
    c.model.hidden = 64;
    c.model.layers = 3;
    c.steps = steps;
    c.batch = (240 + n - 1) / n * n;     /* about 240 rows, shared evenly */
    c.bucket_kb = 1 << 16;               /* one bucket: the formulas stay simple */
    dt_train_usage_check(&c, "20_compress");        /* else a usage error: exit 2 */
    size_t G = dt_mlp_nparams(&c.model), lo, hi;
    dt_chunk_bounds(G, n, 0, &lo, &hi);          /* chunk 0, the largest */
    size_t ch = hi - lo;

    /* ==== the idea ==== */
    char sum[128] = "";                         /* G's formula: in x out + out a layer */
    for (int l = 0; l < c.model.layers; l++)
        snprintf(sum + strlen(sum), sizeof sum - strlen(sum), "%s%d x %d + %d",
                 l ? " + " : "", dt_mlp_layer_in(&c.model, l),
                 dt_mlp_layer_out(&c.model, l), dt_mlp_layer_out(&c.model, l));
    dt_printf0("DDP on %d rank%s, G = %zu gradients in one bucket (in x out + out a "
               "layer:\n%s), cut into N = %d chunk%s of %zu%s.\n"
               "How each way sends them (sizes per value):\n"
               "  none  fp32 ring allreduce: reduce-scatter, allgather      32 bits\n"
               "  fp16  the same ring on halves (they add up on the way)     16 bits\n"
               "  int8  q = round(g / s), s = max|g| / 127 per chunk          8 bits\n"
               "  sign  +-s, s = mean|g| per chunk                             1 bit\n"
               "int8 and sign use the compressed allreduce of 1-bit Adam:\n"
               "  compress chunks -> all-to-all (chunk j to rank j) -> rank j sums\n"
               "  its chunk -> compresses it -> allgather -> everyone decompresses\n"
               "Error feedback (sign): e = what compression lost, added to the next\n"
               "step's gradient before compressing; 'sign -ef' runs without it.\n\n",
               n, n == 1 ? "" : "s", G, sum, n, n == 1 ? "" : "s", ch,
               G % n ? " or one less" : "");

    /* ==== the library calls: serial, then DDP each way ==== */
    dt_train_result ref, res[NV];
    dt_trace_pause(1);                  /* --trace: sign with feedback alone, below */
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    for (int v = 0; v < NV; v++) {
        c.compress = variant[v].k;
        c.compress_feedback = variant[v].feedback;
        dt_trace_pause(c.compress != DT_COMPRESS_SIGN || !c.compress_feedback);
        dt_train(&c, MPI_COMM_WORLD, &res[v]);
    }
    dt_trace_pause(1);
    double vs_serial = dt_params_max_diff(res[0].params, ref.params, G, MPI_COMM_WORLD);
    double fp16_diff = dt_params_max_diff(res[1].params, res[0].params, G,
                                          MPI_COMM_WORLD);

    /* ==== the numbers: losses ==== */
    dt_printf0("Loss per step:\n  step  ");
    for (int v = 0; v < NV; v++)
        dt_printf0("%10s", variant[v].name);
    dt_printf0("\n");
    for (int s = 0; s < steps; s++) {
        dt_printf0("  %4d  ", s + 1);
        for (int v = 0; v < NV; v++)
            dt_printf0("%10.5f", res[v].loss[s]);
        dt_printf0("\n");
    }

    /* ==== the numbers: bytes ====
     * Measured: what this rank sent per step, less the step's loss (8 bytes that
     * every rank but 0 sends up the reduce tree to rank 0). The model:
     * dt_compress_bytes, the formulas of compress.c's header. */
    int exact = 1;
    dt_printf0("\nBytes each rank sent per step for the gradients, measured (model):\n"
               "  rank");
    for (int v = 0; v < NV - 1; v++)
        dt_printf0("%18s", variant[v].name);
    dt_printf0("\n");
    char line[256];
    int len = snprintf(line, sizeof line, "  %4d", rank);
    double ratio[NV];
    for (int v = 0; v < NV - 1; v++) {
        double got = ((double)res[v].bytes_sent - (rank ? 8.0 * steps : 0)) / steps;
        size_t want = dt_compress_bytes(variant[v].k, G, n, rank);
        exact &= got == (double)want;
        ratio[v] = want ? (double)dt_compress_bytes(DT_COMPRESS_NONE, G, n, rank) / want
                        : 1;
        len += snprintf(line + len, sizeof line - len, "  %7.0f (%7zu)", got, want);
    }
    dt_printf_ordered("%s\n", line);
    MPI_Allreduce(MPI_IN_PLACE, &exact, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (n > 1) {
        /* the formulas with rank 0's numbers: W words a chunk, a scale and the codes */
        size_t w8 = 1 + (ch + 3) / 4, w1 = 1 + (ch + 31) / 32;
        double ring = 2.0 * (n - 1) / n * 4 * G;
        dt_printf0("The models (dt_compress_bytes), with G = %zu, N = %d:\n"
                   "  none  2(N-1)/N x 4G = 2 x %d/%d x 4 x %zu %s %.0f%s\n"
                   "  fp16  2(N-1)/N x 2G = 2 x %d/%d x 2 x %zu %s %.0f\n"
                   "  int8  2(N-1) x 4W, W = 1 + ceil(%zu/4) = %zu words a chunk: "
                   "2 x %d x 4 x %zu = %zu\n"
                   "  sign  2(N-1) x 4W, W = 1 + ceil(%zu/32) = %zu words a chunk: "
                   "2 x %d x 4 x %zu = %zu\n"
                   "Fewer bytes than none (rank 0): fp16 %.2fx (4 bytes / 2), int8 "
                   "%.2fx and\nsign %.2fx (G / (N W) = %zu / (%d x %zu) and %zu / "
                   "(%d x %zu): the scale word\nand the padding of the last word take "
                   "a little of the 4x and 32x).\n", G, n, n - 1, n, G,
                   G % n ? "~" : "=", ring, G % n ? " (whole-value chunks: see "
                   "the table)" : "", n - 1, n, G, G % n ? "~" : "=", ring / 2,
                   ch, w8, n - 1, w8, 8 * (n - 1) * w8, ch, w1, n - 1, w1,
                   8 * (n - 1) * w1, ratio[1], ratio[2], ratio[3], G, n, w8, G, n,
                   w1);
    } else {
        dt_printf0("One rank sends nothing; the gradients are still compressed\n"
                   "and decompressed, so the losses show what compression costs.\n"
                   "Try -n 4.\n");
    }

    /* ==== the check ==== */
    int down = 1;
    for (int v = 1; v < NV; v++)
        down &= res[v].loss[steps - 1] < res[v].loss[0];
    double tol = pow(10, -TOL_EXP), tol16 = 1e-3;
    int ok = vs_serial <= tol && fp16_diff <= tol16 && down && exact;
    dt_printf0("\ncheck: none vs serial: max |weight difference| %.3g (limit 1e-%d)\n"
               "       fp16 vs none: %.3g (limit %g)\n"
               "       every compressed run's last loss below its first: %s\n"
               "       bytes measured equal the model on every rank: %s\n"
               "       %s\n", vs_serial, TOL_EXP, fp16_diff, tol16,
               down ? "yes" : "NO", exact ? "yes" : "NO", ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/parallel/compress.c (dti_encode, dti_decode, "
               "dti_compressor_allreduce, dt_compress_bytes), lib/parallel/ddp.c "
               "(reduce_bucket), lib/collectives/allreduce.c (dt_allreduce_ring)\n");

    /* ==== teardown ==== */
    for (int v = 0; v < NV; v++)
        dt_train_result_free(&res[v]);
    dt_train_result_free(&ref);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
