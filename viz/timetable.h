/* Training timetables: the picture the papers draw, as a pure function of a trace. No
 * SDL, no MPI: built from the events of a dv_model (a trace that build/train or a lesson
 * wrote, or one synthesised from lib/schedule for a built-in schedule: a pipeline, ddp).
 *
 * One row per rank (a pp stage is a rank), or per thread of a rank where the trace
 * records several (dt_event.thread: dp-threads' master and its replicas' threads), time
 * left to right, two lanes per row:
 *   compute  one block per compute event, labelled by what it is: "F3" (forward of
 *            micro-batch 3: pp, and hybrid with stages, where the events of a stage's
 *            layers in one operation, one right after the other, make one block), "B2", "F L1" (forward of layer 1, no
 *            micro-batches), "F2 L1" (micro-batch 2 of layer 1: ddp's --accum), "B L1",
 *            "opt", "loss", other phases by name ("sum"). pp reads its operations'
 *            marks too: a compute event inside a "weights" mark (zb-h1's W, the weights'
 *            gradient, whose events say "backward") is "W3"; where a stage runs several
 *            model chunks (interleaved: the marks name virtual stages c = jP + s, j
 *            the rank's chunk), the chunk's letter follows: "F3b" is micro-batch 3
 *            through the stage's chunk 1, as dt_pp_draw_v writes it
 *   comm     one block per piece of communication, named by what it is for:
 *            "bucket 2" (a DDP bucket's allreduce), "AG L1" / "RS L1" (FSDP's allgather
 *            and reduce-scatter of layer 1), "free L1" (FSDP drops the gathered layer:
 *            an instant), "AG upd L1" (ZeRO-1/2 gathers the updated shards), "f L1" /
 *            "g L1" / "gather L1" (tensor parallel), "dispatch", "combine" ... (moe),
 *            "act 3" / "grad 3" (pp's activations and gradients of micro-batch 3; an
 *            exchange, one sendrecv, is one block "grad 0 + act 2": what it received,
 *            then what it sent), "weights", "gradients" (the parameter server), or the
 *            collective's name ("allreduce_rd") when nothing more is known.
 *            A mark that spans communication is the block, and the collective calls
 *            inside it on its rank are part of it; an instant mark with no call inside
 *            (older traces' "ddp bucket") names the call that follows it. Without
 *            marks, one collective call on one rank is one block. Blocks of the comm
 *            lane may overlap: hybrid's DDP thread reduces a bucket while tp's
 *            allreduces run. Where the trace records how its messages travelled
 *            (dt_event.via), the block shows it after its label where it fits:
 *            "bucket 2 · shm", "act 3 · ipc", "AG L1 · mpi+shm".
 * Waiting. The k-th send from a to b of a coll is matched with the k-th receive on b
 * from a of that coll (MPI keeps order per pair). A receive whose send began later
 * waits from its begin to the send's begin (or its own end); a send whose receive was
 * posted later waits likewise. Those stretches, merged per block, are dv_tt.waits, and
 * their length each block's wait.
 * Between rows, pp's messages are arrows from the sending rank to the receiving one.
 * Anything not covered is idle. dp-threads' waits for the interpreter lock ("lock-wait"
 * marks) are "lock" blocks of the waiting thread's comm lane, all of them waiting
 * (dv_tt.waits), counted in dv_tt_step.lock, not as communication.
 *
 * Rows. dv_tt.rows lists (rank, thread) in order: each rank's main thread (thread 0),
 * then the threads its events name, by number; a trace without threads has row r =
 * rank r. A block, a wait and an arrow's ends know their row; the measures still add
 * up per rank (a rank's comm is hidden behind compute on any of its threads).
 *
 * Steps. Every block belongs to one training step: the step its compute events record;
 * communication takes the step of the mark that names it (ddp, fsdp, tp, moe), else
 * the step of the last event on its rank, begun at or before it, that records one
 * (compute, a pipeline operation, a step mark, a named mark; before any, the first of
 * them; a rank with none uses every rank's; a trace with none: step 1). So the loss's
 * reduce after the optimizer stays in its step, and broadcasts before the first step
 * join it. Steps are numbered as the trace numbers them (train counts from 1);
 * dv_tt.steps[] lists those present, in order, with the measures below.
 *
 * The training mode comes from the trace's "# train ..." header (dt_trace.train) when
 * there is one, else from what its events look like: pipeline messages, or pipeline
 * marks of two stages or more: pp; ddp marks: ddp; tp marks, or allreduce_rd calls
 * beside train compute: tp; two of these three: hybrid; moe marks, or alltoall calls
 * beside compute: moe; fsdp marks, or allgather and reduce_scatter calls beside
 * compute: fsdp; events of coll dp: dp; marks of coll dp-threads: dp-threads; else "".
 *
 * The header against the events. The "# train" line is what train was told; the
 * events are what it did. Where the line says what the events contradict, the events
 * win and dv_tt.disagree says so in one sentence (dtviz prints it and the picture
 * shows it): the mode (when the events show another one: pipeline operations, ddp
 * buckets, fsdp, tp, moe, dp or dp-threads marks of a mode the line does not name;
 * hybrid may show pp's, ddp's and tp's; a pp line over events without pipeline
 * operations), pp's stages and micro-batches (against the pipeline marks' distinct
 * stages and micro-batches), the schedule (a 1F1B interleave under "gpipe", none under
 * "1f1b" with two micro-batches or more, marks of several chunks a stage under any but
 * "interleaved", W operations under any but "zb-h1" and none under it), interleaved's
 * "virtual" (against the most chunks a stage's marks name), ranks (against the file's
 * "# ranks"), hybrid's dp x tp x pp (against the ranks), steps (an event of a later
 * step), layers (a compute event of a layer past them), dp-threads' threads (against
 * the replicas and threads the events name) and gil (interpreter events with "gil 0",
 * none with a lock). */
