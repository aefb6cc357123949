/* Shared code of the language-model verbs (see llm.h). */
#include "llm.h"
#include "progress.h"

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* the llama2.c tokenizer beside a checkpoint (llama2.c's own names: tokenizer.bin, tok512.bin,
 * tok4096.bin, ...) when there is exactly one, written to out; returns how many there are (out
 * then lists them, ", "-separated, when several) */
static int tokenizer_beside(char *out, size_t cap, const char *model) {
    const char *slash = strrchr(model, '/');
    const size_t dl = slash ? (size_t)(slash - model + 1) : 0;
    char dir[4096];
    if (dl + 2 > sizeof dir) return 0;
    memcpy(dir, model, dl);
    strcpy(dir + dl, dl ? "" : "./");
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        const size_t nl = strlen(n);
        if (nl < 7 || strncmp(n, "tok", 3) != 0 || strcmp(n + nl - 4, ".bin") != 0) continue;
        if (strcmp(n, slash ? slash + 1 : model) == 0) continue; /* the checkpoint itself */
        char path[4096];
        if (snprintf(path, sizeof path, "%.*s%s", (int)dl, model, n) >= (int)sizeof path) continue;
        struct stat sb;
        if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        const size_t have = found ? strlen(out) : 0;
        if (found == 0) out[0] = 0;
        if (have + strlen(path) + 3 < cap) snprintf(out + have, cap - have, "%s%s", found ? ", " : "", path);
        found++;
    }
    closedir(d);
    return found;
}

int llm_load(llm_ctx *c, const char *verb, const char *model, const char *tokenizer) {
    memset(c, 0, sizeof *c);
    if (!model || !*model) return cli_usage_error(verb, "--model FILE is required");
    struct stat sb;
    if (stat(model, &sb) == 0 && S_ISDIR(sb.st_mode))
        return cli_error("%s is a directory; --model takes a .gguf file%s", model,
                         strcmp(verb, "generate") == 0 ? " or a llama2.c checkpoint" : "");
    FILE *f = fopen(model, "rb");
    if (!f) return cli_error("cannot open %s: %s", model, strerror(errno));
    char magic[4] = {0};
    size_t got = fread(magic, 1, 4, f);
    int rerr = ferror(f) ? errno : 0;
    fclose(f);
    if (rerr) return cli_error("reading %s failed: %s", model, strerror(rerr));
    if (got == 4 && memcmp(magic, "GGUF", 4) == 0) {
        if (tokenizer)
            return cli_usage_error(verb, "--tokenizer applies to llama2.c checkpoints; the GGUF file %s carries its own tokenizer",
                                   model);
        if (attn_llama_load_gguf(&c->model, model) < 0) return cli_lib_error(NULL);
        c->tok = attn_llama_tokenizer(c->model);
        c->is_gguf = 1;
        return CLI_OK;
    }
    char found[4096];
    const int n_found = !tokenizer && strcmp(verb, "generate") == 0 ? tokenizer_beside(found, sizeof found, model) : 0;
    if (n_found > 1)
        return cli_usage_error(verb, "%s is not a GGUF file; as a llama2.c checkpoint it needs --tokenizer: %d tokenizers lie beside it (%s)", model,
                               n_found, found);
    if (n_found == 1) {
        /* a llama2.c checkpoint with its tokenizer next to it (stories260K.bin + tok512.bin) */
        tokenizer = found;
        fprintf(stderr, "attn %s: tokenizer %s (the one beside the model; --tokenizer chooses another)\n", verb, found);
    }
    if (!tokenizer) {
        if (strcmp(verb, "generate") != 0)
            return cli_error("%s is not a GGUF file (it does not start with \"GGUF\"); %s needs a GGUF instruct model", model, verb);
        /* a file that is no llama2.c checkpoint either is a bad file (exit 1, new-user finding: random
         * bytes got the usage error); a checkpoint without its tokenizer is a missing option (exit 2) */
        if (attn_llama_load_llama2c(&c->model, model) < 0)
            return cli_error("%s; nor is it a GGUF file (it does not start with \"GGUF\")", attn_last_error());
        attn_llama_free(c->model);
        c->model = NULL;
        return cli_usage_error(verb, "%s is a llama2.c checkpoint: give its --tokenizer tok.bin (no tok*.bin lies beside it)", model);
    }
    if (attn_llama_load_llama2c(&c->model, model) < 0) return cli_lib_error(NULL);
    if (attn_bpe_load_llama2c(&c->own_tok, tokenizer, attn_llama_get_config(c->model)->vocab_size) < 0) {
        llm_free(c);
        return cli_lib_error(NULL);
    }
    c->tok = c->own_tok;
    return CLI_OK;
}

