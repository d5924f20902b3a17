/* DataParallel: data parallelism inside one process, a replica of the model per
 * thread, as PyTorch's nn.DataParallel runs it (one thread per GPU there; one per core
 * here). The other classic DP, the parameter server, is dp.c; DDP is ddp.c.
 *
 *                 master thread: the weights W (replica 0's), the optimizer
 *                 |  1 replicate  2 scatter       4 gather     5 loss over the batch
 *                 |  W -> replica k   rows -> k   outputs <- k    dlogits -> k (6)
 *                 v                                               8 gather grads, step
 *      thread 0   thread 1   ...   thread T-1     (each: its replica, its rows)
 *      3 forward  3 forward        3 forward
 *      7 backward 7 backward       7 backward
 *
 * One step (T threads, global batch B, replica k takes rows dt_chunk_bounds(B, T, k)):
 *   1. replicate: the master copies W into replicas 1..T-1 (replica 0 computes on W
 *      itself, as DataParallel's device 0 holds the module)
 *   2. scatter: replica k > 0 gets a copy of its rows of the batch; replica 0 reads
 *      the master's batch in place
 *   3. the threads run forward on their rows at once
 *   4. gather: the master copies every replica's outputs (logits) into one (B, out)
 *   5. the master takes the loss of the whole batch, scaled by 1/B, as serial does
 *   6. scatter back: replica k > 0 gets a copy of its rows of dlogits
 *   7. the threads run backward at once, each into its own gradients
 *   8. gather: the master adds replicas 1..T-1's gradients into replica 0's, in replica
 *      order (the same sum every run), and steps the optimizer on W
 * The summed gradient is the serial one cut into T pieces: the same weights as serial
 * training, to rounding.
 *
 * What the master copies per step (Psi = 4P bytes of weights, B_0 = replica 0's rows):
 *     weights out (T-1) Psi, gradients in (T-1) Psi,
 *     inputs (B - B_0) x in x 4, outputs and their gradients (B - B_0) x out x 4 each
 * all through the master, every step, while in DDP every process keeps its own replica
 * and sends 2(N-1)/N Psi of gradients (ring allreduce), the same on every rank, with no
 * replicate and no gather. The master's copies, its loss and its optimizer are serial:
 * the threads wait for them (res->copy_seconds, master_seconds). A step's compute
 * (res->compute_seconds) is wall time: the threads' phases, from the master's go to
 * the last thread's end, and the master's loss and optimizer; the threads' own compute
 * events add up to more, T threads computing at once.
 *
 * The interpreter lock (--gil g). In Python every thread must hold the GIL to run
 * Python: the bookkeeping between two operations. PyTorch releases it inside an
 * operation, so the arithmetic runs in parallel but the bookkeeping does not. Here a
 * replica, after each operation (forward; each layer's backward), takes one global
 * lock and burns g/(1-g) times the CPU time the operation took: so with one thread g
 * of the work is bookkeeping, and with T threads the bookkeeping of all of them waits
 * in one queue. The step cannot take less than the sum of everyone's bookkeeping,
 * g/(1-g) of the whole batch's compute, however many threads there are
 * (res->gil_wait_seconds: a replica's waits for the lock). The master's own work is not
 * charged: it is copies and arithmetic, which release the lock in PyTorch too.
 *
 * Threads: started once, they sleep on a condition variable between phases (a
 * spinning thread would take the core another needs). The trace records each thread's
 * forward and backward (micro = the replica), its bookkeeping ("interpret") and its
 * waits for the lock ("lock-wait"), on thread k+1 for replica k, and the master's
 * marks per copy (coll "dp-threads": replicate, scatter, gather, ...) on thread 0.
 * Checkpoints hold W and the optimizer state, as serial's.
 *
 * On a GPU (--device cuda) every replica, the batch and the logits live on the device,
 * as DataParallel's do (there on one GPU each; here the replicas share this rank's GPU,
 * each thread's kernels on its own CUDA stream, so they can run at once). The master's
 * copies are then copies between device buffers, which stay on the GPU; the batch
 * comes up once a step and the loss down, as in every mode. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "buf.h"
#include "cuda.h"
#include "parallel_internal.h"
#include "schedule.h"
#include "trace.h"

enum { PH_FORWARD, PH_BACKWARD, PH_STOP };
enum { C_WEIGHTS, C_INPUTS, C_OUTPUTS, C_DOUTPUTS, C_GRADS, NCOPY };
static const char *const copy_names[NCOPY] = {
    "replicate", "scatter", "gather", "scatter-grad", "reduce"
};

typedef struct dpt dpt;

typedef struct {
    dpt *d;
    int k;                   /* the replica */
    pthread_t thread;
    dti_model m;             /* replica 0's params are W, the master's weights */
    dti_acts a;
    int row0, rows;          /* its rows of the global batch */
    float *x, *dy;           /* (rows, in), (rows, out): replica 0's point into the
                                master's batch and logits, the others' are copies */
    const float *out;        /* its logits after forward, in a */
    double cpu_mark;         /* thread CPU time after the last bookkeeping */
    double gil_wait;         /* seconds waiting for the lock, this step */
} replica;

