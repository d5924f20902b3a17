/* Internal to lib/parallel: what its files share. Not part of the API (parallel.h is).
 *
 *   run.c     dt_train: checks, the run's bookkeeping (memory, time, bytes, reports),
 *             the final weights; dispatches to a mode
 *   model.c   this rank's part of the MLP: a range of layers, each whole or cut for
 *             tensor parallelism; forward and backward of one micro-batch
 *   tp.c      the tensor-parallel cuts: shapes, and the f and g operators
 *   mixed.c   fp16: conversions, overflow checks, the loss scaler, master-weight updates
 *   pp.c      the pipeline schedules (with one stage: plain gradient accumulation)
 *   ddp.c     gradient buckets allreduced on a communication thread
 *   hybrid.c  the training loop of serial, ddp, tp, pp and hybrid (D x T x P)
 *   dp.c      the parameter server
 *   dp_threads.c  DataParallel: one rank, a replica per thread, a master thread
 *   fsdp.c    ZeRO 1/2/3
 *   moe.c     mixture of experts: the gate, top-k routing with capacity, the experts'
 *             all-to-all, the load-balancing loss; the MLP around its MoE layer
 *   moe_gpt.c the GPT around its MoE layers (the MLP of every other block)
 *   compress.c  ddp's gradient compression (fp16, int8, sign with error feedback)
 *   checkpoint.c  saving the training state, and resuming from it
 *
 * Conventions: steps count from 1 (data batch step-1); element counts are size_t;
 * buffers of the model live where the run says (r->where), and only mixed.c helpers,
 * lib/nn and dt_memcpy touch them, so the same code runs on the CPU and the GPU. */
#ifndef DT_PARALLEL_INTERNAL_H
#define DT_PARALLEL_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include "core.h"
#include "parallel.h"

/* ==== the run (set up by run.c; its books: books.c) ==== */

enum { DTI_PARAMS = 0, DTI_GRADS = 1, DTI_OPTIM = 2, DTI_ACTS = 3, DTI_NHELD = 4 };

typedef struct {
    const dt_train_config *cfg;
    MPI_Comm comm;              /* dt_train's communicator (a duplicate) */
    int rank, size;
    dt_device_kind where;       /* where model state lives */
    dt_train_result *res;
    size_t nparams;             /* of the whole model */
    size_t held[DTI_NHELD];     /* bytes of params, grads, optimizer state and the */
    size_t peak[DTI_NHELD];     /* activations forward keeps, on this rank (dti_held) */
    dt_scaler scaler;           /* fp16 */
    float grad_scale;           /* the scale the last step's gradients were made with */
    int updates;                /* optimizer steps taken (skipped fp16 steps excluded) */
    double t_begin;             /* start of the current step */
    double t_sum;               /* step times, steps first+1.. */
    double c_sum;               /* their compute (dti_compute_event), in seconds */
    unsigned long long c_begin; /* the compute count at the current step's start */
    double c_wall;              /* the current step's compute as wall time, NAN: the
                                   compute count's (dti_step_compute) */
    int first;                  /* the first step this run trains: 1, or the step after
                                   the checkpoint it resumed from */
    dt_device_books books0;     /* the device books as the counted steps began (books.c) */
    struct dti_ckpt *ckpt;      /* checkpoints (checkpoint.c); NULL: none */
    MPI_Comm made[6];           /* communicators the mode made from comm, nmade of */
    int nmade;                  /* them: a checkpoint refusal frees them (checkpoint.c) */
} dti_run;

/* calloc of host memory that never returns NULL (at least one byte; out of memory
 * aborts through dti_die). For the modes' bookkeeping, not model state. */
void *dti_calloc(size_t n, size_t size);

/* Allocates nbytes (zeroed) where the run's model state lives (on the host when
 * host is 1), counted under what (DTI_PARAMS, ...) for the peak. dti_free gives it back
 * and uncounts it; it takes the same nbytes. */
void *dti_alloc(dti_run *r, int what, size_t nbytes, int host);
void dti_free(dti_run *r, int what, void *p, size_t nbytes);
/* Counts nbytes more (add 1) or fewer (0) held under what, for memory allocated
 * otherwise (activations); safe from several threads, as dti_alloc and dti_free are. */
void dti_held(dti_run *r, int what, size_t nbytes, int add);

/* Brackets every training step. dti_step_end stores the step's mean loss (which must
 * be known on rank 0 of r->comm; other ranks may pass anything) and whether it was
 * skipped, and calls cfg->on_step on rank 0 with extra (may be NULL). Not collective. */
