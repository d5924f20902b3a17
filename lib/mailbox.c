/* Mailboxes: messages between ranks of one host with one copy (p2p.h, "transports").
 *
 * Through MPI, a message between two processes of one host is copied twice: the sender
 * copies it into MPICH's shared memory, the receiver copies it out into its buffer. A
 * mailbox takes one copy out. Every rank owns an outbox of slots that every rank of the
 * host can read:
 *   - HSLOTS slots of host memory, its part of the memory the ranks of the host share
 *     (hostmem.h: mapped in every process of the host);
 *   - with a GPU, DSLOTS slots of device memory, which the ranks sharing that GPU open
 *     through CUDA IPC (cudaIpcGetMemHandle, handles exchanged over MPI, opened once
 *     at start-up and kept until dt_finalize), as NCCL's P2P transport does.
 *
 * A message of nbytes goes as pieces of at most a slot each. For every piece the sender
 *   1. takes a free slot of its outbox: its busy flag 0 -> 1 (an atomic compare-and-swap);
 *   2. copies the piece into it (memcpy; GPU to host; or GPU to GPU);
 *   3. rings the doorbell: a 48-byte MPI message on the message's own communicator and
 *      tag, naming the slot, the piece's place and the message's length.
 * The receiver, which finds the doorbell as it would find any message (MPI_Improbe: so
 * tags, communicators and the order of messages work exactly as for MPI),
 *   4. reads the piece straight out of the sender's slot into its buffer, or adds it into
 *      its own data there (the ring reduce-scatter's step: no copy at all in between);
 *   5. gives the slot back, busy 1 -> 0: the credit that lets the sender reuse it.
 *
 *      rank 0                       shared memory                       rank 1
 *      buf --copy--> [slot 3 of rank 0's outbox] --copy or add--> buf
 *        \__ doorbell "slot 3, bytes 0..262144 of 1048576" (MPI) __/
 *                                                  <-- busy[3] = 0 (credit)
 *
 * A message takes all the slots it needs at once, or, when they are not all free, goes
 * as a plain MPI message; one larger than the outbox always does (the ring collectives
 * cut theirs into segments of a slot: dt_p2p_segment). So a sender never waits for a
 * credit, and no program that works with MPI can deadlock here. Messages smaller than
 * MB_MIN keep to MPI too, which sends them at once (eagerly) and faster than a doorbell
 * plus a copy; so do messages to other hosts. The receiver cannot know which way a
 * message comes: it probes, and a doorbell is a message of exactly sizeof(doorbell)
 * bytes beginning with MAGIC. So a message that dt_send or dt_sendrecv sends must be
 * received by dt_recv or dt_sendrecv, not by a receive posted with MPI or dt_irecv
 * (dt_isend's messages are always plain MPI).
 *
 * Where it pays: the ring reduce-scatter adds each piece straight from the sender's
 * slot (a copy and a sum, where MPI's path is a copy, maybe two, then the sum), and
 * device data between ranks sharing a GPU goes device to device. A plain host message
 * is copied twice here; MPICH over UCX reads a large one straight from the sender's
 * memory (Linux's CMA), once, so the ring allgather sends host chunks whole, by MPI.
 *
 * Staged pieces. A plain message of device data larger than a piece (DT_STAGE_KIB, 1
 * MiB) is cut: the sender sends a doorbell with slot PIECES ("pieces of this size
 * follow", since a receiver cannot tell how a plain message was cut), queues every
 * piece's copy from the GPU into pinned staging memory with an event behind each, and
 * hands each piece to MPI as soon as its event has passed; the receiver posts a receive
 * for every piece and queues each one's copy to the GPU as soon as it arrives, so the
 * copies overlap MPI's moving the other pieces; it then reduces the whole message with
 * one kernel, where it reduces. Host data larger than MPI's int counts goes the same
 * way, without the copies.
 *
 * Memory order: the sender's copy into the slot is published by a release fence before
 * the doorbell is sent, and the receiver's acquire fence after the doorbell arrived
 * orders its reads after it; the credit is a release store, taken by an acquire CAS. */
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "mailbox.h"
#include "buf.h"
#include "hostmem.h"
#include "cuda.h"
#include "internal.h"
#include "ops.h"
#include "trace.h"

#define MAGIC 0x78626d62616c7464ULL             /* "dtlabmbx" */
enum { HSLOTS = 8, DSLOTS = 4, SLOTS = HSLOTS + DSLOTS };
#define HSLOT ((size_t)256 << 10)               /* bytes in a host slot */
#define DSLOT ((size_t)16 << 20)                /* bytes in a device slot */
#define MB_MIN ((size_t)64 << 10)               /* smaller messages keep to MPI */
/* Under auto, device data goes by IPC from this size up, below it through host slots:
 * ranks sharing a GPU take turns on it (their CUDA contexts are time-sliced, unless
 * MPS runs), which costs an IPC message about half a millisecond however small it is
 * (measured on an H200), while the copy engines that move data between the GPU and
 * host slots interleave the processes' copies at little cost. DT_P2P=ipc: every size. */
