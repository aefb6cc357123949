/* Transformer encoder and decoder layers, pre-LN and post-LN (see attn_layers.h). */
#include "attn_layers.h"
#include "core/internal.h"

#include <string.h>

static const attn_tensor *attn__opt(const attn_tensor *t) { return t->data ? t : NULL; }

/* out = LN(x) with optional affine params */
static int attn__ln(attn_tensor *out, const attn_tensor *x, const attn_tensor *g, const attn_tensor *b, float eps) {
    return attn_layernorm(out, x, attn__opt(g), attn__opt(b), eps);
}

static void attn__add(attn_tensor *dst, const attn_tensor *a) {
    float *d = (float *)dst->data;
    const float *s = (const float *)a->data;
    int64_t n = attn_tensor_numel(dst);
    for (int64_t i = 0; i < n; i++) d[i] += s[i];
}

static int attn__check_x(const attn_tensor *out, const attn_tensor *x, int64_t E, const char *op) {
    if (!out || !x) return attn_set_error(ATTN_E_INVALID, "%s: out and x must not be NULL", op);
    if (x->dtype != ATTN_F32 || out->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "%s: x and out must be float32", op);
    if (x->ndim != 3 || x->shape[2] != E)
        return attn_set_error(ATTN_E_SHAPE, "%s: x must be [B, L, %lld], got %d-D", op, (long long)E, x->ndim);
    if (out->ndim != 3 || out->shape[0] != x->shape[0] || out->shape[1] != x->shape[1] || out->shape[2] != E)
        return attn_set_error(ATTN_E_SHAPE, "%s: out must have x's shape", op);
    if (!attn_tensor_is_contiguous(x) || !attn_tensor_is_contiguous(out))
        return attn_set_error(ATTN_E_INVALID, "%s: x and out must be contiguous", op);
    if (out->data == x->data && attn_tensor_numel(x) > 0) return attn_set_error(ATTN_E_INVALID, "%s: out must not alias x", op);
    return ATTN_OK;
}

/* h <- sublayer residual block. `in` is the block's input, `tmp` a same-shape buffer.
 * post-LN: out = LN(in + f(in)); pre-LN: out = in + f(LN(in)). f writes into its first arg. */
typedef int (*attn__sublayer_fn)(attn_tensor *y, const attn_tensor *x, void *ctx, attn_arena *arena);

static int attn__residual(attn_tensor *out, const attn_tensor *in, attn__sublayer_fn f, void *ctx, int norm_first,
                          const attn_tensor *g, const attn_tensor *b, float eps, attn_arena *arena) {
    attn_arena_mark m = attn_arena_get_mark(arena);
    float *tb = attn_arena_alloc_f32_uninit(arena, (size_t)attn_tensor_numel(in) + 1);
    if (!tb) return ATTN_E_NOMEM;
    attn_tensor tmp = *in;
    tmp.data = tb;
    int rc;
    if (norm_first) {
        rc = attn__ln(&tmp, in, g, b, eps);    /* tmp = LN(in) */
        if (rc == 0) rc = f(out, &tmp, ctx, arena); /* out = f(LN(in)) */
        if (rc == 0) attn__add(out, in);        /* out += in */
    } else {
        rc = f(&tmp, in, ctx, arena); /* tmp = f(in) */
        if (rc == 0) {
            attn__add(&tmp, in);                  /* tmp = in + f(in) */
            rc = attn__ln(out, &tmp, g, b, eps);  /* out = LN(tmp) */
        }
    }
    attn_arena_release(arena, m);
    return rc;
}

/* ---- sub-layer adapters */

typedef struct {
    const attn_mha_config *cfg;
    const attn_mha_weights *w;
    const attn_sdpa_params *p;
    attn_tensor *weights;
    const attn_tensor *kv_src;   /* NULL: self-attention without cache */
    attn_kv_cache *append_to;    /* non-NULL: append the input's K/V here first */
    const attn_kv_cache *attend; /* non-NULL: attend over this cache */
} attn__attn_ctx;

static int attn__attn_fn(attn_tensor *y, const attn_tensor *x, void *vctx, attn_arena *arena) {
    attn__attn_ctx *c = (attn__attn_ctx *)vctx;
    if (c->append_to) ATTN_TRY(attn_mha_append_kv(c->append_to, x, c->cfg, c->w, arena));
    if (c->attend) return attn_mha_attend(y, c->weights, x, c->cfg, c->w, c->attend, c->p, arena);
    return attn_mha_forward(y, c->weights, x, c->kv_src, c->cfg, c->w, c->p, arena);
}

