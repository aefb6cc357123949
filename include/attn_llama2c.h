/*
 * attn_llama2c.h — reader for llama2.c checkpoints (Karpathy's llama2.c, run.c "version 0"
 * export: export.py legacy_export / train.py).
 *
 * Layout (little-endian, no padding):
 *   i32 dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len   (28 bytes)
 *   float32 token_embedding_table [vocab, dim]
 *           rms_att_weight [n_layers, dim]
 *           wq [n_layers, dim, dim], wk [n_layers, kv_dim, dim], wv [n_layers, kv_dim, dim],
 *           wo [n_layers, dim, dim]
 *           rms_ffn_weight [n_layers, dim]
 *           w1 [n_layers, hidden, dim], w2 [n_layers, dim, hidden], w3 [n_layers, hidden, dim]
 *           rms_final_weight [dim]
 *           freq_cis_real, freq_cis_imag [seq_len, head_dim / 2] each (unused, legacy)
 *           wcls [vocab, dim]   only when vocab_size < 0 in the header (unshared classifier)
 * with head_dim = dim / n_heads and kv_dim = n_kv_heads · head_dim; every matrix is PyTorch's
 * nn.Linear weight [out_features, in_features], row-major. A positive vocab_size means the
 * classifier shares the token embedding (run.c: shared_weights = vocab_size > 0).
 */
#ifndef ATTN_LLAMA2C_H
#define ATTN_LLAMA2C_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define ATTN_LLAMA2C_HEADER_BYTES 28

/* A parsed checkpoint: hyper-parameters and float32 views into the caller's bytes (aligned
 * as the bytes are: 4-byte aligned when data is, e.g. an mmap). Shapes in PyTorch order. */
typedef struct {
    int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, context;
    int64_t head_dim;         /* dim / n_heads */
    int shared_classifier;    /* 1: output == tok_embd */
    const float *tok_embd;    /* [vocab, dim] */
    const float *attn_norm;   /* [n_layers, dim] RMSNorm weights before attention */
    const float *wq, *wo;     /* [n_layers, dim, dim] */
    const float *wk, *wv;     /* [n_layers, n_kv_heads·head_dim, dim] */
    const float *ffn_norm;    /* [n_layers, dim] RMSNorm weights before the feed-forward */
    const float *w1, *w3;     /* [n_layers, hidden_dim, dim] gate and up projections */
    const float *w2;          /* [n_layers, dim, hidden_dim] down projection */
    const float *final_norm;  /* [dim] */
    const float *output;      /* [vocab, dim] classifier */
} attn_llama2c;

/* attn_llama2c_parse: check the header of data[0..size) and lay the weights out over it; name
 * (e.g. the path) starts every message. Nothing is allocated; the views live as long as data.
 * Limits (the library's Llama limits): dim <= 65536, hidden_dim <= 2^20, n_layers <= 1024,
 * 1 <= n_kv_heads <= n_heads <= 1024 with n_heads a multiple of n_kv_heads, head_dim even in
 * [2, 4096], |vocab_size| and seq_len in [1, 2^24].
 * Errors: ATTN_E_INVALID (NULL argument), ATTN_E_FORMAT "NAME: not a llama2.c checkpoint (N bytes,
 * the header alone is 28)", "NAME: hyper-parameters out of range (...)", "NAME: dim D is not a
 * multiple of n_heads H", "NAME: the header implies N bytes of weights, the file has M (truncated or
 * not a llama2.c checkpoint)". Source: llama2.c run.c read_checkpoint / memory_map_weights. */
int attn_llama2c_parse(attn_llama2c *out, const void *data, size_t size, const char *name);

#ifdef __cplusplus
}
#endif
#endif
