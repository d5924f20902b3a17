/* Local reductions on the CPU, and the dispatch to the GPU (see ops.h). */
#include "ops.h"
#include "buf.h"
#include "cuda.h"
#include "half.h"
#include "internal.h"
#include "trace.h"

/* One loop per (type, op): plain loops the compiler vectorises. */
#define LOOP(T, EXPR) \
    do { const T *a = in, *b = src; T *d = dst; \
         for (size_t i = 0; i < count; i++) { T x = a[i], y = b[i]; d[i] = (EXPR); } \
    } while (0)

#define ALL_OPS(T) \
    switch (op) { \
    case DT_OP_SUM:  LOOP(T, y + x); break; \
    case DT_OP_MAX:  LOOP(T, x > y ? x : y); break; \
    case DT_OP_MIN:  LOOP(T, x < y ? x : y); break; \
    case DT_OP_PROD: LOOP(T, y * x); break; \
    }

static float apply_f(float x, float y, dt_op op)
{
    switch (op) {
    case DT_OP_SUM:  return y + x;
    case DT_OP_MAX:  return x > y ? x : y;
    case DT_OP_MIN:  return x < y ? x : y;
    case DT_OP_PROD: return y * x;
    }
    return 0;
}

/* dst = src op in, on the host; dst may be src. */
static void reduce_cpu(const void *in, const void *src, void *dst, size_t count,
                       dt_dtype type, dt_op op)
{
    switch (type) {
    case DT_F32: ALL_OPS(float); break;
    case DT_F64: ALL_OPS(double); break;
    case DT_I32: ALL_OPS(int); break;
    case DT_F16: {
        /* half: widen to float, apply, round back to nearest even */
        const dt_half *a = in, *b = src;
        dt_half *d = dst;
        for (size_t i = 0; i < count; i++)
            d[i] = dt_float_to_half(apply_f(dt_half_to_float(a[i]), dt_half_to_float(b[i]), op));
        break;
    }
    case DT_B16: {                            /* bf16: the same */
        const dt_bf16 *a = in, *b = src;
        dt_bf16 *d = dst;
        for (size_t i = 0; i < count; i++)
            d[i] = dt_float_to_bf16(apply_f(dt_bf16_to_float(a[i]), dt_bf16_to_float(b[i]), op));
        break;
    }
    }
}

void dt_reduce_cpu(const void *in, void *inout, size_t count, dt_dtype type, dt_op op)
{
    reduce_cpu(in, inout, inout, count, type, op);
}

void dti_reduce_into(const void *in, const void *src, void *dst, int count,
                     MPI_Datatype type, MPI_Op op)
{
    DT_REQUIRE(count >= 0, "reduction of a negative count %d", count);
    dt_dtype t = dt_dtype_of(type);
    dt_op o = dt_op_of(op);
    if (count == 0)
        return;
    DT_REQUIRE(in != NULL && src != NULL && dst != NULL, "reduction with a NULL buffer");
    int on_gpu = dt_is_device_ptr(dst);
    DT_REQUIRE(on_gpu == dt_is_device_ptr(in) && on_gpu == dt_is_device_ptr(src),
               "reduction over buffers some on the GPU and some on the host");
    double t0 = dt_trace_now();
    if (on_gpu)
        dti_cuda_reduce(in, src, dst, (size_t)count, t, o);
    else
        reduce_cpu(in, src, dst, (size_t)count, t, o);
    dt_trace_add(DT_EV_REDUCE, -1, (size_t)count * dt_type_size(type), t0, dt_trace_now());
}

void dt_reduce_local(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op)
{
    dti_reduce_into(in, inout, inout, count, type, op);
}

/* ==== DT_HALF's ops for MPI's own collectives (dt_half_mpi_op, buf.h) ==== */

static MPI_Op half_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
static MPI_Op bf16_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};

/* MPI's user-op signature; one function per op, because MPI does not say which op. */
#define HALF_OP(name, OP) \
    static void name(void *in, void *inout, int *len, MPI_Datatype *type) \
    { (void)type; dt_reduce_cpu(in, inout, (size_t)*len, DT_F16, OP); }
HALF_OP(half_sum, DT_OP_SUM)
HALF_OP(half_max, DT_OP_MAX)
HALF_OP(half_min, DT_OP_MIN)
HALF_OP(half_prod, DT_OP_PROD)
#define BF16_OP(name, OP) \
    static void name(void *in, void *inout, int *len, MPI_Datatype *type) \
    { (void)type; dt_reduce_cpu(in, inout, (size_t)*len, DT_B16, OP); }
BF16_OP(bf16_sum, DT_OP_SUM)
BF16_OP(bf16_max, DT_OP_MAX)
BF16_OP(bf16_min, DT_OP_MIN)
BF16_OP(bf16_prod, DT_OP_PROD)

MPI_Op dt_half_mpi_op(MPI_Op op)
{
    DT_REQUIRE(half_ops[0] != MPI_OP_NULL, "dt_half_mpi_op needs dt_init first");
    return half_ops[dt_op_of(op)];
}

MPI_Op dt_bf16_mpi_op(MPI_Op op)
{
    DT_REQUIRE(bf16_ops[0] != MPI_OP_NULL, "dt_bf16_mpi_op needs dt_init first");
    return bf16_ops[dt_op_of(op)];
}

void dti_ops_init(void)
{
    MPI_User_function *fns[4] = {half_sum, half_max, half_min, half_prod};
    MPI_User_function *bfns[4] = {bf16_sum, bf16_max, bf16_min, bf16_prod};
    for (int i = 0; i < 4; i++) {
        DT_CHECK_MPI(MPI_Op_create(fns[i], 1, &half_ops[i]));
        DT_CHECK_MPI(MPI_Op_create(bfns[i], 1, &bf16_ops[i]));
    }
}

void dti_ops_fini(void)
{
    for (int i = 0; i < 4; i++)
        if (half_ops[i] != MPI_OP_NULL)
            MPI_Op_free(&half_ops[i]);
    for (int i = 0; i < 4; i++)
        if (bf16_ops[i] != MPI_OP_NULL)
            MPI_Op_free(&bf16_ops[i]);
}
