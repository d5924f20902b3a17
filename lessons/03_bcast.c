/* Lesson 03: broadcast, naive against a binomial tree.
 *
 * What it teaches: one rank (the root) has data everyone needs: the initial weights of
 * a model, say. The naive way, the root sending the whole buffer to each rank in turn,
 * takes N-1 rounds and the root sends (N-1)*S bytes. A binomial tree lets every rank
 * that already has the data pass it on, doubling the ranks that hold it each round:
 * ceil(log2 N) rounds, and the root sends only ceil(log2 N)*S.
 *
 * The code: lib/collectives/bcast.c (dt_bcast, the tree; dt_bcast_naive), and the tree's
 * shape in lib/schedule.c (dt_tree_parent, dt_tree_children, dt_tree_round).
 *
 * Run:  mpiexec -n 4 build/lessons/03_bcast
 *       mpiexec -n 5 build/lessons/03_bcast --root 2 --max-size 16M
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 03_bcast [options]\n"
    "Times naive and tree broadcasts of growing sizes (floats), and checks them.\n"
    "  --root R            the rank that has the data, 0 to N-1 (default 0)\n"
    "  --max-size B        largest buffer in bytes, 4 to 1G, e.g. 64K, 16M (default\n"
    "                      1M); sizes grow x16 from 4 B, and B itself (rounded down\n"
    "                      to whole floats) is always the last row\n"
    "  --iters K           timed broadcasts per size and algorithm, 1 to 10^6; the\n"
    "                      median is shown, and the spread (default 5, after one\n"
    "                      warm-up)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

typedef int (*bcast_fn)(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);

/* One broadcast, as dt_time_runs runs it: fn(ctx). */
struct bcast_run { bcast_fn fn; void *buf; int count, root; };

static void run_bcast(void *ctx)
{
    struct bcast_run *b = ctx;
    b->fn(b->buf, b->count, MPI_FLOAT, b->root, MPI_COMM_WORLD);
}

/* One algorithm at one size: runs it once and checks it against want (the root's data,
 * which MPI_Bcast delivered), then times it. Returns 1 if the check passed; *t is the
 * timing of a broadcast, *root_sent the bytes the root sent. */
