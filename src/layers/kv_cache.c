/* The KV cache of every decoder: layers x slots x positions (see attn_layers.h). */
#include "attn_layers.h"
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

struct attn_kv {
    int64_t n_layers, n_slots, n_kv_heads, max_len, head_dim;
    float *k, *v;        /* [n_layers][n_slots][n_kv_heads][max_len][head_dim] */
    float *k2, *v2;      /* spare buffers for reorder (allocated on the first one) */
    int64_t *len, *len2; /* [n_slots] */
};

static size_t attn__kv_slot_floats(const attn_kv *c) { return (size_t)(c->n_kv_heads * c->max_len * c->head_dim); }

int attn_kv_create(attn_kv **out, int64_t n_layers, int64_t n_slots, int64_t n_kv_heads, int64_t max_len, int64_t head_dim) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "kv cache: out is NULL");
    *out = NULL;
    if (n_layers <= 0 || n_slots <= 0 || n_kv_heads <= 0 || max_len <= 0 || head_dim <= 0)
        return attn_set_error(ATTN_E_INVALID,
                              "kv cache: sizes must be > 0 (layers %lld, slots %lld, n_kv_heads %lld, max_len %lld, head_dim %lld)",
                              (long long)n_layers, (long long)n_slots, (long long)n_kv_heads, (long long)max_len, (long long)head_dim);
    double n = (double)n_layers * (double)n_slots * (double)n_kv_heads * (double)max_len * (double)head_dim;
    if (n > (double)((size_t)1 << 38))
        return attn_set_error(ATTN_E_NOMEM, "kv cache: %.0f floats (%lld layers x %lld slots x %lld KV heads x %lld positions x %lld) is too large",
                              n, (long long)n_layers, (long long)n_slots, (long long)n_kv_heads, (long long)max_len, (long long)head_dim);
    attn_kv *c = (attn_kv *)calloc(1, sizeof *c);
    if (!c) return attn_set_error(ATTN_E_NOMEM, "kv cache: out of memory");
    c->n_layers = n_layers;
    c->n_slots = n_slots;
    c->n_kv_heads = n_kv_heads;
    c->max_len = max_len;
    c->head_dim = head_dim;
    c->k = (float *)calloc((size_t)n, sizeof(float));
    c->v = (float *)calloc((size_t)n, sizeof(float));
    c->len = (int64_t *)calloc((size_t)n_slots, sizeof(int64_t));
    c->len2 = (int64_t *)calloc((size_t)n_slots, sizeof(int64_t));
    if (!c->k || !c->v || !c->len || !c->len2) {
        attn_kv_free(c);
        return attn_set_error(ATTN_E_NOMEM, "kv cache: out of memory for %lld positions x %lld slots x %lld layers", (long long)max_len,
                              (long long)n_slots, (long long)n_layers);
    }
    *out = c;
    return ATTN_OK;
}

void attn_kv_free(attn_kv *c) {
    if (!c) return;
    ATTN_FREE_ALL(c->k, c->v, c->k2, c->v2, c->len, c->len2);
    free(c);
}

int64_t attn_kv_n_slots(const attn_kv *c) { return c ? c->n_slots : 0; }
int64_t attn_kv_max_len(const attn_kv *c) { return c ? c->max_len : 0; }
int64_t attn_kv_n_kv_heads(const attn_kv *c) { return c ? c->n_kv_heads : 0; }
int64_t attn_kv_head_dim(const attn_kv *c) { return c ? c->head_dim : 0; }
int64_t attn_kv_len(const attn_kv *c, int64_t slot) { return c && slot >= 0 && slot < c->n_slots ? c->len[slot] : 0; }

static float *attn__kv_at(const attn_kv *c, float *base, int64_t layer, int64_t slot) {
    if (!c || layer < 0 || layer >= c->n_layers || slot < 0 || slot >= c->n_slots) return NULL;
    return base + ((size_t)layer * (size_t)c->n_slots + (size_t)slot) * attn__kv_slot_floats(c);
}
float *attn_kv_keys(const attn_kv *c, int64_t layer, int64_t slot) { return c ? attn__kv_at(c, c->k, layer, slot) : NULL; }
float *attn_kv_values(const attn_kv *c, int64_t layer, int64_t slot) { return c ? attn__kv_at(c, c->v, layer, slot) : NULL; }

