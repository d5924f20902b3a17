/* Grading exercise 12, ring attention's arithmetic. Pure functions (no MPI, run at one
 * rank), each checked against what it must mean, computed here in double:
 *
 *   partial        one row's (m, l, o) over a block of scores against the sums; scores
 *                  small, far past where e^s overflows or underflows a float, all
 *                  equal, and no key at all
 *   merge          two partials merged against the partial over both sets of keys:
 *                  either maximum the larger, or equal; either or both empty; maxima
 *                  far apart; a row's keys cut in pieces merged in a random order
 *   ring_order     which rank's block each rank holds at each step, C = 1..8
 *   causal_blocks  the chunks of both cuts, and what the mask leaves of each (query
 *                  chunk, key chunk) pair at each step, against the chunks' positions
 *   ring           the ring played, C = 1..5, both cuts, chunks of 1 to 16 positions,
 *                  scores small and large: after each step, every query row's partial
 *                  against its partial over the keys it has seen so far, computed here
 *                  from the positions; a wrong row is told what it matches instead (the
 *                  diagonal's mask one off, a block skipped, ...)
 * Small configurations come first, so the first failure shown is a small one. */
#include <math.h>
#include <stdlib.h>
#include "grade.h"

static const char *const CUT[2] = { "plain", "zig-zag" };
static const char *const KIND[3] = { "EX_ATTN_SKIP", "EX_ATTN_DIAG", "EX_ATTN_FULL" };

/* ==== the truth, in double ==== */

static unsigned long long rng;

static double uni(void)             /* [0, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static float *floats_in(int n, double lo, double hi)
{
    float *p = malloc(((size_t)n + 1) * sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory");
    for (int i = 0; i < n; i++)
        p[i] = (float)(lo + (hi - lo) * uni());
    return p;
}

/* The partial over the scores s[j] of the n keys with use[j] (all when use is NULL),
 * values v (n, d): M, L and O (d) in double. */
static void truth(const double *s, const float *v, const char *use, int n, int d,
                  double *M, double *L, double *O)
{
    *M = -INFINITY;
    *L = 0;
    for (int e = 0; e < d; e++)
        O[e] = 0;
    for (int j = 0; j < n; j++)
        if (!use || use[j])
            *M = fmax(*M, s[j]);
    for (int j = 0; j < n; j++)
        if (!use || use[j]) {
            double p = exp(s[j] - *M);
            *L += p;
            for (int e = 0; e < d; e++)
                O[e] += p * v[(size_t)j * d + e];
        }
}

/* The truth over all n of the float scores s. */
static void truth_of(const float *s, const float *v, int n, int d, double *M, double *L,
                     double *O)
{
    double *sd = calloc((size_t)n + 1, sizeof *sd);
    DT_REQUIRE(sd != NULL, "out of memory");
    for (int j = 0; j < n; j++)
        sd[j] = s[j];
    truth(sd, v, NULL, n, d, M, L, O);
    free(sd);
}

/* 1 when the partial (m, l, o) is (M, L, O) to tol (values within [-1, 1]); else 0,
 * and why in why[len]. */
static int same(float m, float l, const float *o, double M, double L, const double *O,
                int d, double tol, char *why, size_t len)
{
    if (L == 0) {
        int zero = 1;
        for (int e = 0; e < d; e++)
            zero &= o[e] == 0;
        if (m == -INFINITY && l == 0 && zero)
            return 1;
        snprintf(why, len, "m = %g, l = %g, o[0] = %g, where no key is seen: the "
                 "partial over no key is m = -INFINITY, l = 0, o = 0 (what a merge "
                 "leaves alone)", m, l, o[0]);
        return 0;
    }
    if (!(fabs(m - M) <= tol * (1 + fabs(M)))) {
        snprintf(why, len, "m is %.7g; it must be the largest score met, %.7g", m, M);
        return 0;
    }
    if (!(fabs(l - L) <= tol * L)) {
        snprintf(why, len, "l is %.7g; expected sum_j e^(s_j - m) = %.7g", l, L);
        return 0;
    }
    for (int e = 0; e < d; e++)
        if (!(fabs(o[e] - O[e]) <= tol * L)) {
            snprintf(why, len, "o[%d] is %.7g; expected sum_j e^(s_j - m) v_j[%d] = %.7g",
                     e, o[e], e, O[e]);
            return 0;
        }
    return 1;
}

