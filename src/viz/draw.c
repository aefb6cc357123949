/* The one drawing path of src/viz: layout measured with pango, drawn with cairo onto an image
 * (PNG), SVG or PDF surface. The layout is computed once with text metrics that do not depend
 * on the surface (hinted metrics off, fixed 72 dpi resolution), so the three formats put
 * every element at the same position. */
#include "viz_internal.h"

#include "attn_io.h"
#include "tokenizers/tok_common.h"

#include <cairo-pdf.h>
#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <math.h>
#include <pango/pangocairo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ UTF-8 */

/* Decode one code point from s (NUL-terminated); invalid or overlong sequences and
 * surrogates give U+FFFD and consume one byte. Returns 0 at the end of the string. */
static uint32_t utf8_next(const char **sp) {
    const unsigned char *s = (const unsigned char *)*sp;
    uint32_t c = s[0];
    if (c == 0) return 0;
    int len;
    uint32_t min;
    if (c < 0x80) {
        *sp += 1;
        return c;
    } else if ((c & 0xe0) == 0xc0) {
        len = 2, min = 0x80, c &= 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
        len = 3, min = 0x800, c &= 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
        len = 4, min = 0x10000, c &= 0x07;
    } else {
        *sp += 1;
        return 0xfffd;
    }
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *sp += 1;
            return 0xfffd;
        }
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) {
        *sp += 1;
        return 0xfffd;
    }
    *sp += len;
    return c;
}

/* ------------------------------------------------------------------ text (pango) */

enum { TEXT_CAP = 4096 };

typedef struct {
    PangoContext *ctx;
    PangoLayout *lay;
    PangoFontDescription *font;
    int px;       /* size of the font now set on lay */
    char buf[TEXT_CAP * 3 + 4];
} vtext;

static int vt_open(vtext *t, const char *family) {
    memset(t, 0, sizeof *t);
    PangoFontMap *fm = pango_cairo_font_map_get_default(); /* per thread, owned by pango */
    t->ctx = fm ? pango_font_map_create_context(fm) : NULL;
    if (!t->ctx) return attn_set_error(ATTN_E_NOMEM, "viz: cannot create a pango context");
    /* surface-independent metrics: the layout is the same for PNG, SVG and PDF */
    cairo_font_options_t *fo = cairo_font_options_create();
    cairo_font_options_set_hint_metrics(fo, CAIRO_HINT_METRICS_OFF);
    cairo_font_options_set_hint_style(fo, CAIRO_HINT_STYLE_SLIGHT);
    cairo_font_options_set_antialias(fo, CAIRO_ANTIALIAS_GRAY);
    pango_cairo_context_set_font_options(t->ctx, fo);
    cairo_font_options_destroy(fo);
    pango_cairo_context_set_resolution(t->ctx, 72.0); /* 1 pt = 1 px */
    t->lay = pango_layout_new(t->ctx);
    t->font = pango_font_description_from_string(family && *family ? family : ATTN_VIZ_DEFAULT_FONT);
    if (!t->lay || !t->font) return attn_set_error(ATTN_E_NOMEM, "viz: cannot create a pango layout");
    pango_layout_set_single_paragraph_mode(t->lay, TRUE);
    return ATTN_OK;
}

static void vt_close(vtext *t) {
    if (t->lay) g_object_unref(t->lay);
    if (t->ctx) g_object_unref(t->ctx);
    if (t->font) pango_font_description_free(t->font);
    memset(t, 0, sizeof *t);
}

/* Set s (sanitised: invalid UTF-8 -> U+FFFD, control characters dropped, at most TEXT_CAP
 * code points) at px, cut with an ellipsis to maxw pixels (0 = no limit). */
static void vt_set(vtext *t, const char *s, int px, int maxw) {
    if (px != t->px) {
        pango_font_description_set_absolute_size(t->font, (double)px * PANGO_SCALE);
        pango_layout_set_font_description(t->lay, t->font);
        t->px = px;
    }
    char *o = t->buf;
    int n = 0;
    uint32_t c;
    while (s && (c = utf8_next(&s)) != 0 && n < TEXT_CAP) {
        if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == 0xfffe || c == 0xffff) continue;
        o += attn__utf8_encode((int32_t)c, o); /* c <= U+10FFFF: utf8_next replaces the rest */
        n++;
    }
    *o = '\0';
    pango_layout_set_text(t->lay, t->buf, -1);
    pango_layout_set_width(t->lay, maxw > 0 ? maxw * PANGO_SCALE : -1);
    pango_layout_set_ellipsize(t->lay, maxw > 0 ? PANGO_ELLIPSIZE_END : PANGO_ELLIPSIZE_NONE);
}

