/* The training loop of serial, ddp, tp, pp and hybrid: D data-parallel replicas of a
 * pipeline of P stages, each stage's layers cut over T tensor-parallel ranks. The
 * single modes are its special cases: ddp is D = N, tp is T = N, pp is P = N, serial is
 * D = T = P = 1.
 *
 * Ranks are laid out with the tensor-parallel group fastest, then the stage, then the
 * replica: rank = (d * P + p) * T + t. Tensor parallelism talks the most (two
 * allreduces per layer pair per micro-batch), so its ranks are neighbours, which
 * mpiexec puts on the same host; data parallelism talks least (one allreduce of the
 * gradients per step), so it spans the farthest. Three MPI_Comm_split calls make the
 * groups:
 *
 *   N = 8, D = 2, P = 2, T = 2      tp groups: {0,1} {2,3} {4,5} {6,7}
 *   rank:  0 1 | 2 3 | 4 5 | 6 7    pp groups: {0,2} {1,3} {4,6} {5,7}
 *   d:     0 0   0 0   1 1   1 1    dp groups: {0,4} {1,5} {2,6} {3,7}
 *   p:     0 0   1 1   0 0   1 1
 *   t:     0 1   0 1   0 1   0 1
 *
 * One step:
 *   1. every replica takes its B/D rows of the global batch, cut into M micro-batches
 *   2. the pipeline runs forward and backward of the micro-batches (pp.c; with P = 1
 *      simply one after the other, accumulating gradients); each layer's matrices are
 *      cut over the tp group (model.c, tp.c)
 *   3. as backward finishes each layer for the last micro-batch, its gradients join a
 *      bucket that is summed over the dp group (ddp.c)
 *   4. fp16: one overflow verdict for all ranks, and the loss scaler (mixed.c)
 *   5. every rank updates the weights it holds, all replicas alike
 *
 * Because the loss of each row is scaled by 1/B for the global batch B, the gradients
 * the replicas sum are exactly the serial gradient, cut differently: only rounding
 * differs.
 *
 * Context parallelism (the GPT, --cp C) is a fourth dimension, between the tensor
 * group and the stage: rank = ((d * P + p) * C + c) * T + t. The C ranks of a cp group
 * hold the same weights and take the same rows, each its own positions of every
 * sequence (cp.c); their gradients are parts of one replica's, so the gradient
 * allreduce runs over dp x cp (D * C ranks), and each keeps its positions' labels. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "schedule.h"
#include "trace.h"

static void bucket_ready(int i, void *ctx)
{
    dti_ddp_layer_done(ctx, i);
}

/* Appends a printf-formatted piece to s (len bytes). */
__attribute__((format(printf, 3, 4)))
static void append(char *s, size_t len, const char *fmt, ...)
{
    size_t used = strlen(s);
    if (used + 1 >= len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s + used, len - used, fmt, ap);
    va_end(ap);
}

