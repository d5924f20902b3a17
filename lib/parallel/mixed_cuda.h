/* Internal: the CUDA side of mixed precision's helpers (mixed_kernels.cu), called by
 * mixed.c when every buffer of a call is on the GPU. Same contracts as the dti_ functions
 * of the same names in parallel_internal.h, with the type given as half (1: fp16, 0:
 * fp32). Built without CUDA these are stubs that abort: a device pointer cannot exist
 * then. */
#ifndef DT_MIXED_CUDA_H
#define DT_MIXED_CUDA_H

#include <stddef.h>
#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef DT_HAVE_CUDA

void dti_mixed_cuda_round_half(float *x, size_t n);
void dti_mixed_cuda_to_float(const void *src, int half, float *dst, size_t n, float mul);
void dti_mixed_cuda_from_float(const float *src, void *dst, int half, size_t n);
void dti_mixed_cuda_accumulate(void *dst, int half, const float *src, size_t n);
/* 1 when some element is inf or NaN: the one number the host reads back */
int dti_mixed_cuda_nonfinite(const void *x, int half, size_t n);

#else

#define DTI_MIXED_NO_CUDA DT_REQUIRE(0, "built without CUDA (make CUDA=1)")
static inline void dti_mixed_cuda_round_half(float *x, size_t n)
{ (void)x; (void)n; DTI_MIXED_NO_CUDA; }
static inline void dti_mixed_cuda_to_float(const void *src, int half, float *dst, size_t n, float mul)
{ (void)src; (void)half; (void)dst; (void)n; (void)mul; DTI_MIXED_NO_CUDA; }
static inline void dti_mixed_cuda_from_float(const float *src, void *dst, int half, size_t n)
{ (void)src; (void)dst; (void)half; (void)n; DTI_MIXED_NO_CUDA; }
static inline void dti_mixed_cuda_accumulate(void *dst, int half, const float *src, size_t n)
{ (void)dst; (void)half; (void)src; (void)n; DTI_MIXED_NO_CUDA; }
static inline int dti_mixed_cuda_nonfinite(const void *x, int half, size_t n)
{ (void)x; (void)half; (void)n; DTI_MIXED_NO_CUDA; }

#endif

#ifdef __cplusplus
}
#endif

#endif /* DT_MIXED_CUDA_H */
