/*
 * attn_viz.h — attention pictures as PNG, SVG or PDF files, drawn with cairo and laid out
 * with pango (font fallback and shaping, so CJK, Arabic, Hebrew, Devanagari ... labels
 * render with real glyphs in their proper order).
 *
 * Every view is drawn by one code path onto a cairo surface; the surface, and so the file
 * format, follows the output path's extension (.png, .svg, .pdf, case-insensitive) unless
 * the options name a format. PNG: 8-bit RGB, one picture pixel per layout pixel. SVG 1.1
 * and PDF: the same picture in vector form, 1 layout pixel = 1 SVG user unit = 1 PDF point.
 *
 * Views (all share attn_heatmap_opts and the layout below):
 *   attn_heatmap_*           one matrix (e.g. one head, or the mean of the heads)
 *   attn_heatmap_grid_*      several matrices of one shape as a grid of panels with one
 *                            shared colour scale (e.g. layers x heads)
 *   attn_token_attention_write   how one query token attends to every key, layer by layer
 *   attn_cross_attention_write   source x target alignment of an encoder-decoder model
 *   attn_image_overlay_write     a vision model's patch attention over the input image
 *
 * A picture has, from top to bottom: an optional title, the panel(s) (one cell per matrix
 * element; row 0 at the top, column 0 at the left) with optional row labels on the left and
 * column labels below (rotated 90 degrees, reading upwards, unless every column label fits
 * within its cell: then level), and on the right a colour bar
 * (top = maximum) with "nice" tick values (1, 2 or 5 times a power of ten apart; see
 * attn_viz_ticks). Labels wider than 160 pixels are cut with an ellipsis. Labels that would
 * overlap are thinned: only every k-th label is drawn, k in 1, 2, 5, 10, 20, 50, ...
 * Text is UTF-8 (invalid bytes are shown as U+FFFD), laid out by pango in the font family
 * list `font` (default ATTN_VIZ_DEFAULT_FONT); characters the first family lacks come from
 * fontconfig's fallback fonts (Debian: fonts-noto-core, fonts-noto-cjk).
 *
 * Colour maps (anchor colours, linearly interpolated in sRGB between equally spaced
 * anchors; values are clamped to [vmin, vmax]; NaN cells are drawn grey #808080):
 *   ATTN_CMAP_VIRIDIS    sequential, perceptually uniform, dark purple -> yellow:
 *                        #440154 #472d7b #3b528b #2c728e #21918c #28ae80 #5ec962 #addc30 #fde725
 *                        (samples of viridis by van der Walt & Smith, 2015, as in matplotlib)
 *   ATTN_CMAP_DIVERGING  signed data, blue -> white -> red:
 *                        #2166ac #67a9cf #f7f7f7 #ef8a62 #b2182b (ColorBrewer RdBu, reversed)
 *   ATTN_CMAP_GRAY       black -> white.
 *
 * Cell geometry: a panel of R x C cells is plot_w x plot_h pixels; the pixel at (x, y)
 * relative to the panel origin shows cell (floor(y*R/plot_h), floor(x*C/plot_w)). With
 * the automatic size every cell is a square of the same integer number of pixels (at most
 * 48), unless the matrix has more than ATTN_VIZ_MAX_PLOT rows or columns: then that side
 * is ATTN_VIZ_MAX_PLOT pixels and the matrix is sub-sampled (nearest cell). Cells are
 * filled without anti-aliasing, so in a PNG every pixel of a cell has exactly the cell's
 * colour-map colour.
 *
 * All functions are thread-safe (pango's cairo font map is per thread).
 * Sources: cairo 1.16 (image, SVG and PDF surfaces), pango 1.50 (pangocairo), PNG written
 * by cairo (libpng).
 */
#ifndef ATTN_VIZ_H
#define ATTN_VIZ_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Largest automatic panel side in pixels; larger matrices are sub-sampled. */
#define ATTN_VIZ_MAX_PLOT 2048
/* Largest picture side in pixels accepted by the writers. */
#define ATTN_VIZ_MAX_SIDE 16384
/* Default pango font family list (fallback fonts fill in missing scripts). */
#define ATTN_VIZ_DEFAULT_FONT "Noto Sans, DejaVu Sans, sans-serif"

typedef enum {
    ATTN_CMAP_VIRIDIS = 0,
    ATTN_CMAP_DIVERGING = 1,
    ATTN_CMAP_GRAY = 2
} attn_colormap;

