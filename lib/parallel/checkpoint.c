/* Checkpoints: the whole training state on disk, so that a run that was stopped (a
 * crash, a kill, the end of its time on a cluster) continues where it was, to the same
 * bits as a run never stopped.
 *
 * What the state is. Data batch s is a function of s alone, and the initial weights of
 * the seed, so a run at step s is entirely: the weights (fp32, the master copy in
 * fp16), the optimizer state (momentum, or Adam's m and v), the optimizer's step count,
 * the loss scaler (scale, clean steps), and the losses printed so far. The modes name
 * the regions of memory that hold their part (dti_ckpt_region) and everything else is
 * rebuilt from them: fp16 working weights are the master weights rounded, ZeRO-1/2's
 * whole layers are the shards gathered. A rank writes a shard only when no lower rank
 * holds the same state:
 *
 *     serial, ddp     rank 0 (every replica is the same)
 *     tp, pp          every rank (each holds a different part)
 *     hybrid          the ranks of data-parallel replica 0
 *     fsdp            every rank its shard
 *     dp              the server, rank 0 (weights, optimizer); workers read its weights
 *
 * On disk (checkpoint_format.c says how, line by line): DIR/latest names the newest
 * complete checkpoint DIR/step-NNNNNNN/, which holds a manifest (configuration, step,
 * scalars, per shard its file, bytes and CRC-32, per region its map) and the shards.
 *
 * Writing is atomic. Every rank writes into DIR/step-0000010.tmp and fsyncs its file;
 * after a barrier rank 0 writes the manifest, renames the directory to its final name,
 * then writes DIR/latest.tmp and renames it over DIR/latest (rename replaces a name in
 * one step: a reader sees the old file or the new, never half of one), and fsyncs DIR.
 * A kill at any moment leaves DIR/latest naming a complete checkpoint. The one before
 * the newest is kept too; older ones are removed.
 *
 * Reading is checked. The manifest's CRC, then every configuration field that changes
 * the numbers or the layout of the state (mode, ranks, model, data, optimizer, batch,
 * seed, precision and scaler, the mode's options; --steps may grow), then each shard's
 * size and CRC. Anything wrong, on any rank, ends every rank with one sentence naming
 * the file or the field and both values, and exit status 2 (dt_usage_error): the ranks
 * agree on the outcome first, so none is left waiting.
 *
 * Another rank count or layout. A checkpoint resumes on N ranks when it was written on
 * M, or by hybrid with other --dp/--tp/--pp: every region says, in its map
 * (dti_ckpt_map), which parameters of the whole model it holds, so each rank reads the
 * pieces of the old shards that hold its new part (checkpoint_reshard.c). Every mode
 * equals serial training with the same global batch, so the resumed run reaches the
 * uninterrupted run's weights to rounding (bit for bit where the order of the sums does
 * not change: pp). State that belongs to one rank alone (compression's error feedback)
 * has no map, and such a checkpoint is refused on another layout.
 *
 * Test hook: with DT_TEST_CHECKPOINT_CRASH=K in the environment, the highest rank that
 * writes a shard writes half of it for step K's checkpoint and then kills itself
 * (SIGKILL), so tests/checkpoint.sh can show that a run killed in the middle of writing
 * leaves the previous checkpoint usable. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "buf.h"
#include "p2p.h"
#include "checkpoint_internal.h"
#include "prog.h"

/* ==== agreeing, refusing ==== */


/* Rank 0's bytes (n of them there) to every rank; returns a new allocation (n + 1
 * bytes, NUL-terminated). Collective. */
static char *bcast_text(dti_run *r, const char *text, size_t n)
{
    unsigned long long len = n;
    MPI_Request q;
    DT_CHECK_MPI(MPI_Ibcast(&len, 1, MPI_UNSIGNED_LONG_LONG, 0, r->comm, &q));
    dt_waitall(1, &q);
    char *s = dti_calloc(len + 1, 1);
    if (r->rank == 0)
        memcpy(s, text, len);
    DT_REQUIRE(len < (1ull << 31), "checkpoint: a manifest of %llu bytes", len);
    DT_CHECK_MPI(MPI_Ibcast(s, (int)len, MPI_CHAR, 0, r->comm, &q));
    dt_waitall(1, &q);
    return s;
}

/* ==== opening: before the mode sets up ==== */