/* Logical size of the current text in whole pixels. */
static void vt_size(vtext *t, int *w, int *h) {
    PangoRectangle lr;
    pango_layout_get_pixel_extents(t->lay, NULL, &lr);
    if (w) *w = lr.width;
    if (h) *h = lr.height;
}

static int vt_width(vtext *t, const char *s, int px, int maxw) {
    int w;
    vt_set(t, s, px, maxw);
    vt_size(t, &w, NULL);
    return w;
}

/* Height of a line of Latin text at px. */
static int vt_line(vtext *t, int px) {
    int h;
    vt_set(t, "Ag", px, 0);
    vt_size(t, NULL, &h);
    return h;
}

enum { AL_LEFT, AL_CENTRE, AL_RIGHT };

/* Draw s: unrotated, with its logical box aligned at x (left edge, centre or right edge) and
 * vertically centred on cy; rotated (reading upwards), with its box's end (along the text)
 * at y = cy for AL_RIGHT, its middle for AL_CENTRE, and centred across at x. */
static void vt_draw(cairo_t *cr, vtext *t, const char *s, int px, int maxw, double x, double cy, int align, int rot) {
    int w, h;
    vt_set(t, s, px, maxw);
    vt_size(t, &w, &h);
    if (w <= 0) return;
    double off = align == AL_LEFT ? 0 : align == AL_CENTRE ? -w / 2.0 : -w;
    PangoRectangle lr;
    pango_layout_get_pixel_extents(t->lay, NULL, &lr);
    cairo_save(cr);
    if (!rot) {
        cairo_move_to(cr, x + off - lr.x, cy - h / 2.0 - lr.y);
    } else {
        cairo_translate(cr, x, cy);
        cairo_rotate(cr, -M_PI / 2);
        /* rotated frame: u runs up the page, v to the right */
        cairo_move_to(cr, off - lr.x, -h / 2.0 - lr.y);
    }
    pango_cairo_show_layout(cr, t->lay);
    cairo_restore(cr);
}

/* ------------------------------------------------------------------ scene data */

static float panel_at(const attn__viz_scene *S, int p, int64_t r, int64_t c) {
    const attn_tensor *m = S->m;
    int64_t off;
    if (m->ndim == 2) {
        off = r * m->stride[0] + c * m->stride[1];
    } else if (m->ndim == 3) {
        off = p * m->stride[0] + r * m->stride[1] + c * m->stride[2];
    } else {
        int64_t gr = p / S->grid_cols_4d, gc = p % S->grid_cols_4d;
        off = gr * m->stride[0] + gc * m->stride[1] + r * m->stride[2] + c * m->stride[3];
    }
    return ((const float *)m->data)[off];
}

int attn__viz_check_tensor(attn__viz_scene *S, const attn_tensor *m, int grid, const char *path) {
    memset(S, 0, sizeof *S);
    if (!path || !m) return attn_set_error(ATTN_E_INVALID, "heatmap: NULL path or matrix");
    if (m->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "heatmap: matrix dtype is %s, expected float32", attn_dtype_name(m->dtype));
    S->m = m;
    S->grid = grid;
    if (!grid) {
        if (m->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "heatmap: matrix has %d dims, expected 2", m->ndim);
        S->n_panels = 1, S->rows = m->shape[0], S->cols = m->shape[1];
        S->grid_cols = 1;
    } else if (m->ndim == 3) {
        if (m->shape[0] < 1 || m->shape[0] > 65536)
            return attn_set_error(ATTN_E_INVALID, "heatmap grid: %lld panels (need 1..65536)", (long long)m->shape[0]);
        S->n_panels = (int)m->shape[0], S->rows = m->shape[1], S->cols = m->shape[2];
    } else if (m->ndim == 4) {
        if (m->shape[0] < 1 || m->shape[1] < 1 || m->shape[0] > 65536 || m->shape[1] > 65536 ||
            m->shape[0] * m->shape[1] > 65536)
            return attn_set_error(ATTN_E_INVALID, "heatmap grid: %lldx%lld panels (need 1..65536)",
                                  (long long)m->shape[0], (long long)m->shape[1]);
        S->n_panels = (int)(m->shape[0] * m->shape[1]);
        S->grid_cols_4d = (int)m->shape[1];
        S->rows = m->shape[2], S->cols = m->shape[3];
    } else {
        return attn_set_error(ATTN_E_SHAPE, "heatmap grid: tensor has %d dims, expected 3 or 4", m->ndim);
    }
    if (S->rows < 1 || S->cols < 1)
        return attn_set_error(ATTN_E_INVALID, "heatmap: matrix is %lldx%lld; need at least 1x1", (long long)S->rows,
                              (long long)S->cols);
    if (!m->data) return attn_set_error(ATTN_E_INVALID, "heatmap: matrix data is NULL");
    return ATTN_OK;
}

