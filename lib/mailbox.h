/* Internal to the p2p layer: the mailboxes (mailbox.c) and the CUDA IPC calls they use
 * (ipc.cu). See p2p.h ("transports") for what a user sees, mailbox.c for how it works. */
#ifndef DT_MAILBOX_H
#define DT_MAILBOX_H

#include <mpi.h>
#include <stddef.h>
#include "ipc.h"
#include "p2p.h"

/* dt_init, after MPI_Init, the host's shared memory (hostmem.h, with a part of
 * dti_mb_part_bytes() per rank) and the GPU's choice: sets up the mailboxes of this
 * host's ranks in it (collective over local, the ranks of this host). mode: DT_P2P or
 * NULL. */
size_t dti_mb_part_bytes(void);
void dti_mb_init(MPI_Comm local, const char *mode);
void dti_mb_fini(void);         /* dt_finalize: IPC mappings closed, device memory freed */
int dti_mb_mode_ok(const char *mode);   /* 1 for auto, staging, shm, ipc */

/* 1 when this rank has mailboxes and the mode uses them: exchanges then go through
 * dti_mb_exchange, which also carries the messages that keep to MPI. */
int dti_mb_active(void);

/* What to do with a message as it arrives: copy it to buf, or (red != NULL) reduce it,
 * out[i] = own[i] op incoming[i] (the ring reduce-scatter's step), through tmp when it
 * arrives by MPI. */
typedef struct {
    const void *own;
    MPI_Datatype type;
    MPI_Op op;
    void *tmp;
} dti_mb_reduce;

/* One send and one receive at once (either may be absent: buf NULL), as p2p.c's
 * exchange. Returns after both, with the transports they took and the seconds spent
 * waiting, with nothing to do (added to *idle: dt_wait_seconds). */
void dti_mb_exchange(const void *sbuf, size_t snbytes, int dst, void *rbuf, size_t rnbytes,
                     int src, int tag, MPI_Comm comm, const dti_mb_reduce *red,
                     dt_via *svia, dt_via *rvia, double *idle);

/* DT_STAGE_KIB: device data through MPI goes in staged pieces of this many bytes (a
 * multiple of 16; default 1 MiB), 0: each message staged whole (d2h, MPI, h2d). */
void dti_p2p_stage_piece(size_t piece);

/* For the tests: stage host data too, as if it were device data, through the staging
 * buffers in pipelined pieces of piece bytes (a multiple of 16) for every message
 * larger than one piece, so the CPU runs the staging pipeline's protocol and logic.
 * 0: back to normal. Every rank must set the same. */
void dti_p2p_stage_host(size_t piece);

/* What a truncated message most likely means, for both transports' messages. */
#define DTI_TOO_LONG "a message was longer than its receive buffer: do all ranks pass " \
                     "the same count and datatype?"

/* p2p's lower half, for the mailbox's waits (p2p_wait.c) and staging (p2p_stage.c): */
/* The polling loop's limits: t0 when the wait began; src_w, dst_w the world ranks still
 * waited for (a message from src_w, dst_w to free a slot; -1 none). Dies past a limit. */
void dti_p2p_poll(double t0, int src_w, int dst_w);
int dti_p2p_world_rank(int peer, MPI_Comm comm);
/* This thread's staging buffer (slot 0 sends, 1 receives) of at least nbytes: pinned
 * with a GPU, plain memory without; and its i-th CUDA event, i < DTI_MAX_PIECES. */
void *dti_p2p_staging(int slot, size_t nbytes);
#define DTI_MAX_PIECES 64
void *dti_p2p_event(int i);
/* A staging buffer of this thread's own for one nonblocking message (p2p.c: dt_isend and
 * dt_irecv of device data), of at least nbytes, held until given back; at most
 * DTI_MAX_STAGED at once. */
#define DTI_MAX_STAGED 64
void *dti_p2p_stage_take(size_t nbytes);
void dti_p2p_stage_give(void *p);
/* 1 while dti_p2p_stage_host stages host data too (the tests) */
int dti_p2p_stage_host_on(void);
/* A copy queued on the thread's stream (dev: either side on the GPU), else a memcpy. */
void dti_p2p_copy_queue(void *dst, const void *src, size_t nbytes, int dev);
/* A copy between any two buffers; one with the GPU is traced (d2h, h2d or copy) */
void dti_p2p_copy(void *dst, const void *src, size_t nbytes);

#endif /* DT_MAILBOX_H */
