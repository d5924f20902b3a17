/* Context parallelism (train --mode hybrid --cp C): the GPT's sequences cut over C
 * ranks, attention by ring attention (Liu et al., 2023), on lib/nn/ringattn.c's block
 * arithmetic (lesson 27 runs the same ring on one head).
 *
 * Each sequence of s positions is cut into 2C chunks of n = s/(2C); rank c holds chunks
 * c and 2C-1-c ("zig-zag": each rank then has as many causal pairs to compute as any
 * other), T = 2n positions (where 2C does not divide s but C does, the plain cut: rank
 * c holds chunk c of C, and the last rank computes about 2C-1 times the causal pairs
 * of the first), and runs the whole model on them: the embeddings (wpe's
 * rows at its positions), the LayerNorms, the MLP, the head and the loss are per
 * position. Attention needs every earlier position's key and value: the ranks pass
 * their keys and values round the ring, C-1 steps, each rank sending the block in hand
 * on while it computes with it (the transfer hidden behind the compute), and combining
 * the blocks with the online softmax (gpt.h: a running max m and sum l per query row).
 * Forward keeps, per query row, lse = m + log l in place of the probabilities.
 *
 *   C = 2, s = 8, n = 2:   positions  0 1 | 2 3 | 4 5 | 6 7
 *                          rank 0:    0 1                 6 7
 *                          rank 1:          2 3   4 5
 *   step 0: each its own block; step 1: rank 0 holds rank 1's keys (2..5), rank 1
 *   rank 0's (0, 1, 6, 7: only 0 and 1 are in its queries' past).
 *
 * Backward goes round the same way: each rank adds to its queries' gradient and to the
 * gradient of the keys and values in hand, which travel with them; after the last
 * step one more shift brings each block's gradient home. Each rank's weight gradients
 * are its positions' part: hybrid.c sums them over the cp ranks with the data-parallel
 * replicas' (one gradient allreduce over dp x cp, as Megatron-LM does).
 *
 * The trace: a mark "cp kv" from each block's send to its arrival (forward), "cp dkv"
 * the same in backward, the attention compute around them as the GPT's part events. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "p2p.h"
#include "parallel_internal.h"
#include "trace.h"

enum { CP_TAG = 0x6370 };

struct dti_cp {
    MPI_Comm comm;
    int C, c;                   /* ranks, this one */
    int seq, n, T;              /* the sequence, a chunk, this rank's positions (nc n) */
    int nc;                     /* its chunks: 2 (zig-zag) or 1 (the plain cut) */
    int *pos;                   /* [T] this rank's positions: chunk c, then 2C-1-c */
    int B, H, d;                /* the most sequences, heads (this tp rank's), columns */
    float *kv[2];               /* (B, T, 2hd): keys then values, the block in hand and
                                   the next */
    float *dkv[2];              /* backward: the gradient travelling with the block */
    float *m, *l, *D;           /* (B, H, T): running max and sum; backward's D */
    float *scratch;             /* T floats */
};

/* The first position of rank r's chunk k (0, or 1 in the zig-zag cut) */
static int chunk_at(const dti_cp *p, int r, int k)
{
    return k == 0 ? r * p->n : (2 * p->C - 1 - r) * p->n;
}

dti_cp *dti_cp_new(MPI_Comm comm, int seq, int B, int H, int d)
{
    dti_cp *p = dti_calloc(1, sizeof *p);
    p->comm = comm;
    DT_CHECK_MPI(MPI_Comm_size(comm, &p->C));
    DT_CHECK_MPI(MPI_Comm_rank(comm, &p->c));
    DT_REQUIRE(seq % p->C == 0, "context parallelism: a sequence of %d positions "
               "cannot be cut into %d equal chunks", seq, p->C);
    p->seq = seq;
    p->nc = seq % (2 * p->C) == 0 ? 2 : 1;
    p->n = seq / (p->nc * p->C);
    p->T = p->nc * p->n;
    p->pos = dti_calloc((size_t)p->T, sizeof *p->pos);
    for (int k = 0; k < p->nc; k++)
        for (int i = 0; i < p->n; i++)
            p->pos[k * p->n + i] = chunk_at(p, p->c, k) + i;
    p->B = B, p->H = H, p->d = d;
    size_t blk = (size_t)B * p->T * 2 * H * d, rows = (size_t)B * H * p->T;
    for (int k = 0; k < 2; k++) {
        p->kv[k] = dti_calloc(blk, sizeof(float));
        p->dkv[k] = dti_calloc(blk, sizeof(float));
    }
    p->m = dti_calloc(rows, sizeof(float));
    p->l = dti_calloc(rows, sizeof(float));
    p->D = dti_calloc(rows, sizeof(float));
    p->scratch = dti_calloc((size_t)p->T, sizeof(float));
    return p;
}

