/* One register tile of the quantized kernels (included by quant_simd_tmpl.h with RT, MT and
 * TILE_NAME defined): RT weight rows x MT activation rows, RT*MT accumulators. */
static inline __attribute__((always_inline)) void TILE_NAME(float *y, int64_t ldy,
                                                              const attn__q8blk *xq, int64_t nb, const uint8_t *W,
                                                              size_t rb, int64_t r, int64_t m0, attn_qtype t) {
#if MT == 4
    /* 4 activation rows (prefill): the 4 integer block dots of a weight row are reduced to one
     * vector [Σ0 Σ1 Σ2 Σ3 | Σ0 Σ1 Σ2 Σ3] (each half sums 4 of the 8 lanes) by two unpack+add
     * rounds, then scaled by [d·d_x0 .. d·d_x3] and accumulated in one FMA; the Q4 / Q5 offset
     * term (m, -8d or -16d times Σq·d_x) goes into a 4-lane FMA. */
    __m256 acc4[RT];
    __m128 mac4[RT];
    QUNROLL
    for (int k = 0; k < RT; k++) {
        acc4[k] = _mm256_setzero_ps();
        mac4[k] = _mm_setzero_ps();
    }
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const __m256i nib_shift = _mm256_setr_epi64x(0, 0, 4, 4);
    const size_t bs = QNAME(bsize)(t);
    const attn__q8blk *x0 = xq + m0 * nb, *x1 = x0 + nb, *x2 = x1 + nb, *x3 = x2 + nb;
    for (int64_t b = 0; b < nb; b++) {
        const __m256i xv0 = _mm256_loadu_si256((const __m256i *)x0[b].q), xv1 = _mm256_loadu_si256((const __m256i *)x1[b].q),
                      xv2 = _mm256_loadu_si256((const __m256i *)x2[b].q), xv3 = _mm256_loadu_si256((const __m256i *)x3[b].q);
        const __m128 xd4 = _mm_setr_ps(x0[b].d, x1[b].d, x2[b].d, x3[b].d);
        const __m128 xs4 = _mm_setr_ps(x0[b].s, x1[b].s, x2[b].s, x3[b].s);
        const __m256 xd8 = _mm256_set_m128(xd4, xd4);
        QUNROLL
        for (int i = 0; i < RT; i++) {
            const uint8_t *blk = W + (size_t)(r + i) * rb + (size_t)b * bs;
            __m256i p0, p1, p2, p3;
            __m128 dm; /* [d, m] */
            if (t == ATTN_QT_Q8_0) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
                const __m256i aw = _mm256_sign_epi8(w, w);
                p0 = DOT_U8S8(aw, _mm256_sign_epi8(xv0, w));
                p1 = DOT_U8S8(aw, _mm256_sign_epi8(xv1, w));
                p2 = DOT_U8S8(aw, _mm256_sign_epi8(xv2, w));
                p3 = DOT_U8S8(aw, _mm256_sign_epi8(xv3, w));
                dm = _mm_set_ss(attn__x86_h2f(blk));
            } else {
                const uint8_t *qs = blk + QNAME(qs_off)(t);
                const __m256i raw2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
                __m256i w = _mm256_and_si256(_mm256_srlv_epi64(raw2, nib_shift), lo4);
                if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) w = QNAME(q5hi)(w, blk + (t == ATTN_QT_Q5_1 ? 4 : 2));
                p0 = DOT_U8S8(w, xv0);
                p1 = DOT_U8S8(w, xv1);
                p2 = DOT_U8S8(w, xv2);
                p3 = DOT_U8S8(w, xv3);
                if (t == ATTN_QT_Q4_1 || t == ATTN_QT_Q5_1) {
                    uint32_t dm32;
                    memcpy(&dm32, blk, 4);
                    dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dm32));
                } else {
                    const float d = attn__x86_h2f(blk);
                    dm = _mm_setr_ps(d, (t == ATTN_QT_Q5_0 ? -16.0f : -8.0f) * d, 0.0f, 0.0f);
                }
            }
            const __m256i t01 = _mm256_add_epi32(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
            const __m256i t23 = _mm256_add_epi32(_mm256_unpacklo_epi32(p2, p3), _mm256_unpackhi_epi32(p2, p3));
            const __m256i sum = _mm256_add_epi32(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
            acc4[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(_mm256_broadcastss_ps(dm), xd8), acc4[i]);
            if (t != ATTN_QT_Q8_0) mac4[i] = _mm_fmadd_ps(_mm_permute_ps(dm, 0x55), xs4, mac4[i]);
        }
    }
    QUNROLL
    for (int i = 0; i < RT; i++) {
        float o[4];
        _mm_storeu_ps(o, _mm_add_ps(_mm_add_ps(_mm256_castps256_ps128(acc4[i]), _mm256_extractf128_ps(acc4[i], 1)), mac4[i]));
        for (int j = 0; j < 4; j++) y[(m0 + j) * ldy + r + i] = o[j];
    }
}
#elif MT == 1
    /* 1 activation row (decode): the same arithmetic per output as the MT == 4 tile above, so
     * that a row's result does not depend on the tile it falls in (a sequence decoded alone or
     * batched with others, a prompt row in a group of 4 or in the remainder: bit-identical).
     * Per weight row and block: the integer dot's lanes 0-3 and 4-7 summed exactly, each half
     * scaled by d·d_x in one FMA into [lo | hi] accumulators, the Q4 offset term in an FMA of
     * m and s_x; the result is (lo + hi) + offset. RT = 4: the 4 weight rows' half sums reduced
     * to one vector [Σlo0..3 | Σhi0..3] by the same unpack+add rounds. */
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const __m256i nib_shift = _mm256_setr_epi64x(0, 0, 4, 4);
    const size_t bs = QNAME(bsize)(t);
    const attn__q8blk *x0 = xq + m0 * nb;
    /* the weights stream from memory once per token, and the hardware prefetcher does not follow
     * RT interleaved row streams: a linear software prefetch, one cache line per 64 bytes the
     * tile reads, of the next tile's range (RT rows are contiguous) into L1 and, ATTN__PF_FAR
     * bytes further, into L2 (L1 alone holds too few misses in flight to reach memory speed) */
    const char *pf = (const char *)(W + (size_t)(r + RT) * rb);
    const int64_t pf_lines = (int64_t)(RT * rb + 63) / 64;
    int64_t pf_acc = 0;
