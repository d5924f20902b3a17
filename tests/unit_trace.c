/* Unit tests of the trace file format, the reader and the Chrome export; and of one
 * recording call.
 *
 * Files are written with the very helpers the writer (lib/trace.c) uses, read back and
 * compared field by field; then every kind of broken file must be refused with -1 and
 * a message naming the line; then cut and mutated files must never crash the reader;
 * the Chrome JSON must parse (a small JSON checker here, and python3 when present).
 * No MPI, but for the case "record": dti_trace_add_named, the call that records
 * dt_memcpy's copies between host and GPU, in a trace of one rank (MPI's singleton,
 * started in the test's own process: Check forks each test) that dti_trace_close
 * writes and the reader reads back. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE                        /* fopencookie */
#endif
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "trace.h"

/* ==== helpers ==== */

static char dir[256];

static void setup(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/dt_unit_trace_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        perror("unit_trace: mkdtemp");
        exit(EXIT_FAILURE);
    }
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "unit_trace: could not remove %s\n", dir);
}

static const char *path_of(const char *name)
{
    static char p[2][320];
    static int k;
    k ^= 1;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static const char *write_file(const char *name, const char *text, size_t len)
{
    const char *p = path_of(name);
    FILE *f = fopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(text, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    return p;
}

static dt_event ev(double t0, double t1, int rank, dt_event_kind kind, int peer,
                   const char *coll, const char *phase, int step, int chunk,
                   long long lo, long long hi, long long nbytes)
{
    dt_event e;
    memset(&e, 0, sizeof e);
    e.t0 = t0; e.t1 = t1; e.rank = rank; e.kind = kind; e.peer = peer;
    snprintf(e.coll, sizeof e.coll, "%s", coll);
    snprintf(e.phase, sizeof e.phase, "%s", phase);
    e.step = step; e.chunk = chunk; e.lo = lo; e.hi = hi; e.nbytes = nbytes;
    return e;
}

/* The sample, in file order: not grouped by rank, and rank 0 out of t0 order, so the
 * reader must sort; two rank-1 events share t0 and must keep their order. Every kind,
 * names of 31 characters, -1s, 64-bit ranges, and every transport (and none) appear. */
#define NSAMPLE 10
static dt_event sample[NSAMPLE];
static const int sorted_order[NSAMPLE] = { 2, 1, 0, 9, 3, 4, 5, 6, 7, 8 };

static void make_sample(void)
{
    const char *n31 = "abcdefghijklmnopqrstuvwxyz01234";      /* 31 characters */
    sample[0] = ev(0.000300000, 0.000350000, 0, DT_EV_REDUCE, -1, "allreduce_ring",
                   "reduce-scatter", 0, 2, 50, 75, 100);
    sample[1] = ev(0.000153000, 0.000161000, 0, DT_EV_SEND, 1, "allreduce_ring",
                   "reduce-scatter", 0, 3, 75, 100, 100);
    sample[2] = ev(0.000100000, 0.000150000, 0, DT_EV_D2H, -1, "allreduce_ring",
                   "reduce-scatter", 0, 3, 75, 100, 100);
    sample[3] = ev(0.000200000, 0.000210000, 1, DT_EV_RECV, 0, "allreduce_ring",
                   "reduce-scatter", 0, 3, 75, 100, 100);
    sample[4] = ev(0.000220000, 0.000230000, 1, DT_EV_H2D, -1, "allreduce_ring",
                   "reduce-scatter", 0, 3, 75, 100, 100);
    sample[5] = ev(0.000220000, 0.000240000, 1, DT_EV_COPY, -1, "-", "-", -1, -1, 0, 0,
                   4096);
    sample[6] = ev(1.5, 2.25, 1, DT_EV_COMPUTE, -1, "train", "forward", 7, -1, 0, 0, 0);
    sample[7] = ev(3.0, 3.0, 1, DT_EV_MARK, -1, n31, n31, 2147483647, 2147483647,
                   4000000000LL, 9000000000000000000LL, 9000000000000000000LL);
    sample[8] = ev(3.5, 3.75, 2, DT_EV_SEND, 0, "bcast_tree", "-", 1, -1, 0, 0, 1);
    sample[9] = ev(0.000001000, 0.000002000, 1, DT_EV_SEND, 2, "x", "y", 0, 0, 0, 0, 0);
    sample[1].via = (unsigned char)dt_trace_via_find("shm");
    sample[3].via = (unsigned char)dt_trace_via_find("shm");
    sample[8].via = (unsigned char)dt_trace_via_find("mpi");
    sample[9].via = (unsigned char)dt_trace_via_find("ipc");
    sample[2].via = (unsigned char)dt_trace_via_find("staging");   /* any kind may */
}

/* What dt_train writes for a pp run (lib/parallel/run.c). */
#define TRAIN "mode pp schedule 1f1b stages 4 micro 8 layers 8 hidden 1024 batch 512 " \
              "steps 2 ranks 4 precision fp32 optimizer sgd"

/* The sample as a file, made with the writer's own helpers. Returns its length. */
static size_t sample_text(char *buf, size_t len, long long nevents)
{
    make_sample();
    int n = dti_trace_format_header(buf, len, 3, "unit_trace", TRAIN, nevents);
    ck_assert_int_gt(n, 0);
    size_t used = (size_t)n;
    for (int i = 0; i < NSAMPLE; i++) {
        n = dti_trace_format_event(&sample[i], buf + used, len - used);
        ck_assert_int_gt(n, 0);
        used += (size_t)n;
    }
    return used;
}

/* The context an event was recorded with: coll, phase, step, chunk, range, thread */
static void assert_same_context(const dt_event *a, const dt_event *b)
{
    ck_assert_str_eq(a->coll, b->coll);
    ck_assert_str_eq(a->phase, b->phase);
    ck_assert_int_eq(a->step, b->step);
    ck_assert_int_eq(a->chunk, b->chunk);
    ck_assert_int_eq(a->lo, b->lo);
    ck_assert_int_eq(a->hi, b->hi);
    ck_assert_int_eq(a->thread, b->thread);
}

static void assert_same(const dt_event *a, const dt_event *b)
{
    ck_assert_double_eq_tol(a->t0, b->t0, 1e-12);
    ck_assert_double_eq_tol(a->t1, b->t1, 1e-12);
    ck_assert_int_eq(a->rank, b->rank);
    ck_assert_int_eq(a->peer, b->peer);
    ck_assert_int_eq(a->kind, b->kind);
    assert_same_context(a, b);
    ck_assert_int_eq(a->nbytes, b->nbytes);
    ck_assert_int_eq(a->via, b->via);
}

/* What any successful read must satisfy, whatever the file was. */
static void assert_valid(const dt_trace *t)
{
    ck_assert(t->version >= 1 && t->version <= DT_TRACE_VERSION);
    ck_assert_int_ge(t->nranks, 1);
    ck_assert(t->n == 0 || t->ev != NULL);
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        ck_assert(e->rank >= 0 && e->rank < t->nranks);
        ck_assert(e->peer >= -1 && e->peer < t->nranks);
        ck_assert((unsigned)e->kind < DT_EV_NKINDS);
        ck_assert(isfinite(e->t0) && isfinite(e->t1) && e->t1 >= e->t0);
        ck_assert(dti_trace_name_ok(e->coll) && dti_trace_name_ok(e->phase));
        ck_assert(e->lo >= 0 && e->hi >= e->lo && e->nbytes >= 0);
        ck_assert(e->via < DT_TRACE_NVIA && (t->version > 1 || e->via == 0));
        ck_assert(e->thread >= 0 && e->thread <= DTI_TRACE_THREAD_MAX &&
                  (t->version > 2 || e->thread == 0));
        if (i > 0)
            ck_assert(e[-1].rank < e->rank || (e[-1].rank == e->rank && e[-1].t0 <= e->t0));
    }
}

/* ==== round trip ==== */

START_TEST(test_roundtrip)
{
    char text[8192], err[256];
    size_t len = sample_text(text, sizeof text, NSAMPLE);
    const char *p = write_file("ok.trace", text, len);
    dt_trace t;
    ck_assert_msg(dt_trace_read(p, &t, err, sizeof err) == 0, "read failed: %s", err);
    assert_valid(&t);
    ck_assert_int_eq(t.nranks, 3);
    ck_assert_str_eq(t.program, "unit_trace");
    ck_assert_str_eq(t.train, TRAIN);
    ck_assert_uint_eq(t.n, NSAMPLE);
    for (int i = 0; i < NSAMPLE; i++)
        assert_same(&t.ev[i], &sample[sorted_order[i]]);
    dt_trace_free(&t);
    ck_assert_ptr_null(t.ev);
    ck_assert_uint_eq(t.n, 0);
}
END_TEST

/* Without "# events", with CRLF line ends, blank lines and unknown "#" lines. */
START_TEST(test_lenient)
{
    const char *text =
        "# dtlab-trace 1\r\n"
        "# ranks 2\r\n"
        "# a comment from a later version\r\n"
        "\r\n"
        "0.5 0.75 1 recv 0 - - -1 -1 0 0 8\r\n"
        "0.25 0.5 1 send 0 - - -1 -1 0 0 8\r\n";
    dt_trace t;
    char err[256];
    const char *p = write_file("lenient.trace", text, strlen(text));
    ck_assert_msg(dt_trace_read(p, &t, err, sizeof err) == 0, "read failed: %s", err);
    assert_valid(&t);
    ck_assert_uint_eq(t.n, 2);
    ck_assert_int_eq(t.ev[0].kind, DT_EV_SEND);
    ck_assert_str_eq(t.program, "-");
    ck_assert_str_eq(t.train, "");                     /* no "# train" line */
    dt_trace_free(&t);
}
END_TEST

START_TEST(test_kind_names)
{
    const char *want[] = { "send", "recv", "reduce", "copy", "d2h", "h2d", "compute",
                           "mark" };
    for (int k = 0; k < DT_EV_NKINDS; k++)
        ck_assert_str_eq(dt_event_kind_name((dt_event_kind)k), want[k]);
    ck_assert_str_eq(dt_event_kind_name(DT_EV_NKINDS), "?");
}
END_TEST

START_TEST(test_format_refuses)
{
    char buf[1024];
    dt_event e = ev(0, 1, 0, DT_EV_SEND, 1, "a", "b", 0, 0, 0, 1, 4);
    ck_assert_int_gt(dti_trace_format_event(&e, buf, sizeof buf), 0);
    ck_assert_int_eq(dti_trace_format_event(&e, buf, 10), -1);       /* does not fit */
    dt_event bad = e;
    bad.kind = DT_EV_NKINDS;
    ck_assert_int_eq(dti_trace_format_event(&bad, buf, sizeof buf), -1);
    bad = e;
    bad.t1 = NAN;
    ck_assert_int_eq(dti_trace_format_event(&bad, buf, sizeof buf), -1);
    bad = e;
    strcpy(bad.coll, "two words");
    ck_assert_int_eq(dti_trace_format_event(&bad, buf, sizeof buf), -1);
    bad = e;
    memset(bad.phase, 'x', sizeof bad.phase);                         /* no NUL */
    ck_assert_int_eq(dti_trace_format_event(&bad, buf, sizeof buf), -1);
    ck_assert_int_eq(dti_trace_format_header(buf, sizeof buf, 0, "p", NULL, -1), -1);
    ck_assert_int_eq(dti_trace_format_header(buf, sizeof buf, 2, "p\n", NULL, -1), -1);
    ck_assert_int_gt(dti_trace_format_header(buf, sizeof buf, 2, NULL, NULL, -1), 0);
    ck_assert_ptr_null(strstr(buf, "# events"));
}
END_TEST

START_TEST(test_sort_stable)
{
    enum { N = 2000 };
    dt_event *a = calloc(N, sizeof *a);
    ck_assert_ptr_nonnull(a);
    unsigned s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1103515245u + 12345u;
        a[i].rank = (int)(s >> 16) % 5;
        a[i].t0 = (double)((s >> 8) % 7);
        a[i].step = i;                       /* the original position */
    }
    dti_trace_sort(a, N);
    for (int i = 1; i < N; i++) {
        ck_assert(a[i - 1].rank <= a[i].rank);
        if (a[i - 1].rank == a[i].rank) {
            ck_assert(a[i - 1].t0 <= a[i].t0);
            if (a[i - 1].t0 == a[i].t0)
                ck_assert_int_lt(a[i - 1].step, a[i].step);
        }
    }
    free(a);
}
END_TEST