int attn__viz_check_opts(const attn_heatmap_opts *o) {
    if (o->cell_w < 0 || o->cell_h < 0) return attn_set_error(ATTN_E_INVALID, "heatmap: negative cell size");
    if (o->font_px < 0 || o->font_px > 256)
        return attn_set_error(ATTN_E_INVALID, "heatmap: font size %d out of range", o->font_px);
    if (o->has_range && !(isfinite(o->vmin) && isfinite(o->vmax) && o->vmin < o->vmax))
        return attn_set_error(ATTN_E_INVALID, "heatmap: bad range [%g, %g]", (double)o->vmin, (double)o->vmax);
    if ((int)o->cmap < 0 || o->cmap > ATTN_CMAP_GRAY)
        return attn_set_error(ATTN_E_INVALID, "heatmap: unknown colour map %d", (int)o->cmap);
    if ((int)o->format < 0 || o->format > ATTN_VIZ_PDF)
        return attn_set_error(ATTN_E_INVALID, "heatmap: unknown format %d", (int)o->format);
    if (!(o->alpha >= 0 && o->alpha <= 1))
        return attn_set_error(ATTN_E_INVALID, "heatmap: overlay alpha %g not in [0, 1]", (double)o->alpha);
    if (o->image_side < 0 || o->image_side > ATTN_VIZ_MAX_PLOT)
        return attn_set_error(ATTN_E_INVALID, "heatmap: image_side %d not in 0..%d", o->image_side, ATTN_VIZ_MAX_PLOT);
    return ATTN_OK;
}

void attn__viz_data_range(const attn__viz_scene *S, const attn_heatmap_opts *o, float *vmin, float *vmax) {
    if (o->has_range) {
        *vmin = o->vmin, *vmax = o->vmax;
        return;
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int p = 0; S->m && p < S->n_panels; p++)
        for (int64_t r = 0; r < S->rows; r++)
            for (int64_t c = 0; c < S->cols; c++) {
                float v = panel_at(S, p, r, c);
                if (!isfinite(v)) continue;
                if (v < lo) lo = v;
                if (v > hi) hi = v;
            }
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (o->cmap == ATTN_CMAP_DIVERGING) {
        double a = fabs(lo) > fabs(hi) ? fabs(lo) : fabs(hi);
        if (a == 0) a = 1;
        lo = -a, hi = a;
    } else if (lo == hi) {
        lo -= 0.5, hi += 0.5;
    }
    *vmin = (float)lo, *vmax = (float)hi;
    if (!(*vmin < *vmax)) { /* huge values that collapse in float */
        *vmin = (float)lo;
        *vmax = nextafterf(*vmin, INFINITY);
    }
}

/* First pixel (relative to the panel) of cell k of n cells spread over w pixels. */
static int cell_start(int64_t k, int64_t n, int w) {
    /* pixel x shows cell floor(x * n / w); cell k starts at ceil(k * w / n) */
    return (int)((k * (int64_t)w + n - 1) / n);
}

/* The caption of panel p (default "L{gr} H{gc}" or "{p}") into buf. */
static const char *panel_caption(const attn__viz_scene *S, int p, char *buf, size_t n) {
    if (S->captions) return S->captions[p] ? S->captions[p] : "";
    if (S->grid_cols_4d) snprintf(buf, n, "L%d H%d", p / S->grid_cols_4d, p % S->grid_cols_4d);
    else snprintf(buf, n, "%d", p);
    return buf;
}

/* ------------------------------------------------------------------ layout */

enum { MARGIN = 10, GAP = 4, PANEL_GAP = 12, BAR_GAP = 14, BAR_W = 16, TICK = 5, TICK_GAP = 4, LABEL_MAX = 160 };

typedef struct {
    attn_viz_layout L;
    int font_px, title_px;
    int line, title_line; /* line heights */
    int rl_w, cl_h;       /* row-label column width, column-label band height */
    int col_flat;         /* column labels fit their cells: drawn level, not rotated */
    int64_t row_step, col_step;
    int cap_h;
    int title_y, xlab_y, ylab_x;
    int n_ticks;
    double ticks[16];
    char tick_labels[16][32];
} layout_ex;

/* Smallest k in 1, 2, 5, 10, 20, 50, ... with k * cell >= need. */
static int64_t nice_step(double cell, int need) {
    if (cell <= 0) return INT64_MAX;
    int64_t base = 1;
    for (;;) {
        static const int m[3] = {1, 2, 5};
        for (int i = 0; i < 3; i++) {
            int64_t k = base * m[i];
            if ((double)k * cell >= need) return k;
        }
        if (base > INT64_MAX / 100) return INT64_MAX;
        base *= 10;
    }
}

static int max_label_width(vtext *t, const char *const *labels, int64_t n, int px) {
    int w = 0;
    if (!labels) return 0;
    for (int64_t i = 0; i < n; i++) {
        if (!labels[i]) continue;
        int lw = vt_width(t, labels[i], px, LABEL_MAX);
        if (lw > w) w = lw;
    }
    return w;
}

