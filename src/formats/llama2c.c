/* llama2.c checkpoints (see include/attn_llama2c.h). */
#include "attn_llama2c.h"
#include "core/internal.h"

#include <string.h>

int attn_llama2c_parse(attn_llama2c *out, const void *data, size_t size, const char *name) {
    if (!out || (!data && size) || !name) return attn_set_error(ATTN_E_INVALID, "llama2c_parse: NULL argument");
    memset(out, 0, sizeof *out);
    if (size < ATTN_LLAMA2C_HEADER_BYTES)
        return attn_set_error(ATTN_E_FORMAT, "%s: not a llama2.c checkpoint (%zu bytes, the header alone is 28)", name, size);
    int32_t h[7];
    memcpy(h, data, sizeof h);
    attn_llama2c c;
    memset(&c, 0, sizeof c);
    const int shared = h[5] > 0;
    c.dim = h[0];
    c.hidden_dim = h[1];
    c.n_layers = h[2];
    c.n_heads = h[3];
    c.n_kv_heads = h[4];
    c.vocab_size = h[5] > 0 ? h[5] : (h[5] == INT32_MIN ? 0 : -(int64_t)h[5]);
    c.context = h[6];
    c.head_dim = c.n_heads > 0 ? c.dim / c.n_heads : 0;
    c.shared_classifier = shared;
    if (c.dim < 1 || c.dim > 65536 || c.hidden_dim < 1 || c.hidden_dim > 1 << 20 || c.n_layers < 1 || c.n_layers > 1024 ||
        c.n_heads < 1 || c.n_heads > 1024 || c.n_kv_heads < 1 || c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads ||
        c.head_dim < 2 || c.head_dim % 2 || c.head_dim > 4096 || c.vocab_size < 1 || c.vocab_size > (1 << 24) ||
        c.context < 1 || c.context > (1 << 24))
        return attn_set_error(ATTN_E_FORMAT,
                              "%s: not a llama2.c checkpoint (its header's hyper-parameters are out of range: dim %lld, hidden "
                              "%lld, layers %lld, heads %lld, kv heads %lld, head_dim %lld, vocab %lld, context %lld)",
                              name, (long long)c.dim, (long long)c.hidden_dim, (long long)c.n_layers, (long long)c.n_heads,
                              (long long)c.n_kv_heads, (long long)c.head_dim, (long long)c.vocab_size, (long long)c.context);
    if (c.head_dim * c.n_heads != c.dim)
        return attn_set_error(ATTN_E_FORMAT, "%s: dim %lld is not a multiple of n_heads %lld", name, (long long)c.dim,
                              (long long)c.n_heads);
    /* every factor is bounded above, so the count fits in 64 bits (< 2^50) */
    const int64_t D = c.dim, F = c.hidden_dim, L = c.n_layers, kvd = c.n_kv_heads * c.head_dim, V = c.vocab_size;
    const uint64_t need = (uint64_t)V * D + L * D * 2 + L * D * D * 2 + L * D * kvd * 2 + L * D * F * 3 + D +
                          (uint64_t)c.context * c.head_dim + (shared ? 0 : (uint64_t)V * D);
    if ((size - 28) % 4 || (size - 28) / 4 != need)
        return attn_set_error(ATTN_E_FORMAT,
                              "%s: the header implies %llu bytes of weights, the file has %zu (truncated or not a llama2.c checkpoint)",
                              name, (unsigned long long)need * 4, size - 28);
    /* the tensors in file order, each after the previous one */
    const float **views[] = {&c.tok_embd, &c.attn_norm, &c.wq, &c.wk, &c.wv, &c.wo, &c.ffn_norm, &c.w1, &c.w2, &c.w3, &c.final_norm};
    const int64_t counts[] = {V * D, L * D, L * D * D, L * kvd * D, L * kvd * D, L * D * D, L * D, L * F * D, L * D * F, L * F * D, D};
    const float *w = (const float *)((const char *)data + ATTN_LLAMA2C_HEADER_BYTES);
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        *views[i] = w;
        w += counts[i];
    }
    w += c.context * c.head_dim; /* legacy freq_cis_real + freq_cis_imag */
    c.output = shared ? c.tok_embd : w;
    *out = c;
    return ATTN_OK;
}
