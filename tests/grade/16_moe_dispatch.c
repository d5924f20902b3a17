/* Grading exercise 16, MoE dispatch. Pure functions (no MPI, run at one rank), each
 * against a truth computed here, never by dtlab's moe_route.c:
 *
 *   top1      ex_moe_route, k = 1: each token's most probable expert (the lower index
 *             winning a tie) and its weight, the softmax probability, within 1e-6
 *   top2      ex_moe_route, k = 2: the two most probable, the first first, and their
 *             probabilities renormalised over the two
 *   capacity  ex_moe_capacity: ceil(factor * k * T / E) rounded to 6 decimals first, at
 *             least 1, at most T, 0 for no tokens
 *   assign    ex_moe_assign: every choice's slot (first choices in token order, then
 *             second choices), kept and dropped per expert, the dropped in all
 *   layout    ex_moe_send_layout: counts per rank (expert e on rank e / (E / N)), the
 *             exclusive displacements, the send buffer's rows by expert then token
 *
 * Random cases: E 1 .. 16, N every divisor of E, k 1 and 2, capacity factors 0.5 .. 2,
 * 0 .. 500 tokens, logits on a grid of quarters so that ties are common (and planted:
 * rows all equal, the best two equal). Outputs sit before guard ints that must stay. */
#include <math.h>
#include <stdlib.h>
#include "grade.h"

static unsigned long long rng;

static double uni(void)             /* [0, 1) */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static int below(int n) { return (int)(uni() * n); }   /* 0 .. n-1 */

enum { GUARD = 8, GUARD_INT = -77777, NCASES = 300 };

/* n ints, then GUARD guard ints; free with free(). */
static int *guarded_ints(int n)
{
    int *p = malloc(((size_t)n + GUARD) * sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory");
    for (int i = 0; i < n + GUARD; i++)
        p[i] = GUARD_INT;
    return p;
}

/* n ints, not set, with room for one more; free with free(). */
static int *ints(int n)
{
    int *p = malloc(((size_t)n + 1) * sizeof *p);
    DT_REQUIRE(p != NULL, "out of memory");
    return p;
}

static int guard_hit(const int *p, int n)
{
    for (int i = n; i < n + GUARD; i++)
        if (p[i] != GUARD_INT)
            return 1;
    return 0;
}

/* ==== the truth ==== */

static int truth_capacity(double factor, int k, int T, int E)
{
    if (T == 0)
        return 0;
    double v = round(factor * k * T / E * 1e6) / 1e6;
    double C = ceil(v);
    return C < 1 ? 1 : C > T ? T : (int)C;
}

/* logits (T, E) on a grid of quarters; some rows all equal, some with the best two
 * equal. bias[e] skews the load so that some experts overflow. */
static void make_logits(float *x, int T, int E, int levels)
{
    int skew = below(3);
    for (int t = 0; t < T; t++) {
        float *x_t = x + (size_t)t * E;
        int kind = below(10);
        for (int e = 0; e < E; e++)
            x_t[e] = 0.25f * (float)(below(levels) - levels / 2) +
                     (skew ? 0.25f * (float)(e % (skew + 2)) : 0.0f);
        if (kind == 0)                          /* all equal */
            for (int e = 0; e < E; e++)
                x_t[e] = 0.5f;
        else if (kind == 1 && E >= 2) {         /* the best two equal */
            int a = below(E), b = below(E - 1);
            b += b >= a;
            x_t[a] = x_t[b] = 4.0f;
        }
    }
}

/* The top-k of each row of logits by value, the lower index winning a tie, and the
 * weights in double. */
static void truth_route(const float *x, int T, int E, int k, int *choice, double *w)
{
    for (int t = 0; t < T; t++) {
        const float *x_t = x + (size_t)t * E;
        int *c_t = choice + (size_t)t * k;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if ((j == 0 || e != c_t[0]) && (best < 0 || x_t[e] > x_t[best]))
                    best = e;
            c_t[j] = best;
        }
        double m = x_t[c_t[0]], sum = 0;
        for (int e = 0; e < E; e++)
            sum += exp((double)x_t[e] - m);
        double p0 = 1 / sum, p1 = k == 2 ? exp((double)x_t[c_t[1]] - m) / sum : 0;
        w[(size_t)t * k] = k == 2 ? p0 / (p0 + p1) : p0;
        if (k == 2)
            w[(size_t)t * k + 1] = p1 / (p0 + p1);
    }
}

