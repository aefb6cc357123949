/* attn serve: request bodies (JSON, OpenAI shapes) -> serve_req, and error bodies. Pure
 * functions of the body (no server state), fuzzed by tests/fuzz/fuzz_serve_request.c.
 * Every field is checked for type and range; a field the server does not implement is a 400
 * naming it (never silently ignored). */
#include "serve.h"

#include "attn_utf8.h"
#include "attn_wordpiece.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the largest seed: 2^53 - 1, the largest integer a JSON double carries exactly (RFC 7493) */
#define SEED_MAX ((int64_t)9007199254740991)

int serve_fail(serve_err *e, int status, const char *type, const char *param, const char *code, const char *fmt, ...) {
    e->status = status;
    e->type = type ? type : "invalid_request_error";
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

char *serve_error_json(const serve_err *e) {
    cJSON *root = cJSON_CreateObject(), *o = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(o, "message", e->message);
    cJSON_AddStringToObject(o, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0]) cJSON_AddStringToObject(o, "param", e->param);
    else cJSON_AddNullToObject(o, "param");
    if (e->code) cJSON_AddStringToObject(o, "code", e->code);
    else cJSON_AddNullToObject(o, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

char *serve_b64(const void *p, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = (const unsigned char *)p;
    char *o = (char *)malloc(4 * ((n + 2) / 3) + 1);
    if (!o) return NULL;
    size_t k = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 | s[i + 2];
        o[k++] = A[v >> 18], o[k++] = A[(v >> 12) & 63], o[k++] = A[(v >> 6) & 63], o[k++] = A[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)s[i] << 16 | (i + 1 < n ? (uint32_t)s[i + 1] << 8 : 0);
        o[k++] = A[v >> 18], o[k++] = A[(v >> 12) & 63];
        o[k++] = i + 1 < n ? A[(v >> 6) & 63] : '=';
        o[k++] = '=';
    }
    o[k] = 0;
    return o;
}

void serve_req_free(serve_req *r) {
    if (!r) return;
    free(r->model);
    for (int64_t i = 0; i < r->n_msgs; i++) {
        free((char *)r->msgs[i].role);
        free((char *)r->msgs[i].content);
    }
    free(r->msgs);
    free(r->prompt);
    for (int64_t i = 0; i < r->n_stop; i++) free(r->stop[i]);
    free(r->stop);
    for (int64_t i = 0; i < r->n_texts; i++) free(r->texts[i]);
    free(r->texts);
    free(r->text_lens);
    for (int64_t i = 0; i < r->n_tok_arrays; i++) free(r->tok_arrays[i]);
    free(r->tok_arrays);
    free(r->tok_lens);
    free(r->content);
    free(r->tokens);
    free(r->audio);
    free(r->filename);
    memset(r, 0, sizeof *r);
}

/* a JSON string that must be UTF-8 (cJSON copies raw bytes; \u escapes are already UTF-8) */
static int get_text(const cJSON *v, const char *param, char **out, serve_err *e) {
    if (!cJSON_IsString(v)) return serve_fail(e, 400, NULL, param, "invalid_type", "'%s' must be a string", param);
    size_t n = strlen(v->valuestring), bad;
    if (attn_tokenizer_validate_utf8(v->valuestring, n, &bad) < 0)
        return serve_fail(e, 400, NULL, param, NULL, "'%s' is not valid UTF-8 (byte offset %zu)", param, bad);
    *out = strdup(v->valuestring);
    return *out ? 0 : serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
}

/* the byte offset where '[' / '{' outside strings first opens level limit + 1 (cJSON refuses
 * values nested deeper than CJSON_NESTING_LIMIT), or -1 */
static long too_deep(const char *s, size_t len, int limit) {
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < len; i++) {
        const char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
        } else if (c == '"') in_str = 1;
        else if (c == '[' || c == '{') {
            if (++depth > limit) return (long)i;
        } else if ((c == ']' || c == '}') && depth > 0) depth--;
    }
    return -1;
}

/* x as the shortest decimal that reads back as the same double (0.1, not 0.10000000000000001) */
static const char *num_text(char *buf, size_t n, double x) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* a name that an object of v (v itself, or one nested in it) holds twice, or NULL; *oom set when
 * the check could not allocate. RFC 8259 leaves the value of a repeated name open (cJSON finds the
 * first, Python and JavaScript keep the last): a request that repeats one is refused, not guessed. */
