/* Lesson 29: today's pipeline schedules, interleaved 1F1B and zero bubble (ZB-H1).
 *
 * What it teaches: lesson 16's bubble, (P-1)/(M+P-1) of the step, is the time the
 * line of stages takes to fill and to drain. Two schedules shrink it without more
 * micro-batches:
 *   interleaved 1F1B (Narayanan et al., 2021; Megatron-LM's virtual pipeline): each
 *     rank holds v chunks of layers instead of one block, and a micro-batch goes round
 *     the ranks v times. Filling and draining now take a chunk's time, 1/v of a
 *     stage's: the bubble falls to (P-1)/(vM+P-1). The price: v times the messages,
 *     and a longer warm-up that stashes more.
 *   ZB-H1 (Qi et al., 2023, "Zero Bubble Pipeline Parallelism"): backward cut in two,
 *     B, the gradient of the input, which the stage before waits for, and W, the
 *     gradient of the weights, which nothing waits for. Stage s puts its W's off by s
 *     micro-batches, and they fill the drain where 1F1B idles: with F, B and W of equal
 *     time the bubble is a third of 1F1B's, for the same messages and 1F1B's memory.
 * The lesson draws the four schedules on one clock, trains the same model with each
 * (every one reaches the same weights as 1F1B, byte for byte: only when each
 * micro-batch runs changes, never the order its gradients add up in), and sets what it
 * measured beside the formulas: bubble, stash, messages, time per step.
 *
 * The code: lib/parallel/pp.c (dti_pp_step runs any of the four orders),
 * lib/parallel/model.c (dti_model_init_chunks: a stage's v chunks;
 * dti_model_backward_input and dti_model_backward_weights: B and W), lib/schedule.c
 * (dt_pp_order_v, dt_pp_timetable_v and the closed forms).
 *
 * Run:  mpiexec -n 4 build/lessons/29_pipeline_schedules
 *       mpiexec -n 4 build/lessons/29_pipeline_schedules --micro 16 --virtual 3
 *       mpiexec -n 2 build/lessons/29_pipeline_schedules --hidden 1024
 *       mpiexec -n 3 build/lessons/29_pipeline_schedules --trace il.trace
 *
 * --trace records one run, interleaved 1F1B's (1F1B's on one rank): dtviz draws its
 * timetable, chunk by chunk (build/dtviz il.trace).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 29_pipeline_schedules [options]\n"
    "Trains an MLP cut into N pipeline stages with GPipe, 1F1B, interleaved 1F1B and\n"
    "ZB-H1, side by side; draws their timetables and sets bubble, stash, messages and\n"
    "time per step beside the formulas.\n"
    "  --steps S           training steps, 2 to 200 (default 4)\n"
    "  --micro M           micro-batches per step; M must divide the batch of 96\n"
    "                      (default 8)\n"
    "  --virtual V         interleaved: chunks of layers a stage, 1 to 8 (default 2)\n"
    "  --hidden H          the layers' width, 8 to 4096 (default 128): wider layers\n"
    "                      compute longer beside the same number of messages\n"
    DT_COMMON_USAGE
    "                      (one run: interleaved 1F1B's, 1F1B's on one rank)\n"
    "  --help              this text\n";

enum { NSCHED = 4, DRAW_WIDTH = 110, ENOUGH_RUNS = 3 };

static const char *const name[NSCHED] = { "GPipe", "1F1B", "interleaved", "ZB-H1" };

/* Draws schedule sch on the clock (F, B and W one slot each; GPipe's, 1F1B's and
 * interleaved's backward, B and W together, two) at m micro-batches, when it fits in
 * DRAW_WIDTH columns. */
