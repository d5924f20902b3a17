/* Mixed precision: fp16 (or bf16) weights, activations and gradients, fp32 master
 * weights.
 *
 *   master (fp32) --round--> weights (fp16) --forward/backward--> gradients (fp16)
 *        ^                                                             |
 *        +---- optimizer <-- unscale (/ S), check for inf/NaN <--------+
 *
 * fp16 holds values up to 65504 with 11 significant bits, and nothing below 2^-24.
 * Gradients are often smaller than that floor, so the loss is multiplied by a scale S
 * (2^16 to start) before backward: every gradient is S times larger and survives in
 * fp16; the optimizer divides S out again in fp32. When S is too large a gradient
 * overflows to inf: the step is skipped and S halved. After 2000 clean steps S doubles,
 * to find the largest scale that does not overflow (dynamic loss scaling).
 *
 * What fp16 buys: half the bytes for weights and gradients in memory and on the wire
 * (gradient allreduce, pipeline activations, FSDP's gathers). What it costs: the fp32
 * master copy (4 bytes a weight) that the small updates need, since lr * g is often
 * below fp16's resolution of a weight.
 *
 * bf16 keeps fp32's 8 exponent bits and so its range (down to 1.2e-38, and further in
 * subnormals), with 8 significant bits where fp16 has 11: a gradient that would flush to
 * zero in fp16 survives in bf16, so bf16 needs no loss scale; it pays in precision
 * (2^-8 relative). --precision bf16 runs as fp16 does, without the scaler.
 *
 * On the CPU the arithmetic itself runs in fp32 on values rounded to fp16, which is also
 * what tensor cores do (fp16 inputs, fp32 accumulation): on the GPU the products run
 * there (model.c sets dt_nn_half_products in fp16). The helpers below are loops
 * over host buffers, the reference; when every buffer of a call is on the GPU they hand
 * it to their kernels (mixed_kernels.cu: the same bits), so an fp16 step on a GPU stays
 * there. A call that mixes host and device buffers (fsdp --offload: master shards in
 * host memory) copies the device side over and back, which the device books count. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "half.h"
#include "mixed_cuda.h"
#include "parallel_internal.h"

/* ==== the loss scaler ==== */

void dt_scaler_defaults(dt_scaler_config *c)
{
    c->init = 65536.0f;
    c->backoff = 0.5f;
    c->growth = 2.0f;
    c->window = 2000;
}

void dt_scaler_init(dt_scaler *s, const dt_scaler_config *c)
{
    s->cfg = *c;
    s->scale = c->init;
    s->clean = 0;
}

int dt_scaler_update(dt_scaler *s, int found_inf)
{
    if (found_inf) {
        s->scale *= s->cfg.backoff;
        s->clean = 0;
        return 0;
    }
    if (++s->clean >= s->cfg.window) {
        s->scale *= s->cfg.growth;
        s->clean = 0;
    }
    return 1;
}

/* ==== types ==== */

MPI_Datatype dti_work_type(const dti_run *r)
{
    return r->cfg->precision == DT_FP16 ? DT_HALF
           : r->cfg->precision == DT_BF16 ? DT_BFLOAT16 : MPI_FLOAT;
}

size_t dti_work_size(const dti_run *r)
{
    return r->cfg->precision == DT_FP32 ? sizeof(float) : sizeof(dt_half);
}

float dti_loss_scale(const dti_run *r)
{
    return r->cfg->precision == DT_FP16 ? r->scaler.scale : 1.0f;
}

static size_t type_size(MPI_Datatype t)
{
    DT_REQUIRE(t == MPI_FLOAT || t == DT_HALF || t == DT_BFLOAT16, "mixed precision works "
               "on float, half or bf16, not %s", dt_type_name(t));
    return t == MPI_FLOAT ? sizeof(float) : sizeof(dt_half);
}

/* A 16-bit value of type (half or bf16) as a float, and a float rounded to one */
static float widen(MPI_Datatype type, uint16_t v)
{
    return type == DT_HALF ? dt_half_to_float(v) : dt_bf16_to_float(v);
}

static uint16_t narrow(MPI_Datatype type, float f)
{
    return type == DT_HALF ? dt_float_to_half(f) : dt_float_to_bf16(f);
}

