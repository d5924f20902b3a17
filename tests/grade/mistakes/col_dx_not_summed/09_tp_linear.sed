# The column parallel backward leaves dx as this rank's share, dy_t W_t, without the
# allreduce that sums the shares.
/dx = sum over t of dy_t W_t/d
/dt_allreduce(MPI_IN_PLACE, dx, B \* in/d
