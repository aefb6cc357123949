/* The array forms of the shared exp (core/simd_math.h) and the choice between them. */
#include "core/simd_math.h"
#include "core/cpu.h"

#include <math.h>
#include <string.h>

#if defined(__clang__) /* at -O0/-O1 (e.g. `make fuzz`) clang cannot vectorise and would warn on the loop */
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* fixed 16-wide blocks of independent lanes, for the compiler's vectoriser (SSE / NEON) */
void attn__exp_n_portable(float *y, const float *x, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16)
#ifdef _OPENMP
#pragma omp simd
#endif
        for (int u = 0; u < 16; u++) y[j + u] = attn__exp_scalar(x[j + u]);
    for (; j < n; j++) y[j] = attn__exp_scalar(x[j]);
}

#if defined(__x86_64__) || defined(__i386__)
/* whole vectors, then the tail through a zero-padded buffer */
ATTN__TARGET_AVX2 void attn__exp_n_avx2(float *y, const float *x, int64_t n) {
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(y + j, attn__exp256(_mm256_loadu_ps(x + j)));
    if (j < n) {
        float buf[8];
        const int t = (int)(n - j);
        for (int u = 0; u < 8; u++) buf[u] = u < t ? x[j + u] : 0.0f;
        _mm256_storeu_ps(buf, attn__exp256(_mm256_loadu_ps(buf)));
        memcpy(y + j, buf, sizeof(float) * (size_t)t);
    }
}

ATTN__TARGET_AVX512 void attn__exp_n_avx512(float *y, const float *x, int64_t n) {
    int64_t j = 0;
    for (; j + 16 <= n; j += 16) _mm512_storeu_ps(y + j, attn__exp512(_mm512_loadu_ps(x + j)));
    if (j < n) {
        float buf[16];
        const int t = (int)(n - j);
        for (int u = 0; u < 16; u++) buf[u] = u < t ? x[j + u] : 0.0f;
        _mm512_storeu_ps(buf, attn__exp512(_mm512_loadu_ps(buf)));
        memcpy(y + j, buf, sizeof(float) * (size_t)t);
    }
}
#endif

attn__exp_n_fn attn__exp_n_best(void) {
#if defined(__x86_64__) || defined(__i386__)
    if (attn__cpu_has(ATTN__CPU_AVX512F)) return attn__exp_n_avx512;
    if (attn__cpu_has(ATTN__CPU_AVX2 | ATTN__CPU_FMA)) return attn__exp_n_avx2;
#endif
    return attn__exp_n_portable;
}

/* 1 if any of the n floats at p (stride s) is NaN or +-inf: exponent bits all ones. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
int attn__any_nonfinite(const float *p, int64_t n, int64_t s) {
    unsigned bad = 0;
    if (s == 1) {
#pragma omp simd reduction(| : bad)
        for (int64_t i = 0; i < n; i++) {
            uint32_t b;
            memcpy(&b, p + i, 4);
            bad |= (b & 0x7f800000u) == 0x7f800000u;
        }
    } else {
        for (int64_t i = 0; i < n; i++) bad |= !isfinite(p[i * s]);
    }
    return bad != 0;
}
