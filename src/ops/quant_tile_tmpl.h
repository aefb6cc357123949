/* One register tile of the quantized kernels (included by quant_simd_tmpl.h with RT, MT and
 * TILE_NAME defined): RT weight rows x MT activation rows, RT*MT accumulators. */
static inline __attribute__((always_inline)) void TILE_NAME(float *y, int64_t ldy,
                                                              const attn__q8blk *xq, int64_t nb, const uint8_t *W,
                                                              size_t rb, int64_t r, int64_t m0, attn_qtype t) {
    __m256 acc[RT * MT];
    float sacc[RT * MT];
    QUNROLL
    for (int k = 0; k < RT * MT; k++) {
        acc[k] = _mm256_setzero_ps();
        sacc[k] = 0.0f;
    }
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const size_t bs = t == ATTN_QT_Q8_0 ? 34 : t == ATTN_QT_Q4_0 ? 18 : 20;
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
        /* decode streams the weights from memory once per token: fetch the rows two tiles ahead
         * (the hardware prefetcher does not follow RT interleaved row streams far enough) */
        QUNROLL
        for (int i = 0; i < RT; i++) _mm_prefetch((const char *)(W + (size_t)(r + 2 * RT + i) * rb + (size_t)b * bs), _MM_HINT_T0);
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
                const __m128i raw = _mm_loadu_si128((const __m128i *)qs);
                const __m256i w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(raw, 4), raw), lo4);
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
        for (int j = 0; j < MT; j++) y[(m0 + j) * ldy + r + i] = QNAME(hsum)(acc[i * MT + j]) + sacc[i * MT + j];
}

#undef TILE_NAME
#undef RT
#undef MT