static const char *dup_name(const cJSON *v, int *oom) {
    if (!cJSON_IsObject(v) && !cJSON_IsArray(v)) return NULL;
    size_t n = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        const char *d = dup_name(c, oom);
        if (d || *oom) return d;
        n++;
    }
    if (!cJSON_IsObject(v) || n < 2) return NULL;
    const char **names = (const char **)malloc(n * sizeof *names);
    if (!names) {
        *oom = 1;
        return NULL;
    }
    size_t k = 0;
    for (const cJSON *c = v->child; c; c = c->next) names[k++] = c->string ? c->string : "";
    qsort(names, n, sizeof *names, cmp_name);
    const char *d = NULL;
    for (size_t i = 1; i < n && !d; i++)
        if (strcmp(names[i - 1], names[i]) == 0) d = names[i];
    free(names);
    return d;
}

/* a 400 invalid_value: v is outside range ("[1, 16777216]", "(0, 1]"); v shown as an integer when
 * integral (4611686018427387904, not 4.6116860184273879e+18) or else as the shortest decimal that
 * reads back; +-inf (a JSON number beyond a double's range, 1e309, to cJSON) said so; note appended */
static int out_of_range(const cJSON *v, const char *param, const char *range, int integral, const char *note, serve_err *e) {
    const double x = v->valuedouble;
    char got[64];
    if (isinf(x)) snprintf(got, sizeof got, "a number beyond a double's range (%s)", x > 0 ? "+inf" : "-inf");
    else if (integral && fabs(x) < 1e21) snprintf(got, sizeof got, "%.0f", x);
    else num_text(got, sizeof got, x);
    return serve_fail(e, 400, NULL, param, "invalid_value", "'%s' must be in %s, got %s%s", param, range, got, note);
}

/* lo, hi within +-(2^53 - 1) (I-JSON, RFC 7493: the integers a double holds exactly), so the compare is exact */
static int get_int(const cJSON *v, const char *param, int64_t lo, int64_t hi, int64_t *out, serve_err *e) {
    const int inf = cJSON_IsNumber(v) && isinf(v->valuedouble);
    if (!inf && (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble)))
        return serve_fail(e, 400, NULL, param, "invalid_type", "'%s' must be an integer", param);
    if (inf || v->valuedouble < (double)lo || v->valuedouble > (double)hi) {
        char range[64];
        snprintf(range, sizeof range, "[%lld, %lld]", (long long)lo, (long long)hi);
        return out_of_range(v, param, range, 1, "", e);
    }
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int get_num(const cJSON *v, const char *param, double lo, double hi, int lo_open, double *out, serve_err *e) {
    if (!cJSON_IsNumber(v) || isnan(v->valuedouble)) return serve_fail(e, 400, NULL, param, "invalid_type", "'%s' must be a number", param);
    const double x = v->valuedouble;
    /* an open bound holds for the float32 the sampler gets, too (top_p 1e-300 became 0: a 500) */
    const int as_f32 = lo_open && x != lo && (float)x == (float)lo;
    if (x > hi || x < lo || (lo_open && x == lo) || as_f32) {
        char range[80], lt[32], ht[32], note[48] = "";
        snprintf(range, sizeof range, "%c%s, %s]", lo_open ? '(' : '[', num_text(lt, sizeof lt, lo), num_text(ht, sizeof ht, hi));
        if (as_f32 && x >= lo && x <= hi) snprintf(note, sizeof note, " (%.9g as a float32)", (double)(float)x);
        return out_of_range(v, param, range, 0, note, e);
    }
    *out = x;
    return 0;
}

