/* Unit tests of mode moe's kernels (lib/parallel/moe_kernels.cu) against its host loops
 * (lib/parallel/moe_route.c), the reference. No MPI.
 *
 * One rank's part of an MoE layer, on shapes from one token to past what one launch
 * covers (256 threads a block, at most 4096 blocks: more than 2^20 items wrap round the
 * grid-stride loop), random gate logits with ties among them (every 7th row all equal,
 * every 5th a tie for the largest), capacities that drop choices and one that drops
 * none. In turn:
 *   - the gate: softmax and its backward, top-k (ties to the lower index);
 *   - routing of every group, and the step's figures (counts, probability sums, drops,
 *     the loss, the aux loss's gradient);
 *   - the slots: scatter, combine, the backward's dp and dys, dx;
 *   - the sum over groups of the replicated gradients.
 * Each case first holds the host loop to what it must give (counts that add up, slots
 * that hold their tokens, sums against double precision written here); then, where
 * there is a GPU, runs the kernel (dti_moe_cuda_*, which moe_route.c calls for device
 * pointers) on the same inputs and holds it to the host: integers exactly, floats to
 * rounding (the kernels mirror the loops and fuse no multiply-add, so they should give
 * the host's bits but for expf's last one). Without a GPU the host half runs alone and
 * main says once "GPU comparisons skipped: no GPU": never a silent pass.
 * scripts/gpu-check.sh fails a run that prints it.
 *
 *   build/tests/unit_gpu_moe
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda.h"
#include "parallel/moe.h"
#include "parallel/moe_cuda.h"

/* ==== helpers ==== */

static int gpu;          /* set by main: 1 when a GPU can be used */

static uint64_t seed = 0x2545f4914f6cdd1dull;
static float rnd(float lo, float hi)           /* splitmix64: failures reproduce */
{
    uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return lo + (hi - lo) * (float)((double)(z >> 11) / 9007199254740992.0);
}

static void *zalloc(size_t nbytes)
{
    void *p = calloc(nbytes ? nbytes : 1, 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

static float *rnd_floats(size_t n, float lo, float hi)
{
    float *p = zalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = rnd(lo, hi);
    return p;
}

/* The device's copy of a host buffer, and the host's of a device buffer (a copy waits
 * for the thread's stream, so for the kernels queued before it). */
static void *up(const void *h, size_t nbytes)
{
    void *d = dti_cuda_malloc(nbytes ? nbytes : 1);
    dti_cuda_memcpy(d, h, nbytes);
    return d;
}

static void *down(const void *d, size_t nbytes)
{
    void *h = zalloc(nbytes);
    dti_cuda_memcpy(h, d, nbytes);
    return h;
}

/* The GPU's n ints at d against the host's at want, exactly. */
static void same_ints(const int *d, const int *want, size_t n, const char *what)
{
    int *got = down(d, n * sizeof *got);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i])
            ck_abort_msg("gpu %s[%zu] = %d, host %d", what, i, got[i], want[i]);
    free(got);
}

/* The GPU's n floats at d against the host's at want, within tol * max(1, max |want|). */
static void close_floats(const float *d, const float *want, size_t n, double tol,
                         const char *what)
{
    float *got = down(d, n * sizeof *got);
    double *w = zalloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++)
        w[i] = want[i];
    unit_require_close(got, w, n, tol, what);
    free(got);
    free(w);
}

/* ==== the shapes, and one step's routing on the host ==== */

static const dti_moe_dims shapes[] = {
    { .N = 1, .E = 1, .El = 1, .k = 1, .Gl = 1, .T = 1, .C = 1, .H = 1 },
    { .N = 3, .E = 6, .El = 2, .k = 2, .Gl = 5, .T = 40, .C = 7, .H = 33 },   /* drops */
    { .N = 4, .E = 4, .El = 1, .k = 2, .Gl = 3, .T = 50, .C = 50, .H = 5 },   /* C = T */
    { .N = 2, .E = 4, .El = 2, .k = 1, .Gl = 2, .T = 90, .C = 12, .H = 17 },  /* top-1 */
    /* B * k * H = 1.44M items: past the grid (scatter, dys) */
    { .N = 2, .E = 4, .El = 2, .k = 2, .Gl = 4, .T = 600, .C = 400, .H = 300 },
};
#define NSHAPES (int)(sizeof shapes / sizeof shapes[0])

