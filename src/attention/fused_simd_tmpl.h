/* Private: SIMD kernels of the fused SDPA, written once over a small vector-macro vocabulary and
 * instantiated by sdpa_fused_avx512.c (16 lanes) and sdpa_fused_avx2.c (8 lanes). Not a normal
 * header: include it only after defining
 *
 *   FS(name)            name mangling (e.g. name##_avx512)
 *   VEC, VW             vector type and lane count
 *   VMASK               tail-mask type; V_TAILMASK(n) selects the first n (0 < n <= VW) lanes
 *   V_ZERO() V_SET1(x) V_LOAD(p) V_LOADU(p) V_LOADU_M(p, mk) V_STORE(p, x) V_STOREU(p, x)
 *   V_STOREU_M(p, mk, x)  store the lanes selected by mk
 *   V_ADD V_SUB V_MUL V_MAX V_FMA(a, b, c) (= a*b + c, one rounding)
 *   V_INV_POS(x)        1/x where x > 0, else 0
 *   V_TRANSPOSE(r)      transpose the VW x VW matrix held in VEC r[VW] (r[u] = row u) in place
 *   V_HSUM(x) V_HMAX(x)  horizontal sum / max to a float
 *   V_NEGINF_TO_ZERO(x)  lanes equal to -inf become 0, others unchanged
 *   V_EXP(x)            the path's exp (core/simd_math.h; see sdpa_fused.c for the error bound)
 *   FS_EXP_N            the path's array exp from core/simd_math.h (the table's exp_n)
 *   S_MR, S_NV          register block of the score kernel: S_MR keys x S_NV vectors of queries
 *   P_MR, P_NV          register block of the P·V kernel: P_MR value columns x P_NV query vectors
 *   FS_PATH, FS_NAME    the ATTN__SIMD_* value and name of the kernel table FS(kernels)
 * and including <string.h>.
 *
 * Register blocking: the score kernel keeps an S_MR x S_NV tile of ST in registers and, for each
 * d, loads S_NV vectors of QT[d][·] and broadcasts S_MR scalars K[j][d]: S_MR·S_NV FMAs per
 * S_MR + S_NV loads (6 x 4 = 24 FMAs per 10 loads with AVX-512, 6 x 2 with AVX2's 16 registers).
 * The P·V kernel is the same shape with V[j][e] broadcast and PT[j][·] loaded. */

#ifndef FS
#error "fused_simd_tmpl.h needs FS() and the V_* macros"
#endif

#if S_MR != 6 || P_MR != 6 || S_NV < 1 || S_NV > 4 || P_NV < 1 || P_NV > 4
#error "the tile dispatch below is written for S_MR = P_MR = 6 and 1 <= S_NV, P_NV <= 4"
#endif

#define FS_INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------------ score block ST = K·QT */

