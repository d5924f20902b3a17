/* Local reductions on the GPU: dst[i] = src[i] op in[i] (dst may be src). The CPU loops of ops.c
 * are the reference these kernels are tested against. Half is computed in float and
 * rounded back to nearest even, exactly as the CPU path does. */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include "dtype.h"
#include "cuda.h"

template <typename T> __device__ T apply(T x, T y, int op)
{
    switch (op) {
    case DT_OP_SUM:  return y + x;
    case DT_OP_MAX:  return x > y ? x : y;
    case DT_OP_MIN:  return x < y ? x : y;
    default:         return y * x;
    }
}

/* grid-stride loop: any count with a fixed grid */
template <typename T>
static __global__ void reduce_kernel(const T *in, const T *src, T *dst, size_t count, int op)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = apply(in[i], src[i], op);
}

static __global__ void reduce_half_kernel(const __half *in, const __half *src, __half *dst,
                                          size_t count, int op)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = __float2half_rn(apply(__half2float(in[i]), __half2float(src[i]), op));
}

extern "C" void dti_cuda_reduce(const void *in, const void *src, void *dst, size_t count,
                                int type, int op)
{
    int threads = 256;
    size_t want = (count + threads - 1) / threads;
    int blocks = (int)(want < 4096 ? (want ? want : 1) : 4096);
    switch (type) {
    case DT_F32:
        reduce_kernel<<<blocks, threads>>>((const float *)in, (const float *)src, (float *)dst, count, op);
        break;
    case DT_F64:
        reduce_kernel<<<blocks, threads>>>((const double *)in, (const double *)src, (double *)dst, count, op);
        break;
    case DT_I32:
        reduce_kernel<<<blocks, threads>>>((const int *)in, (const int *)src, (int *)dst, count, op);
        break;
    case DT_F16:
        reduce_half_kernel<<<blocks, threads>>>((const __half *)in, (const __half *)src, (__half *)dst, count, op);
        break;
    }
    DT_CHECK_CUDA(cudaGetLastError());
    DT_CHECK_CUDA(cudaDeviceSynchronize());
}
