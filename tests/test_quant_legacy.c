/* The 32-value block types Q8_0, Q5_0, Q5_1 (and Q4_0, Q4_1) on every kernel path this CPU has
 * (portable, AVX2, AVX-512 VNNI), for the shapes the tiles split unevenly: weight rows N not a
 * multiple of the 4- / 2-row tiles or of the 16-row thread units (1, 3, 13, 37, 50), activation
 * rows M = 1 .. 17 (groups of 4 and every remainder), K = 32, 96, 576 (SmolLM2's width) and 2080
 * (65 blocks: past the AVX-512 strip buffer, so the 2 x 4 tiles run); K = 2048 with M = 17 (the
 * strip's Q8_0 activation sums on the heap).
 *   - portable: within the 8-bit activation bound of the float64 product of the dequantized
 *     weights (attn_qmatrix_dequantize_rows, itself equal to gguf.quants: test_quant_k.c) with
 *     the unquantized activations;
 *   - AVX2 / AVX-512 VNNI against portable: the same exact integer block sums, float32 sums of the
 *     blocks in another order (8-lane halves): |diff| <= 1e-5·max|y| + 1e-6 (as test_gguf_llm.c);
 *   - each activation row's result equals the row computed alone (M = 1), bit for bit, on every
 *     kernel and 1 or 2 threads (batched decoding gets the logits of a sequence alone). */
#include "attn_quant.h"
#include "quant_check.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t seed = 2026;

static unsigned char *random_matrix(attn_qtype t, int64_t N, int64_t K) {
    const size_t rb = attn_qtype_row_bytes(t, K);
    const size_t bs = t == ATTN_QT_Q8_0 ? 34 : t == ATTN_QT_Q4_0 ? 18 : t == ATTN_QT_Q4_1 ? 20 : t == ATTN_QT_Q5_0 ? 22 : 24;
    unsigned char *w = (unsigned char *)malloc(rb * (size_t)N + 1);
    for (size_t i = 0; i < rb * (size_t)N; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        w[i] = (unsigned char)seed;
    }
    const int has_m = t == ATTN_QT_Q4_1 || t == ATTN_QT_Q5_1;
    for (size_t b = 0; b < rb * (size_t)N / bs; b++) {
        float v[2];
        attn_test_fill_uniform(v, 2, -0.05f, 0.05f, &seed);
        const uint16_t h = attn_f32_to_f16(v[0]), mh = attn_f32_to_f16(v[1] / 4);
        memcpy(w + b * bs, &h, 2);
        if (has_m) memcpy(w + b * bs + 2, &mh, 2);
    }
    return w;
}