/* 1 when the partials (M, L, O) and (MV, LV, OV) are over different keys. */
static int apart(double M, double L, const double *O, double MV, double LV,
                 const double *OV, int d)
{
    if (L == 0 || LV == 0)
        return (L == 0) != (LV == 0);
    int far = fabs(M - MV) > 1e-9 * (1 + fabs(M)) || fabs(L - LV) > 1e-9 * L;
    for (int e = 0; e < d && !far; e++)
        far = fabs(O[e] - OV[e]) > 1e-9 * L;
    return far;
}

/* ==== one partial ==== */

typedef struct {
    int n, d;
    double lo, hi;      /* the scores' range */
} pcfg;

static const pcfg PCFG[] = {
    { 7, 3, -3, 3 }, { 1, 1, -2, 2 }, { 33, 16, 80, 120 }, { 33, 5, -300, -200 },
    { 1000, 2, -1000, 1000 }, { 50, 8, 5, 5 }, { 0, 4, 0, 0 }, { 2, 64, -1, 1 },
};
#define NPCFG ((int)(sizeof PCFG / sizeof PCFG[0]))

/* ex_attn_partial on configuration c; 0 and why when it is wrong. */
static int try_partial(const pcfg *c, char *why, size_t len)
{
    int n = c->n, d = c->d, ok = 0;
    rng = 1200 + (unsigned)(n * 7 + d);
    float *s = floats_in(n, c->lo, c->hi), *v = floats_in(n * d, -1, 1);
    float *o = floats_in(d, 1e3, 2e3), m = 7, l = 7;    /* o: anything on entry */
    double *O = malloc((size_t)d * sizeof *O), M, L;
    DT_REQUIRE(O != NULL, "out of memory");
    truth_of(s, v, n, d, &M, &L, O);
    ex_attn_partial(s, v, n, d, &m, &l, o);
    char at[80], w[300];
    snprintf(at, sizeof at, "over n = %d keys, d = %d, scores in [%g, %g]: ", n, d,
             c->lo, c->hi);
    int normalised = L > 0 && m == M && fabs(l - L) <= 1e-4 * L, told = 0;
    for (int e = 0; e < d && normalised; e++) {
        normalised = fabs(o[e] - O[e] / L) <= 1e-4;
        told |= fabs(O[e] - O[e] / L) > 1e-3;
    }
    normalised &= told;
    double raw = L * exp(M);            /* sum_j e^(s_j) */
    if (n > 0 && m == M && isfinite(raw) && fabs(raw - L) > 1e-3 * L &&
        fabs(l - raw) <= 1e-4 * raw)
        snprintf(why, len, "%sl is sum_j e^(s_j) = %.7g, without the largest score "
                 "subtracted; expected sum_j e^(s_j - m) = %.7g: every e^(s_j - m) is at "
                 "most 1, where e^(s_j) overflows a float past s_j = 88.7 (and o must be "
                 "relative to m too)", at, l, L);
    else if (n > 0 && m == M && !isfinite(l) && c->hi > 88.7)
        snprintf(why, len, "%sl is %g: e^(s_j) overflows a float past s_j = 88.7, and "
                 "the scores here reach %g: subtract the largest score first (every "
                 "e^(s_j - m) is then at most 1)", at, l, c->hi);
    else if (n > 0 && m == M && l == 0 && c->hi < -103)
        snprintf(why, len, "%sl is 0: e^(s_j) is 0 in a float below s_j = -103, and the "
                 "scores here are all below %g: subtract the largest score first (the "
                 "largest term is then e^0 = 1)", at, c->hi);
    else if (normalised)
        snprintf(why, len, "%so is divided by l: a partial keeps o = sum_j e^(s_j - m) "
                 "v_j as it is; the division by l comes once, after the last block", at);
    else if (n > 0 && m != (float)M)
        snprintf(why, len, "%sm is %.7g; it must be the largest score, %.7g", at, m, M);
    else if (!same(m, l, o, M, L, O, d, 1e-4, w, sizeof w))
        snprintf(why, len, "%s%s", at, w);
    else
        ok = 1;
    free(s); free(v); free(o); free(O);
    return ok;
}

