/* Drawing a dv_model: layout, the grid of cells, the arrows, the bytes panel, the
 * timeline, and the headless render. See draw.h for the picture, top to bottom.
 *
 * Everything here is a function of (model, view, size): no state survives a call
 * except the timeline's texture in dv_cache, which only saves time. So stepping back
 * redraws exactly what was there, and the tests can read pixels to check it. */
#include <SDL_image.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draw.h"
#include "units.h"

/* ==== colours ==== */

static const SDL_Color BG = { 24, 26, 32, 255 }, EMPTY = { 46, 49, 58, 255 },
    OUTLINE = { 92, 96, 108, 255 }, TEXT = { 222, 224, 230, 255 }, DIM = { 150, 154, 166, 255 },
    NOTE = { 255, 214, 102, 255 }, COPY = { 236, 236, 236, 255 }, ADD = { 255, 168, 56, 255 },
    TRACK = { 34, 37, 44, 255 };

/* Sixteen colours that stay apart on a dark background; ranks above 15 walk the hue
 * circle by the golden angle at three lightnesses, so neighbours still differ. */
static const SDL_Color palette[16] = {
    { 230, 25, 75, 255 }, { 60, 180, 75, 255 }, { 255, 225, 25, 255 }, { 67, 99, 216, 255 },
    { 245, 130, 49, 255 }, { 145, 30, 180, 255 }, { 66, 212, 244, 255 }, { 240, 50, 230, 255 },
    { 191, 239, 69, 255 }, { 250, 190, 212, 255 }, { 70, 153, 144, 255 }, { 220, 190, 255, 255 },
    { 154, 99, 36, 255 }, { 255, 250, 200, 255 }, { 128, 0, 0, 255 }, { 170, 255, 195, 255 },
};

SDL_Color dv_rank_color(int r)
{
    if (r >= 0 && r < 16)
        return palette[r];
    double h = fmod(r * 137.508, 360.0) / 60.0, v = 0.95 - 0.2 * (r % 3), s = 0.7;
    int i = (int)h;
    double f = h - i, p = v * (1 - s), q = v * (1 - s * f), u = v * (1 - s * (1 - f));
    double rgb[6][3] = { { v, u, p }, { q, v, p }, { p, v, u }, { p, q, v }, { u, p, v },
                         { v, p, q } };
    /* the low bits of r keep two ranks apart even if their hues round alike */
    return (SDL_Color){ (Uint8)(rgb[i][0] * 248 + (r & 3)), (Uint8)(rgb[i][1] * 248),
                        (Uint8)(rgb[i][2] * 248 + (r >> 2 & 3)), 255 };
}

static void set_color(SDL_Renderer *r, SDL_Color c)
{
    SDL_SetRenderDrawColor(r, c.r, c.g, c.b, c.a);
}

static void fill(SDL_Renderer *r, SDL_Color c, int x, int y, int w, int h)
{
    SDL_Rect box = { x, y, w, h };
    set_color(r, c);
    SDL_RenderFillRect(r, &box);
}

/* Fills box with one vertical stripe per rank in mask, in rank order, equal widths. */
static void stripes(SDL_Renderer *r, SDL_Rect box, dv_mask mask)
{
    int n = __builtin_popcountll(mask), i = 0;
    for (int q = 0; q < DV_MAX_RANKS && i < n; q++) {
        if (!(mask >> q & 1))
            continue;
        int x0 = box.x + box.w * i / n, x1 = box.x + box.w * (i + 1) / n;
        if (x1 > x0)                       /* more ranks than pixels: some cannot show */
            fill(r, dv_rank_color(q), x0, box.y, x1 - x0, box.h);
        i++;
    }
}

/* ==== layout ==== */

/* Line heights of the three fonts at text.c's sizes (DejaVu Sans 10, 13, 16 pt), and
 * the widths the layout reserves. */
enum { PAD = 8, SMALL_H = 13, BODY_H = 17, TITLE_H = 22, LABEL_W = 64 };

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* The gap between two rows of cells, where the arrows and their labels go. */
static int row_gap(int row_h)
{
    return clampi(row_h * 2 / 5, 1, 18);
}

