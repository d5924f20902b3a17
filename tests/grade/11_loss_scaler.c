/* Grading exercise 11, the dynamic loss scaler. Checked against a model of the rule
 * written here (not dtlab's scaler), step by step:
 *
 *   update       long sequences of clean and overflowed steps under several configs
 *                (window 1, 2, 3 and 2000; backoff 0.5 and 0.25; growth 2 and 4): the
 *                return value, the scale and the count of clean steps after each one.
 *   step_agree   an inf or a NaN on ONE rank (each rank in turn, the last included), on
 *                every rank, or on none: every rank must take the same decision, leave
 *                its gradients untouched when it skips, and keep the same scaler.
 *   step_unscale clean steps, the scale growing often (window 1 and 3): gradients must
 *                be divided by the scale they were made with, the one before the update.
 *   step_sub_comm step_agree on two halves of the ranks (gr_split).
 * The step cases judge the step by the model's decision or by what the learner's own
 * ex_scaler_update makes of the agreed flag, so that a mistake in the rule (an update
 * that applies an overflowed step, say) costs the update case only. Every scale is a power of two and every gradient a multiple of 1/4
 * times the scale, so unscaled values are exact and compared with ==. */
#include <math.h>
#include <stdlib.h>
#include "grade.h"

/* ==== the rule, as a model ==== */

typedef struct { float scale; int clean; } model;

static int model_update(model *m, const dt_scaler_config *c, int found_inf)
{
    if (found_inf) {
        m->scale *= c->backoff;
        m->clean = 0;
        return 0;
    }
    if (++m->clean == c->window) {
        m->scale *= c->growth;
        m->clean = 0;
    }
    return 1;
}

static const char *cfg_text(const dt_scaler_config *c, char *buf, size_t len)
{
    snprintf(buf, len, "config {init %g, backoff %g, growth %g, window %d}",
             (double)c->init, (double)c->backoff, (double)c->growth, c->window);
    return buf;
}

/* The last steps of a sequence as letters, "...CCOC" (O overflow, C clean). */
static const char *seq_text(const int *found, int upto, char *buf, size_t len)
{
    int first = upto + 1 > 24 ? upto + 1 - 24 : 0;
    size_t at = (size_t)snprintf(buf, len, "%s", first ? "..." : "");
    for (int t = first; t <= upto && at + 1 < len; t++)
        buf[at++] = found[t] ? 'O' : 'C';
    buf[at] = '\0';
    return buf;
}

/* ==== update: pure ==== */

enum { SEQ = 9000 };     /* the longest sequence: the hand-made one at window 2000 */

/* Runs found[0..n) through ex_scaler_update and the model side by side; notes the
 * first difference and returns 0. */
static int run_sequence(const dt_scaler_config *c, const int *found, int n, int seq)
{
    dt_scaler s;
    dt_scaler_init(&s, c);
    model m = { c->init, 0 };
    char ct[128], st[40];
    for (int t = 0; t < n; t++) {
        float before = m.scale;
        int got = ex_scaler_update(&s, found[t]), want = model_update(&m, c, found[t]);
        if (got == want && s.scale == m.scale && s.clean == m.clean &&
            s.cfg.init == c->init && s.cfg.backoff == c->backoff &&
            s.cfg.growth == c->growth && s.cfg.window == c->window)
            continue;
        const char *hint = "";
        if (s.cfg.init != c->init || s.cfg.backoff != c->backoff ||
            s.cfg.growth != c->growth || s.cfg.window != c->window)
            hint = " The config s->cfg changed; it is read only.";
        else if (found[t] && got != 0)
            hint = " An overflowed step must be skipped: return 0.";
        else if (!found[t] && got != 1)
            hint = " A clean step is applied: return 1.";
        else if (found[t] && s.scale != before * c->backoff)
            hint = " An overflow multiplies the scale by cfg.backoff.";
        else if (found[t] && s.clean != 0)
            hint = " After an overflow the count of clean steps starts again at 0.";
        else if (s.scale != m.scale)
            hint = m.scale != before ? " The scale grows after exactly cfg.window clean "
                   "steps in a row (clean reaches window)." : " The scale grows only "
                   "after cfg.window clean steps in a row since the last change.";
        else if (s.clean != m.clean)
            hint = " clean counts the clean steps in a row since the scale last changed: "
                   "+1 on a clean step, back to 0 on growth or overflow.";
        ht_fail("%s, sequence %d, step %d (%s; O overflow, C clean, the last is this "
                "step): returned %d, scale %g, clean %d; expected %d, %g, %d.%s",
                cfg_text(c, ct, sizeof ct), seq, t + 1, seq_text(found, t, st, sizeof st),
                got, (double)s.scale, s.clean, want, (double)m.scale, m.clean, hint);
        return 0;
    }
    return 1;
}

