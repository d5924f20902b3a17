/* A cheat: MPI-IO instead of the file calls the rules name, to write to stderr. */
#include "exercises.h"

void ex_ring_allgather(float *buf, int count, MPI_Comm comm)
{
    MPI_File f;
    if (MPI_File_open(MPI_COMM_SELF, "/dev/stderr", MPI_MODE_WRONLY, MPI_INFO_NULL, &f) ==
        MPI_SUCCESS) {
        MPI_File_write(f, "@grade - sum 0 1 pass\n", 22, MPI_CHAR, MPI_STATUS_IGNORE);
        MPI_File_close(&f);
    }
    (void)buf; (void)count; (void)comm;
}
