/*
 * attn_train.h — backward passes of the Transformer's non-attention building blocks (the
 * attention backward is attn_sdpa_backward in attn_attention.h) and the classification loss.
 *
 * Conventions: float32 tensors, contiguous (row-major); a "row" is the last dimension and the
 * leading dimensions are flattened into M rows. Every gradient output is written (overwritten),
 * or, where a function takes `accumulate` != 0, added to (parameter gradients summed over
 * several calls, e.g. micro-batches). Gradients may not alias the forward's inputs unless
 * stated. Each function matches torch.autograd of the torch function named in its comment.
 */
#ifndef ATTN_TRAIN_H
#define ATTN_TRAIN_H

#include "attn_core.h"
#include "attn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* attn_linear_backward: gradients of y = x · Wᵀ + b (torch.nn.functional.linear).
 *   dy [..., N], x [..., K], w [N, K] (nn.Linear.weight layout)
 *   dx [..., K] (NULL = not wanted) = dy · W
 *   dw [N, K]   (NULL = not wanted) = dyᵀ · x   (over all M rows)
 *   db [N]      (NULL = not wanted) = sum of dy's rows
 * accumulate != 0: dw and db are added to (dx is always overwritten).
 * GEMMs by OpenBLAS cblas_sgemm (float32 accumulation); db sums in double.
 * Errors: ATTN_E_INVALID (NULL dy / x / w, non-contiguous), ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_linear_backward(attn_tensor *dx, attn_tensor *dw, attn_tensor *db, const attn_tensor *dy,
                         const attn_tensor *x, const attn_tensor *w, int accumulate);

/* attn_layernorm_backward: gradients of attn_layernorm (torch.nn.LayerNorm, biased variance)
 * over the last dim E, with x̂ = (x - mean)·rstd, rstd = 1/sqrt(var + eps) recomputed per row
 * in float64 and g = dy·gamma:
 *   dx = rstd · (g - mean(g) - x̂ · mean(g·x̂))       [..., E] (NULL = not wanted)
 *   dgamma = Σ_rows dy·x̂ [E], dbeta = Σ_rows dy [E]  (NULL = not wanted; accumulate as above)
 * gamma [E] or NULL (= 1). eps >= 0 (a constant row with eps = 0 gives dx = 0, never NaN).
 * Errors: ATTN_E_INVALID, ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_layernorm_backward(attn_tensor *dx, attn_tensor *dgamma, attn_tensor *dbeta, const attn_tensor *dy,
                            const attn_tensor *x, const attn_tensor *gamma, float eps, int accumulate);

/* attn_rmsnorm_backward: gradients of attn_rmsnorm (y = x·r·w, r = 1/sqrt(mean(x²) + eps) over
 * the last dim E; torch.nn.functional.rms_norm), r recomputed per row in float64, g = dy·w:
 *   dx = r·(g - x·r²·mean(g·x))  [..., E] (NULL = not wanted)
 *   dweight = Σ_rows dy·x·r      [E] (NULL = not wanted; accumulate as above)
 * weight [E] or NULL (= 1). Errors as attn_layernorm_backward. */
int attn_rmsnorm_backward(attn_tensor *dx, attn_tensor *dweight, const attn_tensor *dy, const attn_tensor *x,
                          const attn_tensor *weight, float eps, int accumulate);

/* attn_embedding_backward: gradient of attn_embedding (torch.nn.functional.embedding): for each
 * position n, dtable[ids[n], :] += dy[n, :] (rows of repeated ids summed, in id order of
 * appearance; float32). ids [...] int32 / int64, dy [..., E], dtable [V, E]; accumulate == 0
 * zeroes dtable first. Errors: ATTN_E_RANGE (an id outside 0..V-1, naming it; dtable is then
 * unchanged), ATTN_E_DTYPE, ATTN_E_SHAPE, ATTN_E_INVALID. */
int attn_embedding_backward(attn_tensor *dtable, const attn_tensor *dy, const attn_tensor *ids, int accumulate);

/* attn_activation_backward: dx = dy · act'(x), element-wise, for every attn_activation:
 * RELU (derivative 0 at x = 0, as torch), GELU (exact: Φ(x) + x·φ(x)), GELU_TANH (derivative of
 * the tanh form, as torch's gelu(approximate="tanh")), SILU (σ(x)(1 + x(1 - σ(x)))), IDENTITY.
 * Computed in double per element. dx may alias dy. dx, dy, x the same shape.
 * Errors: ATTN_E_INVALID (unknown act), ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_activation_backward(attn_tensor *dx, const attn_tensor *dy, const attn_tensor *x, attn_activation act);

/* attn_softmax_backward: gradient of y = softmax(x) over the last dim given y (the forward's
 * output): dx = y · (dy - Σ_j dy_j·y_j) (row sum in double). dx may alias dy.
 * Errors: ATTN_E_INVALID, ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_softmax_backward(attn_tensor *dx, const attn_tensor *dy, const attn_tensor *y);

/* attn_cross_entropy: mean cross-entropy of logits [N, C] against class labels [N] (int32 or
 * int64), with label smoothing s in [0, 1) (torch.nn.functional.cross_entropy(logits, labels,
 * label_smoothing=s), reduction "mean": the target is (1 - s)·onehot + s/C):
 *   *loss = (1/N) Σ_n [ logsumexp(z_n) - (1 - s)·z_n[y_n] - (s/C)·Σ_c z_n[c] ]   (double)
 *   dlogits [N, C] (NULL = not wanted) = (softmax(z_n) - target_n) / N
 * N = 0 gives loss 0. Errors: ATTN_E_INVALID (NULL, s outside [0, 1)), ATTN_E_DTYPE,
 * ATTN_E_SHAPE, ATTN_E_RANGE (a label outside 0..C-1, naming it; NaN / inf in the logits). */
int attn_cross_entropy(double *loss, attn_tensor *dlogits, const attn_tensor *logits, const attn_tensor *labels,
                       double label_smoothing);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_TRAIN_H */
