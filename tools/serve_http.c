/* attn serve: the HTTP side (libmicrohttpd, one thread per connection): routing, API key,
 * body limit, JSON responses in OpenAI's shapes, server-sent events, /metrics. */
#include "serve.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* connections at once: a thread each (thread per connection), a descriptor each. At most
 * CONN_LIMIT, and fewer when the descriptor limit (raised by cmd_serve) is lower: FD_RESERVE stay
 * for model files, the listening socket and the library's own. Beyond the limit a connection is
 * accepted and closed at once (a bounded refusal). */
#define CONN_LIMIT 4096
#define FD_RESERVE 64
/* at shutdown, once the grace is over and every task has its ending, the requests still being
 * answered get up to DRAIN_S seconds to send it (a stream's error event, "data: [DONE]" and the
 * chunked body's end) before the connections are closed: MHD_stop_daemon shuts the sockets down
 * at once, and a stream's thread that had not yet written its last events lost them */
#define DRAIN_S 3.0

/* requests between their first handler call and the completed callback (their response fully sent) */
static int in_flight;

typedef struct {
    char *body;
    size_t len, cap;
    int refused; /* 1: a response was queued (401, 413); 2: a 413 to send when the upload ends */
    double t0;
} conn_ctx;

static enum MHD_Result send_text(struct MHD_Connection *c, int status, const char *type, char *text, int retry_after) {
    struct MHD_Response *r = MHD_create_response_from_buffer(text ? strlen(text) : 0, text ? text : (char *)"", text ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (retry_after) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    return ok;
}

static enum MHD_Result send_json(struct MHD_Connection *c, int status, cJSON *j) {
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    if (!s) return MHD_NO;
    return send_text(c, status, "application/json", s, 0);
}

static enum MHD_Result send_err(struct MHD_Connection *c, serve_kind k, const serve_err *e) {
    serve_metrics_request(serve_g, k, e->status, 0);
    return send_text(c, e->status, "application/json", serve_error_json(e), e->status == 503);
}

/* 1 when the client has closed its side (EOF on a peek) */
static int client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static int auth_ok(struct MHD_Connection *c) {
    const char *key = serve_g->api_key;
    if (!key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7) != 0) return 0; /* the scheme is case-insensitive (RFC 9110) */
    h += 7;
    /* constant time in the key's contents: every byte is compared, lengths folded in */
    size_t kl = strlen(key), hl = strlen(h);
    unsigned char d = (unsigned char)(kl != hl);
    for (size_t i = 0; i < kl; i++) d |= (unsigned char)(key[i] ^ (i < hl ? h[i] : 0));
    return d == 0;
}

static const char *finish_name(attn_finish_reason f) { return f == ATTN_FINISH_LENGTH || f == ATTN_FINISH_CONTEXT ? "length" : "stop"; }

static void make_id(char *out, size_t n, const char *prefix) {
    static unsigned long ctr;
    unsigned long k = __atomic_add_fetch(&ctr, 1, __ATOMIC_RELAXED);
    snprintf(out, n, "%s-%lx%06lx", prefix, (unsigned long)time(NULL), k);
}

static cJSON *usage_json(int64_t p, int64_t g) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)p);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)g);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(p + g));
    return u;
}

/* ------------------------------------------------------------------ streaming (SSE) */

typedef struct {
    serve_task *t;
    serve_kind kind;
    char id[64], model[128];
    long created;
    int include_usage, phase; /* 0 role chunk, 1 text, 2 usage, 3 [DONE], 4 end */
    size_t sent, piece; /* bytes of the task's text sent, in whole pieces */
    char *buf;
    size_t blen, boff;
    struct MHD_Connection *conn;
    double deadline, t0;
    int status;
} sse;

