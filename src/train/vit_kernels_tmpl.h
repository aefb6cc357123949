/* Kernels of the ViT trainer's fast paths (src/train/vit_kernels.c), compiled twice: as portable
 * C (VK_FN(x) = x##_portable) and for AVX2 + FMA (x##_avx2, used only after the CPU check). The
 * loops are written for the vectoriser (omp simd); both compilations compute the same formulas
 * in float32 and agree to float rounding (the FMA contraction differs). No include guard. */

/* GELU (erf form) backward: dx = dy · (Φ(x) + x·φ(x)), with erf from Abramowitz & Stegun 7.1.26
 * (|error| <= 1.5e-7) whose exp(-z²) is φ's exp(-x²/2): one exp and one division an element. */
static void VK_FN(attn__vk_gelu_bwd)(float *restrict dx, const float *restrict dy, const float *restrict x, int64_t n) {
    VK_SIMD
    for (int64_t i = 0; i < n; i++) {
        const float xi = x[i], ax = xi < 0.0f ? -xi : xi, z = ax * 0.70710678118654752f;
        const float t = 1.0f / (1.0f + 0.3275911f * z);
        const float e = attn__exp_scalar(-0.5f * xi * xi);
        const float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
        const float erfa = 1.0f - poly * e; /* erf(|x|/√2) */
        const float cdf = 0.5f + 0.5f * (xi < 0.0f ? -erfa : erfa);
        dx[i] = dy[i] * (cdf + xi * e * 0.39894228040143268f);
    }
}

/* a row's mean and 1/sqrt(var + eps) over its E values (two passes, float32; 0 when var + eps <= 0) */
static inline void VK_FN(attn__vk_ln_stats)(float *mean, float *rstd, const float *restrict xr, float invE, float eps, int64_t E) {
    float s = 0.0f;
    VK_SIMD_RED(s)
    for (int64_t e = 0; e < E; e++) s += xr[e];
    const float m = s * invE;
    float v = 0.0f;
    VK_SIMD_RED(v)
    for (int64_t e = 0; e < E; e++) v += (xr[e] - m) * (xr[e] - m);
    const float var = v * invE;
    *mean = m;
    *rstd = var + eps > 0.0f ? 1.0f / sqrtf(var + eps) : 0.0f;
}

/* LayerNorm forward of rows [r0, r1) of [.., E]: y = (x - mean)·rstd·γ + β (two passes, float32) */
static void VK_FN(attn__vk_ln_fwd_rows)(float *restrict y, const float *restrict x, const float *restrict gamma,
                                        const float *restrict beta, float eps, int64_t E, int64_t r0, int64_t r1) {
    const float invE = 1.0f / (float)E;
    for (int64_t m = r0; m < r1; m++) {
        const float *restrict xr = x + m * E;
        float *restrict o = y + m * E;
        float mean, rstd;
        VK_FN(attn__vk_ln_stats)(&mean, &rstd, xr, invE, eps, E);
        VK_SIMD
        for (int64_t e = 0; e < E; e++) o[e] = (xr[e] - mean) * rstd * gamma[e] + beta[e];
    }
}

/* LayerNorm backward of rows [r0, r1) of [.., E]: dx = rstd·(g - mean(g) - x̂·mean(g·x̂)) with
 * g = dy·γ, plus res (the residual branch's gradient) when res != NULL; pg / pb get the rows'
 * sums of dy·x̂ and dy (dγ, dβ of the block). */
static void VK_FN(attn__vk_ln_bwd_rows)(float *restrict dx, float *restrict pg, float *restrict pb, const float *restrict dy,
                                        const float *restrict x, const float *restrict gamma, const float *restrict res,
                                        float eps, int64_t E, int64_t r0, int64_t r1) {
    for (int64_t e = 0; e < E; e++) pg[e] = 0.0f, pb[e] = 0.0f;
    const float invE = 1.0f / (float)E;
    for (int64_t m = r0; m < r1; m++) {
        const float *restrict xr = x + m * E, *restrict gr = dy + m * E;
        float mean, rstd;
        VK_FN(attn__vk_ln_stats)(&mean, &rstd, xr, invE, eps, E);
        float mg = 0.0f, mgx = 0.0f;
        VK_SIMD_RED2(mg, mgx)
        for (int64_t e = 0; e < E; e++) {
            const float xh = (xr[e] - mean) * rstd, gg = gr[e] * gamma[e];
            mg += gg, mgx += gg * xh;
            pg[e] += gr[e] * xh, pb[e] += gr[e];
        }
        mg *= invE, mgx *= invE;
        float *restrict o = dx + m * E;
        if (res) {
            const float *restrict rr = res + m * E;
            VK_SIMD
            for (int64_t e = 0; e < E; e++) o[e] = rr[e] + rstd * (gr[e] * gamma[e] - mg - (xr[e] - mean) * rstd * mgx);
        } else {
            VK_SIMD
            for (int64_t e = 0; e < E; e++) o[e] = rstd * (gr[e] * gamma[e] - mg - (xr[e] - mean) * rstd * mgx);
        }
    }
}

