/* Unit tests of mode moe's arithmetic (lib/parallel/moe_route.c, moe.h). No MPI.
 *
 *   - the capacity C = ceil(factor * k * T / E): rounding up, a float factor such as
 *     1.1f not rounded past its value, at least 1, at most T;
 *   - top-k: the largest first, ties to the lower index, a second choice never the
 *     first;
 *   - routing: slots in token order, every first choice before any second choice,
 *     drops counted, against a model written here on random choices;
 *   - the softmax (rows sum to 1, no overflow) and its backward against central
 *     differences;
 *   - the model's size, and the settings dti_moe_check refuses.
 *
 *   build/tests/unit_moe
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdint.h>
#include <string.h>
#include "parallel/moe.h"
#include "parallel/parallel_internal.h"

START_TEST(test_capacity)
{
    ck_assert_int_eq(dti_moe_capacity(1.25, 1, 24, 8), 4);     /* 3.75 up to 4 */
    ck_assert_int_eq(dti_moe_capacity(1.0, 1, 24, 8), 3);      /* exact: no rounding */
    ck_assert_int_eq(dti_moe_capacity(1.1f, 1, 80, 8), 11);    /* 11.0000002: 11 */
    ck_assert_int_eq(dti_moe_capacity(1.0, 2, 24, 8), 6);      /* top-2: twice */
    ck_assert_int_eq(dti_moe_capacity(0.01, 1, 10, 8), 1);     /* at least 1 */
    ck_assert_int_eq(dti_moe_capacity(1000, 2, 10, 4), 10);    /* at most T */
}
END_TEST

START_TEST(test_topk)
{
    const float p[3][4] = { { 0.1f, 0.4f, 0.2f, 0.3f },
                            { 0.25f, 0.25f, 0.25f, 0.25f },
                            { 0.4f, 0.1f, 0.1f, 0.4f } };
    int c[3][2];
    dti_moe_topk(&p[0][0], 3, 4, 2, &c[0][0]);
    ck_assert(c[0][0] == 1 && c[0][1] == 3);
    ck_assert_msg(c[1][0] == 0 && c[1][1] == 1, "ties: %d %d, want 0 1", c[1][0],
                  c[1][1]);
    ck_assert_msg(c[2][0] == 0 && c[2][1] == 3, "ties: %d %d, want 0 3", c[2][0],
                  c[2][1]);
    int one[3];
    dti_moe_topk(&p[0][0], 3, 4, 1, one);
    ck_assert(one[0] == 1 && one[1] == 0 && one[2] == 0);
}
END_TEST

/* The example of moe_route.c's comment, and the priority of first choices. */
START_TEST(test_route_example)
{
    int choice[6] = { 1, 0, 1, 1, 2, 0 }, slot[6], routed[3], kept[3];
    int dropped = dti_moe_route(choice, 6, 1, 3, 2, slot, routed, kept);
    const int want[6] = { 0, 0, 1, -1, 0, 1 };
    ck_assert_int_eq(dropped, 1);
    for (int t = 0; t < 6; t++)
        ck_assert_msg(slot[t] == want[t], "token %d: slot %d, want %d", t, slot[t],
                      want[t]);
    ck_assert(routed[0] == 2 && routed[1] == 3 && routed[2] == 1);
    ck_assert(kept[0] == 2 && kept[1] == 2 && kept[2] == 1);

    /* top-2, one slot each: token 1's first choice beats token 0's second */
    int c2[4] = { 1, 0, 0, 1 }, s2[4];
    dropped = dti_moe_route(c2, 2, 2, 2, 1, s2, routed, kept);
    ck_assert_int_eq(dropped, 2);
    ck_assert_msg(s2[0] == 0 && s2[2] == 0 && s2[1] == -1 && s2[3] == -1,
                  "slots %d %d %d %d, want 0 -1 0 -1", s2[0], s2[1], s2[2], s2[3]);
}
END_TEST

/* Random choices against a model: each (token, j) in the order j, then t; a slot while
 * the expert has room. */
START_TEST(test_route_random)
{
    enum { T = 50, E = 5 };
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(_i + 1);
    for (int k = 1; k <= 2; k++)
        for (int C = 1; C <= 12; C += 3) {
            int choice[T * 2], slot[T * 2], routed[E], kept[E], fill[E] = { 0 };
            for (int t = 0; t < T; t++) {
                x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
                int a = (int)(x % E), b = (int)((a + 1 + (x >> 20) % (E - 1)) % E);
                choice[t * k] = a;
                if (k == 2)
                    choice[t * k + 1] = b;
            }
            int dropped = dti_moe_route(choice, T, k, E, C, slot, routed, kept), want = 0;
            for (int j = 0; j < k; j++)
                for (int t = 0; t < T; t++) {
                    int e = choice[t * k + j], s = fill[e] < C ? fill[e]++ : -1;
                    want += s < 0;
                    ck_assert_msg(slot[t * k + j] == s, "k %d C %d token %d choice %d: "
                                  "slot %d, want %d", k, C, t, j, slot[t * k + j], s);
                }
            ck_assert_int_eq(dropped, want);
            for (int e = 0; e < E; e++)
                ck_assert(kept[e] == fill[e] && kept[e] <= C && routed[e] >= kept[e]);
        }
}
END_TEST

