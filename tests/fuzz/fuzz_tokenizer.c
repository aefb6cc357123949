/* libFuzzer target for the WordPiece tokenizer: arbitrary bytes as text (invalid UTF-8 included)
 * through a small vocabulary, with and without specials and truncation, ids checked in range.
 * Any crash, sanitizer report or leak is a bug. */
#include "attn_wordpiece.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static attn_tokenizer *tok;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tok) {
        static const char *const v[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "##a", "##b",
                                        "un", "##want", "##ed", "runn", "##ing", ",", ".", "\xe4\xb8\xad", "##\xc3\xa9"};
        if (attn_tokenizer_from_tokens(&tok, v, (int64_t)(sizeof v / sizeof v[0]), 1, 1) != ATTN_OK) abort();
    }
    int32_t ids[64];
    int64_t n = 0;
    for (int mode = 0; mode < 3; mode++) {
        int special = mode != 0;
        int64_t max_len = mode == 2 ? 8 : 0;
        int rc = attn_tokenizer_encode(tok, (const char *)data, size, special, max_len, ids, &n, 64, NULL);
        if (rc == ATTN_OK || rc == ATTN_E_RANGE) {
            int64_t m = n < 64 ? n : 64;
            for (int64_t i = 0; i < m; i++)
                if (ids[i] < 0 || ids[i] >= attn_tokenizer_vocab_size(tok)) __builtin_trap();
            if (mode == 2 && rc == ATTN_OK && n > 8) __builtin_trap();
        }
    }
    return 0;
}
