/* AVX-512 VNNI quantized dot-product kernels for Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: decode and the
 * tiles in quant_simd_tmpl.h (vpdpbusd on 256-bit lanes, AVX-512VL; Q5's 5th bits by a masked
 * byte add, AVX-512BW), prefill in the 16-row strips below (512-bit vpdpbusd), and every M from weights packed in
 * that strip order at load (attn__qpack_strips: nothing to unpack). Only used after
 * attn__cpu_has (core/cpu.h) said avx512f, avx512vnni, avx512vl, avx512bw, avx2, fma and f16c
 * (quant.c); the automatic choice there. Tested on Zen 4 (tests/test_quant_legacy.c,
 * test_quant_rows.c) against the portable kernel. */
#include "ops/quant_internal.h"

#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include "core/target_avx512_begin.h"
#include "ops/quant_simd_x86.h"

#define QNAME(x) attn__q_vnni_##x
static inline __m256i attn__dot_u8s8_vnni(__m256i u, __m256i s) { return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s); }
#define DOT_U8S8 attn__dot_u8s8_vnni
/* Q5: qh is the byte mask of the values that get 16 (one masked byte add) */
static inline __m256i attn__q_vnni_q5hi(__m256i w, const uint8_t *p) {
    uint32_t qh;
    memcpy(&qh, p, 4);
    return _mm256_mask_add_epi8(w, (__mmask32)qh, w, _mm256_set1_epi8(16));
}

/* Prefill and decode batches (M >= 4 activation rows; Q8_0 / Q4_x from M = 2): weight rows in strips of 16, each strip's blocks unpacked once
 * to u8 values (Q8_0: w + 128) and transposed so that lane i of vector c holds values 4c..4c+3 of
 * row i (a 32 KiB strip buffer for up to 64 blocks); then per activation row and block, vpdpbusd
 * (512-bit) with the activation's 4 bytes broadcast gives the 16 rows' integer dots in the 16
 * lanes, no horizontal sums: 8 vpdpbusd per 512 multiply-adds. The float operations per output
 * are those of the tiles in quant_tile_tmpl.h (values 0-15 and 16-31 summed apart, each scaled by
 * d·d_x in an FMA, the offset m·s_x, -8d·s_x or -16d·s_x in a third FMA chain, then
 * (lo + hi) + offset), so an output has the same bits in either (the rows-alone tests). Q8_0: the
 * dots of w + 128 start from -128·Σx of each half, exact like vpsignb's. Returns 0 (the tiles
 * run instead) for more than 64 blocks a row, for Q5 below 4 rows, or when the Q8_0 sums find no
 * memory. */
#define STRIP_NB 64

/* The strip's unpacking for Q8_0, Q4_0 and Q4_1 (decode batches of 4-16 rows unpack a strip for
 * few activation rows, so its cost counts): rows r..r+15 (row r+nr-1 repeated past the end), per
 * block the 16 rows' weight bytes loaded four (Q4) or two (Q8_0) rows to a 512-bit register and
 * transposed in registers (dword c of row i to lane i of vector c: the layout of T above, Q4
 * nibbles split after the transpose), the 16 blocks' d (and m) by one gather of their first
 * dwords. The same T, D and O as the per-row unpacking (Q5 keeps it). The `ahead` (0-16) rows
 * after the strip (one contiguous range) are fetched into L2 while this one is unpacked: a
 * decode batch streams the weights from memory once per step. */
