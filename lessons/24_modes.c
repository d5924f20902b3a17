/* Lesson 24: every mode side by side, measured.
 *
 * What it teaches: the notes end with tables comparing the ways to spread training:
 * what each splits, what it sends and where, the memory it saves, how busy it keeps the
 * processors. This lesson fills them with measurements: the same model, data, batch and
 * rank count in every mode, one row each, every figure beside its textbook formula; then
 * the notes' claims, column by column, beside what this machine shows.
 *
 * The code: lib/parallel/run.c (dt_train: the books every mode keeps, dti_held),
 * lib/p2p.c (dt_messages_sent), and each mode's file in lib/parallel/.
 *
 * Run:  mpiexec -n 4 build/lessons/24_modes
 *       mpiexec -n 4 build/lessons/24_modes --csv modes.csv     (the table, for slides)
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 24_modes [options]\n"
    "Trains one MLP in every mode at N ranks: memory, bytes and messages, compute share,\n"
    "bubble and time of a step, beside the formulas and the notes' claims.\n"
    "  --steps S           training steps, 2 to 50 (default 4)\n"
    "  --csv FILE          also write the table as CSV\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SERIAL, DP, DPT, DDP, Z1, Z2, Z3, TP, GPIPE, ONEF, HYB, NROWS, HELD = 4 };
static const struct { const char *name; dt_mode mode; int zero, sched; } rowof[NROWS] = {
    {"serial", DT_MODE_SERIAL, 3, 1}, {"dp", DT_MODE_DP, 3, 1},
    {"dp-threads", DT_MODE_DP_THREADS, 3, 1}, {"ddp", DT_MODE_DDP, 3, 1},
    {"fsdp z1", DT_MODE_FSDP, 1, 1}, {"fsdp z2", DT_MODE_FSDP, 2, 1},
    {"fsdp z3", DT_MODE_FSDP, 3, 1}, {"tp", DT_MODE_TP, 3, 1},
    {"pp gpipe", DT_MODE_PP, 3, DT_PP_GPIPE}, {"pp 1f1b", DT_MODE_PP, 3, DT_PP_1F1B},
    {"hybrid", DT_MODE_HYBRID, 3, 1}};

/* One row: measured (the most of any rank) and the formula (f...), in bytes. */
typedef struct { int ran; char why[120]; double held[HELD], fheld[HELD], sent, fsent, msgs,
                 compute, bubble, ms, spread, diff, copied; } row;

/* The textbook's bytes per rank: weights, gradients, optimizer state, activations, and
 * sent a step. W = 4 Psi (the fp32 weights), S optimizer floats a weight, A = 4 x the
 * widths forward keeps per row (in + out of each layer), B the batch, H the hidden
 * width, L layers, M micro-batches, N ranks (hybrid: D x T x P); a pipeline stage with
 * neighbours both sides; tensor parallelism two allreduces of B x H per layer pair; dp
 * the server (W to N-1 workers, but not after the last step) or a worker (W). */
typedef struct { double W, A; int S, B, H, L, M, N, D, T, P, steps; } shape;

static void formula(int k, const shape *z, row *r)
{
    int D = k == HYB ? z->D : k == DP || (k >= DDP && k <= Z3) ? z->N : 1;
    int T = k == HYB ? z->T : k == TP ? z->N : 1, P = k == HYB ? z->P : k >= GPIPE &&
            k <= ONEF ? z->N : 1, M = P > 1 ? z->M : 1, N = z->N;
    double W = z->W / (T * P), b = (double)z->B / D, g = (D - 1.0) / D, *h = r->fheld;
    h[0] = h[1] = W, h[2] = z->S * W;
    h[3] = z->A * b / P / (k == GPIPE ? 1 : M) * (k == ONEF ? (M < P ? M : P) : 1);
    r->fsent = 2 * g * W + (P > 1 ? (P > 2 ? 2 : 1) * 4.0 * b * z->H : 0) +
               (T > 1 ? (z->L / P / 2) * 4 * (T - 1.0) / T * 4 * b * z->H : 0);
    if (k == SERIAL || k == DPT || k == DP)
        r->fsent = k == DP ? fmax((N - 1) * z->W * (z->steps - 1) / z->steps, z->W) : 0;
    if (k == DPT)                       /* N replicas, the first the master's own */
        h[0] = h[1] = N * W;
    if (k >= Z1 && k <= Z3)             /* ZeRO 1 shards the optimizer, 2 the gradients */
        h[2] /= N, h[1] /= k >= Z2 ? N : 1, h[0] /= k == Z3 ? N : 1;    /* too, 3 all */
    if (k == Z3)
        r->fsent = 3 * g * W;
}

