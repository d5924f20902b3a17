/* Unit tests of the pipeline timetables in lib/schedule.c: the orders GPipe and 1F1B run
 * their micro-batches in, the slots they take, the activations they stash. No MPI: the
 * pipeline is played on paper, here on arrays.
 *
 * Every stage must run each micro-batch's forward and backward exactly once, the forward
 * first; across stages the slot layout must respect the data flow (F m at stage s after
 * F m at s-1, B m at s after B m at s+1); and the figures must be the known ones: 1F1B
 * warms up with min(P-s-1, M) forwards (Megatron-LM), stashes min(P-s, M) micro-batches
 * where GPipe stashes M, and both lose (P-1)/(M+P-1) of the step to the bubble (GPipe
 * paper, section 2.3).
 *
 * Interleaved 1F1B (v chunks per stage) and ZB-H1 (backward cut into B and W) are played
 * the same way through the _v functions, on a slot-by-slot clock of their own here:
 * deadlock-free, each operation once, the timetable the greedy one, backwards in
 * increasing micro-batch order, and the closed forms of schedule.h (slots, bubble, peak
 * stash, messages) equal to what the play counts.
 *
 * The DDP bucket timetable is played the same way: a slot-by-slot simulation of ddp.c's
 * two threads (backward reports layers, ready buckets leave in order, one thread reduces
 * them) against dt_ddp_timetable, and its closed forms against the simulation.
 *
 *   build/tests/unit_pipeline            (CK_FORK=no to debug under gdb)
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "schedule.h"

/* Fails the test with a message only when cond is false (ck_assert_msg records a mark
 * point on every success, which is slow inside loops). */
#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

enum { PMAX = 9, MMAX = 13, TBMAX = 3 };
static const char *const NAME[2] = { "gpipe", "1f1b" };

static int imin(int a, int b) { return a < b ? a : b; }

/* The references, written the obvious way from the papers. */
static int ref_warmup(int sched, int P, int M, int s) { return sched ? imin(P - s - 1, M) : M; }
static int ref_stash(int sched, int P, int M, int s) { return sched ? imin(P - s, M) : M; }

/* ==== the order of one stage ==== */

START_TEST(test_order)
{
    dt_pp_op ops[2 * MMAX];
    for (int sched = 0; sched < 2; sched++)
        for (int P = 1; P <= PMAX; P++)
            for (int M = 1; M <= MMAX; M++)
                for (int s = 0; s < P; s++) {
                    memset(ops, 0, sizeof ops);
                    int n = dt_pp_order(sched, P, M, s, ops);
                    REQUIRE(n == 2 * M, "%s P %d M %d stage %d: %d ops, want %d",
                            NAME[sched], P, M, s, n, 2 * M);
                    int kf[MMAX], kb[MMAX];
                    for (int m = 0; m < M; m++)
                        kf[m] = kb[m] = -1;
                    for (int k = 0; k < n; k++) {
                        dt_pp_op o = ops[k];
                        REQUIRE((o.kind == 'F' || o.kind == 'B') && o.micro >= 0 && o.micro < M,
                                "%s P %d M %d stage %d: op %d is '%c' %d", NAME[sched], P, M, s,
                                k, o.kind, o.micro);
                        int *seen = o.kind == 'F' ? kf : kb;
                        REQUIRE(seen[o.micro] < 0, "%s P %d M %d stage %d: %c%d twice (at %d "
                                "and %d)", NAME[sched], P, M, s, o.kind, o.micro,
                                seen[o.micro], k);
                        seen[o.micro] = k;
                        REQUIRE(dt_pp_index(sched, P, M, s, o.kind, o.micro) == k,
                                "%s P %d M %d stage %d: dt_pp_index(%c%d) is %d, the order "
                                "has it at %d", NAME[sched], P, M, s, o.kind, o.micro,
                                dt_pp_index(sched, P, M, s, o.kind, o.micro), k);
                    }
                    /* all 2M distinct and in range, so each runs exactly once */
                    for (int m = 0; m < M; m++) {
                        REQUIRE(kf[m] < kb[m], "%s P %d M %d stage %d: B%d (at %d) before "
                                "F%d (at %d)", NAME[sched], P, M, s, m, kb[m], m, kf[m]);
                        if (m > 0)
                            REQUIRE(kf[m - 1] < kf[m] && kb[m - 1] < kb[m], "%s P %d M %d "
                                    "stage %d: micro-batches %d and %d out of order",
                                    NAME[sched], P, M, s, m - 1, m);
                    }
                    /* the forwards before the first backward: the warm-up, plus the
                       first steady forward when there is a steady phase */
                    int w = ref_warmup(sched, P, M, s), lead = 0;
                    while (ops[lead].kind == 'F')
                        lead++;
                    REQUIRE(dt_pp_warmup(sched, P, M, s) == w && lead == imin(w + 1, M),
                            "%s P %d M %d stage %d: dt_pp_warmup %d and %d forwards before "
                            "the first backward, want %d and %d", NAME[sched], P, M, s,
                            dt_pp_warmup(sched, P, M, s), lead, w, imin(w + 1, M));
                    /* 1F1B after the warm-up: F B F B ... while forwards remain, then Bs */
                    for (int k = w; k < n; k++) {
                        char want = (k - w) % 2 == 0 && k < 2 * M - w ? 'F' : 'B';
                        REQUIRE(ops[k].kind == want, "%s P %d M %d stage %d: op %d is %c, "
                                "want %c", NAME[sched], P, M, s, k, ops[k].kind, want);
                    }
                }
}
END_TEST

/* ==== the activations a stage holds ==== */

START_TEST(test_peak_stash)
{
    dt_pp_op ops[2 * MMAX];
    for (int sched = 0; sched < 2; sched++)
        for (int P = 1; P <= PMAX; P++)
            for (int M = 1; M <= MMAX; M++)
                for (int s = 0; s < P; s++) {
                    dt_pp_order(sched, P, M, s, ops);
                    int held = 0, peak = 0;
                    for (int k = 0; k < 2 * M; k++) {
                        held += ops[k].kind == 'F' ? 1 : -1;
                        peak = held > peak ? held : peak;
                    }
                    REQUIRE(held == 0, "%s P %d M %d stage %d: %d stashes left at the end",
                            NAME[sched], P, M, s, held);
                    REQUIRE(peak == ref_stash(sched, P, M, s) &&
                            dt_pp_peak_stash(sched, P, M, s) == peak, "%s P %d M %d stage %d: "
                            "playing the order holds %d at the peak, dt_pp_peak_stash says "
                            "%d, want %d", NAME[sched], P, M, s, peak,
                            dt_pp_peak_stash(sched, P, M, s), ref_stash(sched, P, M, s));
                }
    /* the numbers a lesson quotes: P = 4, M = 8, stage 0 */
    ck_assert_int_eq(dt_pp_peak_stash(0, 4, 8, 0), 8);
    ck_assert_int_eq(dt_pp_peak_stash(1, 4, 8, 0), 4);
    ck_assert_int_eq(dt_pp_peak_stash(1, 4, 8, 3), 1);
}
END_TEST

