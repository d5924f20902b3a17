/* collbench: dtlab's collectives beside MPI's own, in nccl-tests' table format.
 *
 *   mpiexec -n 4 build/bench/collbench                       allreduce, 1 KiB .. 16 MiB
 *   mpiexec -n 4 build/bench/collbench -C all -b 4K -e 4M    every collective
 *   mpiexec -n 4 build/bench/collbench -C allreduce_ring -W block
 *   mpiexec -n 4 build/bench/collbench -C allreduce,allgather --mpi 0 --csv rows.csv
 *
 * For each size it times the dtlab collective and the MPI one with the same
 * arguments, out of place and in place, and prints one row for each, `impl` naming
 * which. The columns are nccl-tests' (size, count, type, redop, root, then time,
 * algbw, busbw, #wrong twice), so the numbers read like a GPU cluster's:
 *
 *   time   the per-iteration average of -n calls, the slowest rank's (a barrier
 *          before each timed loop, so every rank starts together)
 *   algbw  S / time, S the size column: the bytes of the largest buffer of the call
 *          (for gather, scatter, allgather, reduce-scatter and all-to-all that is
 *          the whole n*count, as nccl-tests counts it). Each requested size is rounded
 *          up to whole elements (whole blocks for those five), and a size that rounds
 *          to the row before it is skipped
 *   busbw  algbw * factor, the rate each rank's link must sustain; the factor makes
 *          the number comparable across rank counts and with the hardware peak:
 *          allreduce 2(n-1)/n; reduce-scatter, allgather, gather, scatter,
 *          all-to-all (n-1)/n; broadcast and reduce 1
 *   #wrong elements where dtlab's result differs from MPI's on the same inputs
 *          (counted over all ranks; MPI's row is the reference, marked "ref")
 *
 * See bench/README.md for measurements on a small machine and what limits them. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dt.h"

/* Descriptions start at column 23, as in DT_COMMON_USAGE (prog.h). */
static const char *usage =
    "usage: mpiexec -n N collbench [options]\n"
    "Times dtlab's collectives beside MPI's own; prints nccl-tests' table.\n"
    "  -b, --minbytes B    smallest size (default 1K; K, M, G suffixes); sizes round\n"
    "                      up to whole elements (to whole blocks, one per rank, for\n"
    "                      the collectives whose buffers are N blocks)\n"
    "  -e, --maxbytes B    largest size, at most 1G (default 16M)\n"
    "  -f, --stepfactor F  multiply the size by F each row, 2 to 1024 (default 2)\n"
    "  -w, --warmup_iters W\n"
    "                      untimed calls at the smallest and largest size (default 5)\n"
    "  -n, --iters K       timed calls per row (default 20)\n"
    "  -c, --check 0|1     compare dtlab's result with MPI's at each size (default 1)\n"
    "  -o, --op OP         reduction: sum|max|min|prod (default sum)\n"
    "  -d, --datatype T    element type: float|double|int|half (default float)\n"
    "  -r, --root R        root of bcast, reduce, gather and scatter, 0 to N-1\n"
    "                      (default 0)\n"
    "  -C, --coll NAME     allreduce (default), allreduce_ring, allreduce_rd,\n"
    "                      allreduce_naive, bcast, bcast_naive, reduce, gather,\n"
    "                      scatter, allgather, reduce_scatter, alltoall, or all;\n"
    "                      several: a comma-separated list (allreduce,allgather)\n"
    "  -M, --mpi 0|1       also time MPI's call and print its rows (default 1); with\n"
    "                      0 only dtlab's rows (--check still runs MPI's once a size)\n"
    "      --csv FILE      rank 0 also writes the rows to FILE as CSV\n"
    "  -W, --wait MODE     how dtlab waits: polite (default, or DT_WAIT) yields the\n"
    "                      core, block spins in MPI_Waitall\n"
    "  -h, --help          this text\n"
    DT_COMMON_USAGE
    "Environment: DT_ALLREDUCE_ALGO=ring|naive|rd makes dt_allreduce (-C allreduce)\n"
    "use that algorithm at every size; the header says so.\n";

/* The largest --maxbytes: one buffer of 1 GiB (four are allocated); the counts of
 * every collective then fit in an int, as MPI wants them. */
#define MAXBYTES ((size_t)1 << 30)

/* ==== the collectives it knows ==== */

typedef enum { K_ALLREDUCE, K_BCAST, K_REDUCE, K_GATHER, K_SCATTER, K_ALLGATHER,
               K_REDUCE_SCATTER, K_ALLTOALL } coll_kind;

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);

