/* Lesson 27: ring attention, attention over a sequence cut across the ranks.
 *
 * What it teaches: context parallelism cuts every sequence into N chunks, one a rank, so
 * that the activations of a long sequence fit; everything a token does alone (its
 * LayerNorms, its MLP) stays local, but attention needs every earlier key. Ring
 * attention passes the keys and values around the ranks: at each of N steps a rank
 * computes its queries against the block in hand while it sends that block to its
 * right and receives the next from its left, the ring of lesson 08. The blocks arrive
 * in an order that depends on the rank, so the softmax cannot see a whole row at once:
 * each row keeps a running maximum m and a running sum l of e^(score - m) (the online
 * softmax), rescaling what it has when a larger score comes. The causal mask makes a
 * plain cut uneven, as the last rank's queries see every key and the first's only
 * their own; cutting the sequence into 2N chunks and giving rank r chunks r and 2N-1-r
 * (zig-zag) evens the work. This lesson runs the ring on one head, prints one row's m
 * and l step by step, checks the result against attention over the whole sequence, and
 * measures each rank's work under both cuts.
 *
 * The code: lib/nn/ringattn.c (dt_attn_block_forward, dt_cp_zigzag), lib/p2p.c
 * (dt_isend, dt_irecv).
 *
 * Run:  mpiexec -n 4 build/lessons/27_ring_attention
 *       mpiexec -n 4 build/lessons/27_ring_attention --seq 1024 --dim 64
 *       mpiexec -n 3 build/lessons/27_ring_attention --trace t.trace; build/dtviz t.trace
 * (the trace: the first pass and the first zig-zag one, each a call "attention_ring" to
 * animate, viz/model.h, and a step of the timetable, "attn s" over "kv s").
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 27_ring_attention [options]\n"
    "Causal attention of one head over a sequence cut across the N ranks, its keys and\n"
    "values passed around a ring; a plain cut against the zig-zag cut.\n"
    "  --seq T             positions, 2 to 65536, rounded up to a multiple of 2N\n"
    "                      (default 256)\n"
    "  --dim D             the head's width, 1 to 256 (default 32)\n"
    "  --reps R            timed ring passes for each cut, 1 to 1000 (default 20)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TAG = 27 };

/* This rank's part under one cut: nc chunks of n positions, the first at first[c] */
typedef struct {
    int nc, n, first[2];
} part;

static part cut_of(int zigzag, int r, int N, int T)
{
    part p = { .nc = zigzag ? 2 : 1, .n = zigzag ? T / (2 * N) : T / N };
    if (zigzag)
        dt_cp_zigzag(r, N, T, &p.first[0], &p.first[1]);
    else
        p.first[0] = r * p.n;
    return p;
}

/* A recorded pass's event kind at ring step s, [t0, t1], on each chunk of src's block */
static void rec_block(dt_event_kind kind, int peer, int s, part p, const int *from, int src,
                      int d, double t0, double t1)
{
    for (int b = 0; b < p.nc; b++) {
        int lo = from[2 * src + b];
        dt_trace_step(s, lo / p.n, lo, lo + p.n, lo / p.n, lo, lo + p.n);
        dt_trace_add(kind, peer, (size_t)p.n * 2 * d * sizeof(float), t0, t1);
    }
}

/* One ring pass under cut p: this rank's queries (its rows of qkv) against every rank's
 * keys and values, which travel around the ring as blocks (kv: this rank's chunks, k
 * then v, 2 d floats a row). Writes the finished output o (nc n, d); *compute the
 * seconds spent computing; traces into mt, lt (N steps) the running m and l of the last
 * query row after each step. rec > 0: the trace records this pass as step rec. */
