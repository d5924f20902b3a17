/* Internal to lib/nn's CUDA files (nn_kernels.cu, gpt_kernels.cu, ringattn_kernels.cu):
 * the block size of their kernels, their grids and loops, and the reduction over a block
 * that several of them need. */
#ifndef DT_NN_DEVICE_CUH
#define DT_NN_DEVICE_CUH

/* Threads per block for every kernel of lib/nn: a power of two, for block_reduce's
 * tree. */
#define NN_THREADS 256

/* Blocks for n items, per_block to a block (threads' items, or 1 for rows of a block
 * each): one each, at most 4096 (the grid-stride loops cover the rest), at least 1 (a
 * launch of 0 blocks is an error). */
static inline int nn_blocks(size_t n, size_t per_block)
{
    size_t b = (n + per_block - 1) / per_block;
    return b < 1 ? 1 : b > 4096 ? 4096 : (int)b;
}

/* A launch's configuration on the calling thread's stream: n items a thread each, or n
 * rows a block each */
#define LAUNCH_ITEMS(n) nn_blocks((n), NN_THREADS), NN_THREADS, 0, cudaStreamPerThread
#define LAUNCH_ROWS(n) nn_blocks((size_t)(n), 1), NN_THREADS, 0, cudaStreamPerThread

/* The grid-stride loop over items: this thread's first, then every gridDim * blockDim */
#define FOR_EACH(i, n) \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)(n); \
         i += (size_t)gridDim.x * blockDim.x)

/* The grid-stride loop over rows, a block each: every thread of a block takes the same
 * rows, so barriers inside it are reached by all of them */
#define FOR_EACH_ROW(r, n) \
    for (size_t r = blockIdx.x; r < (size_t)(n); r += gridDim.x)

/* A row's elements among a block's threads: thread t takes t, t + blockDim, ... */
#define FOR_EACH_COL(j, n) \
    for (int j = threadIdx.x; j < (n); j += blockDim.x)

/* The block's maximum (max != 0) or sum of v, every thread passing its own v and every
 * thread getting the result. A tree in shared memory sh[NN_THREADS]: at each level the
 * first half of the active threads fold in the second half, log2(NN_THREADS) levels.
 *
 *   level 1: sh[t] op= sh[t + 128]   for t < 128
 *   level 2: sh[t] op= sh[t + 64]    for t < 64   ...   sh[0] holds the result
 *
 * Every thread of the block must call it (it contains __syncthreads), in a block of
 * NN_THREADS. The last barrier, after all have read sh[0], lets the caller reuse sh at
 * once. It adds in another order than a loop over the values: equal to rounding. */
static __device__ float block_reduce(float *sh, float v, int max)
{
    int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = NN_THREADS / 2; s > 0; s >>= 1) {
        if (t < s)
            sh[t] = max ? fmaxf(sh[t], sh[t + s]) : sh[t] + sh[t + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

#endif /* DT_NN_DEVICE_CUH */
