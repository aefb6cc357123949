/* CTranslate2 Transformer encoder-decoder and translation (see include/attn_translate.h). */
#include "attn_translate.h"
#include "attn_tokenizer.h"
#include "attn_attention.h"
#include "core/internal.h"
#include "models/ct2_layers.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    attn__ct2_ln ln_sa, ln_ff;
    attn__ct2_lin qkv, out, ff1, ff2;
} attn__enc_layer;

typedef struct {
    attn__ct2_ln ln_sa, ln_ca, ln_ff;
    attn__ct2_lin qkv, out_sa, q_ca, kv_ca, out_ca, ff1, ff2;
} attn__dec_layer;

typedef struct {
    char **tok;     /* id -> token */
    int32_t *order; /* ids sorted by token */
    int64_t n;
} attn__vocab;

struct attn_translator {
    attn_translator_config cfg;
    float *src_emb, *tgt_emb; /* [V, E] */
    float *src_pos, *tgt_pos; /* learned [P, E] or NULL */
    int64_t src_pos_n, tgt_pos_n;
    float emb_scale;
    float query_scale; /* 1 / sqrt(head_dim) in float, as CTranslate2 computes it */
    attn__enc_layer *enc;
    attn__dec_layer *dec;
    attn__ct2_ln enc_ln, dec_ln; /* final norms (pre-norm) */
    attn__ct2_lin proj;
    attn__vocab sv, tv;
    int32_t bos, eos, unk;
    float *pe;         /* sinusoidal table [pe_n, E] */
    int64_t pe_n;
};

/* ---------------------------------------------------------------- vocabulary */

static const attn__vocab *attn__sort_vocab;
static int attn__cmp_tok(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    int c = strcmp(attn__sort_vocab->tok[x], attn__sort_vocab->tok[y]);
    return c ? c : (x < y ? -1 : x > y);
}

static void attn__vocab_free(attn__vocab *v) {
    for (int64_t i = 0; i < v->n; i++) free(v->tok[i]);
    free(v->tok);
    free(v->order);
    memset(v, 0, sizeof *v);
}

static int attn__vocab_load(attn__vocab *v, const char *path) {
    memset(v, 0, sizeof *v);
    FILE *fp = fopen(path, "rb");
    if (!fp) return attn_set_error(ATTN_E_IO, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t vcap = 0;
    int has_unk = 0;
    for (;;) {
        errno = 0;
        if ((len = getline(&line, &cap, fp)) < 0) {
            if (feof(fp) && !ferror(fp)) break;
            int e = errno ? errno : EIO; /* a read error (or no memory), not the end of the file */
            free(line);
            fclose(fp);
            attn__vocab_free(v);
            return attn_set_error(ATTN_E_IO, "%s: read error: %s", path, strerror(e));
        }
        if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
        if (len > 0 && line[len - 1] == '\r') line[--len] = 0;
        if (memchr(line, 0, (size_t)len)) {
            free(line);
            fclose(fp);
            attn__vocab_free(v);
            return attn_set_error(ATTN_E_FORMAT, "%s: line %lld contains a NUL byte", path, (long long)v->n + 1);
        }
        if (v->n == vcap) {
            vcap = vcap ? 2 * vcap : 64;
            char **t = (char **)realloc(v->tok, sizeof(char *) * (size_t)vcap);
            if (!t) goto nomem;
            v->tok = t;
        }
        v->tok[v->n] = strdup(line);
        if (!v->tok[v->n]) goto nomem;
        if (strcmp(line, "<unk>") == 0) has_unk = 1;
        v->n++;
    }
    free(line);
    line = NULL;
    fclose(fp);
    fp = NULL;
    if (!has_unk) {
        char **t = (char **)realloc(v->tok, sizeof(char *) * (size_t)(v->n + 1));
        if (!t) goto nomem;
        v->tok = t;
        v->tok[v->n] = strdup("<unk>");
        if (!v->tok[v->n]) goto nomem;
        v->n++;
    }
    v->order = (int32_t *)malloc(sizeof(int32_t) * (size_t)v->n);
    if (!v->order) goto nomem;
    for (int64_t i = 0; i < v->n; i++) v->order[i] = (int32_t)i;
    attn__sort_vocab = v;
    qsort(v->order, (size_t)v->n, sizeof(int32_t), attn__cmp_tok);
    attn__sort_vocab = NULL;
    return ATTN_OK;
nomem:
    free(line);
    if (fp) fclose(fp);
    attn__vocab_free(v);
    return attn_set_error(ATTN_E_NOMEM, "out of memory reading %s", path);
}

/* first id of a token (CTranslate2 maps a duplicated token to its first line) */
static int32_t attn__vocab_id(const attn__vocab *v, const char *tok) {
    int64_t lo = 0, hi = v->n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (strcmp(v->tok[v->order[mid]], tok) < 0) lo = mid + 1;
        else hi = mid;
    }
    if (lo < v->n && strcmp(v->tok[v->order[lo]], tok) == 0) return v->order[lo];
    return -1;
}

/* ---------------------------------------------------------------- loading */

/* sin / cos rounded as CTranslate2's CPU kernels compute them (a Cephes-style single-precision
 * approximation: argument reduction by pi/4 in three parts, degree-2 polynomials in z = x^2,
 * multiply-adds fused) so that position encodings, which int8 models re-quantise, carry the
 * same float bits. Constants: Cephes sinf / cosf. Accurate to ~1 ulp for |x| < 8192. */
static float attn__ct2_sincos(float x, int want_cos) {
    const float four_over_pi = 1.27323954473516f, dp1 = -0.78515625f, dp2 = -2.4187564849853515625e-4f,
                dp3 = -3.77489497744594108e-8f;
    const float c0 = 2.443315711809948e-5f, c1 = -1.388731625493765e-3f, c2 = 4.166664568298827e-2f;
    const float s0 = -1.9515295891e-4f, s1 = 8.3321608736e-3f, s2 = -1.6666654611e-1f;
    float ax = fabsf(x);
    int32_t j = ((int32_t)(ax * four_over_pi) + 1) & ~1;
    float y = (float)j;
    int negate;
    int use_cos_poly;
    if (want_cos) {
        j -= 2;
        negate = (~j & 4) != 0;
        use_cos_poly = (j & 2) != 0;
    } else {
        negate = ((j & 4) != 0) != (x < 0);
        use_cos_poly = (j & 2) != 0;
    }
    float r = fmaf(y, dp1, ax);
    r = fmaf(y, dp2, r);
    r = fmaf(y, dp3, r);
    float z = r * r;
    float half_z = z * 0.5f;
    float pc = fmaf(z, c0, c1);
    pc = fmaf(pc, z, c2);
    pc = z * pc;
    pc = fmaf(pc, z, -half_z) + 1.0f;
    float ps = fmaf(z, s0, s1);
    ps = fmaf(z, ps, s2);
    ps = z * ps;
    ps = fmaf(r, ps, r);
    float v = use_cos_poly ? pc : ps;
    return negate ? -v : v;
}

