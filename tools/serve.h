/* attn serve: an OpenAI-compatible HTTP server (issue 20). Shared declarations of
 *   tools/cmd_serve.c    options, model loading, signals, start / stop
 *   tools/serve_parse.c  request bodies (JSON) -> serve_req, with OpenAI-style errors (fuzzed:
 *                        tests/fuzz/fuzz_serve_request.c); response JSON helpers
 *   tools/serve_sched.c  the decoder scheduler (continuous batching over attn_llama_batch) and
 *                        the embedding worker (requests of several clients in one batch)
 *   tools/serve_http.c   libmicrohttpd handlers: routing, auth, body limits, SSE, metrics
 *   tools/serve_multipart.c  multipart/form-data bodies (POST /v1/audio/transcriptions) ->
 *                        serve_req (fuzzed with serve_parse)
 *   tools/serve_page.c   the chat page served at GET /
 *   tools/serve_ct2.c    Whisper transcription and CTranslate2 translation (one request at a
 *                        time per model, behind a bounded gate) */
#ifndef ATTN_TOOLS_SERVE_H
#define ATTN_TOOLS_SERVE_H

#include "attn_bert.h"
#include "attn_bpe.h"
#include "attn_ct2_transformer.h"
#include "attn_llama.h"
#include "attn_whisper.h"

#include <pthread.h>
#include <sys/socket.h>
#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ errors and requests */

typedef struct {
    int status;         /* HTTP status */
    char message[512];
    const char *type;   /* "invalid_request_error", "server_error", ... */
    char param[64];     /* "" = null */
    const char *code;   /* NULL = null */
} serve_err;

/* serve_fail: fill e (printf-style message); returns -1 */
int serve_fail(serve_err *e, int status, const char *type, const char *param, const char *code, const char *fmt, ...);

typedef enum { SERVE_CHAT = 0, SERVE_COMPLETION, SERVE_EMBED, SERVE_TOKENIZE, SERVE_DETOKENIZE, SERVE_TRANSCRIBE, SERVE_TRANSLATE } serve_kind;
#define SERVE_NKINDS 7

/* response_format of a transcription */
typedef enum { SERVE_FMT_JSON = 0, SERVE_FMT_TEXT, SERVE_FMT_VERBOSE_JSON, SERVE_FMT_SRT, SERVE_FMT_VTT } serve_format;

typedef struct {
    serve_kind kind;
    char *model;
    /* chat / completion */
    attn_chat_message *msgs; /* role and content malloc'ed */
    int64_t n_msgs;
    char *prompt;
    int64_t max_tokens;      /* -1: not given */
    double temperature, top_p;
    int has_seed;
    uint64_t seed;
    char **stop;
    int64_t n_stop;
    int stream, include_usage;
    /* embeddings: texts or token arrays */
    char **texts;
    int64_t *text_lens, n_texts;
    int32_t **tok_arrays;
    int64_t *tok_lens, n_tok_arrays;
    int base64;
    /* tokenize / detokenize */
    char *content;
    int add_special;
    int32_t *tokens;
    int64_t n_tokens;
    /* transcription (multipart): the uploaded file's bytes and name; temperature above */
    char *audio;
    size_t audio_len;
    char *filename;
    serve_format format;
    /* translation: the sources are texts[n_texts] (space-separated tokens) */
    int64_t beam, n_best, max_length, min_length, max_input_length;
    double length_penalty, repetition_penalty;
    int replace_unknowns;
} serve_req;

/* serve_parse: parse a request body of the given kind. Returns 0, or -1 with e set (400 with
 * the offending parameter named). r is always safe to pass to serve_req_free. */
int serve_parse(serve_req *r, serve_kind kind, const char *body, size_t len, serve_err *e);
void serve_req_free(serve_req *r);
/* serve_parse_multipart: a POST /v1/audio/transcriptions body (multipart/form-data with the
 * boundary of content_type, RFC 7578): fields file (required), model, response_format (json,
 * text, verbose_json, srt, vtt), language (en), temperature ([0, 1]); any other field is a 400
 * naming it. Returns 0, or -1 with e set. r is always safe to pass to serve_req_free. */
int serve_parse_multipart(serve_req *r, const char *content_type, const char *body, size_t len, serve_err *e);
/* serve_error_json: {"error": {"message", "type", "param", "code"}} (malloc'ed) */
char *serve_error_json(const serve_err *e);
/* serve_b64: base64 of n bytes (malloc'ed, NUL-terminated) */
char *serve_b64(const void *p, size_t n);

/* ------------------------------------------------------------------ models */

typedef struct serve_sched serve_sched;
typedef struct serve_embedder serve_embedder;

typedef struct serve_gate serve_gate;

typedef struct {
    char name[128];
    const char *path;
    int is_decoder, is_whisper, is_translator; /* none of them: a sentence-transformers encoder */
    /* decoders */
    attn_llama *llama;
    attn_bpe *own_tok;
    const attn_bpe *tok;
    char *default_system; /* the chat template's default system turn (NULL: none) */
    int chat_ok;          /* a ChatML template attn runs */
    char chat_why[256];   /* why not */
    int64_t ctx;          /* positions per sequence (--ctx, at most the model's) */
    serve_sched *sched;
    /* encoders */
    attn_bert *bert;
    serve_embedder *emb;
    /* Whisper, CTranslate2 translators: one request at a time */
    attn_whisper *whisper;
    attn_translator *translator;
    serve_gate *gate;
    long created;
} serve_model;

/* ------------------------------------------------------------------ metrics */

