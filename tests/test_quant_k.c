/* Q5_0, Q5_1 and the K-quants (Q2_K .. Q6_K):
 *   - dequantization of random blocks equals gguf.quants.dequantize bit for bit
 *     (tests/fuzz/seeds_fuzz_gguf/kquants.gguf, tests/fixtures/quant/deq_*.npy,
 *     scripts/gen_kquant_fixtures.py);
 *   - products on the blocks within the stated bound of the float64 product of the dequantized
 *     weights with the unquantized activations; AVX2 equal to portable bit for bit;
 *   - ggml's Q8_K activation quantization;
 *   - bad input: non-finite scales, K-quant rows not a multiple of 256, truncated files. */
#include "attn.h"
#include "attn_gguf.h"
#include "attn_npy.h"
#include "attn_quant.h"
#include "quant_check.h"
#include "testutil.h"
#include "ops/quant_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define KQ "tests/fuzz/seeds_fuzz_gguf/kquants.gguf"

static const attn_qtype TYPES[] = {ATTN_QT_Q5_0, ATTN_QT_Q5_1, ATTN_QT_Q2_K, ATTN_QT_Q3_K, ATTN_QT_Q4_K, ATTN_QT_Q5_K, ATTN_QT_Q6_K};
#define NTYPES 7

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = (unsigned char *)malloc((size_t)sz + 1);
    *n = b ? fread(b, 1, (size_t)sz, f) : 0;
    fclose(f);
    return b;
}

static size_t find_bytes(const unsigned char *b, size_t n, const char *s, size_t l) {
    for (size_t i = 0; i + l <= n; i++)
        if (memcmp(b + i, s, l) == 0) return i;
    return (size_t)-1;
}

/* byte offsets of the f16 scales in a block of t */
static int scale_offsets(attn_qtype t, int *off) {
    switch (t) {
    case ATTN_QT_Q5_0: off[0] = 0; return 1;
    case ATTN_QT_Q5_1: case ATTN_QT_Q4_K: case ATTN_QT_Q5_K: off[0] = 0, off[1] = 2; return 2;
    case ATTN_QT_Q2_K: off[0] = 80, off[1] = 82; return 2;
    case ATTN_QT_Q3_K: off[0] = 108; return 1;
    case ATTN_QT_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

static void test_dequant_fidelity(void) {
    attn_gguf *g = NULL;
    CHECK_OK(attn_gguf_open(&g, KQ));
    if (!g) return;
    for (int i = 0; i < NTYPES; i++) {
        const char *name = attn_qtype_name(TYPES[i]);
        attn_gguf_tensor t;
        attn_tensor ref;
        char fx[64];
        snprintf(fx, sizeof fx, "quant/deq_%s.npy", name);
        CHECK_OK(attn_gguf_find_tensor(g, name, &t));
        CHECK(t.type == TYPES[i], "%s: tensor type read as %s", name, attn_qtype_name(t.type));
        CHECK_OK(attn_npy_load(&ref, attn_test_fixture(fx)));
        attn_qmatrix m = {t.type, t.data, t.ne[1], t.ne[0]};
        float *d = (float *)malloc(sizeof(float) * (size_t)(t.ne[0] * t.ne[1]));
        CHECK_OK(attn_qmatrix_dequantize_rows(d, &m, 0, m.rows));
        size_t n = (size_t)(m.rows * m.cols), diff = 0;
        for (size_t k = 0; k < n; k++) diff += memcmp(&d[k], (float *)ref.data + k, 4) != 0;
        CHECK(ref.shape[0] == m.rows && ref.shape[1] == m.cols && diff == 0, "%s: dequantization equals gguf.quants bit for bit (%zu of %zu differ)",
              name, diff, n);
        /* rows one at a time from an offset give the same values */
        CHECK_OK(attn_qmatrix_dequantize_rows(d, &m, 2, 1));
        CHECK(memcmp(d, (float *)ref.data + 2 * m.cols, sizeof(float) * (size_t)m.cols) == 0, "%s: row 2 alone", name);
        free(d);
        free(ref.data);
    }
    attn_gguf_close(g);
}

static uint16_t f2h(float f) { return attn_f32_to_f16(f); }

static void test_q8k(void) {
    uint64_t seed = 99;
    float x[512];
    attn_test_fill_uniform(x, 512, -3.0f, 2.0f, &seed);
    x[17] = -5.0f; /* the largest |x| of block 0 is negative */
    for (int j = 256; j < 512; j++) x[j] = 0.0f;
    attn__q8k q[2];
    attn__quantize_q8k(q, x, 2);
    int ok = q[0].d == 1.0f / (-127.0f / -5.0f) && q[0].q[17] == -127, sums = 1, err = 1;
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int l = 0; l < 16; l++) s += q[0].q[16 * g + l];
        sums &= s == q[0].bsums[g];
    }
    for (int j = 0; j < 256; j++) err &= fabs((double)q[0].d * q[0].q[j] - x[j]) <= q[0].d / 2 * 1.000001;
    int zero = q[1].d == 0.0f;
    for (int j = 0; j < 256; j++) zero &= q[1].q[j] == 0;
    CHECK(ok && sums && err && zero, "Q8_K: d = max/127 with the sign making the largest value -127, block sums, |x - d·q| <= d/2, zero block");
}

