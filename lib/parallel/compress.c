/* ddp's gradient compression: fewer bytes on the wire for each bucket of gradients.
 *
 * The codecs (train --compress):
 *   fp16  each gradient rounded to IEEE half (lib/half.c): 2 bytes instead of 4.
 *         Halves can be added as they travel, so the bucket goes through the same ring
 *         allreduce as fp32, on DT_HALF. dtlab adds two halves by widening them to
 *         float and rounding the sum back to half (lib/ops.c): on N ranks a sum is
 *         rounded N-1 times, each time by at most half an fp16 ulp (2^-11 relative).
 *         Beyond 65504 a value becomes inf; below 2^-24 it becomes 0.
 *   int8  a chunk of values x shares one scale s = max|x| / 127, and each value
 *         travels as the integer q = round(x / s) in [-127, 127], one byte. Decoded:
 *         q s, within s/2 of x.
 *   sign  one bit per value, and one scale per chunk, the mean |x|. Decoded: +s where
 *         x >= 0, -s elsewhere. 32 times fewer bytes than fp32.
 *
 * One encoded chunk of n values is W 32-bit words (dti_codec_words): word 0 the scale
 * (a float's bits; fp16 has none), then the payload, packed by shifts (4 int8 or 32
 * signs to a word) so that it reads the same on any byte order. It travels as MPI_INT.
 *
 * The compressed allreduce. int8 and sign codes cannot be added on the way (two codes
 * with different scales mean nothing summed), so they use the allreduce of 1-bit Adam
 * (Tang et al., 2021): a reduce-scatter and an allgather done by hand.
 *
 *     P ranks; the bucket cut into P chunks (dt_chunk_bounds); rank j sums chunk j
 *
 *     1. compress    each rank encodes its P chunks               (worker error e)
 *     2. all-to-all  chunk j goes to rank j, which then holds P encoded copies of it
 *     3. sum         rank j decodes the P copies and adds them up
 *     4. compress    rank j encodes the sum                       (server error e_j)
 *     5. allgather   every rank gets every summed chunk, and decodes them all
 *
 *     rank 0: [a0 b0 c0]     a0 a1 a2 -> A = a0+a1+a2 -> C(A)
 *     rank 1: [a1 b1 c1]  -> b0 b1 b2 -> B = b0+b1+b2 -> C(B) -> all: C(A) C(B) C(C)
 *     rank 2: [a2 b2 c2]     c0 c1 c2 -> C = c0+c1+c2 -> C(C)
 *
 * Cost: a rank sends P-1 chunks in step 2 and P-1 in step 5, 2 (P-1) x 4W bytes, about
 * 2 (P-1)/P x n x bits/8 for a bucket of n values (bits 8 or 1), where the fp32 ring
 * sends 2 (P-1)/P x n x 4 (dt_compress_bytes gives both exactly). Every rank ends with
 * the same bits: step 5 only copies.
 *
 * Error feedback (sign; train --no-feedback turns it off). Sign compression is biased:
 * a coordinate that is always small next to its neighbours is sent as +-mean|x| every
 * step, too big, and one that is always large too small; the errors pile up step after
 * step. The fix: keep e, what the last compression lost, and add it to the next
 * gradient before compressing:
 *
 *     v = g + e;    send C(v);    e = v - C(v)
 *
 * Nothing is lost for good, only delayed: the sum of all that was sent equals the sum
 * of all the gradients minus the e of the moment. And e stays bounded. For sign, with
 * s = mean|v| over a chunk of n values,
 *
 *     |v - C(v)|^2 = |v|^2 - 2 s sum|v_i| + n s^2 = |v|^2 - (sum|v_i|)^2 / n
 *                 <= (1 - 1/n) |v|^2          (since sum|v_i| >= |v|)
 *
 * so |e_t| <= q (|g_t| + |e_t-1|) with q = sqrt(1 - 1/n), and |e| <= q / (1 - q) max|g|
 * at all times (tests/unit_compress.c checks it). Each rank keeps e for its whole
 * bucket (step 1) and, for the chunk it sums, the error of step 4 (1-bit Adam's server
 * error). Both are training state: counted as gradient memory, saved in checkpoints.
 *
 * Non-finite values: a chunk that holds inf or NaN is sent with a NaN scale and decodes
 * as NaN throughout, so the damage shows (the loss becomes NaN) instead of hiding in
 * finite numbers. fp16 keeps them as they are (inf stays inf).
 *
 * On a GPU the bucket, the words and the errors stay on the device: the same codes come
 * from kernels (compress_kernels.cu; sign's mean may differ in its last bit, summed in
 * another order), and the collectives move device words. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "parallel_internal.h"
#include "buf.h"
#include "collectives/collectives.h"
#include "compress_cuda.h"
#include "half.h"
#include "schedule.h"

_Static_assert((int)DT_COMPRESS_FP16 == (int)DTI_CODEC_FP16 &&
               (int)DT_COMPRESS_INT8 == (int)DTI_CODEC_INT8 &&
               (int)DT_COMPRESS_SIGN == (int)DTI_CODEC_SIGN,
               "compress_cuda.h's codes are dt_compress's");

/* ==== the codecs (no MPI) ==== */