int attn_kv_write(attn_kv *c, int64_t layer, int64_t slot, int64_t pos, const float *k, const float *v) {
    float *kd = attn_kv_keys(c, layer, slot), *vd = attn_kv_values(c, layer, slot);
    if (!kd || !k || !v) return attn_set_error(ATTN_E_INVALID, "kv cache: no layer %lld / slot %lld, or no rows", (long long)layer, (long long)slot);
    if (pos < 0 || pos >= c->max_len)
        return attn_set_error(ATTN_E_RANGE, "kv cache: position %lld outside 0 .. %lld", (long long)pos, (long long)(c->max_len - 1));
    const size_t hs = (size_t)(c->max_len * c->head_dim), bytes = sizeof(float) * (size_t)c->head_dim;
    for (int64_t h = 0; h < c->n_kv_heads; h++) {
        memcpy(kd + h * hs + pos * c->head_dim, k + h * c->head_dim, bytes);
        memcpy(vd + h * hs + pos * c->head_dim, v + h * c->head_dim, bytes);
    }
    return ATTN_OK;
}

void attn_kv_clear(attn_kv *c) {
    if (c) memset(c->len, 0, sizeof(int64_t) * (size_t)c->n_slots);
}

int attn_kv_set_len(attn_kv *c, int64_t slot, int64_t len) {
    if (!c || slot < 0 || slot >= c->n_slots) return attn_set_error(ATTN_E_INVALID, "kv cache: no slot %lld", (long long)slot);
    if (len < 0 || len > c->len[slot])
        return attn_set_error(ATTN_E_INVALID, "kv cache: cannot set slot %lld to %lld positions (it holds %lld)", (long long)slot,
                              (long long)len, (long long)c->len[slot]);
    c->len[slot] = len;
    return ATTN_OK;
}

int attn_kv_advance(attn_kv *c, const int64_t *slot, const int64_t *count, int64_t n) {
    if (!c || n < 0 || (!slot && n > c->n_slots)) return attn_set_error(ATTN_E_INVALID, "kv cache: bad advance");
    for (int64_t i = 0; i < n; i++) {
        const int64_t s = slot ? slot[i] : i, k = count ? count[i] : 1;
        if (s < 0 || s >= c->n_slots || k < 0) return attn_set_error(ATTN_E_INVALID, "kv cache: bad slot %lld or count", (long long)s);
        if (c->len[s] + k > c->max_len)
            return attn_set_error(ATTN_E_RANGE, "kv cache: slot %lld holds %lld of %lld positions; %lld more do not fit", (long long)s,
                                  (long long)c->len[s], (long long)c->max_len, (long long)k);
    }
    for (int64_t i = 0; i < n; i++) c->len[slot ? slot[i] : i] += count ? count[i] : 1;
    return ATTN_OK;
}

int attn_kv_reorder(attn_kv *c, const int64_t *src, int64_t n) {
    if (!c || (!src && n > 0) || n < 0 || n > c->n_slots) return attn_set_error(ATTN_E_INVALID, "kv cache: bad reorder of %lld slots", (long long)n);
    int identity = 1;
    for (int64_t i = 0; i < n; i++) {
        if (src[i] < 0 || src[i] >= c->n_slots) return attn_set_error(ATTN_E_INVALID, "kv cache: reorder source %lld out of range", (long long)src[i]);
        identity = identity && src[i] == i;
    }
    if (identity) return ATTN_OK;
    const size_t total = (size_t)c->n_layers * (size_t)c->n_slots * attn__kv_slot_floats(c);
    if (!c->k2) {
        c->k2 = (float *)malloc(sizeof(float) * total);
        c->v2 = (float *)malloc(sizeof(float) * total);
        if (!c->k2 || !c->v2) {
            free(c->k2);
            free(c->v2);
            c->k2 = c->v2 = NULL;
            return attn_set_error(ATTN_E_NOMEM, "kv cache: out of memory for a reorder");
        }
    }
    const size_t hs = (size_t)(c->max_len * c->head_dim); /* floats from one KV head to the next */
    for (int64_t l = 0; l < c->n_layers; l++)
        for (int64_t i = 0; i < n; i++) {
            const size_t bytes = sizeof(float) * (size_t)(c->len[src[i]] * c->head_dim);
            for (int64_t h = 0; h < c->n_kv_heads; h++) {
                memcpy(attn__kv_at(c, c->k2, l, i) + h * hs, attn__kv_at(c, c->k, l, src[i]) + h * hs, bytes);
                memcpy(attn__kv_at(c, c->v2, l, i) + h * hs, attn__kv_at(c, c->v, l, src[i]) + h * hs, bytes);
            }
        }
    for (int64_t i = 0; i < n; i++) c->len2[i] = c->len[src[i]];
    for (int64_t i = n; i < c->n_slots; i++) c->len2[i] = 0;
    float *t = c->k;
    c->k = c->k2;
    c->k2 = t;
    t = c->v;
    c->v = c->v2;
    c->v2 = t;
    int64_t *tl = c->len;
    c->len = c->len2;
    c->len2 = tl;
    return ATTN_OK;
}
