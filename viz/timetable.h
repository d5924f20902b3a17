/* Training timetables: the picture the papers draw, as a pure function of a trace. No
 * SDL, no MPI: built from the events of a dv_model (a trace that build/train or a lesson
 * wrote, or one synthesised from lib/schedule for a built-in pipeline schedule).
 *
 * One row per rank (per stage for pp), time left to right, two lanes per row:
 *   compute  blocks labelled by what they are: "F3" (forward of micro-batch 3), "B2",
 *            "F L1" (forward of layer 1, no micro-batches), "B L1", "opt", "loss"
 *   comm     one block per piece of communication, named by what it is for:
 *            "bucket 2" (a DDP bucket's allreduce), "AG L1" / "RS L1" (FSDP's allgather
 *            and reduce-scatter of layer 1), "free L1" (FSDP drops the gathered layer:
 *            an instant), "f L1" / "g L1" (tensor parallel's two allreduces), "act 3" /
 *            "grad 3" (pp's activations and gradients of micro-batch 3), "weights",
 *            "gradients" (the parameter server), or the collective's name
 *            ("allreduce_rd") when nothing more is known. The part of a block spent
 *            waiting for a peer is kept apart (dv_tt.waits) from the part moving bytes.
 * Between rows, pp's messages are arrows from the sending stage to the receiving one.
 * Anything not covered is idle.
 *
 * Steps. Every block belongs to one training step: the step its compute events record;
 * communication takes the step of the span mark that names it (ddp, fsdp, tp), else
 * the step whose compute surrounds it on that rank by time. Steps are numbered as the
 * trace numbers them (train counts from 1); dv_tt.steps[] lists those present, in
 * order, with the measures below.
 *
 * The training mode comes from the trace's "# train ..." header (dt_trace.train) when
 * there is one, else from what its events look like (pipeline marks: pp; ddp marks: ddp;
 * fsdp marks or allgather calls beside compute: fsdp; ...), else "". */
#ifndef DV_TIMETABLE_H
#define DV_TIMETABLE_H

#include "model.h"

typedef enum {
    DV_TT_FORWARD, DV_TT_BACKWARD, DV_TT_OPTIMIZER, DV_TT_OTHER,  /* compute lane */
    DV_TT_COMM,                                                   /* comm lane */
    DV_TT_NKINDS
} dv_tt_kind;

typedef struct {
    int rank;
    int lane;               /* 0 compute, 1 communication */
    dv_tt_kind kind;
    double t0, t1;          /* t1 == t0 for an instant (FSDP's free) */
    int step;               /* the training step, as the trace numbers it */
    int micro;              /* the micro-batch (pp), -1 none */
    int layer;              /* the layer, the bucket (ddp) or -1 */
    int call;               /* the dv_model call this communication belongs to, -1 none */
    double nbytes;          /* bytes this rank sent in it (comm), 0 for compute */
    double wait;            /* seconds of [t0, t1] spent waiting for a peer (comm) */
    char label[24];         /* as drawn, e.g. "F3", "bucket 2", "AG L1" */
} dv_tt_block;

typedef struct {
    int rank;
    double t0, t1;          /* a stretch of a comm block spent waiting for a peer */
} dv_tt_wait;

typedef struct {
    int src, dst;           /* sending and receiving rank (stage) */
    double t0, t1;          /* the send's begin, the receive's end */
    int step, micro;
    char what;              /* 'A' activations (forward), 'G' gradients (backward) */
} dv_tt_arrow;

typedef struct {
    int step;               /* as the trace numbers it */
    double t0, t1;          /* from its first block's begin to its last block's end */
    double compute;         /* seconds of compute blocks, summed over ranks */
    double comm;            /* seconds of comm blocks, summed over ranks */
    double hidden;          /* seconds of comm that overlap compute on the same rank */
    double waiting;         /* seconds of comm spent waiting, summed over ranks */
    double bubble;          /* pp: the share of the stages' time in the step that is not
                             * compute, 1 - compute / (P (t1 - t0)); -1 for other modes */
    double bubble_model;    /* pp: (P-1)/(M+P-1), dt_pp_bubble; -1 otherwise */
    double hidden_share;    /* hidden / comm; -1 without communication */
    double hidden_best;     /* the share an overlap could hide at best, -1 unknown:
                             * ddp: every bucket but the last one reduced (whose
                             * backward ends the step), at most the backward's time;
                             * fsdp: every gather but the first (prefetched one layer
                             * ahead), at most the compute's time */
} dv_tt_step;

typedef struct dv_tt {
    char mode[16];          /* "pp", "ddp", "fsdp", "tp", "dp", "hybrid", "moe", "" */
    char settings[160];     /* the trace's "# train" line after the mode, "" if none */
    int schedule;           /* pp: 0 GPipe, 1 1F1B, -1 unknown */
    int stages, micro;      /* pp: P and M (from the header, else from the events), or 0 */
    int nranks;
    dv_tt_block *blocks;    /* grouped by rank, then lane, ordered by t0 */
    int nblocks;
    dv_tt_wait *waits;      /* ordered by rank, then t0 */
    int nwaits;
    dv_tt_arrow *arrows;    /* ordered by t0 */
    int narrows;
    dv_tt_step *steps;      /* in step order */
    int nsteps;
    double t_begin, t_end;  /* the span of every block (t_end > t_begin) */
} dv_tt;

/* 1 when t is a training trace: a "# train" header, or compute events of coll "train". */
int dv_tt_is_training(const dt_trace *t);

/* Builds tt from m's trace and calls. Returns 0, or -1 with a sentence in err (out of
 * memory; not a training trace). Never crashes on any trace dv_model_build accepted. */
int dv_tt_build(dv_tt *tt, const dv_model *m, char *err, size_t errlen);
void dv_tt_free(dv_tt *tt);

/* The index into tt->steps of the step whose span holds time t (the nearest when none
 * does), -1 when there are no steps. */
int dv_tt_step_at(const dv_tt *tt, double t);

/* The micro-batches whose activations rank (a pp stage) holds at time t: forwards begun
 * minus backwards finished, within the step at t. 0 for other modes. */
int dv_tt_stash(const dv_tt *tt, int rank, double t);

/* The block of rank's lane that covers time t, or -1. */
int dv_tt_block_at(const dv_tt *tt, int rank, int lane, double t);

/* One line with the step's measures beside their models, e.g.
 * "bubble 41% measured, 27% = (P-1)/(M+P-1) with P=4, M=8" or
 * "communication 2.1 ms, 64% hidden behind compute (at best 88%)". */
void dv_tt_describe_step(const dv_tt *tt, int s, char *buf, size_t len);

/* ==== built-in training schedules ==== */

/* The pipeline schedules dtviz draws without a trace: "gpipe", "1f1b". NULL-ended. */
extern const char *const dv_train_algos[];
int dv_train_algo_index(const char *name);      /* -1 if unknown */

/* Synthesises into t what `train --mode pp --schedule S --stages P --micro M` records for
 * one training step (step 1), on the clock of dt_pp_timetable with a backward of 2 slots
 * (one slot = one time unit): a "# train mode pp schedule S stages P micro M" header,
 * pipeline marks and compute events for every operation of lib/schedule's order, and
 * the activations and gradients as sends and receives at the slot boundaries. Returns 0,
 * or -1 with a sentence in err (P outside 1..DV_MAX_RANKS, M outside 1..64). */
int dv_train_algo_trace(int algo, int stages, int micro, dt_trace *t, char *err,
                        size_t errlen);

#endif /* DV_TIMETABLE_H */
