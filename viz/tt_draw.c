/* Drawing the training timetable (timetable.h): the picture papers draw of a training
 * step (the GPipe and 1F1B figures, DDP's overlap of buckets with backward), e.g. GPipe
 * with P = 3 stages and M = 2 micro-batches, one slot per forward, two per backward:
 *
 *   pipeline parallel (pp)   schedule gpipe stages 3 micro 2        header: the mode,
 *   training step 1 (1 of 1)   window slots 0 to 12                  the step, the window,
 *   bubble 50% measured, 50% = (P-1)/(M+P-1) at P=3, M=2             its measures
 *   | stage 0  [F0][F1]            [B0  ][B1  ]   stash 2    compute lane, and at the
 *   |    comm     |   |            ^     ^                   cursor the activations held
 *   | stage 1     v[F0][F1]    [B0  ][B1  ]       stash 2    comm lane below (/// waiting)
 *   |    comm         |   |    ^     ^                       arrows: activations down,
 *   | stage 2         v[F0][F1][B0  ][B1  ]       stash 1    gradients up (dashed)
 *              0    2    4    6    8    10   12              time axis (ms or slots)
 *   [] forward [] backward ... [/] waiting for a peer [ ] idle          legend
 *   arrows: -> activations --> gradients   stash k: ...                (pp)
 *   <-/-> training step  +/- zoom ...                          the keys (or v->note)
 *
 * Idle time is the lane's plain background, so the bubble reads as empty. The window is
 * [v->t0, v->t1]: blocks are clipped to it, and a block narrower than a pixel still gets
 * one. Everything is a function of (model, view, size); tt_layout is the one place the
 * geometry comes from, for the drawing and for dv_tt_hit alike.
 *
 * Speed: a trace of 10^5 blocks. Blocks are grouped by rank and lane and ordered by t0,
 * so each lane binary-searches the window's start (less the longest block, so a long one
 * that begins before the window is not lost) and stops at its end; fills go to one
 * batch per colour (SDL_RenderFillRects), where a block that falls in the pixels of the
 * previous one of its colour widens it instead of adding a rectangle. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "draw.h"
#include "timetable.h"

/* The keys, as the bottom line says them (items two spaces apart; a narrow picture
 * keeps the first items that fit and the last one). dv_key_help has the whole list. */
static const char tt_keys[] = "\u2190/\u2192 training step  +/\u2212 zoom  drag or ,/. pan  "
                              "click a block: its collective  t: collective view  h: help";

/* ==== colours and sizes ==== */

/* draw.c's background, text, note and outline colours, so both views look alike, and
 * the lanes' own; the kinds' and the ranks' colours come from dv_kind_color and
 * dv_rank_color. */
static const SDL_Color BG = { 24, 26, 32, 255 }, LANE = { 38, 41, 50, 255 },
    GRID = { 48, 52, 62, 255 }, OUTLINE = { 92, 96, 108, 255 }, TEXT = { 222, 224, 230, 255 },
    DIM = { 150, 154, 166, 255 }, NOTE = { 255, 214, 102, 255 }, INK = { 16, 17, 22, 255 };

/* Line heights of draw.c's fonts (text.c: DejaVu Sans 10, 13, 16 pt): the layout needs
 * them without a font, since dv_tt_hit has none. */
enum { PAD = 8, SMALL_H = 13, BODY_H = 17, TITLE_H = 22 };
enum {
    HEADER_H = PAD / 2 + TITLE_H + 2 * BODY_H + 6,  /* title, step and window, measures */
    AXIS_H = 4 + SMALL_H + 3,                       /* ticks and their numbers */
    LEGEND_H = SMALL_H + 4,                         /* one line of the legend */
    ROW_MAX = 96,                                   /* a row's height at most */
    STASH_W = 64,                                   /* pp: "stash 12" right of the rows */
};

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static void set_color(SDL_Renderer *r, SDL_Color c)
{
    SDL_SetRenderDrawColor(r, c.r, c.g, c.b, c.a);
}

static void fill(SDL_Renderer *r, SDL_Color c, int x, int y, int w, int h)
{
    set_color(r, c);
    SDL_RenderFillRect(r, &(SDL_Rect){ x, y, w, h });
}

/* a + (b - a) f, channel by channel, opaque */
static SDL_Color mix(SDL_Color a, SDL_Color b, double f)
{
    return (SDL_Color){ (Uint8)(a.r + (b.r - a.r) * f), (Uint8)(a.g + (b.g - a.g) * f),
                        (Uint8)(a.b + (b.b - a.b) * f), 255 };
}

/* Dark ink on a light fill, light ink on a dark one. */
static SDL_Color ink_on(SDL_Color c)
{
    return 0.299 * c.r + 0.587 * c.g + 0.114 * c.b > 140 ? INK : (SDL_Color){ 246, 247, 250, 255 };
}

static SDL_Color kind_color(dv_tt_kind k)
{
    static const dv_color_kind ck[DV_TT_NKINDS] = {
        [DV_TT_FORWARD] = DV_C_FORWARD, [DV_TT_BACKWARD] = DV_C_BACKWARD,
        [DV_TT_OPTIMIZER] = DV_C_OPTIMIZER, [DV_TT_OTHER] = DV_C_COMPUTE, [DV_TT_COMM] = DV_C_COMM,
    };
    return dv_kind_color(k >= 0 && k < DV_TT_NKINDS ? ck[k] : DV_C_COMPUTE);
}

