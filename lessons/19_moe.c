/* Lesson 19: mixture of experts, tokens sent to experts on other ranks by all-to-all.
 *
 * What it teaches: an MoE layer holds E experts instead of one layer; a gate sends each
 * token to its top-k. The experts are spread over the ranks (2 per rank here), so tokens
 * must travel: each group of tokens (a rank's share of the batch) fills C fixed slots per
 * expert, C = ceil(capacity x k x tokens / E); one all-to-all takes the slots to the
 * experts' ranks, another brings the results back (and two more in backward). Fixed
 * slots make fixed messages, but an expert asked more than C times in a group drops the
 * rest: those tokens skip the layer. The load-balancing loss pushes the gate to share
 * the tokens out; unbalanced routing drops tokens or, with room to keep them, makes every
 * all-to-all bigger and gives the busiest expert's rank most of the work. The experts'
 * gradients need no allreduce: each expert lives on one rank, which sees every token
 * that visited it. Only the other layers and the gate, replicated, are summed over the
 * ranks: group by group in a fixed order (an allgather, then a sum), because a routing
 * decision is a cliff that a rounding difference can push a token over. So N ranks end
 * with the weights of one rank holding every expert, bit for bit. The lesson shows why
 * tokens drop, and checks that the choices kept plus those dropped are all of them.
 *
 * The code: lib/parallel/moe.c (dti_train_moe, dti_moe_forward, dti_moe_backward,
 * dti_moe_sum_groups_into), lib/parallel/moe_route.c (dti_moe_capacity, dti_moe_route), lib/collectives/alltoall.c
 * (dt_alltoall).
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
    "Trains an MLP whose middle layer is 2N experts, 2 per rank: balanced routing,\n"
    "a gate biased toward one expert, and the same with room for every token; prints\n"
    "the all-to-all traffic, tokens per expert, drops and why, and time beside the\n"
    "model, and checks against one rank holding every expert.\n"
    "  --steps S           training steps, 2 to 200 (default 20)\n"
    "  --topk K            experts per token, 1 or 2 (default 1)\n"
    "  --hidden H          width of the hidden layers, 4 to 256 (default 64)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TOKENS = 64 };   /* tokens per group, one group a rank */

/* What on_step reads from each step's report ("aux A  dropped D  busiest expert Bx  no-drop
 * capacity F  busiest rank R rows"), summed; and each step's drops and loss. */
typedef struct {
    double dropped, busiest, nodrop, rows;
    double drop[200];
    float loss[200];
} figures;

static void on_step(const dt_step_report *r, void *ctx)
{
    figures *f = ctx;
    float aux, busiest, nodrop;
    int dropped, rows;
    if (sscanf(r->extra, "aux %f dropped %d busiest expert %fx no-drop capacity %f "
               "busiest rank %d", &aux, &dropped, &busiest, &nodrop, &rows) == 5) {
        f->dropped += dropped;
        f->busiest += busiest;
        f->nodrop = nodrop > f->nodrop ? nodrop : f->nodrop;
        f->rows += rows;
        f->drop[r->step - 1] = dropped;
    }
    f->loss[r->step - 1] = r->loss;
}

/* The numbers on the line of s after the first `head`, at most max, into x (or NULL);
 * returns how many, and their sum in *sum. */
static int numbers(const char *s, const char *head, double *x, int max, double *sum)
{
    const char *p = s ? strstr(s, head) : NULL;
    int k = 0, used;
    double v;
    for (*sum = 0, p = p ? p + strlen(head) : NULL; p && k < max; p += used, k++) {
        p += strspn(p, " ");
        if (sscanf(p, "%lf%n", &v, &used) != 1)
            break;
        *sum += v;
        if (x)
            x[k] = v;
    }
    return k;
}

/* Prints the lines of a run's summary from the one starting with `from` up to (not
 * including) the one starting with `to` (NULL: one line). */
static void print_summary(const char *s, const char *from, const char *to)
{
    const char *p = strstr(s, from), *end = to ? strstr(s, to) : NULL;
    if (p == NULL)
        return;
    if (end == NULL || end < p)
        end = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p);
    dt_printf0("%.*s", (int)(end - p), p);
}

