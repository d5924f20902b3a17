/* An example of an instructor's hidden tests for exercise 04 (make grade EXTRA_TESTS=DIR
 * picks up DIR/NN_*.c; this file's NN is 04). A hidden suite is written like the
 * repository's own (tests/grade/NN_topic.c): a table of cases with their points, run
 * by gr_main, every rank ending each test with HT_VERDICT().
 *
 * What it checks: the allreduce works on the communicator it is given, not only on
 * MPI_COMM_WORLD. The ranks are split into evens and odds, each half sums on its own,
 * with its own counts; a learner who wrote MPI_COMM_WORLD somewhere loses these points.
 *
 *   make grade EX=04 EXTRA_TESTS=tests/grade/hidden_example
 */
#include <stdlib.h>
#include "grade.h"

START_TEST(halves)
{
    MPI_Comm half;
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, ht_rank % 2, ht_rank, &half));
    int n;
    MPI_Comm_size(half, &n);
    for (int i = 0; i < GR_NCOUNTS; i++) {
        int count = gr_count(i, n) + ht_rank % 2;     /* the halves differ in length */
        float *buf = malloc(((size_t)count + 1) * sizeof(float));
        float *want = malloc(((size_t)count + 1) * sizeof(float));
        dt_fill_test_data(buf, count, MPI_FLOAT, MPI_SUM, 40 + i, ht_rank);
        HT_MPI(MPI_Iallreduce(buf, want, count, MPI_FLOAT, MPI_SUM, half, &ht_req));
        ex_ring_allreduce(buf, count, half);
        for (int k = 0; k < count; k++)
            if (buf[k] != want[k]) {
                ht_fail("on a communicator of the %s ranks (%d of them), count %d: "
                        "element %d is %g, expected %g. Use the comm argument, never "
                        "MPI_COMM_WORLD", ht_rank % 2 ? "odd" : "even", n, count, k,
                        buf[k], want[k]);
                break;
            }
        free(buf);
        free(want);
    }
    MPI_Comm_free(&half);
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "halves", 2, GR_MPI, halves, 1,
          "sums on the even and the odd ranks apart (a sub-communicator)" },
    };
    return gr_main(argc, argv, "04_ring_allreduce", cases,
                   sizeof cases / sizeof cases[0]);
}
