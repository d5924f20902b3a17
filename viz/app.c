/* dtviz's state machine: keys, clicks and time in; a view out. See app.h.
 *
 * The collective view (a->timetable == 0):
 *   Right/Left   pos = floor(pos) + 1 / ceil(pos) - 1, and pause: a step always lands on
 *                a whole position, so stepping back shows exactly what was there
 *   space        play / pause; at the end it starts again from 0
 *   playing      pos += speed * dt, stopping at the last position
 *   a, n, N      rebuild the built-in model (next algorithm, one rank fewer / more)
 * The timetable (a training trace, or a built-in pipeline schedule):
 *   Right/Left   the next / previous training step, the window fitted to it
 *   +/-, wheel   zoom in / out around the cursor (the wheel: around the pointer)
 *   , .  drag    pan the window by a quarter / by the pointer
 *   click        puts the cursor there; on a communication block, picks its collective
 *   space        the cursor sweeps the window (a pipeline's stash changes as it goes)
 *   t, Enter     the picked collective's chunks in the collective view; t comes back
 *   a            built-in schedules: gpipe -> 1f1b -> ddp -> gpipe, each in its last shape
 *   n/N, m/M     gpipe, 1f1b: one stage / micro-batch fewer, more; ddp: one rank / bucket
 * Everything else is in dv_key_help (draw.c), which the help overlay shows. */
#include <math.h>
#include <stdlib.h>
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

/* The timetable's state in one line: what --verbose prints when it changes. */
static void tt_describe(const dv_app *a, char *s, size_t len)
{
    const dv_tt *tt = a->tt;
    double k = dv_tt_axis_scale(tt), base = dv_tt_axis_base(tt);
    int step = tt->nsteps > 0 ? tt->steps[a->tt_step].step : 0;
    snprintf(s, len, "timetable step %d (%d of %d) window %.4g..%.4g %s cursor %.4g call %d",
             step, tt->nsteps > 0 ? a->tt_step + 1 : 0, tt->nsteps, (a->t0 - base) * k,
             (a->t1 - base) * k, dv_tt_axis_unit(tt), (a->cursor - base) * k, a->call);
}

static void log_tt(dv_app *a)
{
    char s[160];
    if (a->log == NULL || a->tt == NULL || !a->timetable)
        return;
    tt_describe(a, s, sizeof s);
    if (strcmp(s, a->tt_logged) != 0) {
        fprintf(a->log, "dtviz: %s\n", s);
        fflush(a->log);
        snprintf(a->tt_logged, sizeof a->tt_logged, "%s", s);
    }
}

/* ==== state ==== */

/* Builds the timetable of a->m when it is a training trace (else none). 0, or -1. */
static int tt_open(dv_app *a)
{
    char err[160];
    if (!dv_tt_is_training(&a->m.trace))
        return 0;
    a->tt = calloc(1, sizeof *a->tt);
    if (a->tt == NULL || dv_tt_build(a->tt, &a->m, err, sizeof err) != 0) {
        free(a->tt);
        a->tt = NULL;
        return -1;
    }
    a->timetable = 1;
    a->call = -1;
    dv_app_tt_step(a, a->tt->nsteps - 1);
    return 0;
}

static void tt_close(dv_app *a)
{
    if (a->tt != NULL)
        dv_tt_free(a->tt);
    free(a->tt);
    a->tt = NULL;
    a->timetable = 0;
}

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
    a->call = -1;
    a->train_algo = -1;
    a->stages = 4;                         /* dtviz's defaults, for 'a' to switch to */
    a->micro = 8;
    a->virt = 2;
    a->ddp = DV_DDP_DEFAULT;
    if (tt_open(a) != 0) {
        dv_app_free(a);
        return -1;
    }
    return 0;
}

void dv_app_free(dv_app *a)
{
    tt_close(a);
    dv_cache_free(a->cache);
    dv_model_free(&a->m);
    memset(a, 0, sizeof *a);
}

void dv_app_train_pp(dv_app *a, dv_pp_shape s)
{
    a->train_algo = s.schedule;
    a->stages = s.stages;
    a->micro = s.micro;
    if (s.schedule == 2)
        a->virt = s.v;
}

void dv_app_train_algo(dv_app *a, int train_algo, int stages, int micro)
{
    dv_app_train_pp(a, (dv_pp_shape){ train_algo, stages, micro, 1 });
}

void dv_app_train_ddp(dv_app *a, dv_ddp_shape s)
{
    a->train_algo = DV_TRAIN_DDP;
    a->ddp = s;
}

/* ==== the timetable ==== */

