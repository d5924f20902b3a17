/* ddp's gradient codecs on the GPU (see compress.c): a bucket on the device is encoded,
 * summed and decoded there, instead of crossing to the host and back each step.
 *
 * The codes are those of dti_encode and dti_decode, word for word: a chunk's scale, then
 * its payload packed by shifts, 2 halves, 4 int8 or 32 signs to a 32-bit word. One block
 * encodes one chunk, in two passes:
 *
 *   1. the scale, over v = x + err: whether every v is finite, max |v| (int8), and the
 *      sum of |v| in double (sign's mean): each thread takes every 256th value, then a
 *      tree over the threads. The maximum is exact in any order; the sum is added in
 *      another order than the host's loop, so sign's scale may differ from the host's in
 *      its last bit (rarely: the double sum is rounded to a float);
 *   2. the words: each thread packs whole words (so no two threads write one), and
 *      writes back the error of each of its values, v - decoded, for the next step.
 *
 * Every value is the host's arithmetic, one rounding each (__fadd_rn, __fmul_rn,
 * __fdiv_rn: nothing fused into a multiply-add), rounded to an integer by lrintf (to
 * nearest even), and halves by __float2half_rn (as lib/half.c). So from the same
 * gradients the GPU sends the host's codes, but for sign's last bit of scale.
 *
 * Each launcher queues its kernel on the calling thread's stream and returns (finished,
 * below); the norm then reads the one number the host prints, which waits for the work
 * queued before it. */
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include "compress_cuda.h"
#include "cuda.h"

#define THREADS 256

/* After a launch: valid (else CUDA's words), counted, and queued, as every launcher of
 * lib/nn (device.cu's "Queued work"): the thread's later copies and kernels, the
 * collectives' included, run after it; a thread that hands the buffer to another one
 * (DDP's and fsdp's communication threads, on streams of their own) settles first. */
static void finished(void)
{
    DTI_LAUNCHED();
}

static __device__ float word_float(uint32_t w) { return __uint_as_float(w); }

/* Value i of a chunk's code (compress.c's decoded) */
static __device__ float decoded(int k, const uint32_t *in, size_t i)
{
    if (k == DTI_CODEC_FP16) {
        unsigned short h = (unsigned short)(in[i / 2] >> (16 * (i % 2)) & 0xffff);
        return __half2float(__ushort_as_half(h));
    }
    float s = word_float(in[0]);
    if (k == DTI_CODEC_INT8)
        return __fmul_rn((float)(int8_t)(in[1 + i / 4] >> (8 * (i % 4)) & 0xff), s);
    return in[1 + i / 32] >> (i % 32) & 1 ? s : -s;
}

/* values per word, and the words before the payload */
static __device__ int per_word(int k) { return k == DTI_CODEC_FP16 ? 2 : k == DTI_CODEC_INT8 ? 4 : 32; }
static __device__ int head_words(int k) { return k == DTI_CODEC_FP16 ? 0 : 1; }

