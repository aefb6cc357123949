/*
 * attn_ops.h — the Transformer's non-attention building blocks: linear projections,
 * normalisation, activations, softmax, embeddings, feed-forward networks and positional
 * encodings.
 *
 * Unless stated otherwise: tensors are float32 views; `out` may alias `x` (in place) for
 * element-wise ops, norms and softmax; a "row" is the last dimension.
 */
#ifndef ATTN_OPS_H
#define ATTN_OPS_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- linear */

/* attn_linear: out = x · Wᵀ + b (torch.nn.functional.linear).
 *   x   [..., in]  float32, contiguous
 *   w   [out_f, in] float32, contiguous (PyTorch nn.Linear.weight layout)
 *   b   [out_f] float32 or NULL
 *   out [..., out_f] float32, contiguous, same leading dims as x; must not alias x.
 * GEMM by OpenBLAS cblas_sgemm (fp32 accumulation).
 * Errors: ATTN_E_INVALID (NULL, non-contiguous, aliasing), ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_linear(attn_tensor *out, const attn_tensor *x, const attn_tensor *w, const attn_tensor *b);

/* ---------------------------------------------------------------- norms */

/* attn_layernorm: y = (x - mean) / sqrt(var + eps) * gamma + beta over the last dim
 * (Ba et al. 2016; torch.nn.LayerNorm, biased variance). Two-pass in float64, so large
 * offsets are exact to float32 rounding: x = [40000, 40001, 40002, 40003], eps 1e-5 gives
 * [-1.34164, -0.44721, 0.44721, 1.34164]; a constant row gives beta.
 *   out, x [..., E]; gamma, beta [E] or NULL (=1 / =0). eps >= 0.
 * Errors: ATTN_E_INVALID, ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_layernorm(attn_tensor *out, const attn_tensor *x, const attn_tensor *gamma,
                   const attn_tensor *beta, float eps);

/* attn_rmsnorm: y = x / sqrt(mean(x²) + eps) * weight over the last dim (Zhang & Sennrich
 * 2019; Llama's RMSNorm). out, x [..., E]; weight [E] or NULL. Errors as attn_layernorm. */
int attn_rmsnorm(attn_tensor *out, const attn_tensor *x, const attn_tensor *weight, float eps);

/* ---------------------------------------------------------------- activations */

typedef enum {
    ATTN_ACT_RELU = 0,      /* max(x, 0) */
    ATTN_ACT_GELU = 1,      /* x·Φ(x) with the exact erf form (Hendrycks & Gimpel 2016; BERT) */
    ATTN_ACT_GELU_TANH = 2, /* 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) (GPT-2 "gelu_new") */
    ATTN_ACT_SILU = 3,      /* x·sigmoid(x) (a.k.a. swish; Llama) */
    ATTN_ACT_IDENTITY = 4
} attn_activation;

/* attn_activate: out = act(x) element-wise; out and x the same shape, any strides.
 * Errors: ATTN_E_INVALID (unknown act), ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_activate(attn_tensor *out, const attn_tensor *x, attn_activation act);

/* Scalar forms (gelu in float with erff; gelu_tanh and silu in double). */
float attn_gelu(float x);
/* attn_gelu_tanh: the tanh approximation of GELU (see ATTN_ACT_GELU_TANH). */
float attn_gelu_tanh(float x);
/* attn_silu: x * sigmoid(x). */
float attn_silu(float x);

/* ---------------------------------------------------------------- softmax */

/* attn_softmax: numerically safe softmax over the last dim (subtracts the row max).
 * -inf entries get probability 0; a row that is entirely -inf gives all zeros (not NaN).
 * out, x [..., N] float32 (may alias). NaN inputs are an error (ATTN_E_RANGE).
 * Errors: ATTN_E_INVALID, ATTN_E_DTYPE, ATTN_E_SHAPE, ATTN_E_RANGE. */
int attn_softmax(attn_tensor *out, const attn_tensor *x);

/* ---------------------------------------------------------------- embeddings */

/* attn_embedding: out[..., :] = table[ids[...], :] (torch.nn.Embedding).
 *   ids   [...] int32 (ATTN_I32) or int64 (ATTN_I64), any shape
 *   table [V, E] float32
 *   out   [..., E] float32 (ids' shape plus E)
 * Errors: ATTN_E_RANGE (an id < 0 or >= V, naming the id and position), ATTN_E_DTYPE,
 * ATTN_E_SHAPE. */
int attn_embedding(attn_tensor *out, const attn_tensor *ids, const attn_tensor *table);

/* ---------------------------------------------------------------- feed-forward */

