/* The K-quant (Q2_K .. Q6_K) product kernels against the portable one and an independent
 * float64 reference:
 *   - ggml's Q8_K activation quantization: the AVX2 version equals the portable one bit for bit
 *     (ties, the sign of the largest value, a zero block);
 *   - for every kernel this CPU has (portable, avx2, avx512vnni), 1 and 2 threads, M = 1 .. 17
 *     activation rows (the 1-3 rows left over by the 4-row prefill tile), 24 and 39 (the
 *     AVX-512 kernel's 16-row strips), odd row counts (the 4-row tiles' remainder), 1, 2, 3 and 7
 *     super-blocks per row, and a row of 50 super-blocks (the prefill scratch no longer fits on
 *     the stack):
 *       prefill (M > 1): the output equals the portable kernel's bit for bit (the same exact
 *       integer block sums and float32 operations, quant_kq_tmpl.h);
 *       decode (M = 1): the same integer block sums scaled in 8 float lanes and summed at the end:
 *       within 1e-5·max|y| + 1e-6 of the portable output (the float32 sum of <= 2·nb terms in
 *       another order: at most ~(2·nb + 8)·2^-24 of the sum of |terms|, |terms| <= ~max|y|·2 here);
 *       each activation row of a batch within the same bound of that row multiplied alone;
 *       the portable output is within the 8-bit activation bound of the float64 product of the
 *       dequantized weights (dequantization: equal to gguf.quants, test_quant_k) with x. */
#include "attn.h"
#include "attn_quant.h"
#include "quant_check.h"
#include "testutil.h"
#include "ops/quant_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const attn_qtype TYPES[] = {ATTN_QT_Q2_K, ATTN_QT_Q3_K, ATTN_QT_Q4_K, ATTN_QT_Q5_K, ATTN_QT_Q6_K};

