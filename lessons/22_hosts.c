/* Lesson 22: the alpha-beta model, measured between hosts.
 *
 * What it teaches: a message of n bytes costs about alpha + n * beta: alpha is the
 * latency (start-up, the network's delay), beta the time per byte (1 / bandwidth).
 * Measure both with a ping-pong, and the cost of every collective follows from its
 * steps and its bytes. For an allreduce of n bytes on P ranks:
 *
 *     ring       2(P-1) alpha + 2(P-1)/P n beta     many steps, fewest bytes
 *     rd         log2(P) (alpha + n beta)           few steps, the whole buffer each
 *     tree       2 ceil(log2 P) (alpha + n beta)    dt_reduce then dt_bcast
 *
 * Small buffers pay mostly alpha, so the algorithm with the fewest steps wins; large
 * buffers pay mostly beta, so the one sending the fewest bytes wins. The lesson fits
 * alpha and beta, times each algorithm, and prints measured beside modelled.
 *
 * Ranks on one host talk through shared memory; on different hosts, through the
 * network. scripts/hosts.sh makes hosts out of network namespaces, with a delay or a
 * rate limit on each link, so you can watch alpha and beta move:
 *
 * Run:  mpiexec -n 4 build/lessons/22_hosts
 *       sudo scripts/hosts.sh 4 --rate 200 -- build/lessons/22_hosts --max-size 1M
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 22_hosts [options]\n"
    "Fits alpha (latency) and beta (time per byte) from a ping-pong between rank 0 and\n"
    "a rank on another host, then times the ring, recursive-doubling and tree\n"
    "allreduces beside what the model predicts, and checks every result.\n"
    "  --min-size B        smallest message in bytes, 1 to 1G (default 8)\n"
    "  --max-size B        largest, e.g. 64K, 4M (default 4M); sizes grow x4 and the\n"
    "                      last is this one; it must be above --min-size\n"
    "  --iters K           timed runs per size, 1 to 10^6 (default 5, after a warm-up):\n"
    "                      the ping-pong keeps the fastest (of 4K up to 64 KiB), the\n"
    "                      allreduces the median\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TAG_PING = 22, RING = 0, RD, TREE, NALGO, MAXSIZES = 64 };
static const char *names[NALGO] = {"ring", "rd", "tree"};

/* One allreduce, as dt_time_median runs it. */
struct run {
    int algo, count;
    void *in, *out;
};

static void run_once(void *ctx)
{
    struct run *r = ctx;
    MPI_Comm w = MPI_COMM_WORLD;
    if (r->algo == RING) {
        dt_allreduce_ring(r->in, r->out, r->count, MPI_FLOAT, MPI_SUM, w);
    } else if (r->algo == RD) {
        dt_allreduce_rd(r->in, r->out, r->count, MPI_FLOAT, MPI_SUM, w);
    } else {                               /* tree: binomial reduce to 0, then bcast */
        dt_reduce(r->in, r->out, r->count, MPI_FLOAT, MPI_SUM, 0, w);
        dt_bcast(r->out, r->count, MPI_FLOAT, 0, w);
    }
}

/* Round trips of nbytes between rank 0 and partner, one to warm up and then iters;
 * the other ranks wait. Returns half the fastest round trip, in seconds, on every rank:
 * the fastest, because a message can be slowed by what else the machine does but
 * never sped up, and the model wants what the network itself costs. */
