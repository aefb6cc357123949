/* Skinny products: y[M, N] = x[M, K] · W[N, K]ᵀ for a few activation rows (M <= 16: a decoding
 * step, beams, a small batch) with float32, float16 or bfloat16 weights. Each weight row is read
 * from memory once for all M rows (4 weight rows at a time, kept in L1 while every pair of
 * activation rows passes over them), where OpenBLAS's sgemm would first copy ("pack") all of W
 * into its own layout on every call — for Whisper's vocabulary projection [51864 x 384] at beam
 * 5, 80 MB written and read again per step. The AVX2 path prefetches the weight rows two blocks
 * ahead while a block computes (the stream from memory goes on while the block's later
 * activation rows read L1), and an odd last activation row runs alone. Each output is a sum over k in 8 interleaved partial
 * sums (lane k mod 8, in k order), added pairwise at the end, then the tail k >= K - K mod 8 in
 * order; the AVX2 path fuses each multiply-add (one rounding), the portable path does not. Both
 * are within K·2⁻²³·Σ|x_k·w_k| of the exact sum (tests/test_pool.c checks against float64).
 * Rows of W are cut into chunks run on attn's thread pool; every output is computed the same
 * way whatever the split (bit-identical on any thread count). */
#include "attn_quant.h"
#include "core/cpu.h"
#include "core/internal.h"
#include "core/pool.h"
#include "ops/quant_internal.h"

#include <math.h>
#include <string.h>

#define SK_ROWS 4 /* weight rows per block */

static inline float sk_w(const void *W, attn_qtype t, int64_t i) {
    if (t == ATTN_QT_F16) return attn__f16_to_f32(((const uint16_t *)W)[i]);
    if (t == ATTN_QT_BF16) return attn__bf16_to_f32(((const uint16_t *)W)[i]);
    return ((const float *)W)[i];
}

/* rows [r0, r1) of W, portable C: the same 8 partial sums per output as the AVX2 path, each
 * product rounded before it is added */
static void sk_rows_c(float *y, int64_t ldy, const float *x, int64_t M, int64_t K, const void *W, attn_qtype t, int64_t r0, int64_t r1) {
    const int64_t K8 = K & ~(int64_t)7;
    float wr[8];
    for (int64_t n = r0; n < r1; n++) {
        for (int64_t m = 0; m < M; m++) {
            const float *xm = x + m * K;
            float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t k = 0; k < K8; k += 8) {
                for (int l = 0; l < 8; l++) wr[l] = sk_w(W, t, n * K + k + l);
                for (int l = 0; l < 8; l++) acc[l] += wr[l] * xm[k + l];
            }
            float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
            for (int64_t k = K8; k < K; k++) s += sk_w(W, t, n * K + k) * xm[k];
            y[m * ldy + n] = s;
        }
    }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include "core/target_avx2_begin.h"

static inline __m256 sk_load8(const void *W, attn_qtype t, int64_t i) {
    if (t == ATTN_QT_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)W + i)));
    if (t == ATTN_QT_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)W + i))), 16));
    return _mm256_loadu_ps((const float *)W + i);
}

/* ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)): the portable path's order */
static inline float sk_hsum(__m256 v) {
    __m128 a = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1)); /* l0+l4, l1+l5, l2+l6, l3+l7 */
    __m128 b = _mm_add_ps(a, _mm_movehl_ps(a, a));                                    /* (l0+l4)+(l2+l6), (l1+l5)+(l3+l7) */
    return _mm_cvtss_f32(_mm_add_ss(b, _mm_movehdup_ps(b)));
}

#ifndef SK_PF_BLOCKS
#define SK_PF_BLOCKS 2
#endif

/* one activation row against the block's 4 weight rows (the odd last row of M): the same sums
 * as a pair's first row */
