/* Drawing a dv_model: layout, the grid of cells, the arrows, the bytes panel, the
 * timeline, and the headless render. See draw.h for the picture, top to bottom.
 *
 * Everything here is a function of (model, view, size): no state survives a call
 * except the timeline's texture in dv_cache, which only saves time. So stepping back
 * redraws exactly what was there, and the tests can read pixels to check it. */
#include <SDL_image.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "draw.h"
#include "draw_internal.h"
#include "units.h"

/* ==== colours (the ranks' and the kinds': style.c) ==== */

static const SDL_Color EMPTY = { 46, 49, 58, 255 }, TRACK = { 34, 37, 44, 255 },
    ABSENT = { 30, 32, 39, 255 };                  /* and draw_internal.h's BG, TEXT, ... */

/* Fills box with one vertical stripe per rank in mask, in rank order, equal widths. */
static void stripes(SDL_Renderer *r, SDL_Rect box, dv_mask mask)
{
    int n = __builtin_popcountll(mask), i = 0;
    for (int q = 0; q < DV_MAX_RANKS && i < n; q++) {
        if (!(mask >> q & 1))
            continue;
        int x0 = box.x + box.w * i / n, x1 = box.x + box.w * (i + 1) / n;
        if (x1 > x0)                       /* more ranks than pixels: some cannot show */
            dvi_fill(r, dv_rank_color(q), x0, box.y, x1 - x0, box.h);
        i++;
    }
}

/* ==== layout ==== */

/* Line heights of the three fonts at text.c's sizes (DejaVu Sans 10, 13, 16 pt), and
 * the widths the layout reserves. */
enum { LABEL_W = 64 };

/* The gap between two rows of cells, where the arrows and their labels go. */
static int row_gap(int row_h)
{
    return dvi_clampi(row_h * 2 / 5, 1, 18);
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
    /* legend, rows, axis labels: always, even empty (--count 0 records no event) */
    int row = dvi_clampi(h / (m->from_trace ? 3 : 4) / n, 2, 36);
    L->timeline = (SDL_Rect){ PAD + LABEL_W, bottom - SMALL_H - row * n,
                              w - 2 * PAD - LABEL_W, row * n };
    int tl_top = L->timeline.y - SMALL_H - 4;
    int top = L->header.h + 2 * SMALL_H + 6;         /* column titles, cell names */
    int avail = tl_top - BODY_H - SMALL_H - PAD - top;
    int panel_w = dvi_clampi(w / 5, 120, 260);
    L->row_h = dvi_clampi(avail / n, 2, 72);
    L->grid = (SDL_Rect){ PAD, top, w - 2 * PAD - panel_w, L->row_h * n };
    L->panel = (SDL_Rect){ L->grid.x + L->grid.w + PAD, top, panel_w - PAD, L->grid.h };
    L->cell_x0 = PAD + LABEL_W;
    int room = L->grid.x + L->grid.w - L->cell_x0;
    if (L->call >= 0 && m->calls[L->call].ring_attn) {
        /* ring attention: the K/V in hand, a gap, the output's key blocks */
        int gap = dvi_clampi(room / 12, 12, 64);
        L->cell_w = (room - gap) / (2 * L->ncells);
        L->out_x0 = L->cell_x0 + L->ncells * (L->cell_w > 1 ? L->cell_w : 1) + gap;
    } else if (L->call >= 0 && m->calls[L->call].from_sender) {
        /* alltoall: the send buffer, a gap for the arrows to cross, the receive buffer */
        int gap = dvi_clampi(room / 12, 12, 64);
        L->send_x0 = L->cell_x0;
        L->cell_w = (room - gap) / (2 * L->ncells);
        L->cell_x0 = L->send_x0 + L->ncells * (L->cell_w > 1 ? L->cell_w : 1) + gap;
    } else if (L->ncells > 0) {
        L->cell_w = room / L->ncells;
    }
    if (L->cell_w < 1)
        L->cell_w = 1;
}

/* Cells stand apart by a gap where there is room, so a cell full of stripes still
 * reads as one cell. */
static int cell_gap(int cell_w)
{
    return cell_w >= 24 ? 5 : cell_w >= 10 ? 3 : 0;
}

