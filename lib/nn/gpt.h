/* The second model: a small decoder-only transformer (GPT), beside the MLP of nn.h,
 * its forward and backward written out by hand, and the text it trains on.
 *
 *   tokens (B, T) --wte[tok] + wpe[t]--> x (B, T, C)
 *   L blocks, each:   x = x + attn(ln1(x))      causal multi-head self-attention
 *                     x = x + mlp(ln2(x))       C -> 4C, GELU, -> C
 *   lnf(x) (B, T, C) --times wte^T (the head, tied to the embedding)--> logits (B, T, V)
 *   cross-entropy of logits[b, t] against tokens[b, t + 1]
 *
 * Shapes: B sequences of T positions (T <= seq), C = embed, H heads of d = C / H, F = 4C
 * the MLP's width, V the vocabulary (256: a token is a byte). A (B, T, C) array is
 * row-major with row b*T + t; head h of q, k, v is columns h*d .. h*d + d - 1.
 *
 * Parameters, gradients and optimizer state are flat float arrays the caller owns, cut
 * into units the parallel modes share out (a pipeline stage takes whole units, FSDP
 * gathers one unit at a time, DDP buckets them in reverse unit order):
 *   unit 0        the embeddings: wte (V, C), then wpe (seq, C)
 *   unit 1 + l    block l: dt_gpt_block's tensors, in its order
 *   unit L + 1    the final LayerNorm: lnf_w (C), lnf_b (C)
 *
 * Every operation here works on host memory with plain loops (attention's products and
 * the linear layers through OpenBLAS's sgemm unless DT_BLAS=0: see nn.h), the
 * reference, and on device memory (all of a call's pointers on the GPU, the tokens
 * too) with the kernels of gpt_kernels.cu and cuBLAS; so do the whole model's forward
 * and backward, with activations from dt_gpt_acts_alloc_on. The initial weights,
 * sampling and ring attention's blocks (ringattn.c) are the host's alone. */
#ifndef DT_GPT_H
#define DT_GPT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== the shape ==== */

typedef struct {
    int vocab;     /* V: token values 0 .. V-1 */
    int seq;       /* the longest sequence the model reads: wpe's rows */
    int embed;     /* C, a multiple of heads */
    int heads;     /* H */
    int layers;    /* L blocks, 1 or more */
} dt_gpt_config;

/* NULL, or the sentence that says what is wrong with c ("the width 100 is not a
 * multiple of 3 heads"). */
const char *dt_gpt_config_error(const dt_gpt_config *c);

/* One block's tensors, pointers into a flat array. The query, key and value
 * projections are one linear layer, wqkv: its rows are q's, then k's, then v's (as
 * GPT-2's c_attn). A block cut for tensor parallelism holds `heads` of the H heads
 * (their rows of each third of wqkv and bqkv; their columns of wo) and `ffn` of the F
 * columns of the MLP (rows of w1 and b1, columns of w2); LayerNorms and the biases bo,
 * b2 whole. Whole: heads = H, ffn = F. */
typedef struct {
    float *ln1_w, *ln1_b;            /* (C), (C) */
    float *wqkv, *bqkv;              /* (3 hd, C), (3 hd): hd = heads * d */
    float *wo, *bo;                  /* (C, hd), (C) */
    float *ln2_w, *ln2_b;            /* (C), (C) */
    float *w1, *b1;                  /* (ffn, C), (ffn) */
    float *w2, *b2;                  /* (C, ffn), (C) */
} dt_gpt_block;

/* Floats of one block holding `heads` heads and `ffn` MLP columns: its attention part
 * (ln1 .. ln2_b) then its MLP (w1 .. b2). */
size_t dt_gpt_block_size(const dt_gpt_config *c, int heads, int ffn);
size_t dt_gpt_attn_size(const dt_gpt_config *c, int heads);
size_t dt_gpt_mlp_size(const dt_gpt_config *c, int ffn);
/* Points p's tensors into base (a block's first float), laid out as above. */
void dt_gpt_block_at(const dt_gpt_config *c, int heads, int ffn, float *base,
                     dt_gpt_block *p);
/* Points only p's MLP tensors (w1, b1, w2, b2) into base, an MLP's first float: a
 * block's MLP, or an expert of train --mode moe (an MLP of its own, in this layout) */
