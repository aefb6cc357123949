/* attn attention: a model's attention weights for one text, as a picture, an interactive
 * page or a .npy array. */
#include "cli.h"

#include "attn_bert.h"
#include "attn_npy.h"
#include "attn_viz.h"
#include "attn_viz_html.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn attention --model DIR [--layer L|all] [--head H|mean|all] [--token I]\n"
            "                      [--format png|svg|pdf|html|npy] TEXT -o FILE\n"
            "\n"
            "Runs the encoder on TEXT and writes its softmax attention weights (rows = queries,\n"
            "columns = keys, tokens on both axes).\n"
            "\n"
            "Options:\n"
            "  --model DIR     model directory (config.json, model.safetensors, tokenizer.json)\n"
            "  -o, --output FILE  output file; - = standard output (png, pdf and npy only when it is\n"
            "                  not a terminal); replaced only when complete\n"
            "  --layer L|all   layer index from 0, or all layers (default: the last layer)\n"
            "  --head H|mean|all  head index from 0, the mean over heads, or every head (default: mean)\n"
            "  --token I       how token I (index from 0, [CLS] is 0) attends to every token in every\n"
            "                  layer: layers x tokens (rows: layers; --head picks a head or the mean)\n"
            "  --format F      png, svg or pdf heatmap with a colour bar (several layers/heads give a grid\n"
            "                  of panels, layers x heads), html (one self-contained page where layer\n"
            "                  and head are chosen interactively), or npy (float32 [layers?, heads?, L, L]\n"
            "                  keeping the dims that hold more than one choice). Default: from FILE.\n"
            "  --threads N     worker threads\n"
            "  -h, --help      this help\n"
            "  --              end of options: a TEXT that starts with '-' follows\n"
            "Texts longer than the model's maximum (256 word pieces for all-MiniLM-L6-v2) are truncated,\n"
            "as sentence-transformers does; a note on stderr says so.\n");
}

enum { F_NONE, F_PNG, F_SVG, F_PDF, F_HTML, F_NPY };

static int parse_sel(const char *verb, const char *opt, const char *s, int64_t n, int allow_mean, int64_t *out) {
    if (!strcmp(s, "all")) {
        *out = -1;
        return CLI_OK;
    }
    if (allow_mean && !strcmp(s, "mean")) {
        *out = -2;
        return CLI_OK;
    }
    return cli_parse_i64(verb, opt, s, 0, n - 1, out);
}

