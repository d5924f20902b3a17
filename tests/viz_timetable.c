/* Tests of dtviz's training timetable (viz/timetable.h, tt_draw.c): no window, no MPI.
 *
 * The timetable is held to yardsticks it shares no code with:
 *   builtin   GPipe and 1F1B at P = 1..8 stages and M = 1..12 micro-batches against
 *             lib/schedule: each stage's compute blocks are dt_pp_order's operations at
 *             dt_pp_timetable's slots (backward 2 slots), the measured bubble is
 *             dt_pp_bubble, the stash at every slot is counted from the slots and peaks
 *             at dt_pp_peak_stash, every activation and gradient is one arrow from the
 *             operation that makes it to the one that needs it; bad P and M refused.
 *   traces    build/train's, one per training mode (DTVIZ_TT_TRACES=DIR, which
 *             tests/run.sh fills), against the trace's own events read here: every
 *             compute event exactly one compute block, with its times, that names it;
 *             every span mark of ddp, fsdp and tp one comm block with its times; every
 *             message inside a comm block; every pp message one arrow; each pipeline
 *             rank's operations in dt_pp_order's order and its stash counted from the
 *             events; steps those of the compute events, comm in the step its rank had
 *             begun; the measures summed again, and described; the same timetable from
 *             the trace without its "# train" line.
 *   ddp       the built-in ddp at N = 1, 2, 3, 5 ranks, L = 1..9 layers, B = 1..L buckets
 *             (uneven too), C = 1..3 slots a layer, with and without overlap, against
 *             lib/schedule: each rank's compute blocks at dt_ddp_timetable's slots in
 *             forward then backward order, one "bucket b" block per bucket at its
 *             allreduce's slots, picking a ring allreduce over the N ranks that leaves
 *             every rank with the sum; the hidden share and its best are dt_ddp_hidden's
 *             and dt_ddp_hidden_best's over CL; bad shapes refused.
 *   odd       "# train" lines that lie: built or refused, never broken.
 *   pixels    the built-in pipelines drawn headless: stage s's compute lane is filled
 *             with the forward or backward colour exactly where dt_pp_timetable says it
 *             computes, and shows its background where it idles; zooming moves a block's
 *             edge where the arithmetic says; odd sizes and rank counts draw.
 * Rows and times on the picture are found with dv_tt_hit, not the layout's constants.
 *
 *   build/tests/viz_timetable
 *   DTVIZ_TT_TRACES=DIR build/tests/viz_timetable   also every .trace file in DIR, named
 *        MODE[-ANYTHING].trace (the --mode given, dp-threads too), pp-SCHEDULE-M.trace (--schedule,
 *        --micro) or hybrid-ppP-SCHEDULE-M.trace (--pp P, --schedule, --micro)
 *   (CK_FORK=no to debug under gdb)
 */
#include <check.h>
#include "unit.h"
#include <dirent.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draw.h"
#include "model.h"
#include "schedule.h"
#include "timetable.h"

/* Fails with a message only when cond is false (ck_assert_msg is slow inside loops). */
#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

#define EPS 1e-9                 /* times: traces print 9 decimals, built-ins are slots */
#define TB 2                     /* a built-in backward takes 2 slots (timetable.h) */
#define MAX_M 12

static const char *const SCHED[4] = { "gpipe", "1f1b", "interleaved", "zb-h1" };

static int near(double a, double b) { return fabs(a - b) <= EPS; }

/* ==== the contract every timetable keeps (timetable.h) ==== */

/* Arrays in the promised order, fields in range, the compute lane's blocks apart (the
 * comm lane's may overlap: a DDP thread beside the main thread), waits inside comm
 * blocks, every block in a listed step. */
static void check_contract(const dv_tt *tt, const char *what)
{
    REQUIRE(tt->nranks >= 1 && tt->nranks <= DV_MAX_RANKS, "%s: nranks %d", what, tt->nranks);
    REQUIRE(tt->nrows >= tt->nranks && tt->rows != NULL, "%s: %d rows for %d ranks", what,
            tt->nrows, tt->nranks);
    for (int q = 0; q < tt->nrows; q++) {     /* by rank, then thread; every rank's 0 */
        const dv_tt_row *w = &tt->rows[q], *u = q > 0 ? &tt->rows[q - 1] : NULL;
        REQUIRE(w->rank >= 0 && w->rank < tt->nranks && w->thread >= 0 &&
                (u == NULL ? w->rank == 0 && w->thread == 0
                           : (w->rank == u->rank && w->thread > u->thread) ||
                             (w->rank == u->rank + 1 && w->thread == 0)),
                "%s: row %d is rank %d thread %d", what, q, w->rank, w->thread);
    }
    REQUIRE(tt->t_end > tt->t_begin, "%s: t_end %g <= t_begin %g", what, tt->t_end,
            tt->t_begin);
    for (int i = 1; i < tt->nsteps; i++)
        REQUIRE(tt->steps[i].step > tt->steps[i - 1].step, "%s: steps[%d] = %d after %d",
                what, i, tt->steps[i].step, tt->steps[i - 1].step);
    double end = -INFINITY;
    for (int i = 0; i < tt->nblocks; i++) {
        const dv_tt_block *b = &tt->blocks[i];
        REQUIRE(b->rank >= 0 && b->rank < tt->nranks && (b->lane == 0 || b->lane == 1) &&
                b->row >= 0 && b->row < tt->nrows && tt->rows[b->row].rank == b->rank &&
                tt->rows[b->row].thread == b->thread,
                "%s: block %d rank %d thread %d row %d lane %d", what, i, b->rank, b->thread,
                b->row, b->lane);
        REQUIRE((b->lane == 1) == (b->kind == DV_TT_COMM), "%s: block %d '%s' kind %d in "
                "lane %d", what, i, b->label, b->kind, b->lane);
        REQUIRE(b->t1 >= b->t0 && b->t0 >= tt->t_begin - EPS && b->t1 <= tt->t_end + EPS,
                "%s: block %d '%s' [%.9f, %.9f], the timetable [%.9f, %.9f]", what, i,
                b->label, b->t0, b->t1, tt->t_begin, tt->t_end);
        REQUIRE(memchr(b->label, '\0', sizeof b->label) != NULL && b->label[0] != '\0',
                "%s: block %d has no label", what, i);
        REQUIRE(b->wait >= 0 && b->wait <= b->t1 - b->t0 + EPS, "%s: block %d '%s' waits "
                "%g of %g s", what, i, b->label, b->wait, b->t1 - b->t0);
        int s = 0;
        while (s < tt->nsteps && tt->steps[s].step != b->step)
            s++;
        REQUIRE(s < tt->nsteps, "%s: block %d '%s' in step %d, not a step of the list", what,
                i, b->label, b->step);
        if (i > 0) {
            const dv_tt_block *a = &tt->blocks[i - 1];
            int same = a->row == b->row && a->lane == b->lane;
            REQUIRE(a->row < b->row || (a->row == b->row && a->lane <= b->lane),
                    "%s: block %d (row %d lane %d) after row %d lane %d", what, i, b->row,
                    b->lane, a->row, a->lane);
            REQUIRE(!same || a->t0 <= b->t0, "%s: row %d lane %d: block %d '%s' at %.9f "
                    "after '%s' at %.9f", what, b->row, b->lane, i, b->label, b->t0,
                    a->label, a->t0);
            if (!same)
                end = -INFINITY;
        }
        if (b->lane == 0 && b->t1 > b->t0) {     /* instants (free) may sit anywhere */
            REQUIRE(b->t0 >= end - EPS, "%s: row %d lane %d: block %d '%s' [%.9f, %.9f] "
                    "overlaps one ending at %.9f", what, b->row, b->lane, i, b->label,
                    b->t0, b->t1, end);
            end = fmax(end, b->t1);
        }
    }
    for (int i = 0; i < tt->nwaits; i++) {
        const dv_tt_wait *w = &tt->waits[i];
        REQUIRE(i == 0 || tt->waits[i - 1].row < w->row ||
                (tt->waits[i - 1].row == w->row && tt->waits[i - 1].t0 <= w->t0),
                "%s: waits out of order at %d", what, i);
        int in = 0;
        for (int j = 0; j < tt->nblocks && !in; j++) {
            const dv_tt_block *b = &tt->blocks[j];
            in = b->row == w->row && b->rank == w->rank && b->lane == 1 && b->t0 <= w->t0 + EPS &&
                 w->t1 <= b->t1 + EPS;
        }
        REQUIRE(w->t1 >= w->t0 && in, "%s: wait %d of rank %d [%.9f, %.9f] is inside no "
                "comm block of its rank", what, i, w->rank, w->t0, w->t1);
    }
    for (int i = 0; i < tt->narrows; i++) {
        const dv_tt_arrow *a = &tt->arrows[i];
        REQUIRE(a->src >= 0 && a->src < tt->nranks && a->dst >= 0 && a->dst < tt->nranks &&
                a->src != a->dst && (a->what == 'A' || a->what == 'G') &&
                a->src_row >= 0 && a->src_row < tt->nrows && a->dst_row >= 0 &&
                a->dst_row < tt->nrows && tt->rows[a->src_row].rank == a->src &&
                tt->rows[a->dst_row].rank == a->dst,
                "%s: arrow %d %d -> %d '%c'", what, i, a->src, a->dst, a->what);
        REQUIRE(i == 0 || tt->arrows[i - 1].t0 <= a->t0, "%s: arrows out of order at %d",
                what, i);
    }
    for (int s = 0; s < tt->nsteps; s++) {
        const dv_tt_step *S = &tt->steps[s];
        REQUIRE(S->hidden_share == -1 || (S->hidden_share >= 0 && S->hidden_share <= 1),
                "%s: step %d hidden_share %g", what, S->step, S->hidden_share);
        REQUIRE(S->hidden_best == -1 || (S->hidden_best >= 0 && S->hidden_best <= 1),
                "%s: step %d hidden_best %g", what, S->step, S->hidden_best);
        char buf[256], tiny[6];
        dv_tt_describe_step(tt, s, buf, sizeof buf);
        REQUIRE(memchr(buf, '\0', sizeof buf) && buf[0] != '\0', "%s: step %d: no description",
                what, S->step);
        dv_tt_describe_step(tt, s, tiny, sizeof tiny);
        REQUIRE(memchr(tiny, '\0', sizeof tiny) && !strncmp(tiny, buf, sizeof tiny - 1),
                "%s: step %d: the description cut to 6 bytes is '%.6s', of '%s'", what,
                S->step, tiny, buf);
    }
}

/* The description of step s says the step's own measures (timetable.h's examples):
 * "bubble 41% measured ... P=4, M=8" in a pipeline, "...64% hidden behind compute..."
 * where there is communication outside pp; percentages to +-1. */
static void check_describe(const dv_tt *tt, int s, const char *what)
{
    const dv_tt_step *S = &tt->steps[s];
    char buf[512], want[32];
    const char *p;
    int got;
    dv_tt_describe_step(tt, s, buf, sizeof buf);
    if (S->bubble >= 0) {
        p = strstr(buf, "bubble ");
        REQUIRE(p && sscanf(p, "bubble %d%%", &got) == 1 &&
                abs(got - (int)lround(100 * S->bubble)) <= 1, "%s: step %d: bubble %.3f, "
                "described as '%s'", what, S->step, S->bubble, buf);
        snprintf(want, sizeof want, "P=%d", tt->stages);
        REQUIRE(strstr(buf, want) != NULL, "%s: step %d: '%s' does not say %s", what,
                S->step, buf, want);
        snprintf(want, sizeof want, "M=%d", tt->micro);
        REQUIRE(strstr(buf, want) != NULL, "%s: step %d: '%s' does not say %s", what,
                S->step, buf, want);
    }
    if (strcmp(tt->mode, "pp") != 0 && S->comm > 0) {
        p = strstr(buf, "% hidden");
        while (p && p > buf && p[-1] >= '0' && p[-1] <= '9')
            p--;
        REQUIRE(p && sscanf(p, "%d%% hidden", &got) == 1 &&
                abs(got - (int)lround(100 * S->hidden_share)) <= 1, "%s: step %d: hidden "
                "share %.3f, described as '%s'", what, S->step, S->hidden_share, buf);
    }
}

/* ==== built-in schedules against lib/schedule ==== */

static void builtin(int algo, int P, int M, dv_model *m, dv_tt *tt)
{
    dt_trace t;
    char err[256] = "";
    REQUIRE(dv_train_algo_trace(algo, P, M, &t, err, sizeof err) == 0,
            "dv_train_algo_trace(%d, P=%d, M=%d): %s", algo, P, M, err);
    REQUIRE(dv_tt_is_training(&t), "%s P=%d M=%d: dv_tt_is_training says it is not training",
            SCHED[algo], P, M);
    REQUIRE(dv_model_build(m, &t, err, sizeof err) == 0, "%s P=%d M=%d: dv_model_build: %s",
            SCHED[algo], P, M, err);
    REQUIRE(dv_tt_build(tt, m, err, sizeof err) == 0, "%s P=%d M=%d: dv_tt_build: %s",
            SCHED[algo], P, M, err);
    REQUIRE(tt->disagree[0] == '\0', "built-in: header and events disagree: %s", tt->disagree);
}

/* The index of the block of rank, lane 0, labelled label; -1 if none. */
static int find_compute(const dv_tt *tt, int rank, const char *label)
{
    for (int i = 0; i < tt->nblocks; i++)
        if (tt->blocks[i].rank == rank && tt->blocks[i].lane == 0 &&
            !strcmp(tt->blocks[i].label, label))
            return i;
    return -1;
}

static void check_builtin(int algo, int P, int M)
{
    dv_model m;
    dv_tt tt;
    builtin(algo, P, M, &m, &tt);
    char what[64];
    snprintf(what, sizeof what, "%s P=%d M=%d", SCHED[algo], P, M);
    check_contract(&tt, what);
    REQUIRE(!strcmp(tt.mode, "pp") && tt.schedule == algo && tt.stages == P && tt.micro == M &&
            tt.nranks == P, "%s: mode '%s' schedule %d stages %d micro %d nranks %d", what,
            tt.mode, tt.schedule, tt.stages, tt.micro, tt.nranks);
    REQUIRE(tt.nsteps == 1 && tt.steps[0].step == 1, "%s: %d steps, the first %d, want one, "
            "step 1", what, tt.nsteps, tt.nsteps > 0 ? tt.steps[0].step : -1);

    /* the yardstick: every stage's order and slots */
    int n = 2 * M, T = (M + P - 1) * (1 + TB);
    int *start = malloc((size_t)P * n * sizeof *start);
    dt_pp_op *ops = malloc((size_t)P * n * sizeof *ops);
    REQUIRE(start && ops, "out of memory");
    REQUIRE(dt_pp_timetable(algo, P, M, TB, start) == T, "lib/schedule: not %d slots", T);
    for (int s = 0; s < P; s++)
        dt_pp_order(algo, P, M, s, ops + s * n);

    /* compute blocks: dt_pp_order's operations at dt_pp_timetable's slots, one clock */
    double off = NAN;
    for (int s = 0; s < P; s++) {
        int k = 0;
        for (int i = 0; i < tt.nblocks; i++) {
            const dv_tt_block *b = &tt.blocks[i];
            if (b->rank != s || b->lane != 0)
                continue;
            REQUIRE(k < n, "%s: stage %d has more than %d compute blocks ('%s')", what, s, n,
                    b->label);
            dt_pp_op op = ops[s * n + k];
            char want[24];
            snprintf(want, sizeof want, "%c%d", op.kind, op.micro);
            REQUIRE(!strcmp(b->label, want) && b->micro == op.micro && b->step == 1 &&
                    b->kind == (op.kind == 'F' ? DV_TT_FORWARD : DV_TT_BACKWARD),
                    "%s: stage %d operation %d is '%s' (micro %d, kind %d, step %d), "
                    "dt_pp_order says %s", what, s, k, b->label, b->micro, b->kind, b->step,
                    want);
            if (isnan(off))
                off = b->t0 - start[s * n + k];
            double len = op.kind == 'F' ? 1 : TB;
            REQUIRE(near(b->t0, off + start[s * n + k]) && near(b->t1 - b->t0, len),
                    "%s: stage %d %s at [%g, %g], dt_pp_timetable says [%d, %g] (+%g)", what,
                    s, want, b->t0 - off, b->t1 - off, start[s * n + k],
                    start[s * n + k] + len, off);
            k++;
        }
        REQUIRE(k == n, "%s: stage %d has %d compute blocks, dt_pp_order %d", what, s, k, n);
    }

    /* the step's measures beside the formula */
    const dv_tt_step *S = &tt.steps[0];
    REQUIRE(near(S->t0, off) && near(S->t1, off + T), "%s: step at [%g, %g], want [0, %d]",
            what, S->t0 - off, S->t1 - off, T);
    REQUIRE(fabs(S->compute - (double)(1 + TB) * M * P) <= EPS, "%s: compute %g, want %d",
            what, S->compute, (1 + TB) * M * P);
    REQUIRE(fabs(S->bubble - dt_pp_bubble(P, M)) <= EPS &&
            fabs(S->bubble_model - dt_pp_bubble(P, M)) <= EPS,
            "%s: bubble %.12f measured, %.12f model; dt_pp_bubble %.12f", what, S->bubble,
            S->bubble_model, dt_pp_bubble(P, M));
    check_describe(&tt, 0, what);

    /* at every slot's centre: the block there, the stash (counted from the slots) */
    for (int s = 0; s < P; s++) {
        int peak = 0;
        for (int u = 0; u < T; u++) {
            double c = u + 0.5;
            int stash = 0, want = -1;
            for (int k = 0; k < n; k++) {
                dt_pp_op op = ops[s * n + k];
                int b = start[s * n + k], e = b + (op.kind == 'F' ? 1 : TB);
                if (op.kind == 'F' && b < c)
                    stash++;
                if (op.kind == 'B' && e <= c)
                    stash--;
                if (b < c && c < e) {
                    char label[24];
                    snprintf(label, sizeof label, "%c%d", op.kind, op.micro);
                    want = find_compute(&tt, s, label);
                }
            }
            peak = stash > peak ? stash : peak;
            int got = dv_tt_stash(&tt, s, off + c);
            REQUIRE(got == stash, "%s: stage %d at slot %d: stash %d, the slots say %d", what,
                    s, u, got, stash);
            got = dv_tt_block_at(&tt, s, 0, off + c);
            REQUIRE(got == want, "%s: stage %d at slot %d: block %d ('%s'), want %d ('%s')",
                    what, s, u, got, got >= 0 && got < tt.nblocks ? tt.blocks[got].label : "",
                    want, want >= 0 ? tt.blocks[want].label : "idle");
            got = dv_tt_block_at(&tt, s, 1, off + c);
            REQUIRE(got == -1 || (got >= 0 && got < tt.nblocks && tt.blocks[got].rank == s &&
                                  tt.blocks[got].lane == 1 && tt.blocks[got].t0 <= off + c &&
                                  off + c <= tt.blocks[got].t1),
                    "%s: stage %d comm lane at slot %d: block %d", what, s, u, got);
        }
        REQUIRE(peak == dt_pp_peak_stash(algo, P, M, s), "%s: stage %d: the slots peak at %d "
                "stashed, dt_pp_peak_stash says %d", what, s, peak,
                dt_pp_peak_stash(algo, P, M, s));
        int most = 0;
        for (int u = 0; u < 4 * T; u++) {    /* quarter slots: the maximum over time */
            int k = dv_tt_stash(&tt, s, off + u * 0.25 + 0.125);
            most = k > most ? k : most;
        }
        REQUIRE(most == dt_pp_peak_stash(algo, P, M, s), "%s: stage %d: dv_tt_stash peaks at "
                "%d, dt_pp_peak_stash says %d", what, s, most, dt_pp_peak_stash(algo, P, M, s));
    }
    REQUIRE(dv_tt_step_at(&tt, off - 100) == 0 && dv_tt_step_at(&tt, off) == 0 &&
            dv_tt_step_at(&tt, off + T / 2.0) == 0 && dv_tt_step_at(&tt, off + T + 100) == 0,
            "%s: dv_tt_step_at is not step 0 everywhere", what);
    REQUIRE(dv_tt_block_at(&tt, 0, 0, off - 100) == -1 &&
            dv_tt_block_at(&tt, P - 1, 0, off + T + 100) == -1,
            "%s: a block outside the step", what);

    /* arrows: one per (micro, s -> s+1) of activations and (micro, s+1 -> s) of
     * gradients, leaving after the producer ends and arriving before the consumer starts */
    REQUIRE(tt.narrows == 2 * M * (P - 1), "%s: %d arrows, want 2 M (P-1) = %d", what,
            tt.narrows, 2 * M * (P - 1));
    char *seen = calloc((size_t)2 * M * P, 1);
    REQUIRE(seen, "out of memory");
    for (int i = 0; i < tt.narrows; i++) {
        const dv_tt_arrow *a = &tt.arrows[i];
        int fwd = a->what == 'A', lo = fwd ? a->src : a->dst;
        REQUIRE(a->dst - a->src == (fwd ? 1 : -1) && a->micro >= 0 && a->micro < M &&
                a->step == 1, "%s: arrow %d: '%c' %d -> %d micro %d step %d", what, i,
                a->what, a->src, a->dst, a->micro, a->step);
        REQUIRE(!seen[(fwd * M + a->micro) * P + lo]++, "%s: two '%c' arrows of micro %d "
                "between stages %d and %d", what, a->what, a->micro, lo, lo + 1);
        char kind = fwd ? 'F' : 'B';
        int kp = dt_pp_index(algo, P, M, a->src, kind, a->micro);
        int kc = dt_pp_index(algo, P, M, a->dst, kind, a->micro);
        double made = start[a->src * n + kp] + (fwd ? 1 : TB), used = start[a->dst * n + kc];
        REQUIRE(a->t0 >= off + made - EPS && a->t1 <= off + used + EPS && a->t0 <= a->t1,
                "%s: '%c' arrow of micro %d %d -> %d at [%g, %g]: made at %g, needed at %g",
                what, a->what, a->micro, a->src, a->dst, a->t0 - off, a->t1 - off, made, used);
    }
    free(seen);
    free(start);
    free(ops);
    dv_tt_free(&tt);
    dv_model_free(&m);
}

