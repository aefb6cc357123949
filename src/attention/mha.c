/* Multi-head attention on top of attn_sdpa, with a key/value cache (see attn_layers.h). */
#include "attn_layers.h"
#include "attention/mha_internal.h"
#include "core/internal.h"

#include <stdlib.h>
#include <string.h>

void attn__average_heads(attn_tensor *dst, const float *w, int64_t B, int64_t H, int64_t Lq, int64_t Lk) {
    float *wo = (float *)dst->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Lq; i++)
            for (int64_t j = 0; j < Lk; j++) {
                double s = 0;
                for (int64_t h = 0; h < H; h++) s += w[((b * H + h) * Lq + i) * Lk + j];
                wo[b * dst->stride[0] + i * dst->stride[1] + j * dst->stride[2]] = (float)(s / (double)H);
            }
}

int attn_kv_cache_init(attn_kv_cache *c, int64_t batch, int64_t n_kv_heads, int64_t max_len, int64_t head_dim) {
    if (!c) return attn_set_error(ATTN_E_INVALID, "kv_cache_init: cache is NULL");
    memset(c, 0, sizeof *c);
    if (batch <= 0 || n_kv_heads <= 0 || max_len <= 0 || head_dim <= 0)
        return attn_set_error(ATTN_E_INVALID, "kv_cache_init: sizes must be > 0 (batch %lld, n_kv_heads %lld, max_len %lld, head_dim %lld)",
                              (long long)batch, (long long)n_kv_heads, (long long)max_len, (long long)head_dim);
    double n = (double)batch * (double)n_kv_heads * (double)max_len * (double)head_dim;
    if (n > (double)((size_t)1 << 40)) return attn_set_error(ATTN_E_NOMEM, "kv_cache_init: %.0f floats is too large", n);
    size_t bytes = sizeof(float) * (size_t)n;
    c->k = (float *)calloc(1, bytes);
    c->v = (float *)calloc(1, bytes);
    if (!c->k || !c->v) {
        free(c->k);
        free(c->v);
        memset(c, 0, sizeof *c);
        return attn_set_error(ATTN_E_NOMEM, "kv_cache_init: out of memory (%zu bytes)", 2 * bytes);
    }
    c->batch = batch;
    c->n_kv_heads = n_kv_heads;
    c->max_len = max_len;
    c->head_dim = head_dim;
    c->owns = 1;
    return ATTN_OK;
}

void attn_kv_cache_free(attn_kv_cache *c) {
    if (!c) return;
    if (c->owns) {
        free(c->k);
        free(c->v);
    }
    memset(c, 0, sizeof *c);
}

void attn_kv_cache_reset(attn_kv_cache *c) {
    if (c) c->len = 0;
}

static void attn__mha_dims(const attn_mha_config *cfg, int64_t *H, int64_t *Hkv, int64_t *D, int64_t *Ekv) {
    *H = cfg->n_heads;
    *Hkv = cfg->n_kv_heads > 0 ? cfg->n_kv_heads : cfg->n_heads;
    *D = cfg->head_dim > 0 ? cfg->head_dim : (cfg->n_heads > 0 ? cfg->d_model / cfg->n_heads : 0);
    *Ekv = cfg->kv_d_model > 0 ? cfg->kv_d_model : cfg->d_model;
}

static int attn__check_mat(const attn_tensor *t, int64_t r, int64_t c, const char *name, int required) {
    if (!t->data) {
        if (required) return attn_set_error(ATTN_E_INVALID, "mha: weight %s is missing", name);
        return ATTN_OK;
    }
    if (t->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "mha: %s must be float32", name);
    if (c < 0) {
        if (t->ndim != 1 || t->shape[0] != r)
            return attn_set_error(ATTN_E_SHAPE, "mha: %s must be [%lld], got %d-D [%lld...]", name, (long long)r, t->ndim,
                                  (long long)(t->ndim ? t->shape[0] : 0));
    } else if (t->ndim != 2 || t->shape[0] != r || t->shape[1] != c) {
        return attn_set_error(ATTN_E_SHAPE, "mha: %s must be [%lld, %lld], got %d-D [%lld, %lld]", name, (long long)r,
                              (long long)c, t->ndim, (long long)(t->ndim > 0 ? t->shape[0] : 0),
                              (long long)(t->ndim > 1 ? t->shape[1] : 0));
    }
    return ATTN_OK;
}

