/* Lesson 18: hybrid parallelism, D x T x P ranks over MPI_Comm_split.
 *
 * What it teaches: the modes combine. N = D x T x P ranks form D data-parallel replicas
 * of a pipeline of P stages, each stage's layers cut over T tensor-parallel ranks. A
 * rank gets its coordinates from its number, tensor parallelism fastest: rank = (d*P +
 * p)*T + t, so the ranks that talk the most (tensor parallelism, twice per layer pair)
 * are neighbours, which mpiexec places on the same host, and the ranks that talk the
 * least (data parallelism, once per step) are the farthest apart. Three MPI_Comm_split
 * calls, one per kind of group, give each rank its three communicators. This lesson
 * prints the grid and the groups, trains one factorisation of the ranks it has, and
 * checks it against serial training; then it prints what each rank holds and sends a
 * step, term by term beside its formula, and checks the sum against the bytes counted.
 *
 * The code: lib/parallel/hybrid.c (dti_train_hybrid: the groups and the step),
 * lib/parallel/tp.c (dti_tp_split, dti_tp_allreduce), lib/parallel/pp.c (dti_pp_step),
 * lib/parallel/ddp.c (dt_ddp_buckets), lib/parallel/model.c (dti_model_init: the part
 * of each layer a rank holds).
 *
 * Run:  mpiexec -n 4 build/lessons/18_hybrid              (D 2 x T 1 x P 2)
 *       mpiexec -n 8 build/lessons/18_hybrid              (2 x 2 x 2)
 *       mpiexec -n 4 build/lessons/18_hybrid --tp 2 --pp 2
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 18_hybrid [options]\n"
    "Trains an MLP over D x T x P = N ranks (data, tensor, pipeline parallel), prints\n"
    "the rank grid and its groups, the weights and bytes of each rank beside their\n"
    "formulas, and checks against serial training and the bytes counted.\n"
    "  --dp D, --tp T, --pp P   the sizes, D x T x P = N (default: N's factors\n"
    "                      spread over D, P and T; with one of them given, the\n"
    "                      others 1, and D N/(T*P)). The MLP has 4 layers (P if\n"
    "                      more) of 60 features (the next multiple of T if T\n"
    "                      does not divide 60)\n"
    "  --steps S           training steps, 1 to 200 (default 5)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TOL_EXP = 5 };

/* The default grid: N's prime factors, smallest first, handed out in turn to D, P and T
 * (4 = 2 x 1 x 2, 8 = 2 x 2 x 2, 12 = 2 x 3 x 2); a prime N is all data parallel. */
static void factor(int N, int *D, int *T, int *P)
{
    int *dim[3] = {D, P, T}, k = 0;
    *D = *T = *P = 1;
    for (int f = 2; N > 1; f++)
        while (N % f == 0) {
            *dim[k++ % 3] *= f;
            N /= f;
        }
}

/* "{a,b,c}": the world ranks of the group comm, in its rank order ("{a,b,...}" when
 * they do not fit in len bytes, at least 16). Collective over comm. */
static void members(MPI_Comm comm, char *s, size_t len)
{
    int me = dt_rank(), size;
    size_t k = 0;
    MPI_Comm_size(comm, &size);
    int *all = malloc(sizeof(int) * size);
    MPI_Allgather(&me, 1, MPI_INT, all, 1, MPI_INT, comm);
    int i = 0;
    for (; i < size && k + 16 < len; i++)
        k += snprintf(s + k, len - k, "%s%d", i ? "," : "{", all[i]);
    snprintf(s + k, len - k, "%s}", i < size ? ",..." : "");
    free(all);
}

/* ==== the model of what a rank holds and sends (hybrid.c's step) ==== */

enum { TP, PP, DP, LOSS, NTERMS, MAXL = 4 };   /* MAXL: a stage has 4 layers or fewer */

/* What one rank holds and sends a step by the model: b, bytes per term; held, floats
 * of weights; w, "a+b+... = held"; f, "tp ... + pp ... + dp ... + loss 8". */
typedef struct { double b[NTERMS]; size_t held; char w[96], f[192]; } cost;

/* Appends a printf-formatted piece to the char array s. */
#define PUT(s, ...) snprintf((s) + strlen(s), sizeof(s) - strlen(s), __VA_ARGS__)