void dt_gpt_mlp_at(const dt_gpt_config *c, int ffn, float *base, dt_gpt_block *p);

int dt_gpt_units(const dt_gpt_config *c);                     /* L + 2 */
size_t dt_gpt_unit_size(const dt_gpt_config *c, int u);       /* floats of unit u, whole */
size_t dt_gpt_unit_offset(const dt_gpt_config *c, int u);     /* u = units: nparams */
size_t dt_gpt_nparams(const dt_gpt_config *c);

/* Fills params (host) with the initial weights, as GPT-2 draws them but uniform (the
 * same standard deviation, from integer arithmetic, so the same on every machine):
 * wte, wpe and the block's matrices with std 0.02, wo and w2 (the projections into the
 * residual stream) with 0.02 / sqrt(2L); biases 0; LayerNorm weights 1, biases 0. Each
 * tensor's values depend only on (seed, unit, tensor), never on how the model is cut. */
void dt_gpt_init(const dt_gpt_config *c, unsigned long long seed, float *params);
/* Fills the whole MLP p points at (dt_gpt_mlp_at, ffn 4C) as dt_gpt_init fills block
 * l's, for e = 0; e > 0 draws other values from (seed, block, e): the experts of a
 * mixture-of-experts block, expert 0 the dense block's MLP. */
void dt_gpt_mlp_init(const dt_gpt_config *c, unsigned long long seed, int l, int e,
                     const dt_gpt_block *p);

/* ==== the operations (host or device pointers, all alike) ==== */

/* out[b,t,:] = wte[tok[b,t], :] + wpe[p_t, :], p_t = pos[t] (pos NULL: t; context
 * parallelism's rows are positions of the whole sequence). backward: dwte[tok[b,t], :]
 * += dout[b,t,:], dwpe[p_t, :] += dout[b,t,:] (accumulating, rows in order b, t). A
 * token outside 0 .. V-1 stops the program with a message (on the GPU, forward waits
 * for the one int that says so). */
void dt_embed_forward(const int *tok, const float *wte, const float *wpe, const int *pos,
                      float *out, int B, int T, int C, int V);
void dt_embed_backward(const int *tok, const float *dout, const int *pos, float *dwte,
                       float *dwpe, int B, int T, int C);

/* LayerNorm of N rows of C: y = (x - mean) * rstd * w + b, rstd = 1/sqrt(var + 1e-5),
 * var the biased variance; keeps mean (N) and rstd (N) for backward. backward: dw, db
 * accumulate; dx ACCUMULATES too (+=: the input is the residual stream, whose gradient
 * already holds the skip path's). Not in place. Either part alone, the same bits: dx
 * NULL, the weights' only (w may be NULL); dw and db NULL, dx only. */
void dt_layernorm_forward(const float *x, const float *w, const float *b, float *y,
                          float *mean, float *rstd, int N, int C);
void dt_layernorm_backward(const float *x, const float *w, const float *mean,
                           const float *rstd, const float *dy, float *dx, float *dw,
                           float *db, int N, int C);

/* Causal attention of H heads of d. qkv (B, T, 3 H d) holds q, k and v side by side
 * (columns 0.., Hd.., 2Hd..; head h at h*d within each); y (B, T, H d); att
 * (B, H, T, T):
 *   att[b,h,i,j] = softmax_j (q_i . k_j / sqrt(d)) over j <= i, 0 for j > i
 *   y[b,i, head h] = sum_j att[b,h,i,j] v_j
 * backward: dqkv (B, T, 3 H d) overwritten; datt (B, H, T, T) is scratch. */
void dt_attention_forward(const float *qkv, float *att, float *y, int B, int T, int H,
                          int d);
void dt_attention_backward(const float *qkv, const float *att, const float *dy,
                           float *datt, float *dqkv, int B, int T, int H, int d);