void dv_layout_compute(const dv_model *m, int pos, int w, int h, dv_layout *L)
{
    int k, n = m->nranks;
    memset(L, 0, sizeof *L);
    L->w = w;
    L->h = h;
    dv_pos_split(m, pos, &L->call, &k);
    L->ncells = L->call >= 0 ? m->calls[L->call].ncells : 0;
    L->header = (SDL_Rect){ 0, 0, w, PAD + TITLE_H + 2 * BODY_H };

    int bottom = h - BODY_H - 2;                     /* the note line below everything */
    int tl_top = bottom;
    if (m->trace.n > 0) {                            /* legend, rows, axis labels */
        int row = clampi(h / (m->from_trace ? 3 : 4) / n, 2, 36);
        L->timeline = (SDL_Rect){ PAD + LABEL_W, bottom - SMALL_H - row * n,
                                  w - 2 * PAD - LABEL_W, row * n };
        tl_top = L->timeline.y - SMALL_H - 4;
    }
    int top = L->header.h + 2 * SMALL_H + 6;         /* column titles, cell names */
    int avail = tl_top - BODY_H - SMALL_H - PAD - top;
    int panel_w = clampi(w / 5, 120, 260);
    L->row_h = clampi(avail / n, 2, 72);
    L->grid = (SDL_Rect){ PAD, top, w - 2 * PAD - panel_w, L->row_h * n };
    L->panel = (SDL_Rect){ L->grid.x + L->grid.w + PAD, top, panel_w - PAD, L->grid.h };
    L->cell_x0 = PAD + LABEL_W;
    if (L->ncells > 0)
        L->cell_w = (L->grid.x + L->grid.w - L->cell_x0) / L->ncells;
    if (L->cell_w < 1)
        L->cell_w = 1;
}

/* Cells stand apart by a gap where there is room, so a cell full of stripes still
 * reads as one cell. */
static int cell_gap(int cell_w)
{
    return cell_w >= 24 ? 5 : cell_w >= 10 ? 3 : 0;
}

SDL_Rect dv_layout_cell(const dv_layout *L, int r, int c)
{
    int gap = row_gap(L->row_h), in = L->cell_w >= 4;   /* room for an outline? */
    int cg = cell_gap(L->cell_w);
    return (SDL_Rect){ L->cell_x0 + c * L->cell_w + in + cg / 2,
                       L->grid.y + r * L->row_h + gap / 2 + 1,
                       L->cell_w - 2 * in - cg, L->row_h - gap - 2 > 1 ? L->row_h - gap - 2 : 1 };
}

int dv_timeline_pos(const dv_model *m, const dv_layout *L, int x, int y)
{
    const SDL_Rect *b = &L->timeline;
    if (b->w <= 0 || x < b->x || x >= b->x + b->w || y < b->y || y >= b->y + b->h)
        return -1;
    double f = (x - b->x + 0.5) / b->w;
    return dv_pos_at_time(m, m->t_begin + f * (m->t_end - m->t_begin));
}

/* ==== where a position is ==== */

/* The frame whose phase position pos names: the arrows' frame, or the last one at
 * k = F. NULL without calls or frames. */
static const dv_frame *pos_frame(const dv_model *m, int pos, int *call, int *k)
{
    dv_pos_split(m, pos, call, k);
    if (*call < 0 || m->calls[*call].nframes == 0)
        return NULL;
    const dv_call *c = &m->calls[*call];
    return &m->frames[c->first_frame + (*k < c->nframes ? *k : c->nframes - 1)];
}

void dv_pos_describe(const dv_model *m, int pos, char *buf, size_t len)
{
    int call, k;
    pos = clampi(pos, 0, m->npos - 1);
    const dv_frame *f = pos_frame(m, pos, &call, &k);
    if (call < 0)
        snprintf(buf, len, "position %d/%d no collective calls", pos, m->npos);
    else
        snprintf(buf, len, "position %d/%d call %d %s %s step %d of %d", pos, m->npos, call,
                 m->calls[call].coll, f != NULL ? f->phase : "-", k, m->calls[call].nframes);
}

