/* Building blocks shared by the CTranslate2 model families (see ct2_layers.h). */
#include "models/ct2_layers.h"
#include "core/internal.h"

#include <cblas.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
static int attn__have_avx2(void) {
    const char *e = getenv("ATTN_QUANT_KERNEL");
    if (e && strcmp(e, "portable") == 0) return 0;
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
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

/* LayerNorm rows as in attn__ct2_ln_apply (same lane sums, folds and fused multiply-adds) */
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
        float sum = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
        float sumsq = ((q[0] + q[4]) + (q[2] + q[6])) + ((q[1] + q[5]) + (q[3] + q[7]));
        for (int64_t i = n8; i < n; i++) {
            sum += r[i];
            sumsq = fmaf(r[i], r[i], sumsq);
        }
        const float mean = sum * inv_n;
        float var = fmaf(sumsq, inv_n, -(mean * mean));
        if (!(var > 0.0f)) var = 0.0f;
        const float rstd = 1.0f / sqrtf(var + eps);
        const __m256 vmean = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd);
        for (int64_t i = 0; i < n8; i += 8)
            _mm256_storeu_ps(o + i, _mm256_fmadd_ps(_mm256_sub_ps(_mm256_loadu_ps(r + i), vmean), _mm256_mul_ps(_mm256_loadu_ps(g + i), vr),
                                                    _mm256_loadu_ps(bt + i)));
        for (int64_t i = n8; i < n; i++) o[i] = fmaf(r[i] - mean, g[i] * rstd, bt[i]);
    }
}
#endif

static float *attn__alloc_f32(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, sizeof(float) * (n ? n : 1)) != 0) return NULL;
    return (float *)p;
}

static int attn__shape_ok(const attn_ct2_var *v, int rank, const int64_t *dims) {
    if (v->rank != rank) return 0;
    for (int i = 0; i < rank; i++)
        if (dims[i] >= 0 && v->shape[i] != dims[i]) return 0;
    return 1;
}

