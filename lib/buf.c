/* Buffers, datatypes and ops (see buf.h; DT_HALF's MPI ops: ops.c), and the collectives'
 * scratch (internal.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "cuda.h"
#include "internal.h"

MPI_Datatype dt_half_type = MPI_DATATYPE_NULL;
MPI_Datatype dt_bf16_type = MPI_DATATYPE_NULL;

/* ==== datatypes and ops ==== */

dt_dtype dt_dtype_of(MPI_Datatype type)
{
    if (type == MPI_FLOAT)  return DT_F32;
    if (type == MPI_DOUBLE) return DT_F64;
    if (type == MPI_INT)    return DT_I32;
    if (type == DT_HALF && type != MPI_DATATYPE_NULL) return DT_F16;
    if (type == DT_BFLOAT16 && type != MPI_DATATYPE_NULL) return DT_B16;
    DT_REQUIRE(0, "unsupported datatype: dtlab knows MPI_FLOAT, MPI_DOUBLE, MPI_INT, "
                  "DT_HALF and DT_BFLOAT16 (the last two only after dt_init)");
}

dt_op dt_op_of(MPI_Op op)
{
    if (op == MPI_SUM)  return DT_OP_SUM;
    if (op == MPI_MAX)  return DT_OP_MAX;
    if (op == MPI_MIN)  return DT_OP_MIN;
    if (op == MPI_PROD) return DT_OP_PROD;
    DT_REQUIRE(0, "unsupported op: dtlab knows MPI_SUM, MPI_MAX, MPI_MIN and MPI_PROD");
}

static const size_t type_sizes[] = {4, 8, 4, 2, 2};
static const char *const type_names[] = {"float", "double", "int", "half", "bf16"};
static const char *const op_names[] = {"sum", "max", "min", "prod"};

size_t dt_type_size(MPI_Datatype type) { return type_sizes[dt_dtype_of(type)]; }
const char *dt_type_name(MPI_Datatype type) { return type_names[dt_dtype_of(type)]; }
const char *dt_op_name(MPI_Op op) { return op_names[dt_op_of(op)]; }

MPI_Datatype dt_type_from_name(const char *name)
{
    MPI_Datatype types[] = {MPI_FLOAT, MPI_DOUBLE, MPI_INT, DT_HALF, DT_BFLOAT16};
    for (int i = 0; i < 5; i++)
        if (strcmp(name, type_names[i]) == 0)
            return types[i];
    return MPI_DATATYPE_NULL;
}

MPI_Op dt_op_from_name(const char *name)
{
    MPI_Op ops[] = {MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, op_names[i]) == 0)
            return ops[i];
    return MPI_OP_NULL;
}

void dti_buf_init(void)
{
    DT_CHECK_MPI(MPI_Type_contiguous(2, MPI_BYTE, &dt_half_type));
    DT_CHECK_MPI(MPI_Type_commit(&dt_half_type));
    DT_CHECK_MPI(MPI_Type_contiguous(2, MPI_BYTE, &dt_bf16_type));
    DT_CHECK_MPI(MPI_Type_commit(&dt_bf16_type));
}

void dti_buf_fini(void)
{
    if (dt_half_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&dt_half_type);
    if (dt_bf16_type != MPI_DATATYPE_NULL)
        MPI_Type_free(&dt_bf16_type);
}

/* ==== memory ==== */

void *dt_malloc(size_t nbytes, dt_device_kind where)
{
    size_t n = nbytes ? nbytes : 1;     /* a valid, distinct pointer even for 0 bytes */
    if (where == DT_CUDA) {
        DT_REQUIRE(dti_gpu_count() > 0, "dt_malloc(DT_CUDA) but this rank has no GPU");
        return dti_cuda_malloc(n);
    }
    void *p = malloc(n);
    DT_REQUIRE(p != NULL, "out of host memory allocating %zu bytes", nbytes);
    return p;
}

void dt_free(void *p)
{
    if (p == NULL)
        return;
    if (dt_is_device_ptr(p))
        dti_cuda_free(p);
    else
        free(p);
}

void *dt_malloc_like(const void *p, size_t nbytes)
{
    return dt_malloc(nbytes, dt_is_device_ptr(p) ? DT_CUDA : DT_CPU);
}

int dt_is_device_ptr(const void *p)
{
    return p != NULL && dti_gpu_count() > 0 && dti_cuda_is_device_ptr(p);
}

/* A copy that crosses between host and GPU is counted in the device books
 * (device_books.c) under what (and what + 1, its bytes), and recorded in the trace as
 * one d2h or h2d event, coll "memcpy", phase name (trace.h): the books say how many, the
 * trace when, and whether inside a step. A copy between two device buffers stays on the
 * GPU, and one between host buffers never leaves the host: neither is counted. */
