/* DDP's gradient buckets: the gradients summed over the data-parallel ranks in pieces,
 * while backward is still running.
 *
 * Why buckets. After backward every rank must hold the sum of everyone's gradients. Two
 * extremes, both slow:
 *   - one allreduce per layer: many small messages, and each pays the network's latency
 *     (alpha) 2(N-1) times, however few bytes it carries;
 *   - one allreduce of everything: the fewest latencies, but it cannot start before the
 *     last gradient exists, so the network idles during backward and the GPU idles during
 *     the allreduce.
 * A bucket is a run of consecutive layers of about cap_bytes: big enough that bandwidth,
 * not latency, sets its cost; small enough that the first buckets are ready long before
 * backward ends.
 *
 * Why reverse order. Backward produces the gradients of layer L-1 first and of layer 0
 * last, so bucket 0 holds the last layers and is ready first:
 *
 *     layers        0    1    2    3    4    5        grads: one contiguous array,
 *     buckets      [  b2   ][  b1   ][   b0   ]       layer i at [off[i], off[i+1])
 *
 *     time -->
 *     backward     | L5 | L4 | L3 | L2 | L1 | L0 |
 *     comm thread            [ allreduce b0 ][ allreduce b1 ][ allreduce b2 ]
 *                                                ^ backward ends            ^ finish
 *
 * Every rank must start the same allreduces in the same order, or rank 0's bucket 1
 * would meet rank 1's bucket 0. Layers may finish in any order (a model's backward need
 * not go strictly from last to first), so a ready bucket goes out only after every bucket
 * with a smaller number: buckets leave in the order 0, 1, 2, ... on every rank (PyTorch's
 * Reducer does the same).
 *
 * Cost model (ring allreduce, N ranks, latency alpha, bandwidth beta). A bucket of B
 * bytes costs
 *     2(N-1) alpha  +  2(N-1)/N * B / beta
 * so K buckets over G bytes of gradients cost 2(N-1) K alpha + 2(N-1)/N G / beta: the
 * bandwidth term does not depend on K, the latency term grows with it.
 *
 * What overlap hides. With overlap = 1 a communication thread allreduces bucket k while
 * the main thread computes the gradients of the layers before it. What is left when
 * backward ends (what dti_ddp_finish waits for, dti_ddp_wait_seconds) is the last bucket's
 * allreduce plus any backlog: at best one bucket's cost instead of all of them. With
 * overlap = 0 nothing is sent during backward, and dti_ddp_finish sends every bucket in
 * order afterwards ("backward, then communicate"): the baseline the lesson compares with.
 *
 * Compression (train --compress, compress.c). With compress set, a bucket is encoded
 * (fp16, int8 or sign), sent and decoded instead of allreduced as fp32; the buckets,
 * their order and the thread stay as they are. ddp counts the bytes each bucket sends
 * (dt_bytes_sent before and after: nothing else sends during backward in mode ddp) and
 * reports them beside compress.c's model (dti_ddp_summary).
 *
 * Trace: a mark (coll "ddp", phase "bucket", chunk = the bucket) spans each bucket's
 * allreduce, on the thread that ran it.
 *
 * Threads. The communication thread allreduces on its own duplicate of the communicator:
 * one thread in dtlab's p2p per communicator at a time, so the main thread stays free to
 * use the others (a pipeline's, a tensor-parallel group's) meanwhile. It sleeps on a
 * condition variable when there is no work: a spinning thread would take the core that
 * backward needs. */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include "parallel_internal.h"
#include "buf.h"
#include "collectives/collectives.h"
#include "cuda.h"
#include "p2p.h"
#include "trace.h"
#include "units.h"

struct dti_ddp {
    char *grads;              /* n elements of type, host or device; not owned */
    MPI_Datatype type;
    size_t esize;             /* bytes per element */
    int nl, nb;               /* layers, buckets */
    const size_t *off;        /* [nl + 1], a copy (owned) */
    int *bucket_of;           /* [nl] the bucket of layer i */
    int *nlayers;             /* [nb] layers in bucket b */
    size_t *lo, *hi;          /* [nb] bucket b is grads[lo[b], hi[b]) */
    int overlap;
    MPI_Comm comm;            /* the caller's (overlap 0) or our duplicate (overlap 1) */
    dti_compressor *z;        /* NULL: buckets travel as they are (dti_ddp_compress) */
    size_t sent, sent_total;  /* bytes the buckets sent: this step, all steps */
    size_t sent_last;         /* the last step's */

    /* this step, main thread only */
    int step;                 /* from 1, for the trace */
    unsigned char *done;      /* [nl] layer i reported this step */
    int *left;                /* [nb] layers of bucket b not yet reported */
    int nreported;            /* layers reported this step */
    double wait_s;            /* the last step's wait in dti_ddp_finish */