static __global__ void encode_kernel(int k, const float *x, size_t n, int P, float *err,
                                     uint32_t *out, size_t W)
{
    __shared__ double sum_sh[THREADS];
    __shared__ float max_sh[THREADS];
    __shared__ int fin_sh[THREADS];
    int t = threadIdx.x;
    for (int j = blockIdx.x; j < P; j += gridDim.x) {
        /* dt_chunk_bounds(n, P, j) */
        size_t base = n / (size_t)P, extra = n % (size_t)P, jj = (size_t)j;
        size_t lo = jj * base + (jj < extra ? jj : extra), len = base + (jj < extra ? 1 : 0);
        const float *xc = x + lo;
        float *ec = err ? err + lo : NULL;
        uint32_t *oc = out + jj * W;

        /* 1. the scale */
        double sum = 0.0;
        float mx = 0.0f;
        int finite = 1;
        for (size_t i = t; i < len; i += THREADS) {
            float v = ec ? __fadd_rn(xc[i], ec[i]) : xc[i];
            finite &= isfinite(v) != 0;
            sum += (double)fabsf(v);
            mx = fabsf(v) > mx ? fabsf(v) : mx;
        }
        sum_sh[t] = sum;
        max_sh[t] = mx;
        fin_sh[t] = finite;
        __syncthreads();
        for (int s = THREADS / 2; s > 0; s >>= 1) {
            if (t < s) {
                sum_sh[t] += sum_sh[t + s];
                max_sh[t] = max_sh[t + s] > max_sh[t] ? max_sh[t + s] : max_sh[t];
                fin_sh[t] &= fin_sh[t + s];
            }
            __syncthreads();
        }
        int fin = fin_sh[0];
        float s = !fin ? __int_as_float(0x7fc00000) : k == DTI_CODEC_INT8
                ? (float)((double)max_sh[0] / 127) : len ? (float)(sum_sh[0] / (double)len)
                : 0.0f;
        __syncthreads();                 /* every thread has read the shared sums */

        /* 2. the words: thread t packs words t, t + 256, ... */
        int per = per_word(k), head = head_words(k);
        size_t words = (len + per - 1) / per;
        if (t == 0 && head)
            oc[0] = __float_as_uint(s);
        for (size_t w = t; w < W - head; w += THREADS) {
            uint32_t word = 0;
            for (int b = 0; b < per && w < words; b++) {
                size_t i = w * per + b;
                if (i >= len)
                    break;
                float v = ec ? __fadd_rn(xc[i], ec[i]) : xc[i];
                if (k == DTI_CODEC_FP16) {
                    word |= (uint32_t)__half_as_ushort(__float2half_rn(v)) << (16 * b);
                } else if (k == DTI_CODEC_INT8) {
                    long q = fin && s > 0 ? lrintf(__fdiv_rn(v, s)) : 0;
                    q = q > 127 ? 127 : q < -127 ? -127 : q;
                    word |= (uint32_t)(uint8_t)(int8_t)q << (8 * b);
                } else if (v >= 0) {
                    word |= 1u << b;
                }
            }
            oc[head + w] = word;         /* words past the chunk's values: 0 */
        }
        __syncthreads();                 /* the chunk's words, the scale too, are written */
        if (ec)
            for (size_t i = t; i < len; i += THREADS) {
                float v = __fadd_rn(xc[i], ec[i]);
                ec[i] = __fadd_rn(v, -decoded(k, oc, i));
            }
        __syncthreads();                 /* before the shared sums are reused */
    }
}

static __global__ void decode_kernel(int k, const uint32_t *in, size_t n, float *out,
                                     int add)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float d = decoded(k, in, i);
        out[i] = add ? __fadd_rn(out[i], d) : d;
    }
}

static __global__ void norm_kernel(const float *e, size_t n, double *result)
{
    __shared__ double sh[THREADS];
    int t = threadIdx.x;
    double s = 0.0;
    for (size_t i = t; i < n; i += THREADS)
        s += (double)e[i] * e[i];
    sh[t] = s;
    __syncthreads();
    for (int h = THREADS / 2; h > 0; h >>= 1) {
        if (t < h)
            sh[t] += sh[t + h];
        __syncthreads();
    }
    if (t == 0)
        *result = sh[0];
}

extern "C" void dti_compress_cuda_encode(int kind, const float *x, size_t n, int P,
                                         float *err, uint32_t *out, size_t W)
{
    if (P < 1 || W == 0)
        return;
    int blocks = P < 4096 ? P : 4096;
    encode_kernel<<<blocks, THREADS, 0, cudaStreamPerThread>>>(kind, x, n, P, err, out, W);
    finished();
}

extern "C" void dti_compress_cuda_decode(int kind, const uint32_t *in, size_t n, float *out,
                                         int add)
{
    if (n == 0)
        return;
    size_t want = (n + THREADS - 1) / THREADS;
    int blocks = (int)(want < 4096 ? want : 4096);
    decode_kernel<<<blocks, THREADS, 0, cudaStreamPerThread>>>(kind, in, n, out, add);
    finished();
}

/* The result's place on the device lives for the thread's life (allocated once) */
extern "C" double dti_compress_cuda_norm(const float *e, size_t n)
{
    static thread_local double *result;
    if (n == 0)
        return 0.0;
    if (!result)
        result = (double *)dti_cuda_malloc(sizeof(double));
    norm_kernel<<<1, THREADS, 0, cudaStreamPerThread>>>(e, n, result);
    DTI_LAUNCHED();
    double s = 0.0;
    dti_cuda_read_number(&s, result, sizeof s);
    return sqrt(s);
}
