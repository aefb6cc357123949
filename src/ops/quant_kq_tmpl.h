/* The K-quant (Q2_K .. Q6_K) products on their super-blocks, for 256-bit integer SIMD; included by
 * quant_kq_avx2.c (AVX2) and quant_kq_avx512.c (AVX-512 VNNI + VL) inside their target blocks, with
 *   KQN(x)               the name of x in this copy,
 *   (and ops/quant_simd_x86.h included: attn__x86_h2f, attn__x86_hsum_i32)
 *   KQ_ACC_SC(a, p, s)   a + the int32 pair sums of the int16 vectors p·s (vpmaddwd + vpaddd, or
 *                        AVX-512 VNNI's vpdpwssd in one instruction).
 * Prefill (M > 1): every output is the portable kernel's (quant_kq.c kdot_portable) bit for bit: per
 * super-block the exact integer sums isum = Σ_g sc[g]·Σ_{i in g} q[i]·x[i] and msum = Σ_g mn[g]·
 * bsums[g], then y += (d·d_x)·isum + (dm·d_x)·msum in float32, block after block, in the same order.
 * Decode (M = 1): the same integer vectors, scaled in 8 float lanes (FMA) and summed at the end
 * (the earlier AVX2 kernel's arithmetic: within ~16·2^-24 of the sum of |terms| of the portable).
 *   values: a super-block's 256 unsigned values (0..63) rebuilt in 8 registers of 32 bytes
 *     (chunk k = values 32k .. 32k+31) from its bit planes; vpmaddubsw against the Q8_K bytes
 *     (|2·63·127| < 32767: no saturation); the 16-bit pair sums weighted by the group scales
 *     (chunk k: sc[2k] in the low 8 lanes, sc[2k+1] in the high 8, one vpshufb of the scales);
 *     the offset term is one vpmaddwd of the 16 group coefficients with the 16 Q8_K block sums.
 *   one activation row: 4 weight rows at a time (prefill rows left over by the 4-row tile: their
 *     4 + 4 integer vectors reduced to [isum0..3 | msum0..3] by unpack+add rounds, scaled by
 *     [d0..3 | dm0..3]·d_x in one multiply); the rows two tiles ahead are prefetched (the hardware prefetcher does not follow 4 streams).
 *   prefill (4 activation rows at a time): a group of weight rows is unpacked once (values,
 *     scales, d, dm: attn__kblk, in L1) for all activation rows; each (row, 4 tokens, block) shares
 *     a value register across the 4 tokens and reduces its 4 + 4 integer vectors as decode does. */

#if defined(__clang__)
#define KQ_UNROLL _Pragma("unroll")
#else
#define KQ_UNROLL _Pragma("GCC unroll 8")
#endif