/* The arrows' colours: the kind of block they come from, lightened so they show over it. */
static SDL_Color arrow_color(char what, Uint8 alpha)
{
    SDL_Color c = mix(dv_kind_color(what == 'G' ? DV_C_BACKWARD : DV_C_FORWARD),
                      (SDL_Color){ 255, 255, 255, 255 }, 0.45);
    c.a = alpha;
    return c;
}

/* ==== layout: the one geometry of the drawing and of dv_tt_hit ==== */

typedef struct {
    int n;                  /* rows: one per rank (stage), 1..DV_MAX_RANKS */
    int pp;                 /* pp, or hybrid with stages: arrows, the stash column */
    int label_w;            /* the rows' names left of the lanes */
    SDL_Rect area;          /* the lanes: x..x+w is the window, y..y+h the n rows */
    int row;                /* a row's height: gap/2, compute lane, sep, comm lane, gap/2 */
    int gap, lc, sep, lm;
    int stash_x;            /* pp: x of each row's "stash k"; 0 none */
    int stage_rows;         /* rows are named "stage s" (pp) rather than "rank r" */
    int axis_y, legend_y, nlegend, keys_y;
    double t0, t1;          /* the window, t1 > t0 */
} tt_layout;

/* The legend's lines: the kinds on one (two when narrow); pp adds one for its arrows. */
static int legend_lines(int w, int pp)
{
    return (w >= 600 ? 1 : 2) + pp;
}

static void tt_layout_compute(const dv_view *v, int w, int h, tt_layout *L)
{
    const dv_tt *tt = v->tt;
    memset(L, 0, sizeof *L);
    L->n = clampi(tt->nranks, 1, DV_MAX_RANKS);
    L->pp = strcmp(tt->mode, "pp") == 0 || tt->stages > 1;   /* hybrid with stages too */
    L->stage_rows = strcmp(tt->mode, "pp") == 0;
    L->t0 = v->t0;
    L->t1 = v->t1;
    if (!(L->t1 > L->t0) || !isfinite(L->t0) || !isfinite(L->t1)) {   /* no window: all */
        L->t0 = tt->t_begin;
        L->t1 = tt->t_end > tt->t_begin ? tt->t_end : tt->t_begin + 1;
    }
    L->label_w = clampi(w / 8, 40, 84);
    int stash_w = L->pp && w >= 480 ? STASH_W : 0;
    L->area.x = PAD + L->label_w;
    L->area.w = w - L->area.x - PAD - stash_w;
    if (L->area.w < 1)
        L->area.w = 1;
    L->stash_x = stash_w > 0 ? L->area.x + L->area.w + 6 : 0;

    L->keys_y = h - BODY_H - 2;
    L->nlegend = legend_lines(w, L->pp);
    int avail = L->keys_y - 4 - L->nlegend * LEGEND_H - AXIS_H - (HEADER_H + 4);
    L->row = avail > 0 ? avail / L->n : 0;
    if (L->row > ROW_MAX)
        L->row = ROW_MAX;
    if (L->row >= 12) {                  /* room to part the rows and the lanes */
        L->gap = clampi(L->row / 6, 2, 14);
        L->sep = 1;
        L->lm = (L->row - L->gap - L->sep) * 2 / 5;
    } else {
        L->gap = L->row >= 6;
        L->lm = (L->row - L->gap) / 2;
    }
    L->lc = L->row - L->gap - L->sep - L->lm;
    L->area.y = HEADER_H + 4;
    L->area.h = L->row * L->n;
    L->axis_y = L->area.y + L->area.h + 2;
    L->legend_y = L->axis_y + AXIS_H + 2;
}

/* The top of rank q's compute lane and of its comm lane. */
static int lane_y(const tt_layout *L, int q, int lane)
{
    int y = L->area.y + q * L->row + L->gap / 2;
    return lane == 0 ? y : y + L->lc + L->sep;
}

static int lane_h(const tt_layout *L, int lane)
{
    return lane == 0 ? L->lc : L->lm;
}

/* The x of time t, as a double (t may lie far outside the window). */
static double time_x(const tt_layout *L, double t)
{
    return L->area.x + (t - L->t0) * L->area.w / (L->t1 - L->t0);
}

/* The pixels [*x0, *x1) of [t0, t1] clipped to the window, at least one wide; 0 when it
 * lies outside the window. */
static int span_px(const tt_layout *L, double t0, double t1, int *x0, int *x1)
{
    if (!(t1 >= L->t0 && t0 <= L->t1 && t1 >= t0))     /* false for NaN too */
        return 0;
    int right = L->area.x + L->area.w;
    double a = time_x(L, t0), b = time_x(L, t1);
    *x0 = a < L->area.x ? L->area.x : (int)a;
    *x1 = b > right ? right : (int)b;
    if (*x0 >= right)
        *x0 = right - 1;
    if (*x1 <= *x0)
        *x1 = *x0 + 1;
    return 1;
}