/* What the host's gate and routing make of random logits: logits and prob (B, E),
 * choice and slot (B, k), counts: routed (Gl, E), kept (Gl, E), dropped (Gl). */
typedef struct {
    dti_moe_dims d;
    int B;
    size_t ns;                       /* floats in a slot buffer */
    float *logits, *prob;
    int *choice, *slot, *counts, *routed, *kept, *dropped;
} routing;

static void route_host(dti_moe_dims d, routing *r)
{
    int B = d.Gl * d.T, E = d.E;
    r->d = d;
    r->B = B;
    r->ns = (size_t)d.N * d.Gl * d.El * d.C * d.H;
    r->logits = rnd_floats((size_t)B * E, -3, 3);
    for (int t = 0; t < B; t++) {
        float *l = r->logits + (size_t)t * E;
        if (t % 7 == 0)                          /* all equal: choices 0 (, 1) */
            for (int e = 0; e < E; e++)
                l[e] = 0.5f;
        else if (t % 5 == 0 && E > 1)            /* a tie for the largest */
            l[E - 1] = l[t % (E - 1)] = 4.0f;
    }
    r->prob = zalloc((size_t)B * E * sizeof(float));
    r->choice = zalloc((size_t)B * d.k * sizeof(int));
    r->slot = zalloc((size_t)B * d.k * sizeof(int));
    r->counts = zalloc((size_t)d.Gl * (2 * E + 1) * sizeof(int));
    r->routed = r->counts;
    r->kept = r->counts + (size_t)d.Gl * E;
    r->dropped = r->counts + (size_t)2 * d.Gl * E;
    dti_moe_softmax(r->logits, r->prob, B, E);
    dti_moe_topk(r->prob, B, E, d.k, r->choice);
    dti_moe_route_groups(d, r->choice, r->slot, r->routed, r->kept, r->dropped);
}

static void routing_free(routing *r)
{
    free(r->logits); free(r->prob); free(r->choice); free(r->slot); free(r->counts);
}

/* ==== the gate ==== */

START_TEST(test_gate)
{
    routing r;
    route_host(shapes[_i], &r);
    int B = r.B, E = r.d.E, k = r.d.k;
    /* the host: rows sum to 1; ties to the lower index; the second choice another */
    for (int t = 0; t < B; t++) {
        double sum = 0;
        for (int e = 0; e < E; e++)
            sum += r.prob[(size_t)t * E + e];
        ck_assert_msg(fabs(sum - 1) < 1e-5, "row %d sums to %g", t, sum);
        const int *c = r.choice + (size_t)t * k;
        if (t % 7 == 0)
            ck_assert_msg(c[0] == 0 && (k == 1 || c[1] == 1), "row %d of equal "
                          "logits chose %d %d, want 0 1", t, c[0], k > 1 ? c[1] : -1);
        else if (t % 5 == 0 && E > 1)
            ck_assert_msg(c[0] == t % (E - 1) && (k == 1 || c[1] == E - 1),
                          "row %d: a tie for the largest between %d and %d chose %d",
                          t, t % (E - 1), E - 1, c[0]);
        ck_assert(k == 1 || c[1] != c[0]);
    }
    float *dp = rnd_floats((size_t)B * E, -1, 1);
    float *dx = zalloc((size_t)B * E * sizeof(float));
    dti_moe_softmax_backward(r.prob, dp, dx, B, E);
    if (unit_use_gpu(gpu)) {
        size_t nf = (size_t)B * E * sizeof(float);
        float *d_l = up(r.logits, nf), *d_p = up(r.logits, nf), *d_dp = up(dp, nf);
        dti_moe_cuda_softmax(d_l, d_p, B, E);
        close_floats(d_p, r.prob, (size_t)B * E, 1e-6, "softmax");
        dti_moe_cuda_softmax(d_l, d_l, B, E);                  /* in place */
        close_floats(d_l, r.prob, (size_t)B * E, 1e-6, "softmax in place");
        float *d_q = up(r.prob, nf);                           /* the host's p: */
        int *d_c = dti_cuda_malloc((size_t)B * k * sizeof(int));    /* the same choices */
        dti_moe_cuda_topk(d_q, B, E, k, d_c);
        same_ints(d_c, r.choice, (size_t)B * k, "choice");
        dti_moe_cuda_softmax_backward(d_q, d_dp, d_dp, B, E);  /* in place */
        close_floats(d_dp, dx, (size_t)B * E, 1e-6, "softmax backward");
        dti_cuda_free(d_l); dti_cuda_free(d_p); dti_cuda_free(d_dp); dti_cuda_free(d_q);
        dti_cuda_free(d_c);
    }
    free(dp);
    free(dx);
    routing_free(&r);
}
END_TEST

