/* Lesson 18: hybrid parallelism, D x T x P ranks over MPI_Comm_split.
 *
 * What it teaches: the modes combine. N = D x T x P ranks form D data-parallel
 * replicas of a pipeline of P stages, each stage's layers cut over T
 * tensor-parallel ranks. A rank gets its coordinates from its number, tensor
 * parallelism fastest: rank = (d*P + p)*T + t, so the ranks that talk the
 * most (tensor parallelism, twice per layer pair) are neighbours, which
 * mpiexec places on the same host, and the ranks that talk the least (data
 * parallelism, once per step) are the farthest apart. Three MPI_Comm_split
 * calls, one per kind of group, give each rank its three communicators. This
 * lesson prints the grid and the groups, trains one factorisation of the
 * ranks it has, and checks it against serial training.
 *
 * Run:  mpiexec -n 4 build/lessons/18_hybrid              (D 2 x T 1 x P 2)
 *       mpiexec -n 8 build/lessons/18_hybrid              (2 x 2 x 2)
 *       mpiexec -n 4 build/lessons/18_hybrid --tp 2 --pp 2
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 18_hybrid [options]\n"
    "Trains an MLP over D x T x P = N ranks (data, tensor, pipeline "
    "parallel), prints\n"
    "the rank grid and its groups, and checks against serial training.\n"
    "  --dp D, --tp T, --pp P   the sizes, D x T x P = N (default: N's "
    "factors\n"
    "                      spread over D, P and T; with one of them given, the\n"
    "                      others 1, and D N/(T*P)). The MLP has 4 layers (P if\n"
    "                      more) of 60 features (the next multiple of T if T\n"
    "                      does not divide 60)\n"
    "  --steps S           training steps, 1 to 200 (default 5)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

enum { TOL_EXP = 5 };

/* The default grid: N's prime factors, smallest first, handed out in turn to
 * D, P and T (4 = 2 x 1 x 2, 8 = 2 x 2 x 2, 12 = 2 x 3 x 2); a prime N is all
 * data parallel. */
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

/* "{a,b,c}": the world ranks of the group comm, in its rank order
 * ("{a,b,...}" when they do not fit in len bytes, at least 16). Collective
 * over comm. */
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

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 5, D = 0, T = 0, P = 0;
    dt_int_option io[] = {{"dp", 1, 1 << 16, &D}, {"tp", 1, 1 << 16, &T},
                          {"pp", 1, 1 << 16, &P}, {"steps", 1, 200, &steps}};
    dt_parse_int_options(argc, argv, io, 4, usage);
    int given = D || T || P;
    if (!given)
        factor(n, &D, &T, &P);
    T = T ? T : 1;
    P = P ? P : 1;
    long long TP = (long long)T * P;            /* up to 2^32: no int overflow */
    D = D ? D : (TP <= n && n % TP == 0 ? n / (int)TP : 1);

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
    dt_printf0("%d rank%s = D %d x T %d x P %d: %d replica%s of a %d-stage "
               "pipeline, each\nstage's layers cut over %d rank%s. rank = "
               "(d*P + p)*T + t; MPI_Comm_split\nwith colour d*P+p gives the "
               "tp groups, d*T+t the pp groups, p*T+t the dp\ngroups:\n\n",
               n, n == 1 ? "" : "s", D, T, P, D, D == 1 ? "" : "s", P, T,
               T == 1 ? "" : "s");
    dt_printf0("  rank  d  p  t  layers  batch rows  tp group  pp group  "
               "dp group\n");
    size_t l0, l1;
    dt_chunk_bounds((size_t)c.model.layers, P, p, &l0, &l1);
    int rows = c.batch / D;
    dt_printf_ordered("  %4d %2d %2d %2d  %2zu..%-2zu  %4d..%-4d  %-8s  %-8s  "
                      "%s\n", rank, d, p, t, l0, l1 - 1, d * rows,
                      (d + 1) * rows - 1, gt, gp, gd);
    dt_printf0("\ntp group: the same layers, 1/%d of each matrix; allreduces "
               "inside each\n          layer pair, every micro-batch (lesson "
               "15)\npp group: one replica's stages; activations passed "
               "down, gradients up, in\n          %d micro-batches, 1F1B "
               "(lesson 16)\ndp group: the same part of the model in every "
               "replica; one allreduce of\n          its gradients per step "
               "(lesson 12)\n\n", T, c.micro);
    if (n == 1 || D == n || T == n || P == n)
        dt_printf0("With %d rank%s the grid has one dimension only: a single "
                   "mode. Try -n 4 or -n 8.\n\n", n, n == 1 ? "" : "s");

    /* ==== the library calls: hybrid, then serial ==== */
    dt_train_result res, ref;
    dt_train(&c, MPI_COMM_WORLD, &res);
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    double diff = dt_params_max_diff(res.params, ref.params, ref.nparams,
                                     MPI_COMM_WORLD);

    /* ==== the numbers ==== */
    char a[32], w[32];
    dt_printf0("Per rank: bytes sent per step, weights held:\n");
    dt_printf_ordered("  rank %d  %10s  %10s\n", rank,
                      dt_format_bytes((double)res.bytes_sent / steps, a,
                                      sizeof a),
                      dt_format_bytes((double)res.peak_params, w, sizeof w));
    dt_printf0("Loss: step 1 %.5f, step %d %.5f (serial: %.5f). %.2f ms per "
               "step.\n", res.loss[0], steps, res.loss[steps - 1],
               rank == 0 ? ref.loss[steps - 1] : 0.0,
               res.seconds_per_step * 1e3);

    /* ==== the check ==== */
    int ok = diff <= pow(10, -TOL_EXP);
    dt_printf0("\ncheck: D %d x T %d x P %d against serial training, max "
               "|weight difference|\n       %.3g (limit 1e-%d): %s\n", D, T,
               P, diff, TOL_EXP, ok ? "PASS" : "FAIL");

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
