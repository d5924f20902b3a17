/* Misuse of the collectives, one case per run: every rank must stop, soon, with dtlab's
 * message naming the problem (never a crash, a hang or a silent wrong answer).
 * tests/run.sh runs each case under mpiexec and checks the exit status and the message.
 *
 *     mpiexec -n 3 build/tests/misuse CASE       (misuse --list names the cases)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "dt.h"
#include "mailbox.h"

#define W MPI_COMM_WORLD

static float a[64], b[64 * 8];

/* Each case and the words its message must contain. */
static const struct { const char *name, *expect; } cases[] = {
    {"root-out-of-range", "root"},
    {"negative-count", "count"},
    {"type-mismatch", "sendtype and recvtype"},
    {"in-place-non-root", "MPI_IN_PLACE"},
    {"in-place-wrong-slot", "MPI_IN_PLACE goes in sendbuf"},
    {"unsupported-type", "unsupported datatype"},
    {"unsupported-op", "unsupported op"},
    {"counts-disagree", "same count and datatype"},
    {"bad-algo-env", "DT_ALLREDUCE_ALGO"},
    {"p2p-too-long", "longer than its receive buffer"},
    {"p2p-too-long-small", "longer than its receive buffer"},
    {"p2p-too-long-staging", "longer than its receive buffer"},
    {"p2p-too-long-pieces", "longer than its receive buffer"},
    {"bad-stage-env", "DT_STAGE_KIB"},
    {"bad-blas-env", "DT_BLAS must be"},
    {"bad-blas-threads-env", "DT_BLAS_THREADS"},
};

/* Around the ring, a message of nbytes into a receive buffer of room bytes (less): 3
 * mailbox slots into 2 (p2p.h, "transports"), or a small message that keeps to MPI. */
static void ring_too_long(size_t nbytes, size_t room)
{
    int n = dt_size(), right = (dt_rank() + 1) % n, left = (dt_rank() + n - 1) % n;
    char *s = calloc(nbytes, 1), *r = malloc(room);
    DT_REQUIRE(s && r, "out of memory");
    dt_sendrecv(s, nbytes, right, r, room, left, 0, W);
    free(s);
    free(r);
}

static void run_case(const char *c, int rank)
{
    if (!strcmp(c, "root-out-of-range"))
        dt_bcast(a, 4, MPI_FLOAT, dt_size(), W);
    else if (!strcmp(c, "negative-count"))
        dt_allreduce(a, b, -1, MPI_FLOAT, MPI_SUM, W);
    else if (!strcmp(c, "type-mismatch"))
        dt_allgather(a, 2, MPI_FLOAT, b, 2, MPI_INT, W);
    else if (!strcmp(c, "in-place-non-root"))
        dt_reduce(MPI_IN_PLACE, b, 4, MPI_FLOAT, MPI_SUM, 0, W);   /* every rank: wrong off root */
    else if (!strcmp(c, "in-place-wrong-slot"))
        dt_alltoall(a, 1, MPI_FLOAT, MPI_IN_PLACE, 1, MPI_FLOAT, W);
    else if (!strcmp(c, "unsupported-type"))
        dt_allreduce(a, b, 4, MPI_CHAR, MPI_SUM, W);
    else if (!strcmp(c, "unsupported-op"))
        dt_allreduce(a, b, 4, MPI_FLOAT, MPI_LAND, W);
    else if (!strcmp(c, "counts-disagree"))   /* erroneous MPI: the receive is too short */
        dt_allreduce_naive(a, b, rank == 0 ? 8 : 16, MPI_FLOAT, MPI_SUM, W);
    else if (!strcmp(c, "p2p-too-long"))
        ring_too_long(3 * dt_p2p_segment(0), 2 * dt_p2p_segment(0));
    else if (!strcmp(c, "p2p-too-long-small"))
        ring_too_long(1000, 500);
    else if (!strcmp(c, "p2p-too-long-staging") && dt_p2p_set_mode("staging"))
        ring_too_long(3 * dt_p2p_segment(0), 2 * dt_p2p_segment(0));
    else if (!strcmp(c, "p2p-too-long-pieces") && dt_p2p_set_mode("staging")) {
        dti_p2p_stage_host(64 << 10);   /* staged pieces (mailbox.c), as device data goes */
        ring_too_long(3 * dt_p2p_segment(0), 2 * dt_p2p_segment(0));
    }
    /* bad-algo-env, bad-stage-env, bad-blas-env, bad-blas-threads-env: run.sh sets
     * DT_ALLREDUCE_ALGO=tree, DT_STAGE_KIB=1.5, DT_BLAS=2, DT_BLAS_THREADS=0, and
     * dt_init itself refuses them */
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--list")) {
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            printf("%s %s\n", cases[i].name, cases[i].expect);
        return 0;
    }
    dt_init(&argc, &argv);
    if (argc != 2)
        dt_usage_error("usage: mpiexec -n N misuse CASE   (misuse --list)\n", NULL);
    run_case(argv[1], dt_rank());
    dt_printf0("misuse: case %s did not stop the program\n", argv[1]);
    dt_finalize();
    return 0;
}
