/* Multi-rank tests of dtlab's core: dt_init, the datatypes, buffers, the helpers of
 * prog.h, and the point-to-point layer every collective stands on.
 *
 * p2p is tested the way the collectives use it: every rank at once, around a ring and in
 * pairs, with sizes from 0 bytes to more than a megabyte, sizes that differ between
 * sender and receiver, data that differs per sender and per size (so a message from the
 * wrong rank or of the wrong length shows), in polite and in blocking mode, and with the
 * byte counters checked after each exchange. Then the mailboxes (p2p.h, "transports"):
 * the protocol's edges, in the mode DT_P2P chose (run it with DT_P2P=staging too).
 *
 *   MPIEXEC_TIMEOUT=60 mpiexec -n 3 build/tests/mpi_p2p      (any rank count from 1)
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"
#include "cuda.h"
#include "mailbox.h"

static const size_t sizes[] = { 0, 1, 2, 3, 7, 64, 4096, 65537, (1 << 20) + 3 };
#define NSIZES (sizeof sizes / sizeof sizes[0])
enum { TAG = 17 };

/* Byte j of a message of n bytes from src: differs per sender, size and position, and
 * has no period. (A sum like src * 131 + j * 7 + (j >> 8) repeats every 64 KiB, so a
 * mailbox piece of 256 KiB written at the wrong offset, or twice, would go unseen.) src
 * is a rank, or rank + 1000 * k for the k-th of several messages a rank sends. */
static unsigned char pattern(int src, size_t n, size_t j)
{
    uint64_t x = j * 0x9E3779B97F4A7C15ULL + n * 0xC2B2AE3D27D4EB4FULL +
                 (uint64_t)(src + 1) * 0x165667B19E3779F9ULL;
    x = (x ^ (x >> 29)) * 0xBF58476D1CE4E5B9ULL;
    return (unsigned char)(x >> 40);
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

/* MPI_COMM_WORLD numbered backwards (its rank r is world rank ht_size - 1 - r); *r and
 * *n: this rank's number in it and its size. The caller frees it. */
static MPI_Comm backwards(int *r, int *n)
{
    MPI_Comm back;
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, ht_size - ht_rank, &back));
    MPI_Comm_rank(back, r);
    MPI_Comm_size(back, n);
    return back;
}

/* p2p on a communicator other than MPI_COMM_WORLD, numbered backwards: peers are ranks
 * of that communicator. */
START_TEST(test_subcomm)
{
    int r, n;
    MPI_Comm back = backwards(&r, &n);
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

/* ==== p2p through the mailboxes ====
 *
 * Between two ranks of one host a message of MB_MIN bytes up to SLOTS slots goes
 * through the sender's outbox (p2p.h, "transports"; lib/mailbox.c): in pieces of at most
 * a slot (dt_p2p_segment(0) bytes), each announced by a small MPI doorbell and freed by
 * its receiver: the credit that gives the slot back. A message takes all its slots at
 * once or, when they are not all free, goes plain; a larger one always goes plain.
 * These tests aim at the edges of that protocol: sizes at the threshold and at slot
 * multiples, every slot full and more (plain again), messages in flight to
 * two peers, their order, any source, a sub-communicator, two threads at once, plain MPI
 * messages among them, and the transport switched between rounds. They run in the mode
 * DT_P2P chose (run.sh runs the suite with the default and with DT_P2P=staging), and
 * check that dt_p2p_via names the transport each message takes. */

#define MB_MIN ((size_t)64 << 10)   /* smaller messages keep to MPI (p2p.h) */
enum { SLOTS = 8, NEDGES = 8 };     /* host slots in an outbox; edge_size's sizes */

/* The sizes at the edges: the threshold - 1, itself and + 1; a slot and a slot + 1;
 * every slot and every slot + 1 (plain: more than the outbox); 20 slots. */
static size_t edge_size(int k)
{
    size_t slot = dt_p2p_segment(0);
    const size_t sizes[NEDGES] = { MB_MIN - 1, MB_MIN, MB_MIN + 1, slot, slot + 1,
                                   SLOTS * slot, SLOTS * slot + 1, 20 * slot };
    return sizes[k];
}

static int *host_of;            /* world rank -> the lowest world rank on its host */

/* Fills host_of. Collective over MPI_COMM_WORLD. */
static void find_hosts(void)
{
    MPI_Comm local;
    int first = ht_rank;
    host_of = malloc(sizeof *host_of * (size_t)ht_size);
    DT_REQUIRE(host_of != NULL, "out of memory");
    DT_CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, ht_rank,
                                     MPI_INFO_NULL, &local));
    HT_MPI(MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, local, &ht_req));
    HT_MPI(MPI_Iallgather(&first, 1, MPI_INT, host_of, 1, MPI_INT, MPI_COMM_WORLD,
                          &ht_req));
    MPI_Comm_free(&local);
}

