/* Lesson 09: three allreduce algorithms against each other, and against MPI's.
 *
 * What it teaches: there is no best allreduce, only a best one for a size. The naive
 * parameter server funnels everything through rank 0: (N-1)*S through one link.
 * Recursive doubling finishes in log2 N steps but sends the whole buffer at each:
 * log2(N)*S per rank, cheap for small buffers, where the cost is the number of steps.
 * The ring takes 2(N-1) steps but sends only 2(N-1)/N*S per rank: best for large
 * buffers, where the cost is bytes. MPI libraries (and dt_allreduce) switch by size.
 * The table is only as good as the machine: the lesson says how far its times spread,
 * and why a size's winner may not be the one dt_allreduce's rule picks.
 *
 * The code: lib/collectives/allreduce.c (dt_allreduce_naive, dt_allreduce_ring,
 * dt_allreduce_rd, and dt_allreduce, which picks by size; each algorithm's comment has
 * its step table and cost).
 *
 * Run:  mpiexec -n 4 build/lessons/09_allreduce_compare
 *       mpiexec -n 5 build/lessons/09_allreduce_compare --max-size 16M --iters 9
 */
#include <math.h>
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
    "                      is shown, and the spread (default 5, after one warm-up run)\n"
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

/* One allreduce, as dt_time_runs runs it: run_allreduce(ctx). */
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

    /* ==== the bytes each algorithm sends, at most, on one rank (S the buffer) ====
     * naive: rank 0 sends the result to N-1 workers. ring: rank r sends 2S less chunks r
     * and r+1 (lesson 08). rd: log2 p exchanges of S (p the largest power of two <= N),
     * and one more S for the ranks that hand a folded partner its result back. */
    int p2 = dt_pow2_floor(n), fold = p2 != n, rd_steps = dt_rd_steps(n) + 2 * fold;
    double rd_bytes = dt_rd_steps(n) + fold, ring_bytes = 2.0 * (n - 1) / n;   /* x S */

    /* ==== the table header ==== */
    char fr[64] = "";
    if (fold)
        snprintf(fr, sizeof fr, " (log2 %d + 1)*S = %g*S (one S more to unfold)", p2,
                 rd_bytes);
    else
        snprintf(fr, sizeof fr, " log2(N)*S = %g*S", rd_bytes);
    dt_printf0("Allreduce (%s) of %s values on %d rank%s, three rows per size:\n"
               "time: median of %d run%s (after a warm-up), each from a common start to the\n"
               "slowest rank's end; +-: half the distance between the quartiles, over the\n"
               "median. sent: the most bytes any one rank sent (dt_bytes_sent): naive\n"
               "(N-1)*S = %d*S, ring 2(N-1)/N*S = %.3g*S (a little more where N does not\n"
               "divide the count: lesson 08), rd%s.\n\n"
               "%10s      ", dt_op_name(op), dt_type_name(type), n, n == 1 ? "" : "s", iters,
               iters == 1 ? "" : "s", n - 1, ring_bytes, fr, "size");
    for (int a = 0; a < NALGO; a++)
        dt_printf0(" %14s", algos[a].name);
    dt_printf0("\n");

    /* ==== every algorithm at every size: check once, then time; a row per size ==== */
    enum { RING = 1, RD = 2, MAXROWS = 40 };
    struct row { size_t nbytes; double ratio; int rule_rd, won; } rows[MAXROWS];
    int nrows = 0, ok = 1, bytes_ok = 1;     /* won: RING, RD, or 0 within the spread */
    double spread = 0;
    size_t max = opts.max_size;
    for (size_t size = opts.min_size;; size = size * 16 < max ? size * 16 : max) {
        int count = (int)((size + esize - 1) / esize);     /* whole elements */
        size_t nbytes = (size_t)count * esize;
        void *in_h = dt_malloc(nbytes, DT_CPU), *want = dt_malloc(nbytes, DT_CPU);
        void *in = dt_malloc(nbytes, dt_device()), *out = dt_malloc(nbytes, dt_device());
        dt_fill_test_data(in_h, count, type, op, (unsigned)size, rank);
        dt_memcpy(in, in_h, nbytes);
        MPI_Allreduce(in_h, want, count, type, mpi_op, MPI_COMM_WORLD);   /* the reference */

        dt_timing t[NALGO];
        double sp[NALGO];                         /* the spreads, as the table shows */
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
            t[a] = dt_time_runs(run_allreduce, &run, iters, MPI_COMM_WORLD);
            sp[a] = dt_timing_spread(t[a]);   /* the same on every rank (dt_time_runs) */
            spread = fmax(spread, sp[a]);     /* the note's: the table's largest */
        }
        MPI_Allreduce(MPI_IN_PLACE, sent, NALGO, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
        size_t ring_most = 0, lo, hi, lo1, hi1;           /* the formulas, exactly */
        for (int r = 0; r < n && count > 0; r++) {
            dt_chunk_bounds((size_t)count, n, r, &lo, &hi);
            dt_chunk_bounds((size_t)count, n, (r + 1) % n, &lo1, &hi1);
            size_t r_sent = 2 * nbytes - (hi - lo + hi1 - lo1) * esize;
            ring_most = r_sent > ring_most ? r_sent : ring_most;
        }
        bytes_ok &= sent[0] == (size_t)(n - 1) * nbytes && sent[RING] == ring_most &&
                    sent[RD] == (n > 1 ? (size_t)rd_bytes * nbytes : 0);

        char sz[32], b[32];
        dt_printf0("%10s  time", dt_format_bytes((double)nbytes, sz, sizeof sz));
        for (int a = 0; a < NALGO; a++)
            dt_printf0(" %11.1f us", t[a].median * 1e6);
        dt_printf0("\n%10s    +-", "");
        for (int a = 0; a < NALGO; a++)         /* 999% means that or more */
            dt_printf0(" %13.0f%%", 100 * fmin(sp[a], 9.99));
        dt_printf0("\n%10s  sent", "");
        for (int a = 0; a < MPI_ALGO; a++)      /* MPI's own bytes are not counted */
            dt_printf0(" %14s", dt_format_bytes((double)sent[a], b, sizeof b));
        dt_printf0("\n");
        /* ring against rd: a winner only when the ranges printed do not overlap */
        int slower = dt_timing_compare(t[RING], t[RD]);
        if (nrows < MAXROWS)
            rows[nrows++] = (struct row){nbytes, t[RING].median / t[RD].median,
                nbytes < DT_ALLREDUCE_RD_MAX || count < n,
                slower > 0 ? RD : slower < 0 ? RING : 0};
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
               fold ? "\n       (N is not a power of two: 2 more steps fold the extra "
                      "ranks in)" : "",
               DT_ALLREDUCE_RD_MAX / 1024);

    /* ==== the measured winner against the rule, size by size ==== */
    int above = 0, below = 0;       /* rd won above the switch; the ring won below it */
    if (n > 1) {
        dt_printf0("\nring against rd, the two dt_allreduce picks from:\n"
                   "%10s  %8s  %-23s %s\n", "size", "ring/rd", "faster here", "the rule");
        for (int i = 0; i < nrows; i++) {
            char sz[32];
            int rule = rows[i].rule_rd ? RD : RING, odd = rows[i].won && rows[i].won != rule;
            above += odd && rule == RING;
            below += odd && rule == RD;
            dt_printf0("%10s  %7.2fx  %-23s %s%s\n",
                       dt_format_bytes((double)rows[i].nbytes, sz, sizeof sz), rows[i].ratio,
                       rows[i].won == RING ? "ring" : rows[i].won == RD ? "rd"
                                                    : "neither: within spread",
                       rule == RD ? "rd" : "ring", odd ? "   <- not the rule's pick" : "");
        }
    }
    dt_machine m = dt_machine_now();
    if (above || below) {
        /* the alpha-beta model: a step costs alpha, a byte 1/B; the ring wins above S* */
        double k = (2.0 * (n - 1) - rd_steps) / (rd_bytes - ring_bytes);
        dt_printf0("\nWhy a winner may not be the rule's pick: if a step costs alpha and a byte\n"
                   "1/B, the ring takes 2(N-1) = %d steps and sends %.3g*S, rd %d step%s and\n"
                   "%g*S", 2 * (n - 1), ring_bytes, rd_steps, rd_steps == 1 ? "" : "s",
                   rd_bytes);
        if (rd_bytes <= ring_bytes)
            dt_printf0(": with %d ranks the ring saves no bytes, so this model never\n"
                       "prefers it; the rule's switch at %d KiB is made for more ranks.\n", n,
                       DT_ALLREDUCE_RD_MAX / 1024);
        else
            dt_printf0(", so the ring is faster above S* = %.3g*alpha*B. The rule's %d KiB\n"
                       "is S* for alpha*B = %.1f KiB: a step of %.0f us at 4 GB/s, ranks with a\n"
                       "core each.\n", k, DT_ALLREDUCE_RD_MAX / 1024,
                       DT_ALLREDUCE_RD_MAX / 1024.0 / k, DT_ALLREDUCE_RD_MAX / k / 4e3);
        if (above && m.crowded)
            dt_printf0("Here rd won above the switch: %d ranks share %d core%s, so alpha is a\n"
                       "scheduler switch, up to milliseconds, and S* moves up a hundred- to a\n"
                       "thousandfold, past the sizes here.\n", m.ranks, m.cores,
                       m.cores == 1 ? "" : "s");
        else if (above && m.loaded)
            dt_printf0("Here rd won above the switch: other work shares the cores (load %.1f),\n"
                       "so a step may wait for a core; alpha grows, and S* with it.\n", m.load);
        else if (above)
            dt_printf0("Here rd won above the switch with a core per rank: this machine's\n"
                       "alpha*B is larger than the rule assumes (the rule is MPI libraries'\n"
                       "habit, not measured here). --max-size 64M shows where the ring takes\n"
                       "over.\n");
        if (below && (m.crowded || m.loaded))
            dt_printf0("Here the ring won below the switch, against this model too (taking\n"
                       "turns on cores makes alpha larger, not smaller): with %d run%s each,\n"
                       "the order in which the scheduler runs the ranks can favour either\n"
                       "algorithm more than the quartiles of so few runs show. More --iters\n"
                       "settle it.\n", iters, iters == 1 ? "" : "s");
        else if (below)
            dt_printf0("Here the ring won below the switch: this machine's alpha*B is smaller\n"
                       "than the rule assumes (the rule is MPI libraries' habit, not measured\n"
                       "here).\n");
    }
    char effect[400];
    int k = snprintf(effect, sizeof effect, "Step counts then dominate: each of the ring's %d "
                     "steps can cost a scheduler switch, against rd's %d", 2 * (n - 1),
                     rd_steps);
    k += snprintf(effect + k, sizeof effect - k, rd_bytes > ring_bytes
                  ? ", so rd can win at sizes where the ring would with a core per rank."
                  : " (with %d ranks both send S: the ring has only steps to lose).", n);
    if (m.crowded)
        snprintf(effect + k, sizeof effect - k, " MPI_Allreduce, whose waits spin (lesson "
                 "02), keeps cores from the ranks it waits for.");
    if (n > 1)
        dt_timing_note(spread, effect);
    dt_printf0("check: %s\n", !ok ? "FAILED: an algorithm differs from MPI_Allreduce"
                                 : !bytes_ok ? "FAILED: an algorithm sent other than its formula"
                                 : "naive, ring and rd match MPI_Allreduce at every size, and "
                                   "send\n       what their formulas say");
    dt_printf0("The code: lib/collectives/allreduce.c (dt_allreduce_naive, dt_allreduce_ring, "
               "dt_allreduce_rd)\n");
    ok &= bytes_ok;

    /* ==== teardown ==== */
    dt_finalize();
    return ok ? 0 : 1;
}