START_TEST(test_softmax)
{
    float x[2][3] = { { 1, 2, 3 }, { 1000, 1000, -1000 } }, p[2][3];
    dti_moe_softmax(&x[0][0], &p[0][0], 2, 3);
    for (int b = 0; b < 2; b++) {
        float sum = p[b][0] + p[b][1] + p[b][2];
        ck_assert_msg(fabsf(sum - 1) < 1e-6f, "row %d sums to %g", b, (double)sum);
    }
    ck_assert(fabsf(p[0][2] / p[0][1] - expf(1)) < 1e-5f);
    ck_assert(fabsf(p[1][0] - 0.5f) < 1e-6f && p[1][2] == 0.0f);

    /* backward of L = sum_e w_e p_e: dx against central differences of L */
    float w[3] = { 0.3f, -1.2f, 0.7f }, d[3];
    float base[3] = { 0.2f, -0.5f, 0.9f }, q[3];
    dti_moe_softmax(base, q, 1, 3);
    dti_moe_softmax_backward(q, w, d, 1, 3);
    for (int e = 0; e < 3; e++) {
        double L[2];
        for (int s = 0; s < 2; s++) {
            float y[3], r[3];
            memcpy(y, base, sizeof y);
            y[e] += s ? -1e-3f : 1e-3f;
            dti_moe_softmax(y, r, 1, 3);
            L[s] = (double)w[0] * r[0] + (double)w[1] * r[1] + (double)w[2] * r[2];
        }
        double fd = (L[0] - L[1]) / 2e-3;
        ck_assert_msg(fabs(fd - d[e]) < 1e-3, "dx[%d] = %g, differences give %g", e,
                      (double)d[e], fd);
    }
}
END_TEST

START_TEST(test_shape_and_check)
{
    dt_train_config c;
    dt_train_defaults(&c);
    c.mode = DT_MODE_MOE;
    c.model = (dt_mlp_config){ .in = 4, .hidden = 5, .out = 3, .layers = 3,
                               .act = DT_RELU };
    c.batch = 24;
    c.experts = 2;
    /* MLP 25 + 30 + 18; less layer 1 (30); gate 2*5 + 2; experts 2 * 30 */
    ck_assert_int_eq(dt_moe_nparams(&c, 1), 73 - 30 + 12 + 60);
    ck_assert_int_eq(dt_moe_layer(&c.model), 1);
    c.experts = 0;
    ck_assert_int_eq(dt_moe_experts(&c, 3), 6);          /* 2 per rank */
    ck_assert_int_eq(dt_moe_groups(&c, 3), 3);           /* one per rank */
    ck_assert_int_eq(dt_moe_capacity(&c, 3), 2);         /* 1.25 * 8 / 6 = 1.67 */

    char why[200];
    ck_assert_msg(dti_moe_check(&c, 3, why, sizeof why) == 0, "refused: %s", why);
    const char *bad[] = { "2 layers", "fp16", "5 experts on 3 ranks",
                          "top-2 of 1 expert on 1 rank", "4 groups on 3 ranks",
                          "batch 24 in 9 groups", "a checkpoint" };
    for (int i = 0; i < (int)(sizeof bad / sizeof bad[0]); i++) {
        dt_train_config b = c;
        switch (i) {
        case 0: b.model.layers = 2; break;
        case 1: b.precision = DT_FP16; break;
        case 2: b.experts = 5; break;
        case 3: b.experts = 1; b.topk = 2; break;
        case 4: b.moe_groups = 4; break;
        case 5: b.moe_groups = 9; break;
        case 6: b.checkpoint_dir = "x"; break;
        }
        why[0] = 0;
        ck_assert_msg(dti_moe_check(&b, i == 3 ? 1 : 3, why, sizeof why) == -1 && why[0],
                      "%s was not refused", bad[i]);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("moe");
    TCase *tc = tcase_create("moe");
    tcase_add_test(tc, test_capacity);
    tcase_add_test(tc, test_topk);
    tcase_add_test(tc, test_route_example);
    tcase_add_loop_test(tc, test_route_random, 0, 4);
    tcase_add_test(tc, test_softmax);
    tcase_add_test(tc, test_shape_and_check);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
