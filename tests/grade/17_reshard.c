/* Grading exercise 17, resharding a checkpoint. Pure functions (no MPI, run at one
 * rank), each against truths computed here, element by element, from the maps alone:
 * which parameter every element of every region holds (dtlab's checkpoint code is not
 * called; the learner's may not call it either).
 *
 *   runs     ex_span_runs: the runs of spans with count > 1 and stride > len, stride ==
 *            len (runs that touch: one), len 0 (none), spans that touch
 *   reads    ex_reshard_reads on random layouts, N and M in 1..8 old and new ranks:
 *            flat cuts of the model or of each layer with padding (FSDP's), rows or
 *            columns of a layer's matrix (tp's, strided), whole copies (DDP's), cuts
 *            that do not divide evenly, empty ranks; for every new rank: each read lies
 *            in its old region's map, the reads sorted by dst and each needed element
 *            read once, from an old rank whose element holds the same parameter
 *   merged   the same reads, no more of them than the grader's merged count (each
 *            parameter from the lowest old rank that holds it)
 *   bytes    ex_reshard_nbytes of the grader's reads: 4 bytes a float
 *   apply    ex_reshard_apply of the grader's reads: the buffer is the model's values,
 *            and 0 in its padding (garbage on entry, the old padding garbage too)
 *   rebuild  the learner's own reads, applied and counted: the model rebuilt, 4 x the
 *            needed floats read */
#include <math.h>
#include <stdlib.h>
#include "grade.h"

static unsigned long long rng;

static size_t pick(size_t n)        /* [0, n) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (size_t)((rng >> 33) % (n ? n : 1));
}

enum { MAXR = 8, MAXL = 3, MAXS = 2 * MAXL, GUARD = 4 };
#define PAD_VAL 7777.0f             /* the old regions' padding */
#define GARBAGE -3333.0f            /* what a new buffer holds on entry */

/* A model of nl layers: layer l is a matrix W (rows x cols) at off, its bias after. */
typedef struct {
    int nl;
    size_t rows[MAXL], cols[MAXL], off[MAXL], P;
} model;

/* A layout on R ranks: rank k's spans and its region's floats (the map, then padding). */
typedef struct {
    int R, ns[MAXR];
    ex_span sp[MAXR][MAXS];
    size_t mapped[MAXR], size[MAXR];
    const char *how;
} layout;

static float value(size_t p) { return 1.0f + 0.25f * (float)p; }

static void add(layout *L, int k, size_t start, size_t len, size_t count, size_t stride)
{
    L->sp[k][L->ns[k]++] = (ex_span){ start, len, count, stride };
    L->mapped[k] += len * count;
    L->size[k] += len * count;
}

/* A random layout of model m on R ranks. */
static void make_layout(const model *m, int R, layout *L)
{
    memset(L, 0, sizeof *L);
    L->R = R;
    int flat = pick(4) == 0;
    L->how = flat ? "a flat cut of the whole model" : "per layer:";
    for (int k = 0; k < R && flat; k++) {
        size_t s = (m->P + R - 1) / R, lo = k * s, len = lo < m->P ? m->P - lo : 0;
        len = len < s ? len : s;
        add(L, k, lo < m->P ? lo : m->P, len, 1, 0);
        L->size[k] += s - len;
    }
    for (int l = 0; l < m->nl && !flat; l++) {
        size_t rows = m->rows[l], cols = m->cols[l], off = m->off[l];
        size_t n = rows * cols + rows;
        int mode = (int)pick(4);
        for (int k = 0; k < R; k++) {
            size_t lo, hi, s = (n + R - 1) / R;
            switch (mode) {
            case 0:                                   /* whole, on every rank */
                add(L, k, off, n, 1, 0);
                break;
            case 1:                                   /* flat cut, padded */
                lo = k * s < n ? k * s : n;
                hi = lo + s < n ? lo + s : n;
                add(L, k, off + lo, hi - lo, 1, 0);
                L->size[k] += s - (hi - lo);
                break;
            case 2:                                   /* rows lo..hi of W and of b */
                lo = k * rows / R, hi = (k + 1) * rows / R;
                add(L, k, off + lo * cols, (hi - lo) * cols, 1, 0);
                add(L, k, off + rows * cols + lo, hi - lo, 1, 0);
                break;
            default:                                  /* columns lo..hi, all of b */
                lo = k * cols / R, hi = (k + 1) * cols / R;
                add(L, k, off + lo, hi - lo, rows, cols);
                add(L, k, off + rows * cols, rows, 1, 0);
                break;
            }
        }
    }
}

