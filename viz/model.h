/* What dtviz shows, as a pure function of the position: no SDL, no MPI.
 *
 * A model is built from a trace (lib/trace.h), either read from a file that a lesson or
 * build/train wrote, or synthesised from lib/schedule for a built-in algorithm, so both
 * go through the same code. The trace is cut into collective calls, each call into
 * frames (one step: the messages that cross at once), and each rank's buffer into cells.
 *
 *   call   one collective call, e.g. one ring allreduce, on one communicator. Found by
 *          the "call" marks that every collective records on entry (dt_trace_call).
 *          In a trace with such marks (or a "# train" header, or compute of coll
 *          "train": everything the lessons and build/train write now) only the colls
 *          that have them are cut into calls: a training mode's own point-to-point
 *          traffic (coll "pipeline", "dp") stays in the trace, for the timeline, and is
 *          no call. In traces without them (hand-written, old lessons) every transfer
 *          counts, and a rank's events start a new call when coll changes or its
 *          (phase, step) goes back. Rank r's j-th call of a coll is matched with every
 *          other rank's j-th call of that coll that it exchanges messages with, directly
 *          or through others: so calls on sub-communicators (tensor-parallel pairs, the
 *          data-parallel groups of a hybrid run) stay apart, and a rank alone on its
 *          communicator makes a call of its own. Calls are ordered by their earliest event.
 *   members the ranks of a call: those with events in it, and the peers they exchange
 *          with. N (dv_call.size) is their number, and member r's index among them, in
 *          rank order (dv_call_index), is its rank in the communicator: the one the
 *          algorithm's chunks, blocks, trees and cost model are counted in.
 *   frame  one (phase, step) of a call: phases in the order each rank runs them (the
 *          earliest begin breaks ties), steps ascending within a phase. Its messages
 *          come from the receive events (sender = peer, cells = the receiver's [lo,
 *          hi)); segments of one chunk are merged into one message per (sender,
 *          receiver, cell range). A receiver that also recorded a reduce event in the
 *          same frame adds what arrives; otherwise it copies it. A message keeps the
 *          transports its receives name (dt_event.via: trace.h).
 *   cell   a piece of the call's buffer: the boundaries of every chunk moved in the
 *          call (and, for gather, allgather and alltoall, of each member's block), at
 *          most DV_MAX_CELLS of them (more are replaced by DV_MAX_CELLS even cells).
 *          Alltoall has two buffers of that layout: the send buffer, whose block j holds
 *          the member's data for member j, and the receive buffer, whose block j gets
 *          member j's data for it; the cells and masks are the receive buffer's.
 *   mask   which ranks' contributions a cell holds: bit r for rank r. Before a call:
 *          reductions (allreduce, reduce, reduce-scatter): every cell of member r holds
 *          {r}; bcast and scatter: the root (the member that receives nothing) holds
 *          {root} everywhere, the others nothing; gather, allgather, alltoall: member r
 *          holds {r} in its own block (for a gather or scatter rooted elsewhere, blocks
 *          in the tree's order, counted from the root); anything else: a cell holds {r}
 *          when rank r sends it before it receives it. Ranks outside the call hold
 *          nothing. A message carries the sender's masks of its cells (in alltoall,
 *          {sender}: its block for the receiver). Every frame reads the masks from
 *          before the frame, so an exchange is simultaneous.
 *
 * Positions and steps, the two counters the viewer shows (dv_pos_describe words them):
 *   position  Call c with F frames has F+1 positions k = 0..F: position k shows the masks
 *             after k frames and the arrows of frame k (none at k = F). Positions are
 *             numbered across calls from 0 to npos-1, so one number says where
 *             the viewer is: "position 3 of 0..6", as dtviz --step takes it. A model
 *             without calls (one rank; a trace of compute only) has one position.
 *   step      a frame, counted from 1 within its call: at position k, k of the call's F
 *             steps are done and the arrows show the next one, step k+1 of F (none at
 *             k = F, when the call is finished). */
#ifndef DV_MODEL_H
#define DV_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "trace.h"

#define DV_MAX_RANKS 64     /* masks are 64 bits */
#define DV_MAX_CELLS 64

typedef uint64_t dv_mask;

typedef struct {
    int src, dst;           /* sending and receiving rank */
    int c0, c1;             /* the cells [c0, c1) it carries (receiver's buffer) */
    int s0, s1;             /* the cells of the sender's buffer it comes from: its send
                             * events to dst in the frame (alltoall: its send buffer's
                             * block for dst); [c0, c1) when it recorded none */
    int add;                /* 1: the receiver adds it in; 0: it copies it */
    double nbytes;          /* bytes of its receive events */
    unsigned vias;          /* the transports its receive events name: bit v for
                             * dt_event.via v (1..DT_TRACE_NVIA-1); 0 none recorded.
                             * Two bits when pieces went two ways (a small last
                             * segment by mpi beside shm ones) */
} dv_msg;

