/* Checkpoints, inside: what checkpoint.c (the ranks' agreement: saving, resuming),
 * checkpoint_format.c (the files on disk, the configuration, the manifest) and
 * checkpoint_reshard.c (re-cutting a checkpoint for another layout) share. Nothing
 * outside these three files includes it: the modes see parallel_internal.h's
 * dti_ckpt_* functions. */
#ifndef DT_CHECKPOINT_INTERNAL_H
#define DT_CHECKPOINT_INTERNAL_H

#include <stddef.h>
#include "parallel_internal.h"

#define CK_VERSION 1
#define CK_MAX_MANIFEST (64u << 20)
#define CK_MAX_RANKS (1 << 20)       /* the most ranks a manifest may name */
#define CK_MAX_WIDTH 64              /* the most floats a parameter a map may name */

/* ==== the state ==== */

/* A region of this rank's state, as the mode registered it; with its map when the mode
 * gave one (dti_ckpt_map): the parameters of the whole model its elements hold. */
typedef struct {
    char name[24];         /* one word */
    void *p;               /* host or device */
    size_t nbytes;
    int width;             /* floats per parameter (0: no map, the rank's own state) */
    dti_span *span;        /* [nspan] */
    int nspan;
} region;

/* One shard as the manifest lists it. */
typedef struct {
    int rank;
    char file[32];
    unsigned long long bytes;
    unsigned long crc;
    char *regions;         /* "name:bytes name:bytes ..." (points into the manifest) */
} shard_info;

/* One "map RANK NAME WIDTH SPANS" line of the manifest, checked as it is read: its
 * region is in rank's shard, its spans name parameters of the model in ascending order,
 * apart, and fit the region (ck_manifest_parse). */
typedef struct {
    int rank;
    char name[24];
    int width;             /* floats a parameter, 1 to CK_MAX_WIDTH */
    int line;              /* its line in the manifest */
    const char *spans;     /* "start,len[,count,stride] ..." (points into the manifest) */
    int shard;             /* its shard: k->shards[shard] */
    unsigned long long off, nbytes;    /* its region's place in that shard's file */
    dti_span *span;        /* [nspan], owned; the empty ones (len 0) left out */
    int nspan;
} map_info;

struct dti_ckpt {
    const char *dir;       /* checkpoint_dir, or NULL: this run does not save */
    int every;
    region *reg;           /* this rank's regions */
    int nreg, cap;
    int owner;             /* the rank whose shard holds this rank's state */
    int *owners;           /* [size] every rank's owner (after dti_ckpt_start) */
    char **desc;           /* rank 0: [size] each writer's "name:bytes ..." line, then
                            * its "map NAME WIDTH SPANS" lines */
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
    int *shard_of;         /* [old_size] the index in shards of each old rank's, -1: none */
    map_info *maps;
    int nmaps;
    int old_size;          /* the rank count that wrote it */
    int *reads;            /* [old_size] the shard each rank read */
    int reshard;           /* 1: written on another rank count or layout: re-cut */
    char old_layout[96], new_layout[96];   /* "3 ranks", "4 ranks (--dp 2 --pp 2)" */
    unsigned long long *read_bytes;        /* rank 0, resharded: [size] bytes each read */
    unsigned long long *state_bytes;       /* rank 0, resharded: [size] each one's state */
    int *read_files;                       /* rank 0, resharded: [size] shards each read */

    /* the books, rank 0 */
    int written;
    unsigned long long bytes_last;
    double seconds;
};

/* ==== checkpoint.c ==== */

/* Every rank passes its verdict (why empty: fine). When any rank found a problem,
 * every rank ends with the lowest such rank's sentence, exit status 2. Collective. */
void ck_agree(dti_run *r, const char *why);

/* ==== checkpoint_format.c ==== */

/* A growing string. */
typedef struct {
    char *s;
    size_t len, cap;
} sbuf;

__attribute__((format(printf, 2, 3)))
void ck_sb_printf(sbuf *b, const char *fmt, ...);
/* A sentence into why (len bytes), cut short if it must be. */
__attribute__((format(printf, 3, 4)))
void ck_say(char *why, size_t len, const char *fmt, ...);
unsigned long ck_crc_add(unsigned long crc, const void *p, size_t n);
unsigned long ck_crc_of(const void *p, size_t n);

/* Files: a whole file of at most max bytes (NULL with errno set), writing all of n
 * bytes (0 or -1), syncing a directory, a small file written and synced, a checkpoint
 * directory removed, the step of a "step-NNNNNNN[.tmp]" name (-1: not one). */
char *ck_read_file(const char *path, size_t max, size_t *len);
int ck_write_all(int fd, const void *p, size_t n);
void ck_sync_dir(const char *path);
void ck_write_small(const char *path, const char *text, size_t n);
void ck_remove_step_dir(const char *path);
int ck_step_of_name(const char *name, int *tmp);
/* Rank 0: the first entry of dir that is not a checkpoint's, into name; 0: none. */
int ck_foreign_entry(const char *dir, char *name, size_t len);

/* This run's "config KEY VALUE" lines. */
void ck_config_text(const dti_run *r, sbuf *b);
/* Rank 0: reads RESUME/latest and its manifest, checks them against this run (k->config),
 * sets k->reshard when only the rank count or layout differs. "" or a sentence in why. */
void ck_manifest_read(dti_run *r, dti_ckpt *k, char *why, size_t len);
/* Every rank: parses the manifest text (k->manifest) into k. "" or a sentence in why. */
void ck_manifest_parse(dti_run *r, dti_ckpt *k, char *why, size_t len);

/* "name:bytes name:bytes ..." of n regions; their "map NAME WIDTH SPANS" lines. */
void ck_describe(const region *g, int n, sbuf *b);
void ck_describe_maps(const region *g, int n, sbuf *b);
/* Where region name lies in a shard whose regions are desc: its offset (-1: none) and,
 * in *nbytes, its size. */
long long ck_region_find(const char *desc, const char *name, size_t *nbytes);
/* The same, for a region that must be nbytes long (-1: absent or another size). */
long long ck_region_offset(const char *desc, const char *name, size_t nbytes);

/* ==== checkpoint_reshard.c ==== */

/* Every rank, resuming a checkpoint written on another rank count or layout (k->reshard):
 * fills the run's regions (run[0..nrun), rank 0's) and this rank's from the pieces of
 * the old shards that hold them; rank 0 keeps the books of what each rank read. Any
 * problem ends every rank (ck_agree). Collective. */
void ck_reshard(dti_run *r, dti_ckpt *k, const region *run, int nrun, char *why,
                size_t len);

#endif /* DT_CHECKPOINT_INTERNAL_H */
