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
 * Run:  mpiexec -n 4 build/lessons/12_ddp
 *       mpiexec -n 4 build/lessons/12_ddp --bucket-kb 100
 *       mpiexec -n 4 build/lessons/12_ddp --trace ddp.trace  (overlap, dtviz)
 */
#include <math.h>
#include <stdio.h>
#include <unistd.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 12_ddp [options]\n"
    "Trains an MLP with DDP, overlap on and off, beside serial training; "
    "draws and\n"
    "counts the gradient buckets.\n"
    "  --steps S           training steps, 2 to 200 (default 6)\n"
    "  --bucket-kb N       bucket size cap in KiB, 1 to 65536 (default 20)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TOL_EXP = 5, NCAPS = 3 };

/* The buckets the rule makes, from the last layer: a bucket is closed before a
 * layer would take it past the cap. Writes each layer's bucket into of[] (may
 * be NULL) and returns how many there are. */
static int draw_buckets(const dt_mlp_config *m, size_t cap, int *of)
{
    int nb = 0;
    size_t fill = 0;
    for (int l = m->layers - 1; l >= 0; l--) {
        size_t nbytes = dt_mlp_layer_size(m, l) * sizeof(float);
        if (fill > 0 && fill + nbytes > cap) {
            nb++;
            fill = 0;
        }
        fill += nbytes;
        if (of)
            of[l] = nb;
    }
    return nb + 1;
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
    int L = c.model.layers, of[16];
    int nb = draw_buckets(&c.model, (size_t)cap * 1024, of);
    dt_printf0("DDP on %d rank%s: each holds the whole MLP (%d layers) and "
               "computes on %d of\nthe %d rows of the global batch. Backward "
               "finishes the layers last to first;\nwith a cap of %d KiB they "
               "fall into %d bucket%s, each allreduced as soon as\nits layers "
               "are done:\n\n", n, n == 1 ? "" : "s", L, c.batch / n, c.batch,
               cap, nb, nb == 1 ? "" : "s");
    char b[32];
    for (int l = L - 1; l >= 0; l--) {
        double nbytes = dt_mlp_layer_size(&c.model, l) * 4.0;
        dt_printf0("  layer %d  %9s  -> bucket %d%s\n", l,
                   dt_format_bytes(nbytes, b, sizeof b), of[l],
                   l == L - 1 ? "   (ready first)"
                              : l == 0 ? "   (ready last)" : "");
    }
    dt_printf0("\nA bucket is closed before a layer would take it past the "
               "cap; a layer larger\nthan the cap is a bucket of its own. "
               "Every bucket pays the ring's latency,\n2(N-1) messages; bigger "
               "buckets pay it less often but start later.\n\n");

    /* ==== the library calls: overlap on, overlap off, serial ==== */
    dt_train_result on, off, ref;
    dt_train(&c, MPI_COMM_WORLD, &on);
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
        dt_printf0("  --bucket-kb   buckets by the rule   made by dt_train\n");
        for (int k = 0; k < NCAPS; k++)
            dt_printf0("  %11d   %19d   %16d\n", caps[k],
                       draw_buckets(&c.model, caps[k] * 1024u, NULL), made[k]);
    } else {
        dt_printf0("With one rank there is nothing to sum, so nothing to "
                   "overlap: dt_train\nmakes no buckets. Try -n 4.\n");
    }

    /* ==== the numbers: time per step, overlap on against off ==== */
    double ton = on.seconds_per_step, toff = off.seconds_per_step;
    if (n > 1) {
        dt_printf0("\nTime per step (mean of steps 2..%d, slowest rank):\n"
                   "  overlap on   %8.3f ms   (buckets sent during backward)\n"
                   "  overlap off  %8.3f ms   (backward, then every bucket)\n"
                   "  off / on     %8.2f\n", steps, ton * 1e3, toff * 1e3,
                   toff / ton);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        if (2L * dt_local_size() > cores)
            dt_printf0("Overlap needs a core for each rank's communication "
                       "thread: here %d ranks\nand their threads share %ld "
                       "core%s, so the ratio may be near 1, or below.\n",
                       dt_local_size(), cores, cores == 1 ? "" : "s");
    }

    /* ==== the numbers: bytes per rank, against the ring's 2(N-1)/N ==== */
    double G = (double)dt_mlp_nparams(&c.model) * sizeof(float);
    double ring = 2.0 * (n - 1) / n * G, sent = (double)on.bytes_sent / steps;
    if (n > 1)
        dt_printf0("\nBytes sent per step by rank 0, for G = %.0f bytes of "
                   "gradients:\n"
                   "  measured             %8.0f\n"
                   "  the ring, 2(N-1)/N G %8.0f\n"
                   "Every bucket, however small, goes round the ring "
                   "(reduce-scatter, then\nallgather: lesson 08), and a rank "
                   "sends 2(N-1)/N of it: under 2G however\nmany ranks. The "
                   "cap changes how many messages, not how many bytes.\n",
                   G, sent, ring);

    /* ==== the check ==== */
    int rule_ok = 1, bytes_ok = 1;
    for (int k = 0; k < NCAPS && n > 1; k++)
        rule_ok &= made[k] == draw_buckets(&c.model, caps[k] * 1024u, NULL);
    bytes_ok = fabs(sent - ring) <= 0.01 * G;   /* buckets N does not divide:
                                                   a few elements more, less */
    int agreed[2] = {rule_ok, bytes_ok};
    MPI_Bcast(agreed, 2, MPI_INT, 0, MPI_COMM_WORLD);
    double tol = pow(10, -TOL_EXP);
    int ok = diff[0] <= tol && diff[1] <= tol && agreed[0] && agreed[1];
    dt_printf0("\ncheck: ddp against serial training, max |weight difference|\n"
               "       overlap on %.3g, off %.3g (limit 1e-%d); buckets as "
               "drawn: %s;\n       bytes as the ring's formula: %s\n"
               "       %s\n", diff[0], diff[1], TOL_EXP,
               agreed[0] ? "yes" : "NO", agreed[1] ? "yes" : "NO",
               ok ? "PASS" : "FAIL");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&on);
    dt_train_result_free(&off);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
