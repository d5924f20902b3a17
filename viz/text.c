/* dv_text: SDL2_ttf glyphs rendered once into an atlas, then drawn as texture copies.
 *
 * Rendering a string with TTF_RenderUTF8 makes a surface and a texture every time it is
 * called: at 60 frames a second with a hundred labels that is most of the frame. Instead
 * dv_text_open renders each glyph once, per size, into one white texture (the atlas):
 *
 *     atlas   | ! " # $ % & ' ( ) * + , - . / 0 1 2 ... |   one row after another
 *             | ... x y z { | } ~ × → ← …               |
 *
 * and dv_text_draw copies a glyph's rectangle per character, tinted with
 * SDL_SetTextureColorMod. Kerning is ignored: labels are short. */
#include <SDL_ttf.h>
#include <stdio.h>
#include <stdlib.h>

#include "draw.h"

#define FONT_DEFAULT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"  /* fonts-dejavu-core */
#define ATLAS_W 512

/* The point size of each dv_font; dv_layout_compute's line heights assume these. */
static const int font_pt[DV_NFONTS] = { 10, 13, 16 };

/* Beyond ASCII 32..126, the few symbols the labels use. */
static const Uint32 extra[] = { 0xD7, 0xB7, 0x2192, 0x2190, 0x2191, 0x2193, 0x2026, 0x2212 };
#define NASCII 95
#define NGLYPHS (NASCII + (int)(sizeof extra / sizeof extra[0]))

typedef struct {
    SDL_Texture *tex;              /* the atlas, white on transparent */
    SDL_Rect box[NGLYPHS];         /* each glyph's rectangle in it */
    int advance[NGLYPHS];          /* how far the pen moves after it */
    int height;                    /* line height */
} atlas;

struct dv_text {
    SDL_Renderer *r;
    atlas a[DV_NFONTS];
};

/* ==== building the atlas ==== */

static Uint32 glyph_code(int i)
{
    return i < NASCII ? (Uint32)(32 + i) : extra[i - NASCII];
}

/* Index of codepoint cp in the atlas; '?' for one it does not hold. */
static int glyph_index(Uint32 cp)
{
    if (cp >= 32 && cp < 127)
        return (int)cp - 32;
    for (int i = NASCII; i < NGLYPHS; i++)
        if (extra[i - NASCII] == cp)
            return i;
    return '?' - 32;
}

/* Renders every glyph of font into one texture for r. Returns 0, or -1 with err. */
static int atlas_build(atlas *a, SDL_Renderer *r, TTF_Font *font, char *err, size_t errlen)
{
    SDL_Color white = { 255, 255, 255, 255 };
    SDL_Surface *g[NGLYPHS] = { 0 };
    int x = 0, y = 0, rowh = 0, rc = -1;
    a->height = TTF_FontLineSkip(font);
    for (int i = 0; i < NGLYPHS; i++) {    /* first pass: render and place */
        int minx, maxx, miny, maxy;
        if (TTF_GlyphMetrics32(font, glyph_code(i), &minx, &maxx, &miny, &maxy,
                               &a->advance[i]) != 0)
            a->advance[i] = 0;
        g[i] = TTF_RenderGlyph32_Blended(font, glyph_code(i), white);
        if (g[i] == NULL)                  /* a glyph the font lacks: left blank */
            continue;
        if (x + g[i]->w > ATLAS_W) {
            x = 0;
            y += rowh + 1;
            rowh = 0;
        }
        a->box[i] = (SDL_Rect){ x, y, g[i]->w, g[i]->h };
        x += g[i]->w + 1;
        rowh = g[i]->h > rowh ? g[i]->h : rowh;
    }
    SDL_Surface *s = SDL_CreateRGBSurfaceWithFormat(0, ATLAS_W, y + rowh + 1, 32,
                                                    SDL_PIXELFORMAT_ARGB8888);
    if (s == NULL) {
        snprintf(err, errlen, "cannot make the glyph atlas: %s", SDL_GetError());
        goto out;
    }
    SDL_FillRect(s, NULL, SDL_MapRGBA(s->format, 255, 255, 255, 0));
    for (int i = 0; i < NGLYPHS; i++) {    /* second pass: copy the pixels over */
        if (g[i] == NULL)
            continue;
        SDL_SetSurfaceBlendMode(g[i], SDL_BLENDMODE_NONE);
        SDL_BlitSurface(g[i], NULL, s, &a->box[i]);
    }
    a->tex = SDL_CreateTextureFromSurface(r, s);
    SDL_FreeSurface(s);
    if (a->tex == NULL) {
        snprintf(err, errlen, "cannot make the glyph atlas texture: %s", SDL_GetError());
        goto out;
    }
    SDL_SetTextureBlendMode(a->tex, SDL_BLENDMODE_BLEND);
    rc = 0;
out:
    for (int i = 0; i < NGLYPHS; i++)
        SDL_FreeSurface(g[i]);
    return rc;
}

