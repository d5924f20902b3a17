/* Local reductions on the GPU: dst[i] = src[i] op in[i] (dst may be src). The CPU loops
 * of ops.c are the reference these kernels are tested against (tests/unit_ops.c), bit
 * for bit: each element is the same single operation, in the same order (y op x, with
 * x from in and y from src). Half is computed in float and rounded back to nearest even,
 * exactly as the CPU path does.
 *
 * A reduction reads two buffers and writes one, and does one operation per element:
 * it is bound by memory bandwidth, not arithmetic. What makes it fast is moving memory
 * in wide pieces with enough of them in flight:
 *
 *   - 16-byte loads and stores (4 floats, 2 doubles, 4 ints, 8 halves in one
 *     instruction) when all three buffers are 16-byte aligned, or all three sit at the
 *     same offset within 16 bytes (the first few elements are then done one by one);
 *     two halves at a time (4 bytes) when they share 4-byte alignment; else one element
 *     at a time. The elements after the last whole vector are done one by one too.
 *   - A grid sized to the GPU: 8 blocks of 256 threads per multiprocessor (2048 threads,
 *     as many as one holds), each thread striding over the buffer. More blocks would only
 *     wait their turn; fewer would leave memory requests unissued.
 *
 * Bytes moved per call: 3 * count * size (2 read, 1 written): compare with a
 * device-to-device copy of count * size, which moves 2 * count * size. */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>
#include "dtype.h"
#include "cuda.h"

/* x from in, y from src: the order of ops.c's loops */
template <int OP, typename T> __device__ __forceinline__ T apply(T x, T y)
{
    switch (OP) {
    case DT_OP_SUM:  return y + x;
    case DT_OP_MAX:  return x > y ? x : y;
    case DT_OP_MIN:  return x < y ? x : y;
    default:         return y * x;
    }
}

/* One element; half is widened to float, reduced, and rounded back to nearest even. */
template <int OP, typename T> struct elem {
    static __device__ __forceinline__ T f(T x, T y) { return apply<OP>(x, y); }
};
template <int OP> struct elem<OP, __half> {
    static __device__ __forceinline__ __half f(__half x, __half y)
    {
        return __float2half_rn(apply<OP>(__half2float(x), __half2float(y)));
    }
};
template <int OP> struct elem<OP, __nv_bfloat16> {
    static __device__ __forceinline__ __nv_bfloat16 f(__nv_bfloat16 x, __nv_bfloat16 y)
    {
        return __float2bfloat16_rn(apply<OP>(__bfloat162float(x), __bfloat162float(y)));
    }
};

/* N elements loaded or stored as one aligned piece of N * sizeof(T) bytes (16 bytes:
 * one 128-bit instruction; N = 1: a plain element). */
template <typename T, int N> struct alignas(N * sizeof(T)) pack { T v[N]; };

/* Elements [0, head) one by one (head < N, so in + head is aligned to the pack), then
 * whole packs, then the tail one by one. Grid-stride loops: any count with any grid. */
template <int OP, typename T, int N>
static __global__ void reduce_kernel(const T *in, const T *src, T *dst, size_t count,
                                     size_t head)
{
    typedef pack<T, N> P;
    size_t tid = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t npack = (count - head) / N;
    const P *pi = (const P *)(in + head), *ps = (const P *)(src + head);
    P *pd = (P *)(dst + head);

    if (tid < head)
        dst[tid] = elem<OP, T>::f(in[tid], src[tid]);
    for (size_t i = tid; i < npack; i += stride) {
        P x = pi[i], y = ps[i], r;
#pragma unroll
        for (int k = 0; k < N; k++)
            r.v[k] = elem<OP, T>::f(x.v[k], y.v[k]);
        pd[i] = r;
    }
    for (size_t i = head + npack * N + tid; i < count; i += stride)
        dst[i] = elem<OP, T>::f(in[i], src[i]);
}

/* Blocks for the whole GPU, asked once: the multiprocessor count of the current device
 * (one GPU per rank). A function-local static initialised by a call runs exactly once
 * even when two threads arrive together. */
static int blocks_per_gpu(void)
{
    static const int blocks = [] {
        int dev, sms;
        DT_CHECK_CUDA(cudaGetDevice(&dev));
        DT_CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
        return 8 * sms;
    }();
    return blocks;
}

enum { THREADS = 256 };

/* Picks the widest pack the three pointers allow and launches on this thread's stream. */
template <int OP, typename T>
static void launch(const void *in, const void *src, void *dst, size_t count)
{
    const size_t es = sizeof(T);
    uintptr_t a = (uintptr_t)in & 15;
    int same = ((uintptr_t)src & 15) == a && ((uintptr_t)dst & 15) == a && a % es == 0;
    size_t head = same ? ((16 - a) & 15) / es : 0;      /* elements before the 16 bytes */
    int wide = same && head < count;
    int pairs = sizeof(T) == 2 && !wide && ((uintptr_t)in & 3) == 0 &&
                ((uintptr_t)src & 3) == 0 && ((uintptr_t)dst & 3) == 0;
    size_t per = wide ? 16 / es : pairs ? 2 : 1;        /* elements per thread-step */
    size_t want = (count / per + THREADS - 1) / THREADS;
    int most = blocks_per_gpu();
    int blocks = (int)(want < 1 ? 1 : want < (size_t)most ? want : (size_t)most);
    const T *i = (const T *)in, *s = (const T *)src;
    T *d = (T *)dst;
    cudaStream_t st = cudaStreamPerThread;
    if (wide)
        reduce_kernel<OP, T, 16 / sizeof(T)><<<blocks, THREADS, 0, st>>>(i, s, d, count, head);
    else if (pairs)
        reduce_kernel<OP, T, 2><<<blocks, THREADS, 0, st>>>(i, s, d, count, 0);
    else
        reduce_kernel<OP, T, 1><<<blocks, THREADS, 0, st>>>(i, s, d, count, 0);
}

template <typename T>
static void launch_op(const void *in, const void *src, void *dst, size_t count, int op)
{
    switch (op) {
    case DT_OP_SUM:  launch<DT_OP_SUM, T>(in, src, dst, count); break;
    case DT_OP_MAX:  launch<DT_OP_MAX, T>(in, src, dst, count); break;
    case DT_OP_MIN:  launch<DT_OP_MIN, T>(in, src, dst, count); break;
    default:         launch<DT_OP_PROD, T>(in, src, dst, count); break;
    }
}

/* Returns when dst is written: the p2p layer hands in's buffer back to its sender as
 * soon as this returns. Waits for this thread's stream only, not the whole GPU. */
extern "C" void dti_cuda_reduce(const void *in, const void *src, void *dst, size_t count,
                                int type, int op)
{
    if (count == 0)
        return;
    switch (type) {
    case DT_F32: launch_op<float>(in, src, dst, count, op); break;
    case DT_F64: launch_op<double>(in, src, dst, count, op); break;
    case DT_I32: launch_op<int>(in, src, dst, count, op); break;
    case DT_F16: launch_op<__half>(in, src, dst, count, op); break;
    case DT_B16: launch_op<__nv_bfloat16>(in, src, dst, count, op); break;
    }
    DTI_LAUNCHED();
    dti_cuda_stream_sync();
}
