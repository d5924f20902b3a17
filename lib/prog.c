/* Helpers for dtlab's programs (see prog.h). */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "prog.h"
#include "buf.h"
#include "half.h"
#include "p2p.h"
#include "trace.h"

/* ==== usage ==== */

/* Every rank reaches this together, so dt_finalize's collective steps are safe. A run
 * that never started leaves no trace file. */
static void finish(void)
{
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) {
        dti_trace_discard();
        dt_finalize();
    }
}

void dt_usage_error(const char *usage, const char *why)
{
    if (dt_rank() <= 0) {
        if (why && why[0]) {
            dti_usage_say(why);
        } else if (usage) {
            fputs(usage, stderr);
            fflush(stderr);
        }
    }
    finish();
    exit(2);
}

void dt_check_output(const char *opt, const char *path, int is_dir)
{
    char why[640] = "";
    int bad = path && dt_rank() == 0 && dti_output_why(opt, path, is_dir, why, sizeof why);
    DT_CHECK_MPI(MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (bad)
        dt_usage_error(NULL, why);
}

void dt_usage_help(const char *usage)
{
    if (dt_rank() <= 0) {
        fputs(usage, stdout);
        fflush(stdout);
    }
    finish();
    exit(0);
}

/* ==== an output file, written at the end ==== */

static int open_err;                    /* errno of dt_output_open's failed fopen */

FILE *dt_output_open(const char *path)
{
    FILE *f = path && dt_rank() == 0 ? fopen(path, "w") : NULL;
    open_err = path && dt_rank() == 0 && f == NULL ? errno : 0;
    return f;
}

int dt_output_close(FILE *f, const char *path, const char *what)
{
    int err = open_err;
    if (f && (fflush(f) != 0 || ferror(f)))    /* a full disk shows here or at fclose */
        err = errno ? errno : EIO;
    if (f && fclose(f) != 0 && !err)
        err = errno;
    if (err)
        fprintf(stderr, "%s: cannot write %s to %s: %s\n", dti_prog_name(), what, path,
                strerror(err));
    else if (path && dt_rank() == 0)
        printf("wrote %s to %s\n", what, path);
    fflush(stdout);
    int ok = err == 0;
    open_err = 0;
    DT_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    return ok;
}

/* ==== a child job ==== */

int dt_run_child(const char *const argv[], const char *const add[], const char *out,
                 const char *err)
{
    extern char **environ;
    static const char *drop[] = {"PMI_", "PMIX_", "HYDI_", "HYDRA_", "MPI_LOCAL",
                                 "DT_TEST_", "DT_TRACE=", "MPIR_CVAR_CH3_INTERFACE"};
    size_t ne = 0, na = 0, k = 0, nd = sizeof drop / sizeof *drop;
    while (environ[ne] != NULL)
        ne++;
    while (add != NULL && add[na] != NULL)
        na++;
    const char **env = malloc(sizeof(char *) * (ne + na + 1));
    DT_REQUIRE(env != NULL, "out of memory");
    for (char **e = environ; *e != NULL; e++) {
        size_t d = 0, eq = strcspn(*e, "="), i = 0;
        while (d < nd && strncmp(*e, drop[d], strlen(drop[d])) != 0)
            d++;
        while (i < na && strncmp(*e, add[i], eq + 1) != 0)    /* add[] replaces it */
            i++;
        if (d == nd && i == na)
            env[k++] = *e;
    }
    for (size_t i = 0; i < na; i++)
        env[k++] = add[i];
    env[k] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out ? out : "/dev/null",
                                     O_WRONLY | O_CREAT | O_TRUNC, 0666);
    posix_spawn_file_actions_addopen(&fa, 2, err ? err : "/dev/null",
                                     O_WRONLY | O_CREAT | O_TRUNC, 0666);
    fflush(stdout);
    fflush(stderr);
    pid_t pid;
    int st = 0, rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv,
                                  (char *const *)env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    /* posix_spawnp reports a missing program in the child: the shell's 127 */
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ==== parsing ==== */

int dt_parse_size(const char *s, size_t *out)
{
    if (!s || !isdigit((unsigned char)*s))     /* strtoull would skip spaces and take '-' */
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10;
    else if (*end == 'M' || *end == 'm') shift = 20;
    else if (*end == 'G' || *end == 'g') shift = 30;
    if (shift)
        end++;
    if (*end != '\0' || v > (SIZE_MAX >> shift))
        return -1;
    *out = (size_t)(v << shift);
    return 0;
}

int dt_parse_int(const char *s, int min, int max, int *out)
{
    if (!s || !(isdigit((unsigned char)*s) || (*s == '-' && isdigit((unsigned char)s[1]))))
        return -1;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = (int)v;
    return 0;
}

/* ==== the options programs share ==== */

/* An unknown letter inside a cluster such as "-qx" is named by itself: argv[optind - 1]
 * may then be the word before. */
void dt_bad_option(int c, char **argv, char *why, size_t len)
{
    char name[64];
    const char *word = argv[optind - 1];
    if (c == '?' && optopt > 0 && optopt < 0x80 && strncmp(word, "--", 2) != 0)
        snprintf(name, sizeof name, "-%c", optopt);
    else
        snprintf(name, sizeof name, "%s", word);
    snprintf(why, len, c == ':' ? "option '%s' needs a value"
             : "unknown or ambiguous option '%s'", name);
}

void dt_parse_options(int argc, char **argv, const char *which, const char *usage,
                      dt_opts *o)
{
    static const struct option all[] = {
        {"count", required_argument, NULL, 'c'},    {"root", required_argument, NULL, 'r'},
        {"iters", required_argument, NULL, 'i'},    {"type", required_argument, NULL, 't'},
        {"op", required_argument, NULL, 'o'},       {"min-size", required_argument, NULL, 'm'},
        {"max-size", required_argument, NULL, 's'},
    };
    struct option opts[12];
    char shortopts[32] = ":h";         /* ':' first: a missing value comes back as ':' */
    int k = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        if (strchr(which, all[i].val)) {
            opts[k++] = all[i];
            size_t len = strlen(shortopts);
            shortopts[len] = (char)all[i].val;
            shortopts[len + 1] = ':';
            shortopts[len + 2] = '\0';
        }
    opts[k++] = (struct option){"help", no_argument, NULL, 'h'};
    opts[k++] = (struct option){"device", required_argument, NULL, DT_OPT_DEVICE};
    opts[k++] = (struct option){"trace", required_argument, NULL, DT_OPT_TRACE};
    opts[k] = (struct option){NULL, 0, NULL, 0};

    char why[160];
    int count_max = o->count_max > 0 ? o->count_max : 1 << 28;
    opterr = 0;                        /* the messages below come from one rank only */
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1;) {
        switch (c) {
        case 'c': {
            size_t v;
            if (dt_parse_size(optarg, &v) || v > (size_t)count_max) {
                snprintf(why, sizeof why, "--count wants a number of elements from 0 to %d "
                         "(K, M suffixes allowed)", count_max);
                dt_usage_error(usage, why);
            }
            o->count = (int)v;
            break;
        }
        case 'r': if (dt_parse_int(optarg, 0, dt_size() - 1, &o->root)) {
                      snprintf(why, sizeof why, "--root wants a rank from 0 to %d", dt_size() - 1);
                      dt_usage_error(usage, why);
                  }
                  break;
        case 'i': if (dt_parse_int(optarg, 1, 1000000, &o->iters))
                      dt_usage_error(usage, "--iters wants a whole number from 1 to 10^6");
                  break;
        case 't': if ((o->type = dt_type_from_name(optarg)) == MPI_DATATYPE_NULL)
                      dt_usage_error(usage, "--type wants float, double, int or half");
                  break;
        case 'o': if ((o->op = dt_op_from_name(optarg)) == MPI_OP_NULL)
                      dt_usage_error(usage, "--op wants sum, max, min or prod");
                  break;
        case 'm': case 's': {
            size_t *dst = c == 'm' ? &o->min_size : &o->max_size;
            if (dt_parse_size(optarg, dst) || *dst < 1 || *dst > ((size_t)1 << 30))
                dt_usage_error(usage, c == 'm' ? "--min-size wants a size from 1 to 1G, like 64K"
                                               : "--max-size wants a size from 1 to 1G, like 16M");
            break;
        }
        case 'h': dt_usage_help(usage);
        case DT_OPT_DEVICE: case DT_OPT_TRACE: break;   /* dt_init has read them */
        default:                       /* ':' a value missing, '?' an unknown option */
            dt_bad_option(c, argv, why, sizeof why);
            dt_usage_error(usage, why);
        }
    }
    if (optind < argc) {
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
        dt_usage_error(usage, why);
    }
    if (strchr(which, 'm') && strchr(which, 's') && o->min_size > o->max_size)
        dt_usage_error(usage, "--min-size is larger than --max-size");
    /* count_max is in 4-byte elements: wider ones fit fewer (--type may come last) */
    size_t esz = strchr(which, 't') ? dt_type_size(o->type) : 4;
    if (strchr(which, 'c') && esz > 4 && (size_t)o->count * esz > (size_t)count_max * 4) {
        snprintf(why, sizeof why, "--count %d of %s is too large: at most %zu elements "
                 "of %s", o->count, dt_type_name(o->type), (size_t)count_max * 4 / esz,
                 dt_type_name(o->type));
        dt_usage_error(usage, why);
    }
    dt_print_devices();
}

