/* Traces: what p2p, the reductions and (later) the training loops did, and when.
 *
 * Turned on by `--trace FILE` or DT_TRACE=FILE (read by dt_init, which refuses a FILE
 * rank 0 cannot write, or --trace '', with status 2 before the run; DT_TRACE= empty is
 * off). Each rank keeps its events in memory; dt_finalize gathers them to rank 0, which
 * writes one text file:
 *
 *     # dtlab-trace 3
 *     # ranks 4
 *     # program 08_ring_allreduce
 *     # columns t0 t1 rank kind peer coll phase step chunk lo hi nbytes via thread
 *     0.000153 0.000161 0 send 1 allreduce_ring reduce-scatter 0 3 75 100 100 shm 0
 *     ...
 *
 * A training run (dt_train) adds "# train TEXT" after "# program": what it trained, as
 * "mode M" and then "key value" pairs (see "What training records" below), e.g.
 *
 *     # train mode pp schedule 1f1b stages 4 micro 8 layers 8 hidden 1024 batch 512
 *             steps 2 ranks 4 precision fp32 optimizer sgd        (one line in the file)
 *
 * One event per line, fields separated by single spaces:
 *   t0 t1   begin and end, seconds since the common start: one instant of rank 0's
 *           clock, taken in dt_init (ranks on other hosts estimate their clock's offset
 *           by round trips to rank 0), printed with 9 decimals
 *   rank    the rank that recorded the event
 *   kind    send | recv | reduce | copy | d2h | h2d | compute | mark
 *           (d2h from the GPU to the host, h2d back: a staging copy of device data
 *           around a send or receive, or one of dt_memcpy's, which has coll "memcpy":
 *           see "Copies between host and GPU" below)
 *   peer    the other rank of a send or recv, -1 otherwise
 *   coll    the collective or program part, e.g. allreduce_ring, bcast_tree, train,
 *           memcpy ("-" if none)
 *   phase   e.g. reduce-scatter, allgather, fold, forward ("-" if none)
 *   step    the algorithm's step, -1 if none
 *   chunk   the chunk moved or reduced, -1 if none
 *   lo hi   its element range [lo, hi) in the collective's buffer (0 0 if none)
 *   nbytes  bytes moved or reduced
 *   via     the transport that moved a send's or recv's bytes (lib/p2p.c picks one per
 *           message): mpi (host data through MPI), staging (device data through pinned
 *           host buffers and MPI), shm (a shared-memory mailbox between ranks on one
 *           host), ipc (a CUDA IPC device mailbox between ranks sharing a GPU); "-" for
 *           other kinds, and for messages whose transport was not recorded
 *   thread  which thread of the rank recorded it: 0 the rank's main thread (the one
 *           that called dt_init), k > 0 a thread the program numbered k with
 *           dt_trace_thread (dp-threads: replica k-1's thread is thread k), at most
 *           DTI_TRACE_THREAD_MAX
 * Lines are grouped by rank and ordered by t0 within a rank. Lines starting with '#'
 * are comments; unknown header lines are ignored, so later versions can add some
 * ("# train" came that way: version 1 readers without it skip it).
 *
 * Versions. A header line can come without a new version; a column cannot: a reader
 * that splits lines into 12 fields would refuse every event of a 13-field file with a
 * puzzling message. So the via column made version 2, the thread column version 3,
 * and the version says the columns:
 *   1   t0 .. nbytes (12 fields)              read as before, every via "-", thread 0
 *   2   t0 .. nbytes via (13 fields)          read as before, every thread 0
 *   3   t0 .. nbytes via thread (14 fields)   what dtlab writes now
 * This reader takes all three (an old trace is all main thread: one row per rank in
 * the viewer, as it always was); an older reader refuses a newer file by its first
 * line ("trace format version '3'; this reader knows versions 1 to 2"). The "# columns"
 * line, when present, must be the one of the file's version.
 *
 * The reader and the Chrome export need no MPI, so the viewer can use them.
 *
 * ==== Copies between host and GPU (lib/buf.c) ====
 *
 * Every copy that dt_memcpy, dt_memcpy_input or dt_memcpy_number makes between host
 * and GPU is one event, beside its count in the device books (buf.h): kind d2h or
 * h2d by its direction, coll "memcpy", phase what it carried, as the books count it:
 *
 *   phase    made by            what
 *   tensor   dt_memcpy          tensor data (weights, activations, gradients): none
 *                               in the steps after the first when they stay on the GPU
 *   batch    dt_memcpy_input    the batch on its way up
 *   number   dt_memcpy_number   a number the host needs (a loss, a flag, a count)
 *
 * peer -1, step -1, chunk -1, lo hi 0 0, via "-", nbytes the bytes copied, thread the
 * copying thread's; t0 and t1 around the call, which returns once the copy is done:
 * after the work the thread queued on its stream before it (cuda.h), whose time the
 * event then holds too. They belong to no collective (the calling thread's context is
 * left as the collective set it), so they need no column of their own: a version 3
 * reader takes them as any other. Not recorded: copies between two device buffers or
 * two host buffers (so a run on the CPU has none), and the numbers the CUDA files read
 * back themselves (dti_cuda_read_number: the books count them, the trace does not).
 * dttrace sums them by phase, and counts those in the steps the books count (all but
 * the first) again.
 *
 * ==== What training records (lib/parallel) ====
 *
 * The header line "# train TEXT": "mode M" first, then "key value" pairs, single
 * spaces, written once by rank 0: a trace describes one training run, set by dt_train
 * of the first run over every rank of MPI_COMM_WORLD that is recorded (a serial
 * reference on MPI_COMM_SELF, and a run while recording is paused, leave it alone; a
 * program that trains several runs pauses all but one, dt_trace_pause). Keys by mode:
 *
 *   pp      schedule gpipe|1f1b, stages P, micro M (micro-batches per step: --micro
 *           times --accum)
 *   ddp     bucket_kb K, overlap on|off, compress none|fp16|int8|sign (sign: feedback
 *           on|off)
 *   fsdp    zero 1|2|3, offload on|off, prefetch on|off
 *   tp      tp T, tp_style megatron|allgather
 *   hybrid  dp D, tp T, pp P (and cp C with the GPT's --cp); then the keys of the
 *           parts it has: with P > 1 pp's
 *           (schedule, stages = P, micro), with D > 1 bucket_kb and overlap, with
 *           T > 1 tp_style
 *   dp      async K, server shared|dedicated (rank 0 computes too, or only serves)
 *   moe     experts E, topk k, capacity F, groups G, aux_loss A
 *   dp-threads  threads T, gil G (0: no lock)
 *   serial, ddp, tp, hybrid without stages: accum K when K > 1
 * then for every mode: layers L hidden H batch B steps S ranks N precision
 * fp32|fp16|bf16 optimizer sgd|adam; the GPT (--model gpt) says "model gpt" before
 * them, its layers are its units (the embeddings, the blocks, the head: L+2) and hidden
 * its width, and with --recompute "recompute full|selective" follows hidden. (Pairs
 * that would take the line past 191 characters are left out, the last first; real runs
 * are far from it.)
 *
 * The events. step is the training step s in all of them (from 1, as training counts);
 * "micro m" means lo..hi = m..m+1 for micro-batch m (moe: token group m), or 0 0 where
 * the run has none (fsdp, dp).
 *
 *   coll      phase             kind      chunk   lo..hi       what
 *   train     step              mark      -1      0 0          step s begins (an instant,
 *                                                              every rank)
 *   train     forward,backward  compute   layer   micro        work on one layer (the
 *                                                              GPT: its unit)
 *   train     forward-PART,     compute   unit    micro        the GPT: a part of a
 *             backward-PART                                    unit, PART attn or mlp
 *                                                              (a block's halves: forward
 *                                                              attn then mlp, backward
 *                                                              mlp then attn),
 *                                                              recompute (backward's
 *                                                              forward again, --recompute
 *                                                              full), moe (moe: the
 *                                                              expert layer in place of
 *                                                              the MLP, ln2 with it);
 *                                                              the embeddings and the
 *                                                              head are whole units
 *   train     loss, sum,        compute   -1 [2]  micro, 0 0   the loss; dp's server
 *             optimizer                                        adding the gradients up;
 *                                                              the update
 *   pipeline  forward,backward  mark      stage   micro        one pipeline operation,
 *                                                              from its receive to the
 *                                                              end of its compute
 *   pipeline  activations,      send,     micro   micro        pp's messages (exchange:
 *             gradients,        recv                           a send and a receive in
 *             exchange                                         one)
 *   ddp       bucket            mark      bucket  elements of  the bucket's allreduce
 *                                                 the grads    (ddp; hybrid's dp part)
 *   fsdp      gather            mark      layer   [1]          ZeRO-3: the layer's
 *                                                              weights allgathered
 *                                                              (--prefetch: on fsdp's
 *                                                              thread, one gather ahead)
 *   fsdp      free              mark      layer   [1]          ZeRO-3: the gathered copy
 *                                                              dropped (an instant)
 *   fsdp      reduce-scatter    mark      layer   [1]          the layer's gradients
 *                                                              summed, each rank keeping
 *                                                              its shard
 *   fsdp      gather-updated    mark      layer   [1]          ZeRO-1/2, after the
 *                                                              optimizer: the updated
 *                                                              shards allgathered
 *   tp        f                 mark      layer   micro        backward: allreduce of a
 *                                                              column-cut layer's input
 *                                                              gradient
 *   tp        g                 mark      layer   micro        forward: allreduce of a
 *                                                              row-cut layer's output
 *                                                              (the GPT: chunk its unit,
 *                                                              f and g twice a block, in
 *                                                              its attention and its MLP,
 *                                                              g again in a recomputed
 *                                                              forward; the part's
 *                                                              compute is two events, one
 *                                                              each side of the sum)
 *   tp        gather            mark      layer   micro        forward: allgather of a
 *                                                              column-cut layer's output
 *                                                              (an unpaired last layer,
 *                                                              or tp_style allgather)
 *   tp        ag, rs            mark      unit    micro        the GPT with --sp: an
 *                                                              allgather of this rank's
 *                                                              positions (a LayerNorm's
 *                                                              output; backward also the
 *                                                              stream's gradient), a
 *                                                              reduce-scatter of partial
 *                                                              sums (wo's, w2's output;
 *                                                              backward the LayerNorms'
 *                                                              input gradients)
 *   tp        ln                mark      -1      0 0          the GPT with --sp: the
 *                                                              LayerNorms' gradients
 *                                                              summed (each rank's rows'
 *                                                              part)
 *   cp        kv                mark      unit    micro        the GPT with --cp: a block
 *                                                              of keys and values passed
 *                                                              on round the ring, from
 *                                                              its send to its arrival
 *                                                              (the attention of the
 *                                                              block in hand meanwhile)
 *   cp        dkv               mark      unit    micro        backward: their gradients
 *                                                              passed on after it
 *   pp        tie               mark      -1      0 0          the GPT in stages: the
 *                                                              first and the last stage
 *                                                              summing their copies of
 *                                                              wte's gradient
 *   moe       dispatch,combine  mark      -1      0 0          forward's all-to-alls:
 *                                                              tokens to their experts,
 *                                                              outputs back
 *   moe       grad-dispatch,    mark      -1      0 0          backward's: the outputs'
 *             grad-combine                                     gradients to the experts,
 *                                                              the inputs' back
 *   dp        weights,          send,     -1      0 0          the parameter server's
 *             gradients         recv                           messages (the server
 *                                                              sends weights at the end
 *                                                              of the step that made
 *                                                              them; a worker receives
 *                                                              them in the step that
 *                                                              uses them)
 *   dp-threads replicate,       mark      replica elements of  DataParallel's master:
 *             scatter, gather,            1..T-1  the buffer   copies to and from
 *             scatter-grad,                                    replica k (weights, rows,
 *             reduce                                           outputs, their gradients;
 *                                                              reduce: k's gradients
 *                                                              added into replica 0's)
 *   train     interpret         compute   -1      replica      dp-threads --gil: a
 *                                                              thread's bookkeeping under
 *                                                              the lock; its forward and
 *                                                              backward have micro = the
 *                                                              replica
 *   dp-threads lock-wait        mark      replica replica      dp-threads --gil: a thread
 *                                                              waiting for the lock (from
 *                                                              asking to holding; waits
 *                                                              under a microsecond are
 *                                                              not recorded)
 * dp-threads records each replica's events (forward, backward, interpret, lock-wait) on
 * its own thread, thread k+1 for replica k, and the master's (the copies, loss,
 * optimizer, step marks) on thread 0.
 *   [1] the layer's weights [offset, offset + size) in the whole model (dt_mlp layout)
 *   [2] fsdp updates layer by layer: its optimizer events have chunk = the layer
 *
 * Megatron's names (tp): f is the identity in forward and an allreduce in backward; g
 * is an allreduce in forward and the identity in backward. Every mark above except
 * "step" and "free" spans the operation: t0 before it, t1 after it, recorded by the
 * rank that did it once it is done (the collectives inside record their own events
 * meanwhile); nbytes is the size of the buffer moved (the bucket, the gathered layer,
 * the allreduced activations; moe: one all-to-all's send buffer). A mark takes the
 * receive chunk of the context (dt_trace_add). */
