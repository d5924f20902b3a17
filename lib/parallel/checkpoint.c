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
 * On disk, for checkpoint_dir DIR:
 *
 *     DIR/latest                  one line: the name of the newest complete checkpoint
 *     DIR/step-0000010/manifest   text: version, configuration, step, run scalars, and
 *                                 per shard its file, bytes and CRC-32; its own CRC last
 *     DIR/step-0000010/shard-00000.bin, ...   the regions one after another, raw bytes
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
 * Test hook: with DT_TEST_CHECKPOINT_CRASH=K in the environment, the highest rank that
 * writes a shard writes half of it for step K's checkpoint and then kills itself
 * (SIGKILL), so tests/checkpoint.sh can show that a run killed in the middle of writing
 * leaves the previous checkpoint usable. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "buf.h"
#include "p2p.h"
#include "parallel_internal.h"
#include "prog.h"

#define VERSION 1
#define MAX_MANIFEST (64u << 20)

/* ==== small helpers: a growing string, CRC-32 ==== */

typedef struct {
    char *s;
    size_t len, cap;
} sbuf;

__attribute__((format(printf, 2, 3)))
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        char *end = b->s ? b->s + b->len : NULL;
        int n = vsnprintf(end, b->s ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        DT_REQUIRE(n >= 0, "checkpoint: cannot format text");
        if (b->s && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        b->cap = 2 * (b->len + (size_t)n + 64);
        b->s = realloc(b->s, b->cap);
        DT_REQUIRE(b->s != NULL, "out of host memory");
        b->s[b->len] = 0;
    }
}

/* A sentence into why (len bytes), cut short if it must be. */
__attribute__((format(printf, 3, 4)))
static void say(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/* zlib's crc32 takes unsigned int lengths: feed it 1 GiB at a time. */
static unsigned long crc_add(unsigned long crc, const void *p, size_t n)
{
    const unsigned char *c = p;
    while (n > 0) {
        unsigned part = n > (1u << 30) ? 1u << 30 : (unsigned)n;
        crc = crc32(crc, c, part);
        c += part;
        n -= part;
    }
    return crc;
}

static unsigned long crc_of(const void *p, size_t n)
{
    return crc_add(crc32(0L, Z_NULL, 0), p, n);
}

/* ==== the state ==== */

typedef struct {
    char name[24];         /* one word */
    void *p;               /* host or device */
    size_t nbytes;
} region;

/* One shard as the manifest lists it. */
typedef struct {
    int rank;
    char file[32];
    unsigned long long bytes;
    unsigned long crc;
    char *regions;         /* "name:bytes name:bytes ..." (points into the manifest) */
} shard_info;

struct dti_ckpt {
    const char *dir;       /* checkpoint_dir, or NULL: this run does not save */
    int every;
    region *reg;           /* this rank's regions */
    int nreg, cap;
    int owner;             /* the rank whose shard holds this rank's state */
    int *owners;           /* [size] every rank's owner (after dti_ckpt_start) */
    char **desc;           /* rank 0: [size] each writer's "name:bytes ..." */
    int crash_step;        /* DT_TEST_CHECKPOINT_CRASH, 0: none */
    int crash_rank;        /* the highest rank that writes a shard */
    char *config;          /* rank 0: this run's "config ..." lines */
    int latest;            /* rank 0: the step DIR/latest names (0: none) */

    /* resuming: the manifest (every rank) and what it says */
    char from[4096];       /* RESUME_DIR/step-NNNNNNN */
    char *manifest;
    int step, updates, clean;
    float scale;
    shard_info *shards;
    int nshards;
    int *reads;            /* [size] the shard each rank reads */

    /* the books, rank 0 */
    int written;
    unsigned long long bytes_last;
    double seconds;
};

/* ==== agreeing, refusing ==== */

/* Ends every rank with why (the same on every rank, or at least on rank 0): "train:
 * why", the Try line and exit status 2 when comm is the whole job, as for any bad input
 * (dt_usage_error); else (a run on part of the job could not end the rest cleanly)
 * through the one abort path. */
__attribute__((noreturn))
static void refuse(dti_run *r, const char *why)
{
    int cmp = MPI_UNEQUAL;
    MPI_Comm_compare(r->comm, MPI_COMM_WORLD, &cmp);
    if (cmp == MPI_IDENT || cmp == MPI_CONGRUENT) {
        /* every rank is here (agree): MPI_Finalize would leave parts of live
         * communicators behind, so free them first */
        for (int i = 0; i < r->nmade; i++)
            MPI_Comm_free(&r->made[i]);
        MPI_Comm_free(&r->comm);
        dt_usage_error(NULL, why);
    }
    dti_die(__FILE__, __LINE__, "%s", why);
}

/* Every rank passes its verdict (why empty: fine). When any rank found a problem,
 * every rank ends with the lowest such rank's sentence. Collective. */
static void agree(dti_run *r, const char *why)
{
    int mine = why[0] ? r->rank : r->size, first = r->size;
    MPI_Request q;
    DT_CHECK_MPI(MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, r->comm, &q));
    dt_waitall(1, &q);
    if (first == r->size)
        return;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", why);
    DT_CHECK_MPI(MPI_Ibcast(msg, sizeof msg, MPI_CHAR, first, r->comm, &q));
    dt_waitall(1, &q);
    refuse(r, msg);
}

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

