/* Heatmap pictures (PNG via libpng, SVG as text) with FreeType-rendered labels.
 *
 * Both writers share one layout computation (compute_layout) so the PNG and the SVG of
 * the same matrix put every element at the same pixel position. */
#include "attn_viz.h"
#include "attn_io.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ft2build.h>
#include FT_FREETYPE_H

/* ------------------------------------------------------------------ colour maps */

typedef struct {
    unsigned char r, g, b;
} rgb8;

/* Anchor colours, equally spaced on [0, 1]; see attn_viz.h. */
static const rgb8 cmap_viridis[] = {{0x44, 0x01, 0x54}, {0x47, 0x2d, 0x7b}, {0x3b, 0x52, 0x8b},
                                   {0x2c, 0x72, 0x8e}, {0x21, 0x91, 0x8c}, {0x28, 0xae, 0x80},
                                   {0x5e, 0xc9, 0x62}, {0xad, 0xdc, 0x30}, {0xfd, 0xe7, 0x25}};
static const rgb8 cmap_diverging[] = {{0x21, 0x66, 0xac}, {0x67, 0xa9, 0xcf}, {0xf7, 0xf7, 0xf7},
                                      {0xef, 0x8a, 0x62}, {0xb2, 0x18, 0x2b}};
static const rgb8 cmap_gray[] = {{0, 0, 0}, {255, 255, 255}};
static const rgb8 nan_grey = {0x80, 0x80, 0x80};

static const rgb8 *cmap_table(attn_colormap cmap, int *n) {
    switch (cmap) {
    case ATTN_CMAP_VIRIDIS: *n = 9; return cmap_viridis;
    case ATTN_CMAP_DIVERGING: *n = 5; return cmap_diverging;
    case ATTN_CMAP_GRAY: *n = 2; return cmap_gray;
    default: *n = 0; return NULL;
    }
}

static rgb8 cmap_eval(attn_colormap cmap, float t) {
    int n;
    const rgb8 *tab = cmap_table(cmap, &n);
    if (!tab || t != t) return nan_grey;
    if (t <= 0) return tab[0];
    if (t >= 1) return tab[n - 1];
    double pos = (double)t * (n - 1);
    int i = (int)pos;
    if (i >= n - 1) return tab[n - 1];
    double f = pos - i;
    rgb8 a = tab[i], b = tab[i + 1], c;
    c.r = (unsigned char)lround(a.r + (b.r - a.r) * f);
    c.g = (unsigned char)lround(a.g + (b.g - a.g) * f);
    c.b = (unsigned char)lround(a.b + (b.b - a.b) * f);
    return c;
}

void attn_colormap_rgb(attn_colormap cmap, float t, unsigned char rgb[3]) {
    if (!rgb) return;
    rgb8 c = cmap_eval(cmap, t);
    rgb[0] = c.r;
    rgb[1] = c.g;
    rgb[2] = c.b;
}

attn_heatmap_opts attn_heatmap_opts_default(void) {
    attn_heatmap_opts o;
    memset(&o, 0, sizeof o);
    o.cmap = ATTN_CMAP_VIRIDIS;
    o.colorbar = 1;
    o.font_px = 12;
    return o;
}

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

