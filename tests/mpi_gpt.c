/* The GPT in every parallel mode reaches the weights of serial training: mpi_train's
 * test for the second model (lib/nn/gpt.h). Runs under mpiexec at any rank count N
 * (tests/run.sh: 1 to 5).
 *
 * The reference is serial training written here with lib/nn alone, independent of
 * lib/parallel: dt_gpt_init, then per step s = 1, 2, ...: the global batch s-1 of B
 * sequences of T tokens (dt_text_batch), forward, dt_xent over the B*T positions scaled
 * by 1/(B*T), backward, dt_optim_step(step s). Rank 0 computes it (the model is tiny)
 * and sends the losses to the others. Then, for every mode and option N ranks can run,
 * dt_train on MPI_COMM_WORLD for a few steps, and:
 *
 *   fp32      the final weights (rank 0, whole model in dt_gpt's layout) equal the
 *             reference's to rounding, every step's loss (every rank) equals the
 *             reference's, and the loss goes down. Modes: serial (N = 1); dp with the
 *             server computing or dedicated; ddp with buckets of a unit each, of
 *             several units and of the whole model (counted), overlap on and off,
 *             accumulation 1 and 2; fsdp ZeRO 1, 2, 3 and 3 with --prefetch; tp (heads
 *             split over the ranks), and with --sp (N >= 2); pp GPipe and 1F1B with 1, 2
 *             and 4 micro-batches, interleaved 1F1B (2 chunks a stage) with 3 (N >= 2);
 *             hybrid with every factorisation D*T*P = N, and with
 *             --sp where 1 < T < N; context parallelism (--cp N, and at 4 ranks --cp 2
 *             beside dp, tp or pp); dp-threads (N = 1) with 1, 2, 5
 *             threads, and 3 under the lock. SGD with momentum, and Adam.
 *   async     dp --async K against the serial simulation of the delayed update (step
 *             s's gradients taken on the weights of step max(0, s-1-K)).
 *   compress  ddp --compress fp16: every gradient rounded to half on the way, so the
 *             weights stay near the reference's, within what that rounding leaves.
 *   fp16      every mode that has it (a loss scale of 4096; tp with --sp too), and bf16
 *             in ddp, fsdp, tp and pp, with SGD: no step skipped, and the losses and
 *             weights near the fp32 reference's, within what 16-bit rounding of 5 steps
 *             leaves.
 *   moe       no serial GPT with experts exists to compare with: the run on N ranks is
 *             held to the same configuration (experts, groups) on rank 0 alone, which
 *             mode moe promises to reach (a check of consistency; tests/moe.sh holds
 *             one expert taking every token to serial training of the dense GPT).
 *
 * The loss going down: each step's batch is drawn anew (dt_text_batch), but at the
 * start every batch's loss is near ln 256 = 5.55, and 5 steps take it to about 3.9
 * (SGD) or 5.0 (Adam).
 *
 * A case runs when dt_train_check accepts it on N ranks and is skipped (counted, and
 * named in the closing report) when refused: so a mode the GPT gains starts running
 * here by itself. What the GPT trains today (must_run: every mode, fp32 on the host)
 * must be accepted: a regression that refuses it fails. On a rank with a GPU a
 * case asks for it (on_device), and runs on the host where the GPT refuses the GPU.
 *
 * Shapes: a generated text of about 3000 bytes (no file needed), sequences of 8, 24
 * columns, 2 blocks; 6 heads (divisible by 1, 2 and 3 ranks, not 4 or 5: those refusals
 * are test_check's), and where tensor parallelism over T ranks cannot share 6 heads,
 * 2T heads of 4 columns. Global batches divide by what the mode needs (data-parallel
 * ranks x micro-batches) and are about 24 sequences.
 *
 * Beside: the result's books (steps, bytes, no GPU work counted on the host), and
 * dt_train_check refusing, with a sentence, what the GPT can never run (heads the
 * tensor-parallel ranks cannot share, a sequence longer than the text, columns no
 * multiple of the heads, a vocabulary other than bytes, more stages than units).
 *
 * Every verdict is agreed across ranks (tests/harness.h). The fp32 limits, the table of
 * cases, the cases and layouts mpi_train runs too, the checks every run passes, the
 * comparison with the reference and the closing table are shared with mpi_train
 * (tests/train_harness.h). At the end rank 0 prints the largest differences seen, per
 * mode, against what the tolerances allow, and the cases skipped.
 *
 *   mpiexec -n 4 build/tests/mpi_gpt
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "nn/gpt.h"
#include "nn/nn.h"
#include "parallel/parallel.h"
#include "train_harness.h"

/* ==== tolerances ====
 * As in mpi_train: the modes add the same numbers in another order (a batch's gradient
 * as a sum of per-rank shards, a block's attention and MLP outputs as sums of the
 * partial products of each rank's heads and columns, micro-batches one after another,
 * the loss as a sum of per-rank sums), each sum within a few float ulps (1e-7
 * relative) of serial's. Through 5 steps of SGD with momentum (lr 0.1) or Adam (lr
 * 3e-3, train's for the GPT) the weights end within about 1e-7..2e-6 of serial's, and
 * the limits are mpi_train's (TT_PARAM_ATOL, TT_PARAM_RTOL, TT_LOSS_RTOL:
 * tests/train_harness.h). Adam divides each step by sqrt(v) + eps, so a gradient
 * that nearly cancels carries its rounding into its step at full relative size. The
 * attention's key bias is the extreme: its gradient is 0 in exact arithmetic (softmax
 * ignores a shift common to a row of scores), some 1e-12 of rounding in practice, and
 * with eps 1e-8 it takes steps of about lr * 1e-4, different in every mode (0.64 of the
 * weight limit in tp at 4 ranks). Here eps is 1e-6: such steps shrink a hundredfold,
 * and 99% of the real gradients (above 5e-7) stay larger than eps.
 * A real mistake is far above the limits (measured with this file's reference,
 * altered): gradients twice too large, a missing 1/N at N = 2, end 6900 times the weight
 * limit from the reference with SGD and 200 times with Adam (only eps lets Adam see a
 * scale); half the batch lost, 3800 times (SGD) and 2400 times (Adam). Measured at 1 to
 * 5 ranks, as a fraction of the limit: weights at most 0.17 (ddp at 5 ranks; tp and
 * hybrid 0.14 there, 0.09 elsewhere), losses 0.012.
 * --compress fp16 rounds every gradient to 11 bits (2^-11 relative) as it leaves a rank
 * and again at each of the ring's N-1 additions, of partial sums that may exceed their
 * total; so a weight is held to the reference within COMPRESS_RTOL of its path, the sum
 * of |step| over the reference's steps, plus COMPRESS_ATOL. Measured at most 0.24 of
 * that (3 and 4 ranks), and the losses 0.053 of COMPRESS_LOSS_RTOL; gradients twice too
 * large end 190 times above it, half the batch lost 330 times. With SGD only: Adam makes
 * a step of full size from the rounding of a small gradient (the queries', while
 * attention is still nearly uniform), measured up to 8 times this limit (40% of the
 * path) at 5 ranks, as far off as a mistake.
 * fp16 and bf16 against the fp32 reference: the fp32 master weights keep the updates,
 * while the 16-bit weights, activations and gradients round to 11 bits (5e-4 relative)
 * or 8 (4e-3). Measured at 1 to 5 ranks: at most 0.081 of FP16_WEIGHT_ATOL + FP16_RTOL
 * |w| and 0.062 of FP16_LOSS_RTOL, 0.149 and 0.083 of bf16's limits (weights of 0.3 to
 * 0.5 off by up to 2.6e-4 in fp16, 1.8e-3 in bf16). fsdp taking its loss over the
 * rank's batch instead of the global one (a missing 1/2 at 2 ranks) ends 69 times the
 * fp16 weight limit and 141 times the loss limit, 24 and 28 times bf16's. With SGD
 * only, as for compression.
 * moe is held to its run on one rank with the fp32 limits. */
