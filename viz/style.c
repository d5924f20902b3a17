/* What dtviz's two views share, so that they look alike: the colours of ranks and of
 * kinds of events, text cut to a width, the keys and their help overlay. draw.c (the
 * collective view) and tt_draw.c / tt_rows.c (the timetable) both draw with these, and
 * nothing here calls either view. Declared in draw.h and draw_internal.h. */
#include <math.h>
#include <stdio.h>

#include "draw.h"
#include "draw_internal.h"

/* ==== colours ====
 *
 * A rank's colour means that rank's data, and nothing else does: ranks get vivid
 * colours (far from grey), and everything that is not a rank (the kinds of events, the
 * arrows, the interface) greys or muted tints of grey, apart from every rank colour and
 * from each other by at least 60 in RGB and 20 in CIELAB (tests/viz_model.c checks it). */

/* Sixteen vivid colours that stay apart on a dark background; ranks above 15 walk the
 * hue circle by the golden angle at three lightnesses, so neighbours still differ. */
static const SDL_Color palette[16] = {
    { 230, 25, 75, 255 }, { 60, 180, 75, 255 }, { 255, 225, 25, 255 }, { 67, 99, 216, 255 },
    { 245, 130, 49, 255 }, { 145, 30, 180, 255 }, { 66, 212, 244, 255 }, { 240, 50, 230, 255 },
    { 191, 239, 69, 255 }, { 255, 110, 180, 255 }, { 0, 150, 136, 255 }, { 160, 110, 255, 255 },
    { 154, 99, 36, 255 }, { 0, 90, 200, 255 }, { 128, 0, 0, 255 }, { 0, 220, 150, 255 },
};

SDL_Color dv_rank_color(int r)
{
    if (r >= 0 && r < 16)
        return palette[r];
    double h = fmod(r * 137.508, 360.0) / 60.0, v = 0.98 - 0.17 * (r % 3), s = 0.85;
    int i = (int)h;
    double f = h - i, p = v * (1 - s), q = v * (1 - s * f), u = v * (1 - s * (1 - f));
    double rgb[6][3] = { { v, u, p }, { q, v, p }, { p, v, u }, { p, q, v }, { u, p, v },
                         { v, p, q } };
    /* the low bits of r keep two ranks apart even if their hues round alike */
    return (SDL_Color){ (Uint8)(rgb[i][0] * 248 + (r & 3)), (Uint8)(rgb[i][1] * 248),
                        (Uint8)(rgb[i][2] * 248 + (r >> 2 & 3)), 255 };
}

/* Muted tints of grey, each in the part of colour space the ranks' vivid colours keep
 * out of, and apart from each other: cool for the forward, warm for the backward. */
SDL_Color dv_kind_color(dv_color_kind k)
{
    static const SDL_Color c[DV_C_N] = {
        [DV_C_FORWARD] = { 158, 164, 215, 255 }, [DV_C_BACKWARD] = { 228, 133, 115, 255 },
        [DV_C_OPTIMIZER] = { 188, 108, 191, 255 }, [DV_C_COMPUTE] = { 138, 129, 138, 255 },
        [DV_C_WEIGHTS] = { 166, 154, 79, 255 },
        [DV_C_SEND] = { 230, 227, 129, 255 }, [DV_C_RECV] = { 123, 196, 148, 255 },
        [DV_C_REDUCE] = { 254, 226, 193, 255 }, [DV_C_STAGE] = { 103, 118, 79, 255 },
        [DV_C_COMM] = { 186, 219, 244, 255 }, [DV_C_WAIT] = { 74, 57, 87, 255 },
        [DV_C_COPY_ARROW] = { 255, 255, 255, 255 }, [DV_C_ADD_ARROW] = { 189, 172, 155, 255 },
    };
    return k >= 0 && k < DV_C_N ? c[k] : c[DV_C_COMPUTE];
}

/* ==== text and help ==== */

/* Draws s at (x, y), cut with "..." where it would pass x + maxw. */
void dvi_text_fit(dv_text *t, dv_font f, int x, int y, int maxw, SDL_Color c, const char *s)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s", s);
    n = n < (int)sizeof buf ? n : (int)sizeof buf - 1;
    while (n > 0 && dv_text_width(t, f, buf) > maxw) {
        n--;
        snprintf(buf + n, sizeof buf - (size_t)n, "...");
    }
    dv_text_draw(t, f, x, y, c, buf);
}

const char *const dv_key_help[][2] = {
    { "space", "play / pause" },
    { "Right, Left", "one position forward / back; timetable: next / previous training step" },
    { "+, -", "faster / slower (also = and keypad + -); timetable: zoom in / out" },
    { ", .  wheel", "timetable: pan left / right; the wheel zooms around the pointer" },
    { "drag", "timetable: pan the window" },
    { "Home, End", "first / last position (timetable: first / last training step)" },
    { "r", "restart from the first position, playing" },
    { "a", "next algorithm (built-in; gpipe, 1f1b, interleaved, zb-h1, ddp)" },
    { "n, N", "one rank (stage) fewer / more (built-in schedules)" },
    { "m, M", "one micro-batch (ddp: bucket) fewer / more (built-in training)" },
    { "v, V", "one model chunk a stage fewer / more (built-in interleaved)" },
    { "click", "on the timeline: jump to that time; timetable: cursor, pick a collective" },
    { "t, Enter", "timetable: show the picked collective chunk by chunk; t: back" },
    { "h", "this help on / off" },
    { "q, Esc", "quit" },
    { NULL, NULL },
};

void dv_draw_help(SDL_Renderer *r, dv_text *t, int w, int h)
{
    int n = 0;
    while (dv_key_help[n][0] != NULL)
        n++;
    int bw = w - 2 * PAD < 760 ? w - 2 * PAD : 760, bh = (n + 2) * BODY_H + 2 * PAD;
    int x = (w - bw) / 2, y = (h - bh) / 2;
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_BLEND);
    dvi_fill(r, (SDL_Color){ 8, 9, 12, 232 }, x, y, bw, bh);
    SDL_SetRenderDrawBlendMode(r, SDL_BLENDMODE_NONE);
    dvi_set_color(r, OUTLINE);
    SDL_RenderDrawRect(r, &(SDL_Rect){ x, y, bw, bh });
    dv_text_draw(t, DV_FONT_BODY, x + PAD, y + PAD, NOTE, "keys (h hides this)");
    for (int i = 0; i < n; i++) {
        dv_text_draw(t, DV_FONT_BODY, x + PAD, y + PAD + (i + 2) * BODY_H, TEXT, dv_key_help[i][0]);
        dv_text_draw(t, DV_FONT_BODY, x + PAD + 110, y + PAD + (i + 2) * BODY_H, DIM,
                     dv_key_help[i][1]);
    }
}
