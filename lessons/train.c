/* train: the training driver. Trains the MLP of lib/nn (or, with --model gpt, the small
 * transformer of lib/nn/gpt.h on a text) serially or in any parallel mode of
 * lib/parallel and prints the loss of every step, then what the run cost: time per
 * step, bytes sent, and the peak memory of every rank. The lessons explain the modes;
 * this is the tool that runs them (see docs/training.md for the commands to try).
 *
 * Run:  mpiexec -n 4 build/train --mode ddp
 *       mpiexec -n 4 build/train --mode fsdp --zero 2 --optim adam --lr 0.001
 *       mpiexec -n 4 build/train --mode hybrid --dp 2 --pp 2 --micro 4
 *       mpiexec -n 2 build/train --mode tp --precision fp16 --trace tp.trace
 *       mpiexec -n 2 build/train --model gpt --mode tp --heads 4
 *
 * Checkpoints: save every 10 steps into ck/; after a crash or a kill, the same command
 * with --resume ck continues from the newest one, to the same weights and losses:
 *       mpiexec -n 4 build/train --mode fsdp --steps 100 --checkpoint ck --every 10
 *       mpiexec -n 4 build/train --mode fsdp --steps 100 --checkpoint ck --every 10 \
 *           --resume ck
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"
#include "parallel/parallel.h"
#include "parallel/moe.h"

/* --model gpt's defaults: a model a 2-core machine trains in seconds, whose loss falls
 * well below the text's unigram entropy in the default steps */
enum { GPT_LAYERS = 2, GPT_HEADS = 4, GPT_EMBED = 64, GPT_SEQ = 64, GPT_BATCH = 16,
       GPT_STEPS = 300 };
#define GPT_LR 3e-3f

/* The usage text, with the defaults of dt_train_defaults filled in (make_usage). */
static char usage[8192];

static void make_usage(const dt_train_config *d)
{
    dt_scaler_config sc;
    dt_scaler_defaults(&sc);
    snprintf(usage, sizeof usage,
    "usage: mpiexec -n N train --mode MODE [options]\n"
    "Trains an MLP serially or in parallel; prints the loss per step and the costs.\n"
    "  --mode MODE         serial|dp|ddp|fsdp|tp|pp|hybrid|moe|dp-threads (serial)\n"
    "  --model mlp|gpt     the MLP on a classification set (the default), or a small\n"
    "                      GPT (lib/nn/gpt.h) learning the next byte of a text, in\n"
    "                      every mode (on a GPU: not --cp, moe, dp-threads);\n"
    "                      --layers L blocks (%d), --heads H (%d), --embed C (%d),\n"
    "                      --seq T bytes a sequence (%d), --batch sequences (%d),\n"
    "                      --steps (%d),\n"
    "                      --text FILE (default: %s if there,\n"
    "                      else sentences made from --seed); Adam, lr %g by default;\n"
    "                      --recompute none|full|selective: activations recomputed in\n"
    "                      backward (full: each block's input kept; selective:\n"
    "                      attention's probabilities not kept), the same weights;\n"
    "                      --sp: with tensor parallelism, sequence parallelism (the\n"
    "                      LayerNorms and residual adds on 1/T of the positions)\n"
    "  --steps S           training steps (default %d)\n"
    "  --batch B           global batch, shared by the data-parallel ranks (%d)\n"
    "  --lr X              learning rate (%g)\n"
    "  --optim O           sgd|adam (sgd); --momentum M for sgd (%g)\n"
    "  --seed K            initial weights and synthetic data (%llu)\n"
    "  --layers L, --hidden H, --act relu|gelu   (%d layers, hidden %d, %s)\n"
    "  --precision P       fp32|fp16|bf16 (fp32); fp16: --loss-scale X (%g) and\n"
    "                      --scale-window N (clean steps before it doubles, %d);\n"
    "                      bf16 has fp32's range and needs no loss scale\n"
    "  --data DIR          DIR/train-images-idx3-ubyte and train-labels-idx1-ubyte\n"
    "  --examples N, --features F, --classes C   the synthetic set (4096, 32, 10)\n"
    "  --quiet             no step lines;  --dump FILE  final weights, raw float32 LE\n"
    "  --checkpoint DIR    save the whole training state into DIR after the last step,\n"
    "                      and every K steps with --every K (1..10^6)\n"
    "  --resume DIR        continue from DIR's newest checkpoint (DIR may be the same as\n"
    "                      --checkpoint's): the same weights and losses as a run never\n"
    "                      stopped; the configuration must match, --steps may grow.\n"
    "                      Not with dp --async (stale weights in flight)\n"
    "  --slow-rank R, --slow-ms MS   rank R sleeps MS ms at the start of each of its\n"
    "                      steps, as a slower GPU would (a straggler; default none)\n"
    "mode options (for the single modes the mode's size is the number of ranks):\n"
    "  dp      --dedicated-server (rank 0 only serves), --async K (stale weights)\n"
    "  ddp     --bucket-kb N (%d), --no-overlap, --accum K (micro-batches per step),\n"
    "          --compress none|fp16|int8|sign (gradients compressed before they\n"
    "          travel; sign keeps what it lost for the next step: error feedback),\n"
    "          --no-feedback (sign without error feedback, to see why it is needed)\n"
    "  fsdp    --zero 1|2|3 (%d), --offload (shards in host memory, with cuda),\n"
    "          --prefetch (zero 3: the next layer gathered while this one computes)\n"
    "  tp      --tp-style megatron|allgather (%s)\n"
    "  pp      --micro M (%d), --schedule gpipe|1f1b|interleaved|zb-h1 (%s),\n"
    "          --virtual v (interleaved: v chunks of layers a stage, %d)\n"
    "  hybrid  --dp D --tp T --pp P, D*T*P = N (--dp defaults to N/(T*P)); and the\n"
    "          ddp, tp and pp options above; --model gpt: --cp C, context\n"
    "          parallelism (ring attention), each sequence cut over C more ranks,\n"
    "          D*T*P*C = N (--seq a multiple of 2C)\n"
    "  moe     --experts E (a multiple of N; default 2 per rank), --topk 1|2 (%d),\n"
    "          --capacity X (capacity factor, %g), --moe-groups G (token groups;\n"
    "          default one per rank), --aux-loss X (load-balancing loss weight, %g);\n"
    "          the MLP's middle layer, or the GPT's MLP of blocks 1, 3, ... (--model\n"
    "          gpt), becomes the experts\n"
    "  dp-threads  one rank, fp32: --threads T replicas, one thread each (%d),\n"
    "          --gil G (a lock held for G of each thread's work, above 0 to 0.95)\n"
    DT_COMMON_USAGE
    "  --help              this text\n",
    GPT_LAYERS, GPT_HEADS, GPT_EMBED, GPT_SEQ, GPT_BATCH, GPT_STEPS, dt_text_default_paths[0],
    (double)GPT_LR, d->steps, d->batch, (double)d->optim.lr, (double)d->optim.momentum, d->seed,
    d->model.layers, d->model.hidden, d->model.act == DT_RELU ? "relu" : "gelu",
    (double)sc.init, sc.window, d->bucket_kb, d->zero,
    d->tp_style == DT_TP_MEGATRON ? "megatron" : "allgather", d->micro,
    dt_pp_schedule_name(d->schedule), d->virtual_stages, d->topk, (double)d->capacity,
    (double)d->aux_loss, d->threads);
}