int attn_mha_check(const attn_mha_config *cfg, const attn_mha_weights *w) {
    if (!cfg || !w) return attn_set_error(ATTN_E_INVALID, "mha: config and weights must not be NULL");
    int64_t H, Hkv, D, Ekv;
    attn__mha_dims(cfg, &H, &Hkv, &D, &Ekv);
    if (cfg->d_model <= 0 || H <= 0 || Hkv <= 0 || D <= 0)
        return attn_set_error(ATTN_E_INVALID, "mha: d_model (%lld), n_heads (%lld), n_kv_heads (%lld), head_dim (%lld) must be > 0",
                              (long long)cfg->d_model, (long long)H, (long long)Hkv, (long long)D);
    if (H % Hkv != 0)
        return attn_set_error(ATTN_E_SHAPE, "mha: n_heads (%lld) is not a multiple of n_kv_heads (%lld)", (long long)H,
                              (long long)Hkv);
    ATTN_TRY(attn__check_mat(&w->wq, H * D, cfg->d_model, "wq", 1));
    ATTN_TRY(attn__check_mat(&w->bq, H * D, -1, "bq", 0));
    ATTN_TRY(attn__check_mat(&w->wk, Hkv * D, Ekv, "wk", 1));
    ATTN_TRY(attn__check_mat(&w->bk, Hkv * D, -1, "bk", 0));
    ATTN_TRY(attn__check_mat(&w->wv, Hkv * D, Ekv, "wv", 1));
    ATTN_TRY(attn__check_mat(&w->bv, Hkv * D, -1, "bv", 0));
    ATTN_TRY(attn__check_mat(&w->wo, cfg->d_model, H * D, "wo", 1));
    ATTN_TRY(attn__check_mat(&w->bo, cfg->d_model, -1, "bo", 0));
    return ATTN_OK;
}

static const attn_tensor *attn__opt(const attn_tensor *t) { return t->data ? t : NULL; }

static int attn__check_act(const attn_tensor *x, int64_t E, const char *name) {
    if (!x) return attn_set_error(ATTN_E_INVALID, "mha: %s is NULL", name);
    if (x->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "mha: %s must be float32", name);
    if (x->ndim != 3 || x->shape[2] != E)
        return attn_set_error(ATTN_E_SHAPE, "mha: %s must be [B, L, %lld]", name, (long long)E);
    if (!attn_tensor_is_contiguous(x)) return attn_set_error(ATTN_E_INVALID, "mha: %s must be contiguous", name);
    return ATTN_OK;
}

