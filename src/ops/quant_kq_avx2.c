/* AVX2 (+FMA, F16C) products for Q5_0, Q5_1 and the K-quants on their blocks (see quant_kq.c for
 * the portable ones: the same exact integer block sums; prefill (M > 1) of the K-quants also the
 * same float32 operations per block in the same order, so it equals the portable kernel bit for
 * bit; decode and Q5_0 / Q5_1 sum in 8 float lanes). Only used after quant.c found avx2 and fma.
 *   Q5_0 / Q5_1: the 32 5-bit values are rebuilt in one register (nibbles + the qh bits spread by
 *     a byte shuffle), then vpmaddubsw / vpmaddwd against the 8-bit activation block.
 *   K-quants: a super-block is unpacked once into 256 unsigned bytes (0..63) and 16 int16 group
 *     scales (attn__kblk, on the stack: the matrix is never expanded), then each activation row's
 *     Q8_K block is multiplied with vpmaddubsw (|63·127·2| < 32767, no saturation), the 16-bit
 *     pair sums weighted by the group scales with vpmaddwd; the min / offset term is one vpmaddwd
 *     of the group coefficients with the Q8_K block sums. Prefill (M > 1) unpacks each
 *     super-block once for all activation rows. */
#include "ops/quant_internal.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "core/target_avx2_begin.h"

static inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static inline float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

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
                acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(h2f(blk) * xb->d), acc[i]);
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
        const float d = h2f(blk), mm = one ? h2f(blk + 2) : 0.0f;
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

/* unpack the values of one K-quant super-block into u->q (the scales: attn__kscales) */
static inline void kunpack_q(attn__kblk *u, const uint8_t *blk, attn_qtype t) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03), m1 = _mm256_set1_epi8(0x01);
    switch (t) {
    case ATTN_QT_Q2_K:
    case ATTN_QT_Q3_K: {
        const uint8_t *qs = blk + (t == ATTN_QT_Q2_K ? 16 : 32);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)blk);
        for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), m3);
                if (t == ATTN_QT_Q3_K) /* + 4·hbit, hbit of value 32b + l is bit b of hmask[l] */
                    q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), m1), 2));
                _mm256_storeu_si256((__m256i *)(u->q + 128 * h + 32 * s), q);
            }
        }
        return;
    }
    case ATTN_QT_Q4_K:
    case ATTN_QT_Q5_K: {
        const uint8_t *qs = blk + (t == ATTN_QT_Q5_K ? 48 : 16);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
        for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (t == ATTN_QT_Q5_K) {
                lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), m1), 4));
                hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), m1), 4));
            }
            _mm256_storeu_si256((__m256i *)(u->q + 64 * c), lo);
            _mm256_storeu_si256((__m256i *)(u->q + 64 * c + 32), hi);
        }
        return;
    }
    case ATTN_QT_Q6_K:
        for (int h = 0; h < 2; h++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
            const __m256i b = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
            const __m256i lo[4] = {_mm256_and_si256(a, m4), _mm256_and_si256(b, m4), _mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(b, 4), m4)};
            for (int s = 0; s < 4; s++) {
                const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * s), m3), 4);
                _mm256_storeu_si256((__m256i *)(u->q + 128 * h + 32 * s), _mm256_or_si256(lo[s], hb));
            }
        }
        return;
    default: return;
    }
}

/* the 16 group scales and offset coefficients of a K-quant super-block as int16 vectors, and
 * d, dm (as attn__kscales; in registers: no store / reload of 16-bit lanes; f16 through F16C) */
