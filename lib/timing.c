/* How far a program's timings can be trusted (see prog.h, "timings and their noise").
 *
 * A lesson that times two algorithms and says which wins is only right when the
 * difference is larger than the noise. Three things make the noise on a small shared
 * machine: ranks that outnumber the cores (they take turns, and every message then costs
 * a trip through the scheduler instead of a few microseconds), other work on the machine
 * (its load average), and what both leave behind: a spread between repeated runs. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "prog.h"
#include "core.h"
#include "errors.h"
#include "p2p.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The value at fraction q of n sorted values, between neighbours (q = 0.5: the median). */
static double at(const double *t, int n, double q)
{
    double pos = q * (n - 1);
    int i = (int)pos;
    return i + 1 < n ? t[i] + (pos - i) * (t[i + 1] - t[i]) : t[n - 1];
}

dt_timing dt_timing_of(const double *t, int n)
{
    dt_timing r = {0, 0, 0, n};
    if (n < 1)
        return r;
    double *s = malloc(sizeof(double) * (size_t)n);
    DT_REQUIRE(s != NULL, "out of memory");
    memcpy(s, t, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    r.median = at(s, n, 0.5);
    r.lo = at(s, n, 0.25);
    r.hi = at(s, n, 0.75);
    free(s);
    return r;
}

double dt_timing_spread(dt_timing t)
{
    return t.median > 0 ? (t.hi - t.lo) / (2 * t.median) : 0;
}

int dt_timing_compare(dt_timing a, dt_timing b)
{
    double ha = (a.hi - a.lo) / 2, hb = (b.hi - b.lo) / 2;
    return a.median - ha > b.median + hb ? 1 : b.median - hb > a.median + ha ? -1 : 0;
}

dt_timing dt_time_runs(void (*fn)(void *ctx), void *ctx, int iters, MPI_Comm comm)
{
    DT_REQUIRE(iters >= 1, "dt_time_runs: iters is %d; it must be 1 or more", iters);
    double *t = malloc(sizeof(double) * (size_t)iters);
    DT_REQUIRE(t != NULL, "out of memory");
    fn(ctx);                                    /* warm-up: first-touch, staging buffers */
    for (int i = 0; i < iters; i++) {
        dt_barrier(comm);
        double t0 = MPI_Wtime();
        fn(ctx);
        t[i] = MPI_Wtime() - t0;
    }
    MPI_Request req;                            /* each run as long as its slowest rank */
    DT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, t, iters, MPI_DOUBLE, MPI_MAX, comm, &req));
    dt_waitall(1, &req);
    dt_timing r = dt_timing_of(t, iters);
    free(t);
    return r;
}

/* The cores this process may run on (its affinity mask, which containers and mpiexec's
 * binding narrow), else the ones online. */
static int usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

dt_machine dt_machine_now(void)
{
    /* each host's figures, then the most crowded host's (the one a ring waits for) */
    double mine[3] = {dt_local_size(), usable_cores(), -1};
    double load[1];
    if (getloadavg(load, 1) == 1)
        mine[2] = load[0];
    double crowd = mine[0] / mine[1], worst = 0;
    MPI_Request req;
    DT_CHECK_MPI(MPI_Iallreduce(&crowd, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    struct { double v; int rank; } me = {crowd, dt_rank()}, who;
    DT_CHECK_MPI(MPI_Iallreduce(&me, &who, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    DT_CHECK_MPI(MPI_Ibcast(mine, 3, MPI_DOUBLE, who.rank, MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    dt_machine m = {(int)mine[0], (int)mine[1], mine[2], 0, 0};
    m.crowded = m.ranks > m.cores;
    /* this job's own ranks are in the load average too (those running, up to a core
     * each): the rest is someone else's work */
    int own = m.ranks < m.cores ? m.ranks : m.cores;
    m.loaded = m.load >= 0 && m.load - own > 0.5 * m.cores;
    return m;
}

/* Appends to buf (of size len, holding *used) what fmt says, cut short if it is full. */
__attribute__((format(printf, 4, 5)))
static void add(char *buf, size_t len, size_t *used, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = *used < len ? vsnprintf(buf + *used, len - *used, fmt, ap) : 0;
    va_end(ap);
    if (n > 0)
        *used = *used + (size_t)n < len ? *used + (size_t)n : len - 1;
}

/* Prints text from rank 0 folded into lines of at most width columns, at spaces. */
static void print_folded(const char *text, int width)
{
    const char *p = text;
    while (*p) {
        while (*p == ' ')
            p++;
        const char *nl = strchr(p, '\n');      /* a line break in effect is kept */
        int n = nl ? (int)(nl - p) : (int)strlen(p), cut = n;
        if (n > width) {
            cut = width;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0)                          /* one word longer than a line */
                for (cut = width; p[cut] && p[cut] != ' '; cut++) {}
        }
        dt_printf0("%.*s\n", cut, p);
        p += cut;
        if (*p == '\n')
            p++;
    }
}

int dt_timing_note(double spread, const char *effect)
{
    dt_machine m = dt_machine_now();
    int noisy = spread > DT_NOISY;
    if (!m.crowded && !m.loaded && !noisy)
        return 0;
    char text[4096];
    size_t used = 0, len = sizeof text;
    text[0] = '\0';
    add(text, len, &used, "Note on these timings:");
    if (m.crowded)
        add(text, len, &used, " %d ranks share %d core%s on this host, so they take turns: "
            "a rank that waits gives its core away, and each message then costs a trip "
            "through the scheduler (tens of microseconds to milliseconds) instead of a few "
            "microseconds.", m.ranks, m.cores, m.cores == 1 ? "" : "s");
    if (m.loaded)
        add(text, len, &used, " The machine is busy with other work: its load average is "
            "%.1f on %d core%s.", m.load, m.cores, m.cores == 1 ? "" : "s");
    if (noisy && spread >= 10)                 /* the tables print at most +-999% */
        add(text, len, &used, " Repeated runs of one measurement spread by more than "
            "+-999%% around their median, so smaller differences mean nothing.");
    else if (noisy)
        add(text, len, &used, " Repeated runs of one measurement spread by up to +-%.0f%% "
            "around their median, so smaller differences mean nothing.", 100 * spread);
    else
        add(text, len, &used, " Repeated runs agree within +-%.0f%%.", 100 * spread);
    if (effect && *effect)
        add(text, len, &used, " %s", effect);
    dt_printf0("\n");
    print_folded(text, 80);
    return 1;
}

/* ==== one median (prog.h) ==== */

double dt_time_median(void (*fn)(void *ctx), void *ctx, int iters, MPI_Comm comm)
{
    return dt_time_runs(fn, ctx, iters, comm).median;
}
