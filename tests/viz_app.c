/* Tests of dtviz's drawing and its interactive state, without a display.
 *
 * The pictures are checked by reading pixels back: each cell of the grid must show
 * exactly the rank colours of the ranks whose data the model says it holds, no more,
 * no fewer. So a test says "after reduce-scatter, rank r's cell r holds everyone" in
 * the picture's own terms. The key and mouse handling is driven by SDL events pushed
 * onto the queue (SDL_PushEvent) under SDL's dummy video driver, as a window would.
 *
 *   build/tests/viz_app            (CK_FORK=no to debug under gdb)
 */
#include <check.h>
#include "unit.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app.h"

#define W 1280
#define H 800

/* ==== helpers ==== */

static dv_model algo_model(const char *name, int n)
{
    dv_model m;
    char err[256];
    int a = dv_algo_index(name);
    ck_assert_msg(a >= 0, "no algorithm %s", name);
    ck_assert_msg(dv_model_algo(&m, a, n, 1000, err, sizeof err) == 0, "%s at %d: %s", name, n, err);
    return m;
}

static SDL_Surface *render(const dv_model *m, double pos)
{
    char err[256];
    dv_view v = { .pos = pos, .speed = 1 };
    SDL_Surface *s = dv_render_surface(m, &v, W, H, err, sizeof err);
    ck_assert_msg(s != NULL, "render at %g: %s", pos, err);
    return s;
}

static Uint32 rgb_at(const SDL_Surface *s, int x, int y)
{
    Uint8 r, g, b;
    Uint32 p = ((const Uint32 *)((const Uint8 *)s->pixels + y * s->pitch))[x];
    SDL_GetRGB(p, s->format, &r, &g, &b);
    return (Uint32)r << 16 | (Uint32)g << 8 | b;
}

static Uint32 rank_rgb(int q)
{
    SDL_Color c = dv_rank_color(q);
    return (Uint32)c.r << 16 | (Uint32)c.g << 8 | c.b;
}

/* The ranks whose colour appears somewhere in box. */
static dv_mask colors_in(const SDL_Surface *s, SDL_Rect box, int nranks)
{
    dv_mask seen = 0;
    for (int y = box.y; y < box.y + box.h; y++)
        for (int x = box.x; x < box.x + box.w; x++) {
            Uint32 p = rgb_at(s, x, y);
            for (int q = 0; q < nranks; q++)
                if (p == rank_rgb(q))
                    seen |= (dv_mask)1 << q;
        }
    return seen;
}

/* Every cell of the picture at integer position pos shows exactly the model's masks. */
static void check_cells(const dv_model *m, int pos)
{
    static dv_mask st[DV_MAX_RANKS * DV_MAX_CELLS];
    int call, k;
    dv_layout L;
    dv_pos_split(m, pos, &call, &k);
    dv_layout_compute(m, pos, W, H, &L);
    static unsigned char done[DV_MAX_RANKS * DV_MAX_CELLS];
    const dv_call *C = call >= 0 ? &m->calls[call] : NULL;
    if (C != NULL && C->ring_attn)          /* the K/V in hand; the output beside it */
        dv_attn_state(m, call, k, st, done);
    else
        dv_state(m, call, k, st);
    SDL_Surface *s = render(m, pos);
    for (int r = 0; r < m->nranks; r++)
        for (int c = 0; c < L.ncells; c++) {
            dv_mask got = colors_in(s, dv_layout_cell(&L, r, c), m->nranks);
            ck_assert_msg(got == st[r * L.ncells + c], "%s position %d rank %d cell %d: "
                          "colours %#llx, the model says %#llx", m->title, pos, r, c,
                          (unsigned long long)got, (unsigned long long)st[r * L.ncells + c]);
            if (C == NULL || !C->ring_attn)
                continue;
            /* the output: the key block's owner where attended and computed, else none */
            int d = done[r * L.ncells + c], owner = -1;
            for (int q = 0; q < m->nranks && owner < 0; q++)
                owner = C->init[q * L.ncells + c] >> q & 1 ? q : -1;
            dv_mask want = d == DV_ATTN_FULL || d == DV_ATTN_PART ? (dv_mask)1 << owner : 0;
            got = colors_in(s, dv_layout_out_cell(&L, r, c), m->nranks);
            ck_assert_msg(L.out_x0 > 0 && got == want, "%s position %d rank %d output cell "
                          "%d (%d): colours %#llx, want %#llx", m->title, pos, r, c, d,
                          (unsigned long long)got, (unsigned long long)want);
        }
    SDL_FreeSurface(s);
}

static dv_mask all(int n)
{
    return n == 64 ? ~(dv_mask)0 : ((dv_mask)1 << n) - 1;
}

/* ==== pictures ==== */

START_TEST(colors_distinct)
{
    for (int a = 0; a < DV_MAX_RANKS; a++) {
        ck_assert_int_eq(dv_rank_color(a).a, 255);
        for (int b = 0; b < a; b++)
            ck_assert_msg(rank_rgb(a) != rank_rgb(b), "ranks %d and %d share %06x", a, b,
                          rank_rgb(a));
    }
}
END_TEST

/* Ring allreduce at 4 and 16 ranks: own colour only at 0; after reduce-scatter
 * (position N-1) rank r's cell r holds every colour; at the end every cell does. */