int dv_tt_hit(const dv_view *v, int w, int h, int x, int y, int *rank, int *lane, double *t)
{
    tt_layout L;
    if (v->tt == NULL)
        return 0;
    tt_layout_compute(v, w, h, &L);
    if (L.row <= 0 || x < L.area.x || x >= L.area.x + L.area.w || y < L.area.y ||
        y >= L.area.y + L.area.h)
        return 0;
    int q = (y - L.area.y) / L.row, l;
    for (l = 0; l < 2; l++)              /* on a lane: not in the gaps around it */
        if (y >= lane_y(&L, q, l) && y < lane_y(&L, q, l) + lane_h(&L, l))
            break;
    if (l == 2)
        return 0;
    *rank = q;
    *lane = l;
    *t = L.t0 + (x - L.area.x + 0.5) * (L.t1 - L.t0) / L.area.w;
    return 1;
}

/* ==== finding what the window shows ==== */

/* blocks: (rank, lane, t0) < key; waits: (rank, t0) < key; arrows: t0 < key */
static int block_before(const dv_tt *tt, int i, int rank, int lane, double t)
{
    const dv_tt_block *b = &tt->blocks[i];
    return b->rank != rank ? b->rank < rank : b->lane != lane ? b->lane < lane : b->t0 < t;
}

static int wait_before(const dv_tt *tt, int i, int rank, int lane, double t)
{
    (void)lane;
    return tt->waits[i].rank != rank ? tt->waits[i].rank < rank : tt->waits[i].t0 < t;
}

static int arrow_before(const dv_tt *tt, int i, int rank, int lane, double t)
{
    (void)rank; (void)lane;
    return tt->arrows[i].t0 < t;
}

typedef int (*tt_before)(const dv_tt *tt, int i, int rank, int lane, double t);