/* Every option: its code O_<id>, its name, whether it takes a value, and the modes it
 * is for (0: all). Given to another mode, a mode option is an error, never ignored. */
#define M(m) (1u << DT_MODE_##m)
#define OPTIONS(X) \
    X(MODE, "mode", 1, 0)             X(STEPS, "steps", 1, 0) \
    X(BATCH, "batch", 1, 0)           X(LR, "lr", 1, 0) \
    X(OPTIM, "optim", 1, 0)           X(MOMENTUM, "momentum", 1, 0) \
    X(SEED, "seed", 1, 0)             X(LAYERS, "layers", 1, 0) \
    X(HIDDEN, "hidden", 1, 0)         X(ACT, "act", 1, 0) \
    X(PRECISION, "precision", 1, 0)   X(LOSS_SCALE, "loss-scale", 1, 0) \
    X(WINDOW, "scale-window", 1, 0)   X(DATA, "data", 1, 0) \
    X(EXAMPLES, "examples", 1, 0)     X(FEATURES, "features", 1, 0) \
    X(CLASSES, "classes", 1, 0)       X(QUIET, "quiet", 0, 0) \
    X(DUMP, "dump", 1, 0)             X(CHECKPOINT, "checkpoint", 1, 0) \
    X(EVERY, "every", 1, 0)           X(RESUME, "resume", 1, 0) \
    X(SERVER, "dedicated-server", 0, M(DP))   X(ASYNC, "async", 1, M(DP)) \
    X(BUCKET, "bucket-kb", 1, M(DDP) | M(HYBRID)) \
    X(NO_OVERLAP, "no-overlap", 0, M(DDP) | M(HYBRID)) \
    X(ACCUM, "accum", 1, M(DDP) | M(HYBRID)) \
    X(ZERO, "zero", 1, M(FSDP))               X(OFFLOAD, "offload", 0, M(FSDP)) \
    X(PREFETCH, "prefetch", 0, M(FSDP)) \
    X(TP_STYLE, "tp-style", 1, M(TP) | M(HYBRID)) \
    X(MICRO, "micro", 1, M(PP) | M(HYBRID)) \
    X(SCHEDULE, "schedule", 1, M(PP) | M(HYBRID)) \
    X(VIRTUAL, "virtual", 1, M(PP) | M(HYBRID)) \
    X(DP, "dp", 1, M(HYBRID))  X(TP, "tp", 1, M(HYBRID))  X(PP, "pp", 1, M(HYBRID)) \
    X(COMPRESS, "compress", 1, M(DDP))      X(NO_FEEDBACK, "no-feedback", 0, M(DDP)) \
    X(EXPERTS, "experts", 1, M(MOE))          X(TOPK, "topk", 1, M(MOE)) \
    X(CAPACITY, "capacity", 1, M(MOE))        X(GROUPS, "moe-groups", 1, M(MOE)) \
    X(AUX_LOSS, "aux-loss", 1, M(MOE)) \
    X(THREADS, "threads", 1, M(DP_THREADS))   X(GIL, "gil", 1, M(DP_THREADS)) \
    X(SLOW_RANK, "slow-rank", 1, 0)           X(SLOW_MS, "slow-ms", 1, 0) \
    X(MODEL, "model", 1, 0)   X(HEADS, "heads", 1, 0)   X(EMBED, "embed", 1, 0) \
    X(SEQ, "seq", 1, 0)       X(TEXT, "text", 1, 0)     X(RECOMPUTE, "recompute", 1, 0) \
    X(SP, "sp", 0, M(TP) | M(HYBRID)) \
    X(CP, "cp", 1, M(HYBRID))