/* y[0..n) = Σ_{r<R} c[r·cs]·X[r·ldx + 0..n): a row of a small product, 32 or 8 columns at a
 * time with the sums in vector registers (even and odd r in separate sums: independent FMA
 * chains), no horizontal sums */
static inline void VK_FN(attn__vk_lincomb)(float *restrict y, const float *restrict c, int64_t cs, const float *restrict X,
                                           int64_t ldx, int64_t R, int64_t n) {
    int64_t j0 = 0;
    for (; j0 + 32 <= n; j0 += 32) {
        attn__vk_v8 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, b0 = {0}, b1 = {0}, b2 = {0}, b3 = {0};
        int64_t r = 0;
        for (; r + 1 < R; r += 2) {
            const float *x0 = X + r * ldx + j0, *x1 = x0 + ldx;
            const attn__vk_v8 c0 = attn__vk_splat(c[r * cs]), c1 = attn__vk_splat(c[(r + 1) * cs]);
            a0 = VK_VFMA(c0, attn__vk_ld(x0), a0), a1 = VK_VFMA(c0, attn__vk_ld(x0 + 8), a1);
            a2 = VK_VFMA(c0, attn__vk_ld(x0 + 16), a2), a3 = VK_VFMA(c0, attn__vk_ld(x0 + 24), a3);
            b0 = VK_VFMA(c1, attn__vk_ld(x1), b0), b1 = VK_VFMA(c1, attn__vk_ld(x1 + 8), b1);
            b2 = VK_VFMA(c1, attn__vk_ld(x1 + 16), b2), b3 = VK_VFMA(c1, attn__vk_ld(x1 + 24), b3);
        }
        if (r < R) {
            const float *x0 = X + r * ldx + j0;
            const attn__vk_v8 c0 = attn__vk_splat(c[r * cs]);
            a0 = VK_VFMA(c0, attn__vk_ld(x0), a0), a1 = VK_VFMA(c0, attn__vk_ld(x0 + 8), a1);
            a2 = VK_VFMA(c0, attn__vk_ld(x0 + 16), a2), a3 = VK_VFMA(c0, attn__vk_ld(x0 + 24), a3);
        }
        attn__vk_st(y + j0, a0 + b0), attn__vk_st(y + j0 + 8, a1 + b1);
        attn__vk_st(y + j0 + 16, a2 + b2), attn__vk_st(y + j0 + 24, a3 + b3);
    }
    for (; j0 + 8 <= n; j0 += 8) {
        attn__vk_v8 a0 = {0}, b0 = {0};
        int64_t r = 0;
        for (; r + 1 < R; r += 2) {
            const float *x0 = X + r * ldx + j0;
            a0 = VK_VFMA(attn__vk_splat(c[r * cs]), attn__vk_ld(x0), a0);
            b0 = VK_VFMA(attn__vk_splat(c[(r + 1) * cs]), attn__vk_ld(x0 + ldx), b0);
        }
        if (r < R) a0 = VK_VFMA(attn__vk_splat(c[r * cs]), attn__vk_ld(X + r * ldx + j0), a0);
        attn__vk_st(y + j0, a0 + b0);
    }
    for (int64_t j = j0; j < n; j++) {
        float acc = 0.0f;
        for (int64_t r = 0; r < R; r++) acc = VK_FMA(c[r * cs], X[r * ldx + j], acc);
        y[j] = acc;
    }
}