void dti_step_begin(dti_run *r, int step);
void dti_step_end(dti_run *r, int step, float loss, int skipped, const char *extra);
/* For a mode whose threads compute at once (dp-threads): the current step's compute
 * was `seconds` of wall time, counted in place of the sum of its compute events (which
 * adds up T threads' seconds). Call between dti_step_begin and dti_step_end. */
void dti_step_compute(dti_run *r, double seconds);

/* Appends a line to the result's summary (rank 0 of r->comm keeps it; others ignore). */
__attribute__((format(printf, 2, 3)))
void dti_summary(dti_run *r, const char *fmt, ...);

/* Every rank passes a host array of nparams floats holding the final weights it owns
 * and zeros elsewhere, each weight owned by exactly one rank; rank 0 gets their sum in
 * r->res->params. Collective over r->comm. */
void dti_result_params(dti_run *r, const float *owned);

/* Records a compute event [t0, now] in the trace: coll "train", phase (forward,
 * backward, loss, optimizer, ...), step, chunk = layer (-1 for none), lo..hi = micro
 * .. micro+1 (micro -1: 0 0). t0 is a dt_trace_now(); tracing or not, the time is
 * counted into the result's compute_seconds. */
void dti_compute_event(const char *phase, int step, int layer, int micro, double t0);
/* The same for a part of a layer (a GPT block's "attn", "mlp", "recompute", "moe"; NULL:
 * the whole layer): phase "forward-attn", ... */
void dti_compute_part(const char *phase, const char *part, int step, int layer, int micro,
                      double t0);

/* A GPT unit's compute events a part at a time (gpt.h's parts; the trace's
 * "forward-attn", ...). dti_gpt_clock_part is a dt_gpt_part_fn for the unit and stage
 * calls (ctx: the clock): it records each part but the unit's last as an event from t0,
 * and starts the next from now; the last it leaves to dti_gpt_clock_end, so that the
 * caller's own work on the finished unit (fp16 rounding) counts in it. */
typedef struct {
    const char *phase;          /* "forward" or "backward" */
    int step, micro;            /* micro -1: none */
    double t0;                  /* when the part under way began */
    int last;                   /* the unit's last part, once done, until recorded */
    int done_u, done_part;      /* the part done last (before the first: forward the
                                   unit before the stage's first, backward the one
                                   after its last, part DT_GPT_UNIT) */
} dti_gpt_clock;
void dti_gpt_clock_part(int u, int part, void *clock);
void dti_gpt_clock_end(dti_gpt_clock *k, int u);

/* Marks in the trace (lib/trace.h's table of training marks): dti_mark_begin is now, or 0
 * when tracing is off; dti_mark records a mark of coll and phase for training step `step`
 * (chunk, elements [lo, hi), nbytes) spanning [t0, now], or at this instant when t0 is NAN,
 * after the collectives inside recorded their own events. Nothing when tracing is off. */
double dti_mark_begin(void);
void dti_mark(const char *coll, const char *phase, int step, int chunk, size_t lo, size_t hi,
              size_t nbytes, double t0);

/* The test hook DT_TEST_KILL=R:S (books.c): dti_test_kill_env reads it into *rank and
 * *step (-1 and 0 when unset) and returns 0, or -1 for a value that is no R:S;
 * dti_test_kill_arm(R, S) has rank R of the next run raise SIGKILL at the end of step S,
 * in a run that did not resume (dti_step_end); S 0: off. */
int dti_test_kill_env(int *rank, int *step);
/* DT_TEST_CHECKPOINT_CRASH=K (books.c) into *step (0 when unset): 0, or -1 for a value
 * that is no whole number from 1. */
int dti_test_crash_env(int *step);
void dti_test_kill_arm(int rank, int step);

/* ==== mixed precision helpers (mixed.c) ==== */

/* The element type of weights and gradients that forward and backward use: MPI_FLOAT,
 * or DT_HALF in fp16. */
MPI_Datatype dti_work_type(const dti_run *r);
size_t dti_work_size(const dti_run *r);         /* 4 or 2 bytes */
float dti_loss_scale(const dti_run *r);         /* 1 in fp32 */

/* Rounds n floats in place to the nearest fp16 value (emulating fp16 storage of
 * activations); host or device. dti_round_to: to the nearest value of type (DT_HALF,
 * DT_BFLOAT16; MPI_FLOAT: nothing). */
