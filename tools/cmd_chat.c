/* attn chat: answer with an instruct model through its chat template (ChatML). */
#include "cli.h"
#include "llm.h"

#include "attn_utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *model, *system, *tmpl, *message;
} chat_opts;

#define F(f) offsetof(chat_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model FILE        GGUF instruct model (e.g. SmolLM2-135M-Instruct)\n"},
    {"--system", NULL, CLI_STR, F(system), .help = "  --system TEXT       system message (default: the template's own)\n"},
    {"--template", NULL, CLI_STR, F(tmpl), .help = "  --template NAME     chatml\n"},
    CLI_HELP_LINE("  -n N                at most N tokens per reply (default 256)\n"
                  "  --temp T            temperature, 0 = greedy (default 0 for chat)\n"
                  "  --top-k K, --top-p P, --min-p P, --repeat-penalty R, --seed S, --stop STR, --threads N\n"
                  "                      as for attn generate\n"
                  "  -h, --help          this help\n"), /* llm_options (llm.c): the sampling options */
    {0}};

static int one_message(void *base, const char *verb, const char *arg) {
    chat_opts *c = (chat_opts *)base;
    if (c->message) return cli_usage_error(verb, "one MESSAGE only (quote it)");
    c->message = arg;
    return CLI_OK;
}

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn chat --model FILE.gguf [--system TEXT] [--template chatml] [options] [MESSAGE]\n"
            "\n"
            "Applies the model's chat template (ChatML: <|im_start|>ROLE\\nTEXT<|im_end|>\\n, with the\n"
            "template's default system turn unless --system is given) and prints only the reply.\n"
            "Without MESSAGE: on a terminal, an interactive conversation kept in the KV cache (an empty\n"
            "line or end of input ends it); otherwise the whole standard input is the message.\n"
            "A template attn does not know is an error; --template chatml uses ChatML anyway.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
}

static int encode_append(llm_ctx *c, const char *text, int32_t **ids, int64_t *n) {
    size_t len = strlen(text);
    if (attn_tokenizer_validate_utf8(text, len, NULL) < 0) return cli_lib_error("the message");
    int64_t cap = (int64_t)len + 8, got = 0;
    int32_t *p = (int32_t *)malloc(sizeof(int32_t) * (size_t)cap);
    if (!p) return cli_error("out of memory");
    if (attn_bpe_encode(c->tok, text, len, 1, p, cap, &got) < 0) {
        free(p);
        return cli_lib_error("tokenizing");
    }
    *ids = p;
    *n = got;
    return CLI_OK;
}

/* one turn: the reply is printed; then the assistant turn is closed in the cache as ChatML does
 * ("<|im_end|>\n") so that the next turn follows it (a reply cut by -n or a stop string first gets
 * its last token, printed but not yet run through the model). In a conversation (keep_going), a
 * message that no longer fits in the context is refused and the conversation goes on. */
static int turn(llm_ctx *c, attn_llama_state *st, const char *text, const llm_opts *o, int32_t **hist, int64_t *nh, int64_t *ch,
                int keep_going) {
    int32_t *ids = NULL;
    int64_t n = 0;
    int rc = encode_append(c, text, &ids, &n);
    if (rc != CLI_OK) return rc;
    const int64_t room = attn_llama_state_max_len(st) - attn_llama_state_len(st);
    if (keep_going && n > room) {
        free(ids);
        cli_error("this message (%lld tokens with its turn markers) does not fit in what is left of the context (%lld of %lld positions); "
                  "send a shorter one, or an empty line to end",
                  (long long)n, (long long)room, (long long)attn_llama_state_max_len(st));
        return CLI_OK;
    }
    llm_stats s;
    rc = llm_generate(c, st, ids, n, o, stdout, hist, nh, ch, &s);
    free(ids);
    if (rc == CLI_OK) {
        putchar('\n');
        fflush(stdout);
        llm_print_stats(&s);
        const attn_llama_config *cfg = attn_llama_get_config(c->model);
        int32_t tail[16];
        int64_t nt = 0, got = 0;
        if (s.pending >= 0) tail[nt++] = s.pending;
        if (cfg->eot_id >= 0 && attn_bpe_encode(c->tok, "<|im_end|>\n", 11, 1, tail + nt, 8, &got) == 0) nt += got;
        if (nt > 0 && attn_llama_state_len(st) + nt <= attn_llama_state_max_len(st)) {
            float *lg = (float *)malloc(sizeof(float) * (size_t)cfg->vocab_size);
            if (!lg || attn_llama_forward(st, lg, tail, nt, 0, (int)o->threads) < 0) rc = cli_lib_error("chat");
            free(lg);
        }
    }
    return rc;
}

