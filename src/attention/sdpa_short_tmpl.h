/* Kernels of short-sequence attention (src/attention/sdpa_short.c), compiled twice: as portable C
 * (SA_FN(x) = x##_portable) and for AVX2 + FMA (x##_avx2, used only after the CPU check). Small
 * products in registers (lincomb: one row; prod: 4 rows sharing each load), the softmax in float32
 * with the exp of core/simd_math.h. Both compilations compute the same formulas and agree to float
 * rounding (the FMA contraction differs). No include guard. */

/* lane-wise max (a > b ? a : b: a NaN in b is kept, in a dropped; the caller checks the scores apart) */
static inline attn__sa_v8 SA_FN(attn__sa_max)(attn__sa_v8 a, attn__sa_v8 b) {
    const attn__sa_i8 m = a > b;
    return (attn__sa_v8)((m & (attn__sa_i8)a) | (~m & (attn__sa_i8)b));
}

/* y[0..n) = Σ_{r<R} (α·c[r·cs])·X[r·ldx + 0..n): a row of a small product, 32 or 8 columns at a
 * time with the sums in vector registers (even and odd r in separate sums: independent FMA
 * chains), no horizontal sums */
static inline void SA_FN(attn__sa_lincomb)(float *restrict y, const float *restrict c, int64_t cs, float alpha, const float *restrict X,
                                           int64_t ldx, int64_t R, int64_t n) {
    int64_t j0 = 0;
    for (; j0 + 32 <= n; j0 += 32) {
        attn__sa_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
        int64_t r = 0;
        for (; r + 1 < R; r += 2) {
            const float *x0 = X + r * ldx + j0, *x1 = x0 + ldx;
            const attn__sa_v8 c0 = attn__sa_splat(alpha * c[r * cs]), c1 = attn__sa_splat(alpha * c[(r + 1) * cs]);
            a0 = SA_VFMA(c0, attn__sa_ld(x0), a0), a1 = SA_VFMA(c0, attn__sa_ld(x0 + 8), a1);
            a2 = SA_VFMA(c0, attn__sa_ld(x0 + 16), a2), a3 = SA_VFMA(c0, attn__sa_ld(x0 + 24), a3);
            b0 = SA_VFMA(c1, attn__sa_ld(x1), b0), b1 = SA_VFMA(c1, attn__sa_ld(x1 + 8), b1);
            b2 = SA_VFMA(c1, attn__sa_ld(x1 + 16), b2), b3 = SA_VFMA(c1, attn__sa_ld(x1 + 24), b3);
        }
        if (r < R) {
            const float *x0 = X + r * ldx + j0;
            const attn__sa_v8 c0 = attn__sa_splat(alpha * c[r * cs]);
            a0 = SA_VFMA(c0, attn__sa_ld(x0), a0), a1 = SA_VFMA(c0, attn__sa_ld(x0 + 8), a1);
            a2 = SA_VFMA(c0, attn__sa_ld(x0 + 16), a2), a3 = SA_VFMA(c0, attn__sa_ld(x0 + 24), a3);
        }
        attn__sa_st(y + j0, a0 + b0), attn__sa_st(y + j0 + 8, a1 + b1);
        attn__sa_st(y + j0 + 16, a2 + b2), attn__sa_st(y + j0 + 24, a3 + b3);
    }
    for (; j0 + 8 <= n; j0 += 8) {
        attn__sa_v8 a0 = {0}, b0 = {0};
        int64_t r = 0;
        for (; r + 1 < R; r += 2) {
            const float *x0 = X + r * ldx + j0;
            a0 = SA_VFMA(attn__sa_splat(alpha * c[r * cs]), attn__sa_ld(x0), a0);
            b0 = SA_VFMA(attn__sa_splat(alpha * c[(r + 1) * cs]), attn__sa_ld(x0 + ldx), b0);
        }
        if (r < R) a0 = SA_VFMA(attn__sa_splat(alpha * c[r * cs]), attn__sa_ld(X + r * ldx + j0), a0);
        attn__sa_st(y + j0, a0 + b0);
    }
    for (int64_t j = j0; j < n; j++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < R; r++) acc = SA_FMA(alpha * c[r * cs], X[r * ldx + j], acc);
        y[j] = acc;
    }
}