int main(void) {
    attn_test_name = "quant_legacy";
    const attn_qtype types[5] = {ATTN_QT_Q8_0, ATTN_QT_Q5_0, ATTN_QT_Q5_1, ATTN_QT_Q4_0, ATTN_QT_Q4_1};
    const attn_qkernel kernels[3] = {ATTN_QK_PORTABLE, ATTN_QK_AVX2, ATTN_QK_AVX512VNNI};
    const int64_t Ns[5] = {1, 3, 13, 37, 50}, Ks[5] = {32, 96, 576, 2048, 2080};
    int kernels_here = 0;
    for (int ki = 0; ki < 3; ki++) kernels_here += attn_qkernel_available(kernels[ki]);
    printf("quant_legacy: kernels available: %d (auto: %s)\n", kernels_here, attn_quant_kernel_name());
    for (int ti = 0; ti < 5; ti++) {
        const attn_qtype ty = types[ti];
        int bound_ok = 1, simd_ok = 1, rows_ok = 1, cases = 0;
        double worst_bound = 0, worst_simd = 0;
        for (int ni = 0; ni < 5; ni++)
            for (int kk = 0; kk < 5; kk++) {
                const int64_t N = Ns[ni], K = Ks[kk];
                if ((N == 50 && K != 576) || (K >= 576 && N < 13) || (K == 2080 && N != 37) || (K == 2048 && N != 13)) continue; /* short */
                unsigned char *w = random_matrix(ty, N, K);
                const attn_qmatrix W = {ty, w, N, K};
                float *wd = (float *)malloc(sizeof(float) * (size_t)(N * K));
                CHECK_OK(attn_qmatrix_dequantize_rows(wd, &W, 0, N));
                for (int64_t M = 1; M <= 17; M++) {
                    if ((K >= 576 && M % 4 != 1 && M != 8) || (K == 2048 && M != 17)) continue;
                    float *x = (float *)malloc(sizeof(float) * (size_t)(M * K)), *y0 = (float *)malloc(sizeof(float) * (size_t)(M * N)),
                          *y1 = (float *)malloc(sizeof(float) * (size_t)(M * N)), *one = (float *)malloc(sizeof(float) * (size_t)N);
                    attn_test_fill_uniform(x, (size_t)(M * K), -2.0f, 2.0f, &seed);
                    x[K / 2] = 30.0f; /* an outlier in one block of row 0 */
                    if (M > 2)
                        for (int64_t j = 0; j < 32; j++) x[2 * K + j] = 0.0f; /* a zero block */
                    CHECK_OK(attn_qmatmul_kernel(y0, x, &W, M, 1, ATTN_QK_PORTABLE));
                    /* portable vs the float64 product: each x moves by at most d_x/2 on its 8-bit grid
                     * (d_x = max|x|/127 of its 32-value block), so |y - exact| <= Σ_b Σ|w|·d_x/2; the
                     * float32 sums add at most ~2^-24·(nb + 4)·Σ|w·x| (1e-6·Σ|w·x| allowed) */
                    if (!quant_within_bound(y0, x, wd, M, N, K, 32, &worst_bound)) bound_ok = 0;
                    for (int ki = 0; ki < 3; ki++) {
                        if (!attn_qkernel_available(kernels[ki])) continue;
                        for (int nt = 1; nt <= 2; nt++) {
                            CHECK_OK(attn_qmatmul_kernel(y1, x, &W, M, nt, kernels[ki]));
                            const double mx = attn_test_max_abs(y0, (size_t)(M * N));
                            for (int64_t i = 0; i < M * N; i++) {
                                const double d = fabs(y1[i] - y0[i]);
                                if (!(d <= 1e-5 * mx + 1e-6)) simd_ok = 0;
                                if (mx > 0) worst_simd = fmax(worst_simd, d / mx);
                            }
                            const int64_t m = quant_rows_alone(one, y1, x, &W, M, nt, kernels[ki], -1); /* bit for bit */
                            if (m >= 0) {
                                if (rows_ok)
                                    printf("quant_legacy: %s kernel %d N=%lld K=%lld M=%lld row %lld differs from the row alone\n", attn_qtype_name(ty),
                                           (int)kernels[ki], (long long)N, (long long)K, (long long)M, (long long)m);
                                rows_ok = 0;
                            }
                        }
                    }
                    cases++;
                    free(x);
                    free(y0);
                    free(y1);
                    free(one);
                }
                free(wd);
                free(w);
            }
        CHECK(bound_ok, "%s: portable within the 8-bit activation bound of the float64 product (%d shapes, worst err/bound %.3f)", attn_qtype_name(ty),
              cases, worst_bound);
        CHECK(simd_ok, "%s: every SIMD kernel within 1e-5 of max|y| of portable (worst %.2g)", attn_qtype_name(ty), worst_simd);
        CHECK(rows_ok, "%s: every kernel's batched rows equal the rows alone, bit for bit", attn_qtype_name(ty));
        CHECK(cases > 100, "%s: %d shapes", attn_qtype_name(ty), cases);
        printf("quant_legacy: %s kernel: %s\n", attn_qtype_name(ty), attn_quant_type_kernel_name(ty));
    }
    /* attn_qmatmul_n over Q5_0 + Q8_0 + Q5_1 (one activation format, rows multiples of 16) equals
     * separate products bit for bit */
    {
        const attn_qtype mt[3] = {ATTN_QT_Q5_0, ATTN_QT_Q8_0, ATTN_QT_Q5_1};
        unsigned char *mw[3];
        attn_qmatrix ws[3];
        static float x[5 * 576], a[3][5 * 48], b[3][5 * 48];
        float *const outs[3] = {b[0], b[1], b[2]};
        attn_test_fill_uniform(x, 5 * 576, -1.0f, 1.0f, &seed);
        for (int i = 0; i < 3; i++) {
            mw[i] = random_matrix(mt[i], 48, 576);
            ws[i] = (attn_qmatrix){mt[i], mw[i], 48, 576};
            CHECK_OK(attn_qmatmul(a[i], x, &ws[i], 5, 1));
        }
        CHECK_OK(attn_qmatmul_n(outs, x, ws, 3, 5, 2));
        CHECK(memcmp(a, b, sizeof a) == 0, "qmatmul_n over q5_0 + q8_0 + q5_1 equals separate products");
        for (int i = 0; i < 3; i++) free(mw[i]);
    }
    /* the kernel for Q5_0 / Q5_1 / Q8_0 is the one named for the CPU (AVX-512 VNNI where it runs) */
    CHECK(strcmp(attn_quant_type_kernel_name(ATTN_QT_Q5_0), attn_quant_kernel_name()) == 0 &&
              strcmp(attn_quant_type_kernel_name(ATTN_QT_Q5_1), attn_quant_kernel_name()) == 0,
          "q5_0 / q5_1 run on the chosen kernel (%s)", attn_quant_kernel_name());
    return attn_test_finish();
}