#ifndef DT_TRACE_H
#define DT_TRACE_H

#include <stddef.h>
#include <stdio.h>

#define DT_TRACE_VERSION 3      /* written; the reader also takes 1 and 2 (Versions) */

typedef enum {
    DT_EV_SEND, DT_EV_RECV, DT_EV_REDUCE, DT_EV_COPY,
    DT_EV_D2H, DT_EV_H2D, DT_EV_COMPUTE, DT_EV_MARK, DT_EV_NKINDS
} dt_event_kind;

typedef struct {
    double t0, t1;
    int rank, peer;
    dt_event_kind kind;
    char coll[32];
    char phase[32];
    int step, chunk;
    long long lo, hi;
    long long nbytes;
    unsigned char via;      /* the transport: an index of dt_trace_via_name, 0 none */
    int thread;             /* 0 the rank's main thread, k > 0 dt_trace_thread(k)'s */
} dt_event;

const char *dt_event_kind_name(dt_event_kind kind);   /* "send", ... */
/* 1 for an event that takes part in a collective's call, as the viewer groups them:
 * sends, receives, reductions, copies and staging copies, and the call's mark; 0 for
 * the rest, dt_memcpy's copies between host and GPU (coll "memcpy") among them. */
int dt_event_in_call(const dt_event *e);

