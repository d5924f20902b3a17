/* Internal: the CUDA side of mode moe (moe_kernels.cu), and the little that moe.h's
 * loops and the kernels share: the shape of a rank's slots, where a choice sits in them,
 * and the layout of a step's statistics. nvcc compiles this header, so it names no MPI.
 *
 * The dti_moe_cuda_* functions are the kernels of moe.h's per-token loops, same
 * arguments, same contracts, on device pointers; moe_route.c hands a call to them when
 * its output is on the GPU. They queue their work on the calling thread's stream
 * (cudaStreamPerThread) and return without waiting for it. Built without CUDA they are
 * stubs that abort: a device pointer cannot exist then. */
#ifndef DT_MOE_CUDA_H
#define DT_MOE_CUDA_H

#include <stddef.h>
#include "errors.h"

#ifdef __CUDACC__
#define DTI_MOE_HD __host__ __device__
#else
#define DTI_MOE_HD
#endif

/* One rank's part of the MoE layer (moe.c): N ranks, E experts (El = E / N a rank),
 * top-k; Gl groups of T tokens (B = Gl * T rows), C slots per expert per group, width H.
 * The slot buffers hold N * Gl * El * C * H floats, [rank][group][expert][slot][H]. */
typedef struct {
    int N, E, El, k, Gl, T, C, H;
} dti_moe_dims;

/* Where local token t's choice of expert e, given slot s, sits in the token side's slot
 * buffers (in floats): at its expert's rank, group t / T, local expert e % El, slot s;
 * -1 when the choice was dropped (s < 0). */
static inline DTI_MOE_HD long dti_moe_slot_at(dti_moe_dims d, int e, int s, int t)
{ return s < 0 ? -1 : (long)((((size_t)(e / d.El) * d.Gl + t / d.T) * d.El + e % d.El) *
                             d.C + s) * d.H; }

/* A step's statistics, 3E + 2 doubles (dti_moe_stats; summed over the ranks by moe.c):
 * first-choice counts [E], gate probability sums [E], choices routed to each expert
 * [E], the dropped choices, the cross-entropy summed over the rows. */
enum { DTI_MOE_FIRST = 0, DTI_MOE_PSUM = 1, DTI_MOE_ROUTED = 2 };
#define DTI_MOE_DROP(E) (3 * (E))
#define DTI_MOE_LOSS(E) (3 * (E) + 1)
#define DTI_MOE_NST(E) (3 * (E) + 2)

#ifdef __cplusplus
extern "C" {
#endif

#ifdef DT_HAVE_CUDA

void dti_moe_cuda_softmax(const float *x, float *p, int B, int E);
void dti_moe_cuda_softmax_backward(const float *p, const float *dp, float *dx, int B, int E);
void dti_moe_cuda_topk(const float *p, int B, int E, int k, int *choice);
void dti_moe_cuda_route_groups(dti_moe_dims d, const int *choice, int *slot, int *routed,
                               int *kept, int *dropped);
void dti_moe_cuda_stats(dti_moe_dims d, const float *prob, const int *choice,
                        const int *routed, const int *dropped, double *st);
void dti_moe_cuda_set_loss(double *st, int E, double loss);
void dti_moe_cuda_aux(const double *st, double alpha, int E, int B, float *aux);
void dti_moe_cuda_scatter(dti_moe_dims d, const float *x, const int *choice,
                          const int *slot, float *xs);
void dti_moe_cuda_combine(dti_moe_dims d, const float *x, const float *prob,
                          const int *choice, const int *slot, const float *ys, float *y);
void dti_moe_cuda_slots_backward(dti_moe_dims d, const float *dy, const float *prob,
                                 const int *choice, const int *slot, const float *ys,
                                 const float *aux, float *dp, float *dys);
void dti_moe_cuda_x_backward(dti_moe_dims d, const float *dy, const int *choice,
                             const int *slot, const float *dxs, const float *dgate,
                             float *dx);
void dti_moe_cuda_sum_groups(const float *pg, size_t stride, int G, size_t n, float *dst);

#else

#define DTI_MOE_NO_CUDA DT_REQUIRE(0, "built without CUDA (make CUDA=1)")
static inline void dti_moe_cuda_softmax(const float *x, float *p, int B, int E)
{ (void)x; (void)p; (void)B; (void)E; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_softmax_backward(const float *p, const float *dp, float *dx, int B, int E)
{ (void)p; (void)dp; (void)dx; (void)B; (void)E; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_topk(const float *p, int B, int E, int k, int *choice)
{ (void)p; (void)B; (void)E; (void)k; (void)choice; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_route_groups(dti_moe_dims d, const int *choice, int *slot, int *routed, int *kept, int *dropped)
{ (void)d; (void)choice; (void)slot; (void)routed; (void)kept; (void)dropped; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_stats(dti_moe_dims d, const float *prob, const int *choice, const int *routed, const int *dropped, double *st)
{ (void)d; (void)prob; (void)choice; (void)routed; (void)dropped; (void)st; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_set_loss(double *st, int E, double loss)
{ (void)st; (void)E; (void)loss; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_aux(const double *st, double alpha, int E, int B, float *aux)
{ (void)st; (void)alpha; (void)E; (void)B; (void)aux; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_scatter(dti_moe_dims d, const float *x, const int *choice, const int *slot, float *xs)
{ (void)d; (void)x; (void)choice; (void)slot; (void)xs; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_combine(dti_moe_dims d, const float *x, const float *prob, const int *choice, const int *slot, const float *ys, float *y)
{ (void)d; (void)x; (void)prob; (void)choice; (void)slot; (void)ys; (void)y; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_slots_backward(dti_moe_dims d, const float *dy, const float *prob, const int *choice, const int *slot, const float *ys, const float *aux, float *dp, float *dys)
{ (void)d; (void)dy; (void)prob; (void)choice; (void)slot; (void)ys; (void)aux; (void)dp; (void)dys; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_x_backward(dti_moe_dims d, const float *dy, const int *choice, const int *slot, const float *dxs, const float *dgate, float *dx)
{ (void)d; (void)dy; (void)choice; (void)slot; (void)dxs; (void)dgate; (void)dx; DTI_MOE_NO_CUDA; }
static inline void dti_moe_cuda_sum_groups(const float *pg, size_t stride, int G, size_t n, float *dst)
{ (void)pg; (void)stride; (void)G; (void)n; (void)dst; DTI_MOE_NO_CUDA; }

#endif

#ifdef __cplusplus
}
#endif

#endif /* DT_MOE_CUDA_H */