void llm_free(llm_ctx *c) {
    attn_bpe_free(c->own_tok);
    attn_llama_free(c->model);
    memset(c, 0, sizeof *c);
}

void llm_opts_default(llm_opts *o, int64_t n_predict) {
    memset(o, 0, sizeof *o);
    o->sp = attn_sampler_params_default();
    o->sp.seed = (uint64_t)time(NULL);
    o->n_predict = n_predict;
}

/* --temp, --top-p, --min-p, --repeat-penalty: a float in the option's range */
static int sampling_f32(const cli_option *opt, cli_args *a, const char *val, void *field, void *base) {
    float f;
    const char *n = opt->name, *verb = a->verb;
    if (cli_parse_f32(verb, n, val, &f) != CLI_OK) return CLI_USAGE;
    if (!strcmp(n, "--temp") && f < 0) return cli_usage_error(verb, "--temp must be >= 0 (0 = greedy), got %s", val);
    if (!strcmp(n, "--top-p") && !(f > 0 && f <= 1)) return cli_usage_error(verb, "--top-p must be in (0, 1], got %s", val);
    if (!strcmp(n, "--min-p") && !(f >= 0 && f < 1)) return cli_usage_error(verb, "--min-p must be in [0, 1), got %s", val);
    if (!strcmp(n, "--repeat-penalty") && !(f >= 1))
        return cli_usage_error(verb, "--repeat-penalty must be >= 1, got %s", val);
    *(float *)field = f;
    return CLI_OK;
}

static int top_k_opt(const cli_option *opt, cli_args *a, const char *val, void *field, void *base) {
    int64_t v;
    if (cli_parse_i64(a->verb, "--top-k", val, 0, INT32_MAX, &v) != CLI_OK) return CLI_USAGE;
    *(int32_t *)field = (int32_t)v;
    return CLI_OK;
}

static int stop_opt(const cli_option *opt, cli_args *a, const char *val, void *field, void *base) {
    if (!*val) return cli_usage_error(a->verb, "--stop needs a non-empty string");
    *(const char **)field = val;
    return CLI_OK;
}

#define F(f) offsetof(llm_opts, f)
const cli_option llm_options[] = {
    {"--n-predict", "-n", CLI_I64, F(n_predict), 1, 1 << 24, .label = "-n"},
    {"--temp", NULL, CLI_CALL, F(sp.temperature), .fn = sampling_f32, .takes_value = 1},
    {"--top-k", NULL, CLI_CALL, F(sp.top_k), .fn = top_k_opt, .takes_value = 1},
    {"--top-p", NULL, CLI_CALL, F(sp.top_p), .fn = sampling_f32, .takes_value = 1},
    {"--min-p", NULL, CLI_CALL, F(sp.min_p), .fn = sampling_f32, .takes_value = 1},
    {"--repeat-penalty", NULL, CLI_CALL, F(sp.repetition_penalty), .fn = sampling_f32, .takes_value = 1},
    {"--seed", NULL, CLI_I64, F(sp.seed), 0, INT64_MAX, .help = NULL},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = NULL},
    {"--stop", NULL, CLI_CALL, F(stop), .fn = stop_opt, .takes_value = 1},
    {0}};
#undef F

typedef struct {
    FILE *out;
    int failed; /* errno of a failed write */
    cli_progress *bar; /* the prompt's bar: ended before the first piece of text */
} llm_sink;

/* write a piece of the reply through (a closed pipe or a full disk: stop, do not generate on) */
static int llm_write(void *ctx, const char *text, size_t len, int32_t token) {
    (void)token;
    llm_sink *k = (llm_sink *)ctx;
    if (k->bar) {
        cli_progress_end(k->bar);
        k->bar = NULL;
    }
    errno = 0;
    if (fwrite(text, 1, len, k->out) != len || fflush(k->out) != 0 || ferror(k->out)) {
        k->failed = errno ? errno : EIO;
        return 1;
    }
    return 0;
}

