/*
 * attn_layers.h — multi-head attention with a KV cache, and Transformer encoder and
 * decoder layers (Vaswani et al. 2017 §3.1-3.2; pre-LN as in GPT-2 / Whisper, post-LN as in
 * the original Transformer and BERT).
 *
 * Weight layouts follow PyTorch nn.Linear: a projection from `in` to `out` features is a
 * float32 [out, in] matrix plus an optional [out] bias. An attn_tensor whose data is NULL
 * means "absent" (no bias, no LayerNorm affine parameter).
 *
 * Activations are [B, L, E] float32, contiguous (B = batch, L = seq_len, E = d_model).
 * Temporaries come from an attn_arena (released before each function returns).
 */
#ifndef ATTN_LAYERS_H
#define ATTN_LAYERS_H

#include "attn_attention.h"
#include "attn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- multi-head attention */

typedef struct {
    int64_t d_model;    /* E: width of the query input and of the output */
    int64_t n_heads;    /* H */
    int64_t n_kv_heads; /* Hkv (0 -> n_heads); H % Hkv == 0 (grouped-query attention) */
    int64_t head_dim;   /* D (0 -> d_model / n_heads); value heads have the same D */
    int64_t kv_d_model; /* width of the key/value source (0 -> d_model); cross-attention */
    float rope_theta;   /* > 0: apply RoPE to queries and keys (Su et al. 2021) with this base */
    int64_t rope_dim;   /* rotary dims (0 -> head_dim) */
    attn_rope_layout rope_layout;
} attn_mha_config;

typedef struct {
    attn_tensor wq, bq; /* [H*D, E],      [H*D]   */
    attn_tensor wk, bk; /* [Hkv*D, E_kv], [Hkv*D] */
    attn_tensor wv, bv; /* [Hkv*D, E_kv], [Hkv*D] */
    attn_tensor wo, bo; /* [E, H*D],      [E]     */
} attn_mha_weights;

/* A key/value cache: k and v are [B, Hkv, max_len, D] float32, contiguous; positions
 * 0 .. len-1 are filled. */
typedef struct {
    float *k, *v;
    int64_t batch, n_kv_heads, head_dim, max_len, len;
    int owns; /* 1 when k/v were malloc'ed by attn_kv_cache_init */
} attn_kv_cache;

/* attn_kv_cache_init: allocate an empty cache for `batch` sequences, n_kv_heads heads of
 * head_dim, up to max_len positions (2 · B · Hkv · max_len · D floats).
 * Errors: ATTN_E_INVALID (non-positive sizes), ATTN_E_NOMEM. */
int attn_kv_cache_init(attn_kv_cache *c, int64_t batch, int64_t n_kv_heads, int64_t max_len, int64_t head_dim);

/* attn_kv_cache_free: release the memory (NULL-safe); attn_kv_cache_reset: len = 0. */
void attn_kv_cache_free(attn_kv_cache *c);
/* attn_kv_cache_reset: forget every position (len = 0), keep the memory. NULL-safe. */
void attn_kv_cache_reset(attn_kv_cache *c);

/* attn_mha_check: validate a config against weights (shapes and dtypes of every present
 * tensor). Errors: ATTN_E_INVALID, ATTN_E_SHAPE, ATTN_E_DTYPE. */
int attn_mha_check(const attn_mha_config *cfg, const attn_mha_weights *w);

/* attn_mha_append_kv: project x [B, L, E_kv] to keys and values (x·Wkᵀ + bk, x·Wvᵀ + bv),
 * apply RoPE to the keys at positions cache->len .. cache->len+L-1 when cfg->rope_theta > 0,
 * and append them to the cache (cache->len += L).
 * Errors: ATTN_E_SHAPE (B, E_kv or cache geometry mismatch), ATTN_E_RANGE (cache full),
 * ATTN_E_NOMEM, errors of attn_mha_check. */
int attn_mha_append_kv(attn_kv_cache *cache, const attn_tensor *x, const attn_mha_config *cfg,
                       const attn_mha_weights *w, attn_arena *arena);

/* attn_mha_attend: queries from x_q [B, Lq, E] (projected, RoPE'd at positions
 * cache->len - Lq .. cache->len - 1 when cfg->rope_theta > 0) attend over the cache's
 * keys/values [B, Hkv, cache->len, D] with attn_sdpa and the params p (mask, is_causal
 * bottom-right, window, key_lengths); heads are concatenated and projected by Wo, bo.
 *   out      [B, Lq, E] float32, contiguous, must not alias x_q
 *   weights  NULL, [B, H, Lq, Lk] (per head) or [B, Lq, Lk] (averaged over heads, like
 *            torch.nn.MultiheadAttention's average_attn_weights=True).
 * The output is identical with and without weights requested.
 * Errors: those of attn_sdpa and attn_linear; ATTN_E_SHAPE for a weights tensor that is
 * neither form. */
int attn_mha_attend(attn_tensor *out, attn_tensor *weights, const attn_tensor *x_q, const attn_mha_config *cfg,
                    const attn_mha_weights *w, const attn_kv_cache *cache, const attn_sdpa_params *p,
                    attn_arena *arena);

/* attn_mha_forward: multi-head attention without a persistent cache:
 * self-attention when x_kv is NULL (keys/values from x_q), cross-attention otherwise.
 *   out [B, Lq, E]; x_q [B, Lq, E]; x_kv NULL or [B, Lk, E_kv]; weights as attn_mha_attend.
 * Equivalent to torch.nn.MultiheadAttention(batch_first=True) when n_kv_heads == n_heads
 * (with the attention-mask semantics of attn_sdpa). Errors: as attn_mha_attend. */