/* The kernels know fp16 only: bf16 runs on the host so far (dt_train_check) */
static int half_on_gpu(MPI_Datatype type)
{
    DT_REQUIRE(type != DT_BFLOAT16, "bf16 runs on the host so far (mixed_kernels.cu has fp16 "
               "only)");
    return type == DT_HALF;
}

/* ==== host views of device buffers ==== */

/* A host pointer to the data of p: p itself, or a copy when p is on the GPU. */
static void *host_view(const void *p, size_t nbytes)
{
    if (!dt_is_device_ptr(p))
        return (void *)p;
    void *h = malloc(nbytes ? nbytes : 1);
    DT_REQUIRE(h != NULL, "out of host memory");
    dt_memcpy(h, p, nbytes);
    return h;
}

/* Ends a view: writes it back to p first when asked, then frees the copy. */
static void host_done(void *p, void *h, size_t nbytes, int write_back)
{
    if (h == p)
        return;
    if (write_back)
        dt_memcpy(p, h, nbytes);
    free(h);
}

/* 1 when a and b (b may be NULL) are both on the GPU: the call goes to the kernels */
static int on_gpu(const void *a, const void *b)
{
    return dt_is_device_ptr(a) && (b == NULL || dt_is_device_ptr(b));
}

/* ==== conversions ==== */

void dti_round_half(float *x, size_t n)
{
    dti_round_to(DT_HALF, x, n);
}

void dti_round_to(MPI_Datatype type, float *x, size_t n)
{
    if (type == MPI_FLOAT)
        return;
    if (on_gpu(x, NULL) && half_on_gpu(type)) {
        dti_mixed_cuda_round_half(x, n);
        return;
    }
    float *h = host_view(x, n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        h[i] = widen(type, narrow(type, h[i]));
    host_done(x, h, n * sizeof(float), 1);
}

void dti_to_float(const void *src, MPI_Datatype type, float *dst, size_t n, float mul)
{
    size_t es = type_size(type);
    if (on_gpu(src, dst)) {
        dti_mixed_cuda_to_float(src, type == MPI_FLOAT ? 0 : half_on_gpu(type), dst, n, mul);
        return;
    }
    const void *s = host_view(src, n * es);
    float *d = dst;
    if (dt_is_device_ptr(dst)) {            /* written whole: no need to copy it in */
        d = malloc(n * sizeof(float) + 1);
        DT_REQUIRE(d != NULL, "out of host memory");
    }
    if (type == MPI_FLOAT) {
        const float *f = s;
        for (size_t i = 0; i < n; i++)
            d[i] = f[i] * mul;
    } else {
        const uint16_t *hv = s;
        for (size_t i = 0; i < n; i++)
            d[i] = widen(type, hv[i]) * mul;
    }
    host_done((void *)src, (void *)s, n * es, 0);
    host_done(dst, d, n * sizeof(float), 1);
}

void dti_from_float(const float *src, void *dst, MPI_Datatype type, size_t n)
{
    size_t es = type_size(type);
    if (on_gpu(src, dst)) {
        dti_mixed_cuda_from_float(src, dst, type == MPI_FLOAT ? 0 : half_on_gpu(type), n);
        return;
    }
    const float *s = host_view(src, n * sizeof(float));
    void *d = host_view(dst, n * es);
    if (type == MPI_FLOAT)
        memcpy(d, s, n * sizeof(float));
    else if (type == DT_HALF)
        dt_floats_to_halves(s, d, n);
    else
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)d)[i] = dt_float_to_bf16(s[i]);
    host_done((void *)src, (void *)s, n * sizeof(float), 0);
    host_done(dst, d, n * es, 1);
}

void dti_accumulate(void *dst, MPI_Datatype type, const float *src, size_t n)
{
    size_t es = type_size(type);
    if (on_gpu(dst, src)) {
        dti_mixed_cuda_accumulate(dst, type == MPI_FLOAT ? 0 : half_on_gpu(type), src, n);
        return;
    }
    const float *s = host_view(src, n * sizeof(float));
    void *d = host_view(dst, n * es);
    if (type == MPI_FLOAT) {
        float *f = d;
        for (size_t i = 0; i < n; i++)
            f[i] += s[i];
    } else {
        uint16_t *hv = d;
        for (size_t i = 0; i < n; i++)
            hv[i] = narrow(type, widen(type, hv[i]) + s[i]);
    }
    host_done((void *)src, (void *)s, n * sizeof(float), 0);
    host_done(dst, d, n * es, 1);
}