/* ==== the module ==== */

dv_text *dv_text_open(SDL_Renderer *r, const char *path, char *err, size_t errlen)
{
    const char *env = getenv("DTVIZ_FONT");
    if (path == NULL)
        path = env != NULL && env[0] != '\0' ? env : FONT_DEFAULT;
    if (!TTF_WasInit() && TTF_Init() != 0) {
        snprintf(err, errlen, "SDL_ttf does not start: %s", TTF_GetError());
        return NULL;
    }
    dv_text *t = calloc(1, sizeof *t);
    if (t == NULL) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    t->r = r;
    for (int f = 0; f < DV_NFONTS; f++) {
        TTF_Font *font = TTF_OpenFont(path, font_pt[f]);
        if (font == NULL) {
            snprintf(err, errlen, "cannot open the font %s (%s): install fonts-dejavu-core "
                     "or set DTVIZ_FONT to a .ttf file", path, TTF_GetError());
            dv_text_close(t);
            return NULL;
        }
        int rc = atlas_build(&t->a[f], r, font, err, errlen);
        TTF_CloseFont(font);
        if (rc != 0) {
            dv_text_close(t);
            return NULL;
        }
    }
    return t;
}

void dv_text_close(dv_text *t)
{
    if (t == NULL)
        return;
    for (int f = 0; f < DV_NFONTS; f++)
        if (t->a[f].tex != NULL)
            SDL_DestroyTexture(t->a[f].tex);
    free(t);
}

/* ==== drawing ==== */

/* The next codepoint of UTF-8 s, advancing *s; a malformed byte reads as '?'. */
static Uint32 utf8_next(const char **s)
{
    const unsigned char *p = (const unsigned char *)*s;
    int n = p[0] < 0x80 ? 0 : (p[0] & 0xE0) == 0xC0 ? 1 : (p[0] & 0xF0) == 0xE0 ? 2
          : (p[0] & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0) {
        (*s)++;
        return '?';
    }
    Uint32 cp = n == 0 ? p[0] : p[0] & (0x3F >> n);
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80) {       /* cut short: skip the lead byte only */
            (*s)++;
            return '?';
        }
        cp = cp << 6 | (p[i] & 0x3F);
    }
    *s += n + 1;
    return cp;
}

int dv_text_width(const dv_text *t, dv_font f, const char *s)
{
    int w = 0;
    while (*s != '\0')
        w += t->a[f].advance[glyph_index(utf8_next(&s))];
    return w;
}

int dv_text_height(const dv_text *t, dv_font f)
{
    return t->a[f].height;
}

int dv_text_draw(dv_text *t, dv_font f, int x, int y, SDL_Color c, const char *s)
{
    atlas *a = &t->a[f];
    int x0 = x;
    SDL_SetTextureColorMod(a->tex, c.r, c.g, c.b);
    SDL_SetTextureAlphaMod(a->tex, c.a);
    while (*s != '\0') {
        int i = glyph_index(utf8_next(&s));
        SDL_Rect dst = { x, y, a->box[i].w, a->box[i].h };
        if (dst.w > 0)
            SDL_RenderCopy(t->r, a->tex, &a->box[i], &dst);
        x += a->advance[i];
    }
    return x - x0;
}
