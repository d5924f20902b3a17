/* Data parallelism with a parameter server: the workers compute gradients, one server
 * rank owns the weights and the optimizer.
 *
 *                  +--------------------------------------+
 *                  | server: rank 0                       |
 *                  |   master weights (fp32), optimizer   |
 *                  |   state, the sum of the gradients    |
 *                  +--------------------------------------+
 *                     ^  |          ^  |          ^  |
 *           gradients |  | weights  |  |          |  |
 *                     |  v          |  v          |  v
 *                  worker 0      worker 1      worker 2     (W workers)
 *                  rows 0..B/W   rows B/W..    ...          of the global batch
 *
 * By default rank 0 is also worker 0, as in the seeds: it computes its rows, then
 * serves. With --dedicated-server rank 0 only serves and ranks 1..N-1 are the workers.
 *
 * One synchronous step (--async 0, the default):
 *   1. worker j takes rows [j*B/W, (j+1)*B/W) of the global batch; forward, loss and
 *      backward, with dlogits scaled by (loss scale)/B, so that the workers' gradients
 *      add up to the gradient of the whole batch
 *   2. every worker sends its gradients and its rows' loss sum to the server
 *   3. the server adds them up in fp32, in worker order (the same sum every run), checks
 *      them for fp16 overflow, lets the loss scaler decide, and steps the optimizer on
 *      its fp32 master weights
 *   4. the server sends the new working weights (fp16 in fp16), with the loss scale to
 *      use on them, to every worker: the next step begins
 * The summed gradient is the serial gradient cut into W pieces, so synchronous dp
 * reaches serial training's weights (to rounding).
 *
 * Traffic. Psi = the bytes of one copy of the weights (4 per weight, 2 in fp16); W' =
 * the workers other than the server (W - 1, or W with a dedicated server). Per step:
 *
 *     a worker     sends Psi (gradients),        receives Psi (weights)
 *     the server   receives W' Psi,              sends W' Psi
 *     (ring allreduce, DDP: every rank sends and receives 2(W-1)/W Psi < 2 Psi)
 *
 * Every byte goes through the server's one link, so a step takes at least W' Psi /
 * bandwidth (each way), which grows with the number of workers, while a ring's traffic
 * per rank stays under 2 Psi however many ranks there are: the server's link saturates
 * first and the workers queue behind it (they are received one after the other, below).
 * That is why DDP uses a ring, and why large parameter-server systems shard the weights
 * over many servers. The summary prints the measured bytes beside these formulas (over
 * a run of S steps the weights go out S-1-K times, not S: no worker computes on the
 * last versions).
 *
 * Asynchrony (--async K, the "delayed update" of the seeds). In the synchronous loop a
 * worker idles from the moment it sends its gradients until the new weights come back:
 * the round trip through the busy server. With --async K the gradient of step s is
 * computed on the weights made by step u = max(0, s-1-K) (version v = the weights after
 * step v; version 0 = the initial weights):
 *
 *     step s          1   2   3   4   5   6   7
 *     weights of      0   0   0   1   2   3   4        (K = 2)
 *
 * The server sends each version as soon as it has made it (nonblocking sends out of a
 * ring of K+1 buffers, where the model lives: dt_isend stages device data through pinned
 * host memory of its own); a worker keeps receives posted for the next K versions (a
 * ring of K buffers) and waits only when the version it needs has not arrived yet.
 * A worker sends its gradients without waiting too, out of a ring of K+1 buffers:
 * the server takes them in rank order, so behind a slow worker a blocking send of a
 * message too large for MPI to buffer would hold a fast worker to one step ahead.
 * What it buys: a worker runs up to K steps ahead of the server, so the round trip is
 * hidden behind K steps of compute, and a slow worker or a busy link stalls no one for
 * a while. What it costs: each update applies a gradient measured K steps ago, pointing
 * where the weights were, not where they are; with momentum or a large learning rate
 * the loss falls more slowly, oscillates, or diverges (the lesson shows the curves).
 * And memory: K+1 copies of the weights on the server, K more on every worker.
 *
 * The staleness is exactly K, never "whatever the timing gave" as in Hogwild-style
 * servers: the result is deterministic, equal (to rounding) to a serial simulation
 * that applies at step s the gradient of batch s taken at the weights of step u. That
 * makes asynchronous dp testable; each step's report says which weights it used.
 *
 * fp16. The gradient of step s was scaled by the loss scale that came with version u;
 * with K > 0 the server's scale may have changed since (an overflow halved it), so the
 * server converts each gradient to fp32 with mul = (its scale now) / (the scale used)
 * before summing. Only the server decides about overflow (over MPI_COMM_SELF); the
 * workers learn the new scale with the weights, K steps late: after an overflow the
 * gradients already under way at the old scale may overflow again, for up to K steps.
 *
 * Memory (counted in the run's books): the server holds the master weights, the
 * optimizer state, the fp32 sum and one receive buffer (in fp16 also the fp16 weights
 * it sends and an fp32 conversion buffer); a worker, its working weights and gradients;
 * with --async, the rings of versions besides (and a worker's ring of gradients).
 *
 * Messages on r->comm, tags below DT_TAG_BASE: loss and gradients worker -> server;
 * a header (version, scale) and the weights server -> worker. MPI keeps messages of the
 * same source and tag in order, so receives posted in version order get the versions
 * in order; the header's version number checks it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "trace.h"

enum { TAG_LOSS = 101, TAG_GRADS, TAG_HDR, TAG_WEIGHTS };

/* What travels with each version of the weights. */
typedef struct {
    int version;        /* the weights after step `version` */
    float scale;        /* the loss scale to compute with on them (1 in fp32) */
} dp_hdr;

