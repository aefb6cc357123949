/* Q5_0, Q5_1 and the K-quants (Q2_K .. Q6_K): exact dequantization, ggml's Q8_K activation
 * quantization, the portable products and their dispatch (see include/attn_quant.h for the
 * layouts). The AVX2 products are in quant_kq_avx2.c; both use the same integer sums and the
 * same float32 operations per block, so that they agree bit for bit.
 * Dequantization follows gguf.quants (llama.cpp gguf-py) operation by operation: each product
 * and difference is its own statement, so that no compiler contracts it into an FMA. */
#include "attn_quant.h"
#include "core/internal.h"
#include "ops/quant_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int attn__qtype_ext(attn_qtype t) {
    switch (t) {
    case ATTN_QT_Q5_0: case ATTN_QT_Q5_1: case ATTN_QT_Q2_K: case ATTN_QT_Q3_K: case ATTN_QT_Q4_K: case ATTN_QT_Q5_K:
    case ATTN_QT_Q6_K: return 1;
    default: return 0;
    }
}

static float h2f(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return attn__f16_to_f32(h);
}

/* Q4_K / Q5_K: 6-bit scale and min of 32-value group j (ggml get_scale_min_k4) */
static void scale_min_k4(int j, const uint8_t *s, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q3_K: 6-bit scale of 16-value group j, minus 32 */
static int scale_q3k(int j, const uint8_t *s) {
    int lo = j < 8 ? s[j] & 15 : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* the 5-bit value j (0..31) of a Q5_0 / Q5_1 block */
static inline int q5_at(const uint8_t *qs, uint32_t qh, int j) {
    int lo = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
    return lo | (int)((qh >> j) & 1) << 4;
}

/* 2-bit value i of a Q2_K / Q3_K block: 128h + 32s + l -> (qs[32h + l] >> 2s) & 3 */
static inline int q2_at(const uint8_t *qs, int i) { return (qs[32 * (i >> 7) + (i & 31)] >> (2 * ((i >> 5) & 3))) & 3; }
/* 4-bit value i of a Q4_K / Q5_K block: 64c + 32s + l -> (qs[32c + l] >> 4s) & 15 */
static inline int q4_at(const uint8_t *qs, int i) { return (qs[32 * (i >> 6) + (i & 31)] >> (4 * ((i >> 5) & 1))) & 15; }
/* 6-bit value i of a Q6_K block (0..63) */
static inline int q6_at(const uint8_t *ql, const uint8_t *qh, int i) {
    int h = i >> 7, s = (i >> 5) & 3, l = i & 31;
    int lo = (ql[64 * h + l + 32 * (s & 1)] >> (4 * (s >> 1))) & 15;
    int hi = (qh[32 * h + l] >> (2 * s)) & 3;
    return lo | hi << 4;
}

void attn__dequant_row_ext(float *out, const uint8_t *row, attn_qtype t, int64_t cols) {
    const size_t bs = attn__qtype_block_bytes(t);
    const int64_t bl = attn_qtype_block(t), nb = cols / bl;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * bs;
        float *o = out + b * bl;
        switch (t) {
        case ATTN_QT_Q5_0:
        case ATTN_QT_Q5_1: {
            const int one = t == ATTN_QT_Q5_1;
            const float d = h2f(blk), m = one ? h2f(blk + 2) : 0.0f;
            uint32_t qh;
            memcpy(&qh, blk + 2 + 2 * one, 4);
            const uint8_t *qs = blk + 6 + 2 * one;
            for (int j = 0; j < 32; j++) {
                const int q = q5_at(qs, qh, j);
                if (one) {
                    const float p = d * (float)q;
                    o[j] = p + m;
                } else {
                    o[j] = d * (float)(q - 16);
                }
            }
            break;
        }
        case ATTN_QT_Q2_K: {
            const uint8_t *sc = blk, *qs = blk + 16;
            const float d = h2f(blk + 80), dmin = h2f(blk + 82);
            for (int g = 0; g < 16; g++) {
                const float dl = d * (float)(sc[g] & 15), ml = dmin * (float)(sc[g] >> 4);
                for (int l = 0; l < 16; l++) {
                    const float p = dl * (float)q2_at(qs, 16 * g + l);
                    o[16 * g + l] = p - ml;
                }
            }
            break;
        }
        case ATTN_QT_Q3_K: {
            const uint8_t *hm = blk, *qs = blk + 32, *sc = blk + 96;
            const float d = h2f(blk + 108);
            for (int g = 0; g < 16; g++) {
                const float dl = d * (float)scale_q3k(g, sc);
                for (int l = 0; l < 16; l++) {
                    const int i = 16 * g + l;
                    const int q = q2_at(qs, i) - (((hm[i & 31] >> (i >> 5)) & 1) ? 0 : 4);
                    o[i] = dl * (float)q;
                }
            }
            break;
        }
        case ATTN_QT_Q4_K:
        case ATTN_QT_Q5_K: {
            const float d = h2f(blk), dmin = h2f(blk + 2);
            const uint8_t *s = blk + 4, *qh = blk + 16, *qs = blk + (t == ATTN_QT_Q5_K ? 48 : 16);
            for (int j = 0; j < 8; j++) {
                int sc, m;
                scale_min_k4(j, s, &sc, &m);
                const float dl = d * (float)sc, ml = dmin * (float)m;
                for (int l = 0; l < 32; l++) {
                    const int i = 32 * j + l;
                    int q = q4_at(qs, i);
                    if (t == ATTN_QT_Q5_K) q |= ((qh[l] >> j) & 1) << 4;
                    const float p = dl * (float)q;
                    o[i] = p - ml;
                }
            }
            break;
        }
        case ATTN_QT_Q6_K: {
            const uint8_t *ql = blk, *qh = blk + 128;
            const int8_t *sc = (const int8_t *)(blk + 192);
            const float d = h2f(blk + 208);
            for (int g = 0; g < 16; g++) {
                const float dl = d * (float)sc[g];
                for (int l = 0; l < 16; l++) o[16 * g + l] = dl * (float)(q6_at(ql, qh, 16 * g + l) - 32);
            }
            break;
        }
        default: break;
        }
    }
}

void attn__kscales(attn__kblk *u, const uint8_t *blk, attn_qtype t) {
    switch (t) {
    case ATTN_QT_Q2_K:
        for (int g = 0; g < 16; g++) {
            u->sc[g] = (int16_t)(blk[g] & 15);
            u->mn[g] = (int16_t)-(blk[g] >> 4);
        }
        u->d = h2f(blk + 80);
        u->dm = h2f(blk + 82);
        return;
    case ATTN_QT_Q3_K:
        for (int g = 0; g < 16; g++) {
            u->sc[g] = (int16_t)scale_q3k(g, blk + 96);
            u->mn[g] = (int16_t)(-4 * u->sc[g]);
        }
        u->d = u->dm = h2f(blk + 108);
        return;
    case ATTN_QT_Q4_K:
    case ATTN_QT_Q5_K:
        for (int j = 0; j < 8; j++) {
            int sc, m;
            scale_min_k4(j, blk + 4, &sc, &m);
            u->sc[2 * j] = u->sc[2 * j + 1] = (int16_t)sc;
            u->mn[2 * j] = u->mn[2 * j + 1] = (int16_t)-m;
        }
        u->d = h2f(blk);
        u->dm = h2f(blk + 2);
        return;
    case ATTN_QT_Q6_K:
        for (int g = 0; g < 16; g++) {
            u->sc[g] = (int8_t)blk[192 + g];
            u->mn[g] = (int16_t)(-32 * u->sc[g]);
        }
        u->d = u->dm = h2f(blk + 208);
        return;
    default: memset(u, 0, sizeof *u); return;
    }
}

void attn__kunpack(attn__kblk *u, const uint8_t *blk, attn_qtype t) {
    attn__kscales(u, blk, t);
    switch (t) {
    case ATTN_QT_Q2_K:
        for (int i = 0; i < 256; i++) u->q[i] = (uint8_t)q2_at(blk + 16, i);
        return;
    case ATTN_QT_Q3_K: /* q - 4·!hbit + 4 = q + 4·hbit, in 0..7 (the -4 goes into mn) */
        for (int i = 0; i < 256; i++) u->q[i] = (uint8_t)(q2_at(blk + 32, i) + 4 * ((blk[i & 31] >> (i >> 5)) & 1));
        return;
    case ATTN_QT_Q4_K:
    case ATTN_QT_Q5_K: {
        const uint8_t *qh = blk + 16, *qs = blk + (t == ATTN_QT_Q5_K ? 48 : 16);
        for (int i = 0; i < 256; i++) {
            int q = q4_at(qs, i);
            if (t == ATTN_QT_Q5_K) q |= ((qh[i & 31] >> (i >> 5)) & 1) << 4;
            u->q[i] = (uint8_t)q;
        }
        return;
    }
    case ATTN_QT_Q6_K:
        for (int i = 0; i < 256; i++) u->q[i] = (uint8_t)q6_at(blk, blk + 128, i);
        return;
    default: return;
    }
}

/* ggml's nearest_int: round to nearest, ties to even, through the float32 mantissa (|v| < 2^22) */
static inline int nearest_int(float v) {
    float f = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

void attn__quantize_q8k(attn__q8k *q, const float *x, int64_t nb) {
    for (int64_t b = 0; b < nb; b++) {
        const float *v = x + b * 256;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 256; j++)
            if (fabsf(v[j]) > amax) {
                amax = fabsf(v[j]);
                max = v[j];
            }
        if (amax == 0.0f) {
            memset(&q[b], 0, sizeof q[b]);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < 256; j++) {
            int l = nearest_int(iscale * v[j]);
            q[b].q[j] = (int8_t)(l > 127 ? 127 : l);
        }
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += q[b].q[16 * g + l];
            q[b].bsums[g] = (int16_t)s;
        }
        q[b].d = 1.0f / iscale;
    }
}

