/* Stress: random collectives, each checked against MPICH's own on the same inputs.
 *
 * Every iteration rank 0 draws one case and hands it to every rank: which collective
 * (every dtlab collective, and every algorithm variant by name), the count (0, 1, small,
 * primes, counts that do not divide by the rank count, now and then up to 256K
 * elements), the datatype, the op, the root, MPI_IN_PLACE or not (wherever MPI allows
 * it), NULL for the buffers MPI lets a rank leave out, and the communicator: the world,
 * the world in reverse order, or the world split into two groups of different sizes,
 * numbered backwards, so communicator ranks are not world ranks.
 *
 * Each rank's input comes from dt_fill_test_data, which differs per rank and per
 * iteration, and whose values make every reduction exact in every type whatever the
 * order: so dtlab's result must equal MPI's exactly. MPI lacks half: its reference runs
 * on the same values as floats, rounded to half at the end (exact too). Receive buffers
 * start poisoned, with guard bytes before and after; send buffers must come back as they
 * went in, and a receive buffer that does not matter (at a non-root) untouched.
 *
 * A mismatch prints everything needed to replay it, and the run goes on. At the end
 * rank 0 prints "stress: N collectives in S s at R ranks, M mismatches" (M counts the
 * collectives that went wrong on some rank); the exit status is 1 when M > 0.
 *
 *     MPIEXEC_TIMEOUT=60 mpiexec -n 5 build/tests/stress --seconds 10
 *     MPIEXEC_TIMEOUT=60 mpiexec -n 5 build/tests/stress --seed 42 --only 1234
 *
 * MPI's references are nonblocking calls waited for politely (dt_waitall): MPICH's
 * blocking calls spin, and 8 ranks on 2 cores would crawl. */
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "dt.h"

static const char usage[] =
    "usage: mpiexec -n N stress [options]\n"
    "Runs random dtlab collectives and compares each with MPICH's on the same inputs.\n"
    "  --seconds S         start no new collective after S seconds (default 10)\n"
    "  --iters N           run N collectives (with --seconds: whichever ends first)\n"
    "  --seed K            the random seed, 0 to 2^31-1 (default: from the clock)\n"
    "  --only I            run iteration I of the seed alone (to replay a mismatch)\n"
    DT_COMMON_USAGE
    "  --help              this text\n";

/* ==== the collectives ==== */

/* The order matters: the rooted kinds come first, and GATHER .. ALLTOALL move blocks. */
enum kind { BCAST, REDUCE, GATHER, SCATTER, ALLGATHER, RSB, ALLTOALL, ALLREDUCE };
typedef int (*bcast_fn)(void *, int, MPI_Datatype, int, MPI_Comm);
typedef int (*allreduce_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm);

static const struct {
    const char *name;
    enum kind kind;
    bcast_fn bcast;          /* the variant, for the kinds that have several */
    allreduce_fn allreduce;
} colls[] = {
    { "dt_bcast", BCAST, dt_bcast, NULL },
    { "dt_bcast_naive", BCAST, dt_bcast_naive, NULL },
    { "dt_reduce", REDUCE, NULL, NULL },
    { "dt_gather", GATHER, NULL, NULL },
    { "dt_scatter", SCATTER, NULL, NULL },
    { "dt_allgather", ALLGATHER, NULL, NULL },
    { "dt_reduce_scatter_block", RSB, NULL, NULL },
    { "dt_alltoall", ALLTOALL, NULL, NULL },
    { "dt_allreduce", ALLREDUCE, NULL, dt_allreduce },
    { "dt_allreduce_ring", ALLREDUCE, NULL, dt_allreduce_ring },
    { "dt_allreduce_naive", ALLREDUCE, NULL, dt_allreduce_naive },
    { "dt_allreduce_rd", ALLREDUCE, NULL, dt_allreduce_rd },
};
enum { NCOLL = sizeof colls / sizeof colls[0] };

