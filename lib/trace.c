/* Traces, the recording side: each rank keeps its events in memory while it runs, and
 * dt_finalize merges them into one text file (format in trace.h; the line format itself
 * lives in trace_read.c, shared with the reader).
 *
 *   dt_init ── dt_trace_open: rank 0's clock reading, shared  (one common time zero)
 *   running ── dt_trace_add(_via): append to this rank's array (under a mutex);
 *              nothing while paused (dt_trace_pause), which the merge ignores
 *   dt_finalize ── dti_trace_close:
 *        every rank: sort its events by t0, format them as text
 *        MPI_Gather of (text bytes, events, dropped) to rank 0
 *        rank 0: opens FILE.tmp, writes the header (with "# events N", "# train" when
 *                dt_trace_train was called, and a "# note" for a rank that hit the
 *                event limit), tells everyone whether it could (dt_init refused a
 *                path it could not write before the run: this fails only when
 *                something changed since, such as its folder removed)
 *        rank r = 0, 1, 2, ...: its text goes to rank 0, which appends it
 *        rank 0: flushes, closes and renames FILE.tmp to FILE (a reader never sees
 *                half a file), then tells everyone whether the trace was written
 *
 * FILE.tmp and the rename are for a file. A FILE that exists and is not one (a device
 * such as /dev/null or /dev/full, a pipe, a terminal) is written directly: renaming
 * over it would replace the device with a file, for every program on the machine.
 *
 * A trace that was asked for and not written fails the run: every rank finishes MPI
 * and exits with status 1, after one line from rank 0 that names the file and the
 * reason (strerror of the call that failed), as train does for --dump.
 *
 * The texts travel one rank at a time, with plain MPI point-to-point calls (the merge
 * is not itself traced): rank 0 needs room for one rank's text only, and no count or
 * displacement has to hold the total in an int, as MPI_Gatherv's would.
 *
 * Threads: a DDP communication thread records while the main thread computes, so the
 * array is shared under a mutex, while the context (which collective, phase, step and
 * chunk the next events belong to, and the thread's number, dt_trace_thread) is per
 * thread. */
#include "trace.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core.h"
#include "errors.h"
#include "internal.h"
#include "p2p.h"

/* A rank stops recording after this many events (128 MiB of them) and says so at the
 * end, rather than exhausting memory in a long run. */
#define TRACE_MAX_EVENTS (1 << 20)
#define MERGE_TAG 1

