/* The central test of dtlab: every parallel training mode reaches the weights of serial
 * training. Runs under mpiexec at any rank count N (tests/run.sh: 1 to 5).
 *
 * The reference is serial training written here with lib/nn alone, independent of
 * lib/parallel: dt_mlp_init, then per step s = 1, 2, ...: the global batch s-1
 * (dt_data_batch), forward, dt_xent scaled by 1/B, backward, dt_optim_step(step s).
 * Every rank computes it on the CPU (the model is tiny). Then, for every mode and
 * option that N ranks can run, dt_train on MPI_COMM_WORLD for a few steps (on the GPU
 * where the rank has one), and on rank 0:
 *
 *   fp32     the final weights equal the reference's to rounding, every step's loss
 *            equals the reference's, and the loss goes down. Modes: serial (N = 1); dp
 *            with the server computing or dedicated; ddp with several bucket caps,
 *            overlap on and off, accumulation 1 and 2; fsdp ZeRO 1, 2, 3, --offload
 *            (ZeRO 3 and 1; also in fp16) and --prefetch (ZeRO 3); tp megatron
 *            and allgather; pp GPipe and 1F1B with 1, 2 and 4 micro-batches, interleaved
 *            1F1B (2 chunks a stage) and ZB-H1 with 3 or 4 (N >= 2); hybrid with
 *            every factorisation D*T*P = N; dp-threads (N = 1) with 1, 2, 5 and 7
 *            threads, and 3 under the lock. SGD with momentum, and Adam.
 *   async    dp --async K: the loss goes down, and it equals a serial simulation of the
 *            delayed update (step s's gradients taken on the weights of step
 *            max(0, s-1-K), applied to the newest).
 *   fp16     every mode: the loss goes down, and losses and weights stay near the fp32
 *            reference's (within what fp16 rounding of 5 steps leaves).
 *   bf16     every mode that has fp16, with no loss scale: no step skipped, the loss
 *            goes down, and losses and weights stay near the fp32 reference's (within
 *            what bf16's 8 significant bits leave).
 *   overflow fp16 from a loss scale of 2^28, in dp, ddp and fsdp (the three loops that
 *            run the scaler): the first steps overflow and are skipped, each halving the
 *            scale (as the step reports say), then training recovers. The run follows
 *            the fp32 reference that skips the same steps: skipped steps leave the
 *            weights alone, and the optimizer counts only the steps it takes.
 *
 * Shapes are chosen so that counts do not divide evenly: 100 examples (the batches wrap
 * around), 12 features, 7 classes, hidden widths of 20 (layer sizes no multiple of N:
 * FSDP pads) or 12*T for tensor parallelism, and N+1 layers for the pipeline. Global
 * batches divide by what the mode needs (data-parallel ranks x micro-batches) and are
 * about 24.
 *
 * Beside: the result's books (steps, bytes, FSDP's optimizer state about 1/N per rank);
 * the device books of the steps after the first (lib/buf.h): empty on the CPU, and on a
 * GPU no device allocation or free and no tensor data through the host in the fp32
 * cases that must stay on it (on_gpu_case); and dt_train_check refusing impossible
 * combinations with a sentence.
 *
 * Every verdict is agreed across ranks (tests/harness.h). The fp32 limits, the table of
 * cases, the cases and layouts mpi_gpt runs too, the checks every run passes, the
 * comparison with the reference and the closing table are shared with mpi_gpt
 * (tests/train_harness.h). At the end rank 0 prints the largest differences seen, per
 * mode, against what the tolerances allow.
 *
 *   mpiexec -n 4 build/tests/mpi_train
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parallel/parallel.h"
#include "train_harness.h"

/* ==== tolerances ====
 * Parallel modes add the same numbers in another order: a batch's gradient as a sum of
 * per-rank shards (allreduce, reduce-scatter, the server's sum), a tensor-parallel
 * layer's output as a sum of partial products, micro-batches one after another. Each
 * such sum differs from serial's by a few float ulps of its largest term (1e-7
 * relative). Through 5 steps of SGD with momentum (lr 0.1) or Adam (lr 0.01; it
 * divides by sqrt(v), so a gradient that nearly cancels carries its rounding into its
 * step at full relative size) the weights end up within about 1e-7..1e-6 of serial's.
 * The limits (TT_PARAM_ATOL, TT_PARAM_RTOL, TT_LOSS_RTOL: tests/train_harness.h) leave
 * ten times that and more; a real mistake (a missing 1/N, a stale shard, a lost
 * micro-batch) is above 1e-3. Measured at 1 to 5 ranks, as a fraction of the limit:
 * weights at most 0.05 (tp, 3 ranks), 0.008 elsewhere; losses 0.007.
 * fp16 rounds weights, activations and gradients to 11 bits (5e-4 relative); the fp32
 * master weights keep the updates, so a run stays near the fp32 reference: losses
 * within about 1e-3 relative, weights within about 7e-3 (a ReLU whose input rounds
 * across zero sends its row's gradient the other way; every fp16 mode lands on the
 * same values, so this is fp16's doing, not a mode's), measured at most 0.64 of
 * FP16_WEIGHT_ATOL + FP16_RTOL |w| and 0.8 of the loss limit at 1 to 5 ranks (runs are
 * deterministic for a given rank count). */
