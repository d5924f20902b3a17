/* Grading exercise 09, tensor-parallel linear layers. Every rank builds the same whole
 * layer from a seed, W (out, in), b, x (B, in), dy (B, out), with values in quarters so
 * that sums come out exact; it cuts its slice with dt_chunk_bounds over the T ranks,
 * calls the learner's function, and compares every output with the serial
 * dt_linear_forward / dt_linear_backward on the whole matrices, sliced the same way.
 *
 * The shapes do not divide by T, and some are narrower than T, so that some ranks own
 * no rows or columns at all and must still take part in the sums. The largest make
 * allreduces of about 2 MB. Outputs carry a guard zone past their end, gradients start
 * from non-zero values (they must accumulate) and dx from junk (it must be overwritten).
 * A wrong answer that matches a known mistake is named (the bias added T times, a
 * partial sum left unsummed, a gradient summed when it was complete). */
#include <math.h>
#include <stdlib.h>
#include "grade.h"

/* ==== shapes and data ==== */

typedef struct { int B, in, out; } shape;

/* Variant v of the layer shape at T ranks: widths below T, not multiples of T, and two
 * large ones (a wide output, then a wide input). */
enum { NSHAPES = 6 };
static shape shape_of(int v, int T)
{
    switch (v) {
    case 0: return (shape){ 1, 1, 1 };
    case 1: return (shape){ 3, gr_count(2, T), T + 1 };
    case 2: return (shape){ 5, 7 * T + 3, gr_count(2, T) };
    case 3: return (shape){ 4, 2 * T + 1, 7 * T + 3 };
    case 4: return (shape){ 8, 7 * T + 3, gr_count(4, T) };
    default: return (shape){ 8, gr_count(4, T), 7 * T + 3 };
    }
}

enum { GUARD = 8 };                /* floats of guard zone after every output */
static const float guard_val = 12345.5f;

/* A buffer of n floats plus the guard zone, filled from (seed, tag): the same values on
 * every rank that asks for the same (seed, tag). Owned by the caller (free). */
static float *data(size_t n, unsigned seed, int tag)
{
    float *p = malloc((n + GUARD) * sizeof(float));
    DT_REQUIRE(p != NULL, "out of memory");
    dt_fill_test_data(p, (int)n, MPI_FLOAT, MPI_SUM, seed, tag);
    for (int k = 0; k < GUARD; k++)
        p[n + k] = guard_val;
    return p;
}

static float *zeros(size_t n)
{
    float *p = data(n, 0, 0);
    memset(p, 0, n * sizeof(float));
    return p;
}

/* Columns [lo, hi) of a (rows, cols) matrix, as a new (rows, hi - lo) matrix. */
static float *cols_of(const float *m, int rows, int cols, size_t lo, size_t hi)
{
    size_t n = hi - lo;
    float *p = data((size_t)rows * n, 0, 0);
    for (int r = 0; r < rows; r++)
        memcpy(p + r * n, m + (size_t)r * cols + lo, n * sizeof(float));
    return p;
}

/* Rows [lo, hi) of a (rows, cols) matrix, as a new matrix. */
static float *rows_of(const float *m, int cols, size_t lo, size_t hi)
{
    size_t n = (hi - lo) * cols;
    float *p = data(n, 0, 0);
    memcpy(p, m + lo * cols, n * sizeof(float));
    return p;
}

static float *copy_of(const float *m, size_t n) { return rows_of(m, 1, 0, n); }

/* ==== comparing ==== */

/* A wrong answer a known mistake would give, and what to tell the learner then. */
typedef struct { const float *v; const char *msg; } mistake;

/* What the failure messages start with: the case, the ranks, the shape, the slice. */
static char ctx[256];

/* One case on a single layer, as layer_case sets it up: variant v's shape at T ranks;
 * this rank's slice [lo, hi), n = hi - lo wide, of W's rows (column parallel) or
 * columns (row parallel); x, W and, for a forward, b from the seed, with the serial y;
 * for a backward dy, with the serial dx, dW and db. What a direction lacks is NULL. */
