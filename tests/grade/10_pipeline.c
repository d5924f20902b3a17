/* Grading exercise 10, pipeline timetables. Pure functions, checked first against what
 * they must mean, then against dtlab's answer (the contract says the orders and the
 * clock are schedule.h's):
 *
 *   order      every stage runs each F m and B m exactly once, B m after F m, both in
 *              increasing m; GPipe runs all forwards first; 1F1B warms up with
 *              min(P-s-1, M) forwards, then alternates, and stashes at most
 *              min(P-s, M) micro-batches; the stages' orders played together on a
 *              clock (a simulation written here) never wait on each other forever.
 *   timetable  checked on the learner's own orders: every operation starts exactly
 *              when its stage is free and its dependency has ended (F m on F m of
 *              stage s-1, B m on B m of stage s+1); the step lasts until the last end,
 *              (M+P-1)(1+tb) slots for both schedules.
 * Small configurations come first, so the first failure shown is a small one. */
#include <stdlib.h>
#include "grade.h"

static const char *const NAME[2] = { "GPipe", "1F1B" };

/* (P, M) pairs tried: every small one, then a few large ones. */
enum { PSMALL = 6, MSMALL = 9, PMAX = 16, MMAX = 64 };
static const int BIG[][2] = { { 8, 16 }, { 12, 32 }, { 4, 64 }, { 16, 8 }, { 16, 17 } };
#define NBIG ((int)(sizeof BIG / sizeof BIG[0]))
#define NPAIRS (PSMALL * MSMALL + NBIG)

static void pair(int i, int *P, int *M)
{
    if (i < PSMALL * MSMALL) {
        *P = 1 + i / MSMALL;
        *M = 1 + i % MSMALL;
    } else {
        *P = BIG[i - PSMALL * MSMALL][0];
        *M = BIG[i - PSMALL * MSMALL][1];
    }
}

static int imin(int a, int b) { return a < b ? a : b; }
static int imax(int a, int b) { return a > b ? a : b; }

/* ==== text for the messages ==== */

/* ops[0..n) as "F0 F1 B0 ...", cut short with "..." past 20 operations. */
static const char *ops_text(const dt_pp_op *ops, int n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < n && at + 8 < len; k++) {
        if (k == 20) {
            snprintf(buf + at, len - at, " ...");
            break;
        }
        char c = ops[k].kind >= ' ' && ops[k].kind < 127 ? ops[k].kind : '?';
        at += (size_t)snprintf(buf + at, len - at, "%s%c%d", k ? " " : "", c,
                               ops[k].micro);
    }
    return buf;
}

/* dtlab's timetable drawn on one line, stages separated by " / ", when it is short
 * enough to read in a message; else "". */
static const char *draw_line(int sched, int P, int M, int tb, char *buf, size_t len)
{
    char pic[1024];
    int need = dt_pp_draw(sched, P, M, tb, pic, sizeof pic);
    if (need < 0 || need >= (int)sizeof pic || need > 260) {
        buf[0] = '\0';
        return buf;
    }
    size_t at = 0;
    at += (size_t)snprintf(buf, len, " Expected timetable: ");
    for (const char *p = pic; *p && at + 4 < len; p++) {
        if (*p == '\n') {
            if (p[1])
                at += (size_t)snprintf(buf + at, len - at, " / ");
        } else if (!(*p == ' ' && p[1] == ' ')) {     /* squeeze the padding */
            buf[at++] = *p;
            buf[at] = '\0';
        }
    }
    return buf;
}

/* ==== one stage's order on its own ==== */

/* Checks what needs no other stage: 2M operations, each F m and B m once, B m after
 * F m, and (strict) both in increasing m. Notes a failure and returns 0 otherwise. */
