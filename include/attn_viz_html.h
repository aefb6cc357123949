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
 * weights with the layer and head chosen interactively (a head "mean" averages the heads):
 * a heatmap with the tokens on both axes and a colour bar, and a "head view" in the style
 * of bertviz (Vig 2019): queries on the left, keys on the right, a line per pair whose
 * opacity is the weight; hovering a token highlights its row.
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