/* XT[d·Tp + j] = x[j·ld + d] for j < T, 0 for T <= j < Tp */
static inline void SA_FN(attn__sa_pack_t)(float *restrict XT, const float *restrict x, int64_t T, int64_t Tp, int64_t D, int64_t ld) {
    int64_t j0 = 0, d0 = 0;
#ifdef SA_AVX2
    for (; j0 + 8 <= T; j0 += 8) /* 8 x 8 blocks by the unpack / shuffle / permute transpose */
        for (d0 = 0; d0 + 8 <= D; d0 += 8) {
            const float *b = x + j0 * ld + d0;
            __m256 r0 = _mm256_loadu_ps(b), r1 = _mm256_loadu_ps(b + ld), r2 = _mm256_loadu_ps(b + 2 * ld),
                   r3 = _mm256_loadu_ps(b + 3 * ld), r4 = _mm256_loadu_ps(b + 4 * ld), r5 = _mm256_loadu_ps(b + 5 * ld),
                   r6 = _mm256_loadu_ps(b + 6 * ld), r7 = _mm256_loadu_ps(b + 7 * ld);
            __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1), t2 = _mm256_unpacklo_ps(r2, r3),
                   t3 = _mm256_unpackhi_ps(r2, r3), t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
                   t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
            r0 = _mm256_shuffle_ps(t0, t2, 0x44), r1 = _mm256_shuffle_ps(t0, t2, 0xEE), r2 = _mm256_shuffle_ps(t1, t3, 0x44);
            r3 = _mm256_shuffle_ps(t1, t3, 0xEE), r4 = _mm256_shuffle_ps(t4, t6, 0x44), r5 = _mm256_shuffle_ps(t4, t6, 0xEE);
            r6 = _mm256_shuffle_ps(t5, t7, 0x44), r7 = _mm256_shuffle_ps(t5, t7, 0xEE);
            float *o = XT + d0 * Tp + j0;
            _mm256_storeu_ps(o, _mm256_permute2f128_ps(r0, r4, 0x20));
            _mm256_storeu_ps(o + Tp, _mm256_permute2f128_ps(r1, r5, 0x20));
            _mm256_storeu_ps(o + 2 * Tp, _mm256_permute2f128_ps(r2, r6, 0x20));
            _mm256_storeu_ps(o + 3 * Tp, _mm256_permute2f128_ps(r3, r7, 0x20));
            _mm256_storeu_ps(o + 4 * Tp, _mm256_permute2f128_ps(r0, r4, 0x31));
            _mm256_storeu_ps(o + 5 * Tp, _mm256_permute2f128_ps(r1, r5, 0x31));
            _mm256_storeu_ps(o + 6 * Tp, _mm256_permute2f128_ps(r2, r6, 0x31));
            _mm256_storeu_ps(o + 7 * Tp, _mm256_permute2f128_ps(r3, r7, 0x31));
        }
    if (d0 < D) j0 = 0, d0 = 0; /* D not a multiple of 8: the loop below does everything */
#else
    (void)d0;
#endif
    for (int64_t j = j0; j < T; j++)
        for (int64_t d = 0; d < D; d++) XT[d * Tp + j] = x[j * ld + d];
    for (int64_t d = 0; d < D; d++)
        for (int64_t j = T; j < Tp; j++) XT[d * Tp + j] = 0.0f;
}

/* Y[i·ldy + 0..n) = Σ_{r<R} (α·A[i·ai + r·ar])·X[r·ldx + 0..n) for i < M: a small product, rows 4 at a time
 * so that each load of X serves 4 rows (register blocks of 4 rows x 16 columns: 8 sums, one FMA
 * chain each, r in order), the last M % 4 rows by lincomb. A's strides (ai, ar) read it as it lies
 * or transposed. */
