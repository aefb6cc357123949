/* attn attention: a model's attention weights for one text, as a picture, an interactive
 * page or a .npy array. */
#include "cli.h"

#include "attn_bert.h"
#include "attn_npy.h"
#include "attn_viz.h"
#include "attn_viz_html.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model, *outp, *text, *layer_s, *head_s, *fmt_s, *token_s;
    int64_t threads;
} attention_opts;

#define F(f) offsetof(attention_opts, f)
static const cli_option options[] = {
    {"--model", NULL, CLI_STR, F(model),
     .help = "  --model DIR     model directory (config.json, model.safetensors, tokenizer.json)\n"},
    {"--output", "-o", CLI_STR, F(outp),
     .help = "  -o, --output FILE  output file; - = standard output (png, pdf and npy only when it is\n"
             "                  not a terminal); replaced only when complete\n"},
    {"--layer", NULL, CLI_STR, F(layer_s),
     .help = "  --layer L|all   layer index from 0, or all layers (default: the last layer)\n"},
    {"--head", NULL, CLI_STR, F(head_s),
     .help = "  --head H|mean|all  head index from 0, the mean over heads, or every head (default: mean)\n"},
    {"--token", NULL, CLI_STR, F(token_s),
     .help = "  --token I       how token I (index from 0, [CLS] is 0) attends to every token in every\n"
             "                  layer: layers x tokens (rows: layers; --head picks a head or the mean)\n"},
    {"--format", NULL, CLI_STR, F(fmt_s),
     .help = "  --format F      png, svg or pdf heatmap with a colour bar (several layers/heads give a grid\n"
             "                  of panels, layers x heads), html (one self-contained page where layer\n"
             "                  and head are chosen interactively), or npy (float32 [layers?, heads?, L, L]\n"
             "                  keeping the dims that hold more than one choice). Default: from FILE.\n"},
    {"--threads", NULL, CLI_I64, F(threads), 1, 4096, .help = "  --threads N     worker threads\n"},
    CLI_HELP_LINE("  -h, --help      this help\n"
                  "  --              end of options: a TEXT that starts with '-' follows\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn attention --model DIR [--layer L|all] [--head H|mean|all] [--token I]\n"
            "                      [--format png|svg|pdf|html|npy] TEXT -o FILE\n"
            "\n"
            "Runs the encoder on TEXT and writes its softmax attention weights (rows = queries,\n"
            "columns = keys, tokens on both axes).\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
    fprintf(f,
            "Texts longer than the model's maximum (256 word pieces for all-MiniLM-L6-v2) are truncated,\n"
            "as sentence-transformers does; a note on stderr says so.\n");
}

static int one_text(void *base, const char *verb, const char *arg) {
    attention_opts *o = (attention_opts *)base;
    if (o->text) return cli_usage_error(verb, "give one TEXT (quote it; put -- before a text that starts with '-')");
    o->text = arg;
    return CLI_OK;
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

/* the output format from --format or the file name; CLI_OK or a usage error */
static int pick_format(const attention_opts *o, int *fmt) {
    const char *fmt_s = o->fmt_s, *outp = o->outp, *fs = fmt_s ? fmt_s : "";
    *fmt = F_NONE;
    if (!strcmp(fs, "png") || (!fmt_s && cli_ends_with(outp, ".png"))) *fmt = F_PNG;
    else if (!strcmp(fs, "svg") || (!fmt_s && cli_ends_with(outp, ".svg"))) *fmt = F_SVG;
    else if (!strcmp(fs, "pdf") || (!fmt_s && cli_ends_with(outp, ".pdf"))) *fmt = F_PDF;
    else if (!strcmp(fs, "html") || (!fmt_s && (cli_ends_with(outp, ".html") || cli_ends_with(outp, ".htm")))) *fmt = F_HTML;
    else if (!strcmp(fs, "npy") || (!fmt_s && cli_ends_with(outp, ".npy"))) *fmt = F_NPY;
    if (*fmt == F_NONE)
        return fmt_s ? cli_usage_error("attention", "--format must be png, svg, pdf, html or npy, not '%s'", fmt_s)
                     : cli_usage_error("attention", "cannot tell the format from '%s'; give --format", outp);
    return CLI_OK;
}

/* the options that must be there and the combinations that make no sense */
static int check_options(const attention_opts *o, int *fmt) {
    if (!o->model || !*o->model) return cli_usage_error("attention", "--model DIR is required");
    if (!o->text) return cli_usage_error("attention", "TEXT is required");
    if (!o->outp) return cli_usage_error("attention", "-o FILE is required");
    int rc = pick_format(o, fmt);
    if (rc != CLI_OK) return rc;
    if (o->token_s && (*fmt == F_HTML || *fmt == F_NPY))
        return cli_usage_error("attention", "--token draws a picture: use png, svg or pdf");
    if (o->token_s && o->layer_s) return cli_usage_error("attention", "--token shows every layer; drop --layer");
    if (o->token_s && !strcmp(o->head_s, "all"))
        return cli_usage_error("attention", "--token takes one head or the mean, not all heads");
    return CLI_OK;
}

/* One run of the encoder: its weights att [NL, H, L, L] and the tokens of the text. */
typedef struct {
    attn_bert *m;
    const attn_tokenizer *tok;
    int64_t NL, H, E, L;
    int32_t *ids;
    float *att, *hid;
    const char **tokens;
    attn_arena arena;
} att_run;

static void run_free(att_run *r) {
    free(r->ids);
    free(r->att);
    free(r->hid);
    free(r->tokens);
    attn_arena_free(&r->arena);
    attn_bert_free(r->m);
}

static int run_model(att_run *r, const char *text) {
    const attn_bert_config *c = attn_bert_get_config(r->m);
    int64_t L = 0;
    r->ids = (int32_t *)malloc(sizeof(int32_t) * (size_t)c->max_seq_len);
    if (!r->ids) return cli_error("out of memory");
    if (attn_tokenizer_encode(r->tok, text, strlen(text), 1, c->max_seq_len, r->ids, &L, c->max_seq_len, NULL) < 0)
        return cli_lib_error("tokenizing");
    if (L == c->max_seq_len) {
        int64_t full = 0;
        if (attn_tokenizer_encode(r->tok, text, strlen(text), 1, 0, NULL, &full, 0, NULL) < 0 || full > L)
            fprintf(stderr, "attn: note: the text was truncated to the model's %lld word pieces\n", (long long)L);
    }
    r->L = L;
    r->att = (float *)malloc(sizeof(float) * (size_t)(r->NL * r->H * L * L));
    r->hid = (float *)malloc(sizeof(float) * (size_t)(L * r->E));
    if (!r->att || !r->hid) return cli_error("out of memory");
    attn_bert_extra ex = {NULL, r->att};
    int64_t len = L;
    if (attn_bert_forward(r->m, r->hid, &ex, r->ids, &len, 1, L, &r->arena) < 0) return cli_lib_error("running the model");
    r->tokens = (const char **)malloc(sizeof(char *) * (size_t)L);
    if (!r->tokens) return cli_error("out of memory");
    for (int64_t i = 0; i < L; i++) r->tokens[i] = attn_tokenizer_id_to_token(r->tok, r->ids[i]);
    return CLI_OK;
}

static attn_viz_format viz_format(int fmt) {
    return fmt == F_PNG ? ATTN_VIZ_PNG : fmt == F_SVG ? ATTN_VIZ_SVG : ATTN_VIZ_PDF;
}

/* layers x heads panels of [L, L] for the selection (lsel: -1 all; hsel: -1 all, -2 mean) */
static int write_selection(const att_run *r, const char *path, int fmt, int64_t lsel, int64_t hsel) {
    const int64_t NL = r->NL, H = r->H, L = r->L;
    int64_t nl = lsel == -1 ? NL : 1, nh = hsel == -1 ? H : 1;
    float *sel = (float *)malloc(sizeof(float) * (size_t)(nl * nh * L * L));
    char **caps = (char **)calloc((size_t)(nl * nh), sizeof(char *));
    int rc = CLI_OK;
    if (!sel || !caps) {
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
                    for (int64_t h = 0; h < H; h++) s += r->att[((l * H + h) * L * L) + q];
                    dst[q] = (float)(s / (double)H);
                } else {
                    int64_t h = hsel == -1 ? hi : hsel;
                    dst[q] = r->att[(l * H + h) * L * L + q];
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
        goto done;
    }
    char title[256];
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.row_labels = r->tokens;
    o.col_labels = r->tokens;
    o.x_label = "key";
    o.y_label = "query";
    o.title = title;
    o.format = viz_format(fmt);
    int w;
    if (nl * nh == 1) {
        if (hsel == -2) snprintf(title, sizeof title, "Attention, layer %lld (mean of %lld heads)", (long long)lsel, (long long)H);
        else snprintf(title, sizeof title, "Attention, layer %lld head %lld", (long long)lsel, (long long)hsel);
        attn_tensor t = attn_tensor_f32_2d(sel, L, L);
        w = attn_heatmap_write(path, &t, &o);
    } else {
        snprintf(title, sizeof title, "Attention weights (%s x %s)", nl > 1 ? "layers" : "layer",
                 nh > 1 ? "heads" : (hsel == -2 ? "mean of heads" : "head"));
        attn_tensor t = attn_tensor_f32_4d(sel, nl, nh, L, L);
        w = attn_heatmap_grid_write(path, &t, 0, (const char *const *)caps, &o);
    }
    if (w < 0) rc = cli_lib_error(NULL);
done:
    if (caps)
        for (int64_t i = 0; i < nl * nh; i++) free(caps[i]);
    free(caps);
    free(sel);
    return rc;
}

/* the picture, page or array of the selection, written to path (the staging file) */
static int write_output(const att_run *r, const attention_opts *o, const char *path, int fmt, int64_t lsel, int64_t hsel) {
    attn_tensor all = attn_tensor_f32_4d(r->att, r->NL, r->H, r->L, r->L);
    if (o->token_s) {
        int64_t ti;
        if (cli_parse_i64("attention", "--token", o->token_s, 0, r->L - 1, &ti) != CLI_OK) return CLI_USAGE;
        attn_heatmap_opts ho = attn_heatmap_opts_default();
        ho.format = viz_format(fmt);
        if (attn_token_attention_write(path, &all, r->tokens, ti, hsel >= 0 ? hsel : -1, &ho) < 0) return cli_lib_error(NULL);
        return CLI_OK;
    }
    if (fmt == F_HTML) {
        char title[256];
        snprintf(title, sizeof title, "Attention weights: %.180s", o->text);
        if (attn_attention_html(path, &all, r->tokens, title, lsel, hsel >= 0 ? hsel : -1) < 0) return cli_lib_error(NULL);
        return CLI_OK;
    }
    return write_selection(r, path, fmt, lsel, hsel);
}

static int attention_run(const attention_opts *o, int fmt, cli_outputs *outs) {
    att_run r;
    memset(&r, 0, sizeof r);
    attn_arena_init(&r.arena, 0);
    int rc = CLI_OK;
    int64_t lsel, hsel = -2;
    if (attn_bert_load(&r.m, o->model) < 0) {
        rc = cli_lib_error("loading the model");
        goto done;
    }
    const attn_bert_config *c = attn_bert_get_config(r.m);
    r.tok = attn_bert_tokenizer(r.m);
    r.NL = c->n_layers, r.H = c->n_heads, r.E = c->d_model;
    lsel = r.NL - 1;
    if ((o->layer_s && parse_sel("attention", "--layer", o->layer_s, r.NL, 0, &lsel) != CLI_OK) ||
        parse_sel("attention", "--head", o->head_s, r.H, 1, &hsel) != CLI_OK) {
        rc = CLI_USAGE;
        goto done;
    }
    if ((rc = run_model(&r, o->text)) != CLI_OK) goto done;
    const char *path = cli_output_path(outs, 0); /* the staging file; the target is replaced at the end */
    rc = path ? write_output(&r, o, path, fmt, lsel, hsel) : CLI_FAIL;
done:
    run_free(&r);
    return rc;
}

int cmd_attention(int argc, char **argv) {
    attention_opts o = {0};
    o.head_s = "mean";
    int fmt = F_NONE, rc = cli_parse(argc, argv, "attention", options, &o, NULL, NULL, one_text, usage);
    if (rc != CLI_OK) return cli_parsed(rc);
    if ((rc = check_options(&o, &fmt)) != CLI_OK) return rc;
    cli_outputs outs;
    cli_outputs_init(&outs, "attention");
    if ((rc = cli_output_add(&outs, "-o", o.outp, fmt == F_PNG || fmt == F_PDF || fmt == F_NPY)) ||
        (rc = cli_output_input(&outs, "--model", o.model)))
        return rc;
    if (o.threads > 0) attn_set_num_threads((int)o.threads);
    return cli_outputs_finish(&outs, attention_run(&o, fmt, &outs));
}