int dti_nonfinite(const void *x, MPI_Datatype type, size_t n)
{
    size_t es = type_size(type);
    if (on_gpu(x, NULL))
        return dti_mixed_cuda_nonfinite(x, type == MPI_FLOAT ? 0 : half_on_gpu(type), n);
    const void *h = host_view(x, n * es);
    int bad = 0;
    if (type == MPI_FLOAT) {
        const float *f = h;
        for (size_t i = 0; i < n && !bad; i++)
            bad = !isfinite(f[i]);
    } else {   /* exponent bits all ones: inf or NaN */
        const uint16_t *hv = h, e = type == DT_HALF ? 0x7c00 : 0x7f80;
        for (size_t i = 0; i < n && !bad; i++)
            bad = (hv[i] & e) == e;
    }
    host_done((void *)x, (void *)h, n * es, 0);
    return bad;
}

/* ==== the step ==== */

int dti_scaler_decide(dti_run *r, int found, MPI_Comm comm, char *extra, size_t len)
{
    if (len)
        extra[0] = 0;
    if (r->cfg->precision != DT_FP16) {
        r->grad_scale = 1.0f;
        r->updates++;
        return 1;
    }
    int any = found ? 1 : 0;
    dt_allreduce(MPI_IN_PLACE, &any, 1, MPI_INT, MPI_MAX, comm);
    float before = r->scaler.scale;
    r->grad_scale = before;      /* what dti_master_step divides out */
    int apply = dt_scaler_update(&r->scaler, any);
    if (apply) {
        r->updates++;
        if (r->scaler.scale != before)
            snprintf(extra, len, "scale %g -> %g (%d clean steps)", before,
                     r->scaler.scale, r->cfg->scaler.window);
        else
            snprintf(extra, len, "scale %g", before);
    } else {
        snprintf(extra, len, "overflow: step skipped, scale %g -> %g", before,
                 r->scaler.scale);
    }
    return apply;
}

/* Gradients are unscaled into fp32 a slice at a time, so the fp32 copy of all the
 * gradients that mixed precision's memory formula leaves out is never made. On the GPU
 * the slice is larger (fewer launches) and kept for the thread's life: allocating it at
 * each call would cost a cudaMalloc and a cudaFree, and cudaFree waits for the whole
 * GPU. */
#define SLICE 16384
#define SLICE_GPU (1 << 20)

static float *gpu_slice(void)
{
    static _Thread_local float *slice;          /* never freed: the process's exit */
    if (slice == NULL)
        slice = dt_malloc(SLICE_GPU * sizeof(float), DT_CUDA);
    return slice;
}

void dti_master_step(dti_run *r, float *master, void *params, const void *grads,
                     float *state, size_t n)
{
    const dt_optim_config *o = &r->cfg->optim;
    MPI_Datatype type = dti_work_type(r);
    int S = dt_optim_state_per_param(o->kind);
    DT_REQUIRE(r->updates >= 1, "dti_master_step before dti_scaler_decide");
    float scale = r->cfg->precision == DT_FP16 ? r->grad_scale : 1.0f;
    if (type == MPI_FLOAT && scale == 1.0f) {
        dt_optim_step(o, r->updates, master, grads, state, n);
    } else {
        int gpu = dt_is_device_ptr(master);
        size_t slice = gpu ? SLICE_GPU : SLICE;
        float *g = gpu ? gpu_slice() : dt_malloc(SLICE * sizeof(float), DT_CPU);
        float inv = 1.0f / scale;
        size_t es = type_size(type);
        for (size_t i = 0; i < n; i += slice) {
            size_t len = n - i < slice ? n - i : slice;
            dti_to_float((const char *)grads + i * es, type, g, len, inv);
            dt_optim_step(o, r->updates, master + i, g, state ? state + i * S : NULL, len);
        }
        if (!gpu)
            dt_free(g);
    }
    if (params != NULL && params != (void *)master)
        dti_from_float(master, params, type, n);
}