#define FP16_WEIGHT_ATOL 1e-2
#define FP16_RTOL 5e-2
#define FP16_LOSS_RTOL 1e-3
/* bf16 rounds to 8 significant bits (4e-3 relative), 8 times fp16's step; measured at 1
 * to 5 ranks (the fraction of these limits in the closing report) */
#define BF16_WEIGHT_ATOL 5e-2
#define BF16_RTOL 2e-1
#define BF16_LOSS_RTOL 1e-2

enum { OVERFLOW_STEPS = 16, FEATURES = 12, CLASSES = 7, NBATCHES = 4 };
enum { K_FP32, K_ASYNC, K_FP16, K_OVERFLOW, K_BF16 };

/* ==== the cases: every mode and option N ranks can run ==== */

/* A configuration of mode m with SGD+momentum (adam 0) or Adam (lr 0.01), on the GPU
 * where the rank has one: the GPU's paths against the CPU's. */
static dt_train_config base(dt_mode m, int adam)
{
    dt_train_config c = tt_base(m, adam, 0.01f, 1e-8f);
    c.model = (dt_mlp_config){ .in = FEATURES, .hidden = 20, .out = CLASSES, .layers = 4,
                               .act = adam ? DT_GELU : DT_RELU };
    return c;
}

/* Each mode's variants take SGD and Adam in turn, so that every mode meets both. */
static void make_cases(int N)
{
    dt_train_config c;
    int a = 0;                                  /* Adam for odd cases */
    tt_add_serial(K_FP32, N, base(DT_MODE_SERIAL, 0), base(DT_MODE_SERIAL, 1));

    /* dp: the server computes too (SGD and Adam), or (N >= 2) only serves */
    for (int adam = 0; adam < 2; adam++)
        tt_add(K_FP32, base(DT_MODE_DP, adam), N, "dp %s", tt_opt[adam]);
    if (N >= 2) {
        c = base(DT_MODE_DP, 1);
        c.dedicated_server = 1;
        tt_add(K_FP32, c, N - 1, "dp dedicated server adam");
    }

    /* ddp: bucket caps of 1 KiB (4 buckets: a layer each), 4 KiB (2) and 256 KiB (1),
     * overlap on and off, accumulation 1 and 2 */
    static const int ddp[][3] = { {1, 1, 1}, {1, 0, 2}, {4, 1, 2}, {256, 0, 1} };
    for (int i = 0; i < 4; i++, a ^= 1) {
        c = base(DT_MODE_DDP, a);
        c.bucket_kb = ddp[i][0];
        c.overlap = ddp[i][1];
        c.accum = ddp[i][2];
        tt_add(K_FP32, c, N * c.accum, "ddp bucket %d KiB overlap %d accum %d %s",
               c.bucket_kb, c.overlap, c.accum, tt_opt[a]);
    }

    /* fsdp: ZeRO 1, 2, 3, and 3 again with the other optimizer */
    for (int z = 1; z <= 4; z++, a ^= 1) {
        c = base(DT_MODE_FSDP, a);
        c.zero = z < 4 ? z : 3;
        tt_add(K_FP32, c, N, "fsdp zero %d %s", c.zero, tt_opt[a]);
    }
    /* fsdp --prefetch (ZeRO 3 only): the next layer gathered on a communication thread;
     * both optimizers, and fp16 (tests/prefetch.sh holds it to the run without, bit for
     * bit) */
    for (int i = 0; i < 3; i++) {
        c = base(DT_MODE_FSDP, i == 1);
        c.prefetch = 1;
        if (i == 2) {
            c.precision = DT_FP16;
            c.scaler.init = 4096;
            tt_add(K_FP16, c, N, "fp16 fsdp zero 3 prefetch");
        } else {
            tt_add(K_FP32, c, N, "fsdp zero 3 prefetch %s", tt_opt[i]);
        }
    }
    /* fsdp --offload: on a GPU the shards, their optimizer state and gradients live in
     * host memory and the optimizer runs on the CPU; the weights must not notice (on
     * the CPU offload moves nothing, and the same case runs). ZeRO 3 and 1, both
     * optimizers, and fp16 with SGD (the master shards offloaded; Adam in fp16 moves
     * further from the fp32 reference than K_FP16 allows, offload or not) */
    static const int off[][3] = { {3, 0, 0}, {1, 1, 0}, {3, 0, 1} };  /* zero, adam, fp16 */
    for (int i = 0; i < 3; i++) {
        c = base(DT_MODE_FSDP, off[i][1]);
        c.zero = off[i][0];
        c.offload = 1;
        if (off[i][2]) {
            c.precision = DT_FP16;
            c.scaler.init = 4096;
            tt_add(K_FP16, c, N, "fp16 fsdp zero %d offload %s", c.zero, tt_opt[off[i][1]]);
        } else {
            tt_add(K_FP32, c, N, "fsdp zero %d offload %s", c.zero, tt_opt[off[i][1]]);
        }
    }

    /* tp: hidden 12*N; 4 layers (two pairs) and 3 (a last layer of 7 outputs cut into
     * N columns), in both styles */
    for (int i = 0; i < 4; i++, a ^= 1) {
        c = base(DT_MODE_TP, a);
        c.tp_style = (dt_tp_style)(i / 2);
        c.model.hidden = 12 * N;
        c.model.layers = 3 + i % 2;
        tt_add(K_FP32, c, 1, "tp %s %d layers %s", i / 2 ? "allgather" : "megatron",
               c.model.layers, tt_opt[a]);
    }

    /* pp: N stages of N+1 layers (at least 3), so that one stage holds two; GPipe and
     * 1F1B with 1, 2 and 4 micro-batches */
    for (int i = 0; i < TT_PP_VARIANTS; i++, a ^= 1) {
        c = base(DT_MODE_PP, a);
        c.model.layers = N + 1 < 3 ? 3 : N + 1;
        tt_add_pp(K_FP32, c, i);
    }
    /* interleaved 1F1B and ZB-H1: 2N layers, two chunks a stage */
    c = base(DT_MODE_PP, a);
    c.model.layers = 2 * N;
    tt_add_pp_today(K_FP32, c, N, 1);

    /* hybrid: every D*T*P = N */
    for (int k = 0; k < tt_nlayouts(N); k++, a ^= 1) {
        c = base(DT_MODE_HYBRID, a);
        tt_layout(&c, N, k);
        c.model.hidden = 12 * c.tp;
        c.model.layers = c.pp + 1 < 4 ? 4 : c.pp + 1;
        c.tp_style = (dt_tp_style)(c.dp % 2);
        tt_add(K_FP32, c, c.dp * c.micro, "hybrid D %d T %d P %d %s", c.dp, c.tp, c.pp,
               tt_opt[a]);
    }

    /* dp-threads (one rank): 1 thread, 2, and 5 and 7, which do not divide the batch of
     * 24 (replicas of 5 and 4 rows, or 4 and 3); 3 under the emulated interpreter lock.
     * On the GPU where there is one: the replicas share it, a stream each. */
    static const int dpt[][2] = { {1, 0}, {2, 0}, {5, 0}, {7, 0}, {3, 30} };
    for (int i = 0; N == 1 && i < 5; i++, a ^= 1) {
        c = base(DT_MODE_DP_THREADS, a);
        c.threads = dpt[i][0];
        c.gil = dpt[i][1] / 100.0f;
        tt_add(K_FP32, c, 1, "dp-threads %d gil %g %s", c.threads, (double)c.gil, tt_opt[a]);
    }

    /* async dp: workers K updates behind, with SGD */
    tt_add_async(K_ASYNC, N, base(DT_MODE_DP, 0), base(DT_MODE_DP, 0));

    /* fp16: every mode (hybrid with two of D, T, P above 1 where N allows) */
    for (int m = 0; m < DT_NMODES; m++) {
        if ((m == DT_MODE_SERIAL && N > 1) || m == DT_MODE_MOE || m == DT_MODE_DP_THREADS)
            continue;       /* moe: fp32 only, held to one rank with every expert (moe.sh);
                               dp-threads: fp32 only */
        c = base((dt_mode)m, 0);
        int need = m == DT_MODE_DP || m == DT_MODE_DDP || m == DT_MODE_FSDP ? N : 1;
        if (m == DT_MODE_TP)
            c.model.hidden = 12 * N;
        if (m == DT_MODE_PP)
            c.model.layers = N + 1 < 3 ? 3 : N + 1;
        if (m == DT_MODE_HYBRID) {
            c.tp = N % 2 == 0 ? 2 : 1;
            c.pp = N % 2 == 0 && N > 2 ? 2 : 1;
            c.dp = N / (c.tp * c.pp);
            c.model.hidden = 12 * c.tp;
            c.micro = 2;
            need = c.dp * (c.pp > 1 ? 2 : 1);
        }
        c.precision = DT_FP16;
        c.scaler.init = 4096;      /* 2^16 overflows now and then on these shapes */
        tt_add(K_FP16, c, need, "fp16 %s", dt_mode_name((dt_mode)m));
        c.precision = DT_BF16;     /* the same, in bf16: no scale (on the host only) */
        c.on_device = 0;
        tt_add(K_BF16, c, need, "bf16 %s", dt_mode_name((dt_mode)m));
    }

    /* overflow from a huge loss scale, in the three training loops that decide it:
     * dp's server, the hybrid loop (ddp) and fsdp */
    for (int m = DT_MODE_DP; m <= DT_MODE_FSDP; m++) {
        c = base((dt_mode)m, 0);
        c.precision = DT_FP16;
        c.steps = OVERFLOW_STEPS;
        c.scaler.init = 0x1p28f;
        tt_add(K_OVERFLOW, c, N, "fp16 %s overflow from scale 2^28", dt_mode_name((dt_mode)m));
    }

    /* each case's data set: NBATCHES global batches of its B */
    for (int i = 0; i < tt_ncases; i++) {
        tt_case *t = &tt_cases[i];
        dt_data_synthetic(&t->data, NBATCHES * t->c.batch, FEATURES, CLASSES, 11);
        t->c.data = &t->data;
    }
}

