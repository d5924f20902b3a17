/* Re-cutting a checkpoint for another layout: a run on N ranks resumes one written on
 * M (or by hybrid with other --dp/--tp/--pp).
 *
 * Every region a mode saves says in its map (dti_ckpt_map) which parameters of the
 * whole model its elements hold, in dt_mlp's flat order (the order --dump writes):
 *
 *     ddp, serial, dp    "weights" 0,Psi and "state" 0,Psi: the whole model
 *     fsdp on M ranks    "weights.L" on rank k: layer L's parameters [k s, (k+1) s),
 *                        s = ceil(n_L / M), the tail padding
 *     tp                 a column-split layer: the rows lo..hi of W, one run, and of b;
 *                        a row-split one: columns lo..hi of every row of W, a run of
 *                        (hi - lo) every in_L (a strided span), and all of b
 *     pp                 whole layers, the stage's
 *
 * The new run's ranks register their regions the same way, for the new layout. Each
 * rank then walks its own map: for every run of parameters it holds, it finds the old
 * pieces (sorted by where they start) that cover it and copies their bytes. The old
 * shards it needs are read whole, each checked against its CRC-32 before use, so a
 * rank reads at least its own state and at most every shard: fsdp from 4 ranks to 2
 * reads two old shards per rank (exactly its new state), from 2 to 4 one old shard
 * (twice its new state); ddp reads rank 0's, the whole model.
 *
 * Optimizer state has width floats per parameter (momentum: 1; Adam's m and v, laid
 * side by side: 2), so a parameter's state moves with it. Padding (fsdp's tail) is
 * zero, as a fresh run has it. What has no map (compression's error feedback, a
 * residual of each rank's own rounding) cannot be re-cut: the run is refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "buf.h"
#include "checkpoint_internal.h"
#include "p2p.h"

/* One run of parameters an old shard holds: [start, start + len) of the whole model,
 * the element of start at byte off of shard number shard (k->shards[shard]). */
typedef struct {
    size_t start, len;
    int shard;
    unsigned long long off;
} piece;