static MPI_Datatype types[4];    /* set in main: DT_HALF exists after dt_init */
static const MPI_Op ops[4] = { MPI_SUM, MPI_MAX, MPI_MIN, MPI_PROD };
static MPI_Comm comms[3];        /* world, reversed, split */
static const char *comm_names[3] = { "world", "reversed", "split" };

enum { MAXCOUNT = 1 << 18 };     /* elements in a rank's largest buffer */

/* ==== drawing a case ==== */

/* One round's message. Rank 0 fills in the case; the others send INT_MIN there, so an
 * MPI_MAX allreduce hands out rank 0's values. In the same message every rank says
 * whether the previous collective went wrong for it (MAX: on any rank). */
typedef struct {
    int stop;        /* 1: start no more collectives */
    int bad;         /* the previous collective went wrong on some rank */
    int iter, coll, count, type, op, root, inplace, comm, nulls, dseed;
} round_msg;
enum { NMSG = sizeof(round_msg) / sizeof(int) };

/* splitmix64, seeded by (seed, iteration): any iteration can be drawn again alone. */
static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A whole number in [lo, hi]. */
static int pick(uint64_t *s, int lo, int hi)
{
    return lo + (int)(next(s) % (uint64_t)(hi - lo + 1));
}

static int draw_count(uint64_t *s)
{
    static const int primes[] = { 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47,
                                  53, 61, 97, 101, 127, 251, 509, 1021, 2039, 4093,
                                  8191, 16381, 65521 };
    int r = pick(s, 0, 99);
    if (r < 8) return 0;
    if (r < 16) return 1;
    if (r < 30) return pick(s, 2, 16);
    if (r < 55) return primes[pick(s, 0, (int)(sizeof primes / sizeof primes[0]) - 1)];
    if (r < 85) return pick(s, 2, 4096);
    if (r < 97) return pick(s, 4097, 32768);
    return pick(s, 32769, MAXCOUNT);
}

static int reduces(enum kind k) { return k == REDUCE || k == RSB || k == ALLREDUCE; }
static int rooted(enum kind k) { return k <= SCATTER; }
static int blocks(enum kind k) { return k >= GATHER && k <= ALLTOALL; }

/* Iteration iter of seed. What a collective does not take (an op, a root, in place,
 * NULL buffers) is left 0, so the replay line shows only what matters. */
static void draw(round_msg *m, unsigned seed, int iter, int nworld)
{
    uint64_t s = ((uint64_t)seed << 32) ^ ((uint64_t)(unsigned)iter * 0xd1b54a32d192ed03);
    m->iter = iter;
    m->coll = pick(&s, 0, NCOLL - 1);
    enum kind k = colls[m->coll].kind;
    m->count = draw_count(&s);
    if (blocks(k) && m->count > 256)   /* n blocks of count: about as many bytes */
        m->count /= nworld;
    m->type = pick(&s, 0, 3);
    m->op = reduces(k) ? pick(&s, 0, 3) : 0;
    m->root = rooted(k) ? pick(&s, 0, nworld - 1) : 0;   /* modulo the comm's size */
    m->inplace = k != BCAST && pick(&s, 0, 99) < 40;
    int c = pick(&s, 0, 99);
    m->comm = c < 50 ? 0 : c < 75 ? 1 : 2;
    /* MPI lets non-roots pass NULL for reduce's and gather's recvbuf and scatter's
     * sendbuf */
    m->nulls = (k == REDUCE || k == GATHER || k == SCATTER) && pick(&s, 0, 99) < 25;
    m->dseed = (int)(next(&s) & 0x7fffffff);
}

/* ==== guarded buffers ====
 *
 * A buffer dtlab sees lives where this rank's data lives (dt_device()), with GUARD bytes
 * before and after it. The test builds its image on the host (guards, then the payload:
 * poison or input), copies it there before the call and back after it. */
