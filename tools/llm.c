/* Shared code of the language-model verbs (see llm.h). */
#include "llm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
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
    if (!tokenizer) {
        if (strcmp(verb, "generate") != 0)
            return cli_error("%s is not a GGUF file (it does not start with \"GGUF\"); %s needs a GGUF instruct model", model, verb);
        /* either a forgotten --tokenizer or a wrong file: said as both, exit 2 like a missing option */
        return cli_usage_error(verb, "%s is not a GGUF file (it does not start with \"GGUF\"); for a llama2.c checkpoint give --tokenizer tok.bin",
                               model);
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

int llm_parse_opt(cli_args *a, const char *verb, llm_opts *o) {
    const char *val;
    int r;
    int64_t i64;
    float f;
    if ((r = cli_opt(a, "-n", "--n-predict", &val))) {
        if (r < 0 || cli_parse_i64(verb, "-n", val, 1, 1 << 24, &o->n_predict) != CLI_OK) return -1;
        return 1;
    }
    if ((r = cli_opt(a, NULL, "--temp", &val))) {
        if (r < 0 || cli_parse_f32(verb, "--temp", val, &f) != CLI_OK) return -1;
        if (f < 0) return cli_usage_error(verb, "--temp must be >= 0 (0 = greedy), got %s", val), -1;
        o->sp.temperature = f;
        return 1;
    }
    if ((r = cli_opt(a, NULL, "--top-k", &val))) {
        if (r < 0 || cli_parse_i64(verb, "--top-k", val, 0, INT32_MAX, &i64) != CLI_OK) return -1;
        o->sp.top_k = (int32_t)i64;
        return 1;
    }
    if ((r = cli_opt(a, NULL, "--top-p", &val))) {
        if (r < 0 || cli_parse_f32(verb, "--top-p", val, &f) != CLI_OK) return -1;
        if (!(f > 0 && f <= 1)) return cli_usage_error(verb, "--top-p must be in (0, 1], got %s", val), -1;
        o->sp.top_p = f;
        return 1;
    }
    if ((r = cli_opt(a, NULL, "--min-p", &val))) {
        if (r < 0 || cli_parse_f32(verb, "--min-p", val, &f) != CLI_OK) return -1;
        if (!(f >= 0 && f < 1)) return cli_usage_error(verb, "--min-p must be in [0, 1), got %s", val), -1;
        o->sp.min_p = f;
        return 1;
    }
    if ((r = cli_opt(a, NULL, "--repeat-penalty", &val))) {
        if (r < 0 || cli_parse_f32(verb, "--repeat-penalty", val, &f) != CLI_OK) return -1;
        if (!(f >= 1)) return cli_usage_error(verb, "--repeat-penalty must be >= 1, got %s", val), -1;
        o->sp.repetition_penalty = f;
        return 1;
    }
    if ((r = cli_opt(a, NULL, "--seed", &val))) {
        if (r < 0 || cli_parse_i64(verb, "--seed", val, 0, INT64_MAX, &i64) != CLI_OK) return -1;
        o->sp.seed = (uint64_t)i64;
        return 1;
    }
    if ((r = cli_opt(a, NULL, "--threads", &val))) {
        if (r < 0 || cli_parse_i64(verb, "--threads", val, 1, 4096, &o->threads) != CLI_OK) return -1;
        return 1;
    }
    if ((r = cli_opt(a, NULL, "--stop", &val))) {
        if (r < 0) return -1;
        if (!*val) return cli_usage_error(verb, "--stop needs a non-empty string"), -1;
        o->stop = val;
        return 1;
    }
    return 0;
}

static int push_hist(int32_t **hist, int64_t *n, int64_t *cap, int32_t id) {
    if (*n == *cap) {
        int64_t nc = *cap ? *cap * 2 : 256;
        int32_t *p = (int32_t *)realloc(*hist, sizeof(int32_t) * (size_t)nc);
        if (!p) return -1;
        *hist = p;
        *cap = nc;
    }
    (*hist)[(*n)++] = id;
    return 0;
}

/* longest suffix of s[0..n) that is a proper prefix of stop */
static size_t stop_overlap(const char *s, size_t n, const char *stop) {
    size_t sl = strlen(stop);
    for (size_t k = sl - 1 < n ? sl - 1 : n; k > 0; k--)
        if (memcmp(s + n - k, stop, k) == 0) return k;
    return 0;
}

int llm_generate(llm_ctx *c, attn_llama_state *st, const int32_t *ids, int64_t n, const llm_opts *o, FILE *out,
                 int32_t **hist, int64_t *n_hist, int64_t *cap_hist, llm_stats *stats) {
    const attn_llama_config *cfg = attn_llama_get_config(c->model);
    const int64_t V = cfg->vocab_size;
    int rc = CLI_OK;
    memset(stats, 0, sizeof *stats);
    float *logits = (float *)malloc(sizeof(float) * (size_t)V);
    size_t pcap = 3 * attn_bpe_max_token_bytes(c->tok) + 64, scap = 4096, slen = 0;
    char *piece = (char *)malloc(pcap), *pend = (char *)malloc(scap);
    attn_sampler *smp = NULL;
    if (!logits || !piece || !pend) {
        rc = cli_error("out of memory");
        goto done;
    }
    if (attn_sampler_create(&smp, &o->sp, V) < 0) {
        rc = cli_lib_error("sampler");
        goto done;
    }
    if (n > attn_llama_state_max_len(st) - attn_llama_state_len(st)) {
        rc = cli_error("the prompt has %lld tokens; with %lld already in the context it does not fit in the context of %lld positions",
                       (long long)n, (long long)attn_llama_state_len(st), (long long)attn_llama_state_max_len(st));
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        if (push_hist(hist, n_hist, cap_hist, ids[i]) < 0) {
            rc = cli_error("out of memory");
            goto done;
        }
    double t0 = now_s();
    if (attn_llama_forward(st, logits, ids, n, 0, (int)o->threads) < 0) {
        rc = cli_lib_error("prompt");
        goto done;
    }
    stats->n_prompt = n;
    stats->t_prompt = now_s() - t0;
    t0 = now_s();
    attn_bpe_stream ds;
    attn_bpe_stream_init(&ds, 0);
    ds.prev_id = n > 0 ? ids[n - 1] : -1;
    for (int64_t step = 0; step < o->n_predict; step++) {
        int32_t tok;
        if (attn_sampler_sample(smp, &tok, logits, *hist, *n_hist) < 0) {
            rc = cli_lib_error("sampling");
            goto done;
        }
        if (tok == cfg->eos_id || (cfg->eot_id >= 0 && tok == cfg->eot_id) || (cfg->add_bos && tok == cfg->bos_id)) {
            stats->stop_reason = 1;
            break;
        }
        stats->n_gen++;
        if (push_hist(hist, n_hist, cap_hist, tok) < 0) {
            rc = cli_error("out of memory");
            goto done;
        }
        size_t pl;
        if (attn_bpe_stream_push(c->tok, &ds, tok, piece, pcap, &pl) < 0) {
            rc = cli_lib_error("decoding");
            goto done;
        }
        if (slen + pl + 1 > scap) {
            char *np = (char *)realloc(pend, (slen + pl + 1) * 2);
            if (!np) {
                rc = cli_error("out of memory");
                goto done;
            }
            pend = np;
            scap = (slen + pl + 1) * 2;
        }
        memcpy(pend + slen, piece, pl);
        slen += pl;
        pend[slen] = 0;
        size_t emit = slen;
        if (o->stop) {
            char *hit = strstr(pend, o->stop);
            if (hit) {
                fwrite(pend, 1, (size_t)(hit - pend), out);
                slen = 0;
                stats->stop_reason = 2;
                break;
            }
            emit = slen - stop_overlap(pend, slen, o->stop);
        }
        fwrite(pend, 1, emit, out);
        if (fflush(out) != 0 || ferror(out)) { /* a closed pipe or a full disk: stop, do not generate on */
            rc = cli_error("writing standard output failed: %s", strerror(errno ? errno : EIO));
            goto done;
        }
        memmove(pend, pend + emit, slen - emit);
        slen -= emit;
        if (step + 1 == o->n_predict) break;
        if (attn_llama_state_len(st) >= attn_llama_state_max_len(st)) {
            stats->stop_reason = 3;
            break;
        }
        if (attn_llama_forward(st, logits, &tok, 1, 0, (int)o->threads) < 0) {
            rc = cli_lib_error("generation");
            goto done;
        }
    }
    if (stats->stop_reason != 2) {
        size_t pl;
        fwrite(pend, 1, slen, out);
        if (attn_bpe_stream_flush(&ds, piece, pcap, &pl) == 0) fwrite(piece, 1, pl, out);
    }
    stats->t_gen = now_s() - t0;
    if (fflush(out) != 0 || ferror(out)) rc = cli_error("writing standard output failed: %s", strerror(errno ? errno : EIO));
done:
    attn_sampler_free(smp);
    free(logits);
    free(piece);
    free(pend);
    return rc;
}

void llm_print_stats(const llm_stats *s) {
    fprintf(stderr, "prompt: %lld tokens, %.1f tokens/s; generation: %lld tokens, %.1f tokens/s\n", (long long)s->n_prompt,
            s->t_prompt > 0 ? (double)s->n_prompt / s->t_prompt : 0.0, (long long)s->n_gen,
            s->t_gen > 0 ? (double)s->n_gen / s->t_gen : 0.0);
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
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

char *llm_chatml(const char *system, const char *user, int with_system) {
    size_t n = (system ? strlen(system) : 0) + strlen(user) + 128;
    char *s = (char *)malloc(n);
    if (!s) return NULL;
    if (with_system && system)
        snprintf(s, n, "<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", system, user);
    else
        snprintf(s, n, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", user);
    return s;
}

int llm_template_system(const char *tmpl, const char *force, char **sys) {
    *sys = NULL;
    if (force && strcmp(force, "chatml") != 0) return cli_usage_error(NULL, "unknown --template '%s' (known: chatml)", force);
    if (!tmpl) {
        if (force) return CLI_OK;
        return cli_error("the model file has no chat template; pass --template chatml to use ChatML");
    }
    int chatml = strstr(tmpl, "<|im_start|>") && strstr(tmpl, "<|im_end|>") && strstr(tmpl, "message['role']") &&
                 strstr(tmpl, "message['content']");
    if (!chatml && !force)
        return cli_error("the model's chat template is not one attn knows (ChatML); pass --template chatml to use ChatML anyway");
    const char *key = "<|im_start|>system\n";
    const char *p = strstr(tmpl, key);
    if (p) {
        p += strlen(key);
        const char *e = strstr(p, "<|im_end|>");
        if (e && !memchr(p, '{', (size_t)(e - p)) && !memchr(p, '\'', (size_t)(e - p))) {
            *sys = (char *)malloc((size_t)(e - p) + 1);
            if (!*sys) return cli_error("out of memory");
            memcpy(*sys, p, (size_t)(e - p));
            (*sys)[e - p] = 0;
        }
    }
    return CLI_OK;
}
