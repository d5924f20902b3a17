/* Local reductions: the arithmetic that reduce, reduce-scatter and allreduce apply to
 * the chunks they receive. They run where the data lives: plain CPU loops for host
 * memory, CUDA kernels for device memory. */
#ifndef DT_OPS_H
#define DT_OPS_H

#include <mpi.h>
#include "buf.h"

/* inout[i] = inout[i] op in[i] for i < count, like MPI_Reduce_local (same argument order).
 * Both buffers on the host, or both on the GPU. DT_HALF is computed in float and rounded
 * back (round to nearest even). Records a trace event. */
void dt_reduce_local(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op);

/* dst[i] = src[i] op in[i]: the same, writing the result to a third buffer (which may be
 * src itself). The ring's reduce-scatter uses it to combine what arrives with the caller's
 * sendbuf straight into recvbuf, saving a copy of the whole input. All three buffers on
 * the host, or all on the GPU. */
void dti_reduce_into(const void *in, const void *src, void *dst, int count,
                     MPI_Datatype type, MPI_Op op);

/* The CPU loops alone, on host memory: the reference the CUDA kernels are tested
 * against. Same contract as dt_reduce_local, with dtlab's enums. */
void dt_reduce_cpu(const void *in, void *inout, size_t count, dt_dtype type, dt_op op);

#endif /* DT_OPS_H */
