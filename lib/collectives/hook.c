/* The step hook: a window onto the step-wise algorithms while they run.
 *
 * Lesson 08 sets a hook that gathers every rank's buffer after each ring step, and then
 * prints the tables, so the learner watches the chunks fill up. The collectives call
 * dti_step_done after each step (ring steps, tree rounds, recursive-doubling steps);
 * every rank calls it at the same step, so the hook may communicate.
 *
 * The hook is a process-wide setting: set it before the collectives run, not while
 * another thread is inside one. */
#include <stddef.h>
#include "collectives.h"
#include "internal.h"

static dt_step_hook hook_fn;     /* NULL: no hook */
static void *hook_ctx;
static int in_hook;              /* 1 while the hook runs: no re-entry */

void dt_set_step_hook(dt_step_hook fn, void *ctx)
{
    hook_fn = fn;
    hook_ctx = ctx;
}

/* A hook that calls a dtlab collective (say dt_gather, to collect the buffers) would
 * come back here from inside that collective, and again, forever: while the hook runs,
 * the steps of the collectives it calls are not reported. Those collectives take their
 * scratch from a second set of slots (dti_scratch_nest), so the buffers of the one that
 * called the hook are left as they were. */
void dti_step_done(const char *coll, const char *phase, int step,
                   const void *buf, int count, MPI_Datatype type, MPI_Comm comm)
{
    if (hook_fn == NULL || in_hook)
        return;
    in_hook = 1;
    dti_scratch_nest(1);
    hook_fn(coll, phase, step, buf, count, type, comm, hook_ctx);
    dti_scratch_nest(-1);
    in_hook = 0;
}
