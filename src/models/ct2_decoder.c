/* Layers and the decoder loop shared by the CTranslate2 model families (see ct2_layers.h). */
#include "models/ct2_layers.h"
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int attn__ct2_layer_load(attn__ct2_layer *l, const attn_ct2_file *f, const char *side, int64_t i, int64_t E, int64_t F, int cross) {
    memset(l, 0, sizeof *l);
    char s[192];
#define P(fmt) (snprintf(s, sizeof s, "%s/layer_%lld/" fmt, side, (long long)i), s)
    ATTN_TRY(attn__ct2_ln_load(&l->ln_sa, f, P("self_attention/layer_norm"), E));
    ATTN_TRY(attn__ct2_lin_load(&l->qkv, f, P("self_attention/linear_0"), 3 * E, E, 0));
    ATTN_TRY(attn__ct2_lin_load(&l->out_sa, f, P("self_attention/linear_1"), E, E, 0));
    if (cross) {
        ATTN_TRY(attn__ct2_ln_load(&l->ln_ca, f, P("attention/layer_norm"), E));
        ATTN_TRY(attn__ct2_lin_load(&l->q_ca, f, P("attention/linear_0"), E, E, 0));
        ATTN_TRY(attn__ct2_lin_load(&l->kv_ca, f, P("attention/linear_1"), 2 * E, E, 0));
        ATTN_TRY(attn__ct2_lin_load(&l->out_ca, f, P("attention/linear_2"), E, E, 0));
    }
    ATTN_TRY(attn__ct2_ln_load(&l->ln_ff, f, P("ffn/layer_norm"), E));
    ATTN_TRY(attn__ct2_lin_load(&l->ff1, f, P("ffn/linear_0"), F, E, 0));
    ATTN_TRY(attn__ct2_lin_load(&l->ff2, f, P("ffn/linear_1"), E, F, 0));
#undef P
    attn_block_weights *b = &l->bw;
    b->norm1 = (attn_norm_weights){l->ln_sa.g, l->ln_sa.b};
    b->norm2 = (attn_norm_weights){l->ln_ca.g, l->ln_ca.b};
    b->norm3 = (attn_norm_weights){l->ln_ff.g, l->ln_ff.b};
    b->qkv = l->qkv.w;
    b->o = l->out_sa.w;
    b->cross_q = l->q_ca.w;
    b->cross_kv = l->kv_ca.w;
    b->cross_o = l->out_ca.w;
    b->ff_up = l->ff1.w;
    b->ff_down = l->ff2.w;
    return ATTN_OK;
}

void attn__ct2_layer_free(attn__ct2_layer *l) {
    if (!l) return;
    attn__ct2_ln_free(&l->ln_sa);
    attn__ct2_ln_free(&l->ln_ca);
    attn__ct2_ln_free(&l->ln_ff);
    attn__ct2_lin_free(&l->qkv);
    attn__ct2_lin_free(&l->out_sa);
    attn__ct2_lin_free(&l->q_ca);
    attn__ct2_lin_free(&l->kv_ca);
    attn__ct2_lin_free(&l->out_ca);
    attn__ct2_lin_free(&l->ff1);
    attn__ct2_lin_free(&l->ff2);
    memset(&l->bw, 0, sizeof l->bw);
}

int attn__ct2_stacks_load(attn__ct2_layer **enc, attn__ct2_layer **dec, const attn_ct2_file *f, int64_t n_enc, int64_t n_dec, int64_t E,
                          int64_t F) {
    *enc = (attn__ct2_layer *)calloc((size_t)n_enc, sizeof **enc);
    *dec = (attn__ct2_layer *)calloc((size_t)n_dec, sizeof **dec);
    if (!*enc || !*dec) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < n_enc; i++) ATTN_TRY(attn__ct2_layer_load(&(*enc)[i], f, "encoder", i, E, F, 0));
    for (int64_t i = 0; i < n_dec; i++) ATTN_TRY(attn__ct2_layer_load(&(*dec)[i], f, "decoder", i, E, F, 1));
    return ATTN_OK;
}

void attn__ct2_stacks_free(attn__ct2_layer *enc, attn__ct2_layer *dec, int64_t n_enc, int64_t n_dec) {
    for (int64_t i = 0; enc && i < n_enc; i++) attn__ct2_layer_free(&enc[i]);
    for (int64_t i = 0; dec && i < n_dec; i++) attn__ct2_layer_free(&dec[i]);
    free(enc);
    free(dec);
}

attn_block_config attn__ct2_block_config(int64_t E, int64_t H, int64_t F, int pre_norm, attn_activation act, int cross, int int8,
                                         float query_scale) {
    return (attn_block_config){.d_model = E,
                               .n_heads = H,
                               .d_ff = F,
                               .d_cross = cross ? E : 0,
                               .norm_first = pre_norm,
                               .norm = ATTN_NORM_LAYER_CT2,
                               .eps = 1e-5f,
                               .act = act,
                               .ct2_attention = int8,
                               .query_scale = query_scale};
}

int attn__ct2_encode(float *x, const attn__ct2_layer *layers, int64_t n, const attn_block_config *c, int64_t B, int64_t L,
                     const int64_t *key_lengths, attn_arena *arena) {
    attn_sdpa_params p = attn_sdpa_params_default();
    p.key_lengths = key_lengths;
    for (int64_t i = 0; i < n; i++) ATTN_TRY(attn_encoder_block(x, NULL, c, &layers[i].bw, B, L, &p, arena));
    return ATTN_OK;
}