static int get_bool(const cJSON *v, const char *param, int *out, serve_err *e) {
    if (!cJSON_IsBool(v)) return serve_fail(e, 400, NULL, param, "invalid_type", "'%s' must be a boolean", param);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* an array of token ids (each in [0, 2^31)) */
static int get_ids(const cJSON *v, const char *param, int32_t **out, int64_t *n, serve_err *e) {
    if (!cJSON_IsArray(v)) return serve_fail(e, 400, NULL, param, "invalid_type", "'%s' must be an array of token ids", param);
    int64_t k = cJSON_GetArraySize(v), i = 0;
    *out = (int32_t *)malloc(sizeof(int32_t) * (size_t)(k ? k : 1));
    if (!*out) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    *n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, v) {
        int64_t id;
        if (get_int(x, param, 0, INT32_MAX, &id, e) < 0) return -1;
        (*out)[i++] = (int32_t)id;
        *n = i;
    }
    return 0;
}

/* message content: a string, or an array of {"type": "text", "text": ...} parts (joined) */
static int get_content(const cJSON *v, char **out, serve_err *e) {
    if (cJSON_IsString(v)) return get_text(v, "messages.content", out, e);
    if (!cJSON_IsArray(v)) return serve_fail(e, 400, NULL, "messages.content", "invalid_type", "a message's 'content' must be a string or an array of text parts");
    size_t total = 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, v) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(p, "type"), *tx = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "text") != 0 || !cJSON_IsString(tx))
            return serve_fail(e, 400, NULL, "messages.content", "unsupported_content", "content parts must be {\"type\": \"text\", \"text\": ...} (attn serves text models)");
        total += strlen(tx->valuestring);
    }
    char *s = (char *)malloc(total);
    if (!s) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    s[0] = 0;
    cJSON_ArrayForEach(p, v) strcat(s, cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring);
    size_t bad;
    if (attn_tokenizer_validate_utf8(s, strlen(s), &bad) < 0) {
        free(s);
        return serve_fail(e, 400, NULL, "messages.content", NULL, "a message's content is not valid UTF-8 (byte offset %zu)", bad);
    }
    *out = s;
    return 0;
}

static int known(const char *key, const char *const *list) {
    for (; *list; list++)
        if (strcmp(key, *list) == 0) return 1;
    return 0;
}

/* sampling, limits, stop, stream: shared by chat and completions */
static int parse_generation(serve_req *r, const cJSON *root, serve_err *e) {
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "max_tokens")) && !cJSON_IsNull(v) && get_int(v, "max_tokens", 1, 1 << 24, &r->max_tokens, e) < 0) return -1;
    const int64_t given = r->max_tokens;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "max_completion_tokens")) && !cJSON_IsNull(v)) {
        if (get_int(v, "max_completion_tokens", 1, 1 << 24, &r->max_tokens, e) < 0) return -1;
        /* the same limit under its two names: two different values would leave one a guess */
        if (given > 0 && given != r->max_tokens)
            return serve_fail(e, 400, NULL, "max_completion_tokens", "invalid_value",
                              "'max_tokens' (%lld) and 'max_completion_tokens' (%lld) name the same limit; give one", (long long)given,
                              (long long)r->max_tokens);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "temperature")) && !cJSON_IsNull(v) && get_num(v, "temperature", 0, 2, 0, &r->temperature, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "top_p")) && !cJSON_IsNull(v) && get_num(v, "top_p", 0, 1, 1, &r->top_p, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "seed")) && !cJSON_IsNull(v)) {
        int64_t s;
        if (get_int(v, "seed", -SEED_MAX, SEED_MAX, &s, e) < 0) return -1;
        r->has_seed = 1;
        r->seed = (uint64_t)s;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "n")) && !cJSON_IsNull(v)) {
        int64_t n;
        if (get_int(v, "n", 1, 1 << 20, &n, e) < 0) return -1;
        if (n != 1) return serve_fail(e, 400, NULL, "n", "unsupported_value", "'n' must be 1 (one choice per request); send several requests instead");
    }
    static const char *const zero_ok[] = {"presence_penalty", "frequency_penalty", NULL};
    for (int i = 0; zero_ok[i]; i++)
        if ((v = cJSON_GetObjectItemCaseSensitive(root, zero_ok[i])) && !cJSON_IsNull(v)) {
            double d;
            if (get_num(v, zero_ok[i], -2, 2, 0, &d, e) < 0) return -1;
            if (d != 0) return serve_fail(e, 400, NULL, zero_ok[i], "unsupported_value", "'%s' is not supported (only 0)", zero_ok[i]);
        }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "logprobs")) && !cJSON_IsNull(v)) {
        int b = 0;
        if (cJSON_IsBool(v) ? get_bool(v, "logprobs", &b, e) < 0 : 0) return -1;
        if (!cJSON_IsBool(v) || b) return serve_fail(e, 400, NULL, "logprobs", "unsupported_value", "'logprobs' is not supported");
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "stop")) && !cJSON_IsNull(v)) {
        int64_t n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 1;
        if (!cJSON_IsString(v) && !cJSON_IsArray(v)) return serve_fail(e, 400, NULL, "stop", "invalid_type", "'stop' must be a string or an array of strings");
        if (n > 4) return serve_fail(e, 400, NULL, "stop", "invalid_value", "'stop' holds at most 4 strings, got %lld", (long long)n);
        r->stop = (char **)calloc((size_t)(n ? n : 1), sizeof(char *));
        if (!r->stop) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        const cJSON *s;
        if (cJSON_IsString(v)) {
            if (get_text(v, "stop", &r->stop[0], e) < 0) return -1;
            r->n_stop = 1;
        } else
            cJSON_ArrayForEach(s, v) {
                if (get_text(s, "stop", &r->stop[r->n_stop], e) < 0) return -1;
                r->n_stop++;
            }
        for (int64_t i = 0; i < r->n_stop; i++)
            if (!r->stop[i][0]) return serve_fail(e, 400, NULL, "stop", "invalid_value", "a stop string is empty");
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "stream")) && !cJSON_IsNull(v) && get_bool(v, "stream", &r->stream, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "stream_options")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsObject(v)) return serve_fail(e, 400, NULL, "stream_options", "invalid_type", "'stream_options' must be an object");
        if (!r->stream) return serve_fail(e, 400, NULL, "stream_options", "invalid_value", "'stream_options' is only allowed with 'stream': true");
        const cJSON *x;
        cJSON_ArrayForEach(x, v) {
            if (strcmp(x->string, "include_usage") == 0) {
                if (get_bool(x, "stream_options.include_usage", &r->include_usage, e) < 0) return -1;
            } else
                return serve_fail(e, 400, NULL, "stream_options", "unsupported_parameter", "unsupported stream option '%s'", x->string);
        }
    }
    return 0;
}

