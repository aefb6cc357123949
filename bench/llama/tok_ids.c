/* bench/llama helper: prints the token ids of standard input (SmolLM2's tokenizer, no BOS), one a line.
 * Usage: tok_ids MODEL.gguf < text */
#include "attn_llama.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    attn_llama *m = NULL;
    if (argc < 2 || attn_llama_load_gguf(&m, argv[1]) < 0) return 1;
    static char t[1 << 16];
    static int32_t ids[1 << 16];
    size_t n = fread(t, 1, sizeof t - 1, stdin);
    int64_t k = 0;
    if (attn_bpe_encode(attn_llama_tokenizer(m), t, n, 0, ids, 1 << 16, &k) < 0) return 1;
    for (int64_t i = 0; i < k; i++) printf("%d\n", (int)ids[i]);
    attn_llama_free(m);
    return 0;
}