#define COMPRESS_ATOL 1e-6
#define COMPRESS_RTOL 5e-2
#define COMPRESS_LOSS_RTOL 1e-4
#define FP16_WEIGHT_ATOL 1e-3
#define FP16_RTOL 1e-2
#define FP16_LOSS_RTOL 1e-3
#define BF16_WEIGHT_ATOL 5e-3
#define BF16_RTOL 2e-2
#define BF16_LOSS_RTOL 5e-3

enum { SEQ = 8, EMBED = 24, HEADS = 6, LAYERS = 2, TEXT_BYTES = 3000 };
enum { K_FP32, K_ASYNC, K_COMPRESS, K_MOE, K_FP16, K_BF16 };

static dt_text text;                /* every case's, the same on every rank */

/* ==== the cases: every mode and option N ranks can run ==== */

static char skips[TT_MAXCASES][80 + 256];     /* "name: why", for the report */
static int nskipped;

/* What the GPT trains today (run.c's gpt_check): every mode, in fp32, fp16 and bf16
 * (moe: fp32), on the host. dt_train_check refusing one of these cases is a failure,
 * not a skip. */
static int must_run(const tt_case *t)
{
    (void)t;
    return 1;
}

/* The heads tensor parallelism over T ranks shares: HEADS where T divides it, else 2T
 * (the columns follow: 4 a head, as HEADS has). */
