/* attn pe: the sinusoidal positional-encoding table (Vaswani et al. 2017 §3.5) as .npy, or
 * as a heatmap picture (position down, dimension across, diverging colours). */
#include "cli.h"

#include "attn_npy.h"
#include "attn_ops.h"
#include "attn_viz.h"

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "Usage: attn pe --d-model D --len L -o FILE [--format npy|png|svg|pdf] [--offset P]\n"
            "\n"
            "Writes the sinusoidal positional-encoding table [L, D] (float32):\n"
            "  PE[pos, 2i] = sin(pos / 10000^(2i/D)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/D))\n"
            "for positions P .. P+L-1 (Vaswani et al. 2017, section 3.5). D may be odd.\n"
            "\n"
            "Options:\n"
            "  --d-model D        model width (1..65536)\n"
            "  --len L            number of positions (1..1048576; D*L <= 2^28)\n"
            "  --offset P         first position (default 0)\n"
            "  -o, --output FILE  output file (- = standard output; npy, png and pdf only when it is\n"
            "                     not a terminal); replaced only when complete\n"
            "  --format F         npy, png, svg or pdf (default: from FILE's extension)\n"
            "  -h, --help         this help\n"
            "The pictures put the position on the y axis and the dimension on the x axis, with a\n"
            "blue-white-red colour map over [-1, 1] and a colour bar.\n");
}

enum { FMT_NONE, FMT_NPY, FMT_PNG, FMT_SVG, FMT_PDF };

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
    int64_t D = -1, L = -1, offset = 0;
    const char *out = NULL;
    int fmt = FMT_NONE;

    cli_args a = cli_args_start(argc, argv, "pe");
    while (cli_more(&a)) {
        const char *val = NULL;
        int r;
        if (cli_help(&a)) {
            usage(stdout);
            return CLI_OK;
        } else if ((r = cli_opt(&a, NULL, "--d-model", &val))) {
            if (r < 0 || cli_parse_i64("pe", "--d-model", val, 1, 65536, &D)) return CLI_USAGE;
        } else if ((r = cli_opt(&a, NULL, "--len", &val))) {
            if (r < 0 || cli_parse_i64("pe", "--len", val, 1, 1 << 20, &L)) return CLI_USAGE;
        } else if ((r = cli_opt(&a, NULL, "--offset", &val))) {
            if (r < 0 || cli_parse_i64("pe", "--offset", val, 0, (int64_t)1 << 40, &offset)) return CLI_USAGE;
        } else if ((r = cli_opt(&a, "-o", "--output", &val))) {
            if (r < 0) return CLI_USAGE;
            out = val;
        } else if ((r = cli_opt(&a, NULL, "--format", &val))) {
            if (r < 0) return CLI_USAGE;
            if (strcmp(val, "npy") == 0) fmt = FMT_NPY;
            else if (strcmp(val, "png") == 0) fmt = FMT_PNG;
            else if (strcmp(val, "svg") == 0) fmt = FMT_SVG;
            else if (strcmp(val, "pdf") == 0) fmt = FMT_PDF;
            else return cli_usage_error("pe", "--format must be npy, png, svg or pdf, got '%s'", val);
        } else {
            return cli_unknown(&a);
        }
    }
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
