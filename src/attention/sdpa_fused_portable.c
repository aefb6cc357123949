/* Portable (plain C) kernels of the fused SDPA (the kernel table's portable path; see
 * sdpa_fused.c for the algorithm and fused_internal.h for the table's contract). */
#include "attention/fused_internal.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

/* ================================================================== portable kernels */

/* Plain C kernels. They are written as fixed 16-wide inner loops over independent lanes (nqp is a
 * multiple of 16) with a branch-free exp, so that the compiler's -O2 vectoriser turns them into
 * SSE / NEON code; accumulation orders are fixed in the source (no reassociation needed). */
#define PB 16
#define PSIMD ATTN__PSIMD

#if defined(__clang__) /* at -O0/-O1 (e.g. `make fuzz`) clang cannot vectorise and would warn on each loop */
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

static void attn__s_block_portable(float *ST, int ld, int nqp, const float *QT, const float *K, int64_t ksj,
                                   int64_t ksd, int nk, int64_t D, float *colmax) {
    int j = 0;
    for (; j + 2 <= nk; j += 2) { /* two keys at a time: each QT row is used twice */
        const float *k0 = K + j * ksj, *k1 = k0 + ksj;
        for (int i0 = 0; i0 < nqp; i0 += PB) {
            float a0[PB], a1[PB];
            PSIMD
            for (int u = 0; u < PB; u++) a0[u] = a1[u] = 0.0f;
            for (int64_t d = 0; d < D; d++) {
                const float x0 = k0[d * ksd], x1 = k1[d * ksd];
                const float *qt = QT + d * ld + i0;
                PSIMD
                for (int u = 0; u < PB; u++) {
                    a0[u] += x0 * qt[u];
                    a1[u] += x1 * qt[u];
                }
            }
            float *s0 = ST + (int64_t)j * ld + i0, *s1 = s0 + ld;
            PSIMD
            for (int u = 0; u < PB; u++) {
                s0[u] = a0[u];
                s1[u] = a1[u];
            }
            if (colmax)
                PSIMD
                for (int u = 0; u < PB; u++) {
                    const float mx = a0[u] > a1[u] ? a0[u] : a1[u];
                    colmax[i0 + u] = mx > colmax[i0 + u] ? mx : colmax[i0 + u];
                }
        }
    }
    for (; j < nk; j++) {
        const float *k0 = K + j * ksj;
        for (int i0 = 0; i0 < nqp; i0 += PB) {
            float a0[PB];
            PSIMD
            for (int u = 0; u < PB; u++) a0[u] = 0.0f;
            for (int64_t d = 0; d < D; d++) {
                const float x0 = k0[d * ksd];
                const float *qt = QT + d * ld + i0;
                PSIMD
                for (int u = 0; u < PB; u++) a0[u] += x0 * qt[u];
            }
            float *s0 = ST + (int64_t)j * ld + i0;
            PSIMD
            for (int u = 0; u < PB; u++) s0[u] = a0[u];
            if (colmax)
                PSIMD
                for (int u = 0; u < PB; u++) colmax[i0 + u] = a0[u] > colmax[i0 + u] ? a0[u] : colmax[i0 + u];
        }
    }
}

static void attn__softmax_block_portable(float *ST, int ld, int nqp, int nk, const float *colmax, float *m, float *l,
                                         float *alpha) {
    for (int i0 = 0; i0 < nqp; i0 += PB) {
        float mx[PB], ms[PB], sum[PB];
        PSIMD
        for (int u = 0; u < PB; u++) {
            mx[u] = colmax ? colmax[i0 + u] : -INFINITY;
            sum[u] = 0.0f;
        }
        if (!colmax)
            for (int j = 0; j < nk; j++) {
                const float *st = ST + (int64_t)j * ld + i0;
                PSIMD
                for (int u = 0; u < PB; u++) mx[u] = st[u] > mx[u] ? st[u] : mx[u];
            }
        PSIMD
        for (int u = 0; u < PB; u++) {
            const float mnew = m[i0 + u] > mx[u] ? m[i0 + u] : mx[u];
            attn__fbits mb;
            mb.f = mnew;
            mb.u &= 0u - (uint32_t)(mb.u != 0xFF800000u); /* -inf -> 0 */
            ms[u] = mb.f;
            alpha[i0 + u] = attn__exp_scalar(m[i0 + u] - ms[u]);
            m[i0 + u] = mnew;
        }
        for (int j = 0; j < nk; j++) {
            float *st = ST + (int64_t)j * ld + i0;
            PSIMD
            for (int u = 0; u < PB; u++) {
                st[u] = attn__exp_scalar(st[u] - ms[u]);
                sum[u] += st[u];
            }
        }
        PSIMD
        for (int u = 0; u < PB; u++) l[i0 + u] = l[i0 + u] * alpha[i0 + u] + sum[u];
    }
}