typedef struct {
    shape s;
    int T, t, n;
    size_t lo, hi;
    unsigned seed;
    float *x, *W, *b, *y, *dy, *dx, *dW, *db;
} layer;

static layer layer_case(int v, int row, int backward, unsigned seed)
{
    layer L = { .T = ht_size, .t = ht_rank, .seed = seed };
    shape s = L.s = shape_of(v, L.T);
    dt_chunk_bounds((size_t)(row ? s.in : s.out), L.T, L.t, &L.lo, &L.hi);
    L.n = (int)(L.hi - L.lo);
    snprintf(ctx, sizeof ctx, "%s parallel %s, B=%d in=%d out=%d over %d ranks (this "
             "rank: %s [%zu, %zu) of W%s)", row ? "row" : "column",
             backward ? "backward" : "forward", s.B, s.in, s.out, L.T,
             row ? "columns" : "rows", L.lo, L.hi, L.lo == L.hi ? ", none" : "");
    L.x = data((size_t)s.B * s.in, seed, 1);
    L.W = data((size_t)s.out * s.in, seed, 2);
    if (backward) {
        L.dy = data((size_t)s.B * s.out, seed, 3);
        L.dx = zeros((size_t)s.B * s.in);
        L.dW = zeros((size_t)s.out * s.in);
        L.db = zeros(s.out);
        dt_linear_backward(L.x, L.W, L.dy, L.dx, L.dW, L.db, s.B, s.in, s.out);
    } else {
        L.b = data(s.out, seed, 3);
        L.y = zeros((size_t)s.B * s.out);
        dt_linear_forward(L.x, L.W, L.b, L.y, s.B, s.in, s.out);
    }
    return L;
}

static void layer_free(layer *L)
{
    free(L->x); free(L->W); free(L->b); free(L->y); free(L->dy); free(L->dx);
    free(L->dW); free(L->db);
}

/* Compares got (n floats, read as rows of cols; cols 0: a vector) with want; on a
 * mismatch notes ONE failure: a known mistake's message when got matches it everywhere,
 * else the first wrong element. The tolerance is relative to the largest |want|. Also
 * checks the guard zone. Returns 1 when it matched. */
static int check(const char *name, const float *got, const float *want, size_t n,
                 int cols, const mistake *ms, int nms)
{
    double big = 1.0;
    for (size_t k = 0; k < n; k++)
        big = fmax(big, fabs(want[k]));
    double tol = 1e-5 * big;
    for (int k = 0; k < GUARD; k++)
        if (got[n + k] != guard_val) {
            ht_fail("%s: wrote past the end of %s, which holds %zu floats", ctx, name, n);
            return 0;
        }
    size_t bad = n;
    for (size_t k = 0; k < n && bad == n; k++)
        if (!(fabs(got[k] - want[k]) <= tol))
            bad = k;
    if (bad == n)
        return 1;
    char at[48];                           /* the wrong element's place: [r][c] */
    if (cols > 0)
        snprintf(at, sizeof at, "%s[%zu][%zu]", name, bad / cols, bad % cols);
    else
        snprintf(at, sizeof at, "%s[%zu]", name, bad);
    for (int m = 0; m < nms; m++) {
        size_t k = 0;
        while (k < n && fabs(got[k] - ms[m].v[k]) <= tol)
            k++;
        if (k == n) {
            ht_fail("%s: %s (e.g. %s = %g, expected %g)", ctx, ms[m].msg, at,
                    got[bad], want[bad]);
            return 0;
        }
    }
    ht_fail("%s: %s = %g, expected %g", ctx, at, got[bad], want[bad]);
    return 0;
}

/* want - d, or want + k*d with d repeated every len floats (a bias over rows). */
static float *plus(const float *want, size_t n, const float *d, size_t len, float k)
{
    float *p = data(n, 0, 0);
    for (size_t i = 0; i < n; i++)
        p[i] = want[i] + k * d[i % len];
    return p;
}