/* The softmax probability of expert e in row t, in double. */
static double prob(const float *x, int E, int t, int e)
{
    const float *x_t = x + (size_t)t * E;
    double m = x_t[0], sum = 0;
    for (int i = 1; i < E; i++)
        m = x_t[i] > m ? x_t[i] : m;
    for (int i = 0; i < E; i++)
        sum += exp((double)x_t[i] - m);
    return exp((double)x_t[e] - m) / sum;
}

/* Slots as ex_moe_assign must fill them, in the order `how`: 0 every first choice in
 * token order, then every second; 1 token by token (a token's second choice before the
 * next token's first); 2 the second choices first. kept, drop (E); returns the
 * dropped. */
static int truth_assign(const int *choice, int T, int k, int E, int C, int how, int *slot,
                        int *kept, int *drop)
{
    int dropped = 0;
    for (int e = 0; e < E; e++)
        kept[e] = drop[e] = 0;
    for (int n = 0; n < T * k; n++) {
        int t = how == 1 ? n / k : n % T, j = how == 1 ? n % k : n / T;
        if (how == 2)
            j = k - 1 - j;
        int i = t * k + j, e = choice[i];
        if (kept[e] < C) {
            slot[i] = kept[e]++;
        } else {
            slot[i] = -1;
            drop[e]++;
            dropped++;
        }
    }
    return dropped;
}

/* The send layout: rank of expert e is e / (E / N) (modulo: e % N); rows by expert,
 * then by token (by_slot: then by slot). Returns the rows. */
static int truth_layout(const int *choice, const int *slot, int T, int k, int E, int N,
                        int modulo, int by_slot, int *counts, int *sdispls, int *order)
{
    int rows = 0, El = E / N;
    for (int r = 0; r < N; r++)
        counts[r] = 0;
    for (int e = 0; e < E; e++) {
        for (int s = 0; s < (by_slot ? T * k : 1); s++)
            for (int t = 0; t < T; t++)
                for (int j = 0; j < k; j++) {
                    int i = t * k + j;
                    if (choice[i] != e || slot[i] < 0 || (by_slot && slot[i] != s))
                        continue;
                    order[rows++] = t;
                    counts[modulo ? e % N : e / El]++;
                }
    }
    for (int r = 0, at = 0; r < N; at += counts[r++])
        sdispls[r] = at;
    return rows;
}

