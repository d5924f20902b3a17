/* Pipeline parallelism: the layers cut into P stages, one per rank of pp_comm, and the
 * batch cut into M micro-batches that flow through the stages like cars on an assembly
 * line. Stage s runs the forward F m of micro-batch m when stage s-1 has sent it the
 * activations, and its backward B m when stage s+1 has sent back their gradient.
 *
 * The two schedules, P = 4 stages, M = 4 micro-batches, a forward and a backward one
 * slot each (dt_pp_draw in lib/schedule.c draws these; real backwards take about two):
 *
 *   GPipe: all forwards, then all backwards
 *     stage 0 | F0 F1 F2 F3 .  .  .  .  .  .  B0 B1 B2 B3      holds 4 micro-batches
 *     stage 1 | .  F0 F1 F2 F3 .  .  .  .  B0 B1 B2 B3 .                4
 *     stage 2 | .  .  F0 F1 F2 F3 .  .  B0 B1 B2 B3 .  .                4
 *     stage 3 | .  .  .  F0 F1 F2 F3 B0 B1 B2 B3 .  .  .                4
 *
 *   1F1B (PipeDream-Flush, Megatron-LM): P-s-1 warm-up forwards, then one forward and
 *   one backward in turn, then the remaining backwards
 *     stage 0 | F0 F1 F2 F3 .  .  .  B0 .  B1 .  B2 .  B3      holds 4
 *     stage 1 | .  F0 F1 F2 .  .  B0 F3 B1 .  B2 .  B3 .                3
 *     stage 2 | .  .  F0 F1 .  B0 F2 B1 F3 B2 .  B3 .  .                2
 *     stage 3 | .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 .  .  .                1
 *
 * Why 1F1B holds fewer activations. A forward stashes what its backward will need (the
 * inputs and pre-activations of the stage's layers, a dti_acts); the backward frees it.
 * GPipe runs every forward before any backward, so each stage holds all M. In 1F1B a
 * stage starts a backward as soon as the first gradient can have come back, and from
 * then on frees one micro-batch for each it starts: stage s never holds more than
 * min(P-s, M), however large M grows (M = 32, P = 4: GPipe 32, 1F1B at most 4).
 *
 * The bubble. Both schedules take the same time: stage 0's forwards, the trip through
 * the other P-1 stages and back, stage 0's backwards: (M+P-1)(tf+tb), of which each
 * stage computes M(tf+tb). The idle fraction, the bubble, is
 *       (P-1) / (M+P-1)          P = 4: M = 4 gives 0.43, M = 16 0.16, M = 64 0.04
 * so more micro-batches hide it better; 1F1B's gain is memory, not time. The formula
 * assumes stages of equal work and free messages; with unequal stages the slowest sets
 * the pace and the others idle more. dti_pp_stats reports the bubble as measured: the
 * share of the step this stage was not computing (waiting for messages, sending them,
 * converting them).
 *
 * Messages. A forward on stage s < P-1 sends its output (mb rows, out_width) to s+1;
 * a backward on s > 0 sends the gradient of its input (mb, in_width) to s-1: fp32, or
 * fp16 in mixed precision (half the bytes; the values are fp16 already). The sends are
 * blocking, and a large blocking send waits for its receiver: stage 0 sending F1's
 * activations while stage 1 sends B0's gradient back would wait for each other forever
 * (P = 2, M = 2, 1F1B). So, as Megatron-LM does, a send that goes to the stage the next
 * receive comes from is made together with it, in one dt_sendrecv:
 *
 *   after F m, before B j (both with s+1):   send activations m, receive gradient j
 *   after B j, before F m (both with s-1):   send gradient j, receive activations m
 *
 * and any other send goes out alone, before the next operation. One tag serves all
 * pipeline messages: dt_sendrecv takes one, and on a line of stages the direction
 * already tells them apart (down: activations, up: gradients).
 *
 * With P = 1 there is nothing to send: the step is M forwards and backwards in turn,
 * gradients adding up (gradient accumulation, as serial and ddp --accum use it).
 *
 * Today's schedules (lib/schedule.h draws and counts both):
 *   interleaved 1F1B (--schedule interleaved --virtual v): the layers cut into vP
 *   chunks, rank s holding chunks s, s+P, s+2P, ... (dti_model_init_chunks); a
 *   micro-batch goes round the ranks v times, so the last rank's output of chunk j goes
 *   to rank 0's chunk j+1, and rank 0's gradient of chunk j back to the last rank's
 *   chunk j-1. The bubble falls to (P-1)/(vM+P-1) of the step, for v times the messages.
 *   zb-h1 (--schedule zb-h1): each backward cut in two, B (the input's gradient, which
 *   stage s-1 waits for: dti_model_backward_input) and W (the weights', which nothing
 *   waits for: dti_model_backward_weights), stage s putting its W's off by s
 *   micro-batches so that they fill the tail where 1F1B idles. A micro-batch is held
 *   from F until W (only x and dz of each layer after B).
 * On a ring of stages the pairing above is not enough (rank 0 may send to rank P-1
 * while it sends to rank 0, not as each other's next receive), and zb-h1 puts W's
 * between a B and the next receive. So these two send without blocking (dt_isend, from
 * a copy that stays until MPI is done with it) and receive with dt_irecv and a wait:
 * a rank then waits only for what its next operation needs, which the schedule's
 * timetable says is computed first (every order is checked deadlock-free on the clock
 * in unit_pipeline). Activations and gradients go under two tags, and each arrives in
 * the order it was sent: every rank runs its forwards, and its backwards, in the same
 * order of (micro-batch, chunk).
 *
 * Trace: besides the compute events of model.c, a mark per operation (coll "pipeline",
 * phase forward, backward or (zb-h1's W) weights, chunk = the virtual stage jP + s of
 * chunk j (the stage s when v = 1), lo..hi = micro..micro+1) from the start of its
 * receive to the end of its computation, and the messages under coll "pipeline", phase
 * activations, gradients or exchange (chunk = micro-batch). */