/* ==== routing and the step's figures ==== */

START_TEST(test_route_stats)
{
    routing r;
    route_host(shapes[_i], &r);
    dti_moe_dims d = r.d;
    int B = r.B, E = d.E, k = d.k;
    size_t nc = (size_t)d.Gl * (2 * E + 1), nst = DTI_MOE_NST(E);
    /* the host: each group's routing as dti_moe_route's; the figures add up */
    int slot1[2 * 600], routed1[8], kept1[8];
    for (int g = 0; g < d.Gl; g++) {
        const int *c = r.choice + (size_t)g * d.T * k;
        int drop = dti_moe_route(c, d.T, k, E, d.C, slot1, routed1, kept1);
        ck_assert_int_eq(drop, r.dropped[g]);
        ck_assert(memcmp(slot1, r.slot + (size_t)g * d.T * k, (size_t)d.T * k *
                         sizeof(int)) == 0);
        ck_assert(memcmp(kept1, r.kept + (size_t)g * E, E * sizeof(int)) == 0);
    }
    double *st = zalloc(nst * sizeof(double));
    dti_moe_stats(d, r.prob, r.choice, r.routed, r.dropped, st);
    dti_moe_set_loss(st, E, 12.5);
    double first = 0, routed = 0, psum = 0, kept = 0;
    for (int e = 0; e < E; e++) {
        first += st[DTI_MOE_FIRST * E + e];
        routed += st[DTI_MOE_ROUTED * E + e];
        psum += st[DTI_MOE_PSUM * E + e];
    }
    for (size_t i = 0; i < (size_t)d.Gl * E; i++)
        kept += r.kept[i];
    ck_assert_msg(first == B && routed == (double)B * k, "first choices %g, routed %g; "
                  "want %d and %d", first, routed, B, B * k);
    ck_assert_msg(st[DTI_MOE_DROP(E)] == (double)B * k - kept, "%g dropped, %g kept of %d",
                  st[DTI_MOE_DROP(E)], kept, B * k);
    ck_assert(fabs(psum - B) < 1e-4 * B && st[DTI_MOE_LOSS(E)] == 12.5);
    float *aux = zalloc(E * sizeof(float));
    dti_moe_aux(st, 0.01, E, B, aux);
    for (int e = 0; e < E; e++)
        ck_assert(fabs(aux[e] - 0.01 * E * st[DTI_MOE_FIRST * E + e] / B / B) <=
                  1e-6 * fabs(aux[e]));
    if (unit_use_gpu(gpu)) {
        int *d_c = up(r.choice, (size_t)B * k * sizeof(int));
        int *d_s = dti_cuda_malloc((size_t)B * k * sizeof(int));
        int *d_n = dti_cuda_malloc(nc * sizeof(int));
        dti_moe_cuda_route_groups(d, d_c, d_s, d_n, d_n + (size_t)d.Gl * E,
                                  d_n + (size_t)2 * d.Gl * E);
        same_ints(d_s, r.slot, (size_t)B * k, "slot");
        same_ints(d_n, r.counts, nc, "routed, kept, dropped");
        float *d_p = up(r.prob, (size_t)B * E * sizeof(float));
        double *zero = zalloc(nst * sizeof(double)), *d_st = up(zero, nst * sizeof(double));
        dti_moe_cuda_stats(d, d_p, d_c, d_n, d_n + (size_t)2 * d.Gl * E, d_st);
        dti_moe_cuda_set_loss(d_st, E, 12.5);
        float *d_aux = dti_cuda_malloc(E * sizeof(float));
        dti_moe_cuda_aux(d_st, 0.01, E, B, d_aux);
        double *got = down(d_st, nst * sizeof(double));
        for (size_t i = 0; i < nst; i++)      /* counts exact; sums in the same order */
            ck_assert_msg(fabs(got[i] - st[i]) <= 1e-12 * fmax(1, fabs(st[i])),
                          "gpu st[%zu] = %.17g, host %.17g", i, got[i], st[i]);
        close_floats(d_aux, aux, E, 1e-7, "aux");
        free(zero); free(got);
        dti_cuda_free(d_c); dti_cuda_free(d_s); dti_cuda_free(d_n); dti_cuda_free(d_p);
        dti_cuda_free(d_st); dti_cuda_free(d_aux);
    }
    free(st);
    free(aux);
    routing_free(&r);
}
END_TEST

