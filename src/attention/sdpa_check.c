/* attn_sdpa's argument validation, shared by every implementation (attn_sdpa_check and the
 * private checks of sdpa_internal.h): shapes, dtypes, strides, masks, finiteness. */
#include "attn_attention.h"
#include "attention/sdpa_internal.h"
#include "core/internal.h"
#include "core/simd_math.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* A 4-D view of a float dtype: float32, bfloat16 or float16 when `halves`, else float32 only. */
static int attn__check_4d(const attn_tensor *t, const char *name, int halves) {
    if (halves ? !attn__is_float_dtype(t->dtype) : t->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "sdpa: %s must be %s, got %s", name,
                              halves ? "float32, bfloat16 or float16" : "float32", attn_dtype_name(t->dtype));
    if (t->ndim != 4)
        return attn_set_error(ATTN_E_SHAPE, "sdpa: %s must be 4-D [B, H, L, D], got %d-D", name, t->ndim);
    if (!t->data && attn_tensor_numel(t) > 0)
        return attn_set_error(ATTN_E_INVALID, "sdpa: %s has no data", name);
    return ATTN_OK;
}

/* 1 if any of n 16-bit halves at p (stride s) is NaN or +-inf: exponent bits (expmask) all ones. */
static int attn__any_nonfinite_h(const uint16_t *p, int64_t n, int64_t s, uint16_t expmask) {
    unsigned bad = 0;
    for (int64_t i = 0; i < n; i++) bad |= (p[i * s] & expmask) == expmask;
    return bad != 0;
}

/* A row of n elements of a float dtype at p (stride s) holds NaN or inf. */
int attn__any_nonfinite_dt(const void *p, attn_dtype dt, int64_t n, int64_t s) {
    if (dt == ATTN_F32) return attn__any_nonfinite((const float *)p, n, s);
    return attn__any_nonfinite_h((const uint16_t *)p, n, s, dt == ATTN_BF16 ? 0x7f80u : 0x7c00u);
}

static inline const void *attn__at4(const attn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return (const char *)t->data +
           (size_t)(a * t->stride[0] + b * t->stride[1] + c * t->stride[2] + d * t->stride[3]) * attn_dtype_size(t->dtype);
}

/* 1 if a 4-D float view holds NaN / inf: a vectorised pass per row, or per [H, D] block when the
 * heads of a position lie side by side (a layer's q / k / v / out: one pass over H·D floats
 * instead of H calls of D, the check was ~3% of a ViT forward) */
static int attn__any_nonfinite_4d(const attn_tensor *t) {
    if (attn_tensor_numel(t) == 0) return 0;
    const int merge = t->stride[3] == 1 && t->stride[1] == t->shape[3];
    const int64_t nb = merge ? 1 : t->shape[1], n = merge ? t->shape[1] * t->shape[3] : t->shape[3];
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < nb; b++)
            for (int64_t c = 0; c < t->shape[2]; c++)
                if (attn__any_nonfinite_dt(attn__at4(t, a, b, c, 0), t->dtype, n, t->stride[3])) return 1;
    return 0;
}

/* Scan a 4-D float view for NaN / inf; report the first index. */
static int attn__check_finite(const attn_tensor *t, const char *name) {
    if (!attn__any_nonfinite_4d(t)) return ATTN_OK; /* also avoids looping over huge zero-size shapes */
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++) {
                const void *row = attn__at4(t, a, b, c, 0);
                if (!attn__any_nonfinite_dt(row, t->dtype, t->shape[3], t->stride[3])) continue;
                for (int64_t d = 0; d < t->shape[3]; d++) {
                    float x = attn__load_f32(attn__at4(t, a, b, c, d), t->dtype);
                    if (!isfinite(x))
                        return attn_set_error(ATTN_E_RANGE, "sdpa: %s[%lld, %lld, %lld, %lld] is %s", name,
                                              (long long)a, (long long)b, (long long)c, (long long)d,
                                              isnan(x) ? "NaN" : "infinite");
                }
            }
    return ATTN_OK;
}

