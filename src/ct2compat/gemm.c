/* CTranslate2 4.8.5's CPU matrix products: its int8 u8s8 GEMM (AVX2 path and a portable one
 * with the same integer sums) and its float32 products (see ct2compat.h). */
#include "ct2compat/ct2compat.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cblas.h>

/* sum over k of u[k] * w[k] where each pair (k, k+1), k even, is first summed into a saturated
 * int16 (what vpmaddubsw does), then the pairs are added in int32 (see attn__ct2_lin_apply). */
static int32_t attn__u8s8_dot_c(const uint8_t *u, const int8_t *w, int64_t k0, int64_t K) {
    int32_t acc = 0;
    int64_t k = k0;
    for (; k + 1 < K; k += 2) {
        int32_t p = (int32_t)u[k] * w[k] + (int32_t)u[k + 1] * w[k + 1];
        acc += p > 32767 ? 32767 : p < -32768 ? -32768 : p;
    }
    if (k < K) acc += (int32_t)u[k] * w[k];
    return acc;
}

#if defined(__x86_64__)
#include <immintrin.h>
/* the same integer sums with vpmaddubsw + vpmaddwd (bit-identical: integer arithmetic) */
__attribute__((target("avx2"))) static inline __m256i attn__u8s8_acc(__m256i acc, __m256i a, const int8_t *w, __m256i ones) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, _mm256_loadu_si256((const __m256i *)w)), ones));
}
__attribute__((target("avx2"))) static void attn__u8s8_rows_avx2(int32_t *out, const uint8_t *u, const int8_t *w, int64_t N, int64_t K) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int64_t K32 = K - K % 32;
    int64_t n = 0;
    for (; n + 4 <= N; n += 4) { /* four rows at once, one horizontal reduction */
        const int8_t *w0 = w + n * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
        for (int64_t k = 0; k < K32; k += 32) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(u + k));
            a0 = attn__u8s8_acc(a0, a, w0 + k, ones);
            a1 = attn__u8s8_acc(a1, a, w1 + k, ones);
            a2 = attn__u8s8_acc(a2, a, w2 + k, ones);
            a3 = attn__u8s8_acc(a3, a, w3 + k, ones);
        }
        __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        _mm_storeu_si128((__m128i *)(out + n), s4);
        if (K32 < K) {
            out[n] += attn__u8s8_dot_c(u, w0, K32, K);
            out[n + 1] += attn__u8s8_dot_c(u, w1, K32, K);
            out[n + 2] += attn__u8s8_dot_c(u, w2, K32, K);
            out[n + 3] += attn__u8s8_dot_c(u, w3, K32, K);
        }
    }
    for (; n < N; n++) {
        const int8_t *wr = w + n * K;
        __m256i acc = _mm256_setzero_si256();
        for (int64_t k = 0; k < K32; k += 32) acc = attn__u8s8_acc(acc, _mm256_loadu_si256((const __m256i *)(u + k)), wr + k, ones);
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        out[n] = _mm_cvtsi128_si32(s4) + (K32 < K ? attn__u8s8_dot_c(u, wr, K32, K) : 0);
    }
}
/* ATTN_QUANT_KERNEL=portable forces the C path (as for the quantised kernels of ops/quant.c) */
int attn__ct2_have_avx2(void) {
    const char *e = getenv("ATTN_QUANT_KERNEL");
    if (e && strcmp(e, "portable") == 0) return 0;
    return attn__cpu_has(ATTN__CPU_AVX2 | ATTN__CPU_FMA);
}

/* quantise one row like the C loop in attn__ct2_lin_apply (max|x| is exact in any order; the
 * fused multiply-add and the truncation are the same operations), returns the scale */