static inline void sk_one_avx2(float *y, int64_t ldy, const float *x0, int64_t K, const void *W, attn_qtype t, int64_t n, const char **pf,
                               const char *pf_end) {
    const int64_t K8 = K & ~(int64_t)7;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t k = 0; k < K8; k += 8) {
        if (*pf < pf_end) _mm_prefetch(*pf, _MM_HINT_T0), _mm_prefetch(*pf + 64, _MM_HINT_T0), *pf += 128;
        const __m256 v0 = _mm256_loadu_ps(x0 + k);
        a0 = _mm256_fmadd_ps(sk_load8(W, t, n * K + k), v0, a0);
        a1 = _mm256_fmadd_ps(sk_load8(W, t, (n + 1) * K + k), v0, a1);
        a2 = _mm256_fmadd_ps(sk_load8(W, t, (n + 2) * K + k), v0, a2);
        a3 = _mm256_fmadd_ps(sk_load8(W, t, (n + 3) * K + k), v0, a3);
    }
    const float s[SK_ROWS] = {sk_hsum(a0), sk_hsum(a1), sk_hsum(a2), sk_hsum(a3)};
    for (int r = 0; r < SK_ROWS; r++) {
        float v = s[r];
        for (int64_t k = K8; k < K; k++) v = fmaf(sk_w(W, t, (n + r) * K + k), x0[k], v);
        y[n + r] = v;
    }
    (void)ldy;
}

static void sk_rows_avx2(float *y, int64_t ldy, const float *x, int64_t M, int64_t K, const void *W, attn_qtype t, int64_t r0, int64_t r1) {
    const int64_t K8 = K & ~(int64_t)7;
    const int64_t esz = t == ATTN_QT_F32 ? 4 : 2;
    int64_t n = r0;
    for (; n + SK_ROWS <= r1; n += SK_ROWS) {
        /* the weight rows SK_PF_BLOCKS blocks ahead (up to r1) are prefetched while this block
         * computes, 2 cache lines an iteration: the stream from memory goes on while the block's
         * later activation rows read it from L1 */
        int64_t p0 = n + SK_PF_BLOCKS * SK_ROWS, p1 = p0 + SK_ROWS < r1 ? p0 + SK_ROWS : r1;
        const char *pf = (const char *)W + p0 * K * esz, *pf_end = p1 > p0 ? (const char *)W + p1 * K * esz : pf;
        /* two activation rows at a time against the block's 4 weight rows: 8 accumulators */
        int64_t m = 0;
        for (; m + 2 <= M; m += 2) {
            const float *x0 = x + m * K, *x1 = x0 + K;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            for (int64_t k = 0; k < K8; k += 8) {
                if (pf < pf_end) _mm_prefetch(pf, _MM_HINT_T0), _mm_prefetch(pf + 64, _MM_HINT_T0), pf += 128;
                const __m256 v0 = _mm256_loadu_ps(x0 + k), v1 = _mm256_loadu_ps(x1 + k);
                __m256 w = sk_load8(W, t, n * K + k);
                a00 = _mm256_fmadd_ps(w, v0, a00), a10 = _mm256_fmadd_ps(w, v1, a10);
                w = sk_load8(W, t, (n + 1) * K + k);
                a01 = _mm256_fmadd_ps(w, v0, a01), a11 = _mm256_fmadd_ps(w, v1, a11);
                w = sk_load8(W, t, (n + 2) * K + k);
                a02 = _mm256_fmadd_ps(w, v0, a02), a12 = _mm256_fmadd_ps(w, v1, a12);
                w = sk_load8(W, t, (n + 3) * K + k);
                a03 = _mm256_fmadd_ps(w, v0, a03), a13 = _mm256_fmadd_ps(w, v1, a13);
            }
            float s[2][SK_ROWS] = {{sk_hsum(a00), sk_hsum(a01), sk_hsum(a02), sk_hsum(a03)},
                                   {sk_hsum(a10), sk_hsum(a11), sk_hsum(a12), sk_hsum(a13)}};
            for (int i = 0; i < 2; i++)
                for (int r = 0; r < SK_ROWS; r++) {
                    const float *xm = i ? x1 : x0;
                    float v = s[i][r];
                    for (int64_t k = K8; k < K; k++) v = fmaf(sk_w(W, t, (n + r) * K + k), xm[k], v);
                    y[(m + i) * ldy + n + r] = v;
                }
        }
        if (m < M) sk_one_avx2(y + m * ldy, ldy, x + m * K, K, W, t, n, &pf, pf_end);
    }
    for (; n < r1; n++) /* the last rows, one at a time */
        for (int64_t m = 0; m < M; m++) {
            const float *xm = x + m * K;
            __m256 a = _mm256_setzero_ps();
            for (int64_t k = 0; k < K8; k += 8) a = _mm256_fmadd_ps(sk_load8(W, t, n * K + k), _mm256_loadu_ps(xm + k), a);
            float v = sk_hsum(a);
            for (int64_t k = K8; k < K; k++) v = fmaf(sk_w(W, t, n * K + k), xm[k], v);
            y[m * ldy + n] = v;
        }
}