#define ENUM(id, name, arg, modes) O_##id,
#define LONGOPT(id, name, arg, modes) {name, arg ? required_argument : no_argument, NULL, O_##id},
#define MODES(id, name, arg, modes) modes,
enum { O_BEFORE = 0x1fff, OPTIONS(ENUM) O_LAST };
#define NOPT (O_LAST - O_MODE)
static const struct option longopts[] = {
    OPTIONS(LONGOPT) {"help", no_argument, NULL, 'h'}, DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}
};
static const unsigned for_modes[NOPT] = { OPTIONS(MODES) };

static const char *precision_name(dt_precision p)
{
    return p == DT_FP16 ? "fp16" : p == DT_BF16 ? "bf16" : "fp32";
}

/* ==== parsing ==== */

enum { MAX_FLOATS = 1 << 26 };      /* 256 MiB of fp32: the most data, weights, ... */

static const char *optname;      /* the option being parsed, for messages */

__attribute__((noreturn, format(printf, 1, 2)))
static void bad(const char *fmt, ...)
{
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    dt_usage_error(usage, why);
}

static int int_arg(int min, int max)
{
    int v;
    if (dt_parse_int(optarg, min, max, &v))
        bad("--%s wants a whole number from %d to %d, not '%s'", optname, min, max, optarg);
    return v;
}

/* A number from min to max (min itself only when min_ok): the whole string, finite. */
static float float_arg(double min, double max, int min_ok)
{
    char *end;
    errno = 0;
    double v = strtod(optarg, &end);
    if (errno || end == optarg || *end || isspace((unsigned char)*optarg) || !(v >= min) ||
        (v == min && !min_ok) || v > max)
        bad("--%s wants a number %s %g %s %g, not '%s'", optname, min_ok ? "from" : "above",
            min, min_ok ? "to" : "and at most", max, optarg);
    return (float)v;
}

/* One of names[0..n): its index. */
static int word_arg(const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(optarg, names[i]) == 0)
            return i;
    bad("--%s does not take '%s'", optname, optarg);
}

struct driver {
    int quiet;
    const char *data_dir, *dump, *text;
    int examples, features, classes;
    int first_step;              /* the first step trained (after --resume, not 1); rank 0 */
};

