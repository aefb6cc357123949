/* OpenAI Whisper from a CTranslate2 WhisperSpec model (see include/attn_whisper.h): loading, the
 * encoder and the decoder step on the layer floor. The transcription rules are in
 * whisper_transcribe.c. */
#include "models/whisper_internal.h"
#include "attn_attention.h"
#include "attn_audio.h"
#include "attn_beam.h"
#include "attn_bpe.h"
#include "attn_sampling.h"
#include "core/internal.h"
#include "formats/hf_config.h"
#include "models/ct2_layers.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---------------------------------------------------------------- loading */

void attn_whisper_free(attn_whisper *m) {
    if (!m) return;
    attn__ct2_lin_free(&m->conv1);
    attn__ct2_lin_free(&m->conv2);
    free(m->enc_pos);
    attn__ct2_stacks_free(m->enc, m->dec, m->cfg.n_encoder_layers, m->cfg.n_decoder_layers);
    attn__ct2_ln_free(&m->enc_ln);
    attn__ct2_ln_free(&m->dec_ln);
    attn__ct2_lin_free(&m->proj);
    free(m->emb);
    free(m->dec_pos);
    if (m->vocab)
        for (int64_t i = 0; i < m->n_vocab; i++) free(m->vocab[i]);
    free(m->vocab);
    attn_bpe_free(m->tok);
    free(m->suppress);
    free(m->suppress_begin);
    if (m->has_spare) attn__ct2_dec_free(&m->spare);
    free(m);
}

static int64_t attn__wcount(const attn_ct2_file *f, const char *side) {
    char name[96];
    int64_t n = 0;
    for (;; n++) {
        snprintf(name, sizeof name, "%s/layer_%lld/ffn/linear_0/weight", side, (long long)n);
        if (!attn_ct2_find(f, name)) return n;
    }
}

