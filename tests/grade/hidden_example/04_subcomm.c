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

/* Sums on comm, count gr_count(i) plus one on the odd ranks (the halves differ in
 * length), against MPI's. */
static void sum_on(MPI_Comm comm, int i)
{
    int n, rank;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &rank);
    int count = gr_count(i, n) + ht_rank % 2;
    float *buf = gr_floats(count), *want = gr_floats(count);
    dt_fill_test_data(buf, count, MPI_FLOAT, MPI_SUM, 40 + i, rank);
    HT_MPI(MPI_Iallreduce(buf, want, count, MPI_FLOAT, MPI_SUM, comm, &ht_req));
    ex_ring_allreduce(buf, count, comm);
    for (int k = 0; k < count; k++)
        if (buf[k] != want[k]) {
            ht_fail("count %d%s: element %d is %g, expected %g", count, gr_on(comm), k,
                    buf[k], want[k]);
            break;
        }
    free(buf);
    free(want);
}

static void sum_on_world(void *ctx) { sum_on(MPI_COMM_WORLD, *(int *)ctx); }

/* gr_split: the even and the odd ranks, each half numbered backwards. A count that
 * fails there runs again on MPI_COMM_WORLD (gr_sub_comm_ok), so that the message says
 * whether the communicator is to blame. */
START_TEST(halves)
{
    MPI_Comm half = gr_split();
    for (int i = 0; i < GR_NCOUNTS; i++) {
        sum_on(half, i);
        if (!gr_sub_comm_ok(sum_on_world, &i))
            break;
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
