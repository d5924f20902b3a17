/* Multi-rank tests of DDP's gradient buckets (lib/parallel/ddp.c) against MPI_Allreduce.
 *
 * The gradients of each layer come from dt_fill_test_data: they differ per rank, layer
 * and step, and their values (quarters in [-4, 4]) make every sum exact in float and in
 * half whatever the order, so the buckets must equal MPI's allreduce of the whole array
 * exactly (half against MPI with dt_half_mpi_op). The cases cover
 *   - uneven layers: 1-element layers, layers larger than the cap, a single layer, and
 *     random layouts;
 *   - caps of 0 and 1 byte (every layer alone), a middle cap, a cap a bucket fills
 *     exactly, and SIZE_MAX (one bucket); the bucket count against the rule computed
 *     here on its own, and against counts worked out by hand;
 *   - overlap 0 (nothing sent before dti_ddp_finish) and 1 (the communication thread);
 *   - MPI_FLOAT and DT_HALF; MPI_COMM_WORLD and a communicator numbered backwards;
 *   - layers reported last to first, and in an order shuffled differently on each rank
 *     (the buckets must still go out in the same order everywhere);
 *   - several steps on one dti_ddp;
 *   - that a ready bucket goes out during "backward" with overlap 1, but not before the
 *     buckets ahead of it (watched through dt_bytes_sent, which is atomic);
 *   - device gradients, where every rank has a GPU.
 *
 *   MPIEXEC_TIMEOUT=60 mpiexec -n 4 build/tests/mpi_ddp
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include "harness.h"
#include "parallel/parallel_internal.h"

/* ==== layouts ==== */

enum { MAXL = 16, NFIXED = 4, NRANDOM = 4, NLAYOUT = NFIXED + NRANDOM };

typedef struct {
    int nl;
    size_t size[MAXL];       /* elements per layer */
} layout;

static const layout fixed[NFIXED] = {
    { 10, { 5, 1, 700, 1, 1, 40, 3000, 1, 17, 260 } },
    { 1, { 1 } },
    { 3, { 4000, 1, 2 } },
    { 2, { 256, 256 } },
};

static unsigned rnd(unsigned *s)   /* xorshift: the same numbers on every rank */
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

/* Layout k: a fixed one, or a random one (1..12 layers of 1, a few, or thousands). */
static layout get_layout(int k)
{
    if (k < NFIXED)
        return fixed[k];
    layout L;
    unsigned s = 2463534242u + 977u * (unsigned)k;
    L.nl = 1 + (int)(rnd(&s) % 12);
    for (int i = 0; i < L.nl; i++) {
        unsigned r = rnd(&s) % 3;
        L.size[i] = r == 0 ? 1 : r == 1 ? 2 + rnd(&s) % 60 : 100 + rnd(&s) % 3000;
    }
    return L;
}

static void offsets(const layout *L, size_t *off)
{
    off[0] = 0;
    for (int i = 0; i < L->nl; i++)
        off[i + 1] = off[i] + L->size[i];
}

/* The rule, written here on its own: from the last layer down, a bucket takes layers
 * while their bytes stay within the cap; its first layer always goes in. */
static int rule_buckets(const layout *L, size_t esize, size_t cap)
{
    int nb = 0;
    for (int j = L->nl - 1; j >= 0; nb++) {
        size_t sum = L->size[j] * esize;
        int k = j;
        while (k > 0 && sum + L->size[k - 1] * esize <= cap)
            sum += L->size[--k] * esize;
        j = k - 1;
    }
    return nb;
}

static MPI_Datatype types[2];      /* set in main: DT_HALF exists after dt_init */
enum { NT = 2 };
static const size_t caps[] = { 0, 1, 1024, SIZE_MAX };
#define NCAPS ((int)(sizeof caps / sizeof caps[0]))
static MPI_Comm backwards;         /* MPI_COMM_WORLD's ranks in reverse order */

/* What MPI's own allreduce sums with: DT_HALF needs dtlab's op. */
static MPI_Op sum_op(MPI_Datatype t)
{
    return t == DT_HALF ? dt_half_mpi_op(MPI_SUM) : MPI_SUM;
}

/* ==== bucket counts ==== */

START_TEST(test_count)
{
    layout L = get_layout(_i);
    size_t off[MAXL + 1];
    offsets(&L, off);
    for (int t = 0; t < NT; t++)
        for (int c = 0; c < NCAPS; c++)
            for (int ov = 0; ov < 2; ov++) {
                size_t es = dt_type_size(types[t]);
                void *g = malloc(off[L.nl] * es);
                dti_ddp *d = dti_ddp_new(g, types[t], off, L.nl, MPI_COMM_WORLD, caps[c],
                                         ov);
                int nb = dti_ddp_nbuckets(d), want = rule_buckets(&L, es, caps[c]);
                HT_EXPECT(nb == want, "layout %d (%d layers), %s, cap %zu, overlap %d: %d "
                          "buckets, want %d", _i, L.nl, dt_type_name(types[t]), caps[c], ov,
                          nb, want);
                if (caps[c] <= 1)
                    HT_EXPECT(nb == L.nl, "cap %zu: %d buckets, want one per layer (%d)",
                              caps[c], nb, L.nl);
                if (caps[c] == SIZE_MAX)
                    HT_EXPECT(nb == 1, "cap SIZE_MAX: %d buckets, want 1", nb);
                dti_ddp_free(d);
                free(g);
            }
    HT_VERDICT();
}
END_TEST

