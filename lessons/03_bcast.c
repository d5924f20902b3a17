/* Lesson 03: broadcast, naive against a binomial tree.
 *
 * What it teaches: one rank (the root) has data everyone needs: the initial weights of
 * a model, say. The naive way, the root sending the whole buffer to each rank in turn,
 * takes N-1 rounds and the root sends (N-1)*S bytes. A binomial tree lets every rank
 * that already has the data pass it on, doubling the ranks that hold it each round:
 * ceil(log2 N) rounds, and the root sends only ceil(log2 N)*S.
 *
 * Run:  mpiexec -n 4 build/lessons/03_bcast
 *       mpiexec -n 5 build/lessons/03_bcast --root 2 --max-size 16M
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 03_bcast [options]\n"
    "Times naive and tree broadcasts of growing sizes (floats), and checks them.\n"
    "  --root R            the rank that has the data (default 0)\n"
    "  --max-size BYTES    largest buffer, e.g. 64K, 16M (default 1M); sizes grow x16 from 4 B\n"
    "  --iters N           broadcasts timed per size and algorithm (default 5)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

typedef int (*bcast_fn)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);

/* One algorithm at one size: runs it once and checks it against want (the root's data,
 * which MPI_Bcast delivered), then times iters more. Returns 1 if the check passed;
 * *secs is the slowest rank's time per broadcast, *root_sent the bytes the root sent. */