void dti_round_half(float *x, size_t n);
void dti_round_to(MPI_Datatype type, float *x, size_t n);
/* dst[i] = src[i] * mul, src of type (float or half); host or device, no overlap. */
void dti_to_float(const void *src, MPI_Datatype type, float *dst, size_t n, float mul);
/* dst[i] = src[i] converted to type (rounded for half). */
void dti_from_float(const float *src, void *dst, MPI_Datatype type, size_t n);
/* dst[i] += src[i], dst of type (the sum rounded to half for half). */
void dti_accumulate(void *dst, MPI_Datatype type, const float *src, size_t n);
/* 1 when any of the n values is inf or NaN, on this rank. */
int dti_nonfinite(const void *x, MPI_Datatype type, size_t n);

/* After the gradients are reduced: found is this rank's dti_nonfinite over its
 * gradients. Agrees over comm (any rank's overflow skips the step everywhere), runs the
 * scaler, and returns 1 when the optimizer should step (always in fp32). Writes the
 * scaler's part of the step's report into extra (len bytes; "" in fp32). */
int dti_scaler_decide(dti_run *r, int found, MPI_Comm comm, char *extra, size_t len);

/* One optimizer update of n weights: master (fp32) from grads (type, scaled by the loss
 * scale they were made with, r->grad_scale, which is divided out; the scaler may have
 * moved on since), with state (n * S floats); then params = master in the
 * working type. In fp32 params may be master itself (then nothing is copied). Call
 * after dti_scaler_decide returned 1; uses r->updates as the step count. */
void dti_master_step(dti_run *r, float *master, void *params, const void *grads,
                     float *state, size_t n);

/* Parameters of the whole model (dt_mlp's flat layout, the one --dump writes): count
 * runs of len parameters, the first at start, each stride after the one before (count
 * 1: one run). A list of them says which parameters a buffer of a rank's holds, in
 * order (a checkpoint region's map; dti_model_spans). */
typedef struct {
    size_t start, len, count, stride;
} dti_span;

/* ==== this rank's part of the model (model.c, tp.c) ==== */

typedef enum {
    DTI_WHOLE,       /* not cut */
    DTI_COL,         /* output features cut: W rows [lo, hi), b [lo, hi); input whole */
    DTI_ROW,         /* input features cut: W columns [lo, hi); b whole; output summed */
    DTI_COL_GATHER   /* as DTI_COL, then the outputs allgathered: output whole */
} dti_split;

typedef struct dti_model {
    const dt_mlp_config *c;  /* the MLP's shape; NULL for the GPT */
    const dt_gpt_config *g;  /* the GPT's; NULL for the MLP (model_gpt.c) */
    dt_gpt_cut cut;          /* the GPT: this rank's part of every block */
    MPI_Comm tie;            /* the GPT in stages: the first and the last stage, whose
                                two copies of wte are one weight (dti_model_tie);
                                MPI_COMM_NULL elsewhere */
    size_t tie_off;          /* where this rank's copy of wte starts in params, grads */
    int lpe;                 /* labels per example: 1 (MLP), g->seq (GPT) */
    int classes;             /* logits per label: c->out, g->vocab */
    dti_run *run;
    int l0, l1, nl;          /* units [l0, l1) (the MLP's layers; the GPT's embeddings,
                                blocks, final LayerNorm); local unit i is l0 + i */
    MPI_Comm tp;             /* tensor-parallel group; MPI_COMM_SELF when T = 1 */
    int T, t;
    dti_split *split;        /* [nl] */
    int *in, *out;           /* [nl] this rank's W_i is (out[i], in[i]) */
    int *lo, *hi;            /* [nl] the cut: rows (COL) or columns (ROW) of the full W */
    size_t *off;             /* [nl + 1] where W_i starts in params and grads; b_i follows
                                W_i; off[nl] = n */
    size_t n;                /* local weights */
    MPI_Datatype type;       /* dti_work_type */
    void *params;            /* n elements of type: the weights forward uses */
    void *grads;             /* n elements of type; backward accumulates */
    float *wf, *gf;          /* fp16: one layer's weights and gradients as floats */
    float *gx[2];            /* backward's two gradient buffers between layers */
    float *tmp;              /* tensor parallelism's gather and sum buffer */
    float *dzl;              /* backward: this rank's columns of a gathered layer's dz */
    int Bmax;
    dti_gpt_clock *clock;    /* the GPT: the clock of the forward or backward under way,
                                which tensor parallelism's sums split (model_gpt.c) */
    float *sp_buf;           /* the GPT with sequence parallelism: its collectives' */
    void *sp_wire;           /* blocks, and in fp16 the same as fp16 (model_gpt.c), */
    void *sp_ln;             /* and its LayerNorms' gradients packed for their sum */
    struct dti_cp *cp;       /* the GPT with context parallelism: its ring (cp.c) */
    /* interleaved pipelines (dti_model_init_chunks): this rank's v chunks, each a model
     * of its own units whose params and grads lie in this one's, chunk j from unit
     * chunk_nl[j] and float off[chunk_nl[j]]; v 0 for a model of one chunk */
    int v;
    struct dti_model *chunk; /* [v] */
    int *chunk_nl;           /* [v + 1] */
} dti_model;