void dti_cp_free(dti_cp *p)
{
    if (p == NULL)
        return;
    for (int k = 0; k < 2; k++) {
        free(p->kv[k]);
        free(p->dkv[k]);
    }
    free(p->pos);
    free(p->m);
    free(p->l);
    free(p->D);
    free(p->scratch);
    free(p);
}

const int *dti_cp_positions(const dti_cp *p, int *T)
{
    *T = p->T;
    return p->pos;
}

int dti_cp_zigzag(const dti_cp *p)
{
    return p->nc == 2;
}


/* Rank src's block in hand, kv (B, T, 2hd), against this rank's queries: every (query
 * chunk, key chunk) pair of every sequence and head. backward 0: the forward's online
 * softmax into y (o); 1: the gradients into dqkv's q part and dkv. */
static void blocks(dti_cp *p, int backward, int src, const float *qkv, const float *kv,
                   float *y, const float *lse, const float *dy, float *dqkv, float *dkv,
                   int B)
{
    int H = p->H, d = p->d, hd = H * d, T = p->T, n = p->n;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int qc = 0; qc < p->nc; qc++)
                for (int kc = 0; kc < p->nc; kc++) {
                    size_t qr = (size_t)b * T + qc * n, kr = (size_t)b * T + kc * n;
                    size_t st = ((size_t)b * H + h) * T + qc * n;     /* m, l, lse, D */
                    const float *q = qkv + qr * 3 * hd + h * d;
                    const float *k = kv + kr * 2 * hd + h * d, *v = k + hd;
                    int q0 = chunk_at(p, p->c, qc), k0 = chunk_at(p, src, kc);
                    if (!backward)
                        dt_attn_block_forward(q, 3 * hd, k, v, 2 * hd, n, n, q0, k0, d,
                                              p->m + st, p->l + st, y + qr * hd + h * d, hd,
                                              p->scratch);
                    else
                        dt_attn_block_backward(q, 3 * hd, k, v, 2 * hd, n, n, q0, k0, d,
                                               lse + st, p->D + st, dy + qr * hd + h * d,
                                               hd, dqkv + qr * 3 * hd + h * d,
                                               dkv + kr * 2 * hd + h * d,
                                               dkv + kr * 2 * hd + hd + h * d);
                }
}

/* Between qkv's keys and values (B*T, 3hd) and a block (B*T, 2hd): to_block 1 packs,
 * 0 adds the block into qkv's (the gradient come home) */
static void kv_rows(const dti_cp *p, float *qkv, float *kv, int B, int to_block)
{
    size_t hd = (size_t)p->H * p->d, rows = (size_t)B * p->T;
    for (size_t r = 0; r < rows; r++) {
        float *a = qkv + r * 3 * hd + hd, *k = kv + r * 2 * hd;
        if (to_block) {
            memcpy(k, a, 2 * hd * sizeof(float));
        } else {
            for (size_t e = 0; e < 2 * hd; e++)
                a[e] += k[e];
        }
    }
}