/* the 8 value chunks of one super-block of t (as attn__kunpack) */
static inline __attribute__((always_inline)) void KQN(vals)(__m256i q[8], const uint8_t *blk, attn_qtype t) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(0x03), m1 = _mm256_set1_epi8(0x01);
    switch (t) {
    case ATTN_QT_Q2_K:
    case ATTN_QT_Q3_K: {
        const uint8_t *qs = blk + (t == ATTN_QT_Q2_K ? 16 : 32);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)blk);
        KQ_UNROLL

        for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
            KQ_UNROLL

            for (int s = 0; s < 4; s++) {
                __m256i x = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), m3);
                if (t == ATTN_QT_Q3_K) /* + 4·hbit, hbit of value 32b + l is bit b of hmask[l] */
                    x = _mm256_or_si256(x, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + s), m1), 2));
                q[4 * h + s] = x;
            }
        }
        return;
    }
    case ATTN_QT_Q4_K:
    case ATTN_QT_Q5_K: {
        const uint8_t *qs = blk + (t == ATTN_QT_Q5_K ? 48 : 16);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
        KQ_UNROLL

        for (int c = 0; c < 4; c++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if (t == ATTN_QT_Q5_K) { /* bit k of qh[l]: the 16s bit of value 32k + l */
                const __m256i b16 = _mm256_set1_epi8(0x10);
                lo = _mm256_or_si256(lo, _mm256_and_si256(2 * c <= 4 ? _mm256_slli_epi16(qh, 4 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 4), b16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(2 * c + 1 <= 4 ? _mm256_slli_epi16(qh, 3 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 3), b16));
            }
            q[2 * c] = lo;
            q[2 * c + 1] = hi;
        }
        return;
    }
    case ATTN_QT_Q6_K:
        KQ_UNROLL

        for (int h = 0; h < 2; h++) {
            const __m256i a = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
            const __m256i b = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
            const __m256i lo[4] = {_mm256_and_si256(a, m4), _mm256_and_si256(b, m4), _mm256_and_si256(_mm256_srli_epi16(a, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(b, 4), m4)};
            const __m256i m30 = _mm256_set1_epi8(0x30);
            q[4 * h + 0] = _mm256_or_si256(lo[0], _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
            q[4 * h + 1] = _mm256_or_si256(lo[1], _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
            q[4 * h + 2] = _mm256_or_si256(lo[2], _mm256_and_si256(qh, m30));
            q[4 * h + 3] = _mm256_or_si256(lo[3], _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
        }
        return;
    default:
        KQ_UNROLL

        for (int k = 0; k < 8; k++) q[k] = _mm256_setzero_si256();
        return;
    }
}

/* the 16 group scales (int16, [sc0..7 | sc8..15]) and offset coefficients of a super-block, d and
 * dm (as attn__kscales) */
static inline __attribute__((always_inline)) void KQN(scales)(__m256i *sc, __m256i *mn, float *d, float *dm, const uint8_t *blk,
                                                                attn_qtype t) {
    switch (t) {
    case ATTN_QT_Q4_K:
    case ATTN_QT_Q5_K: {
        /* 6-bit scales / mins of the 8 groups of 32 (get_scale_min_k4) with 32-bit masks, in one
         * register: the 12 bytes as a0 a1 a2 (the 4 bytes after them are not used);
         * [a0 & 3f, (a2 & 0f) | (a0 >> 2 & 30), a1 & 3f, (a2 >> 4 & 0f) | (a1 >> 2 & 30)] */
        const __m128i a = _mm_loadu_si128((const __m128i *)(blk + 4));
        const __m128i x = _mm_srlv_epi32(_mm_shuffle_epi32(a, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
        const __m128i hi = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(a, _MM_SHUFFLE(1, 1, 0, 0)), 2),
                                         _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
        const __m128i b8 = _mm_or_si128(_mm_and_si128(x, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f)), hi);
        const __m128i s16 = _mm_cvtepu8_epi16(b8), m16 = _mm_cvtepu8_epi16(_mm_srli_si128(b8, 8));
        /* each 32-group's value for its two 16-groups */
        *sc = _mm256_set_m128i(_mm_unpackhi_epi16(s16, s16), _mm_unpacklo_epi16(s16, s16));
        *mn = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_set_m128i(_mm_unpackhi_epi16(m16, m16), _mm_unpacklo_epi16(m16, m16)));
        *d = attn__x86_h2f(blk);
        *dm = attn__x86_h2f(blk + 2);
        return;
    }
    case ATTN_QT_Q6_K:
        *sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
        *mn = _mm256_mullo_epi16(*sc, _mm256_set1_epi16(-32));
        *d = *dm = attn__x86_h2f(blk + 208);
        return;
    default: {
        _Alignas(32) attn__kblk u;
        attn__kscales(&u, blk, t);
        *sc = _mm256_load_si256((const __m256i *)u.sc);
        *mn = _mm256_load_si256((const __m256i *)u.mn);
        *d = u.d;
        *dm = u.dm;
        return;
    }
    }
}

/* vpshufb masks: chunk k (scales A = [sc0..7 | sc0..7] for k < 4, B = [sc8..15 | sc8..15] after)
 * takes the int16 (2k mod 8) into its low 8 lanes and (2k+1 mod 8) into its high 8 lanes */
static inline __m256i KQN(scmask)(int j) {
    const char a = (char)(4 * j), b = (char)(4 * j + 1), c = (char)(4 * j + 2), e = (char)(4 * j + 3);
    return _mm256_setr_epi8(a, b, a, b, a, b, a, b, a, b, a, b, a, b, a, b, c, e, c, e, c, e, c, e, c, e, c, e, c, e, c, e);
}

/* 4 + 4 integer vectors -> [Σp0 Σp1 Σp2 Σp3 | Σm0 Σm1 Σm2 Σm3] (exact int32 sums) */
static inline __attribute__((always_inline)) __m256i KQN(reduce8)(const __m256i p[4], const __m256i m[4]) {
    const __m256i a01 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
    const __m256i a23 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
    const __m256i sa = _mm256_add_epi32(_mm256_unpacklo_epi64(a01, a23), _mm256_unpackhi_epi64(a01, a23));
    const __m256i b01 = _mm256_add_epi32(_mm256_unpacklo_epi32(m[0], m[1]), _mm256_unpackhi_epi32(m[0], m[1]));
    const __m256i b23 = _mm256_add_epi32(_mm256_unpacklo_epi32(m[2], m[3]), _mm256_unpackhi_epi32(m[2], m[3]));
    const __m256i sm = _mm256_add_epi32(_mm256_unpacklo_epi64(b01, b23), _mm256_unpackhi_epi64(b01, b23));
    return _mm256_add_epi32(_mm256_permute2x128_si256(sa, sm, 0x20), _mm256_permute2x128_si256(sa, sm, 0x31));
}

/* [(d_i·d_x_i)·isum_i + (dm_i·d_x_i)·msum_i] for 4 lanes i: ddx = [d_i·d_x_i | dm_i·d_x_i], s = reduce8 */
static inline __m128 KQN(scale4)(__m256 ddx, __m256i s) {
    const __m256 p = _mm256_mul_ps(ddx, _mm256_cvtepi32_ps(s));
    return _mm_add_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
}

/* y[r] for the rows [r, r + RT) (RT = 1 or 4) and one activation row xq[nb]; exact: the portable
 * kernel's float32 operations (prefill rows); else (decode, as the AVX2 kernel before) each row's
 * integer vectors scaled in 8 float lanes by two FMAs per block, then one horizontal sum */
static inline __attribute__((always_inline)) void KQN(dec_tile)(float *y, const attn__q8k *xq, int64_t nb, const uint8_t *W, size_t rb,
                                                                  int64_t r, int RT, attn_qtype t, int exact) {
    const size_t bs = attn__qtype_block_bytes(t);
    const __m256i mk0 = KQN(scmask)(0), mk1 = KQN(scmask)(1), mk2 = KQN(scmask)(2), mk3 = KQN(scmask)(3);
    /* the next tile's range into L1 and ATTN__PF_FAR bytes further into L2, one line per 64 bytes
     * read (as the legacy types' decode tile, quant_tile_tmpl.h) */
    const char *pf = (const char *)(W + (size_t)(r + RT) * rb);
    const int64_t pf_lines = (int64_t)((size_t)RT * rb + 63) / 64;
    int64_t pf_acc = 0;
    __m128 acc4 = _mm_setzero_ps();
    float acc1 = 0.0f;
    __m256 facc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const attn__q8k *xb = xq + b;
        for (pf_acc += pf_lines; pf_acc >= nb; pf_acc -= nb, pf += 64) {
            _mm_prefetch(pf, _MM_HINT_T0);
            _mm_prefetch(pf + ATTN__PF_FAR, _MM_HINT_T1);
        }
        const __m256i bsums = _mm256_loadu_si256((const __m256i *)xb->bsums);
        __m256i p[4], m[4];
        float dv[4], dmv[4];
        KQ_UNROLL

        for (int i = 0; i < RT; i++) {
            const uint8_t *blk = W + (size_t)(r + i) * rb + (size_t)b * bs;
            __m256i q[8], sc, mn;
            KQN(vals)(q, blk, t);
            KQN(scales)(&sc, &mn, &dv[i], &dmv[i], blk, t);
            const __m256i A = _mm256_permute2x128_si256(sc, sc, 0x00), B = _mm256_permute2x128_si256(sc, sc, 0x11);
            const __m256i mk[4] = {mk0, mk1, mk2, mk3};
            __m256i a = _mm256_setzero_si256();
            KQ_UNROLL

            for (int k = 0; k < 8; k++) {
                const __m256i pr = _mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(xb->q + 32 * k)));
                a = KQ_ACC_SC(a, pr, _mm256_shuffle_epi8(k < 4 ? A : B, mk[k & 3]));
            }
            p[i] = a;
            m[i] = _mm256_madd_epi16(mn, bsums);
        }
        if (!exact) {
            KQ_UNROLL
            for (int i = 0; i < RT; i++) {
                facc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p[i]), _mm256_set1_ps(dv[i] * xb->d), facc[i]);
                facc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m[i]), _mm256_set1_ps(dmv[i] * xb->d), facc[i]);
            }
        } else if (RT == 4) {
            const __m256 ddx = _mm256_mul_ps(_mm256_setr_ps(dv[0], dv[1], dv[2], dv[3], dmv[0], dmv[1], dmv[2], dmv[3]), _mm256_set1_ps(xb->d));
            acc4 = _mm_add_ps(acc4, KQN(scale4)(ddx, KQN(reduce8)(p, m)));
        } else {
            acc1 += (dv[0] * xb->d) * (float)attn__x86_hsum_i32(p[0]) + (dmv[0] * xb->d) * (float)attn__x86_hsum_i32(m[0]);
        }
    }
    if (!exact) {
        KQ_UNROLL
        for (int i = 0; i < RT; i++) {
            __m128 h = _mm_add_ps(_mm256_castps256_ps128(facc[i]), _mm256_extractf128_ps(facc[i], 1));
            h = _mm_add_ps(h, _mm_movehl_ps(h, h));
            y[r + i] = _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
        }
    } else if (RT == 4) _mm_storeu_ps(y + r, acc4);
    else y[r] = acc1;
}

