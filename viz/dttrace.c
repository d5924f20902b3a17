/* dttrace: what a recorded trace holds, at a glance, and its Chrome JSON export.
 *
 *   build/dttrace FILE                       per-rank summary
 *   build/dttrace --chrome OUT.json FILE     the same, and OUT.json for ui.perfetto.dev
 *
 * The summary gives, for every rank, its events by kind, the bytes it sent and
 * received, and the time from its first event to its last. In a ring allreduce every
 * rank sends and receives the same bytes, 2(N-1)/N of the buffer; a rank that differs,
 * or recorded nothing, is where to look first. Where the trace records how messages
 * travelled (the via column), a last line sums the bytes sent by transport, e.g.
 * "bytes sent by transport: shm 12 MiB, mpi 1.2 KiB": a run expected to use shared
 * memory that sends most bytes through MPI is not getting what it asked for.
 * Where the trace holds dt_memcpy's copies between host and GPU, a line counts them by
 * what they carried, e.g. "host<->GPU copies: tensor 12 (3.5 MiB), batch 4 (1 MiB),
 * number 8 (32 B)", and for a training run a second line the same in the steps the
 * device books count, "  in steps 2..5: tensor 0 (0 B), ...": a run on the GPU whose
 * steps show tensor copies moves its data through the host.
 *
 * Exit status: 0 done; 1 a write that failed once the work had started (a full disk);
 * 2 bad input: a usage error, a trace that cannot be read, an output that cannot be
 * written (refused before the work), each one sentence, then where the help is.
 *
 * No MPI: this program reads files only (trace.h's reader), so it runs anywhere. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"
#include "units.h"

static const char usage[] =
    "usage: dttrace [--chrome OUT.json] FILE\n"
    "Summarises a dtlab trace (written by a program run with --trace FILE): per rank,\n"
    "its events by kind, the bytes it sent and received, and the time it spans;\n"
    "then the bytes sent by transport, and the copies between host and GPU by what\n"
    "they carried (and those inside a training run's steps), where the trace has them.\n"
    "  --chrome OUT.json   also write the trace as Chrome trace JSON, for\n"
    "                      https://ui.perfetto.dev or chrome://tracing\n"
    "  -h, --help          print this text\n";

/* Above this many ranks, ranks that recorded nothing are counted, not listed. */
#define LIST_EMPTY_MAX 256

typedef struct {
    long long events, by_kind[DT_EV_NKINDS];
    long long sent, received;          /* bytes of send and recv events */
    double first, last;                /* earliest t0, latest t1 */
} summary;

static void add_event(summary *s, const dt_event *e)
{
    if (s->events == 0 || e->t0 < s->first)
        s->first = e->t0;
    if (s->events == 0 || e->t1 > s->last)
        s->last = e->t1;
    s->events++;
    s->by_kind[e->kind]++;
    if (e->kind == DT_EV_SEND)
        s->sent += e->nbytes;
    if (e->kind == DT_EV_RECV)
        s->received += e->nbytes;
}

static void print_row(const char *label, const summary *s)
{
    printf("%5s %7lld", label, s->events);
    for (int k = 0; k < DT_EV_NKINDS; k++)
        printf(" %7lld", s->by_kind[k]);
    printf(" %12lld %12lld", s->sent, s->received);
    if (s->events > 0)
        printf(" %11.6f %11.6f %10.3f\n", s->first, s->last, (s->last - s->first) * 1e3);
    else
        printf(" %11s %11s %10s\n", "-", "-", "-");
}

/* The bytes of send events by transport, largest first ("none": sends that recorded
 * none); nothing when no event names one. */
static void print_vias(const dt_trace *t)
{
    double by[DT_TRACE_NVIA] = { 0 };
    int named = 0, done[DT_TRACE_NVIA] = { 0 };
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        named |= e->via > 0;
        if (e->kind == DT_EV_SEND && e->via < DT_TRACE_NVIA)
            by[e->via] += (double)e->nbytes;
    }
    if (!named)
        return;
    printf("\nbytes sent by transport:");
    int n = 0;
    for (; n < DT_TRACE_NVIA; n++) {
        int v = -1;                             /* the largest left; ties in table order */
        for (int u = 0; u < DT_TRACE_NVIA; u++)
            if (!done[u] && by[u] > 0 && (v < 0 || by[u] > by[v]))
                v = u;
        if (v < 0)
            break;
        char b[32];
        done[v] = 1;
        printf("%s %s %s", n ? "," : "", v ? dt_trace_via_name(v) : "none",
               dt_format_bytes(by[v], b, sizeof b));
    }
    printf("%s\n", n > 0 ? "" : " no bytes sent");
}

