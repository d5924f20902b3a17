# The rank and the number of ranks come from MPI_COMM_WORLD, not comm: right on
# MPI_COMM_WORLD, wrong on any smaller communicator.
s/MPI_Comm_\(rank\|size\)(comm,/MPI_Comm_\1(MPI_COMM_WORLD,/
