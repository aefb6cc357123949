/* The tensor API of the encoder and decoder layers (see attn_layers.h): checks, then the layer
 * floor's attn_encoder_block / attn_decoder_block on views of the attn_tensor weights. */
#include "attn_layers.h"
#include "attention/mha_internal.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const float *attn__data(const attn_tensor *t) { return t->data ? (const float *)t->data : NULL; }

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

/* a float32 matrix (and bias) as an attn_weight; every present tensor must be contiguous */
static int attn__view(attn_weight *w, const attn_tensor *m, const attn_tensor *b, const char *op) {
    memset(w, 0, sizeof *w);
    if (!m->data) return ATTN_OK;
    if (!attn_tensor_is_contiguous(m) || (b->data && !attn_tensor_is_contiguous(b)))
        return attn_set_error(ATTN_E_INVALID, "%s: weights must be contiguous", op);
    *w = attn_weight_f32((const float *)m->data, attn__data(b), m->ndim == 2 ? m->shape[0] : 0, m->ndim == 2 ? m->shape[1] : 0);
    return ATTN_OK;
}

static int attn__mha_views(attn_block_weights *bw, const attn_mha_weights *w, const char *op) {
    ATTN_TRY(attn__view(&bw->q, &w->wq, &w->bq, op));
    ATTN_TRY(attn__view(&bw->k, &w->wk, &w->bk, op));
    ATTN_TRY(attn__view(&bw->v, &w->wv, &w->bv, op));
    return attn__view(&bw->o, &w->wo, &w->bo, op);
}

/* the block config of a tensor-API layer; inv_freq (arena) when cfg->attn.rope_theta > 0 */
static int attn__block_config(attn_block_config *b, const attn_layer_config *cfg, int64_t d_cross, attn_arena *arena) {
    const attn_mha_config *a = &cfg->attn;
    memset(b, 0, sizeof *b);
    b->d_model = a->d_model;
    b->n_heads = a->n_heads;
    b->n_kv_heads = a->n_kv_heads;
    b->head_dim = a->head_dim;
    b->d_ff = cfg->d_ff;
    b->d_cross = d_cross;
    b->norm_first = cfg->norm_first;
    b->norm = ATTN_NORM_LAYER;
    b->eps = cfg->eps;
    b->act = cfg->act;
    if (a->rope_theta > 0.0f) {
        const int64_t D = a->head_dim > 0 ? a->head_dim : a->d_model / a->n_heads, R = a->rope_dim > 0 ? a->rope_dim : D;
        double *f = (double *)attn_arena_alloc(arena, sizeof(double) * (size_t)(R / 2 + 1));
        if (!f) return attn_set_error(ATTN_E_NOMEM, "layer: out of memory");
        for (int64_t i = 0; i < R / 2; i++) f[i] = pow((double)a->rope_theta, -2.0 * (double)i / (double)R);
        b->rope_inv_freq = f;
        b->rope_dim = R;
        b->rope_layout = a->rope_layout;
    }
    return ATTN_OK;
}

static int attn__ffn_views(attn_block_weights *bw, const attn_tensor *w1, const attn_tensor *b1, const attn_tensor *w2,
                           const attn_tensor *b2, const char *op) {
    ATTN_TRY(attn__view(&bw->ff_up, w1, b1, op));
    return attn__view(&bw->ff_down, w2, b2, op);
}

/* ---- encoder */