/* _i: schedule i / 8, P = i % 8 + 1; every M in 1..12 (P > M, P = M, M > P, odd). */
START_TEST(test_builtin)
{
    int algo = _i / 8, P = _i % 8 + 1;
    for (int M = 1; M <= MAX_M; M++)
        check_builtin(algo, P, M);
}
END_TEST

/* The built-ins of interleaved and zb-h1 (and gpipe, 1f1b through the same path):
 * every stage's blocks are dt_pp_order_v's operations at dt_pp_timetable_v's slots
 * (tb = tw = 1), labelled as dt_pp_draw_v writes them, cell by cell ("F2b", "W1", "."
 * idle), chunk and kind as lib/schedule says; the stash at every slot counted from the
 * slots, peaking at dt_pp_peak_stash_v; the bubble, the step's stash and messages
 * measured beside lib/schedule's closed forms, and said so in the description. */
static void check_builtin_v(int S, int P, int M, int v)
{
    char what[64], err[256] = "";
    snprintf(what, sizeof what, "%s P=%d M=%d v=%d", SCHED[S], P, M, v);
    dt_trace t;
    dv_model m;
    dv_tt tt;
    REQUIRE(dv_train_pp_trace((dv_pp_shape){ S, P, M, v }, &t, err, sizeof err) == 0,
            "%s: dv_train_pp_trace: %s", what, err);
    REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s: dv_model_build: %s", what, err);
    REQUIRE(dv_tt_build(&tt, &m, err, sizeof err) == 0, "%s: dv_tt_build: %s", what, err);
    REQUIRE(tt.disagree[0] == '\0', "%s: header and events disagree: %s", what, tt.disagree);
    check_contract(&tt, what);
    REQUIRE(!strcmp(tt.mode, "pp") && tt.schedule == S && tt.stages == P && tt.micro == M &&
            tt.v == v && tt.nsteps == 1, "%s: mode '%s' schedule %d stages %d micro %d v %d, "
            "%d steps", what, tt.mode, tt.schedule, tt.stages, tt.micro, tt.v, tt.nsteps);

    int n = dt_pp_nops(S, P, M, v), T = dt_pp_slots_v(S, P, M, v, 1, 1);
    int *start = malloc((size_t)P * n * sizeof *start);
    dt_pp_op *ops = malloc((size_t)P * n * sizeof *ops);
    size_t len = (size_t)P * (T + 2) * 8 + 256;
    char *draw = malloc(len);
    REQUIRE(start && ops && draw, "out of memory");
    REQUIRE(dt_pp_timetable_v(S, P, M, v, 1, 1, start) == T, "%s: not %d slots", what, T);
    REQUIRE(dt_pp_draw_v(S, P, M, v, 1, 1, draw, len) < (int)len, "%s: the drawing", what);
    for (int s = 0; s < P; s++)
        REQUIRE(dt_pp_order_v(S, P, M, v, s, ops + s * n) == n, "%s: dt_pp_order_v", what);

    /* compute blocks: the operations in order, at their slots */
    double off = NAN;
    int nw = 0;
    for (int s = 0; s < P; s++) {
        int k = 0;
        for (int i = 0; i < tt.nblocks; i++) {
            const dv_tt_block *b = &tt.blocks[i];
            if (b->rank != s || b->lane != 0)
                continue;
            REQUIRE(k < n, "%s: stage %d has more than %d compute blocks", what, s, n);
            dt_pp_op op = ops[s * n + k];
            char want[24];
            snprintf(want, sizeof want, v > 1 ? "%c%d%c" : "%c%d", op.kind, op.micro,
                     'a' + op.chunk);
            dv_tt_kind kind = op.kind == 'F' ? DV_TT_FORWARD : op.kind == 'W' ? DV_TT_WEIGHTS
                                                                             : DV_TT_BACKWARD;
            REQUIRE(!strcmp(b->label, want) && b->kind == kind && b->micro == op.micro &&
                    b->chunk == (v > 1 ? op.chunk : -1) && b->layer == op.chunk * P + s,
                    "%s: stage %d operation %d is '%s' (kind %d, chunk %d, layer %d), "
                    "dt_pp_order_v says %s", what, s, k, b->label, b->kind, b->chunk,
                    b->layer, want);
            if (isnan(off))
                off = b->t0 - start[s * n + k];
            double d = op.kind == 'B' && S != 3 ? 2 : 1;
            REQUIRE(near(b->t0, off + start[s * n + k]) && near(b->t1 - b->t0, d),
                    "%s: stage %d %s at [%g, %g], dt_pp_timetable_v says [%d, %g]", what, s,
                    want, b->t0 - off, b->t1 - off, start[s * n + k], start[s * n + k] + d);
            nw += b->kind == DV_TT_WEIGHTS;
            k++;
        }
        REQUIRE(k == n, "%s: stage %d has %d compute blocks, dt_pp_order_v %d", what, s, k, n);
    }
    REQUIRE(nw == (S == 3 ? P * M : 0), "%s: %d W blocks", what, nw);

    /* cell by cell against dt_pp_draw_v's text; the stash at every slot */
    char *line = draw;
    for (int s = 0; s < P; s++) {
        char *bar = strchr(line, '|'), *eol = strchr(line, '\n'), *save = NULL;
        REQUIRE(bar && eol, "%s: dt_pp_draw_v's line %d: '%s'", what, s, line);
        *eol = '\0';
        char *cell = strtok_r(bar + 1, " ", &save);
        int peak = 0;
        for (int u = 0; u < T; u++, cell = strtok_r(NULL, " ", &save)) {
            int k = dv_tt_block_at(&tt, s, 0, off + u + 0.5), stash = 0;
            REQUIRE(cell != NULL && !strcmp(k >= 0 ? tt.blocks[k].label : ".", cell),
                    "%s: stage %d slot %d: the timetable has '%s', dt_pp_draw_v '%s'", what,
                    s, u, k >= 0 ? tt.blocks[k].label : ".", cell ? cell : "(none)");
            for (int o = 0; o < n; o++) {      /* a chunk's micro-batch: F until B (W) */
                dt_pp_op op = ops[s * n + o];
                int b = start[s * n + o], e = b + (op.kind == 'B' && S != 3 ? 2 : 1);
                stash += op.kind == 'F' && b < u + 0.5;
                stash -= op.kind == (S == 3 ? 'W' : 'B') && e <= u + 0.5;
            }
            int got = dv_tt_stash(&tt, s, off + u + 0.5);
            REQUIRE(got == stash, "%s: stage %d slot %d: stash %d, the slots say %d", what, s,
                    u, got, stash);
            peak = stash > peak ? stash : peak;
        }
        REQUIRE(peak == dt_pp_peak_stash_v(S, P, M, v, s), "%s: stage %d: stash peaks at %d, "
                "dt_pp_peak_stash_v says %d", what, s, peak, dt_pp_peak_stash_v(S, P, M, v, s));
        line = eol + 1;
    }

    /* the step's measures beside lib/schedule's closed forms */
    const dv_tt_step *st = &tt.steps[0];
    int msgs = 0;
    for (int s = 0; s < P; s++)
        msgs += dt_pp_messages_v(S, P, M, v, s);
    double bub = dt_pp_bubble_v(S, P, M, v, 1, 1);
    REQUIRE(near(st->c1 - st->c0, T) && fabs(st->bubble - bub) <= EPS &&
            fabs(st->bubble_model - bub) <= EPS, "%s: %g slots, bubble %.12f measured, %.12f "
            "model; lib/schedule %d slots, %.12f", what, st->c1 - st->c0, st->bubble,
            st->bubble_model, T, bub);
    REQUIRE(st->stash == dt_pp_peak_stash_v(S, P, M, v, 0) &&
            st->stash_model == st->stash && st->messages == msgs &&
            st->messages_model == msgs && tt.narrows == msgs,
            "%s: stash %d (model %d), messages %d (model %d, %d arrows); lib/schedule: stash "
            "%d, messages %d", what, st->stash, st->stash_model, st->messages,
            st->messages_model, tt.narrows, dt_pp_peak_stash_v(S, P, M, v, 0), msgs);
    for (int i = 0; i < tt.narrows; i++) {   /* to the next virtual stage's rank */
        const dv_tt_arrow *a = &tt.arrows[i];
        REQUIRE(a->src != a->dst && (a->dst == (a->what == 'A' ? (a->src + 1) % P
                                                               : (a->src + P - 1) % P)),
                "%s: arrow '%c' %d -> %d", what, a->what, a->src, a->dst);
    }
    check_describe(&tt, 0, what);
    char buf[512], want[64];
    dv_tt_describe_step(&tt, 0, buf, sizeof buf);
    snprintf(want, sizeof want, "stash peak %d, %d = ", st->stash, st->stash_model);
    REQUIRE(strstr(buf, want) && (S != 2 || strstr(buf, "/(vM+P-1)") || M < P) &&
            (S != 2 || strstr(buf, ", v=")) && (P == 1 || strstr(buf, " messages, ")),
            "%s: the description '%s' does not give the closed forms", what, buf);
    free(start);
    free(ops);
    free(draw);
    dv_tt_free(&tt);
    dv_model_free(&m);
}

/* _i: P = _i + 1 (1..5); every M in 1..8 (P > M, P = M, M > P, M not dividing), v 1..3
 * for interleaved, zb-h1, and gpipe and 1f1b on the same clock. */
START_TEST(test_builtin_v)
{
    int P = _i + 1;
    for (int M = 1; M <= 8; M++) {
        for (int v = 1; v <= 3; v++)
            check_builtin_v(2, P, M, v);
        for (int S = 0; S < 4; S += 1 + (S == 1))
            check_builtin_v(S, P, M, 1);
    }
    check_builtin_v(2, 3, 7, 5);
    check_builtin_v(2, 2, 3, 26);            /* the last letter, z */
}
END_TEST

START_TEST(test_builtin_names)
{
    static const char *const want[] = { "gpipe", "1f1b", "interleaved", "zb-h1", "ddp" };
    for (int i = 0; i < 5; i++)
        REQUIRE(dv_train_algos[i] && !strcmp(dv_train_algos[i], want[i]) &&
                dv_train_algo_index(want[i]) == i, "dv_train_algos[%d] is not %s", i, want[i]);
    REQUIRE(dv_train_algos[5] == NULL, "dv_train_algos has more than 5 names");
    REQUIRE(dv_train_algo_index("gpipe") == 0 && dv_train_algo_index("1f1b") == 1 &&
            dv_train_algo_index("ddp") == DV_TRAIN_DDP && DV_TRAIN_DDP == 4,
            "dv_train_algo_index: gpipe %d, 1f1b %d, ddp %d", dv_train_algo_index("gpipe"),
            dv_train_algo_index("1f1b"), dv_train_algo_index("ddp"));
    const char *bad[] = { "bogus", "", "gpipe ", "1f1", "ring-allreduce", "DDP", "ddp ",
                          "zb", "zb-h2", "interleave" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        REQUIRE(dv_train_algo_index(bad[i]) == -1, "dv_train_algo_index('%s') = %d", bad[i],
                dv_train_algo_index(bad[i]));

    /* out of range: -1 and a sentence */
    const int refused[][3] = { { -1, 4, 4 }, { 2, 4, 4 }, { 0, 0, 4 }, { 1, -3, 4 },
                               { 0, DV_MAX_RANKS + 1, 4 }, { 1, 4, 0 }, { 0, 4, -1 },
                               { 1, 4, 65 }, { 0, 1000000, 1000000 } };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        dt_trace t;
        char err[256] = "";
        int rc = dv_train_algo_trace(refused[i][0], refused[i][1], refused[i][2], &t, err,
                                     sizeof err);
        REQUIRE(rc == -1 && strlen(err) > 10, "dv_train_algo_trace(%d, P=%d, M=%d): %d, '%s'",
                refused[i][0], refused[i][1], refused[i][2], rc, err);
    }
    /* dv_train_pp_trace: a schedule 0..3, v 1..26 and 1 outside interleaved */
    const dv_pp_shape no[] = { { -1, 4, 4, 1 }, { 4, 4, 4, 1 }, { 2, 4, 4, 0 },
                               { 2, 4, 4, 27 }, { 1, 4, 4, 2 }, { 3, 4, 4, 2 }, { 0, 4, 4, 2 },
                               { 2, 0, 4, 2 }, { 3, 4, 65, 1 }, { 2, DV_MAX_RANKS + 1, 4, 2 } };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++) {
        dt_trace t;
        char err[256] = "";
        int rc = dv_train_pp_trace(no[i], &t, err, sizeof err);
        REQUIRE(rc == -1 && strlen(err) > 10 && t.ev == NULL && t.n == 0,
                "dv_train_pp_trace(%d, P=%d, M=%d, v=%d): %d, '%s'", no[i].schedule,
                no[i].stages, no[i].micro, no[i].v, rc, err);
    }
    /* the largest accepted: 64 stages, 64 micro-batches */
    dv_model m;
    dv_tt tt;
    builtin(1, DV_MAX_RANKS, 64, &m, &tt);
    check_contract(&tt, "1f1b P=64 M=64");
    REQUIRE(fabs(tt.steps[0].bubble - dt_pp_bubble(DV_MAX_RANKS, 64)) <= EPS,
            "1f1b P=64 M=64: bubble %g, want %g", tt.steps[0].bubble,
            dt_pp_bubble(DV_MAX_RANKS, 64));
    dv_tt_free(&tt);
    dv_model_free(&m);

    /* a collective's trace is no training trace: refused with a sentence */
    dt_trace t;
    char err[256] = "";
    REQUIRE(dv_algo_trace(dv_algo_index("ring-allreduce"), 4, 1000, &t, err, sizeof err) == 0,
            "%s", err);
    REQUIRE(!dv_tt_is_training(&t), "a ring allreduce is taken for training");
    REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s", err);
    err[0] = '\0';
    REQUIRE(dv_tt_build(&tt, &m, err, sizeof err) == -1 && strlen(err) > 10,
            "dv_tt_build on a ring allreduce: not refused with a sentence ('%s')", err);
    dv_model_free(&m);
}
END_TEST

/* ==== the built-in ddp against lib/schedule ==== */

static void builtin_ddp(dv_ddp_shape d, dv_model *m, dv_tt *tt, char *what, size_t len)
{
    dt_trace t;
    char err[256] = "";
    snprintf(what, len, "ddp N=%d L=%d B=%d C=%d overlap %s", d.ranks, d.layers, d.buckets,
             d.comm, d.overlap ? "on" : "off");
    REQUIRE(dv_train_ddp_trace(d, &t, err, sizeof err) == 0, "%s: %s", what, err);
    REQUIRE(dv_tt_is_training(&t), "%s: not a training trace", what);
    REQUIRE(dv_model_build(m, &t, err, sizeof err) == 0, "%s: dv_model_build: %s", what, err);
    m->from_trace = 0;
    REQUIRE(dv_tt_build(tt, m, err, sizeof err) == 0, "%s: dv_tt_build: %s", what, err);
    REQUIRE(tt->disagree[0] == '\0', "%s: header and events disagree: %s", what, tt->disagree);
}

