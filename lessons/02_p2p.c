/* Lesson 02: point-to-point. send, recv and sendrecv around a ring, and polite waiting.
 *
 * What it teaches: every collective in dtlab is built from three calls in lib/p2p.c:
 * dt_send, dt_recv and dt_sendrecv. Their order matters (two ranks that both wait to
 * receive first wait forever), sendrecv is the way out of that, and how a rank waits
 * matters as much as what it sends when there are more ranks than cores.
 *
 * The code: lib/p2p.c (dt_send, dt_recv, dt_sendrecv; dt_waitall is the polite wait:
 * MPI_Testall, then sched_yield).
 *
 * Run:  mpiexec -n 4 build/lessons/02_p2p
 *       mpiexec -n 5 build/lessons/02_p2p --count 100000 --type double
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 02_p2p [options]\n"
    "Passes a token around a ring, shifts a buffer with sendrecv, and times a\n"
    "ping-pong with polite and with blocking waits.\n"
    "  --count C           elements each rank shifts to its right neighbour, 0 to\n"
    "                      2^28 (default 1000)\n"
    "  --type T            float|double|int|half (default float)\n"
    "  --iters K           most ping-pong round trips per waiting mode, 1 to 10^6\n"
    "                      (default 10000; each mode also stops after 0.2 s)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TAG_TOKEN = 1, TAG_SHIFT, TAG_PING, TAG_DONE };

/* Ranks 0 and 1 bounce one int for up to iters round trips or 0.2 s, while every other
 * rank sits in dt_recv until rank 0 lets it go. Rank 0 notes the clock after every trip
 * (in t, room for iters) and cuts the trips into BATCHES equal batches, each giving one
 * sample: its mean time per trip. A mean, since a trip is fast while both ranks hold a
 * core and slow when one waits for the scheduler, and the slow ones are what a crowded
 * machine costs. Returns the timing of those samples (on rank 0) and the number of
 * trips in *trips. */
enum { BATCHES = 8 };