typedef struct {
    const char *name;           /* what -C takes */
    const char *dt_fn;          /* the two functions compared, for the header */
    const char *mpi_fn;
    coll_kind kind;
    allreduce_fn allreduce;     /* K_ALLREDUCE: the dtlab variant */
    bcast_fn bcast;             /* K_BCAST: the dtlab variant */
} coll_t;

static const coll_t colls[] = {
    {"allreduce",       "dt_allreduce",       "MPI_Allreduce", K_ALLREDUCE,
                                                               dt_allreduce, NULL},
    {"allreduce_ring",  "dt_allreduce_ring",  "MPI_Allreduce", K_ALLREDUCE,
                                                               dt_allreduce_ring, NULL},
    {"allreduce_rd",    "dt_allreduce_rd",    "MPI_Allreduce", K_ALLREDUCE,
                                                               dt_allreduce_rd, NULL},
    {"allreduce_naive", "dt_allreduce_naive", "MPI_Allreduce", K_ALLREDUCE,
                                                               dt_allreduce_naive, NULL},
    {"bcast",           "dt_bcast",           "MPI_Bcast",     K_BCAST, NULL, dt_bcast},
    {"bcast_naive",     "dt_bcast_naive",     "MPI_Bcast",     K_BCAST, NULL, dt_bcast_naive},
    {"reduce",          "dt_reduce",          "MPI_Reduce",    K_REDUCE, NULL, NULL},
    {"gather",          "dt_gather",          "MPI_Gather",    K_GATHER, NULL, NULL},
    {"scatter",         "dt_scatter",         "MPI_Scatter",   K_SCATTER, NULL, NULL},
    {"allgather",       "dt_allgather",       "MPI_Allgather", K_ALLGATHER, NULL, NULL},
    {"reduce_scatter",  "dt_reduce_scatter_block", "MPI_Reduce_scatter_block",
                                                               K_REDUCE_SCATTER, NULL, NULL},
    {"alltoall",        "dt_alltoall",        "MPI_Alltoall",  K_ALLTOALL, NULL, NULL},
};
#define NCOLLS ((int)(sizeof colls / sizeof colls[0]))

static int rooted(coll_kind k)
{
    return k == K_BCAST || k == K_REDUCE || k == K_GATHER || k == K_SCATTER;
}
static int reduces(coll_kind k)
{
    return k == K_ALLREDUCE || k == K_REDUCE || k == K_REDUCE_SCATTER;
}
/* MPI_Bcast has one buffer: there is no out-of-place broadcast to compare with. */
static int has_in_place(coll_kind k) { return k != K_BCAST; }
/* Whether the buffers are n blocks of `count` elements (one per rank). */
static int blocked(coll_kind k)
{
    return k == K_GATHER || k == K_SCATTER || k == K_ALLGATHER || k == K_REDUCE_SCATTER ||
           k == K_ALLTOALL;
}

/* busbw = algbw * factor: the share of S that crosses each rank's link. A ring
 * allreduce sends 2(n-1)/n of the buffer per rank (reduce-scatter, then allgather);
 * the block collectives move (n-1)/n of S, the rank's own block staying home; a
 * broadcast or reduce must pass all of S through the root's link. */
static double bus_factor(coll_kind k, int n)
{
    switch (k) {
    case K_ALLREDUCE: return 2.0 * (n - 1) / n;
    case K_BCAST: case K_REDUCE: return 1.0;
    default: return (double)(n - 1) / n;
    }
}

/* ==== the run's settings and buffers ==== */

typedef struct {
    size_t minbytes, maxbytes;
    int factor, warmup, iters, check, root;
    int mpi_rows;               /* --mpi: time MPI's call and print its rows */
    MPI_Datatype type;
    MPI_Op op;
    const char *csv_path;
    FILE *csv;                  /* rank 0 only */
    int csv_err;                /* rank 0: errno of the first failed write to it, or 0 */
    int rank, n;
    size_t ts;                  /* bytes per element */
    void *sendbuf[2], *recvbuf[2];  /* [impl], maxbytes each: dtlab's on dt_device(),
                                     * MPI's on the host (Debian's MPICH cannot read
                                     * device memory; on the CPU they are dtlab's) */
    void *ref, *got;            /* maxbytes each, on the host: for --check */
    long long wrong_total;      /* over every checked row */
    double busbw_sum[2];        /* [impl], for the average line */
    int busbw_rows[2];
} bench_t;

enum { DTLAB = 0, MPI = 1 };
static const char *impl_name[2] = {"dtlab", "mpi"};

/* Rank 0, after writing to the CSV: keeps the reason of its first failure. A write is
 * buffered, so a full disk may show only at the end (csv_close). */
