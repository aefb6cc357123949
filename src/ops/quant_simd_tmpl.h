/* Quantized dot-product kernels (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), 256-bit integer lanes; included by
 * quant_avx2.c and quant_avx512.c with DOT_U8S8(u8 weights, s8 activations) -> 8 x int32 and
 * QNAME(q5hi)(nibbles, qh) (the 32 values 0..15 of a Q5 block with bit j of qh added as 16) defined:
 *   AVX2:        vpmaddubsw (u8·s8 pairs -> s16) + vpmaddwd with ones (-> s32)
 *   AVX-512 VNNI: vpdpbusd (u8·s8 quads -> s32 in one instruction)
 * Products never saturate: Q4 / Q5 weights are 0..15 / 0..31 (|31·127·2| < 32767), Q8_0 weights enter as
 * |w| (0..128) with the sign moved onto the activation (|128·127·2| = 32512 < 32767).
 * A tile is RT weight rows x MT activation rows with independent float accumulators, so that
 * the FMA chains overlap (decode, MT = 1, uses RT = 4). Every tile computes an output with the
 * same float operations in the same order (quant_tile_tmpl.h), so a row's result does not
 * depend on the tile it falls in: a sequence batched with others gives its logits alone. */

static inline float QNAME(hsum)(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* block bytes and offset of the 16 nibble bytes of the legacy types (t is a constant in each
 * kernel below, so these fold away) */
static inline size_t QNAME(bsize)(attn_qtype t) {
    return t == ATTN_QT_Q8_0 ? 34 : t == ATTN_QT_Q4_0 ? 18 : t == ATTN_QT_Q4_1 ? 20 : t == ATTN_QT_Q5_0 ? 22 : 24;
}
static inline size_t QNAME(qs_off)(attn_qtype t) { return t == ATTN_QT_Q4_0 ? 2 : t == ATTN_QT_Q4_1 ? 4 : t == ATTN_QT_Q5_0 ? 6 : 8; }

#if defined(__clang__)
#define QUNROLL _Pragma("unroll")
#else
#define QUNROLL _Pragma("GCC unroll 16")
#endif
#define RT 4
#define MT 1
#define TILE_NAME QNAME(tile_4_1)
#include "ops/quant_tile_tmpl.h"
#define RT 1
#define MT 1
#define TILE_NAME QNAME(tile_1_1)
#include "ops/quant_tile_tmpl.h"
#define RT 2
#define MT 4
#define TILE_NAME QNAME(tile_2_4)
#include "ops/quant_tile_tmpl.h"
#define RT 1
#define MT 4
#define TILE_NAME QNAME(tile_1_4)
#include "ops/quant_tile_tmpl.h"

static inline __attribute__((always_inline)) void QNAME(qdot_t)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb,
                        int64_t r0, int64_t r1, const attn_qtype t) {
    int64_t r = r0;
    if (M == 1) {
        for (; r + 4 <= r1; r += 4) QNAME(tile_4_1)(y, ldy, xq, nb, W, rb, r, 0, t);
        for (; r < r1; r++) QNAME(tile_1_1)(y, ldy, xq, nb, W, rb, r, 0, t);
        return;
    }
#ifdef QSTRIP
    if (M >= 2 && QSTRIP(y, ldy, xq, nb, M, W, rb, r0, r1, t)) return;
#endif
    /* several activation rows: 2 weight rows x 4 activation rows per tile, weight rows in
     * groups of 16 so that they stay in L1 while every activation row passes */
    for (int64_t g = r0; g < r1; g += 16) {
        int64_t ge = g + 16 < r1 ? g + 16 : r1;
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) {
            int64_t rr = g;
            for (; rr + 2 <= ge; rr += 2) QNAME(tile_2_4)(y, ldy, xq, nb, W, rb, rr, m, t);
            for (; rr < ge; rr++) QNAME(tile_1_4)(y, ldy, xq, nb, W, rb, rr, m, t);
        }
        for (; m < M; m++) {
            int64_t rr = g;
            for (; rr + 4 <= ge; rr += 4) QNAME(tile_4_1)(y, ldy, xq, nb, W, rb, rr, m, t);
            for (; rr < ge; rr++) QNAME(tile_1_1)(y, ldy, xq, nb, W, rb, rr, m, t);
        }
    }
}

static void QNAME(qdot_q8_0)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1) {
    QNAME(qdot_t)(y, ldy, xq, nb, M, W, rb, r0, r1, ATTN_QT_Q8_0);
}
static void QNAME(qdot_q4_0)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1) {
    QNAME(qdot_t)(y, ldy, xq, nb, M, W, rb, r0, r1, ATTN_QT_Q4_0);
}
static void QNAME(qdot_q4_1)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1) {
    QNAME(qdot_t)(y, ldy, xq, nb, M, W, rb, r0, r1, ATTN_QT_Q4_1);
}
static void QNAME(qdot_q5_0)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1) {
    QNAME(qdot_t)(y, ldy, xq, nb, M, W, rb, r0, r1, ATTN_QT_Q5_0);
}
static void QNAME(qdot_q5_1)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0, int64_t r1) {
    QNAME(qdot_t)(y, ldy, xq, nb, M, W, rb, r0, r1, ATTN_QT_Q5_1);
}
static void QNAME(qdot)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb,
                        int64_t r0, int64_t r1, attn_qtype t) {
    if (t == ATTN_QT_Q8_0) QNAME(qdot_q8_0)(y, ldy, xq, nb, M, W, rb, r0, r1);
    else if (t == ATTN_QT_Q4_0) QNAME(qdot_q4_0)(y, ldy, xq, nb, M, W, rb, r0, r1);
    else if (t == ATTN_QT_Q5_0) QNAME(qdot_q5_0)(y, ldy, xq, nb, M, W, rb, r0, r1);
    else if (t == ATTN_QT_Q5_1) QNAME(qdot_q5_1)(y, ldy, xq, nb, M, W, rb, r0, r1);
    else QNAME(qdot_q4_1)(y, ldy, xq, nb, M, W, rb, r0, r1);
}