static void make_model(model *m)
{
    m->nl = 1 + (int)pick(MAXL);
    m->P = 0;
    for (int l = 0; l < m->nl; l++) {
        m->rows[l] = 1 + pick(9);
        m->cols[l] = 1 + pick(12);
        m->off[l] = m->P;
        m->P += m->rows[l] * m->cols[l] + m->rows[l];
    }
}

/* The parameter each mapped element of rank k holds, expanded element by element. */
static size_t *params_of(const layout *L, int k)
{
    size_t *p = malloc((L->mapped[k] + 1) * sizeof *p), e = 0;
    DT_REQUIRE(p != NULL, "out of memory");
    for (int j = 0; j < L->ns[k]; j++) {
        const ex_span *s = &L->sp[k][j];
        for (size_t b = 0; b < s->count; b++)
            for (size_t i = 0; i < s->len; i++)
                p[e++] = s->start + b * s->stride + i;
    }
    return p;
}

/* One resharding to check: old layout O (N ranks), new layout W (M ranks), new rank r. */
typedef struct {
    model m;
    layout O, W;
    int r;
    size_t *op[MAXR];          /* the old regions' element maps */
    size_t *np;                /* the new rank's */
    int *hold;                 /* [P] the lowest old rank that holds each parameter */
    size_t *hoff;              /* [P] its element there */
    float *old[MAXR];          /* the old regions: the model's values, then padding */
    const ex_span *ospan[MAXR];
    int cap;                   /* the room ex_reshard_reads is given */
} setup;

static void setup_make(setup *c, int t)
{
    memset(c, 0, sizeof *c);
    make_model(&c->m);
    int N = 1 + (int)pick(MAXR), M = 1 + (int)pick(MAXR);
    make_layout(&c->m, N, &c->O);
    if (t % 7 == 3)
        c->W = c->O;                                  /* the same layout again */
    else
        make_layout(&c->m, M, &c->W);
    c->r = (int)pick((size_t)c->W.R);
    c->hold = malloc(c->m.P * sizeof *c->hold);
    c->hoff = malloc(c->m.P * sizeof *c->hoff);
    DT_REQUIRE(c->hold && c->hoff, "out of memory");
    for (size_t p = 0; p < c->m.P; p++)
        c->hold[p] = -1;
    size_t runs = 0;
    for (int k = c->O.R - 1; k >= 0; k--) {
        c->op[k] = params_of(&c->O, k);
        c->old[k] = malloc((c->O.size[k] + 1) * sizeof(float));
        DT_REQUIRE(c->old[k] != NULL, "out of memory");
        for (size_t e = 0; e < c->O.size[k]; e++)
            c->old[k][e] = e < c->O.mapped[k] ? value(c->op[k][e]) : PAD_VAL;
        for (size_t e = 0; e < c->O.mapped[k]; e++) {
            c->hold[c->op[k][e]] = k;
            c->hoff[c->op[k][e]] = e;
        }
        c->ospan[k] = c->O.sp[k];
        for (int j = 0; j < c->O.ns[k]; j++)
            runs += c->O.sp[k][j].count;
    }
    c->np = params_of(&c->W, c->r);
    for (int j = 0; j < c->W.ns[c->r]; j++)
        runs += c->W.sp[c->r][j].count;
    c->cap = (int)(2 * runs + 1);
}

static void setup_free(setup *c)
{
    for (int k = 0; k < c->O.R; k++) {
        free(c->op[k]);
        free(c->old[k]);
    }
    free(c->np);
    free(c->hold);
    free(c->hoff);
}