static void csv_check(bench_t *b)
{
    if (b->csv_err == 0 && ferror(b->csv))
        b->csv_err = errno ? errno : EIO;
}

/* Flushes and closes the CSV. Returns 1 when every row reached it, the same on every
 * rank; else rank 0 says why, naming the file. */
static int csv_close(bench_t *b)
{
    int ok = 1;
    if (b->csv) {
        if (b->csv_err == 0 && fflush(b->csv) != 0)
            b->csv_err = errno;
        csv_check(b);
        if (fclose(b->csv) != 0 && b->csv_err == 0)
            b->csv_err = errno;
        b->csv = NULL;
        ok = b->csv_err == 0;
        if (!ok)
            fprintf(stderr, "collbench: cannot write the rows to %s: %s\n", b->csv_path,
                    strerror(b->csv_err));
    }
    DT_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return ok;
}

/* The op MPI's own collectives apply: MPI has no fp16, so dtlab lends it one. */
static MPI_Op mpi_op(const bench_t *b)
{
    return b->type == DT_HALF ? dt_half_mpi_op(b->op) : b->op;
}

/* count: the count argument of the call; *nbytes: the size column, S. A size is
 * rounded up to whole elements (and whole blocks, n of them, for the blocked ones), so
 * that -b 1 times one element rather than none; 0 stays 0. */
static int count_for(const bench_t *b, coll_kind k, size_t size, size_t *nbytes)
{
    size_t unit = b->ts * (blocked(k) ? (size_t)b->n : 1);    /* bytes per count */
    size_t count = (size + unit - 1) / unit;
    *nbytes = count * unit;
    return (int)count;          /* fits: --maxbytes is at most MAXBYTES */
}

static char *at(void *buf, size_t elems, const bench_t *b)
{
    return (char *)buf + elems * b->ts;
}

/* ==== one call, dtlab's or MPI's ====
 * In place follows MPI: MPI_IN_PLACE as sendbuf (recvbuf for scatter), at the root
 * only for the rooted collectives. */
static void run_once(const bench_t *b, const coll_t *c, int impl, int in_place, int count)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    MPI_Datatype t = b->type;
    int root = b->root, me_root = b->rank == root;
    void *sb = b->sendbuf[impl], *rb = b->recvbuf[impl];
    const void *s = in_place ? MPI_IN_PLACE : sb;          /* the unrooted ones */
    const void *s_root = in_place && me_root ? MPI_IN_PLACE : sb;

    switch (c->kind) {
    case K_ALLREDUCE:
        if (impl == DTLAB) DT_CHECK_MPI(c->allreduce(s, rb, count, t, b->op, comm));
        else DT_CHECK_MPI(MPI_Allreduce(s, rb, count, t, mpi_op(b), comm));
        break;
    case K_BCAST:
        if (impl == DTLAB) DT_CHECK_MPI(c->bcast(rb, count, t, root, comm));
        else DT_CHECK_MPI(MPI_Bcast(rb, count, t, root, comm));
        break;
    case K_REDUCE:
        if (impl == DTLAB) {
            DT_CHECK_MPI(dt_reduce(s_root, rb, count, t, b->op, root, comm));
        } else if (s_root == MPI_IN_PLACE && root != 0) {
            /* MPICH 4.0.2 and 4.1.1 crash on MPI_IN_PLACE at a root other than 0
             * (pmodels/mpich#6540, fixed by #6543, which makes this same extra copy). */
            dt_memcpy(sb, rb, (size_t)count * b->ts);
            DT_CHECK_MPI(MPI_Reduce(sb, rb, count, t, mpi_op(b), root, comm));
        } else {
            DT_CHECK_MPI(MPI_Reduce(s_root, rb, count, t, mpi_op(b), root, comm));
        }
        break;
    case K_GATHER:
        if (impl == DTLAB) DT_CHECK_MPI(dt_gather(s_root, count, t, rb, count, t, root, comm));
        else DT_CHECK_MPI(MPI_Gather(s_root, count, t, rb, count, t, root, comm));
        break;
    case K_SCATTER: {
        void *r = in_place && me_root ? MPI_IN_PLACE : rb;
        if (impl == DTLAB) DT_CHECK_MPI(dt_scatter(sb, count, t, r, count, t, root, comm));
        else DT_CHECK_MPI(MPI_Scatter(sb, count, t, r, count, t, root, comm));
        break;
    }
    case K_ALLGATHER:
        if (impl == DTLAB) DT_CHECK_MPI(dt_allgather(s, count, t, rb, count, t, comm));
        else DT_CHECK_MPI(MPI_Allgather(s, count, t, rb, count, t, comm));
        break;
    case K_REDUCE_SCATTER:
        if (impl == DTLAB) DT_CHECK_MPI(dt_reduce_scatter_block(s, rb, count, t, b->op, comm));
        else DT_CHECK_MPI(MPI_Reduce_scatter_block(s, rb, count, t, mpi_op(b), comm));
        break;
    case K_ALLTOALL:
        if (impl == DTLAB) DT_CHECK_MPI(dt_alltoall(s, count, t, rb, count, t, comm));
        else DT_CHECK_MPI(MPI_Alltoall(s, count, t, rb, count, t, comm));
        break;
    }
}