/* ==== broken files: -1, the line, and a reason ==== */

#define HEAD "# dtlab-trace 1\n# ranks 2\n# program p\n"
#define GOOD "0.1 0.2 0 send 1 allreduce_ring reduce-scatter 0 3 75 100 100\n"

static void expect_fail(const char *text, size_t len, const char *needle)
{
    const char *p = write_file("bad.trace", text, len);
    dt_trace t;
    char err[256] = "";
    int rc = dt_trace_read(p, &t, err, sizeof err);
    ck_assert_msg(rc == -1, "accepted a bad file, expected \"%s\":\n%s", needle, text);
    ck_assert_msg(strstr(err, needle) != NULL, "message \"%s\" lacks \"%s\"", err, needle);
    ck_assert_msg(strstr(err, p) != NULL, "message \"%s\" does not name the file", err);
    ck_assert_ptr_null(t.ev);
    ck_assert_uint_eq(t.n, 0);
    dt_trace_free(&t);                       /* harmless on an empty trace */
}

static void expect_fail_s(const char *text, const char *needle)
{
    expect_fail(text, strlen(text), needle);
}

START_TEST(test_bad_files)
{
    char err[256];
    dt_trace t;
    ck_assert_int_eq(dt_trace_read(path_of("missing.trace"), &t, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "cannot open"));
    ck_assert_int_eq(dt_trace_read(dir, &t, err, sizeof err), -1);      /* a directory */
    ck_assert_msg(strstr(err, "a folder, not a trace file") != NULL, "%s", err);
    ck_assert_int_eq(dt_trace_read(path_of("missing.trace"), &t, NULL, 0), -1);

    expect_fail_s("", "empty");
    expect_fail_s("hello\n", ":1: not a dtlab trace");
    expect_fail_s("# dtlab-trace\n", ":1: not a dtlab trace");
    expect_fail_s("# dtlab-trace 4\n# ranks 2\n", ":1: trace format version '4'; this "
                  "reader knows versions 1 to 3");
    expect_fail_s("# dtlab-trace 0\n# ranks 2\n", ":1: trace format version '0'");
    expect_fail_s("# dtlab-trace one\n", "version");
    expect_fail_s("# dtlab-trace 1\n# program p\n", "no '# ranks N'");
    expect_fail_s("# dtlab-trace 1\n" GOOD, ":2: an event before the '# ranks N'");
    expect_fail_s("# dtlab-trace 1\n# ranks 0\n", ":2: ranks 0 is out of range");
    expect_fail_s("# dtlab-trace 1\n# ranks 99999999999999999999\n", "out of range");
    expect_fail_s("# dtlab-trace 1\n# ranks two\n", ":2: the ranks header line");
    expect_fail_s(HEAD "# ranks 2\n", ":4: a second '# ranks'");
    expect_fail_s(HEAD "# dtlab-trace 1\n", "a second '# dtlab-trace'");
    expect_fail_s(HEAD "# columns t0 t1 rank\n", ":4: the columns");
    expect_fail_s(HEAD "# events 2\n" GOOD, "announces 2 events but 1 follow");
    expect_fail_s(HEAD GOOD "# ranks 3\n", ":5: a second '# ranks'");
}
END_TEST

