/* dtviz: watch a collective move chunk by chunk, and training step by step.
 *
 *   build/dtviz --algo ring-allreduce --ranks 4     a built-in schedule, in a window
 *   build/dtviz run.trace                           replay a trace (lesson or build/train)
 *   build/dtviz --algo allgather --png a.png --step 3      one picture, no display
 *   build/dtviz run.trace --frames frames/                 every position as a PNG
 *   build/dtviz --algo 1f1b --stages 4 --micro 8          a pipeline's timetable
 *   build/dtviz --algo interleaved --virtual 2             2 model chunks a stage
 *   build/dtviz --algo zb-h1                               B and W apart
 *   build/dtviz --algo ddp --ranks 3 --layers 6 --buckets 3   DDP's buckets and overlap
 *   build/dtviz train.trace --train-step 2 --png t.png     a training step's timetable
 *
 * The collective view: each rank's buffer is a row of cells, coloured by the ranks
 * whose data each cell holds; the messages of the step about to happen are arrows;
 * beside them, the bytes each rank has sent against the cost model; below, the
 * timeline of every event. The timetable (training traces, built-in pipelines and
 * ddp): one row per rank, its compute and its communication over time, step by step
 * (see timetable.h and tt_draw.c).
 *
 * Exit status: 0 done; 1 what no option fixes (no display, no font, out of memory) or
 * a write that failed once the work had started (a full disk); 2 a usage error: an
 * input that cannot be shown, or an output that cannot be written (refused before the
 * work). No MPI here: it reads files. */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <SDL_image.h>

#include "app.h"
#include "schedule.h"

/* ==== options ==== */

#define DEFAULT_ALGO "ring-allreduce"      /* without a FILE or --algo */

typedef struct {
    const char *file, *algo, *png, *frames, *chrome, *view;
    long long ranks, count, step;   /* -1: not given */
    long long stages, micro, train_step;
    long long virt;                 /* interleaved's chunks a stage; -1: not given */
    long long layers, buckets, comm;  /* ddp; -1: not given */
    int no_overlap;
    double cursor;                  /* NAN: not given */
    double win0, win1;              /* --window A,B; NAN: not given */
    int w, h, verbose;
} options;

/* The built-in algorithms, comma-separated. wrap: after indent, in lines under 80
 * columns, then '\n' (the usage text); else on one line, nothing around it (a message). */