static void copy_counted(void *dst, const void *src, size_t nbytes, int what,
                         const char *name)
{
    if (nbytes == 0 || dst == src)
        return;
    int d = dt_is_device_ptr(dst), s = dt_is_device_ptr(src);
    if (!d && !s) {
        memcpy(dst, src, nbytes);
        return;
    }
    if (d == s) {
        dti_cuda_memcpy(dst, src, nbytes);
        return;
    }
    dti_book(what, 1);
    dti_book(what + 1, nbytes);
    int traced = dt_trace_enabled();    /* the clock is read only when recording */
    double t0 = traced ? dt_trace_now() : 0;
    dti_cuda_memcpy(dst, src, nbytes);
    if (traced)
        dti_trace_add_named(d ? DT_EV_H2D : DT_EV_D2H, "memcpy", name, nbytes, t0,
                            dt_trace_now());
}

void dt_memcpy(void *dst, const void *src, size_t nbytes)
{
    copy_counted(dst, src, nbytes, DTI_BOOK_TENSOR, "tensor");
}

void dt_memcpy_input(void *dst, const void *src, size_t nbytes)
{
    copy_counted(dst, src, nbytes, DTI_BOOK_INPUT, "batch");
}

void dt_memcpy_number(void *dst, const void *src, size_t nbytes)
{
    copy_counted(dst, src, nbytes, DTI_BOOK_NUMBER, "number");
}

void dt_memzero(void *p, size_t nbytes)
{
    if (nbytes == 0)
        return;
    if (dt_is_device_ptr(p))
        dti_cuda_memzero(p, nbytes);
    else
        memset(p, 0, nbytes);
}

/* ==== scratch ====
 *
 * One table per thread, found through a pthread key whose destructor frees it when the
 * thread ends (a _Thread_local pointer alone would leak: C runs no code at thread exit).
 *
 *     level (0, or 1 inside a step hook) x place (host, device) x slot -> {p, nbytes}
 *
 * A slot grows to at least 1.5 times its old size, so a size that creeps up call after
 * call reallocates a few times, not every call; it never shrinks. */
enum { LEVELS = 2 };
typedef struct { void *p; size_t nbytes; } scratch_buf;
typedef struct {
    int level;
    scratch_buf buf[LEVELS][2][DTI_SCRATCH_SLOTS];      /* [level][on device][slot] */
} scratch_table;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_release(void *arg)
{
    scratch_table *t = arg;
    if (t == NULL)
        return;
    for (int l = 0; l < LEVELS; l++)
        for (int d = 0; d < 2; d++)
            for (int s = 0; s < DTI_SCRATCH_SLOTS; s++) {
                void *p = t->buf[l][d][s].p;
                if (p != NULL && d)
                    dti_cuda_free(p);
                else
                    free(p);
            }
    free(t);
}

static void scratch_key_make(void)
{
    DT_REQUIRE(pthread_key_create(&scratch_key, scratch_release) == 0,
               "cannot create a thread-local key for the collectives' scratch");
}

static scratch_table *scratch_mine(void)
{
    pthread_once(&scratch_once, scratch_key_make);
    scratch_table *t = pthread_getspecific(scratch_key);
    if (t == NULL) {
        t = calloc(1, sizeof *t);
        DT_REQUIRE(t != NULL, "out of host memory");
        DT_REQUIRE(pthread_setspecific(scratch_key, t) == 0, "pthread_setspecific failed");
    }
    return t;
}

void *dti_scratch(int slot, size_t nbytes, const void *like)
{
    DT_REQUIRE(slot >= 0 && slot < DTI_SCRATCH_SLOTS, "no scratch slot %d", slot);
    scratch_table *t = scratch_mine();
    int dev = dt_is_device_ptr(like);
    scratch_buf *b = &t->buf[t->level][dev][slot];
    if (b->p == NULL || b->nbytes < nbytes) {
        size_t grow = b->nbytes + b->nbytes / 2;
        size_t n = nbytes > grow ? nbytes : grow;
        /* The old buffer may go at once: the operations that used it have all returned,
         * and every dtlab operation is complete when it returns (no copy or kernel of
         * ours is still reading it). */
        if (b->p != NULL && dev)
            dti_cuda_free(b->p);
        else
            free(b->p);
        b->p = NULL;                    /* never left dangling if the next line aborts */
        b->p = dt_malloc(n, dev ? DT_CUDA : DT_CPU);
        b->nbytes = n;
    }
    return b->p;
}

void dti_scratch_nest(int delta)
{
    scratch_table *t = scratch_mine();
    DT_REQUIRE(t->level + delta >= 0 && t->level + delta < LEVELS,
               "scratch nested %d deep: a step hook's collective may not run a hook",
               t->level + delta);
    t->level += delta;
}

void dti_scratch_fini(void)
{
    pthread_once(&scratch_once, scratch_key_make);
    scratch_release(pthread_getspecific(scratch_key));
    pthread_setspecific(scratch_key, NULL);
}
