/* Multi-rank tests of the collectives: every dt_ collective against MPI's own.
 *
 * Each rank's input comes from dt_fill_test_data, so it differs per rank and per case,
 * and its values (quarters in [-4, 4], or {+-1/2, +-1, +-2} for products) make every
 * reduction exact in every type whatever the order: dtlab's result must equal MPICH's
 * exactly, not to a tolerance. The cases cover
 *   - counts 0, 1, 2, 3, 7, 13, 97, 1009 and 65537 (counts below the rank count, and
 *     counts that do not divide by it), and 2^20 + 3 for the ring allreduce;
 *   - MPI_FLOAT, MPI_DOUBLE, MPI_INT and DT_HALF (MPI's reference for half reduces with
 *     dt_half_mpi_op), and MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD;
 *   - MPI_IN_PLACE wherever MPI allows it, and roots 0, n-1 and one in the middle;
 *   - communicators other than MPI_COMM_WORLD, numbered backwards;
 *   - the bytes each algorithm sends, which tell the algorithms apart: a "ring" that
 *     secretly ran the naive algorithm would give the right answer, but not the bytes;
 *   - DT_ALLREDUCE_ALGO, dt_allreduce's own choice, and the step hook, whose view of
 *     the ring must show the invariants the comments promise;
 *   - buffers from dt_malloc(.., dt_device()) (the GPU's, where there is one) over
 *     every type and op, and counts whose ring chunks take several 256 KiB segments;
 *   - what MPI lets a caller leave NULL.
 * Receive buffers start poisoned and carry guard bytes after their end; send buffers
 * must come back unchanged. MPI's references run as nonblocking collectives waited for
 * politely (HT_MPI in harness.h): five ranks on two cores stay quick.
 *
 * Every rank runs the same tests in the same order and they agree on every verdict
 * (harness.h), so a failure on one rank fails the test everywhere instead of hanging.
 *
 *   MPIEXEC_TIMEOUT=120 mpiexec -n 5 build/tests/mpi_collectives
 *   CK_RUN_CASE=allreduce ... runs one test case (Check's own variable).
 */
#include <stdint.h>
#include <stdlib.h>
#include "harness.h"

/* ==== cases ==== */

static const int counts[] = { 0, 1, 2, 3, 7, 13, 97, 1009, 65537 };
#define NCOUNTS ((int)(sizeof counts / sizeof counts[0]))
#define LARGE ((1 << 20) + 3)     /* the ring allreduce only */

static MPI_Datatype types[4];     /* set in main: DT_HALF exists after dt_init */
static MPI_Op ops[4];
enum { NT = 4, NO = 4 };

/* What MPI's own collectives reduce half with. */
static MPI_Op mpi_op(int t, int o) { return types[t] == DT_HALF ? dt_half_mpi_op(ops[o]) : ops[o]; }

/* The roots to try: 0, n-1 and the middle, each once. Returns how many. */
static int roots(int n, int *r)
{
    int k = 0;
    r[k++] = 0;
    if (n - 1 != 0) r[k++] = n - 1;
    if (n / 2 != 0 && n / 2 != n - 1) r[k++] = n / 2;
    return k;
}

/* One seed per collective, count, type and op: inputs differ between cases too. */
enum { S_BCAST = 1, S_REDUCE, S_GATHER, S_SCATTER, S_ALLGATHER, S_RSB, S_ALLTOALL, S_MISC };
static unsigned seed(int coll, int ci, int t, int o)
{
    return (unsigned)(coll * 1000 + ci * 16 + t * 4 + o);
}

/* A description of the case for messages. o, root: -1 when they do not apply. */
static const char *what(const char *fn, int t, int o, int count, int root, int inplace)
{
    static char s[200];
    char rs[24] = "";
    if (root >= 0) snprintf(rs, sizeof rs, " root %d", root);
    snprintf(s, sizeof s, "%s(%s%s%s, count %d%s%s) on %d ranks", fn, dt_type_name(types[t]),
             o >= 0 ? ", " : "", o >= 0 ? dt_op_name(ops[o]) : "", count, rs,
             inplace ? ", MPI_IN_PLACE" : "", ht_size);
    return s;
}

/* ==== buffers ==== */

enum { GUARD = 64 };      /* bytes after every buffer that must come back untouched */
#define POISON 0x7f       /* receive buffers start as this: NaN in half, ~3e38 in float */
#define GUARD_BYTE 0xa5

static size_t es(int t) { return dt_type_size(types[t]); }

/* count elements of type t, poisoned, followed by the guard bytes. free() it. */
static void *newbuf(size_t count, int t)
{
    size_t nb = count * es(t);
    unsigned char *p = malloc(nb + GUARD);
    DT_REQUIRE(p != NULL, "out of memory");
    memset(p, POISON, nb);
    memset(p + nb, GUARD_BYTE, GUARD);
    return p;
}

static void *copybuf(const void *src, size_t count, int t)
{
    void *p = newbuf(count, t);
    memcpy(p, src, count * es(t));
    return p;
}

/* This rank's input of count elements for a case (op decides the value set). */
static void *input(size_t count, int t, int o, unsigned sd, int rank)
{
    void *p = newbuf(count, t);
    dt_fill_test_data(p, (int)count, types[t], ops[o < 0 ? 0 : o], sd, rank);
    return p;
}

/* got against want, element by element by value (so +0 equals -0), then the guard. */
static void expect_same(const void *got, const void *want, size_t count, int t, const char *w)
{
    for (size_t i = 0; i < count; i++) {
        double a = dt_elem(got, i, types[t]), b = dt_elem(want, i, types[t]);
        if (a != b) {
            ht_fail("%s: element %zu of %zu is %.9g, want %.9g", w, i, count, a, b);
            return;
        }
    }
}

static void expect_guard(const void *buf, size_t count, int t, const char *w)
{
    const unsigned char *g = (const unsigned char *)buf + count * es(t);
    for (int i = 0; i < GUARD; i++)
        if (g[i] != GUARD_BYTE) {
            ht_fail("%s: wrote past the end of a %zu-element buffer", w, count);
            return;
        }
}

/* A send buffer must come back as it went in. */
static void expect_unchanged(const void *buf, const void *orig, size_t count, int t,
                             const char *w)
{
    if (memcmp(buf, orig, count * es(t)) != 0)
        ht_fail("%s: changed its send buffer", w);
    expect_guard(buf, count, t, w);
}

#define EXPECT_OK(rc, w) HT_EXPECT((rc) == MPI_SUCCESS, "%s returned %d", w, rc)

/* ==== references: MPI's own reductions, kept for the tests that share them ==== */

/* MPI_Allreduce of the S_REDUCE inputs of (count index, type, op): what dt_reduce at any
 * root and every dt_allreduce must produce. Computed on first use; every rank asks in
 * the same order, so the MPI calls match up. */
static void *ref_cache[NCOUNTS][NT][NO];

static const void *ref_reduce(int ci, int t, int o)
{
    if (!ref_cache[ci][t][o]) {
        void *x = input((size_t)counts[ci], t, o, seed(S_REDUCE, ci, t, o), ht_rank);
        void *r = newbuf((size_t)counts[ci], t);
        HT_MPI(MPI_Iallreduce(x, r, counts[ci], types[t], mpi_op(t, o), MPI_COMM_WORLD, &ht_req));
        free(x);
        ref_cache[ci][t][o] = r;
    }
    return ref_cache[ci][t][o];
}

/* ==== one to all, all to one ==== */

typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);