static int attn__pe_table(attn_translator *m, int64_t n) {
    const int64_t E = m->cfg.d_model, half = E / 2;
    float *pe = (float *)malloc(sizeof(float) * (size_t)(n * E));
    if (!pe) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    float inc = logf(10000.0f) / (float)(half - 1 > 0 ? half - 1 : 1);
    for (int64_t p = 0; p < n; p++)
        for (int64_t j = 0; j < half; j++) {
            float ts = expf(-inc * (float)j);
            float t = (float)(p + 1) * ts;
            pe[p * E + j] = attn__ct2_sincos(t, 0);
            pe[p * E + half + j] = attn__ct2_sincos(t, 1);
        }
    free(m->pe);
    m->pe = pe;
    m->pe_n = n;
    return ATTN_OK;
}

void attn_translator_free(attn_translator *m) {
    if (!m) return;
    free(m->src_emb);
    free(m->tgt_emb);
    free(m->src_pos);
    free(m->tgt_pos);
    if (m->enc)
        for (int64_t i = 0; i < m->cfg.n_encoder_layers; i++) {
            attn__enc_layer *l = &m->enc[i];
            attn__ct2_ln_free(&l->ln_sa);
            attn__ct2_ln_free(&l->ln_ff);
            attn__ct2_lin_free(&l->qkv);
            attn__ct2_lin_free(&l->out);
            attn__ct2_lin_free(&l->ff1);
            attn__ct2_lin_free(&l->ff2);
        }
    if (m->dec)
        for (int64_t i = 0; i < m->cfg.n_decoder_layers; i++) {
            attn__dec_layer *l = &m->dec[i];
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
        }
    free(m->enc);
    free(m->dec);
    attn__ct2_ln_free(&m->enc_ln);
    attn__ct2_ln_free(&m->dec_ln);
    attn__ct2_lin_free(&m->proj);
    attn__vocab_free(&m->sv);
    attn__vocab_free(&m->tv);
    free(m->pe);
    free(m);
}

static int64_t attn__count_layers(const attn_ct2_file *f, const char *side) {
    char name[128];
    int64_t n = 0;
    for (;; n++) {
        int found = 0;
        snprintf(name, sizeof name, "%s/layer_%lld/", side, (long long)n);
        size_t len = strlen(name);
        for (int64_t i = 0; i < attn_ct2_num_variables(f) && !found; i++)
            found = strncmp(attn_ct2_variable(f, i)->name, name, len) == 0;
        if (!found) return n;
    }
}

static int attn__load_body(attn_translator *m, const attn_ct2_file *f) {
    attn_translator_config *c = &m->cfg;
    const char *spec = attn_ct2_spec_name(f);
    snprintf(c->spec, sizeof c->spec, "%s", spec);
    if (strcmp(spec, "TransformerBase") == 0) c->n_heads = 8;
    else if (strcmp(spec, "TransformerBig") == 0) c->n_heads = 16;
    else if (strcmp(spec, "TransformerSpec") == 0) c->n_heads = (int64_t)attn__ct2_attr(f, "num_heads", attn__ct2_attr(f, "encoder/num_heads", 8));
    else {
        char shown[160];
        return attn_set_error(ATTN_E_FORMAT, "model.bin: spec '%s' is not a Transformer encoder-decoder (TransformerBase, TransformerBig or TransformerSpec expected)",
                              attn__printable(shown, sizeof shown, spec));
    }
    c->pre_norm = (int)attn__ct2_attr(f, "pre_norm", attn__ct2_attr(f, "encoder/pre_norm", 1));
    int act = (int)attn__ct2_attr(f, "activation", attn__ct2_attr(f, "encoder/activation", 0));
    /* CTranslate2 Activation: 0 ReLU, 1 GELU (tanh approximation), 3 GELU (erf) */
    if (act == 0) c->act = ATTN_ACT_RELU;
    else if (act == 1) c->act = ATTN_ACT_GELU_TANH;
    else if (act == 3) c->act = ATTN_ACT_GELU;
    else return attn_set_error(ATTN_E_UNSUPPORTED, "model.bin: activation %d is not supported (ReLU, GELU)", act);
    const attn_ct2_var *se = attn_ct2_find(f, "encoder/embeddings/weight");
    if (!se) se = attn_ct2_find(f, "encoder/embeddings_0/weight");
    if (!se || se->rank != 2) return attn_set_error(ATTN_E_FORMAT, "model.bin has no 2-D 'encoder/embeddings/weight'");
    c->d_model = se->shape[1];
    if (c->d_model <= 0 || c->d_model % c->n_heads != 0 || c->d_model % 2 != 0)
        return attn_set_error(ATTN_E_FORMAT, "model.bin: d_model %lld is not an even multiple of %lld heads", (long long)c->d_model,
                              (long long)c->n_heads);
    const int64_t E = c->d_model;
    c->int8 = se->dtype == ATTN_CT2_I8;
    c->n_encoder_layers = attn__count_layers(f, "encoder");
    c->n_decoder_layers = attn__count_layers(f, "decoder");
    if (c->n_encoder_layers < 1 || c->n_decoder_layers < 1)
        return attn_set_error(ATTN_E_FORMAT, "model.bin: no encoder or decoder layers (encoder/layer_0, decoder/layer_0)");
    const attn_ct2_var *f1 = attn_ct2_find(f, "encoder/layer_0/ffn/linear_0/weight");
    if (!f1 || f1->rank != 2) return attn_set_error(ATTN_E_FORMAT, "model.bin has no 'encoder/layer_0/ffn/linear_0/weight'");
    c->d_ff = f1->shape[0];
    m->emb_scale = (float)attn__ct2_attr(f, "encoder/scale_embeddings", 1) != 0 ? sqrtf((float)E) : 1.0f;
    m->query_scale = 1.0f / sqrtf((float)(E / m->cfg.n_heads));
    ATTN_TRY(attn__ct2_embedding(&m->src_emb, &c->source_vocab, f, se == attn_ct2_find(f, "encoder/embeddings/weight") ? "encoder/embeddings" : "encoder/embeddings_0", E));
    ATTN_TRY(attn__ct2_embedding(&m->tgt_emb, &c->target_vocab, f, "decoder/embeddings", E));
    const attn_ct2_var *lp = attn_ct2_find(f, "encoder/position_encodings/encodings");
    if (lp) {
        c->learned_positions = 1;
        int64_t d[2] = {-1, E};
        ATTN_TRY(attn__ct2_read(&m->src_pos, f, "encoder/position_encodings/encodings", 2, d));
        m->src_pos_n = lp->shape[0];
        const attn_ct2_var *tp = attn_ct2_find(f, "decoder/position_encodings/encodings");
        if (!tp) return attn_set_error(ATTN_E_FORMAT, "model.bin: learned encoder positions without decoder positions");
        ATTN_TRY(attn__ct2_read(&m->tgt_pos, f, "decoder/position_encodings/encodings", 2, d));
        m->tgt_pos_n = tp->shape[0];
    } else {
        ATTN_TRY(attn__pe_table(m, 512));
    }
    m->enc = (attn__enc_layer *)calloc((size_t)c->n_encoder_layers, sizeof *m->enc);
    m->dec = (attn__dec_layer *)calloc((size_t)c->n_decoder_layers, sizeof *m->dec);
    if (!m->enc || !m->dec) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    char s[192];
    const int64_t F = c->d_ff;
    for (int64_t i = 0; i < c->n_encoder_layers; i++) {
        attn__enc_layer *l = &m->enc[i];
#define P(fmt) (snprintf(s, sizeof s, "encoder/layer_%lld/" fmt, (long long)i), s)
        ATTN_TRY(attn__ct2_ln_load(&l->ln_sa, f, P("self_attention/layer_norm"), E));
        ATTN_TRY(attn__ct2_lin_load(&l->qkv, f, P("self_attention/linear_0"), 3 * E, E, 0));
        ATTN_TRY(attn__ct2_lin_load(&l->out, f, P("self_attention/linear_1"), E, E, 0));
        ATTN_TRY(attn__ct2_ln_load(&l->ln_ff, f, P("ffn/layer_norm"), E));
        ATTN_TRY(attn__ct2_lin_load(&l->ff1, f, P("ffn/linear_0"), F, E, 0));
        ATTN_TRY(attn__ct2_lin_load(&l->ff2, f, P("ffn/linear_1"), E, F, 0));
#undef P
    }
    for (int64_t i = 0; i < c->n_decoder_layers; i++) {
        attn__dec_layer *l = &m->dec[i];
#define P(fmt) (snprintf(s, sizeof s, "decoder/layer_%lld/" fmt, (long long)i), s)
        ATTN_TRY(attn__ct2_ln_load(&l->ln_sa, f, P("self_attention/layer_norm"), E));
        ATTN_TRY(attn__ct2_lin_load(&l->qkv, f, P("self_attention/linear_0"), 3 * E, E, 0));
        ATTN_TRY(attn__ct2_lin_load(&l->out_sa, f, P("self_attention/linear_1"), E, E, 0));
        ATTN_TRY(attn__ct2_ln_load(&l->ln_ca, f, P("attention/layer_norm"), E));
        ATTN_TRY(attn__ct2_lin_load(&l->q_ca, f, P("attention/linear_0"), E, E, 0));
        ATTN_TRY(attn__ct2_lin_load(&l->kv_ca, f, P("attention/linear_1"), 2 * E, E, 0));
        ATTN_TRY(attn__ct2_lin_load(&l->out_ca, f, P("attention/linear_2"), E, E, 0));
        ATTN_TRY(attn__ct2_ln_load(&l->ln_ff, f, P("ffn/layer_norm"), E));
        ATTN_TRY(attn__ct2_lin_load(&l->ff1, f, P("ffn/linear_0"), F, E, 0));
        ATTN_TRY(attn__ct2_lin_load(&l->ff2, f, P("ffn/linear_1"), E, F, 0));
#undef P
    }
    if (c->pre_norm) {
        ATTN_TRY(attn__ct2_ln_load(&m->enc_ln, f, "encoder/layer_norm", E));
        ATTN_TRY(attn__ct2_ln_load(&m->dec_ln, f, "decoder/layer_norm", E));
    }
    ATTN_TRY(attn__ct2_lin_load(&m->proj, f, "decoder/projection", c->target_vocab, E, 0));
    return ATTN_OK;
}

