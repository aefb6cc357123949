/* attn serve: Whisper transcription (POST /v1/audio/transcriptions, OpenAI's shapes) and
 * CTranslate2 translation (POST /v1/translations/text, attn's own JSON). Both models keep
 * decoding state, so each runs one request at a time: a request waits at the model's gate,
 * with at most --queue others waiting (503 + Retry-After beyond) and at most until its
 * --timeout (504), never without bound. The work is the CLI's: attn transcribe's audio
 * decoding (libsndfile on the uploaded bytes, resampled to 16 kHz) and decoding rules (beam 5,
 * faster-whisper's temperature fallback), attn translate's options and batching. */
#include "serve.h"

#include "attn_audio.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct serve_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int busy;
    int64_t waiting;
};

serve_gate *serve_gate_new(void) {
    serve_gate *g = (serve_gate *)calloc(1, sizeof *g);
    if (!g) return NULL;
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    return g;
}

void serve_gate_free(serve_gate *g) {
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    pthread_cond_destroy(&g->cv);
    free(g);
}

/* wait for the model: 0 (then gate_leave), or -1 with e (503 full / stopping, 504 timeout) */
static int gate_enter(serve_gate *g, serve_server *s, double deadline, serve_err *e) {
    pthread_mutex_lock(&g->mu);
    if (g->busy && g->waiting >= s->queue) {
        int64_t w = g->waiting;
        pthread_mutex_unlock(&g->mu);
        return serve_fail(e, 503, "server_error", NULL, "queue_full", "the model is busy with one request and %lld waiting (--queue %lld); retry later", (long long)w,
                          (long long)s->queue);
    }
    g->waiting++;
    while (g->busy) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
        if (g->busy && (s->stopping || serve_now() > deadline)) {
            g->waiting--;
            pthread_mutex_unlock(&g->mu);
            if (s->stopping) return serve_fail(e, 503, "server_error", NULL, "shutting_down", "the server is shutting down");
            return serve_fail(e, 504, "server_error", NULL, "timeout", "the request waited past --timeout %.0f s for the model", s->timeout_s);
        }
    }
    g->waiting--;
    g->busy = 1;
    pthread_mutex_unlock(&g->mu);
    return 0;
}

static void gate_leave(serve_gate *g) {
    pthread_mutex_lock(&g->mu);
    g->busy = 0;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* ------------------------------------------------------------------ transcription */

/* the uploaded bytes decoded as attn transcribe decodes a file: through a memory file
 * (memfd; a temporary file where there is none) that libsndfile opens by path */
static int load_upload(const serve_req *r, float **samples, int64_t *n, serve_err *e) {
    char path[4096];
    int fd = memfd_create("attn-serve-upload", MFD_CLOEXEC), tmp = 0;
    if (fd < 0) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/attn-serve-XXXXXX", dir && *dir ? dir : "/tmp");
        fd = mkstemp(path);
        tmp = 1;
        if (fd < 0) return serve_fail(e, 500, "server_error", NULL, NULL, "cannot store the upload: %s", strerror(errno));
    } else
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    size_t off = 0;
    while (off < r->audio_len) {
        ssize_t w = write(fd, r->audio + off, r->audio_len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int err = errno;
            close(fd);
            if (tmp) unlink(path);
            return serve_fail(e, 500, "server_error", NULL, NULL, "cannot store the upload: %s", strerror(err));
        }
        off += (size_t)w;
    }
    int rc = attn_audio_load(samples, n, path, ATTN_WHISPER_RATE);
    close(fd);
    if (tmp) unlink(path);
    if (rc < 0) {
        /* the library names the path it opened; the client knows its file's name */
        const char *msg = attn_last_error();
        const size_t pl = strlen(path);
        if (strncmp(msg, path, pl) == 0 && msg[pl] == ':') msg += pl + 1;
        while (*msg == ' ') msg++;
        return serve_fail(e, 400, NULL, "file", "invalid_audio", "the file '%.200s'%s%.300s", r->filename, strncmp(msg, "cannot", 6) == 0 ? ": " : " cannot be read as audio: ", msg);
    }
    if (*n == 0) {
        free(*samples);
        *samples = NULL;
        return serve_fail(e, 400, NULL, "file", "invalid_audio", "the file '%.200s' holds no audio samples", r->filename);
    }
    return 0;
}

static const char *skip_spaces(const char *t) {
    while (*t == ' ') t++;
    return t;
}

/* SubRip "00:00:01,500" or WebVTT "00:00:01.500" */
static void clock_time(char *out, size_t n, double s, char sep) {
    long long ms = (long long)(s * 1000.0 + 0.5);
    if (ms < 0) ms = 0;
    snprintf(out, n, "%02lld:%02lld:%02lld%c%03lld", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60, sep, ms % 1000);
}

