/* attn tokenize: the word pieces and ids of a text under a model's tokenizer. */
#include "cli.h"

#include "attn_wordpiece.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *model, *text;
    int special;
    int64_t max_len;
} tokenize_opts;

#define F(f) offsetof(tokenize_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model DIR     model directory or its tokenizer.json\n"},
    {"--no-special", NULL, CLI_FLAG, F(special), 0, .help = "  --no-special    no [CLS] / [SEP]\n"},
    {"--max-len", NULL, CLI_I64, F(max_len), 2, 1 << 30,
     .help = "  --max-len N     truncate to N ids, specials included (default: no truncation)\n"},
    CLI_HELP_LINE("  -h, --help      this help\n"
                  "  --              end of options: a TEXT that starts with '-' follows\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn tokenize --model DIR [--no-special] [--max-len N] TEXT\n"
            "\n"
            "Prints one line per token: position, id and word piece (with [CLS] ... [SEP]\n"
            "unless --no-special). DIR holds tokenizer.json (a file path to it also works).\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
}

static int one_text(void *base, const char *verb, const char *arg) {
    tokenize_opts *o = (tokenize_opts *)base;
    if (o->text) return cli_usage_error(verb, "give one TEXT (quote it; put -- before a text that starts with '-')");
    o->text = arg;
    return CLI_OK;
}

int cmd_tokenize(int argc, char **argv) {
    tokenize_opts opt = {NULL, NULL, 1, 0};
    int pr = cli_parse(argc, argv, "tokenize", options, &opt, NULL, NULL, one_text, usage);
    if (pr != CLI_OK) return cli_parsed(pr);
    const char *model = opt.model, *text = opt.text;
    const int special = opt.special;
    const int64_t max_len = opt.max_len;
    if (!model || !*model) return cli_usage_error("tokenize", "--model DIR is required");
    if (!text) return cli_usage_error("tokenize", "TEXT is required");
    char path[4096];
    struct stat st;
    /* a file (tokenizer.json under any name) is the tokenizer itself; a directory holds it */
    if (cli_ends_with(model, ".json") || (stat(model, &st) == 0 && !S_ISDIR(st.st_mode))) snprintf(path, sizeof path, "%s", model);
    else snprintf(path, sizeof path, "%s/tokenizer.json", model);
    attn_tokenizer *tok = NULL;
    if (attn_tokenizer_load_json(&tok, path) < 0) return cli_lib_error(NULL);
    int64_t n = 0;
    int rc = attn_tokenizer_encode(tok, text, strlen(text), special, max_len, NULL, &n, 0, NULL);
    int32_t *ids = NULL;
    if (rc == 0 || rc == ATTN_E_RANGE) {
        ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
        rc = ids ? attn_tokenizer_encode(tok, text, strlen(text), special, max_len, ids, &n, n, NULL) : ATTN_E_NOMEM;
    }
    int out = CLI_OK;
    if (rc < 0) {
        out = cli_lib_error("tokenizing");
    } else {
        printf("%5s %7s  %s\n", "pos", "id", "token");
        for (int64_t i = 0; i < n; i++)
            printf("%5lld %7d  %s\n", (long long)i, ids[i], attn_tokenizer_id_to_token(tok, ids[i]));
        printf("%lld token%s\n", (long long)n, n == 1 ? "" : "s");
        if (fflush(stdout) != 0) out = cli_stdout_error();
    }
    free(ids);
    attn_tokenizer_free(tok);
    return out;
}
