/* Lesson 06: allgather on a ring.
 *
 * What it teaches: every rank has one block; every rank needs all of them (FSDP
 * gathers a layer's sharded weights this way before using them). On a ring, each rank
 * sends only to its right neighbour: at each step it passes on the block it received
 * last. After N-1 steps everyone has everything, and each rank has sent N-1 blocks,
 * (N-1)/N of the gathered buffer: the least any allgather can send.
 *
 * The code: lib/collectives/allgather.c (dti_ring_allgather, the ring, which dt_allgather
 * calls and lesson 08's allreduce reuses), lib/schedule.c (dt_ring_ag_send_chunk,
 * dt_ring_ag_recv_chunk: which block moves at which step).
 *
 * Run:  mpiexec -n 4 build/lessons/06_allgather
 *       mpiexec -n 5 build/lessons/06_allgather --count 1000 --type half
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 06_allgather [options]\n"
    "Gathers every rank's block onto every rank with dt_allgather, step by step.\n"
    "  --count C           elements in each rank's block, 0 to 2^28/N (default 2)\n"
    "  --type T            float|double|int|half (default float)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SHOW = 8 };     /* the step table is printed for up to this many ranks */

/* The table has a column per rank, as wide as "rank 7" or the n letters, and up to 3
 * spaces apart (*sep), so that it fits in 80 columns: 8 + n * (sep + width) <= 80. */
static int column_width(int n, int *sep)
{
    int w = n > 6 ? n : 6;
    *sep = 72 / n - w > 3 ? 3 : 72 / n - w;
    return w;
}

/* The step hook: each rank compares its buffer, block by block, with the answer MPI
 * gave (ctx), and rank 0 prints which blocks every rank holds so far: a letter per
 * block, A for rank 0's, "." for one not yet arrived. Plain MPI_Gather, not counted. */