/* ---------------------------------------------------------------- portable products */

static void kdot_portable(float *y, int64_t ldy, const void *xqv, int64_t nb, int64_t M, const uint8_t *W, size_t rb, int64_t r0,
                          int64_t r1, attn_qtype t) {
    const size_t bs = attn__qtype_block_bytes(t);
    if (t == ATTN_QT_Q5_0 || t == ATTN_QT_Q5_1) {
        const attn__q8blk *xq = (const attn__q8blk *)xqv;
        const int one = t == ATTN_QT_Q5_1;
        for (int64_t m = 0; m < M; m++)
            for (int64_t r = r0; r < r1; r++) {
                float acc = 0.0f;
                for (int64_t b = 0; b < nb; b++) {
                    const uint8_t *blk = W + (size_t)r * rb + (size_t)b * bs;
                    const attn__q8blk *xb = xq + m * nb + b;
                    uint32_t qh;
                    memcpy(&qh, blk + 2 + 2 * one, 4);
                    const uint8_t *qs = blk + 6 + 2 * one;
                    int32_t dot = 0;
                    for (int j = 0; j < 32; j++) dot += q5_at(qs, qh, j) * xb->q[j];
                    const float d = h2f(blk), mm = one ? h2f(blk + 2) : -16.0f * d;
                    acc += (float)dot * (d * xb->d) + mm * xb->s;
                }
                y[m * ldy + r] = acc;
            }
        return;
    }
    const attn__q8k *xq = (const attn__q8k *)xqv;
    attn__kblk u;
    for (int64_t r = r0; r < r1; r++) {
        for (int64_t m = 0; m < M; m++) y[m * ldy + r] = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            attn__kunpack(&u, W + (size_t)r * rb + (size_t)b * bs, t);
            for (int64_t m = 0; m < M; m++) {
                const attn__q8k *xb = xq + m * nb + b;
                int32_t isum = 0, msum = 0;
                for (int g = 0; g < 16; g++) {
                    int32_t s = 0;
                    for (int l = 0; l < 16; l++) s += (int32_t)u.q[16 * g + l] * xb->q[16 * g + l];
                    isum += s * u.sc[g];
                    msum += (int32_t)u.mn[g] * xb->bsums[g];
                }
                y[m * ldy + r] += (u.d * xb->d) * (float)isum + (u.dm * xb->d) * (float)msum;
            }
        }
    }
}