START_TEST(partial)
{
    char why[480];
    for (int i = 0; i < NPCFG; i++)
        if (!try_partial(&PCFG[i], why, sizeof why)) {
            ht_fail("%s", why);
            break;
        }
    HT_VERDICT();
}
END_TEST

/* ==== the merge ==== */

typedef struct {
    int n1, n2, d;
    double lo1, hi1, lo2, hi2;
} mcfg;

static const mcfg MCFG[] = {
    { 5, 6, 4, -2, 2, 1, 5 },           /* the second's maximum the larger */
    { 6, 5, 4, 1, 5, -2, 2 },           /* the first's */
    { 4, 3, 3, 3, 3, 3, 3 },            /* equal */
    { 0, 5, 4, 0, 0, -2, 2 },           /* the first empty */
    { 5, 0, 4, -2, 2, 0, 0 },           /* the second empty */
    { 0, 0, 4, 0, 0, 0, 0 },            /* both */
    { 7, 9, 8, -400, -300, 300, 400 },  /* far apart */
    { 1, 1, 1, -1, 1, -1, 1 },
    { 100, 100, 64, -5, 5, -5, 5 },
};
#define NMCFG ((int)(sizeof MCFG / sizeof MCFG[0]))

/* The partial over float scores s (n) and values v (n, d), rounded to float. */
static void partial_of(const float *s, const float *v, int n, int d, float *m, float *l,
                       float *o)
{
    double *O = malloc((size_t)d * sizeof *O), M, L;
    DT_REQUIRE(O != NULL, "out of memory");
    truth_of(s, v, n, d, &M, &L, O);
    *m = (float)M;
    *l = (float)L;
    for (int e = 0; e < d; e++)
        o[e] = (float)O[e];
    free(O);
}

/* ex_softmax_merge on configuration c; 0 and why when it is wrong. */
static int try_merge(const mcfg *c, char *why, size_t len)
{
    int n1 = c->n1, n2 = c->n2, n = n1 + n2, d = c->d, ok = 0;
    rng = 1300 + (unsigned)(n1 * 31 + n2 * 7 + d);
    float *s = floats_in(n, 0, 1), *v = floats_in(n * d, -1, 1);
    for (int j = 0; j < n; j++)
        s[j] = (float)(j < n1 ? c->lo1 + (c->hi1 - c->lo1) * s[j]
                              : c->lo2 + (c->hi2 - c->lo2) * s[j]);
    float m, l, m2, l2, *o = floats_in(d, 0, 0), *o2 = floats_in(d, 0, 0);
    float *o0 = floats_in(d, 0, 0), *o2c = floats_in(d, 0, 0);
    partial_of(s, v, n1, d, &m, &l, o);
    partial_of(s + n1, v + (size_t)n1 * d, n2, d, &m2, &l2, o2);
    memcpy(o0, o, (size_t)d * sizeof *o);
    memcpy(o2c, o2, (size_t)d * sizeof *o2);
    float m1 = m, l1 = l;
    double *O = malloc((size_t)d * sizeof *O), M, L;
    DT_REQUIRE(O != NULL, "out of memory");
    truth_of(s, v, n, d, &M, &L, O);
    ex_softmax_merge(&m, &l, o, m2, l2, o2, d);

    char at[200], w[300];
    snprintf(at, sizeof at, "merging the partial over %d keys (m = %.4g, l = %.4g) with "
             "one over %d (m2 = %.4g, l2 = %.4g), d = %d: ", n1, m1, l1, n2, m2, l2, d);
    double mn = fmax(m1, m2), a = exp(m1 - mn), b = exp(m2 - mn);
    int differ = n1 > 0 && n2 > 0 && m1 != m2, o_plain = differ, o_ok = 1;
    for (int e = 0; e < d; e++) {
        o_plain &= fabs(o[e] - ((double)o0[e] + o2c[e])) <= 1e-4 * (1 + fabs(O[e]));
        o_ok &= fabs(o[e] - O[e]) <= 1e-4 * L;
    }
    int changed = 0;
    for (int e = 0; e < d; e++)
        changed |= o2[e] != o2c[e];
    if (changed)
        snprintf(why, len, "%so2 was changed: it is read only", at);
    else if (n == 0 && (isnan(m) || isnan(l) || !(m == -INFINITY && l == 0)))
        snprintf(why, len, "%sboth partials were empty (m = m2 = -INFINITY, l = l2 = 0) "
                 "and the merge gave m = %g, l = %g: e^(-inf - (-inf)) is NaN; when the "
                 "new maximum is -INFINITY there is nothing to rescale, and the partial "
                 "stays empty", at, m, l);
    else if (n > 0 && m != (float)M)
        snprintf(why, len, "%sm is %.7g; the merged partial's m is the larger of the two "
                 "maxima, %.7g", at, m, M);
    else if (differ && fabs(l - ((double)l1 + l2)) <= 1e-4 * (l1 + l2) &&
             fabs(l - L) > 1e-4 * L)
        snprintf(why, len, "%sl is l + l2 = %.7g, the two sums added as they were; "
                 "expected %.7g: l was summed relative to m and l2 relative to m2, so "
                 "each must be rescaled to the new maximum, by e^(its m - new m), before "
                 "they are added (the running sum not rescaled)", at, l, L);
    else if (differ && (fabs(l - (l1 / a + l2 / b)) <= 1e-4 * fabs(l1 / a + l2 / b)) &&
             isfinite(l1 / a + l2 / b))
        snprintf(why, len, "%sl is %.7g; expected %.7g: the sums were rescaled by "
                 "e^(new m - its m), the wrong way round: by e^(its m - new m), at "
                 "most 1",
                 at, l, L);
    else if (o_plain && !o_ok)
        snprintf(why, len, "%so is o + o2, the two added as they were (o[0] = %.7g, "
                 "expected %.7g): like l, each o must be rescaled by e^(its m - new m) "
                 "before they are added (o not rescaled)", at, o[0], O[0]);
    else if (!same(m, l, o, M, L, O, d, 1e-4, w, sizeof w))
        snprintf(why, len, "%.200s%.270s", at, w);
    else
        ok = 1;
    (void)b;
    free(s); free(v); free(o); free(o2); free(o0); free(o2c); free(O);
    return ok;
}