static void attn__shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "[");
    for (int i = 0; i < rank && o < n; i++) o += (size_t)snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)dims[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

int attn__ct2_read(float **out, const attn_ct2_file *f, const char *name, int rank, const int64_t *dims) {
    *out = NULL;
    const attn_ct2_var *v = attn_ct2_find(f, name);
    if (!v) return attn_set_error(ATTN_E_FORMAT, "model.bin has no variable '%s'", name);
    if (!attn__shape_ok(v, rank, dims)) {
        char want[128], got[128];
        attn__shape_str(want, sizeof want, rank, dims);
        attn__shape_str(got, sizeof got, v->rank, v->shape);
        return attn_set_error(ATTN_E_FORMAT, "model.bin variable '%s' has shape %s, expected %s", name, got, want);
    }
    float *p = attn__alloc_f32((size_t)v->numel);
    if (!p) return attn_set_error(ATTN_E_NOMEM, "out of memory reading '%s'", name);
    attn_ct2_read_f32(p, v);
    for (int64_t i = 0; i < v->numel; i++)
        if (!isfinite(p[i])) {
            free(p);
            return attn_set_error(ATTN_E_FORMAT, "model.bin variable '%s' holds a non-finite value at index %lld", name, (long long)i);
        }
    *out = p;
    return ATTN_OK;
}

double attn__ct2_attr(const attn_ct2_file *f, const char *name, double def) {
    const attn_ct2_var *v = attn_ct2_find(f, name);
    if (!v || v->numel != 1) return def;
    float x;
    attn_ct2_read_f32(&x, v);
    return x;
}

void attn__ct2_lin_free(attn__ct2_lin *l) {
    if (!l) return;
    free(l->w);
    free(l->scale);
    free(l->b);
    free(l->q);
    free(l->comp);
    memset(l, 0, sizeof *l);
}


int attn__ct2_lin_load(attn__ct2_lin *l, const attn_ct2_file *f, const char *scope, int64_t out, int64_t in, int need_bias) {
    memset(l, 0, sizeof *l);
    char name[256];
    l->out = out;
    l->in = in;
    snprintf(name, sizeof name, "%s/weight", scope);
    const attn_ct2_var *w = attn_ct2_find(f, name);
    if (!w) return attn_set_error(ATTN_E_FORMAT, "model.bin has no variable '%s'", name);
    int64_t dims[2] = {out, in};
    int rc = attn__ct2_read(&l->w, f, name, 2, dims);
    if (rc < 0) return rc;
    if (w->dtype == ATTN_CT2_I8 || w->dtype == ATTN_CT2_I16) {
        snprintf(name, sizeof name, "%s/weight_scale", scope);
        const attn_ct2_var *s = attn_ct2_find(f, name);
        if (!s) {
            attn__ct2_lin_free(l);
            return attn_set_error(ATTN_E_FORMAT, "model.bin: quantized '%s/weight' has no weight_scale", scope);
        }
        l->scale = attn__alloc_f32((size_t)out);
        if (!l->scale) {
            attn__ct2_lin_free(l);
            return attn_set_error(ATTN_E_NOMEM, "out of memory");
        }
        if (s->numel == 1) {
            float x;
            attn_ct2_read_f32(&x, s);
            for (int64_t i = 0; i < out; i++) l->scale[i] = x;
        } else if (s->numel == out && s->dtype == ATTN_CT2_F32) {
            attn_ct2_read_f32(l->scale, s);
        } else {
            attn__ct2_lin_free(l);
            return attn_set_error(ATTN_E_FORMAT, "model.bin: '%s' must hold 1 or %lld float32 values", name, (long long)out);
        }
        for (int64_t i = 0; i < out; i++)
            if (!(l->scale[i] > 0) || !isfinite(l->scale[i])) {
                attn__ct2_lin_free(l);
                return attn_set_error(ATTN_E_FORMAT, "model.bin: '%s' has a non-positive or non-finite scale at row %lld", name, (long long)i);
            }
        if (w->dtype == ATTN_CT2_I16) {
            /* int16: dequantise once (CTranslate2 computes int16 GEMMs in integers too, but no
             * int16 model is exercised here; float weights keep the result within rounding) */
            for (int64_t o = 0; o < out; o++)
                for (int64_t i = 0; i < in; i++) l->w[o * in + i] /= l->scale[o];
            free(l->scale);
            l->scale = NULL;
        } else {
            l->sat16 = 1;
            l->comp = (int32_t *)calloc((size_t)out, sizeof(int32_t));
            if (!l->comp) {
                attn__ct2_lin_free(l);
                return attn_set_error(ATTN_E_NOMEM, "out of memory");
            }
            for (int64_t o = 0; o < out; o++)
                for (int64_t i = 0; i < in; i++) l->comp[o] += (int32_t)l->w[o * in + i];
        }
        if (l->scale && l->sat16) {
            l->q = (int8_t *)malloc((size_t)(out * in));
            if (!l->q) {
                attn__ct2_lin_free(l);
                return attn_set_error(ATTN_E_NOMEM, "out of memory");
            }
            for (int64_t i = 0; i < out * in; i++) l->q[i] = (int8_t)l->w[i];
        }
    }
    snprintf(name, sizeof name, "%s/bias", scope);
    if (attn_ct2_find(f, name) || need_bias) {
        int64_t bd[1] = {out};
        rc = attn__ct2_read(&l->b, f, name, 1, bd);
        if (rc < 0) {
            attn__ct2_lin_free(l);
            return rc;
        }
    }
    return ATTN_OK;
}

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

int attn__ct2_lin_apply(float *y, const float *x, int64_t M, const attn__ct2_lin *l, float *scratch, attn_activation act) {
    const int64_t K = l->in, N = l->out;
    if (M == 0) return ATTN_OK;
    if (l->scale && !scratch) return attn_set_error(ATTN_E_UNSUPPORTED, "int8 weights are not supported here");
    if (!l->scale && (double)M * N * K < 4194304.0) {
        /* small GEMM (a decoding step, a 32-wide model): one OpenBLAS call on this thread; splitting
         * it across threads costs more than it computes */
        if (l->b)
            for (int64_t m = 0; m < M; m++) memcpy(y + m * N, l->b, sizeof(float) * (size_t)N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)K, l->w, (int)K, l->b ? 1.0f : 0.0f,
                    y, (int)N);
    } else if (!l->scale) {
        attn_tensor tx = attn_tensor_f32_2d((float *)x, M, K), tw = attn_tensor_f32_2d(l->w, N, K), ty = attn_tensor_f32_2d(y, M, N);
        attn_tensor tb = attn_tensor_f32_1d(l->b, N);
        ATTN_TRY(attn_linear(&ty, &tx, &tw, l->b ? &tb : NULL));
    } else {
        /* CTranslate2's int8 x86 path on an AVX2 machine (u8s8s32 GEMM through oneDNN), read
         * from its AVX2 kernels and checked bit for bit against its exported GEMM on random
         * data (scripts/probe_ct2_int8.c): each input row is quantised with scale
         * s = 127 / max|x| and shifted to unsigned, u = trunc(fma(x, s, 128)) (one rounding,
         * then truncation, i.e. floor, for models of binary version < 5); the GEMM sums the
         * products of byte pairs (k, k+1) into int16 with saturation (vpmaddubsw) before
         * widening to int32; the shift is removed with the compensation 128 * sum_k w[n, k];
         * the int32 result is rescaled as (c * (1 / s)) / w_scale[n] + bias[n]. */
        float *xs = scratch + M * K;
        uint8_t *u = (uint8_t *)scratch;
#if defined(__x86_64__)
        const int avx2 = attn__have_avx2();
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
                if (avx2) attn__u8s8_rows_avx2(ci, ur, l->q + n0 * K, nn, K);
                else
#endif
                    for (int64_t n = 0; n < nn; n++) ci[n] = attn__u8s8_dot_c(ur, l->q + (n0 + n) * K, 0, K);
                const float ra = 1.0f / xs[m];
                const float *bb = l->b ? l->b + n0 : NULL;
#if defined(__x86_64__)
                if (avx2) {
                    attn__dequant_row_avx2(yr + n0, ci, l->comp + n0, ra, l->scale + n0, bb, nn);
                    continue;
                }
#endif
                for (int64_t n = 0; n < nn; n++) {
                    float v = (float)(ci[n] - 128 * l->comp[n0 + n]) * ra / l->scale[n0 + n];
                    yr[n0 + n] = bb ? v + bb[n] : v;
                }
            }
        }
    }
    if (act != ATTN_ACT_IDENTITY) attn__act(y, M * N, act);
    return ATTN_OK;
}