static double one_way(int partner, void *buf, size_t nbytes, int iters)
{
    int rank = dt_rank();
    double best = INFINITY;
    dt_barrier(MPI_COMM_WORLD);
    for (int i = 0; i <= iters; i++) {
        double t0 = MPI_Wtime();
        if (rank == 0) {
            dt_send(buf, nbytes, partner, TAG_PING, MPI_COMM_WORLD);
            dt_recv(buf, nbytes, partner, TAG_PING, MPI_COMM_WORLD);
        } else if (rank == partner) {
            dt_recv(buf, nbytes, 0, TAG_PING, MPI_COMM_WORLD);
            dt_send(buf, nbytes, 0, TAG_PING, MPI_COMM_WORLD);
        }
        double t = MPI_Wtime() - t0;
        best = i > 0 && t < best ? t : best;
    }
    DT_CHECK_MPI(MPI_Bcast(&best, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return best / 2;
}

/* The model's time for algorithm a on P ranks, n bytes. dtlab's rd folds the ranks
 * beyond the largest power of two p into partners first and hands the result back
 * after: log2(p) + 2 steps of the whole buffer when P is not a power of two. */
static double model(int a, int P, double n, double alpha, double beta)
{
    if (P == 1)
        return 0;
    if (a == RING)
        return 2.0 * (P - 1) * alpha + 2.0 * (P - 1) / P * n * beta;
    if (a == RD)                         /* lib/schedule.h's steps, and fold + unfold */
        return (dt_rd_steps(P) + (dt_pow2_floor(P) != P ? 2 : 0)) * (alpha + n * beta);
    return 2.0 * dt_log2_ceil(P) * (alpha + n * beta);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int P = dt_size(), rank = dt_rank();
    dt_opts opts = {.min_size = 8, .max_size = 4 << 20, .iters = 5};
    dt_parse_options(argc, argv, "msi", usage, &opts);
    if (opts.min_size == opts.max_size)
        dt_usage_error(usage, "a fit needs two sizes or more: make --min-size smaller "
                              "than --max-size");
    size_t sizes[MAXSIZES];
    int ns = 0;
    for (size_t s = opts.min_size; ns < MAXSIZES; s *= 4) {     /* x4, then the max */
        sizes[ns++] = s < opts.max_size ? s : opts.max_size;
        if (s >= opts.max_size)
            break;
    }

    /* ==== who is where: hosts by name, as MPI_Get_processor_name gives them ==== */
    char (*host)[MPI_MAX_PROCESSOR_NAME] = calloc((size_t)P, sizeof *host);
    DT_REQUIRE(host != NULL, "out of memory");
    int len;
    DT_CHECK_MPI(MPI_Get_processor_name(host[rank], &len));
    DT_CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host, sizeof *host,
                               MPI_CHAR, MPI_COMM_WORLD));
    int partner = P > 1 ? 1 : 0, hosts = 0;
    for (int r = 0; r < P; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= strcmp(host[q], host[r]) == 0;
        hosts += !seen;
    }
    for (int r = P - 1; r > 0; r--)          /* the lowest rank on another host */
        if (strcmp(host[r], host[0]))
            partner = r;
    dt_printf0("%d rank%s on %d host%s:\n", P, P == 1 ? "" : "s", hosts,
               hosts == 1 ? "" : "s");
    dt_printf_ordered("  rank %d on %s\n", rank, host[rank]);

    /* ==== 1. ping-pong: one-way time per size, and the fit ==== */
    size_t big = sizes[ns - 1] + 4;                   /* room for whole floats */
    float *in_h = dt_malloc(big, DT_CPU), *want = dt_malloc(big, DT_CPU);
    void *in = dt_malloc(big, dt_device()), *out = dt_malloc(big, dt_device());
    double t[MAXSIZES], alpha = 0, beta = 0;
    char sz[32];
    if (P > 1) {
        dt_printf0("\n1. Ping-pong, rank 0 (%s) and rank %d (%s):\n   %s.\n"
                   "   One-way time = half the fastest of %d round trips "
                   "(%d to 64 KiB).\n\n"
                   "%10s %12s %12s %9s\n", host[0], partner, host[partner],
                   strcmp(host[0], host[partner]) ? "across the network"
                   : "one host, so this measures shared memory, not a network",
                   opts.iters, 4 * opts.iters, "size", "measured", "model", "residual");
        for (int i = 0; i < ns; i++)     /* more round trips where they are cheap */
            t[i] = one_way(partner, in, sizes[i], sizes[i] <= 65536 ? 4 * opts.iters
                                                                     : opts.iters);
        /* The fit: the least-squares line time = alpha + n beta, held through the
         * smallest message's point (n0, t0), where the time is nearly all alpha:
         *     beta = sum (n - n0)(t - t0) / sum (n - n0)^2,   alpha = t0 - n0 beta.
         * The big messages, whose time is mostly bytes, then decide beta. (A free
         * two-parameter fit lets a few percent of noise on the 4 MiB message, which is
         * thousands of microseconds, swamp an alpha of a few.) */
        double num = 0, den = 0;
        for (int i = 1; i < ns; i++) {
            double dx = (double)(sizes[i] - sizes[0]);
            num += dx * (t[i] - t[0]);
            den += dx * dx;
        }
        beta = num / den;
        alpha = t[0] - (double)sizes[0] * beta;
        for (int i = 0; i < ns; i++) {
            double m = alpha + beta * (double)sizes[i];
            dt_format_bytes((double)sizes[i], sz, sizeof sz);
            dt_printf0("%10s %9.1f us %9.1f us %+8.1f%%\n", sz, t[i] * 1e6, m * 1e6,
                       100 * (t[i] - m) / m);
        }
        dt_printf0("\nlargest message: %.1f MB/s (its bytes over its one-way time)\n",
                   (double)sizes[ns - 1] / t[ns - 1] * 1e-6);
        dt_printf0("fit: alpha = %.1f us, bandwidth = %.1f MB/s (beta = %.3f ns/B; "
                   "MB = 10^6 bytes)\n", alpha * 1e6, beta > 0 ? 1e-6 / beta : INFINITY,
                   beta * 1e9);
        if (strcmp(host[0], host[partner]))
            dt_printf0("     (residuals far below 0 at a few KiB: a link shaped by a\n"
                       "     token bucket, as scripts/hosts.sh --rate does, lets its\n"
                       "     first few KiB through at once)\n");
        if (alpha < 0 || beta <= 0)
            dt_printf0("     (a value below 0 is noise: the model uses 0 for it)\n");
        alpha = alpha > 0 ? alpha : 0;
        beta = beta > 0 ? beta : 0;
    }

    if (P == 1)
        dt_printf0("\nOne rank: no messages, so no alpha or beta; each allreduce only "
                   "copies.\n");

    /* ==== 2. the allreduces at each size, measured and modelled; 3. the check ==== */
    dt_printf0("\n2. Allreduce (sum) of floats on %d rank%s: the median of %d runs "
               "beside the\n   model's time from the fit, in us.\n\n%9s", P,
               P == 1 ? "" : "s", opts.iters, "");
    for (int a = 0; a < NALGO; a++)
        dt_printf0("  %-17s", names[a]);
    dt_printf0("fastest\n%9s", "size");
    for (int a = 0; a < NALGO; a++)
        dt_printf0(" %9s %8s", "time", "model");
    dt_printf0("  time  model\n");
    int ok = 1;
    for (int i = 0; i < ns; i++) {
        int count = (int)((sizes[i] + 3) / 4);
        size_t nbytes = (size_t)count * 4;
        dt_fill_test_data(in_h, count, MPI_FLOAT, MPI_SUM, (unsigned)i, rank);
        dt_memcpy(in, in_h, nbytes);
        MPI_Allreduce(in_h, want, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        dt_printf0("%9s", dt_format_bytes((double)nbytes, sz, sizeof sz));
        int best = 0, mbest = 0;
        double tm[NALGO], mm[NALGO];
        for (int a = 0; a < NALGO; a++) {
            struct run r = {a, count, in, out};
            dt_memzero(out, nbytes);
            run_once(&r);                          /* checked once, then timed */
            ok &= dt_check_close(out, want, count, MPI_FLOAT, 0, names[a],
                                 MPI_COMM_WORLD);
            tm[a] = dt_time_median(run_once, &r, opts.iters, MPI_COMM_WORLD);
            mm[a] = model(a, P, (double)nbytes, alpha, beta);
            best = tm[a] < tm[best] ? a : best;
            mbest = mm[a] < mm[mbest] ? a : mbest;
            dt_printf0(" %9.1f %8.1f", tm[a] * 1e6, mm[a] * 1e6);
        }
        dt_printf0("  %-5s %s\n", names[best], P > 1 ? names[mbest] : "-");
    }

    /* ==== what the model says: its terms for this P, where ring overtakes rd ==== */
    if (P > 1) {
        int p = dt_pow2_floor(P);
        double rs = model(RD, P, 0, 1, 0), ts = model(TREE, P, 0, 1, 0);   /* steps */
        dt_printf0("\nThe model for P = %d: ring %d alpha + %.2f n beta, "
                   "rd %.0f (alpha + n beta),\ntree %.0f (alpha + n beta)", P,
                   2 * (P - 1), 2.0 * (P - 1) / P, rs, ts);
        if (p != P)
            dt_printf0(";\nrd first folds %d rank%s into a partner and hands the result "
                       "back after:\n2 steps more than log2(%d)", P - p,
                       P - p == 1 ? "" : "s", p);
        dt_printf0(".\nThe tree sends the whole buffer in each of its steps, like rd, "
                   "and has as many\nsteps or more: unpipelined, it never wins in this "
                   "model.\n");
        /* ring = rd where (2(P-1) - rs) alpha = (rs - 2(P-1)/P) n beta */
        double da = 2.0 * (P - 1) - rs, db = rs - 2.0 * (P - 1) / P;
        if (da > 0 && db > 0 && beta > 0)
            dt_printf0("Crossover: the model has rd faster below %s, the ring above.\n",
                       dt_format_bytes(da * alpha / (db * beta), sz, sizeof sz));
        else if (P == 2)
            dt_printf0("Crossover: none; rd is faster at every size: with P = 2 its one\n"
                       "exchange moves as many bytes as the ring's two steps.\n");
        else
            dt_printf0("Crossover: none; with beta 0 the fewest steps always win.\n");
        dt_printf0("Left out: the time to add the numbers, ranks sharing a core, and "
                   "ranks on one\nhost talking through shared memory rather than the "
                   "network.\n");
    }
    dt_printf0("check: %s\n", ok ? "ring, rd and tree match MPI_Allreduce at every size"
                                 : "FAILED: an algorithm differs from MPI_Allreduce");

    /* ==== teardown ==== */
    dt_free(in);
    dt_free(out);
    dt_free(in_h);
    dt_free(want);
    free(host);
    dt_finalize();
    return ok ? 0 : 1;
}
