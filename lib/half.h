/* IEEE 754 binary16 ("half", fp16) in software: 1 sign bit, 5 exponent bits (bias 15),
 * 10 mantissa bits. Largest finite value 65504, smallest subnormal 2^-24.
 *
 * float -> half rounds to nearest, ties to even, as hardware does; overflow gives inf,
 * NaN stays NaN (quiet). half -> float is exact. */
#ifndef DT_HALF_H
#define DT_HALF_H

#include <stdint.h>
#include <stddef.h>

typedef uint16_t dt_half;

float dt_half_to_float(dt_half h);
dt_half dt_float_to_half(float f);

/* Element-wise conversions of n values; the buffers must not overlap. Host memory. */
void dt_halves_to_floats(const dt_half *in, float *out, size_t n);
void dt_floats_to_halves(const float *in, dt_half *out, size_t n);

#endif /* DT_HALF_H */
