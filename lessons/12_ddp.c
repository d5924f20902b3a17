/* Lesson 12: DDP, gradient buckets allreduced while backward goes on.
 *
 * What it teaches: in distributed data parallel every rank keeps a whole
 * replica and the gradients are summed with a ring allreduce, no server.
 * Backward produces the gradients of the last layer first, so DDP packs
 * consecutive layers, from the last, into buckets of about --bucket-kb, and
 * sends each bucket as soon as backward has finished it, on a communication
 * thread, while backward computes the layers before it. What is left to wait
 * for when backward ends is about one bucket, not the whole allreduce. This
 * lesson draws the buckets, counts them for a few caps, and times a step with
 * that overlap on and off, in one run.
 *
 * The code: lib/parallel/ddp.c (dt_ddp_buckets cuts the layers into buckets;
 * dti_ddp_layer_done hands a finished bucket to comm_thread, which allreduces
 * it; dti_ddp_finish waits for the rest, or with overlap off sends them all;
 * its comment is the lesson's long form), lib/collectives/allreduce.c
 * (dt_allreduce_ring, each bucket's sum).
 *
 * Run:  mpiexec -n 4 build/lessons/12_ddp
 *       mpiexec -n 4 build/lessons/12_ddp --bucket-kb 100
 *       mpiexec -n 4 build/lessons/12_ddp --trace ddp.trace  (overlap, dtviz)
 *
 * --trace records one run, the one with overlap on: in dtviz each bucket's allreduce
 * runs on the communication thread beside the backward of the layers before it.
 */
#include <math.h>
#include <stdio.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 12_ddp [options]\n"
    "Trains an MLP with DDP, overlap on and off, beside serial training; "
    "draws and\n"
    "counts the gradient buckets.\n"
    "  --steps S           training steps, 2 to 200 (default 6)\n"
    "  --bucket-kb N       bucket size cap in KiB, 1 to 65536 (default 20)\n"
    DT_COMMON_USAGE
    "                      (one run: overlap on, buckets beside backward)\n"
    "  --help              this text\n";

enum { TOL_EXP = 5, NCAPS = 3, MAXLAYERS = 16 };

/* The buckets ddp.c makes for model m under a cap of cap_kb KiB: dt_ddp_buckets on
 * the model's layer offsets, fp32 gradients. Writes each layer's bucket into of[]
 * and returns how many there are. */
