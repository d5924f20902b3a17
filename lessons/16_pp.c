/* Lesson 16: pipeline parallelism, GPipe and 1F1B.
 *
 * What it teaches: cut the layers into P stages, one per rank; a stage passes
 * its activations to the next and, in backward, their gradients to the one
 * before. One batch alone would keep all stages but one idle, so the batch is
 * cut into M micro-batches that follow each other down the line. Stages still
 * idle while the line fills and drains: the bubble, (P-1)/(M+P-1) of the step.
 * GPipe runs all forwards, then all backwards, and holds the activations of
 * all M micro-batches; 1F1B starts each backward as early as it can and holds
 * at most P-s on stage s. This lesson draws both timetables, measures the
 * bubble and the stash, and checks both schedules against serial training.
 *
 * Run:  mpiexec -n 4 build/lessons/16_pp
 *       mpiexec -n 4 build/lessons/16_pp --micro 8
 *       mpiexec -n 3 build/lessons/16_pp --trace pp.trace  (bubbles, in dtviz)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 16_pp [options]\n"
    "Trains a 6-layer MLP (N layers on more than 6 ranks) cut into N pipeline "
    "stages,\n"
    "GPipe and 1F1B, beside serial training; draws the timetables.\n"
    "  --steps S           training steps, 1 to 200 (default 4)\n"
    "  --micro M           micro-batches per step; M must divide the batch of "
    "96\n"
    "                      (default 4)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TOL_EXP = 5, WIDTH = 80 };

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 4, M = 4;
    dt_int_option io[] = {{"steps", 1, 200, &steps}, {"micro", 1, 96, &M}};
    dt_parse_int_options(argc, argv, io, 2, usage);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_PP, &set);
    c.model.hidden = 64;
    c.model.layers = n > 6 ? n : 6;      /* a stage needs a layer */
    c.steps = steps;
    c.batch = 96;
    c.micro = M;
    char why[256];
    if (dt_train_check(&c, n, why, sizeof why))  /* only --micro can fail */
        dt_usage_error(usage, why);
    int P = n;

    /* ==== the idea: the two timetables ==== */
    dt_printf0("%d layers in %d stage%s (one per rank), a batch of %d in M = "
               "%d micro-batches\nof %d. F m: forward of micro-batch m, B m: "
               "its backward (one slot each here;\nreal backwards take about "
               "two):\n", c.model.layers, P, P == 1 ? "" : "s", c.batch, M,
               c.batch / M);
    static const char *const name[2] = {"GPipe", "1F1B"}, *const how[2] = {
        "every forward, then every backward",           /* by dt_pp_schedule */
        "warm-up forwards, then one forward, one backward"};
    for (int sch = 0; sch < 2; sch++) {
        int len = dt_pp_draw(sch, P, M, 1, NULL, 0);
        char *pic = malloc((size_t)len + 1);
        dt_pp_draw(sch, P, M, 1, pic, (size_t)len + 1);
        dt_printf0("\n%s: %s\n", name[sch], how[sch]);
        if (len / P - 1 <= WIDTH)              /* P lines of equal length */
            dt_printf0("%s", pic);
        else
            dt_printf0("  (%d columns wide: too wide to draw here; try fewer "
                       "--micro)\n", len / P - 1);
        free(pic);
    }
    dt_printf0("\nBoth take (M+P-1) x 2 slots, of which each stage works 2M: "
               "the bubble\nis (P-1)/(M+P-1) = %.3f. 1F1B's gain is memory, "
               "not time.\n\n", dt_pp_bubble(P, M));

    /* ==== the library calls: GPipe, 1F1B, serial ==== */
    dt_train_result res[2], ref;
    for (int sch = 0; sch < 2; sch++) {
        c.schedule = (dt_pp_schedule)sch;
        dt_train(&c, MPI_COMM_WORLD, &res[sch]);
    }
    /* serial: one batch of 96; micro-batches are pp's */
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    double diff[2];
    for (int sch = 0; sch < 2; sch++)
        diff[sch] = dt_params_max_diff(res[sch].params, ref.params,
                                       ref.nparams, MPI_COMM_WORLD);

    /* ==== the numbers: bubble and stash per stage, beside the theory ==== */
    int stash_ok = 1;
    for (int sch = 0; sch < 2 && P > 1; sch++) {
        const dt_train_result *r = &res[sch];  /* stages: rank 0's, else 0 */
        dt_printf0("%-5s, last step:        bubble            stashed "
                   "activations\n  stage  layers      ideal  measured       "
                   "theory  measured\n", name[sch]);
        stash_ok &= rank != 0 || r->stages == P;
        for (int s = 0; s < r->stages; s++) {
            size_t a, b;
            dt_chunk_bounds((size_t)c.model.layers, P, s, &a, &b);
            int want = dt_pp_peak_stash(sch, P, M, s);
            stash_ok &= r->stage_stash[s] == want;
            dt_printf0("  %5d  %2zu..%-2zu  %9.3f  %8.3f  %11d  %8d\n", s, a,
                       b - 1, dt_pp_bubble(P, M), r->stage_bubble[s], want,
                       r->stage_stash[s]);
        }
    }
    MPI_Bcast(&stash_ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (P > 1)
        dt_printf0("\nThe measured bubble counts every moment a stage is not "
                   "computing: waiting,\nsending, receiving. Where messages "
                   "cost more than compute (small layers,\nranks sharing "
                   "cores) it sits far above the ideal; more --micro lowers "
                   "both.\n");
    else
        dt_printf0("One stage is no pipeline: the micro-batches run one after "
                   "the other,\naccumulating gradients. Try -n 4.\n");
    dt_printf0("Time per step: GPipe %.2f ms, 1F1B %.2f ms.\n",
               res[0].seconds_per_step * 1e3, res[1].seconds_per_step * 1e3);

    /* ==== the check ==== */
    double tol = pow(10, -TOL_EXP);
    int ok = diff[0] <= tol && diff[1] <= tol && stash_ok;
    dt_printf0("\ncheck: pipeline against serial training, max |weight "
               "difference|\n       GPipe %.3g, 1F1B %.3g (limit 1e-%d); stash "
               "as the theory says: %s\n       %s\n", diff[0], diff[1],
               TOL_EXP, stash_ok ? "yes" : "NO", ok ? "PASS" : "FAIL");

    /* ==== teardown ==== */
    dt_train_result_free(&ref);
    dt_train_result_free(&res[0]);
    dt_train_result_free(&res[1]);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
