/* This rank's facts (what dt_init found: init.c) and the one abort path, which every
 * file of lib/ uses; it calls only the watcher's claim to speak (watch.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "core.h"
#include "internal.h"

dti_facts dti_me = {.rank = -1, .gpu = -1, .polite = 1};

int dt_rank(void) { return dti_me.rank; }
int dt_size(void) { return dti_me.size; }
int dt_local_rank(void) { return dti_me.local_rank; }
int dt_local_size(void) { return dti_me.local_size; }
int dt_launched(void) { return dti_me.launched; }
dt_device_kind dt_device(void) { return dti_me.device; }
int dt_cuda_device(void) { return dti_me.gpu; }

int dt_gpu_local_rank(const char **from)
{
    if (from)
        *from = dti_me.pick_from;
    return dti_me.pick;
}
const char *dt_device_name(void) { return dti_me.name; }
int dti_gpu_count(void) { return dti_me.gpu_count; }
void dt_set_polite(int polite) { dti_me.polite = polite; }
int dt_polite(void) { return dti_me.polite; }

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
    if (say && dti_me.rank >= 0)
        fprintf(stderr, "dtlab: rank %d: %s:%d: %s\n", dti_me.rank, file, line, msg);
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
