/* dt_train: checks that a configuration can run, sets up the run (its books: books.c),
 * hands the training itself to the mode's file, and collects the results. Above every
 * mode and the checkpoints; nothing in lib/parallel calls back into it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "moe.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "prog.h"
#include "schedule.h"
#include "trace.h"

/* ==== defaults (the names: books.c) ==== */

void dt_train_defaults(dt_train_config *c)
{
    memset(c, 0, sizeof *c);
    c->mode = DT_MODE_SERIAL;
    c->model = (dt_mlp_config){ .in = 0, .hidden = 96, .out = 0, .layers = 4, .act = DT_RELU };
    c->optim = (dt_optim_config){ .kind = DT_SGD, .lr = 0.05f, .momentum = 0.9f,
                                  .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f };
    c->steps = 20;
    c->batch = 96;
    c->seed = 1;
    c->precision = DT_FP32;
    dt_scaler_defaults(&c->scaler);
    c->bucket_kb = 25;
    c->overlap = 1;
    c->accum = 1;
    c->zero = 3;
    c->micro = 4;
    c->schedule = DT_PP_1F1B;
    c->virtual_stages = 1;
    c->tp_style = DT_TP_MEGATRON;
    c->dp = c->tp = c->pp = 1;
    c->compress = DT_COMPRESS_NONE;
    c->compress_feedback = 1;
    c->experts = 0;                 /* moe: 0 picks 2 per rank */
    c->topk = 1;
    c->capacity = 1.25f;
    c->moe_groups = 0;
    c->aux_loss = 0.01f;
    c->threads = 2;                 /* dp-threads */
    c->gil = 0;
    c->slow_rank = 0;
    c->slow_ms = 0;
}

void dt_train_defaults_for(dt_train_config *c, dt_mode mode, const dt_dataset *data)
{
    dt_train_defaults(c);
    c->mode = mode;
    c->data = data;
    c->model.in = data->features;
    c->model.out = data->classes;
    c->on_device = dt_device() == DT_CUDA;
}

/* ==== can it run? ==== */

/* The data-parallel, tensor-parallel and pipeline sizes a mode uses on n ranks. */
static void mode_sizes(const dt_train_config *c, int n, int *D, int *T, int *P)
{
    *D = *T = *P = 1;
    switch (c->mode) {
    case DT_MODE_DDP: case DT_MODE_FSDP: case DT_MODE_MOE: *D = n; break;
    case DT_MODE_DP: *D = c->dedicated_server ? n - 1 : n; break;
    case DT_MODE_TP: *T = n; break;
    case DT_MODE_PP: *P = n; break;
    case DT_MODE_HYBRID: *D = c->dp; *T = c->tp; *P = c->pp; break;
    default: break;
    }
}

#define WHY(...) do { snprintf(why, len, __VA_ARGS__); return -1; } while (0)

/* The schedules' own refusals, on P stages. Interleaved cuts the units into v P
 * chunks, v a stage, as Megatron-LM does: equal chunks, so the units must be a multiple
 * of v P. Zero bubble needs a backward split into B and W, which both models have
 * (the GPT's keeping each block's activations until W). */
