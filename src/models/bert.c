/* BERT encoder + sentence-transformers pooling (see attn_bert.h). One file per model family. */
#include "attn_bert.h"
#include "attn_layers.h"
#include "attn_ops.h"
#include "attn_safetensors.h"
#include "core/internal.h"
#include "formats/hf_config.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct attn_bert {
    attn_bert_config cfg;
    attn_safetensors *st;
    attn_tokenizer *tok;
    attn_arena warena; /* converted (non-F32) weights live here */
    attn_tensor word, pos, type, emb_ln_g, emb_ln_b;
    attn_encoder_weights *layers;
    attn_layer_config lcfg;
    int use_variant;             /* 1: self-attention by attn_variant_encoder_layer */
    attn_variant_params variant; /* set by attn_bert_set_attention */
};

/* ---------------------------------------------------------------- loading */

static int attn__parse_config(attn_bert_config *c, const char *dir) {
    attn__hf_json j;
    int rc = attn__hf_json_load(&j, "bert", dir, "config.json", 0,
                                " (is the model directory complete? run scripts/fetch_minilm.sh)");
    memset(c, 0, sizeof *c);
    c->type_vocab_size = 2;
    c->act = ATTN_ACT_GELU;
    c->eps = 1e-12f;
    if (rc == 0) rc = attn__hf_int(&j, NULL, "hidden_size", &c->d_model, 1, 1 << 16, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_hidden_layers", &c->n_layers, 1, 1024, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_attention_heads", &c->n_heads, 1, 1024, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "intermediate_size", &c->d_ff, 1, 1 << 20, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "vocab_size", &c->vocab_size, 1, 1 << 24, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "max_position_embeddings", &c->max_positions, 1, 1 << 20, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "type_vocab_size", &c->type_vocab_size, 1, 1 << 16, 0);
    if (rc == 0 && c->d_model % c->n_heads != 0)
        rc = attn_set_error(ATTN_E_FORMAT, "bert: hidden_size %lld is not a multiple of num_attention_heads %lld",
                            (long long)c->d_model, (long long)c->n_heads);
    if (rc == 0) rc = attn__hf_float(&j, NULL, "layer_norm_eps", &c->eps, 0, 1);
    if (rc == 0) rc = attn__hf_activation(&j, NULL, "hidden_act", &c->act);
    const cJSON *pe = j.root ? cJSON_GetObjectItemCaseSensitive(j.root, "position_embedding_type") : NULL;
    if (rc == 0 && pe && !(cJSON_IsString(pe) && !strcmp(pe->valuestring, "absolute")))
        rc = attn_set_error(ATTN_E_UNSUPPORTED, "bert: only absolute position embeddings are supported");
    attn__hf_json_free(&j);
    ATTN_TRY(rc);

    c->max_seq_len = c->max_positions;
    rc = attn__hf_json_load(&j, "bert", dir, "sentence_bert_config.json", ATTN__HF_OPTIONAL, NULL);
    if (rc == 0 && j.root) rc = attn__hf_int(&j, NULL, "max_seq_length", &c->max_seq_len, 2, c->max_positions, 0);
    attn__hf_json_free(&j);
    ATTN_TRY(rc);
    c->pooling = ATTN_POOL_MEAN;
    rc = attn__hf_json_load(&j, "bert", dir, "1_Pooling/config.json", ATTN__HF_OPTIONAL, NULL);
    if (rc == 0 && j.root) {
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j.root, "pooling_mode_cls_token"))) c->pooling = ATTN_POOL_CLS;
        else if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j.root, "pooling_mode_max_tokens"))) c->pooling = ATTN_POOL_MAX;
    }
    attn__hf_json_free(&j);
    ATTN_TRY(rc);
    c->normalize = 0;
    rc = attn__hf_json_load(&j, "bert", dir, "modules.json", ATTN__HF_OPTIONAL | ATTN__HF_ANY, NULL);
    if (rc == 0 && j.root) {
        const cJSON *mod;
        cJSON_ArrayForEach(mod, j.root) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(mod, "type");
            if (cJSON_IsString(t) && strstr(t->valuestring, "Normalize")) c->normalize = 1;
        }
    }
    attn__hf_json_free(&j);
    return rc;
}