/* Where the call reads its input on this rank: sendbuf, except in place (and always
 * for bcast, which has one buffer) where MPI puts it in recvbuf. *in_count: elements. */
static void *input_at(const bench_t *b, coll_kind k, int impl, int in_place, int count,
                      int *in_count)
{
    void *sb = b->sendbuf[impl], *rb = b->recvbuf[impl];
    int n = b->n, me_root = b->rank == b->root;
    *in_count = k == K_SCATTER || k == K_REDUCE_SCATTER || k == K_ALLTOALL ? n * count : count;
    switch (k) {
    case K_BCAST: return rb;
    case K_SCATTER: return sb;
    case K_REDUCE: return in_place && me_root ? rb : sb;
    case K_GATHER:
        return in_place && me_root ? at(rb, (size_t)b->root * count, b) : sb;
    case K_ALLGATHER:
        return in_place ? at(rb, (size_t)b->rank * count, b) : sb;
    default: return in_place ? rb : sb;
    }
}

/* Fills the input of a call with per-rank test data (seed), and the rest of both
 * buffers, as far as the call reaches, with other data: an element dtlab forgets to
 * write then shows up as wrong rather than as a stale right answer. With --check 0
 * only the input: nothing is compared, and each fill of 256 MiB costs about a second
 * of CPU time (the values are drawn one by one). */
static void fill_inputs(const bench_t *b, coll_kind k, int impl, int in_place, int count,
                        unsigned seed)
{
    MPI_Op op = reduces(k) ? b->op : MPI_SUM;
    int reach = blocked(k) ? b->n * count : count, in_count;
    void *in = input_at(b, k, impl, in_place, count, &in_count);

    if (b->check) {
        dt_fill_test_data(b->sendbuf[impl], reach, b->type, op, seed + 7777, b->rank);
        dt_fill_test_data(b->recvbuf[impl], reach, b->type, op, seed + 8888, b->rank);
    }
    dt_fill_test_data(in, in_count, b->type, op, seed, b->rank);
}

/* Where this rank's result lands: the number of elements at the start of recvbuf
 * (0 where MPI defines no output on this rank). */
static size_t result_count(const bench_t *b, coll_kind k, int in_place, int count)
{
    int me_root = b->rank == b->root;
    switch (k) {
    case K_ALLREDUCE: case K_BCAST: return (size_t)count;
    case K_REDUCE: return me_root ? (size_t)count : 0;
    case K_GATHER: return me_root ? (size_t)b->n * count : 0;
    case K_SCATTER: return in_place && me_root ? 0 : (size_t)count;
    case K_REDUCE_SCATTER: return (size_t)count;
    case K_ALLGATHER: case K_ALLTOALL: return (size_t)b->n * count;
    }
    return 0;
}

/* ==== timing and checking ==== */

/* The slowest rank's average time per call, in seconds. One untimed call first (as
 * nccl-tests does), then a barrier so every rank enters the timed loop together
 * (dt_barrier waits as -W says: MPI_Barrier would spin, and with more ranks than cores
 * the ranks would leave it a time slice apart). */
static double time_coll(const bench_t *b, const coll_t *c, int impl, int in_place,
                        int count, unsigned seed)
{
    fill_inputs(b, c->kind, impl, in_place, count, seed);
    run_once(b, c, impl, in_place, count);
    dt_barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < b->iters; i++)
        run_once(b, c, impl, in_place, count);
    double t = (MPI_Wtime() - t0) / b->iters;
    DT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    return t;
}

/* Runs MPI's call and dtlab's on the same inputs and counts the result elements that
 * differ, summed over ranks. The test data make every result exact whatever the
 * order of the reduction (prog.h), so the comparison is exact. */