/* Tallest label's height (fallback fonts such as Noto CJK have larger line boxes). */
static int max_label_height(vtext *t, const char *const *labels, int64_t n, int px, int line) {
    int h = line;
    if (!labels) return h;
    for (int64_t i = 0; i < n && i < 4096; i++) {
        if (!labels[i]) continue;
        int lh;
        vt_set(t, labels[i], px, LABEL_MAX);
        vt_size(t, NULL, &lh);
        if (lh > h) h = lh;
    }
    return h;
}

static int compute_layout(layout_ex *X, vtext *t, const attn__viz_scene *S, const attn_heatmap_opts *o) {
    memset(X, 0, sizeof *X);
    attn_viz_layout *L = &X->L;
    int64_t rows = S->rows, cols = S->cols;
    int n_panels = S->n_panels, grid = S->grid;
    if (!S->images && (rows < 1 || cols < 1))
        return attn_set_error(ATTN_E_INVALID, "heatmap: matrix is %lldx%lld; need at least 1x1", (long long)rows,
                              (long long)cols);
    if (n_panels < 1 || n_panels > 65536)
        return attn_set_error(ATTN_E_INVALID, "heatmap: %d panels (need 1..65536)", n_panels);
    int rc = attn__viz_check_opts(o);
    if (rc < 0) return rc;

    int grid_cols = S->grid_cols_4d ? S->grid_cols_4d : S->grid_cols;
    if (grid_cols <= 0) {
        grid_cols = 1;
        while ((int64_t)grid_cols * grid_cols < n_panels) grid_cols++;
    }
    if (grid_cols > n_panels) grid_cols = n_panels;
    L->grid_cols = grid_cols;
    L->grid_rows = (n_panels + grid_cols - 1) / grid_cols;

    /* cell area of one panel */
    int64_t pw, ph;
    if (S->images) {
        pw = S->img_w, ph = S->img_h;
        rows = ph, cols = pw;
    } else if (o->cell_w == 0 && o->cell_h == 0) {
        int gmax = L->grid_cols > L->grid_rows ? L->grid_cols : L->grid_rows;
        int64_t budget = grid ? (1024 / gmax > 96 ? 1024 / gmax : 96) : 640;
        int64_t big = rows > cols ? rows : cols;
        int64_t cell = budget / big;
        if (cell < 1) cell = 1;
        if (cell > 48) cell = 48;
        pw = cols * cell, ph = rows * cell;
        if (pw > ATTN_VIZ_MAX_PLOT) pw = ATTN_VIZ_MAX_PLOT;
        if (ph > ATTN_VIZ_MAX_PLOT) ph = ATTN_VIZ_MAX_PLOT;
    } else {
        int cw = o->cell_w ? o->cell_w : o->cell_h, ch = o->cell_h ? o->cell_h : o->cell_w;
        if (cols > ATTN_VIZ_MAX_SIDE || rows > ATTN_VIZ_MAX_SIDE || cw > ATTN_VIZ_MAX_SIDE || ch > ATTN_VIZ_MAX_SIDE)
            return attn_set_error(ATTN_E_INVALID, "heatmap: picture would exceed %d pixels", ATTN_VIZ_MAX_SIDE);
        pw = cols * cw, ph = rows * ch;
    }
    if (pw > ATTN_VIZ_MAX_SIDE || ph > ATTN_VIZ_MAX_SIDE || pw < 1 || ph < 1)
        return attn_set_error(ATTN_E_INVALID, "heatmap: picture would exceed %d pixels", ATTN_VIZ_MAX_SIDE);
    L->plot_w = (int)pw, L->plot_h = (int)ph;

    /* text metrics */
    X->font_px = o->font_px ? o->font_px : 12;
    X->title_px = (X->font_px * 13 + 5) / 10;
    X->line = vt_line(t, X->font_px);
    X->title_line = vt_line(t, X->title_px);
    L->has_text = 1;
    int line = X->line;

    const char *const *rl = S->images ? NULL : o->row_labels;
    const char *const *cl = S->images ? NULL : o->col_labels;
    X->rl_w = max_label_width(t, rl, rows, X->font_px);
    X->cl_h = max_label_width(t, cl, cols, X->font_px);
    int row_line = max_label_height(t, rl, rows, X->font_px, line);
    int col_line = max_label_height(t, cl, cols, X->font_px, line);
    X->row_step = nice_step((double)ph / (double)rows, row_line + 1);
    X->col_step = nice_step((double)pw / (double)cols, col_line + 1);
    /* short column labels (one or two characters, numbers) that fit their cells read level */
    if (cl && X->cl_h > 0 && X->cl_h + 2 <= (double)pw / (double)cols) {
        X->col_flat = 1;
        X->col_step = 1;
        X->cl_h = col_line;
    }
    X->cap_h = 0;
    if (grid) {
        int ch = line;
        for (int p = 0; p < n_panels && p < 4096; p++) {
            char cbuf[48];
            int h;
            vt_set(t, panel_caption(S, p, cbuf, sizeof cbuf), X->font_px, L->plot_w + PANEL_GAP - 2);
            vt_size(t, NULL, &h);
            if (h > ch) ch = h;
        }
        X->cap_h = ch + 2;
    }

    int ylab_w = o->y_label ? line + GAP : 0;
    int title_h = o->title ? X->title_line + 6 : 0;
    int xlab_h = o->x_label ? line + GAP : 0;

    X->ylab_x = MARGIN;
    L->plot_x = MARGIN + ylab_w + (X->rl_w ? X->rl_w + GAP : 0);
    X->title_y = MARGIN;
    L->plot_y = MARGIN + title_h + X->cap_h;
    L->panel_dx = L->plot_w + PANEL_GAP;
    L->panel_dy = L->plot_h + PANEL_GAP + X->cap_h;

    int64_t grid_w = (int64_t)L->grid_cols * L->plot_w + (int64_t)(L->grid_cols - 1) * PANEL_GAP;
    int64_t grid_h = (int64_t)L->grid_rows * L->panel_dy - PANEL_GAP - X->cap_h;
    int64_t bottom = L->plot_y + grid_h + (X->cl_h ? GAP + X->cl_h : 0);
    X->xlab_y = (int)(bottom + (xlab_h ? GAP : 0));
    bottom += xlab_h;

    int64_t right = L->plot_x + grid_w;
    int64_t bar_bottom = 0;
    if (o->colorbar) {
        L->bar_x = (int)(right + BAR_GAP);
        L->bar_y = L->plot_y;
        L->bar_w = BAR_W;
        L->bar_h = (int)(grid_h > 64 ? grid_h : 64);
        L->tick_len = TICK;
        L->tick_label_x = L->bar_x + BAR_W + TICK + TICK_GAP;
        int max_ticks = L->bar_h / (2 * line + 2);
        if (max_ticks > 11) max_ticks = 11;
        if (max_ticks < 2) max_ticks = 2;
        int n = attn_viz_ticks(X->ticks, X->tick_labels, max_ticks, S->vmin, S->vmax);
        if (n < 0) return n;
        if (n > 16) n = 16;
        X->n_ticks = n;
        int tw = 0;
        for (int i = 0; i < n; i++) {
            int w = vt_width(t, X->tick_labels[i], X->font_px, 0);
            if (w > tw) tw = w;
        }
        right = L->tick_label_x + tw;
        bar_bottom = L->bar_y + L->bar_h + (line + 1) / 2;
    }
    int64_t width = right + MARGIN;
    if (title_h) {
        int tw = vt_width(t, o->title, X->title_px, LABEL_MAX * 4);
        if (tw + 2 * MARGIN > width) {
            /* widen the picture for the title and centre the rest under it */
            int shift = (int)((tw + 2 * MARGIN - width) / 2);
            width = tw + 2 * MARGIN;
            X->ylab_x += shift;
            L->plot_x += shift;
            if (o->colorbar) L->bar_x += shift, L->tick_label_x += shift;
        }
    }
    int64_t height = (bottom > bar_bottom ? bottom : bar_bottom) + MARGIN;
    if (width > ATTN_VIZ_MAX_SIDE || height > ATTN_VIZ_MAX_SIDE)
        return attn_set_error(ATTN_E_INVALID, "heatmap: picture would be %lldx%lld, over %d pixels", (long long)width,
                              (long long)height, ATTN_VIZ_MAX_SIDE);
    L->width = (int)width, L->height = (int)height;
    return ATTN_OK;
}

