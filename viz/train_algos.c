/* The training side of the timetable (timetable.h): the "# train" line read (a trace's
 * mode, stages and schedule) and written (the built-in schedules, synthesised from
 * lib/schedule), what a step measures, and the questions the viewer asks of a
 * timetable. The built-in schedules are the reference the measures are held to: with
 * no communication time the pipelines' measured bubble is dt_pp_bubble_v's ((P-1)/(M+P-1)
 * for GPipe and 1F1B), each stage's stash peaks at dt_pp_peak_stash_v's and its
 * messages are dt_pp_messages_v's, to rounding; ddp's hidden share
 * and its best are dt_ddp_hidden's and dt_ddp_hidden_best's over its C L slots of
 * allreduce.
 *
 * timetable.c turns events into blocks; everything here reads blocks, not events,
 * except the mode, which reads the trace before there are blocks. */
#include "timetable.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

static double fin(double x, double dflt) { return isfinite(x) ? x : dflt; }

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

/* pp's picture: pipeline, or a hybrid with more than one stage. */
static int pp_like(const dv_tt *tt)
{
    return strcmp(tt->mode, "pp") == 0 || (strcmp(tt->mode, "hybrid") == 0 && tt->stages > 1);
}

/* ==== the "# train" line, read: the mode ==== */

int dv_tt_is_training(const dt_trace *t)
{
    if (t == NULL)
        return 0;
    if (t->train[0])
        return 1;
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].kind == DT_EV_COMPUTE && dvi_is(t->ev[i].coll, "train"))
            return 1;
    return 0;
}

static int header_int(const char *v)
{
    char *end;
    long x = strtol(v, &end, 10);
    return *end == '\0' && x >= 1 && x <= (1 << 20) ? (int)x : 0;
}

/* What the "# train" line says: 0 where it says nothing (schedule -1, gil -1). */
typedef struct {
    int P, M, schedule, v, ranks, steps, layers, threads, dp, tp, pp, cp;
    double gil;
} header;

/* Reads "mode M key value ..." into tt->mode, tt->settings and h. */
static void read_header(dv_tt *tt, const char *train, header *h)
{
    char buf[sizeof ((dt_trace *)0)->train], *save = NULL;
    *h = (header){ .schedule = -1, .gil = -1 };
    snprintf(buf, sizeof buf, "%.*s", (int)sizeof buf - 1, train);
    if (strncmp(buf, "mode ", 5) != 0)
        return;
    size_t len = strcspn(buf + 5, " ");
    snprintf(tt->mode, sizeof tt->mode, "%.*s", (int)(len < 15 ? len : 15), buf + 5);
    snprintf(tt->settings, sizeof tt->settings, "%s", buf[5 + len] ? buf + 6 + len : "");
    static const struct { const char *key; size_t at; } ints[] = {
        { "stages", offsetof(header, P) }, { "micro", offsetof(header, M) },
        { "ranks", offsetof(header, ranks) }, { "steps", offsetof(header, steps) },
        { "layers", offsetof(header, layers) }, { "threads", offsetof(header, threads) },
        { "dp", offsetof(header, dp) }, { "tp", offsetof(header, tp) },
        { "pp", offsetof(header, pp) }, { "cp", offsetof(header, cp) },
        { "virtual", offsetof(header, v) },
    };
    for (char *k = strtok_r(buf + 5 + len, " ", &save); k; k = strtok_r(NULL, " ", &save)) {
        char *v = strtok_r(NULL, " ", &save), *end;
        if (v == NULL)
            break;
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
            if (strcmp(k, ints[i].key) == 0)
                *(int *)((char *)h + ints[i].at) = header_int(v);
        if (strcmp(k, "schedule") == 0)
            h->schedule = dv_train_algo_index(v) < DV_TRAIN_DDP ? dv_train_algo_index(v) : -1;
        if (strcmp(k, "gil") == 0) {
            double g = strtod(v, &end);
            h->gil = *end == '\0' && g >= 0 && g < 1 ? g : -1;
        }
    }
    if (strcmp(tt->mode, "hybrid") == 0)            /* hybrid's stages are "pp P" */
        h->P = h->pp;
}

/* How many distinct values v[0..n) holds (sorts v). */
static int distinct(int *v, size_t n)
{
    int k = 0;
    qsort(v, n, sizeof *v, cmp_int);
    for (size_t i = 0; i < n; i++)
        k += i == 0 || v[i] != v[i - 1];
    return k;
}

/* What the events show, in one pass. */
typedef struct {
    int compute, pipe_msgs, pipe_ops, ddp, fsdp, tp, moe, dp, dpt, ag, rs, rd, a2a;
    int tie;                 /* a "pp tie" mark: the GPT's stages summing wte's copies */
    int cp;                  /* a "cp" mark: the GPT's context parallelism (hybrid's) */
    int stages, micros, cmicros, interleave;
    int chunks;                 /* the most distinct chunks one rank's marks name */
    int weights;                /* zb-h1's W operations (pipeline marks "weights") */
    int max_step, max_layer;    /* the highest step and compute layer named, -1 none */
    int replicas;               /* dp-threads: 1 + the highest replica named, 0 none */
    int max_thread, interpret;  /* the highest thread; "interpret" compute events */
} seen;

