/* attn similarity: cosine similarity matrix of sentence embeddings, as a table. */
#include "cli.h"
#include "texts.h"

#include "attn_bert.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    cli_texts texts; /* first: cli_texts_take */
    const char *model;
    int64_t threads;
} similarity_opts;

#define F(f) offsetof(similarity_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model), .help = "  --model DIR   model directory (config.json, model.safetensors, tokenizer.json)\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N   worker threads (default: all cores)\n"},
    CLI_HELP_LINE("  -h, --help    this help\n"
                  "  --            end of options: TEXTs that start with '-' follow\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn similarity --model DIR [--threads N] TEXT TEXT [TEXT ...]\n"
            "\n"
            "Embeds each TEXT (see attn embed) and prints the matrix of cosine similarities\n"
            "cos(a, b) = a.b / (|a| |b|) as a table; rows and columns are numbered as the texts.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
}

int cmd_similarity(int argc, char **argv) {
    similarity_opts o = {0};
    int code;
    if (!cli_parse_texts(argc, argv, "similarity", options, &o, &o.model, usage, &code)) return code;
    cli_texts texts = o.texts;
    const char *model = o.model;
    int64_t threads = o.threads;
    if (texts.n < 2) {
        cli_texts_free(&texts);
        return cli_usage_error("similarity", "give at least two texts");
    }
    if (threads > 0) attn_set_num_threads((int)threads);
    attn_bert *m = NULL;
    if (attn_bert_load(&m, model) < 0) {
        cli_texts_free(&texts);
        return cli_lib_error("loading the model");
    }
    int rc = CLI_OK;
    int64_t n = texts.n, E = attn_bert_get_config(m)->d_model;
    float *emb = (float *)malloc(sizeof(float) * (size_t)(n * E));
    if (!emb) {
        rc = cli_error("out of memory");
    } else if (attn_bert_embed(m, emb, (const char *const *)texts.items, n, 32, NULL, NULL) < 0) {
        rc = cli_lib_error("embedding");
    } else {
        for (int64_t i = 0; i < n; i++) {
            const char *s = texts.items[i];
            printf("[%lld] %.70s%s\n", (long long)i + 1, s, strlen(s) > 70 ? "..." : "");
        }
        printf("\n%6s", "");
        for (int64_t j = 0; j < n; j++) printf(" %7lld", (long long)j + 1);
        putchar('\n');
        for (int64_t i = 0; i < n; i++) {
            printf("%6lld", (long long)i + 1);
            for (int64_t j = 0; j < n; j++) {
                double d = 0, ni = 0, nj = 0;
                for (int64_t e = 0; e < E; e++) {
                    d += (double)emb[i * E + e] * emb[j * E + e];
                    ni += (double)emb[i * E + e] * emb[i * E + e];
                    nj += (double)emb[j * E + e] * emb[j * E + e];
                }
                double den = sqrt(ni) * sqrt(nj);
                printf(" %7.4f", den > 0 ? d / den : 0.0);
            }
            putchar('\n');
        }
    }
    if (rc == CLI_OK && fflush(stdout) != 0) rc = cli_stdout_error();
    free(emb);
    attn_bert_free(m);
    cli_texts_free(&texts);
    return rc;
}