static int parse_chat(serve_req *r, const cJSON *root, serve_err *e) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "messages"), *x;
    if (!m) return serve_fail(e, 400, NULL, "messages", "missing_required_parameter", "'messages' is required");
    if (!cJSON_IsArray(m)) return serve_fail(e, 400, NULL, "messages", "invalid_type", "'messages' must be an array of messages");
    if (cJSON_GetArraySize(m) < 1) /* as attn.LLM.chat([]): ValueError */
        return serve_fail(e, 400, NULL, "messages", "invalid_value", "'messages' is empty: give at least one message");
    r->msgs = (attn_chat_message *)calloc((size_t)cJSON_GetArraySize(m), sizeof(attn_chat_message));
    if (!r->msgs) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    cJSON_ArrayForEach(x, m) {
        if (!cJSON_IsObject(x)) return serve_fail(e, 400, NULL, "messages", "invalid_type", "message %lld is not an object", (long long)r->n_msgs);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(x, "role"), *content = cJSON_GetObjectItemCaseSensitive(x, "content"), *f;
        cJSON_ArrayForEach(f, x) if (strcmp(f->string, "role") && strcmp(f->string, "content") && strcmp(f->string, "name"))
            return serve_fail(e, 400, NULL, "messages", "unsupported_parameter", "message %lld: field '%s' is not supported", (long long)r->n_msgs, f->string);
        if (!cJSON_IsString(role)) return serve_fail(e, 400, NULL, "messages.role", "invalid_type", "message %lld has no string 'role'", (long long)r->n_msgs);
        const char *rl = role->valuestring;
        if (strcmp(rl, "developer") == 0) rl = "system"; /* OpenAI's newer name of the system turn */
        if (strcmp(rl, "system") && strcmp(rl, "user") && strcmp(rl, "assistant"))
            return serve_fail(e, 400, NULL, "messages.role", "invalid_value", "message %lld: role '%.40s' is not supported (system, developer, user, assistant)",
                              (long long)r->n_msgs, role->valuestring);
        if (!content) return serve_fail(e, 400, NULL, "messages.content", "missing_required_parameter", "message %lld has no 'content'", (long long)r->n_msgs);
        char *c = NULL;
        if (get_content(content, &c, e) < 0) return -1;
        r->msgs[r->n_msgs].content = c;
        r->msgs[r->n_msgs].role = strdup(rl);
        r->n_msgs++;
        if (!r->msgs[r->n_msgs - 1].role) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    return 0;
}

