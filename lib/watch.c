/* When a rank dies or hangs: the watcher, the fatal-signal messages and the wait board.
 *
 * mpiexec (MPICH's hydra) ends the whole job when one rank dies, but it names a pid, not
 * a rank, and when a rank calls exit() early it says nothing at all. dtlab adds:
 *
 *   the watcher    dt_init forks, before MPI_Init, one tiny process per rank. It waits
 *                  on a socket from its rank and never touches MPI. The rank sends 'F'
 *                  before a clean exit and 'E' before it explains its own end (dti_die,
 *                  a fatal signal, exit() without dt_finalize). If the socket closes
 *                  without a byte, the rank died of something it could not catch
 *                  (SIGKILL, the out-of-memory killer): the watcher says so, naming it.
 *   the lock       Only the first death on a host may speak: when mpiexec then kills the
 *                  other ranks, or several ranks fail the same check, one line is enough.
 *                  The lock is a Linux abstract unix socket named after the launcher (the
 *                  rank's parent: hydra's proxy, one per host). Whoever binds it first
 *                  speaks; the name vanishes when its holder exits, about 3 s later. The
 *                  watcher holds it, also for a rank that explains itself: the rank asks
 *                  ('E'), the watcher answers '1' (speak) or '0' (someone already did).
 *   fatal signals  SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM and SIGINT print
 *                  "dtlab: rank R: killed by SIGSEGV (...)" and then die of the signal.
 *   the board      Shared memory among the ranks of a host: which rank is inside a
 *                  wait. When a wait times out (p2p.c), a rank whose peer is itself
 *                  waiting lets that peer speak first, so the message names the rank at
 *                  the end of the chain: the one that died or is stuck.
 *
 * hydra stops a job by killing the process group of every rank, so the watchers, which
 * stay in their rank's group, die with the ranks killed for someone else's death,
 * silently. The dead rank's watcher would die too before it could speak, but it holds a
 * copy of its rank's PMI socket, whose closing is what makes hydra act: it lets go of
 * that copy only once it has spoken.
 *
 * DT_WATCH=0 starts no watcher; then SIGKILL goes unexplained and every rank that
 * explains itself speaks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "core.h"
#include "hostmem.h"
#include "internal.h"

enum { RUNNING, FINISHED, DYING };

static struct {
    int fd;                     /* the rank's end of the socket; -1: no watcher */
    pid_t pid;                  /* the watcher */
    atomic_int state;           /* RUNNING, FINISHED ('F' sent) or DYING (explaining) */
    char msg[320];              /* the watcher's line, written before the fork */
    size_t msg_len;
    struct sockaddr_un lock;    /* the lock's abstract name, and its length */
    socklen_t lock_len;
} w = {.fd = -1};

double dti_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ==== the watcher (its own process: async-signal-safe calls only) ==== */

static void put(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t k = write(fd, s, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return;
        s += k;
        n -= (size_t)k;
    }
}

/* The lock: >= 0 the socket that holds it, -1 someone else holds it, -2 no way to tell
 * (then speak: two lines are better than none). */
static int take_lock(void)
{
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -2;
    if (bind(s, (struct sockaddr *)&w.lock, w.lock_len) == 0)
        return s;
    int busy = errno == EADDRINUSE;
    close(s);
    return busy ? -1 : -2;
}

/* Closes the fds in [lo, hi]. */
static void close_span(int lo, int hi)
{
    if (lo > hi)
        return;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, (unsigned)lo, (unsigned)hi, 0u) == 0)
        return;
#endif
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)hi)
        hi = (int)rl.rlim_cur;
    for (int i = lo; i <= hi && i < 65536; i++)
        close(i);
}

/* Keeps only stderr, fd (the socket to the rank) and pmi (-1: none): no copy of
 * mpiexec's stdout or of other sockets of the job. */
static void close_others(int fd, int pmi)
{
    int a = fd < pmi ? fd : pmi, b = fd < pmi ? pmi : fd;
    close(0);
    close(1);
    if (a < 3)
        a = b, b = INT_MAX;       /* pmi is -1: only fd to keep */
    close_span(3, a - 1);
    if (b != INT_MAX) {
        close_span(a + 1, b - 1);
        close_span(b + 1, INT_MAX);
    } else {
        close_span(a + 1, INT_MAX);
    }
}

