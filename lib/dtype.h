/* dtlab's datatypes and ops as small enums, for switch statements and CUDA kernels.
 * No MPI here, so .cu files can include it; buf.h maps MPI's handles onto these. */
#ifndef DT_DTYPE_H
#define DT_DTYPE_H

typedef enum { DT_F32 = 0, DT_F64 = 1, DT_I32 = 2, DT_F16 = 3, DT_B16 = 4 } dt_dtype;   /* B16: bfloat16 */
typedef enum { DT_OP_SUM = 0, DT_OP_MAX = 1, DT_OP_MIN = 2, DT_OP_PROD = 3 } dt_op;

#endif /* DT_DTYPE_H */
