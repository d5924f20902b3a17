/* Lesson 09: three allreduce algorithms against each other, and against MPI's.
 *
 * What it teaches: there is no best allreduce, only a best one for a size. The naive
 * parameter server funnels everything through rank 0: (N-1)*S through one link.
 * Recursive doubling finishes in log2 N steps but sends the whole buffer at each:
 * log2(N)*S per rank, cheap for small buffers, where the cost is the number of steps.
 * The ring takes 2(N-1) steps but sends only 2(N-1)/N*S per rank: best for large
 * buffers, where the cost is bytes. MPI libraries (and dt_allreduce) switch by size.
 *
 * Run:  mpiexec -n 4 build/lessons/09_allreduce_compare
 *       mpiexec -n 5 build/lessons/09_allreduce_compare --max-size 16M --iters 9
 */
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 09_allreduce_compare [options]\n"
    "Times the naive, ring and recursive-doubling allreduces and MPI_Allreduce over\n"
    "growing sizes, with the bytes each sends, and checks every result.\n"
    "  --min-size BYTES    smallest buffer (default 16)\n"
    "  --max-size BYTES    largest buffer, e.g. 64K, 16M (default 1M); sizes grow x16\n"
    "  --iters N           timed runs per size and algorithm; the median is shown\n"
    "                      (default 5, after one warm-up run)\n"
    "  --type T            float|double|int|half (default float)\n"
    "  --op OP             sum|max|min|prod (default sum)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

typedef int (*allreduce_fn)(const void *sendbuf, void *recvbuf, int count,
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm);

static const struct { const char *name; allreduce_fn fn; } algos[] = {
    {"naive", dt_allreduce_naive}, {"ring", dt_allreduce_ring}, {"rd", dt_allreduce_rd},
    {"MPI_Allreduce", MPI_Allreduce},      /* last: runs on host copies (lesson 02) */
};
enum { NALGO = sizeof algos / sizeof algos[0], MPI_ALGO = NALGO - 1, MAXITERS = 1000 };

/* Runs fn once to warm up, then iters times, each run started together (a polite
 * barrier, lesson 02) and timed on this rank into t[0..iters-1]. */