#define MSG_BIAS_T "the bias was added T times: add it once, after the sum"
#define MSG_DX_PARTIAL "dx is a partial sum: each rank holds only its columns' share; " \
                       "sum it over the ranks"
#define MSG_DB_T "db was summed over the ranks (T times the column sums): dy is whole " \
                 "on every rank, so its column sums are complete already"
#define MSG_ACCUM(name) name " was overwritten: gradients accumulate (+=) into what " \
                        "it held"

/* Checks a gradient that accumulates: got (n floats, rows of cols) must be start, what
 * it held before the call, plus want, this rank's slice of the serial gradient. want
 * alone, the gradient overwritten, is the typical mistake and is named. */
static int check_accum(const char *name, const float *got, const float *want,
                       const float *start, size_t n, int cols)
{
    float *sum = plus(want, n, start, n ? n : 1, 1);
    char msg[96];
    snprintf(msg, sizeof msg, MSG_ACCUM("%s"), name);
    mistake ms[] = { { want, msg } };
    int ok = check(name, got, sum, n, cols, ms, 1);
    free(sum);
    return ok;
}

/* ==== the bytes ====
 * Each layer moves exactly what its algorithm needs: the column forward and the row
 * backward nothing, the column backward one allreduce of dx (B x in), the row forward
 * one of y (B x out). Another way to share the work (gathering W, or the whole x)
 * computes the same numbers with other bytes, and loses the case. */

/* The bytes one dt_allreduce of count floats sends from this rank on comm. Collective. */
static size_t allreduce_bytes(size_t count, MPI_Comm comm)
{
    float *z = zeros(count ? count : 1);
    dt_bytes_reset();
    dt_allreduce(MPI_IN_PLACE, z, (int)count, MPI_FLOAT, MPI_SUM, comm);
    size_t sent = dt_bytes_sent();
    free(z);
    return sent;
}

/* Notes a failure when fn sent other than want bytes (what: the traffic it should). */
static void check_sent(const char *fn, size_t sent, size_t want, const char *what)
{
    HT_EXPECT(sent == want, "%s sent %zu bytes from this rank; %s, %zu bytes through "
              "dtlab's p2p (MPI's own calls are not seen)", fn, sent, what, want);
}

/* ==== the cases ==== */

START_TEST(col_forward)
{
    layer L = layer_case(_i, 0, 0, 900 + _i);
    shape s = L.s;
    int n = L.n;
    float *W_t = rows_of(L.W, s.in, L.lo, L.hi), *b_t = rows_of(L.b, 1, L.lo, L.hi);
    float *y_t = data((size_t)s.B * n, L.seed, 4);
    dt_bytes_reset();
    ex_col_linear_forward(L.x, W_t, b_t, y_t, s.B, s.in, s.out, MPI_COMM_WORLD);
    check_sent("ex_col_linear_forward", dt_bytes_sent(), 0, "the column-parallel "
               "forward needs no communication: x is whole on every rank");

    float *want = cols_of(L.y, s.B, s.out, L.lo, L.hi);
    float *nob = plus(want, (size_t)s.B * n, b_t, n ? n : 1, -1.0f);
    mistake ms[] = { { nob, "y_t: the bias b_t is missing" } };
    check("y_t", y_t, want, (size_t)s.B * n, n ? n : 1, ms, n ? 1 : 0);
    layer_free(&L);
    free(W_t); free(b_t); free(y_t); free(want); free(nob);
    HT_VERDICT();
}
END_TEST

