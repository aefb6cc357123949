/* attn serve: options, model loading, signals, metrics (see tools/serve.h). */
#include "cli.h"
#include "serve.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

serve_server *serve_g;
const double serve_buckets[SERVE_NBUCKETS] = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120};

/* the command line: --model is repeatable (its paths collected), the rest fill serve_cli */
typedef struct {
    const char *host, *api_key;
    int64_t port, parallel, ctx, threads, max_body, queue;
    float timeout, idle_timeout, grace;
    const char **paths;
    int np;
} serve_cli;

static int add_model(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    serve_cli *c = (serve_cli *)base;
    c->paths[c->np++] = val;
    return CLI_OK;
}

/* --timeout, --idle-timeout, --grace: seconds in (0, 86400] */
static int seconds(const cli_option *o, cli_args *a, const char *val, void *field, void *base) {
    float f;
    if (cli_parse_f32("serve", o->name, val, &f) != CLI_OK) return CLI_USAGE;
    if (!(f > 0 && f <= 86400)) return cli_usage_error("serve", "%s must be in (0, 86400] seconds, got %s", o->name, val);
    *(float *)field = f;
    return CLI_OK;
}

#define F(f) offsetof(serve_cli, f)
static const cli_option serve_options[] = {
    {"--model", NULL, CLI_CALL, 0, .fn = add_model, .takes_value = 1, .help = "  --model [NAME=]PATH  a model to serve (repeatable)\n"},
    {"--host", NULL, CLI_STR, F(host), .help = "  --host ADDR          IP address or name to bind (default 127.0.0.1: this machine only;\n                       0.0.0.0 or :: for every interface, localhost)\n"},
    {"--port", NULL, CLI_I64, F(port), 0, 65535, .help = "  --port N             TCP port (default 8080; 0: any free port, printed)\n"},
    {"--parallel", NULL, CLI_I64, F(parallel), 1, 256, .help = "  --parallel N         sequences decoded together per decoder model (default 4)\n"},
    {"--ctx", NULL, CLI_I64, F(ctx), 16, 1 << 20, .help = "  --ctx N              positions per sequence (default 2048, at most the model's context)\n"},
    {"--api-key", NULL, CLI_STR, F(api_key), .help = "  --api-key KEY        require 'Authorization: Bearer KEY' (401 otherwise; /health is open)\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N          compute threads (default: all cores)\n"},
    {"--max-body", NULL, CLI_I64, F(max_body), 1024, (int64_t)1 << 32, .help = "  --max-body BYTES     largest request body (default 8388608; 413 above)\n"},
    {"--queue", NULL, CLI_I64, F(queue), 0, 1 << 20,
     .help = "  --queue N            requests waiting beyond the busy slots, per model (default 64; 503 +\n"
             "                       Retry-After when full)\n"},
    {"--timeout", NULL, CLI_CALL, F(timeout), .fn = seconds, .takes_value = 1,
     .help = "  --timeout S          longest time of a request, queue included (default 600; then cancelled)\n"},
    {"--idle-timeout", NULL, CLI_CALL, F(idle_timeout), .fn = seconds, .takes_value = 1,
     .help = "  --idle-timeout S     a connection silent this long is closed (default 30)\n"},
    {"--grace", NULL, CLI_CALL, F(grace), .fn = seconds, .takes_value = 1,
     .help = "  --grace S            on SIGTERM / SIGINT: stop accepting, give in-flight requests S seconds\n"
             "                       (default 10), cancel the rest, exit 0\n"},
    CLI_HELP_LINE("  -h, --help           this help\n"),
    {0}};
#undef F