struct dpt {
    dti_run *r;
    int T, B, in, out;       /* in, out: floats of an example's input and logits */
    int lpe, classes;        /* labels per example (1, the GPT's seq), logits each */
    size_t n, psi;           /* weights; bytes of one copy */
    replica *rep;
    float *x, *logits;       /* the batch (B, in) and the gathered logits (B, out), */
    int *y;                  /* where the run lives; its labels (B) */
    float *hx;               /* on a GPU: the data loader's batch on the host, and */
    int *hy;                 /* its labels (else the same as x and y) */
    float *state;
    size_t state_bytes;
    size_t copied[NCOPY];    /* bytes, all steps */

    pthread_mutex_t mu;      /* the phases: guards phase, gen, ndone */
    pthread_cond_t go, done;
    int phase, step, ndone;
    unsigned gen;

    float gil;               /* 0: no lock */
    pthread_mutex_t gil_mu;  /* the interpreter lock */
};

/* ==== the interpreter lock ==== */

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Between two operations of a replica: bookkeeping of g/(1-g) times the CPU time the
 * operation took, under the global lock. */
static void interpret(replica *p, int step)
{
    dpt *d = p->d;
    if (d->gil <= 0)
        return;
    double need = (cpu_now() - p->cpu_mark) * d->gil / (1 - d->gil);
    double w0 = MPI_Wtime(), tw = dti_mark_begin();
    pthread_mutex_lock(&d->gil_mu);
    double waited = MPI_Wtime() - w0;
    p->gil_wait += waited;
    if (waited >= 1e-6)      /* the trace: this thread's wait for the lock */
        dti_mark("dp-threads", "lock-wait", step, p->k, p->k, p->k + 1, 0, tw);
    double t0 = dt_trace_now(), c0 = cpu_now();
    while (cpu_now() - c0 < need)
        ;                    /* interpreting: the CPU busy, the lock held */
    dti_compute_event("interpret", step, -1, p->k, t0);
    pthread_mutex_unlock(&d->gil_mu);
    p->cpu_mark = cpu_now();
}

static void layer_done(int i, void *ctx)
{
    replica *p = ctx;
    (void)i;
    interpret(p, p->d->step);
}

/* ==== the threads ==== */

static void run_phase(replica *p, int phase, int step)
{
    if (p->rows == 0)
        return;
    p->cpu_mark = cpu_now();
    if (phase == PH_FORWARD) {
        p->gil_wait = 0;
        interpret(p, step);                  /* the call itself is Python */
        p->out = dti_model_forward(&p->m, &p->a, p->x, p->rows, step, p->k);
        interpret(p, step);
    } else {
        dt_memzero(p->m.grads, p->d->psi);
        dti_model_backward(&p->m, &p->a, p->dy, NULL, p->rows, step, p->k, layer_done, p);
    }
}

static void *thread_main(void *arg)
{
    replica *p = arg;
    dpt *d = p->d;
    unsigned seen = 0;
    dt_trace_thread(p->k + 1);              /* its events: thread k+1, the master's 0 */
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->gen == seen)
            pthread_cond_wait(&d->go, &d->mu);
        seen = d->gen;
        int phase = d->phase, step = d->step;
        pthread_mutex_unlock(&d->mu);
        if (phase == PH_STOP)
            return NULL;
        run_phase(p, phase, step);
        dti_cuda_settle();          /* its stream's work done before the master reads it */
        pthread_mutex_lock(&d->mu);
        if (++d->ndone == d->T)
            pthread_cond_signal(&d->done);
    }
}