START_TEST(col_backward)
{
    layer L = layer_case(_i, 0, 1, 910 + _i);
    shape s = L.s;
    int n = L.n, nc = n ? n : 1, T = L.T, t = L.t;
    size_t nx = (size_t)s.B * s.in;

    /* this rank's slice, its gradients starting from non-zero values, dx from junk */
    float *W_t = rows_of(L.W, s.in, L.lo, L.hi);
    float *dy_t = cols_of(L.dy, s.B, s.out, L.lo, L.hi);
    float *dW_t = data((size_t)n * s.in, L.seed, 4 + t), *db_t = data(n, L.seed, 20 + t);
    float *dx_got = data(nx, L.seed, 40 + t);
    float *dW0 = copy_of(dW_t, (size_t)n * s.in), *db0 = copy_of(db_t, n);
    dt_bytes_reset();
    ex_col_linear_backward(L.x, W_t, dy_t, dx_got, dW_t, db_t, s.B, s.in, s.out,
                           MPI_COMM_WORLD);
    size_t sent = dt_bytes_sent();
    check_sent("ex_col_linear_backward", sent, allreduce_bytes(nx, MPI_COMM_WORLD),
               "the column-parallel backward sums dx over the ranks: one dt_allreduce "
               "of B x in floats");

    /* dx: whole; the partial sum of this rank alone is the typical mistake */
    float *part = zeros(nx), *junk = zeros((size_t)s.in * nc);
    if (n > 0)
        dt_linear_backward(L.x, W_t, dy_t, part, junk, NULL, s.B, s.in, n);
    mistake mdx[] = { { part, MSG_DX_PARTIAL } };
    check("dx", dx_got, L.dx, nx, s.in, mdx, T > 1);

    /* dW_t, db_t: this rank's rows of the serial gradients, added to what they held */
    float *wdW = rows_of(L.dW, s.in, L.lo, L.hi), *wdb = rows_of(L.db, 1, L.lo, L.hi);
    check_accum("dW_t", dW_t, wdW, dW0, (size_t)n * s.in, s.in);
    check_accum("db_t", db_t, wdb, db0, n, 0);
    layer_free(&L);
    free(W_t); free(dy_t); free(dW_t); free(db_t); free(dx_got); free(dW0); free(db0);
    free(part); free(junk); free(wdW); free(wdb);
    HT_VERDICT();
}
END_TEST

START_TEST(row_forward)
{
    layer L = layer_case(_i, 1, 0, 920 + _i);
    shape s = L.s;
    int n = L.n, T = L.T;
    size_t ny = (size_t)s.B * s.out;
    float *x_t = cols_of(L.x, s.B, s.in, L.lo, L.hi);
    float *W_t = cols_of(L.W, s.out, s.in, L.lo, L.hi);
    float *y_got = data(ny, L.seed, 4 + L.t);
    dt_bytes_reset();
    ex_row_linear_forward(x_t, W_t, L.b, y_got, s.B, s.in, s.out, MPI_COMM_WORLD);
    size_t sent = dt_bytes_sent();
    check_sent("ex_row_linear_forward", sent, allreduce_bytes(ny, MPI_COMM_WORLD),
               "the row-parallel forward sums the partial outputs: one dt_allreduce of "
               "B x out floats");

    /* the typical mistakes: the bias on every rank, no bias, no sum over the ranks */
    float *part = zeros(ny);
    if (n > 0)
        dt_linear_forward(x_t, W_t, NULL, part, s.B, n, s.out);
    float *tb = plus(L.y, ny, L.b, s.out, (float)(T - 1));
    float *nob = plus(L.y, ny, L.b, s.out, -1), *partb = plus(part, ny, L.b, s.out, 1);
    mistake ms[] = {
        { tb, "y: " MSG_BIAS_T },
        { partb, "y holds this rank's partial output only: sum the ranks' partial "
                 "outputs (allreduce), then add the bias" },
        { part, "y holds this rank's partial output only, without the bias: sum the "
                "ranks' partial outputs (allreduce), then add the bias" },
        { nob, "y: the bias is missing: add b once, after the sum" },
    };
    check("y", y_got, L.y, ny, s.out, T > 1 ? ms : ms + 3, T > 1 ? 4 : 1);
    layer_free(&L);
    free(x_t); free(W_t); free(y_got); free(part); free(tb); free(nob); free(partb);
    HT_VERDICT();
}
END_TEST