typedef struct {
    const attn_tensor *w1, *b1, *w2, *b2;
    attn_activation act;
} attn__ffn_ctx;

static int attn__ffn_fn(attn_tensor *y, const attn_tensor *x, void *vctx, attn_arena *arena) {
    attn__ffn_ctx *c = (attn__ffn_ctx *)vctx;
    return attn_ffn(y, x, c->w1, attn__opt(c->b1), c->w2, attn__opt(c->b2), c->act, arena);
}

/* ---- encoder */

int attn_encoder_layer(attn_tensor *out, attn_tensor *attn_weights, const attn_tensor *x,
                       const attn_layer_config *cfg, const attn_encoder_weights *w, const attn_sdpa_params *p,
                       attn_arena *arena) {
    if (!cfg || !w || !arena) return attn_set_error(ATTN_E_INVALID, "encoder_layer: cfg, weights and arena are required");
    ATTN_TRY(attn__check_x(out, x, cfg->attn.d_model, "encoder_layer"));
    ATTN_TRY(attn_mha_check(&cfg->attn, &w->attn));
    attn_arena_mark m = attn_arena_get_mark(arena);
    float *hb = attn_arena_alloc_f32_uninit(arena, (size_t)attn_tensor_numel(x) + 1);
    if (!hb) return ATTN_E_NOMEM;
    attn_tensor h = *x;
    h.data = hb;
    attn__attn_ctx ac = {&cfg->attn, &w->attn, p, attn_weights, NULL, NULL, NULL};
    attn__ffn_ctx fc = {&w->ff_w1, &w->ff_b1, &w->ff_w2, &w->ff_b2, cfg->act};
    int rc = attn__residual(&h, x, attn__attn_fn, &ac, cfg->norm_first, &w->ln1_g, &w->ln1_b, cfg->eps, arena);
    if (rc == 0) rc = attn__residual(out, &h, attn__ffn_fn, &fc, cfg->norm_first, &w->ln2_g, &w->ln2_b, cfg->eps, arena);
    attn_arena_release(arena, m);
    return rc;
}

/* ---- decoder */

static void attn__kv_dims(const attn_mha_config *c, int64_t *Hkv, int64_t *D) {
    *Hkv = c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads;
    *D = c->head_dim > 0 ? c->head_dim : (c->n_heads > 0 ? c->d_model / c->n_heads : 0);
}

int attn_decoder_state_init(attn_decoder_state *s, const attn_layer_config *cfg, const attn_mha_config *cross_cfg,
                            int64_t batch, int64_t max_len, int64_t src_len) {
    if (!s || !cfg || !cross_cfg) return attn_set_error(ATTN_E_INVALID, "decoder_state_init: NULL argument");
    memset(s, 0, sizeof *s);
    int64_t Hkv, D;
    attn__kv_dims(&cfg->attn, &Hkv, &D);
    ATTN_TRY(attn_kv_cache_init(&s->self_kv, batch, Hkv, max_len, D));
    attn__kv_dims(cross_cfg, &Hkv, &D);
    int rc = attn_kv_cache_init(&s->cross_kv, batch, Hkv, src_len, D);
    if (rc < 0) attn_kv_cache_free(&s->self_kv);
    return rc;
}

void attn_decoder_state_free(attn_decoder_state *s) {
    if (!s) return;
    attn_kv_cache_free(&s->self_kv);
    attn_kv_cache_free(&s->cross_kv);
    s->cross_ready = 0;
}

void attn_decoder_state_reset(attn_decoder_state *s) {
    if (!s) return;
    attn_kv_cache_reset(&s->self_kv);
    attn_kv_cache_reset(&s->cross_kv);
    s->cross_ready = 0;
}

