/* The coursework: every function a learner writes, one exercise per folder.
 *
 * Each exercises/NN_topic/ holds a README (the task, a picture, hints, how to test it)
 * and one C file, topic.c, with the gaps marked TODO(exercise). `make grade` builds
 * that file against the exercise's Check suite (tests/grade/NN_topic.c) and runs it at
 * 1, 2, 3, 4 and 5 ranks; `make grade SOLUTION=1` grades dtlab's own implementations
 * (tests/grade/ref/) instead, which must get full marks.
 *
 * An exercise is graded on its own: the grader links dtlab's reference versions of the
 * other exercises beside the learner's file, so a mistake in 02 costs points in 02 only,
 * even where 04 calls 02's functions.
 *
 * The learner may call anything in dtlab's library (dt.h): the p2p calls (dt_send,
 * dt_recv, dt_sendrecv, which wait politely), the schedule arithmetic (schedule.h), the
 * collectives, lib/nn's operations. Buffers here are host memory. Counts are elements.
 *
 * A gap left unfilled is EX_TODO(): on first use it stops the whole job with
 * "ex_...: not implemented yet", so an unfinished exercise never passes by accident. */
#ifndef DT_EXERCISES_H
#define DT_EXERCISES_H

#include <mpi.h>
#include <stddef.h>
#include "dt.h"

/* Marks a gap. Never returns: prints the rank, the file and line, and "<function> is
 * not implemented yet", then aborts every rank (dtlab's one abort path, errors.h). */
#define EX_TODO() \
    dti_die(__FILE__, __LINE__, "%s is not implemented yet: fill in its " \
            "TODO(exercise)", __func__)

/* ==== 01 ring schedule: the arithmetic, no MPI ==== */

/* Chunk i of n over count elements is [*lo, *hi): contiguous, in order, covering every
 * element once; when count % n != 0 the first count % n chunks hold one more. */
void ex_chunk_bounds(size_t count, int n, int i, size_t *lo, size_t *hi);
/* Ring reduce-scatter, steps 0..n-2: the chunk rank sends to its right neighbour and the
 * one it receives from its left at step; after n-1 steps rank r owns chunk r. */
int ex_ring_rs_send_chunk(int rank, int n, int step);
int ex_ring_rs_recv_chunk(int rank, int n, int step);
/* Ring allgather, steps 0..n-2: rank r starts owning chunk r and passes on what it
 * received. */
int ex_ring_ag_send_chunk(int rank, int n, int step);
int ex_ring_ag_recv_chunk(int rank, int n, int step);

/* ==== 02 ring reduce-scatter ==== */

/* In place on count floats cut with dt_chunk_bounds over the n ranks of comm: afterwards
 * chunk r of rank r's buf holds the sum over all ranks of their chunk r; other chunks
 * may hold anything. Any n >= 1, any count >= 0. */
void ex_ring_reduce_scatter(float *buf, int count, MPI_Comm comm);

/* ==== 03 ring allgather ==== */

/* In place: on entry chunk r of rank r's buf (dt_chunk_bounds) is valid, the rest is
 * anything; afterwards every rank holds every rank's chunk at its place. */
void ex_ring_allgather(float *buf, int count, MPI_Comm comm);

/* ==== 04 ring allreduce ==== */

/* In place: afterwards every rank's buf holds the element-wise sum over all ranks. Built
 * from ex_ring_reduce_scatter and ex_ring_allgather: 2(n-1)/n of the buffer sent. */
void ex_ring_allreduce(float *buf, int count, MPI_Comm comm);
/* The same, but the MEAN over the ranks: what data parallelism does to gradients. Each
 * rank divides only its own reduced chunk, between the two phases. */
void ex_allreduce_mean(float *buf, int count, MPI_Comm comm);

/* ==== 05 binomial-tree broadcast ==== */

/* The root's count floats end up in buf on every rank, in ceil(log2 n) rounds: each rank
 * receives once from its parent, then sends to its children (schedule.h's tree, relative
 * to root). Any root in 0..n-1. */
void ex_tree_bcast(float *buf, int count, int root, MPI_Comm comm);

/* ==== 06 recursive-doubling allreduce ==== */

