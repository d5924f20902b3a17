/* dtviz's interactive state: what the keys and the mouse do to the view, as a state
 * machine that needs no window. Events come in as SDL_Events (from the window, or from
 * SDL_PushEvent in the tests); time comes in as seconds through dv_app_update; the
 * picture is dv_draw of dv_app_view, a pure function of the state. */
#ifndef DV_APP_H
#define DV_APP_H

#include <stdio.h>

#include "draw.h"
#include "timetable.h"

typedef struct {
    dv_model m;                 /* owned */
    int algo;                   /* index into dv_algos; -1: a trace (a, n, N do nothing) */
    long long count;            /* the built-in schedule's buffer, in elements */
    double pos;                 /* 0 .. m.npos-1 */
    double speed;               /* positions per second while playing */
    int playing, help, quit;
    int w, h;                   /* the window, for mapping clicks onto the timeline */
    char note[160];             /* one line of feedback at the bottom; "" none */
    FILE *log;                  /* --verbose: a line per position change and resize */
    int logged;                 /* the position last logged; -1 none yet */
    dv_cache *cache;            /* the timeline's texture; owned */
    /* training: the timetable (NULL for a collective's trace or a built-in collective) */
    dv_tt *tt;                  /* owned */
    int timetable;              /* 1: the timetable is shown; 0: the collective view */
    int tt_step;                /* index into tt->steps of the step shown */
    double t0, t1;              /* the timetable's window (zoom and pan) */
    double cursor;              /* the timetable's cursor */
    int call;                   /* the collective call picked in the timetable, -1 none */
    int train_algo;             /* index into dv_train_algos; -1: none */
    int stages, micro;          /* the built-in pipeline's P and M */
    int virt;                   /* the built-in interleaved's chunks a stage (v) */
    dv_ddp_shape ddp;           /* the built-in ddp's shape */
    int press_x, press_y, dragged;     /* a left button held on the timetable */
    double press_t0, press_t1;
    char tt_logged[160];        /* the timetable's line last logged */
    char context[96];           /* the collective view's "training step 2, bucket 1" */
} dv_app;

/* Starts a at position 0, paused, taking m over (m is left empty). algo and count say
 * how to rebuild m for the a, n and N keys (algo -1: m came from a trace). log NULL is
 * silent. Set a->pos after it to start elsewhere. A training trace (dv_tt_is_training)
 * opens on its timetable, at its last step. Returns 0, or -1 when out of memory or the
 * timetable cannot be built (m then freed). */
int dv_app_init(dv_app *a, dv_model *m, int algo, long long count, int w, int h, FILE *log);

/* For a model of a built-in pipeline schedule (dv_train_pp_trace) of shape s: which
 * one, with P stages, M micro-batches and interleaved's v chunks a stage, so that the
 * a, n, N, m, M, v, V keys can rebuild it. Until then (and for 'a' to switch to) the
 * pipelines have 4 stages and 8 micro-batches, interleaved 2 chunks a stage, ddp
 * DV_DDP_DEFAULT. */
void dv_app_train_pp(dv_app *a, dv_pp_shape s);

/* The same for GPipe or 1F1B (train_algo 0 or 1): interleaved's v is left as it is. */
void dv_app_train_algo(dv_app *a, int train_algo, int stages, int micro);

/* The same for a model of the built-in ddp (dv_train_ddp_trace) of shape s: n, N change
 * its ranks, m, M its buckets. */
void dv_app_train_ddp(dv_app *a, dv_ddp_shape s);

/* The timetable's step: index s into tt->steps (clamped), the window fitted to it and
 * the cursor at its start. Nothing without a timetable. */
void dv_app_tt_step(dv_app *a, int s);

/* Switches to the collective view (on = 0) at the picked call, or at the cursor's
 * time, or back to the timetable (on = 1) at the step and call of the position. */
void dv_app_show_timetable(dv_app *a, int on);
void dv_app_free(dv_app *a);

/* Applies one event: a key (see dv_key_help), a click or drag on the timeline, a
 * window resize, SDL_QUIT. Anything else is ignored. */
void dv_app_event(dv_app *a, const SDL_Event *e);

/* Applies every event waiting in SDL's queue (SDL_PollEvent). */
void dv_app_pump(dv_app *a);

/* Advances dt seconds: while playing, pos moves by speed * dt and stops at the end. */
void dv_app_update(dv_app *a, double dt);

/* The view to draw a with (pointers into a: valid while a is unchanged). */
void dv_app_view(dv_app *a, dv_view *v);

/* The window's loop until a quits: logs the model, the size and the position, then
 * events, update, draw, present, paced to about 60 frames a second (vsync where the
 * renderer has it, else SDL_Delay); while paused it sleeps in SDL_WaitEventTimeout.
 * Returns when a->quit is set. Free a (its cache's texture) before destroying r. */
void dv_app_run(dv_app *a, SDL_Renderer *r, dv_text *t);

#endif /* DV_APP_H */