/* ==== files ==== */

/* Reads a whole file of at most max bytes into a new allocation (NUL-terminated).
 * Returns NULL with errno set (EFBIG: larger than max). */
static char *read_file(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno : (size_t)st.st_size > max ? EFBIG : 0;
    if (e) {
        close(fd);
        errno = e;
        return NULL;
    }
    size_t n = (size_t)st.st_size, got = 0;
    char *s = dti_calloc(n + 1, 1);
    while (got < n) {
        ssize_t k = read(fd, s + got, n - got);
        if (k <= 0) {
            int e = k == 0 ? EIO : errno;
            free(s);
            close(fd);
            errno = e;
            return NULL;
        }
        got += (size_t)k;
    }
    close(fd);
    *len = n;
    return s;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t k = write(fd, c, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* A directory's entries reach the disk only when the directory itself is synced. */
static void sync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    DT_REQUIRE(fd >= 0 && fsync(fd) == 0, "checkpoint: cannot sync the directory %s: %s",
               path, strerror(errno));
    close(fd);
}

/* Writes a small file completely and syncs it (rank 0's manifest and latest). */
static void write_small(const char *path, const char *text, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    DT_REQUIRE(fd >= 0 && write_all(fd, text, n) == 0 && fsync(fd) == 0 && close(fd) == 0,
               "checkpoint: cannot write %s: %s", path, strerror(errno));
}

/* Removes a checkpoint directory of ours: its manifest and shards, then itself. Anything
 * else in it (not ours) is left, and the directory with it. */
static void remove_step_dir(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return;
    struct dirent *e;
    char file[4200];
    while ((e = readdir(d)) != NULL) {
        int shard = strncmp(e->d_name, "shard-", 6) == 0;
        if (shard || strcmp(e->d_name, "manifest") == 0) {
            snprintf(file, sizeof file, "%s/%s", path, e->d_name);
            unlink(file);
        }
    }
    closedir(d);
    rmdir(path);
}

/* "step-NNNNNNN" (tmp 0) or "step-NNNNNNN.tmp" (tmp 1): the step, else -1. */
static int step_of_name(const char *name, int *tmp)
{
    int n = 0, used = 0;
    if (strncmp(name, "step-", 5) != 0 || strlen(name) < 12)
        return -1;
    for (int i = 5; i < 12; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        n = n * 10 + (name[i] - '0');
        used = i + 1;
    }
    *tmp = strcmp(name + used, ".tmp") == 0;
    return *tmp || name[used] == 0 ? n : -1;
}

/* ==== the configuration a checkpoint must match ==== */

/* The shortest decimal text that reads back as v: "0.05", not "0.0500000007". */
static const char *float_text(float v, char *buf, size_t len)
{
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, len, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v)
            break;
    }
    return buf;
}

/* This run's fields, one "config KEY VALUE" line each. A key that is one of train's
 * options is named after it, so that a refusal can say "--hidden 24". */