/* ==== the serial reference, lib/nn only ====
 * Trains c's model from its initial weights for c->steps steps on the global batches
 * 0, 1, ... delay K > 0 simulates the delayed update of asynchronous dp: step s's
 * gradients are taken on the weights of step max(0, s-1-K) and applied to the newest.
 * skipped (or NULL) marks steps fp16 skipped: their loss is taken, the weights do not
 * move, and the optimizer counts only the steps it takes. Writes the final weights
 * (nparams) and each step's mean loss (on the weights the gradients were taken on). */
static void reference(const dt_train_config *c, int delay, const int *skipped,
                      float *params, float *loss)
{
    const dt_mlp_config *m = &c->model;
    int B = c->batch, S = dt_optim_state_per_param(c->optim.kind), updates = 0;
    size_t n = dt_mlp_nparams(m);
    float *hist = calloc(n * (size_t)(delay + 1), sizeof(float));   /* weight versions */
    float *grads = malloc(n * sizeof(float)), *state = calloc(n * S, sizeof(float));
    float *x = malloc((size_t)B * m->in * sizeof(float));
    float *dlogits = malloc((size_t)B * m->out * sizeof(float));
    int *y = malloc((size_t)B * sizeof(int));
    DT_REQUIRE(hist && grads && state && x && dlogits && y, "out of memory");
    dt_mlp_acts a;
    dt_mlp_acts_alloc(m, B, 0, &a);
    dt_mlp_init(m, c->seed, params);
    for (int s = 1; s <= c->steps; s++) {
        memcpy(hist + n * (size_t)((s - 1) % (delay + 1)), params, n * sizeof(float));
        int v = s - 1 - delay < 0 ? 0 : s - 1 - delay;   /* the version used */
        const float *w = hist + n * (size_t)(v % (delay + 1));
        dt_data_batch(c->data, s - 1, B, 0, B, x, y);
        const float *logits = dt_mlp_forward(m, w, x, B, &a);
        loss[s - 1] = dt_xent(logits, y, B, m->out, 1.0f / B, dlogits) / B;
        if (skipped && skipped[s - 1])
            continue;
        memset(grads, 0, n * sizeof(float));
        dt_mlp_backward(m, w, &a, dlogits, B, grads, NULL, NULL);
        dt_optim_step(&c->optim, ++updates, params, grads, state, n);
    }
    dt_mlp_acts_free(&a);
    free(hist); free(grads); free(state); free(x); free(dlogits); free(y);
}

