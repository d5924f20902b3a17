/* Unit tests of the dynamic loss scaler (dt_scaler_*, lib/parallel/mixed.c). No MPI.
 *
 * What parallel.h specifies, checked step by step:
 *   - the defaults: init 65536, backoff 0.5, growth 2, window 2000;
 *   - it starts at init with no clean steps;
 *   - a step whose gradients overflowed (inf or NaN) is skipped (update returns 0), the
 *     scale is multiplied by backoff and the clean count starts again from 0;
 *   - a clean step is applied (returns 1); after `window` clean steps in a row the scale
 *     is multiplied by growth and the count starts again;
 *   - custom configs (other factors, window 1), and long random sequences against a
 *     model of the specification written here.
 * Every scale in these tests is a power of two times a small factor, so it is exact in
 * float and compared with ==.
 *
 *   build/tests/unit_scaler
 */
#include <check.h>
#include "unit.h"
#include <stdint.h>
#include <stdio.h>
#include "parallel/parallel.h"

/* ==== the specification, as a model ==== */

struct model { float scale; int clean; };

/* What one update must do: returns whether the step is applied. */
static int model_update(struct model *m, const dt_scaler_config *c, int found_inf)
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

/* Runs found[0..n) through the scaler and the model side by side. */
static void run_against_model(const dt_scaler_config *c, const int *found, int n)
{
    dt_scaler s;
    dt_scaler_init(&s, c);
    struct model m = { c->init, 0 };
    for (int i = 0; i < n; i++) {
        int got = dt_scaler_update(&s, found[i]), want = model_update(&m, c, found[i]);
        ck_assert_msg(got == want && s.scale == m.scale && s.clean == m.clean,
                      "update %d (found_inf %d): returned %d, scale %g, clean %d; want %d, "
                      "%g, %d", i + 1, found[i], got, (double)s.scale, s.clean, want,
                      (double)m.scale, m.clean);
    }
}

/* ==== tests ==== */

START_TEST(test_defaults)
{
    dt_scaler_config c;
    dt_scaler_defaults(&c);
    ck_assert_msg(c.init == 65536.0f && c.backoff == 0.5f && c.growth == 2.0f &&
                  c.window == 2000, "defaults %g %g %g %d, want 65536 0.5 2 2000",
                  (double)c.init, (double)c.backoff, (double)c.growth, c.window);
    dt_scaler s;
    dt_scaler_init(&s, &c);
    ck_assert_msg(s.scale == 65536.0f && s.clean == 0, "starts at %g with %d clean steps",
                  (double)s.scale, s.clean);
    ck_assert(s.cfg.init == c.init && s.cfg.backoff == c.backoff &&
              s.cfg.growth == c.growth && s.cfg.window == c.window);
}
END_TEST

/* Overflows skip and halve, every time, down from the start. */
START_TEST(test_backoff)
{
    dt_scaler_config c;
    dt_scaler_defaults(&c);
    dt_scaler s;
    dt_scaler_init(&s, &c);
    float want = 65536.0f;
    for (int i = 0; i < 20; i++) {
        ck_assert_msg(dt_scaler_update(&s, 1) == 0, "overflow %d was not skipped", i + 1);
        want *= 0.5f;
        ck_assert_msg(s.scale == want && s.clean == 0, "after %d overflows: scale %g "
                      "(want %g), clean %d", i + 1, (double)s.scale, (double)want, s.clean);
    }
}
END_TEST

/* The default window: 1999 clean steps change nothing, the 2000th doubles. */
START_TEST(test_growth)
{
    dt_scaler_config c;
    dt_scaler_defaults(&c);
    dt_scaler s;
    dt_scaler_init(&s, &c);
    for (int i = 1; i < 2000; i++) {
        ck_assert_msg(dt_scaler_update(&s, 0) == 1, "clean step %d was skipped", i);
        ck_assert_msg(s.scale == 65536.0f && s.clean == i, "after %d clean steps: scale "
                      "%g, clean %d", i, (double)s.scale, s.clean);
    }
    ck_assert(dt_scaler_update(&s, 0) == 1);
    ck_assert_msg(s.scale == 131072.0f && s.clean == 0, "after 2000 clean steps: scale %g "
                  "(want 131072), clean %d (want 0)", (double)s.scale, s.clean);
    for (int i = 1; i <= 2000; i++)          /* and again after another window */
        dt_scaler_update(&s, 0);
    ck_assert_msg(s.scale == 262144.0f, "after 4000 clean steps: scale %g",
                  (double)s.scale);
}
END_TEST