static int parse_embed(serve_req *r, const cJSON *root, serve_err *e) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input"), *x, *v;
    if (!in) return serve_fail(e, 400, NULL, "input", "missing_required_parameter", "'input' is required");
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "encoding_format")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v) || (strcmp(v->valuestring, "float") && strcmp(v->valuestring, "base64")))
            return serve_fail(e, 400, NULL, "encoding_format", "invalid_value", "'encoding_format' must be \"float\" or \"base64\"");
        r->base64 = strcmp(v->valuestring, "base64") == 0;
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "dimensions")) && !cJSON_IsNull(v))
        return serve_fail(e, 400, NULL, "dimensions", "unsupported_parameter", "'dimensions' is not supported (the model's width is fixed)");
    const int64_t n = cJSON_IsArray(in) ? cJSON_GetArraySize(in) : 1;
    if (cJSON_IsArray(in) && n == 0) return serve_fail(e, 400, NULL, "input", "invalid_value", "'input' is an empty array");
    if (n > 2048) return serve_fail(e, 400, NULL, "input", "invalid_value", "'input' holds at most 2048 items, got %lld", (long long)n);
    /* token arrays: an array of integers (one input) or an array of arrays */
    const cJSON *first = cJSON_IsArray(in) ? in->child : NULL;
    if (first && (cJSON_IsNumber(first) || cJSON_IsArray(first))) {
        const int nested = cJSON_IsArray(first);
        const int64_t k = nested ? n : 1;
        r->tok_arrays = (int32_t **)calloc((size_t)k, sizeof(int32_t *));
        r->tok_lens = (int64_t *)calloc((size_t)k, sizeof(int64_t));
        if (!r->tok_arrays || !r->tok_lens) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
        if (!nested) {
            r->n_tok_arrays = 1;
            if (get_ids(in, "input", &r->tok_arrays[0], &r->tok_lens[0], e) < 0) return -1;
        } else
            cJSON_ArrayForEach(x, in) {
                r->n_tok_arrays++;
                if (get_ids(x, "input", &r->tok_arrays[r->n_tok_arrays - 1], &r->tok_lens[r->n_tok_arrays - 1], e) < 0) return -1;
            }
        for (int64_t i = 0; i < r->n_tok_arrays; i++)
            if (r->tok_lens[i] == 0) return serve_fail(e, 400, NULL, "input", "invalid_value", "token array %lld is empty", (long long)i);
        return 0;
    }
    r->texts = (char **)calloc((size_t)n, sizeof(char *));
    r->text_lens = (int64_t *)calloc((size_t)n, sizeof(int64_t));
    if (!r->texts || !r->text_lens) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    if (cJSON_IsString(in)) {
        r->n_texts = 1;
        if (get_text(in, "input", &r->texts[0], e) < 0) return -1;
    } else if (cJSON_IsArray(in)) {
        cJSON_ArrayForEach(x, in) {
            if (!cJSON_IsString(x)) return serve_fail(e, 400, NULL, "input", "invalid_type", "'input' must be a string, an array of strings or of token arrays");
            if (get_text(x, "input", &r->texts[r->n_texts], e) < 0) return -1;
            r->n_texts++;
        }
    } else
        return serve_fail(e, 400, NULL, "input", "invalid_type", "'input' must be a string, an array of strings or of token arrays");
    for (int64_t i = 0; i < r->n_texts; i++) r->text_lens[i] = (int64_t)strlen(r->texts[i]);
    return 0;
}

/* POST /v1/translations/text: "input" a string of space-separated tokens, an array of them, or
 * an array of token arrays (each token a non-empty string without white space); decoding
 * options as attn translate's (same defaults) */