typedef struct {
    dti_run *r;
    MPI_Comm comm;
    int K;              /* --async: a gradient uses the weights of K steps before */
    int vmax;           /* the last version a worker computes on: steps - 1 - K */
    int first;          /* the first worker's rank: 0, or 1 with a dedicated server */
    int W, others;      /* workers; workers that are not the server */
    int computes;       /* this rank is a worker */
    MPI_Datatype type;  /* working type: float, or half in fp16 */
    size_t n, wbytes;   /* weights; bytes of one working copy (Psi) */

    /* a worker */
    dti_model m;
    dti_acts a;
    int rows, row0;     /* its rows of the global batch */
    float *x;           /* (rows, in), host */
    int *y, *yd;        /* (rows) labels, host; where the model lives */
    int have;           /* the version in m.params */
    float scale;        /* the loss scale that came with it */
    double wait_s;      /* seconds spent waiting for weights, all steps */

    /* async: the ring of versions in flight (where the model is, dt_isend/dt_irecv) */
    int R;              /* slots: K+1 on the server, K on a worker */
    char *ring;         /* R * wbytes */
    dp_hdr *hdr;        /* [R] */
    MPI_Request *req;   /* [R * nreq]: each slot's header and weights messages */
    int nreq;           /* 2 * others on the server, 2 on a worker */
    /* async, a worker but the server: its gradients (and losses) on their way */
    char *gring;        /* (K+1) * wbytes */
    double *gloss;      /* [K+1] */
    MPI_Request *greq;  /* [2 * (K+1)]: each slot's loss and gradients messages */

    /* the server */
    float *master;      /* n, fp32 */
    float *state;       /* n * S */
    float *sum;         /* n, fp32: the workers' gradients added up */
    float *tmp;         /* n, fp32, fp16 only: one worker's gradients widened */
    void *rbuf;         /* n of type: one worker's gradients as received */
    void *wp;           /* n of type: the working weights the optimizer writes */
    int wp_owned;       /* wp was allocated here (not master, not m.params) */
    float *scale_of;    /* [steps + 1]: the loss scale that goes with version v */
    size_t state_bytes;
    int s0;             /* the step a resumed run starts after (0: a fresh run) */
} dp_state;

static void post_version(dp_state *d, int v);
static void trace_comm(const char *phase, int step);

/* ==== setting up ==== */