static void check_ddp(dv_ddp_shape d)
{
    int N = d.ranks, L = d.layers, B = d.buckets, C = d.comm, ov = d.overlap;
    int fwd[64], bwd[64], ar0[64], ar1[64], opt;
    char what[96], want[24];
    dv_model m;
    dv_tt tt;
    builtin_ddp(d, &m, &tt, what, sizeof what);
    check_contract(&tt, what);
    int T = dt_ddp_timetable(L, B, C, ov, fwd, bwd, ar0, ar1, &opt);
    REQUIRE(T > 0, "%s: lib/schedule refuses it", what);
    REQUIRE(!strcmp(tt.mode, "ddp") && tt.nranks == N && tt.nsteps == 1 &&
            tt.steps[0].step == 1 && tt.stages == 0, "%s: mode '%s', %d ranks, %d steps "
            "(the first %d), stages %d", what, tt.mode, tt.nranks, tt.nsteps,
            tt.nsteps ? tt.steps[0].step : -1, tt.stages);
    snprintf(want, sizeof want, "buckets %d ", B);
    REQUIRE(strncmp(tt.settings, want, strlen(want)) == 0 &&
            strstr(tt.settings, ov ? "overlap on" : "overlap off"), "%s: settings '%s'",
            what, tt.settings);
    REQUIRE(m.ncalls == B, "%s: %d collective calls, want one a bucket", what, m.ncalls);
    for (int r = 0; r < N; r++) {
        int k = 0, nb = 0;
        for (int i = 0; i < tt.nblocks; i++) {
            const dv_tt_block *b = &tt.blocks[i];
            if (b->rank != r)
                continue;
            REQUIRE(b->step == 1 && b->micro == -1, "%s: rank %d block '%s' step %d micro "
                    "%d", what, r, b->label, b->step, b->micro);
            if (b->lane == 0) {     /* F L0 .. F L(L-1), B L(L-1) .. B L0, opt */
                int f = k < L, l = f ? k : 2 * L - 1 - k;
                double t0 = k < L ? fwd[l] : k < 2 * L ? bwd[l] : opt;
                double t1 = t0 + (k >= L && k < 2 * L ? 2 : 1);
                dv_tt_kind kind = k < L ? DV_TT_FORWARD : k < 2 * L ? DV_TT_BACKWARD
                                                                    : DV_TT_OPTIMIZER;
                if (k < 2 * L)
                    snprintf(want, sizeof want, "%c L%d", f ? 'F' : 'B', l);
                else
                    snprintf(want, sizeof want, "opt");
                REQUIRE(k <= 2 * L && !strcmp(b->label, want) && b->kind == kind &&
                        near(b->t0, t0) && near(b->t1, t1), "%s: rank %d compute block %d "
                        "is '%s' (kind %d) at [%g, %g], want '%s' at [%g, %g]", what, r, k,
                        b->label, b->kind, b->t0, b->t1, k <= 2 * L ? want : "nothing", t0,
                        t1);
                k++;
                continue;
            }
            /* bucket nb at its allreduce's slots, its call a ring over the N ranks */
            snprintf(want, sizeof want, "bucket %d", nb);
            REQUIRE(nb < B && !strcmp(b->label, want) && b->role == DV_TT_ROLE_BUCKET &&
                    b->layer == nb && near(b->t0, ar0[nb]) && near(b->t1, ar1[nb]) &&
                    b->wait == 0, "%s: rank %d comm block %d is '%s' (role %d, layer %d) at "
                    "[%g, %g] waiting %g, want '%s' at [%d, %d]", what, r, nb, b->label,
                    b->role, b->layer, b->t0, b->t1, b->wait, want, nb < B ? ar0[nb] : -1,
                    nb < B ? ar1[nb] : -1);
            REQUIRE(b->call == nb, "%s: rank %d bucket %d picks call %d, want %d (calls in "
                    "time order)", what, r, nb, b->call, nb);
            const dv_call *c = &m.calls[b->call];
            REQUIRE(!strcmp(c->coll, "allreduce_ring") && c->size == N &&
                    c->nframes == 2 * (N - 1) && near(c->t0, ar0[nb]) &&
                    near(c->t1, N > 1 ? ar1[nb] : ar0[nb]), "%s: bucket %d's call is %s on %d "
                    "ranks, %d steps at [%g, %g]; want allreduce_ring on %d, %d steps at [%d, "
                    "%d]", what, nb, c->coll, c->size, c->nframes, c->t0, c->t1, N,
                    2 * (N - 1), ar0[nb], N > 1 ? ar1[nb] : ar0[nb]);
            int lo, hi;                  /* 65536 floats a layer (timetable.h) */
            dt_ddp_bucket_layers(L, B, nb, &lo, &hi);
            REQUIRE(c->count == (long long)(hi - lo) * 65536 && (b->nbytes > 0) == (N > 1),
                    "%s: rank %d bucket %d (layers %d..%d) reduces %lld elements and sends %g "
                    "bytes", what, r, nb, lo, hi - 1, c->count, b->nbytes);
            nb++;
        }
        REQUIRE(k == 2 * L + 1 && nb == B, "%s: rank %d has %d compute blocks and %d "
                "buckets, want %d and %d", what, r, k, nb, 2 * L + 1, B);
        /* at every half slot: the block there is the one the slots say */
        for (int u = 0; u < 2 * T; u++) {
            double x = u * 0.5 + 0.25;
            int c = dv_tt_block_at(&tt, r, 0, x), w = dv_tt_block_at(&tt, r, 1, x);
            int want_w = -1;
            REQUIRE((x < 3 * L || (x > opt && x < opt + 1)) == (c >= 0), "%s: rank %d at %g: "
                    "compute block %d, but the slots say %s", what, r, x, c,
                    c >= 0 ? "idle" : "busy");
            for (int b = 0; b < B; b++)
                want_w = x > ar0[b] && x < ar1[b] ? b : want_w;
            REQUIRE((w < 0 && want_w < 0) || (w >= 0 && tt.blocks[w].layer == want_w),
                    "%s: rank %d at %g: comm block '%s', the slots say bucket %d", what, r, x,
                    w >= 0 ? tt.blocks[w].label : "none", want_w);
        }
    }
    /* every call, played to its end, leaves every rank with every rank's sum */
    for (int c = 0; c < m.ncalls; c++) {
        dv_mask *out = malloc((size_t)N * m.calls[c].ncells * sizeof *out);
        REQUIRE(out, "out of memory");
        dv_state(&m, c, m.calls[c].nframes, out);
        for (int i = 0; i < N * m.calls[c].ncells; i++)
            REQUIRE(out[i] == (N == 64 ? ~(dv_mask)0 : ((dv_mask)1 << N) - 1), "%s: call %d "
                    "cell %d of rank %d holds %llx at the end", what, c, i % m.calls[c].ncells,
                    i / m.calls[c].ncells, (unsigned long long)out[i]);
        free(out);
    }
    /* the measures: the closed forms of lib/schedule */
    const dv_tt_step *S = &tt.steps[0];
    double share = (double)dt_ddp_hidden(L, B, C, ov) / (C * L);
    double best = (double)dt_ddp_hidden_best(L, B, C) / (C * L);
    REQUIRE(near(S->t0, 0) && near(S->t1, T) && near(S->compute, (double)N * (3 * L + 1)) &&
            near(S->comm, (double)N * C * L) && S->waiting == 0, "%s: step [%g, %g], compute "
            "%g, comm %g, waiting %g; want [0, %d], %d, %d, 0", what, S->t0, S->t1, S->compute,
            S->comm, S->waiting, T, N * (3 * L + 1), N * C * L);
    REQUIRE(fabs(S->hidden_share - share) <= 1e-9 && fabs(S->hidden_best - best) <= 1e-9,
            "%s: hidden %.12f, at best %.12f; dt_ddp_hidden %.12f, dt_ddp_hidden_best %.12f",
            what, S->hidden_share, S->hidden_best, share, best);
    REQUIRE(ov || S->hidden_share == 0, "%s: without overlap %g hidden", what,
            S->hidden_share);
    REQUIRE(S->bubble == -1 && S->bubble_model == -1, "%s: a bubble (%g, %g)", what,
            S->bubble, S->bubble_model);
    check_describe(&tt, 0, what);
    dv_tt_free(&tt);
    dv_model_free(&m);
}

/* _i: ranks {1, 2, 3, 5}[_i / 2], overlap _i % 2; L = 1..9, every B (uneven too),
 * C = 1..3. */
START_TEST(test_builtin_ddp)
{
    static const int ranks[] = { 1, 2, 3, 5 };
    for (int L = 1; L <= 9; L++)
        for (int B = 1; B <= L; B++)
            for (int C = 1; C <= 3; C++)
                check_ddp((dv_ddp_shape){ ranks[_i / 2], L, B, C, _i % 2 });
}
END_TEST

/* The default, the largest shapes, what overlap shows; bad shapes refused. */
START_TEST(test_builtin_ddp_edges)
{
    dv_ddp_shape d = DV_DDP_DEFAULT;
    REQUIRE(d.ranks == 3 && d.layers == 6 && d.buckets == 3 && d.comm == 1 && d.overlap == 1,
            "DV_DDP_DEFAULT is not 3 ranks, 6 layers, 3 buckets, 1 slot, overlap");
    check_ddp(d);
    check_ddp((dv_ddp_shape){ DV_MAX_RANKS, 64, 4, 16, 1 });
    check_ddp((dv_ddp_shape){ 4, 64, 64, 2, 0 });

    /* the default: buckets 0 and 1 wholly under backward, bucket 2 after it */
    dv_model m;
    dv_tt tt;
    char what[96];
    builtin_ddp(d, &m, &tt, what, sizeof what);
    int under = 0;
    for (int i = 0; i < tt.nblocks; i++) {
        const dv_tt_block *b = &tt.blocks[i];
        if (b->lane != 1)
            continue;
        int k = dv_tt_block_at(&tt, b->rank, 0, (b->t0 + b->t1) / 2);
        REQUIRE(b->layer == 2 ? k < 0 : k >= 0 && tt.blocks[k].kind == DV_TT_BACKWARD,
                "%s: rank %d bucket %d has block %d above it", what, b->rank, b->layer, k);
        under += b->layer < 2;
    }
    REQUIRE(under == 2 * 3, "%s: %d buckets under backward, want 2 a rank", what, under);
    REQUIRE(!strcmp(tt.settings, "buckets 3 layers 6 overlap on ranks 3"), "%s: settings "
            "'%s'", what, tt.settings);
    dv_tt_free(&tt);
    dv_model_free(&m);
    char err[256] = "";
    REQUIRE(dv_model_train_ddp(&m, d, err, sizeof err) == 0 && !m.from_trace &&
            !strcmp(m.title, "ddp, 3 ranks, 6 layers in 3 buckets, allreduce 1 slot a layer, "
                    "overlap on"), "dv_model_train_ddp: '%s', from_trace %d, title '%s'", err,
            m.from_trace, m.title);
    dv_model_free(&m);

    static const dv_ddp_shape refused[] = {
        { 0, 6, 3, 1, 1 }, { DV_MAX_RANKS + 1, 6, 3, 1, 1 }, { -3, 6, 3, 1, 1 },
        { 3, 0, 1, 1, 1 }, { 3, 65, 3, 1, 1 }, { 3, 6, 0, 1, 1 }, { 3, 6, 7, 1, 1 },
        { 3, 6, 3, 0, 1 }, { 3, 6, 3, 17, 1 }, { 3, 6, 3, -1, 1 }, { 3, 6, 3, 1, 2 },
        { 3, 6, 3, 1, -1 }, { 1000000, 1000000, 1000000, 1000000, 1 },
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const dv_ddp_shape *x = &refused[i];
        dt_trace t;
        err[0] = '\0';
        int rc = dv_train_ddp_trace(*x, &t, err, sizeof err);
        REQUIRE(rc == -1 && strlen(err) > 10 && t.n == 0 && t.ev == NULL,
                "dv_train_ddp_trace(N=%d, L=%d, B=%d, C=%d, overlap %d): %d, '%s'", x->ranks,
                x->layers, x->buckets, x->comm, x->overlap, rc, err);
        err[0] = '\0';
        REQUIRE(dv_model_train_ddp(&m, *x, err, sizeof err) == -1 && strlen(err) > 10,
                "dv_model_train_ddp(N=%d, L=%d, B=%d, C=%d): not refused with a sentence",
                x->ranks, x->layers, x->buckets, x->comm);
    }
}
END_TEST

/* dt_memcpy's copies between host and GPU (d2h and h2d events of coll "memcpy": the
 * batch up at a rank's start, a number back at its end) belong to no collective: the
 * same trace with them draws the same blocks as without. */
START_TEST(test_memcpy_not_comm)
{
    dv_ddp_shape d = DV_DDP_DEFAULT;
    dv_model m, m2;
    dv_tt tt, tt2;
    char what[96], err[256] = "";
    builtin_ddp(d, &m, &tt, what, sizeof what);
    dt_trace t;
    REQUIRE(dv_train_ddp_trace(d, &t, err, sizeof err) == 0, "%s: %s", what, err);
    dt_event *ev = malloc((t.n + 2 * (size_t)t.nranks) * sizeof *ev);
    REQUIRE(ev != NULL, "out of memory");
    size_t n = 0;
    for (size_t i = 0; i < t.n; i++) {
        const dt_event *e = &t.ev[i];
        if (i == 0 || t.ev[i - 1].rank != e->rank) {            /* the batch, up */
            ev[n] = (dt_event){ .t0 = e->t0, .t1 = e->t0, .rank = e->rank, .peer = -1,
                                .kind = DT_EV_H2D, .coll = "memcpy", .phase = "batch",
                                .step = -1, .chunk = -1, .nbytes = 1024 };
            n++;
        }
        ev[n++] = *e;
        if (i + 1 == t.n || t.ev[i + 1].rank != e->rank) {      /* a number, back */
            ev[n] = (dt_event){ .t0 = e->t1, .t1 = e->t1, .rank = e->rank, .peer = -1,
                                .kind = DT_EV_D2H, .coll = "memcpy", .phase = "number",
                                .step = -1, .chunk = -1, .nbytes = 8 };
            n++;
        }
    }
    free(t.ev);
    t.ev = ev;
    t.n = n;
    REQUIRE(dv_model_build(&m2, &t, err, sizeof err) == 0, "with copies: %s", err);
    m2.from_trace = 0;
    REQUIRE(dv_tt_build(&tt2, &m2, err, sizeof err) == 0, "with copies: %s", err);
    REQUIRE(tt2.nblocks == tt.nblocks, "%s: %d blocks with dt_memcpy's copies, %d without",
            what, tt2.nblocks, tt.nblocks);
    for (int i = 0; i < tt.nblocks; i++) {
        const dv_tt_block *a = &tt.blocks[i], *b = &tt2.blocks[i];
        REQUIRE(a->rank == b->rank && a->lane == b->lane && a->kind == b->kind &&
                a->t0 == b->t0 && a->t1 == b->t1, "%s: block %d ('%s') differs with "
                "dt_memcpy's copies ('%s')", what, i, a->label, b->label);
    }
    dv_tt_free(&tt);
    dv_tt_free(&tt2);
    dv_model_free(&m);
    dv_model_free(&m2);
}
END_TEST

/* A "# train" line that lies about the events (another mode, stages and micro-batches
 * out of range or missing, a schedule that does not exist): the timetable builds or
 * refuses with a sentence, keeps its contract, and draws. */
START_TEST(test_odd_headers)
{
    static const char *const lines[] = {
        "mode pp schedule gpipe stages 0 micro 0",
        "mode pp schedule 1f1b stages 65 micro 1000000",
        "mode pp schedule bogus stages 3 micro 4", "mode pp stages -1 micro -1", "mode pp",
        "mode pp schedule gpipe stages 99999999999999999999 micro 2", "mode ddp",
        "mode hybrid dp 0 tp 0 pp 9 schedule 1f1b micro 2147483647", "mode fsdp zero 9",
        "mode bogus", "mode", "stages 3 micro 4", "x", "mode pp schedule 1f1b stages 1 micro 1",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        dt_trace t;
        dv_model m;
        dv_tt tt;
        char err[256] = "", what[96];
        snprintf(what, sizeof what, "gpipe P=3 M=4 with '# train %s'", lines[i]);
        REQUIRE(dv_train_algo_trace(0, 3, 4, &t, err, sizeof err) == 0, "%s", err);
        snprintf(t.train, sizeof t.train, "%s", lines[i]);
        REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s: %s", what, err);
        if (dv_tt_build(&tt, &m, err, sizeof err) != 0) {
            REQUIRE(strlen(err) > 10, "%s: refused without a sentence", what);
            dv_model_free(&m);
            continue;
        }
        check_contract(&tt, what);
        for (int r = 0; r < tt.nranks; r++)
            REQUIRE(dv_tt_stash(&tt, r, 2.5) >= 0, "%s: stash < 0", what);
        dv_view v = { .tt = &tt, .t0 = tt.t_begin, .t1 = tt.t_end, .cursor = 2.5, .call = -1 };
        SDL_Surface *p = dv_render_surface(&m, &v, 640, 400, err, sizeof err);
        REQUIRE(p != NULL, "%s: %s", what, err);
        SDL_FreeSurface(p);
        dv_tt_free(&tt);
        dv_model_free(&m);
    }
}
END_TEST

/* Transports (issue 19): the built-in DDP step and GPipe with a transport on every
 * send and receive (rank 0's receives by mpi, everything else by shm): a comm block
 * carries those of its messages (stage 0's activations out by shm, its gradients in by
 * mpi; a bucket of rank 0 both), a compute block none, the timetable all of them, and
 * the picture draws with the labels and the legend that name them. */
