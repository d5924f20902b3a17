/* Internal to lib/: the dti_ helpers the core's files share. Not part of the API. */
#ifndef DT_INTERNAL_H
#define DT_INTERNAL_H

#include <mpi.h>

void dti_buf_init(void);        /* creates DT_HALF and its MPI ops (dt_init) */
void dti_buf_fini(void);
void dti_p2p_fini(void);        /* frees the staging buffers (dt_finalize) */
int dti_gpu_count(void);        /* GPUs this rank can use: 0 on the CPU or without CUDA */

#endif /* DT_INTERNAL_H */
