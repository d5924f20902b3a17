/* A GPT unit's compute events a part at a time, and the collectives that split them
 * (parallel_internal.h: dti_gpt_clock, dti_gpt_comm_begin): shared by model_gpt.c,
 * cp.c, model.c and moe_gpt.c, which record the GPT's training in the trace. */
#include "parallel_internal.h"
#include "trace.h"

void dti_gpt_clock_part(int u, int part, void *clock)
{
    dti_gpt_clock *k = clock;
    k->done_u = u;
    k->done_part = part;
    if (dt_gpt_part_last(part, k->phase[0] == 'b')) {
        k->last = part;
        return;
    }
    dti_compute_part(k->phase, dt_gpt_part_name(part), k->step, u, k->micro, k->t0);
    k->t0 = dt_trace_now();
}

void dti_gpt_clock_end(dti_gpt_clock *k, int u)
{
    dti_compute_part(k->phase, dt_gpt_part_name(k->last), k->step, u, k->micro, k->t0);
    k->t0 = dt_trace_now();
}

/* The unit and part under way on clock k, from the part done last: forward a block's
 * attention, then its MLP; backward its recomputed forward (full: the cut's
 * recompute), its MLP, its attention; the embeddings and the final unit whole */
static void under_way(const dti_gpt_clock *k, int L, int full, int *u, int *part)
{
    int back = k->phase[0] == 'b', ended = dt_gpt_part_last(k->done_part, back);
    if (!back) {
        *u = ended ? k->done_u + 1 : k->done_u;
        *part = ended ? DT_GPT_ATTN : DT_GPT_MLP;
    } else if (ended) {
        *u = k->done_u - 1;
        *part = full ? DT_GPT_RECOMPUTE : DT_GPT_MLP;
    } else {
        *u = k->done_u;
        *part = k->done_part == DT_GPT_RECOMPUTE ? DT_GPT_MLP : DT_GPT_ATTN;
    }
    if (*u == 0 || *u == L + 1)
        *part = DT_GPT_UNIT;
}

double dti_gpt_comm_begin(dti_model *m, int *u, int *forward)
{
    dti_gpt_clock *k = m->clock;
    int part = DT_GPT_UNIT;
    *u = -1;
    *forward = 1;
    if (k) {
        under_way(k, m->g->layers, m->cut.recompute == DT_GPT_RECOMPUTE_FULL, u, &part);
        dti_compute_part(k->phase, dt_gpt_part_name(part), k->step, *u, k->micro, k->t0);
        *forward = k->phase[0] == 'f' || part == DT_GPT_RECOMPUTE;
    }
    return dt_trace_now();
}

void dti_gpt_comm_end(dti_model *m, const char *coll, const char *phase, int u,
                      size_t nbytes, double t0)
{
    dti_gpt_clock *k = m->clock;
    if (k == NULL)
        return;
    dti_mark(coll, phase, k->step, u, k->micro < 0 ? 0 : (size_t)k->micro,
             k->micro < 0 ? 0 : (size_t)k->micro + 1, nbytes, t0);
    k->t0 = dt_trace_now();
}