START_TEST(test_bad_events)
{
    expect_fail_s(HEAD "0.1 0.2 0 send 1 allreduce_ring reduce-scatter abc 3 75 100 100\n",
                  ":4: field step: 'abc' is not an integer");
    expect_fail_s(HEAD GOOD "0.1 0.2 1.5 send 1 c p 0 3 75 100 100\n",
                  ":5: field rank: '1.5' is not an integer");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 75 100 0x10\n", "field nbytes");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 75 100 +5\n", "field nbytes");
    expect_fail_s(HEAD "x 0.2 0 send 1 c p 0 3 75 100 100\n", "field t0: 'x' is not a time");
    expect_fail_s(HEAD "0.1 nan 0 send 1 c p 0 3 75 100 100\n", "field t1");
    expect_fail_s(HEAD "inf 1 0 send 1 c p 0 3 75 100 100\n", "field t0");
    expect_fail_s(HEAD "1e999 1 0 send 1 c p 0 3 75 100 100\n", "field t0");
    expect_fail_s(HEAD "0.1 0.2s 0 send 1 c p 0 3 75 100 100\n", "field t1");
    expect_fail_s(HEAD "0.1 0.2 0 sned 1 c p 0 3 75 100 100\n", ":4: field kind: unknown kind 'sned'");
    expect_fail_s(HEAD "0.1 0.2 0 SEND 1 c p 0 3 75 100 100\n", "unknown kind");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 abcdefghijklmnopqrstuvwxyz012345 p 0 3 75 100 100\n",
                  "field coll: 'abcdefghijklmnopqrstuvwxyz012345' is longer than 31");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c "
                  "a-phase-name-that-goes-on-and-on-and-on-for-far-too-long 0 3 75 100 100\n",
                  "field phase");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c\x01 p 0 3 75 100 100\n", "not printable");
    expect_fail_s(HEAD "0.1 0.2 -1 send 1 c p 0 3 75 100 100\n", "field rank: -1 is out of range (0..1)");
    expect_fail_s(HEAD "0.1 0.2 2 send 1 c p 0 3 75 100 100\n", "field rank: 2 is out of range");
    expect_fail_s(HEAD "0.1 0.2 0 send -2 c p 0 3 75 100 100\n", "field peer");
    expect_fail_s(HEAD "0.1 0.2 0 send 2 c p 0 3 75 100 100\n", "field peer");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p -2 3 75 100 100\n", "field step");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 2147483648 75 100 100\n", "field chunk");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 -1 100 100\n", "field lo");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 0 99999999999999999999 100\n", "field hi");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 0 1 -100\n", "field nbytes");
    expect_fail_s(HEAD "0.2 0.1 0 send 1 c p 0 3 75 100 100\n", ":4: the event ends");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 100 75 100\n", "backwards");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 75 100\n",
                  ":4: 11 fields where an event of version 1 has 12");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 75 100 100 7\n", "13 fields");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 3 75 100 100 \n", "13 fields");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c  0 3 75 100 100\n", "field phase is empty");
    expect_fail_s(HEAD "0.1\t0.2 0 send 1 c p 0 3 75 100 100\n", "fields");
    static const char nul[] = HEAD "0.1 0.2 0 send 1 c p\0 0 3 75 100 100\n";
    expect_fail(nul, sizeof nul - 1, ":4: a NUL byte");

    /* One line longer than any event line can be; a comment or a known header line
     * too (the writer never goes past the limit, and a line is refused before its end
     * is read); one at the limit is fine, and line numbers count every line. */
    char big[2048];
    snprintf(big, sizeof big, HEAD "%0900d 0.2 0 send 1 c p 0 3 75 100 100\n", 1);
    expect_fail_s(big, ":4: line longer than 512");
    snprintf(big, sizeof big, HEAD "# %0900d\n" GOOD, 1);
    expect_fail_s(big, ":4: line longer than 512");
    snprintf(big, sizeof big, HEAD "# train %0900d\n" GOOD, 1);
    expect_fail_s(big, ":4: line longer than 512");
    snprintf(big, sizeof big, HEAD "# %0510d\n\n#\n" GOOD "%s", 1, "0.1 x\n");
    expect_fail_s(big, ":8: 2 fields");
}
END_TEST

/* The via column (version 2): each transport's name and "-" read back; the version
 * says the columns, so a version 1 file (no via) still reads, with every via none, and
 * a line of the other version's width, a columns line of the other version, or a
 * transport nobody knows is refused with its line. */
#define HEAD2 "# dtlab-trace 2\n# ranks 2\n# program p\n"

