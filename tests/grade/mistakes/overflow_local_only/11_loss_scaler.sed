# Each rank decides on its own overflow alone: no agreement over the ranks, so a rank
# that found an inf skips the step while the others apply it.
/dt_allreduce(MPI_IN_PLACE, &found, 1, MPI_INT, MPI_MAX, comm);/d
s|/\* any rank's overflow skips the step on every rank \*/|(void)comm;|