int attn_encoder_layer(attn_tensor *out, attn_tensor *attn_weights, const attn_tensor *x, const attn_layer_config *cfg,
                       const attn_encoder_weights *w, const attn_sdpa_params *p, attn_arena *arena) {
    if (!cfg || !w || !arena) return attn_set_error(ATTN_E_INVALID, "encoder_layer: cfg, weights and arena are required");
    ATTN_TRY(attn__check_x(out, x, cfg->attn.d_model, "encoder_layer"));
    ATTN_TRY(attn_mha_check(&cfg->attn, &w->attn));
    const int64_t B = x->shape[0], L = x->shape[1], H = cfg->attn.n_heads;
    float *wdst = NULL;
    int avg = 0;
    if (attn_weights) {
        if (attn_weights->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "encoder_layer: weights must be float32");
        const attn_tensor *aw = attn_weights;
        if (aw->ndim == 3 && aw->shape[0] == B && aw->shape[1] == L && aw->shape[2] == L) avg = 1;
        else if (!(aw->ndim == 4 && aw->shape[0] == B && aw->shape[1] == H && aw->shape[2] == L && aw->shape[3] == L && attn_tensor_is_contiguous(aw)))
            return attn_set_error(ATTN_E_SHAPE, "encoder_layer: weights must be [%lld, %lld, %lld, %lld] (contiguous) or [%lld, %lld, %lld]",
                                  (long long)B, (long long)H, (long long)L, (long long)L, (long long)B, (long long)L, (long long)L);
        if (!avg) wdst = (float *)aw->data;
    }
    attn_arena_mark mk = attn_arena_get_mark(arena);
    attn_block_config bc;
    attn_block_weights bw;
    memset(&bw, 0, sizeof bw);
    int rc = attn__block_config(&bc, cfg, 0, arena);
    if (rc == 0) rc = attn__mha_views(&bw, &w->attn, "encoder_layer");
    if (rc == 0) rc = attn__ffn_views(&bw, &w->ff_w1, &w->ff_b1, &w->ff_w2, &w->ff_b2, "encoder_layer");
    bw.norm1 = (attn_norm_weights){attn__data(&w->ln1_g), attn__data(&w->ln1_b)};
    bw.norm3 = (attn_norm_weights){attn__data(&w->ln2_g), attn__data(&w->ln2_b)};
    if (rc == 0 && avg) {
        wdst = attn_arena_alloc_f32_uninit(arena, (size_t)(B * H * L * L + 1));
        if (!wdst) rc = attn_set_error(ATTN_E_NOMEM, "encoder_layer: out of memory");
    }
    if (rc == 0) {
        memcpy(out->data, x->data, sizeof(float) * (size_t)attn_tensor_numel(x));
        rc = attn_encoder_block((float *)out->data, wdst, &bc, &bw, B, L, p, arena);
    }
    if (rc == 0 && avg) attn__average_heads(attn_weights, wdst, B, H, L, L);
    attn_arena_release(arena, mk);
    return rc;
}

/* ---- decoder */

static void attn__kv_dims(const attn_mha_config *c, int64_t *Hkv, int64_t *D) {
    *Hkv = c->n_kv_heads > 0 ? c->n_kv_heads : c->n_heads;
    *D = c->head_dim > 0 ? c->head_dim : (c->n_heads > 0 ? c->d_model / c->n_heads : 0);
}

int attn_decoder_state_init(attn_decoder_state *s, const attn_layer_config *cfg, const attn_mha_config *cross_cfg, int64_t batch,
                            int64_t max_len, int64_t src_len) {
    if (!s || !cfg || !cross_cfg) return attn_set_error(ATTN_E_INVALID, "decoder_state_init: NULL argument");
    memset(s, 0, sizeof *s);
    int64_t Hkv, D, cHkv, cD;
    attn__kv_dims(&cfg->attn, &Hkv, &D);
    attn__kv_dims(cross_cfg, &cHkv, &cD);
    if (batch <= 0 || max_len <= 0 || src_len <= 0 || Hkv <= 0 || D <= 0 || cHkv <= 0 || cD <= 0)
        return attn_set_error(ATTN_E_INVALID, "decoder_state_init: sizes must be > 0 (batch %lld, max_len %lld, src_len %lld)", (long long)batch,
                              (long long)max_len, (long long)src_len);
    ATTN_TRY(attn_kv_create(&s->self_kv, 1, batch, Hkv, max_len, D));
    s->cross_kv = (float *)malloc(sizeof(float) * (size_t)(batch * src_len * 2 * cHkv * cD));
    if (!s->cross_kv) {
        attn_decoder_state_free(s);
        return attn_set_error(ATTN_E_NOMEM, "decoder_state_init: out of memory");
    }
    s->batch = batch;
    s->src_len = src_len;
    return ATTN_OK;
}