/* Transports, as the via column names them: index 0 is none ("-"), then 1 "mpi",
 * 2 "staging", 3 "shm", 4 "ipc" (the names dt_via_name in p2p.h gives). A small index
 * keeps dt_event one byte bigger, not a pointer or a name bigger. */
#define DT_TRACE_NVIA 5
const char *dt_trace_via_name(int via);          /* "-" for 0 and out of range */
int dt_trace_via_find(const char *name);         /* 0 for NULL or "-", -1 unknown */

/* ==== recording (ranks; active only when tracing is on) ==== */

/* Starts recording on this rank; dt_init calls it. path is where rank 0 writes. */
void dt_trace_open(const char *path, const char *program);
/* 1 while this rank records: tracing is on and not paused. */
int dt_trace_enabled(void);
/* Pauses recording (paused 1) or resumes it (0), so that a program that trains several
 * runs records only the one a trace should describe: while paused dt_trace_enabled()
 * is 0 and nothing is recorded, but the trace is still on, and dt_finalize still
 * merges and writes the file (collectively) with what was recorded. Call it on every
 * rank alike, from the main thread, between runs. No effect with tracing off. */
void dt_trace_pause(int paused);
double dt_trace_now(void);     /* seconds since the common start */

/* The context later events are recorded with, per thread. dt_trace_phase sets the
 * collective and phase and clears step and chunks; dt_trace_step sets the step and the
 * chunks being sent and received ([lo, hi) in elements; -1 and 0, 0 for none). Sends and
 * d2h copies take the send chunk; receives, reductions and h2d copies the receive chunk
 * (dt_memcpy's copies take neither: "Copies between host and GPU" above). */
