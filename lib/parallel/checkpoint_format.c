/* Checkpoints on disk: the files, the configuration a checkpoint must match, the
 * manifest. checkpoint.c decides when and by whom they are written and read;
 * checkpoint_reshard.c re-cuts them for another layout.
 *
 * For checkpoint_dir DIR:
 *
 *     DIR/latest                  one line: the name of the newest complete checkpoint
 *     DIR/step-0000010/manifest   text, below
 *     DIR/step-0000010/shard-00000.bin, ...   a writer's regions one after another, raw
 *                                 bytes (float32 little-endian for weights and state)
 *
 * The manifest, line by line:
 *
 *     dtlab-checkpoint 1
 *     config KEY VALUE            the run's configuration (mode, ranks, model, data, ...)
 *     step S / updates U / scale X (C99 %a, exact) / clean C      the run's scalars
 *     shard R FILE BYTES CRC NAME:BYTES NAME:BYTES ...            one per writer rank R:
 *                                 its file, size, CRC-32 (hex), and its regions in order
 *                                 (rank 0's starts with the run's own: losses, skipped)
 *     map R NAME WIDTH SPAN SPAN ...   which parameters region NAME of shard R holds,
 *                                 WIDTH floats each (1: weights; 1 or 2: the optimizer's
 *                                 momentum, Adam's m and v interleaved). A SPAN is
 *                                 START,LEN (parameters START..START+LEN-1 of the whole
 *                                 model, in --dump's order) or START,LEN,COUNT,STRIDE
 *                                 (COUNT such runs, STRIDE apart: a column slice of a
 *                                 matrix). Elements after the mapped ones are padding.
 *     reads R0 R1 ...             the shard each rank read its state from
 *     crc32 XXXXXXXX              the CRC-32 of everything before this line
 *
 * So the whole model's weights are: for every map line of NAME "weights" (or fsdp's
 * "weights.L"), the WIDTH-float elements of that region in its shard file, laid at
 * the parameters its spans name. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "checkpoint_internal.h"
#include "p2p.h"
#include "prog.h"

/* ==== the ranks' verdict (checkpoint.c and checkpoint_reshard.c) ==== */

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
void ck_agree(dti_run *r, const char *why)
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

/* ==== small helpers: a growing string, CRC-32 ==== */

void ck_sb_printf(sbuf *b, const char *fmt, ...)
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

void ck_say(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

/* zlib's crc32 takes unsigned int lengths: feed it 1 GiB at a time. */
unsigned long ck_crc_add(unsigned long crc, const void *p, size_t n)
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

unsigned long ck_crc_of(const void *p, size_t n)
{
    return ck_crc_add(crc32(0L, Z_NULL, 0), p, n);
}

/* ==== files ==== */

/* Reads a whole file of at most max bytes into a new allocation (NUL-terminated).
 * Returns NULL with errno set (EFBIG: larger than max). */
char *ck_read_file(const char *path, size_t max, size_t *len)
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

int ck_write_all(int fd, const void *p, size_t n)
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
void ck_sync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    DT_REQUIRE(fd >= 0 && fsync(fd) == 0, "checkpoint: cannot sync the directory %s: %s",
               path, strerror(errno));
    close(fd);
}

/* Writes a small file completely and syncs it (rank 0's manifest and latest). */
void ck_write_small(const char *path, const char *text, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    DT_REQUIRE(fd >= 0 && ck_write_all(fd, text, n) == 0 && fsync(fd) == 0 && close(fd) == 0,
               "checkpoint: cannot write %s: %s", path, strerror(errno));
}

/* Removes a checkpoint directory of ours: its manifest and shards, then itself. Anything
 * else in it (not ours) is left, and the directory with it. */
void ck_remove_step_dir(const char *path)
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
int ck_step_of_name(const char *name, int *tmp)
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

/* Rank 0: the first entry of dir that a checkpoint folder does not hold (step-NNNNNNN,
 * its .tmp, latest, latest.tmp), copied into name; 0 when there is none. Saving into a
 * folder of other files would mix them with dtlab's, which removes old step folders. */