enum { GUARD = 64 };
#define POISON 0x7f      /* NaN in half, ~3.4e38 in float, 2139062143 in int */
#define GUARD_BYTE 0xa5

typedef struct {
    unsigned char *img;      /* GUARD + nbytes + GUARD on the host */
    unsigned char *live;     /* the same bytes where dtlab's buffers live */
    size_t nbytes;
} gbuf;

/* A poisoned buffer of count elements of type; returns its payload on the host image. */
static void *gb_new(gbuf *b, size_t count, MPI_Datatype type)
{
    b->nbytes = count * dt_type_size(type);
    b->img = malloc(b->nbytes + 2 * GUARD);
    DT_REQUIRE(b->img != NULL, "out of memory");
    memset(b->img, GUARD_BYTE, GUARD);
    memset(b->img + GUARD, POISON, b->nbytes);
    memset(b->img + GUARD + b->nbytes, GUARD_BYTE, GUARD);
    b->live = NULL;
    return b->img + GUARD;
}

/* Puts the image where dtlab's buffers live; returns the payload there. */
static void *gb_live(gbuf *b)
{
    b->live = dt_malloc(b->nbytes + 2 * GUARD, dt_device());
    dt_memcpy(b->live, b->img, b->nbytes + 2 * GUARD);
    return b->live + GUARD;
}

/* Copies the live buffer back into a new host image (the old one stays as it was
 * before the call); returns the payload of the new one. */
static unsigned char *gb_back(gbuf *b, unsigned char **all)
{
    *all = malloc(b->nbytes + 2 * GUARD);
    DT_REQUIRE(*all != NULL, "out of memory");
    dt_memcpy(*all, b->live, b->nbytes + 2 * GUARD);
    return *all + GUARD;
}

static void gb_free(gbuf *b)
{
    free(b->img);
    if (b->live)
        dt_free(b->live);
    b->img = b->live = NULL;
}

/* ==== reporting ==== */

typedef struct {
    unsigned seed;
    const round_msg *m;
    int n, rank, root;       /* in the iteration's communicator */
    int count;               /* as passed (block collectives: kept to MAXCOUNT in all) */
    int bad;                 /* mismatches seen by this rank in this iteration */
} ctx;

static int printed;          /* mismatch lines this rank has printed */
enum { MAXPRINT = 20 };

/* One mismatch on this rank, with all it takes to replay it. */
__attribute__((format(printf, 2, 3)))
static void mismatch(ctx *c, const char *fmt, ...)
{
    c->bad++;
    if (printed++ >= MAXPRINT)
        return;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const round_msg *m = c->m;
    enum kind k = colls[m->coll].kind;
    char root[24] = "";
    if (rooted(k))
        snprintf(root, sizeof root, " root %d", c->root);
    fprintf(stderr, "stress: MISMATCH seed %u iteration %d: %s count %d type %s"
            "%s%s%s%s%s comm %s (%d ranks) rank %d (world %d): %s\n", c->seed, m->iter,
            colls[m->coll].name, c->count, dt_type_name(types[m->type]),
            reduces(k) ? " op " : "", reduces(k) ? dt_op_name(ops[m->op]) : "", root,
            m->inplace ? " MPI_IN_PLACE" : "", m->nulls ? " NULL-at-non-roots" : "",
            comm_names[m->comm], c->n, c->rank, dt_rank(), what);
    fflush(stderr);
}

/* ==== checks ==== */

/* got against want, element by element by value (+0 equals -0; poison in half is NaN,
 * which equals nothing). */
static void check_values(ctx *c, const char *name, const void *got, const void *want,
                         size_t count, MPI_Datatype type)
{
    for (size_t i = 0; i < count; i++) {
        double a = dt_elem(got, i, type), b = dt_elem(want, i, type);
        if (!(a == b)) {
            mismatch(c, "%s[%zu] is %.17g, want %.17g", name, i, a, b);
            return;
        }
    }
}