static int attn__load_body_cb(void *ctx, const attn_ct2_file *f) { return attn__load_body((attn_translator *)ctx, f); }

int attn_translator_load(attn_translator **out, const char *dir) {
    if (!out || !dir) return attn_set_error(ATTN_E_INVALID, "translator_load: NULL argument");
    *out = NULL;
    attn_translator *m = (attn_translator *)calloc(1, sizeof *m);
    if (!m) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    char path[4096];
    int rc = attn__ct2_load_model(dir, attn__load_body_cb, m);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/source_vocabulary.txt", dir);
        FILE *t = fopen(path, "rb");
        int shared = !t;
        if (t) fclose(t);
        if (shared) snprintf(path, sizeof path, "%s/shared_vocabulary.txt", dir);
        rc = attn__vocab_load(&m->sv, path);
        if (rc == 0) {
            if (!shared) snprintf(path, sizeof path, "%s/target_vocabulary.txt", dir);
            rc = attn__vocab_load(&m->tv, path);
        }
    }
    if (rc == 0 && m->sv.n != m->cfg.source_vocab)
        rc = attn_set_error(ATTN_E_FORMAT, "%s: the source vocabulary has %lld tokens (with <unk>) but the embeddings have %lld rows", dir,
                            (long long)m->sv.n, (long long)m->cfg.source_vocab);
    if (rc == 0 && m->tv.n != m->cfg.target_vocab)
        rc = attn_set_error(ATTN_E_FORMAT, "%s: the target vocabulary has %lld tokens (with <unk>) but the embeddings have %lld rows", dir,
                            (long long)m->tv.n, (long long)m->cfg.target_vocab);
    if (rc == 0) {
        m->bos = attn__vocab_id(&m->tv, "<s>");
        m->eos = attn__vocab_id(&m->tv, "</s>");
        m->unk = attn__vocab_id(&m->sv, "<unk>");
        if (m->bos < 0 || m->eos < 0) rc = attn_set_error(ATTN_E_FORMAT, "%s: the target vocabulary has no <s> or </s>", dir);
    }
    if (rc < 0) {
        attn_translator_free(m);
        return rc;
    }
    *out = m;
    return ATTN_OK;
}

const attn_translator_config *attn_translator_get_config(const attn_translator *m) { return m ? &m->cfg : NULL; }
int32_t attn_translator_target_id(const attn_translator *m, const char *t) { return m && t ? attn__vocab_id(&m->tv, t) : -1; }
int32_t attn_translator_source_id(const attn_translator *m, const char *t) { return m && t ? attn__vocab_id(&m->sv, t) : -1; }
const char *attn_translator_target_token(const attn_translator *m, int32_t id) {
    return m && id >= 0 && id < m->tv.n ? m->tv.tok[id] : "";
}

/* ---------------------------------------------------------------- forward */