static void setup(dp_state *d, dti_run *r)
{
    const dt_train_config *c = r->cfg;
    memset(d, 0, sizeof *d);
    d->r = r;
    d->comm = r->comm;
    d->K = c->async;
    d->vmax = c->steps - 1 - d->K;
    d->first = c->dedicated_server ? 1 : 0;
    d->W = r->size - d->first;
    d->others = r->size - 1;
    d->computes = r->rank >= d->first;
    d->type = dti_work_type(r);
    d->n = r->nparams;
    d->wbytes = d->n * dti_work_size(r);
    DT_REQUIRE(d->W >= 1 && c->batch % d->W == 0, "dp: %d workers cannot share a batch "
               "of %d", d->W, c->batch);

    /* every rank draws the initial weights from the seed */
    float *init = malloc(d->n * sizeof(float));
    DT_REQUIRE(init != NULL, "out of host memory");
    dti_init_weights(c, init);

    if (d->computes) {
        int j = r->rank - d->first;
        d->row0 = (int)((long long)j * c->batch / d->W);
        d->rows = (int)((long long)(j + 1) * c->batch / d->W) - d->row0;
        dti_model_init(&d->m, r, 0, dti_units(c), MPI_COMM_SELF, c->tp_style, d->rows);
        DT_REQUIRE(d->m.n == d->n, "dp: the model holds %zu of %zu weights", d->m.n, d->n);
        dti_acts_alloc(&d->m, d->rows, &d->a);
        float *mine = malloc(d->n * sizeof(float));
        DT_REQUIRE(mine != NULL, "out of host memory");
        dti_model_take(&d->m, init, mine);
        dti_from_float(mine, d->m.params, d->type, d->n);     /* version 0 */
        free(mine);
        d->x = malloc((size_t)d->rows * dti_data_cols(c) * sizeof(float));
        d->y = malloc((size_t)d->rows * d->m.lpe * sizeof(int));
        DT_REQUIRE(d->x && d->y, "out of host memory");
        d->yd = r->where == DT_CUDA ? dt_malloc((size_t)d->rows * d->m.lpe * sizeof(int),
                                                DT_CUDA)
                                    : d->y;
        d->have = 0;
        d->scale = dti_loss_scale(r);
    }

    if (r->rank == 0) {
        /* the whole model, uncut: its layout is the model's, so init is copied as it is */
        d->master = dti_alloc(r, DTI_PARAMS, d->n * sizeof(float), 0);
        dt_memcpy(d->master, init, d->n * sizeof(float));
        d->state_bytes = d->n * dt_optim_state_per_param(c->optim.kind) * sizeof(float);
        d->state = dti_alloc(r, DTI_OPTIM, d->state_bytes, 0);
        d->sum = dti_alloc(r, DTI_GRADS, d->n * sizeof(float), 0);
        if (d->type != MPI_FLOAT)
            d->tmp = dti_alloc(r, DTI_GRADS, d->n * sizeof(float), 0);
        if (d->others > 0 || d->type != MPI_FLOAT)
            d->rbuf = dti_alloc(r, DTI_GRADS, d->wbytes, 0);
        /* where the optimizer writes the working weights: straight into the
         * server-worker's own in the synchronous loop; the master itself in fp32;
         * else a buffer of their own */
        if (d->computes && d->K == 0) {
            d->wp = d->m.params;
        } else if (d->type == MPI_FLOAT) {
            d->wp = d->master;
        } else {
            d->wp = dti_alloc(r, DTI_PARAMS, d->wbytes, 0);
            dti_from_float(d->master, d->wp, d->type, d->n);
            d->wp_owned = 1;
        }
        d->scale_of = calloc((size_t)c->steps + 1, sizeof(float));
        DT_REQUIRE(d->scale_of != NULL, "out of host memory");
        d->scale_of[0] = dti_loss_scale(r);
    }
    free(init);

    /* the ring of versions in flight, when there are any */
    if (d->K > 0 && d->vmax >= 1) {
        d->R = r->rank == 0 ? d->K + 1 : d->K;
        d->nreq = r->rank == 0 ? 2 * d->others : 2;
        d->ring = dti_alloc(r, DTI_PARAMS, (size_t)d->R * d->wbytes, 0);
        d->hdr = calloc((size_t)d->R, sizeof *d->hdr);
        d->req = malloc((size_t)d->R * (d->nreq ? d->nreq : 1) * sizeof *d->req);
        DT_REQUIRE(d->hdr && d->req, "out of host memory");
        for (int i = 0; i < d->R * d->nreq; i++)
            d->req[i] = MPI_REQUEST_NULL;
    }
    if (d->K > 0 && r->rank != 0) {
        d->gring = dti_alloc(r, DTI_GRADS, (size_t)(d->K + 1) * d->wbytes, 0);
        d->gloss = dti_calloc((size_t)d->K + 1, sizeof *d->gloss);
        d->greq = dti_calloc(2 * ((size_t)d->K + 1), sizeof *d->greq);
        for (int i = 0; i < 2 * (d->K + 1); i++)
            d->greq[i] = MPI_REQUEST_NULL;
    }
    /* a worker's first receives: versions 1..K, before it needs any of them */
    trace_comm("weights", 0);
    for (int v = 1; r->rank != 0 && d->ring && v <= d->K && v <= d->vmax; v++)
        post_version(d, v);
}

