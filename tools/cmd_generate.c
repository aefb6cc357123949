/* attn generate: continue a prompt with a decoder-only language model (GGUF or llama2.c). */
#include "cli.h"
#include "llm.h"

#include "attn_utf8.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *tokp, *prompt;
} generate_opts;

#define F(f) offsetof(generate_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model FILE        GGUF (llama / qwen2 architecture) or llama2.c checkpoint\n"},
    {"--tokenizer", NULL, CLI_STR, F(tokp), .help = "  --tokenizer FILE    llama2.c tokenizer.bin (llama2.c checkpoints only; default: the one\n                      tok*.bin beside the checkpoint, when there is exactly one)\n"},
    {"--prompt", "-p", CLI_STR, F(prompt), .help = "  -p, --prompt TEXT   prompt (UTF-8)\n"},
    CLI_HELP_LINE("  -n N                tokens to generate (default 128, >= 1)\n"
                  "  --temp T            temperature, 0 = greedy (default 0.8)\n"
                  "  --top-k K           keep the K most likely tokens, 0 = off (default 40)\n"
                  "  --top-p P           nucleus sampling mass in (0, 1] (default 0.95)\n"
                  "  --min-p P           drop tokens below P x the top probability (default 0.05)\n"
                  "  --repeat-penalty R  CTRL repetition penalty over the last 64 tokens, 1 = off (default 1)\n"
                  "  --seed S            random seed (default: the time)\n"
                  "  --stop STR          stop when the generated text contains STR (not printed)\n"
                  "  --threads N         worker threads (default: all cores)\n"
                  "  -h, --help          this help\n"), /* llm_options (llm.c): the sampling options */
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn generate --model FILE.gguf [-p PROMPT] [-n N] [--temp T] [--top-k K] [--top-p P]\n"
            "                     [--min-p P] [--repeat-penalty R] [--seed S] [--stop STR] [--threads N]\n"
            "       attn generate --model stories260K.bin --tokenizer tok512.bin [options]\n"
            "\n"
            "Writes the prompt followed by the generated text to standard output as it is produced, and\n"
            "the prompt and generation speeds (tokens/s) to standard error. The prompt comes from -p or,\n"
            "without -p, from standard input (less the line break that ends it). Generation stops after\n"
            "N tokens, at the end-of-sequence / end-of-turn token, at the stop string, or when the\n"
            "context is full (said on stderr).\n"
            "A BOS token starts the prompt only when the file says so (llama2.c files: always).\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
}

int cmd_generate(int argc, char **argv) {
    generate_opts g = {NULL, NULL, NULL};
    llm_opts o;
    llm_opts_default(&o, 128);
    int pr = cli_parse(argc, argv, "generate", options, &g, llm_options, &o, NULL, usage);
    if (pr != CLI_OK) return cli_parsed(pr);
    const char *model = g.model, *tokp = g.tokp, *prompt = g.prompt;
    if (!model) return cli_usage_error("generate", "--model FILE is required");
    char *stdin_text = NULL;
    size_t plen;
    if (!prompt) {
        if (llm_read_all(stdin, &stdin_text, &plen) < 0) return cli_error("reading standard input failed: %s", strerror(errno));
        /* the one line break that ends a piped or echoed line is not part of the prompt (as
         * llama.cpp's -f drops it; new-user finding: `echo TEXT | attn generate` continued "TEXT\n") */
        if (plen && stdin_text[plen - 1] == '\n') stdin_text[--plen] = 0;
        if (plen && stdin_text[plen - 1] == '\r') stdin_text[--plen] = 0;
        prompt = stdin_text;
    } else {
        plen = strlen(prompt);
    }
    if (attn_tokenizer_validate_utf8(prompt, plen, NULL) < 0) {
        free(stdin_text);
        return cli_lib_error("the prompt");
    }
    llm_ctx c;
    int rc = llm_load(&c, "generate", model, tokp);
    if (rc != CLI_OK) {
        free(stdin_text);
        return rc;
    }
    const attn_llama_config *cfg = attn_llama_get_config(c.model);
    attn_llama_state *st = NULL;
    int32_t *ids = NULL, *hist = NULL;
    int64_t n = 0, nh = 0, ch = 0;
    /* ids: BOS + pieces (BOS only when the file asks for it) */
    int64_t cap = (int64_t)plen + 2;
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)cap);
    if (!ids) {
        rc = cli_error("out of memory");
        goto done;
    }
    int64_t off = 0;
    if (cfg->add_bos && cfg->bos_id >= 0) ids[off++] = cfg->bos_id;
    if (attn_bpe_encode(c.tok, prompt, plen, c.is_gguf, ids + off, cap - off, &n) < 0) {
        rc = cli_lib_error("tokenizing the prompt");
        goto done;
    }
    n += off;
    if (n == 0) {
        rc = cli_usage_error("generate", "the prompt is empty and the model has no BOS token to start from");
        goto done;
    }
    if (n >= cfg->context) {
        rc = cli_error("the prompt has %lld tokens, more than the model's context of %lld allows (at least one position must be left)",
                       (long long)n, (long long)cfg->context);
        goto done;
    }
    if (o.threads > 0) attn_set_num_threads((int)o.threads);
    if (attn_llama_state_create(&st, c.model, 0) < 0) {
        rc = cli_lib_error("KV cache");
        goto done;
    }
    fwrite(prompt, 1, plen, stdout);
    fflush(stdout);
    rc = llm_generate_print(&c, st, ids, n, &o, &hist, &nh, &ch);
done:
    attn_llama_state_free(st);
    free(ids);
    free(hist);
    free(stdin_text);
    llm_free(&c);
    return rc;
}
