/* Helpers for dtlab's programs (lessons, benchmark, tests): the options every program
 * shares, usage errors, printing from one rank or in rank order, sizes like "64K",
 * per-rank test data, and checking a result against a reference. */
#ifndef DT_PROG_H
#define DT_PROG_H

#include <getopt.h>
#include <stdio.h>
#include <mpi.h>
#include "units.h"    /* dt_format_bytes */

/* Options dt_init reads itself (core.h). Put DT_COMMON_LONGOPTS in every program's
 * getopt_long table and let the codes fall through: `case DT_OPT_DEVICE: case
 * DT_OPT_TRACE: break;`. DT_COMMON_USAGE is their line for a usage text. */
enum { DT_OPT_DEVICE = 0x1000, DT_OPT_TRACE };
#define DT_COMMON_LONGOPTS \
    {"device", required_argument, NULL, DT_OPT_DEVICE}, \
    {"trace",  required_argument, NULL, DT_OPT_TRACE}
#define DT_COMMON_USAGE \
    "  --device cpu|cuda   where the buffers live (default: a GPU if there is one)\n" \
    "  --trace FILE        record every transfer and reduction into FILE\n"

/* Bad command line: rank 0 prints two lines to stderr, "program: why" and "Try
 * 'program --help' for usage." (the usage text itself only when why is NULL or ""),
 * then every rank finalises MPI and exits with status 2. Every rank must call it (they
 * all parse the same argv). usage may be NULL when why is given. Never returns. */
__attribute__((noreturn))
void dt_usage_error(const char *usage, const char *why);
/* (for lib/) Those two lines, from the caller's rank; dt_init's own refusals use it. */
void dti_usage_say(const char *why);
/* (for lib/) The program's name as those lines give it (its file name). */
const char *dti_prog_name(void);
/* (for lib/) An environment variable's bad value, from the caller's rank: "dtlab: why",
 * then where every variable dtlab reads is listed (--help does not list them). */
void dti_env_say(const char *why);

/* An output path given on the command line as --opt (is_dir: a folder): when rank 0
 * cannot write it (dt_output_check: '', a missing folder, a folder where a file goes,
 * ...; then a trial write, which catches what permissions do not tell root: /proc,
 * /sys, a read-only mount), a usage error on every rank, "PROG: --opt: cannot write
 * PATH: why", before any work. Leaves nothing behind (the trial file, or folder, is
 * removed at once; an existing file is opened, not truncated). path NULL: not given,
 * nothing to check. Collective over MPI_COMM_WORLD. */
void dt_check_output(const char *opt, const char *path, int is_dir);
/* The same sentence in why (len bytes) for a caller that decides itself: returns
 * dt_output_check's 0, -1 or -2. */
int dti_output_why(const char *opt, const char *path, int is_dir, char *why, size_t len);

/* An output file rank 0 writes at the end of a run (a --csv table): dt_output_open
 * opens path for writing on rank 0 and returns the stream (NULL on other ranks, for a
 * NULL path, or when the open failed: dt_output_close says why). dt_output_close
 * flushes and closes f and returns 1 when every byte reached the file, the same on
 * every rank, after rank 0's "wrote WHAT to PATH"; else 0, after one line on stderr
 * from rank 0, "PROG: cannot write WHAT to PATH: reason" (a full disk shows only
 * here), and no "wrote" line: the program then ends with status 1 on every rank. One
 * file at a time; dt_output_close is collective over MPI_COMM_WORLD (path NULL:
 * nothing written, no line, 1). */
FILE *dt_output_open(const char *path);
int dt_output_close(FILE *f, const char *path, const char *what);