int attn_mha_forward(attn_tensor *out, attn_tensor *weights, const attn_tensor *x_q, const attn_tensor *x_kv,
                     const attn_mha_config *cfg, const attn_mha_weights *w, const attn_sdpa_params *p,
                     attn_arena *arena);

/* ---------------------------------------------------------------- encoder / decoder layers */

typedef struct {
    attn_mha_config attn;
    int64_t d_ff;        /* FFN hidden width F */
    attn_activation act; /* FFN activation (ReLU in Vaswani, GELU in BERT / GPT-2 / Whisper) */
    int norm_first;      /* 1: pre-LN (GPT-2, Whisper); 0: post-LN (Vaswani, BERT) */
    float eps;           /* LayerNorm epsilon (1e-5 PyTorch default; 1e-12 BERT) */
} attn_layer_config;

typedef struct {
    attn_mha_weights attn;           /* self-attention */
    attn_tensor ln1_g, ln1_b;        /* [E] norm around self-attention */
    attn_tensor ff_w1, ff_b1;        /* [F, E], [F] */
    attn_tensor ff_w2, ff_b2;        /* [E, F], [E] */
    attn_tensor ln2_g, ln2_b;        /* [E] norm around the FFN */
} attn_encoder_weights;

/* attn_encoder_layer: one Transformer encoder layer.
 *   post-LN: h = LN1(x + SelfAttn(x));   out = LN2(h + FFN(h))
 *   pre-LN:  h = x + SelfAttn(LN1(x));   out = h + FFN(LN2(h))
 *   out, x [B, L, E] float32 contiguous (out must not alias x);
 *   attn_weights NULL, [B, H, L, L] or [B, L, L] (see attn_mha_attend);
 *   p: attention params (key_lengths for key padding, mask, ...); NULL for none.
 * Matches torch.nn.TransformerEncoderLayer(batch_first=True, norm_first=...) and
 * Hugging Face BertLayer (post-LN, GELU, eps 1e-12).
 * Errors: shapes/dtypes of weights (ATTN_E_SHAPE / ATTN_E_DTYPE), those of attn_sdpa. */
int attn_encoder_layer(attn_tensor *out, attn_tensor *attn_weights, const attn_tensor *x,
                       const attn_layer_config *cfg, const attn_encoder_weights *w, const attn_sdpa_params *p,
                       attn_arena *arena);

typedef struct {
    attn_mha_weights self_attn;  /* masked (causal) self-attention */
    attn_tensor ln1_g, ln1_b;
    attn_mha_weights cross_attn; /* queries from the decoder, keys/values from the encoder */
    attn_tensor ln2_g, ln2_b;
    attn_tensor ff_w1, ff_b1, ff_w2, ff_b2;
    attn_tensor ln3_g, ln3_b;
} attn_decoder_weights;

/* Per-layer decoding state: the self-attention KV cache (grows one step at a time) and the
 * cross-attention keys/values (projected from the encoder output once). */
typedef struct {
    attn_kv_cache self_kv;
    attn_kv_cache cross_kv;
    int cross_ready;
} attn_decoder_state;

/* attn_decoder_state_init: caches for `batch` sequences of at most max_len target positions
 * and src_len encoder positions, shaped by cfg->attn (self) and cross_cfg (cross).
 * Errors: ATTN_E_INVALID, ATTN_E_NOMEM. */
int attn_decoder_state_init(attn_decoder_state *s, const attn_layer_config *cfg, const attn_mha_config *cross_cfg,
                            int64_t batch, int64_t max_len, int64_t src_len);
/* attn_decoder_state_free: release both caches (NULL-safe). */
void attn_decoder_state_free(attn_decoder_state *s);
/* attn_decoder_state_reset: forget all positions (a new sequence; also recomputes cross K/V). */
void attn_decoder_state_reset(attn_decoder_state *s);

/* attn_decoder_layer: one Transformer decoder layer.
 *   post-LN: h1 = LN1(x + CausalSelfAttn(x)); h2 = LN2(h1 + CrossAttn(h1, enc)); out = LN3(h2 + FFN(h2))
 *   pre-LN:  h1 = x + CausalSelfAttn(LN1(x)); h2 = h1 + CrossAttn(LN2(h1), enc); out = h2 + FFN(LN3(h2))
 *   out, x   [B, Lnew, E] float32 contiguous
 *   enc      [B, Ls, E_enc] encoder output; may be NULL when state->cross_ready
 *   enc_lengths NULL or [B] valid encoder positions (source key padding)
 *   state    NULL: a full pass over x (positions 0..Lnew-1). Non-NULL: x holds the next
 *            Lnew positions; self-attention keys/values are appended to state->self_kv and
 *            queries attend bottom-right causally over every cached position. Feeding a
 *            sequence one token at a time gives the full pass's result (to float rounding).
 *   cross_cfg the cross-attention geometry (kv_d_model = E_enc).
 * Matches torch.nn.TransformerDecoderLayer(batch_first=True, norm_first=...) with a causal
 * tgt_mask. Errors: as attn_encoder_layer; ATTN_E_INVALID when enc is NULL and the cross
 * cache is not ready; ATTN_E_RANGE when the self cache is full. */
int attn_decoder_layer(attn_tensor *out, const attn_tensor *x, const attn_tensor *enc, const int64_t *enc_lengths,
                       const attn_layer_config *cfg, const attn_mha_config *cross_cfg, const attn_decoder_weights *w,
                       attn_decoder_state *state, attn_arena *arena);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_LAYERS_H */