    /* the queue of ready buckets, guarded by mu: buckets [nreduced, nlaunched) wait for
     * the communication thread, which takes them in order */
    pthread_mutex_t mu;
    pthread_cond_t work;      /* nlaunched grew, or stop was set */
    pthread_cond_t idle;      /* nreduced grew */
    int nlaunched, nreduced;
    int stop;
    pthread_t thread;
};

/* ==== one bucket ==== */

/* Sums bucket b over d->comm in place; then a mark in the trace spanning it, which
 * tells buckets apart (chunk = bucket, lo..hi = its elements in grads; a mark takes the
 * receive chunk of the context, trace.c). On the communication thread with overlap:
 * the trace's context is per thread. */
static void reduce_bucket(dti_ddp *d, int b, int step)
{
    size_t count = d->hi[b] - d->lo[b];
    int tracing = dt_trace_enabled();
    double t0 = tracing ? dt_trace_now() : 0;
    size_t sent0 = dt_bytes_sent();
    if (d->z)
        dti_compressor_allreduce(d->z, b, (float *)d->grads + d->lo[b], d->lo[b],
                                 d->hi[b], d->comm);
    else    /* the ring, whatever the size: its bytes per rank, 2(N-1)/N of the bucket,
             * do not grow with N, which is what lets DDP scale (dt_allreduce would take
             * recursive doubling for small buckets) */
        dt_allreduce_ring(MPI_IN_PLACE, d->grads + d->lo[b] * d->esize, (int)count,
                          d->type, MPI_SUM, d->comm);
    d->sent += dt_bytes_sent() - sent0;
    if (tracing)
        dti_mark("ddp", "bucket", step, b, d->lo[b], d->hi[b], count * d->esize, t0);
}

/* ==== the communication thread (overlap = 1) ==== */

/* Device data: the GPU a thread uses is per thread in CUDA, so the thread picks the
 * rank's GPU first. Each thread queues its work on a stream of its own (lib/device.cu,
 * "Queued work"), which does not wait for the other thread's: so the main thread
 * settles backward's kernels before it hands a bucket over (dti_ddp_layer_done), and
 * this thread its own (the codecs' kernels) before it says a bucket is reduced. */
static void *comm_thread(void *arg)
{
    dti_ddp *d = arg;
    if (dt_cuda_device() >= 0)
        dti_cuda_set_device(dt_cuda_device());
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->nreduced == d->nlaunched && !d->stop)
            pthread_cond_wait(&d->work, &d->mu);
        if (d->nreduced == d->nlaunched)            /* stop, and nothing left to do */
            break;
        int b = d->nreduced, step = d->step;
        pthread_mutex_unlock(&d->mu);
        reduce_bucket(d, b, step);
        dti_cuda_settle();
        pthread_mutex_lock(&d->mu);
        d->nreduced++;
        pthread_cond_signal(&d->idle);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ==== setting up ==== */

/* parallel.h. Walks the layers from the last; an empty layer joins the open bucket. */
int dt_ddp_buckets(const size_t *off, int nl, size_t esize, size_t cap, int *bucket_of)
{
    int nb = 0;
    size_t fill = 0;                  /* bytes in the open bucket */
    for (int i = nl - 1; i >= 0; i--) {
        size_t nbytes = (off[i + 1] - off[i]) * esize;
        if (fill > 0 && nbytes > 0 && fill + nbytes > cap) {
            nb++;
            fill = 0;
        }
        fill += nbytes;
        bucket_of[i] = nb;
    }
    return nb + 1;
}