/* The watcher's life: wait for a byte or the end of the socket, speak or not, then let
 * go of the rank's PMI socket (PMI_FD, hydra's line to the rank; see the top). */
__attribute__((noreturn)) static void watcher(int fd, int pmi)
{
    signal(SIGINT, SIG_IGN);      /* Ctrl-C and kill are for the rank, not for us */
    signal(SIGTERM, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    prctl(PR_SET_NAME, "dtlab-watch", 0, 0, 0);
    close_others(fd, pmi);

    char c = 0;
    ssize_t n;
    while ((n = read(fd, &c, 1)) < 0 && errno == EINTR)
        ;
    if (n == 1 && c == 'F')
        _exit(0);                 /* a clean end: nothing to say */
    /* A rank that explains itself may be dying of another's death (an MPI error, or
     * MPICH aborting, because a peer vanished): it asks a little later, so that the
     * watcher of a rank killed at the same moment takes the lock first. */
    if (n == 1 && c == 'E')
        nanosleep(&(struct timespec){0, 300000000}, NULL);
    int lock = take_lock();
    if (n == 1 && c == 'E') {     /* the rank explains itself: may it speak? */
        char a = lock == -1 ? '0' : '1';
        put(fd, &a, 1);
    } else if (lock != -1) {      /* gone without a word */
        put(2, w.msg, w.msg_len);
    }
    close(2);
    close(fd);
    if (pmi >= 0)
        close(pmi);               /* now hydra may stop the job */
    if (lock >= 0)                /* hold it while mpiexec stops the others */
        nanosleep(&(struct timespec){3, 0}, NULL);
    _exit(0);
}

/* ==== the rank's side ==== */

static const char *rank_env(void)
{
    static const char *names[] = {"PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK",
                                  "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (getenv(names[i]))
            return getenv(names[i]);
    return NULL;
}

void dti_watch_start(void)
{
    const char *on = getenv("DT_WATCH"), *rank = rank_env();
    if ((on && strcmp(on, "0") == 0) || rank == NULL)
        return;                   /* off, or no launcher: a lone process needs none */
    const char *size = getenv("PMI_SIZE");
    char host[64] = "?";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    const char *others = size && strcmp(size, "1") ? "; mpiexec is stopping the other "
                                                     "ranks" : "";
    int len = snprintf(w.msg, sizeof w.msg, "dtlab: rank %.12s (pid %ld on %s) died "
                       "without a word: killed by a signal it cannot catch, such as "
                       "SIGKILL (kill -9, or the out-of-memory killer)%s\n", rank,
                       (long)getpid(), host, others);
    w.msg_len = len < 0 ? 0 : (size_t)len < sizeof w.msg ? (size_t)len : sizeof w.msg - 1;

    /* abstract name: a NUL byte, then the text; the length says where it ends */
    w.lock.sun_family = AF_UNIX;
    len = snprintf(w.lock.sun_path + 1, sizeof w.lock.sun_path - 1, "dtlab-died-%ld",
                   (long)getppid());
    w.lock_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)len);

    const char *pmi_env = getenv("PMI_FD");
    int pmi = pmi_env ? atoi(pmi_env) : -1;
    if (pmi < 3 || fcntl(pmi, F_GETFD) < 0)
        pmi = -1;

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return;
    fflush(NULL);                 /* nothing buffered is written twice */
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        watcher(sv[1], pmi);
    }
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);             /* no watcher: dtlab works on without one */
        return;
    }
    w.fd = sv[0];
    w.pid = pid;
}