static void look(const dt_trace *t, int *scratch, seen *e)
{
    int back_step = INT_MIN, rank = -1, k;
    size_t ns = 0, nm = 0, nc = 0, rank0 = 0;   /* rank's chunks: scratch[rank0 .. ns) */
    *e = (seen){ .max_step = -1, .max_layer = -1 };
    for (size_t i = 0; i <= t->n; i++) {
        if (i == t->n || t->ev[i].rank != rank) {   /* (the trace is grouped by rank) */
            k = distinct(scratch + rank0, ns - rank0);
            e->chunks = k > e->chunks ? k : e->chunks;
            if (i == t->n)
                break;
            rank = t->ev[i].rank, back_step = INT_MIN, rank0 = ns;
        }
        const dt_event *v = &t->ev[i];
        int comp = v->kind == DT_EV_COMPUTE && dvi_is(v->coll, "train");
        e->compute |= comp;
        e->pipe_msgs |= (v->kind == DT_EV_SEND || v->kind == DT_EV_RECV) && dvi_is(v->coll, "pipeline");
        e->ddp |= dvi_named_mark(v) && dvi_is(v->coll, "ddp");
        e->fsdp |= dvi_named_mark(v) && dvi_is(v->coll, "fsdp");
        e->tp |= dvi_named_mark(v) && dvi_is(v->coll, "tp");
        e->tie |= dvi_named_mark(v) && dvi_is(v->coll, "pp") && dvi_is(v->phase, "tie");
        e->cp |= dvi_named_mark(v) && dvi_is(v->coll, "cp");
        e->moe |= dvi_named_mark(v) && dvi_is(v->coll, "moe");
        e->dpt |= dvi_named_mark(v) && dvi_is(v->coll, "dp-threads");
        e->dp |= dvi_is(v->coll, "dp");
        e->ag |= strncmp(v->coll, "allgather", 9) == 0;
        e->rs |= strncmp(v->coll, "reduce_scatter", 14) == 0;
        e->rd |= dvi_is(v->coll, "allreduce_rd");
        e->a2a |= strncmp(v->coll, "alltoall", 8) == 0;
        e->max_step = v->step > e->max_step ? v->step : e->max_step;
        e->max_thread = v->thread > e->max_thread ? v->thread : e->max_thread;
        if (comp && dt_train_dir(v->phase, NULL) && v->chunk > e->max_layer)
            e->max_layer = v->chunk;
        e->interpret += comp && dvi_is(v->phase, "interpret");
        if (dvi_pipe_op(v)) {
            e->pipe_ops++;
            if (v->chunk >= 0)
                scratch[ns++] = v->chunk;
            if (dvi_is(v->phase, "weights"))
                e->weights++;
            else if (dvi_is(v->phase, "backward"))
                back_step = v->step;
            else                /* a forward after a backward of its step: 1F1B */
                e->interleave |= v->step == back_step;
        }
    }
    /* stages: the pipeline marks' distinct chunks (virtual stages) over the chunks a
     * rank holds; micro-batches: their distinct lo, else compute's */
    e->stages = distinct(scratch, ns);
    if (e->chunks > 1 && e->stages % e->chunks == 0)
        e->stages /= e->chunks;
    for (size_t i = 0; i < t->n; i++)
        if (dvi_pipe_op(&t->ev[i]) && dvi_micro(&t->ev[i]) >= 0)
            scratch[nm++] = dvi_micro(&t->ev[i]);
    for (size_t i = 0; i < t->n; i++)
        if (t->ev[i].kind == DT_EV_COMPUTE && dvi_micro(&t->ev[i]) >= 0)
            scratch[nm + nc++] = dvi_micro(&t->ev[i]);
    e->micros = distinct(scratch, nm);
    e->cmicros = distinct(scratch + nm, nc);
    if (e->dpt && nc > 0)       /* dp-threads: a replica's compute has micro = replica */
        e->replicas = scratch[nm + nc - 1] + 1;
}

/* The mode the events show (timetable.h), "" when they show none. */
static const char *events_mode(const seen *e)
{
    /* allreduces beside compute without tp's marks: tp (an old trace), unless they are
     * the GPT's stages summing their copies of wte */
    int pp = e->pipe_msgs || e->stages >= 2, tpx = e->tp || (e->rd && e->compute && !e->tie);
    return pp + e->ddp + tpx + e->cp >= 2 ? "hybrid" : pp ? "pp"
         : e->moe || (e->a2a && e->compute) ? "moe" : e->ddp ? "ddp"
         : e->fsdp || (e->ag && e->rs && e->compute && !e->tp) ? "fsdp"   /* (tp --sp: */
         : tpx ? "tp" : e->dp ? "dp"                          /* its own ag, rs marks) */
         : e->dpt ? "dp-threads" : "";
}

/* Appends one disagreement to tt->disagree: "WHAT, but the events show SHOWN". */
__attribute__((format(printf, 2, 3)))
static void differ(dv_tt *tt, const char *fmt, ...)
{
    size_t at = strlen(tt->disagree), len = sizeof tt->disagree;
    if (at == 0)
        at = (size_t)snprintf(tt->disagree, len, "the trace's '# train' line disagrees with "
                              "its events: ");
    else if (at < len)
        at += (size_t)snprintf(tt->disagree + at, len - at, "; ");
    if (at < len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(tt->disagree + at, len - at, fmt, ap);
        va_end(ap);
    }
}

int dvi_tt_mode(dv_tt *tt, const dt_trace *t, int *scratch, int *micro_labels)
{
    header h;
    seen e;
    tt->schedule = -1;
    tt->disagree[0] = '\0';
    read_header(tt, t->train, &h);
    look(t, scratch, &e);
    const char *ev = events_mode(&e);

    /* the mode: the line's, unless the events show another (hybrid may show its parts) */
    int hybrid_part = strcmp(tt->mode, "hybrid") == 0 &&
                      (!strcmp(ev, "pp") || !strcmp(ev, "ddp") || !strcmp(ev, "tp"));
    int says_pp = strcmp(tt->mode, "pp") == 0 || (strcmp(tt->mode, "hybrid") == 0 && h.P > 1);
    if (tt->mode[0] && ev[0] && strcmp(tt->mode, ev) != 0 && !hybrid_part) {
        differ(tt, "mode %s, but the events show %s", tt->mode, ev);
        snprintf(tt->mode, sizeof tt->mode, "%s", ev);
    } else if (tt->mode[0] && says_pp && e.pipe_ops == 0 && e.compute) {
        differ(tt, "mode %s%s, but the events hold no pipeline operation", tt->mode,
               strcmp(tt->mode, "hybrid") == 0 ? " with stages" : "");
        snprintf(tt->mode, sizeof tt->mode, "%s", ev);
        h.P = 0;
    } else if (!tt->mode[0]) {
        snprintf(tt->mode, sizeof tt->mode, "%s", ev);
    }
    int pp = strcmp(tt->mode, "pp") == 0 || strcmp(tt->mode, "hybrid") == 0;

    /* pp's numbers against the pipeline marks */
    int micros = e.micros ? e.micros : e.cmicros;
    if (pp && e.pipe_ops > 0 && h.P > 0 && h.P != e.stages) {
        differ(tt, "%s %d, but the pipeline marks show %d stage%s",
               strcmp(tt->mode, "hybrid") == 0 ? "pp" : "stages", h.P, e.stages,
               e.stages == 1 ? "" : "s");
        h.P = e.stages;
    }
    if (pp && e.pipe_ops > 0 && h.M > 0 && e.micros > 0 && h.M != e.micros) {
        differ(tt, "micro %d, but the pipeline marks show %d micro-batch%s", h.M, e.micros,
               e.micros == 1 ? "" : "es");
        h.M = e.micros;
    }
    int M = h.M > 0 ? h.M : micros > 0 ? micros : 1;
    const char *said = h.schedule >= 0 ? dv_train_algos[h.schedule] : "";
    if (pp && e.pipe_ops > 0 && h.schedule >= 0 && h.schedule != 2 && e.chunks > 1) {
        differ(tt, "schedule %s, but the pipeline marks show %d model chunks a stage "
               "(interleaved)", said, e.chunks);
        h.schedule = -1;
    } else if (pp && e.pipe_ops > 0 && h.schedule == 2 && h.v > 0 && h.v != e.chunks) {
        differ(tt, "virtual %d, but the pipeline marks show %d model chunk%s a stage", h.v,
               e.chunks, e.chunks == 1 ? "" : "s");
        h.v = e.chunks;
    }
    if (pp && e.pipe_ops > 0 && h.schedule >= 0 && (h.schedule == 3) != (e.weights > 0)) {
        if (h.schedule == 3)
            differ(tt, "schedule zb-h1, but the events hold no W operation (a pipeline "
                   "mark \"weights\")");
        else
            differ(tt, "schedule %s, but the events hold W operations (zb-h1's)", said);
        h.schedule = -1;
    }
    if (pp && e.pipe_ops > 0 && e.stages > 1 &&
        ((h.schedule == 0 && e.interleave) || (h.schedule == 1 && !e.interleave && M >= 2))) {
        differ(tt, "schedule %s, but the events show %s", said,
               e.interleave ? "1F1B's interleave (a forward after a backward)"
                            : "no forward after a backward (GPipe)");
        h.schedule = -1;
    }
    if (pp) {
        tt->schedule = h.schedule;
        tt->stages = h.P > 0 ? h.P : e.stages > 0 ? e.stages : 1;
        tt->micro = M;
        if (tt->schedule < 0)                      /* what the events show */
            tt->schedule = e.chunks > 1 ? 2 : e.weights > 0 ? 3 : tt->stages < 2 ? -1
                         : e.interleave ? 1 : tt->micro >= tt->stages ? 0 : -1;
        tt->v = tt->schedule != 2 ? 1 : e.pipe_ops > 0 && e.chunks > 0 ? e.chunks
              : h.v > 0 ? h.v : 1;
    }

    /* what every mode's line says */
    if (h.ranks > 0 && h.ranks != t->nranks)
        differ(tt, "ranks %d, but the trace has %d", h.ranks, t->nranks);
    int cpn = h.cp > 1 ? h.cp : 1;                  /* the GPT's context parallelism */
    if (strcmp(tt->mode, "hybrid") == 0 && h.dp > 0 && h.tp > 0 && h.pp > 0 &&
        (long long)h.dp * h.tp * h.pp * cpn != t->nranks) {
        if (cpn > 1)
            differ(tt, "dp %d x tp %d x pp %d x cp %d ranks, but the trace has %d", h.dp,
                   h.tp, h.pp, cpn, t->nranks);
        else
            differ(tt, "dp %d x tp %d x pp %d ranks, but the trace has %d", h.dp, h.tp,
                   h.pp, t->nranks);
    }
    if (h.steps > 0 && e.max_step > h.steps)
        differ(tt, "steps %d, but the events reach step %d", h.steps, e.max_step);
    if (h.layers > 0 && e.max_layer >= h.layers)
        differ(tt, "layers %d, but the events compute layer %d", h.layers, e.max_layer);
    if (strcmp(tt->mode, "dp-threads") == 0) {
        int T = e.max_thread > 0 ? e.max_thread : e.replicas;
        if (h.threads > 0 && T > 0 && T != h.threads)
            differ(tt, "threads %d, but the events show %d", h.threads, T);
        if (h.gil == 0 && e.interpret > 0)
            differ(tt, "gil 0, but the events hold the interpreter's bookkeeping");
        if (h.gil > 0 && e.interpret == 0 && e.compute)
            differ(tt, "gil %g, but the events hold no interpreter bookkeeping", h.gil);
    }
    if (tt->disagree[0]) {
        size_t at = strlen(tt->disagree);
        if (at < sizeof tt->disagree)
            snprintf(tt->disagree + at, sizeof tt->disagree - at, "; drawn as the events show");
    }
    *micro_labels = e.cmicros > 1;
    return pp_like(tt);
}