/* In place sum over comm by recursive doubling: log2 p exchanges of the whole buffer
 * among p = the largest power of two <= n ranks, with the extra ranks folded in first
 * and handed the result at the end (schedule.h's dt_rd_*). Any n >= 1. */
void ex_rd_allreduce(float *buf, int count, MPI_Comm comm);

/* ==== 07 DDP gradient buckets ==== */

/* Layer i's gradients are grads[off[i], off[i+1]), esize bytes an element. Cuts the
 * layers into buckets, from the LAST layer backwards (backward finishes it first):
 * bucket 0 holds the last layers; a bucket is closed before a layer would take it past
 * cap_bytes, so a layer larger than the cap is a bucket of its own. Writes bucket_of[i]
 * for every layer and returns the number of buckets (1 or more; nl >= 1). */
int ex_ddp_buckets(const size_t *off, int nl, size_t esize, size_t cap_bytes,
                   int *bucket_of);
/* Replaces every rank's grads (off[nl] floats) by the MEAN over comm, one allreduce
 * (dt_allreduce) per bucket, in bucket order 0, 1, ..., nb-1 on every rank. */
void ex_ddp_sync(float *grads, const size_t *off, int nl, const int *bucket_of, int nb,
                 MPI_Comm comm);

/* ==== 08 FSDP shard and unshard ==== */

/* A flat parameter of n floats is padded with zeros to N*s, s = ex_shard_size(n, N) =
 * ceil(n / N), and rank k keeps elements [k*s, (k+1)*s) of the padded array. */
size_t ex_shard_size(size_t n, int N);
/* Copies rank's shard of full (n floats) into shard (s floats), zeros where it runs
 * past n. No communication. */
void ex_shard(const float *full, size_t n, float *shard, int rank, int N);
/* Every rank passes its shard (s floats); every rank gets the whole parameter, n floats
 * in full, padding left out. */
void ex_unshard(const float *shard, size_t n, float *full, MPI_Comm comm);
/* Every rank passes its whole gradient (n floats); rank k gets in gshard (s floats) the
 * sum over ranks of elements [k*s, (k+1)*s), zeros in the padding. */
void ex_reduce_scatter_grad(const float *grad, size_t n, float *gshard, MPI_Comm comm);

/* ==== 09 tensor-parallel linear layers ====
 * A linear layer y = x W^T + b, W (out, in), cut over the T ranks of comm, rank t
 * owning rows or columns [lo, hi) = dt_chunk_bounds(out or in, T, t). Shapes (rows,
 * cols); gradients accumulate (+=), as in lib/nn. */

/* Column parallel: W_t (hi-lo, in) = rows [lo, hi) of W, b_t its bias; x (B, in) whole
 * on every rank; y_t (B, hi-lo), this rank's output columns. No communication. */
void ex_col_linear_forward(const float *x, const float *W_t, const float *b_t,
                           float *y_t, int B, int in, int out, MPI_Comm comm);
/* dy_t (B, hi-lo): dW_t += dy_t^T x, db_t += column sums of dy_t; dx (B, in) = the
 * gradient of the whole x, the same on every rank. */
void ex_col_linear_backward(const float *x, const float *W_t, const float *dy_t,
                            float *dx, float *dW_t, float *db_t, int B, int in, int out,
                            MPI_Comm comm);
/* Row parallel: W_t (out, hi-lo) = columns [lo, hi) of W; b (out) whole, the same on
 * every rank; x_t (B, hi-lo), this rank's input columns; y (B, out) the whole output,
 * the same on every rank. */
void ex_row_linear_forward(const float *x_t, const float *W_t, const float *b,
                           float *y, int B, int in, int out, MPI_Comm comm);
/* dy (B, out) whole: dW_t += dy^T x_t, db += column sums of dy (whole, the same on every
 * rank), dx_t (B, hi-lo) the gradient of this rank's input columns. */
void ex_row_linear_backward(const float *x_t, const float *W_t, const float *dy,
                            float *dx_t, float *dW_t, float *db, int B, int in, int out,
                            MPI_Comm comm);

/* ==== 10 pipeline timetables ==== (schedule.h explains the terms) */

/* Writes the 2M operations of stage s of P in the order it runs them, schedule 0 GPipe
 * or 1 1F1B; returns 2M. */