/* The grader's own reads, merged, each parameter from the lowest old rank: their
 * number, and the reads into out (room for mapped). */
static int truth_reads(const setup *c, ex_read *out)
{
    int n = 0;
    for (size_t d = 0; d < c->W.mapped[c->r]; d++) {
        size_t p = c->np[d];
        ex_read *l = n ? &out[n - 1] : NULL;
        if (l && l->rank == c->hold[p] && l->src + l->len == c->hoff[p])
            l->len++;
        else
            out[n++] = (ex_read){ c->hold[p], c->hoff[p], d, 1 };
    }
    return n;
}

/* "N -> M ranks, rank r; old: spans ...; new: spans ..." for a message. */
static void describe(const setup *c, char *s, size_t len)
{
    size_t m = (size_t)snprintf(s, len, "%d -> %d ranks, new rank %d (its spans", c->O.R,
                                c->W.R, c->r);
    for (int j = 0; j < c->W.ns[c->r] && m < len; j++) {
        const ex_span *p = &c->W.sp[c->r][j];
        m += (size_t)snprintf(s + m, len - m, " {%zu,%zu,%zu,%zu}", p->start, p->len,
                              p->count, p->stride);
    }
    if (m < len)
        snprintf(s + m, len - m, ")");
}

/* The first fault of n reads rd for setup c, into why; 0 if none. */
static int reads_fault(const setup *c, const ex_read *rd, int n, char *why, size_t len)
{
    char at[300];
    describe(c, at, sizeof at);
    size_t pos = 0, need = c->W.mapped[c->r];
    if (n < 0 || n > c->cap) {
        snprintf(why, len, "%s: ex_reshard_reads returns %d reads; it was given room "
                 "for %d", at, n, c->cap);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        const ex_read *q = &rd[i];
        if (q->rank < 0 || q->rank >= c->O.R) {
            snprintf(why, len, "%s: read %d is from old rank %d; there are %d", at, i,
                     q->rank, c->O.R);
            return 1;
        }
        if (q->len == 0) {
            snprintf(why, len, "%s: read %d has len 0", at, i);
            return 1;
        }
        if (q->dst != pos) {
            snprintf(why, len, "%s: read %d fills elements %zu..%zu of the buffer, "
                     "expected the next read to begin at element %zu: %s", at, i, q->dst,
                     q->dst + q->len - 1, pos, q->dst < pos ? "elements read twice (or "
                     "the reads not sorted by dst)" : "the elements between read by "
                     "no read (or the reads not sorted by dst)");
            return 1;
        }
        if (q->dst + q->len > need) {
            snprintf(why, len, "%s: read %d fills elements %zu..%zu of the buffer, past "
                     "its map's %zu floats (what lies past them is padding, which no "
                     "read fills)", at, i, q->dst, q->dst + q->len - 1, need);
            return 1;
        }
        size_t mk = c->O.mapped[q->rank];
        for (size_t j = 0; j < q->len; j++) {
            size_t want = c->np[q->dst + j];
            if (q->src + j >= mk) {
                snprintf(why, len, "%s: read %d takes old rank %d's element %zu for "
                         "parameter %zu: past that rank's map (%zu elements), in its "
                         "padding, which holds no parameter%s", at, i, q->rank,
                         q->src + j, want, mk, j == q->len - 1 ? " (one past the end: "
                         "a run ends at start + len, not after it)" : "");
                return 1;
            }
            size_t got = c->op[q->rank][q->src + j];
            if (got != want) {
                snprintf(why, len, "%s: read %d takes old rank %d's element %zu, which "
                         "holds parameter %zu, into element %zu of the buffer, which "
                         "needs parameter %zu%s", at, i, q->rank, q->src + j, got,
                         q->dst + j, want, got == want + 1 || got + 1 == want ?
                         " (one off: where does a run end?)" : "");
                return 1;
            }
        }
        pos += q->len;
    }
    if (pos != need) {
        snprintf(why, len, "%s: the reads fill elements 0..%zu of the buffer; its map "
                 "needs %zu (elements %zu.. are read by none)", at, pos ? pos - 1 : 0,
                 need, pos);
        return 1;
    }
    return 0;
}