START_TEST(row_backward)
{
    layer L = layer_case(_i, 1, 1, 930 + _i);
    shape s = L.s;
    int n = L.n, nc = n ? n : 1, T = L.T, t = L.t;
    float *x_t = cols_of(L.x, s.B, s.in, L.lo, L.hi);
    float *W_t = cols_of(L.W, s.out, s.in, L.lo, L.hi);
    float *dW_t = data((size_t)s.out * n, L.seed, 4 + t);
    float *db_got = data(s.out, L.seed, 20);
    float *dx_t = data((size_t)s.B * n, L.seed, 40 + t);
    float *dW0 = copy_of(dW_t, (size_t)s.out * n), *db0 = copy_of(db_got, s.out);
    dt_bytes_reset();
    ex_row_linear_backward(x_t, W_t, L.dy, dx_t, dW_t, db_got, s.B, s.in, s.out,
                           MPI_COMM_WORLD);
    check_sent("ex_row_linear_backward", dt_bytes_sent(), 0, "the row-parallel "
               "backward needs no communication: dy is whole on every rank");

    size_t nxt = (size_t)s.B * n;
    float *wdx = cols_of(L.dx, s.B, s.in, L.lo, L.hi);
    float *tdx = plus(wdx, nxt, wdx, nxt ? nxt : 1, (float)(T - 1));
    mistake mdx[] = { { tdx, "dx_t was summed over the ranks: in row parallel each "
                        "rank's input gradient is complete already" } };
    check("dx_t", dx_t, wdx, nxt, nc, mdx, T > 1);

    float *wdW = cols_of(L.dW, s.out, s.in, L.lo, L.hi);
    check_accum("dW_t", dW_t, wdW, dW0, (size_t)s.out * n, nc);

    /* db: the column sums of the whole dy, on every rank, added once */
    float *wdb = plus(db0, s.out, L.db, s.out, 1);
    float *tdb = plus(db0, s.out, L.db, s.out, T);
    float *tall = plus(wdb, s.out, wdb, s.out, T - 1);
    mistake mdb[] = {
        { L.db, MSG_ACCUM("db") },
        { db0, "db was left as it was: every rank holds the whole bias and adds the "
               "column sums of the whole dy" },
        { tdb, MSG_DB_T },
        { tall, MSG_DB_T },
    };
    check("db", db_got, wdb, s.out, 0, mdb, T > 1 ? 4 : 2);
    layer_free(&L);
    free(x_t); free(W_t); free(dW_t); free(db_got); free(dx_t); free(dW0); free(db0);
    free(wdx); free(tdx); free(wdW); free(wdb); free(tdb); free(tall);
    HT_VERDICT();
}
END_TEST

/* A Megatron pair, x -> [column parallel, ReLU] -> [row parallel] -> y, forward and
 * backward, against the same two layers run whole. The last variant runs on two halves
 * of the ranks (evens and odds, each numbered backwards: gr_split), each a group of its
 * own with its own data: the functions must use the communicator they are given, not
 * MPI_COMM_WORLD. */
typedef struct { int B, in, H, out; } pair_shape;
enum { NPAIRS = 5 };
static pair_shape pair_of(int v, int T)
{
    switch (v) {
    case 0: return (pair_shape){ 2, 3, 1, 2 };
    case 1: return (pair_shape){ 4, 2 * T + 1, gr_count(2, T), 3 };
    case 2: return (pair_shape){ 6, 5, 7 * T + 3, T + 2 };
    case 3: return (pair_shape){ 16, 40, 64 * T + 5, 33 };
    default: return (pair_shape){ 5, 7, 3 * T + 1, 4 };
    }
}