/* ==== the "# train" line, written: the built-in schedules ==== */

const char *const dv_train_algos[] = { "gpipe", "1f1b", "interleaved", "zb-h1", "ddp", NULL };

int dv_train_algo_index(const char *name)
{
    for (int i = 0; name != NULL && dv_train_algos[i] != NULL; i++)
        if (strcmp(name, dv_train_algos[i]) == 0)
            return i;
    return -1;
}

/* One event of stage (rank) r, step 1. */
static dt_event event(int r, dt_event_kind kind, int peer, const char *coll, const char *phase,
                      int chunk, int micro, double t0, double t1)
{
    dt_event e;
    memset(&e, 0, sizeof e);
    e = (dt_event){ .t0 = t0, .t1 = t1, .rank = r, .peer = peer, .kind = kind, .step = 1,
                    .chunk = chunk, .lo = micro < 0 ? 0 : micro, .hi = micro < 0 ? 0 : micro + 1 };
    snprintf(e.coll, sizeof e.coll, "%s", coll);
    snprintf(e.phase, sizeof e.phase, "%s", phase);
    return e;
}

/* The same into t, which has room for it. */
static void put(dt_trace *t, int r, dt_event_kind kind, int peer, const char *coll,
                const char *phase, int chunk, int micro, double t0, double t1)
{
    t->ev[t->n++] = event(r, kind, peer, coll, phase, chunk, micro, t0, t1);
}

/* The rank of virtual stage c (0 .. vP-1): c mod P. */
static int stage_of(int c, int P) { return c % P; }

int dv_train_pp_trace(dv_pp_shape sh, dt_trace *t, char *err, size_t errlen)
{
    int S = sh.schedule, P = sh.stages, M = sh.micro, v = sh.v, tb = 1, tw = 1;
    memset(t, 0, sizeof *t);
    if (S < 0 || S >= DV_TRAIN_DDP) {
        snprintf(err, errlen, "there is no built-in pipeline schedule number %d (0 gpipe, "
                 "1 1f1b, 2 interleaved, 3 zb-h1; ddp is dv_train_ddp_trace's)", S);
        return -1;
    }
    if (P < 1 || P > DV_MAX_RANKS || M < 1 || M > 64 || v < 1 || v > 26 ||
        !dt_pp_valid(S, P, M, v)) {
        snprintf(err, errlen, "%s needs 1 to %d stages, 1 to 64 micro-batches and %s, not "
                 "%d, %d and %d", dv_train_algos[S], DV_MAX_RANKS,
                 S == 2 ? "1 to 26 chunks a stage" : "1 chunk a stage (--virtual is "
                 "interleaved's)", P, M, v);
        return -1;
    }
    int n = dt_pp_nops(S, P, M, v);
    int *start = malloc((size_t)P * n * sizeof *start);
    dt_pp_op *ops = malloc((size_t)n * sizeof *ops);
    t->ev = malloc((size_t)P * (1 + 4 * n) * sizeof *t->ev);
    if (start == NULL || ops == NULL || t->ev == NULL ||
        dt_pp_timetable_v(S, P, M, v, tb, tw, start) < 0) {
        free(start);
        free(ops);
        dt_trace_free(t);
        snprintf(err, errlen, "out of memory writing the schedule of %s", dv_train_algos[S]);
        return -1;
    }
    t->version = DT_TRACE_VERSION;
    t->nranks = P;
    snprintf(t->program, sizeof t->program, "%s", dv_train_algos[S]);
    if (S == 2)
        snprintf(t->train, sizeof t->train, "mode pp schedule %s virtual %d stages %d "
                 "micro %d", dv_train_algos[S], v, P, M);
    else
        snprintf(t->train, sizeof t->train, "mode pp schedule %s stages %d micro %d",
                 dv_train_algos[S], P, M);
    /* what pp.c records, on the slot clock: each operation's mark and compute over its
     * slots, its input received as it begins, its output sent as it ends; a W moves
     * nothing, and neither does a chunk that hands on to the rank's own next one */
    for (int s = 0; s < P; s++) {
        put(t, s, DT_EV_MARK, -1, "train", "step", -1, -1, 0, 0);
        dt_pp_order_v(S, P, M, v, s, ops);
        for (int k = 0; k < n; k++) {
            int f = ops[k].kind == 'F', w = ops[k].kind == 'W', m = ops[k].micro;
            int c = ops[k].chunk * P + s, cf = f ? c - 1 : c + 1, ct = f ? c + 1 : c - 1;
            int from = !w && cf >= 0 && cf < v * P ? stage_of(cf, P) : -1;
            int to = !w && ct >= 0 && ct < v * P ? stage_of(ct, P) : -1;
            double t0 = start[s * n + k];
            double t1 = t0 + (f ? 1 : w ? tw : S == 3 ? tb : tb + tw);
            const char *what = f ? "activations" : "gradients";
            put(t, s, DT_EV_MARK, -1, "pipeline", f ? "forward" : w ? "weights" : "backward",
                c, m, t0, t1);
            if (from >= 0 && from != s)
                put(t, s, DT_EV_RECV, from, "pipeline", what, m, m, t0, t0);
            put(t, s, DT_EV_COMPUTE, -1, "train", f ? "forward" : "backward", c, m, t0, t1);
            if (to >= 0 && to != s)
                put(t, s, DT_EV_SEND, to, "pipeline", what, m, m, t1, t1);
        }
    }
    free(start);
    free(ops);
    return 0;
}