START_TEST(test_bcast)
{
    int ci = _i, c = counts[ci], rs[3], nr = roots(ht_size, rs);
    static const struct { bcast_fn fn; const char *name; } algos[] = {
        { dt_bcast, "dt_bcast" }, { dt_bcast_naive, "dt_bcast_naive" } };
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < nr; k++) {
            int root = rs[k];
            void *mine = input((size_t)c, t, -1, seed(S_BCAST, ci, t, k), ht_rank);
            void *ref = copybuf(mine, (size_t)c, t);
            HT_MPI(MPI_Ibcast(ref, c, types[t], root, MPI_COMM_WORLD, &ht_req));
            for (int a = 0; a < 2; a++) {
                const char *w = what(algos[a].name, t, -1, c, root, 0);
                void *buf = copybuf(mine, (size_t)c, t);
                EXPECT_OK(algos[a].fn(buf, c, types[t], root, MPI_COMM_WORLD), w);
                expect_same(buf, ref, (size_t)c, t, w);
                expect_guard(buf, (size_t)c, t, w);
                free(buf);
            }
            free(mine);
            free(ref);
        }
    HT_VERDICT();
}
END_TEST

START_TEST(test_reduce)
{
    int ci = _i, c = counts[ci], rs[3], nr = roots(ht_size, rs);
    for (int t = 0; t < NT; t++)
        for (int o = 0; o < NO; o++) {
            const void *ref = ref_reduce(ci, t, o);
            void *x = input((size_t)c, t, o, seed(S_REDUCE, ci, t, o), ht_rank);
            for (int k = 0; k < nr; k++)
                for (int ip = 0; ip < 2; ip++) {
                    int root = rs[k], at_root = ht_rank == root;
                    const char *w = what("dt_reduce", t, o, c, root, ip);
                    void *send = copybuf(x, (size_t)c, t), *recv;
                    int rc;
                    if (ip && at_root) {    /* the root's input is in recvbuf */
                        recv = copybuf(x, (size_t)c, t);
                        rc = dt_reduce(MPI_IN_PLACE, recv, c, types[t], ops[o], root,
                                       MPI_COMM_WORLD);
                    } else {
                        recv = newbuf((size_t)c, t);
                        rc = dt_reduce(send, recv, c, types[t], ops[o], root, MPI_COMM_WORLD);
                    }
                    EXPECT_OK(rc, w);
                    if (at_root)
                        expect_same(recv, ref, (size_t)c, t, w);
                    expect_guard(recv, (size_t)c, t, w);
                    expect_unchanged(send, x, (size_t)c, t, w);
                    free(send);
                    free(recv);
                }
            free(x);
        }
    HT_VERDICT();
}
END_TEST

START_TEST(test_gather)
{
    int ci = _i, c = counts[ci], n = ht_size, rs[3], nr = roots(n, rs);
    size_t all = (size_t)n * (size_t)c;
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < nr; k++) {
            int root = rs[k], at_root = ht_rank == root;
            void *x = input((size_t)c, t, -1, seed(S_GATHER, ci, t, k), ht_rank);
            void *ref = newbuf(all, t);
            HT_MPI(MPI_Igather(x, c, types[t], ref, c, types[t], root, MPI_COMM_WORLD, &ht_req));
            for (int ip = 0; ip < 2; ip++) {
                const char *w = what("dt_gather", t, -1, c, root, ip);
                void *send = copybuf(x, (size_t)c, t), *recv = newbuf(all, t);
                int rc;
                if (ip && at_root) {     /* the root's block is already in place */
                    memcpy((char *)recv + (size_t)root * c * es(t), x, (size_t)c * es(t));
                    rc = dt_gather(MPI_IN_PLACE, c, types[t], recv, c, types[t], root,
                                   MPI_COMM_WORLD);
                } else {
                    rc = dt_gather(send, c, types[t], recv, c, types[t], root, MPI_COMM_WORLD);
                }
                EXPECT_OK(rc, w);
                if (at_root)
                    expect_same(recv, ref, all, t, w);
                expect_guard(recv, all, t, w);
                expect_unchanged(send, x, (size_t)c, t, w);
                free(send);
                free(recv);
            }
            free(x);
            free(ref);
        }
    HT_VERDICT();
}
END_TEST

START_TEST(test_scatter)
{
    int ci = _i, c = counts[ci], n = ht_size, rs[3], nr = roots(n, rs);
    size_t all = (size_t)n * (size_t)c;
    for (int t = 0; t < NT; t++)
        for (int k = 0; k < nr; k++) {
            int root = rs[k], at_root = ht_rank == root;
            /* every rank fills a send buffer; only the root's counts */
            void *x = input(all, t, -1, seed(S_SCATTER, ci, t, k), ht_rank);
            void *ref = newbuf((size_t)c, t);
            HT_MPI(MPI_Iscatter(x, c, types[t], ref, c, types[t], root, MPI_COMM_WORLD, &ht_req));
            for (int ip = 0; ip < 2; ip++) {
                const char *w = what("dt_scatter", t, -1, c, root, ip);
                void *send = copybuf(x, all, t), *recv = newbuf((size_t)c, t);
                int rc;
                if (ip && at_root)   /* the root's block stays where it is in sendbuf */
                    rc = dt_scatter(send, c, types[t], MPI_IN_PLACE, c, types[t], root,
                                    MPI_COMM_WORLD);
                else
                    rc = dt_scatter(send, c, types[t], recv, c, types[t], root, MPI_COMM_WORLD);
                EXPECT_OK(rc, w);
                if (!(ip && at_root))
                    expect_same(recv, ref, (size_t)c, t, w);
                expect_guard(recv, (size_t)c, t, w);
                expect_unchanged(send, x, all, t, w);
                free(send);
                free(recv);
            }
            free(x);
            free(ref);
        }
    HT_VERDICT();
}
END_TEST

/* ==== all to all ==== */

START_TEST(test_allgather)
{
    int ci = _i, c = counts[ci], n = ht_size;
    size_t all = (size_t)n * (size_t)c;
    for (int t = 0; t < NT; t++) {
        void *x = input((size_t)c, t, -1, seed(S_ALLGATHER, ci, t, 0), ht_rank);
        void *ref = newbuf(all, t);
        HT_MPI(MPI_Iallgather(x, c, types[t], ref, c, types[t], MPI_COMM_WORLD, &ht_req));
        for (int ip = 0; ip < 2; ip++) {
            const char *w = what("dt_allgather", t, -1, c, -1, ip);
            void *send = copybuf(x, (size_t)c, t), *recv = newbuf(all, t);
            int rc;
            if (ip) {      /* each rank's block is already at its place in recvbuf */
                memcpy((char *)recv + (size_t)ht_rank * c * es(t), x, (size_t)c * es(t));
                rc = dt_allgather(MPI_IN_PLACE, c, types[t], recv, c, types[t], MPI_COMM_WORLD);
            } else {
                rc = dt_allgather(send, c, types[t], recv, c, types[t], MPI_COMM_WORLD);
            }
            EXPECT_OK(rc, w);
            expect_same(recv, ref, all, t, w);
            expect_guard(recv, all, t, w);
            expect_unchanged(send, x, (size_t)c, t, w);
            free(send);
            free(recv);
        }
        free(x);
        free(ref);
    }
    HT_VERDICT();
}
END_TEST

