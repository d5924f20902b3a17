/* Parallel training: one model (lib/nn), trained serially or spread over ranks in every
 * mode dtlab teaches, each mode's communication written with dtlab's own collectives.
 *
 *   serial  one rank; the reference every other mode is held to
 *   dp      a parameter server: workers send gradients to the server, which updates the
 *           weights and sends them back; --async K lets workers run on weights up to K
 *           updates old (dp.c)
 *   ddp     a full replica per rank; gradients allreduced (ring) in buckets, in reverse
 *           layer order, on a communication thread while backward goes on (ddp.c)
 *   fsdp    parameters, gradients and optimizer state sharded per layer: ZeRO 1, 2, 3;
 *           --prefetch gathers the next layer on a communication thread (fsdp.c)
 *   tp      Megatron tensor parallelism: layer pairs split by columns then rows (tp.c)
 *   pp      layers cut into stages, micro-batches in GPipe or 1F1B order (pp.c)
 *   hybrid  D data-parallel replicas of P pipeline stages of T tensor-parallel ranks
 *           (hybrid.c); ddp, tp and pp are its special cases D = N, T = N and P = N
 *   dp-threads  PyTorch's DataParallel: one rank, T threads each with a replica; the
 *           master thread copies the weights out and the gradients in every step,
 *           optionally under an emulated interpreter lock (dp_threads.c)
 *
 * In fp32, every mode reaches the same weights as serial training with the same global
 * batch, to rounding: the central lesson and the central test of dtlab. fp16 (mixed.c)
 * keeps fp16 weights, activations and gradients beside fp32 master weights, with dynamic
 * loss scaling, in every mode.
 *
 * Everything here is collective over the communicator given to dt_train. */
#ifndef DT_PARALLEL_H
#define DT_PARALLEL_H

#include <mpi.h>
#include <stddef.h>
#include "buf.h"      /* dt_device_books */
#include "nn/gpt.h"
#include "nn/nn.h"
#include "prog.h"     /* dt_timing */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DT_MODE_SERIAL, DT_MODE_DP, DT_MODE_DDP, DT_MODE_FSDP, DT_MODE_TP, DT_MODE_PP,
    DT_MODE_HYBRID, DT_MODE_MOE, DT_MODE_DP_THREADS, DT_NMODES
} dt_mode;

typedef enum { DT_FP32 = 0, DT_FP16 = 1, DT_BF16 = 2 } dt_precision;
/* The model a run trains: the MLP of nn.h on a classification set, or the transformer
 * of gpt.h on a text (next-token prediction). */
typedef enum { DT_MODEL_MLP = 0, DT_MODEL_GPT = 1 } dt_model_kind;
/* The pipeline's schedules (lib/schedule.h draws each): GPipe, 1F1B, interleaved 1F1B
 * (v chunks of layers a rank, --virtual) and zero bubble's ZB-H1 (backward split into
 * the input's gradient, B, and the weights', W). */
typedef enum {
    DT_PP_GPIPE = 0, DT_PP_1F1B = 1, DT_PP_INTERLEAVED = 2, DT_PP_ZBH1 = 3
} dt_pp_schedule;
const char *dt_pp_schedule_name(dt_pp_schedule s);  /* "gpipe", "1f1b", "interleaved", "zb-h1" */
/* megatron: layer pairs, columns then rows, one allreduce each way per pair (a last
 * unpaired layer is split by columns and allgathered); allgather: every layer split by
 * columns and its output allgathered (the simpler scheme of the seeds). */
typedef enum { DT_TP_MEGATRON = 0, DT_TP_ALLGATHER = 1 } dt_tp_style;

const char *dt_mode_name(dt_mode m);           /* "serial", "dp", ... */
int dt_mode_parse(const char *s, dt_mode *m);  /* 0, or -1 for an unknown name */

/* Gradient compression for ddp (compress.c): none; fp16; int8 with a scale per chunk;
 * sign, one bit per gradient and a scale, with error feedback (what the last step's
 * compression lost is added to the next step's gradient before compressing). */
typedef enum {
    DT_COMPRESS_NONE = 0, DT_COMPRESS_FP16, DT_COMPRESS_INT8, DT_COMPRESS_SIGN,
    DT_NCOMPRESS
} dt_compress;

const char *dt_compress_name(dt_compress k);           /* "none", "fp16", ... */
int dt_compress_parse(const char *s, dt_compress *k);  /* 0, or -1 for an unknown name */
/* The model of the bytes rank (of nranks) sends to sum one bucket of count fp32
 * gradients under k: none and fp16, the ring allreduce (4 or 2 bytes a value); int8
 * and sign, compress.c's compressed allreduce. Exact: what dt_bytes_sent counts. */
