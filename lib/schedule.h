/* The pure arithmetic of every algorithm: who talks to whom, and which chunk moves,
 * at each step. No MPI, no memory: the collectives, the viewer and the exercise tests
 * all call these, so what the viewer animates is what the code does.
 *
 * Ranks are 0..n-1. A buffer of `count` elements is cut into n chunks; when count does
 * not divide by n, the first count % n chunks hold one element more. */
#ifndef DT_SCHEDULE_H
#define DT_SCHEDULE_H

#include <stddef.h>

/* ==== chunks ==== */

/* Chunk i of n over count elements is [*lo, *hi). Chunks are contiguous, in order,
 * cover every element once, and differ in size by at most one. */
void dt_chunk_bounds(size_t count, int n, int i, size_t *lo, size_t *hi);

/* ==== ring ==== */

static inline int dt_ring_left(int rank, int n)  { return (rank - 1 + n) % n; }
static inline int dt_ring_right(int rank, int n) { return (rank + 1) % n; }

/* Reduce-scatter on a ring, steps s = 0..n-2. At step s, rank r sends the chunk it has
 * been summing to its right neighbour and receives one from its left, which it adds its
 * own data to. Invariant: after step s the chunk rank r last received holds the sum of
 * s+2 ranks' data; after n-1 steps rank r owns chunk r, fully reduced. */
int dt_ring_rs_send_chunk(int rank, int n, int step);
int dt_ring_rs_recv_chunk(int rank, int n, int step);

/* Allgather on a ring, steps s = 0..n-2. Rank r starts owning chunk r, sends at step s
 * the chunk it received at step s-1, and after n-1 steps holds every chunk. */
int dt_ring_ag_send_chunk(int rank, int n, int step);
int dt_ring_ag_recv_chunk(int rank, int n, int step);

/* ==== binomial tree ====
 * Ranks are renumbered relative to the root, v = (rank - root + n) % n. Virtual rank v > 0
 * receives from v minus its lowest set bit; it then sends to v + 2^k for every 2^k below
 * its lowest set bit (the root: below the smallest power of two >= n), largest 2^k first.
 * A broadcast takes ceil(log2 n) rounds. */

/* The parent of rank, or -1 for the root. */
int dt_tree_parent(int rank, int root, int n);

/* Writes rank's children into children[] (at most 31), farthest first (v + 2^k for
 * decreasing k: the order a broadcast sends in), and returns how many there are. */
int dt_tree_children(int rank, int root, int n, int *children);

/* The round (0-based) in which rank receives from its parent, -1 for the root: virtual
 * rank v receives in round ceil(log2 n) - 1 - log2(lowest set bit of v). Broadcast and
 * scatter run the rounds forwards, reduce and gather backwards, every rank counting
 * every round so that all ranks agree on the step number. */
int dt_tree_round(int rank, int root, int n);

/* Number of ranks in the subtree under rank, rank included (consecutive virtual ranks
 * v .. v+size-1): what a binomial gather or scatter moves through it. */
int dt_tree_subtree_size(int rank, int root, int n);

/* ==== recursive doubling ====
 * For n ranks, let p be the largest power of two <= n and extra = n - p. The first
 * 2*extra ranks pair up (2i, 2i+1): the even one hands its data to the odd one and
 * sits out; the p remaining ranks run log2 p exchange steps with partner v XOR 2^s;
 * at the end the odd ones hand the result back. */

int dt_pow2_floor(int n);     /* largest power of two <= n (n >= 1) */
int dt_log2_ceil(int n);      /* smallest k with 2^k >= n */

/* The rank's number among the p active ranks, or -1 if it sits out. */
int dt_rd_vrank(int rank, int n);
/* The real rank of active rank v. */
int dt_rd_rank(int vrank, int n);
/* Number of exchange steps (log2 p). */
int dt_rd_steps(int n);
/* The real rank this rank exchanges with at step s (rank must be active). */
int dt_rd_partner(int rank, int n, int step);
/* For the first 2*extra ranks: the rank paired with this one during the fold; -1 if none. */
int dt_rd_fold_peer(int rank, int n);