static inline __attribute__((always_inline)) void attn__q_vnni_unpack16(uint8_t (*T)[8][64], float (*D)[16], float (*O)[16], const uint8_t *W,
                                                                       size_t rb, int64_t r, int nr, int64_t nb, int64_t ahead, const attn_qtype t) {
    const size_t bs = t == ATTN_QT_Q8_0 ? 34 : t == ATTN_QT_Q4_0 ? 18 : 20;
    const size_t qoff = t == ATTN_QT_Q8_0 ? 2 : t == ATTN_QT_Q4_0 ? 2 : 4;
    const uint8_t *rp[16];
    int32_t ro[16];
    for (int i = 0; i < 16; i++) {
        ro[i] = (int32_t)((size_t)(i < nr ? i : nr - 1) * rb);
        rp[i] = W + (size_t)r * rb + (size_t)ro[i];
    }
    const __m512i vidx = _mm512_loadu_si512((const void *)ro);
    const uint8_t *pf = W + (size_t)(r + 16) * rb;
    const int64_t pf_per = ((int64_t)ahead * (int64_t)rb + 64 * nb - 1) / (64 * nb);
    const __m512i lo4 = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8((char)0x80);
    const __m512i sel_lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13), sel_hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int64_t b = 0; b < nb; b++) {
        const size_t bo = (size_t)b * bs;
        for (int64_t l = b * pf_per; l < (b + 1) * pf_per; l++) _mm_prefetch((const char *)(pf + l * 64), _MM_HINT_T1);
        const __m512i g = _mm512_i32gather_epi32(vidx, (const void *)(W + (size_t)r * rb + bo), 1);
        const __m512 d16 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
        _mm512_store_ps(D[b], d16);
        if (t == ATTN_QT_Q4_1) _mm512_store_ps(O[b], _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))));
        else if (t == ATTN_QT_Q4_0) _mm512_store_ps(O[b], _mm512_mul_ps(d16, _mm512_set1_ps(-8.0f)));
        if (t == ATTN_QT_Q8_0) {
            /* z[k] = [row k | row k+8]; an 8 x 8 dword transpose in each 256-bit half */
            __m512i z[8];
            for (int k = 0; k < 8; k++)
                z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(rp[k] + bo + qoff))),
                                          _mm256_loadu_si256((const __m256i *)(rp[k + 8] + bo + qoff)), 1);
            const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
            const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
            const __m512i t4 = _mm512_unpacklo_epi32(z[4], z[5]), t5 = _mm512_unpackhi_epi32(z[4], z[5]);
            const __m512i t6 = _mm512_unpacklo_epi32(z[6], z[7]), t7 = _mm512_unpackhi_epi32(z[6], z[7]);
            const __m512i u0 = _mm512_unpacklo_epi64(t0, t2), u1 = _mm512_unpackhi_epi64(t0, t2);
            const __m512i u2 = _mm512_unpacklo_epi64(t1, t3), u3 = _mm512_unpackhi_epi64(t1, t3);
            const __m512i u4 = _mm512_unpacklo_epi64(t4, t6), u5 = _mm512_unpackhi_epi64(t4, t6);
            const __m512i u6 = _mm512_unpacklo_epi64(t5, t7), u7 = _mm512_unpackhi_epi64(t5, t7);
            _mm512_store_si512((void *)T[b][0], _mm512_xor_si512(_mm512_permutex2var_epi64(u0, sel_lo, u4), flip));
            _mm512_store_si512((void *)T[b][1], _mm512_xor_si512(_mm512_permutex2var_epi64(u1, sel_lo, u5), flip));
            _mm512_store_si512((void *)T[b][2], _mm512_xor_si512(_mm512_permutex2var_epi64(u2, sel_lo, u6), flip));
            _mm512_store_si512((void *)T[b][3], _mm512_xor_si512(_mm512_permutex2var_epi64(u3, sel_lo, u7), flip));
            _mm512_store_si512((void *)T[b][4], _mm512_xor_si512(_mm512_permutex2var_epi64(u0, sel_hi, u4), flip));
            _mm512_store_si512((void *)T[b][5], _mm512_xor_si512(_mm512_permutex2var_epi64(u1, sel_hi, u5), flip));
            _mm512_store_si512((void *)T[b][6], _mm512_xor_si512(_mm512_permutex2var_epi64(u2, sel_hi, u6), flip));
            _mm512_store_si512((void *)T[b][7], _mm512_xor_si512(_mm512_permutex2var_epi64(u3, sel_hi, u7), flip));
        } else {
            /* z[k] = [row k | row k+4 | row k+8 | row k+12] (16 nibble bytes each); a 4 x 4 dword
             * transpose in each 128-bit lane; then low nibbles (values 4c..4c+3) and high ones */
            __m512i z[4];
            for (int k = 0; k < 4; k++) {
                __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(rp[k] + bo + qoff)));
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rp[k + 4] + bo + qoff)), 1);
                v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rp[k + 8] + bo + qoff)), 2);
                z[k] = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(rp[k + 12] + bo + qoff)), 3);
            }
            const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
            const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
            const __m512i c[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2), _mm512_unpacklo_epi64(t1, t3),
                                  _mm512_unpackhi_epi64(t1, t3)};
            for (int k = 0; k < 4; k++) {
                _mm512_store_si512((void *)T[b][k], _mm512_and_si512(c[k], lo4));
                _mm512_store_si512((void *)T[b][k + 4], _mm512_and_si512(_mm512_srli_epi16(c[k], 4), lo4));
            }
        }
    }
}
/* One strip's outputs y[m, r .. r+15] for the activation rows m in groups of NA (4, 2, 1), from
 * the strip's weights either unpacked into T, D, O (PACKED 0) or read straight from a packed
 * strip P (PACKED 1: per block a record of the 16 rows' f16 d (and m) and their quantized bytes
 * in the lane order of T, Q4 nibbles still packed; attn__qpack_strips in quant.c). The float
 * operations are the same in both, so are the bits. */
