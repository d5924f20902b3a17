/* Start-up and shut-down: dt_init brings up, in order, the watcher, MPI, this rank's
 * facts (core.c), the environment's settings, DT_HALF and its ops, the device, the
 * time limits, the mailboxes and the trace; dt_finalize takes them down. Above every
 * module it starts: none of them calls back into it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "core.h"
#include "cuda.h"
#include "hostmem.h"
#include "internal.h"
#include "mailbox.h"
#include "nn/nn.h"
#include "prog.h"
#include "trace.h"

/* ==== options dt_init reads ==== */

/* The ranks of this host: MPI_COMM_WORLD itself when the launcher says every rank is
 * here (hydra's MPI_LOCALNRANKS), else split from it. */
static MPI_Comm local_comm = MPI_COMM_NULL;

static void free_local(void)
{
    if (local_comm != MPI_COMM_NULL && local_comm != MPI_COMM_WORLD)
        MPI_Comm_free(&local_comm);
    local_comm = MPI_COMM_NULL;
}

/* Ends this rank cleanly, before anything is allocated; every rank calls it, having
 * reached the same verdict, so none is left waiting. */
static void stop_all(int status)
{
    free_local();
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
    if (dti_me.rank == 0 && option)
        dti_usage_say(why);
    else if (dti_me.rank == 0)
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
 * after it. dti_output_why's trial write leaves nothing behind (an existing file is
 * opened, not truncated; a new one removed at once), nor does the trial FILE.tmp, so a
 * refused run leaves the file system, an older trace at that path included, as it
 * was. Collective. */
