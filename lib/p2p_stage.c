/* p2p's lower half, staging (see mailbox.h): the pinned host buffers device data
 * crosses through, their events, and the copies in and out of them. Below p2p.c and
 * the transports (mailbox.c), which stage through it; it calls neither. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "buf.h"
#include "cuda.h"
#include "internal.h"
#include "mailbox.h"
#include "trace.h"

/* ==== staging ====
 *
 * Device data crosses through pinned host buffers: pinned (page-locked) memory is what
 * the GPU's copy engine reads and writes directly, so the copies run at full speed.
 * Two buffers, one per direction, grown on demand, and the events that mark where the
 * GPU has got to in a pipeline of copies (mailbox.c, "staged pieces"). Each thread has
 * its own (DDP's communication thread sends while the main thread computes and may send
 * too): freed when the thread ends, the main thread's by dt_finalize. Without a GPU the
 * buffers are plain memory: the CPU tests stage host data through them too
 * (dti_p2p_stage_host), to run the pipeline's logic every day. */
typedef struct {
    struct { void *p; size_t nbytes; int pinned; } buf[2];
    void *ev[DTI_MAX_PIECES];
    /* dt_isend's and dt_irecv's own buffers (dti_p2p_stage_take): each request of
     * device data holds one until the wait that completes it; kept for reuse */
    struct { void *p; size_t nbytes; int pinned, busy; } own[DTI_MAX_STAGED];
} stage_state;

static pthread_key_t stage_key;
static pthread_once_t stage_once = PTHREAD_ONCE_INIT;

/* A staging buffer freed as it was made (NULL: nothing) */
static void drop(void *p, int pinned)
{
    if (p && pinned)
        dti_cuda_host_free(p);
    else
        free(p);
}

static void stage_release(void *arg)
{
    stage_state *st = arg;
    for (int i = 0; st && i < 2; i++)
        drop(st->buf[i].p, st->buf[i].pinned);
    for (int i = 0; st && i < DTI_MAX_PIECES; i++)
        if (st->ev[i])
            dti_cuda_event_free(st->ev[i]);
    for (int i = 0; st && i < DTI_MAX_STAGED; i++)
        drop(st->own[i].p, st->own[i].pinned);
    free(st);
}

static void stage_key_make(void)
{
    DT_REQUIRE(pthread_key_create(&stage_key, stage_release) == 0,
               "cannot create a thread-local key for p2p staging");
}

static stage_state *stage_of_thread(void)
{
    pthread_once(&stage_once, stage_key_make);
    stage_state *st = pthread_getspecific(stage_key);
    if (st == NULL) {
        st = calloc(1, sizeof *st);
        DT_REQUIRE(st != NULL, "out of host memory");
        pthread_setspecific(stage_key, st);
    }
    return st;
}

/* *p replaced by a buffer of nbytes: pinned with a GPU, plain memory without */
static void regrow(void **p, size_t *have, int *pinned, size_t nbytes)
{
    drop(*p, *pinned);
    *pinned = dti_gpu_count() > 0;
    *p = *pinned ? dti_cuda_host_alloc(nbytes) : malloc(nbytes ? nbytes : 1);
    DT_REQUIRE(*p != NULL, "out of host memory (%zu bytes)", nbytes);
    *have = nbytes;
}

void *dti_p2p_staging(int slot, size_t nbytes)
{
    stage_state *st = stage_of_thread();
    if (st->buf[slot].nbytes < nbytes || !st->buf[slot].p)
        regrow(&st->buf[slot].p, &st->buf[slot].nbytes, &st->buf[slot].pinned, nbytes);
    return st->buf[slot].p;
}

/* The smallest free buffer that holds nbytes, else a free one grown, else a new one:
 * as many as requests in flight, each as large as the largest message it carried. */
void *dti_p2p_stage_take(size_t nbytes)
{
    stage_state *st = stage_of_thread();
    int best = -1, spare = -1;
    for (int i = 0; i < DTI_MAX_STAGED; i++) {
        if (st->own[i].busy)
            continue;
        if (st->own[i].p && st->own[i].nbytes >= nbytes &&
            (best < 0 || st->own[i].nbytes < st->own[best].nbytes))
            best = i;
        else if (spare < 0 || (st->own[spare].p && !st->own[i].p))
            spare = i;                            /* an empty one first, else one to grow */
    }
    DT_REQUIRE(best >= 0 || spare >= 0, "more than %d nonblocking messages of device data "
               "in flight on one thread: wait for some (dt_waitall) before posting more",
               DTI_MAX_STAGED);
    if (best < 0) {
        best = spare;
        regrow(&st->own[best].p, &st->own[best].nbytes, &st->own[best].pinned, nbytes);
    }
    st->own[best].busy = 1;
    return st->own[best].p;
}

void dti_p2p_stage_give(void *p)
{
    stage_state *st = stage_of_thread();
    for (int i = 0; i < DTI_MAX_STAGED; i++)
        if (st->own[i].p == p && st->own[i].busy) {
            st->own[i].busy = 0;
            return;
        }
    DT_REQUIRE(0, "dti_p2p_stage_give: %p is not a staging buffer of this thread", p);
}

void *dti_p2p_event(int i)
{
    stage_state *st = stage_of_thread();
    if (!st->ev[i])
        st->ev[i] = dti_cuda_event_new();
    return st->ev[i];
}


/* Copies between device and staging memory, recorded as d2h / h2d. */
static void staged_copy(void *dst, const void *src, size_t nbytes, dt_event_kind kind)
{
    double t0 = dt_trace_now();
    dti_cuda_memcpy(dst, src, nbytes);
    dt_trace_add(kind, -1, nbytes, t0, dt_trace_now());
}

void dti_p2p_copy(void *dst, const void *src, size_t nbytes)
{
    int d = dt_is_device_ptr(dst), s = dt_is_device_ptr(src);
    if (!d && !s)
        memcpy(dst, src, nbytes);
    else
        staged_copy(dst, src, nbytes, d && s ? DT_EV_COPY : d ? DT_EV_H2D : DT_EV_D2H);
}

void dti_p2p_copy_queue(void *dst, const void *src, size_t nbytes, int dev)
{
    if (dev)
        dti_cuda_memcpy_async(dst, src, nbytes);
    else
        memcpy(dst, src, nbytes);
}

void dti_p2p_stage_fini(void)
{
    pthread_once(&stage_once, stage_key_make);
    stage_release(pthread_getspecific(stage_key));
    pthread_setspecific(stage_key, NULL);
}
