/* attn quantize: a GGUF model in another weight type (llama.cpp's llama-quantize rules). */
#include "cli.h"

#include "attn_gguf.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *pos[3];
    int npos;
    int64_t threads;
} quantize_opts;

#define F(f) offsetof(quantize_opts, f)
static const cli_option options[] = {
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N    worker threads (1..4096; default: all cores)\n"},
    CLI_HELP_LINE("  -h, --help     this help\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn quantize [--threads N] IN.gguf OUT.gguf TYPE\n"
            "\n"
            "Writes IN's weights in TYPE to OUT (metadata copied, general.file_type set), as\n"
            "llama.cpp's llama-quantize does without an importance matrix: its reference\n"
            "quantizers and its per-tensor mixes (e.g. Q4_K_M keeps the output and, on some\n"
            "layers, attn_v and ffn_down at Q6_K; rows that are not a multiple of 256 fall back\n"
            "to Q5_0 / Q5_1 / Q8_0). Norms and other 1-D tensors are copied.\n"
            "TYPE: Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q3_K_M, Q3_K_S, Q3_K_L,\n"
            "      Q4_K_S, Q5_K_S, Q2_K, F16 (case-insensitive; Q3_K, Q4_K, Q5_K = the _M mixes).\n"
            "IN may be F32, F16, BF16 or already quantized (requantizing loses accuracy: said on\n"
            "stderr). OUT is written only when complete (a temporary file renamed over it; - =\n"
            "standard output, not a terminal); OUT naming IN (also through a link) is refused.\n"
            "The tensor types written and the sizes go to stderr.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
}

static int positional(void *base, const char *verb, const char *arg) {
    quantize_opts *o = (quantize_opts *)base;
    if (o->npos == 3) return cli_usage_error(verb, "give IN.gguf OUT.gguf TYPE");
    o->pos[o->npos++] = arg;
    return CLI_OK;
}

int cmd_quantize(int argc, char **argv) {
    quantize_opts opt = {{NULL, NULL, NULL}, 0, 0};
    int pr = cli_parse(argc, argv, "quantize", options, &opt, NULL, NULL, positional, usage);
    if (pr != CLI_OK) return cli_parsed(pr);
    if (opt.npos < 3) return cli_usage_error("quantize", "give IN.gguf OUT.gguf TYPE");
    const char *in = opt.pos[0], *out = opt.pos[1], *type = opt.pos[2];
    if (attn_gguf_ftype_default(type) < 0) return cli_usage_error("quantize", "unknown TYPE '%s'", type);
    cli_outputs outs;
    cli_outputs_init(&outs, "quantize");
    int rc = cli_output_add(&outs, "OUT", out, 1);
    if (rc || (rc = cli_output_input(&outs, "IN", in))) return rc;
    attn_gguf *g = NULL;
    if (attn_gguf_open(&g, in) < 0) return cli_outputs_finish(&outs, cli_lib_error(NULL));
    /* quantized input: say which types are requantized */
    char req[128] = "";
    int seen[ATTN_QT_COUNT] = {0};
    for (int64_t i = 0; i < attn_gguf_n_tensors(g); i++) {
        attn_gguf_tensor t;
        attn_gguf_tensor_at(g, i, &t);
        if (attn_qtype_block(t.type) > 1 && (int)t.type < ATTN_QT_COUNT && !seen[t.type]) {
            seen[t.type] = 1;
            snprintf(req + strlen(req), sizeof req - strlen(req), "%s%s", *req ? ", " : "", attn_qtype_name(t.type));
        }
    }
    attn_gguf_close(g);
    if (*req)
        fprintf(stderr, "attn quantize: warning: %s holds quantized weights (%s); requantizing them loses accuracy "
                        "(quantize from an F32/F16/BF16 file where you can)\n", in, req);
    int64_t counts[ATTN_QT_COUNT];
    const char *path = cli_output_path(&outs, 0);
    if (!path) rc = CLI_FAIL;
    else if (attn_gguf_quantize(in, path, type, (int)opt.threads, counts) < 0) rc = cli_lib_error(NULL);
    rc = cli_outputs_finish(&outs, rc);
    if (rc != CLI_OK) return rc;
    struct stat si, so;
    fprintf(stderr, "%s -> %s (%s):", in, out, type);
    for (int t = 0; t < ATTN_QT_COUNT; t++)
        if (counts[t]) fprintf(stderr, " %lld %s", (long long)counts[t], attn_qtype_name((attn_qtype)t));
    if (stat(in, &si) == 0 && stat(out, &so) == 0 && S_ISREG(so.st_mode))
        fprintf(stderr, " tensors; %.1f MiB -> %.1f MiB\n", (double)si.st_size / 1048576.0, (double)so.st_size / 1048576.0);
    else
        fprintf(stderr, " tensors\n");
    return CLI_OK;
}