#ifndef DV_TIMETABLE_H
#define DV_TIMETABLE_H

#include <limits.h>
#include <string.h>

#include "model.h"

typedef enum {
    DV_TT_FORWARD, DV_TT_BACKWARD, DV_TT_OPTIMIZER, DV_TT_OTHER,  /* compute lane */
    DV_TT_WEIGHTS,          /* compute lane: zb-h1's W, the weights' gradient apart */
    DV_TT_COMM,                                                   /* comm lane */
    DV_TT_NKINDS
} dv_tt_kind;

/* What a comm block is for, where the measures need to know (dv_tt_step.hidden_best). */
typedef enum {
    DV_TT_ROLE_OTHER, DV_TT_ROLE_BUCKET,    /* a DDP bucket's allreduce */
    DV_TT_ROLE_GATHER, DV_TT_ROLE_RS,       /* FSDP: a layer's allgather, reduce-scatter */
    DV_TT_ROLE_LOCK                         /* dp-threads: a wait for the interpreter lock */
} dv_tt_role;

typedef struct {
    int rank;
    int thread;             /* the thread of the rank that recorded it (dt_event.thread) */
    int row;                /* its row: the index of (rank, thread) in dv_tt.rows */
    int lane;               /* 0 compute, 1 communication */
    dv_tt_kind kind;
    double t0, t1;          /* t1 == t0 for an instant (FSDP's free) */
    int step;               /* the training step, as the trace numbers it */
    int micro;              /* the micro-batch (pp; ddp --accum; tp's marks), -1 none */
    int layer;              /* the layer, the bucket (ddp) or -1 */
    int chunk;              /* pp with several model chunks a stage (interleaved): the
                             * stage's chunk j of the operation (virtual stage jP + s),
                             * its letter in the label; -1 otherwise */
    int call;               /* the dv_model call this communication belongs to, -1 none */
    double nbytes;          /* bytes this rank sent in it (comm), 0 for compute */
    double wait;            /* seconds of [t0, t1] spent waiting for a peer (comm) */
    dv_tt_role role;        /* comm: what it is for; compute: DV_TT_ROLE_OTHER */
    unsigned vias;          /* comm: the transports its sends and receives name, as
                             * dv_msg.vias (drawn after the label: "bucket 2 · shm");
                             * 0 none recorded */
    char label[24];         /* e.g. "F3", "bucket 2", "AG L1" */
} dv_tt_block;

typedef struct {
    int rank, row;
    double t0, t1;          /* a stretch of a comm block spent waiting for a peer (or,
                             * in a lock block, for the interpreter lock) */
} dv_tt_wait;