static int utf8_put(char *out, uint32_t c) {
    if (c < 0x80) {
        out[0] = (char)c;
        return 1;
    } else if (c < 0x800) {
        out[0] = (char)(0xc0 | (c >> 6));
        out[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    } else if (c < 0x10000) {
        out[0] = (char)(0xe0 | (c >> 12));
        out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
        out[2] = (char)(0x80 | (c & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (c >> 18));
    out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
    out[3] = (char)(0x80 | (c & 0x3f));
    return 4;
}

/* ------------------------------------------------------------------ text (FreeType) */

typedef struct {
    FT_Library lib;
    FT_Face face;
    int ok;  /* font loaded */
    int px;  /* current pixel size */
    int asc, desc; /* ascender (above baseline) and descender (below), pixels, >= 0 */
} vtext;

static void vt_open(vtext *t, const char *path) {
    memset(t, 0, sizeof *t);
    if (FT_Init_FreeType(&t->lib) != 0) {
        t->lib = NULL;
        return;
    }
    if (FT_New_Face(t->lib, path ? path : ATTN_VIZ_DEFAULT_FONT, 0, &t->face) != 0) {
        t->face = NULL;
        return;
    }
    t->ok = 1;
}

static void vt_close(vtext *t) {
    if (t->face) FT_Done_Face(t->face);
    if (t->lib) FT_Done_FreeType(t->lib);
    memset(t, 0, sizeof *t);
}

static void vt_size(vtext *t, int px) {
    if (!t->ok || t->px == px) return;
    if (FT_Set_Pixel_Sizes(t->face, 0, (FT_UInt)px) != 0) {
        t->ok = 0;
        return;
    }
    t->px = px;
    t->asc = (int)((t->face->size->metrics.ascender + 63) >> 6);
    t->desc = (int)((-t->face->size->metrics.descender + 63) >> 6);
    if (t->desc < 0) t->desc = 0;
}

/* Height of a text line at px (0 without a font). */
static int vt_line(vtext *t, int px) {
    if (!t->ok) return 0;
    vt_size(t, px);
    return t->ok ? t->asc + t->desc : 0;
}

/* Advance width of s at px, in pixels (0 without a font or for NULL). */
static int vt_width(vtext *t, const char *s, int px) {
    if (!t->ok || !s) return 0;
    vt_size(t, px);
    long w = 0;
    uint32_t c;
    while ((c = utf8_next(&s)) != 0) {
        if (FT_Load_Char(t->face, c, FT_LOAD_DEFAULT) != 0) continue;
        w += (t->face->glyph->advance.x + 32) >> 6;
        if (w > 100000) break;
    }
    return (int)w;
}

/* Copy s into buf, cut (with a trailing ellipsis) so that it is at most maxw pixels wide.
 * buf must hold strlen(s) + 4 bytes. */
static void vt_fit(vtext *t, const char *s, int px, int maxw, char *buf) {
    strcpy(buf, s);
    if (vt_width(t, buf, px) <= maxw) return;
    static const char ell[] = "\xe2\x80\xa6"; /* U+2026 */
    size_t n = strlen(buf);
    while (n > 0) {
        /* drop one code point from the end */
        do n--;
        while (n > 0 && ((unsigned char)buf[n] & 0xc0) == 0x80);
        memcpy(buf + n, ell, sizeof ell);
        if (vt_width(t, buf, px) <= maxw) return;
    }
    buf[0] = '\0';
}

/* ------------------------------------------------------------------ canvas (PNG) */

typedef struct {
    int w, h;
    unsigned char *px; /* RGB, row-major */
} canvas;

static void cv_fill(canvas *cv, int x0, int y0, int w, int h, rgb8 c) {
    int x1 = x0 + w, y1 = y0 + h;
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > cv->w) x1 = cv->w;
    if (y1 > cv->h) y1 = cv->h;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            unsigned char *p = cv->px + ((size_t)y * cv->w + x) * 3;
            p[0] = c.r, p[1] = c.g, p[2] = c.b;
        }
}

static void cv_blend(canvas *cv, int x, int y, int a, rgb8 c) {
    if (x < 0 || y < 0 || x >= cv->w || y >= cv->h || a <= 0) return;
    unsigned char *p = cv->px + ((size_t)y * cv->w + x) * 3;
    p[0] = (unsigned char)(p[0] + ((int)c.r - p[0]) * a / 255);
    p[1] = (unsigned char)(p[1] + ((int)c.g - p[1]) * a / 255);
    p[2] = (unsigned char)(p[2] + ((int)c.b - p[2]) * a / 255);
}

/* Draw s with its line box's top-left at (x, y) (unrotated), or, when rot is set, rotated
 * 90 degrees counter-clockwise (reading upwards) with the line box's top-left corner —
 * now the bottom-left — at (x, y): the text then occupies [x, x + line) x (y - width, y]. */
static void cv_text(canvas *cv, vtext *t, const char *s, int px, int x, int y, int rot, rgb8 col) {
    if (!t->ok || !s) return;
    vt_size(t, px);
    if (!t->ok) return;
    int pen = 0;
    uint32_t c;
    while ((c = utf8_next(&s)) != 0) {
        if (FT_Load_Char(t->face, c, FT_LOAD_RENDER) != 0) continue;
        FT_GlyphSlot g = t->face->glyph;
        const FT_Bitmap *bm = &g->bitmap;
        if (bm->pixel_mode == FT_PIXEL_MODE_GRAY) {
            for (unsigned r = 0; r < bm->rows; r++)
                for (unsigned q = 0; q < bm->width; q++) {
                    int a = bm->buffer[(long)r * bm->pitch + q];
                    int u = pen + g->bitmap_left + (int)q; /* along the text */
                    int v = t->asc - g->bitmap_top + (int)r; /* down from the line top */
                    if (rot) cv_blend(cv, x + v, y - u, a, col);
                    else cv_blend(cv, x + u, y + v, a, col);
                }
        }
        pen += (int)((g->advance.x + 32) >> 6);
        if (pen > 100000) break;
    }
}

/* ------------------------------------------------------------------ layout */

enum { MARGIN = 10, GAP = 4, PANEL_GAP = 12, BAR_GAP = 14, BAR_W = 16, TICK = 4, LABEL_MAX = 160 };

typedef struct {
    attn_viz_layout L;
    int64_t rows, cols;
    int n_panels, grid;
    int font_px, title_px;
    int line, title_line;     /* line heights */
    int rl_w, cl_h;           /* row-label column width, column-label band height */
    int64_t row_step, col_step; /* draw every k-th label */
    int cap_h;                /* caption band above each panel */
    int title_y, xlab_y, ylab_x;
    int tick_x;
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
    if (!labels || !t->ok) return 0;
    for (int64_t i = 0; i < n; i++) {
        if (!labels[i]) continue;
        int lw = vt_width(t, labels[i], px);
        if (lw > w) w = lw;
        if (w >= LABEL_MAX) return LABEL_MAX;
    }
    return w;
}

static void fmt_tick(char *buf, size_t n, double v) {
    if (v == 0) v = 0; /* no "-0" */
    snprintf(buf, n, "%.3g", v);
}

static int compute_layout(layout_ex *X, vtext *t, int64_t rows, int64_t cols, int n_panels,
                          int grid_cols, int grid, const attn_heatmap_opts *o, float vmin,
                          float vmax) {
    memset(X, 0, sizeof *X);
    attn_viz_layout *L = &X->L;
    if (rows < 1 || cols < 1)
        return attn_set_error(ATTN_E_INVALID, "heatmap: matrix is %lldx%lld; need at least 1x1",
                              (long long)rows, (long long)cols);
    if (n_panels < 1 || n_panels > 65536)
        return attn_set_error(ATTN_E_INVALID, "heatmap: %d panels (need 1..65536)", n_panels);
    if (o->cell_w < 0 || o->cell_h < 0)
        return attn_set_error(ATTN_E_INVALID, "heatmap: negative cell size");
    if (o->font_px < 0 || o->font_px > 256)
        return attn_set_error(ATTN_E_INVALID, "heatmap: font size %d out of range", o->font_px);
    if (o->has_range && !(isfinite(o->vmin) && isfinite(o->vmax) && o->vmin < o->vmax))
        return attn_set_error(ATTN_E_INVALID, "heatmap: bad range [%g, %g]", (double)o->vmin,
                              (double)o->vmax);
    if ((int)o->cmap < 0 || o->cmap > ATTN_CMAP_GRAY)
        return attn_set_error(ATTN_E_INVALID, "heatmap: unknown colour map %d", (int)o->cmap);

    X->rows = rows, X->cols = cols, X->n_panels = n_panels, X->grid = grid;
    if (grid_cols <= 0) {
        grid_cols = 1;
        while ((int64_t)grid_cols * grid_cols < n_panels) grid_cols++;
    }
    if (grid_cols > n_panels) grid_cols = n_panels;
    L->grid_cols = grid_cols;
    L->grid_rows = (n_panels + grid_cols - 1) / grid_cols;

    /* cell area of one panel */
    int64_t pw, ph;
    if (o->cell_w == 0 && o->cell_h == 0) {
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
        if (cols > ATTN_VIZ_MAX_SIDE || rows > ATTN_VIZ_MAX_SIDE || cw > ATTN_VIZ_MAX_SIDE ||
            ch > ATTN_VIZ_MAX_SIDE)
            return attn_set_error(ATTN_E_INVALID, "heatmap: picture would exceed %d pixels",
                                  ATTN_VIZ_MAX_SIDE);
        pw = cols * cw, ph = rows * ch;
    }
    if (pw > ATTN_VIZ_MAX_SIDE || ph > ATTN_VIZ_MAX_SIDE)
        return attn_set_error(ATTN_E_INVALID, "heatmap: picture would exceed %d pixels",
                              ATTN_VIZ_MAX_SIDE);
    L->plot_w = (int)pw, L->plot_h = (int)ph;

    /* text metrics */
    X->font_px = o->font_px ? o->font_px : 12;
    X->title_px = (X->font_px * 13 + 5) / 10;
    X->line = vt_line(t, X->font_px);
    X->title_line = vt_line(t, X->title_px);
    L->has_text = t->ok;
    int line = X->line;

    X->rl_w = max_label_width(t, o->row_labels, rows, X->font_px);
    X->cl_h = max_label_width(t, o->col_labels, cols, X->font_px);
    X->row_step = nice_step((double)ph / (double)rows, line + 1);
    X->col_step = nice_step((double)pw / (double)cols, line + 1);
    X->cap_h = (grid && line) ? line + 2 : 0;

    int ylab_w = (o->y_label && line) ? line + GAP : 0;
    int title_h = (o->title && X->title_line) ? X->title_line + 6 : 0;
    int xlab_h = (o->x_label && line) ? line + GAP : 0;

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
        L->bar_h = (int)(grid_h > 48 ? grid_h : 48);
        X->tick_x = L->bar_x + BAR_W + TICK + 2;
        int tw = 0;
        if (t->ok) {
            char buf[64];
            double vals[3] = {vmin, vmax, 0.5 * ((double)vmin + vmax)};
            for (int i = 0; i < 3; i++) {
                fmt_tick(buf, sizeof buf, vals[i]);
                int w = vt_width(t, buf, X->font_px);
                if (w > tw) tw = w;
            }
        }
        right = X->tick_x + tw;
        bar_bottom = L->bar_y + L->bar_h + (line + 1) / 2;
    }
    int64_t width = right + MARGIN;
    if (title_h) {
        int tw = vt_width(t, o->title, X->title_px);
        if (tw > LABEL_MAX * 4) tw = LABEL_MAX * 4; /* longer titles are cut */
        if (tw + 2 * MARGIN > width) {
            /* widen the picture for the title and centre the rest under it */
            int shift = (int)((tw + 2 * MARGIN - width) / 2);
            width = tw + 2 * MARGIN;
            X->ylab_x += shift;
            L->plot_x += shift;
            if (o->colorbar) L->bar_x += shift, X->tick_x += shift;
        }
    }
    int64_t height = (bottom > bar_bottom ? bottom : bar_bottom) + MARGIN;
    if (width > ATTN_VIZ_MAX_SIDE || height > ATTN_VIZ_MAX_SIDE)
        return attn_set_error(ATTN_E_INVALID, "heatmap: picture would be %lldx%lld, over %d pixels",
                              (long long)width, (long long)height, ATTN_VIZ_MAX_SIDE);
    L->width = (int)width, L->height = (int)height;
    return ATTN_OK;
}