/* A row of n keys cut into pieces of 1 to 40, their partials merged one by one, in a
 * random order, into one that starts empty; 0 and why when the end differs from the
 * partial over the whole row. */
static int try_fold(int n, int d, char *why, size_t len)
{
    rng = 1400 + (unsigned)n;
    float *s = floats_in(n, -20, 20), *v = floats_in(n * d, -1, 1);
    int *cut = malloc(((size_t)n + 1) * sizeof *cut), np = 0;
    DT_REQUIRE(cut != NULL, "out of memory");
    for (int j = 0; j < n; j += 1 + (int)(uni() * 40))
        cut[np++] = j;
    cut[np] = n;
    int *order = malloc((size_t)np * sizeof *order);
    DT_REQUIRE(order != NULL, "out of memory");
    for (int i = 0; i < np; i++)
        order[i] = i;
    for (int i = np - 1; i > 0; i--) {
        int j = (int)(uni() * (i + 1)), t = order[i];
        order[i] = order[j], order[j] = t;
    }
    float m = -INFINITY, l = 0, *o = floats_in(d, 0, 0), *po = floats_in(d, 0, 0);
    for (int i = 0; i < np; i++) {
        int p = order[i], a = cut[p], k = cut[p + 1] - cut[p];
        float pm, pl;
        partial_of(s + a, v + (size_t)a * d, k, d, &pm, &pl, po);
        ex_softmax_merge(&m, &l, o, pm, pl, po, d);
    }
    double *O = malloc((size_t)d * sizeof *O), M, L;
    DT_REQUIRE(O != NULL, "out of memory");
    truth_of(s, v, n, d, &M, &L, O);
    char w[300];
    int ok = same(m, l, o, M, L, O, d, 1e-4, w, sizeof w);
    if (!ok)
        snprintf(why, len, "a row of %d keys, d = %d, cut in %d pieces whose partials "
                 "were merged one by one in a random order into an empty one: %s", n, d,
                 np, w);
    free(s); free(v); free(cut); free(order); free(o); free(po); free(O);
    return ok;
}