/* Copies b back and checks its guards, then its payload: against want (count
 * elements of type) when want is not NULL, else unchanged from before the call. */
static void check_buf(ctx *c, const char *name, gbuf *b, const void *want, size_t count,
                      MPI_Datatype type)
{
    unsigned char *all, *got = gb_back(b, &all);
    for (size_t i = 0; i < GUARD; i++) {
        if (all[i] != GUARD_BYTE) {
            mismatch(c, "wrote %zu bytes before the start of %s", GUARD - i, name);
            break;
        }
    }
    for (size_t i = 0; i < GUARD; i++) {
        if (got[b->nbytes + i] != GUARD_BYTE) {
            mismatch(c, "wrote past the end of %s (%zu bytes): byte %zu after it", name,
                     b->nbytes, i);
            break;
        }
    }
    if (want) {
        check_values(c, name, got, want, count, type);
    } else {
        for (size_t i = 0; i < b->nbytes; i++)
            if (got[i] != b->img[GUARD + i]) {
                mismatch(c, "changed %s at byte %zu of %zu (0x%02x, was 0x%02x)", name, i,
                         b->nbytes, got[i], b->img[GUARD + i]);
                break;
            }
    }
    free(all);
}

/* ==== MPI's reference ==== */

/* MPI has no half: its reference works on the same values as floats. */
static MPI_Datatype ref_type(MPI_Datatype t) { return t == DT_HALF ? MPI_FLOAT : t; }

/* count elements of x (type t), as ref_type(t), in a new buffer. */
static void *to_ref(const void *x, size_t count, MPI_Datatype t)
{
    MPI_Datatype rt = ref_type(t);
    void *r = malloc(count * dt_type_size(rt) + 1);
    DT_REQUIRE(r != NULL, "out of memory");
    if (rt == t)
        memcpy(r, x, count * dt_type_size(t));
    else
        dt_halves_to_floats(x, r, count);
    return r;
}

/* A result of MPI's (ref_type(t)) back as type t, in place; returns it. */
static void *from_ref(void *r, size_t count, MPI_Datatype t)
{
    if (ref_type(t) != t) {
        dt_half *h = malloc(count * sizeof(dt_half) + 1);
        DT_REQUIRE(h != NULL, "out of memory");
        dt_floats_to_halves(r, h, count);
        free(r);
        return h;
    }
    return r;
}

/* A zeroed buffer for MPI's result (it stays zero where the result does not matter). */
static void *ref_buf(size_t count, MPI_Datatype t)
{
    void *r = calloc(count * dt_type_size(ref_type(t)) + 1, 1);
    DT_REQUIRE(r != NULL, "out of memory");
    return r;
}

/* Calls a nonblocking MPI collective and waits for it politely:
 *     MPI_WAIT(MPI_Iallreduce(x, y, n, MPI_INT, MPI_SUM, comm, &req)); */
static MPI_Request req;
#define MPI_WAIT(icall) do { DT_CHECK_MPI(icall); dt_waitall(1, &req); } while (0)

/* ==== one iteration ==== */