/* the reply body of a result in r->format */
static char *format_result(const serve_req *r, const attn_whisper_result *res, double seconds) {
    if (r->format == SERVE_FMT_JSON || r->format == SERVE_FMT_VERBOSE_JSON) {
        cJSON *j = cJSON_CreateObject();
        if (r->format == SERVE_FMT_VERBOSE_JSON) {
            cJSON_AddStringToObject(j, "task", "transcribe");
            cJSON_AddStringToObject(j, "language", "english");
            cJSON_AddNumberToObject(j, "duration", seconds);
        }
        cJSON_AddStringToObject(j, "text", skip_spaces(res->text ? res->text : ""));
        if (r->format == SERVE_FMT_VERBOSE_JSON) {
            cJSON *a = cJSON_AddArrayToObject(j, "segments");
            for (int64_t i = 0; i < res->n_segments; i++) {
                const attn_whisper_segment *g = &res->segments[i];
                cJSON *x = cJSON_CreateObject();
                cJSON_AddNumberToObject(x, "id", (double)i);
                cJSON_AddNumberToObject(x, "start", g->start);
                cJSON_AddNumberToObject(x, "end", g->end);
                cJSON_AddStringToObject(x, "text", g->text ? g->text : "");
                cJSON_AddNumberToObject(x, "temperature", g->temperature);
                cJSON_AddNumberToObject(x, "avg_logprob", g->avg_logprob);
                cJSON_AddNumberToObject(x, "compression_ratio", g->compression_ratio);
                cJSON_AddNumberToObject(x, "no_speech_prob", g->no_speech_prob);
                cJSON_AddItemToArray(a, x);
            }
        }
        char *s = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        return s;
    }
    if (r->format == SERVE_FMT_TEXT) {
        const char *t = skip_spaces(res->text ? res->text : "");
        char *s = (char *)malloc(strlen(t) + 2);
        if (s) sprintf(s, "%s\n", t);
        return s;
    }
    /* srt / vtt: a cue per segment */
    size_t cap = 16;
    for (int64_t i = 0; i < res->n_segments; i++) cap += strlen(res->segments[i].text ? res->segments[i].text : "") + 80;
    char *s = (char *)malloc(cap);
    if (!s) return NULL;
    size_t k = (size_t)snprintf(s, cap, "%s", r->format == SERVE_FMT_VTT ? "WEBVTT\n\n" : "");
    const char sep = r->format == SERVE_FMT_VTT ? '.' : ',';
    for (int64_t i = 0; i < res->n_segments; i++) {
        char a[32], b[32];
        clock_time(a, sizeof a, res->segments[i].start, sep);
        clock_time(b, sizeof b, res->segments[i].end, sep);
        if (r->format == SERVE_FMT_SRT) k += (size_t)snprintf(s + k, cap - k, "%lld\n", (long long)(i + 1));
        k += (size_t)snprintf(s + k, cap - k, "%s --> %s\n%s\n\n", a, b, skip_spaces(res->segments[i].text ? res->segments[i].text : ""));
    }
    return s;
}

int serve_transcribe(serve_model *m, serve_server *s, const serve_req *r, double t0, serve_reply *out, serve_err *e) {
    float *samples = NULL;
    int64_t n = 0;
    if (load_upload(r, &samples, &n, e) < 0) return -1;
    attn_whisper_opts o = attn_whisper_opts_default();
    o.beam_size = 5; /* attn transcribe's default */
    o.timestamps = r->format == SERVE_FMT_VERBOSE_JSON || r->format == SERVE_FMT_SRT || r->format == SERVE_FMT_VTT;
    /* temperature T > 0: the fallback schedule starts there (openai-whisper's CLI:
     * arange(T, 1.0 + 1e-6, 0.2)); 0: attn transcribe's 0, 0.2, ..., 1.0 */
    float temps[8];
    if (r->temperature > 0) {
        int64_t k = 0;
        for (double t = r->temperature; t <= 1.0 + 1e-6 && k < 8; t += 0.2) temps[k++] = (float)t;
        o.temperatures = temps;
        o.n_temperatures = k;
    }
    if (gate_enter(m->gate, s, t0 + s->timeout_s, e) < 0) {
        free(samples);
        return -1;
    }
    attn_whisper_result res;
    memset(&res, 0, sizeof res);
    int rc = attn_whisper_transcribe(m->whisper, &res, samples, n, &o);
    gate_leave(m->gate);
    free(samples);
    if (rc < 0) attn_whisper_result_free(&res);
    if (rc < 0) return serve_fail(e, rc == ATTN_E_NOMEM ? 500 : 400, rc == ATTN_E_NOMEM ? "server_error" : NULL, "file", NULL, "transcribing: %s", attn_last_error());
    const double seconds = (double)n / ATTN_WHISPER_RATE;
    out->body = format_result(r, &res, seconds);
    attn_whisper_result_free(&res);
    if (!out->body) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    out->type = r->format == SERVE_FMT_JSON || r->format == SERVE_FMT_VERBOSE_JSON ? "application/json"
                : r->format == SERVE_FMT_VTT                                     ? "text/vtt; charset=utf-8"
                                                                                 : "text/plain; charset=utf-8";
    pthread_mutex_lock(&s->metrics.mu);
    s->metrics.audio_seconds_x1000 += (uint64_t)(seconds * 1000.0);
    pthread_mutex_unlock(&s->metrics.mu);
    return 0;
}