static cJSON *chunk(sse *s, const char *text, size_t len, const char *finish, int with_role) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "id", s->id);
    cJSON_AddStringToObject(j, "object", s->kind == SERVE_CHAT ? "chat.completion.chunk" : "text_completion");
    cJSON_AddNumberToObject(j, "created", (double)s->created);
    cJSON_AddStringToObject(j, "model", s->model);
    cJSON *ch = cJSON_AddArrayToObject(j, "choices"), *c = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c);
    cJSON_AddNumberToObject(c, "index", 0);
    char *tx = (char *)malloc(len + 1);
    if (tx) {
        memcpy(tx, text, len);
        tx[len] = 0;
    }
    if (s->kind == SERVE_CHAT) {
        cJSON *d = cJSON_AddObjectToObject(c, "delta");
        if (with_role) cJSON_AddStringToObject(d, "role", "assistant");
        if (len || with_role) cJSON_AddStringToObject(d, "content", tx ? tx : "");
    } else
        cJSON_AddStringToObject(c, "text", tx ? tx : "");
    free(tx);
    cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    if (s->include_usage) cJSON_AddNullToObject(j, "usage");
    return j;
}

static void sse_set(sse *s, cJSON *j) {
    char *p = j ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    free(s->buf);
    s->buf = NULL;
    s->blen = s->boff = 0;
    if (!p) return;
    size_t n = strlen(p);
    s->buf = (char *)malloc(n + 9);
    if (s->buf) s->blen = (size_t)sprintf(s->buf, "data: %s\n\n", p);
    free(p);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max) {
    sse *s = (sse *)cls;
    (void)pos;
    while (s->boff >= s->blen) {
        serve_task *t = s->t;
        if (s->phase == 0) {
            s->phase = 1;
            if (s->kind == SERVE_CHAT) {
                sse_set(s, chunk(s, "", 0, NULL, 1));
                continue;
            }
        }
        if (s->phase == 1) {
            pthread_mutex_lock(&t->mu);
            while (t->len == s->sent && !t->done) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 100000000;
                if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
                pthread_cond_timedwait(&t->cv, &t->mu, &ts);
                if (t->len == s->sent && !t->done && (client_gone(s->conn) || serve_now() > s->deadline)) {
                    t->cancelled = 1;
                    s->status = 499;
                    pthread_mutex_unlock(&t->mu);
                    return MHD_CONTENT_READER_END_WITH_ERROR;
                }
            }
            if (t->len > s->sent) {
                /* one event a piece (a token's text), as OpenAI's stream: the deltas a client sees do not
                 * depend on how fast it reads */
                size_t end = t->ends[s->piece++];
                cJSON *j = chunk(s, t->text + s->sent, end - s->sent, NULL, 0);
                s->sent = end;
                pthread_mutex_unlock(&t->mu);
                sse_set(s, j);
                continue;
            }
            /* done */
            s->phase = s->include_usage ? 2 : 3;
            if (t->err_status) {
                serve_err e;
                serve_fail(&e, t->err_status, "server_error", NULL, NULL, "%s", t->err_msg);
                s->status = t->err_status;
                char *p = serve_error_json(&e);
                pthread_mutex_unlock(&t->mu);
                sse_set(s, cJSON_Parse(p ? p : "{}"));
                free(p);
                s->phase = 3;
                continue;
            }
            const char *fin = finish_name(t->finish);
            pthread_mutex_unlock(&t->mu);
            sse_set(s, chunk(s, "", 0, fin, 0));
            continue;
        }
        if (s->phase == 2) {
            cJSON *j = chunk(s, "", 0, NULL, 0);
            cJSON_DeleteItemFromObject(j, "choices");
            cJSON_AddArrayToObject(j, "choices");
            cJSON_DeleteItemFromObject(j, "usage");
            cJSON_AddItemToObject(j, "usage", usage_json(t->n_prompt, t->n_gen));
            sse_set(s, j);
            s->phase = 3;
            continue;
        }
        if (s->phase == 3) {
            free(s->buf);
            s->buf = strdup("data: [DONE]\n\n");
            s->blen = s->buf ? strlen(s->buf) : 0;
            s->boff = 0;
            s->phase = 4;
            continue;
        }
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    size_t n = s->blen - s->boff < max ? s->blen - s->boff : max;
    memcpy(out, s->buf + s->boff, n);
    s->boff += n;
    return (ssize_t)n;
}

