/* The whole MLP (see nn.h): its shapes, its initial weights, and forward and backward
 * through all its layers, built from the layers of layers.c.
 *
 * With L layers, hidden width H and activation act:
 *
 *     x[0] (B, in) --linear 0--> z[0] (B, H) --act--> x[1] (B, H) --linear 1--> z[1] ...
 *         ... x[L-1] --linear L-1--> z[L-1] (B, out) = x[L], the logits
 *
 * Backward runs the same chain from the end, with g the gradient of the loss:
 *
 *     g_z[L-1] = dlogits
 *     layer l:  dW_l += g_z[l]^T x[l],  db_l += column sums of g_z[l],
 *               g_x[l] = g_z[l] W_l,    g_z[l-1] = act'(z[l-1]) * g_x[l]
 *
 * which is why forward keeps every x[l] (for dW) and every z[l] (for act'). */
#include <math.h>
#include <stdlib.h>
#include "buf.h"
#include "nn.h"
#include "nn_internal.h"

/* ==== shapes ==== */

static void check_config(const dt_mlp_config *c)
{
    DT_REQUIRE(c != NULL, "MLP config is NULL");
    DT_REQUIRE(c->in > 0 && c->out > 0 && c->layers >= 1,
               "bad MLP shape: in=%d out=%d layers=%d (each at least 1)",
               c->in, c->out, c->layers);
    DT_REQUIRE(c->layers == 1 || c->hidden > 0,
               "bad MLP shape: %d layers need a hidden width of at least 1, not %d",
               c->layers, c->hidden);
    DT_REQUIRE(c->act == DT_RELU || c->act == DT_GELU, "unknown activation %d", (int)c->act);
}

static void check_layer(const dt_mlp_config *c, int l, int last)
{
    check_config(c);
    DT_REQUIRE(l >= 0 && l <= last, "layer %d of an MLP with %d layers", l, c->layers);
}

int dt_mlp_layer_in(const dt_mlp_config *c, int l)
{
    check_layer(c, l, c->layers - 1);
    return l == 0 ? c->in : c->hidden;
}

int dt_mlp_layer_out(const dt_mlp_config *c, int l)
{
    check_layer(c, l, c->layers - 1);
    return l == c->layers - 1 ? c->out : c->hidden;
}

size_t dt_mlp_layer_size(const dt_mlp_config *c, int l)
{
    size_t in = (size_t)dt_mlp_layer_in(c, l), out = (size_t)dt_mlp_layer_out(c, l);
    return out * in + out;
}

/* l may also be c->layers: the end of the last layer, dt_mlp_nparams. */
size_t dt_mlp_layer_offset(const dt_mlp_config *c, int l)
{
    check_layer(c, l, c->layers);
    size_t off = 0;
    for (int k = 0; k < l; k++)
        off += dt_mlp_layer_size(c, k);
    return off;
}

size_t dt_mlp_nparams(const dt_mlp_config *c)
{
    return dt_mlp_layer_offset(c, c->layers);
}

/* ==== initial weights ==== */

/* Each layer draws from its own generator, seeded from (seed, l) alone: a rank that
 * holds only layer 3 (pipeline) or a slice of it (FSDP, tensor parallel) can fill it,
 * or check it, without generating the layers before.
 *
 * The bounds keep the size of the signal steady through the depth (He et al., 2015). A
 * layer followed by ReLU draws from +-sqrt(6/in_l): its outputs then have variance 2x
 * that of its inputs, and ReLU, zeroing half of them, halves it back. The last layer
 * draws from +-1/sqrt(in_l) (PyTorch's nn.Linear default), so the first logits are
 * small and the first loss is near ln(classes). With 1/sqrt(in_l) everywhere the
 * signal would halve at every ReLU and a deep MLP would start very slowly. */
void dt_mlp_init(const dt_mlp_config *c, unsigned long long seed, float *params)
{
    check_config(c);
    DT_REQUIRE(params != NULL, "dt_mlp_init: params is NULL");
    DT_REQUIRE(!dt_is_device_ptr(params), "dt_mlp_init fills host memory; initialise a "
               "host copy and dt_memcpy it to the GPU");
    for (int l = 0; l < c->layers; l++) {
        int in = dt_mlp_layer_in(c, l), out = dt_mlp_layer_out(c, l);
        float *W = params + dt_mlp_layer_offset(c, l);     /* (out, in) */
        float *b = W + (size_t)out * in;                   /* (out) */
        double bound = (l < c->layers - 1 ? sqrt(6.0) : 1.0) / sqrt((double)in);
        uint64_t s = (uint64_t)seed ^ ((uint64_t)(l + 1) * 0xd1b54a32d192ed03ull);
        for (size_t i = 0; i < (size_t)out * in; i++)
            W[i] = (float)((2.0 * dti_nn_uniform(&s) - 1.0) * bound);
        for (int o = 0; o < out; o++)
            b[o] = 0.0f;
    }
}

/* ==== activations kept for backward ==== */

/* a->mem holds, in this order (floats, for batches of up to B rows):
 *   the two gradient buffers backward passes between layers, B*hidden each (none with
 *   one layer); x[0] (B, in); then for each layer z[l] (B, out_l) and, except after the
 *   last, x[l+1] (B, hidden). The logits x[L] are z[L-1] itself: no activation follows. */
