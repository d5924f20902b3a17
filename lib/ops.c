/* Local reductions on the CPU, and the dispatch to the GPU (see ops.h). */
#include "ops.h"
#include "cuda.h"
#include "half.h"
#include "trace.h"

/* One loop per (type, op): plain loops the compiler vectorises. */
#define LOOP(T, EXPR) \
    do { const T *a = in; T *b = inout; \
         for (size_t i = 0; i < count; i++) { T x = a[i], y = b[i]; b[i] = (EXPR); } \
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

void dt_reduce_cpu(const void *in, void *inout, size_t count, dt_dtype type, dt_op op)
{
    switch (type) {
    case DT_F32: ALL_OPS(float); break;
    case DT_F64: ALL_OPS(double); break;
    case DT_I32: ALL_OPS(int); break;
    case DT_F16: {
        /* half: widen to float, apply, round back to nearest even */
        const dt_half *a = in;
        dt_half *b = inout;
        for (size_t i = 0; i < count; i++)
            b[i] = dt_float_to_half(apply_f(dt_half_to_float(a[i]), dt_half_to_float(b[i]), op));
        break;
    }
    }
}

void dt_reduce_local(const void *in, void *inout, int count, MPI_Datatype type, MPI_Op op)
{
    DT_REQUIRE(count >= 0, "dt_reduce_local: negative count %d", count);
    dt_dtype t = dt_dtype_of(type);
    dt_op o = dt_op_of(op);
    if (count == 0)
        return;
    DT_REQUIRE(in != NULL && inout != NULL, "dt_reduce_local: NULL buffer");
    int on_gpu = dt_is_device_ptr(inout);
    DT_REQUIRE(on_gpu == dt_is_device_ptr(in),
               "dt_reduce_local: one buffer is on the GPU and the other on the host");
    double t0 = dt_trace_now();
    if (on_gpu)
        dti_cuda_reduce(in, inout, (size_t)count, t, o);
    else
        dt_reduce_cpu(in, inout, (size_t)count, t, o);
    dt_trace_add(DT_EV_REDUCE, -1, (size_t)count * dt_type_size(type), t0, dt_trace_now());
}
