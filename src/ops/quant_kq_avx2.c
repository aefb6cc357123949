/* AVX2 (+FMA, F16C) products for Q5_0, Q5_1 and the K-quants on their blocks (see quant_kq.c for
 * the portable ones: the same exact integer block sums; prefill (M > 1) of the K-quants also the
 * same float32 operations per block in the same order, so it equals the portable kernel bit for
 * bit; Q5_0 / Q5_1 sum in 8 float lanes). Only used after quant.c found avx2 and fma.
 *   Q5_0 / Q5_1: the 32 5-bit values are rebuilt in one register (nibbles + the qh bits spread by
 *     a byte shuffle), then vpmaddubsw / vpmaddwd against the 8-bit activation block.
 *   K-quants: quant_kq_tmpl.h (values rebuilt in registers, exact integer block sums, the
 *     portable kernel's float32 operations: equal to it bit for bit, decode and prefill). */
#include "ops/quant_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "core/target_avx2_begin.h"
#include "ops/quant_simd_x86.h"

/* the 32 5-bit values of a Q5_0 / Q5_1 block (qs: 16 bytes of nibbles, qh: 32 high bits) */
static inline __m256i q5_values(const uint8_t *qs, uint32_t qh) {
    const __m128i raw = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0F);
    const __m256i nib = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), m4), _mm_and_si128(raw, m4));
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh),
                                               _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                                                3, 3, 3, 3, 3, 3, 3));
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_or_si256(nib, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
}

/* RT weight rows x one activation row; float32 accumulators per row (the block scale applied
 * with one FMA per block). Q5_0: the values minus 16 as signed bytes (vpsignb moves their sign
 * onto the activations for vpmaddubsw), so that no offset term is needed; Q5_1: [d, m]·[d_x, s_x]
 * in one multiply, the m·s_x term summed in lane 1 of a 4-lane accumulator. */
static inline __attribute__((always_inline)) void q5_tile(float *y, const attn__q8blk *xq, int64_t nb, const uint8_t *W, size_t rb,
                                                          int64_t r, int RT, int one) {
    const size_t bs = one ? 24 : 22;
    const __m256i ones = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi8(16);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 macc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const attn__q8blk *xb = xq + b;
        const __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q);
        long long ds64;
        memcpy(&ds64, &xb->d, 8);
        const __m128 xds = _mm_castsi128_ps(_mm_cvtsi64_si128(ds64)); /* [d_x, s_x, 0, 0] */
        for (int i = 0; i < RT; i++) {
            const uint8_t *blk = W + (size_t)(r + i) * rb + (size_t)b * bs;
            uint32_t qh;
            memcpy(&qh, blk + 2 + 2 * one, 4);
            const __m256i q = q5_values(blk + 6 + 2 * one, qh);
            if (one) {
                uint32_t dm32;
                memcpy(&dm32, blk, 4);
                const __m128 p = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dm32)), xds); /* [d·d_x, m·s_x] */
                const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), ones);
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcastss_ps(p), acc[i]);
                macc[i] = _mm_add_ps(macc[i], p);
            } else {
                const __m256i qs = _mm256_sub_epi8(q, sixteen);
                const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(qs, qs), _mm256_sign_epi8(xv, qs)), ones);
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(attn__x86_h2f(blk) * xb->d), acc[i]);
            }
        }
    }
    for (int i = 0; i < RT; i++) {
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[i]), _mm256_extractf128_ps(acc[i], 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
        y[r + i] = _mm_cvtss_f32(s4) + (one ? _mm_cvtss_f32(_mm_shuffle_ps(macc[i], macc[i], 1)) : 0.0f);
    }
}

/* prefill: one weight row x 4 activation rows, each block's 5-bit values rebuilt once */
static inline __attribute__((always_inline)) void q5_tile_m4(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, const uint8_t *W,
                                                             size_t rb, int64_t r, int64_t m0, int one) {
    const size_t bs = one ? 24 : 22;
    const __m256i ones = _mm256_set1_epi16(1), sixteen = _mm256_set1_epi8(16);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float macc[4] = {0, 0, 0, 0};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = W + (size_t)r * rb + (size_t)b * bs;
        uint32_t qh;
        memcpy(&qh, blk + 2 + 2 * one, 4);
        __m256i q = q5_values(blk + 6 + 2 * one, qh), sq = q;
        if (!one) {
            sq = _mm256_sub_epi8(q, sixteen);
            q = _mm256_sign_epi8(sq, sq);
        }
        const float d = attn__x86_h2f(blk), mm = one ? attn__x86_h2f(blk + 2) : 0.0f;
        for (int j = 0; j < 4; j++) {
            const attn__q8blk *xb = xq + (m0 + j) * nb + b;
            __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q);
            if (!one) xv = _mm256_sign_epi8(xv, sq);
            const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), ones);
            acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * xb->d), acc[j]);
            if (one) macc[j] += mm * xb->s;
        }
    }
    for (int j = 0; j < 4; j++) {
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[j]), _mm256_extractf128_ps(acc[j], 1));
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
        y[(m0 + j) * ldy + r] = _mm_cvtss_f32(s4) + macc[j];
    }
}

