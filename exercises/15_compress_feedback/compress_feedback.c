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
    /* TODO(exercise): bit i of the message is bit i % 8 of byte i / 8 (the lowest bit
     * first), 1 where v[i] >= 0. Write every one of the (n + 7) / 8 bytes (bits holds
     * anything on entry), with 0 in the bits past n of the last byte. Return the scale,
     * the mean of |v[i]|, summed in double; 0 when n is 0. */
    (void)v; (void)n; (void)bits;
    EX_TODO();
}

void ex_sign_decompress(const unsigned char *bits, float scale, size_t n, float *out)
{
    /* TODO(exercise): out[i] = +scale where bit i is 1, -scale where it is 0. */
    (void)bits; (void)scale; (void)n; (void)out;
    EX_TODO();
}

size_t ex_ef_step(const float *g, float *e, size_t n, unsigned char *bits, float *scale,
                  float *update)
{
    /* TODO(exercise): one step of error feedback.
     *     v = g + e                     what this step owes: the gradient and the debt
     *     message = compress(v)         bits and *scale, from v (not from g)
     *     update = decompress(message)  what every receiver adds
     *     e = v - update                what was lost, carried to the next step
     * update may serve as the scratch for v. Return the bytes of the message: the
     * packed bits and the scale. */
    (void)g; (void)e; (void)n; (void)bits; (void)scale; (void)update;
    EX_TODO();
}
