/* AVX-512F kernels of the fused SDPA (16 float lanes). Compiled for AVX-512 through a target
 * pragma (clang: target attribute), so no special Makefile flags are needed; sdpa_fused.c only hands this table out after
 * attn__cpu_has (core/cpu.h) said the CPU has AVX-512F. The kernels themselves are in fused_simd_tmpl.h. */
#include "attention/fused_internal.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

/* Everything up to the matching pop is compiled for avx512f,avx2,fma (gcc: target pragma; clang, used by
 * `make fuzz`: the same target attribute applied to every function). */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif

static inline __m512 attn__neginf_to_zero512(__m512 x) {
    const __mmask16 inf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ);
    return _mm512_mask_blend_ps(inf, x, _mm512_setzero_ps());
}

/* 16 x 16 transpose: unpack pairs of rows, shuffle quadruples, then move 128-bit lanes. */
static inline void attn__tr16(__m512 *r) {
    __m512 t[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 4; k++) { /* r[4k+m], lane L = column 4L+m of rows 4k..4k+3 */
        r[4 * k] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        r[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        r[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int m = 0; m < 4; m++) {
        const __m512 ablo = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x44), abhi = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xEE);
        const __m512 cdlo = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x44);
        const __m512 cdhi = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xEE);
        t[m] = _mm512_shuffle_f32x4(ablo, cdlo, 0x88);
        t[4 + m] = _mm512_shuffle_f32x4(ablo, cdlo, 0xDD);
        t[8 + m] = _mm512_shuffle_f32x4(abhi, cdhi, 0x88);
        t[12 + m] = _mm512_shuffle_f32x4(abhi, cdhi, 0xDD);
    }
    for (int u = 0; u < 16; u++) r[u] = t[u];
}

static inline __m512 attn__inv_pos512(__m512 x) {
    const __mmask16 pos = _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_GT_OQ);
    return _mm512_maskz_div_ps(pos, _mm512_set1_ps(1.0f), x);
}

#define FS(name) attn__##name##_avx512
#define FS_PATH ATTN__SIMD_AVX512
#define FS_NAME "avx512"
#define VEC __m512
#define VW 16
#define VMASK __mmask16
#define V_TAILMASK(n) ((__mmask16)((n) >= 16 ? 0xFFFFu : ((1u << (n)) - 1u)))
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOAD(p) _mm512_load_ps(p)
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_LOADU_M(p, mk) _mm512_maskz_loadu_ps((mk), (p))
#define V_STORE(p, x) _mm512_store_ps((p), (x))
#define V_STOREU(p, x) _mm512_storeu_ps((p), (x))
#define V_STOREU_M(p, mk, x) _mm512_mask_storeu_ps((p), (mk), (x))
#define V_INV_POS(x) attn__inv_pos512(x)
#define V_TRANSPOSE(r) attn__tr16(r)
#define V_ADD _mm512_add_ps
#define V_SUB _mm512_sub_ps
#define V_MUL _mm512_mul_ps
#define V_MAX _mm512_max_ps
#define V_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define V_HSUM(x) _mm512_reduce_add_ps(x)
#define V_HMAX(x) _mm512_reduce_max_ps(x)
#define V_NEGINF_TO_ZERO(x) attn__neginf_to_zero512(x)
#define V_EXP(x) attn__exp512(x) /* core/simd_math.h */
#define FS_EXP_N attn__exp_n_avx512
#define S_MR 6
#define S_NV 4
#define P_MR 6
#define P_NV 4

#include "attention/fused_simd_tmpl.h"

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const attn__fused_kernels *attn__fused_kernels_avx512(void) { return &attn__kernels_avx512; }

#else

const attn__fused_kernels *attn__fused_kernels_avx512(void) { return NULL; }

#endif