/* ==== copies between host and GPU ====
 *
 * dt_memcpy's crossings (trace.h, "Copies between host and GPU"): d2h and h2d events of
 * coll "memcpy", by phase. A training run's are counted again in the steps the device
 * books count (lib/parallel/books.c: all but the first, or the only one), rank by
 * rank: from the t0 of the rank's second "train step" mark (its first when it has only
 * one) to the latest t1 among its "train" events of the last mark's step (the step's
 * compute: the optimizer ends it), so that the weights going up before the steps and
 * coming back after them stay outside. A copy is inside when it begins there. */
enum { CP_TENSOR, CP_BATCH, CP_NUMBER, CP_N };
static const char *const cp_phase[CP_N] = { "tensor", "batch", "number" };

typedef struct {
    long long n[CP_N];
    double nbytes[CP_N];
} copies;

/* Which phase of dt_memcpy's copies e is, or -1 for any other event (a staging copy). */
static int copy_phase(const dt_event *e)
{
    if ((e->kind != DT_EV_D2H && e->kind != DT_EV_H2D) || strcmp(e->coll, "memcpy") != 0)
        return -1;
    for (int k = 0; k < CP_N; k++)
        if (strcmp(e->phase, cp_phase[k]) == 0)
            return k;
    return -1;
}

static int is_step_mark(const dt_event *e)
{
    return e->kind == DT_EV_MARK && !strcmp(e->coll, "train") && !strcmp(e->phase, "step");
}

/* One rank's events ev[0..n), sorted by t0: the span of its counted steps, [*from, *to],
 * and their numbers, *s0..*s1. Returns 0 when the rank has no step mark. */
static int counted_steps(const dt_event *ev, size_t n, double *from, double *to, int *s0,
                         int *s1)
{
    int marks = 0;
    for (size_t i = 0; i < n; i++) {
        if (!is_step_mark(&ev[i]))
            continue;
        if (marks++ < 2) {                      /* the first, then the second */
            *from = ev[i].t0;
            *s0 = ev[i].step;
        }
        *s1 = ev[i].step;
    }
    if (marks == 0)
        return 0;
    *to = *from;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(ev[i].coll, "train") && ev[i].step == *s1 && ev[i].t1 > *to)
            *to = ev[i].t1;
    return 1;
}

static void print_copies_of(const char *label, const copies *c)
{
    printf("%s", label);
    for (int k = 0; k < CP_N; k++) {
        char b[32];
        printf("%s %s %lld (%s)", k ? "," : "", cp_phase[k], c->n[k],
               dt_format_bytes(c->nbytes[k], b, sizeof b));
    }
    printf("\n");
}

static void add_copy(copies *c, int k, long long nbytes)
{
    c->n[k]++;
    c->nbytes[k] += (double)nbytes;
}

/* One rank's events ev[0..n): its copies added to all, those in its counted steps to in
 * as well. Returns 1 with the steps' numbers in *s0..*s1 when the rank trained. */
static int add_rank(const dt_event *ev, size_t n, copies *all, copies *in, int *s0,
                    int *s1)
{
    double from = 0, to = 0;
    int steps = counted_steps(ev, n, &from, &to, s0, s1);
    for (size_t i = 0; i < n; i++) {
        int k = copy_phase(&ev[i]);
        if (k < 0)
            continue;
        add_copy(all, k, ev[i].nbytes);
        if (steps && ev[i].t0 >= from && ev[i].t0 <= to)
            add_copy(in, k, ev[i].nbytes);
    }
    return steps;
}

/* "host<->GPU copies: tensor N (BYTES), batch ..., number ...", and for a training trace
 * "  in steps A..B: ..." below it; nothing when the trace holds none. */