static uint64_t next(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* random super-blocks: random bytes, f16 scales d uniform in +-amp, the min scales in +-amp/4 */
static unsigned char *random_matrix(attn_qtype t, int64_t N, int64_t K, uint64_t *seed, float amp) {
    const size_t rb = attn_qtype_row_bytes(t, K), bs = attn__qtype_block_bytes(t);
    unsigned char *w = (unsigned char *)malloc(rb * (size_t)N);
    for (size_t i = 0; i < rb * (size_t)N; i++) w[i] = (unsigned char)next(seed);
    int off[2] = {-1, -1};
    switch (t) {
    case ATTN_QT_Q2_K: off[0] = 80, off[1] = 82; break;
    case ATTN_QT_Q3_K: off[0] = 108; break;
    case ATTN_QT_Q6_K: off[0] = 208; break;
    default: off[0] = 0, off[1] = 2; break;
    }
    for (size_t b = 0; b < rb * (size_t)N / bs; b++)
        for (int s = 0; s < 2 && off[s] >= 0; s++) {
            float v;
            attn_test_fill_uniform(&v, 1, -amp, amp, seed);
            const uint16_t h = attn_f32_to_f16(s ? v / 4 : v);
            memcpy(w + b * bs + off[s], &h, 2);
        }
    return w;
}

static void test_q8k_simd(void) {
    attn__quantize_q8k_fn f = attn__quantize_q8k_avx2();
    if (!f || !attn_qkernel_available(ATTN_QK_AVX2)) {
        printf("quant_kq_kernels: no AVX2 Q8_K quantization on this CPU\n");
        return;
    }
    enum { NB = 6 };
    float x[NB * 256];
    uint64_t seed = 7;
    attn_test_fill_uniform(x, NB * 256, -3.0f, 3.0f, &seed);
    /* block 1: max 127 -> iscale -1, values on half steps (ties to even) */
    for (int j = 0; j < 256; j++) x[256 + j] = (float)((j % 64) - 32) * 0.5f;
    x[256 + 9] = 127.0f;
    /* block 2: +5 then -5: the first one sets the sign */
    x[512 + 3] = 5.0f, x[512 + 200] = -5.0f;
    /* block 3: all zero; block 4: one value */
    memset(x + 768, 0, sizeof(float) * 512);
    x[1024 + 255] = -1e-3f;
    attn__q8k a[NB], b[NB];
    memset(a, 0x55, sizeof a);
    memset(b, 0x55, sizeof b);
    attn__quantize_q8k(a, x, NB);
    f(b, x, NB);
    int same = 1;
    for (int i = 0; i < NB; i++)
        same &= memcmp(&a[i].d, &b[i].d, 4) == 0 && memcmp(a[i].q, b[i].q, 256) == 0 && memcmp(a[i].bsums, b[i].bsums, 32) == 0;
    CHECK(same, "Q8_K: the AVX2 quantization equals the portable one bit for bit (6 blocks: random, ties, +-max, zero, one value)");
    CHECK(a[1].q[9] == -127 && a[1].d == -1.0f && a[2].q[3] == -127 && a[2].q[200] == 127 && a[3].d == 0.0f,
          "Q8_K: the largest value maps to -127, its negation to +127, a zero block to d = 0");
    /* half steps under iscale = -1: -(2k+1)/2 rounds to the even neighbour */
    int ties = 1;
    for (int j = 0; j < 256; j++) {
        if (j == 9) continue;
        const int v2 = -((j % 64) - 32); /* 2·(iscale·x) */
        const int want = (v2 % 2 == 0) ? v2 / 2 : ((v2 / 2) % 2 == 0 ? v2 / 2 : v2 / 2 + (v2 > 0 ? 1 : -1));
        ties &= a[1].q[j] == want;
    }
    CHECK(ties, "Q8_K: ties round to even (ggml nearest_int)");
}

static void test_products(int64_t N, int64_t nb, int64_t Mmax, int64_t Mstep) {
    const int64_t K = 256 * nb;
    uint64_t seed = 1234 + (uint64_t)(N * 131 + nb);
    const attn_qkernel ks[3] = {ATTN_QK_PORTABLE, ATTN_QK_AVX2, ATTN_QK_AVX512VNNI};
    for (int ti = 0; ti < 5; ti++) {
        const attn_qtype ty = TYPES[ti];
        unsigned char *w = random_matrix(ty, N, K, &seed, 0.01f);
        const attn_qmatrix m = {ty, w, N, K};
        float *wd = (float *)malloc(sizeof(float) * (size_t)(N * K));
        float *x = (float *)malloc(sizeof(float) * (size_t)(Mmax * K));
        float *y0 = (float *)malloc(sizeof(float) * (size_t)(Mmax * N)), *y1 = (float *)malloc(sizeof(float) * (size_t)(Mmax * N));
        float *y2 = (float *)malloc(sizeof(float) * (size_t)N);
        CHECK_OK(attn_qmatrix_dequantize_rows(wd, &m, 0, N));
        attn_test_fill_uniform(x, (size_t)(Mmax * K), -2.0f, 2.0f, &seed);
        x[3] = 30.0f; /* an outlier in one block */
        for (int64_t j = 0; j < 256; j++) x[K + j] = 0.0f; /* a zero block in row 1 */
        int exact_all = 1, alone_all = 1, bound_all = 1, runs = 0;
        double worst = 0;
        for (int64_t M = 1; M <= Mmax; M += (M < 9 ? 1 : Mstep)) {
            CHECK_OK(attn_qmatmul_kernel(y0, x, &m, M, 1, ATTN_QK_PORTABLE));
            bound_all &= quant_within_bound(y0, x, wd, M, N, K, 256, &worst); /* the 256-value Q8_K blocks */
            for (int k = 0; k < 3; k++) {
                if (!attn_qkernel_available(ks[k])) continue;
                for (int nt = 1; nt <= 2; nt++) {
                    memset(y1, 0xff, sizeof(float) * (size_t)(M * N));
                    CHECK_OK(attn_qmatmul_kernel(y1, x, &m, M, nt, ks[k]));
                    const double mx = attn_test_max_abs(y0, (size_t)(M * N));
                    const int same = M > 1 ? memcmp(y0, y1, sizeof(float) * (size_t)(M * N)) == 0
                                           : attn_test_max_abs_diff(y0, y1, (size_t)N) <= 1e-5 * mx + 1e-6;
                    if (!same)
                        CHECK(0, "%s N=%lld nb=%lld M=%lld kernel %d threads %d: equals portable (bit for bit when M > 1)", attn_qtype_name(ty), (long long)N,
                              (long long)nb, (long long)M, (int)ks[k], nt);
                    exact_all &= same;
                    alone_all &= quant_rows_alone(y2, y1, x, &m, M, nt, ks[k], 1e-5 * mx + 1e-6) < 0;
                    runs++;
                }
            }
        }
        CHECK(exact_all && runs > 0, "%s N=%lld, %lld super-blocks a row, M=1..%lld: every kernel and thread count equals portable (bit for bit for M > 1, decode within 1e-5) (%d runs)",
              attn_qtype_name(ty), (long long)N, (long long)nb, (long long)Mmax, runs);
        CHECK(alone_all, "%s N=%lld nb=%lld: each activation row within 1e-5 of the row multiplied alone", attn_qtype_name(ty), (long long)N,
              (long long)nb);
        CHECK(bound_all, "%s N=%lld nb=%lld: portable within the 8-bit activation bound of the float64 product (worst err/bound %.3f)",
              attn_qtype_name(ty), (long long)N, (long long)nb, worst);
        free(w);
        free(wd);
        free(x);
        free(y0);
        free(y1);
        free(y2);
    }
}

int main(void) {
    attn_test_name = "test_quant_kq_kernels";
    test_q8k_simd();
    test_products(37, 1, 17, 1);
    test_products(21, 3, 17, 4);
    test_products(35, 2, 40, 15); /* M = 24 .. 39: the AVX-512 kernel's 16-row strips, 3 rows left over */
    test_products(5, 7, 13, 4);
    test_products(3, 50, 6, 1);
    for (int i = 0; i < 5; i++)
        printf("quant_kq_kernels: %s kernel: %s (%s)\n", attn_qtype_name(TYPES[i]), attn_quant_type_kernel_name(TYPES[i]), attn_quant_kernel_name());
    return attn_test_finish();
}
