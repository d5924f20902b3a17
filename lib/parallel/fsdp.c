/* FSDP / ZeRO: data parallelism in which no rank holds the whole training state.
 *
 * DDP keeps a full replica per rank: weights, gradients and optimizer state, N times
 * over. ZeRO (Rajbhandari et al., 2020) notices that each rank only needs the sum of the
 * gradients for the weights it updates, and only the optimizer state of those weights:
 * so it cuts every layer into N shards and gives each rank one.
 *
 * One layer, 4 ranks. W_l (out x in, row-major) then b_l, n_l floats, flattened as in
 * lib/nn and padded with zeros to 4*s_l, where s_l = ceil(n_l / 4); rank k owns the
 * elements [k*s_l, (k+1)*s_l) of the padded layer (the padding never moves: its
 * gradient is 0, so SGD and Adam leave it 0):
 *
 *     element   0          s_l        2s_l       3s_l        4s_l
 *               |  shard 0  |  shard 1  |  shard 2  |  shard 3 ::|
 *               [ W_l ................................ b_l ]000   <- padding
 *     owner        rank 0      rank 1      rank 2      rank 3
 *
 * Every rank computes on its own B/N rows of the global batch of B, as in DDP. What
 * each ZeRO stage keeps on a rank (the rest is fetched when needed, or never):
 *
 *     stage   working weights         gradients                master + optimizer state
 *       1     all layers              all layers (all step)    own shard
 *       2     all layers              own shard (+ one layer   own shard
 *                                     whole, while it is cut)
 *       3     own shard (+ one layer  own shard (+ one layer   own shard
 *             gathered, while used)   whole, while it is cut)
 *
 * One step (ZeRO-3; stages 1 and 2 skip the gathers, their weights being whole):
 *
 *     forward    l = 0 .. L-1:   allgather W_l -> x_{l+1} = act(x_l W_l^T + b_l)
 *                                -> drop W_l
 *     backward   l = L-1 .. 0:   allgather W_l -> dW_l, db_l, dx_l -> drop W_l
 *                                reduce-scatter dW_l -> keep the own shard -> drop dW_l
 *     optimizer  each layer:     SGD or Adam on the own master shard (fp32), written to
 *                                the own working shard (fp16 in mixed precision)
 *     (stages 1, 2: then allgather each layer's updated shards into its whole weights)
 *
 * Stage 1 reduce-scatters the gradients after backward, layer by layer; stage 2 as soon
 * as each layer's backward is done, which is what lets it drop the whole gradient of a
 * layer at once. Reduce-scatter, not allreduce, in stage 1 too: a rank updates only its
 * shard, so only its shard's sum is needed, for half an allreduce's bytes.
 *
 * Communication per step and rank (ring; P weights, w bytes each, padding included):
 * a reduce-scatter or an allgather of the model sends (N-1)/N * wP bytes, so
 *     stages 1, 2:  reduce-scatter + allgather      = 2(N-1)/N * wP  (DDP's allreduce)
 *     stage 3:      2 allgathers + reduce-scatter   = 3(N-1)/N * wP  (1.5x DDP)
 * Stage 3 pays half again DDP's traffic to hold only 1/N of the weights.
 *
 * Memory per rank (the ZeRO paper's formulas), mixed precision with Adam: 2 bytes of
 * fp16 weight, 2 of fp16 gradient, K = 12 of optimizer state (fp32 master 4, m 4, v 4):
 *     stage 1:  2P + 2P + 12P/N        stage 2:  2P + (2 + 12)P/N
 *     stage 3:  (2 + 2 + 12)P/N        (DDP:     (2 + 2 + 12)P)
 * In fp32 the working weights are the master weights (no copy): 4 + 4 + 8 with Adam,
 * 4 + 4 + 4 with SGD (momentum), divided the same way. dtlab books the master copy
 * under parameters, the rest of K under optimizer state. The summary prints the
 * formula beside what rank 0 measured (every rank holds the same). They differ by the
 * padding and by what is held for a moment: one gathered layer (stage 3), one layer's
 * whole gradient (stages 2, 3), and in fp16 one layer's weights and gradients as floats
 * (the CPU computes in fp32 on fp16 values). Activations are not counted. What is held
 * for a moment comes from room made once at set-up ("the pool", below), counted while
 * held: a step allocates nothing.
 *
 * --prefetch (ZeRO 3; FSDP2's explicit prefetching). A step makes 2L gathers in one order
 * on every rank: forward's 0 .. L-1, then backward's L-1 .. 0. Just in time, each is a
 * wait; prefetched, a communication thread (on its own duplicate of the communicator, as
 * ddp's) runs gather i+1 while the main thread computes with gather i:
 *
 *     just in time  main    |AG0|F0|AG1|F1|AG2|F2|AG2|B2 RS2|AG1|B1 RS1|AG0|B0 RS0|
 *
 *     prefetch      main    |wait|F0  |F1  |F2  |B2 RS2|B1 RS1|B0 RS0|
 *                   thread  |AG0 |AG1 |AG2 |AG2 |AG1   |AG0   |
 *                   (three layers; the main thread waits where a gather is late)
 *
 * Memory: gather i+1's buffer is held while gather i is in use, so the peak holds the
 * largest two successive gathers instead of the largest one: at most one more gathered
 * layer, w x the largest padded layer. (The turn gathers the last layer again while its
 * forward copy is in use, as FSDP2 frees a layer after forward; keeping it whole would
 * save that gather for one more layer held all backward.) Time: at best every gather but
 * the first hides behind compute; a gather slower than its layer's compute still shows,
 * as the main thread's wait (the step report). The bytes, the order of every sum and so
 * the weights are those without prefetch, bit for bit. Stages 1 and 2 hold every layer
 * whole and gather none: they refuse --prefetch (dt_train_check), never ignore it.
 *
 * --offload: the master shards, the optimizer state and the gradient shards live in host
 * memory while the model computes on the GPU (ZeRO-Offload); the optimizer runs on the
 * CPU. On the CPU everything is in host memory already: offload changes nothing.
 *
 * Trace: marks under coll "fsdp", chunk = layer, span each layer's gather (stage 3; with
 * --prefetch on the communication thread, overlapping the layer before's compute),
 * reduce-scatter, and gather-updated (stages 1, 2, after the optimizer); "free" marks
 * the instant stage 3 drops a gathered layer (trace.h). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "cuda.h"
#include "half.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "trace.h"

/* ==== the shards ==== */

