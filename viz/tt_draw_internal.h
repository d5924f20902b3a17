/* Internal to the timetable's drawing: what tt_draw.c (the picture, and what frames the
 * rows) and tt_rows.c (the layout and the rows) share. Not part of draw.h. */
#ifndef DV_TT_DRAW_INTERNAL_H
#define DV_TT_DRAW_INTERNAL_H

#include <SDL.h>

#include "draw.h"
#include "draw_internal.h"
#include "timetable.h"

/* ==== colours and sizes ==== */

/* The lanes' own colours (draw_internal.h has the background, text, note, outline). */
static const SDL_Color LANE = { 38, 41, 50, 255 }, GRID = { 48, 52, 62, 255 },
    INK = { 16, 17, 22, 255 };

enum {
    HEADER_H = PAD / 2 + TITLE_H + 2 * BODY_H + 6,  /* title, step and window, measures */
    AXIS_H = 4 + SMALL_H + 3,                       /* ticks and their numbers */
    LEGEND_H = SMALL_H + 4,                         /* one line of the legend */
    ROW_MAX = 96,                                   /* a row's height at most */
    STASH_W = 64,                                   /* pp: "stash 12" right of the rows */
};

/* a + (b - a) f, channel by channel, opaque. */
SDL_Color dvi_mix(SDL_Color a, SDL_Color b, double f);

/* ==== the layout (tt_rows.c): the one geometry of the drawing and of dv_tt_hit ==== */

/* The rows drawn at most (a rank's threads have rows of their own: dp-threads has up to
 * 256); rows past it are left out. */
#define DVI_TT_MAX_ROWS 512

typedef struct {
    int n;                  /* rows: one per rank (stage) or thread, 1..DVI_TT_MAX_ROWS */
    int head;               /* the header's height: HEADER_H, and a line for dv_tt.disagree */
    int pp;                 /* pp, or hybrid with stages: arrows, the stash column */
    int label_w;            /* the rows' names left of the lanes */
    SDL_Rect area;          /* the lanes: x..x+w is the window, y..y+h the n rows */
    int row;                /* a row's height: gap/2, compute lane, sep, comm lane, gap/2 */
    int gap, lc, sep, lm;
    int stash_x;            /* pp: x of each row's "stash k"; 0 none */
    int stage_rows;         /* pp: rows are stages (dv_tt_row_name says "stage s") */
    int axis_y, legend_y, nlegend, keys_y;
    double t0, t1;          /* the window, t1 > t0 */
} dvi_tt_layout;

/* Lays out v->tt (not NULL) in a w x h picture over the window [v->t0, v->t1] (the
 * whole timetable when that is empty or not finite). Needs no renderer or font. */
void dvi_tt_layout_compute(const dv_view *v, int w, int h, dvi_tt_layout *L);

/* The x of time t, as a double (t may lie far outside the window). */
static inline double dvi_tt_time_x(const dvi_tt_layout *L, double t)
{ return L->area.x + (t - L->t0) * L->area.w / (L->t1 - L->t0); }

/* ==== the rows (tt_rows.c) ==== */

/* Everything inside the rows (L->row > 0), in the order it overlaps: each row's name,
 * the lanes with faint lines at the axis' ticks[0..nticks), the blocks (other training
 * steps than v->tt_step faded), the cursor, the blocks' edges and labels, pp's arrows,
 * and the outline of the collective v->call picked. */
void dvi_tt_rows(SDL_Renderer *r, dv_text *t, const dv_view *v, const dvi_tt_layout *L,
                 const double *ticks, int nticks);

/* ==== the rows' marks (tt_rows.c), which the legend draws again ==== */

/* The colour of kind k in a block of another training step than the one shown: faded
 * into the lane, so that the step shown stands out where steps overlap (a pipeline's
 * stages start the next step while later stages finish this one). */
SDL_Color dvi_tt_faded(int k);

/* Diagonal lines "/" 5 px apart over b, on a grid fixed to the picture so that
 * neighbouring rectangles continue each other's lines. */
void dvi_tt_hatch(SDL_Renderer *r, SDL_Rect b, SDL_Color c);

/* A stage's model chunks (interleaved) are told apart by their label's letter and by a
 * shade: chunk j of kind k is k's colour darkened a step for each j mod DVI_TT_SHADES
 * (a, d, g.. as kind k; b, e.. one step darker; c, f.. two). */
#define DVI_TT_SHADES 3
SDL_Color dvi_tt_chunk_color(int k, int chunk);

/* The arrows' colours: the kind of block they come from, lightened so they show over it. */
SDL_Color dvi_tt_arrow_color(char what, Uint8 alpha);

/* A line from (xa, ya) to (xb, yb), dashed (4 on, 3 off) or not, with a head at b. */
void dvi_tt_arrow_line(SDL_Renderer *r, double xa, double ya, double xb, double yb,
                       int dashed, int head);

#endif /* DV_TT_DRAW_INTERNAL_H */
