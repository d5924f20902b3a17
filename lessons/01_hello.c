/* Lesson 01: who am I? Ranks, hosts, devices, and what the launcher tells a process.
 *
 * What it teaches: `mpiexec -n 4 prog` starts 4 copies of one program. Each copy (a
 * rank) learns who it is from environment variables the launcher sets (PMI_RANK,
 * PMI_SIZE, ...), which MPI_Init reads to connect the ranks to each other. From then on
 * a rank asks MPI: its rank, the world size, and its local rank among the ranks on the
 * same host, which is what picks its GPU. Then the same facts as PyTorch's launcher,
 * torchrun, names them (RANK, WORLD_SIZE, LOCAL_RANK, ...), how each launcher's
 * processes find each other, and which of torch.distributed's backends dtlab stands in for.
 *
 * The code: lib/init.c (dt_init: MPI_Init, then MPI_Comm_split_type for the ranks on one
 * host and the GPU pick, local rank mod GPU count), lib/core.c (dt_local_rank,
 * dt_local_size, dt_gpu_local_rank: what dt_init found, LOCAL_RANK's pick).
 *
 * Run:  mpiexec -n 4 build/lessons/01_hello
 *       mpiexec -n 4 build/lessons/01_hello --device cpu
 *       LOCAL_RANK=1 WORLD_SIZE=2 build/lessons/01_hello   (as torchrun starts one)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 01_hello [options]\n"
    "Prints every rank's place in the job and what the launcher told it.\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

/* The launcher variables worth knowing, and what each one says. */
static const struct { const char *name, *what; } vars[] = {
    {"PMI_RANK",             "this process's rank, numbered by mpiexec (Hydra)"},
    {"PMI_SIZE",             "how many processes the job has"},
    {"PMI_FD",               "socket to the launcher: MPI_Init swaps addresses over it"},
    {"PMI_PORT",             "address of the launcher, when not a socket"},
    {"MPI_LOCALRANKID",      "rank among the processes on this host"},
    {"MPI_LOCALNRANKS",      "processes on this host"},
    {"HYDI_CONTROL_FD",      "Hydra's control channel to this process"},
    {"PMIX_RANK",            "the rank, from a PMIx launcher (Open MPI, Slurm)"},
    {"OMPI_COMM_WORLD_RANK", "the rank, from Open MPI's mpirun"},
    {"OMPI_COMM_WORLD_SIZE", "the job size, from Open MPI's mpirun"},
    {"SLURM_PROCID",         "the rank, from Slurm's srun"},
    {"SLURM_LOCALID",        "the local rank, from Slurm's srun"},
    {"RANK",                 "torchrun's: this process's rank"},
    {"WORLD_SIZE",           "torchrun's: how many processes the job has"},
    {"LOCAL_RANK",           "torchrun's rank on this host: the GPU's, without mpiexec"},
    {"LOCAL_WORLD_SIZE",     "torchrun's: processes on this host"},
    {"GROUP_RANK",           "torchrun's: which host (node) of the job"},
    {"MASTER_ADDR",          "torchrun's: the host of the rendezvous store"},
    {"MASTER_PORT",          "torchrun's: the store's port"},
    {"CUDA_VISIBLE_DEVICES", "the GPUs this process may see"},
    {"MPIEXEC_TIMEOUT",      "seconds before mpiexec kills the job"},
    {"DT_DEVICE",            "dtlab: cpu or cuda, like --device"},
    {"DT_TRACE",             "dtlab: trace file, like --trace"},
    {"DT_WAIT",              "dtlab: block turns polite waiting off (lesson 02)"},
};
enum { NVARS = sizeof vars / sizeof vars[0], VLEN = 24, HLEN = 64, NAMEW = 20, WIDTH = 80 };

/* Launcher-ish prefixes: anything else with these is listed after the table. */
static const char *prefixes[] = {"PMI", "MPI", "HYD", "OMPI_", "SLURM_"};