/* Decoding state for one batch. Self-attention caches are [rows, H, T, D] per layer. */
typedef struct {
    attn_translator *m;
    int64_t B, Ls, T;       /* items, padded source length, max target positions */
    int64_t *src_len;       /* [B] */
    float **cross_kv;       /* per layer [B, Ls, 2E] */
    float **k, **v, **k2, **v2; /* per layer caches and reorder buffers */
    int64_t rows, cap_rows, len; /* live rows, capacity, cached positions */
    int64_t *row_item;
    float *x, *h, *qkv, *att, *ff, *scratch, *w_last; /* work buffers */
    int want_attn;
} attn__tstate;

static int attn__positions(attn_translator *m, float *x, int64_t pos, int enc) {
    const int64_t E = m->cfg.d_model;
    if (m->cfg.learned_positions) {
        const float *t = enc ? m->src_pos : m->tgt_pos;
        int64_t n = enc ? m->src_pos_n : m->tgt_pos_n;
        if (pos >= n) return attn_set_error(ATTN_E_RANGE, "position %lld is beyond the model's %lld positions", (long long)pos, (long long)n);
        for (int64_t e = 0; e < E; e++) x[e] += t[pos * E + e];
        return ATTN_OK;
    }
    if (pos >= m->pe_n) ATTN_TRY(attn__pe_table(m, 2 * pos + 2 > 512 ? 2 * pos + 2 : 512));
    for (int64_t e = 0; e < E; e++) x[e] += m->pe[pos * E + e];
    return ATTN_OK;
}

/* residual add y += a */
static void attn__addv(float *y, const float *a, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] += a[i];
}

/* Multi-head attention through attn_sdpa on strided views: q [B, H, Lq, D] with strides
 * (qb, qh, qr, 1); k and v [B, H, Lk, D] with strides (kb, kh, kr, 1); out rows of stride os
 * (heads side by side, [B, Lq, H*D]); w NULL or [B, H, Lq, Lk] contiguous. */
static int attn__sdpa(float *out, int64_t os, float *w, const float *q, int64_t qb, int64_t qh, int64_t qr, const float *k,
                      const float *v, int64_t kb, int64_t kh, int64_t kr, int64_t B, int64_t Lq, int64_t Lk, int64_t H, int64_t D,
                      const int64_t *key_len) {
    attn_tensor tq = {(void *)q, ATTN_F32, 4, {B, H, Lq, D}, {qb, qh, qr, 1}};
    attn_tensor tk = {(void *)k, ATTN_F32, 4, {B, H, Lk, D}, {kb, kh, kr, 1}};
    attn_tensor tv = {(void *)v, ATTN_F32, 4, {B, H, Lk, D}, {kb, kh, kr, 1}};
    attn_tensor to = {out, ATTN_F32, 4, {B, H, Lq, D}, {Lq * os, D, os, 1}};
    attn_tensor tw = {w, ATTN_F32, 4, {B, H, Lq, Lk}, {H * Lq * Lk, Lq * Lk, Lk, 1}};
    attn_sdpa_params p = attn_sdpa_params_default();
    p.key_lengths = key_len;
    p.n_threads = 1;
    return attn_sdpa(&to, w ? &tw : NULL, &tq, &tk, &tv, &p);
}

static int attn__encode(attn__tstate *st, const int32_t *ids /* [B, Ls] */) {
    attn_translator *m = st->m;
    const int64_t E = m->cfg.d_model, H = m->cfg.n_heads, D = E / H, B = st->B, Ls = st->Ls, M = B * Ls;
    const int64_t F = m->cfg.d_ff;
    float *x = (float *)malloc(sizeof(float) * (size_t)(M * E));
    float *h = (float *)malloc(sizeof(float) * (size_t)(M * E));
    float *qkv = (float *)malloc(sizeof(float) * (size_t)(M * 3 * E));
    float *att = (float *)malloc(sizeof(float) * (size_t)(M * E));
    float *ff = (float *)malloc(sizeof(float) * (size_t)(M * (F > 3 * E ? F : 3 * E)));
    float *scr = (float *)malloc(sizeof(float) * (size_t)(M * (F > E ? F : E) + M));
    int rc = ATTN_OK;
    if (!x || !h || !qkv || !att || !ff || !scr) {
        rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < Ls; t++) {
            float *r = x + (b * Ls + t) * E;
            const float *e = m->src_emb + (int64_t)ids[b * Ls + t] * E;
            for (int64_t i = 0; i < E; i++) r[i] = e[i] * m->emb_scale;
            if ((rc = attn__positions(m, r, t, 1)) < 0) goto done;
        }
    for (int64_t li = 0; li < m->cfg.n_encoder_layers; li++) {
        attn__enc_layer *l = &m->enc[li];
        const int pre = m->cfg.pre_norm;
        /* self-attention */
        if (pre) attn__ct2_ln_apply(h, x, M, &l->ln_sa, 1e-5f);
        if ((rc = attn__ct2_lin_apply(qkv, pre ? h : x, M, &l->qkv, scr, ATTN_ACT_IDENTITY)) < 0) goto done;
        if (m->cfg.int8) {
            /* CTranslate2's arithmetic: its score GEMM is [Ls, Ls] per item and head */
            for (int64_t b = 0; b < B; b++) {
                const float *qb = qkv + b * Ls * 3 * E;
                const int64_t n = st->src_len[b];
                attn__ct2_mha_exact(att + b * Ls * E, E, NULL, qb, 3 * E, qb + E, qb + 2 * E, 3 * E, H, D, n, n, Ls, Ls, 0,
                                    m->query_scale, scr);
                memset(att + (b * Ls + n) * E, 0, sizeof(float) * (size_t)((Ls - n) * E));
            }
        } else if ((rc = attn__sdpa(att, E, NULL, qkv, Ls * 3 * E, D, 3 * E, qkv + E, qkv + 2 * E, Ls * 3 * E, D, 3 * E, B, Ls, Ls, H, D,
                                    st->src_len)) < 0)
            goto done;
        if ((rc = attn__ct2_lin_apply(ff, att, M, &l->out, scr, ATTN_ACT_IDENTITY)) < 0) goto done;
        attn__addv(x, ff, M * E);
        if (!pre) attn__ct2_ln_apply(x, x, M, &l->ln_sa, 1e-5f);
        /* FFN */
        if (pre) attn__ct2_ln_apply(h, x, M, &l->ln_ff, 1e-5f);
        if ((rc = attn__ct2_lin_apply(ff, pre ? h : x, M, &l->ff1, scr, m->cfg.act)) < 0) goto done;
        if ((rc = attn__ct2_lin_apply(att, ff, M, &l->ff2, scr, ATTN_ACT_IDENTITY)) < 0) goto done;
        attn__addv(x, att, M * E);
        if (!pre) attn__ct2_ln_apply(x, x, M, &l->ln_ff, 1e-5f);
    }
    if (m->cfg.pre_norm) attn__ct2_ln_apply(x, x, M, &m->enc_ln, 1e-5f);
    /* cross-attention keys and values, once per source */
    for (int64_t li = 0; li < m->cfg.n_decoder_layers; li++)
        if ((rc = attn__ct2_lin_apply(st->cross_kv[li], x, M, &m->dec[li].kv_ca, scr, ATTN_ACT_IDENTITY)) < 0) goto done;
done:
    free(x);
    free(h);
    free(qkv);
    free(att);
    free(ff);
    free(scr);
    return rc;
}