static void sse_free(void *cls) {
    sse *s = (sse *)cls;
    serve_task *t = s->t;
    pthread_mutex_lock(&t->mu);
    if (!t->done) t->cancelled = 1; /* the client went away: the scheduler frees the slot */
    pthread_mutex_unlock(&t->mu);
    if (t->cancelled) {
        pthread_mutex_lock(&serve_g->metrics.mu);
        serve_g->metrics.cancelled++;
        pthread_mutex_unlock(&serve_g->metrics.mu);
    }
    serve_metrics_request(serve_g, s->kind, s->status, serve_now() - s->t0);
    serve_task_release(t);
    free(s->buf);
    free(s);
}

/* ------------------------------------------------------------------ endpoints */

static int encode(const serve_model *m, const char *text, int bos, int special, int32_t **ids, int64_t *n, serve_err *e) {
    const size_t len = strlen(text);
    const int64_t cap = (int64_t)len + 8;
    *ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)cap);
    if (!*ids) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    const attn_llama_config *c = attn_llama_get_config(m->llama);
    int64_t off = 0, got = 0;
    if (bos && c->add_bos && c->bos_id >= 0) (*ids)[off++] = c->bos_id;
    if (attn_bpe_encode(m->tok, text, len, special, *ids + off, cap - off, &got) < 0)
        return serve_fail(e, 400, NULL, NULL, NULL, "tokenizing: %s", attn_last_error());
    *n = off + got;
    return 0;
}

