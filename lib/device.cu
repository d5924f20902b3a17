/* The CUDA runtime calls of lib/, behind the C interface of cuda.h. Every call is
 * checked; a missing driver or GPU is not an error here but a count of 0, and CUDA's
 * reason kept for the caller (dti_cuda_why_none).
 *
 * Streams: every copy and kernel of lib/ runs on cudaStreamPerThread, the calling host
 * thread's own stream (the .cu files are also compiled with --default-stream
 * per-thread), and the host waits for that stream alone. So DDP's communication thread
 * copies and reduces while the main thread's kernels run, neither waiting for the
 * other's work, as they would on the legacy default stream or with
 * cudaDeviceSynchronize. The copies return only when their work is done; the launchers
 * of kernels and products queue theirs and return at once (below, "Queued work"). */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cuda.h"

static const char *why_none = "no GPU";

/* ==== Queued work ====
 *
 * A launcher of lib/ (lib/nn's products and kernels, mixed precision's and the codecs'
 * kernels, dt_memzero) queues its work on the calling thread's stream and returns:
 * dti_cuda_queued checks that the launches were valid and notes that the stream holds
 * work the host has not waited for. The GPU runs it in the order it was queued, after
 * everything the thread queued before, copies included; so a copy to the host, or
 * between device buffers, made later by the same thread sees the results (every copy
 * here waits for the stream, and so for them). The host waits only where results change
 * hands or where it needs them:
 *   - a number it needs (the loss, the overflow flag, the GPT's check of its tokens:
 *     dti_cuda_read_number), a copy;
 *   - a collective's reduction (dti_cuda_reduce), whose buffer goes back to its sender;
 *   - another thread's use of the buffers (dti_cuda_settle before DDP's bucket goes to
 *     its communication thread, before fsdp's prefetch thread reuses a layer's room,
 *     at the ends of dp-threads' phases), as another thread's stream does not wait for
 *     this one's;
 *   - the end of a compute event (lib/parallel/books.c, dti_compute_part) and of a step
 *     (dti_step_end), so that their times cover the GPU's work and not just its launch.
 * A fault inside a kernel is then reported by the next wait, not by the call that
 * launched it: DT_SYNC=1 waits after every launcher again (as CUDA_LAUNCH_BLOCKING=1
 * makes every launch wait), to find which call it was. */
static thread_local int queued;         /* this thread's stream holds unwaited work */

static int sync_each(void)
{
    static const int on = getenv("DT_SYNC") && strcmp(getenv("DT_SYNC"), "1") == 0;
    return on;
}

/* Waits for this thread's stream, which holds everything it queued */
static void wait_stream(void)
{
    dti_book(DTI_BOOK_WAIT, 1);
    DT_CHECK_CUDA(cudaStreamSynchronize(cudaStreamPerThread));
    queued = 0;
}

extern "C" void dti_cuda_queued(void)
{
    DT_CHECK_CUDA(cudaGetLastError());
    queued = 1;
    if (sync_each())
        wait_stream();
}

extern "C" void dti_cuda_settle(void)
{
    if (queued)
        wait_stream();
}

extern "C" int dti_cuda_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e == cudaErrorInsufficientDriver && access("/proc/driver/nvidia", F_OK) != 0) {
        /* CUDA's words for a machine with no NVIDIA driver at all would puzzle a learner */
        why_none = "no NVIDIA driver on this machine";
        cudaGetLastError();
        return 0;
    }
    if (e != cudaSuccess) {
        why_none = cudaGetErrorString(e);   /* "no CUDA-capable device is detected", ... */
        cudaGetLastError();          /* clear the sticky "no driver" / "no device" error */
        return 0;
    }
    if (n == 0)
        why_none = "cudaGetDeviceCount found no device";
    return n;
}

extern "C" const char *dti_cuda_why_none(void)
{
    return why_none;
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
    dti_book(DTI_BOOK_ALLOC, 1);
    DT_CHECK_CUDA(cudaMalloc(&p, nbytes));
    return p;
}

extern "C" void dti_cuda_free(void *p)
{
    dti_book(DTI_BOOK_ALLOC, 1);
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

/* Complete on return, in every direction: a plain cudaMemcpy may return before a copy
 * between two device buffers has finished (it is only ordered on the stream), and the
 * p2p layer hands a buffer back to its sender as soon as the copy returns. */
extern "C" void dti_cuda_memcpy(void *dst, const void *src, size_t nbytes)
{
    DT_CHECK_CUDA(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, cudaStreamPerThread));
    wait_stream();
}

/* rows rows of width bytes, row i from src + i * spitch to dst + i * dpitch: one 2-D
 * copy on this thread's stream (row by row it would be a copy and a wait per row),
 * complete on return as dti_cuda_memcpy's. */
extern "C" void dti_cuda_memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                                  size_t width, size_t rows)
{
    DT_CHECK_CUDA(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDefault,
                                    cudaStreamPerThread));
    wait_stream();
}

/* A number the host needs (a flag, a count, a loss) from the device: the copy on this
 * thread's stream, after the work that made it, then the wait. Counted as a number
 * read back. For the CUDA files, which may run in programs that never call dt_init
 * (the unit suites): dt_memcpy_number asks dt_init's device count. */
extern "C" void dti_cuda_read_number(void *dst, const void *src, size_t nbytes)
{
    DT_CHECK_CUDA(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToHost,
                                  cudaStreamPerThread));
    wait_stream();
    dti_book(DTI_BOOK_NUMBER, 1);
    dti_book(DTI_BOOK_NUMBER_BYTES, nbytes);
}

extern "C" void dti_cuda_memzero(void *p, size_t nbytes)
{
    DT_CHECK_CUDA(cudaMemsetAsync(p, 0, nbytes, cudaStreamPerThread));
    dti_book(DTI_BOOK_LAUNCH, 1);
    dti_cuda_queued();
}

/* For pipelines: a copy queued on this thread's stream, an event recorded after it, and
 * the question whether the GPU has come that far (cudaEventQuery), so the host can hand
 * each finished piece to MPI while later pieces are still being copied. */
extern "C" void dti_cuda_memcpy_async(void *dst, const void *src, size_t nbytes)
{
    DT_CHECK_CUDA(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, cudaStreamPerThread));
}

extern "C" void dti_cuda_stream_sync(void)
{
    wait_stream();
}

extern "C" void *dti_cuda_event_new(void)
{
    cudaEvent_t ev;
    DT_CHECK_CUDA(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    return (void *)ev;
}

extern "C" void dti_cuda_event_record(void *ev)
{
    DT_CHECK_CUDA(cudaEventRecord((cudaEvent_t)ev, cudaStreamPerThread));
}

extern "C" int dti_cuda_event_done(void *ev)
{
    cudaError_t e = cudaEventQuery((cudaEvent_t)ev);
    if (e == cudaErrorNotReady)
        return 0;
    DT_CHECK_CUDA(e);
    return 1;
}

extern "C" void dti_cuda_event_free(void *ev)
{
    DT_CHECK_CUDA(cudaEventDestroy((cudaEvent_t)ev));
}
