/* Internal to lib/: the dti_ helpers the core's files share. Not part of the API. */
#ifndef DT_INTERNAL_H
#define DT_INTERNAL_H

#include <mpi.h>
#include <stddef.h>

void dti_buf_init(void);        /* creates DT_HALF and its MPI ops (dt_init) */
void dti_buf_fini(void);
void dti_p2p_fini(void);        /* frees the staging buffers (dt_finalize) */
int dti_gpu_count(void);        /* GPUs this rank can use: 0 on the CPU or without CUDA */

/* ==== dying and stuck ranks (watch.c) ==== */

double dti_now(void);           /* seconds on a monotonic clock (CLOCK_MONOTONIC) */

/* dt_init, before MPI_Init: forks this rank's watcher, unless DT_WATCH=0 or no launcher
 * set PMI_RANK. dti_watch_signals, after MPI_Init: the fatal-signal messages, the
 * message for exit() before dt_finalize, and a sanitizer's death. */
void dti_watch_start(void);
void dti_watch_signals(void);

/* Call before explaining this rank's end on stderr. 1: print; 0: stay quiet, another
 * rank on this host has already spoken; -1: another thread of this rank is already
 * ending it. Async-signal-safe. Each rank claims once; later calls return -1. */
int dti_watch_claim(void);

/* A clean end (dt_finalize, a usage error on every rank): the watcher leaves quietly. */
void dti_watch_done(void);

/* The board of who is waiting on this host (shared memory; collective over local, the
 * ranks of the host). p2p.c marks its long waits; a timed-out wait asks whether the rank
 * it waits for is waiting too (0 when that rank is not on this host). */
void dti_watch_board_open(MPI_Comm local, int world_rank);
void dti_watch_board_close(void);
void dti_watch_waiting(int delta);
int dti_watch_is_waiting(int world_rank);

/* p2p.c: dtlab's time limits on waits, set by dt_init from the environment. start: the
 * dti_now() of dt_init; job: MPIEXEC_TIMEOUT in seconds (0: none), so that dtlab stops
 * a little before mpiexec would and can say who was waited for; per_wait: DT_TIMEOUT,
 * the longest one wait may take (0: no limit). */
void dti_p2p_limits(double start, double job, double per_wait);

/* trace.c: this thread's trace context in words ("allreduce_ring reduce-scatter step
 * 1"), or "" when none was set: what a timed-out wait was doing. */
void dti_trace_where(char *buf, size_t n);

#endif /* DT_INTERNAL_H */