static struct {
    int opened;
    _Atomic int on;          /* same value on every rank (rank 0's choice); atomic
                                because close turns it off while threads may look */
    _Atomic int paused;      /* dt_trace_pause: on, but recording nothing */
    int rank, size;
    double start;            /* MPI_Wtime() of the common time zero */
    char *path;              /* owned; where rank 0 writes */
    char program[64];
    char train[DTI_TRACE_TRAIN_MAX + 1];   /* the "# train" text, "" for none */
    pthread_mutex_t mu;      /* guards ev, n, cap, dropped */
    dt_event *ev;
    size_t n, cap;
    long long dropped;
} tr = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* ==== one time zero for every rank ====
 *
 * Events of different ranks must line up in the file. Reading each rank's clock right
 * after a barrier is not enough: with more ranks than cores, ranks leave a barrier
 * milliseconds apart. Instead rank 0 reads its clock once and every rank expresses
 * that instant on its own clock. On rank 0's host every process reads the same clock
 * (MPICH's MPI_Wtime is the system's), so the instant is simply rank 0's reading. A rank
 * on another host estimates the offset between its clock and rank 0's with a few round
 * trips, keeping the fastest (Cristian's method): rank 0's reading t0, taken between the
 * remote rank's send at a and receive at b, is taken to correspond to (a + b) / 2,
 * within half the round trip. */
#define SYNC_TRIPS 8

static double common_start(void)
{
    char host[MPI_MAX_PROCESSOR_NAME] = "", host0[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    DT_CHECK_MPI(MPI_Get_processor_name(host, &len));
    memcpy(host0, host, sizeof host);
    DT_CHECK_MPI(MPI_Bcast(host0, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0, MPI_COMM_WORLD));
    int remote = strcmp(host, host0) != 0, *remotes = NULL;
    if (tr.rank == 0) {
        remotes = calloc((size_t)tr.size, sizeof *remotes);
        DT_REQUIRE(remotes != NULL, "out of memory");
    }
    DT_CHECK_MPI(MPI_Gather(&remote, 1, MPI_INT, remotes, 1, MPI_INT, 0, MPI_COMM_WORLD));

    double offset = 0;                  /* rank 0's clock minus this rank's */
    if (tr.rank == 0) {
        for (int r = 1; r < tr.size; r++)
            for (int k = 0; remotes[r] && k < SYNC_TRIPS; k++) {
                DT_CHECK_MPI(MPI_Recv(NULL, 0, MPI_BYTE, r, 1, MPI_COMM_WORLD,
                                      MPI_STATUS_IGNORE));
                double t0 = MPI_Wtime();
                DT_CHECK_MPI(MPI_Send(&t0, 1, MPI_DOUBLE, r, 2, MPI_COMM_WORLD));
            }
        free(remotes);
    } else if (remote) {
        double best = INFINITY;
        for (int k = 0; k < SYNC_TRIPS; k++) {
            double a = MPI_Wtime(), t0;
            DT_CHECK_MPI(MPI_Send(NULL, 0, MPI_BYTE, 0, 1, MPI_COMM_WORLD));
            DT_CHECK_MPI(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
            double b = MPI_Wtime();
            if (b - a < best) {
                best = b - a;
                offset = t0 - (a + b) / 2;
            }
        }
    }
    DT_CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    double start = MPI_Wtime();         /* rank 0's time zero, on rank 0's clock */
    DT_CHECK_MPI(MPI_Bcast(&start, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return start - offset;              /* the same instant, on this rank's clock */
}

/* ==== recording ==== */

void dt_trace_open(const char *path, const char *program)
{
    DT_REQUIRE(!tr.opened, "dt_trace_open called twice (dt_init does it once)");
    tr.opened = 1;
    DT_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &tr.rank));
    DT_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &tr.size));

    /* Rank 0 writes the file, so its path decides for all: every rank then agrees on
     * whether tracing is on, and dti_trace_close is collective on all or none. */
    int on = path != NULL;
    DT_CHECK_MPI(MPI_Bcast(&on, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (tr.rank == 0 && on) {
        tr.path = strdup(path);
        DT_REQUIRE(tr.path != NULL, "out of memory for the trace path");
    }

    /* The program name goes into a header line: printable, no spaces, 63 at most. */
    if (program == NULL || program[0] == '\0')
        program = "-";
    size_t i = 0;
    for (; program[i] && i < sizeof tr.program - 1; i++)
        tr.program[i] = (program[i] > ' ' && program[i] <= '~') ? program[i] : '_';
    tr.program[i] = '\0';

    tr.start = on ? common_start() : MPI_Wtime();
    tr.on = on;
}

int dt_trace_train(const char *text)
{
    if (!dti_trace_train_ok(text))
        return -1;
    memcpy(tr.train, text, strlen(text) + 1);
    return 0;
}

int dt_trace_enabled(void)
{
    return atomic_load_explicit(&tr.on, memory_order_relaxed) &&
           !atomic_load_explicit(&tr.paused, memory_order_relaxed);
}

void dt_trace_pause(int paused)
{
    tr.paused = paused != 0;
}

double dt_trace_now(void)
{
    return MPI_Wtime() - tr.start;
}

void dt_trace_call(const char *coll, size_t count, size_t esize)
{
    if (!dt_trace_enabled())
        return;
    dt_trace_phase(coll, "call");
    dt_trace_step(-1, -1, 0, 0, -1, 0, count);
    double t = dt_trace_now();
    dt_trace_add(DT_EV_MARK, -1, count * esize, t, t);
}

void dt_trace_add(dt_event_kind kind, int peer, size_t nbytes, double t0, double t1)
{
    dt_trace_add_via(kind, peer, nbytes, t0, t1, NULL);
}

/* The checks every recorded event passes, and its own fields: times, rank, peer, kind
 * and bytes, no transport. The context's fields are the caller's to fill. */
static void event_start(dt_event *e, dt_event_kind kind, int peer, size_t nbytes,
                        double t0, double t1)
{
    DT_REQUIRE((unsigned)kind < DT_EV_NKINDS, "dt_trace_add: bad event kind %d", (int)kind);
    DT_REQUIRE(isfinite(t0) && isfinite(t1), "dt_trace_add: times %g and %g are not "
               "finite (take them with dt_trace_now)", t0, t1);
    memset(e, 0, sizeof *e);
    e->t0 = t0;
    e->t1 = t1 < t0 ? t0 : t1;          /* a clock never runs back; keep the file valid */
    e->rank = tr.rank;
    e->peer = peer >= 0 && peer < tr.size ? peer : -1;  /* MPI_ANY_SOURCE, PROC_NULL */
    e->kind = kind;
    e->nbytes = nbytes > (size_t)LLONG_MAX ? LLONG_MAX : (long long)nbytes;
}

/* Appends e to this rank's events, or counts it dropped past the limit. */
static void append(const dt_event *e)
{
    pthread_mutex_lock(&tr.mu);
    if (tr.n == tr.cap && tr.cap < TRACE_MAX_EVENTS) {
        size_t ncap = tr.cap ? 2 * tr.cap : 4096;
        dt_event *p = realloc(tr.ev, ncap * sizeof *p);
        DT_REQUIRE(p != NULL, "out of memory recording the trace (%zu events)", tr.n);
        tr.ev = p;
        tr.cap = ncap;
    }
    if (tr.n < tr.cap)
        tr.ev[tr.n++] = *e;
    else
        tr.dropped++;
    pthread_mutex_unlock(&tr.mu);
}

void dt_trace_add_via(dt_event_kind kind, int peer, size_t nbytes, double t0, double t1,
                      const char *via)
{
    if (!dt_trace_enabled())
        return;
    dt_event e;
    event_start(&e, kind, peer, nbytes, t0, t1);
    int v = dt_trace_via_find(via);     /* the event keeps the index, not the pointer */
    DT_REQUIRE(v >= 0, "dt_trace_add_via: unknown transport '%.40s' (mpi, staging, shm "
               "or ipc; NULL for none)", via != NULL ? via : "");
    e.via = (unsigned char)v;
    dti_trace_context(&e);              /* collective, phase, step, chunk, thread */
    append(&e);
}

void dti_trace_add_named(dt_event_kind kind, const char *coll, const char *phase,
                         size_t nbytes, double t0, double t1)
{
    if (!dt_trace_enabled())
        return;
    DT_REQUIRE(dti_trace_name_ok(coll) && dti_trace_name_ok(phase), "dti_trace_add_named:"
               " coll '%.40s' and phase '%.40s' must be 1..%d printable characters "
               "without spaces", coll ? coll : "", phase ? phase : "", DTI_TRACE_NAME_MAX);
    dt_event e;
    event_start(&e, kind, -1, nbytes, t0, t1);
    dti_trace_context(&e);              /* for the thread's number; the rest is ours: */
    snprintf(e.coll, sizeof e.coll, "%s", coll);
    snprintf(e.phase, sizeof e.phase, "%s", phase);
    e.step = e.chunk = -1;              /* no collective's step or chunk */
    e.lo = e.hi = 0;
    append(&e);
}

/* ==== merging at dt_finalize ==== */

/* This rank's events as text lines, sorted by t0. Returns a malloc'd buffer (owned by
 * the caller) and its length in *len. */
static char *format_events(const dt_event *ev, size_t n, size_t *len)
{
    size_t cap = n * 96 + DTI_TRACE_LINE_MAX + 2, used = 0;
    char *text = malloc(cap);
    DT_REQUIRE(text != NULL, "out of memory formatting the trace (%zu events)", n);
    for (size_t i = 0; i < n; i++) {
        if (cap - used < DTI_TRACE_LINE_MAX + 2) {
            cap *= 2;
            text = realloc(text, cap);
            DT_REQUIRE(text != NULL, "out of memory formatting the trace (%zu events)", n);
        }
        int k = dti_trace_format_event(&ev[i], text + used, cap - used);
        DT_REQUIRE(k > 0, "trace event %zu cannot be written (kind %d, t0 %g)", i,
                   (int)ev[i].kind, ev[i].t0);
        used += (size_t)k;
    }
    *len = used;
    return text;
}

/* Rank 0's one line when the trace cannot be written: the path asked for, the file
 * written first when that is another (FILE.tmp), and the reason. */
static void say_failed(const char *out, int err)
{
    int direct = strcmp(out, tr.path) == 0;
    fprintf(stderr, "dtlab: cannot write the trace to %s: %s%s%s; no trace written\n",
            tr.path, direct ? "" : out, direct ? "" : ": ", strerror(err));
}

/* Rank 0: opens out (FILE.tmp, or FILE itself when it is a device) and writes the
 * header. Returns the stream, or NULL after saying why. */
static FILE *open_output(const char *out, long long nevents, const long long *all)
{
    char head[4 * DTI_TRACE_LINE_MAX];
    int k = dti_trace_format_header(head, sizeof head, tr.size, tr.program, tr.train,
                                    nevents);
    DT_REQUIRE(k > 0, "the trace header cannot be written");
    FILE *f = fopen(out, "w");
    if (f != NULL && fwrite(head, 1, (size_t)k, f) == (size_t)k) {
        for (int r = 0; r < tr.size; r++)       /* a comment line: readers skip it */
            if (all[3 * r + 2] > 0)
                fprintf(f, "# note rank %d dropped %lld events after the first %d\n", r,
                        all[3 * r + 2], TRACE_MAX_EVENTS);
        return f;
    }
    int e = errno;
    if (f != NULL) {
        fclose(f);
        if (strcmp(out, tr.path) != 0)
            remove(out);
    }
    say_failed(out, e);
    return NULL;
}

/* Rank 0: appends len bytes; the first failure's errno stays in *err (0: none yet). */
static void put(FILE *f, const char *text, size_t len, int *err)
{
    if (*err == 0 && len > 0 && fwrite(text, 1, len, f) != len)
        *err = errno ? errno : EIO;
}

/* Rank 0: flushes and closes f, then renames out to the trace's path unless they are
 * the same. Returns 1 when the trace is in place, or 0 after one line saying which
 * call failed and why; a failed FILE.tmp is removed. */
static int finish_output(FILE *f, const char *out, int err)
{
    if (err == 0 && fflush(f) != 0)
        err = errno;
    if (err == 0 && ferror(f))
        err = EIO;
    if (fclose(f) != 0 && err == 0)
        err = errno;
    int direct = strcmp(out, tr.path) == 0;
    if (err != 0) {
        say_failed(out, err);
    } else if (!direct && rename(out, tr.path) != 0) {
        err = errno;
        fprintf(stderr, "dtlab: cannot rename %s to %s: %s; no trace written\n", out,
                tr.path, strerror(err));
    }
    if (err != 0 && !direct)
        remove(out);
    return err == 0;
}

void dti_trace_discard(void)
{
    pthread_mutex_lock(&tr.mu);
    tr.on = 0;
    free(tr.ev);
    tr.ev = NULL;
    tr.n = tr.cap = 0;
    tr.dropped = 0;
    pthread_mutex_unlock(&tr.mu);
}

int dti_trace_close(void)
{
    if (!tr.opened)
        return 0;
    tr.opened = 0;
    if (!tr.on)
        return 0;                     /* off on every rank alike: nothing collective */

    pthread_mutex_lock(&tr.mu);
    tr.on = 0;                        /* the merge itself is not recorded */
    dt_event *ev = tr.ev;
    size_t n = tr.n;
    long long dropped = tr.dropped;
    tr.ev = NULL;
    tr.n = tr.cap = 0;
    tr.dropped = 0;
    pthread_mutex_unlock(&tr.mu);

    dti_trace_sort(ev, n);            /* two threads appended: put t0 in order */
    size_t len = 0;
    char *text = format_events(ev, n, &len);
    free(ev);
    DT_REQUIRE(len <= INT_MAX, "rank %d's trace text is %zu bytes, more than one MPI "
               "message can carry (%d); trace a shorter run", tr.rank, len, INT_MAX);

    MPI_Comm comm;                    /* our own tag space for the merge */
    DT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    long long mine[3] = { (long long)len, (long long)n, dropped }, *all = NULL;
    if (tr.rank == 0) {
        all = malloc(3 * (size_t)tr.size * sizeof *all);
        DT_REQUIRE(all != NULL, "out of memory merging the trace");
    }
    DT_CHECK_MPI(MPI_Gather(mine, 3, MPI_LONG_LONG, all, 3, MPI_LONG_LONG, 0, comm));

    FILE *f = NULL;
    char *out = NULL;
    long long total = 0;
    int ok = 1;
    if (tr.rank == 0) {
        for (int r = 0; r < tr.size; r++)
            total += all[3 * r + 1];
        struct stat st;
        int device = stat(tr.path, &st) == 0 && !S_ISREG(st.st_mode);
        size_t plen = strlen(tr.path) + 5;
        out = malloc(plen);
        DT_REQUIRE(out != NULL, "out of memory for the trace path");
        snprintf(out, plen, device ? "%s" : "%s.tmp", tr.path);
        f = open_output(out, total, all);
        ok = f != NULL;
    }
    /* Nobody sends when rank 0 has nowhere to put it. */
    DT_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));

    if (ok && tr.rank != 0 && len > 0) {
        MPI_Request req;
        DT_CHECK_MPI(MPI_Isend(text, (int)len, MPI_BYTE, 0, MERGE_TAG, comm, &req));
        dti_p2p_wait(1, &req);
    }
    if (ok && tr.rank == 0) {
        int err = 0;
        put(f, text, len, &err);
        for (int r = 1; r < tr.size; r++) {
            size_t rlen = (size_t)all[3 * r];
            if (rlen == 0)
                continue;
            char *buf = malloc(rlen);
            DT_REQUIRE(buf != NULL, "out of memory receiving rank %d's trace (%zu bytes)",
                       r, rlen);
            MPI_Request req;
            DT_CHECK_MPI(MPI_Irecv(buf, (int)rlen, MPI_BYTE, r, MERGE_TAG, comm, &req));
            dti_p2p_wait(1, &req);            /* received even after a failed write */
            put(f, buf, rlen, &err);
            free(buf);
        }
        ok = finish_output(f, out, err);
        if (ok) {
            printf("dtlab: trace of %lld event%s from %d rank%s written to %s\n", total,
                   total == 1 ? "" : "s", tr.size, tr.size == 1 ? "" : "s", tr.path);
            fflush(stdout);
        }
    }
    DT_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, comm));
    if (tr.rank == 0) {
        for (int r = 0; r < tr.size; r++)
            if (all[3 * r + 2] > 0)
                fprintf(stderr, "dtlab: rank %d recorded its first %d events and dropped "
                        "%lld more; the trace is incomplete\n", r, TRACE_MAX_EVENTS,
                        all[3 * r + 2]);
    }
    DT_CHECK_MPI(MPI_Comm_free(&comm));
    free(all);
    free(out);
    free(text);
    free(tr.path);
    tr.path = NULL;
    return !ok;                       /* every rank alike: rank 0's verdict */
}