/* ------------------------------------------------------------------------------------------
 * CTranslate2's CPU attention arithmetic, for the int8 models (attn__ct2_mha_exact).
 *
 * CTranslate2 4.8.5 computes attention on an x86 CPU without Intel MKL as two batched oneDNN
 * sgemm calls around its own softmax: scores[M, N] = scale * Q[M, D]·K[N, D]ᵀ, then
 * context[M, D] = P[M, N]·V[N, D]. oneDNN's AVX2 kernels sum each dot product in an order that
 * depends on the GEMM shape and on where the element falls in its register tiles. The rules
 * below were measured against the GEMM exported by CTranslate2's library, one thread, with
 * scripts/probe_ct2_attention.c (head_dim 4: every shape with up to 24 queries and keys,
 * and the encoder's L x L self-attention for L up to 144: 0 mismatches; Q·Kᵀ is cut in other
 * chunks from 145 rows on, which is not followed here):
 *   - a matrix-vector product (M == 1, or N == 1 for Q·Kᵀ): Q·Kᵀ sums four partial sums
 *     (k mod 4, fused multiply-adds) as (s0 + s1) + (s2 + s3); P·V is one fused
 *     multiply-add chain in k order;
 *   - otherwise rows go in blocks of 6 (the last block holds the rest; for P·V the rows are
 *     first cut in chunks of 48, the last full chunk and a rest of more than 24 rows shared
 *     evenly between two chunks, each chunk blocked from its first row) and columns in tiles
 *     of 16 (a tile narrower than 9 is a "narrow" one): a block of 1 or 2 rows sums the even
 *     and the odd k separately with separate multiplies and adds, then adds the two, then any
 *     last odd k; a block of 3 rows, or of 3 to 6 rows in a narrow tile, does the same with
 *     fused multiply-adds; a block of 4 to 6 rows in a wide tile is one fused multiply-add
 *     chain. The scale (1 / sqrt(head_dim)) multiplies the finished sum.
 * Keys past the valid length are padding: their scores are never used (the softmax stops at
 * the length) and their weights are 0, but they still decide the tiles and the pairing.
 * Only the shapes of models with head_dim 4 were measured (the aren models); other head
 * dimensions follow the same rules without that check. */
