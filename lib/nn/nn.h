/* The small model every parallel mode trains: a multi-layer perceptron with ReLU or
 * GELU between its linear layers and softmax cross-entropy on top, its forward and
 * backward written by hand; the optimizers (SGD with momentum, Adam); and the data
 * (a synthetic classification set made from a seed, or MNIST-format IDX files).
 *
 * Parameters, gradients and optimizer state are flat float arrays the caller owns:
 * layer l's weight W_l (out_l x in_l, row-major) and then its bias b_l (out_l), layer
 * after layer. Flat arrays are what the parallel modes cut up: DDP buckets them, FSDP
 * shards them, the optimizer updates any slice of them.
 *
 * Every function works on host memory with plain loops, and on device memory (all its
 * pointers on the GPU) with cuBLAS and kernels; the CPU path is the reference. Shapes
 * are written as (rows, cols): x is (B, in), W is (out, in), y is (B, out). */
#ifndef DT_NN_H
#define DT_NN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== the model's shape ==== */

typedef enum { DT_RELU = 0, DT_GELU = 1 } dt_act;

typedef struct {
    int in;        /* input features */
    int hidden;    /* width of every hidden layer */
    int out;       /* classes */
    int layers;    /* linear layers, 1 or more (1: softmax regression, no activation) */
    dt_act act;    /* between linear layers; none after the last */
} dt_mlp_config;

int dt_mlp_layer_in(const dt_mlp_config *c, int l);      /* in_l: c->in for l = 0, else hidden */
int dt_mlp_layer_out(const dt_mlp_config *c, int l);     /* out_l: c->out for the last, else hidden */
size_t dt_mlp_layer_size(const dt_mlp_config *c, int l); /* out_l*in_l + out_l floats */
size_t dt_mlp_layer_offset(const dt_mlp_config *c, int l);  /* where layer l starts;
                                                               l = layers: nparams */
size_t dt_mlp_nparams(const dt_mlp_config *c);

/* Fills params (host) with the initial weights: W uniform in +-sqrt(6/in_l) for layers
 * followed by an activation (He), +-1/sqrt(in_l) for the last layer; b zero.
 * Layer l's values depend only on (seed, l), never on how the model is cut up, so every
 * rank and every mode starts from the same weights. */
void dt_mlp_init(const dt_mlp_config *c, unsigned long long seed, float *params);

/* ==== the operations (host or device pointers, all alike) ==== */

/* y = x W^T + b: x (B, in), W (out, in), b (out) or NULL, y (B, out). */
void dt_linear_forward(const float *x, const float *W, const float *b, float *y,
                       int B, int in, int out);
/* Given dy (B, out): dW += dy^T x, db += column sums of dy (db may be NULL),
 * dx = dy W (dx may be NULL; overwritten, not accumulated). Gradients accumulate so that
 * micro-batches add up; zero them before a step. dW NULL (and db NULL; x may be NULL
 * then) computes dx alone, and a later call with dx NULL (W may be NULL then) the
 * weights' part: the same products as one call, so the same bits (zero-bubble
 * pipelines split them so). */
void dt_linear_backward(const float *x, const float *W, const float *dy,
                        float *dx, float *dW, float *db, int B, int in, int out);
/* Mixed precision's products on the GPU. In the fp16 modes every input of a product
 * holds fp16 values (lib/parallel rounds the weights and activations before each one);
 * on = 1 lets this thread's products on the GPU run on the tensor cores, as autocast's
 * do: fp16 inputs, fp32 sums (cuBLAS's CUBLAS_COMPUTE_32F_FAST_16F), where fp32's
 * products are many times slower. Exact for such inputs (the batch, the first layer's
 * input, is rounded to fp16 there, as autocast rounds it); the sums come in another
 * order, so the result equals the fp32 product to rounding. The host's products, and
 * fp32 training (on = 0, the default), are unchanged. Returns the setting it replaced. */
int dt_nn_half_products(int on);
/* y = act(x) for n values; dx = act'(x) * dy. GELU is the tanh approximation. Both
 * work in place (y == x, dx == dy). */
void dt_act_forward(dt_act a, const float *x, float *y, size_t n);
void dt_act_backward(dt_act a, const float *x, const float *dy, float *dx, size_t n);
/* Softmax cross-entropy of logits (B, C) against labels (B). Returns the SUM of the B
 * losses; writes dlogits = scale * (softmax - onehot), scale usually 1/global batch, so
 * that gradients computed on shards of a batch add up to the whole batch's. dlogits may
 * be NULL (the loss alone) or logits itself. */
float dt_xent(const float *logits, const int *labels, int B, int C, float scale,
              float *dlogits);