/* Cell c of rank r in the buffer whose cell 0 starts at x0. */
static SDL_Rect cell_at(const dv_layout *L, int x0, int r, int c)
{
    int gap = row_gap(L->row_h), in = L->cell_w >= 4;   /* room for an outline? */
    int cg = cell_gap(L->cell_w);
    return (SDL_Rect){ x0 + c * L->cell_w + in + cg / 2,
                       L->grid.y + r * L->row_h + gap / 2 + 1,
                       L->cell_w - 2 * in - cg, L->row_h - gap - 2 > 1 ? L->row_h - gap - 2 : 1 };
}

SDL_Rect dv_layout_cell(const dv_layout *L, int r, int c)
{
    return cell_at(L, L->cell_x0, r, c);
}

SDL_Rect dv_layout_send_cell(const dv_layout *L, int r, int c)
{
    return cell_at(L, L->send_x0, r, c);
}

SDL_Rect dv_layout_out_cell(const dv_layout *L, int r, int c)
{
    return cell_at(L, L->out_x0, r, c);
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

/* The ranks of mask in words, runs of three or more as ranges: "ranks 0-3", "ranks
 * 0,1", "ranks 0,2,4-7", "rank 3". */
static void ranks_text(dv_mask mask, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "rank%s", __builtin_popcountll(mask) > 1 ? "s" : "");
    for (int r = 0, first = 1; r < DV_MAX_RANKS && n < len; r++) {
        if (!(mask >> r & 1))
            continue;
        int e = r;                                   /* the run r..e */
        while (e + 1 < DV_MAX_RANKS && (mask >> (e + 1) & 1))
            e++;
        if (e - r >= 2)
            n += (size_t)snprintf(buf + n, len - n, "%s%d-%d", first ? " " : ",", r, e);
        else
            for (int q = r; q <= e && n < len; q++, first = 0)
                n += (size_t)snprintf(buf + n, len - n, "%s%d", first ? " " : ",", q);
        first = 0;
        r = e;
    }
}

/* The transports of frame f's messages, in words ("" when none were recorded). */
static void frame_vias(const dv_model *m, const dv_frame *f, char *buf, size_t len)
{
    unsigned vias = 0;
    for (int i = 0; i < f->nmsg; i++)
        vias |= m->msgs[f->first_msg + i].vias;
    dv_vias_text(vias, buf, len);
}

void dv_pos_describe(const dv_model *m, int pos, char *buf, size_t len)
{
    int call, k;
    char on[256], via[40];
    pos = dvi_clampi(pos, 0, m->npos - 1);
    const dv_frame *f = pos_frame(m, pos, &call, &k);
    if (call < 0) {
        snprintf(buf, len, "position %d of 0..%d: no collective calls", pos, m->npos - 1);
        return;
    }
    const dv_call *c = &m->calls[call];
    ranks_text(c->members, on, sizeof on);
    if (k < c->nframes) {
        frame_vias(m, f, via, sizeof via);
        snprintf(buf, len, "position %d of 0..%d: call %d of %d, %s on %s: %d of %d steps "
                 "done, next: step %d of %d (%s)%s%s", pos, m->npos - 1, call + 1,
                 m->ncalls, c->coll, on, k, c->nframes, k + 1, c->nframes, f->phase,
                 via[0] ? " via " : "", via);
    }
    else
        snprintf(buf, len, "position %d of 0..%d: call %d of %d, %s on %s: %d of %d steps "
                 "done, call finished", pos, m->npos - 1, call + 1, m->ncalls, c->coll, on,
                 k, c->nframes);
}

/* ==== the grid, the arrows, the moving pieces ==== */

/* The rank that is member v of call c (v counted in rank order), -1 if none. */
static int member_rank(const dv_call *c, int v)
{
    for (int r = 0; r < DV_MAX_RANKS; r++)
        if ((c->members >> r & 1) && v-- == 0)
            return r;
    return -1;
}

/* Dark text on light fills, light text on dark ones. */
static SDL_Color ink_on(SDL_Color c)
{
    return 299 * c.r + 587 * c.g + 114 * c.b > 140000 ? BG : TEXT;
}

/* Alltoall: rank q's send buffer. Every block holds q's data, so it is q's colour; it
 * is labelled with the rank it is for, so that the receive buffers on the right read as
 * its transpose. */