/* Sets up layers [l0, l1) cut over the tensor-parallel group tp (MPI_COMM_SELF for
 * none) in the given style, for micro-batches of up to Bmax rows; allocates params and
 * grads (zero) where the run's model lives. */
void dti_model_init(dti_model *m, dti_run *r, int l0, int l1, MPI_Comm tp,
                    dt_tp_style style, int Bmax);
void dti_model_free(dti_model *m);
/* Copies this rank's part of the whole model's weights full (host, nparams, dt_mlp
 * layout) into dst (n floats, host or device). */
void dti_model_take(const dti_model *m, const float *full, float *dst);
/* The reverse: writes the part this rank owns of src (n floats, host or device) into
 * full (host, nparams). Parts held by several tensor-parallel ranks (ROW biases) are
 * written by t = 0 only. */
void dti_model_put(const dti_model *m, const float *src, float *full);
/* Which parameters of the whole model this rank's n floats hold, in their order, as
 * spans into out (dti_model_nspans(m) of them): their count. */
int dti_model_spans(const dti_model *m, dti_span *out);
int dti_model_nspans(const dti_model *m);
/* For a model whose first and last units share weights (the GPT's wte, which its head
 * uses too): pp_comm's first and last stage hold a copy each. dti_model_tie makes their
 * pair (collective over pp_comm; nothing when there is one stage or no shared weight);
 * dti_model_shared_sums, after the gradients are complete (and summed over the
 * data-parallel replicas), adds the two copies' gradients on both, so that both take
 * the same update (the trace's mark "pp tie" of training step `step`), and, with the
 * GPT's sequence parallelism, the tensor-parallel ranks' parts of its LayerNorms'
 * gradients (mark "tp ln"). Collective over the model's tp group and the pair. */
void dti_model_tie(dti_model *m, MPI_Comm pp_comm);
void dti_model_shared_sums(dti_model *m, int step);
/* Context parallelism (the GPT; before any activations are allocated): cp_comm's ranks
 * share every sequence, each running the model on its own positions (cp.c), Bmax
 * sequences at most at once; m->lpe becomes this rank's positions. dti_model_labels
 * writes the labels of those positions, mine (B, m->lpe), from y (B, seq). */
void dti_model_cp(dti_model *m, MPI_Comm cp_comm, int Bmax);
void dti_model_labels(const dti_model *m, const int *y, int *mine, int B);
/* After a resume, the last stage's copy of the shared weights (in w, the fp32 weights
 * in m's layout) and of their optimizer state (S floats a weight; state NULL or S 0:
 * none) from the first stage's: a
 * checkpoint maps only the first's (dti_model_spans). Collective over pp_comm's first
 * and last stage. */
void dti_model_tie_sync(dti_model *m, float *w, float *state, int S);
/* An interleaved pipeline's stage p of P: the units cut into v P equal chunks (the
 * caller checked they divide), of which this rank holds chunks j P + p, j = 0 .. v-1,
 * each a model of its own (m->chunk[j], forward and backward run on it), their weights
 * and gradients one block in chunk order (m->params, m->grads, m->off over all m->nl
 * units): to the optimizer, the gradient buckets and checkpoints, one model. */
void dti_model_init_chunks(dti_model *m, dti_run *r, int v, int P, int p, MPI_Comm tp,
                           dt_tp_style style, int Bmax);
/* Columns of the activations entering and leaving this rank's layers. */
int dti_model_in_width(const dti_model *m);
int dti_model_out_width(const dti_model *m);

/* What forward keeps for backward, for one micro-batch: x[i] (B, width in) and z[i]
 * (B, width out) of each local layer; x[nl] is the output. */
typedef struct {
    int B;
    float *mem;
    float **x, **z;
    dt_gpt_acts *gpt;           /* the GPT's instead (model_gpt.c) */
    int *tok;                   /* the GPT's tokens (B, seq), where the run lives */
    int *htok;                  /* on a GPU: the same made on the host, on their way */
    dti_run *run;               /* counted there under DTI_ACTS */
    size_t bytes;
} dti_acts;

void dti_acts_alloc(const dti_model *m, int B, dti_acts *a);
void dti_acts_free(dti_acts *a);

/* Forward of B rows x_in (B, in_width; host or device) through the local layers:
 * returns the output (B, out_width), which lives in a. In fp16 every activation is
 * rounded to fp16. Records a compute event per layer (micro for the trace). */