static int order_sane(int sched, int P, int M, int s, const dt_pp_op *ops, int ret,
                      int strict)
{
    char got[160], want[160];
    dt_pp_op ref[2 * MMAX];
    dt_pp_order(sched, P, M, s, ref);
    ops_text(ops, 2 * M, got, sizeof got);
    ops_text(ref, 2 * M, want, sizeof want);
#define WHERE "stage %d of %d, M=%d, %s: "
#define LISTS " Got %s; expected %s"
    if (ret != 2 * M) {
        ht_fail(WHERE "returned %d; it must return 2M = %d." LISTS, s, P, M, NAME[sched],
                ret, 2 * M, got, want);
        return 0;
    }
    int kf[MMAX], kb[MMAX];
    for (int m = 0; m < M; m++)
        kf[m] = kb[m] = -1;
    for (int k = 0; k < 2 * M; k++) {
        dt_pp_op o = ops[k];
        if ((o.kind != 'F' && o.kind != 'B') || o.micro < 0 || o.micro >= M) {
            char c = o.kind >= ' ' && o.kind < 127 ? o.kind : '?';
            ht_fail(WHERE "place %d holds kind %d ('%c'), micro-batch %d; kinds are 'F' "
                    "and 'B', micro-batches 0..%d." LISTS, s, P, M, NAME[sched], k,
                    o.kind, c, o.micro, M - 1, got, want);
            return 0;
        }
        int *seen = o.kind == 'F' ? kf : kb;
        if (seen[o.micro] >= 0) {
            ht_fail(WHERE "%c%d appears twice, at places %d and %d; each forward and "
                    "backward runs exactly once." LISTS, s, P, M, NAME[sched], o.kind,
                    o.micro, seen[o.micro], k, got, want);
            return 0;
        }
        seen[o.micro] = k;
        if (o.kind == 'B' && kf[o.micro] < 0) {
            ht_fail(WHERE "B%d comes before F%d on the same stage; a backward needs the "
                    "activations its forward stashed (dependency broken)." LISTS, s, P, M,
                    NAME[sched], o.micro, o.micro, got, want);
            return 0;
        }
    }
    for (int m = 1; m < M && strict; m++) {
        if (kf[m] < kf[m - 1] || kb[m] < kb[m - 1]) {
            char c = kf[m] < kf[m - 1] ? 'F' : 'B';
            ht_fail(WHERE "%c%d comes before %c%d; %s run in increasing m%s." LISTS, s, P,
                    M, NAME[sched], c, m, c, m - 1, c == 'F' ? "forwards" : "backwards",
                    c == 'F' ? "" : ", so that gradients add up in the same order under "
                    "every schedule", got, want);
            return 0;
        }
    }
    return 1;
}

/* Checks the schedule's shape: GPipe all forwards first; 1F1B its warm-up, its stash and
 * its alternation; and then dtlab's order exactly. Needs order_sane. */
static int order_shape(int sched, int P, int M, int s, const dt_pp_op *ops)
{
    char got[160], want[160];
    dt_pp_op ref[2 * MMAX];
    dt_pp_order(sched, P, M, s, ref);
    ops_text(ops, 2 * M, got, sizeof got);
    ops_text(ref, 2 * M, want, sizeof want);
    int lead = 0, held = 0, peak = 0;
    while (lead < 2 * M && ops[lead].kind == 'F')
        lead++;
    for (int k = 0; k < 2 * M; k++) {
        held += ops[k].kind == 'F' ? 1 : -1;
        peak = imax(peak, held);
    }
    if (sched == 0 && lead != M) {
        ht_fail(WHERE "B%d comes at place %d; GPipe runs every forward before its "
                "first backward." LISTS, s, P, M, NAME[sched], ops[lead].micro, lead, got,
                want);
        return 0;
    }
    if (sched == 1) {
        int w = imin(P - s - 1, M), first = imin(P - s, M);
        if (lead < first) {
            ht_fail(WHERE "%d forward(s) before the first backward; expected %d: a "
                    "warm-up of min(P-s-1, M) = %d forward(s), then the steady phase's "
                    "first forward. Without the warm-up the stages after this one sit "
                    "idle (no warm-up?)." LISTS, s, P, M, NAME[sched], lead, first, w,
                    got, want);
            return 0;
        }
        if (peak > imin(P - s, M)) {
            ht_fail(WHERE "holds %d micro-batches' activations at once; 1F1B holds at "
                    "most min(P-s, M) = %d (warm-up too long: min(P-s-1, M) = %d "
                    "forwards)." LISTS, s, P, M, NAME[sched], peak, imin(P - s, M), w,
                    got, want);
            return 0;
        }
        for (int k = lead, f = lead; k < 2 * M; k++) {
            char due = (k - lead) % 2 == 0 || f == M ? 'B' : 'F';
            if (ops[k].kind != due) {
                ht_fail(WHERE "place %d holds %c%d where a %s was due; after the "
                        "warm-up a 1F1B stage alternates one backward and one forward "
                        "until the forwards run out." LISTS, s, P, M, NAME[sched], k,
                        ops[k].kind, ops[k].micro, due == 'F' ? "forward" : "backward",
                        got, want);
                return 0;
            }
            f += ops[k].kind == 'F';
        }
    }
    for (int k = 0; k < 2 * M; k++) {
        if (ops[k].kind != ref[k].kind || ops[k].micro != ref[k].micro) {
            ht_fail(WHERE "place %d holds %c%d; schedule.h's order has %c%d there." LISTS,
                    s, P, M, NAME[sched], k, ops[k].kind, ops[k].micro, ref[k].kind,
                    ref[k].micro, got, want);
            return 0;
        }
    }
    return 1;
}

