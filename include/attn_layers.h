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
#include "attn_weight.h"

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

/* Per-layer decoding state: the self-attention KV cache (an attn_kv of `batch` slots, grows
 * one step at a time) and the cross-attention keys/values (projected from the encoder output
 * once). */
typedef struct attn_kv attn_kv;
typedef struct {
    attn_kv *self_kv;
    float *cross_kv; /* [batch · src_len, 2·Hkv·D] */
    int64_t batch, src_len;
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
 * tgt_mask. Runs attn_decoder_block (the cross-attention must have the self-attention's heads
 * and head_dim: ATTN_E_UNSUPPORTED otherwise). Errors: as attn_encoder_layer; ATTN_E_INVALID when enc is NULL and the cross
 * cache is not ready; ATTN_E_RANGE when the self cache is full. */
int attn_decoder_layer(attn_tensor *out, const attn_tensor *x, const attn_tensor *enc, const int64_t *enc_lengths,
                       const attn_layer_config *cfg, const attn_mha_config *cross_cfg, const attn_decoder_weights *w,
                       attn_decoder_state *state, attn_arena *arena);

/* ================================================================ the layer floor of the models
 *
 * Every model family (BERT, ViT, Llama, the CTranslate2 Transformer, Whisper) runs its layers on
 * the two functions below, on row-major activations [rows, E] float32 updated in place, with
 * weights as attn_weight handles (any storage type: float32, GGML blocks, CTranslate2 int8) and
 * one KV cache type for every decoder. A model file holds only its hyper-parameters, weights
 * and wiring (docs/architecture.md). */

typedef enum {
    ATTN_NORM_LAYER = 0,     /* LayerNorm (Ba et al. 2016), attn_layernorm's arithmetic */
    ATTN_NORM_RMS = 1,       /* RMSNorm (Zhang & Sennrich 2019; Llama): sum of squares in float64 */
    ATTN_NORM_LAYER_CT2 = 2  /* LayerNorm rounded as CTranslate2's CPU kernel (int8 models) */
} attn_norm_type;

/* a norm's parameters: g [E]; b [E] or NULL (no shift; RMSNorm has none) */
typedef struct {
    const float *g, *b;
} attn_norm_weights;

typedef struct {
    int64_t d_model;      /* E */
    int64_t n_heads;      /* H */
    int64_t n_kv_heads;   /* Hkv (0 -> H); H % Hkv == 0 (grouped-query attention) */
    int64_t head_dim;     /* D (0 -> E / H) */
    int64_t d_ff;         /* F: FFN hidden width */
    int64_t d_cross;      /* width of the cross-attention source (encoder output); 0: none */
    int norm_first;       /* 1: pre-norm (GPT-2, Llama, Whisper); 0: post-norm (Vaswani, BERT) */
    attn_norm_type norm;
    float eps;            /* norm epsilon */
    attn_activation act;  /* FFN activation */
    int gated;            /* 1: FFN = down(act(gate·x) * (up·x)) (SwiGLU, Shazeer 2020); 0: down(act(up·x)) */
    const double *rope_inv_freq; /* NULL: no rotary embedding (absolute positions are added by
                                  * the model); else [rope_dim / 2] frequencies: pair i of a query /
                                  * key head at position p turns by p · inv_freq[i] (Su et al. 2021) */
    int64_t rope_dim;     /* rotated channels per head (0 -> D) */
    attn_rope_layout rope_layout; /* pairs (2i, 2i+1) (GGUF / llama2.c) or (i, i + R/2) (NeoX) */
    int ct2_attention;    /* 1: attention with CTranslate2's CPU arithmetic (int8 models) */
    float query_scale;    /* the CTranslate2 path's softmax scale (0 -> 1 / sqrt(D)); SDPA takes p's */
    int n_threads;        /* projections and attention; <= 0: attn_get_num_threads(). An attention
                           * step under ~2e6 multiply-adds runs on one thread */
} attn_block_config;

typedef struct {
    attn_norm_weights norm1, norm2, norm3; /* around self-attention, cross-attention, FFN */
    attn_weight qkv;     /* fused [(H + 2·Hkv)·D, E] (CTranslate2), or absent and then: */
    attn_weight q, k, v; /* [H·D, E], [Hkv·D, E], [Hkv·D, E] */
    attn_weight o;       /* [E, H·D] */
    attn_weight cross_q, cross_kv, cross_o; /* [H·D, E], fused keys/values [2·Hkv·D, E_cross], [E, H·D] */
    attn_weight ff_up, ff_gate, ff_down;    /* [F, E], [F, E] (gated only), [E, F] */
} attn_block_weights;

/* attn_block_check: validate a config against weights (every shape, GQA divisibility, norm
 * parameters present). Errors: ATTN_E_INVALID, ATTN_E_SHAPE. */
int attn_block_check(const attn_block_config *c, const attn_block_weights *w);

/* attn_block_norm: y[M, E] = the config's norm of x [M, E] (y may alias x) with parameters nw
 * (a final norm after the last layer, e.g.). Errors: those of attn_layernorm. */
int attn_block_norm(float *y, const float *x, int64_t M, const attn_block_config *c, const attn_norm_weights *nw);

/* attn_encoder_block: one encoder layer on x [B·L, E] float32 (B sequences of L positions),
 * in place: post-norm x = N1(x + SelfAttn(x)); x = N3(x + FFN(x)), pre-norm
 * x = x + SelfAttn(N1(x)); x = x + FFN(N3(x)). Attention is not causal unless p says so; p
 * (NULL: defaults) gives key_lengths [B] (padding), masks, window; p->n_threads <= 0 follows
 * c->n_threads. attn_weights: NULL or [B, H, L, L] softmax weights. With c->ct2_attention the
 * attention of item b is CTranslate2's over its key_lengths[b] positions and padded query rows
 * give zeros before the output projection (as CTranslate2). Temporaries come from arena.
 * Matches torch.nn.TransformerEncoderLayer / HF BertLayer / ViTLayer / CTranslate2's
 * TransformerEncoderLayer / Whisper's encoder block by configuration.
 * Errors: those of attn_block_check, attn_sdpa and attn_weight_matmul; ATTN_E_NOMEM. */
int attn_encoder_block(float *x, float *attn_weights, const attn_block_config *c, const attn_block_weights *w, int64_t B,
                       int64_t L, const attn_sdpa_params *p, attn_arena *arena);

/* ---------------------------------------------------------------- the KV cache of every decoder */

/* An attn_kv holds keys and values of n_layers layers for n_slots independent sequences
 * (beams, or the requests of a server batch), each up to max_len positions of n_kv_heads heads
 * of head_dim floats: k(layer, slot) is [n_kv_heads, max_len, head_dim] float32 (PyTorch's and
 * llama.cpp's cache order: one KV head's positions are one run of memory, which the decode
 * attention reads at memory speed), positions 0 .. len(slot)-1 filled.
 * (typedef above, with attn_decoder_state) */

/* attn_kv_create: an empty cache (2 · n_layers · n_slots · n_kv_heads · max_len · head_dim floats).
 * Errors: ATTN_E_INVALID (sizes <= 0), ATTN_E_NOMEM. */
int attn_kv_create(attn_kv **out, int64_t n_layers, int64_t n_slots, int64_t n_kv_heads, int64_t max_len, int64_t head_dim);
/* attn_kv_free: release (NULL-safe). */
void attn_kv_free(attn_kv *c);
/* attn_kv_n_slots: the number of slots (0 for NULL). */
int64_t attn_kv_n_slots(const attn_kv *c);
/* attn_kv_max_len: positions each slot can hold (0 for NULL). */
int64_t attn_kv_max_len(const attn_kv *c);
/* attn_kv_n_kv_heads: the KV heads it was created with, n_kv_heads (0 for NULL). */
int64_t attn_kv_n_kv_heads(const attn_kv *c);
/* attn_kv_head_dim: the floats of one head at one position, head_dim (0 for NULL). */
int64_t attn_kv_head_dim(const attn_kv *c);
/* attn_kv_len: positions a slot holds (0 for NULL or a slot out of range). */
int64_t attn_kv_len(const attn_kv *c, int64_t slot);
/* attn_kv_keys: keys of (layer, slot), [n_kv_heads, max_len, head_dim] float32; NULL when out of range. */
float *attn_kv_keys(const attn_kv *c, int64_t layer, int64_t slot);
/* attn_kv_values: values of (layer, slot), laid out as the keys; NULL when out of range. */
float *attn_kv_values(const attn_kv *c, int64_t layer, int64_t slot);
/* attn_kv_write: position pos of (layer, slot) from one row of keys k and one of values v, each
 * [n_kv_heads · head_dim] float32 with the heads side by side (as a K / V projection gives them);
 * the slot's length is not changed (attn_kv_advance). Errors: ATTN_E_INVALID (no such layer or
 * slot, NULL rows), ATTN_E_RANGE (pos outside 0 .. max_len-1). */
int attn_kv_write(attn_kv *c, int64_t layer, int64_t slot, int64_t pos, const float *k, const float *v);
/* attn_kv_clear: every slot empty (len 0), memory kept. NULL-safe. */
void attn_kv_clear(attn_kv *c);
/* attn_kv_set_len: crop / rewind a slot to len (0 <= len <= its current length); the
 * positions after it are forgotten. Errors: ATTN_E_INVALID. */
int attn_kv_set_len(attn_kv *c, int64_t slot, int64_t len);
/* attn_kv_advance: the rows written by attn_decoder_block at the end of each of n slots become
 * part of them: len(slot[i]) += count[i] (slot NULL: slots 0..n-1; count NULL: 1 each).
 * Errors: ATTN_E_INVALID, ATTN_E_RANGE (past max_len). */
int attn_kv_advance(attn_kv *c, const int64_t *slot, const int64_t *count, int64_t n);
/* attn_kv_reorder: beam search's reorder: new slot i (i < n) takes old slot src[i]'s positions
 * (src may repeat or drop slots; every layer; lengths follow). Identity orders cost nothing.
 * Errors: ATTN_E_INVALID (src out of range, n > n_slots), ATTN_E_NOMEM. */
int attn_kv_reorder(attn_kv *c, const int64_t *src, int64_t n);

/* The rows of one decoder step: row r holds the next position of sequence slot[r] (rows of the
 * same slot are consecutive and take consecutive positions: a prompt chunk), and attends,
 * causally, over that slot's cached positions and itself. */
typedef struct {
    int64_t n_rows;            /* N */
    const int64_t *slot;       /* [N] cache slot of each row; NULL: row r -> slot r */
    /* cross-attention (c->d_cross > 0): keys and values projected once per source */
    const float *cross_kv;     /* [n_items, cross_len, 2·Hkv·D] (keys then values per position) */
    int64_t cross_len;         /* Ls: positions per item (padded) */
    const int64_t *cross_lengths; /* [n_items] valid positions, or NULL (all cross_len) */
    const int64_t *row_item;   /* [N] item of each row (rows of an item consecutive); NULL: all item 0 */
    float *cross_weights;      /* NULL or [N, H, cross_len]: the cross-attention softmax weights,
                                * zeros past an item's length */
} attn_decoder_rows;

/* attn_decoder_block: one decoder layer (index `layer` of the cache) on x [N, E] in place:
 * causal self-attention over the KV cache (this step's keys and values are written at each
 * slot's next positions; attn_kv_advance commits them after the last layer), then, when
 * c->d_cross > 0, cross-attention over rows->cross_kv, then the FFN; pre- or post-norm.
 * RoPE (c->rope_inv_freq) turns queries and keys by their positions in their slots.
 * Feeding a sequence one position at a time gives the full pass's result to float rounding.
 * Matches Llama's decoder layer (RMSNorm, SwiGLU, RoPE, GQA), torch.nn.TransformerDecoderLayer,
 * CTranslate2's TransformerDecoderLayer and Whisper's decoder block by configuration.
 * Errors: those of attn_block_check / attn_sdpa / attn_weight_matmul; ATTN_E_RANGE (a slot
 * full); ATTN_E_UNSUPPORTED (CTranslate2 arithmetic with several positions of one slot). */
int attn_decoder_block(float *x, const attn_block_config *c, const attn_block_weights *w, int64_t layer, attn_kv *cache,
                       const attn_decoder_rows *rows, attn_arena *arena);

/* attn_cross_kv: project a source's keys and values once: out [M, 2·Hkv·D] = [enc·Wkᵀ | enc·Wvᵀ]
 * for enc [M, E_cross] (M = items · cross_len), with w->cross_kv. Errors: as attn_weight_matmul. */
int attn_cross_kv(float *out, const float *enc, int64_t M, const attn_block_config *c, const attn_block_weights *w);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_LAYERS_H */