enum { NSET = 400 };

/* ==== the runs of spans ==== */

START_TEST(runs)
{
    rng = 1701;
    for (int t = 0; t < NSET && ht_nbad == 0; t++) {
        setup c;
        setup_make(&c, t);
        for (int k = 0; k < c.O.R && ht_nbad == 0; k++) {
            const layout *L = &c.O;
            size_t room = 0;
            for (int j = 0; j < L->ns[k]; j++)
                room += L->sp[k][j].count;
            ex_run *out = malloc((room + GUARD) * sizeof *out);
            DT_REQUIRE(out != NULL, "out of memory");
            for (size_t i = 0; i < room + GUARD; i++)
                out[i] = (ex_run){ 12345, 54321 };
            int n = ex_span_runs(L->sp[k], L->ns[k], out);
            /* the truth: consecutive parameters of the element map */
            ex_run want[64 * MAXS * 4];
            int nw = 0;
            for (size_t e = 0; e < L->mapped[k]; e++) {
                size_t p = c.op[k][e];
                if (nw && want[nw - 1].start + want[nw - 1].len == p)
                    want[nw - 1].len++;
                else
                    want[nw++] = (ex_run){ p, 1 };
            }
            char sp[300];
            size_t m = 0;
            for (int j = 0; j < L->ns[k]; j++)
                m += (size_t)snprintf(sp + m, sizeof sp - m, " {%zu,%zu,%zu,%zu}",
                                      L->sp[k][j].start, L->sp[k][j].len,
                                      L->sp[k][j].count, L->sp[k][j].stride);
            int bad = -1;
            for (int i = 0; i < nw && i < n && bad < 0; i++)
                if (out[i].start != want[i].start || out[i].len != want[i].len)
                    bad = i;
            for (size_t i = room; i < room + GUARD; i++)
                if (out[i].start != 12345 || out[i].len != 54321) {
                    ht_fail("ex_span_runs, spans%s: run %zu was written, past the room "
                            "given, the sum of the counts (%zu)", sp, i, room);
                    break;
                }
            if (ht_nbad)
                ;
            else if (bad >= 0) {
                const char *like = "";
                for (int j = 0; j < L->ns[k]; j++)
                    if (L->sp[k][j].count > 1 && L->sp[k][j].stride != L->sp[k][j].len &&
                        out[bad].start == want[bad].start - (want[bad].start -
                        L->sp[k][j].start) / L->sp[k][j].stride * (L->sp[k][j].stride -
                        L->sp[k][j].len))
                        like = ": the runs of a span are stride apart, run b begins at "
                               "start + b * stride (not b * len)";
                if (!like[0] && out[bad].start == want[bad].start &&
                    (out[bad].len + 1 == want[bad].len ||
                     out[bad].len == want[bad].len + 1))
                    like = ": one off at the run's end";
                ht_fail("ex_span_runs, spans%s: run %d is [%zu, %zu + %zu), expected "
                        "[%zu, %zu + %zu)%s", sp, bad, out[bad].start, out[bad].start,
                        out[bad].len, want[bad].start, want[bad].start, want[bad].len,
                        like);
            } else if (n != nw) {
                ht_fail("ex_span_runs, spans%s: returns %d runs, expected %d%s", sp, n,
                        nw, n > nw ? " (runs that touch are one run, and runs of len 0 "
                        "none)" : "");
            }
            free(out);
        }
        setup_free(&c);
    }
    HT_VERDICT();
}
END_TEST

/* ==== the reads ==== */

/* ex_reshard_reads on setup c, guarded; 0 and why at a fault, else the count. */
static int learner_reads(const setup *c, ex_read **rd, char *why, size_t len)
{
    *rd = malloc(((size_t)c->cap + GUARD) * sizeof **rd);
    DT_REQUIRE(*rd != NULL, "out of memory");
    for (int i = 0; i < c->cap + GUARD; i++)
        (*rd)[i] = (ex_read){ -7, 0, 0, 0 };
    int n = ex_reshard_reads(c->W.sp[c->r], c->W.ns[c->r], c->ospan, c->O.ns, c->O.R,
                             *rd);
    for (int i = c->cap; i < c->cap + GUARD; i++)
        if ((*rd)[i].rank != -7) {
            char at[300];
            describe(c, at, sizeof at);
            snprintf(why, len, "%s: ex_reshard_reads wrote read %d, past the room given "
                     "(%d: twice the counts of the spans, need's and the old maps')", at,
                     i, c->cap);
            return -1;
        }
    return reads_fault(c, *rd, n, why, len) ? -1 : n;
}

