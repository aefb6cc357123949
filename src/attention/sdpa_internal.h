/* Private to src/attention: broadcast mask view and the visibility rule shared by all
 * SDPA implementations. */
#ifndef ATTN_SDPA_INTERNAL_H
#define ATTN_SDPA_INTERNAL_H

#include "attn_attention.h"
#include "core/simd_math.h"
#include <float.h>
#include <math.h>

typedef struct {
    const void *data;
    int64_t stride[4]; /* element strides broadcast to [B, H, Lq, Lk] (0 on broadcast dims) */
    int is_bool;
    int present;
} attn__mask_view;

/* Build a broadcast view of p->mask over [B, H, Lq, Lk] and reject bad masks. */
int attn__sdpa_mask_view(attn__mask_view *mv, const attn_tensor *mask, int64_t B, int64_t H, int64_t Lq,
                         int64_t Lk);

/* attn_sdpa_check with the NaN/inf scan chosen by scan_inputs: 1 = q, k and v; 2 = q and k;
 * 3 = q only (the fused kernel: it checks every raw score block it computes — a NaN or inf in
 * a key it reads gives a non-finite score — and a non-finite value in v always reaches its
 * output; attn__sdpa_post_check turns either into the error); 0 = none.
 * mv_out (may be NULL) receives the validated broadcast mask view. */
int attn__sdpa_check_ex(const attn_tensor *out, const attn_tensor *weights, const attn_tensor *q,
                        const attn_tensor *k, const attn_tensor *v, const attn_sdpa_params *p, int scan_inputs,
                        attn__mask_view *mv_out, int64_t *B, int64_t *H, int64_t *Hkv, int64_t *Lq, int64_t *Lk,
                        int64_t *D, int64_t *Dv);

/* After a kernel ran with scan_inputs = 3: ATTN_OK when no raw score was flagged
 * (bad_scores == 0) and out (and weights) are finite; otherwise the error naming the
 * non-finite input (q, k or v), or an overflow error. O(|out| + |weights|) when everything is
 * finite instead of O(|k| + |v|): decoding (Lq = 1 against a long KV cache) reads K and V once.
 * Keys outside every query's causal / window / key_lengths range are never read, so a NaN
 * there is not reported (it cannot affect the result). */
int attn__sdpa_post_check(const attn_tensor *out, const attn_tensor *weights, const attn_tensor *q,
                          const attn_tensor *k, const attn_tensor *v, int bad_scores);

/* attn__any_nonfinite (NaN / inf in n floats): core/simd_math.h */
/* The same for n elements of dtype dt (float32, bfloat16 or float16). */
int attn__any_nonfinite_dt(const void *p, attn_dtype dt, int64_t n, int64_t s);

/* Element (b, h, i) of a float32 [B, H, Lq] log-sum-exp tensor (attn_sdpa_params.lse). */
static inline float *attn__lse_at(const attn_tensor *t, int64_t b, int64_t h, int64_t i) {
    return (float *)t->data + b * t->stride[0] + h * t->stride[1] + i * t->stride[2];
}

/* A float mask value that means "masked": -inf or anything <= -FLT_MAX. */
static inline int attn__mask_value_is_masked(float m) { return m <= -FLT_MAX; }

/* 1 when the user mask (if any) lets query (b, h, i) see key j; *bias receives an additive float
 * mask's value (0 otherwise). */
static inline int attn__mask_allows(const attn__mask_view *mv, int64_t b, int64_t h, int64_t i, int64_t j, double *bias) {
    *bias = 0.0;
    if (!mv->present) return 1;
    const int64_t mo = b * mv->stride[0] + h * mv->stride[1] + i * mv->stride[2] + j * mv->stride[3];
    if (mv->is_bool) return ((const unsigned char *)mv->data)[mo] != 0;
    const float m = ((const float *)mv->data)[mo];
    if (attn__mask_value_is_masked(m)) return 0;
    *bias = m;
    return 1;
}

/* Key range [lo, hi) allowed by causal / window / key_lengths for query row i. */
static inline void attn__key_range(const attn_sdpa_params *p, int64_t b, int64_t i, int64_t Lq, int64_t Lk,
                                   int64_t *lo, int64_t *hi) {
    int64_t l = 0, h = Lk;
    if (p) {
        int64_t qpos = i + Lk - Lq; /* bottom-right alignment */
        if (p->is_causal || p->window > 0) {
            if (qpos + 1 < h) h = qpos + 1;
        }
        if (p->window > 0) {
            if (qpos - p->window + 1 > l) l = qpos - p->window + 1;
        }
        if (p->key_lengths && p->key_lengths[b] < h) h = p->key_lengths[b];
    }
    if (h < l) h = l;
    if (l > Lk) l = h = Lk;
    if (h < 0) l = h = 0;
    *lo = l;
    *hi = h;
}


#endif