typedef struct {
    int rank, thread;       /* a row: a rank's thread, 0 its main thread */
} dv_tt_row;

typedef struct {
    int src, dst;           /* sending and receiving rank (stage) */
    int src_row, dst_row;   /* their rows (the threads that sent and received) */
    double t0, t1;          /* the send's begin, the receive's end */
    int step, micro;        /* the sending block's step; the micro-batch, -1 unknown */
    char what;              /* 'A' activations (forward), 'G' gradients (backward). An
                             * exchange is read from the pipeline operation around it on
                             * its rank: inside a forward what arrives is activations
                             * and what leaves gradients, inside a backward the reverse;
                             * without one, activations are those sent to a higher rank */
} dv_tt_arrow;

typedef struct {
    int step;               /* as the trace numbers it */
    double t0, t1;          /* from its first block's begin to its last block's end */
    double compute;         /* seconds of compute blocks, summed over ranks */
    double comm;            /* seconds of comm blocks, summed over ranks */
    double hidden;          /* seconds of comm that overlap compute on the same rank */
    double waiting;         /* seconds of comm spent waiting, summed over ranks */
    double lock;            /* dp-threads: seconds threads waited for the interpreter
                             * lock, summed over threads (not in comm) */
    double c0, c1;          /* its first compute block's begin, its last one's end */
    double bubble;          /* pp (and hybrid with stages): the share of the ranks' time
                             * in the step that is not compute, 1 - compute / (N (c1 -
                             * c0)) with N ranks (P for pp): the pipeline's flush to
                             * flush, from the step's first compute (stage 0's first
                             * forward) to its last (its last backward and optimizer),
                             * so that waiting for the step before does not count;
                             * -1 for other modes */
    double bubble_model;    /* pp: dt_pp_bubble_v of the schedule (tb = tw = 1: a B and
                             * a W take a forward's time; unknown schedule: dt_pp_bubble,
                             * GPipe's and 1F1B's (P-1)/(M+P-1)); -1 otherwise */
    int stash, stash_model; /* pp: the most activations a stage held in the step, counted
                             * as dv_tt_stash counts them, and dt_pp_peak_stash_v's most
                             * (stage 0's); -1 unknown (stash_model: not pp, an unknown
                             * schedule, or a shape lib/schedule does not run) */
    int messages, messages_model;  /* pp: the pipeline messages (arrows) sent in the
                             * step, and the sum over stages of dt_pp_messages_v; -1 as
                             * stash_model */
    double hidden_share;    /* hidden / comm; -1 without communication */
    double hidden_best;     /* the share an overlap could hide at best, -1 unknown;
                             * summed over ranks, each rank's: ddp: every bucket but the
                             * last one reduced (whose backward ends the step), at most
                             * the backward's time; fsdp: every gather but the first
                             * (prefetched one layer ahead) and every reduce-scatter but
                             * the last (behind the next layer's backward), at most the
                             * compute's time. Without marks, ddp's allreduce calls are
                             * its buckets, fsdp's allgather and reduce_scatter calls its
                             * gathers and reduce-scatters */
} dv_tt_step;

/* pp: from time t on, rank holds the activations of `held` micro-batches (chunk
 * micro-batches where a stage has several chunks) of step `step`
 * (an index into dv_tt.steps). dv_tt_stash searches these. */
typedef struct {
    int rank, step;
    double t;
    int held;
} dv_tt_held;