/* ==== every stage on one clock ==== */

static int dur(dt_pp_op o, int tb) { return o.kind == 'F' ? 1 : tb; }

/* Where (kind, micro) sits in ops[0..n), or -1. */
static int find(const dt_pp_op *ops, int n, char kind, int micro)
{
    for (int k = 0; k < n; k++)
        if (ops[k].kind == kind && ops[k].micro == micro)
            return k;
    return -1;
}

/* The stage operation (s, k) waits on, or -1 for none; its place in *dk. */
static int dep_of(const dt_pp_op *ops, int P, int n, int s, int k, int *dk)
{
    dt_pp_op o = ops[(size_t)s * n + k];
    int d = o.kind == 'F' ? s - 1 : s + 1;
    if (d < 0 || d >= P)
        return -1;
    *dk = find(ops + (size_t)d * n, n, o.kind, o.micro);
    return d;
}

/* Plays the stages' orders ops[s*n + k] (each already sane) on one clock, as soon as
 * possible, into start[]; returns the slots taken, or -1 when the stages wait on each
 * other forever, after noting a failure that names the cycle. */
static int simulate(int sched, int P, int M, int tb, const dt_pp_op *ops, int *start)
{
    int n = 2 * M, left = P * n, end = 0;
    int *next = calloc((size_t)P, sizeof *next);
    DT_REQUIRE(next != NULL, "out of memory");
    while (left > 0) {
        int progress = 0;
        for (int s = 0; s < P; s++) {
            for (; next[s] < n; next[s]++) {
                int k = next[s], dk = 0, d = dep_of(ops, P, n, s, k, &dk);
                int t = k ? start[s * n + k - 1] + dur(ops[s * n + k - 1], tb) : 0;
                if (d >= 0) {
                    if (dk >= next[d])
                        break;                  /* its dependency is not placed yet */
                    t = imax(t, start[d * n + dk] + dur(ops[d * n + dk], tb));
                }
                start[s * n + k] = t;
                end = imax(end, t + dur(ops[s * n + k], tb));
                left--;
                progress = 1;
            }
        }
        if (!progress) {
            int s = 0, dk = 0;
            while (next[s] == n)
                s++;
            int k = next[s], d = dep_of(ops, P, n, s, k, &dk);
            dt_pp_op o = ops[s * n + k], od = ops[d * n + next[d]];
            ht_fail("P=%d, M=%d, %s: the stages' orders wait on each other forever: "
                    "stage %d's next operation %c%d waits for %c%d of stage %d, but "
                    "stage %d is stuck before it, at %c%d (a dependency cycle: F m needs "
                    "F m of stage s-1, B m needs B m of stage s+1; check each stage's "
                    "warm-up)", P, M, NAME[sched], s, o.kind, o.micro, o.kind, o.micro,
                    d, d, od.kind, od.micro);
            end = -1;
            break;
        }
    }
    free(next);
    return end;
}

/* Fills ops[s*2M ..] with ex_pp_order for every stage and checks each on its own;
 * returns 1 when all are sane. The timetable cases ask less (not strict): any order
 * that runs each operation once, B m after F m, can be laid on a clock. */
static int orders(int sched, int P, int M, dt_pp_op *ops, int strict)
{
    int n = 2 * M;
    for (int s = 0; s < P; s++) {
        dt_pp_op *row = ops + (size_t)s * n;
        for (int k = 0; k < n; k++)
            row[k] = (dt_pp_op){ .kind = '?', .micro = -1 };
        if (!order_sane(sched, P, M, s, row, ex_pp_order(sched, P, M, s, row), strict))
            return 0;
    }
    return 1;
}

/* ==== the timetable ==== */

/* Checks ex_pp_timetable on one configuration against the learner's own orders ops;
 * returns 0 after noting a failure. */
