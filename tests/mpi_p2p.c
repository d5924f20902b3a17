/* Multi-rank tests of dtlab's core: dt_init, the datatypes, buffers, the helpers of
 * prog.h, and the point-to-point layer every collective stands on.
 *
 * p2p is tested the way the collectives use it: every rank at once, around a ring and in
 * pairs, with sizes from 0 bytes to more than a megabyte, sizes that differ between
 * sender and receiver, data that differs per sender and per size (so a message from the
 * wrong rank or of the wrong length shows), in polite and in blocking mode, and with the
 * byte counters checked after each exchange.
 *
 *   MPIEXEC_TIMEOUT=60 mpiexec -n 3 build/tests/mpi_p2p      (any rank count from 1)
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"
#include "cuda.h"

static const size_t sizes[] = { 0, 1, 2, 3, 7, 64, 4096, 65537, (1 << 20) + 3 };
#define NSIZES (sizeof sizes / sizeof sizes[0])
enum { TAG = 17 };

/* Byte j of a message of n bytes from rank src: differs per sender, size and position. */
static unsigned char pattern(int src, size_t n, size_t j)
{
    return (unsigned char)(src * 131 + j * 7 + n * 13 + (j >> 8));
}

static void fill_pattern(unsigned char *p, int src, size_t n)
{
    for (size_t j = 0; j < n; j++) p[j] = pattern(src, n, j);
}

/* First byte where p differs from what src sent, or -1. */
static long long check_pattern(const unsigned char *p, int src, size_t n)
{
    for (size_t j = 0; j < n; j++)
        if (p[j] != pattern(src, n, j)) return (long long)j;
    return -1;
}

/* ==== init ==== */

START_TEST(test_identity)
{
    int r, n, lr, ln;
    MPI_Comm local;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, r, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &lr);
    MPI_Comm_size(local, &ln);
    MPI_Comm_free(&local);
    HT_EXPECT(dt_rank() == r && dt_size() == n, "dt_rank/dt_size say %d of %d, MPI says %d "
              "of %d", dt_rank(), dt_size(), r, n);
    HT_EXPECT(dt_local_rank() == lr && dt_local_size() == ln, "dt_local_rank/size say %d of "
              "%d, MPI_Comm_split_type says %d of %d", dt_local_rank(), dt_local_size(), lr, ln);
    if (dti_cuda_device_count() == 0) {
        HT_EXPECT(dt_device() == DT_CPU, "no GPU, but dt_device() is %d", dt_device());
        HT_EXPECT(dt_cuda_device() == -1, "no GPU, but dt_cuda_device() is %d",
                  dt_cuda_device());
        HT_EXPECT(strcmp(dt_device_name(), "cpu") == 0, "no GPU, but dt_device_name() is "
                  "\"%s\"", dt_device_name());
    } else if (dt_device() == DT_CUDA) {
        HT_EXPECT(dt_cuda_device() == dt_local_rank() % dti_cuda_device_count(),
                  "GPU %d chosen by local rank %d of %d GPUs", dt_cuda_device(),
                  dt_local_rank(), dti_cuda_device_count());
        HT_EXPECT(strncmp(dt_device_name(), "cuda:", 5) == 0, "dt_device_name() is \"%s\"",
                  dt_device_name());
    }
    HT_VERDICT();
}
END_TEST

/* dt_init asks for MPI_THREAD_MULTIPLE and makes MPI errors return (core.h). */
START_TEST(test_mpi_setup)
{
    int level = 0;
    MPI_Query_thread(&level);
    HT_EXPECT(level == MPI_THREAD_MULTIPLE, "thread level %d, want MPI_THREAD_MULTIPLE",
              level);
    MPI_Errhandler eh;
    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
    HT_EXPECT(eh == MPI_ERRORS_RETURN, "MPI_COMM_WORLD's error handler is not "
              "MPI_ERRORS_RETURN");
    MPI_Errhandler_free(&eh);
    /* A send to a rank that does not exist must come back as an error code. */
    int err = MPI_Send(NULL, 0, MPI_BYTE, ht_size + 3, 0, MPI_COMM_WORLD);
    HT_EXPECT(err != MPI_SUCCESS, "MPI_Send to rank %d returned MPI_SUCCESS", ht_size + 3);
    const char *text = dti_mpi_error_string(err);
    HT_EXPECT(text && text[0], "dti_mpi_error_string(%d) is empty", err);
    HT_VERDICT();
}
END_TEST

