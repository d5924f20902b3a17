/* Lesson 19: mixture of experts, tokens sent to experts on other ranks by
 * all-to-all.
 *
 * What it teaches: an MoE layer holds E experts instead of one layer; a gate
 * sends each token to its top-k. The experts are spread over the ranks (2 per
 * rank here), so tokens must travel: each group of tokens (a rank's share of
 * the batch) fills C fixed slots per expert, C = ceil(capacity x k x tokens /
 * E); one all-to-all takes the slots to the experts' ranks, another brings the
 * results back (and two more in backward). Fixed slots make fixed messages,
 * but an expert that is asked more than C times drops the rest: those tokens
 * skip the layer. The load-balancing loss pushes the gate to share the tokens
 * out; unbalanced routing either drops tokens or, with a capacity large enough
 * to keep them, makes every all-to-all bigger and gives the busiest expert's
 * rank most of the work. The experts' gradients need no allreduce: each expert
 * lives on one rank, which sees every token that visited it. Only the other
 * layers and the gate, replicated, are summed over the ranks: group by group
 * in a fixed order (an allgather, then a sum), because a routing decision is
 * a cliff that a rounding difference can push a token over. So N ranks end
 * with the weights of one rank holding every expert, bit for bit.
 *
 * Run:  mpiexec -n 4 build/lessons/19_moe
 *       mpiexec -n 4 build/lessons/19_moe --topk 2
 *       mpiexec -n 4 build/lessons/19_moe --trace moe.trace   (then dtviz)
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "dt.h"
#include "parallel/moe.h"

static const char usage[] =
    "usage: mpiexec -n N 19_moe [options]\n"
    "Trains an MLP whose middle layer is 2N experts, 2 per rank: balanced "
    "routing,\n"
    "a gate biased toward one expert, and the same with room for every "
    "token; prints\n"
    "the all-to-all traffic, tokens per expert, drops and time beside the "
    "model, and\nchecks against one rank holding every expert.\n"
    "  --steps S           training steps, 2 to 200 (default 20)\n"
    "  --topk K            experts per token, 1 or 2 (default 1)\n"
    "  --hidden H          width of the hidden layers, 4 to 256 (default 64)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TOKENS = 64 };   /* tokens per group, one group a rank */

/* What on_step reads from each step's report ("aux A  dropped D  busiest
 * expert Bx  no-drop capacity F  busiest rank R rows"), summed over steps. */
typedef struct {
    double dropped, busiest, nodrop, rows;
    float loss[200];
} figures;

static void on_step(const dt_step_report *r, void *ctx)
{
    figures *f = ctx;
    float aux, busiest, nodrop;
    int dropped, rows;
    if (sscanf(r->extra, "aux %f dropped %d busiest expert %fx no-drop "
               "capacity %f busiest rank %d", &aux, &dropped, &busiest,
               &nodrop, &rows) == 5) {
        f->dropped += dropped;
        f->busiest += busiest;
        f->nodrop = nodrop > f->nodrop ? nodrop : f->nodrop;
        f->rows += rows;
    }
    f->loss[r->step - 1] = r->loss;
}

/* Prints the lines of a run's summary from the one starting with `from`
 * up to (not including) the one starting with `to` (NULL: one line). */
static void print_summary(const char *s, const char *from, const char *to)
{
    const char *p = strstr(s, from), *end = to ? strstr(s, to) : NULL;
    if (p == NULL)
        return;
    if (end == NULL || end < p)
        end = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p);
    dt_printf0("%.*s", (int)(end - p), p);
}

/* Trains c on every rank into res with figures f; with ref, rank 0 also
 * trains it alone, every expert and group on one rank (the reference). */
