/* Lesson 04: reduce, a broadcast run backwards.
 *
 * What it teaches: to combine every rank's buffer (sum, max, min, prod) at one root,
 * the partial results flow up the broadcast's binomial tree: the leaves send first, and
 * a rank sends to its parent once all its children have reported, adding their partial
 * results to its own. Every rank but the root sends exactly once, S bytes, and the root
 * has the answer after ceil(log2 N) steps.
 *
 * The code: lib/collectives/reduce.c (dt_reduce: the tree of lesson 03, run leaves
 * first), lib/ops.c (dt_reduce_local, the element-wise op), lib/schedule.c (the tree).
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
    "  --count C           elements per rank, 0 to 2^28 (default 8)\n"
    "  --root R            the rank that gets the result, 0 to N-1 (default 0)\n"
    "  --type T            float|double|int|half (default float)\n"
    "  --op OP             sum|max|min|prod (default sum)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SHOW = 8 };     /* the step table is printed for up to this many ranks */

/* The step hook: after each step, every rank sends rank 0 the first element of its
 * partial result and whether it sent to its parent in this step (its byte count grew).
 * Plain MPI_Gather, so dtlab's byte counts stay those of the reduce alone. Rank 0 keeps
 * them, a pair per rank per step, for the table printed after the reduce. */
struct watch { size_t sent_before; double *steps; };