/* count is recvcount: each rank contributes n * count elements and keeps count. */
START_TEST(test_reduce_scatter_block)
{
    int ci = _i, c = counts[ci], n = ht_size;
    size_t all = (size_t)n * (size_t)c;
    for (int t = 0; t < NT; t++)
        for (int o = 0; o < NO; o++) {
            void *x = input(all, t, o, seed(S_RSB, ci, t, o), ht_rank);
            void *ref = newbuf((size_t)c, t);
            HT_MPI(MPI_Ireduce_scatter_block(x, ref, c, types[t], mpi_op(t, o),
                                                  MPI_COMM_WORLD, &ht_req));
            for (int ip = 0; ip < 2; ip++) {
                const char *w = what("dt_reduce_scatter_block", t, o, c, -1, ip);
                void *send = copybuf(x, all, t), *recv;
                int rc;
                if (ip) {    /* the input is in recvbuf; block r is left at its start */
                    recv = copybuf(x, all, t);
                    rc = dt_reduce_scatter_block(MPI_IN_PLACE, recv, c, types[t], ops[o],
                                                 MPI_COMM_WORLD);
                    expect_guard(recv, all, t, w);
                } else {
                    recv = newbuf((size_t)c, t);
                    rc = dt_reduce_scatter_block(send, recv, c, types[t], ops[o],
                                                 MPI_COMM_WORLD);
                    expect_guard(recv, (size_t)c, t, w);
                }
                EXPECT_OK(rc, w);
                expect_same(recv, ref, (size_t)c, t, w);
                expect_unchanged(send, x, all, t, w);
                free(send);
                free(recv);
            }
            free(x);
            free(ref);
        }
    HT_VERDICT();
}
END_TEST

START_TEST(test_alltoall)
{
    int ci = _i, c = counts[ci], n = ht_size;
    size_t all = (size_t)n * (size_t)c;
    for (int t = 0; t < NT; t++) {
        void *x = input(all, t, -1, seed(S_ALLTOALL, ci, t, 0), ht_rank);
        void *ref = newbuf(all, t);
        HT_MPI(MPI_Ialltoall(x, c, types[t], ref, c, types[t], MPI_COMM_WORLD, &ht_req));
        for (int ip = 0; ip < 2; ip++) {
            const char *w = what("dt_alltoall", t, -1, c, -1, ip);
            void *send = copybuf(x, all, t), *recv;
            int rc;
            if (ip) {      /* the blocks are taken from recvbuf and replaced */
                recv = copybuf(x, all, t);
                rc = dt_alltoall(MPI_IN_PLACE, c, types[t], recv, c, types[t], MPI_COMM_WORLD);
            } else {
                recv = newbuf(all, t);
                rc = dt_alltoall(send, c, types[t], recv, c, types[t], MPI_COMM_WORLD);
            }
            EXPECT_OK(rc, w);
            expect_same(recv, ref, all, t, w);
            expect_guard(recv, all, t, w);
            expect_unchanged(send, x, all, t, w);
            free(send);
            free(recv);
        }
        free(x);
        free(ref);
    }
    HT_VERDICT();
}
END_TEST

/* ==== allreduce ==== */

typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);
static const struct { allreduce_fn fn; const char *name; const char *env; } ar_algos[] = {
    { dt_allreduce, "dt_allreduce", NULL },
    { dt_allreduce_ring, "dt_allreduce_ring", "ring" },
    { dt_allreduce_naive, "dt_allreduce_naive", "naive" },
    { dt_allreduce_rd, "dt_allreduce_rd", "rd" } };
enum { NALGO = 4 };

/* One allreduce case: not in place and in place, against ref. */
static void allreduce_case(int a, int c, int t, int o, const void *x, const void *ref)
{
    for (int ip = 0; ip < 2; ip++) {
        const char *w = what(ar_algos[a].name, t, o, c, -1, ip);
        void *send = copybuf(x, (size_t)c, t), *recv;
        int rc;
        if (ip) {
            recv = copybuf(x, (size_t)c, t);
            rc = ar_algos[a].fn(MPI_IN_PLACE, recv, c, types[t], ops[o], MPI_COMM_WORLD);
        } else {
            recv = newbuf((size_t)c, t);
            rc = ar_algos[a].fn(send, recv, c, types[t], ops[o], MPI_COMM_WORLD);
        }
        EXPECT_OK(rc, w);
        expect_same(recv, ref, (size_t)c, t, w);
        expect_guard(recv, (size_t)c, t, w);
        expect_unchanged(send, x, (size_t)c, t, w);
        free(send);
        free(recv);
    }
}

/* _i = count index * NALGO + algorithm */
START_TEST(test_allreduce)
{
    int ci = _i / NALGO, a = _i % NALGO, c = counts[ci];
    for (int t = 0; t < NT; t++)
        for (int o = 0; o < NO; o++) {
            const void *ref = ref_reduce(ci, t, o);
            void *x = input((size_t)c, t, o, seed(S_REDUCE, ci, t, o), ht_rank);
            allreduce_case(a, c, t, o, x, ref);
            free(x);
        }
    HT_VERDICT();
}
END_TEST

/* A megabyte and more through the ring: chunks far larger than any eager limit. */
START_TEST(test_allreduce_large)
{
    static const int cases[][2] = { { 0, 0 } /* float sum */, { 3, 0 } /* half sum */,
                                    { 1, 1 } /* double max */, { 2, 3 } /* int prod */ };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int t = cases[k][0], o = cases[k][1];
        void *x = input(LARGE, t, o, seed(S_MISC, 0, t, o), ht_rank);
        void *ref = newbuf(LARGE, t);
        HT_MPI(MPI_Iallreduce(x, ref, LARGE, types[t], mpi_op(t, o), MPI_COMM_WORLD, &ht_req));
        allreduce_case(1, LARGE, t, o, x, ref);
        free(x);
        free(ref);
    }
    HT_VERDICT();
}
END_TEST

/* ==== bytes: what each algorithm sends tells it apart ==== */

/* Runs fn and notes a failure unless this rank sent and received exactly what the
 * algorithm's description says. */
#define EXPECT_BYTES(call, sent_want, recv_want, w) do { \
        dt_bytes_reset(); \
        EXPECT_OK(call, w); \
        size_t s_ = dt_bytes_sent(), r_ = dt_bytes_received(); \
        HT_EXPECT(s_ == (size_t)(sent_want) && r_ == (size_t)(recv_want), "%s: rank %d sent " \
                  "%zu bytes and received %zu; the algorithm sends %zu and receives %zu", \
                  w, ht_rank, s_, r_, (size_t)(sent_want), (size_t)(recv_want)); \
    } while (0)

/* The ring allreduce's bytes on this rank: the chunks it sends in the reduce-scatter and
 * in the allgather, cut by dt_chunk_bounds; received likewise. */
static void ring_bytes(int count, int n, int rank, size_t esize, size_t *sent, size_t *recvd)
{
    *sent = *recvd = 0;
    for (int s = 0; s < n - 1; s++) {
        size_t lo, hi;
        dt_chunk_bounds((size_t)count, n, dt_ring_rs_send_chunk(rank, n, s), &lo, &hi);
        *sent += (hi - lo) * esize;
        dt_chunk_bounds((size_t)count, n, dt_ring_ag_send_chunk(rank, n, s), &lo, &hi);
        *sent += (hi - lo) * esize;
        dt_chunk_bounds((size_t)count, n, dt_ring_rs_recv_chunk(rank, n, s), &lo, &hi);
        *recvd += (hi - lo) * esize;
        dt_chunk_bounds((size_t)count, n, dt_ring_ag_recv_chunk(rank, n, s), &lo, &hi);
        *recvd += (hi - lo) * esize;
    }
}

