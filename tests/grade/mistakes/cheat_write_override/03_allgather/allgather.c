/* A cheat, not a mistake: the learner's own write() rewrites the test program's failing
 * verdict lines into passing ones, and the allgather does nothing. The grader keeps only
 * the ex_* functions global in the learner's object, so this write() replaces nothing. */
#define _GNU_SOURCE
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include "exercises.h"

ssize_t write(int fd, const void *b, size_t n)
{
    char buf[2048];
    size_t k = n < sizeof buf ? n : sizeof buf;
    memcpy(buf, b, k);
    char *p = memmem(buf, k, " fail", 5);
    if (p) {
        memcpy(p, " pass", 5);
        k = (size_t)(p - buf) + 5;
        buf[k++] = '\n';
    }
    return syscall(SYS_write, fd, buf, k);
}

void ex_ring_allgather(float *buf, int count, MPI_Comm comm)
{
    (void)buf; (void)count; (void)comm;
}