void attn_decoder_state_free(attn_decoder_state *s) {
    if (!s) return;
    attn_kv_free(s->self_kv);
    free(s->cross_kv);
    *s = (attn_decoder_state){NULL, NULL, 0, 0, 0};
}

void attn_decoder_state_reset(attn_decoder_state *s) {
    if (!s) return;
    attn_kv_clear(s->self_kv);
    s->cross_ready = 0;
}

/* cross keys / values of enc [B, Ls, E_enc] into kv [B·Ls, 2·Hkv·D] ([k | v] per position) */
static int attn__cross_pack(float *kv, const attn_tensor *enc, const attn_block_weights *bw, int64_t kvd, attn_arena *arena) {
    const int64_t M = enc->shape[0] * enc->shape[1];
    attn_arena_mark mk = attn_arena_get_mark(arena);
    float *k = attn_arena_alloc_f32_uninit(arena, (size_t)(M * kvd + 1)), *v = attn_arena_alloc_f32_uninit(arena, (size_t)(M * kvd + 1));
    int rc = k && v ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "decoder_layer: out of memory");
    const attn_weight *ws[2] = {&bw->k, &bw->v};
    float *const outs[2] = {k, v};
    if (rc == 0) rc = attn_weight_matmul_n(outs, (const float *)enc->data, ws, 2, M, 0);
    for (int64_t i = 0; rc == 0 && i < M; i++) {
        memcpy(kv + i * 2 * kvd, k + i * kvd, sizeof(float) * (size_t)kvd);
        memcpy(kv + i * 2 * kvd + kvd, v + i * kvd, sizeof(float) * (size_t)kvd);
    }
    attn_arena_release(arena, mk);
    return rc;
}

static int attn__check_cross(const attn_layer_config *cfg, const attn_mha_config *cc, const attn_tensor *enc, int64_t B) {
    int64_t Hkv, D, cHkv, cD;
    attn__kv_dims(&cfg->attn, &Hkv, &D);
    attn__kv_dims(cc, &cHkv, &cD);
    if (cc->d_model != cfg->attn.d_model)
        return attn_set_error(ATTN_E_SHAPE, "decoder_layer: cross-attention d_model %lld != %lld", (long long)cc->d_model, (long long)cfg->attn.d_model);
    if (cc->n_heads != cfg->attn.n_heads || cHkv != Hkv || cD != D || cc->rope_theta > 0.0f)
        return attn_set_error(ATTN_E_UNSUPPORTED, "decoder_layer: cross-attention must have the self-attention's heads and head_dim, without RoPE");
    if (enc && (enc->dtype != ATTN_F32 || enc->ndim != 3 || enc->shape[0] != B || !attn_tensor_is_contiguous(enc) ||
                enc->shape[2] != (cc->kv_d_model > 0 ? cc->kv_d_model : cc->d_model)))
        return attn_set_error(ATTN_E_SHAPE, "decoder_layer: enc must be contiguous float32 [%lld, Ls, E_enc]", (long long)B);
    return ATTN_OK;
}