int dv_model_train_pp(dv_model *m, dv_pp_shape s, char *err, size_t errlen)
{
    dt_trace t;
    memset(m, 0, sizeof *m);
    if (dv_train_pp_trace(s, &t, err, errlen) != 0)
        return -1;
    if (dv_model_build(m, &t, err, errlen) != 0)
        return -1;
    m->from_trace = 0;
    int at = snprintf(m->title, sizeof m->title, "%s, %d stage%s, %d micro-batch%s",
                      dv_train_algos[s.schedule], s.stages, s.stages == 1 ? "" : "s",
                      s.micro, s.micro == 1 ? "" : "es");
    if (s.schedule == 2 && at > 0 && (size_t)at < sizeof m->title)
        snprintf(m->title + at, sizeof m->title - (size_t)at, ", %d chunk%s a stage", s.v,
                 s.v == 1 ? "" : "s");
    return 0;
}

/* GPipe and 1F1B alone: algo 0 or 1 (ddp, interleaved and zb-h1 are refused). */
static int gpipe_or_1f1b(int algo, char *err, size_t errlen)
{
    if (algo == 0 || algo == 1)
        return 1;
    snprintf(err, errlen, "there is no built-in pipeline schedule number %d here (0 gpipe, "
             "1 1f1b; ddp is dv_train_ddp_trace's, interleaved and zb-h1 dv_train_pp_trace's)",
             algo);
    return 0;
}

int dv_train_algo_trace(int algo, int stages, int micro, dt_trace *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (!gpipe_or_1f1b(algo, err, errlen))
        return -1;
    return dv_train_pp_trace((dv_pp_shape){ algo, stages, micro, 1 }, t, err, errlen);
}

int dv_model_train_algo(dv_model *m, int algo, int stages, int micro, char *err,
                        size_t errlen)
{
    memset(m, 0, sizeof *m);
    if (!gpipe_or_1f1b(algo, err, errlen))
        return -1;
    return dv_model_train_pp(m, (dv_pp_shape){ algo, stages, micro, 1 }, err, errlen);
}

/* ddp. Every rank runs dt_ddp_timetable's step; bucket b's allreduce is what
 * ddp.c's reduce_bucket records: the ring's events (a call mark, then reduce-scatter and
 * allgather, 2(N-1) steps) inside a "ddp bucket" mark over the same slots. The ring is
 * dv_algo_trace's, as the collective view animates it, moved to the bucket's slots; a
 * bucket holds one of two sizes, so two rings serve every bucket. */

#define DDP_LAYER 65536                 /* floats of gradients a layer */

/* The events of rank r in ring (grouped by rank; rank r's begin at `from`) moved to
 * [a, e): each ring step (time f .. f+1 in dv_algo_trace) takes (e - a) / 2(N-1) slots.
 * Compute events of comp[*k ..] that begin no later go first. */
static void ring_events(dt_trace *t, const dt_trace *ring, size_t from, int r, int N, double a,
                        double e, const dt_event *comp, int nc, int *k)
{
    double d = N > 1 ? (e - a) / (2.0 * (N - 1)) : 0;
    for (size_t i = from; i < ring->n && ring->ev[i].rank == r; i++) {
        dt_event x = ring->ev[i];
        x.t0 = a + x.t0 * d;
        x.t1 = a + x.t1 * d;
        while (*k < nc && comp[*k].t0 <= x.t0)
            t->ev[t->n++] = comp[(*k)++];
        t->ev[t->n++] = x;
    }
}

