/* Traces without MPI: the line format (shared with the writer in trace.c), the reader,
 * and the Chrome trace JSON export.
 *
 * Nothing here names an MPI symbol, so the viewer and dttrace can link libdt.a and use
 * this file alone. The reader meets files written by dtlab, files edited by hand, and
 * (issue #4) files written by a fuzzer: it never trusts a field. Every line is read
 * into a fixed buffer, every number is checked whole and against its range, every name
 * against its size, and memory grows only with the events actually read, up to a cap.
 * It stops reading at the first byte that refuses the file (a NUL, a line past the
 * limit), and the lines it takes are capped too, so a file that never ends (/dev/zero,
 * /dev/urandom, a pipe) is refused after a bounded number of bytes.
 *
 * Ownership: dt_trace_read fills a dt_trace whose event array it owns; dt_trace_free
 * releases it. On failure nothing is left to free. */
#include "trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Limits that keep absurd input from asking for absurd memory. A real trace of 1M
 * ranks or 64M events would be far beyond what the viewer can show anyway. */
#define TRACE_MAX_RANKS  (1 << 20)
#define TRACE_MAX_EVENTS ((size_t)1 << 26)
/* Lines that are not events (header, comments, blank lines): with the line limit and
 * the event cap, it bounds what the reader takes from a file that never ends. */
#define TRACE_MAX_OTHER  (1 << 20)
#define PROGRAM_MAX      63            /* dt_trace.program holds 63 characters + NUL */
_Static_assert(sizeof ((dt_trace *)0)->program == PROGRAM_MAX + 1, "dt_trace.program");
_Static_assert(sizeof ((dt_trace *)0)->train == DTI_TRACE_TRAIN_MAX + 1, "dt_trace.train");

static const char *const kind_names[DT_EV_NKINDS] = {
    "send", "recv", "reduce", "copy", "d2h", "h2d", "compute", "mark"
};

/* Index 0 is "none"; the others are lib/p2p.c's transports (trace.h, "via"). */
static const char *const via_names[DT_TRACE_NVIA] = { "-", "mpi", "staging", "shm", "ipc" };

static const char *const field_names[] = {
    "t0", "t1", "rank", "kind", "peer", "coll", "phase", "step", "chunk", "lo", "hi",
    "nbytes", "via", "thread"
};
/* Version 1 has the first 12 columns, version 2 13, version 3 all 14 (trace.h,
 * "Versions"). */
#define NFIELDS 14
#define COLUMNS_V1 "t0 t1 rank kind peer coll phase step chunk lo hi nbytes"
#define COLUMNS_V2 COLUMNS_V1 " via"
#define COLUMNS COLUMNS_V2 " thread"
static const char *const columns_of[4] = { "", COLUMNS_V1, COLUMNS_V2, COLUMNS };
_Static_assert(DT_TRACE_VERSION == 3, "columns_of lists every version's columns");

const char *dt_event_kind_name(dt_event_kind kind)
{
    return (unsigned)kind < DT_EV_NKINDS ? kind_names[kind] : "?";
}

const char *dt_trace_via_name(int via)
{
    return via > 0 && via < DT_TRACE_NVIA ? via_names[via] : via_names[0];
}

int dt_event_in_call(const dt_event *e)
{
    if ((e->kind == DT_EV_D2H || e->kind == DT_EV_H2D) && strncmp(e->coll, "memcpy", 32) == 0)
        return 0;                   /* dt_memcpy's copies: no collective's */
    return e->kind == DT_EV_SEND || e->kind == DT_EV_RECV || e->kind == DT_EV_REDUCE ||
           e->kind == DT_EV_COPY || e->kind == DT_EV_D2H || e->kind == DT_EV_H2D ||
           (e->kind == DT_EV_MARK && strncmp(e->phase, "call", 32) == 0);
}

int dt_trace_via_find(const char *name)
{
    if (name == NULL)
        return 0;
    for (int v = 0; v < DT_TRACE_NVIA; v++)
        if (strcmp(name, via_names[v]) == 0)
            return v;
    return -1;
}

