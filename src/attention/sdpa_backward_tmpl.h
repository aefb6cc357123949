/* Tile kernels of the SDPA backward (sdpa_backward.c), included twice by it: once compiled for
 * AVX2 + FMA (target pragma) with BW_FN(x) = x##_avx2 and BW_AVX2 defined (the tile product
 * then uses intrinsics), once as plain C with BW_FN(x) = x##_portable. The other loops are fixed
 * 16-wide over independent lanes (omp simd), so the compiler vectorises them for the target it
 * compiles for; accumulation orders are fixed in the source.
 *
 * Layout: a tile is up to bq query rows x nk keys (nkp = nk rounded up to 16). Row-major
 * SP[i][j] (scores, then P), dPS[i][j] (dP, then dS); KT[d][j], VT[e][j] (keys / values
 * transposed, zero-padded to nkp columns), Qb[i][d], dOb[i][e] (unit rows), Kb[j][d] (keys
 * row-major, d padded to Dp = D rounded up to 16). Padded key columns get P = dS = 0. */

/* C[i*ldc + j] (+)= sum_{t<T} A[i*as + t*at] · Bm[t*ldb + j] for i < M, j < N (N a multiple of
 * 16): four rows at a time share each 16-wide load of Bm. */
#ifdef BW_AVX2
/* AVX2 + FMA: the 4 x 16 block's 8 accumulators stay in ymm registers (GCC keeps plain arrays
 * in memory here and, in ISO C mode, does not contract a*b + c into an FMA). */