#define SERVE_NBUCKETS 12
extern const double serve_buckets[SERVE_NBUCKETS];
typedef struct {
    pthread_mutex_t mu;
    uint64_t requests[SERVE_NKINDS][6]; /* [kind][status class: 2xx 4xx 5xx 401 413 503] */
    uint64_t other_requests;
    uint64_t prompt_tokens, gen_tokens, embed_inputs, audio_seconds_x1000;
    uint64_t prompt_cached_tokens; /* prompt tokens a slot already held (the prompt cache): not recomputed */
    uint64_t lat_count[SERVE_NKINDS], lat_bucket[SERVE_NKINDS][SERVE_NBUCKETS];
    double lat_sum[SERVE_NKINDS];
    uint64_t cancelled;
} serve_metrics;

/* ------------------------------------------------------------------ the server */

typedef struct {
    serve_model *models;
    int n_models;
    int64_t parallel, ctx, threads, max_body, queue;
    double timeout_s;     /* a request's whole time, queue included */
    int idle_timeout_s;   /* a connection silent this long is closed */
    double grace_s;       /* on SIGTERM: in-flight requests get this long to finish */
    const char *api_key;
    struct sockaddr_storage bind_addr; /* --host and --port, resolved once (serve_host_addr) */
    int bind_family;                   /* AF_INET or AF_INET6 */
    volatile int loading, stopping;
    serve_metrics metrics;
} serve_server;

extern serve_server *serve_g; /* the one server of this process */

serve_model *serve_find_model(serve_server *s, const char *name);
void serve_metrics_request(serve_server *s, serve_kind k, int status, double seconds);
char *serve_metrics_text(serve_server *s);

/* ------------------------------------------------------------------ generation tasks */

typedef struct serve_task serve_task;
struct serve_task {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;
    /* input (owned) */
    int32_t *prompt;
    int64_t n_prompt;
    attn_generate_opts opts;
    char **stop;
    /* output, under mu */
    char *text;
    size_t len, cap;
    size_t *ends;      /* [n_pieces]: where each appended piece (one token's text) ends in text */
    size_t n_pieces, pieces_cap;
    int done;       /* 1: finished (finish / error below) */
    int err_status; /* != 0: failed with err_msg */
    char err_msg[256];
    attn_finish_reason finish;
    int64_t n_gen;
    volatile int cancelled;
    double t_submit, t_first;
    /* scheduler side */
    serve_task *next;
    int64_t slot, fed;
    attn_generation *g;
};

/* serve_task_new: a task for prompt ids (copied) with opts (stop strings copied). NULL: out of memory. */
serve_task *serve_task_new(const int32_t *prompt, int64_t n, const attn_generate_opts *o);
void serve_task_release(serve_task *t);
/* serve_submit: queue a task for a decoder model; 0, or -1 with e (503 queue full / stopping). */
int serve_submit(serve_model *m, serve_task *t, serve_err *e);
/* serve_sched_start / stop: the scheduler thread of a decoder model. stop: in-flight tasks get
 * grace_s seconds, then are cancelled; queued ones are refused. */
int serve_sched_start(serve_model *m, serve_server *s);
void serve_sched_stop(serve_model *m);
/* serve_sched_stats: queued and running sequences. */
void serve_sched_stats(serve_model *m, int64_t *queued, int64_t *busy);

/* embeddings: out [n, E] for texts (or token arrays when tok_arrays); tokens: prompt tokens
 * counted. Runs on the model's embedding worker, batched with other clients' requests. */
int serve_embed(serve_model *m, serve_server *s, const serve_req *r, float *out, int64_t *tokens, serve_err *e);
int serve_embedder_start(serve_model *m, serve_server *s);
void serve_embedder_stop(serve_model *m);

/* Whisper and translators (tools/serve_ct2.c): a reply body of the given content type. */
typedef struct {
    const char *type; /* "application/json", "text/plain; charset=utf-8", ... */
    char *body;       /* malloc'ed, NUL-terminated */
} serve_reply;
/* serve_gate_new / free: the one-at-a-time gate of a model (NULL: out of memory) */
serve_gate *serve_gate_new(void);
void serve_gate_free(serve_gate *g);
/* serve_transcribe: r (SERVE_TRANSCRIBE) with Whisper model m, as attn transcribe (beam 5, the
 * default decoding rules; timestamps for verbose_json, srt and vtt). Waits its turn at most
 * until t0 + --timeout with at most --queue others waiting (503 / 504 otherwise).
 * 0 and out set, or -1 with e (400 for audio that cannot be decoded). */
int serve_transcribe(serve_model *m, serve_server *s, const serve_req *r, double t0, serve_reply *out, serve_err *e);
/* serve_translate: r (SERVE_TRANSLATE) with translator m, as attn translate. Same waiting. */
int serve_translate(serve_model *m, serve_server *s, const serve_req *r, double t0, serve_reply *out, serve_err *e);

/* the chat page of GET / (tools/serve_page.c), NUL-terminated HTML */
extern const char serve_page_html[];

/* ------------------------------------------------------------------ HTTP */

struct MHD_Daemon;
/* host (an IPv4 / IPv6 address without brackets, or a name such as localhost) and port into
 * *ss; returns AF_INET or AF_INET6, or -1 with *why saying what is wrong */
int serve_host_addr(const char *host, int port, struct sockaddr_storage *ss, const char **why);
/* listen on s->bind_addr (host: its spelling for messages) */
struct MHD_Daemon *serve_http_start(serve_server *s, const char *host, int port, int *bound_port, serve_err *e);
void serve_http_quiesce(struct MHD_Daemon *d);
/* serve_http_stop: after the schedulers have stopped (every task has its ending), waits up to a few
 * seconds for the requests still being answered to send their last bytes, then closes everything */
void serve_http_stop(struct MHD_Daemon *d);

double serve_now(void);

#endif