/* Fetch a weight by name, trying the "bert." prefix too, and check its shape. */
static int attn__w(attn_bert *m, attn_tensor *out, const char *name, int ndim, int64_t d0, int64_t d1) {
    char full[256];
    const char *use = name;
    if (attn_safetensors_find(m->st, name) < 0) {
        snprintf(full, sizeof full, "bert.%s", name);
        if (attn_safetensors_find(m->st, full) < 0)
            return attn_set_error(ATTN_E_INVALID, "bert: weight \"%s\" not found in model.safetensors", name);
        use = full;
    }
    int64_t shape[2] = {d0, d1};
    ATTN_TRY(attn_safetensors_get_f32_shape(m->st, use, out, &m->warena, ndim, shape));
    /* a NaN / inf weight would surface later as a bad activation far from its cause: name it here */
    const int64_t rows = ndim == 2 ? out->shape[0] : 1, cols = ndim == 2 ? out->shape[1] : out->shape[0];
    const int64_t rs = ndim == 2 ? out->stride[0] : 0, cs = out->stride[ndim - 1];
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            const float x = ((const float *)out->data)[r * rs + c * cs];
            if (!isfinite(x)) {
                if (ndim == 2)
                    return attn_set_error(ATTN_E_RANGE, "model.safetensors: weight \"%s\" holds %s at [%lld, %lld]", use,
                                          isnan(x) ? "NaN" : "inf", (long long)r, (long long)c);
                return attn_set_error(ATTN_E_RANGE, "model.safetensors: weight \"%s\" holds %s at [%lld]", use,
                                      isnan(x) ? "NaN" : "inf", (long long)c);
            }
        }
    return ATTN_OK;
}

void attn_bert_free(attn_bert *m) {
    if (!m) return;
    free(m->layers);
    attn_arena_free(&m->warena);
    attn_safetensors_close(m->st);
    attn_tokenizer_free(m->tok);
    free(m);
}