/* Every merge configuration, then the folds; 0 and why at the first one wrong. */
static int try_merges(char *why, size_t len)
{
    for (int i = 0; i < NMCFG; i++)
        if (!try_merge(&MCFG[i], why, len))
            return 0;
    return try_fold(200, 8, why, len) && try_fold(1000, 3, why, len);
}

START_TEST(merge)
{
    char why[480];
    if (!try_merges(why, sizeof why))
        ht_fail("%s", why);
    HT_VERDICT();
}
END_TEST

/* ==== the ring's order and the causal mask ==== */

enum { CMAX = 8 };

static int source_of(int r, int C, int step) { return (r - step % C + C) % C; }

static int chunk_of(int r, int C, int zigzag, int a)
{
    return zigzag && a ? 2 * C - 1 - r : r;
}

static int kind_of(int qc, int kc)
{
    return kc < qc ? EX_ATTN_FULL : kc == qc ? EX_ATTN_DIAG : EX_ATTN_SKIP;
}

/* ex_ring_source for C ranks; 0 and why when it is wrong. */
static int try_order(int C, char *why, size_t len)
{
    for (int step = 0; step < C; step++)
        for (int r = 0; r < C; r++) {
            int got = ex_ring_source(r, C, step), want = source_of(r, C, step);
            if (got == want)
                continue;
            const char *hint = got < 0 || got >= C ? ": that is no rank"
                : got == (r + step) % C ? ": the blocks go the wrong way round; a rank "
                  "passes its block to its right, r+1, and takes its left neighbour's"
                : step == 0 ? ": at step 0 a rank holds its own block"
                : ": each step, a rank takes the block its left neighbour held";
            snprintf(why, len, "C = %d, rank %d at step %d holds rank %d's block; "
                     "expected rank %d's%s", C, r, step, got, want, hint);
            return 0;
        }
    return 1;
}

START_TEST(ring_order)
{
    char why[480];
    for (int C = 1; C <= CMAX; C++)
        if (!try_order(C, why, sizeof why)) {
            ht_fail("%s", why);
            break;
        }
    HT_VERDICT();
}
END_TEST

/* ex_cp_chunk for C ranks under a cut; 0 and why when it is wrong. */
static int try_chunks(int C, int zigzag, char *why, size_t len)
{
    for (int r = 0; r < C; r++)
        for (int a = 0; a <= zigzag; a++) {
            int got = ex_cp_chunk(r, C, zigzag, a), want = chunk_of(r, C, zigzag, a);
            if (got == want)
                continue;
            snprintf(why, len, "%s cut, C = %d: ex_cp_chunk says rank %d's chunk %d is "
                     "chunk %d of the sequence; expected chunk %d of %d%s", CUT[zigzag],
                     C, r, a, got, want, zigzag ? 2 * C : C, zigzag ? ": under zig-zag "
                     "rank r holds chunks r and 2C-1-r, one from each end, so that every "
                     "rank has as many causal pairs as any other" : ": rank r holds "
                     "chunk r");
            return 0;
        }
    return 1;
}

/* ex_block_kind at one (r, step) of C ranks under a cut; 0 and why when it is wrong. */
static int try_kinds_at(int C, int zigzag, int r, int step, char *why, size_t len)
{
    static const char *const WHY[3] = {
        "every key comes after every query: the mask hides the whole block",
        "the same positions: query i sees keys 0..i of the chunk",
        "every key comes before every query: the whole block is seen",
    };
    int src = source_of(r, C, step);
    for (int a = 0; a <= zigzag; a++)
        for (int b = 0; b <= zigzag; b++) {
            int qc = chunk_of(r, C, zigzag, a), kc = chunk_of(src, C, zigzag, b);
            int got = ex_block_kind(r, C, zigzag, step, a, b), want = kind_of(qc, kc);
            if (got == want)
                continue;
            char g[24];
            snprintf(g, sizeof g, "%d", got);
            snprintf(why, len, "%s cut, C = %d: rank %d at step %d holds rank %d's "
                     "block; its query chunk %d (chunk %d of the sequence) against the "
                     "block's key chunk %d (chunk %d) is %s, not %s: %s", CUT[zigzag], C,
                     r, step, src, a, qc, b, kc, KIND[want],
                     got >= 0 && got <= 2 ? KIND[got] : g, WHY[want]);
            return 0;
        }
    return 1;
}