void dt_trace_phase(const char *coll, const char *phase);
/* Numbers the calling thread k (1..DTI_TRACE_THREAD_MAX) for the events it records from
 * now on; a thread that never calls it records thread 0, the main thread's number. Call
 * it first thing in a thread the program starts, with a number no other thread of the
 * rank uses (the viewer draws one row per thread). Aborts (DT_REQUIRE) on k out of
 * range, with tracing on or off. */
void dt_trace_thread(int k);
void dt_trace_step(int step, int send_chunk, size_t slo, size_t shi,
                   int recv_chunk, size_t rlo, size_t rhi);

/* Marks the start of one collective call: a "mark" event at this instant with coll,
 * phase "call", step and chunk -1, [lo, hi) = [0, count) and nbytes = count * esize,
 * where count is the elements of the buffer the collective fills (the receive buffer:
 * n * recvcount for gather, allgather and alltoall). Every rank records one on entry to
 * every collective with count > 0, even with one rank, so a viewer can tell calls apart.
 * Leaves the context at that coll and phase "call". */
void dt_trace_call(const char *coll, size_t count, size_t esize);

/* Records one event [t0, t1] with the current context. Thread-safe. */
void dt_trace_add(dt_event_kind kind, int peer, size_t nbytes, double t0, double t1);

