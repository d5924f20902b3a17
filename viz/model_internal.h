/* Internal to viz/'s model: what model.c (passes 1 to 3: a trace cut into calls, and
 * dv_model_build) and model_call.c (pass 4: one call) share. Not part of model.h. */
#ifndef DV_MODEL_INTERNAL_H
#define DV_MODEL_INTERNAL_H

#include <stddef.h>

#include "grow.h"
#include "model.h"

/* The body of a qsort comparison, one key at a time: returns -1 or 1 when x and y
 * differ, and falls through to the next key when they are equal. */
#define DVI_CMP(x, y) do { if ((x) != (y)) return (x) < (y) ? -1 : 1; } while (0)


/* Pass 4 (model_call.c), for every call: builds m->calls[0..ncalls) (allocated and
 * zeroed by the caller) in order, call c from its events cev[cstart[c] .. cstart[c+1]),
 * indices into m->trace in trace order, the largest call having `most` of them;
 * ev_phase[i] is event i's phase as an index into names (pass 1). Sets m->ncalls,
 * appends each call's frames and messages to m (m owns them) and numbers the positions
 * (m->npos). 0, or -1 out of memory: what was built stays in m, for dv_model_free. */
int dvi_build_calls(dv_model *m, int ncalls, const int *cstart, const int *cev, size_t most,
                    const int *ev_phase, char (*names)[32]);

#endif /* DV_MODEL_INTERNAL_H */
