/* Lesson 08: the ring allreduce, step by step: reduce-scatter, then allgather.
 *
 * What it teaches: data-parallel training sums every rank's gradients onto every rank
 * after each backward pass: an allreduce. The ring does it in two phases of N-1 steps,
 * each rank talking only to its neighbours and sending 2(N-1)/N * S bytes for S bytes
 * of gradients: less than 2S whatever N is. It prints every rank's buffer after every
 * step, so you can watch the chunks travel and fill up (2 to 6 ranks, small counts;
 * otherwise it times the ring).
 *
 * The code: lib/collectives/allreduce.c (dt_allreduce_ring; its comment is this lesson's
 * long form: step table, invariant, cost), two calls: dti_ring_reduce_scatter (lesson 07),
 * then dti_ring_allgather (lesson 06); the chunk arithmetic is in lib/schedule.c.
 *
 * Run:  mpiexec -n 4 build/lessons/08_ring_allreduce
 *       mpiexec -n 5 build/lessons/08_ring_allreduce --count 7 --op max
 *       mpiexec -n 4 build/lessons/08_ring_allreduce --count 4M   (just timed)
 *       mpiexec -n 4 build/lessons/08_ring_allreduce --trace ring.trace   (then dtviz)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 08_ring_allreduce [options]\n"
    "Prints every rank's chunks after each step of dt_allreduce_ring, or times it.\n"
    "  --count C           elements per rank, 0 to 2^28 (default N+1, so the chunks\n"
    "                      are uneven); the steps are shown for 2 to 6 ranks and C\n"
    "                      up to 3*N if they fit in 80 columns, otherwise timed\n"
    "  --type T            float|double|int|half (default float)\n"
    "  --op OP             sum|max|min|prod (default sum)\n"
    "  --iters K           timed allreduces when the steps are not shown, 1 to 10^6\n"
    "                      (default 5, after a warm-up); prints median and spread\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SHOW_RANKS = 6, MAXSNAP = 2 * SHOW_RANKS, WIDTH = 80 };

/* ==== watching: called by the hook after every step, on every rank ====
 * Rank 0 gathers every rank's buffer and byte count (plain MPI, not counted in dtlab's
 * bytes, waited for politely as in lesson 02) and prints the tables after the run, once
 * the widest value is known: the columns line up, and it can tell if they fit in 80. */
struct snap { int rs, step; char *bufs; unsigned long long *sent; };   /* step -1: start */
struct watch { int nsnap; struct snap s[MAXSNAP]; };

static void record_step(const char *coll, const char *phase, int step, const void *buf,
                        int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)coll;
    struct watch *w = ctx;
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    size_t nbytes = (size_t)count * dt_type_size(type);
    char *mine = malloc(nbytes), *all = rank == 0 ? malloc(nbytes * n) : NULL;
    unsigned long long sent = dt_bytes_sent(), *sent_all = rank ? NULL : malloc(sizeof sent * n);
    dt_memcpy(mine, buf, nbytes);
    MPI_Request req[2];
    MPI_Igather(mine, (int)nbytes, MPI_BYTE, all, (int)nbytes, MPI_BYTE, 0, comm, &req[0]);
    MPI_Igather(&sent, 1, MPI_UNSIGNED_LONG_LONG, sent_all, 1, MPI_UNSIGNED_LONG_LONG, 0,
                comm, &req[1]);
    dt_waitall(2, req);
    free(mine);
    if (rank == 0)           /* 2(N-1)+1 snapshots at most: MAXSNAP is enough */
        w->s[w->nsnap++] = (struct snap){strcmp(phase, "reduce-scatter") == 0, step, all, sent_all};
}

/* Chunk c's column: "[v v]", each value vw wide, or at least " chunk c ". */
static int chunk_width(int count, int n, int c, int vw)
{
    size_t lo, hi;
    dt_chunk_bounds((size_t)count, n, c, &lo, &hi);
    return (int)fmax((double)(hi - lo) * (vw + 1) + 1, 9);
}

/* Rank 0: the widest value (*vw), and the width of the tables in columns. */
static int table_width(const struct watch *w, int count, MPI_Datatype type, int n, int *vw)
{
    char s[32];
    int width = 8 + 6;           /* "  rank |", and " 240 B": 2(N-1) chunks of 3 doubles */
    *vw = 1;
    for (int k = 0; k < w->nsnap; k++)
        for (int i = 0; i < count * n; i++)
            *vw = (int)fmax(*vw, snprintf(s, sizeof s, "%g", dt_elem(w->s[k].bufs, i, type)));
    for (int c = 0; c < n; c++)
        width += chunk_width(count, n, c, *vw) + 1;
    return width;
}