static int attn__wbody(attn_whisper *m, const attn_ct2_file *f) {
    attn_whisper_config *c = &m->cfg;
    if (strcmp(attn_ct2_spec_name(f), "WhisperSpec") != 0) {
        char shown[160];
        return attn_set_error(ATTN_E_FORMAT, "model.bin: spec '%s' is not WhisperSpec", attn__printable(shown, sizeof shown, attn_ct2_spec_name(f)));
    }
    const attn_ct2_var *c1 = attn_ct2_find(f, "encoder/conv1/weight");
    if (!c1 || c1->rank != 3 || c1->shape[1] != ATTN_WHISPER_N_MELS || c1->shape[2] != 3)
        return attn_set_error(ATTN_E_FORMAT, "model.bin: encoder/conv1/weight must be [E, 80, 3]");
    const int64_t E = c1->shape[0];
    c->d_model = E;
    c->n_heads = (int64_t)attn__ct2_attr(f, "encoder/num_heads", 0);
    if (c->n_heads <= 0 || E % c->n_heads) return attn_set_error(ATTN_E_FORMAT, "model.bin: bad encoder/num_heads");
    if ((int64_t)attn__ct2_attr(f, "decoder/num_heads", (double)c->n_heads) != c->n_heads)
        return attn_set_error(ATTN_E_FORMAT, "model.bin: encoder and decoder head counts differ");
    if ((int)attn__ct2_attr(f, "decoder/activation", 3) != 3)
        return attn_set_error(ATTN_E_UNSUPPORTED, "model.bin: only GELU Whisper models are supported");
    c->n_encoder_layers = attn__wcount(f, "encoder");
    c->n_decoder_layers = attn__wcount(f, "decoder");
    if (c->n_encoder_layers < 1 || c->n_decoder_layers < 1) return attn_set_error(ATTN_E_FORMAT, "model.bin: no encoder or decoder layers");
    const attn_ct2_var *f1 = attn_ct2_find(f, "encoder/layer_0/ffn/linear_0/weight");
    c->d_ff = f1->rank == 2 ? f1->shape[0] : 0;
    /* convolutions as linear layers over im2col rows (weight [out, in, k] flattened = [out, in*k]) */
    {
        float *w = NULL;
        int64_t d1[3] = {E, ATTN_WHISPER_N_MELS, 3}, d2[3] = {E, E, 3}, db[1] = {E};
        float *b = NULL;
        ATTN_TRY(attn__ct2_read(&w, f, "encoder/conv1/weight", 3, d1));
        attn__ct2_lin_own(&m->conv1, w, NULL, E, ATTN_WHISPER_N_MELS * 3);
        ATTN_TRY(attn__ct2_read(&b, f, "encoder/conv1/bias", 1, db));
        attn__ct2_lin_own(&m->conv1, w, b, E, ATTN_WHISPER_N_MELS * 3);
        ATTN_TRY(attn__ct2_read(&w, f, "encoder/conv2/weight", 3, d2));
        attn__ct2_lin_own(&m->conv2, w, NULL, E, E * 3);
        ATTN_TRY(attn__ct2_read(&b, f, "encoder/conv2/bias", 1, db));
        attn__ct2_lin_own(&m->conv2, w, b, E, E * 3);
    }
    const attn_ct2_var *ep = attn_ct2_find(f, "encoder/position_encodings/encodings");
    if (!ep || ep->rank != 2 || ep->shape[1] != E) return attn_set_error(ATTN_E_FORMAT, "model.bin: encoder positions must be [n_audio_ctx, E]");
    c->n_audio_ctx = ep->shape[0];
    if (c->n_audio_ctx * 2 != ATTN_WHISPER_FRAMES) return attn_set_error(ATTN_E_FORMAT, "model.bin: %lld audio positions (1500 expected)", (long long)c->n_audio_ctx);
    int64_t dp[2] = {c->n_audio_ctx, E};
    ATTN_TRY(attn__ct2_read(&m->enc_pos, f, "encoder/position_encodings/encodings", 2, dp));
    const attn_ct2_var *tp = attn_ct2_find(f, "decoder/position_encodings/encodings");
    if (!tp || tp->rank != 2 || tp->shape[1] != E) return attn_set_error(ATTN_E_FORMAT, "model.bin: decoder positions must be [n_text_ctx, E]");
    c->n_text_ctx = tp->shape[0];
    int64_t dt[2] = {c->n_text_ctx, E};
    ATTN_TRY(attn__ct2_read(&m->dec_pos, f, "decoder/position_encodings/encodings", 2, dt));
    ATTN_TRY(attn__ct2_embedding(&m->emb, &c->vocab_size, f, "decoder/embeddings", E));
    /* the output projection: tied to the embedding by an alias (shared, not copied), or its own */
    const attn_ct2_var *pw = attn_ct2_find(f, "decoder/projection/weight");
    if (pw && pw == attn_ct2_find(f, "decoder/embeddings/weight") && pw->dtype != ATTN_CT2_I8 && pw->dtype != ATTN_CT2_I16 &&
        !attn_ct2_find(f, "decoder/projection/bias")) {
        memset(&m->proj, 0, sizeof m->proj);
        m->proj.w = (attn_weight){ATTN_QT_F32, c->vocab_size, E, m->emb, NULL, NULL, NULL, ATTN_WKERNEL_CT2, NULL, ATTN_QT_F32, NULL};
        m->proj_tied = 1;
    } else {
        ATTN_TRY(attn__ct2_lin_load(&m->proj, f, "decoder/projection", c->vocab_size, E, 0));
    }
    /* a float16 model: the decoding steps' projection reads its float16 values */
    ATTN_TRY(attn__ct2_lin_keep16(&m->proj, pw));
    const int64_t F = c->d_ff;
    ATTN_TRY(attn__ct2_stacks_load(&m->enc, &m->dec, f, c->n_encoder_layers, c->n_decoder_layers, E, F));
    /* pre-norm, GELU; float attention through attn's SDPA */
    m->enc_cfg = attn__ct2_block_config(E, c->n_heads, F, 1, ATTN_ACT_GELU, 0, 0, 0.0f);
    m->dec_cfg = attn__ct2_block_config(E, c->n_heads, F, 1, ATTN_ACT_GELU, 1, 0, 0.0f);
    ATTN_TRY(attn__ct2_ln_load(&m->enc_ln, f, "encoder/layer_norm", E));
    ATTN_TRY(attn__ct2_ln_load(&m->dec_ln, f, "decoder/layer_norm", E));
    return ATTN_OK;
}