typedef struct prefetcher prefetcher;

typedef struct {
    dti_run *r;
    const dt_train_config *cfg;
    MPI_Comm comm;
    int L, N, k;             /* units (the MLP's layers), ranks, this rank */
    int root;                /* a unit another uses too (the GPT's embeddings, whose wte
                                the head uses), held whole from its forward to its
                                backward; -1: none */
    int zero;                /* ZeRO stage 1, 2, 3 */
    int S;                   /* optimizer state floats per weight */
    MPI_Datatype type;       /* working type: MPI_FLOAT or DT_HALF */
    size_t ws;               /* its bytes */
    int fp16;
    int sep;                 /* master weights apart from the working ones */
    int host;                /* master, state, gradient shards in host memory (offload) */
    size_t *n, *s;           /* [L] layer size; shard size (the padded layer is N*s) */
    size_t *off;             /* [L] where the layer starts in the dt_mlp layout */
    size_t nmax, Pmax;       /* largest layer, largest padded layer */
    void **w;                /* [L] working weights: N*s (stages 1, 2) or s (stage 3) */
    float **master;          /* [L] s floats, the own shard (may alias w) */
    float **state;           /* [L] s*S floats */
    void **g;                /* [L] stage 1: the whole gradient, N*s elements */
    void **gs;               /* [L] the summed gradient shard, s elements (may alias g) */
    float *wf, *gf;          /* fp16: one layer's weights and gradients as floats */
    prefetcher *pf;          /* --prefetch: the communication thread; NULL without */
    char *room;              /* stage 3: the gathered layers' room, room_bytes (pool) */
    size_t room_bytes;
    int taken[2];            /* its front and back hold a gathered layer (pool) */
    void *whole;             /* stages 2, 3: one layer's whole gradient (whole_most) */
    void *root_w;            /* stage 3: the root's gathered weights, all step */
    void *root_g;            /* stages 2, 3: the root's whole gradient, all backward */
    float *rootf, *rootgf;   /* fp16: the root's weights and the using unit's gradient
                                of them, as floats */
} fsdp;

/* The own shard of layer l, working type: where the optimizer writes. */
static void *work_shard(const fsdp *f, int l)
{
    return f->zero < 3 ? (char *)f->w[l] + (size_t)f->k * f->s[l] * f->ws : f->w[l];
}

/* Sets up the shards and fills them from the initial weights (the same on every rank). */
static void fsdp_init(fsdp *f, dti_run *r)
{
    const dt_train_config *cfg = r->cfg;
    memset(f, 0, sizeof *f);
    f->r = r;
    f->cfg = cfg;
    f->comm = r->comm;
    f->L = dti_units(cfg);
    f->root = -1;
    for (int u = 0; u < f->L; u++)
        if (dti_unit_tied(cfg, u) >= 0)
            f->root = dti_unit_tied(cfg, u);
    DT_REQUIRE(f->root <= 0, "fsdp: a tied unit must be the first (unit %d)", f->root);
    f->N = r->size;
    f->k = r->rank;
    f->zero = cfg->zero;
    f->S = dt_optim_state_per_param(cfg->optim.kind);
    f->type = dti_work_type(r);
    f->ws = dti_work_size(r);
    f->fp16 = cfg->precision != DT_FP32;       /* fp16 or bf16 */
    f->host = cfg->offload && r->where == DT_CUDA;
    f->sep = f->fp16 || f->host;

    int L = f->L;
    f->n = dti_calloc(L, sizeof *f->n);
    f->s = dti_calloc(L, sizeof *f->s);
    f->off = dti_calloc(L, sizeof *f->off);
    f->w = dti_calloc(L, sizeof *f->w);
    f->master = dti_calloc(L, sizeof *f->master);
    f->state = dti_calloc(L, sizeof *f->state);
    f->g = dti_calloc(L, sizeof *f->g);
    f->gs = dti_calloc(L, sizeof *f->gs);
    for (int l = 0; l < L; l++) {
        f->n[l] = dti_unit_size(cfg, l);
        f->off[l] = dti_unit_offset(cfg, l);
        f->s[l] = (f->n[l] + f->N - 1) / f->N;
        DT_REQUIRE(f->s[l] * f->N <= (size_t)0x7fffffff, "layer %d has %zu weights: "
                   "more than the collectives' int counts can reach", l, f->n[l]);
        if (f->n[l] > f->nmax)
            f->nmax = f->n[l];
        if (f->s[l] * f->N > f->Pmax)
            f->Pmax = f->s[l] * f->N;
    }

    float *init = dti_calloc(r->nparams, sizeof(float));
    dti_init_weights(cfg, init);
    float *pad = dti_calloc(f->Pmax, sizeof(float));       /* one padded layer, host */
    dt_half *half = dti_calloc(f->Pmax, sizeof(dt_half));
    for (int l = 0; l < L; l++) {
        size_t n = f->n[l], s = f->s[l], P = s * f->N;
        memset(pad, 0, P * sizeof(float));
        memcpy(pad, init + f->off[l], n * sizeof(float));
        const void *src = pad;                 /* the padded layer, in the working type */
        if (f->fp16) {
            dti_from_float(pad, half, f->type, P);     /* fp16 or bf16 */
            src = half;
        }
        const char *mine = (const char *)src + (size_t)f->k * s * f->ws;
        if (f->zero < 3) {
            f->w[l] = dti_alloc(r, DTI_PARAMS, P * f->ws, 0);
            dt_memcpy(f->w[l], src, P * f->ws);
        } else if (f->sep) {
            f->w[l] = dti_alloc(r, DTI_PARAMS, s * f->ws, 0);
            dt_memcpy(f->w[l], mine, s * f->ws);
        }
        if (f->sep || f->zero == 3) {
            f->master[l] = dti_alloc(r, DTI_PARAMS, s * sizeof(float), f->host);
            dt_memcpy(f->master[l], pad + (size_t)f->k * s, s * sizeof(float));
        } else {
            f->master[l] = work_shard(f, l);            /* fp32: the weights themselves */
        }
        if (!f->w[l])
            f->w[l] = f->master[l];                     /* stage 3, fp32 */
        f->state[l] = dti_alloc(r, DTI_OPTIM, s * f->S * sizeof(float), f->host);
        if (f->zero == 1) {
            f->g[l] = dti_alloc(r, DTI_GRADS, P * f->ws, 0);
            f->gs[l] = f->host ? dti_alloc(r, DTI_GRADS, s * f->ws, 1) : f->g[l];
        } else {
            f->gs[l] = dti_alloc(r, DTI_GRADS, s * f->ws, f->host);
        }
    }
    if (f->fp16) {
        f->wf = dti_alloc(r, DTI_PARAMS, f->nmax * sizeof(float), 0);
        f->gf = dti_alloc(r, DTI_GRADS, f->nmax * sizeof(float), 0);
    }
    if (f->fp16 && f->root >= 0) {
        f->rootf = dti_alloc(r, DTI_PARAMS, f->n[f->root] * sizeof(float), 0);
        f->rootgf = dti_alloc(r, DTI_GRADS, f->n[f->root] * sizeof(float), 0);
    }
    free(half);
    free(pad);
    free(init);
}

