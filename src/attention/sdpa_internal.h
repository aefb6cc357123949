/* Private to src/attention: broadcast mask view and the visibility rule shared by all
 * SDPA implementations. */
#ifndef ATTN_SDPA_INTERNAL_H
#define ATTN_SDPA_INTERNAL_H

#include "attn_attention.h"
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

/* A float mask value that means "masked": -inf or anything <= -FLT_MAX. */
static inline int attn__mask_value_is_masked(float m) { return m <= -FLT_MAX; }

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
