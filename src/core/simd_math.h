/* Private to the library: the float32 exp shared by every kernel that needs one (the fused
 * attention kernels, the efficient attention variants, GELU in ops/ops.c). One algorithm, every
 * path: n = round(x·log2 e), r = x - n·ln2 (Cody–Waite, two constants), exp(r) by the degree-6
 * polynomial below on |r| <= ln2/2, result 2^n·p(r). Arguments below -87 give 0 (never a
 * denormal); -inf gives 0; exp(0) == 1 exactly. Scalar, AVX2 + FMA (8 lanes) and AVX-512F
 * (16 lanes) forms; the array forms attn__exp_n_* are in core/simd_math.c. */
#ifndef ATTN_CORE_SIMD_MATH_H
#define ATTN_CORE_SIMD_MATH_H

#include <stdint.h>

/* Coefficients of p(r) = 1 + r + C2 r^2 + ... + C6 r^6 ~ exp(r) on |r| <= ln2/2, fitted for minimum
 * maximum relative error (Lawson's iteratively reweighted least squares; 2.0e-9 in exact
 * arithmetic, i.e. well below float32 rounding), shared by all paths. */
#define ATTN__EXP_C2 4.999999404e-01f
#define ATTN__EXP_C3 1.666643173e-01f
#define ATTN__EXP_C4 4.166800156e-02f
#define ATTN__EXP_C5 8.374155499e-03f
#define ATTN__EXP_C6 1.384365372e-03f

/* Accuracy bound of the vectorised exp of every path on [-87, 0] (the range the attention kernel
 * uses: arguments are score - running max <= 0; below -87 the result is flushed to 0 rather than
 * becoming denormal): max |exp_n(x) - exp(x)| / exp(x). Measured by tests/test_fused.c. */
#define ATTN__EXP_MAX_REL_ERR 1.5e-7

typedef union {
    float f;
    uint32_t u;
    int32_t i;
} attn__fbits;

/* Scalar exp with the same algorithm as the SIMD ones (no FMA needed: n·0.693359375 is exact).
 * Branch-free, with the clamps and the underflow-to-0 done on the bit patterns (integer
 * compares, which the vectoriser can if-convert); round-to-nearest-even of t through the
 * 1.5·2^23 trick, whose low bits also give n as an integer (|t| < 2^22 here). */
static inline float attn__exp_scalar(float x) {
    attn__fbits in, xc, tb, sc, y;
    in.f = x;
    const uint32_t under = 0u - (uint32_t)(in.u > 0xC2AE0000u); /* x < -87 (-87.0f = 0xC2AE0000), -inf */
    const uint32_t over = 0u - (uint32_t)(in.i > 0x42B00000);   /* x > 88 (88.0f = 0x42B00000) */
    xc.u = (0xC2AE0000u & under) | (0x42B00000u & over) | (in.u & ~(under | over));
    tb.f = xc.f * 1.44269504088896341f + 12582912.0f;
    const float n = tb.f - 12582912.0f;
    float r = xc.f - n * 0.693359375f;
    r = r + n * 2.12194440054690583e-4f;
    float p = ATTN__EXP_C6;
    p = p * r + ATTN__EXP_C5;
    p = p * r + ATTN__EXP_C4;
    p = p * r + ATTN__EXP_C3;
    p = p * r + ATTN__EXP_C2;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    sc.u = (tb.u - 0x4B400000u + 127u) << 23; /* 2^n */
    y.f = p * sc.f;
    y.u &= ~under; /* exactly 0 below -87 and for -inf */
    return y.f;
}

/* y[j] = exp(x[j]), j < n, by one path (y may equal x). */
typedef void (*attn__exp_n_fn)(float *y, const float *x, int64_t n);
void attn__exp_n_portable(float *y, const float *x, int64_t n);
/* The fastest path this CPU runs (AVX-512F, else AVX2 + FMA, else portable; ATTN_SIMD is not read). */
attn__exp_n_fn attn__exp_n_best(void);

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* The vector forms carry their own target attribute, so they can be included anywhere and are
 * inlined into callers compiled for the same (or a larger) instruction set. */
#define ATTN__TARGET_AVX2 __attribute__((target("avx2,fma")))
#define ATTN__TARGET_AVX512 __attribute__((target("avx512f,avx2,fma")))

/* 8 lanes; 2^n is built in the exponent field since AVX2 has no vscalefps (n is in [-126, 127]
 * after the clamps). */
ATTN__TARGET_AVX2 static inline __m256 attn__exp256(__m256 x) {
    const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_NLT_UQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440054690583e-4f), r);
    __m256 p = _mm256_set1_ps(ATTN__EXP_C6);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN__EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN__EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN__EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ATTN__EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_and_ps(_mm256_mul_ps(p, _mm256_castsi256_ps(e)), keep);
}

/* 16 lanes; 2^n·p(r) by vscalefps. Above ~88.7 the result overflows to +inf. */
ATTN__TARGET_AVX512 static inline __m512 attn__exp512(__m512 x) {
    const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_NLT_UQ);
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440054690583e-4f), r);
    __m512 p = _mm512_set1_ps(ATTN__EXP_C6);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN__EXP_C5));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN__EXP_C4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN__EXP_C3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ATTN__EXP_C2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(p, n));
}

void attn__exp_n_avx2(float *y, const float *x, int64_t n);   /* only on a CPU with AVX2 + FMA */
void attn__exp_n_avx512(float *y, const float *x, int64_t n); /* only on a CPU with AVX-512F */
#endif

/* 1 if any of the n floats at p (stride s) is NaN or +-inf (exponent bits all ones): one
 * vectorised pass, no early exit (SDPA's input/output checks, activation rows before quantization) */
int attn__any_nonfinite(const float *p, int64_t n, int64_t s);

#endif