int attn_heatmap_layout(attn_viz_layout *out, int64_t rows, int64_t cols, int n_panels,
                        int grid_cols, int grid, const attn_heatmap_opts *o) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "attn_heatmap_layout: out is NULL");
    attn_heatmap_opts def = attn_heatmap_opts_default();
    if (!o) o = &def;
    vtext t;
    vt_open(&t, o->font_path);
    layout_ex X;
    /* tick label widths depend on the range; a layout without data assumes the range the
     * options give, or [0, 1] */
    float lo = o->has_range ? o->vmin : 0.0f, hi = o->has_range ? o->vmax : 1.0f;
    int rc = compute_layout(&X, &t, rows, cols, n_panels, grid_cols, grid, o, lo, hi);
    vt_close(&t);
    if (rc == ATTN_OK) *out = X.L;
    return rc;
}

/* ------------------------------------------------------------------ data access */

typedef struct {
    const attn_tensor *m;
    int n_panels;
    int64_t rows, cols;
    int grid_cols_4d; /* > 0 for a 4-D grid tensor */
} panels;

static float panel_at(const panels *P, int p, int64_t r, int64_t c) {
    const attn_tensor *m = P->m;
    int64_t off;
    if (m->ndim == 2) {
        off = r * m->stride[0] + c * m->stride[1];
    } else if (m->ndim == 3) {
        off = p * m->stride[0] + r * m->stride[1] + c * m->stride[2];
    } else {
        int64_t gr = p / P->grid_cols_4d, gc = p % P->grid_cols_4d;
        off = gr * m->stride[0] + gc * m->stride[1] + r * m->stride[2] + c * m->stride[3];
    }
    return ((const float *)m->data)[off];
}

