/* AVX-512 (VNNI + VL + BW) products for the K-quants (Q2_K .. Q6_K), the same exact integer sums
 * and float32 operations as the AVX2 and portable kernels (bit for bit):
 *   decode and short prefill: the code of quant_kq_tmpl.h with the group-scale multiply-accumulate
 *     in one vpdpwssd (AVX512_VNNI on 256-bit lanes) instead of vpmaddwd + vpaddd;
 *   prefill from 24 activation rows: 16-row strips, 512-bit vpdpbusd with the rows in the lanes
 *     (strips() below).
 * Q5_0 / Q5_1 go to the AVX2 kernel. Only used after quant.c found
 * avx512f, avx512vl, avx512bw, avx512vnni, avx2 and fma (attn_qkernel_available). */
#include "ops/quant_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "core/target_avx512_begin.h"
#include "ops/quant_simd_x86.h"

#define KQN(x) attn__kq_vnni_##x
#define KQ_ACC_SC(a, p, s) _mm256_dpwssd_epi32((a), (p), (s))
#include "ops/quant_kq_tmpl.h"

/* Prefill in strips of 16 weight rows, one 512-bit lane per row: a super-block of the 16 rows is
 * unpacked once and transposed so that vector s holds values 4s .. 4s+3 of every row; one vpdpbusd
 * with 4 activation bytes broadcast then adds 4 products to each row's sum (no horizontal sums).
 * Per 16-value group g (32 for Q4_K / Q5_K) the sums are multiplied by the rows' scales (vpmulld)
 * and added: the exact isum of each row; msum: vpdpwssd of the rows' (mn[2p], mn[2p+1]) pairs with
 * the broadcast block sums; then the portable kernel's float32 operations, 16 rows at once. */
#if defined(__clang__)
#define KQ_UNROLL16 _Pragma("unroll")
#else
#define KQ_UNROLL16 _Pragma("GCC unroll 16")
#endif

typedef struct {
    __m512i v[64];  /* v[s]: the 4 values 4s .. 4s+3 of each row (u8) */
    __m512i sc[16]; /* group g's scale of each row (int32) */
    __m512i mn[8];  /* (mn[2p], mn[2p+1]) of each row (int16 pairs) */
    __m512 d, dm;
} strip_blk;

static inline __attribute__((always_inline)) void strip_fill(strip_blk *o, const uint8_t *W, size_t rb, int64_t r, int64_t b, attn_qtype t) {
    _Alignas(64) uint8_t vals[16][256];
    _Alignas(64) int16_t sc[16][16], mn[16][16];
    _Alignas(64) float d[16], dm[16];
    const size_t bs = attn__qtype_block_bytes(t);
    for (int i = 0; i < 16; i++) {
        const uint8_t *blk = W + (size_t)(r + i) * rb + (size_t)b * bs;
        __m256i q[8], s, m;
        attn__kq_vnni_vals(q, blk, t);
        for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)(vals[i] + 32 * k), q[k]);
        attn__kq_vnni_scales(&s, &m, &d[i], &dm[i], blk, t);
        _mm256_store_si256((__m256i *)sc[i], s);
        _mm256_store_si256((__m256i *)mn[i], m);
    }
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(64));
    for (int k = 0; k < 64; k++) o->v[k] = _mm512_i32gather_epi32(_mm512_add_epi32(rows, _mm512_set1_epi32(k)), (const void *)vals, 4);
    const __m512i rows8 = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(8));
    for (int p = 0; p < 8; p++) o->mn[p] = _mm512_i32gather_epi32(_mm512_add_epi32(rows8, _mm512_set1_epi32(p)), (const void *)mn, 4);
    for (int g = 0; g < 16; g++) {
        _Alignas(64) int32_t col[16];
        for (int i = 0; i < 16; i++) col[i] = sc[i][g];
        o->sc[g] = _mm512_load_si512((const void *)col);
    }
    o->d = _mm512_load_ps(d);
    o->dm = _mm512_load_ps(dm);
}