/* ==== a worker ==== */

static void trace_comm(const char *phase, int step)
{
    dt_trace_phase("dp", phase);
    dt_trace_step(step, -1, 0, 0, -1, 0, 0);
}

/* Worker (not the server): posts the receives of version v into its ring slot. */
static void post_version(dp_state *d, int v)
{
    int i = v % d->R;
    MPI_Request *q = d->req + i * d->nreq;
    q[0] = dt_irecv(&d->hdr[i], sizeof(dp_hdr), 0, TAG_HDR, d->comm);
    q[1] = dt_irecv(d->ring + (size_t)i * d->wbytes, d->wbytes, 0, TAG_WEIGHTS, d->comm);
}

/* Worker (not the server): makes m.params version u (u is d->have or d->have + 1). */
static void fetch(dp_state *d, int u, int step)
{
    if (u == d->have)
        return;
    double t0 = MPI_Wtime();
    dp_hdr h;
    trace_comm("weights", step);
    if (d->K == 0) {                       /* synchronous: wait for it, right here */
        dt_recv(&h, sizeof h, 0, TAG_HDR, d->comm);
        dt_recv(d->m.params, d->wbytes, 0, TAG_WEIGHTS, d->comm);
    } else {                               /* posted long ago; maybe already here */
        int i = u % d->R;
        dt_waitall(d->nreq, d->req + i * d->nreq);
        h = d->hdr[i];
        dt_memcpy(d->m.params, d->ring + (size_t)i * d->wbytes, d->wbytes);
        if (u + d->K <= d->vmax)           /* its slot is free again: the next one */
            post_version(d, u + d->K);
    }
    DT_REQUIRE(h.version == u, "dp: expected the weights of step %d, got step %d", u,
               h.version);
    d->have = u;
    d->scale = h.scale;
    d->wait_s += MPI_Wtime() - t0;
}

/* Forward, loss and backward of this worker's rows of step s, on m.params, with the
 * loss scaled by scale: the gradients are in m.grads; returns the rows' loss sum. */
static double compute(dp_state *d, int s, float scale)
{
    const dt_train_config *c = d->r->cfg;
    int lpe = d->m.lpe;                         /* labels per example: 1, the GPT's seq */
    dti_batch(c, s - 1, c->batch, d->row0, d->rows, d->x, d->y);
    if (d->yd != d->y)                          /* the batch's labels, up */
        dt_memcpy_input(d->yd, d->y, (size_t)d->rows * lpe * sizeof(int));
    dt_memzero(d->m.grads, d->wbytes);
    float *logits = (float *)dti_model_forward(&d->m, &d->a, d->x, d->rows, s, -1);
    double t0 = dt_trace_now();
    double loss = dt_xent(logits, d->yd, d->rows * lpe, d->m.classes,
                          scale / (float)(c->batch * lpe), logits);
    dti_compute_event("loss", s, -1, -1, t0);
    dti_model_backward(&d->m, &d->a, logits, NULL, d->rows, s, -1, NULL, NULL);
    return loss;
}

static void worker_step(dp_state *d, int s, int u)
{
    fetch(d, u, s);
    double loss = compute(d, s, d->scale);
    trace_comm("gradients", s);
    if (d->K == 0) {
        dt_send(&loss, sizeof loss, 0, TAG_LOSS, d->comm);
        dt_send(d->m.grads, d->wbytes, 0, TAG_GRADS, d->comm);
    } else {
        /* the slot's last sends are step s-K-1's: the server has them (it made version
         * s-1-K, which this step computed on, from them), so this wait ends at once */
        int i = s % (d->K + 1);
        MPI_Request *q = d->greq + 2 * i;
        dt_waitall(2, q);
        char *slot = d->gring + (size_t)i * d->wbytes;
        dt_memcpy(slot, d->m.grads, d->wbytes);
        d->gloss[i] = loss;
        q[0] = dt_isend(&d->gloss[i], sizeof loss, 0, TAG_LOSS, d->comm);
        q[1] = dt_isend(slot, d->wbytes, 0, TAG_GRADS, d->comm);
    }
    dti_step_end(d->r, s, 0, 0, NULL);     /* rank 0 reports the step */
}

