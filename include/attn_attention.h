/*
 * attn_attention.h — scaled dot-product attention (SDPA).
 *
 *   out = softmax(Q·Kᵀ·scale + mask) · V          (Vaswani et al. 2017, eq. 1)
 *
 * Shapes (PyTorch order):
 *   q        [B, H,   Lq, D]    float32, bfloat16 or float16, any strides
 *   k        [B, Hkv, Lk, D]    same dtype as q, any strides; H must be a multiple of Hkv
 *   v        [B, Hkv, Lk, Dv]   same dtype as q, any strides
 *   out      [B, H,   Lq, Dv]   float32, bfloat16 or float16 (any of them, whatever q's dtype),
 *                               any strides (written)
 *   weights  [B, H,   Lq, Lk]   float32, optional (written when not NULL)
 * Half-precision inputs (bfloat16 / float16) are read exactly and computed in float32: the fused
 * kernel widens each tile of q, k and v to float32 as it loads it (k and v are never copied
 * whole) and runs the float32 kernels, accumulating in float32; the reference reads them into
 * float64. A half output is the float32 result rounded once (to nearest even). On this code's
 * CPUs there is no native bf16 arithmetic path (AVX-512 BF16 / AMX kernels are absent), so the
 * arithmetic cost is that of float32; the memory traffic for k and v is halved.
 * Measured error against the float64 reference of the same half inputs, inputs ~N(0,1): as for
 * float32 inputs (< 2e-6 x max|out|); see tests/test_sdpa_half.c.
 * Grouped-query attention: query head h reads kv head h / (H / Hkv) (Ainslie et al. 2023;
 * H == Hkv is ordinary multi-head attention, Hkv == 1 is multi-query attention).
 *
 * Visibility of key j to query i (all conditions combine with AND):
 *   - bool mask:   mask[..., i, j] != 0 (true = may attend; torch's boolean attn_mask).
 *   - float mask:  added to the scaled score. A value of -inf, or <= -FLT_MAX (the
 *                  "finfo.min" convention of Hugging Face), marks the key as masked; any
 *                  other finite value (e.g. -6e4, -1e9) is a real additive bias.
 *                  NaN or +inf in a float mask is rejected (ATTN_E_RANGE).
 *                  The mask is broadcast to [B, H, Lq, Lk] with NumPy rules (1 to 4 dims,
 *                  aligned at the right, every extent 1 or the full size).
 *   - is_causal:   aligned bottom-right (KV-cache convention): j <= i + Lk - Lq.
 *   - window W>0:  sliding window of W keys ending at the query's own position:
 *                  i + Lk - Lq - W < j <= i + Lk - Lq (Mistral / Longformer one-sided;
 *                  implies the causal bound).
 *   - key_lengths: per batch row b, keys j >= key_lengths[b] are padding (right padding).
 * A query row with no visible key produces out = 0 and weights = 0 (never NaN); this
 * differs from torch, which returns NaN there.
 *
 * Softmax is computed stably: the row max over visible keys is subtracted before exp.
 */
#ifndef ATTN_ATTENTION_H
#define ATTN_ATTENTION_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_IMPL_DEFAULT = 0,   /* the library's best implementation: the short-sequence kernel for unmasked
                                float32 with Lq, Lk <= 64, else fused */
    ATTN_IMPL_REFERENCE = 1, /* plain float64-accumulating reference path (the oracle) */
    ATTN_IMPL_FUSED = 2      /* tiled online-softmax kernel */
} attn_impl;

typedef struct {
    const attn_tensor *mask;    /* NULL, or bool/float32 broadcastable to [B, H, Lq, Lk] */
    int is_causal;              /* bottom-right causal mask */
    int64_t window;             /* 0 = none; > 0 = sliding window size W (see above) */
    const int64_t *key_lengths; /* NULL, or [B] valid key counts (0 <= len <= Lk) */
    int has_scale;              /* 0: scale = 1/sqrt(D); 1: use `scale` (may be any finite value) */
    float scale;
    int n_threads;              /* <= 0: attn_get_num_threads() */
    attn_impl impl;             /* which implementation attn_sdpa uses */
    attn_tensor *lse;           /* NULL, or float32 [B, H, Lq], any strides (written): each query row's
                                   log-sum-exp, the natural log of sum_j exp(scale·q·k_j + mask_j) over
                                   its visible keys (the softmax's normaliser, what attn_sdpa_backward
                                   takes); -inf for a row with no visible key. Layers that take
                                   attn_sdpa_params hand them to each attn_sdpa call they make:
                                   leave it NULL there unless the layer documents it. */
} attn_sdpa_params;