static void watch_step(const char *coll, const char *phase, int step, const void *buf,
                       int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)coll; (void)phase; (void)count;
    struct watch *w = ctx;
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    double raw, mine[2] = {0, dt_bytes_sent() > w->sent_before};
    w->sent_before = dt_bytes_sent();
    dt_memcpy(&raw, buf, dt_type_size(type));        /* element 0 (count >= 1 here) */
    mine[0] = dt_elem(&raw, 0, type);
    MPI_Gather(mine, 2, MPI_DOUBLE, rank == 0 ? w->steps + 2 * (size_t)step * n : NULL, 2,
               MPI_DOUBLE, 0, comm);
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
    char b[32];

    /* Every rank's input, different per rank; a host copy for MPI's reference. */
    void *in_h = dt_malloc(nbytes, DT_CPU), *want = dt_malloc(nbytes, DT_CPU);
    void *got_h = dt_malloc(nbytes, DT_CPU);
    dt_fill_test_data(in_h, count, type, op, 4, rank);
    void *in = dt_malloc(nbytes, dt_device()), *out = dt_malloc(nbytes, dt_device());
    dt_memcpy(in, in_h, nbytes);

    /* ==== the idea ====
     * The tree of lesson 03 with the arrows turned round. A row per rank: its partial
     * result (its first element) after each step; "-> p" when it sends it to its parent
     * p, and "." once it has: it is done. */
    dt_printf0("Reduce (%s) of %d %s value%s from each of %d rank%s onto rank %d.\n",
               dt_op_name(op), count, dt_type_name(type), count == 1 ? "" : "s", n,
               n == 1 ? "" : "s", root);
    int steps = dt_log2_ceil(n), table = n <= SHOW && count > 0;
    struct watch w = {0, calloc((size_t)(2 * steps * n + 1), sizeof(double))};

    /* ==== the library call ==== */
    dt_bytes_reset();
    if (table)
        dt_set_step_hook(watch_step, &w);
    dt_reduce(in, out, count, type, op, root, MPI_COMM_WORLD);
    dt_set_step_hook(NULL, NULL);
    unsigned long long sent = dt_bytes_sent(), *sent_all = malloc(sizeof *sent_all * (size_t)n);
    MPI_Gather(&sent, 1, MPI_UNSIGNED_LONG_LONG, sent_all, 1, MPI_UNSIGNED_LONG_LONG, 0,
               MPI_COMM_WORLD);

    /* ==== the steps, rank by rank (rank 0 has what the hook gathered) ==== */
    double first = count > 0 ? dt_elem(in_h, 0, type) : 0, *inputs = malloc(sizeof(double) * n);
    MPI_Gather(&first, 1, MPI_DOUBLE, inputs, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (table && rank == 0) {
        printf("Each rank's partial result (its first value) after each step: \"-> p\" when\n"
               "it sends it to its parent p, \".\" once it has; then the bytes it sent.\n\n"
               "  rank    input");
        for (int t = 0; t < steps; t++)
            printf("   step %-6d", t);
        printf("  bytes sent\n");
        for (int r = 0; r < n; r++) {
            printf("  %4d %8g", r, inputs[r]);
            for (int t = 0, done = 0; t < steps; t++) {
                const double *v = w.steps + 2 * ((size_t)t * n + r);   /* value, sent? */
                char val[32] = ".", to[16] = "";
                if (v[1])
                    snprintf(to, sizeof to, " -> %d", dt_tree_parent(r, root, n));
                if (v[1] || !done)
                    snprintf(val, sizeof val, "%g", v[0]);
                printf(" %8s%-5s", val, to);
                done |= v[1] != 0;
            }
            printf(" %11s%s\n", dt_format_bytes((double)sent_all[r], b, sizeof b),
                   r == root ? "" : " = S");
        }
    }

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
    char line[256] = "";
    if (rank == root && count > 0) {
        dt_memcpy(got_h, out, nbytes);
        int k = snprintf(line, sizeof line, "\nrank %d now holds the %s:", root, dt_op_name(op));
        for (int i = 0; i < count && i < SHOW; i++)
            k += snprintf(line + k, sizeof line - k, " %g", dt_elem(got_h, i, type));
        snprintf(line + k, sizeof line - k, "%s\n", count > SHOW ? " ..." : "");
    }
    dt_printf_ordered("%s", line);     /* only the root has something to say */
    if (!table && n > 1 && rank == 0) {      /* no table: the least and most sent */
        unsigned long long lo = ~0ULL, hi = 0;
        for (int r = 0; r < n; r++)
            if (r != root) {
                lo = sent_all[r] < lo ? sent_all[r] : lo;
                hi = sent_all[r] > hi ? sent_all[r] : hi;
            }
        char l[32], h[32];
        printf("\nbytes sent: %s by the root, %s%s%s (= S) by each other rank\n",
               dt_format_bytes((double)sent_all[root], b, sizeof b),
               dt_format_bytes((double)lo, l, sizeof l), lo == hi ? "" : " to ",
               lo == hi ? "" : dt_format_bytes((double)hi, h, sizeof h));
    }
    int bytes_ok = 1;                  /* S from every rank but the root, which sends 0 */
    for (int r = 0; rank == 0 && r < n; r++)
        bytes_ok &= sent_all[r] == (r == root ? 0 : nbytes);
    MPI_Bcast(&bytes_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (n > 1)
        dt_printf0("Every rank but the root sends its partial result once, to its parent:\n"
                   "S = %d %s value%s x %zu B = %s. The root sends nothing.\n", count,
                   dt_type_name(type), count == 1 ? "" : "s", esize,
                   dt_format_bytes((double)nbytes, b, sizeof b));
    if (n > 3)
        dt_printf0("A naive reduce (everyone sends to the root) moves as much, but the root\n"
                   "takes the N-1 messages one after another: %d steps instead of %d.\n",
                   n - 1, dt_log2_ceil(n));
    dt_printf0("check: %s\n", !ok ? "FAILED: differs from MPI_Reduce"
                                 : !bytes_ok ? "FAILED: a rank sent other than S (0 at the root)"
                                 : "matches MPI_Reduce (and in place); every rank sent S, "
                                   "the root 0");
    dt_printf0("The code: lib/collectives/reduce.c (dt_reduce), lib/ops.c (dt_reduce_local)\n");
    ok &= bytes_ok;

    /* ==== teardown ==== */
    free(w.steps);
    free(inputs);
    free(sent_all);
    dt_free(in);
    dt_free(out);
    dt_free(in_h);
    dt_free(want);
    dt_free(got_h);
    dt_finalize();
    return ok ? 0 : 1;
}
