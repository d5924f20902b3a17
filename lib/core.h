/* Start-up and shut-down, who this rank is, and where its data lives.
 *
 * Every dtlab program begins with dt_init and ends with dt_finalize. Between them,
 * each rank owns one device: a GPU chosen by its local rank on the host (modulo the
 * number of GPUs), or the CPU when the user asked for it or, by default, when no GPU is
 * found. */
#ifndef DT_CORE_H
#define DT_CORE_H

#include <mpi.h>
#include <stddef.h>
#include "errors.h"

typedef enum { DT_CPU = 0, DT_CUDA = 1 } dt_device_kind;

/* Initialises MPI with MPI_THREAD_MULTIPLE (DDP's communication thread needs it), makes
 * MPI errors return to the caller so dtlab's checks can explain them, picks this rank's
 * device and opens the trace. Reads two options from argv, without removing them:
 * `--device cpu|cuda` (or DT_DEVICE) and `--trace FILE` (or DT_TRACE); programs list
 * them in their own getopt_long table with DT_COMMON_LONGOPTS (prog.h). A bad --device
 * value prints a message and exits with status 2 on every rank. `cuda` means a GPU: if
 * some rank has none, every rank exits with status 1 and one says why (in CUDA's
 * words). Only the default, neither given, falls back to the CPU where there is no GPU,
 * and says so once on stderr. Returns 0.
 *
 * When a rank dies or hangs, dtlab ends the whole job soon with one line that names the
 * rank (lib/watch.c, lib/p2p.c): before MPI_Init, dt_init forks a small watcher process
 * per rank (DT_WATCH=0: none) that speaks if its rank dies without a word (SIGKILL, the
 * out-of-memory killer); fatal signals and exit() before dt_finalize are reported by the
 * rank itself; and waits have time limits: under MPIEXEC_TIMEOUT=T they stop a little
 * before mpiexec would (T - max(3, T/10) s after dt_init), and DT_TIMEOUT=S stops any
 * one wait longer than S seconds (DT_TIMEOUT=0: no limits), naming the rank waited for. */
int dt_init(int *argc, char ***argv);

/* Merges the trace (if any) into one file, frees staging buffers, finalises MPI, and
 * lets the watcher go quietly. */
int dt_finalize(void);

int dt_rank(void);          /* rank in MPI_COMM_WORLD */
int dt_size(void);          /* ranks in MPI_COMM_WORLD */
int dt_local_rank(void);    /* rank among the ranks on this host (MPI_Comm_split_type) */
int dt_local_size(void);    /* ranks on this host */
/* 1 when an MPI launcher started this process (PMI_RANK or PMIX_RANK set: mpiexec,
 * a PMIx launcher); 0 for a process started alone, or by torchrun (a job of one rank). */
int dt_launched(void);

dt_device_kind dt_device(void);       /* where this rank's buffers live by default */
int dt_cuda_device(void);             /* the GPU this rank uses, -1 on the CPU */
/* The local rank that picks the GPU (GPU = it mod the GPU count), and in *from (may be
 * NULL) where it came from: under an MPI launcher (PMI_RANK or PMIX_RANK set) MPI's own
 * rank among the ranks on this host; else torchrun's LOCAL_RANK where it is set (each
 * process torchrun starts is an MPI job of one rank); else 0. Lesson 01. */
int dt_gpu_local_rank(const char **from);
const char *dt_device_name(void);     /* "cpu" or "cuda:N (name)" */

/* Polite waiting (the default): dtlab's p2p waits with MPI_Testall and sched_yield, so
 * that more ranks than cores still make progress. DT_WAIT=block (or this call with 0)
 * waits with MPI_Waitall instead, which spins inside MPICH: only for comparison. */
void dt_set_polite(int polite);
int dt_polite(void);

#endif /* DT_CORE_H */