dti_ddp *dti_ddp_new(void *grads, MPI_Datatype type, const size_t *off, int nl,
                     MPI_Comm comm, size_t cap_bytes, int overlap)
{
    DT_REQUIRE(nl >= 1, "dti_ddp_new: %d layers; DDP needs at least 1", nl);
    DT_REQUIRE(off != NULL, "dti_ddp_new: the layer offsets are NULL");
    DT_REQUIRE(grads != NULL, "dti_ddp_new: the gradients are NULL");
    DT_REQUIRE(overlap == 0 || overlap == 1, "dti_ddp_new: overlap is %d; use 0 or 1",
               overlap);
    for (int i = 0; i < nl; i++)
        DT_REQUIRE(off[i] <= off[i + 1], "dti_ddp_new: layer offsets must not decrease, "
                   "but off[%d] = %zu > off[%d] = %zu", i, off[i], i + 1, off[i + 1]);

    dti_ddp *d = dti_calloc(1, sizeof *d);
    d->grads = grads;
    d->type = type;
    d->esize = dt_type_size(type);
    d->nl = nl;
    d->overlap = overlap;
    size_t *off_copy = dti_calloc((size_t)nl + 1, sizeof *off_copy);
    for (int i = 0; i <= nl; i++)
        off_copy[i] = off[i];
    d->off = off_copy;

    d->bucket_of = dti_calloc((size_t)nl, sizeof *d->bucket_of);
    d->nb = dt_ddp_buckets(off, nl, d->esize, cap_bytes, d->bucket_of);
    d->nlayers = dti_calloc((size_t)d->nb, sizeof *d->nlayers);
    d->left = dti_calloc((size_t)d->nb, sizeof *d->left);
    d->lo = dti_calloc((size_t)d->nb, sizeof *d->lo);
    d->hi = dti_calloc((size_t)d->nb, sizeof *d->hi);
    for (int b = 0; b < d->nb; b++)
        d->lo[b] = SIZE_MAX;
    for (int i = 0; i < nl; i++) {       /* a bucket's layers are consecutive */
        int b = d->bucket_of[i];
        d->nlayers[b]++;
        if (off[i] < d->lo[b]) d->lo[b] = off[i];
        if (off[i + 1] > d->hi[b]) d->hi[b] = off[i + 1];
    }
    for (int b = 0; b < d->nb; b++) {
        d->left[b] = d->nlayers[b];
        DT_REQUIRE(d->hi[b] - d->lo[b] <= (size_t)INT_MAX, "dti_ddp_new: bucket %d holds "
                   "%zu elements, more than one allreduce takes (INT_MAX); one layer is "
                   "too large", b, d->hi[b] - d->lo[b]);
    }
    d->done = dti_calloc((size_t)nl, 1);
    d->step = 1;

    d->comm = comm;
    if (overlap) {
        dti_comm_dup(comm, &d->comm);
        DT_REQUIRE(pthread_mutex_init(&d->mu, NULL) == 0, "pthread_mutex_init failed");
        DT_REQUIRE(pthread_cond_init(&d->work, NULL) == 0, "pthread_cond_init failed");
        DT_REQUIRE(pthread_cond_init(&d->idle, NULL) == 0, "pthread_cond_init failed");
        DT_REQUIRE(pthread_create(&d->thread, NULL, comm_thread, d) == 0,
                   "could not start DDP's communication thread");
    }
    return d;
}

void dti_ddp_free(dti_ddp *d)
{
    if (d == NULL)
        return;
    DT_REQUIRE(d->nreported == 0, "dti_ddp_free: step %d is half done (%d of %d layers "
               "reported); call dti_ddp_finish first", d->step, d->nreported, d->nl);
    if (d->overlap) {
        pthread_mutex_lock(&d->mu);
        d->stop = 1;
        pthread_cond_signal(&d->work);
        pthread_mutex_unlock(&d->mu);
        pthread_join(d->thread, NULL);
        pthread_cond_destroy(&d->idle);
        pthread_cond_destroy(&d->work);
        pthread_mutex_destroy(&d->mu);
        DT_CHECK_MPI(MPI_Comm_free(&d->comm));
    }
    dti_compressor_free(d->z);
    free(d->done);
    free(d->hi);
    free(d->lo);
    free(d->left);
    free(d->nlayers);
    free(d->bucket_of);
    free((void *)d->off);
    free(d);
}

int dti_ddp_nbuckets(const dti_ddp *d) { return d->nb; }

double dti_ddp_wait_seconds(const dti_ddp *d) { return d->wait_s; }

MPI_Comm dti_ddp_comm(const dti_ddp *d) { return d->comm; }

/* ==== a step ==== */

void dti_ddp_layer_done(dti_ddp *d, int i)
{
    DT_REQUIRE(i >= 0 && i < d->nl, "dti_ddp_layer_done: layer %d does not exist (there "
               "are %d)", i, d->nl);
    DT_REQUIRE(!d->done[i], "dti_ddp_layer_done: layer %d was reported done twice in "
               "step %d", i, d->step);
    d->done[i] = 1;
    d->nreported++;
    d->left[d->bucket_of[i]]--;
    if (!d->overlap)
        return;                 /* dti_ddp_finish sends everything */

    /* launch the ready buckets in order: the same order on every rank; their gradients
     * done on the GPU first, as the thread's stream does not wait for this one's */
    if (d->left[d->bucket_of[i]] == 0)
        dti_cuda_settle();
    pthread_mutex_lock(&d->mu);
    int before = d->nlaunched;
    while (d->nlaunched < d->nb && d->left[d->nlaunched] == 0)
        d->nlaunched++;
    if (d->nlaunched != before)
        pthread_cond_signal(&d->work);
    pthread_mutex_unlock(&d->mu);
}