static void usage(FILE *f);

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn serve --model [NAME=]PATH [--model ...] [--host 127.0.0.1] [--port 8080] [--parallel 4]\n"
            "                  [--ctx 2048] [--api-key KEY] [--threads N] [--max-body BYTES] [--queue 64]\n"
            "                  [--timeout 600] [--idle-timeout 30] [--grace 10]\n"
            "\n"
            "An OpenAI-compatible HTTP server. Each model is loaded once and named by its file stem or\n"
            "directory name (NAME=PATH overrides); a request's \"model\" field picks it.\n"
            "  decoders (GGUF llama, or a llama2.c checkpoint .bin with tokenizer.bin / tok*.bin beside it,\n"
            "  or a directory holding both): POST /v1/chat/completions (ChatML template with its default\n"
            "  system turn, as attn chat), POST /v1/completions (as attn generate);\n"
            "  sentence-transformers directories (config.json): POST /v1/embeddings (as attn embed);\n"
            "  CTranslate2 Whisper directories (model.bin, vocabulary.txt): POST /v1/audio/transcriptions\n"
            "  (multipart: file, model, response_format json|text|verbose_json|srt|vtt, language en,\n"
            "  temperature; as attn transcribe);\n"
            "  CTranslate2 translators (model.bin, source/target_vocabulary.txt): POST\n"
            "  /v1/translations/text (JSON: input, beam_size, n_best, max_length, ...; as attn translate);\n"
            "  GET /: a chat page (streams replies of the decoders);\n"
            "  decoders and encoders: POST /tokenize, /detokenize;\n"
            "  all: GET /v1/models, /health (503 while loading), /metrics.\n"
            "Decoders batch up to --parallel sequences in each forward step (continuous batching, one KV\n"
            "cache of --parallel slots of --ctx positions); embedding requests that wait together run as\n"
            "one batch. Errors are {\"error\": {\"message\", \"type\", \"param\", \"code\"}}.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, serve_options);
}

serve_model *serve_find_model(serve_server *s, const char *name) {
    for (int i = 0; i < s->n_models; i++)
        if (strcmp(s->models[i].name, name) == 0) return &s->models[i];
    return NULL;
}

static int class_of(int status) {
    return status == 401 ? 3 : status == 413 ? 4 : status == 503 ? 5 : status >= 500 ? 2 : status >= 400 ? 1 : 0;
}

void serve_metrics_request(serve_server *s, serve_kind k, int status, double seconds) {
    pthread_mutex_lock(&s->metrics.mu);
    s->metrics.requests[k][class_of(status)]++;
    if (status == 200 && seconds > 0) {
        s->metrics.lat_count[k]++;
        s->metrics.lat_sum[k] += seconds;
        for (int b = 0; b < SERVE_NBUCKETS; b++)
            if (seconds <= serve_buckets[b]) s->metrics.lat_bucket[k][b]++;
    }
    pthread_mutex_unlock(&s->metrics.mu);
}