static int payload_bits(dt_compress k)
{
    return k == DT_COMPRESS_FP16 ? 16 : k == DT_COMPRESS_INT8 ? 8 : 1;
}

size_t dti_codec_words(dt_compress k, size_t n)
{
    DT_REQUIRE(k > DT_COMPRESS_NONE && k < DT_NCOMPRESS, "dti_codec_words: no codec %d",
               (int)k);
    size_t per = 32 / (size_t)payload_bits(k);        /* values per word */
    return (k == DT_COMPRESS_FP16 ? 0 : 1) + (n + per - 1) / per;
}

static float word_float(uint32_t w) { float f; memcpy(&f, &w, 4); return f; }
static uint32_t float_word(float f) { uint32_t w; memcpy(&w, &f, 4); return w; }

/* The value chunk x[0..n) is decoded to: n values out of in. */
static float decoded(dt_compress k, const uint32_t *in, size_t i)
{
    if (k == DT_COMPRESS_FP16)
        return dt_half_to_float((dt_half)(in[i / 2] >> (16 * (i % 2)) & 0xffff));
    float s = word_float(in[0]);
    if (k == DT_COMPRESS_INT8)
        return (float)(int8_t)(in[1 + i / 4] >> (8 * (i % 4)) & 0xff) * s;
    return in[1 + i / 32] >> (i % 32) & 1 ? s : -s;
}

void dti_encode(dt_compress k, const float *x, size_t n, float *err, uint32_t *out)
{
    size_t W = dti_codec_words(k, n);
    memset(out, 0, W * sizeof *out);
    /* the scale, over v = x + err */
    double sum = 0, max = 0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) {
        float v = err ? x[i] + err[i] : x[i];
        finite &= isfinite(v) != 0;
        sum += fabsf(v);
        max = fabsf(v) > max ? fabsf(v) : max;
    }
    float s = !finite ? NAN : k == DT_COMPRESS_INT8 ? (float)(max / 127)
            : n ? (float)(sum / (double)n) : 0.0f;
    if (k != DT_COMPRESS_FP16)
        out[0] = float_word(s);
    for (size_t i = 0; i < n; i++) {
        float v = err ? x[i] + err[i] : x[i];
        if (k == DT_COMPRESS_FP16) {
            out[i / 2] |= (uint32_t)dt_float_to_half(v) << (16 * (i % 2));
        } else if (k == DT_COMPRESS_INT8) {
            long q = finite && s > 0 ? lrintf(v / s) : 0;
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            out[1 + i / 4] |= (uint32_t)(uint8_t)(int8_t)q << (8 * (i % 4));
        } else if (v >= 0) {
            out[1 + i / 32] |= 1u << (i % 32);
        }
        if (err)
            err[i] = v - decoded(k, out, i);    /* what this compression lost */
    }
}

void dti_decode(dt_compress k, const uint32_t *in, size_t n, float *out, int add)
{
    for (size_t i = 0; i < n; i++)
        out[i] = add ? out[i] + decoded(k, in, i) : decoded(k, in, i);
}

/* ==== bytes on the wire ==== */