START_TEST(test_vias)
{
    for (int pp = 0; pp < 2; pp++) {
        dt_trace t;
        dv_model m;
        dv_tt tt;
        char err[256] = "";
        const char *what = pp ? "gpipe P=3 M=4 with transports" : "ddp with transports";
        int rc = pp ? dv_train_algo_trace(0, 3, 4, &t, err, sizeof err)
                    : dv_train_ddp_trace(DV_DDP_DEFAULT, &t, err, sizeof err);
        REQUIRE(rc == 0, "%s: %s", what, err);
        for (size_t i = 0; i < t.n; i++)
            if (t.ev[i].kind == DT_EV_SEND || t.ev[i].kind == DT_EV_RECV)
                t.ev[i].via = (unsigned char)dt_trace_via_find(
                    t.ev[i].rank == 0 && t.ev[i].kind == DT_EV_RECV ? "mpi" : "shm");
        REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s: %s", what, err);
        REQUIRE(dv_tt_build(&tt, &m, err, sizeof err) == 0, "%s: %s", what, err);
        check_contract(&tt, what);
        REQUIRE(tt.vias == (1u << 1 | 1u << 3), "%s: transports %#x", what, tt.vias);
        int ncomm = 0;
        for (int i = 0; i < tt.nblocks; i++) {
            const dv_tt_block *b = &tt.blocks[i];
            unsigned want = b->lane == 0 ? 0 : b->rank == 0 ? tt.vias : 1u << 3;
            if (b->lane == 1 && b->rank == 0 && pp)   /* stage 0: one message a block */
                want = strncmp(b->label, "act", 3) == 0 ? 1u << 3 : 1u << 1;
            ncomm += b->lane == 1 && b->vias != 0;
            REQUIRE(b->vias == want, "%s: block '%s' of rank %d lane %d: transports %#x, "
                    "want %#x", what, b->label, b->rank, b->lane, b->vias, want);
        }
        REQUIRE(ncomm > 0, "%s: no comm block names a transport", what);
        dv_view v = { .tt = &tt, .t0 = tt.t_begin, .t1 = tt.t_end, .cursor = -1, .call = -1 };
        SDL_Surface *p = dv_render_surface(&m, &v, 1200, 600, err, sizeof err);
        REQUIRE(p != NULL, "%s: %s", what, err);
        SDL_FreeSurface(p);
        dv_tt_free(&tt);
        dv_model_free(&m);
    }
}
END_TEST

/* ==== threads: one row per thread (dp-threads) ==== */

/* One event of a synthetic dp-threads trace: rank 0, thread th. */
static void dpt_put(dt_trace *t, int th, dt_event_kind kind, const char *coll,
                    const char *phase, int step, int chunk, int micro, double t0, double t1)
{
    dt_event *e = &t->ev[t->n++];
    memset(e, 0, sizeof *e);
    *e = (dt_event){ .t0 = t0, .t1 = t1, .rank = 0, .peer = -1, .kind = kind, .step = step,
                     .chunk = chunk, .lo = micro < 0 ? 0 : micro,
                     .hi = micro < 0 ? 0 : micro + 1, .thread = th };
    snprintf(e->coll, sizeof e->coll, "%s", coll);
    snprintf(e->phase, sizeof e->phase, "%s", phase);
}

/* What train --mode dp-threads --threads T --gil records, in 2 steps of 10 time units:
 * the master (thread 0) copies and computes the loss and the update; replica k (thread
 * k+1) computes forward and backward at once with the others, then queues for the lock:
 * replica k waits k/2 units for it, and holds it 1/2 unit. Thread numbers zeroed
 * (threads 0) is a version 2 file's view of the same run. */
static void dpt_trace(dt_trace *t, int T, int threads, const char *train)
{
    memset(t, 0, sizeof *t);
    t->version = DT_TRACE_VERSION;
    t->nranks = 1;
    snprintf(t->program, sizeof t->program, "train");
    snprintf(t->train, sizeof t->train, "%s", train);
    t->ev = calloc((size_t)(2 * (6 + 10 * T)), sizeof *t->ev);
    REQUIRE(t->ev != NULL, "out of memory");
    for (int s = 1; s <= 2; s++) {
        double b = (s - 1) * 10.0;
        dpt_put(t, 0, DT_EV_MARK, "train", "step", s, -1, -1, b, b);
        for (int k = 1; k < T; k++) {
            dpt_put(t, 0, DT_EV_MARK, "dp-threads", "replicate", s, k, -1, b + 0.1 * k, b + 0.1 * k + 0.05);
            dpt_put(t, 0, DT_EV_MARK, "dp-threads", "gather", s, k, -1, b + 4 + 0.1 * k, b + 4 + 0.1 * k + 0.05);
            dpt_put(t, 0, DT_EV_MARK, "dp-threads", "reduce", s, k, -1, b + 8 + 0.1 * k, b + 8 + 0.1 * k + 0.05);
        }
        dpt_put(t, 0, DT_EV_COMPUTE, "train", "loss", s, -1, -1, b + 5, b + 5.5);
        dpt_put(t, 0, DT_EV_COMPUTE, "train", "optimizer", s, -1, -1, b + 9, b + 9.5);
        for (int k = 0; k < T; k++) {
            int th = threads ? k + 1 : 0;
            double q = b + 2 + 0.5 * k;             /* when replica k gets the lock */
            dpt_put(t, th, DT_EV_COMPUTE, "train", "forward", s, 0, k, b + 1, b + 2);
            if (k > 0)
                dpt_put(t, th, DT_EV_MARK, "dp-threads", "lock-wait", s, k, k, b + 2, q);
            dpt_put(t, th, DT_EV_COMPUTE, "train", "interpret", s, -1, k, q, q + 0.5);
            dpt_put(t, th, DT_EV_COMPUTE, "train", "backward", s, 0, k, b + 6, b + 7);
        }
    }
    dti_trace_sort(t->ev, t->n);
}

/* Where the trace names threads, each has a row of its own under its rank's main one,
 * named for what it is ("master", "replica k"), holding exactly its own events: every
 * replica's forward, interpret and backward on its row's compute lane, apart (the
 * contract), its waits for the lock as "lock" blocks of its comm lane, all waiting,
 * counted in the step's lock time, not as communication; the picture draws them. The
 * same run without thread numbers (an old trace) keeps one row per rank. */
START_TEST(test_threads)
{
    const int T = 3;
    const char *train = "mode dp-threads threads 3 gil 0.5 layers 1 steps 2 ranks 1";
    for (int threads = 1; threads >= 0; threads--) {
        dt_trace t;
        dv_model m;
        dv_tt tt;
        char err[256] = "", name[48], what[64];
        snprintf(what, sizeof what, "dp-threads T=%d %s thread numbers", T,
                 threads ? "with" : "without");
        dpt_trace(&t, T, threads, train);
        REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s: %s", what, err);
        REQUIRE(dv_tt_build(&tt, &m, err, sizeof err) == 0, "%s: %s", what, err);
        if (threads)                  /* one row: the threads' compute overlaps there */
            check_contract(&tt, what);
        REQUIRE(!strcmp(tt.mode, "dp-threads") && tt.disagree[0] == '\0',
                "%s: mode '%s', disagree '%s'", what, tt.mode, tt.disagree);
        if (!threads) {
            REQUIRE(tt.nrows == 1, "%s: %d rows", what, tt.nrows);
            dv_tt_row_name(&tt, 0, 0, name, sizeof name);
            REQUIRE(!strcmp(name, "rank 0"), "%s: row 0 is '%s'", what, name);
        } else {
            REQUIRE(tt.nrows == T + 1, "%s: %d rows, want %d", what, tt.nrows, T + 1);
            static const char *const want[] = { "master", "replica 0", "replica 1", "replica 2" };
            for (int q = 0; q <= T; q++) {
                dv_tt_row_name(&tt, q, 0, name, sizeof name);
                REQUIRE(tt.rows[q].rank == 0 && tt.rows[q].thread == q && !strcmp(name, want[q]),
                        "%s: row %d is rank %d thread %d '%s', want '%s'", what, q,
                        tt.rows[q].rank, tt.rows[q].thread, name, want[q]);
            }
            int seen[4][4] = { { 0 } };          /* per row: F, B, interpret, lock */
            for (int i = 0; i < tt.nblocks; i++) {
                const dv_tt_block *b = &tt.blocks[i];
                int k = b->kind == DV_TT_FORWARD ? 0 : b->kind == DV_TT_BACKWARD ? 1
                      : !strcmp(b->label, "interpret") ? 2 : b->role == DV_TT_ROLE_LOCK ? 3 : -1;
                if (k < 0 || b->row == 0) {   /* the master: its copies, loss, update */
                    REQUIRE(b->row == 0 && k < 0, "%s: block '%s' on row %d", what, b->label,
                            b->row);
                    continue;
                }
                seen[b->row][k]++;
                REQUIRE(b->micro == b->row - 1 || k == 3, "%s: row %d holds '%s' of replica %d",
                        what, b->row, b->label, b->micro);
                if (k == 3)
                    REQUIRE(b->lane == 1 && !strcmp(b->label, "lock") && near(b->wait, b->t1 - b->t0) &&
                            near(b->t1 - b->t0, 0.5 * (b->row - 1)),
                            "%s: row %d: lock block '%s' lane %d waits %g of [%g, %g]", what,
                            b->row, b->label, b->lane, b->wait, b->t0, b->t1);
            }
            for (int q = 1; q <= T; q++)
                REQUIRE(seen[q][0] == 2 && seen[q][1] == 2 && seen[q][2] == 2 &&
                        seen[q][3] == (q > 1 ? 2 : 0), "%s: row %d: %d F, %d B, %d interpret, "
                        "%d lock", what, q, seen[q][0], seen[q][1], seen[q][2], seen[q][3]);
            REQUIRE(dv_tt_block_at(&tt, 3, 1, 2.5) >= 0 && dv_tt_block_at(&tt, 1, 1, 2.5) == -1,
                    "%s: replica 2 waits at 2.5, replica 0 does not", what);
        }
        for (int s = 0; s < tt.nsteps; s++) {
            /* replica k waits k/2: 0.5 + 1 per step; the copies are the communication */
            REQUIRE(near(tt.steps[s].lock, 1.5) && near(tt.steps[s].comm, 6 * 0.05),
                    "%s: step %d: lock %g, comm %g", what, tt.steps[s].step, tt.steps[s].lock,
                    tt.steps[s].comm);
            char buf[512];
            dv_tt_describe_step(&tt, s, buf, sizeof buf);
            REQUIRE(strstr(buf, "; waiting for the lock 1.5 slot") ||
                    strstr(buf, "; waiting for the lock 1.5 s"), "%s: '%s'", what, buf);
            REQUIRE(!threads || strstr(buf, "(times summed over 4 threads)"), "%s: '%s'", what, buf);
        }
        dv_view v = { .tt = &tt, .t0 = tt.t_begin, .t1 = 10, .cursor = 2.5, .call = -1 };
        SDL_Surface *p = dv_render_surface(&m, &v, 1000, 560, err, sizeof err);
        REQUIRE(p != NULL, "%s: %s", what, err);
        int rows = 0, r, l;
        double at;
        for (int y = 0, last = -1; y < 560; y++)        /* dv_tt_hit finds every row */
            if (dv_tt_hit(&v, 1000, 560, 500, y, &r, &l, &at) && r != last)
                rows++, last = r;
        REQUIRE(rows == tt.nrows, "%s: dv_tt_hit finds %d rows of %d", what, rows, tt.nrows);
        SDL_FreeSurface(p);
        dv_tt_free(&tt);
        dv_model_free(&m);
    }
}
END_TEST

/* ==== a "# train" line that contradicts its events ==== */

/* Each line says something the events of the trace (GPipe P=3 M=4, the built-in DDP
 * over 3 ranks, or the dp-threads run above) contradict: the timetable is built from
 * the events, and dv_tt.disagree names what the line said; a line that agrees leaves
 * disagree empty. */
/* ==== hand-written traces of interleaved and zb-h1, as pp.c writes them ==== */

/* Interleaved, P = 2, v = 2, M = 1: virtual stages 0, 2 on rank 0 and 1, 3 on rank 1,
 * the marks naming them; F of c feeds c+1, B of c feeds c-1; rank 0's first forward
 * records a compute event per layer (it runs two). A forward 1 ms, a backward 2. */
static const char IL_TRACE[] =
    "# dtlab-trace 3\n# ranks 2\n# events 31\n# program train\n"
    "# train mode pp schedule interleaved virtual 2 stages 2 micro 1 layers 8 steps 1\n"
    "# columns t0 t1 rank kind peer coll phase step chunk lo hi nbytes via thread\n"
    "0.000 0.000 0 mark -1 train step 1 -1 0 0 0 - 0\n"
    "0.000 0.001 0 mark -1 pipeline forward 1 0 0 1 0 - 0\n"
    "0.000 0.0005 0 compute -1 train forward 1 0 0 1 0 - 0\n"
    "0.0005 0.001 0 compute -1 train forward 1 1 0 1 0 - 0\n"
    "0.001 0.001 0 send 1 pipeline activations 1 0 0 1 64 - 0\n"
    "0.002 0.003 0 mark -1 pipeline forward 1 2 0 1 0 - 0\n"
    "0.002 0.002 0 recv 1 pipeline activations 1 0 0 1 64 - 0\n"
    "0.002 0.003 0 compute -1 train forward 1 4 0 1 0 - 0\n"
    "0.003 0.003 0 send 1 pipeline activations 1 0 0 1 64 - 0\n"
    "0.006 0.008 0 mark -1 pipeline backward 1 2 0 1 0 - 0\n"
    "0.006 0.006 0 recv 1 pipeline gradients 1 0 0 1 64 - 0\n"
    "0.006 0.008 0 compute -1 train backward 1 4 0 1 0 - 0\n"
    "0.008 0.008 0 send 1 pipeline gradients 1 0 0 1 64 - 0\n"
    "0.010 0.012 0 mark -1 pipeline backward 1 0 0 1 0 - 0\n"
    "0.010 0.010 0 recv 1 pipeline gradients 1 0 0 1 64 - 0\n"
    "0.010 0.012 0 compute -1 train backward 1 0 0 1 0 - 0\n"
    "0.000 0.000 1 mark -1 train step 1 -1 0 0 0 - 0\n"
    "0.001 0.002 1 mark -1 pipeline forward 1 1 0 1 0 - 0\n"
    "0.001 0.001 1 recv 0 pipeline activations 1 0 0 1 64 - 0\n"
    "0.001 0.002 1 compute -1 train forward 1 2 0 1 0 - 0\n"
    "0.002 0.002 1 send 0 pipeline activations 1 0 0 1 64 - 0\n"
    "0.003 0.004 1 mark -1 pipeline forward 1 3 0 1 0 - 0\n"
    "0.003 0.003 1 recv 0 pipeline activations 1 0 0 1 64 - 0\n"
    "0.003 0.004 1 compute -1 train forward 1 6 0 1 0 - 0\n"
    "0.004 0.006 1 mark -1 pipeline backward 1 3 0 1 0 - 0\n"
    "0.004 0.006 1 compute -1 train backward 1 6 0 1 0 - 0\n"
    "0.006 0.006 1 send 0 pipeline gradients 1 0 0 1 64 - 0\n"
    "0.008 0.010 1 mark -1 pipeline backward 1 1 0 1 0 - 0\n"
    "0.008 0.008 1 recv 0 pipeline gradients 1 0 0 1 64 - 0\n"
    "0.008 0.010 1 compute -1 train backward 1 2 0 1 0 - 0\n"
    "0.010 0.010 1 send 0 pipeline gradients 1 0 0 1 64 - 0\n";

/* ZB-H1, P = 2, M = 2: stage 0 runs F0 F1 B0 W0 B1 W1, stage 1 F0 B0 F1 B1 W0 W1 (its
 * W's put off by one micro-batch); a W's compute says "backward" (the model's split
 * backward), its mark "weights". Every operation 1 ms. */
static const char ZB_TRACE[] =
    "# dtlab-trace 3\n# ranks 2\n# events 34\n# program train\n"
    "# train mode pp schedule zb-h1 stages 2 micro 2 layers 2 steps 1\n"
    "# columns t0 t1 rank kind peer coll phase step chunk lo hi nbytes via thread\n"
    "0.000 0.000 0 mark -1 train step 1 -1 0 0 0 - 0\n"
    "0.000 0.001 0 mark -1 pipeline forward 1 0 0 1 0 - 0\n"
    "0.000 0.001 0 compute -1 train forward 1 0 0 1 0 - 0\n"
    "0.001 0.001 0 send 1 pipeline activations 1 0 0 1 64 - 0\n"
    "0.001 0.002 0 mark -1 pipeline forward 1 0 1 2 0 - 0\n"
    "0.001 0.002 0 compute -1 train forward 1 0 1 2 0 - 0\n"
    "0.002 0.002 0 send 1 pipeline activations 1 1 1 2 64 - 0\n"
    "0.003 0.004 0 mark -1 pipeline backward 1 0 0 1 0 - 0\n"
    "0.003 0.003 0 recv 1 pipeline gradients 1 0 0 1 64 - 0\n"
    "0.003 0.004 0 compute -1 train backward 1 0 0 1 0 - 0\n"
    "0.004 0.005 0 mark -1 pipeline weights 1 0 0 1 0 - 0\n"
    "0.004 0.005 0 compute -1 train backward 1 0 0 1 0 - 0\n"
    "0.005 0.006 0 mark -1 pipeline backward 1 0 1 2 0 - 0\n"
    "0.005 0.005 0 recv 1 pipeline gradients 1 1 1 2 64 - 0\n"
    "0.005 0.006 0 compute -1 train backward 1 0 1 2 0 - 0\n"
    "0.006 0.007 0 mark -1 pipeline weights 1 0 1 2 0 - 0\n"
    "0.006 0.007 0 compute -1 train backward 1 0 1 2 0 - 0\n"
    "0.000 0.000 1 mark -1 train step 1 -1 0 0 0 - 0\n"
    "0.001 0.002 1 mark -1 pipeline forward 1 1 0 1 0 - 0\n"
    "0.001 0.001 1 recv 0 pipeline activations 1 0 0 1 64 - 0\n"
    "0.001 0.002 1 compute -1 train forward 1 1 0 1 0 - 0\n"
    "0.002 0.003 1 mark -1 pipeline backward 1 1 0 1 0 - 0\n"
    "0.002 0.003 1 compute -1 train backward 1 1 0 1 0 - 0\n"
    "0.003 0.003 1 send 0 pipeline gradients 1 0 0 1 64 - 0\n"
    "0.003 0.004 1 mark -1 pipeline forward 1 1 1 2 0 - 0\n"
    "0.003 0.003 1 recv 0 pipeline activations 1 1 1 2 64 - 0\n"
    "0.003 0.004 1 compute -1 train forward 1 1 1 2 0 - 0\n"
    "0.004 0.005 1 mark -1 pipeline backward 1 1 1 2 0 - 0\n"
    "0.004 0.005 1 compute -1 train backward 1 1 1 2 0 - 0\n"
    "0.005 0.005 1 send 0 pipeline gradients 1 1 1 2 64 - 0\n"
    "0.005 0.006 1 mark -1 pipeline weights 1 1 0 1 0 - 0\n"
    "0.005 0.006 1 compute -1 train backward 1 1 0 1 0 - 0\n"
    "0.006 0.007 1 mark -1 pipeline weights 1 1 1 2 0 - 0\n"
    "0.006 0.007 1 compute -1 train backward 1 1 1 2 0 - 0\n";