int attn__sdpa_mask_view(attn__mask_view *mv, const attn_tensor *mask, int64_t B, int64_t H, int64_t Lq,
                         int64_t Lk) {
    memset(mv, 0, sizeof *mv);
    if (!mask) return ATTN_OK;
    if (mask->dtype != ATTN_BOOL && mask->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "sdpa: mask must be bool or float32, got %s",
                              attn_dtype_name(mask->dtype));
    if (mask->ndim < 1 || mask->ndim > 4)
        return attn_set_error(ATTN_E_SHAPE, "sdpa: mask must have 1 to 4 dims, got %d", mask->ndim);
    if (!mask->data && attn_tensor_numel(mask) > 0)
        return attn_set_error(ATTN_E_INVALID, "sdpa: mask has no data");
    const int64_t full[4] = {B, H, Lq, Lk};
    const char *names[4] = {"B", "H", "Lq", "Lk"};
    int off = 4 - mask->ndim;
    for (int i = 0; i < 4; i++) {
        if (i < off) {
            mv->stride[i] = 0;
            continue;
        }
        int64_t e = mask->shape[i - off];
        if (e == full[i]) {
            mv->stride[i] = full[i] == 1 ? 0 : mask->stride[i - off];
        } else if (e == 1) {
            mv->stride[i] = 0;
        } else {
            return attn_set_error(ATTN_E_SHAPE,
                                  "sdpa: mask extent %lld at dim %d does not broadcast to %s = %lld (target [B, H, Lq, Lk] = [%lld, %lld, %lld, %lld])",
                                  (long long)e, i - off, names[i], (long long)full[i], (long long)B, (long long)H,
                                  (long long)Lq, (long long)Lk);
        }
    }
    mv->data = mask->data;
    mv->is_bool = mask->dtype == ATTN_BOOL;
    mv->present = 1;
    if (!mv->is_bool && attn_tensor_numel(mask) > 0) { /* reject NaN and +inf in the additive mask */
        for (int64_t a = 0; a < B; a++)
            for (int64_t b = 0; b < (mv->stride[1] ? H : 1); b++)
                for (int64_t c = 0; c < (mv->stride[2] ? Lq : 1); c++)
                    for (int64_t d = 0; d < (mv->stride[3] ? Lk : 1); d++) {
                        if (a > 0 && mv->stride[0] == 0) break;
                        float x = ((const float *)mv->data)[a * mv->stride[0] + b * mv->stride[1] +
                                                            c * mv->stride[2] + d * mv->stride[3]];
                        if (isnan(x) || x == INFINITY)
                            return attn_set_error(ATTN_E_RANGE,
                                                  "sdpa: float mask holds %s at [%lld, %lld, %lld, %lld]; use -inf to mask",
                                                  isnan(x) ? "NaN" : "+inf", (long long)a, (long long)b,
                                                  (long long)c, (long long)d);
                    }
    }
    return ATTN_OK;
}

int attn_sdpa_check(const attn_tensor *out, const attn_tensor *weights, const attn_tensor *q,
                    const attn_tensor *k, const attn_tensor *v, const attn_sdpa_params *p, int64_t *pB,
                    int64_t *pH, int64_t *pHkv, int64_t *pLq, int64_t *pLk, int64_t *pD, int64_t *pDv) {
    return attn__sdpa_check_ex(out, weights, q, k, v, p, 1, NULL, pB, pH, pHkv, pLq, pLk, pD, pDv);
}

int attn__sdpa_post_check(const attn_tensor *out, const attn_tensor *weights, const attn_tensor *q,
                          const attn_tensor *k, const attn_tensor *v, int bad_scores) {
    if (bad_scores) { /* name the input responsible, if any */
        ATTN_TRY(attn__check_finite(q, "q"));
        ATTN_TRY(attn__check_finite(k, "k"));
        return attn_set_error(ATTN_E_RANGE, "sdpa: a score q.k overflowed float32 (inputs too large); out is undefined");
    }
    const attn_tensor *res[2] = {out, weights};
    for (int r = 0; r < 2; r++) {
        const attn_tensor *t = res[r];
        if (!t || !attn__any_nonfinite_4d(t)) continue;
        /* name the input responsible, if any */
        ATTN_TRY(attn__check_finite(q, "q"));
        ATTN_TRY(attn__check_finite(k, "k"));
        ATTN_TRY(attn__check_finite(v, "v"));
        return attn_set_error(ATTN_E_RANGE, "sdpa: the result overflowed %s (scores or values too large); out is undefined",
                              attn_dtype_name(t->dtype));
    }
    return ATTN_OK;
}

