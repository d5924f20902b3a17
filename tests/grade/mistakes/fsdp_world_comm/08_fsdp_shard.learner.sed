# The unshard and the gradient take the number of ranks from MPI_COMM_WORLD, not comm:
# right on MPI_COMM_WORLD, wrong on any smaller communicator.
/^void ex_unshard\|^void ex_reduce_scatter_grad/,/^}/s/MPI_Comm_size(comm, &N)/MPI_Comm_size(MPI_COMM_WORLD, \&N)/
