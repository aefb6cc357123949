/* One register tile of the quantized kernels (included by quant_simd_tmpl.h with RT, MT and
 * TILE_NAME defined): RT weight rows x MT activation rows, RT*MT accumulators. */
static inline __attribute__((always_inline)) void TILE_NAME(float *y, int64_t ldy,
                                                              const attn__q8blk *xq, int64_t nb, const uint8_t *W,
                                                              size_t rb, int64_t r, int64_t m0, attn_qtype t) {
#if MT == 4
    /* 4 activation rows (prefill): the 4 integer block dots of a weight row are reduced to one
     * vector [Σ0 Σ1 Σ2 Σ3 | Σ0 Σ1 Σ2 Σ3] (each half sums 4 of the 8 lanes) by two unpack+add
     * rounds, then scaled by [d·d_x0 .. d·d_x3] and accumulated in one FMA; the Q4 offset term
     * (m or -8d times Σq·d_x) goes into a 4-lane FMA. */
    __m256 acc4[RT];
    __m128 mac4[RT];
    QUNROLL
    for (int k = 0; k < RT; k++) {
        acc4[k] = _mm256_setzero_ps();
        mac4[k] = _mm_setzero_ps();
    }
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const __m256i nib_shift = _mm256_setr_epi64x(0, 0, 4, 4);
    const size_t bs = t == ATTN_QT_Q8_0 ? 34 : t == ATTN_QT_Q4_0 ? 18 : 20;
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
                dm = _mm_set_ss(QNAME(h2f)(blk));
            } else {
                const uint8_t *qs = blk + (t == ATTN_QT_Q4_1 ? 4 : 2);
                const __m256i raw2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
                const __m256i w = _mm256_and_si256(_mm256_srlv_epi64(raw2, nib_shift), lo4);
                p0 = DOT_U8S8(w, xv0);
                p1 = DOT_U8S8(w, xv1);
                p2 = DOT_U8S8(w, xv2);
                p3 = DOT_U8S8(w, xv3);
                if (t == ATTN_QT_Q4_1) {
                    uint32_t dm32;
                    memcpy(&dm32, blk, 4);
                    dm = _mm_cvtph_ps(_mm_cvtsi32_si128((int)dm32));
                } else {
                    const float d = QNAME(h2f)(blk);
                    dm = _mm_setr_ps(d, -8.0f * d, 0.0f, 0.0f);
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
#else
    __m256 acc[RT * MT];
    float sacc[RT * MT];
    QUNROLL
    for (int k = 0; k < RT * MT; k++) {
        acc[k] = _mm256_setzero_ps();
        sacc[k] = 0.0f;
    }
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const __m256i nib_shift = _mm256_setr_epi64x(0, 0, 4, 4);
#if MT == 1
    __m128 macc[RT]; /* lane 1: Σ m·s_x of the Q4_1 blocks */
    QUNROLL
    for (int k = 0; k < RT; k++) macc[k] = _mm_setzero_ps();
#endif
    const size_t bs = t == ATTN_QT_Q8_0 ? 34 : t == ATTN_QT_Q4_0 ? 18 : 20;
#if MT == 1
    /* the RT rows two tiles ahead are one contiguous range: a few of its cache lines per block */
    const uint8_t *pf_base = W + (size_t)(r + 2 * RT) * rb;
    const int64_t pf_per = ((int64_t)(RT * rb) + 64 * nb - 1) / (64 * nb);
#endif
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv[MT];
        float xd[MT], xs[MT];
        QUNROLL
        for (int j = 0; j < MT; j++) {
            const attn__q8blk *xb = xq + (m0 + j) * nb + b;
            xv[j] = _mm256_loadu_si256((const __m256i *)xb->q);
            xd[j] = xb->d;
            xs[j] = xb->s;
        }
#if MT == 1
        __m128 xds[1];
        {
            long long ds64; /* d and s are adjacent: [d_x, s_x, 0, 0] */
            memcpy(&ds64, &xq[m0 * nb + b].d, 8);
            xds[0] = _mm_castsi128_ps(_mm_cvtsi64_si128(ds64));
        }
        /* decode streams the weights from memory once per token: fetch the rows two tiles ahead
         * (the hardware prefetcher does not follow RT interleaved row streams far enough) */
        for (int64_t l = b * pf_per; l < (b + 1) * pf_per; l++) _mm_prefetch((const char *)(pf_base + l * 64), _MM_HINT_T0);
#endif
        QUNROLL
        for (int i = 0; i < RT; i++) {
            const uint8_t *blk = W + (size_t)(r + i) * rb + (size_t)b * bs;
            const float d = QNAME(h2f)(blk);
            if (t == ATTN_QT_Q8_0) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
                const __m256i aw = _mm256_sign_epi8(w, w);
                QUNROLL
                for (int j = 0; j < MT; j++) {
                    const __m256i dot = DOT_U8S8(aw, _mm256_sign_epi8(xv[j], w));
                    acc[i * MT + j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * xd[j]), acc[i * MT + j]);
                }
            } else {
                const uint8_t *qs = blk + (t == ATTN_QT_Q4_1 ? 4 : 2);
                /* [raw, raw] shifted by 0 (low 128 bits) and 4 (high): low nibbles, then high */
                const __m256i raw2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
                const __m256i w = _mm256_and_si256(_mm256_srlv_epi64(raw2, nib_shift), lo4);
#if MT == 1
                if (t == ATTN_QT_Q4_1) {
                    /* d and m converted together; [d, m]·[d_x, s_x] gives the block scale and the m term */
                    uint32_t dm32;
                    memcpy(&dm32, blk, 4);
                    const __m128 p = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dm32)), xds[0]);
                    const __m256i dot = DOT_U8S8(w, xv[0]);
                    acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_broadcastss_ps(p), acc[i]);
                    macc[i] = _mm_add_ps(macc[i], p);
                    continue;
                }
#endif
                const float mm = t == ATTN_QT_Q4_1 ? QNAME(h2f)(blk + 2) : -8.0f * d;
                QUNROLL
                for (int j = 0; j < MT; j++) {
                    const __m256i dot = DOT_U8S8(w, xv[j]);
                    acc[i * MT + j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d * xd[j]), acc[i * MT + j]);
                    sacc[i * MT + j] += mm * xs[j];
                }
            }
        }
    }
    QUNROLL
    for (int i = 0; i < RT; i++)
        QUNROLL
        for (int j = 0; j < MT; j++) {
            float extra = sacc[i * MT + j];
#if MT == 1
            if (t == ATTN_QT_Q4_1) extra = _mm_cvtss_f32(_mm_shuffle_ps(macc[i], macc[i], 1));
#endif
            y[(m0 + j) * ldy + r + i] = QNAME(hsum)(acc[i * MT + j]) + extra;
        }
}

#endif
#undef TILE_NAME
#undef RT
#undef MT