static void ring_story(int n)
{
    dv_model m = algo_model("ring-allreduce", n);
    dv_layout L;
    ck_assert_int_eq(m.ncalls, 1);
    ck_assert_int_eq(m.calls[0].nframes, 2 * (n - 1));
    for (int pos = 0; pos < m.npos; pos += n > 4 ? 5 : 1)
        check_cells(&m, pos);
    check_cells(&m, m.npos - 1);

    SDL_Surface *s = render(&m, 0);
    dv_layout_compute(&m, 0, W, H, &L);
    for (int r = 0; r < n; r++)
        for (int c = 0; c < L.ncells; c++)
            ck_assert(colors_in(s, dv_layout_cell(&L, r, c), n) == (dv_mask)1 << r);
    SDL_FreeSurface(s);
    s = render(&m, n - 1);
    for (int r = 0; r < n; r++)
        ck_assert_msg(colors_in(s, dv_layout_cell(&L, r, r), n) == all(n),
                      "after reduce-scatter rank %d's cell %d lacks a colour", r, r);
    SDL_FreeSurface(s);
    s = render(&m, m.npos - 1);
    for (int r = 0; r < n; r++)
        for (int c = 0; c < L.ncells; c++)
            ck_assert(colors_in(s, dv_layout_cell(&L, r, c), n) == all(n));
    SDL_FreeSurface(s);
    dv_model_free(&m);
}

START_TEST(ring_allreduce_4) { ring_story(4); }
END_TEST
START_TEST(ring_allreduce_16) { ring_story(16); }
END_TEST

/* Allgather starts with each rank's own block only; every other cell is empty. */
START_TEST(allgather_start)
{
    for (int n = 3; n <= 16; n += 13) {
        dv_model m = algo_model("allgather", n);
        dv_layout L;
        dv_layout_compute(&m, 0, W, H, &L);
        ck_assert_int_eq(L.ncells, n);
        SDL_Surface *s = render(&m, 0);
        for (int r = 0; r < n; r++)
            for (int c = 0; c < n; c++) {
                dv_mask got = colors_in(s, dv_layout_cell(&L, r, c), n);
                ck_assert_msg(got == (c == r ? (dv_mask)1 << r : 0), "n %d rank %d cell %d: "
                              "%#llx", n, r, c, (unsigned long long)got);
            }
        SDL_FreeSurface(s);
        check_cells(&m, m.npos - 1);
        dv_model_free(&m);
    }
}
END_TEST

/* At position 0 the arrows cross the gap between rows 0 and 1; at the end, with no
 * messages left, that gap is plain background. */
START_TEST(arrows_in_gaps)
{
    dv_model m = algo_model("ring-allreduce", 4);
    dv_layout L;
    dv_layout_compute(&m, 0, W, H, &L);
    SDL_Rect a = dv_layout_cell(&L, 0, 0), b = dv_layout_cell(&L, 1, 0);
    SDL_Rect gap = { L.cell_x0, a.y + a.h + 2, L.ncells * L.cell_w, b.y - a.y - a.h - 4 };
    ck_assert_int_gt(gap.h, 0);
    SDL_Surface *s0 = render(&m, 0), *s1 = render(&m, m.npos - 1);
    Uint32 bg = rgb_at(s1, gap.x, gap.y);
    int plain = 1, differ = 0;
    for (int y = gap.y; y < gap.y + gap.h; y++)
        for (int x = gap.x; x < gap.x + gap.w; x++) {
            plain &= rgb_at(s1, x, y) == bg;
            differ += rgb_at(s0, x, y) != bg;
        }
    ck_assert_msg(plain, "the gap is not plain at the last position");
    ck_assert_msg(differ > 10, "no arrow in the gap at position 0 (%d pixels)", differ);
    SDL_FreeSurface(s0);
    SDL_FreeSurface(s1);
    dv_model_free(&m);
}
END_TEST

/* The picture is a function of the position: going back redraws it exactly; between
 * two positions the sliding pieces change it. */
START_TEST(step_back_exact)
{
    dv_model m = algo_model("ring-allreduce", 5);
    SDL_Surface *a = render(&m, 3), *b = render(&m, 4), *c = render(&m, 3), *d = render(&m, 3.5);
    size_t nb = (size_t)a->pitch * a->h;
    ck_assert(memcmp(a->pixels, b->pixels, nb) != 0);
    ck_assert(memcmp(a->pixels, c->pixels, nb) == 0);
    ck_assert(memcmp(a->pixels, d->pixels, nb) != 0);
    SDL_FreeSurface(a);
    SDL_FreeSurface(b);
    SDL_FreeSurface(c);
    SDL_FreeSurface(d);
    dv_model_free(&m);
}
END_TEST

/* Every algorithm at 1, 2, 3, 5 and 16 ranks: each position's cells match the model. */
START_TEST(every_algo)
{
    static const int ns[] = { 1, 2, 3, 5, 16 };
    for (int i = 0; dv_algos[i] != NULL; i++)
        for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++) {
            dv_model m = algo_model(dv_algos[i], ns[j]);
            for (int pos = 0; pos < m.npos; pos += 1 + m.npos / 4)
                check_cells(&m, pos);
            dv_model_free(&m);
        }
}
END_TEST

