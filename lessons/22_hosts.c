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
 * Small buffers pay mostly alpha, so the fewest steps win; large ones pay mostly beta,
 * so the fewest bytes win. The lesson fits alpha and beta, times each algorithm beside
 * the model, with the spread of the runs, and says where and why they part.
 *
 * The code: lib/collectives/: allreduce.c (dt_allreduce_ring, dt_allreduce_rd), reduce.c
 * (dt_reduce), bcast.c (dt_bcast); lib/p2p.c (dt_send, dt_recv).
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
    "a rank on another host, then times and checks the ring, recursive-doubling and\n"
    "tree allreduces beside what the model predicts.\n"
    "  --min-size B        smallest message in bytes, 1 to 1G (default 8)\n"
    "  --max-size B        largest, e.g. 64K, 4M (default 4M); sizes grow x4 and the\n"
    "                      last is this one; it must be above --min-size\n"
    "  --iters K           timed runs per size, 1 to 10^6 (default 5, after a warm-up):\n"
    "                      the ping-pong keeps the fastest (of 4K up to 64 KiB), the\n"
    "                      allreduces the median; both show how the runs spread\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TAG_PING = 22, RING = 0, RD, TREE, NALGO, MAXSIZES = 64 };
static const char *names[NALGO] = {"ring", "rd", "tree"};

struct run { int algo, count; void *in, *out; };   /* one allreduce, as dt_time_runs runs it */