int attn__sdpa_check_ex(const attn_tensor *out, const attn_tensor *weights, const attn_tensor *q,
                        const attn_tensor *k, const attn_tensor *v, const attn_sdpa_params *p, int scan_inputs,
                        attn__mask_view *mv_out, int64_t *pB, int64_t *pH, int64_t *pHkv, int64_t *pLq, int64_t *pLk, int64_t *pD,
                        int64_t *pDv) {
    if (!q || !k || !v || !out) return attn_set_error(ATTN_E_INVALID, "sdpa: q, k, v and out must not be NULL");
    ATTN_TRY(attn__check_4d(q, "q", 1));
    ATTN_TRY(attn__check_4d(k, "k", 1));
    ATTN_TRY(attn__check_4d(v, "v", 1));
    ATTN_TRY(attn__check_4d(out, "out", 1));
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return attn_set_error(ATTN_E_DTYPE, "sdpa: q, k and v must have one dtype, got %s, %s, %s",
                              attn_dtype_name(q->dtype), attn_dtype_name(k->dtype), attn_dtype_name(v->dtype));
    int64_t B = q->shape[0], H = q->shape[1], Lq = q->shape[2], D = q->shape[3];
    int64_t Hkv = k->shape[1], Lk = k->shape[2], Dv = v->shape[3];
    if (k->shape[0] != B || v->shape[0] != B)
        return attn_set_error(ATTN_E_SHAPE, "sdpa: batch sizes differ: q %lld, k %lld, v %lld", (long long)B,
                              (long long)k->shape[0], (long long)v->shape[0]);
    if (k->shape[3] != D)
        return attn_set_error(ATTN_E_SHAPE, "sdpa: head_dim of q (%lld) and k (%lld) differ", (long long)D,
                              (long long)k->shape[3]);
    if (v->shape[1] != Hkv || v->shape[2] != Lk)
        return attn_set_error(ATTN_E_SHAPE, "sdpa: k is [%lld, %lld, %lld, %lld] but v is [%lld, %lld, %lld, %lld]; n_kv_heads and seq_len must match",
                              (long long)k->shape[0], (long long)Hkv, (long long)Lk, (long long)D,
                              (long long)v->shape[0], (long long)v->shape[1], (long long)v->shape[2], (long long)Dv);
    if (Hkv == 0 && H > 0) return attn_set_error(ATTN_E_SHAPE, "sdpa: k has 0 heads");
    if (Hkv > 0 && H % Hkv != 0)
        return attn_set_error(ATTN_E_SHAPE, "sdpa: n_heads (%lld) is not a multiple of n_kv_heads (%lld)", (long long)H,
                              (long long)Hkv);
    if (out->shape[0] != B || out->shape[1] != H || out->shape[2] != Lq || out->shape[3] != Dv)
        return attn_set_error(ATTN_E_SHAPE, "sdpa: out must be [%lld, %lld, %lld, %lld], got [%lld, %lld, %lld, %lld]",
                              (long long)B, (long long)H, (long long)Lq, (long long)Dv, (long long)out->shape[0],
                              (long long)out->shape[1], (long long)out->shape[2], (long long)out->shape[3]);
    if (weights) {
        ATTN_TRY(attn__check_4d(weights, "weights", 0));
        if (weights->shape[0] != B || weights->shape[1] != H || weights->shape[2] != Lq || weights->shape[3] != Lk)
            return attn_set_error(ATTN_E_SHAPE, "sdpa: weights must be [%lld, %lld, %lld, %lld], got [%lld, %lld, %lld, %lld]",
                                  (long long)B, (long long)H, (long long)Lq, (long long)Lk,
                                  (long long)weights->shape[0], (long long)weights->shape[1],
                                  (long long)weights->shape[2], (long long)weights->shape[3]);
    }
    if (p) {
        if (p->window < 0) return attn_set_error(ATTN_E_INVALID, "sdpa: window must be >= 0, got %lld", (long long)p->window);
        if (p->n_threads > ATTN_MAX_THREADS)
            return attn_set_error(ATTN_E_INVALID, "sdpa: n_threads %d is more than the %d allowed", p->n_threads, ATTN_MAX_THREADS);
        if (p->has_scale && !isfinite(p->scale))
            return attn_set_error(ATTN_E_INVALID, "sdpa: scale must be finite");
        if (p->key_lengths)
            for (int64_t b = 0; b < B; b++)
                if (p->key_lengths[b] < 0 || p->key_lengths[b] > Lk)
                    return attn_set_error(ATTN_E_INVALID, "sdpa: key_lengths[%lld] = %lld not in 0..Lk=%lld", (long long)b,
                                          (long long)p->key_lengths[b], (long long)Lk);
        if (p->impl != ATTN_IMPL_DEFAULT && p->impl != ATTN_IMPL_REFERENCE && p->impl != ATTN_IMPL_FUSED)
            return attn_set_error(ATTN_E_INVALID, "sdpa: unknown impl %d", (int)p->impl);
        if (p->lse) {
            const attn_tensor *t = p->lse;
            if (t->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "sdpa: lse must be float32, got %s", attn_dtype_name(t->dtype));
            if (t->ndim != 3 || t->shape[0] != B || t->shape[1] != H || t->shape[2] != Lq)
                return attn_set_error(ATTN_E_SHAPE, "sdpa: lse must be [%lld, %lld, %lld] (3-D [B, H, Lq])", (long long)B,
                                      (long long)H, (long long)Lq);
            if (!t->data && attn_tensor_numel(t) > 0) return attn_set_error(ATTN_E_INVALID, "sdpa: lse has no data");
        }
    }
    attn__mask_view mv; /* validates the mask (dtype, broadcast, NaN/+inf) once for the kernels */
    ATTN_TRY(attn__sdpa_mask_view(&mv, p ? p->mask : NULL, B, H, Lq, Lk));
    if (mv_out) *mv_out = mv;
    if (scan_inputs) {
        ATTN_TRY(attn__check_finite(q, "q"));
        if (scan_inputs <= 2) ATTN_TRY(attn__check_finite(k, "k"));
        if (scan_inputs == 1) ATTN_TRY(attn__check_finite(v, "v"));
    }
    if (pB) *pB = B;
    if (pH) *pH = H;
    if (pHkv) *pHkv = Hkv;
    if (pLq) *pLq = Lq;
    if (pLk) *pLk = Lk;
    if (pD) *pD = D;
    if (pDv) *pDv = Dv;
    return ATTN_OK;
}
