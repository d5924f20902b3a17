/* Lesson 04: reduce, a broadcast run backwards.
 *
 * What it teaches: to combine every rank's buffer (sum, max, min, prod) at one root,
 * the partial results flow up the broadcast's binomial tree: the leaves send first, and
 * a rank sends to its parent once all its children have reported, adding their partial
 * results to its own. Every rank but the root sends exactly once, S bytes, and the root
 * has the answer after ceil(log2 N) steps.
 *
 * Run:  mpiexec -n 4 build/lessons/04_reduce
 *       mpiexec -n 5 build/lessons/04_reduce --root 3 --op max --type int --count 11
 */
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 04_reduce [options]\n"
    "Reduces every rank's buffer onto one root with dt_reduce, step by step.\n"
    "  --count N           elements per rank, 0 to 2^28 (default 8)\n"
    "  --root R            the rank that gets the result, 0 to N-1 (default 0)\n"
    "  --type T            float|double|int|half (default float)\n"
    "  --op OP             sum|max|min|prod (default sum)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SHOW = 8 };     /* the step table is printed for up to this many ranks */

/* The step hook: after each step, every rank sends rank 0 the first element of its
 * partial result and whether it sent to its parent in this step (its byte count grew).
 * Plain MPI_Gather, so dtlab's byte counts stay those of the reduce alone. */
struct watch { int root; size_t sent_before; int *done; };