#define IPC_MIN ((size_t)4 << 20)
#define CTL_BYTES ((size_t)4096)                /* the flags; the slots start a page in */
/* Staged pieces: device data that goes through MPI is cut into pieces of DT_STAGE_KIB
 * (1 MiB) or more, at most DTI_MAX_PIECES of them, so that one piece's copy to or from
 * the GPU runs while MPI moves another; host data only when it is too large for one MPI
 * message (counts are ints), in pieces of at most PIECE_MAX, with no copy. */
#define PIECE_MAX ((size_t)1 << 30)
#define PIECES (-1)                             /* a doorbell's slot: "pieces follow" */
/* A piece sits in its slot at the same address modulo 16 as it had in the sender's
 * buffer (its skew): in the ring, the receiver adds it into the same chunk of its own
 * buffer, so all three pointers of the reduction line up for 16-byte loads. Slots are
 * spaced a little wider than they hold, for the skew. */
#define HSTRIDE (HSLOT + 64)
#define DSTRIDE (DSLOT + 256)

typedef struct {
    uint64_t magic, total, offset;  /* the message's bytes; this piece's first byte */
    uint64_t len;                   /* this piece's bytes */
    int32_t slot;                   /* 0..HSLOTS-1 host, HSLOTS.. device */
    int32_t from;                   /* the sender's rank on the host */
    int32_t skew;                   /* the piece starts this many bytes into the slot */
    int32_t pad;
} doorbell;

typedef struct { _Atomic int busy[SLOTS]; } ctl;

static size_t host_piece;       /* dti_p2p_stage_host: host data staged too, in these */
static size_t dev_piece = (size_t)1 << 20;     /* DT_STAGE_KIB; 0: staged whole */

enum { M_AUTO, M_STAGING, M_SHM, M_IPC };
static const char *const mode_names[] = { "auto", "staging", "shm", "ipc" };

static struct {
    int on;                 /* the shared memory exists: mailboxes can be used */
    int mode;
    MPI_Comm local;
    int me, n;              /* this rank on the host; ranks on the host */
    int *local_of;          /* world rank -> rank on the host, -1 on another host */
    ctl **ctl;              /* every local rank's flags */
    char **hslots;          /* every local rank's host slots */
    int *pinned;            /* that part registered with CUDA */
    void *dout;             /* this rank's device slots; NULL without a GPU */
    char **dslots;          /* every local rank's device slots, opened; NULL: no IPC */
    int *ipc_ok;            /* per local rank: IPC works both ways */
} mb = { .mode = M_AUTO };

static int mode_of(const char *mode)
{
    for (int i = 0; i < 4; i++)
        if (mode && strcmp(mode, mode_names[i]) == 0)
            return i;
    return -1;
}

int dti_mb_mode_ok(const char *mode) { return mode_of(mode) >= 0; }
int dti_mb_active(void) { return mb.on && mb.mode != M_STAGING; }
const char *dt_p2p_mode(void) { return mode_names[mb.mode]; }

int dt_p2p_set_mode(const char *mode)
{
    int m = mode_of(mode);
    if (m >= 0)
        mb.mode = m;
    return m >= 0;
}

const char *dt_via_name(dt_via via)
{
    static const char *const names[] = { "mpi", "staging", "shm", "ipc" };
    return via >= DT_VIA_MPI && via <= DT_VIA_IPC ? names[via] : "?";
}

size_t dt_p2p_segment(int on_device) { return on_device ? DSLOT : HSLOT; }

/* The transport to a rank of the host (local; -1: another host) for nbytes of host or
 * device (dev) data. A message larger than the whole outbox goes plain (the ring
 * collectives cut theirs into segments of one slot, dt_p2p_segment). */
static dt_via via_of(int local, int dev, size_t nbytes)
{
    int boxes = dti_mb_active() && local >= 0 && local != mb.me && nbytes >= MB_MIN;
    dt_via plain = dev ? DT_VIA_STAGING : DT_VIA_MPI;
    if (!boxes)
        return plain;
    if (dev && mb.mode != M_SHM && mb.ipc_ok && mb.ipc_ok[local] &&
        (mb.mode == M_IPC || nbytes >= IPC_MIN))
        return nbytes <= DSLOTS * DSLOT ? DT_VIA_IPC : plain;
    return nbytes <= HSLOTS * HSLOT ? DT_VIA_SHM : plain;
}

void dti_p2p_stage_host(size_t piece)
{
    DT_REQUIRE(piece % 16 == 0, "dti_p2p_stage_host: %zu bytes is not a multiple of 16",
               piece);
    host_piece = piece;
}

void dti_p2p_stage_piece(size_t piece) { dev_piece = piece; }