void dti_cp_attend(dti_model *m, const float *qkv, float *y, float *lse, int B, int T,
                   int H, int d)
{
    dti_cp *p = m->cp;
    DT_REQUIRE(T == p->T && H == p->H && d == p->d && B <= p->B, "context parallelism: "
               "attention on %d x %d rows of %d heads, set up for %d x %d of %d", B, T, H,
               p->B, p->T, p->H);
    int C = p->C, c = p->c, hd = H * d, u, fwd;
    size_t blk = (size_t)B * T * 2 * hd, rows = (size_t)B * H * T;
    kv_rows(p, (float *)qkv, p->kv[0], B, 1);
    for (size_t i = 0; i < rows; i++)                  /* before the first block */
        p->m[i] = -INFINITY, p->l[i] = 0.0f;
    memset(y, 0, (size_t)B * T * hd * sizeof(float));
    for (int s = 0; s < C; s++) {
        /* the block in hand came from rank c - s; the next one is on its way meanwhile */
        int src = (c - s + C) % C, last = s == C - 1;
        MPI_Request req[2];
        double t0 = dt_trace_now();
        if (!last) {
            dt_trace_phase("cp", "kv");
            req[0] = dt_isend(p->kv[s % 2], blk * sizeof(float), (c + 1) % C, CP_TAG,
                              p->comm);
            req[1] = dt_irecv(p->kv[(s + 1) % 2], blk * sizeof(float), (c - 1 + C) % C,
                              CP_TAG, p->comm);
        }
        blocks(p, 0, src, qkv, p->kv[s % 2], y, NULL, NULL, NULL, NULL, B);
        if (!last) {                  /* the compute so far is one event, the wait a mark */
            dti_gpt_comm_begin(m, &u, &fwd);
            dt_waitall(2, req);
            dti_gpt_comm_end(m, "cp", "kv", u, blk * sizeof(float), t0);
        }
    }
    for (int b = 0; b < B; b++)                        /* o / l, and lse = m + log l */
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                size_t st = ((size_t)b * H + h) * T + i;
                dt_attn_block_finish(p->m + st, p->l + st, y + ((size_t)b * T + i) * hd +
                                     h * d, hd, lse + st, 1, d);
            }
}

void dti_cp_attend_backward(dti_model *m, const float *qkv, const float *y,
                            const float *lse, const float *dy, float *dqkv, int B, int T,
                            int H, int d)
{
    dti_cp *p = m->cp;
    int C = p->C, c = p->c, hd = H * d, u, fwd;
    size_t blk = (size_t)B * T * 2 * hd;
    for (int b = 0; b < B; b++)                        /* D = rowsum(dy o), per head */
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                size_t r = (size_t)b * T + i;
                dt_attn_block_delta(y + r * hd + h * d, dy + r * hd + h * d, hd, 1, d,
                                    p->D + ((size_t)b * H + h) * T + i);
            }
    memset(dqkv, 0, (size_t)B * T * 3 * hd * sizeof(float));
    kv_rows(p, (float *)qkv, p->kv[0], B, 1);
    memset(p->dkv[0], 0, blk * sizeof(float));
    for (int s = 0; s < C; s++) {
        int src = (c - s + C) % C, last = s == C - 1, cur = s % 2, nxt = (s + 1) % 2;
        MPI_Request req[2];
        double t0 = dt_trace_now();
        if (!last) {                   /* the next block's keys and values, meanwhile */
            dt_trace_phase("cp", "kv");
            req[0] = dt_isend(p->kv[cur], blk * sizeof(float), (c + 1) % C, CP_TAG,
                              p->comm);
            req[1] = dt_irecv(p->kv[nxt], blk * sizeof(float), (c - 1 + C) % C, CP_TAG,
                              p->comm);
        }
        blocks(p, 1, src, qkv, p->kv[cur], NULL, lse, dy, dqkv, p->dkv[cur], B);
        /* the gradient of the block in hand goes on with it (after its compute) */
        dti_gpt_comm_begin(m, &u, &fwd);
        if (!last) {
            dt_waitall(2, req);
            dti_gpt_comm_end(m, "cp", "kv", u, blk * sizeof(float), t0);
        }
        if (C > 1) {
            dt_trace_phase("cp", "dkv");
            double td = dt_trace_now();
            dt_sendrecv(p->dkv[cur], blk * sizeof(float), (c + 1) % C, p->dkv[nxt],
                        blk * sizeof(float), (c - 1 + C) % C, CP_TAG, p->comm);
            dti_gpt_comm_end(m, "cp", "dkv", u, blk * sizeof(float), td);
        }
    }
    /* after C shifts the gradient in hand is this rank's own block's (one rank: no
     * shift) */
    kv_rows(p, dqkv, p->dkv[C > 1 ? C % 2 : 0], B, 0);
}