START_TEST(test_via)
{
    static const char *const names[] = { "-", "mpi", "staging", "shm", "ipc" };
    for (int v = 0; v < DT_TRACE_NVIA; v++) {
        ck_assert_str_eq(dt_trace_via_name(v), names[v]);
        ck_assert_int_eq(dt_trace_via_find(names[v]), v);
    }
    ck_assert_str_eq(dt_trace_via_name(DT_TRACE_NVIA), "-");
    ck_assert_str_eq(dt_trace_via_name(-1), "-");
    ck_assert_int_eq(dt_trace_via_find(NULL), 0);
    ck_assert_int_eq(dt_trace_via_find("SHM"), -1);
    ck_assert_int_eq(dt_trace_via_find(""), -1);

    /* the writer: the name last, "-" for none; an index out of the table refused */
    char buf[512];
    dt_event e = ev(0, 1, 0, DT_EV_RECV, 1, "a", "b", 0, 0, 0, 1, 4);
    ck_assert_int_gt(dti_trace_format_event(&e, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "0.000000000 1.000000000 0 recv 1 a b 0 0 0 1 4 - 0\n");
    e.via = 4;
    ck_assert_int_gt(dti_trace_format_event(&e, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "0.000000000 1.000000000 0 recv 1 a b 0 0 0 1 4 ipc 0\n");
    e.via = DT_TRACE_NVIA;
    ck_assert_int_eq(dti_trace_format_event(&e, buf, sizeof buf), -1);

    /* the reader: version 2 with every name, and a version 1 file without the column */
    const char *v2 = HEAD2 "# columns t0 t1 rank kind peer coll phase step chunk lo hi "
                     "nbytes via\n"
                     "0.1 0.2 0 send 1 c p 0 0 0 1 4 shm\n0.2 0.3 0 send 1 c p 0 0 0 1 4 -\n"
                     "0.3 0.4 0 send 1 c p 0 0 0 1 4 mpi\n0.4 0.5 0 send 1 c p 0 0 0 1 4 ipc\n"
                     "0.5 0.6 0 d2h -1 c p 0 0 0 1 4 staging\n";
    const int want[] = { 3, 0, 1, 4, 2 };
    dt_trace t;
    char err[256];
    ck_assert_msg(dt_trace_read(write_file("v2.trace", v2, strlen(v2)), &t, err,
                                sizeof err) == 0, "read failed: %s", err);
    assert_valid(&t);
    ck_assert_int_eq(t.version, 2);
    ck_assert_uint_eq(t.n, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(t.ev[i].via, want[i]);
    dt_trace_free(&t);
    const char *v1 = HEAD "# columns t0 t1 rank kind peer coll phase step chunk lo hi "
                     "nbytes\n" GOOD;
    ck_assert_msg(dt_trace_read(write_file("v1.trace", v1, strlen(v1)), &t, err,
                                sizeof err) == 0, "read failed: %s", err);
    assert_valid(&t);
    ck_assert_int_eq(t.version, 1);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_int_eq(t.ev[0].via, 0);
    ck_assert_int_eq(t.ev[0].nbytes, 100);
    dt_trace_free(&t);

    expect_fail_s(HEAD2 "0.1 0.2 0 send 1 c p 0 0 0 1 4 shm\n0.1 0.2 0 send 1 c p 0 0 0 1 4 "
                  "tcp\n", ":5: field via: unknown transport 'tcp' (mpi, staging, shm, ipc");
    expect_fail_s(HEAD2 "0.1 0.2 0 send 1 c p 0 0 0 1 4 Shm\n", ":4: field via");
    expect_fail_s(HEAD2 GOOD, ":4: 12 fields where an event of version 2 has 13");
    expect_fail_s(HEAD2 "0.1 0.2 0 send 1 c p 0 0 0 1 4 shm 0\n",
                  ":4: 14 fields where an event of version 2 has 13");
    expect_fail_s(HEAD "0.1 0.2 0 send 1 c p 0 0 0 1 4 shm\n",
                  ":4: 13 fields where an event of version 1 has 12");
    expect_fail_s(HEAD2 "# columns t0 t1 rank kind peer coll phase step chunk lo hi nbytes\n",
                  ":4: the columns are");
    expect_fail_s(HEAD "# columns t0 t1 rank kind peer coll phase step chunk lo hi nbytes "
                  "via\n", ":4: the columns are");
}
END_TEST


/* The "# train" line: right after "# program", written only when given; 191
 * characters of printable ASCII with spaces, read back whole; a second one, an empty
 * one, one too long or with a character out of range refused, by the writer and by
 * the reader. */
START_TEST(test_train_line)
{
    char buf[2048], err[256], long_text[DTI_TRACE_TRAIN_MAX + 2];
    int n = dti_trace_format_header(buf, sizeof buf, 2, "train", TRAIN, -1);
    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(buf, "# dtlab-trace 3\n# ranks 2\n# program train\n# train " TRAIN
                          "\n# columns t0 t1 rank kind peer coll phase step chunk lo hi "
                          "nbytes via thread\n");
    /* without one, the header is what it always was */
    char plain[1024];
    ck_assert_int_gt(dti_trace_format_header(plain, sizeof plain, 2, "train", NULL, 5), 0);
    ck_assert_ptr_null(strstr(plain, "# train"));
    ck_assert_int_gt(dti_trace_format_header(buf, sizeof buf, 2, "train", "", 5), 0);
    ck_assert_str_eq(buf, plain);

    /* the longest text, all printable characters, round trip */
    for (int i = 0; i < DTI_TRACE_TRAIN_MAX; i++)
        long_text[i] = (char)(' ' + i % 95);
    long_text[DTI_TRACE_TRAIN_MAX] = '\0';
    ck_assert(dti_trace_train_ok(long_text));
    n = dti_trace_format_header(buf, sizeof buf, 2, "p", long_text, 0);
    ck_assert_int_gt(n, 0);
    dt_trace t;
    ck_assert_msg(dt_trace_read(write_file("train.trace", buf, (size_t)n), &t, err,
                                sizeof err) == 0, "read failed: %s", err);
    ck_assert_str_eq(t.train, long_text);
    ck_assert_uint_eq(t.n, 0);
    dt_trace_free(&t);
    ck_assert_str_eq(t.train, "");

    /* what the writer refuses */
    long_text[DTI_TRACE_TRAIN_MAX] = 'x';                /* 192 characters */
    long_text[DTI_TRACE_TRAIN_MAX + 1] = '\0';
    ck_assert(!dti_trace_train_ok(long_text));
    ck_assert(!dti_trace_train_ok(NULL));
    ck_assert(!dti_trace_train_ok(""));
    ck_assert(!dti_trace_train_ok("mode pp\tschedule 1f1b"));
    ck_assert(!dti_trace_train_ok("mode pp\n# ranks 9"));
    ck_assert(!dti_trace_train_ok("mode \x7f"));
    ck_assert(!dti_trace_train_ok("mode \xc3\xa9"));
    ck_assert(dti_trace_train_ok(" mode  pp ~ "));
    ck_assert_int_eq(dti_trace_format_header(buf, sizeof buf, 2, "p", long_text, -1), -1);
    ck_assert_int_eq(dti_trace_format_header(buf, sizeof buf, 2, "p", "a\nb", -1), -1);
    ck_assert_int_eq(dti_trace_format_header(buf, 60, 2, "p", TRAIN, -1), -1);

    /* what the reader refuses */
    expect_fail_s(HEAD "# train mode ddp\n# train mode pp\n" GOOD,
                  ":5: a second '# train' line");
    expect_fail_s(HEAD "# train mode ddp\n" GOOD "# train mode ddp\n",
                  ":6: a second '# train' line");
    expect_fail_s(HEAD "# train mode\x01pp\n" GOOD,
                  ":4: the train line 'mode?pp' should be 1..191 printable ASCII");
    expect_fail_s(HEAD "# train mode \xc3\xa9\n", ":4: the train line");
    expect_fail_s(HEAD "# train \n", ":4: the train line '' should be");
    snprintf(buf, sizeof buf, HEAD "# train %s\n", long_text);
    expect_fail_s(buf, ":4: the train line");

    /* a line that only starts like it is a comment; the text may come anywhere in the
     * header and hold spaces at its ends */
    const char *ok = "# dtlab-trace 1\n# trainer says hi\n# ranks 2\n# train  mode x \n"
                     GOOD;
    ck_assert_msg(dt_trace_read(write_file("train2.trace", ok, strlen(ok)), &t, err,
                                sizeof err) == 0, "read failed: %s", err);
    ck_assert_str_eq(t.train, " mode x ");
    dt_trace_free(&t);
}
END_TEST

START_TEST(test_truncated)
{
    char text[8192];
    size_t len = sample_text(text, sizeof text, NSAMPLE);
    expect_fail(text, len - 7, "truncated");                       /* mid-line */
    size_t cut = len - 1;                                          /* at a line break */
    while (text[cut - 1] != '\n')
        cut--;
    expect_fail(text, cut, "announces 10 events but 9 follow");

    /* Cut anywhere: never a crash, and never a success once "# events" was read. */
    size_t after_events = strstr(text, "# events") - text;
    for (size_t n = 0; n < len; n++) {
        const char *p = write_file("cut.trace", text, n);
        dt_trace t;
        char err[256];
        int rc = dt_trace_read(p, &t, err, sizeof err);
        if (rc == 0) {
            assert_valid(&t);
            ck_assert_msg(n <= after_events, "a file cut at byte %zu was accepted", n);
        }
        dt_trace_free(&t);
    }
}
END_TEST

/* Random byte changes: the reader returns 0 or -1 and never a trace that breaks the
 * invariants (issue #4 will fuzz it for real). */
START_TEST(test_mutations)
{
    char text[8192], copy[8192];
    size_t len = sample_text(text, sizeof text, -1);
    const char alphabet[] = "0123456789 -.\n#aekx\t\r\0\xff";
    unsigned s = 2024;
    int accepted = 0;
    for (int it = 0; it < 1500; it++) {
        memcpy(copy, text, len);
        int nflip = 1 + it % 4;
        for (int k = 0; k < nflip; k++) {
            s = s * 1103515245u + 12345u;
            size_t at = (s >> 8) % len;
            s = s * 1103515245u + 12345u;
            copy[at] = alphabet[(s >> 8) % (sizeof alphabet - 1)];
        }
        const char *p = write_file("mut.trace", copy, len);
        dt_trace t;
        char err[256];
        int rc = dt_trace_read(p, &t, err, sizeof err);
        ck_assert(rc == 0 || rc == -1);
        if (rc == 0) {
            assert_valid(&t);
            accepted++;
        } else {
            ck_assert(err[0] != '\0');
            ck_assert_ptr_null(t.ev);
        }
        dt_trace_free(&t);
    }
    ck_assert_int_gt(accepted, 0);      /* some changes (a digit for a digit) are valid */
}
END_TEST

/* ==== files that never end ==== */

/* A stream that never ends, as a FILE (fopencookie): `head` bytes, then `tail` again and
 * again (tail "" : random bytes, /dev/urandom's kind). It stops with an end of file
 * after CAP bytes only so that a reader that takes everything fails the test instead of
 * hanging it. given counts the bytes handed to stdio (which reads ahead a buffer). */
#define ENDLESS_CAP ((size_t)64 << 20)
typedef struct {
    const char *head, *tail;
    size_t hlen, tlen, given;
    unsigned rnd;
} endless;

static ssize_t endless_read(void *cookie, char *buf, size_t len)
{
    endless *e = cookie;
    size_t n = 0;
    for (; n < len && e->given < ENDLESS_CAP; n++, e->given++) {
        if (e->given < e->hlen) {
            buf[n] = e->head[e->given];
        } else if (e->tlen > 0) {
            buf[n] = e->tail[(e->given - e->hlen) % e->tlen];
        } else {
            e->rnd = e->rnd * 1103515245u + 12345u;
            buf[n] = (char)(e->rnd >> 16);
        }
    }
    return (ssize_t)n;
}

/* Reads the endless stream head, tail... : refused, with needle in the message, after
 * at most max_given bytes handed over. */
static void expect_endless(const char *head, const char *tail, size_t tlen,
                           const char *needle, size_t max_given)
{
    endless e = { head, tail, strlen(head), tlen, 0, 7 };
    FILE *f = fopencookie(&e, "r", (cookie_io_functions_t){ .read = endless_read });
    ck_assert_ptr_nonnull(f);
    dt_trace t;
    char err[256] = "";
    int rc = dt_trace_read_stream(f, "endless", &t, err, sizeof err);
    fclose(f);
    ck_assert_msg(rc == -1, "accepted an endless stream (%s...)", head);
    ck_assert_msg(strstr(err, needle) != NULL, "message \"%s\" lacks \"%s\"", err, needle);
    ck_assert_msg(e.given <= max_given, "the reader took %zu bytes to refuse \"%s\" (at "
                  "most %zu): it reads a line to its end before it looks", e.given, err,
                  max_given);
    ck_assert_ptr_null(t.ev);
}

/* /dev/zero, a line with no end, a comment with no end, random bytes: each refused
 * after one line's worth (stdio reads ahead a buffer: 64 KiB of slack). Endless
 * comments or blank lines: refused after a million lines, a few MB. */
START_TEST(test_endless)
{
    const size_t one_line = 64 << 10;
    expect_endless("", "\0", 1, ":1: a NUL byte", one_line);
    expect_endless("", "a", 1, ":1: not a dtlab trace", one_line);
    expect_endless("# dtlab-trace 1", "1", 1, ":1: not a dtlab trace", one_line);
    expect_endless(HEAD, "a", 1, ":4: line longer than 512", one_line);
    expect_endless(HEAD "# ", "a", 1, ":4: line longer than 512", one_line);
    expect_endless(HEAD "# program ", "a", 1, ":4: line longer than 512", one_line);
    expect_endless(HEAD GOOD "0.1 0.2", "\0", 1, ":5: a NUL byte", one_line);
    expect_endless("", "", 0, ":1: ", one_line);                /* random bytes */
    expect_endless(HEAD, "#\n", 2, "comment or blank lines", (size_t)8 << 20);
    expect_endless(HEAD, "\n", 1, "comment or blank lines", (size_t)8 << 20);
    expect_endless(HEAD, "\r\n", 2, "comment or blank lines", (size_t)8 << 20);

    /* the same by name: /dev/zero itself, and a 10 MB file of 'a' with no '\n' */
    char err[256];
    dt_trace t;
    ck_assert_int_eq(dt_trace_read("/dev/zero", &t, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "/dev/zero:1: a NUL byte") != NULL, "%s", err);
    size_t n = (size_t)10 << 20;
    char *a = malloc(n);
    ck_assert_ptr_nonnull(a);
    memset(a, 'a', n);
    expect_fail(a, n, ":1: not a dtlab trace");
    memcpy(a, HEAD, strlen(HEAD));
    expect_fail(a, n, ":4: line longer than 512");
    a[strlen(HEAD) + 600] = '\0';
    expect_fail(a, n, ":4: line longer than 512");      /* the limit comes first */
    a[strlen(HEAD) + 100] = '\0';
    expect_fail(a, n, ":4: a NUL byte");
    free(a);
}
END_TEST

/* ==== output files ==== */

static void expect_output(const char *path, int is_dir, int want, const char *needle)
{
    char err[512] = "";
    int rc = dt_output_check(path, is_dir, err, sizeof err);
    ck_assert_msg(rc == want, "dt_output_check(\"%s\", %d) = %d (%s), want %d", path,
                  is_dir, rc, err, want);
    ck_assert_msg(strstr(err, needle) != NULL, "dt_output_check(\"%s\"): \"%s\" lacks "
                  "\"%s\"", path, err, needle);
}

START_TEST(test_output_check)
{
    char p[400];
    /* names no file can have: usage errors */
    expect_output("", 0, -2, "empty");
    expect_output("", 1, -2, "empty");
    expect_output(path_of("x/"), 0, -2, "ending in '/'");
    /* what the file system refuses, naming the path */
    snprintf(p, sizeof p, "%s/no/such/x.png", dir);
    expect_output(p, 0, -1, "the folder");
    expect_output(p, 0, -1, p);
    expect_output(p, 1, -1, "does not exist");
    expect_output(dir, 0, -1, "folder, not a file");
    const char *file = write_file("a-file", "x", 1);
    expect_output(file, 1, -1, "file, not a folder");
    snprintf(p, sizeof p, "%s/a-file/x.png", dir);               /* a file as a folder */
    expect_output(p, 0, -1, "cannot write");
    /* what can be written; nothing is made */
    expect_output(path_of("new.png"), 0, 0, "");
    expect_output(path_of("new-dir"), 1, 0, "");
    expect_output(path_of("new-dir/"), 1, 0, "");
    expect_output(dir, 1, 0, "");
    expect_output(file, 0, 0, "");                               /* overwritten */
    ck_assert_int_ne(access(path_of("new.png"), F_OK), 0);
    ck_assert_int_ne(access(path_of("new-dir"), F_OK), 0);
    if (geteuid() != 0) {                  /* root may write anywhere */
        snprintf(p, sizeof p, "%s/ro", dir);
        ck_assert_int_eq(mkdir(p, 0555), 0);
        snprintf(p, sizeof p, "%s/ro/x.png", dir);
        expect_output(p, 0, -1, "cannot write");
    }
}
END_TEST

/* ==== Chrome JSON ==== */

/* A small, strict JSON checker (RFC 8259 grammar): returns the end of the value, or
 * NULL. Enough to prove the export parses without depending on python. */
static const char *js_value(const char *p, int depth);

static const char *js_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

static const char *js_string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    for (; *p != '"'; p++) {
        unsigned char c = (unsigned char)*p;
        if (c < 0x20)
            return NULL;                 /* raw control characters (and the end) */
        if (c == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!strchr("0123456789abcdefABCDEF", p[i]) || p[i] == '\0')
                        return NULL;
                p += 4;
            } else if (*p == '\0' || !strchr("\"\\/bfnrt", *p)) {
                return NULL;
            }
        }
    }
    return p + 1;
}