static int check_timetable(int sched, int P, int M, int tb, const dt_pp_op *ops,
                           int same_as_ref)
{
    enum { GUARD = 8 };
    int n = 2 * M, total = P * n;
    int *start = malloc((size_t)(total + GUARD) * sizeof *start);
    int *ref = malloc((size_t)total * sizeof *ref);
    DT_REQUIRE(start != NULL && ref != NULL, "out of memory");
    for (int i = 0; i < total + GUARD; i++)
        start[i] = -7;
    int ret = ex_pp_timetable(sched, P, M, tb, start);
    int refret = dt_pp_timetable(sched, P, M, tb, ref);
    char pic[300];
    draw_line(sched, P, M, tb, pic, sizeof pic);
#define TWHERE "%s, P=%d, M=%d, tb=%d: "
    int ok = 1, end = 0;
    for (int i = total; i < total + GUARD && ok; i++)
        if (start[i] != -7) {
            ht_fail(TWHERE "wrote start[%d], past the P*2M = %d entries of start",
                    NAME[sched], P, M, tb, i, total);
            ok = 0;
        }
    for (int s = 0; s < P && ok; s++) {
        for (int k = 0; k < n && ok; k++) {
            dt_pp_op o = ops[s * n + k];
            int t = start[s * n + k], dk = 0, d = dep_of(ops, P, n, s, k, &dk);
            int freed = k ? start[s * n + k - 1] + dur(ops[s * n + k - 1], tb) : 0;
            int dend = d >= 0 ? start[d * n + dk] + dur(ops[d * n + dk], tb) : 0;
            int want = imax(freed, dend);
            const char *nm = NAME[sched];
            if (t < 0) {
                ht_fail(TWHERE "stage %d's %c%d (place %d of its order) has start %d; "
                        "every operation must be placed at a slot >= 0.%s", nm, P, M, tb,
                        s, o.kind, o.micro, k, t, pic);
            } else if (t < freed) {
                dt_pp_op p = ops[s * n + k - 1];
                int bshort = p.kind == 'B' && tb > 1 && t >= freed - tb + 1;
                ht_fail(TWHERE "stage %d's %c%d starts at slot %d, before its previous "
                        "operation %c%d ends at slot %d; a stage runs one operation at a "
                        "time%s.%s", nm, P, M, tb, s, o.kind, o.micro, t, p.kind, p.micro,
                        freed, bshort ? " (a backward lasts tb slots)" : "", pic);
            } else if (d >= 0 && t < dend) {
                const char *need = o.kind == 'F' ? "F m needs the activations of stage "
                                   "s-1" : "B m needs the gradient from stage s+1";
                ht_fail(TWHERE "stage %d's %c%d starts at slot %d, before %c%d of stage "
                        "%d ends at slot %d (dependency broken: %s).%s", nm, P, M, tb, s,
                        o.kind, o.micro, t, o.kind, o.micro, d, dend, need, pic);
            } else if (t > want) {
                char why[96];
                if (d >= 0)
                    snprintf(why, sizeof why, " and %c%d of stage %d ends at slot %d",
                             o.kind, o.micro, d, dend);
                else
                    snprintf(why, sizeof why, " and it waits on no other stage");
                ht_fail(TWHERE "stage %d's %c%d starts at slot %d, but it can start at "
                        "slot %d: the stage is free from slot %d%s. An operation starts "
                        "as soon as it can.%s", nm, P, M, tb, s, o.kind, o.micro, t, want,
                        freed, why, pic);
            }
            ok = !ht_nbad;
            end = imax(end, t + dur(o, tb));
        }
    }
    if (ok && ret != end) {
        ht_fail(TWHERE "returned %d, but the last operation ends at slot %d; return the "
                "slots the step takes.%s", NAME[sched], P, M, tb, ret, end, pic);
        ok = 0;
    }
    if (ok && same_as_ref) {
        int slots = (M + P - 1) * (1 + tb);
        if (ret != slots) {
            ht_fail(TWHERE "the step takes %d slots; it must take (M+P-1)(1+tb) = %d.%s",
                    NAME[sched], P, M, tb, ret, slots, pic);
            ok = 0;
        }
        for (int i = 0; i < total && ok; i++)
            if (start[i] != ref[i] || ret != refret) {
                ht_fail(TWHERE "stage %d's place %d starts at slot %d; schedule.h's "
                        "timetable has %d.%s", NAME[sched], P, M, tb, i / n, i % n,
                        start[i], ref[i], pic);
                ok = 0;
            }
    }
    free(ref);
    free(start);
    return ok;
}

/* The stages' orders ops (P stages, 2M each, dtlab's order or not) checked for their
 * shape, stage by stage. */