/* ==== pairwise exchange (all-to-all) ====
 * Steps s = 1..n-1: rank r sends its block for (r+s) % n and receives the block from
 * (r-s+n) % n. Step 0 is the local copy of its own block. */
static inline int dt_a2a_send_peer(int rank, int n, int step) { return (rank + step) % n; }
static inline int dt_a2a_recv_peer(int rank, int n, int step) { return (rank - step + n) % n; }

/* ==== pipeline timetables ====
 * P stages (stage s holds a contiguous run of layers; stage 0 takes the input, stage P-1
 * computes the loss), M micro-batches per step. Each stage runs 2M operations: the
 * forward F m and the backward B m of every micro-batch m. F m at stage s needs F m of
 * stage s-1 (its input); B m at stage s needs B m of stage s+1 (its output's gradient).
 *
 *   GPipe  (schedule 0): F 0 .. F M-1, then B 0 .. B M-1; a stage holds the activations
 *          of all M micro-batches before its first backward frees one.
 *   1F1B   (schedule 1, PipeDream-Flush as in Megatron-LM): min(P-s-1, M) warm-up
 *          forwards, then one forward and one backward in turn, then the remaining
 *          backwards; a stage holds at most min(P-s, M) micro-batches' activations.
 * The values are those of dt_pp_schedule (parallel.h). Both orders run the backwards in
 * increasing m, so gradients accumulate in the same order whatever the schedule.
 * The int functions below return -1 for a schedule other than 0 or 1, P < 1, M < 1,
 * s outside 0..P-1, tb < 1 or an unknown op. Two more schedules, with functions of
 * their own (the _v functions further down), cut the work finer. */

typedef struct {
    char kind;      /* 'F' forward, 'B' backward, 'W' (zb-h1) the weights' gradient; '.'
                       for an idle slot in a drawing */
    int micro;      /* the micro-batch, 0..M-1 */
    int chunk;      /* the model chunk of the stage, 0..v-1: interleaved's virtual stage
                       chunk*P + s; 0 in the other schedules */
} dt_pp_op;

/* The warm-up of stage s: the forwards it runs before it starts alternating, M for
 * GPipe, min(P-s-1, M) for 1F1B (whose first steady forward then comes before its first
 * backward too). */
int dt_pp_warmup(int schedule, int P, int M, int s);

/* Writes the 2M operations of stage s (0 <= s < P, M >= 1) into ops[0..2M-1], in the
 * order the stage runs them; returns 2M. */
int dt_pp_order(int schedule, int P, int M, int s, dt_pp_op *ops);

/* Where op (kind, micro) comes in stage s's order: the k with ops[k] equal to it. */
int dt_pp_index(int schedule, int P, int M, int s, char kind, int micro);

/* The most micro-batches whose activations stage s holds at once (a forward stashes
 * them, the backward of the same micro-batch frees them): M for GPipe, min(P-s, M) for
 * 1F1B. */
int dt_pp_peak_stash(int schedule, int P, int M, int s);

/* The ideal bubble, the fraction of a step each stage sits idle when every operation
 * takes its nominal time and messages are free: (P-1) / (M+P-1), for both schedules. */
double dt_pp_bubble(int P, int M);

/* Lays every stage's operations on one clock of time slots: a forward takes 1 slot, a
 * backward tb slots (1, or 2 as in real networks, where backward does twice the work:
 * dW and dx). Each operation starts as soon as the stage has finished its previous one
 * and its dependency (see above) has finished. Writes start[s*2M + k], the slot where
 * stage s starts its k-th operation of dt_pp_order (start has P*2M entries), and
 * returns the number of slots the step takes: (M+P-1)(1+tb) for both schedules. */