__attribute__((target("avx2,fma"))) static float attn__quant_row_avx2(uint8_t *u, const float *r, int64_t K) {
    const int64_t K8 = K - K % 8;
    const __m256 absmask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 vm = _mm256_setzero_ps();
    for (int64_t k = 0; k < K8; k += 8) vm = _mm256_max_ps(vm, _mm256_and_ps(_mm256_loadu_ps(r + k), absmask));
    float lanes[8];
    _mm256_storeu_ps(lanes, vm);
    float amax = 0;
    for (int l = 0; l < 8; l++) amax = lanes[l] > amax ? lanes[l] : amax;
    for (int64_t k = K8; k < K; k++) amax = fabsf(r[k]) > amax ? fabsf(r[k]) : amax;
    const float s = amax != 0.0f ? 127.0f / amax : 1.0f;
    const __m256 vs = _mm256_set1_ps(s), v128 = _mm256_set1_ps(128.0f), v0 = _mm256_setzero_ps(), v255 = _mm256_set1_ps(255.0f);
    for (int64_t k = 0; k < K8; k += 8) {
        __m256 t = _mm256_fmadd_ps(_mm256_loadu_ps(r + k), vs, v128);
        t = _mm256_min_ps(_mm256_max_ps(t, v0), v255);
        __m256i q = _mm256_cvttps_epi32(t);
        __m128i q16 = _mm_packus_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        _mm_storel_epi64((__m128i *)(u + k), _mm_packus_epi16(q16, q16));
    }
    for (int64_t k = K8; k < K; k++) {
        float t = fmaf(r[k], s, 128.0f);
        u[k] = (uint8_t)(t < 0 ? 0 : t > 255 ? 255 : t);
    }
    return s;
}

/* (c * ra) / scale + b, the same three roundings as the C loop */
__attribute__((target("avx2,fma"))) static void attn__dequant_row_avx2(float *y, const int32_t *c, const int32_t *comp, float ra,
                                                                        const float *scale, const float *b, int64_t N) {
    const int64_t N8 = N - N % 8;
    const __m256 vra = _mm256_set1_ps(ra);
    const __m256i v128 = _mm256_set1_epi32(128);
    for (int64_t n = 0; n < N8; n += 8) {
        __m256i ci = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(c + n)),
                                      _mm256_mullo_epi32(v128, _mm256_loadu_si256((const __m256i *)(comp + n))));
        __m256 v = _mm256_div_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(ci), vra), _mm256_loadu_ps(scale + n));
        if (b) v = _mm256_add_ps(v, _mm256_loadu_ps(b + n));
        _mm256_storeu_ps(y + n, v);
    }
    for (int64_t n = N8; n < N; n++) {
        float v = (float)(c[n] - 128 * comp[n]) * ra / scale[n];
        y[n] = b ? v + b[n] : v;
    }
}

#endif

static void attn__act(float *y, int64_t n, attn_activation act) {
    if (act == ATTN_ACT_RELU) {
        for (int64_t i = 0; i < n; i++) y[i] = y[i] > 0 ? y[i] : 0;
    } else if (act == ATTN_ACT_GELU) {
        attn_tensor t = attn_tensor_f32_1d(y, n);
        attn_activate(&t, &t, ATTN_ACT_GELU);
    } else if (act == ATTN_ACT_GELU_TANH) {
        attn_tensor t = attn_tensor_f32_1d(y, n);
        attn_activate(&t, &t, ATTN_ACT_GELU_TANH);
    }
}

