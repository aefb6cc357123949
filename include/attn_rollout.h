/*
 * attn_rollout.h — attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in
 * Transformers", §3): how much each input token flows into each output token through all
 * layers, counting the residual connections.
 */
#ifndef ATTN_ROLLOUT_H
#define ATTN_ROLLOUT_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* attn_attention_rollout: for each batch item b, with W_l the softmax attention of layer l
 * averaged over its heads,
 *     A_l = 0.5 · W_l + 0.5 · I   (each row renormalised to sum 1),
 *     R   = A_{L-1} · ... · A_1 · A_0,
 * so R[i, j] is the share of input token j in output token i (rows sum to 1). For a ViT,
 * R[0, 1:] is where the CLS token — the one the classifier reads — draws from, per patch.
 *   out         [B, T, T] float32 (computed in float64)
 *   attentions  [L, B, H, T, T] float32 softmax weights, contiguous (as attn_vit_forward's
 *               attn_vit_extra.attentions or attn_bert_extra.attentions)
 * Errors: ATTN_E_INVALID (NULL pointers, a size < 1, T > 65536), ATTN_E_RANGE (a weight that
 * is NaN, infinite or negative), ATTN_E_NOMEM. Cost: L matrix products of T x T (OpenBLAS
 * dgemm) and 3 T x T float64 buffers; for one row use attn_attention_rollout_row. */
int attn_attention_rollout(float *out, const float *attentions, int64_t L, int64_t B, int64_t H, int64_t T);

/* attn_attention_rollout_row: row `row` of attn_attention_rollout's R for each batch item,
 * computed as a row vector through the layers, e_row · A_{L-1} · ... · A_0 (float64), in
 * O(L · H · T^2) time and O(L · T) memory instead of O(L · T^3) and 3 T x T doubles; equals
 * attn_attention_rollout(...)[b, row, :] up to float64 rounding (test_viz: max difference
 * 2^-24 relative after the float32 cast). row = 0 is a ViT's CLS token.
 *   out         [B, T] float32
 *   attentions  [L, B, H, T, T] float32 softmax weights, contiguous
 * Errors: as attn_attention_rollout (the same first bad weight is named), and ATTN_E_RANGE
 * for row outside [0, T). */
int attn_attention_rollout_row(float *out, const float *attentions, int64_t L, int64_t B, int64_t H, int64_t T,
                               int64_t row);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_ROLLOUT_H */