int dti_p2p_stage_host_on(void) { return host_piece != 0; }

/* How a plain message of nbytes is cut (dev: device data): the size of its pieces, or 0
 * for one MPI message. At most DTI_MAX_PIECES pieces: larger ones for a larger message. */
static size_t piece_of(size_t nbytes, int dev)
{
    size_t p = dev ? dev_piece : host_piece;    /* staged: copies to overlap */
    if (!p || nbytes <= p) {
        if (nbytes <= INT_MAX)
            return 0;
        p = PIECE_MAX;                          /* MPI counts are ints */
    }
    size_t spread = (nbytes + DTI_MAX_PIECES - 1) / DTI_MAX_PIECES;
    spread = (spread + 4095) & ~(size_t)4095;
    return spread > p ? spread : p;
}

static size_t piece_len(size_t total, size_t piece, int i)
{
    size_t off = (size_t)i * piece;
    return total - off < piece ? total - off : piece;
}

static int local_of(int peer, MPI_Comm comm)
{
    int w = dti_p2p_world_rank(peer, comm);
    return mb.local_of && w >= 0 ? mb.local_of[w] : -1;
}

dt_via dt_p2p_via(int peer, MPI_Comm comm, int on_device, size_t nbytes)
{
    return via_of(local_of(peer, comm), on_device, nbytes);
}

/* ==== setting up and taking down ==== */

/* CUDA IPC between the ranks of this host that share this rank's GPU: each exports its
 * device slots, opens those of the others, and reads back a pattern they wrote, so a
 * runtime where IPC does not work (some sandboxes) is found here, not in a collective.
 * A pair uses IPC only when both of its ranks opened the other's slots. */
static void ipc_setup(void)
{
    typedef struct { char bus[32]; unsigned char handle[DTI_IPC_HANDLE]; int ok; } card;
    card mine = { .ok = 0 };
    char why[160] = "";
    dti_ipc_bus_id(mine.bus, sizeof mine.bus);
    mb.dout = dti_cuda_malloc(DSLOTS * DSTRIDE);
    mine.ok = mine.bus[0] && dti_ipc_export(mb.dout, mine.handle, why, sizeof why) == 0;
    uint64_t pattern = 0x0101010101010101ULL * (uint64_t)(mb.me + 1);
    dti_cuda_memcpy(mb.dout, &pattern, sizeof pattern);

    card *all = malloc(sizeof *all * (size_t)mb.n);
    int *opened = calloc((size_t)mb.n * (size_t)(mb.n + 1), sizeof *opened);
    mb.dslots = calloc((size_t)mb.n, sizeof *mb.dslots);
    mb.ipc_ok = calloc((size_t)mb.n, sizeof *mb.ipc_ok);
    DT_REQUIRE(all && opened && mb.dslots && mb.ipc_ok, "out of host memory");
    DT_CHECK_MPI(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE,
                               mb.local));
    int shared = 0;
    for (int i = 0; i < mb.n; i++) {
        if (i == mb.me || !all[i].bus[0] || strcmp(all[i].bus, mine.bus) != 0)
            continue;
        shared = 1;
        void *p = NULL;
        if (!mine.ok || !all[i].ok || dti_ipc_open(all[i].handle, &p, why, sizeof why))
            continue;
        uint64_t got = 0;
        dti_cuda_memcpy(&got, p, sizeof got);
        if (got == 0x0101010101010101ULL * (uint64_t)(i + 1)) {
            mb.dslots[i] = p;
            opened[i] = 1;
        } else {
            dti_ipc_close(p);
            snprintf(why, sizeof why, "a pattern written through IPC did not read back");
        }
    }
    int *rows = opened + mb.n;          /* row i: whom rank i opened */
    DT_CHECK_MPI(MPI_Allgather(opened, mb.n, MPI_INT, rows, mb.n, MPI_INT, mb.local));
    int failed = 0;
    for (int i = 0; i < mb.n; i++) {
        mb.ipc_ok[i] = i != mb.me && rows[mb.me * mb.n + i] && rows[i * mb.n + mb.me];
        failed |= i != mb.me && mb.dslots[i] && !mb.ipc_ok[i];
    }
    for (int i = 0; i < mb.n; i++)      /* opened one way only: of no use */
        if (mb.dslots[i] && !mb.ipc_ok[i]) {
            dti_ipc_close(mb.dslots[i]);
            mb.dslots[i] = NULL;
        }
    if (shared && (failed || !mine.ok || why[0]) && mb.mode == M_IPC && mb.me == 0)
        fprintf(stderr, "dtlab: DT_P2P=ipc: CUDA IPC does not work between some ranks "
                "sharing a GPU here (%s); their device data goes through shared memory\n",
                why[0] ? why : "a rank could not open another's memory");
    free(all);
    free(opened);
}

