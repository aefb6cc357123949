/* Private to the Llama-family decoder (src/models/llama*.c, qwen2.c; not installed): what tells
 * one GGUF architecture of the family from another, and the model's layout. The loaders are
 * llama.c's, the decoder layer wiring and the KV cache llama_forward.c's, the GGUF tokenizer
 * llama_tokenizer.c's; a variant only names its keys and tensors and chooses among the layer
 * floor's options. */
#ifndef ATTN_LLAMA_INTERNAL_H
#define ATTN_LLAMA_INTERNAL_H

#include "attn_bpe.h"
#include "attn_gguf.h"
#include "attn_layers.h"
#include "attn_llama.h"
#include "attn_quant.h"

typedef struct {
    const char *arch;            /* general.architecture, and the prefix of its hyper-parameter keys */
    attn_rope_layout rope;       /* how Q / K store RoPE's pairs: ATTN_ROPE_INTERLEAVED (llama.cpp's
                                  * LLAMA_ROPE_TYPE_NORM, Wq / Wk rows permuted by the converter) or
                                  * ATTN_ROPE_HALF (LLAMA_ROPE_TYPE_NEOX, Hugging Face's rotate_half) */
    int qkv_bias;                /* 1: blk.N.attn_{q,k,v}.bias [H·D], [Hkv·D], [Hkv·D] are required */
} attn__llama_variant;

/* one decoder layer's tensors (views into the model file, or its packed strips) */
typedef struct {
    const float *attn_norm, *ffn_norm; /* [dim] */
    attn_qmatrix wq, wk, wv, wo;       /* [H·D, dim], [Hkv·D, dim] x2, [dim, H·D] */
    attn_qmatrix w1, w2, w3;           /* gate [hidden, dim], down [dim, hidden], up [hidden, dim] */
    const float *bq, *bk, *bv, *bo;    /* biases [H·D], [Hkv·D] x2, [dim], or NULL (Qwen2: q, k, v) */
    const void *sq, *sk, *sv, *so, *s1, *s2, *s3; /* their packed strips (pack_strips) or NULL */
} llama_layer;

/* the model (include/attn_llama.h's opaque handle): loaded by llama.c, run by llama_forward.c */
struct attn_llama {
    attn_llama_config cfg;
    attn_qmatrix tok_embd, output;
    const void *output_strips; /* the output projection's packed strips or NULL */
    void *strips;              /* one buffer holding every packed matrix (pack_strips) */
    const float *final_norm;
    llama_layer *layers;
    void *map;
    size_t map_size;
    attn_gguf *gguf;
    attn_bpe *tok;
    char *chat_template;
    char weight_type[16];
    double *inv_freq; /* [head_dim / 2] theta^(-2i/D) · freq_scale / rope_factors[i], float64 */
    const attn__llama_variant *variant;
    double rope_freq_scale;    /* 1 / linear RoPE scaling factor (1: none) */
    const float *rope_factors; /* [head_dim / 2] Llama 3's rope_freqs tensor, or NULL */
    char *path;                /* the model file (messages) */
};

/* src/models/qwen2.c: architecture "qwen2" */
extern const attn__llama_variant attn__qwen2_variant;

/* src/models/llama_tokenizer.c: the byte-level BPE tokenizer of a GGUF file (tokenizer.ggml.model
 * "gpt2"; tokens, merges, token types; tokenizer.ggml.pre mapped to attn_bpe's pre-tokenizers)
 * for a model of vocab_size tokens. Errors: ATTN_E_UNSUPPORTED (another model or pre-tokenizer,
 * named), ATTN_E_FORMAT (tables that do not fit the model), those of attn_bpe_create. */
int attn__llama_gguf_tokenizer(attn_bpe **out, const attn_gguf *g, int64_t vocab_size, int32_t bos_id, int32_t eos_id);

#endif