/* ---------------------------------------------------------------- dispatch */

attn__quantize_q8k_fn attn__quantize_q8k_for(attn_qkernel k) {
    k = attn__resolve_kernel(k);
    if ((k == ATTN_QK_AVX2 || k == ATTN_QK_AVX512VNNI) && attn__quantize_q8k_avx2()) return attn__quantize_q8k_avx2();
    return attn__quantize_q8k;
}

int attn__kq_vnni(attn_qtype t) { return attn_qtype_block(t) == 256 && attn__kdot_avx512vnni() != NULL; }

#define XQ_STACK_BYTES 12288

attn__kdot_fn attn__kdot_for(attn_qkernel k) {
    k = attn__resolve_kernel(k);
    if (k == ATTN_QK_AVX512VNNI && attn__kdot_avx512vnni()) return attn__kdot_avx512vnni();
    if ((k == ATTN_QK_AVX2 || k == ATTN_QK_AVX512VNNI) && attn__kdot_avx2()) return attn__kdot_avx2();
    return kdot_portable;
}

int attn__qmatmul_n_k(float *const *y, const float *x, const attn_qmatrix *w, int count, int64_t M, int nt) {
    const int64_t K = w[0].cols, nb = K / 256;
    _Alignas(32) unsigned char small[XQ_STACK_BYTES];
    const size_t need = (size_t)(M * nb) * sizeof(attn__q8k);
    attn__q8k *xq = need <= sizeof small ? (attn__q8k *)(void *)small : (attn__q8k *)malloc(need);
    if (!xq) return attn_set_error(ATTN_E_NOMEM, "qmatmul: out of memory");
    const int rc = attn__quantize_acts(xq, x, M, K, ATTN_QK_AUTO, 1, nt);
    if (rc == 0) {
        const attn__rows_job j = {count, y, w, xq, nb, M, NULL, attn__kdot_for(ATTN_QK_AUTO), NULL};
        attn__rows_run(&j, nt);
    }
    if ((void *)xq != (void *)small) free(xq);
    return rc;
}