int attn_mha_append_kv(attn_kv_cache *cache, const attn_tensor *x, const attn_mha_config *cfg,
                       const attn_mha_weights *w, attn_arena *arena) {
    ATTN_TRY(attn_mha_check(cfg, w));
    if (!cache || !cache->k || !arena) return attn_set_error(ATTN_E_INVALID, "mha_append_kv: cache and arena are required");
    int64_t H, Hkv, D, Ekv;
    attn__mha_dims(cfg, &H, &Hkv, &D, &Ekv);
    ATTN_TRY(attn__check_act(x, Ekv, "x_kv"));
    int64_t B = x->shape[0], L = x->shape[1];
    if (cache->batch != B || cache->n_kv_heads != Hkv || cache->head_dim != D)
        return attn_set_error(ATTN_E_SHAPE, "mha_append_kv: cache is [%lld, %lld, *, %lld] but the input needs [%lld, %lld, *, %lld]",
                              (long long)cache->batch, (long long)cache->n_kv_heads, (long long)cache->head_dim,
                              (long long)B, (long long)Hkv, (long long)D);
    if (cache->len + L > cache->max_len)
        return attn_set_error(ATTN_E_RANGE, "mha_append_kv: cache holds %lld of %lld positions; %lld more do not fit",
                              (long long)cache->len, (long long)cache->max_len, (long long)L);
    if (L == 0) return ATTN_OK;
    attn_arena_mark m = attn_arena_get_mark(arena);
    int rc = ATTN_OK;
    float *kb = attn_arena_alloc_f32_uninit(arena, (size_t)(B * L * Hkv * D));
    float *vb = attn_arena_alloc_f32_uninit(arena, (size_t)(B * L * Hkv * D));
    if (!kb || !vb) {
        attn_arena_release(arena, m);
        return ATTN_E_NOMEM;
    }
    attn_tensor kt = attn_tensor_f32_3d(kb, B, L, Hkv * D), vt = attn_tensor_f32_3d(vb, B, L, Hkv * D);
    rc = attn_linear(&kt, x, &w->wk, attn__opt(&w->bk));
    if (rc == 0) rc = attn_linear(&vt, x, &w->wv, attn__opt(&w->bv));
    attn_tensor kh, vh;
    if (rc == 0) rc = attn_tensor_split_heads(&kh, &kt, Hkv);
    if (rc == 0) rc = attn_tensor_split_heads(&vh, &vt, Hkv);
    if (rc == 0 && cfg->rope_theta > 0.0f)
        rc = attn_rope(&kh, cache->len, cfg->rope_theta, cfg->rope_dim, cfg->rope_layout);
    if (rc == 0) {
        /* destination: cache[:, :, len:len+L, :] */
        attn_tensor dk = attn_tensor_f32_4d(cache->k, B, Hkv, cache->max_len, D);
        attn_tensor dv = attn_tensor_f32_4d(cache->v, B, Hkv, cache->max_len, D);
        dk.data = cache->k + cache->len * D;
        dv.data = cache->v + cache->len * D;
        dk.shape[2] = dv.shape[2] = L;
        rc = attn_tensor_copy(&dk, &kh);
        if (rc == 0) rc = attn_tensor_copy(&dv, &vh);
    }
    if (rc == 0) cache->len += L;
    attn_arena_release(arena, m);
    return rc;
}

int attn_mha_attend(attn_tensor *out, attn_tensor *weights, const attn_tensor *x_q, const attn_mha_config *cfg,
                    const attn_mha_weights *w, const attn_kv_cache *cache, const attn_sdpa_params *p,
                    attn_arena *arena) {
    ATTN_TRY(attn_mha_check(cfg, w));
    if (!cache || !cache->k || !arena) return attn_set_error(ATTN_E_INVALID, "mha_attend: cache and arena are required");
    int64_t H, Hkv, D, Ekv;
    attn__mha_dims(cfg, &H, &Hkv, &D, &Ekv);
    ATTN_TRY(attn__check_act(x_q, cfg->d_model, "x_q"));
    ATTN_TRY(attn__check_act(out, cfg->d_model, "out"));
    int64_t B = x_q->shape[0], Lq = x_q->shape[1], Lk = cache->len;
    if (out->shape[0] != B || out->shape[1] != Lq)
        return attn_set_error(ATTN_E_SHAPE, "mha_attend: out must be [%lld, %lld, %lld]", (long long)B, (long long)Lq,
                              (long long)cfg->d_model);
    if (out->data == x_q->data) return attn_set_error(ATTN_E_INVALID, "mha_attend: out must not alias x_q");
    if (cache->batch != B || cache->n_kv_heads != Hkv || cache->head_dim != D)
        return attn_set_error(ATTN_E_SHAPE, "mha_attend: cache geometry does not match the queries");
    int avg = 0;
    if (weights) {
        if (weights->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "mha_attend: weights must be float32");
        if (weights->ndim == 3 && weights->shape[0] == B && weights->shape[1] == Lq && weights->shape[2] == Lk)
            avg = 1;
        else if (!(weights->ndim == 4 && weights->shape[0] == B && weights->shape[1] == H && weights->shape[2] == Lq &&
                   weights->shape[3] == Lk))
            return attn_set_error(ATTN_E_SHAPE, "mha_attend: weights must be [%lld, %lld, %lld, %lld] or [%lld, %lld, %lld]",
                                  (long long)B, (long long)H, (long long)Lq, (long long)Lk, (long long)B, (long long)Lq,
                                  (long long)Lk);
    }
    attn_arena_mark m = attn_arena_get_mark(arena);
    float *qb = attn_arena_alloc_f32_uninit(arena, (size_t)(B * Lq * H * D));
    float *ob = attn_arena_alloc_f32_uninit(arena, (size_t)(B * Lq * H * D));
    float *wb = avg ? attn_arena_alloc_f32_uninit(arena, (size_t)(B * H * Lq * (Lk > 0 ? Lk : 1))) : NULL;
    if (!qb || !ob || (avg && !wb)) {
        attn_arena_release(arena, m);
        return ATTN_E_NOMEM;
    }
    attn_tensor qt = attn_tensor_f32_3d(qb, B, Lq, H * D), ot = attn_tensor_f32_3d(ob, B, Lq, H * D);
    attn_tensor qh, oh, om;
    int rc = attn_linear(&qt, x_q, &w->wq, attn__opt(&w->bq));
    if (rc == 0) rc = attn_tensor_split_heads(&qh, &qt, H);
    if (rc == 0 && cfg->rope_theta > 0.0f) {
        int64_t q0 = cache->len - Lq;
        rc = attn_rope(&qh, q0 > 0 ? q0 : 0, cfg->rope_theta, cfg->rope_dim, cfg->rope_layout);
    }
    if (rc == 0) rc = attn_tensor_split_heads(&oh, &ot, H);
    if (rc == 0) {
        attn_tensor kh = attn_tensor_f32_4d(cache->k, B, Hkv, cache->max_len, D);
        attn_tensor vh = attn_tensor_f32_4d(cache->v, B, Hkv, cache->max_len, D);
        kh.shape[2] = vh.shape[2] = Lk;
        attn_tensor wfull;
        attn_tensor *wp = weights;
        if (avg) {
            wfull = attn_tensor_f32_4d(wb, B, H, Lq, Lk);
            wp = &wfull;
        }
        rc = attn_sdpa(&oh, wp, &qh, &kh, &vh, p);
        if (rc == 0 && avg) attn__average_heads(weights, wb, B, H, Lq, Lk);
    }
    if (rc == 0) rc = attn_tensor_merge_heads(&om, &oh);
    if (rc == 0) rc = attn_linear(out, &om, &w->wo, attn__opt(&w->bo));
    attn_arena_release(arena, m);
    return rc;
}

