/* Unit tests of ring attention's block kernels (lib/nn/ringattn_kernels.cu) against
 * ringattn.c's CPU loops, the reference (which tests/unit_gpt.c holds to whole causal
 * attention). No MPI.
 *
 * dt_attn_block_forward and dt_attn_block_backward run twice on the same random inputs
 * (different in every test), through their public functions: on host buffers (the
 * loops) and on device buffers (dispatched to the kernels). Each case is one block of
 * queries at position q0 against several blocks of keys folded in turn into the same
 * m, l and o (forward) or dq (backward), each key block at its own k0: blocks the
 * queries see whole, blocks cut by the causal mask (some rows seeing a few keys, some
 * none), and blocks wholly in the queries' future. Rows are strided as context
 * parallelism strides them (q in qkv, k and v side by side, o in y): ldq = 3d + 1,
 * ldk = 2d + 3, ldo = d + 2. Shapes divide nothing, and some go past what one launch
 * covers: 4096 blocks of rows, 256 keys or queries a tile, 256 columns a block.
 *
 *   - forward from dt_attn_block_init's start (m = -inf, l = 0, o = 0) and from a
 *     random state mid-way (m, l, o nonzero), m, l and o compared after every block;
 *   - backward from the CPU forward's lse and D, onto random dq, dk and dv, dq compared
 *     after the last block and each block's dk and dv after its own.
 * The columns past d in o, dq, dk and dv start as NaN, and must stay so on both sides
 * (nothing may write them); every other value is finite. Without a GPU the CPU halves
 * run alone and main says once "GPU comparisons skipped: no GPU": never a silent pass.
 *
 *   build/tests/unit_gpu_ringattn
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cuda.h"
#include "nn/gpt.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

/* ==== helpers ==== */

static int gpu;          /* set by main: 1 when a GPU can be used */

/* The GPU's values against the CPU's: where the CPU's is not finite (a NaN gap, a row's
 * m still -inf) the same bits; elsewhere within tol of the largest finite |cpu| (at
 * least 1e-6) */
static void require_gpu_state(const float *d_got, const float *cpu, size_t n, double tol,
                              const char *what)
{
    float *got = malloc((n ? n : 1) * sizeof *got);
    ck_assert_ptr_nonnull(got);
    dti_cuda_memcpy(got, d_got, n * sizeof *got);
    double scale = 1e-6;
    for (size_t i = 0; i < n; i++)
        if (isfinite(cpu[i]))
            scale = fmax(scale, fabs(cpu[i]));
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(cpu[i]))
            REQUIRE(memcmp(&got[i], &cpu[i], sizeof(float)) == 0, "%s[%zu] = %.9g, the "
                    "CPU's %.9g", what, i, (double)got[i], (double)cpu[i]);
        else
            REQUIRE(fabs(got[i] - cpu[i]) <= tol * scale, "%s[%zu] = %.9g, the CPU's %.9g "
                    "(tolerance %.3g)", what, i, (double)got[i], (double)cpu[i],
                    tol * scale);
    }
    free(got);
}

/* rows rows of ld floats: columns [c0, c1) NaN */
static void nan_columns(float *x, size_t rows, int ld, int c0, int c1)
{
    for (size_t r = 0; r < rows; r++)
        for (int c = c0; c < c1; c++)
            x[r * ld + c] = NAN;
}

/* rows rows of ld floats: columns [0, c1) finite, [c1, ld) NaN (the gaps untouched) */
static void require_cpu_rows(const float *x, size_t rows, int ld, int c1, const char *what)
{
    for (size_t r = 0; r < rows; r++)
        for (int c = 0; c < ld; c++)
            REQUIRE(c < c1 ? isfinite(x[r * ld + c]) : isnan(x[r * ld + c]),
                    "cpu %s row %zu column %d = %g", what, r, c, (double)x[r * ld + c]);
}

/* ==== the cases ==== */

#define MAXB 4
typedef struct {
    int Tq, Tk, d, q0, nb, k0[MAXB];
} ring_case;

static const ring_case cases[] = {
    /* positions 10..16 against keys 0..4 (all seen), 8..12 (cut by the mask), 13..17
     * (rows 0-2 see none), 20..24 (wholly in the future) */
    { 7, 5, 3, 10, 4, { 0, 8, 13, 20 } },
    /* rows seeing 261..265 keys: past a tile of 256, the mask inside the second; then
     * 61..65 keys, then 0..3 */
    { 5, 300, 7, 260, 3, { 0, 200, 262 } },
    { 4101, 3, 2, 5, 2, { 0, 4000 } },          /* query rows past the grid */
    { 3, 4101, 2, 4098, 2, { 0, 4096 } },       /* key rows past the grid */
    { 3, 4, 300, 2, 2, { 0, 2 } },              /* d past a block */
    { 1, 1, 1, 0, 1, { 0 } },
};
#define NCASE (int)(sizeof cases / sizeof cases[0])