static int try_kinds(int C, int zigzag, char *why, size_t len)
{
    for (int step = 0; step < C; step++)
        for (int r = 0; r < C; r++)
            if (!try_kinds_at(C, zigzag, r, step, why, len))
                return 0;
    return 1;
}

START_TEST(causal_blocks)
{
    char why[480];
    for (int zigzag = 0; zigzag < 2; zigzag++)
        for (int C = 1; C <= CMAX; C++)
            if (!try_chunks(C, zigzag, why, sizeof why) ||
                !try_kinds(C, zigzag, why, sizeof why)) {
                ht_fail("%s", why);
                goto done;
            }
done:
    HT_VERDICT();
}
END_TEST

/* ==== the ring played ==== */

typedef struct {
    int C, zigzag, n, d;
    double qs;          /* the queries' range, [-qs, qs]: large, the scores are too */
} rcfg;

static const rcfg RCFG[] = {
    { 2, 0, 3, 4, 1 }, { 1, 0, 4, 3, 1 }, { 3, 0, 2, 5, 1 }, { 2, 1, 3, 4, 1 },
    { 3, 1, 2, 3, 1 }, { 1, 1, 3, 2, 1 }, { 4, 0, 5, 8, 1 }, { 5, 0, 3, 2, 1 },
    { 4, 1, 4, 8, 1 }, { 5, 1, 3, 6, 1 }, { 3, 0, 16, 32, 40 }, { 5, 1, 6, 16, 40 },
    { 4, 0, 1, 1, 1 }, { 5, 1, 1, 1, 1 },
};
#define NRCFG ((int)(sizeof RCFG / sizeof RCFG[0]))

/* What a row of query position p may have taken from a key at position kp of chunk kc
 * (qc: the query's chunk): the truth (v 0), and the mistakes the messages name. */
enum { V_TRUE, V_STRICT, V_PLUS, V_NOMASK, V_NONE, V_ALL, NV };
static const char *const VWHY[NV] = {
    "",
    "as if query i of a diagonal block saw keys 0..i-1 of it, its own position left "
    "out: on the diagonal, query i sees keys 0..i",
    "as if query i of a diagonal block saw keys 0..i+1 of it: a key after the query "
    "came through the mask",
    "as if the diagonal block were seen whole, with no mask inside it: query i sees "
    "keys 0..i of it only",
    "as if this step's block had been skipped, though the query sees keys of it",
    "as if every key of this step's block had been seen, those after the query too",
};

static int sees(int how, int p, int kp, int qc, int kc)
{
    switch (how) {
    case V_STRICT: return kc == qc ? kp < p : kp <= p;
    case V_PLUS: return kc == qc ? kp <= p + 1 : kp <= p;
    case V_NOMASK: return kc == qc ? 1 : kp <= p;
    case V_NONE: return 0;
    case V_ALL: return 1;
    default: return kp <= p;
    }
}

/* The ring's data: T positions of q, k, v (T, d) and the scores q . k / sqrt(d). */
typedef struct {
    const rcfg *c;
    int T, nc;
    float *q, *k, *v;
    double *s;          /* (T, T) */
} ring_data;

/* Row p's partial over the keys of the chunks held[] (every chunk index of the
 * sequence: 1 held before this step, 2 taken at it), those of the chunk taken at this
 * step under variant how. */
static void row_truth(const ring_data *g, int p, const char *held, int how, double *M,
                      double *L, double *O)
{
    int n = g->c->n, qc = p / n;
    char *use = malloc((size_t)g->T);
    DT_REQUIRE(use != NULL, "out of memory");
    for (int kp = 0; kp < g->T; kp++) {
        int kc = kp / n;
        use[kp] = held[kc] == 1 ? kp <= p : held[kc] == 2 ? sees(how, p, kp, qc, kc) : 0;
    }
    truth(g->s + (size_t)p * g->T, g->v, use, g->T, g->c->d, M, L, O);
    free(use);
}