enum { ATTN__CT2_CHAIN, ATTN__CT2_PAIRS_FMA, ATTN__CT2_PAIRS_MULADD, ATTN__CT2_GEMV4 };

static inline __attribute__((always_inline)) int attn__ct2_dot_order(int64_t M, int64_t N, int64_t m, int64_t n, int trans_b) {
    if (M == 1 || N == 1) return trans_b ? ATTN__CT2_GEMV4 : ATTN__CT2_CHAIN;
    int64_t c0 = 0, cl = M; /* the chunk of rows that holds row m */
    if (!trans_b && M > 48) {
        const int64_t full = M / 48, r = M % 48;
        c0 = 48 * (m / 48);
        cl = 48;
        if (r > 24 && m >= 48 * (full - 1)) { /* the last full chunk and the rest, split evenly */
            const int64_t a = (48 + r + 1) / 2, s0 = 48 * (full - 1);
            c0 = m < s0 + a ? s0 : s0 + a;
            cl = m < s0 + a ? a : 48 + r - a;
        } else if (m >= 48 * full) {
            c0 = 48 * full;
            cl = r;
        }
    }
    m -= c0;
    int64_t h = cl - 6 * (m / 6), tw = N - 16 * (n / 16);
    if (h > 6) h = 6;
    if (tw > 16) tw = 16;
    if (h <= 2) return ATTN__CT2_PAIRS_MULADD;
    if (tw > 8 && h != 3) return ATTN__CT2_CHAIN;
    return ATTN__CT2_PAIRS_FMA;
}

/* sum over k < K of x[k * xs] * y[k * ys] in the given order, where the terms past Kv are zero
 * (padding): they add nothing, but still decide which term is the odd one of a paired sum */
static inline __attribute__((always_inline)) float attn__ct2_dot(int order, const float *x, int64_t xs, const float *y, int64_t ys,
                                                                 int64_t K, int64_t Kv) {
    float f = 0.0f, p0 = 0.0f, p1 = 0.0f;
    const int64_t K2 = K & ~(int64_t)1, kp = Kv < K2 ? Kv : K2;
    int64_t k = 0;
    switch (order) {
    case ATTN__CT2_CHAIN:
        for (; k < Kv; k++) f = fmaf(x[k * xs], y[k * ys], f);
        return f;
    case ATTN__CT2_PAIRS_FMA:
        for (; k + 1 < kp; k += 2) {
            p0 = fmaf(x[k * xs], y[k * ys], p0);
            p1 = fmaf(x[(k + 1) * xs], y[(k + 1) * ys], p1);
        }
        if (k < kp) p0 = fmaf(x[k * xs], y[k * ys], p0);
        f = p0 + p1;
        for (k = K2; k < Kv; k++) f = fmaf(x[k * xs], y[k * ys], f);
        return f;
    case ATTN__CT2_PAIRS_MULADD:
        for (; k + 1 < kp; k += 2) {
            const float a = x[k * xs] * y[k * ys], b = x[(k + 1) * xs] * y[(k + 1) * ys];
            p0 += a;
            p1 += b;
        }
        if (k < kp) {
            const float a = x[k * xs] * y[k * ys];
            p0 += a;
        }
        f = p0 + p1;
        for (k = K2; k < Kv; k++) {
            const float a = x[k * xs] * y[k * ys];
            f += a;
        }
        return f;
    default: {
        float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (; k < Kv; k++) t[k & 3] = fmaf(x[k * xs], y[k * ys], t[k & 3]);
        return (t[0] + t[1]) + (t[2] + t[3]);
    }
    }
}

