/* CTranslate2 4.8.5's CPU attention arithmetic (oneDNN's summation orders, its exp and softmax;
 * see ct2compat.h). */
#include "ct2compat/ct2compat.h"
#include "core/internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
                                      int64_t kr, int64_t kh, int64_t H, int64_t D, int64_t Lq, int64_t Lk, int64_t m_pad, int64_t n_pad, int64_t row0,
                                      float scale, float *scratch) {
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < Lq; i++) {
            const int64_t gi = row0 + i;
            const float *qi = q + i * qr + h * D;
            float *p = scratch;
            for (int64_t j = 0; j < Lk; j++)
                p[j] = scale * attn__ct2_dot(attn__ct2_dot_order(m_pad, n_pad, gi, j, 1), qi, 1, k + j * kr + h * kh, 1, D, D);
            attn__ct2_softmax(p, Lk);
            if (w) memcpy(w + (h * Lq + i) * Lk, p, sizeof(float) * (size_t)Lk);
            /* context: the D outputs of a row share their order when D <= 16 (one column tile),
             * so their sums run side by side (the same operations per output, in the same order) */
            float *o = out + i * os + h * D;
            const float *vh = v + h * kh;
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
                                                                   const float *k, const float *v, int64_t kr, int64_t kh, int64_t H, int64_t D,
                                                                   int64_t Lq, int64_t Lk, int64_t m_pad, int64_t n_pad, int64_t row0,
                                                                   float scale, float *scratch) {
    attn__ct2_mha_body(out, os, w, q, qr, k, v, kr, kh, H, D, Lq, Lk, m_pad, n_pad, row0, scale, scratch);
}
#endif

void attn__ct2_mha_exact(float *out, int64_t os, float *w, const float *q, int64_t qr, const float *k, const float *v, int64_t kr,
                         int64_t kh, int64_t H, int64_t D, int64_t Lq, int64_t Lk, int64_t m_pad, int64_t n_pad, int64_t row0, float scale,
                         float *scratch) {
#if defined(__x86_64__)
    if (attn__ct2_have_avx2()) {
        attn__ct2_mha_fma(out, os, w, q, qr, k, v, kr, kh, H, D, Lq, Lk, m_pad, n_pad, row0, scale, scratch);
        return;
    }
#endif
    attn__ct2_mha_body(out, os, w, q, qr, k, v, kr, kh, H, D, Lq, Lk, m_pad, n_pad, row0, scale, scratch);
}
