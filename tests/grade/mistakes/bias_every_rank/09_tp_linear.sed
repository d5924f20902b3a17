# The row parallel forward adds the bias on every rank BEFORE the allreduce, so the sum
# holds T times b. (Applied to dtlab's answer, tests/grade/ref/09_tp_linear.c.)
/y = sum over t of x_t W_t^T, then the bias, once/d
/dt_allreduce(MPI_IN_PLACE, y, B \* out/{
h
d
}
/y\[(size_t)r \* out + o\] += b\[o\];/{
p
g
}
