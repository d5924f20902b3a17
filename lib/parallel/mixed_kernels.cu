/* Mixed precision's helpers on the GPU (see mixed.c): the same element-wise loops as
 * mixed.c's, one thread per element in a grid-stride loop, so that an fp16 step keeps
 * its weights, gradients and master weights on the device instead of copying each
 * buffer to the host and back.
 *
 * The same bits as the host's: a float becomes a half with __float2half_rn (IEEE round
 * to nearest even, subnormals kept, 65520 and beyond to inf), as lib/half.c rounds, and
 * each element is the same single operation in float (a product, or one sum) as the
 * host loop's, which no compiler can fuse into another rounding. Only a NaN's payload
 * may differ (CUDA makes every NaN the same one): it stays a NaN, which is all the
 * overflow check asks. tests/unit_gpu_mixed.c holds each kernel to its loop.
 *
 * Each launcher queues its kernel on the calling thread's stream and returns (finished,
 * below); the overflow check then reads the one number the host needs, which waits for
 * the work queued before it. */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>
#include "cuda.h"
#include "mixed_cuda.h"

#define THREADS 256

/* After a launch: valid (else CUDA's words), counted, and queued, as every launcher of
 * lib/nn (device.cu's "Queued work"): the thread's later copies and kernels, the
 * collectives' included, run after it; a thread that hands the buffer to another one
 * (DDP's and fsdp's communication threads, on streams of their own) settles first. */
static void finished(void)
{
    DTI_LAUNCHED();
}

/* Blocks for a grid-stride loop over n items: at most 4096, at least 1 */
static int grid_for(size_t n)
{
    size_t want = (n + THREADS - 1) / THREADS;
    return (int)(want < 1 ? 1 : want < 4096 ? want : 4096);
}

#define FOR_EACH(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)

static __global__ void round_half_kernel(float *x, size_t n)
{
    FOR_EACH(i, n)
        x[i] = __half2float(__float2half_rn(x[i]));
}

static __global__ void to_float_kernel(const void *src, int half, float *dst, size_t n,
                                       float mul)
{
    FOR_EACH(i, n) {
        float v = half ? __half2float(((const __half *)src)[i]) : ((const float *)src)[i];
        dst[i] = __fmul_rn(v, mul);
    }
}

static __global__ void from_float_kernel(const float *src, void *dst, int half, size_t n)
{
    FOR_EACH(i, n) {
        if (half)
            ((__half *)dst)[i] = __float2half_rn(src[i]);
        else
            ((float *)dst)[i] = src[i];
    }
}

static __global__ void accumulate_kernel(void *dst, int half, const float *src, size_t n)
{
    FOR_EACH(i, n) {
        if (half) {
            __half *h = (__half *)dst;
            h[i] = __float2half_rn(__fadd_rn(__half2float(h[i]), src[i]));
        } else {
            float *f = (float *)dst;
            f[i] = __fadd_rn(f[i], src[i]);
        }
    }
}

/* *bad = 1 when some element is inf or NaN (half: the exponent bits all ones) */
static __global__ void nonfinite_kernel(const void *x, int half, size_t n, int *bad)
{
    FOR_EACH(i, n) {
        int b = half ? (((const unsigned short *)x)[i] & 0x7c00) == 0x7c00
                     : !isfinite(((const float *)x)[i]);
        if (b)
            *bad = 1;                    /* any thread that finds one: the same value */
    }
}

extern "C" void dti_mixed_cuda_round_half(float *x, size_t n)
{
    if (n == 0)
        return;
    round_half_kernel<<<grid_for(n), THREADS, 0, cudaStreamPerThread>>>(x, n);
    finished();
}

extern "C" void dti_mixed_cuda_to_float(const void *src, int half, float *dst, size_t n,
                                        float mul)
{
    if (n == 0)
        return;
    to_float_kernel<<<grid_for(n), THREADS, 0, cudaStreamPerThread>>>(src, half, dst, n,
                                                                       mul);
    finished();
}

extern "C" void dti_mixed_cuda_from_float(const float *src, void *dst, int half, size_t n)
{
    if (n == 0)
        return;
    from_float_kernel<<<grid_for(n), THREADS, 0, cudaStreamPerThread>>>(src, dst, half, n);
    finished();
}

extern "C" void dti_mixed_cuda_accumulate(void *dst, int half, const float *src, size_t n)
{
    if (n == 0)
        return;
    accumulate_kernel<<<grid_for(n), THREADS, 0, cudaStreamPerThread>>>(dst, half, src, n);
    finished();
}

/* The flag lives on the device for the thread's life (allocated on its first check, never
 * per call: a cudaFree would wait for the whole GPU). */
extern "C" int dti_mixed_cuda_nonfinite(const void *x, int half, size_t n)
{
    static thread_local int *flag;
    if (n == 0)
        return 0;
    if (!flag)
        flag = (int *)dti_cuda_malloc(sizeof(int));
    DT_CHECK_CUDA(cudaMemsetAsync(flag, 0, sizeof(int), cudaStreamPerThread));
    dti_book(DTI_BOOK_LAUNCH, 1);
    nonfinite_kernel<<<grid_for(n), THREADS, 0, cudaStreamPerThread>>>(x, half, n, flag);
    DTI_LAUNCHED();
    int bad = 0;
    dti_cuda_read_number(&bad, flag, sizeof bad);
    return bad;
}
