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
 * pieces that hold it and copies their bytes. The old shards it needs are read whole,
 * each checked against its CRC-32 before use, so a rank reads at least its own state
 * and at most every shard. Where several old shards hold the same parameters (a bias
 * that every tensor-parallel rank keeps and writes), it takes them from a shard it
 * reads anyway (shard_cache), so that it reads about what it holds:
 *
 *     ddp, dp            rank 0's shard, the whole model, on every rank
 *     fsdp N -> M        rank r: the old shards its slice of each layer touches, about
 *                        ceil((r+1)N/M) - floor(rN/M) (4 -> 3: two each); a layer is
 *                        padded to a multiple of the ranks, so a slice can end a
 *                        parameter or two past an old shard's end and touch one more
 *                        (2 -> 4 with a layer of 170: rank 1 reads two, not one)
 *     tp, pp, hybrid     the old shards that hold its slices or stages, no more:
 *                        hybrid --dp 2 --tp 2 -> --dp 1 --tp 2, one old shard a rank
 *
 * A hand-edited manifest is checked as it is read (ck_manifest_parse): every span lies
 * inside the model and fits its region, and spans are never expanded run by run, so a
 * map of 2^32 runs costs a sentence, not the memory.
 *
 * Optimizer state has width floats per parameter (momentum: 1; Adam's m and v, laid
 * side by side: 2), so a parameter's state moves with it. Padding (fsdp's tail) is
 * zero, as a fresh run has it. What has no map (compression's error feedback, a
 * residual of each rank's own rounding) cannot be re-cut: the run is refused. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "buf.h"
#include "checkpoint_internal.h"
#include "p2p.h"

/* One span of an old shard's map: parameters s of the whole model, in count runs, the
 * first element of the first run at byte off of shard number shard (k->shards[shard]).
 * The spans are the manifest's, checked (ck_manifest_parse): each run lies inside the
 * model, and a span is never expanded run by run, so a count of 2^32 costs nothing. */
typedef struct {
    dti_span s;
    int shard;
    unsigned long long off;
} piece;

/* Where piece p stands at parameter at: 1 when one of its runs holds at, with in *stop
 * the end of that run and in *byte where at's element lies (elem bytes each); else 0,
 * with in *stop the start of its next run after at (SIZE_MAX: none). */
static int piece_at(const piece *p, size_t at, size_t elem, size_t *stop,
                    unsigned long long *byte)
{
    const dti_span *s = &p->s;
    if (at < s->start) {
        *stop = s->start;
        return 0;
    }
    size_t b = s->count == 1 ? 0 : (at - s->start) / s->stride;
    size_t a = s->start + b * s->stride;      /* run b begins at a */
    if (b < s->count && at < a + s->len) {
        *stop = a + s->len;
        *byte = p->off + (b * s->len + (at - a)) * elem;
        return 1;
    }
    *stop = b + 1 < s->count ? a + s->stride : SIZE_MAX;
    return 0;
}

/* Every span of the old shards' maps of region name (width floats a parameter): their
 * count, or -1 with a sentence in why. */
static int old_pieces(dti_ckpt *k, const char *name, int width, piece **out, char *why,
                      size_t len)
{
    int np = 0, found = 0;
    for (int i = 0; i < k->nmaps; i++)
        np += strcmp(k->maps[i].name, name) == 0 ? k->maps[i].nspan : 0;
    *out = dti_calloc(np ? np : 1, sizeof **out);
    np = 0;
    for (int i = 0; i < k->nmaps; i++) {
        const map_info *m = &k->maps[i];
        if (strcmp(m->name, name) != 0)
            continue;
        found = 1;
        if (m->width != width) {
            ck_say(why, len, "checkpoint %s/manifest: rank %d's '%s' has %d float%s a "
                   "parameter, this run's %d", k->from, m->rank, name, m->width,
                   m->width == 1 ? "" : "s", width);
            return -1;
        }
        unsigned long long off = m->off, elem = (unsigned long long)width * sizeof(float);
        for (int j = 0; j < m->nspan; j++) {
            (*out)[np++] = (piece){ m->span[j], m->shard, off };
            off += (unsigned long long)m->span[j].count * m->span[j].len * elem;
        }
    }
    if (!found) {
        ck_say(why, len, "checkpoint %s has no map of its '%s' (it was written by a "
               "dtlab that could not re-cut checkpoints): it resumes only on %s",
               k->from, name, k->old_layout);
        return -1;
    }
    return np;
}

/* ==== which shards a rank reads ==== */

/* The old shards, read once each, whole, and checked; and the plan of which to read.
 * A parameter that several old shards hold (a bias every tp rank keeps, each writing
 * it) comes from one this rank reads anyway, so that it reads about what it holds:
 *
 *   1. a shard that alone holds some parameter of the rank's is read (want);
 *   2. a parameter no such shard holds comes from the one that holds most of the
 *      rank's parameters, the nearest old rank on a tie (same rank number first), read
 *      too;
 *   3. each parameter is copied from a shard read, the first that holds it. */
typedef struct {
    dti_ckpt *k;
    int rank;                    /* this rank */
    char **data;                 /* [k->nshards], NULL: not read yet */
    char *want;                  /* [k->nshards] 1: this rank reads it */
    unsigned long long *holds;   /* [k->nshards] how many of the rank's parameters */
    unsigned long long *read;
    int *files;
} shard_cache;

enum { PLAN_ALONE, PLAN_CHOOSE, PLAN_COPY };

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

/* Is old shard a a better source than b (b -1: none yet)? */
static int better(const shard_cache *c, int a, int b)
{
    if (b < 0)
        return 1;
    if (c->want[a] != c->want[b])
        return c->want[a];
    if (c->holds[a] != c->holds[b])
        return c->holds[a] > c->holds[b];
    int da = abs(c->k->shards[a].rank - c->rank), db = abs(c->k->shards[b].rank - c->rank);
    return da != db ? da < db : a < b;
}

/* One segment of region name's parameters from at (before end): up to where the old
 * pieces that hold them begin or end, so that the same ones hold all of it. Does the
 * pass's step for it (dst: the staged bytes of at, PLAN_COPY) and returns its end; a
 * sentence in why when no old shard holds at. */
static size_t segment(shard_cache *c, const char *name, const piece *p, int np, size_t elem,
                      int pass, size_t at, size_t end, char *dst, char *why, size_t len)
{
    size_t stop = end, s;
    unsigned long long byte = 0, from = 0;
    int best = -1, alone = 1;
    for (int i = 0; i < np; i++) {
        int holds = piece_at(&p[i], at, elem, &s, &byte);
        stop = s < stop ? s : stop;
        if (!holds)
            continue;
        int sh = p[i].shard;
        alone = alone && (best < 0 || sh == best);
        if (better(c, sh, best)) {
            best = sh;
            from = byte;
        }
    }
    if (best < 0) {
        ck_say(why, len, "checkpoint %s: no shard holds parameter %zu of '%s' (the old "
               "shards' maps leave it out)", c->k->from, at, name);
        return end;
    }
    for (int i = 0; pass == PLAN_ALONE && i < np; i++)      /* the segment's holders */
        if (piece_at(&p[i], at, elem, &s, &byte))
            c->holds[p[i].shard] += stop - at;
    if (pass == PLAN_ALONE && alone)
        c->want[best] = 1;
    if (pass == PLAN_CHOOSE)
        c->want[best] = 1;                         /* already, or the best of the rest */
    if (pass == PLAN_COPY) {
        const char *d = shard_data(c, best, why, len);
        if (d)
            memcpy(dst, d + from, (stop - at) * elem);
    }
    return stop;
}

/* A pass over region g's parameters (staged: its host copy, zeroed, PLAN_COPY), cut
 * into segments. "" or a sentence in why. */
static void walk(shard_cache *c, const region *g, const piece *p, int np, int pass,
                 char *staged, char *why, size_t len)
{
    size_t elem = (size_t)g->width * sizeof(float), e = 0;
    for (int j = 0; j < g->nspan && !why[0]; j++) {
        const dti_span *s = &g->span[j];
        for (size_t b = 0; b < s->count && !why[0]; b++, e += s->len) {
            size_t a = s->start + b * s->stride, end = a + s->len;
            for (size_t at = a; at < end && !why[0];)
                at = segment(c, g->name, p, np, elem, pass, at, end,
                             staged + (e + at - a) * elem, why, len);
        }
    }
}

/* Fills each region (staged in host memory, staged[i] for the run's regions, then
 * k->reg's) from the pieces of the old shards that hold its parameters; counts the
 * bytes and files read. "" or a sentence in why; nothing of the run's state changed. */
static void reshard_load(dti_run *r, dti_ckpt *k, const region *run, int nrun,
                         char **staged, unsigned long long *read, int *files, char *why,
                         size_t len)
{
    shard_cache c = { k, r->rank, dti_calloc(k->nshards, sizeof(char *)),
                      dti_calloc(k->nshards, 1), dti_calloc(k->nshards, sizeof *c.holds),
                      read, files };
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
    /* the run's own regions (rank 0): the old rank 0's, read whatever else it holds */
    int s0 = k->shard_of[0];
    if (nrun > 0 && s0 >= 0)
        c.want[s0] = 1;
    /* the old pieces of each region, then the plan: which shards to read */
    piece **p = dti_calloc(k->nreg ? k->nreg : 1, sizeof *p);
    int *np = dti_calloc(k->nreg ? k->nreg : 1, sizeof *np);
    for (int i = 0; i < k->nreg && !why[0]; i++)
        np[i] = old_pieces(k, k->reg[i].name, k->reg[i].width, &p[i], why, len);
    for (int pass = PLAN_ALONE; pass <= PLAN_COPY && !why[0]; pass++)
        for (int i = 0; i < k->nreg && !why[0]; i++)
            walk(&c, &k->reg[i], p[i], np[i], pass, staged[nrun + i], why, len);
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
    for (int i = 0; i < k->nreg; i++)
        free(p[i]);
    free(p);
    free(np);
    for (int i = 0; i < k->nshards; i++)
        free(c.data[i]);
    free(c.data);
    free(c.want);
    free(c.holds);
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
