/* Exercise 15: gradient compression with error feedback. A gradient of n floats
 * travels as n sign bits and one float, the scale mean |g|: 32 times fewer bytes.
 * Sign compression alone loses a lot each step, and always in the same direction;
 * error feedback keeps what was lost, e, and adds it to the next step's gradient, so
 * nothing is lost for good, only delayed.
 * No MPI here: the message is built and counted, not sent.
 *
 * The task, the pictures and hints: README.md beside this file.
 * Test it: make grade EX=15 */
#include <math.h>
#include "exercises.h"

float ex_sign_compress(const float *v, size_t n, unsigned char *bits)
{
    double sum = 0;
    unsigned b = 0;
    for (size_t i = 0; i < n; i++) {
        sum += fabs(v[i]);
        b = b >> 1 | (unsigned)(v[i] >= 0) << 7;       /* element i enters at the top */
        if (i % 8 == 7 || i == n - 1) {                 /* a byte full, or v's end */
            bits[i / 8] = (unsigned char)(b >> (7 - i % 8));    /* its first at bit 0 */
            b = 0;
        }
    }
    return n ? (float)(sum / (double)n) : 0.0f;
}

void ex_sign_decompress(const unsigned char *bits, float scale, size_t n, float *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] = bits[i / 8] >> (i % 8) & 1 ? scale : -scale;
}

size_t ex_ef_step(const float *g, float *e, size_t n, unsigned char *bits, float *scale,
                  float *update)
{
    for (size_t i = 0; i < n; i++)
        update[i] = g[i] + e[i];                    /* v = g + e, in update for now */
    *scale = ex_sign_compress(update, n, bits);
    ex_sign_decompress(bits, *scale, n, update);    /* update = C(v) */
    for (size_t i = 0; i < n; i++)
        e[i] = g[i] + e[i] - update[i];             /* e = v - C(v) */
    return (n + 7) / 8 + sizeof *scale;
}