static void draw_send_row(SDL_Renderer *r, dv_text *t, const dv_call *c, const dv_layout *L,
                          int q)
{
    char s[32];
    for (int x = 0; x < L->ncells; x++) {
        SDL_Rect b = dv_layout_send_cell(L, q, x), o = { b.x - 1, b.y - 1, b.w + 2, b.h + 2 };
        if (L->cell_w >= 4) {
            dvi_set_color(r, OUTLINE);
            SDL_RenderDrawRect(r, &o);
        }
        dvi_fill(r, dv_rank_color(q), b.x, b.y, b.w, b.h);
        int v = dv_cell_block(c, x), to = member_rank(c, v);
        if (to < 0 || (x > 0 && dv_cell_block(c, x - 1) == v) || b.h < SMALL_H)
            continue;                                /* one label a block */
        snprintf(s, sizeof s, "for %d", to);
        if (dv_text_width(t, DV_FONT_SMALL, s) + 4 > b.w)
            snprintf(s, sizeof s, "%d", to);
        if (dv_text_width(t, DV_FONT_SMALL, s) + 2 <= b.w)
            dv_text_draw(t, DV_FONT_SMALL, b.x + (b.w - dv_text_width(t, DV_FONT_SMALL, s)) / 2,
                         b.y + (b.h - SMALL_H) / 2, ink_on(dv_rank_color(q)), s);
    }
}

/* Ring attention: rank q's output, a cell per key block (draw.h), the block attended in
 * frame k (the next step) outlined white. */
static void draw_out_row(SDL_Renderer *r, const dv_call *c, const dv_layout *L, int q,
                         const unsigned char *done, int k)
{
    int nc = L->ncells;
    for (int x = 0; x < nc; x++) {
        SDL_Rect b = dv_layout_out_cell(L, q, x), o = { b.x - 1, b.y - 1, b.w + 2, b.h + 2 };
        int owner = -1;
        for (int j = 0; j < DV_MAX_RANKS && owner < 0; j++)
            if ((c->members >> j & 1) && (c->init[j * nc + x] >> j & 1))
                owner = j;
        int next = c->attn_frame[q * nc + x] == k && k < c->nframes;
        if (L->cell_w >= 4 || next) {
            dvi_set_color(r, next ? TEXT : OUTLINE);
            SDL_RenderDrawRect(r, &o);
            if (next && b.w > 4 && b.h > 4)
                SDL_RenderDrawRect(r, &(SDL_Rect){ b.x - 2, b.y - 2, b.w + 4, b.h + 4 });
        }
        SDL_Color col = owner >= 0 ? dv_rank_color(owner) : DIM;
        dvi_fill(r, EMPTY, b.x, b.y, b.w, b.h);
        switch ((dv_attn)done[q * nc + x]) {
        case DV_ATTN_FULL:
            dvi_fill(r, col, b.x, b.y, b.w, b.h);
            break;
        case DV_ATTN_PART:                  /* key j seen by query i >= j: lower left */
            dvi_set_color(r, col);
            for (int i = 0; i < b.w; i++) {
                int y0 = b.y + (int)((long long)i * b.h / (b.w > 0 ? b.w : 1));
                SDL_RenderDrawLine(r, b.x + i, y0, b.x + i, b.y + b.h - 1);
            }
            break;
        case DV_ATTN_SKIP:                  /* all masked: crossed out */
            dvi_fill(r, ABSENT, b.x, b.y, b.w, b.h);
            dvi_set_color(r, OUTLINE);
            SDL_RenderDrawLine(r, b.x, b.y, b.x + b.w - 1, b.y + b.h - 1);
            SDL_RenderDrawLine(r, b.x, b.y + b.h - 1, b.x + b.w - 1, b.y);
            break;
        default:
            break;
        }
    }
}

/* One row per rank: its name, then its cells; a rank outside the call's communicator
 * gets a dimmed name and an empty band. */