static void attn__pv_block_portable(float *OT, int ld, int nqp, const float *PT, const float *alpha, const float *V,
                                    int64_t vsj, int64_t vsd, int nk, int64_t Dv) {
    int64_t e = 0;
    for (; e + 2 <= Dv; e += 2) { /* two value columns at a time: each PT row is used twice */
        const float *v0 = V + e * vsd, *v1 = v0 + vsd;
        for (int i0 = 0; i0 < nqp; i0 += PB) {
            float a0[PB], a1[PB];
            PSIMD
            for (int u = 0; u < PB; u++) a0[u] = a1[u] = 0.0f;
            for (int j = 0; j < nk; j++) {
                const float x0 = v0[j * vsj], x1 = v1[j * vsj];
                const float *pt = PT + (int64_t)j * ld + i0;
                PSIMD
                for (int u = 0; u < PB; u++) {
                    a0[u] += x0 * pt[u];
                    a1[u] += x1 * pt[u];
                }
            }
            float *o0 = OT + e * ld + i0, *o1 = o0 + ld;
            PSIMD
            for (int u = 0; u < PB; u++) {
                o0[u] = o0[u] * alpha[i0 + u] + a0[u];
                o1[u] = o1[u] * alpha[i0 + u] + a1[u];
            }
        }
    }
    for (; e < Dv; e++) {
        const float *v0 = V + e * vsd;
        for (int i0 = 0; i0 < nqp; i0 += PB) {
            float a0[PB];
            PSIMD
            for (int u = 0; u < PB; u++) a0[u] = 0.0f;
            for (int j = 0; j < nk; j++) {
                const float x0 = v0[j * vsj];
                const float *pt = PT + (int64_t)j * ld + i0;
                PSIMD
                for (int u = 0; u < PB; u++) a0[u] += x0 * pt[u];
            }
            float *o0 = OT + e * ld + i0;
            PSIMD
            for (int u = 0; u < PB; u++) o0[u] = o0[u] * alpha[i0 + u] + a0[u];
        }
    }
}

static void attn__row_dots_portable(float *s, const float *q, const float *K, int64_t ksj, int nk, int64_t D) {
    const int64_t Df = D / PB * PB;
    for (int j = 0; j < nk; j++) {
        const float *kj = K + j * ksj;
        float a[PB];
        PSIMD
        for (int u = 0; u < PB; u++) a[u] = 0.0f;
        for (int64_t d = 0; d < Df; d += PB)
            PSIMD
            for (int u = 0; u < PB; u++) a[u] += q[d + u] * kj[d + u];
        for (int64_t d = Df; d < D; d++) a[d - Df] += q[d] * kj[d];
        float r = 0.0f;
        PSIMD
        for (int u = 0; u < PB; u++) r += a[u];
        s[j] = r;
    }
}

static float attn__row_max_portable(const float *s, int n) {
    float r = -INFINITY;
    for (int j = 0; j < n; j++) r = s[j] > r ? s[j] : r;
    return r;
}

static float attn__row_exp_sum_portable(float *s, int n, float msub) {
    float a[PB];
    PSIMD
    for (int u = 0; u < PB; u++) a[u] = 0.0f;
    int j = 0;
    for (; j + PB <= n; j += PB)
        PSIMD
        for (int u = 0; u < PB; u++) {
            s[j + u] = attn__exp_scalar(s[j + u] - msub);
            a[u] += s[j + u];
        }
    for (; j < n; j++) {
        s[j] = attn__exp_scalar(s[j] - msub);
        a[0] += s[j];
    }
    float r = 0.0f;
    PSIMD
    for (int u = 0; u < PB; u++) r += a[u];
    return r;
}

static void attn__row_pv_portable(float *acc, const float *p, const float *V, int64_t vsj, int nk, int64_t Dv) {
    const int64_t Df = Dv / PB * PB;
    for (int64_t e0 = 0; e0 < Df; e0 += PB) {
        float a[PB];
        PSIMD
        for (int u = 0; u < PB; u++) a[u] = 0.0f;
        for (int j = 0; j < nk; j++) {
            const float pj = p[j];
            const float *vj = V + j * vsj + e0;
            PSIMD
            for (int u = 0; u < PB; u++) a[u] += pj * vj[u];
        }
        PSIMD
        for (int u = 0; u < PB; u++) acc[e0 + u] = a[u];
    }
    for (int64_t e = Df; e < Dv; e++) {
        float a = 0.0f;
        for (int j = 0; j < nk; j++) a += p[j] * V[j * vsj + e];
        acc[e] = a;
    }
}

static void attn__exp_scale_portable(float *x, int64_t n, float msub, float mul) {
    int64_t j = 0;
    for (; j + PB <= n; j += PB)
        PSIMD
        for (int u = 0; u < PB; u++) x[j + u] = attn__exp_scalar(x[j + u] - msub) * mul;
    for (; j < n; j++) x[j] = attn__exp_scalar(x[j] - msub) * mul;
}

static void attn__pack_qt_portable(float *QT, int ld, int nq, int nqp, const float *q, int64_t qsi, int64_t D,
                                   float scale) {
    for (int i = 0; i < nq; i++)
        for (int64_t d = 0; d < D; d++) QT[d * ld + i] = q[i * qsi + d] * scale;
    for (int64_t d = 0; d < D; d++)
        for (int i = nq; i < nqp; i++) QT[d * ld + i] = 0.0f;
}

static void attn__store_out_portable(float *o, int64_t osi, const float *OT, int ld, int nq, const float *l,
                                     int64_t Dv) {
    for (int i = 0; i < nq; i++) {
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        for (int64_t e = 0; e < Dv; e++) o[i * osi + e] = OT[e * ld + i] * inv;
    }
}

static const attn__fused_kernels attn__kernels_portable = {
    ATTN__SIMD_PORTABLE,        "portable",
    attn__s_block_portable,     attn__softmax_block_portable,
    attn__pv_block_portable,    attn__row_dots_portable,
    attn__row_max_portable,     attn__row_exp_sum_portable,
    attn__row_pv_portable,      attn__exp_scale_portable,
    attn__pack_qt_portable,     attn__store_out_portable,
    attn__exp_n_portable,
};

const attn__fused_kernels *attn__fused_kernels_portable(void) { return &attn__kernels_portable; }