static void q5_dot(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0,
                   int64_t r1, attn_qtype t) {
    const int one = t == ATTN_QT_Q5_1;
    int64_t m4 = 0;
    /* weight rows in groups of 16 so that they stay in L1 while the activation rows pass */
    for (int64_t g = r0; M >= 4 && g < r1; g += 16)
        for (int64_t m = 0; m + 4 <= M; m += 4)
            for (int64_t r = g; r < (g + 16 < r1 ? g + 16 : r1); r++) {
                if (one) q5_tile_m4(y, ldy, xq, nb, W, rb, r, m, 1);
                else q5_tile_m4(y, ldy, xq, nb, W, rb, r, m, 0);
            }
    m4 = M / 4 * 4;
    for (int64_t m = m4; m < M; m++) {
        int64_t r = r0;
        if (one) {
            for (; r + 4 <= r1; r += 4) q5_tile(y + m * ldy, xq + m * nb, nb, W, rb, r, 4, 1);
            for (; r < r1; r++) q5_tile(y + m * ldy, xq + m * nb, nb, W, rb, r, 1, 1);
        } else {
            for (; r + 4 <= r1; r += 4) q5_tile(y + m * ldy, xq + m * nb, nb, W, rb, r, 4, 0);
            for (; r < r1; r++) q5_tile(y + m * ldy, xq + m * nb, nb, W, rb, r, 1, 0);
        }
    }
}

#define KQN(x) attn__kq_avx2_##x
#define KQ_ACC_SC(a, p, s) _mm256_add_epi32((a), _mm256_madd_epi16((p), (s)))
#include "ops/quant_kq_tmpl.h"

/* ggml's quantize_row_q8_K, bit for bit the portable attn__quantize_q8k: the first value of the
 * largest magnitude sets iscale = -127/max; vcvtps2dq rounds to nearest even as nearest_int does
 * (|iscale·x| <= 127·(1 + 2^-23) here); the 16-value block sums from the int32 values. */
static void quantize_q8k(attn__q8k *q, const float *x, int64_t nb) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; b++) {
        const float *v = x + b * 256;
        __m256 mx = _mm256_setzero_ps();
        for (int k = 0; k < 32; k++) mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * k)));
        const float amax = attn__x86_hmax_ps(mx);
        if (amax == 0.0f) {
            memset(&q[b], 0, sizeof q[b]);
            continue;
        }
        float max = 0.0f;
        const __m256 va = _mm256_set1_ps(amax);
        for (int k = 0; k < 32; k++) {
            const int mask = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(v + 8 * k)), va, _CMP_EQ_OQ));
            if (mask) {
                max = v[8 * k + __builtin_ctz((unsigned)mask)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vi = _mm256_set1_ps(iscale);
        const __m256i c127 = _mm256_set1_epi32(127), perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        __m128i gs[4];
        for (int c = 0; c < 4; c++) { /* 64 values: 4 groups of 16 */
            __m256i l[8];
            for (int k = 0; k < 8; k++) l[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vi, _mm256_loadu_ps(v + 64 * c + 8 * k))), c127);
            for (int h = 0; h < 2; h++) {
                const __m256i p8 = _mm256_packs_epi16(_mm256_packs_epi32(l[4 * h], l[4 * h + 1]), _mm256_packs_epi32(l[4 * h + 2], l[4 * h + 3]));
                _mm256_storeu_si256((__m256i *)(q[b].q + 64 * c + 32 * h), _mm256_permutevar8x32_epi32(p8, perm));
            }
            const __m256i s0 = _mm256_add_epi32(l[0], l[1]), s1 = _mm256_add_epi32(l[2], l[3]), s2 = _mm256_add_epi32(l[4], l[5]),
                          s3 = _mm256_add_epi32(l[6], l[7]);
            const __m256i hh = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, s1), _mm256_hadd_epi32(s2, s3));
            gs[c] = _mm_add_epi32(_mm256_castsi256_si128(hh), _mm256_extracti128_si256(hh, 1));
        }
        _mm_storeu_si128((__m128i *)q[b].bsums, _mm_packs_epi32(gs[0], gs[1]));
        _mm_storeu_si128((__m128i *)(q[b].bsums + 8), _mm_packs_epi32(gs[2], gs[3]));
        q[b].d = 1.0f / iscale;
    }
}

static void kdot(float *y, int64_t ldy, const void *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1,
                 attn_qtype t) {
    if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) q5_dot(y, ldy, (const attn__q8blk *)xq, nb, M, W, rb, r0, r1, t);
    else attn__kq_avx2_kdot(y, ldy, (const attn__q8k *)xq, nb, M, W, rb, r0, r1, t);
}

#include "core/target_avx2_end.h"
attn__kdot_fn attn__kdot_avx2(void) { return kdot; }
attn__quantize_q8k_fn attn__quantize_q8k_avx2(void) { return quantize_q8k; }
#else
attn__kdot_fn attn__kdot_avx2(void) { return NULL; }
attn__quantize_q8k_fn attn__quantize_q8k_avx2(void) { return NULL; }
#endif