/* random blocks of t: random bytes, f16 scales uniform in +-amp (mins in +-amp/4) */
static unsigned char *random_matrix(attn_qtype t, int64_t N, int64_t K, uint64_t *seed, float amp) {
    size_t rb = attn_qtype_row_bytes(t, K), bs = attn__qtype_block_bytes(t);
    unsigned char *w = (unsigned char *)malloc(rb * (size_t)N);
    for (size_t i = 0; i < rb * (size_t)N; i++) {
        *seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
        w[i] = (unsigned char)*seed;
    }
    int off[2], no = scale_offsets(t, off);
    for (size_t b = 0; b < rb * (size_t)N / bs; b++)
        for (int s = 0; s < no; s++) {
            float v;
            attn_test_fill_uniform(&v, 1, -amp, amp, seed);
            uint16_t h = f2h(s ? v / 4 : v);
            memcpy(w + b * bs + off[s], &h, 2);
        }
    return w;
}

static void test_products(void) {
    const int64_t N = 37, K = 512;
    uint64_t seed = 4242;
    for (int ti = 0; ti < NTYPES; ti++) {
        attn_qtype ty = TYPES[ti];
        const int64_t bl = attn_qtype_block(ty) == 256 ? 256 : 32;
        unsigned char *w = random_matrix(ty, N, K, &seed, bl == 256 ? 0.01f : 0.05f);
        attn_qmatrix m = {ty, w, N, K};
        float *wd = (float *)malloc(sizeof(float) * N * K);
        CHECK_OK(attn_qmatrix_dequantize_rows(wd, &m, 0, N));
        for (int64_t M = 1; M <= 9; M += 4) {
            float *x = (float *)malloc(sizeof(float) * M * K), *y0 = (float *)malloc(sizeof(float) * M * N),
                  *y1 = (float *)malloc(sizeof(float) * M * N);
            attn_test_fill_uniform(x, (size_t)(M * K), -2.0f, 2.0f, &seed);
            x[5] = 40.0f;                    /* an outlier in one block */
            for (int j = 0; j < 32; j++) x[K - 32 + j] = 0.0f; /* a zero block */
            CHECK_OK(attn_qmatmul_kernel(y0, x, &m, M, 1, ATTN_QK_PORTABLE));
            /* Bound: the activations are rounded to a grid of step d_x = max|x|/127 over the
             * activation block (32 values for Q5_0/Q5_1, 256 for the K-quants), so each x moves by
             * at most d_x/2 and |y - exact| <= Σ|w|·d_x/2; the float32 sums of the per-block
             * products add at most ~2^-24·(nb + 4) relative to Σ|w·x| (1e-6·Σ|w·x| allowed). */
            double worst = 0;
            const int within = quant_within_bound(y0, x, wd, M, N, K, (int)bl, &worst);
            CHECK(within, "%s M=%lld: error vs float64 dequantized product within the 8-bit activation bound (worst err/bound %.3f)",
                  attn_qtype_name(ty), (long long)M, worst);
            /* the reference kernel (float64 on the dequantized rows) against the same exact product */
            CHECK_OK(attn_qmatmul_kernel(y1, x, &m, M, 1, ATTN_QK_REFERENCE));
            double dref = 0;
            for (int64_t i = 0; i < M; i++)
                for (int64_t r = 0; r < N; r++) {
                    double exact = 0;
                    for (int64_t k = 0; k < K; k++) exact += (double)wd[r * K + k] * x[i * K + k];
                    dref = fmax(dref, fabs(y1[i * N + r] - exact) / (fabs(exact) + 1e-3));
                }
            CHECK(dref <= 1e-6, "%s M=%lld: reference kernel = float64 product (rel %.2g)", attn_qtype_name(ty), (long long)M, dref);
            attn_qkernel ks[] = {ATTN_QK_AVX2, ATTN_QK_AVX512VNNI, ATTN_QK_AUTO};
            for (int k = 0; k < 3; k++) {
                if (!attn_qkernel_available(ks[k])) continue;
                for (int nt = 1; nt <= 2; nt++) {
                    CHECK_OK(attn_qmatmul_kernel(y1, x, &m, M, nt, ks[k]));
                    /* same integer block sums; K-quant prefill: the same float32 operations in the same
                     * order (bit for bit); decode and Q5_0 / Q5_1: the float32 sum of the blocks in 8
                     * lanes, then a horizontal sum (error <= ~16·2^-24 of the sum of |terms|: 1e-5 of
                     * max|y| + 1e-6) */
                    double dd = 0, mx = attn_test_max_abs(y0, (size_t)(M * N));
                    for (int64_t i = 0; i < M * N; i++) dd = fmax(dd, fabs(y1[i] - y0[i]));
                    if (bl == 256 && M > 1)
                        CHECK(memcmp(y0, y1, sizeof(float) * (size_t)(M * N)) == 0, "%s kernel %d threads %d M=%lld equals portable bit for bit",
                              attn_qtype_name(ty), (int)ks[k], nt, (long long)M);
                    else
                        CHECK(dd <= 1e-5 * mx + 1e-6, "%s kernel %d threads %d M=%lld vs portable: %.3g (max %.3g)", attn_qtype_name(ty), (int)ks[k], nt,
                              (long long)M, dd, mx);
                }
            }
            free(x);
            free(y0);
            free(y1);
        }
        /* attn_qmatmul_n (x quantized once, one parallel region) equals separate products: two
         * matrices of the type (rows multiples of 16: the shared path), and with 21 rows (the
         * fallback to separate calls) */
        for (int rows2 = 16; rows2 <= 21; rows2 += 5) {
            float x[3 * 512], a1[3 * 16], a2[3 * 21], b1[3 * 16], b2[3 * 21];
            attn_test_fill_uniform(x, 3 * 512, -1.0f, 1.0f, &seed);
            size_t rb = attn_qtype_row_bytes(ty, K);
            attn_qmatrix ws[2] = {{ty, w, 16, K}, {ty, w + 16 * rb, rows2, K}};
            float *const outs[2] = {b1, b2};
            for (int64_t M = 1; M <= 3; M += 2) {
                CHECK_OK(attn_qmatmul(a1, x, &ws[0], M, 1));
                CHECK_OK(attn_qmatmul(a2, x, &ws[1], M, 1));
                CHECK_OK(attn_qmatmul_n(outs, x, ws, 2, M, 2));
                CHECK(memcmp(a1, b1, sizeof(float) * 16 * M) == 0 && memcmp(a2, b2, sizeof(float) * rows2 * M) == 0,
                      "%s: qmatmul_n equals separate products (rows 16 + %d, M=%lld)", attn_qtype_name(ty), rows2, (long long)M);
            }
        }
        CHECK(attn_qtype_row_bytes(ty, K) == (size_t)(K / bl) * attn__qtype_block_bytes(ty) && attn_qtype_row_bytes(ty, K + 16) == 0,
              "%s: row bytes", attn_qtype_name(ty));
        printf("quant_k: %s kernel: %s\n", attn_qtype_name(ty), attn_quant_type_kernel_name(ty));
        free(wd);
        free(w);
    }
    /* one qmatmul_n over Q5_0, Q8_0 and Q4_1 matrices (one 32-value activation format) */
    {
        const attn_qtype mt[3] = {ATTN_QT_Q5_0, ATTN_QT_Q8_0, ATTN_QT_Q4_1};
        unsigned char *mw[3];
        attn_qmatrix ws[3];
        float x[2 * 256], a[3][2 * 32], b[3][2 * 32];
        float *const outs[3] = {b[0], b[1], b[2]};
        attn_test_fill_uniform(x, 2 * 256, -1.0f, 1.0f, &seed);
        for (int i = 0; i < 3; i++) {
            mw[i] = random_matrix(mt[i], 32, 256, &seed, 0.05f);
            if (mt[i] != ATTN_QT_Q5_0) { /* Q8_0 / Q4_1 scales at byte 0 (and 2) */
                size_t bs = mt[i] == ATTN_QT_Q8_0 ? 34 : 20;
                for (size_t k = 0; k < 32 * 8; k++) {
                    uint16_t h = f2h(0.01f), mh = f2h(-0.02f);
                    memcpy(mw[i] + k * bs, &h, 2);
                    if (mt[i] == ATTN_QT_Q4_1) memcpy(mw[i] + k * bs + 2, &mh, 2);
                }
            }
            ws[i] = (attn_qmatrix){mt[i], mw[i], 32, 256};
            CHECK_OK(attn_qmatmul(a[i], x, &ws[i], 2, 1));
        }
        CHECK_OK(attn_qmatmul_n(outs, x, ws, 3, 2, 2));
        CHECK(memcmp(a, b, sizeof a) == 0, "qmatmul_n over q5_0 + q8_0 + q4_1 equals separate products");
        for (int i = 0; i < 3; i++) free(mw[i]);
    }
    /* bad arguments */
    float xx[512] = {0}, yy[4];
    unsigned char *w = random_matrix(ATTN_QT_Q4_K, 4, 512, &seed, 0.01f);
    attn_qmatrix bad = {ATTN_QT_Q4_K, w, 4, 384};
    CHECK_ERR(attn_qmatmul(yy, xx, &bad, 1, 1), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), "384") && strstr(attn_last_error(), "256"), "K-quant row length named: %s", attn_last_error());
    bad.cols = 512;
    xx[3] = INFINITY;
    CHECK_ERR(attn_qmatmul(yy, xx, &bad, 1, 1), ATTN_E_RANGE);
    CHECK_OK(attn_qmatrix_check(&bad));
    uint16_t nan = 0x7e00, inf = 0x7c00;
    memcpy(w + 144 * 5 + 2, &nan, 2); /* row 2, block 1, dmin */
    CHECK_ERR(attn_qmatrix_check(&bad), ATTN_E_FORMAT);
    CHECK(strstr(attn_last_error(), "NaN") && strstr(attn_last_error(), "row 2"), "NaN scale named: %s", attn_last_error());
    memcpy(w + 144 * 5 + 2, &inf, 2);
    CHECK_ERR(attn_qmatrix_check(&bad), ATTN_E_FORMAT);
    free(w);
}