/* The first i in [lo, hi) that is not before (rank, lane, t): binary search. */
static int lower_bound(const dv_tt *tt, int lo, int hi, tt_before before, int rank, int lane,
                       double t)
{
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (before(tt, mid, rank, lane, t))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static double block_len(const dv_tt *tt, int i) { return tt->blocks[i].t1 - tt->blocks[i].t0; }
static double wait_len(const dv_tt *tt, int i) { return tt->waits[i].t1 - tt->waits[i].t0; }
static double arrow_len(const dv_tt *tt, int i) { return tt->arrows[i].t1 - tt->arrows[i].t0; }

/* The longest of n items: whatever begins before t - longest ends before t, so the
 * items that reach a window [t, ...] begin at or after that (one pass, ~0.1 ms for 10^5). */
static double longest(const dv_tt *tt, int n, double (*len)(const dv_tt *, int))
{
    double m = 0;
    for (int i = 0; i < n; i++)
        if (len(tt, i) > m)              /* false for NaN */
            m = len(tt, i);
    return m;
}

/* ==== batches: one colour, many rectangles, one call ==== */

enum { BATCH_N = 512 };

typedef struct {
    SDL_Color c;
    int fill;               /* 1 filled, 0 outlines */
    SDL_Color hatch;        /* alpha 0: none; else diagonal lines of this colour */
    int n;
    SDL_Rect box[BATCH_N];
} batch;

/* Diagonal lines "/" 5 px apart over b, on a grid fixed to the picture so that
 * neighbouring rectangles continue each other's lines. */
static void hatch(SDL_Renderer *r, SDL_Rect b, SDL_Color c)
{
    if (b.w < 3 || b.h < 5)
        return;
    set_color(r, c);
    int right = b.x + b.w - 1, bottom = b.y + b.h - 1;
    int k = b.x - b.h - 5;
    k -= ((k + b.y) % 5 + 5) % 5;
    for (; k <= right; k += 5) {         /* the line x - k = bottom - y */
        int xa = k, ya = bottom, xb = k + b.h - 1, yb = b.y;
        if (xa < b.x) {
            ya -= b.x - xa;
            xa = b.x;
        }
        if (xb > right) {
            yb += xb - right;
            xb = right;
        }
        if (xa <= xb)
            SDL_RenderDrawLine(r, xa, ya, xb, yb);
    }
}

static void batch_flush(SDL_Renderer *r, batch *b)
{
    if (b->n == 0)
        return;
    set_color(r, b->c);
    if (b->fill)
        SDL_RenderFillRects(r, b->box, b->n);
    else
        SDL_RenderDrawRects(r, b->box, b->n);
    for (int i = 0; b->hatch.a != 0 && i < b->n; i++)
        hatch(r, b->box[i], b->hatch);
    b->n = 0;
}

/* Adds q; a fill that starts inside the last one (same row) widens it instead. */
static void batch_add(SDL_Renderer *r, batch *b, SDL_Rect q)
{
    if (b->fill && b->n > 0) {
        SDL_Rect *p = &b->box[b->n - 1];
        if (p->y == q.y && p->h == q.h && q.x >= p->x && q.x <= p->x + p->w) {
            if (q.x + q.w > p->x + p->w)
                p->w = q.x + q.w - p->x;
            return;
        }
    }
    if (b->n == BATCH_N)
        batch_flush(r, b);
    b->box[b->n++] = q;
}

/* ==== the rows: lanes, blocks, waiting ==== */

/* The blocks of rank q's lane that may reach the window: [*i0, *i1), from those that
 * begin `reach` (the longest block) before it to those that begin at its end. */
static void lane_range(const dv_tt *tt, const tt_layout *L, double reach, int q, int lane,
                       int *i0, int *i1)
{
    int lo = lower_bound(tt, 0, tt->nblocks, block_before, q, lane, -INFINITY);
    int hi = lower_bound(tt, lo, tt->nblocks, block_before, q, lane + 1, -INFINITY);
    *i0 = lower_bound(tt, lo, hi, block_before, q, lane, L->t0 - reach);
    *i1 = lower_bound(tt, *i0, hi, block_before, q, lane, nextafter(L->t1, INFINITY));
}

/* The lanes' background (idle), with faint lines at the axis' ticks behind the blocks. */
static void draw_lanes(SDL_Renderer *r, const tt_layout *L, const double *ticks, int nticks)
{
    for (int q = 0; q < L->n; q++)
        for (int lane = 0; lane < 2; lane++)
            if (lane_h(L, lane) > 0)
                fill(r, LANE, L->area.x, lane_y(L, q, lane), L->area.w, lane_h(L, lane));
    if (L->row < 6)
        return;
    set_color(r, GRID);
    for (int i = 0; i < nticks; i++) {
        int x = (int)time_x(L, ticks[i]);
        for (int q = 0; q < L->n; q++)
            SDL_RenderDrawLine(r, x, lane_y(L, q, 0), x, lane_y(L, q, 1) + L->lm - 1);
    }
}

/* The colour of kind k in a block of another training step than the one shown: faded
 * into the lane, so that the step shown stands out where steps overlap (a pipeline's
 * stages start the next step while later stages finish this one). */
static SDL_Color faded(int k)
{
    return mix(kind_color(k), LANE, 0.65);
}

/* Every block's fill, one batch per kind (and per kind faded, for the blocks of other
 * steps than `step`); then the waiting stretches over the comm lane. */
static void draw_fills(SDL_Renderer *r, const dv_tt *tt, const tt_layout *L, double reach,
                       int step)
{
    batch b[2 * DV_TT_NKINDS + 1];
    for (int k = 0; k < DV_TT_NKINDS; k++) {
        b[k] = (batch){ .c = kind_color(k), .fill = 1 };
        b[DV_TT_NKINDS + 1 + k] = (batch){ .c = faded(k), .fill = 1 };
    }
    batch *wait = &b[DV_TT_NKINDS];
    wait->c = dv_kind_color(DV_C_WAIT);
    wait->hatch = mix(dv_kind_color(DV_C_WAIT), dv_kind_color(DV_C_COMM), 0.6);
    for (int q = 0; q < L->n; q++)
        for (int lane = 0; lane < 2; lane++) {
            int i0, i1, x0, x1, y = lane_y(L, q, lane), lh = lane_h(L, lane);
            if (lh <= 0)
                continue;
            lane_range(tt, L, reach, q, lane, &i0, &i1);
            for (int i = i0; i < i1; i++) {
                const dv_tt_block *k = &tt->blocks[i];
                int kind = k->kind >= 0 && k->kind < DV_TT_NKINDS ? k->kind : DV_TT_OTHER;
                if (span_px(L, k->t0, k->t1, &x0, &x1))
                    batch_add(r, &b[k->step == step ? kind : DV_TT_NKINDS + 1 + kind],
                              (SDL_Rect){ x0, y, x1 - x0, lh });
            }
        }
    for (int k = 0; k < DV_TT_NKINDS; k++) {
        batch_flush(r, &b[k]);
        batch_flush(r, &b[DV_TT_NKINDS + 1 + k]);
    }
    double wait_reach = longest(tt, tt->nwaits, wait_len);
    for (int q = 0; q < L->n && L->lm > 0; q++) {
        int lo = lower_bound(tt, 0, tt->nwaits, wait_before, q, 0, -INFINITY);
        int hi = lower_bound(tt, lo, tt->nwaits, wait_before, q + 1, 0, -INFINITY);
        int x0, x1;
        for (int i = lower_bound(tt, lo, hi, wait_before, q, 0, L->t0 - wait_reach);
             i < hi && tt->waits[i].t0 <= L->t1; i++)
            if (span_px(L, tt->waits[i].t0, tt->waits[i].t1, &x0, &x1))
                batch_add(r, wait, (SDL_Rect){ x0, lane_y(L, q, 1), x1 - x0, L->lm });
    }
    batch_flush(r, wait);
}

/* Text centred in box, in font f, when it fits; a 1 px halo of the fill keeps it
 * readable over the hatching of a wait. */
static void label_in(dv_text *t, dv_font f, SDL_Rect box, SDL_Color fillc, const char *s)
{
    int tw = dv_text_width(t, f, s), th = dv_text_height(t, f);
    int x = box.x + (box.w - tw) / 2, y = box.y + (box.h - th) / 2;
    if (tw + 4 > box.w || s[0] == '\0')
        return;
    for (int d = 0; d < 4; d++)
        dv_text_draw(t, f, x + (d == 0) - (d == 1), y + (d == 2) - (d == 3), fillc, s);
    dv_text_draw(t, f, x, y, ink_on(fillc), s);
}

/* Each block wide enough gets a darker edge (so F0 F1 F2 read as three blocks) and its
 * label where it fits; the picked collective's blocks go into hl, outlined last. */
static void draw_edges(SDL_Renderer *r, dv_text *t, const dv_tt *tt, const tt_layout *L,
                       double reach, int call, int step, batch *hl)
{
    batch e[DV_TT_NKINDS];
    for (int k = 0; k < DV_TT_NKINDS; k++)
        e[k] = (batch){ .c = mix(kind_color(k), BG, 0.55), .fill = 1 };
    for (int q = 0; q < L->n; q++)
        for (int lane = 0; lane < 2; lane++) {
            int i0, i1, x0, x1, y = lane_y(L, q, lane), lh = lane_h(L, lane);
            if (lh <= 0)
                continue;
            /* one font per lane, so that labels read alike: the compute lane's larger */
            dv_font f = lane == 0 && lh >= BODY_H + 6 ? DV_FONT_BODY : DV_FONT_SMALL;
            lane_range(tt, L, reach, q, lane, &i0, &i1);
            int label_end = INT_MIN;       /* blocks can overlap (hybrid: a bucket beside
                                            * a pipeline message): no label over another */
            for (int i = i0; i < i1; i++) {
                const dv_tt_block *k = &tt->blocks[i];
                if (!span_px(L, k->t0, k->t1, &x0, &x1))
                    continue;
                int kind = k->kind >= 0 && k->kind < DV_TT_NKINDS ? k->kind : DV_TT_OTHER;
                if (call >= 0 && k->call == call) {
                    batch_add(r, hl, (SDL_Rect){ x0 - 2, y - 2, x1 - x0 + 4, lh + 4 });
                    batch_add(r, hl, (SDL_Rect){ x0 - 1, y - 1, x1 - x0 + 2, lh + 2 });
                }
                if (x1 - x0 < 3)
                    continue;
                /* a dark line where it begins inside the window, and where it ends
                 * when it is wide: neighbours (F0 F1 F2) part by a line */
                if (time_x(L, k->t0) >= L->area.x)
                    batch_add(r, &e[kind], (SDL_Rect){ x0, y, 1, lh });
                if (x1 - x0 >= 6 && time_x(L, k->t1) <= L->area.x + L->area.w)
                    batch_add(r, &e[kind], (SDL_Rect){ x1 - 1, y, 1, lh });
                if (x1 - x0 >= 8 && lh >= SMALL_H - 2 && x0 >= label_end) {
                    label_in(t, f, (SDL_Rect){ x0 + 1, y, x1 - x0 - 2, lh },
                             k->step == step ? kind_color(kind) : faded(kind), k->label);
                    label_end = x1;
                }
            }
        }
    for (int k = 0; k < DV_TT_NKINDS; k++)
        batch_flush(r, &e[k]);
}

/* ==== pp's arrows ==== */

/* A line from (xa, ya) to (xb, yb), dashed (4 on, 3 off) or not, with a head at b. */
static void arrow_line(SDL_Renderer *r, double xa, double ya, double xb, double yb, int dashed,
                       int head)
{
    double dx = xb - xa, dy = yb - ya, len = sqrt(dx * dx + dy * dy);
    if (len < 1) {
        SDL_RenderDrawPoint(r, (int)xb, (int)yb);
        return;
    }
    double ux = dx / len, uy = dy / len;
    if (!dashed)
        SDL_RenderDrawLine(r, (int)xa, (int)ya, (int)xb, (int)yb);
    for (double s = 0; dashed && s < len; s += 7) {
        double e = s + 4 < len ? s + 4 : len;
        SDL_RenderDrawLine(r, (int)(xa + ux * s), (int)(ya + uy * s), (int)(xa + ux * e),
                           (int)(ya + uy * e));
    }
    if (head && len >= 8) {
        double hx = xb - ux * 5, hy = yb - uy * 5;
        SDL_RenderDrawLine(r, (int)xb, (int)yb, (int)(hx - uy * 3), (int)(hy + ux * 3));
        SDL_RenderDrawLine(r, (int)xb, (int)yb, (int)(hx + uy * 3), (int)(hy - ux * 3));
    }
}

/* From the sender's compute lane at t0 to the receiver's at t1, clipped to the window:
 * activations ('A') solid, gradients ('G') dashed; lighter when there are many. */
static void draw_arrows(SDL_Renderer *r, const dv_tt *tt, const tt_layout *L)
{
    if (tt->narrows <= 0 || L->row < 2)
        return;
    double reach = longest(tt, tt->narrows, arrow_len);
    int first = lower_bound(tt, 0, tt->narrows, arrow_before, 0, 0, L->t0 - reach);
    int end = lower_bound(tt, first, tt->narrows, arrow_before, 0, 0, nextafter(L->t1, INFINITY));
    int nvis = 0, last[DV_MAX_RANKS][2][2];
    for (int k = first; k < end; k++)
        nvis += tt->arrows[k].t1 >= L->t0;
    int many = nvis > L->area.w / 10;
    for (int q = 0; q < L->n; q++)      /* the pixels each sender's last arrow took */
        last[q][0][0] = last[q][1][0] = -1;
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_BLEND);
    for (int k = first; k < end; k++) {
        const dv_tt_arrow *a = &tt->arrows[k];
        if (!(a->t1 >= L->t0 && a->t0 <= L->t1 && a->t1 >= a->t0) || a->src < 0 ||
            a->src >= L->n || a->dst < 0 || a->dst >= L->n || a->src == a->dst)
            continue;
        int down = a->dst > a->src;
        double ya = down ? lane_y(L, a->src, 0) + L->lc - 1 : lane_y(L, a->src, 0);
        double yb = down ? lane_y(L, a->dst, 0) : lane_y(L, a->dst, 0) + L->lc - 1;
        double xa = time_x(L, a->t0), xb = time_x(L, a->t1);
        double lo = L->area.x, hi = L->area.x + L->area.w - 1;
        if (xb - xa > 0.5) {             /* clip the line to the window, by x */
            double sa = xa < lo ? (lo - xa) / (xb - xa) : 0, sb = xb > hi ? (hi - xa) / (xb - xa) : 1;
            double ya2 = ya + (yb - ya) * sa, yb2 = ya + (yb - ya) * sb;
            double xa2 = xa + (xb - xa) * sa, xb2 = xa + (xb - xa) * sb;
            xa = xa2, xb = xb2, ya = ya2, yb = yb2;
        }
        int *seen = last[a->src][a->what == 'G'], whole = time_x(L, a->t1) <= hi + 0.5;
        if (seen[0] == (int)xa && seen[1] == (int)xb)
            continue;                    /* another one in the same pixels */
        seen[0] = (int)xa;
        seen[1] = (int)xb;
        set_color(r, arrow_color(a->what, many ? 80 : 230));
        arrow_line(r, xa, ya, xb, yb, a->what == 'G', whole && !many);
    }
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
}