START_TEST(test_polite)
{
    const char *w = getenv("DT_WAIT");
    int want = !(w && strcmp(w, "block") == 0);
    HT_EXPECT(dt_polite() == want, "dt_polite() is %d with DT_WAIT=%s", dt_polite(),
              w ? w : "(unset)");
    dt_set_polite(0);
    HT_EXPECT(dt_polite() == 0, "dt_set_polite(0) left dt_polite() at %d", dt_polite());
    dt_set_polite(1);
    HT_EXPECT(dt_polite() == 1, "dt_set_polite(1) left dt_polite() at %d", dt_polite());
    dt_set_polite(want);
    HT_VERDICT();
}
END_TEST

START_TEST(test_types)
{
    MPI_Datatype types[4] = { MPI_FLOAT, MPI_DOUBLE, MPI_INT, DT_HALF };
    static const char *tnames[4] = { "float", "double", "int", "half" };
    static const size_t tsizes[4] = { 4, 8, 4, 2 };
    MPI_Op ops[4] = { MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD };
    static const char *onames[4] = { "sum", "max", "min", "prod" };
    HT_EXPECT(DT_HALF != MPI_DATATYPE_NULL, "DT_HALF is MPI_DATATYPE_NULL after dt_init");
    int hs = 0;
    MPI_Type_size(DT_HALF, &hs);
    HT_EXPECT(hs == 2, "MPI_Type_size(DT_HALF) is %d, want 2", hs);
    for (int i = 0; i < 4; i++) {
        HT_EXPECT((int)dt_dtype_of(types[i]) == i, "dt_dtype_of(%s) is %d", tnames[i],
                  (int)dt_dtype_of(types[i]));
        HT_EXPECT(dt_type_size(types[i]) == tsizes[i], "dt_type_size(%s) is %zu", tnames[i],
                  dt_type_size(types[i]));
        HT_EXPECT(strcmp(dt_type_name(types[i]), tnames[i]) == 0, "dt_type_name(%s) is %s",
                  tnames[i], dt_type_name(types[i]));
        HT_EXPECT(dt_type_from_name(tnames[i]) == types[i], "dt_type_from_name(\"%s\") is "
                  "not the type", tnames[i]);
        HT_EXPECT((int)dt_op_of(ops[i]) == i, "dt_op_of(%s) is %d", onames[i],
                  (int)dt_op_of(ops[i]));
        HT_EXPECT(strcmp(dt_op_name(ops[i]), onames[i]) == 0, "dt_op_name(%s) is %s",
                  onames[i], dt_op_name(ops[i]));
        HT_EXPECT(dt_op_from_name(onames[i]) == ops[i], "dt_op_from_name(\"%s\") is not the "
                  "op", onames[i]);
        HT_EXPECT(dt_half_mpi_op(ops[i]) != MPI_OP_NULL, "dt_half_mpi_op(%s) is MPI_OP_NULL",
                  onames[i]);
    }
    HT_EXPECT(dt_type_from_name("float16x") == MPI_DATATYPE_NULL, "an unknown type name "
              "gives a type");
    HT_EXPECT(dt_type_from_name("") == MPI_DATATYPE_NULL, "the empty type name gives a type");
    HT_EXPECT(dt_op_from_name("avg") == MPI_OP_NULL, "an unknown op name gives an op");
    HT_VERDICT();
}
END_TEST

/* MPI's own allreduce on DT_HALF with dt_half_mpi_op, against the same reduction done
 * here from every rank's data (dt_fill_test_data is the same function everywhere). */