static int world_of(int peer, MPI_Comm comm)
{
    MPI_Group g, world;
    int w = -1;
    DT_CHECK_MPI(MPI_Comm_group(comm, &g));
    DT_CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    DT_CHECK_MPI(MPI_Group_translate_ranks(g, 1, &peer, world, &w));
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    return w;
}

/* What dt_p2p_via must say for nbytes of host data to peer: a mailbox (shm) for a
 * message of MB_MIN bytes up to the outbox to another rank of this host, unless the
 * mode is staging; else MPI. */
static dt_via want_via(int peer, MPI_Comm comm, size_t nbytes)
{
    int w = world_of(peer, comm);
    int boxes = strcmp(dt_p2p_mode(), "staging") != 0 && w != ht_rank &&
                host_of[w] == host_of[ht_rank] && nbytes >= MB_MIN &&
                nbytes <= SLOTS * dt_p2p_segment(0);
    return boxes ? DT_VIA_SHM : DT_VIA_MPI;
}

/* A buffer of room bytes and 8 more, every byte 0xEE: what a receive must not touch. */
static unsigned char *landing(size_t room)
{
    unsigned char *p = malloc(room + 8);
    DT_REQUIRE(p != NULL, "out of memory");
    memset(p, 0xEE, room + 8);
    return p;
}

/* A message that landed in buf (from landing(room)): n bytes from src (pattern's src),
 * and every byte after them untouched. what: the exchange, for the failure's text. */
static void expect_msg(const unsigned char *buf, size_t room, int src, size_t n,
                       const char *what)
{
    long long at = check_pattern(buf, src, n);
    HT_EXPECT(at < 0, "%s: %zu bytes from rank %d (its message %d): byte %lld wrong", what,
              n, src % 1000, src / 1000, at);
    size_t past = n;
    while (past < room + 8 && buf[past] == 0xEE)
        past++;
    HT_EXPECT(past == room + 8, "%s: byte %zu changed, past the %zu bytes of the message",
              what, past, n);
}

/* Around the ring at every edge size, as the collectives call p2p. _i bit 0: by
 * dt_sendrecv, or by dt_send and dt_recv with even ranks sending first and odd ones
 * receiving first; bit 1: polite or blocking. */
START_TEST(test_mb_ring)
{
    int split = _i & 1, was = dt_polite();
    set_mode(_i >> 1);
    int right = (ht_rank + 1) % ht_size, left = (ht_rank - 1 + ht_size) % ht_size;
    for (int k = 0; k < NEDGES && ht_size > 1; k++) {
        size_t n = edge_size(k);
        unsigned char *s = malloc(n), *r = landing(n);
        DT_REQUIRE(s != NULL, "out of memory");
        fill_pattern(s, ht_rank, n);
        dt_via via = dt_p2p_via(right, MPI_COMM_WORLD, 0, n);
        dt_via want = want_via(right, MPI_COMM_WORLD, n);
        char what[96];
        snprintf(what, sizeof what, "%s %s ring of %zu bytes", mode_name(_i >> 1),
                 split ? "dt_send/dt_recv" : "dt_sendrecv", n);
        HT_EXPECT(via == want, "%s: dt_p2p_via says %s, want %s", what, dt_via_name(via),
                  dt_via_name(want));
        dt_bytes_reset();
        if (!split) {
            dt_sendrecv(s, n, right, r, n, left, TAG, MPI_COMM_WORLD);
        } else if (ht_rank % 2 == 0) {
            dt_send(s, n, right, TAG, MPI_COMM_WORLD);
            dt_recv(r, n, left, TAG, MPI_COMM_WORLD);
        } else {
            dt_recv(r, n, left, TAG, MPI_COMM_WORLD);
            dt_send(s, n, right, TAG, MPI_COMM_WORLD);
        }
        expect_msg(r, n, left, n, what);
        HT_EXPECT(check_pattern(s, ht_rank, n) < 0, "%s changed the send buffer", what);
        HT_EXPECT(dt_bytes_sent() == n && dt_bytes_received() == n, "%s: byte counters "
                  "say %zu out, %zu in", what, dt_bytes_sent(), dt_bytes_received());
        HT_EXPECT(dt_messages_sent() == 1, "%s: %zu messages counted, want 1 (however "
                  "the transport cut it)", what, dt_messages_sent());
        free(s);
        free(r);
    }
    dt_set_polite(was);
    HT_VERDICT();
}
END_TEST