/* attn_sdpa_params_default: all fields zero: no mask, not causal, default scale, default
 * threads, default implementation, no log-sum-exp output. */
attn_sdpa_params attn_sdpa_params_default(void);

/* ATTN_SDPA_ROW_PATH_MAX_LQ: up to this many query rows an SDPA call takes the fused kernel's row
 * (decode) path, more rows its tile path; the two sum a row's scores in different orders, so a
 * row's bits depend on which one ran (a prompt fed in pieces of <= 4 rows differs from one fed
 * whole; pieces of more rows agree: attn_llama_batch_keep_slot). */
#define ATTN_SDPA_ROW_PATH_MAX_LQ 4

/* attn_sdpa: scaled dot-product attention with the semantics above, dispatching on
 * p->impl (p may be NULL for the defaults).
 * Errors: ATTN_E_INVALID (NULL q/k/v/out, window < 0, non-finite scale, key_lengths out of
 * range, n_threads > ATTN_MAX_THREADS), ATTN_E_DTYPE (q/k/v/out not float32 / bfloat16 / float16, q, k, v of different dtypes,
 * weights or lse not float32, mask neither bool nor float32),
 * ATTN_E_SHAPE (rank != 4, B or D mismatch, H % Hkv != 0, Hkv == 0, mask not broadcastable,
 * out/weights/lse shape wrong), ATTN_E_RANGE (NaN or +inf in a float mask).
 * NaN/inf in q, k or v is reported as ATTN_E_RANGE naming the tensor and index. The reference
 * path scans all of q, k and v first; the fused path scans q, checks every score block and its
 * result, so it reports only keys and values it reads (keys outside every query's causal /
 * window / key_lengths range are skipped and cannot change the result), and out may have been
 * written when it fails. A score of a visible key that overflows float32 in the fused path is
 * ATTN_E_RANGE too; a masked key's score (bool mask, -inf / <= -FLT_MAX, key_lengths, causal,
 * window) never raises an error or changes the result, even when q.k overflows. A result that
 * does not fit out's dtype (e.g. |out| > 65504 with a float16 out) is ATTN_E_RANGE.
 * Source: Vaswani et al. 2017 §3.2.1; semantics of torch.nn.functional.scaled_dot_product_attention
 * (PyTorch 2.x) except the empty-row and -FLT_MAX rules stated above. */
int attn_sdpa(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
              const attn_tensor *v, const attn_sdpa_params *p);

/* attn_sdpa_reference: the plain reference implementation (float64 accumulation, one
 * query row at a time, materialises each score row). Same contract as attn_sdpa. */
int attn_sdpa_reference(attn_tensor *out, attn_tensor *weights, const attn_tensor *q,
                        const attn_tensor *k, const attn_tensor *v, const attn_sdpa_params *p);

/* attn_sdpa_check: validate shapes, dtypes and parameters exactly as attn_sdpa does,
 * without computing. On success fills the sizes (any pointer may be NULL).
 * Errors: as attn_sdpa. */
int attn_sdpa_check(const attn_tensor *out, const attn_tensor *weights, const attn_tensor *q,
                    const attn_tensor *k, const attn_tensor *v, const attn_sdpa_params *p,
                    int64_t *B, int64_t *H, int64_t *Hkv, int64_t *Lq, int64_t *Lk, int64_t *D,
                    int64_t *Dv);

/* attn_sdpa_kernel_name: which code attn_sdpa runs for implementation `impl` and input dtype
 * `dtype` on this CPU with the current ATTN_SIMD setting (ATTN_SIMD = avx512 | avx2 | portable |
 * auto forces the fused kernel's SIMD path): a constant string such as "reference",
 * "fused avx2" or "fused avx2 (bfloat16 widened to float32 per tile)" (the long-sequence kernel: with
 * ATTN_IMPL_DEFAULT, unmasked float32 attention of Lq, Lk <= 64 runs the short-sequence kernel of the
 * same SIMD path instead). For benchmarks and logs.
 * Returns NULL (attn_last_error set) when ATTN_SIMD names a path this CPU cannot run or is not a
 * known value, or for an unknown impl / dtype. */
const char *attn_sdpa_kernel_name(attn_impl impl, attn_dtype dtype);

