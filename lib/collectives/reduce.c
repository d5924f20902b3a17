/* Reduce: the element-wise reduction (sum, max, min, prod) of every rank's buffer ends
 * up at the root (MPI_Reduce). It is a broadcast run backwards: partial results flow up
 * the same binomial tree, each rank combining its children's with its own. */
#include "collectives.h"
#include "buf.h"
#include "internal.h"
#include "ops.h"
#include "p2p.h"
#include "schedule.h"
#include "trace.h"

#define TAG (DT_TAG_BASE + 3)

/* ==== binomial tree ====
 *
 * 4 ranks, root 0, each rank r starting with its data x_r. The tree of dt_bcast, with
 * the arrows turned round and the rounds in reverse order:
 *
 *      step 0:   x1 --> 0          x3 --> 2           (0 has x0+x1, 2 has x2+x3)
 *      step 1:             x2+x3 --> 0                (0 has x0+x1+x2+x3)
 *
 *                 0  <---- 2            the leaves send first; a rank sends to its
 *                 ^        ^            parent once all its children have reported
 *                 |        |
 *                 1        3
 *
 * Step table, 5 ranks, root 0 (virtual ranks v = rank - root mod n, as in dt_bcast):
 *
 *     step   sends                 partial sums afterwards
 *       0    1 -> 0,  3 -> 2       0: x0+x1   2: x2+x3   4: x4
 *       1    2 -> 0                0: x0+x1+x2+x3        4: x4
 *       2    4 -> 0                0: everything
 *
 * Invariant: after step t, a virtual rank v that has not yet sent holds the reduction of
 * the virtual ranks v .. v + 2^(t+1) - 1 (those below n): its subtree so far.
 *
 * Cost, S bytes: every non-root sends S once; a rank receives S from each of its children
 * (the root from ceil(log2 n) of them) and reduces each into its partial result.
 * ceil(log2 n) steps. The reduction order differs from MPICH's, so floating-point sums
 * may differ from MPI_Reduce's in the last bits; all dtlab's ops are commutative. */
int dt_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
              MPI_Op op, int root, MPI_Comm comm)
{
    int rank, n;
    DT_CHECK_MPI(MPI_Comm_rank(comm, &rank));
    DT_CHECK_MPI(MPI_Comm_size(comm, &n));
    DT_REQUIRE(count >= 0, "dt_reduce: count is %d; it must be 0 or more", count);
    DT_REQUIRE(root >= 0 && root < n,
               "dt_reduce: root %d is not a rank of this communicator (0..%d)", root, n - 1);
    (void)dt_op_of(op);        /* aborts with a message for an op dtlab does not know */
    int in_place = sendbuf == MPI_IN_PLACE;
    DT_REQUIRE(!in_place || rank == root, "dt_reduce: rank %d passed MPI_IN_PLACE, which "
               "only the root may do (its input is then in recvbuf)", rank);
    DT_REQUIRE(rank != root || recvbuf != MPI_IN_PLACE,
               "dt_reduce: MPI_IN_PLACE goes in sendbuf (at the root), not recvbuf");
    DT_REQUIRE(in_place || sendbuf != NULL || count == 0,
               "dt_reduce: sendbuf is NULL but count is %d", count);
    DT_REQUIRE(rank != root || recvbuf != NULL || count == 0,
               "dt_reduce: recvbuf is NULL at the root but count is %d", count);
    size_t nbytes = (size_t)count * dt_type_size(type);
    if (count == 0)
        return MPI_SUCCESS;
    dt_trace_call("reduce_tree", (size_t)count, dt_type_size(type));

    int parent = dt_tree_parent(rank, root, n);
    int children[32];
    int nchildren = dt_tree_children(rank, root, n, children);
    int my_round = dt_tree_round(rank, root, n);     /* -1 at the root */

    /* acc: this rank's partial result. The root builds it in recvbuf; a rank with
     * children in scratch; a leaf has nothing to add and sends its input as is. Both
     * scratch buffers are this thread's, kept between calls. */
    void *acc = NULL, *tmp = NULL;
    if (rank == root) {
        acc = recvbuf;
        if (!in_place)
            dt_memcpy(recvbuf, sendbuf, nbytes);
    } else if (nchildren > 0) {
        acc = dti_scratch(DTI_SCRATCH_TREE, nbytes, sendbuf);
        dt_memcpy(acc, sendbuf, nbytes);
    }
    const void *out = acc ? acc : sendbuf;       /* what goes up, and what the hook sees */
    if (nchildren > 0)
        tmp = dti_scratch(DTI_SCRATCH_PEER, nbytes, acc);   /* one child's partial result */

    int K = dt_log2_ceil(n);
    for (int t = 0; t < K; t++) {
        int k = K - 1 - t;                        /* the broadcast round, backwards */
        dt_trace_phase("reduce_tree", "reduce");
        for (int i = 0; i < nchildren; i++) {
            if (dt_tree_round(children[i], root, n) != k)
                continue;
            dt_trace_step(t, -1, 0, 0, 0, 0, (size_t)count);
            dt_recv(tmp, nbytes, children[i], TAG, comm);
            dt_reduce_local(tmp, acc, count, type, op);
        }
        if (k == my_round) {
            dt_trace_step(t, 0, 0, (size_t)count, -1, 0, 0);
            dt_send(out, nbytes, parent, TAG, comm);
        }
        dti_step_done("reduce_tree", "reduce", t, out, count, type, comm);
    }
    return MPI_SUCCESS;
}