char *serve_metrics_text(serve_server *s) {
    static const char *kinds[SERVE_NKINDS] = {"chat", "completion", "embedding", "tokenize", "detokenize", "transcription", "translation"};
    static const char *codes[6] = {"2xx", "4xx", "5xx", "401", "413", "503"};
    size_t cap = 16384, n = 0;
    char *o = (char *)malloc(cap);
    if (!o) return NULL;
#define P(...) n += (size_t)snprintf(o + n, n < cap ? cap - n : 0, __VA_ARGS__)
    pthread_mutex_lock(&s->metrics.mu);
    serve_metrics m = s->metrics;
    pthread_mutex_unlock(&s->metrics.mu);
    P("# HELP attn_requests_total HTTP requests by endpoint and status class.\n# TYPE attn_requests_total counter\n");
    for (int k = 0; k < SERVE_NKINDS; k++)
        for (int c = 0; c < 6; c++) P("attn_requests_total{endpoint=\"%s\",status=\"%s\"} %llu\n", kinds[k], codes[c], (unsigned long long)m.requests[k][c]);
    P("attn_requests_total{endpoint=\"other\",status=\"4xx\"} %llu\n", (unsigned long long)m.other_requests);
    P("# HELP attn_prompt_tokens_total Prompt tokens processed.\n# TYPE attn_prompt_tokens_total counter\nattn_prompt_tokens_total %llu\n",
      (unsigned long long)m.prompt_tokens);
    P("# HELP attn_prompt_cached_tokens_total Prompt tokens a slot already held from an earlier request (not recomputed).\n# TYPE "
      "attn_prompt_cached_tokens_total counter\nattn_prompt_cached_tokens_total %llu\n",
      (unsigned long long)m.prompt_cached_tokens);
    P("# HELP attn_generated_tokens_total Tokens generated.\n# TYPE attn_generated_tokens_total counter\nattn_generated_tokens_total %llu\n",
      (unsigned long long)m.gen_tokens);
    P("# HELP attn_embedding_inputs_total Texts or token arrays embedded.\n# TYPE attn_embedding_inputs_total counter\nattn_embedding_inputs_total %llu\n",
      (unsigned long long)m.embed_inputs);
    P("# HELP attn_audio_seconds_total Seconds of audio transcribed.\n# TYPE attn_audio_seconds_total counter\nattn_audio_seconds_total %.3f\n",
      (double)m.audio_seconds_x1000 / 1000.0);
    P("# HELP attn_cancelled_total Streams cancelled (client gone or timeout).\n# TYPE attn_cancelled_total counter\nattn_cancelled_total %llu\n",
      (unsigned long long)m.cancelled);
    P("# HELP attn_queue_depth Requests waiting for a slot.\n# TYPE attn_queue_depth gauge\n");
    for (int i = 0; i < s->n_models; i++)
        if (s->models[i].is_decoder) {
            int64_t q, b;
            serve_sched_stats(&s->models[i], &q, &b);
            P("attn_queue_depth{model=\"%s\"} %lld\n", s->models[i].name, (long long)q);
        }
    P("# HELP attn_busy_slots Sequences being decoded.\n# TYPE attn_busy_slots gauge\n");
    for (int i = 0; i < s->n_models; i++)
        if (s->models[i].is_decoder) {
            int64_t q, b;
            serve_sched_stats(&s->models[i], &q, &b);
            P("attn_busy_slots{model=\"%s\"} %lld\nattn_slots{model=\"%s\"} %lld\n", s->models[i].name, (long long)b, s->models[i].name, (long long)s->parallel);
        }
    P("# HELP attn_request_duration_seconds Time of successful requests, queue included.\n# TYPE attn_request_duration_seconds histogram\n");
    for (int k = 0; k < SERVE_NKINDS; k++) {
        if (k == SERVE_TOKENIZE || k == SERVE_DETOKENIZE) continue;
        for (int b = 0; b < SERVE_NBUCKETS; b++)
            P("attn_request_duration_seconds_bucket{endpoint=\"%s\",le=\"%g\"} %llu\n", kinds[k], serve_buckets[b], (unsigned long long)m.lat_bucket[k][b]);
        P("attn_request_duration_seconds_bucket{endpoint=\"%s\",le=\"+Inf\"} %llu\n", kinds[k], (unsigned long long)m.lat_count[k]);
        P("attn_request_duration_seconds_sum{endpoint=\"%s\"} %.6f\nattn_request_duration_seconds_count{endpoint=\"%s\"} %llu\n", kinds[k], m.lat_sum[k], kinds[k],
          (unsigned long long)m.lat_count[k]);
    }
#undef P
    if (n >= cap) o[cap - 1] = 0;
    return o;
}

/* a llama2.c tokenizer beside a checkpoint: tokenizer.bin, else the one tok*.bin */
static int find_tokenizer(const char *dir, char *out, size_t n) {
    snprintf(out, n, "%s/tokenizer.bin", dir);
    struct stat sb;
    if (stat(out, &sb) == 0) return 1;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "tok", 3) == 0 && strlen(e->d_name) > 7 && strcmp(e->d_name + strlen(e->d_name) - 4, ".bin") == 0) {
            snprintf(out, n, "%s/%s", dir, e->d_name);
            found = 1;
            break;
        }
    closedir(d);
    return found;
}