/* The config of row k at N ranks (D x T x P for hybrid), or 0 with why. */
static int config_of(int k, int N, int D, int T, int P, dt_train_config *c, char *why,
                     size_t len)
{
    c->mode = rowof[k].mode;
    c->zero = rowof[k].zero;
    c->schedule = (dt_pp_schedule)rowof[k].sched;
    c->threads = N;
    c->dp = k == HYB ? D : 1, c->tp = k == HYB ? T : 1, c->pp = k == HYB ? P : 1;
    if (k == HYB && (D == N || T == N || P == N))
        return snprintf(why, len, "%d ranks make a grid of one dimension: one mode", N), 0;
    return dt_train_check(c, k == SERIAL || k == DPT ? 1 : N, why, len) == 0;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int N = dt_size(), rank = dt_rank(), steps = 4, opt;
    const char *csv = NULL;
    char why[160] = "";
    static const struct option longopts[] = {{"steps", required_argument, NULL, 's'},
        {"csv", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
        DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    opterr = 0;                                 /* dt_usage_error speaks, on rank 0 */
    while (!*why && (opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (opt == 's' && dt_parse_int(optarg, 2, 50, &steps))
            snprintf(why, sizeof why, "--steps must be a whole number from 2 to 50");
        else if (opt == 'c')
            csv = optarg;
        else if (opt == 'h')
            dt_usage_help(usage);
        else if (opt != 's' && opt != DT_OPT_DEVICE && opt != DT_OPT_TRACE)
            dt_bad_option(opt, argv, why, sizeof why);      /* ':' no value, '?' unknown */
    }
    if (!*why && optind < argc)
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
    if (*why)
        dt_usage_error(usage, why);
    dt_check_output("--csv", csv, 0);           /* before any work */
    dt_print_devices();
    int D = 1, T = 1, P = 1, *dim[3] = {&D, &P, &T}, m = N, f = 2, q = 0;
    for (; m > 1; f++)                          /* hybrid: N's factors over D, P, T */
        while (m % f == 0) { *dim[q++ % 3] *= f; m /= f; }
    dt_dataset set;
    dt_data_synthetic(&set, 2048, 32, 4, 1);
    dt_train_config base;
    dt_train_defaults_for(&base, DT_MODE_SERIAL, &set);
    base.on_device = 0;                         /* dp-threads runs on the host */
    base.model.act = DT_GELU;                   /* no ReLU to flip on a rounding edge */
    base.model.layers = N > 4 ? N : 4;          /* a layer per stage at least */
    base.model.hidden = (64 + N - 1) / N * N;   /* T | hidden */
    base.micro = 4;
    base.batch = (96 + 4 * N - 1) / (4 * N) * (4 * N);   /* N x M equal shares */
    base.steps = steps;
    const dt_mlp_config *mc = &base.model;
    double W = 4.0 * dt_mlp_nparams(mc), A = 0;
    for (int l = 0; l < mc->layers; l++)
        A += 4.0 * (dt_mlp_layer_in(mc, l) + dt_mlp_layer_out(mc, l));
    int S = dt_optim_state_per_param(base.optim.kind), H = mc->hidden, L = mc->layers;
    shape z = {W, A, S, base.batch, H, L, base.micro, N, D, T, P, steps};

    dt_printf0("One MLP (%d layers of %d, %.0f weights, %s with %d state float%s a weight), "
               "batch %d,\n%d steps, at %d rank%s, in every mode. Memory in KiB per rank, the "
               "most any rank\nheld: measured (formula). W = 4 Psi = %.0f KiB of weights.\n\n",
               L, H, W / 4, base.optim.kind == DT_ADAM ? "Adam" : "SGD", S, S == 1 ? "" : "s",
               base.batch, steps, N, N == 1 ? "" : "s", W / 1024);

    /* ==== the runs: the reference first, then each mode ==== */
    dt_train_result ref;
    dt_train_serial(&base, MPI_COMM_WORLD, &ref);
    row rows[NROWS] = {{0}};
    for (int k = 0; k < NROWS; k++) {
        row *r = &rows[k];
        dt_train_config c = base;
        formula(k, &z, r);
        if (!config_of(k, N, D, T, P, &c, r->why, sizeof r->why))
            continue;
        int alone = k == SERIAL || k == DPT;    /* one rank: rank 0, the others wait */
        MPI_Comm comm = alone ? MPI_COMM_SELF : MPI_COMM_WORLD;
        dt_train_result res;
        if (!alone || rank == 0) {
            dt_train(&c, comm, &res);
            double v[HELD + 2] = {res.peak_params, res.peak_grads, res.peak_optim,
                res.peak_acts, (double)res.bytes_sent / steps, (double)res.messages_sent / steps};
            dt_timing tm = dt_train_step_timing(&res);
            r->ms = tm.median * 1e3, r->spread = dt_timing_spread(tm);
            r->compute = res.compute_seconds / res.seconds_per_step;
            for (int s = 0; s < res.stages && rank == 0; s++)
                r->bubble += res.stage_bubble[s] / res.stages;
            r->copied = (double)res.bytes_copied / steps;
            r->diff = dt_params_max_diff(res.params, ref.params, ref.nparams, comm);
            if (!alone)
                MPI_Allreduce(MPI_IN_PLACE, v, HELD + 2, MPI_DOUBLE, MPI_MAX, comm);
            memcpy(r->held, v, sizeof r->held);
            r->sent = v[HELD], r->msgs = v[HELD + 1];
            dt_train_result_free(&res);
        }
        MPI_Bcast(r, sizeof *r, MPI_BYTE, 0, MPI_COMM_WORLD);   /* rank 0's books */
        r->ran = 1;
    }

    /* ==== the tables ==== */
    char cell[HELD][32];
    dt_printf0("%-10s %-15s %-15s %-15s %s\n", "mode", "params", "grads", "optimizer",
               "activations");
    for (int k = 0; k < NROWS; k++) {
        row *r = &rows[k];
        for (int i = 0; i < HELD; i++)
            snprintf(cell[i], 32, "%.1f (%.1f)", r->held[i] / 1024, r->fheld[i] / 1024);
        if (!r->ran)
            snprintf(cell[0], 32, "not run: %s", r->why), cell[1][0] = cell[2][0] = 0;
        dt_printf0("%-10s %-15s %-15s %-15s %s\n", rowof[k].name, r->ran ? cell[0] : "",
                   cell[1], cell[2], r->ran ? cell[3] : r->why);
    }
    dt_printf0("\nA step: KiB sent by the rank that sent most, measured (formula); messages "
               "it sent;\ncompute over step time (dp-threads: its threads' added up); the "
               "pipeline's bubble;\nms per step (median); max |weight difference| against "
               "serial training.\n\n"
               "%-10s %-17s %6s %8s %7s %8s %9s\n", "mode", "sent", "msgs", "compute",
               "bubble", "ms", "weights");
    int ok = 1;
    for (row *r = rows; r < rows + NROWS; r++) {
        char s[40];
        snprintf(s, sizeof s, "%.1f (%.1f)", r->sent / 1024, r->fsent / 1024);
        if (r->ran)
            dt_printf0("%-10s %-17s %6.0f %7.0f%% %6.0f%% %8.2f %9.2g\n", rowof[r - rows].name,
                       s, r->msgs, 100 * r->compute, 100 * r->bubble, r->ms, r->diff);
        ok &= !r->ran || r->diff <= 1e-4;
    }

    /* ==== the notes' claims beside this run, column by column ==== */
    static const struct { int k; char col; const char *claim; } cl[] = {
        {DP, 'c', "communication: everything crosses the server's one link"},
        {DPT, 'c', "communication: the master copies the weights out, the gradients in"},
        {DDP, 'm', "memory: a full replica on every rank, nothing saved"},
        {DDP, 'c', "communication: one allreduce of the gradients a step, 2(N-1)/N W"},
        {Z3, 'm', "memory: weights, gradients and optimizer state cut N ways"},
        {Z3, 'c', "communication: about 1.5 x DDP's, gathered layer by layer"},
        {TP, 'm', "memory: weights and activations cut inside each layer"},
        {TP, 'c', "communication: very high, inside the layer"},
        {ONEF, 'c', "communication: low, only between neighbouring stages"},
        {ONEF, 'u', "utilisation: a bubble idles stages at a step's start and end"},
        {GPIPE, 'm', "memory: GPipe keeps all M micro-batches' activations, 1F1B fewer"},
    };
    row *d = &rows[DDP], *se = &rows[SERIAL];
    double state0 = se->held[0] + se->held[1] + se->held[2];
    dt_printf0(N == 1 ? "\nAt one rank there is nothing to compare with the notes' claims: "
               "try -n 4.\n" : "\nThe notes' claims, column by column, and this run:\n");
    for (size_t i = 0; i < sizeof cl / sizeof cl[0] && N > 1; i++) {
        row *r = &rows[cl[i].k];
        char here[160];                 /* what this run shows; whether that agrees */
        int agrees = 0;
        double x = r->sent / fmax(d->sent, 1), st = r->held[0] + r->held[1] + r->held[2];
        if (!r->ran || !d->ran)
            snprintf(here, sizeof here, "not run here");
        else if (cl[i].col == 'u')
            agrees = r->bubble > 0.1,
            snprintf(here, sizeof here, "bubble %.0f%%", 100 * r->bubble);
        else if (cl[i].col == 'm' && cl[i].k == GPIPE)
            agrees = r->held[3] > rows[ONEF].held[3],
            snprintf(here, sizeof here, "activations %.1f KiB, 1F1B %.1f (at most min(M, P) "
                     "= %d micro-batches)", r->held[3] / 1024, rows[ONEF].held[3] / 1024,
                     base.micro < N ? base.micro : N);
        else if (cl[i].col == 'm')
            agrees = cl[i].k == DDP ? st >= 0.99 * state0 : st < 0.75 * state0,
            snprintf(here, sizeof here, "weights, gradients and optimizer %.2f of serial's%s",
                     st / state0, cl[i].k == Z3 ? " (and a gathered layer, whole)" : "");
        else if (cl[i].k == DPT)
            agrees = r->copied > d->sent,
            snprintf(here, sizeof here, "%.0f KiB copied a step, %.1f x a DDP rank's sends",
                     r->copied / 1024, r->copied / fmax(d->sent, 1));
        else if (cl[i].k == DDP)
            agrees = fabs(r->sent - r->fsent) < 0.05 * r->fsent,
            snprintf(here, sizeof here, "%.2f x W", r->sent / W);
        else                            /* TP: activations, B x H a layer, against W */
            agrees = cl[i].k == Z3 ? x > 1.2 && x < 1.8 : cl[i].k == ONEF ? x < 1 : x > 1,
            snprintf(here, sizeof here, cl[i].k == TP ? "%.2f x DDP's bytes (B x H = %d "
                     "floats, Psi = %.0f)" : "%.2f x DDP's bytes", x, base.batch * H, W / 4);
        dt_printf0("  %-9s %s\n            here: %s: %s\n", rowof[cl[i].k].name, cl[i].claim, here,
                   !r->ran ? "-" : agrees ? "agrees" : "DIFFERS on this machine");
    }
    dt_printf0("\nWhere a figure departs from its textbook formula (figures are the most any "
               "rank\nheld or sent): the dp server keeps master and working weights and a "
               "buffer for\nthe gradients; fsdp pads layers to a multiple of N and holds one "
               "gathered layer;\nlayers differ in width (the widest slice or stage holds "
               "most), and a stage\nkeeps its output apart for the next; tp's last "
               "allreduce carries the classes, not\nH, and its first layer needs no input "
               "gradient; allreduces under 64 KiB go by\nrecursive doubling (log2 N x the "
               "buffer); the loss adds 8 bytes a rank.\n");
    double spread = 0;
    for (int k = 0; k < NROWS; k++)
        spread = fmax(spread, rows[k].spread);
    dt_timing_note(spread, "Times here are medians of few steps on shared cores: they rank the "
                   "modes only roughly.");

    /* ==== the CSV, for slides: bytes, the formula after each measured figure ==== */
    FILE *fp = csv && rank == 0 ? fopen(csv, "w") : NULL;
    if (fp)
        fprintf(fp, "mode,params,params_formula,grads,grads_formula,optim,optim_formula,"
                "acts,acts_formula,sent,sent_formula,messages,compute,bubble,ms,diff\n");
    for (row *r = rows; r < rows + NROWS; r++)
        if (fp && r->ran) {
            fprintf(fp, "%s", rowof[r - rows].name);
            for (int i = 0; i < HELD; i++)
                fprintf(fp, ",%.0f,%.0f", r->held[i], r->fheld[i]);
            fprintf(fp, ",%.0f,%.0f,%.0f,%.3f,%.3f,%.3f,%.3g\n", r->sent, r->fsent, r->msgs,
                    r->compute, r->bubble, r->ms, r->diff);
        }
    DT_REQUIRE(!csv || rank != 0 || (fp && fclose(fp) == 0), "24_modes: writing %s failed: "
               "%s", csv, strerror(errno));
    if (csv)
        dt_printf0("wrote %s\n", csv);

    /* ==== the check ==== */
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    dt_printf0("\ncheck: every mode that ran reached serial training's weights (max |weight "
               "difference| <= 1e-4): %s\n", ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/parallel/run.c (dt_train, dti_held), lib/p2p.c "
               "(dt_messages_sent), lib/parallel/dp_threads.c (dti_train_dp_threads)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