FS_INLINE void FS(s_micro)(const int MR, const int NV, float *ST, int ld, const float *QT, const float *K,
                           int64_t ksj, int64_t ksd, int64_t D, float *colmax) {
    VEC acc[S_MR][S_NV];
    const float *kr[S_MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        kr[r] = K + r * ksj;
#pragma GCC unroll 4
        for (int n = 0; n < NV; n++) acc[r][n] = V_ZERO();
    }
    const float *qrow = QT;
    int64_t o = 0;
    for (int64_t d = 0; d < D; d++, qrow += ld, o += ksd) {
        VEC qv[S_NV];
#pragma GCC unroll 4
        for (int n = 0; n < NV; n++) qv[n] = V_LOAD(qrow + n * VW);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            VEC kb = V_SET1(kr[r][o]);
#pragma GCC unroll 4
            for (int n = 0; n < NV; n++) acc[r][n] = V_FMA(kb, qv[n], acc[r][n]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++)
#pragma GCC unroll 4
        for (int n = 0; n < NV; n++) V_STORE(ST + (int64_t)r * ld + n * VW, acc[r][n]);
    if (colmax) {
#pragma GCC unroll 4
        for (int n = 0; n < NV; n++) {
            VEC mx = V_LOAD(colmax + n * VW);
#pragma GCC unroll 8
            for (int r = 0; r < MR; r++) mx = V_MAX(mx, acc[r][n]);
            V_STORE(colmax + n * VW, mx);
        }
    }
}

#define FS_SCASE(mr, nv)                                        \
    case (mr) * 8 + (nv):                                       \
        FS(s_micro)(mr, nv, ST, ld, QT, K, ksj, ksd, D, colmax); \
        return;
#define FS_SROW(nv) FS_SCASE(1, nv) FS_SCASE(2, nv) FS_SCASE(3, nv) FS_SCASE(4, nv) FS_SCASE(5, nv) FS_SCASE(6, nv)

static void FS(s_tile)(int mr, int nv, float *ST, int ld, const float *QT, const float *K, int64_t ksj, int64_t ksd,
                       int64_t D, float *colmax) {
    switch (mr * 8 + nv) {
        FS_SROW(1)
#if S_NV >= 2
        FS_SROW(2)
#endif
#if S_NV >= 3
        FS_SROW(3)
#endif
#if S_NV >= 4
        FS_SROW(4)
#endif
    default:
        return;
    }
}

static void FS(s_block)(float *ST, int ld, int nqp, const float *QT, const float *K, int64_t ksj, int64_t ksd, int nk,
                        int64_t D, float *colmax) {
    const int nvec = nqp / VW;
    for (int c = 0; c < nvec; c += S_NV) {
        const int nv = nvec - c < S_NV ? nvec - c : S_NV;
        float *cm = colmax ? colmax + c * VW : NULL;
        int j = 0;
        for (; j + S_MR <= nk; j += S_MR)
            FS(s_tile)(S_MR, nv, ST + (int64_t)j * ld + c * VW, ld, QT + c * VW, K + j * ksj, ksj, ksd, D, cm);
        if (j < nk)
            FS(s_tile)(nk - j, nv, ST + (int64_t)j * ld + c * VW, ld, QT + c * VW, K + j * ksj, ksj, ksd, D, cm);
    }
}

/* ------------------------------------------------------------------ online softmax of a block */

static void FS(softmax_block)(float *ST, int ld, int nqp, int nk, const float *colmax, float *m, float *l,
                              float *alpha) {
    const VEC ninf = V_SET1(-INFINITY);
    for (int c = 0; c < nqp; c += VW) {
        VEC bmax;
        int j = 0;
        if (colmax) {
            bmax = V_LOAD(colmax + c);
        } else {
            VEC mx0 = ninf, mx1 = ninf;
            for (; j + 2 <= nk; j += 2) {
                mx0 = V_MAX(mx0, V_LOAD(ST + (int64_t)j * ld + c));
                mx1 = V_MAX(mx1, V_LOAD(ST + (int64_t)(j + 1) * ld + c));
            }
            if (j < nk) mx0 = V_MAX(mx0, V_LOAD(ST + (int64_t)j * ld + c));
            bmax = V_MAX(mx0, mx1);
        }
        const VEC mold = V_LOAD(m + c);
        const VEC mnew = V_MAX(mold, bmax);
        const VEC msub = V_NEGINF_TO_ZERO(mnew); /* a column with nothing visible yet: exp(-inf - 0) = 0 */
        const VEC a = V_EXP(V_SUB(mold, msub));
        VEC s0 = V_ZERO(), s1 = V_ZERO();
        for (j = 0; j + 2 <= nk; j += 2) {
            float *p0 = ST + (int64_t)j * ld + c, *p1 = p0 + ld;
            VEC e0 = V_EXP(V_SUB(V_LOAD(p0), msub));
            VEC e1 = V_EXP(V_SUB(V_LOAD(p1), msub));
            V_STORE(p0, e0);
            V_STORE(p1, e1);
            s0 = V_ADD(s0, e0);
            s1 = V_ADD(s1, e1);
        }
        if (j < nk) {
            float *p0 = ST + (int64_t)j * ld + c;
            VEC e0 = V_EXP(V_SUB(V_LOAD(p0), msub));
            V_STORE(p0, e0);
            s0 = V_ADD(s0, e0);
        }
        V_STORE(l + c, V_FMA(V_LOAD(l + c), a, V_ADD(s0, s1)));
        V_STORE(m + c, mnew);
        V_STORE(alpha + c, a);
    }
}

/* ------------------------------------------------------------------ OT = OT·alpha + V^T·PT */

FS_INLINE void FS(pv_micro)(const int MR, const int NV, float *OT, int ld, const float *PT, const float *alpha,
                            const float *V, int64_t vsj, int64_t vsd, int nk) {
    VEC acc[P_MR][P_NV];
    const float *vr[P_MR];
#pragma GCC unroll 8
    for (int r = 0; r < MR; r++) {
        vr[r] = V + r * vsd;
#pragma GCC unroll 4
        for (int n = 0; n < NV; n++) acc[r][n] = V_ZERO();
    }
    /* the block's contributions are summed from zero and added to the running output once,
     * which keeps the float32 rounding error growing with the block length, not with Lk */
    const float *prow = PT;
    int64_t o = 0;
    for (int j = 0; j < nk; j++, prow += ld, o += vsj) {
        VEC pv[P_NV];
#pragma GCC unroll 4
        for (int n = 0; n < NV; n++) pv[n] = V_LOAD(prow + n * VW);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            VEC vb = V_SET1(vr[r][o]);
#pragma GCC unroll 4
            for (int n = 0; n < NV; n++) acc[r][n] = V_FMA(vb, pv[n], acc[r][n]);
        }
    }
#pragma GCC unroll 4
    for (int n = 0; n < NV; n++) {
        const VEC a = V_LOAD(alpha + n * VW);
#pragma GCC unroll 8
        for (int r = 0; r < MR; r++) {
            float *po = OT + (int64_t)r * ld + n * VW;
            V_STORE(po, V_FMA(V_LOAD(po), a, acc[r][n]));
        }
    }
}