char dt_train_dir(const char *phase, const char **part)
{
    static const struct { const char *name; char dir; } dirs[] = {
        { "forward", 'F' }, { "backward", 'B' },
    };
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        size_t n = strlen(dirs[i].name);
        if (strncmp(phase, dirs[i].name, n) == 0 && (phase[n] == '\0' ||
                                                     (phase[n] == '-' && phase[n + 1]))) {
            if (part)
                *part = phase[n] ? phase + n + 1 : "";
            return dirs[i].dir;
        }
    }
    if (part)
        *part = "";
    return 0;
}

/* ==== the line format, shared with the writer ==== */

/* 1..max characters from lowest to '~'. Reads at most max+1 bytes of s, so a char[32]
 * without a NUL is safe too. */
static int name_ok(const char *s, size_t max, char lowest)
{
    size_t n = strnlen(s, max + 1);
    if (n == 0 || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < lowest || s[i] > '~')
            return 0;
    return 1;
}

int dti_trace_name_ok(const char *s)
{
    return s != NULL && name_ok(s, DTI_TRACE_NAME_MAX, '!');
}

int dti_trace_train_ok(const char *s)
{
    return s != NULL && name_ok(s, DTI_TRACE_TRAIN_MAX, ' ');     /* spaces too */
}

/* An empty name is written as "-", the format's "none". */
static const char *name_or_dash(const char *s)
{
    return s[0] ? s : "-";
}

int dti_trace_format_event(const dt_event *e, char *buf, size_t len)
{
    const char *coll = name_or_dash(e->coll), *phase = name_or_dash(e->phase);
    if ((unsigned)e->kind >= DT_EV_NKINDS || !isfinite(e->t0) || !isfinite(e->t1) ||
        !dti_trace_name_ok(coll) || !dti_trace_name_ok(phase) || e->via >= DT_TRACE_NVIA ||
        e->thread < 0 || e->thread > DTI_TRACE_THREAD_MAX)
        return -1;
    int n = snprintf(buf, len, "%.9f %.9f %d %s %d %s %s %d %d %lld %lld %lld %s %d\n",
                     e->t0, e->t1, e->rank, kind_names[e->kind], e->peer, coll, phase,
                     e->step, e->chunk, e->lo, e->hi, e->nbytes, via_names[e->via],
                     e->thread);
    if (n < 0 || (size_t)n >= len || n - 1 > DTI_TRACE_LINE_MAX)
        return -1;
    return n;
}

int dti_trace_format_header(char *buf, size_t len, int nranks, const char *program,
                            const char *train, long long nevents)
{
    if (program == NULL || program[0] == '\0')
        program = "-";
    size_t plen = strnlen(program, PROGRAM_MAX + 1);
    if (nranks < 1 || plen > PROGRAM_MAX)
        return -1;
    for (size_t i = 0; i < plen; i++)
        if (program[i] < ' ' || program[i] > '~')
            return -1;
    if (train == NULL)
        train = "";
    if (train[0] != '\0' && !dti_trace_train_ok(train))
        return -1;
    char events[40] = "";
    if (nevents >= 0)
        snprintf(events, sizeof events, "# events %lld\n", nevents);
    int n = snprintf(buf, len, "# dtlab-trace %d\n# ranks %d\n%s# program %s\n%s%s%s"
                     "# columns %s\n", DT_TRACE_VERSION, nranks, events, program,
                     train[0] ? "# train " : "", train, train[0] ? "\n" : "", COLUMNS);
    if (n < 0 || (size_t)n >= len)
        return -1;
    return n;
}

/* Stable order: a before b when its rank is lower, or its rank equal and t0 earlier. */
static int ev_before(const dt_event *a, const dt_event *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->t0 < b->t0);
}

/* Bottom-up merge sort: runs of width 1, 2, 4, ... merged pairwise between ev and a
 * scratch copy. Taking from the left run unless the right one is strictly before keeps
 * equal keys in their original order. Files are usually sorted already: one pass checks.
 * Without memory for the scratch copy, an insertion sort does the same, more slowly. */