const float *dti_model_forward(dti_model *m, dti_acts *a, const float *x_in, int B,
                               int step, int micro);
/* Backward from dy (B, out_width): gradients accumulate into m->grads; dx (B, in_width)
 * is written unless NULL. After local layer i's gradients of this micro-batch are in,
 * calls layer_done(i, ctx) if given. */
void dti_model_backward(dti_model *m, dti_acts *a, const float *dy, float *dx, int B,
                        int step, int micro, void (*layer_done)(int i, void *ctx),
                        void *ctx);

/* Backward cut in two, as zero-bubble pipelines run it: _input is B, the gradient of
 * the input only, dx (B, in_width; NULL: none), leaving in a each layer's output
 * gradient (the MLP's where its z was; the GPT's, gpt.h's split backward); _weights is
 * W, afterwards, the weights' gradients from them, accumulated into m->grads, calling
 * layer_done(i, ctx) as each local layer's are in. Together the same products as
 * dti_model_backward, so the same bits; a holds the micro-batch until W. */
void dti_model_backward_input(dti_model *m, dti_acts *a, const float *dy, float *dx,
                              int B, int step, int micro);
void dti_model_backward_weights(dti_model *m, dti_acts *a, int B, int step, int micro,
                                void (*layer_done)(int i, void *ctx), void *ctx);

/* tp.c: how layer l of c is cut over T ranks in style s (T = 1: DTI_WHOLE). */
dti_split dti_tp_split(const dt_mlp_config *c, int l, int T, dt_tp_style s);
/* The g and f operators: the sum of n floats over the tensor-parallel group, in place
 * (as fp16 on the wire in fp16). */
void dti_tp_allreduce(dti_model *m, float *x, size_t n);
/* zloc (B, this rank's columns of a (B, width) matrix) -> z (B, width) on every rank. */
void dti_tp_allgather_cols(dti_model *m, const float *zloc, float *z, int B, int width);
/* Floats of m->tmp the two need for B rows of a layer (out, in) over T ranks. */
size_t dti_tp_scratch(int T, int B, int in, int out);
/* Copies a (rows, cols) block of es-byte elements between matrices with row strides
 * dld and sld; host or device. */
void dti_copy_block(void *dst, size_t dld, const void *src, size_t sld, int rows,
                    int cols, size_t es);

/* ==== the model a run trains, whichever it is (model.c) ==== */

int dti_units(const dt_train_config *c);        /* the MLP's layers, the GPT's L + 2 */
size_t dti_nparams(const dt_train_config *c);   /* of the whole model */
/* The initial weights of the whole model from c->seed into full (host, nparams) */
void dti_init_weights(const dt_train_config *c, float *full);
/* Floats of one example's input: the MLP's features; the GPT's seq tokens (a token's
 * number as a float, exact below 2^24) */
int dti_data_cols(const dt_train_config *c);
int dti_labels_per_example(const dt_train_config *c);     /* 1; the GPT's seq */
/* Examples [first, first + count) of the global batch of B at step (from 0): x
 * (count, dti_data_cols), y (count, dti_labels_per_example), host */
void dti_batch(const dt_train_config *c, int step, int B, int first, int count,
               float *x, int *y);

/* ==== the whole model one unit at a time (model.c), for fsdp ====
 * A mode that holds no unit's weights for long (ZeRO-3 gathers each just in time) runs
 * forward and backward unit by unit, with the unit's whole weights at hand. A unit may
 * use another's weights too (the GPT's head uses the embeddings' wte: dti_unit_tied);
 * then both are at hand, and its gradient goes to both. */
typedef struct {
    const dt_train_config *c;
    int B, fp16;                 /* fp16: a 16-bit type, fp16 or bf16 */
    MPI_Datatype type;           /* MPI_FLOAT, DT_HALF or DT_BFLOAT16 */
    dt_mlp_acts mlp;             /* the MLP's */
    float *gx[2];                /* the MLP's gradients between layers */
    const float *dy;             /* backward's gradient of the unit's output (MLP) */
    dt_gpt_acts gpt;             /* the GPT's */
    dt_gpt_cut cut;              /* its blocks whole, with the run's recomputation */
    int *tok;                    /* (B, seq), where the run lives */
    int *htok;                   /* on a GPU: the same made on the host, on their way */
    size_t kept;                 /* bytes forward keeps for backward (the books) */
} dti_unit_acts;

size_t dti_unit_size(const dt_train_config *c, int u);     /* floats of unit u */
size_t dti_unit_offset(const dt_train_config *c, int u);   /* where it starts */
int dti_unit_tied(const dt_train_config *c, int u);        /* the unit whose weights
                                                              unit u uses too, or -1 */