static void BW_FN(attn__bw_gemm)(float *C, int64_t ldc, int M, int N, const float *A, int64_t as, int64_t at,
                                 const float *Bm, int64_t ldb, int T, int acc) {
    int i = 0;
    for (; i + 4 <= M; i += 4) {
        const float *a0 = A + i * as, *a1 = a0 + as, *a2 = a1 + as, *a3 = a2 + as;
        for (int j0 = 0; j0 < N; j0 += 16) {
            float *o0 = C + i * ldc + j0, *o1 = o0 + ldc, *o2 = o1 + ldc, *o3 = o2 + ldc;
            __m256 c00, c01, c10, c11, c20, c21, c30, c31;
            if (acc) {
                c00 = _mm256_loadu_ps(o0), c01 = _mm256_loadu_ps(o0 + 8), c10 = _mm256_loadu_ps(o1);
                c11 = _mm256_loadu_ps(o1 + 8), c20 = _mm256_loadu_ps(o2), c21 = _mm256_loadu_ps(o2 + 8);
                c30 = _mm256_loadu_ps(o3), c31 = _mm256_loadu_ps(o3 + 8);
            } else {
                c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = _mm256_setzero_ps();
            }
            for (int t = 0; t < T; t++) {
                const float *bt = Bm + t * ldb + j0;
                const __m256 b0 = _mm256_loadu_ps(bt), b1 = _mm256_loadu_ps(bt + 8);
                __m256 x = _mm256_broadcast_ss(a0 + t * at);
                c00 = _mm256_fmadd_ps(x, b0, c00), c01 = _mm256_fmadd_ps(x, b1, c01);
                x = _mm256_broadcast_ss(a1 + t * at);
                c10 = _mm256_fmadd_ps(x, b0, c10), c11 = _mm256_fmadd_ps(x, b1, c11);
                x = _mm256_broadcast_ss(a2 + t * at);
                c20 = _mm256_fmadd_ps(x, b0, c20), c21 = _mm256_fmadd_ps(x, b1, c21);
                x = _mm256_broadcast_ss(a3 + t * at);
                c30 = _mm256_fmadd_ps(x, b0, c30), c31 = _mm256_fmadd_ps(x, b1, c31);
            }
            _mm256_storeu_ps(o0, c00), _mm256_storeu_ps(o0 + 8, c01), _mm256_storeu_ps(o1, c10);
            _mm256_storeu_ps(o1 + 8, c11), _mm256_storeu_ps(o2, c20), _mm256_storeu_ps(o2 + 8, c21);
            _mm256_storeu_ps(o3, c30), _mm256_storeu_ps(o3 + 8, c31);
        }
    }
    for (; i < M; i++) {
        const float *a0 = A + i * as;
        for (int j0 = 0; j0 < N; j0 += 16) {
            float *o0 = C + i * ldc + j0;
            __m256 c00 = acc ? _mm256_loadu_ps(o0) : _mm256_setzero_ps();
            __m256 c01 = acc ? _mm256_loadu_ps(o0 + 8) : _mm256_setzero_ps();
            for (int t = 0; t < T; t++) {
                const float *bt = Bm + t * ldb + j0;
                const __m256 x = _mm256_broadcast_ss(a0 + t * at);
                c00 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bt), c00);
                c01 = _mm256_fmadd_ps(x, _mm256_loadu_ps(bt + 8), c01);
            }
            _mm256_storeu_ps(o0, c00), _mm256_storeu_ps(o0 + 8, c01);
        }
    }
}
#else
static void BW_FN(attn__bw_gemm)(float *C, int64_t ldc, int M, int N, const float *A, int64_t as, int64_t at,
                                 const float *Bm, int64_t ldb, int T, int acc) {
    int i = 0;
    for (; i + 4 <= M; i += 4) {
        const float *a0 = A + i * as, *a1 = a0 + as, *a2 = a1 + as, *a3 = a2 + as;
        for (int j0 = 0; j0 < N; j0 += 16) {
            float c0[16], c1[16], c2[16], c3[16];
            float *o0 = C + i * ldc + j0, *o1 = o0 + ldc, *o2 = o1 + ldc, *o3 = o2 + ldc;
            BW_SIMD
            for (int u = 0; u < 16; u++) {
                c0[u] = acc ? o0[u] : 0.0f;
                c1[u] = acc ? o1[u] : 0.0f;
                c2[u] = acc ? o2[u] : 0.0f;
                c3[u] = acc ? o3[u] : 0.0f;
            }
            for (int t = 0; t < T; t++) {
                const float *bt = Bm + t * ldb + j0;
                const float x0 = a0[t * at], x1 = a1[t * at], x2 = a2[t * at], x3 = a3[t * at];
                BW_SIMD
                for (int u = 0; u < 16; u++) {
                    c0[u] += x0 * bt[u];
                    c1[u] += x1 * bt[u];
                    c2[u] += x2 * bt[u];
                    c3[u] += x3 * bt[u];
                }
            }
            BW_SIMD
            for (int u = 0; u < 16; u++) {
                o0[u] = c0[u];
                o1[u] = c1[u];
                o2[u] = c2[u];
                o3[u] = c3[u];
            }
        }
    }
    for (; i < M; i++) {
        const float *a0 = A + i * as;
        for (int j0 = 0; j0 < N; j0 += 16) {
            float c0[16];
            float *o0 = C + i * ldc + j0;
            BW_SIMD
            for (int u = 0; u < 16; u++) c0[u] = acc ? o0[u] : 0.0f;
            for (int t = 0; t < T; t++) {
                const float *bt = Bm + t * ldb + j0;
                const float x0 = a0[t * at];
                BW_SIMD
                for (int u = 0; u < 16; u++) c0[u] += x0 * bt[u];
            }
            BW_SIMD
            for (int u = 0; u < 16; u++) o0[u] = c0[u];
        }
    }
}
#endif

/* SP: raw q·k -> P = exp(scale·q·k + mask - lse_i) on the row's visible keys, 0 elsewhere;
 * dPS: dP -> dS = P·(dP - Δ_i). Rows i < nq of the tile at query i0, keys j0 + [0, nk). */
static void BW_FN(attn__bw_probs)(const attn__bwctx *c, float *SP, float *dPS, int ld, int nq, int nk, int64_t b,
                                  int64_t h, int64_t i0, int64_t j0, const int64_t *lo, const int64_t *hi,
                                  const float *lsev, const float *dlv) {
    const attn__mask_view *mv = &c->mv;
    const float scale = c->scale;
    for (int i = 0; i < nq; i++) {
        float *s = SP + (int64_t)i * ld, *dp = dPS + (int64_t)i * ld;
        const float L = lsev[i], dl = dlv[i];
        int64_t a = lo[i] - j0, e = hi[i] - j0;
        a = a < 0 ? 0 : a > nk ? nk : a;
        e = e < a ? a : e > nk ? nk : e;
        if (L == -INFINITY || a >= e) { /* the row sees no key of this tile */
            memset(s, 0, sizeof(float) * (size_t)ld);
            memset(dp, 0, sizeof(float) * (size_t)ld);
            continue;
        }
        if (mv->present) {
            const int64_t mo = b * mv->stride[0] + h * mv->stride[1] + (i0 + i) * mv->stride[2];
            for (int64_t j = a; j < e; j++) {
                const int64_t off = mo + (j0 + j) * mv->stride[3];
                float x;
                if (mv->is_bool) {
                    x = ((const unsigned char *)mv->data)[off] ? s[j] * scale : -INFINITY;
                } else {
                    const float mval = ((const float *)mv->data)[off];
                    x = attn__mask_value_is_masked(mval) ? -INFINITY : s[j] * scale + mval;
                }
                s[j] = attn__exp_scalar(x - L); /* exp(-inf) = 0 */
            }
        } else {
            BW_SIMD
            for (int64_t j = a; j < e; j++) s[j] = attn__exp_scalar(s[j] * scale - L);
        }
        for (int64_t j = 0; j < a; j++) s[j] = 0.0f;
        for (int64_t j = e; j < ld; j++) s[j] = 0.0f;
        BW_SIMD
        for (int j = 0; j < ld; j++) dp[j] = s[j] * (dp[j] - dl);
    }
}