/* ==== the test of one case ==== */

/* Whether a case's steps must stay on the GPU when they run there: every fp32 and fp16
 * case (fp16's helpers and the gradient codecs are kernels there: mixed_kernels.cu,
 * compress_kernels.cu), but fsdp --offload (the shards and the optimizer live in host
 * memory: their gradients go down and their weights up each step, which is what
 * offloading is) and dp --async (its rings of weight versions and gradients are host
 * buffers, as MPI's nonblocking calls take: dt_isend, p2p.h). */
static int on_gpu_case(const tt_case *t)
{
    return t->kind != K_ASYNC && !t->c.offload;
}

/* Each step's report on rank 0 (the overflow cases read the scale in it). */
static char reports[OVERFLOW_STEPS][sizeof ((dt_step_report *)0)->extra];

static void keep_report(const dt_step_report *r, void *ctx)
{
    (void)ctx;
    if (r->step >= 1 && r->step <= OVERFLOW_STEPS)
        snprintf(reports[r->step - 1], sizeof reports[0], "%s", r->extra);
}

START_TEST(test_mode)
{
    const tt_case *t = &tt_cases[_i];
    const dt_train_config *c = &t->c;
    char why[256] = "";
    int ok = dt_train_check(c, ht_size, why, sizeof why) == 0;
    HT_EXPECT(ok, "%s: dt_train_check refuses it on %d ranks: %s", t->name, ht_size, why);
    if (!ok) {
        HT_VERDICT();
        return;
    }
    dt_train_config run = *c;
    run.on_step = keep_report;
    memset(reports, 0, sizeof reports);
    dt_train_result res;
    double took = tt_train(t->name, &run, &res);
    int S = c->steps;
    size_t n = dt_mlp_nparams(&c->model);
    float *want = malloc(n * sizeof(float)), *wloss = malloc((size_t)S * sizeof(float));
    DT_REQUIRE(want && wloss, "out of memory");
    if (ht_rank == 0)
        HT_EXPECT(res.nparams == n && res.params, "%s: %zu final weights, want %zu",
                  t->name, res.nparams, n);
    /* the device books of the steps after the first: a step on the GPU allocates
     * nothing (cudaMalloc and cudaFree wait for the whole GPU) and keeps its tensors
     * there (the batch going up and the numbers read back are counted apart); a run
     * on the CPU asks nothing of a GPU (tt_train) */
    const dt_device_books *b = &res.books;
    if (c->on_device && on_gpu_case(t))
        HT_EXPECT(b->allocs == 0 && b->tensors == 0, "%s: steps %d..%d on the GPU made "
                  "%llu device allocations or frees and %llu copies of tensor data "
                  "between host and GPU (%llu bytes)", t->name, res.books_from,
                  res.books_to, b->allocs, b->tensors, b->tensor_bytes);
    if (c->mode == DT_MODE_FSDP) {     /* optimizer state sharded: about 1/N, plus padding */
        size_t full = n * sizeof(float) * dt_optim_state_per_param(c->optim.kind);
        size_t pad = (size_t)c->model.layers * ht_size * sizeof(float) *
                     dt_optim_state_per_param(c->optim.kind);
        HT_EXPECT(res.peak_optim <= (full + pad) / ht_size + pad,
                  "%s: optimizer state %zu bytes on a rank, more than 1/%d of %zu",
                  t->name, res.peak_optim, ht_size, full);
    }

    int skip = 0, first = 0;            /* steps skipped; the first one applied */
    for (int s = 0; s < S; s++)
        skip += res.skipped[s] != 0;
    while (first < S && res.skipped[first])
        first++;
    int valid = ht_rank == 0 && res.nparams == n && res.params;
    double dp = 0, dl = 0;
    if (t->kind == K_FP32 || t->kind == K_ASYNC) {
        reference(c, t->kind == K_ASYNC ? c->async : 0, NULL, want, wloss);
        HT_EXPECT(skip == 0, "%s: %d steps skipped in fp32", t->name, skip);
        dl = tt_compare(t->name, "loss", res.loss, wloss, NULL, (size_t)S, 1e-7, TT_LOSS_RTOL);
        if (valid)
            dp = tt_compare(t->name, "weight", res.params, want, NULL, n, TT_PARAM_ATOL,
                            TT_PARAM_RTOL);
    } else if (t->kind == K_FP16 || t->kind == K_BF16) {
        int bf = t->kind == K_BF16;
        reference(c, 0, NULL, want, wloss);
        HT_EXPECT(skip == 0, "%s: %d steps skipped at the default scale", t->name, skip);
        dl = tt_compare(t->name, bf ? "bf16 loss" : "fp16 loss", res.loss, wloss, NULL,
                        (size_t)S, 0, bf ? BF16_LOSS_RTOL : FP16_LOSS_RTOL);
        if (valid)
            dp = tt_compare(t->name, bf ? "bf16 weight" : "fp16 weight", res.params, want,
                            NULL, n, bf ? BF16_WEIGHT_ATOL : FP16_WEIGHT_ATOL,
                            bf ? BF16_RTOL : FP16_RTOL);
    } else {
        /* From 2^28 the first steps must overflow, each halving the scale, until it is
         * small enough (about 2^19 here); a later step may overflow again. The run must
         * follow the fp32 reference that skips the same steps: a skipped step leaves
         * the weights as they were, and the optimizer counts only the steps it took. */
        HT_EXPECT(first >= 1, "%s: step 1 was not skipped with a loss scale of 2^28",
                  t->name);
        HT_EXPECT(S - skip >= 4, "%s: %d of %d steps skipped: no recovery", t->name,
                  skip, S);
        reference(c, 0, res.skipped, want, wloss);
        dl = tt_compare(t->name, "fp16 loss", res.loss, wloss, NULL, (size_t)S, 0,
                        FP16_LOSS_RTOL);
        if (valid)
            dp = tt_compare(t->name, "fp16 weight", res.params, want, NULL, n,
                            FP16_WEIGHT_ATOL, FP16_RTOL);
        /* the scale each step used, as its report says: 2^28 halved once per skip */
        float scale = c->scaler.init;
        for (int s = 0; s < S && ht_rank == 0; s++) {
            const char *p = strstr(reports[s], "scale ");
            double used = p ? atof(p + 6) : -1;
            HT_EXPECT(fabs(used - scale) <= 1e-5 * scale, "%s: step %d reports '%s'; the "
                      "scale should be %g (2^28 halved at each skipped step)", t->name,
                      s + 1, reports[s], (double)scale);
            if (res.skipped[s])
                scale *= c->scaler.backoff;
        }
    }
    /* the last step's batch was seen before, at step j+1: compare like with like */
    int j = (S - 1) % NBATCHES;
    HT_EXPECT(res.loss[S - 1] < res.loss[j], "%s: the loss did not go down: %g at step %d, "
              "%g at step %d (the same batch)", t->name, (double)res.loss[j], j + 1,
              (double)res.loss[S - 1], S);
    tt_note(t->kind == K_FP32 || t->kind == K_ASYNC ? (int)c->mode
            : t->kind == K_BF16 ? TT_ROW_BF16 : TT_ROW_FP16, t->name, took, skip, dp, dl);
    free(want);
    free(wloss);
    dt_train_result_free(&res);
    HT_VERDICT();
}
END_TEST

