/* Lesson 26: a transformer in every mode.
 *
 * What it teaches: the modes of lessons 11-24 were shown on an MLP; the model the field
 * trains is a transformer, and three things change with it. Tensor parallelism cuts
 * attention by heads (each rank owns whole heads) and leaves the embeddings, the
 * LayerNorms and some biases whole on every rank. A pipeline's first stage embeds and
 * its last predicts with the same matrix (the head is tied to the embedding), so both
 * hold it and sum its gradient. And what forward keeps for backward, the activations,
 * grows with the sequence: attention's probabilities are (heads x T x T) a sequence,
 * which is what Korthikanti et al.'s formula sbh(34 + 5as/h) counts. This lesson trains
 * one small GPT in every mode at N ranks and prints, for each, the memory, bytes and
 * time, and where its weights live; and what recomputing activations in backward
 * saves and costs (Korthikanti et al.'s full and selective recomputation). Mixture of
 * experts changes the model itself: the MLP of every other block becomes 2 experts per
 * rank, each token sent to one of them by all-to-all; with one expert that takes every
 * token it is the dense GPT again.
 *
 * The code: lib/nn/gpt.c (the model), lib/parallel/model_gpt.c (heads over ranks, the
 * tied embedding in stages), lib/parallel/fsdp.c (the embeddings held whole),
 * lib/parallel/moe_gpt.c (experts in place of the MLP of blocks 1, 3, ...).
 *
 * Run:  mpiexec -n 3 build/lessons/26_transformer
 *       mpiexec -n 4 build/lessons/26_transformer --seq 64
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"
#include "parallel/moe.h"

static const char usage[] =
    "usage: mpiexec -n N 26_transformer [options]\n"
    "Trains one small GPT in every mode at N ranks: where its weights live, memory,\n"
    "activations beside Korthikanti et al.'s formula, bytes and time a step.\n"
    "  --seq T             tokens a sequence, 8 to 256 (default 32)\n"
    "  --steps S           training steps, 2 to 20 (default 3)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SERIAL, DP, DDP, Z1, Z3, TP, PP, HYB, MOE, NROWS };
static const struct { const char *name; dt_mode mode; int zero; } rowof[NROWS] = {
    {"serial", DT_MODE_SERIAL, 3}, {"dp", DT_MODE_DP, 3}, {"ddp", DT_MODE_DDP, 3},
    {"fsdp-z1", DT_MODE_FSDP, 1}, {"fsdp-z3", DT_MODE_FSDP, 3}, {"tp", DT_MODE_TP, 3},
    {"pp-1f1b", DT_MODE_PP, 3}, {"hybrid", DT_MODE_HYBRID, 3}, {"moe", DT_MODE_MOE, 3}};

typedef struct {
    int ran;
    char why[160];
    double held[4], sent, msgs, ms, spread, diff;
    dt_timing tm;
} row;

/* Floats of unit u of the whole model kept on a rank that cuts blocks over t ranks:
 * the embeddings and lnf whole; a block's LayerNorms and bo, b2 (6C) whole, the rest
 * (12C^2 + 7C: q, k, v, wo, w1, w2 and bqkv, b1) cut */
static double unit_floats(const dt_gpt_config *g, int u, int t)
{
    double C = g->embed;
    if (u == 0 || u == g->layers + 1)
        return (double)dt_gpt_unit_size(g, u);
    return 6 * C + (12 * C * C + 7 * C) / t;
}

/* The weights the rank that holds most keeps: stages of units (P), blocks cut (T); the
 * last stage, without the embeddings, keeps a copy of wte */
static double weights_most(const dt_gpt_config *g, int T, int P)
{
    double most = 0;
    for (int s = 0; s < P; s++) {
        size_t u0, u1;
        dt_chunk_bounds((size_t)dt_gpt_units(g), P, s, &u0, &u1);
        double n = u0 > 0 && u1 == (size_t)dt_gpt_units(g) ? (double)g->vocab * g->embed : 0;
        for (size_t u = u0; u < u1; u++)
            n += unit_floats(g, (int)u, T);
        most = fmax(most, n);
    }
    return 4 * most;
}

/* moe on N ranks: the floats of the replicated part (the GPT less the MLP of each MoE
 * block, plus a gate of E x C + E each) and of this rank's E/N experts of each; *dense
 * the position of every float of the dense layout in moe's (-1: none), gates skipped */