/* The same, with the transport that moved it: via is "mpi", "staging", "shm", "ipc" or
 * NULL for none (dt_trace_add is via NULL). Only the index is kept, so via need not
 * outlive the call. Any other name aborts (DT_REQUIRE) while tracing is on. */
void dt_trace_add_via(dt_event_kind kind, int peer, size_t nbytes, double t0, double t1,
                      const char *via);

/* What this run trains, for the "# train TEXT" header line (format above): text is
 * 1..191 printable ASCII characters, spaces allowed (copied). Any rank may
 * call it, with or without tracing on, any number of times: the last text rank 0 gave
 * is written. Returns 0, or -1 for NULL, "", a text too long or with a character out
 * of range, which is ignored (what was set before stays). Not thread-safe: call it
 * from the main thread (dt_train does, before training). */
int dt_trace_train(const char *text);

/* Called by dt_finalize on every rank: gathers the events to rank 0, which writes the
 * file. Returns 0, or 1 on every rank when the trace could not be written (rank 0 said
 * why): dt_finalize then ends the job with status 1. Collective over MPI_COMM_WORLD. */
int dti_trace_close(void);

/* Drops what was recorded, so that dti_trace_close writes nothing: a program ending on a
 * usage error leaves no trace file behind. Every rank must call it, or none. */
void dti_trace_discard(void);

/* ==== reading (no MPI) ==== */

typedef struct {
    int version;       /* the file's: 1, 2 or 3 (see Versions) */
    int nranks;
    char program[64];
    char train[192];   /* the "# train ..." header line after "# train ", "" if none */
    dt_event *ev;      /* owned; grouped by rank, sorted by t0 within a rank */
    size_t n;
} dt_trace;