int attn_bert_load(attn_bert **out, const char *model_dir) {
    if (!out || !model_dir) return attn_set_error(ATTN_E_INVALID, "bert_load: NULL argument");
    *out = NULL;
    attn_bert *m = (attn_bert *)calloc(1, sizeof *m);
    if (!m) return attn_set_error(ATTN_E_NOMEM, "bert_load: out of memory");
    attn_arena_init(&m->warena, 1 << 20);
    int rc = attn__parse_config(&m->cfg, model_dir);
    char path[4096];
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/model.safetensors", model_dir);
        rc = attn_safetensors_open(&m->st, path);
    }
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/tokenizer.json", model_dir);
        rc = attn_tokenizer_load_json(&m->tok, path);
    }
    const attn_bert_config *c = &m->cfg;
    int64_t E = c->d_model, F = c->d_ff;
    if (rc == 0) rc = attn__w(m, &m->word, "embeddings.word_embeddings.weight", 2, c->vocab_size, E);
    if (rc == 0) rc = attn__w(m, &m->pos, "embeddings.position_embeddings.weight", 2, c->max_positions, E);
    if (rc == 0) rc = attn__w(m, &m->type, "embeddings.token_type_embeddings.weight", 2, c->type_vocab_size, E);
    if (rc == 0) rc = attn__w(m, &m->emb_ln_g, "embeddings.LayerNorm.weight", 1, E, 0);
    if (rc == 0) rc = attn__w(m, &m->emb_ln_b, "embeddings.LayerNorm.bias", 1, E, 0);
    if (rc == 0 && attn_tokenizer_vocab_size(m->tok) > c->vocab_size)
        rc = attn_set_error(ATTN_E_FORMAT, "bert: tokenizer has %lld tokens but the model only %lld",
                            (long long)attn_tokenizer_vocab_size(m->tok), (long long)c->vocab_size);
    if (rc == 0) {
        m->layers = (attn_encoder_weights *)calloc((size_t)c->n_layers, sizeof *m->layers);
        if (!m->layers) rc = attn_set_error(ATTN_E_NOMEM, "bert_load: out of memory");
    }
    for (int64_t l = 0; rc == 0 && l < c->n_layers; l++) {
        attn_encoder_weights *w = &m->layers[l];
        char n[256];
#define W(field, suffix, nd, a, b)                                                   \
    if (rc == 0) {                                                                   \
        snprintf(n, sizeof n, "encoder.layer.%lld.%s", (long long)l, suffix);       \
        rc = attn__w(m, &w->field, n, nd, a, b);                                     \
    }
        W(attn.wq, "attention.self.query.weight", 2, E, E)
        W(attn.bq, "attention.self.query.bias", 1, E, 0)
        W(attn.wk, "attention.self.key.weight", 2, E, E)
        W(attn.bk, "attention.self.key.bias", 1, E, 0)
        W(attn.wv, "attention.self.value.weight", 2, E, E)
        W(attn.bv, "attention.self.value.bias", 1, E, 0)
        W(attn.wo, "attention.output.dense.weight", 2, E, E)
        W(attn.bo, "attention.output.dense.bias", 1, E, 0)
        W(ln1_g, "attention.output.LayerNorm.weight", 1, E, 0)
        W(ln1_b, "attention.output.LayerNorm.bias", 1, E, 0)
        W(ff_w1, "intermediate.dense.weight", 2, F, E)
        W(ff_b1, "intermediate.dense.bias", 1, F, 0)
        W(ff_w2, "output.dense.weight", 2, E, F)
        W(ff_b2, "output.dense.bias", 1, E, 0)
        W(ln2_g, "output.LayerNorm.weight", 1, E, 0)
        W(ln2_b, "output.LayerNorm.bias", 1, E, 0)
#undef W
    }
    if (rc < 0) {
        attn_bert_free(m);
        return rc;
    }
    m->lcfg = (attn_layer_config){.attn = {.d_model = E, .n_heads = c->n_heads}, .d_ff = F, .act = c->act, .norm_first = 0 /* BERT is post-LN */, .eps = c->eps};
    *out = m;
    return ATTN_OK;
}

const attn_bert_config *attn_bert_get_config(const attn_bert *m) { return m ? &m->cfg : NULL; }
const attn_tokenizer *attn_bert_tokenizer(const attn_bert *m) { return m ? m->tok : NULL; }

int attn_bert_set_attention(attn_bert *m, const attn_variant_params *v) {
    if (!m) return attn_set_error(ATTN_E_INVALID, "bert_set_attention: model is NULL");
    if (!v || v->kind == ATTN_VARIANT_EXACT) {
        m->use_variant = 0;
        return ATTN_OK;
    }
    if (v->mask || v->key_padding_mask || v->key_lengths)
        return attn_set_error(ATTN_E_INVALID, "bert_set_attention: mask, key_padding_mask and key_lengths must be NULL (the encoder supplies the padding)");
    ATTN_TRY(attn_variant_validate(v));
    m->variant = *v;
    m->use_variant = 1;
    return ATTN_OK;
}

/* ---------------------------------------------------------------- forward */