/* Rank 0: can this run write its checkpoints into checkpoint_dir? */
static void check_target(dti_run *r, dti_ckpt *k, char *why, size_t len)
{
    const char *dir = k->dir, *res = r->cfg->resume_dir;
    struct stat st, rs;
    char other[256];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        ck_say(why, len, "--checkpoint %s: cannot create the directory: %s", dir,
            strerror(errno));
        return;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0) {
        ck_say(why, len, "--checkpoint %s: not a directory this run can write into",
            dir);
        return;
    }
    if (ck_foreign_entry(dir, other, sizeof other)) {
        ck_say(why, len, "--checkpoint %s holds files that are not dtlab checkpoints (such "
            "as '%.60s'): name a new or empty folder, or one that holds dtlab checkpoints",
            dir, other);
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/latest", dir);
    if (access(path, F_OK) != 0)
        return;
    int same = res && stat(res, &rs) == 0 && rs.st_dev == st.st_dev &&
               rs.st_ino == st.st_ino;
    if (!same) {
        ck_say(why, len, "--checkpoint %s already holds a checkpoint (%s): continue it "
            "with --resume %s, or choose another directory", dir, path, dir);
        return;
    }
    k->latest = -1;               /* the resumed step, once known */
}

void dti_ckpt_open(dti_run *r)
{
    const dt_train_config *c = r->cfg;
    r->ckpt = NULL;
    if (c->checkpoint_dir == NULL && c->resume_dir == NULL)
        return;
    dti_ckpt *k = dti_calloc(1, sizeof *k);
    r->ckpt = k;
    k->dir = c->checkpoint_dir;
    k->every = c->checkpoint_every;
    if (dti_test_crash_env(&k->crash_step))   /* (dt_train_env_check refused it) */
        k->crash_step = 0;

    char why[1024] = "";
    const char *longest = k->dir && (!c->resume_dir ||
                                     strlen(k->dir) > strlen(c->resume_dir))
                          ? k->dir : c->resume_dir;
    if (strlen(longest) > 4000)
        ck_say(why, sizeof why, "%.60s...: a directory name of more than 4000 characters",
            longest);
    else if ((k->dir && !k->dir[0]) || (c->resume_dir && !c->resume_dir[0]))
        ck_say(why, sizeof why, "--%s '': the name is empty",
            k->dir && !k->dir[0] ? "checkpoint" : "resume");
    if (r->rank == 0 && !why[0]) {
        sbuf b = {0};
        ck_config_text(r, &b);
        k->config = b.s;
        if (k->dir)
            check_target(r, k, why, sizeof why);
        if (!why[0] && c->resume_dir)
            ck_manifest_read(r, k, why, sizeof why);
    }
    ck_agree(r, why);                 /* only rank 0 has looked: its verdict goes */
    if (c->resume_dir == NULL)
        return;
    char *text = bcast_text(r, k->manifest, k->manifest ? strlen(k->manifest) : 0);
    free(k->manifest);
    k->manifest = text;
    char *f = bcast_text(r, k->from, strlen(k->from));
    snprintf(k->from, sizeof k->from, "%s", f);
    free(f);
    ck_manifest_parse(r, k, why, sizeof why);
    ck_agree(r, why);
}

/* ==== the modes' regions ==== */