/* Messages in flight to two peers before any is received: each rank sends three to its
 * right and three to its left, on six tags, sizes differing per message, and only then
 * receives its six, in the opposite tag order, into buffers larger than each. Through
 * mailboxes the six wait in 6 of the sender's 8 slots, and receives match them by tag
 * as MPI's would. (Through MPI a message this large waits for its receive, and this
 * order would deadlock: the test runs only where every rank's six take mailboxes.) */
START_TEST(test_mb_inflight)
{
    enum { PER = 3 };
    size_t base = 100 << 10, room = base + 2 * PER * 1000 + 7 * (size_t)ht_size;
    int right = (ht_rank + 1) % ht_size, left = (ht_rank - 1 + ht_size) % ht_size;
    int boxes = ht_size > 1 && want_via(right, MPI_COMM_WORLD, base) == DT_VIA_SHM &&
                want_via(left, MPI_COMM_WORLD, base) == DT_VIA_SHM;
    if (ht_agree(boxes)) {
        unsigned char *s[2 * PER];
        for (int t = 0; t < 2 * PER; t++) {     /* tags TAG.. to the right, then left */
            size_t n = base + 1000 * (size_t)t + 7 * (size_t)ht_rank;
            s[t] = malloc(n);
            DT_REQUIRE(s[t] != NULL, "out of memory");
            fill_pattern(s[t], ht_rank + 1000 * t, n);
            dt_send(s[t], n, t < PER ? right : left, TAG + t, MPI_COMM_WORLD);
        }
        for (int t = 2 * PER - 1; t >= 0; t--) {
            int from = t < PER ? left : right;  /* my left sent me its first three */
            unsigned char *r = landing(room);
            char what[80];
            snprintf(what, sizeof what, "message %d of 6 in flight (tag %d)", t, TAG + t);
            dt_recv(r, room, from, TAG + t, MPI_COMM_WORLD);
            expect_msg(r, room, from + 1000 * t, base + 1000 * (size_t)t + 7 * (size_t)from,
                       what);
            free(r);
        }
        for (int t = 0; t < 2 * PER; t++)
            free(s[t]);
    }
    HT_VERDICT();
}
END_TEST

/* Order: messages with one tag from one sender arrive as they were sent, whatever way
 * each goes. In pairs (0,1), (2,3)..., one rank sends three with the same tag, 3 slots
 * + 5 bytes (a mailbox), 1000 bytes (plain MPI) and 2 slots (a mailbox again), and its
 * partner receives them into buffers of the largest size; then the other way round.
 * With an odd rank count the last rank sits it out. */
START_TEST(test_mb_order)
{
    size_t slot = dt_p2p_segment(0), len[3] = { 3 * slot + 5, 1000, 2 * slot };
    size_t room = len[0];
    int peer = ht_rank ^ 1;
    for (int turn = 0; turn < 2 && peer < ht_size; turn++) {
        for (int m = 0; m < 3; m++) {
            if (ht_rank % 2 == turn) {
                unsigned char *s = malloc(len[m]);
                DT_REQUIRE(s != NULL, "out of memory");
                fill_pattern(s, ht_rank + 1000 * m, len[m]);
                dt_send(s, len[m], peer, TAG, MPI_COMM_WORLD);
                free(s);
            } else {
                unsigned char *r = landing(room);
                dt_recv(r, room, peer, TAG, MPI_COMM_WORLD);
                expect_msg(r, room, peer + 1000 * m, len[m], "messages with one tag");
                free(r);
            }
        }
    }
    HT_VERDICT();
}
END_TEST