/* Maps the pages of a rank's slots into this process now (its own for writing), not
 * at the first message through each slot: a page fault per 4 KiB on both sides would
 * cost the first messages tens of microseconds each. Where the kernel cannot
 * (MADV_POPULATE_* came in Linux 5.14), the first messages pay it. */
static void prefault(char *p, size_t nbytes, int mine)
{
#ifdef MADV_POPULATE_WRITE
    if (madvise(p, nbytes, mine ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0)
        return;
#endif
    (void)p; (void)nbytes; (void)mine;
}

size_t dti_mb_part_bytes(void) { return CTL_BYTES + HSLOTS * HSTRIDE; }

void dti_mb_init(MPI_Comm local, const char *mode)
{
    int world, wsize;
    if (mode && *mode)
        mb.mode = mode_of(mode);        /* dt_init checked it */
    DT_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world));
    DT_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &wsize));
    DT_CHECK_MPI(MPI_Comm_rank(local, &mb.me));
    DT_CHECK_MPI(MPI_Comm_size(local, &mb.n));
    mb.local = local;
    mb.local_of = malloc(sizeof *mb.local_of * (size_t)wsize);
    DT_REQUIRE(mb.local_of, "out of host memory");
    for (int i = 0; i < wsize; i++)
        mb.local_of[i] = -1;
    /* who is who on this host: noted in the shared memory (hostmem.h), else asked */
    int shared = dti_host_shared();
    if (shared) {
        for (int i = 0; i < mb.n; i++)
            if (dti_host_world_rank(i) >= 0 && dti_host_world_rank(i) < wsize)
                mb.local_of[dti_host_world_rank(i)] = i;
    } else {
        int *worlds = malloc(sizeof *worlds * (size_t)mb.n);
        DT_REQUIRE(worlds, "out of host memory");
        DT_CHECK_MPI(MPI_Allgather(&world, 1, MPI_INT, worlds, 1, MPI_INT, local));
        for (int i = 0; i < mb.n; i++)
            mb.local_of[worlds[i]] = i;
        free(worlds);
    }
    if (mb.n <= 1)
        return;                         /* nobody to share memory with */

    /* Each rank's part of the host's shared memory: its flags, then its host slots, on
     * pages of its own. A host that could not give the memory keeps every message on
     * MPI. */
    if (!shared) {
        if (mb.mode == M_SHM && mb.me == 0)
            fprintf(stderr, "dtlab: DT_P2P=shm: no shared memory could be made for the "
                    "ranks of this host (/dev/shm full?); messages go through MPI\n");
        return;
    }
    mb.ctl = calloc((size_t)mb.n, sizeof *mb.ctl);
    mb.hslots = calloc((size_t)mb.n, sizeof *mb.hslots);
    mb.pinned = calloc((size_t)mb.n, sizeof *mb.pinned);
    DT_REQUIRE(mb.ctl && mb.hslots && mb.pinned, "out of host memory");
    for (int i = 0; i < mb.n; i++) {
        char *p = dti_host_part(i);
        mb.ctl[i] = (ctl *)p;
        mb.hslots[i] = p + CTL_BYTES;
        prefault(mb.hslots[i], HSLOTS * HSTRIDE, i == mb.me);
        /* pinned, the GPU's copy engine reads and writes it at full speed */
        if (dti_gpu_count() > 0)
            mb.pinned[i] = dti_ipc_host_register(mb.hslots[i], HSLOTS * HSTRIDE) == 0;
    }
    if (dti_gpu_count() > 0 && mb.mode != M_SHM)
        ipc_setup();
    /* every flag is zero (the memory came zeroed), and every rank had mapped it when
     * dti_host_open returned: anyone may send */
    atomic_thread_fence(memory_order_seq_cst);
    mb.on = 1;
}

void dti_mb_fini(void)
{
    if (mb.on) {
        for (int i = 0; mb.dslots && i < mb.n; i++)
            dti_ipc_close(mb.dslots[i]);
        for (int i = 0; i < mb.n; i++)
            if (mb.pinned[i])
                dti_ipc_host_unregister(mb.hslots[i]);
        /* with a GPU, every rank's IPC mappings closed before device memory goes (host
         * memory stays until the last rank unmaps it: no wait for that) */
        if (dti_gpu_count() > 0)
            dt_barrier(mb.local);
        if (mb.dout)
            dti_cuda_free(mb.dout);
    }
    free(mb.local_of);
    free(mb.ctl);
    free(mb.hslots);
    free(mb.pinned);
    free(mb.dslots);
    free(mb.ipc_ok);
    memset(&mb, 0, sizeof mb);
}

/* ==== slots ==== */

/* Takes a free slot of this rank's outbox (a device slot: dev), or returns -1. The
 * search starts one slot further each time, so consecutive messages use different
 * slots: a slot its receiver has just freed is not written again at once while its
 * lines still sit in that receiver's cache (measured at 4 ranks on 2 cores: the
 * lowest free slot first made a 64 MiB ring allreduce take 1.5 times as long). */