START_TEST(update)
{
    static const dt_scaler_config cfgs[] = {
        { 65536.0f, 0.5f, 2.0f, 1 },
        { 1024.0f, 0.5f, 2.0f, 3 },
        { 1048576.0f, 0.25f, 4.0f, 2 },
        { 65536.0f, 0.5f, 2.0f, 2000 },
    };
    int *found = malloc(SEQ * sizeof *found);
    DT_REQUIRE(found != NULL, "out of memory");
    unsigned x = 12345;
    for (size_t c = 0; c < sizeof cfgs / sizeof cfgs[0] && !ht_nbad; c++) {
        int w = cfgs[c].window, long_run = w > 100;
        for (int seq = 0; seq < 6 && !ht_nbad; seq++) {
            /* sequence 0 by hand: window-1 clean, overflow, window+1 clean, two
             * overflows, 2 window clean; the others at random, 1 in 4 overflowing
             * (1 in 1000 for the long window, so that it does grow) */
            int n = 0;
            if (seq == 0) {
                for (int k = 0; k < w - 1; k++) found[n++] = 0;
                found[n++] = 1;
                for (int k = 0; k < w + 1; k++) found[n++] = 0;
                found[n++] = 1;
                found[n++] = 1;
                for (int k = 0; k < 2 * w; k++) found[n++] = 0;
            } else {
                n = long_run ? 4500 : 60;
                for (int t = 0; t < n; t++) {
                    x = x * 1103515245u + 12345u;
                    found[t] = (int)(x >> 16) % (long_run ? 1000 : 4) == 0;
                }
            }
            run_sequence(&cfgs[c], found, n, seq);
        }
    }
    free(found);
    HT_VERDICT();
}
END_TEST

/* ==== step: every rank ==== */

/* One step's plan, the same on every rank: bad[r] is 0 or the kind of non-finite value
 * planted on rank r (1 +inf, 2 NaN, 3 -inf), at element at[r]. */
typedef struct { int bad[64]; size_t at[64]; } plan;

static const char *KIND[] = { "", "inf", "NaN", "-inf" };

/* Where the overflows of a plan are, as text: "inf on rank 2 (element 7)". */
static const char *plan_text(const plan *p, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int r = 0; r < ht_size && at + 40 < len; r++)
        if (p->bad[r])
            at += (size_t)snprintf(buf + at, len - at, "%s%s on rank %d at element %zu",
                                   at ? ", " : "", KIND[p->bad[r]], r, p->at[r]);
    if (!at)
        snprintf(buf, len, "no inf or NaN on any rank");
    return buf;
}

/* Runs one step on comm and checks it. The scaler s is carried from step to step. So
 * that a mistake in ex_scaler_update costs the update case only, the step is judged
 * against the model's decision or, failing that, against what the learner's own
 * ex_scaler_update makes of the agreed flag (on a copy of the scaler): each rank must
 * take that decision, the same on every rank, leave the gradients alone when it skips
 * and unscale them by the old scale when it applies. */
static void check_step(dt_scaler *s, const dt_scaler_config *c, const plan *p, int t,
                       float *grads, float *saved, size_t n, MPI_Comm comm)
{
    DT_REQUIRE(ht_size <= 64, "the step cases plan for at most 64 ranks");
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char pt[256];
    plan_text(p, pt, sizeof pt);
    dt_fill_test_data(grads, (int)n, MPI_FLOAT, MPI_SUM, 1000u + (unsigned)t, ht_rank);
    float old = s->scale;
    for (size_t i = 0; i < n; i++)
        grads[i] *= old;                       /* as backward made them */
    static const float value[] = { 0.0f, INFINITY, NAN, -INFINITY };
    if (p->bad[ht_rank])
        grads[p->at[ht_rank]] = value[p->bad[ht_rank]];
    memcpy(saved, grads, n * sizeof *grads);
    /* any: a rank of comm has an inf or a NaN (plans are by rank of MPI_COMM_WORLD) */
    int mine = p->bad[ht_rank] != 0, any = 0;
    HT_MPI(MPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, comm, &ht_req));
    int old_clean = s->clean;
    model m = { s->scale, s->clean };
    int want = model_update(&m, c, any);
    dt_scaler own = *s;
    int own_want = ex_scaler_update(&own, any);

    int got = ex_scaler_step(s, grads, n, comm);
    int all[64];
    HT_MPI(MPI_Iallgather(&got, 1, MPI_INT, all, 1, MPI_INT, comm, &ht_req));
    const char *on = gr_on(comm);

