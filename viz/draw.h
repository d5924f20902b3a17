/* Drawing a dv_model with an SDL_Renderer: the same code for the window, the headless
 * PNG (a software renderer on a surface) and the tests, which read pixels back.
 *
 * The picture at a position, top to bottom:
 *   header    title; where the position is (dv_pos_describe: "position 3 of 0..6: call
 *             1 of 1, allreduce_ring on ranks 0-3: 3 of 6 steps done, next: step 4 of 6
 *             (allgather)"); one sentence on that next step, or on what the call did
 *             (dv_step_text)
 *   grid      one row per rank: "rank r", then its cells, each filled with vertical
 *             stripes in the colours of the ranks whose contributions it holds (in rank
 *             order, equal widths; an empty cell is dark with an outline). Ranks outside
 *             the call's communicator are dimmed, without cells. Alltoall shows two
 *             buffers: each rank's send buffer on the left (block j in the rank's colour,
 *             labelled with j, the rank it is for) and its receive buffer on the right.
 *             Ring attention (model.h) shows each rank's K/V in hand (the block in its
 *             owner's colour, the rest empty) and on the right its output: a cell per
 *             key block, empty until the rank's queries have attended it, then in the
 *             block owner's colour, whole (every pair), a lower triangle (the causal
 *             mask hides some: the diagonal block) or crossed out (all masked: nothing
 *             computed); the block being attended next is outlined white
 *   arrows    the messages of frame k, sender's row to receiver's row (alltoall: from
 *             the sender's send block to the receiver's receive block); solid white: the
 *             receiver copies what comes, dashed grey with a '+': it adds it in. The
 *             label names the receiver's cells, "c0-2" = cells c0 to c2, and "3->1" the
 *             ranks when they are not neighbours, then the transport where the trace
 *             records one ("c0-2 shm"); while the position moves between k and
 *             k+1 a copy of each moving piece slides along its arrow
 *   panel     bytes sent per rank in this call so far, beside the formula's total
 *   timeline  one row per rank over the trace's time (compute, comm, reduce), with a
 *             cursor at the position's time; a click there jumps (dv_timeline_pos)
 *   help      with the help overlay on: every key and what it does
 * What is drawn depends only on the view below: stepping back is exact. */
#ifndef DV_DRAW_H
#define DV_DRAW_H

#include <SDL.h>

#include "model.h"

/* ==== text: SDL2_ttf with a real font ==== */

typedef struct dv_text dv_text;

/* Opens the font (path NULL: $DTVIZ_FONT, else DejaVu Sans from fonts-dejavu-core) for
 * renderer r. Returns NULL with a sentence in err when no font can be opened. */
dv_text *dv_text_open(SDL_Renderer *r, const char *path, char *err, size_t errlen);
void dv_text_close(dv_text *t);

/* Three sizes, each rendered once into a glyph atlas (ASCII and a few symbols such as
 * "×" and "→"; anything else shows as '?'), so drawing a string is one texture copy per
 * glyph and never calls SDL_ttf after dv_text_open. */
typedef enum { DV_FONT_SMALL, DV_FONT_BODY, DV_FONT_TITLE, DV_NFONTS } dv_font;

/* Draws UTF-8 s with its top-left corner at (x, y) in colour c; returns its width. */
int dv_text_draw(dv_text *t, dv_font f, int x, int y, SDL_Color c, const char *s);
int dv_text_width(const dv_text *t, dv_font f, const char *s);
int dv_text_height(const dv_text *t, dv_font f);     /* one line, in pixels */

/* ==== colours (style.c) and layout ==== */

/* The colour of rank r (0..DV_MAX_RANKS-1): distinct for every r, opaque. */
SDL_Color dv_rank_color(int r);

/* The colours of what is not a rank: event kinds (the timeline, the timetable's
 * blocks) and arrows. None of them is close to any rank's colour, so a rank's colour
 * always means that rank. */
typedef enum {
    DV_C_FORWARD, DV_C_BACKWARD, DV_C_OPTIMIZER, DV_C_COMPUTE,   /* compute */
    DV_C_WEIGHTS,                       /* compute: zb-h1's W, the weights' gradient */
    DV_C_SEND, DV_C_RECV, DV_C_REDUCE, DV_C_STAGE,               /* the timeline's comm */
    DV_C_COMM, DV_C_WAIT,                                        /* the timetable's comm */
    DV_C_COPY_ARROW, DV_C_ADD_ARROW,                             /* the grid's arrows */
    DV_C_N
} dv_color_kind;
SDL_Color dv_kind_color(dv_color_kind k);

typedef struct {
    int w, h;                      /* the whole picture */
    SDL_Rect header, grid, panel, timeline;
    int call;                      /* whose cells the grid shows; -1 none */
    int ncells;
    int row_h, cell_w;             /* grid geometry */
    int cell_x0;                   /* x of cell 0 (alltoall: of the receive buffer) */
    int send_x0;                   /* alltoall: x of the send buffer's cell 0; else 0 */
    int out_x0;                    /* ring attention: x of the output's cell 0; else 0 */
} dv_layout;