void dti_ckpt_region(dti_run *r, const char *name, void *p, size_t nbytes)
{
    dti_ckpt *k = r->ckpt;
    if (k == NULL)
        return;
    DT_REQUIRE(strlen(name) < sizeof k->reg[0].name && !strpbrk(name, " :\n"),
               "checkpoint: bad region name '%s'", name);
    if (k->nreg == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 8;
        k->reg = realloc(k->reg, k->cap * sizeof *k->reg);
        DT_REQUIRE(k->reg != NULL, "out of host memory");
    }
    region *g = &k->reg[k->nreg++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->p = p;
    g->nbytes = nbytes;
}

void dti_ckpt_map(dti_run *r, const char *name, int width, const dti_span *s, int n)
{
    dti_ckpt *k = r->ckpt;
    if (k == NULL)
        return;
    region *g = NULL;
    for (int i = 0; i < k->nreg; i++)
        if (strcmp(k->reg[i].name, name) == 0)
            g = &k->reg[i];
    DT_REQUIRE(g != NULL && width >= 1 && n >= 0, "checkpoint: a map of region '%s' "
               "(width %d, %d spans), which is not registered", name, width, n);
    /* what a manifest's reader checks (ck_manifest_parse), the writer first: spans
     * that ascend, apart, inside the model */
    size_t count = 0, next = 0;
    for (int i = 0; i < n; i++) {
        DT_REQUIRE(s[i].count >= 1 && (s[i].count == 1 || s[i].stride >= s[i].len),
                   "checkpoint: region '%s': span %d overlaps itself", name, i);
        if (s[i].len == 0)
            continue;
        size_t end = s[i].start + (s[i].count - 1) * s[i].stride + s[i].len;
        DT_REQUIRE(s[i].start >= next && end <= r->nparams, "checkpoint: region '%s': "
                   "span %d begins before the one before it ends, or past the model",
                   name, i);
        next = end;
        count += s[i].len * s[i].count;
    }
    DT_REQUIRE(count * width * sizeof(float) <= g->nbytes, "checkpoint: region '%s' "
               "maps %zu parameters of %d floats into %zu bytes", name, count, width,
               g->nbytes);
    free(g->span);
    g->span = dti_calloc(n ? n : 1, sizeof *g->span);
    memcpy(g->span, s, n * sizeof *s);
    g->nspan = n;
    g->width = width;
}

/* The run's own regions, kept by rank 0: the losses and skipped flags of steps 1..s. */
static int run_regions(dti_run *r, int s, region *g)
{
    if (r->rank != 0)
        return 0;
    g[0] = (region){ .name = "losses", .p = r->res->loss, .nbytes = (size_t)s * 4 };
    g[1] = (region){ .name = "skipped", .p = r->res->skipped,
                     .nbytes = (size_t)s * sizeof(int) };
    return 2;
}

/* Reads this rank's shard (the manifest's reads[rank]) whole and checks it: "" or a
 * sentence in why; the contents in *data. */
static void shard_load(dti_run *r, dti_ckpt *k, char **data, shard_info **info,
                       char *why, size_t len)
{
    *data = NULL;
    *info = NULL;
    int src = k->reads[r->rank];
    if (src != k->owner) {
        ck_say(why, len, "checkpoint %s: rank %d would read the shard of rank %d, this "
            "run's layout puts its state on rank %d", k->from, r->rank, src,
            k->owner);
        return;
    }
    if (src >= 0 && src < k->old_size && k->shard_of[src] >= 0)
        *info = &k->shards[k->shard_of[src]];
    shard_info *s = *info;
    if (s == NULL) {
        ck_say(why, len, "checkpoint %s: the manifest lists no shard of rank %d",
            k->from, src);
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", k->from, s->file);
    struct stat st;
    if (stat(path, &st) != 0) {
        ck_say(why, len, "checkpoint %s: cannot open %s: %s", k->from, s->file,
            strerror(errno));
        return;
    }
    if ((unsigned long long)st.st_size != s->bytes) {
        ck_say(why, len, "checkpoint %s: %s has %llu bytes, the manifest says %llu "
            "(cut short or overwritten)", k->from, s->file,
            (unsigned long long)st.st_size, s->bytes);
        return;
    }
    size_t n = 0;
    *data = ck_read_file(path, (size_t)s->bytes, &n);
    if (*data == NULL) {
        ck_say(why, len, "checkpoint %s: cannot read %s: %s", k->from, s->file,
            strerror(errno));
        return;
    }
    unsigned long crc = ck_crc_of(*data, n);
    if (n != s->bytes || crc != s->crc)
        ck_say(why, len, "checkpoint %s: %s is damaged: its CRC-32 is %08lx, the "
            "manifest says %08lx", k->from, s->file, crc, s->crc);
}

/* Resuming on the layout that wrote the checkpoint: this rank's shard, whole. */
static void resume_same(dti_run *r, dti_ckpt *k, const region *run, int nrun, char *why,
                        size_t len)
{
    char *data = NULL;
    shard_info *s = NULL;
    shard_load(r, k, &data, &s, why, len);
    for (int i = 0; !why[0] && i < nrun + k->nreg; i++) {
        const region *g = i < nrun ? &run[i] : &k->reg[i - nrun];
        if (ck_region_offset(s->regions, g->name, g->nbytes) < 0)
            ck_say(why, len, "checkpoint %s: %s holds no region '%s' of %zu "
                "bytes (it has: %.200s)", k->from, s->file, g->name, g->nbytes,
                s->regions);
    }
    ck_agree(r, why);
    for (int i = 0; i < nrun + k->nreg; i++) {
        const region *g = i < nrun ? &run[i] : &k->reg[i - nrun];
        dt_memcpy(g->p, data + ck_region_offset(s->regions, g->name, g->nbytes), g->nbytes);
    }
    free(data);
}

int dti_ckpt_start(dti_run *r, int owner)
{
    dti_ckpt *k = r->ckpt;
    if (k == NULL)
        return 0;
    DT_REQUIRE(owner >= 0 && owner <= r->rank, "checkpoint: rank %d's state said to be "
               "held by rank %d", r->rank, owner);
    k->owner = owner;
    k->owners = dti_calloc(r->size, sizeof *k->owners);
    MPI_Request q;
    DT_CHECK_MPI(MPI_Iallgather(&owner, 1, MPI_INT, k->owners, 1, MPI_INT, r->comm, &q));
    dt_waitall(1, &q);
    k->crash_rank = 0;
    for (int i = 0; i < r->size; i++) {
        DT_REQUIRE(k->owners[k->owners[i]] == k->owners[i], "checkpoint: rank %d's "
                   "state is on rank %d, which writes no shard", i, k->owners[i]);
        if (k->owners[i] == i)
            k->crash_rank = i;
    }

    /* each writer's regions and their maps, to rank 0 once, for the manifests */
    sbuf b = {0};
    ck_sb_printf(&b, "%s", "");
    ck_describe(k->reg, k->nreg, &b);
    ck_sb_printf(&b, "\n");
    ck_describe_maps(k->reg, k->nreg, &b);
    int mine = owner == r->rank ? (int)b.len + 1 : 0;
    int *lens = r->rank == 0 ? dti_calloc(r->size, sizeof(int)) : NULL;
    DT_CHECK_MPI(MPI_Igather(&mine, 1, MPI_INT, lens, 1, MPI_INT, 0, r->comm, &q));
    dt_waitall(1, &q);
    int *displ = NULL, total = 0;
    char *all = NULL;
    if (r->rank == 0) {
        displ = dti_calloc(r->size, sizeof(int));
        for (int i = 0; i < r->size; i++) {
            displ[i] = total;
            total += lens[i];
        }
        all = dti_calloc(total + 1, 1);
    }
    DT_CHECK_MPI(MPI_Igatherv(b.s, mine, MPI_CHAR, all, lens, displ, MPI_CHAR, 0,
                              r->comm, &q));
    dt_waitall(1, &q);
    if (r->rank == 0) {
        k->desc = dti_calloc(r->size, sizeof *k->desc);
        for (int i = 0; i < r->size; i++)
            k->desc[i] = lens[i] ? strdup(all + displ[i]) : NULL;
    }
    free(all);
    free(displ);
    free(lens);
    free(b.s);

    if (r->cfg->resume_dir == NULL)
        return 0;

    /* resuming: every rank loads and checks its shard (or, on another layout, the
     * pieces of the old shards that hold its part); all agree before any state
     * changes */
    char why[1024] = "";
    region run[2];
    int nrun = run_regions(r, k->step, run);
    if (k->reshard)
        ck_reshard(r, k, run, nrun, why, sizeof why);
    else
        resume_same(r, k, run, nrun, why, sizeof why);
    r->updates = k->updates;
    r->scaler.scale = k->scale;
    r->scaler.clean = k->clean;
    r->first = k->step + 1;
    if (r->rank == 0 && k->latest == -1)
        k->latest = k->step;
    return k->step;
}

/* ==== writing ==== */

/* Writes this rank's shard (run regions first on rank 0) into path: its bytes and CRC.
 * The test hook stops half-way. */
static void shard_write(dti_run *r, dti_ckpt *k, const char *path, int step,
                        unsigned long long *bytes, unsigned long *crc)
{
    region g[2];
    int nrun = run_regions(r, step, g);
    size_t total = 0, cut = (size_t)-1;
    for (int i = 0; i < nrun + k->nreg; i++)
        total += i < nrun ? g[i].nbytes : k->reg[i - nrun].nbytes;
    if (k->crash_step == step && r->rank == k->crash_rank)
        cut = total / 2;                                   /* DT_TEST_CHECKPOINT_CRASH */

    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    DT_REQUIRE(fd >= 0, "checkpoint: cannot create %s: %s", path, strerror(errno));
    *crc = crc32(0L, Z_NULL, 0);
    *bytes = 0;
    for (int i = 0; i < nrun + k->nreg; i++) {
        const region *x = i < nrun ? &g[i] : &k->reg[i - nrun];
        const void *h = x->p;
        void *staged = NULL;
        if (dt_is_device_ptr(x->p)) {                      /* through the host */
            staged = malloc(x->nbytes ? x->nbytes : 1);
            DT_REQUIRE(staged != NULL, "out of host memory");
            dt_memcpy(staged, x->p, x->nbytes);
            h = staged;
        }
        size_t n = x->nbytes;
        if (*bytes + n > cut)
            n = cut - *bytes;
        DT_REQUIRE(ck_write_all(fd, h, n) == 0, "checkpoint: cannot write %s: %s", path,
                   strerror(errno));
        *crc = ck_crc_add(*crc, h, n);
        *bytes += n;
        free(staged);
        if (*bytes == cut) {
            fsync(fd);
            fprintf(stderr, "checkpoint: DT_TEST_CHECKPOINT_CRASH=%d: rank %d stops "
                    "half-way through %s\n", step, r->rank, path);
            fflush(stderr);
            raise(SIGKILL);
        }
    }
    DT_REQUIRE(fsync(fd) == 0 && close(fd) == 0, "checkpoint: cannot write %s: %s", path,
               strerror(errno));
}

/* Rank 0, after every shard is on disk: the manifest, the renames, the clean-up. */
static void commit(dti_run *r, dti_ckpt *k, int step, const char *tmp, const char *fin,
                   const unsigned long long *bytes, const unsigned long *crc)
{
    sbuf m = {0};
    ck_sb_printf(&m, "dtlab-checkpoint %d\n%s", CK_VERSION, k->config);
    ck_sb_printf(&m, "step %d\nupdates %d\nscale %a\nclean %d\n", step, r->updates,
              (double)r->scaler.scale, r->scaler.clean);
    k->bytes_last = 0;
    for (int i = 0; i < r->size; i++) {
        if (k->owners[i] != i)
            continue;
        /* desc[i]: the regions' line, then the lines of their maps */
        const char *d = k->desc[i], *maps = d + strcspn(d, "\n");
        ck_sb_printf(&m, "shard %d shard-%05d.bin %llu %08lx ", i, i, bytes[i], crc[i]);
        if (i == 0) {
            region g[2];
            run_regions(r, step, g);
            ck_describe(g, 2, &m);
            ck_sb_printf(&m, "%s", maps > d ? " " : "");
        }
        ck_sb_printf(&m, "%.*s\n", (int)(maps - d), d);
        for (const char *p = maps + (*maps == '\n'); *p; p += strcspn(p, "\n") + 1)
            ck_sb_printf(&m, "map %d %.*s\n", i, (int)strcspn(p + 4, "\n"), p + 4);
        k->bytes_last += bytes[i];
    }
    ck_sb_printf(&m, "reads");
    for (int i = 0; i < r->size; i++)
        ck_sb_printf(&m, " %d", k->owners[i]);
    ck_sb_printf(&m, "\n");
    ck_sb_printf(&m, "crc32 %08lx\n", ck_crc_of(m.s, m.len));

    char path[4300];
    snprintf(path, sizeof path, "%s/manifest", tmp);
    ck_write_small(path, m.s, m.len);
    free(m.s);
    ck_sync_dir(tmp);
    ck_remove_step_dir(fin);          /* a stale one of another run; latest never names it */
    DT_REQUIRE(rename(tmp, fin) == 0, "checkpoint: cannot rename %s to %s: %s", tmp, fin,
               strerror(errno));
    ck_sync_dir(k->dir);

    /* the pointer to the newest: written aside, then renamed over the old one */
    char name[16], latest[4200];
    snprintf(name, sizeof name, "step-%07d\n", step);
    snprintf(path, sizeof path, "%s/latest.tmp", k->dir);
    snprintf(latest, sizeof latest, "%s/latest", k->dir);
    ck_write_small(path, name, strlen(name));
    DT_REQUIRE(rename(path, latest) == 0, "checkpoint: cannot rename %s to %s: %s", path,
               latest, strerror(errno));
    ck_sync_dir(k->dir);

    /* keep this one and the one before; older ones and any leftover .tmp go */
    int prev = k->latest > 0 ? k->latest : -1;
    k->latest = step;
    DIR *d = opendir(k->dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        int t = 0, n = ck_step_of_name(e->d_name, &t);
        if (n < 0 || (!t && (n == step || n == prev)))
            continue;
        snprintf(path, sizeof path, "%s/%s", k->dir, e->d_name);
        ck_remove_step_dir(path);
    }
    if (d)
        closedir(d);
}

void dti_ckpt_step(dti_run *r, int step)
{
    dti_ckpt *k = r->ckpt;
    if (k == NULL || k->dir == NULL)
        return;
    if (!(k->every > 0 && step % k->every == 0) && step != r->cfg->steps)
        return;
    double t0 = MPI_Wtime();
    char tmp[4200], fin[4200], path[4300];
    snprintf(tmp, sizeof tmp, "%s/step-%07d.tmp", k->dir, step);
    snprintf(fin, sizeof fin, "%s/step-%07d", k->dir, step);
    if (r->rank == 0) {               /* a leftover of a killed run goes first */
        ck_remove_step_dir(tmp);
        DT_REQUIRE(mkdir(tmp, 0755) == 0, "checkpoint: cannot create %s: %s", tmp,
                   strerror(errno));
    }
    dt_barrier(r->comm);

    unsigned long long mine[2] = { 0, 0 }, *all = NULL;
    if (k->owner == r->rank) {
        unsigned long crc;
        snprintf(path, sizeof path, "%s/shard-%05d.bin", tmp, r->rank);
        shard_write(r, k, path, step, &mine[0], &crc);
        mine[1] = crc;
    }
    if (r->rank == 0)
        all = dti_calloc(2 * (size_t)r->size, sizeof *all);
    MPI_Request q;
    DT_CHECK_MPI(MPI_Igather(mine, 2, MPI_UNSIGNED_LONG_LONG, all, 2,
                             MPI_UNSIGNED_LONG_LONG, 0, r->comm, &q));
    dt_waitall(1, &q);
    if (r->rank == 0) {
        unsigned long long *bytes = dti_calloc(r->size, sizeof *bytes);
        unsigned long *crc = dti_calloc(r->size, sizeof *crc);
        for (int i = 0; i < r->size; i++) {
            bytes[i] = all[2 * i];
            crc[i] = (unsigned long)all[2 * i + 1];
        }
        commit(r, k, step, tmp, fin, bytes, crc);
        free(bytes);
        free(crc);
        free(all);
        k->written++;
        k->seconds += MPI_Wtime() - t0;
    }
}

/* ==== closing ==== */

void dti_ckpt_close(dti_run *r)
{
    dti_ckpt *k = r->ckpt;
    if (k == NULL)
        return;
    if (r->cfg->resume_dir)
        dti_summary(r, "checkpoint: resumed at step %d, from %s", k->step, k->from);
    if (k->read_bytes) {
        dti_summary(r, "checkpoint: resharded from %s to %s: each rank read the old "
                    "shards that hold its part, whole (a CRC-32 checks a whole file)",
                    k->old_layout, k->new_layout);
        for (int i = 0; i < r->size; i++)
            dti_summary(r, "checkpoint:   rank %d read %llu bytes from %d shard%s; its "
                        "state is %llu bytes", i, k->read_bytes[i], k->read_files[i],
                        k->read_files[i] == 1 ? "" : "s", k->state_bytes[i]);
    }
    if (k->written)
        dti_summary(r, "checkpoint: wrote %d into %s, the last step-%07d (%llu bytes in "
                    "shards), %.1f ms each", k->written, k->dir, k->latest, k->bytes_last,
                    k->seconds / k->written * 1e3);
    for (int i = 0; k->desc && i < r->size; i++)
        free(k->desc[i]);
    free(k->desc);
    for (int i = 0; i < k->nreg; i++)
        free(k->reg[i].span);
    free(k->reg);
    for (int i = 0; i < k->nmaps; i++)
        free(k->maps[i].span);
    free(k->maps);
    free(k->shard_of);
    free(k->read_bytes);
    free(k->state_bytes);
    free(k->read_files);
    free(k->owners);
    free(k->config);
    free(k->manifest);
    free(k->shards);
    free(k->reads);
    free(k);
    r->ckpt = NULL;
}