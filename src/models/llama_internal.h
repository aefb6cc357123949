/* Private to the Llama-family decoder (src/models/llama*.c, qwen2.c; not installed): what tells
 * one GGUF architecture of the family from another. The loader, the decoder layer wiring and
 * the KV cache are llama.c's, the GGUF tokenizer llama_tokenizer.c's; a variant only names its
 * keys and tensors and chooses among the layer floor's options. */
#ifndef ATTN_LLAMA_INTERNAL_H
#define ATTN_LLAMA_INTERNAL_H

#include "attn_bpe.h"
#include "attn_gguf.h"
#include "attn_layers.h"

typedef struct {
    const char *arch;            /* general.architecture, and the prefix of its hyper-parameter keys */
    attn_rope_layout rope;       /* how Q / K store RoPE's pairs: ATTN_ROPE_INTERLEAVED (llama.cpp's
                                  * LLAMA_ROPE_TYPE_NORM, Wq / Wk rows permuted by the converter) or
                                  * ATTN_ROPE_HALF (LLAMA_ROPE_TYPE_NEOX, Hugging Face's rotate_half) */
    int qkv_bias;                /* 1: blk.N.attn_{q,k,v}.bias [H·D], [Hkv·D], [Hkv·D] are required */
} attn__llama_variant;

/* src/models/qwen2.c: architecture "qwen2" */
extern const attn__llama_variant attn__qwen2_variant;

/* src/models/llama_tokenizer.c: the byte-level BPE tokenizer of a GGUF file (tokenizer.ggml.model
 * "gpt2"; tokens, merges, token types; tokenizer.ggml.pre mapped to attn_bpe's pre-tokenizers)
 * for a model of vocab_size tokens. Errors: ATTN_E_UNSUPPORTED (another model or pre-tokenizer,
 * named), ATTN_E_FORMAT (tables that do not fit the model), those of attn_bpe_create. */
int attn__llama_gguf_tokenizer(attn_bpe **out, const attn_gguf *g, int64_t vocab_size, int32_t bos_id, int32_t eos_id);

#endif