#define SWHERE "step %d (%s)%s, %zu gradient(s) on this rank: "
    if (got != want && got != own_want) {
        int other = -1;
        for (int r = 0; r < size && other < 0; r++)
            if (all[r] != got)
                other = r;
        if (other >= 0)
            ht_fail(SWHERE "ranks disagreed: rank %d %s a step that rank %d %s. Any "
                    "rank's inf or NaN must skip the step on every rank: agree on the "
                    "flag over comm before deciding", t + 1, pt, on, n, rank,
                    got ? "applied" : "skipped", other, all[other] ? "applied" :
                    "skipped");
        else if (want)
            ht_fail(SWHERE "every rank returned %d, but no rank has an inf or NaN: the "
                    "step must be applied (return 1)", t + 1, pt, on, n, got);
        else
            ht_fail(SWHERE "every rank returned %d, but a rank has an inf or NaN: the "
                    "step must be skipped (return 0) on every rank; a flag of 1 on any "
                    "rank must win (MPI_MAX, or MPI_SUM and > 0)", t + 1, pt, on, n, got);
        return;
    }
    if ((s->scale != m.scale || s->clean != m.clean) &&
        (s->scale != own.scale || s->clean != own.clean)) {
        ht_fail(SWHERE "the scaler went from scale %g, clean %d to %g, %d; expected %g, "
                "%d (update it once a step, with the agreed flag, on every rank)", t + 1,
                pt, on, n, (double)old, old_clean, (double)s->scale, s->clean,
                (double)m.scale, m.clean);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (!got) {
            if (memcmp(&grads[i], &saved[i], sizeof *grads)) {
                ht_fail(SWHERE "the step was skipped, but grads[%zu] changed from %g to "
                        "%g; a skipped step leaves the gradients alone", t + 1, pt, on, n,
                        i, (double)saved[i], (double)grads[i]);
                return;
            }
            continue;
        }
        float e = saved[i] / old;
        if (grads[i] == e || (isnan(e) && isnan(grads[i])))
            continue;
        const char *hint = "";
        if (s->scale != old && grads[i] == saved[i] / s->scale)
            hint = ": divided by the NEW scale, the one after the update. Divide by the "
                   "scale the gradients were made with: read s->scale before updating";
        else if (grads[i] == saved[i] && saved[i] != e)
            hint = ": not unscaled; divide every gradient by the scale";
        else if (grads[i] == saved[i] * old)
            hint = ": multiplied by the scale; divide instead";
        ht_fail(SWHERE "grads[%zu] = %g after the step; expected %g = %g / %g, the scale "
                "it was made with (the scaler is now at %g)%s", t + 1, pt, on, n, i,
                (double)grads[i], (double)e, (double)saved[i], (double)old,
                (double)s->scale, hint);
        return;
    }
}

/* The gradients rank holds at count variant i: a count from gr_count, plus the rank
 * (but none at all in variant 0), so that every rank holds a different number. */
static size_t grad_count(int i, int rank)
{
    return (size_t)gr_count(i, ht_size) + (i > 0 ? (size_t)rank : 0);
}

/* Rounds of steps on comm: an overflow on rank 0, 1, ..., ht_size-1 of MPI_COMM_WORLD
 * in turn, three clean steps, then one on every rank; two rounds, the kind of value
 * cycling. Stops at the first failure. */