static const char *js_digits(const char *p)
{
    if (*p < '0' || *p > '9')
        return NULL;
    while (*p >= '0' && *p <= '9')
        p++;
    return p;
}

static const char *js_number(const char *p)
{
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if ((p = js_digits(p)) == NULL)
        return NULL;
    if (*p == '.' && (p = js_digits(p + 1)) == NULL)
        return NULL;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        p = js_digits(p);
    }
    return p;
}

static const char *js_value(const char *p, int depth)
{
    if (depth > 64)
        return NULL;
    p = js_ws(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = js_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                if ((p = js_string(js_ws(p))) == NULL)
                    return NULL;
                p = js_ws(p);
                if (*p++ != ':')
                    return NULL;
            }
            if ((p = js_value(p, depth + 1)) == NULL)
                return NULL;
            p = js_ws(p);
            if (*p == close)
                return p + 1;
            if (*p++ != ',')
                return NULL;
        }
    }
    if (*p == '"')
        return js_string(p);
    if (!strncmp(p, "true", 4) || !strncmp(p, "null", 4))
        return p + 4;
    if (!strncmp(p, "false", 5))
        return p + 5;
    return js_number(p);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return s;
}

static size_t count(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* Parses with our checker and, when python3 runs here, with Python's json module. */
static void assert_json(const char *path)
{
    size_t len;
    char *s = slurp(path, &len);
    ck_assert_uint_eq(strlen(s), len);                 /* no NUL inside */
    const char *end = js_value(s, 0);
    ck_assert_msg(end != NULL && *js_ws(end) == '\0', "%s is not valid JSON:\n%s", path, s);
    free(s);
    if (system("python3 -c pass >/dev/null 2>&1") == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd,
                 "python3 -c 'import json,sys; json.load(open(sys.argv[1]))' '%s'", path);
        ck_assert_msg(system(cmd) == 0, "python3 could not load %s", path);
    }
}

