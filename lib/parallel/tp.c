/* Tensor parallelism: one layer's matrix cut over T ranks, each computing its part.
 *
 * A linear layer y = x W^T + b with W (out, in) can be cut two ways:
 *
 *   by columns of the output        by rows of the output (input features)
 *   (DTI_COL: W's rows [lo, hi))     (DTI_ROW: W's columns [lo, hi))
 *
 *        W^T: in x out                    W^T: in x out
 *       +----+----+----+                  +-------------+
 *       | r0 | r1 | r2 |                  |     r0      |
 *       |    |    |    |                  +-------------+
 *       +----+----+----+                  |     r1      |
 *   x whole -> y cut by columns           +-------------+
 *                                    x cut by columns -> y = sum of partial y's
 *
 * Megatron-LM pairs them: layer 2k cut by columns, layer 2k+1 by rows. The activation
 * between them is elementwise, so each rank applies it to its own columns and feeds
 * them straight into its rows of the next layer: no communication inside the pair.
 * The pair's output is the sum of the ranks' partial outputs: one allreduce (the "g"
 * operator). In backward, the gradient entering the pair is whole, each rank computes
 * its part, and the input gradient is a sum of partials: one allreduce (the "f"
 * operator, identity in forward):
 *
 *   forward:   x --f--> [COL, act] --local--> [ROW] --g: allreduce--> y
 *   backward:  dx <--f: allreduce-- [COL] <--local-- [ROW] <--g-- dy
 *
 * Cost per pair with B rows and hidden width H: 2 allreduces of B*H floats, whatever
 * T is, against weights of 2H^2 split T ways. The trace marks each by its name (coll
 * "tp", phase "g" or "f", chunk = the layer: model.c records them around the calls).
 *
 * The simpler scheme (DT_TP_ALLGATHER, the seeds' first idea) cuts every layer by
 * columns and allgathers its output, so every layer's input is whole: one allgather
 * in forward and one allreduce in backward per LAYER, twice Megatron's traffic. A last
 * layer left without a partner (an odd number of layers) uses it in Megatron too.
 * (Traced as "gather" for the allgather, "f" for the backward allreduce.)
 *
 * Ranks own the column ranges of dt_chunk_bounds; the output layer may have any width
 * (messages are padded to the widest block); hidden widths must divide by T so that
 * every rank gets the same share of the work (dt_train_check). */
#include <string.h>
#include "buf.h"
#include "collectives/collectives.h"
#include "cuda.h"
#include "parallel_internal.h"
#include "schedule.h"

dti_split dti_tp_split(const dt_mlp_config *c, int l, int T, dt_tp_style s)
{
    if (T == 1)
        return DTI_WHOLE;
    if (s == DT_TP_ALLGATHER)
        return DTI_COL_GATHER;
    if (l % 2 == 1)
        return DTI_ROW;
    return l + 1 < c->layers ? DTI_COL : DTI_COL_GATHER;
}

/* Copies a (rows, cols) block between matrices with row strides dld and sld (elements
 * of es bytes); host or device. Between two device matrices it is one 2-D copy on the
 * GPU (a copy per row would wait for the GPU once a row). */
void dti_copy_block(void *dst, size_t dld, const void *src, size_t sld, int rows,
                    int cols, size_t es)
{
    if (dld == sld && dld == (size_t)cols) {
        dt_memcpy(dst, src, (size_t)rows * cols * es);
        return;
    }
    if (rows > 0 && cols > 0 && dt_is_device_ptr(dst) && dt_is_device_ptr(src)) {
        dti_cuda_memcpy2d(dst, dld * es, src, sld * es, (size_t)cols * es, (size_t)rows);
        return;
    }
    for (int i = 0; i < rows; i++)
        dt_memcpy((char *)dst + i * dld * es, (const char *)src + i * sld * es,
                  (size_t)cols * es);
}

/* The sum over the tensor-parallel group of n floats, in place: g in forward, f in
 * backward. In fp16 the partial sums travel as fp16 (half the bytes). */
void dti_tp_allreduce(dti_model *m, float *x, size_t n)
{
    if (m->T == 1)
        return;
    if (m->type == MPI_FLOAT) {
        dt_allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, m->tp);
    } else {
        void *h = m->tmp;
        dti_from_float(x, h, m->type, n);
        dt_allreduce(MPI_IN_PLACE, h, (int)n, m->type, MPI_SUM, m->tp);
        dti_to_float(h, m->type, x, n, 1.0f);
    }
}

/* Each rank holds columns [lo_t, hi_t) of a (B, width) matrix as zloc (B, hi_t - lo_t);
 * afterwards every rank holds all of it in z. Blocks are padded to the widest, so one
 * dt_allgather of equal blocks moves them. In fp32 the blocks are the floats themselves
 * (padded straight into mine, read straight out of all); in fp16 they are converted
 * into and out of the wire type through padded. */
void dti_tp_allgather_cols(dti_model *m, const float *zloc, float *z, int B, int width)
{
    int T = m->T, fp32 = m->type == MPI_FLOAT;
    size_t lo, hi, wmax = (size_t)(width + T - 1) / T;
    size_t es = fp32 ? sizeof(float) : 2;
    size_t block = (size_t)B * wmax;
    char *mine = (char *)m->tmp, *all = mine + block * es;
    float *padded = (float *)(all + (size_t)T * block * es);
    dt_chunk_bounds((size_t)width, T, m->t, &lo, &hi);
    /* zloc into a padded block, in the wire type */
    float *pad = fp32 ? (float *)mine : padded;
    dt_memzero(pad, block * sizeof(float));
    dti_copy_block(pad, wmax, zloc, hi - lo, B, (int)(hi - lo), sizeof(float));
    if (!fp32)
        dti_from_float(padded, mine, m->type, block);
    dt_allgather(mine, (int)block, m->type, all, (int)block, m->type, m->tp);
    for (int r = 0; r < T; r++) {
        dt_chunk_bounds((size_t)width, T, r, &lo, &hi);
        const float *got = (const float *)(all + r * block * es);   /* (B, wmax) */
        if (!fp32) {
            dti_to_float(got, m->type, padded, block, 1.0f);
            got = padded;
        }
        dti_copy_block(z + lo, (size_t)width, got, wmax, B, (int)(hi - lo),
                       sizeof(float));
    }
}

/* Floats of scratch the two operators above need for B rows of a layer (out, in). */
size_t dti_tp_scratch(int T, int B, int in, int out)
{
    size_t wide = (size_t)(in > out ? in : out);
    size_t wmax = (size_t)(out + T - 1) / T;
    size_t gather = (size_t)B * wmax * (T + 2);
    size_t reduce = (size_t)B * wide;
    return gather > reduce ? gather : reduce;
}