/* A child job, started by a program that may itself run under mpiexec (lesson 25 runs
 * mpiexec and scripts): runs argv (argv[0] looked up on PATH, NULL-terminated) with
 * stdin /dev/null and stdout, stderr into the files out and err (made or truncated;
 * NULL: /dev/null), and waits for it. Its environment is this process's less what
 * mpiexec gave it (PMI_*, HYDRA_*, ...: a nested mpiexec would take them for its own),
 * dtlab's test hooks (DT_TEST_*) and DT_TRACE, plus the NAME=VALUE strings in add
 * (NULL-terminated, or NULL), which replace a variable of the same name. Returns the
 * exit status, 128 + the signal that ended it, or -1 with errno when it could not be
 * started. Not collective: one rank calls it. */
int dt_run_child(const char *const argv[], const char *const add[], const char *out,
                 const char *err);

/* --help: rank 0 prints the usage text to stdout; every rank exits with status 0. */
__attribute__((noreturn))
void dt_usage_help(const char *usage);

/* The options most programs share, parsed with getopt_long in one place. `which` lists
 * the ones this program takes, by letter:
 *   c --count N      elements, 0 .. count_max     r --root R     a rank, 0 .. N-1
 *   i --iters N      1 .. 10^6                    t --type T     float|double|int|half
 *   m --min-size B   bytes, e.g. 4, 64K, 1 .. 1G  o --op OP      sum|max|min|prod
 *   s --max-size B   bytes, 1 .. 1G
 * plus --help, --device and --trace always. Counts and sizes take K, M, G suffixes.
 * count_max caps --count (0 means 2^28; a program whose count is per block sets
 * 2^28 / N), for 4-byte elements: a wider --type gets count_max * 4 bytes' worth.
 * Fields of options not given keep the values the caller put there. Anything wrong (an
 * unknown option, a missing or bad value, a stray argument, min-size above max-size)
 * ends every rank through dt_usage_error. Good
 * options end with the device line (dt_print_devices). */
typedef struct {
    int count, root, iters;
    int count_max;
    size_t min_size, max_size;
    MPI_Datatype type;
    MPI_Op op;
} dt_opts;
void dt_parse_options(int argc, char **argv, const char *which, const char *usage,
                      dt_opts *o);

/* For programs whose options are all whole numbers (the training lessons): each
 * `--name N` stores N in *value after checking it is in [min, max]; --help, --device
 * and --trace as above. Anything wrong ends every rank through dt_usage_error, with a
 * sentence naming the option and its range. At most 16 options. Then the device line,
 * as dt_parse_options. */
typedef struct {
    const char *name;
    int min, max;
    int *value;
} dt_int_option;
void dt_parse_int_options(int argc, char **argv, const dt_int_option *o, int n,
                          const char *usage);

/* For a program with its own getopt_long loop (opterr = 0, optstring starting with
 * ':'): writes into why "option '--x' needs a value" when getopt_long returned ':', or
 * "unknown or ambiguous option '--x'" when it returned '?', naming the word it saw. */
void dt_bad_option(int c, char **argv, char *why, size_t len);

/* Runs fn(ctx) once to warm up, then iters times, every run started together
 * (dt_barrier). A run lasts as long as its slowest rank; returns the median of those
 * times in seconds, the same on every rank. Collective over comm. */
double dt_time_median(void (*fn)(void *ctx), void *ctx, int iters, MPI_Comm comm);

/* Parses a size with an optional K, M or G suffix (powers of 1024): "64K" -> 65536.
 * Returns 0, or -1 for anything else (negative, empty, trailing junk, overflow). */
int dt_parse_size(const char *s, size_t *out);
/* Parses a whole decimal int in [min, max]. Returns 0 or -1. */
int dt_parse_int(const char *s, int min, int max, int *out);

/* printf from rank 0 of MPI_COMM_WORLD only; flushes. */
__attribute__((format(printf, 1, 2)))
void dt_printf0(const char *fmt, ...);

/* Every rank prints its line(s), and rank 0 writes them out in rank order. Collective
 * over MPI_COMM_WORLD. */
__attribute__((format(printf, 1, 2)))
void dt_printf_ordered(const char *fmt, ...);

