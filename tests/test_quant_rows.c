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

#include <stdio.h>
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

    /* 64 activation rows (16384 values): the activations are quantized on 2 threads, a row
     * whole on one thread (ops/quant.c, attn__quantize_acts), so 2 threads give one thread's
     * bits, for a legacy type and K-quants (Q8_K activations), through attn_qmatmul and
     * attn_qmatmul_n. (At this M the K-quant strips sum in another order than a row alone: the
     * row-alone property above is for M = 11.) A non-finite activation is refused naming the
     * first one (the threads find them in any order). */
    {
        enum { BM = 64 };
        static float bx[BM * K], b1[BM * 48], b2[BM * 48], c1[BM * 48], c2[BM * 48];
        attn_test_fill_uniform(bx, BM * K, -2, 2, &seed);
        const attn_qtype bt[3] = {ATTN_QT_Q8_0, ATTN_QT_Q4_K, ATTN_QT_Q6_K};
        for (int ti = 0; ti < 3; ti++) {
            const size_t rb = attn_qtype_row_bytes(bt[ti], K);
            uint8_t *q = (uint8_t *)malloc(rb * 48);
            static float w48[48 * K];
            attn_test_fill_uniform(w48, 48 * K, -1, 1, &seed);
            CHECK_OK(attn_quantize_rows(q, w48, 48, K, bt[ti], 1));
            const attn_qmatrix W = {bt[ti], q, 48, K};
            const attn_qmatrix ws[2] = {W, W};
            float *y1[2] = {c1, c1}, *y2[2] = {c2, c2};
            CHECK_OK(attn_qmatmul(b1, bx, &W, BM, 1));
            CHECK_OK(attn_qmatmul(b2, bx, &W, BM, 2));
            CHECK(memcmp(b1, b2, sizeof b1) == 0, "%s: 64 rows, 1 vs 2 threads: bit for bit", attn_qtype_name(bt[ti]));
            CHECK_OK(attn_qmatmul_n(y1, bx, ws, 2, BM, 1));
            CHECK_OK(attn_qmatmul_n(y2, bx, ws, 2, BM, 2));
            CHECK(memcmp(c1, c2, sizeof c1) == 0, "%s: attn_qmatmul_n, 64 rows, 1 vs 2 threads: bit for bit", attn_qtype_name(bt[ti]));
            float *ys[2] = {b1, b2};
            bx[50 * K + 3] = 1.0f / 0.0f;
            bx[40 * K + 7] = 0.0f / 0.0f;
            char want[64];
            snprintf(want, sizeof want, "x[%d] is not finite", 40 * K + 7);
            CHECK_ERR(attn_qmatmul(b1, bx, &W, BM, 2), ATTN_E_RANGE);
            CHECK(strstr(attn_last_error(), want) != NULL, "%s: qmatmul names the first non-finite value: %s", attn_qtype_name(bt[ti]), attn_last_error());
            CHECK_ERR(attn_qmatmul_n(ys, bx, ws, 2, BM, 2), ATTN_E_RANGE);
            CHECK(strstr(attn_last_error(), want) != NULL, "%s: qmatmul_n names the first non-finite value: %s", attn_qtype_name(bt[ti]), attn_last_error());
            bx[50 * K + 3] = 0.5f;
            bx[40 * K + 7] = -0.5f;
            free(q);
        }
    }
    return attn_test_finish();
}
