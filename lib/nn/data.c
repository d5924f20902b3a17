/* The data every mode trains on (see nn.h): a synthetic classification set made from a
 * seed, or MNIST-format IDX files; and the batches cut from either. */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "buf.h"
#include "nn.h"
#include "nn_internal.h"

/* ==== random numbers ==== */

/* splitmix64 (Steele, Lea and Flood): a counter stepped by the golden ratio, then mixed.
 * Small, fast, and any seed is a good one. */
uint64_t dti_nn_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double dti_nn_uniform(uint64_t *state)
{
    return (double)(dti_nn_rand(state) >> 11) * (1.0 / 9007199254740992.0);  /* 2^-53 */
}

/* Close to a standard normal: the sum of 12 uniforms has mean 6 and variance 1 (the
 * central limit theorem at work). Unlike Box-Muller it needs no log, sqrt or cos, whose
 * last bit may differ between C libraries, so the data set is the same everywhere. */
static double normalish(uint64_t *s)
{
    double sum = 0.0;
    for (int k = 0; k < 12; k++)
        sum += dti_nn_uniform(s);
    return sum - 6.0;
}

/* ==== the synthetic set ==== */

void dt_data_synthetic(dt_dataset *d, int n, int features, int classes,
                       unsigned long long seed)
{
    DT_REQUIRE(d != NULL, "dt_data_synthetic: d is NULL");
    DT_REQUIRE(n >= 1 && features >= 1 && classes >= 2,
               "synthetic data needs n >= 1, features >= 1, classes >= 2 (got %d, %d, %d)",
               n, features, classes);
    uint64_t s = (uint64_t)seed ^ 0x5ca1ab1e0ddba11ull;
    float *centre = malloc((size_t)classes * features * sizeof *centre);
    d->x = malloc((size_t)n * features * sizeof *d->x);
    d->y = malloc((size_t)n * sizeof *d->y);
    DT_REQUIRE(centre && d->x && d->y, "out of host memory for %d examples of %d features",
               n, features);
    d->n = n;
    d->features = features;
    d->classes = classes;
    /* centres uniform in [-1, 1]^features; the noise below (standard deviation 1 in
     * every feature) makes neighbouring classes overlap a little: the loss falls fast
     * at first, then settles above zero, as on real data */
    for (size_t i = 0; i < (size_t)classes * features; i++)
        centre[i] = (float)(2.0 * dti_nn_uniform(&s) - 1.0);
    /* labels 0, 1, ..., classes-1, 0, 1, ...: each class (nearly) equally often; then
     * shuffled (Fisher-Yates), so that every batch mixes the classes */
    for (int i = 0; i < n; i++)
        d->y[i] = i % classes;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(dti_nn_rand(&s) % (uint64_t)(i + 1));
        int t = d->y[i];
        d->y[i] = d->y[j];
        d->y[j] = t;
    }
    /* each example: its class's centre plus noise */
    for (int i = 0; i < n; i++) {
        const float *c_i = centre + (size_t)d->y[i] * features;  /* (features) */
        float *x_i = d->x + (size_t)i * features;                /* (features) */
        for (int f = 0; f < features; f++)
            x_i[f] = c_i[f] + (float)normalish(&s);
    }
    free(centre);
}