typedef struct {
    int call;               /* index into dv_model.calls */
    char phase[32];         /* as recorded, e.g. "reduce-scatter" */
    int step;               /* as recorded; -1 if none */
    double t0, t1;          /* earliest begin and latest end of its events */
    int first_msg, nmsg;    /* dv_model.msgs[first_msg .. first_msg + nmsg) */
} dv_frame;

typedef struct {
    int frame;              /* within its call, 0..nframes-1 */
    int rank;
    double nbytes;          /* the bytes of rank's send events in that frame */
} dv_sent;

typedef enum { DV_CLASS_REDUCE, DV_CLASS_ROOTED, DV_CLASS_BLOCKS, DV_CLASS_OTHER } dv_class;

typedef struct {
    char coll[32];          /* e.g. "allreduce_ring" */
    dv_class cls;
    int from_sender;        /* alltoall: a message carries {sender} (its block for the
                             * receiver), not the sender's masks of those cells */
    int root;               /* DV_CLASS_ROOTED: the rank that received nothing; else -1 */
    dv_mask members;        /* its communicator's ranks (never 0) */
    int size;               /* their number, N of the algorithm */
    int first_frame, nframes;
    int first_pos;          /* its position k = 0 */
    int ncells;             /* 1..DV_MAX_CELLS */
    long long cell_lo[DV_MAX_CELLS + 1];   /* cell c is elements [cell_lo[c], cell_lo[c+1]) */
    long long count;        /* elements in the buffer shown: cell_lo[ncells] */
    double esize;           /* bytes per element, 0 if unknown */
    dv_mask *init;          /* nranks * ncells masks before the call; owned */
    dv_sent *sent;          /* what each rank sent in each frame, by frame; owned */
    int nsent;
    double t0, t1;          /* earliest begin and latest end of its events */
    int ring_attn;          /* 1: ring attention (coll "attention_ring", below) */
    int *attn_frame;        /* ring attention: per rank and cell, the frame in which the
                             * rank's queries met that cell's keys (its reduce events),
                             * -1 never; NULL for other calls; owned */
} dv_call;

typedef struct {
    int nranks;             /* 1..DV_MAX_RANKS */
    int from_trace;         /* 0: built-in schedule (times are step numbers) */
    char title[224];        /* "ring-allreduce, 4 ranks, 4 MiB"; a training trace's settings,
                             * "train: mode pp, schedule 1f1b, stages 4, ..."; or the
                             * trace's program */
    dt_trace trace;         /* every event, for the timeline; owned */
    dv_call *calls;
    int ncalls;
    dv_frame *frames;
    int nframes;
    dv_msg *msgs;
    int nmsgs;
    int npos;               /* sum over calls of nframes + 1, at least 1 */
    double t_begin, t_end;  /* span of all events (t_end > t_begin, even when empty) */
} dv_model;

/* Builds m from t, taking t over (t is left empty, m frees it). Returns 0, or -1 with a
 * sentence in err (more than DV_MAX_RANKS ranks; out of memory), m then empty and t
 * freed. Any trace that dt_trace_read accepts either builds or fails this way: never a
 * crash, whatever its values. */
int dv_model_build(dv_model *m, dt_trace *t, char *err, size_t errlen);
void dv_model_free(dv_model *m);

/* ==== ring attention ====
 *
 * Ring attention (lesson 27, lib/nn/ringattn.c) is no collective of lib/collectives, but
 * its keys and values go round the ring as an allgather's blocks do, so the viewer
 * draws it as a call: coll "attention_ring", one phase "ring", step s = 0..N-1. Its
 * buffer is the sequence's keys and values, [0, count) its positions; member j's block
 * is its positions (the plain cut: part j of N; the zig-zag cut: parts j and 2N-1-j of
 * 2N, two chunks). At step s rank r attends its queries to the block in hand, rank
 * r-s's, recorded as reduce events (the online softmax folds the block into the
 * output: dt_attn_block_forward), one per chunk of the block; and, for s < N-1, sends
 * that block to its right and receives rank r-s-1's from its left (send and receive
 * events, one per chunk). So a rank's own block is what it attends at step 0, the
 * messages are copies (never '+'), and the last step moves nothing. dtlab's ring
 * attention is causal: query position i sees keys 0..i. */

/* What the causal mask leaves of one key cell for a rank's queries (its own block). */
typedef enum {
    DV_ATTN_NOT_YET,        /* not attended yet */
    DV_ATTN_FULL,           /* every query sees every key of the cell */
    DV_ATTN_PART,           /* some pairs are masked (the diagonal block; zig-zag's halves) */
    DV_ATTN_SKIP            /* every key is in every query's future: nothing computed */
} dv_attn;

