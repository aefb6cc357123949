/* CTranslate2 Transformer encoder-decoder and translation (see include/attn_ct2_transformer.h). */
#include "attn_ct2_transformer.h"
#include "attn_utf8.h"
#include "attn_attention.h"
#include "attn_layers.h"
#include "core/internal.h"
#include "models/ct2_layers.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


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
    attn__ct2_layer *enc, *dec;
    attn_block_config enc_cfg, dec_cfg;
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
    attn__ct2_stacks_free(m->enc, m->dec, m->cfg.n_encoder_layers, m->cfg.n_decoder_layers);
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
    const int64_t F = c->d_ff;
    ATTN_TRY(attn__ct2_stacks_load(&m->enc, &m->dec, f, c->n_encoder_layers, c->n_decoder_layers, E, F));
    m->enc_cfg = attn__ct2_block_config(E, c->n_heads, F, c->pre_norm, c->act, 0, c->int8, m->query_scale);
    m->dec_cfg = attn__ct2_block_config(E, c->n_heads, F, c->pre_norm, c->act, 1, c->int8, m->query_scale);
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
        if (shared) {
            snprintf(path, sizeof path, "%s/shared_vocabulary.txt", dir);
            if (access(path, F_OK) != 0) /* neither layout: name both, not just the fallback */
                rc = attn_set_error(ATTN_E_IO, "%s: no vocabulary: looked for source_vocabulary.txt with target_vocabulary.txt, and for "
                                               "shared_vocabulary.txt (CTranslate2's two layouts); none is there",
                                    dir);
        }
        if (rc == 0) rc = attn__vocab_load(&m->sv, path);
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

/* Decoding state for one batch: the shared CTranslate2 decoder state (cache slot per row). */
typedef struct {
    attn_translator *m;
    attn__ct2_dec d;
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

/* source embeddings + positions -> encoder layers -> final norm -> cross keys / values */
static int attn__encode(attn__tstate *st, const int32_t *ids /* [B, Ls] */) {
    attn_translator *m = st->m;
    const int64_t E = m->cfg.d_model, B = st->d.B, Ls = st->d.Ls, M = B * Ls;
    float *x = (float *)malloc(sizeof(float) * (size_t)(M * E));
    if (!x) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    int rc = ATTN_OK;
    for (int64_t b = 0; b < B && rc == 0; b++)
        for (int64_t t = 0; t < Ls && rc == 0; t++) {
            float *r = x + (b * Ls + t) * E;
            const float *e = m->src_emb + (int64_t)ids[b * Ls + t] * E;
            for (int64_t i = 0; i < E; i++) r[i] = e[i] * m->emb_scale;
            rc = attn__positions(m, r, t, 1);
        }
    if (rc == 0) rc = attn__ct2_encode(x, m->enc, m->cfg.n_encoder_layers, &m->enc_cfg, B, Ls, st->d.src_len, &st->d.arena);
    if (rc == 0 && m->cfg.pre_norm) attn__ct2_ln_apply(x, x, M, &m->enc_ln, 1e-5f);
    if (rc == 0) rc = attn__ct2_dec_cross(&st->d, x);
    free(x);
    return rc;
}

static int attn__tstep(void *ctx, float *logits, float *attn_out, const int32_t *ids, int64_t N, int64_t step) {
    attn__tstate *st = (attn__tstate *)ctx;
    attn_translator *m = st->m;
    const int64_t E = m->cfg.d_model;
    if (N > st->d.cap_rows) return attn_set_error(ATTN_E_RANGE, "decoder: %lld rows exceed the capacity", (long long)N);
    for (int64_t r = 0; r < N; r++) {
        float *xr = st->d.x + r * E;
        const float *e = m->tgt_emb + (int64_t)ids[r] * E;
        for (int64_t i = 0; i < E; i++) xr[i] = e[i] * m->emb_scale;
        ATTN_TRY(attn__positions(m, xr, step, 0));
    }
    return attn__ct2_dec_step(&st->d, logits, attn_out, N);
}

static int attn__treorder(void *ctx, const int64_t *src, int64_t n_new, const int64_t *row_item) {
    return attn__ct2_dec_reorder(&((attn__tstate *)ctx)->d, src, n_new, row_item);
}

static void attn__tstate_free(attn__tstate *st) { attn__ct2_dec_free(&st->d); }

static int attn__tstate_init(attn__tstate *st, attn_translator *m, int64_t B, int64_t Ls, int64_t T, int64_t cap_rows) {
    memset(st, 0, sizeof *st);
    st->m = m;
    return attn__ct2_dec_init(&st->d, m->dec, m->cfg.n_decoder_layers, &m->dec_cfg, m->cfg.pre_norm ? &m->dec_ln : NULL, &m->proj, B, Ls, T,
                              cap_rows, 1);
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
                                 const attn_decode_opts *o_in, int64_t max_input_length, int replace_unknowns) {
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
        if (rc == 0 && max_input_length > 0 && out[i].src_len > max_input_length) {
            /* CTranslate2 keeps the first max_input_length tokens (this family adds no end
             * token to the source, so all of them are the user's) */
            for (int64_t t = max_input_length; t < out[i].src_len; t++) free(out[i].src_tokens[t]);
            out[i].src_len = max_input_length;
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
        for (int64_t i = 0, b = 0; i < n; i++) {
            if (out[i].src_len == 0) continue;
            map[b] = i;
            st.d.src_len[b] = out[i].src_len;
            for (int64_t t = 0; t < out[i].src_len; t++) {
                int32_t id = attn__vocab_id(&m->sv, out[i].src_tokens[t]);
                ids[b * Ls + t] = id >= 0 ? id : m->unk;
            }
            start[b] = m->bos;
            st.d.row_item[b] = b;
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


attn_translate_opts attn_translate_opts_default(void) {
    attn_translate_opts o;
    memset(&o, 0, sizeof o);
    o.decode = attn_decode_opts_default();
    o.max_input_length = 1024;
    return o;
}

int attn_translate(attn_translator *m, attn_translation *out, const char *const *sources, int64_t n, const attn_translate_opts *o) {
    return attn_translate_progress(m, out, sources, n, o, NULL, NULL);
}

int attn_translate_progress(attn_translator *m, attn_translation *out, const char *const *sources, int64_t n, const attn_translate_opts *o,
                            void (*progress)(int64_t done, int64_t total, void *user), void *user) {
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
    if (o->max_batch_size == 0 || n <= o->max_batch_size) {
        int rc = attn__translate_batch(m, out, sources, n, &o->decode, o->max_input_length, o->replace_unknowns);
        if (rc == 0 && progress) progress(n, n, user);
        return rc;
    }
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
            rc = attn__translate_batch(m, tmp, src, nb, &o->decode, o->max_input_length, o->replace_unknowns);
            if (rc == 0)
                for (int64_t i = 0; i < nb; i++) out[idx[i0 + i]] = tmp[i];
            if (rc == 0 && progress) progress(i0 + nb, n, user);
        }
        if (rc < 0) attn_translations_free(out, n);
    }
    free(len);
    free(idx);
    free(src);
    free(tmp);
    return rc;
}
