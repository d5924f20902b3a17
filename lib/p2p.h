/* Point-to-point: the one place in dtlab that moves bytes between ranks (with its
 * mailboxes, mailbox.c).
 *
 * Buffers may be on the host or the GPU. Between ranks of one host a message can go
 * through a mailbox (shared memory, or GPU memory opened with CUDA IPC: "transports"
 * below); otherwise through MPI. Debian's MPICH is not CUDA-aware, so device data that
 * goes through MPI is staged here, and nowhere else, through pinned host buffers: a
 * device-to-host copy before a send, a host-to-device copy after a receive. A message
 * larger than DT_STAGE_KIB (default 1 MiB) goes in staged pieces: a small header, then
 * each piece handed to MPI as soon as the GPU has copied it out, and copied back in as
 * soon as it arrives, so the copies overlap MPI's moving of the other pieces
 * (DT_STAGE_KIB=0: each message staged whole). Host data larger than MPI's int counts
 * goes in pieces too (up to 64 GiB).
 *
 * Waiting is polite by default: the calls post MPI_Isend/MPI_Irecv (or poll for a
 * mailbox's doorbell) and then loop on MPI_Testall with sched_yield, instead of blocking
 * inside MPICH, whose blocking calls spin. With more ranks than cores a spinning rank steals the core its peer needs; a
 * polite one gives it back. See dt_set_polite in core.h.
 *
 * A message dt_send or dt_sendrecv sends must be received by dt_recv or dt_sendrecv (it
 * may come as a mailbox's doorbell, which only they understand); dt_recv also takes
 * dt_isend's messages, which are always plain MPI.
 *
 * Every call is recorded in the trace with the context the caller set (trace.h). Calls
 * are blocking (dt_isend and dt_irecv aside): when they return the send buffer may be
 * reused and the data received.
 * Threads may use p2p at the same time on different communicators (each thread has its
 * own staging buffers); on one communicator, one thread at a time. */
#ifndef DT_P2P_H
#define DT_P2P_H

#include <mpi.h>
#include <stddef.h>

/* Tags from DT_TAG_BASE up are dtlab's; do not use them for your own messages on a
 * communicator while a dtlab collective runs on it. */
#define DT_TAG_BASE 0x7d00

void dt_send(const void *buf, size_t nbytes, int dst, int tag, MPI_Comm comm);
void dt_recv(void *buf, size_t nbytes, int src, int tag, MPI_Comm comm);

/* Sends sbuf to dst while receiving rbuf from src (both may be the same rank as each
 * other, never this rank). sbuf and rbuf must not overlap. */
void dt_sendrecv(const void *sbuf, size_t snbytes, int dst,
                 void *rbuf, size_t rnbytes, int src, int tag, MPI_Comm comm);

/* Nonblocking, for buffers of up to 1 GiB: post the send or receive and return its
 * request, which dt_waitall (or dt_test) completes; until then the buffer belongs to
 * MPI. Always plain MPI. Device data is staged through a pinned host buffer of the
 * request's own (a copy off the GPU before the send is posted; onto it in the wait that
 * completes a receive): such a request must be completed by dt_waitall or dt_test, not
 * by MPI_Wait or MPI_Test, and at most 64 may be in flight on a thread. Counted in the
 * byte counters when posted; traced as an instant at the post. */
MPI_Request dt_isend(const void *buf, size_t nbytes, int dst, int tag, MPI_Comm comm);
MPI_Request dt_irecv(void *buf, size_t nbytes, int src, int tag, MPI_Comm comm);

/* Waits for n requests, politely or not (dt_polite()). Used by p2p and by programs
 * that post their own nonblocking calls. A polite wait that passes dtlab's time limit
 * (MPIEXEC_TIMEOUT, DT_TIMEOUT: see p2p.c) aborts the job, naming whom it waited for. */
void dt_waitall(int n, MPI_Request *reqs);
/* MPI_Test for one request of dt_isend or dt_irecv: 1 (and *req MPI_REQUEST_NULL) when
 * it has completed, its staged data then in place; 0 while it is in flight. */
int dt_test(MPI_Request *req);

/* A barrier over comm, waited for politely (MPI_Ibarrier, then dt_waitall). Programs use
 * it to start timed runs together; MPI_Barrier itself would spin. */
void dt_barrier(MPI_Comm comm);