void dti_train_hybrid(dti_run *r)
{
    const dt_train_config *c = r->cfg;
    int N = r->size, D = 1, T = 1, P = 1, C = 1;
    switch (c->mode) {
    case DT_MODE_DDP: D = N; break;
    case DT_MODE_TP: T = N; break;
    case DT_MODE_PP: P = N; break;
    case DT_MODE_HYBRID: D = c->dp; T = c->tp; P = c->pp; C = c->cp > 1 ? c->cp : 1; break;
    default: break;
    }
    int t = r->rank % T, k = (r->rank / T) % C, p = (r->rank / (T * C)) % P;
    int d = r->rank / (T * C * P);
    MPI_Comm tp, pp, dp, cp = MPI_COMM_NULL;
    DT_CHECK_MPI(MPI_Comm_split(r->comm, (d * P + p) * C + k, t, &tp));
    DT_CHECK_MPI(MPI_Comm_split(r->comm, (d * C + k) * T + t, p, &pp));
    DT_CHECK_MPI(MPI_Comm_split(r->comm, p * T + t, d * C + k, &dp));    /* dp x cp */
    r->made[0] = tp; r->made[1] = pp; r->made[2] = dp;  /* a checkpoint refusal frees */
    r->nmade = 3;                                        /* them (checkpoint.c) */
    if (C > 1) {
        DT_CHECK_MPI(MPI_Comm_split(r->comm, (d * P + p) * T + t, k, &cp));
        r->made[r->nmade++] = cp;
    }

    /* this rank's layers, rows and micro-batches */
    size_t l0, l1;
    dt_chunk_bounds((size_t)dti_units(c), P, p, &l0, &l1);
    int B = c->batch, Bd = B / D, M = (P > 1 ? c->micro : 1) * c->accum, mb = Bd / M;
    dti_model m;
    int v = c->schedule == DT_PP_INTERLEAVED && P > 1 ? c->virtual_stages : 0;
    if (v)                            /* chunks p, p + P, ... of v P (dti_model_init_chunks) */
        dti_model_init_chunks(&m, r, v, P, p, tp, c->tp_style, mb);
    else
        dti_model_init(&m, r, (int)l0, (int)l1, tp, c->tp_style, mb);
    dti_model_tie(&m, pp);            /* the GPT's wte, on the first and the last stage */
    if (C > 1)                        /* the GPT's positions over the cp group */
        dti_model_cp(&m, cp, mb);

    /* weights: every rank draws the whole model from the seed and keeps its part */
    float *full = calloc(r->nparams, sizeof(float));
    DT_REQUIRE(full != NULL, "out of host memory");
    dti_init_weights(c, full);
    int fp16 = m.type != MPI_FLOAT;
    float *master = fp16 ? dti_alloc(r, DTI_PARAMS, m.n * sizeof(float), 0) : m.params;
    dti_model_take(&m, full, master);
    if (fp16)
        dti_from_float(master, m.params, m.type, m.n);
    int S = dt_optim_state_per_param(c->optim.kind);
    size_t state_bytes = m.n * S * sizeof(float);
    float *state = dti_alloc(r, DTI_OPTIM, state_bytes, 0);

    /* gradient buckets; compressed ones also on one rank, to show what it costs */
    dti_ddp *ddp = D * C > 1 || c->compress ? dti_ddp_new(m.grads, m.type, m.off, m.nl, dp,
                                         (size_t)c->bucket_kb * 1024, c->overlap) : NULL;
    if (ddp && c->overlap)            /* its duplicate: a checkpoint refusal frees it */
        r->made[r->nmade++] = dti_ddp_comm(ddp);
    int own = ddp ? dti_ddp_compress(ddp, r) : 0;    /* error feedback: per-rank state */

    /* checkpoints: replica 0's ranks hold all there is (every replica is the same,
     * unless error feedback gives each rank its own); in fp16 the working weights are
     * the master weights rounded */
    dti_ckpt_region(r, "weights", master, m.n * sizeof(float));
    dti_ckpt_region(r, "state", state, state_bytes);
    dti_span *spans = dti_calloc((size_t)dti_model_nspans(&m), sizeof *spans);
    int nspans = dti_model_spans(&m, spans);     /* what they hold: another layout */
    dti_ckpt_map(r, "weights", 1, spans, nspans);    /* can resume them */
    dti_ckpt_map(r, "state", S, spans, nspans);
    free(spans);
    int s0 = dti_ckpt_start(r, own ? r->rank : t + T * C * p);  /* replica 0's, cp 0's */
    if (s0 > 0)                       /* the GPT's wte on the last stage: unmapped */
        dti_model_tie_sync(&m, master, state, S);
    if (fp16 && s0 > 0)
        dti_from_float(master, m.params, m.type, m.n);

    dti_pp *pipe = dti_pp_new(&m, pp, M, mb, c->schedule);
    int lpe = dti_labels_per_example(c);   /* the GPT's seq, else 1 */
    float *x = malloc((size_t)Bd * dti_data_cols(c) * sizeof(float));
    int *y = malloc((size_t)Bd * lpe * sizeof(int));
    int *ymine = C > 1 ? malloc((size_t)Bd * m.lpe * sizeof(int)) : y;  /* cp: its own */
    DT_REQUIRE(x && y && ymine, "out of host memory");
    int last = p == P - 1;
    double wait_sum = 0, bubble = 0;
    int stash = 0;
    size_t msgs = 0, bytes = 0;

    for (int s = s0 + 1; s <= c->steps; s++) {
        dti_step_begin(r, s);
        dt_memzero(m.grads, m.n * dti_work_size(r));
        dti_batch(c, s - 1, B, d * Bd, Bd, x, y);
        if (C > 1)
            dti_model_labels(&m, y, ymine, Bd);
        double loss = dti_pp_step(pipe, x, ymine, dti_loss_scale(r) / (float)(B * lpe), s,
                                  ddp ? bucket_ready : NULL, ddp);
        if (ddp) {
            dti_ddp_finish(ddp);
            wait_sum += dti_ddp_wait_seconds(ddp);
        }
        dti_model_shared_sums(&m, s);
        char extra[160] = "", scaler[96];
        int found = fp16 && dti_nonfinite(m.grads, m.type, m.n);
        int apply = dti_scaler_decide(r, found, r->comm, scaler, sizeof scaler);
        if (apply) {
            double t0 = dt_trace_now();
            dti_master_step(r, master, m.params, m.grads, state, m.n);
            dti_compute_event("optimizer", s, -1, -1, t0);
        }
        /* the loss: the last stage's first tp rank of each replica has its rows' sum */
        double part = last && t == 0 ? loss : 0, total = 0;
        if (N > 1)
            dt_reduce(&part, &total, 1, MPI_DOUBLE, MPI_SUM, 0, r->comm);
        else
            total = part;
        if (P > 1) {
            dti_pp_stats(pipe, &bubble, &stash, &msgs, &bytes);
            append(extra, sizeof extra, "bubble %.2f  ", bubble);
        }
        if (ddp) {
            char z[96];
            dti_ddp_step_text(ddp, z, sizeof z);
            append(extra, sizeof extra, "comm wait %.2f ms  %s%s",
                   dti_ddp_wait_seconds(ddp) * 1e3, z, *z ? "  " : "");
        }
        append(extra, sizeof extra, "%s", scaler);
        dti_step_end(r, s, (float)(total / ((double)B * lpe)), !apply, extra);
        dti_ckpt_step(r, s);
    }

    /* the summary */
    if (C > 1) {
        int T0 = m.lpe;
        char cut[160];
        if (dti_cp_zigzag(m.cp))
            snprintf(cut, sizeof cut, "zig-zag: chunks k and %d-k of %d", 2 * C - 1, 2 * C);
        else
            snprintf(cut, sizeof cut, "the plain cut, chunk k of %d: --seq %d is no multiple "
                     "of %d, so the last rank computes about %d times the first's causal "
                     "pairs", C, c->gpt.seq, 2 * C, 2 * C - 1);
        dti_summary(r, "context parallel: %d ranks a sequence, each %d of its %d positions "
                    "(%s); attention by ring attention, each block's keys and values "
                    "passed on while the next is computed: %d passes a block forward, %d "
                    "backward (the keys' and values' gradients going round with them); the "
                    "gradients summed over dp x cp = %d ranks", C, T0, c->gpt.seq, cut,
                    C - 1, 2 * C - 1, D * C);
    }
    if (T > 1 && c->sp)
        dti_summary(r, "tensor parallel: %d ranks, Megatron: heads and MLP columns split; "
                    "sequence parallel: the LayerNorms and residual adds on %d of %d "
                    "positions a rank (rank 0), per block two reduce-scatters and two "
                    "allgathers forward, as many (and two more allgathers of the "
                    "LayerNorms' outputs) backward, and one allreduce of the LayerNorms' "
                    "gradients a step", T, dti_gpt_model_rows(&m), c->gpt.seq);
    else if (T > 1)
        dti_summary(r, "tensor parallel: %d ranks, %s", T, c->kind == DT_MODEL_GPT
                    ? "Megatron: heads and MLP columns split, per block two allreduces "
                      "forward (after attention, after the MLP), two backward"
                    : c->tp_style == DT_TP_MEGATRON
                    ? "Megatron: per layer pair one allreduce forward, one backward"
                    : "every layer by columns: one allgather forward, one allreduce "
                      "backward");
    if (P > 1) {
        /* each stage's last bubble, peak stash, messages and bytes, to rank 0 of the run
         * (stage q's first rank: q T C) */
        double mine[4] = { bubble, stash, (double)msgs, (double)bytes };
        double *all = malloc(4 * sizeof(double) * N);
        DT_REQUIRE(all != NULL, "out of host memory");
        dti_mpi_gather(mine, 4, MPI_DOUBLE, all, 0, r->comm);
        static const char *const names[] = { "GPipe", "1F1B", "interleaved 1F1B",
                                             "ZB-H1" };
        int vv = v ? v : 1, sch = (int)c->schedule;
        char chunks[64] = "";
        if (v)
            snprintf(chunks, sizeof chunks, ", %d chunks a stage", v);
        dti_summary(r, "pipeline: %d stages, %d micro-batches of %d rows, %s%s", P, M, mb,
                    names[sch], chunks);
        if (sch == DT_PP_ZBH1)        /* F, B and W one slot each (lib/schedule.h) */
            dti_summary(r, "  ideal bubble, F = B = W: (max(p-m,0) + p-1) / slots = %.3f "
                        "(1F1B's, backward = B + W: %.3f)",
                        dt_pp_bubble_v(sch, P, M, 1, 1, 1),
                        dt_pp_bubble_v(DT_PP_1F1B, P, M, 1, 1, 1));
        else if (M >= P || sch != DT_PP_INTERLEAVED)
            dti_summary(r, "  ideal bubble (p-1)/(%sm+p-1) = %.3f", v ? "v" : "",
                        dt_pp_bubble_v(sch, P, M, vv, 1, 1));
        else
            dti_summary(r, "  ideal bubble (v(p-m)+m-1)/(vp+m-1) = %.3f (m < p: each pass "
                        "round the stages waits)", dt_pp_bubble_v(sch, P, M, vv, 1, 1));
        if (r->rank == 0) {
            r->res->stages = P;
            r->res->stage_bubble = malloc(P * sizeof(double));
            r->res->stage_stash = malloc(P * sizeof(int));
            r->res->stage_messages = malloc(P * sizeof(size_t));
            r->res->stage_bytes = malloc(P * sizeof(size_t));
            DT_REQUIRE(r->res->stage_bubble && r->res->stage_stash &&
                       r->res->stage_messages && r->res->stage_bytes, "out of host memory");
            for (int q = 0; q < P; q++) {
                r->res->stage_bubble[q] = all[4 * q * T * C];
                r->res->stage_stash[q] = (int)all[4 * q * T * C + 1];
                r->res->stage_messages[q] = (size_t)all[4 * q * T * C + 2];
                r->res->stage_bytes[q] = (size_t)all[4 * q * T * C + 3];
            }
        }
        for (int q = 0; q < P && r->rank == 0; q++) {
            char layers[96] = "";
            for (int j = 0; j < vv; j++) {
                size_t a, b;
                dt_chunk_bounds((size_t)dti_units(c), vv * P, j * P + q, &a, &b);
                if (b - a == 1 && v)
                    append(layers, sizeof layers, "%s%zu", j ? ", " : "", a);
                else
                    append(layers, sizeof layers, "%s%zu..%zu", j ? ", " : "", a, b - 1);
            }
            dti_summary(r, "  stage %d (layers %s): bubble %.3f measured, peak stashed "
                        "activations %d%s", q, layers, all[4 * q * T * C],
                        (int)all[4 * q * T * C + 1], v ? " chunk micro-batches" : "");
        }
        free(all);
    }
    if (ddp) {
        r->res->buckets = dti_ddp_nbuckets(ddp);
        dti_summary(r, "data parallel: %d replicas, %d bucket%s of at most %d KiB, "
                    "overlap %s;", D, r->res->buckets, r->res->buckets == 1 ? "" : "s",
                    c->bucket_kb, c->overlap ? "on" : "off");
        dti_summary(r, "  mean wait for communication after backward %.3f ms",
                    wait_sum / (c->steps - s0) * 1e3);
        dti_ddp_summary(ddp, r, c->steps - s0);
    }

    /* the final weights: replica 0 owns them */
    memset(full, 0, r->nparams * sizeof(float));
    if (d == 0 && k == 0) {           /* (cp's ranks hold the same weights) */
        float *h = malloc(m.n * sizeof(float));
        DT_REQUIRE(h != NULL, "out of host memory");
        dt_memcpy(h, master, m.n * sizeof(float));
        dti_model_put(&m, h, full);
        free(h);
    }
    dti_result_params(r, full);

    free(full);
    free(x);
    if (ymine != y)
        free(ymine);
    free(y);
    if (ddp)
        dti_ddp_free(ddp);
    dti_pp_free(pipe);
    dti_free(r, DTI_OPTIM, state, state_bytes);
    if (fp16)
        dti_free(r, DTI_PARAMS, master, m.n * sizeof(float));
    dti_model_free(&m);
    r->nmade = 0;
    MPI_Comm_free(&tp);
    MPI_Comm_free(&pp);
    MPI_Comm_free(&dp);
    if (cp != MPI_COMM_NULL)
        MPI_Comm_free(&cp);
}