START_TEST(test_chrome)
{
    char text[8192], err[256];
    size_t len = sample_text(text, sizeof text, NSAMPLE);
    dt_trace t;
    ck_assert(dt_trace_read(write_file("c.trace", text, len), &t, err, sizeof err) == 0);
    const char *out = path_of("c.json");
    ck_assert_msg(dt_trace_write_chrome(&t, out, err, sizeof err) == 0, "%s", err);
    assert_json(out);

    char *s = slurp(out, &len);
    ck_assert_uint_eq(count(s, "\"ph\":\"X\""), NSAMPLE);
    ck_assert_uint_eq(count(s, "\"process_name\""), 3);
    ck_assert_uint_eq(count(s, "\"thread_name\""), 6);
    ck_assert_ptr_nonnull(strstr(s, "\"displayTimeUnit\":\"ms\""));
    ck_assert_ptr_nonnull(strstr(s, "\"otherData\":{\"program\":\"unit_trace\","
                                    "\"train\":\"" TRAIN "\""));
    /* sample[1]: send to 1 of chunk 3, at 153 us for 8 us, on the comm track */
    ck_assert_ptr_nonnull(strstr(s, "{\"name\":\"send->1 c3\",\"cat\":\"send\",\"ph\":\"X\","
                                    "\"ts\":153.000,\"dur\":8.000,\"pid\":0,\"tid\":0,"
                                    "\"args\":{\"peer\":1,\"chunk\":3,\"step\":0,\"lo\":75,"
                                    "\"hi\":100,\"nbytes\":100,\"coll\":\"allreduce_ring\","
                                    "\"phase\":\"reduce-scatter\",\"via\":\"shm\"}}"));
    /* events without a transport have no via; the version is the file's */
    ck_assert_uint_eq(count(s, "\"via\":"), 5);
    ck_assert_ptr_nonnull(strstr(s, "\"via\":\"ipc\""));
    ck_assert_ptr_nonnull(strstr(s, "\"dtlab_trace_version\":3}"));
    ck_assert_ptr_nonnull(strstr(s, "\"name\":\"recv<-0 c3\""));
    ck_assert_ptr_nonnull(strstr(s, "\"name\":\"reduce c2\",\"cat\":\"reduce\""));
    ck_assert_ptr_nonnull(strstr(s, "\"name\":\"compute forward\",\"cat\":\"compute\",\"ph\":\"X\","
                                    "\"ts\":1500000.000,\"dur\":750000.000,\"pid\":1,\"tid\":1"));
    free(s);
    dt_trace_free(&t);

    ck_assert_int_eq(dt_trace_write_chrome(&t, path_of("no/such/dir.json"), err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "cannot write"));
}
END_TEST