static void train(dt_train_config *c, dt_train_result *res, figures *f,
                  dt_train_result *ref, figures *fref)
{
    memset(f, 0, sizeof *f);
    c->ctx = f;
    dt_train(c, MPI_COMM_WORLD, res);
    if (ref == NULL)
        return;
    memset(ref, 0, sizeof *ref);
    memset(fref, 0, sizeof *fref);
    if (dt_rank() == 0) {
        dt_train_config one = *c;
        one.ctx = fref;
        dt_train(&one, MPI_COMM_SELF, ref);
    }
    dt_barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), steps = 20, k = 1, hidden = 64;
    dt_int_option io[] = {{"steps", 2, 200, &steps}, {"topk", 1, 2, &k},
                          {"hidden", 4, 256, &hidden}};
    dt_parse_int_options(argc, argv, io, 3, usage);

    /* two data sets: the plain one, and the same examples sharing a large
     * common part (+6 in every feature), which the gate sees as nearly the
     * same token, so that it sends most of them to one expert */
    dt_dataset set, skew;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_data_synthetic(&skew, 2048, 16, 4, 1);
    for (size_t i = 0; i < (size_t)skew.n * skew.features; i++)
        skew.x[i] += 6.0f;
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_MOE, &set);
    c.model.hidden = hidden;
    c.model.layers = 3;              /* layer 1 becomes the experts */
    c.steps = steps;
    c.batch = TOKENS * n;
    c.experts = 2 * n;               /* given, so the 1-rank run has them too */
    c.moe_groups = n;
    c.topk = k;
    c.aux_loss = 0.1f;
    c.on_step = on_step;
    dt_train_usage_check(&c, "19_moe");   /* else a usage error: exit 2 */
    int E = c.experts, C = dt_moe_capacity(&c, n);

    /* ==== the idea ==== */
    dt_printf0("%d experts on %d rank%s, top-%d; %d group%s of %d tokens "
               "(one a rank); capacity\nfactor %g: C = ceil(%g x %d x %d / "
               "%d) = %d slots per expert per group.\n\n", E, n,
               n == 1 ? "" : "s", k, n, n == 1 ? "" : "s", TOKENS,
               (double)c.capacity, (double)c.capacity, k, TOKENS, E, C);

    /* ==== the library calls: three runs, two checked against 1 rank ==== */
    dt_train_result bal, bal1, sk, sk1, room;
    figures fb, fb1, fs, fs1, fr;
    train(&c, &bal, &fb, &bal1, &fb1);
    c.data = &skew;                  /* a biased gate, no balancing loss */
    c.aux_loss = 0;
    train(&c, &sk, &fs, &sk1, &fs1);
    c.capacity = (float)E / k;       /* C = all the tokens: nothing dropped */
    int Cr = dt_moe_capacity(&c, n);
    train(&c, &room, &fr, NULL, NULL);

    /* ==== the numbers: traffic, then routing and its cost ==== */
    double slot = 1.0 * 2 * C * hidden * 4;  /* 1 group, 2 experts a rank */
    dt_printf0("(a) The all-to-all, balanced run. Model: every rank sends "
               "each other rank\n    1 group x 2 experts x C %d x %d floats "
               "x 4 = %.0f bytes, filled or not,\n    per all-to-all, 4 a "
               "step: (N-1) x %.0f = %.0f bytes a rank. Measured:\n", C,
               hidden, slot, slot, (n - 1) * slot);
    print_summary(bal.summary, "  measured", NULL);
    print_summary(bal.summary, "tokens sent", "tokens routed");
    dt_printf0("\n(b) Routing and its cost (steps %d; busiest: the most "
               "asked expert over the\n    mean; no-drop: the capacity "
               "factor that would have dropped nothing):\n\n", steps);
    dt_printf0("  run                     C  dropped  busiest  no-drop  "
               "expert rows  ms/step\n");
    const char *names[3] = {"balanced (aux 0.1)", "biased gate (aux 0)",
                            "biased, room for all"};
    const dt_train_result *rs[3] = {&bal, &sk, &room};
    figures *fs3[3] = {&fb, &fs, &fr};
    int Cs[3] = {C, C, Cr};
    double choices = (double)c.batch * k * steps;
    for (int i = 0; i < 3; i++)
        dt_printf0("  %-22s %3d  %6.1f%%  %6.2fx  %7.2f  %11.0f  %7.3f\n",
                   names[i], Cs[i], 100 * fs3[i]->dropped / choices,
                   fs3[i]->busiest / steps, fs3[i]->nodrop,
                   fs3[i]->rows / steps, rs[i]->seconds_per_step * 1e3);
    dt_printf0("\n  (expert rows: per step, the busiest rank's; 'room for "
               "all' sets capacity\n  factor E/k, so C = %d, every token "
               "in a group.)\n  tokens per expert, all steps:\n", Cr);
    for (int i = 0; i < 3; i++) {
        const char *t = strstr(rs[i]->summary, "cut):");
        t = t ? t + 5 : "";
        dt_printf0("    %-21s%.*s\n", names[i], (int)strcspn(t, "\n"), t);
    }
    double rows_ratio = fr.rows / (fb.rows > 0 ? fb.rows : 1);
    double t_ratio = room.seconds_per_step / bal.seconds_per_step;
    dt_printf0("\n  Model of the cost, 'room for all' against 'balanced': "
               "the slots of every\n  all-to-all grow %.2fx (C %d -> %d), "
               "the busiest rank's expert rows %.2fx.\n  Measured time per "
               "step: %.2fx (the other layers and the waits do not\n  grow, "
               "and %s).\n", (double)Cr / C, C, Cr, rows_ratio, t_ratio,
               n == 1 ? "with one rank nothing travels: try -n 4"
                      : "timings on a busy machine are noisy");

    /* ==== the check: N ranks against 1 rank, same groups ==== */
    double d1 = dt_params_max_diff(bal.params, bal1.params, bal.nparams,
                                   MPI_COMM_WORLD);
    double d2 = dt_params_max_diff(sk.params, sk1.params, sk.nparams,
                                   MPI_COMM_WORLD);
    int same = fb.dropped == fb1.dropped && fs.dropped == fs1.dropped;
    for (int s = 0; s < steps; s++)
        same = same && fabsf(fb.loss[s] - fb1.loss[s]) <= 1e-5f &&
               fabsf(fs.loss[s] - fs1.loss[s]) <= 1e-5f;
    MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int ok = same && d1 == 0 && d2 == 0;
    dt_printf0("\ncheck: %d rank%s against 1 rank holding all %d experts, "
               "same %d group%s:\n       max |weight difference| %.3g "
               "balanced, %.3g biased (want 0: bit for bit);\n       losses "
               "and dropped tokens (%.0f, %.0f) %s: %s\n", n, n == 1 ? "" : "s",
               E, n, n == 1 ? "" : "s", d1, d2, fb.dropped, fs.dropped,
               same ? "equal" : "DIFFER", ok ? "PASS" : "FAIL");

    /* ==== teardown ==== */
    dt_train_result *all[5] = {&bal, &bal1, &sk, &sk1, &room};
    for (int i = 0; i < 5; i++)
        dt_train_result_free(all[i]);
    dt_data_free(&skew);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
