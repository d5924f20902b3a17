/* libFuzzer target: the trace reader and dtviz's model on any bytes.
 *
 * The bytes are a trace file, read with dt_trace_read_stream; when the reader accepts
 * them, the model is built and every position is visited as the viewer would (split,
 * time, the masks, the bytes, the formula, the phase's sentence), up to MAX_POS of them.
 * An input whose first byte is ALGO_BYTE instead picks a built-in algorithm, a rank
 * count and a count from the bytes after it (out-of-range ones included). Besides the
 * sanitizers' findings, a model that breaks its own contract (model.h) aborts: npos,
 * frames and messages that do not add up, masks naming ranks that do not exist, bytes
 * that shrink.
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

#define MAX_POS 2000             /* positions visited per input, spread evenly */
#define ALGO_BYTE 0xA5

/* The model broke its contract: say how, and stop (the fuzzer keeps the input). */
#define EXPECT(cond, ...) do { if (!(cond)) { fprintf(stderr, "fuzz_trace: " __VA_ARGS__); \
        fprintf(stderr, "\n"); abort(); } } while (0)

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dv_model m;
    char err[256];
    if (size >= 11 && data[0] == ALGO_BYTE) {
        int algo = data[1] % 12 - 1;                  /* -1 .. 10: both ends invalid */
        int nranks = data[2] % (DV_MAX_RANKS + 3) - 1;   /* -1 .. 65 */
        long long count;
        memcpy(&count, data + 3, sizeof count);
        if (data[1] & 0x80)
            count %= 100000;                          /* mostly small, sometimes not */
        if (dv_model_algo(&m, algo, nranks, count, err, sizeof err) == 0) {
            exercise(&m);
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
        dv_model_free(&m);
    } else {
        EXPECT(err[0] != '\0', "dv_model_build failed without a message");
    }
    return 0;
}
