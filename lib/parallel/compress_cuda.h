/* Internal: the CUDA side of ddp's gradient codecs (compress_kernels.cu), called by
 * compress.c when a bucket lives on the GPU. The same codes as dti_encode and
 * dti_decode (compress.c), chunk by chunk. Built without CUDA these are stubs that abort:
 * a device pointer cannot exist then. */
#ifndef DT_COMPRESS_CUDA_H
#define DT_COMPRESS_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

/* dt_compress's values (parallel.h, which the CUDA files cannot include: it includes
 * mpi.h); compress.c checks that they agree */
enum { DTI_CODEC_FP16 = 1, DTI_CODEC_INT8 = 2, DTI_CODEC_SIGN = 3 };

#ifdef DT_HAVE_CUDA

/* Encodes x[0, n) cut into P chunks (dt_chunk_bounds: the first n % P one longer),
 * chunk j into out + j * W words (W words each, dti_codec_words of the largest chunk),
 * with error feedback into err when it is not NULL: dti_encode on each chunk at once,
 * a block per chunk. kind is a dt_compress. Every word of out is written. */
void dti_compress_cuda_encode(int kind, const float *x, size_t n, int P, float *err,
                              uint32_t *out, size_t W);
/* out[i] = (out[i] +) the decoded value i of in, i < n: dti_decode */
void dti_compress_cuda_decode(int kind, const uint32_t *in, size_t n, float *out, int add);
/* sqrt(sum of e[i]^2), summed in double on the device: the one number read back */
double dti_compress_cuda_norm(const float *e, size_t n);

#else

#define DTI_COMPRESS_NO_CUDA DT_REQUIRE(0, "built without CUDA (make CUDA=1)")
static inline void dti_compress_cuda_encode(int kind, const float *x, size_t n, int P, float *err, uint32_t *out, size_t W)
{ (void)kind; (void)x; (void)n; (void)P; (void)err; (void)out; (void)W; DTI_COMPRESS_NO_CUDA; }
static inline void dti_compress_cuda_decode(int kind, const uint32_t *in, size_t n, float *out, int add)
{ (void)kind; (void)in; (void)n; (void)out; (void)add; DTI_COMPRESS_NO_CUDA; }
static inline double dti_compress_cuda_norm(const float *e, size_t n)
{ (void)e; (void)n; DTI_COMPRESS_NO_CUDA; }

#endif

#ifdef __cplusplus
}
#endif

#endif /* DT_COMPRESS_CUDA_H */