static int check_tensor(panels *P, const attn_tensor *m, int grid, const char *path) {
    memset(P, 0, sizeof *P);
    if (!path || !m) return attn_set_error(ATTN_E_INVALID, "heatmap: NULL path or matrix");
    if (m->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "heatmap: matrix dtype is %s, expected float32",
                              attn_dtype_name(m->dtype));
    P->m = m;
    if (!grid) {
        if (m->ndim != 2)
            return attn_set_error(ATTN_E_SHAPE, "heatmap: matrix has %d dims, expected 2", m->ndim);
        P->n_panels = 1, P->rows = m->shape[0], P->cols = m->shape[1];
    } else if (m->ndim == 3) {
        if (m->shape[0] < 1 || m->shape[0] > 65536)
            return attn_set_error(ATTN_E_INVALID, "heatmap grid: %lld panels (need 1..65536)",
                                  (long long)m->shape[0]);
        P->n_panels = (int)m->shape[0], P->rows = m->shape[1], P->cols = m->shape[2];
    } else if (m->ndim == 4) {
        if (m->shape[0] < 1 || m->shape[1] < 1 || m->shape[0] > 65536 || m->shape[1] > 65536 ||
            m->shape[0] * m->shape[1] > 65536)
            return attn_set_error(ATTN_E_INVALID, "heatmap grid: %lldx%lld panels (need 1..65536)",
                                  (long long)m->shape[0], (long long)m->shape[1]);
        P->n_panels = (int)(m->shape[0] * m->shape[1]);
        P->grid_cols_4d = (int)m->shape[1];
        P->rows = m->shape[2], P->cols = m->shape[3];
    } else {
        return attn_set_error(ATTN_E_SHAPE, "heatmap grid: tensor has %d dims, expected 3 or 4",
                              m->ndim);
    }
    if (P->rows < 1 || P->cols < 1)
        return attn_set_error(ATTN_E_INVALID, "heatmap: matrix is %lldx%lld; need at least 1x1",
                              (long long)P->rows, (long long)P->cols);
    if (!m->data) return attn_set_error(ATTN_E_INVALID, "heatmap: matrix data is NULL");
    return ATTN_OK;
}