static int try_bcast(bcast_fn fn, const char *name, void *buf, const void *want, int count,
                     int root, int iters, double *secs, size_t *root_sent)
{
    size_t nbytes = (size_t)count * sizeof(float);
    if (dt_rank() == root)
        dt_memcpy(buf, want, nbytes);
    else
        dt_memzero(buf, nbytes);
    dt_bytes_reset();
    fn(buf, count, MPI_FLOAT, root, MPI_COMM_WORLD);
    unsigned long long sent = dt_bytes_sent();
    MPI_Bcast(&sent, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD);
    *root_sent = sent;
    int ok = dt_check_close(buf, want, count, MPI_FLOAT, 0, name, MPI_COMM_WORLD);

    MPI_Request req;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);     /* start together, waiting politely */
    dt_waitall(1, &req);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; i++)
        fn(buf, count, MPI_FLOAT, root, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters;
    MPI_Allreduce(&t, secs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return ok;
}

/* The step hook for the small broadcast: every rank says whether its buffer holds the
 * root's data yet (a plain MPI_Gather, not counted in dtlab's bytes), and rank 0 prints
 * the ranks that got it this round, with the parent they got it from. */
struct watch { void *want; size_t nbytes; int *had, root; };

static void show_round(const char *coll, const char *phase, int step, const void *buf,
                       int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    struct watch *w = ctx;
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    char *h = malloc(w->nbytes);
    dt_memcpy(h, buf, w->nbytes);
    int has = memcmp(h, w->want, w->nbytes) == 0, *all = malloc(sizeof(int) * (size_t)n);
    MPI_Gather(&has, 1, MPI_INT, all, 1, MPI_INT, 0, comm);
    if (rank == 0) {
        char arrows[256] = "", holders[256] = "";
        for (int r = 0, a = 0, b = 0; r < n; r++) {
            if (all[r] && !w->had[r] && a < 200)
                a += snprintf(arrows + a, sizeof arrows - a, "%d -> %d   ",
                              dt_tree_parent(r, w->root, n), r);
            if (all[r] && b < 200)
                b += snprintf(holders + b, sizeof holders - b, " %d", r);
            w->had[r] = all[r];
        }
        printf("    round %d: %-28s holders:%s\n", step, arrows, holders);
    }
    free(h);
    free(all);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int root = 0, iters = 5;
    size_t max_size = 1 << 20;
    static const struct option longopts[] = {
        {"root", required_argument, NULL, 'r'}, {"max-size", required_argument, NULL, 's'},
        {"iters", required_argument, NULL, 'i'}, {"help", no_argument, NULL, 'h'},
        DT_COMMON_LONGOPTS, {NULL, 0, NULL, 0}};
    opterr = dt_rank() == 0;     /* getopt's own complaints, from one rank only */
    for (int c; (c = getopt_long(argc, argv, "r:s:i:h", longopts, NULL)) != -1;) {
        switch (c) {
        case 'r': if (dt_parse_int(optarg, 0, dt_size() - 1, &root))
                      dt_usage_error(usage, "--root wants a rank from 0 to N-1");
                  break;
        case 's': if (dt_parse_size(optarg, &max_size) || max_size < 4 || max_size > (1u << 30))
                      dt_usage_error(usage, "--max-size wants a size from 4 to 1G, like 64K");
                  break;
        case 'i': if (dt_parse_int(optarg, 1, 1000000, &iters))
                      dt_usage_error(usage, "--iters wants a whole number of at least 1");
                  break;
        case 'h': dt_usage_help(usage);
        case DT_OPT_DEVICE: case DT_OPT_TRACE: break;
        default: dt_usage_error(usage, NULL);
        }
    }
    if (optind < argc)
        dt_usage_error(usage, "this lesson takes no arguments besides options");
    int rank = dt_rank(), n = dt_size();

    /* ==== the idea: watch the tree fill up ====
     * A small broadcast first, with a step hook that shows after each round who holds
     * the root's data. Each new holder got it from its parent in the tree
     * (dt_tree_parent, lib/schedule.c). */
    dt_printf0("Broadcast from rank %d to %d rank%s.\n\n"
               "naive: rank %d sends the whole buffer to every other rank in turn: %d round%s.\n"
               "tree:  every rank that has the data sends it on, so the holders (at most) double\n"
               "       each round: ceil(log2 %d) = %d round%s. Watch it (dt_set_step_hook):\n",
               root, n, n == 1 ? "" : "s", root, n - 1, n == 2 ? "" : "s", n, dt_log2_ceil(n),
               dt_log2_ceil(n) == 1 ? "" : "s");
    struct watch w = {dt_malloc(sizeof(float) * 4, DT_CPU), sizeof(float) * 4,
                      calloc((size_t)n, sizeof(int)), root};
    w.had[root] = 1;
    dt_fill_test_data(w.want, 4, MPI_FLOAT, MPI_SUM, 1, root);
    void *small = dt_malloc(w.nbytes, dt_device());
    if (rank == root)
        dt_memcpy(small, w.want, w.nbytes);
    else
        dt_memzero(small, w.nbytes);
    dt_printf0("    before:  %-28s holders: %d\n", "", root);
    dt_set_step_hook(show_round, &w);
    dt_bcast(small, 4, MPI_FLOAT, root, MPI_COMM_WORLD);
    dt_set_step_hook(NULL, NULL);
    dt_free(small);
    dt_free(w.want);
    free(w.had);

    /* ==== the library calls, the check and the numbers, size by size ==== */
    dt_printf0("\n%10s | %28s | %28s\n%10s | %12s %15s | %12s %15s\n", "", "naive (dt_bcast_naive)",
               "tree (dt_bcast)", "size", "time", "root sends", "time", "root sends");
    int ok = 1;
    for (size_t size = 4; size <= max_size; size *= 16) {
        int count = (int)(size / sizeof(float));
        void *buf = dt_malloc(size, dt_device()), *want = dt_malloc(size, DT_CPU);
        dt_fill_test_data(want, count, MPI_FLOAT, MPI_SUM, (unsigned)size, root);
        MPI_Bcast(want, count, MPI_FLOAT, root, MPI_COMM_WORLD);   /* the reference */

        double t_naive, t_tree;
        size_t b_naive, b_tree;
        ok &= try_bcast(dt_bcast_naive, "bcast_naive", buf, want, count, root, iters,
                        &t_naive, &b_naive);
        ok &= try_bcast(dt_bcast, "bcast_tree", buf, want, count, root, iters, &t_tree, &b_tree);
        char s[32], bn[32], bt[32];
        dt_printf0("%10s | %9.1f us %15s | %9.1f us %15s\n", dt_format_bytes((double)size, s, 32),
                   t_naive * 1e6, dt_format_bytes((double)b_naive, bn, 32), t_tree * 1e6,
                   dt_format_bytes((double)b_tree, bt, 32));
        dt_free(buf);
        dt_free(want);
    }
    if (n > 2)
        dt_printf0("\nBoth move (N-1)*S bytes in all; the tree spreads the sending over the\n"
                   "ranks, so the root sends %d*S instead of %d*S, and the last rank has the\n"
                   "data after %d rounds instead of %d.\n",
                   dt_log2_ceil(n), n - 1, dt_log2_ceil(n), n - 1);
    dt_printf0("check: %s\n", ok ? "both match MPI_Bcast at every size"
                                 : "FAILED: a broadcast differs from MPI_Bcast");

    /* ==== teardown ==== */
    dt_finalize();
    return ok ? 0 : 1;
}