/* Rank r's compute blocks' labels, joined by spaces. */
static void row_labels(const dv_tt *tt, int r, char *out, size_t len)
{
    out[0] = '\0';
    for (int k = 0; k < tt->nblocks; k++)
        if (tt->blocks[k].rank == r && tt->blocks[k].lane == 0)
            snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? " " : "",
                     tt->blocks[k].label);
}

/* text as a trace (train: the "# train" line to put instead, "" none, NULL as it is),
 * its model and timetable, and ranks 0 and 1's compute labels into row */
static void hand_trace(const char *text, const char *train, dv_model *m, dv_tt *tt,
                       char row[2][128])
{
    char err[256];
    dt_trace t;
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    REQUIRE(f != NULL, "fmemopen");
    REQUIRE(dt_trace_read_stream(f, "hand", &t, err, sizeof err) == 0, "%s", err);
    fclose(f);
    if (train != NULL)
        snprintf(t.train, sizeof t.train, "%s", train);
    REQUIRE(dv_model_build(m, &t, err, sizeof err) == 0, "%s", err);
    REQUIRE(dv_tt_build(tt, m, err, sizeof err) == 0, "%s", err);
    check_contract(tt, "hand-written");
    row_labels(tt, 0, row[0], sizeof row[0]);
    row_labels(tt, 1, row[1], sizeof row[1]);
}

START_TEST(test_hand_interleaved)
{
    static const char *const train[] = {
        NULL, "",                                                 /* as written, none */
        "mode pp schedule 1f1b stages 2 micro 1",                 /* disagreeing */
        "mode pp schedule interleaved virtual 3 stages 2 micro 1",
        "mode pp schedule zb-h1 stages 2 micro 1",
    };
    for (int i = 0; i < 5; i++) {
        dv_model m;
        dv_tt tt;
        char row[2][128];
        hand_trace(IL_TRACE, train[i], &m, &tt, row);
        REQUIRE(!strcmp(tt.mode, "pp") && tt.schedule == 2 && tt.v == 2 && tt.stages == 2 &&
                tt.micro == 1 && tt.nsteps == 1 && !strcmp(row[0], "F0a F0b B0b B0a") &&
                !strcmp(row[1], "F0a F0b B0b B0a"), "interleaved, header '%s': schedule %d "
                "v %d stages %d micro %d; rank 0 '%s', rank 1 '%s'", train[i] ? train[i]
                : "as written", tt.schedule, tt.v, tt.stages, tt.micro, row[0], row[1]);
        REQUIRE((i < 2) == (tt.disagree[0] == '\0') &&
                (i < 2 || strstr(tt.disagree, i == 3 ? "virtual 3" : "chunks a stage")),
                "interleaved, header '%s': disagree '%s'", train[i] ? train[i] : "as written",
                tt.disagree);
        int f0a = find_compute(&tt, 0, "F0a"), b0b = find_compute(&tt, 0, "B0b");
        REQUIRE(f0a >= 0 && near(tt.blocks[f0a].t1 - tt.blocks[f0a].t0, 0.001) &&
                tt.blocks[f0a].chunk == 0 && b0b >= 0 && tt.blocks[b0b].chunk == 1,
                "interleaved: rank 0's F0a (its two layers) and B0b");
        /* rank 0 holds (0, a) from 0 and (0, b) from 2 ms until 8 ms, (0, a) until 12 */
        REQUIRE(dv_tt_stash(&tt, 0, 0.0015) == 1 && dv_tt_stash(&tt, 0, 0.005) == 2 &&
                dv_tt_stash(&tt, 0, 0.009) == 1 && dv_tt_stash(&tt, 0, 0.0125) == 0 &&
                tt.steps[0].stash == 2, "interleaved: rank 0's stash %d %d %d %d, peak %d",
                dv_tt_stash(&tt, 0, 0.0015), dv_tt_stash(&tt, 0, 0.005),
                dv_tt_stash(&tt, 0, 0.009), dv_tt_stash(&tt, 0, 0.0125), tt.steps[0].stash);
        int back = 0;                         /* activations from rank 1 round to rank 0 */
        for (int a = 0; a < tt.narrows; a++)
            back += tt.arrows[a].src == 1 && tt.arrows[a].what == 'A';
        REQUIRE(tt.narrows == 6 && back == 1 && tt.steps[0].messages == 6 &&
                tt.steps[0].messages_model == 6 && tt.steps[0].stash_model ==
                dt_pp_peak_stash_v(2, 2, 1, 2, 0), "interleaved: %d arrows (%d activations "
                "1 -> 0), messages %d (model %d), stash model %d", tt.narrows, back,
                tt.steps[0].messages, tt.steps[0].messages_model, tt.steps[0].stash_model);
        dv_tt_free(&tt);
        dv_model_free(&m);
    }
}
END_TEST

START_TEST(test_hand_zb)
{
    static const char *const train[] = {
        NULL, "", "mode pp schedule 1f1b stages 2 micro 2",
        "mode pp schedule interleaved virtual 2 stages 2 micro 2",
    };
    for (int i = 0; i < 4; i++) {
        dv_model m;
        dv_tt tt;
        char row[2][128];
        hand_trace(ZB_TRACE, train[i], &m, &tt, row);
        REQUIRE(tt.schedule == 3 && tt.v == 1 && tt.stages == 2 && tt.micro == 2 &&
                !strcmp(row[0], "F0 F1 B0 W0 B1 W1") && !strcmp(row[1], "F0 B0 F1 B1 W0 W1"),
                "zb-h1, header '%s': schedule %d v %d stages %d micro %d; rank 0 '%s', rank "
                "1 '%s'", train[i] ? train[i] : "as written", tt.schedule, tt.v, tt.stages,
                tt.micro, row[0], row[1]);
        REQUIRE((i < 2) == (tt.disagree[0] == '\0'), "zb-h1, header '%s': disagree '%s'",
                train[i] ? train[i] : "as written", tt.disagree);
        int w = 0;
        for (int k = 0; k < tt.nblocks; k++)
            w += tt.blocks[k].kind == DV_TT_WEIGHTS && tt.blocks[k].label[0] == 'W' &&
                 tt.blocks[k].micro >= 0;
        /* stage 1 holds micro-batch 0 from its F (1 ms) until its W (6 ms) */
        REQUIRE(w == 4 && dv_tt_stash(&tt, 1, 0.0045) == 2 && dv_tt_stash(&tt, 1, 0.0055) == 2 &&
                dv_tt_stash(&tt, 1, 0.0065) == 1 && tt.steps[0].stash == 2 &&
                tt.steps[0].stash_model == 2 && tt.narrows == 4 && tt.steps[0].messages == 4,
                "zb-h1: %d W blocks; stage 1's stash %d %d %d; peak %d (model %d); %d arrows",
                w, dv_tt_stash(&tt, 1, 0.0045), dv_tt_stash(&tt, 1, 0.0055),
                dv_tt_stash(&tt, 1, 0.0065), tt.steps[0].stash, tt.steps[0].stash_model,
                tt.narrows);
        if (i == 0) {                         /* the measures beside zb-h1's closed forms */
            char buf[512];
            dv_tt_describe_step(&tt, 0, buf, sizeof buf);
            REQUIRE(fabs(tt.steps[0].bubble_model - dt_pp_bubble_v(3, 2, 2, 1, 1, 1)) <= EPS &&
                    near(tt.steps[0].bubble, 1 - 12.0 / 14) &&
                    strstr(buf, "(P-1)/(3M+P-1) at P=2, M=2") &&
                    strstr(buf, "stash peak 2, 2 = min(P,M)") &&
                    strstr(buf, "4 messages, 4 = 2M(P-1)"), "zb-h1: bubble %g (model %g), "
                    "described '%s'", tt.steps[0].bubble, tt.steps[0].bubble_model, buf);
        }
        dv_tt_free(&tt);
        dv_model_free(&m);
    }
}
END_TEST

START_TEST(test_header_disagrees)
{
    static const struct {
        int src;                 /* 0 gpipe P=3 M=4, 1 ddp N=3, 2 dp-threads T=3 */
        const char *line, *said;  /* the "# train" line; what disagree quotes ("" none) */
        const char *mode;
        int stages, micro, schedule;
    } cases[] = {
        { 0, "mode pp schedule gpipe stages 3 micro 4 ranks 3 steps 1", "", "pp", 3, 4, 0 },
        { 0, "mode pp schedule gpipe stages 9 micro 4", "stages 9, but the pipeline marks show 3 stages", "pp", 3, 4, 0 },
        { 0, "mode pp schedule gpipe stages 3 micro 8", "micro 8, but the pipeline marks show 4", "pp", 3, 4, 0 },
        { 0, "mode pp schedule 1f1b stages 3 micro 4", "schedule 1f1b, but", "pp", 3, 4, 0 },
        { 0, "mode ddp bucket_kb 1 layers 3 ranks 3", "mode ddp, but the events show pp", "pp", 3, 4, 0 },
        { 0, "mode pp schedule gpipe stages 3 micro 4 ranks 2", "ranks 2, but the trace has 3", "pp", 3, 4, 0 },
        { 0, "mode hybrid dp 2 tp 1 pp 3 schedule gpipe micro 4", "dp 2 x tp 1 x pp 3 ranks, but the trace has 3", "hybrid", 3, 4, 0 },
        { 0, "mode pp schedule gpipe stages 3 micro 4 layers 2", "layers 2, but the events compute layer 2", "pp", 3, 4, 0 },
        { 1, "mode pp schedule 1f1b stages 3 micro 4", "mode pp, but the events show ddp", "ddp", 0, 0, -1 },
        { 1, "mode ddp buckets 3 layers 6 overlap on ranks 3", "", "ddp", 0, 0, -1 },
        { 2, "mode dp-threads threads 5 gil 0.5 layers 1 steps 2 ranks 1", "threads 5, but the events show 3", "dp-threads", 0, 0, -1 },
        { 2, "mode dp-threads threads 3 gil 0 layers 1 steps 2 ranks 1", "gil 0, but", "dp-threads", 0, 0, -1 },
        { 2, "mode dp-threads threads 3 gil 0.5 layers 1 steps 1 ranks 1", "steps 1, but the events reach step 2", "dp-threads", 0, 0, -1 },
        { 2, "mode pp schedule gpipe stages 2 micro 3", "mode pp, but the events show dp-threads", "dp-threads", 0, 0, -1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dt_trace t;
        dv_model m;
        dv_tt tt;
        char err[256] = "", what[160];
        snprintf(what, sizeof what, "'# train %s'", cases[i].line);
        if (cases[i].src == 0)
            REQUIRE(dv_train_algo_trace(0, 3, 4, &t, err, sizeof err) == 0, "%s", err);
        else if (cases[i].src == 1)
            REQUIRE(dv_train_ddp_trace(DV_DDP_DEFAULT, &t, err, sizeof err) == 0, "%s", err);
        else
            dpt_trace(&t, 3, 1, "");
        snprintf(t.train, sizeof t.train, "%s", cases[i].line);
        REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s: %s", what, err);
        REQUIRE(dv_tt_build(&tt, &m, err, sizeof err) == 0, "%s: %s", what, err);
        check_contract(&tt, what);
        const char *want = cases[i].said;
        REQUIRE(want[0] ? strstr(tt.disagree, want) != NULL &&
                          strstr(tt.disagree, "drawn as the events show") != NULL
                        : tt.disagree[0] == '\0',
                "%s: disagree '%s', want it to say '%s'", what, tt.disagree, want);
        REQUIRE(!strcmp(tt.mode, cases[i].mode) && tt.stages == cases[i].stages &&
                tt.micro == cases[i].micro && tt.schedule == cases[i].schedule,
                "%s: mode '%s' stages %d micro %d schedule %d; the events show '%s' %d %d %d",
                what, tt.mode, tt.stages, tt.micro, tt.schedule, cases[i].mode,
                cases[i].stages, cases[i].micro, cases[i].schedule);
        if (cases[i].src == 0 && strcmp(tt.mode, "pp") == 0) {   /* the model at P=3 */
            char buf[512];
            dv_tt_describe_step(&tt, 0, buf, sizeof buf);
            REQUIRE(strstr(buf, "over 3 stages") && strstr(buf, "at P=3, M=4"), "%s: '%s'",
                    what, buf);
        }
        dv_view v = { .tt = &tt, .t0 = tt.t_begin, .t1 = tt.t_end, .cursor = -1, .call = -1 };
        SDL_Surface *p = dv_render_surface(&m, &v, 900, 500, err, sizeof err);
        REQUIRE(p != NULL, "%s: %s", what, err);
        SDL_FreeSurface(p);
        dv_tt_free(&tt);
        dv_model_free(&m);
    }
}
END_TEST

/* ==== real traces against their own events ==== */

/* What the file name says was given to train. */
typedef struct {
    char mode[16];
    int stages;              /* pipeline stages: pp's ranks, hybrid's --pp; 0 none */
    int schedule, micro;     /* with stages: --schedule (0 gpipe, 1 1f1b, 2 interleaved,
                                3 zb-h1), --micro */
    int v;                   /* interleaved: the header's "virtual v"; else 1 */
    int units;               /* the GPT's units (the header's "model gpt ... layers U"),
                                0 for the MLP */
} given;

static void parse_name(const char *name, int nranks, given *g)
{
    char sched[16] = "";
    g->stages = 0;
    g->schedule = -1;
    g->micro = 0;
    g->v = 1;
    size_t k = strcspn(name, "-.");
    if (!strncmp(name, "dp-threads", 10) && (name[10] == '-' || name[10] == '.'))
        k = 10;                              /* the one mode with '-' in its name */
    REQUIRE(k > 0 && k < sizeof g->mode, "%s: no mode in the name", name);
    memcpy(g->mode, name, k);
    g->mode[k] = '\0';
    if (!strncmp(name, "pp-zb-h1-", 9)) {     /* the one schedule with '-' in its name */
        REQUIRE(sscanf(name + 9, "%d", &g->micro) == 1, "%s: pp-zb-h1-M.trace", name);
        snprintf(sched, sizeof sched, "zb-h1");
        g->stages = nranks;
    } else if (!strcmp(g->mode, "pp")) {
        REQUIRE(sscanf(name, "pp-%15[^-]-%d", sched, &g->micro) == 2,
                "%s: a pp trace is named pp-SCHEDULE-M.trace", name);
        g->stages = nranks;
    } else if (!strncmp(name, "hybrid-pp", 9)) {
        REQUIRE(sscanf(name, "hybrid-pp%d-%15[^-]-%d", &g->stages, sched, &g->micro) == 3 &&
                g->stages >= 1 && nranks % g->stages == 0,
                "%s: a pipelined hybrid trace is named hybrid-ppP-SCHEDULE-M.trace", name);
    }
    if (g->stages > 0) {
        g->schedule = dv_train_algo_index(sched) < DV_TRAIN_DDP ? dv_train_algo_index(sched) : -1;
        REQUIRE(g->schedule >= 0 && g->micro >= 1 && g->micro <= 64, "%s: schedule '%s', "
                "%d micro-batches", name, sched, g->micro);
    }
}

static int is_compute(const dt_event *e)
{
    return e->kind == DT_EV_COMPUTE && !strcmp(e->coll, "train");
}

/* The micro-batch an event records (lo..hi = m..m+1), or -1. */
static int micro_of(const dt_event *e)
{
    return e->hi == e->lo + 1 && e->lo >= 0 && e->lo < 1000000 ? (int)e->lo : -1;
}

/* Layer l as labels name it: "L2"; the GPT's unit: "emb" (0), "b0" .. (its blocks),
 * "head" (the last) */
static void layer_label(const given *g, int l, char *out, size_t len)
{
    if (g->units <= 0)
        snprintf(out, len, "L%d", l);
    else
        snprintf(out, len, l == 0 ? "emb" : l == g->units - 1 ? "head" : "b%d", l - 1);
}

/* The comm block a mark names ("bucket 2", "AG L1", the GPT's "AG b0"), or 0 for a mark
 * that names none. */
static int span_label(const given *g, const dt_event *e, char *label, size_t len)
{
    static const char *const map[][3] = {
        { "ddp", "bucket", "bucket" }, { "fsdp", "gather", "AG" },
        { "fsdp", "reduce-scatter", "RS" }, { "fsdp", "free", "free" },
        { "tp", "f", "f" }, { "tp", "g", "g" }, { "tp", "ag", "ag" }, { "tp", "rs", "rs" },
    };
    if (e->kind != DT_EV_MARK)
        return 0;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(e->coll, map[i][0]) && !strcmp(e->phase, map[i][1])) {
            char ly[16];
            if (i == 0)
                snprintf(ly, sizeof ly, "%d", e->chunk);
            else
                layer_label(g, e->chunk, ly, sizeof ly);
            snprintf(label, len, "%s %s", map[i][2], ly);
            return 1;
        }
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The seconds [t0, t1] shares with rank's compute blocks (check_compute holds them to
 * the compute events). */
static double overlap_compute(const dv_tt *tt, int rank, double t0, double t1)
{
    double sum = 0;
    for (int j = 0; j < tt->nblocks; j++) {
        const dv_tt_block *b = &tt->blocks[j];
        if (b->rank == rank && b->lane == 0)
            sum += fmax(0, fmin(t1, b->t1) - fmax(t0, b->t0));
    }
    return sum;
}

/* The label and kind of the block that shows compute event e: "F3" in a pipeline (pp),
 * "F2 L1" with micro-batches elsewhere (accum: ddp's --accum), else "F L1"; the GPT's
 * units by name and part ("F b1 attn", "B head"); prefix: the label need only start
 * with *label ("opt", "loss"; "" for any). */
/* The pipeline operation that holds pp's compute event e: the mark (coll pipeline) of
 * its rank and step, begun last at or before e, that lasts past e's begin; NULL none. */
