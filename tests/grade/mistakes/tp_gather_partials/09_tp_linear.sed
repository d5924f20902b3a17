# The row-parallel forward gathers every rank's whole partial output (an allgather of
# T x B x out floats) and sums them locally: the same y, but from 3 ranks on more bytes
# than the one allreduce the algorithm needs (each rank sends T-1 partials, not 2(T-1)/T).
/^    dt_allreduce(MPI_IN_PLACE, y, B \* out, MPI_FLOAT, MPI_SUM, comm);/c\
    int T;\
    MPI_Comm_size(comm, &T);\
    size_t ny = (size_t)B * out;\
    float *all = malloc((size_t)T * ny * sizeof *all + 1);\
    dt_allgather(y, (int)ny, MPI_FLOAT, all, (int)ny, MPI_FLOAT, comm);\
    for (size_t i = 0; i < ny; i++) {\
        float sum = 0;\
        for (int t = 0; t < T; t++)\
            sum += all[(size_t)t * ny + i];\
        y[i] = sum;\
    }\
    free(all);