size_t dt_compress_bytes(dt_compress k, size_t count, int nranks, int rank);

/* ==== dynamic loss scaling (mixed.c) ==== */

/* The loss is multiplied by `scale` before backward so that small fp16 gradients do
 * not flush to zero. A step whose gradients hold an inf or a NaN is skipped and the
 * scale multiplied by `backoff`; after `window` clean steps in a row it is multiplied
 * by `growth`. Defaults: 65536, 0.5, 2, 2000. */
typedef struct {
    float init, backoff, growth;
    int window;
} dt_scaler_config;

typedef struct {
    dt_scaler_config cfg;
    float scale;      /* what the next backward multiplies the loss by */
    int clean;        /* clean steps in a row since the last change */
} dt_scaler;

void dt_scaler_defaults(dt_scaler_config *c);
void dt_scaler_init(dt_scaler *s, const dt_scaler_config *c);
/* After a backward whose gradients did (found_inf 1) or did not overflow: returns 1
 * when the step is to be applied, 0 when it is skipped, and updates the scale. */
int dt_scaler_update(dt_scaler *s, int found_inf);

/* ==== DDP's gradient buckets (ddp.c) ==== */

/* Layer i's gradients are [off[i], off[i+1]) of a flat array of esize-byte elements.
 * Cuts layers nl-1 .. 0 (backward's order) into buckets: writes bucket_of[i] for every
 * layer and returns how many buckets (1 or more, nl >= 1). Bucket 0 holds the last
 * layers; a bucket is closed before a layer would take it past cap bytes, so a layer
 * larger than the cap is a bucket of its own. */
int dt_ddp_buckets(const size_t *off, int nl, size_t esize, size_t cap, int *bucket_of);

/* ==== one training run ==== */

/* What dt_train reports after each step, on rank 0 of its communicator. */
typedef struct {
    int step;               /* 1, 2, ... */
    float loss;             /* mean loss over the global batch */
    char extra[160];        /* the mode's own figures for this step, or "" */
} dt_step_report;