static void run_once(void *ctx)
{
    struct run *r = ctx;
    if (r->algo == RING) {
        dt_allreduce_ring(r->in, r->out, r->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else if (r->algo == RD) {
        dt_allreduce_rd(r->in, r->out, r->count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    } else {                               /* tree: binomial reduce to 0, then bcast */
        dt_reduce(r->in, r->out, r->count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        dt_bcast(r->out, r->count, MPI_FLOAT, 0, MPI_COMM_WORLD);
    }
}

/* Round trips of nbytes between rank 0 and partner, a warm-up then iters; the others
 * wait. Returns, on every rank, half the fastest trip in seconds (other work can slow a
 * message, never speed it up; the model wants the network's own cost), *spread theirs. */
static double one_way(int partner, void *buf, size_t nbytes, int iters, double *spread)
{
    int rank = dt_rank();
    double best = INFINITY, *all = malloc(sizeof(double) * (size_t)iters);
    DT_REQUIRE(all != NULL, "out of memory");
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
        all[i > 0 ? i - 1 : 0] = t;
    }
    double r[2] = {best / 2, dt_timing_spread(dt_timing_of(all, iters))};
    free(all);
    MPI_Request req;             /* the others wait politely: they leave the cores free */
    DT_CHECK_MPI(MPI_Ibcast(r, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    *spread = r[1];
    return r[0];
}

/* The model's time for algorithm a on P ranks, n bytes (0 for P = 1). dtlab's rd folds
 * the ranks beyond the largest power of two p into partners first and hands the result
 * back after: log2(p) + 2 steps of the whole buffer when P is not a power of two. */
static double model(int a, int P, double n, double alpha, double beta)
{
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
        dt_usage_error(usage, "a fit needs two sizes: make --min-size smaller than --max-size");
    size_t sizes[MAXSIZES] = {opts.min_size}, max = opts.max_size;
    int ns = 1;
    for (; ns < MAXSIZES && sizes[ns - 1] < max; ns++)                /* x4, then the max */
        sizes[ns] = sizes[ns - 1] * 4 < max ? sizes[ns - 1] * 4 : max;

    /* ==== who is where: hosts by name, as MPI_Get_processor_name gives them ==== */
    char (*host)[MPI_MAX_PROCESSOR_NAME] = calloc((size_t)P, sizeof *host);
    DT_REQUIRE(host != NULL, "out of memory");
    int len, far = 0, hosts = 0;             /* far: the lowest rank on another host */
    DT_CHECK_MPI(MPI_Get_processor_name(host[rank], &len));
    DT_CHECK_MPI(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, host, sizeof *host,
                               MPI_CHAR, MPI_COMM_WORLD));
    for (int r = 0; r < P; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= strcmp(host[q], host[r]) == 0;
        hosts += !seen;
        far = far == 0 && strcmp(host[r], host[0]) ? r : far;
    }
    int partner = far ? far : P > 1;
    dt_printf0("%d rank%s on %d host%s:\n", P, P == 1 ? "" : "s", hosts, hosts == 1 ? "" : "s");
    dt_printf_ordered("  rank %d on %s\n", rank, host[rank]);

    /* ==== 1. ping-pong: one-way time per size, and the fit ==== */
    size_t big = sizes[ns - 1] + 4;                   /* room for whole floats */
    float *in_h = dt_malloc(big, DT_CPU), *want = dt_malloc(big, DT_CPU);
    void *in = dt_malloc(big, dt_device()), *out = dt_malloc(big, dt_device());
    double t[MAXSIZES], sp[MAXSIZES], alpha = 0, beta = 0;
    int off = 0;                     /* sizes off the fitted line by more than spread */
    char sz[32];
    if (P > 1) {
        dt_printf0("\n1. Ping-pong, rank 0 (%s) and rank %d (%s):\n   %s.\n   One-way time = "
                   "half the fastest of %d round trips (%d for sizes up to 64 KiB);\n   spread: "
                   "how the round trips spread.\n\n      size     measured        model  "
                   "residual   spread\n", host[0], partner, host[partner], far ? "across the "
                   "network" : "one host, so this measures shared memory, not a network",
                   opts.iters, 4 * opts.iters);
        for (int i = 0; i < ns; i++)     /* more round trips where they are cheap */
            t[i] = one_way(partner, in, sizes[i], (sizes[i] <= 65536 ? 4 : 1) * opts.iters, &sp[i]);
        /* The fit: the least-squares line time = alpha + n beta through the smallest
         * message's point (n0, t0), where the time is nearly all alpha:
         *     beta = sum (n - n0)(t - t0) / sum (n - n0)^2,   alpha = t0 - n0 beta.
         * (A free fit lets a few percent of noise on 4 MiB swamp an alpha of a few us.) */
        double num = 0, den = 0;
        for (int i = 1; i < ns; i++) {
            double dx = (double)(sizes[i] - sizes[0]);
            num += dx * (t[i] - t[0]);
            den += dx * dx;
        }
        beta = num / den;
        alpha = t[0] - (double)sizes[0] * beta;
        for (int i = 0; i < ns; i++) {
            double m = alpha + beta * (double)sizes[i], res = (t[i] - m) / m;
            dt_format_bytes((double)sizes[i], sz, sizeof sz);
            off += fabs(res) > sp[i];
            dt_printf0("%10s %9.1f us %9.1f us %+8.1f%%%s  +-%3.0f%%\n", sz, t[i] * 1e6,
                       m * 1e6, 100 * res, fabs(res) > sp[i] ? "*" : " ", 100 * sp[i]);
        }
        if (off)       /* why a size leaves the line: how its bytes travel */
            dt_printf0("*: off the line by more than its round trips spread: one line cannot "
                       "follow how\n   a message moves as it grows (%s),\n   and caches hold "
                       "small buffers, not large ones.\n", far ? "the network stack and the "
                       "link treat small and\n   large messages differently: segments, windows; "
                       "a token bucket, as\n   scripts/hosts.sh --rate makes, lets the first "
                       "few KiB through at once" : "below a threshold MPICH copies it through\n"
                       "   shared-memory cells at once, eager; above it after a handshake, "
                       "rendezvous");
        dt_printf0("\nlargest message: %.1f MB/s (its bytes over its one-way time)\nfit: "
                   "alpha = %.1f us, bandwidth = %.1f MB/s (beta = %.3f ns/B; MB = 10^6 "
                   "bytes)\n", (double)sizes[ns - 1] / t[ns - 1] * 1e-6, alpha * 1e6,
                   beta > 0 ? 1e-6 / beta : INFINITY, beta * 1e9);
        if (alpha < 0 || beta <= 0)
            dt_printf0("     (a value below 0 is noise: the model uses 0 for it)\n");
        alpha = alpha > 0 ? alpha : 0;
        beta = beta > 0 ? beta : 0;
    }

    /* ==== 2. the allreduces at each size, measured and modelled; 3. the check ==== */
    const char *tmo = "      time    model";
    if (P == 1)
        dt_printf0("\nOne rank: nobody to talk to, so no alpha or beta and no times to compare;\n"
                   "each allreduce only copies its input, but the check runs each. Try -n 4.\n");
    else
        dt_printf0("\n2. Allreduce (sum) of floats on %d ranks: the median of %d runs beside "
                   "the\n   model's time from the fit, in us; +-: the largest spread of the "
                   "three.\n\n%9s  %-17s  %-17s  %-17s       fastest\n%9s%s%s%s   +-  time  "
                   "model\n", P, opts.iters, "", "ring", "rd", "tree", "size", tmo, tmo, tmo);
    int ok = 1, agree = 0, tie = 0, nr = 0;
    double noise = 0, ratio[MAXSIZES * NALGO];    /* measured over modelled */
    for (int i = 0; i < ns; i++) {
        int count = (int)((sizes[i] + 3) / 4);
        size_t nbytes = (size_t)count * 4;
        dt_fill_test_data(in_h, count, MPI_FLOAT, MPI_SUM, (unsigned)i, rank);
        dt_memcpy(in, in_h, nbytes);
        MPI_Allreduce(in_h, want, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (P > 1)
            dt_printf0("%9s", dt_format_bytes((double)nbytes, sz, sizeof sz));
        int best = 0, mbest = 0;
        double tm[NALGO], mm[NALGO], spr[NALGO], most = 0;
        for (int a = 0; a < NALGO; a++) {
            struct run r = {a, count, in, out};
            dt_memzero(out, nbytes);
            run_once(&r);                          /* checked once, then timed */
            ok &= dt_check_close(out, want, count, MPI_FLOAT, 0, names[a], MPI_COMM_WORLD);
            if (P == 1)                            /* nothing to time: a copy */
                continue;
            dt_timing tr = dt_time_runs(run_once, &r, opts.iters, MPI_COMM_WORLD);
            tm[a] = tr.median;
            spr[a] = dt_timing_spread(tr);
            most = fmax(most, spr[a]);
            mm[a] = model(a, P, (double)nbytes, alpha, beta);
            if (mm[a] > 0)
                ratio[nr++] = tm[a] / mm[a];
            best = tm[a] < tm[best] ? a : best;
            mbest = mm[a] < mm[mbest] ? a : mbest;
            dt_printf0(" %9.1f %8.1f", tm[a] * 1e6, mm[a] * 1e6);
        }
        if (P == 1)
            continue;
        agree += best == mbest;      /* the model's winner: the fastest, or within the spreads */
        tie += best != mbest && tm[mbest] <= tm[best] * (1 + spr[best] + spr[mbest]);
        noise = fmax(noise, most);
        dt_printf0(" %3.0f%%  %-5s %s\n", 100 * most, names[best], names[mbest]);
    }

    /* ==== what the model says: its terms for this P, where ring overtakes rd ==== */
    if (P > 1) {
        int p = dt_pow2_floor(P);        /* rs, ts: rd's and tree's steps; rb: ring's bytes/n */
        double rs = model(RD, P, 0, 1, 0), ts = model(TREE, P, 0, 1, 0), rb = 2.0 * (P - 1) / P;
        dt_printf0("\nThe model for P = %d: ring %d alpha + %.2f n beta, rd %.0f (alpha + "
                   "n beta),\ntree %.0f (alpha + n beta)", P, 2 * (P - 1), rb, rs, ts);
        if (p != P)
            dt_printf0(";\nrd first folds %d rank%s into a partner and hands the result "
                       "back after:\n2 steps more than log2(%d)", P - p, P - p == 1 ? "" : "s", p);
        dt_printf0(".\nThe tree sends the whole buffer in each of its steps, like rd, and has as "
                   "many\nsteps or more: unpipelined, it never wins in this model.\n");
        /* ring = rd where (2(P-1) - rs) alpha = (rs - 2(P-1)/P) n beta */
        double da = 2.0 * (P - 1) - rs, db = rs - rb;
        if (da > 0 && db > 0 && beta > 0)
            dt_printf0("Crossover: rd is faster below (2(P-1) - %.0f) alpha / ((%.0f - "
                       "2(P-1)/P) beta)\n= %.0f x %.1f us / (%.2f x %.3f ns/B) = %s, the "
                       "ring above.\n", rs, rs, da, alpha * 1e6, db, beta * 1e9,
                       dt_format_bytes(da * alpha / (db * beta), sz, sizeof sz));
        else
            dt_printf0("Crossover: none; %s\n", P == 2 ? "rd is faster at every size: "
                       "with P = 2 its one\nexchange moves as many bytes as the ring's two "
                       "steps." : "with beta 0 the fewest steps always win.");

        /* ==== measured against the model ==== */
        double r = dt_timing_of(ratio, nr).median;
        int crowded = dt_machine_now().crowded, beaten = ns - agree - tie;
        dt_printf0("\nMeasured against the model: the model's winner is the fastest at %d of %d "
                   "sizes,\nand within the spread of the fastest at %d more. The times are %.1fx "
                   "the model's\n(the median over sizes and algorithms).\n%s", agree, ns, tie, r,
                   crowded ? "Ranks outnumber cores (see the note): each step waits far longer "
                   "than alpha\nfor its partner to get a core, so steps count more than bytes: "
                   "fewer steps win\neven where the model has the ring win.\n" : r > 2 ? "The "
                   "model leaves out that every step also adds the numbers and waits for its\n"
                   "slowest rank, which a ping-pong between two ranks does not see; and the "
                   "machine\nmay have other work (see the note).\n" : "");
        if (!crowded && beaten > 0)
            dt_printf0("At %d size%s another algorithm beat the model's winner by more than the "
                       "spread:\nthe model leaves out the additions (rd and the tree add the whole "
                       "buffer at each\nstep, the ring one chunk) and %s,\nwhich decide where "
                       "the model's times are close.\n", beaten, beaten == 1 ? "" : "s",
                       far ? "the network stack" : "the copies through shared memory");
        dt_timing_note(noise, "Here it blurs the allreduce times and the winners; the fit, "
                       "from the fastest round trips, suffers least, and the check does not "
                       "depend on timing.");
    }
    dt_printf0("\ncheck: %s\nThe code: lib/collectives/allreduce.c (dt_allreduce_ring, "
               "dt_allreduce_rd), lib/collectives/reduce.c (dt_reduce), lib/collectives/bcast.c "
               "(dt_bcast), lib/p2p.c (dt_send, dt_recv)\n", ok ? "ring, rd and tree match "
               "MPI_Allreduce at every size" : "FAILED: an algorithm differs from MPI_Allreduce");

    /* ==== teardown ==== */
    dt_free(in);
    dt_free(out);
    dt_free(in_h);
    dt_free(want);
    free(host);
    dt_finalize();
    return ok ? 0 : 1;
}
