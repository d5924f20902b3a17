/* Drawing the training timetable (timetable.h): the picture papers draw of a training
 * step (the GPipe and 1F1B figures, DDP's overlap of buckets with backward), e.g. GPipe
 * with P = 3 stages and M = 2 micro-batches, one slot per forward, two per backward:
 *
 *   pipeline parallel (pp)   schedule gpipe stages 3 micro 2        header: the mode,
 *   training step 1 (1 of 1)   window slots 0 to 12                  the step, the window,
 *   bubble 50% measured over 3 stages, 50% = (P-1)/(M+P-1) ...       its measures
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
 * Everything is a function of (model, view, size). This file draws what frames the rows
 * (the header, the time axis, the legend, the keys) and puts the picture together
 * (dv_tt_draw); tt_rows.c holds the layout, the one geometry of the drawing and of
 * dv_tt_hit, and draws the rows: names, lanes, blocks, waiting, pp's arrows and the
 * cursor. tt_draw_internal.h is what the two files share. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tt_draw_internal.h"

/* The keys, as the bottom line says them (items two spaces apart; a narrow picture
 * keeps the first items that fit and the last one). dv_key_help has the whole list. */
static const char tt_keys[] = "\u2190/\u2192 training step  +/\u2212 zoom  drag or ,/. pan  "
                              "click a block: its collective  t: collective view  h: help";

/* ==== header, axis, legend, bottom line ==== */

/* The mode in words, for the title. */
static const char *mode_name(const char *mode)
{
    static const char *const names[][2] = {
        { "pp", "pipeline parallel" }, { "ddp", "distributed data parallel" },
        { "fsdp", "fully sharded data parallel" }, { "tp", "tensor parallel" },
        { "dp", "data parallel" }, { "hybrid", "hybrid parallel" },
        { "moe", "mixture of experts" }, { "dp-threads", "DataParallel, one rank's threads" },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(mode, names[i][0]) == 0)
            return names[i][1];
    return NULL;
}

/* Decimals enough to tell values `step` apart. */
static int decimals(double step)
{
    return step >= 1 || !(step > 0) ? 0 : dvi_clampi((int)ceil(-log10(step) - 1e-9), 0, 9);
}

static void draw_header(dv_text *t, const dv_model *m, const dv_view *v, const dvi_tt_layout *L,
                        int w)
{
    const dv_tt *tt = v->tt;
    char s[320], win[96];
    const char *name = mode_name(tt->mode);
    /* the settings the "# train" line gives, unless it contradicts the events (the mode
     * is the events' then; the line below the step's says where they differ) */
    const char *set = tt->disagree[0] ? "settings: not as its '# train' line says" :
                      tt->settings;
    if (tt->mode[0] == '\0')
        snprintf(s, sizeof s, "%s", m->title);
    else if (name != NULL)
        snprintf(s, sizeof s, "%s (%s)   %s", name, tt->mode, set);
    else
        snprintf(s, sizeof s, "%s   %s", tt->mode, set);
    dv_font tf = dv_text_width(t, DV_FONT_TITLE, s) <= w - 2 * PAD ? DV_FONT_TITLE : DV_FONT_BODY;
    dvi_text_fit(t, tf, PAD, PAD / 2, w - 2 * PAD, TEXT, s);

    dv_font f = w >= 700 ? DV_FONT_BODY : DV_FONT_SMALL;
    int y = PAD / 2 + TITLE_H;
    double k = dv_tt_axis_scale(tt), base = dv_tt_axis_base(tt), a = (L->t0 - base) * k,
        b = (L->t1 - base) * k;
    int d = decimals((b - a) / 50);
    if (!tt->slots)
        snprintf(win, sizeof win, "window %.*f to %.*f ms", d, a, d, b);
    else
        snprintf(win, sizeof win, "window slots %.*f to %.*f (%s)", d, a, d, b,
                 tt->schedule == 3 ? "a forward, a B and a W take 1 slot each"
                 : tt->v > 1 ? "a chunk's forward takes 1 slot, its backward 2"
                 : "a forward takes 1 slot, a backward 2");
    int x = PAD;
    if (tt->nsteps > 0) {
        int st = dvi_clampi(v->tt_step, 0, tt->nsteps - 1);
        snprintf(s, sizeof s, "training step %d (%d of %d)", tt->steps[st].step, st + 1,
                 tt->nsteps);
        x += dv_text_draw(t, f, x, y, TEXT, s) + 24;
        dv_text_draw(t, f, x, y, DIM, win);
        dv_tt_describe_step(tt, st, s, sizeof s);
        dvi_text_fit(t, f, PAD, y + BODY_H, w - 2 * PAD, TEXT, s);
    } else {
        x += dv_text_draw(t, f, x, y, TEXT, "no training steps in this trace") + 24;
        dv_text_draw(t, f, x, y, DIM, win);
    }
    if (tt->disagree[0])                    /* the header's line the layout added */
        dvi_text_fit(t, f, PAD, y + 2 * BODY_H, w - 2 * PAD, NOTE, tt->disagree);
}