static void fsdp_free(fsdp *f)
{
    dti_run *r = f->r;
    for (int l = 0; l < f->L; l++) {
        size_t s = f->s[l], P = s * f->N;
        if (f->gs[l] != f->g[l])
            dti_free(r, DTI_GRADS, f->gs[l], s * f->ws);
        dti_free(r, DTI_GRADS, f->g[l], P * f->ws);
        dti_free(r, DTI_OPTIM, f->state[l], s * f->S * sizeof(float));
        if (f->sep || f->zero == 3)
            dti_free(r, DTI_PARAMS, f->master[l], s * sizeof(float));
        /* w was allocated unless it is the master itself (stage 3, fp32); in fp32 at
         * stages 1-2 the master points into w, at rank 0 to its very start */
        if (f->zero < 3 || f->sep)
            dti_free(r, DTI_PARAMS, f->w[l], (f->zero < 3 ? P : s) * f->ws);
    }
    dti_free(r, DTI_PARAMS, f->wf, f->nmax * sizeof(float));
    dti_free(r, DTI_GRADS, f->gf, f->nmax * sizeof(float));
    if (f->rootf) {
        dti_free(r, DTI_PARAMS, f->rootf, f->n[f->root] * sizeof(float));
        dti_free(r, DTI_GRADS, f->rootgf, f->n[f->root] * sizeof(float));
    }
    dt_free(f->room);                           /* the pool: counted only while held */
    dt_free(f->whole);
    dt_free(f->root_w);
    dt_free(f->root_g);
    free(f->n); free(f->s); free(f->off); free(f->w); free(f->master);
    free(f->state); free(f->g); free(f->gs);
}

/* ==== the trace ==== */

/* Takes t0 for a mark: 0 without tracing. */
/* The trace's mark for layer l (coll "fsdp", phase gather, free, reduce-scatter or
 * gather-updated; chunk = layer, lo..hi = its weights in the whole model; trace.h)
 * spanning [t0, now], after the collective inside recorded its own events, or at this
 * instant (t0 ignored) when instant is 1; nbytes = the padded layer in the working
 * type, what the collective's buffer holds. */
static void mark(const fsdp *f, const char *phase, int step, int l, double t0,
                 int instant)
{
    dti_mark("fsdp", phase, step, l, f->off[l], f->off[l] + f->n[l], f->s[l] * f->N * f->ws,
             instant ? NAN : t0);
}

/* ==== gathering (stage 3), just in time or prefetched ==== */

/* Allgathers layer l's shards into whole (its padded N*s elements, working type) over
 * comm, and marks it in the trace. */
static void gather(fsdp *f, int l, void *whole, MPI_Comm comm, int step)
{
    size_t s = f->s[l];
    double t0 = dti_mark_begin();
    dt_allgather(f->w[l], (int)s, f->type, whole, (int)s, f->type, comm);
    mark(f, "gather", step, l, t0, 0);
}

/* A step's gathers in the order every rank makes them: gather i is of layer
 * layer_of(i), forward's 0 .. L-1 for i < L, then backward's L-1 .. 0; the root (held
 * whole from its forward to its backward) is not gathered again in backward. */
static int layer_of(const fsdp *f, int i)
{
    return i < f->L ? i : 2 * f->L - 1 - i;
}

static int ngathers(const fsdp *f)
{
    return 2 * f->L - (f->root == 0);
}