static void draw(int sch, int P, int m, int v)
{
    int vs = sch == DT_PP_INTERLEAVED ? v : 1;
    int len = dt_pp_draw_v(sch, P, m, vs, 1, 1, NULL, 0);
    if (len <= 0 || len / P - 1 > DRAW_WIDTH) {
        char vv[24] = "";
        if (vs > 1)
            snprintf(vv, sizeof vv, " --virtual %d", vs);
        dt_printf0("  (too wide to draw here: build/dtviz --algo %s --stages %d --micro "
                   "%d%s)\n", dt_pp_schedule_name((dt_pp_schedule)sch), P, m, vv);
        return;
    }
    char *pic = malloc((size_t)len + 1);
    DT_REQUIRE(pic != NULL, "out of memory");
    dt_pp_draw_v(sch, P, m, vs, 1, 1, pic, (size_t)len + 1);
    dt_printf0("%s", pic);
    free(pic);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 4, M = 8, v = 2, hidden = 128;
    dt_int_option io[] = {{"steps", 2, 200, &steps}, {"micro", 1, 96, &M},
                          {"virtual", 1, 8, &v}, {"hidden", 8, 4096, &hidden}};
    dt_parse_int_options(argc, argv, io, 4, usage);
    int P = n, have_il = P >= 2;       /* interleaved goes round 2 or more stages */

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_PP, &set);
    c.model.hidden = hidden;
    if (hidden > 128)                  /* wider layers add more terms: a smaller step, */
        c.optim.lr *= 128.0f / hidden; /* or training (and its rounding) runs away */
    /* at least 8 layers, a multiple of v P: v equal chunks a stage */
    int chunks = have_il ? v * P : 1;
    c.model.layers = chunks * ((8 + chunks - 1) / chunks);
    c.steps = steps;
    c.batch = 96;
    c.micro = M;
    c.virtual_stages = 1;
    char why[256];
    if (dt_train_check(&c, n, why, sizeof why))   /* only --micro can fail here */
        dt_usage_error(usage, why);
    int L = c.model.layers, vs[NSCHED] = { 1, 1, v, 1 };

    /* ==== the idea: four timetables on one clock ==== */
    dt_printf0("%d layers in %d stage%s (one per rank), a batch of %d in M = %d "
               "micro-batches of %d.\nOne slot: a forward F; a backward takes two, its "
               "input's gradient B and its weights' W\n(one B of two slots where they run "
               "together). Interleaved: v = %d chunks a stage, a\nslot is a chunk's "
               "forward (1/v of a stage's), letters a, b, .. name the chunks.\n",
               L, P, P == 1 ? "" : "s", c.batch, M, c.batch / M, v);
    static const char *const how[NSCHED] = {
        "every forward, then every backward",
        "warm-up forwards, then one forward, one backward",
        "1F1B over v chunks a stage, the micro-batches in groups of P or more",
        "1F1B with backward cut in B and W, stage s putting its W's off by s"};
    int md = M < P ? M : P;            /* enough to show each schedule's shape */
    if (md < M)
        dt_printf0("Drawn at M = %d micro-batch%s (the runs below take %d):\n", md,
                   md == 1 ? "" : "es", M);
    for (int sch = 0; sch < NSCHED; sch++) {
        dt_printf0("\n%s: %s\n", name[sch], how[sch]);
        if (sch == DT_PP_INTERLEAVED && !have_il)
            dt_printf0("  (needs 2 or more stages: try -n 3)\n");
        else
            draw(sch, P, md, v);
    }

    /* ==== the library calls: the four schedules, then serial ==== */
    dt_train_result res[NSCHED], ref;
    int ran[NSCHED] = { 1, 1, have_il, 1 };
    int traced = have_il ? DT_PP_INTERLEAVED : DT_PP_1F1B;
    for (int sch = 0; sch < NSCHED; sch++) {
        memset(&res[sch], 0, sizeof res[sch]);
        if (!ran[sch])
            continue;
        c.schedule = (dt_pp_schedule)sch;
        c.virtual_stages = vs[sch];
        dt_trace_pause(sch != traced);
        dt_train(&c, MPI_COMM_WORLD, &res[sch]);
    }
    dt_trace_pause(1);
    c.schedule = DT_PP_1F1B;
    c.virtual_stages = 1;
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);   /* one batch of 96, no micro-batches */
    double diff = dt_params_max_diff(res[1].params, ref.params, ref.nparams,
                                     MPI_COMM_WORLD);
    int same = 1;                                /* byte for byte, as 1F1B */
    for (int sch = 0; sch < NSCHED && rank == 0; sch++)
        if (ran[sch])
            same &= !memcmp(res[sch].params, res[1].params, ref.nparams * sizeof(float));
    MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);

    /* ==== the numbers beside the formulas ==== */
    /* the step on the clock in stage-forwards (interleaved's slots are 1/v of one) */
    int books_ok = 1;
    double bubble[NSCHED] = { 0 }, ideal[NSCHED] = { 0 };
    long msg_theory[NSCHED] = { 0 }, msg_max[NSCHED] = { 0 };
    dt_timing tt[NSCHED];
    dt_printf0("\n%-12s %9s  %-15s  %-17s  %-17s  %s\n", "", "step", "bubble",
               "stash, stage 0", "messages a step", "time per step");
    dt_printf0("%-12s %9s  %6s %8s  %7s %9s  %7s %9s\n", "schedule", "(slots)", "ideal",
               "measured", "theory", "measured", "theory", "measured");
    for (int sch = 0; sch < NSCHED; sch++) {
        if (!ran[sch]) {
            dt_printf0("%-12s needs 2 or more stages\n", name[sch]);
            continue;
        }
        const dt_train_result *r = &res[sch];
        int V = vs[sch];
        double slots = dt_pp_slots_v(sch, P, M, V, 1, 1) / (double)V;
        ideal[sch] = dt_pp_bubble_v(sch, P, M, V, 1, 1);
        long got = 0;
        for (int s = 0; s < r->stages && rank == 0; s++) {
            bubble[sch] += r->stage_bubble[s] / r->stages;
            long want = dt_pp_messages_v(sch, P, M, V, s);
            msg_theory[sch] += want;
            got += (long)r->stage_messages[s];
            if (want > msg_max[sch])
                msg_max[sch] = want;
            books_ok &= r->stage_stash[s] == dt_pp_peak_stash_v(sch, P, M, V, s) &&
                        (long)r->stage_messages[s] == want;
        }
        if (rank == 0 && P > 1 && r->stages != P)
            books_ok = 0;
        tt[sch] = dt_train_step_timing(r);
        int stash0 = P > 1 && rank == 0 ? r->stage_stash[0] : 0;
        char st[24];
        snprintf(st, sizeof st, V > 1 ? "%d (%.1f)" : "%d", stash0, (double)stash0 / V);
        dt_printf0("%-12s %9.1f  %6.3f %8.3f  %7d %9s  %7ld %9ld  %7.2f ms +-%3.0f%%\n",
                   name[sch], slots, ideal[sch], bubble[sch],
                   dt_pp_peak_stash_v(sch, P, M, V, 0), P > 1 ? st : "-", msg_theory[sch],
                   got, tt[sch].median * 1e3, 100 * dt_timing_spread(tt[sch]));
    }
    MPI_Bcast(&books_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(bubble, NSCHED, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    MPI_Bcast(msg_max, NSCHED, MPI_LONG, 0, MPI_COMM_WORLD);
    dt_printf0("step: the slots of the clock above, in a stage's forwards (interleaved's "
               "1/v each).\nstash: micro-batches whose activations stage 0 holds at once; "
               "interleaved's are chunks,\n(in brackets) a stage's worth. messages: all "
               "stages', activations and gradients.\n");

    /* ==== the verdicts ==== */
    if (P == 1) {
        dt_printf0("\nOne stage is no pipeline: the micro-batches run one after the "
                   "other and nothing\nis sent, so every schedule does the same work; "
                   "their times differ by noise.\nTry -n 3.\n");
    } else {
        double worst = 0;
        for (int sch = 0; sch < NSCHED; sch++)
            if (ran[sch] && bubble[sch] - ideal[sch] > worst)
                worst = bubble[sch] - ideal[sch];
        if (worst > 0.15)
            dt_printf0("\nThe measured bubbles sit up to %.2f above the ideal: they count "
                       "every moment a stage\nis not computing (waiting, sending, "
                       "receiving), which the formula, counting\ncompute alone, leaves "
                       "out.\n", worst);
        else
            dt_printf0("\nThe measured bubbles lie within %.2f of the ideal: messages cost "
                       "little beside the\ncompute here.\n", worst);
        /* what interleaving saves at best, and what it sends more */
        double C = res[1].compute_seconds;         /* a stage's compute per step */
        double saved = C / (1 - ideal[1]) - C / (1 - ideal[2]);
        long extra = msg_max[2] - msg_max[1];      /* on the busiest rank */
        int enough = tt[1].runs >= ENOUGH_RUNS;
        int cmp = dt_timing_compare(tt[2], tt[1]);
        dt_printf0("\nInterleaving with v = %d: at the ideal it saves %.2f ms of the %.2f ms "
                   "of compute\na stage does per step, for %ld more messages on the busiest "
                   "rank: it pays\nwhere a message costs under %.0f us.\n", v, saved * 1e3,
                   C * 1e3, extra, extra > 0 ? saved / extra * 1e6 : 0.0);
        if (!enough || cmp == 0)
            dt_printf0("Here interleaved and 1F1B took times within each other's spread: "
                       "which is faster\nis lost in the noise.\n");
        else if (cmp > 0)
            dt_printf0("Here interleaved was slower than 1F1B, beyond the spread: its "
                       "extra messages cost\nmore than the bubble it saved.\n");
        else
            dt_printf0("Here interleaved was faster than 1F1B, beyond the spread: the "
                       "bubble it saved was\nworth more than its extra messages.\n");
        cmp = dt_timing_compare(tt[3], tt[1]);
        dt_printf0("\nZB-H1 sends what 1F1B sends; at the ideal it saves %.2f ms a step "
                   "(B and W as\nlong as F; a real W is often longer, and W's put off wait "
                   "their turn).\n", (C / (1 - ideal[1]) - C / (1 - ideal[3])) * 1e3);
        if (!enough || cmp == 0)
            dt_printf0("Here ZB-H1 and 1F1B took times within each other's spread: lost in "
                       "the noise.\n");
        else
            dt_printf0("Here ZB-H1 was %s than 1F1B, beyond the spread.\n",
                       cmp < 0 ? "faster" : "slower");
        double sp = 0;
        for (int sch = 0; sch < NSCHED; sch++)
            if (ran[sch] && dt_timing_spread(tt[sch]) > sp)
                sp = dt_timing_spread(tt[sch]);
        dt_timing_note(sp, "Each message then costs a trip through the scheduler, "
                       "which makes interleaving's extra messages dear and the bubble's "
                       "formula, which counts compute only, a floor far below the "
                       "measured.");
    }

    /* ==== the check ==== */
    int ok = diff <= 1e-5 && same && books_ok;
    dt_printf0("\ncheck: every schedule's weights byte-equal to 1F1B's: %s; 1F1B against "
               "serial\n       training, max |weight difference| %.3g (limit 1e-5); stash "
               "and messages\n       as the theory says, every stage: %s\n       %s\n",
               same ? "yes" : "NO", diff, books_ok ? "yes" : "NO", ok ? "PASS" : "FAIL");
    dt_printf0("\nThe code: lib/parallel/pp.c (dti_pp_step), lib/parallel/model.c "
               "(dti_model_init_chunks, dti_model_backward_input, "
               "dti_model_backward_weights), lib/schedule.c (dt_pp_order_v, "
               "dt_pp_timetable_v)\n");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    for (int sch = 0; sch < NSCHED; sch++)
        if (ran[sch])
            dt_train_result_free(&res[sch]);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