#include <stdlib.h>
#include "buf.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "schedule.h"
#include "trace.h"

#define PP_TAG 101               /* below DT_TAG_BASE: ours, not the collectives' */
#define PP_TAG_GRAD 102          /* interleaved and zb-h1: the gradients' own */

typedef struct {                 /* a message waiting to go out */
    const void *buf;             /* NULL: none */
    size_t nbytes;
    int peer, micro;
} pp_msg;

typedef struct {                 /* one chunk of this rank's layers, and its stash */
    dti_model *m;
    int in, out;                 /* widths of what enters and leaves it */
    int K, nfree;                /* K slots of activations: its peak in this order */
    dti_acts *pool;              /* [K] */
    int *free_slot;              /* [K] a stack of free slots */
    int *slot_of;                /* [M] the slot micro-batch m stashed in */
} pp_chunk;

struct dti_pp {
    dti_model *m;
    MPI_Comm comm;
    int s, P, M, mb, schedule, v, nops;
    int fp16;                    /* messages travel as fp16 */
    int nb;                      /* interleaved, zb-h1: sends that do not block */
    dt_pp_op *ops;               /* [nops] this stage's order */
    pp_chunk *ch;                /* [v] */
    int held, peak;              /* chunk micro-batches stashed */
    float *dlogits;              /* last stage: [K of the last chunk] x (mb, out) */
    int *labels;                 /* last stage: (M*mb) where the model lives */

    float *xin, *dy, *dx;        /* received activations, received gradient, sent dx */
    size_t wide;                 /* the widest of them, in floats */
    void *hsend, *hrecv;         /* fp16: the wire copies, (mb, wide) halves */
    pp_msg pending;
    size_t messages, bytes;      /* sent this step */
    /* nb: copies of the messages on their way (host), and their requests */
    int nout;
    void **out_buf;
    MPI_Request *out_req;
    double bubble;
};

/* ==== set-up ==== */

/* The most micro-batches chunk j holds at once in this order: from F until the
 * operation that frees them (B; zb-h1: W). */
