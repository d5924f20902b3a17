/* Lesson 07: reduce-scatter on a ring.
 *
 * What it teaches: every rank has a whole buffer of N blocks; rank r wants block r
 * reduced (summed, say) over all ranks, and nothing else. ZeRO and FSDP do this with
 * gradients: each rank keeps and updates only its shard. On a ring, each block's partial
 * result travels around N-1 ranks, each combining its own share into it (adding it, for
 * a sum), and arrives complete at its owner. Every rank sends N-1 blocks: (N-1)/N of
 * the buffer, far less than reducing the whole buffer everywhere.
 *
 * The code: lib/collectives/reduce_scatter.c (dti_ring_reduce_scatter, the ring, which
 * dt_reduce_scatter_block calls and lesson 08's allreduce reuses), lib/schedule.c
 * (dt_ring_rs_send_chunk, dt_ring_rs_recv_chunk: which block moves at which step).
 *
 * Run:  mpiexec -n 4 build/lessons/07_reduce_scatter
 *       mpiexec -n 5 build/lessons/07_reduce_scatter --count 1000 --op max --type int
 */
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 07_reduce_scatter [options]\n"
    "Reduces N blocks over all ranks and leaves block r on rank r, with\n"
    "dt_reduce_scatter_block.\n"
    "  --count C           elements in each result block, 0 to 2^28/N (default 2);\n"
    "                      each rank's input is N blocks of that size\n"
    "  --type T            float|double|int|half (default float)\n"
    "  --op OP             sum|max|min|prod (default sum)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { SHOW = 8, SHOWV = 4 };     /* paths for up to SHOW ranks, SHOWV values per block */

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank();
    dt_opts opts = {.count = 2, .count_max = (1 << 28) / n, .type = MPI_FLOAT, .op = MPI_SUM};
    dt_parse_options(argc, argv, "cto", usage, &opts);
    int count = opts.count;
    MPI_Datatype type = opts.type;
    MPI_Op op = opts.op;

    size_t blk = (size_t)count * dt_type_size(type);   /* one result block, in bytes */
    void *in_h = dt_malloc(n * blk, DT_CPU), *want = dt_malloc(blk, DT_CPU);
    void *got_h = dt_malloc(blk, DT_CPU);
    dt_fill_test_data(in_h, n * count, type, op, 7, rank);
    void *in = dt_malloc(n * blk, dt_device()), *out = dt_malloc(blk, dt_device());
    dt_memcpy(in, in_h, n * blk);

    /* ==== the idea ====
     * At step s rank r sends the partial result of block (r-s-1) mod N to its right
     * neighbour, and combines its own share into block (r-s-2) mod N, arriving from
     * its left (dt_ring_rs_send_chunk, dt_ring_rs_recv_chunk in lib/schedule.c). Follow
     * one block: it starts at rank c+1, collects one share per step, ends at rank c. */
    dt_printf0("Reduce-scatter (%s): each of %d rank%s has %d block%s of %d %s value%s;\n"
               "rank r ends with block r reduced over all ranks.\n", dt_op_name(op), n,
               n == 1 ? "" : "s", n, n == 1 ? "" : "s", count, dt_type_name(type),
               count == 1 ? "" : "s");
    if (n > 1 && n <= SHOW) {
        dt_printf0("\nThe road each block takes round the ring; each rank on it combines its\n"
                   "share into the partial result (%s) and passes it on:\n", dt_op_name(op));
        for (int c = 0; c < n; c++) {
            dt_printf0("  block %d: ranks", c);
            for (int s = 0; s < n - 1; s++)
                for (int r = 0; r < n; r++)
                    if (dt_ring_rs_send_chunk(r, n, s) == c)
                        dt_printf0(" %d ->", r);
            dt_printf0(" %d, which keeps it\n", c);
        }
        dt_printf0("All blocks travel at once: each step, each rank sends one and gets one.\n");
    }

    /* ==== the library call ==== */
    dt_bytes_reset();
    dt_reduce_scatter_block(in, out, count, type, op, MPI_COMM_WORLD);
    unsigned long long sent = dt_bytes_sent();

    /* ==== the check: MPI's own, on the host copies (fp16 needs dtlab's MPI op) ==== */
    MPI_Op mpi_op = type == DT_HALF ? dt_half_mpi_op(op) : op;
    MPI_Reduce_scatter_block(in_h, want, count, type, mpi_op, MPI_COMM_WORLD);
    int ok = dt_check_close(out, want, count, type, 0, "reduce_scatter", MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    char vals[128] = "", b[32], f[32];
    dt_memcpy(got_h, out, blk);
    for (int i = 0, k = 0; i < count && i < SHOWV; i++)
        k += snprintf(vals + k, sizeof vals - k, " %7g", dt_elem(got_h, i, type));
    dt_printf0("\nEach block is S = %d %s value%s x %zu B = %s. The result, and what each\n"
               "rank sent (one block per step):\n", count, dt_type_name(type),
               count == 1 ? "" : "s", dt_type_size(type),
               dt_format_bytes((double)blk, b, sizeof b));
    dt_printf_ordered("  rank %d: block %d =%s%s   sent %s = (N-1)*S\n", rank, rank, vals,
                      count > SHOWV ? " ..." : "", dt_format_bytes((double)sent, f, sizeof f));
    int bytes_ok = sent == (size_t)(n - 1) * blk;
    MPI_Allreduce(MPI_IN_PLACE, &bytes_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    dt_printf0("Each rank sent N-1 = %d block%s: (N-1)/N of its N*S = %s buffer.\n",
               n - 1, n == 2 ? "" : "s", dt_format_bytes((double)n * blk, b, sizeof b));
    dt_printf0("Reducing the whole buffer onto every rank would need twice that, 2(N-1)*S =\n"
               "%s (lesson 08: reduce-scatter, then allgather). Blocks here are equal;\n"
               "lesson 08 cuts counts that do not divide.\n",
               dt_format_bytes(2.0 * (n - 1) * blk, b, sizeof b));
    dt_printf0("check: %s\n", !ok ? "FAILED: differs from MPI_Reduce_scatter_block"
                                 : !bytes_ok ? "FAILED: a rank sent other than (N-1)*S"
                                 : "matches MPI_Reduce_scatter_block; every rank sent (N-1)*S");
    dt_printf0("The code: lib/collectives/reduce_scatter.c (dt_reduce_scatter_block, "
               "dti_ring_reduce_scatter)\n");
    ok &= bytes_ok;

    /* ==== teardown ==== */
    dt_free(in);
    dt_free(out);
    dt_free(in_h);
    dt_free(want);
    dt_free(got_h);
    dt_finalize();
    return ok ? 0 : 1;
}