int llm_generate(llm_ctx *c, attn_llama_state *st, const int32_t *ids, int64_t n, const llm_opts *o, FILE *out,
                 int32_t **hist, int64_t *n_hist, int64_t *cap_hist, llm_stats *stats) {
    memset(stats, 0, sizeof *stats);
    attn_generate_opts go = attn_generate_opts_default();
    go.sampling = o->sp;
    go.max_tokens = o->n_predict;
    go.n_threads = (int)o->threads;
    const char *stops[1] = {o->stop};
    go.stop = o->stop ? stops : NULL;
    go.n_stop = o->stop ? 1 : 0;
    attn_token_list h = {*hist, *n_hist, *cap_hist};
    cli_progress bar;
    cli_progress_start(&bar, o->progress, o->progress_label ? o->progress_label : "reading", "tokens", (double)n);
    llm_sink sink = {out, 0, bar.on ? &bar : NULL};
    if (bar.on) {
        go.progress = cli_progress_cb;
        go.progress_user = &bar;
    }
    attn_generate_stats gs;
    int rc = attn_llama_generate(st, c->tok, ids, n, &go, &h, llm_write, &sink, &gs);
    if (sink.bar) cli_progress_end(sink.bar);
    *hist = h.ids;
    *n_hist = h.n;
    *cap_hist = h.cap;
    if (rc < 0) return cli_lib_error(NULL);
    stats->n_prompt = gs.n_prompt;
    stats->n_gen = gs.n_gen;
    stats->t_prompt = gs.t_prompt;
    stats->t_gen = gs.t_gen;
    stats->stop_reason = gs.finish == ATTN_FINISH_CANCELLED ? 0 : (int)gs.finish;
    stats->pending = gs.pending_token;
    if (sink.failed || fflush(out) != 0 || ferror(out))
        return cli_error("writing standard output failed: %s", strerror(sink.failed ? sink.failed : errno ? errno : EIO));
    return CLI_OK;
}

int llm_generate_print(llm_ctx *c, attn_llama_state *st, const int32_t *ids, int64_t n, const llm_opts *o,
                       int32_t **hist, int64_t *n_hist, int64_t *cap_hist) {
    llm_stats s;
    int rc = llm_generate(c, st, ids, n, o, stdout, hist, n_hist, cap_hist, &s);
    if (rc != CLI_OK) return rc;
    putchar('\n');
    if (fflush(stdout) != 0 || ferror(stdout)) return cli_error("writing standard output failed: %s", strerror(errno ? errno : EIO));
    llm_print_stats(&s);
    return CLI_OK;
}

void llm_print_stats(const llm_stats *s) {
    fprintf(stderr, "prompt: %lld token%s, %.1f tokens/s; generation: %lld token%s, %.1f tokens/s\n", (long long)s->n_prompt,
            s->n_prompt == 1 ? "" : "s", s->t_prompt > 0 ? (double)s->n_prompt / s->t_prompt : 0.0, (long long)s->n_gen,
            s->n_gen == 1 ? "" : "s", s->t_gen > 0 ? (double)s->n_gen / s->t_gen : 0.0);
    if (s->stop_reason == 3) fprintf(stderr, "attn: note: generation stopped because the context is full\n");
}

int llm_read_all(FILE *f, char **buf, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    char *b = (char *)malloc(cap + 1);
    if (!b) return -1;
    for (;;) {
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
        if (n == cap) {
            if (cap >= (1u << 30)) break;
            char *nb = (char *)realloc(b, cap * 2 + 1);
            if (!nb) {
                free(b);
                return -1;
            }
            b = nb;
            cap *= 2;
        }
    }
    if (ferror(f)) {
        free(b);
        return -1;
    }
    /* NUL bytes are removed, as README says of every verb's input and the reference tokenizers do
     * (new-user finding: chat and summarize, which take the text as a C string, lost all after one) */
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (b[i]) b[k++] = b[i];
    n = k;
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

char *llm_chatml(const char *system, const char *user, int with_system) {
    attn_chat_message m[2] = {{"system", system}, {"user", user}};
    const int sys = with_system && system;
    char *text = NULL;
    return attn_chat_format(&text, m + !sys, 1 + sys, NULL) == 0 ? text : NULL;
}

int llm_template_system(const char *tmpl, const char *force, char **sys) {
    *sys = NULL;
    if (force && strcmp(force, "chatml") != 0) return cli_usage_error(NULL, "unknown --template '%s' (known: chatml)", force);
    if (attn_chat_template_system(sys, tmpl, force != NULL) < 0)
        return cli_error("%s; pass --template chatml to use ChatML%s", attn_last_error(), tmpl ? " anyway" : "");
    return CLI_OK;
}