/* Recursive doubling: log2 p exchanges of the whole buffer, plus the fold. */
static size_t rd_bytes(int n, int rank, size_t nbytes)
{
    if (n == 1) return 0;
    if (dt_rd_vrank(rank, n) < 0) return nbytes;            /* hands over, gets back */
    return (size_t)dt_rd_steps(n) * nbytes + (dt_rd_fold_peer(rank, n) >= 0 ? nbytes : 0);
}

START_TEST(test_bytes)
{
    int n = ht_size, r = ht_rank, c = 97, b = 13;          /* count; block of a block op */
    size_t e = sizeof(float), nb = (size_t)c * e, blk = (size_t)b * e;
    float *x = input((size_t)n * c, 0, 0, seed(S_MISC, 1, 0, 0), r);
    float *y = newbuf((size_t)n * c, 0);
    const char *w;
    int rs[3], nr = roots(n, rs);
    for (int k = 0; k < nr; k++) {
        int root = rs[k], ch[32], nch = dt_tree_children(r, root, n, ch);
        int sub = dt_tree_subtree_size(r, root, n), me_root = r == root;
        w = what("dt_bcast", 0, -1, c, root, 0);
        EXPECT_BYTES(dt_bcast(y, c, MPI_FLOAT, root, MPI_COMM_WORLD),
                     nch * nb, me_root ? 0 : nb, w);
        w = what("dt_bcast_naive", 0, -1, c, root, 0);
        EXPECT_BYTES(dt_bcast_naive(y, c, MPI_FLOAT, root, MPI_COMM_WORLD),
                     me_root ? (n - 1) * nb : 0, me_root ? 0 : nb, w);
        w = what("dt_reduce", 0, 0, c, root, 0);
        EXPECT_BYTES(dt_reduce(x, y, c, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD),
                     me_root ? 0 : nb, nch * nb, w);
        w = what("dt_gather", 0, -1, b, root, 0);
        EXPECT_BYTES(dt_gather(x, b, MPI_FLOAT, y, b, MPI_FLOAT, root, MPI_COMM_WORLD),
                     me_root ? 0 : sub * blk, (sub - 1) * blk, w);
        w = what("dt_scatter", 0, -1, b, root, 0);
        EXPECT_BYTES(dt_scatter(x, b, MPI_FLOAT, y, b, MPI_FLOAT, root, MPI_COMM_WORLD),
                     (sub - 1) * blk, me_root ? 0 : sub * blk, w);
    }
    w = what("dt_allgather", 0, -1, b, -1, 0);
    EXPECT_BYTES(dt_allgather(x, b, MPI_FLOAT, y, b, MPI_FLOAT, MPI_COMM_WORLD),
                 (n - 1) * blk, (n - 1) * blk, w);
    w = what("dt_reduce_scatter_block", 0, 0, b, -1, 0);
    EXPECT_BYTES(dt_reduce_scatter_block(x, y, b, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                 (n - 1) * blk, (n - 1) * blk, w);
    w = what("dt_alltoall", 0, -1, b, -1, 0);
    EXPECT_BYTES(dt_alltoall(x, b, MPI_FLOAT, y, b, MPI_FLOAT, MPI_COMM_WORLD),
                 (n - 1) * blk, (n - 1) * blk, w);
    size_t rsent, rrecv;
    ring_bytes(c, n, r, e, &rsent, &rrecv);
    w = what("dt_allreduce_ring", 0, 0, c, -1, 0);
    EXPECT_BYTES(dt_allreduce_ring(x, y, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), rsent, rrecv, w);
    w = what("dt_allreduce_rd", 0, 0, c, -1, 0);
    EXPECT_BYTES(dt_allreduce_rd(x, y, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                 rd_bytes(n, r, nb), rd_bytes(n, r, nb), w);
    w = what("dt_allreduce_naive", 0, 0, c, -1, 0);
    EXPECT_BYTES(dt_allreduce_naive(x, y, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                 r == 0 ? (n - 1) * nb : (n > 1 ? nb : 0), r == 0 ? (n - 1) * nb : nb, w);
    free(x);
    free(y);
    HT_VERDICT();
}
END_TEST

/* DT_ALLREDUCE_ALGO forces an algorithm (read on every call), and without it dt_allreduce
 * takes recursive doubling for small buffers and the ring for large ones. Told apart by
 * their bytes, which differ from 3 ranks on (at 2 every algorithm sends the same). */
static size_t sent_by(allreduce_fn fn, const void *x, void *y, int c)
{
    dt_bytes_reset();
    EXPECT_OK(fn(x, y, c, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "allreduce");
    return dt_bytes_sent();
}

START_TEST(test_allreduce_choice)
{
    int small = 100, big = 2 * DT_ALLREDUCE_RD_MAX / (int)sizeof(float) + 1;
    float *x = input((size_t)big, 0, 0, seed(S_MISC, 2, 0, 0), ht_rank);
    float *y = newbuf((size_t)big, 0), *ref = newbuf((size_t)big, 0);
    HT_MPI(MPI_Iallreduce(x, ref, big, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &ht_req));
    const char *saved = getenv("DT_ALLREDUCE_ALGO");
    char keep[32] = "";
    if (saved) snprintf(keep, sizeof keep, "%s", saved);
    for (int a = 1; a < NALGO; a++) {
        for (int sz = 0; sz < 2; sz++) {
            int c = sz ? big : small;
            size_t direct = sent_by(ar_algos[a].fn, x, y, c);
            setenv("DT_ALLREDUCE_ALGO", ar_algos[a].env, 1);
            size_t forced = sent_by(dt_allreduce, x, y, c);
            unsetenv("DT_ALLREDUCE_ALGO");
            HT_EXPECT(forced == direct, "DT_ALLREDUCE_ALGO=%s, count %d: dt_allreduce sent %zu "
                      "bytes from rank %d, %s sends %zu", ar_algos[a].env, c, forced, ht_rank,
                      ar_algos[a].name, direct);
        }
    }
    /* The forced algorithm's result, in place, against MPI's. */
    for (int a = 1; a < NALGO; a++) {
        setenv("DT_ALLREDUCE_ALGO", ar_algos[a].env, 1);
        memcpy(y, x, (size_t)big * sizeof(float));
        EXPECT_OK(dt_allreduce(MPI_IN_PLACE, y, big, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "");
        unsetenv("DT_ALLREDUCE_ALGO");
        expect_same(y, ref, (size_t)big, 0, what("dt_allreduce forced", 0, 0, big, -1, 1));
    }
    /* dtlab's own choice: rd below DT_ALLREDUCE_RD_MAX bytes, the ring above. */
    size_t auto_small = sent_by(dt_allreduce, x, y, small);
    size_t rd_small = sent_by(dt_allreduce_rd, x, y, small);
    size_t auto_big = sent_by(dt_allreduce, x, y, big);
    size_t ring_big = sent_by(dt_allreduce_ring, x, y, big);
    HT_EXPECT(auto_small == rd_small, "dt_allreduce of %d floats sent %zu bytes from rank %d, "
              "recursive doubling sends %zu", small, auto_small, ht_rank, rd_small);
    HT_EXPECT(auto_big == ring_big, "dt_allreduce of %d floats sent %zu bytes from rank %d, the "
              "ring sends %zu", big, auto_big, ht_rank, ring_big);
    if (saved) setenv("DT_ALLREDUCE_ALGO", keep, 1);
    free(x);
    free(y);
    free(ref);
    HT_VERDICT();
}
END_TEST

/* ==== the step hook ==== */

/* What the hook saw during one ring allreduce of ints (sums are exact in any order). */
typedef struct {
    int n, rank, count, calls;
    const int *const *data;     /* every rank's input, regenerated here */
    const void *buf;            /* the buffer the collective works on */
    char phase0[32];
} ring_watch;

/* Checks, after every step, the invariants allreduce.c and schedule.h state: after
 * reduce-scatter step s the chunk this rank received holds the sum of s+2 ranks' data,
 * those of this rank and the s+1 to its left; after allgather step s the chunk received
 * holds the full sum. */
static void ring_hook(const char *coll, const char *phase, int step, const void *buf,
                      int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)comm;
    ring_watch *rw = ctx;
    int n = rw->n, r = rw->rank, k = rw->calls++;
    int rs = k < n - 1, s = rs ? k : k - (n - 1);
    if (strcmp(coll, "allreduce_ring") != 0 || type != MPI_INT || count != rw->count ||
        buf != rw->buf) {
        ht_fail("ring hook call %d: coll \"%s\", count %d, %s buffer; want allreduce_ring, "
                "%d, recvbuf", k, coll, count, buf == rw->buf ? "the" : "another", rw->count);
        return;
    }
    if (k == 0) snprintf(rw->phase0, sizeof rw->phase0, "%s", phase);
    if (step != s || (strcmp(phase, rw->phase0) == 0) != rs) {
        ht_fail("ring hook call %d: phase \"%s\" step %d; want step %d of the %s", k, phase,
                step, s, rs ? "first phase" : "second phase");
        return;
    }
    int chunk = rs ? dt_ring_rs_recv_chunk(r, n, s) : dt_ring_ag_recv_chunk(r, n, s);
    int ranks = rs ? s + 2 : n;
    size_t lo, hi;
    dt_chunk_bounds((size_t)count, n, chunk, &lo, &hi);
    const int *got = buf;
    for (size_t i = lo; i < hi; i++) {
        int want = 0;
        for (int j = 0; j < ranks; j++) want += rw->data[(r - j + n) % n][i];
        if (got[i] != want) {
            ht_fail("ring allreduce of %d ints on %d ranks, %s step %d: element %zu of chunk "
                    "%d is %d, want %d (the sum over %d ranks ending at rank %d)", count, n,
                    phase, s, i, chunk, got[i], want, ranks, r);
            return;
        }
    }
}

START_TEST(test_hook_ring)
{
    static const int cs[] = { 2, 13, 1009 };
    int n = ht_size;
    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
        for (int ip = 0; ip < 2; ip++) {
            int c = cs[k];
            int **data = malloc(sizeof(int *) * (size_t)n);
            for (int q = 0; q < n; q++)
                data[q] = input((size_t)c, 2, 0, seed(S_MISC, 3, (int)k, 0), q);
            int *recv = ip ? copybuf(data[ht_rank], (size_t)c, 2) : newbuf((size_t)c, 2);
            ring_watch rw = { n, ht_rank, c, 0, (const int *const *)data, recv, "" };
            dt_set_step_hook(ring_hook, &rw);
            EXPECT_OK(dt_allreduce_ring(ip ? MPI_IN_PLACE : data[ht_rank], recv, c, MPI_INT,
                                        MPI_SUM, MPI_COMM_WORLD), "dt_allreduce_ring");
            dt_set_step_hook(NULL, NULL);
            HT_EXPECT(rw.calls == 2 * (n - 1), "ring allreduce of %d on %d ranks called the "
                      "hook %d times, want 2(n-1) = %d", c, n, rw.calls, 2 * (n - 1));
            EXPECT_OK(dt_allreduce_ring(data[ht_rank], recv, c, MPI_INT, MPI_SUM,
                                        MPI_COMM_WORLD), "dt_allreduce_ring");
            HT_EXPECT(rw.calls == 2 * (n - 1), "the hook was called after it was removed");
            for (int q = 0; q < n; q++) free(data[q]);
            free(data);
            free(recv);
        }
    HT_VERDICT();
}
END_TEST

/* Every rank sees the same steps of every collective (so a hook may communicate, as
 * lesson 08's does): a hash of (coll, phase, step) in call order must agree. */
static void hash_hook(const char *coll, const char *phase, int step, const void *buf,
                      int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)buf; (void)count; (void)type; (void)comm;
    uint64_t *h = ctx;
    for (const char *p = coll; *p; p++) *h = (*h ^ (unsigned char)*p) * 0x100000001b3ull;
    for (const char *p = phase; *p; p++) *h = (*h ^ (unsigned char)*p) * 0x100000001b3ull;
    *h = (*h ^ (uint64_t)(step + 7)) * 0x100000001b3ull;
}

/* A hook that talks: MPI_Allreduce of the step on comm, as a lesson might. */
static void talking_hook(const char *coll, const char *phase, int step, const void *buf,
                         int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)coll; (void)phase; (void)buf; (void)count; (void)type;
    int mine = step, most = 0;
    HT_MPI(MPI_Iallreduce(&mine, &most, 1, MPI_INT, MPI_MAX, comm, &ht_req));
    if (most != step) (*(int *)ctx)++;
}

/* Runs every collective once (root 1 where there is one) with the hook set. */
static void run_all_collectives(const float *x, float *y, int c)
{
    int root = ht_size > 1 ? 1 : 0;
    MPI_Comm w = MPI_COMM_WORLD;
    memcpy(y, x, (size_t)c * sizeof(float));
    dt_bcast(y, c, MPI_FLOAT, root, w);
    dt_bcast_naive(y, c, MPI_FLOAT, root, w);
    dt_reduce(x, y, c, MPI_FLOAT, MPI_SUM, root, w);
    dt_gather(x, c, MPI_FLOAT, y, c, MPI_FLOAT, root, w);
    dt_scatter(x, c, MPI_FLOAT, y, c, MPI_FLOAT, root, w);
    dt_allgather(x, c, MPI_FLOAT, y, c, MPI_FLOAT, w);
    dt_reduce_scatter_block(x, y, c, MPI_FLOAT, MPI_SUM, w);
    dt_alltoall(x, c, MPI_FLOAT, y, c, MPI_FLOAT, w);
    for (int a = 0; a < NALGO; a++)
        ar_algos[a].fn(x, y, c, MPI_FLOAT, MPI_SUM, w);
}

START_TEST(test_hook_same_steps)
{
    int c = 13, n = ht_size;
    float *x = input((size_t)n * c, 0, 0, seed(S_MISC, 4, 0, 0), ht_rank);
    float *y = newbuf((size_t)n * c, 0);
    uint64_t h = 0xcbf29ce484222325ull, h0 = 0, h1 = 0;
    dt_set_step_hook(hash_hook, &h);
    run_all_collectives(x, y, c);
    dt_set_step_hook(NULL, NULL);
    HT_MPI(MPI_Iallreduce(&h, &h0, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD, &ht_req));
    HT_MPI(MPI_Iallreduce(&h, &h1, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD, &ht_req));
    HT_EXPECT(h0 == h1, "the ranks saw different step sequences through the hook (some "
              "collective reports a step on some ranks only)");
    /* Only if they agree is it safe to let the hook communicate. */
    if (ht_agree(h0 == h1)) {
        int odd = 0;
        dt_set_step_hook(talking_hook, &odd);
        run_all_collectives(x, y, c);
        dt_set_step_hook(NULL, NULL);
        HT_EXPECT(odd == 0, "a communicating hook saw different steps on different ranks");
    }
    free(x);
    free(y);
    HT_VERDICT();
}
END_TEST

/* A hook that runs dtlab collectives itself, on buffers larger than its caller's: they
 * need more scratch than the caller holds, and must take it from their own slots, not
 * grow (and so free) the caller's under it (internal.h, dti_scratch_nest). ctx counts
 * wrong results. Integer sums: exact, whatever the order. */
enum { NEST_COUNT = 4099 };
static void nesting_hook(const char *coll, const char *phase, int step, const void *buf,
                         int count, MPI_Datatype type, MPI_Comm comm, void *ctx)
{
    (void)coll; (void)phase; (void)step; (void)buf; (void)count; (void)type;
    int r, n, c = NEST_COUNT, *bad = ctx;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &n);
    int *x = malloc(sizeof(int) * n * c), *y = malloc(sizeof(int) * n * c);
    DT_REQUIRE(x && y, "out of memory");
    for (int i = 0; i < n * c; i++)
        x[i] = 7 * r + i;                  /* summed over ranks: 7 n(n-1)/2 + n i */
    int base = 7 * n * (n - 1) / 2;
    for (int a = 0; a < NALGO; a++) {
        ar_algos[a].fn(x, y, c, MPI_INT, MPI_SUM, comm);
        for (int i = 0; i < c; i++)
            *bad += y[i] != base + n * i;
    }
    dt_reduce_scatter_block(x, y, c, MPI_INT, MPI_SUM, comm);
    for (int i = 0; i < c; i++)
        *bad += y[i] != base + n * (r * c + i);
    dt_gather(x, c, MPI_INT, y, c, MPI_INT, n - 1, comm);
    for (int i = 0; r == n - 1 && i < n * c; i++)
        *bad += y[i] != 7 * (i / c) + i % c;
    free(x);
    free(y);
}

/* The collectives with scratch, each with that hook set, against MPI's results. */
START_TEST(test_hook_nested)
{
    int c = 13, n = ht_size, r = ht_rank, bad = 0, root = n - 1;
    int *x = malloc(sizeof(int) * n * c), *y = malloc(sizeof(int) * n * c);
    int *ref = malloc(sizeof(int) * n * c);
    DT_REQUIRE(x && y && ref, "out of memory");
    for (int i = 0; i < n * c; i++)
        x[i] = 1000 * r - 3 * i;
    MPI_Comm w = MPI_COMM_WORLD;
    char what_[96];

    HT_MPI(MPI_Iallreduce(x, ref, c, MPI_INT, MPI_SUM, w, &ht_req));
    for (int a = 0; a < NALGO; a++) {
        snprintf(what_, sizeof what_, "%s with a hook that runs collectives", ar_algos[a].name);
        dt_set_step_hook(nesting_hook, &bad);
        ar_algos[a].fn(x, y, c, MPI_INT, MPI_SUM, w);
        dt_set_step_hook(NULL, NULL);
        HT_EXPECT(memcmp(y, ref, sizeof(int) * c) == 0, "%s: wrong result", what_);
    }
    HT_MPI(MPI_Ireduce_scatter_block(x, ref, c, MPI_INT, MPI_SUM, w, &ht_req));
    dt_set_step_hook(nesting_hook, &bad);
    dt_reduce_scatter_block(x, y, c, MPI_INT, MPI_SUM, w);
    dt_set_step_hook(NULL, NULL);
    HT_EXPECT(memcmp(y, ref, sizeof(int) * c) == 0,
              "dt_reduce_scatter_block with a hook that runs collectives: wrong result");
    HT_MPI(MPI_Ireduce(x, ref, c, MPI_INT, MPI_SUM, root, w, &ht_req));
    dt_set_step_hook(nesting_hook, &bad);
    dt_reduce(x, y, c, MPI_INT, MPI_SUM, root, w);
    dt_set_step_hook(NULL, NULL);
    HT_EXPECT(r != root || memcmp(y, ref, sizeof(int) * c) == 0,
              "dt_reduce with a hook that runs collectives: wrong result");
    HT_MPI(MPI_Igather(x, c, MPI_INT, ref, c, MPI_INT, root, w, &ht_req));
    dt_set_step_hook(nesting_hook, &bad);
    dt_gather(x, c, MPI_INT, y, c, MPI_INT, root, w);
    dt_set_step_hook(NULL, NULL);
    HT_EXPECT(r != root || memcmp(y, ref, sizeof(int) * n * c) == 0,
              "dt_gather with a hook that runs collectives: wrong result");
    HT_EXPECT(bad == 0, "the collectives run by a hook got %d elements wrong", bad);
    free(x);
    free(y);
    free(ref);
    HT_VERDICT();
}
END_TEST

/* ==== other communicators ==== */

/* Two halves of the world (even and odd ranks), each numbered backwards: a collective
 * that used MPI_COMM_WORLD or dt_rank() where it should use comm gets it wrong here. */
START_TEST(test_subcomm)
{
    MPI_Comm sub;
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, ht_rank % 2, ht_size - ht_rank, &sub));
    int r, n;
    MPI_Comm_rank(sub, &r);
    MPI_Comm_size(sub, &n);
    static const int cs[] = { 3, 97 };
    for (size_t k = 0; k < 2; k++) {
        int c = cs[k], t = 0, root = n - 1;
        size_t all = (size_t)n * c;
        char w[96];
        float *x = input(all, t, 0, seed(S_MISC, 5, (int)k, 0), ht_rank);
        float *ref = newbuf(all, t), *y = newbuf(all, t);
        /* allreduce, every algorithm */
        HT_MPI(MPI_Iallreduce(x, ref, c, MPI_FLOAT, MPI_SUM, sub, &ht_req));
        for (int a = 0; a < NALGO; a++) {
            snprintf(w, sizeof w, "%s on a split communicator, count %d", ar_algos[a].name, c);
            EXPECT_OK(ar_algos[a].fn(x, y, c, MPI_FLOAT, MPI_SUM, sub), w);
            expect_same(y, ref, (size_t)c, t, w);
        }
        snprintf(w, sizeof w, "dt_reduce on a split communicator, count %d", c);
        EXPECT_OK(dt_reduce(x, y, c, MPI_FLOAT, MPI_SUM, root, sub), w);
        if (r == root) expect_same(y, ref, (size_t)c, t, w);
        /* bcast */
        memcpy(ref, x, (size_t)c * sizeof(float));
        HT_MPI(MPI_Ibcast(ref, c, MPI_FLOAT, root, sub, &ht_req));
        memcpy(y, x, (size_t)c * sizeof(float));
        snprintf(w, sizeof w, "dt_bcast on a split communicator, count %d", c);
        EXPECT_OK(dt_bcast(y, c, MPI_FLOAT, root, sub), w);
        expect_same(y, ref, (size_t)c, t, w);
        memcpy(y, x, (size_t)c * sizeof(float));
        snprintf(w, sizeof w, "dt_bcast_naive on a split communicator, count %d", c);
        EXPECT_OK(dt_bcast_naive(y, c, MPI_FLOAT, root, sub), w);
        expect_same(y, ref, (size_t)c, t, w);
        /* gather, scatter, allgather, reduce-scatter, alltoall */
        HT_MPI(MPI_Igather(x, c, MPI_FLOAT, ref, c, MPI_FLOAT, root, sub, &ht_req));
        snprintf(w, sizeof w, "dt_gather on a split communicator, count %d", c);
        EXPECT_OK(dt_gather(x, c, MPI_FLOAT, y, c, MPI_FLOAT, root, sub), w);
        if (r == root) expect_same(y, ref, all, t, w);
        HT_MPI(MPI_Iscatter(x, c, MPI_FLOAT, ref, c, MPI_FLOAT, root, sub, &ht_req));
        snprintf(w, sizeof w, "dt_scatter on a split communicator, count %d", c);
        EXPECT_OK(dt_scatter(x, c, MPI_FLOAT, y, c, MPI_FLOAT, root, sub), w);
        expect_same(y, ref, (size_t)c, t, w);
        HT_MPI(MPI_Iallgather(x, c, MPI_FLOAT, ref, c, MPI_FLOAT, sub, &ht_req));
        snprintf(w, sizeof w, "dt_allgather on a split communicator, count %d", c);
        EXPECT_OK(dt_allgather(x, c, MPI_FLOAT, y, c, MPI_FLOAT, sub), w);
        expect_same(y, ref, all, t, w);
        HT_MPI(MPI_Ireduce_scatter_block(x, ref, c, MPI_FLOAT, MPI_SUM, sub, &ht_req));
        snprintf(w, sizeof w, "dt_reduce_scatter_block on a split communicator, count %d", c);
        EXPECT_OK(dt_reduce_scatter_block(x, y, c, MPI_FLOAT, MPI_SUM, sub), w);
        expect_same(y, ref, (size_t)c, t, w);
        HT_MPI(MPI_Ialltoall(x, c, MPI_FLOAT, ref, c, MPI_FLOAT, sub, &ht_req));
        snprintf(w, sizeof w, "dt_alltoall on a split communicator, count %d", c);
        EXPECT_OK(dt_alltoall(x, c, MPI_FLOAT, y, c, MPI_FLOAT, sub), w);
        expect_same(y, ref, all, t, w);
        free(x);
        free(ref);
        free(y);
    }
    MPI_Comm_free(&sub);
    HT_VERDICT();
}
END_TEST