/* The causal mask's verdict for rank r's queries (the cells of its own block, where
 * c->init holds bit r) against cell `cell`'s keys: FULL, PART or SKIP. */
dv_attn dv_attn_causal(const dv_call *c, int r, int cell);

/* Ring attention's call `call` after k frames (0..nframes), into held and done
 * (nranks * ncells each): held[r * ncells + x], the K/V rank r has in hand, {j} in the
 * cells of rank j's block (the block r received last, in a frame before k; before any,
 * its own), else 0; done[...], DV_ATTN_NOT_YET for a key cell r has not attended in
 * the first k frames, else dv_attn_causal's verdict. Nothing for other calls. */
void dv_attn_state(const dv_model *m, int call, int k, dv_mask *held, unsigned char *done);

/* ==== built-in schedules ==== */

/* The algorithms dtviz animates without a trace, in the order the 'a' key cycles them:
 * ring-allreduce, reduce-scatter, allgather, naive-allreduce, tree-bcast, tree-reduce,
 * rd-allreduce, alltoall, tree-gather, tree-scatter, then ring attention (above):
 * ring-attention (the plain cut) and ring-attention-zigzag. NULL-terminated. */
extern const char *const dv_algos[];
int dv_algo_index(const char *name);            /* -1 if unknown */
const char *dv_algo_coll(int algo);             /* e.g. "allreduce_ring" */

/* Synthesises into t the events that the library's collective records for this
 * algorithm at nranks ranks (1..DV_MAX_RANKS), root 0, on a buffer of count floats
 * (count >= 0: elements of the collective's whole buffer, as dt_trace_call records),
 * with t0 = the step's number in the call and t1 = t0 + 1. Built from lib/schedule, the
 * functions the collectives run. Returns 0, or -1 with a sentence in err. */
int dv_algo_trace(int algo, int nranks, long long count, dt_trace *t, char *err,
                  size_t errlen);

/* dv_algo_trace, then dv_model_build, and a title. */
int dv_model_algo(dv_model *m, int algo, int nranks, long long count, char *err,
                  size_t errlen);

/* ==== positions ==== */

/* Rank's index among call c's members (its rank in the communicator), -1 if it is none. */
int dv_call_index(const dv_call *c, int rank);

/* For a call of blocks (gather, allgather, alltoall): the block v (0..size-1) that holds
 * cell `cell`, block v being part v of the buffer cut into size parts (dt_chunk_bounds);
 * -1 for other calls or a cell out of range. In alltoall, send block v of a rank is its
 * data for the v-th member. */
int dv_cell_block(const dv_call *c, int cell);

/* The call and k of position pos (clamped to 0..npos-1); *call = -1 without calls. */
void dv_pos_split(const dv_model *m, int pos, int *call, int *k);
/* The time position pos stands for: its frame's t0, or the call's t1 at k = nframes. */
double dv_pos_time(const dv_model *m, int pos);
/* The last position whose time is <= t (0 if none): where a click on the timeline goes. */
int dv_pos_at_time(const dv_model *m, double t);

/* Writes into out[r * ncells + c] the masks of call `call` after k frames (0..nframes),
 * replaying from the call's init. out holds nranks * calls[call].ncells masks. */
void dv_state(const dv_model *m, int call, int k, dv_mask *out);

/* Bytes each rank sent in call `call` during its first k frames (send events), into
 * sent[0..nranks-1]. */
void dv_bytes_sent(const dv_model *m, int call, int k, double *sent);

/* What the algorithm's cost model says each rank sends in the whole call, into
 * expect[0..nranks-1], and the formula in words into text (e.g. "each rank sends
 * 2(N-1)/N x S = 6 MiB; S = 4 MiB"). Returns 1, or 0 when the coll is not one the
 * viewer knows (expect and text then empty). */
int dv_formula(const dv_model *m, int call, double *expect, char *text, size_t len);

/* Transports in words: the names of the bits of vias (dv_msg.vias), joined by '+' in
 * the order of trace.h's table ("shm", "mpi+shm"); "" for 0. */
void dv_vias_text(unsigned vias, char *buf, size_t len);

/* e's transport as a bit of such a set: 1 << e->via, 0 for none (or out of range). */
static inline unsigned dv_via_bit(const dt_event *e)
{ return e->via > 0 && e->via < DT_TRACE_NVIA ? 1u << e->via : 0; }

/* One sentence on what a phase of a collective does, for the header; "" if unknown. */
const char *dv_phase_text(const char *coll, const char *phase);

/* The sentence under the header at position pos, into buf: what the next step does (for
 * alltoall with its distance, "each rank r sends its block for rank r+2 ..."), or at the
 * end of a call what it has done; "" when the model has no calls or the coll is unknown. */
void dv_step_text(const dv_model *m, int pos, char *buf, size_t len);

#endif /* DV_MODEL_H */