typedef struct dv_tt {
    char mode[16];          /* "pp", "ddp", "fsdp", "tp", "dp", "hybrid", "moe", "" */
    char settings[160];     /* the trace's "# train" line after the mode, "" if none */
    char disagree[320];     /* where the "# train" line and the events disagree, one
                             * sentence ending "...; drawn as the events show", "" when
                             * they agree (see the top) */
    int schedule;           /* pp: lib/schedule's number, 0 GPipe, 1 1F1B, 2
                             * interleaved, 3 zb-h1, -1 unknown (from the header, else
                             * interleaved when a rank's marks name several chunks,
                             * zb-h1 when they hold W operations, 1F1B when a rank runs
                             * a forward after a backward of its step, GPipe when none
                             * does and M >= P) */
    int v;                  /* pp: model chunks a stage (interleaved's v: the header's
                             * "virtual", else the most chunks a rank's marks name), 1
                             * for the other schedules; 0 for other modes */
    int stages, micro;      /* pp, hybrid: P and M (from the header, hybrid's "pp P",
                             * else the distinct stages of the pipeline marks (their
                             * distinct chunks over v) and their distinct
                             * micro-batches), else 0 */
    int nranks;
    dv_tt_row *rows;        /* by rank, then thread; every rank has its thread 0 */
    int nrows;              /* nranks or more */
    dv_tt_block *blocks;    /* grouped by row, then lane, ordered by t0 */
    int nblocks;
    dv_tt_wait *waits;      /* ordered by row, then t0 */
    int nwaits;
    dv_tt_arrow *arrows;    /* ordered by t0 */
    int narrows;
    dv_tt_step *steps;      /* in step order */
    int nsteps;
    double t_begin, t_end;  /* the span of every block (t_end > t_begin) */
    unsigned vias;          /* every block's vias together: the transports the trace
                             * records, 0 none (the legend then says nothing of them) */
    int slots;              /* times are slots (a built-in schedule: m->from_trace 0),
                             * not seconds */
    /* built with the rest for the queries below (owned; read them through those) */
    int *lane_first;        /* row r's lane l: blocks [lane_first[2r+l], lane_first[2r+l+1]) */
    int *lane_reach;        /* per block: the block of its lane, up to it, that ends last */
    int *step_order;        /* step indexes by t0 */
    int *step_reach;        /* per step_order entry: the step up to it that ends last */
    dv_tt_held *held;       /* by rank, then t */
    int nheld;
} dv_tt;

/* 1 when t is a training trace: a "# train" header, or compute events of coll "train". */
int dv_tt_is_training(const dt_trace *t);

/* Builds tt from m's trace and calls; tt keeps no pointer into m. A comm block's call is the dv_model call of its collective whose span holds its
 * events on that rank. Returns 0, or -1 with a sentence in err (out of memory; not a
 * training trace), tt then empty. Never crashes on any trace dv_model_build accepted;
 * O(E log E) for E events. */
int dv_tt_build(dv_tt *tt, const dv_model *m, char *err, size_t errlen);
void dv_tt_free(dv_tt *tt);

/* The timetable's axis: time t is shown as (t - dv_tt_axis_base(tt)) * dv_tt_axis_scale(tt)
 * dv_tt_axis_unit(tt): ms from the trace's first block, or slots of a built-in. */
static inline double dv_tt_axis_base(const dv_tt *tt) { return tt->slots ? 0 : tt->t_begin; }
static inline double dv_tt_axis_scale(const dv_tt *tt) { return tt->slots ? 1 : 1e3; }
static inline const char *dv_tt_axis_unit(const dv_tt *tt) { return tt->slots ? "slots" : "ms"; }

/* The index into tt->steps of the step whose span holds time t (the one begun last
 * where several do; the nearest when none does), -1 when there are no steps. */
int dv_tt_step_at(const dv_tt *tt, double t);

/* The micro-batches whose activations rank (a pp stage) holds at time t, in the step
 * that rank is running at t (steps overlap across ranks: the last stage may begin step
 * 2 while the first finishes step 1): those whose first forward block has begun by t,
 * less those whose last backward or W block has also ended by t (zb-h1 frees them at
 * W, as lib/schedule counts). Where a stage runs several chunks (interleaved), each
 * (micro-batch, chunk) counts apart: chunk micro-batches, as dt_pp_peak_stash_v counts.
 * 0 for modes other than pp and hybrid with stages. */
int dv_tt_stash(const dv_tt *tt, int rank, double t);

/* The block of row's lane (0 compute, 1 comm) that covers time t ([t0, t1], the one
 * begun last where several do), or -1. A row is a rank where the trace has no threads. */
int dv_tt_block_at(const dv_tt *tt, int row, int lane, double t);

/* The name of row (an index into tt->rows) into buf (always terminated): "rank r", or
 * for a rank with threads "rank r main" and "rank r thread k"; dp-threads names them
 * "master" and "replica k" (thread k+1), "rank r master" ... with several ranks; pp
 * names ranks "stage s". short_ 1: the short form ("r0 t2", "rep 2", "s3"). */