/* Pass 1 item: key block kb of (b, kv head hk): dk and dv of its keys, over the group's query
 * heads and every query block that sees one of its keys. The thread owns these rows of dk / dv. */
static void BW_FN(attn__bw_kv_item)(const attn__bwctx *c, float *scr, int64_t b, int64_t hk, int64_t kb) {
    const int64_t Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    const int64_t j0 = kb * c->bk;
    const int nk = (int)(Lk - j0 < c->bk ? Lk - j0 : c->bk);
    const int nkp = (int)attn__bw_round16((size_t)nk);
    float *cur = scr;
    float *KT = attn__bw_carve(&cur, (size_t)D * nkp), *VT = attn__bw_carve(&cur, (size_t)Dv * nkp);
    float *dKT = attn__bw_carve(&cur, (size_t)D * nkp), *dVT = attn__bw_carve(&cur, (size_t)Dv * nkp);
    float *Qb = attn__bw_carve(&cur, (size_t)c->bq * D), *dOb = attn__bw_carve(&cur, (size_t)c->bq * Dv);
    float *SP = attn__bw_carve(&cur, (size_t)c->bq * nkp), *dPS = attn__bw_carve(&cur, (size_t)c->bq * nkp);
    int64_t *lo = (int64_t *)attn__bw_carve(&cur, 2 * (size_t)c->bq), *hi = (int64_t *)attn__bw_carve(&cur, 2 * (size_t)c->bq);
    float *lsev = attn__bw_carve(&cur, (size_t)c->bq), *dlv = attn__bw_carve(&cur, (size_t)c->bq);

    attn__bw_pack_t(KT, nkp, c->k, b, hk, j0, nk, D);
    attn__bw_pack_t(VT, nkp, c->v, b, hk, j0, nk, Dv);
    memset(dKT, 0, sizeof(float) * (size_t)D * nkp);
    memset(dVT, 0, sizeof(float) * (size_t)Dv * nkp);
    for (int64_t h = hk * c->group; h < (hk + 1) * c->group; h++) {
        for (int64_t qb = 0; qb < c->nqb; qb++) {
            const int64_t i0 = qb * c->bq;
            const int nq = (int)(Lq - i0 < c->bq ? Lq - i0 : c->bq);
            if (!attn__bw_rows(c, b, h, i0, nq, j0, j0 + nk, lo, hi, lsev, dlv)) continue;
            attn__bw_pack_rows(Qb, c->q, b, h, i0, nq, D);
            attn__bw_pack_rows(dOb, c->dout, b, h, i0, nq, Dv);
            BW_FN(attn__bw_gemm)(SP, nkp, nq, nkp, Qb, D, 1, KT, nkp, (int)D, 0);
            BW_FN(attn__bw_gemm)(dPS, nkp, nq, nkp, dOb, Dv, 1, VT, nkp, (int)Dv, 0);
            BW_FN(attn__bw_probs)(c, SP, dPS, nkp, nq, nk, b, h, i0, j0, lo, hi, lsev, dlv);
            BW_FN(attn__bw_gemm)(dVT, nkp, (int)Dv, nkp, dOb, 1, Dv, SP, nkp, nq, 1);
            BW_FN(attn__bw_gemm)(dKT, nkp, (int)D, nkp, Qb, 1, D, dPS, nkp, nq, 1);
        }
    }
    for (int j = 0; j < nk; j++) {
        float *dkr = attn__f32_at4(c->dk, b, hk, j0 + j, 0), *dvr = attn__f32_at4(c->dv, b, hk, j0 + j, 0);
        const int64_t ks = c->dk->stride[3], vs = c->dv->stride[3];
        for (int64_t d = 0; d < D; d++) dkr[d * ks] = dKT[d * nkp + j] * c->scale;
        for (int64_t e = 0; e < Dv; e++) dvr[e * vs] = dVT[e * nkp + j];
    }
}