static int chunk_peak(const dti_pp *p, int j)
{
    int held = 0, peak = 0;
    char frees = p->schedule == DT_PP_ZBH1 ? 'W' : 'B';
    for (int k = 0; k < p->nops; k++) {
        if (p->ops[k].chunk != j)
            continue;
        held += p->ops[k].kind == 'F' ? 1 : p->ops[k].kind == frees ? -1 : 0;
        if (held > peak)
            peak = held;
    }
    return peak;
}

dti_pp *dti_pp_new(dti_model *m, MPI_Comm pp_comm, int M, int mb, dt_pp_schedule schedule)
{
    dti_pp *p = calloc(1, sizeof *p);
    DT_REQUIRE(p != NULL, "out of host memory");
    p->m = m;
    p->comm = pp_comm;
    DT_CHECK_MPI(MPI_Comm_rank(pp_comm, &p->s));
    DT_CHECK_MPI(MPI_Comm_size(pp_comm, &p->P));
    p->M = M;
    p->mb = mb;
    p->schedule = (int)schedule;
    p->v = m->v ? m->v : 1;
    DT_REQUIRE(dt_pp_valid(p->schedule, p->P, M, p->v), "pipeline: schedule %d cannot run "
               "%d stages, %d micro-batches, %d chunks a stage", (int)schedule, p->P, M,
               p->v);
    DT_REQUIRE(mb >= 1 && mb <= m->Bmax, "pipeline: %d micro-batches of %d rows "
               "(the model has buffers for %d rows)", M, mb, m->Bmax);
    p->nb = schedule == DT_PP_INTERLEAVED || schedule == DT_PP_ZBH1;
    p->fp16 = m->type != MPI_FLOAT;
    p->nops = dt_pp_nops(p->schedule, p->P, M, p->v);
    p->ops = malloc(p->nops * sizeof *p->ops);
    p->ch = calloc((size_t)p->v, sizeof *p->ch);
    DT_REQUIRE(p->ops && p->ch, "out of host memory");
    dt_pp_order_v(p->schedule, p->P, M, p->v, p->s, p->ops);

    int last = p->s == p->P - 1, V = p->v * p->P;
    for (int j = 0; j < p->v; j++) {
        pp_chunk *q = &p->ch[j];
        q->m = m->v ? &m->chunk[j] : m;
        q->in = dti_model_in_width(q->m);
        q->out = dti_model_out_width(q->m);
        int c = j * p->P + p->s;
        DT_REQUIRE(c > 0 || q->in == dti_data_cols(m->run->cfg), "pipeline: stage 0 takes "
                   "%d columns, the data has %d", q->in, dti_data_cols(m->run->cfg));
        DT_REQUIRE(c < V - 1 || q->out == q->m->lpe * q->m->classes, "pipeline: the last "
                   "stage gives %d columns, the model %d labels of %d classes", q->out,
                   q->m->lpe, q->m->classes);
        if (c > 0 && (size_t)q->in > p->wide)
            p->wide = (size_t)q->in;
        if (c < V - 1 && (size_t)q->out > p->wide)
            p->wide = (size_t)q->out;
        q->K = chunk_peak(p, j);
        q->pool = calloc(q->K, sizeof *q->pool);
        q->free_slot = malloc(q->K * sizeof *q->free_slot);
        q->slot_of = malloc(M * sizeof *q->slot_of);
        DT_REQUIRE(q->pool && q->free_slot && q->slot_of, "out of host memory");
        for (int k = 0; k < q->K; k++) {
            dti_acts_alloc(q->m, mb, &q->pool[k]);
            q->free_slot[k] = q->K - 1 - k;       /* slot 0 on top */
        }
        q->nfree = q->K;
    }

    dt_device_kind where = m->run->where;
    size_t rows = (size_t)mb;
    if (last) {
        pp_chunk *q = &p->ch[p->v - 1];
        p->dlogits = dt_malloc((size_t)q->K * rows * q->out * sizeof(float), where);
        p->labels = dt_malloc((size_t)M * rows * m->lpe * sizeof(int), where);
    }
    if (p->wide > 0) {                            /* a neighbour to talk to */
        size_t n = rows * p->wide;
        p->xin = dt_malloc(n * sizeof(float), where);
        p->dx = dt_malloc(n * sizeof(float), where);
        p->dy = dt_malloc(n * sizeof(float), where);
        if (p->fp16) {
            p->hsend = dt_malloc(n * dti_work_size(m->run), where);
            p->hrecv = dt_malloc(n * dti_work_size(m->run), where);
        }
    }
    return p;
}

