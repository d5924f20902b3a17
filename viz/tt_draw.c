/* Drawing the training timetable (timetable.h): see draw.h. (Being written.) */
#include "draw.h"
#include "timetable.h"

void dv_tt_draw(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_view *v, int w, int h)
{
    (void)r; (void)t; (void)m; (void)v; (void)w; (void)h;
}

int dv_tt_hit(const dv_view *v, int w, int h, int x, int y, int *rank, int *lane, double *t)
{
    (void)v; (void)w; (void)h; (void)x; (void)y; (void)rank; (void)lane; (void)t;
    return 0;
}