static int same(const int *a, const int *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

/* ==== routing ==== */

static void route_cases(int k)
{
    char why[600];
    rng = 1600 + (unsigned)k;
    for (int c = 0; c < NCASES && ht_nbad == 0; c++) {
        int E = k + below(17 - k), T = c < 3 ? c : below(501);
        float *x = gr_floats(T * E);
        make_logits(x, T, E, 2 + below(12));
        int *ch = guarded_ints(T * k), *want = malloc(((size_t)T * k + 1) * sizeof *want);
        float *w = malloc(((size_t)T * k + GUARD) * sizeof *w);
        double *ww = malloc(((size_t)T * k + 1) * sizeof *ww);
        DT_REQUIRE(want != NULL && w != NULL && ww != NULL, "out of memory");
        for (int i = 0; i < T * k + GUARD; i++)
            w[i] = GR_GUARD_VAL;
        truth_route(x, T, E, k, want, ww);
        ex_moe_route(x, T, E, k, ch, w);
        const char *where = NULL;
        if (guard_hit(ch, T * k))
            where = "choice";
        for (int i = T * k; i < T * k + GUARD && !where; i++)
            if (w[i] != GR_GUARD_VAL)
                where = "weight";
        if (where) {
            ht_fail("ex_moe_route, top-%d, T = %d, E = %d: %s was written past its T * k "
                    "= %d entries", k, T, E, where, T * k);
        }
        for (int t = 0; t < T && ht_nbad == 0; t++) {
            const float *x_t = x + (size_t)t * E;
            int *c_t = ch + (size_t)t * k, *v_t = want + (size_t)t * k;
            char row[200];
            int m = snprintf(row, sizeof row, "logits");
            for (int e = 0; e < E && e < 8; e++)
                m += snprintf(row + m, sizeof row - m, " %g", x_t[e]);
            if (E > 8)
                snprintf(row + m, sizeof row - m, " ...");
            for (int j = 0; j < k && ht_nbad == 0; j++) {
                int got = c_t[j], exp_ = v_t[j];
                if (got == exp_)
                    continue;
                const char *like = "";
                if (got < 0 || got >= E)
                    like = ": not an expert";
                else if (k == 2 && c_t[0] == c_t[1])
                    like = ": the same expert twice; the second choice is the best of "
                           "the others";
                else if (x_t[got] == x_t[exp_] && got > exp_)
                    like = ": a tie (the same logit), and the higher index won it; the "
                           "lower index wins";
                else if (k == 2 && got == v_t[1 - j])
                    like = ": the two choices are swapped; the most probable comes first";
                snprintf(why, sizeof why, "ex_moe_route, top-%d, T = %d, E = %d: token "
                         "%d's choice %d is expert %d, expected %d (logit %g; %s)%s", k,
                         T, E, t, j, got, exp_, x_t[exp_], row, like);
                ht_fail("%s", why);
            }
            for (int j = 0; j < k && ht_nbad == 0; j++) {
                double got = w[(size_t)t * k + j], exp_ = ww[(size_t)t * k + j];
                if (fabs(got - exp_) <= 1e-6)
                    continue;
                double p = prob(x, E, t, v_t[j]);
                const char *like = "";
                if (k == 2 && fabs(got - p) <= 1e-6)
                    like = ": it is the softmax probability itself; top-2's weights are "
                           "renormalised over the two chosen, p[c] / (p[c0] + p[c1])";
                else if (k == 1 && fabs(got - 1) <= 1e-6)
                    like = ": top-1's weight is the softmax probability of its expert "
                           "(Switch), not renormalised to 1";
                else if (fabs(got - exp(x_t[v_t[j]])) <= 1e-5 * exp(x_t[v_t[j]]))
                    like = ": it is exp(logit), the softmax not divided by its sum";
                ht_fail("ex_moe_route, top-%d, T = %d, E = %d: token %d's weight %d is "
                        "%.9g, expected %.9g (softmax probability %.9g; %s)%s", k, T, E,
                        t, j, got, exp_, p, row, like);
            }
        }
        free(x);
        free(ch);
        free(want);
        free(w);
        free(ww);
    }
}

START_TEST(top1)
{
    route_cases(1);
    HT_VERDICT();
}
END_TEST

START_TEST(top2)
{
    route_cases(2);
    HT_VERDICT();
}
END_TEST

/* ==== capacity ==== */

START_TEST(capacity)
{
    static const struct { double f; int k, T, E; } fixed[] = {
        { 1.1f, 1, 80, 8 }, { 1.0, 1, 6, 3 }, { 1.25, 2, 7, 3 }, { 1.0, 1, 0, 4 },
        { 2.0, 2, 10, 1 }, { 0.5, 1, 1, 16 }, { 1.5, 2, 33, 16 }, { 1.1f, 2, 500, 16 },
    };
    rng = 1610;
    for (int c = 0; c < 8 + 2 * NCASES && ht_nbad == 0; c++) {
        double f;
        int k, T, E;
        if (c < 8) {
            f = fixed[c].f, k = fixed[c].k, T = fixed[c].T, E = fixed[c].E;
        } else {
            static const float fs[] = { 0.5f, 0.75f, 1.0f, 1.1f, 1.2f, 1.25f, 1.5f,
                                        2.0f };
            f = c % 2 ? (double)fs[below(8)] : (double)(float)(0.5 + 1.5 * uni());
            k = 1 + below(2), E = k + below(17 - k), T = below(501);
        }
        int got = ex_moe_capacity(f, k, T, E), want = truth_capacity(f, k, T, E);
        if (got == want)
            continue;
        double v = f * k * T / E;
        const char *like = "";
        if (T == 0)
            like = ": no tokens, no slots";
        else if (got == (int)floor(v) && got < want)
            like = ": that is the floor; the capacity is the ceiling, so that an even "
                   "load drops nothing";
        else if (got == (int)ceil(v) && got == want + 1)
            like = ": the product was not rounded to 6 decimals first (a float factor "
                   "such as 1.1f is a hair above 1.1)";
        else if (got > T)
            like = ": an expert takes a token at most once: at most T";
        ht_fail("ex_moe_capacity(%.9g, k %d, T %d, E %d) is %d, expected %d = "
                "ceil(%.9g)%s", f, k, T, E, got, want, v, like);
    }
    HT_VERDICT();
}
END_TEST

/* ==== slots ==== */

START_TEST(assign)
{
    static const float fs[] = { 0.5f, 0.75f, 1.0f, 1.1f, 1.25f, 1.5f, 2.0f };
    rng = 1620;
    for (int c = 0; c < NCASES && ht_nbad == 0; c++) {
        int k = 1 + c % 2, E = k + below(17 - k), T = c < 4 ? c : below(501);
        int C = c % 7 == 3 && T > 0 ? 1 : truth_capacity(fs[below(7)], k, T, E);
        float *x = gr_floats(T * E);
        make_logits(x, T, E, 2 + below(12));
        int *ch = malloc(((size_t)T * k + 1) * sizeof *ch);
        double *ww = malloc(((size_t)T * k + 1) * sizeof *ww);
        int *slot = guarded_ints(T * k), *kept = guarded_ints(E), *drop = guarded_ints(E);
        int *ws = ints(T * k), *wk = ints(2 * E);
        DT_REQUIRE(ch && ww, "out of memory");
        int *wd = wk + E;
        truth_route(x, T, E, k, ch, ww);
        int got = ex_moe_assign(ch, T, k, E, C, slot, kept, drop);
        int want = truth_assign(ch, T, k, E, C, 0, ws, wk, wd);
        char at[120];
        snprintf(at, sizeof at, "ex_moe_assign, top-%d, T = %d, E = %d, C = %d", k, T, E,
                 C);
        if (guard_hit(slot, T * k) || guard_hit(kept, E) || guard_hit(drop, E)) {
            int s = guard_hit(slot, T * k);
            ht_fail("%s: %s was written past its %d entries", at, s ? "slot" :
                    guard_hit(kept, E) ? "kept" : "drop", s ? T * k : E);
        } else if (!same(slot, ws, T * k)) {
            int i = 0;
            while (slot[i] == ws[i])
                i++;
            const char *like = "";
            for (int e = 0; e < E; e++)
                if (kept[e] > C) {
                    like = ": an expert took more than C choices; a choice finding its "
                           "expert full is dropped (slot -1)";
                    break;
                }
            int *alt = ints(T * k), *ak = ints(2 * E);
            if (!*like && k == 2) {
                truth_assign(ch, T, k, E, C, 1, alt, ak, ak + E);
                if (same(slot, alt, T * k))
                    like = ": the choices were placed token by token (a token's second "
                           "choice before the next token's first); every first choice "
                           "goes in before any second choice";
                truth_assign(ch, T, k, E, C, 2, alt, ak, ak + E);
                if (same(slot, alt, T * k))
                    like = ": the second choices were placed before the first; every "
                           "first choice goes in before any second choice, so that a "
                           "full expert drops second choices first";
            }
            free(alt);
            free(ak);
            ht_fail("%s: token %d's choice %d (expert %d) has slot %d, expected %d%s", at,
                    i / k, i % k, ch[i], slot[i], ws[i], like);
        } else if (!same(kept, wk, E) || !same(drop, wd, E)) {
            int e = 0;
            while (kept[e] == wk[e] && drop[e] == wd[e])
                e++;
            ht_fail("%s: expert %d kept %d and dropped %d, expected %d and %d (the slots "
                    "are right)", at, e, kept[e], drop[e], wk[e], wd[e]);
        } else {
            HT_EXPECT(got == want, "%s: returns %d dropped, expected %d, the choices "
                      "with slot -1", at, got, want);
        }
        free(x);
        free(ch);
        free(ww);
        free(slot);
        free(kept);
        free(drop);
        free(ws);
        free(wk);
    }
    HT_VERDICT();
}
END_TEST

/* ==== the all-to-all's layout ==== */

START_TEST(layout)
{
    rng = 1630;
    for (int c = 0; c < NCASES && ht_nbad == 0; c++) {
        int k = 1 + c % 2, E = k + below(17 - k), T = c < 4 ? c : below(501), N;
        do
            N = 1 + below(E);
        while (E % N);
        if (c % 5 == 1)
            N = E;                              /* one expert a rank */
        int C = truth_capacity(0.5 + 1.5 * uni(), k, T, E);
        float *x = gr_floats(T * E);
        make_logits(x, T, E, 2 + below(12));
        int *ch = ints(T * k), *slot = ints(T * k), *kept = ints(2 * E);
        double *ww = malloc(((size_t)T * k + 1) * sizeof *ww);
        DT_REQUIRE(ww != NULL, "out of memory");
        truth_route(x, T, E, k, ch, ww);
        truth_assign(ch, T, k, E, C, 0, slot, kept, kept + E);
        int *counts = guarded_ints(N), *sd = guarded_ints(N);
        int *order = guarded_ints(T * k), *wc = ints(2 * N), *wo = ints(T * k);
        int *wsd = wc + N;
        int got = ex_moe_send_layout(ch, slot, T, k, E, N, counts, sd, order);
        int rows = truth_layout(ch, slot, T, k, E, N, 0, 0, wc, wsd, wo);
        char at[120];
        snprintf(at, sizeof at, "ex_moe_send_layout, top-%d, T = %d, E = %d, N = %d, C = "
                 "%d", k, T, E, N, C);
        if (guard_hit(counts, N) || guard_hit(sd, N)) {
            ht_fail("%s: %s was written past its N = %d entries", at, guard_hit(counts, N)
                    ? "counts" : "sdispls", N);
        } else if (!same(counts, wc, N)) {
            int r = 0, sent = 0;
            while (counts[r] == wc[r])
                r++;
            for (int i = 0; i < N; i++)
                sent += counts[i];
            int *ac = ints(2 * N), *ao = ints(T * k);
            truth_layout(ch, slot, T, k, E, N, 1, 0, ac, ac + N, ao);
            int El = E / N;
            ht_fail("%s: counts[%d] is %d, expected %d, the kept choices of experts %d "
                    ".. %d%s", at, r, counts[r], wc[r], r * El, (r + 1) * El - 1,
                    same(counts, ac, N) && N > 1 && N < E ? ": those are the experts e "
                    "% N; expert e is on rank e / (E / N), its E / N experts side by side"
                    : sent == T * k && sent > rows ? ": the dropped choices (slot -1) "
                    "were counted; they are not sent" : "");
            free(ac);
            free(ao);
        } else if (!same(sd, wsd, N)) {
            int r = 0, incl = 1;
            while (sd[r] == wsd[r])
                r++;
            for (int i = 0; i < N; i++)
                incl = incl && sd[i] == wsd[i] + wc[i];
            ht_fail("%s: sdispls[%d] is %d, expected %d, the counts of ranks 0 .. r-1 "
                    "summed%s", at, r, sd[r], wsd[r], incl ? ": the displacements are "
                    "inclusive (counts[r] added before it is stored); rank r's block "
                    "starts where the blocks before it end, sdispls[0] = 0" : "");
        } else if (guard_hit(order, rows)) {
            ht_fail("%s: order was written past its %d rows, the kept choices (slot >= "
                    "0)", at, rows);
        } else if (!same(order, wo, rows)) {
            int i = 0;
            while (order[i] == wo[i])
                i++;
            int *ac = ints(2 * N), *ao = ints(T * k);
            truth_layout(ch, slot, T, k, E, N, 0, 1, ac, ac + N, ao);
            ht_fail("%s: row %d of the send buffer is token %d, expected token %d%s", at,
                    i, order[i], wo[i], same(order, ao, rows) ? ": the rows are in slot "
                    "order (first choices before second); within an expert they go in "
                    "token order" : "");
            free(ac);
            free(ao);
        } else {
            HT_EXPECT(got == rows, "%s: returns %d rows, expected %d, the kept choices",
                      at, got, rows);
        }
        free(x);
        free(ch);
        free(slot);
        free(ww);
        free(kept);
        free(counts);
        free(sd);
        free(order);
        free(wc);
        free(wo);
    }
    HT_VERDICT();
}
END_TEST

/* dtlab's routing (lib/parallel/moe_route.c) is the answer. */
#define MOE "dti_moe_[a-z_]*|dt_moe_[a-z_]*"
static const gr_rule rules[] = {
    { "ex_moe_capacity", MOE, "compute the ceiling yourself; dtlab's routing is the "
      "answer" },
    { "ex_moe_route", MOE, "the softmax and the top-k by hand; dtlab's routing is the "
      "answer" },
    { "ex_moe_assign", MOE, "fill the slots yourself; dtlab's routing is the answer" },
    { "ex_moe_send_layout", MOE, "count and lay out the rows yourself; dtlab's routing "
      "is the answer" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "top1", 2, GR_PURE, top1, 1,
          "top-1: the most probable expert, ties to the lower index; its probability",
          "ex_moe_route" },
        { "top2", 2, GR_PURE, top2, 1,
          "top-2: the best two, the first first; weights renormalised over the two",
          "ex_moe_route" },
        { "capacity", 2, GR_PURE, capacity, 1,
          "ceil(factor * k * T / E), rounded to 6 decimals first, 1 .. T; 0 for T = 0",
          "ex_moe_capacity" },
        { "assign", 2, GR_PURE, assign, 1,
          "slots first come first served, first choices before second; kept, dropped",
          "ex_moe_assign" },
        { "layout", 2, GR_PURE, layout, 1,
          "counts per rank (expert e on rank e / (E/N)), exclusive sdispls, row order",
          "ex_moe_send_layout" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "16_moe_dispatch",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]) });
}