int attn__ct2_gemm(float *y, const float *x, int64_t M, const attn_weight *l, attn_activation act) {
    const int64_t K = l->cols, N = l->rows;
    const float *wf = (const float *)l->data, *bias = l->bias;
    if (M == 0) return ATTN_OK;
    if (l->type != ATTN_QT_F32 && l->type != ATTN_QT_I8)
        return attn_set_error(ATTN_E_INVALID, "ct2 gemm: weights must be float32 or int8, got %s", attn_qtype_name(l->type));
    if (l->type == ATTN_QT_F32 && (double)M * N * K < 4194304.0) {
        /* small GEMM (a decoding step, a 32-wide model): one OpenBLAS call on this thread; splitting
         * it across threads costs more than it computes */
        if (bias)
            for (int64_t m = 0; m < M; m++) memcpy(y + m * N, bias, sizeof(float) * (size_t)N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)K, wf, (int)K, bias ? 1.0f : 0.0f,
                    y, (int)N);
    } else if (l->type == ATTN_QT_F32) {
        attn_tensor tx = attn_tensor_f32_2d((float *)x, M, K), tw = attn_tensor_f32_2d((float *)wf, N, K), ty = attn_tensor_f32_2d(y, M, N);
        attn_tensor tb = attn_tensor_f32_1d((float *)bias, N);
        ATTN_TRY(attn_linear(&ty, &tx, &tw, bias ? &tb : NULL));
    } else {
        /* CTranslate2's int8 x86 path on an AVX2 machine (u8s8s32 GEMM through oneDNN), read
         * from its AVX2 kernels and checked bit for bit against its exported GEMM on random
         * data (scripts/probe_ct2_int8.c): each input row is quantised with scale
         * s = 127 / max|x| and shifted to unsigned, u = trunc(fma(x, s, 128)) (one rounding,
         * then truncation, i.e. floor, for models of binary version < 5); the GEMM sums the
         * products of byte pairs (k, k+1) into int16 with saturation (vpmaddubsw) before
         * widening to int32; the shift is removed with the compensation 128 * sum_k w[n, k];
         * the int32 result is rescaled as (c * (1 / s)) / w_scale[n] + bias[n]. */
        const int8_t *wq = (const int8_t *)l->data;
        const int32_t *comp = l->row_sum;
        const float *wscale = l->scale;
        if (!comp || !wscale) return attn_set_error(ATTN_E_INVALID, "ct2 gemm: int8 weights need their scales and row sums");
        float *scratch = (float *)malloc(sizeof(float) * (size_t)M + (size_t)(M * K) + 64);
        if (!scratch) return attn_set_error(ATTN_E_NOMEM, "out of memory for an int8 product of %lld rows", (long long)M);
        float *xs = scratch;
        uint8_t *u = (uint8_t *)(scratch + M);
#if defined(__x86_64__)
        const int avx2 = attn__ct2_have_avx2();
#endif
        for (int64_t m = 0; m < M; m++) {
            const float *r = x + m * K;
#if defined(__x86_64__)
            if (avx2) {
                xs[m] = attn__quant_row_avx2(u + m * K, r, K);
                continue;
            }
#endif
            float amax = 0;
            for (int64_t k = 0; k < K; k++) {
                float a = fabsf(r[k]);
                if (a > amax) amax = a;
            }
            float s = amax != 0.0f ? 127.0f / amax : 1.0f;
            xs[m] = s;
            for (int64_t k = 0; k < K; k++) {
                /* one rounding (fused multiply-add), then truncation */
                float t = fmaf(r[k], s, 128.0f);
                u[m * K + k] = (uint8_t)(t < 0 ? 0 : t > 255 ? 255 : t);
            }
        }
        for (int64_t m = 0; m < M; m++) {
            const uint8_t *ur = u + m * K;
            float *yr = y + m * N;
            int32_t ci[256];
            for (int64_t n0 = 0; n0 < N; n0 += 256) {
                const int64_t nn = N - n0 < 256 ? N - n0 : 256;
#if defined(__x86_64__)
                if (avx2) attn__u8s8_rows_avx2(ci, ur, wq + n0 * K, nn, K);
                else
#endif
                    for (int64_t n = 0; n < nn; n++) ci[n] = attn__u8s8_dot_c(ur, wq + (n0 + n) * K, 0, K);
                const float ra = 1.0f / xs[m];
                const float *bb = bias ? bias + n0 : NULL;
#if defined(__x86_64__)
                if (avx2) {
                    attn__dequant_row_avx2(yr + n0, ci, comp + n0, ra, wscale + n0, bb, nn);
                    continue;
                }
#endif
                for (int64_t n = 0; n < nn; n++) {
                    float v = (float)(ci[n] - 128 * comp[n0 + n]) * ra / wscale[n0 + n];
                    yr[n0 + n] = bb ? v + bb[n] : v;
                }
            }
        }
        free(scratch);
    }
    if (act != ATTN_ACT_IDENTITY) attn__act(y, M * N, act);
    return ATTN_OK;
}