static int parse_translate(serve_req *r, const cJSON *root, serve_err *e) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input"), *x, *v;
    if (!in) return serve_fail(e, 400, NULL, "input", "missing_required_parameter", "'input' is required");
    const int64_t n = cJSON_IsArray(in) ? cJSON_GetArraySize(in) : 1;
    if (!cJSON_IsArray(in) && !cJSON_IsString(in))
        return serve_fail(e, 400, NULL, "input", "invalid_type", "'input' must be a string, an array of strings or of token arrays");
    if (n == 0) return serve_fail(e, 400, NULL, "input", "invalid_value", "'input' is an empty array");
    if (n > 2048) return serve_fail(e, 400, NULL, "input", "invalid_value", "'input' holds at most 2048 items, got %lld", (long long)n);
    r->texts = (char **)calloc((size_t)n, sizeof(char *));
    r->text_lens = (int64_t *)calloc((size_t)n, sizeof(int64_t));
    if (!r->texts || !r->text_lens) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    const cJSON *one = cJSON_IsString(in) ? in : NULL;
    for (x = one ? one : in->child; x; x = one ? NULL : x->next) {
        char **dst = &r->texts[r->n_texts];
        if (cJSON_IsString(x)) {
            if (get_text(x, "input", dst, e) < 0) return -1;
        } else if (cJSON_IsArray(x)) { /* tokens: joined with single spaces */
            size_t total = 1;
            const cJSON *t;
            cJSON_ArrayForEach(t, x) {
                if (!cJSON_IsString(t) || !t->valuestring[0] || strpbrk(t->valuestring, " \t\n\r\v\f"))
                    return serve_fail(e, 400, NULL, "input", "invalid_value", "input %lld: a token must be a non-empty string without white space", (long long)r->n_texts);
                total += strlen(t->valuestring) + 1;
            }
            if (!(*dst = (char *)malloc(total))) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
            size_t k = 0;
            cJSON_ArrayForEach(t, x) k += (size_t)sprintf(*dst + k, k ? " %s" : "%s", t->valuestring);
            (*dst)[k] = 0;
            size_t bad;
            if (attn_tokenizer_validate_utf8(*dst, k, &bad) < 0) {
                free(*dst);
                *dst = NULL;
                return serve_fail(e, 400, NULL, "input", NULL, "input %lld is not valid UTF-8 (byte offset %zu)", (long long)r->n_texts, bad);
            }
        } else
            return serve_fail(e, 400, NULL, "input", "invalid_type", "'input' must be a string, an array of strings or of token arrays");
        r->text_lens[r->n_texts] = (int64_t)strlen(*dst);
        r->n_texts++;
    }
    r->beam = 1, r->n_best = 1, r->max_length = 256, r->min_length = 1, r->max_input_length = 1024;
    r->length_penalty = 1, r->repetition_penalty = 1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "beam_size")) && get_int(v, "beam_size", 1, 256, &r->beam, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "n_best")) && get_int(v, "n_best", 1, 256, &r->n_best, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "max_length")) && get_int(v, "max_length", 1, 100000, &r->max_length, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "min_length")) && get_int(v, "min_length", 0, 100000, &r->min_length, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "max_input_length")) && get_int(v, "max_input_length", 0, 1 << 30, &r->max_input_length, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "length_penalty")) && get_num(v, "length_penalty", 0, 1e6, 0, &r->length_penalty, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "repetition_penalty")) && get_num(v, "repetition_penalty", 0, 1e6, 1, &r->repetition_penalty, e) < 0) return -1;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "replace_unknowns")) && get_bool(v, "replace_unknowns", &r->replace_unknowns, e) < 0) return -1;
    if (r->n_best > r->beam)
        return serve_fail(e, 400, NULL, "n_best", "invalid_value", "'n_best' (%lld) cannot exceed 'beam_size' (%lld)", (long long)r->n_best, (long long)r->beam);
    if (r->min_length > r->max_length)
        return serve_fail(e, 400, NULL, "min_length", "invalid_value", "'min_length' (%lld) cannot exceed 'max_length' (%lld)", (long long)r->min_length,
                          (long long)r->max_length);
    return 0;
}

static int hex4(const char *p, const char *end, unsigned *v) {
    if (end - p < 4) return 0;
    unsigned x = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        x = x << 4 | (unsigned)(c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 99);
        if (x & ~0xffffu) return 0;
    }
    *v = x;
    return 1;
}