static int pipeline_check(const dt_train_config *c, int P, char *why, size_t len)
{
    int v = c->virtual_stages, gpt = c->kind == DT_MODEL_GPT;
    int units = gpt ? dt_gpt_units(&c->gpt) : c->model.layers;
    if (c->schedule < DT_PP_GPIPE || c->schedule > DT_PP_ZBH1)
        WHY("unknown pipeline schedule %d", (int)c->schedule);
    if (v != 1 && c->schedule != DT_PP_INTERLEAVED)
        WHY("--virtual %d is for --schedule interleaved (the chunks of layers each stage "
            "holds); %s runs one chunk a stage", v, dt_pp_schedule_name(c->schedule));
    if (v < 1 || v > 64)
        WHY("--virtual must be 1 .. 64 chunks a stage, not %d", v);
    if (c->schedule == DT_PP_INTERLEAVED && (c->sp || c->cp > 1))
        WHY("--schedule interleaved runs without --sp and --cp so far: each stage's "
            "chunks would need their own sequence-parallel and ring buffers");
    if (c->schedule == DT_PP_INTERLEAVED && P < 2)
        WHY("--schedule interleaved passes micro-batches round the stages v times: it "
            "needs 2 or more pipeline stages, not %d", P);
    if (c->schedule == DT_PP_INTERLEAVED && units % (v * P))
        WHY("--virtual %d on %d stages cuts the %s into %d equal chunks: %d %s cannot "
            "(make them a multiple of %d)", v, P, gpt ? "GPT's units (embeddings, blocks, "
            "final LayerNorm)" : "layers", v * P, units, gpt ? "units" : "layers", v * P);
    if (c->schedule == DT_PP_ZBH1 && gpt && c->recompute == DT_GPT_RECOMPUTE_FULL)
        WHY("--schedule zb-h1 with --recompute full: W needs every block's activations "
            "after B, and full recomputation keeps one block's at a time (use "
            "--recompute selective, or 1f1b)");
    return 0;
}

/* The GPT's own refusals: its shape, its text, and what it does not run in yet. */
static int gpt_check(const dt_train_config *c, int n, char *why, size_t len)
{
    const dt_gpt_config *g = &c->gpt;
    const char *bad = dt_gpt_config_error(g);
    int D, T, P;
    mode_sizes(c, n, &D, &T, &P);
    if (bad)
        WHY("%s", bad);
    if (c->text == NULL || c->text->n < 1)
        WHY("no text to train on");
    if (c->text->n <= g->seq)
        WHY("a sequence of %d tokens needs a text of at least %d bytes; %s has %d",
            g->seq, g->seq + 1, c->text->source, c->text->n);
    if (g->vocab != 256)
        WHY("the GPT reads bytes: its vocabulary is 256, not %d", g->vocab);
    if (T > 1 && c->tp_style != DT_TP_MEGATRON)
        WHY("--tp-style allgather is for the MLP: the GPT's blocks are cut Megatron's way, "
            "attention by heads and the MLP by columns then rows");
    if (T > 1 && g->heads % T)
        WHY("%d heads cannot be shared by %d tensor-parallel ranks: each rank takes "
            "whole heads, so --heads must be a multiple of %d", g->heads, T, T);
    if (P > dt_gpt_units(g))
        WHY("%d pipeline stages but the GPT has %d units (the embeddings, %d block%s, the "
            "final LayerNorm and head): every stage needs one", P, dt_gpt_units(g),
            g->layers, g->layers == 1 ? "" : "s");
    if (c->recompute && c->mode == DT_MODE_MOE)
        WHY("mode moe keeps every activation so far: --recompute is for the other modes");
    if (c->sp && T == 1)
        WHY("--sp cuts tensor parallelism's LayerNorm and residual regions along the "
            "sequence: it needs tensor-parallel ranks (--mode tp on 2 or more, or hybrid "
            "--tp 2 or more)");
    int C = c->cp > 1 ? c->cp : 1;
    if (C > 1 && g->seq % C)
        WHY("--cp %d cuts each sequence into %d equal parts (%d chunks, two a rank, "
            "zig-zag, where --seq is a multiple of %d): --seq %d is no multiple of %d", C,
            C, 2 * C, 2 * C, g->seq, C);
    if (C > 1 && c->sp)
        WHY("--cp with --sp: both cut the sequence (context parallelism every position, "
            "sequence parallelism tensor parallelism's LayerNorm regions); use one");
    if (C > 1 && c->recompute == DT_GPT_RECOMPUTE_SELECTIVE)
        WHY("--recompute selective recomputes attention's probabilities, which ring "
            "attention (--cp) never keeps: it recomputes them in backward already");
    /* on the GPU: what still has host code only (the rest of the GPT's step runs there) */
    if (c->on_device && C > 1)
        WHY("--cp on the GPU: ring attention's blocks (lib/nn/ringattn.c) run on the host "
            "only so far; use --device cpu, or no --cp");
    if (c->on_device && c->mode == DT_MODE_MOE)
        WHY("--mode moe --model gpt on the GPU: the GPT with experts (moe_gpt.c) keeps its "
            "activations and routes its tokens on the host so far; use --device cpu (the "
            "MLP's moe trains on the GPU)");
    if (c->on_device && c->mode == DT_MODE_DP_THREADS)
        WHY("--mode dp-threads --model gpt on the GPU: its threads share a batch already on "
            "the GPU, and the GPT makes its tokens on the host; use --device cpu, or "
            "another mode");

    return 0;
}