int ck_foreign_entry(const char *dir, char *name, size_t len)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int found = 0;
    while (d && !found && (e = readdir(d)) != NULL) {
        int t = 0;
        const char *s = e->d_name;
        if (strcmp(s, ".") && strcmp(s, "..") && strcmp(s, "latest") &&
            strcmp(s, "latest.tmp") && ck_step_of_name(s, &t) < 0) {
            snprintf(name, len, "%s", s);
            found = 1;
        }
    }
    if (d)
        closedir(d);
    return found;
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
 * options is named after it, so that a refusal can ck_say "--hidden 24". */
void ck_config_text(const dti_run *r, sbuf *b)
{
    const dt_train_config *c = r->cfg;
    ck_sb_printf(b, "config mode %s\n", dt_mode_name(c->mode));
    ck_sb_printf(b, "config ranks %d\n", r->size);
    if (c->kind == DT_MODEL_GPT) {
        const dt_gpt_config *g = &c->gpt;
        const dt_text *t = c->text;
        ck_sb_printf(b, "config model gpt\nconfig layers %d\nconfig heads %d\n"
                  "config embed %d\nconfig seq %d\n", g->layers, g->heads, g->embed,
                  g->seq);
        ck_sb_printf(b, "config seed %llu\n", c->seed);
        ck_sb_printf(b, "config text %d bytes, CRC-32 %08lx\n", t->n,
                  ck_crc_of(t->tok, (size_t)t->n));
    } else {
        const dt_dataset *set = c->data;
        const dt_mlp_config *m = &c->model;
        unsigned long crc = ck_crc_of(set->x, (size_t)set->n * set->features *
                                      sizeof(float));
        crc = ck_crc_add(crc, set->y, (size_t)set->n * sizeof(int));
        ck_sb_printf(b, "config layers %d\nconfig hidden %d\nconfig act %s\n", m->layers,
                  m->hidden, m->act == DT_RELU ? "relu" : "gelu");
        ck_sb_printf(b, "config outputs %d\n", m->out);
        ck_sb_printf(b, "config seed %llu\n", c->seed);  /* before data: it makes data */
        ck_sb_printf(b, "config data %d examples of %d features, %d classes, CRC-32 "
                  "%08lx\n", set->n, set->features, set->classes, crc);
    }
    char f[4][32];
    ck_sb_printf(b, "config optim %s\nconfig lr %s\n", c->optim.kind == DT_SGD ? "sgd"
              : "adam", float_text(c->optim.lr, f[0], sizeof f[0]));
    if (c->optim.kind == DT_SGD)
        ck_sb_printf(b, "config momentum %s\n", float_text(c->optim.momentum, f[0], 32));
    else
        ck_sb_printf(b, "config adam beta1 %s beta2 %s eps %s\n",
                  float_text(c->optim.beta1, f[0], 32),
                  float_text(c->optim.beta2, f[1], 32),
                  float_text(c->optim.eps, f[2], 32));
    ck_sb_printf(b, "config batch %d\n", c->batch);
    ck_sb_printf(b, "config precision %s\n", c->precision == DT_FP16 ? "fp16" :
              c->precision == DT_BF16 ? "bf16" : "fp32");
    if (c->precision == DT_FP16)
        ck_sb_printf(b, "config loss-scale %s\nconfig scale-window %d\n"
                  "config scale-backoff %s\nconfig scale-growth %s\n",
                  float_text(c->scaler.init, f[0], 32), c->scaler.window,
                  float_text(c->scaler.backoff, f[1], 32),
                  float_text(c->scaler.growth, f[2], 32));
    ck_sb_printf(b, "config device %s\n", r->where == DT_CUDA ? "cuda" : "cpu");
    /* the options of the mode's loop */
    dt_mode md = c->mode;
    if (md == DT_MODE_DP)
        ck_sb_printf(b, "config dedicated-server %s\nconfig async %d\n",
                  c->dedicated_server ? "yes" : "no", c->async);
    if (md == DT_MODE_FSDP)
        ck_sb_printf(b, "config zero %d\nconfig offload %s\n", c->zero,
                  c->offload ? "on" : "off");
    if (md == DT_MODE_HYBRID)
        ck_sb_printf(b, "config dp %d\nconfig tp %d\nconfig pp %d\n", c->dp, c->tp, c->pp);
    if (md == DT_MODE_SERIAL || md == DT_MODE_DDP || md == DT_MODE_TP ||
        md == DT_MODE_PP || md == DT_MODE_HYBRID)
        ck_sb_printf(b, "config accum %d\n", c->accum);
    if (md == DT_MODE_DDP || md == DT_MODE_HYBRID)
        ck_sb_printf(b, "config bucket-kb %d\nconfig overlap %s\n", c->bucket_kb,
                  c->overlap ? "on" : "off");
    if (md == DT_MODE_DDP)
        ck_sb_printf(b, "config compress %s%s\n", dt_compress_name(c->compress),
                  c->compress == DT_COMPRESS_SIGN && !c->compress_feedback
                  ? " --no-feedback" : "");
    if (md == DT_MODE_TP || md == DT_MODE_HYBRID)
        ck_sb_printf(b, "config tp-style %s\n", c->tp_style == DT_TP_MEGATRON ? "megatron"
                  : "allgather");
    if (md == DT_MODE_PP || md == DT_MODE_HYBRID)
        ck_sb_printf(b, "config micro %d\nconfig schedule %s\n", c->micro,
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
 * (mine): "" when they match, else a sentence in why naming the field and both values.
 * The rank count and hybrid's --dp, --tp, --pp may differ: the state is re-cut. */
static void config_compare(const char *from, const char *manifest, const char *mine,
                           char *why, size_t len)
{
    char m0[64], r0[64] = "", m1[64], r1[64] = "";
    if (!config_value(manifest, "mode", m0, sizeof m0) ||
        !config_value(manifest, "ranks", m1, sizeof m1)) {
        ck_say(why, len, "cannot resume: %s/manifest names no mode or rank count", from);
        return;
    }
    config_value(mine, "mode", r0, sizeof r0);
    config_value(mine, "ranks", r1, sizeof r1);
    if (strcmp(m0, r0)) {
        ck_say(why, len, "checkpoint %s was written by --mode %s on %s rank%s; this run "
            "is --mode %s on %s rank%s: a checkpoint resumes in the mode that wrote it",
            from, m0, m1, strcmp(m1, "1") ? "s" : "", r0, r1, strcmp(r1, "1") ? "s" : "");
        return;
    }
    /* every other field of this run, in order; these are no option of train's */
    static const char *const plain[] = { "outputs", "data", "adam", "scale-backoff",
                                         "scale-growth", "overlap", "text" };
    for (const char *p = mine; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0)) {
        char key[32], want[256], got[256];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(p + 7, " \n"), p + 7);
        if (!config_value(mine, key, want, sizeof want) || !strcmp(key, "ranks") ||
            !strcmp(key, "dp") || !strcmp(key, "tp") || !strcmp(key, "pp"))
            continue;
        const char *dash = "--";
        for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
            if (strcmp(key, plain[i]) == 0)
                dash = "";
        if (!config_value(manifest, key, got, sizeof got)) {
            ck_say(why, len, "checkpoint %s has no '%s' in its manifest: it was written "
                "by another configuration or another version of dtlab", from, key);
            return;
        }
        if (strcmp(got, want) != 0) {
            ck_say(why, len, "checkpoint %s was written with %s%s %s; this run has "
                "%s%s %s", from, dash, key, got, dash, key, want);
            return;
        }
    }
}