void dti_pp_free(dti_pp *p)
{
    if (p == NULL)
        return;
    for (int j = 0; j < p->v; j++) {
        pp_chunk *q = &p->ch[j];
        for (int k = 0; k < q->K; k++)
            dti_acts_free(&q->pool[k]);
        free(q->pool);
        free(q->free_slot);
        free(q->slot_of);
    }
    free(p->ch);
    free(p->ops);
    for (int i = 0; i < p->nout; i++)
        dt_free(p->out_buf[i]);
    free(p->out_buf);
    free(p->out_req);
    dt_free(p->dlogits);
    dt_free(p->labels);
    dt_free(p->xin);
    dt_free(p->dx);
    dt_free(p->dy);
    dt_free(p->hsend);
    dt_free(p->hrecv);
    free(p);
}

void dti_pp_stats(const dti_pp *p, double *bubble, int *peak_stash, size_t *messages,
                  size_t *bytes)
{
    if (bubble)
        *bubble = p->bubble;
    if (peak_stash)
        *peak_stash = p->peak;
    if (messages)
        *messages = p->messages;
    if (bytes)
        *bytes = p->bytes;
}

static void count(dti_pp *p, size_t nbytes)
{
    p->messages++;
    p->bytes += nbytes;
}

/* ==== messages ==== */

static void trace_msg(int step, const char *phase, int send_micro, int recv_micro)
{
    if (!dt_trace_enabled())
        return;
    dt_trace_phase("pipeline", phase);
    dt_trace_step(step, send_micro, send_micro < 0 ? 0 : (size_t)send_micro,
                  send_micro < 0 ? 0 : (size_t)send_micro + 1, recv_micro,
                  recv_micro < 0 ? 0 : (size_t)recv_micro,
                  recv_micro < 0 ? 0 : (size_t)recv_micro + 1);
}

/* The message waiting to go out, if any, goes now, on its own. */
static void flush(dti_pp *p, int step)
{
    pp_msg *q = &p->pending;
    if (q->buf == NULL)
        return;
    trace_msg(step, q->peer > p->s ? "activations" : "gradients", q->micro, -1);
    count(p, q->nbytes);
    dt_send(q->buf, q->nbytes, q->peer, PP_TAG, p->comm);
    q->buf = NULL;
}

/* A buffer, where the model lives, for a message that does not block: one whose
 * earlier message MPI is done with, or a new one (as many as the step has messages in
 * flight at once). dt_isend stages device data through pinned host memory itself. */
static void *out_buffer(dti_pp *p, MPI_Request **req)
{
    for (int i = 0; i < p->nout; i++) {
        if (p->out_req[i] == MPI_REQUEST_NULL || dt_test(&p->out_req[i])) {
            *req = &p->out_req[i];
            return p->out_buf[i];
        }
    }
    int n = p->nout + 1;
    void **b = realloc(p->out_buf, n * sizeof *b);
    DT_REQUIRE(b != NULL, "out of host memory");
    p->out_buf = b;
    MPI_Request *r = realloc(p->out_req, n * sizeof *r);
    DT_REQUIRE(r != NULL, "out of host memory");
    p->out_req = r;
    b[p->nout] = dt_malloc((size_t)p->mb * p->wide * sizeof(float), p->m->run->where);
    r[p->nout] = MPI_REQUEST_NULL;
    *req = &r[p->nout];
    return b[p->nout++];
}