/* Names a file may hold ('"' and '\' are printable) and names only a program could put
 * in a dt_trace (control bytes, non-ASCII, no NUL): the JSON stays valid. */
START_TEST(test_chrome_escapes)
{
    const char *text = "# dtlab-trace 1\n# ranks 1\n# program a \"quoted\" \\ name\n"
                       "0 1 0 mark -1 q\"uote back\\slash 0 -1 0 0 0\n";
    dt_trace t;
    char err[256];
    ck_assert_msg(dt_trace_read(write_file("e.trace", text, strlen(text)), &t, err,
                                sizeof err) == 0, "%s", err);
    const char *out = path_of("e.json");
    ck_assert(dt_trace_write_chrome(&t, out, err, sizeof err) == 0);
    assert_json(out);
    dt_trace_free(&t);

    dt_event e[2];
    e[0] = ev(0, 1, 0, DT_EV_COMPUTE, -1, "ctl\x01\x1f\x7f", "\xc3\xa9t\xc3\xa9", 0, 0, 0, 0, 0);
    e[1] = ev(NAN, INFINITY, 0, DT_EV_COPY, -1, "a", "b", 0, 0, 0, 0, 0);
    memset(e[1].coll, 'x', sizeof e[1].coll);                    /* no NUL */
    memset(e[1].phase, '"', sizeof e[1].phase);
    dt_trace h = { .version = 1, .nranks = 1, .ev = e, .n = 2 };
    memset(h.program, '\\', sizeof h.program);
    ck_assert(dt_trace_write_chrome(&h, out, err, sizeof err) == 0);
    assert_json(out);

    dt_trace empty = { .version = 1, .nranks = 0 };               /* nothing at all */
    ck_assert(dt_trace_write_chrome(&empty, out, err, sizeof err) == 0);
    assert_json(out);
}
END_TEST

/* The thread column (version 3): the writer puts the number last, 0 for the main
 * thread; the reader reads it back, keeps 0 for every event of a version 1 or 2 file
 * (old traces still read, all main thread), and refuses a number out of 0..65535, a
 * line of the wrong width and the other versions' columns, each with its line. The
 * Chrome export gives a thread k > 0 its own two tracks, named. */
#define HEAD3 "# dtlab-trace 3\n# ranks 2\n# program p\n"