/* ==== the manifest ==== */

/* The layout a configuration's lines name: "3 ranks", "4 ranks (--dp 2 --tp 1 --pp 2)". */
static void layout_of(const char *text, char *out, size_t len)
{
    char n[32] = "?", d[32], t[32], p[32];
    config_value(text, "ranks", n, sizeof n);
    if (config_value(text, "dp", d, sizeof d) && config_value(text, "tp", t, sizeof t) &&
        config_value(text, "pp", p, sizeof p))
        snprintf(out, len, "%.9s rank%s (--dp %.9s --tp %.9s --pp %.9s)", n, strcmp(n, "1") ?
                 "s" : "", d, t, p);
    else
        snprintf(out, len, "%.9s rank%s", n, strcmp(n, "1") ? "s" : "");
}

/* ==== reading the manifest's fields strictly ==== */

/* A manifest may have been edited by hand: every number is read as digits alone (no
 * sign, no spaces, no 0x), checked against its largest sensible value before anything
 * is sized by it, so that "0,1,4294967295,1" or "-1" is a sentence, not a loop. */

/* The digits at *p in base 10 or 16, at most max: 0 and *p past them, else -1. */
static int num(const char **p, int base, unsigned long long max, unsigned long long *v)
{
    const char *s = *p;
    unsigned long long x = 0;
    for (;; s++) {
        int c = *s, d = c >= '0' && c <= '9' ? c - '0' : base == 16 && c >= 'a' &&
                c <= 'f' ? c - 'a' + 10 : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
                : -1;
        if (d < 0)
            break;
        if ((unsigned long long)d > max || x > (max - (unsigned)d) / (unsigned)base)
            return -1;
        x = x * (unsigned)base + (unsigned)d;
    }
    if (s == *p)
        return -1;
    *v = x;
    *p = s;
    return 0;
}