static enum MHD_Result generate(struct MHD_Connection *c, serve_model *m, serve_req *r, double t0) {
    serve_err e;
    char *text = NULL;
    int32_t *ids = NULL;
    int64_t n = 0;
    if (r->kind == SERVE_CHAT) {
        if (!m->chat_ok) {
            serve_fail(&e, 400, NULL, "model", "unsupported_model", "model '%s' cannot chat: %s; use /v1/completions", m->name, m->chat_why);
            return send_err(c, r->kind, &e);
        }
        if (attn_chat_format(&text, r->msgs, r->n_msgs, m->default_system) < 0) {
            serve_fail(&e, 400, NULL, "messages", NULL, "%s", attn_last_error());
            return send_err(c, r->kind, &e);
        }
    }
    const int is_chat = r->kind == SERVE_CHAT;
    int rc = encode(m, is_chat ? text : r->prompt, !is_chat, is_chat || m->own_tok == NULL, &ids, &n, &e);
    free(text);
    const int64_t C = m->ctx;
    if (rc == 0 && n < 1) rc = serve_fail(&e, 400, NULL, is_chat ? "messages" : "prompt", "invalid_value", "the prompt has no tokens");
    if (rc == 0 && n > C)
        rc = serve_fail(&e, 400, NULL, is_chat ? "messages" : "prompt", "context_length_exceeded",
                        "the prompt has %lld tokens; the context holds %lld (--ctx)", (long long)n, (long long)C);
    if (rc < 0) {
        free(ids);
        return send_err(c, r->kind, &e);
    }
    attn_generate_opts o = attn_generate_opts_default();
    o.sampling.temperature = (float)r->temperature;
    o.sampling.top_p = (float)r->top_p;
    o.sampling.top_k = 0;
    o.sampling.min_p = 0;
    o.sampling.repetition_penalty = 1;
    static uint64_t ctr;
    o.sampling.seed = r->has_seed ? r->seed : (uint64_t)time(NULL) * 1000003u + __atomic_add_fetch(&ctr, 1, __ATOMIC_RELAXED);
    o.max_tokens = r->max_tokens > 0 ? r->max_tokens : C; /* unset: until the end token or the context is full */
    o.stop = (const char *const *)r->stop;
    o.n_stop = r->n_stop;
    o.n_threads = (int)serve_g->threads;
    serve_task *t = serve_task_new(ids, n, &o);
    free(ids);
    if (!t) {
        serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
        return send_err(c, r->kind, &e);
    }
    if (serve_submit(m, t, &e) < 0) {
        serve_task_release(t);
        return send_err(c, r->kind, &e);
    }
    const double deadline = t0 + serve_g->timeout_s;
    char id[64];
    make_id(id, sizeof id, is_chat ? "chatcmpl" : "cmpl");
    if (r->stream) {
        sse *s = (sse *)calloc(1, sizeof *s);
        if (!s) {
            t->cancelled = 1;
            serve_task_release(t);
            return MHD_NO;
        }
        s->t = t;
        s->kind = r->kind;
        snprintf(s->id, sizeof s->id, "%s", id);
        snprintf(s->model, sizeof s->model, "%s", m->name);
        s->created = (long)time(NULL);
        s->include_usage = r->include_usage;
        s->conn = c;
        s->deadline = deadline;
        s->t0 = t0;
        s->status = 200;
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, sse_read, s, sse_free);
        if (!resp) {
            sse_free(s);
            return MHD_NO;
        }
        MHD_add_response_header(resp, "Content-Type", "text/event-stream");
        MHD_add_response_header(resp, "Cache-Control", "no-cache");
        enum MHD_Result ok = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        return ok;
    }
    pthread_mutex_lock(&t->mu);
    while (!t->done) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        if (!t->done && !t->cancelled && (client_gone(c) || serve_now() > deadline)) t->cancelled = 1; /* the scheduler finishes it at its next step */
    }
    pthread_mutex_unlock(&t->mu);
    enum MHD_Result ok;
    if (t->err_status || t->finish == ATTN_FINISH_CANCELLED) {
        if (t->err_status) serve_fail(&e, t->err_status, t->err_status == 503 ? "server_error" : "server_error", NULL, NULL, "%s", t->err_msg);
        else serve_fail(&e, 504, "server_error", NULL, "timeout", "the request was cancelled (client gone or --timeout %.0f s reached)", serve_g->timeout_s);
        ok = send_err(c, r->kind, &e);
    } else {
        cJSON *j = cJSON_CreateObject(), *ch, *x;
        cJSON_AddStringToObject(j, "id", id);
        cJSON_AddStringToObject(j, "object", is_chat ? "chat.completion" : "text_completion");
        cJSON_AddNumberToObject(j, "created", (double)time(NULL));
        cJSON_AddStringToObject(j, "model", m->name);
        ch = cJSON_AddArrayToObject(j, "choices");
        cJSON_AddItemToArray(ch, x = cJSON_CreateObject());
        cJSON_AddNumberToObject(x, "index", 0);
        if (is_chat) {
            cJSON *msg = cJSON_AddObjectToObject(x, "message");
            cJSON_AddStringToObject(msg, "role", "assistant");
            cJSON_AddStringToObject(msg, "content", t->text ? t->text : "");
        } else
            cJSON_AddStringToObject(x, "text", t->text ? t->text : "");
        cJSON_AddNullToObject(x, "logprobs");
        cJSON_AddStringToObject(x, "finish_reason", finish_name(t->finish));
        cJSON_AddItemToObject(j, "usage", usage_json(t->n_prompt, t->n_gen));
        serve_metrics_request(serve_g, r->kind, 200, serve_now() - t0);
        ok = send_json(c, 200, j);
    }
    serve_task_release(t);
    return ok;
}

static enum MHD_Result embeddings(struct MHD_Connection *c, serve_model *m, serve_req *r, double t0) {
    serve_err e;
    const int64_t E = attn_bert_get_config(m->bert)->d_model, n = r->n_texts + r->n_tok_arrays;
    float *out = (float *)malloc(sizeof(float) * (size_t)(n * E));
    int64_t tokens = 0;
    if (!out) serve_fail(&e, 500, "server_error", NULL, NULL, "out of memory");
    if (!out || serve_embed(m, serve_g, r, out, &tokens, &e) < 0) {
        free(out);
        return send_err(c, r->kind, &e);
    }
    cJSON *j = cJSON_CreateObject(), *d = cJSON_AddArrayToObject(j, "data");
    cJSON_AddStringToObject(j, "object", "list");
    for (int64_t i = 0; i < n; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "object", "embedding");
        cJSON_AddNumberToObject(x, "index", (double)i);
        if (r->base64) {
            char *b = serve_b64(out + i * E, sizeof(float) * (size_t)E);
            cJSON_AddStringToObject(x, "embedding", b ? b : "");
            free(b);
        } else {
            cJSON *a = cJSON_AddArrayToObject(x, "embedding");
            for (int64_t k = 0; k < E; k++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)out[i * E + k])); /* %1.17g: float32 exact */
        }
        cJSON_AddItemToArray(d, x);
    }
    free(out);
    cJSON_AddStringToObject(j, "model", m->name);
    cJSON *u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)tokens);
    pthread_mutex_lock(&serve_g->metrics.mu);
    serve_g->metrics.embed_inputs += (uint64_t)n;
    serve_g->metrics.prompt_tokens += (uint64_t)tokens;
    pthread_mutex_unlock(&serve_g->metrics.mu);
    serve_metrics_request(serve_g, r->kind, 200, serve_now() - t0);
    return send_json(c, 200, j);
}

