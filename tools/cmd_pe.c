/* attn pe: the sinusoidal positional-encoding table (Vaswani et al. 2017 §3.5) as .npy, or
 * as a heatmap picture (position down, dimension across, diverging colours). */
#include "cli.h"

#include "attn_npy.h"
#include "attn_ops.h"
#include "attn_viz.h"

#include <stdlib.h>
#include <string.h>

enum { FMT_NONE, FMT_NPY, FMT_PNG, FMT_SVG, FMT_PDF };

typedef struct {
    int64_t D, L, offset;
    const char *out;
    int fmt;
} pe_opts;

#define F(f) offsetof(pe_opts, f)
static const char *const formats[] = {"npy", "png", "svg", "pdf", NULL};
static const int format_ids[] = {FMT_NPY, FMT_PNG, FMT_SVG, FMT_PDF};
static const cli_option options[] = {
    {"--d-model", NULL, CLI_I64, F(D), 1, 65536, .help = "  --d-model D        model width (1..65536)\n"},
    {"--len", NULL, CLI_I64, F(L), 1, 1 << 20, .help = "  --len L            number of positions (1..1048576; D*L <= 2^28)\n"},
    {"--offset", NULL, CLI_I64, F(offset), 0, (int64_t)1 << 40, .help = "  --offset P         first position (default 0)\n"},
    {"--output", "-o", CLI_STR, F(out),
     .help = "  -o, --output FILE  output file (- = standard output; npy, png and pdf only when it is\n"
             "                     not a terminal); replaced only when complete\n"},
    {"--format", NULL, CLI_CHOICE, F(fmt), .choices = formats, .values = format_ids,
     .help = "  --format F         npy, png, svg or pdf (default: from FILE's extension)\n"},
    CLI_HELP_LINE("  -h, --help         this help\n"),
    {0}};

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn pe --d-model D --len L -o FILE [--format npy|png|svg|pdf] [--offset P]\n"
            "\n"
            "Writes the sinusoidal positional-encoding table [L, D] (float32):\n"
            "  PE[pos, 2i] = sin(pos / 10000^(2i/D)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/D))\n"
            "for positions P .. P+L-1 (Vaswani et al. 2017, section 3.5). D may be odd.\n"
            "\n"
            "Options:\n");
    cli_print_options(f, options);
    fprintf(f,
            "The pictures put the position on the y axis and the dimension on the x axis, with a\n"
            "blue-white-red colour map over [-1, 1] and a colour bar.\n");
}

static int write_picture(const char *path, int fmt, const attn_tensor *t, int64_t D, int64_t L,
                         int64_t offset) {
    /* numeric tick labels for every position and dimension; the writer thins them */
    int rc = CLI_FAIL;
    char *text = malloc((size_t)(L + D) * 24);
    const char **rl = malloc(sizeof(char *) * (size_t)L), **cl = malloc(sizeof(char *) * (size_t)D);
    if (!text || !rl || !cl) {
        cli_error("out of memory");
        goto done;
    }
    char *p = text;
    for (int64_t i = 0; i < L; i++) {
        rl[i] = p;
        p += snprintf(p, 24, "%lld", (long long)(offset + i)) + 1;
    }
    for (int64_t i = 0; i < D; i++) {
        cl[i] = p;
        p += snprintf(p, 24, "%lld", (long long)i) + 1;
    }
    char title[160];
    snprintf(title, sizeof title, "Sinusoidal positional encoding (d_model = %lld, %lld positions)",
             (long long)D, (long long)L);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.cmap = ATTN_CMAP_DIVERGING;
    o.has_range = 1;
    o.vmin = -1.0f;
    o.vmax = 1.0f;
    o.title = title;
    o.row_labels = rl;
    o.col_labels = cl;
    o.x_label = "dimension";
    o.y_label = "position";
    if (D <= 2048 && L <= 2048) { /* a wide picture like the classic plot; else automatic */
        int64_t cw = 800 / D, ch = 480 / L;
        o.cell_w = (int)(cw < 1 ? 1 : cw > 24 ? 24 : cw);
        o.cell_h = (int)(ch < 1 ? 1 : ch > 24 ? 24 : ch);
    }
    o.format = fmt == FMT_PNG ? ATTN_VIZ_PNG : fmt == FMT_SVG ? ATTN_VIZ_SVG : ATTN_VIZ_PDF;
    int r = attn_heatmap_write(path, t, &o);
    if (r < 0) cli_lib_error(NULL);
    else rc = CLI_OK;
done:
    free(text);
    free(rl);
    free(cl);
    return rc;
}

int cmd_pe(int argc, char **argv) {
    pe_opts o = {-1, -1, 0, NULL, FMT_NONE};
    int pr = cli_parse(argc, argv, "pe", options, &o, NULL, NULL, NULL, usage);
    if (pr != CLI_OK) return cli_parsed(pr);
    const int64_t D = o.D, L = o.L, offset = o.offset;
    const char *out = o.out;
    int fmt = o.fmt;
    if (D < 0) return cli_usage_error("pe", "missing --d-model D");
    if (L < 0) return cli_usage_error("pe", "missing --len L");
    if (!out) return cli_usage_error("pe", "missing -o FILE");
    if (D * L > ((int64_t)1 << 28))
        return cli_usage_error("pe", "table of %lld x %lld is too large (at most 2^28 values)",
                               (long long)L, (long long)D);
    if (fmt == FMT_NONE) {
        if (cli_ends_with(out, ".npy")) fmt = FMT_NPY;
        else if (cli_ends_with(out, ".png")) fmt = FMT_PNG;
        else if (cli_ends_with(out, ".svg")) fmt = FMT_SVG;
        else if (cli_ends_with(out, ".pdf")) fmt = FMT_PDF;
        else return cli_usage_error("pe", "cannot tell the format of '%s'; use --format npy|png|svg|pdf", out);
    }

    cli_outputs outs;
    cli_outputs_init(&outs, "pe");
    int rc = cli_output_add(&outs, "-o", out, fmt != FMT_SVG);
    if (rc) return rc;
    float *buf = malloc((size_t)(D * L) * sizeof(float));
    if (!buf) return cli_error("out of memory");
    attn_tensor t = attn_tensor_f32_2d(buf, L, D);
    const char *path = NULL;
    if (attn_pe_sinusoidal(&t, offset) < 0) rc = cli_lib_error("pe");
    else if (!(path = cli_output_path(&outs, 0))) rc = CLI_FAIL;
    else if (fmt == FMT_NPY) {
        if (attn_npy_save(path, &t) < 0) rc = cli_lib_error(NULL);
    } else {
        rc = write_picture(path, fmt, &t, D, L, offset);
    }
    free(buf);
    return cli_outputs_finish(&outs, rc);
}