/* the byte offset of the first \uXXXX escape that is a lone UTF-16 surrogate (a high one not
 * followed by a low one, or a low one alone) or \u0000 (*nul set), or -1. JSON text may spell
 * both (RFC 8259 8.2), but a lone surrogate is not a character (cJSON refuses the body, and the
 * generic message hid why) and cJSON's C strings end at a NUL (a string was silently cut there:
 * "ab\u0000cd" embedded as "ab") */
static long bad_escape(const char *body, size_t len, int *nul) {
    *nul = 0;
    const char *end = body + len;
    for (const char *p = body; p + 1 < end; p++) {
        if (*p != '\\') continue;
        if (p[1] != 'u') {
            p++; /* an escaped character (\\ included) */
            continue;
        }
        unsigned v, w;
        if (!hex4(p + 2, end, &v)) continue;
        if (v == 0) {
            *nul = 1;
            return (long)(p - body);
        }
        if (v >= 0xDC00 && v <= 0xDFFF) return (long)(p - body);
        if (v >= 0xD800 && v <= 0xDBFF) {
            if (!(end - p >= 12 && p[6] == '\\' && p[7] == 'u' && hex4(p + 8, end, &w) && w >= 0xDC00 && w <= 0xDFFF)) return (long)(p - body);
            p += 11;
        } else
            p += 5;
    }
    return -1;
}