/* Output formats; ATTN_VIZ_AUTO takes the format from the path's extension. */
typedef enum {
    ATTN_VIZ_AUTO = 0,
    ATTN_VIZ_PNG = 1,
    ATTN_VIZ_SVG = 2,
    ATTN_VIZ_PDF = 3
} attn_viz_format;

/* Where things are in a picture (pixels, origin top-left, y down). Panel (gr, gc) has its
 * cell area at (plot_x + gc*panel_dx, plot_y + gr*panel_dy), size plot_w x plot_h. */
typedef struct {
    int width, height;          /* whole picture */
    int plot_x, plot_y;         /* top-left of panel (0, 0)'s cells */
    int plot_w, plot_h;         /* size of one panel's cell area */
    int panel_dx, panel_dy;     /* distance between neighbouring panels */
    int grid_rows, grid_cols;   /* panel grid (1 x 1 for a single heatmap) */
    int bar_x, bar_y, bar_w, bar_h; /* colour bar rectangle (all 0 when disabled); bar_y is vmax */
    int has_text;               /* 1 when text is drawn (always, since pango has fallbacks) */
    int tick_len;               /* colour-bar tick marks run from bar_x + bar_w to + tick_len */
    int tick_label_x;           /* left edge of the tick labels (> bar_x + bar_w + tick_len) */
} attn_viz_layout;

typedef struct {
    attn_colormap cmap;
    const char *title;              /* UTF-8 or NULL */
    const char *const *row_labels;  /* NULL, or R UTF-8 strings (NULL entries are skipped) */
    const char *const *col_labels;  /* NULL, or C UTF-8 strings */
    const char *x_label;            /* axis caption under the column labels, or NULL */
    const char *y_label;            /* axis caption left of the row labels (rotated), or NULL */
    int has_range;                  /* 0: range from the data (see attn_heatmap_png); 1: use
                                       vmin < vmax, both finite */
    float vmin, vmax;
    int cell_w, cell_h;             /* pixels per cell (>= 0); both 0 = automatic; one 0 =
                                       same as the other */
    int colorbar;                   /* draw the colour bar (default 1) */
    const char *font;               /* pango font family list, NULL = ATTN_VIZ_DEFAULT_FONT */
    int font_px;                    /* label font size in pixels, 0..256 (0 or default: 12;
                                       the title is 1.3x) */
    attn_viz_format format;         /* ATTN_VIZ_AUTO (default): from the path's extension */
    float alpha;                    /* image overlay: opacity of the attention colours over
                                       the image, 0..1 (default 0.6) */
    int smooth;                     /* image overlay: 0 (default) each patch is a block of one
                                       colour; 1 bilinear between patch centres */
    int image_side;                 /* image overlay: longer side of the shown image in pixels
                                       (0 = automatic: the image's own size, enlarged by an
                                       integer factor up to 384, or shrunk to 640) */
    attn_viz_layout *layout_out;    /* when not NULL, receives the layout of the picture a
                                       writer or view draws (where the cells are) */
} attn_heatmap_opts;


/* attn_heatmap_opts_default: viridis, no title or labels, range from the data, automatic
 * cell size, colour bar on, default font at 12 px, format from the path, overlay alpha 0.6
 * with blocky patches. */
attn_heatmap_opts attn_heatmap_opts_default(void);

/* attn_colormap_rgb: the colour of t in [0, 1] (clamped; NaN gives grey) in map `cmap`,
 * written to rgb[0..3) as 8-bit sRGB. Unknown maps give grey. */
void attn_colormap_rgb(attn_colormap cmap, float t, unsigned char rgb[3]);

/* attn_viz_format_from_path: the format named by path's extension (.png, .svg, .pdf, any
 * case). Errors: ATTN_E_INVALID (NULL, or another extension). */
int attn_viz_format_from_path(attn_viz_format *out, const char *path);

/* attn_viz_ticks: colour-bar ticks for [vmin, vmax]: the multiples k * step (k integer) of a
 * step of 1, 2 or 5 times a power of ten that lie in the range (within 1e-9 steps): the
 * finest such step giving at most max_ticks ticks, or, when that gives fewer than 2, the
 * next finer one. labels[i] gets ticks[i] printed with the step's number of decimals (step
 * 0.05: "0.25", "0.30"; step 2: "4"), or in scientific notation ("2.5e-05") when some
 * |tick| >= 1e6 or the step is below 1e-4. The zero tick is exactly +0 and printed "0",
 * "0.0", ... (never "-0" or "-4.93e-21"); a label has a minus sign exactly when its tick is
 * negative. Either output may be NULL; they need room for max_ticks + 3 entries.
 * Returns the number of ticks (>= 2), or ATTN_E_INVALID (vmin >= vmax, non-finite, or
 * max_ticks < 2). Like matplotlib's MaxNLocator with steps [1, 2, 5, 10]. */