int attn__viz_layout(attn_viz_layout *out, const attn__viz_scene *S, const attn_heatmap_opts *o) {
    vtext t;
    int rc = vt_open(&t, o->font);
    layout_ex X;
    if (rc == ATTN_OK) rc = compute_layout(&X, &t, S, o);
    vt_close(&t);
    if (rc == ATTN_OK) *out = X.L;
    return rc;
}

int attn_heatmap_layout(attn_viz_layout *out, int64_t rows, int64_t cols, int n_panels, int grid_cols, int grid,
                        const attn_heatmap_opts *o) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "attn_heatmap_layout: out is NULL");
    attn_heatmap_opts def = attn_heatmap_opts_default();
    if (!o) o = &def;
    attn__viz_scene S;
    memset(&S, 0, sizeof S);
    S.rows = rows, S.cols = cols, S.n_panels = n_panels, S.grid_cols = grid_cols, S.grid = grid;
    /* tick label widths depend on the range; without data assume o's range, or [0, 1] */
    S.vmin = o->has_range ? o->vmin : 0.0f;
    S.vmax = o->has_range ? o->vmax : 1.0f;
    return attn__viz_layout(out, &S, o);
}

/* ------------------------------------------------------------------ output */

typedef struct {
    FILE *f;
    int err; /* errno of the first failed write */
} sink;