static void KQN(kdec)(float *y, const attn__q8k *xq, int64_t nb, const uint8_t *W, size_t rb, int64_t r0, int64_t r1, attn_qtype t,
                      int exact) {
    int64_t r = r0;
    /* one copy per type and exactness: the unpacking is chosen at compile time */
#define KQ_DEC_CASE(T, E)                                                                                                                 \
    case T:                                                                                                                               \
        for (; r + 4 <= r1; r += 4) KQN(dec_tile)(y, xq, nb, W, rb, r, 4, T, E);                                                         \
        for (; r < r1; r++) KQN(dec_tile)(y, xq, nb, W, rb, r, 1, T, E);                                                                 \
        return;
#define KQ_DEC_SWITCH(E)                                                                                                                  \
    switch (t) {                                                                                                                          \
        KQ_DEC_CASE(ATTN_QT_Q2_K, E)                                                                                                      \
        KQ_DEC_CASE(ATTN_QT_Q3_K, E)                                                                                                      \
        KQ_DEC_CASE(ATTN_QT_Q4_K, E)                                                                                                      \
        KQ_DEC_CASE(ATTN_QT_Q5_K, E)                                                                                                      \
        KQ_DEC_CASE(ATTN_QT_Q6_K, E)                                                                                                      \
    default: return;                                                                                                                      \
    }
    if (exact) KQ_DEC_SWITCH(1)
    KQ_DEC_SWITCH(0)
#undef KQ_DEC_SWITCH
#undef KQ_DEC_CASE
}