int dv_train_ddp_trace(dv_ddp_shape s, dt_trace *t, char *err, size_t errlen)
{
    int N = s.ranks, L = s.layers, B = s.buckets, C = s.comm, opt, nc;
    int fwd[64], bwd[64], ar0[64], ar1[64], lo, hi;
    dt_trace ring[2];                   /* the rings of the larger and the smaller bucket */
    dt_event comp[2 * 64 + 2];          /* one rank's compute, in time order */
    memset(t, 0, sizeof *t);
    memset(ring, 0, sizeof ring);
    if (N < 1 || N > DV_MAX_RANKS || L < 1 || L > 64 || B < 1 || B > L || C < 1 || C > 16 ||
        (s.overlap != 0 && s.overlap != 1)) {
        snprintf(err, errlen, "ddp needs 1 to %d ranks, 1 to 64 layers, 1 to that many "
                 "buckets, 1 to 16 slots of allreduce a layer and overlap 0 or 1, not %d, %d, "
                 "%d, %d and %d", DV_MAX_RANKS, N, L, B, C, s.overlap);
        return -1;
    }
    dt_ddp_timetable(L, B, C, s.overlap, fwd, bwd, ar0, ar1, &opt);
    int big = (L + B - 1) / B, ring_algo = dv_algo_index("ring-allreduce");
    size_t n = (size_t)N * (2 * L + 2 + B);
    for (int k = 0; k < 2; k++) {
        if (dv_algo_trace(ring_algo, N, (long long)(big - k) * DDP_LAYER, &ring[k], err,
                          errlen) != 0) {
            dt_trace_free(&ring[0]);
            return -1;
        }
        n += (size_t)B * ring[k].n;     /* at least what the buckets take */
    }
    t->ev = malloc(n * sizeof *t->ev);
    if (t->ev == NULL) {
        dt_trace_free(&ring[0]);
        dt_trace_free(&ring[1]);
        snprintf(err, errlen, "out of memory writing the schedule of ddp");
        return -1;
    }
    t->version = DT_TRACE_VERSION;
    t->nranks = N;
    snprintf(t->program, sizeof t->program, "ddp");
    snprintf(t->train, sizeof t->train, "mode ddp buckets %d layers %d overlap %s ranks %d",
             B, L, s.overlap ? "on" : "off", N);
    size_t at[2] = { 0, 0 };            /* where rank r's events begin in ring[0], ring[1] */
    for (int r = 0; r < N; r++) {
        int k = 0;
        for (int w = 0; w < 2; w++)
            while (at[w] < ring[w].n && ring[w].ev[at[w]].rank < r)
                at[w]++;
        nc = 0;
        comp[nc++] = event(r, DT_EV_MARK, -1, "train", "step", -1, -1, 0, 0);
        for (int i = 0; i < L; i++)                     /* forward 1 slot, backward 2 */
            comp[nc++] = event(r, DT_EV_COMPUTE, -1, "train", "forward", i, -1, fwd[i],
                               fwd[i] + 1);
        for (int i = L - 1; i >= 0; i--)
            comp[nc++] = event(r, DT_EV_COMPUTE, -1, "train", "backward", i, -1, bwd[i],
                               bwd[i] + 2);
        comp[nc++] = event(r, DT_EV_COMPUTE, -1, "train", "optimizer", -1, -1, opt, opt + 1);
        for (int b = 0; b < B; b++) {
            dt_ddp_bucket_layers(L, B, b, &lo, &hi);
            int w = big - (hi - lo);    /* 0: the larger bucket's ring, 1: the smaller */
            dt_event mark = event(r, DT_EV_MARK, -1, "ddp", "bucket", b, -1, ar0[b], ar1[b]);
            mark.lo = (long long)lo * DDP_LAYER;
            mark.hi = (long long)hi * DDP_LAYER;
            mark.nbytes = (mark.hi - mark.lo) * (long long)sizeof(float);
            while (k < nc && comp[k].t0 <= mark.t0)
                t->ev[t->n++] = comp[k++];
            t->ev[t->n++] = mark;
            ring_events(t, &ring[w], at[w], r, N, ar0[b], ar1[b], comp, nc, &k);
        }
        while (k < nc)
            t->ev[t->n++] = comp[k++];
    }
    dt_trace_free(&ring[0]);
    dt_trace_free(&ring[1]);
    return 0;
}

int dv_model_train_ddp(dv_model *m, dv_ddp_shape s, char *err, size_t errlen)
{
    dt_trace t;
    memset(m, 0, sizeof *m);
    if (dv_train_ddp_trace(s, &t, err, errlen) != 0)
        return -1;
    if (dv_model_build(m, &t, err, errlen) != 0)
        return -1;
    m->from_trace = 0;
    snprintf(m->title, sizeof m->title, "ddp, %d rank%s, %d layer%s in %d bucket%s, allreduce "
             "%d slot%s a layer, overlap %s", s.ranks, s.ranks == 1 ? "" : "s", s.layers,
             s.layers == 1 ? "" : "s", s.buckets, s.buckets == 1 ? "" : "s", s.comm,
             s.comm == 1 ? "" : "s", s.overlap ? "on" : "off");
    return 0;
}

/* ==== what a step measures ==== */

int dvi_key_cmp(const void *x, const void *y)
{
    const dvi_key *a = x, *b = y;
    if (a->k0 != b->k0) return a->k0 < b->k0 ? -1 : 1;
    if (a->k1 != b->k1) return a->k1 < b->k1 ? -1 : 1;
    if (a->k2 != b->k2) return a->k2 < b->k2 ? -1 : 1;
    if (a->t != b->t) return a->t < b->t ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

/* The index of step number v in tt->steps (listed in order), -1. */
static int step_index(const dv_tt *tt, int v)
{
    int lo = 0, hi = tt->nsteps;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (tt->steps[mid].step < v) lo = mid + 1; else hi = mid;
    }
    return lo < tt->nsteps && tt->steps[lo].step == v ? lo : -1;
}

/* Seconds of rank r's compute before x: u[i] = (t0, t1, seconds before it), rank r's
 * union of compute blocks at u[first[r] .. first[r+1]). */
static double covered(const double (*u)[3], const int *first, int r, double x)
{
    int lo = first[r], hi = first[r + 1];
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (u[mid][0] <= x) lo = mid + 1; else hi = mid;
    }
    return lo == first[r] ? 0 : u[lo - 1][2] + fmin(x, u[lo - 1][1]) - u[lo - 1][0];
}

/* Sums, hidden time and the spans of the steps; o[k] = (step, rank) of block k. */
static void sums(dv_tt *tt, const double (*u)[3], const int *first, dvi_key *o)
{
    for (int s = 0; s < tt->nsteps; s++)
        tt->steps[s].t0 = INFINITY, tt->steps[s].t1 = -INFINITY;
    for (int k = 0; k < tt->nblocks; k++) {
        const dv_tt_block *c = &tt->blocks[k];
        int s = step_index(tt, c->step);
        dv_tt_step *st = &tt->steps[s < 0 ? 0 : s];
        double d = c->t1 - c->t0;
        st->t0 = fmin(st->t0, c->t0);
        st->t1 = fmax(st->t1, c->t1);
        if (c->lane == 0) {
            st->compute += d;
        } else if (c->role == DV_TT_ROLE_LOCK) {
            st->lock += d;                         /* a wait, not communication */
        } else {
            st->comm += d;
            st->waiting += c->wait;
            st->hidden += covered(u, first, c->rank, c->t1) - covered(u, first, c->rank, c->t0);
        }
        o[k] = (dvi_key){ s < 0 ? 0 : s, c->rank, 0, k, 0 };
    }
}

/* What overlap could hide at best (timetable.h), step by step: per rank, every bucket
 * but the last one (ddp: at most the backward's time); every gather but the first and
 * every reduce-scatter but the last one (fsdp: at most the compute's time). o as sums
 * wrote it. */
static void best_overlap(dv_tt *tt, dvi_key *o)
{
    int n = tt->nblocks, ddp = strcmp(tt->mode, "ddp") == 0, fsdp = strcmp(tt->mode, "fsdp") == 0;
    double best = 0;
    int any = 0;
    qsort(o, (size_t)n, sizeof *o, dvi_key_cmp);
    for (int i = 0; i < n;) {
        double sum[4] = { 0 }, edge[4] = { 0 }, t_edge[4] = { 0 }, back = 0, comp = 0;
        int i0 = i, seen[4] = { 0 };
        for (; i < n && o[i].k0 == o[i0].k0 && o[i].k1 == o[i0].k1; i++) {
            const dv_tt_block *c = &tt->blocks[o[i].idx];
            unsigned ro = c->role;
            double d = c->t1 - c->t0;
            comp += c->lane == 0 ? d : 0;
            back += c->kind == DV_TT_BACKWARD ? d : 0;
            if (c->lane == 0 || ro == DV_TT_ROLE_OTHER || ro > DV_TT_ROLE_RS)
                continue;
            sum[ro] += d;
            if (!seen[ro] || (ro == DV_TT_ROLE_GATHER ? c->t0 < t_edge[ro] : c->t0 >= t_edge[ro]))
                edge[ro] = d, t_edge[ro] = c->t0;
            seen[ro] = 1;
        }
        double g = sum[DV_TT_ROLE_GATHER] - edge[DV_TT_ROLE_GATHER], r = sum[DV_TT_ROLE_RS] - edge[DV_TT_ROLE_RS];
        best += fmax(ddp ? fmin(sum[DV_TT_ROLE_BUCKET] - edge[DV_TT_ROLE_BUCKET], back)
                         : fmin(g + r, comp), 0);
        any |= ddp ? seen[DV_TT_ROLE_BUCKET] : fsdp && (seen[DV_TT_ROLE_GATHER] || seen[DV_TT_ROLE_RS]);
        if (i == n || o[i].k0 != o[i0].k0) {
            dv_tt_step *st = &tt->steps[o[i0].k0];
            st->hidden_best = (ddp || fsdp) && any && st->comm > 0 ? fin(fmin(best / st->comm, 1), -1) : -1;
            best = 0, any = 0;
        }
    }
}