/* Colour range: the options', or the finite data's (symmetric for the diverging map). */
static void data_range(const panels *P, const attn_heatmap_opts *o, float *vmin, float *vmax) {
    if (o->has_range) {
        *vmin = o->vmin, *vmax = o->vmax;
        return;
    }
    double lo = INFINITY, hi = -INFINITY;
    for (int p = 0; p < P->n_panels; p++)
        for (int64_t r = 0; r < P->rows; r++)
            for (int64_t c = 0; c < P->cols; c++) {
                float v = panel_at(P, p, r, c);
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

static float norm_value(float v, float vmin, float vmax) {
    if (v != v) return v;
    double t = ((double)v - vmin) / ((double)vmax - vmin);
    return (float)(t < 0 ? 0 : t > 1 ? 1 : t);
}

/* First pixel (relative to the panel) of cell k of n cells spread over w pixels. */
static int cell_start(int64_t k, int64_t n, int w) {
    /* pixel x shows cell floor(x * n / w); cell k starts at ceil(k * w / n) */
    return (int)((k * (int64_t)w + n - 1) / n);
}

/* The caption of panel p (default "L{gr} H{gc}" or "{p}") into buf. */
static const char *panel_caption(const panels *P, const char *const *captions, int p, char *buf,
                                 size_t n) {
    if (captions) return captions[p] ? captions[p] : "";
    if (P->grid_cols_4d)
        snprintf(buf, n, "L%d H%d", p / P->grid_cols_4d, p % P->grid_cols_4d);
    else
        snprintf(buf, n, "%d", p);
    return buf;
}

/* ------------------------------------------------------------------ PNG */

static const rgb8 ink = {0x20, 0x20, 0x20};
static const rgb8 frame = {0x40, 0x40, 0x40};

static int render_png(const char *path, const panels *P, int grid_cols, const char *const *captions,
                      int grid, const attn_heatmap_opts *o) {
    float vmin, vmax;
    data_range(P, o, &vmin, &vmax);
    vtext t;
    vt_open(&t, o->font_path);
    layout_ex X;
    int rc = compute_layout(&X, &t, P->rows, P->cols, P->n_panels,
                            P->grid_cols_4d ? P->grid_cols_4d : grid_cols, grid, o, vmin, vmax);
    if (rc < 0) {
        vt_close(&t);
        return rc;
    }
    const attn_viz_layout *L = &X.L;
    canvas cv = {L->width, L->height, NULL};
    cv.px = malloc((size_t)cv.w * cv.h * 3);
    char *buf = NULL;
    if (!cv.px) {
        vt_close(&t);
        return attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory for a %dx%d picture", cv.w, cv.h);
    }
    memset(cv.px, 0xff, (size_t)cv.w * cv.h * 3);

    /* panels */
    int64_t *colmap = malloc(sizeof(int64_t) * (size_t)L->plot_w);
    rgb8 *rowbuf = malloc(sizeof(rgb8) * (size_t)L->plot_w);
    if (!colmap || !rowbuf) {
        rc = attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory");
        goto out;
    }
    for (int x = 0; x < L->plot_w; x++) colmap[x] = (int64_t)x * P->cols / L->plot_w;
    for (int p = 0; p < P->n_panels; p++) {
        int ox = L->plot_x + (p % L->grid_cols) * L->panel_dx;
        int oy = L->plot_y + (p / L->grid_cols) * L->panel_dy;
        int64_t prev_r = -1;
        for (int y = 0; y < L->plot_h; y++) {
            int64_t r = (int64_t)y * P->rows / L->plot_h;
            if (r != prev_r) {
                for (int x = 0; x < L->plot_w; x++)
                    rowbuf[x] = cmap_eval(o->cmap, norm_value(panel_at(P, p, r, colmap[x]), vmin, vmax));
                prev_r = r;
            }
            memcpy(cv.px + ((size_t)(oy + y) * cv.w + ox) * 3, rowbuf, (size_t)L->plot_w * 3);
        }
        if (X.cap_h) {
            char cbuf[48];
            const char *cap = panel_caption(P, captions, p, cbuf, sizeof cbuf);
            buf = realloc(buf, strlen(cap) + 4);
            if (!buf) {
                rc = attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory");
                goto out;
            }
            vt_fit(&t, cap, X.font_px, L->plot_w + PANEL_GAP - 2, buf);
            int w = vt_width(&t, buf, X.font_px);
            cv_text(&cv, &t, buf, X.font_px, ox + (L->plot_w - w) / 2, oy - X.cap_h, 0, ink);
        }
    }

    /* row labels (left of the first panel column), column labels (below the last row) */
    if (t.ok && o->row_labels) {
        for (int gr = 0; gr < L->grid_rows; gr++)
            for (int64_t r = 0; r < P->rows; r += X.row_step) {
                const char *s = o->row_labels[r];
                if (!s) continue;
                buf = realloc(buf, strlen(s) + 4);
                if (!buf) {
                    rc = attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory");
                    goto out;
                }
                vt_fit(&t, s, X.font_px, LABEL_MAX, buf);
                int w = vt_width(&t, buf, X.font_px);
                int cy = L->plot_y + gr * L->panel_dy +
                         (cell_start(r, P->rows, L->plot_h) + cell_start(r + 1, P->rows, L->plot_h)) / 2;
                cv_text(&cv, &t, buf, X.font_px, L->plot_x - GAP - w, cy - X.line / 2, 0, ink);
            }
    }
    if (t.ok && o->col_labels) {
        int last_row = L->grid_rows - 1;
        for (int gc = 0; gc < L->grid_cols; gc++) {
            /* the bottom panel of this column (the last grid row may be incomplete) */
            int gr = last_row;
            while (gr > 0 && gr * L->grid_cols + gc >= P->n_panels) gr--;
            int base_y = L->plot_y + gr * L->panel_dy + L->plot_h + GAP;
            for (int64_t c = 0; c < P->cols; c += X.col_step) {
                const char *s = o->col_labels[c];
                if (!s) continue;
                buf = realloc(buf, strlen(s) + 4);
                if (!buf) {
                    rc = attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory");
                    goto out;
                }
                vt_fit(&t, s, X.font_px, LABEL_MAX, buf);
                int w = vt_width(&t, buf, X.font_px);
                int cx = L->plot_x + gc * L->panel_dx +
                         (cell_start(c, P->cols, L->plot_w) + cell_start(c + 1, P->cols, L->plot_w)) / 2;
                cv_text(&cv, &t, buf, X.font_px, cx - X.line / 2, base_y + w, 1, ink);
            }
        }
    }

    /* title, axis captions */
    int grid_w = L->grid_cols * L->plot_w + (L->grid_cols - 1) * PANEL_GAP;
    int grid_h = L->grid_rows * L->panel_dy - PANEL_GAP - X.cap_h;
    if (t.ok && o->title) {
        buf = realloc(buf, strlen(o->title) + 4);
        if (!buf) {
            rc = attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory");
            goto out;
        }
        vt_fit(&t, o->title, X.title_px, L->width - 2 * MARGIN, buf);
        int w = vt_width(&t, buf, X.title_px);
        int x = L->plot_x + (grid_w - w) / 2;
        if (x + w > L->width - MARGIN) x = L->width - MARGIN - w;
        if (x < MARGIN) x = MARGIN;
        cv_text(&cv, &t, buf, X.title_px, x, X.title_y, 0, ink);
    }
    if (t.ok && o->x_label) {
        int w = vt_width(&t, o->x_label, X.font_px);
        cv_text(&cv, &t, o->x_label, X.font_px, L->plot_x + (grid_w - w) / 2, X.xlab_y, 0, ink);
    }
    if (t.ok && o->y_label) {
        int w = vt_width(&t, o->y_label, X.font_px);
        cv_text(&cv, &t, o->y_label, X.font_px, X.ylab_x, L->plot_y + (grid_h + w) / 2, 1, ink);
    }

    /* colour bar: top row = vmax, bottom row = vmin */
    if (o->colorbar) {
        for (int y = 0; y < L->bar_h; y++) {
            float tt = L->bar_h > 1 ? 1.0f - (float)y / (float)(L->bar_h - 1) : 1.0f;
            cv_fill(&cv, L->bar_x, L->bar_y + y, L->bar_w, 1, cmap_eval(o->cmap, tt));
        }
        /* frame outside the gradient so the end colours stay exact */
        cv_fill(&cv, L->bar_x - 1, L->bar_y - 1, L->bar_w + 2, 1, frame);
        cv_fill(&cv, L->bar_x - 1, L->bar_y + L->bar_h, L->bar_w + 2, 1, frame);
        cv_fill(&cv, L->bar_x - 1, L->bar_y, 1, L->bar_h, frame);
        cv_fill(&cv, L->bar_x + L->bar_w, L->bar_y, 1, L->bar_h, frame);
        double vals[3] = {vmax, vmin, 0};
        int ys[3] = {L->bar_y, L->bar_y + L->bar_h - 1, 0};
        int nt = 2;
        double mid = o->cmap == ATTN_CMAP_DIVERGING ? 0.0 : 0.5 * ((double)vmin + vmax);
        if (mid >= vmin && mid <= vmax && L->bar_h >= 3 * (X.line + 2)) {
            vals[2] = mid;
            ys[2] = L->bar_y + (int)lround((vmax - mid) / ((double)vmax - vmin) * (L->bar_h - 1));
            nt = 3;
        }
        for (int i = 0; i < nt; i++) {
            cv_fill(&cv, L->bar_x + L->bar_w + 1, ys[i], TICK, 1, frame);
            if (t.ok) {
                char tb[64];
                fmt_tick(tb, sizeof tb, vals[i]);
                cv_text(&cv, &t, tb, X.font_px, X.tick_x, ys[i] - X.line / 2, 0, ink);
            }
        }
    }

    /* write */
    {
        png_image img;
        memset(&img, 0, sizeof img);
        img.version = PNG_IMAGE_VERSION;
        img.width = (png_uint_32)cv.w;
        img.height = (png_uint_32)cv.h;
        img.format = PNG_FORMAT_RGB;
        /* write through our own FILE: png_image_write_to_file() remove()s the path on a write
         * error, which must never happen to a device or an unrelated file given as output */
        attn_out *po;
        if (attn_out_open(&po, path, ATTN_OUT_BINARY) < 0) {
            rc = ATTN_E_IO;
        } else if (!png_image_write_to_stdio(&img, attn_out_file(po), 0, cv.px, cv.w * 3, NULL) &&
                   !ferror(attn_out_file(po))) {
            attn_out_abort(po); /* libpng's own failure */
            rc = attn_set_error(ATTN_E_IO, "%s: cannot write PNG: %s", path, img.message);
        } else {
            rc = attn_out_commit(po); /* write errors (with their reason) are reported here */
        }
        png_image_free(&img);
    }
out:
    free(buf);
    free(colmap);
    free(rowbuf);
    free(cv.px);
    vt_close(&t);
    return rc;
}

/* ------------------------------------------------------------------ SVG */

/* Write s as XML character data: & < > " ' escaped, invalid UTF-8 -> U+FFFD, control
 * characters (not allowed in XML 1.0) dropped. */
static void svg_escape(FILE *f, const char *s) {
    uint32_t c;
    char enc[4];
    while ((c = utf8_next(&s)) != 0) {
        switch (c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default:
            if ((c < 0x20 && c != '\t') || c == 0xfffe || c == 0xffff) break;
            fwrite(enc, 1, (size_t)utf8_put(enc, c), f);
        }
    }
}

static void svg_text(FILE *f, const char *s, int px, double x, double y, const char *anchor, int rot) {
    if (rot)
        fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" font-size=\"%d\" text-anchor=\"%s\">",
                x, y, px, anchor);
    else
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", x, y, px, anchor);
    svg_escape(f, s);
    fputs("</text>\n", f);
}

static void svg_color(char out[8], rgb8 c) { snprintf(out, 8, "#%02x%02x%02x", c.r, c.g, c.b); }

static int render_svg(const char *path, const panels *P, int grid_cols, const char *const *captions,
                      int grid, const attn_heatmap_opts *o) {
    float vmin, vmax;
    data_range(P, o, &vmin, &vmax);
    vtext t;
    vt_open(&t, o->font_path);
    layout_ex X;
    int rc = compute_layout(&X, &t, P->rows, P->cols, P->n_panels,
                            P->grid_cols_4d ? P->grid_cols_4d : grid_cols, grid, o, vmin, vmax);
    if (rc < 0) {
        vt_close(&t);
        return rc;
    }
    const attn_viz_layout *L = &X.L;
    attn_out *out;
    if (attn_out_open(&out, path, ATTN_OUT_TEXT) < 0) {
        vt_close(&t);
        return ATTN_E_IO;
    }
    FILE *f = attn_out_file(out);
    char *buf = NULL;
    char col[8];
    /* baseline offset of a line whose box starts at y */
    int asc = t.ok ? (vt_size(&t, X.font_px), t.asc) : 0;

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"DejaVu Sans, Verdana, sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            L->width, L->height, L->width, L->height);

    /* panels: one rect per visible cell (or per pixel when the matrix is sub-sampled) */
    int64_t ncols = P->cols < L->plot_w ? P->cols : L->plot_w;
    int64_t nrows = P->rows < L->plot_h ? P->rows : L->plot_h;
    fputs("<g shape-rendering=\"crispEdges\">\n", f);
    for (int p = 0; p < P->n_panels; p++) {
        int ox = L->plot_x + (p % L->grid_cols) * L->panel_dx;
        int oy = L->plot_y + (p / L->grid_cols) * L->panel_dy;
        for (int64_t i = 0; i < nrows; i++) {
            int y0 = cell_start(i, nrows, L->plot_h), y1 = cell_start(i + 1, nrows, L->plot_h);
            int64_t r = (int64_t)y0 * P->rows / L->plot_h;
            for (int64_t j = 0; j < ncols; j++) {
                int x0 = cell_start(j, ncols, L->plot_w), x1 = cell_start(j + 1, ncols, L->plot_w);
                int64_t c = (int64_t)x0 * P->cols / L->plot_w;
                svg_color(col, cmap_eval(o->cmap, norm_value(panel_at(P, p, r, c), vmin, vmax)));
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", ox + x0,
                        oy + y0, x1 - x0, y1 - y0, col);
            }
        }
    }
    fputs("</g>\n", f);

    if (t.ok) {
        fputs("<g fill=\"#202020\">\n", f);
        if (X.cap_h)
            for (int p = 0; p < P->n_panels; p++) {
                int ox = L->plot_x + (p % L->grid_cols) * L->panel_dx;
                int oy = L->plot_y + (p / L->grid_cols) * L->panel_dy;
                char cbuf[48];
                const char *cap = panel_caption(P, captions, p, cbuf, sizeof cbuf);
                buf = realloc(buf, strlen(cap) + 4);
                if (!buf) goto nomem;
                vt_fit(&t, cap, X.font_px, L->plot_w + PANEL_GAP - 2, buf);
                svg_text(f, buf, X.font_px, ox + L->plot_w / 2.0, oy - X.cap_h + asc, "middle", 0);
            }
        if (o->row_labels)
            for (int gr = 0; gr < L->grid_rows; gr++)
                for (int64_t r = 0; r < P->rows; r += X.row_step) {
                    const char *s = o->row_labels[r];
                    if (!s) continue;
                    buf = realloc(buf, strlen(s) + 4);
                    if (!buf) goto nomem;
                    vt_fit(&t, s, X.font_px, LABEL_MAX, buf);
                    int cy = L->plot_y + gr * L->panel_dy +
                             (cell_start(r, P->rows, L->plot_h) + cell_start(r + 1, P->rows, L->plot_h)) / 2;
                    svg_text(f, buf, X.font_px, L->plot_x - GAP, cy - X.line / 2 + asc, "end", 0);
                }
        if (o->col_labels)
            for (int gc = 0; gc < L->grid_cols; gc++) {
                int gr = L->grid_rows - 1;
                while (gr > 0 && gr * L->grid_cols + gc >= P->n_panels) gr--;
                int base_y = L->plot_y + gr * L->panel_dy + L->plot_h + GAP;
                for (int64_t c = 0; c < P->cols; c += X.col_step) {
                    const char *s = o->col_labels[c];
                    if (!s) continue;
                    buf = realloc(buf, strlen(s) + 4);
                    if (!buf) goto nomem;
                    vt_fit(&t, s, X.font_px, LABEL_MAX, buf);
                    int cx = L->plot_x + gc * L->panel_dx +
                             (cell_start(c, P->cols, L->plot_w) + cell_start(c + 1, P->cols, L->plot_w)) / 2;
                    /* rotated: the baseline runs upwards at x = cx - line/2 + asc; the text
                     * ends at base_y */
                    svg_text(f, buf, X.font_px, cx - X.line / 2 + asc, base_y, "end", 1);
                }
            }
        int grid_w = L->grid_cols * L->plot_w + (L->grid_cols - 1) * PANEL_GAP;
        int grid_h = L->grid_rows * L->panel_dy - PANEL_GAP - X.cap_h;
        if (o->title) {
            buf = realloc(buf, strlen(o->title) + 4);
            if (!buf) goto nomem;
            vt_fit(&t, o->title, X.title_px, L->width - 2 * MARGIN, buf);
            int w = vt_width(&t, buf, X.title_px);
            int x = L->plot_x + (grid_w - w) / 2;
            if (x + w > L->width - MARGIN) x = L->width - MARGIN - w;
            if (x < MARGIN) x = MARGIN;
            vt_size(&t, X.title_px);
            svg_text(f, buf, X.title_px, x, X.title_y + t.asc, "start", 0);
            vt_size(&t, X.font_px);
        }
        if (o->x_label) svg_text(f, o->x_label, X.font_px, L->plot_x + grid_w / 2.0, X.xlab_y + asc, "middle", 0);
        if (o->y_label)
            svg_text(f, o->y_label, X.font_px, X.ylab_x + asc, L->plot_y + grid_h / 2.0, "middle", 1);
        fputs("</g>\n", f);
    }

    if (o->colorbar) {
        int n;
        const rgb8 *tab = cmap_table(o->cmap, &n);
        fputs("<defs><linearGradient id=\"attn-cbar\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n", f);
        for (int i = 0; i < n; i++) {
            svg_color(col, tab[i]);
            fprintf(f, "<stop offset=\"%.4f\" stop-color=\"%s\"/>\n", (double)i / (n - 1), col);
        }
        fputs("</linearGradient></defs>\n", f);
        fprintf(f,
                "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"url(#attn-cbar)\" "
                "stroke=\"#404040\" stroke-width=\"1\"/>\n",
                L->bar_x, L->bar_y, L->bar_w, L->bar_h);
        double vals[3] = {vmax, vmin, 0};
        int ys[3] = {L->bar_y, L->bar_y + L->bar_h - 1, 0};
        int nt = 2;
        double mid = o->cmap == ATTN_CMAP_DIVERGING ? 0.0 : 0.5 * ((double)vmin + vmax);
        if (mid >= vmin && mid <= vmax && L->bar_h >= 3 * (X.line + 2)) {
            vals[2] = mid;
            ys[2] = L->bar_y + (int)lround((vmax - mid) / ((double)vmax - vmin) * (L->bar_h - 1));
            nt = 3;
        }
        for (int i = 0; i < nt; i++) {
            fprintf(f, "<line x1=\"%d\" y1=\"%d.5\" x2=\"%d\" y2=\"%d.5\" stroke=\"#404040\"/>\n",
                    L->bar_x + L->bar_w + 1, ys[i], L->bar_x + L->bar_w + 1 + TICK, ys[i]);
            if (t.ok) {
                char tb[64];
                fmt_tick(tb, sizeof tb, vals[i]);
                svg_text(f, tb, X.font_px, X.tick_x, ys[i] - X.line / 2 + asc, "start", 0);
            }
        }
    }
    fputs("</svg>\n", f);
    goto close;
nomem:
    rc = attn_set_error(ATTN_E_NOMEM, "heatmap: out of memory");
close:
    if (rc == ATTN_OK) rc = attn_out_commit(out); /* write errors are reported with their reason */
    else attn_out_abort(out);
    free(buf);
    vt_close(&t);
    return rc;
}

/* ------------------------------------------------------------------ public entry points */

int attn_heatmap_png(const char *path, const attn_tensor *m, const attn_heatmap_opts *o) {
    attn_heatmap_opts def = attn_heatmap_opts_default();
    panels P;
    int rc = check_tensor(&P, m, 0, path);
    if (rc < 0) return rc;
    return render_png(path, &P, 1, NULL, 0, o ? o : &def);
}

int attn_heatmap_svg(const char *path, const attn_tensor *m, const attn_heatmap_opts *o) {
    attn_heatmap_opts def = attn_heatmap_opts_default();
    panels P;
    int rc = check_tensor(&P, m, 0, path);
    if (rc < 0) return rc;
    return render_svg(path, &P, 1, NULL, 0, o ? o : &def);
}

int attn_heatmap_grid_png(const char *path, const attn_tensor *m, int grid_cols,
                          const char *const *captions, const attn_heatmap_opts *o) {
    attn_heatmap_opts def = attn_heatmap_opts_default();
    panels P;
    int rc = check_tensor(&P, m, 1, path);
    if (rc < 0) return rc;
    return render_png(path, &P, grid_cols, captions, 1, o ? o : &def);
}

int attn_heatmap_grid_svg(const char *path, const attn_tensor *m, int grid_cols,
                          const char *const *captions, const attn_heatmap_opts *o) {
    attn_heatmap_opts def = attn_heatmap_opts_default();
    panels P;
    int rc = check_tensor(&P, m, 1, path);
    if (rc < 0) return rc;
    return render_svg(path, &P, grid_cols, captions, 1, o ? o : &def);
}
