/* AVX2 (+FMA, F16C) quantized dot-product kernels; the code is in quant_simd_tmpl.h. Only used
 * after attn__cpu_has (core/cpu.h) said the CPU has avx2, fma and f16c (quant.c). */
#include "ops/quant_internal.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "core/target_avx2_begin.h"
#include "ops/quant_simd_x86.h"

#define QNAME(x) attn__q_avx2_##x
static inline __m256i attn__dot_u8s8_avx2(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
#define DOT_U8S8 attn__dot_u8s8_avx2
/* Q5: bit j of the 32-bit qh (at p) to byte j as 16: byte j of the broadcast qh picked by a
 * shuffle (qh byte j/8), all bits but bit j%8 set by an OR, compared with all-ones */
static inline __m256i attn__q_avx2_q5hi(__m256i w, const uint8_t *p) {
    uint32_t qh;
    memcpy(&qh, p, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL,
                                                                                                0x0303030303030303LL));
    const __m256i set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL)), _mm256_set1_epi8(-1));
    return _mm256_or_si256(w, _mm256_and_si256(set, _mm256_set1_epi8(16)));
}
#include "ops/quant_simd_tmpl.h"

/* One activation row to 8-bit blocks, bit-identical to quant.c's quantize_row: the same float32
 * operations (max |x|, d = amax/127, id = 1/d, x·id) and roundf's rounding (half away from zero:
 * trunc, then one step away from zero where the dropped fraction is >= 0.5; exact for |x·id| <= 127). */
static void attn__q_avx2_quantize(attn__q8blk *q, const float *x, int64_t nb) {
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
    for (int64_t b = 0; b < nb; b++) {
        const float *v = x + b * 32;
        __m256 a[4];
        for (int k = 0; k < 4; k++) a[k] = _mm256_loadu_ps(v + 8 * k);
        __m256 mx = _mm256_max_ps(_mm256_max_ps(_mm256_andnot_ps(sign, a[0]), _mm256_andnot_ps(sign, a[1])),
                                  _mm256_max_ps(_mm256_andnot_ps(sign, a[2]), _mm256_andnot_ps(sign, a[3])));
        const float amax = attn__x86_hmax_ps(mx);
        const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        __m256i qi[4], sum = _mm256_setzero_si256();
        for (int k = 0; k < 4; k++) {
            const __m256 s = _mm256_mul_ps(a[k], vid);
            const __m256 t = _mm256_round_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m256 up = _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_sub_ps(s, t)), half, _CMP_GE_OQ);
            const __m256 step = _mm256_and_ps(up, _mm256_or_ps(_mm256_and_ps(s, sign), one));
            qi[k] = _mm256_cvttps_epi32(_mm256_add_ps(t, step));
            sum = _mm256_add_epi32(sum, qi[k]);
        }
        /* int32 -> int8 in order: packs interleave 128-bit lanes, the permute restores the order */
        const __m256i p16a = _mm256_packs_epi32(qi[0], qi[1]), p16b = _mm256_packs_epi32(qi[2], qi[3]);
        const __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        _mm256_storeu_si256((__m256i *)q[b].q, _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        q[b].d = d;
        q[b].s = d * (float)attn__x86_hsum_i32(sum);
    }
}

#include "core/target_avx2_end.h"
attn__qdot_fn attn__qdot_avx2(void) { return attn__q_avx2_qdot; }
attn__quantize_fn attn__quantize_avx2(void) { return attn__q_avx2_quantize; }
#else
attn__qdot_fn attn__qdot_avx2(void) { return NULL; }
attn__quantize_fn attn__quantize_avx2(void) { return NULL; }
#endif