static int take_slot(int dev)
{
    int lo = dev ? HSLOTS : 0, k = dev ? DSLOTS : HSLOTS;
    static _Atomic unsigned next;
    unsigned start = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
    for (int i = 0; i < k; i++) {
        int s = lo + (int)((start + (unsigned)i) % (unsigned)k), free_ = 0;
        if (atomic_compare_exchange_strong_explicit(&mb.ctl[mb.me]->busy[s], &free_, 1,
                                                    memory_order_acquire,
                                                    memory_order_relaxed))
            return s;
    }
    return -1;
}

/* Takes n slots at once, or none (returns 0): a message that fits in the outbox goes
 * only when all its slots are free now, so a send never waits for a credit that a
 * third rank's message holds. */
static int take_slots(int dev, int n, int *got)
{
    for (int i = 0; i < n; i++)
        if ((got[i] = take_slot(dev)) < 0) {
            while (i-- > 0)
                atomic_store_explicit(&mb.ctl[mb.me]->busy[got[i]], 0, memory_order_release);
            return 0;
        }
    return 1;
}

static char *slot_at(int owner, int s)
{
    return s < HSLOTS ? mb.hslots[owner] + (size_t)s * HSTRIDE
                      : (owner == mb.me ? (char *)mb.dout : mb.dslots[owner])
                        + (size_t)(s - HSLOTS) * DSTRIDE;
}

/* ==== one exchange: a send side and a receive side, moved on in turns ==== */

typedef struct {
    const char *buf;
    size_t n, off;          /* bytes; handed over so far */
    int peer, w, dev;       /* in comm; in MPI_COMM_WORLD; buf on the GPU */
    dt_via via;
    int raw;                /* plain MPI: posted */
    int planned;            /* the slots are chosen (or the message goes plain) */
    int nres, res[SLOTS];   /* slots reserved for the message, used in order */
    MPI_Request rawreq;
    size_t piece;           /* staged pieces (a plain message cut): their size; 0 none */
    int np, sent;           /* pieces; handed to MPI so far */
    const char *from;       /* where they are sent from: staging, or buf */
    double tq;              /* when their copies were queued */
    doorbell hdr;           /* "pieces follow" */
    MPI_Request hreq, preq[DTI_MAX_PIECES];
    doorbell db[SLOTS];     /* one per slot this exchange used, until sent */
    MPI_Request req[SLOTS];
    int done;
} out_side;

typedef struct {
    char *buf;
    size_t n, got, total;   /* total: SIZE_MAX until the first piece says */
    int peer, from, dev;    /* asked for (maybe MPI_ANY_SOURCE); the sender found */
    int owner;              /* the sender's rank on the host, once its first piece came */
    const dti_mb_reduce *red;
    dt_via via;
    MPI_Request rawreq;     /* a plain message being received */
    char *landing;          /* where it lands (staged pieces too) */
    size_t rawn;
    size_t piece;           /* staged pieces: their size, once the header came */
    int np, next, staged;   /* pieces; taken so far; landing in staging memory */
    double tq;              /* when the first arrived */
    MPI_Request preq[DTI_MAX_PIECES];
    int done;
} in_side;

/* A mailbox message takes all the slots it needs at once, or, when they are not all
 * free, goes as a plain MPI message instead. So a send never waits for a credit: MPI
 * buffers a small message or hands a large one over to its receiver without waiting
 * for any third rank, and the mailbox must not be stricter. (Were a send to wait for
 * slots, a rank whose slots hold messages for a neighbour that is busy elsewhere, say
 * in DDP's other thread, could wait on that neighbour while it waits on this rank.) */
static void plan(out_side *s)
{
    int dev = s->via == DT_VIA_IPC;
    size_t cap = dev ? DSLOT : HSLOT;
    s->planned = 1;
    s->nres = (int)((s->n + cap - 1) / cap);    /* at most the outbox: via_of says so */
    if (!take_slots(dev, s->nres, s->res)) {
        s->nres = 0;
        s->via = s->dev ? DT_VIA_STAGING : DT_VIA_MPI;
    }
}

/* A plain message: one MPI message (device data copied to staging first), or staged
 * pieces: a header doorbell saying "pieces of this size follow", then every piece's
 * copy to staging queued on the GPU at once, each with an event behind it. */