/* The most padded elements held gathered at once: the largest layer just in time;
 * prefetched, the largest two successive gathers. */
static size_t gathered_most(const fsdp *f)
{
    if (f->pf == NULL) {
        size_t most = 0;
        for (int l = 0; f->zero == 3 && l < f->L; l++)
            if (l != f->root && f->s[l] * f->N > most)
                most = f->s[l] * f->N;
        return most;
    }
    size_t most = 0;                            /* (the root has a place of its own) */
    for (int i = 0; i + 1 < ngathers(f); i++) {
        int a = layer_of(f, i), b = layer_of(f, i + 1);
        size_t two = ((a == f->root ? 0 : f->s[a]) + (b == f->root ? 0 : f->s[b])) * f->N;
        most = two > most ? two : most;
    }
    return most;
}

/* The largest padded layer but the root (whose gradient has a place of its own): what
 * the pool's whole gradient must hold */
static size_t whole_most(const fsdp *f)
{
    size_t most = 0;
    for (int l = 0; l < f->L; l++)
        if (l != f->root && f->s[l] * f->N > most)
            most = f->s[l] * f->N;
    return most;
}

/* ==== the pool: what a step holds for a moment, allocated once ====
 *
 * A step holds some buffers for a moment only: a gathered layer (stage 3) from its
 * gather to the end of its compute, one layer's whole gradient (stages 2, 3) from its
 * backward to its reduce-scatter. Allocated and freed each time, they would cost a
 * cudaMalloc and a cudaFree per layer, twice a step, and cudaFree waits for the whole
 * GPU: every kernel queued and every copy, the prefetching thread's gather in flight
 * too, which would cancel the overlap --prefetch exists for. So they come from room
 * made once at set-up (pool_alloc), and the books count each only while it is held
 * (dti_held), as if it were allocated then: the peak is the same either way.
 *
 *   gathered layers   gathered_most elements: the largest padded layer just in time;
 *                     prefetched, the largest two successive gathers, gather i at the
 *                     front of the room when i is even, at its back when i is odd:
 *
 *                     room |gather 0, 2, 4, ... ->      <- gather 1, 3, 5, ...|
 *
 *                     Two in a row never overlap (their sum is at most the room; the
 *                     back is aligned down to 256 bytes, for which the room has 256
 *                     more), and gather i+2 comes after gather i was released.
 *   whole gradient    the largest padded layer but the root (whole_most), zeroed before
 *                     each use
 *                     (backward adds into it; its padding must stay 0)
 *
 * A place is written again only after its last reader is done: the compute that read a
 * gathered layer has returned before layer_release (lib/nn's launchers wait for their
 * stream), and the next gather into that place is launched after it. (Were they to
 * return before their work is done, a gather on the main thread's stream would still
 * come after it; the prefetching thread's, on its own stream, would have to wait for an
 * event recorded at layer_release.) The main thread takes and puts back the places
 * (taken[]): a place taken twice aborts, on the CPU too. */
#define ROOM_ALIGN 256

static void pool_alloc(fsdp *f)
{
    dt_device_kind where = f->r->where;
    if (f->zero == 3) {
        f->room_bytes = gathered_most(f) * f->ws + (f->pf ? ROOM_ALIGN : 0);
        f->room = dt_malloc(f->room_bytes, where);
    }
    if (f->zero > 1)
        f->whole = dt_malloc(whole_most(f) * f->ws, where);
    if (f->root >= 0 && f->zero == 3)
        f->root_w = dt_malloc(f->s[f->root] * f->N * f->ws, where);
    if (f->root >= 0 && f->zero > 1)
        f->root_g = dt_malloc(f->s[f->root] * f->N * f->ws, where);
}

/* Takes the place of gather i (of layer layer_of(i)) in the room, booked under
 * parameters from now until put_back. */
static void *take(fsdp *f, int i)
{
    int back = f->pf != NULL && i % 2 == 1;
    size_t nbytes = f->s[layer_of(f, i)] * f->N * f->ws;
    if (layer_of(f, i) == f->root) {                /* a place of its own */
        dti_held(f->r, DTI_PARAMS, nbytes, 1);
        return f->root_w;
    }
    DT_REQUIRE(!f->taken[back], "fsdp: gather %d's place (the room's %s) is still held",
               i, back ? "back" : "front");
    f->taken[back] = 1;
    dti_held(f->r, DTI_PARAMS, nbytes, 1);
    return back ? f->room + ((f->room_bytes - nbytes) & ~(size_t)(ROOM_ALIGN - 1))
                : f->room;
}

static void put_back(fsdp *f, int l, void *held)
{
    if (held != f->root_w)
        f->taken[(char *)held != f->room] = 0;
    dti_held(f->r, DTI_PARAMS, f->s[l] * f->N * f->ws, 0);
}

/* The communication thread takes gathers [ndone, nlaunched) in order; the main thread
 * launches gather i+1 (its place in the pool taken, and booked, at launch) when it needs
 * gather i, then waits until ndone > i. The thread sleeps on a condition variable when
 * there is nothing to gather: a spinning thread would take the core the compute needs. */
struct prefetcher {
    MPI_Comm comm;           /* a duplicate of f->comm: the thread's own */
    void **buf;              /* [2L] gather i's whole layer, from its launch to its use */
    int step;                /* for the trace */
    double wait_s;           /* the main thread's wait for gathers, this step */
    pthread_mutex_t mu;
    pthread_cond_t work;     /* nlaunched grew, or stop was set */
    pthread_cond_t done;     /* ndone grew */
    int nlaunched, ndone, stop;
    pthread_t thread;
};

