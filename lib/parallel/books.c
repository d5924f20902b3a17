/* What every training mode shares, below all of them and the checkpoints: the names of
 * the modes and codecs, and the run's books (memory held, time per step, compute, the
 * losses, the summary, the final weights), the trace's marks and the DT_TEST_KILL
 * hook. run.c's dt_train sets a run up and calls a mode; the modes and checkpoint*.c
 * keep their books here. Nothing here calls a mode, the checkpoints or run.c. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "buf.h"
#include "cuda.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "trace.h"

/* ==== names ==== */

static const char *const mode_names[DT_NMODES] = {
    "serial", "dp", "ddp", "fsdp", "tp", "pp", "hybrid", "moe", "dp-threads"
};
static const char *const compress_names[DT_NCOMPRESS] = { "none", "fp16", "int8", "sign" };

/* The index of s among names[0..n), or -1. */
static int name_index(const char *const *names, int n, const char *s)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

const char *dt_mode_name(dt_mode m)
{
    return m >= 0 && m < DT_NMODES ? mode_names[m] : "?";
}

int dt_mode_parse(const char *s, dt_mode *m)
{
    int i = name_index(mode_names, DT_NMODES, s);
    if (i >= 0)
        *m = (dt_mode)i;
    return i < 0 ? -1 : 0;
}

const char *dt_pp_schedule_name(dt_pp_schedule s)
{
    static const char *const names[] = { "gpipe", "1f1b", "interleaved", "zb-h1" };
    return s >= 0 && s <= DT_PP_ZBH1 ? names[s] : "?";
}

const char *dt_compress_name(dt_compress k)
{
    return k >= 0 && k < DT_NCOMPRESS ? compress_names[k] : "?";
}

int dt_compress_parse(const char *s, dt_compress *k)
{
    int i = name_index(compress_names, DT_NCOMPRESS, s);
    if (i >= 0)
        *k = (dt_compress)i;
    return i < 0 ? -1 : 0;
}

/* ==== the books ==== */

void *dti_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    DT_REQUIRE(p != NULL, "out of host memory (%zu x %zu bytes)", n, size);
    return p;
}

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;

void dti_held(dti_run *r, int what, size_t nbytes, int add)
{
    pthread_mutex_lock(&held_lock);
    DT_REQUIRE(add || r->held[what] >= nbytes, "dti_free: freeing %zu bytes, %zu held",
               nbytes, r->held[what]);
    r->held[what] = add ? r->held[what] + nbytes : r->held[what] - nbytes;
    if (r->held[what] > r->peak[what])
        r->peak[what] = r->held[what];
    pthread_mutex_unlock(&held_lock);
}

void *dti_alloc(dti_run *r, int what, size_t nbytes, int host)
{
    void *p = dt_malloc(nbytes, host ? DT_CPU : r->where);
    dt_memzero(p, nbytes);
    dti_held(r, what, nbytes, 1);
    return p;
}

void dti_free(dti_run *r, int what, void *p, size_t nbytes)
{
    if (p == NULL)
        return;
    dti_held(r, what, nbytes, 0);
    dt_free(p);
}

/* The compute dti_compute_event records, in nanoseconds, tracing or not: the steps read
 * it (dti_step_begin, dti_step_end) for the result's compute_seconds, unless the mode
 * gives a step's compute as wall time (dti_step_compute: threads computing at once).
 * Atomic: several threads may compute (atomic doubles would need libatomic). */
static _Atomic unsigned long long compute_ns;

/* Test hook: DT_TEST_KILL=R:S in the environment makes rank R of a run over every rank
 * raise SIGKILL on itself at the end of step S (dti_step_end, before that step's
 * checkpoint), as a lost node would: no word, no clean-up, and the watcher (watch.c)
 * names it. Only in a run that did not resume (r->first == 1), so that a job restarted
 * from a checkpoint (scripts/elastic.sh) does not die again. A fresh run (no --resume)
 * whose ranks or steps do not reach R:S is refused (exit 2); a resumed one ignores it.
 * dt_train reads it (dti_test_kill_env) and arms it (dti_test_kill_arm); kill_step 0:
 * off. */
static int kill_rank = -1, kill_step;

/* The digits at *v, lo to hi, followed by the character stop, into *out and *v past
 * them: 0, or -1 (no digit first, a sign, another character, out of range). */
static int whole(const char **v, char stop, long lo, long hi, int *out)
{
    char *end;
    long x = strtol(*v, &end, 10);
    if (!(**v >= '0' && **v <= '9') || *end != stop || x < lo || x > hi)
        return -1;
    *out = (int)x;
    *v = end;
    return 0;
}

int dti_test_kill_env(int *rank, int *step)
{
    const char *v = getenv("DT_TEST_KILL");
    int R, S;
    *rank = -1;
    *step = 0;
    if (v == NULL || *v == 0)
        return 0;
    if (whole(&v, ':', 0, 1000000, &R) != 0 || (++v, whole(&v, 0, 1, 100000000, &S)) != 0)
        return -1;
    *rank = R;
    *step = S;
    return 0;
}

int dti_test_crash_env(int *step)
{
    const char *v = getenv("DT_TEST_CHECKPOINT_CRASH");
    *step = 0;
    return v == NULL || *v == 0 ? 0 : whole(&v, 0, 1, 100000000, step);
}

void dti_test_kill_arm(int rank, int step)
{
    kill_rank = rank;
    kill_step = step;
}