static void start_plain(out_side *s, int tag, MPI_Comm comm)
{
    s->raw = 1;
    s->piece = piece_of(s->n, s->dev);
    if (!s->piece) {
        const void *p = s->buf;
        if (s->dev) {
            p = dti_p2p_staging(0, s->n);
            dti_p2p_copy((void *)p, s->buf, s->n);
        }
        DT_CHECK_MPI(MPI_Isend(p, (int)s->n, MPI_BYTE, s->peer, tag, comm, &s->rawreq));
        return;
    }
    s->np = (int)((s->n + s->piece - 1) / s->piece);
    s->hdr = (doorbell){ MAGIC, s->n, 0, s->piece, PIECES, mb.me, 0, 0 };
    DT_CHECK_MPI(MPI_Isend(&s->hdr, sizeof s->hdr, MPI_BYTE, s->peer, tag, comm, &s->hreq));
    s->from = s->buf;
    if (s->dev || host_piece) {
        char *stage = dti_p2p_staging(0, s->n);
        s->tq = dt_trace_now();
        for (int i = 0; i < s->np; i++) {
            size_t off = (size_t)i * s->piece;
            dti_p2p_copy_queue(stage + off, s->buf + off, piece_len(s->n, s->piece, i),
                               s->dev);
            if (s->dev)
                dti_cuda_event_record(dti_p2p_event(i));
        }
        s->from = stage;
    }
}

/* Hands MPI every piece whose copy the GPU has finished, in order; 1 when all are
 * handed over and sent. */
static int send_pieces(out_side *s, int tag, MPI_Comm comm, int *moved)
{
    while (s->sent < s->np && (!s->dev || dti_cuda_event_done(dti_p2p_event(s->sent)))) {
        size_t off = (size_t)s->sent * s->piece;
        DT_CHECK_MPI(MPI_Isend(s->from + off, (int)piece_len(s->n, s->piece, s->sent),
                               MPI_BYTE, s->peer, tag, comm, &s->preq[s->sent]));
        *moved = 1;
        if (++s->sent == s->np && s->dev)
            dt_trace_add(DT_EV_D2H, -1, s->n, s->tq, dt_trace_now());
    }
    int flag = 0;
    if (s->sent == s->np)
        DT_CHECK_MPI(MPI_Testall(s->np, s->preq, &flag, MPI_STATUSES_IGNORE));
    return flag;
}

static void send_some(out_side *s, int tag, MPI_Comm comm, int *moved)
{
    if (!s->planned && s->via != DT_VIA_MPI && s->via != DT_VIA_STAGING)
        plan(s);
    if (s->via == DT_VIA_MPI || s->via == DT_VIA_STAGING) {
        if (!s->raw) {
            start_plain(s, tag, comm);
            *moved = 1;
        }
        int flag = 0;
        if (s->piece)
            flag = send_pieces(s, tag, comm, moved);
        else
            DT_CHECK_MPI(MPI_Test(&s->rawreq, &flag, MPI_STATUS_IGNORE));
        s->done = flag;
        return;
    }
    for (int used = 0; s->off < s->n; used++) {
        int k = s->res[used];
        size_t cap = k < HSLOTS ? HSLOT : DSLOT;
        size_t len = s->n - s->off < cap ? s->n - s->off : cap;
        int skew = (int)((uintptr_t)(s->buf + s->off) & 15);
        char *slot = slot_at(mb.me, k) + skew;
        if (s->dev || k >= HSLOTS)
            dti_p2p_copy(slot, s->buf + s->off, len);
        else
            memcpy(slot, s->buf + s->off, len);
        s->db[k] = (doorbell){ MAGIC, s->n, s->off, len, k, mb.me, skew, 0 };
        atomic_thread_fence(memory_order_release);
        DT_CHECK_MPI(MPI_Isend(&s->db[k], sizeof(doorbell), MPI_BYTE, s->peer, tag, comm,
                               &s->req[k]));
        s->off += len;
        *moved = 1;
    }
    s->done = 1;
}

__attribute__((noreturn))
static void too_long(int from, size_t got, size_t room, MPI_Comm comm)
{
    dti_die(__FILE__, __LINE__, "a message from or to rank %d failed: a message of %zu "
            "bytes came for a receive of %zu (" DTI_TOO_LONG ")",
            dti_p2p_world_rank(from, comm), got, room);
}

/* A piece of a mailbox message: read straight from the sender's slot. */
static void take_piece(in_side *r, const doorbell *d, MPI_Comm comm)
{
    if (r->got == 0)
        r->owner = mb.local_of ? local_of(r->from, comm) : -1;
    int owner = r->owner;
    DT_REQUIRE(owner == d->from && d->slot >= 0 && d->slot < SLOTS &&
               (d->slot < HSLOTS || (mb.dslots && mb.dslots[owner])) && d->offset == r->got &&
               d->skew >= 0 && d->skew < 16 &&
               (r->total == SIZE_MAX || r->total == d->total),
               "a mailbox doorbell from rank %d makes no sense (slot %d, bytes %llu of "
               "%llu): is MPI used directly on dtlab's communicator and tag?",
               dti_p2p_world_rank(r->from, comm), (int)d->slot,
               (unsigned long long)d->offset, (unsigned long long)d->total);
    if (r->total == SIZE_MAX && d->total > r->n)
        too_long(r->from, d->total, r->n, comm);
    r->total = d->total;
    r->via = d->slot < HSLOTS ? DT_VIA_SHM : DT_VIA_IPC;
    atomic_thread_fence(memory_order_acquire);
    const char *slot = slot_at(owner, d->slot) + d->skew;
    size_t off = d->offset, len = d->len;
    if (r->red) {
        size_t esize = dt_type_size(r->red->type);
        const char *in = slot;
        if (r->dev && d->slot < HSLOTS) {       /* device data, host slot: upload first */
            dti_p2p_copy((char *)r->red->tmp + off, slot, len);
            in = (char *)r->red->tmp + off;
        }
        dti_reduce_into(in, (const char *)r->red->own + off, r->buf + off,
                        (int)(len / esize), r->red->type, r->red->op);
    } else if (r->dev || d->slot >= HSLOTS) {
        dti_p2p_copy(r->buf + off, slot, len);
    } else {
        memcpy(r->buf + off, slot, len);
    }
    atomic_store_explicit(&mb.ctl[owner]->busy[d->slot], 0, memory_order_release);
    r->got += len;
    r->done = r->got == r->total;
}