/* CTranslate2's AVX2 exp: the Cephes single-precision algorithm in 8 lanes (clamp to
 * +-88.376, n = floor(x log2(e) + 1/2), two-constant Cody-Waite reduction, degree-5
 * polynomial, scale by 2^n), with the fused multiply-adds its compiled kernel uses; checked
 * bit for bit against its exported exp on 2^20 values in [-30, 0]. */
static inline __attribute__((always_inline)) float attn__ct2_exp(float x) {
    x = x < 88.3762626647949f ? x : 88.3762626647949f;
    x = x > -88.3762626647949f ? x : -88.3762626647949f;
    float n = floorf(fmaf(x, 1.44269504088896341f, 0.5f));
    x = fmaf(n, -0.693359375f, x);
    x = fmaf(n, 2.12194440e-4f, x);
    const float z = x * x;
    float y = 1.9875691500e-4f;
    y = fmaf(y, x, 1.3981999507e-3f);
    y = fmaf(y, x, 8.3334519073e-3f);
    y = fmaf(y, x, 4.1665795894e-2f);
    y = fmaf(y, x, 1.6666665459e-1f);
    y = fmaf(y, x, 5.0000001201e-1f);
    y = fmaf(y, z, x);
    y = y + 1.0f;
    const int32_t e = ((int32_t)n + 127) * 8388608; /* 2^n as float bits */
    float p;
    memcpy(&p, &e, sizeof p);
    return y * p;
}

/* CTranslate2's softmax of one row of n values in place: the maximum and the sum in 8 lanes
 * folded as ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)) then the tail in order (a row of at most 8
 * values is summed in order), each weight multiplied by 1 / sum (checked bit for bit against
 * its exported softmax, rows of 1..40 with lengths). */
static inline __attribute__((always_inline)) void attn__ct2_softmax(float *x, int64_t n) {
    float mx;
    if (n <= 8) {
        mx = -FLT_MAX;
        for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    } else {
        float l[8];
        for (int j = 0; j < 8; j++) l[j] = -FLT_MAX;
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) l[j] = x[i + j] > l[j] ? x[i + j] : l[j];
        mx = l[0];
        for (int j = 1; j < 8; j++) mx = l[j] > mx ? l[j] : mx;
        for (; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    }
    for (int64_t i = 0; i < n; i++) x[i] = attn__ct2_exp(x[i] - mx);
    float sum;
    if (n <= 8) {
        sum = 0.0f;
        for (int64_t i = 0; i < n; i++) sum += x[i];
    } else {
        float l[8] = {0};
        int64_t i = 0;
        for (; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; j++) l[j] += x[i + j];
        sum = ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]));
        for (; i < n; i++) sum += x[i];
    }
    const float inv = 1.0f / sum;
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