/* ==== the slots ==== */

START_TEST(test_slots)
{
    routing r;
    route_host(shapes[_i], &r);
    dti_moe_dims d = r.d;
    int B = r.B, E = d.E, k = d.k, H = d.H;
    size_t nx = (size_t)B * H, ns = r.ns;
    float *x = rnd_floats(nx, -2, 2), *ys = rnd_floats(ns, -2, 2);
    float *dy = rnd_floats(nx, -1, 1), *dxs = rnd_floats(ns, -1, 1);
    float *dgate = rnd_floats(nx, -1, 1), *aux = rnd_floats(E, 0, 0.1f);
    float *xs = rnd_floats(ns, 5, 6), *y = zalloc(nx * sizeof(float));   /* overwritten */
    float *dp = zalloc((size_t)B * E * sizeof(float)), *dys = rnd_floats(ns, 5, 6);
    float *dx = zalloc(nx * sizeof(float));
    dti_moe_scatter(d, x, r.choice, r.slot, xs);
    dti_moe_combine(d, x, r.prob, r.choice, r.slot, ys, y);
    dti_moe_slots_backward(d, dy, r.prob, r.choice, r.slot, ys, aux, dp, dys);
    dti_moe_x_backward(d, dy, r.choice, r.slot, dxs, dgate, dx);

    /* the host against the definitions: each kept choice's slot holds its token, and no
     * other slot anything; y, dp, dys, dx in double */
    size_t filled = 0, kept = 0;
    for (size_t i = 0; i < ns; i++)
        filled += xs[i] != 0;
    for (int t = 0; t < B; t++) {
        double yt[300] = { 0 }, dxt[300] = { 0 }, dpt[8];
        for (int i = 0; i < H; i++)
            yt[i] = x[(size_t)t * H + i], dxt[i] = dy[(size_t)t * H + i];
        for (int e = 0; e < E; e++)
            dpt[e] = aux[e];
        for (int j = 0; j < k; j++) {
            int e = r.choice[(size_t)t * k + j];
            long at = dti_moe_slot_at(d, e, r.slot[(size_t)t * k + j], t);
            if (at < 0)
                continue;
            kept++;
            double p = r.prob[(size_t)t * E + e];
            ck_assert(memcmp(xs + at, x + (size_t)t * H, H * sizeof(float)) == 0);
            for (int i = 0; i < H; i++) {
                yt[i] += p * ys[at + i];
                dxt[i] += dxs[at + i];
                dpt[e] += (double)dy[(size_t)t * H + i] * ys[at + i];
                ck_assert(dys[at + i] == (float)(r.prob[(size_t)t * E + e] *
                                                 dy[(size_t)t * H + i]));
            }
        }
        for (int i = 0; i < H; i++) {
            dxt[i] += dgate[(size_t)t * H + i];
            ck_assert_msg(fabs(y[(size_t)t * H + i] - yt[i]) <= 1e-5 * (1 + fabs(yt[i])),
                          "y[%d][%d] = %g, want %g", t, i, y[(size_t)t * H + i], yt[i]);
            ck_assert_msg(fabs(dx[(size_t)t * H + i] - dxt[i]) <= 1e-5 * (1 + fabs(dxt[i])),
                          "dx[%d][%d] = %g, want %g", t, i, dx[(size_t)t * H + i], dxt[i]);
        }
        for (int e = 0; e < E; e++)
            ck_assert_msg(fabs(dp[(size_t)t * E + e] - dpt[e]) <= 1e-4 * (1 + fabs(dpt[e])),
                          "dp[%d][%d] = %g, want %g", t, e, dp[(size_t)t * E + e], dpt[e]);
    }
    ck_assert_msg(filled == kept * H, "%zu floats filled in the slots, want %zu", filled,
                  kept * H);

    if (unit_use_gpu(gpu)) {
        size_t fx = nx * sizeof(float), fs = ns * sizeof(float);
        size_t fc = (size_t)B * k * sizeof(int), fp = (size_t)B * E * sizeof(float);
        int *d_c = up(r.choice, fc), *d_s = up(r.slot, fc);
        float *d_p = up(r.prob, fp), *d_x = up(x, fx), *d_ys = up(ys, fs);
        float *d_dy = up(dy, fx), *d_dxs = up(dxs, fs), *d_dg = up(dgate, fx);
        float *d_aux = up(aux, E * sizeof(float));
        size_t nj = ns > nx ? ns : nx;                   /* every float must be written */
        float *junk = rnd_floats(nj > (size_t)B * E ? nj : (size_t)B * E, 7, 8);
        float *d_xs = up(junk, fs), *d_dys = up(junk, fs), *d_y = up(junk, fx);
        float *d_dx = up(junk, fx), *d_dp = up(junk, fp);
        dti_moe_cuda_scatter(d, d_x, d_c, d_s, d_xs);
        dti_moe_cuda_combine(d, d_x, d_p, d_c, d_s, d_ys, d_y);
        dti_moe_cuda_slots_backward(d, d_dy, d_p, d_c, d_s, d_ys, d_aux, d_dp, d_dys);
        dti_moe_cuda_x_backward(d, d_dy, d_c, d_s, d_dxs, d_dg, d_dx);
        close_floats(d_xs, xs, ns, 0, "scatter");
        close_floats(d_y, y, nx, 1e-6, "combine");
        close_floats(d_dp, dp, (size_t)B * E, 1e-6, "dp");
        close_floats(d_dys, dys, ns, 1e-6, "dys");
        close_floats(d_dx, dx, nx, 1e-6, "dx");
        free(junk);
        void *dev[] = { d_c, d_s, d_p, d_x, d_ys, d_dy, d_dxs, d_dg, d_aux, d_xs, d_dys,
                        d_y, d_dx, d_dp };
        for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
            dti_cuda_free(dev[i]);
    }
    free(x); free(ys); free(dy); free(dxs); free(dgate); free(aux); free(xs); free(y);
    free(dp); free(dys); free(dx);
    routing_free(&r);
}
END_TEST