const char *const dv_key_help[][2] = {
    { "space", "play / pause" },
    { "Right, Left", "one position forward / back" },
    { "+, -", "faster / slower (also = and keypad + -)" },
    { "Home, End", "first / last position" },
    { "r", "restart from the first position, playing" },
    { "a", "next algorithm (built-in schedules)" },
    { "n, N", "one rank fewer / more (built-in schedules)" },
    { "click", "on the timeline: jump to that time" },
    { "h", "this help on / off" },
    { "q, Esc", "quit" },
    { NULL, NULL },
};

/* ==== the grid, the arrows, the moving pieces ==== */

static void draw_grid(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_layout *L,
                      const dv_mask *st)
{
    char s[32];
    for (int q = 0; q < m->nranks; q++) {
        SDL_Rect c0 = dv_layout_cell(L, q, 0);
        if (L->row_h >= SMALL_H) {
            dv_font f = L->row_h >= BODY_H + 6 ? DV_FONT_BODY : DV_FONT_SMALL;
            snprintf(s, sizeof s, "rank %d", q);
            dv_text_draw(t, f, PAD, c0.y + (c0.h - dv_text_height(t, f)) / 2,
                         dv_rank_color(q), s);
        } else {
            fill(r, dv_rank_color(q), PAD, c0.y, 8, c0.h);
        }
        for (int c = 0; c < L->ncells; c++) {
            SDL_Rect b = dv_layout_cell(L, q, c), o = { b.x - 1, b.y - 1, b.w + 2, b.h + 2 };
            if (L->cell_w >= 4) {
                set_color(r, OUTLINE);
                SDL_RenderDrawRect(r, &o);
            }
            dv_mask mk = st[q * L->ncells + c];
            if (mk == 0)
                fill(r, EMPTY, b.x, b.y, b.w, b.h);
            else
                stripes(r, b, mk);
        }
    }
}

/* Where the arrow of msg runs: x, and y from the sender's row edge to the receiver's.
 * Downward arrows run right of the cells' centre and upward ones left of it, so the two
 * halves of an exchange stay apart; different senders sit a little apart too. */
static void arrow_geom(const dv_layout *L, const dv_msg *g, int *x, int *y0, int *y1)
{
    SDL_Rect a = dv_layout_cell(L, g->src, g->c0), b = dv_layout_cell(L, g->dst, g->c0);
    int span = (g->c1 - g->c0) * L->cell_w;
    int side = clampi(span / 12, 0, 8) + g->src % 3;   /* down: right of centre; up: left */
    *x = L->cell_x0 + g->c0 * L->cell_w + span / 2 + (g->src < g->dst ? side : -side);
    *y0 = g->src < g->dst ? a.y + a.h + 1 : a.y - 2;
    *y1 = g->src < g->dst ? b.y - 2 : b.y + b.h + 1;
}

/* Arrows go behind the cells (drawn first), so they show in the gaps between rows and
 * never hide a cell's colours; the head and the label sit in the gap at the receiver. */
