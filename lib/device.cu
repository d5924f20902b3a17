/* The CUDA runtime calls of lib/, behind the C interface of cuda.h. Every call is
 * checked; a missing driver or GPU is not an error here but a count of 0. */
#include <cuda_runtime.h>
#include <stdio.h>
#include "cuda.h"

extern "C" int dti_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError();          /* clear the sticky "no driver" / "no device" error */
        return 0;
    }
    return n;
}

extern "C" void dti_cuda_set_device(int dev)
{
    DT_CHECK_CUDA(cudaSetDevice(dev));
}

extern "C" void dti_cuda_device_name(int dev, char *buf, size_t len)
{
    cudaDeviceProp prop;
    DT_CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
    snprintf(buf, len, "%s", prop.name);
}

extern "C" void *dti_cuda_malloc(size_t nbytes)
{
    void *p = NULL;
    DT_CHECK_CUDA(cudaMalloc(&p, nbytes));
    return p;
}

extern "C" void dti_cuda_free(void *p)
{
    DT_CHECK_CUDA(cudaFree(p));
}

extern "C" void *dti_cuda_host_alloc(size_t nbytes)
{
    void *p = NULL;
    DT_CHECK_CUDA(cudaMallocHost(&p, nbytes ? nbytes : 1));
    return p;
}

extern "C" void dti_cuda_host_free(void *p)
{
    DT_CHECK_CUDA(cudaFreeHost(p));
}

extern "C" int dti_cuda_is_device_ptr(const void *p)
{
    cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged;
}

extern "C" void dti_cuda_memcpy(void *dst, const void *src, size_t nbytes)
{
    DT_CHECK_CUDA(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault));
}

extern "C" void dti_cuda_memzero(void *p, size_t nbytes)
{
    DT_CHECK_CUDA(cudaMemset(p, 0, nbytes));
}