/* MPI_ANY_SOURCE: every other rank sends rank 0 two messages of 4 pieces each, with
 * one tag; rank 0 receives them from any source and tells each one's sender from its
 * bytes: it must be some sender's next message, whole (pieces of two senders' messages
 * mixed match nobody, and a sender's second message before its first matches nobody). */
START_TEST(test_mb_any_source)
{
    size_t n = 3 * dt_p2p_segment(0) + 17;
    if (ht_rank != 0) {
        unsigned char *s = malloc(n);
        DT_REQUIRE(s != NULL, "out of memory");
        for (int m = 0; m < 2; m++) {
            fill_pattern(s, ht_rank + 1000 * m, n);
            dt_send(s, n, 0, TAG, MPI_COMM_WORLD);
        }
        free(s);
    } else {
        int *next = calloc((size_t)ht_size, sizeof *next);     /* per sender */
        DT_REQUIRE(next != NULL, "out of memory");
        for (int i = 0; i < 2 * (ht_size - 1); i++) {
            unsigned char *r = landing(n);
            dt_recv(r, n, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD);
            int who = -1;
            for (int src = 1; src < ht_size && who < 0; src++)
                if (next[src] < 2 && check_pattern(r, src + 1000 * next[src], n) < 0)
                    who = src;
            HT_EXPECT(who >= 0, "message %d of %d from MPI_ANY_SOURCE is no sender's next "
                      "message, whole", i + 1, 2 * (ht_size - 1));
            HT_EXPECT(r[n] == 0xEE && r[n + 7] == 0xEE, "a receive from MPI_ANY_SOURCE "
                      "wrote past its %zu bytes", n);
            if (who >= 0)
                next[who]++;
            free(r);
        }
        free(next);
    }
    HT_VERDICT();
}
END_TEST

/* Mailboxes on a communicator numbered backwards: peers are ranks of that
 * communicator, and a slot's owner is found through it. 5 slots + 3 bytes (six pieces,
 * the last of 3 bytes) and 100 bytes (plain MPI). */
START_TEST(test_mb_subcomm)
{
    int r, n;
    MPI_Comm back = backwards(&r, &n);
    int right = (r + 1) % n, left = (r - 1 + n) % n, left_w = ht_size - 1 - left;
    size_t sizes[2] = { 5 * dt_p2p_segment(0) + 3, 100 };
    for (int k = 0; k < 2 && n > 1; k++) {
        size_t nb = sizes[k];
        unsigned char *s = malloc(nb), *in = landing(nb);
        DT_REQUIRE(s != NULL, "out of memory");
        fill_pattern(s, ht_rank, nb);
        dt_via via = dt_p2p_via(right, back, 0, nb), want = want_via(right, back, nb);
        HT_EXPECT(via == want, "on a reversed communicator dt_p2p_via says %s for %zu "
                  "bytes to its rank %d, want %s", dt_via_name(via), nb, right,
                  dt_via_name(want));
        dt_sendrecv(s, nb, right, in, nb, left, TAG, back);
        expect_msg(in, nb, left_w, nb, "dt_sendrecv on a reversed communicator");
        free(s);
        free(in);
    }
    MPI_Comm_free(&back);
    HT_VERDICT();
}
END_TEST

/* Two threads at once, as DDP's communication thread and the main thread: the main
 * thread sends around the ring to the right on MPI_COMM_WORLD while a second thread
 * sends to the left on a duplicate; rounds of 5 slots (6 for the second thread: the
 * threads share the 8 slots, so often one of them finds too few free and goes by MPI)
 * and of one slot. A thread notes its first failure in its job (HT_EXPECT is the main
 * thread's); the byte counters count both threads. */
enum { TROUNDS = 10 };