/* For up to B examples on the run's side (where: host or GPU); a 16-bit type (DT_HALF,
 * DT_BFLOAT16) rounds what forward keeps to it, as dti_model does */
void dti_unit_acts_alloc(const dt_train_config *c, int B, dt_device_kind where,
                         MPI_Datatype type, dti_unit_acts *a);
void dti_unit_acts_free(dti_unit_acts *a);
/* Forward of unit u of B examples (x: the batch, host, for unit 0) with its weights W
 * (and Wt, the tied unit's): returns the unit's output, the logits after the last. */
const float *dti_unit_forward(dti_unit_acts *a, int u, const float *W, const float *Wt,
                              const float *x, int B, int step);
/* Backward of unit u (last unit first; dlogits for the last, ignored otherwise):
 * gradients accumulate into dW (and dWt, the tied unit's whole gradient) */
void dti_unit_backward(dti_unit_acts *a, int u, const float *W, const float *Wt,
                       const float *dlogits, float *dW, float *dWt, int B, int step);

/* model_gpt.c: the GPT's side of dti_model (model.c hands a GPT's calls there) */
void dti_gpt_model_init(dti_model *m, dti_run *r, int l0, int l1, MPI_Comm tp, int Bmax);
void dti_gpt_model_move(const dti_model *m, float *full, float *local, int to_local);
int dti_gpt_model_spans(const dti_model *m, dti_span *sp);
void dti_gpt_model_tie_sync(dti_model *m, float *w, float *state, int S);
void dti_gpt_model_tie(dti_model *m, MPI_Comm pp_comm);
void dti_gpt_model_shared_sums(dti_model *m, int step);
/* The positions of each sequence the GPT's residual stream holds on this rank: seq,
 * or with sequence parallelism this tensor-parallel rank's */
int dti_gpt_model_rows(const dti_model *m);
void dti_gpt_model_cp(dti_model *m, MPI_Comm cp_comm, int Bmax);
/* The collectives inside a GPT unit (tensor parallelism's sum, gather and scatter,
 * context parallelism's ring) split its compute in the trace: what came before is one
 * compute event of the part under way (dti_gpt_comm_begin, which returns now and says
 * which unit, *u, and whether in a forward, *forward: 1 in forward and in a recomputed
 * forward), the collective a mark of coll and phase from t0 to now
 * (dti_gpt_comm_end), and the part's compute goes on after it. Only the time when no
 * forward or backward is under way (m->clock NULL). */
double dti_gpt_comm_begin(dti_model *m, int *u, int *forward);
void dti_gpt_comm_end(dti_model *m, const char *coll, const char *phase, int u,
                      size_t nbytes, double t0);

/* ==== context parallelism (cp.c) ==== */
typedef struct dti_cp dti_cp;
/* The ring of cp_comm's ranks for sequences of seq positions (a multiple of C), at most
 * B of them at once, H heads of d columns: this rank's positions, zig-zag where 2C
 * divides seq, else the plain cut */
dti_cp *dti_cp_new(MPI_Comm cp_comm, int seq, int B, int H, int d);
void dti_cp_free(dti_cp *p);
const int *dti_cp_positions(const dti_cp *p, int *T);
/* 1: the zig-zag cut (2C divides the sequence); 0: the plain cut */
int dti_cp_zigzag(const dti_cp *p);
/* gpt.h's attend and attend_backward for m (m->cp) */
void dti_cp_attend(dti_model *m, const float *qkv, float *y, float *lse, int B, int T,
                   int H, int d);
void dti_cp_attend_backward(dti_model *m, const float *qkv, const float *y,
                            const float *lse, const float *dy, float *dqkv, int B, int T,
                            int H, int d);
void dti_gpt_acts_alloc(const dti_model *m, int B, dti_acts *a);
void dti_gpt_acts_free(dti_acts *a);
/* The GPT's tokens of B sequences into tok (B, T), where the run lives: x (B, seq) is
 * the batch as floats, on the host; pos (NULL: 0 .. T-1) the T positions each sequence
 * gives. A tok on the GPU is written through host (B, T) and sent up as the batch
 * (dt_memcpy_input); one on the host directly (host unused, may be NULL). */
void dti_gpt_tokens(const float *x, int B, int T, int seq, const int *pos, int *host,
                    int *tok);
const float *dti_gpt_model_forward(dti_model *m, dti_acts *a, const float *x_in, int B,
                                   int step, int micro);
void dti_gpt_model_backward(dti_model *m, dti_acts *a, const float *dy, float *dx, int B,
                            int step, int micro, void (*layer_done)(int i, void *ctx),
                            void *ctx);