/* Device data: the thread picks the rank's GPU first (the GPU is per thread in CUDA),
 * as ddp's does; the shards it sends are not written during the step. Each thread
 * queues its work on a stream of its own (lib/device.cu, "Queued work"): this one
 * settles its gather before it says it is done, and the main thread its kernels before
 * it hands over a place in the pool that they may still read (launch). */
static void *prefetch_thread(void *arg)
{
    fsdp *f = arg;
    prefetcher *p = f->pf;
    if (dt_cuda_device() >= 0)
        dti_cuda_set_device(dt_cuda_device());
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->ndone == p->nlaunched && !p->stop)
            pthread_cond_wait(&p->work, &p->mu);
        if (p->ndone == p->nlaunched)               /* stop, and nothing left to do */
            break;
        int i = p->ndone, step = p->step;
        void *whole = p->buf[i];
        pthread_mutex_unlock(&p->mu);
        gather(f, layer_of(f, i), whole, p->comm, step);
        dti_cuda_settle();
        pthread_mutex_lock(&p->mu);
        p->ndone++;
        pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Starts the thread (--prefetch). Collective: duplicates the communicator; a checkpoint
 * refusal frees the duplicate (r->made). */
static void prefetch_start(fsdp *f)
{
    prefetcher *p = dti_calloc(1, sizeof *p);
    p->buf = dti_calloc((size_t)ngathers(f), sizeof *p->buf);
    DT_CHECK_MPI(MPI_Comm_dup(f->comm, &p->comm));
    f->r->made[f->r->nmade++] = p->comm;
    DT_REQUIRE(pthread_mutex_init(&p->mu, NULL) == 0, "pthread_mutex_init failed");
    DT_REQUIRE(pthread_cond_init(&p->work, NULL) == 0, "pthread_cond_init failed");
    DT_REQUIRE(pthread_cond_init(&p->done, NULL) == 0, "pthread_cond_init failed");
    f->pf = p;
    DT_REQUIRE(pthread_create(&p->thread, NULL, prefetch_thread, f) == 0,
               "could not start FSDP's prefetching thread");
}

/* Between steps (the thread is idle then): stops and frees it. */
static void prefetch_stop(fsdp *f)
{
    prefetcher *p = f->pf;
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    f->r->nmade = 0;
    DT_CHECK_MPI(MPI_Comm_free(&p->comm));
    free(p->buf);
    free(p);
    f->pf = NULL;
}

/* Main thread: takes gather i's place (held from now) and hands it to the thread;
 * gather 0 opens the step's sequence. */
static void launch(fsdp *f, int i, int step)
{
    prefetcher *p = f->pf;
    p->buf[i] = take(f, i);
    dti_cuda_settle();             /* the kernels that read the place's last layer */
    pthread_mutex_lock(&p->mu);
    if (i == 0) {                  /* the last step's 2L are done: the thread idles */
        p->ndone = 0;
        p->step = step;
        p->wait_s = 0;
    }
    p->nlaunched = i + 1;
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->mu);
}

/* Main thread: launches gather i+1, then waits for gather i and takes its buffer. */
static void *prefetched(fsdp *f, int i, int step)
{
    prefetcher *p = f->pf;
    if (i == 0)
        launch(f, 0, step);
    if (i + 1 < ngathers(f))
        launch(f, i + 1, step);
    double t0 = MPI_Wtime();
    pthread_mutex_lock(&p->mu);
    while (p->ndone <= i)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    p->wait_s += MPI_Wtime() - t0;
    void *whole = p->buf[i];
    p->buf[i] = NULL;
    return whole;
}

/* ==== one layer's weights, for forward or backward ==== */

/* Returns layer l's whole weights as floats (W_l then b_l), for forward (bwd 0) or
 * backward (1). Stage 3 first gathers them into *held, a place in the pool (booked
 * under parameters until layer_release): here, or from the prefetching thread; fp16
 * converts them into f->wf. step is for the trace. */
static const float *layer_acquire(fsdp *f, int l, int bwd, void **held, int step)
{
    int i = bwd ? 2 * f->L - 1 - l : l;             /* the step's gather i */
    const void *whole = f->w[l];
    *held = NULL;
    if (bwd && l == f->root && f->zero == 3) {      /* held since its forward */
        *held = f->root_w;
        whole = *held;
    } else if (f->pf) {
        *held = prefetched(f, i, step);
        whole = *held;
    } else if (f->zero == 3) {
        *held = take(f, i);
        gather(f, l, *held, f->comm, step);
        whole = *held;
    }
    if (!f->fp16)
        return whole;
    dti_to_float(whole, f->type, f->wf, f->n[l], 1.0f);
    return f->wf;
}

static void layer_release(fsdp *f, int l, void *held, int step)
{
    if (held == NULL)
        return;                                 /* stages 1, 2: nothing was gathered */
    put_back(f, l, held);
    mark(f, "free", step, l, 0, 1);
}

/* Sums layer l's whole gradient (N*s elements of the working type, this rank's rows)
 * over the ranks, in place; the own shard, at the front afterwards, goes to gs[l]. */
static void layer_reduce(fsdp *f, int l, void *whole, int step)
{
    size_t s = f->s[l];
    double t0 = dti_mark_begin();
    dt_reduce_scatter_block(MPI_IN_PLACE, whole, (int)s, f->type, MPI_SUM, f->comm);
    mark(f, "reduce-scatter", step, l, t0, 0);
    if (f->gs[l] != whole)
        dt_memcpy(f->gs[l], whole, s * f->ws);
}

/* ==== forward and backward of this rank's rows ==== */

/* The root's whole weights as floats, for the unit that uses them too: held gathered
 * (stage 3) or whole (1, 2); widened into rootf in fp16 */