/* A case's inputs: q (Tq, ldq), and nb key blocks (Tk, ldk) of k then v side by side */
typedef struct {
    int ldq, ldk, ldo;
    size_t nq, nkv, no;         /* floats of q, of one key block, of o */
    float *q, *kv;
} ring_inputs;

static void inputs_make(const ring_case *c, ring_inputs *in)
{
    in->ldq = 3 * c->d + 1, in->ldk = 2 * c->d + 3, in->ldo = c->d + 2;
    in->nq = (size_t)c->Tq * in->ldq, in->nkv = (size_t)c->Tk * in->ldk;
    in->no = (size_t)c->Tq * in->ldo;
    in->q = unit_random_floats(in->nq, -1, 1);
    in->kv = unit_random_floats(in->nkv * c->nb, -1, 1);
}

/* ==== forward ==== */

/* Case _i / 2, from init (even _i) or from a random state mid-way (odd) */
START_TEST(test_forward)
{
    unit_seed(0x7000 + _i);
    const ring_case *c = &cases[_i / 2];
    int Tq = c->Tq, Tk = c->Tk, d = c->d, mid = _i % 2;
    ring_inputs in;
    inputs_make(c, &in);
    float *m = malloc(Tq * sizeof *m), *l = malloc(Tq * sizeof *l);
    float *o = unit_random_floats(in.no, -1, 1), *scratch = unit_nan_floats(Tk);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(l);
    if (mid) {
        for (int i = 0; i < Tq; i++) {
            m[i] = (float)unit_uniform(-1, 1);
            l[i] = (float)unit_uniform(0.5, 2);
        }
    } else {
        dt_attn_block_init(m, l, o, in.ldo, Tq, d);
    }
    nan_columns(o, Tq, in.ldo, d, in.ldo);
    float *d_q = NULL, *d_kv = NULL, *d_m = NULL, *d_l = NULL, *d_o = NULL;
    if (unit_use_gpu(gpu)) {
        d_q = unit_to_gpu(in.q, in.nq * 4), d_kv = unit_to_gpu(in.kv, in.nkv * c->nb * 4);
        d_m = unit_to_gpu(m, Tq * 4), d_l = unit_to_gpu(l, Tq * 4);
        d_o = unit_to_gpu(o, in.no * 4);
    }
    for (int b = 0; b < c->nb; b++) {
        const float *k = in.kv + b * in.nkv;
        dt_attn_block_forward(in.q, in.ldq, k, k + d, in.ldk, Tq, Tk, c->q0, c->k0[b], d,
                              m, l, o, in.ldo, scratch);
        require_cpu_rows(o, Tq, in.ldo, d, "o");
        for (int i = 0; i < Tq; i++)
            REQUIRE(isfinite(l[i]) && l[i] >= 0 && !isnan(m[i]), "cpu row %d: m %g, l %g",
                    i, (double)m[i], (double)l[i]);
        if (d_q) {
            char what[64];
            const float *d_k = d_kv + b * in.nkv;
            dt_attn_block_forward(d_q, in.ldq, d_k, d_k + d, in.ldk, Tq, Tk, c->q0,
                                  c->k0[b], d, d_m, d_l, d_o, in.ldo, NULL);
            snprintf(what, sizeof what, "gpu m after block %d (k0 %d)", b, c->k0[b]);
            require_gpu_state(d_m, m, Tq, 1e-5, what);
            snprintf(what, sizeof what, "gpu l after block %d (k0 %d)", b, c->k0[b]);
            require_gpu_state(d_l, l, Tq, 2e-5, what);
            snprintf(what, sizeof what, "gpu o after block %d (k0 %d)", b, c->k0[b]);
            require_gpu_state(d_o, o, in.no, 2e-5, what);
        }
    }
    if (d_q) {
        dti_cuda_free(d_q); dti_cuda_free(d_kv); dti_cuda_free(d_m); dti_cuda_free(d_l);
        dti_cuda_free(d_o);
    }
    free(in.q); free(in.kv); free(m); free(l); free(o); free(scratch);
}
END_TEST

/* ==== backward ==== */