/* ==== attention a block of keys at a time (context parallelism, lib/nn/ringattn.c) ====
 * One head's causal attention computed against the keys and values a block at a time,
 * in any order, as ring attention passes blocks around the ranks: the queries' rows
 * keep a running maximum m, a running sum l of exp(score - m) and an unnormalised
 * output o, and each block rescales what came before by exp(m_old - m_new) (the online
 * softmax of Milakov and Gimelshein, FlashAttention's). Positions are global: query row
 * i is position q0 + i, key row j position k0 + j, and a key after a query is masked, so
 * a block wholly in a query block's future costs nothing. q and dq have rows ldq floats
 * apart, k, v and their gradients ldk, o and dout ldo (d columns each).
 *
 * block_forward: before the first block m = -INFINITY, l = 0, o = 0 (dt_attn_block_init
 * sets them); finish then divides o by l and writes lse = m + log l (Tq), all backward
 * needs of the forward besides o. Each query row must have met a key (its own position
 * at least) before finish. scratch: Tk floats (on the GPU: unused, may be NULL).
 * block_forward and block_backward run on device buffers too (ringattn_kernels.cu);
 * init, finish and delta on the host only, so far. */
void dt_attn_block_init(float *m, float *l, float *o, int ldo, int Tq, int d);
void dt_attn_block_forward(const float *q, int ldq, const float *k, const float *v,
                           int ldk, int Tq, int Tk, int q0, int k0, int d, float *m,
                           float *l, float *o, int ldo, float *scratch);
void dt_attn_block_finish(const float *m, const float *l, float *o, int ldo, float *lse,
                          int Tq, int d);
/* Backward against one block: with P = exp(score - lse) and D = rowsum(dout o) (Tq,
 * dt_attn_block_delta), adds to dv P^T dout, to dq scale dS k and to dk scale dS^T q,
 * dS = P (dout v^T - D). Summed over every block, in any order, they are the gradients
 * of the whole attention (to rounding). */
void dt_attn_block_delta(const float *o, const float *dout, int ldo, int Tq, int d,
                         float *D);
void dt_attn_block_backward(const float *q, int ldq, const float *k, const float *v,
                            int ldk, int Tq, int Tk, int q0, int k0, int d, const float *lse,
                            const float *D, const float *dout, int ldo, float *dq,
                            float *dk, float *dv);

/* Zig-zag: a sequence cut into 2C chunks of equal length, rank r of C holds chunks r and
 * 2C-1-r, so that each rank has as many causal (query, key) pairs to compute as any other
 * (a plain cut into C chunks gives the last rank about 2C-1 times the first's pairs).
 * Writes the two chunks' first positions for a sequence of T (a multiple of
 * 2C). dt_cp_pairs: the causal pairs queries [a, a+n) make with keys [b, b+n). */
void dt_cp_zigzag(int r, int C, int T, int *first, int *second);
long dt_cp_pairs(int a, int b, int n);

/* ==== a block, whole or cut ==== */

/* What a block's forward keeps for backward, for B x T rows (N = B*T): pointers into
 * the model's activations (dt_gpt_acts). With sequence parallelism (below) the rows
 * of the residual stream's region, x to ln1_rstd and x2 to ln2_rstd, are this rank's
 * n = B x (p1 - p0) only. */
typedef struct {
    float *x;                        /* (N, C) the block's input, the residual stream */
    float *ln1, *ln1_mean, *ln1_rstd;   /* (N, C), (N), (N) */
    float *qkv;                      /* (N, 3 hd) */
    float *att;                      /* (B, heads, T, T) */
    float *y;                        /* (N, hd) the heads' outputs side by side */
    float *x2;                       /* (N, C) x + attention: the stream between */
    float *ln2, *ln2_mean, *ln2_rstd;
    float *h;                        /* (N, ffn) before GELU */
    float *g;                        /* (N, ffn) after GELU */
    float *wide, *part;              /* sequence parallelism: (N, C) each, scratch every
                                        block shares (NULL otherwise): the rows gathered
                                        from every rank, the partial sums scattered */
    /* with the cut's split (NULL otherwise), the block's own: what its weights'
     * products read, which the split backward's B leaves for W (below) */
    float *dmlp, *dattn;             /* (N, C) the gradients of the MLP's and of
                                        attention's outputs (sp: every rank's rows) */
    float *dh;                       /* (N, ffn) that of h, w1's output */
    float *dqkv;                     /* (N, 3 hd) that of qkv */
    float *dln1, *dln2;              /* (n, C) those of ln1's and ln2's outputs, summed */
    float *in1, *in2;                /* sp: ln1's and ln2's outputs gathered, (N, C) */
} dt_gpt_block_acts;