void dti_trace_sort(dt_event *ev, size_t n)
{
    size_t i;
    for (i = 1; i < n; i++)
        if (ev_before(&ev[i], &ev[i - 1]))
            break;
    if (i >= n)
        return;

    dt_event *tmp = malloc(n * sizeof *tmp);
    if (tmp == NULL) {
        for (i = 1; i < n; i++) {
            dt_event x = ev[i];
            size_t j = i;
            for (; j > 0 && ev_before(&x, &ev[j - 1]); j--)
                ev[j] = ev[j - 1];
            ev[j] = x;
        }
        return;
    }
    dt_event *src = ev, *dst = tmp;
    for (size_t w = 1; w < n; w *= 2) {
        for (size_t lo = 0; lo < n; lo += 2 * w) {
            size_t mid = lo + w < n ? lo + w : n;
            size_t hi = mid + w < n ? mid + w : n;
            size_t a = lo, b = mid, k = lo;
            while (a < mid && b < hi)
                dst[k++] = ev_before(&src[b], &src[a]) ? src[b++] : src[a++];
            while (a < mid)
                dst[k++] = src[a++];
            while (b < hi)
                dst[k++] = src[b++];
        }
        dt_event *s = src; src = dst; dst = s;
    }
    if (src != ev)
        memcpy(ev, src, n * sizeof *ev);
    free(tmp);
}

/* ==== reading ==== */

typedef struct {
    FILE *f;
    const char *path;
    long line;                            /* number of the line in buf, from 1 */
    char buf[DTI_TRACE_LINE_MAX + 1];
    size_t len;
    int too_long, has_nul, no_newline;
    char *err;
    size_t errlen;
} reader;

