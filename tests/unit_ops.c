/* Unit tests of lib/ops.c: the local reductions inout[i] = inout[i] op in[i]. No MPI.
 *
 * Every dtype x op, on counts that are odd, tiny, zero and larger than a vector register,
 * against a plain loop written here. Each buffer carries guard elements after `count`
 * that must come back untouched, and `in` must come back unchanged. half and bf16 are
 * checked the way ops.h defines them: widened to float, reduced, rounded back to nearest
 * even.
 *
 * Where a GPU is present (a CUDA build on a GPU machine), the CUDA kernels are compared
 * with the CPU loops on the same inputs: bit for bit, since every op is a single IEEE
 * operation per element. Without a GPU that test says so and passes.
 *
 *   build/tests/unit_ops
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "cuda.h"
#include "half.h"
#include "ops.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

static const size_t counts[] = { 0, 1, 2, 3, 7, 13, 97, 1001, 4099 };
#define NCOUNTS (sizeof counts / sizeof counts[0])
enum { GUARD = 5 };      /* elements after count that must stay as they were */
static const char *type_names[] = { "float", "double", "int", "half", "bf16" };
static const char *op_names[] = { "sum", "max", "min", "prod" };
static const size_t type_sizes[] = { 4, 8, 4, 2, 2 };

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint32_t next32(void)
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    return (uint32_t)((rng * 0x9e3779b97f4a7c15ull) >> 32);
}
/* Uniform in [lo, hi), with a fractional part (not just integers and not all ones). */
static double uniform(double lo, double hi) { return lo + (hi - lo) * (next32() / 4294967296.0); }

/* Random test values for op: anything for sum, max and min; for prod, magnitudes near 1
 * (so products stay finite) with random signs. Sometimes equal values, and zeros of both
 * signs, so max and min meet ties. */
static double random_value(dt_op op, dt_dtype t)
{
    uint32_t pick = next32() % 16;
    if (pick == 0) return 0.0;
    if (pick == 1) return t == DT_I32 ? 0.0 : -0.0;
    if (pick == 2) return 1.5;
    double v = op == DT_OP_PROD ? uniform(0.5, 2.0) * (next32() & 1 ? -1 : 1)
                                : uniform(-1000.0, 1000.0);
    return t == DT_I32 ? (double)(int)(v * 7) : v;
}

static void set_elem(void *buf, size_t i, dt_dtype t, double v)
{
    switch (t) {
    case DT_F32: ((float *)buf)[i] = (float)v; break;
    case DT_F64: ((double *)buf)[i] = v; break;
    case DT_I32: ((int *)buf)[i] = (int)v; break;
    case DT_F16: ((dt_half *)buf)[i] = dt_float_to_half((float)v); break;
    case DT_B16: ((dt_bf16 *)buf)[i] = dt_float_to_bf16((float)v); break;
    }
}

/* The reference, one element at a time, the obvious way. */
#define APPLY(x, y, op) ((op) == DT_OP_SUM ? (y) + (x) : (op) == DT_OP_PROD ? (y) * (x) : \
                         (op) == DT_OP_MAX ? ((x) > (y) ? (x) : (y)) : ((x) < (y) ? (x) : (y)))

static void reference(const void *in, void *inout, size_t count, dt_dtype t, dt_op op)
{
    for (size_t i = 0; i < count; i++) {
        switch (t) {
        case DT_F32: { float x = ((const float *)in)[i], y = ((float *)inout)[i];
                       ((float *)inout)[i] = APPLY(x, y, op); break; }
        case DT_F64: { double x = ((const double *)in)[i], y = ((double *)inout)[i];
                       ((double *)inout)[i] = APPLY(x, y, op); break; }
        case DT_I32: { int x = ((const int *)in)[i], y = ((int *)inout)[i];
                       ((int *)inout)[i] = APPLY(x, y, op); break; }
        case DT_F16: { float x = dt_half_to_float(((const dt_half *)in)[i]);
                       float y = dt_half_to_float(((dt_half *)inout)[i]);
                       float r = APPLY(x, y, op);
                       ((dt_half *)inout)[i] = dt_float_to_half(r); break; }
        case DT_B16: { float x = dt_bf16_to_float(((const dt_bf16 *)in)[i]);
                       float y = dt_bf16_to_float(((dt_bf16 *)inout)[i]);
                       float r = APPLY(x, y, op);
                       ((dt_bf16 *)inout)[i] = dt_float_to_bf16(r); break; }
        }
    }
}