void dti_step_begin(dti_run *r, int step)
{
    dti_mark("train", "step", step, -1, 0, 0, 0, NAN);  /* the trace's step mark */
    r->t_begin = MPI_Wtime();                   /* the straggler's sleep is its step's */
    r->c_begin = compute_ns;
    r->c_wall = NAN;
    /* the device books count the steps that seconds_per_step counts */
    if (step == r->first + 1 || (step == r->first && r->cfg->steps == r->first)) {
        dt_device_books_get(&r->books0);
        r->res->books_from = step;
    }
    if (r->cfg->slow_ms > 0 && r->rank == r->cfg->slow_rank) {
        int ms = r->cfg->slow_ms;               /* a straggler: a slower GPU */
        struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
}

void dti_step_end(dti_run *r, int step, float loss, int skipped, const char *extra)
{
    DT_REQUIRE(step >= 1 && step <= r->cfg->steps, "dti_step_end: step %d of %d", step,
               r->cfg->steps);
    dti_cuda_settle();          /* the step's time covers its queued GPU work */
    double dt = MPI_Wtime() - r->t_begin;
    double c = isnan(r->c_wall) ? (double)(compute_ns - r->c_begin) * 1e-9 : r->c_wall;
    if (step > r->first || r->cfg->steps == r->first) {  /* the first warms up */
        r->t_sum += dt;
        r->c_sum += c;
    }
    if (step == r->cfg->steps) {                /* the books of the counted steps */
        dt_device_books b, *d = &r->res->books, *a = &r->books0;
        dt_device_books_get(&b);
#define DIFF(f) .f = b.f - a->f
        *d = (dt_device_books){ DIFF(launches), DIFF(waits), DIFF(allocs), DIFF(tensors),
                                DIFF(tensor_bytes), DIFF(inputs), DIFF(input_bytes),
                                DIFF(numbers), DIFF(number_bytes) };
#undef DIFF
        r->res->books_to = step;
    }
    r->res->loss[step - 1] = loss;
    r->res->skipped[step - 1] = skipped;
    r->res->step_seconds[step - 1] = dt;
    r->res->step_compute[step - 1] = c;
    if (r->rank == 0 && r->cfg->on_step) {
        dt_step_report rep = { .step = step, .loss = loss };
        snprintf(rep.extra, sizeof rep.extra, "%s", extra ? extra : "");
        for (size_t n = strlen(rep.extra); n > 0 && rep.extra[n - 1] == ' '; n--)
            rep.extra[n - 1] = 0;
        r->cfg->on_step(&rep, r->cfg->ctx);
    }
    if (step == kill_step && r->rank == kill_rank && r->first == 1) {  /* DT_TEST_KILL */
        fflush(stdout);
        fprintf(stderr, "DT_TEST_KILL=%d:%d: rank %d raises SIGKILL at the end of step "
                "%d\n", kill_rank, kill_step, r->rank, step);
        fflush(stderr);
        raise(SIGKILL);
    }
}

void dti_step_compute(dti_run *r, double seconds)
{
    r->c_wall = seconds;
}

void dti_summary(dti_run *r, const char *fmt, ...)
{
    if (r->rank != 0)
        return;
    char *s = r->res->summary;
    size_t used = strlen(s), cap = sizeof r->res->summary;
    if (used + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s + used, cap - used - 1, fmt, ap);
    va_end(ap);
    strcat(s, "\n");
}

void dti_result_params(dti_run *r, const float *owned)
{
    float *dst = r->rank == 0 ? r->res->params : NULL;
    /* bookkeeping, not training: MPI's own reduce, so that it is not counted */
    dti_mpi_reduce(owned, dst, (int)r->nparams, MPI_FLOAT, MPI_SUM, 0, r->comm);
}

double dti_mark_begin(void)
{
    return dt_trace_enabled() ? dt_trace_now() : 0;
}

void dti_mark(const char *coll, const char *phase, int step, int chunk, size_t lo, size_t hi,
              size_t nbytes, double t0)
{
    if (!dt_trace_enabled())
        return;
    double t1 = dt_trace_now();
    dt_trace_phase(coll, phase);
    dt_trace_step(step, -1, 0, 0, chunk, lo, hi);
    dt_trace_add(DT_EV_MARK, -1, nbytes, isnan(t0) ? t1 : t0, t1);
}

void dti_compute_event(const char *phase, int step, int layer, int micro, double t0)
{
    dti_compute_part(phase, NULL, step, layer, micro, t0);
}

void dti_compute_part(const char *phase, const char *part, int step, int layer, int micro,
                      double t0)
{
    dti_cuda_settle();          /* the GPU's work queued since t0, not just its launch */
    double t1 = dt_trace_now();
    compute_ns += t1 > t0 ? (unsigned long long)((t1 - t0) * 1e9) : 0;
    if (!dt_trace_enabled())
        return;
    char name[DTI_TRACE_NAME_MAX + 1];
    snprintf(name, sizeof name, "%s%s%s", phase, part ? "-" : "", part ? part : "");
    dt_trace_phase("train", name);
    dt_trace_step(step, -1, 0, 0, layer, micro < 0 ? 0 : (size_t)micro,
                  micro < 0 ? 0 : (size_t)micro + 1);
    dt_trace_add(DT_EV_COMPUTE, -1, 0, t0, t1);
}