/* A plain message (MPI's own) has arrived in r->landing, host memory: into place. */
static void take_plain(in_side *r)
{
    r->via = r->dev ? DT_VIA_STAGING : DT_VIA_MPI;
    if (r->red) {
        const void *in = r->landing;
        if (r->dev) {                           /* the reduction runs on the GPU */
            dti_p2p_copy(r->red->tmp, r->landing, r->rawn);
            in = r->red->tmp;
        }
        dti_reduce_into(in, r->red->own, r->buf, (int)(r->rawn / dt_type_size(r->red->type)),
                        r->red->type, r->red->op);
    } else if (r->landing != r->buf) {
        dti_p2p_copy(r->buf, r->landing, r->rawn);
    }
    r->got = r->rawn;
    r->done = 1;
}

/* The header of staged pieces: a receive posted for every piece, from the header's
 * sender and tag (MPI keeps one sender's messages in order), into staging where this
 * side is on the GPU, else where the data goes. */
static void start_pieces(in_side *r, const doorbell *d, const MPI_Status *st,
                         MPI_Comm comm)
{
    size_t np = d->len ? (d->total + d->len - 1) / d->len : 0;
    DT_REQUIRE(r->got == 0 && d->offset == 0 && d->len > 0 && d->len % 16 == 0 &&
               d->len <= PIECE_MAX && np >= 2 && np <= DTI_MAX_PIECES,
               "a header of staged pieces from rank %d makes no sense (%llu bytes in pieces "
               "of %llu): is MPI used directly on dtlab's communicator and tag?",
               dti_p2p_world_rank(r->from, comm), (unsigned long long)d->total,
               (unsigned long long)d->len);
    if (d->total > r->n)
        too_long(r->from, d->total, r->n, comm);
    r->total = d->total;
    r->piece = d->len;
    r->np = (int)np;
    r->staged = r->dev || host_piece;
    r->via = r->dev ? DT_VIA_STAGING : DT_VIA_MPI;
    r->landing = r->staged ? dti_p2p_staging(1, r->total) : r->red ? r->red->tmp : r->buf;
    for (int i = 0; i < r->np; i++)
        DT_CHECK_MPI(MPI_Irecv(r->landing + (size_t)i * r->piece,
                               (int)piece_len(r->total, r->piece, i), MPI_BYTE,
                               st->MPI_SOURCE, st->MPI_TAG, comm, &r->preq[i]));
}

/* Every piece that has arrived, in order: its copy to the GPU queued (where staged),
 * while MPI brings the next; after the last, one wait, and a reduction of the whole
 * message (one kernel: measured on an H200 with ranks sharing the GPU, a kernel per
 * piece made the staged allreduce slower than staging whole, 0.57x at 4 ranks, as
 * each launch makes the ranks' contexts take turns on the GPU). */
static void take_pieces(in_side *r, int *moved)
{
    while (r->next < r->np) {
        int flag = 0;
        DT_CHECK_MPI(MPI_Test(&r->preq[r->next], &flag, MPI_STATUS_IGNORE));
        if (!flag)
            return;
        *moved = 1;
        if (r->next == 0)
            r->tq = dt_trace_now();
        size_t off = (size_t)r->next * r->piece;
        char *to = r->red ? r->red->tmp : r->buf;
        if (r->staged)
            dti_p2p_copy_queue(to + off, r->landing + off,
                               piece_len(r->total, r->piece, r->next), r->dev);
        r->next++;
    }
    if (r->dev) {
        dti_cuda_stream_sync();
        dt_trace_add(DT_EV_H2D, -1, r->total, r->tq, dt_trace_now());
    }
    if (r->red)
        dti_reduce_into(r->red->tmp, r->red->own, r->buf,
                        (int)(r->total / dt_type_size(r->red->type)), r->red->type,
                        r->red->op);
    r->got = r->total;
    r->done = 1;
}