/* Element i as a double, to compare values (so +0 and -0, which max and min may pick
 * either of, compare equal) and to print. */
static double get_elem(const void *buf, size_t i, dt_dtype t)
{
    switch (t) {
    case DT_F32: return ((const float *)buf)[i];
    case DT_F64: return ((const double *)buf)[i];
    case DT_I32: return ((const int *)buf)[i];
    case DT_F16: return dt_half_to_float(((const dt_half *)buf)[i]);
    case DT_B16: return dt_bf16_to_float(((const dt_bf16 *)buf)[i]);
    }
    return 0;
}

/* Inputs for one case: in, inout, and the expected result, each count + GUARD long. */
typedef struct { void *in, *in0, *io, *want; size_t nbytes; } bufs;

static bufs make_case(size_t count, dt_dtype t, dt_op op)
{
    bufs b;
    b.nbytes = (count + GUARD) * type_sizes[t];
    b.in = malloc(b.nbytes); b.in0 = malloc(b.nbytes);
    b.io = malloc(b.nbytes); b.want = malloc(b.nbytes);
    for (size_t i = 0; i < count + GUARD; i++) {
        set_elem(b.in, i, t, random_value(op, t));
        set_elem(b.io, i, t, next32() % 8 == 0 ? get_elem(b.in, i, t) : random_value(op, t));
    }
    memcpy(b.in0, b.in, b.nbytes);
    memcpy(b.want, b.io, b.nbytes);
    reference(b.in, b.want, count, t, op);
    return b;
}

static void free_case(bufs *b) { free(b->in); free(b->in0); free(b->io); free(b->want); }

/* got against want: values in [0, count), bits in the guard, and in unchanged. */
static void compare(const bufs *b, const void *got, size_t count, dt_dtype t, dt_op op,
                    const char *path)
{
    size_t es = type_sizes[t];
    for (size_t i = 0; i < count; i++)
        REQUIRE(get_elem(got, i, t) == get_elem(b->want, i, t), "%s %s %s count %zu: element "
                "%zu is %.9g, want %.9g (in %.9g, inout was %.9g)", path, type_names[t],
                op_names[op], count, i, get_elem(got, i, t), get_elem(b->want, i, t),
                get_elem(b->in0, i, t), get_elem(b->io, i, t));
    REQUIRE(memcmp((const char *)got + count * es, (const char *)b->want + count * es,
                   GUARD * es) == 0, "%s %s %s count %zu: wrote past count", path,
            type_names[t], op_names[op], count);
    REQUIRE(memcmp(b->in, b->in0, b->nbytes) == 0, "%s %s %s count %zu: changed its input `in`",
            path, type_names[t], op_names[op], count);
}

/* One loop test per dtype (_i), every op and count. */
START_TEST(test_reduce_cpu)
{
    dt_dtype t = (dt_dtype)_i;
    for (int o = 0; o < 4; o++)
        for (size_t c = 0; c < NCOUNTS; c++) {
            bufs b = make_case(counts[c], t, (dt_op)o);
            dt_reduce_cpu(b.in, b.io, counts[c], t, (dt_op)o);
            compare(&b, b.io, counts[c], t, (dt_op)o, "dt_reduce_cpu");
            free_case(&b);
        }
}
END_TEST

/* Half results are the float result rounded once: spot-check with numbers whose float
 * sum is a tie between two halves (2048 + 1 = 2049 lies between halves 2048 and 2050,
 * ties to even gives 2048; 2050 + 1 = 2051 gives 2052), and the overflow boundary:
 * 65504 + 8 rounds back to 65504, 65504 + 16 = 65520 is the tie that goes to inf. */