int dti_watch_claim(void)
{
    int expect = RUNNING;
    if (!atomic_compare_exchange_strong(&w.state, &expect, DYING))
        return expect == DYING ? -1 : 1;      /* finished: no watcher left to ask */
    if (w.fd < 0)
        return 1;
    char c = 'E', a = '1';
    if (send(w.fd, &c, 1, MSG_NOSIGNAL) != 1)
        return 1;
    struct pollfd p = {.fd = w.fd, .events = POLLIN};
    int k;
    while ((k = poll(&p, 1, 3000)) < 0 && errno == EINTR)
        ;
    if (k == 1) {                 /* an answer, or the watcher gone: killed with us */
        ssize_t got = recv(w.fd, &a, 1, 0);
        return got == 1 ? a != '0' : got == 0 ? 0 : 1;
    }
    return 1;                     /* no answer in 3 s: speak */
}

void dti_watch_done(void)
{
    int expect = RUNNING;
    if (!atomic_compare_exchange_strong(&w.state, &expect, FINISHED))
        return;
    if (w.fd >= 0) {
        char c = 'F';
        if (send(w.fd, &c, 1, MSG_NOSIGNAL) == 1)
            waitpid(w.pid, NULL, 0);    /* it leaves at once; no zombie is left behind */
        close(w.fd);
        w.fd = -1;
    }
}

/* ==== fatal signals ==== */

#if defined(__SANITIZE_ADDRESS__)
#define DT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DT_ASAN 1
#endif
#endif

/* memory: left to AddressSanitizer in its builds; one: only this rank got it, so mpiexec
 * is stopping the others (Ctrl-C reaches every rank) */
static const struct { int sig, memory, one; const char *name, *why; } fatal[] = {
    {SIGSEGV, 1, 1, "SIGSEGV",
     "segmentation fault: a pointer or an index outside its buffer?"},
    {SIGBUS, 1, 1, "SIGBUS", "bus error: a bad memory access, such as a file cut short"},
    {SIGFPE, 1, 1, "SIGFPE", "arithmetic error: an integer division by zero?"},
    {SIGILL, 0, 1, "SIGILL", "illegal instruction: a corrupted stack, or a build for "
                             "another CPU"},
    {SIGABRT, 0, 1, "SIGABRT", "abort: a failed assert, or memory corruption the C "
                               "library saw"},
    {SIGTERM, 0, 1, "SIGTERM", "terminated from outside: kill, or a job scheduler"},
    {SIGINT, 0, 0, "SIGINT", "interrupted: Ctrl-C, which mpiexec passes to every rank"},
};
#define NFATAL (int)(sizeof fatal / sizeof fatal[0])
static struct sigaction before[NFATAL];   /* what the program had set before dt_init */

static size_t add(char *buf, size_t k, size_t cap, const char *s)
{
    while (*s && k < cap)
        buf[k++] = *s++;
    return k;
}