void dv_app_tt_step(dv_app *a, int s)
{
    if (a->tt == NULL || a->tt->nsteps == 0) {
        if (a->tt != NULL) {
            a->t0 = a->tt->t_begin;
            a->t1 = a->tt->t_end;
            a->cursor = a->t0;
        }
        return;
    }
    s = s < 0 ? 0 : s >= a->tt->nsteps ? a->tt->nsteps - 1 : s;
    const dv_tt_step *st = &a->tt->steps[s];
    double span = st->t1 > st->t0 ? st->t1 - st->t0 : 1e-9;
    a->tt_step = s;
    a->t0 = st->t0 - span * 0.01;
    a->t1 = st->t1 + span * 0.01;
    a->cursor = st->t0;
}

/* Zooms the window by factor (> 1: in) keeping time tc where it is. */
static void tt_zoom(dv_app *a, double factor, double tc)
{
    double w = a->t1 - a->t0, whole = a->tt->t_end - a->tt->t_begin;
    double nw = w / factor;
    if (nw > whole * 1.5)
        nw = whole * 1.5;
    if (nw < whole * 1e-6)
        nw = whole * 1e-6;
    if (!(tc >= a->t0 && tc <= a->t1))
        tc = (a->t0 + a->t1) / 2;
    a->t0 = tc - (tc - a->t0) * nw / w;
    a->t1 = a->t0 + nw;
}

/* Moves the window by dt, not past the trace's ends by more than half a window. */
static void tt_pan(dv_app *a, double dt)
{
    double w = a->t1 - a->t0;
    double lo = a->tt->t_begin - w / 2, hi = a->tt->t_end + w / 2 - w;
    double t0 = a->t0 + dt;
    t0 = t0 > hi ? hi : t0;
    t0 = t0 < lo ? lo : t0;
    a->t0 = t0;
    a->t1 = t0 + w;
}

/* The window's time at pixel x, and the seconds one pixel stands for (both from the
 * drawing's own layout, through dv_tt_hit); 0 when x is off the rows. */
static int tt_time_at(dv_app *a, int x, double *t, double *per_px)
{
    dv_view v;
    int rank, lane, y;
    double t2;
    dv_app_view(a, &v);
    for (y = 0; y < a->h; y += 2)          /* any row will do: find one */
        if (dv_tt_hit(&v, a->w, a->h, x, y, &rank, &lane, t))
            break;
    if (y >= a->h)
        return 0;
    if (per_px != NULL) {
        *per_px = 0;
        if (dv_tt_hit(&v, a->w, a->h, x + 1, y, &rank, &lane, &t2))
            *per_px = t2 - *t;
        else if (dv_tt_hit(&v, a->w, a->h, x - 1, y, &rank, &lane, &t2))
            *per_px = *t - t2;
    }
    return 1;
}

/* A click on the timetable: the cursor goes there; a communication block picks its
 * collective call. */
static void tt_click(dv_app *a, int x, int y)
{
    dv_view v;
    int rank, lane;
    double t;
    char s[160];
    dv_app_view(a, &v);
    if (!dv_tt_hit(&v, a->w, a->h, x, y, &rank, &lane, &t))
        return;
    a->cursor = t;
    int b = dv_tt_block_at(a->tt, rank, lane, t);
    if (b < 0) {
        a->call = -1;
        return;
    }
    const dv_tt_block *k = &a->tt->blocks[b];
    char via[48] = "";
    a->call = k->call;
    if (k->vias != 0) {                          /* how its messages travelled */
        memcpy(via, " via ", 6);
        dv_vias_text(k->vias, via + 5, sizeof via - 5);
    }
    if (k->call >= 0) {
        snprintf(s, sizeof s, "%s on rank %d%s: %s, call %d; t or Enter shows it chunk by "
                 "chunk", k->label, rank, via, a->m.calls[k->call].coll, k->call);
        note(a, s);
    } else {
        snprintf(s, sizeof s, "%s on rank %d%s", k->label, rank, via);
        note(a, s);
    }
}