int ex_pp_order(int schedule, int P, int M, int s, dt_pp_op *ops);
/* Lays every stage's operations on one clock: a forward takes 1 slot, a backward tb;
 * each starts when its stage is free and its dependency has finished. Writes
 * start[s*2M + k] for the k-th operation of ex_pp_order(s); returns the slots a step
 * takes. */
int ex_pp_timetable(int schedule, int P, int M, int tb, int *start);

/* ==== 11 dynamic loss scaler ==== (parallel.h's dt_scaler) */

/* After a backward that did (found_inf 1) or did not overflow: 1 to apply the step, 0
 * to skip it; backs the scale off on an overflow, grows it after cfg.window clean steps
 * in a row. */
int ex_scaler_update(dt_scaler *s, int found_inf);
/* One rank's end of a mixed-precision step: grads (n floats) were made with the loss
 * multiplied by s->scale. If any rank of comm has an inf or NaN, every rank skips
 * (returns 0, grads untouched); else grads are divided by the scale they were made with
 * and it returns 1. Either way the scaler is updated, the same on every rank. */
int ex_scaler_step(dt_scaler *s, float *grads, size_t n, MPI_Comm comm);

/* ==== 12 ring attention: the online softmax and the ring's blocks ====
 * One query row's attention over some of its keys, not yet normalised, is a partial:
 * m the largest score met, l = sum_j e^(s_j - m), o (d floats) = sum_j e^(s_j - m) v_j.
 * The row's attention is o / l. The partial over no key is m = -INFINITY, l = 0, o = 0.
 * No MPI: the ring is played on arrays, one rank and one step at a time. */

/* The partial of one row over n >= 0 keys: s[0..n) its scores, v (n, d) their values.
 * Overwrites m, l and o (d floats). */
void ex_attn_partial(const float *s, const float *v, int n, int d, float *m, float *l,
                     float *o);
/* In place: (m, l, o) becomes the partial over the keys of (m, l, o) and of (m2, l2,
 * o2) together, the two over different keys. Either or both may be empty. o and o2 (d
 * floats each) do not overlap. */
void ex_softmax_merge(float *m, float *l, float *o, float m2, float l2, const float *o2,
                      int d);
/* The ring of C ranks passes the blocks of keys and values to the right, one step at a
 * time: at step 0..C-1 rank r holds the block rank ex_ring_source(r, C, step) started
 * with, its own at step 0. */
int ex_ring_source(int r, int C, int step);
/* The sequence is cut into chunks of equal length: plain (zigzag 0), C chunks, rank r
 * holds chunk r; zig-zag (zigzag 1), 2C chunks, rank r holds chunks r and 2C-1-r. The
 * place in the sequence of rank r's chunk a (a = 0; 0 or 1 under zig-zag). */
int ex_cp_chunk(int r, int C, int zigzag, int a);
/* What the causal mask leaves of rank r's query chunk a against chunk b of the block it
 * holds at step: EX_ATTN_FULL, every key before every query; EX_ATTN_DIAG, the same
 * positions (query i of the chunk sees keys 0..i of it); EX_ATTN_SKIP, every key after
 * every query. */
enum { EX_ATTN_SKIP, EX_ATTN_DIAG, EX_ATTN_FULL };
int ex_block_kind(int r, int C, int zigzag, int step, int a, int b);
/* Rank r's ring step: q (nc n, d) its queries, chunk a's n rows from row a n (nc = 1
 * plain, 2 zig-zag); k, v (nc n, d) the block it holds at step, ex_ring_source's, laid
 * out the same. Merges into each query row's partial, m and l (nc n) and o (nc n, d),
 * its partial over the keys of the block it sees; scores q . k / sqrt(d). */
void ex_ring_step(int r, int C, int zigzag, int step, int n, int d, const float *q,
                  const float *k, const float *v, float *m, float *l, float *o);

/* ==== 13 pipeline schedules: interleaved 1F1B and ZB-H1 ====
 * (schedule.h's section "interleaved 1F1B and zero bubble" explains the terms.) A
 * stage's operations are dt_pp_op's: kind 'F', 'B' or 'W', micro-batch 0..M-1, chunk
 * 0..v-1 (interleaved: stage s's chunk j is virtual stage jP + s; 0 in ZB-H1). No MPI:
 * the pipeline is played on arrays. */

