/* Broadcast: the root's buffer ends up on every rank (MPI_Bcast).
 *
 * Two algorithms: a binomial tree (dt_bcast), where every rank that has the data passes
 * it on, so the number of holders doubles each round; and the naive one
 * (dt_bcast_naive), where the root sends to each rank in turn. Same bytes on the wire
 * per receiver, very different time: log2 n rounds against n-1. */
#include "collectives.h"
#include "buf.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"

#define TAG_TREE  (DT_TAG_BASE + 1)
#define TAG_NAIVE (DT_TAG_BASE + 2)

/* Checks what every broadcast needs and returns the size of the buffer in bytes. */
static size_t check_args(const char *fn, const void *buf, int count, MPI_Datatype type,
                         int root, int n)
{
    DT_REQUIRE(count >= 0, "%s: count is %d; it must be 0 or more", fn, count);
    DT_REQUIRE(root >= 0 && root < n,
               "%s: root %d is not a rank of this communicator (0..%d)", fn, root, n - 1);
    DT_REQUIRE(buf != MPI_IN_PLACE, "%s: MPI_IN_PLACE means nothing for a broadcast, whose "
               "one buffer is both input (at the root) and output", fn);
    DT_REQUIRE(buf != NULL || count == 0, "%s: buf is NULL but count is %d", fn, count);
    return (size_t)count * dt_type_size(type);
}

/* ==== binomial tree ====
 *
 * 6 ranks, root 0. The tree is built on virtual ranks v = (rank - root) mod n, so any
 * root works the same way (rank = (v + root) mod n):
 *
 *                      0
 *                 /    |    \            round 0:  0 -> 4
 *                4     2     1           round 1:  0 -> 2
 *                |     |                 round 2:  0 -> 1   2 -> 3   4 -> 5
 *                5     3
 *
 * (4 -> 5 waits for round 2: in round 1, 4 would send to 6, which does not exist.)
 *
 * Each rank receives once from its parent (v with its lowest set bit cleared), then
 * sends to its children v + 2^k, largest subtree first (schedule.h: dt_tree_*).
 *
 * Step table, 4 ranks, root 2 (real ranks; v = rank - 2 mod 4):
 *
 *     round   sends            ranks holding the data
 *       -                      2
 *       0     2 -> 0           2 0
 *       1     2 -> 3, 0 -> 1   2 0 3 1
 *
 * Invariant: after round k the holders are the virtual ranks that are multiples of
 * 2^(K-1-k), K = ceil(log2 n): their number doubles every round, so K rounds suffice.
 *
 * Cost, S bytes: every rank receives S once; the root sends S to each of its (at most K)
 * children. Time ~ ceil(log2 n) * S / bandwidth, against (n-1) * S / bandwidth for the
 * naive broadcast below. (For large S, pipelining the buffer in pieces down the tree,
 * or scatter + allgather, does better still.) */
int dt_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    size_t nbytes = check_args("dt_bcast", buf, count, type, root, n);
    if (nbytes == 0)
        return MPI_SUCCESS;
    dt_trace_call("bcast_tree", (size_t)count, nbytes / (size_t)count);

    int parent = dt_tree_parent(rank, root, n);
    int children[32];
    int nchildren = dt_tree_children(rank, root, n, children);
    int my_round = dt_tree_round(rank, root, n);     /* -1 at the root */

    for (int k = 0; k < dt_log2_ceil(n); k++) {
        dt_trace_phase("bcast_tree", "bcast");
        if (k == my_round) {
            dt_trace_step(k, -1, 0, 0, 0, 0, (size_t)count);
            dt_recv(buf, nbytes, parent, TAG_TREE, comm);
        }
        for (int i = 0; i < nchildren; i++) {
            if (dt_tree_round(children[i], root, n) != k)
                continue;
            dt_trace_step(k, 0, 0, (size_t)count, -1, 0, 0);
            dt_send(buf, nbytes, children[i], TAG_TREE, comm);
        }
        dti_step_done("bcast_tree", "bcast", k, buf, count, type, comm);
    }
    return MPI_SUCCESS;
}

/* ==== naive ====
 *
 * The root sends the whole buffer to every other rank, one after the other:
 *
 *          root
 *        / |  | \          step 0: root -> root+1
 *       v  v  v  v         step 1: root -> root+2
 *      r1 r2 r3 r4         ...
 *
 * Step table, 4 ranks, root 1:   step 0: 1 -> 2    step 1: 1 -> 3    step 2: 1 -> 0
 *
 * Invariant: after step s, the root and the s+1 ranks after it hold the data.
 * Cost, S bytes: the root sends (n-1) * S, in n-1 steps, while the others wait their
 * turn. This is what the tree improves on. */
int dt_bcast_naive(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    size_t nbytes = check_args("dt_bcast_naive", buf, count, type, root, n);
    if (nbytes == 0)
        return MPI_SUCCESS;
    dt_trace_call("bcast_naive", (size_t)count, nbytes / (size_t)count);

    for (int s = 1; s < n; s++) {
        int dst = (root + s) % n;
        dt_trace_phase("bcast_naive", "bcast");
        if (rank == root) {
            dt_trace_step(s - 1, 0, 0, (size_t)count, -1, 0, 0);
            dt_send(buf, nbytes, dst, TAG_NAIVE, comm);
        } else if (rank == dst) {
            dt_trace_step(s - 1, -1, 0, 0, 0, 0, (size_t)count);
            dt_recv(buf, nbytes, root, TAG_NAIVE, comm);
        }
        dti_step_done("bcast_naive", "bcast", s - 1, buf, count, type, comm);
    }
    return MPI_SUCCESS;
}