static inline void SA_FN(attn__sa_prod)(float *restrict Y, int64_t ldy, const float *restrict A, int64_t ai, int64_t ar, float alpha,
                                        const float *restrict X, int64_t ldx, int64_t M, int64_t R, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) {
        const float *a0 = A + i * ai, *a1 = a0 + ai, *a2 = a1 + ai, *a3 = a2 + ai;
        float *y0 = Y + i * ldy, *y1 = y0 + ldy, *y2 = y1 + ldy, *y3 = y2 + ldy;
        int64_t j0 = 0;
        for (; j0 + 16 <= n; j0 += 16) {
            attn__sa_v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
            for (int64_t r = 0; r < R; r++) {
                const float *x = X + r * ldx + j0;
                const attn__sa_v8 x0 = attn__sa_ld(x), x1 = attn__sa_ld(x + 8);
                const attn__sa_v8 s0 = attn__sa_splat(alpha * a0[r * ar]), s1 = attn__sa_splat(alpha * a1[r * ar]);
                const attn__sa_v8 s2 = attn__sa_splat(alpha * a2[r * ar]), s3 = attn__sa_splat(alpha * a3[r * ar]);
                c00 = SA_VFMA(s0, x0, c00), c01 = SA_VFMA(s0, x1, c01), c10 = SA_VFMA(s1, x0, c10), c11 = SA_VFMA(s1, x1, c11);
                c20 = SA_VFMA(s2, x0, c20), c21 = SA_VFMA(s2, x1, c21), c30 = SA_VFMA(s3, x0, c30), c31 = SA_VFMA(s3, x1, c31);
            }
            attn__sa_st(y0 + j0, c00), attn__sa_st(y0 + j0 + 8, c01), attn__sa_st(y1 + j0, c10), attn__sa_st(y1 + j0 + 8, c11);
            attn__sa_st(y2 + j0, c20), attn__sa_st(y2 + j0 + 8, c21), attn__sa_st(y3 + j0, c30), attn__sa_st(y3 + j0 + 8, c31);
        }
        for (; j0 + 8 <= n; j0 += 8) {
            attn__sa_v8 c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            for (int64_t r = 0; r < R; r++) {
                const attn__sa_v8 x0 = attn__sa_ld(X + r * ldx + j0);
                c0 = SA_VFMA(attn__sa_splat(alpha * a0[r * ar]), x0, c0), c1 = SA_VFMA(attn__sa_splat(alpha * a1[r * ar]), x0, c1);
                c2 = SA_VFMA(attn__sa_splat(alpha * a2[r * ar]), x0, c2), c3 = SA_VFMA(attn__sa_splat(alpha * a3[r * ar]), x0, c3);
            }
            attn__sa_st(y0 + j0, c0), attn__sa_st(y1 + j0, c1), attn__sa_st(y2 + j0, c2), attn__sa_st(y3 + j0, c3);
        }
        for (int64_t j = j0; j < n; j++) {
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
            for (int64_t r = 0; r < R; r++) {
                const float x = X[r * ldx + j];
                s0 = SA_FMA(alpha * a0[r * ar], x, s0), s1 = SA_FMA(alpha * a1[r * ar], x, s1);
                s2 = SA_FMA(alpha * a2[r * ar], x, s2), s3 = SA_FMA(alpha * a3[r * ar], x, s3);
            }
            y0[j] = s0, y1[j] = s1, y2[j] = s2, y3[j] = s3;
        }
    }
    for (; i < M; i++) SA_FN(attn__sa_lincomb)(Y + i * ldy, A + i * ai, ar, alpha, X, ldx, R, n);
}

/* Unmasked attention of one (batch, head): Lq query rows (ldq floats apart) over Lk keys and values
 * (ldk / ldv apart), head sizes D (q, k) and Dv (v, out): out (rows ldo apart) = softmax(scale·q·kᵀ)·v
 * and, when lse != NULL, lse[i·ls] = row i's log-sum-exp of scale·q·kᵀ; when wt != NULL, the weights
 * P[i, j] at wt[i·wrs + j·wcs]. S = q·kᵀ and P·v are
 * blocked products (prod) over kᵀ padded to Lkp = Lk rounded up to 8 columns, the scale applied to q
 * as the fused kernel does. Returns 1 when a score (scale·q)·k is NaN or inf (out is then undefined;
 * the fused kernel checks the same scores), else 0. W: attn__sa_fwd_floats(Lq, Lk, D) floats (64-byte aligned). */