int dt_train_check(const dt_train_config *c, int n, char *why, size_t len)
{
    const dt_mlp_config *m = &c->model;
    int gpt = c->kind == DT_MODEL_GPT;
    if (c->mode < 0 || c->mode >= DT_NMODES)
        WHY("unknown mode %d", (int)c->mode);
    if (c->kind != DT_MODEL_MLP && !gpt)
        WHY("unknown model %d", (int)c->kind);
    if (c->recompute < DT_GPT_KEEP || c->recompute > DT_GPT_RECOMPUTE_SELECTIVE)
        WHY("unknown recomputation %d", c->recompute);
    if (c->recompute && !gpt)
        WHY("--recompute is for the GPT's blocks (--model gpt): the MLP keeps what it "
            "needs");
    if (c->sp && !gpt)
        WHY("--sp is sequence parallelism, for the GPT (--model gpt): the MLP's rows are "
            "examples, not positions of a sequence");
    if (gpt && gpt_check(c, n, why, len))
        return -1;
    if (!gpt && (c->data == NULL || c->data->n < 1))
        WHY("no training data");
    if (!gpt && (m->in != c->data->features || m->out < c->data->classes))
        WHY("the model takes %d features into %d classes; the data has %d and %d",
            m->in, m->out, c->data->features, c->data->classes);
    if (!gpt && (m->layers < 1 || m->layers > 1000))
        WHY("--layers must be 1 .. 1000, not %d", m->layers);
    if (!gpt && m->layers > 1 && (m->hidden < 1 || m->hidden > (1 << 16)))
        WHY("--hidden must be 1 .. 65536, not %d", m->hidden);
    if (c->steps < 1 || c->batch < 1)
        WHY("--steps and --batch must be at least 1");
    if (!(c->optim.lr > 0 && isfinite(c->optim.lr)))
        WHY("the learning rate must be a positive number");
    if (c->precision == DT_FP16 && !(c->scaler.init > 0 && isfinite(c->scaler.init) &&
        c->scaler.backoff > 0 && c->scaler.backoff < 1 && c->scaler.growth >= 1 &&
        isfinite(c->scaler.growth) && c->scaler.window >= 1))
        WHY("the loss scaler needs a positive finite initial scale, a backoff in (0, 1),"
            " a growth of at least 1 and a window of at least 1 step");
    if (c->accum < 1 || c->micro < 1 || c->bucket_kb < 1 || c->async < 0)
        WHY("--accum, --micro and --bucket-kb must be at least 1, --async at least 0");
    if (c->zero < 1 || c->zero > 3)
        WHY("--zero must be 1, 2 or 3, not %d", c->zero);
    if (c->on_device && dt_device() != DT_CUDA)
        WHY("training on the GPU was asked for, but this rank has no GPU");

    if (c->mode == DT_MODE_SERIAL && n != 1)
        WHY("mode serial runs on one rank, not %d (it is the reference the other modes "
            "are held to)", n);
    if (c->async && c->mode != DT_MODE_DP)
        WHY("--async is for mode dp (the parameter server)");
    if (c->accum > 1 && (c->mode == DT_MODE_DP || c->mode == DT_MODE_FSDP))
        WHY("--accum is for the modes built on gradient buckets (serial, ddp, tp, pp, "
            "hybrid), not %s", dt_mode_name(c->mode));
    if (c->compress != DT_COMPRESS_NONE && c->mode != DT_MODE_DDP)
        WHY("--compress is for mode ddp");
    if (c->compress != DT_COMPRESS_NONE && c->precision != DT_FP32)
        WHY("--compress is for fp32 gradients; with --precision %s they travel as 16-bit "
            "values already", c->precision == DT_FP16 ? "fp16" : "bf16");
    if (c->precision == DT_BF16 && c->on_device)
        WHY("--precision bf16 runs on the CPU so far (the GPU's kernels have fp16 only)");
    if (c->slow_ms < 0 || c->slow_ms > 100000 || c->slow_rank < 0 || c->slow_rank >= n)
        WHY("the slow rank must be a rank (0 .. %d) and its delay 0 .. 100000 ms", n - 1);
    if (c->mode == DT_MODE_MOE) {
        char moe_why[200];
        if (dti_moe_check(c, n, moe_why, sizeof moe_why))
            WHY("%s", moe_why);
    }
    if (c->dedicated_server && c->mode != DT_MODE_DP)
        WHY("--dedicated-server is for mode dp");
    if (c->prefetch && c->mode != DT_MODE_FSDP)
        WHY("--prefetch is for mode fsdp (it gathers the next layer's weights early)");
    if (c->prefetch && c->zero != 3)
        WHY("--prefetch is for --zero 3: stages 1 and 2 keep every layer's weights whole, "
            "so there is no gather to start early");
    if (c->gil != 0 && c->mode != DT_MODE_DP_THREADS)
        WHY("--gil is for mode dp-threads");
    if (c->mode == DT_MODE_DP_THREADS) {
        if (n != 1)
            WHY("mode dp-threads is one process with threads (PyTorch's DataParallel): "
                "run it on 1 rank, not %d", n);
        if (c->threads < 1 || c->threads > 256 || c->threads > c->batch)
            WHY("--threads must be 1 .. 256 and at most the batch (%d), not %d", c->batch,
                c->threads);
        if (!(c->gil >= 0 && c->gil <= 0.95f))
            WHY("--gil must be a share of each thread's work above 0 and at most 0.95");
        if (c->precision != DT_FP32)
            WHY("mode dp-threads trains in fp32 (its replicas are threads of one "
                "process); use --precision fp32");
        if (c->accum > 1)
            WHY("--accum is not for mode dp-threads");
    }
    if (c->mode == DT_MODE_DP && c->dedicated_server && n < 2)
        WHY("a dedicated server needs at least 2 ranks: one to serve, one to compute");
    if (c->checkpoint_dir && (c->checkpoint_every < 0 || c->checkpoint_every > 1000000))
        WHY("checkpoints every %d steps: it must be 1 .. 10^6 (0: after the last step "
            "only)", c->checkpoint_every);
    if ((c->checkpoint_dir || c->resume_dir) && c->mode == DT_MODE_DP && c->async > 0)
        WHY("dp --async %d cannot be checkpointed: the weights on their way to the "
            "workers are part of its state (use --async 0)", c->async);

    int D, T, P, C = c->cp > 1 ? c->cp : 1;
    mode_sizes(c, n, &D, &T, &P);
    if (c->cp > 1 && !gpt)
        WHY("--cp is context parallelism, for the GPT (--model gpt): it cuts sequences");
    if (c->cp < 0 || (c->cp > 1 && c->mode != DT_MODE_HYBRID))
        WHY("--cp %d: context parallelism is hybrid's fourth dimension (--mode hybrid "
            "--cp C, with --dp, --tp, --pp or alone)", c->cp);
    if (c->mode == DT_MODE_HYBRID) {
        if (D < 1 || T < 1 || P < 1)
            WHY("--dp, --tp and --pp must be at least 1");
        if ((long long)D * T * P * C != n)
            WHY("--dp %d x --tp %d x --pp %d%s = %lld ranks, but there are %d", D, T, P,
                C > 1 ? " x --cp" : "", (long long)D * T * P * C, n);
    }
    if (!gpt && T > 1 && m->layers > 1 && m->hidden % T)
        WHY("a hidden size of %d cannot be split evenly over %d tensor-parallel ranks "
            "(make --hidden a multiple of %d)", m->hidden, T, T);
    if (!gpt && P > m->layers)
        WHY("%d pipeline stages but only %d layers: every stage needs a layer", P,
            m->layers);
    if (pipeline_check(c, P, why, len))
        return -1;
    int M = (P > 1 ? c->micro : 1) * c->accum;
    if (c->batch % D)
        WHY("a global batch of %d %s cannot be shared evenly by %d data-parallel "
            "ranks: it must be a multiple of %d", c->batch, gpt ? "sequences" : "rows", D,
            D);
    if ((c->batch / D) % M)
        WHY("the %d rows of %s cannot be cut into %d micro-batches of equal size",
            c->batch / D, D > 1 ? "each data-parallel rank" : "the batch", M);
    return 0;
}