#define STRIP_ROWS(NA, PACKED)                                                                                                  \
    for (; m + NA <= M; m += NA) {                                                                                              \
        __m512 lo[NA], hi[NA], mac[NA];                                                                                         \
        for (int j = 0; j < NA; j++) lo[j] = hi[j] = mac[j] = _mm512_setzero_ps();                                              \
        for (int64_t b = 0; b < nb; b++) {                                                                                      \
            __m512i pl[NA], ph[NA], wv[8];                                                                                      \
            __m512 d16, o16 = _mm512_setzero_ps();                                                                              \
            if (PACKED) {                                                                                                       \
                const uint8_t *rec = P + (size_t)b * RB;                                                                        \
                if (pf && m == 0)                                                                                               \
                    for (size_t l = 0; l < RB; l += 64) _mm_prefetch((const char *)(rec + pf + l), _MM_HINT_T1);               \
                d16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)rec));                                               \
                if (has_m) o16 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(rec + 32)));                             \
                else if (!q8) o16 = _mm512_mul_ps(d16, _mm512_set1_ps(-8.0f));                                                  \
                _Pragma("GCC unroll 4")                                                                                         \
                for (int c = 0; c < 4; c++) {                                                                                   \
                    if (q8) {                                                                                                   \
                        wv[c] = _mm512_loadu_si512((const void *)(rec + 32 + 64 * c));                                          \
                        wv[c + 4] = _mm512_loadu_si512((const void *)(rec + 32 + 64 * (c + 4)));                                \
                    } else {                                                                                                    \
                        const __m512i raw = _mm512_loadu_si512((const void *)(rec + QO + 64 * c));                              \
                        wv[c] = _mm512_and_si512(raw, lo4z);                                                                    \
                        wv[c + 4] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), lo4z);                                          \
                    }                                                                                                           \
                }                                                                                                               \
            } else {                                                                                                            \
                d16 = _mm512_load_ps(D[b]);                                                                                     \
                if (!q8) o16 = _mm512_load_ps(O[b]);                                                                            \
                _Pragma("GCC unroll 8")                                                                                         \
                for (int c = 0; c < 8; c++) wv[c] = _mm512_load_si512((const void *)T[b][c]);                                   \
            }                                                                                                                   \
            _Pragma("GCC unroll 8")                                                                                             \
            for (int j = 0; j < NA; j++) {                                                                                      \
                if (q8) {                                                                                                       \
                    pl[j] = _mm512_set1_epi32(sums[2 * ((m + j) * nb + b)]);                                                    \
                    ph[j] = _mm512_set1_epi32(sums[2 * ((m + j) * nb + b) + 1]);                                                \
                } else pl[j] = ph[j] = _mm512_setzero_si512();                                                                  \
            }                                                                                                                   \
            _Pragma("GCC unroll 4")                                                                                             \
            for (int c = 0; c < 4; c++) {                                                                                       \
                _Pragma("GCC unroll 8")                                                                                         \
                for (int j = 0; j < NA; j++) {                                                                                  \
                    int32_t xl, xh;                                                                                             \
                    memcpy(&xl, xq[(m + j) * nb + b].q + 4 * c, 4);                                                             \
                    memcpy(&xh, xq[(m + j) * nb + b].q + 16 + 4 * c, 4);                                                        \
                    pl[j] = _mm512_dpbusd_epi32(pl[j], wv[c], _mm512_set1_epi32(xl));                                           \
                    ph[j] = _mm512_dpbusd_epi32(ph[j], wv[c + 4], _mm512_set1_epi32(xh));                                       \
                }                                                                                                               \
            }                                                                                                                   \
            _Pragma("GCC unroll 8")                                                                                             \
            for (int j = 0; j < NA; j++) {                                                                                      \
                const attn__q8blk *xb = xq + (m + j) * nb + b;                                                                  \
                const __m512 sc = _mm512_mul_ps(d16, _mm512_set1_ps(xb->d));                                                    \
                lo[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pl[j]), sc, lo[j]);                                                  \
                hi[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ph[j]), sc, hi[j]);                                                  \
                if (!q8) mac[j] = _mm512_fmadd_ps(o16, _mm512_set1_ps(xb->s), mac[j]);                                          \
            }                                                                                                                   \
        }                                                                                                                       \
        for (int j = 0; j < NA; j++)                                                                                            \
            _mm512_mask_storeu_ps(y + (m + j) * ldy + r, keep, _mm512_add_ps(_mm512_add_ps(lo[j], hi[j]), mac[j]));           \
    }