/* An overflow one step before the window closes starts the count again. */
START_TEST(test_reset)
{
    dt_scaler_config c = { .init = 1024, .backoff = 0.5f, .growth = 2, .window = 5 };
    dt_scaler s;
    dt_scaler_init(&s, &c);
    for (int i = 0; i < 4; i++)
        dt_scaler_update(&s, 0);
    ck_assert(s.scale == 1024.0f && s.clean == 4);
    ck_assert(dt_scaler_update(&s, 1) == 0);
    ck_assert_msg(s.scale == 512.0f && s.clean == 0, "overflow at clean 4: scale %g, "
                  "clean %d", (double)s.scale, s.clean);
    for (int i = 0; i < 4; i++)
        dt_scaler_update(&s, 0);
    ck_assert_msg(s.scale == 512.0f, "grew after 4 clean steps: the count was not reset");
    dt_scaler_update(&s, 0);
    ck_assert_msg(s.scale == 1024.0f && s.clean == 0, "5 clean steps after the reset: "
                  "scale %g (want 1024), clean %d", (double)s.scale, s.clean);
}
END_TEST

/* Other factors, and window 1 (every clean step grows). */
START_TEST(test_custom)
{
    dt_scaler_config c = { .init = 8, .backoff = 0.25f, .growth = 4, .window = 1 };
    int found[] = { 0, 0, 1, 0, 1, 1, 0 };
    float want[] = { 32, 128, 32, 128, 32, 8, 32 };
    dt_scaler s;
    dt_scaler_init(&s, &c);
    for (int i = 0; i < 7; i++) {
        int applied = dt_scaler_update(&s, found[i]);
        ck_assert_msg(applied == !found[i] && s.scale == want[i], "update %d: applied %d, "
                      "scale %g; want %d, %g", i + 1, applied, (double)s.scale, !found[i],
                      (double)want[i]);
    }
    dt_scaler_config d = { .init = 3, .backoff = 0.5f, .growth = 3, .window = 3 };
    int f2[] = { 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1 };
    run_against_model(&d, f2, 13);
}
END_TEST

/* Long random sequences (overflow rates from rare to frequent) against the model. The
 * sequence is steered to keep the scale between 1 and 2^40 (an overflow is forced above,
 * a clean step below), so that only what the specification says is tested, not what
 * happens at the edges of float. */
START_TEST(test_random)
{
    uint64_t x = 0x9e3779b97f4a7c15ull + (uint64_t)_i;
    enum { LEN = 3000 };
    int found[LEN];
    int rate = 2 + _i * 7;                     /* one overflow in about `rate` steps */
    dt_scaler_config c = { .init = 65536, .backoff = 0.5f, .growth = 2, .window = 7 };
    struct model m = { c.init, 0 };
    for (int i = 0; i < LEN; i++) {
        x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
        found[i] = (x * 0x2545f4914f6cdd1dull) >> 33 < (1ull << 31) / (uint64_t)rate;
        if (m.scale >= 0x1p40f)
            found[i] = 1;
        else if (m.scale <= 1.0f)
            found[i] = 0;
        model_update(&m, &c, found[i]);
    }
    run_against_model(&c, found, LEN);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scaler");
    TCase *tc = tcase_create("scaler");
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_backoff);
    tcase_add_test(tc, test_growth);
    tcase_add_test(tc, test_reset);
    tcase_add_test(tc, test_custom);
    tcase_add_loop_test(tc, test_random, 0, 4);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