static void parse(int argc, char **argv, dt_train_config *c, struct driver *d)
{
    static const char *const optims[] = {"sgd", "adam"}, *const acts[] = {"relu", "gelu"},
        *const precs[] = {"fp32", "fp16", "bf16"}, *const styles[] = {"megatron", "allgather"},
        *const scheds[] = {"gpipe", "1f1b", "interleaved", "zb-h1"}, *const models[] = {"mlp", "gpt"},
        *const recomputes[] = {"none", "full", "selective"};
    int given[NOPT] = {0}, idx = 0, opt;
    opterr = 0;                                  /* dt_usage_error speaks, on rank 0 */
    optind = 0;
    while ((opt = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        optname = longopts[idx].name;
        if (opt >= O_MODE && opt < O_LAST)
            given[opt - O_MODE] = 1;
        switch (opt) {
        case O_MODE:
            if (dt_mode_parse(optarg, &c->mode))
                bad("unknown mode '%s'", optarg);
            break;
        case O_STEPS: c->steps = int_arg(1, 1000000); break;
        case O_BATCH: c->batch = int_arg(1, 1 << 20); break;
        case O_LR: c->optim.lr = float_arg(0, 100, 0); break;
        case O_OPTIM: c->optim.kind = (dt_optim_kind)word_arg(optims, 2); break;
        case O_MOMENTUM: c->optim.momentum = float_arg(0, 0.999, 1); break;
        case O_SEED: {
            char *end;
            errno = 0;
            c->seed = strtoull(optarg, &end, 10);
            if (!isdigit((unsigned char)*optarg) || errno || *end)
                bad("--seed wants a whole number from 0 to 2^64-1, not '%s'", optarg);
            break;
        }
        case O_LAYERS: c->model.layers = int_arg(1, 1000); break;
        case O_HIDDEN: c->model.hidden = int_arg(1, 1 << 16); break;
        case O_ACT: c->model.act = (dt_act)word_arg(acts, 2); break;
        case O_PRECISION: c->precision = (dt_precision)word_arg(precs, 3); break;
        case O_LOSS_SCALE: c->scaler.init = float_arg(0, 1e30, 0); break;
        case O_WINDOW: c->scaler.window = int_arg(1, 1 << 30); break;
        case O_DATA:
            if (!*optarg)
                bad("--data '': the name is empty");
            d->data_dir = optarg;
            break;
        case O_EXAMPLES: d->examples = int_arg(1, 1 << 24); break;
        case O_FEATURES: d->features = int_arg(1, 1 << 16); break;
        case O_CLASSES: d->classes = int_arg(2, 1 << 16); break;
        case O_QUIET: d->quiet = 1; break;
        case O_DUMP: d->dump = optarg; break;
        case O_CHECKPOINT: c->checkpoint_dir = optarg; break;
        case O_EVERY: c->checkpoint_every = int_arg(1, 1000000); break;
        case O_RESUME:           /* read and checked in lib/parallel/checkpoint.c */
            if (!*optarg)
                bad("--resume '': the name is empty");
            c->resume_dir = optarg;
            break;
        case O_SERVER: c->dedicated_server = 1; break;
        case O_ASYNC: c->async = int_arg(0, 1000); break;
        case O_BUCKET: c->bucket_kb = int_arg(1, 1 << 20); break;
        case O_NO_OVERLAP: c->overlap = 0; break;
        case O_ACCUM: c->accum = int_arg(1, 1024); break;
        case O_ZERO: c->zero = int_arg(1, 3); break;
        case O_OFFLOAD: c->offload = 1; break;
        case O_PREFETCH: c->prefetch = 1; break;
        case O_TP_STYLE: c->tp_style = (dt_tp_style)word_arg(styles, 2); break;
        case O_MICRO: c->micro = int_arg(1, 1024); break;
        case O_SCHEDULE: c->schedule = (dt_pp_schedule)word_arg(scheds, 4); break;
        case O_VIRTUAL: c->virtual_stages = int_arg(1, 64); break;
        case O_DP: c->dp = int_arg(1, 1 << 16); break;
        case O_TP: c->tp = int_arg(1, 1 << 16); break;
        case O_PP: c->pp = int_arg(1, 1 << 16); break;
        case O_COMPRESS:
            if (dt_compress_parse(optarg, &c->compress))
                bad("--compress does not take '%s' (none, fp16, int8 or sign)", optarg);
            break;
        case O_NO_FEEDBACK: c->compress_feedback = 0; break;
        case O_EXPERTS: c->experts = int_arg(1, 4096); break;
        case O_TOPK: c->topk = int_arg(1, 2); break;
        case O_CAPACITY: c->capacity = float_arg(0, 1000, 0); break;
        case O_GROUPS: c->moe_groups = int_arg(1, 1 << 20); break;
        case O_AUX_LOSS: c->aux_loss = float_arg(0, 100, 1); break;
        case O_THREADS: c->threads = int_arg(1, 256); break;
        case O_GIL: c->gil = float_arg(0, 0.95, 0); break;
        case O_SLOW_RANK: c->slow_rank = int_arg(0, 1 << 20); break;
        case O_SLOW_MS: c->slow_ms = int_arg(0, 100000); break;
        case O_MODEL: c->kind = (dt_model_kind)word_arg(models, 2); break;
        case O_HEADS: c->gpt.heads = int_arg(1, 1024); break;
        case O_EMBED: c->gpt.embed = int_arg(1, 8192); break;
        case O_SEQ: c->gpt.seq = int_arg(1, 4096); break;
        case O_RECOMPUTE: c->recompute = word_arg(recomputes, 3); break;
        case O_SP: c->sp = 1; break;
        case O_CP: c->cp = int_arg(1, 1 << 16); break;
        case O_TEXT:
            if (!*optarg)
                bad("--text '': the name is empty");
            d->text = optarg;
            break;
        case 'h': dt_usage_help(usage);
        case DT_OPT_DEVICE: case DT_OPT_TRACE: break;      /* dt_init has read them */
        default: {                      /* ':' a value missing, '?' an unknown option */
            char why[160];
            dt_bad_option(opt, argv, why, sizeof why);
            bad("%s", why);
        }
        }
    }
    if (optind < argc)
        bad("unexpected argument '%s'", argv[optind]);

    /* the two models' own options */
    static const int mlp_only[] = { O_HIDDEN, O_ACT, O_DATA, O_EXAMPLES, O_FEATURES,
                                    O_CLASSES }, gpt_only[] = { O_HEADS, O_EMBED, O_SEQ,
                                    O_TEXT, O_RECOMPUTE };
    int gpt = c->kind == DT_MODEL_GPT;
    for (int i = 0; i < (gpt ? 6 : 5); i++) {
        int o = gpt ? mlp_only[i] : gpt_only[i];
        if (given[o - O_MODE])
            bad("--%s is for --model %s", longopts[o - O_MODE].name, gpt ? "mlp" : "gpt");
    }
    if (gpt) {                              /* its defaults, where not given */
        c->model.layers = given[O_LAYERS - O_MODE] ? c->model.layers : GPT_LAYERS;
        c->gpt.layers = c->model.layers;
        c->gpt.heads = given[O_HEADS - O_MODE] ? c->gpt.heads : GPT_HEADS;
        c->gpt.embed = given[O_EMBED - O_MODE] ? c->gpt.embed : GPT_EMBED;
        c->gpt.seq = given[O_SEQ - O_MODE] ? c->gpt.seq : GPT_SEQ;
        c->gpt.vocab = 256;
        c->batch = given[O_BATCH - O_MODE] ? c->batch : GPT_BATCH;
        c->steps = given[O_STEPS - O_MODE] ? c->steps : GPT_STEPS;
        if (!given[O_OPTIM - O_MODE])
            c->optim.kind = DT_ADAM;
        if (!given[O_LR - O_MODE])
            c->optim.lr = c->optim.kind == DT_ADAM ? GPT_LR : c->optim.lr;
    }
    /* options that do not go with the others given */
    for (int i = 0; i < NOPT; i++)
        if (given[i] && for_modes[i] && !(for_modes[i] & 1u << c->mode))
            bad("--%s is for --mode %s%s%s, not %s", longopts[i].name,
                dt_mode_name((dt_mode)__builtin_ctz(for_modes[i])),
                for_modes[i] & M(HYBRID) && for_modes[i] != M(HYBRID) ? " or " : "",
                for_modes[i] & M(HYBRID) && for_modes[i] != M(HYBRID) ? "hybrid" : "",
                dt_mode_name(c->mode));
    if (given[O_SLOW_RANK - O_MODE] && !given[O_SLOW_MS - O_MODE])
        bad("--slow-rank is for --slow-ms MS (how long that rank sleeps each step)");
    if (given[O_NO_FEEDBACK - O_MODE] && c->compress != DT_COMPRESS_SIGN)
        bad("--no-feedback is for --compress sign (the only one with error feedback)");
    if (given[O_EVERY - O_MODE] && !c->checkpoint_dir)
        bad("--every is for --checkpoint DIR");
    if ((given[O_LOSS_SCALE - O_MODE] || given[O_WINDOW - O_MODE]) && c->precision != DT_FP16)
        bad("--loss-scale and --scale-window are for --precision fp16");
    if (given[O_MOMENTUM - O_MODE] && c->optim.kind != DT_SGD)
        bad("--momentum is for --optim sgd");
    if (d->data_dir && (given[O_EXAMPLES - O_MODE] || given[O_FEATURES - O_MODE] ||
                        given[O_CLASSES - O_MODE]))
        bad("--examples, --features, --classes are for the synthetic set, not --data");
    long long tp_pp = (long long)c->tp * c->pp * (c->cp > 1 ? c->cp : 1);   /* no int
                                                                          overflow */
    if (c->mode == DT_MODE_HYBRID && !given[O_DP - O_MODE] && dt_size() % tp_pp == 0)
        c->dp = (int)(dt_size() / tp_pp);
    if (!d->data_dir && (double)d->examples * d->features > (double)MAX_FLOATS)
        bad("--examples %d x --features %d is more than 256 MiB of data", d->examples,
            d->features);
}

/* The whole model's weights: moe's experts replace one layer (parallel/moe.h). */
static size_t nparams(const dt_train_config *c)
{
    return c->mode == DT_MODE_MOE ? dt_moe_nparams(c, dt_size())
           : c->kind == DT_MODEL_GPT ? dt_gpt_nparams(&c->gpt) : dt_mlp_nparams(&c->model);
}

/* Sizes too large to hold, refused before they are allocated: the weights (each with a
 * gradient and optimizer state beside it), and the activations a layer keeps for
 * backward, for the whole batch on one rank as serial training has them. */
static void check_sizes(const dt_train_config *c)
{
    const dt_mlp_config *m = &c->model;
    if (c->kind == DT_MODEL_GPT) {
        size_t np = nparams(c);
        if (np > MAX_FLOATS)
            bad("%d blocks of width %d is %zu weights: more than 256 MiB of them",
                c->gpt.layers, c->gpt.embed, np);
        if ((double)dt_gpt_acts_floats(&c->gpt, NULL, c->batch, c->gpt.seq, NULL) >
            (double)MAX_FLOATS)
            bad("--batch %d of --seq %d through %d blocks of width %d: more than 256 MiB "
                "of activations", c->batch, c->gpt.seq, c->gpt.layers, c->gpt.embed);
        return;
    }
    int wide = m->hidden > m->in ? m->hidden : m->in;
    wide = m->out > wide ? m->out : wide;
    size_t np = nparams(c);
    if (np > MAX_FLOATS)
        bad("%d layers of %d%s is %zu weights: more than 256 MiB of them", m->layers,
            m->hidden, c->mode == DT_MODE_MOE ? " with its experts" : "", np);
    if ((double)c->batch * wide * m->layers > (double)MAX_FLOATS)
        bad("--batch %d through %d layers of width %d: more than 256 MiB of activations",
            c->batch, m->layers, wide);
}

/* ==== data: the same set on every rank ==== */

static void load_data(const struct driver *d, unsigned long long seed, dt_dataset *set)
{
    if (!d->data_dir) {
        dt_data_synthetic(set, d->examples, d->features, d->classes, seed);
        return;
    }
    char images[4096], labels[4096], err[512] = "";
    snprintf(images, sizeof images, "%s/train-images-idx3-ubyte", d->data_dir);
    snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte", d->data_dir);
    int ok = dt_data_load_idx(set, images, labels, err, sizeof err) == 0, all = 0;
    MPI_Request req;                  /* every rank read the files: agree on the outcome */
    DT_CHECK_MPI(MPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    if (!all)              /* "train: <why, naming the file>", exit 2 on every rank */
        dt_usage_error(NULL, ok ? "the data could not be read on another rank" : err);
}

/* The GPT's text, the same on every rank: --text FILE, or the default */
static void load_text(const struct driver *d, unsigned long long seed, dt_text *t)
{
    if (!d->text) {
        dt_text_default(t, seed);
        return;
    }
    char err[512] = "";
    int ok = dt_text_load(t, d->text, err, sizeof err) == 0, all = 0;
    MPI_Request req;                  /* every rank read the file: agree on the outcome */
    DT_CHECK_MPI(MPI_Iallreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    if (!all)
        dt_usage_error(NULL, ok ? "the text could not be read on another rank" : err);
}

/* ==== output ==== */

/* Prints text within 80 columns: a longer line is broken at its last space that fits
 * and continued 4 columns right of its own indentation; trailing spaces go. */
static void print_wrapped(const char *text)
{
    while (*text) {
        size_t len = strcspn(text, "\n"), lead = strspn(text, " ");
        const char *p = text, *end = text + len;      /* the line: [text, end) */
        int indent = 0;                               /* of the next piece */
        while (end > p && end[-1] == ' ')
            end--;
        do {
            size_t room = 80 - (size_t)indent, n = (size_t)(end - p);
            if (n > room) {
                for (n = room; n > 0 && p[n] != ' '; n--)
                    ;
                if (n == 0)
                    n = room;                         /* a word longer than a line: cut */
            }
            printf("%*s%.*s\n", indent, "", (int)n, p);
            for (p += n; p < end && *p == ' '; p++)
                ;
            indent = (int)(lead < 40 ? lead : 40) + 4;
        } while (p < end);
        text += len + (text[len] == '\n');
    }
    fflush(stdout);
}

static void print_step(const dt_step_report *r, void *ctx)
{
    struct driver *d = ctx;
    char line[256];
    if (d->first_step == 0 || r->step < d->first_step)
        d->first_step = r->step;
    snprintf(line, sizeof line, "step %d loss %.6f  %s", r->step, (double)r->loss, r->extra);
    if (!d->quiet)
        print_wrapped(line);
}

/* Rank 0 writes the final weights as raw little-endian float32. Returns 1 on success,
 * the same on every rank. */
static int dump(const char *path, const dt_train_result *res)
{
    int ok = 1;
    if (dt_rank() == 0) {
        int err = 0;                    /* errno of the first call that failed */
        FILE *f = fopen(path, "wb");
        if (f == NULL)
            err = errno;
        for (size_t i = 0; !err && i < res->nparams; i++) {
            uint32_t u;
            memcpy(&u, &res->params[i], 4);
            unsigned char b[4] = {u & 255, u >> 8 & 255, u >> 16 & 255, u >> 24};
            if (fwrite(b, 1, 4, f) != 4)
                err = errno ? errno : EIO;
        }
        if (f && !err && fflush(f) != 0)      /* a full disk shows here or at fclose */
            err = errno;
        if (f && fclose(f) != 0 && !err)
            err = errno;
        ok = err == 0;
        if (!ok)
            fprintf(stderr, "train: cannot write the weights to %s: %s\n", path,
                    strerror(err));
    }
    MPI_Request req;
    DT_CHECK_MPI(MPI_Ibcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    return ok;
}

/* What each rank asked of its GPU in the timed steps (the device books, lib/buf.h), and
 * the verdict: a step that stays on the GPU launches kernels and moves no tensor data
 * through the host and allocates nothing (cudaMalloc and cudaFree wait for the whole
 * GPU). The batch going up and the numbers the host reads (the loss, flags) are
 * counted apart: every step needs them. scripts/gpu-check.sh reads these rows. */
static void print_device_books(const dt_train_result *res)
{
    const dt_device_books *b = &res->books;
    char t[32], in[32], nb[32], cell[3][48];
    dt_printf0("on the GPU in steps %d..%d, per rank: kernels and products launched, host "
               "waits,\ndevice allocations, and copies between host and GPU (tensor data, "
               "the batch,\nnumbers read back):\n", res->books_from, res->books_to);
    dt_printf0("  rank  launched     waits  allocs       tensors         batch       "
               "numbers\n");
    snprintf(cell[0], sizeof cell[0], "%llu (%s)", b->tensors,
             dt_format_bytes((double)b->tensor_bytes, t, sizeof t));
    snprintf(cell[1], sizeof cell[1], "%llu (%s)", b->inputs,
             dt_format_bytes((double)b->input_bytes, in, sizeof in));
    snprintf(cell[2], sizeof cell[2], "%llu (%s)", b->numbers,
             dt_format_bytes((double)b->number_bytes, nb, sizeof nb));
    dt_printf_ordered("  %4d  %8llu  %8llu  %6llu  %12s  %12s  %12s\n", dt_rank(),
                      b->launches, b->waits, b->allocs, cell[0], cell[1], cell[2]);
    unsigned long long worst[3] = { b->tensors, b->allocs, b->launches ? 0 : 1 };
    MPI_Allreduce(MPI_IN_PLACE, worst, 3, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (worst[2])
        dt_printf0("  some rank launched nothing on the GPU: its steps ran on the host\n");
    else if (worst[0] || worst[1])
        dt_printf0("  the steps left the GPU: %s%s%s\n",
                   worst[0] ? "tensor data went through the host" : "",
                   worst[0] && worst[1] ? ", and " : "",
                   worst[1] ? "device memory was allocated or freed" : "");
    else
        dt_printf0("  every step stayed on the GPU: no tensor data through the host, no "
                   "allocation\n");
}

/* The GPT's last loss against the text's unigram entropy, and what it writes: 200
 * bytes after the text's first 16, drawn at temperature 0.8 (rank 0, which holds the
 * final weights; dt_gpt_sample runs the dense GPT, so not after moe). */
static void print_sample(const dt_train_config *c, const dt_text *t, const dt_train_result *res)
{
    double bits = res->loss[c->steps - 1] / 0.693147, uni = dt_text_unigram_bits(t);
    char verdict[256];
    snprintf(verdict, sizeof verdict, "last loss %.3f nats = %.2f bits a byte: %s the "
             "unigram entropy (%.2f bits)%s", (double)res->loss[c->steps - 1], bits,
             bits < uni ? "below" : "not below", uni, bits < uni - 0.5 ? ": it predicts "
             "from context" : bits < uni ? ", but not by much" : ": train longer (--steps)");
    print_wrapped(verdict);
    if (c->mode == DT_MODE_MOE) {
        print_wrapped("(no sample: sampling runs the dense GPT, whose blocks have no "
                      "experts to route to)");
        return;
    }
    enum { PROMPT = 16, N = 200 };
    int prompt[PROMPT], out[N], at = 0, len;
    while (at < t->n - 1 && !isalpha(t->tok[at]))    /* from the text's first letter */
        at++;
    len = t->n - at < PROMPT ? t->n - at : PROMPT;
    for (int i = 0; i < len; i++)
        prompt[i] = t->tok[at + i];
    dt_gpt_sample(&c->gpt, res->params, prompt, len, N, 0.8f, c->seed, out);
    printf("sampled at temperature 0.8 after \"");
    for (int i = 0; i < len; i++)
        putchar(isprint(prompt[i]) ? prompt[i] : '?');
    printf("\":\n  ");
    for (int i = 0, col = 2; i < N; i++, col++)      /* within 78 columns */
        if (out[i] == '\n' || col == 78) {
            printf(out[i] == '\n' ? "\n  " : "\n  %c", isprint(out[i]) ? out[i] : '?');
            col = out[i] == '\n' ? 1 : 2;
        } else {
            putchar(isprint(out[i]) ? out[i] : '?');    /* bytes, not characters */
        }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size();
    dt_train_config c;
    dt_train_defaults(&c);
    make_usage(&c);
    c.tp = c.pp = 1;
    struct driver d = {.examples = 4096, .features = 32, .classes = 10};
    parse(argc, argv, &c, &d);
    dt_check_output("--dump", d.dump, 0);          /* before the banner, not after */
    dt_check_output("--checkpoint", c.checkpoint_dir, 1);
    c.on_device = dt_device() == DT_CUDA;

    dt_dataset set = { 0 };
    dt_text text = { 0 };
    if (c.kind == DT_MODEL_GPT) {
        load_text(&d, c.seed, &text);
        c.text = &text;
    } else {
        load_data(&d, c.seed, &set);
        c.data = &set;
        c.model.in = set.features;
        c.model.out = set.classes;
    }
    char why[256];
    if (dt_train_check(&c, n, why, sizeof why))
        dt_usage_error(usage, why);
    check_sizes(&c);
    dt_train_env_check(&c, NULL, NULL);     /* the test hooks, before anything is printed */
    c.on_step = print_step;
    c.ctx = &d;

    /* ==== the run ==== */
    if (c.kind == DT_MODEL_GPT) {
        const dt_gpt_config *g = &c.gpt;
        dt_printf0("train: %s on %d rank%s, GPT of %d block%s of %d heads, width %d: %zu "
                   "parameters\n", dt_mode_name(c.mode), n, n == 1 ? "" : "s", g->layers,
                   g->layers == 1 ? "" : "s", g->heads, g->embed, nparams(&c));
        dt_printf0("%d steps of %d sequences of %d bytes, %s lr %g, %s\n", c.steps, c.batch,
                   g->seq, c.optim.kind == DT_SGD ? "sgd" : "adam", (double)c.optim.lr,
                   precision_name(c.precision));
        dt_printf0("text: %s (%d bytes); the loss of a model that\nignores context (the "
                   "entropy of its byte frequencies): %.2f bits a byte = %.2f nats\n",
                   text.source, text.n, dt_text_unigram_bits(&text),
                   dt_text_unigram_bits(&text) * 0.693147);
    } else {
        char shape[64];              /* 32-96x3-10: in, 3 hidden layers of 96, out */
        int L = c.model.layers;
        if (L > 1)
            snprintf(shape, sizeof shape, "%d-%dx%d-%d", c.model.in, c.model.hidden, L - 1,
                     c.model.out);
        else
            snprintf(shape, sizeof shape, "%d-%d", c.model.in, c.model.out);
        dt_printf0("train: %s on %d rank%s, MLP %s (%s), %zu parameters\n",
                   dt_mode_name(c.mode), n, n == 1 ? "" : "s", shape,
                   c.model.act == DT_RELU ? "relu" : "gelu", nparams(&c));
        dt_printf0("%d steps of batch %d, %s lr %g, %s, %d examples of %s data\n", c.steps,
                   c.batch, c.optim.kind == DT_SGD ? "sgd" : "adam", (double)c.optim.lr,
                   precision_name(c.precision), set.n,
                   d.data_dir ? "IDX" : "synthetic");
    }
    dt_print_devices();                         /* "device: cpu on ranks 0-3" */
    if (!c.on_device) {
        char blas[160];
        dt_blas_describe(blas, sizeof blas);
        dt_printf0("matrix products: %s\n", blas);
    }
    dt_train_result res;
    dt_train(&c, MPI_COMM_WORLD, &res);

    /* ==== the summary: time, bytes, memory per rank ==== */
    char a[32], b[32], p[32], g[32], o[32], w[32], which[64];
    int f = d.first_step;              /* books.c times the steps after the first trained */
    if (f + 1 < c.steps)
        snprintf(which, sizeof which, "mean of steps %d..%d", f + 1, c.steps);
    else if (f + 1 == c.steps)
        snprintf(which, sizeof which, "step %d", c.steps);
    else
        snprintf(which, sizeof which, "one step, warm-up included");
    dt_printf0("time per step: %.3f ms (%s, slowest rank); compute %.3f ms\n",
               res.seconds_per_step * 1e3, which, res.compute_seconds * 1e3);
    dt_printf0("bytes sent: at most %s by a rank; per rank: sent, peak memory, and the\n"
               "seconds spent waiting for other ranks (in dtlab's waits):\n",
               dt_format_bytes((double)res.bytes_sent_max, a, sizeof a));
    dt_printf0("  rank        sent      params       grads   optimizer      waited\n");
    snprintf(w, sizeof w, "%.3f s", res.wait_seconds);
    dt_printf_ordered("  %4d  %10s  %10s  %10s  %10s  %10s\n", dt_rank(),
                      dt_format_bytes((double)res.bytes_sent, b, sizeof b),
                      dt_format_bytes((double)res.peak_params, p, sizeof p),
                      dt_format_bytes((double)res.peak_grads, g, sizeof g),
                      dt_format_bytes((double)res.peak_optim, o, sizeof o), w);
    if (c.on_device)
        print_device_books(&res);
    if (dt_rank() == 0)
        print_wrapped(res.summary);
    if (c.kind == DT_MODEL_GPT && dt_rank() == 0)
        print_sample(&c, &text, &res);
    int ok = d.dump ? dump(d.dump, &res) : 1;

    /* ==== teardown ==== */
    dt_train_result_free(&res);
    dt_data_free(&set);
    dt_text_free(&text);
    dt_finalize();
    return ok ? 0 : 1;
}