typedef struct {
    MPI_Comm comm;
    int dir, id;            /* +1 to the right, -1 to the left; 0 main, 1 second thread */
    size_t nbytes;          /* sent, all rounds together */
    char bad[200];          /* the first failure; "" for none */
} ring_job;

static void *ring_rounds(void *arg)
{
    ring_job *j = arg;
    int to = (ht_rank + j->dir + ht_size) % ht_size;
    int from = (ht_rank - j->dir + ht_size) % ht_size;
    size_t slot = dt_p2p_segment(0), sizes[2] = { (5 + (size_t)j->id) * slot, slot };
    for (int round = 0; round < TROUNDS; round++)
        for (int k = 0; k < 2; k++) {
            size_t n = sizes[k];
            int msg = 1000 * (2 * round + k);
            unsigned char *s = malloc(n), *r = landing(n);
            DT_REQUIRE(s != NULL, "out of memory");
            fill_pattern(s, ht_rank + msg, n);
            dt_sendrecv(s, n, to, r, n, from, TAG, j->comm);
            long long at = check_pattern(r, from + msg, n);
            if (at >= 0 && !j->bad[0])
                snprintf(j->bad, sizeof j->bad, "thread %d, round %d: %zu bytes from rank "
                         "%d: byte %lld wrong", j->id, round, n, from, at);
            j->nbytes += n;
            free(s);
            free(r);
        }
    return NULL;
}

START_TEST(test_mb_threads)
{
    if (ht_size > 1) {
        MPI_Comm dup;
        DT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        ring_job jobs[2] = { { MPI_COMM_WORLD, +1, 0, 0, "" }, { dup, -1, 1, 0, "" } };
        pthread_t second;
        dt_bytes_reset();
        DT_REQUIRE(pthread_create(&second, NULL, ring_rounds, &jobs[1]) == 0,
                   "cannot start a thread");
        ring_rounds(&jobs[0]);
        pthread_join(second, NULL);
        for (int i = 0; i < 2; i++)
            HT_EXPECT(!jobs[i].bad[0], "%s", jobs[i].bad);
        size_t both = jobs[0].nbytes + jobs[1].nbytes;
        HT_EXPECT(dt_bytes_sent() == both && dt_bytes_received() == both, "two threads "
                  "sent and received %zu bytes; the counters say %zu, %zu", both,
                  dt_bytes_sent(), dt_bytes_received());
        MPI_Comm_free(&dup);
    }
    HT_VERDICT();
}
END_TEST

/* dt_isend's messages are always plain MPI, and dt_recv, which also takes doorbells,
 * takes them too: sizes below and above the threshold, and 48 bytes, a doorbell's size
 * (a plain message of that size is told from a doorbell by its contents). */
START_TEST(test_mb_isend)
{
    const size_t sizes[] = { 0, 47, 48, 49, MB_MIN + 1, 3 * dt_p2p_segment(0) };
    int right = (ht_rank + 1) % ht_size, left = (ht_rank - 1 + ht_size) % ht_size;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0] && ht_size > 1; k++) {
        size_t n = sizes[k];
        unsigned char *s = malloc(n + 1), *r = landing(n);
        DT_REQUIRE(s != NULL, "out of memory");
        fill_pattern(s, ht_rank, n);
        dt_bytes_reset();
        MPI_Request req = dt_isend(s, n, right, TAG, MPI_COMM_WORLD);
        dt_recv(r, n, left, TAG, MPI_COMM_WORLD);
        dt_waitall(1, &req);
        expect_msg(r, n, left, n, "dt_isend received by dt_recv");
        HT_EXPECT(dt_bytes_sent() == n && dt_bytes_received() == n, "dt_isend and dt_recv "
                  "of %zu bytes: counters say %zu, %zu", n, dt_bytes_sent(),
                  dt_bytes_received());
        free(s);
        free(r);
    }
    HT_VERDICT();
}
END_TEST

/* dt_p2p_via and the modes: the mode is the one DT_P2P named (auto by default); to every
 * peer, host data of every edge size (and 0 bytes) goes as want_via says; device data
 * the same way, but "staging" where host data says "mpi", and shm or ipc (a GPU shared
 * with the peer) where it says "shm". dt_p2p_set_mode refuses what is not a mode, and in
 * staging every message goes through MPI. */