static int attn__tstep(void *ctx, float *logits, float *attn_out, const int32_t *ids, int64_t N, int64_t step) {
    attn__tstate *st = (attn__tstate *)ctx;
    attn_translator *m = st->m;
    const int64_t E = m->cfg.d_model, H = m->cfg.n_heads, D = E / H, T = st->T, Ls = st->Ls;
    const int pre = m->cfg.pre_norm;
    if (step >= T) return attn_set_error(ATTN_E_RANGE, "decoder step %lld beyond the cache (%lld)", (long long)step, (long long)T);
    float *x = st->x, *h = st->h, *qkv = st->qkv, *att = st->att, *ff = st->ff, *scr = st->scratch;
    for (int64_t r = 0; r < N; r++) {
        float *xr = x + r * E;
        const float *e = m->tgt_emb + (int64_t)ids[r] * E;
        for (int64_t i = 0; i < E; i++) xr[i] = e[i] * m->emb_scale;
        ATTN_TRY(attn__positions(m, xr, step, 0));
    }
    for (int64_t li = 0; li < m->cfg.n_decoder_layers; li++) {
        attn__dec_layer *l = &m->dec[li];
        /* causal self-attention with the KV cache */
        if (pre) attn__ct2_ln_apply(h, x, N, &l->ln_sa, 1e-5f);
        ATTN_TRY(attn__ct2_lin_apply(qkv, pre ? h : x, N, &l->qkv, scr, ATTN_ACT_IDENTITY));
        float *kc = st->k[li], *vc = st->v[li];
        /* caches are [rows, T, E] (heads side by side): one copy per row */
        for (int64_t r = 0; r < N; r++) {
            memcpy(kc + (r * T + step) * E, qkv + r * 3 * E + E, sizeof(float) * (size_t)E);
            memcpy(vc + (r * T + step) * E, qkv + r * 3 * E + 2 * E, sizeof(float) * (size_t)E);
        }
        if (m->cfg.int8)
            for (int64_t r = 0; r < N; r++)
                attn__ct2_mha_exact(att + r * E, E, NULL, qkv + r * 3 * E, 3 * E, kc + r * T * E, vc + r * T * E, E, H, D, 1, step + 1, 1,
                                    step + 1, 0, m->query_scale, scr);
        else
            ATTN_TRY(attn__sdpa(att, E, NULL, qkv, 3 * E, D, 3 * E, kc, vc, T * E, D, E, N, 1, step + 1, H, D, NULL));
        ATTN_TRY(attn__ct2_lin_apply(ff, att, N, &l->out_sa, scr, ATTN_ACT_IDENTITY));
        attn__addv(x, ff, N * E);
        if (!pre) attn__ct2_ln_apply(x, x, N, &l->ln_sa, 1e-5f);
        /* cross-attention: rows of one source item attend together over its keys */
        if (pre) attn__ct2_ln_apply(h, x, N, &l->ln_ca, 1e-5f);
        ATTN_TRY(attn__ct2_lin_apply(qkv, pre ? h : x, N, &l->q_ca, scr, ATTN_ACT_IDENTITY));
        int last = li == m->cfg.n_decoder_layers - 1 && attn_out;
        for (int64_t r0 = 0; r0 < N;) {
            const int64_t b = st->row_item[r0], sl = st->src_len[b];
            int64_t r1 = r0;
            while (r1 < N && st->row_item[r1] == b) r1++;
            const float *kv = st->cross_kv[li] + b * Ls * 2 * E;
            const int64_t n = r1 - r0;
            if (m->cfg.int8) {
                /* CTranslate2 multiplies the queries of an item's beams together with its keys
                 * (scores [beams, Ls] per head), so the beam count is the GEMM's row count;
                 * weights w_last [H, n, sl] */
                attn__ct2_mha_exact(att + r0 * E, E, last ? st->w_last : NULL, qkv + r0 * E, E, kv, kv + E, 2 * E, H, D, n, sl, n, Ls, 0,
                                    m->query_scale, scr);
            } else {
                /* weights w_last [1, H, n, Ls], zeros past the source length */
                ATTN_TRY(attn__sdpa(att + r0 * E, E, last ? st->w_last : NULL, qkv + r0 * E, n * E, D, E, kv, kv + E, Ls * 2 * E, D, 2 * E, 1,
                                    n, Ls, H, D, &st->src_len[b]));
            }
            if (last) /* head 0 of the last layer, zeros past the source length */
                for (int64_t i = 0; i < n; i++) {
                    float *dst = attn_out + (r0 + i) * Ls;
                    const int64_t w = m->cfg.int8 ? sl : Ls;
                    memcpy(dst, st->w_last + i * w, sizeof(float) * (size_t)w);
                    memset(dst + w, 0, sizeof(float) * (size_t)(Ls - w));
                }
            r0 = r1;
        }
        ATTN_TRY(attn__ct2_lin_apply(ff, att, N, &l->out_ca, scr, ATTN_ACT_IDENTITY));
        attn__addv(x, ff, N * E);
        if (!pre) attn__ct2_ln_apply(x, x, N, &l->ln_ca, 1e-5f);
        /* FFN */
        if (pre) attn__ct2_ln_apply(h, x, N, &l->ln_ff, 1e-5f);
        ATTN_TRY(attn__ct2_lin_apply(ff, pre ? h : x, N, &l->ff1, scr, m->cfg.act));
        ATTN_TRY(attn__ct2_lin_apply(att, ff, N, &l->ff2, scr, ATTN_ACT_IDENTITY));
        attn__addv(x, att, N * E);
        if (!pre) attn__ct2_ln_apply(x, x, N, &l->ln_ff, 1e-5f);
    }
    if (pre) attn__ct2_ln_apply(x, x, N, &m->dec_ln, 1e-5f);
    ATTN_TRY(attn__ct2_lin_apply(logits, x, N, &m->proj, scr, ATTN_ACT_IDENTITY));
    st->rows = N;
    st->len = step + 1;
    return ATTN_OK;
}