static const float *root_weights(const fsdp *f)
{
    const void *w = f->zero == 3 ? f->root_w : f->w[f->root];
    if (!f->fp16)
        return w;
    dti_to_float(w, f->type, f->rootf, f->n[f->root], 1.0f);
    return f->rootf;
}

static const float *forward(fsdp *f, dti_unit_acts *a, const float *x, int B, int step)
{
    const float *out = NULL;
    for (int l = 0; l < f->L; l++) {
        void *held;
        const float *W = layer_acquire(f, l, 0, &held, step);   /* the unit's weights */
        int t = dti_unit_tied(f->cfg, l);
        out = dti_unit_forward(a, l, W, t >= 0 ? root_weights(f) : NULL, x, B, step);
        if (l != f->root)                         /* the root: held until its backward */
            layer_release(f, l, held, step);
    }
    return out;
}

/* Backward from dlogits. Leaves the summed gradient shards in gs. */
static void backward(fsdp *f, dti_unit_acts *a, const float *dlogits, int B, int step)
{
    size_t root_bytes = f->root >= 0 ? f->s[f->root] * f->N * f->ws : 0;
    if (f->root >= 0 && f->zero > 1) {            /* its gradient: from the first unit
                                                     that uses it to its own backward */
        dt_memzero(f->root_g, root_bytes);
        dti_held(f->r, DTI_GRADS, root_bytes, 1);
    }
    for (int l = f->L - 1; l >= 0; l--) {
        size_t n = f->n[l], P = f->s[l] * f->N;
        void *held;
        const float *W = layer_acquire(f, l, 1, &held, step);
        /* the layer's whole gradient: kept all step (stage 1) or only until it is cut,
         * in the pool's (booked while held) */
        void *whole = f->g[l];
        if (f->zero > 1 && l == f->root) {
            whole = f->root_g;
        } else if (f->zero > 1) {
            whole = f->whole;
            dt_memzero(whole, P * f->ws);
            dti_held(f->r, DTI_GRADS, P * f->ws, 1);
        }
        float *dW = f->fp16 ? f->gf : whole;              /* the unit's layout */
        if (f->fp16)
            dt_memzero(f->gf, n * sizeof(float));
        int t = dti_unit_tied(f->cfg, l);
        void *rg = t < 0 ? NULL : f->zero > 1 ? f->root_g : f->g[t];   /* the root's */
        float *dWt = f->fp16 && rg ? f->rootgf : rg;
        if (f->fp16 && rg)
            dt_memzero(f->rootgf, f->n[t] * sizeof(float));
        const float *Wt = t >= 0 ? root_weights(f) : NULL;
        dti_unit_backward(a, l, W, Wt, dlogits, dW, dWt, B, step);
        if (f->fp16)
            dti_accumulate(whole, f->type, f->gf, n);
        if (f->fp16 && rg)
            dti_accumulate(rg, f->type, f->rootgf, f->n[t]);
        layer_release(f, l, held, step);
        if (f->zero > 1) {
            layer_reduce(f, l, whole, step);
            dti_held(f->r, DTI_GRADS, l == f->root ? root_bytes : P * f->ws, 0);
        }
    }
    if (f->zero == 1)
        for (int l = f->L - 1; l >= 0; l--)
            layer_reduce(f, l, f->g[l], step);
}

/* The optimizer on the own shards; stages 1 and 2 then gather the updated shards into
 * every rank's whole weights. */
static void update(fsdp *f, int step)
{
    for (int l = 0; l < f->L; l++) {
        double t0 = dt_trace_now();
        dti_master_step(f->r, f->master[l], work_shard(f, l), f->gs[l], f->state[l],
                        f->s[l]);
        dti_compute_event("optimizer", step, l, -1, t0);
    }
    if (f->zero < 3)
        for (int l = 0; l < f->L; l++) {
            double t0 = dti_mark_begin();
            dt_allgather(MPI_IN_PLACE, 0, f->type, f->w[l], (int)f->s[l], f->type,
                         f->comm);
            mark(f, "gather-updated", step, l, t0, 0);
        }
}

/* ==== the report ==== */

/* The ZeRO formula for this run (unpadded, nothing transient) and what the
 * allocations above add up to at their peak, for params, grads, optimizer state. */
static void expected_bytes(const fsdp *f, double formula[3], size_t exact[3])
{
    double P = (double)f->r->nparams, N = f->N, w = (double)f->ws;
    double M = f->sep ? 4 : 0, K = 4.0 * f->S;
    formula[DTI_PARAMS] = (f->zero < 3 ? w * P : w * P / N) + M * P / N;
    formula[DTI_GRADS] = f->zero == 1 ? w * P : w * P / N;
    formula[DTI_OPTIM] = K * P / N;

    size_t sums = 0;                                      /* all shards: padded P / N */
    for (int l = 0; l < f->L; l++)
        sums += f->s[l];
    size_t sumP = sums * f->N, fl = f->fp16 ? f->nmax * sizeof(float) : 0;
    exact[DTI_PARAMS] = (f->zero < 3 ? sumP : sums) * f->ws +
                        (f->sep ? sums * sizeof(float) : 0) + fl +
                        gathered_most(f) * f->ws;
    exact[DTI_GRADS] = (f->zero == 1 ? sumP * f->ws + (f->host ? sums * f->ws : 0)
                                     : sums * f->ws + whole_most(f) * f->ws) + fl;
    exact[DTI_OPTIM] = sums * f->S * sizeof(float);
    if (f->root >= 0) {           /* the root, whole: weights (stage 3), gradient (2, 3) */
        size_t rb = f->s[f->root] * f->N * f->ws, rf = f->fp16 ? f->n[f->root] * 4 : 0;
        exact[DTI_PARAMS] += (f->zero == 3 ? rb : 0) + rf;     /* fp16: and as floats */
        exact[DTI_GRADS] += (f->zero > 1 ? rb : 0) + rf;
    }
}