static void share_heads(dt_train_config *c, int T)
{
    c->gpt.heads = HEADS % T == 0 ? HEADS : 2 * T;
    c->gpt.embed = HEADS % T == 0 ? EMBED : 4 * c->gpt.heads;
}

/* A configuration of mode m with SGD+momentum (adam 0) or Adam (lr 3e-3, train's for
 * the GPT; eps 1e-6: see the tolerances), on the GPU where the rank has one and the GPT
 * takes it (test_mode). */
static dt_train_config base(dt_mode m, int adam)
{
    dt_train_config c = tt_base(m, adam, 3e-3f, 1e-6f);
    c.kind = DT_MODEL_GPT;
    c.gpt = (dt_gpt_config){ .vocab = 256, .seq = SEQ, .embed = EMBED, .heads = HEADS,
                             .layers = LAYERS };
    c.text = &text;
    return c;
}

/* Each mode's variants take SGD and Adam in turn, so that every mode meets both. */
static void make_cases(int N)
{
    dt_train_config c;
    int a = 0;                                  /* Adam for odd cases */
    tt_add_serial(K_FP32, N, base(DT_MODE_SERIAL, 0), base(DT_MODE_SERIAL, 1));

    /* dp: the server computes too, or (N >= 2) only serves; workers K updates behind */
    tt_add(K_FP32, base(DT_MODE_DP, 0), N, "dp sgd");
    c = base(DT_MODE_DP, 1);
    c.dedicated_server = N >= 2;
    tt_add(K_FP32, c, N - c.dedicated_server, "dp%s adam",
           c.dedicated_server ? " dedicated server" : "");
    tt_add_async(K_ASYNC, N, base(DT_MODE_DP, 0), base(DT_MODE_DP, 1));

    /* ddp: units of 24.8 KiB (embeddings), 28.2 KiB (a block) and 0.2 KiB (lnf); caps of
     * 1 KiB (a bucket per unit: 4), 64 KiB (lnf and both blocks, then the embeddings: 2)
     * and 256 KiB (1; on one rank ddp has none); overlap on and off, accumulation 1
     * and 2; --compress fp16 */
    static const int ddp[][4] = { {1, 1, 1, 4}, {64, 0, 2, 2}, {256, 1, 2, 1} };
    for (int i = 0; i < 3; i++, a ^= 1) {
        c = base(DT_MODE_DDP, a);
        c.bucket_kb = ddp[i][0];
        c.overlap = ddp[i][1];
        c.accum = ddp[i][2];
        tt_case *t = tt_add(K_FP32, c, N * c.accum,
                            "ddp bucket %d KiB overlap %d accum %d %s", c.bucket_kb,
                            c.overlap, c.accum, tt_opt[a]);
        t->buckets = ddp[i][3];
    }
    c = base(DT_MODE_DDP, 0);
    c.compress = DT_COMPRESS_FP16;
    c.bucket_kb = 1;
    tt_add(K_COMPRESS, c, N, "ddp compress fp16 bucket 1 KiB sgd")->buckets = 4;

    /* fsdp: ZeRO 1, 2, 3, and 3 with --prefetch (the next unit gathered on a thread) */
    for (int z = 1; z <= 4; z++, a ^= 1) {
        c = base(DT_MODE_FSDP, a);
        c.zero = z < 4 ? z : 3;
        c.prefetch = z == 4;
        tt_add(K_FP32, c, N, "fsdp zero %d%s %s", c.zero, c.prefetch ? " prefetch" : "",
               tt_opt[a]);
    }

    /* tp: N ranks share the heads; 2 blocks and 1 */
    for (int i = 0; i < 2; i++, a ^= 1) {
        c = base(DT_MODE_TP, a);
        share_heads(&c, N);
        c.gpt.layers = 2 - i;
        tt_add(K_FP32, c, 1, "tp %d heads %d blocks %s", c.gpt.heads, c.gpt.layers, tt_opt[a]);
    }
    /* and with sequence parallelism (8 positions: 3 ranks hold 3, 3 and 2, 5 ranks 2,
     * 2, 2, 1, 1) */
    if (N >= 2) {
        c = base(DT_MODE_TP, a);
        share_heads(&c, N);
        c.sp = 1;
        tt_add(K_FP32, c, 1, "tp sp %d heads %s", c.gpt.heads, tt_opt[a]);
        a ^= 1;
    }

    /* pp: N stages of N+1 units (4, 2 blocks, at least), so that some stage holds two;
     * GPipe and 1F1B with 1, 2 and 4 micro-batches */
    for (int i = 0; i < TT_PP_VARIANTS; i++, a ^= 1) {
        c = base(DT_MODE_PP, a);
        c.gpt.layers = N - 1 < LAYERS ? LAYERS : N - 1;
        tt_add_pp(K_FP32, c, i);
    }
    /* interleaved 1F1B: 2N units (2N-2 blocks), two chunks a stage; ZB-H1 (the split
     * backward: B, then the weights' W) on the same units */
    c = base(DT_MODE_PP, a);
    c.gpt.layers = 2 * N - 2;
    tt_add_pp_today(K_FP32, c, N, 1);

    /* hybrid: every D*T*P = N */
    for (int k = 0; k < tt_nlayouts(N); k++, a ^= 1) {
        c = base(DT_MODE_HYBRID, a);
        tt_layout(&c, N, k);
        share_heads(&c, c.tp);
        c.gpt.layers = c.pp - 1 < LAYERS ? LAYERS : c.pp - 1;
        tt_add(K_FP32, c, c.dp * c.micro, "hybrid D %d T %d P %d %s", c.dp, c.tp, c.pp,
               tt_opt[a]);
        if (c.tp > 1 && c.tp < N) {   /* sequence parallelism beside dp or pp */
            c.sp = 1;
            tt_add(K_FP32, c, c.dp * c.micro, "hybrid D %d T %d P %d sp %s", c.dp, c.tp,
                   c.pp, tt_opt[a]);
        }
    }

    /* context parallelism: every rank a part of each sequence (--seq 8, 9, 8, 10 at N =
     * 2..5: the zig-zag cut into 2N chunks, but at 3 ranks the plain cut into 3), and at
     * 4 ranks 2 beside dp, tp or pp; full recomputation runs the ring again */
    for (int k = 0; k < (N == 4 ? 4 : N >= 2 ? 1 : 0); k++, a ^= 1) {
        c = base(DT_MODE_HYBRID, a);
        c.cp = k == 0 ? N : 2;
        int parts = c.cp == 3 ? 3 : 2 * c.cp;
        c.gpt.seq = (SEQ + parts - 1) / parts * parts;
        c.dp = k == 1 ? 2 : 1, c.tp = k == 2 ? 2 : 1, c.pp = k == 3 ? 2 : 1;
        c.micro = c.pp > 1 ? 2 : 1;
        c.recompute = k == 1 ? DT_GPT_RECOMPUTE_FULL : DT_GPT_KEEP;
        share_heads(&c, c.tp);
        tt_add(K_FP32, c, c.dp * c.micro, "hybrid cp %d D %d T %d P %d%s %s", c.cp, c.dp,
               c.tp, c.pp, c.recompute ? " recompute" : "", tt_opt[a]);
    }

    /* dp-threads (one rank): 1 thread, 2, and 5, which does not divide the batch of 24;
     * 3 under the emulated interpreter lock */
    static const int dpt[][2] = { {1, 0}, {2, 0}, {5, 0}, {3, 30} };
    for (int i = 0; N == 1 && i < 4; i++, a ^= 1) {
        c = base(DT_MODE_DP_THREADS, a);
        c.threads = dpt[i][0];
        c.gil = dpt[i][1] / 100.0f;
        tt_add(K_FP32, c, 1, "dp-threads %d gil %g %s", c.threads, (double)c.gil, tt_opt[a]);
    }

    /* fp16 (loss scale 4096) in every mode that has it, and bf16 (no scale) in those
     * with paths of the GPT's own in 16 bits: ddp, fsdp (the embeddings widened for the
     * head), tp (the block's sums travel in 16 bits), pp (the tied embedding's sum).
     * SGD: see the tolerances. */
    for (int m = 0; m < DT_NMODES; m++) {
        if ((m == DT_MODE_SERIAL && N > 1) || m == DT_MODE_MOE || m == DT_MODE_DP_THREADS)
            continue;       /* moe: fp32 only; dp-threads: fp32 only */
        c = base((dt_mode)m, 0);
        int need = m == DT_MODE_DP || m == DT_MODE_DDP || m == DT_MODE_FSDP ? N : 1;
        if (m == DT_MODE_TP)
            share_heads(&c, N);
        if (m == DT_MODE_PP) {
            c.gpt.layers = N - 1 < LAYERS ? LAYERS : N - 1;
            c.micro = 2;
            need = 2;
        }
        if (m == DT_MODE_HYBRID) {      /* two of D, T, P above 1 where N allows */
            c.tp = N % 2 == 0 ? 2 : 1;
            c.pp = N % 2 == 0 && N > 2 ? 2 : 1;
            c.dp = N / (c.tp * c.pp);
            share_heads(&c, c.tp);
            c.micro = 2;
            need = c.dp * (c.pp > 1 ? 2 : 1);
        }
        c.precision = DT_FP16;
        c.scaler.init = 4096;
        tt_add(K_FP16, c, need, "fp16 %s", dt_mode_name((dt_mode)m));
        if (m == DT_MODE_TP && N >= 2) {        /* sequence parallelism's fp16 blocks */
            c.sp = 1;
            tt_add(K_FP16, c, need, "fp16 tp sp");
            c.sp = 0;
        }
        if (m == DT_MODE_DDP || m == DT_MODE_FSDP || m == DT_MODE_TP || m == DT_MODE_PP) {
            c.precision = DT_BF16;
            tt_add(K_BF16, c, need, "bf16 %s", dt_mode_name((dt_mode)m));
        }
    }

    /* moe: 2 experts per rank, top-2, a group per rank; held to rank 0 alone with the
     * same experts and groups */
    c = base(DT_MODE_MOE, 0);
    c.experts = 2 * N;
    c.topk = 2;
    c.capacity = 1.5f;
    c.moe_groups = N;
    c.aux_loss = 0.01f;
    tt_add(K_MOE, c, N, "moe %d experts top 2 sgd", c.experts);
}