/* attn_sdpa_backward: gradients of attn_sdpa's out with respect to q, k and v, given the
 * forward's out and log-sum-exp (attn_sdpa_params.lse) and the gradient dout of a loss with
 * respect to out.
 * Shapes (PyTorch order), all float32, any strides:
 *   q    [B, H,   Lq, D]     k  [B, Hkv, Lk, D]     v  [B, Hkv, Lk, Dv]
 *   out  [B, H,   Lq, Dv]    lse [B, H, Lq] (natural log; -inf for a row with no visible key)
 *   dout [B, H,   Lq, Dv]
 *   dq   [B, H,   Lq, D]  (written)   dk [B, Hkv, Lk, D] (written)   dv [B, Hkv, Lk, Dv] (written)
 * p: the forward's parameters (mask, is_causal, window, key_lengths, scale; the same visibility
 * rules as attn_sdpa); p->lse is not read (lse is the argument above); p->n_threads as attn_sdpa;
 * p->impl = ATTN_IMPL_REFERENCE runs attn_sdpa_backward_reference. p may be NULL (defaults).
 * With S = scale·q·kᵀ + mask, P = exp(S - lse), Δ_i = sum_e dout[i][e]·out[i][e]:
 *   dv_j = sum_i P_ij dout_i,  dP_ij = dout_i·v_j,  dS_ij = P_ij (dP_ij - Δ_i),
 *   dq_i = scale · sum_j dS_ij k_j,  dk_j = scale · sum_i dS_ij q_i;
 * under GQA (H = g·Hkv) dk and dv of kv head hk sum over its g query heads. A query row with no
 * visible key gets dq = 0 and contributes nothing (never NaN); a key no query sees gets dk = dv = 0.
 * Masked entries of a float mask get no gradient (the mask is not differentiated).
 * Algorithm: FlashAttention-2's backward (Dao 2023, Algorithm 2) without materialising the
 * [Lq, Lk] matrix: P is recomputed per tile (64 queries x 64 keys) from lse; pass 1 gives every
 * thread whole key blocks of one (b, kv head) — it owns their dk / dv and loops over the query
 * heads of the group and the query blocks —, pass 2 gives every thread whole query blocks of one
 * (b, h) and accumulates their dq over the key blocks (recomputing P and dS: no atomics, no
 * per-thread copies of dq, and the result does not depend on the thread count). Cost ≈ 7
 * [Lq x Lk x D] products (the forward does 2).
 * Memory beyond the inputs and outputs: 4·B·H·Lq bytes (Δ) plus a per-thread scratch of
 * about 4·(64·(5·D + 3·Dv) + 2·64·64) bytes (290 KiB at D = Dv = 128), i.e. O(L): 0.38 MiB in
 * all at B = H = 1, L = 16384, D = 64 with 2 threads (tests/test_sdpa_backward.c).
 * The SIMD path follows ATTN_SIMD as attn_sdpa's fused kernel: AVX2 + FMA when the CPU has it
 * (also with avx512 selected: the backward has no AVX-512 kernel), else portable C.
 * Errors: ATTN_E_INVALID (a NULL tensor, bad parameters as attn_sdpa), ATTN_E_DTYPE (a tensor not
 * float32, mask neither bool nor float32), ATTN_E_SHAPE (shapes above), ATTN_E_RANGE (NaN / inf
 * in q, k, v, out or dout; NaN or +inf in lse; a gradient that overflows float32 — then dq, dk
 * and dv are undefined), ATTN_E_NOMEM. The outputs must not overlap the inputs.
 * Source: Dao 2023, "FlashAttention-2", Algorithm 2; matches torch.autograd through
 * torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x) except for fully masked rows,
 * where torch gives NaN. */
int attn_sdpa_backward(attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                       const attn_tensor *k, const attn_tensor *v, const attn_tensor *out,
                       const attn_tensor *lse, const attn_tensor *dout, const attn_sdpa_params *p);

/* attn_sdpa_backward_reference: the float64 oracle of attn_sdpa_backward: one query row at a
 * time it materialises the row's scores and probabilities in double, recomputing the softmax,
 * out and Δ from q, k and v (out and lse are checked, not used), and accumulates dk and dv of a
 * (b, kv head) in double. Memory 8·(Lk·(D + Dv + 2) + D) bytes per thread. Same contract. */
int attn_sdpa_backward_reference(attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                                 const attn_tensor *k, const attn_tensor *v, const attn_tensor *out,
                                 const attn_tensor *lse, const attn_tensor *dout, const attn_sdpa_params *p);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_ATTENTION_H */
