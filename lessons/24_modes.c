/* Lesson 24: every mode side by side, measured.
 *
 * What it teaches: the notes end with tables comparing the ways to spread training:
 * what each splits, what it sends and where, the memory it saves, how busy it keeps the
 * processors. This lesson fills them with measurements: the same model, data, batch and
 * rank count in every mode, one row each, every figure beside its textbook formula; then
 * the notes' claims, column by column, beside what this machine shows.
 *
 * The code: lib/parallel/run.c (dt_train), lib/parallel/books.c (dti_held: the books
 * every mode keeps), lib/p2p.c (dt_messages_sent), and each mode's file in lib/parallel/.
 *
 * Run:  mpiexec -n 4 build/lessons/24_modes
 *       mpiexec -n 4 build/lessons/24_modes --csv modes.csv     (the table, for slides)
 *       mpiexec -n 4 build/lessons/24_modes --trace tp.trace --trace-mode tp
 * --trace records one run (a trace describes one): the row --trace-mode names.
 */
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
    "  --trace-mode NAME   the one row --trace records, by name (default ddp)\n"
    "  --help              this text\n";

enum { SERIAL, DP, DPT, DDP, Z1, Z2, Z3, TP, GPIPE, ONEF, HYB, NROWS, HELD = 4 };
static const struct { const char *name; dt_mode mode; int zero, sched; } rowof[NROWS] = {
    {"serial", DT_MODE_SERIAL, 3, 1}, {"dp", DT_MODE_DP, 3, 1},
    {"dp-threads", DT_MODE_DP_THREADS, 3, 1}, {"ddp", DT_MODE_DDP, 3, 1},
    {"fsdp-z1", DT_MODE_FSDP, 1, 1}, {"fsdp-z2", DT_MODE_FSDP, 2, 1},
    {"fsdp-z3", DT_MODE_FSDP, 3, 1}, {"tp", DT_MODE_TP, 3, 1},
    {"pp-gpipe", DT_MODE_PP, 3, DT_PP_GPIPE}, {"pp-1f1b", DT_MODE_PP, 3, DT_PP_1F1B},
    {"hybrid", DT_MODE_HYBRID, 3, 1}};

/* One row: measured (the most of any rank) and the formula (f...), in bytes. */
typedef struct { int ran, stash; char why[120]; double held[HELD], fheld[HELD], sent, fsent,
                 msgs, compute, bubble, ms, spread, diff, copied; } row;

