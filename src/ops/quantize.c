/* Weight quantizers: ggml's reference quantizers (ggml-quants.c quantize_row_*_ref, the code
 * llama.cpp's llama-quantize runs when no importance matrix is given), written from their
 * description: round-to-nearest with the scale search of make_qx_quants (Q6_K), make_q3_quants
 * (Q3_K) and make_qkx2_quants (Q2_K, Q4_K, Q5_K), the 6-bit super-block scales, and the plain
 * round-to-nearest of Q4_0 .. Q8_0. Every float32 operation is its own statement in ggml's order
 * (no FMA contraction), and ggml's nearest_int (ties to even through the float32 mantissa) is
 * used, so that the bytes can equal llama.cpp's. See include/attn_quant.h. */
#include "attn_quant.h"
#include "core/internal.h"
#include "core/pool.h"
#include "ops/quant_internal.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GROUP_MAX_EPS 1e-15f
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

static inline int nearest_int(float v) {
    float f = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &f, 4);
    return (i & 0x007fffff) - 0x00400000;
}

static inline void put_h(uint8_t *p, float f) {
    uint16_t h = attn_f32_to_f16(f);
    memcpy(p, &h, 2);
}
static inline float get_h(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return attn__f16_to_f32(h);
}

/* ---------------------------------------------------------------- 32-value blocks */

static void q8_0_block(uint8_t *y, const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) amax = MAX(amax, fabsf(x[j]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_h(y, d);
    for (int j = 0; j < 32; j++) {
        const float v = x[j] * id;
        y[2 + j] = (uint8_t)(int8_t)roundf(v);
    }
}

/* Q4_0 (nq = 16, offset 8) and Q5_0 (nq = 32, offset 16): d = max/-offset of the largest |x| */
static void qx_0_block(uint8_t *y, const float *x, int five) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    const float off = five ? 16.0f : 8.0f, d = max / -off, id = d != 0.0f ? 1.0f / d : 0.0f;
    const int top = five ? 31 : 15;
    put_h(y, d);
    uint8_t *qs = y + (five ? 6 : 2);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const float x0 = x[j] * id, x1 = x[16 + j] * id;
        const float a0 = x0 + (off + 0.5f), a1 = x1 + (off + 0.5f);
        const int q0 = MIN(top, (int8_t)a0), q1 = MIN(top, (int8_t)a1);
        qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
        qh |= (uint32_t)((q0 >> 4) & 1) << j;
        qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    if (five) memcpy(y + 2, &qh, 4);
}

/* Q4_1 (nq = 15) and Q5_1 (nq = 31): d = (max - min)/nq, m = min */
static void qx_1_block(uint8_t *y, const float *x, int five) {
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const int top = five ? 31 : 15;
    const float d = (max - min) / (float)top, id = d != 0.0f ? 1.0f / d : 0.0f;
    put_h(y, d);
    put_h(y + 2, min);
    uint8_t *qs = y + (five ? 8 : 4);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const float s0 = x[j] - min, s1 = x[16 + j] - min;
        const float x0 = s0 * id, x1 = s1 * id;
        const float a0 = x0 + 0.5f, a1 = x1 + 0.5f;
        const int q0 = MIN(top, (int)(uint8_t)a0), q1 = MIN(top, (int)(uint8_t)a1);
        qs[j] = (uint8_t)((q0 & 15) | (q1 & 15) << 4);
        qh |= (uint32_t)((q0 >> 4) & 1) << j;
        qh |= (uint32_t)((q1 >> 4) & 1) << (j + 16);
    }
    if (five) memcpy(y + 4, &qh, 4);
}

/* ---------------------------------------------------------------- scale searches */

