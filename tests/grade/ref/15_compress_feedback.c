/* Exercise 15, dtlab's own answer: lib/parallel/compress.c's sign codec, which packs 32
 * signs to a 32-bit word after a word holding the scale (dti_encode, dti_decode). The
 * message's byte b is byte b % 4 of word 1 + b / 4, counted from the lowest: the same
 * bits, in the same order, as the exercise's bytes. dti_encode with an error buffer is
 * the error-feedback step itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "exercises.h"
#include "parallel/parallel_internal.h"

/* x (n floats, with the error err added when not NULL) encoded as dtlab encodes a
 * chunk, its bytes copied out to bits; returns the scale. */
static float encode(const float *x, float *err, size_t n, unsigned char *bits)
{
    size_t W = dti_codec_words(DT_COMPRESS_SIGN, n);
    uint32_t *w = malloc(W * sizeof *w);
    DT_REQUIRE(w != NULL, "out of memory");
    dti_encode(DT_COMPRESS_SIGN, x, n, err, w);
    for (size_t b = 0; b < (n + 7) / 8; b++)
        bits[b] = (unsigned char)(w[1 + b / 4] >> (8 * (b % 4)));
    float s;
    memcpy(&s, &w[0], sizeof s);
    free(w);
    return s;
}

float ex_sign_compress(const float *v, size_t n, unsigned char *bits)
{
    return encode(v, NULL, n, bits);
}

void ex_sign_decompress(const unsigned char *bits, float scale, size_t n, float *out)
{
    size_t W = dti_codec_words(DT_COMPRESS_SIGN, n);
    uint32_t *w = calloc(W, sizeof *w);
    DT_REQUIRE(w != NULL, "out of memory");
    memcpy(&w[0], &scale, sizeof scale);
    for (size_t b = 0; b < (n + 7) / 8; b++)
        w[1 + b / 4] |= (uint32_t)bits[b] << (8 * (b % 4));
    dti_decode(DT_COMPRESS_SIGN, w, n, out, 0);
    free(w);
}

size_t ex_ef_step(const float *g, float *e, size_t n, unsigned char *bits, float *scale,
                  float *update)
{
    *scale = encode(g, e, n, bits);             /* encodes g + e; e becomes the loss */
    ex_sign_decompress(bits, *scale, n, update);
    return (n + 7) / 8 + sizeof *scale;
}
