/* Positional encodings: sinusoidal, learned, rotary (RoPE) and ALiBi (see attn_ops.h). */
#include "attn_ops.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>

int attn_pe_sinusoidal(attn_tensor *out, int64_t offset) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "pe_sinusoidal: out is NULL");
    if (out->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "pe_sinusoidal: out must be float32");
    if (out->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "pe_sinusoidal: out must be [L, D], got %d-D", out->ndim);
    if (offset < 0) return attn_set_error(ATTN_E_INVALID, "pe_sinusoidal: offset must be >= 0");
    int64_t L = out->shape[0], D = out->shape[1];
    float *o = (float *)out->data;
    for (int64_t l = 0; l < L; l++) {
        double pos = (double)(offset + l);
        for (int64_t c = 0; c < D; c++) {
            int64_t two_i = c - (c & 1); /* channels 2i and 2i+1 share frequency 10000^(-2i/D) */
            double angle = pos * pow(10000.0, -(double)two_i / (double)D);
            o[l * out->stride[0] + c * out->stride[1]] = (float)((c & 1) ? cos(angle) : sin(angle));
        }
    }
    return ATTN_OK;
}

int attn_pe_learned(attn_tensor *out, const attn_tensor *table, int64_t offset) {
    if (!out || !table) return attn_set_error(ATTN_E_INVALID, "pe_learned: NULL argument");
    if (out->dtype != ATTN_F32 || table->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "pe_learned: out and table must be float32");
    if (out->ndim != 2 || table->ndim != 2 || out->shape[1] != table->shape[1])
        return attn_set_error(ATTN_E_SHAPE, "pe_learned: out must be [L, E] and table [P, E] with the same E");
    if (offset < 0 || offset + out->shape[0] > table->shape[0])
        return attn_set_error(ATTN_E_RANGE, "pe_learned: positions %lld..%lld exceed the table's %lld positions",
                              (long long)offset, (long long)(offset + out->shape[0] - 1), (long long)table->shape[0]);
    for (int64_t l = 0; l < out->shape[0]; l++)
        for (int64_t e = 0; e < out->shape[1]; e++)
            ((float *)out->data)[l * out->stride[0] + e * out->stride[1]] =
                ((const float *)table->data)[(offset + l) * table->stride[0] + e * table->stride[1]];
    return ATTN_OK;
}

int attn_rope(attn_tensor *x, int64_t offset, float theta, int64_t rotary_dim, attn_rope_layout layout) {
    if (!x) return attn_set_error(ATTN_E_INVALID, "rope: x is NULL");
    if (x->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "rope: x must be float32");
    if (x->ndim != 4) return attn_set_error(ATTN_E_SHAPE, "rope: x must be [B, H, L, D], got %d-D", x->ndim);
    int64_t D = x->shape[3];
    int64_t R = rotary_dim ? rotary_dim : D;
    if (R < 0 || R > D || (R & 1))
        return attn_set_error(ATTN_E_INVALID, "rope: rotary_dim %lld must be even and <= head_dim %lld", (long long)R,
                              (long long)D);
    if (!(theta > 0.0f) || !isfinite(theta)) return attn_set_error(ATTN_E_INVALID, "rope: theta must be > 0");
    if (offset < 0) return attn_set_error(ATTN_E_INVALID, "rope: offset must be >= 0");
    if (layout != ATTN_ROPE_HALF && layout != ATTN_ROPE_INTERLEAVED)
        return attn_set_error(ATTN_E_INVALID, "rope: unknown layout %d", (int)layout);
    int64_t half = R / 2;
    for (int64_t l = 0; l < x->shape[2]; l++) {
        double pos = (double)(offset + l);
        for (int64_t i = 0; i < half; i++) {
            double ang = pos * pow((double)theta, -2.0 * (double)i / (double)R);
            double c = cos(ang), s = sin(ang);
            int64_t i0 = layout == ATTN_ROPE_HALF ? i : 2 * i;
            int64_t i1 = layout == ATTN_ROPE_HALF ? i + half : 2 * i + 1;
            for (int64_t b = 0; b < x->shape[0]; b++)
                for (int64_t h = 0; h < x->shape[1]; h++) {
                    float *p0 = attn__f32_at4(x, b, h, l, i0), *p1 = attn__f32_at4(x, b, h, l, i1);
                    double a = *p0, bb = *p1;
                    *p0 = (float)(a * c - bb * s);
                    *p1 = (float)(bb * c + a * s);
                }
        }
    }
    return ATTN_OK;
}

/* Slopes for a power-of-two head count n: geometric sequence starting at 2^(-8/n). */
static void attn__alibi_pow2(float *s, int64_t n, int64_t count, int64_t step) {
    for (int64_t h = 0; h < count; h++) s[h] = (float)pow(2.0, -8.0 * (double)(h * step + 1) / (double)n);
}

int attn_alibi_slopes(float *slopes, int64_t n_heads) {
    if (!slopes || n_heads <= 0) return attn_set_error(ATTN_E_INVALID, "alibi_slopes: need n_heads > 0 and an output array");
    int64_t p = 1;
    while (p * 2 <= n_heads) p *= 2;
    attn__alibi_pow2(slopes, p, p, 1);
    /* remaining heads: every other slope (the 1st, 3rd, ...) of the 2p-head sequence */
    if (n_heads > p) attn__alibi_pow2(slopes + p, 2 * p, n_heads - p, 2);
    return ATTN_OK;
}

int attn_alibi_bias(attn_tensor *out) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "alibi_bias: out is NULL");
    if (out->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "alibi_bias: out must be float32");
    if (out->ndim != 3) return attn_set_error(ATTN_E_SHAPE, "alibi_bias: out must be [H, Lq, Lk]");
    int64_t H = out->shape[0], Lq = out->shape[1], Lk = out->shape[2];
    if (H == 0) return ATTN_OK;
    float *slopes = (float *)malloc(sizeof(float) * (size_t)H);
    if (!slopes) return attn_set_error(ATTN_E_NOMEM, "alibi_bias: out of memory");
    attn_alibi_slopes(slopes, H);
    for (int64_t h = 0; h < H; h++)
        for (int64_t i = 0; i < Lq; i++)
            for (int64_t j = 0; j < Lk; j++) {
                int64_t dist = i + Lk - Lq - j;
                if (dist < 0) dist = -dist;
                ((float *)out->data)[h * out->stride[0] + i * out->stride[1] + j * out->stride[2]] =
                    -slopes[h] * (float)dist;
            }
    free(slopes);
    return ATTN_OK;
}