/* The round numbers (1, 2 or 5 times a power of ten; whole slots for a schedule) at
 * least ~90 px apart in the window, as times, into ticks[0..max-1]; returns how many. */
static int axis_ticks(const dv_tt *tt, const dvi_tt_layout *L, double *ticks, int max,
                      double *step_out)
{
    double k = dv_tt_axis_scale(tt), base = dv_tt_axis_base(tt);
    double a = (L->t0 - base) * k, b = (L->t1 - base) * k;
    double raw = (b - a) * 90 / (L->area.w > 0 ? L->area.w : 1);
    double p = pow(10, floor(log10(raw)));
    if (!(raw > 0) || !isfinite(p) || !(p > 0))
        return 0;
    double step = raw <= p ? p : raw <= 2 * p ? 2 * p : raw <= 5 * p ? 5 * p : 10 * p;
    if (tt->slots && step < 1)
        step = 1;
    *step_out = step;
    int n = 0;
    for (double u = ceil(a / step) * step; u <= b + step * 1e-9 && n < max; u += step)
        ticks[n++] = u / k + base;
    return n;
}

static void draw_axis(SDL_Renderer *r, dv_text *t, const dv_tt *tt, const dvi_tt_layout *L,
                      const double *ticks, int nticks, double step)
{
    char s[48];
    int y = L->axis_y, right = -1000;
    double k = dv_tt_axis_scale(tt), base = dv_tt_axis_base(tt);
    dvi_fill(r, OUTLINE, L->area.x, y, L->area.w, 1);
    dv_text_draw(t, DV_FONT_SMALL, PAD, y + 3, DIM, tt->slots ? "slot" : "time, ms");
    for (int i = 0; i < nticks; i++) {
        int x = (int)dvi_tt_time_x(L, ticks[i]);
        double u = (ticks[i] - base) * k;
        dvi_fill(r, OUTLINE, x, y, 1, 4);
        snprintf(s, sizeof s, "%.*f", decimals(step), fabs(u) < step * 1e-6 ? 0.0 : u);
        int tw = dv_text_width(t, DV_FONT_SMALL, s), lx = dvi_clampi(x - tw / 2, L->area.x - 4,
                                                                     L->area.x + L->area.w - tw);
        if (lx > right + 6)
            right = lx + dv_text_draw(t, DV_FONT_SMALL, lx, y + 4, DIM, s);
    }
}

/* One legend item: a swatch sw px wide and its name, on the next line when it does not
 * fit on this one (and the legend has one more). Returns the swatch's x. */