/* The word at *p (up to a space or the end), into out (len bytes, no more than len - 1
 * characters): 0 and *p past it, else -1. */
static int word(const char **p, char *out, size_t len)
{
    size_t n = strcspn(*p, " ");
    if (n == 0 || n >= len)
        return -1;
    memcpy(out, *p, n);
    out[n] = 0;
    *p += n;
    return 0;
}

/* The one space between two fields: 0 and *p past it, else -1. */
static int gap(const char **p)
{
    if (**p != ' ')
        return -1;
    ++*p;
    return 0;
}

/* When line is "KEY N": N into *val and 1, with *bad = key when N is no whole number
 * from min to 2^30; else 0. */
static int count_line(const char *line, const char *key, long min, int *val,
                      const char **bad)
{
    size_t kl = strlen(key);
    if (strncmp(line, key, kl) != 0 || line[kl] != ' ')
        return 0;
    const char *p = line + kl + 1;
    unsigned long long v = 0;
    if (num(&p, 10, 1 << 30, &v) != 0 || *p || (long long)v < min)
        *bad = key;
    *val = (int)v;
    return 1;
}

/* "shard R FILE BYTES CRC NAME:BYTES ...": into s; "" or a sentence in why. The rank is
 * one of old_size, the file a name inside the checkpoint, the regions' bytes add up to
 * the file's. */
static void shard_parse(dti_ckpt *k, const char *line, int no, shard_info *s, char *why,
                        size_t len)
{
    const char *p = line + 6;
    unsigned long long rank = 0, crc = 0, sum = 0, b = 0;
    if (num(&p, 10, (unsigned)k->old_size - 1, &rank) || gap(&p) ||
        word(&p, s->file, sizeof s->file) || gap(&p) ||
        num(&p, 10, ULLONG_MAX, &s->bytes) || gap(&p) || num(&p, 16, 0xffffffffu, &crc)) {
        ck_say(why, len, "%s/manifest, line %d: cannot read the shard line '%.60s' (shard "
               "RANK FILE BYTES CRC REGIONS, RANK below the %d ranks that wrote it)",
               k->from, no, line, k->old_size);
        return;
    }
    s->rank = (int)rank;
    s->crc = (unsigned long)crc;
    p += strspn(p, " ");
    s->regions = (char *)p;
    if (strncmp(s->file, "shard-", 6) != 0 || strchr(s->file, '/')) {
        ck_say(why, len, "%s/manifest names a shard file '%s' outside the checkpoint",
               k->from, s->file);
        return;
    }
    if (k->shard_of[rank] >= 0) {
        ck_say(why, len, "%s/manifest, line %d: a second shard of rank %d", k->from, no,
               s->rank);
        return;
    }
    /* NAME:BYTES ..., each region after the one before: their sum is the file */
    while (*p) {
        char name[32];
        size_t n = strcspn(p, ": ");
        if (n == 0 || n >= sizeof name || p[n] != ':') {
            ck_say(why, len, "%s/manifest, line %d: the regions of rank %d's shard are not "
                   "NAME:BYTES ('%.40s')", k->from, no, s->rank, p);
            return;
        }
        p += n + 1;
        if (num(&p, 10, s->bytes - sum, &b) || (*p && *p != ' ')) {
            ck_say(why, len, "%s/manifest, line %d: rank %d's regions do not fit its "
                   "shard of %llu bytes ('%.*s:%.20s')", k->from, no, s->rank, s->bytes,
                   (int)n, p - n - 1, p);
            return;
        }
        sum += b;
        p += strspn(p, " ");
    }
    if (sum != s->bytes)
        ck_say(why, len, "%s/manifest, line %d: rank %d's regions add up to %llu bytes, "
               "its shard to %llu", k->from, no, s->rank, sum, s->bytes);
}

