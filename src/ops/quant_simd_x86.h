/* Small x86 SIMD helpers shared by the quantised kernels (quant_avx2.c, quant_avx512.c,
 * quant_kq_avx2.c, quant_kq_avx512.c and the templates they include). Include it after
 * <immintrin.h> INSIDE the file's target block (core/target_avx2_begin.h, or the AVX-512 files'
 * target pragma): the functions are static inline and take that block's target, so every file
 * compiles them for its own instruction set (they need avx2 and f16c, which every such block has). */
#ifndef ATTN_QUANT_SIMD_X86_H
#define ATTN_QUANT_SIMD_X86_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* the sum of the 8 int32 lanes of v (wrapping) */
static inline int32_t attn__x86_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

/* the float16 at p (2 bytes, little-endian, any alignment) as float32 (F16C, exact) */
static inline float attn__x86_h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* the largest of the 8 float lanes of v (maxps order: for lanes without NaN, the maximum) */
static inline float attn__x86_hmax_ps(__m256 v) {
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
    return _mm_cvtss_f32(m4);
}

#endif