static const dt_event *op_of(const dt_trace *t, const dt_event *e)
{
    const dt_event *op = NULL;
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *x = &t->ev[i];
        if (x->rank == e->rank && x->kind == DT_EV_MARK && !strcmp(x->coll, "pipeline") &&
            x->step == e->step && x->t0 <= e->t0 && e->t0 <= x->t1 &&
            (op == NULL || x->t0 >= op->t0))
            op = x;
    }
    return op;
}

/* What pp's operation op (a mark; NULL none) makes of a forward or backward's label
 * "F3": zb-h1's W ("weights", whose compute says "backward") "W3", and with v > 1
 * chunks a stage the chunk's letter, "F3b" (chunk 1: virtual stage P + s). */
static void op_want(const given *g, const dt_event *op, char *label, size_t len,
                    dv_tt_kind *kind)
{
    if (op == NULL)
        return;
    if (!strcmp(op->phase, "weights")) {
        label[0] = 'W';
        *kind = DV_TT_WEIGHTS;
    }
    if (g->v > 1)
        snprintf(label + strlen(label), len - strlen(label), "%c",
                 'a' + (int)(op->chunk / g->stages));
}

static void compute_want(const given *g, const dt_event *e, int pp, int accum, char *label,
                         size_t len, dv_tt_kind *kind, int *prefix)
{
    *prefix = 0;
    *kind = DV_TT_OTHER;
    label[0] = '\0';
    int f = !strncmp(e->phase, "forward", 7), b = !strncmp(e->phase, "backward", 8);
    if (f || b) {
        const char *part = e->phase + (f ? 7 : 8);
        char c = f ? 'F' : 'B', ly[40];
        REQUIRE(!*part || (g->units > 0 && part[0] == '-' && (!strcmp(part + 1, "attn") ||
                !strcmp(part + 1, "mlp") || !strcmp(part + 1, "recompute") ||
                !strcmp(part + 1, "moe"))), "compute phase '%s'%s", e->phase,
                g->units > 0 ? "" : " in an MLP's trace");
        *kind = f ? DV_TT_FORWARD : DV_TT_BACKWARD;
        layer_label(g, e->chunk, ly, sizeof ly);
        if (*part)
            snprintf(ly + strlen(ly), sizeof ly - strlen(ly), " %s", part + 1);
        if (pp)
            snprintf(label, len, "%c%d", c, micro_of(e));   /* (op_want may add more) */
        else if (accum && micro_of(e) >= 0)
            snprintf(label, len, "%c%d %s", c, micro_of(e), ly);
        else
            snprintf(label, len, "%c %s", c, ly);
        return;
    }
    *prefix = 1;
    if (!strcmp(e->phase, "optimizer")) {
        *kind = DV_TT_OPTIMIZER;
        snprintf(label, len, "opt");
    } else if (!strcmp(e->phase, "loss")) {
        snprintf(label, len, "loss");
    }                                 /* "sum" and others: any label */
}

/* Every compute event lies in exactly one compute block of its rank, which shows it
 * (its label, kind, step; pp: its micro-batch, else its layer), and a block spans its
 * events: one event, or in a pipeline the events of one operation (a stage's layers of
 * F3, in a row, with nothing else between them on that rank). */
static void check_compute(const dt_trace *t, const dv_tt *tt, const given *g,
                          const char *name)
{
    int pp = g->stages > 0, accum = 0, micro0 = -1;
    char *in = calloc(t->n + 1, 1);
    REQUIRE(in, "out of memory");
    for (size_t i = 0; i < t->n; i++) {     /* more than one micro-batch in the run */
        int mi = is_compute(&t->ev[i]) ? micro_of(&t->ev[i]) : -1;
        accum |= mi >= 0 && micro0 >= 0 && mi != micro0;
        micro0 = mi >= 0 && micro0 < 0 ? mi : micro0;
    }
    for (int j = 0; j < tt->nblocks; j++) {
        const dv_tt_block *b = &tt->blocks[j];
        if (b->lane != 0)
            continue;
        double lo = INFINITY, hi = -INFINITY;
        int held = 0;
        for (size_t i = 0; i < t->n; i++) {
            const dt_event *e = &t->ev[i];
            if (!is_compute(e) || e->rank != b->rank || e->t0 < b->t0 - EPS ||
                e->t1 > b->t1 + EPS)
                continue;
            char want[24];
            dv_tt_kind kind;
            int prefix;
            compute_want(g, e, pp, accum, want, sizeof want, &kind, &prefix);
            if (pp && !prefix)
                op_want(g, op_of(t, e), want, sizeof want, &kind);
            REQUIRE(!pp || kind == DV_TT_OTHER || kind == DV_TT_OPTIMIZER || micro_of(e) >= 0,
                    "%s: a pp compute event without a micro-batch", name);
            int named = prefix ? !strncmp(b->label, want, strlen(want))
                               : !strcmp(b->label, want);
            int ok = b->step == e->step && b->kind == kind && named;
            if (ok && pp && (kind == DV_TT_FORWARD || kind == DV_TT_BACKWARD ||
                             kind == DV_TT_WEIGHTS))
                ok = b->micro == micro_of(e);
            if (ok && !pp && !prefix)
                ok = b->layer == e->chunk;
            REQUIRE(ok, "%s: rank %d's compute event %s (step %d, layer %d, micro %d) "
                    "[%.9f, %.9f] lies in block %d '%s' (kind %d, step %d, micro %d, layer "
                    "%d), want '%s' (kind %d)", name, e->rank, e->phase, e->step, e->chunk,
                    micro_of(e), e->t0, e->t1, j, b->label, b->kind, b->step, b->micro,
                    b->layer, want, kind);
            REQUIRE(!in[i]++, "%s: rank %d's compute event %s [%.9f, %.9f] lies in two "
                    "compute blocks", name, e->rank, e->phase, e->t0, e->t1);
            lo = fmin(lo, e->t0);
            hi = fmax(hi, e->t1);
            held++;
        }
        REQUIRE((held == 1 || (pp && held > 1)) && near(lo, b->t0) && near(hi, b->t1),
                "%s: compute block %d '%s' of rank %d [%.9f, %.9f] holds %d compute events "
                "(spanning [%.9f, %.9f]), not one (pp: one operation's) at its times", name, j,
                b->label, b->rank, b->t0, b->t1, held, lo, hi);
        for (size_t i = 0; pp && held > 1 && i < t->n; i++) {  /* nothing else between */
            const dt_event *e = &t->ev[i];
            REQUIRE(e->rank != b->rank || is_compute(e) || e->t0 <= b->t0 + EPS ||
                    e->t0 >= b->t1 - EPS || (e->kind == DT_EV_MARK && e->t1 <= e->t0),
                    "%s: compute block %d '%s' of rank %d [%.9f, %.9f] spans a %s event of "
                    "%s at %.9f", name, j, b->label, b->rank, b->t0, b->t1,
                    dt_event_kind_name(e->kind), e->coll, e->t0);
        }
    }
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        REQUIRE(!is_compute(e) || in[i], "%s: rank %d's compute event %s (step %d, layer %d, "
                "micro %d) [%.9f, %.9f] is in no compute block", name, e->rank, e->phase,
                e->step, e->chunk, micro_of(e), e->t0, e->t1);
    }
    free(in);
}

/* Every span mark of ddp, fsdp and tp is exactly one comm block of its rank, with its
 * times and step; returns how many marks of each kind: [0] buckets (distinct), [1] AG,
 * [2] RS, [3] f or g. */
static void check_marks(const dt_trace *t, const dv_tt *tt, const given *g, const char *name,
                        int *count)
{
    char *used = calloc((size_t)tt->nblocks + 1, 1);
    int buckets[64] = { 0 };
    REQUIRE(used, "out of memory");
    memset(count, 0, 4 * sizeof *count);
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        char want[24];
        if (!span_label(g, e, want, sizeof want))
            continue;
        int found = -1;
        for (int j = 0; j < tt->nblocks && found < 0; j++) {
            const dv_tt_block *b = &tt->blocks[j];
            if (!used[j] && b->rank == e->rank && b->lane == 1 && !strcmp(b->label, want) &&
                b->step == e->step && near(b->t0, e->t0) && near(b->t1, e->t1))
                found = j;
        }
        REQUIRE(found >= 0, "%s: rank %d's mark %s %s (chunk %d, step %d) [%.9f, %.9f] has no "
                "comm block '%s' at its times", name, e->rank, e->coll, e->phase, e->chunk,
                e->step, e->t0, e->t1, want);
        used[found] = 1;
        if (!strcmp(e->coll, "ddp") && e->chunk >= 0 && e->chunk < 64)
            buckets[e->chunk] = 1;
        count[1] += !strcmp(e->phase, "gather");
        count[2] += !strcmp(e->phase, "reduce-scatter");
        count[3] += !strcmp(e->coll, "tp");
    }
    for (int b = 0; b < 64; b++)
        count[0] += buckets[b];
    /* comm that no mark names: the step its rank had begun by its start (the last
     * "train step" mark of that rank at or before it) */
    for (int j = 0; j < tt->nblocks; j++) {
        const dv_tt_block *b = &tt->blocks[j];
        if (b->lane != 1 || used[j])
            continue;
        int want = -1;
        for (size_t i = 0; i < t->n; i++) {
            const dt_event *e = &t->ev[i];
            if (e->kind == DT_EV_MARK && e->rank == b->rank && !strcmp(e->coll, "train") &&
                !strcmp(e->phase, "step") && e->t0 <= b->t0)
                want = e->step;       /* a rank's events are in time order */
        }
        REQUIRE(want < 0 || b->step == want, "%s: rank %d's comm block %d '%s' at %.9f is "
                "in step %d; its rank began step %d before it", name, b->rank, j, b->label,
                b->t0, b->step, want);
    }
    free(used);
}

/* Every pp message (a send matched with its receive, in order per pair of ranks) is one
 * arrow from the sender to the receiver; and no other arrows. */
static void check_arrows(const dt_trace *t, const dv_tt *tt, const char *name)
{
    int N = t->nranks, pairs = 0;
    char *used = calloc((size_t)tt->narrows + 1, 1);
    REQUIRE(used, "out of memory");
    for (int a = 0; a < N; a++)
        for (int b = 0; b < N; b++) {
            size_t si = 0, ri = 0;
            for (;;) {
                const dt_event *s = NULL, *r = NULL;
                for (; si < t->n && !s; si++)
                    if (t->ev[si].rank == a && t->ev[si].kind == DT_EV_SEND &&
                        t->ev[si].peer == b && !strcmp(t->ev[si].coll, "pipeline"))
                        s = &t->ev[si];
                for (; ri < t->n && !r; ri++)
                    if (t->ev[ri].rank == b && t->ev[ri].kind == DT_EV_RECV &&
                        t->ev[ri].peer == a && !strcmp(t->ev[ri].coll, "pipeline"))
                        r = &t->ev[ri];
                if (!s || !r) {
                    REQUIRE(!s && !r, "%s: pp messages %d -> %d: a %s without its match",
                            name, a, b, s ? "send" : "receive");
                    break;
                }
                pairs++;
                int found = -1;
                for (int k = 0; k < tt->narrows && found < 0; k++) {
                    const dv_tt_arrow *w = &tt->arrows[k];
                    if (!used[k] && w->src == a && w->dst == b && near(w->t0, s->t0) &&
                        near(w->t1, r->t1))
                        found = k;
                }
                REQUIRE(found >= 0, "%s: the message %d -> %d sent at %.9f, received by "
                        "%.9f, has no arrow", name, a, b, s->t0, r->t1);
                const dv_tt_arrow *w = &tt->arrows[found];
                /* what the send says it carries (interleaved's activations go from the
                 * last stage round to the first); an exchange: by direction */
                char what = !strcmp(s->phase, "activations") ? 'A'
                          : !strcmp(s->phase, "gradients") ? 'G' : b > a ? 'A' : 'G';
                REQUIRE(w->what == what && w->micro == s->chunk &&
                        w->step == s->step, "%s: arrow %d -> %d at %.9f: '%c' micro %d step "
                        "%d, the send says micro %d step %d", name, a, b, s->t0, w->what,
                        w->micro, w->step, s->chunk, s->step);
                used[found] = 1;
            }
        }
    REQUIRE(tt->narrows == pairs, "%s: %d arrows, %d pp messages", name, tt->narrows, pairs);
    free(used);
}

/* Every message (send or receive, any coll) lies in a comm block of its rank; the
 * parameter server's in one named by its phase ("weights", "gradients"), pp's in one
 * naming activations or gradients ("act 3", "grad 2 + act 4"). */
static void check_comm(const dt_trace *t, const dv_tt *tt, const char *name)
{
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        if (e->kind != DT_EV_SEND && e->kind != DT_EV_RECV)
            continue;
        int dp = !strcmp(e->coll, "dp"), pipe = !strcmp(e->coll, "pipeline"), found = -1;
        for (int j = 0; j < tt->nblocks && found < 0; j++) {
            const dv_tt_block *b = &tt->blocks[j];
            if (b->rank != e->rank || b->lane != 1 || b->t0 > e->t0 + EPS ||
                b->t1 < e->t1 - EPS)
                continue;
            if (dp && strcmp(b->label, e->phase) != 0)
                continue;
            if (pipe && strncmp(b->label, "act", 3) != 0 && strncmp(b->label, "grad", 4) != 0)
                continue;
            found = j;
        }
        REQUIRE(found >= 0, "%s: rank %d's %s of %s %s [%.9f, %.9f] is in no comm block of "
                "its rank%s", name, e->rank, dt_event_kind_name(e->kind), e->coll, e->phase,
                e->t0, e->t1, dp || pipe ? " named for it" : "");
    }
}

/* The pipeline stage of rank: the chunk of its "pipeline" forward and backward marks
 * (trace.h), which must agree; -1 without any. */
static int stage_of(const dt_trace *t, int rank, int P, const char *name)
{
    int s = -1;
    for (size_t i = 0; i < t->n; i++) {
        const dt_event *e = &t->ev[i];
        if (e->rank != rank || e->kind != DT_EV_MARK || strcmp(e->coll, "pipeline") != 0)
            continue;
        REQUIRE(s < 0 || e->chunk % P == s, "%s: rank %d's pipeline marks name stages %d "
                "and %d (virtual stages mod %d)", name, rank, s, (int)(e->chunk % P), P);
        s = (int)(e->chunk % P);
    }
    return s;
}

/* Pipelines (pp, hybrid with --pp): each rank's operations in each step in dt_pp_order's
 * order for its stage; the stash at every compute block's middle counted from the compute
 * events, peaking at dt_pp_peak_stash; the bubble the share of the ranks' time in the step
 * not computing (pp: P ranks, one per stage). */
static void check_pp(const dt_trace *t, const dv_tt *tt, const given *g, const char *name)
{
    int S = g->schedule, P = g->stages, M = g->micro, v = g->v, R = t->nranks;
    int n = dt_pp_nops(S, P, M, v);
    REQUIRE(tt->schedule == S && tt->stages == P && tt->micro == M && tt->v == v,
            "%s: schedule %d stages %d micro %d v %d, train was given %s, %d, %d, %d", name,
            tt->schedule, tt->stages, tt->micro, tt->v, SCHED[S], P, M, v);
    dt_pp_op *ops = malloc((size_t)(n > 0 ? n : 1) * sizeof *ops);
    const dt_event **op = malloc((t->n + 1) * sizeof *op);
    REQUIRE(ops && op && n > 0, "out of memory, or dt_pp_nops %d", n);
    for (size_t i = 0; i < t->n; i++)       /* each compute event's operation */
        op[i] = is_compute(&t->ev[i]) ? op_of(t, &t->ev[i]) : NULL;
    for (int si = 0; si < tt->nsteps; si++) {
        int step = tt->steps[si].step;
        double c0 = INFINITY, c1 = -INFINITY;   /* flush to flush: the step's compute */
        for (size_t i = 0; i < t->n; i++)
            if (is_compute(&t->ev[i]) && t->ev[i].step == step) {
                c0 = fmin(c0, t->ev[i].t0);
                c1 = fmax(c1, t->ev[i].t1);
            }
        double R_span = R * (c1 - c0);
        REQUIRE(fabs(tt->steps[si].bubble - (1 - tt->steps[si].compute / R_span)) <= 1e-6 &&
                tt->steps[si].bubble >= 0 && tt->steps[si].bubble <= 1,
                "%s: step %d: bubble %g, 1 - compute / (%d ranks x the span of its compute) "
                "= %g", name, step, tt->steps[si].bubble, R, 1 - tt->steps[si].compute / R_span);
        double model = strcmp(g->mode, "pp") == 0 ? dt_pp_bubble_v(S, P, M, v, 1, 1)
                                                  : dt_pp_bubble(P, M);
        REQUIRE(fabs(tt->steps[si].bubble_model - model) <= EPS,
                "%s: step %d: bubble_model %g, lib/schedule's %g", name, step,
                tt->steps[si].bubble_model, model);
        int most = 0;
        for (int r = 0; r < R; r++) {
            int s = stage_of(t, r, P, name);
            REQUIRE(s >= 0 && s < P && (strcmp(g->mode, "pp") != 0 || s == r),
                    "%s: rank %d is stage %d of %d", name, r, s, P);
            dt_pp_order_v(S, P, M, v, s, ops);
            /* an operation that computes nothing has no block: zb-h1's B on stage 0,
             * when its one layer has no input whose gradient it would compute */
            int kept = 0;
            for (int o = 0; o < n; o++) {
                int has = 0;
                for (size_t i = 0; i < t->n && !has; i++)
                    has = op[i] != NULL && t->ev[i].rank == r && t->ev[i].step == step &&
                          micro_of(op[i]) == ops[o].micro && op[i]->chunk / P == ops[o].chunk &&
                          toupper((unsigned char)op[i]->phase[0]) == ops[o].kind;
                if (has)
                    ops[kept++] = ops[o];
            }
            int k = 0, peak = 0;
            char last[24] = "";
            for (int j = 0; j < tt->nblocks; j++) {
                const dv_tt_block *b = &tt->blocks[j];
                if (b->rank != r || b->lane != 0 || b->step != step ||
                    (b->kind != DV_TT_FORWARD && b->kind != DV_TT_BACKWARD &&
                     b->kind != DV_TT_WEIGHTS))
                    continue;
                if (strcmp(b->label, last) != 0) {      /* a new operation */
                    char want[24];
                    REQUIRE(k < kept, "%s: step %d rank %d: more than %d operations ('%s')",
                            name, step, r, kept, b->label);
                    snprintf(want, sizeof want, "%c%d", ops[k].kind, ops[k].micro);
                    if (v > 1)
                        snprintf(want + strlen(want), sizeof want - strlen(want), "%c",
                                 'a' + ops[k].chunk);
                    REQUIRE(!strcmp(b->label, want) && b->chunk == (v > 1 ? ops[k].chunk : -1),
                            "%s: step %d rank %d (stage %d): operation %d is '%s' (chunk %d), "
                            "dt_pp_order_v (%s) says '%s'", name, step, r, s, k, b->label,
                            b->chunk, SCHED[S], want);
                    snprintf(last, sizeof last, "%s", b->label);
                    k++;
                }
                /* the stash at the block's middle, from this stage's compute events and
                 * their operations: each (micro-batch, chunk) from its forward's begin
                 * to the end of its backward (zb-h1: its W) */
                double c = (b->t0 + b->t1) / 2;
                int stash = 0;
                for (int x = 0; x < M * v; x++) {
                    double f0 = INFINITY, b1 = -INFINITY;
                    for (size_t i = 0; i < t->n; i++) {
                        const dt_event *e = &t->ev[i];
                        if (e->rank != r || !is_compute(e) || e->step != step ||
                            micro_of(e) != x / v || op[i] == NULL || op[i]->chunk / P != x % v)
                            continue;
                        if (op[i]->phase[0] == 'f')
                            f0 = fmin(f0, e->t0);
                        else
                            b1 = fmax(b1, e->t1);
                    }
                    stash += (f0 <= c) - (b1 > -INFINITY && b1 <= c);
                }
                peak = stash > peak ? stash : peak;
                int got = dv_tt_stash(tt, r, c);
                REQUIRE(got == stash, "%s: step %d rank %d at %.9f (in '%s'): stash %d, the "
                        "events say %d", name, step, r, c, b->label, got, stash);
            }
            REQUIRE(k == kept && kept >= n - M, "%s: step %d rank %d: %d operations, "
                    "dt_pp_order_v %d, %d of them computing", name, step, r, k, n, kept);
            REQUIRE(peak == dt_pp_peak_stash_v(S, P, M, v, s), "%s: step %d rank %d "
                    "(stage %d): stash peaks at %d, dt_pp_peak_stash_v %d", name, step, r, s,
                    peak, dt_pp_peak_stash_v(S, P, M, v, s));
            most = peak > most ? peak : most;
        }
        if (strcmp(g->mode, "pp") == 0) {        /* the step's peak and messages */
            int msgs = 0;
            for (int s = 0; s < P; s++)
                msgs += dt_pp_messages_v(S, P, M, v, s);
            REQUIRE(tt->steps[si].stash == most && tt->steps[si].stash_model ==
                    dt_pp_peak_stash_v(S, P, M, v, 0) && tt->steps[si].messages == msgs &&
                    tt->steps[si].messages_model == msgs, "%s: step %d: stash %d (model %d), "
                    "messages %d (model %d); the stages peak at %d and send %d", name, step,
                    tt->steps[si].stash, tt->steps[si].stash_model, tt->steps[si].messages,
                    tt->steps[si].messages_model, most, msgs);
        }
    }
    free(ops);
    free(op);
}