static double moe_floats(const dt_train_config *c, int N)
{
    const dt_gpt_config *g = &c->gpt;
    double nl = dt_moe_gpt_layers(g), E = dt_moe_experts(c, N), C = g->embed;
    double mlp = (double)dt_gpt_mlp_size(g, 4 * g->embed);
    return (double)dt_gpt_nparams(g) - nl * mlp + nl * (E * C + E) + nl * (E / N) * mlp;
}

/* The largest |a - b| over the dense GPT's weights, a in the dense layout, b in moe's
 * with one expert (dt_moe_nparams): each MoE block's gate (C + 1 floats after its
 * attention part) skipped */
static double moe1_diff(const dt_gpt_config *g, const float *a, const float *b)
{
    double d = 0;
    size_t ia = 0, ib = 0;
    for (int u = 0; u < dt_gpt_units(g); u++) {
        size_t n = dt_gpt_unit_size(g, u), attn = dt_gpt_attn_size(g, g->heads);
        int moe = u >= 1 && dt_moe_gpt_layer_of(g, u - 1) >= 0;
        for (size_t i = 0; i < n; i++) {
            if (moe && i == attn)
                ib += (size_t)g->embed + 1;
            d = fmax(d, fabs((double)a[ia++] - b[ib++]));
        }
    }
    return d;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int N = dt_size(), rank = dt_rank(), steps = 3, seq = 32, opt;
    char why[200] = "";
    static const struct option longopts[] = {{"seq", required_argument, NULL, 't'},
        {"steps", required_argument, NULL, 's'}, {"help", no_argument, NULL, 'h'},
        DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    opterr = 0;                                 /* dt_usage_error speaks, on rank 0 */
    while (!*why && (opt = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        if (opt == 't' && dt_parse_int(optarg, 8, 256, &seq))
            snprintf(why, sizeof why, "--seq must be a whole number from 8 to 256");
        else if (opt == 's' && dt_parse_int(optarg, 2, 20, &steps))
            snprintf(why, sizeof why, "--steps must be a whole number from 2 to 20");
        else if (opt == 'h')
            dt_usage_help(usage);
        else if (opt != 't' && opt != 's' && opt != DT_OPT_DEVICE && opt != DT_OPT_TRACE)
            dt_bad_option(opt, argv, why, sizeof why);
    }
    if (!*why && optind < argc)
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
    if (*why)
        dt_usage_error(usage, why);
    dt_print_devices();
    int gpu = dt_device() == DT_CUDA;
    dt_text text;
    dt_text_generate(&text, 20000, 1);          /* the same on every rank, no file needed */
    dt_train_config base;
    dt_train_defaults(&base);
    base.on_device = gpu;                       /* moe aside (below) */
    base.kind = DT_MODEL_GPT;
    base.gpt = (dt_gpt_config){ .vocab = 256, .seq = seq, .embed = 48, .heads = 12,
                                .layers = 4 };
    base.text = &text;
    base.optim = (dt_optim_config){ DT_ADAM, 3e-3f, 0, 0.9f, 0.999f, 1e-8f };
    base.micro = 4;
    base.batch = (16 + 4 * N - 1) / (4 * N) * (4 * N);  /* N replicas x 4 micro-batches */
    base.steps = steps;
    const dt_gpt_config *g = &base.gpt;
    int D = 1, T = 1, P = 1, *dim[3] = {&D, &P, &T}, m = N, f = 2, q = 0;
    for (; m > 1; f++)                          /* hybrid: N's factors over D, P, T */
        while (m % f == 0) { *dim[q++ % 3] *= f; m /= f; }
    double Psi = (double)dt_gpt_nparams(g), C = g->embed, V = g->vocab;
    int L = g->layers, H = g->heads;
    dt_printf0("One GPT: %d blocks of %d heads (%d columns each), width %.0f, sequences of "
               "%d bytes;\n%.0f weights (embeddings %zu, a block %zu, final LayerNorm %.0f), "
               "Adam; batch %d, %d steps, %d rank%s.\n\n", L, H, (int)C / H, C, seq, Psi,
               dt_gpt_unit_size(g, 0), dt_gpt_unit_size(g, 1), 2 * C, base.batch, steps, N,
               N == 1 ? "" : "s");

    /* ==== where the weights live ==== */
    dt_printf0("Where the weights live at %d rank%s:\n", N, N == 1 ? "" : "s");
    if (H % N == 0)                             /* tp: whole heads per rank */
        for (int r = 0; r < N && N > 1; r++)
            dt_printf0("  tp rank %d: heads %d..%d (their rows of q, k and v, their "
                       "columns of wo), MLP columns %d..%d\n", r, r * H / N,
                       (r + 1) * H / N - 1, r * 4 * (int)C / N, (r + 1) * 4 * (int)C / N - 1);
    else
        dt_printf0("  tp: %d heads cannot be shared by %d ranks (each takes whole heads)\n",
                   H, N);
    dt_printf0("  tp: the embeddings (%.0f KiB), the LayerNorms and bo, b2 are whole on "
               "every rank\n", 4 * (V + seq) * C / 1024);
    for (int s = 0; s < N && N <= dt_gpt_units(g); s++) {
        size_t u0, u1;
        dt_chunk_bounds((size_t)dt_gpt_units(g), N, s, &u0, &u1);
        int b0 = u0 > 0 ? (int)u0 - 1 : 0, b1 = u1 - 1 < (size_t)L ? (int)u1 - 1 : L;
        dt_printf0("  pp stage %d:%s%s", s, u0 == 0 ? " the embeddings" : "",
                   b1 > b0 ? (u0 == 0 ? "," : "") : "");
        if (b1 > b0)
            dt_printf0(" block%s %d%s%.0d", b1 - b0 > 1 ? "s" : "", b0, b1 - b0 > 1 ? ".."
                       : "", b1 - b0 > 1 ? b1 - 1 : 0);
        if (u1 == (size_t)dt_gpt_units(g))
            dt_printf0(", the final LayerNorm and the head%s", u0 > 0 ? " with a copy of "
                       "wte: its gradient summed with stage 0's every step" : "");
        dt_printf0("\n");
    }
    dt_printf0("  fsdp: one unit gathered at a time (a block %.0f KiB); stage 3 keeps the "
               "embeddings\n  whole from forward to backward, as the head uses wte\n\n",
               4 * (double)dt_gpt_unit_size(g, 1) / 1024);

    /* ==== the runs ==== */
    dt_train_result ref, res;
    dt_train_serial(&base, MPI_COMM_WORLD, &ref);
    row rows[NROWS] = {{0}};
    double spread = 0;
    for (int k = 0; k < NROWS; k++) {
        row *r = &rows[k];
        dt_train_config c = base;
        c.mode = rowof[k].mode, c.zero = rowof[k].zero;
        c.dp = k == HYB ? D : 1, c.tp = k == HYB ? T : 1, c.pp = k == HYB ? P : 1;
        int alone = k == SERIAL;
        if (k == HYB && (D == N || T == N || P == N)) {
            snprintf(r->why, sizeof r->why, N == 1 ? "one rank makes no grid" : "%d ranks "
                     "(a prime) give a grid of one dimension, a mode above", N);
            continue;
        }
        if (k == MOE)                 /* the GPT's experts route on the host so far */
            c.on_device = 0;
        if (dt_train_check(&c, alone ? 1 : N, r->why, sizeof r->why))
            continue;
        if (k == MOE && gpu)          /* scripts/gpu-check.sh fails a GPU run on this line */
            dt_printf0("on the CPU: moe (lib/parallel/moe_gpt.c routes the GPT's tokens on "
                       "the host so\nfar), and its one-expert check below, held to a "
                       "serial run on the host\n");
        MPI_Comm comm = alone ? MPI_COMM_SELF : MPI_COMM_WORLD;
        if (!alone || rank == 0) {
            dt_train(&c, comm, &res);
            double v[6] = {res.peak_params, res.peak_grads, res.peak_optim, res.peak_acts,
                           (double)res.bytes_sent / steps, (double)res.messages_sent / steps};
            dt_timing tm = dt_train_step_timing(&res);
            r->ms = tm.median * 1e3, r->spread = dt_timing_spread(tm), r->tm = tm;
            r->diff = k == MOE ? -1         /* another model: no serial weights to hold */
                      : dt_params_max_diff(res.params, ref.params, ref.nparams, comm);
            if (!alone)
                MPI_Allreduce(MPI_IN_PLACE, v, 6, MPI_DOUBLE, MPI_MAX, comm);
            memcpy(r->held, v, sizeof r->held);
            r->sent = v[4], r->msgs = v[5];
            dt_train_result_free(&res);
        }
        MPI_Bcast(r, sizeof *r, MPI_BYTE, 0, MPI_COMM_WORLD);   /* rank 0's books */
        r->ran = 1, spread = fmax(spread, r->spread);
    }

    /* ==== memory and bytes ==== */
    /* fsdp-z3: its shards (padding aside), the largest block gathered, the embeddings
     * whole; dp: the server, which computes too, keeps the master weights besides */
    double z3 = 4 * (Psi / N + (double)dt_gpt_unit_size(g, 1) + (double)dt_gpt_unit_size(g, 0));
    dt_printf0("Per rank, the most any rank held (KiB), and a step's bytes and messages:\n"
               "%-9s %9s %9s %9s %9s %9s %6s %8s %9s\n", "mode", "weights", "formula",
               "optimizer", "acts", "sent", "msgs", "ms", "vs serial");
    int ok = 1, fits = 1;
    for (int k = 0; k < NROWS; k++) {
        row *r = &rows[k];
        int t = k == TP ? N : k == HYB ? T : 1, p = k == PP ? N : k == HYB ? P : 1;
        double fw = k == Z3 ? z3 : k == DP ? 2 * weights_most(g, 1, 1)
                    : k == MOE ? 4 * moe_floats(&base, N) : weights_most(g, t, p);
        char vs[16] = "  (other)";                /* moe: another model */
        if (r->diff >= 0)
            snprintf(vs, sizeof vs, "%9.2g", r->diff);
        if (r->ran)
            dt_printf0("%-9s %9.1f %9.1f %9.1f %9.1f %9.1f %6.0f %8.2f %9s\n",
                       rowof[k].name, r->held[0] / 1024, fw / 1024, r->held[2] / 1024,
                       r->held[3] / 1024, r->sent / 1024, r->msgs, r->ms, vs);
        else
            dt_printf0("%-9s not run: %s.\n", rowof[k].name, r->why);
        ok &= !r->ran || r->diff <= 1e-4;
        fits &= !r->ran || fabs(r->held[0] - fw) <= 0.01 * fw;
    }
    dt_printf0("weights beside their formula (dp: the server's master copy too; fsdp-z3: a "
               "1/%d share,\nthe largest block gathered and the embeddings whole): %s\n", N,
               fits ? "every row within 1%" : "SOME ROW DIFFERS by more than 1%");
    double tp_share = rows[TP].ran ? rows[TP].held[0] / rows[SERIAL].held[0] : 0;
    if (rows[TP].ran && N > 1)
        dt_printf0("tp holds %.2f of serial's weights, not 1/%d = %.2f: the embeddings and "
                   "LayerNorms are whole on every rank (formula: %.2f).\n", tp_share, N,
                   1.0 / N, weights_most(g, N, 1) / (4 * Psi));
    if (rows[PP].ran && N > 1)
        dt_printf0("pp's fullest stage holds %.2f of serial's weights (formula %.2f): a "
                   "stage takes whole units, the last a copy of wte besides.\n",
                   rows[PP].held[0] / rows[SERIAL].held[0], weights_most(g, 1, N) / (4 * Psi));
    if (rows[Z3].ran)
        dt_printf0("fsdp-z3 holds %.2f of serial's weights: 1/%d = %.2f, plus %.2f for the "
                   "block gathered\nand the embeddings kept whole.\n",
                   rows[Z3].held[0] / rows[SERIAL].held[0], N, 1.0 / N,
                   (z3 - 4 * Psi / N) / (4 * Psi));
    if (rows[MOE].ran) {
        int nl = dt_moe_gpt_layers(g), E = dt_moe_experts(&base, N);
        dt_printf0("moe holds %.2f of serial's weights: the MLPs of blocks 1 and 3 are %d "
                   "experts\neach, %d on every rank, the rest replicated; a token still "
                   "passes through one\nMLP a block (top-1), and %d all-to-alls a step (4 "
                   "per MoE block) carry the\ntokens to their experts and back.\n",
                   rows[MOE].held[0] / rows[SERIAL].held[0], E, E / N, 4 * nl);
    }

    /* ==== one expert is the dense block ==== */
    /* on rank 0: one expert, every token kept (capacity 1: T slots), no aux loss */
    double one_diff = -1;
    if (rank == 0) {
        dt_train_config c = base;
        c.on_device = 0;                /* moe_gpt.c: the host's (the serial run beside */
        c.mode = DT_MODE_MOE, c.experts = 1, c.capacity = 1.0f, c.aux_loss = 0, c.topk = 1;
        c.moe_groups = 1;
        if (dt_train_check(&c, 1, why, sizeof why) == 0) {
            dt_train_result host;       /* it too, where ref ran on the GPU) */
            const dt_train_result *r0 = &ref;
            if (gpu) {
                dt_train_config s = base;
                s.on_device = 0;
                dt_train(&s, MPI_COMM_SELF, &host);
                r0 = &host;
            }
            dt_train(&c, MPI_COMM_SELF, &res);
            one_diff = moe1_diff(g, r0->params, res.params);
            for (int i = 0; i < steps; i++)
                one_diff = fmax(one_diff, fabs((double)res.loss[i] - r0->loss[i]));
            dt_train_result_free(&res);
            if (gpu)
                dt_train_result_free(&host);
        }
    }
    MPI_Bcast(&one_diff, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    dt_printf0("moe with one expert that takes every token (p = 1, nothing dropped), on one\n"
               "rank: max |difference| from serial training's losses and weights (the gates\n"
               "aside) %.2g: %s\n", one_diff, one_diff == 0 ? "the same bits, the "
               "dense GPT again" : one_diff < 0 ? "not run" : "NOT the dense GPT");
    ok &= one_diff == 0;

    /* ==== activations beside the formula ==== */
    double s = seq, b = base.batch, h = C, a = H;
    double kor = s * b * h * (34 + 5 * a * s / h);              /* bytes, 16-bit */
    double mine = 4 * s * b * h * 16 + 4 * a * s * s * b + 16 * s * b;   /* fp32 */
    double rest = 4 * s * b * (2 * h + 2 + V);        /* the stream out, lnf, logits */
    dt_printf0("\nActivations a block keeps for backward, whole batch (s = %.0f, b = %.0f, "
               "h = %.0f, a = %.0f):\n  Korthikanti et al. (16-bit, with dropout): "
               "sbh(34 + 5as/h) = %.1f KiB\n  dtlab (fp32, no dropout, LayerNorms' means and "
               "rstds): 4sbh x 16 + 4as^2b + 16sb = %.1f KiB\n", s, b, h, a, kor / 1024,
               mine / 1024);
    double serial_acts = rows[SERIAL].held[3], expect = L * mine + rest;
    dt_printf0("  serial measured %.1f KiB = %d blocks x %.1f + %.1f (lnf, logits, the "
               "stream out): %s\n", serial_acts / 1024, L, mine / 1024, rest / 1024,
               fabs(serial_acts - expect) < 1 ? "as counted" : "NOT as counted");
    ok &= fabs(serial_acts - expect) < 1 && fits;
    if (rows[TP].ran && N > 1) {                /* tp: heads and MLP columns cut N ways */
        double t = N, kt = s * b * h * (10 + 24 / t + 5 * a * s / (h * t));
        double mt = 4 * s * b * h * (4 + 12 / t) + 4 * a * s * s * b / t + 16 * s * b;
        int same = fabs(rows[TP].held[3] - (L * mt + rest)) < 1;
        dt_printf0("  tp at t = %d: Korthikanti sbh(10 + 24/t + 5as/(ht)) = %.1f KiB; dtlab "
                   "4sbh(4 + 12/t)\n  + 4as^2b/t + 16sb = %.1f KiB; measured %.1f KiB a "
                   "rank = %d x %.1f + %.1f: %s\n", N, kt / 1024, mt / 1024,
                   rows[TP].held[3] / 1024, L, mt / 1024, rest / 1024, same ? "as counted"
                   : "NOT as counted");
        ok &= same;
    }
    /* recomputation, serial (rank 0, the others waiting politely): what a block keeps,
     * the weights against keeping everything, and the time it costs, from three rounds
     * of the three runs (4 steps each) taken in turn, so that a change in the machine's
     * load falls on all three alike */
    enum { ROUNDS = 2, RSTEPS = 4 };
    row rc[3] = {{0}};
    double rt[3][ROUNDS * (RSTEPS - 1)];
    float *keep = NULL;
    for (int round = 0; round < ROUNDS; round++)
        for (int k = 0; k < 3; k++) {
            if (rank != 0)
                continue;
            dt_train_config c = base;
            c.steps = RSTEPS;
            c.recompute = k == 0 ? DT_GPT_KEEP : k == 1 ? DT_GPT_RECOMPUTE_FULL
                          : DT_GPT_RECOMPUTE_SELECTIVE;
            dt_train(&c, MPI_COMM_SELF, &res);
            for (int i = 1; i < RSTEPS; i++)             /* the first step warms up */
                rt[k][round * (RSTEPS - 1) + i - 1] = res.step_seconds[i];
            rc[k].held[3] = res.peak_acts;
            if (round == 0 && k == 0)
                keep = res.params, res.params = NULL;     /* kept for the other two */
            else if (k > 0)
                rc[k].diff = fmax(rc[k].diff, memcmp(res.params, keep, res.nparams *
                                                     sizeof(float)) != 0);
            dt_train_result_free(&res);
        }
    for (int k = 0; k < 3 && rank == 0; k++) {
        rc[k].tm = dt_timing_of(rt[k], ROUNDS * (RSTEPS - 1));
        rc[k].ms = rc[k].tm.median * 1e3, rc[k].spread = dt_timing_spread(rc[k].tm);
    }
    free(keep);
    dt_barrier(MPI_COMM_WORLD);                  /* the others wait politely */
    MPI_Bcast(rc, sizeof rc, MPI_BYTE, 0, MPI_COMM_WORLD);
    for (int k = 0; k < 3; k++)
        spread = fmax(spread, rc[k].spread);
    double x4 = 4 * s * b * h, p4 = 4 * a * s * s * b;  /* a block's input; probabilities */
    double want_full = L * x4 + (mine - x4) + rest, want_sel = L * (mine - p4) + p4 + rest;
    int mem_ok = fabs(rc[1].held[3] - want_full) < 1 && fabs(rc[2].held[3] - want_sel) < 1;
    int rc_ok = mem_ok && rc[1].diff == 0 && rc[2].diff == 0;
    dt_printf0("  recomputed, serial: full keeps a block's input (4sbh = %.1f KiB; Korthikanti "
               "2sbh\n  in 16-bit) and one block's worth the blocks share: %d x %.1f + %.1f "
               "+ %.1f = %.1f KiB,\n  measured %.1f; selective keeps all but attention's "
               "probabilities (4as^2b = %.1f KiB\n  a block; Korthikanti sbh x 34), one "
               "buffer shared: %d x %.1f + %.1f + %.1f = %.1f KiB,\n  measured %.1f: %s; the "
               "weights the same bits as keeping everything: %s\n", x4 / 1024, L, x4 / 1024,
               (mine - x4) / 1024, rest / 1024, want_full / 1024, rc[1].held[3] / 1024,
               p4 / 1024, L, (mine - p4) / 1024, p4 / 1024, rest / 1024, want_sel / 1024,
               rc[2].held[3] / 1024, mem_ok ? "as counted" : "NOT as counted", rc[1].diff == 0 && rc[2].diff == 0 ? "yes" : "NO");
    for (int k = 1; k < 3; k++) {
        int cmp = dt_timing_compare(rc[k].tm, rc[0].tm);
        dt_printf0("  %s: a step took %.2f ms against %.2f keeping everything (%.2fx):\n"
                   "    %s\n",
                   k == 1 ? "full recomputation" : "selective", rc[k].ms, rc[0].ms,
                   rc[k].ms / rc[0].ms, cmp > 0 ? k == 1 ? "the blocks' forward, run "
                   "twice, costs time" : "recomputing the probabilities costs time"
                   : cmp < 0 ? "faster, which the noise must explain" : "within the noise");
    }
    ok &= rc_ok;
    dt_printf0("  attention's share of a block: %.0f%% here (5as/h = %.1f of 34 + 5as/h in "
               "the formula);\n  it grows with s: try --seq 128\n",
               100 * 4 * a * s * s * b / mine, 5 * a * s / h);
    dt_timing_note(spread, "Times here are medians of few steps on shared cores: they rank the "
                   "modes only roughly.");

    /* ==== the check ==== */
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    dt_printf0("\ncheck: every mode that ran reached serial training's weights (max |weight "
               "difference| <= 1e-4),\nits weights and serial's activations, kept or recomputed, are as counted: %s\n",
               ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/nn/gpt.c (dt_gpt_forward_stage), lib/parallel/model_gpt.c "
               "(dti_gpt_model_shared_sums), lib/parallel/moe_gpt.c (dti_train_moe_gpt)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_text_free(&text);
    dt_finalize();
    return ok ? 0 : 1;
}