/* ==== the server ==== */

/* sum = (sum, or nothing when first) + g * mul, g of the working type. */
static void add_grads(dp_state *d, const void *g, float mul, int first)
{
    if (first)
        dti_to_float(g, d->type, d->sum, d->n, mul);
    else if (d->type == MPI_FLOAT && mul == 1.0f)
        dti_accumulate(d->sum, MPI_FLOAT, g, d->n);
    else {
        dti_to_float(g, d->type, d->tmp, d->n, mul);
        dti_accumulate(d->sum, MPI_FLOAT, d->tmp, d->n);
    }
}

/* Sends version v (in wp) to every worker but the server: at once and blocking in the
 * synchronous loop; else copied into its ring slot and sent without waiting. */
static void publish(dp_state *d, int v)
{
    dp_hdr h = { v, d->scale_of[v] };
    trace_comm("weights", v);
    if (d->K == 0) {
        for (int w = 1; w < d->r->size; w++) {
            dt_send(&h, sizeof h, w, TAG_HDR, d->comm);
            dt_send(d->wp, d->wbytes, w, TAG_WEIGHTS, d->comm);
        }
        return;
    }
    int i = v % d->R;
    MPI_Request *q = d->req + i * d->nreq;
    /* the slot's last version is v-K-1: every worker has it (they computed step v on
     * it), so these waits end at once */
    dt_waitall(d->nreq, q);
    char *slot = d->ring + (size_t)i * d->wbytes;
    dt_memcpy(slot, d->wp, d->wbytes);
    d->hdr[i] = h;
    for (int w = 1; w < d->r->size; w++) {
        q[2 * (w - 1)] = dt_isend(&d->hdr[i], sizeof h, w, TAG_HDR, d->comm);
        q[2 * (w - 1) + 1] = dt_isend(slot, d->wbytes, w, TAG_WEIGHTS, d->comm);
    }
}

static void server_step(dp_state *d, int s, int u)
{
    dti_run *r = d->r;
    float used = d->scale_of[u];              /* the scale step s's gradients carry */
    float mul = dti_loss_scale(r) / used;     /* into the server's scale now */
    double loss = 0;
    int first = 1;
    if (d->computes) {
        if (d->K > 0 && u != d->have) {       /* the server's own stale weights */
            dt_memcpy(d->m.params, d->ring + (size_t)(u % d->R) * d->wbytes, d->wbytes);
            d->have = u;
        }
        loss = compute(d, s, used);
        double t0 = dt_trace_now();
        add_grads(d, d->m.grads, mul, 1);
        dti_compute_event("sum", s, -1, -1, t0);
        first = 0;
    }
    for (int w = 1; w < r->size; w++) {       /* in rank order: the same sum every run */
        double part;
        trace_comm("gradients", s);
        dt_recv(&part, sizeof part, w, TAG_LOSS, d->comm);
        dt_recv(d->rbuf, d->wbytes, w, TAG_GRADS, d->comm);
        double t0 = dt_trace_now();
        add_grads(d, d->rbuf, mul, first);
        dti_compute_event("sum", s, -1, -1, t0);
        loss += part;
        first = 0;
    }

    /* the verdict and the update, on the server alone */
    const void *g = d->sum;
    int found = 0;
    if (d->type != MPI_FLOAT) {               /* the optimizer takes working-type grads */
        dti_from_float(d->sum, d->rbuf, d->type, d->n);
        g = d->rbuf;
        found = dti_nonfinite(g, d->type, d->n);
    }
    char extra[160] = "", scaler[96];
    int apply = dti_scaler_decide(r, found, MPI_COMM_SELF, scaler, sizeof scaler);
    if (apply) {
        double t0 = dt_trace_now();
        dti_master_step(r, d->master, d->wp, g, d->state, d->n);
        dti_compute_event("optimizer", s, -1, -1, t0);
    }
    d->scale_of[s] = dti_loss_scale(r);

    if (d->K)
        snprintf(extra, sizeof extra, "weights of step %d%s%s", u, scaler[0] ? "  " : "",
                 scaler);
    else
        snprintf(extra, sizeof extra, "%s", scaler);
    dti_step_end(r, s, (float)(loss / ((double)r->cfg->batch *
                                      dti_labels_per_example(r->cfg))), !apply, extra);
}

