/* Start-up, shut-down, the device of each rank, and the one abort path. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include "core.h"
#include "cuda.h"
#include "internal.h"
#include "mailbox.h"
#include "nn/nn.h"
#include "prog.h"
#include "trace.h"

static struct {
    int rank, size, local_rank, local_size;
    dt_device_kind device;
    int gpu;                /* the GPU this rank uses, -1 on the CPU */
    int pick;               /* the local rank that picks it (dt_gpu_local_rank) */
    const char *pick_from;
    int gpu_count;          /* GPUs visible, 0 on the CPU */
    int polite;
    int launched;           /* an MPI launcher started this process (dt_launched) */
    char name[128];
} dt = {.rank = -1, .gpu = -1, .polite = 1};

int dt_rank(void) { return dt.rank; }
int dt_size(void) { return dt.size; }
int dt_local_rank(void) { return dt.local_rank; }
int dt_local_size(void) { return dt.local_size; }
int dt_launched(void) { return dt.launched; }
dt_device_kind dt_device(void) { return dt.device; }
int dt_cuda_device(void) { return dt.gpu; }

int dt_gpu_local_rank(const char **from)
{
    if (from)
        *from = dt.pick_from;
    return dt.pick;
}
const char *dt_device_name(void) { return dt.name; }
int dti_gpu_count(void) { return dt.gpu_count; }
void dt_set_polite(int polite) { dt.polite = polite; }
int dt_polite(void) { return dt.polite; }

/* ==== errors ==== */

void dti_die(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    /* one line per death: the first rank on the host to fail speaks (watch.c) */
    int say = dti_watch_claim();
    while (say < 0)               /* another thread of this rank is ending it already */
        nanosleep(&(struct timespec){1, 0}, NULL);
    if (say && dt.rank >= 0)
        fprintf(stderr, "dtlab: rank %d: %s:%d: %s\n", dt.rank, file, line, msg);
    else if (say)
        fprintf(stderr, "dtlab: %s:%d: %s\n", file, line, msg);
    fflush(stderr);
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) {
        /* mpiexec forwards our stderr through a pipe; an abort right after the write can
         * lose the message in flight. A fifth of a second lets it reach the terminal. */
        nanosleep(&(struct timespec){0, 200000000}, NULL);
        MPI_Abort(MPI_COMM_WORLD, 1);   /* takes every other rank down with this one */
    }
    exit(1);
}

const char *dti_mpi_error_string(int err)
{
    static _Thread_local char buf[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(err, buf, &len) != MPI_SUCCESS)
        snprintf(buf, sizeof buf, "MPI error %d", err);
    return buf;
}

/* ==== options dt_init reads ==== */

static MPI_Comm local_comm = MPI_COMM_NULL;

/* Ends this rank cleanly, before anything is allocated; every rank calls it, having
 * reached the same verdict, so none is left waiting. */
static void stop_all(int status)
{
    MPI_Comm_free(&local_comm);
    MPI_Finalize();
    dti_watch_done();
    exit(status);
}

/* Every rank parses the same argv, so every rank reaches the same verdict: a bad value
 * ends all of them with status 2. A mistake in an option gets the two lines of any
 * usage error (prog.h); one in an environment variable, which --help does not list, two
 * "dtlab:" lines: the mistake, and where the variables are listed (dti_env_say). */
static void bad_input(const char *why, int option)
{
    if (dt.rank == 0 && option)
        dti_usage_say(why);
    else if (dt.rank == 0)
        dti_env_say(why);
    fflush(stderr);
    stop_all(2);
}

/* An environment variable's bad value: "VAR must be WANT, not 'VALUE'", as bad_input
 * says it (no "Try --help": --help does not list the environment). */
static void bad_env(const char *var, const char *value, const char *want)
{
    char why[400];
    snprintf(why, sizeof why, "%s must be %s, not '%.40s'", var, want, value);
    bad_input(why, 0);
}

/* Whether FILE.tmp, which trace.c writes and renames to a regular FILE, can be made
 * beside it: permissions do not tell for root, nor in /proc or on a read-only mount.
 * Made with O_EXCL and removed at once; one that exists already is left alone.
 * Returns 0, or errno. */
static int tmp_creatable(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return 0;                       /* a device or a pipe is written directly */
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return errno == EEXIST ? 0 : errno;
    close(fd);
    unlink(tmp);
    return 0;
}

/* The trace is written at dt_finalize, by rank 0, whose path decides for every rank
 * (trace.c): a path rank 0 cannot write is refused here, before the run, not found
 * after it. dt_output_check creates nothing and the trial FILE.tmp is removed, so a
 * refused run leaves the file system, an older trace at that path included, as it
 * was. Collective. */
