/* Grading exercise 13, today's pipeline schedules. Pure functions, judged by what an
 * order must do, with truths and a clock of the grader's own; of dtlab's library it
 * takes only the slots of dtlab's step (dt_pp_slots_v), which an order must not exceed,
 * and, for HINTS=1, dtlab's order to show:
 *
 *   groups       k = M/P groups (one when M < P), the larger first, summing to M.
 *   chunk_order  every entry of the forward and backward tables, against tables built
 *                here from the groups.
 *   il_ops       interleaved's order of each stage holds each of its 2vM operations
 *                once, each chunk's backwards in increasing m.
 *   il_clock     every stage's order played together on one clock of slots (as
 *                lib/schedule's dt_pp_timetable_v plays dtlab's, written again here):
 *                no stage waits forever, and the step takes no more slots than
 *                dtlab's, with backwards of 1, 2 and 3 slots.
 *   il_stash     the most chunk micro-batches a stage holds at once (from F until its
 *                B): (v-1) g + P-s, at most vM (g: the first group's size).
 *   zb_ops, zb_clock (tb, tw = 1 or 2), zb_stash (F until W: min(P, M) on every stage,
 *   at most min(P-s, M) of them before their B), zb_put_off (W m right after B m+s).
 * Every P 1..6 with every M 1..12 and v 1..4 (M < P, and M not a multiple of P,
 * included), then a few larger pipelines; small ones first, so that the first failure
 * shown is a small one. A deadlocking order is found by the clock, never run. */
#include <stdlib.h>
#include <string.h>
#include "grade.h"

enum { IL = DT_PP_INTERLEAVED, ZB = DT_PP_ZBH1 };
static const char *const NAME[4] = { "GPipe", "1F1B", "interleaved", "ZB-H1" };

/* (P, M, v): every small one, P first, then a few larger ones. */
enum { PSMALL = 6, MSMALL = 12, VSMALL = 4, GUARD = 8 };
static const int BIG[][3] = { { 8, 16, 2 }, { 7, 17, 3 }, { 5, 23, 4 }, { 12, 12, 2 } };
#define NBIG ((int)(sizeof BIG / sizeof BIG[0]))
#define NCFG (PSMALL * MSMALL * VSMALL + NBIG)