/* Runs case m on this rank and returns how many mismatches this rank saw. */
static int run_one(unsigned seed, const round_msg *m)
{
    MPI_Comm comm = comms[m->comm];
    int n, rank;
    MPI_Comm_size(comm, &n);
    MPI_Comm_rank(comm, &rank);
    enum kind kind = colls[m->coll].kind;
    int root = m->root % n, at_root = rank == root;
    MPI_Datatype t = types[m->type], rt = ref_type(t);
    MPI_Op op = ops[m->op];
    int ip = m->inplace, nulls = m->nulls;
    int count = m->count;
    if (blocks(kind) && (size_t)count * n > MAXCOUNT)   /* (draw sees to it already) */
        count = MAXCOUNT / n;
    ctx c = { seed, m, n, rank, root, count, 0 };
    size_t cnt = (size_t)count, all = (size_t)n * cnt, es = dt_type_size(t);
    /* what a rank's input holds: the op's value set where it reduces */
    MPI_Op fill_op = reduces(kind) ? op : MPI_SUM;
    size_t nin = kind == SCATTER || kind == RSB || kind == ALLTOALL ? all : cnt;

    /* this rank's input, and MPI's answer to it */
    void *x = malloc(nin * es + 1);
    DT_REQUIRE(x != NULL, "out of memory");
    dt_fill_test_data(x, (int)nin, t, fill_op, (unsigned)m->dseed, dt_rank());
    void *xr = to_ref(x, nin, t), *want = NULL;
    switch (kind) {
    case BCAST:
        want = xr;
        xr = NULL;
        MPI_WAIT(MPI_Ibcast(want, count, rt, root, comm, &req));
        break;
    case REDUCE:
        want = ref_buf(cnt, t);
        MPI_WAIT(MPI_Ireduce(xr, want, count, rt, op, root, comm, &req));
        break;
    case GATHER:
        want = ref_buf(all, t);
        MPI_WAIT(MPI_Igather(xr, count, rt, want, count, rt, root, comm, &req));
        break;
    case SCATTER:
        want = ref_buf(cnt, t);
        MPI_WAIT(MPI_Iscatter(xr, count, rt, want, count, rt, root, comm, &req));
        break;
    case ALLGATHER:
        want = ref_buf(all, t);
        MPI_WAIT(MPI_Iallgather(xr, count, rt, want, count, rt, comm, &req));
        break;
    case RSB:
        want = ref_buf(cnt, t);
        MPI_WAIT(MPI_Ireduce_scatter_block(xr, want, count, rt, op, comm, &req));
        break;
    case ALLTOALL:
        want = ref_buf(all, t);
        MPI_WAIT(MPI_Ialltoall(xr, count, rt, want, count, rt, comm, &req));
        break;
    case ALLREDUCE:
        want = ref_buf(cnt, t);
        MPI_WAIT(MPI_Iallreduce(xr, want, count, rt, op, comm, &req));
        break;
    }
    free(xr);
    size_t nwant = kind == GATHER || kind == ALLGATHER || kind == ALLTOALL ? all : cnt;
    want = from_ref(want, nwant, t);

    /* dtlab's turn: the buffers each rank hands over. A gbuf never made stays NULL
     * (none, or a NULL that MPI allows); sp and rp are what is passed, MPI_IN_PLACE
     * included. */
    gbuf send = { 0 }, recv = { 0 };
    void *sp = NULL, *rp = NULL;
    switch (kind) {
    case BCAST:      /* every rank's buffer starts with its own data */
        memcpy(gb_new(&recv, cnt, t), x, cnt * es);
        break;
    case REDUCE:     /* in place: the root's input is in recvbuf */
    case ALLREDUCE:
        if (ip && (kind == ALLREDUCE || at_root)) {
            memcpy(gb_new(&recv, cnt, t), x, cnt * es);
            sp = MPI_IN_PLACE;
        } else {
            memcpy(gb_new(&send, cnt, t), x, cnt * es);
            if (kind == ALLREDUCE || at_root || !nulls)
                gb_new(&recv, cnt, t);
        }
        break;
    case GATHER:     /* in place: the root's block is already at its place */
        if (ip && at_root) {
            unsigned char *p = gb_new(&recv, all, t);
            memcpy(p + (size_t)root * cnt * es, x, cnt * es);
            sp = MPI_IN_PLACE;
        } else {
            memcpy(gb_new(&send, cnt, t), x, cnt * es);
            if (at_root || !nulls)
                gb_new(&recv, all, t);
        }
        break;
    case SCATTER:    /* in place: the root's block stays in sendbuf */
        if (at_root || !nulls)
            memcpy(gb_new(&send, all, t), x, all * es);
        if (ip && at_root)
            rp = MPI_IN_PLACE;
        else
            gb_new(&recv, cnt, t);
        break;
    case ALLGATHER:  /* in place: each rank's block is already at its place */
        if (ip) {
            unsigned char *p = gb_new(&recv, all, t);
            memcpy(p + (size_t)rank * cnt * es, x, cnt * es);
            sp = MPI_IN_PLACE;
        } else {
            memcpy(gb_new(&send, cnt, t), x, cnt * es);
            gb_new(&recv, all, t);
        }
        break;
    case RSB:        /* in place: the input is in recvbuf, block r left at its start */
    case ALLTOALL:   /* in place: the blocks are taken from recvbuf and replaced */
        if (ip) {
            memcpy(gb_new(&recv, all, t), x, all * es);
            sp = MPI_IN_PLACE;
        } else {
            memcpy(gb_new(&send, all, t), x, all * es);
            gb_new(&recv, kind == RSB ? cnt : all, t);
        }
        break;
    }
    if (send.img) sp = gb_live(&send);
    if (recv.img) rp = gb_live(&recv);
    int rc = MPI_SUCCESS;
    switch (kind) {
    case BCAST:     rc = colls[m->coll].bcast(rp, count, t, root, comm); break;
    case REDUCE:    rc = dt_reduce(sp, rp, count, t, op, root, comm); break;
    case GATHER:    rc = dt_gather(sp, count, t, rp, count, t, root, comm); break;
    case SCATTER:   rc = dt_scatter(sp, count, t, rp, count, t, root, comm); break;
    case ALLGATHER: rc = dt_allgather(sp, count, t, rp, count, t, comm); break;
    case RSB:       rc = dt_reduce_scatter_block(sp, rp, count, t, op, comm); break;
    case ALLTOALL:  rc = dt_alltoall(sp, count, t, rp, count, t, comm); break;
    case ALLREDUCE: rc = colls[m->coll].allreduce(sp, rp, count, t, op, comm); break;
    }
    if (rc != MPI_SUCCESS)
        mismatch(&c, "returned %d, not MPI_SUCCESS", rc);

    /* the send buffer as it was; the result where it matters (its first nwant
     * elements), else the receive buffer as it was */
    int matters = kind != REDUCE && kind != GATHER ? 1 : at_root;
    if (send.img)
        check_buf(&c, "sendbuf", &send, NULL, 0, t);
    if (recv.img)
        check_buf(&c, "recvbuf", &recv, matters ? want : NULL, nwant, t);
    gb_free(&send);
    gb_free(&recv);
    free(x);
    free(want);
    return c.bad;
}