static void config_text(const dti_run *r, sbuf *b)
{
    const dt_train_config *c = r->cfg;
    const dt_dataset *set = c->data;
    const dt_mlp_config *m = &c->model;
    unsigned long crc = crc_of(set->x, (size_t)set->n * set->features * sizeof(float));
    crc = crc_add(crc, set->y, (size_t)set->n * sizeof(int));
    sb_printf(b, "config mode %s\n", dt_mode_name(c->mode));
    sb_printf(b, "config ranks %d\n", r->size);
    sb_printf(b, "config layers %d\nconfig hidden %d\nconfig act %s\n", m->layers,
              m->hidden, m->act == DT_RELU ? "relu" : "gelu");
    sb_printf(b, "config outputs %d\n", m->out);
    sb_printf(b, "config data %d examples of %d features, %d classes, CRC-32 %08lx\n",
              set->n, set->features, set->classes, crc);
    char f[4][32];
    sb_printf(b, "config optim %s\nconfig lr %s\n", c->optim.kind == DT_SGD ? "sgd"
              : "adam", float_text(c->optim.lr, f[0], sizeof f[0]));
    if (c->optim.kind == DT_SGD)
        sb_printf(b, "config momentum %s\n", float_text(c->optim.momentum, f[0], 32));
    else
        sb_printf(b, "config adam beta1 %s beta2 %s eps %s\n",
                  float_text(c->optim.beta1, f[0], 32),
                  float_text(c->optim.beta2, f[1], 32),
                  float_text(c->optim.eps, f[2], 32));
    sb_printf(b, "config batch %d\nconfig seed %llu\n", c->batch, c->seed);
    sb_printf(b, "config precision %s\n", c->precision == DT_FP16 ? "fp16" : "fp32");
    if (c->precision == DT_FP16)
        sb_printf(b, "config loss-scale %s\nconfig scale-window %d\n"
                  "config scale-backoff %s\nconfig scale-growth %s\n",
                  float_text(c->scaler.init, f[0], 32), c->scaler.window,
                  float_text(c->scaler.backoff, f[1], 32),
                  float_text(c->scaler.growth, f[2], 32));
    sb_printf(b, "config device %s\n", r->where == DT_CUDA ? "cuda" : "cpu");
    /* the options of the mode's loop */
    dt_mode md = c->mode;
    if (md == DT_MODE_DP)
        sb_printf(b, "config dedicated-server %s\nconfig async %d\n",
                  c->dedicated_server ? "yes" : "no", c->async);
    if (md == DT_MODE_FSDP)
        sb_printf(b, "config zero %d\nconfig offload %s\n", c->zero,
                  c->offload ? "on" : "off");
    if (md == DT_MODE_HYBRID)
        sb_printf(b, "config dp %d\nconfig tp %d\nconfig pp %d\n", c->dp, c->tp, c->pp);
    if (md == DT_MODE_SERIAL || md == DT_MODE_DDP || md == DT_MODE_TP ||
        md == DT_MODE_PP || md == DT_MODE_HYBRID)
        sb_printf(b, "config accum %d\n", c->accum);
    if (md == DT_MODE_DDP || md == DT_MODE_HYBRID)
        sb_printf(b, "config bucket-kb %d\nconfig overlap %s\n", c->bucket_kb,
                  c->overlap ? "on" : "off");
    if (md == DT_MODE_DDP)
        sb_printf(b, "config compress %s%s\n", dt_compress_name(c->compress),
                  c->compress == DT_COMPRESS_SIGN && !c->compress_feedback
                  ? " --no-feedback" : "");
    if (md == DT_MODE_TP || md == DT_MODE_HYBRID)
        sb_printf(b, "config tp-style %s\n", c->tp_style == DT_TP_MEGATRON ? "megatron"
                  : "allgather");
    if (md == DT_MODE_PP || md == DT_MODE_HYBRID)
        sb_printf(b, "config micro %d\nconfig schedule %s\n", c->micro,
                  c->schedule == DT_PP_GPIPE ? "gpipe" : "1f1b");
}

/* The value of the line "config KEY VALUE" in text (a copy in val), or NULL. */
static const char *config_value(const char *text, const char *key, char *val, size_t len)
{
    size_t kl = strlen(key);
    for (const char *p = text; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0)) {
        if (strncmp(p, "config ", 7) == 0 && strncmp(p + 7, key, kl) == 0 &&
            p[7 + kl] == ' ') {
            const char *v = p + 8 + kl;
            snprintf(val, len, "%.*s", (int)strcspn(v, "\n"), v);
            return val;
        }
    }
    return NULL;
}

/* Compares the checkpoint's configuration (in its manifest, from) with this run's
 * (mine): "" when they match, else a sentence in why naming the field and both values. */
