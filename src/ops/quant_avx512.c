/* AVX-512 VNNI quantized dot-product kernels (vpdpbusd on 256-bit lanes, AVX-512VL); the code is
 * in quant_simd_tmpl.h. Only used after attn__cpu_has (core/cpu.h) said avx512vnni, avx512vl, avx2,
 * fma and f16c (quant.c). */
#include "ops/quant_internal.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c")
#endif

#define QNAME(x) attn__q_vnni_##x
static inline __m256i attn__dot_u8s8_vnni(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
#define DOT_U8S8 attn__dot_u8s8_vnni
/* Q5: qh is the byte mask of the values that get 16 (one masked byte add) */
static inline __m256i attn__q_vnni_q5hi(__m256i w, const uint8_t *p) {
    uint32_t qh;
    memcpy(&qh, p, 4);
    return _mm256_mask_add_epi8(w, (__mmask32)qh, w, _mm256_set1_epi8(16));
}
#include "ops/quant_simd_tmpl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
attn__qdot_fn attn__qdot_avx512vnni(void) { return attn__q_vnni_qdot; }
#else
attn__qdot_fn attn__qdot_avx512vnni(void) { return NULL; }
#endif
