/* attn summarize: abstractive summary of a text with an instruct model. */
#include "cli.h"
#include "llm.h"
#include "progress.h"

#include "attn_utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *path;
    int progress;
} summarize_opts;

#define F(f) offsetof(summarize_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model FILE      GGUF instruct model\n"},
    CLI_PROGRESS_OPTIONS(F(progress), "        ", "     "),
    CLI_HELP_LINE("  -n N              at most N summary tokens (default 200)\n"
                  "  --temp T, --top-k K, --top-p P, --min-p P, --repeat-penalty R, --seed S, --stop STR,\n"
                  "  --threads N\n"
                  "                    as for attn generate (default greedy, repeat penalty 1.1)\n"
                  "  -h, --help        this help\n"), /* llm_options (llm.c): the sampling options */
    {0}};

static int one_file(void *base, const char *verb, const char *arg) {
    summarize_opts *so = (summarize_opts *)base;
    if (so->path) return cli_usage_error(verb, "one input FILE only");
    so->path = arg;
    return CLI_OK;
}

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn summarize --model FILE.gguf [options] [FILE|-]\n"
            "\n"
            "Writes a short abstractive summary of the text in FILE (or standard input) to standard\n"
            "output: the instruct model is asked, through its chat template, to summarise the text.\n"
            "A text longer than the context allows is cut (its beginning is kept) with a note on stderr.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
}

static const char *INSTR = "Summarize the following text in a few sentences.\n\n";

int cmd_summarize(int argc, char **argv) {
    summarize_opts so = {NULL, NULL, CLI_PROGRESS_AUTO};
    llm_opts o;
    llm_opts_default(&o, 200);
    o.sp.temperature = 0.0f;
    o.sp.repetition_penalty = 1.1f;
    int pr = cli_parse(argc, argv, "summarize", options, &so, llm_options, &o, one_file, usage);
    if (pr != CLI_OK) return cli_parsed(pr);
    const char *model = so.model, *path = so.path;
    o.progress = so.progress; /* a bar while the text is read (the prompt's prefill) */
    o.progress_label = "summarize";
    if (!model) return cli_usage_error("summarize", "--model FILE is required");
    char *text = NULL;
    size_t len = 0;
    FILE *f = (!path || strcmp(path, "-") == 0) ? stdin : fopen(path, "rb");
    if (!f) return cli_error("cannot open %s: %s", path, strerror(errno));
    int rr = llm_read_all(f, &text, &len);
    int rerr = errno;
    if (f != stdin) fclose(f);
    if (rr < 0) return cli_error("reading %s failed: %s", path ? path : "standard input", strerror(rerr));
    size_t nonblank = 0;
    for (size_t i = 0; i < len; i++) nonblank += !strchr(" \t\r\n\v\f", text[i]);
    if (nonblank == 0) {
        free(text);
        return cli_error("%s is empty: there is no text to summarize", path && strcmp(path, "-") ? path : "standard input");
    }
    if (attn_tokenizer_validate_utf8(text, len, NULL) < 0) {
        free(text);
        return cli_lib_error(path ? path : "standard input");
    }
    llm_ctx c;
    int rc = llm_load(&c, "summarize", model, NULL);
    if (rc != CLI_OK) {
        free(text);
        return rc;
    }
    char *sys = NULL, *prompt = NULL, *user = NULL;
    int32_t *ids = NULL, *hist = NULL, *tids = NULL;
    int64_t nh = 0, ch = 0;
    attn_llama_state *st = NULL;
    if (!c.is_gguf) {
        rc = cli_error("summarize needs a GGUF instruct model with a chat template");
        goto done;
    }
    if ((rc = llm_template_system(attn_llama_chat_template(c.model), NULL, &sys)) != CLI_OK) goto done;
    const attn_llama_config *cfg = attn_llama_get_config(c.model);
    /* budget: context minus the template, the instruction and the summary */
    int64_t ntext = 0, cap = (int64_t)len + 8;
    tids = (int32_t *)malloc(sizeof(int32_t) * (size_t)cap);
    if (!tids) {
        rc = cli_error("out of memory");
        goto done;
    }
    if (attn_bpe_encode(c.tok, text, len, 0, tids, cap, &ntext) < 0) {
        rc = cli_lib_error("tokenizing");
        goto done;
    }
    int64_t budget = cfg->context - o.n_predict - 128 - (sys ? (int64_t)strlen(sys) : 0);
    if (budget < 16) {
        rc = cli_usage_error("summarize", "-n %lld leaves no room for the text in a context of %lld", (long long)o.n_predict, (long long)cfg->context);
        goto done;
    }
    if (ntext > budget) {
        /* cut at the byte where token `budget` starts */
        size_t cut = 0;
        char piece[1024];
        for (int64_t i = 0; i < budget; i++) {
            size_t pl;
            if (attn_bpe_token_bytes(c.tok, tids[i], -1, 1, piece, sizeof piece, &pl) == 0) cut += pl;
        }
        while (cut > 0 && cut < len && ((unsigned char)text[cut] & 0xC0) == 0x80) cut--;
        fprintf(stderr, "attn: note: the text has %lld tokens; only the first %lld fit in the context of %lld, the rest is not summarised\n",
                (long long)ntext, (long long)budget, (long long)cfg->context);
        text[cut] = 0;
        len = cut;
    }
    size_t ul = strlen(INSTR) + len + 1;
    user = (char *)malloc(ul);
    if (!user) {
        rc = cli_error("out of memory");
        goto done;
    }
    snprintf(user, ul, "%s%s", INSTR, text);
    prompt = llm_chatml(sys, user, 1);
    if (!prompt) {
        rc = cli_error("out of memory");
        goto done;
    }
    size_t pl = strlen(prompt);
    int64_t n = 0;
    ids = (int32_t *)malloc(sizeof(int32_t) * (pl + 8));
    if (!ids || attn_bpe_encode(c.tok, prompt, pl, 1, ids, (int64_t)pl + 8, &n) < 0) {
        rc = ids ? cli_lib_error("tokenizing") : cli_error("out of memory");
        goto done;
    }
    if (o.threads > 0) attn_set_num_threads((int)o.threads);
    if (attn_llama_state_create(&st, c.model, 0) < 0) {
        rc = cli_lib_error("KV cache");
        goto done;
    }
    rc = llm_generate_print(&c, st, ids, n, &o, &hist, &nh, &ch);
done:
    attn_llama_state_free(st);
    free(ids);
    free(tids);
    free(hist);
    free(user);
    free(prompt);
    free(sys);
    free(text);
    llm_free(&c);
    return rc;
}