/* Q8_0: -128·Σq of values 0-15 and 16-31 of each of the n activation blocks xq into sums[2n] */
static void attn__q_vnni_sums(int32_t *sums, const attn__q8blk *xq, int64_t n) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t i = 0; i < n; i++) {
        /* Σ(x + 128) of 8-byte groups, then minus 16·128 per half */
        const __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)xq[i].q), flip), _mm256_setzero_si256());
        const int64_t a = _mm256_extract_epi64(sad, 0) + _mm256_extract_epi64(sad, 1) - 2048;
        const int64_t c = _mm256_extract_epi64(sad, 2) + _mm256_extract_epi64(sad, 3) - 2048;
        sums[2 * i] = (int32_t)(-128 * a);
        sums[2 * i + 1] = (int32_t)(-128 * c);
    }
}

static inline __attribute__((always_inline)) int attn__q_vnni_strip(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M,
                                                                    const uint8_t *W, size_t rb, int64_t r0, int64_t r1, const attn_qtype t) {
    /* 2-3 rows: only where the unpacking is the fast one below (Q5's per-row one costs more than
     * the tiles save) */
    if (nb > STRIP_NB || (M < 4 && (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1))) return 0;
    const size_t bs = t == ATTN_QT_Q8_0 ? 34 : t == ATTN_QT_Q4_0 ? 18 : t == ATTN_QT_Q4_1 ? 20 : t == ATTN_QT_Q5_0 ? 22 : 24;
    const size_t qoff = t == ATTN_QT_Q8_0 ? 2 : t == ATTN_QT_Q4_0 ? 2 : t == ATTN_QT_Q4_1 ? 4 : t == ATTN_QT_Q5_0 ? 6 : 8;
    const int q8 = t == ATTN_QT_Q8_0, q5 = t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1, has_m = t == ATTN_QT_Q4_1 || t == ATTN_QT_Q5_1;
    const float off = t == ATTN_QT_Q4_0 ? -8.0f : t == ATTN_QT_Q5_0 ? -16.0f : 0.0f;
    int32_t sums_small[2 * 1024], *sums = NULL;
    if (q8) {
        sums = M * nb <= 1024 ? sums_small : (int32_t *)malloc(sizeof(int32_t) * 2 * (size_t)(M * nb));
        if (!sums) return 0;
        attn__q_vnni_sums(sums, xq, M * nb);
    }
    const uint8_t *P = NULL; /* not packed */
    const size_t RB = 0, QO = 0, pf = 0;
    const __m512i lo4z = _mm512_set1_epi8(0x0F);
    (void)P, (void)RB, (void)QO, (void)pf, (void)lo4z;
    _Alignas(64) uint8_t T[STRIP_NB][8][64];
    _Alignas(64) float D[STRIP_NB][16], O[STRIP_NB][16];
    const __m256i lo4 = _mm256_set1_epi8(0x0F), nib_shift = _mm256_setr_epi64x(0, 0, 4, 4), flip = _mm256_set1_epi8((char)0x80);
    for (int64_t r = r0; r < r1; r += 16) {
        const int nr = r1 - r < 16 ? (int)(r1 - r) : 16;
        const __mmask16 keep = (__mmask16)((1u << nr) - 1);
        if (!q5) {
            attn__q_vnni_unpack16(T, D, O, W, rb, r, nr, nb, r1 - r - 16 < 0 ? 0 : r1 - r - 16 < 16 ? r1 - r - 16 : 16, t);
        } else
        for (int half = 0; half < 2; half++) {
            const uint8_t *rows[8];
            for (int i = 0; i < 8; i++) {
                const int ri = 8 * half + i;
                rows[i] = W + (size_t)(r + (ri < nr ? ri : nr - 1)) * rb;
            }
            for (int64_t b = 0; b < nb; b++) {
                __m256i a[8];
                uint16_t hd[8], hm[8];
                for (int i = 0; i < 8; i++) {
                    const uint8_t *blk = rows[i] + (size_t)b * bs;
                    if (q8) a[i] = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), flip);
                    else {
                        const __m256i raw2 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + qoff)));
                        a[i] = _mm256_and_si256(_mm256_srlv_epi64(raw2, nib_shift), lo4);
                        if (q5) a[i] = attn__q_vnni_q5hi(a[i], blk + (has_m ? 4 : 2));
                    }
                    memcpy(&hd[i], blk, 2);
                    if (has_m) memcpy(&hm[i], blk + 2, 2);
                }
                /* 8 x 8 dword transpose */
                const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
                const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
                const __m256i t4 = _mm256_unpacklo_epi32(a[4], a[5]), t5 = _mm256_unpackhi_epi32(a[4], a[5]);
                const __m256i t6 = _mm256_unpacklo_epi32(a[6], a[7]), t7 = _mm256_unpackhi_epi32(a[6], a[7]);
                const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
                const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
                const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
                const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
                uint8_t *o = &T[b][0][32 * half];
                _mm256_store_si256((__m256i *)(o + 0 * 64), _mm256_permute2x128_si256(u0, u4, 0x20));
                _mm256_store_si256((__m256i *)(o + 1 * 64), _mm256_permute2x128_si256(u1, u5, 0x20));
                _mm256_store_si256((__m256i *)(o + 2 * 64), _mm256_permute2x128_si256(u2, u6, 0x20));
                _mm256_store_si256((__m256i *)(o + 3 * 64), _mm256_permute2x128_si256(u3, u7, 0x20));
                _mm256_store_si256((__m256i *)(o + 4 * 64), _mm256_permute2x128_si256(u0, u4, 0x31));
                _mm256_store_si256((__m256i *)(o + 5 * 64), _mm256_permute2x128_si256(u1, u5, 0x31));
                _mm256_store_si256((__m256i *)(o + 6 * 64), _mm256_permute2x128_si256(u2, u6, 0x31));
                _mm256_store_si256((__m256i *)(o + 7 * 64), _mm256_permute2x128_si256(u3, u7, 0x31));
                const __m256 d8 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hd));
                _mm256_store_ps(D[b] + 8 * half, d8);
                if (has_m) _mm256_store_ps(O[b] + 8 * half, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)hm)));
                else _mm256_store_ps(O[b] + 8 * half, _mm256_mul_ps(d8, _mm256_set1_ps(off)));
            }
        }
        int64_t m = 0;
        STRIP_ROWS(4, 0)
        STRIP_ROWS(2, 0)
        STRIP_ROWS(1, 0)
    }
    if (sums && sums != sums_small) free(sums);
    return 1;
}