/* Steps: those of the compute events, in order; their measures summed from the trace's
 * compute events and the timetable's comm blocks. */
static void check_steps(const dt_trace *t, const dv_tt *tt, const char *name)
{
    int *st = malloc((t->n + 1) * sizeof *st), ns = 0;
    REQUIRE(st, "out of memory");
    for (size_t i = 0; i < t->n; i++)
        if (is_compute(&t->ev[i]))
            st[ns++] = t->ev[i].step;
    qsort(st, (size_t)ns, sizeof *st, cmp_int);
    int k = 0;
    for (int i = 0; i < ns; i++)
        if (i == 0 || st[i] != st[i - 1])
            st[k++] = st[i];
    REQUIRE(tt->nsteps == k, "%s: %d steps, the compute events have %d", name, tt->nsteps, k);
    for (int s = 0; s < k; s++) {
        const dv_tt_step *S = &tt->steps[s];
        REQUIRE(S->step == st[s], "%s: steps[%d] is step %d, want %d", name, s, S->step, st[s]);
        double compute = 0, first = INFINITY, lastend = -INFINITY, comm = 0, hidden = 0,
               waiting = 0;
        int ne = 0;
        for (size_t i = 0; i < t->n; i++) {
            const dt_event *e = &t->ev[i];
            if (is_compute(e) && e->step == S->step) {
                compute += e->t1 - e->t0;
                first = fmin(first, e->t0);
                lastend = fmax(lastend, e->t1);
                ne++;
            }
        }
        double blocks = 0, gaps = 0;    /* the compute blocks: those events, and the
                                         * gaps between a pp operation's layers */
        for (int j = 0; j < tt->nblocks; j++) {
            const dv_tt_block *b = &tt->blocks[j];
            if (b->step != S->step)
                continue;
            if (b->lane == 0) {
                double held = 0;
                for (size_t i = 0; i < t->n; i++) {
                    const dt_event *e = &t->ev[i];
                    if (is_compute(e) && e->rank == b->rank && e->t0 >= b->t0 - EPS &&
                        e->t1 <= b->t1 + EPS)
                        held += e->t1 - e->t0;
                }
                blocks += b->t1 - b->t0;
                gaps += (b->t1 - b->t0) - held;
                continue;
            }
            comm += b->t1 - b->t0;
            waiting += b->wait;
            hidden += overlap_compute(tt, b->rank, b->t0, b->t1);
        }
        double tol = 1e-9 * (ne + tt->nblocks + 1);
        REQUIRE(fabs(S->compute - blocks) <= tol && fabs(S->compute - compute - gaps) <= tol,
                "%s: step %d: compute %.9f s, its compute blocks last %.9f, its compute events "
                "%.9f", name, S->step, S->compute, blocks, compute);
        REQUIRE(S->t0 <= first + EPS && S->t1 >= lastend - EPS, "%s: step %d at [%.9f, %.9f] "
                "leaves out compute in [%.9f, %.9f]", name, S->step, S->t0, S->t1, first,
                lastend);
        REQUIRE(fabs(S->comm - comm) <= tol && fabs(S->hidden - hidden) <= tol &&
                fabs(S->waiting - waiting) <= tol, "%s: step %d: comm %.9f hidden %.9f waiting "
                "%.9f; its comm blocks say %.9f, %.9f (overlapping the compute events), %.9f",
                name, S->step, S->comm, S->hidden, S->waiting, comm, hidden, waiting);
        if (comm > 0)
            REQUIRE(fabs(S->hidden_share - hidden / comm) <= 1e-6, "%s: step %d: hidden_share "
                    "%g, hidden / comm = %g", name, S->step, S->hidden_share, hidden / comm);
        else
            REQUIRE(S->hidden_share == -1, "%s: step %d: no comm, hidden_share %g", name,
                    S->step, S->hidden_share);
        check_describe(tt, s, name);
        /* dv_tt_step_at: inside a step, a step whose span holds the time */
        double mid = (first + lastend) / 2;
        int got = dv_tt_step_at(tt, mid);
        REQUIRE(got >= 0 && got < tt->nsteps && tt->steps[got].t0 <= mid &&
                mid <= tt->steps[got].t1, "%s: dv_tt_step_at(%.9f) = %d", name, mid, got);
    }
    REQUIRE(dv_tt_step_at(tt, tt->t_begin - 1e3) == 0 &&
            dv_tt_step_at(tt, tt->t_end + 1e3) == tt->nsteps - 1,
            "%s: dv_tt_step_at before and after: %d, %d", name,
            dv_tt_step_at(tt, tt->t_begin - 1e3), dv_tt_step_at(tt, tt->t_end + 1e3));
    for (int j = 0; j < tt->nblocks; j++) {       /* dv_tt_block_at in every block */
        const dv_tt_block *b = &tt->blocks[j];
        if (b->t1 <= b->t0)
            continue;
        double c = (b->t0 + b->t1) / 2;
        int got = dv_tt_block_at(tt, b->row, b->lane, c);
        REQUIRE(got >= 0 && got < tt->nblocks && tt->blocks[got].rank == b->rank &&
                tt->blocks[got].lane == b->lane && tt->blocks[got].t0 <= c &&
                c <= tt->blocks[got].t1, "%s: dv_tt_block_at(rank %d, lane %d, %.9f) = %d, "
                "inside block %d '%s'", name, b->rank, b->lane, c, got, j, b->label);
    }
    free(st);
}

/* Draws each step of tt headless: a picture, no crash. */
static void draw_steps(const dv_model *m, const dv_tt *tt, const char *name)
{
    for (int s = 0; s < tt->nsteps; s++) {
        dv_view v = { .tt = tt, .tt_step = s, .t0 = tt->steps[s].t0,
                      .t1 = tt->steps[s].t1 > tt->steps[s].t0 ? tt->steps[s].t1
                                                              : tt->steps[s].t0 + 1,
                      .cursor = (tt->steps[s].t0 + tt->steps[s].t1) / 2, .call = -1 };
        char err[256];
        SDL_Surface *p = dv_render_surface(m, &v, 900, 560, err, sizeof err);
        REQUIRE(p != NULL, "%s: step %d: %s", name, tt->steps[s].step, err);
        SDL_FreeSurface(p);
    }
}

/* The same trace without its "# train" line (as traces were before it): the mode, the
 * pipeline's P and M (the schedule, or -1) come from the events, and the timetable is
 * the same block for block. */
static void check_headerless(const char *path, const dv_tt *tt, const char *file)
{
    dt_trace t;
    dv_model m;
    dv_tt u;
    char err[512];
    REQUIRE(dt_trace_read(path, &t, err, sizeof err) == 0, "%s", err);
    t.train[0] = '\0';
    REQUIRE(dv_tt_is_training(&t), "%s without '# train': not a training trace", file);
    REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s: %s", file, err);
    REQUIRE(dv_tt_build(&u, &m, err, sizeof err) == 0, "%s without '# train': %s", file, err);
    REQUIRE(!strcmp(u.mode, tt->mode) && u.settings[0] == '\0' && u.stages == tt->stages &&
            u.micro == tt->micro && (u.schedule == tt->schedule || u.schedule == -1),
            "%s without '# train': mode '%s' settings '%s' stages %d micro %d schedule %d; "
            "with it '%s', %d, %d, %d", file, u.mode, u.settings, u.stages, u.micro,
            u.schedule, tt->mode, tt->stages, tt->micro, tt->schedule);
    REQUIRE(u.nblocks == tt->nblocks && u.narrows == tt->narrows && u.nsteps == tt->nsteps,
            "%s without '# train': %d blocks, %d arrows, %d steps; with it %d, %d, %d", file,
            u.nblocks, u.narrows, u.nsteps, tt->nblocks, tt->narrows, tt->nsteps);
    for (int i = 0; i < u.nblocks; i++)
        REQUIRE(!strcmp(u.blocks[i].label, tt->blocks[i].label) &&
                u.blocks[i].t0 == tt->blocks[i].t0 && u.blocks[i].t1 == tt->blocks[i].t1 &&
                u.blocks[i].step == tt->blocks[i].step, "%s without '# train': block %d is "
                "'%s' [%.9f, %.9f] step %d; with it '%s' [%.9f, %.9f] step %d", file, i,
                u.blocks[i].label, u.blocks[i].t0, u.blocks[i].t1, u.blocks[i].step,
                tt->blocks[i].label, tt->blocks[i].t0, tt->blocks[i].t1, tt->blocks[i].step);
    dv_tt_free(&u);
    dv_model_free(&m);
}

static void check_trace(const char *dir, const char *file)
{
    char path[4096], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    given g;
    dt_trace t, mine;                       /* the model takes t; mine is read here */
    REQUIRE(dt_trace_read(path, &t, err, sizeof err) == 0, "%s", err);
    REQUIRE(dt_trace_read(path, &mine, err, sizeof err) == 0, "%s", err);
    parse_name(file, mine.nranks, &g);
    const char *virt = strstr(mine.train, " virtual ");
    g.v = g.schedule == 2 && virt ? atoi(virt + 9) : 1;
    REQUIRE(g.schedule != 2 || g.v >= 1, "%s: interleaved without 'virtual v'", file);
    const char *gpt = strstr(mine.train, " model gpt "), *units = strstr(mine.train, " layers ");
    g.units = gpt && units ? atoi(units + 8) : 0;
    REQUIRE(!gpt || g.units >= 3, "%s: a GPT of %d units", file, g.units);
    char head[32];
    snprintf(head, sizeof head, "mode %s", g.mode);
    size_t hl = strlen(head);
    REQUIRE(!strncmp(mine.train, head, hl) && (mine.train[hl] == ' ' || !mine.train[hl]),
            "%s: the header says '# train %s', train was given --mode %s", file, mine.train,
            g.mode);
    REQUIRE(dv_tt_is_training(&t), "%s: dv_tt_is_training says no", file);
    dv_model m;
    dv_tt tt;
    REQUIRE(dv_model_build(&m, &t, err, sizeof err) == 0, "%s: %s", file, err);
    REQUIRE(dv_tt_build(&tt, &m, err, sizeof err) == 0, "%s: dv_tt_build: %s", file, err);
    REQUIRE(!strcmp(tt.mode, g.mode), "%s: mode '%s', train was given --mode %s", file, tt.mode,
            g.mode);
    REQUIRE(tt.nranks == mine.nranks, "%s: %d ranks, the trace %d", file, tt.nranks,
            mine.nranks);
    const char *rest = mine.train + hl + (mine.train[hl] == ' ');
    REQUIRE(!strcmp(tt.settings, rest), "%s: settings '%s', the header's rest '%s'", file,
            tt.settings, rest);
    check_contract(&tt, file);
    REQUIRE(tt.disagree[0] == '\0', "%s: the header and the events disagree: %s", file,
            tt.disagree);
    check_compute(&mine, &tt, &g, file);
    int count[4];
    check_marks(&mine, &tt, &g, file, count);
    check_arrows(&mine, &tt, file);
    check_comm(&mine, &tt, file);
    check_steps(&mine, &tt, file);
    for (int j = 0; j < tt.nblocks; j++) {     /* a block's call is one its rank is in */
        const dv_tt_block *b = &tt.blocks[j];
        REQUIRE(b->call < 0 || (b->call < m.ncalls && (m.calls[b->call].members >> b->rank & 1)),
                "%s: rank %d's block '%s' picks call %d, whose communicator it is not in",
                file, b->rank, b->label, b->call);
    }
    /* the trace holds what the test needs (run.sh chose the settings for it) */
    if (g.stages > 0) {
        check_pp(&mine, &tt, &g, file);
        REQUIRE(tt.narrows > 0 || g.stages == 1, "%s: no arrows", file);
    } else {
        for (int s = 0; s < tt.nsteps; s++)
            REQUIRE(tt.steps[s].bubble == -1 && tt.steps[s].bubble_model == -1,
                    "%s: step %d: bubble %g, model %g outside pp", file, tt.steps[s].step,
                    tt.steps[s].bubble, tt.steps[s].bubble_model);
        for (int r = 0; r < tt.nranks; r++)
            REQUIRE(dv_tt_stash(&tt, r, (tt.t_begin + tt.t_end) / 2) == 0,
                    "%s: a stash outside pp", file);
    }
    if (!strcmp(g.mode, "ddp"))
        REQUIRE(count[0] >= 2, "%s: %d buckets: give train a smaller --bucket-kb", file,
                count[0]);
    if (!strcmp(g.mode, "fsdp"))
        REQUIRE(count[1] > 0 && count[2] > 0, "%s: %d gathers, %d reduce-scatters", file,
                count[1], count[2]);
    const char *tps = strstr(mine.train, " tp ");          /* hybrid's tp T */
    if (!strcmp(g.mode, "tp") || (!strcmp(g.mode, "hybrid") && g.stages == 0 &&
                                  (!tps || atoi(tps + 4) > 1)))
        REQUIRE(count[3] > 0, "%s: no f or g marks", file);
    if (!strcmp(g.mode, "hybrid"))
        REQUIRE(count[0] > 0, "%s: no ddp buckets (hybrid's data-parallel part)", file);
    /* the GPT's blocks by name and part (check_compute held every label to its event;
     * here: that the parts are there), fsdp's gathers by block, pp's tied wte */
    int fm = !strcmp(g.mode, "moe");
    if (g.units > 0 && g.stages == 0) {
        static const char *const want[] = { "F b0 attn", "F b0 mlp", "B b0 mlp", "B b0 attn",
                                            "F b1 moe", "B b1 moe" };
        for (int k = 0; k < (fm ? 6 : 4); k++)
            REQUIRE(find_compute(&tt, 0, want[k]) >= 0, "%s: rank 0 has no block '%s'", file,
                    want[k]);
        REQUIRE(!strstr(mine.train, " recompute full") ||
                find_compute(&tt, 0, "B b0 recompute") >= 0, "%s: recompute full, but rank "
                "0 has no block 'B b0 recompute'", file);
    }
    for (int k = 0; g.units > 0 && k < 2; k++) {
        const char *want = k == 0 ? (!strcmp(g.mode, "fsdp") ? "AG b0" : NULL)
                                  : (g.stages > 1 ? "tie wte" : NULL);
        int found = 0;
        for (int j = 0; want && j < tt.nblocks; j++)
            found |= tt.blocks[j].lane == 1 && !strcmp(tt.blocks[j].label, want);
        REQUIRE(!want || found, "%s: no comm block '%s'", file, want);
    }
    check_headerless(path, &tt, file);
    draw_steps(&m, &tt, file);
    printf("viz_timetable: %s: %d ranks, %d steps, %d blocks, %d waits, %d arrows; "
           "%d buckets, %d AG, %d RS, %d f/g\n", file, tt.nranks, tt.nsteps, tt.nblocks,
           tt.nwaits, tt.narrows, count[0], count[1], count[2], count[3]);
    dv_tt_free(&tt);
    dv_model_free(&m);
    dt_trace_free(&mine);
}

/* The traces of $DTVIZ_TT_TRACES, in name order (main finds them; one test each, so
 * that one trace's failure hides no other's). */
static const char *tt_dir;
static struct dirent **tt_files;
static int tt_nfiles = -1;            /* -1: DTVIZ_TT_TRACES unset or unreadable */

static int is_trace(const struct dirent *e)
{
    size_t len = strlen(e->d_name);
    return len >= 7 && strcmp(e->d_name + len - 6, ".trace") == 0;
}