/* ==== printing ==== */

void dt_printf0(const char *fmt, ...)
{
    if (dt_rank() > 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* Each rank formats its text; rank 0 gathers the texts and prints them in rank order,
 * so lines from different ranks never interleave. */
void dt_printf_ordered(const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (len < 0)
        len = 0;
    if (len >= (int)sizeof line)
        len = (int)sizeof line - 1;
    int n = dt_size(), rank = dt_rank();
    int *lens = NULL, *offs = NULL;
    char *all = NULL;
    if (rank == 0) {
        lens = malloc(sizeof(int) * (size_t)n);
        offs = malloc(sizeof(int) * (size_t)n);
        DT_REQUIRE(lens && offs, "out of memory");
    }
    MPI_Request req;                 /* MPI's blocking collectives spin: wait politely */
    DT_CHECK_MPI(MPI_Igather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    int total = 0;
    if (rank == 0) {
        for (int i = 0; i < n; i++) {
            offs[i] = total;
            total += lens[i];
        }
        all = malloc((size_t)total + 1);
        DT_REQUIRE(all != NULL, "out of memory");
    }
    DT_CHECK_MPI(MPI_Igatherv(line, len, MPI_CHAR, all, lens, offs, MPI_CHAR, 0,
                              MPI_COMM_WORLD, &req));
    dt_waitall(1, &req);
    if (rank == 0) {
        fwrite(all, 1, (size_t)total, stdout);
        fflush(stdout);
        free(all);
        free(lens);
        free(offs);
    }
}

/* ==== devices ==== */

enum { DEV_NAME = 128 };

/* Writes the ascending ranks r[0..k) into buf as " 0-3, 5, 7-8": runs as a-b. */
static void format_ranks(char *buf, size_t len, const int *r, int k)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0, j; i < k && at < len; i = j + 1) {
        for (j = i; j + 1 < k && r[j + 1] == r[j] + 1; j++)
            ;
        if (j > i)
            at += (size_t)snprintf(buf + at, len - at, "%s %d-%d", i ? "," : "", r[i], r[j]);
        else
            at += (size_t)snprintf(buf + at, len - at, "%s %d", i ? "," : "", r[i]);
    }
}

void dt_print_devices(void)
{
    int n = dt_size(), rank = dt_rank();
    char mine[DEV_NAME] = {0}, *all = NULL;
    snprintf(mine, sizeof mine, "%s", dt_device_name());
    if (rank == 0) {
        all = calloc((size_t)n, DEV_NAME);
        DT_REQUIRE(all != NULL, "out of memory");
    }
    dti_mpi_gather(mine, DEV_NAME, MPI_CHAR, all, 0, MPI_COMM_WORLD);   /* politely */
    if (rank != 0)
        return;
    /* one line per name, in order of its first rank; a rank already listed is "" */
    int *ranks = malloc(sizeof(int) * (size_t)n);
    DT_REQUIRE(ranks != NULL, "out of memory");
    for (int first = 0; first < n; first++) {
        const char *name = all + (size_t)first * DEV_NAME;
        if (!name[0])
            continue;
        int count = 0;
        for (int r = first; r < n; r++) {
            char *other = all + (size_t)r * DEV_NAME;
            if (r != first && strcmp(other, name) != 0)
                continue;
            ranks[count++] = r;
            if (r != first)
                other[0] = '\0';
        }
        char list[4096];
        format_ranks(list, sizeof list, ranks, count);
        char line[4200];
        int len = snprintf(line, sizeof line, "device: %s on rank%s%s", name,
                           count > 1 ? "s" : "", list);
        size_t head = strlen("device: ") + strlen(name);
        if (len > 80) {                 /* cut the list at a comma, and say how many */
            char tail[32];
            snprintf(tail, sizeof tail, ", ... (%d ranks)", count);
            size_t keep = 80 - strlen(tail);
            while (keep > head && line[keep] != ',')
                keep--;
            if (keep > head)
                snprintf(line + keep, sizeof line - keep, "%s", tail);
        }
        printf("%s\n", line);
    }
    fflush(stdout);
    free(ranks);
    free(all);
}

/* ==== elements ==== */

double dt_elem(const void *buf, size_t i, MPI_Datatype type)
{
    switch (dt_dtype_of(type)) {
    case DT_F32: return ((const float *)buf)[i];
    case DT_F64: return ((const double *)buf)[i];
    case DT_I32: return ((const int *)buf)[i];
    case DT_F16: return dt_half_to_float(((const dt_half *)buf)[i]);
    case DT_B16: return dt_bf16_to_float(((const dt_bf16 *)buf)[i]);
    }
    return 0;
}

void dt_elem_set(void *buf, size_t i, MPI_Datatype type, double v)
{
    switch (dt_dtype_of(type)) {
    case DT_F32: ((float *)buf)[i] = (float)v; break;
    case DT_F64: ((double *)buf)[i] = v; break;
    case DT_I32: ((int *)buf)[i] = (int)lrint(v); break;
    case DT_F16: ((dt_half *)buf)[i] = dt_float_to_half((float)v); break;
    case DT_B16: ((dt_bf16 *)buf)[i] = dt_float_to_bf16((float)v); break;
    }
}

/* ==== test data and checks ==== */

/* A small, fast generator (splitmix64) so data is the same on every machine. */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void dt_fill_test_data(void *buf, int count, MPI_Datatype type, MPI_Op op,
                       unsigned seed, int rank)
{
    static const double prod_set[6] = {-2, -1, -0.5, 0.5, 1, 2};
    static const double prod_set_int[6] = {-2, -1, -1, 1, 1, 2};
    int is_int = dt_dtype_of(type) == DT_I32, prod = op == MPI_PROD;
    size_t esz = dt_type_size(type);
    char *host = malloc((size_t)count * esz + 1);
    DT_REQUIRE(host != NULL, "out of memory");
    uint64_t s = ((uint64_t)seed << 32) ^ (uint64_t)(unsigned)rank * 0x2545f4914f6cdd1dull;
    for (int i = 0; i < count; i++) {
        uint64_t r = splitmix(&s);
        double v;
        if (prod)
            v = (is_int ? prod_set_int : prod_set)[r % 6];
        else if (is_int)
            v = (double)(int)(r % 17) - 8;            /* -8 .. 8 */
        else
            v = ((double)(int)(r % 33) - 16) / 4;     /* -4 .. 4 in steps of 1/4 */
        dt_elem_set(host, (size_t)i, type, v);
    }
    dt_memcpy(buf, host, (size_t)count * esz);
    free(host);
}

int dt_check_close(const void *got, const void *want, int count, MPI_Datatype type,
                   double tol, const char *what, MPI_Comm comm)
{
    size_t nbytes = (size_t)(count > 0 ? count : 0) * dt_type_size(type);
    char *g = malloc(nbytes + 1), *w = malloc(nbytes + 1);
    DT_REQUIRE(g && w, "out of memory");
    dt_memcpy(g, got, nbytes);
    dt_memcpy(w, want, nbytes);
    int bad = 0, rank;
    MPI_Comm_rank(comm, &rank);
    for (int i = 0; i < count; i++) {
        double a = dt_elem(g, (size_t)i, type), b = dt_elem(w, (size_t)i, type);
        int same = (a == b) || (isnan(a) && isnan(b)) ||
                   fabs(a - b) <= tol * fmax(fabs(a), fabs(b));
        if (!same && bad++ < 5)
            fprintf(stderr, "%s: rank %d: element %d is %.9g, expected %.9g\n",
                    what, rank, i, a, b);
    }
    if (bad > 5)
        fprintf(stderr, "%s: rank %d: %d elements differ in all\n", what, rank, bad);
    free(g);
    free(w);
    int ok = bad == 0;
    MPI_Request req;
    DT_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, comm, &req));
    dt_waitall(1, &req);
    return ok;
}

