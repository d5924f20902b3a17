# ex_ring_allreduce calls dtlab's ring allreduce instead of the learner's two halves:
# the rules forbid it.
/^void ex_ring_allreduce/,/^}/{
/ex_ring_reduce_scatter(buf, count, comm);/c\
    /* dtlab's ring allreduce is exactly this */\
    dt_allreduce_ring(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, comm);
/ex_ring_allgather(buf, count, comm);/d
}
