/* Packed strips (attn_weight_pack_strips): Q8_0 / Q4_0 / Q4_1 weights rewritten once in the
 * AVX-512 VNNI kernel's order give the same products, bit for bit, as the blocks they came from,
 * for 1..64 activation rows (decode, batched decode, prefill), 1 and 2 threads, through
 * attn_weight_matmul and attn_weight_matmul_n; those products agree with the float64 reference
 * kernel (the dequantized weights times x summed in float64) within the activation
 * quantization's error. The layout itself is checked byte by byte against its definition (on
 * every CPU), and the errors and the fallback when another kernel is chosen. */
#include "attn_quant.h"
#include "attn_weight.h"
#include "ops/quant_internal.h"
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the layout from its definition (quant_internal.h): byte offsets of row i, block b */
static void check_layout(attn_qtype t) {
    const int64_t rows = 32, cols = 96, nb = 3;
    const size_t bs = attn_qtype_row_bytes(t, 32), rb = attn_qtype_row_bytes(t, cols);
    uint8_t *W = (uint8_t *)malloc(rb * rows), *P = (uint8_t *)malloc(rb * rows);
    for (size_t i = 0; i < rb * rows; i++) W[i] = (uint8_t)(i * 7 + (i >> 8) * 13);
    attn__qpack_strips(P, W, t, rows, cols);
    const size_t hdr = t == ATTN_QT_Q4_1 ? 64 : 32, qoff = t == ATTN_QT_Q4_1 ? 4 : 2, nq = t == ATTN_QT_Q8_0 ? 32 : 16;
    int bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = W + (size_t)r * rb + (size_t)b * bs;
            const uint8_t *rec = P + (size_t)(r / 16) * 16 * rb + (size_t)b * 16 * bs;
            const int i = (int)(r % 16);
            bad += memcmp(rec + 2 * i, blk, 2) != 0;
            if (t == ATTN_QT_Q4_1) bad += memcmp(rec + 32 + 2 * i, blk + 2, 2) != 0;
            for (size_t k = 0; k < nq; k++) {
                const uint8_t want = t == ATTN_QT_Q8_0 ? (uint8_t)(blk[qoff + k] ^ 0x80) : blk[qoff + k];
                bad += rec[hdr + 64 * (k / 4) + 4 * (size_t)i + k % 4] != want;
            }
        }
    CHECK(bad == 0, "%s: every byte of a 32 x 96 matrix where the strip layout puts it (%d misplaced)", attn_qtype_name(t), bad);
    free(W);
    free(P);
}

static void *aligned(size_t n) {
    void *p = NULL;
    return posix_memalign(&p, 64, n ? n : 64) == 0 ? p : NULL;
}

/* max |a - b| / (max |b| + 1e-30) */
static double rel_err(const float *a, const float *b, int64_t n) {
    double e = 0, s = 0;
    for (int64_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - (double)b[i]));
        s = fmax(s, fabs((double)b[i]));
    }
    return e / (s + 1e-30);
}

static void check_products(attn_qtype t, int64_t N, int64_t K) {
    const int64_t Ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 64};
    const int64_t Mmax = 64;
    float *w = (float *)malloc(sizeof(float) * (size_t)(N * K)), *x = (float *)malloc(sizeof(float) * (size_t)(Mmax * K));
    float *a = (float *)malloc(sizeof(float) * (size_t)(Mmax * N)), *b = (float *)malloc(sizeof(float) * (size_t)(Mmax * N));
    float *ref = (float *)malloc(sizeof(float) * (size_t)(Mmax * N));
    /* b holds two products of up to 4 rows in the fused check */
    uint64_t seed = 11 + (uint64_t)t;
    attn_test_fill_uniform(w, N * K, -1, 1, &seed);
    attn_test_fill_uniform(x, Mmax * K, -2, 2, &seed);
    const size_t rb = attn_qtype_row_bytes(t, K);
    uint8_t *q = (uint8_t *)malloc(rb * (size_t)N);
    CHECK_OK(attn_quantize_rows(q, w, N, K, t, 1));
    const attn_qmatrix Q = {t, q, N, K};
    attn_weight plain = attn_weight_from_qmatrix(&Q, NULL, ATTN_WKERNEL_BLOCKS), packed = plain;
    const size_t bytes = attn_weight_strips_bytes(&packed);
    CHECK(bytes == rb * (size_t)N, "%s [%lld, %lld]: strips take the weight's %zu bytes (%zu)", attn_qtype_name(t), (long long)N, (long long)K,
          rb * (size_t)N, bytes);
    void *buf = aligned(bytes);
    CHECK_OK(attn_weight_pack_strips(&packed, buf));
    CHECK(packed.strips == buf, "pack_strips sets w->strips");
    int same = 1, nsame = 1;
    double worst = 0;
    for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
        const int64_t M = Ms[mi];
        for (int nt = 1; nt <= 2; nt++) {
            CHECK_OK(attn_weight_matmul(a, x, M, &plain, ATTN_ACT_IDENTITY, nt));
            memset(b, 0xff, sizeof(float) * (size_t)(M * N));
            CHECK_OK(attn_weight_matmul(b, x, M, &packed, ATTN_ACT_IDENTITY, nt));
            same &= memcmp(a, b, sizeof(float) * (size_t)(M * N)) == 0;
        }
        /* three matrices in one call (the fused q / k / v projections) */
        if (M <= 4) {
            const attn_weight *ws[3] = {&packed, &packed, &packed};
            float *yo[3] = {b, b + M * N, ref};
            CHECK_OK(attn_weight_matmul_n(yo, x, ws, 3, M, 2));
            CHECK_OK(attn_weight_matmul(a, x, M, &plain, ATTN_ACT_IDENTITY, 1));
            for (int k = 0; k < 3; k++) nsame &= memcmp(yo[k], a, sizeof(float) * (size_t)(M * N)) == 0;
        }
        CHECK_OK(attn_qmatmul_kernel(ref, x, &Q, M, 1, ATTN_QK_REFERENCE));
        worst = fmax(worst, rel_err(b, ref, M * N));
    }
    CHECK(same, "%s [%lld, %lld]: packed strips == the blocks, bit for bit, at M = 1..64, 1 and 2 threads", attn_qtype_name(t), (long long)N,
          (long long)K);
    CHECK(nsame, "%s [%lld, %lld]: attn_weight_matmul_n of three packed weights == each alone", attn_qtype_name(t), (long long)N, (long long)K);
    /* the activations are quantized to 8 bits (a relative step of 1/254 per value), the errors of
     * K products partly cancel: 2% of the largest output bounds it with room, and a wrong row,
     * block or nibble order gives errors of the outputs' own size (~100%) */
    CHECK(worst < 0.02, "%s [%lld, %lld]: packed products within 2%% of the float64 reference (%.4f)", attn_qtype_name(t), (long long)N,
          (long long)K, worst);
    free(buf);
    free(q);
    free(w);
    free(x);
    free(a);
    free(b);
    free(ref);
}