/* ------------------------------------------------------------------ translation */

int serve_translate(serve_model *m, serve_server *s, const serve_req *r, double t0, serve_reply *out, serve_err *e) {
    attn_translate_opts to = attn_translate_opts_default();
    attn_decode_opts *o = &to.decode;
    o->beam_size = r->beam;
    o->n_best = r->n_best;
    o->length_penalty = (float)r->length_penalty;
    o->length_penalty_form = ATTN_LP_POWER;
    o->max_length = r->max_length;
    o->min_length = r->min_length;
    o->repetition_penalty = (float)r->repetition_penalty;
    o->return_prefix = 1; /* as attn translate (CTranslate2's Translator) */
    to.max_input_length = r->max_input_length;
    to.max_batch_size = 32; /* attn translate's default batching: the same results */
    to.replace_unknowns = r->replace_unknowns;
    attn_translation *res = (attn_translation *)calloc((size_t)r->n_texts, sizeof *res);
    if (!res) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    if (gate_enter(m->gate, s, t0 + s->timeout_s, e) < 0) {
        free(res);
        return -1;
    }
    int rc = attn_translate(m->translator, res, (const char *const *)r->texts, r->n_texts, &to);
    gate_leave(m->gate);
    if (rc < 0) {
        free(res);
        return serve_fail(e, rc == ATTN_E_NOMEM ? 500 : 400, rc == ATTN_E_NOMEM ? "server_error" : NULL, "input", NULL, "translating: %s", attn_last_error());
    }
    cJSON *j = cJSON_CreateObject(), *d;
    cJSON_AddStringToObject(j, "object", "list");
    cJSON_AddStringToObject(j, "model", m->name);
    d = cJSON_AddArrayToObject(j, "data");
    int64_t ptok = 0, gtok = 0;
    for (int64_t i = 0; i < r->n_texts; i++) {
        cJSON *x = cJSON_CreateObject(), *src, *hs;
        cJSON_AddNumberToObject(x, "index", (double)i);
        src = cJSON_AddArrayToObject(x, "source_tokens");
        for (int64_t k = 0; k < res[i].src_len; k++) cJSON_AddItemToArray(src, cJSON_CreateString(res[i].src_tokens[k]));
        ptok += res[i].src_len;
        hs = cJSON_AddArrayToObject(x, "translations");
        for (int64_t h = 0; h < res[i].n; h++) {
            const attn_translation_hyp *y = &res[i].hyps[h];
            cJSON *hy = cJSON_CreateObject(), *tk;
            size_t len = 1;
            for (int64_t k = 0; k < y->len; k++) len += strlen(y->tokens[k]) + 1;
            char *text = (char *)malloc(len);
            size_t p = 0;
            if (text) {
                text[0] = 0;
                for (int64_t k = 0; k < y->len; k++) p += (size_t)sprintf(text + p, k ? " %s" : "%s", y->tokens[k]);
            }
            cJSON_AddStringToObject(hy, "text", text ? text : "");
            free(text);
            tk = cJSON_AddArrayToObject(hy, "tokens");
            for (int64_t k = 0; k < y->len; k++) cJSON_AddItemToArray(tk, cJSON_CreateString(y->tokens[k]));
            cJSON_AddNumberToObject(hy, "score", (double)y->score);
            cJSON_AddItemToArray(hs, hy);
            gtok += y->len;
        }
        cJSON_AddItemToArray(d, x);
    }
    cJSON *u = cJSON_AddObjectToObject(j, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)ptok);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)gtok);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(ptok + gtok));
    attn_translations_free(res, r->n_texts);
    free(res);
    out->body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    out->type = "application/json";
    if (!out->body) return serve_fail(e, 500, "server_error", NULL, NULL, "out of memory");
    pthread_mutex_lock(&s->metrics.mu);
    s->metrics.prompt_tokens += (uint64_t)ptok;
    s->metrics.gen_tokens += (uint64_t)gtok;
    pthread_mutex_unlock(&s->metrics.mu);
    return 0;
}
