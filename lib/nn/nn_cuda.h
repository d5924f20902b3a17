/* Internal: the CUDA side of lib/nn (nn_kernels.cu: cuBLAS for the matrix products,
 * kernels for the rest; gpt_kernels.cu: the GPT's operations; ringattn_kernels.cu: ring
 * attention's blocks), called by the functions of nn.h and gpt.h when their pointers
 * are on the GPU. Same contracts as the functions
 * of the same name. Built without CUDA these are stubs that abort: a device pointer
 * cannot exist then. */
#ifndef DT_NN_CUDA_H
#define DT_NN_CUDA_H

#include <stddef.h>
#include "errors.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef DT_HAVE_CUDA

/* half: the products on the tensor cores (nn.h, dt_nn_half_products) */
void dti_nn_cuda_linear_forward(const float *x, const float *W, const float *b, float *y,
                                int B, int in, int out, int half);
void dti_nn_cuda_linear_backward(const float *x, const float *W, const float *dy,
                                 float *dx, float *dW, float *db, int B, int in, int out,
                                 int half);
void dti_nn_cuda_act_forward(int act, const float *x, float *y, size_t n);
void dti_nn_cuda_act_backward(int act, const float *x, const float *dy, float *dx, size_t n);
/* labels on the device too */
float dti_nn_cuda_xent(const float *logits, const int *labels, int B, int C, float scale,
                       float *dlogits);
void dti_nn_cuda_optim_step(int kind, float lr, float momentum, float beta1, float beta2,
                            float eps, int step, float *params, const float *grads,
                            float *state, size_t n);

/* gpt_kernels.cu: gpt.h's operations, tok and pos on the device too. embed_forward
 * waits once, to read back whether every token was in the vocabulary (it stops the
 * program, as the CPU does, if not); the others return with their work queued. */
void dti_nn_cuda_embed_forward(const int *tok, const float *wte, const float *wpe,
                               const int *pos, float *out, int B, int T, int C, int V);
void dti_nn_cuda_embed_backward(const int *tok, const float *dout, const int *pos,
                                float *dwte, float *dwpe, int B, int T, int C);
void dti_nn_cuda_layernorm_forward(const float *x, const float *w, const float *b, float *y,
                                   float *mean, float *rstd, int N, int C);
void dti_nn_cuda_layernorm_backward(const float *x, const float *w, const float *mean,
                                    const float *rstd, const float *dy, float *dx, float *dw,
                                    float *db, int N, int C);
void dti_nn_cuda_attention_forward(const float *qkv, float *att, float *y, int B, int T,
                                   int H, int d);
void dti_nn_cuda_attention_backward(const float *qkv, const float *att, const float *dy,
                                    float *datt, float *dqkv, int B, int T, int H, int d);
/* dst += src, n floats (gpt.c's residual add) */
void dti_nn_cuda_add(float *dst, const float *src, size_t n);
/* rows rows of width floats, row r from src + r*sld to dst + r*dld (not overlapping):
 * gpt.c's copies between device buffers, queued rather than waited for */
void dti_nn_cuda_copy_rows(float *dst, size_t dld, const float *src, size_t sld,
                           size_t width, size_t rows);

/* ringattn_kernels.cu: ring attention's blocks (gpt.h, "attention a block of keys at a
 * time"), every pointer on the device; forward needs no scratch. Both return with their
 * work queued. */
void dti_nn_cuda_attn_block_forward(const float *q, int ldq, const float *k, const float *v,
                                    int ldk, int Tq, int Tk, int q0, int k0, int d, float *m,
                                    float *l, float *o, int ldo);
void dti_nn_cuda_attn_block_backward(const float *q, int ldq, const float *k,
                                     const float *v, int ldk, int Tq, int Tk, int q0, int k0,
                                     int d, const float *lse, const float *D,
                                     const float *dout, int ldo, float *dq, float *dk,
                                     float *dv);

#else