void attn__ct2_dec_free(attn__ct2_dec *d) {
    if (!d) return;
    attn_kv_free(d->kv);
    attn_arena_free(&d->arena);
    ATTN_FREE_ALL(d->cross_kv, d->src_len, d->row_item, d->x, d->w_last);
    memset(d, 0, sizeof *d);
}

int attn__ct2_dec_init(attn__ct2_dec *d, const attn__ct2_layer *layers, int64_t n_layers, const attn_block_config *c,
                       const attn__ct2_ln *final_ln, const attn__ct2_lin *proj, int64_t B, int64_t Ls, int64_t T, int64_t cap_rows,
                       int with_src_len) {
    memset(d, 0, sizeof *d);
    d->layers = layers;
    d->n_layers = n_layers;
    d->cfg = *c;
    d->final_ln = final_ln;
    d->proj = proj;
    d->B = B;
    d->Ls = Ls;
    d->cap_rows = cap_rows;
    const int64_t E = c->d_model, H = c->n_heads;
    double cache = (double)cap_rows * (double)T * (double)E;
    if (cache * 4.0 * 4.0 * (double)n_layers > 8e9)
        return attn_set_error(ATTN_E_NOMEM, "decoding state too large (%lld rows x %lld steps)", (long long)cap_rows, (long long)T);
    ATTN_TRY(attn_arena_init(&d->arena, 0));
    int rc = attn_kv_create(&d->kv, n_layers, cap_rows, H, T, E / H);
    if (rc < 0) return rc;
    d->cross_kv = (float *)malloc(sizeof(float) * (size_t)(n_layers * B * Ls * 2 * E));
    d->src_len = with_src_len ? (int64_t *)calloc((size_t)B, sizeof(int64_t)) : NULL;
    d->row_item = (int64_t *)calloc((size_t)cap_rows, sizeof(int64_t));
    d->x = (float *)malloc(sizeof(float) * (size_t)(cap_rows * E));
    d->w_last = (float *)malloc(sizeof(float) * (size_t)(cap_rows * H * Ls + 1));
    if (!d->cross_kv || (with_src_len && !d->src_len) || !d->row_item || !d->x || !d->w_last)
        return attn_set_error(ATTN_E_NOMEM, "out of memory for the decoding state");
    return ATTN_OK;
}

int attn__ct2_dec_cross(attn__ct2_dec *d, const float *enc) {
    const int64_t M = d->B * d->Ls, E2 = 2 * d->cfg.d_model;
    for (int64_t li = 0; li < d->n_layers; li++) ATTN_TRY(attn_cross_kv(d->cross_kv + li * M * E2, enc, M, &d->cfg, &d->layers[li].bw));
    return ATTN_OK;
}

int attn__ct2_dec_step(attn__ct2_dec *d, float *logits, float *attn_out, int64_t N) {
    const int64_t E = d->cfg.d_model, H = d->cfg.n_heads, Ls = d->Ls, M = d->B * Ls;
    if (N > d->cap_rows) return attn_set_error(ATTN_E_RANGE, "decoder: %lld rows exceed the capacity %lld", (long long)N, (long long)d->cap_rows);
    attn_decoder_rows r;
    memset(&r, 0, sizeof r);
    r.n_rows = N;
    r.cross_len = Ls;
    r.cross_lengths = d->src_len;
    r.row_item = d->row_item;
    for (int64_t li = 0; li < d->n_layers; li++) {
        r.cross_kv = d->cross_kv + li * M * 2 * E;
        r.cross_weights = attn_out && li == d->n_layers - 1 ? d->w_last : NULL;
        ATTN_TRY(attn_decoder_block(d->x, &d->cfg, &d->layers[li].bw, li, d->kv, &r, &d->arena));
    }
    ATTN_TRY(attn_kv_advance(d->kv, NULL, NULL, N));
    d->rows = N;
    if (attn_out) /* head 0 of the last layer */
        for (int64_t i = 0; i < N; i++) memcpy(attn_out + i * Ls, d->w_last + i * H * Ls, sizeof(float) * (size_t)Ls);
    if (!logits) return ATTN_OK;
    if (d->final_ln) attn__ct2_ln_apply(d->x, d->x, N, d->final_ln, 1e-5f);
    /* a few rows (N <= 16: greedy, beams) stream the file's float16 / bfloat16 copy when it kept
     * one (attn__ct2_lin_keep16; attn_weight_matmul's skinny path); more rows and int8 weights
     * through attn__ct2_gemm */
    return attn_weight_matmul(logits, d->x, N, &d->proj->w, ATTN_ACT_IDENTITY, d->cfg.n_threads);
}

int attn__ct2_dec_reorder(attn__ct2_dec *d, const int64_t *src, int64_t n_new, const int64_t *row_item) {
    if (n_new > d->cap_rows) return attn_set_error(ATTN_E_RANGE, "reorder: %lld rows exceed the capacity", (long long)n_new);
    ATTN_TRY(attn_kv_reorder(d->kv, src, n_new));
    if (row_item) memcpy(d->row_item, row_item, sizeof(int64_t) * (size_t)n_new);
    d->rows = n_new;
    return ATTN_OK;
}
