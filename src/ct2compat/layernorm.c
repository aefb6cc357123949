/* CTranslate2 4.8.5's CPU LayerNorm, rounded as on an 8-float-wide machine (see ct2compat.h). */
#include "ct2compat/ct2compat.h"
#include "core/internal.h"
#include "core/pool.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* mean and 1 / std of a row from its 8 lane sums a, q (x and x² in lanes l = i mod 8 of the
 * first n8 values) and the rest r[n8..n) added one by one, folded as CTranslate2's kernel does */
static inline void attn__ln_stats(const float *a, const float *q, const float *r, int64_t n8, int64_t n, float inv_n, float eps, float *mean,
                                  float *rstd) {
    float sum = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
    float sumsq = ((q[0] + q[4]) + (q[2] + q[6])) + ((q[1] + q[5]) + (q[3] + q[7]));
    for (int64_t i = n8; i < n; i++) {
        sum += r[i];
        sumsq = fmaf(r[i], r[i], sumsq);
    }
    *mean = sum * inv_n;
    float var = fmaf(sumsq, inv_n, -(*mean * *mean));
    if (!(var > 0.0f)) var = 0.0f;
    *rstd = 1.0f / sqrtf(var + eps);
}

#if defined(__x86_64__)
#include <immintrin.h>
__attribute__((target("avx2,fma"))) static void attn__ln_rows_avx2(float *y, const float *x, int64_t M, const float *g, const float *bt,
                                                                    int64_t n, float eps) {
    const int64_t n8 = n - n % 8;
    const float inv_n = 1.0f / (float)n;
    for (int64_t m = 0; m < M; m++) {
        const float *r = x + m * n;
        float *o = y + m * n;
        __m256 va = _mm256_setzero_ps(), vq = _mm256_setzero_ps();
        for (int64_t i = 0; i < n8; i += 8) {
            __m256 v = _mm256_loadu_ps(r + i);
            va = _mm256_add_ps(va, v);
            vq = _mm256_add_ps(vq, _mm256_mul_ps(v, v));
        }
        float a[8], q[8];
        _mm256_storeu_ps(a, va);
        _mm256_storeu_ps(q, vq);
        float mean, rstd;
        attn__ln_stats(a, q, r, n8, n, inv_n, eps, &mean, &rstd);
        const __m256 vmean = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
        for (int64_t i = 0; i < n8; i += 8)
            _mm256_storeu_ps(o + i, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(r + i), vmean), _mm256_mul_ps(_mm256_loadu_ps(g + i), vr),
                                                    _mm256_loadu_ps(bt + i)));
        for (int64_t i = n8; i < n; i++) o[i] = fmaf(r[i] - mean, g[i] * rstd, bt[i]);
    }
}
#endif

static void attn__ln_rows_c(float *y, const float *x, int64_t M, const float *g, const float *b, int64_t n, float eps) {
    const int64_t n8 = n - n % 8;
    const float inv_n = 1.0f / (float)n;
    for (int64_t m = 0; m < M; m++) {
        const float *r = x + m * n;
        float *o = y + m * n;
        float a[8] = {0}, q[8] = {0};
        for (int64_t i = 0; i < n8; i += 8)
            for (int l = 0; l < 8; l++) {
                float sq = r[i + l] * r[i + l];
                a[l] += r[i + l];
                q[l] += sq;
            }
        float mean, rstd;
        attn__ln_stats(a, q, r, n8, n, inv_n, eps, &mean, &rstd);
        for (int64_t i = 0; i < n; i++) o[i] = fmaf(r[i] - mean, g[i] * rstd, b[i]);
    }
}

typedef struct {
    float *y;
    const float *x, *g, *b;
    int64_t n;
    float eps;
    int avx2;
} attn__ln_job;

/* rows [lo, hi): each row whole on one thread (any split gives the same bits) */
static void attn__ln_chunk(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__ln_job *j = (const attn__ln_job *)p;
    (void)tid;
#if defined(__x86_64__)
    if (j->avx2) {
        attn__ln_rows_avx2(j->y + lo * j->n, j->x + lo * j->n, hi - lo, j->g, j->b, j->n, j->eps);
        return;
    }
#endif
    attn__ln_rows_c(j->y + lo * j->n, j->x + lo * j->n, hi - lo, j->g, j->b, j->n, j->eps);
}

void attn__ct2_layernorm(float *y, const float *x, int64_t M, const float *g, const float *b, int64_t n_, float eps) {
    /* Rounded like CTranslate2's CPU LayerNorm on an 8-float-wide machine, so that int8 models,
     * whose activations are re-quantised after every norm, see the same floats: single pass,
     * sum and sum of squares in 8 interleaved float lanes (x[8i + l] into lane l, the square
     * rounded before it is added), lanes folded as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)),
     * mean = sum * (1/n), variance = fma(sumsq, 1/n, -mean^2) clamped at 0,
     * y = fma(x - mean, gamma * rstd, beta) with rstd = 1 / sqrt(variance + eps). */
    attn__ln_job j = {y, x, g, b, n_, eps, 0};
#if defined(__x86_64__)
    j.avx2 = attn__ct2_have_avx2();
#endif
    /* rows on attn's pool from 2^16 elements (an encoder's 1500 x 384: the caller alone was a
     * serial stretch between two parallel products), in chunks of ~16K elements */
    if (M <= 0) return;
    const double cost = (double)M * (double)n_;
    const int64_t chunk = n_ > 0 && 16384 / n_ > 1 ? 16384 / n_ : 1;
    attn__pool_rows(M, chunk, cost, 0, attn__ln_chunk, &j);
}