int attn_viz_ticks(double *ticks, char (*labels)[32], int max_ticks, double vmin, double vmax);

/* attn_heatmap_write: write m as a heatmap; the format is o->format, or from the path.
 *   m     [R, C] float32, any strides, R >= 1, C >= 1 (NaN/inf allowed: NaN is grey,
 *         +-inf clamp to the ends of the scale).
 *   o     options (NULL = attn_heatmap_opts_default()).
 * Colour range without has_range: [min, max] of the finite values; for ATTN_CMAP_DIVERGING
 * it is symmetric, [-a, a] with a = max |x|, so 0 is the near-white middle colour. A constant
 * matrix gets a range of width 1 around its value; with no finite value the range is [0, 1].
 * row_labels and col_labels, when given, must hold R and C entries (not checkable here).
 * Errors: ATTN_E_INVALID (NULL path or m, R or C < 1, NULL data, bad option: vmin >= vmax
 * or non-finite, negative cell size, font_px out of range, unknown colour map, alpha not in
 * [0, 1], unknown format or extension, picture larger than ATTN_VIZ_MAX_SIDE on a side),
 * ATTN_E_DTYPE (m not float32), ATTN_E_SHAPE (m not 2-D), ATTN_E_IO (file cannot be
 * written), ATTN_E_NOMEM. */
int attn_heatmap_write(const char *path, const attn_tensor *m, const attn_heatmap_opts *o);

/* attn_heatmap_png / _svg / _pdf: attn_heatmap_write in that format whatever the path's
 * extension or o->format. Same arguments and errors. */
int attn_heatmap_png(const char *path, const attn_tensor *m, const attn_heatmap_opts *o);
/* attn_heatmap_svg: attn_heatmap_write as SVG whatever the path's extension. */
int attn_heatmap_svg(const char *path, const attn_tensor *m, const attn_heatmap_opts *o);
/* attn_heatmap_pdf: attn_heatmap_write as PDF whatever the path's extension. */
int attn_heatmap_pdf(const char *path, const attn_tensor *m, const attn_heatmap_opts *o);

/* attn_heatmap_grid_write: several matrices as a grid of panels sharing one colour scale.
 *   m          float32, any strides, either [P, R, C] (P panels laid out row-major in
 *              grid_cols columns; grid_cols <= 0 picks ceil(sqrt(P))) or [GR, GC, R, C]
 *              (a GR x GC grid, e.g. layers x heads; grid_cols is ignored).
 *   captions   NULL, or one UTF-8 caption per panel in row-major panel order. NULL gives
 *              "L{gr} H{gc}" for a 4-D m (layer, head) and "{p}" for a 3-D m.
 * Labels in o apply to every panel (R row labels, C column labels). Errors: as
 * attn_heatmap_write; ATTN_E_SHAPE when m is not 3-D or 4-D; ATTN_E_INVALID when there are
 * no panels or more than 65536. */
int attn_heatmap_grid_write(const char *path, const attn_tensor *m, int grid_cols,
                            const char *const *captions, const attn_heatmap_opts *o);
/* attn_heatmap_grid_png / _svg / _pdf: attn_heatmap_grid_write in that format. */
int attn_heatmap_grid_png(const char *path, const attn_tensor *m, int grid_cols,
                          const char *const *captions, const attn_heatmap_opts *o);
/* attn_heatmap_grid_svg: attn_heatmap_grid_write as SVG. */
int attn_heatmap_grid_svg(const char *path, const attn_tensor *m, int grid_cols,
                          const char *const *captions, const attn_heatmap_opts *o);
/* attn_heatmap_grid_pdf: attn_heatmap_grid_write as PDF. */
int attn_heatmap_grid_pdf(const char *path, const attn_tensor *m, int grid_cols,
                          const char *const *captions, const attn_heatmap_opts *o);

/* attn_heatmap_layout: where the writers put things, without drawing: for a single
 * heatmap of rows x cols cells pass n_panels = 1, grid_cols = 1, grid = 0; for the grid
 * writers pass the panel count, the grid_cols they get (GC for a 4-D tensor) and grid = 1
 * (captions above the panels). Text is measured with the font in o, so the result matches
 * the file written with the same options on the same system, except that the width of
 * the colour-bar tick labels (and so the picture width) depends on the data range; it is
 * exact when o->has_range is set. Every writer also reports its layout in o->layout_out.
 * Errors: ATTN_E_INVALID (NULL out, n_panels < 1, and the size and option errors of
 * attn_heatmap_write). */