START_TEST(megatron_pair)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    int color = 0;
    if (_i == NPAIRS - 1) {
        color = ht_rank % 2;               /* gr_split's halves: even and odd ranks */
        comm = gr_split();
    }
    int T, t;
    MPI_Comm_size(comm, &T);
    MPI_Comm_rank(comm, &t);
    pair_shape s = pair_of(_i, T);
    s.out += color;                            /* the halves differ in shape too */
    size_t lo, hi;
    dt_chunk_bounds((size_t)s.H, T, t, &lo, &hi);
    int n = (int)(hi - lo);
    snprintf(ctx, sizeof ctx, "Megatron pair, B=%d in=%d hidden=%d out=%d over %d "
             "ranks%s (this rank: hidden units [%zu, %zu)%s)", s.B, s.in, s.H, s.out,
             T, comm == MPI_COMM_WORLD ? "" : " of a split communicator", lo, hi,
             lo == hi ? ", none" : "");
    unsigned seed = 940 + _i + 50 * color;
    size_t nx = (size_t)s.B * s.in, nh = (size_t)s.B * s.H, ny = (size_t)s.B * s.out;
    float *x = data(nx, seed, 1), *W1 = data((size_t)s.H * s.in, seed, 2);
    float *b1 = data(s.H, seed, 3), *W2 = data((size_t)s.out * s.H, seed, 4);
    float *b2 = data(s.out, seed, 5), *dy = data(ny, seed, 6);

    /* serial: h = x W1^T + b1, a = relu(h), y = a W2^T + b2, and back */
    float *h = zeros(nh), *a = zeros(nh), *y = zeros(ny), *da = zeros(nh);
    float *dx = zeros(nx), *dW1 = zeros((size_t)s.H * s.in), *db1 = zeros(s.H);
    float *dW2 = zeros((size_t)s.out * s.H), *db2 = zeros(s.out);
    dt_linear_forward(x, W1, b1, h, s.B, s.in, s.H);
    dt_act_forward(DT_RELU, h, a, nh);
    dt_linear_forward(a, W2, b2, y, s.B, s.H, s.out);
    dt_linear_backward(a, W2, dy, da, dW2, db2, s.B, s.H, s.out);
    dt_act_backward(DT_RELU, h, da, da, nh);
    dt_linear_backward(x, W1, da, dx, dW1, db1, s.B, s.in, s.H);

    /* tensor parallel: this rank's hidden units [lo, hi) */
    size_t nht = (size_t)s.B * n;
    float *W1_t = rows_of(W1, s.in, lo, hi), *b1_t = rows_of(b1, 1, lo, hi);
    float *W2_t = cols_of(W2, s.out, s.H, lo, hi);
    float *h_t = zeros(nht), *a_t = zeros(nht), *da_t = zeros(nht), *y_got = zeros(ny);
    float *dx_got = zeros(nx), *dW1_t = zeros((size_t)n * s.in), *db1_t = zeros(n);
    float *dW2_t = zeros((size_t)s.out * n), *db2_got = zeros(s.out);
    ex_col_linear_forward(x, W1_t, b1_t, h_t, s.B, s.in, s.H, comm);
    dt_act_forward(DT_RELU, h_t, a_t, nht);
    ex_row_linear_forward(a_t, W2_t, b2, y_got, s.B, s.H, s.out, comm);
    ex_row_linear_backward(a_t, W2_t, dy, da_t, dW2_t, db2_got, s.B, s.H, s.out, comm);
    dt_act_backward(DT_RELU, h_t, da_t, da_t, nht);
    ex_col_linear_backward(x, W1_t, da_t, dx_got, dW1_t, db1_t, s.B, s.in, s.H, comm);

    float *tb = plus(y, ny, b2, s.out, (float)(T - 1));
    mistake my[] = { { tb, "y: " MSG_BIAS_T } };
    float *tdb2 = plus(db2, s.out, db2, s.out, (float)(T - 1));
    mistake mdb2[] = { { tdb2, MSG_DB_T } };
    float *wdW1 = rows_of(dW1, s.in, lo, hi), *wdb1 = rows_of(db1, 1, lo, hi);
    float *wdW2 = cols_of(dW2, s.out, s.H, lo, hi);
    int ok = check("y", y_got, y, ny, s.out, my, T > 1);
    ok = ok && check("dW2_t", dW2_t, wdW2, (size_t)s.out * n, n ? n : 1, NULL, 0);
    ok = ok && check("db2", db2_got, db2, s.out, 0, mdb2, T > 1);
    ok = ok && check("dW1_t", dW1_t, wdW1, (size_t)n * s.in, s.in, NULL, 0);
    ok = ok && check("db1_t", db1_t, wdb1, n, 0, NULL, 0);
    float *dh_t = cols_of(da, s.B, s.H, lo, hi), *part = zeros(nx);
    float *junk = zeros((size_t)n * s.in);
    if (n > 0)
        dt_linear_backward(x, W1_t, dh_t, part, junk, NULL, s.B, s.in, n);
    mistake mdx[] = { { part, MSG_DX_PARTIAL } };
    ok = ok && check("dx", dx_got, dx, nx, s.in, mdx, T > 1);
    if (comm != MPI_COMM_WORLD)
        MPI_Comm_free(&comm);
    free(x); free(W1); free(b1); free(W2); free(b2); free(dy); free(h); free(a); free(y);
    free(da); free(dx); free(dW1); free(db1); free(dW2); free(db2); free(W1_t);
    free(b1_t); free(W2_t); free(h_t); free(a_t); free(da_t); free(y_got); free(dx_got);
    free(dW1_t); free(db1_t); free(dW2_t); free(db2_got); free(tb); free(wdW1);
    free(wdb1); free(wdW2); free(dh_t); free(part); free(junk);
    free(tdb2);
    HT_VERDICT();
}
END_TEST

