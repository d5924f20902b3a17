/* dtviz's state machine: keys, clicks and time in; a view out. See app.h.
 *
 *   Right/Left   pos = floor(pos) + 1 / ceil(pos) - 1, and pause: a step always lands on
 *                a whole position, so stepping back shows exactly what was there
 *   space        play / pause; at the end it starts again from 0
 *   playing      pos += speed * dt, stopping at the last position
 *   a, n, N      rebuild the built-in model (next algorithm, one rank fewer / more)
 * Everything else is in dv_key_help (draw.c), which the help overlay shows. */
#include <math.h>
#include <string.h>

#include "app.h"

#define SPEED_MIN 0.125
#define SPEED_MAX 1024.0   /* a training trace has thousands of positions */

/* ==== logging (--verbose) ==== */

/* One line per position reached, for a person or a test reading stdout. */
static void log_pos(dv_app *a)
{
    char s[256];
    int p = (int)a->pos;
    if (a->log == NULL || p == a->logged)
        return;
    dv_pos_describe(&a->m, p, s, sizeof s);
    fprintf(a->log, "dtviz: %s\n", s);
    fflush(a->log);
    a->logged = p;
}

static void log_line(dv_app *a, const char *what, const char *s)
{
    if (a->log == NULL)
        return;
    fprintf(a->log, "dtviz: %s %s\n", what, s);
    fflush(a->log);
}

/* The size, and where the timeline is in it (a test clicks there). */
static void log_size(dv_app *a)
{
    char s[96];
    dv_layout L;
    dv_layout_compute(&a->m, (int)a->pos, a->w, a->h, &L);
    snprintf(s, sizeof s, "%dx%d timeline %d,%d %dx%d", a->w, a->h, L.timeline.x,
             L.timeline.y, L.timeline.w, L.timeline.h);
    log_line(a, "size", s);
}

static void note(dv_app *a, const char *s)
{
    snprintf(a->note, sizeof a->note, "%s", s);
    log_line(a, "note", s);
}

/* ==== state ==== */

int dv_app_init(dv_app *a, dv_model *m, int algo, long long count, int w, int h, FILE *log)
{
    memset(a, 0, sizeof *a);
    a->cache = dv_cache_new();
    if (a->cache == NULL) {
        dv_model_free(m);
        return -1;
    }
    a->m = *m;
    memset(m, 0, sizeof *m);
    a->algo = algo;
    a->count = count;
    a->speed = 2;
    a->w = w;
    a->h = h;
    a->log = log;
    a->logged = -1;
    return 0;
}

void dv_app_free(dv_app *a)
{
    dv_cache_free(a->cache);
    dv_model_free(&a->m);
    memset(a, 0, sizeof *a);
}

static void set_pos(dv_app *a, double p)
{
    double last = a->m.npos - 1;
    a->pos = p < 0 ? 0 : p > last ? last : p;
}

/* Replaces the built-in model by algorithm algo at n ranks, from position 0; on
 * failure keeps the old one and says why in the note. */
static void rebuild(dv_app *a, int algo, int n)
{
    char err[160];
    dv_model nm;
    if (a->algo < 0) {
        note(a, "a, n, N change built-in schedules only: this is a trace (see --algo)");
        return;
    }
    if (n < 1 || n > DV_MAX_RANKS) {
        snprintf(err, sizeof err, "the viewer shows 1 to %d ranks", DV_MAX_RANKS);
        note(a, err);
        return;
    }
    if (dv_model_algo(&nm, algo, n, a->count, err, sizeof err) != 0) {
        note(a, err);
        return;
    }
    dv_cache_clear(a->cache);              /* the new model may reuse the old address */
    dv_model_free(&a->m);
    a->m = nm;
    a->algo = algo;
    a->pos = 0;
    a->logged = -1;
    log_line(a, "showing", a->m.title);
}