/* "map R NAME WIDTH SPAN ..." (R, NAME and WIDTH read as the line was; k->shards
 * complete): finds its region and reads its spans into m->span, checked against the
 * region and the model (P parameters) before anything is sized by them: "" or a
 * sentence in why. */
static void map_check(dti_ckpt *k, size_t P, map_info *m, char *why, size_t len)
{
    int sh = k->shard_of[m->rank];
    size_t have = 0;
    long long off = sh < 0 ? -1 : ck_region_find(k->shards[sh].regions, m->name, &have);
    if (off < 0) {
        ck_say(why, len, "%s/manifest, line %d: a map of rank %d's '%s', which %s",
               k->from, m->line, m->rank, m->name, sh < 0 ? "wrote no shard"
               : "its shard does not hold");
        return;
    }
    m->shard = sh;
    m->off = (unsigned long long)off;
    m->nbytes = have;
    /* each span after the one before: a map holds each parameter once, so it maps at
     * most P of them, and its spans (len > 0) are at most P */
    size_t mapped = 0, next = 0;
    int j = 0;
    for (const char *p = m->spans; *p; j++) {
        const char *s0 = p;
        unsigned long long v[4] = { 0, 0, 1, 0 };
        int bad = num(&p, 10, SIZE_MAX, &v[0]) || *p++ != ',' ||
                  num(&p, 10, SIZE_MAX, &v[1]);
        if (!bad && *p == ',') {
            p++;
            bad = num(&p, 10, SIZE_MAX, &v[2]) || *p++ != ',' ||
                  num(&p, 10, SIZE_MAX, &v[3]);
        }
        int n = (int)strcspn(s0, " ");
        size_t start = v[0], l = v[1], count = v[2], stride = v[3];
        const char *what = NULL;
        if (bad || (*p && *p != ' '))
            what = "is not START,LEN or START,LEN,COUNT,STRIDE in whole numbers";
        else if (count < 1)
            what = "has a COUNT of 0";
        else if (l == 0)                                  /* maps nothing */
            what = NULL;
        else if (count > 1 && stride < l)
            what = "overlaps itself (a STRIDE shorter than its LEN)";
        else if (start > P || l > P - start ||
                 (count > 1 && count - 1 > (P - start - l) / stride))
            what = "reaches past the model's last parameter";    /* named below */
        else if (start < next)
            what = "begins before the span before it ends (a map's spans ascend, apart)";
        if (what) {
            char model[64] = "";
            if (what[0] == 'r')
                snprintf(model, sizeof model, " (%zu, parameter %zu)", P, P - 1);
            ck_say(why, len, "%s/manifest, line %d: span %d of rank %d's '%s' (%.*s) %s%s",
                   k->from, m->line, j + 1, m->rank, m->name, n < 60 ? n : 60, s0, what,
                   model);
            return;
        }
        p += strspn(p, " ");
        if (l == 0)
            continue;
        next = start + (count - 1) * stride + l;
        mapped += count * l;
        m->span = realloc(m->span, (m->nspan + 1) * sizeof *m->span);
        DT_REQUIRE(m->span != NULL, "out of host memory");
        m->span[m->nspan++] = (dti_span){ start, l, count, stride };
    }
    size_t elem = (size_t)m->width * sizeof(float);
    if (mapped > have / elem)
        ck_say(why, len, "%s/manifest, line %d: rank %d's '%s' maps %zu parameters of %d "
               "float%s (%zu bytes) into a region of %zu bytes", k->from, m->line, m->rank,
               m->name, mapped, m->width, m->width == 1 ? "" : "s", mapped * elem, have);
}