static int attn__wvocab(attn_whisper *m, const char *path) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return attn_set_error(ATTN_E_IO, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t vcap = 0;
    int rc = ATTN_OK;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        if (len > 0 && line[len - 1] == '\n') line[--len] = 0;
        if (m->n_vocab == vcap) {
            vcap = vcap ? 2 * vcap : 1024;
            char **t = (char **)realloc(m->vocab, sizeof(char *) * (size_t)vcap);
            if (!t) {
                rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
                break;
            }
            m->vocab = t;
        }
        m->vocab[m->n_vocab] = (char *)malloc((size_t)len + 1);
        if (!m->vocab[m->n_vocab]) {
            rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
            break;
        }
        memcpy(m->vocab[m->n_vocab], line, (size_t)len + 1);
        m->n_vocab++;
    }
    free(line);
    fclose(fp);
    return rc;
}

static int32_t attn__wtok(const attn_whisper *m, const char *t) {
    for (int64_t i = m->n_vocab - 1; i >= 0; i--)
        if (strcmp(m->vocab[i], t) == 0) return (int32_t)i;
    return -1;
}

static int attn__wids(int32_t **out, int64_t *n, const cJSON *arr, int64_t V, const char *what) {
    *out = NULL;
    *n = 0;
    if (!arr) return ATTN_OK;
    if (!cJSON_IsArray(arr)) return attn_set_error(ATTN_E_FORMAT, "config.json: %s is not an array", what);
    int64_t k = cJSON_GetArraySize(arr);
    *out = (int32_t *)malloc(sizeof(int32_t) * (size_t)(k ? k : 1));
    if (!*out) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= (double)V)
            return attn_set_error(ATTN_E_FORMAT, "config.json: %s holds an id outside the vocabulary", what);
        (*out)[(*n)++] = (int32_t)it->valuedouble;
    }
    return ATTN_OK;
}

static int attn__wconfig(attn_whisper *m, const char *dir) {
    attn__hf_json c;
    int rc = attn__hf_json_load(&c, NULL, dir, "config.json", 0, NULL);
    if (rc < 0) {
        attn__hf_json_free(&c);
        return rc;
    }
    const cJSON *j = c.root;
    rc = attn__wids(&m->suppress, &m->n_suppress, cJSON_GetObjectItemCaseSensitive(j, "suppress_ids"), m->cfg.vocab_size, "suppress_ids");
    if (rc == 0)
        rc = attn__wids(&m->suppress_begin, &m->n_suppress_begin, cJSON_GetObjectItemCaseSensitive(j, "suppress_ids_begin"), m->cfg.vocab_size,
                        "suppress_ids_begin");
    attn__hf_json_free(&c);
    return rc;
}

static int attn__wbody_cb(void *ctx, const attn_ct2_file *f) { return attn__wbody((attn_whisper *)ctx, f); }

