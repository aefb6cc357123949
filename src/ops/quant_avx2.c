/* AVX2 (+FMA, F16C) quantized dot-product kernels; the code is in quant_simd_tmpl.h. Only used
 * after __builtin_cpu_supports said the CPU has avx2, fma and f16c (quant.c). */
#include "ops/quant_internal.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c")
#endif

#define QNAME(x) attn__q_avx2_##x
static inline __m256i attn__dot_u8s8_avx2(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
#define DOT_U8S8 attn__dot_u8s8_avx2
#include "ops/quant_simd_tmpl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
attn__qdot_fn attn__qdot_avx2(void) { return attn__q_avx2_qdot; }
#else
attn__qdot_fn attn__qdot_avx2(void) { return NULL; }
#endif
