/* Internal to dtviz's drawing: what draw.c (the collective view) and tt_draw.c /
 * tt_rows.c (the timetable) share, so that both views look alike (with style.c's
 * colours, fitted text and help). Not part of draw.h. */
#ifndef DV_DRAW_INTERNAL_H
#define DV_DRAW_INTERNAL_H

#include <SDL.h>

#include "draw.h"

/* The background, text, dimmed text, note and outline colours. The ranks' colours
 * come from dv_rank_color, the kinds' and arrows' from dv_kind_color. */
static const SDL_Color BG = { 24, 26, 32, 255 }, OUTLINE = { 92, 96, 108, 255 },
    TEXT = { 222, 224, 230, 255 }, DIM = { 150, 154, 166, 255 }, NOTE = { 255, 214, 102, 255 };

/* The margin, and the line heights of the fonts (text.c: DejaVu Sans 10, 13, 16 pt):
 * layouts need them without a font (dv_tt_hit, dv_layout_compute have none). */
enum { PAD = 8, SMALL_H = 13, BODY_H = 17, TITLE_H = 22 };

static inline int dvi_clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

static inline void dvi_set_color(SDL_Renderer *r, SDL_Color c)
{
    SDL_SetRenderDrawColor(r, c.r, c.g, c.b, c.a);
}

static inline void dvi_fill(SDL_Renderer *r, SDL_Color c, int x, int y, int w, int h)
{
    dvi_set_color(r, c);
    SDL_RenderFillRect(r, &(SDL_Rect){ x, y, w, h });
}

/* Draws s at (x, y), cut to maxw pixels with "..." when it is wider (style.c). */
void dvi_text_fit(dv_text *t, dv_font f, int x, int y, int maxw, SDL_Color c, const char *s);

#endif /* DV_DRAW_INTERNAL_H */