/* ==== the serial reference, lib/nn only ====
 * Trains c's GPT from its initial weights for c->steps steps on the global batches 0,
 * 1, ...; delay K > 0 simulates the delayed update of asynchronous dp: step s's
 * gradients are taken on the weights of step max(0, s-1-K) and applied to the newest.
 * Rank 0 computes it and writes the final weights (nparams) and, if path is not NULL,
 * each weight's path (nparams): the sum of |step| over the steps. Every rank gets each
 * step's mean loss (on the weights the gradients were taken on). Collective. */
static void reference(const dt_train_config *c, int delay, float *params, float *loss,
                      float *path)
{
    const dt_gpt_config *g = &c->gpt;
    int S = c->steps;
    if (ht_rank == 0) {
        int B = c->batch, T = g->seq, V = g->vocab;
        int N = B * T, Sp = dt_optim_state_per_param(c->optim.kind);
        size_t n = dt_gpt_nparams(g);
        float *hist = calloc(n * (size_t)(delay + 1), sizeof(float)); /* weight versions */
        float *grads = malloc(n * sizeof(float)), *state = calloc(n * Sp, sizeof(float));
        float *dlogits = malloc((size_t)N * V * sizeof(float));
        int *x = malloc((size_t)N * sizeof(int)), *y = malloc((size_t)N * sizeof(int));
        DT_REQUIRE(hist && grads && state && dlogits && x && y, "out of memory");
        dt_gpt_acts a;
        dt_gpt_acts_alloc(g, NULL, B, T, &a);
        dt_gpt_init(g, c->seed, params);
        if (path)
            memset(path, 0, n * sizeof(float));
        for (int s = 1; s <= S; s++) {
            memcpy(hist + n * (size_t)((s - 1) % (delay + 1)), params, n * sizeof(float));
            int v = s - 1 - delay < 0 ? 0 : s - 1 - delay;       /* the version used */
            const float *w = hist + n * (size_t)(v % (delay + 1));
            dt_text_batch(c->text, s - 1, B, T, 0, B, x, y);     /* x, y (B, T) */
            const float *logits = dt_gpt_forward(g, w, x, B, T, &a);    /* (N, V) */
            loss[s - 1] = dt_xent(logits, y, N, V, 1.0f / N, dlogits) / N;
            memset(grads, 0, n * sizeof(float));
            dt_gpt_backward(g, w, &a, dlogits, x, B, T, grads, NULL, NULL);
            dt_optim_step(&c->optim, s, params, grads, state, n);
            const float *before = hist + n * (size_t)((s - 1) % (delay + 1));
            for (size_t i = 0; path && i < n; i++)
                path[i] += fabsf(params[i] - before[i]);
        }
        dt_gpt_acts_free(&a);
        free(hist); free(grads); free(state); free(dlogits); free(x); free(y);
    }
    HT_MPI(MPI_Ibcast(loss, S, MPI_FLOAT, 0, MPI_COMM_WORLD, &ht_req));
}

