/* The threads of lib/nn's own loops (nn_internal.h): LayerNorm, attention's heads, GELU,
 * the residual adds, the cross-entropy, the biases' sums, the optimizers.
 *
 *   caller (share 0)   worker 1 (share 1)  ...  worker nt-1
 *   job: fn, ctx, n     \
 *   gen += 1  ---------> sees gen, runs fn(ctx, share 1), done += 1
 *   fn(ctx, share 0)
 *   waits for done = workers                       (every worker says so, share or not)
 *
 * Share k of n items is [n k / nt, n (k+1) / nt): contiguous, fixed by (n, nt) alone.
 *
 * Why not OpenMP. GCC's libgomp keeps an idle thread spinning after each loop without
 * giving up its core (3 to 7.5 ms of CPU time after one loop, measured on a 2-core AMD
 * EPYC with GCC 12), and how long is set only by OMP_WAIT_POLICY or GOMP_SPINCOUNT in
 * the environment, read when the library loads, before main. OpenBLAS's own threads
 * (Debian's pthreads build) wait between products too, with sched_yield. With
 * dt_blas_threads() = the cores, the two pools and the caller are one thread more than
 * there are cores: a loop's or a product's thread sat behind a spinning one, and with the
 * loops written as OpenMP loops gptstep's median step at 2 threads was 47 to 306 ms over
 * 8 runs, against 34 to 48 ms without those threads in the quieter runs between them (a
 * shared machine). So these workers, and the caller waiting for them, wait with
 * sched_yield (the core goes to whichever thread has work, one of OpenBLAS's or a
 * worker) and after SPIN_NS sleep on a condition variable until the next job.
 *
 * One caller at a time: a call from a second thread while the pool is busy (two ranks
 * as threads, dp-threads), or from inside a job, runs its loop alone on its own thread,
 * with the same results. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include "errors.h"
#include "nn.h"
#include "nn_internal.h"

#define MAX_WORKERS 255              /* DT_BLAS_THREADS is at most 256 */
#define SPIN_NS 2000000              /* a worker's yielding wait before it sleeps: 2 ms */

static struct {
    pthread_mutex_t busy;            /* held by the thread whose job the pool runs */
    pthread_mutex_t lock;            /* with wake: sleeping workers */
    pthread_cond_t wake;
    atomic_uint gen;                 /* the job's number: a worker runs it on a change */
    atomic_int done;                 /* workers through with the job */
    atomic_int quit;
    int workers;                     /* started, 0 .. MAX_WORKERS */
    unsigned born;                   /* gen when the last ones were started: before
                                        their first job */
    pthread_t tid[MAX_WORKERS];
    dti_nn_body fn;                  /* the job, written before gen */
    void *ctx;
    size_t n;
    int nt;
} pool = { .busy = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER,
            .wake = PTHREAD_COND_INITIALIZER };

static __thread int worker_k;        /* 0 on a caller, k on worker k */

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return 1e9 * t.tv_sec + t.tv_nsec;
}

static void share(size_t n, int nt, int k, size_t *i0, size_t *i1)
{
    *i0 = n * k / nt;
    *i1 = n * (k + 1) / nt;
}

/* The next job after `seen`: spin with sched_yield, then sleep */
static unsigned next_job(unsigned seen)
{
    double t0 = now_ns();
    unsigned g;
    while ((g = atomic_load(&pool.gen)) == seen && !atomic_load(&pool.quit)) {
        if (now_ns() - t0 < SPIN_NS) {
            sched_yield();
            continue;
        }
        pthread_mutex_lock(&pool.lock);
        while (atomic_load(&pool.gen) == seen && !atomic_load(&pool.quit))
            pthread_cond_wait(&pool.wake, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
        t0 = now_ns();
    }
    return g;
}

static void *worker(void *arg)
{
    worker_k = (int)(size_t)arg;
    unsigned seen = pool.born;       /* not gen: the first job may be out already */
    for (;;) {
        seen = next_job(seen);
        if (atomic_load(&pool.quit))
            return NULL;
        if (worker_k < pool.nt) {
            size_t i0, i1;
            share(pool.n, pool.nt, worker_k, &i0, &i1);
            if (i1 > i0)
                pool.fn(pool.ctx, i0, i1);
        }
        atomic_fetch_add(&pool.done, 1);
    }
}

/* At exit: the workers told to end, and joined (valgrind then finds no thread's memory
 * left). Not from a worker (a job that stopped the program), which cannot join itself. */
static void stop(void)
{
    if (worker_k)
        return;
    pthread_mutex_lock(&pool.lock);
    atomic_store(&pool.quit, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int k = 0; k < pool.workers; k++)
        pthread_join(pool.tid[k], NULL);
    pool.workers = 0;
}

/* A child of fork() has none of its parent's workers */
static void after_fork(void)
{
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pool.workers = 0;
}

/* Workers 1 .. nt-1 started (the pool's busy mutex held) */
static void grow(int nt)
{
    static int once;
    if (!once) {
        once = 1;
        atexit(stop);
        pthread_atfork(NULL, NULL, after_fork);
    }
    pool.born = atomic_load(&pool.gen);
    for (int k = pool.workers + 1; k < nt; k++) {
        int e = pthread_create(&pool.tid[k - 1], NULL, worker, (void *)(size_t)k);
        DT_REQUIRE(e == 0, "lib/nn: cannot start a thread for its loops (error %d)", e);
        pool.workers = k;
    }
}

void dti_nn_parallel(size_t n, size_t work, dti_nn_body fn, void *ctx)
{
    int nt = dti_nn_threads(work);
    nt = (size_t)nt > n ? (int)n : nt;
    nt = nt > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : nt;
    if (nt <= 1 || worker_k || atomic_load(&pool.quit)
        || pthread_mutex_trylock(&pool.busy) != 0) {
        if (n > 0)
            fn(ctx, 0, n);                   /* the plain loop, on this thread */
        return;
    }
    grow(nt);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.nt = nt;
    atomic_store(&pool.done, 0);
    pthread_mutex_lock(&pool.lock);          /* the job's number, under the sleepers' lock */
    atomic_fetch_add(&pool.gen, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    size_t i0, i1;
    share(n, nt, 0, &i0, &i1);
    fn(ctx, i0, i1);
    while (atomic_load(&pool.done) < pool.workers)
        sched_yield();
    pthread_mutex_unlock(&pool.busy);
}