/* attn_ffn: position-wise feed-forward network (Vaswani et al. 2017 §3.3):
 *   out = act(x·W1ᵀ + b1)·W2ᵀ + b2
 *   x [..., E] contiguous; w1 [F, E]; b1 [F] or NULL; w2 [E_out, F]; b2 [E_out] or NULL;
 *   out [..., E_out] contiguous, not aliasing x. Scratch [rows, F] comes from `arena`
 *   (released before return).
 * Errors: as attn_linear, ATTN_E_NOMEM. */
int attn_ffn(attn_tensor *out, const attn_tensor *x, const attn_tensor *w1, const attn_tensor *b1,
             const attn_tensor *w2, const attn_tensor *b2, attn_activation act, attn_arena *arena);

/* attn_ffn_gated: gated feed-forward (Shazeer 2020, "GLU Variants"); SwiGLU with
 * act = ATTN_ACT_SILU as in Llama:
 *   out = (act(x·W_gateᵀ) ⊙ (x·W_upᵀ))·W_downᵀ
 *   x [..., E]; w_gate, w_up [F, E]; w_down [E_out, F]; out [..., E_out]; no biases.
 * Errors: as attn_ffn. */
int attn_ffn_gated(attn_tensor *out, const attn_tensor *x, const attn_tensor *w_gate,
                   const attn_tensor *w_up, const attn_tensor *w_down, attn_activation act,
                   attn_arena *arena);

/* ---------------------------------------------------------------- positional encodings */

/* attn_pe_sinusoidal: the fixed table of Vaswani et al. 2017 §3.5 for positions
 * offset .. offset+L-1:  PE[p, 2i] = sin(p / 10000^(2i/D)),  PE[p, 2i+1] = cos(p / 10000^(2i/D)).
 * Odd D works (the last channel is a sin). d_model = 5 at position 1 gives
 * [0.841471, 0.540302, 0.025116, 0.999685, 0.000631].
 *   out [L, D] float32 (computed in float64). offset >= 0.
 * Errors: ATTN_E_INVALID (NULL, offset < 0), ATTN_E_DTYPE, ATTN_E_SHAPE (not 2-D). */
int attn_pe_sinusoidal(attn_tensor *out, int64_t offset);

/* attn_pe_learned: learned absolute positions (BERT, GPT-2): out[l, :] = table[offset + l, :].
 *   out [L, E]; table [P, E] (P = max positions).
 * Errors: ATTN_E_RANGE when offset + L > P (message names both), ATTN_E_SHAPE, ATTN_E_DTYPE. */
int attn_pe_learned(attn_tensor *out, const attn_tensor *table, int64_t offset);

typedef enum {
    ATTN_ROPE_HALF = 0,       /* rotate pairs (i, i + R/2): HF Llama, GPT-NeoX ("rotate_half") */
    ATTN_ROPE_INTERLEAVED = 1 /* rotate pairs (2i, 2i + 1): GPT-J, original RoFormer */
} attn_rope_layout;

/* attn_rope: rotary position embedding (Su et al. 2021, RoFormer) applied in place.
 *   x [B, H, L, D] float32, any strides (a query or key view); position of x[..., l, :] is
 *   offset + l. Pair i (i < R/2) rotates by angle pos · theta^(-2i/R), R = rotary_dim
 *   (0 -> D; must be even and <= D); channels >= R are left unchanged (partial rotary,
 *   GPT-NeoX / GPT-J rotary_pct).  theta: base, 10000 for most models.
 * Angles are computed in float64.
 * Errors: ATTN_E_INVALID (odd or too large rotary_dim, theta <= 0, offset < 0),
 * ATTN_E_SHAPE (not 4-D), ATTN_E_DTYPE. */
int attn_rope(attn_tensor *x, int64_t offset, float theta, int64_t rotary_dim, attn_rope_layout layout);

/* attn_alibi_slopes: the per-head slopes of ALiBi (Press et al. 2022): for n heads a power
 * of two, m_h = 2^(-8(h+1)/n); otherwise the slopes of the closest power of two below n,
 * followed by every other slope of twice that power (the paper's reference rule).
 *   slopes [n_heads] float (plain array).
 * Errors: ATTN_E_INVALID (NULL, n_heads <= 0). */
int attn_alibi_slopes(float *slopes, int64_t n_heads);

/* attn_alibi_bias: the additive bias -m_h · |qpos - j| with qpos = i + Lk - Lq (bottom-right
 * aligned, matching is_causal), for use as a float32 mask of attn_sdpa.
 *   out [H, Lq, Lk] float32.  For causal models (j <= qpos) this is m_h · (j - qpos), ALiBi's
 *   original form.
 * Errors: ATTN_E_SHAPE (not 3-D), ATTN_E_DTYPE, ATTN_E_INVALID. */
int attn_alibi_bias(attn_tensor *out);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_OPS_H */