/* ==== device buffers ==== */

/* A copy of count elements of a host buffer where this rank's data lives, dt_device():
 * on the GPU where there is one, else host memory, so the same test runs on the CPU
 * (dt_malloc'ed; dt_free it). */
static void *to_dev(const void *host, size_t count, int t)
{
    void *d = dt_malloc(count * es(t) + 1, dt_device());
    dt_memcpy(d, host, count * es(t));
    return d;
}

/* Compares a device result with a host reference, and frees the device buffer. */
static void expect_dev(void *dev, const void *want, size_t count, int t, const char *w)
{
    void *h = newbuf(count, t);
    dt_memcpy(h, dev, count * es(t));
    expect_same(h, want, count, t, w);
    free(h);
    dt_free(dev);
}

/* The ring reduce-scatter (under every ring allreduce and dt_reduce_scatter_block) moves
 * a chunk in segments of 256 KiB (lib/collectives/reduce_scatter.c): a chunk of this
 * many elements of type t takes two whole segments and a piece of a third. */
static int three_segments(int t) { return (int)(2 * ((size_t)256 * 1024 / es(t)) + 3); }

/* Every collective on buffers from dt_malloc(.., dt_device()) (on a GPU: staged through
 * p2p's pinned buffers, reduced by the CUDA kernels) against MPI on host copies, for
 * type _i and every op, at counts 13 and 65537 and, for dt_reduce_scatter_block,
 * dt_reduce and the ring allreduces (dt_allreduce picks it there), a count whose ring
 * chunks take three segments each. Without a GPU the same on host buffers; a note says
 * so (scripts/gpu-check.sh fails a GPU run that prints it). */
