/* Lesson 23: DataParallel (one process, a thread per replica) against DDP.
 *
 * What it teaches: PyTorch has two data-parallel wrappers. nn.DataParallel is one
 * process with a thread per device: every step its master thread copies the weights
 * to every replica, scatters the batch, gathers the outputs, takes the loss, scatters
 * the output gradients, gathers the gradients and steps the optimizer, and every
 * thread needs the interpreter lock (the GIL) between its operations. DDP is one
 * process per device with its own replica, summing gradients by ring allreduce. This
 * lesson runs both, and the parameter server, on the same model and batch: the same
 * weights as serial training, the bytes through the master against DDP's 2(N-1)/N
 * Psi per rank, the time per step, and which part of the gap the usual explanations
 * (the lock, the copies, the master's serial work) account for.
 *
 * Run:  mpiexec -n 4 build/lessons/23_dp_threads
 *       mpiexec -n 3 build/lessons/23_dp_threads --gil-pct 60
 *       mpiexec -n 1 build/lessons/23_dp_threads --threads 3 --trace dpt.trace
 *
 * --trace records one run, the one dtviz draws whole: on N > 1 ranks DDP's (a row per
 * rank, its buckets' allreduces beside its backward); on one rank DataParallel's T
 * threads with the lock (one row: the master's copies in its comm lane, each replica's
 * forward and backward, "B1 L2" for replica 1's layer 2, and the lock's bookkeeping
 * between them). Beside N > 1 ranks DataParallel runs on rank 0 alone, which dtviz
 * would draw as one busy row among idle ones: there DDP, its rival, is traced.
 */
#include <math.h>
#include <stdio.h>
#include <time.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N 23_dp_threads [options]\n"
    "Trains an MLP with DataParallel (threads of rank 0), with and without an\n"
    "interpreter lock, beside the parameter server and DDP on N ranks and serial.\n"
    "  --steps S           training steps, 3 to 200 (default 8)\n"
    "  --threads T         DataParallel's threads, 1 to 16 (default N; 4 on 1 rank)\n"
    "  --gil-pct G         share of a thread's work spent holding the lock, in\n"
    "                      percent, 1 to 95 (default 30; train's --gil 0.3)\n"
    DT_COMMON_USAGE
    "                      (one run: DDP's on N > 1 ranks; on 1, DataParallel's\n"
    "                      T threads with the lock)\n"
    "  --help              this text\n";

enum { TOL_EXP = 5, MAXT = 16 };

/* Rank 0 trains c on its threads alone while the other ranks sleep: a polite wait
 * (sched_yield) would still take the cores the threads need. */
static void train_alone(const dt_train_config *c, dt_train_result *r)
{
    if (dt_rank() == 0)
        dt_train(c, MPI_COMM_SELF, r);
    MPI_Request q;
    DT_CHECK_MPI(MPI_Ibarrier(MPI_COMM_WORLD, &q));
    for (int done = 0; !done;) {
        DT_CHECK_MPI(MPI_Test(&q, &done, MPI_STATUS_IGNORE));
        struct timespec ms = {0, 1000000};
        if (!done)
            nanosleep(&ms, NULL);
    }
}

static double median_ms(const dt_train_result *r)
{
    return dt_train_step_timing(r).median * 1e3;
}

/* Rank 0: what the table above shows, each sentence a verdict on its numbers. Without
 * the lock: do more threads (up to the cores) shorten a step? With it: the floor,
 * g/(1-g) x one thread's compute of the batch (everyone's bookkeeping in one queue),
 * against the fastest step; and whether the waits for the lock stand out of the noise. */
