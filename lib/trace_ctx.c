/* Traces, each thread's context: what the next events of this thread belong to (which
 * collective, phase, step and chunk, and the thread's number), set by dt_trace_phase,
 * dt_trace_step and dt_trace_thread (trace.h). trace.c copies it into every event it
 * records (dti_trace_context); a wait that times out says it in words
 * (dti_trace_where, p2p_wait.c). Below both; it calls neither. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "trace.h"
#include "errors.h"
#include "internal.h"

/* What the next events of this thread belong to. "-" and -1 mean none. */
static _Thread_local struct {
    char coll[32], phase[32];
    int step;
    int schunk, rchunk;
    long long slo, shi, rlo, rhi;
    int thread;              /* dt_trace_thread's number, 0 the main thread */
} ctx = { "-", "-", -1, -1, -1, 0, 0, 0, 0, 0 };

/* NULL or "" is "none"; anything else must fit the file's fields. Checked whether or
 * not tracing is on, so a bad name shows up in the first test, not the first trace. */
static void set_name(char dst[32], const char *s, const char *what)
{
    if (s == NULL || s[0] == '\0')
        s = "-";
    DT_REQUIRE(dti_trace_name_ok(s),
               "trace %s '%.40s' must be 1..%d printable characters without spaces",
               what, s, DTI_TRACE_NAME_MAX);
    strcpy(dst, s);
}

void dt_trace_phase(const char *coll, const char *phase)
{
    set_name(ctx.coll, coll, "collective name");
    set_name(ctx.phase, phase, "phase name");
    dt_trace_step(-1, -1, 0, 0, -1, 0, 0);
}

void dt_trace_thread(int k)
{
    DT_REQUIRE(k >= 1 && k <= DTI_TRACE_THREAD_MAX, "dt_trace_thread: thread number %d "
               "out of 1..%d (0 is the main thread's)", k, DTI_TRACE_THREAD_MAX);
    ctx.thread = k;
}

/* The file's fields are signed 64-bit; a size_t beyond that cannot be a real index. */
static long long field64(size_t v)
{
    return v > (size_t)LLONG_MAX ? LLONG_MAX : (long long)v;
}

/* For a timed-out wait's message (p2p.c): this thread's context in words. */
void dti_trace_where(char *buf, size_t n)
{
    if (n == 0)
        return;
    buf[0] = '\0';
    if (strcmp(ctx.coll, "-") == 0)
        return;
    int k = snprintf(buf, n, "%s", ctx.coll);
    if (k >= 0 && (size_t)k < n && strcmp(ctx.phase, "-") && strcmp(ctx.phase, "call"))
        k += snprintf(buf + k, n - (size_t)k, " %s", ctx.phase);
    if (k >= 0 && (size_t)k < n && ctx.step >= 0)
        snprintf(buf + k, n - (size_t)k, " step %d", ctx.step);
}

void dt_trace_step(int step, int send_chunk, size_t slo, size_t shi,
                   int recv_chunk, size_t rlo, size_t rhi)
{
    ctx.step = step < -1 ? -1 : step;
    ctx.schunk = send_chunk < -1 ? -1 : send_chunk;
    ctx.slo = field64(slo);
    ctx.shi = field64(shi);
    ctx.rchunk = recv_chunk < -1 ? -1 : recv_chunk;
    ctx.rlo = field64(rlo);
    ctx.rhi = field64(rhi);
}

void dti_trace_context(dt_event *e)
{
    memcpy(e->coll, ctx.coll, sizeof e->coll);
    memcpy(e->phase, ctx.phase, sizeof e->phase);
    e->step = ctx.step;
    /* What leaves this rank (a send, and the d2h copy staged before it) is the send
     * chunk; everything else works on what arrives: receives, the h2d copy after one,
     * the reduction into it, copies, and compute and marks too. */
    int sending = e->kind == DT_EV_SEND || e->kind == DT_EV_D2H;
    e->chunk = sending ? ctx.schunk : ctx.rchunk;
    e->lo = sending ? ctx.slo : ctx.rlo;
    e->hi = sending ? ctx.shi : ctx.rhi;
    if (e->hi < e->lo)
        e->hi = e->lo;
    e->thread = ctx.thread;
}