static void show_step(const char *coll, const char *phase, int step, const void *buf,
                      int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)coll; (void)phase;
    int rank, n;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &n);
    size_t blk = (size_t)(count / n) * dt_type_size(type);
    char holds[SHOW + 1] = "", *h = malloc((size_t)n * blk);
    char *all = malloc((size_t)n * sizeof holds);
    dt_memcpy(h, buf, (size_t)n * blk);
    for (int c = 0; c < n && c < SHOW; c++)
        holds[c] = memcmp(h + c * blk, (const char *)ctx + c * blk, blk) == 0 ? 'A' + c : '.';
    MPI_Gather(holds, sizeof holds, MPI_CHAR, all, sizeof holds, MPI_CHAR, 0, comm);
    if (rank == 0 && n <= SHOW) {
        int sep, w = column_width(n, &sep);
        printf("  %-6d", step);
        for (int r = 0; r < n; r++)
            printf("%*s%-*.*s", sep, "", w, n, all + r * sizeof holds);
        printf("\n");
    }
    free(h);
    free(all);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank();
    dt_opts opts = {.count = 2, .count_max = (1 << 28) / n, .type = MPI_FLOAT};
    dt_parse_options(argc, argv, "ct", usage, &opts);
    int count = opts.count;
    MPI_Datatype type = opts.type;

    size_t blk = (size_t)count * dt_type_size(type);   /* S: one rank's block, in bytes */
    void *mine_h = dt_malloc(blk, DT_CPU), *want = dt_malloc(n * blk, DT_CPU);
    dt_fill_test_data(mine_h, count, type, MPI_SUM, 6, rank);
    void *mine = dt_malloc(blk, dt_device()), *all = dt_malloc(n * blk, dt_device());
    dt_memcpy(mine, mine_h, blk);
    /* the reference first: the step hook compares each step with it */
    MPI_Allgather(mine_h, count, type, want, count, type, MPI_COMM_WORLD);
    /* nothing has arrived yet: fill with a byte pattern no test value has (0x7f7f...) */
    void *unset = dt_malloc(n * blk, DT_CPU);
    memset(unset, 0x7f, n * blk);
    dt_memcpy(all, unset, n * blk);
    dt_free(unset);

    /* ==== the idea ====
     *      +--> 0 --> 1 --> 2 --> 3 --+     rank r starts with its block; at step s it
     *      |                          |     sends right the block it received at step
     *      +--------------------------+     s-1 (its own at step 0)
     */
    dt_printf0("Allgather of %d %s value%s from each of %d rank%s, on a ring:\n"
               "every step, each rank passes the block it received last to its right neighbour.\n",
               count, dt_type_name(type), count == 1 ? "" : "s", n, n == 1 ? "" : "s");
    if (n <= SHOW && count > 0) {
        int sep, w = column_width(n, &sep);
        dt_printf0("The blocks each rank holds (A is rank 0's block, B rank 1's, ...):\n\n"
                   "  step  ");
        for (int r = 0; r < n; r++)
            dt_printf0("%*srank %-*d", sep, "", w - 5, r);
        dt_printf0("\n  start ");
        for (int r = 0; r < n; r++) {
            char row[SHOW + 1] = "";
            memset(row, '.', (size_t)n);
            row[r] = (char)('A' + r);
            dt_printf0("%*s%-*s", sep, "", w, row);
        }
        dt_printf0("\n");
    }

    /* ==== the library call ==== */
    dt_bytes_reset();
    dt_set_step_hook(show_step, want);
    dt_allgather(mine, count, type, all, count, type, MPI_COMM_WORLD);
    dt_set_step_hook(NULL, NULL);
    unsigned long long sent = dt_bytes_sent();

    /* ==== the check ==== */
    int ok = dt_check_close(all, want, n * count, type, 0, "allgather", MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    char b[32], f[32];
    unsigned long long *sent_all = malloc(sizeof *sent_all * (size_t)n);
    MPI_Gather(&sent, 1, MPI_UNSIGNED_LONG_LONG, sent_all, 1, MPI_UNSIGNED_LONG_LONG, 0,
               MPI_COMM_WORLD);
    unsigned long long lo = sent_all[0], hi = sent_all[0];       /* rank 0's view */
    for (int r = 0; rank == 0 && r < n; r++) {
        lo = sent_all[r] < lo ? sent_all[r] : lo;
        hi = sent_all[r] > hi ? sent_all[r] : hi;
    }
    dt_printf0("\nS = %d %s value%s x %zu B = %s per block; the gathered buffer is\n"
               "N*S = %d x %s = %s.\n", count, dt_type_name(type), count == 1 ? "" : "s",
               dt_type_size(type), dt_format_bytes((double)blk, b, sizeof b), n, b,
               dt_format_bytes((double)n * blk, f, sizeof f));
    dt_printf0("bytes sent (dt_bytes_sent): %s%s%s by every rank,",
               dt_format_bytes((double)lo, b, sizeof b), lo == hi ? "" : " to ",
               lo == hi ? "" : dt_format_bytes((double)hi, f, sizeof f));
    dt_printf0(" (N-1)*S = %d x %s\n", n - 1, dt_format_bytes((double)blk, b, sizeof b));
    int bytes_ok = sent == (size_t)(n - 1) * blk;
    MPI_Allreduce(MPI_IN_PLACE, &bytes_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    dt_printf0("Each rank sends N-1 = %d block%s: (N-1)/N of the gathered buffer, the least any\n"
               "allgather can, since every rank must receive the N-1 blocks it lacks.\n", n - 1,
               n == 2 ? "" : "s");
    free(sent_all);
    dt_printf0("All links of the ring carry a block at every step: the time hardly grows with N\n"
               "for large blocks, while a gather + broadcast would funnel through one rank.\n");
    dt_printf0("check: %s\n", !ok ? "FAILED: differs from MPI_Allgather"
                                 : !bytes_ok ? "FAILED: a rank sent other than (N-1)*S"
                                 : "matches MPI_Allgather; every rank sent (N-1)*S");
    dt_printf0("The code: lib/collectives/allgather.c (dt_allgather, dti_ring_allgather)\n");
    ok &= bytes_ok;

    /* ==== teardown ==== */
    dt_free(mine);
    dt_free(all);
    dt_free(mine_h);
    dt_free(want);
    dt_finalize();
    return ok ? 0 : 1;
}