static void test_bad_files(void) {
    size_t sz;
    unsigned char *b = slurp(KQ, &sz);
    CHECK(b != NULL, "read %s", KQ);
    if (!b) return;
    attn_gguf *g = NULL;
    /* every truncation is refused (up to the end of the last tensor: GGUFWriter pads after it) */
    size_t data_end = 0;
    CHECK_OK(attn_gguf_open_buffer(&g, b, sz));
    for (int64_t i = 0; g && i < attn_gguf_n_tensors(g); i++) {
        attn_gguf_tensor t;
        attn_gguf_tensor_at(g, i, &t);
        size_t e = (size_t)((const unsigned char *)t.data - b) + t.nbytes;
        if (e > data_end) data_end = e;
    }
    attn_gguf_close(g);
    g = NULL;
    CHECK(data_end > 6000 && data_end <= sz, "tensor data ends at %zu of %zu", data_end, sz);
    int bad = 0, tried = 0;
    for (size_t cut = 0; cut < data_end; cut += cut < 1024 || cut + 64 > data_end ? 1 : 13) {
        int rc = attn_gguf_open_buffer(&g, b, cut);
        tried++;
        if (rc != ATTN_E_FORMAT || g) bad++;
        attn_gguf_close(g);
        g = NULL;
    }
    CHECK(bad == 0, "kquants.gguf: %d of %d truncations not refused with ATTN_E_FORMAT", bad, tried);
    unsigned char *c = (unsigned char *)malloc(sz);
    /* tensor "q4_k": name, n_dims, ne[0] = 512 -> 384 (not a multiple of 256) */
    memcpy(c, b, sz);
    size_t at = find_bytes(c, sz, "q4_k", 4);
    CHECK(at != (size_t)-1, "tensor q4_k found");
    if (at != (size_t)-1) {
        uint64_t ne0 = 384;
        memcpy(c + at + 4 + 4, &ne0, 8);
        CHECK_ERR(attn_gguf_open_buffer(&g, c, sz), ATTN_E_FORMAT);
        CHECK(strstr(attn_last_error(), "384") && strstr(attn_last_error(), "q4_k") && strstr(attn_last_error(), "256"),
              "row length not a multiple of 256: %s", attn_last_error());
    }
    /* a q6_k scale (the last tensor's first block: d at byte 208 of the data) set to NaN / -Inf */
    attn_gguf_tensor t;
    CHECK_OK(attn_gguf_open_buffer(&g, b, sz));
    if (g && attn_gguf_find_tensor(g, "q6_k", &t) == 0) {
        size_t off = (size_t)((const unsigned char *)t.data - b) + 210 + 208; /* block 1 of row 0 */
        attn_gguf_close(g);
        g = NULL;
        const uint16_t hv[2] = {0x7e01, 0xfc00};
        for (int k = 0; k < 2; k++) {
            memcpy(c, b, sz);
            memcpy(c + off, &hv[k], 2);
            CHECK_ERR(attn_gguf_open_buffer(&g, c, sz), ATTN_E_FORMAT);
            CHECK(strstr(attn_last_error(), "q6_k") && strstr(attn_last_error(), k ? "infinite" : "NaN") && strstr(attn_last_error(), "block 1 of row 0"),
                  "non-finite scale refused: %s", attn_last_error());
        }
    }
    attn_gguf_close(g);
    free(c);
    free(b);
}