void dt_train_usage_check(const dt_train_config *c, const char *program)
{
    char why[256], msg[320];
    int n = dt_size();
    (void)program;                  /* the Try line names the program as run (prog.c) */
    if (dt_train_check(c, n, why, sizeof why) == 0)
        return;
    /* a usage error: what the user asked for (the options, the rank count) cannot run */
    snprintf(msg, sizeof msg, "cannot run on %d rank%s: %s", n, n == 1 ? "" : "s", why);
    dt_usage_error(NULL, msg);
}

/* A test hook's bad value: the sentence (rank 0) and where the variables are listed,
 * then status 2 on every rank, as dt_init's environment errors do. */
__attribute__((noreturn))
static void bad_hook(const char *why)
{
    if (dt_rank() == 0)
        dti_env_say(why);
    dt_usage_error(NULL, "");
}

void dt_train_env_check(const dt_train_config *c, int *kill_rank, int *kill_step)
{
    char why[200];
    int n = dt_size(), R = -1, S = 0, K = 0, E = c->checkpoint_every;
    if (dti_test_kill_env(&R, &S)) {
        snprintf(why, sizeof why, "DT_TEST_KILL must be R:S, a rank and a step (whole "
                 "numbers from 0 and 1), not '%.40s'", getenv("DT_TEST_KILL"));
        bad_hook(why);
    }
    /* a fresh run that would never fire it: say so rather than train in silence (a
     * resumed one may run on fewer ranks than the job the hook was meant for) */
    if (S > 0 && c->resume_dir == NULL && (R >= n || S > c->steps)) {
        snprintf(why, sizeof why, "DT_TEST_KILL=%d:%d names %s this run never reaches "
                 "(%d ranks, %d steps)", R, S, R >= n ? "a rank" : "a step", n, c->steps);
        bad_hook(why);
    }
    if (dti_test_crash_env(&K)) {
        snprintf(why, sizeof why, "DT_TEST_CHECKPOINT_CRASH must be K, the step whose "
                 "checkpoint a rank stops writing (a whole number from 1), not '%.40s'",
                 getenv("DT_TEST_CHECKPOINT_CRASH"));
        bad_hook(why);
    }
    if (K > 0 && c->resume_dir == NULL &&
        (!c->checkpoint_dir || K > c->steps || (K != c->steps && (E <= 0 || K % E)))) {
        snprintf(why, sizeof why, "DT_TEST_CHECKPOINT_CRASH=%d names a checkpoint this "
                 "run never writes (%s)", K, !c->checkpoint_dir ? "no --checkpoint"
                 : K > c->steps ? "past the last step" : "not a step --every writes");
        bad_hook(why);
    }
    if (kill_rank)
        *kill_rank = R;
    if (kill_step)
        *kill_step = S;
}

