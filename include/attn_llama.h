/*
 * attn_llama.h — Llama-architecture decoder-only language models (Touvron et al. 2023):
 * token embedding, n_layers pre-norm blocks of
 *     x += Wo · attention(RoPE(Wq·rmsnorm(x)), RoPE(Wk·rmsnorm(x)), Wv·rmsnorm(x))   (causal, GQA)
 *     x += W2 · (silu(W1·rmsnorm(x)) ⊙ W3·rmsnorm(x))                                  (SwiGLU)
 * then rmsnorm and the output matrix (tied to the embedding when the file has no separate one).
 * RMSNorm: x / sqrt(mean(x²) + eps) · w (Zhang & Sennrich 2019). RoPE (Su et al. 2021) rotates
 * adjacent pairs (x[2i], x[2i+1]) of each head by pos · theta^(-2i/head_dim): the llama2.c
 * layout, and GGUF's (its converter permutes Wq / Wk rows for it).
 * Attention runs on attn's fused SDPA kernel (attn_sdpa, bottom-right causal mask) over a KV
 * cache: prefill of n tokens is one causal pass; decode (n = 1) uses its split-K row path.
 * Positions continue after the cache: a state fed tokens one at a time gives the same logits as
 * one pass over all of them (tests/test_llama.c).
 *
 * Files:
 *   - llama2.c checkpoints (Karpathy, run.c "legacy" version 0 format): 7 int32 header
 *     (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative
 *     vocab_size means a separate classifier follows), float32 weights, then the legacy
 *     freq_cis tables (skipped). RoPE theta 10000, eps 1e-5.
 *   - GGUF (llama architecture): hyper-parameters from llama.* keys, tensors F32 / F16 / BF16 /
 *     Q8_0 / Q4_0 / Q4_1 used in place from the mmap'ed file (never expanded to float32); the
 *     tokenizer (tokenizer.ggml.*: byte-level BPE "gpt2") and chat template come with it.
 * Memory: the file is mmap'ed read-only; a state holds the KV cache (2 · n_layers · n_kv_heads ·
 * max_len · head_dim float32) and activations for one chunk of at most 256 tokens.
 */
#ifndef ATTN_LLAMA_H
#define ATTN_LLAMA_H

#include "attn_bpe.h"
#include "attn_core.h"
#include "attn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t dim;         /* d_model */
    int64_t hidden_dim;  /* feed-forward width */
    int64_t n_layers;
    int64_t n_heads;
    int64_t n_kv_heads;  /* query head h reads KV head h / (n_heads / n_kv_heads) */
    int64_t head_dim;
    int64_t vocab_size;
    int64_t context;     /* largest position + 1 the model was trained for */
    float rope_theta;
    float norm_eps;
    int tied_output;     /* 1: logits use the embedding matrix */
    int32_t bos_id, eos_id, eot_id; /* -1 when absent; eot = end of turn (ChatML <|im_end|>) */
    int add_bos;         /* 1 when prompts start with BOS (llama2.c: yes; SmolLM2 GGUF: no) */
    const char *arch;    /* "llama" */
    const char *weight_type; /* type of the attention/FFN matrices, e.g. "q4_1", "f32" */
} attn_llama_config;

typedef struct attn_llama attn_llama;

/* attn_llama_load_llama2c: mmap a llama2.c checkpoint. No tokenizer is attached (load it with
 * attn_bpe_load_llama2c). Errors: ATTN_E_IO, ATTN_E_FORMAT (header values out of range, file
 * size not the one the header implies — truncated or with extra bytes), ATTN_E_NOMEM. */
int attn_llama_load_llama2c(attn_llama **out, const char *path);

/* attn_llama_load_gguf: mmap a GGUF file of architecture "llama". Errors: those of
 * attn_gguf_open, ATTN_E_UNSUPPORTED (another architecture, a tensor type other than F32 / F16 /
 * BF16 / Q8_0 / Q4_0 / Q4_1 — named in the message —, a tokenizer model other than gpt2),
 * ATTN_E_FORMAT (missing keys or tensors, shapes that do not fit the hyper-parameters). */
int attn_llama_load_gguf(attn_llama **out, const char *path);

/* attn_llama_free: NULL-safe (unmaps the file). */
void attn_llama_free(attn_llama *m);
/* attn_llama_get_config: the hyper-parameters (owned by m). */
const attn_llama_config *attn_llama_get_config(const attn_llama *m);
/* attn_llama_tokenizer: the tokenizer that came with a GGUF file (owned by m), NULL for llama2.c. */
const attn_bpe *attn_llama_tokenizer(const attn_llama *m);
/* attn_llama_chat_template: tokenizer.chat_template of a GGUF file (owned by m), or NULL. */
const char *attn_llama_chat_template(const attn_llama *m);

typedef struct attn_llama_state attn_llama_state;

/* attn_llama_state_create: a KV cache for up to max_len positions (<= 0 or > context: the
 * model's context). Errors: ATTN_E_INVALID, ATTN_E_NOMEM. */
int attn_llama_state_create(attn_llama_state **out, const attn_llama *m, int64_t max_len);
/* attn_llama_state_free: NULL-safe. */
void attn_llama_state_free(attn_llama_state *s);
/* attn_llama_state_reset: forget every position. */
void attn_llama_state_reset(attn_llama_state *s);
/* attn_llama_state_len: positions in the cache; attn_llama_state_max_len: its capacity. */
int64_t attn_llama_state_len(const attn_llama_state *s);
/* attn_llama_state_max_len: capacity of the cache in positions. */
int64_t attn_llama_state_max_len(const attn_llama_state *s);
/* attn_llama_state_truncate: keep only the first len positions (len <= current length). */
int attn_llama_state_truncate(attn_llama_state *s, int64_t len);

/* attn_llama_forward: run tokens[0..n) at positions len .. len+n-1 of the state (appending their
 * keys and values to the cache) and write logits float32: [n, vocab_size] when all_logits, else
 * [vocab_size] for the last token only. n_threads <= 0: attn_get_num_threads().
 * Errors: ATTN_E_INVALID (NULL, n < 1), ATTN_E_RANGE (a token id outside [0, vocab_size), or
 * len + n > max_len: "context full"; the state is unchanged), ATTN_E_NOMEM, and those of
 * attn_sdpa (a non-finite activation is reported, never returned as logits). */
int attn_llama_forward(attn_llama_state *s, float *logits, const int32_t *tokens, int64_t n, int all_logits, int n_threads);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_LLAMA_H */