START_TEST(test_device)
{
    int t = _i;
    if (!ht_agree(dt_device() == DT_CUDA) && ht_rank == 0 && t == 0)
        printf("mpi_collectives: not every rank has a GPU; 'device' buffers are host "
               "buffers\n");
    int n = ht_size, root = n - 1, at_root = ht_rank == root;
    const int cs[] = { 13, 65537, three_segments(t) };
    char w[240];
    for (int k = 0; k < 3; k++)
        for (int o = 0; o < (k < 2 ? NO : 1); o++) {   /* pieces: one op is enough */
            /* the reductions: allreduce counts c, reduce-scatter chunks of c */
            int c = k < 2 ? cs[k] : n * cs[k], rc = cs[k];
            unsigned sd = seed(S_MISC, 20 + k, t, o);
            void *x = input((size_t)c, t, o, sd, ht_rank), *ref = newbuf((size_t)c, t);
            HT_MPI(MPI_Iallreduce(x, ref, c, types[t], mpi_op(t, o), MPI_COMM_WORLD,
                                  &ht_req));
            for (int a = 0; a < (k < 2 ? NALGO : 2); a++)   /* segments: the rings */
                for (int ip = 0; ip < 2; ip++) {
                    snprintf(w, sizeof w, "%s on the device",
                             what(ar_algos[a].name, t, o, c, -1, ip));
                    void *s = to_dev(x, (size_t)c, t), *r = to_dev(x, (size_t)c, t);
                    EXPECT_OK(ar_algos[a].fn(ip ? MPI_IN_PLACE : s, r, c, types[t], ops[o],
                                             MPI_COMM_WORLD), w);
                    expect_dev(r, ref, (size_t)c, t, w);
                    dt_free(s);
                }
            snprintf(w, sizeof w, "%s on the device", what("dt_reduce", t, o, c, root, 0));
            void *s = to_dev(x, (size_t)c, t), *r = to_dev(x, (size_t)c, t);
            EXPECT_OK(dt_reduce(s, r, c, types[t], ops[o], root, MPI_COMM_WORLD), w);
            if (at_root) expect_dev(r, ref, (size_t)c, t, w); else dt_free(r);
            dt_free(s);
            free(x);
            free(ref);

            size_t all = (size_t)n * rc;
            x = input(all, t, o, sd + 7, ht_rank);
            ref = newbuf((size_t)rc, t);
            HT_MPI(MPI_Ireduce_scatter_block(x, ref, rc, types[t], mpi_op(t, o),
                                             MPI_COMM_WORLD, &ht_req));
            for (int ip = 0; ip < 2; ip++) {
                snprintf(w, sizeof w, "%s on the device",
                         what("dt_reduce_scatter_block", t, o, rc, -1, ip));
                s = to_dev(x, all, t);
                r = to_dev(x, ip ? all : (size_t)rc, t);
                EXPECT_OK(dt_reduce_scatter_block(ip ? MPI_IN_PLACE : s, ip ? s : r, rc,
                                                  types[t], ops[o], MPI_COMM_WORLD), w);
                expect_dev(ip ? s : r, ref, (size_t)rc, t, w);
                dt_free(ip ? r : s);
            }
            free(x);
            free(ref);
        }

    /* the others move data without reducing it: each count once, against MPI's href */
    for (int k = 0; k < 2; k++) {
        int c = cs[k];
        size_t all = (size_t)n * c;
        void *x = input(all, t, -1, seed(S_MISC, 24 + k, t, 0), ht_rank);
        void *href = newbuf(all, t), *s, *r;

        HT_MPI(MPI_Ibcast(memcpy(href, x, (size_t)c * es(t)), c, types[t], root,
                          MPI_COMM_WORLD, &ht_req));
        snprintf(w, sizeof w, "%s on the device", what("dt_bcast", t, -1, c, root, 0));
        r = to_dev(x, (size_t)c, t);
        EXPECT_OK(dt_bcast(r, c, types[t], root, MPI_COMM_WORLD), w);
        expect_dev(r, href, (size_t)c, t, w);
        snprintf(w, sizeof w, "%s on the device", what("dt_bcast_naive", t, -1, c, root, 0));
        r = to_dev(x, (size_t)c, t);
        EXPECT_OK(dt_bcast_naive(r, c, types[t], root, MPI_COMM_WORLD), w);
        expect_dev(r, href, (size_t)c, t, w);

        HT_MPI(MPI_Igather(x, c, types[t], href, c, types[t], root, MPI_COMM_WORLD,
                           &ht_req));
        snprintf(w, sizeof w, "%s on the device", what("dt_gather", t, -1, c, root, 0));
        s = to_dev(x, (size_t)c, t);
        r = to_dev(x, all, t);
        EXPECT_OK(dt_gather(s, c, types[t], r, c, types[t], root, MPI_COMM_WORLD), w);
        if (at_root) expect_dev(r, href, all, t, w); else dt_free(r);
        dt_free(s);

        HT_MPI(MPI_Iscatter(x, c, types[t], href, c, types[t], root, MPI_COMM_WORLD,
                            &ht_req));
        snprintf(w, sizeof w, "%s on the device", what("dt_scatter", t, -1, c, root, 0));
        s = to_dev(x, all, t);
        r = to_dev(x, (size_t)c, t);
        EXPECT_OK(dt_scatter(s, c, types[t], r, c, types[t], root, MPI_COMM_WORLD), w);
        expect_dev(r, href, (size_t)c, t, w);
        dt_free(s);

        HT_MPI(MPI_Iallgather(x, c, types[t], href, c, types[t], MPI_COMM_WORLD, &ht_req));
        snprintf(w, sizeof w, "%s on the device", what("dt_allgather", t, -1, c, -1, 0));
        s = to_dev(x, (size_t)c, t);
        r = to_dev(x, all, t);
        EXPECT_OK(dt_allgather(s, c, types[t], r, c, types[t], MPI_COMM_WORLD), w);
        expect_dev(r, href, all, t, w);
        dt_free(s);

        HT_MPI(MPI_Ialltoall(x, c, types[t], href, c, types[t], MPI_COMM_WORLD, &ht_req));
        snprintf(w, sizeof w, "%s on the device", what("dt_alltoall", t, -1, c, -1, 0));
        s = to_dev(x, all, t);
        r = to_dev(x, all, t);
        EXPECT_OK(dt_alltoall(s, c, types[t], r, c, types[t], MPI_COMM_WORLD), w);
        expect_dev(r, href, all, t, w);
        dt_free(s);
        free(x);
        free(href);
    }
    HT_VERDICT();
}
END_TEST