/* Pass 2 item: query block qb of (b, h): dq of its rows over every key block they see. */
static void BW_FN(attn__bw_q_item)(const attn__bwctx *c, float *scr, int64_t b, int64_t h, int64_t qb) {
    const int64_t Lq = c->Lq, D = c->D, Dv = c->Dv;
    const int64_t i0 = qb * c->bq, hk = h / c->group;
    const int nq = (int)(Lq - i0 < c->bq ? Lq - i0 : c->bq);
    const int bkp = (int)attn__bw_round16((size_t)c->bk), Dp = (int)attn__bw_round16((size_t)D);
    float *cur = scr;
    float *KT = attn__bw_carve(&cur, (size_t)D * bkp), *VT = attn__bw_carve(&cur, (size_t)Dv * bkp);
    float *Kb = attn__bw_carve(&cur, (size_t)c->bk * Dp), *dQ = attn__bw_carve(&cur, (size_t)c->bq * Dp);
    float *Qb = attn__bw_carve(&cur, (size_t)c->bq * D), *dOb = attn__bw_carve(&cur, (size_t)c->bq * Dv);
    float *SP = attn__bw_carve(&cur, (size_t)c->bq * bkp), *dPS = attn__bw_carve(&cur, (size_t)c->bq * bkp);
    int64_t *lo = (int64_t *)attn__bw_carve(&cur, 2 * (size_t)c->bq), *hi = (int64_t *)attn__bw_carve(&cur, 2 * (size_t)c->bq);
    float *lsev = attn__bw_carve(&cur, (size_t)c->bq), *dlv = attn__bw_carve(&cur, (size_t)c->bq);

    memset(dQ, 0, sizeof(float) * (size_t)c->bq * Dp);
    if (attn__bw_rows(c, b, h, i0, nq, 0, c->Lk, lo, hi, lsev, dlv)) {
        int64_t jlo = c->Lk, jhi = 0; /* union of the rows' visible ranges */
        for (int i = 0; i < nq; i++)
            if (lo[i] < hi[i] && lsev[i] != -INFINITY) {
                if (lo[i] < jlo) jlo = lo[i];
                if (hi[i] > jhi) jhi = hi[i];
            }
        attn__bw_pack_rows(Qb, c->q, b, h, i0, nq, D);
        attn__bw_pack_rows(dOb, c->dout, b, h, i0, nq, Dv);
        for (int64_t j0 = jlo; j0 < jhi; j0 += c->bk) {
            const int nk = (int)(jhi - j0 < c->bk ? jhi - j0 : c->bk);
            const int nkp = (int)attn__bw_round16((size_t)nk);
            attn__bw_pack_t(KT, nkp, c->k, b, hk, j0, nk, D);
            attn__bw_pack_t(VT, nkp, c->v, b, hk, j0, nk, Dv);
            attn__bw_pack_kb(Kb, Dp, c->k, b, hk, j0, nk, D);
            BW_FN(attn__bw_gemm)(SP, nkp, nq, nkp, Qb, D, 1, KT, nkp, (int)D, 0);
            BW_FN(attn__bw_gemm)(dPS, nkp, nq, nkp, dOb, Dv, 1, VT, nkp, (int)Dv, 0);
            BW_FN(attn__bw_probs)(c, SP, dPS, nkp, nq, nk, b, h, i0, j0, lo, hi, lsev, dlv);
            BW_FN(attn__bw_gemm)(dQ, Dp, nq, Dp, dPS, nkp, 1, Kb, Dp, nk, 1);
        }
    }
    const int64_t qs = c->dq->stride[3];
    for (int i = 0; i < nq; i++) {
        float *dqr = attn__f32_at4(c->dq, b, h, i0 + i, 0);
        for (int64_t d = 0; d < D; d++) dqr[d * qs] = dQ[(int64_t)i * Dp + d] * c->scale;
    }
}
