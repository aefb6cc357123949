/* attn — command-line front end: `attn VERB [options]`.
 * Each verb lives in tools/cmd_VERB.c; this file only dispatches. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

/* One line per verb: X(name, one-line summary). The function is cmd_<name>. */
#define ATTN_CLI_COMMANDS(X)                                                              \
    X(sdpa, "scaled dot-product attention on .npy tensors")                               \
    X(pe, "sinusoidal positional-encoding table as .npy, .png or .svg")                   \
    X(embed, "sentence embeddings with a BERT sentence-transformers model")              \
    X(similarity, "cosine similarity matrix of sentence embeddings")                     \
    X(tokenize, "word pieces and ids of a text")                                         \
    X(attention, "attention weights of a model as a heatmap (png, svg, html) or .npy")

#define ATTN_CLI_DECLARE(name, summary) int cmd_##name(int argc, char **argv);
ATTN_CLI_COMMANDS(ATTN_CLI_DECLARE)

typedef struct {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} cli_command;

static const cli_command commands[] = {
#define ATTN_CLI_ENTRY(name, summary) {#name, summary, cmd_##name},
    ATTN_CLI_COMMANDS(ATTN_CLI_ENTRY)
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn VERB [OPTIONS]\n"
            "       attn VERB --help     options of one verb\n"
            "       attn --version\n"
            "\nVerbs:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nExit status: 0 success, 1 failure (bad input file, shape or dtype), 2 usage error.\n");
}

static const cli_command *find(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *verb = argv[1];
    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(verb, "--version") == 0 || strcmp(verb, "-V") == 0) {
        printf("attn %s\n", attn_version());
        return CLI_OK;
    }
    if (strcmp(verb, "help") == 0) {
        if (argc < 3) {
            usage(stdout);
            return CLI_OK;
        }
        const cli_command *c = find(argv[2]);
        if (!c) return cli_usage_error(NULL, "unknown verb '%s'", argv[2]);
        char *hargv[3] = {argv[2], "--help", NULL};
        return c->run(2, hargv);
    }
    const cli_command *c = find(verb);
    if (!c) {
        if (verb[0] == '-') return cli_usage_error(NULL, "unknown option '%s'", verb);
        return cli_usage_error(NULL, "unknown verb '%s'", verb);
    }
    return c->run(argc - 1, argv + 1);
}