static void recv_some(in_side *r, int tag, MPI_Comm comm, int *moved)
{
    while (!r->done) {
        if (r->np) {
            take_pieces(r, moved);
            return;
        }
        if (r->rawreq != MPI_REQUEST_NULL) {
            int flag = 0;
            DT_CHECK_MPI(MPI_Test(&r->rawreq, &flag, MPI_STATUS_IGNORE));
            if (!flag)
                return;
            take_plain(r);
            *moved = 1;
            return;
        }
        int flag = 0, count = 0;
        MPI_Message msg;
        MPI_Status st;
        DT_CHECK_MPI(MPI_Improbe(r->got ? r->from : r->peer, tag, comm, &flag, &msg, &st));
        if (!flag)
            return;
        *moved = 1;
        r->from = st.MPI_SOURCE;
        DT_CHECK_MPI(MPI_Get_count(&st, MPI_BYTE, &count));
        if (count == (int)sizeof(doorbell)) {
            doorbell d;
            DT_CHECK_MPI(MPI_Mrecv(&d, sizeof d, MPI_BYTE, &msg, MPI_STATUS_IGNORE));
            if (d.magic == MAGIC && d.slot == PIECES) {
                start_pieces(r, &d, &st, comm);
                continue;
            }
            if (d.magic == MAGIC) {
                take_piece(r, &d, comm);
                continue;
            }
            if (sizeof d > r->n)    /* plain bytes that happen to be a doorbell's size */
                too_long(r->from, sizeof d, r->n, comm);
            r->landing = (char *)&d;
            r->rawn = sizeof d;
            take_plain(r);
            return;
        }
        if ((size_t)count > r->n)
            too_long(r->from, (size_t)count, r->n, comm);
        r->rawn = (size_t)count;
        /* MPI writes host memory only: device data lands in staging */
        r->landing = r->dev ? dti_p2p_staging(1, r->n) : r->red ? r->red->tmp : r->buf;
        DT_CHECK_MPI(MPI_Imrecv(r->landing, count, MPI_BYTE, &msg, &r->rawreq));
    }
}

void dti_mb_exchange(const void *sbuf, size_t snbytes, int dst, void *rbuf, size_t rnbytes,
                     int src, int tag, MPI_Comm comm, const dti_mb_reduce *red,
                     dt_via *svia, dt_via *rvia, double *idle)
{
    out_side s = { .buf = sbuf, .n = snbytes, .peer = dst, .done = sbuf == NULL,
                   .hreq = MPI_REQUEST_NULL };
    in_side r = { .buf = rbuf, .n = rnbytes, .peer = src, .red = red, .total = SIZE_MAX,
                  .done = rbuf == NULL, .rawreq = MPI_REQUEST_NULL };
    for (int k = 0; k < SLOTS; k++)
        s.req[k] = MPI_REQUEST_NULL;
    if (sbuf) {
        s.w = dti_p2p_world_rank(dst, comm);
        s.dev = dt_is_device_ptr(sbuf);
        s.via = via_of(s.w >= 0 && mb.local_of ? mb.local_of[s.w] : -1, s.dev, snbytes);
        DT_REQUIRE(snbytes <= DTI_MAX_PIECES * PIECE_MAX, "a message of %zu bytes is too "
                   "large for dtlab's p2p (at most %zu)", snbytes,
                   DTI_MAX_PIECES * PIECE_MAX);
    }
    if (rbuf)
        r.dev = dt_is_device_ptr(rbuf);
    int src_w = rbuf ? dti_p2p_world_rank(src, comm) : -1;   /* for a stuck wait's words */
    double t0 = dti_now();
    int waiting = 0;
    while (!s.done || !r.done) {
        int moved = 0;
        if (!s.done)
            send_some(&s, tag, comm, &moved);
        if (!r.done)
            recv_some(&r, tag, comm, &moved);
        if (moved || (s.done && r.done))
            continue;
        if (!waiting)
            dti_watch_waiting(waiting = 1);
        double i0 = dti_now();
        if (dt_polite())
            sched_yield();
        dti_p2p_poll(t0, r.done ? -1 : src_w, s.done ? -1 : s.w);
        *idle += dti_now() - i0;
    }
    if (waiting)
        dti_watch_waiting(-1);
    for (int k = 0; k < SLOTS; k++)     /* doorbells: small, sent at once */
        if (s.req[k] != MPI_REQUEST_NULL)
            DT_CHECK_MPI(MPI_Wait(&s.req[k], MPI_STATUS_IGNORE));
    if (s.hreq != MPI_REQUEST_NULL)
        DT_CHECK_MPI(MPI_Wait(&s.hreq, MPI_STATUS_IGNORE));
    DT_REQUIRE(!rbuf || r.got == r.total || r.total == SIZE_MAX, "mailbox: short message");
    if (svia)
        *svia = s.via;
    if (rvia)
        *rvia = r.via;
}