int attn_whisper_load(attn_whisper **out, const char *dir) {
    if (!out || !dir) return attn_set_error(ATTN_E_INVALID, "whisper_load: NULL argument");
    *out = NULL;
    attn_whisper *m = (attn_whisper *)calloc(1, sizeof *m);
    if (!m) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    char path[4096];
    int rc = attn__ct2_load_model(dir, attn__wbody_cb, m);
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/vocabulary.txt", dir);
        rc = attn__wvocab(m, path);
    }
    if (rc == 0 && m->n_vocab != m->cfg.vocab_size)
        rc = attn_set_error(ATTN_E_FORMAT, "%s: vocabulary.txt has %lld lines but the embeddings have %lld rows", dir, (long long)m->n_vocab,
                            (long long)m->cfg.vocab_size);
    if (rc == 0) rc = attn__wconfig(m, dir);
    if (rc == 0) {
        m->cfg.sot = attn__wtok(m, "<|startoftranscript|>");
        m->cfg.eot = attn__wtok(m, "<|endoftext|>");
        m->cfg.no_timestamps = attn__wtok(m, "<|notimestamps|>");
        m->cfg.timestamp_begin = m->cfg.no_timestamps + 1;
        m->cfg.no_speech = attn__wtok(m, "<|nospeech|>");
        if (m->cfg.no_speech < 0) m->cfg.no_speech = attn__wtok(m, "<|nocaptions|>");
        if (m->cfg.sot < 0 || m->cfg.eot < 0 || m->cfg.no_timestamps < 0)
            rc = attn_set_error(ATTN_E_FORMAT, "%s: vocabulary.txt lacks <|startoftranscript|>, <|endoftext|> or <|notimestamps|>", dir);
    }
    if (rc == 0) {
        /* the shared byte-level BPE tokenizer decodes the text: ids from <|endoftext|> on
         * (language, task and timestamp tokens) are control tokens, which decode to nothing */
        int32_t *types = (int32_t *)malloc(sizeof(int32_t) * (size_t)m->n_vocab);
        if (!types) rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
        else {
            for (int64_t i = 0; i < m->n_vocab; i++) types[i] = i >= m->cfg.eot ? ATTN_TOK_CONTROL : ATTN_TOK_NORMAL;
            attn_bpe_spec sp = {0};
            sp.kind = ATTN_BPE_BYTE_LEVEL;
            sp.tokens = (const char *const *)m->vocab;
            sp.n_tokens = m->n_vocab;
            sp.token_types = types;
            sp.pretokenizer = "gpt2";
            sp.bos_id = -1;
            sp.eos_id = m->cfg.eot;
            rc = attn_bpe_create(&m->tok, &sp);
            free(types);
            if (rc < 0) {
                char msg[512];
                snprintf(msg, sizeof msg, "%s", attn_last_error());
                rc = attn_set_error(rc, "%s/vocabulary.txt: %s", dir, msg);
            }
        }
    }
    if (rc == 0) {
        for (int64_t i = 0; i < m->n_vocab; i++) free(m->vocab[i]);
        free(m->vocab);
        m->vocab = NULL;
    }
    if (rc < 0) {
        attn_whisper_free(m);
        return rc;
    }
    *out = m;
    return ATTN_OK;
}

const attn_whisper_config *attn_whisper_get_config(const attn_whisper *m) { return m ? &m->cfg : NULL; }

/* ---------------------------------------------------------------- text */

char *attn_whisper_text(const attn_whisper *m, const int32_t *ids, int64_t n) {
    if (!m || n < 0 || (n > 0 && !ids)) return NULL;
    /* text tokens only: ids below <|endoftext|> (special and timestamp tokens skipped) */
    int32_t *keep = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!keep) return NULL;
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < m->cfg.eot) keep[k++] = ids[i];
    /* an undecodable byte becomes U+FFFD (3 bytes) */
    size_t cap = (size_t)k * attn_bpe_max_token_bytes(m->tok) * 3 + 8;
    char *out = (char *)malloc(cap);
    if (out && attn_bpe_decode(m->tok, keep, k, 0, out, cap, NULL) < 0) {
        free(out);
        out = NULL;
    }
    free(keep);
    return out;
}

/* ---------------------------------------------------------------- forward */

/* Encoder: mel [80, 3000] -> enc [1500, E]: two convolutions (as linear layers over im2col
 * rows) with GELU, positions, the layer floor's encoder layers, the final LayerNorm. */