#define FS_PCASE(mr, nv)                                                \
    case (mr) * 8 + (nv):                                               \
        FS(pv_micro)(mr, nv, OT, ld, PT, alpha, V, vsj, vsd, nk);       \
        return;
#define FS_PROW(nv) FS_PCASE(1, nv) FS_PCASE(2, nv) FS_PCASE(3, nv) FS_PCASE(4, nv) FS_PCASE(5, nv) FS_PCASE(6, nv)

static void FS(pv_tile)(int mr, int nv, float *OT, int ld, const float *PT, const float *alpha, const float *V,
                        int64_t vsj, int64_t vsd, int nk) {
    switch (mr * 8 + nv) {
        FS_PROW(1)
#if P_NV >= 2
        FS_PROW(2)
#endif
#if P_NV >= 3
        FS_PROW(3)
#endif
#if P_NV >= 4
        FS_PROW(4)
#endif
    default:
        return;
    }
}

static void FS(pv_block)(float *OT, int ld, int nqp, const float *PT, const float *alpha, const float *V, int64_t vsj,
                         int64_t vsd, int nk, int64_t Dv) {
    const int nvec = nqp / VW;
    for (int c = 0; c < nvec; c += P_NV) {
        const int nv = nvec - c < P_NV ? nvec - c : P_NV;
        int64_t e = 0;
        for (; e + P_MR <= Dv; e += P_MR)
            FS(pv_tile)(P_MR, nv, OT + e * ld + c * VW, ld, PT + c * VW, alpha + c * VW, V + e * vsd, vsj, vsd, nk);
        if (e < Dv)
            FS(pv_tile)((int)(Dv - e), nv, OT + e * ld + c * VW, ld, PT + c * VW, alpha + c * VW, V + e * vsd, vsj,
                        vsd, nk);
    }
}

/* ------------------------------------------------------------------ one-row (decode) kernels */

FS_INLINE VEC FS(dot_tail)(VEC acc, const float *q, const float *k, int64_t d, int64_t D) {
    if (d < D) {
        const VMASK tm = V_TAILMASK((int)(D - d));
        acc = V_FMA(V_LOADU_M(k + d, tm), V_LOADU_M(q + d, tm), acc);
    }
    return acc;
}