/* One line names where a position is: what --verbose prints and the header shows. */
START_TEST(describe)
{
    char s[256];
    dv_model m = algo_model("ring-allreduce", 4);
    dv_pos_describe(&m, 3, s, sizeof s);
    ck_assert_msg(strcmp(s, "position 3 of 0..6: call 1 of 1, allreduce_ring on ranks 0-3: "
                  "3 of 6 steps done, next: step 4 of 6 (allgather)") == 0, "%s", s);
    dv_pos_describe(&m, 99, s, sizeof s);
    ck_assert_msg(strstr(s, "position 6 of 0..6: ") != NULL &&
                  strstr(s, "6 of 6 steps done, call finished"), "%s", s);
    dv_model_free(&m);
}
END_TEST

/* A training-like trace: many compute events by phase, no collectives. The timeline
 * shows them; a click maps its left edge to position 0, outside it to nothing. */
START_TEST(timeline_training)
{
    static const char *phase[] = { "forward", "backward", "optimizer" };
    char err[256];
    dt_trace t = { .version = 1, .nranks = 4, .n = 40000 };
    snprintf(t.program, sizeof t.program, "train");
    t.ev = calloc(t.n, sizeof *t.ev);
    for (size_t i = 0; i < t.n; i++) {
        dt_event *e = &t.ev[i];
        int j = (int)(i % 10000);
        *e = (dt_event){ .t0 = j * 1e-4, .t1 = j * 1e-4 + 5e-5, .rank = (int)(i / 10000),
                         .peer = -1, .kind = DT_EV_COMPUTE, .step = j / 3, .chunk = -1 };
        snprintf(e->coll, sizeof e->coll, "train");
        snprintf(e->phase, sizeof e->phase, "%s", phase[j % 3]);
    }
    dv_model m;
    ck_assert_msg(dv_model_build(&m, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(m.npos, 1);
    dv_layout L;
    dv_layout_compute(&m, 0, W, H, &L);
    ck_assert_int_gt(L.timeline.w, 0);
    ck_assert_int_gt(L.timeline.h, 0);
    ck_assert_int_eq(dv_timeline_pos(&m, &L, L.timeline.x, L.timeline.y), 0);
    ck_assert_int_eq(dv_timeline_pos(&m, &L, L.timeline.x - 1, L.timeline.y), -1);
    ck_assert_int_eq(dv_timeline_pos(&m, &L, L.timeline.x, L.timeline.y + L.timeline.h), -1);
    SDL_Surface *s = render(&m, 0);
    Uint32 bg = rgb_at(s, W - 1, L.header.h);
    int marked = 0;
    for (int x = L.timeline.x; x < L.timeline.x + L.timeline.w; x += 3)
        marked += rgb_at(s, x, L.timeline.y + L.timeline.h / 8 + 1) != bg;
    ck_assert_msg(marked > L.timeline.w / 6, "rank 0's row shows %d marks", marked);
    SDL_FreeSurface(s);
    dv_model_free(&m);
}
END_TEST

/* --count 0: the collective moves nothing, so the library records no event and the
 * model has no call. The picture says "only the timeline below" and must show it: the
 * legend's kinds, a row per rank (its track lighter than the background, a line of
 * background between two rows), the cursor; and no cells, no rank colour anywhere. */
START_TEST(count_zero_timeline)
{
    char err[256];
    dv_model m;
    ck_assert(dv_model_algo(&m, dv_algo_index("ring-allreduce"), 4, 0, err, sizeof err) == 0);
    ck_assert_int_eq(m.ncalls, 0);
    ck_assert_uint_eq(m.trace.n, 0);
    dv_layout L;
    dv_layout_compute(&m, 0, W, H, &L);
    ck_assert_int_eq(L.ncells, 0);
    ck_assert_msg(L.timeline.w > W / 2 && L.timeline.h >= 4 * 8, "timeline %dx%d",
                  L.timeline.w, L.timeline.h);
    ck_assert_int_eq(dv_timeline_pos(&m, &L, L.timeline.x + 1, L.timeline.y + 1), 0);
    SDL_Surface *s = render(&m, 0);
    Uint32 bg = rgb_at(s, W - 1, L.header.h);
    int row = L.timeline.h / 4, x = L.timeline.x + L.timeline.w / 2;
    for (int q = 0; q < 4; q++) {
        int y = L.timeline.y + q * row;
        ck_assert_msg(rgb_at(s, x, y) == bg && rgb_at(s, x, y + row / 2) != bg,
                      "rank %d's row of the timeline: %06x at its edge, %06x inside, "
                      "background %06x", q, rgb_at(s, x, y), rgb_at(s, x, y + row / 2), bg);
    }
    ck_assert_msg(rgb_at(s, x, L.timeline.y + L.timeline.h) == bg, "a fifth row");
    int legend = 0;               /* the legend's 9-pixel swatches, 10 pixels above the rows */
    for (int px = L.timeline.x; px < L.timeline.x + L.timeline.w; px++)
        legend += rgb_at(s, px, L.timeline.y - 10) != bg;
    ck_assert_msg(legend > 40, "no legend above the timeline (%d pixels)", legend);
    ck_assert_msg(colors_in(s, (SDL_Rect){ 0, 0, W, H }, 4) == 0, "a rank's colour in a "
                  "picture of nothing moved");
    SDL_FreeSurface(s);
    dv_model_free(&m);
}
END_TEST

/* ==== the interactive state ==== */

static void sdl_up(void)
{
    setenv("SDL_VIDEODRIVER", "dummy", 1);
    ck_assert_msg(SDL_Init(SDL_INIT_VIDEO) == 0, "SDL_Init: %s", SDL_GetError());
}

static void sdl_down(void)
{
    SDL_Quit();
}

static void app_algo(dv_app *a, const char *name, int n)
{
    dv_model m = algo_model(name, n);
    ck_assert_int_eq(dv_app_init(a, &m, dv_algo_index(name), 1000, W, H, NULL), 0);
}

/* Pushes a key press (with shift when shift is set) and applies the queue. */
static void press(dv_app *a, SDL_Keycode k, int shift)
{
    SDL_Event e = { .type = SDL_KEYDOWN };
    e.key.state = SDL_PRESSED;
    e.key.keysym.sym = k;
    e.key.keysym.mod = shift ? KMOD_LSHIFT : KMOD_NONE;
    ck_assert(SDL_PushEvent(&e) == 1);
    dv_app_pump(a);
}

static void push_click(int x, int y)
{
    SDL_Event e = { .type = SDL_MOUSEBUTTONDOWN };
    e.button.button = SDL_BUTTON_LEFT;
    e.button.state = SDL_PRESSED;
    e.button.x = x;
    e.button.y = y;
    ck_assert(SDL_PushEvent(&e) == 1);
}

START_TEST(keys_move)
{
    dv_app a;
    app_algo(&a, "ring-allreduce", 4);
    ck_assert(a.pos == 0 && !a.playing);
    for (int i = 0; i < 3; i++)
        press(&a, SDLK_RIGHT, 0);
    ck_assert(a.pos == 3);
    press(&a, SDLK_LEFT, 0);
    ck_assert(a.pos == 2);
    press(&a, SDLK_END, 0);
    ck_assert(a.pos == a.m.npos - 1);
    press(&a, SDLK_RIGHT, 0);                     /* stays at the end */
    ck_assert(a.pos == a.m.npos - 1);
    press(&a, SDLK_HOME, 0);
    ck_assert(a.pos == 0);
    press(&a, SDLK_LEFT, 0);
    ck_assert(a.pos == 0);
    dv_app_free(&a);
}
END_TEST

START_TEST(keys_play)
{
    dv_app a;
    app_algo(&a, "ring-allreduce", 4);
    double v = a.speed;
    press(&a, SDLK_SPACE, 0);
    ck_assert(a.playing);
    dv_app_update(&a, 0.5);
    ck_assert_msg(a.pos > 0 && a.pos == 0.5 * v, "pos %g", a.pos);
    press(&a, SDLK_RIGHT, 0);                     /* a step pauses, on a whole position */
    ck_assert(!a.playing && a.pos == 1 + (int)(0.5 * v));
    press(&a, SDLK_EQUALS, 0);
    ck_assert(a.speed == 2 * v);
    press(&a, SDLK_KP_MINUS, 0);
    press(&a, SDLK_MINUS, 0);
    ck_assert(a.speed == v / 2);
    press(&a, SDLK_KP_PLUS, 0);
    ck_assert(a.speed == v);
    press(&a, SDLK_SPACE, 0);
    dv_app_update(&a, 1000);                      /* plays to the end and stops there */
    ck_assert(a.pos == a.m.npos - 1 && !a.playing);
    press(&a, SDLK_SPACE, 0);                     /* at the end, space starts over */
    ck_assert(a.playing && a.pos == 0);
    press(&a, SDLK_SPACE, 0);
    dv_app_update(&a, 1);
    ck_assert(a.pos == 0);
    press(&a, SDLK_END, 0);
    press(&a, SDLK_r, 0);
    ck_assert(a.playing && a.pos == 0);
    dv_app_free(&a);
}
END_TEST

START_TEST(keys_model)
{
    dv_app a;
    app_algo(&a, "ring-allreduce", 4);
    press(&a, SDLK_RIGHT, 0);
    press(&a, SDLK_a, 0);
    ck_assert_int_eq(a.algo, 1);
    ck_assert_str_eq(dv_algo_coll(a.algo), dv_algo_coll(dv_algo_index("reduce-scatter")));
    ck_assert(a.pos == 0 && a.m.nranks == 4);
    press(&a, SDLK_n, 1);                         /* N: one more */
    ck_assert_int_eq(a.m.nranks, 5);
    press(&a, SDLK_n, 0);
    press(&a, SDLK_n, 0);
    ck_assert_int_eq(a.m.nranks, 3);
    for (int i = 0; i < 4; i++)
        press(&a, SDLK_n, 0);
    ck_assert_int_eq(a.m.nranks, 1);              /* no fewer than one */
    ck_assert(a.note[0] != '\0');
    press(&a, SDLK_h, 0);
    ck_assert(a.help && a.note[0] == '\0');
    press(&a, SDLK_h, 0);
    ck_assert(!a.help);
    for (int i = 0; dv_algos[i + 1] != NULL; i++)  /* a wraps around */
        press(&a, SDLK_a, 0);
    ck_assert_int_eq(a.algo, 0);
    dv_app_free(&a);

    /* a trace: the keys that rebuild only leave a note */
    char err[256];
    dt_trace t;
    dv_model m;
    ck_assert(dv_algo_trace(0, 4, 1000, &t, err, sizeof err) == 0);
    ck_assert(dv_model_build(&m, &t, err, sizeof err) == 0);
    ck_assert_int_eq(dv_app_init(&a, &m, -1, 0, W, H, NULL), 0);
    press(&a, SDLK_a, 0);
    press(&a, SDLK_n, 1);
    ck_assert(a.note[0] != '\0' && a.m.nranks == 4 && a.algo == -1);
    dv_app_free(&a);
}
END_TEST

START_TEST(mouse_resize_quit)
{
    dv_app a;
    char line[256];
    FILE *log = tmpfile();
    app_algo(&a, "ring-allreduce", 4);
    a.log = log;
    dv_layout L;
    dv_layout_compute(&a.m, 0, a.w, a.h, &L);
    push_click(L.timeline.x + L.timeline.w * 3 / 4, L.timeline.y + 2);
    dv_app_pump(&a);
    ck_assert_msg(a.pos == 4, "a click at 3/4 of 6 steps went to %g", a.pos);
    push_click(L.timeline.x + 1, L.timeline.y - 20);   /* above it: nothing */
    dv_app_pump(&a);
    ck_assert(a.pos == 4);

    SDL_Event e = { .type = SDL_WINDOWEVENT };
    e.window.event = SDL_WINDOWEVENT_SIZE_CHANGED;
    e.window.data1 = 900;
    e.window.data2 = 600;
    SDL_PushEvent(&e);
    dv_app_pump(&a);
    ck_assert(a.w == 900 && a.h == 600);
    dv_layout_compute(&a.m, 0, a.w, a.h, &L);
    push_click(L.timeline.x + 1, L.timeline.y + 1);     /* the new layout's timeline */
    dv_app_pump(&a);
    ck_assert(a.pos == 0);

    rewind(log);
    ck_assert(fgets(line, sizeof line, log) != NULL);
    ck_assert_msg(strncmp(line, "dtviz: position 4 of 0..6: call 1 of 1, allreduce_ring", 54) == 0,
                  "%s", line);
    ck_assert(fgets(line, sizeof line, log) != NULL);
    ck_assert_msg(strncmp(line, "dtviz: size 900x600 timeline ", 29) == 0, "%s", line);
    ck_assert(fgets(line, sizeof line, log) != NULL);
    ck_assert_msg(strncmp(line, "dtviz: position 0 of 0..6: ", 27) == 0, "%s", line);
    fclose(log);

    a.log = NULL;
    press(&a, SDLK_q, 0);
    ck_assert(a.quit);
    a.quit = 0;
    press(&a, SDLK_ESCAPE, 0);
    ck_assert(a.quit);
    a.quit = 0;
    SDL_Event q = { .type = SDL_QUIT };
    SDL_PushEvent(&q);
    dv_app_pump(&a);
    ck_assert(a.quit);
    dv_app_free(&a);
}
END_TEST

/* The window's loop itself, on the dummy driver: it draws (the timeline through its
 * cached texture), takes the queued keys, and returns on q. */
START_TEST(run_loop)
{
    char err[256];
    SDL_Window *w = SDL_CreateWindow("dtviz", 0, 0, W, H, 0);
    ck_assert_msg(w != NULL, "%s", SDL_GetError());
    SDL_Renderer *r = SDL_CreateRenderer(w, -1, 0);
    ck_assert_msg(r != NULL, "%s", SDL_GetError());
    dv_text *t = dv_text_open(r, NULL, err, sizeof err);
    ck_assert_msg(t != NULL, "%s", err);
    dv_app a;
    app_algo(&a, "tree-bcast", 6);
    static const SDL_Keycode keys[] = { SDLK_RIGHT, SDLK_RIGHT, SDLK_h, SDLK_a, SDLK_RIGHT,
                                        SDLK_q };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        SDL_Event e = { .type = SDL_KEYDOWN };
        e.key.keysym.sym = keys[i];
        SDL_PushEvent(&e);
    }
    dv_app_run(&a, r, t);
    ck_assert(a.quit && a.help && a.pos == 1 && a.algo == dv_algo_index("tree-bcast") + 1);
    dv_app_free(&a);
    dv_text_close(t);
    SDL_DestroyRenderer(r);
    SDL_DestroyWindow(w);
}
END_TEST

/* ==== the timetable ==== */

static void app_pipeline(dv_app *a, const char *name, int P, int M)
{
    char err[256];
    dv_model m;
    int ta = dv_train_algo_index(name);
    ck_assert_msg(ta >= 0, "no pipeline %s", name);
    ck_assert_msg(dv_model_train_algo(&m, ta, P, M, err, sizeof err) == 0, "%s", err);
    ck_assert(!m.from_trace);
    ck_assert_int_eq(dv_app_init(a, &m, -1, 0, W, H, NULL), 0);
    dv_app_train_algo(a, ta, P, M);
}

/* The x of time t on the timetable's rows, found through dv_tt_hit (so the test does
 * not know the layout), and a y on (rank, lane); 0 when none is found. */
static int tt_point(dv_app *a, int rank, int lane, double t, int *px, int *py)
{
    dv_view v;
    int r, l;
    double tt, best = -1;
    dv_app_view(a, &v);
    *py = -1;
    for (int y = 0; y < a->h && *py < 0; y++)
        if (dv_tt_hit(&v, a->w, a->h, a->w / 2, y, &r, &l, &tt) && r == rank && l == lane)
            *py = y + 1;                           /* one pixel inside the lane */
    for (int x = 0; x < a->w && *py >= 0; x++)
        if (dv_tt_hit(&v, a->w, a->h, x, *py, &r, &l, &tt) && (best < 0 || fabs(tt - t) < best)) {
            best = fabs(tt - t);
            *px = x;
        }
    return *py >= 0 && best >= 0;
}

static void push_button(Uint32 type, int x, int y)
{
    SDL_Event e = { .type = type };
    e.button.button = SDL_BUTTON_LEFT;
    e.button.state = type == SDL_MOUSEBUTTONDOWN ? SDL_PRESSED : SDL_RELEASED;
    e.button.x = x;
    e.button.y = y;
    ck_assert(SDL_PushEvent(&e) == 1);
}

/* A built-in pipeline opens on its timetable; the zoom and pan keys move the window by
 * what they say and undo exactly; a, n, N, m, M rebuild it. */
START_TEST(tt_keys_window)
{
    dv_app a;
    app_pipeline(&a, "gpipe", 3, 5);
    ck_assert(a.tt != NULL && a.timetable && a.tt->nsteps == 1);
    ck_assert(a.t0 <= a.tt->steps[0].t0 && a.t1 >= a.tt->steps[0].t1);
    double w = a.t1 - a.t0, t0 = a.t0;
    a.cursor = a.t0 + w / 4;
    press(&a, SDLK_EQUALS, 0);                   /* zoom in around the cursor */
    ck_assert_msg(fabs((a.t1 - a.t0) - w / 1.5) < 1e-9 * w, "width %g of %g", a.t1 - a.t0, w);
    ck_assert_msg(fabs((a.cursor - a.t0) / (a.t1 - a.t0) - 0.25) < 1e-9, "cursor moved");
    press(&a, SDLK_MINUS, 0);
    ck_assert(fabs((a.t1 - a.t0) - w) < 1e-9 * w && fabs(a.t0 - t0) < 1e-9 * w);
    press(&a, SDLK_PERIOD, 0);                   /* pan right by a quarter */
    ck_assert_msg(fabs(a.t0 - (t0 + w / 4)) < 1e-9 * w, "t0 %g, was %g", a.t0, t0);
    press(&a, SDLK_COMMA, 0);
    ck_assert(fabs(a.t0 - t0) < 1e-9 * w);
    for (int i = 0; i < 20; i++)                 /* never past the ends by half a window */
        press(&a, SDLK_PERIOD, 0);
    ck_assert(a.t0 <= a.tt->t_end && a.t1 > a.tt->t_end);
    press(&a, SDLK_RIGHT, 0);                    /* one step: stays, window fitted again */
    ck_assert(a.tt_step == 0 && fabs(a.t0 - t0) < 1e-9 * w);

    press(&a, SDLK_a, 0);                        /* gpipe -> 1f1b */
    ck_assert(a.timetable && a.tt != NULL && a.tt->schedule == 1 && a.train_algo == 1);
    press(&a, SDLK_n, 1);
    ck_assert(a.stages == 4 && a.m.nranks == 4 && a.tt->stages == 4);
    press(&a, SDLK_m, 0);
    ck_assert(a.micro == 4 && a.tt->micro == 4);
    press(&a, SDLK_m, 1);
    press(&a, SDLK_m, 1);
    ck_assert(a.micro == 6 && a.tt->micro == 6);
    press(&a, SDLK_v, 1);                        /* v: interleaved's alone */
    ck_assert(a.train_algo == 1 && a.note[0] != '\0');
    press(&a, SDLK_a, 0);                        /* 1f1b -> interleaved, 2 chunks a stage */
    ck_assert(a.train_algo == 2 && a.tt->schedule == 2 && a.tt->v == 2 && a.stages == 4 &&
              a.micro == 6 && a.m.nranks == 4);
    press(&a, SDLK_v, 1);                        /* V: 3 chunks; the labels say "c" */
    ck_assert(a.virt == 3 && a.tt->v == 3);
    int c = 0;
    for (int k = 0; k < a.tt->nblocks; k++)
        c += a.tt->blocks[k].chunk == 2 && strchr(a.tt->blocks[k].label, 'c') != NULL;
    ck_assert_int_eq(c, 4 * 2 * 6);               /* a forward and a backward a micro-batch */
    press(&a, SDLK_v, 0);
    press(&a, SDLK_v, 0);
    press(&a, SDLK_v, 0);                        /* v = 0 is refused, with a note */
    ck_assert(a.virt == 1 && a.tt->v == 1 && a.note[0] != '\0');
    press(&a, SDLK_v, 1);
    press(&a, SDLK_a, 0);                        /* -> zb-h1, its W blocks */
    ck_assert(a.train_algo == 3 && a.tt->schedule == 3 && a.tt->v == 1);
    c = 0;
    for (int k = 0; k < a.tt->nblocks; k++)
        c += a.tt->blocks[k].kind == DV_TT_WEIGHTS;
    ck_assert_int_eq(c, 4 * 6);
    press(&a, SDLK_a, 0);                        /* zb-h1 -> ddp, in its default shape */
    ck_assert(a.train_algo == DV_TRAIN_DDP && a.tt != NULL && !strcmp(a.tt->mode, "ddp"));
    ck_assert(a.m.nranks == 3 && a.ddp.layers == 6 && a.ddp.buckets == 3);
    press(&a, SDLK_n, 0);                        /* n, m: its ranks and buckets */
    press(&a, SDLK_m, 1);
    ck_assert(a.ddp.ranks == 2 && a.m.nranks == 2 && a.ddp.buckets == 4 && a.m.ncalls == 4);
    for (int i = 0; i < 3; i++)                  /* 6 layers: 6 buckets at most, then a note */
        press(&a, SDLK_m, 1);
    ck_assert(a.ddp.buckets == 6 && a.m.ncalls == 6 && a.note[0] != '\0');
    press(&a, SDLK_a, 0);                        /* and back, the pipeline as it was */
    ck_assert(a.tt->schedule == 0 && a.train_algo == 0 && a.stages == 4 && a.micro == 6);
    press(&a, SDLK_a, 0);
    press(&a, SDLK_a, 0);                        /* interleaved keeps its chunks */
    ck_assert(a.train_algo == 2 && a.virt == 2 && a.tt->v == 2);
    dv_app_free(&a);
}
END_TEST

/* A trace of three training steps on 2 ranks, each a forward and a backward per rank and
 * a ring allreduce of 1000 floats during the backward (from the built-in ring's events,
 * moved in time): what dtviz opens on, steps, a click on the allreduce, the collective
 * view of that call, and back. */
static void app_training(dv_app *a)
{
    char err[256];
    dt_trace ring;
    ck_assert(dv_algo_trace(dv_algo_index("ring-allreduce"), 2, 1000, &ring, err, sizeof err) == 0);
    size_t n = 0, cap = 3 * (ring.n + 8);
    dt_trace t = { .version = 1, .nranks = 2 };
    snprintf(t.program, sizeof t.program, "train");
    t.ev = calloc(cap, sizeof *t.ev);
    ck_assert(t.ev != NULL);
    for (int r = 0; r < 2; r++)
        for (int s = 1; s <= 3; s++) {
            double base = s * 10.0;
            static const char *ph[] = { "forward", "backward" };
            for (int k = 0; k < 2; k++) {
                dt_event *e = &t.ev[n++];
                *e = (dt_event){ .t0 = base + 3 * k, .t1 = base + 3 * k + 3, .rank = r,
                                 .peer = -1, .kind = DT_EV_COMPUTE, .step = s, .chunk = 0 };
                snprintf(e->coll, sizeof e->coll, "train");
                snprintf(e->phase, sizeof e->phase, "%s", ph[k]);
            }
            for (size_t i = 0; i < ring.n; i++)   /* the ring, during the backward */
                if (ring.ev[i].rank == r) {
                    dt_event *e = &t.ev[n++];
                    *e = ring.ev[i];
                    e->t0 = base + 4 + e->t0 * 0.5;
                    e->t1 = base + 4 + e->t1 * 0.5;
                }
        }
    t.n = n;
    dti_trace_sort(t.ev, t.n);
    dt_trace_free(&ring);
    dv_model m;
    ck_assert_msg(dv_model_build(&m, &t, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(m.ncalls, 3);
    ck_assert_int_eq(dv_app_init(a, &m, -1, 0, W, H, NULL), 0);
}

START_TEST(tt_steps_and_calls)
{
    dv_app a;
    app_training(&a);
    ck_assert(a.tt != NULL && a.timetable);
    ck_assert_int_eq(a.tt->nsteps, 3);
    ck_assert_int_eq(a.tt_step, 2);              /* it opens on the last step */
    press(&a, SDLK_LEFT, 0);
    ck_assert_int_eq(a.tt_step, 1);
    ck_assert(a.t0 <= 20 && a.t1 >= 26 && a.t1 - a.t0 < 10);
    press(&a, SDLK_HOME, 0);
    ck_assert_int_eq(a.tt_step, 0);
    press(&a, SDLK_LEFT, 0);
    ck_assert_int_eq(a.tt_step, 0);
    press(&a, SDLK_END, 0);
    ck_assert_int_eq(a.tt_step, 2);
    press(&a, SDLK_LEFT, 0);                     /* step 2: the ring runs from 24 on */

    /* a click on rank 1's communication lane during the ring picks that call */
    int x, y, b;
    double tc = 24.6;
    ck_assert_msg(tt_point(&a, 1, 1, tc, &x, &y), "no pixel for rank 1's comm lane");
    b = dv_tt_block_at(a.tt, 1, 1, tc);
    ck_assert_msg(b >= 0, "no block of rank 1's comm lane at %g", tc);
    ck_assert_int_eq(a.tt->blocks[b].call, 1);
    push_button(SDL_MOUSEBUTTONDOWN, x, y);
    push_button(SDL_MOUSEBUTTONUP, x, y);
    dv_app_pump(&a);
    ck_assert_msg(a.call == 1, "the click picked call %d", a.call);
    ck_assert_msg(fabs(a.cursor - tc) < (a.t1 - a.t0) / 100, "cursor %g", a.cursor);
    press(&a, SDLK_t, 0);                        /* that call, chunk by chunk */
    ck_assert(!a.timetable && (int)a.pos == a.m.calls[1].first_pos);
    dv_view cv;
    dv_app_view(&a, &cv);                        /* the header says what it was for */
    ck_assert_msg(cv.tt == NULL && cv.context != NULL &&
                  strncmp(cv.context, "training step 2, ", 17) == 0, "context %s",
                  cv.context != NULL ? cv.context : "(none)");
    press(&a, SDLK_RIGHT, 0);
    press(&a, SDLK_t, 0);                        /* back, on the same step */
    ck_assert(a.timetable && a.tt_step == 1 && a.call == 1);

    /* a drag pans by the pointer's way; a click after it is not a click */
    double t0 = a.t0, w = a.t1 - a.t0;
    ck_assert(tt_point(&a, 0, 0, a.t0 + w / 2, &x, &y));
    push_button(SDL_MOUSEBUTTONDOWN, x, y);
    SDL_Event e = { .type = SDL_MOUSEMOTION };
    e.motion.state = SDL_BUTTON_LMASK;
    e.motion.x = x - 100;
    e.motion.y = y;
    SDL_PushEvent(&e);
    push_button(SDL_MOUSEBUTTONUP, x - 100, y);
    dv_app_pump(&a);
    ck_assert_msg(a.t0 > t0 && fabs((a.t1 - a.t0) - w) < 1e-9 * w, "t0 %g -> %g", t0, a.t0);
    ck_assert(a.call == 1);
    dv_app_free(&a);
}
END_TEST

/* The built-in ddp: a click on a bucket picks its ring allreduce, and t shows it chunk by
 * chunk, named as the bucket it reduces. */
START_TEST(tt_ddp_click)
{
    dv_app a;
    dv_model m;
    char err[256];
    dv_ddp_shape d = DV_DDP_DEFAULT;
    ck_assert_msg(dv_model_train_ddp(&m, d, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(dv_app_init(&a, &m, -1, 0, W, H, NULL), 0);
    dv_app_train_ddp(&a, d);
    ck_assert(a.tt != NULL && a.timetable && a.m.ncalls == 3);
    int x, y, b;
    double tc = 15;                              /* bucket 1 runs over slots 14 .. 16 */
    ck_assert_msg(tt_point(&a, 2, 1, tc, &x, &y), "no pixel for rank 2's comm lane");
    b = dv_tt_block_at(a.tt, 2, 1, tc);
    ck_assert_msg(b >= 0 && !strcmp(a.tt->blocks[b].label, "bucket 1"), "block %d", b);
    push_button(SDL_MOUSEBUTTONDOWN, x, y);
    push_button(SDL_MOUSEBUTTONUP, x, y);
    dv_app_pump(&a);
    ck_assert_msg(a.call == 1, "the click picked call %d", a.call);
    press(&a, SDLK_t, 0);
    ck_assert(!a.timetable && (int)a.pos == a.m.calls[1].first_pos);
    ck_assert_int_eq(a.m.calls[1].nframes, 4);   /* 2(N-1) ring steps */
    dv_view cv;
    dv_app_view(&a, &cv);
    ck_assert_msg(cv.context != NULL && strstr(cv.context, "bucket 1") != NULL, "context %s",
                  cv.context != NULL ? cv.context : "(none)");
    dv_app_free(&a);
}
END_TEST

/* The timetable drawn: a compute block shows its kind's colour, idle shows none of the
 * kinds', and the picture changes with the window. */
START_TEST(tt_draw_pixels)
{
    dv_app a;
    char err[256];
    app_training(&a);
    dv_view v;
    dv_app_view(&a, &v);
    SDL_Surface *s = dv_render_surface(&a.m, &v, W, H, err, sizeof err);
    ck_assert_msg(s != NULL, "%s", err);
    int x, y;
    SDL_Color f = dv_kind_color(DV_C_FORWARD), bk = dv_kind_color(DV_C_BACKWARD);
    ck_assert(tt_point(&a, 0, 0, 31.5, &x, &y));           /* step 3's forward */
    ck_assert_uint_eq(rgb_at(s, x, y + 1), (Uint32)f.r << 16 | (Uint32)f.g << 8 | f.b);
    ck_assert(tt_point(&a, 1, 0, 34.5, &x, &y));           /* its backward */
    ck_assert_uint_eq(rgb_at(s, x, y + 1), (Uint32)bk.r << 16 | (Uint32)bk.g << 8 | bk.b);
    ck_assert(tt_point(&a, 1, 0, 36.5, &x, &y));           /* idle after it */
    Uint32 idle = rgb_at(s, x, y + 1);
    for (int k = 0; k < DV_C_N; k++) {
        SDL_Color c = dv_kind_color((dv_color_kind)k);
        ck_assert_msg(idle != ((Uint32)c.r << 16 | (Uint32)c.g << 8 | c.b),
                      "idle time drawn in kind %d's colour", k);
    }
    SDL_FreeSurface(s);
    dv_app_free(&a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("viz_app");
    TCase *tc = tcase_create("draw");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, colors_distinct);
    tcase_add_test(tc, ring_allreduce_4);
    tcase_add_test(tc, ring_allreduce_16);
    tcase_add_test(tc, allgather_start);
    tcase_add_test(tc, arrows_in_gaps);
    tcase_add_test(tc, step_back_exact);
    tcase_add_test(tc, every_algo);
    tcase_add_test(tc, describe);
    tcase_add_test(tc, timeline_training);
    tcase_add_test(tc, count_zero_timeline);
    suite_add_tcase(s, tc);
    tc = tcase_create("app");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, sdl_up, sdl_down);
    tcase_add_test(tc, keys_move);
    tcase_add_test(tc, keys_play);
    tcase_add_test(tc, keys_model);
    tcase_add_test(tc, mouse_resize_quit);
    tcase_add_test(tc, run_loop);
    tcase_add_test(tc, tt_keys_window);
    tcase_add_test(tc, tt_steps_and_calls);
    tcase_add_test(tc, tt_ddp_click);
    tcase_add_test(tc, tt_draw_pixels);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