/* ==== the clock ==== */

static int dur(dt_pp_op o, int tb) { return o.kind == 'F' ? 1 : tb; }

/* Plays the timetable and checks every constraint, that each operation starts at the
 * earliest slot they allow (as soon as possible), the length (M+P-1)(1+tb), and the
 * bubble of every stage. */
static void check_timetable(int sched, int P, int M, int tb)
{
    int n = 2 * M;
    int *start = malloc(sizeof(int) * (size_t)(P * n));
    dt_pp_op *ops = malloc(sizeof(dt_pp_op) * (size_t)(P * n));
    ck_assert_ptr_nonnull(start);
    ck_assert_ptr_nonnull(ops);
    for (int s = 0; s < P; s++)
        dt_pp_order(sched, P, M, s, ops + s * n);
    int T = dt_pp_timetable(sched, P, M, tb, start);
    REQUIRE(T == (M + P - 1) * (1 + tb), "%s P %d M %d tb %d: %d slots, want (M+P-1)(1+tb) "
            "= %d", NAME[sched], P, M, tb, T, (M + P - 1) * (1 + tb));
    for (int s = 0; s < P; s++) {
        int busy = 0;
        for (int k = 0; k < n; k++) {
            dt_pp_op o = ops[s * n + k];
            int t = start[s * n + k], earliest = 0;
            REQUIRE(t >= 0 && t + dur(o, tb) <= T, "%s P %d M %d tb %d: stage %d %c%d at "
                    "slot %d, outside 0..%d", NAME[sched], P, M, tb, s, o.kind, o.micro, t, T);
            if (k > 0) {   /* one op at a time, in order */
                int pend = start[s * n + k - 1] + dur(ops[s * n + k - 1], tb);
                REQUIRE(t >= pend, "%s P %d M %d tb %d: stage %d starts %c%d at %d before "
                        "its previous op ends at %d", NAME[sched], P, M, tb, s, o.kind,
                        o.micro, t, pend);
                earliest = pend;
            }
            int dep = o.kind == 'F' ? s - 1 : s + 1;
            if (dep >= 0 && dep < P) {   /* the data flow between stages */
                int kd = dt_pp_index(sched, P, M, dep, o.kind, o.micro);
                int dend = start[dep * n + kd] + dur(o, tb);
                REQUIRE(t >= dend, "%s P %d M %d tb %d: stage %d starts %c%d at %d, but "
                        "stage %d finishes it only at %d", NAME[sched], P, M, tb, s, o.kind,
                        o.micro, t, dep, dend);
                earliest = dend > earliest ? dend : earliest;
            }
            REQUIRE(t == earliest, "%s P %d M %d tb %d: stage %d starts %c%d at %d, could "
                    "at %d", NAME[sched], P, M, tb, s, o.kind, o.micro, t, earliest);
            busy += dur(o, tb);
        }
        double idle = (double)(T - busy) / T;
        REQUIRE(fabs(idle - dt_pp_bubble(P, M)) < 1e-12, "%s P %d M %d tb %d: stage %d idle "
                "%.4f of the step, want (P-1)/(M+P-1) = %.4f", NAME[sched], P, M, tb, s,
                idle, dt_pp_bubble(P, M));
    }
    free(start);
    free(ops);
}

START_TEST(test_timetable)
{
    for (int sched = 0; sched < 2; sched++)
        for (int P = 1; P <= PMAX; P++)
            for (int M = 1; M <= MMAX; M++)
                for (int tb = 1; tb <= TBMAX; tb++)
                    check_timetable(sched, P, M, tb);
}
END_TEST

START_TEST(test_bubble)
{
    ck_assert_double_eq_tol(dt_pp_bubble(1, 5), 0.0, 1e-15);        /* no pipeline */
    ck_assert_double_eq_tol(dt_pp_bubble(4, 4), 3.0 / 7.0, 1e-15);
    ck_assert_double_eq_tol(dt_pp_bubble(4, 1), 0.75, 1e-15);       /* one micro: (P-1)/P */
    ck_assert_double_eq_tol(dt_pp_bubble(8, 32), 7.0 / 39.0, 1e-15);
    /* more micro-batches, smaller bubble */
    for (int P = 2; P <= PMAX; P++)
        for (int M = 1; M < MMAX; M++)
            REQUIRE(dt_pp_bubble(P, M + 1) < dt_pp_bubble(P, M), "P %d: bubble does not "
                    "shrink from M %d to %d", P, M, M + 1);
}
END_TEST

/* ==== edges ==== */