static int load_model(serve_model *m, const serve_server *s) {
    char path[4096], tokp[4200];
    snprintf(path, sizeof path, "%s", m->path);
    struct stat sb;
    if (stat(path, &sb) != 0) return cli_error("--model %s: %s", m->path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        char cfg[4200], bin[4200], voc[4200];
        snprintf(cfg, sizeof cfg, "%s/config.json", path);
        snprintf(bin, sizeof bin, "%s/model.bin", path);
        /* CTranslate2: model.bin with source/target (or shared) vocabularies is a translator,
         * with vocabulary.txt / .json a Whisper model */
        if (stat(bin, &sb) == 0) {
            int tr = 0, wh = 0;
            snprintf(voc, sizeof voc, "%s/source_vocabulary.txt", path);
            tr = stat(voc, &sb) == 0;
            snprintf(voc, sizeof voc, "%s/shared_vocabulary.txt", path);
            tr = tr || stat(voc, &sb) == 0;
            snprintf(voc, sizeof voc, "%s/vocabulary.txt", path);
            wh = stat(voc, &sb) == 0;
            snprintf(voc, sizeof voc, "%s/vocabulary.json", path);
            wh = wh || stat(voc, &sb) == 0;
            if (tr || wh) {
                if (tr ? attn_translator_load(&m->translator, path) < 0 : attn_whisper_load(&m->whisper, path) < 0) return cli_lib_error(m->path);
                m->is_translator = tr;
                m->is_whisper = !tr;
                if (!(m->gate = serve_gate_new())) return cli_error("out of memory");
                return CLI_OK;
            }
        }
        if (stat(cfg, &sb) == 0) {
            if (attn_bert_load(&m->bert, path) < 0) return cli_lib_error(m->path);
            if (serve_embedder_start(m, (serve_server *)s) < 0) return cli_lib_error(NULL);
            return CLI_OK;
        }
        /* a llama2.c directory: the one checkpoint .bin that is not a tokenizer */
        DIR *d = opendir(path);
        struct dirent *e;
        int found = 0;
        while (d && (e = readdir(d)))
            if (strncmp(e->d_name, "tok", 3) != 0 && strlen(e->d_name) > 4 && strcmp(e->d_name + strlen(e->d_name) - 4, ".bin") == 0) {
                snprintf(path, sizeof path, "%s/%s", m->path, e->d_name);
                found = 1;
                break;
            }
        if (d) closedir(d);
        if (!found)
            return cli_error("--model %s: a directory without config.json (sentence-transformers), model.bin with vocabularies (CTranslate2 Whisper or "
                             "translator) or a llama2.c .bin checkpoint",
                             m->path);
    }
    FILE *f = fopen(path, "rb");
    char magic[4] = {0};
    if (!f) return cli_error("cannot open %s: %s", path, strerror(errno));
    size_t got = fread(magic, 1, 4, f);
    fclose(f);
    m->is_decoder = 1;
    if (got == 4 && memcmp(magic, "GGUF", 4) == 0) {
        if (attn_llama_load_gguf(&m->llama, path) < 0) return cli_lib_error(NULL);
        m->tok = attn_llama_tokenizer(m->llama);
        if (attn_chat_template_system(&m->default_system, attn_llama_chat_template(m->llama), 0) == 0) m->chat_ok = 1;
        else snprintf(m->chat_why, sizeof m->chat_why, "%s", attn_last_error());
    } else {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", path);
        char *sl = strrchr(dir, '/');
        if (sl) *sl = 0;
        else snprintf(dir, sizeof dir, ".");
        if (!find_tokenizer(dir, tokp, sizeof tokp))
            return cli_error("--model %s: not a GGUF file, and no llama2.c tokenizer (tokenizer.bin or tok*.bin) beside it", m->path);
        if (attn_llama_load_llama2c(&m->llama, path) < 0) return cli_lib_error(NULL);
        if (attn_bpe_load_llama2c(&m->own_tok, tokp, attn_llama_get_config(m->llama)->vocab_size) < 0) return cli_lib_error(NULL);
        m->tok = m->own_tok;
        snprintf(m->chat_why, sizeof m->chat_why, "a llama2.c checkpoint has no chat template");
    }
    const int64_t C = attn_llama_get_config(m->llama)->context;
    m->ctx = s->ctx < C ? s->ctx : C;
    if (serve_sched_start(m, (serve_server *)s) < 0) return cli_lib_error("starting the scheduler");
    return CLI_OK;
}

