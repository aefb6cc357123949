/* Generation with streamed text for the decoder LLMs, and the ChatML chat template (see
 * include/attn_llama.h): the one loop the CLI, the Python package and the server share. */
#include "attn_llama.h"
#include "attn_utf8.h"
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double attn__now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

attn_generate_opts attn_generate_opts_default(void) {
    return (attn_generate_opts){.sampling = attn_sampler_params_default(), .max_tokens = 128};
}

void attn_token_list_free(attn_token_list *t) {
    if (!t) return;
    free(t->ids);
    memset(t, 0, sizeof *t);
}

static int attn__push(attn_token_list *t, int32_t id) {
    if (t->n == t->cap) {
        int64_t nc = t->cap ? t->cap * 2 : 256;
        int32_t *p = (int32_t *)realloc(t->ids, sizeof(int32_t) * (size_t)nc);
        if (!p) return attn_set_error(ATTN_E_NOMEM, "generate: out of memory for the token history");
        t->ids = p;
        t->cap = nc;
    }
    t->ids[t->n++] = id;
    return ATTN_OK;
}

struct attn_generation {
    attn_llama_state *st;
    const attn_bpe *tok;
    const attn_llama_config *cfg;
    attn_generate_opts o;
    attn_sampler *smp;
    attn_token_list own, *hist;
    attn_bpe_stream ds;
    float *logits;
    char *piece, *pend, *out; /* a token's bytes; text held back; the text handed out */
    size_t pcap, pcap_out, plen, scap;
    attn_generate_stats stats;
    double t0;
    int done, flushed;
    int ext, fed; /* attn_generation_start_logits: the caller runs the model; logits of the pending token handed over */
};

void attn_generation_free(attn_generation *g) {
    if (!g) return;
    attn_sampler_free(g->smp);
    attn_token_list_free(&g->own);
    ATTN_FREE_ALL(g->logits, g->piece, g->pend, g->out);
    free(g);
}

const attn_generate_stats *attn_generation_stats(const attn_generation *g) { return g ? &g->stats : NULL; }

static int attn__check_opts(const attn_generate_opts *o) {
    if (o->max_tokens < 0) return attn_set_error(ATTN_E_INVALID, "generate: max_tokens must be >= 0, got %lld", (long long)o->max_tokens);
    if (o->n_stop < 0 || (o->n_stop > 0 && !o->stop)) return attn_set_error(ATTN_E_INVALID, "generate: bad stop strings");
    for (int64_t i = 0; i < o->n_stop; i++)
        if (!o->stop[i] || !o->stop[i][0]) return attn_set_error(ATTN_E_INVALID, "generate: stop string %lld is empty", (long long)i);
    return ATTN_OK;
}

/* a generation's buffers, sampler and history (the prompt appended) in *out. *h0: the history's
 * length before, for a rollback. Errors: ATTN_E_NOMEM, those of attn_sampler_create. */
static int attn__generation_new(attn_generation **out, const attn_llama_config *cfg, const attn_bpe *tok, const int32_t *prompt,
                                int64_t n_prompt, const attn_generate_opts *o, attn_token_list *history, int64_t *h0) {
    attn_generation *g = (attn_generation *)calloc(1, sizeof *g);
    *out = g;
    if (!g) return attn_set_error(ATTN_E_NOMEM, "generate: out of memory");
    g->tok = tok;
    g->cfg = cfg;
    g->o = *o;
    g->hist = history ? history : &g->own;
    g->stats.pending_token = -1;
    const int64_t V = cfg->vocab_size;
    g->pcap = 3 * attn_bpe_max_token_bytes(tok) + 64;
    g->scap = 4096;
    g->pcap_out = g->scap;
    g->logits = (float *)malloc(sizeof(float) * (size_t)V);
    g->piece = (char *)malloc(g->pcap);
    g->pend = (char *)malloc(g->scap);
    g->out = (char *)malloc(g->pcap_out);
    int rc = g->logits && g->piece && g->pend && g->out ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "generate: out of memory");
    if (rc == 0) rc = attn_sampler_create(&g->smp, &o->sampling, V);
    *h0 = g->hist->n;
    for (int64_t i = 0; rc == 0 && i < n_prompt; i++) rc = attn__push(g->hist, prompt[i]);
    if (rc < 0) {
        if (g->hist->n > *h0) g->hist->n = *h0;
        attn_generation_free(g);
        *out = NULL;
        return rc;
    }
    attn_bpe_stream_init(&g->ds, 0);
    g->ds.prev_id = prompt[n_prompt - 1];
    return ATTN_OK;
}