static cairo_status_t sink_write(void *closure, const unsigned char *data, unsigned int length) {
    sink *k = (sink *)closure;
    if (k->err) return CAIRO_STATUS_WRITE_ERROR;
    errno = 0;
    if (length && fwrite(data, 1, length, k->f) != length) {
        k->err = errno ? errno : EIO;
        return CAIRO_STATUS_WRITE_ERROR;
    }
    return CAIRO_STATUS_SUCCESS;
}

static void set_rgb(cairo_t *cr, rgb8 c) { cairo_set_source_rgb(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0); }

static const rgb8 ink = {0x20, 0x20, 0x20};
static const rgb8 frame = {0x40, 0x40, 0x40};

/* Paint an RGB buffer of w x h pixels at (x, y), one buffer pixel per picture pixel. */
static int paint_rgb(cairo_t *cr, const unsigned char *rgb, int w, int h, int x, int y) {
    cairo_surface_t *img = cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    if (cairo_surface_status(img) != CAIRO_STATUS_SUCCESS) {
        cairo_surface_destroy(img);
        return attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory for a %dx%d bitmap", w, h);
    }
    cairo_surface_flush(img);
    unsigned char *d = cairo_image_surface_get_data(img);
    int st = cairo_image_surface_get_stride(img);
    for (int r = 0; r < h; r++) {
        uint32_t *row = (uint32_t *)(d + (size_t)r * st);
        const unsigned char *s = rgb + (size_t)r * w * 3;
        for (int c = 0; c < w; c++) row[c] = 0xff000000u | ((uint32_t)s[3 * c] << 16) | ((uint32_t)s[3 * c + 1] << 8) | s[3 * c + 2];
    }
    cairo_surface_mark_dirty(img);
    cairo_save(cr);
    cairo_set_source_surface(cr, img, x, y);
    cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_NEAREST);
    cairo_rectangle(cr, x, y, w, h);
    cairo_fill(cr);
    cairo_restore(cr);
    cairo_surface_destroy(img);
    return ATTN_OK;
}

/* Matrices with at most this many cells (and no sub-sampling) are drawn as one rectangle per
 * cell (crisp vectors in SVG/PDF); larger ones as one bitmap per panel. */
enum { MAX_RECT_CELLS = 65536 };

