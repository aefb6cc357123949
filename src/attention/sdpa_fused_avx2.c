/* AVX2 + FMA kernels of the fused SDPA (8 float lanes). Compiled for AVX2 through a target
 * pragma (clang: target attribute), so no special Makefile flags are needed; sdpa_fused.c only hands this table out after
 * attn__cpu_has (core/cpu.h) said the CPU has AVX2 and FMA. The kernels are in fused_simd_tmpl.h. */
#include "attention/fused_internal.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)

#include <immintrin.h>

/* Everything up to the matching pop is compiled for avx2,fma (gcc: target pragma; clang, used by
 * `make fuzz`: the same target attribute applied to every function). */
#include "core/target_avx2_begin.h"

static inline float attn__hsum256(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_add_ps(a, _mm_movehl_ps(a, a));
    a = _mm_add_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

static inline float attn__hmax256(__m256 v) {
    __m128 a = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    a = _mm_max_ps(a, _mm_movehl_ps(a, a));
    a = _mm_max_ss(a, _mm_movehdup_ps(a));
    return _mm_cvtss_f32(a);
}

static inline __m256i attn__tailmask256(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

static inline __m256 attn__neginf_to_zero256(__m256 x) {
    return _mm256_blendv_ps(x, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ));
}

/* 8 x 8 transpose: unpack, shuffle, then swap 128-bit halves. */
static inline void attn__tr8(__m256 *r) {
    __m256 t[8], s[8];
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) { /* s[4k+m], half H = column 4H+m of rows 4k..4k+3 */
        s[4 * k] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(1, 0, 1, 0));
        s[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], _MM_SHUFFLE(3, 2, 3, 2));
        s[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(1, 0, 1, 0));
        s[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int m = 0; m < 4; m++) {
        r[m] = _mm256_permute2f128_ps(s[m], s[4 + m], 0x20);
        r[4 + m] = _mm256_permute2f128_ps(s[m], s[4 + m], 0x31);
    }
}

static inline __m256 attn__inv_pos256(__m256 x) {
    const __m256 pos = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ);
    return _mm256_and_ps(_mm256_div_ps(_mm256_set1_ps(1.0f), x), pos);
}

#define FS(name) attn__##name##_avx2
#define FS_PATH ATTN__SIMD_AVX2
#define FS_NAME "avx2"
#define VEC __m256
#define VW 8
#define VMASK __m256i
#define V_TAILMASK(n) attn__tailmask256(n)
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(x) _mm256_set1_ps(x)
#define V_LOAD(p) _mm256_load_ps(p)
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_LOADU_M(p, mk) _mm256_maskload_ps((p), (mk))
#define V_STORE(p, x) _mm256_store_ps((p), (x))
#define V_STOREU(p, x) _mm256_storeu_ps((p), (x))
#define V_STOREU_M(p, mk, x) _mm256_maskstore_ps((p), (mk), (x))
#define V_INV_POS(x) attn__inv_pos256(x)
#define V_TRANSPOSE(r) attn__tr8(r)
#define V_ADD _mm256_add_ps
#define V_SUB _mm256_sub_ps
#define V_MUL _mm256_mul_ps
#define V_MAX _mm256_max_ps
#define V_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define V_HSUM(x) attn__hsum256(x)
#define V_HMAX(x) attn__hmax256(x)
#define V_NEGINF_TO_ZERO(x) attn__neginf_to_zero256(x)
#define V_EXP(x) attn__exp256(x) /* core/simd_math.h */
#define FS_EXP_N attn__exp_n_avx2
#define S_MR 6
#define S_NV 2
#define P_MR 6
#define P_NV 2

#include "attention/fused_simd_tmpl.h"

#include "core/target_avx2_end.h"

const attn__fused_kernels *attn__fused_kernels_avx2(void) { return &attn__kernels_avx2; }

#else

const attn__fused_kernels *attn__fused_kernels_avx2(void) { return NULL; }

#endif
