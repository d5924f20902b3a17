/* The CPU's matrix products: OpenBLAS's sgemm, or the plain loops (see nn.h).
 *
 * A BLAS multiplies a matrix larger than the cache at close to the processor's peak by
 * working in tiles that stay in cache and registers; layers.c's loops read the whole
 * weight matrix again for every row of the batch. The loops stay as the reference the
 * tests hold sgemm to, chosen at run time (DT_BLAS=0), so a learner can time one
 * against the other.
 *
 * Threads. OpenBLAS runs one product on several threads of its own. Several ranks on
 * one host each doing that would ask for more threads than there are cores, and a
 * thread that waits for a core makes every rank wait for it; so each rank takes its
 * share of the cores it may run on, at least one: cores / ranks on the host. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cblas.h>
#include "nn.h"
#include "nn_internal.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int use_blas = 1, threads = 1, cores = 1, on_host = 1;
static const char *threads_from = "cores / ranks on this host";

int dt_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* "1".."256", else 0 */
static int small_count(const char *s)
{
    char *end;
    long v = s && *s ? strtol(s, &end, 10) : 0;
    return s && *s && !*end && v >= 1 && v <= 256 ? (int)v : 0;
}

const char *dt_blas_env_error(void)
{
    static char why[200];
    const char *b = getenv("DT_BLAS"), *t = getenv("DT_BLAS_THREADS");
    if (b && *b && strcmp(b, "0") && strcmp(b, "1"))
        snprintf(why, sizeof why, "DT_BLAS must be 1 (OpenBLAS's sgemm, the default) or 0 "
                 "(the plain loops, the reference), not '%.40s'", b);
    else if (t && *t && !small_count(t))
        snprintf(why, sizeof why, "DT_BLAS_THREADS must be the threads one matrix product "
                 "may use, 1 to 256, not '%.40s'", t);
    else
        return NULL;
    return why;
}

static void apply(void)
{
    const char *b = getenv("DT_BLAS"), *t = getenv("DT_BLAS_THREADS");
    const char *o = getenv("OPENBLAS_NUM_THREADS");
    use_blas = !(b && strcmp(b, "0") == 0);
    cores = dt_cores();
    if (small_count(t))
        threads = small_count(t), threads_from = "DT_BLAS_THREADS";
    else if (small_count(o))
        threads = small_count(o), threads_from = "OPENBLAS_NUM_THREADS";
    else
        threads = cores / on_host > 1 ? cores / on_host : 1;
    openblas_set_num_threads(threads);
}

void dt_blas_setup(int ranks_on_host)
{
    on_host = ranks_on_host > 0 ? ranks_on_host : 1;
    pthread_once(&once, apply);
    apply();                          /* again, in case a product ran before dt_init */
}

int dt_blas(void)
{
    pthread_once(&once, apply);
    return use_blas;
}

void dt_set_blas(int on)
{
    pthread_once(&once, apply);
    use_blas = on != 0;
}

int dt_blas_threads(void)
{
    pthread_once(&once, apply);
    return threads;
}

void dt_set_blas_threads(int n)
{
    pthread_once(&once, apply);
    threads = n > 0 ? n : 1;
    openblas_set_num_threads(threads);
}

int dti_nn_threads(size_t work)
{
    return work < DTI_NN_PAR_MIN ? 1 : dt_blas_threads();
}

int dti_sgemm_threads(int n)
{
    int was = openblas_get_num_threads();
    if (n != was)
        openblas_set_num_threads(n);
    return was;
}

void dt_blas_describe(char *out, size_t len)
{
    pthread_once(&once, apply);
    if (!use_blas)
        snprintf(out, len, "the plain loops (DT_BLAS=0), the reference");
    else
        snprintf(out, len, "OpenBLAS sgemm, %d thread%s a rank (%s: %d core%s, %d rank%s "
                 "on this host)", threads, threads == 1 ? "" : "s", threads_from, cores,
                 cores == 1 ? "" : "s", on_host, on_host == 1 ? "" : "s");
}

/* C (M, N) = alpha A B^T-or-not + beta C, row-major, leading dimensions the rows' lengths */
void dti_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A,
               const float *B, float beta, float *C)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, ta ? M : K, B, tb ? K : N, beta, C, N);
}

/* The same with leading dimensions of one's own: a matrix inside a wider one (a head's
 * columns of attention's q, k and v) */
void dti_sgemm_ld(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                  int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
