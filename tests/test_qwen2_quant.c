/* attn's quantizers against llama.cpp's, byte for byte: tests/fixtures/qwen2/quant_llamacpp.gguf
 * holds, for each type llama.cpp's llama_model_quantize wrote (llama-cpp-python 0.3.36, no
 * importance matrix), 8 rows of a random Llama's float32 tensor ("x.<type>") and llama.cpp's
 * bytes for them ("ref.<type>"), taken from the files of scripts/compare_llamacpp_quantize.py
 * (which also compares whole files: every tensor of the Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
 * Q3_K_M, Q4_K_M, Q5_K_M and Q6_K files byte-identical, mixes included). attn_quantize_rows must
 * give the same bytes, on one thread and on two. */
#include "attn.h"
#include "attn_gguf.h"
#include "attn_quant.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

int main(void) {
    attn_test_name = "qwen2_quant";
    attn_gguf *g = NULL;
    CHECK_OK(attn_gguf_open(&g, attn_test_fixture("qwen2/quant_llamacpp.gguf")));
    if (!g) return attn_test_finish();
    static const attn_qtype types[] = {ATTN_QT_Q8_0, ATTN_QT_Q4_0, ATTN_QT_Q4_1, ATTN_QT_Q5_0, ATTN_QT_Q5_1,
                                       ATTN_QT_Q2_K, ATTN_QT_Q3_K, ATTN_QT_Q4_K, ATTN_QT_Q5_K, ATTN_QT_Q6_K};
    int found = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const attn_qtype t = types[i];
        char xn[32], rn[32];
        snprintf(xn, sizeof xn, "x.%s", attn_qtype_name(t));
        snprintf(rn, sizeof rn, "ref.%s", attn_qtype_name(t));
        attn_gguf_tensor x, r;
        if (attn_gguf_find_tensor(g, xn, &x) < 0 || attn_gguf_find_tensor(g, rn, &r) < 0) {
            CHECK(0, "fixture lacks %s / %s", xn, rn);
            continue;
        }
        found++;
        const int64_t rows = x.ne[1], cols = x.ne[0];
        const size_t rb = attn_qtype_row_bytes(t, cols);
        CHECK(x.type == ATTN_QT_F32 && r.type == t && r.ne[0] == cols && r.ne[1] == rows && r.nbytes == (size_t)rows * rb,
              "%s: shapes / types", rn);
        if (r.nbytes != (size_t)rows * rb) continue;
        unsigned char *out = (unsigned char *)malloc(r.nbytes);
        float *xf = (float *)malloc(sizeof(float) * (size_t)(rows * cols));
        if (!out || !xf) {
            free(out);
            free(xf);
            CHECK(0, "out of memory");
            break;
        }
        memcpy(xf, x.data, sizeof(float) * (size_t)(rows * cols));
        for (int nt = 1; nt <= 2; nt++) {
            memset(out, 0xA5, r.nbytes);
            CHECK_OK(attn_quantize_rows(out, xf, rows, cols, t, nt));
            const int64_t bv = attn_qtype_block(t), nb = rows * cols / bv;
            const size_t bb = attn_qtype_row_bytes(t, bv);
            int64_t differ = 0, first = -1;
            for (int64_t b = 0; b < nb; b++)
                if (memcmp(out + (size_t)b * bb, (const unsigned char *)r.data + (size_t)b * bb, bb) != 0) {
                    if (first < 0) first = b;
                    differ++;
                }
            if (nt == 1) printf("%s: %lld rows x %lld, %lld blocks, %lld differ from llama.cpp's\n", attn_qtype_name(t), (long long)rows,
                                (long long)cols, (long long)nb, (long long)differ);
            CHECK(differ == 0, "%s (%d threads): %lld of %lld blocks differ from llama.cpp's, first %lld", attn_qtype_name(t), nt,
                  (long long)differ, (long long)nb, (long long)first);
        }
        free(out);
        free(xf);
    }
    CHECK(found == 10, "%d of 10 types in the fixture", found);
    attn_gguf_close(g);
    return attn_test_finish();
}