int cmd_attention(int argc, char **argv) {
    const char *model = NULL, *outp = NULL, *text = NULL, *layer_s = NULL, *head_s = "mean", *fmt_s = NULL;
    const char *token_s = NULL;
    int64_t threads = 0;
    cli_args a = cli_args_start(argc, argv, "attention");
    while (cli_more(&a)) {
        const char *val;
        int r;
        if (cli_help(&a)) {
            usage(stdout);
            return CLI_OK;
        } else if ((r = cli_opt(&a, NULL, "--model", &val))) {
            if (r < 0) return CLI_USAGE;
            model = val;
        } else if ((r = cli_opt(&a, "-o", "--output", &val))) {
            if (r < 0) return CLI_USAGE;
            outp = val;
        } else if ((r = cli_opt(&a, NULL, "--layer", &val))) {
            if (r < 0) return CLI_USAGE;
            layer_s = val;
        } else if ((r = cli_opt(&a, NULL, "--head", &val))) {
            if (r < 0) return CLI_USAGE;
            head_s = val;
        } else if ((r = cli_opt(&a, NULL, "--token", &val))) {
            if (r < 0) return CLI_USAGE;
            token_s = val;
        } else if ((r = cli_opt(&a, NULL, "--format", &val))) {
            if (r < 0) return CLI_USAGE;
            fmt_s = val;
        } else if ((r = cli_opt(&a, NULL, "--threads", &val))) {
            if (r < 0 || cli_parse_i64("attention", "--threads", val, 1, 4096, &threads) != CLI_OK) return CLI_USAGE;
        } else if (cli_positional(&a, &val)) {
            if (text) return cli_usage_error("attention", "give one TEXT (quote it; put -- before a text that starts with '-')");
            text = val;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!model || !*model) return cli_usage_error("attention", "--model DIR is required");
    if (!text) return cli_usage_error("attention", "TEXT is required");
    if (!outp) return cli_usage_error("attention", "-o FILE is required");
    int fmt = F_NONE;
    const char *fs = fmt_s ? fmt_s : "";
    if (!strcmp(fs, "png") || (!fmt_s && cli_ends_with(outp, ".png"))) fmt = F_PNG;
    else if (!strcmp(fs, "svg") || (!fmt_s && cli_ends_with(outp, ".svg"))) fmt = F_SVG;
    else if (!strcmp(fs, "pdf") || (!fmt_s && cli_ends_with(outp, ".pdf"))) fmt = F_PDF;
    else if (!strcmp(fs, "html") || (!fmt_s && (cli_ends_with(outp, ".html") || cli_ends_with(outp, ".htm")))) fmt = F_HTML;
    else if (!strcmp(fs, "npy") || (!fmt_s && cli_ends_with(outp, ".npy"))) fmt = F_NPY;
    if (fmt == F_NONE)
        return fmt_s ? cli_usage_error("attention", "--format must be png, svg, pdf, html or npy, not '%s'", fmt_s)
                     : cli_usage_error("attention", "cannot tell the format from '%s'; give --format", outp);
    if (token_s && (fmt == F_HTML || fmt == F_NPY))
        return cli_usage_error("attention", "--token draws a picture: use png, svg or pdf");
    if (token_s && layer_s) return cli_usage_error("attention", "--token shows every layer; drop --layer");
    if (token_s && !strcmp(head_s, "all"))
        return cli_usage_error("attention", "--token takes one head or the mean, not all heads");
    cli_outputs outs;
    cli_outputs_init(&outs, "attention");
    int orc;
    if ((orc = cli_output_add(&outs, "-o", outp, fmt == F_PNG || fmt == F_PDF || fmt == F_NPY)) ||
        (orc = cli_output_input(&outs, "--model", model)))
        return orc;
    if (threads > 0) attn_set_num_threads((int)threads);

    attn_bert *m = NULL;
    if (attn_bert_load(&m, model) < 0) return cli_lib_error("loading the model");
    const attn_bert_config *c = attn_bert_get_config(m);
    const attn_tokenizer *tok = attn_bert_tokenizer(m);
    int64_t NL = c->n_layers, H = c->n_heads, E = c->d_model;
    int64_t lsel = NL - 1, hsel = -2;
    int rc = CLI_OK;
    int32_t *ids = NULL;
    float *att = NULL, *hid = NULL, *sel = NULL;
    char **caps = NULL;
    attn_arena arena;
    attn_arena_init(&arena, 0);
    if (layer_s && parse_sel("attention", "--layer", layer_s, NL, 0, &lsel) != CLI_OK) {
        rc = CLI_USAGE;
        goto done;
    }
    if (parse_sel("attention", "--head", head_s, H, 1, &hsel) != CLI_OK) {
        rc = CLI_USAGE;
        goto done;
    }
    int64_t L = 0;
    ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)c->max_seq_len);
    if (!ids) {
        rc = cli_error("out of memory");
        goto done;
    }
    if (attn_tokenizer_encode(tok, text, strlen(text), 1, c->max_seq_len, ids, &L, c->max_seq_len, NULL) < 0) {
        rc = cli_lib_error("tokenizing");
        goto done;
    }
    if (L == c->max_seq_len) {
        int64_t full = 0;
        if (attn_tokenizer_encode(tok, text, strlen(text), 1, 0, NULL, &full, 0, NULL) < 0 || full > L)
            fprintf(stderr, "attn: note: the text was truncated to the model's %lld word pieces\n", (long long)L);
    }
    att = (float *)malloc(sizeof(float) * (size_t)(NL * H * L * L));
    hid = (float *)malloc(sizeof(float) * (size_t)(L * E));
    if (!att || !hid) {
        rc = cli_error("out of memory");
        goto done;
    }
    attn_bert_extra ex = {NULL, att};
    int64_t len = L;
    if (attn_bert_forward(m, hid, &ex, ids, &len, 1, L, &arena) < 0) {
        rc = cli_lib_error("running the model");
        goto done;
    }
    const char **tokens = (const char **)malloc(sizeof(char *) * (size_t)L);
    if (!tokens) {
        rc = cli_error("out of memory");
        goto done;
    }
    for (int64_t i = 0; i < L; i++) tokens[i] = attn_tokenizer_id_to_token(tok, ids[i]);
    char title[256];
    const char *path = cli_output_path(&outs, 0); /* the staging file; the target is replaced at the end */
    if (!path) {
        free(tokens);
        rc = CLI_FAIL;
        goto done;
    }
    if (token_s) {
        int64_t ti;
        if (cli_parse_i64("attention", "--token", token_s, 0, L - 1, &ti) != CLI_OK) {
            free(tokens);
            rc = CLI_USAGE;
            goto done;
        }
        attn_tensor all = attn_tensor_f32_4d(att, NL, H, L, L);
        attn_heatmap_opts o = attn_heatmap_opts_default();
        o.format = fmt == F_PNG ? ATTN_VIZ_PNG : fmt == F_SVG ? ATTN_VIZ_SVG : ATTN_VIZ_PDF;
        if (attn_token_attention_write(path, &all, tokens, ti, hsel >= 0 ? hsel : -1, &o) < 0) rc = cli_lib_error(NULL);
        free(tokens);
        goto done;
    }
    if (fmt == F_HTML) {
        attn_tensor all = attn_tensor_f32_4d(att, NL, H, L, L);
        snprintf(title, sizeof title, "Attention weights: %.180s", text);
        if (attn_attention_html(path, &all, tokens, title, lsel, hsel >= 0 ? hsel : -1) < 0) rc = cli_lib_error(NULL);
        free(tokens);
        goto done;
    }
    /* selection -> stack of [L, L] panels, layers x heads */
    int64_t nl = lsel == -1 ? NL : 1, nh = hsel == -1 ? H : 1;
    sel = (float *)malloc(sizeof(float) * (size_t)(nl * nh * L * L));
    caps = (char **)calloc((size_t)(nl * nh), sizeof(char *));
    if (!sel || !caps) {
        free(tokens);
        rc = cli_error("out of memory");
        goto done;
    }
    for (int64_t li = 0; li < nl; li++)
        for (int64_t hi = 0; hi < nh; hi++) {
            int64_t l = lsel == -1 ? li : lsel;
            float *dst = sel + (li * nh + hi) * L * L;
            for (int64_t q = 0; q < L * L; q++) {
                if (hsel == -2) {
                    double s = 0;
                    for (int64_t h = 0; h < H; h++) s += att[((l * H + h) * L * L) + q];
                    dst[q] = (float)(s / (double)H);
                } else {
                    int64_t h = hsel == -1 ? hi : hsel;
                    dst[q] = att[(l * H + h) * L * L + q];
                }
            }
            caps[li * nh + hi] = (char *)malloc(32);
            if (caps[li * nh + hi]) {
                if (hsel == -2) snprintf(caps[li * nh + hi], 32, "layer %lld, mean", (long long)l);
                else snprintf(caps[li * nh + hi], 32, "L%lld H%lld", (long long)l, (long long)(hsel == -1 ? hi : hsel));
            }
        }
    if (fmt == F_NPY) {
        int64_t shape[4];
        int nd = 0;
        if (nl > 1) shape[nd++] = nl;
        if (nh > 1) shape[nd++] = nh;
        shape[nd++] = L;
        shape[nd++] = L;
        attn_tensor t;
        attn_tensor_make(&t, sel, ATTN_F32, nd, shape);
        if (attn_npy_save(path, &t) < 0) rc = cli_lib_error(NULL);
    } else {
        attn_heatmap_opts o = attn_heatmap_opts_default();
        o.row_labels = tokens;
        o.col_labels = tokens;
        o.x_label = "key";
        o.y_label = "query";
        o.title = title;
        o.format = fmt == F_PNG ? ATTN_VIZ_PNG : fmt == F_SVG ? ATTN_VIZ_SVG : ATTN_VIZ_PDF;
        int r;
        if (nl * nh == 1) {
            if (hsel == -2) snprintf(title, sizeof title, "Attention, layer %lld (mean of %lld heads)", (long long)lsel, (long long)H);
            else snprintf(title, sizeof title, "Attention, layer %lld head %lld", (long long)lsel, (long long)hsel);
            attn_tensor t = attn_tensor_f32_2d(sel, L, L);
            r = attn_heatmap_write(path, &t, &o);
        } else {
            snprintf(title, sizeof title, "Attention weights (%s x %s)", nl > 1 ? "layers" : "layer",
                     nh > 1 ? "heads" : (hsel == -2 ? "mean of heads" : "head"));
            attn_tensor t = attn_tensor_f32_4d(sel, nl, nh, L, L);
            r = attn_heatmap_grid_write(path, &t, 0, (const char *const *)caps, &o);
        }
        if (r < 0) rc = cli_lib_error(NULL);
    }
    free(tokens);
done:
    if (caps)
        for (int64_t i = 0; i < (lsel == -1 ? NL : 1) * (hsel == -1 ? H : 1); i++) free(caps[i]);
    free(caps);
    free(sel);
    free(ids);
    free(att);
    free(hid);
    attn_arena_free(&arena);
    attn_bert_free(m);
    return cli_outputs_finish(&outs, rc);
}