START_TEST(test_half_mpi_op)
{
    enum { N = 1001 };
    MPI_Op ops[4] = { MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD };
    dt_half mine[N], got[N], other[N];
    float want[N];
    for (int o = 0; o < 4; o++) {
        dt_fill_test_data(mine, N, DT_HALF, ops[o], 40 + o, ht_rank);
        DT_CHECK_MPI(MPI_Allreduce(mine, got, N, DT_HALF, dt_half_mpi_op(ops[o]),
                                   MPI_COMM_WORLD));
        for (int r = 0; r < ht_size; r++) {
            dt_fill_test_data(other, N, DT_HALF, ops[o], 40 + o, r);
            for (int i = 0; i < N; i++) {
                float x = dt_half_to_float(other[i]);
                if (r == 0) want[i] = x;
                else if (o == 0) want[i] += x;
                else if (o == 1) want[i] = fmaxf(want[i], x);
                else if (o == 2) want[i] = fminf(want[i], x);
                else want[i] *= x;
            }
        }
        int bad = -1;
        for (int i = 0; i < N && bad < 0; i++)
            if (dt_half_to_float(got[i]) != want[i]) bad = i;
        HT_EXPECT(bad < 0, "MPI_Allreduce(DT_HALF, dt_half_mpi_op(%s)): element %d is %g, "
                  "want %g", dt_op_name(ops[o]), bad, bad < 0 ? 0 : dt_half_to_float(got[bad]),
                  bad < 0 ? 0 : want[bad]);
    }
    HT_VERDICT();
}
END_TEST

START_TEST(test_buffers)
{
    void *z = dt_malloc(0, DT_CPU);
    HT_EXPECT(z != NULL, "dt_malloc(0) returned NULL");
    dt_free(z);
    enum { N = 1000 };
    unsigned char *a = dt_malloc(N, DT_CPU), *b = dt_malloc_like(a, N);
    HT_EXPECT(!dt_is_device_ptr(a) && !dt_is_device_ptr(b), "host buffers look like device "
              "memory");
    fill_pattern(a, ht_rank, N);
    dt_memcpy(b, a, N);
    HT_EXPECT(check_pattern(b, ht_rank, N) < 0, "dt_memcpy host to host lost data");
    dt_memzero(b + 10, N - 20);
    int zeros = 1;
    for (int i = 10; i < N - 10; i++) zeros &= b[i] == 0;
    HT_EXPECT(zeros && b[9] == a[9] && b[N - 10] == a[N - 10], "dt_memzero zeroed the wrong "
              "range");
    dt_free(a);
    dt_free(b);
    if (dt_device() == DT_CUDA) {   /* host -> device -> device -> host */
        unsigned char *h = malloc(N), *back = malloc(N);
        void *d1 = dt_malloc(N, DT_CUDA), *d2 = dt_malloc_like(d1, N);
        HT_EXPECT(dt_is_device_ptr(d1) && dt_is_device_ptr(d2), "dt_malloc(DT_CUDA) is not "
                  "device memory");
        fill_pattern(h, ht_rank, N);
        dt_memcpy(d1, h, N);
        dt_memcpy(d2, d1, N);
        dt_memcpy(back, d2, N);
        HT_EXPECT(check_pattern(back, ht_rank, N) < 0, "dt_memcpy through the GPU lost data");
        dt_free(d1);
        dt_free(d2);
        free(h);
        free(back);
    }
    HT_VERDICT();
}
END_TEST

/* dt_reduce_local (MPI handles, host memory) against dt_reduce_cpu, which unit_ops
 * checks, and against MPI_Reduce_local itself for the types MPI knows. */
START_TEST(test_reduce_local)
{
    enum { N = 333 };
    MPI_Datatype types[4] = { MPI_FLOAT, MPI_DOUBLE, MPI_INT, DT_HALF };
    MPI_Op ops[4] = { MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD };
    double in[N], io[N], io2[N], io3[N];    /* big enough for every type */
    for (int t = 0; t < 4; t++)
        for (int o = 0; o < 4; o++) {
            dt_fill_test_data(in, N, types[t], ops[o], 7, ht_rank);
            dt_fill_test_data(io, N, types[t], ops[o], 8, ht_rank);
            memcpy(io2, io, sizeof io);
            memcpy(io3, io, sizeof io);
            dt_reduce_local(in, io, N, types[t], ops[o]);
            dt_reduce_cpu(in, io2, N, (dt_dtype)t, (dt_op)o);
            MPI_Reduce_local(in, io3, N, types[t], t == 3 ? dt_half_mpi_op(ops[o]) : ops[o]);
            HT_EXPECT(memcmp(io, io2, sizeof io) == 0, "dt_reduce_local %s %s differs from "
                      "dt_reduce_cpu", dt_type_name(types[t]), dt_op_name(ops[o]));
            int same = 1;
            for (int i = 0; i < N; i++)
                same &= dt_elem(io, i, types[t]) == dt_elem(io3, i, types[t]);
            HT_EXPECT(same, "dt_reduce_local %s %s differs from MPI_Reduce_local",
                      dt_type_name(types[t]), dt_op_name(ops[o]));
            dt_reduce_local(NULL, NULL, 0, types[t], ops[o]);   /* count 0: nothing */
        }
    HT_VERDICT();
}
END_TEST