static void time_runs(allreduce_fn fn, const void *in, void *out, int count,
                      MPI_Datatype type, MPI_Op op, int iters, double *t)
{
    fn(in, out, count, type, op, MPI_COMM_WORLD);
    for (int i = 0; i < iters; i++) {
        MPI_Request req;
        MPI_Ibarrier(MPI_COMM_WORLD, &req);
        dt_waitall(1, &req);
        double t0 = MPI_Wtime();
        fn(in, out, count, type, op, MPI_COMM_WORLD);
        t[i] = MPI_Wtime() - t0;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int iters)
{
    qsort(t, (size_t)iters, sizeof t[0], cmp_double);
    return iters % 2 ? t[iters / 2] : (t[iters / 2 - 1] + t[iters / 2]) / 2;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int iters = 5, n = dt_size(), rank = dt_rank();
    size_t min_size = 16, max_size = 1 << 20;
    MPI_Datatype type = MPI_FLOAT;
    MPI_Op op = MPI_SUM;
    static const struct option longopts[] = {
        {"min-size", required_argument, NULL, 'm'}, {"max-size", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'i'}, {"type", required_argument, NULL, 't'},
        {"op", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
        DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    opterr = rank == 0;          /* getopt's own complaints, from one rank only */
    for (int c; (c = getopt_long(argc, argv, "m:s:i:t:o:h", longopts, NULL)) != -1;) {
        switch (c) {
        case 'm': if (dt_parse_size(optarg, &min_size) || min_size < 1 || min_size > (1u << 30))
                      dt_usage_error(usage, "--min-size wants a size from 1 to 1G, like 4 or 1K");
                  break;
        case 's': if (dt_parse_size(optarg, &max_size) || max_size < 1 || max_size > (1u << 30))
                      dt_usage_error(usage, "--max-size wants a size from 1 to 1G, like 64K");
                  break;
        case 'i': if (dt_parse_int(optarg, 1, MAXITERS, &iters))
                      dt_usage_error(usage, "--iters wants a whole number from 1 to 1000");
                  break;
        case 't': if ((type = dt_type_from_name(optarg)) == MPI_DATATYPE_NULL)
                      dt_usage_error(usage, "--type wants float, double, int or half");
                  break;
        case 'o': if ((op = dt_op_from_name(optarg)) == MPI_OP_NULL)
                      dt_usage_error(usage, "--op wants sum, max, min or prod");
                  break;
        case 'h': dt_usage_help(usage);
        case DT_OPT_DEVICE: case DT_OPT_TRACE: break;
        default: dt_usage_error(usage, NULL);
        }
    }
    if (optind < argc)
        dt_usage_error(usage, "this lesson takes no arguments besides options");
    if (min_size > max_size)
        dt_usage_error(usage, "--min-size is larger than --max-size");
    size_t esize = dt_type_size(type);
    MPI_Op mpi_op = type == DT_HALF ? dt_half_mpi_op(op) : op;   /* fp16 needs dtlab's op */

    /* ==== the measurements: every algorithm at every size ====
     * Each rank keeps its own times and byte counts; they are combined across ranks
     * once at the end (a run lasts as long as its slowest rank), so that MPI's own
     * collectives stay out of the loop. */
    size_t sizes[32];
    int nsizes = 0;
    for (size_t size = min_size; size <= max_size && nsizes < 32; size *= 16)
        sizes[nsizes++] = size;
    double *t = malloc(sizeof(double) * nsizes * NALGO * iters);
    unsigned long long *sent = calloc((size_t)nsizes * NALGO, sizeof *sent);
    int ok = 1;
    for (int k = 0; k < nsizes; k++) {
        int count = sizes[k] / esize > 0 ? (int)(sizes[k] / esize) : 1;
        size_t nbytes = (size_t)count * esize;
        void *in_h = dt_malloc(nbytes, DT_CPU), *want = dt_malloc(nbytes, DT_CPU);
        void *in = dt_malloc(nbytes, dt_device()), *out = dt_malloc(nbytes, dt_device());
        dt_fill_test_data(in_h, count, type, op, (unsigned)k, rank);
        dt_memcpy(in, in_h, nbytes);
        MPI_Allreduce(in_h, want, count, type, mpi_op, MPI_COMM_WORLD);   /* the reference */
        for (int a = 0; a < NALGO; a++) {
            double *ta = t + ((size_t)k * NALGO + a) * iters;
            if (a == MPI_ALGO) {                  /* MPI's own, on host memory */
                time_runs(MPI_Allreduce, in_h, want, count, type, mpi_op, iters, ta);
                continue;
            }
            /* one run for the check and the byte count, then the timed runs */
            dt_memzero(out, nbytes);
            dt_bytes_reset();
            algos[a].fn(in, out, count, type, op, MPI_COMM_WORLD);
            sent[k * NALGO + a] = dt_bytes_sent();
            ok &= dt_check_close(out, want, count, type, 0, algos[a].name, MPI_COMM_WORLD);
            time_runs(algos[a].fn, in, out, count, type, op, iters, ta);
        }
        dt_free(in);
        dt_free(out);
        dt_free(in_h);
        dt_free(want);
    }
    MPI_Allreduce(MPI_IN_PLACE, t, nsizes * NALGO * iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, sent, nsizes * NALGO, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                  MPI_COMM_WORLD);

    /* ==== the table: one row per size ==== */
    dt_printf0("Allreduce (%s) of %s values on %d rank%s: the median of %d timed runs after a\n"
               "warm-up; \"sent\" is the most bytes any one rank sent (dt_bytes_sent).\n\n%9s ",
               dt_op_name(op), dt_type_name(type), n, n == 1 ? "" : "s", iters, "");
    for (int a = 0; a < MPI_ALGO; a++)
        dt_printf0("| %-23s", algos[a].name);
    dt_printf0("| %s\n%9s ", algos[MPI_ALGO].name, "size");
    for (int a = 0; a < MPI_ALGO; a++)
        dt_printf0("| %11s %10s ", "time", "sent");
    dt_printf0("| %11s\n", "time");
    for (int k = 0; k < nsizes; k++) {
        char sz[32], b[32];
        size_t nbytes = (sizes[k] / esize > 0 ? sizes[k] / esize : 1) * esize;
        dt_printf0("%9s ", dt_format_bytes((double)nbytes, sz, sizeof sz));
        for (int a = 0; a < NALGO; a++) {
            double m = median(t + ((size_t)k * NALGO + a) * iters, iters);
            if (a == MPI_ALGO)
                dt_printf0("| %8.1f us\n", m * 1e6);
            else
                dt_printf0("| %8.1f us %10s ", m * 1e6,
                           dt_format_bytes((double)sent[k * NALGO + a], b, sizeof b));
        }
    }
    free(t);
    free(sent);

    /* ==== what the table says ==== */
    dt_printf0("\nnaive: rank 0 receives and sends (N-1)*S, one message after another.\n"
               "ring:  2(N-1)/N*S per rank, in 2(N-1) steps: the fewest bytes, the most steps.\n"
               "rd:    log2(N)*S per rank in log2(N) steps: few steps, more bytes%s.\n"
               "dt_allreduce takes rd below %d KiB and the ring above, as MPI libraries do.\n"
               "MPI's own waits by spinning, which costs it dearly when ranks outnumber cores\n"
               "(lesson 02).\n",
               (n & (n - 1)) ? "\n       (N is not a power of two: 2 more steps fold the extra "
                               "ranks in)" : "",
               DT_ALLREDUCE_RD_MAX / 1024);
    dt_printf0("check: %s\n", ok ? "naive, ring and rd match MPI_Allreduce at every size"
                                 : "FAILED: an algorithm differs from MPI_Allreduce");

    /* ==== teardown ==== */
    dt_finalize();
    return ok ? 0 : 1;
}