int attn_mha_forward(attn_tensor *out, attn_tensor *weights, const attn_tensor *x_q, const attn_tensor *x_kv,
                     const attn_mha_config *cfg, const attn_mha_weights *w, const attn_sdpa_params *p,
                     attn_arena *arena) {
    ATTN_TRY(attn_mha_check(cfg, w));
    if (!arena) return attn_set_error(ATTN_E_INVALID, "mha_forward: arena is NULL");
    const attn_tensor *src = x_kv ? x_kv : x_q;
    int64_t H, Hkv, D, Ekv;
    attn__mha_dims(cfg, &H, &Hkv, &D, &Ekv);
    ATTN_TRY(attn__check_act(x_q, cfg->d_model, "x_q"));
    ATTN_TRY(attn__check_act(src, Ekv, x_kv ? "x_kv" : "x_q (as key/value source)"));
    if (src->shape[0] != x_q->shape[0])
        return attn_set_error(ATTN_E_SHAPE, "mha_forward: batch of x_q (%lld) and x_kv (%lld) differ",
                              (long long)x_q->shape[0], (long long)src->shape[0]);
    int64_t B = src->shape[0], Lk = src->shape[1];
    attn_arena_mark m = attn_arena_get_mark(arena);
    /* a transient cache in the arena: [B, Hkv, Lk, D] */
    attn_kv_cache c;
    memset(&c, 0, sizeof c);
    size_t n = (size_t)(B * Hkv * (Lk > 0 ? Lk : 1) * D);
    c.k = attn_arena_alloc_f32_uninit(arena, n);
    c.v = attn_arena_alloc_f32_uninit(arena, n);
    if (!c.k || !c.v) {
        attn_arena_release(arena, m);
        return ATTN_E_NOMEM;
    }
    c.batch = B;
    c.n_kv_heads = Hkv;
    c.head_dim = D;
    c.max_len = Lk > 0 ? Lk : 1;
    int rc = attn_mha_append_kv(&c, src, cfg, w, arena);
    if (rc == 0) rc = attn_mha_attend(out, weights, x_q, cfg, w, &c, p, arena);
    attn_arena_release(arena, m);
    return rc;
}