static void draw_arrows(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_layout *L,
                        const dv_frame *f)
{
    char s[32];
    int gap = row_gap(L->row_h);
    for (int i = 0; i < f->nmsg; i++) {
        const dv_msg *g = &m->msgs[f->first_msg + i];
        int x, y0, y1, dir;
        arrow_geom(L, g, &x, &y0, &y1);
        dir = y1 > y0 ? 1 : -1;
        SDL_Color c = g->add ? ADD : COPY;
        set_color(r, c);
        SDL_RenderDrawLine(r, x, y0, x, y1);
        SDL_RenderDrawLine(r, x + 1, y0, x + 1, y1);
        for (int j = 0; j < 6 && j < gap; j++)         /* the head: a stack of lines */
            SDL_RenderDrawLine(r, x - j + 1 - (j > 0), y1 - dir * j, x + j, y1 - dir * j);
        if (gap >= SMALL_H - 3) {
            /* the label names the sender and the receiver as well as the cells: an
             * arrow between ranks that are not neighbours runs behind the rows between */
            int far = g->src - g->dst > 1 || g->dst - g->src > 1;
            char who[24] = "";
            if (far)
                snprintf(who, sizeof who, "%d->%d ", g->src, g->dst);
            if (g->c1 - g->c0 == 1)
                snprintf(s, sizeof s, "%sc%d", who, g->c0);
            else
                snprintf(s, sizeof s, "%sc%d-%d", who, g->c0, g->c1 - 1);
            /* labels of downward arrows to the right, upward ones to the left, so the
             * two arrows of an exchange keep their labels apart */
            int ly = dir > 0 ? y1 - gap + 2 : y1 + 1;
            int lx = dir > 0 ? x + 4 : x - 4 - dv_text_width(t, DV_FONT_SMALL, s);
            dv_text_draw(t, DV_FONT_SMALL, lx, ly + (gap - SMALL_H) / 2 - 1, c, s);
        }
    }
}

/* While pos is between k and k+1, each message's piece (the sender's contributions in
 * its cells) is drawn the fraction frac along its arrow. */
static void draw_pieces(SDL_Renderer *r, const dv_model *m, const dv_layout *L,
                        const dv_frame *f, const dv_mask *st, double frac)
{
    const dv_call *c = &m->calls[L->call];
    for (int i = 0; i < f->nmsg; i++) {
        const dv_msg *g = &m->msgs[f->first_msg + i];
        dv_mask mk = 0;
        for (int j = g->c0; j < g->c1; j++)
            mk |= st[g->src * L->ncells + j];
        if (c->from_sender)                 /* its block for the receiver: its own data */
            mk = (dv_mask)1 << g->src;
        SDL_Rect a = dv_layout_cell(L, g->src, g->c0), b = dv_layout_cell(L, g->dst, g->c0);
        int x, y0, y1, pw = clampi((g->c1 - g->c0) * L->cell_w * 3 / 5, 6, 400),
            ph = clampi(a.h * 3 / 4, 4, 40);
        arrow_geom(L, g, &x, &y0, &y1);
        int yc = a.y + a.h / 2 + (int)((b.y - a.y) * frac);
        SDL_Rect box = { x - pw / 2, yc - ph / 2, pw, ph }, o = { box.x - 1, box.y - 1, pw + 2, ph + 2 };
        set_color(r, g->add ? ADD : COPY);
        SDL_RenderDrawRect(r, &o);
        if (mk == 0)
            fill(r, EMPTY, box.x, box.y, box.w, box.h);
        else
            stripes(r, box, mk);
    }
}

/* ==== header, panel, timeline, overlays ==== */

static void draw_header(dv_text *t, const dv_model *m, const dv_view *v, const dv_layout *L,
                        int pos)
{
    char s[256], sp[64];
    int call, k;
    const dv_frame *f = pos_frame(m, pos, &call, &k);
    dv_text_draw(t, DV_FONT_TITLE, PAD, PAD / 2, TEXT, m->title);
    if (v->speed > 0) {                    /* a window; not a picture (speed 0) */
        snprintf(sp, sizeof sp, "%s, %g steps/s   h: keys",
                 v->playing ? "playing" : "paused", v->speed);
        dv_text_draw(t, DV_FONT_BODY, L->w - PAD - dv_text_width(t, DV_FONT_BODY, sp),
                     PAD / 2 + 3, DIM, sp);
    }
    dv_pos_describe(m, pos, s, sizeof s);
    dv_text_draw(t, DV_FONT_BODY, PAD, PAD / 2 + TITLE_H, TEXT, s);
    if (f != NULL)
        dv_text_draw(t, DV_FONT_BODY, PAD, PAD / 2 + TITLE_H + BODY_H, DIM,
                     dv_phase_text(m->calls[call].coll, f->phase));
    int y = L->header.h + 2;
    dv_text_draw(t, DV_FONT_SMALL, PAD, y, DIM, "rank");
    if (call >= 0) {
        const dv_call *c = &m->calls[call];
        snprintf(s, sizeof s, "%lld elements in %d cell%s c0..c%d; a cell's stripes: the "
                 "ranks whose data it holds", c->count, c->ncells, c->ncells > 1 ? "s" : "",
                 c->ncells - 1);
        dv_text_draw(t, DV_FONT_SMALL, L->cell_x0, y, DIM, s);
        dv_text_draw(t, DV_FONT_SMALL, L->panel.x, y, DIM, "bytes sent in this call");
        for (int i = 0; i < c->ncells; i++) {       /* each cell's name, where it fits */
            snprintf(s, sizeof s, "c%d", i);
            int tw = dv_text_width(t, DV_FONT_SMALL, s);
            if (tw + 4 > L->cell_w)
                break;
            dv_text_draw(t, DV_FONT_SMALL, L->cell_x0 + i * L->cell_w + (L->cell_w - tw) / 2,
                         y + SMALL_H + 2, DIM, s);
        }
    }
}