/* ==== main ==== */

static void parse(int argc, char **argv, int *seconds, int *iters, int *seed, int *only)
{
    enum { O_SECONDS = 1, O_ITERS, O_SEED, O_ONLY };
    static const struct option lo[] = {
        {"seconds", required_argument, NULL, O_SECONDS},
        {"iters", required_argument, NULL, O_ITERS},
        {"seed", required_argument, NULL, O_SEED},
        {"only", required_argument, NULL, O_ONLY},
        {"help", no_argument, NULL, 'h'},
        DT_COMMON_LONGOPTS,
        {NULL, 0, NULL, 0}
    };
    char why[160];
    opterr = 0;                                  /* dt_usage_error speaks, on rank 0 */
    optind = 0;
    for (int o; (o = getopt_long(argc, argv, ":h", lo, NULL)) != -1;) {
        const char *bad = NULL;
        switch (o) {
        case O_SECONDS:
            if (dt_parse_int(optarg, 1, 1000000, seconds))
                bad = "--seconds wants a whole number of seconds from 1 to 10^6";
            break;
        case O_ITERS:
            if (dt_parse_int(optarg, 1, 1000000000, iters))
                bad = "--iters wants a whole number from 1 to 10^9";
            break;
        case O_SEED:
            if (dt_parse_int(optarg, 0, INT_MAX, seed))
                bad = "--seed wants a whole number from 0 to 2^31-1";
            break;
        case O_ONLY:
            if (dt_parse_int(optarg, 0, INT_MAX, only))
                bad = "--only wants an iteration number from 0 to 2^31-1";
            break;
        case 'h':
            dt_usage_help(usage);
        case DT_OPT_DEVICE: case DT_OPT_TRACE:
            break;                               /* dt_init has read them */
        default:
            snprintf(why, sizeof why, o == ':' ? "option '%s' needs a value"
                     : "unknown option '%s'", argv[optind - 1]);
            bad = why;
        }
        if (bad)
            dt_usage_error(usage, bad);
    }
    if (optind < argc) {
        snprintf(why, sizeof why, "unexpected argument '%s'", argv[optind]);
        dt_usage_error(usage, why);
    }
}

