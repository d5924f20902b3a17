# ex_ddp_sync divides by the number of ranks of MPI_COMM_WORLD, not of comm: right on
# MPI_COMM_WORLD, a wrong mean on any smaller communicator.
s/MPI_Comm_size(comm, &n)/MPI_Comm_size(MPI_COMM_WORLD, \&n)/