#if RT == 4
    __m256 acc = _mm256_setzero_ps();
    __m128 mac = _mm_setzero_ps();
#else
    __m256 acc[RT];
    __m128 mac[RT];
    QUNROLL
    for (int k = 0; k < RT; k++) {
        acc[k] = _mm256_setzero_ps();
        mac[k] = _mm_setzero_ps();
    }
#endif
    for (int64_t b = 0; b < nb; b++) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)x0[b].q);
        const float xd = x0[b].d, xs = x0[b].s;
        for (pf_acc += pf_lines; pf_acc >= nb; pf_acc -= nb, pf += 64) {
            _mm_prefetch(pf, _MM_HINT_T0);
            _mm_prefetch(pf + ATTN__PF_FAR, _MM_HINT_T1);
        }
        __m256i p[RT];
        uint32_t dm[RT]; /* the block's f16 d (low half) and, for Q4_1, m (high half) */
        QUNROLL
        for (int i = 0; i < RT; i++) {
            const uint8_t *blk = W + (size_t)(r + i) * rb + (size_t)b * bs;
            if (t == ATTN_QT_Q8_0) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
                p[i] = DOT_U8S8(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
            } else {
                const uint8_t *qs = blk + QNAME(qs_off)(t);
                const __m256i raw2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
                __m256i w = _mm256_and_si256(_mm256_srlv_epi64(raw2, nib_shift), lo4);
                if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) w = QNAME(q5hi)(w, blk + (t == ATTN_QT_Q5_1 ? 4 : 2));
                p[i] = DOT_U8S8(w, xv);
            }
            if (t == ATTN_QT_Q4_1 || t == ATTN_QT_Q5_1) memcpy(&dm[i], blk, 4);
            else {
                uint16_t h;
                memcpy(&h, blk, 2);
                dm[i] = h;
            }
        }
#if RT == 4
        const __m256i t01 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
        const __m256i t23 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
        const __m256i sum = _mm256_add_epi32(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
        /* [d0 m0 d1 m1 d2 m2 d3 m3] in one conversion, then [d0..d3 | m0..m3] */
        const __m256 dmf = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(_mm_setr_epi32((int)dm[0], (int)dm[1], (int)dm[2], (int)dm[3])),
                                                    _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
        const __m128 d4 = _mm256_castps256_ps128(dmf);
        const __m128 sc = _mm_mul_ps(d4, _mm_set1_ps(xd));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set_m128(sc, sc), acc);
        if (t == ATTN_QT_Q4_1 || t == ATTN_QT_Q5_1) mac = _mm_fmadd_ps(_mm256_extractf128_ps(dmf, 1), _mm_set1_ps(xs), mac);
        else if (t == ATTN_QT_Q4_0 || t == ATTN_QT_Q5_0)
            mac = _mm_fmadd_ps(_mm_mul_ps(d4, _mm_set1_ps(t == ATTN_QT_Q5_0 ? -16.0f : -8.0f)), _mm_set1_ps(xs), mac);
#else
        float dv[RT], mv[RT];
        QUNROLL
        for (int i = 0; i < RT; i++) {
            const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dm[i]));
            dv[i] = _mm_cvtss_f32(f);
            mv[i] = t == ATTN_QT_Q4_1 || t == ATTN_QT_Q5_1 ? _mm_cvtss_f32(_mm_movehdup_ps(f)) : (t == ATTN_QT_Q5_0 ? -16.0f : -8.0f) * dv[i];
        }
        QUNROLL
        for (int i = 0; i < RT; i++) {
            /* [Σ lanes 0-3 | Σ lanes 4-7] in lanes 0 and 4 (and copies) */
            const __m256i h = _mm256_hadd_epi32(p[i], p[i]);
            const __m256i sum = _mm256_hadd_epi32(h, h);
            acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(dv[i] * xd), acc[i]);
            if (t != ATTN_QT_Q8_0) mac[i] = _mm_fmadd_ss(_mm_set_ss(mv[i]), _mm_set_ss(xs), mac[i]);
        }
#endif
    }
#if RT == 4
    float o[4];
    _mm_storeu_ps(o, _mm_add_ps(_mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1)), mac));
    for (int i = 0; i < 4; i++) y[m0 * ldy + r + i] = o[i];
#else
    QUNROLL
    for (int i = 0; i < RT; i++)
        y[m0 * ldy + r + i] = _mm_cvtss_f32(_mm_add_ss(_mm_add_ss(_mm256_castps256_ps128(acc[i]), _mm256_extractf128_ps(acc[i], 1)), mac[i]));
#endif
}
#else
#error "quant_tile_tmpl.h: MT must be 1 or 4"
#endif
#undef TILE_NAME
#undef RT
#undef MT