/* Reads a trace file. Returns 0, or -1 with a sentence in err (file and line) for a
 * missing, truncated or malformed file, a folder, or one that is no text; t is then
 * empty and needs no free. Whatever the file, it ends soon: the first NUL byte or line
 * past DTI_TRACE_LINE_MAX refuses it unread beyond, and the lines taken are capped, so a
 * file that never ends (/dev/zero, a pipe) is refused too. A FIFO without a writer
 * blocks in the open, as it does for cat. */
int dt_trace_read(const char *path, dt_trace *t, char *err, size_t errlen);
/* The same from an open stream (left open); name is what messages call it. */
int dt_trace_read_stream(FILE *f, const char *name, dt_trace *t, char *err, size_t errlen);
void dt_trace_free(dt_trace *t);

/* A training compute event's direction, from its phase: 'F' for "forward" or
 * "forward-PART", 'B' for "backward" or "backward-PART", 0 for any other phase. *part
 * (part may be NULL) gets PART (the GPT's "attn", "mlp", "recompute", "moe"), or "" for
 * a whole layer or unit and for other phases. */
char dt_train_dir(const char *phase, const char **part);

/* Writes t as Chrome trace JSON (open it in Perfetto or chrome://tracing): one process
 * per rank, a "comm" track (send, recv, d2h, h2d) and a "compute" track (reduce, copy,
 * compute) per thread of it ("thread k comm", "thread k compute" for k > 0); an
 * event's fields go into its args ("via" only where it has one); the
 * program and the train text go into otherData. Returns 0, or -1 with a
 * sentence in err. */
int dt_trace_write_chrome(const dt_trace *t, const char *path, char *err, size_t errlen);

/* Whether a program can write its output at path, asked before the work that fills it
 * (a trace read and exported, a picture drawn): is_dir 0 for a file, 1 for a folder
 * that exists or will be made in an existing one. Returns 0; -2 with a sentence in err
 * when no file can have that name ("", or a file's name ending in '/'): a usage error;
 * -1 with a sentence in err naming path when the file system says no (its folder
 * missing or not writable, a folder where a file goes or the reverse). Creates nothing;
 * the write itself can still fail (a full disk). */
int dt_output_check(const char *path, int is_dir, char *err, size_t errlen);

/* ==== internal: shared by the writer (trace.c), the reader and the tests ==== */
/* (dti_ names are for lib/ and its tests only; programs use the functions above.)
 *
 * The writer also puts "# events N" after "# ranks": the number of event lines that
 * follow. The reader checks it when present, which catches a file cut at a line break;
 * files without it (written by hand) are read as before. */

#define DTI_TRACE_LINE_MAX 512  /* longest line the reader takes, comments too, '\n' excluded */
#define DTI_TRACE_NAME_MAX 31   /* coll, phase: 1..31 printable ASCII, no spaces */
#define DTI_TRACE_TRAIN_MAX 191 /* "# train" text: 1..191 printable ASCII, spaces too */
#define DTI_TRACE_THREAD_MAX 65535  /* the thread column: 0..65535 */

/* Formats the header lines (nevents < 0 leaves "# events" out; train NULL or "" leaves
 * "# train" out) or one event line, with its '\n', into buf. Return the length written,
 * or -1 when the line does not fit in len or in DTI_TRACE_LINE_MAX, or a field cannot
 * be written (bad kind, bad name, bad train text, time not finite). */
int dti_trace_format_header(char *buf, size_t len, int nranks, const char *program,
                            const char *train, long long nevents);
int dti_trace_format_event(const dt_event *e, char *buf, size_t len);

/* 1 when s can be a coll or phase field: 1..DTI_TRACE_NAME_MAX characters from '!' to
 * '~'. */
int dti_trace_name_ok(const char *s);

/* 1 when s can be the text of a "# train" line: 1..DTI_TRACE_TRAIN_MAX characters from
 * ' ' to '~' (dt_trace.train holds it with its NUL). */
int dti_trace_train_ok(const char *s);

/* Sorts events by rank, then t0, keeping the order of equal keys (a merge sort). */
void dti_trace_sort(dt_event *ev, size_t n);

#endif /* DT_TRACE_H */