/* ==== the test of one case ==== */

START_TEST(test_mode)
{
    const tt_case *t = &tt_cases[_i];
    dt_train_config run = t->c;
    char why[256] = "";
    int ok = dt_train_check(&run, ht_size, why, sizeof why) == 0;
    if (!ok && run.on_device) {     /* the GPT refuses the GPU: then on the host */
        run.on_device = 0;
        ok = dt_train_check(&run, ht_size, why, sizeof why) == 0;
    }
    if (!ok) {
        HT_EXPECT(!must_run(t), "%s: dt_train_check refuses it on %d ranks: %s", t->name,
                  ht_size, why);
        HT_EXPECT(why[0] != '\0', "%s: refused without a sentence", t->name);
        if (ht_rank == 0 && !must_run(t))
            snprintf(skips[nskipped++], sizeof skips[0], "%s: %s", t->name, why);
        HT_VERDICT();
        return;
    }
    const dt_train_config *c = &run;
    dt_train_result res;
    double took = tt_train(t->name, c, &res);
    int S = c->steps, skip = 0;         /* steps skipped: none, in every case here */
    size_t n = dt_gpt_nparams(&c->gpt);
    for (int s = 0; s < S; s++)
        skip += res.skipped[s] != 0;
    HT_EXPECT(skip == 0, "%s: %d steps skipped", t->name, skip);

    /* what to hold the run to: the reference, or (moe) rank 0 alone */
    dt_train_result solo = { 0 };
    int compress = t->kind == K_COMPRESS, half = t->kind == K_FP16 || t->kind == K_BF16;
    int bf = t->kind == K_BF16;
    float *want = NULL, *path = NULL, *wloss = malloc((size_t)S * sizeof(float));
    DT_REQUIRE(wloss, "out of memory");
    if (t->kind == K_MOE) {
        if (ht_rank == 0) {
            char solo_why[256] = "";
            int solo_ok = dt_train_check(c, 1, solo_why, sizeof solo_why) == 0;
            HT_EXPECT(solo_ok, "%s: runs on %d ranks, but not on 1: %s", t->name, ht_size,
                      solo_why);
            if (solo_ok) {
                dt_train(c, MPI_COMM_SELF, &solo);
                n = solo.nparams;
                want = solo.params;
                memcpy(wloss, solo.loss, (size_t)S * sizeof(float));
            }
        }
        HT_MPI(MPI_Ibcast(wloss, S, MPI_FLOAT, 0, MPI_COMM_WORLD, &ht_req));
    } else {
        want = malloc(n * sizeof(float));
        path = compress ? malloc(n * sizeof(float)) : NULL;
        DT_REQUIRE(want && (path || !compress), "out of memory");
        reference(c, t->kind == K_ASYNC ? c->async : 0, want, wloss, path);
    }
    if (ht_rank == 0)
        HT_EXPECT(res.nparams == n && res.params, "%s: %zu final weights, want %zu",
                  t->name, res.nparams, n);
    double dl = tt_compare(t->name, "loss", res.loss, wloss, NULL, (size_t)S, 1e-7,
                           compress ? COMPRESS_LOSS_RTOL : !half ? TT_LOSS_RTOL
                           : bf ? BF16_LOSS_RTOL : FP16_LOSS_RTOL), dp = 0;
    if (ht_rank == 0 && want && res.nparams == n && res.params)
        dp = compress ? tt_compare(t->name, "weight", res.params, want, path, n,
                                   COMPRESS_ATOL, COMPRESS_RTOL)
           : half ? tt_compare(t->name, "weight", res.params, want, NULL, n,
                               bf ? BF16_WEIGHT_ATOL : FP16_WEIGHT_ATOL,
                               bf ? BF16_RTOL : FP16_RTOL)
           : tt_compare(t->name, "weight", res.params, want, NULL, n, TT_PARAM_ATOL,
                        TT_PARAM_RTOL);
    HT_EXPECT(t->buckets == 0 || ht_size == 1 || res.buckets == t->buckets, "%s: %d "
              "gradient buckets, want %d", t->name, res.buckets, t->buckets);
    HT_EXPECT(res.loss[S - 1] < res.loss[0], "%s: the loss did not go down: %g at step 1, "
              "%g at step %d", t->name, (double)res.loss[0], (double)res.loss[S - 1], S);
    tt_note(compress ? TT_ROW_COMPRESS : !half ? (int)c->mode : bf ? TT_ROW_BF16
            : TT_ROW_FP16, t->name, took, skip, dp, dl);
    if (t->kind == K_MOE)
        dt_train_result_free(&solo);
    else
        free(want);
    free(path);
    free(wloss);
    dt_train_result_free(&res);
    HT_VERDICT();
}
END_TEST