int main(int argc, char **argv)
{
    /* ==== setup ==== */
    dt_init(&argc, &argv);
    int seconds = 0, iters = 0, seed = -1, only = -1;
    parse(argc, argv, &seconds, &iters, &seed, &only);
    if (only >= 0)
        iters = 1, seconds = 0;
    else if (seconds == 0 && iters == 0)
        seconds = 10;
    int nworld = dt_size(), wrank = dt_rank();
    types[0] = MPI_FLOAT, types[1] = MPI_DOUBLE, types[2] = MPI_INT, types[3] = DT_HALF;

    /* the seed: rank 0's, from its clock unless given */
    if (seed < 0)
        seed = (int)(((unsigned)time(NULL) * 2654435761u ^ (unsigned)getpid()) & INT_MAX);
    MPI_WAIT(MPI_Ibcast(&seed, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));

    /* the communicators: the world; reversed; two groups of different sizes (ranks
     * 0, 3, 6, ... and the rest), each numbered backwards */
    comms[0] = MPI_COMM_WORLD;
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, nworld - wrank, &comms[1]));
    DT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, wrank % 3 == 0, nworld - wrank,
                                &comms[2]));

    if (only >= 0)
        dt_printf0("stress: seed %d, %d ranks, iteration %d alone\n", seed, nworld, only);
    else if (seconds)
        dt_printf0("stress: seed %d, %d ranks, for %d s\n", seed, nworld, seconds);
    else
        dt_printf0("stress: seed %d, %d ranks, %d collectives\n", seed, nworld, iters);

    /* ==== the rounds ==== */
    int first = only >= 0 ? only : 0, done = 0, mismatches = 0, bad = 0;
    double t0 = MPI_Wtime();
    for (int i = first;; i++) {
        round_msg mine, m;
        for (int k = 0; k < NMSG; k++)
            ((int *)&mine)[k] = INT_MIN;
        if (wrank == 0) {
            draw(&mine, (unsigned)seed, i, nworld);
            mine.stop = (iters && done >= iters) ||
                        (seconds && MPI_Wtime() - t0 >= seconds) || i == INT_MAX;
        }
        mine.bad = bad;
        MPI_WAIT(MPI_Iallreduce(&mine, &m, NMSG, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
        if (m.bad) {
            mismatches++;
            dt_printf0("stress: replay: mpiexec -n %d %s --seed %d --only %d\n",
                       nworld, argv[0], seed, i - 1);
        }
        if (m.stop)
            break;
        bad = run_one((unsigned)seed, &m) > 0;
        done++;
    }
    double took = MPI_Wtime() - t0;

    /* ==== the verdict ==== */
    dt_printf0("stress: %d collectives in %.1f s at %d rank%s, %d mismatch%s\n", done,
               took, nworld, nworld == 1 ? "" : "s", mismatches, mismatches == 1 ? "" : "es");
    MPI_Comm_free(&comms[1]);
    MPI_Comm_free(&comms[2]);
    dt_finalize();
    return mismatches > 0 ? 1 : 0;
}