void dt_data_free(dt_dataset *d)
{
    if (d == NULL)
        return;
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

/* ==== MNIST's IDX files ==== */

/* An IDX file is a big-endian header and then the data, row-major, nothing else:
 *
 *     images:  00 00 08 03 | n | rows | cols | n*rows*cols bytes, one per pixel
 *     labels:  00 00 08 01 | n | n bytes, one label each
 *
 * (in the magic, 08 says "unsigned bytes" and 03 or 01 the number of dimensions; n, rows
 * and cols are 32-bit). Every size the header claims is checked against the file's
 * length before anything is allocated, so a corrupt header cannot ask for gigabytes. */

#define IDX_IMAGES 0x00000803u
#define IDX_LABELS 0x00000801u

static void say(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads a whole IDX file: checks the magic and that the file is exactly as long as its
 * header says (ndims 32-bit sizes after the magic, then one byte per element). Fills
 * dims and returns the data bytes (malloc'd, the caller frees), or NULL with err set. */
static unsigned char *read_idx(const char *path, const char *what, uint32_t magic,
                               int ndims, uint32_t *dims, char *err, size_t errlen)
{
    unsigned char head[16];
    size_t hlen = 4 + 4 * (size_t)ndims;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        say(err, errlen, "cannot open the %s file %s: %s", what, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        say(err, errlen, "cannot read the %s file %s: it is not a regular file", what, path);
        fclose(f);
        return NULL;
    }
    uint64_t flen = (uint64_t)st.st_size;
    if (flen < hlen || fread(head, 1, hlen, f) != hlen) {
        say(err, errlen, "the %s file %s is too short for an IDX header: %llu bytes, the "
            "header alone has %zu", what, path, (unsigned long long)flen, hlen);
        fclose(f);
        return NULL;
    }
    if (be32(head) != magic) {
        say(err, errlen, "the %s file %s is not an IDX %s file: it starts with 0x%08x, "
            "expected 0x%08x (is it still gzip-compressed?)", what, path, what,
            be32(head), magic);
        fclose(f);
        return NULL;
    }
    /* the element count, checked against the file's length one factor at a time, so
     * that the product cannot overflow: each partial product stays <= flen */
    uint64_t count = 1;
    for (int k = 0; k < ndims; k++) {
        dims[k] = be32(head + 4 + 4 * k);
        if (dims[k] == 0 || dims[k] > flen / count) {
            say(err, errlen, "the %s file %s is malformed or truncated: its header says "
                "dimension %d is %u, which %s", what, path, k, dims[k],
                dims[k] == 0 ? "leaves no data" : "is more than the file holds");
            fclose(f);
            return NULL;
        }
        count *= dims[k];
    }
    if (count != flen - hlen) {
        say(err, errlen, "the %s file %s is %s: its header promises %llu bytes of data, "
            "the file has %llu", what, path, count > flen - hlen ? "truncated" :
            "malformed (bytes after the data)", (unsigned long long)count,
            (unsigned long long)(flen - hlen));
        fclose(f);
        return NULL;
    }
    unsigned char *data = malloc(count);
    if (data == NULL || fread(data, 1, count, f) != count) {
        say(err, errlen, "cannot read the %s file %s: %s", what, path,
            data == NULL ? "out of memory" : "read error");
        free(data);
        fclose(f);
        return NULL;
    }
    fclose(f);
    return data;
}

int dt_data_load_idx(dt_dataset *d, const char *images, const char *labels,
                     char *err, size_t errlen)
{
    DT_REQUIRE(d && images && labels, "dt_data_load_idx: NULL argument");
    memset(d, 0, sizeof *d);
    if (err != NULL && errlen > 0)
        err[0] = 0;
    uint32_t idim[3], ldim[1];
    unsigned char *pix = read_idx(images, "images", IDX_IMAGES, 3, idim, err, errlen);
    if (pix == NULL)
        return -1;
    unsigned char *lab = read_idx(labels, "labels", IDX_LABELS, 1, ldim, err, errlen);
    if (lab == NULL) {
        free(pix);
        return -1;
    }
    int fail = 1;
    if (idim[0] != ldim[0]) {
        say(err, errlen, "%s holds %u images but %s holds %u labels: they must match",
            images, idim[0], labels, ldim[0]);
    } else if (idim[0] > (uint32_t)INT32_MAX || (uint64_t)idim[1] * idim[2] > INT32_MAX) {
        say(err, errlen, "%s is too large: %u images of %ux%u", images, idim[0], idim[1],
            idim[2]);
    } else {
        fail = 0;
    }
    if (fail) {
        free(pix);
        free(lab);
        return -1;
    }
    int n = (int)idim[0], features = (int)(idim[1] * idim[2]);
    d->x = malloc((size_t)n * features * sizeof *d->x);
    d->y = malloc((size_t)n * sizeof *d->y);
    if (d->x == NULL || d->y == NULL) {
        say(err, errlen, "out of memory for %d images of %d pixels", n, features);
        free(pix);
        free(lab);
        dt_data_free(d);
        return -1;
    }
    /* classes: 10 for MNIST's digits, or more if the labels go higher (a label is one
     * byte, so at most 256 classes) */
    int classes = 10;
    for (int i = 0; i < n; i++) {
        d->y[i] = lab[i];
        if (lab[i] + 1 > classes)
            classes = lab[i] + 1;
    }
    for (size_t i = 0; i < (size_t)n * features; i++)
        d->x[i] = (float)pix[i] / 255.0f;
    d->n = n;
    d->features = features;
    d->classes = classes;
    free(pix);
    free(lab);
    return 0;
}

/* ==== batches ==== */

void dt_data_batch(const dt_dataset *d, int step, int B, int first, int count,
                   float *x, int *y)
{
    DT_REQUIRE(d != NULL && d->n > 0, "dt_data_batch: empty data set");
    DT_REQUIRE(step >= 0 && B >= 1 && first >= 0 && count >= 0 && first + count <= B,
               "dt_data_batch: rows [%d, %d) of a batch of %d at step %d", first,
               first + count, B, step);
    DT_REQUIRE(count == 0 || (x && y), "dt_data_batch: x and y must not be NULL");
    size_t F = (size_t)d->features;
    for (int r = 0; r < count; r++) {
        /* 64-bit: step*B passes 2^31 in a long run on a big batch */
        size_t e = (size_t)(((uint64_t)step * (uint64_t)B + (uint64_t)(first + r)) %
                            (uint64_t)d->n);
        memcpy(x + r * F, d->x + e * F, F * sizeof *x);
        y[r] = d->y[e];
    }
}