/* Lays out a w x h picture of m at position pos. */
void dv_layout_compute(const dv_model *m, int pos, int w, int h, dv_layout *L);

/* The rectangle of cell c of rank r in the grid (filled area, outline excluded). */
SDL_Rect dv_layout_cell(const dv_layout *L, int r, int c);
/* The same in the send buffer, where the grid shows one (L->send_x0 > 0: alltoall). */
SDL_Rect dv_layout_send_cell(const dv_layout *L, int r, int c);
/* The same in ring attention's output (L->out_x0 > 0). */
SDL_Rect dv_layout_out_cell(const dv_layout *L, int r, int c);

/* The position a click at (x, y) asks for, or -1 when it is not on the timeline. */
int dv_timeline_pos(const dv_model *m, const dv_layout *L, int x, int y);

/* ==== drawing ==== */

/* The timeline drawn once into a texture and copied each frame (a training trace holds
 * 10^4-10^5 events). Redrawn when the renderer, the model or the timeline's size
 * changes; dv_cache_clear forces it (call it after rebuilding a model in place). */
typedef struct dv_cache dv_cache;
dv_cache *dv_cache_new(void);                  /* NULL when out of memory */
void dv_cache_clear(dv_cache *c);
void dv_cache_free(dv_cache *c);

struct dv_tt;                      /* timetable.h */

typedef struct {
    double pos;                    /* 0 .. npos-1; the fraction slides the moving pieces */
    int help;                      /* draw the key overlay */
    int playing;
    double speed;                  /* steps per second, for the header; 0 hides it */
    const char *note;              /* one line at the bottom, or NULL */
    dv_cache *cache;               /* NULL: the timeline is drawn directly */
    /* the training timetable (timetable.h): drawn instead of the grid when tt != NULL */
    const struct dv_tt *tt;
    int tt_step;                   /* index into tt->steps of the step shown */
    double t0, t1;                 /* the time window shown (zoom and pan), t1 > t0 */
    double cursor;                 /* a time marked with a line (pp: the stash there);
                                    * outside [t0, t1]: none */
    int call;                      /* a collective call picked in the timetable, drawn
                                    * highlighted; -1 none */
    const char *context;           /* the collective view of a training trace: what the
                                    * call was for ("training step 2, bucket 1"), put
                                    * before the title; NULL none */
} dv_view;

/* The keys, {key, what it does} pairs ending with {NULL, NULL}: the help overlay and
 * dtviz's usage both list them from here (style.c). */
extern const char *const dv_key_help[][2];

/* Where position pos is, in one line, with the counters of model.h: "position 3 of 0..6:
 * call 1 of 1, allreduce_ring on ranks 0-3: 3 of 6 steps done, next: step 4 of 6
 * (allgather)", at the end of a call "... 6 of 6 steps done, call finished", without
 * calls "position 0 of 0..0: no collective calls". When the next step's messages
 * recorded their transports, the line ends with them: "... (allgather) via shm" (two:
 * "via mpi+shm"). The header, dtviz --png and dtviz --verbose all say where they are
 * with it. */
void dv_pos_describe(const dv_model *m, int pos, char *buf, size_t len);

/* ==== the training timetable (tt_draw.c; the layout and the rows: tt_rows.c) ==== */

/* Draws v->tt: header (the mode and its settings, the training step k of S, the step's
 * measures beside their models), one row per rank with a compute lane and a comm lane
 * over [v->t0, v->t1], waiting drawn apart from moving bytes, pp's messages as arrows
 * between rows, a time axis, the cursor (pp: each stage's stashed activations there),
 * the legend. dv_draw calls it when v->tt != NULL. */
void dv_tt_draw(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_view *v, int w, int h);

/* What a click at (x, y) on a w x h timetable hits: returns 1 and the rank, the lane
 * (0 compute, 1 comm) and the time under it, or 0 when (x, y) is on no lane (outside
 * the rows, or in the gap between two lanes). Needs no renderer: the layout is a
 * function of w, h, v->tt and the window. */
int dv_tt_hit(const dv_view *v, int w, int h, int x, int y, int *rank, int *lane, double *t);

/* The help overlay (every key of dv_key_help), centred on a w x h picture: dv_draw and
 * dv_tt_draw draw it last when v->help is on (style.c). */
void dv_draw_help(SDL_Renderer *r, dv_text *t, int w, int h);

/* Draws the whole picture into r's current target, w x h. */
void dv_draw(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_view *v, int w, int h);

/* Headless: draws position pos into a new w x h surface with a software renderer (no
 * display, no SDL video) and returns it, or NULL with a sentence in err. The caller
 * frees it with SDL_FreeSurface. */
SDL_Surface *dv_render_surface(const dv_model *m, const dv_view *v, int w, int h,
                               char *err, size_t errlen);

/* dv_render_surface, then a PNG into path, every write checked (a full disk is an
 * error, and the half-written file is removed). Returns 0, or -1 with err. */
int dv_render_png(const dv_model *m, const dv_view *v, int w, int h, const char *path,
                  char *err, size_t errlen);

#endif /* DV_DRAW_H */