START_TEST(reads)
{
    char why[900];
    rng = 1702;
    for (int t = 0; t < NSET && ht_nbad == 0; t++) {
        setup c;
        ex_read *rd;
        setup_make(&c, t);
        if (learner_reads(&c, &rd, why, sizeof why) < 0)
            ht_fail("%s", why);
        free(rd);
        setup_free(&c);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(merged)
{
    char why[900], at[300];
    rng = 1702;
    for (int t = 0; t < NSET && ht_nbad == 0; t++) {
        setup c;
        ex_read *rd;
        setup_make(&c, t);
        int n = learner_reads(&c, &rd, why, sizeof why);
        if (n < 0) {
            ht_fail("the reads are wrong (case reads): %s", why);
        } else {
            ex_read *tr = malloc((c.W.mapped[c.r] + 1) * sizeof *tr);
            int nt = truth_reads(&c, tr);
            describe(&c, at, sizeof at);
            int i = 1;
            while (i < n && !(rd[i].rank == rd[i - 1].rank &&
                              rd[i].src == rd[i - 1].src + rd[i - 1].len))
                i++;
            if (n > nt)
                ht_fail("%s: %d reads, where %d do (each parameter from the lowest old "
                        "rank that holds it, reads contiguous in both merged)%s", at, n,
                        nt, i < n ? ": reads that continue each other, in the old "
                        "region and in the buffer, are one read" : "");
            free(tr);
        }
        free(rd);
        setup_free(&c);
    }
    HT_VERDICT();
}
END_TEST

/* ==== bytes, and the buffer rebuilt ==== */

START_TEST(bytes)
{
    rng = 1703;
    for (int t = 0; t < NSET && ht_nbad == 0; t++) {
        setup c;
        setup_make(&c, t);
        ex_read *tr = malloc((c.W.mapped[c.r] + 1) * sizeof *tr);
        int nt = truth_reads(&c, tr);
        size_t got = ex_reshard_nbytes(tr, nt), want = c.W.mapped[c.r] * sizeof(float);
        HT_EXPECT(got == want, "ex_reshard_nbytes of %d reads of %zu floats in all: %zu, "
                  "expected %zu bytes%s", nt, c.W.mapped[c.r], got, want,
                  got == c.W.mapped[c.r] && want ? " (that is the floats; a float is 4 "
                  "bytes)" : "");
        free(tr);
        setup_free(&c);
    }
    HT_VERDICT();
}
END_TEST

/* The first fault of buf (nbuf floats) rebuilt for setup c; 0 if none. */
static int buf_fault(const setup *c, const float *buf, const char *what, char *why,
                     size_t len)
{
    char at[300];
    describe(c, at, sizeof at);
    size_t need = c->W.mapped[c->r], nbuf = c->W.size[c->r];
    for (size_t e = 0; e < nbuf + GUARD; e++) {
        float want = e < need ? value(c->np[e]) : e < nbuf ? 0.0f : GARBAGE;
        if (buf[e] == want)
            continue;
        if (e >= nbuf)
            snprintf(why, len, "%s, %s: element %zu was written, past the buffer's %zu "
                     "floats", what, at, e, nbuf);
        else if (e >= need)
            snprintf(why, len, "%s, %s: element %zu of the buffer is %g; it is padding "
                     "(past the map's %zu floats), which must be 0%s", what, at, e,
                     buf[e], need, buf[e] == GARBAGE ? ": it was left as it was on entry"
                     : buf[e] == PAD_VAL ? ": it holds an old region's padding" : "");
        else
            snprintf(why, len, "%s, %s: element %zu of the buffer is %g, expected %g, "
                     "parameter %zu's value%s", what, at, e, buf[e], want, c->np[e],
                     buf[e] == PAD_VAL ? " (that is an old region's padding)" :
                     buf[e] == GARBAGE ? " (never written)" : "");
        return 1;
    }
    return 0;
}

static float *garbage_buf(size_t n)
{
    float *b = malloc((n + GUARD) * sizeof *b);
    DT_REQUIRE(b != NULL, "out of memory");
    for (size_t i = 0; i < n + GUARD; i++)
        b[i] = GARBAGE;
    return b;
}

START_TEST(apply)
{
    char why[900];
    rng = 1704;
    for (int t = 0; t < NSET && ht_nbad == 0; t++) {
        setup c;
        setup_make(&c, t);
        ex_read *tr = malloc((c.W.mapped[c.r] + 1) * sizeof *tr);
        int nt = truth_reads(&c, tr);
        float *buf = garbage_buf(c.W.size[c.r]);
        ex_reshard_apply(tr, nt, (const float *const *)c.old, buf, c.W.size[c.r]);
        if (buf_fault(&c, buf, "ex_reshard_apply", why, sizeof why))
            ht_fail("%s", why);
        free(buf);
        free(tr);
        setup_free(&c);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(rebuild)
{
    char why[900];
    rng = 1705;
    for (int t = 0; t < NSET && ht_nbad == 0; t++) {
        setup c;
        ex_read *rd;
        setup_make(&c, t);
        int n = learner_reads(&c, &rd, why, sizeof why);
        if (n < 0) {
            ht_fail("the reads are wrong (case reads): %s", why);
        } else {
            float *buf = garbage_buf(c.W.size[c.r]);
            ex_reshard_apply(rd, n, (const float *const *)c.old, buf, c.W.size[c.r]);
            size_t got = ex_reshard_nbytes(rd, n), want = 4 * c.W.mapped[c.r];
            if (buf_fault(&c, buf, "your reads applied", why, sizeof why))
                ht_fail("%s", why);
            else
                HT_EXPECT(got == want, "ex_reshard_nbytes of your reads: %zu, expected "
                          "4 x the %zu floats needed = %zu", got, c.W.mapped[c.r], want);
            free(buf);
        }
        free(rd);
        setup_free(&c);
    }
    HT_VERDICT();
}
END_TEST

/* dtlab's checkpoints (lib/parallel/checkpoint*.c) hold the answer. */
#define CKPT "dti_ckpt_[a-z_]*|ck_[a-z_]*|dt_checkpoint_[a-z_]*"
static const gr_rule rules[] = {
    { "ex_span_runs", CKPT, "expand the spans yourself" },
    { "ex_reshard_reads", CKPT,
      "plan the reads yourself; dtlab's resharding is the answer" },
    { "ex_reshard_nbytes", CKPT, "count the bytes yourself" },
    { "ex_reshard_apply", CKPT, "copy the floats yourself" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "runs", 2, GR_PURE, runs, 1,
          "the runs of spans: count runs stride apart, touching runs merged, len 0 none",
          "ex_span_runs" },
        { "reads", 3, GR_PURE, reads, 1,
          "N -> M in 1..8, FSDP/tp/DDP layouts: each element read once, from a holder",
          "ex_reshard_reads ex_span_runs" },
        { "merged", 1, GR_PURE, merged, 1,
          "no more reads than the grader's, merged where contiguous",
          "ex_reshard_reads ex_span_runs" },
        { "bytes", 1, GR_PURE, bytes, 1, "the bytes of the reads: 4 a float",
          "ex_reshard_nbytes" },
        { "apply", 2, GR_PURE, apply, 1,
          "the grader's reads applied: the model's values, 0 in the padding",
          "ex_reshard_apply" },
        { "rebuild", 1, GR_PURE, rebuild, 1,
          "your reads applied and counted: the model rebuilt, 4 x the needed floats",
          "ex_reshard_reads ex_span_runs ex_reshard_nbytes ex_reshard_apply" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "17_reshard",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]) });
}