static size_t add_int(char *buf, size_t k, size_t cap, long v)
{
    char d[24];
    int j = 0;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    do { d[j++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0)
        d[j++] = '-';
    while (j && k < cap)
        buf[k++] = d[--j];
    return k;
}

/* This rank and the job's size, for the handlers (set by dti_watch_signals). */
static struct { int rank, size; } me = { -1, 0 };

/* Says which signal killed the rank, lets a handler the program installed before dt_init
 * (the grader's) say its part, then dies of the same signal. Async-signal-safe. */
static void on_fatal(int sig, siginfo_t *info, void *uctx)
{
    int i = 0;
    while (i < NFATAL - 1 && fatal[i].sig != sig)
        i++;
    int saved = errno;
    if (dti_watch_claim() == 1) {
        char msg[320];
        size_t k = 0, cap = sizeof msg - 1;
        k = add(msg, k, cap, "dtlab: rank ");
        k = add_int(msg, k, cap, me.rank);
        k = add(msg, k, cap, ": killed by ");
        k = add(msg, k, cap, fatal[i].name);
        k = add(msg, k, cap, " (");
        k = add(msg, k, cap, fatal[i].why);
        k = add(msg, k, cap, fatal[i].one && me.size > 1
                             ? "); mpiexec is stopping the other ranks" : ")");
        msg[k++] = '\n';
        put(2, msg, k);
    }
    const struct sigaction *b = &before[i];
    if (b->sa_flags & SA_SIGINFO)
        b->sa_sigaction(sig, info, uctx);
    else if (b->sa_handler != SIG_DFL && b->sa_handler != SIG_IGN)
        b->sa_handler(sig);
    errno = saved;
    signal(sig, SIG_DFL);
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
}

/* exit() or a return from main without dt_finalize: hydra then stops the job without a
 * word (with status 0 if the rank's status was 0). */
static void on_exit_early(int status, void *arg)
{
    (void)arg;
    int down = 0;
    MPI_Finalized(&down);
    if (down)                     /* MPI_Finalize without dt_finalize: a clean end too */
        dti_watch_done();
    if (atomic_load(&w.state) != RUNNING || dti_watch_claim() != 1)
        return;
    fflush(stdout);
    fprintf(stderr, "dtlab: rank %d: the program exited (status %d) before "
            "dt_finalize%s\n", me.rank, status,
            me.size > 1 ? "; mpiexec is stopping the other ranks" : "");
    fflush(stderr);
}

/* A sanitizer's report ends the rank with _exit: say which rank it was (weak: the symbol
 * exists only when a sanitizer's runtime is linked in). */
extern void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

static void on_sanitizer_death(void)
{
    if (atomic_load(&w.state) != RUNNING || dti_watch_claim() != 1)
        return;
    char msg[160];
    size_t k = add(msg, 0, sizeof msg - 1, "dtlab: rank ");
    k = add_int(msg, k, sizeof msg - 1, me.rank);
    k = add(msg, k, sizeof msg - 1, ": stopped by a sanitizer (its report is above)");
    msg[k++] = '\n';
    put(2, msg, k);
}

void dti_watch_signals(int rank, int size)
{
    me.rank = rank;
    me.size = size;
    /* a stack of its own for the handler, so that a stack overflow is reported too */
    static char altstack[1 << 16];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    sigaltstack(&ss, NULL);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < NFATAL; i++) {
#ifdef DT_ASAN
        if (fatal[i].memory)
            continue;             /* AddressSanitizer's own report is better */
#endif
        sigaction(fatal[i].sig, NULL, &before[i]);
        if (!(before[i].sa_flags & SA_SIGINFO) && before[i].sa_handler == SIG_IGN)
            continue;             /* the program chose to ignore it */
        sigaction(fatal[i].sig, &sa, NULL);
    }
    on_exit(on_exit_early, NULL);
    if (__sanitizer_set_death_callback)
        __sanitizer_set_death_callback(on_sanitizer_death);
}

/* ==== the board: who, on this host, is waiting ====
 *
 * Two ints per rank of the host, in the head of the memory the host's ranks share
 * (hostmem.h, which came zeroed and also knows each local rank's rank in
 * MPI_COMM_WORLD): how many of its threads are inside a wait that did not end at once,
 * and whether it has sent a message to itself (which a stuck wait names: a send meant
 * for a partner, most often). */
static atomic_int *board;
static int board_n, board_me;

void dti_watch_board_open(int local_rank, int local_size)
{
    board = dti_host_head();            /* none is no error: a timed-out wait then
                                         * speaks at once */
    board_n = local_size;
    board_me = local_rank;
}

/* The head bytes the board needs on a host of n ranks. */
size_t dti_watch_board_bytes(int n) { return 2 * (size_t)n * sizeof(atomic_int); }

void dti_watch_board_close(void) { board = NULL; }

void dti_watch_waiting(int delta)
{
    if (board)
        atomic_fetch_add(&board[2 * board_me], delta);
}

void dti_watch_sent_to_self(void)
{
    if (board)
        atomic_store(&board[2 * board_me + 1], 1);
}

/* The board's int k of world_rank's slot; 0 when that rank is not on this host. */
static int board_of(int world_rank, int k)
{
    for (int i = 0; board && world_rank >= 0 && i < board_n; i++)
        if (dti_host_world_rank(i) == world_rank)
            return atomic_load(&board[2 * i + k]);
    return 0;
}

int dti_watch_is_waiting(int world_rank) { return board_of(world_rank, 0) > 0; }
int dti_watch_has_sent_to_self(int world_rank) { return board_of(world_rank, 1); }