/* Which device each rank used, from rank 0, one line per device in order of the first
 * rank on it: "device: cuda:0 (NVIDIA H100 80GB HBM3) on ranks 0-3", "device: cpu on
 * rank 0" (runs of ranks as a-b; a list past 80 columns ends ", ... (N ranks)").
 * Collective over MPI_COMM_WORLD. dt_parse_options and dt_parse_int_options call it once
 * the options are good, so every lesson says it; train calls it itself. */
void dt_print_devices(void);

/* Fills count elements (host or device buffer) with values that differ per rank and per
 * seed: multiples of 1/4 in [-4, 4] (exact in every type, so sums of a few dozen are
 * exact whatever the order), and for MPI_PROD values from {-2,-1,-1/2,1/2,1,2} so that
 * products stay exact too. MPI_INT gets integers in [-8, 8] (or the same set for prod,
 * rounded away from zero). */
void dt_fill_test_data(void *buf, int count, MPI_Datatype type, MPI_Op op,
                       unsigned seed, int rank);

/* Compares count elements of got against want (host or device). Agreed across comm:
 * returns 1 on every rank when every rank matched, else 0 on every rank. Mismatches are
 * reported on stderr by the rank that saw them (the first few, with index and values).
 * tol is a relative tolerance (0 for exact); what names the check in messages. */
int dt_check_close(const void *got, const void *want, int count, MPI_Datatype type,
                   double tol, const char *what, MPI_Comm comm);

/* Reads element i of a host buffer as a double (for printing and comparing). */
double dt_elem(const void *buf, size_t i, MPI_Datatype type);
/* Writes v into element i of a host buffer, converted to type. */
void dt_elem_set(void *buf, size_t i, MPI_Datatype type, double v);

/* ==== timings and their noise (timing.c) ====
 * A lesson that times two algorithms should say how far its figures can be trusted:
 * the spread between repeated runs, and the machine's state (ranks outnumbering cores,
 * other work). */

/* A set of timings: the median and the quartiles (lo 25%, hi 75%) of n runs. */
typedef struct {
    double median, lo, hi;
    int runs;
} dt_timing;
/* dt_time_median's runs, kept: the same warm-up and common start, each run as long as its
 * slowest rank; the same on every rank. Collective over comm. */
dt_timing dt_time_runs(void (*fn)(void *ctx), void *ctx, int iters, MPI_Comm comm);
/* The timing of n samples taken some other way (a training run's step times). */
dt_timing dt_timing_of(const double *t, int n);
/* Half the interquartile range over the median: 0.1 means runs spread +-10%; 0 for fewer
 * than two runs. */
double dt_timing_spread(dt_timing t);

/* Whether a is slower than b beyond the noise: 1 when the ranges the lessons print,
 * median +- half the interquartile range, do not overlap and a's lies above; -1 when
 * b's lies above; 0 when they overlap (no winner can be named). */
int dt_timing_compare(dt_timing a, dt_timing b);

/* Above this spread a comparison of two timings is called noisy. */
#define DT_NOISY 0.15

/* What makes timings on this machine unreliable, on the most crowded host of the job.
 * Collective over MPI_COMM_WORLD; the same on every rank. */
typedef struct {
    int ranks, cores;      /* this job's ranks on the host, and the cores they may use */
    double load;           /* the host's 1-minute load average, -1 when unknown */
    int crowded;           /* ranks > cores */
    int loaded;            /* the load average exceeds this job's own share by half the cores */
} dt_machine;
dt_machine dt_machine_now(void);

/* When ranks outnumber cores, the machine is loaded, or spread (the largest
 * dt_timing_spread of the figures shown) exceeds DT_NOISY, rank 0 prints a "note on these
 * timings" saying which, followed by effect: what that does to this lesson's comparison.
 * Returns 1 when it printed (on every rank), else 0 and prints nothing. Collective over
 * MPI_COMM_WORLD. */
int dt_timing_note(double spread, const char *effect);

#endif /* DT_PROG_H */
