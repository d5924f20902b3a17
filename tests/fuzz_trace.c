/* libFuzzer target: the trace reader, dtviz's model and its training timetable on any
 * bytes.
 *
 * The bytes are a trace file, read with dt_trace_read_stream; when the reader accepts
 * them, the model is built and every position is visited as the viewer would (split,
 * time, the masks, the bytes, the formula, the phase's sentence), up to MAX_POS of them;
 * then the timetable is built from the model (timetable.h) and read as the viewer would:
 * every step described, the block and the stash at a few times. An input whose first
 * byte is ALGO_BYTE instead picks a built-in algorithm, a rank count and a count from the
 * bytes after it (out-of-range ones included); TRAIN_BYTE picks a built-in pipeline
 * schedule, a stage count and a micro-batch count the same way. Besides the sanitizers'
 * findings, a model or timetable that breaks its own contract (model.h, timetable.h)
 * aborts: npos, frames and messages that do not add up, masks naming ranks that do not
 * exist, bytes that shrink, blocks out of order or on ranks that do not exist, a built-in
 * pipeline the timetable refuses.
 *
 *   make build/fuzz/fuzz_trace
 *   build/fuzz/fuzz_trace -dict=tests/fuzz_trace.dict -max_total_time=60 CORPUS_DIR
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"
#include "timetable.h"

#define MAX_POS 2000             /* positions visited per input, spread evenly */
#define MAX_STEPS 2000           /* timetable steps described per input, spread evenly */
#define ALGO_BYTE 0xA5
#define TRAIN_BYTE 0xA6

/* The model broke its contract: say how, and stop (the fuzzer keeps the input). */
#define EXPECT(cond, ...) do { if (!(cond)) { fprintf(stderr, "fuzz_trace: " __VA_ARGS__); \
        fprintf(stderr, "\n"); abort(); } } while (0)

/* A set of transports (dv_msg.vias, dv_tt_block.vias): bits 1..DT_TRACE_NVIA-1 only,
 * each of them a name in words. */
static int vias_ok(unsigned vias)
{
    char s[64];
    dv_vias_text(vias, s, sizeof s);
    return (vias & ~((1u << DT_TRACE_NVIA) - 2)) == 0 && (vias == 0) == (s[0] == '\0');
}

/* The arrays hang together and the positions add up. */
static void check_struct(const dv_model *m)
{
    EXPECT(m->nranks >= 1 && m->nranks <= DV_MAX_RANKS, "nranks %d", m->nranks);
    EXPECT(m->t_end > m->t_begin, "t_end %g <= t_begin %g", m->t_end, m->t_begin);
    int f = 0, q = 0, pos = 0;
    for (int c = 0; c < m->ncalls; c++) {
        const dv_call *C = &m->calls[c];
        EXPECT(C->first_frame == f && C->nframes >= 0 && C->first_pos == pos,
               "call %d: first frame %d, %d frames, first position %d", c, C->first_frame,
               C->nframes, C->first_pos);
        EXPECT(C->ncells >= 1 && C->ncells <= DV_MAX_CELLS && C->init != NULL,
               "call %d: %d cells", c, C->ncells);
        EXPECT(C->cell_lo[C->ncells] == C->count, "call %d: cells end at %lld, count %lld",
               c, C->cell_lo[C->ncells], C->count);
        for (int i = 0; i < C->ncells; i++)
            EXPECT(C->cell_lo[i] <= C->cell_lo[i + 1], "call %d: cell %d backwards", c, i);
        for (int k = 0; k < C->nframes; k++, f++) {
            const dv_frame *F = &m->frames[f];
            EXPECT(F->call == c && F->first_msg == q && F->nmsg >= 0,
                   "frame %d: call %d, first message %d", f, F->call, F->first_msg);
            for (int i = 0; i < F->nmsg; i++, q++) {
                const dv_msg *M = &m->msgs[q];
                EXPECT(M->src >= 0 && M->src < m->nranks && M->dst >= 0 &&
                       M->dst < m->nranks && M->c0 >= 0 && M->c0 <= M->c1 &&
                       M->c1 <= C->ncells, "message %d: %d -> %d cells [%d, %d) of %d", q,
                       M->src, M->dst, M->c0, M->c1, C->ncells);
                EXPECT(vias_ok(M->vias), "message %d: transports %#x", q, M->vias);
            }
        }
        pos += C->nframes + 1;
    }
    EXPECT(f == m->nframes && q == m->nmsgs, "frames %d of %d, messages %d of %d", f,
           m->nframes, q, m->nmsgs);
    EXPECT(m->npos == (m->ncalls ? pos : 1), "npos %d, want %d", m->npos,
           m->ncalls ? pos : 1);
}