/* Backward's scratch, shared by every block. */
typedef struct {
    float *dln;                      /* (N, C) the gradient of a LayerNorm's output */
    float *dy;                       /* (N, hd) that of attention's output */
    float *dqkv;                     /* (N, 3 hd) */
    float *dh;                       /* (N, ffn) */
    float *datt;                     /* (B, heads, T, T) */
    float *wide;                     /* sequence parallelism: (N, C) gathered rows */
    float *mine;                     /* and (n, C): this rank's rows of dln */
} dt_gpt_scratch;

/* A cut block's two sums (tensor parallelism's operators; NULL in a whole block):
 * sum(x, n, ctx) replaces x (n floats) by its sum over the ranks that share the block.
 * Forward calls it on the partial outputs of wo and w2 (g, before the bias and the
 * residual); backward on the partial gradients of ln1's and ln2's outputs (f). bias 1:
 * this rank adds bo and b2 (one rank of those that share a block, or a whole block).
 *
 * Sequence parallelism (Korthikanti et al., 2022; sp > 1, the ranks that share the
 * block, this one sp_rank of them): outside attention and the MLP, where tensor
 * parallelism has every rank compute the same LayerNorms and residual adds on all N
 * rows, each rank keeps positions [p0, p1) of every sequence (dt_gpt_sp_positions),
 * n = B (p1 - p0) rows: the residual stream, the LayerNorms' inputs, outputs, means and
 * deviations, a stage's output and the stream's gradient. The sum after wo and after
 * w2 becomes a reduce-scatter, scatter(all, mine, B, T, C, ctx): all (N, C) summed over
 * the ranks, this rank's rows to mine (n, C); the input of wqkv and of w1, an allgather,
 * gather(mine, all, B, T, C, ctx): every rank's rows (n, C) into all (N, C). Backward
 * runs their transposes (a gather before wo's and w2's backward, a scatter after
 * wqkv's and w1's), and gathers ln1's and ln2's outputs again rather than keep them
 * whole. The same bytes as the two allreduces (a ring allreduce is a reduce-scatter
 * and an allgather), the region's activations divided by sp. sum is not called. The
 * embeddings compute all rows and keep this rank's (their backward gathers the
 * stream's gradient first); the final LayerNorm normalises this rank's rows and
 * gathers them for the head. The LayerNorms' gradients (ln1, ln2, lnf) are then this
 * rank's rows' part only: the caller sums them over the ranks (the other gradients are
 * as tensor parallelism's).
 *
 * Context parallelism (cp > 1, the ranks that share a sequence; Liu et al.'s ring
 * attention): every row-wise operation runs on this rank's T positions of each
 * sequence (T, the length the calls are given, is this rank's share), whose places in
 * the whole sequence are pos[0 .. T-1] (the embeddings add wpe's rows at those
 * places). Attention alone needs the others' keys and values: attend(qkv, y, lse, B,
 * T, H, d, ctx) computes y (B*T, hd) from qkv (B*T, 3hd) of this rank's rows, the
 * others' keys and values coming round the ranks, and keeps lse (B, H, T), the log of
 * each query row's softmax sum, in place of the probabilities (the block's att then
 * holds B*H*T floats); attend_backward(qkv, y, lse, dy, dqkv, ...) writes dqkv (B*T,
 * 3hd) from dy (B*T, hd), the keys' and values' gradients summed round the ranks to
 * their owners. Every weight's gradient is this rank's positions' part: the caller
 * sums them over the cp ranks, as over data-parallel replicas. */
typedef struct {
    int heads, ffn;
    int bias;
    void (*sum)(float *x, size_t n, void *ctx);
    void *ctx;
    int recompute;          /* what backward computes again rather than keep: below */
    int sp, sp_rank;        /* sequence parallelism: ranks and rank; sp 0 or 1: off */
    void (*gather)(const float *mine, float *all, int B, int T, int C, void *ctx);
    void (*scatter)(const float *all, float *mine, int B, int T, int C, void *ctx);
    int cp;                 /* context parallelism: ranks; 0 or 1: off */
    const int *pos;         /* with cp: the positions of this rank's rows (T of them) */
    void (*attend)(const float *qkv, float *y, float *lse, int B, int T, int H, int d,
                   void *ctx);
    void (*attend_backward)(const float *qkv, const float *y, const float *lse,
                            const float *dy, float *dqkv, int B, int T, int H, int d,
                            void *ctx);
    int split;              /* 1: the activations keep what zero bubble's W reads */
} dt_gpt_cut;

