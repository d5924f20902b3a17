/* Internal to lib/nn's CUDA files (nn_kernels.cu, gpt_kernels.cu): the block size of
 * their kernels and the reduction over a block that several of them need. */
#ifndef DT_NN_DEVICE_CUH
#define DT_NN_DEVICE_CUH

/* Threads per block for every kernel of lib/nn: a power of two, for block_reduce's
 * tree. */
#define NN_THREADS 256

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
