/* Memory the ranks of one host share (hostmem.h).
 *
 * The host's rank 0 makes a POSIX shared-memory object (shm_open, in /dev/shm) as large
 * as the whole block, reserves its pages (posix_fallocate: a full /dev/shm says so here,
 * not with a SIGBUS later), and sends its name to the others, which map it too; once
 * every rank has said that it has the block (an allreduce, which is also the moment all
 * have mapped it), rank 0 removes the name, and the memory lives as long as some rank
 * maps it. The block is laid out
 *
 *     [world ranks: one int per rank][head][part of rank 0][part of rank 1] ...
 *
 * each piece starting on a page, so a rank's part is its own pages (the rank writes its
 * part first, so a NUMA host places those pages near that rank's core).
 *
 * Two MPI calls, both nonblocking and waited for politely (test, then give the core
 * away): MPICH's blocking calls spin, and at start-up, with more ranks than cores, a
 * spinning rank holds the core the others need. (MPI_Win_allocate_shared, which did this
 * before, makes several blocking calls; two windows of it cost a job of 5 ranks on 2
 * cores about half a second.) A leaf: it calls nothing else in dtlab. */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include "hostmem.h"

static struct {
    char *base;             /* the mapping; NULL before dti_host_open */
    size_t bytes, head, part, page;
    int n, me, shared;
} hm;

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* The offsets: where the head and each part begin. */
static size_t head_at(void) { return round_up((size_t)hm.n * sizeof(int), hm.page); }
static size_t part_at(int i) { return head_at() + hm.head + (size_t)i * hm.part; }

/* Waits for req, giving the core away between tests; 0 when MPI says it failed. */
static int wait_politely(MPI_Request *req)
{
    int done = 0;
    while (!done) {
        if (MPI_Test(req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            return 0;
        if (!done)
            sched_yield();
    }
    return 1;
}

/* A mapping of hm.bytes, private to this rank (nothing shared): its head and its part. */
static int map_private(void)
{
    void *p = mmap(NULL, hm.bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                   -1, 0);
    hm.base = p == MAP_FAILED ? NULL : p;
    return hm.base != NULL;
}

int dti_host_open(MPI_Comm local, size_t head, size_t part)
{
    int world = 0;
    long page = sysconf(_SC_PAGESIZE);
    memset(&hm, 0, sizeof hm);
    hm.page = page > 0 ? (size_t)page : 4096;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(local, &hm.me);
    MPI_Comm_size(local, &hm.n);
    hm.head = round_up(head ? head : 1, hm.page);
    hm.part = part ? round_up(part, hm.page) : 0;
    hm.bytes = part_at(hm.n);

    if (hm.n == 1) {                    /* alone on this host: nothing to share */
        if (!map_private())
            return 0;
        ((int *)hm.base)[0] = world;
        hm.shared = 1;
        return 1;
    }

    /* rank 0 makes the object; its name, "" when it could not, goes to the others */
    char name[64] = "";
    int fd = -1, ok = 0, all_ok = 0;
    if (hm.me == 0) {
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        snprintf(name, sizeof name, "/dtlab-%ld-%lx", (long)getpid(),
                 (unsigned long)t.tv_nsec ^ (unsigned long)(uintptr_t)&t);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd >= 0 && posix_fallocate(fd, 0, (off_t)hm.bytes) != 0) {
            close(fd);
            shm_unlink(name);
            fd = -1;
        }
        if (fd < 0)
            name[0] = '\0';
    }
    MPI_Request req;
    if (MPI_Ibcast(name, sizeof name, MPI_CHAR, 0, local, &req) != MPI_SUCCESS ||
        !wait_politely(&req))
        name[0] = '\0';
    if (name[0]) {
        if (hm.me != 0)
            fd = shm_open(name, O_RDWR, 0);
        void *p = fd >= 0 ? mmap(NULL, hm.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                          : MAP_FAILED;
        if (fd >= 0)
            close(fd);                  /* the mapping keeps the memory */
        hm.base = p == MAP_FAILED ? NULL : p;
        ok = hm.base != NULL;
    }
    if (ok)
        ((int *)hm.base)[hm.me] = world;
    atomic_thread_fence(memory_order_seq_cst);
    if (MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, local, &req) != MPI_SUCCESS ||
        !wait_politely(&req))
        all_ok = 0;
    atomic_thread_fence(memory_order_seq_cst);
    if (hm.me == 0 && name[0])
        shm_unlink(name);               /* every rank has mapped it, or given up */
    if (all_ok) {
        hm.shared = 1;
        return 1;
    }
    if (hm.base)
        munmap(hm.base, hm.bytes);
    hm.base = NULL;
    if (map_private())
        for (int i = 0; i < hm.n; i++)
            ((int *)hm.base)[i] = i == hm.me ? world : -1;
    return 0;
}

void *dti_host_head(void) { return hm.base ? hm.base + head_at() : NULL; }

void *dti_host_part(int i)
{
    if (!hm.base || !hm.part || i < 0 || i >= hm.n || (!hm.shared && i != hm.me))
        return NULL;
    return hm.base + part_at(i);
}

int dti_host_world_rank(int i)
{
    return hm.base && i >= 0 && i < hm.n ? ((int *)hm.base)[i] : -1;
}

int dti_host_shared(void) { return hm.base && hm.shared; }

void dti_host_close(void)
{
    if (hm.base)
        munmap(hm.base, hm.bytes);
    memset(&hm, 0, sizeof hm);
}