void dti_ddp_finish(dti_ddp *d)
{
    DT_REQUIRE(d->nreported == d->nl, "dti_ddp_finish: only %d of %d layers were reported "
               "done in step %d; every layer must be, or some bucket is never sent",
               d->nreported, d->nl, d->step);
    double t0 = MPI_Wtime();
    if (d->overlap) {
        pthread_mutex_lock(&d->mu);
        while (d->nreduced < d->nb)
            pthread_cond_wait(&d->idle, &d->mu);
        d->nlaunched = d->nreduced = 0;
        d->step++;
        pthread_mutex_unlock(&d->mu);
    } else {
        for (int b = 0; b < d->nb; b++)
            reduce_bucket(d, b, d->step);
        d->step++;
    }
    d->wait_s = MPI_Wtime() - t0;
    d->sent_last = d->sent;
    d->sent_total += d->sent;
    d->sent = 0;

    for (int i = 0; i < d->nl; i++)
        d->done[i] = 0;
    for (int b = 0; b < d->nb; b++)
        d->left[b] = d->nlayers[b];
    d->nreported = 0;
}

/* ==== compression ==== */

int dti_ddp_compress(dti_ddp *d, dti_run *r)
{
    const dt_train_config *c = r->cfg;
    if (c->compress == DT_COMPRESS_NONE)
        return 0;
    DT_REQUIRE(d->type == MPI_FLOAT && d->step == 1 && d->z == NULL, "dti_ddp_compress: "
               "for fp32 gradients, once, before the first step");
    d->z = dti_compressor_new(r, c->compress, c->compress_feedback, d->lo, d->hi, d->nb,
                              d->comm);
    return dti_compressor_state_bytes(d->z) > 0;
}

/* This rank's bytes per step for its buckets under compression k, by the model. */
static size_t model_bytes(const dti_ddp *d, dt_compress k)
{
    int P, rank;
    DT_CHECK_MPI(MPI_Comm_size(d->comm, &P));
    DT_CHECK_MPI(MPI_Comm_rank(d->comm, &rank));
    size_t bytes = 0;
    for (int b = 0; b < d->nb; b++)
        bytes += dt_compress_bytes(k, d->hi[b] - d->lo[b], P, rank);
    return bytes;
}

void dti_ddp_step_text(const dti_ddp *d, char *s, size_t len)
{
    if (len)
        s[0] = 0;
    if (d->z == NULL)
        return;
    char a[32];
    size_t fp32 = model_bytes(d, DT_COMPRESS_NONE);
    int n = snprintf(s, len, "sent %s",
                     dt_format_bytes((double)d->sent_last, a, sizeof a));
    if (d->sent_last > 0 && n >= 0 && (size_t)n < len)
        n += snprintf(s + n, len - n, ", %.1fx less", (double)fp32 / d->sent_last);
    if (dti_compressor_state_bytes(d->z) && n >= 0 && (size_t)n < len)
        snprintf(s + n, len - n, "  |e| %.3g", dti_compressor_error_norm(d->z));
}

void dti_ddp_summary(const dti_ddp *d, dti_run *r, int steps)
{
    if (d->z == NULL)
        return;
    const dt_train_config *c = r->cfg;
    /* per step and rank: measured, model, fp32 model; the least and most over ranks
     * (the books, with MPI's own calls: not training traffic) */
    double mine[3] = { steps > 0 ? (double)d->sent_total / steps : 0,
                       (double)model_bytes(d, c->compress),
                       (double)model_bytes(d, DT_COMPRESS_NONE) }, lo[3], hi[3];
    dti_mpi_allreduce(mine, lo, 3, MPI_DOUBLE, MPI_MIN, d->comm);
    dti_mpi_allreduce(mine, hi, 3, MPI_DOUBLE, MPI_MAX, d->comm);
    int sign = c->compress == DT_COMPRESS_SIGN;
    dti_summary(r, "compressed gradients: %s%s; bytes per step and rank:",
                dt_compress_name(c->compress), !sign ? "" : c->compress_feedback
                ? " with error feedback" : " without error feedback");
    dti_summary(r, "  sent %.0f to %.0f over the ranks (model %.0f to %.0f)", lo[0],
                hi[0], lo[1], hi[1]);
    if (hi[2] > 0)
        dti_summary(r, "  uncompressed (fp32 ring, model) %.0f to %.0f: %.2f times "
                    "as many", lo[2], hi[2], hi[0] > 0 ? hi[2] / hi[0] : 0);
    else
        dti_summary(r, "  one rank sends nothing; its gradients are still compressed "
                    "and decompressed, as they would be on more ranks");
    if (dti_compressor_state_bytes(d->z)) {
        char a[32];
        dti_summary(r, "  error feedback: %s of error buffers per rank; |e| %.4g on "
                    "rank 0 after the last step", dt_format_bytes((double)
                    dti_compressor_state_bytes(d->z), a, sizeof a),
                    dti_compressor_error_norm(d->z));
    }
}