static void check_shapes(int sched, int P, int M, const dt_pp_op *ops)
{
    for (int s = 0; s < P; s++)
        if (!order_shape(sched, P, M, s, ops + (size_t)s * 2 * M))
            break;
}

/* ex_pp_timetable checked for tb = 1..3 on the learner's own orders ops; against
 * dtlab's timetable too where those orders are dtlab's. */
static void check_timetables(int sched, int P, int M, const dt_pp_op *ops)
{
    int same = 1;
    for (int s = 0; s < P && same; s++) {
        dt_pp_op ref[2 * MMAX];
        dt_pp_order(sched, P, M, s, ref);
        for (int k = 0; k < 2 * M; k++)
            same &= ops[s * 2 * M + k].kind == ref[k].kind &&
                    ops[s * 2 * M + k].micro == ref[k].micro;
    }
    for (int tb = 1; tb <= 3 && !ht_nbad; tb++)
        check_timetable(sched, P, M, tb, ops, same);
}

/* ==== the cases ==== */

/* A case over every (P, M) pair, stopping at the first failure: each stage's
 * ex_pp_order on its own (strictly for the order cases), the stages played together on
 * one clock, then the orders' shape (timetable 0) or ex_pp_timetable (timetable 1). */
static void pairs_case(int sched, int timetable)
{
    dt_pp_op *ops = malloc((size_t)PMAX * 2 * MMAX * sizeof *ops);
    int *start = malloc((size_t)PMAX * 2 * MMAX * sizeof *start);
    DT_REQUIRE(ops != NULL && start != NULL, "out of memory");
    for (int i = 0; i < NPAIRS && !ht_nbad; i++) {
        int P, M;
        pair(i, &P, &M);
        if (!orders(sched, P, M, ops, !timetable)) {
            if (timetable) {
                /* the order cases explain it; the clock cannot be checked on such
                 * orders */
                ht_nbad = 0;
                ht_fail("%s, P=%d, M=%d: ex_pp_timetable lays out ex_pp_order's "
                        "operations, and those are not valid (each stage must run each "
                        "F m and B m once, B m after F m): fix ex_pp_order first (the "
                        "order cases say why)", NAME[sched], P, M);
            }
            break;
        }
        if (simulate(sched, P, M, 1, ops, start) < 0)
            break;
        if (timetable)
            check_timetables(sched, P, M, ops);
        else
            check_shapes(sched, P, M, ops);
    }
    free(start);
    free(ops);
}

START_TEST(order_gpipe)
{
    pairs_case(0, 0);
    HT_VERDICT();
}
END_TEST

START_TEST(order_1f1b)
{
    pairs_case(1, 0);
    HT_VERDICT();
}
END_TEST

START_TEST(timetable_gpipe)
{
    pairs_case(0, 1);
    HT_VERDICT();
}
END_TEST

START_TEST(timetable_1f1b)
{
    pairs_case(1, 1);
    HT_VERDICT();
}
END_TEST

/* The orders and the clock are the exercise: lib/schedule.h's may not stand in for
 * them (dt_pp_draw, to look at dtlab's timetable beside yours, is fine). */
#define PP_RULE "dt_pp_(order|timetable|warmup|index|peak_stash|bubble|schedule)|" \
                "dti_pp_[a-z_]*"
#define PP_WHY "write the order and the clock yourself; lib/schedule.h's dt_pp_order, " \
               "dt_pp_timetable and their helpers are the answer"
static const gr_rule rules[] = {
    { "ex_pp_order", PP_RULE, PP_WHY },
    { "ex_pp_timetable", PP_RULE, PP_WHY },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "order_gpipe", 2, GR_PURE, order_gpipe, 1,
          "GPipe: each F m, B m once, all forwards first, in increasing m",
          "ex_pp_order" },
        { "order_1f1b", 3, GR_PURE, order_1f1b, 1,
          "1F1B: warm-up of min(P-s-1, M) forwards, alternation, stash <= min(P-s, M)",
          "ex_pp_order" },
        { "timetable_gpipe", 2, GR_PURE, timetable_gpipe, 1,
          "GPipe on one clock: each op starts when its stage and dependency are done",
          "ex_pp_order ex_pp_timetable" },
        { "timetable_1f1b", 3, GR_PURE, timetable_1f1b, 1,
          "1F1B on one clock, tb = 1..3: (M+P-1)(1+tb) slots",
          "ex_pp_order ex_pp_timetable" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "10_pipeline",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]) });
}