/* What the viewer does at a position, with the contract's checks. */
static void visit(const dv_model *m, int pos, dv_mask *st, size_t stcap)
{
    int c, k;
    dv_pos_split(m, pos, &c, &k);
    double t = dv_pos_time(m, pos);
    int back = dv_pos_at_time(m, t);
    EXPECT(back >= 0 && back < m->npos, "at_time(time(%d)) = %d of %d", pos, back, m->npos);
    EXPECT(!(dv_pos_time(m, back) > t), "at_time(%g) = %d, whose time is %g", t, back,
           dv_pos_time(m, back));
    if (c < 0) {
        EXPECT(m->ncalls == 0, "position %d: no call, but %d calls", pos, m->ncalls);
        return;
    }
    EXPECT(c < m->ncalls && k >= 0 && k <= m->calls[c].nframes, "position %d: call %d k %d",
           pos, c, k);
    const dv_call *C = &m->calls[c];
    if ((size_t)m->nranks * C->ncells <= stcap) {
        dv_state(m, c, k, st);
        dv_mask ranks = m->nranks >= 64 ? ~(dv_mask)0 : ((dv_mask)1 << m->nranks) - 1;
        for (int i = 0; i < m->nranks * C->ncells; i++)
            EXPECT((st[i] & ~ranks) == 0, "call %d k %d: a mask names rank >= %d: %#llx", c,
                   k, m->nranks, (unsigned long long)st[i]);
    }
    double sent[DV_MAX_RANKS], all[DV_MAX_RANKS], expect[DV_MAX_RANKS];
    dv_bytes_sent(m, c, k, sent);
    dv_bytes_sent(m, c, C->nframes, all);
    for (int r = 0; r < m->nranks; r++)
        EXPECT(sent[r] >= 0 && sent[r] <= all[r], "call %d: rank %d sent %g by k = %d, %g "
               "in all", c, r, sent[r], k, all[r]);
    char text[256];
    if (dv_formula(m, c, expect, text, sizeof text))
        EXPECT(memchr(text, '\0', sizeof text) != NULL, "formula text unterminated");
    if (k < C->nframes) {
        const char *s = dv_phase_text(C->coll, m->frames[C->first_frame + k].phase);
        EXPECT(s != NULL, "dv_phase_text returned NULL");
    }
}

static void exercise(dv_model *m)
{
    static dv_mask st[DV_MAX_RANKS * DV_MAX_CELLS];
    check_struct(m);
    int c, k, stride = m->npos / MAX_POS + 1;
    dv_pos_split(m, -1, &c, &k);
    dv_pos_split(m, m->npos, &c, &k);
    dv_pos_split(m, INT32_MAX, &c, &k);
    const double odd[] = { -INFINITY, INFINITY, NAN, -1e300, 1e300, m->t_begin, m->t_end };
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++) {
        int p = dv_pos_at_time(m, odd[i]);
        EXPECT(p >= 0 && p < m->npos, "at_time(%g) = %d of %d", odd[i], p, m->npos);
    }
    for (int p = 0; p < m->npos; p += stride)
        visit(m, p, st, sizeof st / sizeof st[0]);
    visit(m, m->npos - 1, st, sizeof st / sizeof st[0]);
}

/* ==== the timetable ==== */

/* The block that dv_tt_block_at returns covers t in the row and lane asked for. */
static void block_at(const dv_tt *tt, int row, int lane, double t)
{
    int b = dv_tt_block_at(tt, row, lane, t);
    EXPECT(b == -1 || (b >= 0 && b < tt->nblocks && tt->blocks[b].row == row &&
                       tt->blocks[b].lane == lane && tt->blocks[b].t0 <= t &&
                       t <= tt->blocks[b].t1),
           "block_at(row %d, %d, %g) = %d of %d", row, lane, t, b, tt->nblocks);
}