/* ==== the sum over groups ==== */

static const size_t sum_shapes[][3] = {     /* G, n, stride */
    { 1, 1, 1 },
    { 5, 1000, 1300 },
    { 3, (size_t)256 * 4096 + 4097, (size_t)256 * 4096 + 5000 },   /* past the grid */
};
#define NSUMS (int)(sizeof sum_shapes / sizeof sum_shapes[0])

START_TEST(test_sum_groups)
{
    int G = (int)sum_shapes[_i][0];
    size_t n = sum_shapes[_i][1], stride = sum_shapes[_i][2];
    float *pg = rnd_floats((size_t)G * stride, -1, 1), *dst = zalloc(n * sizeof(float));
    dti_moe_sum_groups(pg, stride, G, n, dst);
    for (size_t j = 0; j < n; j++) {
        double want = 0;
        for (int g = 0; g < G; g++)
            want += pg[(size_t)g * stride + j];
        ck_assert_msg(fabs(dst[j] - want) <= 1e-6 * G, "sum[%zu] = %g, want %g", j,
                      dst[j], want);
    }
    if (unit_use_gpu(gpu)) {
        float *d_pg = up(pg, (size_t)G * stride * sizeof(float));
        float *d_dst = up(pg, n * sizeof(float));        /* must be overwritten */
        dti_moe_cuda_sum_groups(d_pg, stride, G, n, d_dst);
        close_floats(d_dst, dst, n, 0, "sum over groups");   /* additions alone */
        dti_cuda_free(d_pg);
        dti_cuda_free(d_dst);
    }
    free(pg);
    free(dst);
}
END_TEST

/* ==== main ==== */

int main(void)
{
    gpu = unit_probe_gpu_or_say("unit_gpu_moe", "the host loops are checked alone");
    Suite *s = suite_create("gpu_moe");
    TCase *tc = tcase_create("gpu_moe");
    tcase_add_loop_test(tc, test_gate, 0, NSHAPES);
    tcase_add_loop_test(tc, test_route_stats, 0, NSHAPES);
    tcase_add_loop_test(tc, test_slots, 0, NSHAPES);
    tcase_add_loop_test(tc, test_sum_groups, 0, NSUMS);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
