/* Lesson 28: long sequences, three ways to cut their activations over t ranks.
 *
 * What it teaches: as sequences grow, what decides what fits is the activations a
 * block keeps for backward, Korthikanti et al.'s sbh(34 + 5as/h): linear in s, and
 * quadratic in attention's probabilities. Three cuts over t ranks, trained side by
 * side on one GPT:
 *   tp       tensor parallelism (lessons 15, 26) cuts a block's matrices by heads and
 *            columns, but every rank computes the same LayerNorms and residual adds on
 *            all s positions and keeps their inputs and outputs: the part that does not
 *            shrink with t (the 10sbh of sbh(10 + 24/t + 5as/(ht))).
 *   tp + sp  sequence parallelism (Korthikanti et al., 2022) keeps s/t of the positions
 *            there: tp's allreduce after a row-cut layer becomes a reduce-scatter along
 *            the sequence, the input of a column-cut layer an allgather. A ring
 *            allreduce IS a reduce-scatter followed by an allgather (lesson 08): sp
 *            moves the LayerNorm and the add between its two halves.
 *   cp       context parallelism cuts every position of the model: each rank holds s/t
 *            of each sequence (two zig-zag chunks) and the whole weights, attention
 *            passing keys and values round the ring (lesson 27) and keeping no
 *            probabilities at all; the weights' gradients are summed over the ranks,
 *            as data parallelism's.
 * It prints the activations each keeps beside the formulas, the bytes beside theirs,
 * the time, and each against serial training's weights.
 *
 * The code: lib/nn/gpt.c (dt_gpt_block_attn_forward: where sp's gather and scatter and
 * cp's ring go), lib/parallel/model_gpt.c (sp_gather, sp_scatter: positions padded to
 * equal blocks), lib/parallel/cp.c (dti_cp_attend: the ring).
 *
 * Run:  mpiexec -n 2 build/lessons/28_long_sequences
 *       mpiexec -n 3 build/lessons/28_long_sequences --seq 128
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 28_long_sequences [options]\n"
    "Trains one GPT over N ranks with tensor parallelism, with tensor and sequence\n"
    "parallelism, and with context parallelism: activations, bytes and time side by\n"
    "side, and serial's weights.\n"
    "  --seq T             tokens a sequence, 16 to 256 (default 64; rounded up to a\n"
    "                      multiple of 2N, for context parallelism's chunks)\n"
    "  --steps S           training steps, 3 to 20 (default 4)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { ROUNDS = 2, MAXSTEPS = 20 };

typedef struct {
    double acts, sent, msgs, diff;
    double step_s[ROUNDS * MAXSTEPS];   /* every round's step times but its first */
    int nsteps;
    dt_timing tm;
} row;

enum { TP, SP, CP, NCUTS };
static const char *const cut_name[NCUTS] = { "tp", "tp + sp", "cp" };

/* Trains c cut over every rank (TP, SP or CP) into r: the most any rank kept, a
 * step's bytes and messages (the most any rank sent), the weights' largest difference
 * from ref's, and the step times after the first (the warm-up) added to r's */
