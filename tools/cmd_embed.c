/* attn embed: sentence embeddings with a BERT sentence-transformers model. */
#include "cli.h"
#include "mpi_cli.h"
#include "progress.h"
#include "texts.h"

#include "attn_bert.h"
#include "attn_npy.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef struct {
    cli_texts texts; /* first: cli_texts_take */
    const char *model, *outp;
    int64_t batch, threads;
    int progress;
} embed_opts;

#define F(f) offsetof(embed_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model),
     .help = "  --model DIR        model directory (config.json, model.safetensors, tokenizer.json, ...)\n"},
    {"--output", "-o", CLI_STR, F(outp),
     .help = "  -o, --output FILE  write float32 [N, E] as .npy (- = standard output when it is not a\n"
             "                     terminal; a .txt / .json / .csv name is refused); otherwise one\n"
             "                     JSON array per line on standard output\n"},
    {"--batch", NULL, CLI_I64, F(batch), 1, 4096, .help = "  --batch N          sentences per forward pass (default 32)\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N        worker threads (default: all cores)\n"},
    CLI_PROGRESS_OPTIONS(F(progress), "         ", "      "),
    CLI_HELP_LINE("  -h, --help         this help\n"
                  "  --                 end of options: TEXTs that start with '-' follow\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn embed --model DIR [-o OUT.npy] [--batch N] [--threads N] [TEXT ...]\n"
            "\n"
            "Sentence embeddings as sentence-transformers computes them (tokenize, BERT encoder,\n"
            "mean pooling over real tokens, L2 normalisation when the model has it).\n"
            "Without TEXT arguments (or with the one argument -), reads one sentence per line from\n"
            "standard input (a blank line is an empty sentence). Texts longer than the model's maximum\n"
            "are truncated (256 word pieces for all-MiniLM-L6-v2), as sentence-transformers does.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
    fprintf(f,
            "Input lines must be UTF-8 (invalid UTF-8 is an error naming the line and byte); a NUL is\n"
            "removed, as the reference tokenizer does; a read error stops the run with exit 1 and\n"
            "nothing written.\n"
            "A progress bar (done/total, sentences/s, time left) goes to stderr when it is a terminal.\n");
}

int cmd_embed(int argc, char **argv) {
    embed_opts o = {0};
    o.batch = 32;
    o.progress = CLI_PROGRESS_AUTO;
    int rc;
    if (!cli_parse_texts(argc, argv, "embed", options, &o, &o.model, usage, &rc)) return rc;
    cli_texts texts = o.texts;
    if (texts.n == 1 && strcmp(texts.items[0], "-") == 0) cli_texts_free(&texts); /* "-": standard input (it embedded "-") */
    for (int64_t i = 0; i < texts.n; i++)
        if (strcmp(texts.items[i], "-") == 0) {
            cli_texts_free(&texts);
            return cli_usage_error("embed", "- (standard input) must be the only TEXT");
        }
    const char *model = o.model, *outp = o.outp;
    const int64_t batch = o.batch, threads = o.threads;
    cli_outputs outs;
    cli_outputs_init(&outs, "embed");
    if ((rc = cli_output_add(&outs, "-o", outp, 1)) || (rc = cli_output_input(&outs, "--model", model))) {
        cli_texts_free(&texts);
        return rc;
    }
    /* -o is always NumPy; a text-like name means the user wanted the JSON lines (new-user finding) */
    static const char *const text_ext[] = {".txt", ".json", ".jsonl", ".csv", ".tsv"};
    const size_t ol = outp ? strlen(outp) : 0;
    for (size_t i = 0; i < sizeof text_ext / sizeof text_ext[0]; i++) {
        const size_t el = strlen(text_ext[i]);
        if (ol > el && strcasecmp(outp + ol - el, text_ext[i]) == 0) {
            cli_texts_free(&texts);
            rc = cli_usage_error("embed", "-o %s: -o writes a .npy file (float32 [N, E]); for one JSON array per line leave -o out and "
                                          "redirect standard output (> %s)", outp, outp);
            return cli_outputs_finish(&outs, rc);
        }
    }
    if (threads > 0) attn_set_num_threads((int)threads);
    /* under mpirun: the texts split across the ranks, one output in input order (tools/mpi_cli.c) */
    if (cli_mpi_launched()) return cli_embed_mpi(&texts, model, outp, batch, &outs);
    if (texts.n == 0 && cli_texts_read_stdin(&texts) < 0) {
        int e = errno;
        cli_texts_free(&texts);
        return cli_error("reading standard input failed: %s; nothing was written", strerror(e));
    }
    attn_bert *m = NULL;
    if (attn_bert_load(&m, model) < 0) {
        cli_texts_free(&texts);
        return cli_lib_error("loading the model");
    }
    int64_t E = attn_bert_get_config(m)->d_model;
    float *emb = (float *)malloc(sizeof(float) * (size_t)(texts.n > 0 ? texts.n : 1) * (size_t)E);
    if (!emb) {
        rc = cli_error("out of memory");
        goto done;
    }
    cli_progress bar;
    cli_progress_start(&bar, o.progress == CLI_PROGRESS_AUTO && texts.n <= batch ? 0 : o.progress, "embed", "sentences",
                       (double)texts.n);
    int er = attn_bert_embed_n(m, emb, (const char *const *)texts.items, texts.lens, texts.n, batch,
                               bar.on ? cli_progress_cb : NULL, &bar);
    cli_progress_end(&bar);
    if (er < 0) {
        rc = cli_lib_error("embedding");
        goto done;
    }
    if (outp) {
        attn_tensor t = attn_tensor_f32_2d(emb, texts.n, E);
        const char *path = cli_output_path(&outs, 0);
        if (!path) rc = CLI_FAIL;
        else if (attn_npy_save(path, &t) < 0) rc = cli_lib_error(NULL);
    } else {
        for (int64_t i = 0; i < texts.n; i++) {
            putchar('[');
            for (int64_t e = 0; e < E; e++) printf(e ? ", %.9g" : "%.9g", emb[i * E + e]);
            puts("]");
        }
        if (fflush(stdout) != 0) rc = cli_stdout_error();
    }
done:
    free(emb);
    attn_bert_free(m);
    cli_texts_free(&texts);
    return cli_outputs_finish(&outs, rc);
}