static void show_step(const char *coll, const char *phase, int step, const void *buf,
                      int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)coll; (void)phase; (void)count;
    struct watch *w = ctx;
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    double raw, mine[2] = {0, dt_bytes_sent() > w->sent_before}, *all = NULL;
    w->sent_before = dt_bytes_sent();
    dt_memcpy(&raw, buf, dt_type_size(type));        /* element 0 (count >= 1 here) */
    mine[0] = dt_elem(&raw, 0, type);
    if (rank == 0)
        all = malloc(sizeof(double) * 2 * (size_t)n);
    MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, comm);
    if (rank == 0 && n <= SHOW) {
        printf("  %4d  ", step);
        for (int r = 0; r < n; r++) {
            char cell[32] = "     .";          /* done: sent in an earlier step */
            if (all[2 * r + 1])
                snprintf(cell, sizeof cell, "%6g -> %d", all[2 * r], dt_tree_parent(r, w->root, n));
            else if (!w->done[r])
                snprintf(cell, sizeof cell, "%6g", all[2 * r]);
            w->done[r] |= all[2 * r + 1] != 0;
            printf(" %-12s", cell);
        }
        printf("\n");
    }
    free(all);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    dt_opts opts = {.count = 8, .root = 0, .type = MPI_FLOAT, .op = MPI_SUM};
    dt_parse_options(argc, argv, "crto", usage, &opts);
    int count = opts.count, root = opts.root;
    MPI_Datatype type = opts.type;
    MPI_Op op = opts.op;
    int rank = dt_rank(), n = dt_size();
    size_t esize = dt_type_size(type), nbytes = (size_t)count * esize;

    /* Every rank's input, different per rank; a host copy for MPI's reference. */
    void *in_h = dt_malloc(nbytes, DT_CPU), *want = dt_malloc(nbytes, DT_CPU);
    void *got_h = dt_malloc(nbytes, DT_CPU);
    dt_fill_test_data(in_h, count, type, op, 4, rank);
    void *in = dt_malloc(nbytes, dt_device()), *out = dt_malloc(nbytes, dt_device());
    dt_memcpy(in, in_h, nbytes);

    /* ==== the idea ====
     * The tree of lesson 03 with the arrows turned round. A row per step: each rank's
     * partial result (its first element); "-> p" when it sends it to its parent p, and
     * "." once it has: it is done. */
    dt_printf0("Reduce (%s) of %d %s values from each of %d rank%s onto rank %d.\n", dt_op_name(op),
               count, dt_type_name(type), n, n == 1 ? "" : "s", root);
    if (n <= SHOW && count > 0)
        dt_printf0("Each step, every rank's partial result (its first value): \"-> p\" when it\n"
                   "sends it to its parent p, \".\" once it has.\n\n");
    int *done = calloc((size_t)n, sizeof *done);
    struct watch w = {root, 0, done};
    if (n <= SHOW && count > 0) {
        dt_printf0("  step  ");
        for (int r = 0; r < n; r++)
            dt_printf0(" rank %-7d", r);
        dt_printf0("\n  input ");
        double mine = dt_elem(in_h, 0, type), *all = malloc(sizeof(double) * (size_t)n);
        MPI_Gather(&mine, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        for (int r = 0; r < n; r++)
            dt_printf0(" %6g      ", all[r]);
        dt_printf0("\n");
        free(all);
    }

    /* ==== the library call ==== */
    dt_bytes_reset();
    dt_set_step_hook(show_step, &w);
    dt_reduce(in, out, count, type, op, root, MPI_COMM_WORLD);
    dt_set_step_hook(NULL, NULL);
    unsigned long long sent = dt_bytes_sent(), *sent_all = malloc(sizeof *sent_all * (size_t)n);
    MPI_Gather(&sent, 1, MPI_UNSIGNED_LONG_LONG, sent_all, 1, MPI_UNSIGNED_LONG_LONG, 0,
               MPI_COMM_WORLD);

    /* ==== the check: MPI_Reduce on the host copies (fp16 needs dtlab's MPI op) ==== */
    MPI_Op mpi_op = type == DT_HALF ? dt_half_mpi_op(op) : op;
    MPI_Reduce(in_h, want, count, type, mpi_op, root, MPI_COMM_WORLD);
    /* only the root has a result: the others compare want with itself */
    int ok = dt_check_close(rank == root ? out : want, want, count, type, 0, "reduce",
                            MPI_COMM_WORLD);
    /* again with MPI_IN_PLACE: the root's input waits in recvbuf, and is overwritten */
    if (rank == root)
        dt_memcpy(out, in, nbytes);
    dt_reduce(rank == root ? MPI_IN_PLACE : in, out, count, type, op, root, MPI_COMM_WORLD);
    ok &= dt_check_close(rank == root ? out : want, want, count, type, 0, "reduce in place",
                         MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    char line[256] = "", b[32];
    if (rank == root && count > 0) {
        dt_memcpy(got_h, out, nbytes);
        int k = snprintf(line, sizeof line, "\nrank %d now holds the %s:", root, dt_op_name(op));
        for (int i = 0; i < count && i < SHOW; i++)
            k += snprintf(line + k, sizeof line - k, " %g", dt_elem(got_h, i, type));
        snprintf(line + k, sizeof line - k, "%s\n", count > SHOW ? " ..." : "");
    }
    dt_printf_ordered("%s", line);     /* only the root has something to say */
    dt_printf0("\nbytes sent:");
    for (int r = 0; rank == 0 && r < n; r++)
        printf(" rank %d: %s%s", r, dt_format_bytes((double)sent_all[r], b, sizeof b),
               r + 1 < n ? "," : "\n");
    if (n > 2)
        dt_printf0("Every rank but the root sends its partial result once: S = %s. A naive\n"
                   "reduce (everyone sends to the root) moves as much, but the root takes the\n"
                   "N-1 messages one after another: %d steps instead of %d.\n",
                   dt_format_bytes((double)nbytes, b, sizeof b), n - 1, dt_log2_ceil(n));
    dt_printf0("check: %s\n", ok ? "matches MPI_Reduce (and in place)"
                                 : "FAILED: differs from MPI_Reduce");

    /* ==== teardown ==== */
    free(done);
    free(sent_all);
    dt_free(in);
    dt_free(out);
    dt_free(in_h);
    dt_free(want);
    dt_free(got_h);
    dt_finalize();
    return ok ? 0 : 1;
}