/* The master: every thread runs phase, and the master waits until all are done. */
static void run_all(dpt *d, int phase, int step)
{
    dti_cuda_settle();              /* the master's queued work (lib/device.cu) first */
    pthread_mutex_lock(&d->mu);
    d->phase = phase;
    d->step = step;
    d->ndone = 0;
    d->gen++;
    pthread_cond_broadcast(&d->go);
    while (phase != PH_STOP && d->ndone < d->T)
        pthread_cond_wait(&d->done, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

/* ==== the master's copies ==== */

/* dst = src, nbytes, counted under what when it crosses to another replica (k > 0). */
static void copy(dpt *d, int what, int k, void *dst, const void *src, size_t nbytes,
                 int step)
{
    if (k == 0 || nbytes == 0)
        return;
    double t0 = dti_mark_begin();
    dt_memcpy(dst, src, nbytes);
    d->copied[what] += nbytes;
    dti_mark("dp-threads", copy_names[what], step, k, 0, nbytes / sizeof(float), nbytes, t0);
}

/* ==== setting up and down ==== */

static void setup(dpt *d, dti_run *r)
{
    const dt_train_config *c = r->cfg;
    memset(d, 0, sizeof *d);
    d->r = r;
    d->T = c->threads;
    d->B = c->batch;
    d->lpe = dti_labels_per_example(c);
    d->classes = c->kind == DT_MODEL_GPT ? c->gpt.vocab : c->model.out;
    d->in = dti_data_cols(c);
    d->out = d->lpe * d->classes;
    d->n = r->nparams;
    d->psi = d->n * sizeof(float);
    d->gil = c->gil;
    dt_device_kind at = r->where;
    d->hx = dti_calloc((size_t)d->B * d->in, sizeof(float));
    d->hy = dti_calloc((size_t)d->B * d->lpe, sizeof(int));
    d->x = at == DT_CPU ? d->hx : dt_malloc((size_t)d->B * d->in * sizeof(float), at);
    d->y = at == DT_CPU ? d->hy : dt_malloc((size_t)d->B * d->lpe * sizeof(int), at);
    d->logits = dt_malloc((size_t)d->B * d->out * sizeof(float), at);
    dt_memzero(d->logits, (size_t)d->B * d->out * sizeof(float));
    dti_held(r, DTI_ACTS, (size_t)d->B * d->out * sizeof(float), 1);
    d->rep = dti_calloc((size_t)d->T, sizeof *d->rep);
    for (int k = 0; k < d->T; k++) {
        replica *p = &d->rep[k];
        size_t lo, hi;
        dt_chunk_bounds((size_t)d->B, d->T, k, &lo, &hi);
        p->d = d;
        p->k = k;
        p->row0 = (int)lo;
        p->rows = (int)(hi - lo);
        dti_model_init(&p->m, r, 0, dti_units(c), MPI_COMM_SELF, c->tp_style, p->rows);
        DT_REQUIRE(p->m.n == d->n, "dp-threads: a replica holds %zu of %zu weights",
                   p->m.n, d->n);
        dti_acts_alloc(&p->m, p->rows, &p->a);
        if (k == 0) {
            p->x = d->x;
            p->dy = d->logits;
        } else {
            p->x = dt_malloc((size_t)p->rows * d->in * sizeof(float), at);
            p->dy = dt_malloc((size_t)p->rows * d->out * sizeof(float), at);
        }
    }
    float *w0 = dti_calloc(d->n, sizeof(float));                  /* W */
    dti_init_weights(c, w0);
    dt_memcpy(d->rep[0].m.params, w0, d->psi);
    free(w0);
    d->state_bytes = d->n * dt_optim_state_per_param(c->optim.kind) * sizeof(float);
    d->state = dti_alloc(r, DTI_OPTIM, d->state_bytes, 0);

    DT_REQUIRE(pthread_mutex_init(&d->mu, NULL) == 0 &&
               pthread_mutex_init(&d->gil_mu, NULL) == 0 &&
               pthread_cond_init(&d->go, NULL) == 0 &&
               pthread_cond_init(&d->done, NULL) == 0, "dp-threads: pthread init failed");
    for (int k = 0; k < d->T; k++)
        DT_REQUIRE(pthread_create(&d->rep[k].thread, NULL, thread_main, &d->rep[k]) == 0,
                   "dp-threads: could not start thread %d of %d", k, d->T);
}

static void teardown(dpt *d)
{
    run_all(d, PH_STOP, 0);
    for (int k = 0; k < d->T; k++)
        pthread_join(d->rep[k].thread, NULL);
    pthread_cond_destroy(&d->done);
    pthread_cond_destroy(&d->go);
    pthread_mutex_destroy(&d->gil_mu);
    pthread_mutex_destroy(&d->mu);
    for (int k = 0; k < d->T; k++) {
        replica *p = &d->rep[k];
        if (k > 0) {
            dt_free(p->x);
            dt_free(p->dy);
        }
        dti_acts_free(&p->a);
        dti_model_free(&p->m);
    }
    dti_free(d->r, DTI_OPTIM, d->state, d->state_bytes);
    dti_held(d->r, DTI_ACTS, (size_t)d->B * d->out * sizeof(float), 0);
    free(d->rep);
    if (d->x != d->hx) {
        dt_free(d->x);
        dt_free(d->y);
    }
    free(d->hx);
    free(d->hy);
    dt_free(d->logits);
}

/* ==== the step ==== */

/* One step; adds the master's copy and serial seconds and the replicas' to t[0..2]. */
static double step(dpt *d, int s, double t[3])
{
    dti_run *r = d->r;
    const dt_train_config *c = r->cfg;
    float *W = d->rep[0].m.params, *G = d->rep[0].m.grads;
    dti_batch(c, s - 1, d->B, 0, d->B, d->hx, d->hy);            /* the data loader's */
    dt_memcpy_input(d->x, d->hx, (size_t)d->B * d->in * sizeof(float));   /* (no-ops */
    dt_memcpy_input(d->y, d->hy, (size_t)d->B * d->lpe * sizeof(int));   /* on the CPU) */
    double t0 = MPI_Wtime(), t1;
    for (int k = 1; k < d->T; k++) {                         /* 1, 2 */
        replica *p = &d->rep[k];
        copy(d, C_WEIGHTS, k, p->m.params, W, d->psi, s);
        copy(d, C_INPUTS, k, p->x, d->x + (size_t)p->row0 * d->in,
             (size_t)p->rows * d->in * sizeof(float), s);
    }
    t1 = MPI_Wtime(); t[0] += t1 - t0; t0 = t1;
    run_all(d, PH_FORWARD, s);                               /* 3 */
    t1 = MPI_Wtime(); t[2] += t1 - t0; t0 = t1;
    for (int k = 0; k < d->T; k++) {                         /* 4: replica 0's too */
        replica *p = &d->rep[k];
        size_t nb = (size_t)p->rows * d->out * sizeof(float);
        float *dst = d->logits + (size_t)p->row0 * d->out;
        if (k == 0)
            dt_memcpy(dst, p->out, nb);                      /* on the master's side */
        copy(d, C_OUTPUTS, k, dst, p->out, nb, s);
    }
    t1 = MPI_Wtime(); t[0] += t1 - t0; t0 = t1;
    double tl = dt_trace_now();                              /* 5 */
    double loss = dt_xent(d->logits, d->y, d->B * d->lpe, d->classes,
                          1.0f / (float)(d->B * d->lpe), d->logits);
    dti_compute_event("loss", s, -1, -1, tl);
    t1 = MPI_Wtime(); t[1] += t1 - t0; t0 = t1;
    for (int k = 1; k < d->T; k++) {                         /* 6 */
        replica *p = &d->rep[k];
        copy(d, C_DOUTPUTS, k, p->dy, d->logits + (size_t)p->row0 * d->out,
             (size_t)p->rows * d->out * sizeof(float), s);
    }
    t1 = MPI_Wtime(); t[0] += t1 - t0; t0 = t1;
    run_all(d, PH_BACKWARD, s);                              /* 7 */
    t1 = MPI_Wtime(); t[2] += t1 - t0; t0 = t1;
    for (int k = 1; k < d->T; k++) {                         /* 8: in replica order */
        double tm = dti_mark_begin();
        dti_accumulate(G, MPI_FLOAT, d->rep[k].m.grads, d->n);
        d->copied[C_GRADS] += d->psi;
        dti_mark("dp-threads", copy_names[C_GRADS], s, k, 0, d->n, d->psi, tm);
    }
    t1 = MPI_Wtime(); t[0] += t1 - t0; t0 = t1;
    char scaler[96];
    dti_scaler_decide(r, 0, MPI_COMM_SELF, scaler, sizeof scaler);   /* fp32: 1 */
    double to = dt_trace_now();
    dti_master_step(r, W, W, G, d->state, d->n);
    dti_compute_event("optimizer", s, -1, -1, to);
    t[1] += MPI_Wtime() - t0;
    return loss;
}

/* ==== the loop ==== */

void dti_train_dp_threads(dti_run *r)
{
    const dt_train_config *c = r->cfg;
    dpt d;
    /* the replicas' threads share this rank's BLAS threads (blas.c): T threads each
     * running sgemm on all of them would ask for T times the cores */
    int blas = dt_blas_threads();
    dt_set_blas_threads(blas / c->threads > 1 ? blas / c->threads : 1);
    setup(&d, r);
    float *W = d.rep[0].m.params;
    dti_ckpt_region(r, "weights", W, d.psi);
    dti_ckpt_region(r, "state", d.state, d.state_bytes);
    dti_span all = { 0, (size_t)r->nparams, 1, 0 };
    dti_ckpt_map(r, "weights", 1, &all, 1);
    dti_ckpt_map(r, "state", dt_optim_state_per_param(c->optim.kind), &all, 1);
    int s0 = dti_ckpt_start(r, 0);

    double sum[3] = {0, 0, 0}, wait = 0;        /* over the timed steps */
    for (int s = s0 + 1; s <= c->steps; s++) {
        double t[3] = {0, 0, 0}, w = 0;
        dti_step_begin(r, s);
        double loss = step(&d, s, t);
        dti_step_compute(r, t[1] + t[2]);       /* wall time, not T threads' summed */
        for (int k = 0; k < d.T; k++)
            w += d.rep[k].gil_wait / d.T;
        char extra[160] = "";
        if (d.gil > 0)
            snprintf(extra, sizeof extra, "lock wait %.3f ms per thread", w * 1e3);
        dti_step_end(r, s, (float)(loss / ((double)c->batch * d.lpe)), 0, extra);
        if (s > r->first || c->steps == r->first) {    /* as run.c times the steps */
            for (int i = 0; i < 3; i++)
                sum[i] += t[i];
            wait += w;
        }
        dti_ckpt_step(r, s);
    }

    /* the books and the summary */
    int S = c->steps - s0, timed = c->steps > r->first ? c->steps - r->first : 1;
    size_t total = 0;
    for (int i = 0; i < NCOPY; i++)
        total += d.copied[i];
    r->res->bytes_copied = total;
    r->res->copy_seconds = sum[0] / timed;
    r->res->master_seconds = sum[1] / timed;
    r->res->replica_seconds = sum[2] / timed;
    r->res->gil_wait_seconds = wait / timed;
    size_t b0 = (size_t)d.rep[0].rows;
    dti_summary(r, "DataParallel: 1 process, %d thread%s, a replica each (rows %d..%d "
                "of %d on thread 0); the master thread replicates, scatters, gathers",
                d.T, d.T == 1 ? "" : "s", 0, d.rep[0].rows - 1, d.B);
    dti_summary(r, "  bytes the master copied per step: weights %.0f, inputs %.0f, "
                "outputs %.0f, output gradients %.0f, gradients %.0f; total %.0f",
                (double)d.copied[C_WEIGHTS] / S, (double)d.copied[C_INPUTS] / S,
                (double)d.copied[C_OUTPUTS] / S, (double)d.copied[C_DOUTPUTS] / S,
                (double)d.copied[C_GRADS] / S, (double)total / S);
    dti_summary(r, "  formula: 2(T-1) Psi + (B-B_0)(in + 2 out) 4 = %.0f (Psi = %zu)",
                2.0 * (d.T - 1) * d.psi + (double)(d.B - b0) * (d.in + 2 * d.out) * 4,
                d.psi);
    dti_summary(r, "  per step: master copies %.3f ms, master loss and optimizer %.3f "
                "ms, threads' forward and backward %.3f ms", r->res->copy_seconds * 1e3,
                r->res->master_seconds * 1e3, r->res->replica_seconds * 1e3);
    if (dt_blas() && r->where == DT_CPU)
        dti_summary(r, "  each thread's matrix products on %d BLAS thread%s (this rank's "
                    "%d shared by %d threads)", dt_blas_threads(),
                    dt_blas_threads() == 1 ? "" : "s", blas, d.T);
    if (d.gil > 0)
        dti_summary(r, "  interpreter lock: %.0f%% of a thread's work under it; a thread "
                    "waited %.3f ms per step for it", 100.0 * d.gil,
                    r->res->gil_wait_seconds * 1e3);

    float *full = dti_calloc(d.n, sizeof(float));
    dt_memcpy(full, W, d.psi);
    dti_result_params(r, full);
    free(full);
    teardown(&d);
    dt_set_blas_threads(blas);
}