/* The bytes rank t of T sends in dt_allreduce of count floats: recursive doubling
 * below 64 KiB (log2 p exchanges of the whole buffer; with T not a power of two, a
 * folded pair adds one send each way), else the ring (dt_compress_bytes' count). */
static double allreduce_bytes(size_t count, int T, int t)
{
    if (count * 4 >= DT_ALLREDUCE_RD_MAX && count >= (size_t)T)
        return (double)dt_compress_bytes(DT_COMPRESS_NONE, count, T, t);
    return 4.0 * count * (dt_rd_vrank(t, T) < 0 ? 1         /* folded away: one send */
                          : dt_rd_steps(T) + (dt_rd_fold_peer(t, T) >= 0));
}

/* The rank's cost. Megatron's cut (tp.c, model.c): an even layer by the rows of W
 * (its outputs, "COL"), an odd one by the columns ("ROW", every rank keeping all of
 * b); a last even layer is cut like COL and its output allgathered. */
static void model(const dt_train_config *c, int D, int T, int P, int rank, cost *k)
{
    const dt_mlp_config *m = &c->model;
    int t = rank % T, p = (rank / T) % P, d = rank / (T * P), L = m->layers;
    int M = P > 1 ? c->micro : 1, mb = c->batch / D / M, win = 0, wout = 0;
    size_t l0, l1, lo, hi, w[MAXL], off[MAXL + 1] = {0};
    char tps[96] = "";
    double tp = 0, x;
    dt_chunk_bounds((size_t)L, P, p, &l0, &l1);
    int nl = (int)(l1 - l0), of[MAXL], p0 = p > 0, p1 = p < P - 1;
    memset(k, 0, sizeof *k);
    for (int i = 0; i < nl; i++) {
        int l = (int)l0 + i, in = dt_mlp_layer_in(m, l), out = dt_mlp_layer_out(m, l);
        int row = T > 1 && l % 2, col = T > 1 && !row, last = l + 1 == L;
        dt_chunk_bounds((size_t)(row ? in : out), T, t, &lo, &hi);
        int xw = row ? (int)(hi - lo) : in, ow = col ? (int)(hi - lo) : out;
        w[i] = (size_t)xw * ow + ow;
        x = row ? allreduce_bytes((size_t)mb * out, T, t) : 0;   /* g, after forward */
        x += col && last ? 4.0 * (T - 1) * mb * ((out + T - 1) / T) : 0;  /* allgather */
        x += col && (i > 0 || p0) ? allreduce_bytes((size_t)mb * in, T, t) : 0;  /* f */
        if (x > 0) {
            tp += x;
            PUT(tps, "%s%.0f", *tps ? "+" : "", x);
        }
        win = i ? win : xw;                            /* the stage's input width */
        wout = col && !last ? ow : out;                /* and its output's */
        off[i + 1] = off[i] + w[i];
        k->held += w[i];
        PUT(k->w, "%s%zu", i ? "+" : "", w[i]);
    }
    if (nl > 1)
        PUT(k->w, " = %zu", k->held);
    k->b[TP] = M * tp;
    k->b[PP] = 4.0 * M * mb * (p0 * win + p1 * wout);
    if (D > 1) {                       /* ddp.c: buckets of layers, each its own ring */
        int nb = dt_ddp_buckets(off, nl, 4, (size_t)c->bucket_kb * 1024, of);
        for (int j = 0; j < nb; j++) {
            size_t count = 0;
            for (int i = 0; i < nl; i++)
                count += of[i] == j ? w[i] : 0;
            k->b[DP] += (double)dt_compress_bytes(DT_COMPRESS_NONE, count, D, d);
        }
    }
    k->b[LOSS] = rank > 0 ? 8 : 0;     /* one double up dt_reduce's tree */
    if (k->b[TP] > 0)
        PUT(k->f, " + tp %dx(%s)", M, tps);
    if (p0 && p1)
        PUT(k->f, " + pp %dx%dx(%d+%d)x4", M, mb, win, wout);
    else if (P > 1)
        PUT(k->f, " + pp %dx%dx%dx4", M, mb, p0 ? win : wout);
    if (D > 1)
        PUT(k->f, " + dp %s2x%d/%dx4x%zu", fabs(k->b[DP] - 8.0 * (D - 1) / D * k->held)
            > 0.5 ? "~" : "", D - 1, D, k->held);
    if (rank > 0)
        PUT(k->f, " + loss 8");
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 5, D = 0, T = 0, P = 0;
    dt_int_option io[] = {{"dp", 1, 1 << 16, &D}, {"tp", 1, 1 << 16, &T},
                          {"pp", 1, 1 << 16, &P}, {"steps", 1, 200, &steps}};
    dt_parse_int_options(argc, argv, io, 4, usage);
    if (!D && !T && !P)
        factor(n, &D, &T, &P);
    T = T ? T : 1;
    P = P ? P : 1;
    long long TxP = (long long)T * P;            /* up to 2^32: no int overflow */
    D = D ? D : (TxP <= n && n % TxP == 0 ? n / (int)TxP : 1);

    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_HYBRID, &set);
    /* T slices of equal width, a layer per stage (sizes above N fail D x T x P = N) */
    c.model.hidden = T <= n ? (60 + T - 1) / T * T : 60;
    c.model.layers = P > 4 && P <= n ? P : 4;
    c.steps = steps;
    c.micro = 2;
    int M = P > 1 ? c.micro : 1;                /* D x M equal shares of the batch */
    c.batch = (int)((120 + (long long)D * M - 1) / ((long long)D * M) * D * M);
    c.dp = D;
    c.tp = T;
    c.pp = P;
    char why[256];
    if (dt_train_check(&c, n, why, sizeof why))  /* D x T x P is not N */
        dt_usage_error(usage, why);

    /* ==== the idea: each rank's coordinates, and its three groups ==== */
    int t = rank % T, p = (rank / T) % P, d = rank / (T * P);
    MPI_Comm tp, pp, dp;                        /* same colour, same group */
    MPI_Comm_split(MPI_COMM_WORLD, d * P + p, t, &tp);
    MPI_Comm_split(MPI_COMM_WORLD, d * T + t, p, &pp);
    MPI_Comm_split(MPI_COMM_WORLD, p * T + t, d, &dp);
    char gt[64], gp[64], gd[64];
    members(tp, gt, sizeof gt);
    members(pp, gp, sizeof gp);
    members(dp, gd, sizeof gd);
    dt_printf0("%d rank%s = D %d x T %d x P %d: %d replica%s of a %d-stage pipeline, each\n"
               "stage's layers cut over %d rank%s. rank = (d*P + p)*T + t; MPI_Comm_split\n"
               "with colour d*P+p gives the tp groups, d*T+t the pp groups, p*T+t the dp\n"
               "groups:\n\n  rank  d  p  t  layers  batch rows  tp group  pp group  dp "
               "group\n", n, n == 1 ? "" : "s", D, T, P, D, D == 1 ? "" : "s", P, T,
               T == 1 ? "" : "s");
    size_t l0, l1;
    dt_chunk_bounds((size_t)c.model.layers, P, p, &l0, &l1);
    int rows = c.batch / D;
    dt_printf_ordered("  %4d %2d %2d %2d  %2zu..%-2zu  %4d..%-4d  %-8s  %-8s  %s\n", rank,
                      d, p, t, l0, l1 - 1, d * rows, (d + 1) * rows - 1, gt, gp, gd);
    char pipe[128];
    snprintf(pipe, sizeof pipe, "activations passed down, gradients up, in\n"
             "          %d micro-batches, 1F1B (lesson 16)", M);
    dt_printf0("\ntp group: the same layers, 1/%d of each matrix; allreduces inside each\n"
               "          layer pair, every micro-batch (lesson 15)\npp group: one "
               "replica's stages; %s\ndp group: the same part of the model in "
               "every replica; one allreduce of\n          its gradients per step (lesson "
               "12)\n\n", T, P > 1 ? pipe : "here one stage, so no pipeline:\n"
               "          the replica's rows go through as one micro-batch");
    if (n == 1 || D == n || T == n || P == n)
        dt_printf0("With %d rank%s the grid has one dimension only: a single "
                   "mode. Try -n 4 or -n 8.\n\n", n, n == 1 ? "" : "s");

    /* ==== the library calls: hybrid, then serial ==== */
    dt_train_result res, ref;
    dt_train(&c, MPI_COMM_WORLD, &res);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    double diff = dt_params_max_diff(res.params, ref.params, ref.nparams,
                                     MPI_COMM_WORLD);

    /* ==== the numbers: weights and bytes per rank, each by its formula ==== */
    cost k;
    model(&c, D, T, P, rank, &k);
    char v[96] = "";
    double want = 0, got = (double)res.bytes_sent / steps;
    for (int i = 0; i < NTERMS; i++)
        if (k.b[i] > 0) {
            want += k.b[i];
            PUT(v, "%s%.0f", *v ? " + " : "", k.b[i]);
        }
    dt_printf0("Per rank: the floats of weights it holds, its layers' in x out + out each%s;"
               "\nthe bytes it sends a step (M %d micro-batch%s of mb %d rows, 4 bytes a "
               "float):\n%s%s%s%s", T > 1 ? " cut T\nways (COL keeps out/T rows of W and b,"
               " ROW in/T columns of W and all of b)" : "", M, M > 1 ? "es" : "",
               c.batch / D / M, T == 1 ? "" : "  tp    M x (the allreduces of a micro-batch:"
               " of mb x out after a ROW layer,\n        of mb x in below a COL one; rd: "
               "log2 T x mb x width x 4)\n", P == 1 ? "" : "  pp    M x mb x width x 4 to "
               "each neighbour stage: activations down, gradients up\n", D == 1 ? "" :
               "  dp    2(D-1)/D x 4 x floats: the ring allreduce of its gradients over "
               "the D\n        replicas, bucket by bucket (~: about, where D does not "
               "divide a bucket)\n", n == 1 ? "" : "  loss"
               "  8: the step's loss, one double, up dt_reduce's tree, from every rank but 0"
               "\n");
    dt_printf_ordered("  rank %-2d holds %s floats x 4 = %zu B (measured %zu)\n          "
                      "sends %s\n              = %s%s%.0f B a step (measured %.0f)\n", rank,
                      k.w, 4 * k.held, res.peak_params, *k.f ? k.f + 3 : "nothing",
                      strchr(v, '+') ? v : "", strchr(v, '+') ? " = " : "", want, got);
    int bytes_ok = got == want && 4 * k.held == res.peak_params;
    MPI_Allreduce(MPI_IN_PLACE, &bytes_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);

    /* the time: the median and quartiles of steps 2.., each the slowest rank's */
    dt_timing tm = dt_train_step_timing(&res);
    double spread = dt_timing_spread(tm);
    char how[96];
    dt_train_step_words(&res, how, sizeof how);
    dt_printf0("\nLoss: step 1 %.5f, step %d %.5f (serial: %.5f). %.2f ms per step +-%.0f%%"
               "\n(%s, each the slowest rank's).\n", res.loss[0], steps,
               res.loss[steps - 1], rank == 0 ? ref.loss[steps - 1] : 0.0, tm.median * 1e3,
               100 * spread, how);
    dt_timing_note(spread, "This lesson compares no timings, so its checks stand; only "
                   "the time per step grows and varies (with ranks taking turns on cores, "
                   "each pipeline hand-off and each allreduce step waits for a core).");

    /* ==== the check ==== */
    int ok = diff <= pow(10, -TOL_EXP) && bytes_ok;
    dt_printf0("\ncheck: D %d x T %d x P %d against serial training, max |weight difference|"
               "\n       %.3g (limit 1e-%d); weights and bytes equal the model on every "
               "rank: %s\n       %s\n", D, T, P, diff, TOL_EXP, bytes_ok ? "yes" : "NO",
               ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/parallel/hybrid.c (dti_train_hybrid), lib/parallel/tp.c (dti_tp_"
               "split, dti_tp_allreduce), lib/parallel/pp.c (dti_pp_step), lib/parallel/"
               "ddp.c (dt_ddp_buckets), lib/parallel/model.c (dti_model_init)\n");

    /* ==== teardown ==== */
    MPI_Comm_free(&tp);
    MPI_Comm_free(&pp);
    MPI_Comm_free(&dp);
    dt_train_result_free(&ref);
    dt_train_result_free(&res);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