/* Why rank r's pieces may be to blame for a wrong ring step: "" when its
 * ex_ring_source, ex_block_kind, ex_attn_partial and ex_softmax_merge pass their own
 * cases' checks; else which does not, and where. */
static void pieces(const rcfg *c, int r, int step, char *note, size_t len)
{
    char why[400];
    note[0] = '\0';
    if (!try_order(c->C, why, sizeof why) ||
        !try_kinds_at(c->C, c->zigzag, r, step, why, sizeof why)) {
        snprintf(note, len, " (ex_ring_source or ex_block_kind, which a step asks, is "
                 "not right: the cases ring_order and causal_blocks say why)");
        return;
    }
    for (int i = 0; i < NPCFG; i++)
        if (!try_partial(&PCFG[i], why, sizeof why)) {
            snprintf(note, len, " (ex_attn_partial, which a step calls, fails the case "
                     "partial: fix it first)");
            return;
        }
    if (!try_merges(why, sizeof why))
        snprintf(note, len, " (ex_softmax_merge, which a step calls, fails the case "
                 "merge: fix it first)");
}

/* Why row p's partial (m, l, o) may be wrong, when its truth is (M, L, O): the piece
 * of rank r's that is, or the mistake of the mask it matches; into note ("" if none). */
static void diagnose(const ring_data *g, int r, int step, int p, const char *held,
                     float m, float l, const float *o, double M, double L,
                     const double *O, char *note, size_t len)
{
    int d = g->c->d;
    double *OV = malloc((size_t)d * sizeof *OV), MV, LV;
    DT_REQUIRE(OV != NULL, "out of memory");
    char w[300];
    pieces(g->c, r, step, note, len);
    for (int how = 1; how < NV && !note[0]; how++) {
        row_truth(g, p, held, how, &MV, &LV, OV);
        if (apart(M, L, O, MV, LV, OV, d) &&
            same(m, l, o, MV, LV, OV, d, 1e-3, w, sizeof w))
            snprintf(note, len, " (%s)", VWHY[how]);
    }
    free(OV);
}

/* One rank's ring on g: after each step, each of its rows against its truth; 0 and
 * why at the first row wrong. */
static int try_rank(const ring_data *g, int r, char *why, size_t len)
{
    const rcfg *c = g->c;
    int n = c->n, d = c->d, rows = g->nc * n, ok = 1;
    size_t chunk = (size_t)n * d, nf = (size_t)rows * d;    /* floats of a chunk, all */
    float *q = malloc(nf * sizeof *q), *k = malloc(nf * sizeof *k);
    float *v = malloc(nf * sizeof *v), *o = calloc(nf, sizeof *o);
    float *m = malloc((size_t)rows * sizeof *m), *l = calloc((size_t)rows, sizeof *l);
    char *held = calloc((size_t)g->nc * c->C, 1);     /* by chunk: 1 before, 2 at step */
    double *O = malloc((size_t)d * sizeof *O);
    DT_REQUIRE(q && k && v && o && m && l && held && O, "out of memory");
    for (int a = 0; a < g->nc; a++) {
        int qc = chunk_of(r, c->C, c->zigzag, a);
        memcpy(q + a * chunk, g->q + qc * chunk, chunk * sizeof *q);
    }
    for (int i = 0; i < rows; i++)
        m[i] = -INFINITY;
    for (int step = 0; step < c->C && ok; step++) {
        int src = source_of(r, c->C, step);
        for (int b = 0; b < g->nc; b++) {
            int kc = chunk_of(src, c->C, c->zigzag, b);
            memcpy(k + b * chunk, g->k + kc * chunk, chunk * sizeof *k);
            memcpy(v + b * chunk, g->v + kc * chunk, chunk * sizeof *v);
            held[kc] = 2;
        }
        ex_ring_step(r, c->C, c->zigzag, step, n, d, q, k, v, m, l, o);
        for (int row = 0; row < rows && ok; row++) {
            int p = chunk_of(r, c->C, c->zigzag, row / n) * n + row % n;
            const float *o_row = o + (size_t)row * d;
            double M, L;
            char w[300], note[300];
            row_truth(g, p, held, V_TRUE, &M, &L, O);
            if (same(m[row], l[row], o_row, M, L, O, d, 1e-3, w, sizeof w))
                continue;
            ok = 0;
            diagnose(g, r, step, p, held, m[row], l[row], o_row, M, L, O, note,
                     sizeof note);
            snprintf(why, len, "%s cut, C = %d, chunks of n = %d, d = %d: rank %d after "
                     "step %d (holding rank %d's block), row %d (position %d of 0..%d): "
                     "%s%s", CUT[c->zigzag], c->C, n, d, r, step, src, row, p, g->T - 1,
                     w, note);
        }
        for (int b = 0; b < g->nc; b++)
            held[chunk_of(src, c->C, c->zigzag, b)] = 1;
    }
    free(q); free(k); free(v); free(o); free(m); free(l); free(held); free(O);
    return ok;
}

