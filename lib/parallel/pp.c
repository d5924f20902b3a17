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
 * Trace: besides the compute events of model.c, a mark per operation (coll "pipeline",
 * phase forward or backward, chunk = stage, lo..hi = micro..micro+1) from the start of
 * its receive to the end of its computation, and the messages under coll "pipeline",
 * phase activations, gradients or exchange (chunk = micro-batch). */
#include <stdlib.h>
#include "buf.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "schedule.h"
#include "trace.h"

#define PP_TAG 101               /* below DT_TAG_BASE: ours, not the collectives' */

typedef struct {                 /* a message waiting to go out */
    const void *buf;             /* NULL: none */
    size_t nbytes;
    int peer, micro;
} pp_msg;

struct dti_pp {
    dti_model *m;
    MPI_Comm comm;
    int s, P, M, mb, schedule;
    int in, out;                 /* widths of what enters and leaves this stage */
    int fp16;                    /* messages travel as fp16 */
    dt_pp_op *ops;               /* [2M] this stage's order */

    /* the stash: K slots of activations, K = the schedule's peak for this stage */
    int K, nfree, held, peak;
    dti_acts *pool;              /* [K] */
    int *free_slot;              /* [K] a stack of free slots */
    int *slot_of;                /* [M] the slot micro-batch m stashed in */
    float *dlogits;              /* last stage: [K] x (mb, out), with the slot */
    int *labels;                 /* last stage: (M*mb) where the model lives */

    float *xin, *dy, *dx;        /* received activations, received gradient, sent dx */
    void *hsend, *hrecv;         /* fp16: the wire copies, (mb, max width) halves */
    pp_msg pending;
    double bubble;
};

/* ==== set-up ==== */

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
    DT_REQUIRE(schedule == DT_PP_GPIPE || schedule == DT_PP_1F1B,
               "pipeline: unknown schedule %d", (int)schedule);
    DT_REQUIRE(M >= 1 && mb >= 1 && mb <= m->Bmax, "pipeline: %d micro-batches of %d rows "
               "(the model has buffers for %d rows)", M, mb, m->Bmax);
    p->in = dti_model_in_width(m);
    p->out = dti_model_out_width(m);
    int first = p->s == 0, last = p->s == p->P - 1;
    DT_REQUIRE(!first || p->in == dti_data_cols(m->run->cfg), "pipeline: stage 0 takes %d "
               "columns, the data has %d", p->in, dti_data_cols(m->run->cfg));
    DT_REQUIRE(!last || p->out == m->lpe * m->classes, "pipeline: the last stage gives %d "
               "columns, the model %d labels of %d classes", p->out, m->lpe, m->classes);
    p->fp16 = m->type != MPI_FLOAT;

    int n = 2 * M;
    p->ops = malloc(n * sizeof *p->ops);
    DT_REQUIRE(p->ops != NULL, "out of host memory");
    dt_pp_order(p->schedule, p->P, M, p->s, p->ops);

    p->K = dt_pp_peak_stash(p->schedule, p->P, M, p->s);
    p->pool = calloc(p->K, sizeof *p->pool);
    p->free_slot = malloc(p->K * sizeof *p->free_slot);
    p->slot_of = malloc(M * sizeof *p->slot_of);
    DT_REQUIRE(p->pool && p->free_slot && p->slot_of, "out of host memory");
    for (int k = 0; k < p->K; k++) {
        dti_acts_alloc(m, mb, &p->pool[k]);
        p->free_slot[k] = p->K - 1 - k;       /* slot 0 on top */
    }
    p->nfree = p->K;

    dt_device_kind where = m->run->where;
    size_t rows = (size_t)mb;
    if (last) {
        p->dlogits = dt_malloc((size_t)p->K * rows * p->out * sizeof(float), where);
        p->labels = dt_malloc((size_t)M * rows * m->lpe * sizeof(int), where);
    }
    if (!first) {
        p->xin = dt_malloc(rows * p->in * sizeof(float), where);
        p->dx = dt_malloc(rows * p->in * sizeof(float), where);
    }
    if (!last)
        p->dy = dt_malloc(rows * p->out * sizeof(float), where);
    if (p->fp16 && p->P > 1) {
        size_t wide = (size_t)(p->in > p->out ? p->in : p->out);
        p->hsend = dt_malloc(rows * wide * dti_work_size(m->run), where);
        p->hrecv = dt_malloc(rows * wide * dti_work_size(m->run), where);
    }
    return p;
}

void dti_pp_free(dti_pp *p)
{
    if (p == NULL)
        return;
    for (int k = 0; k < p->K; k++)
        dti_acts_free(&p->pool[k]);
    free(p->pool);
    free(p->free_slot);
    free(p->slot_of);
    free(p->ops);
    dt_free(p->dlogits);
    dt_free(p->labels);
    dt_free(p->xin);
    dt_free(p->dx);
    dt_free(p->dy);
    dt_free(p->hsend);
    dt_free(p->hrecv);
    free(p);
}