/* m within 5% of its formula's f; the side of 1 (0: equal); weights + grads + optimizer */
static int near(double m, double f) { return fabs(m - f) <= 0.05 * fabs(f); }
static int side(double v) { return v > 1.05 ? 1 : v < 0.95 ? -1 : 0; }
static double state(const double *h) { return h[0] + h[1] + h[2]; }

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
        r->fsent = k == DP && N > 1 ? fmax((N - 1) * z->W * (z->steps - 1) / z->steps, z->W) : 0;
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
    c->mode = rowof[k].mode, c->zero = rowof[k].zero, c->threads = N;
    c->schedule = (dt_pp_schedule)rowof[k].sched;
    c->dp = k == HYB ? D : 1, c->tp = k == HYB ? T : 1, c->pp = k == HYB ? P : 1;
    if (k == HYB && (D == N || T == N || P == N))       /* N is 1 or a prime */
        return snprintf(why, len, N == 1 ? "one rank makes no grid" : "%d ranks (a prime) "
                        "give a grid of one dimension, a mode above", N), 0;
    return dt_train_check(c, k == SERIAL || k == DPT ? 1 : N, why, len) == 0;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int N = dt_size(), rank = dt_rank(), steps = 4, opt, traced = 0;
    const char *csv = NULL, *tmode = "ddp";
    char why[200] = "";
    static const struct option longopts[] = {{"steps", required_argument, NULL, 's'},
        {"csv", required_argument, NULL, 'c'}, {"trace-mode", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'}, DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    opterr = 0;                                 /* dt_usage_error speaks, on rank 0 */
    while (!*why && (opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (opt == 's' && dt_parse_int(optarg, 2, 50, &steps))
            snprintf(why, sizeof why, "--steps must be a whole number from 2 to 50");
        else if (opt == 'c' || opt == 'm')
            *(opt == 'c' ? &csv : &tmode) = optarg;
        else if (opt == 'h')
            dt_usage_help(usage);
        else if (opt != 's' && opt != 'm' && opt != DT_OPT_DEVICE && opt != DT_OPT_TRACE)
            dt_bad_option(opt, argv, why, sizeof why);      /* ':' no value, '?' unknown */
    }
    if (!*why && optind < argc)
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
    for (; traced < NROWS && strcmp(rowof[traced].name, tmode); traced++)
        ;                                       /* --trace-mode: the row of that name */
    if (!*why && (traced == NROWS || (N > 1 && (traced == SERIAL || traced == DPT))))
        snprintf(why, sizeof why, "--trace-mode '%.40s': %s", tmode, traced == NROWS ? "no row "
                 "has that name" : "that row runs on rank 0 alone here: trace it at -n 1");
    if (*why)
        dt_usage_error(usage, why);
    dt_check_output("--csv", csv, 0);           /* before any work */
    dt_print_devices();
    dt_trace_pause(1);                          /* --trace: row `traced` alone */
    int D = 1, T = 1, P = 1, *dim[3] = {&D, &P, &T}, m = N, f = 2, q = 0;
    for (; m > 1; f++)                          /* hybrid: N's factors over D, P, T */
        while (m % f == 0) { *dim[q++ % 3] *= f; m /= f; }
    dt_dataset set;
    dt_data_synthetic(&set, 2048, 32, 4, 1);
    dt_train_config base;
    dt_train_defaults_for(&base, DT_MODE_SERIAL, &set);
    base.model.act = DT_GELU;                   /* no ReLU to flip on a rounding edge */
    base.model.layers = N > 4 ? N : 4;          /* a layer per stage at least */
    base.model.hidden = (64 + N - 1) / N * N;   /* T | hidden */
    base.micro = 8;                             /* M > N: 1F1B stashes fewer than GPipe */
    base.batch = (96 + 8 * N - 1) / (8 * N) * (8 * N);   /* N x M equal shares */
    base.steps = steps;
    const dt_mlp_config *mc = &base.model;
    double W = 4.0 * dt_mlp_nparams(mc), A = 0, big = 0;    /* big: the largest layer */
    for (int l = 0; l < mc->layers; l++)
        A += 4.0 * (dt_mlp_layer_in(mc, l) + dt_mlp_layer_out(mc, l)),
        big = fmax(big, 4.0 * dt_mlp_layer_size(mc, l));
    int S = dt_optim_state_per_param(base.optim.kind), H = mc->hidden, L = mc->layers;
    shape z = {W, A, S, base.batch, H, L, base.micro, N, D, T, P, steps};

    dt_printf0("One MLP (%d layers of %d, %.0f weights, %s with %d state float%s a weight), "
               "batch %d,\n%d steps, at %d rank%s, in every mode. Memory in KiB per rank, the "
               "most any rank\nheld: measured (formula). W = 4 Psi = %.0f KiB of weights.\n\n",
               L, H, W / 4, base.optim.kind == DT_ADAM ? "Adam" : "SGD", S, S == 1 ? "" : "s",
               base.batch, steps, N, N == 1 ? "" : "s", W / 1024);

    /* ==== the runs: the reference first, then each mode ==== */
    dt_train_result ref, res;
    dt_train_serial(&base, MPI_COMM_WORLD, &ref);
    row rows[NROWS] = {{0}};
    double spread = 0;                          /* of the step times, the widest */
    for (int k = 0; k < NROWS; k++) {
        row *r = &rows[k];
        dt_train_config c = base;
        formula(k, &z, r);
        if (!config_of(k, N, D, T, P, &c, r->why, sizeof r->why))
            continue;
        int alone = k == SERIAL || k == DPT;    /* one rank: rank 0, the others wait */
        MPI_Comm comm = alone ? MPI_COMM_SELF : MPI_COMM_WORLD;
        dt_trace_pause(k != traced);            /* on every rank; after dt_train, */
        if (!alone || rank == 0) {              /* nothing below records events */
            dt_train(&c, comm, &res);
            double v[HELD + 2] = {res.peak_params, res.peak_grads, res.peak_optim,
                res.peak_acts, (double)res.bytes_sent / steps, (double)res.messages_sent / steps};
            dt_timing tm = dt_train_step_timing(&res);
            r->ms = tm.median * 1e3, r->spread = dt_timing_spread(tm);
            r->compute = res.compute_seconds / res.seconds_per_step, r->copied =
                (double)res.bytes_copied / steps;
            for (int s = 0; s < res.stages && rank == 0; s++)   /* and the most stashed */
                r->bubble += res.stage_bubble[s] / res.stages,
                r->stash = res.stage_stash[s] > r->stash ? res.stage_stash[s] : r->stash;
            r->diff = dt_params_max_diff(res.params, ref.params, ref.nparams, comm);
            if (!alone)
                MPI_Allreduce(MPI_IN_PLACE, v, HELD + 2, MPI_DOUBLE, MPI_MAX, comm);
            memcpy(r->held, v, sizeof r->held);
            r->sent = v[HELD], r->msgs = v[HELD + 1];
            dt_train_result_free(&res);
        }
        MPI_Bcast(r, sizeof *r, MPI_BYTE, 0, MPI_COMM_WORLD);   /* rank 0's books */
        r->ran = 1, spread = fmax(spread, r->spread);
    }

    /* ==== the tables ==== */
    char cell[HELD][32];
    dt_printf0("%-10s %-15s %-15s %-15s activations\n", "mode", "params", "grads", "optimizer");
    for (int k = 0; k < NROWS; k++) {
        row *r = &rows[k];
        for (int i = 0; i < HELD; i++)
            snprintf(cell[i], 32, "%.1f (%.1f)", r->held[i] / 1024, r->fheld[i] / 1024);
        dt_printf0(r->ran ? "%-10s %-15s %-15s %-15s %s\n" : "%-10s not run (below)\n",
                   rowof[k].name, cell[0], cell[1], cell[2], cell[3]);
    }
    for (row *r = rows; r < rows + NROWS; r++)  /* why, under the table */
        if (!r->ran)
            dt_printf0("%s not run: %s.\n", rowof[r - rows].name, r->why);
    dt_printf0("\nA step: KiB sent by the rank that sent most, measured (formula); messages "
               "it sent;\ncompute over step time (dp-threads: while its threads computed); "
               "the pipeline's\nbubble; ms per step (median); max |weight difference| "
               "against serial training.\n\n"
               "%-10s %-17s %6s %8s %7s %8s %9s\n", "mode", "sent", "msgs", "compute",
               "bubble", "ms", "weights");
    int ok = 1;
    for (row *r = rows; r < rows + NROWS; r++) {
        snprintf(cell[0], 32, "%.1f (%.1f)", r->sent / 1024, r->fsent / 1024);
        if (r->ran)
            dt_printf0("%-10s %-17s %6.0f %7.0f%% %6.0f%% %8.2f %9.2g\n", rowof[r - rows].name,
                       cell[0], r->msgs, 100 * r->compute, 100 * r->bubble, r->ms, r->diff);
        ok &= !r->ran || r->diff <= 1e-4;
    }

    /* ==== the notes' claims beside this run, column by column ====
     * Each judged by its formula at this N, and the line says what was checked: a
     * figure (=) within 5%; "more" or "less" (<) only by the side of 1 (within 5%: at
     * 1); the bubble (%), a time, within 0.15, or lost in the noise where this machine's
     * noise could make the difference; one the run cannot show is said so. */
    static const struct { int k; char what, rule; const char *claim; } cl[] = {
        {DP, 'c', '<', "communication: everything crosses the server's one link"},
        {DPT, 'k', '=', "communication: the master copies the weights out, the gradients in"},
        {DDP, 'm', '=', "memory: a full replica on every rank, nothing saved"},
        {DDP, 'w', '=', "communication: one allreduce of the gradients a step, 2(N-1)/N W"},
        {Z3, 'z', '=', "memory: weights, gradients and optimizer state cut N ways"},
        {Z3, 'c', '=', "communication: about 1.5 x DDP's, gathered layer by layer"},
        {TP, 'm', '=', "memory: weights and activations cut inside each layer"},
        {TP, 'c', '<', "communication: very high, inside the layer"},
        {ONEF, 'c', '<', "communication: low, only between neighbouring stages"},
        {ONEF, 'u', '%', "utilisation: a bubble idles stages at a step's start and end"},
        {GPIPE, 's', '=', "memory: GPipe keeps all M micro-batches' activations, 1F1B fewer"},
    };
    static const char *checked[128] = {['<'] = "the side of 1 only: more than DDP's or less",
        ['c'] = "the bytes sent, within 5%", ['w'] = "the bytes sent, within 5%",
        ['k'] = "the bytes copied in memory (it sends none), within 5%",
        ['m'] = "weights + gradients + optimizer state, within 5%",
        ['z'] = "weights + gradients + optimizer state, within 5% of a 1/N\n            "
                "share plus the layer gathered and its gradient whole",
        ['u'] = "the idle share of a step, within 0.15 of (N-1)/(M+N-1)",
        ['s'] = "micro-batches stashed, within 5% of min(M,N)/M"};
    row *d = &rows[DDP], *se = &rows[SERIAL], *o = &rows[ONEF];
    double M = base.micro, B = base.batch, sends = fmax(d->sent, 1), fsends = fmax(d->fsent, 1);
    dt_machine mach = dt_machine_now();
    dt_printf0(N == 1 ? "\nAt one rank there is nothing to compare with the notes' claims: "
               "try -n 4.\n" : "\nThe notes' claims, column by column, and this run beside "
               "the formulas at N = %d:\n", N);
    for (size_t i = 0; i < sizeof cl / sizeof cl[0] && N > 1; i++) {
        int k = cl[i].k, w = cl[i].what, rule = cl[i].rule;
        row *r = &rows[k];
        double m = r->sent / sends, f = r->fsent / fsends;          /* 'c': DDP's bytes */
        if (w == 'm' || w == 'z')       /* fsdp-z3: and a layer gathered, its grads whole */
            m = state(r->held) / state(se->held),
            f = (state(r->fheld) + (w == 'z' ? 2 * big : 0)) / state(se->fheld);
        else if (w == 'k')              /* the master's copies: lesson 23's formula */
            m = r->copied / sends,
            f = (2 * (N - 1) * W + 4 * (B - B / N) * (mc->in + 2 * mc->out)) / fsends;
        else if (w == 'w' || w == 'u')
            m = w == 'w' ? r->sent / W : r->bubble, f = w == 'w' ? r->fsent / W :
                (N - 1) / (M + N - 1);
        else if (w == 's')              /* micro-batches stashed, 1F1B's over GPipe's */
            m = o->stash / fmax(r->stash, 1), f = fmin(M, N) / M;
        static const char *at[] = {"below 1", "at 1", "above 1"};
        const char *unit = w == 'c' || w == 'k' ? "x DDP's bytes" : w == 'm' || w == 'z' ?
            "of serial's memory" : w == 'w' ? "x W" : w == 'u' ? "of a step idle" : "x GPipe's stash";
        char how[120] = "";
        int agrees = rule == '<' ? side(m) == side(f) : rule == '%' ? fabs(m - f) <= 0.15 :
                     near(m, f), ran = r->ran && d->ran && (w != 's' || o->ran);
        const char *say = agrees ? "agrees" : "DIFFERS on this machine";
        if (rule == '<' && N == 2 && !side(f))
            snprintf(how, sizeof how, ", equal at N=2 by arithmetic");
        else if (rule == '<')
            snprintf(how, sizeof how, agrees ? ", both %s" : "; %s here, %s by the formula",
                     at[side(m) + 1], at[side(f) + 1]);
        if (w == 's' && f >= 0.95)      /* M <= N: both stash all M, nothing to show */
            say = "this run cannot show it";
        else if (w == 'u' && !agrees && fabs(m - f) <= r->spread)
            say = "lost in the noise";  /* a step's idle share moves as its time does */
        else if (w == 'u' && !agrees && (mach.crowded || mach.loaded))
            say = "DIFFERS here, as shared cores make it";
        dt_printf0("  %-9s %s\n            checked: %s\n", rowof[k].name, cl[i].claim,
                   checked[rule == '<' ? '<' : w]);
        dt_printf0(ran ? "            here: %.2f %s, formula %.2f%s: %s\n" : "            "
                   "here: not run\n", m, unit, f, how, say);
        if (ran && w == 'u' && !agrees)
            dt_printf0("            (%d ranks on %d cores%s, steps spread +-%.0f%%: a stage "
                       "waiting for a\n            core idles as in a bubble)\n", mach.ranks,
                       mach.cores, mach.loaded ? ", busy" : "", 100 * r->spread);
        if (ran && w == 'z')            /* what cutting alone would give */
            dt_printf0("            (cut N ways alone: %.2f; the gathered layer and its "
                       "gradient: %.2f more)\n", state(r->fheld) / state(se->fheld),
                       2 * big / state(se->fheld));
        if (ran && w == 's')            /* and the bytes the memory table shows */
            dt_printf0("            (%sactivations: 1F1B %.1f KiB, GPipe %.1f)\n", f < 0.95 ?
                       "" : "M <= N, both stash all M; ", o->held[3] / 1024,
                       r->held[3] / 1024);
    }
    dt_printf0("\nWhere a figure departs from its textbook formula (the most any rank held or "
               "sent):\nthe dp server keeps master and working weights and a gradient buffer; "
               "fsdp pads\nlayers to a multiple of N and holds a layer gathered (z3: and its "
               "gradient whole);\nlayers differ in width (the widest slice or stage holds "
               "most) and a stage keeps\nits output for the next; tp's last allreduce carries "
               "the classes, not H, and its\nfirst layer needs no input gradient; allreduces "
               "under 64 KiB go by recursive\ndoubling (log2 N x the buffer); the loss adds 8 "
               "bytes a rank.\n");
    dt_timing_note(spread, "Times here are medians of few steps on shared cores: they rank the "
                   "modes only roughly.");

    /* ==== the CSV, for slides: bytes, the formula after each measured figure ==== */
    FILE *fp = dt_output_open(csv);             /* rank 0's; NULL elsewhere */
    if (fp)
        fprintf(fp, "mode,params,params_formula,grads,grads_formula,optim,optim_formula,"
                "acts,acts_formula,sent,sent_formula,messages,compute,bubble,ms,diff\n");
    for (row *r = rows; r < rows + NROWS; r++)
        if (fp && r->ran)
            fprintf(fp, "%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.3f,%.3f,"
                    "%.3f,%.3g\n", rowof[r - rows].name, r->held[0], r->fheld[0], r->held[1],
                    r->fheld[1], r->held[2], r->fheld[2], r->held[3], r->fheld[3], r->sent,
                    r->fsent, r->msgs, r->compute, r->bubble, r->ms, r->diff);
    int wrote = dt_output_close(fp, csv, "the table");      /* a full disk: status 1 */

    /* ==== the check ==== */
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    dt_printf0("\ncheck: every mode that ran reached serial training's weights (max |weight "
               "difference| <= 1e-4): %s\n", ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/parallel/run.c (dt_train), lib/parallel/books.c (dti_held), "
               "lib/p2p.c (dt_messages_sent), lib/parallel/dp_threads.c "
               "(dti_train_dp_threads)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_data_free(&set);
    dt_finalize();
    return ok && wrote ? 0 : 1;
}
