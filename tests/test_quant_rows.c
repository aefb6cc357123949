/* attn_qmatmul's result for an activation row does not depend on the other rows of the call:
 * row i of x[M] · Wᵀ is bit-identical to x[i] · Wᵀ alone (M = 1), for Q8_0, Q4_0 and Q4_1 with
 * every SIMD kernel this CPU has and the portable one, 1 and 2 threads, through attn_qmatmul and
 * attn_qmatmul_n. The kernels tile several activation rows together (prefill) or one (decode);
 * every tile computes an output with the same float operations in the same order, so a sequence
 * decoded in a batch with others (attn serve's continuous batching, attn_llama_batch) gets the
 * logits it gets alone. Before that, a batched row was summed in another order (up to 0.67 on
 * SmolLM2's logits, and greedy replies parted at near-ties). */
#include "attn_quant.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#define N 37   /* weight rows: remainders for the 4-row and 2-row tiles, and for thread chunks of 16 */
#define K 256  /* 8 blocks */
#define M 11   /* activation rows: two groups of 4 and a remainder of 3 */

int main(void) {
    attn_test_name = "quant_rows";
    static float w[N * K], x[M * K];
    uint64_t seed = 7;
    attn_test_fill_uniform(w, N * K, -1, 1, &seed);
    attn_test_fill_uniform(x, M * K, -2, 2, &seed);
    for (int64_t i = 0; i < K; i += 5) x[3 * K + i] = 0; /* a few zero activations */
    const attn_qtype types[3] = {ATTN_QT_Q8_0, ATTN_QT_Q4_0, ATTN_QT_Q4_1};
    const attn_qkernel kernels[3] = {ATTN_QK_PORTABLE, ATTN_QK_AVX2, ATTN_QK_AVX512VNNI};
    int checked = 0;
    for (int ti = 0; ti < 3; ti++) {
        const size_t rb = attn_qtype_row_bytes(types[ti], K);
        uint8_t *q = (uint8_t *)malloc(rb * N);
        CHECK_OK(attn_quantize_rows(q, w, N, K, types[ti], 1));
        const attn_qmatrix W = {types[ti], q, N, K};
        for (int ki = 0; ki < 3; ki++) {
            if (!attn_qkernel_available(kernels[ki])) continue;
            for (int nt = 1; nt <= 2; nt++) {
                float all[M * N], one[N];
                CHECK_OK(attn_qmatmul_kernel(all, x, &W, M, nt, kernels[ki]));
                int same = 1;
                for (int64_t m = 0; m < M; m++) {
                    CHECK_OK(attn_qmatmul_kernel(one, x + m * K, &W, 1, nt, kernels[ki]));
                    same &= memcmp(one, all + m * N, sizeof one) == 0;
                }
                CHECK(same, "%s, kernel %d, %d thread(s): each of %d rows equals the row alone, bit for bit", attn_qtype_name(types[ti]), (int)kernels[ki],
                      nt, M);
                checked++;
            }
        }
        /* attn_qmatmul_n (the fused projections) with the chosen kernel: the same rows */
        {
            float a[M * N], b[M * N], one[N];
            float *ys[2] = {a, b};
            const attn_qmatrix ws[2] = {W, W};
            CHECK_OK(attn_qmatmul_n(ys, x, ws, 2, M, 2));
            int same = 1;
            for (int64_t m = 0; m < M; m++) {
                CHECK_OK(attn_qmatmul(one, x + m * K, &W, 1, 1));
                same &= memcmp(one, a + m * N, sizeof one) == 0 && memcmp(one, b + m * N, sizeof one) == 0;
            }
            CHECK(same, "%s: attn_qmatmul_n rows equal attn_qmatmul's rows alone", attn_qtype_name(types[ti]));
        }
        free(q);
    }
    CHECK(checked >= 6, "kernels checked: %d (portable at least, 3 types x 2 thread counts)", checked);
    return attn_test_finish();
}