/* ==== the trace's "# train" line ==== */

/* Appends " key value" to s (len bytes) when it fits whole; the first pair goes in
 * without the space. A pair that does not fit is left out (trace.h). */
__attribute__((format(printf, 3, 4)))
static void pair(char *s, size_t len, const char *fmt, ...)
{
    char p[96];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(p, sizeof p, fmt, ap);
    va_end(ap);
    size_t used = strlen(s);
    if (k > 0 && (size_t)k < sizeof p && used + (used > 0) + (size_t)k < len)
        snprintf(s + used, len - used, "%s%s", used > 0 ? " " : "", p);
}

/* What c trains on n ranks, in the format of trace.h's "What training records": hybrid
 * names its sizes, then the keys of each part it has (pp, ddp, tp), as the single
 * modes do. */
static void train_text(const dt_train_config *c, int n, char *s, size_t len)
{
    int D, T, P, hybrid = c->mode == DT_MODE_HYBRID;
    mode_sizes(c, n, &D, &T, &P);
    s[0] = '\0';
    pair(s, len, "mode %s", dt_mode_name(c->mode));
    if (hybrid) {
        pair(s, len, "dp %d", D);
        pair(s, len, "tp %d", T);
        pair(s, len, "pp %d", P);
        if (c->cp > 1)
            pair(s, len, "cp %d", c->cp);
    }
    if (c->mode == DT_MODE_PP || (hybrid && P > 1)) {
        pair(s, len, "schedule %s", dt_pp_schedule_name(c->schedule));
        if (c->schedule == DT_PP_INTERLEAVED)
            pair(s, len, "virtual %d", c->virtual_stages);
        pair(s, len, "stages %d", P);
        /* per step, as the run cuts it: one stage runs the batch whole, M = 1 */
        pair(s, len, "micro %d", (P > 1 ? c->micro : 1) * c->accum);
    }
    if (c->mode == DT_MODE_DDP || (hybrid && D > 1)) {
        pair(s, len, "bucket_kb %d", c->bucket_kb);
        pair(s, len, "overlap %s", c->overlap ? "on" : "off");
    }
    if (c->mode == DT_MODE_DDP)
        pair(s, len, "compress %s", dt_compress_name(c->compress));
    if (c->mode == DT_MODE_DDP && c->compress == DT_COMPRESS_SIGN)
        pair(s, len, "feedback %s", c->compress_feedback ? "on" : "off");
    if (c->mode == DT_MODE_TP)
        pair(s, len, "tp %d", T);
    if (c->mode == DT_MODE_TP || (hybrid && T > 1))
        pair(s, len, "tp_style %s", c->tp_style == DT_TP_ALLGATHER ? "allgather"
                                                                   : "megatron");
    if (c->mode == DT_MODE_FSDP) {
        pair(s, len, "zero %d", c->zero);
        pair(s, len, "offload %s", c->offload ? "on" : "off");
        pair(s, len, "prefetch %s", c->prefetch ? "on" : "off");
    }
    if (c->mode == DT_MODE_DP_THREADS) {
        pair(s, len, "threads %d", c->threads);
        pair(s, len, "gil %g", (double)c->gil);
    }
    if (c->mode == DT_MODE_DP) {
        pair(s, len, "async %d", c->async);
        pair(s, len, "server %s", c->dedicated_server ? "dedicated" : "shared");
    }
    if (c->mode == DT_MODE_MOE) {
        pair(s, len, "experts %d", dt_moe_experts(c, n));
        pair(s, len, "topk %d", c->topk);
        pair(s, len, "capacity %g", (double)c->capacity);
        pair(s, len, "groups %d", dt_moe_groups(c, n));
        pair(s, len, "aux_loss %g", (double)c->aux_loss);
    }
    if (c->accum > 1 && P == 1)               /* with stages, micro counts it already */
        pair(s, len, "accum %d", c->accum);
    if (c->kind == DT_MODEL_GPT) {             /* layers: the units events name */
        pair(s, len, "model gpt");             /* (within the line's 191 characters) */
        pair(s, len, "layers %d", dt_gpt_units(&c->gpt));
        pair(s, len, "hidden %d", c->gpt.embed);
        if (c->recompute != DT_GPT_KEEP)
            pair(s, len, "recompute %s", c->recompute == DT_GPT_RECOMPUTE_FULL ? "full"
                                                                         : "selective");
        if (c->sp)
            pair(s, len, "sp on");
    } else {
        pair(s, len, "layers %d", c->model.layers);
        pair(s, len, "hidden %d", c->model.hidden);
    }
    pair(s, len, "batch %d", c->batch);
    pair(s, len, "steps %d", c->steps);
    pair(s, len, "ranks %d", n);
    pair(s, len, "precision %s", c->precision == DT_FP16 ? "fp16" : c->precision == DT_BF16
         ? "bf16" : "fp32");
    pair(s, len, "optimizer %s", c->optim.kind == DT_ADAM ? "adam" : "sgd");
}

