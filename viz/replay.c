/* The viewer's model, read back: positions, and the masks and bytes at a position,
 * replayed from a call's start (see model.h). Everything here is a pure function of
 * the model and the position, so stepping back is as exact as stepping forward. */
#include "model.h"

#include <string.h>

#include "schedule.h"

/* ==== members ==== */

int dv_call_index(const dv_call *c, int rank)
{
    if (rank < 0 || rank >= DV_MAX_RANKS || !(c->members >> rank & 1))
        return -1;
    return __builtin_popcountll(c->members & (((dv_mask)1 << rank) - 1));
}

int dv_cell_block(const dv_call *c, int cell)
{
    if (c->cls != DV_CLASS_BLOCKS || cell < 0 || cell >= c->ncells || c->size < 1)
        return -1;
    int a = 0, z = c->size;                     /* last block that starts by the cell */
    while (z - a > 1) {
        int mid = a + (z - a) / 2;
        size_t lo, hi;
        dt_chunk_bounds((size_t)c->count, c->size, mid, &lo, &hi);
        if ((long long)lo <= c->cell_lo[cell]) a = mid; else z = mid;
    }
    return a;
}

/* ==== positions ==== */

void dv_pos_split(const dv_model *m, int pos, int *call, int *k)
{
    *call = -1;
    *k = 0;
    if (m->ncalls <= 0)
        return;
    pos = pos < 0 ? 0 : pos >= m->npos ? m->npos - 1 : pos;
    int a = 0, z = m->ncalls;                   /* last call with first_pos <= pos */
    while (z - a > 1) {
        int mid = a + (z - a) / 2;
        if (m->calls[mid].first_pos <= pos) a = mid; else z = mid;
    }
    int kk = pos - m->calls[a].first_pos;
    *call = a;
    *k = kk > m->calls[a].nframes ? m->calls[a].nframes : kk;
}

double dv_pos_time(const dv_model *m, int pos)
{
    int c, k;
    dv_pos_split(m, pos, &c, &k);
    if (c < 0)
        return m->t_begin;
    const dv_call *call = &m->calls[c];
    return k < call->nframes ? m->frames[call->first_frame + k].t0 : call->t1;
}

/* Calls are sorted by their first event and a call's positions lie within [t0, t1], so
 * only the calls that begin by t can hold the answer, and the last of them with a
 * position by t does: a binary search, then (usually) one call's positions. */
int dv_pos_at_time(const dv_model *m, double t)
{
    int a = 0, z = m->ncalls;                   /* a: the calls that begin by t */
    while (a < z) {
        int mid = a + (z - a) / 2;
        if (m->calls[mid].t0 <= t) a = mid + 1; else z = mid;
    }
    for (int c = a - 1; c >= 0; c--) {
        const dv_call *call = &m->calls[c];
        for (int k = call->nframes; k >= 0; k--) {
            double tk = k < call->nframes ? m->frames[call->first_frame + k].t0 : call->t1;
            if (tk <= t)
                return call->first_pos + k;
        }
    }
    return 0;
}

/* ==== replaying the masks ==== */

/* Replays frame fr onto st (nc cells a rank). Every message reads the masks from before
 * the frame: the cells the frame writes are saved first, and read back from there, so
 * the cost is the cells the messages carry, not the whole state. */
static void replay_frame(const dv_model *m, const dv_frame *fr, int nc, int from_sender,
                         dv_mask *st, dv_mask *old, unsigned char *mark)
{
    enum { SAVED = 1, COPIED = 2 };
    int nr = m->nranks;
    for (int pass = 0; pass < 3; pass++)
        for (int i = 0; i < fr->nmsg; i++) {
            const dv_msg *g = &m->msgs[fr->first_msg + i];
            if (g->src < 0 || g->src >= nr || g->dst < 0 || g->dst >= nr)
                continue;
            int c0 = g->c0 < 0 ? 0 : g->c0, c1 = g->c1 > nc ? nc : g->c1;
            for (int x = c0; x < c1; x++) {
                int d = g->dst * nc + x, s = g->src * nc + x;
                if (pass == 0 && !mark[d]) {          /* save what is overwritten */
                    old[d] = st[d];
                    mark[d] = SAVED;
                } else if (pass == 1) {               /* move */
                    dv_mask in = from_sender ? (dv_mask)1 << g->src : mark[s] ? old[s] : st[s];
                    st[d] = g->add || (mark[d] & COPIED) ? st[d] | in : in;
                    mark[d] |= g->add ? 0 : COPIED;
                } else if (pass == 2) {
                    mark[d] = 0;
                }
            }
        }
}