/* symmetric: L[i] = l + nmax with l in [-nmax, nmax-1]; weights x² (rmse_type 1); 19 trial scales */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = MAX(-nmax, MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        const float w = x[i] * x[i];
        const float wx = w * x[i];
        const float wxl = wx * (float)l;
        sumlx += wxl;
        const float wl = w * (float)l;
        const float wl2 = wl * (float)l;
        suml2 += wl2;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        const float t = 0.1f * (float)is;
        const float num = (float)nmax + t;
        iscale = -num / max;
        sumlx = suml2 = 0.0f;
        for (int i = 0; i < n; i++) {
            int l = nearest_int(iscale * x[i]);
            l = MAX(-nmax, MIN(nmax - 1, l));
            const float w = x[i] * x[i];
            const float wx = w * x[i];
            const float wxl = wx * (float)l;
            sumlx += wxl;
            const float wl = w * (float)l;
            const float wl2 = wl * (float)l;
            suml2 += wl2;
        }
        const float lhs = sumlx * sumlx, rhs = best * suml2;
        if (suml2 > 0.0f && lhs > rhs) {
            for (int i = 0; i < n; i++) {
                int l = nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + MAX(-nmax, MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* symmetric 3-bit (nmax 4) with the coordinate-descent refinement (weights x²); L in 0..2·nmax-1 */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *L) {
    float max = 0.0f, amax = 0.0f;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        memset(L, 0, (size_t)n);
        return 0.0f;
    }
    const float iscale = (float)-nmax / max;
    float sumlx = 0.0f, suml2 = 0.0f;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * x[i]);
        l = MAX(-nmax, MIN(nmax - 1, l));
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        const float wx = w * x[i];
        const float wxl = wx * (float)l;
        sumlx += wxl;
        const float wl = w * (float)l;
        const float wl2 = wl * (float)l;
        suml2 += wl2;
    }
    for (int itry = 0; itry < 5; itry++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            const float wx = w * x[i];
            const float wxl = wx * (float)L[i];
            float slx = sumlx - wxl;
            if (slx > 0.0f) {
                const float wl = w * (float)L[i];
                const float wl2 = wl * (float)L[i];
                float sl2 = suml2 - wl2;
                const float xs = x[i] * sl2;
                int nl = nearest_int(xs / slx);
                nl = MAX(-nmax, MIN(nmax - 1, nl));
                if (nl != L[i]) {
                    const float wxn = wx * (float)nl;
                    slx += wxn;
                    const float wn = w * (float)nl;
                    const float wn2 = wn * (float)nl;
                    sl2 += wn2;
                    const float a = slx * slx, lhs = a * suml2, b = sumlx * sumlx, rhs = b * sl2;
                    if (sl2 > 0.0f && lhs > rhs) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* asymmetric: x ~ scale·L - the_min, L in 0..nmax, weighted least squares over nstep+1 trial
 * scales (use_mad: weighted absolute error instead of squared) */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min, uint8_t *Laux,
                              float rmin, float rdelta, int nstep, int use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        const float wx = w * x[i];
        sum_x += wx;
    }
    if (min > 0.0f) min = 0.0f;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.0f / iscale;
    float best_error = 0.0f;
    for (int i = 0; i < n; i++) {
        const float dx = x[i] - min;
        const int l = nearest_int(iscale * dx);
        L[i] = (uint8_t)MAX(0, MIN(nmax, l));
        const float sl = scale * (float)L[i];
        const float slm = sl + min;
        float diff = slm - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        const float we = weights[i] * diff;
        best_error += we;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; is++) {
        const float rd = rdelta * (float)is;
        const float num0 = rmin + rd;
        const float num = num0 + (float)nmax;
        iscale = num / (max - min);
        float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
        for (int i = 0; i < n; i++) {
            const float dx = x[i] - min;
            int l = nearest_int(iscale * dx);
            l = MAX(0, MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            const float w = weights[i];
            const float wl = w * (float)l;
            sum_l += wl;
            const float wl2 = wl * (float)l;
            sum_l2 += wl2;
            const float wlx = wl * x[i];
            sum_xl += wlx;
        }
        const float p1 = sum_w * sum_l2, p2 = sum_l * sum_l;
        const float D = p1 - p2;
        if (D > 0.0f) {
            const float a1 = sum_w * sum_xl, a2 = sum_x * sum_l;
            const float b1 = sum_l2 * sum_x, b2 = sum_l * sum_xl;
            float this_scale = (a1 - a2) / D;
            float this_min = (b1 - b2) / D;
            if (this_min > 0.0f) {
                this_min = 0.0f;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0.0f;
            for (int i = 0; i < n; i++) {
                const float sl = this_scale * (float)Laux[i];
                const float slm = sl + this_min;
                float diff = slm - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                const float we = weights[i] * diff;
                cur_error += we;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* ---------------------------------------------------------------- super-blocks */

static void q2_k_block(uint8_t *y, const float *x) {
    uint8_t L[256], Laux[16];
    float weights[16], mins[16], scales[16];
    uint8_t *sc = y, *qs = y + 16;
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 16; j++) {
        for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
        scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, 1);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0.0f) {
        const float iscale = 15.0f / max_scale;
        for (int j = 0; j < 16; j++) sc[j] = (uint8_t)nearest_int(iscale * scales[j]);
        put_h(y + 80, max_scale / 15.0f);
    } else {
        memset(sc, 0, 16);
        put_h(y + 80, 0.0f);
    }
    if (max_min > 0.0f) {
        const float iscale = 15.0f / max_min;
        for (int j = 0; j < 16; j++) sc[j] = (uint8_t)(sc[j] | nearest_int(iscale * mins[j]) << 4);
        put_h(y + 82, max_min / 15.0f);
    } else {
        put_h(y + 82, 0.0f);
    }
    const float dd = get_h(y + 80), dmm = get_h(y + 82);
    for (int j = 0; j < 16; j++) {
        const float d = dd * (float)(sc[j] & 15);
        if (d == 0.0f) continue;
        const float dm = dmm * (float)(sc[j] >> 4);
        for (int i = 0; i < 16; i++) {
            const float s = x[16 * j + i] + dm;
            const int l = nearest_int(s / d);
            L[16 * j + i] = (uint8_t)MAX(0, MIN(3, l));
        }
    }
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

static void q3_k_block(uint8_t *y, const float *x) {
    int8_t L[256];
    float scales[16];
    uint8_t *hm = y, *qs = y + 32, *sc = y + 96;
    float max_scale = 0.0f, amax = 0.0f;
    for (int j = 0; j < 16; j++) {
        scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
        const float s = fabsf(scales[j]);
        if (s > amax) {
            amax = s;
            max_scale = scales[j];
        }
    }
    memset(sc, 0, 12);
    if (max_scale != 0.0f) {
        const float iscale = -32.0f / max_scale;
        for (int j = 0; j < 16; j++) {
            int8_t l = (int8_t)nearest_int(iscale * scales[j]);
            l = (int8_t)(MAX(-32, MIN(31, l)) + 32);
            if (j < 8) sc[j] = (uint8_t)(l & 15);
            else sc[j - 8] = (uint8_t)(sc[j - 8] | (l & 15) << 4);
            l = (int8_t)(l >> 4);
            sc[j % 4 + 8] = (uint8_t)(sc[j % 4 + 8] | l << (2 * (j / 4)));
        }
        put_h(y + 108, 1.0f / iscale);
    } else {
        put_h(y + 108, 0.0f);
    }
    const float dd = get_h(y + 108);
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
        const int s = (lo | ((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4) - 32;
        const float d = dd * (float)s;
        if (d == 0.0f) continue;
        for (int i = 0; i < 16; i++) {
            int l = nearest_int(x[16 * j + i] / d);
            L[16 * j + i] = (int8_t)(MAX(-4, MIN(3, l)) + 4);
        }
    }
    memset(hm, 0, 32);
    int m = 0;
    uint8_t bit = 1;
    for (int j = 0; j < 256; j++) {
        if (L[j] > 3) {
            hm[m] |= bit;
            L[j] = (int8_t)(L[j] - 4);
        }
        if (++m == 32) {
            m = 0;
            bit = (uint8_t)(bit << 1);
        }
    }
    for (int j = 0; j < 256; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | L[j + l + 32] << 2 | L[j + l + 64] << 4 | L[j + l + 96] << 6);
}

/* Q4_K (five = 0) and Q5_K (five = 1) */
static void q45_k_block(uint8_t *y, const float *x, int five) {
    uint8_t L[256], Laux[32];
    float weights[32], mins[8], scales[8];
    uint8_t *s = y + 4;
    const int nmax = five ? 31 : 15;
    float max_scale = 0.0f, max_min = 0.0f;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0.0f;
        for (int l = 0; l < 32; l++) {
            const float sq = x[32 * j + l] * x[32 * j + l];
            sum_x2 += sq;
        }
        const float av_x = sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, five ? -0.5f : -1.0f, 0.1f, five ? 15 : 20, 0);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
    memset(s, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = MIN(63, ls);
        lm = MIN(63, lm);
        if (j < 4) {
            s[j] = ls;
            s[j + 4] = lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 15) | (lm & 15) << 4);
            s[j - 4] = (uint8_t)(s[j - 4] | (ls >> 4) << 6);
            s[j] = (uint8_t)(s[j] | (lm >> 4) << 6);
        }
    }
    put_h(y, max_scale / 63.0f);
    put_h(y + 2, max_min / 63.0f);
    const float dd = get_h(y), dmm = get_h(y + 2);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        if (j < 4) {
            sc = s[j] & 63;
            m = s[j + 4] & 63;
        } else {
            sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
            m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
        const float d = dd * (float)sc;
        if (d == 0.0f) continue;
        const float dm = dmm * (float)m;
        for (int i = 0; i < 32; i++) {
            const float v = x[32 * j + i] + dm;
            const int l = nearest_int(v / d);
            L[32 * j + i] = (uint8_t)MAX(0, MIN(nmax, l));
        }
    }
    if (!five) {
        uint8_t *q = y + 16;
        for (int j = 0; j < 256; j += 64, q += 32)
            for (int l = 0; l < 32; l++) q[l] = (uint8_t)(L[j + l] | L[j + l + 32] << 4);
        return;
    }
    uint8_t *qh = y + 16, *ql = y + 48;
    memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < 256; n += 64, ql += 32) {
        for (int j = 0; j < 32; j++) {
            int l1 = L[n + j], l2 = L[n + j + 32];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | l2 << 4);
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
    }
}

static void q6_k_block(uint8_t *y, const float *x) {
    int8_t L[256];
    float scales[16];
    float max_scale = 0.0f, max_abs = 0.0f;
    for (int ib = 0; ib < 16; ib++) {
        scales[ib] = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
        const float a = fabsf(scales[ib]);
        if (a > max_abs) {
            max_abs = a;
            max_scale = scales[ib];
        }
    }
    if (max_abs < GROUP_MAX_EPS) {
        memset(y, 0, 210);
        return;
    }
    const float iscale = -128.0f / max_scale;
    put_h(y + 208, 1.0f / iscale);
    int8_t *sc = (int8_t *)(y + 192);
    for (int ib = 0; ib < 16; ib++) sc[ib] = (int8_t)MIN(127, nearest_int(iscale * scales[ib]));
    const float dd = get_h(y + 208);
    for (int j = 0; j < 16; j++) {
        const float d = dd * (float)sc[j];
        if (d == 0.0f) continue;
        for (int i = 0; i < 16; i++) {
            int l = nearest_int(x[16 * j + i] / d);
            L[16 * j + i] = (int8_t)(MAX(-32, MIN(31, l)) + 32);
        }
    }
    uint8_t *ql = y, *qh = y + 128;
    for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
        for (int l = 0; l < 32; l++) {
            const int q1 = L[j + l] & 15, q2 = L[j + l + 32] & 15, q3 = L[j + l + 64] & 15, q4 = L[j + l + 96] & 15;
            ql[l] = (uint8_t)(q1 | q3 << 4);
            ql[l + 32] = (uint8_t)(q2 | q4 << 4);
            qh[l] = (uint8_t)((L[j + l] >> 4) | (L[j + l + 32] >> 4) << 2 | (L[j + l + 64] >> 4) << 4 | (L[j + l + 96] >> 4) << 6);
        }
}

/* ---------------------------------------------------------------- rows */

static void quantize_row(uint8_t *dst, const float *x, int64_t cols, attn_qtype t) {
    const int64_t bl = attn_qtype_block(t);
    const size_t bs = attn__qtype_block_bytes(t);
    if (t == ATTN_QT_F32) {
        memcpy(dst, x, sizeof(float) * (size_t)cols);
        return;
    }
    if (t == ATTN_QT_F16 || t == ATTN_QT_BF16) {
        for (int64_t i = 0; i < cols; i++) {
            uint16_t h = t == ATTN_QT_F16 ? attn_f32_to_f16(x[i]) : attn__f32_to_bf16(x[i]);
            memcpy(dst + 2 * i, &h, 2);
        }
        return;
    }
    for (int64_t b = 0; b < cols / bl; b++) {
        uint8_t *y = dst + (size_t)b * bs;
        const float *v = x + b * bl;
        switch (t) {
        case ATTN_QT_Q8_0: q8_0_block(y, v); break;
        case ATTN_QT_Q4_0: qx_0_block(y, v, 0); break;
        case ATTN_QT_Q5_0: qx_0_block(y, v, 1); break;
        case ATTN_QT_Q4_1: qx_1_block(y, v, 0); break;
        case ATTN_QT_Q5_1: qx_1_block(y, v, 1); break;
        case ATTN_QT_Q2_K: q2_k_block(y, v); break;
        case ATTN_QT_Q3_K: q3_k_block(y, v); break;
        case ATTN_QT_Q4_K: q45_k_block(y, v, 0); break;
        case ATTN_QT_Q5_K: q45_k_block(y, v, 1); break;
        case ATTN_QT_Q6_K: q6_k_block(y, v); break;
        default: break;
        }
    }
}

typedef struct {
    uint8_t *dst;
    const float *x;
    int64_t cols;
    attn_qtype t;
    size_t rb;
} attn__qrows_job;

static void attn__qrows(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__qrows_job *j = (const attn__qrows_job *)p;
    for (int64_t r = lo; r < hi; r++) quantize_row(j->dst + (size_t)r * j->rb, j->x + r * j->cols, j->cols, j->t);
}

int attn_quantize_rows(void *dst, const float *x, int64_t n, int64_t cols, attn_qtype t, int n_threads) {
    if (attn_qtype_block(t) == 0) return attn_set_error(ATTN_E_INVALID, "quantize: unknown type %d", (int)t);
    if (n < 0 || cols < 0) return attn_set_error(ATTN_E_INVALID, "quantize: negative extent");
    if (cols % attn_qtype_block(t))
        return attn_set_error(ATTN_E_INVALID, "quantize: %lld columns is not a multiple of the %s block (%lld values)", (long long)cols,
                              attn_qtype_name(t), (long long)attn_qtype_block(t));
    if ((!dst || !x) && n > 0 && cols > 0) return attn_set_error(ATTN_E_INVALID, "quantize: NULL argument");
    for (int64_t i = 0; i < n * cols; i++)
        if (!isfinite(x[i]))
            return attn_set_error(ATTN_E_RANGE, "quantize: value %lld (row %lld) is not finite", (long long)i, (long long)(cols ? i / cols : 0));
    const size_t rb = attn_qtype_row_bytes(t, cols);
    attn__qrows_job j = {(uint8_t *)dst, x, cols, t, rb};
    attn__pool_rows(n, 4, (double)n * (double)cols, n_threads, attn__qrows, &j);
    return ATTN_OK;
}