/* ==== prog.h helpers ==== */

START_TEST(test_parse)
{
    static const struct { const char *s; size_t v; } good[] = {
        { "0", 0 }, { "1", 1 }, { "123", 123 }, { "64K", 65536 }, { "1M", 1 << 20 },
        { "3G", (size_t)3 << 30 }, { "1k", 1024 } };
    static const char *bad[] = { "", "-1", "12X", "K", "1.5K", "1 K", " -1", "1KK",
                                 "99999999999999999999999", "17179869184G" };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t v = 7;
        int rc = dt_parse_size(good[i].s, &v);
        HT_EXPECT(rc == 0 && v == good[i].v, "dt_parse_size(\"%s\") = %d, %zu; want 0, %zu",
                  good[i].s, rc, v, good[i].v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t v = 7;
        HT_EXPECT(dt_parse_size(bad[i], &v) == -1, "dt_parse_size(\"%s\") accepted it (%zu)",
                  bad[i], v);
    }
    int v = 0;
    HT_EXPECT(dt_parse_int("5", 1, 10, &v) == 0 && v == 5, "dt_parse_int(\"5\", 1, 10)");
    HT_EXPECT(dt_parse_int("-3", -5, 5, &v) == 0 && v == -3, "dt_parse_int(\"-3\", -5, 5)");
    HT_EXPECT(dt_parse_int("10", 1, 10, &v) == 0 && v == 10, "dt_parse_int: max excluded");
    HT_EXPECT(dt_parse_int("0", 1, 10, &v) == -1, "dt_parse_int(\"0\", 1, 10) accepted");
    HT_EXPECT(dt_parse_int("11", 1, 10, &v) == -1, "dt_parse_int(\"11\", 1, 10) accepted");
    HT_EXPECT(dt_parse_int("5x", 1, 10, &v) == -1, "dt_parse_int(\"5x\") accepted");
    HT_EXPECT(dt_parse_int("", 1, 10, &v) == -1, "dt_parse_int(\"\") accepted");
    HT_EXPECT(dt_parse_int("99999999999", 1, 2147483647, &v) == -1, "dt_parse_int accepted "
              "an overflow");
    char buf[32];
    HT_EXPECT(strcmp(dt_format_bytes(1536, buf, sizeof buf), "1.5 KiB") == 0,
              "dt_format_bytes(1536) is \"%s\", want \"1.5 KiB\"", buf);
    HT_EXPECT(strcmp(dt_format_bytes(64.0 * 1024 * 1024, buf, sizeof buf), "64 MiB") == 0,
              "dt_format_bytes(64 MiB) is \"%s\", want \"64 MiB\"", buf);
    dt_format_bytes(100, buf, sizeof buf);
    HT_EXPECT(strstr(buf, "100") && strstr(buf, "B"), "dt_format_bytes(100) is \"%s\"", buf);
    HT_VERDICT();
}
END_TEST

START_TEST(test_elem)
{
    MPI_Datatype types[4] = { MPI_FLOAT, MPI_DOUBLE, MPI_INT, DT_HALF };
    double buf[4];
    static const double vals[] = { -3.25, 0, 7, 1024, -0.5 };
    for (int t = 0; t < 4; t++)
        for (size_t k = 0; k < sizeof vals / sizeof vals[0]; k++) {
            double v = (t == 2) ? (double)(int)vals[k] : vals[k];
            dt_elem_set(buf, 2, types[t], v);
            HT_EXPECT(dt_elem(buf, 2, types[t]) == v, "dt_elem_set/dt_elem %s %g -> %g",
                      dt_type_name(types[t]), v, dt_elem(buf, 2, types[t]));
        }
    HT_VERDICT();
}
END_TEST

/* dt_fill_test_data keeps its promises: values from the documented sets, deterministic,
 * and different per rank and per seed. */