static int legend_item(dv_text *t, const dvi_tt_layout *L, int *x, int *y, int w, int sw,
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

/* Where the trace records transports, what a block's "· shm" says, after the kinds
 * when it fits on their last line. */
static void legend_vias(dv_text *t, const dv_tt *tt, int x, int y, int w)
{
    char via[40], s[96];
    if (tt->vias == 0)
        return;
    dv_vias_text(tt->vias, via, sizeof via);
    snprintf(s, sizeof s, "label \u00b7 %s: the transport (%s)", via,
             "mpi, staging, shm or ipc");
    if (x + dv_text_width(t, DV_FONT_SMALL, s) <= w - PAD)
        dv_text_draw(t, DV_FONT_SMALL, x, y, DIM, s);
}

/* The kinds' swatches (waiting hatched as in the lanes, idle the lanes' background;
 * zb-h1's W where the timetable has W blocks), then the transports where the trace has
 * them; pp adds a line: the arrows' two styles, the chunks' letters and shades where a
 * stage has several, and what "stash k" counts. */
static void draw_legend(SDL_Renderer *r, dv_text *t, const dv_tt *tt, const dvi_tt_layout *L,
                        int w)
{
    static const struct { const char *name; int kind; } items[] = {
        { "forward", DV_C_FORWARD }, { "backward", DV_C_BACKWARD },
        { "W: weights' gradient", DV_C_WEIGHTS },
        { "optimizer", DV_C_OPTIMIZER }, { "other compute", DV_C_COMPUTE },
        { "communication", DV_C_COMM }, { "waiting for a peer", DV_C_WAIT },
        { "idle", -1 }, { "faded: another training step", -2 },
    };
    static const struct { const char *name; char what; } arrows[] = {
        { "activations", 'A' }, { "gradients", 'G' },
    };
    int x = PAD, y = L->legend_y, lock = strcmp(tt->mode, "dp-threads") == 0;
    int has_w = 0;
    for (int k = 0; k < tt->nblocks && !has_w; k++)
        has_w = tt->blocks[k].kind == DV_TT_WEIGHTS;
    for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
        if (items[i].kind == DV_C_WEIGHTS && !has_w)
            continue;
        const char *name = lock && items[i].kind == DV_C_WAIT ? "waiting for the lock"
                                                               : items[i].name;
        SDL_Rect sw = { legend_item(t, L, &x, &y, w, 10, name), y + 2, 10, 10 };
        if (items[i].kind == -2) {        /* faded: as draw_fills fades a backward */
            dvi_fill(r, dvi_tt_faded(DV_TT_BACKWARD), sw.x, sw.y, sw.w, sw.h);
            continue;
        }
        if (items[i].kind < 0) {
            dvi_fill(r, LANE, sw.x, sw.y, sw.w, sw.h);
            dvi_set_color(r, OUTLINE);
            SDL_RenderDrawRect(r, &sw);
            continue;
        }
        dvi_fill(r, dv_kind_color(items[i].kind), sw.x, sw.y, sw.w, sw.h);
        if (items[i].kind == DV_C_WAIT)
            dvi_tt_hatch(r, sw, dvi_mix(dv_kind_color(DV_C_WAIT), dv_kind_color(DV_C_COMM), 0.6));
    }
    legend_vias(t, tt, x, y, w);
    if (!L->pp)
        return;
    x = PAD;
    y = L->legend_y + (L->nlegend - 1) * LEGEND_H;
    x += dv_text_draw(t, DV_FONT_SMALL, x, y, DIM, "arrows:") + 6;
    for (int i = 0; i < 2; i++) {
        int sx = legend_item(t, L, &x, &y, w, 22, arrows[i].name);
        dvi_set_color(r, dvi_tt_arrow_color(arrows[i].what, 255));
        dvi_tt_arrow_line(r, sx, y + 7, sx + 21, y + 7, arrows[i].what == 'G', 1);
    }
    if (tt->v > 1) {                    /* interleaved: a swatch per chunk's shade */
        const char *chunks = "F2b: micro-batch 2, the stage's chunk b";
        int need = 3 * 12 + 4 + dv_text_width(t, DV_FONT_SMALL, chunks);
        if (x + 10 + need <= w - PAD) {
            x += 10;
            for (int j = 0; j < DVI_TT_SHADES && j < tt->v; j++, x += 12)
                dvi_fill(r, dvi_tt_chunk_color(DV_TT_FORWARD, j), x, y + 2, 10, 10);
            x += 4 + dv_text_draw(t, DV_FONT_SMALL, x + 4, y, DIM, chunks);
        }
    }
    const char *stash = tt->v > 1 ? "stash k: k chunks' micro-batches held at the cursor"
                                  : "stash k: the activations of k micro-batches held at the cursor";
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
    dvi_tt_layout L;
    double ticks[64], step = 1;
    dvi_tt_layout_compute(v, w, h, &L);
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
    dvi_set_color(r, BG);
    SDL_RenderClear(r);
    draw_header(t, m, v, &L, w);
    int nticks = L.area.w > 1 ? axis_ticks(tt, &L, ticks, 64, &step) : 0;
    if (L.row > 0) {
        dvi_tt_rows(r, t, v, &L, ticks, nticks);
        draw_axis(r, t, tt, &L, ticks, nticks, step);
        draw_legend(r, t, tt, &L, w);
    }
    if (v->note != NULL)
        dv_text_draw(t, DV_FONT_BODY, PAD, h - BODY_H - 1, NOTE, v->note);
    else
        draw_keys(t, L.keys_y, w);
    if (v->help)
        dv_draw_help(r, t, w, h);
}