/* Sends n floats of src to peer: as they are in fp32, as fp16 in fp16. GPipe and 1F1B
 * queue it (src kept intact until the next message) to pair it with the next receive;
 * interleaved and zb-h1 copy it out and send without blocking. */
static void post(dti_pp *p, const float *src, size_t n, int peer, int micro, int tag,
                 int step)
{
    size_t es = p->fp16 ? dti_work_size(p->m->run) : sizeof(float);
    if (p->nb) {
        MPI_Request *req;
        void *buf = out_buffer(p, &req);
        if (p->fp16)
            dti_from_float(src, buf, p->m->type, n);
        else
            dt_memcpy(buf, src, n * es);
        trace_msg(step, tag == PP_TAG ? "activations" : "gradients", micro, -1);
        count(p, n * es);
        *req = dt_isend(buf, n * es, peer, tag, p->comm);
        return;
    }
    DT_REQUIRE(p->pending.buf == NULL, "pipeline: two messages queued at once");
    pp_msg q = { src, n * sizeof(float), peer, micro };
    if (p->fp16) {
        dti_from_float(src, p->hsend, p->m->type, n);
        q.buf = p->hsend;
        q.nbytes = n * es;
    }
    p->pending = q;
}

/* Receives n floats from peer into dst. GPipe and 1F1B: together with the queued
 * message when that one goes to the same peer (one dt_sendrecv: see the top of the
 * file), after it otherwise. Interleaved and zb-h1: alone, under tag. */
static void receive(dti_pp *p, float *dst, size_t n, int peer, int micro, int tag,
                    int step)
{
    size_t es = p->fp16 ? dti_work_size(p->m->run) : sizeof(float), nbytes = n * es;
    if (p->nb) {                /* device data is staged by dt_irecv and its wait */
        void *wire = p->fp16 ? p->hrecv : (void *)dst;
        trace_msg(step, tag == PP_TAG ? "activations" : "gradients", -1, micro);
        MPI_Request req = dt_irecv(wire, nbytes, peer, tag, p->comm);
        dt_waitall(1, &req);
        if (p->fp16)
            dti_to_float(wire, p->m->type, dst, n, 1.0f);
        return;
    }
    void *wire = p->fp16 ? p->hrecv : (void *)dst;
    pp_msg *q = &p->pending;
    if (q->buf != NULL && q->peer == peer) {
        trace_msg(step, "exchange", q->micro, micro);
        count(p, q->nbytes);
        dt_sendrecv(q->buf, q->nbytes, q->peer, wire, nbytes, peer, PP_TAG, p->comm);
        q->buf = NULL;
    } else {
        flush(p, step);
        trace_msg(step, peer < p->s ? "activations" : "gradients", -1, micro);
        dt_recv(wire, nbytes, peer, PP_TAG, p->comm);
    }
    if (p->fp16)
        dti_to_float(p->hrecv, p->m->type, dst, n, 1.0f);
}

/* ==== one step ==== */

static void mark(int step, const char *phase, int c, int micro, double t0)
{
    dti_mark("pipeline", phase, step, c, (size_t)micro, (size_t)micro + 1, 0, t0);
}

/* layer_done for chunk j's local layers: the stage's numbering, chunk by chunk */
typedef struct {
    void (*fn)(int i, void *ctx);
    void *ctx;
    int base;
} pp_done;

static void chunk_done(int i, void *arg)
{
    const pp_done *d = arg;
    d->fn(d->base + i, d->ctx);
}