START_TEST(test_fill)
{
    enum { N = 512 };
    MPI_Datatype types[4] = { MPI_FLOAT, MPI_DOUBLE, MPI_INT, DT_HALF };
    MPI_Op ops[2] = { MPI_SUM, MPI_PROD };
    double a[N], b[N];
    for (int t = 0; t < 4; t++)
        for (int o = 0; o < 2; o++) {
            dt_fill_test_data(a, N, types[t], ops[o], 5, ht_rank);
            int in_set = 1, distinct = 0;
            for (int i = 0; i < N; i++) {
                double v = dt_elem(a, i, types[t]);
                if (o == 1)
                    in_set &= (fabs(v) == 0.5 && t != 2) || fabs(v) == 1 || fabs(v) == 2;
                else if (t == 2)
                    in_set &= v == floor(v) && v >= -8 && v <= 8;
                else
                    in_set &= v * 4 == floor(v * 4) && v >= -4 && v <= 4;
                distinct |= v != dt_elem(a, 0, types[t]);
            }
            HT_EXPECT(in_set && distinct, "dt_fill_test_data %s %s: values outside the "
                      "documented set, or all equal", dt_type_name(types[t]),
                      dt_op_name(ops[o]));
            dt_fill_test_data(b, N, types[t], ops[o], 5, ht_rank);
            HT_EXPECT(memcmp(a, b, N * dt_type_size(types[t])) == 0, "dt_fill_test_data is "
                      "not deterministic");
            dt_fill_test_data(b, N, types[t], ops[o], 6, ht_rank);
            HT_EXPECT(memcmp(a, b, N * dt_type_size(types[t])) != 0, "dt_fill_test_data gives "
                      "the same data for seeds 5 and 6");
            dt_fill_test_data(b, N, types[t], ops[o], 5, ht_rank + 1);
            HT_EXPECT(memcmp(a, b, N * dt_type_size(types[t])) != 0, "dt_fill_test_data gives "
                      "the same data for ranks %d and %d", ht_rank, ht_rank + 1);
        }
    HT_VERDICT();
}
END_TEST

/* dt_check_close agrees: one rank's mismatch makes it return 0 on every rank. */
START_TEST(test_check_close)
{
    enum { N = 100 };
    float want[N], got[N];
    dt_fill_test_data(want, N, MPI_FLOAT, MPI_SUM, 9, ht_rank);
    memcpy(got, want, sizeof got);
    int ok = dt_check_close(got, want, N, MPI_FLOAT, 0, "identical", MPI_COMM_WORLD);
    HT_EXPECT(ok == 1, "dt_check_close of identical buffers is %d", ok);
    if (ht_rank == ht_size - 1)
        got[N / 2] += 0.25f;
    if (ht_rank == 0)
        fprintf(stderr, "(test_check_close: the next mismatch message is on purpose)\n");
    ok = dt_check_close(got, want, N, MPI_FLOAT, 0, "deliberate mismatch", MPI_COMM_WORLD);
    HT_EXPECT(ok == 0, "dt_check_close missed a mismatch on rank %d (rank %d got %d)",
              ht_size - 1, ht_rank, ok);
    memcpy(got, want, sizeof got);
    for (int i = 0; i < N; i++) got[i] = want[i] * (1 + 1e-6f);
    ok = dt_check_close(got, want, N, MPI_FLOAT, 1e-5, "within tolerance", MPI_COMM_WORLD);
    HT_EXPECT(ok == 1, "dt_check_close with tol 1e-5 rejected a 1e-6 relative difference");
    ok = dt_check_close(got, want, 0, MPI_FLOAT, 0, "count 0", MPI_COMM_WORLD);
    HT_EXPECT(ok == 1, "dt_check_close with count 0 is %d", ok);
    HT_VERDICT();
}
END_TEST

/* ==== p2p ==== */

/* _i: 0 polite, 1 blocking. The loop tests below set the mode and put it back. */
static void set_mode(int i) { dt_set_polite(i == 0); }
static const char *mode_name(int i) { return i == 0 ? "polite" : "blocking"; }

/* Around the ring: each rank sends to its right and receives from its left at once,
 * messages of a size that depends on the sender, so sizes differ on the two sides. */
