/* AVX-512 (VNNI + VL + BW) products for the K-quants (Q2_K .. Q6_K): the code of quant_kq_tmpl.h
 * with the group-scale multiply-accumulate in one vpdpwssd (AVX512_VNNI on 256-bit lanes) instead
 * of vpmaddwd + vpaddd; the same exact integer sums and float32 operations as the AVX2 and
 * portable kernels (bit for bit). Q5_0 / Q5_1 go to the AVX2 kernel. Only used after quant.c found
 * avx512f, avx512vl, avx512bw, avx512vnni, avx2 and fma (attn_qkernel_available). */
#include "ops/quant_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512bw,avx512vnni,avx2,fma,f16c")
#endif

static inline int32_t attn__kq_vnni_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

static inline float attn__kq_vnni_h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

#define KQN(x) attn__kq_vnni_##x
#define KQ_ACC_SC(a, p, s) _mm256_dpwssd_epi32((a), (p), (s))
#include "ops/quant_kq_tmpl.h"

static void kdot_vnni(float *y, int64_t ldy, const void *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1,
                      attn_qtype t) {
    if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) attn__kdot_avx2()(y, ldy, xq, nb, M, W, rb, r0, r1, t);
    else attn__kq_vnni_kdot(y, ldy, (const attn__q8k *)xq, nb, M, W, rb, r0, r1, t);
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
attn__kdot_fn attn__kdot_avx512vnni(void) { return kdot_vnni; }
#else
attn__kdot_fn attn__kdot_avx512vnni(void) { return NULL; }
#endif