static void check_trace(const char *path, int option)
{
    const char *what = option ? "--trace" : "DT_TRACE";
    char why[640] = "";
    int bad = 0, e;
    if (dt.rank == 0 && path) {
        bad = dti_output_why(what, path, 0, why, sizeof why) != 0;
        if (!bad && (e = tmp_creatable(path)) != 0) {
            bad = 1;
            snprintf(why, sizeof why, "%s: cannot write %s: creating %s.tmp beside it, "
                     "which is renamed to it at the end: %s", what, path, path, strerror(e));
        }
    }
    DT_CHECK_MPI(MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (bad)
        bad_input(why, option);
}

/* --device cuda (or DT_DEVICE=cuda) is a promise: every rank gets a GPU, or every rank
 * stops here with status 1, and the lowest rank without one says why in CUDA's words.
 * Never a quiet run on the CPU; only the default falls back to it. */
static void require_gpu(int count)
{
    int mine = count > 0 ? dt.size : dt.rank, lowest = dt.size;
    DT_CHECK_MPI(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (lowest == dt.size)
        return;
    if (dt.rank == lowest)
        fprintf(stderr, "dtlab: rank %d: --device cuda (or DT_DEVICE=cuda) asks for a GPU, "
                        "but this rank has none: %s\n", dt.rank, dti_cuda_why_none());
    fflush(stderr);
    stop_all(1);
}

/* Reads --device and --trace with getopt_long, on a copy of argv so the program's own
 * parse later sees argv untouched; *from_argv gets 1 for --device, 2 for --trace (they
 * override DT_DEVICE and DT_TRACE). Unknown options are the program's business. */
static void read_options(int argc, char **argv, const char **device, const char **trace,
                         int *from_argv, int *help)
{
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},
        {"trace", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    char **copy = malloc(sizeof(char *) * (size_t)(argc + 1));
    DT_REQUIRE(copy != NULL, "out of memory");
    memcpy(copy, argv, sizeof(char *) * (size_t)(argc + 1));
    int c, saved_opterr = opterr;
    opterr = 0;
    optind = 0;
    while ((c = getopt_long(argc, copy, "-:", opts, NULL)) != -1) {
        if (c == 'd') { *device = optarg; *from_argv |= 1; }
        if (c == 't') { *trace = optarg; *from_argv |= 2; }
        if (c == 'h') *help = 1;
    }
    opterr = saved_opterr;
    optind = 0;                 /* glibc: 0 restarts getopt from scratch for the program */
    free(copy);
}

/* ==== init and finalize ==== */

int dt_init(int *argc, char ***argv)
{
    double start = dti_now();
    dti_watch_start();            /* before MPI_Init: the watcher must not inherit MPI */
    int provided = 0;
    DT_CHECK_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
    /* errors come back to dtlab's checks, which explain them and abort every rank */
    DT_CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    DT_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &dt.rank));
    DT_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &dt.size));
    DT_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, dt.rank,
                                     MPI_INFO_NULL, &local_comm));
    DT_CHECK_MPI(MPI_Comm_rank(local_comm, &dt.local_rank));
    DT_CHECK_MPI(MPI_Comm_size(local_comm, &dt.local_size));
    dti_watch_signals();
    if (provided < MPI_THREAD_MULTIPLE && dt.rank == 0)
        fprintf(stderr, "dtlab: this MPI gives thread level %d, not MPI_THREAD_MULTIPLE; "
                        "a communication thread would be unsafe\n", provided);
    const char *device = getenv("DT_DEVICE"), *trace = getenv("DT_TRACE");
    const char *wait = getenv("DT_WAIT"), *algo = getenv("DT_ALLREDUCE_ALGO");
    const char *watch = getenv("DT_WATCH"), *limit = getenv("DT_TIMEOUT");
    const char *p2p = getenv("DT_P2P"), *stage = getenv("DT_STAGE_KIB");
    int help = 0, from_argv = 0;
    if (argc && argv && *argv)
        read_options(*argc, *argv, &device, &trace, &from_argv, &help);
    if (wait && strcmp(wait, "polite") && strcmp(wait, "block"))
        bad_env("DT_WAIT", wait, "'polite' or 'block'");
    if (algo && *algo && strcmp(algo, "ring") && strcmp(algo, "naive") && strcmp(algo, "rd"))
        bad_env("DT_ALLREDUCE_ALGO", algo, "'ring', 'naive' or 'rd'");
    if (p2p && *p2p && !dti_mb_mode_ok(p2p))
        bad_env("DT_P2P", p2p, "'auto' (the default), 'staging', 'shm' or 'ipc'");
    long stage_kib = 1024;
    if (stage && *stage) {
        char *end;
        stage_kib = strtol(stage, &end, 10);
        if (*end || stage_kib < 0 || stage_kib > (1L << 20))
            bad_env("DT_STAGE_KIB", stage, "the KiB of a staged piece, from 1 to 1048576 "
                    "(default 1024), or 0 to stage each message whole");
    }
    if (watch && strcmp(watch, "0") && strcmp(watch, "1"))
        bad_env("DT_WATCH", watch, "1 (a watcher per rank, the default) or 0");
    if (dt_blas_env_error())
        bad_input(dt_blas_env_error(), 0);
    dt_blas_setup(dt.local_size);       /* OpenBLAS's threads: this rank's share */
    double per_wait = 0;
    if (limit && *limit) {
        char *end;
        per_wait = strtod(limit, &end);
        if (*end || !(per_wait >= 0 && per_wait <= 1e7))
            bad_env("DT_TIMEOUT", limit, "the seconds one wait may take (such as 30 or "
                    "2.5), or 0 for no time limits");
    }
    /* MPIEXEC_TIMEOUT is mpiexec's: it applies only under a launcher */
    const char *job = getenv("MPIEXEC_TIMEOUT");
    int launched = dt.launched = getenv("PMI_RANK") || getenv("PMIX_RANK");
    double job_s = job && launched ? atof(job) : 0;
    if (limit && *limit && per_wait == 0)
        job_s = 0;                  /* DT_TIMEOUT=0: no limits at all */
    dti_p2p_limits(start, job_s > 0 ? job_s : 0, per_wait);
    /* The local rank that picks the GPU: MPI's under an MPI launcher; else torchrun's
     * LOCAL_RANK where set (torchrun starts each process as an MPI job of its own, one
     * rank, which still needs a GPU of its own); else MPI's, 0 */
    const char *lr = getenv("LOCAL_RANK"), *ws = getenv("WORLD_SIZE");
    dt.pick = dt.local_rank;
    dt.pick_from = launched ? "MPI: the ranks on this host" : "MPI: no launcher, one rank";
    if (!launched && lr && *lr) {
        char *end;
        long v = strtol(lr, &end, 10);
        if (*end || v < 0 || v > 1000000)
            bad_env("LOCAL_RANK (torchrun's)", lr, "this process's rank on its host, a "
                    "whole number from 0");
        dt.pick = (int)v;
        dt.pick_from = "LOCAL_RANK, torchrun's";
    }
    if (!launched && ws && atoi(ws) > 1 && dt.rank == 0)   /* with LOCAL_RANK or not */
        fprintf(stderr, "dtlab: WORLD_SIZE=%s but no MPI launcher started this process: "
                "it is an MPI job of one rank (dtlab's ranks come from mpiexec)\n", ws);
    dt.polite = !(wait && strcmp(wait, "block") == 0);
    if (device && strcmp(device, "cpu") && strcmp(device, "cuda")) {
        char why[160];
        snprintf(why, sizeof why, "%s must be 'cpu' or 'cuda', not '%.40s'",
                 from_argv & 1 ? "--device" : "DT_DEVICE", device);
        bad_input(why, from_argv & 1);
    }
    if (trace && !*trace && !(from_argv & 2))
        trace = NULL;                   /* DT_TRACE= (empty) is off; --trace '' a mistake */
    if (!help)                          /* (--help only prints: nothing is written) */
        check_trace(trace, from_argv & 2);

    /* one device per rank: GPU (dt.pick mod GPU count); the CPU when asked for, or
     * by default where there is no GPU (said once, on stderr) */
    int want_cpu = device && strcmp(device, "cpu") == 0;
    int count = want_cpu ? 0 : dti_cuda_device_count();
    if (device && !want_cpu && !help)
        require_gpu(count);
    dti_buf_init();
    dti_watch_board_open(local_comm, dt.rank);
    if (count > 0) {
        dt.device = DT_CUDA;
        dt.gpu_count = count;
        dt.gpu = dt.pick % count;
        dti_cuda_set_device(dt.gpu);
        char gname[96];
        dti_cuda_device_name(dt.gpu, gname, sizeof gname);
        snprintf(dt.name, sizeof dt.name, "cuda:%d (%s)", dt.gpu, gname);
    } else {
        dt.device = DT_CPU;
        snprintf(dt.name, sizeof dt.name, "cpu");
        /* on stderr, so it never lands inside a program's output; a build without CUDA
         * has no GPU to miss */
        if (DTI_CUDA_BUILT && !want_cpu && !help && dt.rank == 0)
            fprintf(stderr, "dtlab: no usable GPU (%s); running on the CPU\n",
                    dti_cuda_why_none());
    }

    dti_mb_init(local_comm, p2p);      /* the mailboxes of this host's ranks (p2p.h) */
    dti_p2p_stage_piece((size_t)stage_kib << 10);

    const char *prog = (argc && argv && *argv && (*argv)[0]) ? (*argv)[0] : "dtlab";
    const char *slash = strrchr(prog, '/');
    dt_trace_open(trace && *trace ? trace : NULL, slash ? slash + 1 : prog);
    return 0;
}

int dt_finalize(void)
{
    dti_trace_close();
    dti_p2p_fini();
    dti_scratch_fini();
    dti_buf_fini();
    dti_watch_board_close();
    if (local_comm != MPI_COMM_NULL)
        MPI_Comm_free(&local_comm);
    DT_CHECK_MPI(MPI_Finalize());
    dti_watch_done();             /* a clean end: the watcher leaves without a word */
    return 0;
}