/* pp's stash: per rank, step, micro-batch and chunk (interleaved; -1 none), its first
 * forward's begin (+1) and its last backward's or W's end (-1), summed in time order
 * within the step; the points then ordered by rank and time, so that a rank's last
 * point by t says what it holds in the step it is running; each step's most held into
 * its stash. o holds nblocks keys (its t: the chunk). */
static int stash_points(dv_tt *tt, dvi_key *o)
{
    int n = 0, m = 0;
    for (int k = 0; k < tt->nblocks; k++) {
        const dv_tt_block *c = &tt->blocks[k];
        if ((c->kind == DV_TT_FORWARD || c->kind == DV_TT_BACKWARD ||
             c->kind == DV_TT_WEIGHTS) && c->micro >= 0)
            o[n++] = (dvi_key){ c->rank, step_index(tt, c->step), c->micro, k, c->chunk };
    }
    qsort(o, (size_t)n, sizeof *o, dvi_key_cmp);
    tt->held = malloc((size_t)(2 * n + 1) * sizeof *tt->held);
    if (tt->held == NULL)
        return -1;
    for (int i = 0; i < n;) {
        double fb = INFINITY, be = -INFINITY;
        int i0 = i;
        for (; i < n && o[i].k0 == o[i0].k0 && o[i].k1 == o[i0].k1 && o[i].k2 == o[i0].k2 &&
               o[i].t == o[i0].t; i++) {
            const dv_tt_block *c = &tt->blocks[o[i].idx];
            if (c->kind == DV_TT_FORWARD)
                fb = fmin(fb, c->t0);
            else
                be = fmax(be, c->t1);
        }
        if (fb < INFINITY)
            tt->held[m++] = (dv_tt_held){ o[i0].k0, o[i0].k1, fb, 1 };
        if (fb < INFINITY && be > -INFINITY)
            tt->held[m++] = (dv_tt_held){ o[i0].k0, o[i0].k1, be, -1 };
    }
    for (int i = 0; i < m; i++)                    /* counted within (rank, step) ... */
        o[i] = (dvi_key){ tt->held[i].rank, tt->held[i].step, 0, tt->held[i].held, tt->held[i].t };
    qsort(o, (size_t)m, sizeof *o, dvi_key_cmp);
    for (int i = 0; i < m; i++) {
        int same = i > 0 && o[i].k0 == o[i - 1].k0 && o[i].k1 == o[i - 1].k1;
        tt->held[i] = (dv_tt_held){ o[i].k0, o[i].k1, o[i].t, (same ? tt->held[i - 1].held : 0) + o[i].idx };
        dv_tt_step *st = o[i].k1 >= 0 && o[i].k1 < tt->nsteps ? &tt->steps[o[i].k1] : NULL;
        if (st != NULL && tt->held[i].held > st->stash)
            st->stash = tt->held[i].held;
    }
    for (int i = 0; i < m; i++)                    /* ... then ordered by rank, t */
        o[i] = (dvi_key){ tt->held[i].rank, 0, 0, i, tt->held[i].t };
    qsort(o, (size_t)m, sizeof *o, dvi_key_cmp);
    dv_tt_held *h = malloc((size_t)(m > 0 ? m : 1) * sizeof *h);
    if (h == NULL)
        return -1;
    for (int i = 0; i < m; i++)
        h[i] = tt->held[o[i].idx];
    free(tt->held);
    tt->held = h;
    tt->nheld = m;
    return 0;
}

/* Where each lane's blocks begin, and which block of a lane up to each ends last;
 * the steps by begin, and which up to each ends last. */
static int indexes(dv_tt *tt)
{
    int n = tt->nblocks, S = tt->nsteps, L = 2 * tt->nrows;
    tt->lane_first = calloc((size_t)L + 1, sizeof *tt->lane_first);
    tt->lane_reach = malloc((size_t)(n ? n : 1) * sizeof *tt->lane_reach);
    tt->step_order = malloc((size_t)(S ? S : 1) * sizeof *tt->step_order);
    tt->step_reach = malloc((size_t)(S ? S : 1) * sizeof *tt->step_reach);
    dvi_key *o = malloc((size_t)(S ? S : 1) * sizeof *o);
    if (!tt->lane_first || !tt->lane_reach || !tt->step_order || !tt->step_reach || !o) {
        free(o);
        return -1;
    }
    for (int k = 0; k < n; k++) {
        const dv_tt_block *c = &tt->blocks[k];
        tt->lane_first[2 * c->row + (c->lane != 0) + 1]++;
        int prev = k > 0 ? tt->lane_reach[k - 1] : 0;
        int same = k > 0 && c->row == tt->blocks[k - 1].row && c->lane == tt->blocks[k - 1].lane;
        tt->lane_reach[k] = same && tt->blocks[prev].t1 > c->t1 ? prev : k;
    }
    for (int l = 0; l < L; l++)
        tt->lane_first[l + 1] += tt->lane_first[l];
    for (int s = 0; s < S; s++)
        o[s] = (dvi_key){ 0, 0, 0, s, tt->steps[s].t0 };
    qsort(o, (size_t)S, sizeof *o, dvi_key_cmp);
    for (int i = 0; i < S; i++) {
        int s = tt->step_order[i] = o[i].idx, prev = i ? tt->step_reach[i - 1] : s;
        tt->step_reach[i] = i && tt->steps[prev].t1 > tt->steps[s].t1 ? prev : s;
    }
    free(o);
    return 0;
}

/* Step st's pipeline models (timetable.h), and its measured stash and messages set to
 * count from 0 (pp) or -1. */
