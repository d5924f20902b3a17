# The gradient is summed whole with dt_allreduce, and each rank keeps its shard of the
# sum: the right numbers, at N times a reduce-scatter's traffic, and the rules forbid it.
/^void ex_reduce_scatter_grad/,/^}/{
s/    int N;/    int N, rank;/
/MPI_Comm_size(comm, &N)/a\
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
/dt_reduce_scatter_block/c\
    /* sum the whole padded gradient, then keep my shard */\
    dt_allreduce(MPI_IN_PLACE, pad, (int)(N * s), MPI_FLOAT, MPI_SUM, comm);
s|memcpy(gshard, pad, .*|memcpy(gshard, pad + (size_t)rank * s, s * sizeof(float));|
}
