/* The helpers the unit suites share (tests/unit.h says what each does): random numbers
 * that reproduce, buffers of floats and doubles, float results held to a double
 * reference, and central differences. Linked into every unit suite (the Makefile's
 * $(UNIT) rule); test code only, so a failed allocation fails the test. */
#include "unit.h"
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* ==== the GPU ==== */

int unit_use_gpu(int gpu)
{
    if (gpu) {
        dti_cuda_set_device(0);
        dti_me.gpu_count = dti_cuda_device_count();
    }
    return gpu;
}

/* ==== random numbers ==== */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

void unit_seed(uint64_t seed)
{
    rng = seed;
}

double unit_uniform(double lo, double hi)       /* xorshift64*: failures reproduce */
{
    rng ^= rng >> 12; rng ^= rng << 25; rng ^= rng >> 27;
    uint64_t r = rng * 0x2545f4914f6cdd1dull;
    return lo + (hi - lo) * ((double)(r >> 11) / 9007199254740992.0);
}

/* ==== buffers ==== */

static void *alloc(size_t nbytes)
{
    void *p = malloc(nbytes ? nbytes : 1);
    ck_assert_ptr_nonnull(p);
    return p;
}

float *unit_random_floats(size_t n, double lo, double hi)
{
    float *p = alloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = (float)unit_uniform(lo, hi);
    return p;
}

float *unit_nan_floats(size_t n)
{
    float *p = alloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

float *unit_copy_floats(const float *src, size_t n)
{
    float *p = alloc(n * sizeof *p);
    memcpy(p, src, n * sizeof *p);
    return p;
}

double *unit_doubles(size_t n)
{
    return alloc(n * sizeof(double));
}

double *unit_to_double(const float *src, size_t n)
{
    double *p = alloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = src[i];
    return p;
}

/* ==== checking ==== */

void unit_require_near(const float *got, const double *want, size_t n, double tol,
                       double least, const char *what)
{
    double scale = least;
    for (size_t i = 0; i < n; i++)
        scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= tol * scale))
            ck_abort_msg("%s[%zu] = %.9g, want %.9g (tolerance %.3g)", what, i,
                         (double)got[i], want[i], tol * scale);
}

/* The error is ~h^2, and rounding ~1e-16/h: about 1e-10 here, far below float's 1e-7. */
void unit_numeric_grad(unit_fn f, const void *ctx, double *v, size_t n, double *g)
{
    const double h = 1e-5;
    for (size_t j = 0; j < n; j++) {
        double keep = v[j];
        v[j] = keep + h;
        double up = f(ctx);
        v[j] = keep - h;
        double down = f(ctx);
        v[j] = keep;
        g[j] = (up - down) / (2 * h);
    }
}