/* A summary line of any length, cut at spaces into lines of at most 78 columns. */
static void summary_wrapped(dti_run *r, const char *text)
{
    const int width = 76;                       /* after the two spaces of indent */
    const char *p = text;
    while (*p) {
        int len = (int)strlen(p);
        if (len > width) {
            len = width;
            while (len > 0 && p[len] != ' ')
                len--;
            if (len == 0)
                len = width;
        }
        dti_summary(r, "  %.*s", len, p);
        p += len;
        while (*p == ' ')
            p++;
    }
}

static void report(const fsdp *f, size_t sent_steps, int steps)
{
    dti_run *r = f->r;
    const dt_train_config *cfg = r->cfg;
    size_t sums = 0;
    for (int l = 0; l < f->L; l++)
        sums += f->s[l];
    double formula[3];
    size_t exact[3];
    expected_bytes(f, formula, exact);
    int w = (int)f->ws, M = f->sep ? 4 : 0, K = 4 * f->S;

    dti_summary(r, "fsdp: ZeRO-%d on %d ranks, %s, %s; P = %zu weights, %zu padded",
                f->zero, f->N, cfg->optim.kind == DT_ADAM ? "adam" : "sgd",
                f->fp16 ? "fp16" : "fp32", r->nparams, sums * f->N);
    /* the paper's formula, and the same cut into dtlab's three columns */
    char zf[32], cp[24], cg[16], co[16];
    if (f->zero == 1)
        snprintf(zf, sizeof zf, "%dP+%dP+%dP/N", w, w, M + K);
    else if (f->zero == 2)
        snprintf(zf, sizeof zf, "%dP+(%d+%d)P/N", w, w, M + K);
    else
        snprintf(zf, sizeof zf, "(%d+%d+%d)P/N", w, w, M + K);
    if (f->zero < 3)
        snprintf(cp, sizeof cp, M ? "%dP+%dP/N" : "%dP", w, M);
    else
        snprintf(cp, sizeof cp, "%dP/N", w + M);
    snprintf(cg, sizeof cg, f->zero == 1 ? "%dP" : "%dP/N", w);
    snprintf(co, sizeof co, "%dP/N", K);
    dti_summary(r, "bytes per rank (every rank alike)   params      grads      optim");
    dti_summary(r, "  formula %-8s %-5s %-5s %10.0f %10.0f %10.0f  = %s", cp, cg, co,
                formula[0], formula[1], formula[2], zf);
    dti_summary(r, "  expected                      %10zu %10zu %10zu", exact[0],
                exact[1], exact[2]);
    int same = r->peak[0] == exact[0] && r->peak[1] == exact[1] && r->peak[2] == exact[2];
    dti_summary(r, "  measured peak                 %10zu %10zu %10zu%s", r->peak[0],
                r->peak[1], r->peak[2], same ? "" : "  (not as expected!)");
    char why[400];
    snprintf(why, sizeof why, "expected = the formula on padded layers%s%s%s%s",
             f->pf ? " + two gathered layers (the largest two in a row: prefetch)"
             : f->zero == 3 ? " + one gathered layer" : "",
             f->zero > 1 ? " + one layer's whole gradient" : "",
             f->fp16 ? " + one layer's weights and gradients as floats (the CPU "
             "computes fp16 in fp32)" : "",
             f->root >= 0 && f->zero > 1 ? " + the embeddings whole (their weights from "
             "forward to backward in stage 3, their gradient all backward: the head "
             "uses wte too)" : "");
    summary_wrapped(r, why);
    summary_wrapped(r, f->sep ? "params include the fp32 master shards (4 bytes a "
                    "weight, in ZeRO's K)" : "in fp32 the working weights are "
                    "the master weights: no copy");
    if (f->pf) {
        size_t one = whole_most(f), more = (gathered_most(f) - one) * f->ws;
        dti_summary(r, "  prefetch: %zu bytes more, the largest two gathers in a row less the",
                    more);
        dti_summary(r, "    largest one; at most one more gathered layer, w x %zu = %zu",
                    one, one * f->ws);
    }
    if (cfg->offload)
        dti_summary(r, "  offload: %s", f->host ? "master, optimizer state and gradient "
                    "shards in host memory; the optimizer runs on the CPU"
                    : "on the CPU everything is in host memory already: nothing moved");
    int k = f->zero == 3 ? 3 : 2;
    dti_summary(r, "sent per step, rank 0: %.0f bytes%s; expected %zu =", (double)
                sent_steps / steps, f->fp16 ? " (with the scaler's flag)" : "",
                (size_t)k * (f->N - 1) * sums * f->ws);
    dti_summary(r, "  %s = %d(N-1)/N x %zu bytes of weights", f->zero == 3 ?
                "2 allgathers + reduce-scatter" : "reduce-scatter + allgather", k,
                sums * f->N * f->ws);
}

/* ==== training ==== */