/* ==== header, axis, legend, bottom line ==== */

/* The mode in words, for the title. */
static const char *mode_name(const char *mode)
{
    static const char *const names[][2] = {
        { "pp", "pipeline parallel" }, { "ddp", "distributed data parallel" },
        { "fsdp", "fully sharded data parallel" }, { "tp", "tensor parallel" },
        { "dp", "data parallel" }, { "hybrid", "hybrid parallel" },
        { "moe", "mixture of experts" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(mode, names[i][0]) == 0)
            return names[i][1];
    return NULL;
}

/* Display units: ms since the trace's first block, or slots (a built-in schedule). */
static double unit_scale(const dv_model *m)
{
    return m->from_trace ? 1e3 : 1;
}

static double unit_base(const dv_model *m, const dv_tt *tt)
{
    return m->from_trace ? tt->t_begin : 0;
}

/* Decimals enough to tell values `step` apart. */
static int decimals(double step)
{
    return step >= 1 || !(step > 0) ? 0 : clampi((int)ceil(-log10(step) - 1e-9), 0, 9);
}

static void draw_header(dv_text *t, const dv_model *m, const dv_view *v, const tt_layout *L,
                        int w)
{
    const dv_tt *tt = v->tt;
    char s[320], win[96];
    const char *name = mode_name(tt->mode);
    if (tt->mode[0] == '\0')
        snprintf(s, sizeof s, "%s", m->title);
    else if (name != NULL)
        snprintf(s, sizeof s, "%s (%s)   %s", name, tt->mode, tt->settings);
    else
        snprintf(s, sizeof s, "%s   %s", tt->mode, tt->settings);
    dv_font tf = dv_text_width(t, DV_FONT_TITLE, s) <= w - 2 * PAD ? DV_FONT_TITLE : DV_FONT_BODY;
    dv_text_draw(t, tf, PAD, PAD / 2, TEXT, s);

    dv_font f = w >= 700 ? DV_FONT_BODY : DV_FONT_SMALL;
    int y = PAD / 2 + TITLE_H;
    double k = unit_scale(m), base = unit_base(m, tt), a = (L->t0 - base) * k,
        b = (L->t1 - base) * k;
    int d = decimals((b - a) / 50);
    if (m->from_trace)
        snprintf(win, sizeof win, "window %.*f to %.*f ms", d, a, d, b);
    else
        snprintf(win, sizeof win, "window slots %.*f to %.*f (a forward takes 1 slot, a "
                 "backward 2)", d, a, d, b);
    int x = PAD;
    if (tt->nsteps > 0) {
        int st = clampi(v->tt_step, 0, tt->nsteps - 1);
        snprintf(s, sizeof s, "training step %d (%d of %d)", tt->steps[st].step, st + 1,
                 tt->nsteps);
        x += dv_text_draw(t, f, x, y, TEXT, s) + 24;
        dv_text_draw(t, f, x, y, DIM, win);
        dv_tt_describe_step(tt, st, s, sizeof s);
        dv_text_draw(t, f, PAD, y + BODY_H, TEXT, s);
    } else {
        x += dv_text_draw(t, f, x, y, TEXT, "no training steps in this trace") + 24;
        dv_text_draw(t, f, x, y, DIM, win);
    }
}

/* The round numbers (1, 2 or 5 times a power of ten; whole slots for a schedule) at
 * least ~90 px apart in the window, as times, into ticks[0..max-1]; returns how many. */
static int axis_ticks(const dv_model *m, const dv_tt *tt, const tt_layout *L, double *ticks,
                      int max, double *step_out)
{
    double k = unit_scale(m), base = unit_base(m, tt);
    double a = (L->t0 - base) * k, b = (L->t1 - base) * k;
    double raw = (b - a) * 90 / (L->area.w > 0 ? L->area.w : 1);
    double p = pow(10, floor(log10(raw)));
    if (!(raw > 0) || !isfinite(p) || !(p > 0))
        return 0;
    double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    if (!m->from_trace && step < 1)
        step = 1;
    *step_out = step;
    int n = 0;
    for (double u = ceil(a / step) * step; u <= b + step * 1e-9 && n < max; u += step)
        ticks[n++] = u / k + base;
    return n;
}

static void draw_axis(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_tt *tt,
                      const tt_layout *L, const double *ticks, int nticks, double step)
{
    char s[48];
    int y = L->axis_y, right = -1000;
    double k = unit_scale(m), base = unit_base(m, tt);
    fill(r, OUTLINE, L->area.x, y, L->area.w, 1);
    dv_text_draw(t, DV_FONT_SMALL, PAD, y + 3, DIM, m->from_trace ? "time, ms" : "slot");
    for (int i = 0; i < nticks; i++) {
        int x = (int)time_x(L, ticks[i]);
        double u = (ticks[i] - base) * k;
        fill(r, OUTLINE, x, y, 1, 4);
        snprintf(s, sizeof s, "%.*f", decimals(step), fabs(u) < step * 1e-6 ? 0.0 : u);
        int tw = dv_text_width(t, DV_FONT_SMALL, s), lx = clampi(x - tw / 2, L->area.x - 4,
                                                                 L->area.x + L->area.w - tw);
        if (lx > right + 6)
            right = lx + dv_text_draw(t, DV_FONT_SMALL, lx, y + 4, DIM, s);
    }
}

/* The cursor, a line down the rows; pp: each stage's stashed activations there. */
static void draw_cursor(SDL_Renderer *r, dv_text *t, const dv_view *v, const tt_layout *L)
{
    char s[32];
    if (!(v->cursor >= L->t0 && v->cursor <= L->t1) || L->row <= 0)
        return;
    int x = clampi((int)time_x(L, v->cursor), L->area.x, L->area.x + L->area.w - 1);
    fill(r, TEXT, x, L->area.y - 3, 1, L->area.h + 3 + 5);
    fill(r, TEXT, x - 2, L->axis_y + 1, 5, 2);
    if (!L->pp || L->stash_x == 0 || L->row < SMALL_H - 1)
        return;
    for (int q = 0; q < L->n; q++) {
        snprintf(s, sizeof s, "stash %d", dv_tt_stash(v->tt, q, v->cursor));
        int y = L->row >= 24 ? lane_y(L, q, 0) + (L->lc - SMALL_H) / 2
                             : L->area.y + q * L->row + (L->row - SMALL_H) / 2;
        dv_text_draw(t, DV_FONT_SMALL, L->stash_x, y, TEXT, s);
    }
}

/* Each row's name ("stage s" or "rank r") beside a swatch of the rank's colour, and
 * where the rows are tall, "comm" beside the lower lane. Small rows: every k-th name. */
static void draw_row_names(SDL_Renderer *r, dv_text *t, const tt_layout *L)
{
    char s[32];
    if (L->row <= 0)
        return;
    int every = L->row >= SMALL_H ? 1 : (SMALL_H + L->row - 1) / L->row;
    for (int q = 0; q < L->n; q++) {
        int y = L->area.y + q * L->row + L->gap / 2, hh = L->row - L->gap;
        fill(r, dv_rank_color(q), PAD, y, 4, hh > 0 ? hh : 1);
        if (q % every != 0)
            continue;
        dv_font f = L->lc >= BODY_H ? DV_FONT_BODY : DV_FONT_SMALL;
        snprintf(s, sizeof s, "%s %d", L->stage_rows ? "stage" : "rank", q);
        if (PAD + 8 + dv_text_width(t, f, s) > L->area.x - 2)
            snprintf(s, sizeof s, "%d", q);
        int ty = L->lc >= SMALL_H ? y + (L->lc - dv_text_height(t, f)) / 2
                                  : L->area.y + q * L->row + (L->row - SMALL_H) / 2;
        dv_text_draw(t, f, PAD + 8, ty, TEXT, s);
        if (L->lm >= SMALL_H - 1)
            dv_text_draw(t, DV_FONT_SMALL, PAD + 8, lane_y(L, q, 1) + (L->lm - SMALL_H) / 2, DIM,
                         "comm");
    }
}

/* One legend item: a swatch sw px wide and its name, on the next line when it does not
 * fit on this one (and the legend has one more). Returns the swatch's x. */
static int legend_item(dv_text *t, const tt_layout *L, int *x, int *y, int w, int sw,
                       const char *name)
{
    int need = sw + 4 + dv_text_width(t, DV_FONT_SMALL, name) + 14;
    if (*x + need > w - PAD && *x > PAD && *y + LEGEND_H < L->legend_y + L->nlegend * LEGEND_H) {
        *x = PAD;
        *y += LEGEND_H;
    }
    dv_text_draw(t, DV_FONT_SMALL, *x + sw + 4, *y, DIM, name);
    int sx = *x;
    *x += need;
    return sx;
}

/* The kinds' swatches (waiting hatched as in the lanes, idle the lanes' background);
 * pp adds a line: the arrows' two styles, and what "stash k" counts. */
static void draw_legend(SDL_Renderer *r, dv_text *t, const tt_layout *L, int w)
{
    static const struct { const char *name; int kind; } items[] = {
        { "forward", DV_C_FORWARD }, { "backward", DV_C_BACKWARD },
        { "optimizer", DV_C_OPTIMIZER }, { "other compute", DV_C_COMPUTE },
        { "communication", DV_C_COMM }, { "waiting for a peer", DV_C_WAIT },
        { "idle", -1 }, { "faded: another training step", -2 },
    };
    static const struct { const char *name; char what; } arrows[] = {
        { "activations", 'A' }, { "gradients", 'G' },
    };
    int x = PAD, y = L->legend_y;
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        SDL_Rect sw = { legend_item(t, L, &x, &y, w, 10, items[i].name), y + 2, 10, 10 };
        if (items[i].kind == -2) {        /* faded: as draw_fills fades a backward */
            fill(r, faded(DV_TT_BACKWARD), sw.x, sw.y, sw.w, sw.h);
            continue;
        }
        if (items[i].kind < 0) {
            fill(r, LANE, sw.x, sw.y, sw.w, sw.h);
            set_color(r, OUTLINE);
            SDL_RenderDrawRect(r, &sw);
            continue;
        }
        fill(r, dv_kind_color(items[i].kind), sw.x, sw.y, sw.w, sw.h);
        if (items[i].kind == DV_C_WAIT)
            hatch(r, sw, mix(dv_kind_color(DV_C_WAIT), dv_kind_color(DV_C_COMM), 0.6));
    }
    if (!L->pp)
        return;
    x = PAD;
    y = L->legend_y + (L->nlegend - 1) * LEGEND_H;
    x += dv_text_draw(t, DV_FONT_SMALL, x, y, DIM, "arrows:") + 6;
    for (int i = 0; i < 2; i++) {
        int sx = legend_item(t, L, &x, &y, w, 22, arrows[i].name);
        set_color(r, arrow_color(arrows[i].what, 255));
        arrow_line(r, sx, y + 7, sx + 21, y + 7, arrows[i].what == 'G', 1);
    }
    const char *stash = "stash k: the activations of k micro-batches held at the cursor";
    if (L->stash_x > 0 && x + 10 + dv_text_width(t, DV_FONT_SMALL, stash) <= w - PAD)
        dv_text_draw(t, DV_FONT_SMALL, x + 10, y, DIM, stash);
}

