/* Half-precision conversions: IEEE 754-2008 binary16 ("float16") and bfloat16 (the top 16 bits
 * of a binary32; Intel, "BFLOAT16 – Hardware Numerics Definition", 2018) to and from binary32.
 *
 * Rounding (float32 -> half): round to nearest, ties to even, as the IEEE default and as
 * VCVTPS2PH (imm = 0) and VCVTNEPS2BF16 do. Overflow rounds to +-inf (float16: |x| >= 65520;
 * bfloat16: above the largest finite value plus half an ulp), +-inf stays +-inf, a NaN stays a NaN
 * of the same sign and is made quiet (float16: top 10 payload bits kept, quiet bit set;
 * bfloat16: top 7 payload bits kept, quiet bit set), float16 subnormals are produced exactly.
 * Half -> float32 is exact for both formats (every half value is a float32 value).
 *
 * The bulk conversion (attn_convert) has an AVX2 + F16C path (8 elements per step, chosen at run
 * time) and a portable C path; both give bit-identical results (tests/test_convert.c checks all
 * 65536 half patterns and 2^24 random float32 patterns on each path). */
#include "attn_core.h"
#include "core/cpu.h"
#include "core/internal.h"

#include <math.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ATTN__HAVE_X86 1
#endif

/* The float32 whose bit pattern is bits, and the reverse (memcpy: no aliasing questions). */
static inline float f32_from_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, 4);
    return f;
}
static inline uint32_t f32_bits(float f) {
    uint32_t bits;
    memcpy(&bits, &f, 4);
    return bits;
}

float attn_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            man &= 0x3ff;
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13) | (man ? 0x00400000u : 0u); /* a NaN is made quiet (as VCVTPH2PS) */
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return f32_from_bits(bits);
}

uint16_t attn_f32_to_f16(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu)); /* NaN: quiet */
    if (ax >= 0x47800000u) return (uint16_t)(sign | 0x7c00u);                     /* >= 65536, inf */
    if (ax < 0x38800000u) { /* below 2^-14: a float16 subnormal (or 0) = round(|x|·2^24) units of 2^-24 */
        float t = f32_from_bits(ax);
        t *= 16777216.0f;                          /* exact: a power of two, no overflow */
        const float n = (t + 8388608.0f) - 8388608.0f; /* + 2^23 rounds t to an integer (RNE; no -ffast-math):
                                                          0 <= n <= 1024, and 1024 is the smallest normal 0x0400 */
        return (uint16_t)(sign | (uint16_t)n);
    }
    uint32_t r = ax - 0x38000000u; /* rebias the exponent: (127 - 15) << 23 */
    r += 0xfffu + ((r >> 13) & 1u); /* round to nearest even at bit 13; a carry may reach inf */
    return (uint16_t)(sign | (r >> 13));
}

float attn_bf16_to_f32(uint16_t b) {
    return f32_from_bits((uint32_t)b << 16);
}

uint16_t attn_f32_to_bf16(float f) {
    const uint32_t bits = f32_bits(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((bits >> 16) | 0x40); /* quiet NaN */
    uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)((bits + rounding) >> 16);
}

/* The internal names used across src/ before the public ones existed. */
float attn__f16_to_f32(uint16_t h) { return attn_f16_to_f32(h); }
float attn__bf16_to_f32(uint16_t b) { return attn_bf16_to_f32(b); }
uint16_t attn__f32_to_bf16(float f) { return attn_f32_to_bf16(f); }

/* ---------------------------------------------------------------- bulk, portable */

static void attn__bf16_to_f32_portable(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t b = (uint32_t)src[i] << 16;
        memcpy(dst + i, &b, 4);
    }
}

static void attn__f32_to_bf16_portable(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = attn_f32_to_bf16(src[i]);
}

static void attn__f16_to_f32_portable(float *dst, const uint16_t *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = attn_f16_to_f32(src[i]);
}

static void attn__f32_to_f16_portable(uint16_t *dst, const float *src, size_t n) {
    for (size_t i = 0; i < n; i++) dst[i] = attn_f32_to_f16(src[i]);
}