/* The products from a packed strip copy S of W (attn__qpack_strips: strip s, rows 16s..16s+15,
 * at S + 16s·rb, the same offset as in W; Q8_0, Q4_0, Q4_1): rows [r0, r1) with r0 a multiple
 * of 16 and r1 one or W's last row, every M >= 1. Nothing to unpack: a block's 16 rows are
 * 4 (Q4) or 8 (Q8_0) aligned vectors and two 256-bit loads of f16 scales, so a decode batch
 * reads each weight byte once from memory and does no gather or transpose (which were ~40% of
 * the Q4_1 strip time at 8 rows, Zen 5). While the first activation rows pass a block, the
 * same block of the next strip is fetched into L2. Same float operations, so the same bits, as
 * the tiles and the unpacking strips. */
static inline __attribute__((always_inline)) void attn__q_vnni_pstrip(float *y, int64_t ldy, const attn__q8blk *xq, const int32_t *sums,
                                                                      int64_t nb, int64_t M, const uint8_t *S, size_t rb, int64_t r0, int64_t r1,
                                                                      const attn_qtype t) {
    const int q8 = t == ATTN_QT_Q8_0, has_m = t == ATTN_QT_Q4_1;
    const size_t RB = 16 * attn__qtype_block_bytes(t), QO = has_m ? 64 : 32;
    const __m512i lo4z = _mm512_set1_epi8(0x0F);
    const uint8_t (*T)[8][64] = NULL; /* the unpacking path's buffers: not used */
    const float (*D)[16] = NULL, (*O)[16] = NULL;
    (void)T, (void)D, (void)O;
    for (int64_t r = r0; r < r1; r += 16) {
        const int nr = r1 - r < 16 ? (int)(r1 - r) : 16;
        const __mmask16 keep = (__mmask16)((1u << nr) - 1);
        const uint8_t *P = S + (size_t)r * rb;
        const size_t pf = r + 16 < r1 ? 16 * rb : 0; /* the next strip, same block */
        int64_t m = 0;
        STRIP_ROWS(4, 1)
        STRIP_ROWS(2, 1)
        STRIP_ROWS(1, 1)
    }
}
/* Q8_0's sums for up to ATTN__PSUMS activation blocks at a time (packed strips take at most
 * 4096 blocks a row, attn__qpack_strips_ok): more rows go in groups, no allocation */