static int attn__wencode(attn_whisper *m, float *enc, const float *mel, attn_arena *arena) {
    const int64_t E = m->cfg.d_model, T = ATTN_WHISPER_FRAMES, L = m->cfg.n_audio_ctx;
    const int64_t C = ATTN_WHISPER_N_MELS;
    /* from the state's arena (its first block is kept from window to window: attn__wprepare) */
    attn_arena_mark mk = attn_arena_get_mark(arena);
    float *col = attn_arena_alloc_f32_uninit(arena, (size_t)(T * C * 3 > L * E * 3 ? T * C * 3 : L * E * 3));
    float *x1 = attn_arena_alloc_f32_uninit(arena, (size_t)(T * E));
    int rc = ATTN_OK;
    if (!col || !x1) {
        rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t t = 0; t < T; t++)
        for (int64_t c = 0; c < C; c++)
            for (int k = 0; k < 3; k++) {
                int64_t s = t + k - 1;
                col[t * C * 3 + c * 3 + k] = s >= 0 && s < T ? mel[c * T + s] : 0.0f;
            }
    if ((rc = attn__ct2_lin_apply(x1, col, T, &m->conv1, ATTN_ACT_GELU)) < 0) goto done;
    for (int64_t t = 0; t < L; t++)
        for (int64_t c = 0; c < E; c++)
            for (int k = 0; k < 3; k++) {
                int64_t s = 2 * t + k - 1;
                col[t * E * 3 + c * 3 + k] = s >= 0 && s < T ? x1[s * E + c] : 0.0f;
            }
    if ((rc = attn__ct2_lin_apply(enc, col, L, &m->conv2, ATTN_ACT_GELU)) < 0) goto done;
    attn_arena_release(arena, mk); /* the layers' scratch takes the same bytes */
    for (int64_t i = 0; i < L * E; i++) enc[i] += m->enc_pos[i];
    if ((rc = attn__ct2_encode(enc, m->enc, m->cfg.n_encoder_layers, &m->enc_cfg, 1, L, NULL, arena)) < 0) goto done;
    attn__ct2_ln_apply(enc, enc, L, &m->enc_ln, 1e-5f);
done:
    attn_arena_release(arena, mk);
    return rc;
}

/* take (take = 1: one of cap rows) or park the model's spare decoding state under its flag; 0
 * when another thread holds the flag or there is none to take. Parking replaces a spare of
 * another capacity (the last window's decoding is the likeliest next one): that one is freed. */
static int attn__wspare(attn_whisper *m, attn__ct2_dec *d, int take, int64_t cap) {
    if (atomic_exchange(&m->spare_busy, 1)) return 0;
    int done = 0;
    attn__ct2_dec old;
    int free_old = 0;
    if (take && m->has_spare && m->spare.cap_rows == cap) {
        *d = m->spare;
        m->has_spare = 0;
        done = 1;
    } else if (!take && (!m->has_spare || m->spare.cap_rows != d->cap_rows)) {
        old = m->spare;
        free_old = m->has_spare;
        m->spare = *d;
        m->has_spare = 1;
        done = 1;
    }
    atomic_store(&m->spare_busy, 0);
    if (free_old) attn__ct2_dec_free(&old);
    return done;
}

void attn__wstate_free(attn__wstate *s) {
    if (s->complete && s->m && attn__wspare(s->m, &s->d, 0, 0)) {
        memset(&s->d, 0, sizeof s->d);
        return;
    }
    attn__ct2_dec_free(&s->d);
}

/* one decoder position for N rows at absolute position pos; logits NULL skips the projection */
int attn__wforward(attn__wstate *s, float *logits, const int32_t *ids, int64_t N, int64_t pos) {
    attn_whisper *m = s->m;
    const int64_t E = m->cfg.d_model, T = m->cfg.n_text_ctx;
    if (pos >= T) return attn_set_error(ATTN_E_RANGE, "whisper: position %lld beyond the %lld text positions", (long long)pos, (long long)T);
    if (N > s->d.cap_rows) return attn_set_error(ATTN_E_RANGE, "whisper: %lld rows exceed the capacity", (long long)N);
    float *x = s->d.x;
    for (int64_t r = 0; r < N; r++)
        for (int64_t e = 0; e < E; e++) x[r * E + e] = m->emb[(int64_t)ids[r] * E + e] + m->dec_pos[pos * E + e];
    return attn__ct2_dec_step(&s->d, logits, NULL, N);
}

/* no-speech probability: softmax of the raw logits [V] (before any suppression) at the
 * no-speech token, as OpenAI's DecodingTask takes it from the <|startoftranscript|> position */