static dt_timing ping_pong(int iters, int *trips, double *t)
{
    int rank = dt_rank(), n = dt_size(), go = 1, nb = 0;
    double mean[BATCHES];
    dt_barrier(MPI_COMM_WORLD);               /* start together (MPI_Ibarrier, politely) */
    double t0 = MPI_Wtime(), now = t0;
    *trips = 0;
    if (rank == 0) {
        for (; *trips < iters && now - t0 < 0.2; ++*trips) {
            dt_send(&go, sizeof go, 1, TAG_PING, MPI_COMM_WORLD);
            dt_recv(&go, sizeof go, 1, TAG_PING, MPI_COMM_WORLD);
            t[*trips] = now = MPI_Wtime();
        }
        nb = *trips < BATCHES ? *trips : BATCHES;
        for (int k = 0; k < nb; k++) {             /* trips [a, b) */
            int a = *trips * k / nb, b = *trips * (k + 1) / nb;
            mean[k] = (t[b - 1] - (a ? t[a - 1] : t0)) / (b - a);
        }
        go = 0;                                    /* tell rank 1 to stop ... */
        dt_send(&go, sizeof go, 1, TAG_PING, MPI_COMM_WORLD);
        for (int r = 2; r < n; r++)                /* ... and let the bystanders go */
            dt_send(&go, sizeof go, r, TAG_DONE, MPI_COMM_WORLD);
    } else if (rank == 1) {
        for (;;) {
            dt_recv(&go, sizeof go, 0, TAG_PING, MPI_COMM_WORLD);
            if (!go)
                break;
            dt_send(&go, sizeof go, 0, TAG_PING, MPI_COMM_WORLD);
        }
    } else {
        dt_recv(&go, sizeof go, 0, TAG_DONE, MPI_COMM_WORLD);   /* just waiting */
    }
    return dt_timing_of(mean, nb);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    dt_opts opts = {.count = 1000, .iters = 10000, .type = MPI_FLOAT};
    dt_parse_options(argc, argv, "cti", usage, &opts);
    int count = opts.count, iters = opts.iters;
    MPI_Datatype type = opts.type;

    int rank = dt_rank(), n = dt_size();
    int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);
    if (n == 1) {
        dt_printf0("Point-to-point needs a partner: run with -n 2 or more, e.g.\n"
                   "  mpiexec -n 4 build/lessons/02_p2p\n");
        dt_printf0("The code: lib/p2p.c (dt_send, dt_recv, dt_sendrecv, dt_waitall)\n");
        dt_finalize();
        return 0;
    }

    /* ==== 1. a token around the ring: dt_send and dt_recv ====
     * Rank 0 starts: it sends first and receives last. Every other rank receives first,
     * adds its rank, and sends on. Had rank 0 also received first, every rank would wait
     * for its left neighbour, forever: the order of blocking calls is part of the design. */
    int token = 0;
    if (rank == 0) {
        dt_send(&token, sizeof token, right, TAG_TOKEN, MPI_COMM_WORLD);
        dt_recv(&token, sizeof token, left, TAG_TOKEN, MPI_COMM_WORLD);
    } else {
        dt_recv(&token, sizeof token, left, TAG_TOKEN, MPI_COMM_WORLD);
        token += rank;
        dt_send(&token, sizeof token, right, TAG_TOKEN, MPI_COMM_WORLD);
    }
    char ring[128] = "0", sum[64] = "0";
    for (int r = 1, k = 1; r <= n; r++)
        if (r < 4 || r >= n - 1)
            k += snprintf(ring + k, sizeof ring - k, " -> %d", r % n);
        else if (r == 4)
            k += snprintf(ring + k, sizeof ring - k, " -> ...");
    for (int r = 1, k = 1; r < n; r++)           /* 0+1+2+3, or 0+1+2+...+7 */
        if (n <= 5 || r < 3 || r == n - 1)
            k += snprintf(sum + k, sizeof sum - k, "%s+%d", n > 5 && r == n - 1 ? "+..." : "", r);
    dt_printf0("1. A token goes around the ring, each rank adding its rank:\n   %s\n", ring);
    if (rank == 0)
        dt_printf_ordered("   rank 0: sent 0 to rank %d first; received %d from rank %d last\n",
                          right, token, left);
    else
        dt_printf_ordered("   rank %d: received %d from rank %d, sent %d on to rank %d\n", rank,
                          token - rank, left, token, right);
    dt_printf0("   back at rank 0: %d (%s = %d)\n", token, sum, n * (n - 1) / 2);
    dt_printf0("   The order matters: dt_recv waits until the message has arrived. Had rank 0\n"
               "   also received first, every rank would wait for its left neighbour, and none\n"
               "   would ever send: a deadlock (MPIEXEC_TIMEOUT ends such a run). Two ranks\n"
               "   that both receive before they send hang the same way.\n\n");

    /* ==== 2. a shift: dt_sendrecv ====
     * Now every rank sends count elements right and receives count from the left at
     * the same time. With dt_send then dt_recv on every rank, each send of a large
     * message would wait for a receive that nobody has posted yet: deadlock.
     * dt_sendrecv posts both (MPI_Isend + MPI_Irecv) and waits for the pair. */
    size_t esize = dt_type_size(type), nbytes = (size_t)count * esize;
    void *sbuf = dt_malloc(nbytes, dt_device()), *rbuf = dt_malloc(nbytes, dt_device());
    void *host = dt_malloc(nbytes, DT_CPU), *want = dt_malloc(nbytes, DT_CPU);
    dt_fill_test_data(host, count, type, MPI_SUM, 2, rank);
    dt_memcpy(sbuf, host, nbytes);

    dt_bytes_reset();
    dt_sendrecv(sbuf, nbytes, right, rbuf, nbytes, left, TAG_SHIFT, MPI_COMM_WORLD);
    size_t sent = dt_bytes_sent();

    /* the check: the same shift with MPI's own call, on host memory */
    MPI_Sendrecv(host, (int)nbytes, MPI_BYTE, right, TAG_SHIFT, want, (int)nbytes, MPI_BYTE,
                 left, TAG_SHIFT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    int ok = dt_check_close(rbuf, want, count, type, 0, "sendrecv", MPI_COMM_WORLD);
    dt_memcpy(host, rbuf, nbytes);
    char b[32], vals[64] = "";
    for (int i = 0, k = 0; i < count && i < 2; i++)     /* the first values, if any */
        k += snprintf(vals + k, sizeof vals - k, " %g", dt_elem(host, i, type));
    dt_printf0("2. Every rank sends C = %d %s value%s, C x %zu B = %s, to its right\n"
               "   and receives as many from its left, at once, with dt_sendrecv.\n", count,
               dt_type_name(type), count == 1 ? "" : "s", esize,
               dt_format_bytes((double)nbytes, b, sizeof b));
    dt_printf_ordered("   rank %d: bytes sent: %zu B = C x %zu B; got rank %d's data%s%s%s\n",
                      rank, sent, esize, left, count > 0 ? ":" : " (none: the count is 0)",
                      vals, count > 2 ? " ..." : "");
    dt_printf0("   check: %s\n", ok ? "matches MPI_Sendrecv"
                                   : "FAILED: differs from MPI_Sendrecv");
    dt_printf0("   Here every rank both sends and receives. Had they all called dt_send first,\n"
               "   each large send would wait for a receive nobody has posted yet; had they all\n"
               "   called dt_recv first, each would wait for a send that never comes.\n"
               "   dt_sendrecv posts both at once and waits for the pair: no order to get\n"
               "   wrong, no deadlock.\n\n");

    /* ==== 3. polite against blocking waits ====
     * MPICH's blocking calls spin: the waiting rank polls the network in a loop and keeps
     * its core busy. With one core per rank that is the fastest way to wait. With more
     * ranks than cores, a spinning rank holds a core that the rank it waits for needs,
     * until the operating system preempts it milliseconds later. dtlab's p2p waits
     * politely by default: MPI_Testall, then sched_yield() to give the core away. */
    int trips_polite, trips_block, was = dt_polite();     /* DT_WAIT may have set it */
    double *clock = rank == 0 ? malloc(sizeof(double) * (size_t)iters) : NULL;
    DT_REQUIRE(rank != 0 || clock != NULL, "out of memory");
    dt_set_polite(1);
    dt_timing polite = ping_pong(iters, &trips_polite, clock);
    dt_set_polite(0);
    dt_timing block = ping_pong(iters, &trips_block, clock);
    dt_set_polite(was);
    free(clock);

    /* rank 0 timed the trips; every rank takes part in the note's collectives */
    double spread[2] = {dt_timing_spread(polite), dt_timing_spread(block)};
    MPI_Bcast(spread, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    dt_machine m = dt_machine_now();
    dt_printf0("3. Ping-pong of one int between ranks 0 and 1%s\n"
               "   This host runs %d ranks on %d core%s. A round trip: the trips are cut into\n"
               "   %d equal batches (fewer if there are fewer trips); the median of their\n"
               "   mean times, +- half the distance between the quartiles (999%% means that\n"
               "   or more):\n",
               n > 3 ? "; the other ranks wait in dt_recv." : n == 3 ? "; rank 2 waits in dt_recv."
                                                                     : ".",
               m.ranks, m.cores, m.cores == 1 ? "" : "s", (int)BATCHES);
    dt_printf0("   polite   (MPI_Testall + sched_yield): %9.1f us +-%3.0f%%  (%d trips)\n",
               polite.median * 1e6, 100 * fmin(spread[0], 9.99), trips_polite);
    dt_printf0("   blocking (MPI_Waitall, spinning)    : %9.1f us +-%3.0f%%  (%d trips)\n",
               block.median * 1e6, 100 * fmin(spread[1], 9.99), trips_block);
    if (dt_timing_compare(block, polite) > 0 && block.median > 2 * polite.median)
        dt_printf0("   Blocking waits were %.0fx slower: %s, a spinning\n"
                   "   rank keeps a core from the rank it waits for. That is why dtlab waits\n"
                   "   politely.\n", block.median / polite.median, m.crowded
                   ? "with more ranks than cores" : "with the cores busy (other programs)");
    else if (m.crowded)
        dt_printf0("   More ranks than cores, yet spinning did not lose this time: the\n"
                   "   scheduler kept ranks 0 and 1 on cores, while a polite wait yields its\n"
                   "   core at every test, to a bystander or other work, even when the answer\n"
                   "   is about to arrive. Which effect wins varies from run to run: run it\n"
                   "   again.\n");
    else if (m.loaded)
        dt_printf0("   This job has a core per rank, but other work shares them: a spinning\n"
                   "   rank takes turns with it, and either kind of wait may come out ahead.\n"
                   "   Run more ranks than cores (mpiexec -n %d) to see blocking waits crawl.\n",
                   2 * m.cores + 1);
    else
        dt_printf0("   Every rank has a core of its own, so spinning costs little and reacts a\n"
                   "   bit faster. Run more ranks than cores (mpiexec -n %d) to see blocking\n"
                   "   waits crawl.\n",
                   2 * m.cores + 1);
    dt_timing_note(spread[0] > spread[1] ? spread[0] : spread[1],
                   "Here that is what the comparison is about: a polite wait hands its core "
                   "to the rank it waits for, a spinning one holds it until the scheduler "
                   "preempts it. Other work slows both kinds of wait, so the ratio between "
                   "them changes from run to run.");
    dt_printf0("\nThe code: lib/p2p.c (dt_send, dt_recv, dt_sendrecv, dt_waitall)\n");

    /* ==== teardown ==== */
    dt_free(sbuf);
    dt_free(rbuf);
    dt_free(host);
    dt_free(want);
    dt_finalize();
    return ok ? 0 : 1;
}
