/* Internal to lib/nn: the dti_nn_ helpers its files share. Not part of the API. */
#ifndef DT_NN_INTERNAL_H
#define DT_NN_INTERNAL_H

#include <stddef.h>
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

/* ==== threads for lib/nn's own loops (pool.c) ====
 * LayerNorm, attention's heads, GELU, the residual adds, the cross-entropy, the biases'
 * sums and the optimizers run on the threads OpenBLAS is given (dt_blas_threads: 1 when
 * several ranks share a host). Each such loop is written as a body over items [i0, i1)
 * (rows, (sequence, head) pairs, blocks of DTI_NN_COLS columns, values) that computes
 * every output element of its items, in the order the plain loop computes it: a sum over
 * rows takes a block of columns and goes through the rows in order; no thread keeps a
 * partial sum that another adds. So the results are the same bits at any thread count,
 * and with one thread the body over [0, n) is the plain loop. */
#define DTI_NN_COLS 16          /* a block of columns: 64 bytes, one cache line */
/* Below this many floats read or written a loop runs on one thread: waking the others
 * and waiting for them (a few microseconds) would cost more than they save */
#define DTI_NN_PAR_MIN 16384

typedef void (*dti_nn_body)(void *ctx, size_t i0, size_t i1);
/* Marks a loop body for GCC's function multiversioning: three builds of it, for
 * baseline x86-64 (SSE2: 4 floats a register), AVX2 (8) and AVX-512 (16), and the
 * dynamic loader picks the widest this CPU has, as OpenBLAS picks its kernels. The
 * library itself is built for baseline x86-64, so that it runs on any such CPU. The
 * results are the same bits on every CPU: each build makes the same operations in the
 * same order (the Makefile's -ffp-contract=off keeps AVX2's multiply-adds out, which
 * round once instead of twice, and no sum is reordered), so tests that compare modes bit
 * for bit hold whichever build runs. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define DTI_NN_WIDE __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DTI_NN_WIDE
#endif
/* The threads for a loop that reads or writes about `work` floats: dt_blas_threads(),
 * or 1 below DTI_NN_PAR_MIN */
int dti_nn_threads(size_t work);
/* fn(ctx, i0, i1) over [0, n) cut into nt = min(dti_nn_threads(work), n) contiguous
 * shares, one a thread, the caller's the first; returns when every share is done. nt = 1
 * (or the pool busy with another caller's loop): fn(ctx, 0, n) on the calling thread. */
void dti_nn_parallel(size_t n, size_t work, dti_nn_body fn, void *ctx);
/* Sets the threads OpenBLAS's products use from now on, and returns what it was: 1
 * around a loop whose threads each call sgemm (attention's heads), so that their
 * products do not ask OpenBLAS's threads for the cores the loop already holds; then
 * what it returned. */
int dti_sgemm_threads(int n);

#endif /* DT_NN_INTERNAL_H */