static void FS(row_dots)(float *s, const float *q, const float *K, int64_t ksj, int nk, int64_t D) {
    const int64_t Df = D / VW * VW;
    int j = 0;
    for (; j + 4 <= nk; j += 4) {
        const float *k0 = K + j * ksj, *k1 = k0 + ksj, *k2 = k1 + ksj, *k3 = k2 + ksj;
        VEC a0 = V_ZERO(), a1 = V_ZERO(), a2 = V_ZERO(), a3 = V_ZERO();
        int64_t d = 0;
        for (; d < Df; d += VW) {
            const VEC qv = V_LOADU(q + d);
            a0 = V_FMA(V_LOADU(k0 + d), qv, a0);
            a1 = V_FMA(V_LOADU(k1 + d), qv, a1);
            a2 = V_FMA(V_LOADU(k2 + d), qv, a2);
            a3 = V_FMA(V_LOADU(k3 + d), qv, a3);
        }
        a0 = FS(dot_tail)(a0, q, k0, d, D);
        a1 = FS(dot_tail)(a1, q, k1, d, D);
        a2 = FS(dot_tail)(a2, q, k2, d, D);
        a3 = FS(dot_tail)(a3, q, k3, d, D);
        s[j] = V_HSUM(a0);
        s[j + 1] = V_HSUM(a1);
        s[j + 2] = V_HSUM(a2);
        s[j + 3] = V_HSUM(a3);
    }
    for (; j < nk; j++) { /* same operation order as above, so results do not depend on j % 4 */
        const float *k0 = K + j * ksj;
        VEC a0 = V_ZERO();
        int64_t d = 0;
        for (; d < Df; d += VW) a0 = V_FMA(V_LOADU(k0 + d), V_LOADU(q + d), a0);
        a0 = FS(dot_tail)(a0, q, k0, d, D);
        s[j] = V_HSUM(a0);
    }
}

static float FS(row_max)(const float *s, int n) {
    VEC mx = V_SET1(-INFINITY);
    int j = 0;
    for (; j + VW <= n; j += VW) mx = V_MAX(mx, V_LOADU(s + j));
    float r = V_HMAX(mx);
    for (; j < n; j++)
        if (s[j] > r) r = s[j];
    return r;
}

/* x = exp(x - msub)·mul over n floats, the tail through a -inf padded buffer; returns the sum of
 * the results (before mul is applied when mul == 1, which is how row_exp_sum uses it). */
FS_INLINE float FS(exp_sub_mul)(float *x, int64_t n, float msub, float mul) {
    const VEC vs = V_SET1(msub), vm = V_SET1(mul);
    VEC s0 = V_ZERO(), s1 = V_ZERO();
    int64_t j = 0;
    for (; j + 2 * VW <= n; j += 2 * VW) {
        VEC e0 = V_MUL(V_EXP(V_SUB(V_LOADU(x + j), vs)), vm);
        VEC e1 = V_MUL(V_EXP(V_SUB(V_LOADU(x + j + VW), vs)), vm);
        V_STOREU(x + j, e0);
        V_STOREU(x + j + VW, e1);
        s0 = V_ADD(s0, e0);
        s1 = V_ADD(s1, e1);
    }
    for (; j < n; j += VW) {
        float buf[VW];
        const int t = n - j < VW ? (int)(n - j) : VW;
        for (int u = 0; u < VW; u++) buf[u] = u < t ? x[j + u] : -INFINITY;
        VEC e0 = V_MUL(V_EXP(V_SUB(V_LOADU(buf), vs)), vm);
        V_STOREU(buf, e0);
        memcpy(x + j, buf, sizeof(float) * (size_t)t);
        s0 = V_ADD(s0, e0);
    }
    return V_HSUM(V_ADD(s0, s1));
}

static float FS(row_exp_sum)(float *s, int n, float msub) { return FS(exp_sub_mul)(s, n, msub, 1.0f); }

static void FS(exp_scale)(float *x, int64_t n, float msub, float mul) { (void)FS(exp_sub_mul)(x, n, msub, mul); }

FS_INLINE void FS(row_pv_chunk)(const int NVE, float *acc, const float *p, const float *V, int64_t vsj, int nk,
                                int lastn) {
    VEC a[2][4];
    const VMASK tm = V_TAILMASK(lastn);
#pragma GCC unroll 4
    for (int n = 0; n < NVE; n++) a[0][n] = a[1][n] = V_ZERO();
    int j = 0;
    for (; j + 2 <= nk; j += 2) {
        const float *v0 = V + j * vsj, *v1 = v0 + vsj;
        const VEC p0 = V_SET1(p[j]), p1 = V_SET1(p[j + 1]);
#pragma GCC unroll 4
        for (int n = 0; n < NVE; n++) {
            if (n < NVE - 1) {
                a[0][n] = V_FMA(p0, V_LOADU(v0 + n * VW), a[0][n]);
                a[1][n] = V_FMA(p1, V_LOADU(v1 + n * VW), a[1][n]);
            } else {
                a[0][n] = V_FMA(p0, V_LOADU_M(v0 + n * VW, tm), a[0][n]);
                a[1][n] = V_FMA(p1, V_LOADU_M(v1 + n * VW, tm), a[1][n]);
            }
        }
    }
    if (j < nk) {
        const float *v0 = V + j * vsj;
        const VEC p0 = V_SET1(p[j]);
#pragma GCC unroll 4
        for (int n = 0; n < NVE; n++) {
            if (n < NVE - 1) a[0][n] = V_FMA(p0, V_LOADU(v0 + n * VW), a[0][n]);
            else a[0][n] = V_FMA(p0, V_LOADU_M(v0 + n * VW, tm), a[0][n]);
        }
    }
#pragma GCC unroll 4
    for (int n = 0; n < NVE; n++) {
        float buf[VW];
        V_STOREU(buf, V_ADD(a[0][n], a[1][n]));
        const int t = n < NVE - 1 ? VW : lastn;
        memcpy(acc + n * VW, buf, sizeof(float) * (size_t)t);
    }
}

