/* Gather: every rank's block ends up at the root, in rank order (MPI_Gather). */
#include "collectives.h"
#include "buf.h"
#include "internal.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"

#define TAG (DT_TAG_BASE + 4)

/* ==== binomial tree ====
 *
 * The reduce tree, but instead of adding the children's data a rank appends it: every
 * rank collects its whole subtree's blocks and sends them to its parent in one message.
 * 4 ranks, root 0, rank r holding block X_r:
 *
 *      step 0:   [B] 1 --> 0        [D] 3 --> 2          0 has A B    2 has C D
 *      step 1:                [C D] 2 --> 0               0 has A B C D
 *
 * The tree is built on virtual ranks v = (rank - root) mod n, and a subtree is a run of
 * consecutive virtual ranks v .. v+size-1 (dt_tree_subtree_size). So each rank keeps a
 * temporary buffer in virtual order, its own block first, and a child's subtree lands
 * at offset (child's v - own v) blocks: contiguous, no sorting. At the root the buffer
 * holds the blocks of virtual ranks 0..n-1, that is of ranks root, root+1, ..., n-1,
 * 0, ..., root-1; one rotation puts them in rank order. 4 ranks, root 2:
 *
 *      virtual order [C D A B]  --rotate by 2-->  recvbuf [A B C D]
 *
 * (With root 0 the orders agree and the root gathers straight into recvbuf.)
 *
 * Step table, 5 ranks, root 0: step 0: 1 -> 0 [B], 3 -> 2 [D]; step 1: 2 -> 0 [C D];
 * step 2: 4 -> 0 [E].
 *
 * Invariant: after step t, a virtual rank v that has not yet sent holds the blocks of
 * virtual ranks v .. v + 2^(t+1) - 1 (those below n), in order.
 *
 * Cost, blocks of S bytes: ceil(log2 n) steps; the root receives (n-1) * S in all, as in
 * any gather, but from only ceil(log2 n) senders. A rank sends its subtree once, so
 * bytes on the wire add up to S * (n/2) log2 n for n a power of two: more than a
 * naive gather's (n-1) * S, traded for log2 n steps instead of n-1.
 *
 * In the trace, chunk is the rank heading the subtree that moves, and [lo, hi) its
 * elements in virtual order. The step hook sees each rank's virtual-order buffer, whose
 * count is its subtree's (leaves show their own block). */
int dt_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
              void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    DT_REQUIRE(root >= 0 && root < n,
               "dt_gather: root %d is not a rank of this communicator (0..%d)", root, n - 1);
    int in_place = sendbuf == MPI_IN_PLACE;
    DT_REQUIRE(!in_place || rank == root, "dt_gather: rank %d passed MPI_IN_PLACE, which "
               "only the root may do (its block is then already in recvbuf)", rank);
    DT_REQUIRE(rank != root || recvbuf != MPI_IN_PLACE,
               "dt_gather: MPI_IN_PLACE goes in sendbuf (at the root), not recvbuf");

    /* The receive arguments matter at the root only, the send arguments everywhere but
     * at an in-place root (MPI's rules). */
    int count = sendcount;
    MPI_Datatype type = sendtype;
    if (rank == root) {
        DT_REQUIRE(recvcount >= 0, "dt_gather: recvcount is %d at the root; it must be 0 "
                   "or more", recvcount);
        DT_REQUIRE(in_place || sendtype == recvtype, "dt_gather: sendtype and recvtype "
                   "differ at the root; dtlab needs them to be the same");
        DT_REQUIRE(in_place || sendcount == recvcount, "dt_gather: sendcount %d and "
                   "recvcount %d differ at the root; they must be equal", sendcount, recvcount);
        DT_REQUIRE(recvbuf != NULL || recvcount == 0,
                   "dt_gather: recvbuf is NULL at the root but recvcount is %d", recvcount);
        count = recvcount;
        type = recvtype;
    }
    DT_REQUIRE(count >= 0, "dt_gather: sendcount is %d; it must be 0 or more", count);
    DT_REQUIRE(in_place || sendbuf != NULL || count == 0,
               "dt_gather: sendbuf is NULL but sendcount is %d", count);
    size_t blk = (size_t)count * dt_type_size(type);
    if (count == 0)
        return MPI_SUCCESS;
    dt_trace_call("gather_tree", (size_t)n * count, dt_type_size(type));

    int v = (rank - root + n) % n;
    int size = dt_tree_subtree_size(rank, root, n);
    int parent = dt_tree_parent(rank, root, n);
    int children[32];
    int nchildren = dt_tree_children(rank, root, n, children);
    int my_round = dt_tree_round(rank, root, n);     /* -1 at the root */
    const void *own = in_place ? (char *)recvbuf + (size_t)root * blk : sendbuf;

    /* buf: this subtree's blocks in virtual order, own block first (scratch, kept by this
     * thread between calls). A leaf needs none. */
    char *buf = NULL;
    if (rank == root && root == 0)
        buf = recvbuf;
    else if (size > 1 || rank == root)
        buf = dti_scratch(DTI_SCRATCH_TREE, (size_t)size * blk,
                          rank == root ? recvbuf : sendbuf);
    if (buf)
        dt_memcpy(buf, own, blk);
    const void *out = buf ? (const void *)buf : sendbuf;

    int K = dt_log2_ceil(n);
    for (int t = 0; t < K; t++) {
        int k = K - 1 - t;                        /* the broadcast round, backwards */
        dt_trace_phase("gather_tree", "gather");
        for (int i = 0; i < nchildren; i++) {
            if (dt_tree_round(children[i], root, n) != k)
                continue;
            int cv = (children[i] - root + n) % n;
            int csize = dt_tree_subtree_size(children[i], root, n);
            dt_trace_step(t, -1, 0, 0, children[i], (size_t)cv * count,
                          (size_t)(cv + csize) * count);
            dt_recv(buf + (size_t)(cv - v) * blk, (size_t)csize * blk, children[i], TAG, comm);
        }
        if (k == my_round) {
            dt_trace_step(t, rank, (size_t)v * count, (size_t)(v + size) * count, -1, 0, 0);
            dt_send(out, (size_t)size * blk, parent, TAG, comm);
        }
        dti_step_done("gather_tree", "gather", t, out, size * count, type, comm);
    }

    if (rank == root && root != 0) {
        /* virtual blocks 0..n-root-1 are ranks root..n-1; the rest are ranks 0..root-1 */
        dt_memcpy((char *)recvbuf + (size_t)root * blk, buf, (size_t)(n - root) * blk);
        dt_memcpy(recvbuf, buf + (size_t)(n - root) * blk, (size_t)root * blk);
    }
    return MPI_SUCCESS;
}
