/* Lesson 10: all-to-all, a transpose across ranks.
 *
 * What it teaches: in an all-to-all, rank r has a block for every rank j, and rank j
 * ends with the blocks every rank had for it: the (rank x block) matrix is transposed.
 * Mixture-of-experts layers use it to send each token to the rank holding its expert,
 * and sequence parallelism to swap a sharded sequence for sharded heads. The pairwise
 * exchange takes N-1 steps; at step s rank r sends to r+s and receives from r-s, so
 * every rank sends and receives one block per step and no rank is swamped.
 *
 * The code: lib/collectives/alltoall.c (dt_alltoall, the pairwise exchange), with its
 * partners from lib/schedule.h (dt_a2a_send_peer, dt_a2a_recv_peer).
 *
 * Run:  mpiexec -n 4 build/lessons/10_alltoall
 *       mpiexec -n 5 build/lessons/10_alltoall --count 100000 --type double
 */
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 10_alltoall [options]\n"
    "Transposes labelled blocks across the ranks with dt_alltoall, then runs it on\n"
    "test data and checks it against MPI_Alltoall.\n"
    "  --count C           elements in each block, 0 to 2^28/N (default 1000)\n"
    "  --type T            float|double|int|half (default float)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SHOW = 8 };     /* the picture is printed for up to this many ranks */

/* Rank 0 prints every rank's n labels (one int per block, host or device) as a matrix,
 * a label 10*a + b as "a>b": a block from rank a for rank b. Collective. */
static void print_blocks(const char *title, const int *labels, int n)
{
    int *mine = malloc(sizeof(int) * n), *all = malloc(sizeof(int) * n * n);
    dt_memcpy(mine, labels, sizeof(int) * n);
    MPI_Gather(mine, n, MPI_INT, all, n, MPI_INT, 0, MPI_COMM_WORLD);
    if (dt_rank() == 0) {
        printf("%s\n        ", title);
        for (int j = 0; j < n; j++)
            printf(" block %d", j);
        for (int r = 0; r < n; r++) {
            printf("\n rank %d:", r);
            for (int j = 0; j < n; j++)
                printf("     %d>%d", all[r * n + j] / 10, all[r * n + j] % 10);
        }
        printf("\n\n");
    }
    free(mine);
    free(all);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank();
    dt_opts opts = {.count = 1000, .count_max = (1 << 28) / n, .type = MPI_FLOAT};
    dt_parse_options(argc, argv, "ct", usage, &opts);
    int count = opts.count;
    MPI_Datatype type = opts.type;

    /* ==== the idea: labelled blocks, one int each ==== */
    dt_printf0("All-to-all on %d rank%s: rank r's block j goes to rank j, which stores it as its\n"
               "block r.\n\n", n, n == 1 ? "" : "s");
    if (n > 1 && n <= SHOW) {
        int *labels = dt_malloc(sizeof(int) * n, DT_CPU);
        int *sbuf = dt_malloc(sizeof(int) * n, dt_device());
        int *rbuf = dt_malloc(sizeof(int) * n, dt_device());
        for (int j = 0; j < n; j++)
            labels[j] = 10 * rank + j;               /* "r>j": from rank r for rank j */
        dt_memcpy(sbuf, labels, sizeof(int) * n);
        print_blocks("Before: \"r>j\" is rank r's block for rank j.", sbuf, n);
        dt_alltoall(sbuf, 1, MPI_INT, rbuf, 1, MPI_INT, MPI_COMM_WORLD);
        print_blocks("After dt_alltoall: rank r holds \"j>r\" from every rank j: the "
                     "transpose.", rbuf, n);
        dt_free(labels);
        dt_free(sbuf);
        dt_free(rbuf);
        /* the schedule (lib/schedule.h): one partner to send to, one to hear from */
        dt_printf0("How: each rank keeps its own block r>r, then at step s sends its block for\n"
                   "rank r+s and receives the block of rank r-s (mod N):\n");
        for (int s = 1; s < n; s++) {
            dt_printf0("  step %d:", s);
            for (int r = 0; r < n; r++)
                dt_printf0("   %d>%d", r, dt_a2a_send_peer(r, n, s));
            dt_printf0("\n");
        }
        dt_printf0("\n");
    }

    /* ==== the library call on test data, and the check ==== */
    size_t blk = (size_t)count * dt_type_size(type);     /* one block, in bytes */
    void *in_h = dt_malloc(n * blk, DT_CPU), *want = dt_malloc(n * blk, DT_CPU);
    dt_fill_test_data(in_h, n * count, type, MPI_SUM, 10, rank);
    void *in = dt_malloc(n * blk, dt_device()), *out = dt_malloc(n * blk, dt_device());
    dt_memcpy(in, in_h, n * blk);
    dt_bytes_reset();
    dt_alltoall(in, count, type, out, count, type, MPI_COMM_WORLD);
    unsigned long long sent = dt_bytes_sent(), most, least;
    MPI_Alltoall(in_h, count, type, want, count, type, MPI_COMM_WORLD);
    int ok = dt_check_close(out, want, n * count, type, 0, "alltoall", MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    MPI_Allreduce(&sent, &most, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&sent, &least, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    char b[32], f[32];
    dt_printf0("Blocks of S = %d %s value%s x %zu B = %s: each rank sent %s%s,\n"
               "(N-1)*S = %d x %s, every block but its own. No algorithm can send less:\n"
               "each of those blocks is needed somewhere else, and only this rank has it.\n",
               count, dt_type_name(type), count == 1 ? "" : "s", dt_type_size(type),
               dt_format_bytes((double)blk, b, sizeof b),
               dt_format_bytes((double)most, f, sizeof f), most == least ? "" : " at most",
               n - 1, b);
    int bytes_ok = most == least && most == (unsigned long long)(n - 1) * blk;
    dt_printf0("check: %s\n", !ok ? "FAILED: differs from MPI_Alltoall"
                                 : !bytes_ok ? "FAILED: a rank sent other than (N-1)*S"
                                 : "matches MPI_Alltoall; every rank sent (N-1)*S");
    dt_printf0("The code: lib/collectives/alltoall.c (dt_alltoall), lib/schedule.h "
               "(dt_a2a_send_peer)\n");
    ok &= bytes_ok;

    /* ==== teardown ==== */
    dt_free(in);
    dt_free(out);
    dt_free(in_h);
    dt_free(want);
    dt_finalize();
    return ok ? 0 : 1;
}