START_TEST(test_sendrecv_ring)
{
    int was = dt_polite();
    set_mode(_i);
    int right = (ht_rank + 1) % ht_size, left = (ht_rank - 1 + ht_size) % ht_size;
    for (size_t k = 0; k < NSIZES && ht_size > 1; k++) {
        size_t snb = sizes[k] + (size_t)ht_rank, rnb = sizes[k] + (size_t)left;
        unsigned char *s = malloc(snb + 1), *r = malloc(rnb + 8);
        fill_pattern(s, ht_rank, snb);
        memset(r, 0xEE, rnb + 8);
        dt_bytes_reset();
        dt_sendrecv(s, snb, right, r, rnb, left, TAG, MPI_COMM_WORLD);
        long long at = check_pattern(r, left, rnb);
        HT_EXPECT(at < 0, "%s dt_sendrecv of %zu bytes from rank %d: byte %lld wrong",
                  mode_name(_i), rnb, left, at);
        HT_EXPECT(r[rnb] == 0xEE && r[rnb + 7] == 0xEE, "%s dt_sendrecv wrote past the %zu "
                  "bytes received", mode_name(_i), rnb);
        HT_EXPECT(check_pattern(s, ht_rank, snb) < 0, "%s dt_sendrecv changed the send buffer",
                  mode_name(_i));
        HT_EXPECT(dt_bytes_sent() == snb && dt_bytes_received() == rnb, "%s dt_sendrecv of %zu "
                  "out, %zu in: byte counters say %zu, %zu", mode_name(_i), snb, rnb,
                  dt_bytes_sent(), dt_bytes_received());
        free(s);
        free(r);
    }
    dt_bytes_reset();
    HT_EXPECT(dt_bytes_sent() == 0 && dt_bytes_received() == 0, "dt_bytes_reset did not reset");
    dt_set_polite(was);
    HT_VERDICT();
}
END_TEST

/* Pairs (0,1), (2,3), ...: the even rank sends, the odd one receives and answers with
 * a message of another size; with an odd rank count the last rank sits it out. */
START_TEST(test_send_recv_pairs)
{
    int was = dt_polite();
    set_mode(_i);
    int peer = ht_rank ^ 1;
    if (peer < ht_size) {
        for (size_t k = 0; k < NSIZES; k++) {
            size_t n = sizes[k], m = sizes[(k + 3) % NSIZES];   /* the answer's size */
            size_t out = ht_rank % 2 == 0 ? n : m, in = ht_rank % 2 == 0 ? m : n;
            unsigned char *s = malloc(out + 1), *r = malloc(in + 1);
            fill_pattern(s, ht_rank, out);
            dt_bytes_reset();
            if (ht_rank % 2 == 0) {
                dt_send(s, out, peer, TAG, MPI_COMM_WORLD);
                dt_recv(r, in, peer, TAG, MPI_COMM_WORLD);
            } else {
                dt_recv(r, in, peer, TAG, MPI_COMM_WORLD);
                dt_send(s, out, peer, TAG, MPI_COMM_WORLD);
            }
            long long at = check_pattern(r, peer, in);
            HT_EXPECT(at < 0, "%s dt_send/dt_recv of %zu bytes from %d: byte %lld wrong",
                      mode_name(_i), in, peer, at);
            HT_EXPECT(dt_bytes_sent() == out && dt_bytes_received() == in, "%s dt_send %zu, "
                      "dt_recv %zu: counters say %zu, %zu", mode_name(_i), out, in,
                      dt_bytes_sent(), dt_bytes_received());
            free(s);
            free(r);
        }
    }
    dt_set_polite(was);
    HT_VERDICT();
}
END_TEST

/* Tags keep messages apart: two small messages sent with tags A then B, received B
 * first. (Small, so the sends complete before the receives are posted.) */
START_TEST(test_tags)
{
    int peer = ht_rank ^ 1;
    if (peer < ht_size) {
        int a = 100 + ht_rank, b = 200 + ht_rank, ra = -1, rb = -1;
        if (ht_rank % 2 == 0) {
            dt_send(&a, sizeof a, peer, 1, MPI_COMM_WORLD);
            dt_send(&b, sizeof b, peer, 2, MPI_COMM_WORLD);
            dt_recv(&rb, sizeof rb, peer, 2, MPI_COMM_WORLD);
            dt_recv(&ra, sizeof ra, peer, 1, MPI_COMM_WORLD);
        } else {
            dt_recv(&rb, sizeof rb, peer, 2, MPI_COMM_WORLD);
            dt_recv(&ra, sizeof ra, peer, 1, MPI_COMM_WORLD);
            dt_send(&a, sizeof a, peer, 1, MPI_COMM_WORLD);
            dt_send(&b, sizeof b, peer, 2, MPI_COMM_WORLD);
        }
        HT_EXPECT(ra == 100 + peer && rb == 200 + peer, "tags mixed up: got %d (tag 1), %d "
                  "(tag 2) from rank %d", ra, rb, peer);
    }
    HT_VERDICT();
}
END_TEST