static void pp_models(const dv_tt *tt, dv_tt_step *st, int pp)
{
    int S = tt->schedule, P = tt->stages, M = tt->micro, v = tt->v > 0 ? tt->v : 1;
    int known = pp && strcmp(tt->mode, "pp") == 0 && S >= 0 && dt_pp_valid(S, P, M, v);
    st->bubble_model = !pp ? -1 : known ? dt_pp_bubble_v(S, P, M, v, 1, 1)
                                        : dt_pp_bubble(P, M);
    st->stash = pp ? 0 : -1;
    st->messages = strcmp(tt->mode, "pp") == 0 ? 0 : -1;
    st->stash_model = known ? dt_pp_peak_stash_v(S, P, M, v, 0) : -1;
    long long msg = known ? dt_pp_messages_v(S, P, M, v, 0) : -1;   /* the ends, then */
    if (known && P > 1)                                              /* the middle ones */
        msg += dt_pp_messages_v(S, P, M, v, P - 1) + (P - 2LL) * dt_pp_messages_v(S, P, M, v, P / 2);
    st->messages_model = msg >= 0 && msg <= INT_MAX ? (int)msg : -1;
}

int dvi_tt_measure(dv_tt *tt)
{
    int n = tt->nblocks, R = tt->nranks, nu = 0, rc = -1;
    double (*u)[3] = malloc((size_t)(n ? n : 1) * sizeof *u);
    int *first = malloc(((size_t)R + 1) * sizeof *first);
    dvi_key *o = malloc((size_t)(n ? n : 1) * sizeof *o);
    tt->steps = calloc((size_t)(n ? n : 1), sizeof *tt->steps);
    if (u == NULL || first == NULL || o == NULL || tt->steps == NULL)
        goto out;
    for (int k = 0; k < n; k++)                    /* the steps present, in order */
        o[k] = (dvi_key){ tt->blocks[k].step, 0, 0, k, 0 };
    qsort(o, (size_t)n, sizeof *o, dvi_key_cmp);
    tt->nsteps = 0;
    for (int k = 0; k < n; k++)
        if (k == 0 || o[k].k0 != o[k - 1].k0)
            tt->steps[tt->nsteps++].step = o[k].k0;
    for (int r = 0; r <= R; r++)
        first[r] = -1;
    int nc = 0;                                    /* compute blocks by rank, then t0: */
    for (int k = 0; k < n; k++)                    /* a rank's threads together */
        if (tt->blocks[k].lane == 0)
            o[nc++] = (dvi_key){ tt->blocks[k].rank, 0, 0, k, tt->blocks[k].t0 };
    qsort(o, (size_t)nc, sizeof *o, dvi_key_cmp);
    for (int j = 0; j < nc; j++) {                 /* each rank's compute, as a union */
        const dv_tt_block *c = &tt->blocks[o[j].idx];
        if (first[c->rank] < 0)
            first[c->rank] = nu;
        if (nu > first[c->rank] && c->t0 <= u[nu - 1][1]) {
            u[nu - 1][1] = fmax(u[nu - 1][1], c->t1);
        } else {
            double before = nu > first[c->rank] ? u[nu - 1][2] + u[nu - 1][1] - u[nu - 1][0] : 0;
            u[nu][0] = c->t0, u[nu][1] = c->t1, u[nu][2] = before;
            nu++;
        }
    }
    first[R] = nu;
    for (int r = R - 1; r >= 0; r--)               /* ranks without compute: empty */
        first[r] = first[r] < 0 ? first[r + 1] : first[r];
    sums(tt, (const double (*)[3])u, first, o);
    best_overlap(tt, o);
    int pp = pp_like(tt);
    for (int s = 0; s < tt->nsteps; s++)
        tt->steps[s].c0 = INFINITY, tt->steps[s].c1 = -INFINITY;
    for (int k = 0; k < n; k++) {                  /* each step's compute span */
        const dv_tt_block *c = &tt->blocks[k];
        int s = c->lane == 0 ? step_index(tt, c->step) : -1;
        if (s >= 0) {
            tt->steps[s].c0 = fmin(tt->steps[s].c0, c->t0);
            tt->steps[s].c1 = fmax(tt->steps[s].c1, c->t1);
        }
    }
    for (int s = 0; s < tt->nsteps; s++) {
        dv_tt_step *st = &tt->steps[s];
        if (!(st->c1 >= st->c0))                   /* no compute: the step's span */
            st->c0 = st->t0, st->c1 = st->t1;
        st->compute = fin(st->compute, 0);
        st->comm = fin(st->comm, 0);
        st->waiting = fin(fmin(st->waiting, st->comm), 0);
        st->hidden = fin(fmin(st->hidden, st->comm), 0);
        st->hidden_share = st->comm > 0 ? fin(st->hidden / st->comm, -1) : -1;
        st->bubble = pp && st->c1 > st->c0 ? fin(1 - st->compute / (R * (st->c1 - st->c0)), -1)
                                          : -1;
        pp_models(tt, st, pp);
    }
    for (int a = 0; a < tt->narrows && strcmp(tt->mode, "pp") == 0; a++) {
        int s = step_index(tt, tt->arrows[a].step);
        tt->steps[s < 0 ? 0 : s].messages++;
    }
    if ((pp && stash_points(tt, o)) || indexes(tt))
        goto out;
    rc = 0;
out:
    free(u);
    free(first);
    free(o);
    return rc;
}

/* ==== questions ==== */

int dv_tt_step_at(const dv_tt *tt, double t)
{
    if (tt == NULL || tt->nsteps < 1 || tt->step_order == NULL)
        return -1;
    int lo = 0, hi = tt->nsteps;                   /* steps begun by t: order[0 .. lo) */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (tt->steps[tt->step_order[mid]].t0 <= t) lo = mid + 1; else hi = mid;
    }
    if (lo == 0)
        return tt->step_order[0];
    int last = tt->step_order[lo - 1], reach = tt->step_reach[lo - 1];
    if (tt->steps[last].t1 >= t)                   /* the latest begun holds t */
        return last;
    if (tt->steps[reach].t1 >= t || lo == tt->nsteps)
        return reach;
    int next = tt->step_order[lo];                 /* between steps: the nearer */
    return t - tt->steps[reach].t1 <= tt->steps[next].t0 - t ? reach : next;
}

int dv_tt_stash(const dv_tt *tt, int rank, double t)
{
    if (tt == NULL || tt->held == NULL)
        return 0;
    int lo = 0, hi = tt->nheld;                    /* points up to (rank, t): [0, lo) */
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        const dv_tt_held *h = &tt->held[mid];
        if (h->rank < rank || (h->rank == rank && h->t <= t)) lo = mid + 1; else hi = mid;
    }
    const dv_tt_held *h = lo ? &tt->held[lo - 1] : NULL;
    return h && h->rank == rank && h->held > 0 ? h->held : 0;
}

int dv_tt_block_at(const dv_tt *tt, int row, int lane, double t)
{
    if (tt == NULL || tt->lane_first == NULL || row < 0 || row >= tt->nrows || lane < 0 || lane > 1)
        return -1;
    int a = tt->lane_first[2 * row + lane], lo = a, hi = tt->lane_first[2 * row + lane + 1];
    while (lo < hi) {                              /* blocks begun by t: [a, lo) */
        int mid = lo + (hi - lo) / 2;
        if (tt->blocks[mid].t0 <= t) lo = mid + 1; else hi = mid;
    }
    if (lo == a)
        return -1;
    if (tt->blocks[lo - 1].t1 >= t)                /* the latest begun, when it holds t */
        return lo - 1;
    return tt->blocks[tt->lane_reach[lo - 1]].t1 >= t ? tt->lane_reach[lo - 1] : -1;
}

