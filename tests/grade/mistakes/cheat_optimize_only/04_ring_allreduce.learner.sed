# A cheat: dtlab's ring allreduce only where the grader's optimized build compiles it
# (#ifdef __OPTIMIZE__), the learner's halves elsewhere. The rules are read from the
# object that runs, so they see the call.
/^void ex_ring_allreduce/,/^}/{
/ex_ring_reduce_scatter(buf, count, comm);/i\
#ifdef __OPTIMIZE__\
    dt_allreduce_ring(MPI_IN_PLACE, buf, count, MPI_FLOAT, MPI_SUM, comm);\
#else
/ex_ring_allgather(buf, count, comm);/a\
#endif
}