/* Builds the timetable of m (a refusal needs a sentence; must_build: a built-in pipeline,
 * which must build) and reads it as the viewer does, with the contract's checks. */
static void exercise_tt(const dv_model *m, int must_build)
{
    dv_tt tt;
    char err[256] = "";
    if (dv_tt_build(&tt, m, err, sizeof err) != 0) {
        EXPECT(!must_build, "dv_tt_build refused a built-in pipeline: %s", err);
        EXPECT(err[0] != '\0', "dv_tt_build failed without a message");
        return;
    }
    EXPECT(tt.nranks == m->nranks, "timetable: %d ranks, the model %d", tt.nranks, m->nranks);
    EXPECT(tt.t_end > tt.t_begin, "timetable: t_end %g <= t_begin %g", tt.t_end, tt.t_begin);
    EXPECT(memchr(tt.mode, '\0', sizeof tt.mode) && memchr(tt.settings, '\0',
           sizeof tt.settings), "timetable: mode or settings unterminated");
    for (int i = 0; i < tt.nblocks; i++) {
        const dv_tt_block *b = &tt.blocks[i];
        EXPECT(b->rank >= 0 && b->rank < tt.nranks && (b->lane == 0 || b->lane == 1) &&
               b->kind >= 0 && b->kind < DV_TT_NKINDS && !(b->t1 < b->t0) &&
               memchr(b->label, '\0', sizeof b->label),
               "block %d: rank %d lane %d kind %d [%g, %g]", i, b->rank, b->lane, b->kind,
               b->t0, b->t1);
        /* in row order (a row: a rank's thread), lane order, then time */
        EXPECT(b->row >= 0 && b->row < tt.nrows && tt.rows[b->row].rank == b->rank,
               "block %d: row %d of %d, rank %d", i, b->row, tt.nrows, b->rank);
        EXPECT(i == 0 || tt.blocks[i - 1].row < b->row ||
               (tt.blocks[i - 1].row == b->row && (tt.blocks[i - 1].lane < b->lane ||
                (tt.blocks[i - 1].lane == b->lane && !(tt.blocks[i - 1].t0 > b->t0)))),
               "block %d out of order", i);
        EXPECT(b->call >= -1 && b->call < m->ncalls, "block %d: call %d of %d", i, b->call,
               m->ncalls);
        EXPECT(vias_ok(b->vias) && (b->vias & ~tt.vias) == 0 && (b->lane || !b->vias),
               "block %d: transports %#x (trace's %#x, lane %d)", i, b->vias, tt.vias,
               b->lane);
    }
    for (int i = 0; i < tt.nwaits; i++)
        EXPECT(tt.waits[i].rank >= 0 && tt.waits[i].rank < tt.nranks &&
               !(tt.waits[i].t1 < tt.waits[i].t0), "wait %d: rank %d", i, tt.waits[i].rank);
    for (int i = 0; i < tt.narrows; i++)
        EXPECT(tt.arrows[i].src >= 0 && tt.arrows[i].src < tt.nranks &&
               tt.arrows[i].dst >= 0 && tt.arrows[i].dst < tt.nranks,
               "arrow %d: %d -> %d", i, tt.arrows[i].src, tt.arrows[i].dst);
    char text[256];
    int stride = tt.nsteps / MAX_STEPS + 1;
    for (int s = 0; s < tt.nsteps; s += stride) {
        EXPECT(s == 0 || tt.steps[s].step > tt.steps[s - 1].step, "steps out of order at %d",
               s);
        dv_tt_describe_step(&tt, s, text, sizeof text);
        EXPECT(memchr(text, '\0', sizeof text) != NULL, "step %d: description unterminated",
               s);
    }
    if (tt.nsteps > 0)
        dv_tt_describe_step(&tt, tt.nsteps - 1, text, 8);
    const double mid = (tt.t_begin + tt.t_end) / 2;
    const double at[] = { -INFINITY, INFINITY, NAN, -1e300, 1e300, tt.t_begin, tt.t_end, mid,
                          tt.nblocks ? tt.blocks[0].t0 : 0,
                          tt.nblocks ? tt.blocks[tt.nblocks / 2].t1 : 0 };
    int ranks[] = { 0, tt.nranks / 2, tt.nranks - 1 }, rows[] = { 0, tt.nrows / 2, tt.nrows - 1 };
    for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
        int s = dv_tt_step_at(&tt, at[i]);
        EXPECT(tt.nsteps == 0 ? s == -1 : s >= 0 && s < tt.nsteps, "step_at(%g) = %d of %d",
               at[i], s, tt.nsteps);
        for (int r = 0; r < 3; r++) {
            int k = dv_tt_stash(&tt, ranks[r], at[i]);
            EXPECT(k >= 0, "stash(%d, %g) = %d", ranks[r], at[i], k);
            block_at(&tt, rows[r], 0, at[i]);
            block_at(&tt, rows[r], 1, at[i]);
        }
    }
    dv_tt_free(&tt);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dv_model m;
    char err[256];
    if (size >= 4 && data[0] == TRAIN_BYTE) {
        int algo = data[1] % 4 - 1;                       /* -1 .. 2: both ends invalid */
        int P = data[2] % (DV_MAX_RANKS + 3) - 1;         /* -1 .. 65 */
        int M = data[3] % 67 - 1;                         /* -1 .. 65 */
        dt_trace t;
        int ok = algo >= 0 && algo <= 1 && P >= 1 && P <= DV_MAX_RANKS && M >= 1 && M <= 64;
        err[0] = '\0';
        if (dv_train_algo_trace(algo, P, M, &t, err, sizeof err) != 0) {
            EXPECT(!ok, "dv_train_algo_trace(%d, %d, %d) refused: %s", algo, P, M, err);
            EXPECT(err[0] != '\0', "dv_train_algo_trace(%d, %d, %d) failed without a message",
                   algo, P, M);
            return 0;
        }
        EXPECT(ok, "dv_train_algo_trace(%d, %d, %d) accepted", algo, P, M);
        EXPECT(dv_tt_is_training(&t), "a built-in pipeline is not a training trace");
        EXPECT(dv_model_build(&m, &t, err, sizeof err) == 0, "a built-in pipeline's model: %s",
               err);
        exercise(&m);
        exercise_tt(&m, 1);
        dv_model_free(&m);
        return 0;
    }
    if (size >= 11 && data[0] == ALGO_BYTE) {
        int algo = data[1] % 12 - 1;                  /* -1 .. 10: both ends invalid */
        int nranks = data[2] % (DV_MAX_RANKS + 3) - 1;   /* -1 .. 65 */
        long long count;
        memcpy(&count, data + 3, sizeof count);
        if (data[1] & 0x80)
            count %= 100000;                          /* mostly small, sometimes not */
        if (dv_model_algo(&m, algo, nranks, count, err, sizeof err) == 0) {
            exercise(&m);
            exercise_tt(&m, 0);
            dv_model_free(&m);
        } else {
            EXPECT(err[0] != '\0', "dv_model_algo(%d, %d, %lld) failed without a message",
                   algo, nranks, count);
        }
        return 0;
    }
    FILE *f = fmemopen((void *)data, size, "r");
    if (f == NULL)
        return 0;                                     /* size 0 */
    dt_trace t;
    int rc = dt_trace_read_stream(f, "fuzz", &t, err, sizeof err);
    fclose(f);
    if (rc != 0) {
        EXPECT(err[0] != '\0', "the reader refused without a message");
        return 0;
    }
    EXPECT(t.nranks >= 1 && (t.n == 0 || t.ev != NULL), "reader: %d ranks, %zu events",
           t.nranks, t.n);
    if (dv_model_build(&m, &t, err, sizeof err) == 0) {
        exercise(&m);
        exercise_tt(&m, 0);
        dv_model_free(&m);
    } else {
        EXPECT(err[0] != '\0', "dv_model_build failed without a message");
    }
    return 0;
}