static int buckets(const dt_mlp_config *m, int cap_kb, int *of)
{
    size_t off[MAXLAYERS + 1];
    for (int l = 0; l <= m->layers; l++)
        off[l] = l < m->layers ? dt_mlp_layer_offset(m, l) : dt_mlp_nparams(m);
    return dt_ddp_buckets(off, m->layers, sizeof(float), (size_t)cap_kb * 1024, of);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), steps = 6, cap = 20;
    dt_int_option io[] = {{"steps", 2, 200, &steps},
                          {"bucket-kb", 1, 65536, &cap}};
    dt_parse_int_options(argc, argv, io, 2, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_DDP, &set);
    c.model.hidden = 64;
    c.model.layers = 5;
    c.steps = steps;
    c.batch = (120 + n - 1) / n * n;     /* 120, or the next multiple of N */
    c.bucket_kb = cap;
    dt_train_usage_check(&c, "12_ddp");  /* else a usage error: exit 2 */

    /* ==== the idea: the buckets, in the order backward fills them ==== */
    int L = c.model.layers, of[MAXLAYERS];
    int nb = buckets(&c.model, cap, of);
    dt_printf0("DDP on %d rank%s: each holds the whole MLP (%d layers) and "
               "computes on %d of\nthe %d rows of the global batch. Backward "
               "finishes the layers last to first;\nwith a cap of %d KiB = %d B "
               "they fall into %d bucket%s (dt_ddp_buckets), each\nallreduced "
               "as soon as its layers are done:\n\n", n, n == 1 ? "" : "s", L,
               c.batch / n, c.batch, cap, cap * 1024, nb, nb == 1 ? "" : "s");
    dt_printf0("  layer   bytes = 4(out x in + out)   bucket   bytes in it so far\n");
    size_t fill = 0, prev = 0;
    for (int l = L - 1; l >= 0; l--) {      /* backward's order: layer L-1 first */
        int in = dt_mlp_layer_in(&c.model, l), out = dt_mlp_layer_out(&c.model, l);
        size_t nbytes = dt_mlp_layer_size(&c.model, l) * sizeof(float);
        int opened = l < L - 1 && of[l] != of[l + 1];
        fill = opened ? nbytes : fill + nbytes;
        char f[32], why[48] = "";
        snprintf(f, sizeof f, "4(%d x %d + %d)", out, in, out);
        if (opened)                       /* the layer that closed the bucket */
            snprintf(why, sizeof why, "   (%zu + %zu > %d)", prev, nbytes,
                     cap * 1024);
        dt_printf0("  %5d  %6zu = %-18s  %6d   %8zu%s\n", l, nbytes, f, of[l], fill,
                   why);
        prev = fill;
    }
    dt_printf0("\nA bucket is closed before a layer would take it past the "
               "cap; a layer larger\nthan the cap is a bucket of its own. "
               "Every bucket pays the ring's latency,\n2(N-1) messages; bigger "
               "buckets pay it less often but start later.\n\n");

    /* ==== the library calls: overlap on, overlap off, serial ==== */
    dt_train_result on, off, ref;
    dt_train(&c, MPI_COMM_WORLD, &on);
    dt_trace_pause(1);                  /* --trace: the overlap run alone, above */
    c.overlap = 0;
    dt_train(&c, MPI_COMM_WORLD, &off);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    const dt_train_result *run[2] = {&on, &off};
    double diff[2];
    for (int k = 0; k < 2; k++)
        diff[k] = dt_params_max_diff(run[k]->params, ref.params, ref.nparams,
                                     MPI_COMM_WORLD);

    /* ==== the numbers: bucket counts for a few caps (one step each) ==== */
    static const int caps[NCAPS] = {4, 32, 64};
    int made[NCAPS];
    for (int k = 0; k < NCAPS; k++) {
        dt_train_config q = c;
        q.steps = 1;
        q.bucket_kb = caps[k];
        dt_train_result r;
        dt_train(&q, MPI_COMM_WORLD, &r);
        made[k] = r.buckets;              /* 0 on one rank: nothing to sum */
        dt_train_result_free(&r);
    }
    if (n > 1) {
        dt_printf0("  --bucket-kb   dt_ddp_buckets   made by dt_train\n");
        for (int k = 0; k < NCAPS; k++)
            dt_printf0("  %11d   %14d   %16d\n", caps[k],
                       buckets(&c.model, caps[k], of), made[k]);
    } else {
        dt_printf0("With one rank there is nothing to sum, so nothing to "
                   "overlap: dt_train\nmakes no buckets. Try -n 4.\n");
    }

    /* ==== the numbers: time per step, overlap on against off ==== */
    dt_timing ton = dt_train_step_timing(&on), toff = dt_train_step_timing(&off);
    double son = dt_timing_spread(ton), soff = dt_timing_spread(toff);
    if (n > 1) {
        char how[96];
        dt_train_step_words(&on, how, sizeof how);
        dt_printf0("\nTime per step, %s:\n"
                   "  overlap on   %8.3f ms +-%3.0f%%  (buckets sent during "
                   "backward)\n"
                   "  overlap off  %8.3f ms +-%3.0f%%  (backward, then every "
                   "bucket)\n"
                   "  off / on     %8.2f\n", how, ton.median * 1e3,
                   100 * son, toff.median * 1e3, 100 * soff,
                   toff.median / ton.median);
        dt_machine mc = dt_machine_now();
        int threads = 2 * mc.ranks;       /* a rank and its communication thread */
        int enough = ton.runs >= 3;       /* steps to tell a difference from noise */
        if (enough && dt_timing_compare(ton, toff) > 0)   /* slower beyond the noise */
            dt_printf0("Overlap lost here, by more than the runs spread. It hides "
                       "the allreduces only if\nthe communication thread runs "
                       "while backward does, on a core of its own. Here\n%s, "
                       "so the thread that sends a bucket takes the\ncore from "
                       "backward, and each of a bucket's 2(N-1) messages waits "
                       "until the\npeer's thread gets a core: the sends add to "
                       "the step instead of hiding in it.\n",
                       threads > mc.cores ? "ranks and threads outnumber the "
                       "cores" : "other work keeps the cores busy");
        else if (enough && toff.lo > 2 * ton.hi)  /* more than overlap can save */
            dt_printf0("Overlap can at most halve a step: the step with it takes "
                       "at least the longer\nof backward and the allreduces, "
                       "the step without takes both. off / on above\n2, by more "
                       "than the runs spread, is the machine: the runs came one "
                       "after the\nother, and it was busier during the second "
                       "(overlap off).\n");
        else if (threads > mc.cores)
            dt_printf0("Overlap needs a core for each rank's communication "
                       "thread: here %d ranks\nand their threads share %d "
                       "core%s, so it hides less than it could.\n", mc.ranks,
                       mc.cores, mc.cores == 1 ? "" : "s");
        dt_timing_note(son > soff ? son : soff, "Overlap needs a core per "
                       "thread: with ranks and their communication threads "
                       "taking turns, off / on falls toward 1 or below; with a "
                       "core for each, overlap saves up to the time the "
                       "allreduces take, less the last bucket's.");
    }

    /* ==== the numbers: bytes per rank, against the ring's 2(N-1)/N ==== */
    size_t P = dt_mlp_nparams(&c.model), count[MAXLAYERS] = {0};
    double G = (double)P * sizeof(float);
    double ring = 2.0 * (n - 1) / n * G, sent = (double)on.bytes_sent / steps;
    nb = buckets(&c.model, cap, of);
    for (int l = 0; l < L; l++)
        count[of[l]] += dt_mlp_layer_size(&c.model, l);
    size_t exact = 0;        /* rank 0's share of the ring's chunks, bucket by bucket;
                                the other ranks also send the step's loss to it */
    for (int k = 0; k < nb; k++)
        exact += dt_compress_bytes(DT_COMPRESS_NONE, count[k], n, 0);
    if (n > 1) {
        char f[64];
        snprintf(f, sizeof f, "the ring, 2(N-1)/N G = 2x%d/%d x G", n - 1, n);
        dt_printf0("\nBytes sent per step by rank 0, for G = 4P = 4 x %zu = %.0f "
                   "bytes\nof gradients:\n"
                   "  %-34s %8.0f\n  %-34s %8.0f\n  %-34s %8zu   *\n"
                   "*: dt_compress_bytes(DT_COMPRESS_NONE, ...) for each bucket: the "
                   "function gives\n   a bucket's bytes on the wire under any codec "
                   "(lesson 20), here none: the\n   ring's exact bytes, with the chunks "
                   "N does not divide evenly.\n"
                   "Every bucket, however small, goes round the ring "
                   "(reduce-scatter, then\nallgather: lesson 08), and a rank "
                   "sends 2(N-1)/N of it: under 2G however\nmany ranks. The "
                   "cap changes how many messages, not how many bytes.\n",
                   P, G, "measured", sent, f, ring, "the same, bucket by bucket",
                   exact);
    }

    /* ==== the check ==== */
    int rule_ok = 1, bytes_ok = 1;
    for (int k = 0; k < NCAPS && n > 1; k++)
        rule_ok &= made[k] == buckets(&c.model, caps[k], of);
    bytes_ok = n == 1 || (size_t)on.bytes_sent == exact * steps;
    int agreed[2] = {rule_ok, bytes_ok};
    MPI_Bcast(agreed, 2, MPI_INT, 0, MPI_COMM_WORLD);
    double tol = pow(10, -TOL_EXP);
    int ok = diff[0] <= tol && diff[1] <= tol && agreed[0] && agreed[1];
    dt_printf0("\ncheck: ddp against serial training, max |weight difference|\n"
               "       overlap on %.3g, off %.3g (limit 1e-%d); buckets as "
               "dt_ddp_buckets\n       cuts them: %s; bytes as the ring's, "
               "bucket by bucket: %s\n       %s\n", diff[0], diff[1], TOL_EXP,
               agreed[0] ? "yes" : "NO", agreed[1] ? "yes" : "NO",
               ok ? "PASS" : "FAIL");
    dt_printf0("\nThe code: lib/parallel/ddp.c (dt_ddp_buckets, dti_ddp_layer_done, "
               "comm_thread, dti_ddp_finish)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&on);
    dt_train_result_free(&off);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