int attn_decoder_layer(attn_tensor *out, const attn_tensor *x, const attn_tensor *enc, const int64_t *enc_lengths,
                       const attn_layer_config *cfg, const attn_mha_config *cross_cfg, const attn_decoder_weights *w,
                       attn_decoder_state *state, attn_arena *arena) {
    if (!cfg || !cross_cfg || !w || !arena)
        return attn_set_error(ATTN_E_INVALID, "decoder_layer: cfg, cross_cfg, weights and arena are required");
    ATTN_TRY(attn__check_x(out, x, cfg->attn.d_model, "decoder_layer"));
    ATTN_TRY(attn_mha_check(&cfg->attn, &w->self_attn));
    ATTN_TRY(attn_mha_check(cross_cfg, &w->cross_attn));
    if (cross_cfg->d_model != cfg->attn.d_model)
        return attn_set_error(ATTN_E_SHAPE, "decoder_layer: cross-attention d_model %lld != %lld",
                              (long long)cross_cfg->d_model, (long long)cfg->attn.d_model);
    if (!enc && !(state && state->cross_ready))
        return attn_set_error(ATTN_E_INVALID, "decoder_layer: enc is NULL and no cross-attention cache is ready");
    attn_arena_mark m = attn_arena_get_mark(arena);
    int rc = ATTN_OK;
    attn_sdpa_params self_p = attn_sdpa_params_default();
    self_p.is_causal = 1;
    attn_sdpa_params cross_p = attn_sdpa_params_default();
    cross_p.key_lengths = enc_lengths;

    attn_kv_cache cross_tmp;
    const attn_kv_cache *cross_cache = NULL;
    if (state) {
        if (!state->cross_ready) {
            attn_kv_cache_reset(&state->cross_kv);
            rc = attn_mha_append_kv(&state->cross_kv, enc, cross_cfg, &w->cross_attn, arena);
            if (rc == 0) state->cross_ready = 1;
        }
        cross_cache = &state->cross_kv;
    } else {
        int64_t Hkv, D;
        attn__kv_dims(cross_cfg, &Hkv, &D);
        memset(&cross_tmp, 0, sizeof cross_tmp);
        if (enc->ndim != 3) rc = attn_set_error(ATTN_E_SHAPE, "decoder_layer: enc must be [B, Ls, E_enc]");
        if (rc == 0) {
            int64_t B = enc->shape[0], Ls = enc->shape[1] > 0 ? enc->shape[1] : 1;
            cross_tmp.k = attn_arena_alloc_f32_uninit(arena, (size_t)(B * Hkv * Ls * D));
            cross_tmp.v = attn_arena_alloc_f32_uninit(arena, (size_t)(B * Hkv * Ls * D));
            if (!cross_tmp.k || !cross_tmp.v) rc = ATTN_E_NOMEM;
            cross_tmp.batch = B;
            cross_tmp.n_kv_heads = Hkv;
            cross_tmp.head_dim = D;
            cross_tmp.max_len = Ls;
        }
        if (rc == 0) rc = attn_mha_append_kv(&cross_tmp, enc, cross_cfg, &w->cross_attn, arena);
        cross_cache = &cross_tmp;
    }
    float *b1 = rc == 0 ? attn_arena_alloc_f32_uninit(arena, (size_t)attn_tensor_numel(x) + 1) : NULL;
    float *b2 = rc == 0 ? attn_arena_alloc_f32_uninit(arena, (size_t)attn_tensor_numel(x) + 1) : NULL;
    if (rc == 0 && (!b1 || !b2)) rc = ATTN_E_NOMEM;
    attn_tensor h1 = *x, h2 = *x;
    h1.data = b1;
    h2.data = b2;
    if (rc == 0) {
        attn__attn_ctx sc = {&cfg->attn, &w->self_attn, &self_p, NULL, NULL, NULL, NULL};
        if (state) {
            sc.append_to = &state->self_kv;
            sc.attend = &state->self_kv;
        }
        rc = attn__residual(&h1, x, attn__attn_fn, &sc, cfg->norm_first, &w->ln1_g, &w->ln1_b, cfg->eps, arena);
    }
    if (rc == 0) {
        attn__attn_ctx cc = {cross_cfg, &w->cross_attn, &cross_p, NULL, NULL, NULL, cross_cache};
        rc = attn__residual(&h2, &h1, attn__attn_fn, &cc, cfg->norm_first, &w->ln2_g, &w->ln2_b, cfg->eps, arena);
    }
    if (rc == 0) {
        attn__ffn_ctx fc = {&w->ff_w1, &w->ff_b1, &w->ff_w2, &w->ff_b2, cfg->act};
        rc = attn__residual(out, &h2, attn__ffn_fn, &fc, cfg->norm_first, &w->ln3_g, &w->ln3_b, cfg->eps, arena);
    }
    attn_arena_release(arena, m);
    return rc;
}
