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
    "  --min-size B        smallest buffer in bytes, 1 to 1G (default 16)\n"
    "  --max-size B        largest buffer, 1 to 1G, e.g. 64K, 16M (default 1M); sizes\n"
    "                      grow x16, and the last row is this one; each rounds up to\n"
    "                      a whole element\n"
    "  --iters K           timed runs per size and algorithm, 1 to 10^6; the median\n"
    "                      is shown (default 5, after one warm-up run)\n"
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
enum { NALGO = sizeof algos / sizeof algos[0], MPI_ALGO = NALGO - 1 };

/* One allreduce, as dt_time_median runs it: run_allreduce(ctx). */
struct allreduce_run {
    allreduce_fn fn;
    const void *in;
    void *out;
    int count;
    MPI_Datatype type;
    MPI_Op op;
};

static void run_allreduce(void *ctx)
{
    struct allreduce_run *r = ctx;
    r->fn(r->in, r->out, r->count, r->type, r->op, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank();
    dt_opts opts = {.min_size = 16, .max_size = 1 << 20, .iters = 5, .type = MPI_FLOAT,
                    .op = MPI_SUM};
    dt_parse_options(argc, argv, "msito", usage, &opts);
    int iters = opts.iters;
    MPI_Datatype type = opts.type;
    MPI_Op op = opts.op;
    size_t esize = dt_type_size(type);
    MPI_Op mpi_op = type == DT_HALF ? dt_half_mpi_op(op) : op;   /* fp16 needs dtlab's op */

    /* ==== the table header ==== */
    dt_printf0("Allreduce (%s) of %s values on %d rank%s, two rows per size:\n"
               "time: median of %d run%s (after a warm-up), each from a common start to the\n"
               "slowest rank's end. sent: the most bytes any one rank sent (dt_bytes_sent).\n\n"
               "%10s      ", dt_op_name(op), dt_type_name(type), n, n == 1 ? "" : "s", iters,
               iters == 1 ? "" : "s", "size");
    for (int a = 0; a < NALGO; a++)
        dt_printf0(" %14s", algos[a].name);
    dt_printf0("\n");

    /* ==== every algorithm at every size: check once, then time; a row per size ==== */
    int ok = 1;
    size_t max = opts.max_size;
    for (size_t size = opts.min_size;; size = size * 16 < max ? size * 16 : max) {
        int count = (int)((size + esize - 1) / esize);     /* whole elements */
        size_t nbytes = (size_t)count * esize;
        void *in_h = dt_malloc(nbytes, DT_CPU), *want = dt_malloc(nbytes, DT_CPU);
        void *in = dt_malloc(nbytes, dt_device()), *out = dt_malloc(nbytes, dt_device());
        dt_fill_test_data(in_h, count, type, op, (unsigned)size, rank);
        dt_memcpy(in, in_h, nbytes);
        MPI_Allreduce(in_h, want, count, type, mpi_op, MPI_COMM_WORLD);   /* the reference */

        double t[NALGO];
        unsigned long long sent[NALGO] = {0};
        for (int a = 0; a < NALGO; a++) {
            struct allreduce_run run = {algos[a].fn, in, out, count, type, op};
            if (a == MPI_ALGO) {                  /* MPI's own, on host memory */
                run = (struct allreduce_run){MPI_Allreduce, in_h, want, count, type, mpi_op};
            } else {                              /* one run for the check and the bytes */
                dt_memzero(out, nbytes);
                dt_bytes_reset();
                algos[a].fn(in, out, count, type, op, MPI_COMM_WORLD);
                sent[a] = dt_bytes_sent();
                ok &= dt_check_close(out, want, count, type, 0, algos[a].name, MPI_COMM_WORLD);
            }
            t[a] = dt_time_median(run_allreduce, &run, iters, MPI_COMM_WORLD);
        }
        MPI_Allreduce(MPI_IN_PLACE, sent, NALGO, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);

        char sz[32], b[32];
        dt_printf0("%10s  time", dt_format_bytes((double)nbytes, sz, sizeof sz));
        for (int a = 0; a < NALGO; a++)
            dt_printf0(" %11.1f us", t[a] * 1e6);
        dt_printf0("\n%10s  sent", "");
        for (int a = 0; a < MPI_ALGO; a++)      /* MPI's own bytes are not counted */
            dt_printf0(" %14s", dt_format_bytes((double)sent[a], b, sizeof b));
        dt_printf0("\n");
        dt_free(in);
        dt_free(out);
        dt_free(in_h);
        dt_free(want);
        /* sizes grow x16, and the last row is max itself, unless it rounds to this one */
        if (size == max || (max + esize - 1) / esize == (size_t)count)
            break;
    }

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