static void draw_panel(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_layout *L, int k)
{
    double sent[DV_MAX_RANKS] = { 0 }, expect[DV_MAX_RANKS] = { 0 };
    char s[256], a[32], b[32];
    int known = dv_formula(m, L->call, expect, s, sizeof s);
    dv_bytes_sent(m, L->call, k, sent);
    int y = L->grid.y + L->grid.h + 4;
    dv_text_draw(t, DV_FONT_BODY, PAD, y, TEXT, known ? s : "no cost model for this collective");
    dv_text_draw(t, DV_FONT_SMALL, PAD, y + BODY_H, DIM, "arrows: white = copied into the "
                 "receiver's cells, orange = added to them; the label names the cells");
    int bw = L->panel.w * 2 / 5;
    for (int q = 0; q < m->nranks; q++) {
        SDL_Rect c = dv_layout_cell(L, q, 0);
        double f = known && expect[q] > 0 ? sent[q] / expect[q] : 0;
        fill(r, EMPTY, L->panel.x, c.y, bw, c.h);
        if ((int)(bw * (f > 1 ? 1 : f)) > 0)
            fill(r, dv_rank_color(q), L->panel.x, c.y, (int)(bw * (f > 1 ? 1 : f)), c.h);
        if (c.h + 4 < SMALL_H)
            continue;
        dt_format_bytes(sent[q], a, sizeof a);
        dt_format_bytes(expect[q], b, sizeof b);
        snprintf(s, sizeof s, known && expect[q] > 0 ? "%s of %s" : "%s", a, b);
        dv_text_draw(t, DV_FONT_SMALL, L->panel.x + bw + 4, c.y + (c.h - SMALL_H) / 2, TEXT, s);
    }
}

/* The timeline's colours. Each event goes to one, in one of three lanes of its rank's
 * row: compute (forward, backward, optimizer, ...), sends, and receives with the
 * reductions and copies that follow them. So the top lane is the model's work and the
 * two below the collectives': overlap and bubbles show as gaps in one against the other. */
enum { TL_FWD, TL_BWD, TL_OPT, TL_COMPUTE, TL_SEND, TL_RECV, TL_REDUCE, TL_STAGE, TL_N };
static const struct { const char *name; SDL_Color c; } tl_kind[TL_N] = {   /* drawn in order */
    { "forward", { 84, 150, 230, 255 } }, { "backward", { 236, 128, 72, 255 } },
    { "optimizer", { 180, 110, 230, 255 } }, { "other compute", { 130, 134, 146, 255 } },
    { "send", { 224, 76, 92, 255 } }, { "recv", { 76, 200, 120, 255 } },
    { "reduce/copy", { 232, 200, 64, 255 } }, { "d2h/h2d", { 96, 120, 170, 255 } },
};