/* XT[d·Tp + j] = x[j·ld + d] for j < T, 0 for T <= j < Tp */
static inline void VK_FN(attn__vk_pack_t)(float *restrict XT, const float *restrict x, int64_t T, int64_t Tp, int64_t D, int64_t ld) {
    int64_t j0 = 0, d0 = 0;
#ifdef VK_AVX2
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

/* Y[i·ldy + 0..n) = Σ_{r<R} A[i·ai + r·ar]·X[r·ldx + 0..n) for i < M: a small product, rows 4 at a time
 * so that each load of X serves 4 rows (register blocks of 4 rows x 16 columns: 8 sums, one FMA
 * chain each, r in order), the last M % 4 rows by lincomb. A's strides (ai, ar) read it as it lies
 * or transposed. */
static inline void VK_FN(attn__vk_prod)(float *restrict Y, int64_t ldy, const float *restrict A, int64_t ai, int64_t ar,
                                        const float *restrict X, int64_t ldx, int64_t M, int64_t R, int64_t n) {
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) {
        const float *a0 = A + i * ai, *a1 = a0 + ai, *a2 = a1 + ai, *a3 = a2 + ai;
        float *y0 = Y + i * ldy, *y1 = y0 + ldy, *y2 = y1 + ldy, *y3 = y2 + ldy;
        int64_t j0 = 0;
        for (; j0 + 16 <= n; j0 += 16) {
            attn__vk_v8 c00 = {0}, c01 = {0}, c10 = {0}, c11 = {0}, c20 = {0}, c21 = {0}, c30 = {0}, c31 = {0};
            for (int64_t r = 0; r < R; r++) {
                const float *x = X + r * ldx + j0;
                const attn__vk_v8 x0 = attn__vk_ld(x), x1 = attn__vk_ld(x + 8);
                const attn__vk_v8 s0 = attn__vk_splat(a0[r * ar]), s1 = attn__vk_splat(a1[r * ar]);
                const attn__vk_v8 s2 = attn__vk_splat(a2[r * ar]), s3 = attn__vk_splat(a3[r * ar]);
                c00 = VK_VFMA(s0, x0, c00), c01 = VK_VFMA(s0, x1, c01), c10 = VK_VFMA(s1, x0, c10), c11 = VK_VFMA(s1, x1, c11);
                c20 = VK_VFMA(s2, x0, c20), c21 = VK_VFMA(s2, x1, c21), c30 = VK_VFMA(s3, x0, c30), c31 = VK_VFMA(s3, x1, c31);
            }
            attn__vk_st(y0 + j0, c00), attn__vk_st(y0 + j0 + 8, c01), attn__vk_st(y1 + j0, c10), attn__vk_st(y1 + j0 + 8, c11);
            attn__vk_st(y2 + j0, c20), attn__vk_st(y2 + j0 + 8, c21), attn__vk_st(y3 + j0, c30), attn__vk_st(y3 + j0 + 8, c31);
        }
        for (; j0 + 8 <= n; j0 += 8) {
            attn__vk_v8 c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0};
            for (int64_t r = 0; r < R; r++) {
                const attn__vk_v8 x0 = attn__vk_ld(X + r * ldx + j0);
                c0 = VK_VFMA(attn__vk_splat(a0[r * ar]), x0, c0), c1 = VK_VFMA(attn__vk_splat(a1[r * ar]), x0, c1);
                c2 = VK_VFMA(attn__vk_splat(a2[r * ar]), x0, c2), c3 = VK_VFMA(attn__vk_splat(a3[r * ar]), x0, c3);
            }
            attn__vk_st(y0 + j0, c0), attn__vk_st(y1 + j0, c1), attn__vk_st(y2 + j0, c2), attn__vk_st(y3 + j0, c3);
        }
        for (int64_t j = j0; j < n; j++) {
            float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
            for (int64_t r = 0; r < R; r++) {
                const float x = X[r * ldx + j];
                s0 = VK_FMA(a0[r * ar], x, s0), s1 = VK_FMA(a1[r * ar], x, s1);
                s2 = VK_FMA(a2[r * ar], x, s2), s3 = VK_FMA(a3[r * ar], x, s3);
            }
            y0[j] = s0, y1[j] = s1, y2[j] = s2, y3[j] = s3;
        }
    }
    for (; i < M; i++) VK_FN(attn__vk_lincomb)(Y + i * ldy, A + i * ai, ar, X, ldx, R, n);
}

