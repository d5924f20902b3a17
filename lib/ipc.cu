/* CUDA IPC for the device mailboxes (mailbox.c): one process exports a handle to its
 * device memory, another process on the same GPU opens it and gets a pointer it can copy
 * to and from, device to device, as NCCL's P2P transport does. Failures are returned,
 * not fatal: mailbox.c then keeps those ranks on another transport. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include "cuda.h"
#include "ipc.h"

static int failed(cudaError_t e, char *why, size_t n)
{
    if (e == cudaSuccess)
        return 0;
    if (n)
        snprintf(why, n, "%s", cudaGetErrorString(e));
    cudaGetLastError();                 /* not sticky: the rank goes on without IPC */
    return -1;
}

extern "C" int dti_ipc_export(void *dev, unsigned char handle[DTI_IPC_HANDLE], char *why,
                              size_t n)
{
    cudaIpcMemHandle_t h;
    static_assert(sizeof h <= DTI_IPC_HANDLE, "IPC handle larger than expected");
    if (failed(cudaIpcGetMemHandle(&h, dev), why, n))
        return -1;
    memset(handle, 0, DTI_IPC_HANDLE);
    memcpy(handle, &h, sizeof h);
    return 0;
}

extern "C" int dti_ipc_open(const unsigned char handle[DTI_IPC_HANDLE], void **dev,
                            char *why, size_t n)
{
    cudaIpcMemHandle_t h;
    memcpy(&h, handle, sizeof h);
    *dev = NULL;
    return failed(cudaIpcOpenMemHandle(dev, h, cudaIpcMemLazyEnablePeerAccess), why, n);
}

extern "C" void dti_ipc_close(void *dev)
{
    if (dev)
        failed(cudaIpcCloseMemHandle(dev), NULL, 0);
}

extern "C" void dti_ipc_bus_id(char *buf, int n)
{
    int gpu = -1;
    if ((failed(cudaGetDevice(&gpu), NULL, 0) || failed(cudaDeviceGetPCIBusId(buf, n, gpu),
                                                        NULL, 0)) && n > 0)
        buf[0] = '\0';
}

extern "C" int dti_ipc_host_register(void *p, size_t nbytes)
{
    return failed(cudaHostRegister(p, nbytes, cudaHostRegisterDefault), NULL, 0);
}

extern "C" void dti_ipc_host_unregister(void *p)
{
    failed(cudaHostUnregister(p), NULL, 0);
}