static void config_compare(const char *from, const char *manifest, const char *mine,
                           char *why, size_t len)
{
    char m0[64], r0[64] = "", m1[64], r1[64] = "";
    if (!config_value(manifest, "mode", m0, sizeof m0) ||
        !config_value(manifest, "ranks", m1, sizeof m1)) {
        say(why, len, "cannot resume: %s/manifest names no mode or rank count", from);
        return;
    }
    config_value(mine, "mode", r0, sizeof r0);
    config_value(mine, "ranks", r1, sizeof r1);
    if (strcmp(m0, r0) || strcmp(m1, r1)) {
        say(why, len, "checkpoint %s was written by --mode %s on %s rank%s; this run "
            "is --mode %s on %s rank%s", from, m0, m1, strcmp(m1, "1") ? "s" : "", r0, r1,
            strcmp(r1, "1") ? "s" : "");
        return;
    }
    /* every other field of this run, in order; these are no option of train's */
    static const char *const plain[] = { "outputs", "data", "adam", "scale-backoff",
                                         "scale-growth", "overlap" };
    for (const char *p = mine; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0)) {
        char key[32], want[256], got[256];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(p + 7, " \n"), p + 7);
        if (!config_value(mine, key, want, sizeof want))
            continue;
        const char *dash = "--";
        for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
            if (strcmp(key, plain[i]) == 0)
                dash = "";
        if (!config_value(manifest, key, got, sizeof got)) {
            say(why, len, "checkpoint %s has no '%s' in its manifest: it was written "
                "by another configuration or another version of dtlab", from, key);
            return;
        }
        if (strcmp(got, want) != 0) {
            say(why, len, "checkpoint %s was written with %s%s %s; this run has "
                "%s%s %s", from, dash, key, got, dash, key, want);
            return;
        }
    }
}

/* ==== the manifest ==== */

/* Parses rank 0's checked manifest text into k (every rank does this): "" or a
 * sentence in why. The text stays owned by k->manifest (the shards point into it). */