/* ==== dt_train ==== */

void dt_train(const dt_train_config *c, MPI_Comm comm, dt_train_result *res)
{
    DT_REQUIRE(c != NULL && res != NULL, "dt_train: config or result is NULL");
    int n;
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    char why[256];
    DT_REQUIRE(dt_train_check(c, n, why, sizeof why) == 0, "cannot train: %s", why);

    /* The trace's "# train" line describes the first recorded run over every rank of
     * the trace (MPI_COMM_WORLD): a reference trained on MPI_COMM_SELF beside it (the
     * serial one, lesson 19's), runs while recording is paused (dt_trace_pause) and
     * later runs leave it as it is. */
    static int told;
    int world;
    DT_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world));
    if (!told && n == world && dt_trace_enabled()) {
        char text[DTI_TRACE_TRAIN_MAX + 1];
        train_text(c, n, text, sizeof text);
        told = dt_trace_train(text) == 0;
    }

    /* the test hooks, in a run over every rank (not a reference on MPI_COMM_SELF) */
    int kill_rank = -1, kill_step = 0;
    if (n == world)
        dt_train_env_check(c, &kill_rank, &kill_step);
    dti_test_kill_arm(kill_rank, kill_step);     /* (a reference on fewer ranks: off) */

    dti_run r;
    memset(&r, 0, sizeof r);
    r.cfg = c;
    dti_comm_dup(comm, &r.comm);
    MPI_Comm_rank(r.comm, &r.rank);
    r.size = n;
    r.where = c->on_device ? DT_CUDA : DT_CPU;
    r.nparams = c->mode == DT_MODE_MOE ? dt_moe_nparams(c, n) : dti_nparams(c);
    r.res = res;
    r.first = 1;
    dt_scaler_init(&r.scaler, &c->scaler);

    memset(res, 0, sizeof *res);
    res->steps = c->steps;
    res->nparams = r.nparams;
    res->loss = calloc((size_t)c->steps, sizeof *res->loss);
    res->skipped = calloc((size_t)c->steps, sizeof *res->skipped);
    res->step_seconds = calloc((size_t)c->steps, sizeof *res->step_seconds);
    res->step_compute = calloc((size_t)c->steps, sizeof *res->step_compute);
    res->params = r.rank == 0 ? calloc(r.nparams, sizeof(float)) : NULL;
    DT_REQUIRE(res->loss && res->skipped && res->step_seconds && res->step_compute &&
               (r.rank != 0 || res->params),
               "out of host memory");

    dti_ckpt_open(&r);
    dt_barrier(r.comm);
    dt_bytes_reset();
    switch (c->mode) {
    case DT_MODE_DP: dti_train_dp(&r); break;
    case DT_MODE_FSDP: dti_train_fsdp(&r); break;
    case DT_MODE_MOE:
        if (c->kind == DT_MODEL_GPT)
            dti_train_moe_gpt(&r);
        else
            dti_train_moe(&r);
        break;
    case DT_MODE_DP_THREADS: dti_train_dp_threads(&r); break;
    default: dti_train_hybrid(&r); break;
    }
    res->bytes_sent = dt_bytes_sent();
    res->messages_sent = dt_messages_sent();
    res->wait_seconds = dt_wait_seconds();
    dti_ckpt_close(&r);

    /* the books, made the same on every rank (MPI's own calls: not training traffic) */
    unsigned long long mine = res->bytes_sent, most = 0;
    dti_mpi_allreduce(&mine, &most, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, r.comm);
    res->bytes_sent_max = (size_t)most;
    dti_mpi_allreduce(&res->wait_seconds, &res->wait_seconds_max, 1, MPI_DOUBLE, MPI_MAX, r.comm);
    double t = r.t_sum / (c->steps > r.first ? c->steps - r.first : 1), tmax = 0;
    dti_mpi_allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, r.comm);
    res->seconds_per_step = tmax;
    t = r.c_sum / (c->steps > r.first ? c->steps - r.first : 1);
    dti_mpi_allreduce(&t, &res->compute_seconds, 1, MPI_DOUBLE, MPI_MAX, r.comm);
    res->first_timed = c->steps > r.first ? r.first + 1 : r.first;
    dti_mpi_allreduce(MPI_IN_PLACE, res->step_seconds, c->steps, MPI_DOUBLE, MPI_MAX, r.comm);
    dti_mpi_allreduce(MPI_IN_PLACE, res->step_compute, c->steps, MPI_DOUBLE, MPI_MAX, r.comm);
    dti_mpi_bcast(res->loss, c->steps, MPI_FLOAT, 0, r.comm);
    dti_mpi_bcast(res->skipped, c->steps, MPI_INT, 0, r.comm);
    res->peak_params = r.peak[DTI_PARAMS];
    res->peak_grads = r.peak[DTI_GRADS];
    res->peak_optim = r.peak[DTI_OPTIM];
    res->peak_acts = r.peak[DTI_ACTS];
    MPI_Comm_free(&r.comm);
}

