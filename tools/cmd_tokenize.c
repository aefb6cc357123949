/* attn tokenize: the word pieces and ids of a text under a model's tokenizer. */
#include "cli.h"

#include "attn_wordpiece.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn tokenize --model DIR [--no-special] [--max-len N] TEXT\n"
            "\n"
            "Prints one line per token: position, id and word piece (with [CLS] ... [SEP]\n"
            "unless --no-special). DIR holds tokenizer.json (a file path to it also works).\n"
            "\n"
            "Options:\n"
            "  --model DIR     model directory or its tokenizer.json\n"
            "  --no-special    no [CLS] / [SEP]\n"
            "  --max-len N     truncate to N ids, specials included (default: no truncation)\n"
            "  -h, --help      this help\n"
            "  --              end of options: a TEXT that starts with '-' follows\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    int special = 1;
    int64_t max_len = 0;
    cli_args a = cli_args_start(argc, argv, "tokenize");
    while (cli_more(&a)) {
        const char *val;
        int r;
        if (cli_help(&a)) {
            usage(stdout);
            return CLI_OK;
        } else if ((r = cli_opt(&a, NULL, "--model", &val))) {
            if (r < 0) return CLI_USAGE;
            model = val;
        } else if ((r = cli_opt(&a, NULL, "--max-len", &val))) {
            if (r < 0 || cli_parse_i64("tokenize", "--max-len", val, 2, 1 << 30, &max_len) != CLI_OK) return CLI_USAGE;
        } else if (cli_flag(&a, NULL, "--no-special")) {
            special = 0;
        } else if (cli_positional(&a, &val)) {
            if (text) return cli_usage_error("tokenize", "give one TEXT (quote it; put -- before a text that starts with '-')");
            text = val;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!model || !*model) return cli_usage_error("tokenize", "--model DIR is required");
    if (!text) return cli_usage_error("tokenize", "TEXT is required");
    char path[4096];
    if (cli_ends_with(model, ".json")) snprintf(path, sizeof path, "%s", model);
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
        printf("%lld tokens\n", (long long)n);
        if (fflush(stdout) != 0) out = cli_error("writing standard output failed");
    }
    free(ids);
    attn_tokenizer_free(tok);
    return out;
}