static enum MHD_Result tokenize(struct MHD_Connection *c, serve_model *m, serve_req *r) {
    serve_err e;
    cJSON *j = cJSON_CreateObject();
    if (r->kind == SERVE_TOKENIZE) {
        int32_t *ids = NULL;
        int64_t n = 0;
        int rc = 0;
        if (m->is_decoder) rc = encode(m, r->content, r->add_special, m->own_tok == NULL, &ids, &n, &e);
        else {
            const attn_tokenizer *tk = attn_bert_tokenizer(m->bert);
            const size_t len = strlen(r->content);
            ids = (int32_t *)malloc(sizeof(int32_t) * (len + 3));
            if (!ids || attn_tokenizer_encode(tk, r->content, len, r->add_special, 0, ids, &n, (int64_t)len + 3, NULL) < 0)
                rc = serve_fail(&e, 400, NULL, "content", NULL, "tokenizing: %s", ids ? attn_last_error() : "out of memory");
        }
        if (rc < 0) {
            free(ids);
            cJSON_Delete(j);
            return send_err(c, r->kind, &e);
        }
        cJSON *a = cJSON_AddArrayToObject(j, "tokens");
        for (int64_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
        free(ids);
    } else {
        const int64_t V = m->is_decoder ? attn_llama_get_config(m->llama)->vocab_size : attn_bert_get_config(m->bert)->vocab_size;
        for (int64_t i = 0; i < r->n_tokens; i++)
            if (r->tokens[i] >= V) {
                cJSON_Delete(j);
                serve_fail(&e, 400, NULL, "tokens", "invalid_value", "token %lld (id %d) is outside the vocabulary of %lld", (long long)i, (int)r->tokens[i], (long long)V);
                return send_err(c, r->kind, &e);
            }
        size_t cap = 64, len = 0;
        for (int64_t i = 0; i < r->n_tokens; i++) cap += m->is_decoder ? 3 * attn_bpe_max_token_bytes(m->tok) + 8 : 64;
        char *s = (char *)malloc(cap);
        if (s && m->is_decoder) {
            if (attn_bpe_decode(m->tok, r->tokens, r->n_tokens, 0, s, cap, &len) < 0) s[0] = 0;
        } else if (s) { /* WordPiece: "##" pieces glue on, specials are left out */
            const attn_tokenizer *tk = attn_bert_tokenizer(m->bert);
            s[0] = 0;
            for (int64_t i = 0; i < r->n_tokens; i++) {
                const char *p = attn_tokenizer_id_to_token(tk, r->tokens[i]);
                if (!p || r->tokens[i] == attn_tokenizer_cls_id(tk) || r->tokens[i] == attn_tokenizer_sep_id(tk) || r->tokens[i] == attn_tokenizer_pad_id(tk)) continue;
                if (strncmp(p, "##", 2) == 0) p += 2;
                else if (len) s[len++] = ' ';
                len += (size_t)snprintf(s + len, cap - len, "%.60s", p);
            }
        }
        cJSON_AddStringToObject(j, "content", s ? s : "");
        free(s);
    }
    serve_metrics_request(serve_g, r->kind, 200, 0);
    return send_json(c, 200, j);
}

static enum MHD_Result models(struct MHD_Connection *c) {
    cJSON *j = cJSON_CreateObject(), *d;
    cJSON_AddStringToObject(j, "object", "list");
    d = cJSON_AddArrayToObject(j, "data");
    for (int i = 0; i < serve_g->n_models; i++) {
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "id", serve_g->models[i].name);
        cJSON_AddStringToObject(x, "object", "model");
        cJSON_AddNumberToObject(x, "created", (double)serve_g->models[i].created);
        cJSON_AddStringToObject(x, "owned_by", "attn");
        /* attn's own: the model answers /v1/chat/completions (the chat page lists these) */
        cJSON_AddBoolToObject(x, "attn_chat", serve_g->models[i].is_decoder && serve_g->models[i].chat_ok);
        cJSON_AddItemToArray(d, x);
    }
    return send_json(c, 200, j);
}