/* ==== impossible combinations: dt_train_check refuses them, with a sentence ==== */

START_TEST(test_check)
{
    dt_dataset d;
    dt_data_synthetic(&d, 96, FEATURES, CLASSES, 11);
    tt_refusal bad[12];
    int nb = 0;
#define BAD(name_, word_, nranks_) do { \
        c.data = &d; \
        bad[nb++] = (tt_refusal){ name_, word_, c, nranks_ }; \
    } while (0)
    dt_train_config c = base(DT_MODE_TP, 0);
    c.model.hidden = 25;
    BAD("tp: hidden 25 on 2 ranks", "hidden", 2);
    c = base(DT_MODE_PP, 0);
    c.model.layers = 2;
    BAD("pp: 3 stages of 2 layers", "layers", 3);
    c = base(DT_MODE_HYBRID, 0);
    c.dp = 2; c.tp = 1; c.pp = 2;
    BAD("hybrid 2x1x2 on 3 ranks", "3", 3);
    c = base(DT_MODE_DDP, 0);
    c.batch = 25;
    BAD("ddp: batch 25 on 2 ranks", "batch", 2);
    c = base(DT_MODE_PP, 0);
    c.micro = 5;
    BAD("pp: batch 24 in 5 micro-batches", "micro", 2);
    c = base(DT_MODE_FSDP, 0);
    c.zero = 4;
    BAD("fsdp: zero 4", "zero", 2);
    c = base(DT_MODE_SERIAL, 0);
    c.steps = 0;
    BAD("0 steps", "steps", 1);
    c = base(DT_MODE_SERIAL, 0);
    BAD("serial on 2 ranks", "serial", 2);
    c = base(DT_MODE_DP_THREADS, 0);
    c.on_device = 0;
    BAD("dp-threads on 2 ranks", "1 rank", 2);
    c.threads = 25;
    BAD("dp-threads: 25 threads, batch 24", "threads", 1);
    c.threads = 2;
    c.precision = DT_FP16;
    BAD("dp-threads in fp16", "fp32", 1);
    c = base(DT_MODE_DDP, 0);
    c.gil = 0.5f;
    BAD("ddp with a gil", "gil", 2);
#undef BAD
    tt_check_refusals(bad, nb);
    dt_data_free(&d);
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    ht_init(&argc, &argv);
    make_cases(ht_size);
    int rc = tt_run("train", test_check, test_mode);

    if (ht_rank == 0)
        printf("%d cases on %d ranks; the largest differences from the serial reference, as "
               "a\nfraction of the limit (fp32: weights %g + %g|w|, loss %g relative; fp16: "
               "%g + %g|w|, %g;\nbf16: %g + %g|w|, %g):\n", tt_ncases, ht_size, TT_PARAM_ATOL,
               TT_PARAM_RTOL, TT_LOSS_RTOL, FP16_WEIGHT_ATOL, FP16_RTOL, FP16_LOSS_RTOL,
               BF16_WEIGHT_ATOL, BF16_RTOL, BF16_LOSS_RTOL);
    tt_report();
    for (int i = 0; i < tt_ncases; i++)
        dt_data_free(&tt_cases[i].data);
    dt_finalize();
    return rc;
}