/* Sequence parallelism's positions: rank r of n holds [*p0, *p1) of every sequence of
 * T, as dt_chunk_bounds cuts T (the first T % n ranks one more) */
void dt_gpt_sp_positions(int T, int n, int r, int *p0, int *p1);

/* Activation recomputation (a cut's recompute; the activations must be allocated with
 * the same cut). DT_GPT_KEEP: forward keeps everything backward reads. Full: each block
 * keeps only its input x (N, C), its other activations live in one block's worth that
 * every block shares, and backward runs the block's forward again (with its sums) before
 * its backward. Selective (Korthikanti et al.): every block keeps all but attention's
 * probabilities (B, heads, T, T), which one buffer shared by the blocks holds, and
 * backward recomputes them from q and k. Either way backward sees the same numbers as
 * without, so the gradients are the same bits. */
enum { DT_GPT_KEEP = 0, DT_GPT_RECOMPUTE_FULL = 1, DT_GPT_RECOMPUTE_SELECTIVE = 2 };

/* A whole block's cut (every head, every MLP column, its biases, no sums) with the
 * recomputation given: what NULL stands for, with DT_GPT_KEEP */
dt_gpt_cut dt_gpt_whole(const dt_gpt_config *c, int recompute);

/* In a cut block every rank computes the whole gradient of the tensors it holds whole
 * (the LayerNorms, bo, b2; in a cut model wte, wpe and lnf too), the same bits on every
 * rank, bo's and b2's on the rank that does not add them too: a tensor-parallel mode
 * must not sum those over its ranks.
 *
 * Forward of one block on a->x (N, C): fills a, writes the block's output to out
 * (N, C; may be the next block's a->x, not a->x itself). */
void dt_gpt_block_forward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                          const dt_gpt_block *p, dt_gpt_block_acts *a, float *out,
                          int B, int T);
/* Its two halves, one after the other: attention (a->x to a->x2), the MLP (a->x2 to
 * out). Mixture of experts runs the first and puts its experts in place of the second. */
void dt_gpt_block_attn_forward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                               const dt_gpt_block *p, dt_gpt_block_acts *a, int B, int T);
void dt_gpt_block_mlp_forward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                              const dt_gpt_block *p, dt_gpt_block_acts *a, float *out,
                              int B, int T);
/* Backward: dx (N, C) holds the gradient of the block's output on entry and that of its
 * input on return (in place: the residual stream's gradient). Gradients accumulate into
 * g (the block's layout, as p). */
void dt_gpt_block_backward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                           const dt_gpt_block *p, const dt_gpt_block_acts *a,
                           dt_gpt_scratch *s, float *dx, const dt_gpt_block *g, int B,
                           int T);
/* Its halves, the MLP's first (dx from the gradient of out to that of a->x2), then
 * attention's (to that of a->x). */
void dt_gpt_block_mlp_backward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                               const dt_gpt_block *p, const dt_gpt_block_acts *a,
                               dt_gpt_scratch *s, float *dx, const dt_gpt_block *g, int B,
                               int T);
void dt_gpt_block_attn_backward(const dt_gpt_config *c, const dt_gpt_cut *cut,
                                const dt_gpt_block *p, const dt_gpt_block_acts *a,
                                dt_gpt_scratch *s, float *dx, const dt_gpt_block *g, int B,
                                int T);

/* The MLP alone on n rows x (n, C) (p's w1, b1, w2, b2; F columns): h = x w1^T + b1
 * (n, F), g = GELU(h), y = g w2^T, + b2 when bias is 1 (n, C). Backward from dy (n, C):
 * dh (n, F) scratch, dx (n, C) written (not added to), the gradients added to gr's w1,
 * b1, w2, b2. */
void dt_gpt_mlp_forward(const dt_gpt_block *p, const float *x, float *h, float *g,
                        float *y, int n, int C, int F, int bias);
void dt_gpt_mlp_backward(const dt_gpt_block *p, const float *x, const float *h,
                         const float *g, const float *dy, float *dh, float *dx,
                         const dt_gpt_block *gr, int n, int C, int F);