/* the 4 bytes at p in every 32-bit lane */
static inline __m512i bc4(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* y[m·ldy + r .. r+15] (+)= block o of the strip times activation block xb */
static inline __attribute__((always_inline)) void strip_dot(float *yp, const strip_blk *o, const attn__q8k *xb, int first, int g32) {
    __m512i isum = _mm512_setzero_si512();
    if (g32) {
        KQ_UNROLL16
        for (int g = 0; g < 8; g++) {
            __m512i a = _mm512_setzero_si512();
            KQ_UNROLL16
            for (int k = 8 * g; k < 8 * g + 8; k++) a = _mm512_dpbusd_epi32(a, o->v[k], bc4(xb->q + 4 * k));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(a, o->sc[2 * g]));
        }
    } else {
        KQ_UNROLL16
        for (int g = 0; g < 16; g++) {
            __m512i a = _mm512_setzero_si512();
            KQ_UNROLL16
            for (int k = 4 * g; k < 4 * g + 4; k++) a = _mm512_dpbusd_epi32(a, o->v[k], bc4(xb->q + 4 * k));
            isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(a, o->sc[g]));
        }
    }
    __m512i msum = _mm512_setzero_si512();
    KQ_UNROLL16
    for (int p = 0; p < 8; p++) msum = _mm512_dpwssd_epi32(msum, o->mn[p], bc4(xb->bsums + 2 * p));
    const __m512 xd = _mm512_set1_ps(xb->d);
    const __m512 t1 = _mm512_mul_ps(_mm512_mul_ps(o->d, xd), _mm512_cvtepi32_ps(isum));
    const __m512 t2 = _mm512_mul_ps(_mm512_mul_ps(o->dm, xd), _mm512_cvtepi32_ps(msum));
    const __m512 v = _mm512_add_ps(t1, t2);
    _mm512_storeu_ps(yp, first ? _mm512_add_ps(_mm512_setzero_ps(), v) : _mm512_add_ps(_mm512_loadu_ps(yp), v));
}

static void strips(float *y, int64_t ldy, const attn__q8k *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1,
                   attn_qtype t) {
    _Alignas(64) strip_blk o;
    const int g32 = t == ATTN_QT_Q4_K || t == ATTN_QT_Q5_K;
    for (int64_t r = r0; r + 16 <= r1; r += 16)
        for (int64_t b = 0; b < nb; b++) {
            switch (t) {
            case ATTN_QT_Q2_K: strip_fill(&o, W, rb, r, b, ATTN_QT_Q2_K); break;
            case ATTN_QT_Q3_K: strip_fill(&o, W, rb, r, b, ATTN_QT_Q3_K); break;
            case ATTN_QT_Q4_K: strip_fill(&o, W, rb, r, b, ATTN_QT_Q4_K); break;
            case ATTN_QT_Q5_K: strip_fill(&o, W, rb, r, b, ATTN_QT_Q5_K); break;
            default: strip_fill(&o, W, rb, r, b, ATTN_QT_Q6_K); break;
            }
            if (g32)
                for (int64_t m = 0; m < M; m++) strip_dot(y + m * ldy + r, &o, xq + m * nb + b, b == 0, 1);
            else
                for (int64_t m = 0; m < M; m++) strip_dot(y + m * ldy + r, &o, xq + m * nb + b, b == 0, 0);
        }
}

static void kdot_vnni(float *y, int64_t ldy, const void *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1,
                      attn_qtype t) {
    if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) {
        attn__kdot_avx2()(y, ldy, xq, nb, M, W, rb, r0, r1, t);
        return;
    }
    int64_t rs = r0;
    if (M >= 24 && r1 - r0 >= 16) { /* prefill (from 24 rows the transposition pays): whole 16-row strips; the rows left over below */
        rs = r0 + (r1 - r0) / 16 * 16;
        strips(y, ldy, (const attn__q8k *)xq, nb, M, W, rb, r0, rs, t);
    }
    if (rs < r1) attn__kq_vnni_kdot(y, ldy, (const attn__q8k *)xq, nb, M, W, rb, rs, r1, t);
}

#include "core/target_avx512_end.h"
attn__kdot_fn attn__kdot_avx512vnni(void) { return kdot_vnni; }
#else
attn__kdot_fn attn__kdot_avx512vnni(void) { return NULL; }
#endif