/* ==== what the GPT can never run: dt_train_check refuses it, with a sentence; and
 * what it does not run on the GPU yet (host code only), refused before the question
 * whether this rank has a GPU is asked ==== */

START_TEST(test_check)
{
    dt_text tiny;                   /* a text of n bytes holds sequences of n-1 at most */
    dt_text_generate(&tiny, 64, 5);
    tt_refusal cs[16];              /* word NULL: accepted */
    int nc = 0, gpu = dt_device() == DT_CUDA;
#define CASE_ON(name_, word_, nranks_, dev_) do { \
        c.on_device = dev_; \
        cs[nc++] = (tt_refusal){ name_, word_, c, nranks_ }; \
    } while (0)
#define CASE(name_, word_, nranks_) CASE_ON(name_, word_, nranks_, 0)    /* on the host */
    dt_train_config c = base(DT_MODE_TP, 0);
    CASE("tp: 6 heads on 4 ranks", "heads", 4);
    CASE("tp: 6 heads on 5 ranks", "heads", 5);
    CASE("tp: 6 heads on 3 ranks", NULL, 3);
    c = base(DT_MODE_HYBRID, 0);
    c.dp = 1; c.tp = 4; c.pp = 1;
    CASE("hybrid: 6 heads over T 4", "heads", 4);
    c = base(DT_MODE_SERIAL, 1);
    c.text = &tiny;
    c.gpt.seq = tiny.n;
    CASE("a sequence as long as the text", "text", 1);
    c.gpt.seq = tiny.n - 1;
    CASE("a sequence one shorter than the text", NULL, 1);
    c.gpt.seq = 2 * tiny.n;
    CASE("a sequence longer than the text", "text", 1);
    c = base(DT_MODE_SERIAL, 0);
    c.gpt.embed = 25;
    CASE("25 columns in 6 heads", "heads", 1);
    c.gpt.embed = EMBED;
    c.gpt.vocab = 255;
    CASE("a vocabulary of 255", "256", 1);
    c.gpt.vocab = 256;
    c.text = NULL;
    CASE("no text", "text", 1);
    c = base(DT_MODE_DDP, 0);
    c.batch = 25;
    CASE("ddp: 25 sequences on 2 ranks", "sequences", 2);
    c = base(DT_MODE_PP, 0);
    CASE("pp: 5 stages of the 4 units of 2 blocks", "units", 5);
    c = base(DT_MODE_SERIAL, 0);    /* on the GPU: trains there (without one: refused) */
    CASE_ON("serial on the GPU", gpu ? NULL : "no GPU", 1, 1);
    c = base(DT_MODE_HYBRID, 0);
    c.dp = c.tp = c.pp = 1, c.cp = 2;
    CASE_ON("--cp 2 on the GPU", "ring attention", 2, 1);
    c = base(DT_MODE_MOE, 0);
    CASE_ON("moe on the GPU", "moe_gpt.c", 2, 1);
    c = base(DT_MODE_DP_THREADS, 0);
    CASE_ON("dp-threads on the GPU", "dp-threads", 1, 1);
