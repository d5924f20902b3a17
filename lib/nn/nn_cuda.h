/* Internal: the CUDA side of lib/nn (nn_kernels.cu: cuBLAS for the matrix products,
 * kernels for the rest), called by the functions of nn.h when their pointers are on the
 * GPU. Same contracts as the nn.h functions of the same name. Built without CUDA these
 * are stubs that abort: a device pointer cannot exist then. */
#ifndef DT_NN_CUDA_H
#define DT_NN_CUDA_H

#include <stddef.h>
#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef DT_HAVE_CUDA

void dti_nn_cuda_linear_forward(const float *x, const float *W, const float *b, float *y,
                                int B, int in, int out);
void dti_nn_cuda_linear_backward(const float *x, const float *W, const float *dy,
                                 float *dx, float *dW, float *db, int B, int in, int out);
void dti_nn_cuda_act_forward(int act, const float *x, float *y, size_t n);
void dti_nn_cuda_act_backward(int act, const float *x, const float *dy, float *dx, size_t n);
/* labels on the device too */
float dti_nn_cuda_xent(const float *logits, const int *labels, int B, int C, float scale,
                       float *dlogits);
void dti_nn_cuda_optim_step(int kind, float lr, float momentum, float beta1, float beta2,
                            float eps, int step, float *params, const float *grads,
                            float *state, size_t n);

#else

#define DTI_NN_NO_CUDA DT_REQUIRE(0, "built without CUDA (make CUDA=1)")
static inline void dti_nn_cuda_linear_forward(const float *x, const float *W, const float *b, float *y, int B, int in, int out)
{ (void)x; (void)W; (void)b; (void)y; (void)B; (void)in; (void)out; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_linear_backward(const float *x, const float *W, const float *dy, float *dx, float *dW, float *db, int B, int in, int out)
{ (void)x; (void)W; (void)dy; (void)dx; (void)dW; (void)db; (void)B; (void)in; (void)out; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_act_forward(int act, const float *x, float *y, size_t n)
{ (void)act; (void)x; (void)y; (void)n; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_act_backward(int act, const float *x, const float *dy, float *dx, size_t n)
{ (void)act; (void)x; (void)dy; (void)dx; (void)n; DTI_NN_NO_CUDA; }
static inline float dti_nn_cuda_xent(const float *logits, const int *labels, int B, int C, float scale, float *dlogits)
{ (void)logits; (void)labels; (void)B; (void)C; (void)scale; (void)dlogits; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_optim_step(int kind, float lr, float momentum, float beta1, float beta2, float eps, int step, float *params, const float *grads, float *state, size_t n)
{ (void)kind; (void)lr; (void)momentum; (void)beta1; (void)beta2; (void)eps; (void)step; (void)params; (void)grads; (void)state; (void)n; DTI_NN_NO_CUDA; }

#endif

#ifdef __cplusplus
}
#endif

#endif /* DT_NN_CUDA_H */
