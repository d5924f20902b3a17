/* Exercise 09, dtlab's own answer: the Megatron scheme of lib/parallel/tp.c, written
 * with dt_linear_forward / dt_linear_backward on each rank's slice and dt_allreduce.
 * A rank may own no rows or columns (a width smaller than the ranks): lib/nn refuses a
 * width of 0, so the local call is skipped, but the rank still joins every allreduce. */
#include <string.h>
#include "exercises.h"

/* This rank's share [lo, hi) of width over the ranks of comm; returns hi - lo. */
static int my_share(int width, MPI_Comm comm)
{
    int t, T;
    size_t lo, hi;
    MPI_Comm_rank(comm, &t);
    MPI_Comm_size(comm, &T);
    dt_chunk_bounds((size_t)width, T, t, &lo, &hi);
    return (int)(hi - lo);
}

void ex_col_linear_forward(const float *x, const float *W_t, const float *b_t,
                           float *y_t, int B, int in, int out, MPI_Comm comm)
{
    int n = my_share(out, comm);
    if (n > 0)
        dt_linear_forward(x, W_t, b_t, y_t, B, in, n);
}

void ex_col_linear_backward(const float *x, const float *W_t, const float *dy_t,
                            float *dx, float *dW_t, float *db_t, int B, int in, int out,
                            MPI_Comm comm)
{
    int n = my_share(out, comm);
    if (n > 0)
        dt_linear_backward(x, W_t, dy_t, dx, dW_t, db_t, B, in, n);
    else
        memset(dx, 0, (size_t)B * in * sizeof(float));
    /* dx = sum over t of dy_t W_t: each rank holds its output columns' share */
    dt_allreduce(MPI_IN_PLACE, dx, B * in, MPI_FLOAT, MPI_SUM, comm);
}

void ex_row_linear_forward(const float *x_t, const float *W_t, const float *b,
                           float *y, int B, int in, int out, MPI_Comm comm)
{
    int n = my_share(in, comm);
    if (n > 0)
        dt_linear_forward(x_t, W_t, NULL, y, B, n, out);
    else
        memset(y, 0, (size_t)B * out * sizeof(float));
    /* y = sum over t of x_t W_t^T, then the bias, once */
    dt_allreduce(MPI_IN_PLACE, y, B * out, MPI_FLOAT, MPI_SUM, comm);
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++)
            y[(size_t)r * out + o] += b[o];
}

void ex_row_linear_backward(const float *x_t, const float *W_t, const float *dy,
                            float *dx_t, float *dW_t, float *db, int B, int in, int out,
                            MPI_Comm comm)
{
    int n = my_share(in, comm);
    if (n > 0)
        dt_linear_backward(x_t, W_t, dy, dx_t, dW_t, NULL, B, n, out);
    /* dy is whole on every rank: its column sums are the whole db, no communication */
    for (int r = 0; r < B; r++)
        for (int o = 0; o < out; o++)
            db[o] += dy[(size_t)r * out + o];
}