START_TEST(test_mb_via)
{
    const char *env = getenv("DT_P2P"), *start = dt_p2p_mode();
    HT_EXPECT(strcmp(start, env && *env ? env : "auto") == 0, "dt_p2p_mode() is %s with "
              "DT_P2P=%s", start, env ? env : "(unset)");
    HT_EXPECT(dt_p2p_set_mode("bogus") == 0 && strcmp(dt_p2p_mode(), start) == 0,
              "dt_p2p_set_mode(\"bogus\") was taken, or changed the mode to %s",
              dt_p2p_mode());
    HT_EXPECT(!strcmp(dt_via_name(DT_VIA_MPI), "mpi") &&
              !strcmp(dt_via_name(DT_VIA_STAGING), "staging") &&
              !strcmp(dt_via_name(DT_VIA_SHM), "shm") &&
              !strcmp(dt_via_name(DT_VIA_IPC), "ipc"),
              "dt_via_name names the transports otherwise than p2p.h does");
    const char *modes[2] = { strcmp(start, "staging") ? start : "auto", "staging" };
    for (int m = 0; m < 2; m++) {
        HT_EXPECT(dt_p2p_set_mode(modes[m]) == 1 && !strcmp(dt_p2p_mode(), modes[m]),
                  "dt_p2p_set_mode(\"%s\") did not take", modes[m]);
        for (int peer = 0; peer < ht_size; peer++)
            for (int k = -1; k < NEDGES; k++) {
                size_t n = k < 0 ? 0 : edge_size(k);
                dt_via want = want_via(peer, MPI_COMM_WORLD, n);
                dt_via host = dt_p2p_via(peer, MPI_COMM_WORLD, 0, n);
                dt_via dev = dt_p2p_via(peer, MPI_COMM_WORLD, 1, n);
                HT_EXPECT(host == want, "mode %s: dt_p2p_via says %s for %zu bytes of host "
                          "data to rank %d, want %s", modes[m], dt_via_name(host), n, peer,
                          dt_via_name(want));
                /* device data: a host mailbox where host data has one, or one of the
                 * GPU's (up to its outbox, 64 MiB) where ranks share it; else staging */
                HT_EXPECT(want == DT_VIA_SHM ? dev == DT_VIA_SHM || dev == DT_VIA_IPC
                                             : dev == DT_VIA_STAGING ||
                                               (dev == DT_VIA_IPC && n > SLOTS *
                                                dt_p2p_segment(0) && m == 0),
                          "mode %s: dt_p2p_via says %s for %zu bytes of device data to rank "
                          "%d, where host data goes by %s", modes[m], dt_via_name(dev), n,
                          peer, dt_via_name(want));
            }
    }
    dt_p2p_set_mode(start);
    HT_VERDICT();
}
END_TEST

/* dt_p2p_set_mode between rounds, every rank alike: a ring in each mode in turn, of
 * 7 slots + 1 (8 pieces: a whole outbox) and of 1000 bytes (sizes differ per sender,
 * by the rank's number of bytes), each received into a
 * buffer 4 KiB larger than the message (allowed: the message's length counts). The
 * byte counters must mean the same in every mode: what the first round counted. */
