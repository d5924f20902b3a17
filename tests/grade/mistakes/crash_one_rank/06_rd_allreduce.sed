# A debugging line left behind writes through a pointer that was never set (NULL), on
# the ranks that take in a partner's data in the fold: rank 1 at 3 and 5 ranks. That
# rank dies of signal 11 while the others wait for it; the grader must name the rank
# and the signal at once, not wait for its time limit. (volatile: the store is real.)
/^void ex_rd_allreduce/i\
static float *volatile last_fold;      /* meant to point at the fold's data: NULL */\

/dt_allreduce_rd(MPI_IN_PLACE/i\
    int rank, n;\
    MPI_Comm_rank(comm, &rank);\
    MPI_Comm_size(comm, &n);\
    if (count > 0 && dt_rd_fold_peer(rank, n) >= 0 && dt_rd_vrank(rank, n) >= 0)\
        last_fold[0] = buf[0];\

