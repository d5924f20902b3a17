/* Lesson 08: the ring allreduce, step by step: reduce-scatter, then allgather.
 *
 * What it teaches: data-parallel training sums every rank's gradients onto every rank
 * after each backward pass: an allreduce. The ring does it in two phases of N-1 steps,
 * each rank talking only to its neighbours, and each rank sends 2(N-1)/N * S bytes for
 * S bytes of gradients: less than 2S whatever N is. This lesson prints every rank's
 * buffer after every step, so you can watch the chunks travel and fill up.
 *
 * Run:  mpiexec -n 4 build/lessons/08_ring_allreduce
 *       mpiexec -n 5 build/lessons/08_ring_allreduce --count 7 --op max
 *       mpiexec -n 4 build/lessons/08_ring_allreduce --count 4M   (just timed)
 *       mpiexec -n 4 build/lessons/08_ring_allreduce --trace ring.trace   (then dtviz)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 08_ring_allreduce [options]\n"
    "Runs dt_allreduce_ring and prints every rank's chunks after every step (for small\n"
    "counts), or times it (for large ones).\n"
    "  --count N           elements per rank, 0 to 2^28 (default N+1, so the chunks are\n"
    "                      uneven); steps are shown up to 3*N elements\n"
    "  --type T            float|double|int|half (default float)\n"
    "  --op OP             sum|max|min|prod (default sum)\n"
    "  --iters N           timed allreduces when the steps are not shown, 1 to 10^6;\n"
    "                      the median is shown (default 5, after one warm-up)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SHOW_RANKS = 6 };     /* steps are printed for up to this many ranks */

/* ==== the table: called by the hook after every step, on every rank ====
 * Every rank's buffer and byte count go to rank 0 (plain MPI, so not counted in
 * dtlab's bytes, and waited for politely as in lesson 02), which prints one row per
 * rank. [ ] marks the chunk a rank received in this step. */
static void show_step(const char *coll, const char *phase, int step, const void *buf,
                      int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)coll; (void)ctx;
    int rank, n, rs = strcmp(phase, "reduce-scatter") == 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    size_t nbytes = (size_t)count * dt_type_size(type);
    char *mine = malloc(nbytes), *all = malloc(nbytes * n);
    unsigned long long sent = dt_bytes_sent(), *sent_all = malloc(sizeof sent * n);
    dt_memcpy(mine, buf, nbytes);
    MPI_Request req[2];
    MPI_Igather(mine, (int)nbytes, MPI_BYTE, all, (int)nbytes, MPI_BYTE, 0, comm, &req[0]);
    MPI_Igather(&sent, 1, MPI_UNSIGNED_LONG_LONG, sent_all, 1, MPI_UNSIGNED_LONG_LONG, 0,
                comm, &req[1]);
    dt_waitall(2, req);

    if (rank == 0) {
        if (step < 0)
            printf("\nstart: each rank's own data\n");
        else
            printf("\n%s step %d: each rank %s\n", phase, step,
                   rs ? "sends a chunk right, and adds the one it gets to its own"
                      : "passes on a reduced chunk; the receiver copies it");
        size_t lo, hi, big;
        char s[32];
        static int vw = 1;            /* the widest value so far: columns only grow */
        for (size_t i = 0; i < (size_t)count * n; i++)
            vw = (int)fmax(vw, snprintf(s, sizeof s, "%g", dt_elem(all, i, type)));
        dt_chunk_bounds((size_t)count, n, 0, &lo, &big);    /* chunk 0 is the largest */
        int cw = (int)fmax(big * (vw + 1) + 1, 8);
        printf("  rank |");
        for (int c = 0; c < n; c++)
            printf(" chunk %-*d|", cw - 6, c);
        printf(" this step        | bytes sent\n");
        for (int r = 0; r < n; r++) {
            printf("  %4d |", r);
            int rc = -1;
            if (step >= 0) {
                int sc = rs ? dt_ring_rs_send_chunk(r, n, step) : dt_ring_ag_send_chunk(r, n, step);
                rc = rs ? dt_ring_rs_recv_chunk(r, n, step) : dt_ring_ag_recv_chunk(r, n, step);
                snprintf(s, sizeof s, "sent c%d, got c%d", sc, rc);
            }
            for (int c = 0; c < n; c++) {
                dt_chunk_bounds((size_t)count, n, c, &lo, &hi);
                int w = printf("%s", c == rc ? "[" : " ");
                for (size_t i = lo; i < hi; i++)
                    w += printf("%*g%s", vw, dt_elem(all + r * nbytes, i, type),
                                i + 1 < hi ? " " : "");
                w += printf("%s", c == rc ? "]" : "");
                printf("%*s|", cw + 1 - w, "");
            }
            printf(" %-16s | %llu B\n", step >= 0 ? s : "", sent_all[r]);
        }
        if (step == n - 2)
            printf("%s\n", rs ? "reduce-scatter done: rank r holds chunk r reduced over all ranks."
                              : "allgather done: every rank holds every reduced chunk.");
    }
    free(mine);
    free(all);
    free(sent_all);
}