#include "core/target_avx2_end.h"
#define SK_HAVE_AVX2 1
#else
#define SK_HAVE_AVX2 0
#endif

typedef void (*sk_fn)(float *, int64_t, const float *, int64_t, int64_t, const void *, attn_qtype, int64_t, int64_t);

typedef struct {
    sk_fn fn;
    float *y;
    const float *x;
    const void *W;
    attn_qtype t;
    int64_t M, N, K;
} sk_job;

static void sk_chunk(void *p, int64_t lo, int64_t hi, int tid) {
    const sk_job *j = (const sk_job *)p;
    const int64_t a = lo * SK_ROWS, b = hi * SK_ROWS < j->N ? hi * SK_ROWS : j->N;
    j->fn(j->y, j->N, j->x, j->M, j->K, j->W, j->t, a, b);
}

int attn__skinny_simd_available(void) {
    return SK_HAVE_AVX2 && attn__cpu_has(ATTN__CPU_AVX2 | ATTN__CPU_FMA | ATTN__CPU_F16C);
}

int attn__skinny_matmul_path(float *y, const float *x, const void *W, attn_qtype t, int64_t M, int64_t N, int64_t K, int nt, int simd) {
    if (t != ATTN_QT_F32 && t != ATTN_QT_F16 && t != ATTN_QT_BF16)
        return attn_set_error(ATTN_E_INVALID, "skinny matmul: weights must be f32, f16 or bf16, not %s", attn_qtype_name(t));
    if (M < 0 || N < 0 || K < 0 || M > ATTN__SKINNY_MAX_M)
        return attn_set_error(ATTN_E_INVALID, "skinny matmul: %lld x %lld x %lld is not a skinny product (M <= %d)", (long long)M, (long long)N,
                              (long long)K, ATTN__SKINNY_MAX_M);
    if (M == 0 || N == 0) return ATTN_OK;
    if (K == 0) {
        memset(y, 0, sizeof(float) * (size_t)(M * N));
        return ATTN_OK;
    }
    if (simd && !attn__skinny_simd_available()) return attn_set_error(ATTN_E_UNSUPPORTED, "skinny matmul: no AVX2 + FMA + F16C on this CPU");
    sk_job j = {sk_rows_c, y, x, W, t, M, N, K};
#if SK_HAVE_AVX2
    if (simd) j.fn = sk_rows_avx2;
#endif
    const int64_t units = (N + SK_ROWS - 1) / SK_ROWS;
    /* threads from 1e6 multiply-adds on (as attn_linear splits): below, a decoding step's
     * small products (Whisper's 384-wide layers at beam 5) stay on the calling thread, one
     * synchronisation point fewer each */
    const double cost = (double)M * (double)N * (double)K;
    nt = cost < 1e6 ? 1 : attn__pool_threads(cost, nt);
    /* about 4 chunks a thread, of at least 16 weight rows */
    int64_t chunk = units / (4 * (int64_t)nt);
    attn__pool_for(units, chunk < 4 ? 4 : chunk, nt, sk_chunk, &j);
    return ATTN_OK;
}

int attn__skinny_matmul(float *y, const float *x, const void *W, attn_qtype t, int64_t M, int64_t N, int64_t K, int nt) {
    return attn__skinny_matmul_path(y, x, W, t, M, N, K, nt, attn__skinny_simd_available());
}