SDL_Color dv_kind_color(dv_color_kind k)
{
    static const SDL_Color c[DV_C_N] = {
        [DV_C_FORWARD] = { 84, 150, 230, 255 }, [DV_C_BACKWARD] = { 236, 128, 72, 255 },
        [DV_C_OPTIMIZER] = { 180, 110, 230, 255 }, [DV_C_COMPUTE] = { 130, 134, 146, 255 },
        [DV_C_SEND] = { 224, 76, 92, 255 }, [DV_C_RECV] = { 76, 200, 120, 255 },
        [DV_C_REDUCE] = { 232, 200, 64, 255 }, [DV_C_STAGE] = { 96, 120, 170, 255 },
        [DV_C_COMM] = { 224, 76, 92, 255 }, [DV_C_WAIT] = { 90, 60, 66, 255 },
        [DV_C_COPY_ARROW] = { 236, 236, 236, 255 }, [DV_C_ADD_ARROW] = { 255, 168, 56, 255 },
    };
    return k >= 0 && k < DV_C_N ? c[k] : c[DV_C_COMPUTE];
}

/* The colour of e (-1: not drawn, a mark) and its lane, 0..2. */
static int tl_class(const dt_event *e, int *lane)
{
    *lane = e->kind == DT_EV_COMPUTE ? 0 : e->kind == DT_EV_SEND || e->kind == DT_EV_D2H ? 1 : 2;
    switch (e->kind) {
    case DT_EV_COMPUTE:
        return !strcmp(e->phase, "forward") ? TL_FWD : !strcmp(e->phase, "backward") ? TL_BWD
             : !strcmp(e->phase, "optimizer") ? TL_OPT : TL_COMPUTE;
    case DT_EV_REDUCE: case DT_EV_COPY: return TL_REDUCE;
    case DT_EV_SEND: return TL_SEND;
    case DT_EV_RECV: return TL_RECV;
    case DT_EV_D2H: case DT_EV_H2D: return TL_STAGE;
    default: return -1;
    }
}

/* Every event as a rectangle at least a pixel wide, one colour at a time so the
 * renderer batches them; a run of events in the same pixel collapses to one. */
static void timeline_bars(SDL_Renderer *r, const dv_model *m, SDL_Rect b)
{
    const dt_trace *tr = &m->trace;
    int row = b.h / m->nranks, sep = row >= 8, lh = (row - sep) / 3 > 0 ? (row - sep) / 3 : 1;
    double span = m->t_end - m->t_begin;
    SDL_Rect *box = malloc(tr->n * sizeof *box);
    fill(r, BG, b.x, b.y, b.w, b.h);
    for (int q = 0; q < m->nranks && sep; q++)
        fill(r, TRACK, b.x, b.y + q * row + 1, b.w, row - 1);
    for (int k = 0; k < TL_N && box != NULL; k++) {
        int nb = 0, lane;
        for (size_t i = 0; i < tr->n; i++) {
            const dt_event *e = &tr->ev[i];
            if (tl_class(e, &lane) != k || e->rank < 0 || e->rank >= m->nranks)
                continue;
            int x0 = b.x + (int)((e->t0 - m->t_begin) / span * b.w);
            int x1 = b.x + (int)((e->t1 - m->t_begin) / span * b.w);
            SDL_Rect eb = { x0, b.y + e->rank * row + sep + lane * lh, x1 > x0 ? x1 - x0 : 1,
                            lh - (lh >= 4) };
            if (nb == 0 || memcmp(&box[nb - 1], &eb, sizeof eb) != 0)
                box[nb++] = eb;
        }
        set_color(r, tl_kind[k].c);
        SDL_RenderFillRects(r, box, nb);
    }
    free(box);
}

struct dv_cache {
    SDL_Texture *tex;
    SDL_Renderer *r;                       /* what the texture was made for */
    const dv_model *m;
    const dt_event *ev;
    size_t n;
    int w, h;
};

dv_cache *dv_cache_new(void) { return calloc(1, sizeof(dv_cache)); }

void dv_cache_clear(dv_cache *c)
{
    if (c != NULL && c->tex != NULL)
        SDL_DestroyTexture(c->tex);
    if (c != NULL)
        memset(c, 0, sizeof *c);
}

void dv_cache_free(dv_cache *c)
{
    dv_cache_clear(c);
    free(c);
}