static void ring_pass(const float *qkv, int T, int d, part p, float *o, float *lse,
                      double *compute, float *mt, float *lt, int rec)
{
    int N = dt_size(), r = dt_rank(), rows = p.nc * p.n, ld = 3 * d;
    size_t blk = (size_t)rows * 2 * d;                 /* floats of a rank's k and v */
    float *kv[2] = { malloc(blk * sizeof(float)), malloc(blk * sizeof(float)) };
    /* my queries, rows 2d apart as the blocks' keys are (the block functions take one
     * row stride for q, k and v) */
    float *q = malloc((size_t)rows * 2 * d * sizeof(float)), *m = malloc(rows * sizeof(float));
    float *l = malloc(rows * sizeof(float)), *scratch = malloc(T * sizeof(float));
    int *from = malloc((size_t)N * 2 * sizeof(int));   /* each rank's chunks' positions */
    DT_REQUIRE(kv[0] && kv[1] && q && m && l && scratch && from, "out of memory");
    for (int s = 0; s < N; s++) {
        part ps = cut_of(p.nc == 2, s, N, T);
        from[2 * s] = ps.first[0], from[2 * s + 1] = ps.first[1];
    }
    for (int c = 0; c < p.nc; c++)                     /* my queries, keys and values */
        for (int i = 0; i < p.n; i++) {
            const float *row = qkv + (size_t)(p.first[c] + i) * ld;
            int at = c * p.n + i;
            memcpy(q + (size_t)at * 2 * d, row, d * sizeof(float));
            memcpy(kv[0] + (size_t)at * 2 * d, row + d, 2 * (size_t)d * sizeof(float));
        }
    dt_attn_block_init(m, l, o, d, rows, d);
    *compute = 0;
    dt_trace_pause(rec == 0);
    dt_trace_call("attention_ring", (size_t)T, 2 * (size_t)d * sizeof(float));
    for (int s = 0; s < N; s++) {
        /* the block in hand came from rank r - s; the next one is on its way meanwhile */
        int src = (r - s + N) % N, last = s == N - 1;
        MPI_Request req[2];
        double tp = dt_trace_now();
        if (!last) {                    /* recorded below, by chunk of the sequence */
            dt_trace_pause(1);
            req[0] = dt_isend(kv[s % 2], blk * sizeof(float), (r + 1) % N, TAG, MPI_COMM_WORLD);
            req[1] = dt_irecv(kv[(s + 1) % 2], blk * sizeof(float), (r - 1 + N) % N, TAG,
                              MPI_COMM_WORLD);
            dt_trace_pause(rec == 0);
        }
        double t0 = dt_trace_now();
        for (int c = 0; c < p.nc; c++)                 /* my chunks against its chunks */
            for (int b = 0; b < p.nc; b++) {
                const float *kb = kv[s % 2] + (size_t)b * p.n * 2 * d;
                dt_attn_block_forward(q + (size_t)c * p.n * 2 * d, 2 * d, kb, kb + d, 2 * d,
                                      p.n, p.n, p.first[c], from[2 * src + b], d,
                                      m + c * p.n, l + c * p.n, o + (size_t)c * p.n * d, d,
                                      scratch);
            }
        double t1 = dt_trace_now();
        *compute += t1 - t0;
        mt[s] = m[rows - 1], lt[s] = l[rows - 1];
        if (!last)
            dt_waitall(2, req);
        if (rec > 0) {                  /* the call's events, then the timetable's */
            double tw = dt_trace_now();
            dt_trace_phase("attention_ring", "ring");
            rec_block(DT_EV_REDUCE, -1, s, p, from, src, d, t0, t1);
            if (!last) {
                rec_block(DT_EV_SEND, (r + 1) % N, s, p, from, src, d, tp, tw);
                rec_block(DT_EV_RECV, (r - 1 + N) % N, s, p, from, (src - 1 + N) % N, d, tp, tw);
            }
            dt_trace_phase("train", "attn"), dt_trace_step(rec, s, 0, 0, s, 0, 0);
            dt_trace_add(DT_EV_COMPUTE, -1, 0, t0, t1);
            dt_trace_phase("attention_ring", "kv"), dt_trace_step(rec, s, 0, 0, s, 0, 0);
            if (!last)
                dt_trace_add(DT_EV_MARK, -1, blk * sizeof(float), tp, tw);
        }
    }
    dt_trace_pause(1);
    dt_attn_block_finish(m, l, o, d, lse, rows, d);
    free(kv[0]); free(kv[1]); free(q); free(m); free(l); free(scratch); free(from);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int N = dt_size(), rank = dt_rank(), T = 256, d = 32, reps = 20;
    dt_int_option io[] = {{"seq", 2, 65536, &T}, {"dim", 1, 256, &d}, {"reps", 1, 1000, &reps}};
    dt_parse_int_options(argc, argv, io, 3, usage);
    if (dt_device() == DT_CUDA)        /* scripts/gpu-check.sh fails a GPU run on this line */
        dt_printf0("on the CPU: this lesson's attention runs on host buffers, whatever the "
                   "device\n");
    T = (T + 2 * N - 1) / (2 * N) * (2 * N);
    /* q, k, v of every position, the same on every rank (from the seed, no messages) */
    float *qkv = malloc((size_t)T * 3 * d * sizeof(float));
    DT_REQUIRE(qkv != NULL, "out of memory");
    unsigned long long s = 27;
    for (size_t i = 0; i < (size_t)T * 3 * d; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        qkv[i] = (float)((double)(s >> 40) / (1 << 24) * 4 - 2);
    }
    dt_printf0("One head of width %d over %d positions on %d rank%s: rank r holds %d "
               "positions'\nqueries, keys and values; the keys and values go around the "
               "ring, %d steps.\n\n", d, T, N, N == 1 ? "" : "s", T / N, N);

    /* ==== the ring, step by step: the last position's row on the last rank ==== */
    part p = cut_of(0, rank, N, T);
    int rows = p.n;
    float *o = malloc((size_t)T * d * sizeof(float)), *lse = malloc(T * sizeof(float));
    float *mt = malloc(N * sizeof(float)), *lt = malloc(N * sizeof(float));
    double comp;
    dt_trace_pause(1);                  /* the trace: two ring passes, nothing else */
    dt_barrier(MPI_COMM_WORLD);
    ring_pass(qkv, T, d, p, o, lse, &comp, mt, lt, 1);
    if (rank == N - 1 && rank != 0) {                   /* rank 0 prints it */
        MPI_Send(mt, N, MPI_FLOAT, 0, TAG, MPI_COMM_WORLD);
        MPI_Send(lt, N, MPI_FLOAT, 0, TAG, MPI_COMM_WORLD);
        MPI_Send(lse + rows - 1, 1, MPI_FLOAT, 0, TAG, MPI_COMM_WORLD);
    }
    float lse_last = lse[rows - 1];
    if (rank == 0) {
        if (N > 1) {
            MPI_Recv(mt, N, MPI_FLOAT, N - 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(lt, N, MPI_FLOAT, N - 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(&lse_last, 1, MPI_FLOAT, N - 1, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        printf("Position %d (rank %d's last query) meets the blocks in this order, its\n"
               "running max m and sum l of e^(score - m) after each:\n", T - 1, N - 1);
        for (int st = 0; st < N; st++) {
            int src = (N - 1 - st + N) % N;
            printf("  step %d: keys %d..%d (rank %d's%s): m = %.4f, l = %.4f%s\n", st,
                   src * rows, src * rows + rows - 1, src, st == 0 ? ", its own" : "",
                   (double)mt[st], (double)lt[st], st > 0 && mt[st] > mt[st - 1]
                   ? "  (larger: l rescaled)" : "");
        }
        printf("  finished: o / l, and lse = m + log l = %.4f, kept for backward\n",
               (double)lse_last);
    }

    /* ==== the same as attention over the whole sequence ==== */
    float *all = rank == 0 ? malloc((size_t)T * d * sizeof(float)) : NULL;
    dt_gather(o, rows * d, MPI_FLOAT, all, rows * d, MPI_FLOAT, 0, MPI_COMM_WORLD);
    int ok = 1;
    if (rank == 0) {
        float *att = malloc((size_t)T * T * sizeof(float)), *y = malloc((size_t)T * d * 4);
        DT_REQUIRE(att && y, "out of memory");
        dt_attention_forward(qkv, att, y, 1, T, 1, d);
        double diff = 0;
        for (size_t i = 0; i < (size_t)T * d; i++)
            diff = fmax(diff, fabs((double)all[i] - y[i]));
        ok = diff <= 1e-5;
        printf("\nThe ring's output against attention over the whole sequence on one "
               "rank:\nmax |difference| %.2g: %s\n", diff, ok ? "the same, to float rounding"
               : "DIFFERENT");
        free(att);
        free(y);
        free(all);
    }

    /* ==== the causal imbalance, and the zig-zag cut ==== */
    double pairs[2], t_comp[2], t_pass[2], spread = 0, sent = 0;
    for (int z = 0; z < 2; z++) {
        part pz = cut_of(z, rank, N, T);
        long pr = 0;
        for (int c = 0; c < pz.nc; c++)
            for (int src = 0; src < N; src++) {
                part ps = cut_of(z, src, N, T);
                for (int b = 0; b < ps.nc; b++)
                    pr += dt_cp_pairs(pz.first[c], ps.first[b], pz.n);
            }
        pairs[z] = (double)pr;
        double *tc = malloc(reps * sizeof(double));
        dt_barrier(MPI_COMM_WORLD);
        size_t b0 = dt_bytes_sent();
        double t0 = dt_trace_now();
        for (int i = 0; i < reps; i++)
            ring_pass(qkv, T, d, pz, o, lse, &tc[i], mt, lt, z == 1 && i == 0 ? 2 : 0);
        dt_barrier(MPI_COMM_WORLD);
        t_pass[z] = (dt_trace_now() - t0) / reps;
        sent = (double)(dt_bytes_sent() - b0) / reps;     /* the barrier's are nothing */
        dt_timing tm = dt_timing_of(tc, reps);
        t_comp[z] = tm.median;
        spread = fmax(spread, dt_timing_spread(tm));
        free(tc);
    }
    double *every = rank == 0 ? malloc((size_t)N * 6 * sizeof(double)) : NULL;
    double mine[6] = { pairs[0], t_comp[0], pairs[1], t_comp[1], t_pass[0], t_pass[1] };
    MPI_Allreduce(MPI_IN_PLACE, &spread, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &sent, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Gather(mine, 6, MPI_DOUBLE, every, 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("\nEach rank's causal (query, key) pairs and compute time a pass (median of "
               "%d),\nplain cut (rank r: positions r T/N..) and zig-zag (chunks r and "
               "2N-1-r of 2N):\n  rank    plain pairs   ms    zig-zag pairs   ms\n", reps);
        double pmin = 1e300, pmax = 0, zmin = 1e300, zmax = 0, cpmin = 1e300, cpmax = 0;
        double czmin = 1e300, czmax = 0;
        for (int r = 0; r < N; r++) {
            double *e = every + 6 * r;
            printf("  %4d  %13.0f %6.3f  %13.0f %6.3f\n", r, e[0], e[1] * 1e3, e[2],
                   e[3] * 1e3);
            pmin = fmin(pmin, e[0]), pmax = fmax(pmax, e[0]);
            zmin = fmin(zmin, e[2]), zmax = fmax(zmax, e[2]);
            cpmin = fmin(cpmin, e[1]), cpmax = fmax(cpmax, e[1]);
            czmin = fmin(czmin, e[3]), czmax = fmax(czmax, e[3]);
        }
        printf("plain: the busiest rank has %.2f times the least busy's pairs (2N-1 = %d "
               "as the\nchunks grow) and computed %.2f times as long.\nzig-zag: %s; the "
               "busiest computed %.2f times as long\nas the least busy.\n",
               pmax / pmin, 2 * N - 1, cpmax / cpmin, zmax == zmin ? "every rank the same "
               "pairs" : "UNEVEN pairs", czmax / czmin);
        printf("A pass waits for its slowest rank: %.3f ms plain, %.3f ms zig-zag "
               "(%.2fx).\n", every[4] * 1e3, every[5] * 1e3, every[4] / every[5]);
        ok &= zmax == zmin && (N == 1 || pmax > pmin);
        double bytes = (double)(N - 1) * T / N * 2 * d * 4;
        printf("Bytes a pass, per rank: %d steps of the keys and values of %d positions,\n"
               "(N-1) T/N x 2d x 4 = %.0f, measured %.0f (the most a rank sent): what "
               "an\nallgather of them would send.\n", N - 1, T / N, bytes, sent);
        ok &= fabs(sent - bytes) < 1;
    }
    dt_timing_note(spread, "The times are one machine's: the pairs are what the cut "
                   "decides.");

    /* ==== the check ==== */
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    dt_printf0("\ncheck: ring = whole attention, zig-zag's pairs even, bytes as counted: "
               "%s\n",
               ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/nn/ringattn.c (dt_attn_block_forward, dt_cp_zigzag), "
               "lib/p2p.c (dt_isend, dt_irecv)\n");

    /* ==== teardown ==== */
    free(every); free(qkv); free(o); free(lse); free(mt); free(lt);
    dt_finalize();
    return ok ? 0 : 1;
}
