/* Lesson 02: point-to-point. send, recv, sendrecv, how the bytes travel, polite waiting.
 *
 * What it teaches: every collective in dtlab is built from three calls in lib/p2p.c: dt_send,
 * dt_recv and dt_sendrecv. Their order matters (two ranks that both wait to receive first
 * wait forever), sendrecv is the way out of that, the transport under them decides how often
 * each byte is copied, and how a rank waits matters as much as what it sends.
 *
 * The code: lib/p2p.c (dt_send, dt_recv, dt_sendrecv; dt_waitall is the polite wait:
 * MPI_Testall, then sched_yield), lib/mailbox.c (the mailboxes: doorbell, slot, credit).
 * Run:  mpiexec -n 4 build/lessons/02_p2p   (or DT_P2P=staging ... --device cuda --max-size 64M)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 02_p2p [options]\n"
    "Passes a token around a ring, shifts a buffer with sendrecv, times the shift under\n"
    "each transport (MPI, mailboxes), and a ping-pong with polite and blocking waits.\n"
    "  --count C           elements each rank shifts right, 0 to 2^28 (default 1000)\n"
    "  --type T            float|double|int|half (default float)\n"
    "  --min-size B        smallest message timed in part 3, 1 to 1G (default 64K)\n"
    "  --max-size B        largest, 1 to 1G (default 16M); sizes grow x16\n"
    "  --iters K           most ping-pong round trips per waiting mode, 1 to 10^6\n"
    "                      (default 10000; each mode also stops after 0.2 s)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TAG_TOKEN = 1, TAG_SHIFT, TAG_PING, TAG_DONE, BATCHES = 8, RUNS = 9, NMODES = 3 };

/* Part 4: ranks 0 and 1 bounce one int for up to iters round trips or 0.2 s; the others wait
 * in dt_recv till rank 0 lets them go. Rank 0 notes the clock after each trip (in t) and cuts
 * the trips into BATCHES batches, each a sample: its mean time per trip (slow trips, waiting
 * for the scheduler, are what crowding costs). Returns their timing (on rank 0), *trips. */