/* ==== transports ====
 * How a message's bytes travel (DT_P2P, read by dt_init; dt_p2p_set_mode switches later):
 *   staging  everything through MPI; device data staged through pinned host buffers,
 *            in pieces (above)
 *   shm      between ranks on one host, messages of 64 KiB up to 2 MiB (what an outbox
 *            holds) go through shared-memory mailboxes (MPI carries only a small
 *            doorbell; mailbox.c); device data is copied straight between the GPU and
 *            the mailbox
 *   ipc      as shm, and device data between ranks that share a GPU, up to 64 MiB, goes
 *            through device mailboxes opened with CUDA IPC (device to device, no host)
 *   auto     (the default) as ipc, but device data below 4 MiB through host mailboxes
 *            (ranks sharing a GPU take turns on it: an IPC message costs about half a
 *            millisecond however small)
 * Other messages, and those to ranks on other hosts, go through MPI (staging device
 * data), as do mailbox messages whose slots are not all free when they are sent. */
typedef enum { DT_VIA_MPI, DT_VIA_STAGING, DT_VIA_SHM, DT_VIA_IPC } dt_via;

/* "mpi" (host data through MPI), "staging", "shm", "ipc" */
const char *dt_via_name(dt_via via);

/* The transport a message of nbytes to or from peer on comm takes now, when the
 * outbox's slots are free; on_device: the buffer is on the GPU. */
dt_via dt_p2p_via(int peer, MPI_Comm comm, int on_device, size_t nbytes);

/* The mode in force: "auto", "staging", "shm" or "ipc". */
const char *dt_p2p_mode(void);

/* Switches the mode for the messages that follow: every rank must switch alike, between
 * the same two calls. Returns 1, or 0 (and changes nothing) when mode is not a mode's
 * name. A mode this run cannot use (ipc with no shared GPU) quietly falls back, pair by
 * pair: dt_p2p_via says what each pair gets. */
int dt_p2p_set_mode(const char *mode);

/* For the ring reduce-scatter (internal): sends sbuf to dst while receiving count
 * elements from src and reducing them into out: out = own op received, own and out may
 * be the same. Through a mailbox the reduction reads the sender's slot directly; else
 * the message lands in tmp (count elements, where out lives) and is reduced from there. */
void dti_sendrecv_reduce(const void *sbuf, size_t snbytes, int dst, const void *own,
                         void *out, int count, MPI_Datatype type, MPI_Op op, void *tmp,
                         int src, int tag, MPI_Comm comm);

/* MPI's own MPI_Allreduce, MPI_Bcast, MPI_Reduce, MPI_Gather (the same count and type on
 * both sides) and MPI_Comm_dup, for the library's books and copies of communicators
 * (internal): begun nonblocking and waited for politely, as dtlab's p2p waits. MPICH's
 * blocking calls spin, and with more ranks than cores each of their rounds costs a time
 * slice. Not counted as p2p traffic or waiting (p2p_wait.c). */
void dti_mpi_allreduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm);
void dti_mpi_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
void dti_mpi_reduce(const void *sbuf, void *rbuf, int count, MPI_Datatype type, MPI_Op op,
                    int root, MPI_Comm comm);
void dti_mpi_gather(const void *sbuf, int count, MPI_Datatype type, void *rbuf, int root,
                    MPI_Comm comm);
void dti_comm_dup(MPI_Comm comm, MPI_Comm *copy);

/* Bytes per segment the ring collectives cut their chunks into: what a mailbox slot
 * holds, larger for device buffers (each segment costs a fixed overhead). */
size_t dt_p2p_segment(int on_device);

/* Bytes this rank has sent and received through p2p since the last reset, and the
 * messages it sent (one per dt_send, dt_sendrecv's send or dt_isend, however the
 * transport cut it). */
size_t dt_bytes_sent(void);
size_t dt_bytes_received(void);
size_t dt_messages_sent(void);
/* Seconds spent inside dt_waitall since the last reset, by all of this rank's threads
 * together (DDP's communication thread included, whose waits overlap compute). */
double dt_wait_seconds(void);
void dt_bytes_reset(void);          /* resets the bytes, messages and waiting time */

/* ==== a log of messages, for counting rounds ====
 * Between dt_p2p_log_start and dt_p2p_log_stop this rank notes every message it sends or
 * receives through p2p, in the order they happen: a send when it is posted, a receive
 * when it has arrived (dt_irecv's in the dt_waitall that completes it), a dt_sendrecv as
 * its send, then its receive. Gathered from every rank, the notes tell how many rounds
 * an algorithm took (tests/grade/grade.h's gr_rounds_end): a message's round follows the
 * messages its sender had sent or received before it. One thread at a time. */
typedef struct {
    int send;       /* 1: sent to peer; 0: received from peer */
    int peer;       /* the other rank in MPI_COMM_WORLD; -1 when not known (any source) */
    int tag;
    int seq;        /* its place among this rank's sends to (receives from) peer with tag */
} dt_p2p_note;

/* Starts a log into notes[0..cap): the caller owns the array. */
void dt_p2p_log_start(dt_p2p_note *notes, int cap);
/* Stops it; returns how many messages were noted (more than cap: the rest were lost). */
int dt_p2p_log_stop(void);

#endif /* DT_P2P_H */
