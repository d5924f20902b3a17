/* Memory the ranks of one host share (hostmem.c): one block, made once by dt_init, that
 * holds a small head every rank reads and writes (the board of who is waiting, watch.c)
 * and one part per rank of the host (its mailbox slots, mailbox.c), each part on pages
 * of its own. Internal to lib/. */
#ifndef DT_HOSTMEM_H
#define DT_HOSTMEM_H

#include <mpi.h>
#include <stddef.h>

/* Collective over local, the ranks of this host (rank 0 of local makes the block). Maps
 * head bytes and local's size parts of part bytes each, all zero, in every rank of the
 * host, and notes each rank's rank in MPI_COMM_WORLD there. Returns 1 on every rank
 * when every rank has the block; else 0 on every rank, and each rank has a block of its
 * own instead (its head and its own part only: nothing is shared). One rank alone on its
 * host gets a block of its own and 1, with no MPI call. */
int dti_host_open(MPI_Comm local, size_t head, size_t part);
/* The head; the part of local rank i (NULL for another rank's when nothing is shared);
 * the rank in MPI_COMM_WORLD of local rank i (-1 when not known); whether the block is
 * shared. Valid from dti_host_open until dti_host_close. */
void *dti_host_head(void);
void *dti_host_part(int i);
int dti_host_world_rank(int i);
int dti_host_shared(void);
/* Unmaps this rank's view (no MPI call: the memory goes when the last rank's view does). */
void dti_host_close(void);

#endif /* DT_HOSTMEM_H */