/* ---------------------------------------------------------------- bulk, AVX2 + F16C */

#ifdef ATTN__HAVE_X86
__attribute__((target("avx2,f16c"))) static void attn__bf16_to_f32_avx2(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_slli_epi32(w, 16));
    }
    attn__bf16_to_f32_portable(dst + i, src + i, n - i);
}

/* RNE on the bit pattern: (x + 0x7fff + bit16) >> 16; NaN lanes: (x >> 16) | 0x40. */
__attribute__((target("avx2,f16c"))) static inline __m128i attn__bf16_pack8(__m256i x) {
    const __m256i abs = _mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    const __m256i rnd = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    const __m256i qn = _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40));
    const __m256i r = _mm256_blendv_epi8(rnd, qn, nan);
    /* 32-bit lanes hold values < 2^16: pack to 16 bits (packus works per 128-bit lane) */
    const __m256i p = _mm256_packus_epi32(r, r);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08));
}

__attribute__((target("avx2,f16c"))) static void attn__f32_to_bf16_avx2(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), attn__bf16_pack8(_mm256_loadu_si256((const __m256i *)(src + i))));
    attn__f32_to_bf16_portable(dst + i, src + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void attn__f16_to_f32_avx2(float *dst, const uint16_t *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + i))));
    attn__f16_to_f32_portable(dst + i, src + i, n - i);
}

__attribute__((target("avx2,f16c"))) static void attn__f32_to_f16_avx2(uint16_t *dst, const float *src, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    attn__f32_to_f16_portable(dst + i, src + i, n - i);
}
#endif

int attn__convert_simd_supported(void) {
#ifdef ATTN__HAVE_X86
    return attn__cpu_has(ATTN__CPU_AVX2 | ATTN__CPU_F16C);
#else
    return 0;
#endif
}

int attn__convert_path(void *dst, attn_dtype dst_dtype, const void *src, attn_dtype src_dtype, size_t n, int simd) {
    if (n == 0) return ATTN_OK;
    if (!dst || !src) return attn_set_error(ATTN_E_INVALID, "attn_convert: NULL buffer");
    if (dst_dtype == src_dtype) {
        size_t es = attn_dtype_size(dst_dtype);
        if (!es) return attn_set_error(ATTN_E_DTYPE, "attn_convert: unknown dtype %d", (int)dst_dtype);
        memmove(dst, src, es * n);
        return ATTN_OK;
    }
#ifdef ATTN__HAVE_X86
    if (simd && attn__convert_simd_supported()) {
        if (src_dtype == ATTN_BF16 && dst_dtype == ATTN_F32) return attn__bf16_to_f32_avx2(dst, src, n), ATTN_OK;
        if (src_dtype == ATTN_F32 && dst_dtype == ATTN_BF16) return attn__f32_to_bf16_avx2(dst, src, n), ATTN_OK;
        if (src_dtype == ATTN_F16 && dst_dtype == ATTN_F32) return attn__f16_to_f32_avx2(dst, src, n), ATTN_OK;
        if (src_dtype == ATTN_F32 && dst_dtype == ATTN_F16) return attn__f32_to_f16_avx2(dst, src, n), ATTN_OK;
    }
#else
    (void)simd;
#endif
    if (src_dtype == ATTN_BF16 && dst_dtype == ATTN_F32) return attn__bf16_to_f32_portable(dst, src, n), ATTN_OK;
    if (src_dtype == ATTN_F32 && dst_dtype == ATTN_BF16) return attn__f32_to_bf16_portable(dst, src, n), ATTN_OK;
    if (src_dtype == ATTN_F16 && dst_dtype == ATTN_F32) return attn__f16_to_f32_portable(dst, src, n), ATTN_OK;
    if (src_dtype == ATTN_F32 && dst_dtype == ATTN_F16) return attn__f32_to_f16_portable(dst, src, n), ATTN_OK;
    if (attn__is_float_dtype(src_dtype) && attn__is_float_dtype(dst_dtype)) {
        /* float16 <-> bfloat16: widen to float32 (exact), then round once to the target */
        float tmp[256];
        const size_t ses = attn_dtype_size(src_dtype), des = attn_dtype_size(dst_dtype);
        for (size_t i = 0; i < n; i += 256) {
            size_t k = n - i < 256 ? n - i : 256;
            ATTN_TRY(attn__convert_path(tmp, ATTN_F32, (const char *)src + i * ses, src_dtype, k, simd));
            ATTN_TRY(attn__convert_path((char *)dst + i * des, dst_dtype, tmp, ATTN_F32, k, simd));
        }
        return ATTN_OK;
    }
    return attn_set_error(ATTN_E_DTYPE, "attn_convert: %s -> %s is not supported (float32, bfloat16, float16)",
                          attn_dtype_name(src_dtype), attn_dtype_name(dst_dtype));
}