typedef struct {
    dt_mode mode;
    dt_model_kind kind;            /* DT_MODEL_MLP (the default) or DT_MODEL_GPT */
    dt_mlp_config model;           /* the MLP */
    dt_gpt_config gpt;             /* the GPT: it trains on sequences of gpt.seq tokens */
    dt_optim_config optim;
    const dt_dataset *data;        /* the MLP's: every rank passes the same set */
    const dt_text *text;           /* the GPT's: every rank passes the same text */
    int recompute;                 /* the GPT's activation recomputation: DT_GPT_KEEP
                                      (none), DT_GPT_RECOMPUTE_FULL or _SELECTIVE (gpt.h);
                                      the same weights, bit for bit */
    int sp;                        /* 1: the GPT's tensor parallelism with sequence
                                      parallelism (gpt.h's dt_gpt_cut): the LayerNorms
                                      and residual adds on 1/T of the positions */
    int cp;                        /* hybrid, the GPT: context parallelism over cp ranks
                                      (ring attention, cp.c); 0 or 1: none */
    int steps;                     /* 1 or more */
    int batch;                     /* the global batch, shared among data-parallel ranks
                                      (GPT: sequences) */
    unsigned long long seed;       /* initial weights: dt_mlp_init or dt_gpt_init(seed) */
    dt_precision precision;
    dt_scaler_config scaler;       /* fp16 only */
    int on_device;                 /* model state on this rank's GPU (dt_device()) */

    /* dp */
    int dedicated_server;          /* 1: rank 0 serves and does not compute */
    int async;                     /* K: a worker may compute on weights K updates old */
    /* ddp (and the data-parallel part of hybrid) */
    int bucket_kb;                 /* bucket size cap in KiB; default 25 (PyTorch: 25 MiB,
                                      for models a thousand times larger) */
    int overlap;                   /* 1: allreduce on a communication thread during backward */
    int accum;                     /* K micro-batches per step before one allreduce */
    /* fsdp */
    int zero;                      /* ZeRO stage 1, 2 or 3 */
    int offload;                   /* shards in host memory while computing on a GPU */
    int prefetch;                  /* ZeRO 3: the next layer's allgather on a thread of
                                      its own while this layer computes (fsdp.c) */
    /* tp */
    dt_tp_style tp_style;
    /* pp */
    int micro;                     /* micro-batches per step */
    dt_pp_schedule schedule;
    int virtual_stages;            /* interleaved: v chunks of layers a stage (1: 1F1B) */
    /* hybrid: data-parallel, tensor-parallel and pipeline sizes, D*T*P = ranks */
    int dp, tp, pp;
    /* ddp: gradients compressed before they travel (DT_COMPRESS_NONE: as they are) */
    dt_compress compress;
    /* sign: 1 (the default) keeps what compression lost and adds it to the next step's
     * gradients (error feedback); 0 drops it, to show why it is needed */
    int compress_feedback;
    /* moe (moe.c, moe.h): the MLP's layer layers/2 becomes experts (a multiple of the
     * rank count; 0: 2 per rank), each token sent to its top-k experts (1 or 2),
     * capacity factor (slots per expert per group: ceil(capacity * k * tokens of the
     * group / experts), at most the tokens of the group; tokens beyond it are dropped
     * and counted), token groups (0: one per rank; a multiple of the rank count that
     * divides the batch; a run on fewer ranks with the same groups and experts routes,
     * drops and ends with the same weights, bit for bit), and the weight of the
     * load-balancing loss (0: none). fp32 only; no checkpoints. */
    int experts, topk;
    float capacity;
    int moe_groups;
    float aux_loss;

    /* dp-threads (dp_threads.c): replicas, one thread each (1 .. 256, at most the
     * batch; default 2), and gil: 0 for none, else the share of each thread's work
     * (0 .. 0.95] spent on bookkeeping that must hold one global lock, as Python's
     * interpreter lock makes it. fp32, host memory, one rank. */
    int threads;
    float gil;

    /* A straggler, for lessons: rank slow_rank sleeps slow_ms milliseconds at the start
     * of each of its steps, as a slower GPU would (slow_ms 0: none). */
    int slow_rank;
    int slow_ms;

    /* checkpoints (checkpoint.c). Every checkpoint_every steps (and after the last
     * step) the whole training state is saved under checkpoint_dir: weights, optimizer
     * state, fp16 master weights and loss scaler, the step reached and the losses so
     * far. It is written atomically (a new step directory, then a rename of the pointer
     * to the newest), with a CRC-32 per file, each rank writing only the state no
     * lower rank holds (fsdp: every rank its shard), and a manifest. resume_dir (may
     * equal checkpoint_dir) continues from its newest checkpoint: the same weights and
     * losses as a run never stopped, bit for bit in fp32. A checkpoint written by
     * another configuration, or damaged, is refused with a message saying what is
     * wrong. NULL / 0: none. */
    const char *checkpoint_dir;
    int checkpoint_every;
    const char *resume_dir;

    /* Called on rank 0 after every step (may be NULL). */
    void (*on_step)(const dt_step_report *r, void *ctx);
    void *ctx;
} dt_train_config;

/* Fills c with the defaults the driver documents (mode serial, 4 layers of 96, ReLU,
 * SGD lr 0.05 momentum 0.9, 20 steps of batch 96, seed 1, fp32, bucket 25 KiB,
 * overlap on, accum 1, zero 3, micro 4, 1F1B, megatron). data and model.in/out are
 * left for the caller (they come from the data set). */
void dt_train_defaults(dt_train_config *c);

/* dt_train_defaults, then mode and data, the model's in and out from the data set, and
 * on_device from this rank's device (dt_device()): where most programs start. */
void dt_train_defaults_for(dt_train_config *c, dt_mode mode, const dt_dataset *data);

/* Whether c can run on nranks ranks: 0, or -1 with a sentence in why (a hidden size
 * the tp size does not divide, more stages than layers, D*T*P unequal to nranks, a
 * batch the data-parallel ranks cannot share evenly, ...). Needs no MPI. */
int dt_train_check(const dt_train_config *c, int nranks, char *why, size_t len);

/* For lessons: returns when c can run on the ranks of MPI_COMM_WORLD; otherwise it is
 * a usage error (dt_usage_error: rank 0 prints "program: cannot run on N ranks:" and
 * the reason, every rank exits with status 2). */
void dt_train_usage_check(const dt_train_config *c, const char *program);

/* The test hooks in the environment against c on MPI_COMM_WORLD's ranks: DT_TEST_KILL=R:S
 * and DT_TEST_CHECKPOINT_CRASH=K (docs/environment.md). A value that is no R:S or K, or
 * that a fresh run (no resume) never reaches, ends every rank with status 2 and two
 * lines, the mistake and where the variables are listed. Otherwise returns, with the
 * kill hook's rank and step in *kill_rank and *kill_step (-1 and 0: none; either may
 * be NULL). dt_train does it; call it first to refuse before printing anything. Every
 * rank must call it. */
void dt_train_env_check(const dt_train_config *c, int *kill_rank, int *kill_step);

