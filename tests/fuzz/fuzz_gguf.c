/* libFuzzer target for the GGUF reader and the llama GGUF loader (tokenizer tables included):
 * the input is opened from memory (attn_gguf_open_buffer, every accessor exercised, the first
 * and last rows of each tensor dequantized and multiplied: seeds_fuzz_gguf/kquants.gguf holds
 * one tensor of each Q5 / K-quant type) and, through
 * an in-memory file, loaded as a model; a loaded model runs one forward step. Any crash,
 * sanitizer report or leak is a bug. */
#include "attn_gguf.h"
#include "attn_llama.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    attn_gguf *g = NULL;
    if (attn_gguf_open_buffer(&g, data, size) == ATTN_OK) {
        volatile unsigned sink = 0;
        for (int64_t i = 0; i < attn_gguf_n_kv(g); i++) {
            const char *k = attn_gguf_kv_key(g, i);
            int64_t iv;
            double dv;
            int bv, et;
            const char *s;
            size_t len;
            int64_t n;
            attn_gguf_get_int(g, k, &iv);
            attn_gguf_get_float(g, k, &dv);
            attn_gguf_get_bool(g, k, &bv);
            if (attn_gguf_get_str(g, k, &s, &len) == 0 && len) sink ^= (unsigned char)s[len - 1];
            if (attn_gguf_get_arr(g, k, &et, &n) == 0)
                for (int64_t j = 0; j < n && j < 64; j++) {
                    if (attn_gguf_arr_str(g, k, j, &s, &len) == 0 && len) sink ^= (unsigned char)s[len - 1];
                    attn_gguf_arr_num(g, k, j, &dv);
                }
        }
        for (int64_t i = 0; i < attn_gguf_n_tensors(g); i++) {
            attn_gguf_tensor t;
            if (attn_gguf_tensor_at(g, i, &t) == 0 && t.nbytes) {
                sink ^= ((const unsigned char *)t.data)[0];
                sink ^= ((const unsigned char *)t.data)[t.nbytes - 1];
                /* the first and last rows of a matrix dequantized and multiplied (every block format) */
                static float row[4096], y[2];
                if (t.ne[0] <= 4096) {
                    attn_qmatrix m = {t.type, t.data, (int64_t)(t.nbytes / attn_qtype_row_bytes(t.type, t.ne[0])), t.ne[0]};
                    attn_qmatrix last = m;
                    last.data = (const unsigned char *)t.data + (size_t)(m.rows - 1) * attn_qtype_row_bytes(t.type, t.ne[0]);
                    last.rows = 1;
                    if (attn_qmatrix_dequantize_rows(row, &m, m.rows - 1, 1) == ATTN_OK) sink ^= row[0] != 0.0f;
                    if (attn_qmatrix_dequantize_rows(row, &m, 0, 1) == ATTN_OK) {
                        for (int64_t j = 0; j < t.ne[0]; j++) row[j] = (float)(j % 7) - 3.0f;
                        m.rows = 1;
                        attn_qmatmul(y, row, &m, 1, 1);
                        attn_qmatmul(y + 1, row, &last, 1, 1);
                    }
                }
            }
        }
        (void)sink;
        attn_gguf_close(g);
    }
    int fd = memfd_create("fuzz_gguf", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    attn_llama *m = NULL;
    if (attn_llama_load_gguf(&m, path) == ATTN_OK) {
        attn_llama_state *st = NULL;
        const attn_llama_config *c = attn_llama_get_config(m);
        if (c->dim <= 4096 && c->n_layers <= 8 && c->vocab_size <= 100000 && attn_llama_state_create(&st, m, 8) == ATTN_OK) {
            static float buf[100000];
            int32_t tok[2] = {0, (int32_t)(c->vocab_size - 1)};
            attn_llama_forward(st, buf, tok, 2, 0, 1);
            attn_llama_state_free(st);
        }
        const attn_bpe *tk = attn_llama_tokenizer(m);
        int32_t ids[64];
        int64_t n;
        attn_bpe_encode(tk, "Hello 123 <|im_start|> wörld", 29, 1, ids, 64, &n);
        attn_llama_free(m);
    }
    close(fd);
    return 0;
}