static long long check_coll(const bench_t *b, const coll_t *c, int in_place, int count,
                            unsigned seed)
{
    size_t m = result_count(b, c->kind, in_place, count);

    fill_inputs(b, c->kind, MPI, in_place, count, seed);
    run_once(b, c, MPI, in_place, count);
    dt_memcpy(b->ref, b->recvbuf[MPI], m * b->ts);

    fill_inputs(b, c->kind, DTLAB, in_place, count, seed);
    run_once(b, c, DTLAB, in_place, count);
    dt_memcpy(b->got, b->recvbuf[DTLAB], m * b->ts);

    long long wrong = 0;
    for (size_t i = 0; i < m; i++) {
        double g = dt_elem(b->got, i, b->type), w = dt_elem(b->ref, i, b->type);
        if (g != w) {
            if (wrong < 3)
                fprintf(stderr, "collbench: rank %d: %s %s: element %zu is %g, MPI says %g\n",
                        b->rank, c->name, in_place ? "in place" : "out of place", i, g, w);
            wrong++;
        }
    }
    DT_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM,
                               MPI_COMM_WORLD));
    return wrong;
}

/* ==== printing ==== */

typedef struct { double t, algbw, busbw; long long wrong; int ran; } result_t;

/* nccl-tests' time format: fewer decimals as the time grows. */
static void fmt_time(char *buf, size_t len, double sec)
{
    double us = sec * 1e6;
    snprintf(buf, len, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

static void fmt_wrong(char *buf, size_t len, const bench_t *b, int impl, const result_t *r)
{
    if (!b->check) snprintf(buf, len, "N/A");
    else if (impl == MPI) snprintf(buf, len, "ref");
    else snprintf(buf, len, "%lld", r->wrong);
}

/* DT_ALLREDUCE_ALGO, when set: the algorithm dt_allreduce runs at every size. */
static const char *forced_algo(void)
{
    const char *algo = getenv("DT_ALLREDUCE_ALGO");   /* dt_init checked its value */
    return algo && *algo ? algo : NULL;
}

static void print_header(const bench_t *b, const coll_t *c)
{
    dt_printf0("#\n# %s: %s beside %s\n", c->name, c->dt_fn, c->mpi_fn);
    if (c->allreduce == dt_allreduce && forced_algo())
        dt_printf0("# (DT_ALLREDUCE_ALGO=%s: dt_allreduce runs dt_allreduce_%s at every size)\n",
                   forced_algo(), forced_algo());
    else if (c->allreduce == dt_allreduce)
        dt_printf0("# (dt_allreduce picks rd below %d KiB or when count < nranks, the ring "
                   "above)\n", DT_ALLREDUCE_RD_MAX / 1024);
    if (c->kind == K_REDUCE && b->root != 0)
        dt_printf0("# (MPI's in-place reduce at root %d copies its input and runs out of "
                   "place:\n"
                   "#  MPICH 4.0.2 and 4.1.1 crash there, pmodels/mpich#6540)\n", b->root);
    dt_printf0("# %10s  %12s  %8s  %6s  %6s           out-of-place"
               "                       in-place\n", "", "", "", "", "");
    dt_printf0("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s  %s\n",
               "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
               "time", "algbw", "busbw", "#wrong", "impl");
    dt_printf0("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n",
               "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "",
               "(us)", "(GB/s)", "(GB/s)", "");
}

static void print_row(bench_t *b, const coll_t *c, int impl, size_t nbytes, int count,
                      const result_t r[2])
{
    const char *op = reduces(c->kind) ? dt_op_name(b->op) : "none";
    int root = rooted(c->kind) ? b->root : -1;
    char line[256], t[32], w[32];
    int len = snprintf(line, sizeof line, "%12zu  %12d  %8s  %6s  %6d",
                       nbytes, count, dt_type_name(b->type), op, root);
    for (int ip = 0; ip < 2; ip++) {
        if (!r[ip].ran) {
            len += snprintf(line + len, sizeof line - len, "  %7s  %6s  %6s  %5s",
                            "-", "-", "-", "-");
            continue;
        }
        fmt_time(t, sizeof t, r[ip].t);
        fmt_wrong(w, sizeof w, b, impl, &r[ip]);
        len += snprintf(line + len, sizeof line - len, "  %7s  %6.2f  %6.2f  %5s",
                        t, r[ip].algbw, r[ip].busbw, w);
        b->busbw_sum[impl] += r[ip].busbw;
        b->busbw_rows[impl]++;
    }
    dt_printf0("%s  %s\n", line, impl_name[impl]);

    if (!b->csv)
        return;
    fprintf(b->csv, "%s,%s,%zu,%d,%s,%s,%d", c->name, impl_name[impl], nbytes, count,
            dt_type_name(b->type), op, root);
    for (int ip = 0; ip < 2; ip++) {
        if (!r[ip].ran) {
            fprintf(b->csv, ",,,,");
            continue;
        }
        fmt_wrong(w, sizeof w, b, impl, &r[ip]);
        fprintf(b->csv, ",%.3f,%.6f,%.6f,%s", r[ip].t * 1e6, r[ip].algbw, r[ip].busbw,
                strcmp(w, "N/A") ? w : "");
    }
    fprintf(b->csv, ",%d,%s\n", b->n, dt_polite() ? "polite" : "block");
    csv_check(b);
}

/* ==== one collective, every size ==== */

static void bench_coll(bench_t *b, const coll_t *c)
{
    size_t nbytes;
    print_header(b, c);

    /* Warm-up at both ends of the range (connections, page faults, caches). */
    int ends[2] = {count_for(b, c->kind, b->maxbytes, &nbytes),
                   count_for(b, c->kind, b->minbytes, &nbytes)};
    for (int e = 0; e < 2; e++)
        for (int i = 0; i < b->warmup; i++)
            for (int impl = 0; impl < 1 + b->mpi_rows; impl++)
                run_once(b, c, impl, 0, ends[e]);

    unsigned seed = 1;
    size_t last = SIZE_MAX;                     /* the size of the row printed last */
    for (size_t size = b->minbytes; size <= b->maxbytes; size = size ? size * b->factor : 1) {
        int count = count_for(b, c->kind, size, &nbytes);
        if (nbytes == last)
            continue;                           /* rounded to the same size: no new row */
        last = nbytes;
        result_t r[2][2] = {{{0}}};             /* [impl][in_place] */
        for (int ip = 0; ip < 2; ip++) {
            if (ip && !has_in_place(c->kind))
                continue;
            for (int impl = 0; impl < 1 + b->mpi_rows; impl++) {
                result_t *x = &r[impl][ip];
                x->t = time_coll(b, c, impl, ip, count, seed);
                x->algbw = x->t > 0 ? (double)nbytes / 1e9 / x->t : 0;
                x->busbw = x->algbw * bus_factor(c->kind, b->n);
                x->ran = 1;
            }
            if (b->check) {
                r[DTLAB][ip].wrong = check_coll(b, c, ip, count, seed + 1);
                b->wrong_total += r[DTLAB][ip].wrong;
            }
            seed += 2;
        }
        print_row(b, c, DTLAB, nbytes, count, r[DTLAB]);
        if (b->mpi_rows)
            print_row(b, c, MPI, nbytes, count, r[MPI]);
        if (size > b->maxbytes / b->factor)
            break;                              /* the next size would overflow */
    }
}

/* ==== options ==== */

/* -C's value: one collective's name, "all", or names separated by commas. Returns the
 * set as a bit mask over colls[], 0 when some name is unknown. */
static unsigned colls_named(const char *list)
{
    unsigned set = 0;
    if (!strcmp(list, "all"))
        return (1u << NCOLLS) - 1;
    for (const char *p = list; ; p++) {
        size_t len = strcspn(p, ",");
        int found = 0;
        for (int i = 0; i < NCOLLS; i++)
            if (strlen(colls[i].name) == len && !strncmp(p, colls[i].name, len)) {
                set |= 1u << i;
                found = 1;
            }
        if (!found)
            return 0;
        p += len;
        if (*p == 0)
            return set;
    }
}

static void parse_options(int argc, char **argv, bench_t *b, unsigned *which)
{
    static const struct option longopts[] = {
        {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'},
        {"warmup_iters", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'n'},
        {"check", required_argument, NULL, 'c'},
        {"op", required_argument, NULL, 'o'},
        {"datatype", required_argument, NULL, 'd'},
        {"root", required_argument, NULL, 'r'},
        {"coll", required_argument, NULL, 'C'},
        {"mpi", required_argument, NULL, 'M'},
        {"csv", required_argument, NULL, 'V'},
        {"wait", required_argument, NULL, 'W'},
        {"help", no_argument, NULL, 'h'},
        DT_COMMON_LONGOPTS,
        {NULL, 0, NULL, 0}};
    int opt;
    char why[320];
    *which = 1;                                 /* allreduce */
    opterr = 0;                                 /* dt_usage_error speaks instead */
    optind = 0;
#define BAD(...) do { snprintf(why, sizeof why, __VA_ARGS__); \
                      dt_usage_error(usage, why); } while (0)
    while ((opt = getopt_long(argc, argv, ":b:e:f:w:n:c:o:d:r:C:M:W:h", longopts, NULL))
           != -1) {
        switch (opt) {
        case 'b': case 'e': {
            size_t *v = opt == 'b' ? &b->minbytes : &b->maxbytes;
            if (dt_parse_size(optarg, v) || *v > MAXBYTES)
                BAD("--%s wants a size from 0 to 1G, like 64K, not '%s'",
                    opt == 'b' ? "minbytes" : "maxbytes", optarg);
            break;
        }
        case 'f':
            if (dt_parse_int(optarg, 2, 1024, &b->factor))
                BAD("--stepfactor wants a whole number from 2 to 1024, not '%s'", optarg);
            break;
        case 'w':
            if (dt_parse_int(optarg, 0, 1000000, &b->warmup))
                BAD("--warmup_iters wants a whole number from 0 to 10^6, not '%s'",
                    optarg);
            break;
        case 'n':
            if (dt_parse_int(optarg, 1, 1000000, &b->iters))
                BAD("--iters wants a whole number from 1 to 10^6, not '%s'", optarg);
            break;
        case 'c':
            if (dt_parse_int(optarg, 0, 1, &b->check))
                BAD("--check wants 0 or 1, not '%s'", optarg);
            break;
        case 'o':
            b->op = dt_op_from_name(optarg);
            if (b->op == MPI_OP_NULL)
                BAD("--op wants sum, max, min or prod, not '%s'", optarg);
            break;
        case 'd':
            b->type = dt_type_from_name(optarg);
            if (b->type == MPI_DATATYPE_NULL)
                BAD("--datatype wants float, double, int or half, not '%s'", optarg);
            break;
        case 'r':
            if (dt_parse_int(optarg, 0, b->n - 1, &b->root))
                BAD("--root wants a rank from 0 to %d, not '%s'", b->n - 1, optarg);
            break;
        case 'C':
            *which = colls_named(optarg);
            if (*which == 0) {              /* the sentence lists them: no usage text follows */
                char names[256] = "";
                for (int i = 0; i < NCOLLS; i++)
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s, ",
                             colls[i].name);
                BAD("--coll wants one of %sor all, or a list with commas, not '%.40s'",
                    names, optarg);
            }
            break;
        case 'M':
            if (dt_parse_int(optarg, 0, 1, &b->mpi_rows))
                BAD("--mpi wants 0 or 1, not '%s'", optarg);
            break;
        case 'V': b->csv_path = optarg; break;
        case 'W':
            if (!strcmp(optarg, "polite")) dt_set_polite(1);
            else if (!strcmp(optarg, "block")) dt_set_polite(0);
            else BAD("--wait wants polite or block, not '%s'", optarg);
            break;
        case 'h': dt_usage_help(usage);
        case DT_OPT_DEVICE: case DT_OPT_TRACE: break;
        default:                    /* ':' a value missing, '?' an unknown option */
            dt_bad_option(opt, argv, why, sizeof why);
            dt_usage_error(usage, why);
        }
    }
    if (optind < argc) BAD("unexpected argument '%s'", argv[optind]);
#undef BAD
    if (b->minbytes > b->maxbytes)
        dt_usage_error(usage, "--minbytes is larger than --maxbytes");
    b->ts = dt_type_size(b->type);
}

/* ==== main ==== */

int main(int argc, char **argv)
{
    /* Initialization */
    dt_init(&argc, &argv);
    bench_t b = {.minbytes = 1024, .maxbytes = 16 << 20, .factor = 2, .warmup = 5,
                 .iters = 20, .check = 1, .mpi_rows = 1, .type = MPI_FLOAT, .op = MPI_SUM,
                 .rank = dt_rank(), .n = dt_size()};
    unsigned which;
    parse_options(argc, argv, &b, &which);

    int ok = 1;
    char why[600] = "";                         /* rank 0's, which alone speaks */
    dt_check_output("--csv", b.csv_path, 0);
    if (b.csv_path && b.rank == 0) {            /* what the check cannot foresee */
        b.csv = fopen(b.csv_path, "w");
        ok = b.csv != NULL;
        if (!ok)
            snprintf(why, sizeof why, "--csv: cannot write %.500s: %s", b.csv_path,
                     strerror(errno));
    }
    DT_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (!ok) dt_usage_error(usage, why);
    if (b.csv)
        fprintf(b.csv, "coll,impl,size_B,count,type,redop,root,"
                       "time_us,algbw_GBps,busbw_GBps,wrong,"
                       "inplace_time_us,inplace_algbw_GBps,inplace_busbw_GBps,inplace_wrong,"
                       "nranks,wait\n");
    if (b.csv)
        csv_check(&b);

    /* Buffers: sendbuf and recvbuf of the largest size, dtlab's where the data lives and
     * MPI's on the host (every collective's buffers fit in S bytes, and S is maxbytes
     * rounded up to whole elements and blocks: count_for); two host copies for the check. */
    size_t cap = 1, nbytes;
    for (int i = 0; i < NCOLLS; i++) {
        count_for(&b, colls[i].kind, b.maxbytes, &nbytes);
        cap = nbytes > cap ? nbytes : cap;
    }
    b.sendbuf[DTLAB] = dt_malloc(cap, dt_device());
    b.recvbuf[DTLAB] = dt_malloc(cap, dt_device());
    int mirror = dt_device() != DT_CPU;         /* MPI's own buffers on the host */
    b.sendbuf[MPI] = mirror ? dt_malloc(cap, DT_CPU) : b.sendbuf[DTLAB];
    b.recvbuf[MPI] = mirror ? dt_malloc(cap, DT_CPU) : b.recvbuf[DTLAB];
    if (b.check) {
        b.ref = dt_malloc(cap, DT_CPU);
        b.got = dt_malloc(cap, DT_CPU);
    }
    int all = (int)(cap / b.ts);                /* never zeros, never garbage */
    for (int k = 0; k < 1 + mirror; k++) {
        dt_fill_test_data(b.sendbuf[k], all, b.type, b.op, 11, b.rank);
        dt_fill_test_data(b.recvbuf[k], all, b.type, b.op, 12, b.rank);
    }

    /* The header, as nccl-tests prints it, plus which MPI and how dtlab waits */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING], host[MPI_MAX_PROCESSOR_NAME];
    int len;
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = 0;
    MPI_Get_processor_name(host, &len);
    dt_printf0("# collbench: dtlab beside MPI, in nccl-tests' format\n"
               "# nranks %d minBytes %zu maxBytes %zu step: %d(factor) warmup iters: %d "
               "iters: %d validation: %d wait: %s\n# MPI: %s\n",
               b.n, b.minbytes, b.maxbytes, b.factor, b.warmup, b.iters, b.check,
               dt_polite() ? "polite" : "block", lib);
    if (forced_algo())
        dt_printf0("# DT_ALLREDUCE_ALGO=%s: dt_allreduce always runs dt_allreduce_%s\n",
                   forced_algo(), forced_algo());
    if (mirror)
        dt_printf0("# mpi rows: on host copies of the buffers (Debian's MPICH is not "
                   "CUDA-aware); dtlab rows: on the device, moved by dtlab's p2p\n");
    /* the transport dtlab's messages take (p2p.h): what DT_P2P asked for, and what a
     * ring segment to the next rank gets (the ring collectives cut their chunks into
     * segments of dt_p2p_segment bytes), as a script can read it back */
    int right = (b.rank + 1) % b.n;
    size_t seg = dt_p2p_segment(mirror);
    dt_printf0("# p2p: mode %s; to rank %d, %s segments of %zu B go via %s\n",
               dt_p2p_mode(), right, mirror ? "device" : "host", seg,
               dt_via_name(dt_p2p_via(right, MPI_COMM_WORLD, mirror, seg)));
    dt_printf0("#\n# Using devices\n");
    dt_printf_ordered("#  Rank %2d Pid %6d on %10s device %s\n", b.rank, (int)getpid(), host,
                      dt_device_name());

    /* Update: every size of every collective asked for */
    for (int i = 0; i < NCOLLS; i++)
        if (which >> i & 1)
            bench_coll(&b, &colls[i]);

    /* Summary */
    dt_printf0("# Wrong results        : %lld %s\n", b.wrong_total,
               !b.check ? "(not checked)" : b.wrong_total ? "FAILED" : "OK");
    double avg[2];
    for (int k = 0; k < 2; k++)
        avg[k] = b.busbw_rows[k] ? b.busbw_sum[k] / b.busbw_rows[k] : 0;
    if (b.mpi_rows)
        dt_printf0("# Avg bus bandwidth    : %g (dtlab)  %g (mpi)  dtlab/mpi %.2f\n#\n",
                   avg[DTLAB], avg[MPI], avg[MPI] > 0 ? avg[DTLAB] / avg[MPI] : 0);
    else
        dt_printf0("# Avg bus bandwidth    : %g (dtlab; MPI's not timed: --mpi 0)\n#\n",
                   avg[DTLAB]);

    /* De-Initialization */
    int csv_ok = csv_close(&b);     /* rows that never reached their file: status 1 */
    if (mirror) {
        dt_free(b.sendbuf[MPI]);
        dt_free(b.recvbuf[MPI]);
    }
    dt_free(b.sendbuf[DTLAB]);
    dt_free(b.recvbuf[DTLAB]);
    dt_free(b.ref);
    dt_free(b.got);
    dt_finalize();
    return b.wrong_total || !csv_ok ? 1 : 0;
}
