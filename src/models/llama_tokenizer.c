/* The tokenizer of a Llama-family GGUF file (tokenizer.ggml.*, see include/attn_llama.h):
 * byte-level BPE ("gpt2" model) with the pre-tokenizer tokenizer.ggml.pre names. */
#include "attn_bpe.h"
#include "attn_gguf.h"
#include "core/internal.h"
#include "models/llama_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int attn__llama_gguf_tokenizer(attn_bpe **out, const attn_gguf *g, int64_t vocab_size, int32_t bos_id, int32_t eos_id) {
    *out = NULL;
    const char *s;
    size_t len;
    ATTN_TRY(attn_gguf_get_str(g, "tokenizer.ggml.model", &s, &len));
    if (!(len == 4 && memcmp(s, "gpt2", 4) == 0))
        return attn_set_error(ATTN_E_UNSUPPORTED, "gguf: tokenizer model '%.*s' is not supported (attn reads gpt2 byte-level BPE)", (int)(len > 64 ? 64 : len), s);
    char pre[32] = "gpt2";
    if (attn_gguf_find_kv(g, "tokenizer.ggml.pre") >= 0) {
        ATTN_TRY(attn_gguf_get_str(g, "tokenizer.ggml.pre", &s, &len));
        /* llama.cpp's names (llama-vocab.cpp) -> attn_bpe's pre-tokenizers */
        static const char *const names[][2] = {{"gpt2", "gpt2"},           {"default", "gpt2"},   {"smollm", "smollm"},
                                               {"qwen2", "qwen2"},         {"llama-bpe", "llama-bpe"}, {"llama3", "llama-bpe"},
                                               {"llama-v3", "llama-bpe"}};
        size_t k = 0;
        while (k < sizeof names / sizeof names[0] && !(strlen(names[k][0]) == len && memcmp(s, names[k][0], len) == 0)) k++;
        if (k == sizeof names / sizeof names[0])
            return attn_set_error(ATTN_E_UNSUPPORTED, "gguf: pre-tokenizer '%.*s' is not supported (gpt2, smollm, qwen2, llama-bpe)",
                                  (int)(len > 64 ? 64 : len), s);
        snprintf(pre, sizeof pre, "%s", names[k][1]);
    }
    int et;
    int64_t n, nm = 0, nty = 0;
    ATTN_TRY(attn_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n));
    if (et != 8 || n != vocab_size)
        return attn_set_error(ATTN_E_FORMAT, "gguf: tokenizer.ggml.tokens has %lld entries, the model %lld", (long long)n, (long long)vocab_size);
    ATTN_TRY(attn_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &nm));
    if (et != 8) return attn_set_error(ATTN_E_FORMAT, "gguf: tokenizer.ggml.merges is not a string array");
    int has_types = attn_gguf_find_kv(g, "tokenizer.ggml.token_type") >= 0;
    if (has_types) {
        ATTN_TRY(attn_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &nty));
        if (nty != n) return attn_set_error(ATTN_E_FORMAT, "gguf: tokenizer.ggml.token_type has %lld entries, tokens %lld", (long long)nty, (long long)n);
    }
    const char **toks = (const char **)malloc(sizeof(char *) * (size_t)n);
    uint32_t *tl = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)n);
    int32_t *ty = (int32_t *)malloc(sizeof(int32_t) * (size_t)n);
    const char **mg = (const char **)malloc(sizeof(char *) * (size_t)(nm ? nm : 1));
    uint32_t *ml = (uint32_t *)malloc(sizeof(uint32_t) * (size_t)(nm ? nm : 1));
    int rc = 0;
    if (!toks || !tl || !ty || !mg || !ml) rc = attn_set_error(ATTN_E_NOMEM, "gguf: out of memory");
    for (int64_t i = 0; rc == 0 && i < n; i++) {
        rc = attn_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &toks[i], &len);
        if (rc == 0 && len > UINT32_MAX) rc = attn_set_error(ATTN_E_FORMAT, "gguf: token %lld too long", (long long)i);
        tl[i] = (uint32_t)len;
        double d = 1;
        if (rc == 0 && has_types) rc = attn_gguf_arr_num(g, "tokenizer.ggml.token_type", i, &d);
        ty[i] = (int32_t)d;
    }
    for (int64_t i = 0; rc == 0 && i < nm; i++) {
        rc = attn_gguf_arr_str(g, "tokenizer.ggml.merges", i, &mg[i], &len);
        ml[i] = (uint32_t)len;
    }
    if (rc == 0) {
        attn_bpe_spec sp = {0};
        sp.kind = ATTN_BPE_BYTE_LEVEL;
        sp.tokens = toks;
        sp.token_lens = tl;
        sp.n_tokens = n;
        sp.token_types = ty;
        sp.merges = mg;
        sp.merge_lens = ml;
        sp.n_merges = nm;
        sp.pretokenizer = pre;
        sp.bos_id = bos_id;
        sp.eos_id = eos_id;
        rc = attn_bpe_create(out, &sp);
    }
    free(toks);
    free(tl);
    free(ty);
    free(mg);
    free(ml);
    return rc;
}