double dti_pp_step(dti_pp *p, const float *x, const int *y, float scale, int step,
                   void (*layer_done)(int i, void *ctx), void *ctx)
{
    dti_model *m = p->m;
    int s = p->s, P = p->P, M = p->M, mb = p->mb, V = p->v * P;
    int first = s == 0, last = s == P - 1, zb = p->schedule == DT_PP_ZBH1;
    int prev = (s - 1 + P) % P, next = (s + 1) % P;
    DT_REQUIRE(!first || x != NULL, "pipeline: the first stage needs the inputs");
    DT_REQUIRE(!last || y != NULL, "pipeline: the last stage needs the labels");
    double t_step = dt_trace_now(), busy = 0, loss = 0;
    if (last)                                   /* the batch's labels, up */
        dt_memcpy_input(p->labels, y, (size_t)M * mb * m->lpe * sizeof(int));
    p->held = p->peak = 0;
    p->messages = p->bytes = 0;

    for (int k = 0; k < p->nops; k++) {
        int mi = p->ops[k].micro, j = p->ops[k].chunk, c = j * P + s;
        char kind = p->ops[k].kind;
        pp_chunk *q = &p->ch[j];
        size_t nin = (size_t)mb * q->in, nout = (size_t)mb * q->out;
        /* the operation that completes chunk j's gradients: the last micro-batch's
         * backward (zb-h1: its W), every schedule running them in increasing m */
        pp_done done = { layer_done, ctx, m->v ? m->chunk_nl[j] : 0 };
        int ends = layer_done && mi == M - 1 && kind == (zb ? 'W' : 'B');
        double t0 = dt_trace_now(), tc;
        if (kind == 'F') {
            /* stash a slot; take the input: the data's rows or stage c-1's output */
            DT_REQUIRE(q->nfree > 0, "pipeline: stash of %d slots full", q->K);
            int slot = q->free_slot[--q->nfree];
            q->slot_of[mi] = slot;
            if (++p->held > p->peak)
                p->peak = p->held;
            const float *xm = p->xin;                                /* (mb, in) */
            if (c == 0) {
                if (!p->nb)
                    flush(p, step);
                xm = x + (size_t)mi * nin;
            } else {
                receive(p, p->xin, nin, prev, mi, PP_TAG, step);
            }
            tc = dt_trace_now();
            dti_acts *a = &q->pool[slot];
            const float *out = dti_model_forward(q->m, a, xm, mb, step, mi); /* (mb, out) */
            if (c == V - 1)
                loss += dt_xent(out, p->labels + (size_t)mi * mb * m->lpe, mb * m->lpe,
                                m->classes, scale, p->dlogits + (size_t)slot * nout);
            busy += dt_trace_now() - tc;
            mark(step, "forward", c, mi, t0);
            if (c < V - 1)
                post(p, out, nout, next, mi, PP_TAG, step);
        } else if (kind == 'B') {
            /* the gradient of the output: from the loss, or from stage c+1 */
            int slot = q->slot_of[mi];
            const float *dy = p->dy;                                 /* (mb, out) */
            if (c == V - 1) {
                if (!p->nb)
                    flush(p, step);
                dy = p->dlogits + (size_t)slot * nout;
            } else {
                receive(p, p->dy, nout, next, mi, PP_TAG_GRAD, step);
            }
            tc = dt_trace_now();
            float *dx = c == 0 ? NULL : p->dx;
            if (zb)
                dti_model_backward_input(q->m, &q->pool[slot], dy, dx, mb, step, mi);
            else
                dti_model_backward(q->m, &q->pool[slot], dy, dx, mb, step, mi,
                                   ends ? chunk_done : NULL, &done);
            busy += dt_trace_now() - tc;
            if (!zb) {
                q->free_slot[q->nfree++] = slot;
                p->held--;
            }
            mark(step, "backward", c, mi, t0);
            if (c > 0)
                post(p, p->dx, nin, prev, mi, PP_TAG_GRAD, step);
        } else {
            /* zb-h1's W: the weights' gradients, from what B left */
            int slot = q->slot_of[mi];
            dti_model_backward_weights(q->m, &q->pool[slot], mb, step, mi,
                                       ends ? chunk_done : NULL, &done);
            busy += dt_trace_now() - t0;
            q->free_slot[q->nfree++] = slot;
            p->held--;
            mark(step, "weights", c, mi, t0);
        }
    }
    if (p->nb)
        dt_waitall(p->nout, p->out_req);
    else
        flush(p, step);
    double wall = dt_trace_now() - t_step;
    p->bubble = wall > 0 ? 1.0 - busy / wall : 0.0;
    if (p->bubble < 0)
        p->bubble = 0;
    return loss;
}