/* Counts worked out by hand, for the rule itself. */
START_TEST(test_count_by_hand)
{
    static const struct { int layout, t; size_t cap; int want; } cases[] = {
        /* float bytes 20 4 2800 4 4 160 12000 4 68 1040, from the last: [1040] [68 4]
         * [12000] [160 4 4] [2800] [4 20] */
        { 0, 0, 1024, 6 },
        /* half bytes 10 2 1400 2 2 80 6000 2 34 520: [520 34 2] [6000] [80 2 2] [1400]
         * [2 10] */
        { 0, 1, 1024, 5 },
        { 3, 0, 2048, 1 },     /* two layers of 1024 bytes fill the cap exactly */
        { 3, 0, 2047, 2 },
        /* float bytes 16000 4 8: cap 12 gives [8 4] [16000], cap 11 [8] [4] [16000] */
        { 2, 0, 12, 2 },
        { 2, 0, 11, 3 },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        layout L = get_layout(cases[k].layout);
        size_t off[MAXL + 1];
        offsets(&L, off);
        MPI_Datatype t = types[cases[k].t];
        void *g = malloc(off[L.nl] * dt_type_size(t));
        dti_ddp *d = dti_ddp_new(g, t, off, L.nl, MPI_COMM_WORLD, cases[k].cap, 0);
        int want = cases[k].want;
        HT_EXPECT(dti_ddp_nbuckets(d) == want, "case %zu (layout %d, %s, cap %zu): %d "
                  "buckets, want %d", k, cases[k].layout, dt_type_name(t), cases[k].cap,
                  dti_ddp_nbuckets(d), want);
        dti_ddp_free(d);
        free(g);
    }
    HT_VERDICT();
}
END_TEST

/* ==== sums ==== */

/* order[] gets the layers in the order backward reports them: last to first, or
 * shuffled with a seed that differs per rank. */
