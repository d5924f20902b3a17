/* Exercise 09: tensor-parallel linear layers, as Megatron-LM cuts them. One layer
 * y = x W^T + b, W (out, in), is split over the T ranks of comm. Column parallel: each
 * rank owns some rows of W, so some output columns; the forward needs no message, the
 * backward sums dx over the ranks. Row parallel: each rank owns some columns of W, so
 * some input features; the forward sums the partial outputs over the ranks, the
 * backward needs no message. Put one of each in a row and an MLP block costs one
 * allreduce forward and one backward.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=09 */
#include <string.h>
#include "exercises.h"

/* How many of width's rows or columns this rank owns: its chunk [lo, hi) of
 * dt_chunk_bounds over the ranks of comm. It may be 0 when width < T. */
static int local_width(int width, MPI_Comm comm)
{
    int t, T;
    size_t lo, hi;
    MPI_Comm_rank(comm, &t);
    MPI_Comm_size(comm, &T);
    dt_chunk_bounds((size_t)width, T, t, &lo, &hi);
    return (int)(hi - lo);
}

/* ==== column parallel: W_t is rows [lo, hi) of W, n = hi - lo of them ==== */

void ex_col_linear_forward(const float *x, const float *W_t, const float *b_t,
                           float *y_t, int B, int in, int out, MPI_Comm comm)
{
    int n = local_width(out, comm);     /* this rank's output columns */
    /* TODO(exercise): y_t (B, n) = x W_t^T + b_t. One dt_linear_forward call does it.
     * lib/nn refuses a width of 0: when n == 0 there is nothing to compute. */
    (void)x; (void)W_t; (void)b_t; (void)y_t; (void)B; (void)in; (void)n;
    EX_TODO();
}

void ex_col_linear_backward(const float *x, const float *W_t, const float *dy_t,
                            float *dx, float *dW_t, float *db_t, int B, int in, int out,
                            MPI_Comm comm)
{
    int n = local_width(out, comm);
    /* TODO(exercise): dt_linear_backward on this rank's slice gives dW_t and db_t, and
     * dy_t W_t: only this rank's share of dx. The whole dx (B, in) is the sum of every
     * rank's share: one dt_allreduce, in place (MPI_IN_PLACE). A rank with n == 0
     * still joins the allreduce, with a share of zeros. */
    (void)x; (void)W_t; (void)dy_t; (void)dx; (void)dW_t; (void)db_t; (void)B;
    (void)in; (void)n;
    EX_TODO();
}

/* ==== row parallel: W_t is columns [lo, hi) of W, n = hi - lo of them ==== */

void ex_row_linear_forward(const float *x_t, const float *W_t, const float *b,
                           float *y, int B, int in, int out, MPI_Comm comm)
{
    int n = local_width(in, comm);      /* this rank's input features */
    /* TODO(exercise): x_t W_t^T (B, out) is this rank's partial output: y is the sum of
     * the T partials (dt_allreduce), plus b. Add b once, after the sum, not on every
     * rank before it. A rank with n == 0 sends zeros. */
    (void)x_t; (void)W_t; (void)b; (void)y; (void)B; (void)out; (void)n;
    EX_TODO();
}

void ex_row_linear_backward(const float *x_t, const float *W_t, const float *dy,
                            float *dx_t, float *dW_t, float *db, int B, int in, int out,
                            MPI_Comm comm)
{
    int n = local_width(in, comm);
    /* TODO(exercise): dy is whole on every rank, so dx_t = dy W_t and dW_t += dy^T x_t
     * are complete as they are (dt_linear_backward), and db += the column sums of dy
     * too: no communication. Mind n == 0: db is still due. */
    (void)x_t; (void)W_t; (void)dy; (void)dx_t; (void)dW_t; (void)db; (void)B;
    (void)out; (void)n;
    EX_TODO();
}