/* the rows [r, r + G) of W unpacked into u[G·nb] (row-major: u[i·nb + b]) */
static inline __attribute__((always_inline)) void KQN(unpack_rows)(attn__kblk *u, const uint8_t *W, size_t rb, int64_t nb, int64_t r, int64_t G,
                                                                     attn_qtype t) {
    const size_t bs = attn__qtype_block_bytes(t);
    KQ_UNROLL

    for (int64_t i = 0; i < G; i++)
        for (int64_t b = 0; b < nb; b++) {
            attn__kblk *o = u + i * nb + b;
            const uint8_t *blk = W + (size_t)(r + i) * rb + (size_t)b * bs;
            __m256i q[8], sc, mn;
            KQN(vals)(q, blk, t);
            KQ_UNROLL

            for (int k = 0; k < 8; k++) _mm256_storeu_si256((__m256i *)(o->q + 32 * k), q[k]);
            KQN(scales)(&sc, &mn, &o->d, &o->dm, blk, t);
            _mm256_storeu_si256((__m256i *)o->sc, sc);
            _mm256_storeu_si256((__m256i *)o->mn, mn);
        }
}

/* prefill: 4 activation rows m0 .. m0+3 times the unpacked weight row u[nb] (row r of y) */
static inline __attribute__((always_inline)) void KQN(pre_tile)(float *y, int64_t ldy, const attn__q8k *xq, int64_t nb, const attn__kblk *u,
                                                                  int64_t r, int64_t m0) {
    const __m256i mk[4] = {KQN(scmask)(0), KQN(scmask)(1), KQN(scmask)(2), KQN(scmask)(3)};
    const attn__q8k *x0 = xq + m0 * nb, *x1 = x0 + nb, *x2 = x1 + nb, *x3 = x2 + nb;
    __m128 acc = _mm_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const attn__kblk *w = u + b;
        const __m256i A = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)w->sc));
        const __m256i B = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(w->sc + 8)));
        __m256i p[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        KQ_UNROLL

        for (int k = 0; k < 8; k++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(w->q + 32 * k));
            const __m256i s = _mm256_shuffle_epi8(k < 4 ? A : B, mk[k & 3]);
            p[0] = KQ_ACC_SC(p[0], _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(x0[b].q + 32 * k))), s);
            p[1] = KQ_ACC_SC(p[1], _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(x1[b].q + 32 * k))), s);
            p[2] = KQ_ACC_SC(p[2], _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(x2[b].q + 32 * k))), s);
            p[3] = KQ_ACC_SC(p[3], _mm256_maddubs_epi16(q, _mm256_loadu_si256((const __m256i *)(x3[b].q + 32 * k))), s);
        }
        const __m256i mn = _mm256_loadu_si256((const __m256i *)w->mn);
        const __m256i m[4] = {_mm256_madd_epi16(mn, _mm256_loadu_si256((const __m256i *)x0[b].bsums)),
                              _mm256_madd_epi16(mn, _mm256_loadu_si256((const __m256i *)x1[b].bsums)),
                              _mm256_madd_epi16(mn, _mm256_loadu_si256((const __m256i *)x2[b].bsums)),
                              _mm256_madd_epi16(mn, _mm256_loadu_si256((const __m256i *)x3[b].bsums))};
        const __m128 xd = _mm_setr_ps(x0[b].d, x1[b].d, x2[b].d, x3[b].d);
        const __m256 ddx = _mm256_mul_ps(_mm256_set_m128(_mm_set1_ps(w->dm), _mm_set1_ps(w->d)), _mm256_set_m128(xd, xd));
        acc = _mm_add_ps(acc, KQN(scale4)(ddx, KQN(reduce8)(p, m)));
    }
    float o[4];
    _mm_storeu_ps(o, acc);
    KQ_UNROLL

    for (int j = 0; j < 4; j++) y[(m0 + j) * ldy + r] = o[j];
}