/* The keys, in the small font; too wide for w, the first items that fit and the last. */
static void draw_keys(dv_text *t, int y, int w)
{
    const char *item[16];
    int len[16], n = 0;
    for (const char *p = tt_keys; n < 16;) {
        const char *e = strstr(p, "  ");
        item[n] = p;
        len[n++] = e != NULL ? (int)(e - p) : (int)strlen(p);
        if (e == NULL)
            break;
        p = e + 2;
    }
    char s[sizeof tt_keys];
    for (int k = n - 1; k >= 0; k--) {   /* items 0..k-1, then the last one */
        int o = 0;
        for (int i = 0; i < k && i < n - 1; i++)
            o += snprintf(s + o, sizeof s - (size_t)o, "%.*s  ", len[i], item[i]);
        snprintf(s + o, sizeof s - (size_t)o, "%.*s", len[n - 1], item[n - 1]);
        if (dv_text_width(t, DV_FONT_SMALL, s) <= w - 2 * PAD)
            break;
    }
    dv_text_draw(t, DV_FONT_SMALL, PAD, y + 2, DIM, s);
}

/* ==== the picture ==== */

void dv_tt_draw(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_view *v, int w, int h)
{
    const dv_tt *tt = v->tt;
    tt_layout L;
    double ticks[64], step = 1;
    tt_layout_compute(v, w, h, &L);
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
    set_color(r, BG);
    SDL_RenderClear(r);
    draw_header(t, m, v, &L, w);
    int nticks = L.area.w > 1 ? axis_ticks(m, tt, &L, ticks, 64, &step) : 0;
    if (L.row > 0) {
        batch hl = { .c = NOTE, .fill = 0 };
        draw_row_names(r, t, &L);
        draw_lanes(r, &L, ticks, nticks);
        double reach = longest(tt, tt->nblocks, block_len);
        int shown = v->tt_step >= 0 && v->tt_step < tt->nsteps ? tt->steps[v->tt_step].step
                                                                : INT_MIN;
        draw_fills(r, tt, &L, reach, shown);
        draw_cursor(r, t, v, &L);        /* under the labels and arrows */
        draw_edges(r, t, tt, &L, reach, v->call, shown, &hl);
        if (L.pp)
            draw_arrows(r, tt, &L);
        batch_flush(r, &hl);
        draw_axis(r, t, m, tt, &L, ticks, nticks, step);
        draw_legend(r, t, &L, w);
    }
    if (v->note != NULL)
        dv_text_draw(t, DV_FONT_BODY, PAD, h - BODY_H - 1, NOTE, v->note);
    else
        draw_keys(t, L.keys_y, w);
    if (v->help)
        dv_draw_help(r, t, w, h);
}