START_TEST(test_edges)
{
    dt_pp_op ops[2 * MMAX];
    /* P = 1: plain gradient accumulation; 1F1B alternates, GPipe runs all F then all B */
    dt_pp_order(1, 1, 3, 0, ops);
    const char *want1 = "F0B0F1B1F2B2", *wantg = "F0F1F2B0B1B2";
    char got[64] = "";
    for (int k = 0; k < 6; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%c%d", ops[k].kind, ops[k].micro);
    ck_assert_str_eq(got, want1);
    dt_pp_order(0, 1, 3, 0, ops);
    got[0] = '\0';
    for (int k = 0; k < 6; k++)
        snprintf(got + strlen(got), sizeof got - strlen(got), "%c%d", ops[k].kind, ops[k].micro);
    ck_assert_str_eq(got, wantg);
    int start[64];
    ck_assert_int_eq(dt_pp_timetable(1, 1, 3, 2, start), 9);          /* no idle slot */
    /* M = 1: both schedules are F0 B0 on every stage */
    for (int sched = 0; sched < 2; sched++)
        for (int s = 0; s < 4; s++) {
            dt_pp_order(sched, 4, 1, s, ops);
            REQUIRE(ops[0].kind == 'F' && ops[1].kind == 'B' && ops[0].micro == 0 &&
                    ops[1].micro == 0, "%s M 1 stage %d: not F0 B0", NAME[sched], s);
        }
    /* M < P: 1F1B's warm-up is cut at M, stage 0 runs like GPipe */
    ck_assert_int_eq(dt_pp_warmup(1, 4, 2, 0), 2);
    ck_assert_int_eq(dt_pp_warmup(1, 4, 2, 2), 1);
    ck_assert_int_eq(dt_pp_peak_stash(1, 4, 2, 0), 2);
    /* bad input */
    ck_assert_int_eq(dt_pp_order(2, 4, 4, 0, ops), -1);
    ck_assert_int_eq(dt_pp_order(1, 0, 4, 0, ops), -1);
    ck_assert_int_eq(dt_pp_order(1, 4, 0, 0, ops), -1);
    ck_assert_int_eq(dt_pp_order(1, 4, 4, 4, ops), -1);
    ck_assert_int_eq(dt_pp_index(1, 4, 4, 0, 'X', 0), -1);
    ck_assert_int_eq(dt_pp_index(1, 4, 4, 0, 'F', 4), -1);
    ck_assert_int_eq(dt_pp_peak_stash(0, 4, 4, -1), -1);
    ck_assert_int_eq(dt_pp_timetable(1, 4, 4, 0, start), -1);
    ck_assert_int_eq(dt_pp_draw(1, 4, 4, 1, NULL, 10), -1);
}
END_TEST

/* ==== the drawing ==== */

START_TEST(test_draw)
{
    /* P = 4, M = 4: the two pictures at the top of lib/parallel/pp.c */
    static const char gpipe[] =
        "stage 0 | F0 F1 F2 F3 .  .  .  .  .  .  B0 B1 B2 B3\n"
        "stage 1 | .  F0 F1 F2 F3 .  .  .  .  B0 B1 B2 B3 .\n"
        "stage 2 | .  .  F0 F1 F2 F3 .  .  B0 B1 B2 B3 .  .\n"
        "stage 3 | .  .  .  F0 F1 F2 F3 B0 B1 B2 B3 .  .  .\n";
    static const char f1b1[] =
        "stage 0 | F0 F1 F2 F3 .  .  .  B0 .  B1 .  B2 .  B3\n"
        "stage 1 | .  F0 F1 F2 .  .  B0 F3 B1 .  B2 .  B3 .\n"
        "stage 2 | .  .  F0 F1 .  B0 F2 B1 F3 B2 .  B3 .  .\n"
        "stage 3 | .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 .  .  .\n";
    char buf[1024];
    ck_assert_int_eq(dt_pp_draw(0, 4, 4, 1, buf, sizeof buf), (int)strlen(gpipe));
    ck_assert_str_eq(buf, gpipe);
    ck_assert_int_eq(dt_pp_draw(1, 4, 4, 1, buf, sizeof buf), (int)strlen(f1b1));
    ck_assert_str_eq(buf, f1b1);
    /* a backward of two slots fills two cells; wide micro numbers widen every cell */
    dt_pp_draw(0, 2, 1, 2, buf, sizeof buf);
    ck_assert_str_eq(buf, "stage 0 | F0 .  .  .  B0 B0\n"
                          "stage 1 | .  F0 B0 B0 .  .\n");
    dt_pp_draw(1, 1, 11, 1, buf, sizeof buf);
    ck_assert(strncmp(buf, "stage 0 | F0  B0  F1  B1 ", 25) == 0);
    /* too small a buffer: cut, terminated, and the length it needed */
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(dt_pp_draw(0, 4, 4, 1, buf, 10), (int)strlen(gpipe));
    ck_assert_str_eq(buf, "stage 0 |");
    ck_assert_int_eq(dt_pp_draw(0, 4, 4, 1, NULL, 0), (int)strlen(gpipe));
}
END_TEST

/* ==== interleaved 1F1B and zero bubble ====
 *
 * The four schedules through the _v functions, for every P 1..6, M 1..12 and (interleaved)
 * v 1..4, against references written here from the rules alone: each stage's order is
 * played on a clock of slots, one slot at a time, every operation waiting for its stage's
 * previous one and for its dependency (F of virtual stage c on F of c-1, B of c on B of
 * c+1, B of the last on its own F, W on its own B). A deadlock shows as a slot where no
 * stage runs and none can start. */

enum { VP = 6, VM = 12, VV = 4, VN = 2 * VV * VM, VCOST = 3 };
static const char *const VNAME[4] = { "gpipe", "1f1b", "interleaved", "zb-h1" };

static int imax(int a, int b) { return a > b ? a : b; }
static int kind_no(char kind)
{
    return kind == 'F' ? 0 : kind == 'B' ? 1 : kind == 'W' ? 2 : -1;
}

/* The orders of all stages, and where each (stage, kind, chunk, micro) sits in them,
 * found by reading the orders (not by dt_pp_index_v). */
typedef struct {
    int sched, P, M, v, n;
    dt_pp_op ops[VP][VN];
    int pos[VP][3][VV][VM];
} vplay;

/* Reads every stage's order and checks it: the right number of operations, each once,
 * in range, dt_pp_index_v agreeing, F before B before W of the same chunk micro-batch,
 * and the forwards, backwards and W's of each chunk in increasing micro-batch order. */
static void v_orders(vplay *p, int sched, int P, int M, int v)
{
    int zb = sched == 3;
    p->sched = sched, p->P = P, p->M = M, p->v = v;
    p->n = zb ? 3 * M : 2 * v * M;
    memset(p->pos, -1, sizeof p->pos);
    ck_assert_int_eq(dt_pp_nops(sched, P, M, v), p->n);
    for (int s = 0; s < P; s++) {
        int n = dt_pp_order_v(sched, P, M, v, s, p->ops[s]);
        REQUIRE(n == p->n, "%s P %d M %d v %d stage %d: %d ops, want %d", VNAME[sched], P,
                M, v, s, n, p->n);
        int last[3][VV];                               /* the last micro-batch seen */
        memset(last, -1, sizeof last);
        for (int k = 0; k < n; k++) {
            dt_pp_op o = p->ops[s][k];
            int kn = kind_no(o.kind);
            REQUIRE(kn >= 0 && (kn < 2 || zb) && o.micro >= 0 && o.micro < M &&
                    o.chunk >= 0 && o.chunk < v, "%s P %d M %d v %d stage %d: op %d is "
                    "'%c' micro %d chunk %d", VNAME[sched], P, M, v, s, k, o.kind, o.micro,
                    o.chunk);
            REQUIRE(p->pos[s][kn][o.chunk][o.micro] < 0, "%s P %d M %d v %d stage %d: %c%d "
                    "chunk %d twice (at %d and %d)", VNAME[sched], P, M, v, s, o.kind,
                    o.micro, o.chunk, p->pos[s][kn][o.chunk][o.micro], k);
            p->pos[s][kn][o.chunk][o.micro] = k;
            int idx = dt_pp_index_v(sched, P, M, v, s, o.kind, o.micro, o.chunk);
            REQUIRE(idx == k, "%s P %d M %d v %d stage %d: dt_pp_index_v(%c%d chunk %d) is "
                    "%d, the order has it at %d", VNAME[sched], P, M, v, s, o.kind, o.micro,
                    o.chunk, idx, k);
            REQUIRE(kn == 0 || p->pos[s][kn - 1][o.chunk][o.micro] >= 0, "%s P %d M %d v %d "
                    "stage %d: %c%d chunk %d before its %c", VNAME[sched], P, M, v, s,
                    o.kind, o.micro, o.chunk, kn == 1 ? 'F' : 'B');
            REQUIRE(o.micro > last[kn][o.chunk], "%s P %d M %d v %d stage %d: %c%d of chunk "
                    "%d after %c%d: not in increasing micro-batch order (gradients would "
                    "add up in another order)", VNAME[sched], P, M, v, s, o.kind, o.micro,
                    o.chunk, o.kind, last[kn][o.chunk]);
            last[kn][o.chunk] = o.micro;
        }
        /* n distinct ops of the right kinds and ranges: each runs exactly once */
    }
}

/* The reference warm-up: interleaved's first group holds ceil(M / (M/P)) micro-batches
 * (all M when M < P). */
static int ref_warmup_v(int sched, int P, int M, int v, int s)
{
    if (sched == 0)
        return M;
    int g = M < P ? M : (M + M / P - 1) / (M / P);
    return imin((v - 1) * g + P - s - 1, v * M);
}

/* The clock, slot by slot: writes start[s][k] and returns the slots the step takes, or
 * -1 on a deadlock. */
static int v_clock(const vplay *p, int tb, int tw, int start[VP][VN], int *busy)
{
    int P = p->P, v = p->v, n = p->n, next[VP] = { 0 }, free_at[VP] = { 0 }, done = 0;
    int end[VP][VN];
    for (int s = 0; s < P; s++)
        busy[s] = 0;
    for (int t = 0;; t++) {
        int running = 0;
        for (int s = 0; s < P; s++) {
            if (free_at[s] > t) {
                running = 1;
                continue;
            }
            if (next[s] == n)
                continue;
            dt_pp_op o = p->ops[s][next[s]];
            int c = o.chunk * P + s, dc = c, dk = kind_no(o.kind);
            if (o.kind == 'F')
                dc = c - 1;
            else if (o.kind == 'B' && c < v * P - 1)
                dc = c + 1;
            else
                dk--;                          /* the last B on its F, W on its B */
            if (dc >= 0) {
                int q = p->pos[dc % P][dk][dc / P][o.micro];
                if (q >= next[dc % P] || end[dc % P][q] > t)
                    continue;                  /* not run, or not ended yet */
            }
            int cost = o.kind == 'F' ? 1 : o.kind == 'W' ? tw : p->sched == 3 ? tb : tb + tw;
            start[s][next[s]] = t;
            end[s][next[s]] = free_at[s] = t + cost;
            busy[s] += cost;
            next[s]++;
            done++;
            running = 1;
        }
        if (done == P * n) {
            int T = 0;
            for (int s = 0; s < P; s++)
                T = imax(T, free_at[s]);
            return T;
        }
        if (!running)
            return -1;
    }
}

START_TEST(test_v_orders)
{
    static vplay p, q;
    for (int sched = 0; sched < 4; sched++)
        for (int P = 1; P <= VP; P++)
            for (int M = 1; M <= VM; M++)
                for (int v = 1; v <= (sched == 2 ? VV : 1); v++) {
                    v_orders(&p, sched, P, M, v);
                    for (int s = 0; s < P; s++) {
                        /* the warm-up: forwards before the first backward */
                        int w = ref_warmup_v(sched, P, M, v, s), lead = 0;
                        while (p.ops[s][lead].kind == 'F')
                            lead++;
                        REQUIRE(dt_pp_warmup_v(sched, P, M, v, s) == w &&
                                lead == imin(w + 1, v * M), "%s P %d M %d v %d stage %d: "
                                "warm-up %d and %d forwards before the first backward, want "
                                "%d and %d", VNAME[sched], P, M, v, s,
                                dt_pp_warmup_v(sched, P, M, v, s), lead, w, imin(w + 1, v * M));
                    }
                    if (sched == 2 && v > 1)
                        continue;
                    /* v = 1: interleaved is 1F1B; zb-h1 without its W's is 1F1B; gpipe
                       and 1f1b are what dt_pp_order said before */
                    v_orders(&q, sched == 0 ? 0 : 1, P, M, 1);
                    for (int s = 0; s < P; s++) {
                        dt_pp_op old[2 * VM];
                        if (sched < 2)
                            ck_assert_int_eq(dt_pp_order(sched, P, M, s, old), 2 * M);
                        for (int k = 0, j = 0; k < p.n; k++) {
                            dt_pp_op a = p.ops[s][k];
                            if (a.kind == 'W')
                                continue;
                            dt_pp_op b = q.ops[s][j++];
                            REQUIRE(a.kind == b.kind && a.micro == b.micro && a.chunk == 0 &&
                                    b.chunk == 0, "%s P %d M %d v 1 stage %d: op %d is %c%d, "
                                    "1f1b's is %c%d", VNAME[sched], P, M, s, k, a.kind,
                                    a.micro, b.kind, b.micro);
                            if (sched < 2)
                                REQUIRE(a.kind == old[k].kind && a.micro == old[k].micro,
                                        "%s P %d M %d stage %d: dt_pp_order_v and dt_pp_order "
                                        "differ at %d", VNAME[sched], P, M, s, k);
                        }
                    }
                }
}
END_TEST

/* The reference closed forms, derived in schedule.h. */
static int ref_slots(int sched, int P, int M, int v, int tb, int tw)
{
    if (sched == 3)
        return imax(M, P) + (P - 1) * tb + M * (tb + tw);
    return (v * imax(M, P) + imin(M, P) - 1) * (1 + tb + tw);
}

static int ref_stash_v(int sched, int P, int M, int v, int s)
{
    if (sched == 3)
        return imin(P, M);
    int w = ref_warmup_v(sched, P, M, v, s);
    return imin(w + 1, v * M);
}

START_TEST(test_v_timetable)
{
    static vplay p;
    static int start[VP][VN], lib[VP * VN], lib1[VP * VN];
    int busy[VP];
    for (int sched = 0; sched < 4; sched++)
        for (int P = 1; P <= VP; P++)
            for (int M = 1; M <= VM; M++)
                for (int v = 1; v <= (sched == 2 ? VV : 1); v++) {
                    v_orders(&p, sched, P, M, v);
                    for (int tb = 1; tb <= VCOST; tb++)
                        for (int tw = sched == 3; tw <= VCOST - (sched != 3); tw++) {
                            int T = v_clock(&p, tb, tw, start, busy);
                            REQUIRE(T > 0, "%s P %d M %d v %d: the stages deadlock",
                                    VNAME[sched], P, M, v);
                            int Tl = dt_pp_timetable_v(sched, P, M, v, tb, tw, lib);
                            REQUIRE(Tl == T && dt_pp_slots_v(sched, P, M, v, tb, tw) == T &&
                                    ref_slots(sched, P, M, v, tb, tw) == T, "%s P %d M %d v "
                                    "%d tb %d tw %d: the clock takes %d slots; "
                                    "dt_pp_timetable_v %d, dt_pp_slots_v %d, want %d",
                                    VNAME[sched], P, M, v, tb, tw, T, Tl,
                                    dt_pp_slots_v(sched, P, M, v, tb, tw),
                                    ref_slots(sched, P, M, v, tb, tw));
                            for (int s = 0; s < P; s++) {
                                for (int k = 0; k < p.n; k++)
                                    REQUIRE(lib[s * p.n + k] == start[s][k], "%s P %d M %d "
                                            "v %d tb %d tw %d: stage %d op %d (%c%d chunk "
                                            "%d) at slot %d, the clock says %d", VNAME[sched],
                                            P, M, v, tb, tw, s, k, p.ops[s][k].kind,
                                            p.ops[s][k].micro, p.ops[s][k].chunk,
                                            lib[s * p.n + k], start[s][k]);
                                double idle = (double)(T - busy[s]) / T;
                                REQUIRE(fabs(idle - dt_pp_bubble_v(sched, P, M, v, tb, tw))
                                        < 1e-12, "%s P %d M %d v %d tb %d tw %d: stage %d "
                                        "idle %.6f of the step, dt_pp_bubble_v %.6f",
                                        VNAME[sched], P, M, v, tb, tw, s, idle,
                                        dt_pp_bubble_v(sched, P, M, v, tb, tw));
                            }
                            if (sched == 2 && v == 1) {     /* 1F1B's clock, slot by slot */
                                int T1 = dt_pp_timetable_v(1, P, M, 1, tb, tw, lib1);
                                ck_assert_int_eq(T1, T);
                                REQUIRE(!memcmp(lib, lib1, sizeof(int) * P * p.n), "P %d M %d "
                                        "tb %d tw %d: interleaved v 1 is not 1f1b's timetable",
                                        P, M, tb, tw);
                            }
                            if (sched < 2 && tw == 0) {     /* what dt_pp_timetable said */
                                ck_assert_int_eq(dt_pp_timetable(sched, P, M, tb, lib1), T);
                                REQUIRE(!memcmp(lib, lib1, sizeof(int) * P * p.n), "%s P %d "
                                        "M %d tb %d: _v and old timetables differ",
                                        VNAME[sched], P, M, tb);
                            }
                        }
                    /* M >= P: the bubble is (P-1)/(vM+P-1) (zb-h1, tb = tw = 1:
                       (P-1)/(3M+P-1)), as the papers have it */
                    if (M >= P) {
                        double want = sched == 3 ? (double)(P - 1) / (3 * M + P - 1)
                                                 : (double)(P - 1) / (v * M + P - 1);
                        REQUIRE(fabs(dt_pp_bubble_v(sched, P, M, v, 1, 1) - want) < 1e-12,
                                "%s P %d M %d v %d: bubble %.6f, want %.6f", VNAME[sched],
                                P, M, v, dt_pp_bubble_v(sched, P, M, v, 1, 1), want);
                    }
                }
}
END_TEST

/* The stash, counted by playing each order (a chunk micro-batch is held from its F
 * until its B frees it; zb-h1: until its W), and the messages, counted as the
 * dependencies that cross from one stage to another. */
START_TEST(test_v_stash_messages)
{
    static vplay p;
    for (int sched = 0; sched < 4; sched++)
        for (int P = 1; P <= VP; P++)
            for (int M = 1; M <= VM; M++)
                for (int v = 1; v <= (sched == 2 ? VV : 1); v++) {
                    v_orders(&p, sched, P, M, v);
                    int sent[VP] = { 0 }, got[VP] = { 0 };
                    for (int s = 0; s < P; s++) {
                        int held = 0, peak = 0, full = 0, peak_full = 0;
                        for (int k = 0; k < p.n; k++) {
                            dt_pp_op o = p.ops[s][k];
                            char frees = sched == 3 ? 'W' : 'B';
                            held += o.kind == 'F' ? 1 : o.kind == frees ? -1 : 0;
                            full += o.kind == 'F' ? 1 : o.kind == 'B' ? -1 : 0;
                            peak = imax(peak, held);
                            peak_full = imax(peak_full, full);
                            int c = o.chunk * P + s;
                            int dc = o.kind == 'F' ? c - 1 : o.kind == 'B' ? c + 1 : -1;
                            if (dc >= 0 && dc < v * P && dc % P != s) {
                                sent[dc % P]++;
                                got[s]++;
                            }
                        }
                        REQUIRE(held == 0, "%s P %d M %d v %d stage %d: %d stashes left at "
                                "the end", VNAME[sched], P, M, v, s, held);
                        REQUIRE(peak == ref_stash_v(sched, P, M, v, s) &&
                                dt_pp_peak_stash_v(sched, P, M, v, s) == peak, "%s P %d M %d "
                                "v %d stage %d: the order holds %d at the peak, "
                                "dt_pp_peak_stash_v says %d, want %d", VNAME[sched], P, M, v,
                                s, peak, dt_pp_peak_stash_v(sched, P, M, v, s),
                                ref_stash_v(sched, P, M, v, s));
                        if (sched == 3)     /* full activations: 1F1B's, min(P-s, M) */
                            REQUIRE(peak_full == imin(P - s, M), "zb-h1 P %d M %d stage %d: "
                                    "%d micro-batches before their B, 1F1B holds %d", P, M,
                                    s, peak_full, imin(P - s, M));
                        if (sched < 2)
                            ck_assert_int_eq(dt_pp_peak_stash(sched, P, M, s), peak);
                    }
                    for (int s = 0; s < P; s++) {
                        int want = P == 1 ? 0 : M * (2 * v - (s == 0) - (s == P - 1));
                        REQUIRE(sent[s] == want && got[s] == want &&
                                dt_pp_messages_v(sched, P, M, v, s) == want, "%s P %d M %d v "
                                "%d stage %d: sends %d, receives %d, dt_pp_messages_v %d, "
                                "want %d", VNAME[sched], P, M, v, s, sent[s], got[s],
                                dt_pp_messages_v(sched, P, M, v, s), want);
                    }
                }
    /* the numbers the header quotes: P = 4, M = 8, v = 2: rank 0 holds 8 chunk
       micro-batches, 4 stages' worth, as 1F1B; rank 3 holds 5, 2.5 against 1F1B's 1 */
    ck_assert_int_eq(dt_pp_peak_stash_v(2, 4, 8, 2, 0), 8);
    ck_assert_int_eq(dt_pp_peak_stash_v(2, 4, 8, 2, 3), 5);
    ck_assert_int_eq(dt_pp_peak_stash_v(3, 4, 8, 1, 3), 4);
    ck_assert_int_eq(dt_pp_messages_v(2, 4, 8, 2, 1), 32);
    ck_assert_int_eq(dt_pp_messages_v(1, 4, 8, 1, 1), 16);
}
END_TEST

START_TEST(test_v_edges)
{
    dt_pp_op ops[VN];
    int start[VP * VN];
    /* what runs: any M >= 1; v > 1 only interleaved */
    ck_assert_int_eq(dt_pp_valid(2, 4, 6, 3), 1);
    ck_assert_int_eq(dt_pp_valid(2, 4, 1, 4), 1);
    ck_assert_int_eq(dt_pp_valid(3, 4, 3, 1), 1);
    static const int bad[][4] = { { -1, 2, 2, 1 }, { 4, 2, 2, 1 }, { 1, 2, 2, 2 },
                                  { 3, 2, 2, 2 }, { 0, 2, 2, 2 }, { 2, 0, 2, 2 },
                                  { 2, 2, 0, 2 }, { 2, 2, 2, 0 }, { 2, 1 << 12, 1 << 12, 2 } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int *x = bad[i];
        REQUIRE(!dt_pp_valid(x[0], x[1], x[2], x[3]) && dt_pp_nops(x[0], x[1], x[2], x[3]) ==
                -1 && dt_pp_order_v(x[0], x[1], x[2], x[3], 0, ops) == -1 &&
                dt_pp_warmup_v(x[0], x[1], x[2], x[3], 0) == -1 &&
                dt_pp_peak_stash_v(x[0], x[1], x[2], x[3], 0) == -1 &&
                dt_pp_messages_v(x[0], x[1], x[2], x[3], 0) == -1 &&
                dt_pp_slots_v(x[0], x[1], x[2], x[3], 1, 1) == -1 &&
                dt_pp_bubble_v(x[0], x[1], x[2], x[3], 1, 1) == -1.0 &&
                dt_pp_timetable_v(x[0], x[1], x[2], x[3], 1, 1, start) == -1 &&
                dt_pp_draw_v(x[0], x[1], x[2], x[3], 1, 1, NULL, 0) == -1,
                "schedule %d P %d M %d v %d: not refused", x[0], x[1], x[2], x[3]);
    }
    /* s, the op, the costs */
    ck_assert_int_eq(dt_pp_order_v(2, 3, 4, 2, 3, ops), -1);
    ck_assert_int_eq(dt_pp_order_v(2, 3, 4, 2, -1, ops), -1);
    ck_assert_int_eq(dt_pp_index_v(2, 3, 4, 2, 0, 'F', 0, 2), -1);
    ck_assert_int_eq(dt_pp_index_v(2, 3, 4, 2, 0, 'F', 4, 0), -1);
    ck_assert_int_eq(dt_pp_index_v(2, 3, 4, 2, 0, 'W', 0, 0), -1);
    ck_assert_int_eq(dt_pp_index_v(3, 3, 4, 1, 0, 'X', 0, 0), -1);
    ck_assert_int_eq(dt_pp_index_v(3, 3, 4, 1, 2, 'W', 3, 0), 11);   /* the very last */
    ck_assert_int_eq(dt_pp_timetable_v(3, 3, 4, 1, 1, 0, start), -1);  /* zb needs a W */
    ck_assert_int_eq(dt_pp_timetable_v(1, 3, 4, 1, 0, 2, start), -1);
    ck_assert_int_eq(dt_pp_timetable_v(1, 3, 4, 1, 1, -1, start), -1);
    ck_assert_int_eq(dt_pp_slots_v(2, 3, 4, 2, 1 << 28, 0), -1);       /* past INT_MAX/2 */
    ck_assert_int_eq(dt_pp_draw_v(2, 2, 2, 27, 1, 0, NULL, 0), -1);   /* no letter left */
    ck_assert_int_eq(dt_pp_draw_v(2, 2, 2, 2, 1, 0, NULL, 4), -1);
    /* the old functions keep to gpipe and 1f1b */
    ck_assert_int_eq(dt_pp_order(2, 4, 4, 0, ops), -1);
    ck_assert_int_eq(dt_pp_order(3, 4, 4, 0, ops), -1);
    ck_assert_int_eq(dt_pp_timetable(3, 4, 4, 2, start), -1);
    /* one group when M < P; groups of 4 and 3 for P = 3, M = 7 (warm-up (v-1) 4 + 2) */
    ck_assert_int_eq(dt_pp_warmup_v(2, 4, 2, 2, 0), 4);
    ck_assert_int_eq(dt_pp_warmup_v(2, 3, 7, 2, 0), 6);
    ck_assert_int_eq(dt_pp_warmup_v(2, 3, 7, 2, 2), 4);
    /* the referee itself: stage 0 runs F0 B0 F1 B1, stage 1 F0 F1 B0 B1; stage 0 waits
       for B0, which stage 1 runs only after F1, which stage 0 runs only after B0 */
    static vplay d;
    int dstart[VP][VN], busy[VP];
    static const char *const two[2] = { "FBFB", "FFBB" };
    d.sched = 1, d.P = 2, d.M = 2, d.v = 1, d.n = 4;
    memset(d.pos, -1, sizeof d.pos);
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < 4; k++) {
            int m = s == 0 ? k / 2 : k % 2;
            d.ops[s][k] = (dt_pp_op){ .kind = two[s][k], .micro = m, .chunk = 0 };
            d.pos[s][kind_no(two[s][k])][0][m] = k;
        }
    ck_assert_int_eq(v_clock(&d, 1, 0, dstart, busy), -1);
    /* P = 1 with chunks: every forward, then the backwards, none waiting; no message */
    ck_assert_int_eq(dt_pp_timetable_v(2, 1, 3, 4, 1, 1, start), 36);
    ck_assert_int_eq(dt_pp_messages_v(2, 1, 3, 4, 0), 0);
}
END_TEST