static inline void kscales(__m256i *sc, __m256i *mn, float *d, float *dm, const uint8_t *blk, attn_qtype t) {
    switch (t) {
    case ATTN_QT_Q4_K:
    case ATTN_QT_Q5_K: {
        /* 6-bit scales / mins of the 8 groups of 32 (get_scale_min_k4) with 32-bit masks */
        uint32_t a[3], v[4];
        memcpy(a, blk + 4, 12);
        v[0] = a[0] & 0x3f3f3f3f;
        v[1] = (a[2] & 0x0f0f0f0f) | ((a[0] >> 2) & 0x30303030);
        v[2] = a[1] & 0x3f3f3f3f;
        v[3] = ((a[2] >> 4) & 0x0f0f0f0f) | ((a[1] >> 2) & 0x30303030);
        const __m128i b8 = _mm_loadu_si128((const __m128i *)v); /* sc[0..7], m[0..7] as bytes */
        const __m128i s16 = _mm_cvtepu8_epi16(b8), m16 = _mm_cvtepu8_epi16(_mm_srli_si128(b8, 8));
        /* each 32-group's value for its two 16-groups */
        *sc = _mm256_set_m128i(_mm_unpackhi_epi16(s16, s16), _mm_unpacklo_epi16(s16, s16));
        *mn = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16)));
        *d = h2f(blk);
        *dm = h2f(blk + 2);
        return;
    }
    case ATTN_QT_Q6_K:
        *sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
        *mn = _mm256_mullo_epi16(*sc, _mm256_set1_epi16(-32));
        *d = *dm = h2f(blk + 208);
        return;
    default: {
        _Alignas(32) attn__kblk u;
        attn__kscales(&u, blk, t);
        *sc = _mm256_load_si256((const __m256i *)u.sc);
        *mn = _mm256_load_si256((const __m256i *)u.mn);
        *d = u.d;
        *dm = u.dm;
        return;
    }
    }
}

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void k_dot(float *y, int64_t ldy, const attn__q8k *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0,
                  int64_t r1, attn_qtype t) {
    const size_t bs = attn__qtype_block_bytes(t);
    _Alignas(32) attn__kblk u;
    __m256i scv[8];
    /* the group scales of 32 values 32k .. 32k+31: sc[2k] in the low 8 lanes, sc[2k+1] in the high */
    const __m256i lohi = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    for (int64_t r = r0; r < r1; r++) {
        __m256 acc1 = _mm256_setzero_ps(); /* decode: the row's sum in 8 float lanes */
        if (M > 1)
            for (int64_t m = 0; m < M; m++) y[m * ldy + r] = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = W + (size_t)r * rb + (size_t)b * bs;
            if (M == 1) _mm_prefetch((const char *)(blk + 2 * bs), _MM_HINT_T0);
            __m256i sc, mn;
            kscales(&sc, &mn, &u.d, &u.dm, blk, t);
            kunpack_q(&u, blk, t);
            for (int k = 0; k < 8; k++) scv[k] = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(k)), lohi);
            for (int64_t m = 0; m < M; m++) {
                const attn__q8k *xb = xq + m * nb + b;
                __m256i acc = _mm256_setzero_si256();
                for (int k = 0; k < 8; k++) {
                    const __m256i p = _mm256_maddubs_epi16(_mm256_load_si256((const __m256i *)(u.q + 32 * k)),
                                                           _mm256_loadu_si256((const __m256i *)(xb->q + 32 * k)));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, scv[k]));
                }
                const __m256i mv = _mm256_madd_epi16(mn, _mm256_loadu_si256((const __m256i *)xb->bsums));
                if (M == 1) {
                    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(u.d * xb->d), acc1);
                    acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mv), _mm256_set1_ps(u.dm * xb->d), acc1);
                } else {
                    y[m * ldy + r] += (u.d * xb->d) * (float)hsum_i32(acc) + (u.dm * xb->d) * (float)hsum_i32(mv);
                }
            }
        }
        if (M == 1) y[r] = hsum_ps(acc1);
    }
}

static void kdot(float *y, int64_t ldy, const void *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1,
                 attn_qtype t) {
    if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) q5_dot(y, ldy, (const attn__q8blk *)xq, nb, M, W, rb, r0, r1, t);
    else k_dot(y, ldy, (const attn__q8k *)xq, nb, M, W, rb, r0, r1, t);
}

#include "core/target_avx2_end.h"
attn__kdot_fn attn__kdot_avx2(void) { return kdot; }
#else
attn__kdot_fn attn__kdot_avx2(void) { return NULL; }
#endif