/* Rank 0 prints the tables: a row per rank, [ ] around the chunk it received. */
static void print_steps(const struct watch *w, int count, MPI_Datatype type, MPI_Op op,
                        int n, int vw)
{
    size_t nbytes = (size_t)count * dt_type_size(type), lo, hi;
    for (int k = 0; k < w->nsnap; k++) {
        const struct snap *p = &w->s[k];
        if (p->step < 0)
            printf("\nstart: each rank's own data\n");
        else if (p->rs)
            printf("\nreduce-scatter step %d: send a chunk right, combine (%s) the one from "
                   "the left\n", p->step, dt_op_name(op));
        else
            printf("\nallgather step %d: pass a reduced chunk right; the receiver copies it\n",
                   p->step);
        printf("  rank |");
        for (int c = 0; c < n; c++)
            printf(" chunk %-*d|", chunk_width(count, n, c, vw) - 7, c);
        printf(" sent\n");
        for (int r = 0; r < n; r++) {
            int got = p->step < 0 ? -1 : p->rs ? dt_ring_rs_recv_chunk(r, n, p->step)
                                               : dt_ring_ag_recv_chunk(r, n, p->step);
            printf("  %4d |", r);
            for (int c = 0; c < n; c++) {
                dt_chunk_bounds((size_t)count, n, c, &lo, &hi);
                int len = printf("%s", c == got ? "[" : " ");
                for (size_t i = lo; i < hi; i++)
                    len += printf("%*g%s", vw, dt_elem(p->bufs + r * nbytes, i, type),
                                  i + 1 < hi ? " " : "");
                len += printf("%s", c == got ? "]" : "");
                printf("%*s|", chunk_width(count, n, c, vw) - len, "");
            }
            printf(" %llu B\n", p->sent[r]);
        }
        if (p->step == n - 2)
            printf("%s done: %s.\n", p->rs ? "reduce-scatter" : "allgather", p->rs ?
                   "rank r holds chunk r reduced over all ranks" : "every rank holds every chunk");
    }
}

/* One ring allreduce, as dt_time_runs runs it: run_ring(ctx). */
struct ring_run { const void *in; void *out; int count; MPI_Datatype type; MPI_Op op; };

