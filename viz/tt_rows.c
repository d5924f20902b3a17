/* The training timetable's rows (tt_draw.c has the picture and draws what frames the
 * rows): the layout, and in each rank's row its name, a compute lane and a comm lane
 * with their blocks and waiting, pp's arrows between the rows, and the cursor.
 *
 * dvi_tt_layout_compute is the one place the geometry comes from, for the drawing and
 * for dv_tt_hit alike. Idle time is the lane's plain background, so the bubble reads as
 * empty. The window is [v->t0, v->t1]: blocks are clipped to it, and a block narrower
 * than a pixel still gets one.
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

#include "tt_draw_internal.h"

/* ==== colours ==== */

SDL_Color dvi_mix(SDL_Color a, SDL_Color b, double f)
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
        [DV_TT_WEIGHTS] = DV_C_WEIGHTS,
    };
    return dv_kind_color(k >= 0 && k < DV_TT_NKINDS ? ck[k] : DV_C_COMPUTE);
}

SDL_Color dvi_tt_chunk_color(int k, int chunk)
{
    SDL_Color c = kind_color(k);
    return chunk > 0 ? dvi_mix(c, BG, 0.22 * (chunk % DVI_TT_SHADES)) : c;
}

SDL_Color dvi_tt_arrow_color(char what, Uint8 alpha)
{
    SDL_Color c = dvi_mix(dv_kind_color(what == 'G' ? DV_C_BACKWARD : DV_C_FORWARD),
                          (SDL_Color){ 255, 255, 255, 255 }, 0.45);
    c.a = alpha;
    return c;
}

/* ==== layout: the one geometry of the drawing and of dv_tt_hit ==== */

/* The legend's lines: the kinds on one (two when narrow); pp adds one for its arrows. */
static int legend_lines(int w, int pp)
{
    return (w >= 600 ? 1 : 2) + pp;
}

void dvi_tt_layout_compute(const dv_view *v, int w, int h, dvi_tt_layout *L)
{
    const dv_tt *tt = v->tt;
    memset(L, 0, sizeof *L);
    L->n = dvi_clampi(tt->nrows, 1, DVI_TT_MAX_ROWS);
    L->head = HEADER_H + (tt->disagree[0] ? BODY_H : 0);   /* a line for the mismatch */
    L->pp = strcmp(tt->mode, "pp") == 0 || tt->stages > 1;   /* hybrid with stages too */
    L->stage_rows = strcmp(tt->mode, "pp") == 0;
    L->t0 = v->t0;
    L->t1 = v->t1;
    if (!(L->t1 > L->t0) || !isfinite(L->t0) || !isfinite(L->t1)) {   /* no window: all */
        L->t0 = tt->t_begin;
        L->t1 = tt->t_end > tt->t_begin ? tt->t_end : tt->t_begin + 1;
    }
    L->label_w = dvi_clampi(w / 8, 40, 84);
    int stash_w = L->pp && w >= 480 ? STASH_W : 0;
    L->area.x = PAD + L->label_w;
    L->area.w = w - L->area.x - PAD - stash_w;
    if (L->area.w < 1)
        L->area.w = 1;
    L->stash_x = stash_w > 0 ? L->area.x + L->area.w + 6 : 0;

    L->keys_y = h - BODY_H - 2;
    L->nlegend = legend_lines(w, L->pp);
    int avail = L->keys_y - 4 - L->nlegend * LEGEND_H - AXIS_H - (L->head + 4);
    L->row = avail > 0 ? avail / L->n : 0;
    if (L->row > ROW_MAX)
        L->row = ROW_MAX;
    if (L->row >= 12) {                  /* room to part the rows and the lanes */
        L->gap = dvi_clampi(L->row / 6, 2, 14);
        L->sep = 1;
        L->lm = (L->row - L->gap - L->sep) * 2 / 5;
    } else {
        L->gap = L->row >= 6;
        L->lm = (L->row - L->gap) / 2;
    }
    L->lc = L->row - L->gap - L->sep - L->lm;
    L->area.y = L->head + 4;
    L->area.h = L->row * L->n;
    L->axis_y = L->area.y + L->area.h + 2;
    L->legend_y = L->axis_y + AXIS_H + 2;
}