#define ATTN__PSUMS 4096
static void attn__q_vnni_pdot_q8_0(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *S, size_t rb, int64_t r0, int64_t r1) {
    int32_t sums[2 * ATTN__PSUMS];
    const int64_t mc = nb <= ATTN__PSUMS ? ATTN__PSUMS / nb : 1;
    for (int64_t i = 0; i < M; i += mc) {
        const int64_t n = M - i < mc ? M - i : mc;
        attn__q_vnni_sums(sums, xq + i * nb, n * nb);
        attn__q_vnni_pstrip(y + i * ldy, ldy, xq + i * nb, sums, nb, n, S, rb, r0, r1, ATTN_QT_Q8_0);
    }
}
static void attn__q_vnni_pdot_q4_0(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *S, size_t rb, int64_t r0, int64_t r1) {
    attn__q_vnni_pstrip(y, ldy, xq, NULL, nb, M, S, rb, r0, r1, ATTN_QT_Q4_0);
}
static void attn__q_vnni_pdot_q4_1(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *S, size_t rb, int64_t r0, int64_t r1) {
    attn__q_vnni_pstrip(y, ldy, xq, NULL, nb, M, S, rb, r0, r1, ATTN_QT_Q4_1);
}
static void attn__q_vnni_pdot(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *S, size_t rb, int64_t r0,
                              int64_t r1, attn_qtype t) {
    if (t == ATTN_QT_Q8_0) attn__q_vnni_pdot_q8_0(y, ldy, xq, nb, M, S, rb, r0, r1);
    else if (t == ATTN_QT_Q4_0) attn__q_vnni_pdot_q4_0(y, ldy, xq, nb, M, S, rb, r0, r1);
    else attn__q_vnni_pdot_q4_1(y, ldy, xq, nb, M, S, rb, r0, r1);
}
#define QSTRIP attn__q_vnni_strip
#include "ops/quant_simd_tmpl.h"