#define DTI_NN_NO_CUDA DT_REQUIRE(0, "built without CUDA (make CUDA=1)")
static inline void dti_nn_cuda_linear_forward(const float *x, const float *W, const float *b, float *y, int B, int in, int out, int half)
{ (void)x; (void)W; (void)b; (void)y; (void)B; (void)in; (void)out; (void)half; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_linear_backward(const float *x, const float *W, const float *dy, float *dx, float *dW, float *db, int B, int in, int out, int half)
{ (void)x; (void)W; (void)dy; (void)dx; (void)dW; (void)db; (void)B; (void)in; (void)out; (void)half; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_act_forward(int act, const float *x, float *y, size_t n)
{ (void)act; (void)x; (void)y; (void)n; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_act_backward(int act, const float *x, const float *dy, float *dx, size_t n)
{ (void)act; (void)x; (void)dy; (void)dx; (void)n; DTI_NN_NO_CUDA; }
static inline float dti_nn_cuda_xent(const float *logits, const int *labels, int B, int C, float scale, float *dlogits)
{ (void)logits; (void)labels; (void)B; (void)C; (void)scale; (void)dlogits; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_optim_step(int kind, float lr, float momentum, float beta1, float beta2, float eps, int step, float *params, const float *grads, float *state, size_t n)
{ (void)kind; (void)lr; (void)momentum; (void)beta1; (void)beta2; (void)eps; (void)step; (void)params; (void)grads; (void)state; (void)n; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_embed_forward(const int *tok, const float *wte, const float *wpe, const int *pos, float *out, int B, int T, int C, int V)
{ (void)tok; (void)wte; (void)wpe; (void)pos; (void)out; (void)B; (void)T; (void)C; (void)V; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_embed_backward(const int *tok, const float *dout, const int *pos, float *dwte, float *dwpe, int B, int T, int C)
{ (void)tok; (void)dout; (void)pos; (void)dwte; (void)dwpe; (void)B; (void)T; (void)C; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_layernorm_forward(const float *x, const float *w, const float *b, float *y, float *mean, float *rstd, int N, int C)
{ (void)x; (void)w; (void)b; (void)y; (void)mean; (void)rstd; (void)N; (void)C; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_layernorm_backward(const float *x, const float *w, const float *mean, const float *rstd, const float *dy, float *dx, float *dw, float *db, int N, int C)
{ (void)x; (void)w; (void)mean; (void)rstd; (void)dy; (void)dx; (void)dw; (void)db; (void)N; (void)C; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_attention_forward(const float *qkv, float *att, float *y, int B, int T, int H, int d)
{ (void)qkv; (void)att; (void)y; (void)B; (void)T; (void)H; (void)d; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_attention_backward(const float *qkv, const float *att, const float *dy, float *datt, float *dqkv, int B, int T, int H, int d)
{ (void)qkv; (void)att; (void)dy; (void)datt; (void)dqkv; (void)B; (void)T; (void)H; (void)d; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_add(float *dst, const float *src, size_t n)
{ (void)dst; (void)src; (void)n; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_copy_rows(float *dst, size_t dld, const float *src, size_t sld, size_t width, size_t rows)
{ (void)dst; (void)dld; (void)src; (void)sld; (void)width; (void)rows; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_attn_block_forward(const float *q, int ldq, const float *k, const float *v, int ldk, int Tq, int Tk, int q0, int k0, int d, float *m, float *l, float *o, int ldo)
{ (void)q; (void)ldq; (void)k; (void)v; (void)ldk; (void)Tq; (void)Tk; (void)q0; (void)k0; (void)d; (void)m; (void)l; (void)o; (void)ldo; DTI_NN_NO_CUDA; }
static inline void dti_nn_cuda_attn_block_backward(const float *q, int ldq, const float *k, const float *v, int ldk, int Tq, int Tk, int q0, int k0, int d, const float *lse, const float *D, const float *dout, int ldo, float *dq, float *dk, float *dv)
{ (void)q; (void)ldq; (void)k; (void)v; (void)ldk; (void)Tq; (void)Tk; (void)q0; (void)k0; (void)d; (void)lse; (void)D; (void)dout; (void)ldo; (void)dq; (void)dk; (void)dv; DTI_NN_NO_CUDA; }

#endif

#ifdef __cplusplus
}
#endif

#endif /* DT_NN_CUDA_H */