void dv_tt_row_name(const dv_tt *tt, int row, int short_, char *buf, size_t len);

/* One line with step s's measures (s indexes tt->steps) beside their models, into buf
 * (always terminated, cut to len), e.g.
 *   pp:        "step 2 of 2: bubble 41% measured over 4 stages, 27% = (P-1)/(M+P-1)
 *               at P=4, M=8; stash peak 4, 4 = min(P,M); 48 messages, 48 = 2M(P-1)"
 *               (interleaved: "... = (P-1)/(vM+P-1) at P=4, M=8, v=2 ..."; the
 *               stash and messages where the schedule is known)
 *   ddp, fsdp: "step 2 of 2: communication 2.1 ms (38% of it waiting), 64% hidden
 *               behind compute; at best 88% (times summed over 3 ranks)"
 *   others:    "step 2 of 2: compute 3.2 ms, communication 1.1 ms (20% of it waiting),
 *               5% hidden behind compute (times summed over 2 ranks)"
 * (hybrid with stages: the bubble, then its communication). Times are summed over
 * ranks, and counted in slots for a built-in schedule (tt->slots); "of 2" is the last
 * step's number. "" for an s out of range. */
void dv_tt_describe_step(const dv_tt *tt, int s, char *buf, size_t len);

/* ==== built-in training schedules ==== */

/* The training schedules dtviz draws without a trace: the pipelines "gpipe", "1f1b",
 * "interleaved" and "zb-h1" (indexes 0..3, lib/schedule's schedule numbers), then "ddp"
 * (DV_TRAIN_DDP), in the order the 'a' key cycles them. NULL-ended. */
extern const char *const dv_train_algos[];
#define DV_TRAIN_DDP 4
int dv_train_algo_index(const char *name);      /* -1 if unknown */

/* A built-in pipeline: lib/schedule's schedule (0..3), P stages, M micro-batches, v
 * model chunks a stage (interleaved; 1 for the others). */
typedef struct { int schedule, stages, micro, v; } dv_pp_shape;

/* Synthesises into t what `train --mode pp --schedule S --stages P --micro M [--virtual
 * v]` records for one training step (step 1), on the clock of dt_pp_timetable_v with
 * tb = tw = 1 (one slot = one time unit: a forward 1 slot, a backward 2, zb-h1's B and
 * W 1 each): a "# train mode pp schedule S [virtual v] stages P micro M" header, program
 * S, a step mark at 0 on every stage, a pipeline mark (chunk: the virtual stage jP + s;
 * zb-h1's W: phase "weights") and a compute event (layer = the virtual stage; phase
 * forward or backward, W's too, as pp.c records them) over every operation of
 * dt_pp_order_v, its input received (an instant) as it begins and its output sent (an
 * instant) as it ends, to the rank of the next virtual stage (none within a rank: P =
 * 1). Grouped by rank, ordered by t0. No communication time: the measured bubble is
 * dt_pp_bubble_v's. Returns 0, or -1 with a sentence in err (a schedule not 0..3, P
 * outside 1..DV_MAX_RANKS, M outside 1..64, v outside 1..26 or not 1 outside
 * interleaved (dt_pp_valid)); t is then empty. */
int dv_train_pp_trace(dv_pp_shape s, dt_trace *t, char *err, size_t errlen);

/* dv_train_pp_trace, then dv_model_build, with times counted in slots (from_trace 0)
 * and a title ("interleaved, 4 stages, 8 micro-batches, 2 chunks a stage"). Returns 0,
 * or -1 with err. */
int dv_model_train_pp(dv_model *m, dv_pp_shape s, char *err, size_t errlen);

/* The same for GPipe and 1F1B alone (algo 0 or 1, v = 1; any other algo is refused:
 * ddp has dv_train_ddp_trace, interleaved and zb-h1 dv_train_pp_trace). */
int dv_train_algo_trace(int algo, int stages, int micro, dt_trace *t, char *err,
                        size_t errlen);
int dv_model_train_algo(dv_model *m, int algo, int stages, int micro, char *err,
                        size_t errlen);