size_t dt_compress_bytes(dt_compress k, size_t count, int P, int rank)
{
    if (P == 1)
        return 0;
    if (k == DT_COMPRESS_INT8 || k == DT_COMPRESS_SIGN) {
        size_t lo, hi;                    /* chunk 0 is the largest: every message's */
        dt_chunk_bounds(count, P, 0, &lo, &hi);
        return 2 * (size_t)(P - 1) * 4 * dti_codec_words(k, hi - lo);
    }
    /* the ring: the chunks rank sends in the reduce-scatter and in the allgather */
    size_t es = k == DT_COMPRESS_FP16 ? 2 : 4, bytes = 0;
    for (int s = 0; s < P - 1; s++) {
        size_t lo, hi;
        dt_chunk_bounds(count, P, dt_ring_rs_send_chunk(rank, P, s), &lo, &hi);
        bytes += (hi - lo) * es;
        dt_chunk_bounds(count, P, dt_ring_ag_send_chunk(rank, P, s), &lo, &hi);
        bytes += (hi - lo) * es;
    }
    return bytes;
}

/* ==== a run's compression: state and scratch ==== */

struct dti_compressor {
    dti_run *run;
    dt_compress kind;
    int P, rank;
    size_t n;                 /* gradients: [0, n) of the buckets' array */
    float *werr;              /* [n] worker error, NULL without feedback */
    float *serr;              /* [nserr] server error: each bucket's chunk summed here */
    size_t nserr, *soff;      /* [nb] where bucket b's server error starts */
    int nb;
    size_t maxn;              /* the largest bucket */
    float *sum;               /* [maxn / P + 1] the chunk summed here */
    uint32_t *words;          /* [2 P Wmax] what is sent and received */
    /* all of them where the run lives: on a GPU the codecs run there (compress_kernels.cu)
     * and a bucket never crosses to the host */
};

dti_compressor *dti_compressor_new(dti_run *r, dt_compress k, int feedback,
                                   const size_t *lo, const size_t *hi, int nb,
                                   MPI_Comm comm)
{
    DT_REQUIRE(k > DT_COMPRESS_NONE && k < DT_NCOMPRESS, "dti_compressor_new: "
               "compression %d", (int)k);
    dti_compressor *z = dti_calloc(1, sizeof *z);
    z->run = r;
    z->kind = k;
    z->nb = nb;
    DT_CHECK_MPI(MPI_Comm_size(comm, &z->P));
    DT_CHECK_MPI(MPI_Comm_rank(comm, &z->rank));
    z->soff = dti_calloc((size_t)nb, sizeof *z->soff);
    for (int b = 0; b < nb; b++) {
        size_t a, e;
        dt_chunk_bounds(hi[b] - lo[b], z->P, z->rank, &a, &e);
        z->soff[b] = z->nserr;
        z->nserr += e - a;
        z->n = hi[b] > z->n ? hi[b] : z->n;
        z->maxn = hi[b] - lo[b] > z->maxn ? hi[b] - lo[b] : z->maxn;
    }
    size_t cmax = z->maxn / (size_t)z->P + 1, W = dti_codec_words(k, cmax);
    z->sum = dti_alloc(r, DTI_GRADS, cmax * sizeof(float), 0);
    z->words = dti_alloc(r, DTI_GRADS, 2 * (size_t)z->P * W * 4, 0);
    if (feedback && k == DT_COMPRESS_SIGN) {
        z->werr = dti_alloc(r, DTI_GRADS, z->n * sizeof(float), 0);
        z->serr = dti_alloc(r, DTI_GRADS, z->nserr * sizeof(float), 0);
        dti_ckpt_region(r, "error-worker", z->werr, z->n * sizeof(float));
        dti_ckpt_region(r, "error-server", z->serr, z->nserr * sizeof(float));
    }
    return z;
}

size_t dti_compressor_state_bytes(const dti_compressor *z)
{
    return z->werr ? (z->n + z->nserr) * sizeof(float) : 0;
}

void dti_compressor_free(dti_compressor *z)
{
    if (z == NULL)
        return;
    size_t cmax = z->maxn / (size_t)z->P + 1, W = dti_codec_words(z->kind, cmax);
    dti_free(z->run, DTI_GRADS, z->sum, cmax * sizeof(float));
    dti_free(z->run, DTI_GRADS, z->words, 2 * (size_t)z->P * W * 4);
    if (z->werr) {
        dti_free(z->run, DTI_GRADS, z->werr, z->n * sizeof(float));
        dti_free(z->run, DTI_GRADS, z->serr, z->nserr * sizeof(float));
    }
    free(z->soff);
    free(z);
}

