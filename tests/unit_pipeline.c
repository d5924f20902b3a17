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
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