/* Interleaved's groups: k = M / P groups of consecutive micro-batches (one group when
 * M < P), the first M % k of them one larger. Writes their sizes to g[0..k) (g has M
 * entries) and returns k. */
int ex_il_groups(int P, int M, int *g);
/* The t-th forward (fwd 1) or backward (fwd 0), t = 0 .. vM-1, that every stage of
 * interleaved 1F1B runs: group by group, the group's micro-batches through chunk 0,
 * then through chunk 1, ... (forwards), or through chunk v-1, then v-2, ... (backwards).
 * The kind is 'F' or 'B'. */
dt_pp_op ex_il_table(int P, int M, int v, int fwd, int t);
/* Stage s's 2vM operations of interleaved 1F1B (v chunks a stage), in the order it runs
 * them: the warm-up forwards, then one forward and one backward in turn, then the
 * backwards left. Returns 2vM. With v = 1 it is 1F1B. */
int ex_il_order(int P, int M, int v, int s, dt_pp_op *ops);
/* Stage s's 3M operations of ZB-H1 (F m, B m and W m of every micro-batch, chunk 0),
 * in the order it runs them: 1F1B's forwards and backwards, W m right after B m+s, the
 * last min(s, M) W's after the last B. Returns 3M. */
int ex_zb_order(int P, int M, int s, dt_pp_op *ops);

/* ==== 14 all-to-all by pairwise exchange ====
 * Rank r's block j goes to rank j, which stores it as its block r (MPI_Alltoallv). The
 * steps pair the ranks off: at each step every rank exchanges its two blocks with one
 * partner, or sits out, and over the steps every two ranks meet exactly once. */

/* The steps of the schedule over N >= 1 ranks: N - 1 for even N, N for odd N (then each
 * rank sits out one step), the fewest that pair every two ranks once. */
int ex_a2a_steps(int N);
/* Rank r's partner at step k (0 .. ex_a2a_steps(N)-1), r itself when it sits out. The
 * pairing is symmetric: the partner's partner at step k is r. */
int ex_a2a_partner(int r, int N, int k);
/* displs[j] = counts[0] + ... + counts[j-1] for j = 0 .. n-1: the blocks packed one
 * after another. Returns the sum of all n counts. */
int ex_a2a_displs(const int *counts, int n, int *displs);
/* The all-to-all over comm, in the steps of ex_a2a_partner, on dtlab's p2p: this rank's
 * scounts[j] floats at send + sdispls[j] go to rank j, which receives them as its
 * rcounts[r] floats at recv + rdispls[r]; recv outside the blocks is left untouched.
 * rcounts[j] on this rank equals scounts[this rank] on rank j. Returns the bytes this
 * rank sent to other ranks (its own block is copied, not sent). */
size_t ex_alltoallv(const float *send, const int *scounts, const int *sdispls, float *recv,
                    const int *rcounts, const int *rdispls, MPI_Comm comm);

/* ==== 15 gradient compression: signs with a scale, and error feedback ====
 * A tensor of n floats v is sent as n sign bits and one float scale s = mean |v_i| over
 * the whole tensor (one scale per call): bit i is bit i % 8 of byte i / 8 (the lowest
 * bit first), 1 where v_i >= 0; the bits past n in the last byte are 0. It decodes to
 * +s where the bit is 1, -s where it is 0. No MPI: the message is counted, not sent. */

/* Writes the (n + 7) / 8 bytes of v's signs to bits and returns the scale, mean |v_i|
 * accumulated in double (0 when n is 0). */
float ex_sign_compress(const float *v, size_t n, unsigned char *bits);
/* out[i] = +scale where bit i of bits is 1, -scale where it is 0, i < n. */
void ex_sign_decompress(const unsigned char *bits, float scale, size_t n, float *out);
/* One step of error feedback on a gradient g (n floats), e the residual carried from
 * the last step (zeros at first), updated in place: v = g + e; the message is
 * ex_sign_compress(v) (bits, *scale); update = its decompression, what the receivers
 * add; e = v - update. Returns the bytes of the message: the bits and the scale. */