double dti_compressor_error_norm(const dti_compressor *z)
{
    if (z->werr && dt_is_device_ptr(z->werr))
        return dti_compress_cuda_norm(z->werr, z->n);
    double s = 0;
    for (size_t i = 0; z->werr && i < z->n; i++)
        s += (double)z->werr[i] * z->werr[i];
    return sqrt(s);
}

/* ==== the compressed allreduce of one bucket ==== */

/* The codec on the side where the buffers are: the host's loops, or on a GPU the kernels
 * (compress_kernels.cu: every chunk at once, a block a chunk; done when they return).
 * x (n values) is cut into P chunks, chunk j encoded into out + j W. */
static void encode_chunks(dt_compress k, int gpu, const float *x, size_t n, int P,
                          float *err, uint32_t *out, size_t W)
{
    if (gpu) {
        dti_compress_cuda_encode(k, x, n, P, err, out, W);
        return;
    }
    for (int j = 0; j < P; j++) {
        size_t a, e;
        dt_chunk_bounds(n, P, j, &a, &e);
        dti_encode(k, x + a, e - a, err ? err + a : NULL, out + (size_t)j * W);
    }
}

static void decode(dt_compress k, int gpu, const uint32_t *in, size_t n, float *out,
                   int add)
{
    if (gpu)
        dti_compress_cuda_decode(k, in, n, out, add);
    else
        dti_decode(k, in, n, out, add);
}

/* Steps 1-5 of the header on g (n floats, on the host or, gpu, on the device, as every
 * buffer of z): every message is W words, the size of chunk 0's (the largest), so that
 * the all-to-all and the allgather move equal blocks; werr and serr are this bucket's
 * errors (NULL: no feedback). */
static void sum_compressed(dti_compressor *z, int gpu, float *g, size_t n, float *werr,
                           float *serr, MPI_Comm comm)
{
    dt_compress k = z->kind;
    int P = z->P;
    size_t a, e;
    dt_chunk_bounds(n, P, 0, &a, &e);
    size_t W = dti_codec_words(k, e - a);
    uint32_t *out = z->words, *in = z->words + (size_t)P * W;
    encode_chunks(k, gpu, g, n, P, werr, out, W);                  /* 1. compress */
    dt_alltoall(out, (int)W, MPI_INT, in, (int)W, MPI_INT, comm);  /* 2. all-to-all */
    dt_chunk_bounds(n, P, z->rank, &a, &e);
    dt_memzero(z->sum, (e - a) * sizeof(float));
    for (int j = 0; j < P; j++)                                    /* 3. sum */
        decode(k, gpu, in + (size_t)j * W, e - a, z->sum, 1);
    dt_memzero(out, W * sizeof *out);       /* a short last chunk leaves words unused */
    encode_chunks(k, gpu, z->sum, e - a, 1, serr, out, W);         /* 4. compress */
    dt_allgather(out, (int)W, MPI_INT, in, (int)W, MPI_INT, comm);  /* 5. allgather */
    for (int j = 0; j < P; j++) {
        dt_chunk_bounds(n, P, j, &a, &e);
        decode(k, gpu, in + (size_t)j * W, e - a, g + a, 0);
    }
}

void dti_compressor_allreduce(dti_compressor *z, int b, float *g, size_t lo, size_t hi,
                              MPI_Comm comm)
{
    size_t n = hi - lo;
    float *werr = z->werr ? z->werr + lo : NULL, *serr = z->werr ? z->serr + z->soff[b] : NULL;
    int gpu = dt_is_device_ptr(g);
    DT_REQUIRE(gpu == dt_is_device_ptr(z->words), "compression: the gradients and the "
               "codec's buffers must be on one side (the run's)");
    if (z->kind == DT_COMPRESS_FP16) {
        /* halves add up on the way: the ring, on DT_HALF */
        encode_chunks(DT_COMPRESS_FP16, gpu, g, n, 1, NULL, z->words,
                      dti_codec_words(DT_COMPRESS_FP16, n));
        dt_allreduce_ring(MPI_IN_PLACE, z->words, (int)n, DT_HALF, MPI_SUM, comm);
        decode(DT_COMPRESS_FP16, gpu, z->words, n, g, 0);
    } else {
        sum_compressed(z, gpu, g, n, werr, serr, comm);
    }
}