/* ==== whole-number options ==== */

void dt_parse_int_options(int argc, char **argv, const dt_int_option *o, int n,
                          const char *usage)
{
    enum { MAXOPT = 16 };
    DT_REQUIRE(n >= 0 && n <= MAXOPT, "dt_parse_int_options: %d options (at most %d)", n,
               MAXOPT);
    struct option lo[MAXOPT + 4] = {{"help", no_argument, NULL, 'h'}, DT_COMMON_LONGOPTS};
    for (int i = 0; i < n; i++)
        lo[3 + i] = (struct option){ o[i].name, required_argument, NULL, i };
    char why[160];
    opterr = 0;                                 /* dt_usage_error speaks, on rank 0 */
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, ":h", lo, NULL)) != -1;) {
        if (c >= 0 && c < n && dt_parse_int(optarg, o[c].min, o[c].max, o[c].value) == 0)
            continue;
        if (c >= 0 && c < n)
            snprintf(why, sizeof why, "--%s wants a whole number from %d to %d, not '%s'",
                     o[c].name, o[c].min, o[c].max, optarg);
        else if (c == 'h')
            dt_usage_help(usage);
        else if (c == DT_OPT_DEVICE || c == DT_OPT_TRACE)
            continue;                           /* dt_init has read them */
        else
            dt_bad_option(c, argv, why, sizeof why);
        dt_usage_error(usage, why);
    }
    if (optind < argc) {
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
        dt_usage_error(usage, why);
    }
    dt_print_devices();
}