int attn_convert(void *dst, attn_dtype dst_dtype, const void *src, attn_dtype src_dtype, size_t n) {
    return attn__convert_path(dst, dst_dtype, src, src_dtype, n, 1);
}

int attn__is_float_dtype(attn_dtype dt) { return dt == ATTN_F32 || dt == ATTN_BF16 || dt == ATTN_F16; }

/* Convert nrows rows of ncols elements between float dtypes with any strides (elements). */
void attn__convert_rows(void *dst, attn_dtype ddt, int64_t drs, int64_t dcs, const void *src, attn_dtype sdt,
                        int64_t srs, int64_t scs, int64_t nrows, int64_t ncols) {
    const size_t des = attn_dtype_size(ddt), ses = attn_dtype_size(sdt);
    for (int64_t r = 0; r < nrows; r++) {
        char *d = (char *)dst + (size_t)(r * drs) * des;
        const char *s = (const char *)src + (size_t)(r * srs) * ses;
        if (dcs == 1 && scs == 1) {
            (void)attn_convert(d, ddt, s, sdt, (size_t)ncols);
            continue;
        }
        for (int64_t c = 0; c < ncols; c++) {
            float x = attn__load_f32(s + (size_t)(c * scs) * ses, sdt);
            attn__store_f32(d + (size_t)(c * dcs) * des, ddt, x);
        }
    }
}

int attn_tensor_convert(attn_tensor *dst, const attn_tensor *src) {
    if (!dst || !src) return attn_set_error(ATTN_E_INVALID, "attn_tensor_convert: NULL argument");
    if (!attn__is_float_dtype(dst->dtype) || !attn__is_float_dtype(src->dtype))
        return attn_set_error(ATTN_E_DTYPE, "attn_tensor_convert: %s -> %s (float32, bfloat16 and float16 only)",
                              attn_dtype_name(src->dtype), attn_dtype_name(dst->dtype));
    if (dst->dtype == src->dtype) return attn_tensor_copy(dst, src);
    ATTN_TRY(attn__check_same_shape(dst, src, "attn_tensor_convert"));
    int64_t n = attn_tensor_numel(src);
    if (n == 0) return ATTN_OK;
    if (src->ndim == 0) {
        attn__convert_rows(dst->data, dst->dtype, 0, 1, src->data, src->dtype, 0, 1, 1, 1);
        return ATTN_OK;
    }
    const int last = src->ndim - 1;
    const int64_t row = src->shape[last], rows = n / row;
    int64_t idx[ATTN_MAX_DIMS] = {0};
    const size_t des = attn_dtype_size(dst->dtype), ses = attn_dtype_size(src->dtype);
    for (int64_t r = 0; r < rows; r++) {
        attn__convert_rows((char *)dst->data + (size_t)attn_tensor_offset(dst, idx) * des, dst->dtype, 0,
                           row == 1 ? 1 : dst->stride[last], (const char *)src->data + (size_t)attn_tensor_offset(src, idx) * ses,
                           src->dtype, 0, row == 1 ? 1 : src->stride[last], 1, row);
        for (int i = last - 1; i >= 0; i--) {
            if (++idx[i] < src->shape[i]) break;
            idx[i] = 0;
        }
    }
    return ATTN_OK;
}