static void manifest_parse(dti_run *r, dti_ckpt *k, char *why, size_t len)
{
    why[0] = 0;
    k->reads = dti_calloc(r->size, sizeof *k->reads);
    int have_reads = 0, have_step = 0;
    char *save = NULL;
    for (char *line = strtok_r(k->manifest, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *end;
        if (strncmp(line, "step ", 5) == 0) {
            k->step = (int)strtol(line + 5, &end, 10);
            have_step = 1;
        } else if (strncmp(line, "updates ", 8) == 0) {
            k->updates = (int)strtol(line + 8, &end, 10);
        } else if (strncmp(line, "clean ", 6) == 0) {
            k->clean = (int)strtol(line + 6, &end, 10);
        } else if (strncmp(line, "scale ", 6) == 0) {
            k->scale = strtof(line + 6, &end);          /* written with %a: exact */
        } else if (strncmp(line, "reads", 5) == 0) {
            char *p = line + 5;
            for (int i = 0; i < r->size; i++) {
                k->reads[i] = (int)strtol(p, &end, 10);
                if (end == p)
                    break;
                p = end;
                have_reads = i + 1;
            }
        } else if (strncmp(line, "shard ", 6) == 0) {
            k->shards = realloc(k->shards, (k->nshards + 1) * sizeof *k->shards);
            DT_REQUIRE(k->shards != NULL, "out of host memory");
            shard_info *s = &k->shards[k->nshards++];
            int used = 0;
            if (sscanf(line, "shard %d %31s %llu %lx %n", &s->rank, s->file, &s->bytes,
                       &s->crc, &used) < 4 || used == 0) {
                say(why, len, "%s/manifest: cannot read the line '%.60s'", k->from,
                    line);
                return;
            }
            s->regions = line + used;
            if (strncmp(s->file, "shard-", 6) != 0 || strchr(s->file, '/')) {
                say(why, len, "%s/manifest names a shard file '%s' outside the "
                    "checkpoint", k->from, s->file);
                return;
            }
        }
    }
    if (!have_step || have_reads != r->size || k->nshards < 1)
        say(why, len, "%s/manifest lacks its step, its shards or which shard each "
            "of the %d ranks reads", k->from, r->size);
}

/* Rank 0: reads RESUME/latest and its manifest, checks them against this run. Leaves
 * the manifest text in k->manifest (the CRC line cut off): "" or a sentence in why. */
static void manifest_read(dti_run *r, dti_ckpt *k, char *why, size_t len)
{
    const char *dir = r->cfg->resume_dir;
    char path[4200];
    size_t n = 0;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        say(why, len, "cannot resume: %s is not a directory", dir);
        return;
    }
    snprintf(path, sizeof path, "%s/latest", dir);
    char *latest = read_file(path, 256, &n);
    if (latest == NULL) {
        say(why, len, "cannot resume: %s holds no checkpoint (%s: %s)", dir, path,
            strerror(errno));
        return;
    }
    if (n > 0 && latest[n - 1] == '\n')
        latest[n - 1] = 0;
    int tmp = 0, step = step_of_name(latest, &tmp);
    if (step < 0 || tmp) {
        say(why, len, "cannot resume: %s does not name a checkpoint (it holds "
            "'%.40s')", path, latest);
        free(latest);
        return;
    }
    snprintf(k->from, sizeof k->from, "%s/%.12s", dir, latest);
    free(latest);

    snprintf(path, sizeof path, "%s/manifest", k->from);
    char *text = read_file(path, MAX_MANIFEST, &n);
    if (text == NULL) {
        say(why, len, "cannot resume: %s: %s", path, strerror(errno));
        return;
    }
    k->manifest = text;
    /* the last line: "crc32 " and 8 hex digits, the CRC-32 of everything before it */
    const char *last = n >= 16 ? text + n - 15 : NULL;
    char *end;
    if (last == NULL || text[n - 1] != '\n' || strncmp(last, "crc32 ", 6) != 0 ||
        last[-1] != '\n') {
        say(why, len, "cannot resume: %s is incomplete or damaged: it does not end "
            "with its CRC-32 line", path);
        return;
    }
    unsigned long said = strtoul(last + 6, &end, 16), crc = crc_of(text, n - 15);
    if (end != last + 14 || said != crc) {
        say(why, len, "cannot resume: %s is damaged: its CRC-32 is %08lx, its last "
            "line says %08lx", path, crc, said);
        return;
    }
    int version = -1;
    if (sscanf(text, "dtlab-checkpoint %d\n", &version) != 1 || version != VERSION) {
        say(why, len, "cannot resume: %s is not a dtlab checkpoint manifest of "
            "version %d", path, VERSION);
        return;
    }
    text[n - 15] = 0;                                  /* the CRC line goes */
    config_compare(k->from, text, k->config, why, len);
    if (why[0])
        return;
    const char *s = strstr(text, "\nstep ");
    int reached = s ? atoi(s + 6) : -1;
    if (reached != step) {
        say(why, len, "cannot resume: %s says step %d, its name step %d", path,
            reached, step);
        return;
    }
    if (reached >= r->cfg->steps)
        say(why, len, "checkpoint %s has reached step %d: --steps %d leaves nothing "
            "to train (ask for more than %d)", k->from, reached, r->cfg->steps,
            reached);
}

/* ==== opening: before the mode sets up ==== */

/* Rank 0: the first entry of dir that a checkpoint folder does not hold (step-NNNNNNN,
 * its .tmp, latest, latest.tmp), copied into name; 0 when there is none. Saving into a
 * folder of other files would mix them with dtlab's, which removes old step folders. */