static void run_ring(void *ctx)
{
    struct ring_run *r = ctx;
    dt_allreduce_ring(r->in, r->out, r->count, r->type, r->op, MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank();
    dt_opts opts = {.count = n + 1, .type = MPI_FLOAT, .op = MPI_SUM, .iters = 5};
    dt_parse_options(argc, argv, "ctoi", usage, &opts);
    int count = opts.count, iters = opts.iters;
    MPI_Datatype type = opts.type;
    MPI_Op op = opts.op;

    size_t nbytes = (size_t)count * dt_type_size(type);
    double formula = 2.0 * (n - 1) / n * (double)nbytes;       /* 2(N-1)/N * S */
    char f[32];                                  /* in bytes, to compare with what is sent */
    snprintf(f, sizeof f, formula == floor(formula) ? "%.0f B" : "%.1f B", formula);
    int watch = count <= 3 * n && n <= SHOW_RANKS && n > 1 && count > 0;

    /* The input: for a sum, 10^r on rank r, whose digits say who is in a partial sum,
     * if the total, 11...1, is exact in the type; otherwise, and for other ops, test data. */
    void *in_h = dt_malloc(nbytes, DT_CPU), *want = dt_malloc(nbytes, DT_CPU);
    double total = (pow(10, n) - 1) / 9, one = 0;    /* one: is the total exact in type? */
    if (watch)
        dt_elem_set(&one, 0, type, total);
    int digits = watch && op == MPI_SUM && dt_elem(&one, 0, type) == total;
    if (digits)
        for (int i = 0; i < count; i++)
            dt_elem_set(in_h, (size_t)i, type, pow(10, rank));
    else
        dt_fill_test_data(in_h, count, type, op, 8, rank);
    void *in = dt_malloc(nbytes, dt_device()), *out = dt_malloc(nbytes, dt_device());
    dt_memcpy(in, in_h, nbytes);

    /* ==== the idea: a picture of the ring, the chunks, the two phases ==== */
    char ring[128] = "+-->", bar[128] = "+", b[32];
    for (int r = 0, k = 4; r < n; r++)                 /* 0 --> 1 --> 2 --> ... --> 9 */
        if (n <= 8 || r < 3 || r >= n - 2)
            k += snprintf(ring + k, sizeof ring - k, " %d %s", r, r < n - 1 ? "-->" : "--+");
        else if (r == 3)
            k += snprintf(ring + k, sizeof ring - k, " ... -->");
    memset(bar + 1, '-', strlen(ring) - 2);
    strcpy(bar + strlen(ring) - 1, "+");
    size_t lo, hi, big;
    char first[32] = "chunk 0";                     /* the chunks that get one more */
    dt_chunk_bounds((size_t)count, n, 0, &lo, &big);          /* chunk 0 is the largest */
    dt_chunk_bounds((size_t)count, n, n - 1, &lo, &hi);       /* the last, the smallest */
    if (count % n > 1)
        snprintf(first, sizeof first, "chunks 0 to %d", count % n - 1);
    if (n == 1)
        dt_printf0("With one rank an allreduce is a copy: run mpiexec -n 4 to see the ring.\n");
    else {
        dt_printf0("Ring allreduce (%s) of %d %s value%s on %d ranks: each rank sends only\n"
                   "to its right neighbour and receives only from its left one:\n\n"
                   "    %s\n    |%*s|\n    %s\n\n"
                   "The buffer, S = %d x %zu B = %s, is cut into N = %d chunks,\none per rank: ",
                   dt_op_name(op), count, dt_type_name(type), count == 1 ? "" : "s", n, ring,
                   (int)strlen(ring) - 2, "", bar, count, dt_type_size(type),
                   dt_format_bytes((double)nbytes, b, sizeof b), n);
        if (count % n == 0)
            dt_printf0("%zu element%s each (dt_chunk_bounds).\n", big, big == 1 ? "" : "s");
        else
            dt_printf0("%zu element%s in %s, %zu in the rest (dt_chunk_bounds):\nthe count does "
                       "not divide by N, so the first count mod N chunks get one more.\n",
                       big, big == 1 ? "" : "s", first, hi - lo);
        dt_printf0("1. reduce-scatter, N-1 = %d step%s: each rank sends one chunk right and\n"
                   "   combines the chunk arriving from its left with its own copy (%s).\n"
                   "   Rank r ends up with chunk r reduced over all ranks.\n"
                   "   [lib/collectives/reduce_scatter.c: dti_ring_reduce_scatter; lesson 07]\n"
                   "2. allgather, N-1 = %d step%s: each rank passes right the reduced chunk\n"
                   "   it got last; the receiver copies it. Every rank ends with every chunk.\n"
                   "   [lib/collectives/allgather.c: dti_ring_allgather; lesson 06]\n"
                   "dt_allreduce_ring (lib/collectives/allreduce.c) is these two calls; its\n"
                   "comment has the step table, invariant and cost. Each rank sends 2(N-1)\n"
                   "chunks of about S/N: 2(N-1)/N * S = %s, under 2S for any N.\n",
                   n - 1, n == 2 ? "" : "s", dt_op_name(op), n - 1, n == 2 ? "" : "s", f);
    }

    /* ==== the library call, watched step by step or not ==== */
    struct watch w = {0};
    dt_bytes_reset();
    if (watch) {
        /* in place, so the tables show whole buffers (out of place, out fills chunk by chunk) */
        dt_memcpy(out, in, nbytes);
        record_step("allreduce_ring", "start", -1, out, count, type, MPI_COMM_WORLD, &w);
        dt_set_step_hook(record_step, &w);
        dt_allreduce_ring(MPI_IN_PLACE, out, count, type, op, MPI_COMM_WORLD);
        dt_set_step_hook(NULL, NULL);
    } else {
        dt_allreduce_ring(in, out, count, type, op, MPI_COMM_WORLD);
    }
    unsigned long long sent = dt_bytes_sent(), most, least;

    /* ==== the steps, when they fit in 80 columns ==== */
    int vw = 0, shown = 0;
    if (watch && rank == 0)
        shown = table_width(&w, count, type, n, &vw) <= WIDTH;
    MPI_Bcast(&shown, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (shown) {
        dt_printf0("%s", digits ? "\nRank r starts with 10^r in every element, so a sum's "
                   "digits say whose\ndata it holds: 1011 = ranks 0, 1 and 3.\n" : "\n");
        dt_printf0("[ ] marks the chunk each rank received in that step, from its left; the\n"
                   "chunk it sent right is the next one (mod N). sent: its dt_bytes_sent().\n");
        print_steps(&w, count, type, op, n, vw);
    }
    for (int k = 0; k < w.nsnap; k++) {       /* rank 0's snapshots */
        free(w.s[k].bufs);
        free(w.s[k].sent);
    }

    /* ==== the check: MPI_Allreduce on the host copies (fp16 needs dtlab's MPI op) ==== */
    MPI_Op mpi_op = type == DT_HALF ? dt_half_mpi_op(op) : op;
    MPI_Allreduce(in_h, want, count, type, mpi_op, MPI_COMM_WORLD);
    int ok = dt_check_close(out, want, count, type, 0, "allreduce_ring", MPI_COMM_WORLD);

    /* ==== the numbers: the bytes sent, and the time when the steps are not shown ==== */
    size_t r_lo, r_hi, q_lo, q_hi, esize = dt_type_size(type);
    dt_chunk_bounds((size_t)count, n, rank, &r_lo, &r_hi);
    dt_chunk_bounds((size_t)count, n, (rank + 1) % n, &q_lo, &q_hi);
    int bytes_ok = sent == 2 * nbytes - (r_hi - r_lo + q_hi - q_lo) * esize;
    MPI_Allreduce(MPI_IN_PLACE, &bytes_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    MPI_Allreduce(&sent, &most, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&sent, &least, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    if (most == least)
        dt_printf0("\nBytes sent: %llu B by every rank; 2(N-1)/N * S = %s.\n", most, f);
    else                          /* rank 0's figures in the example */
        dt_printf0("\nBytes sent: %llu to %llu B per rank; 2(N-1)/N * S = %s.\n"
                   "The chunks are uneven: rank r sends every chunk but chunk r in the\n"
                   "reduce-scatter and every chunk but chunk r+1 in the allgather, so\n"
                   "2S - |chunk r| - |chunk r+1|; rank 0: 2 x %zu - %zu - %zu = %llu B.\n",
                   least, most, f, nbytes, (r_hi - r_lo) * esize, (q_hi - q_lo) * esize, sent);
    if (!shown && n > 1) {
        struct ring_run run = {in, out, count, type, op};
        dt_timing t = dt_time_runs(run_ring, &run, iters, MPI_COMM_WORLD);
        char a[32], bw[32], effect[320];
        double sp = dt_timing_spread(t);
        dt_printf0("The steps are shown for 2 to %d ranks and --count up to 3*N, when they fit\n"
                   "in %d columns; this run is timed instead.\n"
                   "Time per allreduce: %.1f us +-%.0f%%, the median of %d run%s (each until the\n"
                   "slowest rank is done; +- half the distance between the quartiles).\n"
                   "Bandwidth: algorithm %s/s (S / time), bus %s/s (x 2(N-1)/N).\n",
                   SHOW_RANKS, WIDTH, t.median * 1e6, 100 * sp, iters, iters == 1 ? "" : "s",
                   dt_format_bytes(nbytes / t.median, a, sizeof a),
                   dt_format_bytes(formula / t.median, bw, sizeof bw));
        snprintf(effect, sizeof effect, "Each of the ring's 2(N-1) = %d steps waits for the "
                 "left neighbour's chunk, so the time counts waits more than bytes, and the "
                 "bandwidths fall far below what memory can move.", 2 * (n - 1));
        dt_timing_note(sp, effect);
    }
    dt_printf0("check: %s\n", !ok ? "FAILED: differs from MPI_Allreduce" : !bytes_ok
               ? "FAILED: a rank sent other than 2S - |chunk r| - |chunk r+1|"
               : "matches MPI_Allreduce; every rank sent 2S - |chunk r| - |chunk r+1|");
    dt_printf0("The code: lib/collectives/allreduce.c (dt_allreduce_ring)\n");

    /* ==== teardown ==== */
    dt_free(in);
    dt_free(out);
    dt_free(in_h);
    dt_free(want);
    dt_finalize();
    return ok && bytes_ok ? 0 : 1;
}
