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