int attn_generation_start(attn_generation **out, attn_llama_state *st, const attn_bpe *tok, const int32_t *prompt, int64_t n_prompt,
                          const attn_generate_opts *o, attn_token_list *history) {
    if (!out || !st || !tok || !prompt || !o) return attn_set_error(ATTN_E_INVALID, "generate: NULL argument");
    *out = NULL;
    if (n_prompt < 1) return attn_set_error(ATTN_E_INVALID, "generate: the prompt is empty");
    ATTN_TRY(attn__check_opts(o));
    const int64_t used = attn_llama_state_len(st), cap = attn_llama_state_max_len(st);
    if (n_prompt > cap - used)
        return attn_set_error(ATTN_E_RANGE, "the prompt has %lld tokens; with %lld already in the context it does not fit in the context of %lld positions",
                              (long long)n_prompt, (long long)used, (long long)cap);
    int64_t h0;
    attn_generation *g;
    ATTN_TRY(attn__generation_new(&g, attn_llama_get_config(attn_llama_state_model(st)), tok, prompt, n_prompt, o, history, &h0));
    g->st = st;
    const double t0 = attn__now();
    /* in chunks of 256 when progress is wanted (the same arithmetic: attn_llama_forward runs
     * chunks of 256 anyway, and only the last position's logits are kept) */
    const int64_t step = o->progress ? 256 : n_prompt;
    int rc = ATTN_OK;
    for (int64_t i = 0; rc == 0 && i < n_prompt; i += step) {
        const int64_t k = n_prompt - i < step ? n_prompt - i : step;
        rc = attn_llama_forward(st, g->logits, prompt + i, k, 0, o->n_threads);
        if (rc == 0 && o->progress) o->progress(i + k, n_prompt, o->progress_user);
    }
    if (rc < 0) {
        attn_llama_state_truncate(st, used);
        if (g->hist->n > h0) g->hist->n = h0;
        attn_generation_free(g);
        return rc;
    }
    g->stats.n_prompt = n_prompt;
    g->stats.t_prompt = attn__now() - t0;
    g->t0 = attn__now();
    *out = g;
    return ATTN_OK;
}

int attn_generation_start_logits(attn_generation **out, const attn_llama *m, const attn_bpe *tok, const int32_t *prompt, int64_t n_prompt,
                                 const float *logits, const attn_generate_opts *o, attn_token_list *history) {
    if (!out || !m || !tok || !prompt || !logits || !o) return attn_set_error(ATTN_E_INVALID, "generate: NULL argument");
    *out = NULL;
    if (n_prompt < 1) return attn_set_error(ATTN_E_INVALID, "generate: the prompt is empty");
    ATTN_TRY(attn__check_opts(o));
    int64_t h0;
    attn_generation *g;
    ATTN_TRY(attn__generation_new(&g, attn_llama_get_config(m), tok, prompt, n_prompt, o, history, &h0));
    g->ext = 1;
    memcpy(g->logits, logits, sizeof(float) * (size_t)g->cfg->vocab_size);
    g->stats.n_prompt = n_prompt;
    g->t0 = attn__now();
    *out = g;
    return ATTN_OK;
}

int attn_generation_feed(attn_generation *g, const float *logits) {
    if (!g || !logits || !g->ext || g->stats.pending_token < 0 || g->done)
        return attn_set_error(ATTN_E_INVALID, "generate: feed needs a generation of attn_generation_start_logits with a pending token");
    memcpy(g->logits, logits, sizeof(float) * (size_t)g->cfg->vocab_size);
    g->fed = 1;
    return ATTN_OK;
}

