/* Scatter: the root cuts its buffer into n blocks and rank r gets block r (MPI_Scatter). */
#include "collectives.h"
#include "buf.h"
#include "internal.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"

#define TAG (DT_TAG_BASE + 5)

/* ==== binomial tree ====
 *
 * The mirror of dt_gather: the root sends each child the blocks of that child's whole
 * subtree, and every rank keeps its own block and passes the rest on down, in the rounds
 * of dt_bcast. 4 ranks, root 0, sending blocks A B C D:
 *
 *      round 0:   0 --[C D]--> 2                    2 has C D
 *      round 1:   0 --[B]--> 1      2 --[D]--> 3    everyone has its block
 *
 * Blocks travel in virtual-rank order (v = (rank - root) mod n), where a subtree is a run
 * of consecutive virtual ranks, so what a child needs is contiguous: the subtree of
 * virtual child c sits at offset (c - own v) blocks in its parent's buffer. The root
 * first rotates its buffer into virtual order (4 ranks, root 2):
 *
 *      sendbuf [A B C D]  --rotate by 2-->  virtual order [C D A B]
 *
 * (With root 0 the orders agree and the root sends straight from sendbuf.)
 *
 * Step table, 5 ranks, root 0: round 0: 0 -> 4 [E]; round 1: 0 -> 2 [C D];
 * round 2: 0 -> 1 [B], 2 -> 3 [D].
 *
 * Invariant: after round k, each virtual rank v that is a multiple of 2^(K-1-k),
 * K = ceil(log2 n), holds the blocks of virtual ranks v .. v + 2^(K-1-k) - 1 (those
 * below n): the part of the tree it still has to serve.
 *
 * Cost, blocks of S bytes: ceil(log2 n) rounds; the root sends (n-1) * S in all, but
 * in only ceil(log2 n) messages; a rank receives its subtree's blocks once.
 *
 * In the trace, chunk is the rank heading the subtree that moves, and [lo, hi) its
 * elements in virtual order. The step hook sees each rank's virtual-order buffer, whose
 * count is its subtree's (leaves show their own block). */
int dt_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    DT_REQUIRE(root >= 0 && root < n,
               "dt_scatter: root %d is not a rank of this communicator (0..%d)", root, n - 1);
    int in_place = recvbuf == MPI_IN_PLACE;
    DT_REQUIRE(!in_place || rank == root, "dt_scatter: rank %d passed MPI_IN_PLACE, which "
               "only the root may do (its block then stays in sendbuf)", rank);
    DT_REQUIRE(rank != root || sendbuf != MPI_IN_PLACE,
               "dt_scatter: MPI_IN_PLACE goes in recvbuf (at the root), not sendbuf");

    /* The send arguments matter at the root only, the receive arguments everywhere but
     * at an in-place root (MPI's rules). */
    int count = recvcount;
    MPI_Datatype type = recvtype;
    if (rank == root) {
        DT_REQUIRE(sendcount >= 0, "dt_scatter: sendcount is %d at the root; it must be 0 "
                   "or more", sendcount);
        DT_REQUIRE(in_place || sendtype == recvtype, "dt_scatter: sendtype and recvtype "
                   "differ at the root; dtlab needs them to be the same");
        DT_REQUIRE(in_place || sendcount == recvcount, "dt_scatter: sendcount %d and "
                   "recvcount %d differ at the root; they must be equal", sendcount, recvcount);
        DT_REQUIRE(sendbuf != NULL || sendcount == 0,
                   "dt_scatter: sendbuf is NULL at the root but sendcount is %d", sendcount);
        count = sendcount;
        type = sendtype;
    }
    DT_REQUIRE(count >= 0, "dt_scatter: recvcount is %d; it must be 0 or more", count);
    DT_REQUIRE(in_place || recvbuf != NULL || count == 0,
               "dt_scatter: recvbuf is NULL but recvcount is %d", count);
    size_t blk = (size_t)count * dt_type_size(type);
    if (count == 0)
        return MPI_SUCCESS;
    dt_trace_call("scatter_tree", (size_t)n * count, dt_type_size(type));

    int v = (rank - root + n) % n;
    int size = dt_tree_subtree_size(rank, root, n);
    int parent = dt_tree_parent(rank, root, n);
    int children[32];
    int nchildren = dt_tree_children(rank, root, n, children);
    int my_round = dt_tree_round(rank, root, n);     /* -1 at the root */

    /* buf: this subtree's blocks in virtual order, own block first; tmp, when needed,
     * is scratch kept by this thread between calls. A leaf receives straight into
     * recvbuf. */
    const char *buf;
    char *tmp = NULL;
    if (rank == root && root == 0) {
        buf = sendbuf;
    } else if (rank == root) {
        /* ranks root..n-1 become virtual blocks 0..n-root-1, ranks 0..root-1 the rest */
        buf = tmp = dti_scratch(DTI_SCRATCH_TREE, (size_t)n * blk, sendbuf);
        dt_memcpy(tmp, (const char *)sendbuf + (size_t)root * blk, (size_t)(n - root) * blk);
        dt_memcpy(tmp + (size_t)(n - root) * blk, sendbuf, (size_t)root * blk);
    } else if (size > 1) {
        buf = tmp = dti_scratch(DTI_SCRATCH_TREE, (size_t)size * blk, recvbuf);
    } else {
        buf = recvbuf;
    }

    for (int k = 0; k < dt_log2_ceil(n); k++) {
        dt_trace_phase("scatter_tree", "scatter");
        if (k == my_round) {
            dt_trace_step(k, -1, 0, 0, rank, (size_t)v * count, (size_t)(v + size) * count);
            dt_recv(tmp ? tmp : recvbuf, (size_t)size * blk, parent, TAG, comm);
        }
        for (int i = 0; i < nchildren; i++) {
            if (dt_tree_round(children[i], root, n) != k)
                continue;
            int cv = (children[i] - root + n) % n;
            int csize = dt_tree_subtree_size(children[i], root, n);
            dt_trace_step(k, children[i], (size_t)cv * count, (size_t)(cv + csize) * count,
                          -1, 0, 0);
            dt_send(buf + (size_t)(cv - v) * blk, (size_t)csize * blk, children[i], TAG, comm);
        }
        dti_step_done("scatter_tree", "scatter", k, buf, size * count, type, comm);
    }

    if (!in_place)
        dt_memcpy(recvbuf, buf, blk);             /* own block; a no-op for a leaf */
    return MPI_SUCCESS;
}