int attn_bert_forward(const attn_bert *m, float *last_hidden, attn_bert_extra *extra, const int32_t *ids,
                      const int64_t *lengths, int64_t B, int64_t L, attn_arena *arena) {
    if (!m || !last_hidden || !ids || !lengths || !arena)
        return attn_set_error(ATTN_E_INVALID, "bert_forward: NULL argument");
    const attn_bert_config *c = &m->cfg;
    if (B <= 0 || L <= 0 || L > c->max_positions)
        return attn_set_error(ATTN_E_INVALID, "bert_forward: need B > 0 and 0 < L <= %lld (got B %lld, L %lld)",
                              (long long)c->max_positions, (long long)B, (long long)L);
    for (int64_t b = 0; b < B; b++)
        if (lengths[b] < 1 || lengths[b] > L)
            return attn_set_error(ATTN_E_INVALID, "bert_forward: lengths[%lld] = %lld not in 1..%lld", (long long)b,
                                  (long long)lengths[b], (long long)L);
    int64_t E = c->d_model, H = c->n_heads;
    attn_arena_mark mk = attn_arena_get_mark(arena);
    float *x = attn_arena_alloc_f32_uninit(arena, (size_t)(B * L * E));
    float *y = attn_arena_alloc_f32_uninit(arena, (size_t)(B * L * E));
    if (!x || !y) {
        attn_arena_release(arena, mk);
        return ATTN_E_NOMEM;
    }
    int rc = ATTN_OK;
    /* embeddings: word + position + token type 0, then LayerNorm */
    for (int64_t b = 0; b < B && rc == 0; b++)
        for (int64_t l = 0; l < L; l++) {
            int32_t id = l < lengths[b] ? ids[b * L + l] : 0;
            if (id < 0 || id >= c->vocab_size) {
                rc = attn_set_error(ATTN_E_RANGE, "bert_forward: token id %d at [%lld, %lld] is outside the vocabulary (%lld)",
                                    id, (long long)b, (long long)l, (long long)c->vocab_size);
                break;
            }
            const float *we = (const float *)m->word.data + (int64_t)id * E;
            const float *pe = (const float *)m->pos.data + l * E;
            const float *te = (const float *)m->type.data;
            float *dst = x + (b * L + l) * E;
            for (int64_t e = 0; e < E; e++) dst[e] = we[e] + pe[e] + te[e];
        }
    attn_tensor tx = attn_tensor_f32_3d(x, B, L, E), ty = attn_tensor_f32_3d(y, B, L, E);
    if (rc == 0) rc = attn_layernorm(&tx, &tx, &m->emb_ln_g, &m->emb_ln_b, c->eps);
    if (rc == 0 && extra && extra->hidden_states) memcpy(extra->hidden_states, x, sizeof(float) * (size_t)(B * L * E));
    attn_sdpa_params p = attn_sdpa_params_default();
    p.key_lengths = lengths;
    for (int64_t l = 0; l < c->n_layers && rc == 0; l++) {
        attn_tensor wt, *wp = NULL;
        if (extra && extra->attentions) {
            wt = attn_tensor_f32_4d(extra->attentions + l * B * H * L * L, B, H, L, L);
            wp = &wt;
        }
        if (m->use_variant) {
            attn_variant_params vp = m->variant;
            vp.key_lengths = lengths;
            rc = attn_variant_encoder_layer(&ty, wp, &tx, &m->lcfg, &m->layers[l], &vp, arena);
        } else {
            rc = attn_encoder_layer(&ty, wp, &tx, &m->lcfg, &m->layers[l], &p, arena);
        }
        attn_tensor t = tx;
        tx = ty;
        ty = t;
        if (rc == 0 && extra && extra->hidden_states)
            memcpy(extra->hidden_states + (l + 1) * B * L * E, tx.data, sizeof(float) * (size_t)(B * L * E));
    }
    if (rc == 0) memcpy(last_hidden, tx.data, sizeof(float) * (size_t)(B * L * E));
    attn_arena_release(arena, mk);
    return rc;
}

/* ---------------------------------------------------------------- embed */

typedef struct {
    int64_t idx, len;
} attn__ord;

static int attn__by_len_desc(const void *a, const void *b) {
    const attn__ord *x = (const attn__ord *)a, *y = (const attn__ord *)b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->idx < y->idx ? -1 : (x->idx > y->idx);
}

int attn_bert_embed(const attn_bert *m, float *out, const char *const *texts, int64_t n, int64_t batch_size,
                    void (*progress)(int64_t, int64_t, void *), void *user) {
    return attn_bert_embed_n(m, out, texts, NULL, n, batch_size, progress, user);
}