#undef CASE
#undef CASE_ON
    tt_check_refusals(cs, nc);
    dt_text_free(&tiny);
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    ht_init(&argc, &argv);
    dt_text_generate(&text, TEXT_BYTES, 11);
    make_cases(ht_size);
    int rc = tt_run("gpt", test_check, test_mode);

    if (ht_rank == 0)
        printf("%d cases on %d ranks, %d run; the largest differences from the serial "
               "reference,\nas a fraction of the limit (weights %g + %g|w|, loss %g "
               "relative; compress: %g + %g x path, %g;\nfp16: %g + %g|w|, %g; bf16: %g + "
               "%g|w|, %g):\n", tt_ncases, ht_size, tt_ncases - nskipped, TT_PARAM_ATOL,
               TT_PARAM_RTOL, TT_LOSS_RTOL, COMPRESS_ATOL, COMPRESS_RTOL, COMPRESS_LOSS_RTOL,
               FP16_WEIGHT_ATOL, FP16_RTOL, FP16_LOSS_RTOL, BF16_WEIGHT_ATOL, BF16_RTOL,
               BF16_LOSS_RTOL);
    tt_report();
    for (int i = 0; i < nskipped; i++)          /* counted on rank 0 alone */
        printf("  skipped: %s\n", skips[i]);
    dt_text_free(&text);
    dt_finalize();
    return rc;
}
