/*
 * attn_viz_html.h — interactive attention viewer as one self-contained HTML page.
 */
#ifndef ATTN_VIZ_HTML_H
#define ATTN_VIZ_HTML_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* attn_attention_html: write a single HTML file (no external resources) showing attention
 * weights with the layer and head chosen interactively (<select id="layer"> and
 * <select id="head">; a head "mean" averages the heads):
 *  - a heatmap drawn as inline SVG (<svg id="heat">): one <rect class="cell" data-q data-k>
 *    per query/key pair coloured viridis(w / max w of the shown matrix) with the anchors of
 *    attn_viz.h's ATTN_CMAP_VIRIDIS, the tokens as <text class="row"> / <text class="col">
 *    labels, and a colour bar from 0 to that maximum;
 *  - a "head view" in the style of bertviz (Vig 2019, <svg id="lines">): queries on the left,
 *    keys on the right, a line per pair whose opacity is the weight; hovering a query token
 *    or a cell shows that query's lines, and a cell's weight is printed above.
 * After each redraw the page sets <body data-shown="LAYER:HEAD"> (HEAD is "mean" or a
 * number). tests/test_viz_html.c checks the page in headless Chromium.
 *   weights  [n_layers, H, L, L] float32 (rows = queries), any strides
 *   tokens   L UTF-8 strings (escaped for HTML/JS on output)
 *   title    UTF-8 or NULL
 *   init_layer, init_head  what the page shows first: a layer index (< 0: the last layer) and
 *            a head index (< 0: the mean of the heads)
 * Weights are written with 4 significant digits.
 * Errors: ATTN_E_INVALID (NULL, L == 0), ATTN_E_SHAPE (not 4-D or not square), ATTN_E_DTYPE,
 * ATTN_E_RANGE (a non-finite weight), ATTN_E_IO (cannot write path). */
int attn_attention_html(const char *path, const attn_tensor *weights, const char *const *tokens, const char *title,
                        int64_t init_layer, int64_t init_head);

#ifdef __cplusplus
}
#endif
#endif