typedef struct {
    int steps;
    float *loss;              /* [steps] mean loss per step, every rank */
    int *skipped;             /* [steps] 1 where fp16 skipped the step, every rank */
    float *params;            /* the final fp32 weights, whole model, rank 0 only */
    size_t nparams;
    double seconds_per_step;  /* mean over the steps after the first one trained (it
                                 warms up; step 1, or the one after a resumed step),
                                 slowest rank */
    double *step_seconds;     /* [steps] each step's time, the slowest rank's, every rank
                                 (0 for steps a resumed run did not train) */
    int first_timed;          /* the first step seconds_per_step counts (1-based) */
    size_t bytes_sent;        /* through p2p during training, this rank */
    size_t messages_sent;     /* the messages those bytes went in (dt_messages_sent) */
    size_t bytes_sent_max;    /* the largest of any rank, every rank */
    double wait_seconds;      /* this rank's time in dt_waitall during training */
    double wait_seconds_max;  /* the largest of any rank, every rank */
    double compute_seconds;   /* per step, over the steps seconds_per_step counts: the
                                 time in the compute the trace records (forward,
                                 backward, loss, optimizer), slowest rank; dp-threads:
                                 the wall time of its threads' phases and the master's
                                 loss and optimizer, not the threads' seconds added
                                 up. The floor under the step time */
    double *step_compute;     /* [steps] each step's compute, the slowest rank's, every
                                 rank (0 for steps a resumed run did not train) */
    size_t peak_params;       /* bytes held at the peak, this rank: weights (working */
    size_t peak_grads;        /*   and master copies), gradients, optimizer state */
    size_t peak_optim;
    size_t peak_acts;         /* what forward keeps for backward, allocated (micro-batch
                                 stashes, replicas' buffers), this rank */
    dt_device_books books;    /* what this rank asked of its GPU in the steps
                                 books_from..books_to (buf.h): the steps after the first
                                 trained, which allocates and warms up (or that one) */
    int books_from, books_to;
    int buckets;              /* ddp, hybrid: gradient buckets per step (0: none) */
    int stages;               /* pp, hybrid: pipeline stages (0: none) */
    double *stage_bubble;     /* [stages] the last step's measured idle fraction of each
                                 stage, rank 0 only */
    int *stage_stash;         /* [stages] the most micro-batches each stage held (in
                                 interleaved 1F1B, chunk micro-batches: 1/v of a stage's
                                 activations each) */
    size_t *stage_messages;   /* [stages] the pipeline's messages each stage sent in the
                                 last step (activations and gradients), and their */
    size_t *stage_bytes;      /* bytes, rank 0 only */
    char summary[2048];       /* the mode's own summary lines, rank 0 ("" if none) */
    /* dp-threads: the bytes the master thread copied between itself and the replicas
     * (weights out, input rows out, outputs in, output gradients out, gradients in),
     * all steps; and per step (mean over the timed steps) the seconds of the master's
     * copies, of its own serial work (loss, optimizer), of the replicas' phases
     * (forward and backward, until the last thread is done), and that a replica spent
     * waiting for the lock (mean over replicas; 0 without --gil). */
    size_t bytes_copied;
    double copy_seconds, master_seconds, replica_seconds, gil_wait_seconds;
} dt_train_result;

/* Trains c->steps steps in mode c->mode on the ranks of comm. Aborts every rank with a
 * message when dt_train_check fails. Fills r (release with dt_train_result_free). */
void dt_train(const dt_train_config *c, MPI_Comm comm, dt_train_result *r);
void dt_train_result_free(dt_train_result *r);

/* The median and quartiles of the step times seconds_per_step averages (dt_timing_of);
 * a run with one such step, or none, gives seconds_per_step with no spread. */
dt_timing dt_train_step_timing(const dt_train_result *r);
/* The same over the steps' compute (step_compute): the step time's floor. */
dt_timing dt_train_compute_timing(const dt_train_result *r);
/* Which steps that timing covers, in words for a lesson's heading: "the median of steps
 * 2..6 +- half their interquartile range", or "step 1 alone (...)". */
void dt_train_step_words(const dt_train_result *r, char *buf, size_t len);

/* The reference for lessons and tests: rank 0 of comm trains c in mode serial alone
 * (dp's options cleared, no step reports) into ref, while the other ranks wait
 * politely; ref is zeroed on them. Collective over comm. */
void dt_train_serial(const dt_train_config *c, MPI_Comm comm, dt_train_result *ref);

/* The largest |a[i] - b[i]| over rank 0's arrays (others may pass NULL), returned on
 * every rank of comm. Collective. */
double dt_params_max_diff(const float *a, const float *b, size_t n, MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* DT_PARALLEL_H */