int dt_pp_timetable(int schedule, int P, int M, int tb, int *start);

/* Draws the timetable as text into buf (len bytes, always terminated): one line per
 * stage, one cell per slot ("F2", "B0", "." idle; a backward fills tb cells), e.g.
 * for GPipe, P = 2, M = 2, tb = 1:
 *     stage 0 | F0 F1 .  .  B0 B1
 *     stage 1 | .  F0 F1 B0 B1 .
 * Returns the length the whole drawing needs (as snprintf does), or -1 on bad input. */
int dt_pp_draw(int schedule, int P, int M, int tb, char *buf, size_t len);

/* ==== interleaved 1F1B and zero bubble ====
 * Schedule 2, interleaved 1F1B (Narayanan et al., 2021; Megatron-LM's virtual pipeline):
 * the layers are cut into vP chunks, virtual stages c = 0 .. vP-1, and rank s holds v of
 * them, c = s, s+P, s+2P, ... (its chunks j = 0 .. v-1, c = jP + s; the functions'
 * stage s is rank s). A micro-batch goes round the ranks v times, forward through
 * c = 0 .. vP-1, then backward from vP-1 down to 0.
 * The micro-batches are cut into k = M/P groups (one when M < P), as dt_chunk_bounds
 * cuts elements: the first M % k groups one larger, each group P .. 2P-1 micro-batches.
 * Each rank's forwards run group by group, chunk 0 over the group, then chunk 1, ...;
 * its backwards likewise, from chunk v-1 down. Rank s warms up with (v-1) g + P-s-1
 * forwards (g: the first group's size; at most vM), then alternates, then cools down, as
 * 1F1B does; so v = 1 is 1F1B exactly. Why groups of P or more: while rank 0 runs chunk
 * j over a group, the group's first micro-batch goes round the other P-1 ranks, so chunk
 * j+1 finds its input ready. Why the larger groups first: the last rank's first backward
 * must come after that micro-batch's last forward, (v-1) g forwards in; a later, larger
 * group would put a B before its own F. Megatron-LM asks for M a multiple of P (groups
 * of P) and warms up with 2(P-s-1) + (v-1) g forwards: on this clock, where messages are
 * free, those P-s-1 more only stash more, the step is no shorter. Here any M >= 1 runs,
 * deadlock-free: when M >= P the step is as short as when P divides M; when M < P (one
 * group) each pass round the ranks waits, as a pipeline of vP stages with M
 * micro-batches does.
 * Letters a, b, c, .. name a rank's chunks 0, 1, 2, ..; P = 2, M = 4, v = 2, tb = 1
 * (one slot is one chunk's forward, half a stage's):
 *
 *     stage 0 | F0a F1a F0b F1b .   B0b F2a B1b F3a B0a F2b B1a F3b B2b .   B3b B2a B3a
 *     stage 1 | .   F0a F1a F0b B0b F1b B1b F2a B0a F3a B1a F2b B2b F3b B3b B2a B3a .
 *     18 slots, 2 idle per stage: (P-1)(1+tb); 1F1B takes 2(M+P-1) = 10 slots of a
 *     whole stage, 20 of these, 4 idle.
 *
 * Schedule 3, ZB-H1 (Qi et al., 2023, "Zero Bubble Pipeline Parallelism", section 2.1):
 * the backward is cut in two, B (the input's gradient, which stage s-1 waits for) and
 * W (the weights' gradient, which nothing waits for but the end of the step). The order
 * is 1F1B's, with stage s putting off its W's by s micro-batches: W m runs right after
 * B m+s (the last min(s, M) after the last B). Each B goes on to stage s-1 at once (a
 * fused backward would do dW first), and the W's put off fill the tail, where 1F1B
 * idles. P = 4, M = 4, tb = tw = 1:
 *
 *     stage 0 | F0 F1 F2 F3 .  .  .  B0 W0 B1 W1 B2 W2 B3 W3
 *     stage 1 | .  F0 F1 F2 .  .  B0 F3 B1 W0 B2 W1 B3 W2 W3
 *     stage 2 | .  .  F0 F1 .  B0 F2 B1 F3 B2 W0 B3 W1 W2 W3
 *     stage 3 | .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 W0 W1 W2 W3
 *     15 slots, 3 idle per stage; 1F1B with its backward of 2 slots takes 21, 9 idle.
 *
 * The clock: one slot is one chunk's forward (a whole stage's when v = 1, so in
 * interleaved a stage's forward takes v slots and its step is 1/v as many stage-slots);
 * the input's gradient takes tb slots and the weights' tw. GPipe, 1F1B and interleaved
 * run both in one 'B' of tb + tw slots; zb-h1 runs 'B' (tb) and 'W' (tw) apart. tb =
 * tw = 1 is the usual model (a backward does twice a forward's work); dt_pp_timetable's
 * backward of tb slots is tb here with tw = 0.
 *
 * The closed forms (the unit tests hold each to a slot-by-slot simulation):
 *   slots    GPipe, 1F1B, interleaved:  (v max(M,P) + min(M,P) - 1) (1 + tb + tw)
 *            (M >= P: (vM + P-1)(1+tb+tw), the ideal vM(1+tb+tw) plus (P-1)(1+tb+tw),
 *            a bubble of (P-1)/(vM) of the ideal, as in Narayanan's paper; M < P: a
 *            pipeline of vP stages, (vP + M-1)(1+tb+tw));
 *            zb-h1:  max(M,P) + (P-1) tb + M (tb + tw): stage 0 idles once, from the
 *            end of its min(P, M) forwards until B 0 comes back, at P + (P-1) tb (P
 *            forwards down, P-1 B's back), and never again: the W's fill the tail.
 *   bubble   1 - (the slots a rank computes) / slots, the same on every rank:
 *            M >= P: (P-1) / (vM + P-1) (GPipe and 1F1B: v = 1, dt_pp_bubble);
 *            M < P: (v(P-M) + M-1) / (vP + M-1). zb-h1: (max(P-M, 0) + (P-1) tb) /
 *            slots; M >= P, tb = tw = 1: (P-1) / (3M + P-1), a third of 1F1B's idle
 *            3(P-1) slots, as the paper finds for equal F, B and W.
 *   stash    counted in chunk micro-batches (1/v of a stage's activations), from F
 *            until the operation that frees them (B; zb-h1: W). Interleaved: w + 1 =
 *            (v-1) g + P-s (at most vM), in stages' worth ((v-1) g + P-s)/v, over
 *            1F1B's P-s by (v-1)(g - (P-s))/v: as much on rank 0 when g = P, more on
 *            the others (Megatron-LM's longer warm-up holds P-s-1 more).
 *            zb-h1: min(P, M) on every stage, 1F1B's stage 0 peak: the paper's "same
 *            memory as 1F1B". At most min(P-s, M) of them are before their B (full
 *            activations, as in 1F1B); the rest hold only what W needs (each layer's
 *            input and output gradient).
 *   messages a rank sends per step (as many as it receives): M (2v - [s = 0] - [s =
 *            P-1]) for P > 1 (an activation from every chunk but the last virtual
 *            stage, a gradient from every chunk but the first), 0 for P = 1: interleaved
 *            sends v times 1F1B's messages, each the same size.
 * Every schedule runs the backwards (B, and zb-h1's W) of each chunk in increasing m, so
 * gradients accumulate in the same order whatever the schedule.
 * The functions below return -1 (bubble: -1.0) where dt_pp_valid does not hold, for s
 * outside 0..P-1, for tb < 1, tw < 0 (zb-h1: tw < 1), for an op not in the schedule,
 * and for a step of more than INT_MAX/2 slots. */

