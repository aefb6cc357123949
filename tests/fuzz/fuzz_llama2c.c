/* libFuzzer target for the llama2.c checkpoint reader: the input is parsed from memory; a
 * successful parse is checked for consistency (every weight view inside the input, in file
 * order, ending exactly at the end of the input, the hyper-parameters within the documented
 * limits) and the first and last float of every view are read. A failed parse must leave the
 * output zeroed. Any crash or sanitizer report is a bug. */
#include "attn_llama2c.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile float sink;

static void view(const uint8_t *data, size_t size, const float *p, int64_t n, const float **next) {
    const uint8_t *b = (const uint8_t *)p;
    if (n < 1 || b < data + ATTN_LLAMA2C_HEADER_BYTES || b + (size_t)n * 4 > data + size) __builtin_trap();
    if (*next && p != *next) __builtin_trap();
    float first, last;
    memcpy(&first, b, 4);
    memcpy(&last, b + (size_t)(n - 1) * 4, 4);
    sink = first + last;
    *next = p + n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a copy, 4-byte aligned as an mmap'ed file is */
    float *buf = (float *)malloc(size / 4 * 4 + 4);
    if (!buf) return 0;
    memcpy(buf, data, size);
    const uint8_t *d = (const uint8_t *)buf;
    attn_llama2c c;
    memset(&c, 0xAB, sizeof c);
    if (attn_llama2c_parse(&c, d, size, "fuzz") != ATTN_OK) {
        static const attn_llama2c zero;
        if (memcmp(&c, &zero, sizeof c) != 0) __builtin_trap();
        free(buf);
        return 0;
    }
    if (c.dim < 1 || c.dim > 65536 || c.n_heads < 1 || c.n_kv_heads < 1 || c.n_kv_heads > c.n_heads ||
        c.head_dim * c.n_heads != c.dim || c.vocab_size < 1 || c.context < 1)
        __builtin_trap();
    const int64_t D = c.dim, F = c.hidden_dim, L = c.n_layers, kvd = c.n_kv_heads * c.head_dim, V = c.vocab_size;
    const float *next = NULL;
    view(d, size, c.tok_embd, V * D, &next);
    view(d, size, c.attn_norm, L * D, &next);
    view(d, size, c.wq, L * D * D, &next);
    view(d, size, c.wk, L * kvd * D, &next);
    view(d, size, c.wv, L * kvd * D, &next);
    view(d, size, c.wo, L * D * D, &next);
    view(d, size, c.ffn_norm, L * D, &next);
    view(d, size, c.w1, L * F * D, &next);
    view(d, size, c.w2, L * D * F, &next);
    view(d, size, c.w3, L * F * D, &next);
    view(d, size, c.final_norm, D, &next);
    next += c.context * c.head_dim; /* the legacy RoPE tables */
    if (c.shared_classifier) {
        if (c.output != c.tok_embd || (const uint8_t *)next != d + size) __builtin_trap();
    } else {
        view(d, size, c.output, V * D, &next);
        if ((const uint8_t *)next != d + size) __builtin_trap();
    }
    free(buf);
    return 0;
}