static int SA_FN(attn__sa_attn_fwd)(float *out, int64_t ldo, float *lse, int64_t ls, float *wt, int64_t wrs, int64_t wcs,
                                    const float *q, int64_t ldq, const float *k, int64_t ldk, const float *v, int64_t ldv, float *W,
                                    int64_t Lq, int64_t Lk, int64_t D, int64_t Dv, float scale) {
    const int64_t Tp = (Lk + 7) & ~(int64_t)7;
    float *KT = W, *S = W + D * Tp;
    SA_FN(attn__sa_pack_t)(KT, k, Lk, Tp, D, ldk);
    SA_FN(attn__sa_prod)(S, Tp, q, ldq, 1, scale, KT, Tp, Lq, D, Tp); /* (scale·q)·kᵀ, as the fused kernel scales q */
    /* the softmax on whole rows of Tp (a multiple of 8) in vectors: the padding columns as -inf (exp 0) */
    const attn__sa_v8 zero = {0};
    attn__sa_v8 vchk = zero; /* NaN when a score is NaN or inf (inf·0; the padding holds q·0 = 0) */
    for (int64_t i = 0; i < Lq; i++) {
        float *restrict pr = S + i * Tp;
        for (int64_t j = 0; j < Tp; j += 8) vchk += attn__sa_ld(pr + j) * zero;
        for (int64_t j = Lk; j < Tp; j++) pr[j] = -INFINITY;
        attn__sa_v8 vm = attn__sa_splat(-INFINITY);
        for (int64_t j = 0; j < Tp; j += 8) vm = SA_FN(attn__sa_max)(vm, attn__sa_ld(pr + j));
        float m = vm[0];
        for (int k8 = 1; k8 < 8; k8++) m = vm[k8] > m ? vm[k8] : m;
        const attn__sa_v8 vmx = attn__sa_splat(m);
        attn__sa_v8 vl = zero;
        for (int64_t j = 0; j < Tp; j += 8) {
            const attn__sa_v8 e = SA_EXP8(attn__sa_ld(pr + j) - vmx);
            attn__sa_st(pr + j, e);
            vl += e;
        }
        const float l = ((vl[0] + vl[1]) + (vl[2] + vl[3])) + ((vl[4] + vl[5]) + (vl[6] + vl[7]));
        const attn__sa_v8 vinv = attn__sa_splat(1.0f / l);
        for (int64_t j = 0; j < Tp; j += 8) attn__sa_st(pr + j, attn__sa_ld(pr + j) * vinv);
        if (lse) lse[i * ls] = m + logf(l);
        if (wt)
            for (int64_t j = 0; j < Lk; j++) wt[i * wrs + j * wcs] = pr[j];
    }
    SA_FN(attn__sa_prod)(out, ldo, S, Tp, 1, 1.0f, v, ldv, Lq, Lk, Dv);
    int bad = 0;
    for (int k8 = 0; k8 < 8; k8++) bad |= vchk[k8] != vchk[k8];
    return bad;
}

/* The backward of a self-attention item (Lq = Lk = T, Dv = D; q, k, v, dq, dk, dv rows ld apart, out
 * and dout ldo apart), FlashAttention's formulas with P recomputed from lse: Δ_i = dO_i·O_i (in double),
 * dV = Pᵀ·dO, dS = P ⊙ (dO·Vᵀ − Δ), dQ = scale·dS·K, dK = scale·dSᵀ·Q, every product blocked (prod);
 * W: attn__sa_bwd_floats(T, D) floats. */
static void SA_FN(attn__sa_attn_bwd)(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                                     const float *out, const float *lse, const float *dout, float *W, int64_t T, int64_t D,
                                     int64_t ld, int64_t ldo, float scale) {
    const int64_t Tp = (T + 7) & ~(int64_t)7;
    float *KT = W, *VT = KT + D * Tp, *P = VT + D * Tp, *S = P + T * Tp;
    SA_FN(attn__sa_pack_t)(KT, k, T, Tp, D, ld);
    SA_FN(attn__sa_pack_t)(VT, v, T, Tp, D, ld);
    SA_FN(attn__sa_prod)(P, Tp, q, ld, 1, scale, KT, Tp, T, D, Tp); /* (scale·q)·kᵀ, as the forward */
    SA_FN(attn__sa_prod)(S, Tp, dout, ldo, 1, 1.0f, VT, Tp, T, D, Tp); /* dO·vᵀ */
    for (int64_t i = 0; i < T; i++) {
        const float *restrict gi = dout + i * ldo, *restrict oi = out + i * ldo;
        float *restrict pr = P + i * Tp, *restrict sr = S + i * Tp;
        double dd = 0.0;
        SA_SIMD_RED(dd)
        for (int64_t d = 0; d < D; d++) dd += (double)gi[d] * oi[d];
        const float delta = (float)dd, li = lse[i];
        const attn__sa_v8 vs = attn__sa_splat(scale), vli = attn__sa_splat(li), vd = attn__sa_splat(delta);
        for (int64_t j = 0; j < Tp; j += 8) { /* whole rows: the padding columns (finite) are never read */
            const attn__sa_v8 pj = SA_EXP8(attn__sa_ld(pr + j) - vli);
            attn__sa_st(pr + j, pj);
            attn__sa_st(sr + j, vs * pj * (attn__sa_ld(sr + j) - vd)); /* scale·dS */
        }
    }
    SA_FN(attn__sa_prod)(dq, ld, S, Tp, 1, 1.0f, k, ld, T, T, D);    /* scale·dS·k */
    SA_FN(attn__sa_prod)(dv, ld, P, 1, Tp, 1.0f, dout, ldo, T, T, D); /* Pᵀ·dO */
    SA_FN(attn__sa_prod)(dk, ld, S, 1, Tp, 1.0f, q, ld, T, T, D);    /* scale·dSᵀ·q */
}