static int attn__treorder(void *ctx, const int64_t *src, int64_t n_new, const int64_t *row_item) {
    attn__tstate *st = (attn__tstate *)ctx;
    attn_translator *m = st->m;
    const int64_t E = m->cfg.d_model, T = st->T;
    if (n_new > st->cap_rows) return attn_set_error(ATTN_E_RANGE, "reorder: %lld rows exceed the capacity", (long long)n_new);
    int identity = 1;
    for (int64_t i = 0; i < n_new && identity; i++) identity = src[i] == i;
    if (!identity) {
        const size_t chunk = sizeof(float) * (size_t)(st->len * E);
        for (int64_t li = 0; li < m->cfg.n_decoder_layers; li++) {
            for (int64_t i = 0; i < n_new; i++) {
                memcpy(st->k2[li] + i * T * E, st->k[li] + src[i] * T * E, chunk);
                memcpy(st->v2[li] + i * T * E, st->v[li] + src[i] * T * E, chunk);
            }
            float *t = st->k[li];
            st->k[li] = st->k2[li];
            st->k2[li] = t;
            t = st->v[li];
            st->v[li] = st->v2[li];
            st->v2[li] = t;
        }
    }
    memcpy(st->row_item, row_item, sizeof(int64_t) * (size_t)n_new);
    st->rows = n_new;
    return ATTN_OK;
}

static void attn__tstate_free(attn__tstate *st) {
    int64_t L = st->m ? st->m->cfg.n_decoder_layers : 0;
    for (int64_t i = 0; i < L; i++) {
        if (st->cross_kv) free(st->cross_kv[i]);
        if (st->k) free(st->k[i]);
        if (st->v) free(st->v[i]);
        if (st->k2) free(st->k2[i]);
        if (st->v2) free(st->v2[i]);
    }
    free(st->cross_kv);
    free(st->k);
    free(st->v);
    free(st->k2);
    free(st->v2);
    free(st->src_len);
    free(st->row_item);
    free(st->x);
    free(st->h);
    free(st->qkv);
    free(st->att);
    free(st->ff);
    free(st->scratch);
    free(st->w_last);
}

static int attn__tstate_init(attn__tstate *st, attn_translator *m, int64_t B, int64_t Ls, int64_t T, int64_t cap_rows) {
    memset(st, 0, sizeof *st);
    st->m = m;
    st->B = B;
    st->Ls = Ls;
    st->T = T;
    st->cap_rows = cap_rows;
    const int64_t E = m->cfg.d_model, F = m->cfg.d_ff, L = m->cfg.n_decoder_layers, H = m->cfg.n_heads;
    const int64_t V = m->cfg.target_vocab;
    double cache = (double)cap_rows * (double)T * (double)E;
    if (cache * 4.0 * 4.0 * (double)L > 8e9) return attn_set_error(ATTN_E_NOMEM, "decoding state too large (%lld rows x %lld steps)", (long long)cap_rows, (long long)T);
    st->cross_kv = (float **)calloc((size_t)L, sizeof(float *));
    st->k = (float **)calloc((size_t)L, sizeof(float *));
    st->v = (float **)calloc((size_t)L, sizeof(float *));
    st->k2 = (float **)calloc((size_t)L, sizeof(float *));
    st->v2 = (float **)calloc((size_t)L, sizeof(float *));
    st->src_len = (int64_t *)calloc((size_t)B, sizeof(int64_t));
    st->row_item = (int64_t *)calloc((size_t)cap_rows, sizeof(int64_t));
    if (!st->cross_kv || !st->k || !st->v || !st->k2 || !st->v2 || !st->src_len || !st->row_item) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    for (int64_t i = 0; i < L; i++) {
        st->cross_kv[i] = (float *)malloc(sizeof(float) * (size_t)(B * Ls * 2 * E));
        st->k[i] = (float *)malloc(sizeof(float) * (size_t)(cap_rows * T * E));
        st->v[i] = (float *)malloc(sizeof(float) * (size_t)(cap_rows * T * E));
        st->k2[i] = (float *)malloc(sizeof(float) * (size_t)(cap_rows * T * E));
        st->v2[i] = (float *)malloc(sizeof(float) * (size_t)(cap_rows * T * E));
        if (!st->cross_kv[i] || !st->k[i] || !st->v[i] || !st->k2[i] || !st->v2[i]) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    }
    int64_t wide = F > 3 * E ? F : 3 * E;
    if (V > wide) wide = V;
    st->x = (float *)malloc(sizeof(float) * (size_t)(cap_rows * E));
    st->h = (float *)malloc(sizeof(float) * (size_t)(cap_rows * E));
    st->qkv = (float *)malloc(sizeof(float) * (size_t)(cap_rows * 3 * E));
    st->att = (float *)malloc(sizeof(float) * (size_t)(cap_rows * wide));
    st->ff = (float *)malloc(sizeof(float) * (size_t)(cap_rows * wide));
    st->scratch = (float *)malloc(sizeof(float) * (size_t)(cap_rows * (F > E ? F : E) + cap_rows + T + Ls + 2 * E)); /* + one score row and two sums per head dimension */
    st->w_last = (float *)malloc(sizeof(float) * (size_t)(H * cap_rows * Ls + 1));
    if (!st->x || !st->h || !st->qkv || !st->att || !st->ff || !st->scratch || !st->w_last) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    return ATTN_OK;
}

/* ---------------------------------------------------------------- translate */

void attn_translations_free(attn_translation *t, int64_t n) {
    if (!t) return;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t h = 0; h < t[i].n; h++) {
            free(t[i].hyps[h].tokens);
            free(t[i].hyps[h].attention);
        }
        free(t[i].hyps);
        for (int64_t s = 0; s < t[i].src_len; s++) free(t[i].src_tokens[s]);
        free(t[i].src_tokens);
        memset(&t[i], 0, sizeof t[i]);
    }
}

/* the ASCII whitespace that separates tokens */
static int attn__is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* split on ASCII whitespace into new strings */
static int attn__split(char ***out, int64_t *n, const char *s) {
    *out = NULL;
    *n = 0;
    int64_t cap = 0;
    const char *p = s;
    while (*p) {
        while (attn__is_ws(*p)) p++;
        if (!*p) break;
        const char *q = p;
        while (*q && !attn__is_ws(*q)) q++;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **t = (char **)realloc(*out, sizeof(char *) * (size_t)cap);
            if (!t) return attn_set_error(ATTN_E_NOMEM, "out of memory");
            *out = t;
        }
        (*out)[*n] = strndup(p, (size_t)(q - p));
        if (!(*out)[*n]) return attn_set_error(ATTN_E_NOMEM, "out of memory");
        (*n)++;
        p = q;
    }
    return ATTN_OK;
}

