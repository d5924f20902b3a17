/* IEEE 754 binary16 ("half", fp16) in software: 1 sign bit, 5 exponent bits (bias 15),
 * 10 mantissa bits. Largest finite value 65504, smallest subnormal 2^-24.
 * And bfloat16 (bf16): a float's top 16 bits, 1 sign bit, 8 exponent bits (bias 127,
 * float's range: up to 3.4e38, normal down to 1.2e-38), 7 mantissa bits (3 significant
 * decimal digits, fp16 has 3.3).
 *
 * float -> half and float -> bf16 round to nearest, ties to even, as hardware does;
 * overflow gives inf, NaN stays NaN (quiet). half -> float and bf16 -> float are exact. */
#ifndef DT_HALF_H
#define DT_HALF_H

#include <stdint.h>
#include <stddef.h>

typedef uint16_t dt_half;
typedef uint16_t dt_bf16;

float dt_half_to_float(dt_half h);
dt_half dt_float_to_half(float f);

/* Element-wise conversions of n values; the buffers must not overlap. Host memory. */
void dt_halves_to_floats(const dt_half *in, float *out, size_t n);
void dt_floats_to_halves(const float *in, dt_half *out, size_t n);

float dt_bf16_to_float(dt_bf16 h);
dt_bf16 dt_float_to_bf16(float f);

#endif /* DT_HALF_H */