static void config(int i, int *P, int *M, int *v)
{
    if (i < PSMALL * MSMALL * VSMALL) {
        *P = 1 + i / (MSMALL * VSMALL);
        *M = 1 + i / VSMALL % MSMALL;
        *v = 1 + i % VSMALL;
    } else {
        *P = BIG[i - PSMALL * MSMALL * VSMALL][0];
        *M = BIG[i - PSMALL * MSMALL * VSMALL][1];
        *v = BIG[i - PSMALL * MSMALL * VSMALL][2];
    }
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* ==== the truths, computed here ==== */

/* Interleaved's groups: k = M / P (one when M < P), the first M % k one larger. */
enum { MMAX = 64 };
static int groups_truth(int P, int M, int *g)
{
    int k = M >= P ? M / P : 1;
    DT_REQUIRE(M <= MMAX, "the grader's pipelines have at most %d micro-batches", MMAX);
    for (int i = 0; i < k; i++)
        g[i] = M / k + (i < M % k);
    return k;
}

/* Entry t of the forward (fwd 1) or backward table: group by group, chunk by chunk. */
static dt_pp_op table_truth(int P, int M, int v, int fwd, int t)
{
    int g[MMAX], k = groups_truth(P, M, g), lo = 0;
    for (int i = 0; i < k; lo += g[i], t -= v * g[i], i++)
        if (t < v * g[i]) {
            int j = t / g[i];
            return (dt_pp_op){ .kind = fwd ? 'F' : 'B', .micro = lo + t % g[i],
                               .chunk = fwd ? j : v - 1 - j };
        }
    return (dt_pp_op){ .kind = '?', .micro = -1, .chunk = -1 };
}

/* Interleaved's first group's size, g; its stash at stage s, the warm-up's (v-1) g +
 * P-s-1 forwards and one more, at most vM. (ZB-H1's stash is min(P, M).) */
static int first_group(int P, int M)
{
    int g[MMAX];
    groups_truth(P, M, g);
    return g[0];
}
static int il_stash(int P, int M, int v, int s)
{
    return imin((v - 1) * first_group(P, M) + P - s, v * M);
}

/* ==== text for the messages ==== */

static const char *op_text(dt_pp_op o, int v, char *buf)
{
    char c = o.kind >= ' ' && o.kind < 127 ? o.kind : '?';
    if (v > 1 && o.chunk >= 0 && o.chunk < 26)
        sprintf(buf, "%c%d%c", c, o.micro, 'a' + o.chunk);
    else if (v > 1)
        sprintf(buf, "%c%d(chunk %d)", c, o.micro, o.chunk);
    else
        sprintf(buf, "%c%d", c, o.micro);
    return buf;
}

/* ops[0..n) as "F0a F1a B0b ...", cut short past 24 operations. */
static const char *ops_text(const dt_pp_op *ops, int n, int v, char *buf, size_t len)
{
    size_t at = 0;
    char one[40];
    buf[0] = '\0';
    for (int k = 0; k < n && at + 24 < len; k++) {
        if (k == 24) {
            snprintf(buf + at, len - at, " ...");
            break;
        }
        at += (size_t)snprintf(buf + at, len - at, "%s%s", k ? " " : "",
                               op_text(ops[k], v, one));
    }
    return buf;
}

/* " dtlab's order of stage s: ..." with HINTS=1, else "". */
static const char *expected(int sched, int P, int M, int v, int s, char *buf, size_t len)
{
    buf[0] = '\0';
    if (!gr_hints())
        return buf;
    int n = dt_pp_nops(sched, P, M, v);
    dt_pp_op *ref = malloc((size_t)n * sizeof *ref);
    DT_REQUIRE(ref != NULL, "out of memory");
    dt_pp_order_v(sched, P, M, v, s, ref);
    char list[200];
    snprintf(buf, len, " dtlab's order of stage %d: %s.", s,
             ops_text(ref, n, v, list, sizeof list));
    free(ref);
    return buf;
}

/* ==== the orders of every stage ==== */

/* One pipeline: P stages, each running n operations, ops[s*n + k]; at[] the place of
 * each operation in its stage's order (at_of). */
typedef struct {
    int sched, P, M, v, n;
    dt_pp_op *ops;
    int *at;
} pipeline;

static int kind_index(char kind) { return kind == 'F' ? 0 : kind == 'B' ? 1 : 2; }

/* Where (kind, micro, chunk) sits in stage s's order: at[] is filled by orders(). */
static int *at_of(const pipeline *p, int s, char kind, int micro, int chunk)
{
    return &p->at[(((size_t)s * 3 + kind_index(kind)) * p->v + chunk) * p->M + micro];
}

#define WHERE "%s, P=%d, M=%d%s, stage %d: "
#define VTEXT(p) ((p)->sched == IL ? vtext : "")

/* Checks stage s's order, row (n operations and GUARD more, ret the function's
 * return), on its own: n operations, each of the schedule's exactly once, nothing
 * written past them, and the backwards (and W's) of each chunk in increasing m, so that
 * gradients add up in the same order under every schedule. Then copies it into the
 * pipeline and fills at[] for stage s. Notes a failure and returns 0 otherwise. */
static int order_ok(const pipeline *p, int s, const dt_pp_op *row, int ret)
{
    int M = p->M, v = p->v, n = p->n, zb = p->sched == ZB;
    char got[300], want[300], vtext[16], one[40], two[40];
    snprintf(vtext, sizeof vtext, ", v=%d", v);
    ops_text(row, n, v, got, sizeof got);
    expected(p->sched, p->P, M, v, s, want, sizeof want);
    const char *nm = NAME[p->sched];
    if (ret != n) {
        ht_fail(WHERE "returned %d; it must return the number of operations it "
                "wrote, %d%s. Got %s.%s", nm, p->P, M, VTEXT(p), s, ret, n, zb ? " (3M: F, B and W of each "
                "micro-batch)" : " (2vM: F and B of each micro-batch through each chunk)",
                got, want);
        return 0;
    }
    for (int k = n; k < n + GUARD; k++)
        if (row[k].kind != '#') {
            ht_fail(WHERE "wrote ops[%d], past the %d operations of the stage.", nm, p->P,
                    M, VTEXT(p), s, k, n);
            return 0;
        }
    for (int i = 0; i < 3 * v * M; i++)
        p->at[(size_t)s * 3 * v * M + i] = -1;
    for (int k = 0; k < n; k++) {
        dt_pp_op x = row[k];
        int kind_ok = x.kind == 'F' || x.kind == 'B' || (zb && x.kind == 'W');
        if (!kind_ok || x.micro < 0 || x.micro >= M || x.chunk < 0 || x.chunk >= v) {
            ht_fail(WHERE "place %d holds %s (kind %d, micro-batch %d, chunk %d); kinds "
                    "are %s, micro-batches 0..%d, chunks 0..%d. Got %s.%s", nm, p->P, M,
                    VTEXT(p), s, k, op_text(x, v, one), x.kind, x.micro, x.chunk,
                    zb ? "'F', 'B' and 'W'" : "'F' and 'B'", M - 1, v - 1, got, want);
            return 0;
        }
        int *at = at_of(p, s, x.kind, x.micro, x.chunk);
        if (*at >= 0) {
            ht_fail(WHERE "%s appears twice, at places %d and %d; each operation runs "
                    "exactly once. Got %s.%s", nm, p->P, M, VTEXT(p), s,
                    op_text(x, v, one), *at, k, got, want);
            return 0;
        }
        *at = k;
    }
    static const char KINDS[2] = { 'B', 'W' };
    for (int c = 0; c < v; c++)
        for (int i = 0; i < 1 + zb; i++)
            for (int m = 1; m < M; m++)
                if (*at_of(p, s, KINDS[i], m, c) < *at_of(p, s, KINDS[i], m - 1, c)) {
                    dt_pp_op a = { KINDS[i], m, c }, b = { KINDS[i], m - 1, c };
                    ht_fail(WHERE "%s comes before %s; the %s of each chunk run in "
                            "increasing m, so that gradients add up in the same order "
                            "under every schedule. Got %s.%s", nm, p->P, M, VTEXT(p), s,
                            op_text(a, v, one), op_text(b, v, two),
                            i ? "W's" : "backwards", got, want);
                    return 0;
                }
    memcpy(p->ops + (size_t)s * n, row, (size_t)n * sizeof *row);
    return 1;
}

/* A pipeline for (sched, P, M, v), its orders still empty. Free with pipeline_free. */
static pipeline pipeline_new(int sched, int P, int M, int v)
{
    pipeline p = { .sched = sched, .P = P, .M = M, .v = v,
                   .n = sched == ZB ? 3 * M : 2 * v * M };
    p.ops = malloc((size_t)P * p.n * sizeof *p.ops);
    p.at = malloc((size_t)P * 3 * v * M * sizeof *p.at);
    DT_REQUIRE(p.ops != NULL && p.at != NULL, "out of memory");
    return p;
}

static void pipeline_free(pipeline *p)
{
    free(p->ops);
    free(p->at);
}

/* Fills every stage's order from the learner's function, each written into a row of
 * its own with guards after it, and checks each (order_ok); returns 1 when all are
 * sound. */
static int orders(pipeline *p)
{
    dt_pp_op *row = malloc((size_t)(p->n + GUARD) * sizeof *row);
    DT_REQUIRE(row != NULL, "out of memory");
    int ok = 1;
    for (int s = 0; s < p->P && ok; s++) {
        for (int k = 0; k < p->n + GUARD; k++)
            row[k] = (dt_pp_op){ .kind = '#', .micro = -7, .chunk = -7 };
        int ret = p->sched == ZB ? ex_zb_order(p->P, p->M, s, row)
                                 : ex_il_order(p->P, p->M, p->v, s, row);
        ok = order_ok(p, s, row, ret);
    }
    free(row);
    return ok;
}

/* ==== the clock ==== */

/* The slots op takes: F 1; interleaved's B, the whole backward, tb + tw; ZB-H1's B tb
 * and W tw. */
static int cost(const pipeline *p, dt_pp_op o, int tb, int tw)
{
    if (o.kind == 'F')
        return 1;
    if (o.kind == 'W')
        return tw;
    return p->sched == ZB ? tb : tb + tw;
}

/* The operation stage s's op waits for besides the stage's previous one: its stage
 * (returned; -1 for none) and its place *dk. Op's virtual stage is c = chunk P + s: F
 * waits for F of c-1 (none at c = 0); B for B of c+1, and at the last virtual stage,
 * vP-1, for its own F (the loss turns F into B); W for its own B. */
static int dep(const pipeline *p, int s, dt_pp_op o, dt_pp_op *d, int *dk)
{
    int P = p->P, c = o.chunk * P + s, dc = c;
    *d = o;
    if (o.kind == 'F') {
        if (c == 0)
            return -1;
        dc = c - 1;
    } else if (o.kind == 'B') {
        if (c < p->v * P - 1)
            dc = c + 1;
        else
            d->kind = 'F';
    } else {
        d->kind = 'B';
    }
    d->chunk = dc / P;
    *dk = *at_of(p, dc % P, d->kind, d->micro, d->chunk);
    return dc % P;
}

/* Says why the stages wait on each other forever, next[] the first operation each
 * could not place: from a stuck stage, the operation it waits for, and that stage's
 * own stuck operation, and so on round the cycle. */
static void deadlock(const pipeline *p, const int *next, char *why, size_t len)
{
    int s = 0, seen[64] = { 0 }, path[64], np = 0;
    while (next[s] == p->n)
        s++;
    while (!seen[s] && np < 64) {
        seen[s] = 1;
        path[np++] = s;
        dt_pp_op d;
        int dk;
        s = dep(p, s, p->ops[(size_t)s * p->n + next[s]], &d, &dk);
    }
    size_t at = 0;
    int first = 0;
    while (path[first] != s)
        first++;
    why[0] = '\0';
    for (int i = first; i < np && at + 80 < len; i++) {
        int q = path[i], dk;
        dt_pp_op o = p->ops[(size_t)q * p->n + next[q]], d;
        int ds = dep(p, q, o, &d, &dk);
        char a[40], b[40], c[40];
        if (ds == q)
            at += (size_t)snprintf(why + at, len - at, "%sstage %d's %s waits for its own "
                                   "%s, which comes later in its order (%s)", i > first ?
                                   "; " : "", q, op_text(o, p->v, a), op_text(d, p->v, b),
                                   o.kind == 'W' ? "W needs its B" : o.kind == 'F' ?
                                   "F needs the chunk before's output" : d.kind == 'F' ?
                                   "on the last virtual stage the loss turns F into B: B "
                                   "needs its own F" : "B needs the gradient of the chunk "
                                   "after");
        else
            at += (size_t)snprintf(why + at, len - at, "%sstage %d's %s waits for %s of "
                                   "stage %d, which is stuck before it, at %s", i > first ?
                                   "; " : "", q, op_text(o, p->v, a), op_text(d, p->v, b),
                                   ds, op_text(p->ops[(size_t)ds * p->n + next[ds]], p->v,
                                   c));
    }
}

/* Plays the stages' orders (sound: orders()) on one clock, each operation as soon as
 * its stage has ended the previous one and its dependency has ended; returns the slots
 * the step takes, or -1 when the stages wait on each other forever, with why. Rounds:
 * each stage places as many of its next operations as it can; a round that places none
 * is a deadlock. */
static int play(const pipeline *p, int tb, int tw, char *why, size_t len)
{
    int P = p->P, n = p->n, left = P * n, slots = 0;
    int *start = malloc((size_t)P * n * sizeof *start), *next = calloc((size_t)P, sizeof
                                                                        *next);
    DT_REQUIRE(start != NULL && next != NULL, "out of memory");
    while (left > 0) {
        int progress = 0;
        for (int s = 0; s < P; s++) {
            for (; next[s] < n; next[s]++) {
                int k = next[s], dk;
                dt_pp_op o = p->ops[(size_t)s * n + k], d;
                int t = k ? start[s * n + k - 1] + cost(p, p->ops[(size_t)s * n + k - 1],
                                                        tb, tw) : 0;
                int ds = dep(p, s, o, &d, &dk);
                if (ds >= 0) {
                    if (dk >= next[ds])
                        break;              /* its dependency is not placed yet */
                    t = imax(t, start[ds * n + dk] + cost(p, d, tb, tw));
                }
                start[s * n + k] = t;
                slots = imax(slots, t + cost(p, o, tb, tw));
                left--;
                progress = 1;
            }
        }
        if (!progress) {
            deadlock(p, next, why, len);
            slots = -1;
            break;
        }
    }
    free(next);
    free(start);
    return slots;
}

/* ==== the cases ==== */

/* The case's pipelines, one after another, until the first failure: check(p) on each
 * whose orders are sound (ZB-H1: each (P, M) once, v = 1). With need_sound, orders that are not
 * sound fail the case with a pointer to the case that says why. */
static void each_pipe(int sched, void (*check)(pipeline *p), int need_sound)
{
    for (int i = 0; i < NCFG && !ht_nbad; i++) {
        int P, M, v;
        config(i, &P, &M, &v);
        if (sched == ZB && v != 1 && i < PSMALL * MSMALL * VSMALL)
            continue;
        if (sched == ZB)
            v = 1;                  /* (the larger pipelines too) */
        pipeline p = pipeline_new(sched, P, M, v);
        if (orders(&p))
            check(&p);
        else if (need_sound) {
            ht_nbad = 0;
            ht_fail("%s, P=%d, M=%d, v=%d: the orders are not sound (each of a stage's "
                    "operations exactly once): fix %s first (the case %s says why)",
                    NAME[sched], P, M, v, sched == ZB ? "ex_zb_order" : "ex_il_order",
                    sched == ZB ? "zb_ops" : "il_ops");
        }
        pipeline_free(&p);
    }
}

START_TEST(groups)
{
    char got[200], want[200];
    for (int i = 0; i < NCFG && !ht_nbad; i++) {
        int P, M, v;
        config(i, &P, &M, &v);
        if (v != 1 && i < PSMALL * MSMALL * VSMALL)
            continue;
        int *g = malloc((size_t)(M + GUARD) * sizeof *g), *t = malloc((size_t)M * sizeof *t);
        DT_REQUIRE(g != NULL && t != NULL, "out of memory");
        for (int j = 0; j < M + GUARD; j++)
            g[j] = -7;
        int k = ex_il_groups(P, M, g), kt = groups_truth(P, M, t), sum = 0;
        size_t at = 0;
        got[0] = '\0';
        for (int j = 0; j < imin(imax(k, 0), M) && at + 16 < sizeof got; j++) {
            sum += g[j];
            at += (size_t)snprintf(got + at, sizeof got - at, "%s%d", j ? " " : "", g[j]);
        }
        at = 0;
        for (int j = 0; j < kt && at + 16 < sizeof want; j++)
            at += (size_t)snprintf(want + at, sizeof want - at, "%s%d", j ? " " : "", t[j]);
#define GWHERE "P=%d, M=%d: "
        if (k != kt) {
            ht_fail(GWHERE "returned %d groups; interleaved cuts the M micro-batches into "
                    "k = M/P = %d (one when M < P), so that each holds at least P.", P, M,
                    k, kt);
        }
        for (int j = M; j < M + GUARD && !ht_nbad; j++)
            if (g[j] != -7)
                ht_fail(GWHERE "wrote g[%d], past the M = %d entries of g.", P, M, j, M);
        if (!ht_nbad && sum != M)
            ht_fail(GWHERE "the groups' sizes (%s) add up to %d, not M = %d.", P, M, got,
                    sum, M);
        for (int j = 0; j < k && !ht_nbad; j++)
            if (g[j] != t[j])
                ht_fail(GWHERE "group %d holds %d micro-batches; expected sizes %s, got "
                        "%s%s.", P, M, j, g[j], want, got, g[0] < g[k - 1] ? " (the "
                        "smaller groups first: the larger ones come first, or the last "
                        "stage's first backward would come before its own forward)" :
                        " (M/k each, the first M %% k one more)");
        free(g);
        free(t);
    }
    HT_VERDICT();
}
END_TEST

/* ex_il_table's forward table, then its backward one, entry by entry; at the first
 * entry wrong, notes a failure that says what it looks like. */
static void check_table(int P, int M, int v)
{
    char one[40], two[40], list[300];
    dt_pp_op *row = malloc((size_t)v * M * sizeof *row);
    int *g = malloc((size_t)M * sizeof *g), *t = malloc((size_t)M * sizeof *t);
    DT_REQUIRE(row != NULL && g != NULL && t != NULL, "out of memory");
    for (int fwd = 1; fwd >= 0 && !ht_nbad; fwd--) {
        for (int i = 0; i < v * M; i++)
            row[i] = ex_il_table(P, M, v, fwd, i);
        for (int i = 0; i < v * M; i++) {
            dt_pp_op x = row[i], w = table_truth(P, M, v, fwd, i);
            if (x.kind == w.kind && x.micro == w.micro && x.chunk == w.chunk)
                continue;
            const char *why = "";
            int k = ex_il_groups(P, M, g), kt = groups_truth(P, M, t);
            int groups_bad = k != kt || memcmp(g, t, (size_t)kt * sizeof *t) != 0;
            if (x.kind != w.kind)
                why = " (kind 'F' in the forward table, 'B' in the backward one)";
            else if (groups_bad)
                why = " (ex_il_groups, which it may read, is wrong here: see the case "
                      "groups)";
            else if (!fwd && x.micro == w.micro && x.chunk == v - 1 - w.chunk)
                why = " (the backwards go through the chunks from v-1 down to 0: the "
                      "gradient comes back from the model's last layers, the last "
                      "virtual stage)";
            else if (x.micro == w.micro && x.chunk != w.chunk)
                why = " (a group's micro-batches go through one chunk, all of them, "
                      "before the next chunk)";
            ht_fail("P=%d, M=%d, v=%d: the %s table's entry %d is %s; expected %s%s. "
                    "Got %s.", P, M, v, fwd ? "forward" : "backward", i,
                    op_text(x, v, one), op_text(w, v, two), why,
                    ops_text(row, v * M, v, list, sizeof list));
            break;
        }
    }
    free(row);
    free(g);
    free(t);
}

START_TEST(chunk_order)
{
    for (int i = 0; i < NCFG && !ht_nbad; i++) {
        int P, M, v;
        config(i, &P, &M, &v);
        check_table(P, M, v);
    }
    HT_VERDICT();
}
END_TEST

static void nothing(pipeline *p) { (void)p; }

START_TEST(il_ops)
{
    each_pipe(IL, nothing, 0);
    HT_VERDICT();
}
END_TEST

/* The first stage whose order is not dtlab's (0 when all are). */
static int first_differing(const pipeline *p)
{
    dt_pp_op *r = malloc((size_t)p->n * sizeof *r);
    DT_REQUIRE(r != NULL, "out of memory");
    int s = 0;
    for (; s < p->P; s++) {
        dt_pp_order_v(p->sched, p->P, p->M, p->v, s, r);
        const dt_pp_op *o = p->ops + (size_t)s * p->n;
        int k = 0;
        while (k < p->n && o[k].kind == r[k].kind && o[k].micro == r[k].micro &&
               o[k].chunk == r[k].chunk)
            k++;
        if (k < p->n)
            break;
    }
    free(r);
    return s < p->P ? s : 0;
}

/* The pipeline on the clock with costs (tb, tw): no deadlock, no more slots than
 * dtlab's step. */
static void check_clock(pipeline *p)
{
    static const int COST[2][3][2] = { { { 1, 1 }, { 1, 0 }, { 2, 1 } },
                                       { { 1, 1 }, { 2, 1 }, { 1, 2 } } };
    int zb = p->sched == ZB;
    char why[280], vtext[16], want[300];
    snprintf(vtext, sizeof vtext, ", v=%d", p->v);
    for (int c = 0; c < 3 && !ht_nbad; c++) {
        int tb = COST[zb][c][0], tw = COST[zb][c][1];
        int slots = play(p, tb, tw, why, sizeof why);
        int ref = dt_pp_slots_v(p->sched, p->P, p->M, p->v, tb, tw);
        if (slots < 0) {
            int s = first_differing(p);
            char got[200];
            ops_text(p->ops + (size_t)s * p->n, p->n, p->v, got, sizeof got);
            ht_fail("%s, P=%d, M=%d%s: the stages' orders wait on each other forever: "
                    "%s. Stage %d runs %s.%s", NAME[p->sched], p->P, p->M, VTEXT(p), why,
                    s, got, expected(p->sched, p->P, p->M, p->v, s, want, sizeof want));
        } else if (slots > ref) {
            char costs[64];
            if (zb)
                snprintf(costs, sizeof costs, "B of %d slot(s), W of %d", tb, tw);
            else
                snprintf(costs, sizeof costs, "a backward of %d slot(s)", tb + tw);
            int s = first_differing(p);
            char got[300];
            ops_text(p->ops + (size_t)s * p->n, p->n, p->v, got, sizeof got);
            ht_fail("%s, P=%d, M=%d%s, %s: the step takes %d slots; dtlab's %s takes %d "
                    "(%s). Stage %d runs %s.%s", NAME[p->sched], p->P, p->M, VTEXT(p),
                    costs, slots, NAME[p->sched], ref, zb ? "max(M,P) + (P-1) tb + "
                    "M (tb+tw): the W's put off fill the tail" : "(v max(M,P) + min(M,P)"
                    " - 1)(1+tb+tw)", s, got,
                    expected(p->sched, p->P, p->M, p->v, s, want, sizeof want));
        }
    }
}

START_TEST(il_clock)
{
    each_pipe(IL, check_clock, 1);
    HT_VERDICT();
}
END_TEST

/* The most operations of stage s held at once: +1 at each F, -1 at each frees. */
static int peak(const pipeline *p, int s, char frees, int *lead)
{
    const dt_pp_op *o = p->ops + (size_t)s * p->n;
    int held = 0, most = 0;
    *lead = 0;
    while (*lead < p->n && o[*lead].kind == 'F')
        (*lead)++;
    for (int k = 0; k < p->n; k++) {
        held += o[k].kind == 'F' ? 1 : o[k].kind == frees ? -1 : 0;
        most = imax(most, held);
    }
    return most;
}

static void check_il_stash(pipeline *p)
{
    int P = p->P, M = p->M, v = p->v;
    char got[300], want[300];
    for (int s = 0; s < P; s++) {
        int lead, most = peak(p, s, 'B', &lead), st = il_stash(P, M, v, s);
        int g = first_group(P, M), w = (v - 1) * g + P - s - 1;
        if (most == st)
            continue;
        ops_text(p->ops + (size_t)s * p->n, p->n, v, got, sizeof got);
        expected(IL, P, M, v, s, want, sizeof want);
        ht_fail("interleaved, P=%d, M=%d, v=%d, stage %d: holds at most %d chunk "
                "micro-batches at once (from F until its B); interleaved holds %d: a "
                "warm-up of (v-1) g + P-s-1 = %d forward(s) (g = %d, the first group's "
                "size), then the first steady one, at most vM in all (%s). Its first "
                "backward comes after %d forward(s). Got %s.%s", P, M, v, s, most, st, w, g,
                most > st ? "warm-up too long: a longer one, as Megatron-LM's 2(P-s-1) + "
                "(v-1) g, stashes more and shortens nothing" : "warm-up too short: the "
                "stages after this one wait", lead, got, want);
        return;
    }
}

START_TEST(il_stash_case)
{
    each_pipe(IL, check_il_stash, 1);
    HT_VERDICT();
}
END_TEST

START_TEST(zb_ops)
{
    each_pipe(ZB, nothing, 0);
    HT_VERDICT();
}
END_TEST

START_TEST(zb_clock)
{
    each_pipe(ZB, check_clock, 1);
    HT_VERDICT();
}
END_TEST

static void check_zb_stash(pipeline *p)
{
    int P = p->P, M = p->M;
    char got[300], want[300];
    for (int s = 0; s < P; s++) {
        int lead, most = peak(p, s, 'W', &lead), act = peak(p, s, 'B', &lead);
        int st = imin(P, M), full = imin(P - s, M);
        if (most == st && act <= full)
            continue;
        ops_text(p->ops + (size_t)s * p->n, p->n, 1, got, sizeof got);
        expected(ZB, P, M, 1, s, want, sizeof want);
        if (most != st)
            ht_fail("ZB-H1, P=%d, M=%d, stage %d: holds at most %d micro-batches at once "
                    "(from F until its W); ZB-H1 holds min(P, M) = %d on every stage, "
                    "1F1B's stage 0 peak (%s). Got %s.%s", P, M, s, most, st, most < st ?
                    "fewer: are the W's put off by s?" : "more: the W's put off too "
                    "long, or the warm-up too long", got, want);
        else
            ht_fail("ZB-H1, P=%d, M=%d, stage %d: holds %d micro-batches' full "
                    "activations at once (from F until its B); at most min(P-s, M) = %d, "
                    "as 1F1B: warm-up too long. Got %s.%s", P, M, s, act, full, got,
                    want);
        return;
    }
}

START_TEST(zb_stash)
{
    each_pipe(ZB, check_zb_stash, 1);
    HT_VERDICT();
}
END_TEST

static void check_put_off(pipeline *p)
{
    int P = p->P, M = p->M;
    char got[300], want[300];
    for (int s = 0; s < P; s++) {
        const dt_pp_op *o = p->ops + (size_t)s * p->n;
        int last_b = *at_of(p, s, 'B', M - 1, 0);
        for (int m = 0; m < M; m++) {
            int w = *at_of(p, s, 'W', m, 0), after = w > 0 ? w - 1 : 0;
            int ok = m + s < M ? w == *at_of(p, s, 'B', m + s, 0) + 1
                               : w > last_b && (m == 0 || w > *at_of(p, s, 'W', m - 1, 0));
            if (ok)
                continue;
            ops_text(o, p->n, 1, got, sizeof got);
            expected(ZB, P, M, 1, s, want, sizeof want);
            if (m + s < M)
                ht_fail("ZB-H1, P=%d, M=%d, stage %d: W%d comes at place %d, after %c%d; "
                        "stage s puts its W's off by s = %d micro-batches: W m runs right "
                        "after B m+s, here B%d. Got %s.%s", P, M, s, m, w,
                        o[after].kind, o[after].micro, s, m + s, got, want);
            else
                ht_fail("ZB-H1, P=%d, M=%d, stage %d: W%d comes at place %d; the W's of "
                        "the last min(s, M) = %d micro-batches, which no B comes s after, "
                        "run after the last B, in increasing m. Got %s.%s", P, M, s, m, w,
                        imin(s, M), got, want);
            return;
        }
    }
}

START_TEST(zb_put_off)
{
    each_pipe(ZB, check_put_off, 1);
    HT_VERDICT();
}
END_TEST

/* The orders are the exercise: lib/schedule.h's pipeline functions may not stand in for
 * them (any of them: they all read the orders dtlab writes). */
#define PS_RULE "dt_pp_[a-z0-9_]*|dti_pp_[a-z0-9_]*"
#define PS_WHY "write the orders yourself; lib/schedule.h's dt_pp_order_v and the " \
               "functions around it are the answer"
static const gr_rule rules[] = {
    { "ex_il_groups", PS_RULE, PS_WHY },
    { "ex_il_table", PS_RULE, PS_WHY },
    { "ex_il_order", PS_RULE, PS_WHY },
    { "ex_zb_order", PS_RULE, PS_WHY },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "groups", 1, GR_PURE, groups, 1,
          "interleaved's groups: M/P of them (one when M < P), the larger first",
          "ex_il_groups" },
        { "chunk_order", 2, GR_PURE, chunk_order, 1,
          "the forward and backward tables: group by group, chunk by chunk",
          "ex_il_table" },
        { "il_ops", 1, GR_PURE, il_ops, 1,
          "interleaved: each stage's 2vM operations once, backwards in increasing m",
          "ex_il_order" },
        { "il_clock", 3, GR_PURE, il_clock, 1,
          "interleaved on the clock: no deadlock, no more slots than dtlab's",
          "ex_il_order" },
        { "il_stash", 2, GR_PURE, il_stash_case, 1,
          "interleaved's peak stash (F until B): (v-1) g + P-s, at most vM",
          "ex_il_order" },
        { "zb_ops", 1, GR_PURE, zb_ops, 1,
          "ZB-H1: each stage's F, B and W once, B's and W's in increasing m",
          "ex_zb_order" },
        { "zb_clock", 2, GR_PURE, zb_clock, 1,
          "ZB-H1 on the clock, tb, tw = 1, 2: no deadlock, no more slots than dtlab's",
          "ex_zb_order" },
        { "zb_stash", 1, GR_PURE, zb_stash, 1,
          "ZB-H1's peak stash (F until W): min(P, M) on every stage",
          "ex_zb_order" },
        { "zb_put_off", 1, GR_PURE, zb_put_off, 1,
          "ZB-H1: W m right after B m+s, the last min(s, M) after the last B",
          "ex_zb_order" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "13_pipeline_schedules",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]) });
}
