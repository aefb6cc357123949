/* Attention of short sequences (src/attention/sdpa_short.c): unmasked float32 attention of Lq, Lk <=
 * ATTN__SHORT_MAX_L positions as small register-blocked products per (batch, head) instead of the
 * fused kernel's 64 x 64 tiles (mostly padding at a ViT's 17 tokens). attn_sdpa takes it for the
 * default implementation; the ViT trainer (src/train/) calls the forward and backward directly. */
#ifndef ATTN_SHORT_INTERNAL_H
#define ATTN_SHORT_INTERNAL_H

#include "attn_attention.h"

#define ATTN__SHORT_MAX_L 64  /* longest query / key sequence of the short kernel */
#define ATTN__SHORT_MAX_D 256 /* largest head size (q·k and v) */
#define ATTN__SHORT_DECLINED 1 /* attn__sdpa_short: not a short unmasked float32 case */

/* attn_sdpa for the cases the short kernel takes: impl ATTN_IMPL_DEFAULT, no mask / causal / window /
 * key_lengths, float32 q, k, v and out (and weights, when given) of rank 4, q, k, v, out with unit last-dim stride,
 * 1 <= Lq, Lk <= ATTN__SHORT_MAX_L, 1 <= D, Dv <= ATTN__SHORT_MAX_D (GQA and p->lse supported).
 * Returns ATTN__SHORT_DECLINED (nothing checked or written) for any other case; otherwise the status
 * of attn_sdpa (the same validation, and the fused kernel's errors for non-finite inputs and for scaled
 * scores past float32). The bits differ from the fused kernel's (another summation order): a caller
 * that gives key_lengths equal to Lk gets the fused kernel, one that gives none this one. */
int attn__sdpa_short(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                     const attn_sdpa_params *p);

/* Self-attention of q, k, v [B, T, H·D] (heads side by side, as projections write them; rows ldq floats
 * apart: q, k, v may be the thirds of one fused [B·T, 3·H·D] buffer; 1 <= T <= ATTN__SHORT_MAX_L,
 * 1 <= D <= ATTN__SHORT_MAX_D), scale 1/sqrt(D), no mask: out [B, T, H·D] (contiguous), lse [B, H, T]
 * (natural log-sum-exp of the scaled scores, as attn_sdpa's params.lse). No input checks (the
 * trainer's activations). Split over attn's threads by (b, h) item: the same bits for any thread count.
 * Returns ATTN_OK, ATTN_E_RANGE when a score (scale·q)·k is NaN or inf (diverged weights: out is then
 * undefined), or ATTN_E_NOMEM (the per-thread scratch: at most 160 KiB a thread). */
int attn__short_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v, int64_t ldq, int64_t B,
                                   int64_t T, int64_t H, int64_t D);

/* its backward from out, lse and dout [B, T, H·D] (contiguous): dq, dk, dv [B, T, H·D] (rows ldq apart,
 * like q, k, v) overwritten (FlashAttention-2's backward formulas, P recomputed from lse); status as the forward */
int attn__short_attention_backward(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                                    const float *out, const float *lse, const float *dout, int64_t ldq, int64_t B, int64_t T,
                                    int64_t H, int64_t D);

#endif