/* The built-in DDP step: N ranks, L layers in B buckets, C slots of allreduce per layer
 * of a bucket, the allreduces overlapped with backward or not (lib/schedule.h, "DDP
 * buckets"). */
typedef struct { int ranks, layers, buckets, comm, overlap; } dv_ddp_shape;
#define DV_DDP_DEFAULT \
    ((dv_ddp_shape){ .ranks = 3, .layers = 6, .buckets = 3, .comm = 1, .overlap = 1 })

/* Synthesises into t what `train --mode ddp` records for one step (step 1) on every
 * rank, on the clock of dt_ddp_timetable (one slot = one time unit): a "# train mode ddp
 * buckets B layers L overlap on|off ranks N" header, program "ddp", a step mark at 0, a
 * compute event per layer's forward and backward (layer = the layer) and one for the
 * optimizer; for each bucket b a "ddp bucket" mark (chunk b, lo..hi its elements, 65536
 * floats a layer) over its allreduce's slots, holding what the library's ring allreduce
 * over N ranks records (dv_algo_trace's ring-allreduce on the bucket, its 2(N-1) steps
 * spread evenly over those slots). Grouped by rank, ordered by t0. The timetable built
 * from it measures hidden_share = dt_ddp_hidden / (CL) and hidden_best =
 * dt_ddp_hidden_best / (CL). Returns 0, or -1 with a sentence in err (N outside
 * 1..DV_MAX_RANKS, L outside 1..64, B outside 1..L, C outside 1..16: at 0 the
 * allreduces would be instants, nothing to see; overlap not 0 or 1); t is then empty. */
int dv_train_ddp_trace(dv_ddp_shape s, dt_trace *t, char *err, size_t errlen);

/* dv_train_ddp_trace, then dv_model_build, with times counted in slots and a title
 * ("ddp, 3 ranks, 6 layers in 3 buckets, allreduce 1 slot a layer, overlap on"). Returns
 * 0, or -1 with err. */
int dv_model_train_ddp(dv_model *m, dv_ddp_shape s, char *err, size_t errlen);

/* ==== internal: shared by timetable.c and train_algos.c ==== */

/* Reads into tt the mode, settings, schedule, stages and micro-batches of t: the "# train"
 * line where the events agree with it, else what the events look like, and where they
 * disagree tt->disagree (see the top); scratch holds t->n ints.
 * *micro_labels = 1 when compute events name several micro-batches. Returns 1 when
 * compute is labelled as pp's ("F3"): pp, and hybrid with more than one stage. */
int dvi_tt_mode(dv_tt *tt, const dt_trace *t, int *scratch, int *micro_labels);

/* From tt->blocks (in their order): tt->steps with their measures, and what the
 * queries search (lane_first ... held). 0, or -1 out of memory. */
int dvi_tt_measure(dv_tt *tt);

/* A sort key: by k0, k1, k2, then t, then idx (which also makes qsort stable). */
typedef struct { int k0, k1, k2, idx; double t; } dvi_key;
int dvi_key_cmp(const void *a, const void *b);

/* A coll or phase field (char[32]) equal to lit. */
static inline int dvi_is(const char *name, const char *lit) { return strncmp(name, lit, 32) == 0; }

/* The micro-batch e names (lo..hi = m..m+1), -1 none. */
static inline int dvi_micro(const dt_event *e)
{ return e->lo >= 0 && e->lo < INT_MAX && e->hi == e->lo + 1 ? (int)e->lo : -1; }

/* A mark of one pipeline operation (coll pipeline, phase forward, backward or, zb-h1's
 * W, weights). */
static inline int dvi_pipe_op(const dt_event *e)
{
    return e->kind == DT_EV_MARK && dvi_is(e->coll, "pipeline") &&
           (dvi_is(e->phase, "forward") || dvi_is(e->phase, "backward") ||
            dvi_is(e->phase, "weights"));
}

/* A mark that names communication: not a call, a pipeline operation or a step. */
static inline int dvi_named_mark(const dt_event *e)
{ return e->kind == DT_EV_MARK && !dvi_is(e->phase, "call") && !dvi_is(e->coll, "pipeline") && !dvi_is(e->coll, "train"); }

#endif /* DV_TIMETABLE_H */