/* Translate n sources as one batch (padded to the longest). */
static int attn__translate_batch(attn_translator *m, attn_translation *out, const char *const *sources, int64_t n,
                                 const attn_decode_opts *o_in, int replace_unknowns) {
    attn_decode_opts o = *o_in;
    if (!o.end_ids || o.n_end == 0) {
        o.end_ids = &m->eos;
        o.n_end = 1;
    }
    if (replace_unknowns) o.return_attention = 1;
    const int want_attn = o.return_attention;
    memset(out, 0, sizeof *out * (size_t)n);
    int rc = ATTN_OK;
    int32_t *ids = NULL, *start = NULL;
    int64_t *map = NULL; /* batch row -> source index (empty sources skipped) */
    attn_decode_result *res = NULL;
    attn__tstate st;
    memset(&st, 0, sizeof st);
    int64_t Ls = 0, B = 0;
    for (int64_t i = 0; i < n && rc == 0; i++) {
        rc = attn__split(&out[i].src_tokens, &out[i].src_len, sources[i]);
        if (rc == 0 && o.max_input_length > 0 && out[i].src_len > o.max_input_length) {
            /* CTranslate2 keeps the first max_input_length tokens (this family adds no end
             * token to the source, so all of them are the user's) */
            for (int64_t t = o.max_input_length; t < out[i].src_len; t++) free(out[i].src_tokens[t]);
            out[i].src_len = o.max_input_length;
        }
        if (out[i].src_len > Ls) Ls = out[i].src_len;
        if (out[i].src_len > 0) B++;
    }
    if (rc < 0) goto fail;
    /* validate options once even when every source is empty */
    {
        attn_decoder_iface probe = {NULL, m->cfg.target_vocab, 0, attn__tstep, attn__treorder};
        int32_t s0 = m->bos;
        attn_decode_result dummy;
        if ((rc = attn_decode(&dummy, &probe, &s0, 0, &o)) < 0) goto fail;
    }
    if (B > 0) {
        ids = (int32_t *)calloc((size_t)(B * Ls), sizeof(int32_t));
        start = (int32_t *)malloc(sizeof(int32_t) * (size_t)B);
        map = (int64_t *)malloc(sizeof(int64_t) * (size_t)B);
        res = (attn_decode_result *)calloc((size_t)B, sizeof *res);
        if (!ids || !start || !map || !res) {
            rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
            goto fail;
        }
        int64_t T = o.max_length + (o.prefix ? o.prefix_len : 0);
        if ((rc = attn__tstate_init(&st, m, B, Ls, T, B * o.beam_size)) < 0) goto fail;
        st.want_attn = want_attn;
        for (int64_t i = 0, b = 0; i < n; i++) {
            if (out[i].src_len == 0) continue;
            map[b] = i;
            st.src_len[b] = out[i].src_len;
            for (int64_t t = 0; t < out[i].src_len; t++) {
                int32_t id = attn__vocab_id(&m->sv, out[i].src_tokens[t]);
                ids[b * Ls + t] = id >= 0 ? id : m->unk;
            }
            start[b] = m->bos;
            st.row_item[b] = b;
            b++;
        }
        if ((rc = attn__encode(&st, ids)) < 0) goto fail;
        attn_decoder_iface dec = {&st, m->cfg.target_vocab, Ls, attn__tstep, attn__treorder};
        if ((rc = attn_decode(res, &dec, start, B, &o)) < 0) goto fail;
    }
    for (int64_t i = 0, b = 0; i < n; i++) {
        attn_translation *t = &out[i];
        if (t->src_len == 0) { /* n_best empty hypotheses with score 0, as CTranslate2 */
            t->hyps = (attn_translation_hyp *)calloc((size_t)o.n_best, sizeof *t->hyps);
            if (!t->hyps) {
                rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
                goto fail;
            }
            t->n = o.n_best;
            continue;
        }
        attn_decode_result *r = &res[b++];
        t->hyps = (attn_translation_hyp *)calloc((size_t)(r->n ? r->n : 1), sizeof *t->hyps);
        if (!t->hyps) {
            rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
            goto fail;
        }
        t->n = r->n;
        for (int64_t hi = 0; hi < r->n; hi++) {
            attn_hypothesis *hy = &r->hyps[hi];
            attn_translation_hyp *th = &t->hyps[hi];
            th->score = hy->score;
            th->len = hy->len;
            th->tokens = (char **)calloc((size_t)(hy->len ? hy->len : 1), sizeof(char *));
            if (!th->tokens) {
                rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
                goto fail;
            }
            for (int64_t k = 0; k < hy->len; k++) {
                const char *tok = m->tv.tok[hy->ids[k]];
                if (replace_unknowns && strcmp(tok, "<unk>") == 0 && hy->attention) {
                    const float *a = hy->attention + k * Ls;
                    int64_t best = 0;
                    for (int64_t s = 1; s < t->src_len; s++)
                        if (a[s] > a[best]) best = s;
                    tok = t->src_tokens[best];
                }
                th->tokens[k] = (char *)tok; /* borrowed; strings live in the vocab / source */
            }
            if (want_attn && o_in->return_attention && hy->attention) {
                th->attention = (float *)malloc(sizeof(float) * (size_t)((hy->len ? hy->len : 1) * t->src_len));
                if (!th->attention) {
                    rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
                    goto fail;
                }
                for (int64_t k = 0; k < hy->len; k++) memcpy(th->attention + k * t->src_len, hy->attention + k * Ls, sizeof(float) * (size_t)t->src_len);
            }
        }
    }
    attn_decode_results_free(res, B);
    free(res);
    free(ids);
    free(start);
    free(map);
    attn__tstate_free(&st);
    return ATTN_OK;
fail:
    if (res) attn_decode_results_free(res, B);
    free(res);
    free(ids);
    free(start);
    free(map);
    attn__tstate_free(&st);
    attn_translations_free(out, n);
    return rc;
}

/* whitespace-separated tokens in s */
static int64_t attn__count_tokens(const char *s) {
    int64_t n = 0;
    for (const char *p = s; *p;) {
        while (attn__is_ws(*p)) p++;
        if (!*p) break;
        n++;
        while (*p && !attn__is_ws(*p)) p++;
    }
    return n;
}

/* CTranslate2's batch order: its rebatching sorts the source indices with
 * std::sort(longer first). That sort (GCC's libstdc++, which builds CTranslate2's Linux wheels)
 * is an introsort and is not stable: sources of equal length come out in the order it leaves
 * them, and which batch a source lands in decides its padding, which the int8 model's attention
 * arithmetic depends on. The same algorithm, on the same comparisons, gives the same order:
 * quicksort with the median of (second, middle, last) moved to the front as pivot and an
 * unguarded partition, while a range holds more than 16 elements and the depth allows
 * (2 floor(log2 n)), heapsort when it does not, then an insertion sort (unguarded past the
 * first 16). ATTN__LONGER(a, b): source a has more tokens than b. */
