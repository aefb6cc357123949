/* Private to src/viz: the one drawing path every view goes through (draw.c). */
#ifndef ATTN_VIZ_INTERNAL_H
#define ATTN_VIZ_INTERNAL_H

#include "attn_viz.h"

/* What a picture shows: n_panels panels in a grid, each either a matrix (cells coloured by
 * the colour map) or a prepared RGB bitmap (image views), plus the decorations in the
 * options (title, labels, axis captions, colour bar over [vmin, vmax]). */
typedef struct {
    /* matrix panels: m is [R, C], [P, R, C] or [GR, GC, R, C] float32 */
    const attn_tensor *m;
    int n_panels;
    int64_t rows, cols;
    int grid_cols_4d;                    /* > 0 for a 4-D m: panel p is (p / gc4, p % gc4) */
    /* bitmap panels (used when images != NULL): n_panels RGB buffers of img_w x img_h,
     * 3 bytes per pixel, row-major; the panel's cell area is exactly img_w x img_h */
    const unsigned char *const *images;
    int img_w, img_h;
    int grid_cols;                       /* <= 0: ceil(sqrt(n_panels)); ignored with grid_cols_4d */
    int grid;                            /* captions above the panels */
    const char *const *captions;         /* NULL: default captions (see panel_caption) */
    float vmin, vmax;                    /* colour range */
} attn__viz_scene;

/* Checks m for the heatmap (grid = 0: 2-D) or grid (grid = 1: 3-D or 4-D) writers and fills
 * the matrix part of S. */
int attn__viz_check_tensor(attn__viz_scene *S, const attn_tensor *m, int grid, const char *path);
/* Validates o (range, sizes, colour map, alpha, format). */
int attn__viz_check_opts(const attn_heatmap_opts *o);
/* The colour range for S's matrix panels: o's, or the finite data's (see attn_viz.h). */
void attn__viz_data_range(const attn__viz_scene *S, const attn_heatmap_opts *o, float *vmin, float *vmax);
/* Layout of S (uses S->vmin/vmax for the tick label widths). */
int attn__viz_layout(attn_viz_layout *out, const attn__viz_scene *S, const attn_heatmap_opts *o);
/* Draw S into path in format fmt (ATTN_VIZ_AUTO: o->format, then the extension). */
int attn__viz_render(const char *path, attn_viz_format fmt, const attn__viz_scene *S, const attn_heatmap_opts *o);
/* An 8-bit RGB colour. */
typedef struct {
    unsigned char r, g, b;
} rgb8;
/* The anchor colours of cmap (*n of them, equally spaced on [0, 1]); NULL for an unknown map. */
const rgb8 *attn__cmap_table(attn_colormap cmap, int *n);
/* The colour at t in [0, 1] (linear between anchors; grey for NaN or an unknown map). */
rgb8 attn__cmap_eval(attn_colormap cmap, float t);
/* v mapped to [0, 1] on [vmin, vmax] (clamped; NaN stays NaN). */
float attn__viz_norm(float v, float vmin, float vmax);
/* 8-bit colour of value v on S's scale. */
void attn__viz_color(const attn_heatmap_opts *o, float v, float vmin, float vmax, unsigned char rgb[3]);

#endif