/* One ring allreduce, as dt_time_median runs it: run_ring(ctx). */
struct ring_run { const void *in; void *out; int count; MPI_Datatype type; MPI_Op op; };

static void run_ring(void *ctx)
{
    struct ring_run *r = ctx;
    dt_allreduce_ring(r->in, r->out, r->count, r->type, r->op, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank();
    dt_opts opts = {.count = n + 1, .type = MPI_FLOAT, .op = MPI_SUM, .iters = 5};
    dt_parse_options(argc, argv, "ctoi", usage, &opts);
    int count = opts.count, iters = opts.iters;
    MPI_Datatype type = opts.type;
    MPI_Op op = opts.op;

    size_t nbytes = (size_t)count * dt_type_size(type);
    double formula = 2.0 * (n - 1) / n * (double)nbytes;       /* 2(N-1)/N * S */
    int show = count <= 3 * n && n <= SHOW_RANKS && n > 1 && count > 0;

    /* The input. To watch a sum, rank r puts 10^r in every element: the digits of a
     * partial sum then say whose data it holds (1011 = ranks 0, 1 and 3). That needs the
     * total, 11...1, to be exact in the type; otherwise, and for other ops, test data. */
    void *in_h = dt_malloc(nbytes, DT_CPU), *want = dt_malloc(nbytes, DT_CPU);
    double total = (pow(10, n) - 1) / 9;
    int digits = show && op == MPI_SUM;
    if (digits) {
        dt_elem_set(want, 0, type, total);    /* want as scratch: is the total exact? */
        digits = dt_elem(want, 0, type) == total;
    }
    if (digits)
        for (int i = 0; i < count; i++)
            dt_elem_set(in_h, (size_t)i, type, pow(10, rank));
    else
        dt_fill_test_data(in_h, count, type, op, 8, rank);
    void *in = dt_malloc(nbytes, dt_device()), *out = dt_malloc(nbytes, dt_device());
    dt_memcpy(in, in_h, nbytes);

    /* ==== the idea: a picture of the ring, the chunks, the two phases ==== */
    char ring[128] = "+-->", bar[128] = "+", sizes[128] = "", b[32];
    for (int r = 0, k = 4; r < n && k < 100; r++)
        k += snprintf(ring + k, sizeof ring - k, " %d %s", r, r < n - 1 ? "-->" : "--+");
    memset(bar + 1, '-', strlen(ring) - 2);
    strcpy(bar + strlen(ring) - 1, "+");
    for (int c = 0, k = 0; c < n && k < 100; c++) {
        size_t lo, hi;
        dt_chunk_bounds((size_t)count, n, c, &lo, &hi);
        k += snprintf(sizes + k, sizeof sizes - k, " %zu", hi - lo);
    }
    if (n == 1)
        dt_printf0("With one rank an allreduce is a copy: run mpiexec -n 4 to see the ring.\n");
    else {
        dt_printf0("Ring allreduce (%s) of %d %s values on %d ranks: reduce-scatter, "
                   "then allgather.\n\n"
                   "    %s     each rank sends only to its right neighbour\n"
                   "    |%*s|     and receives only from its left one\n    %s\n\n",
                   dt_op_name(op), count, dt_type_name(type), n, ring,
                   (int)strlen(ring) - 2, "", bar);
        dt_printf0("The buffer, S = %s, is cut into N = %d chunks, one per rank.\n"
                   "Elements per chunk:%s.%s\n"
                   "1. reduce-scatter, N-1 = %d steps: each rank sends one chunk right and "
                   "adds the\n   chunk arriving from its left into its own copy. Rank r ends "
                   "up with chunk r\n   reduced over all ranks.\n"
                   "2. allgather, N-1 = %d steps: each rank passes the reduced chunk it got "
                   "last to\n   its right, which copies it. Every rank ends up with every "
                   "reduced chunk.\n"
                   "Each rank sends 2(N-1) chunks of about S/N: 2(N-1)/N * S = %.10g B,\n"
                   "under 2S for any N.\n",
                   dt_format_bytes((double)nbytes, b, sizeof b), n,
                   n > 12 ? " about count/N" : sizes,
                   count % n ? "\n(The count does not divide by N: the first count mod N chunks "
                               "get one more.)" : "", n - 1, n - 1, formula);
    }
    if (digits)
        dt_printf0("\nRank r starts with 10^r in every element, so a sum's digits say whose\n"
                   "data it holds: 1011 = ranks 0, 1 and 3.\n");
    if (show)
        dt_printf0("[ ] marks the chunk each rank received in that step; bytes sent is the rank's\n"
                   "running dt_bytes_sent().\n");

    /* ==== the library call, shown step by step or timed ==== */
    dt_bytes_reset();
    if (show) {
        /* in place, so the table shows whole buffers: out of place, dt_allreduce_ring
         * writes each chunk of out only when a result for it arrives */
        dt_memcpy(out, in, nbytes);
        show_step("allreduce_ring", "start", -1, out, count, type, MPI_COMM_WORLD, NULL);
        dt_set_step_hook(show_step, NULL);
        dt_allreduce_ring(MPI_IN_PLACE, out, count, type, op, MPI_COMM_WORLD);
        dt_set_step_hook(NULL, NULL);
    } else {
        dt_allreduce_ring(in, out, count, type, op, MPI_COMM_WORLD);
    }
    unsigned long long sent = dt_bytes_sent(), most, least;
    double t = 0;
    if (!show) {
        struct ring_run run = {in, out, count, type, op};
        t = dt_time_median(run_ring, &run, iters, MPI_COMM_WORLD);
    }

    /* ==== the check: MPI_Allreduce on the host copies (fp16 needs dtlab's MPI op) ==== */
    MPI_Op mpi_op = type == DT_HALF ? dt_half_mpi_op(op) : op;
    MPI_Allreduce(in_h, want, count, type, mpi_op, MPI_COMM_WORLD);
    int ok = dt_check_close(out, want, count, type, 0, "allreduce_ring", MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    MPI_Allreduce(&sent, &most, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&sent, &least, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (most == least)
        dt_printf0("\nBytes sent by every rank: %llu B; 2(N-1)/N * S = %.10g B.\n", most, formula);
    else
        dt_printf0("\nBytes sent per rank: %llu to %llu B; 2(N-1)/N * S = %.10g B (the chunks are\n"
                   "uneven, so some ranks send an element more than others).\n", least, most,
                   formula);
    if (!show && n > 1) {
        char a[32], bw[32];
        dt_printf0("Time per allreduce: %.1f us, the median of %d runs (each lasts until the\n"
                   "slowest rank is done).\n"
                   "Bandwidth: algorithm %s/s (S / time), bus %s/s (x 2(N-1)/N, per link).\n",
                   t * 1e6, iters, dt_format_bytes(nbytes / t, a, sizeof a),
                   dt_format_bytes(formula / t, bw, sizeof bw));
        if (count > 0 && n > 1 && n <= SHOW_RANKS)
            dt_printf0("(The steps are printed for --count up to 3*N = %d.)\n", 3 * n);
    }
    dt_printf0("check: %s\n", ok ? "matches MPI_Allreduce" : "FAILED: differs from MPI_Allreduce");

    /* ==== teardown ==== */
    dt_free(in);
    dt_free(out);
    dt_free(in_h);
    dt_free(want);
    dt_finalize();
    return ok ? 0 : 1;
}