int attn_bert_embed_n(const attn_bert *m, float *out, const char *const *texts, const int64_t *lengths, int64_t n,
                      int64_t batch_size, void (*progress)(int64_t, int64_t, void *), void *user) {
    if (!m || (n > 0 && (!out || !texts))) return attn_set_error(ATTN_E_INVALID, "bert_embed: NULL argument");
    if (n <= 0) return ATTN_OK;
    if (batch_size <= 0) batch_size = 32;
    const attn_bert_config *c = &m->cfg;
    int64_t E = c->d_model, Lmax = c->max_seq_len;
    int32_t *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n * Lmax));
    attn__ord *ord = (attn__ord *)malloc(sizeof(attn__ord) * (size_t)n);
    if (!ids || !ord) {
        free(ids);
        free(ord);
        return attn_set_error(ATTN_E_NOMEM, "bert_embed: out of memory for %lld sentences", (long long)n);
    }
    int rc = ATTN_OK;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        if (!texts[i]) {
            rc = attn_set_error(ATTN_E_INVALID, "bert_embed: text %lld is NULL", (long long)i);
            break;
        }
        int64_t cnt = 0;
        if (lengths && lengths[i] < 0) {
            rc = attn_set_error(ATTN_E_INVALID, "bert_embed: length of text %lld is negative", (long long)i);
            break;
        }
        size_t len = lengths ? (size_t)lengths[i] : strlen(texts[i]);
        rc = attn_tokenizer_encode(m->tok, texts[i], len, 1, Lmax, ids + i * Lmax, &cnt, Lmax, NULL);
        if (rc < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            rc = attn_set_error(rc, "sentence %lld: %s", (long long)i + 1, msg);
        }
        ord[i].idx = i;
        ord[i].len = cnt;
    }
    if (rc < 0) {
        free(ids);
        free(ord);
        return rc;
    }
    /* sort by length so each batch pads little; results go back to the input order */
    qsort(ord, (size_t)n, sizeof *ord, attn__by_len_desc);
    attn_arena arena;
    attn_arena_init(&arena, 4 << 20);
    for (int64_t s = 0; s < n && rc == 0; s += batch_size) {
        int64_t B = n - s < batch_size ? n - s : batch_size;
        int64_t L = ord[s].len; /* longest in this batch (sorted) */
        attn_arena_mark mk = attn_arena_get_mark(&arena);
        int32_t *bid = (int32_t *)attn_arena_alloc(&arena, sizeof(int32_t) * (size_t)(B * L));
        int64_t *blen = (int64_t *)attn_arena_alloc(&arena, sizeof(int64_t) * (size_t)B);
        float *h = attn_arena_alloc_f32_uninit(&arena, (size_t)(B * L * E));
        if (!bid || !blen || !h) {
            rc = ATTN_E_NOMEM;
            break;
        }
        for (int64_t b = 0; b < B; b++) {
            const attn__ord *o = &ord[s + b];
            blen[b] = o->len;
            for (int64_t l = 0; l < L; l++) bid[b * L + l] = l < o->len ? ids[o->idx * Lmax + l] : 0;
        }
        rc = attn_bert_forward(m, h, NULL, bid, blen, B, L, &arena);
        for (int64_t b = 0; b < B && rc == 0; b++) {
            float *dst = out + ord[s + b].idx * E;
            const float *hb = h + b * L * E;
            for (int64_t e = 0; e < E; e++) {
                double acc = c->pooling == ATTN_POOL_MAX ? -INFINITY : 0.0;
                if (c->pooling == ATTN_POOL_CLS) {
                    acc = hb[e];
                } else {
                    for (int64_t l = 0; l < blen[b]; l++) {
                        double v = hb[l * E + e];
                        if (c->pooling == ATTN_POOL_MAX) acc = v > acc ? v : acc;
                        else acc += v;
                    }
                    if (c->pooling == ATTN_POOL_MEAN) acc /= (double)blen[b];
                }
                dst[e] = (float)acc;
            }
            if (c->normalize) { /* torch.nn.functional.normalize: x / max(||x||, 1e-12) */
                double ss = 0;
                for (int64_t e = 0; e < E; e++) ss += (double)dst[e] * dst[e];
                double nrm = sqrt(ss);
                if (nrm < 1e-12) nrm = 1e-12;
                for (int64_t e = 0; e < E; e++) dst[e] = (float)(dst[e] / nrm);
            }
        }
        attn_arena_release(&arena, mk);
        if (progress && rc == 0) progress(s + B, n, user);
    }
    attn_arena_free(&arena);
    free(ids);
    free(ord);
    return rc;
}