typedef enum { SERVE_M_DECODER = 0, SERVE_M_ENCODER, SERVE_M_WHISPER, SERVE_M_TRANSLATOR } serve_model_type;
static const char *const type_name[] = {"a text generator", "an embedding model", "a speech recognizer (Whisper)", "a translator (CTranslate2)"};
static serve_model_type model_type(const serve_model *m) {
    return m->is_decoder ? SERVE_M_DECODER : m->is_whisper ? SERVE_M_WHISPER : m->is_translator ? SERVE_M_TRANSLATOR : SERVE_M_ENCODER;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                               const char *upload, size_t *upload_size, void **con_cls) {
    (void)cls, (void)version;
    conn_ctx *x = (conn_ctx *)*con_cls;
    serve_err e;
    static const struct {
        const char *path;
        serve_kind kind;
    } posts[] = {{"/v1/chat/completions", SERVE_CHAT},           {"/v1/completions", SERVE_COMPLETION},    {"/v1/embeddings", SERVE_EMBED},
                 {"/tokenize", SERVE_TOKENIZE},                   {"/detokenize", SERVE_DETOKENIZE},        {"/v1/audio/transcriptions", SERVE_TRANSCRIBE},
                 {"/v1/translations/text", SERVE_TRANSLATE}};
    int kind = -1;
    for (size_t i = 0; i < sizeof posts / sizeof posts[0]; i++)
        if (strcmp(url, posts[i].path) == 0) kind = (int)posts[i].kind;
    const int is_post = strcmp(method, "POST") == 0, is_get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (!x) {
        x = (conn_ctx *)calloc(1, sizeof *x);
        if (!x) return MHD_NO;
        x->t0 = serve_now();
        *con_cls = x;
        __atomic_add_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
        /* open without the key: /health, and the chat page (static; the key is typed into it) */
        if (strcmp(url, "/health") != 0 && !(strcmp(url, "/") == 0 && is_get) && !auth_ok(c)) {
            x->refused = 1;
            serve_fail(&e, 401, NULL, NULL, "invalid_api_key", "a valid API key is required: 'Authorization: Bearer KEY'");
            return send_err(c, kind >= 0 ? (serve_kind)kind : SERVE_CHAT, &e);
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)serve_g->max_body) {
            x->refused = 1;
            serve_fail(&e, 413, NULL, NULL, "request_too_large", "the body has %s bytes; the limit is %lld (--max-body)", cl, (long long)serve_g->max_body);
            return send_err(c, kind >= 0 ? (serve_kind)kind : SERVE_CHAT, &e);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!x->refused && x->len + *upload_size > (size_t)serve_g->max_body) {
            /* a body without Content-Length (chunked) over the limit: the rest is read and dropped,
             * and the 413 goes out once the upload is over (a response cannot be queued mid-upload) */
            x->refused = 2;
            free(x->body);
            x->body = NULL;
            x->len = x->cap = 0;
        }
        if (!x->refused) {
            if (x->len + *upload_size + 1 > x->cap) {
                size_t nc = (x->len + *upload_size + 1) * 2;
                char *p = (char *)realloc(x->body, nc);
                if (!p) return MHD_NO;
                x->body = p;
                x->cap = nc;
            }
            memcpy(x->body + x->len, upload, *upload_size);
            x->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (x->refused == 2) {
        x->refused = 1;
        serve_fail(&e, 413, NULL, NULL, "request_too_large", "the body is over the limit of %lld bytes (--max-body)", (long long)serve_g->max_body);
        return send_err(c, kind >= 0 ? (serve_kind)kind : SERVE_CHAT, &e);
    }
    if (x->refused) return MHD_YES;
    if (strcmp(url, "/health") == 0 && is_get) {
        const int up = !serve_g->loading && !serve_g->stopping;
        return send_text(c, up ? 200 : 503, "application/json",
                         strdup(serve_g->loading ? "{\"status\":\"loading\"}" : serve_g->stopping ? "{\"status\":\"stopping\"}" : "{\"status\":\"ok\"}"), !up);
    }
    if (serve_g->loading) {
        serve_fail(&e, 503, "server_error", NULL, "loading", "the models are loading; retry shortly");
        return send_err(c, kind >= 0 ? (serve_kind)kind : SERVE_CHAT, &e);
    }
    if (strcmp(url, "/") == 0 && is_get) {
        struct MHD_Response *p = MHD_create_response_from_buffer(strlen(serve_page_html), (void *)serve_page_html, MHD_RESPMEM_PERSISTENT);
        if (!p) return MHD_NO;
        MHD_add_response_header(p, "Content-Type", "text/html; charset=utf-8");
        MHD_add_response_header(p, "Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
        MHD_add_response_header(p, "X-Content-Type-Options", "nosniff");
        enum MHD_Result ok = MHD_queue_response(c, 200, p);
        MHD_destroy_response(p);
        return ok;
    }
    if (strcmp(url, "/v1/models") == 0 && is_get) return models(c);
    if (strcmp(url, "/metrics") == 0 && is_get) return send_text(c, 200, "text/plain; version=0.0.4", serve_metrics_text(serve_g), 0);
    if (kind < 0 || !is_post) {
        const int known_path = kind >= 0 || !strcmp(url, "/v1/models") || !strcmp(url, "/metrics") || !strcmp(url, "/health") || !strcmp(url, "/");
        serve_fail(&e, known_path ? 405 : 404, NULL, NULL, NULL, known_path ? "method %s is not allowed on %.100s" : "no endpoint %s %.100s", method, url);
        pthread_mutex_lock(&serve_g->metrics.mu);
        serve_g->metrics.other_requests++;
        pthread_mutex_unlock(&serve_g->metrics.mu);
        return send_text(c, e.status, "application/json", serve_error_json(&e), 0);
    }
    serve_req r;
    const int prc = kind == SERVE_TRANSCRIBE ? serve_parse_multipart(&r, MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type"), x->body, x->len, &e)
                                             : serve_parse(&r, (serve_kind)kind, x->body, x->len, &e);
    if (prc < 0) {
        serve_req_free(&r);
        return send_err(c, (serve_kind)kind, &e);
    }
    serve_model *m = r.model ? serve_find_model(serve_g, r.model) : (serve_g->n_models == 1 ? &serve_g->models[0] : NULL);
    enum MHD_Result ok;
    const int is_tok = kind == SERVE_TOKENIZE || kind == SERVE_DETOKENIZE;
    const serve_model_type need = kind == SERVE_EMBED ? SERVE_M_ENCODER : kind == SERVE_TRANSCRIBE ? SERVE_M_WHISPER : kind == SERVE_TRANSLATE ? SERVE_M_TRANSLATOR : SERVE_M_DECODER;
    if (!m) {
        if (r.model) /* a missing 'model' with several served is the request's fault (400), as a missing 'file' */
            serve_fail(&e, 404, NULL, "model", "model_not_found", "the model '%.100s' does not exist (GET /v1/models lists them)", r.model);
        else
            serve_fail(&e, 400, NULL, "model", "missing_required_parameter", "'model' is required: several models are served");
        ok = send_err(c, (serve_kind)kind, &e);
    } else if (is_tok ? model_type(m) != SERVE_M_DECODER && model_type(m) != SERVE_M_ENCODER : model_type(m) != need) {
        serve_fail(&e, 400, NULL, "model", "wrong_model_type", "model '%s' is %s; this endpoint needs %s", m->name, type_name[model_type(m)],
                   is_tok ? "a text generator or an embedding model" : type_name[need]);
        ok = send_err(c, (serve_kind)kind, &e);
    } else if (kind == SERVE_EMBED) ok = embeddings(c, m, &r, x->t0);
    else if (is_tok) ok = tokenize(c, m, &r);
    else if (kind == SERVE_TRANSCRIBE || kind == SERVE_TRANSLATE) {
        serve_reply rep = {NULL, NULL};
        if ((kind == SERVE_TRANSCRIBE ? serve_transcribe(m, serve_g, &r, x->t0, &rep, &e) : serve_translate(m, serve_g, &r, x->t0, &rep, &e)) < 0)
            ok = send_err(c, (serve_kind)kind, &e);
        else {
            serve_metrics_request(serve_g, (serve_kind)kind, 200, serve_now() - x->t0);
            ok = send_text(c, 200, rep.type, rep.body, 0);
        }
    } else ok = generate(c, m, &r, x->t0);
    serve_req_free(&r);
    return ok;
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    conn_ctx *x = (conn_ctx *)*con_cls;
    if (!x) return;
    free(x->body);
    free(x);
    *con_cls = NULL;
    __atomic_sub_fetch(&in_flight, 1, __ATOMIC_SEQ_CST);
}

int serve_host_addr(const char *host, int port, struct sockaddr_storage *ss, const char **why) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const int r = getaddrinfo(host, NULL, &hints, &res);
    if (r != 0 || !res) {
        *why = r == EAI_NONAME || r == EAI_NODATA || r == EAI_FAIL || r == EAI_AGAIN ? "not an IP address or a name this machine resolves (e.g. 127.0.0.1, ::1, 0.0.0.0, localhost)"
                                                                                     : gai_strerror(r);
        if (res) freeaddrinfo(res);
        return -1;
    }
    /* the first IPv4 answer where there is one (localhost: 127.0.0.1, as clients try first) */
    const struct addrinfo *pick = res;
    for (const struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    memset(ss, 0, sizeof *ss);
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    const int family = pick->ai_family;
    if (family == AF_INET) ((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
    else if (family == AF_INET6) ((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
    freeaddrinfo(res);
    if (family != AF_INET && family != AF_INET6) {
        *why = "not an IPv4 or IPv6 address";
        return -1;
    }
    return family;
}

struct MHD_Daemon *serve_http_start(serve_server *s, const char *host, int port, int *bound_port, serve_err *e) {
    /* poll(), not select(): descriptors past FD_SETSIZE (1024) are usual with 1000 idle clients */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_POLL;
    unsigned limit = CONN_LIMIT;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        limit = rl.rlim_cur < 2 * FD_RESERVE ? FD_RESERVE : rl.rlim_cur - FD_RESERVE < CONN_LIMIT ? (unsigned)(rl.rlim_cur - FD_RESERVE) : CONN_LIMIT;
    if (s->bind_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handler, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&s->bind_addr,
                                            MHD_OPTION_NOTIFY_COMPLETED, completed, NULL, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->idle_timeout_s,
                                            MHD_OPTION_CONNECTION_LIMIT, limit, MHD_OPTION_END);
    if (!d) return serve_fail(e, 0, NULL, NULL, NULL, "cannot listen on %s port %d: %s", host, port, strerror(errno ? errno : EADDRINUSE)), NULL;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *bound_port = di ? di->port : port;
    return d;
}

void serve_http_quiesce(struct MHD_Daemon *d) {
    MHD_socket fd = MHD_quiesce_daemon(d);
    if (fd != MHD_INVALID_SOCKET) close(fd);
}
void serve_http_stop(struct MHD_Daemon *d) {
    const double end = serve_now() + DRAIN_S;
    while (__atomic_load_n(&in_flight, __ATOMIC_SEQ_CST) > 0 && serve_now() < end) {
        const struct timespec ts = {0, 10000000}; /* 10 ms */
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(d);
}
