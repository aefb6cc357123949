/* Qwen2 (Qwen Team 2024; GGUF architecture "qwen2", Hugging Face Qwen2ForCausalLM): a Llama
 * decoder (pre-norm RMSNorm, GQA, SwiGLU, tied or separate output matrix) whose query, key and
 * value projections carry biases and whose RoPE rotates the two halves of each head
 * (rotate_half; llama.cpp's LLAMA_ROPE_TYPE_NEOX: its converter stores Wq / Wk unpermuted).
 * Hyper-parameters come from the qwen2.* keys (qwen2.rope.freq_base: 1e6 in Qwen2 / Qwen2.5),
 * the pre-tokenizer from tokenizer.ggml.pre = "qwen2". Everything else — loading, the layer
 * wiring, the KV cache, generation — is llama.c's (see include/attn_llama.h). */
#include "models/llama_internal.h"

const attn__llama_variant attn__qwen2_variant = {
    .arch = "qwen2",
    .rope = ATTN_ROPE_HALF,
    .qkv_bias = 1,
};