int serve_parse(serve_req *r, serve_kind kind, const char *body, size_t len, serve_err *e) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->max_tokens = -1;
    r->temperature = 1.0;
    r->top_p = 1.0;
    r->add_special = 1;
    if (kind == SERVE_TRANSCRIBE) return serve_fail(e, 400, NULL, NULL, "invalid_multipart", "transcriptions take a multipart/form-data body, not JSON");
    if (!body || len == 0) return serve_fail(e, 400, NULL, NULL, "invalid_json", "the request has no body (a JSON object is expected)");
    const char *end = NULL;
    int nul = 0;
    const long esc = bad_escape(body, len, &nul);
    if (esc >= 0 && nul)
        return serve_fail(e, 400, NULL, NULL, "invalid_value", "the escape \\u0000 at byte %ld puts a NUL character in a string; strings cannot hold one "
                          "(it would end the text there)", esc);
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root) {
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        if (esc >= 0)
            return serve_fail(e, 400, NULL, NULL, "invalid_json", "the body is not valid JSON: the escape %.6s at byte %ld is a lone UTF-16 surrogate "
                              "(half of a pair: not a character a string can hold)", body + esc, esc);
        const long deep = too_deep(body, len, CJSON_NESTING_LIMIT);
        if (deep >= 0 && (size_t)deep <= at)
            return serve_fail(e, 400, NULL, NULL, "invalid_json", "the body's JSON nests arrays / objects deeper than %d levels (at byte %ld)",
                              CJSON_NESTING_LIMIT, deep);
        return serve_fail(e, 400, NULL, NULL, "invalid_json", "the body is not valid JSON (error near byte %zu of %zu)", at, len);
    }
    /* one JSON value and nothing after it but white space (cJSON stops at the value's end) */
    size_t after = end && end >= body && end <= body + len ? (size_t)(end - body) : len;
    while (after < len && (body[after] == ' ' || body[after] == '\t' || body[after] == '\n' || body[after] == '\r')) after++;
    if (after < len) {
        cJSON_Delete(root);
        return serve_fail(e, 400, NULL, NULL, "invalid_json", "the body is not valid JSON: unexpected data after the JSON value at byte %zu of %zu", after, len);
    }
    int rc = 0;
    static const char *const gen_keys[] = {"model", "max_tokens", "max_completion_tokens", "temperature", "top_p", "seed", "stop", "stream",
                                           "stream_options", "n", "presence_penalty", "frequency_penalty", "logprobs", "user", NULL};
    static const char *const emb_keys[] = {"model", "input", "encoding_format", "dimensions", "user", NULL};
    static const char *const tok_keys[] = {"model", "content", "add_special", NULL};
    static const char *const detok_keys[] = {"model", "tokens", NULL};
    static const char *const tr_keys[] = {"model", "input", "beam_size", "n_best", "max_length", "min_length", "max_input_length", "length_penalty",
                                          "repetition_penalty", "replace_unknowns", NULL};
    const cJSON *v;
    if (!cJSON_IsObject(root)) {
        rc = serve_fail(e, 400, NULL, NULL, "invalid_json", "the body must be a JSON object");
        goto done;
    }
    int oom = 0;
    const char *dup = dup_name(root, &oom);
    if (dup || oom) {
        rc = oom ? serve_fail(e, 500, "server_error", NULL, NULL, "out of memory")
                 : serve_fail(e, 400, NULL, dup, "invalid_json", "the body names '%s' twice in one object (which value holds would be a guess)", dup);
        goto done;
    }
    /* every field must be known: an unsupported option is named, never ignored */
    cJSON_ArrayForEach(v, root) {
        int ok = kind == SERVE_EMBED ? known(v->string, emb_keys)
                 : kind == SERVE_TOKENIZE ? known(v->string, tok_keys)
                 : kind == SERVE_DETOKENIZE ? known(v->string, detok_keys)
                 : kind == SERVE_TRANSLATE  ? known(v->string, tr_keys)
                                            : known(v->string, gen_keys) || (kind == SERVE_CHAT ? strcmp(v->string, "messages") == 0
                                                                                                 : strcmp(v->string, "prompt") == 0);
        if (!ok) {
            rc = serve_fail(e, 400, NULL, v->string, "unsupported_parameter", "'%.60s' is not supported by attn serve", v->string);
            goto done;
        }
    }
    v = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!v && (kind <= SERVE_EMBED || kind == SERVE_TRANSLATE)) {
        rc = serve_fail(e, 400, NULL, "model", "missing_required_parameter", "'model' is required");
        goto done;
    }
    if (v && !cJSON_IsNull(v) && (rc = get_text(v, "model", &r->model, e)) < 0) goto done;
    if ((v = cJSON_GetObjectItemCaseSensitive(root, "user")) && !cJSON_IsString(v)) {
        rc = serve_fail(e, 400, NULL, "user", "invalid_type", "'user' must be a string");
        goto done;
    }
    switch (kind) {
    case SERVE_CHAT:
        if ((rc = parse_chat(r, root, e)) == 0) rc = parse_generation(r, root, e);
        break;
    case SERVE_COMPLETION:
        v = cJSON_GetObjectItemCaseSensitive(root, "prompt");
        if (!v) rc = serve_fail(e, 400, NULL, "prompt", "missing_required_parameter", "'prompt' is required");
        else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 1 && cJSON_IsString(v->child)) rc = get_text(v->child, "prompt", &r->prompt, e);
        else if (!cJSON_IsString(v)) rc = serve_fail(e, 400, NULL, "prompt", "invalid_type", "'prompt' must be a string (or an array of one string)");
        else rc = get_text(v, "prompt", &r->prompt, e);
        if (rc == 0 && !r->prompt[0]) rc = serve_fail(e, 400, NULL, "prompt", "invalid_value", "'prompt' is empty");
        if (rc == 0) rc = parse_generation(r, root, e);
        break;
    case SERVE_EMBED:
        rc = parse_embed(r, root, e);
        break;
    case SERVE_TOKENIZE:
        v = cJSON_GetObjectItemCaseSensitive(root, "content");
        if (!v) rc = serve_fail(e, 400, NULL, "content", "missing_required_parameter", "'content' is required");
        else rc = get_text(v, "content", &r->content, e);
        if (rc == 0 && (v = cJSON_GetObjectItemCaseSensitive(root, "add_special"))) rc = get_bool(v, "add_special", &r->add_special, e);
        break;
    case SERVE_TRANSLATE:
        rc = parse_translate(r, root, e);
        break;
    case SERVE_TRANSCRIBE: /* refused above */
        break;
    case SERVE_DETOKENIZE:
        v = cJSON_GetObjectItemCaseSensitive(root, "tokens");
        if (!v) rc = serve_fail(e, 400, NULL, "tokens", "missing_required_parameter", "'tokens' is required");
        else rc = get_ids(v, "tokens", &r->tokens, &r->n_tokens, e);
        break;
    }
done:
    cJSON_Delete(root);
    return rc < 0 ? -1 : 0;
}
