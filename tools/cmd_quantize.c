/* attn quantize: a GGUF model in another weight type (llama.cpp's llama-quantize rules). */
#include "cli.h"

#include "attn_gguf.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
            "stderr). OUT is written to a temporary file renamed over it when complete; OUT\n"
            "naming IN (also through a link) is refused.\n"
            "\n"
            "Options:\n"
            "  --threads N    worker threads (1..4096; default: all cores)\n"
            "  -h, --help     this help\n");
}

int cmd_quantize(int argc, char **argv) {
    const char *pos[3] = {NULL, NULL, NULL};
    int npos = 0;
    int64_t threads = 0;
    cli_args a = cli_args_start(argc, argv, "quantize");
    while (cli_more(&a)) {
        const char *val;
        int r;
        if (cli_help(&a)) {
            usage(stdout);
            return CLI_OK;
        } else if ((r = cli_opt(&a, NULL, "--threads", &val))) {
            if (r < 0 || cli_parse_i64("quantize", "--threads", val, 1, 4096, &threads) != CLI_OK) return CLI_USAGE;
        } else if (cli_positional(&a, &val)) {
            if (npos == 3) return cli_usage_error("quantize", "give IN.gguf OUT.gguf TYPE");
            pos[npos++] = val;
        } else {
            return cli_unknown(&a);
        }
    }
    if (npos < 3) return cli_usage_error("quantize", "give IN.gguf OUT.gguf TYPE");
    const char *in = pos[0], *out = pos[1], *type = pos[2];
    if (attn_gguf_ftype_default(type) < 0) return cli_usage_error("quantize", "unknown TYPE '%s' (see attn quantize --help)", type);
    attn_gguf *g = NULL;
    if (attn_gguf_open(&g, in) < 0) return cli_lib_error(NULL);
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
    if (attn_gguf_quantize(in, out, type, (int)threads, counts) < 0) return cli_lib_error(NULL);
    struct stat si, so;
    printf("%s -> %s (%s):", in, out, type);
    for (int t = 0; t < ATTN_QT_COUNT; t++)
        if (counts[t]) printf(" %lld %s", (long long)counts[t], attn_qtype_name((attn_qtype)t));
    if (stat(in, &si) == 0 && stat(out, &so) == 0)
        printf(" tensors; %.1f MiB -> %.1f MiB\n", (double)si.st_size / 1048576.0, (double)so.st_size / 1048576.0);
    else
        printf(" tensors\n");
    if (fflush(stdout) != 0) return cli_error("writing standard output failed");
    return CLI_OK;
}