#define ATTN__LONGER(a, b) (len[a] > len[b])
static void attn__swap_idx(int64_t *a, int64_t *b) {
    int64_t t = *a;
    *a = *b;
    *b = t;
}
static void attn__heap_adjust(int64_t *f, int64_t hole, int64_t n, int64_t value, const int64_t *len) {
    const int64_t top = hole;
    int64_t child = hole;
    while (child < (n - 1) / 2) {
        child = 2 * (child + 1);
        if (ATTN__LONGER(f[child], f[child - 1])) child--;
        f[hole] = f[child];
        hole = child;
    }
    if ((n & 1) == 0 && child == (n - 2) / 2) {
        child = 2 * (child + 1);
        f[hole] = f[child - 1];
        hole = child - 1;
    }
    int64_t parent = (hole - 1) / 2;
    while (hole > top && ATTN__LONGER(f[parent], value)) {
        f[hole] = f[parent];
        hole = parent;
        parent = (hole - 1) / 2;
    }
    f[hole] = value;
}
static void attn__heapsort_idx(int64_t *f, int64_t n, const int64_t *len) {
    if (n < 2) return;
    for (int64_t parent = (n - 2) / 2;; parent--) {
        attn__heap_adjust(f, parent, n, f[parent], len);
        if (parent == 0) break;
    }
    for (int64_t last = n - 1; last > 0; last--) {
        int64_t value = f[last];
        f[last] = f[0];
        attn__heap_adjust(f, 0, last, value, len);
    }
}
static void attn__introsort_loop(int64_t *first, int64_t *last, int64_t depth, const int64_t *len) {
    while (last - first > 16) {
        if (depth == 0) {
            attn__heapsort_idx(first, last - first, len);
            return;
        }
        depth--;
        int64_t *a = first + 1, *b = first + (last - first) / 2, *c = last - 1;
        if (ATTN__LONGER(*a, *b)) {
            if (ATTN__LONGER(*b, *c)) attn__swap_idx(first, b);
            else if (ATTN__LONGER(*a, *c)) attn__swap_idx(first, c);
            else attn__swap_idx(first, a);
        } else if (ATTN__LONGER(*a, *c)) attn__swap_idx(first, a);
        else if (ATTN__LONGER(*b, *c)) attn__swap_idx(first, c);
        else attn__swap_idx(first, b);
        int64_t *lo = first + 1, *hi = last;
        for (;;) {
            while (ATTN__LONGER(*lo, *first)) lo++;
            hi--;
            while (ATTN__LONGER(*first, *hi)) hi--;
            if (!(lo < hi)) break;
            attn__swap_idx(lo, hi);
            lo++;
        }
        attn__introsort_loop(lo, last, depth, len);
        last = lo;
    }
}
static void attn__linear_insert(int64_t *p, const int64_t *len) {
    int64_t v = *p;
    while (ATTN__LONGER(v, p[-1])) {
        *p = p[-1];
        p--;
    }
    *p = v;
}
static void attn__ct2_batch_order(int64_t *idx, int64_t n, const int64_t *len) {
    for (int64_t i = 0; i < n; i++) idx[i] = i;
    if (n < 2) return;
    int64_t lg = 0;
    while ((n >> (lg + 1)) > 0) lg++;
    attn__introsort_loop(idx, idx + n, 2 * lg, len);
    const int64_t head = n > 16 ? 16 : n;
    for (int64_t i = 1; i < head; i++) {
        if (ATTN__LONGER(idx[i], idx[0])) {
            int64_t v = idx[i];
            memmove(idx + 1, idx, sizeof(int64_t) * (size_t)i);
            idx[0] = v;
        } else
            attn__linear_insert(idx + i, len);
    }
    for (int64_t i = head; i < n; i++) attn__linear_insert(idx + i, len);
}
#undef ATTN__LONGER

int attn_translate(attn_translator *m, attn_translation *out, const char *const *sources, int64_t n, const attn_decode_opts *o,
                   int replace_unknowns) {
    if (!m || (!out && n > 0) || (!sources && n > 0) || !o) return attn_set_error(ATTN_E_INVALID, "translate: NULL argument");
    if (n < 0) return attn_set_error(ATTN_E_INVALID, "translate: n < 0");
    if (o->max_input_length < 0) return attn_set_error(ATTN_E_INVALID, "translate: max_input_length < 0");
    if (o->max_batch_size < 0) return attn_set_error(ATTN_E_INVALID, "translate: max_batch_size < 0");
    for (int64_t i = 0; i < n; i++) {
        if (!sources[i]) return attn_set_error(ATTN_E_INVALID, "translate: source %lld is NULL", (long long)i);
        size_t bad;
        if (attn_tokenizer_validate_utf8(sources[i], strlen(sources[i]), &bad) < 0)
            return attn_set_error(ATTN_E_INVALID, "translate: source %lld is not valid UTF-8 (byte offset %zu, byte 0x%02X)", (long long)(i + 1),
                                  bad, (unsigned)(unsigned char)sources[i][bad]);
    }
    if (o->max_batch_size == 0 || n <= o->max_batch_size) return attn__translate_batch(m, out, sources, n, o, replace_unknowns);
    /* CTranslate2's rebatching: sources sorted from the longest to the shortest, then batches of
     * max_batch_size; results in input order. */
    const int64_t bs = o->max_batch_size;
    int64_t *len = (int64_t *)malloc(sizeof(int64_t) * (size_t)n), *idx = (int64_t *)malloc(sizeof(int64_t) * (size_t)n);
    const char **src = (const char **)malloc(sizeof(char *) * (size_t)bs);
    attn_translation *tmp = (attn_translation *)calloc((size_t)bs, sizeof *tmp);
    int rc = ATTN_OK;
    if (!len || !idx || !src || !tmp) rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
    if (rc == 0) {
        memset(out, 0, sizeof *out * (size_t)n);
        for (int64_t i = 0; i < n; i++) len[i] = attn__count_tokens(sources[i]);
        attn__ct2_batch_order(idx, n, len);
        for (int64_t i0 = 0; i0 < n && rc == 0; i0 += bs) {
            const int64_t nb = n - i0 < bs ? n - i0 : bs;
            for (int64_t i = 0; i < nb; i++) src[i] = sources[idx[i0 + i]];
            rc = attn__translate_batch(m, tmp, src, nb, o, replace_unknowns);
            if (rc == 0)
                for (int64_t i = 0; i < nb; i++) out[idx[i0 + i]] = tmp[i];
        }
        if (rc < 0) attn_translations_free(out, n);
    }
    free(len);
    free(idx);
    free(src);
    free(tmp);
    return rc;
}
