/* The viewer's growing arrays (grow.c): what model.c, model_call.c and timetable.c
 * share, below all of them. */
#ifndef DV_GROW_H
#define DV_GROW_H

#include <stddef.h>

/* Grows the array *p (of *cap elements of size sz, realloc'd, owned by the caller) to
 * hold at least need, doubling. 0, or -1 out of memory (*p and *cap unchanged). */
int dvi_grow(void *p, size_t *cap, size_t need, size_t sz);

#endif /* DV_GROW_H */