static void test_quantizers(void) {
    attn_gguf *g = NULL;
    CHECK_OK(attn_gguf_open(&g, attn_test_fixture("quant/quantize_ref.gguf")));
    if (!g) return;
    attn_gguf_tensor in;
    CHECK_OK(attn_gguf_find_tensor(g, "input", &in));
    const int64_t R = in.ne[1], C = in.ne[0];
    const float *x = (const float *)in.data;
    unsigned char *buf = (unsigned char *)malloc((size_t)(R * C) * 4);
    /* Q8_0 .. Q5_1: byte for byte as gguf.quants.quantize (bit-exact ports of ggml's _ref) */
    const attn_qtype simple[] = {ATTN_QT_Q8_0, ATTN_QT_Q4_0, ATTN_QT_Q4_1, ATTN_QT_Q5_0, ATTN_QT_Q5_1};
    for (int i = 0; i < 5; i++) {
        attn_gguf_tensor t;
        CHECK_OK(attn_gguf_find_tensor(g, attn_qtype_name(simple[i]), &t));
        CHECK_OK(attn_quantize_rows(buf, x, R, C, simple[i], 2));
        size_t n = attn_qtype_row_bytes(simple[i], C) * (size_t)R, diff = 0;
        for (size_t k = 0; k < n; k++) diff += buf[k] != ((const unsigned char *)t.data)[k];
        CHECK(t.nbytes == n && diff == 0, "%s quantizer equals gguf.quants byte for byte (%zu of %zu bytes differ)", attn_qtype_name(simple[i]), diff, n);
    }
    /* K-quants (no NumPy quantizer to compare with; llama.cpp byte comparison is a follow-up):
     * the reconstruction error of rows 0 and 2 (N(0,1) values and a zero block) relative to their
     * rms must stay under the bound of a uniform quantizer of the same step, with 25% margin for
     * the clamped ends: step ~ 4.6σ/(levels-1) over a 16/32-value group of normal values (the
     * expected range of 16 N(0,1) values is ~3.5σ, 32: ~4.1σ; 4.6σ covers the spread of ranges),
     * rms error <= step/sqrt(12) (levels - 1 = 3, 7, 15, 31, 63): Q2_K 0.44, Q3_K 0.19, Q4_K 0.089,
     * Q5_K 0.043, Q6_K 0.021. */
    const attn_qtype kt[] = {ATTN_QT_Q2_K, ATTN_QT_Q3_K, ATTN_QT_Q4_K, ATTN_QT_Q5_K, ATTN_QT_Q6_K};
    const double lim[] = {0.44 * 1.25, 0.19 * 1.25, 0.089 * 1.25, 0.043 * 1.25, 0.021 * 1.25};
    float *back = (float *)malloc(sizeof(float) * (size_t)(R * C));
    for (int i = 0; i < 5; i++) {
        CHECK_OK(attn_quantize_rows(buf, x, R, C, kt[i], 2));
        attn_qmatrix m = {kt[i], buf, R, C};
        CHECK_OK(attn_qmatrix_check(&m));
        CHECK_OK(attn_qmatrix_dequantize_rows(back, &m, 0, R));
        double e2 = 0, x2 = 0;
        int zero_ok = 1;
        for (int r = 0; r <= 2; r += 2)
            for (int64_t k = 0; k < C; k++) {
                double d = (double)back[r * C + k] - x[r * C + k];
                e2 += d * d;
                x2 += (double)x[r * C + k] * x[r * C + k];
            }
        for (int k = 64; k < 96; k++) zero_ok &= back[2 * C + k] == 0.0f;
        double rel = sqrt(e2 / x2);
        /* the row of mixed scales (1e-4 .. 100 per 32 values) keeps each group's relative error */
        double worst_grp = 0;
        for (int b = 0; b < C / 32; b++) {
            double ge = 0, gx = 0;
            for (int k = 0; k < 32; k++) {
                double d = (double)back[C + b * 32 + k] - x[C + b * 32 + k];
                ge += d * d;
                gx += (double)x[C + b * 32 + k] * x[C + b * 32 + k];
            }
            worst_grp = fmax(worst_grp, sqrt(ge / gx));
        }
        printf("quant_k: %s quantizer: relative rms error %.4f (bound %.4f), worst group of the mixed-scale row %.4f\n", attn_qtype_name(kt[i]), rel, lim[i],
               worst_grp);
        CHECK(rel <= lim[i] && zero_ok, "%s quantizer: relative rms error %.4f <= %.4f, zero block stays zero", attn_qtype_name(kt[i]), rel, lim[i]);
    }
    free(back);
    /* bad input */
    float bad[256] = {0};
    bad[7] = NAN;
    CHECK_ERR(attn_quantize_rows(buf, bad, 1, 256, ATTN_QT_Q4_K, 1), ATTN_E_RANGE);
    CHECK_ERR(attn_quantize_rows(buf, x, 1, 96, ATTN_QT_Q6_K, 1), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), "96") && strstr(attn_last_error(), "256"), "row length named: %s", attn_last_error());
    free(buf);
    attn_gguf_close(g);
}

int main(void) {
    attn_test_name = "test_quant_k";
    test_dequant_fidelity();
    test_q8k();
    test_products();
    test_bad_files();
    test_quantizers();
    return attn_test_finish();
}