static void FS(row_pv)(float *acc, const float *p, const float *V, int64_t vsj, int nk, int64_t Dv) {
    for (int64_t e = 0; e < Dv; e += 4 * VW) {
        const int64_t ne = Dv - e < 4 * VW ? Dv - e : 4 * VW;
        const int nve = (int)((ne + VW - 1) / VW);
        const int lastn = (int)(ne - (int64_t)(nve - 1) * VW);
        switch (nve) {
        case 1: FS(row_pv_chunk)(1, acc + e, p, V + e, vsj, nk, lastn); break;
        case 2: FS(row_pv_chunk)(2, acc + e, p, V + e, vsj, nk, lastn); break;
        case 3: FS(row_pv_chunk)(3, acc + e, p, V + e, vsj, nk, lastn); break;
        default: FS(row_pv_chunk)(4, acc + e, p, V + e, vsj, nk, lastn); break;
        }
    }
}

/* ------------------------------------------------------------------ transposing pack / store */

static void FS(pack_qt)(float *QT, int ld, int nq, int nqp, const float *q, int64_t qsi, int64_t D, float scale) {
    const VEC vs = V_SET1(scale);
    for (int i0 = 0; i0 < nqp; i0 += VW) {
        const int rows = nq - i0 < 0 ? 0 : nq - i0 > VW ? VW : nq - i0;
        for (int64_t d0 = 0; d0 < D; d0 += VW) {
            const int dn = D - d0 < VW ? (int)(D - d0) : VW;
            const VMASK mk = V_TAILMASK(dn);
            VEC r[VW];
#pragma GCC unroll 16
            for (int u = 0; u < VW; u++) r[u] = u < rows ? V_LOADU_M(q + (i0 + u) * qsi + d0, mk) : V_ZERO();
            V_TRANSPOSE(r);
#pragma GCC unroll 16
            for (int u = 0; u < VW; u++)
                if (u < dn) V_STORE(QT + (d0 + u) * ld + i0, V_MUL(r[u], vs));
        }
    }
}

static void FS(store_out)(float *o, int64_t osi, const float *OT, int ld, int nq, const float *l, int64_t Dv) {
    for (int i0 = 0; i0 < nq; i0 += VW) {
        const int rows = nq - i0 > VW ? VW : nq - i0;
        const VEC inv = V_INV_POS(V_LOAD(l + i0)); /* 1/l, or 0 where l == 0 (empty rows) */
        for (int64_t e0 = 0; e0 < Dv; e0 += VW) {
            const int en = Dv - e0 < VW ? (int)(Dv - e0) : VW;
            const VMASK mk = V_TAILMASK(en);
            VEC r[VW];
#pragma GCC unroll 16
            for (int u = 0; u < VW; u++) r[u] = u < en ? V_MUL(V_LOAD(OT + (e0 + u) * ld + i0), inv) : V_ZERO();
            V_TRANSPOSE(r);
#pragma GCC unroll 16
            for (int u = 0; u < VW; u++)
                if (u < rows) V_STOREU_M(o + (i0 + u) * osi + e0, mk, r[u]);
        }
    }
}

static const attn__fused_kernels FS(kernels) = {
    FS_PATH,         FS_NAME,     FS(s_block),   FS(softmax_block), FS(pv_block),
    FS(row_dots),    FS(row_max), FS(row_exp_sum), FS(row_pv),      FS(exp_scale),
    FS(pack_qt),     FS(store_out), FS_EXP_N,
};