/* 1 when the schedule runs (P, M, v): schedule 0..3, P >= 1, M >= 1, v >= 1, v = 1
 * unless interleaved, P v M <= 2^24; else 0. */
int dt_pp_valid(int schedule, int P, int M, int v);

/* The operations of a stage: 2vM (zb-h1: 3M, F, B and W of each micro-batch). */
int dt_pp_nops(int schedule, int P, int M, int v);

/* The warm-up of stage s (see dt_pp_warmup): M for GPipe, else min((v-1) g + P-s-1, vM),
 * g interleaved's first group (1F1B and zb-h1, v = 1: min(P-s-1, M)). */
int dt_pp_warmup_v(int schedule, int P, int M, int v, int s);

/* Writes stage s's dt_pp_nops operations into ops, in the order it runs them; returns
 * their number. dt_pp_order for schedules 0 and 1, with v = 1. */
int dt_pp_order_v(int schedule, int P, int M, int v, int s, dt_pp_op *ops);

/* Where op (kind, micro, chunk) comes in stage s's order: the k with ops[k] equal to it. */
int dt_pp_index_v(int schedule, int P, int M, int v, int s, char kind, int micro,
                  int chunk);

/* The most chunk micro-batches stage s holds at once: the stash above. */
int dt_pp_peak_stash_v(int schedule, int P, int M, int v, int s);