__attribute__((format(printf, 2, 3)))
static int fail(reader *r, const char *fmt, ...)
{
    if (r->err == NULL || r->errlen == 0)
        return -1;
    int n = r->line > 0 ? snprintf(r->err, r->errlen, "%s:%ld: ", r->path, r->line)
                        : snprintf(r->err, r->errlen, "%s: ", r->path);
    if (n >= 0 && (size_t)n < r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err + n, r->errlen - n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* A field quoted in a message: at most 40 characters, anything unprintable as '?', so
 * that a binary file cannot put escape sequences on the learner's terminal. */
static const char *quote(const char *s, char out[48])
{
    size_t i = 0;
    for (; s[i] && i < 40; i++)
        out[i] = (s[i] >= ' ' && s[i] <= '~') ? s[i] : '?';
    if (s[i]) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
    return out;
}

/* Reads the next line into r->buf, without its '\n' (nor a '\r' before it). Returns 1
 * for a line, 0 at the end of the file, -1 on a read error. It stops at the first NUL
 * byte (has_nul) or at character DTI_TRACE_LINE_MAX + 1 (too_long), leaving the rest of
 * the line unread: either refuses the file, so a line that never ends (/dev/zero, a
 * pipe with no '\n') costs at most DTI_TRACE_LINE_MAX + 1 bytes. A last line without
 * '\n' is flagged no_newline (a writer always ends its lines, so the file was cut). */
static int read_line(reader *r)
{
    int c;
    r->len = 0;
    r->too_long = r->has_nul = r->no_newline = 0;
    while ((c = getc(r->f)) != EOF && c != '\n') {
        if (c == '\0') {
            r->has_nul = 1;
            break;
        }
        if (r->len == DTI_TRACE_LINE_MAX) {
            r->too_long = 1;
            break;
        }
        r->buf[r->len++] = (char)c;
    }
    if (c == EOF && ferror(r->f))
        return -1;
    if (c == EOF && r->len == 0)
        return 0;
    if (c == EOF)
        r->no_newline = 1;
    if (r->len > 0 && r->buf[r->len - 1] == '\r' && c == '\n')
        r->len--;
    r->buf[r->len] = '\0';
    r->line++;
    return 1;
}

/* A whole decimal integer in [min, max]: optional '-', digits, nothing else.
 * Returns 0, -1 when s is not an integer, -2 when it is out of range. */
static int parse_ll(const char *s, long long min, long long max, long long *out)
{
    const char *p = s + (s[0] == '-');
    if (*p == '\0')
        return -1;
    for (; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    errno = 0;
    long long v = strtoll(s, NULL, 10);
    if (errno == ERANGE || v < min || v > max)
        return -2;
    *out = v;
    return 0;
}

/* A header value "N" after its key: an integer in [min, max]. */
static int header_int(reader *r, const char *what, const char *s, long long min,
                      long long max, long long *out)
{
    char q[48];
    int rc = parse_ll(s, min, max, out);
    if (rc == -1)
        return fail(r, "the %s header line should hold one integer, not '%s'", what,
                    quote(s, q));
    if (rc == -2)
        return fail(r, "%s %s is out of range (%lld..%lld)", what, quote(s, q), min, max);
    return 0;
}

/* One field of an event line, checked; f is its index in field_names. */
static int field_int(reader *r, char **fld, int f, long long min, long long max,
                     long long *out)
{
    char q[48];
    int rc = parse_ll(fld[f], min, max, out);
    if (rc == -1)
        return fail(r, "field %s: '%s' is not an integer", field_names[f], quote(fld[f], q));
    if (rc == -2)
        return fail(r, "field %s: %s is out of range (%lld..%lld)", field_names[f],
                    quote(fld[f], q), min, max);
    return 0;
}

static int field_time(reader *r, char **fld, int f, double *out)
{
    char q[48], *end;
    const char *s = fld[f];
    /* strtod would skip leading blanks and take "inf" or "nan": a time is neither. */
    int start_ok = (s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '.';
    errno = 0;
    double v = start_ok ? strtod(s, &end) : 0.0;
    if (!start_ok || *end != '\0' || errno == ERANGE || !isfinite(v))
        return fail(r, "field %s: '%s' is not a time in seconds", field_names[f],
                    quote(s, q));
    *out = v;
    return 0;
}

static int field_name(reader *r, char **fld, int f, char dst[32])
{
    char q[48];
    size_t n = strlen(fld[f]);
    if (n > DTI_TRACE_NAME_MAX)
        return fail(r, "field %s: '%s' is longer than %d characters", field_names[f],
                    quote(fld[f], q), DTI_TRACE_NAME_MAX);
    if (!dti_trace_name_ok(fld[f]))
        return fail(r, "field %s: '%s' holds a character that is not printable ASCII",
                    field_names[f], quote(fld[f], q));
    memcpy(dst, fld[f], n + 1);
    return 0;
}

/* The via field: a transport's name or "-" (a version 1 line has none: 0). */
static int field_via(reader *r, char **fld, int nf, unsigned char *via)
{
    char q[48];
    int v = nf > 12 ? dt_trace_via_find(fld[12]) : 0;
    if (v < 0)
        return fail(r, "field via: unknown transport '%s' (mpi, staging, shm, ipc, or - "
                    "for none)", quote(fld[12], q));
    *via = (unsigned char)v;
    return 0;
}

/* Parses the event line in r->buf (cut in place into fields) against nranks; a line of
 * a version 1 file has 12 fields, of version 2 13, of version 3 all NFIELDS. */
static int parse_event(reader *r, int nranks, int version, dt_event *e)
{
    char *fld[NFIELDS], q[48];
    int nf = 1, want = version == 1 ? 12 : version == 2 ? 13 : NFIELDS;
    for (const char *p = r->buf; *p; p++)
        nf += (*p == ' ');
    if (nf != want)
        return fail(r, "%d fields where an event of version %d has %d (%s)", nf, version,
                    want, columns_of[version]);
    char *p = r->buf;
    for (int f = 0; f < want; f++) {
        fld[f] = p;
        char *sp = strchr(p, ' ');
        if (sp != NULL) {
            *sp = '\0';
            p = sp + 1;
        }
        if (fld[f][0] == '\0')
            return fail(r, "field %s is empty (two spaces in a row, or one at an end?)",
                        field_names[f]);
    }

    long long rank, peer, step, chunk, lo, hi, nbytes, thread = 0;
    memset(e, 0, sizeof *e);
    if (field_time(r, fld, 0, &e->t0) || field_time(r, fld, 1, &e->t1) ||
        field_int(r, fld, 2, 0, nranks - 1, &rank))
        return -1;
    int k = 0;
    while (k < DT_EV_NKINDS && strcmp(fld[3], kind_names[k]) != 0)
        k++;
    if (k == DT_EV_NKINDS)
        return fail(r, "field kind: unknown kind '%s' (send, recv, reduce, copy, d2h, h2d, "
                    "compute or mark)", quote(fld[3], q));
    if (field_int(r, fld, 4, -1, nranks - 1, &peer) ||
        field_name(r, fld, 5, e->coll) || field_name(r, fld, 6, e->phase) ||
        field_int(r, fld, 7, -1, INT_MAX, &step) ||
        field_int(r, fld, 8, -1, INT_MAX, &chunk) ||
        field_int(r, fld, 9, 0, LLONG_MAX, &lo) ||
        field_int(r, fld, 10, 0, LLONG_MAX, &hi) ||
        field_int(r, fld, 11, 0, LLONG_MAX, &nbytes) || field_via(r, fld, nf, &e->via) ||
        (nf > 13 && field_int(r, fld, 13, 0, DTI_TRACE_THREAD_MAX, &thread)))
        return -1;
    if (e->t1 < e->t0)
        return fail(r, "the event ends (t1 %s) before it begins (t0 %s)", fld[1], fld[0]);
    if (hi < lo)
        return fail(r, "the range [lo, hi) = [%lld, %lld) is backwards", lo, hi);
    e->rank = (int)rank;
    e->peer = (int)peer;
    e->kind = (dt_event_kind)k;
    e->step = (int)step;
    e->chunk = (int)chunk;
    e->lo = lo;
    e->hi = hi;
    e->nbytes = nbytes;
    e->thread = (int)thread;
    return 0;
}

/* The header lines this reader knows, in a file of format version (1 to 3). Returns 0
 * (also for unknown "#" lines, which are comments) or -1. train is "" until a "# train"
 * line has been read. */
static int parse_header(reader *r, int version, int *nranks, long long *nevents,
                        char *program, char *train, size_t nev_read)
{
    char q[48];
    const char *s = r->buf;
    long long v;
    if (strncmp(s, "# dtlab-trace", 13) == 0)
        return fail(r, "a second '# dtlab-trace' line (two traces pasted together?)");
    if (strncmp(s, "# ranks ", 8) == 0) {
        if (*nranks > 0)
            return fail(r, "a second '# ranks' line");
        if (nev_read > 0)
            return fail(r, "'# ranks' comes after events; it must come before them");
        if (header_int(r, "ranks", s + 8, 1, TRACE_MAX_RANKS, &v))
            return -1;
        *nranks = (int)v;
    } else if (strncmp(s, "# events ", 9) == 0) {
        if (*nevents >= 0)
            return fail(r, "a second '# events' line");
        if (header_int(r, "events", s + 9, 0, (long long)TRACE_MAX_EVENTS, &v))
            return -1;
        *nevents = v;
    } else if (strncmp(s, "# program ", 10) == 0) {
        size_t n = strlen(s + 10);
        if (n == 0 || n > PROGRAM_MAX)
            return fail(r, "the program name should be 1..%d characters", PROGRAM_MAX);
        for (size_t i = 0; i < n; i++)
            if (s[10 + i] < ' ' || s[10 + i] > '~')
                return fail(r, "the program name '%s' holds a character that is not "
                            "printable ASCII", quote(s + 10, q));
        memcpy(program, s + 10, n + 1);
    } else if (strncmp(s, "# train ", 8) == 0) {
        if (train[0] != '\0')
            return fail(r, "a second '# train' line (a trace describes one training run)");
        if (!dti_trace_train_ok(s + 8))
            return fail(r, "the train line '%s' should be 1..%d printable ASCII characters",
                        quote(s + 8, q), DTI_TRACE_TRAIN_MAX);
        memcpy(train, s + 8, strlen(s + 8) + 1);
    } else if (strncmp(s, "# columns ", 10) == 0) {
        const char *cols = columns_of[version];
        if (strcmp(s + 10, cols) != 0)
            return fail(r, "the columns are '%s'; version %d has '%s'", quote(s + 10, q),
                        version, cols);
    }
    return 0;
}

int dt_trace_read(const char *path, dt_trace *t, char *err, size_t errlen)
{
    reader r = { .path = path ? path : "(null)", .err = err, .errlen = errlen };
    memset(t, 0, sizeof *t);
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (path == NULL)
        return fail(&r, "no trace file given");
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return fail(&r, "cannot open the trace: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fclose(f);
        return fail(&r, "a folder, not a trace file");
    }
    int rc = dt_trace_read_stream(f, path, t, err, errlen);
    fclose(f);
    return rc;
}

int dt_trace_read_stream(FILE *f, const char *name, dt_trace *t, char *err, size_t errlen)
{
    reader r = { .path = name ? name : "(stream)", .err = err, .errlen = errlen, .f = f };
    dt_event *ev = NULL;
    size_t n = 0, cap = 0;
    int nranks = 0, nother = 0, rc = -1, version = 0;
    long long nevents = -1;
    char program[PROGRAM_MAX + 1] = "-", train[DTI_TRACE_TRAIN_MAX + 1] = "", q[48];

    memset(t, 0, sizeof *t);
    if (err != NULL && errlen > 0)
        err[0] = '\0';

    for (;;) {
        int got = read_line(&r);
        if (got < 0) {
            fail(&r, "read error: %s", strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        if (r.has_nul) {
            fail(&r, "a NUL byte: this is not a text trace");
            goto out;
        }
        if (r.no_newline) {
            fail(&r, "the last line has no end: the file was cut short (truncated)");
            goto out;
        }
        if (r.line == 1) {                  /* "# dtlab-trace V", nothing else first */
            long long v;
            if (strncmp(r.buf, "# dtlab-trace ", 14) != 0 || r.too_long) {
                fail(&r, "not a dtlab trace: the first line should be '# dtlab-trace %d'",
                     DT_TRACE_VERSION);
                goto out;
            }
            int prc = parse_ll(r.buf + 14, 0, INT_MAX, &v);
            if (prc != 0 || v < 1 || v > DT_TRACE_VERSION) {
                fail(&r, "trace format version '%s'; this reader knows versions 1 to %d",
                     quote(r.buf + 14, q), DT_TRACE_VERSION);
                goto out;
            }
            version = (int)v;
            continue;
        }
        if (r.too_long) {                   /* comments too: the writer never goes past */
            fail(&r, "line longer than %d characters", DTI_TRACE_LINE_MAX);
            goto out;
        }
        if (r.buf[0] == '#' || r.len == 0) {    /* header lines, comments, blank lines */
            if (++nother > TRACE_MAX_OTHER) {
                fail(&r, "more than %d comment or blank lines; the reader stops there",
                     TRACE_MAX_OTHER);
                goto out;
            }
            if (r.buf[0] == '#' &&
                parse_header(&r, version, &nranks, &nevents, program, train, n))
                goto out;
            continue;
        }
        if (nranks == 0) {
            fail(&r, "an event before the '# ranks N' header line");
            goto out;
        }
        if (n == cap) {
            if (cap >= TRACE_MAX_EVENTS) {
                fail(&r, "more than %zu events; the reader stops there", TRACE_MAX_EVENTS);
                goto out;
            }
            size_t ncap = cap ? 2 * cap : 1024;
            dt_event *p = realloc(ev, ncap * sizeof *ev);
            if (p == NULL) {
                fail(&r, "out of memory after %zu events", n);
                goto out;
            }
            ev = p;
            cap = ncap;
        }
        if (parse_event(&r, nranks, version, &ev[n]))
            goto out;
        n++;
    }
    if (r.line == 0) {
        fail(&r, "the file is empty; a dtlab trace begins with '# dtlab-trace %d'",
             DT_TRACE_VERSION);
        goto out;
    }
    r.line = 0;                             /* what follows is about the whole file */
    if (nranks == 0) {
        fail(&r, "no '# ranks N' header line");
        goto out;
    }
    if (nevents >= 0 && (size_t)nevents != n) {
        fail(&r, "the header announces %lld events but %zu follow: the file was cut "
             "short or edited", nevents, n);
        goto out;
    }
    dti_trace_sort(ev, n);
    t->version = version;
    t->nranks = nranks;
    memcpy(t->program, program, sizeof program);
    memcpy(t->train, train, sizeof train);
    t->ev = ev;
    t->n = n;
    ev = NULL;
    rc = 0;
out:
    free(ev);
    return rc;
}

void dt_trace_free(dt_trace *t)
{
    if (t == NULL)
        return;
    free(t->ev);
    memset(t, 0, sizeof *t);
}

/* ==== Chrome trace JSON ==== */

/* The Trace Event Format: {"traceEvents": [...]} with complete ("X") events, ts and dur
 * in microseconds, pid/tid naming the track; metadata ("M") events name the tracks.
 * Perfetto (ui.perfetto.dev) and chrome://tracing open it. */

/* A JSON string of at most max bytes of s. Quotes, backslashes, control characters and
 * bytes outside ASCII are escaped, so the output is valid JSON whatever s holds. */
static void json_str(FILE *f, const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    putc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c > 0x7e)
            fprintf(f, "\\u%04x", c);
        else
            putc(c, f);
    }
    putc('"', f);
}

/* Microseconds, finite: JSON has no inf or nan. */
static double usec(double s)
{
    double us = s * 1e6;
    return isfinite(us) ? us : 0.0;
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

static int is_comm(dt_event_kind k)
{
    return k == DT_EV_SEND || k == DT_EV_RECV || k == DT_EV_D2H || k == DT_EV_H2D;
}

/* "send->1 c3", "recv<-0 c3", "reduce c3", "compute forward". */
static void event_name(const dt_event *e, char *buf, size_t len)
{
    const char *kind = dt_event_kind_name(e->kind);
    int n;
    if (e->kind == DT_EV_SEND)
        n = snprintf(buf, len, "send->%d", e->peer);
    else if (e->kind == DT_EV_RECV)
        n = snprintf(buf, len, "recv<-%d", e->peer);
    else if ((e->kind == DT_EV_COMPUTE || e->kind == DT_EV_MARK) &&
             e->phase[0] && strcmp(e->phase, "-") != 0)
        n = snprintf(buf, len, "%s %.*s", kind, DTI_TRACE_NAME_MAX, e->phase);
    else
        n = snprintf(buf, len, "%s", kind);
    if (e->chunk >= 0 && n >= 0 && (size_t)n < len)
        snprintf(buf + n, len - n, " c%d", e->chunk);
}

static void chrome_meta(FILE *f, int rank)
{
    fprintf(f, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"name\":\"rank %d\"}},\n", rank, rank);
    fprintf(f, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"sort_index\":%d}},\n", rank, rank);
    fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
               "\"args\":{\"name\":\"comm\"}},\n", rank);
    fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":1,"
               "\"args\":{\"name\":\"compute\"}}", rank);
}

int dt_trace_write_chrome(const dt_trace *t, const char *path, char *err, size_t errlen)
{
    reader r = { .path = path ? path : "(null)", .err = err, .errlen = errlen };
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (path == NULL)
        return fail(&r, "no output file given");
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return fail(&r, "cannot write the Chrome trace: %s", strerror(errno));

    fputs("{\"traceEvents\":[\n", f);
    /* Every rank of the run gets its named tracks, even one that recorded nothing. */
    int nmeta = t->nranks > 0 && t->nranks <= TRACE_MAX_RANKS ? t->nranks : 0;
    for (int rank = 0; rank < nmeta; rank++) {
        chrome_meta(f, rank);
        fputs(rank + 1 < nmeta || t->n > 0 ? ",\n" : "\n", f);
    }
    /* A thread k > 0 of a rank gets two tracks more, tids 2k and 2k+1, named; the
     * events that follow make the comma after each name right. */
    int *seen = malloc((t->n ? t->n : 1) * sizeof *seen);
    if (seen == NULL) {
        fclose(f);
        remove(path);
        return fail(&r, "out of memory naming the threads' tracks");
    }
    for (size_t lo = 0, hi; lo < t->n; lo = hi) {
        size_t ns = 0;
        for (hi = lo; hi < t->n && t->ev[hi].rank == t->ev[lo].rank; hi++)
            if (t->ev[hi].thread > 0)
                seen[ns++] = t->ev[hi].thread;
        qsort(seen, ns, sizeof *seen, cmp_int);
        for (size_t j = 0; j < ns; j++)
            if (j == 0 || seen[j] != seen[j - 1])
                for (int c = 0; c < 2; c++)
                    fprintf(f, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,"
                               "\"tid\":%d,\"args\":{\"name\":\"thread %d %s\"}},\n",
                            t->ev[lo].rank, 2 * seen[j] + c, seen[j], c ? "compute" : "comm");
    }
    free(seen);
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        char name[128];
        event_name(e, name, sizeof name);
        fputs("{\"name\":", f);
        json_str(f, name, sizeof name);
        fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                   "\"pid\":%d,\"tid\":%d,\"args\":{\"peer\":%d,\"chunk\":%d,\"step\":%d,"
                   "\"lo\":%lld,\"hi\":%lld,\"nbytes\":%lld,\"coll\":",
                dt_event_kind_name(e->kind), usec(e->t0), usec(e->t1 - e->t0), e->rank,
                2 * e->thread + !is_comm(e->kind), e->peer, e->chunk, e->step, e->lo, e->hi,
                e->nbytes);
        json_str(f, e->coll, sizeof e->coll);
        fputs(",\"phase\":", f);
        json_str(f, e->phase, sizeof e->phase);
        if (e->via > 0 && e->via < DT_TRACE_NVIA)        /* names only: no escaping */
            fprintf(f, ",\"via\":\"%s\"", via_names[e->via]);
        fputs(i + 1 < t->n ? "}},\n" : "}}\n", f);
    }
    fputs("],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"program\":", f);
    json_str(f, t->program, sizeof t->program);
    fputs(",\"train\":", f);
    json_str(f, t->train, sizeof t->train);
    int version = t->version >= 1 && t->version <= DT_TRACE_VERSION ? t->version
                                                                     : DT_TRACE_VERSION;
    fprintf(f, ",\"dtlab_trace_version\":%d}}\n", version);

    int bad = ferror(f);
    if (fclose(f) != 0 || bad)
        return fail(&r, "could not finish writing the Chrome trace (disk full?)");
    return 0;
}

/* ==== output files ==== */

__attribute__((format(printf, 4, 5)))
static int say(int rc, char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int dt_output_check(const char *path, int is_dir, char *err, size_t errlen)
{
    struct stat st;
    char dir[4096];
    if (path == NULL || path[0] == '\0')
        return say(-2, err, errlen, "the name is empty");
    size_t n = strlen(path);
    if (!is_dir && path[n - 1] == '/')
        return say(-2, err, errlen, "a name ending in '/' names a folder, not a file");
    if (stat(path, &st) == 0) {
        if (!S_ISDIR(st.st_mode) != !is_dir)
            return say(-1, err, errlen, "cannot write %s: it is a %s", path,
                       is_dir ? "file, not a folder" : "folder, not a file");
        if (access(path, is_dir ? W_OK | X_OK : W_OK) != 0)
            return say(-1, err, errlen, "cannot write %s: %s", path, strerror(errno));
        return 0;
    }
    if (errno != ENOENT || n >= sizeof dir)
        return say(-1, err, errlen, "cannot write %s: %s", path,
                   strerror(n >= sizeof dir ? ENAMETOOLONG : errno));
    /* It will be made: its folder, the name up to the last '/' ("." without one), must
     * be one this process can write into. */
    memcpy(dir, path, n + 1);
    while (n > 1 && dir[n - 1] == '/')
        dir[--n] = '\0';
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        strcpy(dir, ".");
    else
        slash[slash == dir] = '\0';         /* "/x" keeps its "/" */
    if (stat(dir, &st) != 0 && errno == ENOENT)
        return say(-1, err, errlen, "cannot write %s: the folder %s does not exist", path,
                   dir);
    if (access(dir, W_OK | X_OK) != 0)
        return say(-1, err, errlen, "cannot write %s: %s: %s", path, dir, strerror(errno));
    return 0;
}
