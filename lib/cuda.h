/* Internal: the CUDA side of lib/ (device.cu, ops.cu), called from C. Built with CUDA
 * (DT_HAVE_CUDA) these are the real functions; built without, they are stubs: the
 * queries answer "no GPU", and anything that needs one aborts loudly, which cannot
 * happen unless a device pointer exists, which cannot be made without CUDA. */
#ifndef DT_CUDA_H
#define DT_CUDA_H

#include <stddef.h>
#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The device books (buf.h's dt_device_books; device_books.c): dti_book(what, n) adds n
 * to one counter. Every CUDA file counts each kernel launch or cuBLAS product
 * (DTI_BOOK_LAUNCH, with DTI_LAUNCHED() after it) and each time the host waits for the
 * GPU (DTI_BOOK_WAIT); dti_cuda_malloc and dti_cuda_free count the device's allocations,
 * dt_memcpy and its two siblings the copies between host and GPU (a count, then its
 * bytes). */
enum { DTI_BOOK_LAUNCH, DTI_BOOK_WAIT, DTI_BOOK_ALLOC, DTI_BOOK_TENSOR,
       DTI_BOOK_TENSOR_BYTES, DTI_BOOK_INPUT, DTI_BOOK_INPUT_BYTES, DTI_BOOK_NUMBER,
       DTI_BOOK_NUMBER_BYTES, DTI_BOOK_N };
void dti_book(int what, size_t n);
/* After a launch: count it, and was it valid (CUDA's words if not): queued work
 * (dti_cuda_queued, below). */
#define DTI_LAUNCHED() \
    do { dti_book(DTI_BOOK_LAUNCH, 1); dti_cuda_queued(); } while (0)

#ifdef DT_HAVE_CUDA

enum { DTI_CUDA_BUILT = 1 };
int dti_cuda_device_count(void);             /* 0 when no GPU or no driver */
/* Why the last dti_cuda_device_count found no GPU, in CUDA's words (cudaGetErrorString). */
const char *dti_cuda_why_none(void);
void dti_cuda_set_device(int dev);
void dti_cuda_device_name(int dev, char *buf, size_t len);
void *dti_cuda_malloc(size_t nbytes);
void dti_cuda_free(void *p);
void *dti_cuda_host_alloc(size_t nbytes);    /* pinned host memory */
void dti_cuda_host_free(void *p);
int dti_cuda_is_device_ptr(const void *p);
/* Queued work (device.cu's "Queued work"): a launcher of kernels or products calls
 * dti_cuda_queued after its launches (valid, else CUDA's words; noted as queued; with
 * DT_SYNC=1 waited for); dti_cuda_settle waits for the thread's stream where it holds
 * queued work, before results change hands between threads or a time is taken. Without
 * CUDA settle does nothing: it is called on the host's paths too. */
void dti_cuda_queued(void);
void dti_cuda_settle(void);
/* Copies run on the calling thread's stream (cudaStreamPerThread) and return when their
 * work is done (and all the thread queued before), waiting for that stream only, not
 * the whole GPU. */
void dti_cuda_memcpy(void *dst, const void *src, size_t nbytes);   /* any direction */
/* queued on the thread's stream (dti_cuda_queued), not waited for */
void dti_cuda_memzero(void *p, size_t nbytes);
/* rows rows of width bytes between two pitched matrices, one copy (any direction) */
void dti_cuda_memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch,
                       size_t width, size_t rows);
/* nbytes the host needs from the device, counted as a number read back (device.cu) */
void dti_cuda_read_number(void *dst, const void *src, size_t nbytes);
/* dst[i] = src[i] op in[i] on the GPU (dst may be src); type and op are dt_dtype and
 * dt_op values. Fastest when in, src and dst sit at the same offset within 16 bytes. */
void dti_cuda_reduce(const void *in, const void *src, void *dst, size_t count, int type, int op);
/* Pipelines (p2p's staging): a copy queued on the thread's stream returns at once; an
 * event recorded after it says when the GPU has done it. */
void dti_cuda_memcpy_async(void *dst, const void *src, size_t nbytes);
void dti_cuda_stream_sync(void);             /* waits for the thread's stream */
void *dti_cuda_event_new(void);
void dti_cuda_event_record(void *ev);        /* after the work queued so far */
int dti_cuda_event_done(void *ev);           /* 1 once the GPU has passed it */
void dti_cuda_event_free(void *ev);

#else

#define DTI_NO_CUDA DT_REQUIRE(0, "built without CUDA (make CUDA=1)")

enum { DTI_CUDA_BUILT = 0 };
static inline int dti_cuda_device_count(void) { return 0; }
static inline const char *dti_cuda_why_none(void) { return "dtlab was built without CUDA (make CUDA=1)"; }
static inline void dti_cuda_set_device(int dev) { (void)dev; DTI_NO_CUDA; }
static inline void dti_cuda_device_name(int dev, char *buf, size_t len) { (void)dev; if (len) buf[0] = 0; }
static inline void *dti_cuda_malloc(size_t nbytes) { (void)nbytes; DTI_NO_CUDA; }
static inline void dti_cuda_free(void *p) { (void)p; DTI_NO_CUDA; }
static inline void *dti_cuda_host_alloc(size_t nbytes) { (void)nbytes; DTI_NO_CUDA; }
static inline void dti_cuda_host_free(void *p) { (void)p; DTI_NO_CUDA; }
static inline int dti_cuda_is_device_ptr(const void *p) { (void)p; return 0; }
static inline void dti_cuda_queued(void) { DTI_NO_CUDA; }
static inline void dti_cuda_settle(void) { }
static inline void dti_cuda_memcpy(void *dst, const void *src, size_t nbytes) { (void)dst; (void)src; (void)nbytes; DTI_NO_CUDA; }
static inline void dti_cuda_memzero(void *p, size_t nbytes) { (void)p; (void)nbytes; DTI_NO_CUDA; }
static inline void dti_cuda_read_number(void *dst, const void *src, size_t nbytes) { (void)dst; (void)src; (void)nbytes; DTI_NO_CUDA; }
static inline void dti_cuda_memcpy2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows) { (void)dst; (void)dpitch; (void)src; (void)spitch; (void)width; (void)rows; DTI_NO_CUDA; }
static inline void dti_cuda_reduce(const void *in, const void *src, void *dst, size_t count, int type, int op) { (void)in; (void)src; (void)dst; (void)count; (void)type; (void)op; DTI_NO_CUDA; }
static inline void dti_cuda_memcpy_async(void *dst, const void *src, size_t nbytes) { (void)dst; (void)src; (void)nbytes; DTI_NO_CUDA; }
static inline void dti_cuda_stream_sync(void) { DTI_NO_CUDA; }
static inline void *dti_cuda_event_new(void) { DTI_NO_CUDA; }
static inline void dti_cuda_event_record(void *ev) { (void)ev; DTI_NO_CUDA; }
static inline int dti_cuda_event_done(void *ev) { (void)ev; DTI_NO_CUDA; }
static inline void dti_cuda_event_free(void *ev) { (void)ev; DTI_NO_CUDA; }

#endif

#ifdef __cplusplus
}
#endif

#endif /* DT_CUDA_H */