START_TEST(test_mb_set_mode)
{
    static const char *modes[] = { "staging", "auto", "shm", "ipc", "staging", "auto" };
    enum { NMODES = sizeof modes / sizeof modes[0] };
    const char *start = dt_p2p_mode();
    int right = (ht_rank + 1) % ht_size, left = (ht_rank - 1 + ht_size) % ht_size;
    size_t base[2] = { (SLOTS - 1) * dt_p2p_segment(0) + 1, 1000 }, counted[2][2] = {{0}};
    for (int m = 0; m < (int)NMODES; m++) {
        HT_EXPECT(dt_p2p_set_mode(modes[m]) == 1, "dt_p2p_set_mode(\"%s\") refused",
                  modes[m]);
        for (int k = 0; k < 2 && ht_size > 1; k++) {
            size_t n = base[k] + (size_t)ht_rank, in = base[k] + (size_t)left;
            size_t room = base[k] + (size_t)ht_size + 4096;
            unsigned char *s = malloc(n), *r = landing(room);
            DT_REQUIRE(s != NULL, "out of memory");
            fill_pattern(s, ht_rank + 1000 * m, n);
            dt_via via = dt_p2p_via(right, MPI_COMM_WORLD, 0, n);
            dt_via want = want_via(right, MPI_COMM_WORLD, n);
            char what[80];
            snprintf(what, sizeof what, "round %d, mode %s (%s)", m, modes[m],
                     dt_via_name(via));
            HT_EXPECT(via == want, "%s: dt_p2p_via says %s for %zu bytes, want %s", what,
                      dt_via_name(via), n, dt_via_name(want));
            dt_bytes_reset();
            dt_sendrecv(s, n, right, r, room, left, TAG, MPI_COMM_WORLD);
            expect_msg(r, room, left + 1000 * m, in, what);
            if (m == 0) {
                counted[k][0] = dt_bytes_sent();
                counted[k][1] = dt_bytes_received();
            }
            HT_EXPECT(dt_bytes_sent() == n && dt_bytes_received() == counted[k][1],
                      "%s: byte counters say %zu out, %zu in; mode %s said %zu, %zu", what,
                      dt_bytes_sent(), dt_bytes_received(), modes[0], n, counted[k][1]);
            free(s);
            free(r);
        }
    }
    dt_p2p_set_mode(start);
    HT_VERDICT();
}
END_TEST

/* ==== staged pieces ====
 *
 * Device data that goes through MPI is staged through pinned host memory in pieces
 * (lib/mailbox.c, "staged pieces"): a header doorbell, then each piece sent as soon as
 * its copy off the GPU is done, and copied on to the GPU (and reduced there) as soon as
 * it arrives. dti_p2p_stage_host makes host data take the same path, through the same
 * staging buffers, so these tests run the protocol without a GPU: in staging mode (every
 * message through MPI), pieces of PC_PIECE bytes, the mailbox tests run again (sizes
 * from one piece - 1 to 80 pieces, where the pieces grow to keep to 64; receives larger
 * than their message; any source; a sub-communicator; two threads each with its own
 * staging), and the ring allreduce, whose reduce-scatter adds each piece as it comes,
 * is held to MPI_Allreduce. */
#define PC_PIECE ((size_t)(64 << 10) + 16)

static void pieces_on(void)
{
    ht_setup();
    DT_REQUIRE(dt_p2p_set_mode("staging"), "staging mode refused");
    dti_p2p_stage_host(PC_PIECE);
}

static void pieces_off(void)
{
    dti_p2p_stage_host(0);
    dt_p2p_set_mode(getenv("DT_P2P") && *getenv("DT_P2P") ? getenv("DT_P2P") : "auto");
}

/* The ring allreduce of floats (sums differ with the order of adding: close) and ints
 * (exact), counts that no rank count divides, against MPI_Allreduce. */
START_TEST(test_pc_allreduce)
{
    const int counts[] = { 5 * (int)(PC_PIECE / 4) + 3, 1000003 };
    for (int c = 0; c < 2; c++)
        for (int t = 0; t < 2; t++) {
            int n = counts[c];
            MPI_Datatype type = t ? MPI_INT : MPI_FLOAT;
            size_t es = t ? sizeof(int) : sizeof(float);
            void *x = malloc(n * es), *got = malloc(n * es), *want = malloc(n * es);
            DT_REQUIRE(x && got && want, "out of memory");
            dt_fill_test_data(x, n, type, MPI_SUM, 70 + (unsigned)c, ht_rank);
            dt_allreduce_ring(x, got, n, type, MPI_SUM, MPI_COMM_WORLD);
            HT_MPI(MPI_Iallreduce(x, want, n, type, MPI_SUM, MPI_COMM_WORLD, &ht_req));
            int same = t ? memcmp(got, want, n * es) == 0
                         : dt_check_close(got, want, n, type, 1e-5, NULL, MPI_COMM_SELF);
            HT_EXPECT(same, "ring allreduce of %d %s in staged pieces differs from "
                      "MPI_Allreduce", n, t ? "ints" : "floats");
            free(x);
            free(got);
            free(want);
        }
    HT_VERDICT();
}
END_TEST