static int map_order(const void *a, const void *b)
{
    const map_info *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->rank != y->rank ? (x->rank < y->rank ? -1 : 1) : x->line - y->line;
}

/* Parses rank 0's checked manifest text into k (every rank does this): "" or a
 * sentence in why. The text stays owned by k->manifest (the shards and maps point into
 * it). Sets k->reshard when the checkpoint's layout is not this run's. Every field is
 * checked as it is read (a sentence naming the line), the maps against their regions
 * and the model, so that nothing later is sized by a number no one checked. */
void ck_manifest_parse(dti_run *r, dti_ckpt *k, char *why, size_t len)
{
    why[0] = 0;
    const dt_train_config *c = r->cfg;
    char mine[160];
    if (c->mode == DT_MODE_HYBRID)
        snprintf(mine, sizeof mine, "config ranks %d\nconfig dp %d\nconfig tp %d\n"
                 "config pp %d\n", r->size, c->dp, c->tp, c->pp);
    else
        snprintf(mine, sizeof mine, "config ranks %d\n", r->size);
    layout_of(k->manifest, k->old_layout, sizeof k->old_layout);
    layout_of(mine, k->new_layout, sizeof k->new_layout);
    k->reshard = strcmp(k->old_layout, k->new_layout) != 0;
    char n[32] = "";
    const char *p = n;
    unsigned long long ranks = 0;
    config_value(k->manifest, "ranks", n, sizeof n);
    if (num(&p, 10, CK_MAX_RANKS, &ranks) || *p || ranks < 1) {
        ck_say(why, len, "%s/manifest: a rank count of '%s' (1 to %d)", k->from, n,
               CK_MAX_RANKS);
        return;
    }
    k->old_size = (int)ranks;
    k->reads = dti_calloc(k->old_size, sizeof *k->reads);
    k->shard_of = dti_calloc(k->old_size, sizeof *k->shard_of);
    for (int i = 0; i < k->old_size; i++)
        k->shard_of[i] = -1;
    int have_reads = 0, have_step = 0, no = 0;
    for (char *line = k->manifest, *next; *line && !why[0]; line = next) {
        next = line + strcspn(line, "\n");
        if (*next)
            *next++ = 0;
        no++;
        const char *key = NULL;
        have_step |= count_line(line, "step", 1, &k->step, &key);   /* each its own */
        count_line(line, "updates", 0, &k->updates, &key);          /* key alone */
        count_line(line, "clean", 0, &k->clean, &key);
        if (strncmp(line, "scale ", 6) == 0) {
            char *end;
            k->scale = strtof(line + 6, &end);          /* written with %a: exact */
            key = end == line + 6 || *end || !(k->scale > 0 && k->scale < INFINITY)
                  ? "scale" : NULL;
        }
        if (key) {
            ck_say(why, len, "%s/manifest, line %d: its '%s' line does not hold a %s "
                   "('%.40s')", k->from, no, key, strcmp(key, "scale") ? "count from 0 "
                   "to 2^30" : "positive finite number", line);
        } else if (strncmp(line, "reads ", 6) == 0) {
            const char *q = line + 6;
            unsigned long long v;
            for (have_reads = 0; have_reads < k->old_size; have_reads++) {
                if (num(&q, 10, (unsigned)k->old_size - 1, &v))
                    break;
                k->reads[have_reads] = (int)v;
                if (*q == ' ')
                    q++;
            }
            if (*q || have_reads != k->old_size)
                ck_say(why, len, "%s/manifest, line %d: the reads line does not name, for "
                       "each of the %d ranks, one of them ('%.40s')", k->from, no,
                       k->old_size, line);
        } else if (strncmp(line, "shard ", 6) == 0) {
            k->shards = realloc(k->shards, (k->nshards + 1) * sizeof *k->shards);
            DT_REQUIRE(k->shards != NULL, "out of host memory");
            shard_info *s = &k->shards[k->nshards];
            memset(s, 0, sizeof *s);
            shard_parse(k, line, no, s, why, len);
            if (!why[0])
                k->shard_of[s->rank] = k->nshards++;
        } else if (strncmp(line, "map ", 4) == 0) {
            k->maps = realloc(k->maps, (k->nmaps + 1) * sizeof *k->maps);
            DT_REQUIRE(k->maps != NULL, "out of host memory");
            map_info *m = &k->maps[k->nmaps++];
            memset(m, 0, sizeof *m);
            m->line = no;
            unsigned long long rank = 0, width = 0;
            const char *q = line + 4;
            if (num(&q, 10, (unsigned)k->old_size - 1, &rank) || gap(&q) ||
                word(&q, m->name, sizeof m->name) || gap(&q) ||
                num(&q, 10, CK_MAX_WIDTH, &width) || width < 1 || (*q && *q != ' '))
                ck_say(why, len, "%s/manifest, line %d: cannot read the map line '%.60s' "
                       "(map RANK NAME WIDTH SPANS: RANK below the %d ranks that wrote "
                       "it, WIDTH 1 to %d floats a parameter)", k->from, no, line,
                       k->old_size, CK_MAX_WIDTH);
            m->rank = (int)rank;
            m->width = (int)width;
            m->spans = q + strspn(q, " ");
        }
    }
    if (!why[0] && (!have_step || have_reads != k->old_size || k->nshards < 1))
        ck_say(why, len, "%s/manifest lacks its step, its shards or which shard each "
            "of the %d ranks reads", k->from, k->old_size);
    /* the maps, once every shard is known: each against its region and the model */
    for (int i = 0; i < k->nmaps && !why[0]; i++)
        map_check(k, r->nparams, &k->maps[i], why, len);
    if (why[0] || k->nmaps < 2)
        return;
    qsort(k->maps, k->nmaps, sizeof *k->maps, map_order);
    for (int i = 1; i < k->nmaps && !why[0]; i++) {
        const map_info *a = &k->maps[i - 1], *b = &k->maps[i];
        if (a->rank == b->rank && strcmp(a->name, b->name) == 0)
            ck_say(why, len, "%s/manifest, line %d: a second map of rank %d's '%s' (line "
                   "%d has one)", k->from, b->line, b->rank, b->name, a->line);
    }
}