static void key(dv_app *a, SDL_Keycode k, Uint16 mod)
{
    int last = a->m.npos - 1, nalgo = 0;
    while (dv_algos[nalgo] != NULL)
        nalgo++;
    a->note[0] = '\0';
    switch (k) {
    case SDLK_SPACE:
        if (!a->playing && a->pos >= last)
            a->pos = 0;
        a->playing = !a->playing;
        break;
    case SDLK_RIGHT:
        a->playing = 0;
        set_pos(a, floor(a->pos) + 1);
        break;
    case SDLK_LEFT:
        a->playing = 0;
        set_pos(a, ceil(a->pos) - 1);
        break;
    case SDLK_EQUALS: case SDLK_PLUS: case SDLK_KP_PLUS:
        a->speed = a->speed * 2 > SPEED_MAX ? SPEED_MAX : a->speed * 2;
        break;
    case SDLK_MINUS: case SDLK_KP_MINUS:
        a->speed = a->speed / 2 < SPEED_MIN ? SPEED_MIN : a->speed / 2;
        break;
    case SDLK_HOME:
        set_pos(a, 0);
        break;
    case SDLK_END:
        set_pos(a, last);
        break;
    case SDLK_r:
        a->pos = 0;
        a->playing = 1;
        break;
    case SDLK_a:
        rebuild(a, nalgo > 0 ? (a->algo + 1) % nalgo : 0, a->m.nranks);
        break;
    case SDLK_n:
        rebuild(a, a->algo, a->m.nranks + (mod & KMOD_SHIFT ? 1 : -1));
        break;
    case SDLK_h:
        a->help = !a->help;
        log_line(a, "help", a->help ? "on" : "off");
        break;
    case SDLK_q: case SDLK_ESCAPE:
        a->quit = 1;
        break;
    default:
        break;
    }
}

/* A click, or a drag with the left button held, on the timeline jumps to its time. */
static void click(dv_app *a, int x, int y)
{
    dv_layout L;
    dv_layout_compute(&a->m, (int)a->pos, a->w, a->h, &L);
    int p = dv_timeline_pos(&a->m, &L, x, y);
    if (p >= 0)
        set_pos(a, p);
}

void dv_app_event(dv_app *a, const SDL_Event *e)
{
    switch (e->type) {
    case SDL_KEYDOWN:
        key(a, e->key.keysym.sym, e->key.keysym.mod);
        break;
    case SDL_MOUSEBUTTONDOWN:
        if (e->button.button == SDL_BUTTON_LEFT)
            click(a, e->button.x, e->button.y);
        break;
    case SDL_MOUSEMOTION:
        if (e->motion.state & SDL_BUTTON_LMASK)
            click(a, e->motion.x, e->motion.y);
        break;
    case SDL_WINDOWEVENT:
        if (e->window.event == SDL_WINDOWEVENT_SIZE_CHANGED &&
            (e->window.data1 != a->w || e->window.data2 != a->h)) {
            a->w = e->window.data1;
            a->h = e->window.data2;
            log_size(a);
        }
        break;
    case SDL_RENDER_TARGETS_RESET: case SDL_RENDER_DEVICE_RESET:
        dv_cache_clear(a->cache);          /* the texture's contents are gone */
        break;
    case SDL_QUIT:
        a->quit = 1;
        break;
    default:
        break;
    }
    log_pos(a);
}

void dv_app_pump(dv_app *a)
{
    SDL_Event e;
    while (SDL_PollEvent(&e))
        dv_app_event(a, &e);
}

void dv_app_update(dv_app *a, double dt)
{
    double last = a->m.npos - 1;
    if (!a->playing)
        return;
    set_pos(a, a->pos + a->speed * dt);
    if (a->pos >= last)
        a->playing = 0;
    log_pos(a);
}

void dv_app_view(dv_app *a, dv_view *v)
{
    *v = (dv_view){ .pos = a->pos, .help = a->help, .playing = a->playing,
                    .speed = a->speed, .note = a->note[0] ? a->note : NULL,
                    .cache = a->cache };
}

/* ==== the window's loop ==== */

void dv_app_run(dv_app *a, SDL_Renderer *r, dv_text *t)
{
    const double freq = (double)SDL_GetPerformanceFrequency();
    Uint64 prev = SDL_GetPerformanceCounter();
    SDL_Window *win = SDL_RenderGetWindow(r);
    char title[sizeof a->m.title + 8] = "";
    log_line(a, "showing", a->m.title);
    log_size(a);
    log_pos(a);
    while (!a->quit) {
        SDL_Event e;
        int was = a->playing;
        if (!was && SDL_WaitEventTimeout(&e, 250))   /* idle: sleep until something */
            dv_app_event(a, &e);
        dv_app_pump(a);
        Uint64 now = SDL_GetPerformanceCounter();
        dv_app_update(a, was ? (now - prev) / freq : 0);
        prev = now;
        if (a->quit)
            break;
        if (win != NULL && strncmp(title + 7, a->m.title, sizeof a->m.title) != 0) {
            snprintf(title, sizeof title, "dtviz: %s", a->m.title);
            SDL_SetWindowTitle(win, title);
        }
        dv_view v;
        dv_app_view(a, &v);
        dv_draw(r, t, &a->m, &v, a->w, a->h);
        SDL_RenderPresent(r);
        /* 60 frames a second: vsync already waited in RenderPresent where it works */
        double ms = (SDL_GetPerformanceCounter() - now) * 1000.0 / freq;
        if (ms < 16)
            SDL_Delay((Uint32)(16 - ms));
    }
}