static size_t scratch_floats(const dt_mlp_config *c, int B)
{
    return c->layers > 1 ? 2 * (size_t)B * c->hidden : 0;
}

void dt_mlp_acts_alloc(const dt_mlp_config *c, int B, int on_device, dt_mlp_acts *a)
{
    check_config(c);
    DT_REQUIRE(B >= 1, "dt_mlp_acts_alloc: batch of %d rows (at least 1)", B);
    DT_REQUIRE(a != NULL, "dt_mlp_acts_alloc: a is NULL");
    int L = c->layers;
    size_t total = scratch_floats(c, B) + (size_t)B * c->in;
    for (int l = 0; l < L; l++)
        total += (size_t)B * dt_mlp_layer_out(c, l) * (l < L - 1 ? 2 : 1);
    a->B = B;
    a->on_device = on_device ? 1 : 0;
    a->mem = dt_malloc(total * sizeof(float), on_device ? DT_CUDA : DT_CPU);
    a->x = malloc((size_t)(L + 1) * sizeof *a->x);
    a->z = malloc((size_t)L * sizeof *a->z);
    DT_REQUIRE(a->x && a->z, "out of host memory");
    float *p = a->mem + scratch_floats(c, B);
    a->x[0] = p;
    p += (size_t)B * c->in;
    for (int l = 0; l < L; l++) {
        size_t n = (size_t)B * dt_mlp_layer_out(c, l);
        a->z[l] = p;
        p += n;
        if (l < L - 1) {
            a->x[l + 1] = p;
            p += n;
        }
    }
    a->x[L] = a->z[L - 1];
}

void dt_mlp_acts_free(dt_mlp_acts *a)
{
    if (a == NULL)
        return;
    dt_free(a->mem);
    free(a->x);
    free(a->z);
    a->mem = NULL;
    a->x = a->z = NULL;
    a->B = 0;
}

static void check_acts(const char *fn, const dt_mlp_config *c, const dt_mlp_acts *a, int B)
{
    DT_REQUIRE(a != NULL && a->mem != NULL, "%s: activations not allocated "
               "(dt_mlp_acts_alloc)", fn);
    DT_REQUIRE(B >= 0 && B <= a->B, "%s: batch of %d rows, activations made for up to %d",
               fn, B, a->B);
    DT_REQUIRE(a->x[0] == a->mem + scratch_floats(c, a->B),
               "%s: activations allocated for another model shape", fn);
}

/* ==== forward and backward ==== */

/* x may be on the host even when a is on the GPU: it is copied into a->x[0], counted
 * as the batch going up in the device books (buf.h). */
const float *dt_mlp_forward(const dt_mlp_config *c, const float *params, const float *x,
                            int B, dt_mlp_acts *a)
{
    check_config(c);
    check_acts("dt_mlp_forward", c, a, B);
    DT_REQUIRE(params && (x || B == 0), "dt_mlp_forward: params or x is NULL");
    int L = c->layers;
    dt_memcpy_input(a->x[0], x, (size_t)B * c->in * sizeof(float));
    for (int l = 0; l < L; l++) {
        int in = dt_mlp_layer_in(c, l), out = dt_mlp_layer_out(c, l);
        const float *W = params + dt_mlp_layer_offset(c, l);  /* (out, in) */
        const float *b = W + (size_t)out * in;                /* (out) */
        dt_linear_forward(a->x[l], W, b, a->z[l], B, in, out);
        if (l < L - 1)
            dt_act_forward(c->act, a->z[l], a->x[l + 1], (size_t)B * out);
    }
    return a->x[L];
}

void dt_mlp_backward(const dt_mlp_config *c, const float *params, dt_mlp_acts *a,
                     const float *dlogits, int B, float *grads,
                     void (*layer_done)(int l, void *ctx), void *ctx)
{
    check_config(c);
    check_acts("dt_mlp_backward", c, a, B);
    DT_REQUIRE(params && grads && (dlogits || B == 0),
               "dt_mlp_backward: params, dlogits or grads is NULL");
    /* two buffers in turn: layer l reads g_z[l] from one and writes g_x[l] into the
     * other, which act' then turns into g_z[l-1] in place */
    float *g[2] = { a->mem, a->mem + (size_t)a->B * c->hidden };
    const float *dy = dlogits;                      /* g_z[l] (B, out_l) */
    for (int l = c->layers - 1; l >= 0; l--) {
        int in = dt_mlp_layer_in(c, l), out = dt_mlp_layer_out(c, l);
        size_t off = dt_mlp_layer_offset(c, l);
        float *dW = grads + off;                    /* (out, in) */
        float *db = dW + (size_t)out * in;          /* (out) */
        float *dx = l > 0 ? g[l % 2] : NULL;        /* g_x[l] (B, in); none for the input */
        dt_linear_backward(a->x[l], params + off, dy, dx, dW, db, B, in, out);
        if (layer_done)
            layer_done(l, ctx);
        if (l > 0) {
            dt_act_backward(c->act, a->z[l - 1], dx, dx, (size_t)B * in);
            dy = dx;
        }
    }
}