START_TEST(test_half_rounding)
{
    enum { N = 6 };
    static const float x[N] = { 2048, 2050, 65504, 0.5f, -65504, 65504 };
    static const float y[N] = { 1, 1, 8, 0.25f, -8, 16 };
    static const float want[N] = { 2048, 2052, 65504, 0.75f, -65504, INFINITY };
    dt_half in[N], io[N];
    for (int i = 0; i < N; i++) { in[i] = dt_float_to_half(y[i]); io[i] = dt_float_to_half(x[i]); }
    dt_reduce_cpu(in, io, N, DT_F16, DT_OP_SUM);
    for (int i = 0; i < N; i++)
        REQUIRE(dt_half_to_float(io[i]) == want[i], "half %g + %g = %g, want %g", x[i], y[i],
                dt_half_to_float(io[i]), want[i]);
    dt_half a = dt_float_to_half(65504), b = dt_float_to_half(2);
    dt_reduce_cpu(&a, &b, 1, DT_F16, DT_OP_PROD);
    REQUIRE(b == 0x7c00, "half 65504 * 2 = %#06x, want inf", b);
}
END_TEST

/* bf16 the same way: 256 + 1 lies between bf16's 256 and 258 (8 significant bits), ties
 * to even give 256, 258 + 1 gives 260; 3.4e38 + 3.4e38 overflows to inf; 1e-30 survives
 * (fp32's range), where half would have flushed it to 0. */
START_TEST(test_bf16_rounding)
{
    enum { N = 5 };
    static const float x[N] = { 256, 258, 3.38e38f, 1e-30f, -0.5f };
    static const float y[N] = { 1, 1, 3.38e38f, 1e-30f, 0.25f };
    dt_bf16 in[N], io[N];
    for (int i = 0; i < N; i++) { in[i] = dt_float_to_bf16(y[i]); io[i] = dt_float_to_bf16(x[i]); }
    dt_reduce_cpu(in, io, N, DT_B16, DT_OP_SUM);
    float w2 = dt_bf16_to_float(dt_float_to_bf16(2e-30f));
    const float want[N] = { 256, 260, INFINITY, w2, -0.25f };
    for (int i = 0; i < N; i++)
        REQUIRE(dt_bf16_to_float(io[i]) == want[i], "bf16 %g + %g = %g, want %g", x[i], y[i],
                dt_bf16_to_float(io[i]), want[i]);
    REQUIRE(w2 > 1.9e-30f && w2 < 2.1e-30f, "bf16 of 2e-30 is %g", w2);
    REQUIRE(dt_float_to_bf16(NAN) != dt_float_to_bf16(INFINITY) &&
            (dt_float_to_bf16(NAN) & 0x7f80) == 0x7f80, "bf16 NaN %#06x",
            dt_float_to_bf16(NAN));
}
END_TEST

/* The CUDA kernels against the CPU loops, where there is a GPU.
 *
 * The kernel picks its loads from the pointers' alignment (ops_kernels.cu): 16-byte
 * vectors when the three buffers sit at the same offset within 16 bytes (after a head
 * of single elements when that offset is not 0), pairs of halves when all three are
 * 4-byte aligned, else single elements; and a tail of single elements after the last
 * vector. So each case places in, src and dst at element offsets from a 256-byte
 * aligned cudaMalloc, in place (dst == src) or not, on counts around the vector widths:
 *
 *     in src dst                          float, int    double     half
 *      0   0   0   in place               16-byte       16-byte    16-byte
 *      0   0   0   dst apart              16-byte       16-byte    16-byte
 *      1   1   1   in place               head 3        head 1     head 7
 *      3   3   3   dst apart              head 1        head 1     head 5
 *      1   0   2   dst apart              single        single     single
 *      0   2   4   dst apart              single        single     pairs
 */
static const struct { int in, src, dst, in_place; } places[] = {
    {0, 0, 0, 1}, {0, 0, 0, 0}, {1, 1, 1, 1}, {3, 3, 3, 0}, {1, 0, 2, 0}, {0, 2, 4, 0},
};
#define MAXOFF 4         /* the largest offset above, in elements */