size_t ex_ef_step(const float *g, float *e, size_t n, unsigned char *bits, float *scale,
                  float *update);

/* ==== 16 MoE dispatch: routing tokens to experts, capacity, the all-to-all's layout ====
 * T tokens, each with E gate logits, go to k (1 or 2) of E experts; each expert takes at
 * most C of them (its capacity); the experts are spread over N ranks, E / N each, expert
 * e on rank e / (E / N). choice, weight and slot are (T, k): row t holds token t's
 * choices, its first choice first. No MPI: the all-to-all is laid out, not sent. */

/* C = ceil(factor * k * T / E), the product rounded to 6 decimals before the ceiling
 * (1.1f * 80 / 8 gives 11, not 12), at least 1 and at most T; 0 when T is 0. */
int ex_moe_capacity(double factor, int k, int T, int E);
/* For each token t of logits (T, E): the softmax p over its E logits; choice[t, 0..k-1]
 * its k most probable experts, the most probable first, the lower index winning a tie;
 * weight[t, j] = p[choice[t, j]] for k = 1, and p renormalised over the two chosen,
 * p[c_j] / (p[c_0] + p[c_1]), for k = 2. Needs 1 <= k <= E. */
void ex_moe_route(const float *logits, int T, int E, int k, int *choice, float *weight);
/* Fills each expert's C slots first come, first served: every token's first choice in
 * token order, then every second choice. slot[t, j] is the slot choice j of token t
 * took, 0 .. C-1, or -1 when its expert was full (dropped). kept[e] and drop[e]: the
 * choices expert e took and dropped. Returns the choices dropped in all. */
int ex_moe_assign(const int *choice, int T, int k, int E, int C, int *slot, int *kept,
                  int *drop);
/* The send side of the all-to-all that carries the kept choices (slot >= 0) to their
 * experts' ranks: counts[r], the tokens sent to rank r's experts; sdispls[r], where
 * they start in the send buffer, the sum of counts[0 .. r-1]; order[i], the token in
 * row i of the send buffer, sorted by expert, then by token. E a multiple of N. Returns
 * the rows, the sum of counts. */
int ex_moe_send_layout(const int *choice, const int *slot, int T, int k, int E, int N,
                       int *counts, int *sdispls, int *order);

/* ==== 17 resharding a checkpoint: which old pieces a new rank reads ====
 * A checkpoint written by N ranks holds, per old rank, a region of floats and its map:
 * spans of the whole model's parameters (as dti_span: count runs of len, the first at
 * start, each stride after the one before), the region's elements being those runs in
 * order, then padding. A rank of the new layout needs its own map's parameters. No MPI:
 * the reads are planned and applied, not sent. */
typedef struct {
    size_t start, len, count, stride;
} ex_span;
/* Parameters [start, start + len) of the whole model. */
typedef struct {
    size_t start, len;
} ex_run;
/* len floats of old rank `rank`'s region from its element src, to element dst of the
 * new rank's buffer. */
typedef struct {
    int rank;
    size_t src, dst, len;
} ex_read;

/* The runs of n spans (ascending, apart or touching, as a map's are), in order, into
 * out (room for the sum of their counts): runs of len 0 left out, runs that touch
 * merged into one. Returns how many. */
int ex_span_runs(const ex_span *s, int n, ex_run *out);
/* The reads that fill a buffer mapped by need (nneed spans) from the N old regions,
 * old[k] mapped by nold[k] spans: each needed element read once, from the lowest old
 * rank that holds its parameter; sorted by dst, merged where contiguous in both. out
 * has room for twice the sum of the counts of need's spans and every old map's.
 * Returns how many. */
int ex_reshard_reads(const ex_span *need, int nneed, const ex_span *const *old,
                     const int *nold, int N, ex_read *out);
/* The bytes that n reads move (floats of 4 bytes). */
size_t ex_reshard_nbytes(const ex_read *r, int n);
/* Applies n reads from the old regions old[k] to buf (nbuf floats): every element no
 * read fills (the padding past the map) is 0. */
void ex_reshard_apply(const ex_read *r, int n, const float *const *old, float *buf,
                      size_t nbuf);

#endif /* DT_EXERCISES_H */
