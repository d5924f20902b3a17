/* IEEE binary16 <-> binary32 in software (see half.h).
 *
 *     half:   s eeeee mmmmmmmmmm              bias 15
 *     float:  s eeeeeeee mmmmmmmmmmmmmmmmmmmmmmm   bias 127
 *
 * half -> float is exact: every half is a float. float -> half drops 13 mantissa bits
 * (more for results in the subnormal range) and rounds to nearest, ties to even. */
#include <string.h>
#include "half.h"

static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float float_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float dt_half_to_float(dt_half h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;

    if (exp == 0x1f)                          /* inf or NaN: keep the payload, quiet */
        return float_of(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        if (man == 0)                         /* +-0 */
            return float_of(sign);
        /* subnormal: man * 2^-24, normalise it for the float */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        man &= 0x3ff;
        return float_of(sign | (uint32_t)(127 - 15 - e) << 23 | (man << 13));
    }
    return float_of(sign | (exp - 15 + 127) << 23 | (man << 13));
}

dt_half dt_float_to_half(float f)
{
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7fffffffu;

    if (abs >= 0x7f800000u)                   /* inf, or NaN kept quiet */
        return sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 | ((abs >> 13) & 0x3ff) : 0);
    if (abs >= 0x477ff000u)                   /* >= 65520 rounds to inf */
        return sign | 0x7c00;

    int exp = (int)(abs >> 23) - 127 + 15;    /* the half's biased exponent */
    uint32_t man = (abs & 0x7fffff) | 0x800000;   /* 24 bits with the implicit one */
    int shift;                                /* bits to drop from man */
    if (exp >= 1) {
        shift = 13;
    } else {                                  /* subnormal half, or rounds to 0 */
        shift = 14 - exp;
        if (shift > 25)
            return sign;
        exp = 0;
    }
    uint32_t kept = man >> shift;
    uint32_t rest = man & ((1u << shift) - 1);
    uint32_t half_way = 1u << (shift - 1);
    if (rest > half_way || (rest == half_way && (kept & 1)))
        kept++;                               /* may carry into the exponent: fine */
    if (exp == 0)
        return sign | (uint16_t)kept;         /* kept includes no implicit bit */
    return sign | (uint16_t)(((uint32_t)exp << 10) + (kept - 0x400));
}

void dt_halves_to_floats(const dt_half *in, float *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = dt_half_to_float(in[i]);
}

void dt_floats_to_halves(const float *in, dt_half *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = dt_float_to_half(in[i]);
}

/* bf16 is a float's top half: widening appends 16 zero bits; narrowing rounds the low
 * 16 bits away, to nearest even (adding 0x7fff, plus the kept part's lowest bit, carries
 * into the top half exactly when the rest is above half-way, or at it with an odd top),
 * which overflows to inf by itself; a NaN keeps its top bits and is made quiet. */
float dt_bf16_to_float(dt_bf16 h)
{
    return float_of((uint32_t)h << 16);
}

dt_bf16 dt_float_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)              /* NaN */
        return (dt_bf16)((u >> 16) | 0x40);
    return (dt_bf16)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