START_TEST(test_v_draw)
{
    /* the two pictures in schedule.h */
    static const char inter[] =
        "stage 0 | F0a F1a F0b F1b .   B0b F2a B1b F3a B0a F2b B1a F3b B2b .   B3b B2a B3a\n"
        "stage 1 | .   F0a F1a F0b B0b F1b B1b F2a B0a F3a B1a F2b B2b F3b B3b B2a B3a .\n";
    static const char zb[] =
        "stage 0 | F0 F1 F2 F3 .  .  .  B0 W0 B1 W1 B2 W2 B3 W3\n"
        "stage 1 | .  F0 F1 F2 .  .  B0 F3 B1 W0 B2 W1 B3 W2 W3\n"
        "stage 2 | .  .  F0 F1 .  B0 F2 B1 F3 B2 W0 B3 W1 W2 W3\n"
        "stage 3 | .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 W0 W1 W2 W3\n";
    char buf[2048], old[2048];
    ck_assert_int_eq(dt_pp_draw_v(2, 2, 4, 2, 1, 0, buf, sizeof buf), (int)strlen(inter));
    ck_assert_str_eq(buf, inter);
    ck_assert_int_eq(dt_pp_draw_v(3, 4, 4, 1, 1, 1, buf, sizeof buf), (int)strlen(zb));
    ck_assert_str_eq(buf, zb);
    /* 1F1B with the backward in one piece, tb + tw = 2 cells, as dt_pp_draw's tb = 2 */
    dt_pp_draw_v(1, 4, 4, 1, 1, 1, buf, sizeof buf);
    dt_pp_draw(1, 4, 4, 2, old, sizeof old);
    ck_assert_str_eq(buf, old);
    /* interleaved with v = 1 draws 1F1B */
    dt_pp_draw_v(2, 3, 5, 1, 2, 0, buf, sizeof buf);
    dt_pp_draw(1, 3, 5, 2, old, sizeof old);
    ck_assert_str_eq(buf, old);
    /* cut short: terminated, and the length it needed */
    memset(buf, 'x', sizeof buf);
    ck_assert_int_eq(dt_pp_draw_v(3, 4, 4, 1, 1, 1, buf, 12), (int)strlen(zb));
    ck_assert_str_eq(buf, "stage 0 | F");
}
END_TEST