static void run(dt_train_config c, int cut, const dt_train_result *ref, row *r)
{
    dt_train_result res;
    int N = dt_size();
    c.mode = cut == CP ? DT_MODE_HYBRID : DT_MODE_TP;
    c.sp = cut == SP;
    c.cp = cut == CP ? N : 0;
    c.dp = c.tp = c.pp = 1;
    dt_train(&c, MPI_COMM_WORLD, &res);
    double v[3] = { res.peak_acts, (double)res.bytes_sent / c.steps,
                    (double)res.messages_sent / c.steps };
    MPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    r->acts = v[0], r->sent = v[1], r->msgs = v[2];
    for (int i = 1; i < c.steps; i++)
        r->step_s[r->nsteps++] = res.step_seconds[i];
    r->diff = fmax(r->diff, dt_params_max_diff(res.params, ref->params, ref->nparams,
                                               MPI_COMM_WORLD));
    dt_train_result_free(&res);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int t = dt_size(), steps = 4, seq = 64, opt;
    char why[200] = "";
    static const struct option longopts[] = {{"seq", required_argument, NULL, 's'},
        {"steps", required_argument, NULL, 'n'}, {"help", no_argument, NULL, 'h'},
        DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    opterr = 0;                                 /* dt_usage_error speaks, on rank 0 */
    while (!*why && (opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (opt == 's' && dt_parse_int(optarg, 16, 256, &seq))
            snprintf(why, sizeof why, "--seq must be a whole number from 16 to 256");
        else if (opt == 'n' && dt_parse_int(optarg, 3, 20, &steps))
            snprintf(why, sizeof why, "--steps must be a whole number from 3 to 20");
        else if (opt == 'h')
            dt_usage_help(usage);
        else if (opt != 's' && opt != 'n' && opt != DT_OPT_DEVICE && opt != DT_OPT_TRACE)
            dt_bad_option(opt, argv, why, sizeof why);
    }
    if (!*why && optind < argc)
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
    if (*why)
        dt_usage_error(usage, why);
    dt_print_devices();
    int gpu = dt_device() == DT_CUDA;

    /* one GPT: 12 heads of 4 columns where t shares them, else 2t heads; sequences of
     * a multiple of 2t positions (cp cuts each into 2t chunks) */
    int H = 12 % t == 0 ? 12 : 2 * t, L = 2, asked = seq;
    seq = (seq + 2 * t - 1) / (2 * t) * (2 * t);
    dt_text text;
    dt_text_generate(&text, 20000, 1);          /* the same on every rank, no file needed */
    dt_train_config base;
    dt_train_defaults(&base);
    base.on_device = gpu;                       /* cp aside (below) */
    base.kind = DT_MODEL_GPT;
    base.gpt = (dt_gpt_config){ .vocab = 256, .seq = seq, .embed = 4 * H, .heads = H,
                                .layers = L };
    base.text = &text;
    /* Adam with eps 1e-6, not 1e-8: a gradient near 0 (the keys' bias) divided by
     * sqrt(v) + eps would carry each cut's rounding into a step of full size, lr */
    base.optim = (dt_optim_config){ DT_ADAM, 3e-3f, 0, 0.9f, 0.999f, 1e-6f };
    base.batch = 8;
    base.steps = steps;
    double s = seq, b = base.batch, h = base.gpt.embed, a = H, V = 256, n = b * s / t;
    double P = (double)dt_gpt_nparams(&base.gpt);
    dt_printf0("One GPT: %d blocks of %d heads, width h = %.0f, s = %d positions%s,\n"
               "b = %.0f sequences, %.0f weights; cut over t = %d rank%s.\n\n", L, H, h, seq,
               seq != asked ? " (a multiple of 2t)" : "", b, P, t, t == 1 ? "" : "s");

    /* ==== the plan ==== */
    dt_printf0(
        "One block's forward, and where each rank holds all s positions (ALL) or s/t:\n"
        "             tp                     tp + sp                cp\n"
        "  LayerNorm  ALL (every rank alike)  its s/t               its s/t\n"
        "  into wqkv  (the same input)        allgather: ALL        its s/t\n"
        "  attention  its heads, ALL          its heads, ALL        all heads, its s/t\n"
        "                                                           queries; keys and\n"
        "                                                           values round the ring\n"
        "  out of wo  allreduce: ALL          reduce-scatter: s/t   its s/t\n"
        "  + residual ALL                     its s/t               its s/t\n"
        "  weights    1/t of the matrices     1/t of the matrices   all, gradients summed\n"
        "(the MLP as attention's projections: w1 by columns, w2 by rows). Backward runs\n"
        "the transposes; sp gathers each LayerNorm's output again rather than keep it\n"
        "whole, and its LayerNorms' gradients, each rank's positions' part, are summed\n"
        "once a step; cp's keys' and values' gradients go round the ring with them.\n\n");
    if (t == 1) {
        dt_printf0("At one rank there is nothing to cut: run with mpiexec -n 2 or more.\n"
                   "The code: lib/nn/gpt.c (dt_gpt_block_attn_forward), "
                   "lib/parallel/model_gpt.c (sp_gather, sp_scatter), lib/parallel/cp.c "
                   "(dti_cp_attend)\n");
        dt_text_free(&text);
        dt_finalize();
        return 0;
    }

    /* ==== the runs: serial (the weights to reach), then the cuts in turn ==== */
    /* cp's ring attention runs on the host only so far (lib/nn/ringattn.c): on a GPU,
     * cp trains on the host, held to a serial run there */
    dt_train_result ref, href;
    dt_train_config host = base;
    host.on_device = 0;
    dt_train_serial(&base, MPI_COMM_WORLD, &ref);
    if (gpu) {                         /* scripts/gpu-check.sh fails a GPU run on this line */
        dt_printf0("on the CPU: cp (ring attention, lib/nn/ringattn.c, runs on the host "
                   "only so\nfar), held to serial training on the host; tp and tp + sp "
                   "train on the GPU\n\n");
        dt_train_serial(&host, MPI_COMM_WORLD, &href);
    }
    row r[NCUTS] = {{0}};
    for (int round = 0; round < ROUNDS; round++)    /* in turn: the load falls on all */
        for (int k = 0; k < NCUTS; k++)
            run(k == CP ? host : base, k, k == CP && gpu ? &href : &ref, &r[k]);
    for (int k = 0; k < NCUTS; k++)
        r[k].tm = dt_timing_of(r[k].step_s, r[k].nsteps);
    dt_train_result_free(&ref);
    if (gpu)
        dt_train_result_free(&href);

    /* ==== activations ==== */
    /* dtlab keeps, fp32, per block: x, ln1, x2, ln2 and 4 statistics a row (tp: all
     * s b rows; sp, cp: n = sb/t), q, k, v, y and the MLP's h, g (tp, sp: their heads
     * and columns of all rows, 16 sbh/t; cp: all of them on n rows), and attention's
     * probabilities (tp, sp: a s^2 b / t; cp: none, one lse a query row and head);
     * outside the blocks the stream out, lnf (sp: gathered whole) and its statistics,
     * the logits (cp: of n rows) */
    double serial = 4 * 16 * s * b * h + 4 * a * s * s * b + 16 * s * b;
    double mb[NCUTS] = {
        4 * (4 * s * b * h + 12 * s * b * h / t) + 4 * a * s * s * b / t + 16 * s * b,
        4 * (4 * n * h + 12 * s * b * h / t) + 4 * a * s * s * b / t + 16 * n,
        4 * 16 * n * h + 16 * n + 4 * a * n };
    double rest[NCUTS] = { 4 * s * b * (2 * h + 2 + V), 4 * (n * h + s * b * h + 2 * n + s * b * V),
                           4 * n * (2 * h + 2 + V) };
    double kor[NCUTS] = { s * b * h * (10 + 24 / (double)t + 5 * a * s / (h * t)),
                          s * b * h / t * (34 + 5 * a * s / h), s * b * h / t * 34 };
    static const char *const korf[NCUTS] = { "sbh(10+24/t+5as/(ht))", "sbh/t (34+5as/h)",
                                             "sbh/t x 34" };
    int acts_ok = 1;
    dt_printf0("Activations a block keeps, per rank (KiB; serial training's block: %.1f):\n"
               "          Korthikanti (16-bit)      dtlab (fp32)  measured, all blocks\n",
               serial / 1024);
    for (int k = 0; k < NCUTS; k++) {
        acts_ok &= fabs(r[k].acts - (L * mb[k] + rest[k])) < 1;
        dt_printf0("  %-7s %-22s %7.1f %8.1f %9.1f = %d x %.1f + %.1f\n", cut_name[k],
                   korf[k], kor[k] / 1024, mb[k] / 1024, r[k].acts / 1024, L, mb[k] / 1024,
                   rest[k] / 1024);
    }
    dt_printf0("  (+ the rest: the stream out, the final LayerNorm, the logits; cp's "
               "formula:\n  Korthikanti's without attention's 5as/h, as ring attention "
               "keeps no\n  probabilities)\n"
               "  measured: %s. A block keeps %.3f of serial's under tp + sp\n"
               "  (1/t = %.3f), %.3f under cp (less: no probabilities, only %.0f floats of\n"
               "  lse a row), and %.3f under tp (the LayerNorms' region whole).\n",
               acts_ok ? "as counted" : "NOT as counted", mb[SP] / serial, 1.0 / t,
               mb[CP] / serial, a, mb[TP] / serial);

    /* ==== bytes ==== */
    /* tp: 4 allreduces a block (2 forward, 2 backward) of the activation, v = 4sbh
     * bytes, each a ring (v >= 64 KiB) sending 2(t-1)/t v a rank. sp: blocks of v/t,
     * each allgather or reduce-scatter sending t-1 of them: 4 a block forward, 6
     * backward (2 more: the LayerNorms' outputs gathered again), lnf's output gathered
     * for the head, the stream's gradient for the embeddings; and the LayerNorms'
     * gradients, (4L + 2) h floats, summed by recursive doubling. cp: a block's keys
     * and values, 2v/t, passed on t-1 times forward and t-1 backward, their gradients t
     * times backward; and the weights' gradients, 4P bytes, a ring allreduce over the t
     * ranks: 2(t-1)/t of them */
    double v = 4 * s * b * h, lnb = 4 * (4 * L + 2) * h, rd = 0;
    for (int k = 1; k < t; k *= 2)              /* rd: log2 of the power of two below */
        rd += lnb;
    if (t & (t - 1))                            /* t not a power of two: a fold step */
        rd += lnb;
    double f[NCUTS] = { L * 4 * 2 * (t - 1.0) / t * v, (10.0 * L + 2) * (t - 1) * v / t,
                        L * (3.0 * t - 2) * 2 * v / t + 2 * (t - 1.0) / t * 4 * P };
    double extra[NCUTS] = { 0, rd, 0 };
    static const char *const ff[NCUTS] = {
        "4L allreduces x 2(t-1)/t x 4sbh", "(10L + 2) x (t-1) x 4sbh/t + LN sums",
        "L(3t-2) x 8sbh/t + 2(t-1)/t x 4P" };
    int bytes_ok = 1;
    dt_printf0("\nBytes a step, the most a rank sent (KiB), messages, and the formula:\n");
    for (int k = 0; k < NCUTS; k++) {
        bytes_ok &= r[k].sent >= f[k] && r[k].sent <= 1.01 * (f[k] + extra[k]) + 1024;
        dt_printf0("  %-8s %8.1f %4.0f msgs   %-34s %8.1f\n", cut_name[k], r[k].sent / 1024,
                   r[k].msgs, ff[k], (f[k] + extra[k]) / 1024);
    }
    dt_printf0("  (all also sum the loss a step, a few bytes)\n"
               "  measured beside the formulas: %s. sp sends %.2fx tp's bytes: the same\n"
               "  forward (a ring allreduce is its reduce-scatter and allgather), more\n"
               "  backward, where it gathers the LayerNorms' outputs again rather than keep\n"
               "  them whole. cp sends %.2fx tp's: keys and values, t-1 passes of 2/t of an\n"
               "  activation each way, and the weights' gradients (%.0f%% of its bytes\n"
               "  here), which tp never sums.\n", bytes_ok ? "as counted" : "NOT as counted",
               r[SP].sent / r[TP].sent, r[CP].sent / r[TP].sent,
               100 * 2 * (t - 1.0) / t * 4 * P / r[CP].sent);

    /* ==== time and weights ==== */
    double spread = 0;
    dt_printf0("\nA step (medians of %d, the runs in turn):\n ", r[TP].nsteps);
    for (int k = 0; k < NCUTS; k++) {
        spread = fmax(spread, dt_timing_spread(r[k].tm));
        dt_printf0(" %s %.2f ms%s", cut_name[k], r[k].tm.median * 1e3, k < CP ? "," : ".\n");
    }
    for (int k = SP; k < NCUTS; k++) {
        int cmp = dt_timing_compare(r[k].tm, r[TP].tm);
        dt_printf0("  %s against tp: %.2fx, %s.\n", cut_name[k], r[k].tm.median / r[TP].tm.median,
                   cmp > 0 ? "slower beyond the spread of the steps" : cmp < 0
                   ? "faster beyond the spread of the steps" : "within the noise");
    }
    dt_timing_note(spread, "Times here are medians of few steps on shared cores.");
    int ok = acts_ok && bytes_ok;
    dt_printf0("Max |weight - serial's| after %d steps:", steps);
    for (int k = 0; k < NCUTS; k++) {
        ok &= r[k].diff <= 1e-4;
        dt_printf0(" %s %.2g%s", cut_name[k], r[k].diff, k < CP ? "," : "");
    }
    dt_printf0("\n(the sums run in other orders: rounding).\n\ncheck: every cut reaches "
               "serial training's weights (<= 1e-4), activations and\nbytes as counted: "
               "%s\n", ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/nn/gpt.c (dt_gpt_block_attn_forward), "
               "lib/parallel/model_gpt.c (sp_gather, sp_scatter), lib/parallel/cp.c "
               "(dti_cp_attend)\n");

    /* ==== teardown ==== */
    dt_text_free(&text);
    dt_finalize();
    return ok ? 0 : 1;
}