START_TEST(test_backward)
{
    unit_seed(0x8000 + _i);
    const ring_case *c = &cases[_i];
    int Tq = c->Tq, Tk = c->Tk, d = c->d, nb = c->nb;
    ring_inputs in;
    inputs_make(c, &in);
    /* lse and D from the CPU's forward over the same blocks (each case's first block
     * gives every row a key) */
    float *m = malloc(Tq * sizeof *m), *l = malloc(Tq * sizeof *l);
    float *lse = unit_nan_floats(Tq), *D = unit_nan_floats(Tq);
    float *o = unit_nan_floats(in.no), *scratch = unit_nan_floats(Tk);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(l);
    dt_attn_block_init(m, l, o, in.ldo, Tq, d);
    for (int b = 0; b < nb; b++) {
        const float *k = in.kv + b * in.nkv;
        dt_attn_block_forward(in.q, in.ldq, k, k + d, in.ldk, Tq, Tk, c->q0, c->k0[b], d,
                              m, l, o, in.ldo, scratch);
    }
    dt_attn_block_finish(m, l, o, in.ldo, lse, Tq, d);
    float *dout = unit_random_floats(in.no, -1, 1);
    dt_attn_block_delta(o, dout, in.ldo, Tq, d, D);
    /* the gradients are added into: random, their gaps NaN */
    float *dq = unit_random_floats(in.nq, -1, 1);
    float *dkv = unit_random_floats(in.nkv * nb, -1, 1);
    nan_columns(dq, Tq, in.ldq, d, in.ldq);
    nan_columns(dkv, (size_t)Tk * nb, in.ldk, 2 * d, in.ldk);
    float *d_q = NULL, *d_kv = NULL, *d_lse = NULL, *d_D = NULL, *d_dout = NULL;
    float *d_dq = NULL, *d_dkv = NULL;
    if (unit_use_gpu(gpu)) {
        d_q = unit_to_gpu(in.q, in.nq * 4), d_kv = unit_to_gpu(in.kv, in.nkv * nb * 4);
        d_lse = unit_to_gpu(lse, Tq * 4), d_D = unit_to_gpu(D, Tq * 4);
        d_dout = unit_to_gpu(dout, in.no * 4), d_dq = unit_to_gpu(dq, in.nq * 4);
        d_dkv = unit_to_gpu(dkv, in.nkv * nb * 4);
    }
    for (int b = 0; b < nb; b++) {
        const float *k = in.kv + b * in.nkv;
        float *dk = dkv + b * in.nkv;
        dt_attn_block_backward(in.q, in.ldq, k, k + d, in.ldk, Tq, Tk, c->q0, c->k0[b], d,
                               lse, D, dout, in.ldo, dq, dk, dk + d);
        require_cpu_rows(dk, Tk, in.ldk, 2 * d, "dk, dv");
        if (d_q) {
            char what[64];
            const float *d_k = d_kv + b * in.nkv;
            float *d_dk = d_dkv + b * in.nkv;
            dt_attn_block_backward(d_q, in.ldq, d_k, d_k + d, in.ldk, Tq, Tk, c->q0,
                                   c->k0[b], d, d_lse, d_D, d_dout, in.ldo, d_dq, d_dk,
                                   d_dk + d);
            snprintf(what, sizeof what, "gpu dk, dv of block %d (k0 %d)", b, c->k0[b]);
            require_gpu_state(d_dk, dk, in.nkv, 1e-4, what);
        }
    }
    require_cpu_rows(dq, Tq, in.ldq, d, "dq");
    if (d_q) {
        require_gpu_state(d_dq, dq, in.nq, 1e-4, "gpu dq after every block");
        dti_cuda_free(d_q); dti_cuda_free(d_kv); dti_cuda_free(d_lse); dti_cuda_free(d_D);
        dti_cuda_free(d_dout); dti_cuda_free(d_dq); dti_cuda_free(d_dkv);
    }
    free(in.q); free(in.kv); free(m); free(l); free(lse); free(D); free(o); free(scratch);
    free(dout); free(dq); free(dkv);
}
END_TEST

/* ==== main ==== */

int main(void)
{
    gpu = unit_probe_gpu_or_say("unit_gpu_ringattn", "the CPU paths are run alone");
    Suite *s = suite_create("gpu_ringattn");
    TCase *tc = tcase_create("gpu_ringattn");
    tcase_add_loop_test(tc, test_forward, 0, 2 * NCASE);
    tcase_add_loop_test(tc, test_backward, 0, NCASE);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
