/* The GPT's data (gpt.h): a text, one token per byte, cut into batches of sequences. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "gpt.h"
#include "nn_internal.h"

/* Texts every Debian and Ubuntu system carries: base-files, which is Essential
 * (installed on every such system), puts the licences there. */
const char *const dt_text_default_paths[] = {
    "/usr/share/common-licenses/GPL-3",
    "/usr/share/common-licenses/GPL-2",
    NULL
};

static int fail(char *err, size_t len, const char *fmt, const char *path, const char *why)
{
    if (err && len)
        snprintf(err, len, fmt, path, why);
    return -1;
}

int dt_text_load(dt_text *t, const char *path, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return fail(err, errlen, "cannot read the text '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    DT_REQUIRE(buf != NULL, "out of host memory");
    int bad = 0;                          /* errno of a failed read (a directory: EISDIR) */
    for (;;) {
        if (n == cap && cap >= ((size_t)1 << 30)) {
            fclose(f);
            free(buf);
            return fail(err, errlen, "the text '%s' is %s: give --text a smaller file",
                        path, "larger than 1 GiB");
        }
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            DT_REQUIRE(buf != NULL, "out of host memory");
        }
        errno = 0;
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            bad = ferror(f) ? (errno ? errno : EIO) : 0;
            break;
        }
    }
    fclose(f);
    if (bad) {
        free(buf);
        return fail(err, errlen, "cannot read the text '%s': %s", path, strerror(bad));
    }
    if (n == 0) {
        free(buf);
        return fail(err, errlen, "the text '%s' is %s: there is nothing to learn", path,
                    "empty");
    }
    size_t control = 0, nul = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = buf[i];
        nul += ch == 0;
        control += (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r' && ch != '\f')
                   || ch == 0x7f;
    }
    if (nul || control * 20 > n) {
        free(buf);
        return fail(err, errlen, "'%s' is not text (%s): give --text a text file", path,
                    nul ? "it holds NUL bytes" : "more than 1 byte in 20 is a control "
                    "character");
    }
    t->n = (int)n;
    t->tok = buf;
    snprintf(t->source, sizeof t->source, "%s", path);
    return 0;
}

void dt_text_free(dt_text *t)
{
    if (t == NULL)
        return;
    free(t->tok);
    memset(t, 0, sizeof *t);
}

/* ==== a text made from a seed ==== */

static const char *const nouns[] = {
    "cat", "dog", "rank", "ring", "model", "worker", "server", "message", "bucket",
    "layer", "token", "head", "stage", "shard", "batch", "river", "garden", "teacher"
};
static const char *const verbs[] = {
    "sends", "sees", "holds", "reduces", "gathers", "waits for", "trains", "finds",
    "follows", "splits", "keeps", "passes"
};
static const char *const adjectives[] = {
    "small", "quiet", "busy", "first", "last", "red", "slow", "fast", "old", "new"
};

static const char *pick(const char *const *words, int n, uint64_t *s)
{
    return words[dti_nn_rand(s) % (uint64_t)n];
}

#define COUNT(a) ((int)(sizeof a / sizeof a[0]))

void dt_text_generate(dt_text *t, int n, unsigned long long seed)
{
    DT_REQUIRE(n >= 64, "dt_text_generate: %d bytes (at least 64)", n);
    memset(t, 0, sizeof *t);
    t->tok = malloc((size_t)n + 128);
    DT_REQUIRE(t->tok != NULL, "out of host memory");
    uint64_t s = (uint64_t)seed ^ 0x5851f42d4c957f2dull;
    int len = 0;
    char sentence[160];
    while (len < n) {
        /* "the quiet rank sends the last worker.": the words drawn one statement at a
         * time (C leaves the order in which arguments are evaluated open), the second
         * adjective, when there is one, followed by its space */
        const char *a1 = pick(adjectives, COUNT(adjectives), &s);
        const char *n1 = pick(nouns, COUNT(nouns), &s), *v = pick(verbs, COUNT(verbs), &s);
        const char *a2 = dti_nn_rand(&s) % 2 ? pick(adjectives, COUNT(adjectives), &s) : "";
        const char *n2 = pick(nouns, COUNT(nouns), &s);
        int k = snprintf(sentence, sizeof sentence, "the %s %s %s the %s%s%s. ", a1, n1, v,
                         a2, *a2 ? " " : "", n2);
        for (int i = 0; i < k && len < n; i++)
            t->tok[len++] = (unsigned char)sentence[i];
        if (dti_nn_rand(&s) % 6 == 0 && len < n)
            t->tok[len++] = '\n';
    }
    t->n = len;
    snprintf(t->source, sizeof t->source, "%d bytes of sentences made from seed %llu",
             len, seed);
}

void dt_text_default(dt_text *t, unsigned long long seed)
{
    char err[300];
    for (int i = 0; dt_text_default_paths[i]; i++)
        if (dt_text_load(t, dt_text_default_paths[i], err, sizeof err) == 0)
            return;
    dt_text_generate(t, 32768, seed);
}

/* ==== batches ==== */

void dt_text_batch(const dt_text *t, int step, int B, int T, int first, int count,
                   int *x, int *y)
{
    DT_REQUIRE(t->n > T, "the text has %d tokens, and a sequence of %d needs %d", t->n, T,
               T + 1);
    DT_REQUIRE(first >= 0 && count >= 0 && first + count <= B, "dt_text_batch: sequences "
               "%d..%d of %d", first, first + count, B);
    uint64_t span = (uint64_t)(t->n - T);
    for (int i = 0; i < count; i++) {
        /* sequence j of the run (j = step*B + i, whichever rank reads it) starts at a
         * place drawn from j alone: a batch mixes the whole text, as a shuffled data
         * loader's does (contiguous windows would make each batch one passage) */
        uint64_t j = (uint64_t)step * B + first + i, s = j ^ 0x243f6a8885a308d3ull;
        uint64_t start = dti_nn_rand(&s) % span;
        const unsigned char *src = t->tok + start;
        for (int k = 0; k < T; k++) {
            x[(size_t)i * T + k] = src[k];
            y[(size_t)i * T + k] = src[k + 1];
        }
    }
}

double dt_text_unigram_bits(const dt_text *t)
{
    double count[256] = { 0 }, bits = 0.0;
    for (int i = 0; i < t->n; i++)
        count[t->tok[i]] += 1.0;
    for (int v = 0; v < 256; v++)
        if (count[v] > 0)
            bits -= count[v] / t->n * log2(count[v] / t->n);
    return bits;
}