/* Trains c on every rank into res with figures f; with ref, rank 0 also trains it
 * alone, every expert and group on one rank (the reference). */
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

    /* two data sets: the plain one, and the same examples sharing a large common part
     * (+6 in every feature), which the gate sees as nearly the same token, so that it
     * sends most of them to one expert */
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
    dt_printf0("%d experts on %d rank%s, top-%d; %d group%s of %d tokens (one a rank); "
               "capacity\nfactor %g: C = ceil(%g x %d x %d / %d) = %d slots per expert per "
               "group.\n\n", E, n, n == 1 ? "" : "s", k, n, n == 1 ? "" : "s", TOKENS,
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

    /* ==== the numbers: traffic ==== */
    double slot = 1.0 * 2 * C * hidden * 4;  /* 1 group, 2 experts a rank */
    dt_printf0("(a) The all-to-all, balanced run. Model: every rank sends each other rank\n"
               "    1 group x 2 experts x C %d x %d floats x 4 = %.0f bytes, filled or not,"
               "\n    in each all-to-all: (N-1) x %.0f = %.0f bytes a rank per all-to-all, "
               "and\n    4 all-to-alls a step, 4 x %.0f = %.0f bytes a rank per step. "
               "Measured, one\n    all-to-all:\n", C, hidden, slot, slot,
               (n - 1) * slot, (n - 1) * slot, 4 * (n - 1) * slot);
    print_summary(bal.summary, "  measured", NULL);
    print_summary(bal.summary, "tokens sent", "tokens routed");
    /* the rows: the kept choices of each rank's tokens; the rest, the last step dropped */
    const char *mx = strstr(bal.summary, "\n  from \\ to");
    double sent = 0, row, all = (double)n * TOKENS * k, last = fb.drop[steps - 1];
    int rows_ok = n <= 8 && mx != NULL;
    for (int r = 0; rows_ok && r < n; r++) {
        mx = strchr(mx + 1, '\n');
        rows_ok = mx && numbers(mx, "\n", NULL, n + 1, &row) == n + 1;
        sent += rows_ok ? row - r : 0;           /* less the rank in the row's head */
    }
    if (rows_ok)
        dt_printf0("  A row counts the choices of that rank's %d tokens (x k %d) the "
                   "experts kept;\n  the diagonal stays on its own rank and costs no "
                   "bytes. All rows: %.0f, plus\n  the %.0f the last step dropped (over "
                   "capacity) = %.0f = N x T x k.\n", TOKENS, k, sent, last, sent + last);
    int books = !rows_ok || sent + last == all;

    /* ==== the numbers: routing, its drops and its cost ==== */
    dt_printf0("\n(b) Routing and its cost, %d steps:\n\n  %-22s %3s  %-13s  %7s  %7s  %4s  "
               "%s\n", steps, "run", "C", "dropped", "busiest", "no-drop", "rows", "ms/step");
    const char *names[3] = {"balanced (aux 0.1)", "biased gate (aux 0)",
                            "biased, room for all"};
    const dt_train_result *rs[3] = {&bal, &sk, &room};
    figures *f3[3] = {&fb, &fs, &fr};
    int Cs[3] = {C, C, Cr};
    double choices = (double)c.batch * k * steps, sp[3], med[3];
    for (int i = 0; i < 3; i++) {
        dt_timing tm = dt_train_step_timing(rs[i]);   /* steps 2.., slowest rank */
        sp[i] = dt_timing_spread(tm);
        med[i] = tm.median;
        dt_printf0("  %-22s %3d  %5.0f = %4.1f%%  %6.2fx  %7.2f  %4.0f  %6.2f +-%.0f%%\n",
                   names[i], Cs[i], f3[i]->dropped, 100 * f3[i]->dropped / choices,
                   f3[i]->busiest / steps, f3[i]->nodrop, f3[i]->rows / steps,
                   med[i] * 1e3, 100 * sp[i]);
    }
    double noise = fmax(sp[0], fmax(sp[1], sp[2]));
    dt_printf0("\n  dropped: choices past C in their group, of B x k x steps = %d x %d x %d "
               "= %.0f\n  busiest: the most asked expert over the mean B k / E = %.0f, mean "
               "of the steps\n  no-drop: the capacity factor that drops none, E / (k T) x "
               "the most an expert\n    was asked in a group (balanced: %d / %d x %.0f = "
               "%.2f)\n  rows: the slots the busiest rank's experts filled, a step ('room "
               "for all':\n    capacity factor E/k, C = %d)   ms/step: median of steps 2.. (slowest "
               "rank),\n    +- half their interquartile range\n", c.batch, k, steps, choices, (double)c.batch * k / E,
               E, k * TOKENS, fb.nodrop * k * TOKENS / E, fb.nodrop, Cr);

    /* why: an expert takes C choices a group and step, whatever slots it has free
     * elsewhere; what the whole run's slots cannot hold is only part of the drops */
    double slots = (double)n * C * steps;        /* per expert, the run: G C steps */
    dt_printf0("\n  Why they drop: an expert has C slots in each group and step, and a choice"
               " past\n  them drops even when that expert has slots free in another group or "
               "step. Over\n  the run it has G x C x steps = %d x %d x %d = %.0f: what is "
               "asked beyond them\n  must drop, the rest drops from a load uneven from "
               "group to group:\n\n    run                   dropped = beyond + uneven   tokens per "
               "expert, all steps\n", n, C, steps, slots);
    for (int i = 0; i < 3; i++) {
        double x[16], sum, beyond = 0, kept;
        int ne = numbers(rs[i]->summary, "cut):", x, 16, &sum);
        for (int e = 0; e < ne; e++)
            beyond += fmax(0, x[e] - (double)n * Cs[i] * steps);
        const char *t = ne == E ? strstr(rs[i]->summary, "cut):") + 5 : NULL;
        if (t)
            dt_printf0("    %-21s %7.0f = %6.0f + %6.0f  %.*s\n", names[i],
                       f3[i]->dropped, beyond, f3[i]->dropped - beyond,
                       (int)strcspn(t, "\n"), t);
        /* the books: routed = every choice; the experts' rows = the kept ones */
        numbers(rs[i]->summary, "rank (all steps):", NULL, 8, &kept);
        books &= ne < E || sum == choices;
        books &= n > 8 || kept + f3[i]->dropped == choices;
    }
    dt_printf0("\n  The balancing loss evens the load over the batch, and slowly: 'balanced'"
               "\n  dropped %.0f%% of step 1's choices, %.0f%% of step %d's; capacity %.2f "
               "would keep all.\n",
               100 * fb.drop[0] / (c.batch * k), 100 * fb.drop[steps - 1] / (c.batch * k),
               steps, fb.nodrop);

    double rows_ratio = fr.rows / (fb.rows > 0 ? fb.rows : 1), grow = (double)Cr / C;
    double t_ratio = med[2] / med[0], slack = sp[0] + sp[2];
    dt_printf0("\n  Model of the cost, 'room for all' against 'balanced': the slots of "
               "every\n  all-to-all grow %.2fx (C %d -> %d), the busiest rank's expert rows "
               "%.2fx.\n  Measured time per step: %.2fx, +-%.0f%% (the two runs' spreads)."
               "\n  %s", grow, C, Cr, rows_ratio, t_ratio, 100 * slack, n == 1 ?
               "With one rank nothing travels: try -n 4.\n" : fabs(t_ratio - 1) <= slack ?
               "Within the noise of no change: the bytes that grow are few, and the rest "
               "of\n  the step (the other layers, the gate, the allgather of the "
               "replicated\n  gradients) does not grow.\n" : t_ratio <= fmax(rows_ratio,
               grow) * (1 + slack) ? "Less than the parts that grow, as it should: the "
               "other layers, the gate\n  and the allgather of the replicated gradients "
               "cost the same in both runs.\n" : "More than the parts that grow: the "
               "machine (see the note), or its larger\n  slot buffers outgrowing the "
               "cache.\n");
    dt_timing_note(noise, "It blurs the ms/step column and its ratio only; the drops, the "
                   "bytes and the checks do not depend on timing.");

    /* ==== the check: N ranks against 1 rank, same groups ==== */
    double d1 = dt_params_max_diff(bal.params, bal1.params, bal.nparams, MPI_COMM_WORLD);
    double d2 = dt_params_max_diff(sk.params, sk1.params, sk.nparams, MPI_COMM_WORLD);
    int same = fb.dropped == fb1.dropped && fs.dropped == fs1.dropped;
    for (int s = 0; s < steps; s++)
        same = same && fabsf(fb.loss[s] - fb1.loss[s]) <= 1e-5f &&
               fabsf(fs.loss[s] - fs1.loss[s]) <= 1e-5f;
    MPI_Bcast(&same, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Bcast(&books, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int ok = same && books && d1 == 0 && d2 == 0;
    dt_printf0("\ncheck: %d rank%s against 1 rank holding all %d experts, same %d group%s:"
               "\n       max |weight difference| %.3g balanced, %.3g biased (want 0: bit "
               "for bit);\n       losses and dropped tokens (%.0f, %.0f) %s;\n       kept "
               "+ dropped = every choice, in the last all-to-all and each run: %s\n       %s"
               "\n", n, n == 1 ? "" : "s", E, n, n == 1 ? "" : "s", d1, d2, fb.dropped,
               fs.dropped, same ? "equal" : "DIFFER", books ? "yes" : "NO", ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/parallel/moe.c (dti_train_moe, dti_moe_forward, "
               "dti_moe_backward, dti_moe_sum_groups_into), lib/parallel/moe_route.c (dti_moe_capacity, dti_moe_route), "
               "lib/collectives/alltoall.c (dt_alltoall)\n");

    /* ==== teardown ==== */
    dt_train_result *runs[5] = {&bal, &bal1, &sk, &sk1, &room};
    for (int i = 0; i < 5; i++)
        dt_train_result_free(runs[i]);
    dt_data_free(&skew);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