void dti_pp_stats(const dti_pp *p, double *bubble, int *peak_stash)
{
    if (bubble)
        *bubble = p->bubble;
    if (peak_stash)
        *peak_stash = p->peak;
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
    dt_send(q->buf, q->nbytes, q->peer, PP_TAG, p->comm);
    q->buf = NULL;
}

/* Queues n floats of src (kept intact until the next message) for peer: as they are
 * in fp32, converted into hsend in fp16. */
static void post(dti_pp *p, const float *src, size_t n, int peer, int micro)
{
    DT_REQUIRE(p->pending.buf == NULL, "pipeline: two messages queued at once");
    pp_msg q = { src, n * sizeof(float), peer, micro };
    if (p->fp16) {
        dti_from_float(src, p->hsend, p->m->type, n);
        q.buf = p->hsend;
        q.nbytes = n * dti_work_size(p->m->run);
    }
    p->pending = q;
}

/* Receives n floats from peer into dst, together with the queued message when that one
 * goes to the same peer (one dt_sendrecv: see the top of the file), after it otherwise. */
static void receive(dti_pp *p, float *dst, size_t n, int peer, int micro, int step)
{
    void *wire = p->fp16 ? p->hrecv : (void *)dst;
    size_t nbytes = n * (p->fp16 ? dti_work_size(p->m->run) : sizeof(float));
    pp_msg *q = &p->pending;
    if (q->buf != NULL && q->peer == peer) {
        trace_msg(step, "exchange", q->micro, micro);
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

static void mark(int step, const char *phase, int s, int micro, double t0)
{
    dti_mark("pipeline", phase, step, s, (size_t)micro, (size_t)micro + 1, 0, t0);
}

double dti_pp_step(dti_pp *p, const float *x, const int *y, float scale, int step,
                   void (*layer_done)(int i, void *ctx), void *ctx)
{
    dti_model *m = p->m;
    int s = p->s, mb = p->mb, first = s == 0, last = s == p->P - 1, n = 2 * p->M;
    size_t nin = (size_t)mb * p->in, nout = (size_t)mb * p->out;
    DT_REQUIRE(!first || x != NULL, "pipeline: the first stage needs the inputs");
    DT_REQUIRE(!last || y != NULL, "pipeline: the last stage needs the labels");
    double t_step = dt_trace_now(), busy = 0, loss = 0;
    if (last)                                   /* the batch's labels, up */
        dt_memcpy_input(p->labels, y, (size_t)p->M * mb * m->lpe * sizeof(int));
    p->held = p->peak = 0;

    for (int k = 0; k < n; k++) {
        int mi = p->ops[k].micro;
        double t0 = dt_trace_now(), tc;
        if (p->ops[k].kind == 'F') {
            /* stash a slot; take the input: the data's rows or stage s-1's output */
            DT_REQUIRE(p->nfree > 0, "pipeline: stash of %d slots full", p->K);
            int slot = p->free_slot[--p->nfree];
            p->slot_of[mi] = slot;
            if (++p->held > p->peak)
                p->peak = p->held;
            const float *xm = p->xin;                                /* (mb, in) */
            if (first) {
                flush(p, step);
                xm = x + (size_t)mi * nin;
            } else {
                receive(p, p->xin, nin, s - 1, mi, step);
            }
            tc = dt_trace_now();
            dti_acts *a = &p->pool[slot];
            const float *out = dti_model_forward(m, a, xm, mb, step, mi);  /* (mb, out) */
            if (last)
                loss += dt_xent(out, p->labels + (size_t)mi * mb * m->lpe, mb * m->lpe,
                                m->classes, scale,
                                p->dlogits + (size_t)slot * nout);
            busy += dt_trace_now() - tc;
            mark(step, "forward", s, mi, t0);
            if (!last)
                post(p, out, nout, s + 1, mi);
        } else {
            /* the gradient of the output: from the loss, or from stage s+1 */
            int slot = p->slot_of[mi];
            const float *dy = p->dy;                                 /* (mb, out) */
            if (last) {
                flush(p, step);
                dy = p->dlogits + (size_t)slot * nout;
            } else {
                receive(p, p->dy, nout, s + 1, mi, step);
            }
            tc = dt_trace_now();
            /* B M-1 is the last operation: it completes every layer's gradients */
            dti_model_backward(m, &p->pool[slot], dy, first ? NULL : p->dx, mb, step, mi,
                               k == n - 1 ? layer_done : NULL, ctx);
            busy += dt_trace_now() - tc;
            p->free_slot[p->nfree++] = slot;
            p->held--;
            mark(step, "backward", s, mi, t0);
            if (!first)
                post(p, p->dx, nin, s - 1, mi);
        }
    }
    flush(p, step);
    double wall = dt_trace_now() - t_step;
    p->bubble = wall > 0 ? 1.0 - busy / wall : 0.0;
    if (p->bubble < 0)
        p->bubble = 0;
    return loss;
}