/* The slicing and the sums are the exercise: dtlab's tensor-parallel internals may not
 * do them instead. dt_allreduce is how the sums are done. */
#define TP_RULE "dti?_tp_[a-z_]*"
#define TP_WHY "write the layer's slice and its sums yourself, from dt_linear_forward, " \
               "dt_linear_backward and dt_allreduce; lib/parallel/tp.c's internals are " \
               "the answer"
static const gr_rule rules[] = {
    { "ex_col_linear_forward", TP_RULE, TP_WHY },
    { "ex_col_linear_backward", TP_RULE, TP_WHY },
    { "ex_row_linear_forward", TP_RULE, TP_WHY },
    { "ex_row_linear_backward", TP_RULE, TP_WHY },
};

int main(int argc, char **argv)
{
    const gr_case cases[] = {
        { "col_forward", 2, GR_MPI, col_forward, NSHAPES,
          "column parallel forward: each rank its output columns, no communication",
          "ex_col_linear_forward" },
        { "col_backward", 3, GR_MPI, col_backward, NSHAPES,
          "column parallel backward: dW_t, db_t local, dx summed over the ranks",
          "ex_col_linear_backward" },
        { "row_forward", 3, GR_MPI, row_forward, NSHAPES,
          "row parallel forward: partial outputs summed, the bias added once",
          "ex_row_linear_forward" },
        { "row_backward", 2, GR_MPI, row_backward, NSHAPES,
          "row parallel backward: dx_t and dW_t local, db from the whole dy",
          "ex_row_linear_backward" },
        { "megatron_pair", 2, GR_MPI, megatron_pair, NPAIRS,
          "column layer, ReLU, row layer, forward and backward, as one whole MLP; the "
          "last on two halves of the ranks", NULL },
    };
    return gr_run(argc, argv, &(gr_suite){
        .exercise = "09_tp_linear",
        .cases = cases, .ncases = (int)(sizeof cases / sizeof cases[0]),
        .rules = rules, .nrules = (int)(sizeof rules / sizeof rules[0]),
        .deadlock = "does every rank join every dt_allreduce, with the same count, "
                    "even a rank that owns no rows or columns (a width smaller than the "
                    "ranks)? Skipping the local product is fine; skipping the sum is not. "
                    "On two halves (megatron_pair): is comm passed to every sum?" });
}