/* Copies the cached bars, drawing them into the texture first when stale. Returns 0,
 * or -1 when this renderer has no render targets (the caller draws directly). */
static int timeline_cached(SDL_Renderer *r, const dv_model *m, SDL_Rect b, dv_cache *c)
{
    if (!(c->tex != NULL && c->r == r && c->m == m && c->ev == m->trace.ev &&
          c->n == m->trace.n && c->w == b.w && c->h == b.h)) {
        dv_cache_clear(c);
        if (!SDL_RenderTargetSupported(r))
            return -1;
        c->tex = SDL_CreateTexture(r, SDL_PIXELFORMAT_ARGB8888, SDL_TEXTUREACCESS_TARGET, b.w, b.h);
        if (c->tex == NULL)
            return -1;
        SDL_Texture *old = SDL_GetRenderTarget(r);
        SDL_SetRenderTarget(r, c->tex);
        timeline_bars(r, m, (SDL_Rect){ 0, 0, b.w, b.h });
        SDL_SetRenderTarget(r, old);
        *c = (dv_cache){ c->tex, r, m, m->trace.ev, m->trace.n, b.w, b.h };
    }
    SDL_RenderCopy(r, c->tex, NULL, &b);
    return 0;
}

static void draw_timeline(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_layout *L,
                          const dv_view *v)
{
    SDL_Rect b = L->timeline;
    char s[64];
    int x = b.x, row = b.h / m->nranks;
    for (int k = 0; k < TL_N; k++) {       /* the legend */
        fill(r, tl_kind[k].c, x, b.y - SMALL_H - 1, 9, 9);
        x += 13 + dv_text_draw(t, DV_FONT_SMALL, x + 12, b.y - SMALL_H - 4, DIM, tl_kind[k].name) + 10;
    }
    if (v->cache == NULL || timeline_cached(r, m, b, v->cache) != 0)
        timeline_bars(r, m, b);
    for (int q = 0; q < m->nranks; q++)
        if (row >= SMALL_H - 2 || q % (SMALL_H / (row > 0 ? row : 1) + 1) == 0) {
            snprintf(s, sizeof s, "rank %d", q);
            dv_text_draw(t, DV_FONT_SMALL, PAD, b.y + q * row + (row - SMALL_H) / 2, DIM, s);
        }
    double span = m->t_end - m->t_begin;
    if (m->from_trace)
        snprintf(s, sizeof s, "%.3f ms", span * 1e3);
    else
        snprintf(s, sizeof s, "step %g", span);
    dv_text_draw(t, DV_FONT_SMALL, b.x, b.y + b.h + 1, DIM, m->from_trace ? "0 ms" : "step 0");
    dv_text_draw(t, DV_FONT_SMALL, b.x + b.w - dv_text_width(t, DV_FONT_SMALL, s), b.y + b.h + 1,
                 DIM, s);

    /* the cursor: the position's time, and the span of the frame its arrows show */
    int p = (int)v->pos, call, k;
    double t0 = dv_pos_time(m, p), t1 = dv_pos_time(m, p + 1 < m->npos ? p + 1 : p);
    double tc = t0 + (t1 - t0) * (v->pos - p);
    const dv_frame *f = pos_frame(m, p, &call, &k);
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_BLEND);
    if (f != NULL && call >= 0 && k < m->calls[call].nframes) {
        int x0 = b.x + (int)((f->t0 - m->t_begin) / span * b.w);
        int x1 = b.x + (int)((f->t1 - m->t_begin) / span * b.w);
        fill(r, (SDL_Color){ 255, 255, 255, 48 }, x0, b.y, x1 - x0 > 1 ? x1 - x0 : 1, b.h);
    }
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
    fill(r, TEXT, b.x + (int)((tc - m->t_begin) / span * b.w) - 1, b.y - 2, 2, b.h + 4);
}