/* ==== a unit's parts ====
 * What the forward and backward of a unit tell a caller's callback done(u, part, ctx)
 * after each part of unit u (a trace records one compute event a part: the viewer's
 * "F b1 attn"). A block runs in two parts, attention (its x to x2) and the MLP (x2 to
 * its output): forward DT_GPT_ATTN then DT_GPT_MLP, backward DT_GPT_MLP then
 * DT_GPT_ATTN, with full recomputation first DT_GPT_RECOMPUTE (the block's forward run
 * again). The embeddings and the final unit run in one part, DT_GPT_UNIT. The unit's
 * work (its output, or its gradients) is complete after its last part,
 * dt_gpt_part_last. */
enum { DT_GPT_UNIT = 0, DT_GPT_ATTN = 1, DT_GPT_MLP = 2, DT_GPT_RECOMPUTE = 3 };
typedef void (*dt_gpt_part_fn)(int u, int part, void *ctx);

/* 1 when part ends its unit's forward (backward 0) or its backward (backward 1) */
static inline int dt_gpt_part_last(int part, int backward)
{
    return part == DT_GPT_UNIT || part == (backward ? DT_GPT_ATTN : DT_GPT_MLP);
}
/* "attn", "mlp", "recompute"; NULL for DT_GPT_UNIT (and anything else) */
const char *dt_gpt_part_name(int part);

/* ==== the whole model ==== */

/* Everything forward keeps for backward and backward's scratch, for up to B sequences
 * of up to T positions, in one allocation, on the host or the GPU (on_device). */
typedef struct {
    int B, T;
    int u0, u1;                      /* the units they are for (a stage; 0, L+2: all) */
    float *mem;
    size_t floats;                   /* in mem */
    int on_device;                   /* 1: mem is on this rank's GPU */
    dt_gpt_block_acts *blk;          /* [L]; a stage's blocks only (others NULL) */
    float *out;                      /* (N, C) the last block's output; a stage's output */
    float *lnf, *lnf_mean, *lnf_rstd;   /* with the final unit only */
    float *logits;                   /* (N, V) */
    float *dres;                     /* (N, C) backward: the residual stream's gradient */
    dt_gpt_scratch s;
    int split;                       /* the cut's split: then, with the final unit, */
    float *dlogits, *dlnf;           /* (N, V) the head's dlogits, (n, C) lnf's dy; */
    float *demb;                     /* with unit 0 and sp, (N, C) the embeddings' dy */
} dt_gpt_acts;

/* For the whole model (cut NULL) or every block cut alike (cut's heads and ffn), on
 * the host; _on: on the host (on_device 0) or this rank's GPU (1; dt_malloc(DT_CUDA)),
 * zeroed either way. Activations on the GPU need params, grads, tokens and dlogits
 * there too. dt_gpt_acts_free releases either. */
void dt_gpt_acts_alloc(const dt_gpt_config *c, const dt_gpt_cut *cut, int B, int T,
                       dt_gpt_acts *a);
void dt_gpt_acts_alloc_on(const dt_gpt_config *c, const dt_gpt_cut *cut, int B, int T,
                          int on_device, dt_gpt_acts *a);
void dt_gpt_acts_free(dt_gpt_acts *a);
/* Floats dt_gpt_acts_alloc takes, of which *scratch (may be NULL) backward's scratch
 * (the rest: what forward keeps, with the cut's recomputation) */
size_t dt_gpt_acts_floats(const dt_gpt_config *c, const dt_gpt_cut *cut, int B, int T,
                          size_t *scratch);
/* Floats of a model whose every block is cut so (NULL: whole, dt_gpt_nparams): the
 * embeddings, the blocks in dt_gpt_block_at's layout for the cut's heads and ffn, lnf. */
size_t dt_gpt_cut_nparams(const dt_gpt_config *c, const dt_gpt_cut *cut);

/* Forward of B sequences of T tokens (tok (B, T), 1 <= T <= seq): returns the logits
 * (B*T, V), which live in a. */
const float *dt_gpt_forward(const dt_gpt_config *c, const float *params, const int *tok,
                            int B, int T, dt_gpt_acts *a);
/* Backward from dlogits (B*T, V), accumulating into grads (params' layout). Goes
 * through the units last to first and calls done(u, part, ctx) after each part of
 * each (unit u's gradients are complete after its last part; unit 0 comes last: the
 * head adds to wte's gradient first). */
