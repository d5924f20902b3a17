/* Internal to the p2p layer: the mailboxes (mailbox.c) and the CUDA IPC calls they use
 * (ipc.cu). See p2p.h ("transports") for what a user sees, mailbox.c for how it works. */
#ifndef DT_MAILBOX_H
#define DT_MAILBOX_H

#include <mpi.h>
#include <stddef.h>
#include "ipc.h"
#include "p2p.h"

/* dt_init, after MPI_Init and the GPU's choice: sets up the mailboxes of this host's
 * ranks (collective over local, the ranks of this host). mode: DT_P2P or NULL. */
void dti_mb_init(MPI_Comm local, const char *mode);
void dti_mb_fini(void);         /* dt_finalize: IPC mappings closed, then memory freed */
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

/* What a truncated message most likely means, for both transports' messages. */
#define DTI_TOO_LONG "a message was longer than its receive buffer: do all ranks pass " \
                     "the same count and datatype?"

/* p2p.c's, for the mailbox's waits: */
/* The polling loop's limits: t0 when the wait began; src_w, dst_w the world ranks still
 * waited for (a message from src_w, dst_w to free a slot; -1 none). Dies past a limit. */
void dti_p2p_poll(double t0, int src_w, int dst_w);
int dti_p2p_world_rank(int peer, MPI_Comm comm);
void *dti_p2p_staging(int slot, size_t nbytes);
/* A copy between any two buffers; one with the GPU is traced (d2h, h2d or copy) */
void dti_p2p_copy(void *dst, const void *src, size_t nbytes);

#endif /* DT_MAILBOX_H */