static int draw_scene(cairo_t *cr, vtext *t, const layout_ex *X, const attn__viz_scene *S, const attn_heatmap_opts *o) {
    const attn_viz_layout *L = &X->L;
    int rc = ATTN_OK;
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);

    /* panels */
    int subsampled = !S->images && (S->rows > L->plot_h || S->cols > L->plot_w);
    int as_rects = !S->images && !subsampled && S->rows * S->cols * S->n_panels <= MAX_RECT_CELLS;
    unsigned char *bmp = NULL;
    if (!S->images && !as_rects) {
        bmp = (unsigned char *)malloc((size_t)L->plot_w * L->plot_h * 3);
        if (!bmp) return attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory");
    }
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    for (int p = 0; p < S->n_panels && rc == ATTN_OK; p++) {
        int ox = L->plot_x + (p % L->grid_cols) * L->panel_dx;
        int oy = L->plot_y + (p / L->grid_cols) * L->panel_dy;
        if (S->images) {
            rc = paint_rgb(cr, S->images[p], S->img_w, S->img_h, ox, oy);
        } else if (as_rects) {
            for (int64_t r = 0; r < S->rows; r++) {
                int y0 = cell_start(r, S->rows, L->plot_h), y1 = cell_start(r + 1, S->rows, L->plot_h);
                for (int64_t c = 0; c < S->cols; c++) {
                    int x0 = cell_start(c, S->cols, L->plot_w), x1 = cell_start(c + 1, S->cols, L->plot_w);
                    set_rgb(cr, attn__cmap_eval(o->cmap, attn__viz_norm(panel_at(S, p, r, c), S->vmin, S->vmax)));
                    cairo_rectangle(cr, ox + x0, oy + y0, x1 - x0, y1 - y0);
                    cairo_fill(cr);
                }
            }
        } else {
            int64_t prev_r = -1;
            for (int y = 0; y < L->plot_h; y++) {
                int64_t r = (int64_t)y * S->rows / L->plot_h;
                unsigned char *row = bmp + (size_t)y * L->plot_w * 3;
                if (r == prev_r) {
                    memcpy(row, row - (size_t)L->plot_w * 3, (size_t)L->plot_w * 3);
                    continue;
                }
                for (int x = 0; x < L->plot_w; x++) {
                    int64_t c = (int64_t)x * S->cols / L->plot_w;
                    rgb8 v = attn__cmap_eval(o->cmap, attn__viz_norm(panel_at(S, p, r, c), S->vmin, S->vmax));
                    row[3 * x] = v.r, row[3 * x + 1] = v.g, row[3 * x + 2] = v.b;
                }
                prev_r = r;
            }
            rc = paint_rgb(cr, bmp, L->plot_w, L->plot_h, ox, oy);
        }
    }
    free(bmp);
    if (rc < 0) return rc;
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_DEFAULT);

    /* text */
    set_rgb(cr, ink);
    if (X->cap_h)
        for (int p = 0; p < S->n_panels; p++) {
            int ox = L->plot_x + (p % L->grid_cols) * L->panel_dx;
            int oy = L->plot_y + (p / L->grid_cols) * L->panel_dy;
            char cbuf[48];
            vt_draw(cr, t, panel_caption(S, p, cbuf, sizeof cbuf), X->font_px, L->plot_w + PANEL_GAP - 2,
                    ox + L->plot_w / 2.0, oy - X->cap_h / 2.0 - 1, AL_CENTRE, 0);
        }
    if (!S->images && o->row_labels)
        for (int gr = 0; gr < L->grid_rows; gr++)
            for (int64_t r = 0; r < S->rows; r += X->row_step) {
                if (!o->row_labels[r]) continue;
                double cy = L->plot_y + gr * L->panel_dy +
                            (cell_start(r, S->rows, L->plot_h) + cell_start(r + 1, S->rows, L->plot_h)) / 2.0;
                vt_draw(cr, t, o->row_labels[r], X->font_px, LABEL_MAX, L->plot_x - GAP, cy, AL_RIGHT, 0);
            }
    if (!S->images && o->col_labels)
        for (int gc = 0; gc < L->grid_cols; gc++) {
            /* the bottom panel of this column (the last grid row may be incomplete) */
            int gr = L->grid_rows - 1;
            while (gr > 0 && gr * L->grid_cols + gc >= S->n_panels) gr--;
            int base_y = L->plot_y + gr * L->panel_dy + L->plot_h + GAP;
            for (int64_t c = 0; c < S->cols; c += X->col_step) {
                if (!o->col_labels[c]) continue;
                double cx = L->plot_x + gc * L->panel_dx +
                            (cell_start(c, S->cols, L->plot_w) + cell_start(c + 1, S->cols, L->plot_w)) / 2.0;
                if (X->col_flat) /* level, centred under its cell */
                    vt_draw(cr, t, o->col_labels[c], X->font_px, LABEL_MAX, cx, base_y + X->cl_h / 2.0, AL_CENTRE, 0);
                else /* rotated: the label ends just below the panel and reads upwards */
                    vt_draw(cr, t, o->col_labels[c], X->font_px, LABEL_MAX, cx, base_y, AL_RIGHT, 1);
            }
        }
    int grid_w = L->grid_cols * L->plot_w + (L->grid_cols - 1) * PANEL_GAP;
    int grid_h = L->grid_rows * L->panel_dy - PANEL_GAP - X->cap_h;
    if (o->title) {
        int w = vt_width(t, o->title, X->title_px, LABEL_MAX * 4);
        double x = L->plot_x + (grid_w - w) / 2.0;
        if (x + w > L->width - MARGIN) x = L->width - MARGIN - w;
        if (x < MARGIN) x = MARGIN;
        vt_draw(cr, t, o->title, X->title_px, LABEL_MAX * 4, x, X->title_y + X->title_line / 2.0, AL_LEFT, 0);
    }
    if (o->x_label)
        vt_draw(cr, t, o->x_label, X->font_px, grid_w, L->plot_x + grid_w / 2.0, X->xlab_y + X->line / 2.0, AL_CENTRE, 0);
    if (o->y_label)
        vt_draw(cr, t, o->y_label, X->font_px, grid_h, X->ylab_x + X->line / 2.0, L->plot_y + grid_h / 2.0, AL_CENTRE, 1);

    /* colour bar: a linear gradient through the map's anchors, vmax at the top */
    if (o->colorbar) {
        int n;
        const rgb8 *tab = attn__cmap_table(o->cmap, &n);
        /* from the bottom row's pixel centre (vmin) to the top row's (vmax) */
        cairo_pattern_t *g = cairo_pattern_create_linear(0, L->bar_y + L->bar_h - 0.5, 0, L->bar_y + 0.5);
        for (int i = 0; i < n; i++)
            cairo_pattern_add_color_stop_rgb(g, (double)i / (n - 1), tab[i].r / 255.0, tab[i].g / 255.0, tab[i].b / 255.0);
        cairo_set_source(cr, g);
        cairo_rectangle(cr, L->bar_x, L->bar_y, L->bar_w, L->bar_h);
        cairo_fill(cr);
        cairo_pattern_destroy(g);
        /* frame outside the gradient so the end colours stay exact */
        set_rgb(cr, frame);
        cairo_set_line_width(cr, 1);
        cairo_rectangle(cr, L->bar_x - 0.5, L->bar_y - 0.5, L->bar_w + 1, L->bar_h + 1);
        cairo_stroke(cr);
        double span = (double)S->vmax - S->vmin;
        for (int i = 0; i < X->n_ticks; i++) {
            double f = (S->vmax - X->ticks[i]) / span; /* 0 at the top */
            int y = L->bar_y + (int)lround(f * (L->bar_h - 1));
            set_rgb(cr, frame);
            cairo_move_to(cr, L->bar_x + L->bar_w, y + 0.5);
            cairo_line_to(cr, L->bar_x + L->bar_w + L->tick_len, y + 0.5);
            cairo_stroke(cr);
            set_rgb(cr, ink);
            vt_draw(cr, t, X->tick_labels[i], X->font_px, 0, L->tick_label_x, y + 0.5, AL_LEFT, 0);
        }
    }
    return ATTN_OK;
}