static dt_timing ping_pong(int iters, int *trips, double *t)
{
    int rank = dt_rank(), n = dt_size(), go = 1, nb = 0;
    double mean[BATCHES];
    dt_barrier(MPI_COMM_WORLD);               /* start together (MPI_Ibarrier, politely) */
    double t0 = MPI_Wtime(), now = t0;
    if (rank == 0) {
        for (*trips = 0; *trips < iters && now - t0 < 0.2; ++*trips) {
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
        do {
            dt_recv(&go, sizeof go, 0, TAG_PING, MPI_COMM_WORLD);
            if (go)
                dt_send(&go, sizeof go, 0, TAG_PING, MPI_COMM_WORLD);
        } while (go);
    } else {
        dt_recv(&go, sizeof go, 0, TAG_DONE, MPI_COMM_WORLD);   /* just waiting */
    }
    return dt_timing_of(mean, nb);
}

/* A shift (parts 2, 3): every rank sends count elements (nbytes) right, receiving as many from
 * its left. s and r: one block where dt_device() says; host (this rank's data) and want (what
 * MPI_Sendrecv delivers): one on the host. The caller frees s and host. */
typedef struct { char *s, *r, *host, *want; int count, right, left; size_t nbytes; } shift;

static shift shift_new(int count, MPI_Datatype type, unsigned seed)
{
    int rank = dt_rank(), n = dt_size();
    size_t nbytes = (size_t)count * dt_type_size(type);
    char *s = dt_malloc(2 * nbytes, dt_device()), *h = dt_malloc(2 * nbytes, DT_CPU);
    shift x = {s, s + nbytes, h, h + nbytes, count, dt_ring_right(rank, n),
               dt_ring_left(rank, n), nbytes};
    dt_fill_test_data(x.host, count, type, MPI_SUM, seed, rank);
    dt_memcpy(x.s, x.host, nbytes);
    MPI_Sendrecv(x.host, (int)nbytes, MPI_BYTE, x.right, TAG_SHIFT, x.want, (int)nbytes,
                 MPI_BYTE, x.left, TAG_SHIFT, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    return x;
}

static void run_shift(void *ctx)                /* one shift, as dt_time_runs runs it */
{
    shift *x = ctx;
    dt_sendrecv(x->s, x->nbytes, x->right, x->r, x->nbytes, x->left, TAG_SHIFT, MPI_COMM_WORLD);
}

/* ==== 3. how the bytes travel ==== Each mode (p2p.h, "transports"), the transport it gives
 * [host, GPU] data, and the copies of a message that makes (lib/p2p.c, lib/mailbox.c). */
static const struct { const char *mode; dt_via via[2]; int copies[2]; } modes[NMODES] = {
    {"staging", {DT_VIA_MPI, DT_VIA_STAGING}, {2, 4}}, {"shm", {DT_VIA_SHM, DT_VIA_SHM}, {2, 2}},
    {"ipc", {DT_VIA_IPC, DT_VIA_IPC}, {2, 2}}};

/* The shift at sizes min to max (x16) under each mode whose transport dt_p2p_via names for some
 * rank: checked, timed, printed. Returns the largest spread; *ok = 0 if a check failed. */
static double transports(size_t min, size_t max, MPI_Datatype type, int *ok)
{
    int n = dt_size(), right = dt_ring_right(dt_rank(), n), dev = dt_device() == DT_CUDA, fell = 0;
    const char *was = dt_p2p_mode();                 /* DT_P2P's: put back after */
    int nmodes = strcmp(was, "staging") == 0 ? 1 : NMODES;   /* DT_P2P=staging: MPI only */
    size_t esize = dt_type_size(type);
    double spread = 0;
    char sz[32], b[32];
    for (size_t size = min;; size = size * 16 < max ? size * 16 : max) {   /* whole elements */
        shift x = shift_new((int)((size + esize - 1) / esize), type, (unsigned)size);
        for (int m = 0; m < nmodes; m++) {
            dt_barrier(MPI_COMM_WORLD);              /* every rank between the same calls */
            dt_p2p_set_mode(modes[m].mode);
            dt_via via = modes[m].via[dev];
            int mine = dt_p2p_via(x.right, MPI_COMM_WORLD, dev, x.nbytes) == via, links = 0;
            MPI_Allreduce(&mine, &links, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
            fell |= (links == 0) << m;               /* by mode: fell back at some size */
            if (links == 0)                          /* nothing new to show */
                continue;
            dt_memzero(x.r, x.nbytes);
            run_shift(&x);
            *ok &= dt_check_close(x.r, x.want, x.count, type, 0, modes[m].mode, MPI_COMM_WORLD);
            dt_timing t = dt_time_runs(run_shift, &x, RUNS, MPI_COMM_WORLD);
            spread = fmax(spread, dt_timing_spread(t));
            dt_printf0("%10s  %-8s %9.1f us +-%3.0f%% %7.2f  %d x S = %s%s\n",
                       dt_format_bytes((double)x.nbytes, sz, sizeof sz),
                       dt_via_name(via), t.median * 1e6, 100 * fmin(dt_timing_spread(t), 9.99),
                       x.nbytes / t.median / 1e9, modes[m].copies[dev],
                       dt_format_bytes((double)(modes[m].copies[dev] * x.nbytes), b, sizeof b),
                       links < n ? " (some ranks: mpi, to other hosts)" : "");
        }
        dt_barrier(MPI_COMM_WORLD);
        dt_p2p_set_mode(was);
        dt_free(x.s);
        dt_free(x.host);
        if (size == max)
            break;
    }
    dt_printf0("   check: %s MPI_Sendrecv\n", *ok ? "all match" : "FAILED: some differ from");
    int boxes = dt_p2p_via(right, MPI_COMM_WORLD, dev, dt_p2p_segment(dev)) >= DT_VIA_SHM;
    const char *why[NMODES] = {"", boxes ? "below 64 KiB (MPI sends those at once) or\n"
        "   above an outbox (MPI reads those from the sender: one copy)" : "here: no rank's "
        "right neighbour shares its host", dev ? "here: no two "
        "neighbours share a GPU with CUDA IPC" : "here: it carries GPU data (--device cuda)"};
    for (int m = 1; m < NMODES; m++)            /* where dt_p2p_via named another transport */
        if (nmodes == 1 || fell & 1 << m)
            dt_printf0("   %s: not shown %s\n", modes[m].mode, nmodes == 1
                       ? "here: DT_P2P=staging keeps every message on MPI" : why[m]);
    return spread;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    dt_opts opts = {.count = 1000, .iters = 10000, .type = MPI_FLOAT, .min_size = 64 << 10,
                    .max_size = 16 << 20};
    dt_parse_options(argc, argv, "ctims", usage, &opts);
    int count = opts.count, iters = opts.iters;
    MPI_Datatype type = opts.type;
    int rank = dt_rank(), n = dt_size();
    int left = dt_ring_left(rank, n), right = dt_ring_right(rank, n);
    if (n == 1) {
        dt_printf0("Point-to-point needs a partner: run with -n 2 or more (mpiexec -n 4).\n"
                   "Nothing is shown at one rank: p2p never sends a rank a message of its own.\n\n"
                   "The code: lib/p2p.c (dt_send, dt_recv, dt_sendrecv, dt_waitall)\n");
        dt_finalize();
        return 0;
    }

    /* ==== 1. a token around the ring: dt_send and dt_recv (the order is the design) ==== */
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

    /* ==== 2. a shift: dt_sendrecv, the send and the receive moved on together (by MPI,
     * MPI_Isend + MPI_Irecv; on one host a large message goes by mailbox: part 3) ==== */
    size_t esize = dt_type_size(type);
    shift x = shift_new(count, type, 2);
    dt_bytes_reset();
    run_shift(&x);
    size_t sent = dt_bytes_sent();
    int ok = dt_check_close(x.r, x.want, count, type, 0, "sendrecv", MPI_COMM_WORLD);
    dt_memcpy(x.host, x.r, x.nbytes);
    char b[32], vals[64] = "";
    for (int i = 0, k = 0; i < count && i < 2; i++)     /* the first values, if any */
        k += snprintf(vals + k, sizeof vals - k, " %g", dt_elem(x.host, i, type));
    dt_printf0("2. Every rank sends C = %d %s value%s, C x %zu B = %s, to its right\n"
               "   and receives as many from its left, at once, with dt_sendrecv.\n", count,
               dt_type_name(type), count == 1 ? "" : "s", esize,
               dt_format_bytes((double)x.nbytes, b, sizeof b));
    dt_printf_ordered("   rank %d: bytes sent: %zu B = C x %zu B; got rank %d's data%s%s%s\n",
                      rank, sent, esize, left, count > 0 ? ":" : " (none: the count is 0)",
                      vals, count > 2 ? " ..." : "");
    dt_free(x.s);
    dt_free(x.host);
    dt_printf0("   check: %s\n", ok ? "matches MPI_Sendrecv" : "FAILED: unlike MPI_Sendrecv");
    dt_printf0("   Here every rank both sends and receives. Had they all called dt_send first,\n"
               "   each large send would wait for a receive nobody has posted yet; had they all\n"
               "   called dt_recv first, each would wait for a send that never comes.\n"
               "   dt_sendrecv moves both at once and returns when both are done: no order to\n"
               "   get wrong, no deadlock.\n\n");

    /* ==== 3. how the bytes travel: transports() ==== */
    dt_printf0("3. How the bytes travel. On one host MPI copies a message into shared memory and\n"
               "   out: 2 copies (1 where MPI reads the sender's memory with Linux's CMA; GPU\n"
               "   data is staged through pinned host memory: 2 more, in pieces of 1 MiB whose\n"
               "   copies overlap MPI's moving the others, DT_STAGE_KIB). A mailbox: the sender\n"
               "   copies it into a free slot of its outbox, shared memory (shm; GPU data goes\n"
               "   GPU -> slot -> GPU) or GPU memory opened with CUDA IPC (ipc), and MPI carries\n"
               "   only a doorbell, 48 bytes naming the slot. The receiver copies it out (2\n"
               "   copies) or reduces straight from the slot (1, for host data and ipc: the ring\n"
               "   reduce-scatter's step), then clears the slot's busy flag: the credit that\n"
               "   gives it back. A slot holds %s, an outbox 8 (4 on a GPU): a message\n"
               "   takes all its slots at once, else goes by MPI. Below: part 2's shift of S\n"
               "   bytes per transport (dt_p2p_set_mode), median of %d runs +- half the IQR:\n"
               "         S  via          time per message    GB/s  copies\n",
               dt_format_bytes((double)dt_p2p_segment(dt_device() == DT_CUDA), b, sizeof b), RUNS);
    double moved = transports(opts.min_size, opts.max_size, type, &ok);

    /* ==== 4. polite against blocking waits (MPICH's blocking calls spin; dtlab yields) ==== */
    int trips_polite = 0, trips_block = 0, was = dt_polite();   /* DT_WAIT may have set it */
    double *clock = dt_malloc(sizeof(double) * (size_t)iters, DT_CPU);    /* rank 0's */
    dt_set_polite(1);
    dt_timing polite = ping_pong(iters, &trips_polite, clock);
    dt_set_polite(0);
    dt_timing block = ping_pong(iters, &trips_block, clock);
    dt_set_polite(was);
    dt_free(clock);
    double spread[2] = {dt_timing_spread(polite), dt_timing_spread(block)};
    MPI_Bcast(spread, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);   /* rank 0 timed; all take the note */
    dt_machine m = dt_machine_now();
    dt_printf0("\n4. Ping-pong of one int between ranks 0 and 1%s\n"
               "   This host runs %d ranks on %d core%s. A round trip: the median of the mean\n"
               "   times of %d equal batches of trips (fewer if fewer trips), +- half the\n"
               "   distance between the quartiles (999%% means that or more):\n",
               n > 3 ? "; the other ranks wait in dt_recv." : n == 3 ? "; rank 2 waits in dt_recv."
                                                                     : ".",
               m.ranks, m.cores, m.cores == 1 ? "" : "s", (int)BATCHES);
    dt_printf0("   polite   (MPI_Testall + sched_yield): %9.1f us +-%3.0f%%  (%d trips)\n",
               polite.median * 1e6, 100 * fmin(spread[0], 9.99), trips_polite);
    dt_printf0("   blocking (MPI_Waitall, spinning)    : %9.1f us +-%3.0f%%  (%d trips)\n",
               block.median * 1e6, 100 * fmin(spread[1], 9.99), trips_block);
    if (dt_timing_compare(block, polite) > 0 && block.median > 2 * polite.median)
        dt_printf0("   Blocking waits were %.0fx slower: %s, a spinning rank keeps a\n"
                   "   core from the rank it waits for. That is why dtlab waits politely.\n",
                   block.median / polite.median, m.crowded ? "with more ranks than cores"
                   : "with the cores busy (other programs)");
    else if (m.crowded)
        dt_printf0("   More ranks than cores, yet spinning did not lose this time: the scheduler\n"
                   "   kept ranks 0 and 1 on cores, while a polite wait yields its core at every\n"
                   "   test, to a bystander or other work, even when the answer is about to\n"
                   "   arrive. Which effect wins varies from run to run: run it again.\n");
    else
        dt_printf0("   %s\n   Run more ranks than cores (mpiexec -n %d) to see blocking waits"
                   " crawl.\n", m.loaded ? "This job has a core per rank, but other work shares"
                   " them: a spinning\n   rank takes turns with it, and either kind of wait may"
                   " come out ahead." : "Every rank has a core of its own, so spinning costs"
                   " little and reacts a\n   bit faster.", 2 * m.cores + 1);
    dt_timing_note(fmax(moved, fmax(spread[0], spread[1])),
                   "In part 4 that is the point: a polite wait hands its core to the rank it "
                   "waits for, a spinning one holds it until preempted; other work slows both, "
                   "so their ratio varies. In part 3 it blurs the transports' differences.");
    dt_printf0("\nThe code: lib/p2p.c (dt_send, dt_recv, dt_sendrecv, dt_waitall), "
               "lib/mailbox.c (dt_p2p_via, dt_p2p_set_mode, send_some, take_piece)\n");

    /* ==== teardown ==== */
    dt_finalize();
    return ok ? 0 : 1;
}
