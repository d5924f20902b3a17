/* dtlab's one abort path.
 *
 * A failed MPI or CUDA call, or a broken precondition, prints the rank, the file, the
 * line and a sentence a learner can act on, then calls MPI_Abort so that no other rank
 * is left waiting for a message that will never come. The checks stay on in every
 * build: they are cheap next to the communication they guard.
 *
 * This header needs neither mpi.h nor cuda_runtime.h; the macros name MPI and CUDA
 * symbols only in their expansions, so .cu files can include it too. */
#ifndef DT_ERRORS_H
#define DT_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Prints "dtlab: rank R: file:line: <message>" to stderr and aborts the whole job.
 * Safe before MPI is initialised (then it exits with status 1). Never returns. */
__attribute__((noreturn, format(printf, 3, 4)))
void dti_die(const char *file, int line, const char *fmt, ...);

/* The message text of an MPI error code, for dti_die. */
const char *dti_mpi_error_string(int err);

#ifdef __cplusplus
}
#endif

#define DT_REQUIRE(cond, ...) \
    do { if (!(cond)) dti_die(__FILE__, __LINE__, __VA_ARGS__); } while (0)

#define DT_CHECK_MPI(call) \
    do { int e_ = (call); \
         if (e_ != 0 /* MPI_SUCCESS */) \
             dti_die(__FILE__, __LINE__, "%s failed: %s", #call, dti_mpi_error_string(e_)); \
    } while (0)

#define DT_CHECK_CUDA(call) \
    do { cudaError_t e_ = (call); \
         if (e_ != cudaSuccess) \
             dti_die(__FILE__, __LINE__, "%s failed: %s", #call, cudaGetErrorString(e_)); \
    } while (0)

#endif /* DT_ERRORS_H */