static void print_copies(const dt_trace *t)
{
    copies all = { 0 }, in = { 0 };
    int s0 = 0, s1 = 0, trained = 0;
    for (size_t i = 0; i < t->n;) {             /* rank by rank: events come grouped */
        size_t lo = i;
        while (i < t->n && t->ev[i].rank == t->ev[lo].rank)
            i++;
        int a = 0, b = 0;
        if (add_rank(t->ev + lo, i - lo, &all, &in, &a, &b)) {
            s0 = trained && s0 < a ? s0 : a;
            s1 = trained && s1 > b ? s1 : b;
            trained = 1;
        }
    }
    if (all.n[CP_TENSOR] + all.n[CP_BATCH] + all.n[CP_NUMBER] == 0)
        return;
    print_copies_of("\nhost<->GPU copies:", &all);
    if (!trained)
        return;
    char label[64];
    if (s0 == s1)
        snprintf(label, sizeof label, "  in step %d:", s0);
    else
        snprintf(label, sizeof label, "  in steps %d..%d:", s0, s1);
    print_copies_of(label, &in);
}

static void print_summary(const char *path, const dt_trace *t)
{
    printf("%s: program %s, %d rank%s, %zu event%s (trace format %d)\n\n", path,
           t->program, t->nranks, t->nranks == 1 ? "" : "s", t->n, t->n == 1 ? "" : "s",
           t->version);
    printf("%5s %7s", "rank", "events");
    for (int k = 0; k < DT_EV_NKINDS; k++)
        printf(" %7s", dt_event_kind_name((dt_event_kind)k));
    printf(" %12s %12s %11s %11s %10s\n", "sent B", "received B", "first s", "last s",
           "span ms");

    /* Events come grouped by rank: one pass, one rank's summary at a time. */
    summary all = {0};
    int empty = 0, list_empty = t->nranks <= LIST_EMPTY_MAX;
    size_t i = 0;
    for (int rank = 0; rank < t->nranks; rank++) {
        summary s = {0};
        for (; i < t->n && t->ev[i].rank == rank; i++) {
            add_event(&s, &t->ev[i]);
            add_event(&all, &t->ev[i]);
        }
        if (s.events == 0) {
            empty++;
            if (!list_empty)
                continue;
        }
        char label[16];
        snprintf(label, sizeof label, "%d", rank);
        print_row(label, &s);
    }
    print_row("all", &all);
    if (empty > 0)
        printf("\n%d rank%s recorded no events%s.\n", empty, empty == 1 ? "" : "s",
               list_empty ? "" : " (not listed)");
    print_vias(t);
    print_copies(t);
}

/* A usage error: one sentence, the hint, status 2. */
__attribute__((format(printf, 1, 2)))
static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("dttrace: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'dttrace --help' for usage.\n", stderr);
    return 2;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"chrome", required_argument, NULL, 'c'},
        {"help",   no_argument,       NULL, 'h'},
        {NULL, 0, NULL, 0}
    };
    const char *chrome = NULL;
    char err[512];
    int c;
    opterr = 0;                                 /* the messages below, in our words */
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'c': chrome = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        case ':':
            return bad("option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt > 0 && optopt < 0x80 && strncmp(argv[optind - 1], "--", 2))
                return bad("unknown option '-%c'", optopt);
            return bad("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 1)
        return bad("%s", argc - optind < 1 ? "which trace file?"
                                           : "one trace file at a time");
    const char *path = argv[optind];
    if (path[0] == '\0')
        return bad("the trace file's name is empty");
    /* the output before the work: a name no file can have, or a place that cannot be
     * written, is bad input (2), as for the MPI programs' --trace */
    int rc = chrome != NULL ? dt_output_check(chrome, 0, err, sizeof err) : 0;
    if (rc == -2)                               /* no file can have that name: show it */
        return bad("--chrome '%s': %s", chrome, err);
    if (rc != 0)                                /* err names the path and the reason */
        return bad("--chrome: %s", err);

    dt_trace t;
    if (dt_trace_read(path, &t, err, sizeof err) != 0)     /* bad input, as in dtviz */
        return bad("%s", err);
    print_summary(path, &t);
    if (chrome != NULL) {
        if (dt_trace_write_chrome(&t, chrome, err, sizeof err) != 0) {
            fprintf(stderr, "dttrace: %s\n", err);
            dt_trace_free(&t);
            return 1;
        }
        printf("\nChrome trace written to %s: open it in https://ui.perfetto.dev\n", chrome);
    }
    dt_trace_free(&t);
    /* the summary is the output too: a stdout that cannot take it is a failed write */
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "dttrace: cannot write the summary to standard output: %s\n",
                strerror(errno != 0 ? errno : EIO));
        return 1;
    }
    return 0;
}