int attn__viz_render(const char *path, attn_viz_format fmt, const attn__viz_scene *S, const attn_heatmap_opts *o) {
    int rc;
    if (fmt == ATTN_VIZ_AUTO) fmt = o->format;
    if (fmt == ATTN_VIZ_AUTO && (rc = attn_viz_format_from_path(&fmt, path)) < 0) return rc;
    if ((rc = attn__viz_check_opts(o)) < 0) return rc;
    vtext t;
    layout_ex X;
    rc = vt_open(&t, o->font);
    if (rc == ATTN_OK) rc = compute_layout(&X, &t, S, o);
    if (rc < 0) {
        vt_close(&t);
        return rc;
    }
    const attn_viz_layout *L = &X.L;
    if (o->layout_out) *o->layout_out = X.L;
    /* atomic output: the target is replaced only when the picture is complete */
    attn_out *out;
    if (attn_out_open(&out, path, fmt == ATTN_VIZ_SVG ? ATTN_OUT_TEXT : ATTN_OUT_BINARY) < 0) {
        vt_close(&t);
        return ATTN_E_IO;
    }
    sink k = {attn_out_file(out), 0};
    cairo_surface_t *surf;
    if (fmt == ATTN_VIZ_PNG) surf = cairo_image_surface_create(CAIRO_FORMAT_RGB24, L->width, L->height);
    else if (fmt == ATTN_VIZ_SVG) surf = cairo_svg_surface_create_for_stream(sink_write, &k, L->width, L->height);
    else surf = cairo_pdf_surface_create_for_stream(sink_write, &k, L->width, L->height);
    cairo_t *cr = cairo_create(surf);
    if (cairo_status(cr) != CAIRO_STATUS_SUCCESS) {
        rc = attn_set_error(ATTN_E_NOMEM, "heatmap: cannot create a %dx%d picture: %s", L->width, L->height,
                            cairo_status_to_string(cairo_status(cr)));
    } else {
        rc = draw_scene(cr, &t, &X, S, o);
        if (rc == ATTN_OK && cairo_status(cr) != CAIRO_STATUS_SUCCESS)
            rc = attn_set_error(ATTN_E_NOMEM, "heatmap: drawing failed: %s", cairo_status_to_string(cairo_status(cr)));
    }
    cairo_destroy(cr);
    if (fmt == ATTN_VIZ_PNG) {
        if (rc == ATTN_OK) {
            cairo_status_t st = cairo_surface_write_to_png_stream(surf, sink_write, &k);
            if (st != CAIRO_STATUS_SUCCESS)
                rc = attn_set_error(ATTN_E_IO, "%s: cannot write PNG: %s", path,
                                    k.err ? strerror(k.err) : cairo_status_to_string(st));
        }
    } else {
        cairo_surface_finish(surf);
        cairo_status_t st = cairo_surface_status(surf);
        if (rc == ATTN_OK && (st != CAIRO_STATUS_SUCCESS || k.err))
            rc = attn_set_error(ATTN_E_IO, "%s: cannot write %s: %s", path, fmt == ATTN_VIZ_SVG ? "SVG" : "PDF",
                                k.err ? strerror(k.err) : cairo_status_to_string(st));
    }
    cairo_surface_destroy(surf);
    if (rc == ATTN_OK || (k.err && ferror(k.f)))
        rc = attn_out_commit(out); /* write errors are reported with their reason; nothing replaced */
    else
        attn_out_abort(out);
    vt_close(&t);
    return rc;
}