/* Rank 0: reads RESUME/latest and its manifest, checks them against this run. Leaves
 * the manifest text in k->manifest (the CRC line cut off): "" or a sentence in why. */
void ck_manifest_read(dti_run *r, dti_ckpt *k, char *why, size_t len)
{
    const char *dir = r->cfg->resume_dir;
    char path[4200];
    size_t n = 0;
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        ck_say(why, len, "cannot resume: %s is not a directory", dir);
        return;
    }
    snprintf(path, sizeof path, "%s/latest", dir);
    char *latest = ck_read_file(path, 256, &n);
    if (latest == NULL) {
        ck_say(why, len, "cannot resume: %s holds no checkpoint (%s: %s)", dir, path,
            strerror(errno));
        return;
    }
    if (n > 0 && latest[n - 1] == '\n')
        latest[n - 1] = 0;
    int tmp = 0, step = ck_step_of_name(latest, &tmp);
    if (step < 0 || tmp) {
        ck_say(why, len, "cannot resume: %s does not name a checkpoint (it holds "
            "'%.40s')", path, latest);
        free(latest);
        return;
    }
    snprintf(k->from, sizeof k->from, "%s/%.12s", dir, latest);
    free(latest);

    snprintf(path, sizeof path, "%s/manifest", k->from);
    char *text = ck_read_file(path, CK_MAX_MANIFEST, &n);
    if (text == NULL) {
        ck_say(why, len, "cannot resume: %s: %s", path, strerror(errno));
        return;
    }
    k->manifest = text;
    /* the last line: "crc32 " and 8 hex digits, the CRC-32 of everything before it */
    const char *last = n >= 16 ? text + n - 15 : NULL;
    char *end;
    if (last == NULL || text[n - 1] != '\n' || strncmp(last, "crc32 ", 6) != 0 ||
        last[-1] != '\n') {
        ck_say(why, len, "cannot resume: %s is incomplete or damaged: it does not end "
            "with its CRC-32 line", path);
        return;
    }
    unsigned long said = strtoul(last + 6, &end, 16), crc = ck_crc_of(text, n - 15);
    if (end != last + 14 || said != crc) {
        ck_say(why, len, "cannot resume: %s is damaged: its CRC-32 is %08lx, its last "
            "line says %08lx", path, crc, said);
        return;
    }
    int version = -1;
    if (sscanf(text, "dtlab-checkpoint %d\n", &version) != 1 || version != CK_VERSION) {
        ck_say(why, len, "cannot resume: %s is not a dtlab checkpoint manifest of "
            "version %d", path, CK_VERSION);
        return;
    }
    text[n - 15] = 0;                                  /* the CRC line goes */
    config_compare(k->from, text, k->config, why, len);
    if (why[0])
        return;
    const char *s = strstr(text, "\nstep "), *p = s ? s + 6 : NULL;
    unsigned long long v = 0;               /* read strictly, as ck_manifest_parse does */
    if (p && (num(&p, 10, 1 << 30, &v) != 0 || (*p && *p != '\n'))) {
        ck_say(why, len, "cannot resume: %s: its step line '%.*s' is no step (a whole "
            "number up to 2^30)", path, (int)strcspn(s + 1, "\n") < 40 ?
            (int)strcspn(s + 1, "\n") : 40, s + 1);
        return;
    }
    long reached = s ? (long)v : -1;
    if (reached != step) {
        ck_say(why, len, "cannot resume: %s says step %ld, its name step %d", path,
            reached, step);
        return;
    }
    if (reached >= r->cfg->steps)
        ck_say(why, len, "checkpoint %s has reached step %ld: --steps %d leaves nothing "
            "to train (ask for more than %ld)", k->from, reached, r->cfg->steps,
            reached);
}