static int try_bcast(bcast_fn fn, const char *name, void *buf, const void *want, int count,
                     int root, int iters, dt_timing *t, size_t *root_sent)
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

    struct bcast_run run = {fn, buf, count, root};
    *t = dt_time_runs(run_bcast, &run, iters, MPI_COMM_WORLD);
    return ok;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    dt_opts opts = {.root = 0, .iters = 5, .max_size = 1 << 20};
    dt_parse_options(argc, argv, "rsi", usage, &opts);
    if (opts.max_size < sizeof(float))
        dt_usage_error(usage, "--max-size wants at least 4 bytes: one float");
    int root = opts.root, iters = opts.iters, n = dt_size();
    size_t max_size = opts.max_size / sizeof(float) * sizeof(float);   /* whole floats */

    /* ==== the idea: the tree, round by round ====
     * dt_bcast follows lib/schedule.h: rank r receives from dt_tree_parent(r) in round
     * dt_tree_round(r), and passes the data on to its own children in later rounds. The
     * table below is computed from those same functions (dtviz draws them too). The
     * rows are built first, so that the holders column lines up. */
    int rounds = dt_log2_ceil(n);
    dt_printf0("Broadcast from rank %d to %d rank%s.\n\n"
               "naive: rank %d sends the whole buffer to every other rank in turn: %d round%s.\n"
               "tree:  every rank that has the data sends it on, so the holders (at most) double\n"
               "       each round: ceil(log2 %d) = %d round%s (dt_tree_round, dt_tree_parent):\n",
               root, n, n == 1 ? "" : "s", root, n - 1, n == 2 ? "" : "s", n, rounds,
               rounds == 1 ? "" : "s");
    enum { MAXROUNDS = 32, ARROWS = 4, CELL = 64 };   /* at most ARROWS sends per row */
    char arrows[MAXROUNDS][CELL] = {{0}}, holders[MAXROUNDS][CELL] = {{0}};
    int width = 0;
    for (int k = 0; k < rounds; k++) {
        int a = 0, h = 0, sends = 0, held = 0;
        for (int r = 0; r < n; r++) {
            int got = dt_tree_round(r, root, n);          /* -1 for the root */
            if (got == k && sends++ < ARROWS)
                a += snprintf(arrows[k] + a, CELL - a, "%d -> %d   ",
                              dt_tree_parent(r, root, n), r);
            if (got <= k && held++ < 8)
                h += snprintf(holders[k] + h, CELL - h, " %d", r);
        }
        if (sends > ARROWS)
            snprintf(arrows[k] + a, CELL - a, "+ %d more   ", sends - ARROWS);
        if (held > 8)                        /* too many to list: count them */
            snprintf(holders[k], CELL, " %d ranks", held);
        width = (int)strlen(arrows[k]) > width ? (int)strlen(arrows[k]) : width;
    }
    dt_printf0("    before:  %-*s holders: %d\n", width, "", root);
    for (int k = 0; k < rounds; k++)
        dt_printf0("    round %d: %-*s holders:%s\n", k, width, arrows[k], holders[k]);

    /* ==== the library calls, the check and the numbers, size by size ==== */
    dt_printf0("\ntime: median of %d run%s (after a warm-up), each from a common start to the\n"
               "slowest rank's end; +- half the distance between the quartiles (999%% means\n"
               "that or more).\n"
               "root sends: dt_bytes_sent() on the root, S the size: (N-1)*S = %d*S naive,\n"
               "ceil(log2 N)*S = %d*S tree (the root's children).\n",
               iters, iters == 1 ? "" : "s", n - 1, rounds);
    dt_printf0("%10s | %31s | %31s\n%10s | %19s %11s | %19s %11s\n", "",
               "naive (dt_bcast_naive)", "tree (dt_bcast)", "size", "time",
               "root sends", "time", "root sends");
    int ok = 1, bytes_ok = 1, slower = 0;
    double spread = 0;
    char against[4][32];               /* the first sizes where the tree lost beyond noise */
    for (size_t size = 4;; size = size * 16 < max_size ? size * 16 : max_size) {
        int count = (int)(size / sizeof(float));
        void *buf = dt_malloc(size, dt_device()), *want = dt_malloc(size, DT_CPU);
        dt_fill_test_data(want, count, MPI_FLOAT, MPI_SUM, (unsigned)size, root);
        MPI_Bcast(want, count, MPI_FLOAT, root, MPI_COMM_WORLD);   /* the reference */

        dt_timing tn, tt;
        size_t b_naive, b_tree;
        ok &= try_bcast(dt_bcast_naive, "bcast_naive", buf, want, count, root, iters,
                        &tn, &b_naive);
        ok &= try_bcast(dt_bcast, "bcast_tree", buf, want, count, root, iters, &tt, &b_tree);
        bytes_ok &= b_naive == (size_t)(n - 1) * size && b_tree == (size_t)rounds * size;
        double sn = dt_timing_spread(tn), st = dt_timing_spread(tt);
        spread = sn > spread ? sn : spread;
        spread = st > spread ? st : spread;
        char s[32], bn[32], bt[32];
        dt_format_bytes((double)size, s, sizeof s);
        int lost = dt_timing_compare(tt, tn) > 0 && rounds < n - 1;
        if (lost && slower < 4)
            snprintf(against[slower], sizeof against[0], "%s", s);
        slower += lost;
        dt_printf0("%10s | %9.1f us +-%3.0f%% %11s | %9.1f us +-%3.0f%% %11s\n", s,
                   tn.median * 1e6, 100 * fmin(sn, 9.99),
                   dt_format_bytes((double)b_naive, bn, sizeof bn),
                   tt.median * 1e6, 100 * fmin(st, 9.99),
                   dt_format_bytes((double)b_tree, bt, sizeof bt));
        dt_free(buf);
        dt_free(want);
        if (size == max_size)       /* sizes grow x16, and the last row is max_size */
            break;
    }
    if (rounds < n - 1)             /* from 4 ranks on */
        dt_printf0("\nBoth move (N-1)*S bytes in all; the tree spreads the sending over the\n"
                   "ranks, so the root sends %d*S instead of %d*S, and the last rank has the\n"
                   "data after %d rounds instead of %d.\n", rounds, n - 1, rounds, n - 1);
    else if (n > 1)
        dt_printf0("\nWith %d ranks the tree takes as many rounds as the naive broadcast: try\n"
                   "-n 4 or more.\n", n);
    if (slower) {
        char list[160] = "";
        for (int i = 0, k = 0; i < slower && i < 4; i++)      /* "4 B, 64 B and 1 KiB" */
            k += snprintf(list + k, sizeof list - k, "%s%s", i == 0 ? ""
                          : i + 1 == slower ? " and " : ", ", against[i]);
        dt_printf0("Yet the tree was slower, by more than the spread, at %s%s.\n"
                   "Why it might: the tree's rounds form a chain (a rank passes the data on\n"
                   "only after it has received it, and only once the scheduler runs it),\n"
                   "while each naive send needs only the root and its receiver; and MPI\n"
                   "sends small messages eagerly (it copies them out and returns), so for\n"
                   "those the root's %d sends hardly wait at all. Counting rounds assumes\n"
                   "each costs a full message time, which holds for large messages on ranks\n"
                   "that each have a core.\n", list, slower > 4 ? " and more" : "", n - 1);
    }
    dt_timing_note(spread, n == 1 ? "With one rank nothing is sent: these times are the "
                                    "calls' own bookkeeping."
                   : rounds < n - 1
                   ? "Each tree round waits for the rank that received in the round before "
                     "to be running, so with ranks taking turns each round can cost a "
                     "scheduler switch: the tree's fewer rounds then show only where the "
                     "bytes, not the switches, take the time."
                   : "With this many ranks both broadcasts take the same rounds, so any "
                     "difference between them here is noise.");
    dt_printf0("check: %s\n", !ok ? "FAILED: a broadcast differs from MPI_Bcast"
                                 : !bytes_ok ? "FAILED: the root sent other than (N-1)*S "
                                               "and ceil(log2 N)*S"
                                 : "both match MPI_Bcast at every size; the root sent what "
                                   "the formulas say");
    dt_printf0("The code: lib/collectives/bcast.c (dt_bcast, dt_bcast_naive), lib/schedule.c "
               "(dt_tree_parent)\n");
    ok &= bytes_ok;

    /* ==== teardown ==== */
    dt_finalize();
    return ok ? 0 : 1;
}