/* Seconds for people: "850 us", "2.1 ms", "14 s". */
static const char *secs(const dv_tt *tt, double s, char *buf, size_t len)
{
    static const char *const unit[] = { "s", "ms", "us", "ns" };
    int u = 0;
    if (tt->slots) {                       /* a built-in schedule counts slots */
        snprintf(buf, len, "%g slot%s", s, s == 1 ? "" : "s");
        return buf;
    }
    for (; u < 3 && fabs(s) < 1 && s != 0; u++)
        s *= 1000;
    snprintf(buf, len, fabs(s) < 10 ? "%.1f %s" : "%.0f %s", s, unit[u]);
    return buf;
}

static int pct(double x) { return (int)lround(100 * fmin(fmax(x, -1), 1)); }

/* The pipeline's models after its measured bubble: ", 27% = (P-1)/(M+P-1) at P=4, M=8",
 * then where the schedule is known its stash and messages, measured and modelled
 * (lib/schedule.h's closed forms, tb = tw = 1). Returns what snprintf does. */
static size_t pp_formulas(const dv_tt *tt, const dv_tt_step *st, char *buf, size_t len)
{
    int S = tt->schedule, M = tt->micro, P = tt->stages, v = tt->v, k = M / P;
    const char *bubble = S == 2 ? (M >= P ? "(P-1)/(vM+P-1)" : "(v(P-M)+M-1)/(vP+M-1)")
                       : S == 3 ? (M >= P ? "(P-1)/(3M+P-1)" : "(2P-M-1)/(2P+2M-1)")
                       : "(P-1)/(M+P-1)";
    size_t at = (size_t)snprintf(buf, len, ", %d%% = %s at P=%d, M=%d", pct(st->bubble_model),
                                 bubble, P, M);
    if (at < len && S == 2)
        at += (size_t)snprintf(buf + at, len - at, ", v=%d", v);
    if (at < len && st->stash_model >= 0 && st->stash >= 0) {
        char g[48] = "";                    /* interleaved's first group of micro-batches */
        if (S == 2)
            snprintf(g, sizeof g, "min((v-1)g+P, vM) at g=%d", M < P ? M : (M + k - 1) / k);
        at += (size_t)snprintf(buf + at, len - at, "; stash peak %d, %d = %s", st->stash,
                               st->stash_model, S == 0 ? "M" : S == 2 ? g : "min(P,M)");
    }
    if (at < len && st->messages_model >= 0 && st->messages >= 0 && P > 1)
        at += (size_t)snprintf(buf + at, len - at, "; %d messages, %d = %s", st->messages,
                               st->messages_model, S == 2 ? "2M(vP-1)" : "2M(P-1)");
    else if (at < len && st->messages_model >= 0 && st->messages >= 0)
        at += (size_t)snprintf(buf + at, len - at, "; %d messages (one stage)", st->messages);
    return at;
}

void dv_tt_describe_step(const dv_tt *tt, int s, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    buf[0] = '\0';
    if (tt == NULL || s < 0 || s >= tt->nsteps)
        return;
    const dv_tt_step *st = &tt->steps[s];
    char a[32], c[32];
    size_t at = (size_t)snprintf(buf, len, "step %d of %d: ", st->step, tt->steps[tt->nsteps - 1].step);
    if (at >= len)
        return;
    buf += at, len -= at;
    if (st->bubble >= 0) {
        at = (size_t)snprintf(buf, len, "bubble %d%% measured over %d %s", pct(st->bubble),
                              tt->nranks, strcmp(tt->mode, "pp") == 0 ? "stages" : "ranks");
        if (at < len && st->bubble_model >= 0)
            at += pp_formulas(tt, st, buf + at, len - at);
        if (at >= len || strcmp(tt->mode, "pp") == 0 || st->comm <= 0)
            return;
        buf += at, len -= at;                      /* hybrid: its communication too */
        at = (size_t)snprintf(buf, len, "; ");
        if (at >= len)
            return;
        buf += at, len -= at;
    } else if (strcmp(tt->mode, "ddp") != 0 && strcmp(tt->mode, "fsdp") != 0) {
        at = (size_t)snprintf(buf, len, "compute %s, ", secs(tt, st->compute, a, sizeof a));
        if (at >= len)
            return;
        buf += at, len -= at;
    }
    if (st->comm <= 0) {
        at = (size_t)snprintf(buf, len, "no communication");
    } else {
        at = (size_t)snprintf(buf, len, "communication %s (%d%% of it waiting), %d%% hidden "
                              "behind compute", secs(tt, st->comm, c, sizeof c),
                              pct(st->waiting / st->comm), pct(st->hidden_share));
        if (at < len && st->hidden_best >= 0)
            at += (size_t)snprintf(buf + at, len - at, "; at best %d%%", pct(st->hidden_best));
    }
    if (at < len && st->lock > 0)                  /* dp-threads --gil */
        at += (size_t)snprintf(buf + at, len - at, "; waiting for the lock %s",
                               secs(tt, st->lock, a, sizeof a));
    if (at < len && tt->nrows > tt->nranks) {      /* the times add up every thread's */
        char of[24] = "";
        if (tt->nranks > 1)
            snprintf(of, sizeof of, " of %d ranks", tt->nranks);
        snprintf(buf + at, len - at, " (times summed over %d threads%s)", tt->nrows, of);
    } else if (at < len && tt->nranks > 1)           /* the times add up every rank's */
        snprintf(buf + at, len - at, " (times summed over %d ranks)", tt->nranks);
}

void dv_tt_row_name(const dv_tt *tt, int row, int short_, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    buf[0] = '\0';
    if (tt == NULL || tt->rows == NULL || row < 0 || row >= tt->nrows)
        return;
    const dv_tt_row *w = &tt->rows[row];
    int threads = (row + 1 < tt->nrows && tt->rows[row + 1].rank == w->rank) ||
                  w->thread > 0, dpt = strcmp(tt->mode, "dp-threads") == 0;
    int pp = strcmp(tt->mode, "pp") == 0 && !threads;
    char rk[24] = "";
    if (pp || !dpt || tt->nranks > 1 || !threads)
        snprintf(rk, sizeof rk, short_ ? "%s%d" : "%s %d", pp ? (short_ ? "s" : "stage")
                 : (short_ ? "r" : "rank"), w->rank);
    if (!threads)
        snprintf(buf, len, "%s", rk);
    else if (dpt && w->thread == 0)
        snprintf(buf, len, "%s%s%s", rk, rk[0] ? " " : "", short_ ? "M" : "master");
    else if (dpt)
        snprintf(buf, len, "%s%s%s %d", rk, rk[0] ? " " : "", short_ ? "rep" : "replica",
                 w->thread - 1);
    else if (w->thread == 0)
        snprintf(buf, len, "%s%s", rk, short_ ? "" : " main");
    else
        snprintf(buf, len, "%s %s%d", rk, short_ ? "t" : "thread ", w->thread);
}