void dti_train_fsdp(dti_run *r)
{
    const dt_train_config *cfg = r->cfg;
    DT_REQUIRE(cfg->zero >= 1 && cfg->zero <= 3, "fsdp: --zero must be 1, 2 or 3, not %d",
               cfg->zero);
    DT_REQUIRE(cfg->accum == 1, "fsdp: --accum is for ddp; fsdp takes one batch a step "
               "(--accum %d)", cfg->accum);
    DT_REQUIRE(!cfg->prefetch || cfg->zero == 3, "fsdp: --prefetch is for --zero 3");
    fsdp f;
    fsdp_init(&f, r);
    if (cfg->prefetch)
        prefetch_start(&f);
    pool_alloc(&f);                     /* after prefetch_start: its room is larger */
    int Bg = cfg->batch, B = Bg / f.N, first = f.k * B;
    DT_REQUIRE(B * f.N == Bg, "fsdp: a batch of %d rows cannot be shared by %d ranks", Bg,
               f.N);
    int lpe = dti_labels_per_example(cfg);       /* labels per example: 1, the GPT's seq */
    int classes = cfg->kind == DT_MODEL_GPT ? cfg->gpt.vocab : cfg->model.out;

    dti_unit_acts a;
    dti_unit_acts_alloc(cfg, B, r->where, f.type, &a);
    size_t acts = a.kept;               /* what forward keeps */
    dti_held(r, DTI_ACTS, acts, 1);
    float *x = dti_calloc((size_t)B * dti_data_cols(cfg), sizeof(float));
    int *y = dti_calloc((size_t)B * lpe, sizeof(int));
    int *yd = r->where == DT_CUDA ? dt_malloc((size_t)B * lpe * sizeof(int), DT_CUDA) : y;
    size_t sent_steps = 0;

    /* checkpoints: every rank its master and optimizer shards; the working weights are
     * rebuilt from them (rounded in fp16, gathered whole in stages 1 and 2) */
    char name[24];
    for (int l = 0; l < f.L; l++) {
        /* layer l's parameters [k s, (k + 1) s), the last shard's tail padding */
        size_t a = f.k * f.s[l], e = a + f.s[l] < f.n[l] ? a + f.s[l] : f.n[l];
        dti_span own = { f.off[l] + a, e > a ? e - a : 0, 1, 0 };
        snprintf(name, sizeof name, "weights.%d", l);
        dti_ckpt_region(r, name, f.master[l], f.s[l] * sizeof(float));
        dti_ckpt_map(r, name, 1, &own, 1);
        snprintf(name, sizeof name, "state.%d", l);
        dti_ckpt_region(r, name, f.state[l], f.s[l] * f.S * sizeof(float));
        dti_ckpt_map(r, name, f.S, &own, 1);
    }
    int s0 = dti_ckpt_start(r, r->rank);
    for (int l = 0; s0 > 0 && l < f.L; l++) {
        if (f.sep)
            dti_from_float(f.master[l], work_shard(&f, l), f.type, f.s[l]);
        if (f.zero < 3)
            dt_allgather(MPI_IN_PLACE, 0, f.type, f.w[l], (int)f.s[l], f.type, f.comm);
    }

    for (int step = s0 + 1; step <= cfg->steps; step++) {
        dti_step_begin(r, step);
        size_t sent0 = dt_bytes_sent();
        dti_batch(cfg, step - 1, Bg, first, B, x, y);
        if (yd != y)
            dt_memcpy_input(yd, y, (size_t)B * lpe * sizeof(int));
        if (f.zero == 1)
            for (int l = 0; l < f.L; l++)
                dt_memzero(f.g[l], f.s[l] * f.N * f.ws);

        float *logits = (float *)forward(&f, &a, x, B, step);
        double t0 = dt_trace_now();
        /* dlogits over the logits (backward does not need them): loss scale / B */
        double loss = dt_xent(logits, yd, B * lpe, classes,
                              dti_loss_scale(r) / (float)(Bg * lpe), logits);
        if (f.fp16)
            dti_round_to(f.type, logits, (size_t)B * lpe * classes);
        dti_compute_event("loss", step, -1, -1, t0);
        backward(&f, &a, logits, B, step);

        int found = 0;
        for (int l = 0; f.fp16 && l < f.L && !found; l++)
            found = dti_nonfinite(f.gs[l], f.type, f.s[l]);
        char extra[160], scaler[120];
        int ok = dti_scaler_decide(r, found, r->comm, scaler, sizeof scaler);
        if (ok)
            update(&f, step);

        dt_reduce(r->rank == 0 ? MPI_IN_PLACE : &loss, &loss, 1, MPI_DOUBLE, MPI_SUM, 0,
                  r->comm);
        size_t sent = dt_bytes_sent() - sent0;
        sent_steps += sent;
        char waited[48] = "";
        if (f.pf)
            snprintf(waited, sizeof waited, ", waited %.2f ms for gathers",
                     f.pf->wait_s * 1e3);
        snprintf(extra, sizeof extra, "sent %.1f KiB%s%s%s", sent / 1024.0, waited,
                 scaler[0] ? ", " : "", scaler);
        dti_step_end(r, step, (float)(loss / ((double)Bg * lpe)), !ok, extra);
        dti_ckpt_step(r, step);
    }

    /* final weights: each rank its master shards, at their places, padding left out */
    float *owned = dti_calloc(r->nparams, sizeof(float));
    float *shard = dti_calloc((f.Pmax + f.N - 1) / f.N, sizeof(float));
    for (int l = 0; l < f.L; l++) {
        size_t lo = (size_t)f.k * f.s[l], hi = lo + f.s[l];
        if (hi > f.n[l])
            hi = f.n[l];
        if (lo >= hi)
            continue;
        dt_memcpy(shard, f.master[l], (hi - lo) * sizeof(float));
        memcpy(owned + f.off[l] + lo, shard, (hi - lo) * sizeof(float));
    }
    dti_result_params(r, owned);
    report(&f, sent_steps, cfg->steps - s0);
    prefetch_stop(&f);

    free(shard);
    free(owned);
    if (yd != y)
        dt_free(yd);
    free(y);
    free(x);
    dti_unit_acts_free(&a);
    dti_held(r, DTI_ACTS, acts, 0);
    fsdp_free(&f);
}