/* dt_waitall on requests a program posted itself, in both modes, and on none. */
START_TEST(test_waitall)
{
    int was = dt_polite();
    set_mode(_i);
    enum { N = 70000 };
    int right = (ht_rank + 1) % ht_size, left = (ht_rank - 1 + ht_size) % ht_size;
    unsigned char *s = malloc(N), *r = malloc(N);
    fill_pattern(s, ht_rank, N);
    MPI_Request req[2];
    DT_CHECK_MPI(MPI_Irecv(r, N, MPI_BYTE, left, TAG, MPI_COMM_WORLD, &req[0]));
    DT_CHECK_MPI(MPI_Isend(s, N, MPI_BYTE, right, TAG, MPI_COMM_WORLD, &req[1]));
    dt_waitall(2, req);
    HT_EXPECT(check_pattern(r, left, N) < 0, "%s dt_waitall returned before the data came",
              mode_name(_i));
    HT_EXPECT(req[0] == MPI_REQUEST_NULL && req[1] == MPI_REQUEST_NULL, "%s dt_waitall left "
              "requests active", mode_name(_i));
    dt_waitall(0, req);
    free(s);
    free(r);
    dt_set_polite(was);
    HT_VERDICT();
}
END_TEST

/* p2p on a communicator other than MPI_COMM_WORLD, numbered backwards: peers are ranks
 * of that communicator. */
START_TEST(test_subcomm)
{
    MPI_Comm back;
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, ht_size - ht_rank, &back));
    int r, n;
    MPI_Comm_rank(back, &r);
    MPI_Comm_size(back, &n);
    HT_EXPECT(r == ht_size - 1 - ht_rank, "split gave rank %d", r);
    if (n > 1) {
        int right = (r + 1) % n, left = (r - 1 + n) % n;
        int out[3] = { ht_rank, r, 42 }, in[3] = { -1, -1, -1 };
        dt_sendrecv(out, sizeof out, right, in, sizeof in, left, TAG, back);
        HT_EXPECT(in[1] == left && in[0] == ht_size - 1 - left && in[2] == 42,
                  "on a reversed communicator rank %d heard from (%d, %d), want its left %d",
                  r, in[0], in[1], left);
    }
    MPI_Comm_free(&back);
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    dt_init(&argc, &argv);
    ht_rank = dt_rank();
    ht_size = dt_size();

    Suite *s = suite_create("p2p");
    TCase *init = tcase_create("init");
    tcase_add_checked_fixture(init, ht_setup, NULL);
    tcase_add_test(init, test_identity);
    tcase_add_test(init, test_mpi_setup);
    tcase_add_test(init, test_polite);
    tcase_add_test(init, test_types);
    tcase_add_test(init, test_half_mpi_op);
    tcase_add_test(init, test_buffers);
    tcase_add_test(init, test_reduce_local);
    suite_add_tcase(s, init);

    TCase *prog = tcase_create("prog");
    tcase_add_checked_fixture(prog, ht_setup, NULL);
    tcase_add_test(prog, test_parse);
    tcase_add_test(prog, test_elem);
    tcase_add_test(prog, test_fill);
    tcase_add_test(prog, test_check_close);
    suite_add_tcase(s, prog);

    TCase *p2p = tcase_create("p2p");
    tcase_add_checked_fixture(p2p, ht_setup, NULL);
    tcase_add_loop_test(p2p, test_sendrecv_ring, 0, 2);
    tcase_add_loop_test(p2p, test_send_recv_pairs, 0, 2);
    tcase_add_test(p2p, test_tags);
    tcase_add_loop_test(p2p, test_waitall, 0, 2);
    tcase_add_test(p2p, test_subcomm);
    suite_add_tcase(s, p2p);

    int rc = ht_run(s);
    dt_finalize();
    return rc;
}