/* ==== DDP buckets ==== */

enum { LMAX = 13, CMAX = 5 };

/* What the simulation saw: the bucket of each layer, and the clock. */
typedef struct {
    int bucket_of[LMAX], size[LMAX];
    int fwd[LMAX], bwd[LMAX], ar0[LMAX], ar1[LMAX], opt, T;
} ddp_ref;

/* Plays one step slot by slot, as ddp.c runs it: the main thread runs F0 .. F(L-1),
 * B(L-1) .. B0 and reports each layer when its backward ends; with overlap the ready
 * buckets are launched in order (bucket b only after bucket b-1), without overlap all of
 * them when backward ends; the communication thread takes the launched buckets one at a
 * time; the optimizer waits for both. Buckets are cut here on their own: walking from
 * the last layer, L / B layers each, one more for the first L % B. */
static void ddp_simulate(int L, int B, int c, int overlap, ddp_ref *r)
{
    int left[LMAX], layer = L - 1, op = 0, op_end = 0, launched = 0, reduced = 0,
        busy_until = -1;
    memset(r, 0, sizeof *r);
    for (int b = 0; b < B; b++) {
        r->size[b] = L / B + (b < L % B);
        for (int k = 0; k < r->size[b]; k++)
            r->bucket_of[layer--] = b;
        left[b] = r->size[b];
    }
    r->opt = -1;
    for (int t = 0; r->opt < 0; t++) {
        /* main thread: an operation ends at t, the next begins */
        if (t == op_end) {
            if (op >= L && op < 2 * L)                 /* B of layer 2L-1-op ended */
                left[r->bucket_of[2 * L - 1 - op]]--;
            op += t > 0;                                /* F0 begins at t = 0 */
            if (op < L)
                r->fwd[op] = t, op_end = t + 1;
            else if (op < 2 * L)
                r->bwd[2 * L - 1 - op] = t, op_end = t + 2;
            else
                op_end = -1;                            /* backward over: the optimizer */
        }
        while (launched < B && left[launched] == 0 && (overlap || op == 2 * L))
            launched++;
        /* the communication thread: finish, then start (c = 0 takes no time) */
        for (;;) {
            if (busy_until == t)
                r->ar1[reduced++] = t, busy_until = -1;
            if (busy_until < 0 && reduced < launched) {
                r->ar0[reduced] = t;
                busy_until = t + c * r->size[reduced];
                continue;
            }
            break;
        }
        if (op == 2 * L && reduced == B)
            r->opt = t, r->T = t + 1;
    }
}