static inline __attribute__((always_inline)) void attn__ct2_mha_body(float *out, int64_t os, float *w, const float *q, int64_t qr, const float *k, const float *v,
                                      int64_t kr, int64_t H, int64_t D, int64_t Lq, int64_t Lk, int64_t m_pad, int64_t n_pad, int64_t row0,
                                      float scale, float *scratch) {
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < Lq; i++) {
            const int64_t gi = row0 + i;
            const float *qi = q + i * qr + h * D;
            float *p = scratch;
            for (int64_t j = 0; j < Lk; j++)
                p[j] = scale * attn__ct2_dot(attn__ct2_dot_order(m_pad, n_pad, gi, j, 1), qi, 1, k + j * kr + h * D, 1, D, D);
            attn__ct2_softmax(p, Lk);
            if (w) memcpy(w + (h * Lq + i) * Lk, p, sizeof(float) * (size_t)Lk);
            /* context: the D outputs of a row share their order when D <= 16 (one column tile),
             * so their sums run side by side (the same operations per output, in the same order) */
            float *o = out + i * os + h * D;
            const float *vh = v + h * D;
            const int ord = attn__ct2_dot_order(m_pad, D, gi, 0, 0);
            if (D > 16 || ord == ATTN__CT2_GEMV4) {
                for (int64_t d = 0; d < D; d++) o[d] = attn__ct2_dot(attn__ct2_dot_order(m_pad, D, gi, d, 0), p, 1, vh + d, kr, n_pad, Lk);
                continue;
            }
            const int64_t K2 = n_pad & ~(int64_t)1, kp = Lk < K2 ? Lk : K2;
            float a0[16], a1[16]; /* sums in locals: no aliasing with the inputs */
            int64_t kk = 0;
            for (int64_t d = 0; d < D; d++) a0[d] = a1[d] = 0.0f;
            if (ord == ATTN__CT2_CHAIN) {
                for (; kk < Lk; kk++)
                    for (int64_t d = 0; d < D; d++) a0[d] = fmaf(p[kk], vh[kk * kr + d], a0[d]);
                for (int64_t d = 0; d < D; d++) o[d] = a0[d];
                continue;
            }
            if (ord == ATTN__CT2_PAIRS_FMA) {
                for (; kk + 1 < kp; kk += 2)
                    for (int64_t d = 0; d < D; d++) {
                        a0[d] = fmaf(p[kk], vh[kk * kr + d], a0[d]);
                        a1[d] = fmaf(p[kk + 1], vh[(kk + 1) * kr + d], a1[d]);
                    }
                if (kk < kp)
                    for (int64_t d = 0; d < D; d++) a0[d] = fmaf(p[kk], vh[kk * kr + d], a0[d]);
                for (int64_t d = 0; d < D; d++) a0[d] = a0[d] + a1[d];
                for (kk = K2; kk < Lk; kk++)
                    for (int64_t d = 0; d < D; d++) a0[d] = fmaf(p[kk], vh[kk * kr + d], a0[d]);
            } else {
                for (; kk + 1 < kp; kk += 2)
                    for (int64_t d = 0; d < D; d++) {
                        const float x0 = p[kk] * vh[kk * kr + d], x1 = p[kk + 1] * vh[(kk + 1) * kr + d];
                        a0[d] += x0;
                        a1[d] += x1;
                    }
                if (kk < kp)
                    for (int64_t d = 0; d < D; d++) {
                        const float x0 = p[kk] * vh[kk * kr + d];
                        a0[d] += x0;
                    }
                for (int64_t d = 0; d < D; d++) a0[d] = a0[d] + a1[d];
                for (kk = K2; kk < Lk; kk++)
                    for (int64_t d = 0; d < D; d++) {
                        const float x0 = p[kk] * vh[kk * kr + d];
                        a0[d] += x0;
                    }
            }
            for (int64_t d = 0; d < D; d++) o[d] = a0[d];
        }
}

/* the same operations compiled with FMA instructions (fmaf and floorf inline; results are
 * identical: fmaf is one rounding either way) */
#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static void attn__ct2_mha_fma(float *out, int64_t os, float *w, const float *q, int64_t qr,
                                                                   const float *k, const float *v, int64_t kr, int64_t H, int64_t D,
                                                                   int64_t Lq, int64_t Lk, int64_t m_pad, int64_t n_pad, int64_t row0,
                                                                   float scale, float *scratch) {
    attn__ct2_mha_body(out, os, w, q, qr, k, v, kr, H, D, Lq, Lk, m_pad, n_pad, row0, scale, scratch);
}
#endif

void attn__ct2_mha_exact(float *out, int64_t os, float *w, const float *q, int64_t qr, const float *k, const float *v, int64_t kr,
                         int64_t H, int64_t D, int64_t Lq, int64_t Lk, int64_t m_pad, int64_t n_pad, int64_t row0, float scale,
                         float *scratch) {
#if defined(__x86_64__)
    if (attn__have_avx2()) {
        attn__ct2_mha_fma(out, os, w, q, qr, k, v, kr, H, D, Lq, Lk, m_pad, n_pad, row0, scale, scratch);
        return;
    }
#endif
    attn__ct2_mha_body(out, os, w, q, qr, k, v, kr, H, D, Lq, Lk, m_pad, n_pad, row0, scale, scratch);
}

int attn__ct2_ln_load(attn__ct2_ln *ln, const attn_ct2_file *f, const char *scope, int64_t n) {
    memset(ln, 0, sizeof *ln);
    char name[256];
    int64_t d[1] = {n};
    ln->n = n;
    snprintf(name, sizeof name, "%s/gamma", scope);
    ATTN_TRY(attn__ct2_read(&ln->g, f, name, 1, d));
    snprintf(name, sizeof name, "%s/beta", scope);
    int rc = attn__ct2_read(&ln->b, f, name, 1, d);
    if (rc < 0) attn__ct2_ln_free(ln);
    return rc;
}