/* Copies of the case's buffers on the GPU at the offsets of place p, reduced there, and
 * the result (count + GUARD elements at dst) brought back into got. A dst apart from src
 * starts as all-ones bits (NaN, -1) with src's guard, so an element left unwritten
 * cannot pass for a result. Checks that src is unchanged when it is not dst. */
static void run_on_gpu(const bufs *b, size_t count, dt_dtype t, dt_op o, int p, void *got)
{
    size_t es = type_sizes[t], room = b->nbytes + MAXOFF * es;
    char *d_in = dti_cuda_malloc(room), *d_src = dti_cuda_malloc(room);
    char *d_dst = places[p].in_place ? d_src : dti_cuda_malloc(room);
    char *in = d_in + places[p].in * es, *src = d_src + places[p].src * es;
    char *dst = places[p].in_place ? src : d_dst + places[p].dst * es;
    dti_cuda_memcpy(in, b->in, b->nbytes);
    dti_cuda_memcpy(src, b->io, b->nbytes);
    if (dst != src) {
        memset(got, 0xff, count * es);
        memcpy((char *)got + count * es, (const char *)b->io + count * es, GUARD * es);
        dti_cuda_memcpy(dst, got, b->nbytes);
    }
    dti_cuda_reduce(in, src, dst, count, t, o);
    dti_cuda_memcpy(got, dst, b->nbytes);
    dti_cuda_memcpy(b->in, in, b->nbytes);               /* in must be unchanged */
    if (dst != src) {
        void *back = malloc(b->nbytes);
        dti_cuda_memcpy(back, src, b->nbytes);
        REQUIRE(memcmp(back, b->io, b->nbytes) == 0, "dti_cuda_reduce %s %s count %zu, "
                "offsets %d %d %d: changed src", type_names[t], op_names[o], count,
                places[p].in, places[p].src, places[p].dst);
        free(back);
    }
    dti_cuda_free(d_in);
    dti_cuda_free(d_src);
    if (d_dst != d_src)
        dti_cuda_free(d_dst);
}

START_TEST(test_reduce_cuda)
{
    if (dti_cuda_device_count() == 0) {
        printf("unit_ops: no GPU here, the CUDA reductions are not tested\n");
        return;
    }
    dti_cuda_set_device(0);
    static const size_t big[] = { 0, 1, 2, 3, 5, 7, 8, 9, 17, 1001, 4099, (1 << 20) + 3 };
    for (int t = 0; t < 5; t++)
        for (int o = 0; o < 4; o++)
            for (size_t c = 0; c < sizeof big / sizeof big[0]; c++)
                for (int p = 0; p < (int)(sizeof places / sizeof places[0]); p++) {
                    size_t count = big[c];
                    bufs b = make_case(count, (dt_dtype)t, (dt_op)o);
                    void *got = malloc(b.nbytes);
                    run_on_gpu(&b, count, (dt_dtype)t, (dt_op)o, p, got);
                    /* Against the CPU twin: the same values (max and min may pick either
                     * of +0 and -0), the guard untouched, the input unchanged. */
                    memcpy(b.want, b.io, b.nbytes);
                    dt_reduce_cpu(b.in0, b.want, count, (dt_dtype)t, (dt_op)o);
                    char path[96];
                    snprintf(path, sizeof path, "dti_cuda_reduce vs CPU, offsets %d %d %d%s",
                             places[p].in, places[p].src, places[p].dst,
                             places[p].in_place ? " in place" : "");
                    compare(&b, got, count, (dt_dtype)t, (dt_op)o, path);
                    free(got);
                    free_case(&b);
                }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("ops");
    tcase_add_loop_test(tc, test_reduce_cpu, 0, 5);
    tcase_add_test(tc, test_half_rounding);
    tcase_add_test(tc, test_bf16_rounding);
    tcase_add_test(tc, test_reduce_cuda);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