/* dt_isend and dt_irecv through request buffers of their own, as device data goes
 * (p2p.c, "nonblocking messages of device data"): under dti_p2p_stage_host host data
 * takes that path. Six messages in flight each way, 0 bytes to three pieces, completed
 * out of order (the odd receives by one dt_waitall, the even ones by dt_test): each
 * one's data in place when it completes; each send buffer overwritten as soon as it is
 * posted (staged, the send has taken its copy); all the sends' buffers free again (the
 * same messages twice, so a buffer kept busy would show as 12 in flight). */
START_TEST(test_pc_nonblocking)
{
    enum { K = 6 };
    const size_t sizes[K] = { 0, 1, 47, 4096, PC_PIECE + 5, 3 * PC_PIECE };
    int right = (ht_rank + 1) % ht_size, left = (ht_rank - 1 + ht_size) % ht_size;
    for (int round = 0; round < 2 && ht_size > 1; round++) {
        unsigned char *s[K], *r[K];
        MPI_Request rq[K], sq[K], odd[K / 2];
        for (int k = 0; k < K; k++) {
            r[k] = landing(sizes[k]);
            rq[k] = dt_irecv(r[k], sizes[k], left, TAG + k, MPI_COMM_WORLD);
        }
        for (int k = 0; k < K; k++) {
            s[k] = landing(sizes[k]);
            fill_pattern(s[k], ht_rank * K + k, sizes[k]);
            sq[k] = dt_isend(s[k], sizes[k], right, TAG + k, MPI_COMM_WORLD);
            memset(s[k], 0xee, sizes[k]);
        }
        for (int j = 0; j < K / 2; j++)
            odd[j] = rq[2 * j + 1];
        dt_waitall(K / 2, odd);
        for (int j = 0; j < K / 2; j++) {
            size_t n = sizes[2 * j + 1];
            HT_EXPECT(check_pattern(r[2 * j + 1], left * K + 2 * j + 1, n) < 0, "round %d: "
                      "message %d (%zu bytes) not in place after its dt_waitall", round,
                      2 * j + 1, n);
        }
        for (int k = 0; k < K; k += 2) {
            while (!dt_test(&rq[k]))
                sched_yield();
            HT_EXPECT(rq[k] == MPI_REQUEST_NULL && check_pattern(r[k], left * K + k,
                      sizes[k]) < 0, "round %d: message %d (%zu bytes) not in place when "
                      "dt_test said it had come", round, k, sizes[k]);
        }
        dt_waitall(K, sq);
        for (int k = 0; k < K; k++) {
            free(s[k]);
            free(r[k]);
        }
    }
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    ht_init(&argc, &argv);

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

    find_hosts();
    TCase *mb = tcase_create("mailbox");
    tcase_add_checked_fixture(mb, ht_setup, NULL);
    tcase_add_test(mb, test_mb_via);
    tcase_add_loop_test(mb, test_mb_ring, 0, 4);
    tcase_add_test(mb, test_mb_inflight);
    tcase_add_test(mb, test_mb_order);
    tcase_add_test(mb, test_mb_any_source);
    tcase_add_test(mb, test_mb_subcomm);
    tcase_add_test(mb, test_mb_threads);
    tcase_add_test(mb, test_mb_isend);
    tcase_add_test(mb, test_mb_set_mode);
    suite_add_tcase(s, mb);

    TCase *pc = tcase_create("pieces");
    tcase_add_checked_fixture(pc, pieces_on, pieces_off);
    tcase_add_loop_test(pc, test_mb_ring, 0, 4);
    tcase_add_test(pc, test_mb_order);
    tcase_add_test(pc, test_mb_any_source);
    tcase_add_test(pc, test_mb_subcomm);
    tcase_add_test(pc, test_mb_threads);
    tcase_add_test(pc, test_pc_allreduce);
    tcase_add_test(pc, test_pc_nonblocking);
    suite_add_tcase(s, pc);

    int rc = ht_run(s);
    free(host_of);
    dt_finalize();
    return rc;
}