static void algo_names(FILE *f, const char *indent, int wrap)
{
    const char *const *lists[] = { dv_algos, dv_train_algos };
    int col = wrap ? fprintf(f, "%s", indent) : 0, n = 0;
    for (int k = 0; k < 2; k++)
        for (int i = 0; lists[k][i] != NULL; i++, n++) {
            int w = (int)strlen(lists[k][i]) + 2;
            if (n > 0)
                col += fprintf(f, ",");
            if (wrap && n > 0 && col + w > 79)
                col = fprintf(f, "\n%s", indent) - 1;
            col += fprintf(f, "%s%s", wrap || n > 0 ? " " : "", lists[k][i]);
        }
    if (wrap)
        fputc('\n', f);
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: dtviz [options] [FILE]\n"
        "Animates a collective chunk by chunk: each rank's buffer as cells coloured by the\n"
        "ranks whose data they hold, each step's messages as arrows, the bytes sent beside\n"
        "the cost model, and a timeline of every event with a cursor. A training trace (or\n"
        "a built-in pipeline or DDP step) opens on its timetable: a row per rank, compute\n"
        "and communication over time, the bubble and the overlap measured beside their\n"
        "models.\n"
        "  FILE                  replay a trace written with --trace (a lesson, build/train)\n"
        "  --algo ALGO           a built-in schedule instead (the default: ring-allreduce);\n"
        "                        gpipe, 1f1b, interleaved (1F1B over v model chunks a\n"
        "                        stage) and zb-h1 (zero bubble: the backward cut into B,\n"
        "                        the input's gradient, and W, the weights') are pipeline\n"
        "                        timetables; ddp, DDP's gradient buckets in one step:\n");
    algo_names(f, "                       ", 1);
    fprintf(f,
        "  --ranks N             its ranks, 1..%d (default 4; ddp 3)\n"
        "  --count N             its buffer in float elements (default 1048576); at 0 the\n"
        "                        collective moves nothing: no cells, an empty timeline\n"
        "  --stages P            the pipelines: stages, 1..%d (default 4)\n"
        "  --micro M             the pipelines: micro-batches per step, 1..64 (default 8)\n"
        "  --virtual V           interleaved: model chunks a stage, 1..26 (default 2)\n"
        "  --layers L            ddp: layers, 1..64 (default 6); a forward takes 1 slot, a\n"
        "                        backward 2\n"
        "  --buckets B           ddp: gradient buckets, 1..L (default 3): runs of layers in\n"
        "                        backward order, bucket 0 the last layers\n"
        "  --comm C              ddp: slots of allreduce per layer in a bucket, 1..16\n"
        "                        (default 1: communication keeps up with backward)\n"
        "  --no-overlap          ddp: every allreduce after backward (default: each as soon\n"
        "                        as its bucket is ready, on a thread of its own)\n"
        "  --png FILE            draw one picture into FILE and exit; needs no display\n"
        "  --step K              the collective view's position K, 0 the first: what --png\n"
        "                        draws and where the window starts (default 0)\n"
        "  --train-step S        the timetable's training step S, as the trace numbers it\n"
        "                        (train counts from 1; default: the last one)\n"
        "  --cursor T            the timetable's cursor at T, in the axis' units (ms of the\n"
        "                        trace, or slots of a built-in schedule); a pipeline's\n"
        "                        stashed activations there are shown (default: the step's\n"
        "                        start)\n"
        "  --window A,B          the timetable's window (zoom): from A to B in the axis'\n"
        "                        units (default: the training step)\n"
        "  --view V              timetable or collective: what a training trace opens on\n"
        "                        (default timetable; --step picks collective)\n"
        "  --frames DIR          draw every position (timetable: every training step) into\n"
        "                        DIR/frame-NNNN.png and exit\n"
        "  --export-chrome FILE  write the trace (for --algo, the one it synthesises) as\n"
        "                        Chrome JSON for https://ui.perfetto.dev and exit\n"
        "  --size WxH            picture or window size (default 1280x800)\n"
        "  --verbose             print a line for each position change and window resize\n"
        "  -h, --help            print this text\n"
        "Keys in the window:\n", DV_MAX_RANKS, DV_MAX_RANKS);
    for (int i = 0; dv_key_help[i][0] != NULL; i++)
        fprintf(f, "  %-12s %s\n", dv_key_help[i][0], dv_key_help[i][1]);
    fprintf(f, "The font is DejaVu Sans (fonts-dejavu-core); DTVIZ_FONT=FILE.ttf picks another.\n");
}