/* dti_model_backward_input and _weights for the GPT (gpt.h's split backward; the
 * activations allocated with m->cut.split, which zb-h1's pipelines set) */
void dti_gpt_model_backward_input(dti_model *m, dti_acts *a, const float *dy, float *dx,
                                  int B, int step, int micro);
void dti_gpt_model_backward_weights(dti_model *m, dti_acts *a, int B, int step, int micro,
                                    void (*layer_done)(int i, void *ctx), void *ctx);

/* ==== the pipeline (pp.c) ==== */

typedef struct dti_pp dti_pp;

/* The pipeline through this rank's stage: stage s = rank in pp_comm, of P = its size,
 * stages in rank order; M micro-batches of mb rows each per step, run in the order of
 * schedule. With P = 1 it is plain gradient accumulation over M micro-batches. */
dti_pp *dti_pp_new(dti_model *m, MPI_Comm pp_comm, int M, int mb, dt_pp_schedule schedule);
void dti_pp_free(dti_pp *p);

/* One step's forward and backward of M micro-batches. x (M*mb, c->in, host) is read
 * by the first stage, y (M*mb labels, host) by the last; others may pass NULL. scale
 * multiplies dlogits (loss scale / global batch). Gradients accumulate into m->grads
 * (the caller zeroes them before the step); layer_done(i, ctx) is called after the
 * LAST micro-batch's backward of local layer i. Returns the sum of the row losses on
 * the last stage, 0 elsewhere. Activations go forward and their gradients back with
 * dt_send/dt_recv on pp_comm (as fp16 in fp16). */
double dti_pp_step(dti_pp *p, const float *x, const int *y, float scale, int step,
                   void (*layer_done)(int i, void *ctx), void *ctx);

/* The last step's figures: the fraction of the step this stage sat idle (measured),
 * the most (chunk) micro-batches whose activations it held at once, and the messages
 * it sent and their bytes. Any pointer may be NULL. */
void dti_pp_stats(const dti_pp *p, double *bubble, int *peak_stash, size_t *messages,
                  size_t *bytes);

/* ==== gradient buckets (ddp.c) ==== */

typedef struct dti_ddp dti_ddp;

/* Buckets over grads (n elements of type, host or device) of nl layers, layer i at
 * [off[i], off[i+1]): consecutive layers from the last, a bucket closed before it would
 * pass cap_bytes (a layer larger than the cap is a bucket of its own). Each bucket is
 * summed over comm with dt_allreduce once backward has finished all its layers and
 * every bucket before it has gone (the same order on every rank): on a communication
 * thread while backward goes on when overlap is 1 (using a duplicate of comm); all in
 * dti_ddp_finish, after backward, when overlap is 0. Empty layers are allowed. */
dti_ddp *dti_ddp_new(void *grads, MPI_Datatype type, const size_t *off, int nl,
                     MPI_Comm comm, size_t cap_bytes, int overlap);
void dti_ddp_free(dti_ddp *d);
int dti_ddp_nbuckets(const dti_ddp *d);
/* Backward finished layer i for this step (any order; each layer once per step). */
void dti_ddp_layer_done(dti_ddp *d, int i);
/* Waits until every bucket of this step is summed; the next step may begin. */
void dti_ddp_finish(dti_ddp *d);
/* Seconds the last step spent waiting in dti_ddp_finish (communication not hidden). */
double dti_ddp_wait_seconds(const dti_ddp *d);
/* The communicator the buckets travel on: comm, or with overlap ddp's own duplicate
 * (which dti_ddp_free frees). */
MPI_Comm dti_ddp_comm(const dti_ddp *d);
/* Compression (compress.c), from r->cfg's compress and compress_feedback: once, after
 * dti_ddp_new and before dti_ckpt_start (it registers the error buffers as checkpoint
 * regions); fp32 gradients only. Returns 1 when this rank now holds state no other rank
 * has (error feedback), 0 otherwise (nothing at all for DT_COMPRESS_NONE). */
int dti_ddp_compress(dti_ddp *d, dti_run *r);
/* The last step's bytes, ratio against fp32 and |e|, for the step's report ("" without
 * compression). */
void dti_ddp_step_text(const dti_ddp *d, char *s, size_t len);
/* The summary lines of compression: bytes per step measured and by the model, the
 * ratio, the error buffers. Collective over the buckets' comm; nothing without it. */
void dti_ddp_summary(const dti_ddp *d, dti_run *r, int steps);

/* ==== gradient compression (compress.c) ==== */