/* The messages stage s sends in a step (activations and gradients; it receives as many). */
int dt_pp_messages_v(int schedule, int P, int M, int v, int s);

/* The slots a step takes, and the bubble: the closed forms above. */
int dt_pp_slots_v(int schedule, int P, int M, int v, int tb, int tw);
double dt_pp_bubble_v(int schedule, int P, int M, int v, int tb, int tw);

/* Lays every stage's operations on the clock, each as soon as its stage's previous
 * operation and its dependency have ended: F of virtual stage c on F of c-1, B of c on
 * B of c+1 (of the last, vP-1, on its F: the loss), W on its B. Writes start[s*n + k]
 * (n = dt_pp_nops; start has P*n entries), the slot where stage s starts ops[k] of
 * dt_pp_order_v, and returns the step's slots (dt_pp_slots_v); -1 on bad input or if
 * out of memory. */
int dt_pp_timetable_v(int schedule, int P, int M, int v, int tb, int tw, int *start);

/* Draws it as dt_pp_draw does: a cell per slot, "F2", "B0", "W1" (zb-h1), and with
 * v > 1 the chunk's letter ("F2b": micro-batch 2 through chunk 1); -1 also for v > 26. */
int dt_pp_draw_v(int schedule, int P, int M, int v, int tb, int tw, char *buf, size_t len);