static void lock_verdicts(const dt_train_result *off, const dt_train_result *on, int T,
                          float g, int cores)
{
    int kc = (T < cores ? T : cores) - 1, kf = 0, kw = T - 1;     /* kw: the longest wait */
    dt_timing one = dt_train_step_timing(&off[0]), many = dt_train_step_timing(&off[kc]);
    int cmp = dt_timing_compare(one, many);
    int gpu = dt_device() == DT_CUDA;       /* the replicas share one GPU, not cores */
    if (kc > 0)
        printf("Without the lock, %d threads (%s) took %.2f ms a step against "
               "%.2f\nfor one: %s.\n", kc + 1, gpu ? "sharing one GPU" : "one core each",
               many.median * 1e3, one.median * 1e3, cmp > 0 ? "faster" :
               cmp < 0 ? (gpu ? "slower: splitting the batch saved less than waking the\n"
                          "threads and the master's copies cost" :
                          "slower: splitting the batch saved less than waking the\n"
                          "threads, the copies and the other work on these cores cost") :
               "lost in the noise, the runs' spreads overlap");
    if (kc > 0 && !gpu && dt_blas() && dt_blas_threads() > 1)  /* blas.c: rank's share */
        printf("(One thread's matrix products ran on all %d of the rank's BLAS threads: "
               "more\nthreads share the same cores.)\n", dt_blas_threads());
    for (int k = 1; k < T; k++)
        kf = median_ms(&on[k]) < median_ms(&on[kf]) ? k : kf,
        kw = on[k].gil_wait_seconds > on[kw].gil_wait_seconds ? k : kw;
    dt_timing fast = dt_train_step_timing(&on[kf]);
    double floor = g / (1 - g) * off[0].replica_seconds * 1e3, half = (fast.hi - fast.lo) / 2;
    printf("With it, everyone's bookkeeping queues for one lock: a step cannot take "
           "less\nthan g/(1-g) of one thread's compute of the whole batch: %.2f ms here, "
           "from 1\nthread's phases without it. The fastest step with it, %.2f ms at %d "
           "thread%s,\n%s.\n", floor, fast.median * 1e3, kf + 1, kf ? "s" : "",
           fast.median * 1e3 >= floor ? "is above that floor: agrees" :
           (fast.median + half) * 1e3 >= floor ? "is below it by less than its spread: "
           "lost in the noise" : "is below it beyond its spread: the floor, a wall-clock "
           "time, overstates the\nCPU time the lock charges when other work takes the "
           "core");
    double w0 = on[0].gil_wait_seconds * 1e3, wk = on[kw].gil_wait_seconds * 1e3;
    dt_timing last = dt_train_step_timing(&on[kw]);
    double noise = (last.hi - last.lo) / 2 * 1e3;
    int rising = 1;                     /* each thread count's wait above the last's */
    for (int k = 1; k < T; k++)
        rising &= on[k].gil_wait_seconds * 1e3 + noise >= on[k - 1].gil_wait_seconds * 1e3;
    if (kw == 0)
        printf("With one thread nobody else holds the lock: its wait is %.2f ms.\n\n", w0);
    else if (wk > w0 && wk > noise && rising)
        printf("A thread's wait for the lock grew from %.2f ms at 1 thread to %.2f at %d, "
               "more\nthan the steps' spread (+-%.2f ms), and with every thread added: the "
               "more threads\noverlap, the longer each waits.\n\n", w0, wk, kw + 1, noise);
    else if (wk > w0 && wk > noise)
        printf("A thread's wait for the lock grew from %.2f ms at 1 thread to %.2f at %d, "
               "more\nthan the steps' spread (+-%.2f ms), but not with every thread added "
               "(%.2f at %d):\nsharing the lock costs waiting; how much, on these cores, "
               "is not steady.\n\n", w0, wk, kw + 1, noise,
               on[T - 1].gil_wait_seconds * 1e3, T);
    else
        printf("A thread's wait for the lock, %.2f ms at %d threads (%.2f at 1), is within "
               "the\nsteps' spread (+-%.2f ms): lost in the noise.\n\n", wk, kw + 1, w0, noise);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int n = dt_size(), rank = dt_rank(), steps = 8, T = n > 1 ? n : 4, pct = 30;
    dt_int_option io[] = {{"steps", 3, 200, &steps}, {"threads", 1, MAXT, &T},
                          {"gil-pct", 1, 95, &pct}};
    dt_parse_int_options(argc, argv, io, 3, usage);
    dt_dataset set;
    dt_data_synthetic(&set, 2048, 16, 4, 1);
    dt_train_config c;
    dt_train_defaults_for(&c, DT_MODE_DDP, &set);
    c.model.hidden = 512;    /* a step of ~10 ms on a core: the lock's share shows */
    c.model.layers = 4;      /* above waking the threads and the noise */
    c.steps = steps;
    c.batch = (480 + n - 1) / n * n;     /* 480, or the next multiple of N */
    dt_train_usage_check(&c, "23_dp_threads");       /* else a usage error: exit 2 */
    dt_train_config t = c;
    t.mode = DT_MODE_DP_THREADS;
    float g = pct / 100.0f;
    size_t P = dt_mlp_nparams(&c.model), psi = P * sizeof(float);
    int B = c.batch, in = c.model.in, out = c.model.out;

    /* ==== the idea ==== */
    dt_printf0("DataParallel on rank 0: T = %d thread%s, each with a replica of the MLP "
               "(%zu\nweights, Psi = %zu bytes) and about B/T of the B = %d rows. One "
               "step:\n\n"
               "  master: replicate W -> 1..T-1, scatter rows   | threads: forward\n"
               "  master: gather outputs, loss, scatter dlogits | threads: backward\n"
               "  master: add gradients 1..T-1 into 0, optimizer step\n\n"
               "DDP on N = %d rank%s: each keeps its replica; gradients go round a ring, "
               "no\nmaster. The lock (--gil-pct %d): after each operation a thread "
               "spends %d%% of\nits work on bookkeeping that must hold one global "
               "lock, as Python's does.\n\n", T, T == 1 ? "" : "s", P, psi, B, n,
               n == 1 ? "" : "s", pct, pct);

    /* ==== the library calls: DataParallel with and without the lock, as threads
     * grow; then the parameter server, DDP and serial on the same model and batch ==== */
    dt_train_result off[MAXT], on[MAXT], dp, ddp, ref;
    dt_trace_pause(1);                  /* --trace: one run (the header says which) */
    for (int k = 0; k < T; k++) {
        t.threads = k + 1;
        t.gil = 0;
        train_alone(&t, &off[k]);
        t.gil = g;
        dt_trace_pause(n > 1 || k < T - 1);
        train_alone(&t, &on[k]);
        dt_trace_pause(1);
    }
    c.mode = DT_MODE_DP;
    dt_train(&c, MPI_COMM_WORLD, &dp);
    size_t dp_recv = dt_bytes_received();            /* dt_train reset it at start */
    c.mode = DT_MODE_DDP;
    dt_trace_pause(n == 1);
    dt_train(&c, MPI_COMM_WORLD, &ddp);
    dt_trace_pause(1);
    size_t ddp_recv = dt_bytes_received();
    dt_train_serial(&c, MPI_COMM_WORLD, &ref);
    dt_machine mc = dt_machine_now();

    /* ==== the check: every run reaches serial training's weights ==== */
    double diff = 0, d;
    for (int k = 0; k < T && rank == 0; k++) {
        d = dt_params_max_diff(off[k].params, ref.params, P, MPI_COMM_SELF);
        diff = fmax(diff, d);
        d = dt_params_max_diff(on[k].params, ref.params, P, MPI_COMM_SELF);
        diff = fmax(diff, d);
    }
    diff = fmax(diff, dt_params_max_diff(dp.params, ref.params, P, MPI_COMM_WORLD));
    diff = fmax(diff, dt_params_max_diff(ddp.params, ref.params, P, MPI_COMM_WORLD));

    /* ==== the numbers: what the lock costs as threads grow ==== */
    dt_printf0("Time per step (ms, the median of steps 2..%d) on rank 0's threads, "
               "and with the\nlock, where it goes (means): the threads' phases, a "
               "thread's wait for the\nlock within them, the master's work:\n"
               "  threads   no lock   lock %2d%%  |  phases   waiting   master\n",
               steps, pct);
    for (int k = 0; k < T && rank == 0; k++)
        dt_printf0("  %7d  %8.2f  %9.2f  |  %6.2f  %8.2f  %7.2f\n", k + 1,
                   median_ms(&off[k]), median_ms(&on[k]),
                   on[k].replica_seconds * 1e3, on[k].gil_wait_seconds * 1e3,
                   (on[k].copy_seconds + on[k].master_seconds) * 1e3);
    if (rank == 0)
        lock_verdicts(off, on, T, g, mc.cores);

    /* ==== the numbers: bytes through the busiest participant per step ==== */
    int k = T - 1, S = steps;
    size_t lo, hi;                       /* replica 0's rows, B_0 of them */
    dt_chunk_bounds((size_t)B, T, 0, &lo, &hi);
    double B0 = (double)(hi - lo);
    double want = 2.0 * (T - 1) * psi + 4.0 * (B - B0) * (in + 2 * out);
    double got = rank == 0 ? (double)on[k].bytes_copied / S : 0;
    double ring = 2.0 * (n - 1) / n * psi;
    double dp_link = (double)(dp.bytes_sent + dp_recv) / S;
    double ddp_link = (double)(ddp.bytes_sent + ddp_recv) / S;
    dt_printf0("Bytes per step, both ways, through the busiest participant:\n"
               "  DataParallel's master, %2d threads  %9.0f   2(T-1) Psi + 4(B-B_0)"
               "(in+2 out)\n%46.0f   (the formula)\n"
               "  parameter server, rank 0          %9.0f   about 2(N-1) Psi = %.0f\n"
               "  DDP, rank 0                       %9.0f   about 2 x 2(N-1)/N Psi = "
               "%.0f\n", T, got, want, dp_link, 2.0 * (n - 1) * psi, ddp_link, 2 * ring);
    dt_printf0("The master copies the weights out and the gradients in for every "
               "replica but\nits own, (T-1) Psi each way, and the others' rows, "
               "outputs and output\ngradients; a DDP rank sends and receives 2(N-1)/N "
               "Psi each way, under 2 Psi\nhowever many ranks. So the master moves "
               "(T-1) / (2(N-1)/N) times a DDP rank's\nbytes, N/2 with T = N, and more "
               "as T grows");
    if (n > 1 && ddp_link > 0)
        dt_printf0(":\nwith T = %d and N = %d here, %.2f times (measured: %.2f, the rows "
                   "and outputs\nincluded).\n\n", T, n, (T - 1) / (2.0 * (n - 1) / n),
                   got / ddp_link);
    else
        dt_printf0(".\n\n");

    /* ==== the numbers: the gap to DDP, and what explains it ==== */
    double t_on = rank == 0 ? median_ms(&on[k]) : 0, t_off = rank == 0 ? median_ms(&off[k]) : 0;
    double t_ddp = median_ms(&ddp), t_dp = median_ms(&dp), t_ser = median_ms(&ref);
    dt_printf0("At the same model and batch, ms per step:\n"
               "  serial, 1 rank                %8.2f\n"
               "  DataParallel, %2d threads      %8.2f\n"
               "  DataParallel + lock %2d%%       %8.2f\n"
               "  parameter server, %2d rank%s   %8.2f\n"
               "  DDP, %2d rank%s                %8.2f\n", t_ser, T, t_off, pct, t_on,
               n, n == 1 ? " " : "s", t_dp, n, n == 1 ? " " : "s", t_ddp);
    if (rank == 0) {
        double gap = t_on - t_ddp, copy = on[k].copy_seconds * 1e3;
        double master = on[k].master_seconds * 1e3, lock = on[k].gil_wait_seconds * 1e3;
        double held = g / (1 - g) * off[k].replica_seconds * 1e3;
        double named = copy + master + lock;
        printf("\nWhat the notes blame, per step of DataParallel with the lock:\n"
               "  the lock: a thread's wait for it          %7.2f ms\n"
               "  replicate, scatter, gather (copies)       %7.2f ms\n"
               "  the master's serial loss and optimizer    %7.2f ms\n"
               "  together                                  %7.2f ms\n", lock, copy,
               master, named);
        int vs = dt_timing_compare(dt_train_step_timing(&on[k]), dt_train_step_timing(&ddp));
        if (vs == 0)
            printf("DataParallel with the lock (%.2f ms) and DDP (%.2f) are within each "
                   "other's\nspread: neither is faster here, beyond the noise.\n", t_on,
                   t_ddp);
        else if (gap > 0 && named >= gap)
            printf("DDP is faster by %.2f ms, less than the named causes take: "
                   "without them\nDataParallel would be the faster here, its threads "
                   "sharing memory and sending\nnothing.\n", gap);
        else if (gap > 0)
            printf("DDP is faster by %.2f ms; the named causes account for %.0f%% of "
                   "it. The rest:\nthe bookkeeping itself, about %.2f ms a thread "
                   "(a Python DDP pays that too,\nbut in every process at once; "
                   "dtlab's DDP interprets nothing), waking the\nthreads twice a "
                   "step, and %s.\n", gap, 100 * named / gap, held,
                   n + T > mc.cores ? "threads and ranks sharing too few cores"
                                    : "the replicas' memory traffic");
        else
            printf("Here DDP is not faster (by %.2f ms):\n%s.\nThe notes' case for DDP "
                   "assumes a device per process; there, the causes above\nare what "
                   "it saves.\n", -gap, n == 1 ? "on one rank it has nothing to sum "
                   "and no second\nprocess to compute beside it" : n > mc.cores ?
                   "its ranks outnumber the cores, so each of the ring's messages\n"
                   "waits for the scheduler, while threads share memory and send "
                   "nothing" : "the threads share memory and send nothing, while "
                   "the ranks pass messages");
        if (dt_timing_compare(dt_train_step_timing(&on[k]),
                              dt_train_step_timing(&off[k])) > 0)
            printf("The lock alone costs %.2f ms a step (%.2f against %.2f without).\n",
                   t_on - t_off, t_on, t_off);
        else
            printf("The lock's cost is lost in the noise here (%.2f against %.2f "
                   "without): the\nruns' spreads overlap.\n", t_on, t_off);
        printf("DataParallel without the lock takes %.2f times DDP's time per step.\n",
               t_ddp > 0 ? t_off / t_ddp : 0);
        fflush(stdout);
    }
    double spread = dt_timing_spread(dt_train_step_timing(&ddp));   /* the widest shown */
    for (int j = 0; j < T && rank == 0; j++)
        spread = fmax(spread, fmax(dt_timing_spread(dt_train_step_timing(&on[j])),
                                   dt_timing_spread(dt_train_step_timing(&off[j]))));
    dt_timing_note(spread,
                   "DataParallel's threads and DDP's ranks need a core each; with "
                   "fewer cores both slow down and the gap says more about sharing "
                   "cores than about the lock or the copies.");

    /* ==== the check ==== */
    int ok = diff <= pow(10, -TOL_EXP) && (rank != 0 || got == want);
    DT_CHECK_MPI(MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD));
    dt_printf0("\ncheck: DataParallel at 1..%d threads with and without the lock, the "
               "parameter\n       server and DDP against serial training, max |weight "
               "difference| %.3g\n       (limit 1e-%d); the master's bytes against "
               "their formula: %s\n", T, diff, TOL_EXP, ok ? "PASS" : "FAIL");
    dt_printf0("The code: lib/parallel/dp_threads.c (dti_train_dp_threads, step, run_all, "
               "interpret), lib/parallel/ddp.c (dti_ddp_finish), lib/parallel/dp.c "
               "(server_step)\n");

    /* ==== teardown ==== */
    for (int j = 0; j < T && rank == 0; j++) {
        dt_train_result_free(&off[j]);
        dt_train_result_free(&on[j]);
    }
    dt_train_result_free(&ref);
    dt_train_result_free(&dp);
    dt_train_result_free(&ddp);
    dt_data_free(&set);
    dt_finalize();
    return ok ? 0 : 1;
}