/* A usage error: one line, the hint, status 2. */
__attribute__((format(printf, 1, 2)))
static int bad(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("dtviz: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs("\nTry 'dtviz --help' for usage.\n", stderr);
    return 2;
}

/* s as a whole number in [lo, hi]; 0, or -1 if it is not one (strtoll alone would
 * take leading spaces and a '+'). */
static int parse_num(const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    if (!isdigit((unsigned char)s[0]) && !(s[0] == '-' && isdigit((unsigned char)s[1])))
        return -1;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

/* s (up to stop, or its end when stop is NULL) as a finite time within +-1e12: 0, or -1.
 * A sign, digits and a point, as the axis prints them; no spaces, no "inf". */
static int parse_time(const char *s, double *v, const char *stop)
{
    char buf[64], *end;
    size_t n = stop != NULL ? (size_t)(stop - s) : strlen(s);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (!(isdigit((unsigned char)buf[0]) || buf[0] == '-' || buf[0] == '.'))
        return -1;
    errno = 0;
    *v = strtod(buf, &end);
    return errno != 0 || *end != '\0' || !isfinite(*v) || fabs(*v) > 1e12 ? -1 : 0;
}

/* Returns 0 and fills o, or the exit status of a usage error (or of --help: -1). */
static int parse(int argc, char **argv, options *o)
{
    enum { O_ALGO = 256, O_RANKS, O_COUNT, O_PNG, O_STEP, O_FRAMES, O_CHROME, O_SIZE, O_VERBOSE,
           O_STAGES, O_MICRO, O_TSTEP, O_VIEW, O_CURSOR, O_WINDOW, O_LAYERS, O_BUCKETS,
           O_COMM, O_NO_OVERLAP, O_VIRTUAL };
    static const struct option lo[] = {
        { "algo", required_argument, 0, O_ALGO }, { "ranks", required_argument, 0, O_RANKS },
        { "count", required_argument, 0, O_COUNT }, { "png", required_argument, 0, O_PNG },
        { "step", required_argument, 0, O_STEP }, { "frames", required_argument, 0, O_FRAMES },
        { "export-chrome", required_argument, 0, O_CHROME },
        { "size", required_argument, 0, O_SIZE }, { "verbose", no_argument, 0, O_VERBOSE },
        { "stages", required_argument, 0, O_STAGES }, { "micro", required_argument, 0, O_MICRO },
        { "train-step", required_argument, 0, O_TSTEP }, { "view", required_argument, 0, O_VIEW },
        { "cursor", required_argument, 0, O_CURSOR }, { "window", required_argument, 0, O_WINDOW },
        { "layers", required_argument, 0, O_LAYERS }, { "buckets", required_argument, 0, O_BUCKETS },
        { "comm", required_argument, 0, O_COMM }, { "no-overlap", no_argument, 0, O_NO_OVERLAP },
        { "virtual", required_argument, 0, O_VIRTUAL },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 },
    };
    long long w, h;
    int c;
    *o = (options){ .ranks = -1, .count = -1, .step = -1, .stages = -1, .micro = -1, .virt = -1,
                    .train_step = -1, .layers = -1, .buckets = -1, .comm = -1, .cursor = NAN,
                    .win0 = NAN, .win1 = NAN, .w = 1280, .h = 800 };
    opterr = 0;                            /* our own messages, in our own words */
    while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        switch (c) {
        case O_ALGO: o->algo = optarg; break;
        case O_PNG: o->png = optarg; break;
        case O_FRAMES: o->frames = optarg; break;
        case O_CHROME: o->chrome = optarg; break;
        case O_VERBOSE: o->verbose = 1; break;
        case 'h': usage(stdout); return -1;
        case O_RANKS:
            if (parse_num(optarg, 1, DV_MAX_RANKS, &o->ranks) != 0)
                return bad("--ranks '%s': the viewer shows 1 to %d ranks", optarg, DV_MAX_RANKS);
            break;
        case O_COUNT:
            if (parse_num(optarg, 0, 1LL << 40, &o->count) != 0)
                return bad("--count '%s': expected a number of elements, 0 to 2^40", optarg);
            break;
        case O_STEP:
            if (parse_num(optarg, 0, INT_MAX, &o->step) != 0)
                return bad("--step '%s': expected a position, 0 or more", optarg);
            break;
        case O_STAGES:
            if (parse_num(optarg, 1, DV_MAX_RANKS, &o->stages) != 0)
                return bad("--stages '%s': the viewer shows 1 to %d stages", optarg, DV_MAX_RANKS);
            break;
        case O_MICRO:
            if (parse_num(optarg, 1, 64, &o->micro) != 0)
                return bad("--micro '%s': expected 1 to 64 micro-batches", optarg);
            break;
        case O_VIRTUAL:
            if (parse_num(optarg, 1, 26, &o->virt) != 0)
                return bad("--virtual '%s': expected 1 to 26 model chunks a stage (chunk j "
                           "is drawn as a letter, a to z)", optarg);
            break;
        case O_LAYERS:
            if (parse_num(optarg, 1, 64, &o->layers) != 0)
                return bad("--layers '%s': expected 1 to 64 layers", optarg);
            break;
        case O_BUCKETS:
            if (parse_num(optarg, 1, 64, &o->buckets) != 0)
                return bad("--buckets '%s': expected 1 to 64 buckets, at most one a layer",
                           optarg);
            break;
        case O_COMM:
            if (parse_num(optarg, 1, 16, &o->comm) != 0)
                return bad("--comm '%s': expected 1 to 16 slots of allreduce per layer (at 0 "
                           "communication would take no time, and there would be nothing to "
                           "see)", optarg);
            break;
        case O_NO_OVERLAP: o->no_overlap = 1; break;
        case O_TSTEP:
            if (parse_num(optarg, 0, INT_MAX, &o->train_step) != 0)
                return bad("--train-step '%s': expected a training step's number, as the "
                           "trace counts them (train from 1)", optarg);
            break;
        case O_CURSOR:
            if (parse_time(optarg, &o->cursor, NULL) != 0)
                return bad("--cursor '%s': expected a time, e.g. 11 (slots) or 1250.5 (ms)",
                           optarg);
            break;
        case O_WINDOW: {
            char *comma = strchr(optarg, ',');
            if (comma == NULL || parse_time(optarg, &o->win0, comma) != 0 ||
                parse_time(comma + 1, &o->win1, NULL) != 0 || !(o->win1 > o->win0))
                return bad("--window '%s': expected A,B with A < B, times as the axis counts "
                           "them, e.g. 10,20 (slots) or 1250,1400 (ms)", optarg);
            break;
        }
        case O_VIEW:
            if (strcmp(optarg, "timetable") != 0 && strcmp(optarg, "collective") != 0)
                return bad("--view '%s': expected timetable or collective", optarg);
            o->view = optarg;
            break;
        case O_SIZE: {
            char *x = strchr(optarg, 'x'), num[32];
            snprintf(num, sizeof num, "%.*s", x != NULL ? (int)(x - optarg) : 0, optarg);
            if (x == NULL || x - optarg >= (long)sizeof num || parse_num(num, 200, 8192, &w) != 0 ||
                parse_num(x + 1, 150, 8192, &h) != 0)
                return bad("--size '%s': expected WxH, 200x150 to 8192x8192, e.g. 1280x800",
                           optarg);
            o->w = (int)w;
            o->h = (int)h;
            break;
        }
        case ':':
            return bad("%s needs a value", argv[optind - 1]);
        default:
            return bad("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        o->file = argv[optind++];
    if (o->file != NULL && o->file[0] == '\0')
        return bad("the trace file's name is empty");
    if (optind < argc)
        return bad("one trace at a time: '%s' is one too many", argv[optind]);
    if (o->file != NULL && o->algo != NULL)
        return bad("give a trace FILE or --algo, not both");
    if (o->file != NULL && (o->ranks >= 0 || o->count >= 0))
        return bad("--ranks and --count shape a built-in schedule; a trace has its own");
    if (o->file != NULL && (o->stages >= 0 || o->micro >= 0 || o->virt >= 0))
        return bad("--stages, --micro and --virtual shape a built-in pipeline; a trace has "
                   "its own");
    int ddp_opts = o->layers >= 0 || o->buckets >= 0 || o->comm >= 0 || o->no_overlap;
    if (o->file != NULL && ddp_opts)
        return bad("--layers, --buckets, --comm and --no-overlap shape the built-in ddp; a "
                   "trace has its own");
    const char *name = o->algo != NULL ? o->algo : DEFAULT_ALGO;
    int ta = dv_train_algo_index(name), pipe = ta >= 0 && ta != DV_TRAIN_DDP,
        ddp = ta == DV_TRAIN_DDP;
    if (o->file == NULL && !pipe && (o->stages >= 0 || o->micro >= 0))
        return bad("--stages and --micro shape the pipelines gpipe, 1f1b, interleaved and "
                   "zb-h1, not %s", name);
    if (o->file == NULL && o->virt >= 0 && ta != 2)
        return bad("--virtual shapes the built-in interleaved (its model chunks a stage), "
                   "not %s", name);
    long long P = o->stages >= 0 ? o->stages : 4, M = o->micro >= 0 ? o->micro : 8,
        v = o->virt >= 0 ? o->virt : 2;
    if (ta == 2 && !dt_pp_valid(ta, (int)P, (int)M, (int)v))
        return bad("--virtual %lld: interleaved does not run %lld chunks a stage over %lld "
                   "stages and %lld micro-batches", v, v, P, M);
    if (pipe && (o->ranks >= 0 || o->count >= 0))
        return bad("%s is shaped by --stages and --micro, not --ranks or --count", name);
    if (o->file == NULL && !ddp && ddp_opts)
        return bad("--layers, --buckets, --comm and --no-overlap shape the built-in ddp, not "
                   "%s", name);
    if (ddp && o->count >= 0)
        return bad("ddp is shaped by --ranks, --layers, --buckets, --comm and --no-overlap, "
                   "not --count");
    long long L = o->layers >= 0 ? o->layers : DV_DDP_DEFAULT.layers;
    if (ddp && o->buckets > L)
        return bad("--buckets %lld: %lld layers make at most %lld buckets (one a layer)",
                   o->buckets, L, L);
    if (o->step >= 0 && o->train_step >= 0)
        return bad("--step is a position of the collective view, --train-step a step of the "
                   "timetable: give one");
    if (o->step >= 0 && o->view != NULL && !strcmp(o->view, "timetable"))
        return bad("--step is a position of the collective view; the timetable takes "
                   "--train-step");
    if (o->train_step >= 0 && o->view != NULL && !strcmp(o->view, "collective"))
        return bad("--train-step is a step of the timetable; the collective view takes --step");
    if ((!isnan(o->cursor) || !isnan(o->win0)) &&
        (o->step >= 0 || (o->view != NULL && !strcmp(o->view, "collective"))))
        return bad("--cursor and --window are the timetable's; the collective view takes --step");
    return 0;
}

/* The files the options name, before any work: a name no file can have, or a place
 * that cannot be written (its folder missing or read-only, a folder where a file goes
 * or the reverse), is a usage error (2), as for the MPI programs' --trace. Only a write
 * that fails once the work has started (a full disk) is an error (1). Returns 0 or the
 * exit status. */
static int check_outputs(const options *o)
{
    const struct { const char *opt, *path; int is_dir; } out[] = {
        { "--png", o->png, 0 }, { "--frames", o->frames, 1 },
        { "--export-chrome", o->chrome, 0 },
    };
    char err[512];
    for (size_t i = 0; i < sizeof out / sizeof out[0]; i++) {
        int rc = out[i].path != NULL ? dt_output_check(out[i].path, out[i].is_dir, err,
                                                       sizeof err) : 0;
        if (rc == -2)                      /* no file can have that name: show it */
            return bad("%s '%s': %s", out[i].opt, out[i].path, err);
        if (rc != 0)                       /* err names the path and the reason */
            return bad("%s: %s", out[i].opt, err);
    }
    return 0;
}

/* ==== the model ==== */

static int export_chrome(const dt_trace *t, const char *path)
{
    char err[512];
    if (dt_trace_write_chrome(t, path, err, sizeof err) != 0) {
        fprintf(stderr, "dtviz: %s\n", err);
        return 1;
    }
    printf("dtviz: wrote %s (open it in https://ui.perfetto.dev)\n", path);
    return 0;
}

/* The built-in ddp's shape from the options (main has put the defaults in). */
static dv_ddp_shape ddp_shape(const options *o)
{
    return (dv_ddp_shape){ .ranks = (int)o->ranks, .layers = (int)o->layers,
                           .buckets = (int)o->buckets, .comm = (int)o->comm,
                           .overlap = !o->no_overlap };
}

/* The built-in pipeline's shape (main has put the defaults in): v = 1 but interleaved. */
static dv_pp_shape pp_shape(const options *o, int talgo)
{
    return (dv_pp_shape){ .schedule = talgo, .stages = (int)o->stages, .micro = (int)o->micro,
                          .v = talgo == 2 ? (int)o->virt : 1 };
}

/* Builds m from the trace file or the built-in algorithm (*algo: its index in dv_algos,
 * or -1; *talgo: its index in dv_train_algos, or -1), writing the Chrome export on the
 * way when asked. Returns 0 or an exit status. */
static int load(const options *o, dv_model *m, int *algo, int *talgo)
{
    char err[512];
    dt_trace t;
    int rc = 0;
    *algo = *talgo = -1;
    if (o->file != NULL) {
        if (dt_trace_read(o->file, &t, err, sizeof err) != 0)
            return bad("%s", err);
        if (o->chrome != NULL && (rc = export_chrome(&t, o->chrome)) != 0) {
            dt_trace_free(&t);
            return rc;
        }
        if (dv_model_build(m, &t, err, sizeof err) != 0)
            return bad("%s", err);
        return 0;
    }
    const char *name = o->algo != NULL ? o->algo : DEFAULT_ALGO;
    *talgo = dv_train_algo_index(name);
    if (*talgo < 0 && (*algo = dv_algo_index(name)) < 0) {
        fprintf(stderr, "dtviz: unknown algorithm '%s' (", name);   /* as bad() would */
        algo_names(stderr, "", 0);
        fputs(")\nTry 'dtviz --help' for usage.\n", stderr);
        return 2;
    }
    if (o->chrome != NULL) {               /* the events the schedule would record */
        if (*talgo == DV_TRAIN_DDP)
            rc = dv_train_ddp_trace(ddp_shape(o), &t, err, sizeof err);
        else if (*talgo >= 0)
            rc = dv_train_pp_trace(pp_shape(o, *talgo), &t, err, sizeof err);
        else
            rc = dv_algo_trace(*algo, (int)o->ranks, o->count, &t, err, sizeof err);
        if (rc != 0)
            return bad("%s", err);
        rc = export_chrome(&t, o->chrome);
        dt_trace_free(&t);
        if (rc != 0)
            return rc;
    }
    if (*talgo == DV_TRAIN_DDP)
        rc = dv_model_train_ddp(m, ddp_shape(o), err, sizeof err);
    else if (*talgo >= 0)
        rc = dv_model_train_pp(m, pp_shape(o, *talgo), err, sizeof err);
    else
        rc = dv_model_algo(m, *algo, (int)o->ranks, o->count, err, sizeof err);
    return rc != 0 ? bad("%s", err) : 0;
}

/* Puts a where the options say: the view, the training step, the position. Returns 0 or
 * the exit status of a usage error. */
static int place(const options *o, dv_app *a)
{
    const char *what = a->m.from_trace ? "trace" : "schedule";
    if (a->tt == NULL && o->train_step >= 0)
        return bad("--train-step: this %s has no training steps (it is not a training trace)",
                   what);
    if (a->tt == NULL && o->view != NULL && !strcmp(o->view, "timetable"))
        return bad("--view timetable: this %s is not a training trace", what);
    if (o->step >= 0 && a->tt != NULL && a->m.ncalls == 0)
        return bad("--step: this %s has no collective calls, only its timetable "
                   "(--train-step picks a step)", what);
    if (o->step >= a->m.npos)
        return bad("--step %lld is past the end: this %s has positions 0..%d", o->step, what,
                   a->m.npos - 1);
    if (a->tt != NULL && o->train_step >= 0) {
        int s = 0;
        while (s < a->tt->nsteps && a->tt->steps[s].step != o->train_step)
            s++;
        if (s == a->tt->nsteps)
            return bad("--train-step %lld: this %s has training steps %d..%d", o->train_step,
                       what, a->tt->nsteps > 0 ? a->tt->steps[0].step : 0,
                       a->tt->nsteps > 0 ? a->tt->steps[a->tt->nsteps - 1].step : 0);
        dv_app_tt_step(a, s);
    }
    if (a->tt == NULL && (!isnan(o->cursor) || !isnan(o->win0)))
        return bad("--cursor, --window: this %s has no timetable (it is not a training trace)",
                   what);
    /* times as the axis counts them: ms from the trace's start, or slots */
    double base = a->tt != NULL ? dv_tt_axis_base(a->tt) : 0;
    double unit = a->tt != NULL ? 1 / dv_tt_axis_scale(a->tt) : 1;
    const char *un = a->tt != NULL ? dv_tt_axis_unit(a->tt) : "";
    if (a->tt != NULL && !isnan(o->win0)) {
        double t0 = base + o->win0 * unit, t1 = base + o->win1 * unit;
        if (t1 <= a->tt->t_begin || t0 >= a->tt->t_end)
            return bad("--window %g,%g: this %s runs from 0 to %.4g %s", o->win0, o->win1,
                       what, (a->tt->t_end - base) / unit, un);
        a->t0 = t0;
        a->t1 = t1;
        a->cursor = t0;
    }
    if (a->tt != NULL && !isnan(o->cursor)) {
        double c = base + o->cursor * unit;
        if (!(c >= a->t0 && c <= a->t1))
            return bad("--cursor %g: the window shows %.4g to %.4g %s (--train-step, --window "
                       "move it)", o->cursor, (a->t0 - base) / unit, (a->t1 - base) / unit, un);
        a->cursor = c;
    }
    if (o->step >= 0 || (o->view != NULL && !strcmp(o->view, "collective"))) {
        if (a->tt != NULL && a->m.ncalls == 0)
            return bad("this %s has no collective calls: only its timetable", what);
        dv_app_show_timetable(a, 0);
        a->pos = o->step > 0 ? (double)o->step : 0;
    }
    return 0;
}

/* What the picture shows, in the words the window uses. */
static void describe(dv_app *a, char *s, size_t len)
{
    if (a->tt != NULL && a->timetable) {
        int st = a->tt->nsteps > 0 ? a->tt->steps[a->tt_step].step : 0;
        snprintf(s, len, "the timetable of training step %d (%d of %d)", st,
                 a->tt->nsteps > 0 ? a->tt_step + 1 : 0, a->tt->nsteps);
    } else {
        dv_pos_describe(&a->m, (int)a->pos, s, len);
    }
}

/* ==== without a display ==== */

static int headless(const options *o, dv_app *a)
{
    char err[512], path[4096], what[256];
    dv_view v;
    SDL_Init(0);                           /* no video: a software renderer on a surface */
    IMG_Init(IMG_INIT_PNG);
    if (o->png != NULL) {
        dv_app_view(a, &v);
        v.cache = NULL;
        v.speed = 0;                       /* a picture: no "playing" corner */
        if (dv_render_png(&a->m, &v, o->w, o->h, o->png, err, sizeof err) != 0) {
            fprintf(stderr, "dtviz: %s\n", err);
            return 1;
        }
        describe(a, what, sizeof what);
        printf("dtviz: wrote %s: %s\n", o->png, what);
    }
    if (o->frames != NULL) {
        int n = (int)strlen(o->frames), tt = a->tt != NULL && a->timetable;
        int nf = tt ? (a->tt->nsteps > 0 ? a->tt->nsteps : 1) : a->m.npos;
        while (n > 1 && o->frames[n - 1] == '/')      /* "dir/" names dir */
            n--;
        if (mkdir(o->frames, 0777) != 0 && errno != EEXIST) {
            fprintf(stderr, "dtviz: cannot make the folder %s: %s\n", o->frames, strerror(errno));
            return 1;
        }
        for (int p = 0; p < nf; p++) {
            if (tt)
                dv_app_tt_step(a, p);
            else
                a->pos = p;
            dv_app_view(a, &v);
            v.cache = NULL;
            v.speed = 0;
            snprintf(path, sizeof path, "%.*s/frame-%04d.png", n, o->frames, p);
            if (dv_render_png(&a->m, &v, o->w, o->h, path, err, sizeof err) != 0) {
                fprintf(stderr, "dtviz: %s\n", err);
                return 1;
            }
        }
        printf("dtviz: wrote %d frame%s (%s), %.*s/frame-0000.png to frame-%04d.png\n", nf,
               nf == 1 ? "" : "s", tt ? "one per training step" : "one per position", n,
               o->frames, nf - 1);
    }
    IMG_Quit();
    SDL_Quit();
    return 0;
}

/* ==== in a window ==== */

/* Whether a window would be seen. Without DISPLAY or WAYLAND_DISPLAY, SDL still finds a
 * driver (offscreen, dummy) whose windows nobody sees, and probing Wayland prints noise:
 * so ask only when one is set, and refuse those drivers unless SDL_VIDEODRIVER named them. */
static int has_display(void)
{
    const char *want = getenv("SDL_VIDEODRIVER"), *drv;
    if (want == NULL && getenv("DISPLAY") == NULL && getenv("WAYLAND_DISPLAY") == NULL)
        return 0;
    if (SDL_Init(SDL_INIT_VIDEO) != 0 || (drv = SDL_GetCurrentVideoDriver()) == NULL)
        return 0;
    return !((!strcmp(drv, "offscreen") || !strcmp(drv, "dummy")) &&
             (want == NULL || strcmp(want, drv) != 0));
}

static int window(const options *o, dv_app *a)
{
    char err[512];
    if (!has_display()) {
        fprintf(stderr, "dtviz: no display to open a window on (DISPLAY is not set or does "
                "not answer); draw without one with --png FILE or --frames DIR\n");
        SDL_Quit();
        return 1;
    }
    SDL_Window *win = SDL_CreateWindow("dtviz", SDL_WINDOWPOS_CENTERED, SDL_WINDOWPOS_CENTERED,
                                       o->w, o->h, SDL_WINDOW_RESIZABLE);
    SDL_Renderer *r = NULL;
    if (win != NULL) {
        r = SDL_CreateRenderer(win, -1, SDL_RENDERER_ACCELERATED | SDL_RENDERER_PRESENTVSYNC);
        if (r == NULL)
            r = SDL_CreateRenderer(win, -1, SDL_RENDERER_SOFTWARE);
    }
    if (r == NULL) {
        fprintf(stderr, "dtviz: cannot open a window (%s); draw without one with --png FILE "
                "or --frames DIR\n", SDL_GetError());
        if (win != NULL)
            SDL_DestroyWindow(win);
        SDL_Quit();
        return 1;
    }
    int rc = 1;
    dv_text *t = dv_text_open(r, NULL, err, sizeof err);
    SDL_GetWindowSize(win, &a->w, &a->h);
    a->log = o->verbose ? stdout : NULL;
    if (t == NULL)
        fprintf(stderr, "dtviz: %s\n", err);
    else {
        dv_app_run(a, r, t);
        rc = 0;
    }
    dv_cache_clear(a->cache);              /* its texture, before the renderer goes */
    dv_text_close(t);
    SDL_DestroyRenderer(r);
    SDL_DestroyWindow(win);
    SDL_Quit();
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    dv_model m;
    dv_app a;
    int algo, talgo, rc = parse(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? 0 : rc;
    if ((rc = check_outputs(&o)) != 0)
        return rc;
    dv_ddp_shape dflt = DV_DDP_DEFAULT;
    int ddp = o.algo != NULL && dv_train_algo_index(o.algo) == DV_TRAIN_DDP;
    if (o.ranks < 0)
        o.ranks = ddp ? dflt.ranks : 4;
    if (o.layers < 0)
        o.layers = dflt.layers;
    if (o.buckets < 0)                     /* 3, or a bucket a layer below 3 layers */
        o.buckets = dflt.buckets < o.layers ? dflt.buckets : o.layers;
    if (o.comm < 0)
        o.comm = dflt.comm;
    if (o.count < 0)
        o.count = 1048576;
    if (o.stages < 0)
        o.stages = 4;
    if (o.micro < 0)
        o.micro = 8;
    if (o.virt < 0)
        o.virt = 2;
    if ((rc = load(&o, &m, &algo, &talgo)) != 0)
        return rc;
    if (dv_app_init(&a, &m, algo, o.count, o.w, o.h, NULL) != 0) {
        fprintf(stderr, "dtviz: out of memory, or the trace's timetable cannot be built\n");
        return 1;
    }
    if (a.tt != NULL && a.tt->disagree[0] && o.file != NULL)   /* said, then drawn */
        fprintf(stderr, "dtviz: %s: %s\n", o.file, a.tt->disagree);
    if (talgo == DV_TRAIN_DDP)
        dv_app_train_ddp(&a, ddp_shape(&o));
    else if (talgo >= 0)
        dv_app_train_pp(&a, pp_shape(&o, talgo));
    if ((rc = place(&o, &a)) == 0) {
        if (o.png != NULL || o.frames != NULL || o.chrome != NULL)
            rc = headless(&o, &a);
        else
            rc = window(&o, &a);
    }
    dv_app_free(&a);
    /* "wrote ..." lines that cannot be written are a failed write too */
    if (rc == 0 && (fflush(stdout) != 0 || ferror(stdout))) {
        fprintf(stderr, "dtviz: cannot write to standard output: %s\n",
                strerror(errno != 0 ? errno : EIO));
        rc = 1;
    }
    return rc;
}