static void check_trace(const char *path, int option)
{
    const char *what = option ? "--trace" : "DT_TRACE";
    char why[640] = "";
    int bad = 0, e;
    if (dti_me.rank == 0 && path) {
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
    int mine = count > 0 ? dti_me.size : dti_me.rank, lowest = dti_me.size;
    DT_CHECK_MPI(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
    if (lowest == dti_me.size)
        return;
    if (dti_me.rank == lowest)
        fprintf(stderr, "dtlab: rank %d: --device cuda (or DT_DEVICE=cuda) asks for a GPU, "
                        "but this rank has none: %s\n", dti_me.rank, dti_cuda_why_none());
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

/* A variable of dtlab's environment: NULL when unset, or set to "" (an empty variable
 * is an unset one, for every variable alike). */
static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
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
    DT_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &dti_me.rank));
    DT_CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &dti_me.size));
    /* (MPI_Comm_split_type is a blocking collective, which spins: skipped when the
     * launcher says every rank of the job runs on this host) */
    const char *here = getenv("MPI_LOCALNRANKS"), *all = getenv("PMI_SIZE");
    if (here && all && atoi(here) == dti_me.size && atoi(all) == dti_me.size)
        local_comm = MPI_COMM_WORLD;
    else
        DT_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, dti_me.rank,
                                         MPI_INFO_NULL, &local_comm));
    DT_CHECK_MPI(MPI_Comm_rank(local_comm, &dti_me.local_rank));
    DT_CHECK_MPI(MPI_Comm_size(local_comm, &dti_me.local_size));
    dti_watch_signals(dti_me.rank, dti_me.size);
    if (provided < MPI_THREAD_MULTIPLE && dti_me.rank == 0)
        fprintf(stderr, "dtlab: this MPI gives thread level %d, not MPI_THREAD_MULTIPLE; "
                        "a communication thread would be unsafe\n", provided);
    const char *device = env("DT_DEVICE"), *trace = env("DT_TRACE");
    const char *wait = env("DT_WAIT"), *algo = env("DT_ALLREDUCE_ALGO");
    const char *watch = env("DT_WATCH"), *limit = env("DT_TIMEOUT");
    const char *p2p = env("DT_P2P"), *stage = env("DT_STAGE_KIB"), *sync = env("DT_SYNC");
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
    if (sync && strcmp(sync, "0") && strcmp(sync, "1"))
        bad_env("DT_SYNC", sync, "1 (the host waits for the GPU after every kernel, to "
                "find one that faults) or 0 (the default)");
    if (dt_blas_env_error())
        bad_input(dt_blas_env_error(), 0);
    dt_blas_setup(dti_me.local_size);       /* OpenBLAS's threads: this rank's share */
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
    int launched = dti_me.launched = getenv("PMI_RANK") || getenv("PMIX_RANK");
    double job_s = job && launched ? atof(job) : 0;
    if (limit && *limit && per_wait == 0)
        job_s = 0;                  /* DT_TIMEOUT=0: no limits at all */
    dti_p2p_limits(start, job_s > 0 ? job_s : 0, per_wait);
    /* The local rank that picks the GPU: MPI's under an MPI launcher; else torchrun's
     * LOCAL_RANK where set (torchrun starts each process as an MPI job of its own, one
     * rank, which still needs a GPU of its own); else MPI's, 0 */
    const char *lr = getenv("LOCAL_RANK"), *ws = getenv("WORLD_SIZE");
    dti_me.pick = dti_me.local_rank;
    dti_me.pick_from = launched ? "MPI: the ranks on this host" : "MPI: no launcher, one rank";
    if (!launched && lr && *lr) {
        char *end;
        long v = strtol(lr, &end, 10);
        if (*end || v < 0 || v > 1000000)
            bad_env("LOCAL_RANK (torchrun's)", lr, "this process's rank on its host, a "
                    "whole number from 0");
        dti_me.pick = (int)v;
        dti_me.pick_from = "LOCAL_RANK, torchrun's";
    }
    if (!launched && ws && atoi(ws) > 1 && dti_me.rank == 0)   /* with LOCAL_RANK or not */
        fprintf(stderr, "dtlab: WORLD_SIZE=%s but no MPI launcher started this process: "
                "it is an MPI job of one rank (dtlab's ranks come from mpiexec)\n", ws);
    dti_me.polite = !(wait && strcmp(wait, "block") == 0);
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

    /* one device per rank: GPU (dti_me.pick mod GPU count); the CPU when asked for, or
     * by default where there is no GPU (said once, on stderr) */
    int want_cpu = device && strcmp(device, "cpu") == 0;
    int count = want_cpu ? 0 : dti_cuda_device_count();
    if (device && !want_cpu && !help)
        require_gpu(count);
    dti_buf_init();
    dti_ops_init();
    /* the memory this host's ranks share: the board of who is waiting, the mailboxes */
    dti_host_open(local_comm, dti_watch_board_bytes(dti_me.local_size), dti_mb_part_bytes());
    dti_watch_board_open(dti_me.local_rank, dti_me.local_size);
    if (count > 0) {
        dti_me.device = DT_CUDA;
        dti_me.gpu_count = count;
        dti_me.gpu = dti_me.pick % count;
        dti_cuda_set_device(dti_me.gpu);
        char gname[96];
        dti_cuda_device_name(dti_me.gpu, gname, sizeof gname);
        snprintf(dti_me.name, sizeof dti_me.name, "cuda:%d (%s)", dti_me.gpu, gname);
    } else {
        dti_me.device = DT_CPU;
        snprintf(dti_me.name, sizeof dti_me.name, "cpu");
        /* on stderr, so it never lands inside a program's output; a build without CUDA
         * has no GPU to miss */
        if (DTI_CUDA_BUILT && !want_cpu && !help && dti_me.rank == 0)
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
    int unwritten = dti_trace_close();  /* a trace asked for and not written: exit 1 */
    dti_p2p_fini();
    dti_scratch_fini();
    dti_ops_fini();
    dti_buf_fini();
    dti_watch_board_close();
    dti_host_close();
    free_local();
    DT_CHECK_MPI(MPI_Finalize());
    dti_watch_done();             /* a clean end: the watcher leaves without a word */
    if (unwritten) {
        fflush(stdout);
        exit(1);
    }
    return 0;
}