/* The codecs, on host floats, no MPI. An encoded chunk of n values takes
 * dti_codec_words(k, n) 32-bit words (k fp16, int8 or sign). dti_encode encodes x (n
 * values) into out; with err (n floats, may be NULL) it encodes x + err and leaves in
 * err what the encoding lost (error feedback). dti_decode writes the n decoded values
 * to out, or adds them to it when add is 1. */
size_t dti_codec_words(dt_compress k, size_t n);
void dti_encode(dt_compress k, const float *x, size_t n, float *err, uint32_t *out);
void dti_decode(dt_compress k, const uint32_t *in, size_t n, float *out, int add);

/* A run's compression of nb buckets, bucket b at [lo[b], hi[b]) of the gradients,
 * summed over comm: scratch and, for sign with feedback, the error buffers (host, under
 * DTI_GRADS, registered as checkpoint regions). */
typedef struct dti_compressor dti_compressor;
dti_compressor *dti_compressor_new(dti_run *r, dt_compress k, int feedback,
                                   const size_t *lo, const size_t *hi, int nb,
                                   MPI_Comm comm);
void dti_compressor_free(dti_compressor *z);      /* NULL: nothing */
/* Sums bucket b, g = its hi - lo floats (host or device), over comm, compressed, in
 * place. Collective over comm, buckets in the same order on every rank. */
void dti_compressor_allreduce(dti_compressor *z, int b, float *g, size_t lo, size_t hi,
                              MPI_Comm comm);
/* Bytes of error buffers this rank keeps (0 without feedback); |e| of its worker
 * error. */
size_t dti_compressor_state_bytes(const dti_compressor *z);
double dti_compressor_error_norm(const dti_compressor *z);

/* ==== checkpoints (checkpoint.c) ==== */

typedef struct dti_ckpt dti_ckpt;

/* dt_train, before the mode sets up: checks that checkpoint_dir can be written and,
 * when resuming, that the newest checkpoint in resume_dir is whole and was written by
 * this configuration; any problem ends every rank with one sentence and exit status 2
 * (dt_usage_error). Sets r->ckpt (NULL when the run neither saves nor resumes).
 * dti_ckpt_close adds the summary lines and frees it. Both collective. */
void dti_ckpt_open(dti_run *r);
void dti_ckpt_close(dti_run *r);

/* The mode, at set-up: a region of this rank's training state (weights, optimizer
 * state, ...): name (one word, the same on every rank that holds the same part), p
 * (host or device, not owned) and nbytes. Not collective; nothing when r->ckpt is
 * NULL. Register everything the next steps read that is not rebuilt from it. */
void dti_ckpt_region(dti_run *r, const char *name, void *p, size_t nbytes);

/* The map of the region registered under name: n spans, width floats per
 * parameter (1 for weights, dt_optim_state_per_param for optimizer state). Elements
 * after the mapped ones are padding (zero when re-cut). A checkpoint can be resumed on
 * another rank count or layout only when every region has one: a region without is
 * state of this rank's own (compression's error feedback). Not collective. */
void dti_ckpt_map(dti_run *r, const char *name, int width, const dti_span *s, int n);

/* After the regions: owner is the rank whose shard holds this rank's state (this rank
 * when no lower rank holds the same; owner <= rank), which writes it. When resuming,
 * loads the regions from the owner's shard (size and CRC-32 checked, agreed over the
 * ranks), restores r->updates, the loss scaler, r->first and the losses so far, and
 * returns the step reached: the mode then rebuilds what it derives from its regions
 * (fp16 working weights, gathered layers) and trains from that step + 1. Returns 0
 * for a fresh run. Collective. */
int dti_ckpt_start(dti_run *r, int owner);

/* After step `step` is done on every rank (dti_step_end called): saves a checkpoint
 * when one is due (every checkpoint_every steps and after the last). Collective; no
 * message may be in flight between ranks. */
void dti_ckpt_step(dti_run *r, int step);

/* ==== the modes ==== */

void dti_train_hybrid(dti_run *r);   /* serial, ddp, tp, pp, hybrid */
void dti_train_dp(dti_run *r);
void dti_train_fsdp(dti_run *r);
void dti_train_moe(dti_run *r);      /* moe.c */
void dti_train_moe_gpt(dti_run *r);  /* moe_gpt.c */
void dti_train_dp_threads(dti_run *r);   /* dp_threads.c */
/* moe.c: whether c's moe settings can run on n ranks (experts a multiple of n, topk 1
 * or 2 and at most the experts, capacity > 0, groups dividing the batch, ...): 0, or
 * -1 with a sentence in why. */
int dti_moe_check(const dt_train_config *c, int n, char *why, size_t len);

#endif /* DT_PARALLEL_INTERNAL_H */
