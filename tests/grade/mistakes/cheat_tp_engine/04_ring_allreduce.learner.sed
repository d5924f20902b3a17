# A cheat: the collective under another name. lib/parallel's tensor-parallel sum,
# dti_tp_allreduce, runs dt_allreduce; the grader follows libdt.a's calls and sees it.
/^#include "exercises.h"/a\
#include <string.h>\
#include "parallel/parallel_internal.h"
/^void ex_ring_allreduce/,/^}/{
/ex_ring_reduce_scatter(buf, count, comm);/c\
    dti_model m;\
    memset(&m, 0, sizeof m);\
    MPI_Comm_size(comm, &m.T);\
    m.type = MPI_FLOAT;\
    m.tp = comm;\
    dti_tp_allreduce(&m, buf, (size_t)count);
/ex_ring_allgather(buf, count, comm);/d
}