START_TEST(test_ddp_timetable)
{
    int fwd[LMAX], bwd[LMAX], ar0[LMAX], ar1[LMAX], opt;
    for (int L = 1; L <= LMAX; L++)
        for (int B = 1; B <= L; B++)
            for (int c = 0; c <= CMAX; c++)
                for (int ov = 0; ov < 2; ov++) {
                    ddp_ref r;
                    ddp_simulate(L, B, c, ov, &r);
                    int T = dt_ddp_timetable(L, B, c, ov, fwd, bwd, ar0, ar1, &opt);
                    REQUIRE(T == r.T && opt == r.opt, "ddp L %d B %d c %d overlap %d: %d "
                            "slots, optimizer at %d; the simulation: %d, %d", L, B, c, ov,
                            T, opt, r.T, r.opt);
                    for (int i = 0; i < L; i++)
                        REQUIRE(fwd[i] == r.fwd[i] && bwd[i] == r.bwd[i], "ddp L %d B %d c "
                                "%d overlap %d: layer %d F at %d, B at %d; the simulation: "
                                "%d, %d", L, B, c, ov, i, fwd[i], bwd[i], r.fwd[i], r.bwd[i]);
                    int hidden = 0, last = 0;
                    for (int b = 0; b < B; b++) {
                        int lo, hi;
                        dt_ddp_bucket_layers(L, B, b, &lo, &hi);
                        for (int i = 0; i < L; i++)
                            REQUIRE((i >= lo && i < hi) == (r.bucket_of[i] == b), "ddp L %d "
                                    "B %d: bucket %d is layers [%d, %d), layer %d is in "
                                    "bucket %d", L, B, b, lo, hi, i, r.bucket_of[i]);
                        REQUIRE(ar0[b] == r.ar0[b] && ar1[b] == r.ar1[b], "ddp L %d B %d c "
                                "%d overlap %d: bucket %d at [%d, %d); the simulation: "
                                "[%d, %d)", L, B, c, ov, b, ar0[b], ar1[b], r.ar0[b],
                                r.ar1[b]);
                        /* under backward, [L, 3L): nothing is sent before L */
                        int e = ar1[b] < 3 * L ? ar1[b] : 3 * L;
                        hidden += e > ar0[b] ? e - ar0[b] : 0;
                        last = r.size[b];
                    }
                    REQUIRE(dt_ddp_hidden(L, B, c, ov) == hidden, "ddp L %d B %d c %d "
                            "overlap %d: dt_ddp_hidden %d, the timetable hides %d", L, B, c,
                            ov, dt_ddp_hidden(L, B, c, ov), hidden);
                    int best = imin(c * (L - last), 2 * L);
                    REQUIRE(dt_ddp_hidden_best(L, B, c) == best && hidden <= best,
                            "ddp L %d B %d c %d: best %d, want min(c (L - %d), 2L) = %d, "
                            "hidden %d", L, B, c, dt_ddp_hidden_best(L, B, c), last, best,
                            hidden);
                    if (ov && L % B == 0 && c <= 2)
                        REQUIRE(hidden == best, "ddp L %d B %d c %d: equal buckets, cheap "
                                "communication, hidden %d, not the best %d", L, B, c,
                                hidden, best);
                    /* the length's closed form (schedule.h) */
                    int want = 3 * L + c * L + 1;
                    for (int k = 0, p = 0; ov && k < B; p += r.size[k++]) {
                        int end = L + 2 * (p + r.size[k]) + c * (L - p);
                        want = k == 0 || end + 1 > want ? end + 1 : want;
                    }
                    REQUIRE(T == want, "ddp L %d B %d c %d overlap %d: %d slots, the closed "
                            "form says %d", L, B, c, ov, T, want);
                }
}
END_TEST