float attn__wno_speech(const attn_whisper *m, const float *logits) {
    const int64_t V = m->cfg.vocab_size;
    if (m->cfg.no_speech < 0) return 0.0f;
    float mx = -INFINITY;
    for (int64_t j = 0; j < V; j++)
        if (logits[j] > mx) mx = logits[j];
    double sum = 0;
    for (int64_t j = 0; j < V; j++) sum += exp((double)logits[j] - mx);
    return (float)(exp((double)logits[m->cfg.no_speech] - mx) / sum);
}

int attn__wstep(void *ctx, float *logits, float *attn, const int32_t *ids, int64_t N, int64_t step) {
    attn__wstate *s = (attn__wstate *)ctx;
    (void)attn;
    int rc = attn__wforward(s, logits, ids, N, s->pos0 + step);
    /* with timestamps <|startoftranscript|> is the first decoding input: its logits give the
     * no-speech probability (the first step has one row: the start row) */
    if (rc == 0 && logits && step == 0 && s->pos0 == 0) s->no_speech = attn__wno_speech(s->m, logits);
    return rc;
}

int attn__wreorder(void *ctx, const int64_t *src, int64_t n_new, const int64_t *row_item) {
    (void)row_item; /* one audio window: every row attends over item 0 */
    return attn__ct2_dec_reorder(&((attn__wstate *)ctx)->d, src, n_new, NULL);
}

/* encoder and cross-attention keys/values of one window, for decodings of up to cap rows */
int attn__wprepare(attn__wstate *s, attn_whisper *m, int64_t cap, const float *mel) {
    for (int64_t i = 0; i < (int64_t)ATTN_WHISPER_N_MELS * ATTN_WHISPER_FRAMES; i++)
        if (!isfinite(mel[i])) {
            memset(s, 0, sizeof *s);
            return attn_set_error(ATTN_E_RANGE, "whisper: non-finite feature at index %lld", (long long)i);
        }
    const int64_t E = m->cfg.d_model, A = m->cfg.n_audio_ctx;
    memset(s, 0, sizeof *s);
    s->m = m;
    int rc = ATTN_OK;
    if (attn__wspare(m, &s->d, 1, cap)) {
        /* the last window's state: an empty cache (what lies past each slot's length is never
         * read), rows on item 0 (this model's reorders leave them so) */
        attn_kv_clear(s->d.kv);
        s->d.rows = 0;
    } else {
        rc = attn__ct2_dec_init(&s->d, m->dec, m->cfg.n_decoder_layers, &m->dec_cfg, &m->dec_ln, &m->proj, 1, A, m->cfg.n_text_ctx, cap, 0);
        /* one first block for everything the window takes from the arena: the encoder output,
         * the convolutions' im2col rows (then an encoder layer's scratch) and the decoding steps'
         * scratch; a 64-byte anchor at its start is never released, so the block stays (with the
         * state, from window to window) and the kernel does not map and zero these pages again
         * at every layer: they were allocated and freed per layer */
        const int64_t T = ATTN_WHISPER_FRAMES, C = ATTN_WHISPER_N_MELS, F = m->cfg.d_ff;
        const int64_t conv = (T * C * 3 > A * E * 3 ? T * C * 3 : A * E * 3) + T * E;
        const int64_t layer = 3 * A * E + A * (F > 3 * E ? F : 3 * E);
        if (rc == 0) {
            s->d.arena.block_bytes = sizeof(float) * (size_t)(A * E + (conv > layer ? conv : layer)) + ((size_t)1 << 20);
            if (!attn_arena_alloc(&s->d.arena, 64)) rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
        }
    }
    attn_arena_mark mk = attn_arena_get_mark(&s->d.arena);
    float *enc = rc == 0 ? attn_arena_alloc_f32_uninit(&s->d.arena, (size_t)(A * E)) : NULL;
    if (rc == 0 && !enc) rc = attn_set_error(ATTN_E_NOMEM, "out of memory");
    if (rc == 0) rc = attn__wencode(m, enc, mel, &s->d.arena);
    if (rc == 0) rc = attn__ct2_dec_cross(&s->d, enc);
    attn_arena_release(&s->d.arena, mk);
    s->complete = rc == 0;
    return rc;
}
