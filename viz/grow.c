/* dvi_grow (grow.h): the viewer's arrays grow by doubling. Below the model and the
 * timetable, which both keep arrays of what a trace holds; it calls nothing of viz/. */
#include <stdlib.h>

#include "grow.h"

int dvi_grow(void *p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap *= 2;
    void *q = realloc(*(void **)p, ncap * sz);
    if (q == NULL)
        return -1;
    *(void **)p = q;
    *cap = ncap;
    return 0;
}