/* Cases worked by hand (the picture in schedule.h; one bucket; a bucket per layer; free
 * communication; uneven buckets), then bad input. */
START_TEST(test_ddp_cases)
{
    int fwd[8], bwd[8], ar0[8], ar1[8], opt, lo, hi;
    static const struct {
        int L, B, c, ov, T, opt, ar0[4], ar1[4], hidden, best;
    } cases[] = {
        { 6, 3, 1, 1, 21, 20, { 10, 14, 18 }, { 12, 16, 20 }, 4, 4 },
        { 6, 3, 1, 0, 25, 24, { 18, 20, 22 }, { 20, 22, 24 }, 0, 4 },
        { 1, 1, 3, 1, 7, 6, { 3 }, { 6 }, 0, 0 },
        { 4, 1, 2, 1, 21, 20, { 12 }, { 20 }, 0, 0 },
        { 4, 4, 1, 1, 14, 13, { 6, 8, 10, 12 }, { 7, 9, 11, 13 }, 3, 3 },
        { 4, 4, 3, 1, 19, 18, { 6, 9, 12, 15 }, { 9, 12, 15, 18 }, 6, 8 },
        { 5, 2, 0, 1, 16, 15, { 11, 15 }, { 11, 15 }, 0, 0 },
        { 5, 2, 0, 0, 16, 15, { 15, 15 }, { 15, 15 }, 0, 0 },
        { 7, 3, 2, 1, 28, 27, { 13, 19, 23 }, { 19, 23, 27 }, 8, 10 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int L = cases[i].L, B = cases[i].B, c = cases[i].c, ov = cases[i].ov;
        int T = dt_ddp_timetable(L, B, c, ov, fwd, bwd, ar0, ar1, &opt);
        REQUIRE(T == cases[i].T && opt == cases[i].opt, "ddp L %d B %d c %d overlap %d: %d "
                "slots, optimizer at %d; want %d, %d", L, B, c, ov, T, opt, cases[i].T,
                cases[i].opt);
        for (int b = 0; b < B; b++)
            REQUIRE(ar0[b] == cases[i].ar0[b] && ar1[b] == cases[i].ar1[b], "ddp L %d B %d "
                    "c %d overlap %d: bucket %d at [%d, %d), want [%d, %d)", L, B, c, ov, b,
                    ar0[b], ar1[b], cases[i].ar0[b], cases[i].ar1[b]);
        for (int l = 0; l < L; l++)
            REQUIRE(fwd[l] == l && bwd[l] == L + 2 * (L - 1 - l), "ddp L %d: layer %d F at "
                    "%d, B at %d", L, l, fwd[l], bwd[l]);
        REQUIRE(dt_ddp_hidden(L, B, c, ov) == cases[i].hidden &&
                dt_ddp_hidden_best(L, B, c) == cases[i].best, "ddp L %d B %d c %d overlap "
                "%d: hidden %d, best %d; want %d, %d", L, B, c, ov, dt_ddp_hidden(L, B, c, ov),
                dt_ddp_hidden_best(L, B, c), cases[i].hidden, cases[i].best);
    }
    /* without overlap, the serial sum: 3L + cL + 1 */
    for (int L = 1; L <= LMAX; L++)
        for (int B = 1; B <= L; B++)
            REQUIRE(dt_ddp_timetable(L, B, 2, 0, NULL, NULL, NULL, NULL, NULL) == 5 * L + 1,
                    "ddp L %d B %d c 2 without overlap: not 5L + 1 slots", L, B);
    /* the cut: 7 layers in 3 buckets are {6,5,4} {3,2} {1,0}; a bucket per layer */
    dt_ddp_bucket_layers(7, 3, 0, &lo, &hi);
    ck_assert(lo == 4 && hi == 7);
    dt_ddp_bucket_layers(7, 3, 2, &lo, &hi);
    ck_assert(lo == 0 && hi == 2);
    dt_ddp_bucket_layers(5, 5, 1, &lo, &hi);
    ck_assert(lo == 3 && hi == 4);
    /* bad input */
    static const int bad[][4] = { { 0, 1, 1, 1 }, { 3, 0, 1, 1 }, { 3, 4, 1, 1 },
                                  { 3, 3, -1, 1 }, { 3, 3, 1, 2 }, { 3, 3, 1, -1 },
                                  { 1 << 20, 1, 1 << 20, 1 } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const int *x = bad[i];
        REQUIRE(dt_ddp_timetable(x[0], x[1], x[2], x[3], fwd, bwd, ar0, ar1, &opt) == -1 &&
                dt_ddp_hidden(x[0], x[1], x[2], x[3]) == -1, "ddp L %d B %d c %d overlap "
                "%d: not refused", x[0], x[1], x[2], x[3]);
        REQUIRE((x[3] != 0 && x[3] != 1) || dt_ddp_hidden_best(x[0], x[1], x[2]) == -1,
                "ddp L %d B %d c %d: best not refused", x[0], x[1], x[2]);
    }
    dt_ddp_bucket_layers(3, 3, 3, &lo, &hi);
    ck_assert(lo == -1 && hi == -1);
    dt_ddp_bucket_layers(3, 3, -1, &lo, &hi);
    ck_assert(lo == -1 && hi == -1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("pipeline");
    TCase *tc = tcase_create("pipeline");
    tcase_add_test(tc, test_order);
    tcase_add_test(tc, test_peak_stash);
    tcase_add_test(tc, test_timetable);
    tcase_add_test(tc, test_bubble);
    tcase_add_test(tc, test_edges);
    tcase_add_test(tc, test_draw);
    tcase_add_test(tc, test_v_orders);
    tcase_add_test(tc, test_v_timetable);
    tcase_add_test(tc, test_v_stash_messages);
    tcase_add_test(tc, test_v_edges);
    tcase_add_test(tc, test_v_draw);
    tcase_add_test(tc, test_ddp_timetable);
    tcase_add_test(tc, test_ddp_cases);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