static void agree_rounds(MPI_Comm comm)
{
    const dt_scaler_config c = { 1024.0f, 0.5f, 2.0f, 2 };
    int ok = 1;
    for (int i = 0; i < GR_NCOUNTS && ok; i++) {
        size_t n = grad_count(i, ht_rank);
        float *grads = malloc((n + 1) * sizeof *grads);
        float *saved = malloc((n + 1) * sizeof *saved);
        DT_REQUIRE(grads != NULL && saved != NULL, "out of memory");
        dt_scaler s;
        dt_scaler_init(&s, &c);
        /* a round: an overflow on rank 0, 1, ..., size-1 in turn, three clean steps,
         * then one on every rank; two rounds, the kind of value cycling */
        int round = ht_size + 4;
        for (int t = 0; t < 2 * round && ok; t++) {
            plan p;
            memset(&p, 0, sizeof p);
            int e = t % round;
            for (int r = 0; r < ht_size; r++) {
                size_t nr = grad_count(i, r);
                if (nr == 0 || !(e == r || e == round - 1))
                    continue;
                int where = (t + 2 * r + t / round) % 3;     /* first, last, middle */
                p.bad[r] = 1 + (t + r) % 3;
                p.at[r] = where == 0 ? 0 : where == 1 ? nr - 1 : nr / 2;
            }
            check_step(&s, &c, &p, t, grads, saved, n, comm);
            ok = gr_all_ok();   /* all ranks stop together */
        }
        free(saved);
        free(grads);
    }
}

START_TEST(step_agree)
{
    agree_rounds(MPI_COMM_WORLD);
    HT_VERDICT();
}
END_TEST

static void agree_world(void *ctx) { (void)ctx; agree_rounds(MPI_COMM_WORLD); }

/* The same on two halves of the ranks, even and odd, each numbered backwards
 * (gr_split): an inf in one half skips that half's step only. A failure is run again on
 * MPI_COMM_WORLD to tell whether comm is to blame. */
START_TEST(step_sub_comm)
{
    MPI_Comm half = gr_split();
    agree_rounds(half);
    gr_sub_comm_ok(agree_world, NULL);
    MPI_Comm_free(&half);
    HT_VERDICT();
}
END_TEST

START_TEST(step_unscale)
{
    static const dt_scaler_config cfgs[] = {
        { 4096.0f, 0.5f, 2.0f, 1 },
        { 256.0f, 0.5f, 2.0f, 3 },
    };
    int ok = 1;
    for (int i = 0; i < GR_NCOUNTS && ok; i++) {
        for (int k = 0; k < 2 && ok; k++) {
            size_t n = grad_count(i, ht_rank);
            float *grads = malloc((n + 1) * sizeof *grads);
            float *saved = malloc((n + 1) * sizeof *saved);
            DT_REQUIRE(grads != NULL && saved != NULL, "out of memory");
            dt_scaler s;
            dt_scaler_init(&s, &cfgs[k]);
            /* mostly clean; every 5th step a NaN on the last rank, to back off */
            for (int t = 0; t < 12 && ok; t++) {
                plan p;
                memset(&p, 0, sizeof p);
                int last = ht_size - 1;
                size_t nl = grad_count(i, last);
                if (t % 5 == 4 && nl > 0) {
                    p.bad[last] = 2;
                    p.at[last] = nl / 2;
                }
                check_step(&s, &cfgs[k], &p, t, grads, saved, n, MPI_COMM_WORLD);
                ok = gr_all_ok();   /* all ranks stop together */
            }
            free(saved);
            free(grads);
        }
    }
    HT_VERDICT();
}
END_TEST

/* The rule is the exercise: dtlab's scaler may not do it instead. */
static const gr_rule rules[] = {
    { "ex_scaler_update", "dti?_scaler_[a-z_]*",
      "write the rule yourself; dtlab's dt_scaler_update is the answer" },
    { "ex_scaler_step", "dt_scaler_update|dti_scaler_[a-z_]*",
      "update the scaler with your own ex_scaler_update; dtlab's dt_scaler_update and "
      "dti_scaler_decide are the answer" },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "update", 2, GR_PURE, update, 1,
          "back off on overflow, grow after window clean steps, several configs",
          "ex_scaler_update" },
        { "step_agree", 2, GR_MPI, step_agree, 1,
          "one rank's inf/NaN skips the step on every rank; grads untouched",
          "ex_scaler_step" },
        { "step_unscale", 1, GR_MPI, step_unscale, 1,
          "applied steps divide by the scale the gradients were made with",
          "ex_scaler_step" },
        { "step_sub_comm", 1, GR_MPI, step_sub_comm, 1,
          "the same agreement on two halves of the ranks: over comm only",
          "ex_scaler_step" },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "11_loss_scaler",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "does every rank call the agreement (dt_allreduce), every step, "
                    "whatever it found? A rank that agrees only when it saw an inf "
                    "leaves the others waiting" });
}