/* ==== DDP buckets ====
 * One data-parallel step of L layers on a clock of slots, as lib/parallel/ddp.c runs it
 * with its communication thread. Every rank computes the same, so one rank's timetable
 * is every rank's:
 *   compute  the forwards of layers 0 .. L-1 (1 slot each, slots 0 .. L), then the
 *            backwards of layers L-1 .. 0 (2 slots each, dW and dx, as dt_pp_timetable's
 *            tb = 2; slots L .. 3L), then the optimizer (1 slot), once backward has ended
 *            and the last bucket is reduced.
 *   buckets  B runs of consecutive layers in backward order: bucket b holds part b of
 *            the layers L-1, L-2, .. 0 cut as dt_chunk_bounds cuts elements, so bucket 0
 *            holds the last layers (the ones backward reaches first) and, when L does not
 *            divide by B, the first L % B buckets one layer more. (ddp.c cuts by bytes,
 *            --bucket-kb: a bucket closes when the next layer would overflow it, so with
 *            equal layers the odd-sized bucket is the last one, layer 0's. Both put the
 *            larger buckets first; here B is chosen instead of a size.)
 *   comm     bucket b's allreduce takes c slots per layer it holds (c >= 0: cheap or dear
 *            communication; c does not depend on the ranks, as a ring's bytes per rank,
 *            2(N-1)/N of the bucket, hardly do). One thread runs the allreduces in
 *            bucket order: with overlap, bucket b starts when the backward of its last
 *            layer (its lowest) has ended and bucket b-1's allreduce is done; without,
 *            when backward has ended and bucket b-1 is done.
 *
 *     L = 6, B = 3, c = 1, overlap on: buckets {5,4} {3,2} {1,0}, ready at 10, 14, 18
 *     slot     0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15 16 17 18 19 20
 *     compute  F0 F1 F2 F3 F4 F5 B5 B5 B4 B4 B3 B3 B2 B2 B1 B1 B0 B0 .  .  opt
 *     comm     .  .  .  .  .  .  .  .  .  .  b0 b0 .  .  b1 b1 .  .  b2 b2 .
 *     21 slots, 4 of the 6 allreduce slots under backward; without overlap b0 b1 b2
 *     run at 18, 20, 22, none hidden, and the step takes 25 = 3L + cL + 1.
 *
 * The length. Without overlap it is the serial sum, 3L + cL + 1. With overlap, write
 * p_k for the layers of the buckets before bucket k and q_k = p_k + (bucket k's layers):
 * bucket k is ready at L + 2 q_k and the thread still has c (L - p_k) slots to run from
 * then, so the last allreduce ends at max over k of L + 2 q_k + c (L - p_k) (the k = B-1
 * term, 3L + c * (the last bucket's layers), is at least backward's end), and the
 * optimizer's slot follows.
 * What overlap hides (the allreduce slots that run under backward, which ends at 3L): no
 * more, for every k, than the buckets before k (c p_k, all the thread may run before
 * bucket k is ready) plus the backward still to come after it (2 (L - q_k)); a thread
 * that never idles while a bucket waits reaches the least of these:
 *     hidden = min over k of  c p_k + 2 (L - q_k)      (0 without overlap)
 * (in layers, bucket k holding [lo, hi): the allreduces of the layers above it plus the
 * backward of those below it, c (L - hi) + 2 lo).
 * k = B-1 gives c (L - n_last), every bucket but the last; k = 0 gives 2 (L - n_0), the
 * backward left once bucket 0 is ready. The viewer's yardstick, "at best" (viz
 * timetable.h, hidden_best), is every bucket but the last, at most the whole backward:
 *     best = min(c (L - n_last), 2L)
 * hidden reaches it when the buckets are equal and c <= 2 (communication keeps up with
 * backward). The shares are hidden / (cL) and best / (cL).
 * The int functions below return -1 for L < 1, B < 1, B > L, c < 0, overlap not 0 or
 * 1, or a step longer than INT_MAX / 2 slots. */

/* Bucket b holds layers [*lo, *hi): consecutive, bucket 0 ending at L and bucket B-1
 * starting at 0. *lo = *hi = -1 on bad input or b outside 0..B-1. */
void dt_ddp_bucket_layers(int L, int B, int b, int *lo, int *hi);

/* Lays one step on the clock. Writes fwd[i] and bwd[i] (L entries each): the slots where
 * layer i's forward and backward start; ar0[b] and ar1[b] (B entries each): where bucket
 * b's allreduce starts and ends (ar1 = ar0 + c * its layers); *opt: where the optimizer
 * starts. Any of them may be NULL. Returns the step's length in slots, *opt + 1. */
int dt_ddp_timetable(int L, int B, int c, int overlap, int *fwd, int *bwd, int *ar0,
                     int *ar1, int *opt);

/* The allreduce slots under backward, min over k of c p_k + 2 (L - q_k), 0 without
 * overlap; and the viewer's best, min(c (L - n_last), 2L), whatever the overlap. */
int dt_ddp_hidden(int L, int B, int c, int overlap);
int dt_ddp_hidden_best(int L, int B, int c);

#endif /* DT_SCHEDULE_H */