void dt_train_result_free(dt_train_result *r)
{
    if (r == NULL)
        return;
    free(r->loss);
    free(r->skipped);
    free(r->step_seconds);
    free(r->step_compute);
    r->step_compute = NULL;
    free(r->params);
    free(r->stage_bubble);
    free(r->stage_stash);
    free(r->stage_messages);
    free(r->stage_bytes);
    r->loss = NULL;
    r->skipped = NULL;
    r->params = NULL;
    r->stage_bubble = NULL;
    r->stage_stash = NULL;
    r->stage_messages = r->stage_bytes = NULL;
}

void dt_train_step_words(const dt_train_result *r, char *buf, size_t len)
{
    int first = r->first_timed > 0 ? r->first_timed : 1;
    if (r->steps - first + 1 < 2)
        snprintf(buf, len, "step %d alone (a median and a spread need more steps)",
                 r->steps);
    else
        snprintf(buf, len, "the median of steps %d..%d +- half their interquartile range",
                 first, r->steps);
}

/* The timing of t[steps] over the steps seconds_per_step counts; with fewer than two,
 * their mean with no spread. */
static dt_timing timed_steps(const dt_train_result *r, const double *t, double mean)
{
    int first = r->first_timed > 0 ? r->first_timed : 1, n = r->steps - first + 1;
    if (n < 2 || t == NULL)
        return (dt_timing){mean, mean, mean, 1};
    return dt_timing_of(t + first - 1, n);
}

