/* Buffers on the host or on a GPU, and the datatypes and ops dtlab understands.
 *
 * Datatypes: MPI_FLOAT, MPI_DOUBLE, MPI_INT, DT_HALF (IEEE fp16, which MPI lacks;
 * dt_init creates it as two contiguous bytes) and DT_BFLOAT16 (bfloat16, made the same
 * way). Ops: MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD.
 * Counts are elements; sizes in bytes are called nbytes. */
#ifndef DT_BUF_H
#define DT_BUF_H

#include <mpi.h>
#include <stddef.h>
#include "core.h"
#include "dtype.h"

extern MPI_Datatype dt_half_type;     /* valid between dt_init and dt_finalize */
#define DT_HALF dt_half_type
extern MPI_Datatype dt_bf16_type;     /* the same */
#define DT_BFLOAT16 dt_bf16_type


/* Maps an MPI datatype or op onto dtlab's enum; anything else aborts with a message. */
dt_dtype dt_dtype_of(MPI_Datatype type);
dt_op dt_op_of(MPI_Op op);
size_t dt_type_size(MPI_Datatype type);     /* bytes per element */
const char *dt_type_name(MPI_Datatype type);  /* "float", "double", "int", "half", "bf16" */
const char *dt_op_name(MPI_Op op);            /* "sum", "max", "min", "prod" */
MPI_Datatype dt_type_from_name(const char *name);  /* MPI_DATATYPE_NULL if unknown */
MPI_Op dt_op_from_name(const char *name);          /* MPI_OP_NULL if unknown */

/* An MPI_Op that MPI's own collectives can apply to DT_HALF (made by dt_init, ops.c), so
 * MPI_Allreduce(..., DT_HALF, dt_half_mpi_op(MPI_SUM), ...) works as a reference; and
 * the same for DT_BFLOAT16. */
MPI_Op dt_half_mpi_op(MPI_Op op);
MPI_Op dt_bf16_mpi_op(MPI_Op op);

/* Allocates nbytes on the host (DT_CPU) or on this rank's GPU (DT_CUDA). Aborts when out
 * of memory; nbytes 0 returns a valid pointer. Release with dt_free. */
void *dt_malloc(size_t nbytes, dt_device_kind where);
void dt_free(void *p);

/* Allocates nbytes where p lives: on the GPU when p is a device pointer. */
void *dt_malloc_like(const void *p, size_t nbytes);

/* Copies nbytes between any two buffers, host or device, in either direction.
 * The buffers must not overlap. */
void dt_memcpy(void *dst, const void *src, size_t nbytes);

/* Sets nbytes to zero, host or device. */
void dt_memzero(void *p, size_t nbytes);

/* 1 when p points into GPU memory, 0 for host memory (always 0 without CUDA). */
int dt_is_device_ptr(const void *p);

/* Two copies that dt_memcpy would make too, counted apart in the device books (below):
 * the batch on its way to the GPU (the input every step must bring), and a number the
 * host needs from the GPU (the loss to print, an overflow flag, a count that sizes a
 * message). Everything else that crosses between host and GPU is tensor data. */
void dt_memcpy_input(void *dst, const void *src, size_t nbytes);
void dt_memcpy_number(void *dst, const void *src, size_t nbytes);

/* The device books: what this process asked of its GPU since it started, every thread
 * counted. A training step that stays on the GPU adds launches and no tensor copies;
 * `train` prints the books of its steps, and the GPU check fails a run whose steps
 * launched nothing or moved tensors through the host. */
typedef struct {
    unsigned long long launches;      /* kernels and cuBLAS products queued */
    unsigned long long waits;         /* the host waited for the GPU (a stream's work) */
    unsigned long long allocs;        /* cudaMalloc or cudaFree: each waits for the GPU */
    unsigned long long tensors, tensor_bytes;   /* dt_memcpy, host <-> GPU */
    unsigned long long inputs, input_bytes;     /* dt_memcpy_input onto the GPU */
    unsigned long long numbers, number_bytes;   /* dt_memcpy_number off the GPU */
} dt_device_books;
void dt_device_books_get(dt_device_books *b);

#endif /* DT_BUF_H */
