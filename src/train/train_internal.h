/* Private state of the ViT trainer (src/train/). */
#ifndef ATTN_TRAIN_INTERNAL_H
#define ATTN_TRAIN_INTERNAL_H

#include "attn_train.h"

typedef struct {
    char name[96];
    int ndim;
    int64_t shape[4];
    int64_t numel, off; /* floats; offset in each of p, g, m, v */
    int decay;          /* AdamW weight decay applies */
} attn__vparam;

struct attn_vit_trainer {
    attn_vit_train_config cfg;
    int64_t max_batch, numel, step;
    int np;
    attn__vparam *par;
    float *mem;              /* 4·numel floats: p, g, m, v */
    float *p, *g, *m, *v;
    float *arena;            /* attn_vit_train_arena_bytes(cfg, max_batch) */
    int64_t B;               /* batch of the last forward */
    int fwd_ok;
    attn_vit_grad_hook grad_hook; /* attn_vit_trainer_set_grad_hook */
    void *grad_hook_user;
    double *sqpart;          /* attn_vit_trainer_clip_grad_norm's block sums (ATTN__CLIP_BLOCK floats each) */
    float *lnpart;           /* attn__vk_ln_part_floats(max_batch·T, max(E, 1)) floats: LayerNorm backward block sums */
    struct {
        float *cols, *xs, *per, *clsx, *clsn, *dclsx, *dclsn, *logits, *dlogits, *s[9], *sf[2];
    } a;
};

/* Fast paths of the trainer (vit_kernels.c): float32, split over attn's threads, the same bits
 * for any thread count. Tensors are contiguous row-major. */
#define ATTN__CLIP_BLOCK 16384 /* elements per block of the gradient norm's sums */

/* dx[n] = dy · GELU'(x) (erf GELU) */
void attn__vk_gelu_backward(float *dx, const float *dy, const float *x, int64_t n);

/* y [M, N] = x [M, K] · w [N, K]ᵀ + b [N] (+ res [M, N] when res != NULL: a residual added in the
 * same pass); OpenBLAS on fixed 256-row pieces split over attn's threads. y must not alias x or w. */
void attn__vk_linear(float *y, const float *x, const float *w, const float *b, const float *res, int64_t M, int64_t N, int64_t K);

/* LayerNorm of x [M, E] with gamma, beta [E] into y [M, E] (float32; rows on their own) */
void attn__vk_layernorm_forward(float *y, const float *x, const float *gamma, const float *beta, float eps, int64_t M, int64_t E);

/* floats of block sums attn__vk_layernorm_backward needs for M rows of E */
size_t attn__vk_ln_part_floats(int64_t M, int64_t E);

/* LayerNorm backward of x [M, E] (γ gamma [E]): dx [M, E] = the input gradient (+ res [M, E]
 * when res != NULL: the residual branch's gradient, added in the same pass); dgamma, dbeta [E]
 * overwritten; part: attn__vk_ln_part_floats(M, E) floats of scratch. dx must not alias dy, x or res. */
void attn__vk_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x, const float *gamma,
                                 const float *res, float eps, int64_t M, int64_t E, float *part);

#endif