static void model_name(serve_model *m, const char *arg) {
    const char *eq = strchr(arg, '=');
    if (eq && eq > arg && !strchr(arg, '/') ? 1 : (eq && eq > arg && memchr(arg, '/', (size_t)(eq - arg)) == NULL)) {
        snprintf(m->name, sizeof m->name, "%.*s", (int)(eq - arg), arg);
        m->path = eq + 1;
        return;
    }
    m->path = arg;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", arg);
    size_t n = strlen(tmp);
    while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
    const char *b = strrchr(tmp, '/');
    b = b ? b + 1 : tmp;
    snprintf(m->name, sizeof m->name, "%s", b);
    char *dot = strrchr(m->name, '.');
    if (dot && (strcmp(dot, ".gguf") == 0 || strcmp(dot, ".bin") == 0)) *dot = 0;
}

/* the models' names: from --model NAME=PATH or the path; two alike are a usage error */
static int name_models(serve_server *s, const serve_cli *c) {
    s->models = (serve_model *)calloc((size_t)c->np, sizeof(serve_model));
    if (!s->models) return cli_error("out of memory");
    for (int i = 0; i < c->np; i++) {
        if (c->paths[i][0] == '=') { /* NAME=PATH with no NAME (new-user finding: "=PATH" was taken as the path) */
            free(s->models);
            return cli_usage_error("serve", "--model %s: the name before '=' is empty (--model NAME=PATH, or the PATH alone)", c->paths[i]);
        }
        model_name(&s->models[i], c->paths[i]);
        s->models[i].created = (long)time(NULL);
        for (int k = 0; k < i; k++)
            if (strcmp(s->models[k].name, s->models[i].name) == 0) {
                free(s->models);
                return cli_usage_error("serve", "two models are named '%s'; give one a name with --model NAME=PATH", s->models[i].name);
            }
    }
    return CLI_OK;
}

/* the command line into the server's settings (the paths in c->paths); CLI_OK or an exit code */
static int parse_command_line(serve_server *s, serve_cli *c, int argc, char **argv) {
    int r = cli_parse(argc, argv, "serve", serve_options, c, NULL, NULL, NULL, usage);
    if (r != CLI_OK) return cli_parsed(r) == CLI_OK ? CLI_HELP_SHOWN : r;
    if (c->np == 0) return cli_usage_error("serve", "--model PATH is required (repeatable)");
    if (c->api_key && !*c->api_key) return cli_usage_error("serve", "--api-key must not be empty");
    /* [::1] as URLs write it: the address without its brackets (printed with them) */
    static char bare_host[256];
    const size_t hl = strlen(c->host);
    if (hl >= 2 && hl < sizeof bare_host && c->host[0] == '[' && c->host[hl - 1] == ']') {
        memcpy(bare_host, c->host + 1, hl - 2);
        bare_host[hl - 2] = 0;
        c->host = bare_host;
    }
    const char *why = NULL;
    s->bind_family = serve_host_addr(c->host, (int)c->port, &s->bind_addr, &why);
    if (s->bind_family < 0) return cli_usage_error("serve", "--host %s: %s", c->host, why);
    s->api_key = c->api_key;
    s->parallel = c->parallel, s->ctx = c->ctx, s->threads = c->threads, s->max_body = c->max_body, s->queue = c->queue;
    s->timeout_s = c->timeout, s->grace_s = c->grace;
    s->idle_timeout_s = c->idle_timeout < 1 ? 1 : (int)c->idle_timeout;
    return name_models(s, c);
}

/* many idle keep-alive connections each hold a descriptor: the soft limit goes up to the hard one
 * (at most 65536), as far as the system allows; the HTTP side sizes its connection limit from it */
static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
    rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > 65536 ? 65536 : rl.rlim_max;
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
        rl.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &rl); /* a refusal keeps the old limit: fewer connections, no error */
    }
}