static void report_order(int nl, int shuffled, unsigned seed, int *order)
{
    for (int i = 0; i < nl; i++)
        order[i] = nl - 1 - i;
    if (!shuffled)
        return;
    unsigned s = seed * 2654435761u + 1u + (unsigned)ht_rank * 40503u;
    for (int i = nl - 1; i > 0; i--) {
        int j = (int)(rnd(&s) % (unsigned)(i + 1)), tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
}

/* Runs steps steps of one dti_ddp over layout L and checks each against MPI. */
static void run_steps(const layout *L, MPI_Datatype type, size_t cap, int ov, MPI_Comm comm,
                      dt_device_kind where, int steps, unsigned seed)
{
    size_t off[MAXL + 1];
    offsets(L, off);
    size_t n = off[L->nl], es = dt_type_size(type), nbytes = n * es;
    void *g = dt_malloc(nbytes, where);              /* the gradients ddp reduces */
    void *in = malloc(nbytes), *ref = malloc(nbytes), *got = malloc(nbytes);
    DT_REQUIRE(in && ref && got, "out of memory");
    char w[200];
    dti_ddp *d = dti_ddp_new(g, type, off, L->nl, comm, cap, ov);
    for (int step = 1; step <= steps; step++) {
        snprintf(w, sizeof w, "%d layers, %s, cap %zu, overlap %d, %s, %s, step %d",
                 L->nl, dt_type_name(type), cap, ov, comm == MPI_COMM_WORLD ? "world" :
                 "backwards", where == DT_CPU ? "host" : "device", step);
        for (int i = 0; i < L->nl; i++)
            dt_fill_test_data((char *)in + off[i] * es, (int)L->size[i], type, MPI_SUM,
                              seed * 131u + (unsigned)step * 17u + (unsigned)i, ht_rank);
        dt_memcpy(g, in, nbytes);
        memcpy(ref, in, nbytes);
        HT_MPI(MPI_Iallreduce(MPI_IN_PLACE, ref, (int)n, type, sum_op(type), comm,
                              &ht_req));

        int order[MAXL];
        report_order(L->nl, step > 1, seed + (unsigned)step, order);
        for (int k = 0; k < L->nl; k++)
            dti_ddp_layer_done(d, order[k]);
        if (!ov) {                                   /* nothing sent before finish */
            dt_memcpy(got, g, nbytes);
            HT_EXPECT(memcmp(got, in, nbytes) == 0, "%s: gradients changed before "
                      "dti_ddp_finish", w);
        }
        dti_ddp_finish(d);
        dt_memcpy(got, g, nbytes);
        for (size_t i = 0; i < n; i++)
            if (dt_elem(got, i, type) != dt_elem(ref, i, type)) {
                ht_fail("%s: element %zu of %zu is %g, MPI_Allreduce gives %g", w, i, n,
                        dt_elem(got, i, type), dt_elem(ref, i, type));
                break;
            }
        double ws = dti_ddp_wait_seconds(d);
        HT_EXPECT(ws >= 0 && ws < 60, "%s: dti_ddp_wait_seconds is %g", w, ws);
    }
    dti_ddp_free(d);
    dt_free(g);
    free(in);
    free(ref);
    free(got);
}

START_TEST(test_sums)
{
    int k = _i / NT, t = _i % NT;
    layout L = get_layout(k);
    MPI_Comm comm = k % 2 ? backwards : MPI_COMM_WORLD;
    for (int c = 0; c < NCAPS; c++)
        for (int ov = 0; ov < 2; ov++)
            run_steps(&L, types[t], caps[c], ov, comm, DT_CPU, 3,
                      (unsigned)(_i * 16 + c * 2 + ov));
    HT_VERDICT();
}
END_TEST

/* Many steps on one dti_ddp, every layer alone: the thread's queue wraps many times. */
START_TEST(test_many_steps)
{
    layout L = get_layout(0);
    run_steps(&L, MPI_FLOAT, 1, 1, MPI_COMM_WORLD, DT_CPU, 12, 999);
    HT_VERDICT();
}
END_TEST

START_TEST(test_device)
{
    if (!ht_agree(dt_device() == DT_CUDA)) {
        if (ht_rank == 0)
            printf("mpi_ddp: not every rank has a GPU; device gradients not tested\n");
        HT_VERDICT();
        return;
    }
    layout L = get_layout(0);
    for (int t = 0; t < NT; t++)
        for (int ov = 0; ov < 2; ov++)
            run_steps(&L, types[t], 1024, ov, MPI_COMM_WORLD, DT_CUDA, 3,
                      (unsigned)(500 + t * 2 + ov));
    HT_VERDICT();
}
END_TEST

/* ==== when buckets go out ==== */

static void nap(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

/* With overlap 1, bucket 0 (the last layers) goes out as soon as its layers are done,
 * before dti_ddp_finish; while it is not ready, no other bucket may go, however ready. */
START_TEST(test_overlap)
{
    layout L = get_layout(0);
    size_t off[MAXL + 1];
    offsets(&L, off);
    size_t n = off[L.nl], nbytes = n * sizeof(float);
    float *g = malloc(nbytes), *ref = malloc(nbytes);
    dt_fill_test_data(g, (int)n, MPI_FLOAT, MPI_SUM, 77, ht_rank);
    memcpy(ref, g, nbytes);
    HT_MPI(MPI_Iallreduce(MPI_IN_PLACE, ref, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                          &ht_req));

    dti_ddp *d = dti_ddp_new(g, MPI_FLOAT, off, L.nl, MPI_COMM_WORLD, 1024, 1);
    size_t before = dt_bytes_sent();
    for (int i = 0; i < L.nl - 1; i++)          /* every bucket but bucket 0 is ready */
        dti_ddp_layer_done(d, i);
    nap(0.05);
    HT_EXPECT(dt_bytes_sent() == before, "%zu bytes went out before bucket 0 was ready: "
              "buckets must leave in order", dt_bytes_sent() - before);
    dti_ddp_layer_done(d, L.nl - 1);
    if (ht_size > 1) {                           /* one rank sends nothing */
        double t0 = MPI_Wtime();
        while (dt_bytes_sent() == before && MPI_Wtime() - t0 < 30)
            nap(0.001);
        HT_EXPECT(dt_bytes_sent() > before, "nothing went out within 30 s of the buckets "
                  "being ready, before dti_ddp_finish");
    }
    dti_ddp_finish(d);
    for (size_t i = 0; i < n; i++)
        if (g[i] != ref[i]) {
            ht_fail("overlap: element %zu of %zu is %g, MPI_Allreduce gives %g", i, n,
                    g[i], ref[i]);
            break;
        }
    dti_ddp_free(d);
    free(g);
    free(ref);
    HT_VERDICT();
}
END_TEST

int main(int argc, char **argv)
{
    ht_init(&argc, &argv);
    types[0] = MPI_FLOAT;
    types[1] = DT_HALF;
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, ht_size - 1 - ht_rank, &backwards));

    Suite *s = suite_create("ddp");
    const ht_case cases[] = {
        { "count", test_count, NLAYOUT },
        { "count_by_hand", test_count_by_hand, 1 },
        { "sums", test_sums, NLAYOUT * NT },
        { "many_steps", test_many_steps, 1 },
        { "overlap", test_overlap, 1 },
        { "device", test_device, 1 },
    };
    ht_add_cases(s, cases, sizeof cases / sizeof cases[0]);
    int rc = ht_run(s);
    DT_CHECK_MPI(MPI_Comm_free(&backwards));
    dt_finalize();
    return rc;
}