/* The top of rank q's compute lane and of its comm lane. */
static int lane_y(const dvi_tt_layout *L, int q, int lane)
{
    int y = L->area.y + q * L->row + L->gap / 2;
    return lane == 0 ? y : y + L->lc + L->sep;
}

static int lane_h(const dvi_tt_layout *L, int lane)
{
    return lane == 0 ? L->lc : L->lm;
}


/* The pixels [*x0, *x1) of [t0, t1] clipped to the window, at least one wide; 0 when it
 * lies outside the window. */
static int span_px(const dvi_tt_layout *L, double t0, double t1, int *x0, int *x1)
{
    if (!(t1 >= L->t0 && t0 <= L->t1 && t1 >= t0))     /* false for NaN too */
        return 0;
    int right = L->area.x + L->area.w;
    double a = dvi_tt_time_x(L, t0), b = dvi_tt_time_x(L, t1);
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
    dvi_tt_layout L;
    if (v->tt == NULL)
        return 0;
    dvi_tt_layout_compute(v, w, h, &L);
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

/* blocks: (row, lane, t0) < key; waits: (row, t0) < key; arrows: t0 < key */
static int block_before(const dv_tt *tt, int i, int row, int lane, double t)
{
    const dv_tt_block *b = &tt->blocks[i];
    return b->row != row ? b->row < row : b->lane != lane ? b->lane < lane : b->t0 < t;
}

static int wait_before(const dv_tt *tt, int i, int row, int lane, double t)
{
    (void)lane;
    return tt->waits[i].row != row ? tt->waits[i].row < row : tt->waits[i].t0 < t;
}

static int arrow_before(const dv_tt *tt, int i, int rank, int lane, double t)
{
    (void)rank; (void)lane;
    return tt->arrows[i].t0 < t;
}

typedef int (*tt_before)(const dv_tt *tt, int i, int row, int lane, double t);

/* The first i in [lo, hi) that is not before (row, lane, t): binary search. */
static int lower_bound(const dv_tt *tt, int lo, int hi, tt_before before, int row, int lane,
                       double t)
{
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (before(tt, mid, row, lane, t))
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

void dvi_tt_hatch(SDL_Renderer *r, SDL_Rect b, SDL_Color c)
{
    if (b.w < 3 || b.h < 5)
        return;
    dvi_set_color(r, c);
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
    dvi_set_color(r, b->c);
    if (b->fill)
        SDL_RenderFillRects(r, b->box, b->n);
    else
        SDL_RenderDrawRects(r, b->box, b->n);
    for (int i = 0; b->hatch.a != 0 && i < b->n; i++)
        dvi_tt_hatch(r, b->box[i], b->hatch);
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

/* The blocks of row q's lane that may reach the window: [*i0, *i1), from those that
 * begin `reach` (the longest block) before it to those that begin at its end. */
static void lane_range(const dv_tt *tt, const dvi_tt_layout *L, double reach, int q, int lane,
                       int *i0, int *i1)
{
    int lo = lower_bound(tt, 0, tt->nblocks, block_before, q, lane, -INFINITY);
    int hi = lower_bound(tt, lo, tt->nblocks, block_before, q, lane + 1, -INFINITY);
    *i0 = lower_bound(tt, lo, hi, block_before, q, lane, L->t0 - reach);
    *i1 = lower_bound(tt, *i0, hi, block_before, q, lane, nextafter(L->t1, INFINITY));
}

/* The lanes' background (idle), with faint lines at the axis' ticks behind the blocks. */
static void draw_lanes(SDL_Renderer *r, const dvi_tt_layout *L, const double *ticks, int nticks)
{
    for (int q = 0; q < L->n; q++)
        for (int lane = 0; lane < 2; lane++)
            if (lane_h(L, lane) > 0)
                dvi_fill(r, LANE, L->area.x, lane_y(L, q, lane), L->area.w, lane_h(L, lane));
    if (L->row < 6)
        return;
    dvi_set_color(r, GRID);
    for (int i = 0; i < nticks; i++) {
        int x = (int)dvi_tt_time_x(L, ticks[i]);
        for (int q = 0; q < L->n; q++)
            SDL_RenderDrawLine(r, x, lane_y(L, q, 0), x, lane_y(L, q, 1) + L->lm - 1);
    }
}

SDL_Color dvi_tt_faded(int k)
{
    return dvi_mix(kind_color(k), LANE, 0.65);
}

/* A block's fill: its kind's colour in its chunk's shade, faded in another step. */
static SDL_Color block_color(const dv_tt_block *k, int step)
{
    int kind = k->kind >= 0 && k->kind < DV_TT_NKINDS ? k->kind : DV_TT_OTHER;
    SDL_Color c = dvi_tt_chunk_color(kind, k->chunk);
    return k->step == step ? c : dvi_mix(c, LANE, 0.65);
}

/* The batch of a block's fill: by kind, chunk shade and faded or not. */
static int fill_batch(const dv_tt_block *k, int step)
{
    int kind = k->kind >= 0 && k->kind < DV_TT_NKINDS ? k->kind : DV_TT_OTHER;
    int shade = k->chunk > 0 ? k->chunk % DVI_TT_SHADES : 0;
    return ((k->step != step) * DV_TT_NKINDS + kind) * DVI_TT_SHADES + shade;
}

/* Every block's fill, one batch per kind and chunk shade (and per those faded, for the
 * blocks of other steps than `step`); then the waiting stretches over the comm lane. */
static void draw_fills(SDL_Renderer *r, const dv_tt *tt, const dvi_tt_layout *L, double reach,
                       int step)
{
    enum { NB = 2 * DV_TT_NKINDS * DVI_TT_SHADES };
    batch b[NB + 1];
    for (int k = 0; k < NB; k++) {       /* fill_batch's order */
        SDL_Color c = dvi_tt_chunk_color(k / DVI_TT_SHADES % DV_TT_NKINDS, k % DVI_TT_SHADES);
        b[k] = (batch){ .c = k < NB / 2 ? c : dvi_mix(c, LANE, 0.65), .fill = 1 };
    }
    batch *wait = &b[NB];
    *wait = (batch){ .fill = 1 };
    wait->c = dv_kind_color(DV_C_WAIT);
    wait->hatch = dvi_mix(dv_kind_color(DV_C_WAIT), dv_kind_color(DV_C_COMM), 0.6);
    for (int q = 0; q < L->n; q++)
        for (int lane = 0; lane < 2; lane++) {
            int i0, i1, x0, x1, y = lane_y(L, q, lane), lh = lane_h(L, lane);
            if (lh <= 0)
                continue;
            lane_range(tt, L, reach, q, lane, &i0, &i1);
            for (int i = i0; i < i1; i++) {
                const dv_tt_block *k = &tt->blocks[i];
                if (span_px(L, k->t0, k->t1, &x0, &x1))
                    batch_add(r, &b[fill_batch(k, step)], (SDL_Rect){ x0, y, x1 - x0, lh });
            }
        }
    for (int k = 0; k < NB; k++)
        batch_flush(r, &b[k]);
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
 * readable over the hatching of a wait. Returns 1 when drawn. */
static int label_in(dv_text *t, dv_font f, SDL_Rect box, SDL_Color fillc, const char *s)
{
    int tw = dv_text_width(t, f, s), th = dv_text_height(t, f);
    int x = box.x + (box.w - tw) / 2, y = box.y + (box.h - th) / 2;
    if (tw + 4 > box.w || s[0] == '\0')
        return 0;
    for (int d = 0; d < 4; d++)
        dv_text_draw(t, f, x + (d == 0) - (d == 1), y + (d == 2) - (d == 3), fillc, s);
    dv_text_draw(t, f, x, y, ink_on(fillc), s);
    return 1;
}

/* A block's label, with its transports after a dot when it names some and that fits
 * ("bucket 2 \u00b7 shm"), else the label alone where that fits. */
static void block_label(dv_text *t, dv_font f, SDL_Rect box, SDL_Color fillc,
                        const dv_tt_block *k)
{
    char via[40], s[80];
    dv_vias_text(k->vias, via, sizeof via);
    snprintf(s, sizeof s, "%s \u00b7 %s", k->label, via);
    if (via[0] == '\0' || !label_in(t, f, box, fillc, s))
        label_in(t, f, box, fillc, k->label);
}

/* Each block wide enough gets a darker edge (so F0 F1 F2 read as three blocks) and its
 * label where it fits; the picked collective's blocks go into hl, outlined last. */
static void draw_edges(SDL_Renderer *r, dv_text *t, const dv_tt *tt, const dvi_tt_layout *L,
                       double reach, int call, int step, batch *hl)
{
    batch e[DV_TT_NKINDS];
    for (int k = 0; k < DV_TT_NKINDS; k++)
        e[k] = (batch){ .c = dvi_mix(kind_color(k), BG, 0.55), .fill = 1 };
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
                if (dvi_tt_time_x(L, k->t0) >= L->area.x)
                    batch_add(r, &e[kind], (SDL_Rect){ x0, y, 1, lh });
                if (x1 - x0 >= 6 && dvi_tt_time_x(L, k->t1) <= L->area.x + L->area.w)
                    batch_add(r, &e[kind], (SDL_Rect){ x1 - 1, y, 1, lh });
                if (x1 - x0 >= 8 && lh >= SMALL_H - 2 && x0 >= label_end) {
                    block_label(t, f, (SDL_Rect){ x0 + 1, y, x1 - x0 - 2, lh },
                                block_color(k, step), k);
                    label_end = x1;
                }
            }
        }
    for (int k = 0; k < DV_TT_NKINDS; k++)
        batch_flush(r, &e[k]);
}

/* ==== pp's arrows ==== */

void dvi_tt_arrow_line(SDL_Renderer *r, double xa, double ya, double xb, double yb,
                       int dashed, int head)
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
static void draw_arrows(SDL_Renderer *r, const dv_tt *tt, const dvi_tt_layout *L)
{
    if (tt->narrows <= 0 || L->row < 2)
        return;
    double reach = longest(tt, tt->narrows, arrow_len);
    int first = lower_bound(tt, 0, tt->narrows, arrow_before, 0, 0, L->t0 - reach);
    int end = lower_bound(tt, first, tt->narrows, arrow_before, 0, 0, nextafter(L->t1, INFINITY));
    int nvis = 0, last[DVI_TT_MAX_ROWS][2][2];
    for (int k = first; k < end; k++)
        nvis += tt->arrows[k].t1 >= L->t0;
    int many = nvis > L->area.w / 10;
    for (int q = 0; q < L->n; q++)      /* the pixels each sender's last arrow took */
        last[q][0][0] = last[q][1][0] = -1;
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_BLEND);
    for (int k = first; k < end; k++) {
        const dv_tt_arrow *a = &tt->arrows[k];
        int src = a->src_row, dst = a->dst_row;
        if (!(a->t1 >= L->t0 && a->t0 <= L->t1 && a->t1 >= a->t0) || src < 0 ||
            src >= L->n || dst < 0 || dst >= L->n || src == dst)
            continue;
        int down = dst > src;
        double ya = down ? lane_y(L, src, 0) + L->lc - 1 : lane_y(L, src, 0);
        double yb = down ? lane_y(L, dst, 0) : lane_y(L, dst, 0) + L->lc - 1;
        double xa = dvi_tt_time_x(L, a->t0), xb = dvi_tt_time_x(L, a->t1);
        double lo = L->area.x, hi = L->area.x + L->area.w - 1;
        if (xb - xa > 0.5) {             /* clip the line to the window, by x */
            double sa = xa < lo ? (lo - xa) / (xb - xa) : 0, sb = xb > hi ? (hi - xa) / (xb - xa) : 1;
            double ya2 = ya + (yb - ya) * sa, yb2 = ya + (yb - ya) * sb;
            double xa2 = xa + (xb - xa) * sa, xb2 = xa + (xb - xa) * sb;
            xa = xa2, xb = xb2, ya = ya2, yb = yb2;
        }
        int *seen = last[src][a->what == 'G'], whole = dvi_tt_time_x(L, a->t1) <= hi + 0.5;
        if (seen[0] == (int)xa && seen[1] == (int)xb)
            continue;                    /* another one in the same pixels */
        seen[0] = (int)xa;
        seen[1] = (int)xb;
        dvi_set_color(r, dvi_tt_arrow_color(a->what, many ? 80 : 230));
        dvi_tt_arrow_line(r, xa, ya, xb, yb, a->what == 'G', whole && !many);
    }
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
}

/* ==== row names and the cursor ==== */

/* Each row's name (dv_tt_row_name: "stage s", "rank r", "rank r thread k", "master",
 * "replica k"; its short form, or the row's number, where it does not fit) beside a
 * swatch of the rank's colour (narrower for a thread's row), and where the rows are
 * tall, what the lower lane holds ("comm"; "lock" for a dp-threads replica's waits for
 * the interpreter lock). Small rows: every k-th name. */
static void draw_row_names(SDL_Renderer *r, dv_text *t, const dv_tt *tt, const dvi_tt_layout *L)
{
    char s[48];
    if (L->row <= 0)
        return;
    int every = L->row >= SMALL_H ? 1 : (SMALL_H + L->row - 1) / L->row;
    for (int q = 0; q < L->n; q++) {
        int y = L->area.y + q * L->row + L->gap / 2, hh = L->row - L->gap;
        dv_tt_row w = q < tt->nrows ? tt->rows[q] : (dv_tt_row){ q, 0 };
        dvi_fill(r, dv_rank_color(w.rank), PAD, y, w.thread ? 2 : 4, hh > 0 ? hh : 1);
        if (q % every != 0)
            continue;
        dv_font f = L->lc >= BODY_H ? DV_FONT_BODY : DV_FONT_SMALL;
        dv_tt_row_name(tt, q, 0, s, sizeof s);
        if (PAD + 8 + dv_text_width(t, f, s) > L->area.x - 2)
            dv_tt_row_name(tt, q, 1, s, sizeof s);
        if (PAD + 8 + dv_text_width(t, f, s) > L->area.x - 2 || s[0] == '\0')
            snprintf(s, sizeof s, "%d", q);
        int ty = L->lc >= SMALL_H ? y + (L->lc - dv_text_height(t, f)) / 2
                                  : L->area.y + q * L->row + (L->row - SMALL_H) / 2;
        dv_text_draw(t, f, PAD + 8, ty, TEXT, s);
        if (L->lm >= SMALL_H - 1)
            dv_text_draw(t, DV_FONT_SMALL, PAD + 8, lane_y(L, q, 1) + (L->lm - SMALL_H) / 2, DIM,
                         w.thread > 0 && strcmp(tt->mode, "dp-threads") == 0 ? "lock" : "comm");
    }
}

/* The cursor, a line down the rows; pp: each stage's stashed activations there. */
static void draw_cursor(SDL_Renderer *r, dv_text *t, const dv_view *v, const dvi_tt_layout *L)
{
    char s[32];
    if (!(v->cursor >= L->t0 && v->cursor <= L->t1) || L->row <= 0)
        return;
    int x = dvi_clampi((int)dvi_tt_time_x(L, v->cursor), L->area.x, L->area.x + L->area.w - 1);
    dvi_fill(r, TEXT, x, L->area.y - 3, 1, L->area.h + 3 + 5);
    dvi_fill(r, TEXT, x - 2, L->axis_y + 1, 5, 2);
    if (!L->pp || L->stash_x == 0 || L->row < SMALL_H - 1)
        return;
    for (int q = 0; q < L->n && q < v->tt->nrows; q++) {
        if (v->tt->rows[q].thread != 0)            /* a stash is a rank's (stage's) */
            continue;
        snprintf(s, sizeof s, "stash %d", dv_tt_stash(v->tt, v->tt->rows[q].rank, v->cursor));
        int y = L->row >= 24 ? lane_y(L, q, 0) + (L->lc - SMALL_H) / 2
                             : L->area.y + q * L->row + (L->row - SMALL_H) / 2;
        dv_text_draw(t, DV_FONT_SMALL, L->stash_x, y, TEXT, s);
    }
}

/* ==== the rows, in the order they overlap ==== */

void dvi_tt_rows(SDL_Renderer *r, dv_text *t, const dv_view *v, const dvi_tt_layout *L,
                 const double *ticks, int nticks)
{
    const dv_tt *tt = v->tt;
    batch hl = { .c = NOTE, .fill = 0 };
    draw_row_names(r, t, tt, L);
    draw_lanes(r, L, ticks, nticks);
    double reach = longest(tt, tt->nblocks, block_len);
    int shown = v->tt_step >= 0 && v->tt_step < tt->nsteps ? tt->steps[v->tt_step].step
                                                            : INT_MIN;
    draw_fills(r, tt, L, reach, shown);
    draw_cursor(r, t, v, L);            /* under the labels and arrows */
    draw_edges(r, t, tt, L, reach, v->call, shown, &hl);
    if (L->pp)
        draw_arrows(r, tt, L);
    batch_flush(r, &hl);
}