int attn__qmatmul_ext(float *y, const float *x, const attn_qmatrix *w, int64_t M, int nt, attn_qkernel k) {
    const int64_t K = w->cols;
    const int kq = attn_qtype_block(w->type) == 256;
    const int64_t nb = K / (kq ? 256 : 32);
    const size_t xbs = kq ? sizeof(attn__q8k) : sizeof(attn__q8blk);
    k = attn__resolve_kernel(k);
    attn__kdot_fn fn = attn__kdot_for(k);
    _Alignas(32) unsigned char small[XQ_STACK_BYTES];
    const size_t need = (size_t)(M * nb) * xbs;
    void *xq = need <= sizeof small ? (void *)small : malloc(need);
    if (!xq) return attn_set_error(ATTN_E_NOMEM, "qmatmul: out of memory");
    const int rc = attn__quantize_acts(xq, x, M, K, k, kq, nt);
    if (rc == 0) {
        attn_qmatrix w1 = *w;
        float *const ys[1] = {y};
        const attn__rows_job j = {1, ys, &w1, xq, nb, M, NULL, fn, NULL};
        attn__rows_run(&j, nt);
    }
    if (xq != (void *)small) free(xq);
    return rc;
}

int attn_qmatrix_check(const attn_qmatrix *w) {
    if (!w || w->rows < 0 || w->cols < 0 || attn_qtype_block(w->type) == 0 || (!w->data && w->rows > 0 && w->cols > 0))
        return attn_set_error(ATTN_E_INVALID, "qmatrix_check: bad matrix");
    if (w->cols % attn_qtype_block(w->type))
        return attn_set_error(ATTN_E_INVALID, "qmatrix_check: %lld columns is not a multiple of the %s block", (long long)w->cols,
                              attn_qtype_name(w->type));
    /* byte offsets of the f16 scales inside a block */
    int off[2] = {-1, -1};
    switch (w->type) {
    case ATTN_QT_Q8_0: case ATTN_QT_Q4_0: case ATTN_QT_Q5_0: off[0] = 0; break;
    case ATTN_QT_Q4_1: case ATTN_QT_Q5_1: case ATTN_QT_Q4_K: case ATTN_QT_Q5_K: off[0] = 0, off[1] = 2; break;
    case ATTN_QT_Q2_K: off[0] = 80, off[1] = 82; break;
    case ATTN_QT_Q3_K: off[0] = 108; break;
    case ATTN_QT_Q6_K: off[0] = 208; break;
    default: return ATTN_OK;
    }
    const size_t bs = attn__qtype_block_bytes(w->type);
    const int64_t nb = w->rows * (w->cols / attn_qtype_block(w->type));
    const uint8_t *p = (const uint8_t *)w->data;
    for (int64_t b = 0; b < nb; b++)
        for (int s = 0; s < 2 && off[s] >= 0; s++) {
            uint16_t h;
            memcpy(&h, p + (size_t)b * bs + off[s], 2);
            if ((h & 0x7c00) == 0x7c00) {
                const int64_t per = w->cols / attn_qtype_block(w->type);
                return attn_set_error(ATTN_E_FORMAT, "%s block %lld of row %lld has a %sscale that is %s (f16 0x%04x)", attn_qtype_name(w->type),
                                      (long long)(b % per), (long long)(b / per), s ? "min " : "", (h & 0x3ff) ? "NaN" : "infinite", h);
            }
        }
    return ATTN_OK;
}