static int is_known(const char *entry)
{
    for (int k = 0; k < NVARS; k++) {
        size_t len = strlen(vars[k].name);
        if (strncmp(entry, vars[k].name, len) == 0 && entry[len] == '=')
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    dt_opts opts = {0};
    dt_parse_options(argc, argv, "", usage, &opts);    /* --help, --device, --trace */
    int rank = dt_rank(), n = dt_size();

    /* ==== the idea ====
     * Every rank runs this same main(). What makes rank 2 rank 2 is its environment:
     * the launcher wrote PMI_RANK=2 there before starting it. dt_init called MPI_Init,
     * which read those variables, met the other ranks, and built MPI_COMM_WORLD. */
    char host[HLEN] = {0};
    gethostname(host, HLEN - 1);
    dt_printf0("%d rank%s started by the launcher; rank 0 prints every rank's line in order.\n\n",
               n, n == 1 ? "" : "s");
    dt_printf0("rank  of  local  of  host             pid      device\n");
    dt_printf_ordered("%4d %3d  %5d %3d  %-15s  %-7d  %s\n", rank, n, dt_local_rank(),
                      dt_local_size(), host, (int)getpid(), dt_device_name());

    /* ==== what the launcher set: a table, one column per rank ==== */
    char mine[NVARS][VLEN] = {{0}};
    for (int k = 0; k < NVARS; k++) {
        const char *v = getenv(vars[k].name);
        if (v)
            snprintf(mine[k], VLEN, "%s", v[0] ? v : "(empty)");
    }
    char (*all)[NVARS][VLEN] = rank == 0 ? calloc(n, sizeof *all) : NULL;
    MPI_Gather(mine, sizeof mine, MPI_BYTE, all, sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        /* a column per rank, as wide as the widest value (at least "rank 0"), 2 spaces
         * apart or 1, as many as fit in 80 columns; the meanings follow the table */
        int width = 6, present[NVARS] = {0}, cols = 0, sep, any = 0;
        for (int k = 0; k < NVARS; k++)
            for (int r = 0; r < n; r++) {
                int len = (int)strlen(all[r][k]);
                present[k] |= len > 0;
                any |= len > 0;
                width = len > width ? len : width;
            }
        sep = NAMEW + n * (width + 2) <= WIDTH ? 2 : 1;
        while (cols < n && NAMEW + (cols + 1) * (width + sep) <= WIDTH)
            cols++;
        printf("\nWhat the launcher put in each rank's environment");
        if (!any)
            printf(": nothing, no launcher started\nthis process");
        else if (cols < n)
            printf(" (the first %d ranks)", cols);
        if (any)
            printf(":\n\n%-*s", NAMEW, "variable");
        for (int r = 0; r < cols && any; r++)
            printf("%*srank %-*d", sep, "", r + 1 < cols ? width - 5 : 0, r);
        for (int k = 0; k < NVARS; k++) {
            if (!present[k])
                continue;
            printf("\n%-*s", NAMEW, vars[k].name);
            for (int r = 0; r < cols; r++)
                printf("%*s%-*s", sep, "", r + 1 < cols ? width : 0,
                       all[r][k][0] ? all[r][k] : "-");
        }
        printf(any ? "\n\nWhat they mean:\n" : ".\n");
        for (int k = 0; k < NVARS; k++)
            if (present[k])
                printf("  %-*s %s\n", NAMEW, vars[k].name, vars[k].what);   /* <= 80 */
        /* The rest is launcher-specific: list it once, from rank 0. */
        extern char **environ;
        int others = 0;
        for (char **e = environ; *e; e++)
            for (size_t p = 0; p < sizeof prefixes / sizeof prefixes[0]; p++)
                if (strncmp(*e, prefixes[p], strlen(prefixes[p])) == 0 && !is_known(*e)) {
                    printf("%s  %.*s%s\n", others++ ? "" : "\nAlso set on rank 0 (launcher "
                           "and MPI internals):\n", WIDTH - 5, *e,
                           strlen(*e) > WIDTH - 5 ? "..." : "");     /* cut to 80 columns */
                    break;
                }
        printf("\nThe local rank (rank among those on one host) is what picks a GPU: rank r\n"
               "on a host with G GPUs uses GPU (local rank mod G). This rank 0 uses: %s.\n",
               dt_device_name());
        free(all);
    }

    /* ==== the same facts under torchrun ====
     * PyTorch's launcher hands each process the same facts under other names. GROUP_RANK
     * (the node) is the host's place among the hosts, in order of their lowest rank. */
    char (*hosts)[HLEN] = malloc((size_t)n * HLEN);
    MPI_Allgather(host, HLEN, MPI_CHAR, hosts, HLEN, MPI_CHAR, MPI_COMM_WORLD);
    int first = 0, node = 0;                  /* my host's lowest rank; hosts before it */
    while (strcmp(hosts[first], host) != 0)
        first++;
    for (int r = 0; r < first; r++) {
        int seen = 0;                         /* r is the lowest rank of its host */
        for (int q = 0; q < r && !seen; q++)
            seen = strcmp(hosts[q], hosts[r]) == 0;
        node += !seen;
    }
    /* Without an MPI launcher the process may hold torchrun's own variables (each
     * process torchrun starts is an MPI job of one rank): shown where set, as dtlab
     * takes LOCAL_RANK for the GPU; where not, what dtlab derives, marked '*'. */
    static const char *const tnames[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK",
                                         "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR"};
    int alone = !dt_launched(), derived[5] = {rank, n, dt_local_rank(), dt_local_size(), node};
    char tv[6][20];
    for (int k = 0; k < 6; k++) {
        const char *v = alone ? getenv(tnames[k]) : NULL;
        if (v && *v)
            snprintf(tv[k], sizeof tv[k], "%.15s", v);
        else if (k < 5)
            snprintf(tv[k], sizeof tv[k], "%d%s", derived[k], alone ? "*" : "");
        else
            snprintf(tv[k], sizeof tv[k], "%.15s%s", hosts[0], alone ? "*" : "");
    }
    dt_printf0(alone ? "\nThe same facts under torchrun's names: the values set in this "
               "process, and where\none is not set, marked *, what dtlab derives from "
               "MPI:\n\n" : "\nThe same facts as torchrun (PyTorch's launcher) would hand "
               "each process:\n\n");
    dt_printf0("rank  RANK  WORLD_SIZE  LOCAL_RANK  LOCAL_WORLD_SIZE  GROUP_RANK  MASTER_ADDR\n");
    dt_printf_ordered("%4d %5s %11s %11s %17s %11s  %s\n", rank, tv[0], tv[1], tv[2], tv[3],
                      tv[4], tv[5]);
    const char *from;
    int pick = dt_gpu_local_rank(&from);
    dt_printf0("\n"
        "fact                  mpiexec (Hydra) sets          torchrun sets\n"
        "the rank              PMI_RANK                      RANK\n"
        "ranks in the job      PMI_SIZE                      WORLD_SIZE\n"
        "rank on this host     MPI_LOCALRANKID               LOCAL_RANK\n"
        "ranks on this host    MPI_LOCALNRANKS               LOCAL_WORLD_SIZE\n"
        "which host            (none: MPI_Comm_split_type)   GROUP_RANK\n"
        "where ranks meet      PMI_FD, a socket to this      MASTER_ADDR:MASTER_PORT,\n"
        "                      host's Hydra proxy            a store on rank 0's host\n\n"
        "Finding the others. mpiexec starts a Hydra proxy on every host, and each rank with\n"
        "a socket to its proxy (PMI_FD). MPI_Init puts this rank's network address into\n"
        "PMI's key-value space through it and reads the others' (the proxies carry the keys\n"
        "between hosts). torchrun has no proxy per rank: every process connects to a\n"
        "key-value store (a TCPStore) at MASTER_ADDR:MASTER_PORT, which rank 0's host\n"
        "serves, and init_process_group swaps the addresses through it (the rendezvous).\n\n"
        "Backends. torch.distributed moves bytes through gloo (CPU tensors, and CUDA ones\n"
        "through host copies), mpi (the MPI PyTorch was built with: CPU, or GPU with a\n"
        "CUDA-aware MPI) or nccl (GPU to GPU over NVLink, PCIe or InfiniBand, with its own\n"
        "kernels). dtlab's p2p layer stands in all three places: MPI point-to-point for\n"
        "host data (as gloo and mpi do), device data staged through pinned host memory (as\n"
        "gloo does with CUDA tensors), and CUDA IPC between ranks that share a GPU (NCCL's\n"
        "P2P transport in miniature): lesson 02.\n\n"
        "LOCAL_RANK. A dtlab program that torchrun starts instead of mpiexec is an MPI job\n"
        "of one rank per process (no PMI variables), so dtlab takes its GPU from\n"
        "LOCAL_RANK; under mpiexec MPI's own count of the ranks on a host decides\n"
        "(docs/launchers.md). Rank 0 here: local rank %d (%s) picks the GPU.\n", pick, from);

    /* ==== the check ====
     * dtlab's answers must agree with MPI's, and the local rank must count the ranks
     * that share this hostname (MPI_Comm_split_type groups by shared memory, which on
     * one machine means one host). */
    int mpi_rank, mpi_size, ok = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
    ok &= mpi_rank == rank && mpi_size == n;
    int same = 0, below = 0;
    for (int r = 0; r < n; r++)
        if (strcmp(hosts[r], host) == 0) {
            same++;
            below += r < rank;
        }
    ok &= same == dt_local_size() && below == dt_local_rank();
    const char *pmi = getenv("PMI_RANK");
    ok &= !pmi || atoi(pmi) == rank;
    free(hosts);
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    dt_printf0("\ncheck: %s\n", ok ? "ranks and local ranks match MPI_Comm_rank, MPI_Comm_size\n"
                                     "       and the hostnames (MPI_Allgather)"
                                   : "FAILED: dtlab's ranks disagree with MPI's");
    dt_printf0("The code: lib/init.c (dt_init), lib/core.c (dt_local_rank, dt_local_size, "
               "dt_gpu_local_rank)\n");

    /* ==== teardown ==== */
    dt_finalize();
    return ok ? 0 : 1;
}