int attn_heatmap_layout(attn_viz_layout *out, int64_t rows, int64_t cols, int n_panels,
                        int grid_cols, int grid, const attn_heatmap_opts *o);

/* attn_token_attention_write: how one query token attends to every key token, in every
 * layer: a heatmap of n_layers rows (labelled "layer 0", "layer 1", ...) by L key columns
 * (labelled with the tokens), row l = weights[l, head, token, :] (or the mean over heads).
 * The query token's own column label is marked with a leading "▸ ".
 *   weights  [n_layers, H, L, L] float32 (rows = queries), any strides
 *   tokens   L UTF-8 strings
 *   token    query index in [0, L)
 *   head     head index in [0, H), or -1 for the mean of the heads
 *   o        options (NULL = default); a NULL title becomes "Attention of token i “tok”
 *            across layers (mean of H heads | head h)", NULL x_label/y_label become
 *            "key"/"layer". Its row/col labels are replaced by the ones above.
 * Layout (o->layout_out): one panel of n_layers x L cells. Errors: as attn_heatmap_write;
 * ATTN_E_SHAPE (weights not 4-D or not square), ATTN_E_RANGE (token or head out of range),
 * ATTN_E_INVALID (NULL tokens). */
int attn_token_attention_write(const char *path, const attn_tensor *weights, const char *const *tokens,
                               int64_t token, int64_t head, const attn_heatmap_opts *o);

/* attn_cross_attention_write: encoder-decoder cross-attention as a source x target alignment
 * picture: rows are target (decoder) tokens, columns source (encoder) tokens, a cell is how
 * much target token t attends to source token s.
 *   weights      [T, S] one matrix; [H, T, S] averaged over the heads; or [n_layers, H, T, S]
 *                drawn as a layers x heads grid (captions "L{l} H{h}"); float32, any strides
 *   src_tokens   S UTF-8 strings (column labels), or NULL
 *   tgt_tokens   T UTF-8 strings (row labels), or NULL
 *   o            options (NULL = default); NULL title / x_label / y_label become
 *                "Cross-attention (target x source)" / "source" / "target". Its row/col
 *                labels are replaced by the tokens.
 * Layout (o->layout_out): one panel of T x S cells, or an n_layers x H grid of them.
 * Errors: as attn_heatmap_write; ATTN_E_SHAPE (not 2-, 3- or 4-D). */
int attn_cross_attention_write(const char *path, const attn_tensor *weights, const char *const *src_tokens,
                               const char *const *tgt_tokens, const attn_heatmap_opts *o);

/* attn_image_overlay_write: a vision model's patch attention over its input image: two
 * panels side by side, the image (captioned "image") and the image with the attention
 * blended over it (captioned "attention"), and a colour bar for the attention values.
 *   pixels    height x width pixels, row-major, `channels` bytes each (1 = gray, 3 = RGB,
 *             4 = RGBA with alpha ignored), rows `row_stride` bytes apart (>= width*channels)
 *   attn      [gh, gw] float32, any strides: one value per patch (e.g. the [CLS] query's
 *             attention to the patch tokens, reshaped to the patch grid), gh, gw >= 1
 *   o         options (NULL = default): cmap, range, alpha, smooth, image_side, title
 * The image is shown at Dw x Dh pixels (see image_side; nearest-pixel sampling when enlarged,
 * bilinear when shrunk). Overlay pixel (x, y) = round((1 - alpha) * image + alpha * cmap(v))
 * per channel, where v is patch (floor(y*gh/Dh), floor(x*gw/Dw)) when o->smooth is 0, else
 * the bilinear interpolation of the patch values at patch centres (edges clamped).
 * Layout (o->layout_out): plot_w x plot_h = Dw x Dh, panel (0, 0) the image, (0, 1) the
 * overlay. Errors: as attn_heatmap_write; ATTN_E_INVALID (NULL pixels,
 * width or height < 1 or > ATTN_VIZ_MAX_SIDE, channels not 1, 3 or 4, row_stride too small),
 * ATTN_E_SHAPE (attn not 2-D), ATTN_E_DTYPE (attn not float32). */
int attn_image_overlay_write(const char *path, const unsigned char *pixels, const attn_tensor *attn,
                             const attn_heatmap_opts *o, int width, int height, int channels,
                             int64_t row_stride);


#ifdef __cplusplus
}
#endif
#endif /* ATTN_VIZ_H */