void dt_gpt_backward(const dt_gpt_config *c, const float *params, dt_gpt_acts *a,
                     const float *dlogits, const int *tok, int B, int T, float *grads,
                     dt_gpt_part_fn done, void *ctx);
/* The same with every block cut so (params and grads in dt_gpt_cut_nparams's layout,
 * a allocated for the cut), the cut's sums called inside each block: tensor
 * parallelism's rank. Forward calls done(u, part, ctx) after each part too (units 0, 1,
 * ..., L+1; the head's product counts to unit L+1). */
const float *dt_gpt_forward_cut(const dt_gpt_config *c, const dt_gpt_cut *cut,
                                const float *params, const int *tok, int B, int T,
                                dt_gpt_acts *a, dt_gpt_part_fn done, void *ctx);
void dt_gpt_backward_cut(const dt_gpt_config *c, const dt_gpt_cut *cut,
                         const float *params, dt_gpt_acts *a, const float *dlogits,
                         const int *tok, int B, int T, float *grads,
                         dt_gpt_part_fn done, void *ctx);

/* ==== one unit ====
 * Unit u's forward and backward with its weights pu (the unit's floats, in the cut's
 * layout) and, for the final unit, the head's weights wte (V, C). The residual stream
 * passes between units in a: unit 0 writes the stream entering block 0, block l reads
 * a->blk[l].x and writes the next block's (or a->out after the last); the final unit
 * reads a->out. Backward passes the stream's gradient in a->dres, the final unit first
 * (from dlogits, its gradient going to gu (lnf) and dwte (the head)), unit 0 last (tok:
 * the tokens forward read). a holds every unit the calls touch. done(u, part, ctx)
 * (done may be NULL) after each of the unit's parts (below). */
void dt_gpt_unit_forward(const dt_gpt_config *c, const dt_gpt_cut *cut, int u,
                         const float *pu, const float *wte, const int *tok,
                         dt_gpt_acts *a, int B, int T, dt_gpt_part_fn done, void *ctx);
void dt_gpt_unit_backward(const dt_gpt_config *c, const dt_gpt_cut *cut, int u,
                          const float *pu, const float *wte, dt_gpt_acts *a,
                          const float *dlogits, const int *tok, float *gu, float *dwte,
                          int B, int T, dt_gpt_part_fn done, void *ctx);

/* What unit u wrote in forward: the residual stream after it (B*T, C), or the logits
 * (B*T, V) for the final unit */
float *dt_gpt_unit_output(const dt_gpt_config *c, dt_gpt_acts *a, int u);

/* ==== a range of units: a pipeline stage ====
 * A stage holds units [u0, u1) (0 <= u0 < u1 <= L+2), their floats one after another
 * in the cut's layout (NULL: whole), and, when it holds the final unit but not the
 * embeddings, a copy of wte (V, C) after lnf: the head is tied to the embedding, and
 * the stage needs its weights at hand (Megatron keeps such a copy on the last stage;
 * the two copies' gradients must be summed before each update, so that they stay one
 * weight). */
size_t dt_gpt_stage_size(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0, int u1);
/* The activations of the stage's blocks only (and of the final unit if it has it); _on
 * as dt_gpt_acts_alloc_on */
void dt_gpt_stage_acts_alloc(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                             int u1, int B, int T, dt_gpt_acts *a);
void dt_gpt_stage_acts_alloc_on(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                int u1, int B, int T, int on_device, dt_gpt_acts *a);
size_t dt_gpt_stage_acts_floats(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                int u1, int B, int T, size_t *scratch);
/* Forward of units [u0, u1): from tok (B, T) when u0 = 0, else from x_in (B*T, C),
 * the residual stream entering unit u0. Returns the logits (B*T, V) when u1 = L+2,
 * else the residual stream leaving unit u1-1 (B*T, C); both live in a. Calls
 * done(u, part, ctx) after each part of each unit. */
const float *dt_gpt_forward_stage(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                  int u1, const float *params, const int *tok,
                                  const float *x_in, int B, int T, dt_gpt_acts *a,
                                  dt_gpt_part_fn done, void *ctx);
/* Backward from dy: dlogits (B*T, V) when u1 = L+2, else the gradient of the stream
 * the stage sent (B*T, C). Gradients accumulate into grads (the stage's layout); dx
 * (B*T, C; may be NULL) gets the gradient of the stream that entered, when u0 > 0;
 * with u0 = 0 the embeddings need tok. done(u, part, ctx) after each part, the last
 * unit first. */