START_TEST(test_thread)
{
    char buf[512], err[256];
    dt_event e = ev(0, 1, 0, DT_EV_COMPUTE, -1, "train", "forward", 1, 0, 2, 3, 0);
    e.thread = 3;
    ck_assert_int_gt(dti_trace_format_event(&e, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, "0.000000000 1.000000000 0 compute -1 train forward 1 0 2 3 0 - 3\n");
    e.thread = -1;
    ck_assert_int_eq(dti_trace_format_event(&e, buf, sizeof buf), -1);
    e.thread = DTI_TRACE_THREAD_MAX + 1;
    ck_assert_int_eq(dti_trace_format_event(&e, buf, sizeof buf), -1);

    const char *v3 = HEAD3 "# columns t0 t1 rank kind peer coll phase step chunk lo hi "
                     "nbytes via thread\n"
                     "0.1 0.2 0 compute -1 train forward 1 0 0 1 0 - 1\n"
                     "0.1 0.3 0 compute -1 train forward 1 0 1 2 0 - 2\n"
                     "0.15 0.2 0 mark -1 dp-threads lock-wait 1 1 1 2 0 - 2\n"
                     "0.3 0.4 0 mark -1 dp-threads gather 1 1 0 9 36 - 0\n"
                     "0.5 0.6 1 send 0 c p 0 0 0 1 4 shm 65535\n";
    const int want[] = { 1, 2, 2, 0, 65535 };
    dt_trace t;
    ck_assert_msg(dt_trace_read(write_file("v3.trace", v3, strlen(v3)), &t, err,
                                sizeof err) == 0, "read failed: %s", err);
    assert_valid(&t);
    ck_assert_int_eq(t.version, 3);
    ck_assert_uint_eq(t.n, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(t.ev[i].thread, want[i]);
    ck_assert_int_eq(t.ev[4].via, 3);

    /* Chrome: rank 0's threads 1 and 2 get tids 2..5, rank 1's thread 65535 two more */
    const char *out = path_of("threads.json");
    ck_assert_msg(dt_trace_write_chrome(&t, out, err, sizeof err) == 0, "%s", err);
    assert_json(out);
    size_t len;
    char *js = slurp(out, &len);
    ck_assert_uint_eq(count(js, "\"thread_name\""), 2 * 2 + 2 * 3);
    ck_assert_ptr_nonnull(strstr(js, "\"tid\":5,\"args\":{\"name\":\"thread 2 compute\"}"));
    ck_assert_ptr_nonnull(strstr(js, "\"pid\":0,\"tid\":5,\"args\":{\"peer\":-1,\"chunk\":1"));
    ck_assert_ptr_nonnull(strstr(js, "\"pid\":1,\"tid\":131070,"));
    free(js);
    dt_trace_free(&t);

    /* a version 2 file: every event of the main thread */
    const char *v2 = HEAD2 "0.1 0.2 0 compute -1 train forward 1 0 0 1 0 -\n";
    ck_assert_msg(dt_trace_read(write_file("v2t.trace", v2, strlen(v2)), &t, err,
                                sizeof err) == 0, "read failed: %s", err);
    ck_assert_int_eq(t.version, 2);
    ck_assert_int_eq(t.ev[0].thread, 0);
    dt_trace_free(&t);

    expect_fail_s(HEAD3 "0.1 0.2 0 send 1 c p 0 0 0 1 4 shm\n",
                  ":4: 13 fields where an event of version 3 has 14 (t0 t1 rank kind peer "
                  "coll phase step chunk lo hi nbytes via thread)");
    expect_fail_s(HEAD3 "0.1 0.2 0 send 1 c p 0 0 0 1 4 shm 65536\n",
                  ":4: field thread: 65536 is out of range (0..65535)");
    expect_fail_s(HEAD3 "0.1 0.2 0 send 1 c p 0 0 0 1 4 shm -1\n",
                  ":4: field thread: -1 is out of range");
    expect_fail_s(HEAD3 "0.1 0.2 0 send 1 c p 0 0 0 1 4 shm t1\n",
                  ":4: field thread: 't1' is not an integer");
    expect_fail_s(HEAD3 "# columns t0 t1 rank kind peer coll phase step chunk lo hi nbytes "
                  "via\n", ":4: the columns are");
    expect_fail_s(HEAD2 "# columns t0 t1 rank kind peer coll phase step chunk lo hi nbytes "
                  "via thread\n", ":4: the columns are");
}
END_TEST

/* ==== recording a copy outside the collectives' context ==== */

/* The calling thread's context, as the next event of kind would take it. */
static dt_event context_of(dt_event_kind kind)
{
    dt_event e;
    memset(&e, 0, sizeof e);
    e.kind = kind;
    dti_trace_context(&e);
    return e;
}

/* A collective's context is set (a ring's step 2, sending chunk 1 [10, 20), receiving
 * chunk 3 [30, 40), on thread 4); copies are recorded outside it with a coll and phase
 * of their own, and one staging copy with it. Recorded before the trace is opened and
 * while it is paused: nothing. The file must hold exactly the four events recorded
 * while on, each with its own kind, coll, phase, bytes, the thread, and -1 / 0 0 for
 * step, chunk and range where the copy is the context's outsider; the context after
 * them as before. */
START_TEST(test_add_named)
{
    char err[256];
    const char *path = path_of("named.trace");
    /* MPI_Init has hwloc load its PCI plugin, which leaks (the Makefile's
     * HWLOC_COMPONENTS): valgrind would blame this suite. One rank needs no PCI. */
    setenv("HWLOC_COMPONENTS", "-pci", 0);
    ck_assert_int_eq(MPI_Init(NULL, NULL), MPI_SUCCESS);
    dti_trace_add_named(DT_EV_H2D, "memcpy", "tensor", 1, 0, 0);   /* not open: off */
    dt_trace_open(path, "unit_trace");
    ck_assert_int_eq(dt_trace_enabled(), 1);
    dt_trace_phase("allreduce_ring", "reduce-scatter");
    dt_trace_step(2, 1, 10, 20, 3, 30, 40);
    dt_trace_thread(4);
    dt_event send0 = context_of(DT_EV_D2H), recv0 = context_of(DT_EV_H2D);

    double t = dt_trace_now();
    dti_trace_add_named(DT_EV_D2H, "memcpy", "tensor", 4096, t, t + 1e-6);
    dti_trace_add_named(DT_EV_H2D, "memcpy", "batch", 256, t + 2e-6, t + 3e-6);
    dt_trace_add(DT_EV_D2H, -1, 100, t + 4e-6, t + 5e-6);      /* a staging copy */
    dt_trace_pause(1);
    ck_assert_int_eq(dt_trace_enabled(), 0);
    dti_trace_add_named(DT_EV_D2H, "memcpy", "number", 4, t + 6e-6, t + 7e-6);
    dt_trace_pause(0);
    dti_trace_add_named(DT_EV_D2H, "memcpy", "number", 8, t + 8e-6, t + 9e-6);
    dt_event send1 = context_of(DT_EV_D2H), recv1 = context_of(DT_EV_H2D);
    assert_same_context(&send1, &send0);
    assert_same_context(&recv1, &recv0);
    ck_assert_str_eq(send1.coll, "allreduce_ring");
    ck_assert_int_eq(send1.chunk, 1);
    ck_assert_int_eq(recv1.chunk, 3);
    ck_assert_int_eq(dti_trace_close(), 0);
    ck_assert_int_eq(MPI_Finalize(), MPI_SUCCESS);

    dt_trace tr;
    ck_assert_msg(dt_trace_read(path, &tr, err, sizeof err) == 0, "read failed: %s", err);
    assert_valid(&tr);
    ck_assert_uint_eq(tr.n, 4);
    const struct {
        dt_event_kind kind;
        const char *coll, *phase;
        long long nbytes;
    } want[4] = {
        { DT_EV_D2H, "memcpy", "tensor", 4096 }, { DT_EV_H2D, "memcpy", "batch", 256 },
        { DT_EV_D2H, "allreduce_ring", "reduce-scatter", 100 },
        { DT_EV_D2H, "memcpy", "number", 8 },
    };
    for (int i = 0; i < 4; i++) {
        const dt_event *e = &tr.ev[i];
        ck_assert_int_eq(e->kind, want[i].kind);
        ck_assert_str_eq(e->coll, want[i].coll);
        ck_assert_str_eq(e->phase, want[i].phase);
        ck_assert_int_eq(e->nbytes, want[i].nbytes);
        ck_assert_int_eq(e->rank, 0);
        ck_assert_int_eq(e->peer, -1);
        ck_assert_int_eq(e->via, 0);
        ck_assert_int_eq(e->thread, 4);
        int staged = i == 2;                /* the context's: step 2, chunk 1 [10, 20) */
        ck_assert_int_eq(e->step, staged ? 2 : -1);
        ck_assert_int_eq(e->chunk, staged ? 1 : -1);
        ck_assert_int_eq(e->lo, staged ? 10 : 0);
        ck_assert_int_eq(e->hi, staged ? 20 : 0);
        ck_assert(e->t1 >= e->t0 && e->t1 - e->t0 < 2e-6);
    }
    dt_trace_free(&tr);
}
END_TEST

int main(void)
{

    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("format");
    /* Once, in the parent process: the folder goes even when a test fails. */
    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_roundtrip);
    tcase_add_test(tc, test_lenient);
    tcase_add_test(tc, test_train_line);
    tcase_add_test(tc, test_kind_names);
    tcase_add_test(tc, test_format_refuses);
    tcase_add_test(tc, test_sort_stable);
    tcase_add_test(tc, test_bad_files);
    tcase_add_test(tc, test_bad_events);
    tcase_add_test(tc, test_via);
    tcase_add_test(tc, test_thread);
    tcase_add_test(tc, test_truncated);
    tcase_add_test(tc, test_mutations);
    tcase_add_test(tc, test_endless);
    tcase_add_test(tc, test_output_check);
    tcase_add_test(tc, test_chrome);
    tcase_add_test(tc, test_chrome_escapes);
    suite_add_tcase(s, tc);
    TCase *rec = tcase_create("record");
    tcase_add_unchecked_fixture(rec, setup, teardown);
    tcase_set_timeout(rec, 60);
    tcase_add_test(rec, test_add_named);
    suite_add_tcase(s, rec);
    return unit_run(s);
}