void dv_state(const dv_model *m, int call, int k, dv_mask *out)
{
    if (m == NULL || out == NULL || call < 0 || call >= m->ncalls)
        return;
    const dv_call *c = &m->calls[call];
    int nr = m->nranks, nc = c->ncells;
    if (nr < 1 || nr > DV_MAX_RANKS || nc < 1 || nc > DV_MAX_CELLS || c->init == NULL)
        return;
    memcpy(out, c->init, (size_t)nr * nc * sizeof *out);
    k = k < 0 ? 0 : k > c->nframes ? c->nframes : k;
    dv_mask old[DV_MAX_RANKS * DV_MAX_CELLS];
    unsigned char mark[DV_MAX_RANKS * DV_MAX_CELLS] = { 0 };
    for (int f = 0; f < k; f++)
        replay_frame(m, &m->frames[c->first_frame + f], nc, c->from_sender, out, old, mark);
}

void dv_bytes_sent(const dv_model *m, int call, int k, double *sent)
{
    if (m == NULL || sent == NULL)
        return;
    for (int r = 0; r < m->nranks; r++)
        sent[r] = 0;
    if (call < 0 || call >= m->ncalls)
        return;
    const dv_call *c = &m->calls[call];
    for (int i = 0; i < c->nsent && c->sent[i].frame < k; i++)   /* sorted by frame */
        if (c->sent[i].rank >= 0 && c->sent[i].rank < m->nranks)
            sent[c->sent[i].rank] += c->sent[i].nbytes;
}

/* ==== ring attention ==== */

/* The causal verdict for queries [a, b) against keys [k0, k1): query i sees keys up to
 * i, so none when the last query comes before the first key, all when the first query
 * comes at or after the last key. */
static dv_attn causal_pair(long long a, long long b, long long k0, long long k1)
{
    return b - 1 < k0 ? DV_ATTN_SKIP : a >= k1 - 1 ? DV_ATTN_FULL : DV_ATTN_PART;
}

dv_attn dv_attn_causal(const dv_call *c, int r, int cell)
{
    int nc = c->ncells, full = 0, none = 0;
    if (c->init == NULL || r < 0 || r >= DV_MAX_RANKS || cell < 0 || cell >= nc)
        return DV_ATTN_SKIP;
    long long k0 = c->cell_lo[cell], k1 = c->cell_lo[cell + 1];
    if (k1 <= k0)
        return DV_ATTN_SKIP;                    /* an empty cell: no keys at all */
    for (int q = 0; q < nc; q++) {
        if (!(c->init[r * nc + q] >> r & 1) || c->cell_lo[q + 1] <= c->cell_lo[q])
            continue;                           /* not one of r's queries */
        dv_attn v = causal_pair(c->cell_lo[q], c->cell_lo[q + 1], k0, k1);
        full += v == DV_ATTN_FULL;
        none += v == DV_ATTN_SKIP;
        if (v == DV_ATTN_PART)
            return DV_ATTN_PART;
    }
    return full && none ? DV_ATTN_PART : full ? DV_ATTN_FULL : DV_ATTN_SKIP;
}

void dv_attn_state(const dv_model *m, int call, int k, dv_mask *held, unsigned char *done)
{
    if (m == NULL || held == NULL || done == NULL || call < 0 || call >= m->ncalls)
        return;
    const dv_call *c = &m->calls[call];
    int nr = m->nranks, nc = c->ncells;
    if (!c->ring_attn || c->attn_frame == NULL || nr < 1 || nr > DV_MAX_RANKS || nc < 1 ||
        nc > DV_MAX_CELLS)
        return;
    k = k < 0 ? 0 : k > c->nframes ? c->nframes : k;
    dv_state(m, call, k, held);                 /* what each cell last received */
    int last[DV_MAX_RANKS];                     /* the last frame before k r received in */
    for (int r = 0; r < nr; r++)
        last[r] = -1;
    for (int f = 0; f < k; f++) {
        const dv_frame *fr = &m->frames[c->first_frame + f];
        for (int i = 0; i < fr->nmsg; i++) {
            const dv_msg *g = &m->msgs[fr->first_msg + i];
            if (g->dst >= 0 && g->dst < nr)
                last[g->dst] = f;
        }
    }
    for (int r = 0; r < nr; r++)
        for (int x = 0; x < nc; x++) {
            dv_mask *h = &held[r * nc + x];
            if (last[r] < 0) {
                *h = c->init[r * nc + x];       /* its own block */
            } else {
                int got = 0;                    /* is x among the cells of that frame? */
                const dv_frame *fr = &m->frames[c->first_frame + last[r]];
                for (int i = 0; i < fr->nmsg && !got; i++) {
                    const dv_msg *g = &m->msgs[fr->first_msg + i];
                    got = g->dst == r && x >= g->c0 && x < g->c1;
                }
                *h = got ? *h : 0;
            }
            int f = c->attn_frame[r * nc + x];
            done[r * nc + x] = f >= 0 && f < k ? (unsigned char)dv_attn_causal(c, r, x)
                                               : DV_ATTN_NOT_YET;
        }
}