/* ==== MPI's leniencies ==== */

/* What MPI allows and a learner swapping MPI_ for dt_ may rely on: buffers that matter
 * only at the root may be NULL elsewhere, and any buffer may be NULL when the count is
 * 0. Last in the suite: a crash here would end the run. */
START_TEST(test_mpi_leniency)
{
    int n = ht_size, root = n - 1, c = 7, at_root = ht_rank == root;
    float *x = input((size_t)n * c, 0, 0, seed(S_MISC, 6, 0, 0), ht_rank);
    float *ref = newbuf((size_t)n * c, 0), *y = newbuf((size_t)n * c, 0);
    const char *w = "dt_reduce with recvbuf NULL off the root";
    HT_MPI(MPI_Ireduce(x, ref, c, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD, &ht_req));
    EXPECT_OK(dt_reduce(x, at_root ? y : NULL, c, MPI_FLOAT, MPI_SUM, root, MPI_COMM_WORLD), w);
    if (at_root) expect_same(y, ref, (size_t)c, 0, w);
    w = "dt_gather with recvbuf NULL off the root";
    HT_MPI(MPI_Igather(x, c, MPI_FLOAT, ref, c, MPI_FLOAT, root, MPI_COMM_WORLD, &ht_req));
    EXPECT_OK(dt_gather(x, c, MPI_FLOAT, at_root ? y : NULL, c, MPI_FLOAT, root,
                        MPI_COMM_WORLD), w);
    if (at_root) expect_same(y, ref, (size_t)n * c, 0, w);
    w = "dt_scatter with sendbuf NULL off the root";
    HT_MPI(MPI_Iscatter(x, c, MPI_FLOAT, ref, c, MPI_FLOAT, root, MPI_COMM_WORLD, &ht_req));
    EXPECT_OK(dt_scatter(at_root ? x : NULL, c, MPI_FLOAT, y, c, MPI_FLOAT, root,
                         MPI_COMM_WORLD), w);
    expect_same(y, ref, (size_t)c, 0, w);

    MPI_Comm wc = MPI_COMM_WORLD;
    EXPECT_OK(dt_bcast(NULL, 0, MPI_FLOAT, root, wc), "dt_bcast(NULL, 0)");
    EXPECT_OK(dt_bcast_naive(NULL, 0, MPI_FLOAT, root, wc), "dt_bcast_naive(NULL, 0)");
    EXPECT_OK(dt_reduce(NULL, NULL, 0, MPI_FLOAT, MPI_SUM, root, wc), "dt_reduce(NULL, 0)");
    EXPECT_OK(dt_gather(NULL, 0, MPI_FLOAT, NULL, 0, MPI_FLOAT, root, wc), "dt_gather(NULL, 0)");
    EXPECT_OK(dt_scatter(NULL, 0, MPI_FLOAT, NULL, 0, MPI_FLOAT, root, wc), "dt_scatter(NULL, 0)");
    EXPECT_OK(dt_allgather(NULL, 0, MPI_FLOAT, NULL, 0, MPI_FLOAT, wc), "dt_allgather(NULL, 0)");
    EXPECT_OK(dt_reduce_scatter_block(NULL, NULL, 0, MPI_FLOAT, MPI_SUM, wc),
              "dt_reduce_scatter_block(NULL, 0)");
    EXPECT_OK(dt_alltoall(NULL, 0, MPI_FLOAT, NULL, 0, MPI_FLOAT, wc), "dt_alltoall(NULL, 0)");
    for (int a = 0; a < NALGO; a++) {
        EXPECT_OK(ar_algos[a].fn(NULL, NULL, 0, MPI_FLOAT, MPI_SUM, wc), ar_algos[a].name);
        EXPECT_OK(ar_algos[a].fn(MPI_IN_PLACE, NULL, 0, MPI_FLOAT, MPI_SUM, wc),
                  ar_algos[a].name);
    }
    free(x);
    free(ref);
    free(y);
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    ht_init(&argc, &argv);
    types[0] = MPI_FLOAT; types[1] = MPI_DOUBLE; types[2] = MPI_INT; types[3] = DT_HALF;
    ops[0] = MPI_SUM; ops[1] = MPI_MAX; ops[2] = MPI_MIN; ops[3] = MPI_PROD;

    Suite *s = suite_create("collectives");
    const ht_case cases[] = {
        { "bcast", test_bcast, NCOUNTS },
        { "reduce", test_reduce, NCOUNTS },
        { "gather", test_gather, NCOUNTS },
        { "scatter", test_scatter, NCOUNTS },
        { "allgather", test_allgather, NCOUNTS },
        { "reduce_scatter_block", test_reduce_scatter_block, NCOUNTS },
        { "alltoall", test_alltoall, NCOUNTS },
        { "allreduce", test_allreduce, NCOUNTS * NALGO },
        { "allreduce_large", test_allreduce_large, 1 },
        { "bytes", test_bytes, 1 },
        { "allreduce_choice", test_allreduce_choice, 1 },
        { "hook", test_hook_ring, 1 },
        { "hook_steps", test_hook_same_steps, 1 },
        { "hook_nested", test_hook_nested, 1 },
        { "subcomm", test_subcomm, 1 },
        { "device", test_device, NT },
        { "mpi_leniency", test_mpi_leniency, 1 },
    };
    ht_add_cases(s, cases, sizeof cases / sizeof cases[0]);
    int rc = ht_run(s);
    dt_finalize();
    return rc;
}
