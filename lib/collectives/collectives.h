/* The collectives, written by hand on dtlab's point-to-point layer (p2p.h).
 *
 * Each takes exactly the arguments of the MPI function it mirrors, so a learner can
 * swap dt_allreduce for MPI_Allreduce and compare. All of them:
 *   - accept host or device buffers (all buffers of one call in the same place);
 *   - accept MPI_FLOAT, MPI_DOUBLE, MPI_INT, DT_HALF and MPI_SUM, MPI_MAX, MPI_MIN,
 *     MPI_PROD where they reduce;
 *   - accept MPI_IN_PLACE where MPI does, with MPI's meaning;
 *   - work for any number of ranks from 1 and any count from 0;
 *   - need the send and receive types to be the same (and the counts to match), which
 *     MPI relaxes; a mismatch aborts with a message.
 * They are blocking, and every rank of comm must call them in the same order.
 * Plain names pick the best algorithm; the suffix names one (_ring, _tree, _naive, _rd). */
#ifndef DT_COLLECTIVES_H
#define DT_COLLECTIVES_H

#include <mpi.h>
#include <stddef.h>

/* ==== one to all, all to one ==== */

/* Binomial tree from root: ceil(log2 n) rounds. */
int dt_bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
/* The root sends the whole buffer to each rank in turn: n-1 rounds. */
int dt_bcast_naive(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm);

/* Binomial tree towards root. MPI_IN_PLACE as sendbuf at the root: the root's input is
 * in recvbuf. recvbuf matters at the root only. */
int dt_reduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
              MPI_Op op, int root, MPI_Comm comm);

/* Binomial tree: each rank forwards its whole subtree's blocks to its parent.
 * MPI_IN_PLACE as sendbuf at the root: its block is already in place in recvbuf. */
int dt_gather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
              void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);

/* Binomial tree, the mirror of gather. MPI_IN_PLACE as recvbuf at the root: its block
 * stays where it is in sendbuf. */
int dt_scatter(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
               void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm);

/* ==== all to all ==== */

/* Ring: n-1 steps, each rank passing on the block it received last. MPI_IN_PLACE as
 * sendbuf: each rank's block is already at its place in recvbuf. */
int dt_allgather(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                 void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

/* Ring: n-1 steps; rank r ends with block r of the reduction of everyone's
 * n*recvcount elements. MPI_IN_PLACE as sendbuf: the input is in recvbuf (n*recvcount
 * elements), and block r is left at the start of recvbuf. */
int dt_reduce_scatter_block(const void *sendbuf, void *recvbuf, int recvcount,
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm);

/* Pairwise exchange: n-1 steps, at step s sending to rank+s and receiving from rank-s.
 * MPI_IN_PLACE as sendbuf: the blocks are taken from recvbuf and replaced. */
int dt_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm);

/* ==== allreduce ==== All accept MPI_IN_PLACE as sendbuf. */

/* Picks rd below DT_ALLREDUCE_RD_MAX bytes (and when the count is below the rank count),
 * ring above; DT_ALLREDUCE_ALGO=ring|naive|rd in the environment forces one. */
#define DT_ALLREDUCE_RD_MAX (64 * 1024)
int dt_allreduce(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                 MPI_Op op, MPI_Comm comm);
/* Reduce-scatter, then allgather, on a ring: each rank sends 2(n-1)/n of the buffer. */
int dt_allreduce_ring(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                      MPI_Op op, MPI_Comm comm);
/* Everything to rank 0, reduced there, sent back: the parameter-server pattern. */
int dt_allreduce_naive(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                       MPI_Op op, MPI_Comm comm);
/* Recursive doubling: log2 n exchanges of the whole buffer; few steps, for small buffers. */
int dt_allreduce_rd(const void *sendbuf, void *recvbuf, int count, MPI_Datatype type,
                    MPI_Op op, MPI_Comm comm);

/* ==== watching the algorithms ==== */

/* Called on every rank after each step of the ring reduce-scatter and allgather (and the
 * other step-wise algorithms), with the buffer being worked on (count elements, host or
 * device). Collective: every rank calls it at the same step, so it may itself
 * communicate (lesson 08 gathers every rank's buffer and prints it). NULL turns it off. */
typedef void (*dt_step_hook)(const char *coll, const char *phase, int step,
                             const void *buf, int count, MPI_Datatype type,
                             MPI_Comm comm, void *ctx);
void dt_set_step_hook(dt_step_hook fn, void *ctx);

/* Internal to lib/collectives: the ring phases on a whole buffer cut with dt_chunk_bounds,
 * shared by reduce-scatter, allgather and allreduce, and the hook. The reduce-scatter
 * reads the rank's data from src and writes to buf (src == buf: in place); after it,
 * chunk r of buf is final, and other chunks are partial or unwritten. */
void dti_ring_reduce_scatter(const void *src, void *buf, int count, MPI_Datatype type,
                             MPI_Op op, MPI_Comm comm, const char *coll);
void dti_ring_allgather(void *buf, int count, MPI_Datatype type, MPI_Comm comm,
                        const char *coll);
/* The checks of the block collectives (allgather, alltoall: every rank sends and
 * receives n blocks of recvcount), in fn's name; returns a block's bytes. */
size_t dti_check_blocks(const char *fn, const void *sendbuf, int sendcount,
                        MPI_Datatype sendtype, const void *recvbuf, int recvcount,
                        MPI_Datatype recvtype, int n);
void dti_step_done(const char *coll, const char *phase, int step,
                   const void *buf, int count, MPI_Datatype type, MPI_Comm comm);


#endif /* DT_COLLECTIVES_H */