/* Unmasked attention of one (image, head) whose T rows of q, k, v sit ld floats apart and those of
 * out ldo apart (the [B, T, ..] buffers at column h·D): out = softmax(scale·q·kᵀ)·v, lse = the
 * rows' log-sum-exp of scale·q·kᵀ; S = q·kᵀ and P·v as blocked products (prod) over kᵀ padded to
 * Tp = T rounded up to 8 columns. W: the scratch of vit_kernels.c's VK_SCRATCH (64-byte aligned). */
static void VK_FN(attn__vk_attn_fwd)(float *out, float *lse, const float *q, const float *k, const float *v, float *W,
                                     int64_t T, int64_t D, int64_t ld, int64_t ldo, float scale) {
    const int64_t Tp = (T + 7) & ~(int64_t)7;
    float *KT = W, *S = W + D * Tp;
    VK_FN(attn__vk_pack_t)(KT, k, T, Tp, D, ld);
    VK_FN(attn__vk_prod)(S, Tp, q, ld, 1, KT, Tp, T, D, Tp);
    for (int64_t i = 0; i < T; i++) {
        float *restrict pr = S + i * Tp;
        float m = -INFINITY;
        for (int64_t j = 0; j < T; j++) m = pr[j] > m ? pr[j] : m;
        m *= scale;
        float l = 0.0f;
        VK_SIMD_RED(l)
        for (int64_t j = 0; j < T; j++) {
            pr[j] = attn__exp_scalar(scale * pr[j] - m);
            l += pr[j];
        }
        const float inv = 1.0f / l;
        VK_SIMD
        for (int64_t j = 0; j < T; j++) pr[j] *= inv;
        lse[i] = m + logf(l);
    }
    VK_FN(attn__vk_prod)(out, ldo, S, Tp, 1, v, ld, T, T, D);
}

/* Its backward (FlashAttention's formulas, P recomputed from lse): Δ_i = dO_i·O_i (in double),
 * dV = Pᵀ·dO, dS = P ⊙ (dO·Vᵀ − Δ), dQ = scale·dS·K, dK = scale·dSᵀ·Q, every product blocked (prod);
 * dq, dk, dv rows ld apart, dout's ldo. W: VK_SCRATCH. */
static void VK_FN(attn__vk_attn_bwd)(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                                     const float *out, const float *lse, const float *dout, float *W, int64_t T, int64_t D,
                                     int64_t ld, int64_t ldo, float scale) {
    const int64_t Tp = (T + 7) & ~(int64_t)7;
    float *KT = W, *VT = KT + D * Tp, *P = VT + D * Tp, *S = P + T * Tp;
    VK_FN(attn__vk_pack_t)(KT, k, T, Tp, D, ld);
    VK_FN(attn__vk_pack_t)(VT, v, T, Tp, D, ld);
    VK_FN(attn__vk_prod)(P, Tp, q, ld, 1, KT, Tp, T, D, Tp);     /* q·kᵀ */
    VK_FN(attn__vk_prod)(S, Tp, dout, ldo, 1, VT, Tp, T, D, Tp); /* dO·vᵀ */
    for (int64_t i = 0; i < T; i++) {
        const float *restrict gi = dout + i * ldo, *restrict oi = out + i * ldo;
        float *restrict pr = P + i * Tp, *restrict sr = S + i * Tp;
        double dd = 0.0;
        VK_SIMD_RED(dd)
        for (int64_t d = 0; d < D; d++) dd += (double)gi[d] * oi[d];
        const float delta = (float)dd, li = lse[i];
        VK_SIMD
        for (int64_t j = 0; j < T; j++) {
            pr[j] = attn__exp_scalar(scale * pr[j] - li);
            sr[j] = scale * pr[j] * (sr[j] - delta); /* scale·dS */
        }
    }
    VK_FN(attn__vk_prod)(dq, ld, S, Tp, 1, k, ld, T, T, D);    /* scale·dS·k */
    VK_FN(attn__vk_prod)(dv, ld, P, 1, Tp, dout, ldo, T, T, D); /* Pᵀ·dO */
    VK_FN(attn__vk_prod)(dk, ld, S, 1, Tp, q, ld, T, T, D);    /* scale·dSᵀ·q */
}