dt_timing dt_train_step_timing(const dt_train_result *r)
{
    return timed_steps(r, r->step_seconds, r->seconds_per_step);
}

dt_timing dt_train_compute_timing(const dt_train_result *r)
{
    return timed_steps(r, r->step_compute, r->compute_seconds);
}

void dt_train_serial(const dt_train_config *c, MPI_Comm comm, dt_train_result *ref)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    memset(ref, 0, sizeof *ref);
    if (rank == 0) {
        dt_train_config s = *c;
        s.mode = DT_MODE_SERIAL;
        s.async = 0;
        s.dedicated_server = 0;
        s.prefetch = 0;
        s.gil = 0;                                /* dp-threads' lock */
        s.checkpoint_dir = s.resume_dir = NULL;   /* the reference saves nothing */
        s.checkpoint_every = 0;
        s.slow_rank = s.slow_ms = 0;              /* nor waits for a straggler */
        s.on_step = NULL;
        dt_train(&s, MPI_COMM_SELF, ref);
    }
    dt_barrier(comm);
}

double dt_params_max_diff(const float *a, const float *b, size_t n, MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    double d = 0;
    for (size_t i = 0; rank == 0 && i < n; i++)
        d = fmax(d, fabs((double)a[i] - b[i]));
    dti_mpi_bcast(&d, 1, MPI_DOUBLE, 0, comm);
    return d;
}