static void draw_help(SDL_Renderer *r, dv_text *t, int w, int h)
{
    int n = 0;
    while (dv_key_help[n][0] != NULL)
        n++;
    int bw = 460, bh = (n + 2) * BODY_H + 2 * PAD, x = (w - bw) / 2, y = (h - bh) / 2;
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_BLEND);
    fill(r, (SDL_Color){ 8, 9, 12, 232 }, x, y, bw, bh);
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
    set_color(r, OUTLINE);
    SDL_RenderDrawRect(r, &(SDL_Rect){ x, y, bw, bh });
    dv_text_draw(t, DV_FONT_BODY, x + PAD, y + PAD, NOTE, "keys (h hides this)");
    for (int i = 0; i < n; i++) {
        dv_text_draw(t, DV_FONT_BODY, x + PAD, y + PAD + (i + 2) * BODY_H, TEXT, dv_key_help[i][0]);
        dv_text_draw(t, DV_FONT_BODY, x + PAD + 110, y + PAD + (i + 2) * BODY_H, DIM,
                     dv_key_help[i][1]);
    }
}

/* ==== the picture ==== */

void dv_draw(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_view *v, int w, int h)
{
    if (v->tt != NULL) {
        dv_tt_draw(r, t, m, v, w, h);
        return;
    }
    dv_mask st[DV_MAX_RANKS * DV_MAX_CELLS];          /* masks after k frames */
    int pos = clampi((int)v->pos, 0, m->npos - 1), call, k;
    dv_layout L;
    dv_layout_compute(m, pos, w, h, &L);
    const dv_frame *f = pos_frame(m, pos, &call, &k);
    if (call >= 0 && k == m->calls[call].nframes)
        f = NULL;                                    /* the call is done: no arrows */
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
    set_color(r, BG);
    SDL_RenderClear(r);
    draw_header(t, m, v, &L, pos);
    if (call >= 0) {
        dv_state(m, call, k, st);
        if (f != NULL)
            draw_arrows(r, t, m, &L, f);
        draw_grid(r, t, m, &L, st);
        if (f != NULL && v->pos > pos)
            draw_pieces(r, m, &L, f, st, v->pos - pos);
        draw_panel(r, t, m, &L, k);
    } else {
        dv_text_draw(t, DV_FONT_BODY, PAD, L.grid.y, DIM,
                     "no collective calls here: only the timeline below");
    }
    if (L.timeline.w > 0 && L.timeline.h > 0)
        draw_timeline(r, t, m, &L, v);
    if (v->note != NULL)
        dv_text_draw(t, DV_FONT_BODY, PAD, h - BODY_H - 1, NOTE, v->note);
    if (v->help)
        draw_help(r, t, w, h);
}

/* ==== headless ==== */

SDL_Surface *dv_render_surface(const dv_model *m, const dv_view *v, int w, int h,
                               char *err, size_t errlen)
{
    SDL_Surface *s = SDL_CreateRGBSurfaceWithFormat(0, w, h, 32, SDL_PIXELFORMAT_ARGB8888);
    SDL_Renderer *r = s != NULL ? SDL_CreateSoftwareRenderer(s) : NULL;
    dv_text *t = r != NULL ? dv_text_open(r, NULL, err, errlen) : NULL;
    if (r == NULL)
        snprintf(err, errlen, "cannot make a %dx%d picture: %s", w, h, SDL_GetError());
    if (t != NULL) {
        dv_view hv = *v;
        hv.cache = NULL;                   /* the texture would die with this renderer */
        dv_draw(r, t, m, &hv, w, h);
        SDL_RenderFlush(r);
        dv_text_close(t);
    }
    if (r != NULL)
        SDL_DestroyRenderer(r);
    if (t == NULL) {
        SDL_FreeSurface(s);
        return NULL;
    }
    return s;
}

int dv_render_png(const dv_model *m, const dv_view *v, int w, int h, const char *path,
                  char *err, size_t errlen)
{
    SDL_Surface *s = dv_render_surface(m, v, w, h, err, errlen);
    if (s == NULL)
        return -1;
    int rc = IMG_SavePNG(s, path);
    if (rc != 0)
        snprintf(err, errlen, "cannot write %s: %s", path, IMG_GetError());
    SDL_FreeSurface(s);
    return rc == 0 ? 0 : -1;
}