#define KQ_SCRATCH_BLOCKS 48 /* 48 unpacked super-blocks (15.4 KiB) on the stack: 8 rows of 1536 values */

static void KQN(kdot)(float *y, int64_t ldy, const attn__q8k *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1,
                      attn_qtype t) {
    int64_t m4 = 0;
    if (M >= 4) {
        /* weight rows in groups of G, unpacked once for all activation rows (G·nb blocks in L1) */
        _Alignas(32) attn__kblk small[KQ_SCRATCH_BLOCKS];
        int64_t G = KQ_SCRATCH_BLOCKS / nb;
        attn__kblk *u = small;
        if (G < 1) {
            G = 1;
            u = (attn__kblk *)malloc(sizeof(attn__kblk) * (size_t)nb);
        }
        if (u) {
            if (G > 16) G = 16;
            m4 = M / 4 * 4;
            for (int64_t g = r0; g < r1; g += G) {
                const int64_t n = g + G < r1 ? G : r1 - g;
                switch (t) {
                case ATTN_QT_Q2_K: KQN(unpack_rows)(u, W, rb, nb, g, n, ATTN_QT_Q2_K); break;
                case ATTN_QT_Q3_K: KQN(unpack_rows)(u, W, rb, nb, g, n, ATTN_QT_Q3_K); break;
                case ATTN_QT_Q4_K: KQN(unpack_rows)(u, W, rb, nb, g, n, ATTN_QT_Q4_K); break;
                case ATTN_QT_Q5_K: KQN(unpack_rows)(u, W, rb, nb, g, n, ATTN_QT_Q5_K); break;
                case ATTN_QT_Q6_K: KQN(unpack_rows)(u, W, rb, nb, g, n, ATTN_QT_Q6_K); break;
                default: break;
                }
                for (int64_t m = 0; m < m4; m += 4)
                    for (int64_t i = 0; i < n; i++) KQN(pre_tile)(y, ldy, xq, nb, u + i * nb, g + i, m);
            }
            if (u != small) free(u);
        }
    }
    /* the remaining activation rows one by one (also all of them when no scratch could be had);
     * decode (M = 1) in 8 float lanes */
    for (int64_t m = m4; m < M; m++) KQN(kdec)(y + m * ldy, xq + m * nb, nb, W, rb, r0, r1, t, M > 1);
}
#undef KQ_UNROLL