START_TEST(test_real_traces_found)
{
    if (tt_dir == NULL || tt_dir[0] == '\0') {
        printf("viz_timetable: DTVIZ_TT_TRACES is not set: skipping train's traces\n");
        return;
    }
    REQUIRE(tt_nfiles >= 0, "DTVIZ_TT_TRACES=%s: cannot read the directory", tt_dir);
    REQUIRE(tt_nfiles > 0, "DTVIZ_TT_TRACES=%s holds no .trace file", tt_dir);
}
END_TEST

START_TEST(test_real_trace)
{
    check_trace(tt_dir, tt_files[_i]->d_name);
}
END_TEST

/* ==== pixels ==== */

#define W 1280
#define H 800
#define TOL 12            /* per channel: the software renderer draws exact colours */

static Uint32 rgb_at(const SDL_Surface *s, int x, int y)
{
    Uint8 r, g, b;
    Uint32 p = ((const Uint32 *)((const Uint8 *)s->pixels + y * s->pitch))[x];
    SDL_GetRGB(p, s->format, &r, &g, &b);
    return (Uint32)r << 16 | (Uint32)g << 8 | b;
}

static Uint32 kind_rgb(dv_color_kind k)
{
    SDL_Color c = dv_kind_color(k);
    return (Uint32)c.r << 16 | (Uint32)c.g << 8 | c.b;
}

static int close_rgb(Uint32 a, Uint32 b)
{
    for (int sh = 0; sh <= 16; sh += 8) {
        int d = (int)((a >> sh) & 255) - (int)((b >> sh) & 255);
        if (d > TOL || d < -TOL)
            return 0;
    }
    return 1;
}

/* Where the rows are, as dv_tt_hit says: y0[r][lane] .. y1[r][lane], and the x range
 * [x0, x1] of a lane with the time at each x. */
typedef struct {
    int y0[DV_MAX_RANKS][2], y1[DV_MAX_RANKS][2];
    int x0, x1;
    double tx[W];
} geom;

static void find_geom(const dv_view *v, int w, int h, int nranks, geom *G)
{
    int rank, lane, xs = -1;
    double t;
    for (int r = 0; r < nranks; r++)
        for (int l = 0; l < 2; l++)
            G->y0[r][l] = h, G->y1[r][l] = -1;
    for (int x = w / 2; x < w && xs < 0; x += 7)     /* an x over the rows */
        for (int y = 0; y < h && xs < 0; y += 2)
            if (dv_tt_hit(v, w, h, x, y, &rank, &lane, &t))
                xs = x;
    REQUIRE(xs >= 0, "dv_tt_hit finds no row at %dx%d", w, h);
    for (int y = 0; y < h; y++)
        if (dv_tt_hit(v, w, h, xs, y, &rank, &lane, &t)) {
            REQUIRE(rank >= 0 && rank < nranks && (lane == 0 || lane == 1),
                    "dv_tt_hit(%d, %d): rank %d lane %d", xs, y, rank, lane);
            if (y < G->y0[rank][lane])
                G->y0[rank][lane] = y;
            G->y1[rank][lane] = y;
        }
    for (int r = 0; r < nranks; r++)
        for (int l = 0; l < 2; l++)
            REQUIRE(G->y1[r][l] >= G->y0[r][l], "dv_tt_hit: rank %d lane %d has no row at "
                    "x = %d", r, l, xs);
    int y = (G->y0[0][0] + G->y1[0][0]) / 2;
    G->x0 = -1;
    G->x1 = -1;
    for (int x = 0; x < w && x < W; x++) {
        G->tx[x] = NAN;
        if (dv_tt_hit(v, w, h, x, y, &rank, &lane, &t) && rank == 0 && lane == 0) {
            REQUIRE(G->x1 < 0 || G->x1 == x - 1, "dv_tt_hit: the lane has a gap at x = %d", x);
            REQUIRE(G->x1 < 0 || t >= G->tx[G->x1], "dv_tt_hit: time goes back at x = %d", x);
            G->tx[x] = t;
            if (G->x0 < 0)
                G->x0 = x;
            G->x1 = x;
        }
    }
    REQUIRE(G->x0 >= 0 && G->x1 > G->x0 + 10, "dv_tt_hit: the lane is %d..%d", G->x0, G->x1);
    double px = (v->t1 - v->t0) / (G->x1 - G->x0);
    REQUIRE(fabs(G->tx[G->x0] - v->t0) <= 2 * px && fabs(G->tx[G->x1] - v->t1) <= 2 * px,
            "dv_tt_hit: the lane shows [%g, %g], the window is [%g, %g]", G->tx[G->x0],
            G->tx[G->x1], v->t0, v->t1);
}

/* The first x whose time is >= t. */
static int x_of(const geom *G, double t)
{
    for (int x = G->x0; x <= G->x1; x++)
        if (G->tx[x] >= t)
            return x;
    return G->x1;
}

/* How many of 15 samples over [ta, tb] x the middle of the lane's rows are close to c
 * (5 across the middle 60% of the time, 3 down the middle half of the rows). */
static int samples_like(const SDL_Surface *p, const geom *G, int r, int lane, double ta,
                        double tb, Uint32 c, Uint32 *first)
{
    int n = 0;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++) {
            int x = x_of(G, ta + (tb - ta) * (0.2 + 0.15 * i));
            int y = G->y0[r][lane] + (G->y1[r][lane] - G->y0[r][lane]) * (j + 1) / 4;
            Uint32 got = rgb_at(p, x, y);
            if (i == 2 && j == 1 && first)
                *first = got;
            n += close_rgb(got, c);
        }
    return n;
}

/* gpipe or 1f1b at P stages, M micro-batches: every slot of every stage's compute lane
 * is its operation's colour or the lane's background as dt_pp_timetable says; zooming
 * moves the last stage's first block as the arithmetic says; a window past the trace
 * draws no block. */
static void check_pixels(int algo, int P, int M)
{
    dv_model m;
    dv_tt tt;
    builtin(algo, P, M, &m, &tt);
    int n = 2 * M, T = (M + P - 1) * (1 + TB), start[8 * 2 * MAX_M];
    dt_pp_op ops[2 * MAX_M];
    REQUIRE(P <= 8 && M <= MAX_M && dt_pp_timetable(algo, P, M, TB, start) == T, "yardstick");
    double off = tt.steps[0].t0;            /* slot 0 (checked by test_builtin) */
    Uint32 fwd = kind_rgb(DV_C_FORWARD), bwd = kind_rgb(DV_C_BACKWARD);
    REQUIRE(!close_rgb(fwd, bwd), "forward and backward share a colour: %06x, %06x", fwd, bwd);

    dv_view v = { .tt = &tt, .tt_step = 0, .t0 = off - 1, .t1 = off + T + 1,
                  .cursor = off + T + 1e6, .call = -1 };
    char err[256];
    SDL_Surface *p = dv_render_surface(&m, &v, W, H, err, sizeof err);
    REQUIRE(p != NULL, "%s", err);
    geom *G = malloc(sizeof *G);
    REQUIRE(G, "out of memory");
    find_geom(&v, W, H, P, G);
    for (int s = 0; s < P; s++) {
        /* the lane's background: before the step begins */
        Uint32 bg = 0;
        samples_like(p, G, s, 0, off - 0.9, off - 0.1, 0, &bg);
        REQUIRE(samples_like(p, G, s, 0, off - 0.9, off - 0.1, bg, NULL) >= 12 &&
                !close_rgb(bg, fwd) && !close_rgb(bg, bwd), "%s P=%d M=%d: stage %d's lane "
                "before the step is not one background colour (%06x)", SCHED[algo], P, M, s,
                bg);
        dt_pp_order(algo, P, M, s, ops);
        for (int u = 0; u < T; u++) {
            int k = 0;
            while (k < n && !(start[s * n + k] <= u &&
                              u < start[s * n + k] + (ops[k].kind == 'F' ? 1 : TB)))
                k++;
            Uint32 want = k == n ? bg : ops[k].kind == 'F' ? fwd : bwd, seen = 0;
            int like = samples_like(p, G, s, 0, off + u, off + u + 1, want, &seen);
            int wrong = k < n ? 0 : samples_like(p, G, s, 0, off + u, off + u + 1, fwd, NULL) +
                                    samples_like(p, G, s, 0, off + u, off + u + 1, bwd, NULL);
            REQUIRE(like >= 8 && wrong == 0, "%s P=%d M=%d: stage %d slot %d (%s): %d of 15 "
                    "samples are %06x, %d forward or backward; the middle is %06x",
                    SCHED[algo], P, M, s, u, k == n ? "idle" : ops[k].kind == 'F' ? "forward"
                    : "backward", like, want, wrong, seen);
        }
    }

    /* zoom: the last stage's first forward starts at slot P-1, idle before it (P > 1) */
    int s = P - 1, y = (G->y0[s][0] + G->y1[s][0]) / 2;
    double a = off + P - 1;
    for (int z = 0; z < 2 && P > 1; z++) {
        dv_view vz = v;
        if (z == 1) {
            vz.t0 = a - 1.5;
            vz.t1 = a + 2.5;
        }
        SDL_Surface *q = z == 0 ? p : dv_render_surface(&m, &vz, W, H, err, sizeof err);
        REQUIRE(q != NULL, "%s", err);
        double want = G->x0 + (a - vz.t0) / (vz.t1 - vz.t0) * (G->x1 - G->x0);
        int edge = -1;
        for (int x = G->x0; x <= G->x1 && edge < 0; x++)
            if (close_rgb(rgb_at(q, x, y), fwd))
                edge = x;
        REQUIRE(edge >= 0 && fabs(edge - want) <= 3, "%s P=%d M=%d window [%g, %g]: stage %d's "
                "F0 starts at x = %d, want %.1f", SCHED[algo], P, M, vz.t0 - off, vz.t1 - off,
                s, edge, want);
        if (q != p)
            SDL_FreeSurface(q);
    }

    /* a window past the end of the trace: no block in any lane */
    dv_view vp = v;
    vp.t0 = tt.t_end + 10;
    vp.t1 = tt.t_end + 20;
    SDL_Surface *q = dv_render_surface(&m, &vp, W, H, err, sizeof err);
    REQUIRE(q != NULL, "%s", err);
    Uint32 comm = kind_rgb(DV_C_COMM);
    for (int r = 0; r < P; r++)
        for (int l = 0; l < 2; l++) {
            int yy = (G->y0[r][l] + G->y1[r][l]) / 2;
            for (int x = G->x0; x <= G->x1; x++) {
                Uint32 c = rgb_at(q, x, yy);
                REQUIRE(!close_rgb(c, fwd) && !close_rgb(c, bwd) && !close_rgb(c, comm),
                        "%s P=%d M=%d: a window past the trace shows a block's colour %06x at "
                        "(%d, %d), stage %d lane %d", SCHED[algo], P, M, c, x, yy, r, l);
            }
        }
    SDL_FreeSurface(q);
    free(G);
    SDL_FreeSurface(p);
    dv_tt_free(&tt);
    dv_model_free(&m);
}

/* The built-in ddp drawn: in every rank's compute lane each slot is a forward, a
 * backward, the optimizer or idle, and in its comm lane a bucket's allreduce or idle,
 * as dt_ddp_timetable says; so a bucket sits under backward exactly where it overlaps. */
static void check_pixels_ddp(dv_ddp_shape d)
{
    int L = d.layers, B = d.buckets, fwd[64], bwd[64], ar0[64], ar1[64], opt;
    int T = dt_ddp_timetable(L, B, d.comm, d.overlap, fwd, bwd, ar0, ar1, &opt);
    char what[96], err[256];
    dv_model m;
    dv_tt tt;
    builtin_ddp(d, &m, &tt, what, sizeof what);
    Uint32 col[] = { kind_rgb(DV_C_FORWARD), kind_rgb(DV_C_BACKWARD),
                     kind_rgb(DV_C_OPTIMIZER), kind_rgb(DV_C_COMM) };
    dv_view v = { .tt = &tt, .tt_step = 0, .t0 = -1, .t1 = T + 1, .cursor = T + 1e6,
                  .call = -1 };
    SDL_Surface *p = dv_render_surface(&m, &v, W, H, err, sizeof err);
    REQUIRE(p != NULL, "%s: %s", what, err);
    geom *G = malloc(sizeof *G);
    REQUIRE(G, "out of memory");
    find_geom(&v, W, H, d.ranks, G);
    for (int r = 0; r < d.ranks; r++)
        for (int lane = 0; lane < 2; lane++) {
            Uint32 bg = 0;
            samples_like(p, G, r, lane, -0.9, -0.1, 0, &bg);
            for (int u = 0; u < T; u++) {
                int k = -1;                      /* the colour the slots say, -1 idle */
                for (int i = 0; i < L && lane == 0; i++)
                    k = u == fwd[i] ? 0 : u >= bwd[i] && u < bwd[i] + 2 ? 1 : k;
                k = lane == 0 && u == opt ? 2 : k;
                for (int b = 0; b < B && lane == 1; b++)
                    k = u >= ar0[b] && u < ar1[b] ? 3 : k;
                Uint32 want = k < 0 ? bg : col[k], seen = 0;
                int like = samples_like(p, G, r, lane, u, u + 1, want, &seen);
                REQUIRE(like >= 8 && (k >= 0 || !close_rgb(bg, col[lane ? 3 : 1])),
                        "%s: rank %d lane %d slot %d (%s): %d of 15 samples are %06x; the "
                        "middle is %06x", what, r, lane, u, k < 0 ? "idle" : k == 0 ?
                        "forward" : k == 1 ? "backward" : k == 2 ? "optimizer" : "bucket",
                        like, want, seen);
            }
        }
    free(G);
    SDL_FreeSurface(p);
    dv_tt_free(&tt);
    dv_model_free(&m);
}

START_TEST(test_pixels)
{
    check_pixels(_i, 4, 4);
    check_pixels(_i, 3, 5);
    check_pixels(_i, 5, 2);
}
END_TEST

START_TEST(test_pixels_ddp)
{
    check_pixels_ddp(DV_DDP_DEFAULT);
    check_pixels_ddp((dv_ddp_shape){ 5, 7, 3, 2, 1 });
    check_pixels_ddp((dv_ddp_shape){ 1, 4, 4, 1, 0 });
}
END_TEST

/* Odd sizes and the ends of the rank range: a picture of the right size, no crash
 * (ASan watches in the sanitized build); dv_tt_hit outside the picture hits nothing. */
START_TEST(test_sizes)
{
    const int P[] = { 1, 2, 7, DV_MAX_RANKS }, size[][2] = { { 200, 150 }, { 1280, 800 },
                                                            { 321, 967 } };
    for (int a = 0; a < 2; a++)
        for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {
            dv_model m;
            dv_tt tt;
            builtin(a, P[i], 3, &m, &tt);
            for (size_t j = 0; j < sizeof size / sizeof size[0]; j++) {
                int w = size[j][0], h = size[j][1], rank, lane;
                double t;
                dv_view v = { .tt = &tt, .t0 = tt.t_begin, .t1 = tt.t_end,
                              .cursor = (tt.t_begin + tt.t_end) / 2, .call = -1 };
                char err[256];
                SDL_Surface *p = dv_render_surface(&m, &v, w, h, err, sizeof err);
                REQUIRE(p != NULL && p->w == w && p->h == h, "%s P=%d at %dx%d: %s", SCHED[a],
                        P[i], w, h, p ? "wrong size" : err);
                SDL_FreeSurface(p);
                REQUIRE(!dv_tt_hit(&v, w, h, -5, -5, &rank, &lane, &t) &&
                        !dv_tt_hit(&v, w, h, w + 5, h / 2, &rank, &lane, &t) &&
                        !dv_tt_hit(&v, w, h, w / 2, h + 5, &rank, &lane, &t),
                        "%s P=%d at %dx%d: dv_tt_hit outside the picture", SCHED[a], P[i], w,
                        h);
            }
            dv_tt_free(&tt);
            dv_model_free(&m);
        }
    for (size_t i = 0; i < sizeof P / sizeof P[0]; i++) {     /* ddp at 1 .. 64 ranks */
        dv_model m;
        dv_tt tt;
        char what[96], err[256];
        builtin_ddp((dv_ddp_shape){ P[i], 5, 2, 3, 1 }, &m, &tt, what, sizeof what);
        for (size_t j = 0; j < sizeof size / sizeof size[0]; j++) {
            dv_view v = { .tt = &tt, .t0 = tt.t_begin, .t1 = tt.t_end,
                          .cursor = (tt.t_begin + tt.t_end) / 2, .call = -1 };
            SDL_Surface *p = dv_render_surface(&m, &v, size[j][0], size[j][1], err,
                                               sizeof err);
            REQUIRE(p != NULL && p->w == size[j][0] && p->h == size[j][1], "%s at %dx%d: %s",
                    what, size[j][0], size[j][1], p ? "wrong size" : err);
            SDL_FreeSurface(p);
        }
        dv_tt_free(&tt);
        dv_model_free(&m);
    }
}
END_TEST

int main(void)
{
    tt_dir = getenv("DTVIZ_TT_TRACES");
    if (tt_dir != NULL && tt_dir[0] != '\0')
        tt_nfiles = scandir(tt_dir, &tt_files, is_trace, alphasort);
    Suite *s = suite_create("viz_timetable");
    TCase *tc = tcase_create("builtin");
    tcase_add_loop_test(tc, test_builtin, 0, 16);
    tcase_add_test(tc, test_builtin_names);
    tcase_add_loop_test(tc, test_builtin_v, 0, 5);
    tcase_add_test(tc, test_hand_interleaved);
    tcase_add_test(tc, test_hand_zb);
    tcase_add_loop_test(tc, test_builtin_ddp, 0, 8);
    tcase_add_test(tc, test_builtin_ddp_edges);
    tcase_add_test(tc, test_memcpy_not_comm);
    tcase_add_test(tc, test_odd_headers);
    tcase_add_test(tc, test_vias);
    tcase_add_test(tc, test_threads);
    tcase_add_test(tc, test_header_disagrees);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    tc = tcase_create("traces");
    tcase_add_test(tc, test_real_traces_found);
    tcase_add_loop_test(tc, test_real_trace, 0, tt_nfiles > 0 ? tt_nfiles : 0);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    tc = tcase_create("pixels");
    tcase_add_loop_test(tc, test_pixels, 0, 2);
    tcase_add_test(tc, test_pixels_ddp);
    tcase_add_test(tc, test_sizes);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    int rc = unit_run(s);
    for (int i = 0; i < tt_nfiles; i++)
        free(tt_files[i]);
    free(tt_files);
    return rc;
}