/* A message must hold some text and be valid UTF-8: CLI_OK, or the reason printed and CLI_FAIL
 * (an empty message given up front is a usage error, as generate's empty prompt: exit 2). */
static int check_message(const char *m, size_t n, int up_front) {
    size_t nonblank = 0;
    for (size_t i = 0; i < n; i++) nonblank += !strchr(" \t\r\n\v\f", m[i]);
    if (nonblank == 0) return up_front ? cli_usage_error("chat", "the message is empty") : cli_error("the message is empty");
    if (attn_tokenizer_validate_utf8(m, n, NULL) < 0) return cli_lib_error("the message");
    return CLI_OK;
}

int cmd_chat(int argc, char **argv) {
    chat_opts co = {NULL, NULL, NULL, NULL};
    llm_opts o;
    llm_opts_default(&o, 256);
    o.sp.temperature = 0.0f;
    int pr = cli_parse(argc, argv, "chat", options, &co, llm_options, &o, one_message, usage);
    if (pr != CLI_OK) return cli_parsed(pr);
    const char *model = co.model, *system = co.system, *tmpl = co.tmpl, *message = co.message;
    if (!model) return cli_usage_error("chat", "--model FILE is required");
    if (tmpl && strcmp(tmpl, "chatml") != 0) return cli_usage_error("chat", "unknown --template '%s' (known: chatml)", tmpl);
    /* the message (argument or standard input) is read and checked before the model loads; it is
     * checked itself, so that an error points into it, not into the template */
    char *input = NULL;
    int rc0, interactive = !message && isatty(0);
    if (!message && !interactive) {
        size_t len;
        if (llm_read_all(stdin, &input, &len) < 0) return cli_error("reading standard input failed: %s", strerror(errno));
        while (len && (input[len - 1] == '\n' || input[len - 1] == '\r')) input[--len] = 0;
        message = input;
    }
    if (!interactive && (rc0 = check_message(message, strlen(message), 1)) != CLI_OK) {
        free(input);
        return rc0;
    }
    llm_ctx c;
    int rc = llm_load(&c, "chat", model, NULL);
    if (rc != CLI_OK) {
        free(input);
        return rc;
    }
    char *dflt_sys = NULL, *text = NULL;
    attn_llama_state *st = NULL;
    int32_t *hist = NULL;
    int64_t nh = 0, ch = 0;
    if (!c.is_gguf) {
        rc = cli_error("chat needs a GGUF instruct model with a chat template");
        goto done;
    }
    rc = llm_template_system(attn_llama_chat_template(c.model), tmpl, &dflt_sys);
    if (rc != CLI_OK) goto done;
    if (!system) system = dflt_sys;
    if (o.threads > 0) attn_set_num_threads((int)o.threads);
    if (attn_llama_state_create(&st, c.model, 0) < 0) {
        rc = cli_lib_error("KV cache");
        goto done;
    }
    if (!interactive) {
        text = llm_chatml(system, message, 1);
        rc = text ? turn(&c, st, text, &o, &hist, &nh, &ch, 0) : cli_error("out of memory");
        goto done;
    }
    fprintf(stderr, "attn chat: type a message, an empty line or Ctrl-D ends\n");
    char line[8192];
    int first = 1;
    for (;;) {
        fprintf(stderr, "> ");
        fflush(stderr);
        if (!fgets(line, sizeof line, stdin)) break;
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0]) break;
        if (check_message(line, strlen(line), 0) != CLI_OK) continue; /* said on stderr; ask again */
        free(text);
        text = llm_chatml(system, line, first);
        first = 0;
        if (!text) {
            rc = cli_error("out of memory");
            break;
        }
        rc = turn(&c, st, text, &o, &hist, &nh, &ch, 1);
        if (rc != CLI_OK) break;
    }
done:
    free(text);
    free(input);
    free(dflt_sys);
    free(hist);
    attn_llama_state_free(st);
    llm_free(&c);
    return rc;
}