START_TEST(ring)
{
    char why[480];
    for (int i = 0; i < NRCFG && !ht_nbad; i++) {
        const rcfg *c = &RCFG[i];
        ring_data g = { .c = c, .nc = c->zigzag ? 2 : 1 };
        g.T = g.nc * c->C * c->n;
        rng = 1500 + (unsigned)i;
        g.q = floats_in(g.T * c->d, -c->qs, c->qs);
        g.k = floats_in(g.T * c->d, -1, 1);
        g.v = floats_in(g.T * c->d, -1, 1);
        g.s = malloc((size_t)g.T * g.T * sizeof *g.s);
        DT_REQUIRE(g.s != NULL, "out of memory");
        for (int p = 0; p < g.T; p++)
            for (int kp = 0; kp < g.T; kp++) {
                double dot = 0;
                for (int e = 0; e < c->d; e++)
                    dot += (double)g.q[(size_t)p * c->d + e] * g.k[(size_t)kp * c->d + e];
                g.s[(size_t)p * g.T + kp] = dot / sqrt(c->d);
            }
        for (int r = 0; r < c->C; r++)
            if (!try_rank(&g, r, why, sizeof why)) {
                ht_fail("%s", why);
                break;
            }
        free(g.q); free(g.k); free(g.v); free(g.s);
    }
    HT_VERDICT();
}
END_TEST

/* The online softmax and the ring's bookkeeping are the exercise: lib/nn/ringattn.c's
 * block functions, the zig-zag cut and whole attention may not stand in for them. */
#define RA_RULE "dt_attn_[a-z_]*|dt_attention_[a-z_]*|dt_cp_[a-z_]*|dt_gpt_[a-z_]*|" \
                "dti_[a-z_]*(attn|softmax)[a-z_]*"
#define RA_WHY "write the online softmax and the ring's bookkeeping yourself; " \
               "lib/nn/ringattn.c's dt_attn_block_* and dt_cp_zigzag are the answer"
static const gr_rule rules[] = {
    { "ex_attn_partial", RA_RULE, RA_WHY },
    { "ex_softmax_merge", RA_RULE, RA_WHY },
    { "ex_ring_source", RA_RULE, RA_WHY },
    { "ex_cp_chunk", RA_RULE, RA_WHY },
    { "ex_block_kind", RA_RULE, RA_WHY },
    { "ex_ring_step", RA_RULE, RA_WHY },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "partial", 2, GR_PURE, partial, 1,
          "one row's m, l, o over a block of scores, small and past float's e^s",
          "ex_attn_partial" },
        { "merge", 3, GR_PURE, merge, 1,
          "two partials merged: either max the larger, either empty, many in any order",
          "ex_softmax_merge" },
        { "ring_order", 1, GR_PURE, ring_order, 1,
          "the block each rank holds at each step, C = 1..8",
          "ex_ring_source" },
        { "causal_blocks", 2, GR_PURE, causal_blocks, 1,
          "both cuts' chunks; each block pair full, diagonal or skipped, C = 1..8",
          "ex_cp_chunk ex_block_kind" },
        { "ring", 2, GR_PURE, ring, 1,
          "the ring played, C = 1..5, both cuts: each row's partial after each step",
          "ex_ring_step ex_ring_source ex_block_kind ex_cp_chunk ex_attn_partial "
          "ex_softmax_merge" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "12_ring_attention",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]) });
}