/* One activation row to 8-bit blocks with 512-bit registers (a block is two): the same float32
 * operations as quant.c's quantize_row and quant_avx2.c (max |x|, d = amax/127, id = 1/d, x·id,
 * roundf's half-away-from-zero by truncation and a masked step), so the same bytes; the int8
 * narrowing by vpmovsdb and the sums by one reduction. ~2.5x faster than the AVX2 one on Zen 4
 * (the step's activations were ~7% of a batched decode step). */
static void attn__q_vnni_quantize(attn__q8blk *q, const float *x, int64_t nb) {
    const __m512 half = _mm512_set1_ps(0.5f);
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u), one = _mm512_set1_epi32(0x3f800000);
    for (int64_t b = 0; b < nb; b++) {
        const float *v = x + b * 32;
        const __m512 a0 = _mm512_loadu_ps(v), a1 = _mm512_loadu_ps(v + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(a0), _mm512_abs_ps(a1)));
        const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        __m512i qi[2];
        const __m512 av[2] = {a0, a1};
        for (int k = 0; k < 2; k++) {
            const __m512 s = _mm512_mul_ps(av[k], vid);
            const __m512 t = _mm512_roundscale_ps(s, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __mmask16 up = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_sub_ps(s, t)), half, _CMP_GE_OQ);
            /* +-1 with s's sign */
            const __m512 step = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(s), sign), one));
            qi[k] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, step));
        }
        const __m256i packed = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtsepi32_epi8(qi[0])), _mm512_cvtsepi32_epi8(qi[1]), 1);
        _mm256_storeu_si256((__m256i *)q[b].q, packed);
        q[b].d = d;
        q[b].s = d * (float)_mm512_reduce_add_epi32(_mm512_add_epi32(qi[0], qi[1]));
    }
}

#include "core/target_avx512_end.h"
attn__qdot_fn attn__qdot_avx512vnni(void) { return attn__q_vnni_qdot; }
attn__qdot_fn attn__pdot_avx512vnni(void) { return attn__q_vnni_pdot; }
attn__quantize_fn attn__quantize_avx512(void) { return attn__q_vnni_quantize; }
#else
attn__qdot_fn attn__qdot_avx512vnni(void) { return NULL; }
attn__qdot_fn attn__pdot_avx512vnni(void) { return NULL; }
attn__quantize_fn attn__quantize_avx512(void) { return NULL; }
#endif