void dv_app_show_timetable(dv_app *a, int on)
{
    if (a->tt == NULL)
        return;
    if (on && !a->timetable) {
        double t = dv_pos_time(&a->m, (int)a->pos);
        int call, k;
        dv_pos_split(&a->m, (int)a->pos, &call, &k);
        a->timetable = 1;
        dv_app_tt_step(a, dv_tt_step_at(a->tt, t));
        a->call = call;
        a->cursor = t;
        a->tt_logged[0] = '\0';
    } else if (!on && a->timetable) {
        if (a->m.ncalls == 0) {
            note(a, "no collective calls in this trace: only the timetable");
            return;
        }
        a->timetable = 0;
        a->playing = 0;
        a->pos = a->call >= 0 && a->call < a->m.ncalls ? a->m.calls[a->call].first_pos
                                                        : dv_pos_at_time(&a->m, a->cursor);
        a->logged = -1;
    }
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

/* Replaces the built-in training schedule by ta: a pipeline at P stages, M
 * micro-batches and (interleaved) v chunks a stage, or ddp of shape d; on failure keeps
 * the old one and says why in the note. The other schedules' shapes are kept for 'a'. */
static void rebuild_train(dv_app *a, int ta, int P, int M, int v, dv_ddp_shape d)
{
    char err[160];
    dv_model nm;
    int rc = ta == DV_TRAIN_DDP
        ? dv_model_train_ddp(&nm, d, err, sizeof err)
        : dv_model_train_pp(&nm, (dv_pp_shape){ ta, P, M, ta == 2 ? v : 1 }, err, sizeof err);
    if (rc != 0) {
        note(a, err);
        return;
    }
    dv_cache_clear(a->cache);
    tt_close(a);
    dv_model_free(&a->m);
    a->m = nm;
    a->pos = 0;
    a->logged = -1;
    a->tt_logged[0] = '\0';
    a->call = -1;
    a->train_algo = ta;                    /* what a->m now is, whatever comes next */
    a->stages = P;
    a->micro = M;
    a->virt = v;
    a->ddp = d;
    if (tt_open(a) != 0) {
        note(a, "out of memory");
        return;
    }
    log_line(a, "showing", a->m.title);
}

/* The keys of the timetable; 0 when k is not one of them (the common keys follow). */
static int tt_key(dv_app *a, SDL_Keycode k, Uint16 mod)
{
    int ntrain = 0, up = (mod & KMOD_SHIFT) != 0, step = up ? 1 : -1;
    dv_ddp_shape d = a->ddp;
    while (dv_train_algos[ntrain] != NULL)
        ntrain++;
    switch (k) {
    case SDLK_RIGHT: dv_app_tt_step(a, a->tt_step + 1); a->playing = 0; return 1;
    case SDLK_LEFT: dv_app_tt_step(a, a->tt_step - 1); a->playing = 0; return 1;
    case SDLK_HOME: dv_app_tt_step(a, 0); return 1;
    case SDLK_END: dv_app_tt_step(a, a->tt->nsteps - 1); return 1;
    case SDLK_EQUALS: case SDLK_PLUS: case SDLK_KP_PLUS: tt_zoom(a, 1.5, a->cursor); return 1;
    case SDLK_MINUS: case SDLK_KP_MINUS: tt_zoom(a, 1 / 1.5, a->cursor); return 1;
    case SDLK_COMMA: case SDLK_LESS: tt_pan(a, -(a->t1 - a->t0) / 4); return 1;
    case SDLK_PERIOD: case SDLK_GREATER: tt_pan(a, (a->t1 - a->t0) / 4); return 1;
    case SDLK_SPACE:
        if (!a->playing && !(a->cursor >= a->t0 && a->cursor < a->t1))
            a->cursor = a->t0;
        a->playing = !a->playing;
        return 1;
    case SDLK_r: a->cursor = a->t0; a->playing = 1; return 1;
    case SDLK_t: case SDLK_RETURN: case SDLK_KP_ENTER: dv_app_show_timetable(a, 0); return 1;
    case SDLK_a:
        if (a->train_algo < 0)
            note(a, "a, n, N, m, M, v, V change built-in schedules only: this is a trace");
        else
            rebuild_train(a, (a->train_algo + 1) % ntrain, a->stages, a->micro, a->virt, d);
        return 1;
    case SDLK_n: case SDLK_m:
        if (a->train_algo < 0) {
            note(a, "a, n, N, m, M, v, V change built-in schedules only: this is a trace");
        } else if (a->train_algo == DV_TRAIN_DDP) {    /* ranks, buckets */
            d.ranks += k == SDLK_n ? step : 0;
            d.buckets += k == SDLK_m ? step : 0;
            rebuild_train(a, a->train_algo, a->stages, a->micro, a->virt, d);
        } else {                                        /* stages, micro-batches */
            rebuild_train(a, a->train_algo, a->stages + (k == SDLK_n ? step : 0),
                          a->micro + (k == SDLK_m ? step : 0), a->virt, d);
        }
        return 1;
    case SDLK_v:                                        /* interleaved's chunks */
        if (a->train_algo < 0)
            note(a, "a, n, N, m, M, v, V change built-in schedules only: this is a trace");
        else if (a->train_algo != 2)
            note(a, "v, V change the chunks a stage of the built-in interleaved ('a' to it)");
        else
            rebuild_train(a, a->train_algo, a->stages, a->micro, a->virt + step, d);
        return 1;
    default:
        return 0;
    }
}

static void key(dv_app *a, SDL_Keycode k, Uint16 mod)
{
    a->note[0] = '\0';
    if (a->tt != NULL && (a->timetable || (a->train_algo >= 0 &&
                          (k == SDLK_a || k == SDLK_n || k == SDLK_m || k == SDLK_v))) &&
        tt_key(a, k, mod))
        return;                            /* a built-in's a, n, m rebuild it in any view */
    if (a->tt != NULL && !a->timetable && (k == SDLK_t || k == SDLK_BACKSPACE)) {
        dv_app_show_timetable(a, 1);
        return;
    }
    int last = a->m.npos - 1, nalgo = 0;
    while (dv_algos[nalgo] != NULL)
        nalgo++;
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

/* The mouse on the timetable: a press, a drag that pans, a release that clicks when the
 * pointer did not move, the wheel that zooms around the pointer. 1 when e was one. */
static int tt_mouse(dv_app *a, const SDL_Event *e)
{
    double t, per_px;
    switch (e->type) {
    case SDL_MOUSEBUTTONDOWN:
        if (e->button.button != SDL_BUTTON_LEFT)
            return 0;
        a->press_x = e->button.x;
        a->press_y = e->button.y;
        a->press_t0 = a->t0;
        a->press_t1 = a->t1;
        a->dragged = 0;
        return 1;
    case SDL_MOUSEMOTION:
        if (!(e->motion.state & SDL_BUTTON_LMASK))
            return 0;
        if (abs(e->motion.x - a->press_x) > 3)
            a->dragged = 1;
        if (a->dragged && tt_time_at(a, a->press_x, &t, &per_px) && per_px > 0) {
            double w = a->press_t1 - a->press_t0;
            per_px *= w / (a->t1 - a->t0);          /* per_px of the window at the press */
            a->t0 = a->press_t0;
            a->t1 = a->press_t1;
            tt_pan(a, -(e->motion.x - a->press_x) * per_px);
        }
        return 1;
    case SDL_MOUSEBUTTONUP:
        if (e->button.button != SDL_BUTTON_LEFT)
            return 0;
        if (!a->dragged)
            tt_click(a, e->button.x, e->button.y);
        a->dragged = 0;
        return 1;
    case SDL_MOUSEWHEEL: {
        int x = a->w / 2, y;
        SDL_GetMouseState(&x, &y);
#if SDL_VERSION_ATLEAST(2, 26, 0)
        x = e->wheel.mouseX;
#endif
        if (e->wheel.y != 0 && tt_time_at(a, x, &t, NULL))
            tt_zoom(a, pow(1.25, e->wheel.y), t);
        else if (e->wheel.y != 0)
            tt_zoom(a, pow(1.25, e->wheel.y), a->cursor);
        return 1;
    }
    default:
        return 0;
    }
}

void dv_app_event(dv_app *a, const SDL_Event *e)
{
    if (a->tt != NULL && a->timetable && e->type != SDL_KEYDOWN && tt_mouse(a, e)) {
        log_tt(a);
        return;
    }
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
    if (a->tt != NULL && a->timetable)
        log_tt(a);
    else
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
    if (a->tt != NULL && a->timetable) {     /* the cursor crosses the window in 8 s */
        a->cursor += (a->t1 - a->t0) * dt / 8 * a->speed / 2;
        if (a->cursor >= a->t1) {
            a->cursor = a->t1;
            a->playing = 0;
        }
        log_tt(a);
        return;
    }
    set_pos(a, a->pos + a->speed * dt);
    if (a->pos >= last)
        a->playing = 0;
    log_pos(a);
}

void dv_app_view(dv_app *a, dv_view *v)
{
    *v = (dv_view){ .pos = a->pos, .help = a->help, .playing = a->playing,
                    .speed = a->speed, .note = a->note[0] ? a->note : NULL,
                    .cache = a->cache, .call = a->call };
    if (a->tt != NULL && !a->timetable) {    /* what the call shown was for */
        int call, k, b = 0;
        dv_pos_split(&a->m, (int)a->pos, &call, &k);
        while (b < a->tt->nblocks && (call < 0 || a->tt->blocks[b].call != call))
            b++;
        if (b < a->tt->nblocks) {
            snprintf(a->context, sizeof a->context, "training step %d, %s (t: the timetable)",
                     a->tt->blocks[b].step, a->tt->blocks[b].label);
            v->context = a->context;
        }
    }
    if (a->tt != NULL && a->timetable) {
        v->tt = a->tt;
        v->tt_step = a->tt_step;
        v->t0 = a->t0;
        v->t1 = a->t1;
        v->cursor = a->cursor;
    }
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
    if (a->tt != NULL && a->timetable)
        log_tt(a);
    else
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
