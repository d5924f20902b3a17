/* Internal to lib/: the dti_ helpers the core's files share. Not part of the API. */
#ifndef DT_INTERNAL_H
#define DT_INTERNAL_H

#include <mpi.h>
#include <stddef.h>
#include "core.h"
#include "trace.h"

void dti_buf_init(void);        /* creates DT_HALF (dt_init) */
void dti_buf_fini(void);
void dti_ops_init(void);        /* creates DT_HALF's MPI ops (dt_init; ops.c) */
void dti_ops_fini(void);
void dti_p2p_fini(void);        /* the mailboxes and staging buffers (dt_finalize) */
void dti_p2p_stage_fini(void);  /* this thread's staging buffers (p2p_stage.c) */
int dti_gpu_count(void);        /* GPUs this rank can use: 0 on the CPU or without CUDA */

/* This rank's facts: dt_init (init.c) finds them, core.c's accessors (core.h) read them. */
typedef struct {
    int rank, size, local_rank, local_size;
    dt_device_kind device;
    int gpu;                /* the GPU this rank uses, -1 on the CPU */
    int pick;               /* the local rank that picks it (dt_gpu_local_rank) */
    const char *pick_from;
    int gpu_count;          /* GPUs visible, 0 on the CPU */
    int polite;
    int launched;           /* an MPI launcher started this process (dt_launched) */
    char name[128];
} dti_facts;
extern dti_facts dti_me;

/* ==== scratch for the collectives (buf.c) ====
 *
 * A collective that needs a temporary (an incoming segment, a partner's buffer) takes it
 * from this thread's scratch instead of allocating and freeing it on every call: on a
 * GPU, cudaFree waits for the whole device, which would stall the compute that DDP's
 * communication thread is meant to overlap.
 *
 * Each thread has its own slots (DDP's communication thread and the main thread never
 * share one), each slot a host and a device buffer, grown on demand and kept: freed when
 * the thread ends, the main thread's by dt_finalize (dti_scratch_fini).
 *
 * Slot ownership: two users of one slot must never be live at once in one thread. A
 * collective that calls another uses other slots than its callee:
 *
 *     slot                 owner                                     calls
 *     DTI_SCRATCH_SEG      dti_ring_reduce_scatter: one segment      -
 *     DTI_SCRATCH_WORK     dt_reduce_scatter_block: the whole        dti_ring_reduce_scatter
 *                          buffer the ring works on
 *     DTI_SCRATCH_PEER     allreduce naive/rd: the partner's data;   -
 *                          reduce: a child's partial result
 *     DTI_SCRATCH_TREE     gather, scatter: the subtree's blocks;    -
 *                          reduce: its own partial result;
 *                          alltoall: the copy of its input
 *
 * (dt_allreduce_ring calls the ring reduce-scatter, SEG, and the allgather, no scratch.)
 * A step hook may itself call a collective (hook.c): while it runs, dti_scratch_nest(1)
 * switches the thread to a second set of slots, so the caller's buffers stay valid. */
enum { DTI_SCRATCH_SEG, DTI_SCRATCH_WORK, DTI_SCRATCH_PEER, DTI_SCRATCH_TREE,
       DTI_SCRATCH_SLOTS };

/* At least nbytes of this thread's slot, on the GPU when like is a device pointer, else
 * on the host. The contents are undefined. Valid until the same slot (same place) is
 * asked for again by this thread at the same nesting level; growing frees the old
 * buffer, which is safe because every dtlab operation is complete when it returns. */
void *dti_scratch(int slot, size_t nbytes, const void *like);
/* +1 on entering a step hook, -1 on leaving it: the slots a nested collective uses. */
void dti_scratch_nest(int delta);
/* Frees the calling thread's scratch (dt_finalize, for the main thread). */
void dti_scratch_fini(void);

/* ==== dying and stuck ranks (watch.c) ==== */

double dti_now(void);           /* seconds on a monotonic clock (CLOCK_MONOTONIC) */

/* dt_init, before MPI_Init: forks this rank's watcher, unless DT_WATCH=0 or no launcher
 * set PMI_RANK. dti_watch_signals, after MPI_Init: the fatal-signal messages, the
 * message for exit() before dt_finalize, and a sanitizer's death, naming this rank of
 * size. */
void dti_watch_start(void);
void dti_watch_signals(int rank, int size);

/* Call before explaining this rank's end on stderr. 1: print; 0: stay quiet, another
 * rank on this host has already spoken; -1: another thread of this rank is already
 * ending it. Async-signal-safe. Each rank claims once; later calls return -1. */
int dti_watch_claim(void);

/* A clean end (dt_finalize, a usage error on every rank): the watcher leaves quietly. */
void dti_watch_done(void);

/* The board of who is waiting on this host, in the head of the memory the host's ranks
 * share (hostmem.h; dt_init makes it dti_watch_board_bytes(local_size) large and then
 * opens the board). p2p.c marks its long waits; a timed-out wait asks whether the rank
 * it waits for is waiting too (0 when that rank is not on this host). */
size_t dti_watch_board_bytes(int local_size);
void dti_watch_board_open(int local_rank, int local_size);
void dti_watch_board_close(void);
void dti_watch_waiting(int delta);
int dti_watch_is_waiting(int world_rank);
/* p2p.c notes a message this rank sends to itself; a timed-out wait asks whether the
 * rank it waits for (or itself) did (0 when that rank is not on this host). */
void dti_watch_sent_to_self(void);
int dti_watch_has_sent_to_self(int world_rank);

/* p2p_wait.c: dtlab's time limits on waits, set by dt_init from the environment. start: the
 * dti_now() of dt_init; job: MPIEXEC_TIMEOUT in seconds (0: none), so that dtlab stops
 * a little before mpiexec would and can say who was waited for; per_wait: DT_TIMEOUT,
 * the longest one wait may take (0: no limit). */
void dti_p2p_limits(double start, double job, double per_wait);
/* p2p_wait.c: dt_waitall without the log of messages (p2p.c adds it), for the files
 * below p2p.c that wait for MPI requests of their own (the trace's merge); the seconds
 * a wait took, counted into dt_wait_seconds, and their reset (dt_bytes_reset). */
void dti_p2p_wait(int n, MPI_Request *reqs);
void dti_p2p_waited(double seconds);
void dti_p2p_wait_reset(void);

/* trace_ctx.c: this thread's trace context in words ("allreduce_ring reduce-scatter
 * step 1"), or "" when none was set: what a timed-out wait was doing. */
void dti_trace_where(char *buf, size_t n);
/* trace_ctx.c: fills e's collective, phase, step, chunk, element range and thread from
 * this thread's context (the send's chunk for a send or d2h, as e->kind says, else the
 * receive's). */
void dti_trace_context(dt_event *e);
/* trace.c: records one event [t0, t1] of kind with coll and phase of its own (valid
 * names: DTI_TRACE_NAME_MAX, trace.h; aborts on others while recording), peer -1, step
 * and chunk -1, range 0 0, no transport, and the calling thread's number: for a copy
 * that belongs to no collective (buf.c's host<->GPU copies, coll "memcpy"), made while
 * a collective's context may be set. Leaves the context as it was. Thread-safe; nothing
 * while dt_trace_enabled() is 0. */
void dti_trace_add_named(dt_event_kind kind, const char *coll, const char *phase,
                         size_t nbytes, double t0, double t1);

#endif /* DT_INTERNAL_H */
