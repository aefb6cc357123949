/*
 * attn_viz.h — heatmap pictures of matrices (attention weights, positional encodings,
 * similarity matrices) as PNG (libpng) or SVG files.
 *
 * A picture has, from top to bottom: an optional title, the panel(s) of coloured cells
 * (one cell per matrix element; row 0 at the top, column 0 at the left) with optional
 * row labels on the left and column labels below (rotated 90 degrees, reading upwards),
 * and on the right a colour bar (top = maximum) with tick labels for the minimum, the
 * maximum and, when the bar is tall enough, the middle of the range (zero for the
 * diverging map); tick labels use printf "%.3g". Text is UTF-8 and is rendered with
 * FreeType from a TrueType font (default /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf,
 * Debian package fonts-dejavu-core); when the font cannot be loaded the picture (PNG and
 * SVG alike) is drawn without any text and without error. Labels wider than 160 pixels are
 * cut with an ellipsis. Labels that would overlap are thinned: only every k-th label is
 * drawn, k in 1, 2, 5, 10, 20, 50, ...
 *
 * The grid variant draws several matrices of equal shape as a grid of panels that share
 * one colour scale and one colour bar; each panel has a caption above it (e.g. "L0 H3").
 * Row labels are drawn left of the first panel column and column labels below the last
 * panel row.
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
 * is ATTN_VIZ_MAX_PLOT pixels and the matrix is sub-sampled (nearest cell).
 *
 * All functions are thread-safe (each call opens its own FreeType instance).
 * Sources: PNG written with libpng's simplified API (libpng 1.6); SVG 1.1 (W3C
 * Recommendation, 2011); glyphs rasterised by FreeType 2.
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

typedef enum {
    ATTN_CMAP_VIRIDIS = 0,
    ATTN_CMAP_DIVERGING = 1,
    ATTN_CMAP_GRAY = 2
} attn_colormap;

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
    const char *font_path;          /* NULL = ATTN_VIZ_DEFAULT_FONT */
    int font_px;                    /* label font size in pixels, 0..256 (0 or default: 12;
                                       the title is 1.3x) */
} attn_heatmap_opts;

#define ATTN_VIZ_DEFAULT_FONT "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"

/* Where things are in a picture (pixels, origin top-left, y down). Panel (gr, gc) has its
 * cell area at (plot_x + gc*panel_dx, plot_y + gr*panel_dy), size plot_w x plot_h. */
typedef struct {
    int width, height;          /* whole picture */
    int plot_x, plot_y;         /* top-left of panel (0, 0)'s cells */
    int plot_w, plot_h;         /* size of one panel's cell area */
    int panel_dx, panel_dy;     /* distance between neighbouring panels */
    int grid_rows, grid_cols;   /* panel grid (1 x 1 for a single heatmap) */
    int bar_x, bar_y, bar_w, bar_h; /* colour bar rectangle (all 0 when disabled); bar_y is vmax */
    int has_text;               /* 1 when the font was loaded and text is drawn */
} attn_viz_layout;

/* attn_heatmap_opts_default: viridis, no title or labels, range from the data, automatic
 * cell size, colour bar on, default font at 12 px. */
attn_heatmap_opts attn_heatmap_opts_default(void);

/* attn_colormap_rgb: the colour of t in [0, 1] (clamped; NaN gives grey) in map `cmap`,
 * written to rgb[0..3) as 8-bit sRGB. Unknown maps give grey. */
void attn_colormap_rgb(attn_colormap cmap, float t, unsigned char rgb[3]);

/* attn_heatmap_png: write m as a PNG heatmap (8-bit RGB).
 *   m     [R, C] float32, any strides, R >= 1, C >= 1 (NaN/inf allowed: NaN is grey,
 *         +-inf clamp to the ends of the scale).
 *   o     options (NULL = attn_heatmap_opts_default()).
 * Colour range without has_range: [min, max] of the finite values; for ATTN_CMAP_DIVERGING
 * it is symmetric, [-a, a] with a = max |x|, so 0 is the near-white middle colour. A constant matrix gets a range
 * of width 1 around its value; with no finite value the range is [0, 1]. row_labels and
 * col_labels, when given, must hold R and C entries (not checkable here).
 * Errors: ATTN_E_INVALID (NULL path or m, R or C < 1, NULL data, bad option: vmin >= vmax
 * or non-finite, negative cell size, font_px out of range, unknown colour map, picture
 * larger than ATTN_VIZ_MAX_SIDE on a side), ATTN_E_DTYPE (m not float32), ATTN_E_SHAPE
 * (m not 2-D), ATTN_E_IO (file cannot be written), ATTN_E_NOMEM. */
int attn_heatmap_png(const char *path, const attn_tensor *m, const attn_heatmap_opts *o);

/* attn_heatmap_svg: the same picture as attn_heatmap_png as an SVG 1.1 file: cells are
 * <rect> elements, text is <text> elements (XML-escaped; invalid UTF-8 becomes U+FFFD),
 * the colour bar is a linearGradient. Same layout, arguments and errors. */
int attn_heatmap_svg(const char *path, const attn_tensor *m, const attn_heatmap_opts *o);

/* attn_heatmap_grid_png: several matrices as a grid of panels sharing one colour scale.
 *   m          float32, any strides, either [P, R, C] (P panels laid out row-major in
 *              grid_cols columns; grid_cols <= 0 picks ceil(sqrt(P))) or [GR, GC, R, C]
 *              (a GR x GC grid, e.g. layers x heads; grid_cols is ignored).
 *   captions   NULL, or one UTF-8 caption per panel in row-major panel order. NULL gives
 *              "L{gr} H{gc}" for a 4-D m (layer, head) and "{p}" for a 3-D m.
 * Labels in o apply to every panel (R row labels, C column labels). Errors: as
 * attn_heatmap_png; ATTN_E_SHAPE when m is not 3-D or 4-D; ATTN_E_INVALID when there are
 * no panels or more than 65536. */
int attn_heatmap_grid_png(const char *path, const attn_tensor *m, int grid_cols,
                          const char *const *captions, const attn_heatmap_opts *o);

/* attn_heatmap_grid_svg: the SVG form of attn_heatmap_grid_png. Same arguments and errors. */
int attn_heatmap_grid_svg(const char *path, const attn_tensor *m, int grid_cols,
                          const char *const *captions, const attn_heatmap_opts *o);

/* attn_heatmap_layout: where the writers put things, without drawing: for a single
 * heatmap of rows x cols cells pass n_panels = 1, grid_cols = 1, grid = 0; for the grid
 * writers pass the panel count, the grid_cols they get (GC for a 4-D tensor) and grid = 1
 * (captions above the panels). Text is measured with the font in o, so the result matches
 * the file written with the same options on the same system, except that the width of
 * the colour-bar tick labels (and so the picture width) depends on the data range; it is
 * exact when o->has_range is set. Errors: ATTN_E_INVALID (NULL out, n_panels < 1, and the
 * size and option errors of attn_heatmap_png). */
int attn_heatmap_layout(attn_viz_layout *out, int64_t rows, int64_t cols, int n_panels,
                        int grid_cols, int grid, const attn_heatmap_opts *o);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_VIZ_H */