static int piece_order(const void *a, const void *b)
{
    const piece *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* "start,len[,count,stride] ..." into a new array (*n of them): 0, or -1 when the text
 * is not that. */
static int parse_spans(const char *text, dti_span **out, int *n)
{
    *out = NULL;
    *n = 0;
    const char *p = text;
    while (*p) {
        unsigned long long v[4] = { 0, 0, 1, 0 };
        int used = 0, got = sscanf(p, "%llu,%llu%n,%llu,%llu%n", &v[0], &v[1], &used,
                                   &v[2], &v[3], &used);
        if ((got != 2 && got != 4) || used == 0 || v[2] < 1 ||
            (v[2] > 1 && v[3] < v[1]))
            return -1;
        *out = realloc(*out, (*n + 1) * sizeof **out);
        DT_REQUIRE(*out != NULL, "out of host memory");
        (*out)[(*n)++] = (dti_span){ v[0], v[1], v[2], v[3] };
        p += used;
        p += strspn(p, " ");
    }
    return 0;
}

/* The shards a rank needs, read once each, whole, and checked. */
typedef struct {
    dti_ckpt *k;
    char **data;                 /* [k->nshards], NULL: not read yet */
    unsigned long long *read;
    int *files;
} shard_cache;

static const char *shard_data(shard_cache *c, int i, char *why, size_t len)
{
    dti_ckpt *k = c->k;
    if (c->data[i])
        return c->data[i];
    const shard_info *s = &k->shards[i];
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", k->from, s->file);
    size_t n = 0;
    char *d = ck_read_file(path, (size_t)s->bytes, &n);
    if (d == NULL) {
        ck_say(why, len, "checkpoint %s: cannot read %s: %s%s", k->from, s->file,
               strerror(errno), errno == EFBIG ? " (larger than the manifest says)" : "");
        return NULL;
    }
    unsigned long crc = ck_crc_of(d, n);
    if (n != s->bytes || crc != s->crc) {
        ck_say(why, len, "checkpoint %s: %s is damaged: %zu bytes, CRC-32 %08lx; the "
               "manifest says %llu bytes, %08lx", k->from, s->file, n, crc, s->bytes,
               s->crc);
        free(d);
        return NULL;
    }
    *c->read += n;
    (*c->files)++;
    return c->data[i] = d;
}

static int shard_of_rank(const dti_ckpt *k, int rank)
{
    for (int i = 0; i < k->nshards; i++)
        if (k->shards[i].rank == rank)
            return i;
    return -1;
}

/* Every piece of the old shards that holds region name (width floats a parameter),
 * sorted by start: their count, or -1 with a sentence in why. */
static int old_pieces(dti_ckpt *k, const char *name, int width, piece **out, char *why,
                      size_t len)
{
    *out = NULL;
    int np = 0, found = 0;
    for (int i = 0; i < k->nmaps; i++) {
        const map_info *m = &k->maps[i];
        if (strcmp(m->name, name) != 0)
            continue;
        found = 1;
        int sh = shard_of_rank(k, m->rank);
        size_t bytes = 0;
        long long off = sh < 0 ? -1 : ck_region_find(k->shards[sh].regions, name, &bytes);
        dti_span *sp;
        int ns;
        if (m->width != width || off < 0 || parse_spans(m->spans, &sp, &ns) != 0) {
            ck_say(why, len, "checkpoint %s/manifest: the map of rank %d's '%s' does "
                   "not match its shard (width %d, this run's %d)", k->from, m->rank,
                   name, m->width, width);
            free(*out);
            return -1;
        }
        size_t elem = (size_t)width * sizeof(float), e = 0;
        for (int j = 0; j < ns; j++) {
            for (size_t b = 0; b < sp[j].count; b++, e += sp[j].len) {
                *out = realloc(*out, (np + 1) * sizeof **out);
                DT_REQUIRE(*out != NULL, "out of host memory");
                (*out)[np++] = (piece){ sp[j].start + b * sp[j].stride, sp[j].len, sh,
                                        (unsigned long long)off + e * elem };
            }
        }
        free(sp);
        if (e * elem > bytes) {
            ck_say(why, len, "checkpoint %s/manifest: rank %d's '%s' maps %zu "
                   "parameters into %zu bytes", k->from, m->rank, name, e, bytes);
            free(*out);
            return -1;
        }
    }
    if (!found) {
        ck_say(why, len, "checkpoint %s has no map of its '%s' (it was written by a "
               "dtlab that could not re-cut checkpoints): it resumes only on %s",
               k->from, name, k->old_layout);
        return -1;
    }
    qsort(*out, np, sizeof **out, piece_order);
    return np;
}

/* The last piece that starts at or before at (-1: none). */
static int piece_at(const piece *p, int np, size_t at)
{
    int lo = 0, hi = np;                 /* p[lo..hi) unknown; before lo: start <= at */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (p[mid].start <= at)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo - 1;
}

/* Fills region g (staged, host, zeroed) from the old pieces: "" or a sentence. */
static void fill(shard_cache *c, const region *g, char *staged, char *why, size_t len)
{
    dti_ckpt *k = c->k;
    piece *p;
    int np = old_pieces(k, g->name, g->width, &p, why, len);
    if (np < 0)
        return;
    size_t elem = (size_t)g->width * sizeof(float), e = 0;
    for (int j = 0; j < g->nspan && !why[0]; j++) {
        const dti_span *s = &g->span[j];
        for (size_t b = 0; b < s->count && !why[0]; b++) {
            size_t a = s->start + b * s->stride, end = a + s->len, at = a;
            while (at < end) {
                int i = piece_at(p, np, at);
                /* pieces that hold the same parameters (a bias every tp rank keeps)
                 * are alike: any one that covers at will do */
                while (i >= 0 && p[i].start + p[i].len <= at)
                    i--;
                if (i < 0) {
                    ck_say(why, len, "checkpoint %s: no shard holds parameter %zu of "
                           "'%s' (the old shards' maps leave it out)", k->from, at,
                           g->name);
                    break;
                }
                const char *d = shard_data(c, p[i].shard, why, len);
                if (d == NULL)
                    break;
                size_t stop = p[i].start + p[i].len < end ? p[i].start + p[i].len : end;
                memcpy(staged + (e + at - a) * elem,
                       d + p[i].off + (at - p[i].start) * elem, (stop - at) * elem);
                at = stop;
            }
            e += s->len;
        }
    }
    free(p);
}

/* Fills each region (staged in host memory, staged[i] for the run's regions, then
 * k->reg's) from the pieces of the old shards that hold its parameters; counts the
 * bytes and files read. "" or a sentence in why; nothing of the run's state changed. */
static void reshard_load(dti_run *r, dti_ckpt *k, const region *run, int nrun,
                         char **staged, unsigned long long *read, int *files, char *why,
                         size_t len)
{
    shard_cache c = { k, dti_calloc(k->nshards, sizeof(char *)), read, files };
    int n = nrun + k->nreg;
    for (int i = 0; i < n; i++) {
        const region *g = i < nrun ? &run[i] : &k->reg[i - nrun];
        staged[i] = dti_calloc(g->nbytes ? g->nbytes : 1, 1);
    }
    /* what cannot be re-cut, before anything is read */
    for (int i = 0; i < k->nreg && !why[0]; i++) {
        const region *g = &k->reg[i];
        if (g->width != 0)
            continue;
        if (strncmp(g->name, "error-", 6) == 0)
            ck_say(why, len, "checkpoint %s: --compress sign keeps each rank's own error "
                   "feedback (what its rounding lost, '%s'), which cannot be divided "
                   "among another number of ranks: resume it on %s", k->from, g->name,
                   k->old_layout);
        else
            ck_say(why, len, "checkpoint %s: region '%s' is rank %d's own state, which "
                   "cannot be re-cut: resume it on %s", k->from, g->name, r->rank,
                   k->old_layout);
    }
    /* the run's own regions (rank 0): the old rank 0's */
    int s0 = shard_of_rank(k, 0);
    for (int i = 0; i < nrun && !why[0]; i++) {
        const char *d = s0 < 0 ? NULL : shard_data(&c, s0, why, len);
        long long off = s0 < 0 ? -1 : ck_region_offset(k->shards[s0].regions,
                                                       run[i].name, run[i].nbytes);
        if (d && off >= 0)
            memcpy(staged[i], d + off, run[i].nbytes);
        else if (!why[0])
            ck_say(why, len, "checkpoint %s: rank 0's shard holds no '%s' of %zu bytes",
                   k->from, run[i].name, run[i].nbytes);
    }
    for (int i = 0; i < k->nreg && !why[0]; i++)
        fill(&c, &k->reg[i], staged[nrun + i], why, len);
    for (int i = 0; i < k->nshards; i++)
        free(c.data[i]);
    free(c.data);
}

/* Resuming on another rank count or layout: the pieces that hold this rank's part,
 * from whichever old shards hold them; rank 0 keeps the books of what each read. */
void ck_reshard(dti_run *r, dti_ckpt *k, const region *run, int nrun, char *why,
                size_t len)
{
    int n = nrun + k->nreg;
    char **staged = dti_calloc(n, sizeof *staged);
    unsigned long long read = 0, state = 0;
    int files = 0;
    reshard_load(r, k, run, nrun, staged, &read, &files, why, len);
    ck_agree(r, why);
    for (int i = 0; i < n; i++) {
        const region *g = i < nrun ? &run[i] : &k->reg[i - nrun];
        dt_memcpy(g->p, staged[i], g->nbytes);
        free(staged[i]);
        state += i < nrun ? 0 : g->nbytes;
    }
    free(staged);
    unsigned long long mine[3] = { read, state, (unsigned long long)files };
    unsigned long long *all = r->rank == 0 ? dti_calloc(3 * (size_t)r->size,
                                                       sizeof *all) : NULL;
    MPI_Request q;
    DT_CHECK_MPI(MPI_Igather(mine, 3, MPI_UNSIGNED_LONG_LONG, all, 3,
                             MPI_UNSIGNED_LONG_LONG, 0, r->comm, &q));
    dt_waitall(1, &q);
    if (r->rank == 0) {
        k->read_bytes = dti_calloc(r->size, sizeof *k->read_bytes);
        k->state_bytes = dti_calloc(r->size, sizeof *k->state_bytes);
        k->read_files = dti_calloc(r->size, sizeof *k->read_files);
        for (int i = 0; i < r->size; i++) {
            k->read_bytes[i] = all[3 * i];
            k->state_bytes[i] = all[3 * i + 1];
            k->read_files[i] = (int)all[3 * i + 2];
        }
        free(all);
    }
}