void attn__ct2_ln_free(attn__ct2_ln *ln) {
    if (!ln) return;
    free(ln->g);
    free(ln->b);
    memset(ln, 0, sizeof *ln);
}

void attn__ct2_ln_apply(float *y, const float *x, int64_t M, const attn__ct2_ln *ln, float eps) {
    /* Rounded like CTranslate2's CPU LayerNorm on an 8-float-wide machine, so that int8 models,
     * whose activations are re-quantised after every norm, see the same floats: single pass,
     * sum and sum of squares in 8 interleaved float lanes (x[8i + l] into lane l, the square
     * rounded before it is added), lanes folded as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)),
     * mean = sum * (1/n), variance = fma(sumsq, 1/n, -mean^2) clamped at 0,
     * y = fma(x - mean, gamma * rstd, beta) with rstd = 1 / sqrt(variance + eps). */
#if defined(__x86_64__)
    if (attn__have_avx2()) {
        attn__ln_rows_avx2(y, x, M, ln->g, ln->b, ln->n, eps);
        return;
    }
#endif
    const int64_t n = ln->n, n8 = n - n % 8;
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
        float sum = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
        float sumsq = ((q[0] + q[4]) + (q[2] + q[6])) + ((q[1] + q[5]) + (q[3] + q[7]));
        for (int64_t i = n8; i < n; i++) {
            sum += r[i];
            sumsq = fmaf(r[i], r[i], sumsq);
        }
        const float mean = sum * inv_n;
        float var = fmaf(sumsq, inv_n, -(mean * mean));
        if (!(var > 0.0f)) var = 0.0f;
        const float rstd = 1.0f / sqrtf(var + eps);
        for (int64_t i = 0; i < n; i++) o[i] = fmaf(r[i] - mean, ln->g[i] * rstd, ln->b[i]);
    }
}

int attn__ct2_load_model(const char *dir, int (*body)(void *ctx, const attn_ct2_file *f), void *ctx) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    attn_ct2_file *f = NULL;
    int rc = attn_ct2_open(&f, path);
    if (rc == 0) {
        rc = body(ctx, f);
        if (rc < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            rc = attn_set_error(rc, "%s: %s", path, msg);
        }
    }
    attn_ct2_close(f);
    return rc;
}

int attn__ct2_embedding(float **out, int64_t *V, const attn_ct2_file *f, const char *scope, int64_t E) {
    char name[256];
    *out = NULL;
    snprintf(name, sizeof name, "%s/weight", scope);
    const attn_ct2_var *w = attn_ct2_find(f, name);
    if (!w) return attn_set_error(ATTN_E_FORMAT, "model.bin has no variable '%s'", name);
    int64_t dims[2] = {-1, E};
    ATTN_TRY(attn__ct2_read(out, f, name, 2, dims));
    *V = w->shape[0];
    if (w->dtype == ATTN_CT2_I8 || w->dtype == ATTN_CT2_I16) {
        snprintf(name, sizeof name, "%s/weight_scale", scope);
        const attn_ct2_var *s = attn_ct2_find(f, name);
        if (!s || s->dtype != ATTN_CT2_F32 || (s->numel != 1 && s->numel != *V)) {
            free(*out);
            *out = NULL;
            return attn_set_error(ATTN_E_FORMAT, "model.bin: quantized '%s/weight' needs a float32 weight_scale of 1 or %lld values",
                                  scope, (long long)*V);
        }
        float *sc = (float *)malloc(sizeof(float) * (size_t)s->numel);
        if (!sc) {
            free(*out);
            *out = NULL;
            return attn_set_error(ATTN_E_NOMEM, "out of memory");
        }
        attn_ct2_read_f32(sc, s);
        for (int64_t v = 0; v < *V; v++) {
            float r = 1.0f / (s->numel == 1 ? sc[0] : sc[v]);
            for (int64_t e = 0; e < E; e++) (*out)[v * E + e] = (*out)[v * E + e] * r;
        }
        free(sc);
    }
    return ATTN_OK;
}