/* the longest suffix of s[0..n) that is a proper prefix of a stop string */
static size_t attn__stop_overlap(const char *s, size_t n, const attn_generate_opts *o) {
    size_t best = 0;
    for (int64_t i = 0; i < o->n_stop; i++) {
        const size_t sl = strlen(o->stop[i]);
        for (size_t k = sl - 1 < n ? sl - 1 : n; k > best; k--)
            if (memcmp(s + n - k, o->stop[i], k) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

/* the earliest stop string in s (NUL-terminated), or NULL */
static const char *attn__stop_hit(const char *s, const attn_generate_opts *o) {
    const char *hit = NULL;
    for (int64_t i = 0; i < o->n_stop; i++) {
        const char *h = strstr(s, o->stop[i]);
        if (h && (!hit || h < hit)) hit = h;
    }
    return hit;
}

static int attn__emit(attn_generation *g, const char *p, size_t n, const char **text, size_t *len) {
    if (n + 1 > g->pcap_out) {
        char *np = (char *)realloc(g->out, n + 1);
        if (!np) return attn_set_error(ATTN_E_NOMEM, "generate: out of memory");
        g->out = np;
        g->pcap_out = n + 1;
    }
    memcpy(g->out, p, n);
    g->out[n] = 0;
    *text = g->out;
    *len = n;
    return 1;
}

/* the end: what is still held back (text that was not a stop string, an incomplete character) */
static int attn__finish(attn_generation *g, const char **text, size_t *len, int32_t *token) {
    g->done = 1;
    g->stats.t_gen = attn__now() - g->t0;
    if (g->flushed || g->stats.finish == ATTN_FINISH_STOP) return 0;
    g->flushed = 1;
    size_t pl = 0;
    ATTN_TRY(attn_bpe_stream_flush(&g->ds, g->piece, g->pcap, &pl));
    if (g->plen + pl == 0) return 0;
    char *tmp = (char *)malloc(g->plen + pl + 1);
    if (!tmp) return attn_set_error(ATTN_E_NOMEM, "generate: out of memory");
    memcpy(tmp, g->pend, g->plen);
    memcpy(tmp + g->plen, g->piece, pl);
    int rc = attn__emit(g, tmp, g->plen + pl, text, len);
    free(tmp);
    g->plen = 0;
    *token = -1;
    return rc;
}

int attn_generation_next(attn_generation *g, const char **text, size_t *len, int32_t *token) {
    if (!g || !text || !len || !token) return attn_set_error(ATTN_E_INVALID, "generate: NULL argument");
    *text = "";
    *len = 0;
    *token = -1;
    if (g->done) return 0;
    if (g->stats.n_gen >= g->o.max_tokens) {
        g->stats.finish = ATTN_FINISH_LENGTH;
        return attn__finish(g, text, len, token);
    }
    /* the previous token enters the model first, if the context has room for it */
    if (g->stats.pending_token >= 0 && g->ext) {
        if (!g->fed) {
            g->stats.finish = ATTN_FINISH_CONTEXT;
            return attn__finish(g, text, len, token);
        }
        g->fed = 0;
        g->stats.pending_token = -1;
    }
    if (g->stats.pending_token >= 0) {
        if (attn_llama_state_len(g->st) >= attn_llama_state_max_len(g->st)) {
            g->stats.finish = ATTN_FINISH_CONTEXT;
            return attn__finish(g, text, len, token);
        }
        ATTN_TRY(attn_llama_forward(g->st, g->logits, &g->stats.pending_token, 1, 0, g->o.n_threads));
        g->stats.pending_token = -1;
    }
    int32_t tok;
    ATTN_TRY(attn_sampler_sample(g->smp, &tok, g->logits, g->hist->ids, g->hist->n));
    const attn_llama_config *c = g->cfg;
    if (tok == c->eos_id || (c->eot_id >= 0 && tok == c->eot_id) || (c->add_bos && tok == c->bos_id)) {
        g->stats.finish = ATTN_FINISH_END;
        return attn__finish(g, text, len, token);
    }
    g->stats.n_gen++;
    g->stats.pending_token = tok;
    ATTN_TRY(attn__push(g->hist, tok));
    size_t pl;
    ATTN_TRY(attn_bpe_stream_push(g->tok, &g->ds, tok, g->piece, g->pcap, &pl));
    if (g->plen + pl + 1 > g->scap) {
        char *np = (char *)realloc(g->pend, (g->plen + pl + 1) * 2);
        if (!np) return attn_set_error(ATTN_E_NOMEM, "generate: out of memory");
        g->pend = np;
        g->scap = (g->plen + pl + 1) * 2;
    }
    memcpy(g->pend + g->plen, g->piece, pl);
    g->plen += pl;
    g->pend[g->plen] = 0;
    size_t emit = g->plen;
    if (g->o.n_stop > 0) {
        const char *hit = attn__stop_hit(g->pend, &g->o);
        if (hit) {
            g->stats.finish = ATTN_FINISH_STOP;
            g->done = 1;
            g->stats.t_gen = attn__now() - g->t0;
            int rc = attn__emit(g, g->pend, (size_t)(hit - g->pend), text, len);
            g->plen = 0;
            *token = tok;
            return rc;
        }
        emit = g->plen - attn__stop_overlap(g->pend, g->plen, &g->o);
    }
    int rc = attn__emit(g, g->pend, emit, text, len);
    memmove(g->pend, g->pend + emit, g->plen - emit);
    g->plen -= emit;
    *token = tok;
    return rc;
}

int attn_llama_generate(attn_llama_state *st, const attn_bpe *tok, const int32_t *prompt, int64_t n_prompt, const attn_generate_opts *o,
                        attn_token_list *history, attn_text_fn on_text, void *ctx, attn_generate_stats *stats) {
    attn_generation *g = NULL;
    ATTN_TRY(attn_generation_start(&g, st, tok, prompt, n_prompt, o, history));
    int rc;
    const char *text;
    size_t len;
    int32_t id;
    while ((rc = attn_generation_next(g, &text, &len, &id)) > 0)
        if (len && on_text && on_text(ctx, text, len, id) != 0) {
            g->stats.finish = ATTN_FINISH_CANCELLED;
            g->stats.t_gen = attn__now() - g->t0;
            break;
        }
    if (stats) *stats = g->stats;
    attn_generation_free(g);
    return rc < 0 ? rc : ATTN_OK;
}

/* ------------------------------------------------------------------ chat template */

int attn_chat_template_system(char **out, const char *tmpl, int force_chatml) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "chat template: out is NULL");
    *out = NULL;
    if (!tmpl) return force_chatml ? ATTN_OK : attn_set_error(ATTN_E_UNSUPPORTED, "the model file has no chat template");
    const int chatml = strstr(tmpl, "<|im_start|>") && strstr(tmpl, "<|im_end|>") && strstr(tmpl, "message['role']") &&
                       strstr(tmpl, "message['content']");
    if (!chatml && !force_chatml) return attn_set_error(ATTN_E_UNSUPPORTED, "the model's chat template is not one attn knows (ChatML)");
    const char *key = "<|im_start|>system\n";
    const char *p = strstr(tmpl, key);
    if (!p) return ATTN_OK;
    p += strlen(key);
    const char *e = strstr(p, "<|im_end|>");
    if (!e || memchr(p, '{', (size_t)(e - p)) || memchr(p, '\'', (size_t)(e - p))) return ATTN_OK; /* not a literal text */
    *out = (char *)malloc((size_t)(e - p) + 1);
    if (!*out) return attn_set_error(ATTN_E_NOMEM, "chat template: out of memory");
    memcpy(*out, p, (size_t)(e - p));
    (*out)[e - p] = 0;
    return ATTN_OK;
}

int attn_chat_format(char **out, const attn_chat_message *messages, int64_t n, const char *default_system) {
    if (!out || (!messages && n > 0) || n < 0) return attn_set_error(ATTN_E_INVALID, "chat: bad arguments");
    *out = NULL;
    size_t total = 64 + (default_system ? strlen(default_system) + 40 : 0);
    for (int64_t i = 0; i < n; i++) {
        const attn_chat_message *m = &messages[i];
        if (!m->role || (strcmp(m->role, "system") && strcmp(m->role, "user") && strcmp(m->role, "assistant")))
            return attn_set_error(ATTN_E_INVALID, "chat: message %lld has role '%s' (system, user or assistant expected)", (long long)i,
                                  m->role ? m->role : "(null)");
        if (!m->content) return attn_set_error(ATTN_E_INVALID, "chat: message %lld has no content", (long long)i);
        size_t bad, len = strlen(m->content);
        if (attn_tokenizer_validate_utf8(m->content, len, &bad) < 0)
            return attn_set_error(ATTN_E_INVALID, "chat: message %lld is not valid UTF-8 (byte offset %zu, byte 0x%02X)", (long long)i, bad,
                                  (unsigned)(unsigned char)m->content[bad]);
        total += len + 40;
    }
    char *s = (char *)malloc(total);
    if (!s) return attn_set_error(ATTN_E_NOMEM, "chat: out of memory");
    size_t k = 0;
    if (default_system && (n == 0 || strcmp(messages[0].role, "system") != 0))
        k += (size_t)snprintf(s + k, total - k, "<|im_start|>system\n%s<|im_end|>\n", default_system);
    for (int64_t i = 0; i < n; i++)
        k += (size_t)snprintf(s + k, total - k, "<|im_start|>%s\n%s<|im_end|>\n", messages[i].role, messages[i].content);
    snprintf(s + k, total - k, "<|im_start|>assistant\n");
    *out = s;
    return ATTN_OK;
}
