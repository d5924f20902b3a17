/* Internal to lib/nn: the dti_nn_ helpers its files share. Not part of the API. */
#ifndef DT_NN_INTERNAL_H
#define DT_NN_INTERNAL_H

#include <stdint.h>

/* splitmix64: the next 64 random bits from *state (data.c). Integer arithmetic only, so
 * the same seed gives the same numbers on every machine and compiler. */
uint64_t dti_nn_rand(uint64_t *state);
/* Uniform in [0, 1), from the top 53 bits of dti_nn_rand. */
double dti_nn_uniform(uint64_t *state);

/* Where an operation runs (layers.c): 1 when every non-NULL pointer of ptrs[0..n) is on
 * the GPU, 0 when every one is on the host (or all are NULL). A mix aborts with a
 * message naming fn. */
int dti_nn_on_gpu(const char *fn, const void *const *ptrs, int n);

/* e^y on the host (layers.c), for GELU: vectorisable, within about 2e-7 of exp
 * relative, y clamped to [-87, 87]. */
float dti_nn_exp(float y);

/* C (M, N) = alpha op(A) op(B) + beta C with OpenBLAS's sgemm (blas.c), row-major and
 * packed: op(A) is (M, K), A^T when ta; op(B) is (K, N), B^T when tb. */
void dti_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
               const float *B, float beta, float *C);

/* The same with leading dimensions (each row's stride in floats): lda, ldb, ldc. */
void dti_sgemm_ld(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc);

#endif /* DT_NN_INTERNAL_H */