/* stop: no new requests, in-flight ones get the grace period, then everything is released */
static void serve_shutdown(serve_server *s, struct MHD_Daemon *d) {
    const int np = s->n_models;
    s->stopping = 1;
    serve_http_quiesce(d);
    for (int i = 0; i < np; i++) {
        serve_sched_stop(&s->models[i]);
        serve_embedder_stop(&s->models[i]);
    }
    serve_http_stop(d);
    for (int i = 0; i < np; i++) {
        attn_llama_free(s->models[i].llama);
        attn_bpe_free(s->models[i].own_tok);
        free(s->models[i].default_system);
        attn_bert_free(s->models[i].bert);
        attn_whisper_free(s->models[i].whisper);
        attn_translator_free(s->models[i].translator);
        serve_gate_free(s->models[i].gate);
    }
    free(s->models);
    pthread_mutex_destroy(&s->metrics.mu);
    serve_g = NULL;
}

int cmd_serve(int argc, char **argv) {
    static serve_server S;
    serve_server *s = &S;
    memset(s, 0, sizeof *s);
    serve_cli c = {"127.0.0.1", NULL, 8080, 4, 2048, 0, 8 << 20, 64, 600.0f, 30.0f, 10.0f, NULL, 0};
    c.paths = (const char **)calloc((size_t)argc + 1, sizeof(char *));
    if (!c.paths) return cli_error("out of memory");
    int pr = parse_command_line(s, &c, argc, argv);
    free(c.paths);
    if (pr != CLI_OK) return pr == CLI_HELP_SHOWN ? CLI_OK : pr;
    const char *host = c.host;
    const int np = c.np;
    const int64_t port = c.port;
    s->n_models = np;
    if (s->threads > 0) attn_set_num_threads((int)s->threads);
    pthread_mutex_init(&s->metrics.mu, NULL);
    serve_g = s;
    s->loading = 1;
    /* signals are taken by sigwait in this thread only: block them before any thread starts */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* a path that is not there fails before anything is bound or loaded */
    for (int i = 0; i < np; i++) {
        struct stat sb;
        if (stat(s->models[i].path, &sb) != 0) {
            const int rc = cli_error("--model %s: %s", s->models[i].path, strerror(errno));
            free(s->models);
            return rc;
        }
    }
    raise_fd_limit();
    /* bound before loading, so that /health answers 503 while the models load (and a taken port
     * fails at once); "listening" is printed only once every model has loaded */
    serve_err e;
    int bound = 0;
    struct MHD_Daemon *d = serve_http_start(s, host, (int)port, &bound, &e);
    if (!d) {
        free(s->models);
        return cli_error("%s", e.message);
    }
    int rc = CLI_OK;
    for (int i = 0; i < np && rc == CLI_OK; i++) {
        rc = load_model(&s->models[i], s);
        if (rc == CLI_OK)
            fprintf(stderr, "attn serve: model '%s' (%s%s)\n", s->models[i].name,
                    s->models[i].is_decoder      ? "decoder"
                    : s->models[i].is_whisper    ? "speech recognition"
                    : s->models[i].is_translator ? "translation"
                                                 : "embeddings",
                    s->models[i].is_decoder ? (s->models[i].chat_ok ? ", chat" : ", completions only") : "");
    }
    if (rc == CLI_OK) {
        s->loading = 0;
        fprintf(stderr, "attn serve: listening on http://%s%s%s:%d/ (%d model%s)\n", strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", bound, np,
                np > 1 ? "s" : "");
        fprintf(stderr, "attn serve: ready\n");
        int sig = 0;
        sigwait(&sigs, &sig);
        fprintf(stderr, "attn serve: %s: stopping (in-flight requests get %.0f s)\n", sig == SIGINT ? "SIGINT" : "SIGTERM", s->grace_s);
    }
    serve_shutdown(s, d);
    if (rc == CLI_OK) fprintf(stderr, "attn serve: stopped\n");
    return rc;
}