static int foreign_entry(const char *dir, char *name, size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && !found && (e = readdir(d)) != NULL) {
        int t = 0;
        const char *s = e->d_name;
        if (strcmp(s, ".") && strcmp(s, "..") && strcmp(s, "latest") &&
            strcmp(s, "latest.tmp") && step_of_name(s, &t) < 0) {
            snprintf(name, len, "%s", s);
            found = 1;
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* Rank 0: can this run write its checkpoints into checkpoint_dir? */
static void check_target(dti_run *r, dti_ckpt *k, char *why, size_t len)
{
    const char *dir = k->dir, *res = r->cfg->resume_dir;
    struct stat st, rs;
    char other[256];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        say(why, len, "--checkpoint %s: cannot create the directory: %s", dir,
            strerror(errno));
        return;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0) {
        say(why, len, "--checkpoint %s: not a directory this run can write into",
            dir);
        return;
    }
    if (foreign_entry(dir, other, sizeof other)) {
        say(why, len, "--checkpoint %s holds files that are not dtlab checkpoints (such "
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
        say(why, len, "--checkpoint %s already holds a checkpoint (%s): continue it "
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
    const char *crash = getenv("DT_TEST_CHECKPOINT_CRASH");
    k->crash_step = crash ? atoi(crash) : 0;

    char why[1024] = "";
    const char *longest = k->dir && (!c->resume_dir ||
                                     strlen(k->dir) > strlen(c->resume_dir))
                          ? k->dir : c->resume_dir;
    if (strlen(longest) > 4000)
        say(why, sizeof why, "%.60s...: a directory name of more than 4000 characters",
            longest);
    else if ((k->dir && !k->dir[0]) || (c->resume_dir && !c->resume_dir[0]))
        say(why, sizeof why, "--%s '': the name is empty",
            k->dir && !k->dir[0] ? "checkpoint" : "resume");
    if (r->rank == 0 && !why[0]) {
        sbuf b = {0};
        config_text(r, &b);
        k->config = b.s;
        if (k->dir)
            check_target(r, k, why, sizeof why);
        if (!why[0] && c->resume_dir)
            manifest_read(r, k, why, sizeof why);
    }
    agree(r, why);                 /* only rank 0 has looked: its verdict goes */
    if (c->resume_dir == NULL)
        return;
    char *text = bcast_text(r, k->manifest, k->manifest ? strlen(k->manifest) : 0);
    free(k->manifest);
    k->manifest = text;
    char *f = bcast_text(r, k->from, strlen(k->from));
    snprintf(k->from, sizeof k->from, "%s", f);
    free(f);
    manifest_parse(r, k, why, sizeof why);
    agree(r, why);
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
    snprintf(g->name, sizeof g->name, "%s", name);
    g->p = p;
    g->nbytes = nbytes;
}

/* "name:bytes name:bytes ..." of n regions. */
static void describe(const region *g, int n, sbuf *b)
{
    for (int i = 0; i < n; i++)
        sb_printf(b, "%s%s:%zu", i ? " " : "", g[i].name, g[i].nbytes);
}

/* Where region name lies in a shard whose regions are desc: its offset, or -1 when the
 * shard has no such region of nbytes. */
static long long region_offset(const char *desc, const char *name, size_t nbytes)
{
    unsigned long long off = 0;
    const char *p = desc;
    while (*p) {
        size_t n = strcspn(p, ":");
        char *end;
        unsigned long long bytes = strtoull(p + n + 1, &end, 10);
        if (p[n] != ':' || end == p + n + 1)
            return -1;
        if (n == strlen(name) && strncmp(p, name, n) == 0)
            return bytes == nbytes ? (long long)off : -1;
        off += bytes;
        p = end + strspn(end, " ");
    }
    return -1;
}

/* The run's own regions, kept by rank 0: the losses and skipped flags of steps 1..s. */
static int run_regions(dti_run *r, int s, region *g)
{
    if (r->rank != 0)
        return 0;
    g[0] = (region){ "losses", r->res->loss, (size_t)s * sizeof(float) };
    g[1] = (region){ "skipped", r->res->skipped, (size_t)s * sizeof(int) };
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
        say(why, len, "checkpoint %s: rank %d would read the shard of rank %d, this "
            "run's layout puts its state on rank %d", k->from, r->rank, src,
            k->owner);
        return;
    }
    for (int i = 0; i < k->nshards; i++)
        if (k->shards[i].rank == src)
            *info = &k->shards[i];
    shard_info *s = *info;
    if (s == NULL) {
        say(why, len, "checkpoint %s: the manifest lists no shard of rank %d",
            k->from, src);
        return;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", k->from, s->file);
    struct stat st;
    if (stat(path, &st) != 0) {
        say(why, len, "checkpoint %s: cannot open %s: %s", k->from, s->file,
            strerror(errno));
        return;
    }
    if ((unsigned long long)st.st_size != s->bytes) {
        say(why, len, "checkpoint %s: %s has %llu bytes, the manifest says %llu "
            "(cut short or overwritten)", k->from, s->file,
            (unsigned long long)st.st_size, s->bytes);
        return;
    }
    size_t n = 0;
    *data = read_file(path, (size_t)s->bytes, &n);
    if (*data == NULL) {
        say(why, len, "checkpoint %s: cannot read %s: %s", k->from, s->file,
            strerror(errno));
        return;
    }
    unsigned long crc = crc_of(*data, n);
    if (n != s->bytes || crc != s->crc)
        say(why, len, "checkpoint %s: %s is damaged: its CRC-32 is %08lx, the "
            "manifest says %08lx", k->from, s->file, crc, s->crc);
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

    /* each writer's regions, to rank 0 once, for the manifests */
    sbuf b = {0};
    sb_printf(&b, "%s", "");
    describe(k->reg, k->nreg, &b);
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

    /* resuming: every rank loads and checks its shard; all agree before any state
     * changes */
    char why[1024] = "", *data = NULL;
    shard_info *s = NULL;
    region run[2];
    int nrun = run_regions(r, k->step, run);
    shard_load(r, k, &data, &s, why, sizeof why);
    for (int i = 0; !why[0] && i < nrun + k->nreg; i++) {
        const region *g = i < nrun ? &run[i] : &k->reg[i - nrun];
        if (region_offset(s->regions, g->name, g->nbytes) < 0)
            say(why, sizeof why, "checkpoint %s: %s holds no region '%s' of %zu "
                "bytes (it has: %.200s)", k->from, s->file, g->name, g->nbytes,
                s->regions);
    }
    agree(r, why);
    for (int i = 0; i < nrun + k->nreg; i++) {
        const region *g = i < nrun ? &run[i] : &k->reg[i - nrun];
        dt_memcpy(g->p, data + region_offset(s->regions, g->name, g->nbytes), g->nbytes);
    }
    free(data);
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
        DT_REQUIRE(write_all(fd, h, n) == 0, "checkpoint: cannot write %s: %s", path,
                   strerror(errno));
        *crc = crc_add(*crc, h, n);
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
    sb_printf(&m, "dtlab-checkpoint %d\n%s", VERSION, k->config);
    sb_printf(&m, "step %d\nupdates %d\nscale %a\nclean %d\n", step, r->updates,
              (double)r->scaler.scale, r->scaler.clean);
    k->bytes_last = 0;
    for (int i = 0; i < r->size; i++) {
        if (k->owners[i] != i)
            continue;
        sb_printf(&m, "shard %d shard-%05d.bin %llu %08lx ", i, i, bytes[i], crc[i]);
        if (i == 0) {
            region g[2];
            run_regions(r, step, g);
            describe(g, 2, &m);
            sb_printf(&m, "%s", k->desc[0][0] ? " " : "");
        }
        sb_printf(&m, "%s\n", k->desc[i]);
        k->bytes_last += bytes[i];
    }
    sb_printf(&m, "reads");
    for (int i = 0; i < r->size; i++)
        sb_printf(&m, " %d", k->owners[i]);
    sb_printf(&m, "\n");
    sb_printf(&m, "crc32 %08lx\n", crc_of(m.s, m.len));

    char path[4300];
    snprintf(path, sizeof path, "%s/manifest", tmp);
    write_small(path, m.s, m.len);
    free(m.s);
    sync_dir(tmp);
    remove_step_dir(fin);          /* a stale one of another run; latest never names it */
    DT_REQUIRE(rename(tmp, fin) == 0, "checkpoint: cannot rename %s to %s: %s", tmp, fin,
               strerror(errno));
    sync_dir(k->dir);

    /* the pointer to the newest: written aside, then renamed over the old one */
    char name[16], latest[4200];
    snprintf(name, sizeof name, "step-%07d\n", step);
    snprintf(path, sizeof path, "%s/latest.tmp", k->dir);
    snprintf(latest, sizeof latest, "%s/latest", k->dir);
    write_small(path, name, strlen(name));
    DT_REQUIRE(rename(path, latest) == 0, "checkpoint: cannot rename %s to %s: %s", path,
               latest, strerror(errno));
    sync_dir(k->dir);

    /* keep this one and the one before; older ones and any leftover .tmp go */
    int prev = k->latest > 0 ? k->latest : -1;
    k->latest = step;
    DIR *d = opendir(k->dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        int t = 0, n = step_of_name(e->d_name, &t);
        if (n < 0 || (!t && (n == step || n == prev)))
            continue;
        snprintf(path, sizeof path, "%s/%s", k->dir, e->d_name);
        remove_step_dir(path);
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
        remove_step_dir(tmp);
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
    if (k->written)
        dti_summary(r, "checkpoint: wrote %d into %s, the last step-%07d (%llu bytes in "
                    "shards), %.1f ms each", k->written, k->dir, k->latest, k->bytes_last,
                    k->seconds / k->written * 1e3);
    for (int i = 0; k->desc && i < r->size; i++)
        free(k->desc[i]);
    free(k->desc);
    free(k->reg);
    free(k->owners);
    free(k->config);
    free(k->manifest);
    free(k->shards);
    free(k->reads);
    free(k);
    r->ckpt = NULL;
}