static void draw_grid(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_layout *L,
                      const dv_mask *st)
{
    const dv_call *call = &m->calls[L->call];
    char s[32];
    for (int q = 0; q < m->nranks; q++) {
        SDL_Rect c0 = dv_layout_cell(L, q, 0);
        int member = dv_call_index(call, q) >= 0;
        SDL_Color name = member ? dv_rank_color(q) : OUTLINE;
        if (L->row_h >= SMALL_H) {
            dv_font f = L->row_h >= BODY_H + 6 ? DV_FONT_BODY : DV_FONT_SMALL;
            snprintf(s, sizeof s, "rank %d", q);
            dv_text_draw(t, f, PAD, c0.y + (c0.h - dv_text_height(t, f)) / 2, name, s);
        } else {
            dvi_fill(r, name, PAD, c0.y, 8, c0.h);
        }
        if (!member) {
            int x0 = L->send_x0 > 0 ? L->send_x0 : L->cell_x0;
            dvi_fill(r, ABSENT, x0, c0.y, L->cell_x0 + L->ncells * L->cell_w - x0, c0.h);
            if (c0.h >= SMALL_H)
                dv_text_draw(t, DV_FONT_SMALL, x0 + PAD, c0.y + (c0.h - SMALL_H) / 2, OUTLINE,
                             "not in this call's communicator");
            continue;
        }
        if (L->send_x0 > 0)
            draw_send_row(r, t, call, L, q);
        for (int c = 0; c < L->ncells; c++) {
            SDL_Rect b = dv_layout_cell(L, q, c), o = { b.x - 1, b.y - 1, b.w + 2, b.h + 2 };
            if (L->cell_w >= 4) {
                dvi_set_color(r, OUTLINE);
                SDL_RenderDrawRect(r, &o);
            }
            dv_mask mk = st[q * L->ncells + c];
            if (mk == 0)
                dvi_fill(r, EMPTY, b.x, b.y, b.w, b.h);
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
    int side = dvi_clampi(span / 12, 0, 8) + g->src % 3;   /* down: right of centre; up: left */
    *x = L->cell_x0 + g->c0 * L->cell_w + span / 2 + (g->src < g->dst ? side : -side);
    *y0 = g->src < g->dst ? a.y + a.h + 1 : a.y - 2;
    *y1 = g->src < g->dst ? b.y - 2 : b.y + b.h + 1;
}

/* Alltoall: from the right edge of the sender's send block to the left edge of the
 * receiver's receive block, at the middle of their rows. */
static void a2a_geom(const dv_layout *L, const dv_msg *g, int *x0, int *y0, int *x1, int *y1)
{
    int last = dvi_clampi(g->s1 > g->s0 ? g->s1 - 1 : g->s0, 0, L->ncells - 1);
    SDL_Rect a = dv_layout_send_cell(L, g->src, last);
    SDL_Rect b = dv_layout_cell(L, g->dst, dvi_clampi(g->c0, 0, L->ncells - 1));
    *x0 = a.x + a.w + 1;
    *y0 = a.y + a.h / 2;
    *x1 = b.x - 2;
    *y1 = b.y + b.h / 2;
}

/* A line two pixels wide from (x0, y0) to (x1, y1), dashed when asked, and a filled head
 * of size n at (x1, y1). */
static void arrow_line(SDL_Renderer *r, int x0, int y0, int x1, int y1, int dashed, int n)
{
    double dx = x1 - x0, dy = y1 - y0, len = sqrt(dx * dx + dy * dy);
    if (len < 1)
        return;
    double ux = dx / len, uy = dy / len;
    for (double a = 0; a < len; a += dashed ? 8 : len) {
        double b = dashed ? (a + 4 < len ? a + 4 : len) : len;
        for (int w = 0; w < 2; w++)          /* the second pixel beside the first */
            SDL_RenderDrawLine(r, (int)lround(x0 + ux * a - uy * w), (int)lround(y0 + uy * a + ux * w),
                               (int)lround(x0 + ux * b - uy * w), (int)lround(y0 + uy * b + ux * w));
    }
    for (int j = 0; j <= n; j++) {           /* the head: lines across, widening back */
        double bx = x1 - ux * j, by = y1 - uy * j, hw = j * 0.6;
        SDL_RenderDrawLine(r, (int)lround(bx - uy * hw), (int)lround(by + ux * hw),
                           (int)lround(bx + uy * hw), (int)lround(by - ux * hw));
    }
}

/* The arrows of frame f: solid white where the receiver copies, dashed grey with a '+'
 * where it adds. Between rows they go behind the cells (drawn first), so they show in
 * the gaps and never hide a cell's colours, with the head and the label in the gap at
 * the receiver; alltoall's cross from the send buffers to the receive buffers over
 * the cells (after them: see dv_draw). */
static void draw_arrows(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_layout *L,
                        const dv_frame *f)
{
    char s[64];
    int gap = row_gap(L->row_h);
    for (int i = 0; i < f->nmsg; i++) {
        const dv_msg *g = &m->msgs[f->first_msg + i];
        int x, y0, y1, x1;
        SDL_Color c = dv_kind_color(g->add ? DV_C_ADD_ARROW : DV_C_COPY_ARROW);
        dvi_set_color(r, c);
        if (L->send_x0 > 0) {
            if (g->c1 > g->c0) {                     /* an empty block moves nothing */
                a2a_geom(L, g, &x, &y0, &x1, &y1);
                arrow_line(r, x, y0, x1, y1, g->add, dvi_clampi(L->row_h / 8, 2, 7));
            }
            continue;
        }
        arrow_geom(L, g, &x, &y0, &y1);
        arrow_line(r, x, y0, x, y1, g->add, gap < 6 ? gap : 6);
        if (gap >= SMALL_H - 3) {
            /* the label names the sender and the receiver as well as the cells: an
             * arrow between ranks that are not neighbours runs behind the rows between */
            int far = g->src - g->dst > 1 || g->dst - g->src > 1, dir = y1 > y0 ? 1 : -1;
            char who[24] = "";
            if (far)
                snprintf(who, sizeof who, "%d->%d ", g->src, g->dst);
            int n = g->c1 - g->c0 == 1
                ? snprintf(s, sizeof s, "%s%sc%d", who, g->add ? "+" : "", g->c0)
                : snprintf(s, sizeof s, "%s%sc%d-%d", who, g->add ? "+" : "", g->c0,
                           g->c1 - 1);
            if (g->vias != 0 && n > 0 && (size_t)n + 1 < sizeof s) {   /* "c2 shm" */
                s[n] = ' ';
                dv_vias_text(g->vias, s + n + 1, sizeof s - (size_t)n - 1);
            }
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
        int x, y0, y1, x1, pw = dvi_clampi((g->c1 - g->c0) * L->cell_w * 3 / 5, 6, 400),
            ph = dvi_clampi(a.h * 3 / 4, 4, 40), xc, yc;
        if (L->send_x0 > 0) {               /* along the line across the buffers */
            a2a_geom(L, g, &x, &y0, &x1, &y1);
            xc = x + (int)((x1 - x) * frac);
            yc = y0 + (int)((y1 - y0) * frac);
        } else {
            arrow_geom(L, g, &x, &y0, &y1);
            xc = x;
            yc = a.y + a.h / 2 + (int)((b.y - a.y) * frac);
        }
        SDL_Rect box = { xc - pw / 2, yc - ph / 2, pw, ph }, o = { box.x - 1, box.y - 1, pw + 2, ph + 2 };
        dvi_set_color(r, dv_kind_color(g->add ? DV_C_ADD_ARROW : DV_C_COPY_ARROW));
        SDL_RenderDrawRect(r, &o);
        if (mk == 0)
            dvi_fill(r, EMPTY, box.x, box.y, box.w, box.h);
        else
            stripes(r, box, mk);
    }
}

/* ==== header, panel, timeline, overlays ==== */

static void draw_header(dv_text *t, const dv_model *m, const dv_view *v, const dv_layout *L,
                        int pos)
{
    char s[512], sp[64];
    int call, k, right = L->w - PAD;
    pos_frame(m, pos, &call, &k);
    if (v->speed > 0) {                    /* a window; not a picture (speed 0) */
        snprintf(sp, sizeof sp, "%s, %g steps/s   h: keys",
                 v->playing ? "playing" : "paused", v->speed);
        right -= dv_text_width(t, DV_FONT_BODY, sp) + 2 * PAD;
        dv_text_draw(t, DV_FONT_BODY, L->w - PAD - dv_text_width(t, DV_FONT_BODY, sp),
                     PAD / 2 + 3, DIM, sp);
    }
    if (v->context != NULL) {              /* what this call was for, then the title */
        snprintf(s, sizeof s, "%s  \xc2\xb7  %s", v->context, m->title);
        dvi_text_fit(t, DV_FONT_TITLE, PAD, PAD / 2, right - PAD, TEXT, s);
    } else {
        dvi_text_fit(t, DV_FONT_TITLE, PAD, PAD / 2, right - PAD, TEXT, m->title);
    }
    dv_pos_describe(m, pos, s, sizeof s);
    dvi_text_fit(t, DV_FONT_BODY, PAD, PAD / 2 + TITLE_H, L->w - 2 * PAD, TEXT, s);
    dv_step_text(m, pos, s, sizeof s);
    dvi_text_fit(t, DV_FONT_BODY, PAD, PAD / 2 + TITLE_H + BODY_H, L->w - 2 * PAD, DIM, s);
    int y = L->header.h + 2;
    if (call < 0)                          /* no grid: no column titles */
        return;
    dv_text_draw(t, DV_FONT_SMALL, PAD, y, DIM, "rank");
    const dv_call *c = &m->calls[call];
    if (L->out_x0 > 0) {
        snprintf(s, sizeof s, "K/V in hand: a block of the sequence's %lld positions",
                 c->count);
        dvi_text_fit(t, DV_FONT_SMALL, L->cell_x0, y, L->out_x0 - L->cell_x0 - PAD, DIM, s);
        dvi_text_fit(t, DV_FONT_SMALL, L->out_x0, y, L->grid.x + L->grid.w - L->out_x0, DIM,
                     "output: key blocks met (whole: all pairs; triangle: causal "
                     "mask; X: all masked)");
    } else if (L->send_x0 > 0) {
        dv_text_draw(t, DV_FONT_SMALL, L->send_x0, y, DIM,
                     "send buffer: the rank's data, a block for each rank");
        snprintf(s, sizeof s, "receive buffer: block j comes from rank j (%lld elements, "
                 "cells c0..c%d)", c->count, c->ncells - 1);
        dv_text_draw(t, DV_FONT_SMALL, L->cell_x0, y, DIM, s);
    } else {
        char cells[32] = "c0";
        if (c->ncells > 1)
            snprintf(cells, sizeof cells, "s c0..c%d", c->ncells - 1);
        snprintf(s, sizeof s, "%lld element%s in %d cell%s%s; a cell's stripes: the ranks "
                 "whose data it holds", c->count, c->count == 1 ? "" : "s", c->ncells,
                 c->ncells > 1 ? "" : " ", cells);
        dv_text_draw(t, DV_FONT_SMALL, L->cell_x0, y, DIM, s);
    }
    dv_text_draw(t, DV_FONT_SMALL, L->panel.x, y, DIM, "bytes sent in this call");
    for (int i = 0; i < c->ncells; i++) {          /* each cell's name, where it fits */
        snprintf(s, sizeof s, "c%d", i);
        int tw = dv_text_width(t, DV_FONT_SMALL, s);
        if (tw + 4 > L->cell_w)
            break;
        dv_text_draw(t, DV_FONT_SMALL, L->cell_x0 + i * L->cell_w + (L->cell_w - tw) / 2,
                     y + SMALL_H + 2, DIM, s);
        if (L->out_x0 > 0)                         /* the output's cells: the same keys */
            dv_text_draw(t, DV_FONT_SMALL, L->out_x0 + i * L->cell_w + (L->cell_w - tw) / 2,
                         y + SMALL_H + 2, DIM, s);
    }
}

/* 1 when some message of call c names its transport: the arrows' labels then do. */
static int call_has_vias(const dv_model *m, const dv_call *c)
{
    for (int f = c->first_frame; f < c->first_frame + c->nframes; f++)
        for (int i = 0; i < m->frames[f].nmsg; i++)
            if (m->msgs[m->frames[f].first_msg + i].vias != 0)
                return 1;
    return 0;
}

static void draw_panel(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_layout *L, int k)
{
    double sent[DV_MAX_RANKS] = { 0 }, expect[DV_MAX_RANKS] = { 0 };
    char s[256], a[32], b[32];
    const dv_call *c = &m->calls[L->call];
    int known = dv_formula(m, L->call, expect, s, sizeof s);
    dv_bytes_sent(m, L->call, k, sent);
    int y = L->grid.y + L->grid.h + 4;
    dv_text_draw(t, DV_FONT_BODY, PAD, y, TEXT, known ? s : "no cost model for this collective");
    snprintf(s, sizeof s, "%s%s", L->out_x0 > 0
             ? "arrows: the K/V block in hand, copied to the right neighbour while the "
               "rank attends to it (outlined white); label c2 = the receiver's cell c2"
             : L->send_x0 > 0
             ? "arrows: from the sender's block for the receiver (left) to the receiver's "
               "block for the sender (right); solid white: copied, dashed grey '+': added"
             : "arrows: solid white = copied into the receiver's cells, dashed grey '+' = "
               "added to them; label c0-2 = the receiver's cells c0 to c2; 3->1 = from "
               "rank 3 to rank 1", call_has_vias(m, c) ? "; then the transport"
                                                 : "");
    dvi_text_fit(t, DV_FONT_SMALL, PAD, y + BODY_H, L->w - 2 * PAD, DIM, s);
    int bw = L->panel.w * 2 / 5;
    for (int q = 0; q < m->nranks; q++) {
        SDL_Rect cq = dv_layout_cell(L, q, 0);
        double f = known && expect[q] > 0 ? sent[q] / expect[q] : 0;
        if (dv_call_index(c, q) < 0)
            continue;                                /* not in the call: nothing to send */
        dvi_fill(r, EMPTY, L->panel.x, cq.y, bw, cq.h);
        if ((int)(bw * (f > 1 ? 1 : f)) > 0)
            dvi_fill(r, dv_rank_color(q), L->panel.x, cq.y, (int)(bw * (f > 1 ? 1 : f)), cq.h);
        if (cq.h + 4 < SMALL_H)
            continue;
        dt_format_bytes(sent[q], a, sizeof a);
        dt_format_bytes(expect[q], b, sizeof b);
        snprintf(s, sizeof s, known && expect[q] > 0 ? "%s of %s" : "%s", a, b);
        dv_text_draw(t, DV_FONT_SMALL, L->panel.x + bw + 4, cq.y + (cq.h - SMALL_H) / 2, TEXT, s);
    }
}

/* The timeline's colours. Each event goes to one, in one of three lanes of its rank's
 * row: compute (forward, backward, optimizer, ...), sends, and receives with the
 * reductions and copies that follow them. So the top lane is the model's work and the
 * two below the collectives': overlap and bubbles show as gaps in one against the other. */
enum { TL_FWD, TL_BWD, TL_OPT, TL_COMPUTE, TL_SEND, TL_RECV, TL_REDUCE, TL_STAGE, TL_N };
static const struct { const char *name; dv_color_kind c; } tl_kind[TL_N] = {   /* drawn in order */
    { "forward", DV_C_FORWARD }, { "backward", DV_C_BACKWARD },
    { "optimizer", DV_C_OPTIMIZER }, { "other compute", DV_C_COMPUTE },
    { "send", DV_C_SEND }, { "recv", DV_C_RECV },
    { "reduce/copy", DV_C_REDUCE }, { "d2h/h2d", DV_C_STAGE },
};

/* The colour of e (-1: not drawn, a mark) and its lane, 0..2. */
static int tl_class(const dt_event *e, int *lane)
{
    *lane = e->kind == DT_EV_COMPUTE ? 0 : e->kind == DT_EV_SEND || e->kind == DT_EV_D2H ? 1 : 2;
    switch (e->kind) {
    case DT_EV_COMPUTE:
        switch (dt_train_dir(e->phase, NULL)) {    /* "forward", "forward-attn", ... */
        case 'F': return TL_FWD;
        case 'B': return TL_BWD;
        default: return !strcmp(e->phase, "optimizer") ? TL_OPT : TL_COMPUTE;
        }
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
    dvi_fill(r, BG, b.x, b.y, b.w, b.h);
    for (int q = 0; q < m->nranks && sep; q++)
        dvi_fill(r, TRACK, b.x, b.y + q * row + 1, b.w, row - 1);
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
        dvi_set_color(r, dv_kind_color(tl_kind[k].c));
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
        dvi_fill(r, dv_kind_color(tl_kind[k].c), x, b.y - SMALL_H - 1, 9, 9);
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
        dvi_fill(r, (SDL_Color){ 255, 255, 255, 48 }, x0, b.y, x1 - x0 > 1 ? x1 - x0 : 1, b.h);
    }
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
    dvi_fill(r, TEXT, b.x + (int)((tc - m->t_begin) / span * b.w) - 1, b.y - 2, 2, b.h + 4);
}

/* ==== the picture ==== */

void dv_draw(SDL_Renderer *r, dv_text *t, const dv_model *m, const dv_view *v, int w, int h)
{
    if (v->tt != NULL) {
        dv_tt_draw(r, t, m, v, w, h);
        return;
    }
    dv_mask st[DV_MAX_RANKS * DV_MAX_CELLS];          /* masks after k frames */
    int pos = dvi_clampi((int)v->pos, 0, m->npos - 1), call, k;
    dv_layout L;
    dv_layout_compute(m, pos, w, h, &L);
    const dv_frame *f = pos_frame(m, pos, &call, &k);
    if (call >= 0 && k == m->calls[call].nframes)
        f = NULL;                                    /* the call is done: no arrows */
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
    dvi_set_color(r, BG);
    SDL_RenderClear(r);
    draw_header(t, m, v, &L, pos);
    if (call >= 0) {
        const dv_call *c = &m->calls[call];
        unsigned char done[DV_MAX_RANKS * DV_MAX_CELLS];
        if (c->ring_attn)                            /* the K/V in hand, the output */
            dv_attn_state(m, call, k, st, done);
        else
            dv_state(m, call, k, st);
        if (f != NULL && L.send_x0 == 0)
            draw_arrows(r, t, m, &L, f);             /* behind the cells */
        draw_grid(r, t, m, &L, st);
        for (int q = 0; q < m->nranks && c->ring_attn && L.out_x0 > 0; q++)
            if (dv_call_index(c, q) >= 0)
                draw_out_row(r, c, &L, q, done, k);
        if (f != NULL && L.send_x0 > 0)
            draw_arrows(r, t, m, &L, f);             /* across the two buffers */
        if (f != NULL && v->pos > pos)
            draw_pieces(r, m, &L, f, st, v->pos - pos);
        draw_panel(r, t, m, &L, k);
    } else {
        dv_text_draw(t, DV_FONT_BODY, PAD, L.grid.y, DIM, m->trace.n > 0 ?
                     "no collective calls here: only the timeline below" :
                     "no collective calls here, and no events: the timeline below is empty");
    }
    if (L.timeline.w > 0 && L.timeline.h > 0)
        draw_timeline(r, t, m, &L, v);
    if (v->note != NULL)
        dv_text_draw(t, DV_FONT_BODY, PAD, h - BODY_H - 1, NOTE, v->note);
    if (v->help)
        dv_draw_help(r, t, w, h);
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

/* s as a PNG in path. IMG_SavePNG would close the file without looking at what the
 * close said, and libpng does not look at what each write said, so a full disk went
 * unseen: the file is opened here and its error flag, flush and close are checked.
 * A file left half-written is removed. Returns 0, or -1 with a sentence naming path. */
static int save_png(SDL_Surface *s, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        return -1;
    }
    SDL_RWops *rw = SDL_RWFromFP(f, SDL_FALSE);
    int rc = rw != NULL ? IMG_SavePNG_RW(s, rw, 0) : -1, e = 0;
    if (rc != 0)
        snprintf(err, errlen, "cannot write %s: %s", path, IMG_GetError());
    if (rw != NULL)
        SDL_RWclose(rw);                   /* frees rw only: f stays open */
    errno = 0;
    if (rc == 0 && (fflush(f) != 0 || ferror(f)))
        e = errno != 0 ? errno : EIO;
    if (fclose(f) != 0 && rc == 0 && e == 0)
        e = errno;
    if (rc == 0 && e != 0) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(e));
        rc = -1;
    }
    struct stat st;
    if (rc != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
        remove(path);
    return rc == 0 ? 0 : -1;
}

int dv_render_png(const dv_model *m, const dv_view *v, int w, int h, const char *path,
                  char *err, size_t errlen)
{
    SDL_Surface *s = dv_render_surface(m, v, w, h, err, errlen);
    if (s == NULL)
        return -1;
    int rc = save_png(s, path, err, errlen);
    SDL_FreeSurface(s);
    return rc;
}