/* ==== the CPU's matrix products (blas.c) ====
 * On the host, dt_linear_forward and dt_linear_backward multiply with OpenBLAS's sgemm,
 * or with the plain loops of layers.c, the reference: DT_BLAS=0 in the environment, or
 * dt_set_blas(0). sgemm adds in another order than the loops, so the two agree to float
 * rounding, not bit for bit; each is the same from run to run. Threads one product may
 * use: DT_BLAS_THREADS, else OPENBLAS_NUM_THREADS, else the cores this process may run
 * on divided by the ranks on its host (dt_init tells it), at least 1. */
int dt_blas(void);                      /* 1: sgemm, 0: the loops */
void dt_set_blas(int on);
int dt_blas_threads(void);
void dt_set_blas_threads(int n);
int dt_cores(void);                     /* the cores this process may run on */
void dt_blas_setup(int ranks_on_host);  /* dt_init calls it */
/* NULL, or the sentence that says what is wrong with DT_BLAS or DT_BLAS_THREADS */
const char *dt_blas_env_error(void);
/* "OpenBLAS sgemm, 1 thread a rank (cores / ranks on this host: 2 cores, 4 ranks on this
 * host)" or "the plain loops (DT_BLAS=0), the reference" */
void dt_blas_describe(char *out, size_t len);

/* ==== the whole model ==== */

/* What forward keeps for backward, for batches of up to B rows: each layer's input and
 * pre-activation, plus backward's two (B, hidden) scratch buffers, in one allocation on
 * the host (on_device 0) or the GPU (1). */
typedef struct {
    int B;
    int on_device;
    float *mem;          /* one allocation */
    float **x;           /* x[l]: layer l's input (B, in_l); x[layers] = logits */
    float **z;           /* z[l]: layer l's pre-activation (B, out_l) */
} dt_mlp_acts;

void dt_mlp_acts_alloc(const dt_mlp_config *c, int B, int on_device, dt_mlp_acts *a);
void dt_mlp_acts_free(dt_mlp_acts *a);

/* Forward of B rows of input x (B, in): copies x into a->x[0] (so x may be on the host
 * while a is on the GPU), fills a and returns the logits (B, out), which live in a. */
const float *dt_mlp_forward(const dt_mlp_config *c, const float *params, const float *x,
                            int B, dt_mlp_acts *a);

/* Backward from dlogits (B, out), accumulating into grads (layout of params). Goes
 * through the layers last to first; after layer l's gradients are complete it calls
 * layer_done(l, ctx) if given: DDP starts communicating a bucket from there. */
void dt_mlp_backward(const dt_mlp_config *c, const float *params, dt_mlp_acts *a,
                     const float *dlogits, int B, float *grads,
                     void (*layer_done)(int l, void *ctx), void *ctx);

/* ==== optimizers ==== */

typedef enum { DT_SGD = 0, DT_ADAM = 1 } dt_optim_kind;

typedef struct {
    dt_optim_kind kind;
    float lr;
    float momentum;              /* SGD: v = momentum * v + g; p -= lr * v */
    float beta1, beta2, eps;     /* Adam, with bias correction */
} dt_optim_config;

/* Optimizer state floats per parameter: 1 for SGD (velocity), 2 for Adam (m, v). */
int dt_optim_state_per_param(dt_optim_kind kind);

/* One update of n parameters from their gradients; step counts from 1 (Adam's bias
 * correction). state holds S = dt_optim_state_per_param floats per parameter, zero
 * before step 1, interleaved: parameter i's at state[i*S .. i*S+S-1] (Adam: m, then v).
 * Element-wise, so it updates any slice of the model alike, parameters [a, b) with
 * state [a*S, b*S): what ZeRO needs. Plain SGD (momentum 0) may pass state NULL. */
void dt_optim_step(const dt_optim_config *o, int step, float *params, const float *grads,
                   float *state, size_t n);

/* ==== data ==== */

typedef struct {
    int n;           /* examples */
    int features;
    int classes;
    float *x;        /* (n, features), host */
    int *y;          /* (n) labels in 0..classes-1 */
} dt_dataset;

/* A classification set drawn from the seed: each class a random centre, each example
 * its class's centre plus noise, so a small MLP can learn it. Same seed, same set. */
void dt_data_synthetic(dt_dataset *d, int n, int features, int classes,
                       unsigned long long seed);

/* MNIST-format IDX files: images (magic 0x00000803, n, rows, cols, bytes) and labels
 * (magic 0x00000801, n, bytes); pixels scaled to [0, 1]. Returns 0, or -1 with a
 * sentence in err for a missing, truncated or malformed file (d is then empty). */
int dt_data_load_idx(dt_dataset *d, const char *images, const char *labels,
                     char *err, size_t errlen);

void dt_data_free(dt_dataset *d);

/* Rows [first, first + count) of the global batch of B rows used at step s: global
 * batch s is examples s*B .. s*B+B-1, wrapping around the set. A data-parallel rank
 * takes its share of the global batch with first and count. x (count, features) and
 * y (count) on the host. */
void dt_data_batch(const dt_dataset *d, int step, int B, int first, int count,
                   float *x, int *y);

#ifdef __cplusplus
}
#endif

#endif /* DT_NN_H */
