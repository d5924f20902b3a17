/* Lesson 05: gather and scatter, along a binomial tree.
 *
 * What it teaches: gather brings every rank's block to one root, in rank order; scatter
 * is its mirror, the root dealing block r to rank r. Unlike reduce, nothing gets smaller
 * on the way: in a tree, a rank forwards its whole subtree's blocks in one message. So
 * the root still receives (N-1) blocks, but from only ceil(log2 N) senders, and the ranks
 * in the middle of the tree carry more than their own share.
 *
 * The code: lib/collectives/gather.c (dt_gather), lib/collectives/scatter.c (dt_scatter),
 * both on the tree of lesson 03 (lib/schedule.c: dt_tree_subtree_size).
 *
 * Run:  mpiexec -n 4 build/lessons/05_gather_scatter
 *       mpiexec -n 5 build/lessons/05_gather_scatter --root 2 --count 1000 --type double
 */
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 05_gather_scatter [options]\n"
    "Gathers every rank's block onto a root with dt_gather, then deals them back out\n"
    "with dt_scatter, and counts what each rank sends.\n"
    "  --count C           elements in each rank's block, 0 to 2^28/N (default 3)\n"
    "  --root R            the rank that gathers and scatters, 0 to N-1 (default 0)\n"
    "  --type T            float|double|int|half (default float)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SHOW = 4 };     /* values shown per block */

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank();
    dt_opts opts = {.count = 3, .count_max = (1 << 28) / n, .root = 0, .type = MPI_FLOAT};
    dt_parse_options(argc, argv, "crt", usage, &opts);
    int count = opts.count, root = opts.root;
    MPI_Datatype type = opts.type;

    size_t blk = (size_t)count * dt_type_size(type);   /* S: one rank's block, in bytes */
    void *mine_h = dt_malloc(blk, DT_CPU), *all_h = dt_malloc(n * blk, DT_CPU);
    void *want = dt_malloc(n * blk, DT_CPU);
    dt_fill_test_data(mine_h, count, type, MPI_SUM, 5, rank);
    void *mine = dt_malloc(blk, dt_device()), *back = dt_malloc(blk, dt_device());
    void *all = dt_malloc(n * blk, dt_device());      /* only the root's is used */
    dt_memcpy(mine, mine_h, blk);

    /* ==== the idea ====
     * The tree of lesson 03 (dt_tree_parent, dt_tree_children). In a gather each rank
     * waits for its children's blocks, appends them to its own, and sends the lot up: a
     * rank with a subtree of k ranks sends k blocks. Scatter runs the same tree down. */
    dt_printf0("Gather %d %s value%s from each of %d rank%s onto rank %d, then scatter them\n"
               "back.\n",
               count, dt_type_name(type), count == 1 ? "" : "s", n, n == 1 ? "" : "s", root);

    /* ==== the library calls ==== */
    dt_bytes_reset();
    dt_gather(mine, count, type, all, count, type, root, MPI_COMM_WORLD);
    unsigned long long sent[2] = {dt_bytes_sent(), 0};
    dt_bytes_reset();
    dt_scatter(all, count, type, back, count, type, root, MPI_COMM_WORLD);
    sent[1] = dt_bytes_sent();

    /* ==== the check: MPI_Gather and MPI_Scatter on the host copies ==== */
    MPI_Gather(mine_h, count, type, want, count, type, root, MPI_COMM_WORLD);
    int ok = dt_check_close(rank == root ? all : want, want, n * count, type, 0, "gather",
                            MPI_COMM_WORLD);
    MPI_Scatter(want, count, type, mine_h, count, type, root, MPI_COMM_WORLD);
    ok &= dt_check_close(back, mine_h, count, type, 0, "scatter", MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    char line[1024] = "", b[32];
    if (rank == root && count > 0) {          /* the gathered buffer, block by block */
        dt_memcpy(all_h, all, n * blk);
        int k = snprintf(line, sizeof line, "\nrank %d gathered, in rank order:\n", root);
        for (int r = 0; r < n && k < 900; r++) {
            k += snprintf(line + k, sizeof line - k, "  block %d (from rank %d):", r, r);
            for (int i = 0; i < count && i < SHOW; i++)
                k += snprintf(line + k, sizeof line - k, " %6g",
                              dt_elem(all_h, (size_t)r * count + i, type));
            k += snprintf(line + k, sizeof line - k, "%s\n", count > SHOW ? " ..." : "");
        }
    }
    dt_printf_ordered("%s", line);             /* only the root has something to say */

    dt_printf0("\nS = %d %s value%s x %zu B = %s per block. A rank's subtree is itself and\n"
               "the ranks below it in the tree: it sends them all up in the gather, and\n"
               "hands on all but its own block in the scatter.\n\n", count,
               dt_type_name(type), count == 1 ? "" : "s", dt_type_size(type),
               dt_format_bytes((double)blk, b, sizeof b));
    dt_printf0("%4s  %6s  %7s | %12s  %11s | %13s  %13s\n", "rank", "parent", "subtree",
               "gather sent", "subtree*S", "scatter sent", "(subtree-1)*S");
    int parent = dt_tree_parent(rank, root, n), size = dt_tree_subtree_size(rank, root, n);
    char par[16] = "root", g[32], s[32], gf[32], sf[32];
    if (parent >= 0)
        snprintf(par, sizeof par, "%d", parent);
    dt_format_bytes((double)sent[0], g, sizeof g);
    dt_format_bytes((double)sent[1], s, sizeof s);
    dt_format_bytes((double)size * blk, gf, sizeof gf);
    dt_format_bytes((double)(size - 1) * blk, sf, sizeof sf);
    dt_printf_ordered("%4d  %6s  %7d | %12s  %11s | %13s  %13s\n", rank, par, size, g,
                      rank == root ? "(keeps all)" : gf, s, sf);
    if (n > 2 && dt_log2_ceil(n) < n - 1)
        dt_printf0("\nThe root receives %d blocks in a gather whatever the algorithm; the tree\n"
                   "takes them in %d messages instead of %d.\n", n - 1, dt_log2_ceil(n), n - 1);
    else if (n > 2)                          /* N = 3: log2 N rounds up to N - 1 */
        dt_printf0("\nThe root receives %d blocks in a gather whatever the algorithm. At %d "
                   "ranks\nthe tree takes them in %d messages, as many as one from each "
                   "rank; from 4\nranks on it takes fewer (log2 N, rounded up, against "
                   "N-1).\n", n - 1, n, dt_log2_ceil(n));
    /* the measured bytes are the formulas' (the root keeps its gathered blocks) */
    int bytes_ok = sent[0] == (rank == root ? 0 : size * blk) && sent[1] == (size - 1) * blk;
    MPI_Allreduce(MPI_IN_PLACE, &bytes_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    dt_printf0("check: %s\n", !ok ? "FAILED: differs from MPI_Gather or MPI_Scatter"
                                 : !bytes_ok ? "FAILED: a rank sent other than its formula"
                                 : "matches MPI_Gather and MPI_Scatter; every rank sent what "
                                   "its formula says");
    dt_printf0("The code: lib/collectives/gather.c (dt_gather), lib/collectives/scatter.c "
               "(dt_scatter)\n");
    ok &= bytes_ok;

    /* ==== teardown ==== */
    dt_free(mine);
    dt_free(back);
    dt_free(all);
    dt_free(mine_h);
    dt_free(all_h);
    dt_free(want);
    dt_finalize();
    return ok ? 0 : 1;
}