/* "name:bytes name:bytes ..." of n regions. */
void ck_describe(const region *g, int n, sbuf *b)
{
    for (int i = 0; i < n; i++)
        ck_sb_printf(b, "%s%s:%zu", i ? " " : "", g[i].name, g[i].nbytes);
}

/* Their map lines, "map NAME WIDTH SPANS" (the writer's rank goes in front at the
 * commit), one for each region that has a map. */
void ck_describe_maps(const region *g, int n, sbuf *b)
{
    for (int i = 0; i < n; i++) {
        if (g[i].width == 0)
            continue;
        ck_sb_printf(b, "map %s %d", g[i].name, g[i].width);
        for (int j = 0; j < g[i].nspan; j++) {
            const dti_span *s = &g[i].span[j];
            if (s->count == 1)
                ck_sb_printf(b, " %zu,%zu", s->start, s->len);
            else
                ck_sb_printf(b, " %zu,%zu,%zu,%zu", s->start, s->len, s->count,
                             s->stride);
        }
        ck_sb_printf(b, "\n");
    }
}

long long ck_region_find(const char *desc, const char *name, size_t *nbytes)
{
    unsigned long long off = 0;
    const char *p = desc;
    while (*p) {
        size_t n = strcspn(p, ":");
        char *end;
        unsigned long long bytes = strtoull(p + n + 1, &end, 10);
        if (p[n] != ':' || end == p + n + 1)
            return -1;
        if (n == strlen(name) && strncmp(p, name, n) == 0) {
            *nbytes = (size_t)bytes;
            return (long long)off;
        }
        off += bytes;
        p = end + strspn(end, " ");
    }
    return -1;
}

long long ck_region_offset(const char *desc, const char *name, size_t nbytes)
{
    size_t have = 0;
    long long off = ck_region_find(desc, name, &have);
    return off >= 0 && have == nbytes ? off : -1;
}