int attn_decoder_layer(attn_tensor *out, const attn_tensor *x, const attn_tensor *enc, const int64_t *enc_lengths,
                       const attn_layer_config *cfg, const attn_mha_config *cross_cfg, const attn_decoder_weights *w,
                       attn_decoder_state *state, attn_arena *arena) {
    if (!cfg || !cross_cfg || !w || !arena)
        return attn_set_error(ATTN_E_INVALID, "decoder_layer: cfg, cross_cfg, weights and arena are required");
    ATTN_TRY(attn__check_x(out, x, cfg->attn.d_model, "decoder_layer"));
    ATTN_TRY(attn_mha_check(&cfg->attn, &w->self_attn));
    ATTN_TRY(attn_mha_check(cross_cfg, &w->cross_attn));
    const int64_t B = x->shape[0], Ln = x->shape[1];
    ATTN_TRY(attn__check_cross(cfg, cross_cfg, enc, B));
    if (!enc && !(state && state->cross_ready))
        return attn_set_error(ATTN_E_INVALID, "decoder_layer: enc is NULL and no cross-attention cache is ready");
    if (state && state->batch != B) return attn_set_error(ATTN_E_SHAPE, "decoder_layer: the state holds %lld sequences, x %lld", (long long)state->batch, (long long)B);
    const int64_t Ls = state ? state->src_len : enc->shape[1];
    if (enc && enc->shape[1] != Ls) return attn_set_error(ATTN_E_SHAPE, "decoder_layer: enc has %lld positions, the state %lld", (long long)enc->shape[1], (long long)Ls);
    int64_t Hkv, D;
    attn__kv_dims(&cfg->attn, &Hkv, &D);
    const int64_t kvd = Hkv * D, N = B * Ln;
    attn_arena_mark mk = attn_arena_get_mark(arena);
    attn_block_config bc;
    attn_block_weights bw, cw;
    memset(&bw, 0, sizeof bw);
    memset(&cw, 0, sizeof cw);
    attn_kv *tmp = NULL, *kv = state ? state->self_kv : NULL;
    float *cross = state ? state->cross_kv : attn_arena_alloc_f32_uninit(arena, (size_t)(B * Ls * 2 * kvd + 1));
    int64_t *slot = (int64_t *)attn_arena_alloc(arena, sizeof(int64_t) * (size_t)(2 * N + B + 1)), *item = slot + N, *count = item + N;
    int rc = cross && slot ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "decoder_layer: out of memory");
    if (rc == 0) rc = attn__block_config(&bc, cfg, cross_cfg->kv_d_model > 0 ? cross_cfg->kv_d_model : cross_cfg->d_model, arena);
    if (rc == 0) rc = attn__mha_views(&bw, &w->self_attn, "decoder_layer");
    if (rc == 0) rc = attn__mha_views(&cw, &w->cross_attn, "decoder_layer");
    if (rc == 0) rc = attn__ffn_views(&bw, &w->ff_w1, &w->ff_b1, &w->ff_w2, &w->ff_b2, "decoder_layer");
    bw.cross_q = cw.q;
    bw.cross_o = cw.o;
    bw.norm1 = (attn_norm_weights){attn__data(&w->ln1_g), attn__data(&w->ln1_b)};
    bw.norm2 = (attn_norm_weights){attn__data(&w->ln2_g), attn__data(&w->ln2_b)};
    bw.norm3 = (attn_norm_weights){attn__data(&w->ln3_g), attn__data(&w->ln3_b)};
    if (rc == 0 && !state) rc = attn_kv_create(&tmp, 1, B, Hkv, Ln > 0 ? Ln : 1, D);
    if (tmp) kv = tmp;
    if (rc == 0 && (!state || !state->cross_ready)) {
        rc = attn__cross_pack(cross, enc, &cw, kvd, arena);
        if (rc == 0 && state) state->cross_ready = 1;
    }
    for (int64_t i = 0; rc == 0 && i < N; i++) slot[i] = item[i] = i / (Ln > 0 ? Ln : 1);
    for (int64_t b = 0; b < B; b++) count[b] = Ln;
    const attn_decoder_rows r = {
        .n_rows = N, .slot = slot, .cross_kv = cross, .cross_len = Ls, .cross_lengths = enc_lengths, .row_item = item};
    if (rc == 0) {
        memcpy(out->data, x->data, sizeof(float) * (size_t)attn_tensor_numel(x));
        rc = attn_decoder_block((float *)out->data, &bc, &bw, 0, kv, &r, arena);
    }
    if (rc == 0) {
        int64_t *bs = (int64_t *)attn_arena_alloc(arena, sizeof(int64_t) * (size_t)(B + 1));
        if (!bs) rc = attn_set_error(ATTN_E_NOMEM, "decoder_layer: out of memory");
        for (int64_t b = 0; rc == 0 && b < B; b++) bs[b] = b;
        if (rc == 0) rc = attn_kv_advance(kv, bs, count, B);
    }
    attn_kv_free(tmp);
    attn_arena_release(arena, mk);
    return rc;
}