void dt_gpt_backward_stage(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0, int u1,
                           const float *params, dt_gpt_acts *a, const float *dy,
                           const int *tok, float *dx, int B, int T, float *grads,
                           dt_gpt_part_fn done, void *ctx);

/* The next n tokens after prompt (len tokens, 1 or more), written to out (n): each
 * drawn from the softmax of the last position's logits divided by temperature (0:
 * the most likely), with random numbers from seed; the context is the last seq
 * tokens. */
void dt_gpt_sample(const dt_gpt_config *c, const float *params, const int *prompt,
                   int len, int n, float temperature, unsigned long long seed, int *out);

/* ==== zero bubble: backward in two ====
 * A stage's backward as zero-bubble pipelines run it (Qi et al., 2023): B, the gradient
 * of the stage's input only (what the stage before waits for), then W, later, every
 * weight's gradient (what nothing waits for). B does all backward's work on the
 * residual stream (its sums, gathers and scatters, the ring, selective recomputation)
 * and no weight's product, leaving in a what W reads: per block the gradients of each
 * linear layer's output and of each LayerNorm's (the dmlp .. in2 of dt_gpt_block_acts),
 * the head's dlogits, lnf's output gradient, and the embeddings' in a->dres (sp:
 * a->demb). W runs no collective; it adds to grads, units last to first, the same
 * products in the same order as dt_gpt_backward_stage, so that B then W give its
 * gradients bit for bit. a must be allocated with a cut whose split is 1 (not with full
 * recomputation, which keeps one block's activations at a time), and nothing may run
 * on a between the two. The arguments are dt_gpt_backward_stage's, done(u, part, ctx)
 * called after each part by both. */
void dt_gpt_backward_stage_input(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                 int u1, const float *params, dt_gpt_acts *a,
                                 const float *dy, float *dx, int B, int T,
                                 dt_gpt_part_fn done, void *ctx);
void dt_gpt_backward_stage_weights(const dt_gpt_config *c, const dt_gpt_cut *cut, int u0,
                                   int u1, dt_gpt_acts *a, const int *tok, int B, int T,
                                   float *grads, dt_gpt_part_fn done, void *ctx);

/* ==== text ==== */

/* A text as tokens: each byte one token (V = 256). Bytes and not characters: any file
 * is read the same way, UTF-8 included, with no vocabulary to build or ship, and the
 * model learns which bytes make a character as it learns which make a word. */
typedef struct {
    int n;                           /* tokens */
    unsigned char *tok;              /* (n) */
    char source[256];                /* where it came from, in words */
} dt_text;

/* Reads a file. Returns 0, or -1 with a sentence in err (missing, unreadable, empty,
 * binary: NUL bytes, or more than 1 in 20 bytes control characters other than tab,
 * newline, carriage return and form feed). */
int dt_text_load(dt_text *t, const char *path, char *err, size_t errlen);
/* The default text: the first of dt_text_default_paths that loads (a text every Debian
 * and Ubuntu system carries), else a text made from the seed (dt_text_generate).
 * Never fails. */
void dt_text_default(dt_text *t, unsigned long long seed);
extern const char *const dt_text_default_paths[];      /* NULL-terminated */
/* A text of about n bytes from a small grammar, drawn from the seed: sentences of
 * English words, so that a model can learn words, spaces and full stops. */
void dt_text_generate(dt_text *t, int n, unsigned long long seed);
void dt_text_free(dt_text *t);

/* Sequences [first, first + count) of the global batch of B sequences of T + 1 tokens
 * at step s (counting from 0): sequence i starts at a place drawn from s*B + i alone
 * (splitmix64, mod n - T), so every batch mixes the whole text and any rank reads the
 * same sequence i. x (count, T) the inputs, y (count, T) the targets (x shifted by
 * one). Needs n > T. */
void dt_text_batch(const dt_text *t, int step, int B, int T, int first, int count,
                   int *x, int *y);
/* The entropy in bits of the text's byte frequencies (the unigram model): the loss a
 * model that ignored context could at best reach, in bits per token. */
double dt_text_unigram_bits(const dt_text *t);

#ifdef __cplusplus
}
#endif

#endif /* DT_GPT_H */