/* ==== the summary ==== */

/* The traffic, waits and memory of every rank, gathered to rank 0 with MPI's own call
 * (bookkeeping, not counted as training traffic). */
static void summarize(dp_state *d)
{
    dti_run *r = d->r;
    const dt_train_config *c = r->cfg;
    double mine[6] = { (double)dt_bytes_sent(), (double)dt_bytes_received(), d->wait_s,
                       (double)r->peak[DTI_PARAMS], (double)r->peak[DTI_GRADS],
                       (double)r->peak[DTI_OPTIM] };
    double *all = r->rank == 0 ? malloc(6 * sizeof *all * r->size) : NULL;
    DT_REQUIRE(r->rank != 0 || all != NULL, "out of host memory");
    dti_mpi_gather(mine, 6, MPI_DOUBLE, all, 0, d->comm);
    if (r->rank != 0)
        return;
    double psi = (double)d->wbytes, kib = 1024;
    int S = c->steps - d->s0, V = d->vmax > d->s0 ? d->vmax - d->s0 : 0, Wo = d->others;
    dti_summary(r, "parameter server: rank 0 serves; workers: ranks %d..%d (%s); %s",
                d->first, r->size - 1, d->first ? "dedicated server"
                : "the server computes too", d->K ? "asynchronous" : "synchronous");
    if (d->K)
        dti_summary(r, "  --async %d: step s computes on the weights of step s-%d, so a "
                    "worker runs up to %d step%s ahead of the server", d->K, d->K + 1,
                    d->K, d->K == 1 ? "" : "s");
    dti_summary(r, "  Psi = %zu weights x %zu bytes = %.1f KiB; W' = %d workers talk to "
                "the server", d->n, d->wbytes / d->n, psi / kib, Wo);
    dti_summary(r, "  server:   received %.2f Psi (formula %d steps x W' = %d), sent %.2f "
                "Psi (%d versions x W' = %d), measured with headers", all[1] / psi, S,
                S * Wo, all[0] / psi, V, V * Wo);
    if (r->size > 1) {
        const double *w = all + 6 * (r->size - 1);
        double wait = 0;
        for (int q = 1; q < r->size; q++)
            wait += all[6 * q + 2];
        dti_summary(r, "  a worker: sent %.2f Psi (formula %d), received %.2f Psi (%d), "
                    "measured on rank %d", w[0] / psi, S, w[1] / psi, V, r->size - 1);
        dti_summary(r, "  per step the server's link carries W' = %d Psi each way, a "
                    "worker's 1%s", Wo, d->W > 1 ? "" : " (no ring to compare with)");
        if (d->W > 1)
            dti_summary(r, "  (a ring allreduce over the %d workers: 2(W-1)/W = %.2f Psi "
                        "each way on every link; the server's is %.1fx that, and grows "
                        "with W)", d->W, 2.0 * (d->W - 1) / d->W,
                        Wo / (2.0 * (d->W - 1) / d->W));
        dti_summary(r, "  workers waited %.3f ms per step for weights (mean of ranks "
                    "1..%d)", wait / (r->size - 1) / S * 1e3, r->size - 1);
        dti_summary(r, "  peak memory: a worker %.1f KiB weights, %.1f KiB gradients; the "
                    "server %.1f KiB weights, %.1f KiB gradients, %.1f KiB optimizer "
                    "state", w[3] / kib, w[4] / kib, all[3] / kib, all[4] / kib,
                    all[5] / kib);
    }
    free(all);
}

/* ==== checkpoints ==== */

/* The server's shard holds the whole state: its master weights and optimizer state.
 * A worker reads the weights from it into a buffer of its own (weights, host). */