int main(void) {
    attn_test_name = "quant_strips";
    check_layout(ATTN_QT_Q8_0);
    check_layout(ATTN_QT_Q4_0);
    check_layout(ATTN_QT_Q4_1);

    /* errors: rows not a multiple of 16, a float32 weight, a buffer not 64-byte aligned */
    static float w[40 * 64];
    uint64_t seed = 3;
    attn_test_fill_uniform(w, 40 * 64, -1, 1, &seed);
    static uint8_t q[40 * 2 * 20];
    CHECK_OK(attn_quantize_rows(q, w, 40, 64, ATTN_QT_Q4_1, 1));
    attn_qmatrix Q40 = {ATTN_QT_Q4_1, q, 40, 64};
    attn_weight w40 = attn_weight_from_qmatrix(&Q40, NULL, ATTN_WKERNEL_BLOCKS);
    CHECK(attn_weight_strips_bytes(&w40) == 0, "40 rows (not a multiple of 16): no strips");
    void *buf = aligned(4096);
    CHECK_ERR(attn_weight_pack_strips(&w40, buf), ATTN_E_INVALID);
    attn_weight wf = attn_weight_f32(w, NULL, 32, 64);
    CHECK(attn_weight_strips_bytes(&wf) == 0, "float32: no strips");
    CHECK_ERR(attn_weight_pack_strips(NULL, buf), ATTN_E_INVALID);

    if (!attn_qkernel_available(ATTN_QK_AVX512VNNI)) {
        printf("quant_strips: this CPU has no AVX-512 VNNI: the packed products are not run (layout and errors checked)\n");
        free(buf);
        return attn_test_finish();
    }
    attn_qmatrix Q32 = {ATTN_QT_Q4_1, q, 32, 64};
    attn_weight w32 = attn_weight_from_qmatrix(&Q32, NULL, ATTN_WKERNEL_BLOCKS);
    CHECK(attn_weight_strips_bytes(&w32) == 32 * 40, "32 rows of Q4_1 [., 64]: 1280 bytes of strips");
    CHECK_ERR(attn_weight_pack_strips(&w32, (char *)buf + 8), ATTN_E_INVALID);
    CHECK(w32.strips == NULL, "a refused pack leaves w->strips NULL");

    check_products(ATTN_QT_Q8_0, 48, 64);
    check_products(ATTN_QT_Q4_0, 48, 64);
    check_products(ATTN_QT_Q4_1, 48, 64);
    check_products(ATTN_QT_Q8_0, 32, 576);  /* SmolLM2's widths: 18 and 48 blocks */
    check_products(ATTN_QT_Q4_1, 32, 576);
    check_products(ATTN_QT_Q4_1, 16, 1536);
    check_products(ATTN_QT_Q4_0, 64, 2048 + 32); /* 65 blocks: past the unpacking strips' 64 */
    check_products(ATTN_QT_Q8_0, 16, 4096 * 2);  /* 256 blocks: the Q8_0 sums in groups of rows */

    /* another kernel chosen after packing: the strips are not read, the blocks are */
    CHECK_OK(attn_weight_pack_strips(&w32, buf));
    float x[3 * 64], a[3 * 32], b[3 * 32];
    attn_test_fill_uniform(x, 3 * 64, -1, 1, &seed);
    CHECK_OK(attn_weight_matmul(a, x, 3, &w32, ATTN_ACT_IDENTITY, 1));
    if (attn_qkernel_available(ATTN_QK_AVX2)) {
        CHECK_OK(attn_quant_set_kernel(ATTN_QK_AVX2));
        CHECK(attn_weight_strips_bytes(&w32) == 0, "AVX2 kernel chosen: no strips");
        memset(buf, 0, 32 * 40); /* strips that would give zeros if they were read */
        CHECK_OK(attn_weight_matmul(b, x, 3, &w32, ATTN_ACT_IDENTITY, 1));
        CHECK(rel_err(b, a, 3 * 32) < 1e-6 && b[0] != 0.0f, "AVX2 kernel chosen: the product reads the blocks, not the strips");
        CHECK_OK(attn_quant_set_kernel(ATTN_QK_AUTO));
    }
    /* a non-finite activation is refused as without strips */
    CHECK_OK(attn_weight_pack_strips(&w32, buf));
    x[5] = NAN;
    CHECK_ERR(attn_weight_matmul(b, x, 1, &w32, ATTN_ACT_IDENTITY, 1), ATTN_E_RANGE);
    free(buf);
    return attn_test_finish();
}