static int checkpoint_start(dp_state *d, float **weights)
{
    dti_run *r = d->r;
    *weights = NULL;
    dti_span all = { 0, d->n, 1, 0 };                /* the whole model */
    if (r->rank == 0) {
        dti_ckpt_region(r, "weights", d->master, d->n * sizeof(float));
        dti_ckpt_region(r, "state", d->state, d->state_bytes);
        dti_ckpt_map(r, "state", dt_optim_state_per_param(r->cfg->optim.kind), &all, 1);
    } else if (r->cfg->resume_dir) {
        *weights = calloc(d->n, sizeof(float));
        DT_REQUIRE(*weights != NULL, "out of host memory");
        dti_ckpt_region(r, "weights", *weights, d->n * sizeof(float));
    }
    if (r->rank == 0 || r->cfg->resume_dir)
        dti_ckpt_map(r, "weights", 1, &all, 1);
    return dti_ckpt_start(r, 0);
}

/* Resumed at step s0: every rank holds version s0 of the weights, as the synchronous
 * loop leaves it after step s0 (async runs are never checkpointed). */
static void resume(dp_state *d, int s0, const float *weights)
{
    dti_run *r = d->r;
    if (r->rank == 0) {
        if (d->wp != (void *)d->master)        /* the working copy the server sends */
            dti_from_float(d->master, d->wp, d->type, d->n);
        d->scale_of[s0] = dti_loss_scale(r);
    } else {
        float *mine = malloc(d->n * sizeof(float));
        DT_REQUIRE(mine != NULL, "out of host memory");
        dti_model_take(&d->m, weights, mine);
        dti_from_float(mine, d->m.params, d->type, d->n);
        free(mine);
    }
    if (d->computes) {
        d->have = s0;
        d->scale = dti_loss_scale(r);
    }
}

/* ==== the loop ==== */

void dti_train_dp(dti_run *r)
{
    dp_state d;
    setup(&d, r);
    float *weights;
    d.s0 = checkpoint_start(&d, &weights);
    if (d.s0 > 0)
        resume(&d, d.s0, weights);
    free(weights);
    for (int s = d.s0 + 1; s <= r->cfg->steps; s++) {
        dti_step_begin(r, s);
        int u = s - 1 - d.K > 0 ? s - 1 - d.K : 0;    /* the weights step s uses */
        if (r->rank == 0)
            server_step(&d, s, u);
        else
            worker_step(&d, s, u);
        /* a checkpoint, if one is due, before version s goes out to the workers: the
         * ranks save with no message in flight (a blocking send would wait for a
         * worker that waits in the checkpoint) */
        dti_ckpt_step(r, s);
        if (r->rank == 0 && s <= d.vmax)
            publish(&d, s);
    }
    if (r->rank == 0 && d.req)                  /* the last versions' sends */
        dt_waitall(d.R * d.nreq, d.req);
    if (d.greq)                                 /* a worker's last gradients */
        dt_waitall(2 * (d.K + 1), d.greq);
    summarize(&d);

    /* the final weights: the server's master */
    float *full = calloc(d.n, sizeof(float));
    DT_REQUIRE(full != NULL, "out of host memory");
    if (r->rank == 0)
        dt_memcpy(full, d.master, d.n * sizeof(float));
    dti_result_params(r, full);
    free(full);

    if (d.greq) {
        dti_free(r, DTI_GRADS, d.gring, (size_t)(d.K + 1) * d.wbytes);
        free(d.gloss);
        free(d.greq);
    }
    if (d.ring) {
        dti_free(r, DTI_PARAMS, d.ring, (size_t)d.R * d.wbytes);
        free(d.hdr);
        free(d.req);
    }
    if (r->rank == 0) {
        if (d.wp_owned)
            dti_free(r, DTI_PARAMS, d.wp, d.wbytes);
        dti_free(r, DTI_GRADS, d.rbuf, d.wbytes);
        dti_free(r, DTI_GRADS, d.tmp, d.n * sizeof(float));
        dti_free(r, DTI_GRADS, d.sum, d.n * sizeof(float));
        dti_free(r, DTI_OPTIM, d.state, d.state_bytes);
        dti_free(r, DTI_PARAMS, d.master, d.n * sizeof(float));
        free(d.scale_of);
    }
    if (d.computes) {
        if (d.yd != d.y)
            dt_free(d.yd);
        free(d.x);
        free(d.y);
        dti_acts_free(&d.a);
        dti_model_free(&d.m);
    }
}
