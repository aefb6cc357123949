/* Attention pictures (cairo + pango): PNGs are read back with libpng and checked for size
 * (against attn_heatmap_layout), for the exact colours at cell centres (the colour map of
 * the cell's value; anchor colours documented in attn_viz.h), for real glyphs in CJK and
 * Arabic labels (not tofu boxes; shaped Arabic joins its letters) and for the gap between
 * the colour-bar ticks and their labels; PDFs are read back with pdftotext (poppler-utils)
 * for the label characters and the signs of the tick labels. */
#include "attn_viz.h"
#include "attn_viz_html.h"
#include "testutil.h"

#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Under AddressSanitizer (make SAN=1): unwind malloc stacks fully, through the system
 * libraries that have no frame pointers, so tests/lsan.supp's entry for a leak inside cairo's
 * PDF writer (cairo_surface_finish) matches that leak and nothing of ours. Unused otherwise. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "fast_unwind_on_malloc=0"; }

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

typedef struct {
    int w, h;
    unsigned char *px; /* RGB */
} image;

static int read_png(const char *path, image *img) {
    png_image pi;
    memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    img->px = NULL;
    if (!png_image_begin_read_from_file(&pi, path)) return 0;
    pi.format = PNG_FORMAT_RGB;
    img->w = (int)pi.width, img->h = (int)pi.height;
    img->px = malloc(PNG_IMAGE_SIZE(pi));
    if (!img->px || !png_image_finish_read(&pi, NULL, img->px, 0, NULL)) {
        png_image_free(&pi);
        free(img->px);
        img->px = NULL;
        return 0;
    }
    return 1;
}

static unsigned px_at(const image *img, int x, int y) {
    if (!img->px || x < 0 || y < 0 || x >= img->w || y >= img->h) return 0xffffffffu;
    const unsigned char *p = img->px + ((size_t)y * img->w + x) * 3;
    return ((unsigned)p[0] << 16) | ((unsigned)p[1] << 8) | p[2];
}

/* colour at the centre of cell (r, c) of panel (gr, gc) */
static unsigned cell_px(const image *img, const attn_viz_layout *L, int64_t rows, int64_t cols,
                        int gr, int gc, int64_t r, int64_t c) {
    int x = L->plot_x + gc * L->panel_dx + (int)(((2 * c + 1) * L->plot_w) / (2 * cols));
    int y = L->plot_y + gr * L->panel_dy + (int)(((2 * r + 1) * L->plot_h) / (2 * rows));
    return px_at(img, x, y);
}

/* number of "dark" pixels (all channels < 128) in a rectangle */
static int dark_pixels(const image *img, int x0, int y0, int x1, int y1) {
    int n = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            unsigned c = px_at(img, x, y);
            if (c != 0xffffffffu && ((c >> 16) & 255) < 128 && ((c >> 8) & 255) < 128 && (c & 255) < 128) n++;
        }
    return n;
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

static inline int count_str(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}


/* every channel within tol levels */
static int rgb_close(unsigned a, unsigned b, int tol) {
    for (int sh = 0; sh <= 16; sh += 8) {
        int d = (int)((a >> sh) & 255) - (int)((b >> sh) & 255);
        if (d > tol || d < -tol) return 0;
    }
    return 1;
}

static unsigned cmap_hex(attn_colormap cm, double t) {
    unsigned char c[3];
    attn_colormap_rgb(cm, (float)t, c);
    return ((unsigned)c[0] << 16) | ((unsigned)c[1] << 8) | c[2];
}

/* The text pdftotext (poppler-utils) extracts from a PDF, or NULL. */
static char *pdf_text(const char *pdf) {
    char txt[600], cmd[1400];
    snprintf(txt, sizeof txt, "%s.txt", pdf);
    snprintf(cmd, sizeof cmd, "pdftotext -enc UTF-8 '%s' '%s' 2>/dev/null", pdf, txt);
    if (system(cmd) != 0) {
        fprintf(stderr, "pdftotext failed or is missing (Debian package poppler-utils, installed by scripts/setup.sh)\n");
        return NULL;
    }
    return read_text(txt);
}

/* ink = a pixel clearly darker than the white background */
static int is_ink(const image *img, int x, int y) {
    unsigned c = px_at(img, x, y);
    if (c == 0xffffffffu) return 0;
    int lum = (int)(((c >> 16) & 255) + ((c >> 8) & 255) + (c & 255));
    return lum < 3 * 160;
}

typedef struct {
    int x0, y0, x1, y1; /* ink bounding box, [x0, x1) x [y0, y1); x1 == 0 when no ink */
    int n;              /* ink pixels */
    double frame;       /* fraction of the box's outline pixels that are ink */
    int gaps;           /* runs of ink-free columns strictly inside the box */
} ink_stats;

static ink_stats ink_in(const image *img, int x0, int y0, int x1, int y1) {
    ink_stats s = {x1, y1, 0, 0, 0, 0, 0};
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++)
            if (is_ink(img, x, y)) {
                s.n++;
                if (x < s.x0) s.x0 = x;
                if (y < s.y0) s.y0 = y;
                if (x + 1 > s.x1) s.x1 = x + 1;
                if (y + 1 > s.y1) s.y1 = y + 1;
            }
    if (!s.n) return s;
    int on = 0, all = 0;
    for (int x = s.x0; x < s.x1; x++) {
        on += is_ink(img, x, s.y0) + is_ink(img, x, s.y1 - 1);
        all += 2;
    }
    for (int y = s.y0; y < s.y1; y++) {
        on += is_ink(img, s.x0, y) + is_ink(img, s.x1 - 1, y);
        all += 2;
    }
    s.frame = (double)on / all;
    int prev_empty = 0;
    for (int x = s.x0; x < s.x1; x++) {
        int empty = 1;
        for (int y = s.y0; y < s.y1 && empty; y++)
            if (is_ink(img, x, y)) empty = 0;
        if (empty && !prev_empty) s.gaps++;
        prev_empty = empty;
    }
    return s;
}

/* Draw a 1x1 heatmap whose only text is the row label `label` at 28 px (no colour bar) and
 * return the ink statistics of the label area left of the cell. */
static ink_stats label_ink(const char *name, const char *label) {
    ink_stats none = {0, 0, 0, 0, 0, 0, 0};
    float v = 1;
    attn_tensor t = attn_tensor_f32_2d(&v, 1, 1);
    const char *rl[1] = {label};
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.row_labels = rl;
    o.colorbar = 0;
    o.font_px = 28;
    o.cell_w = o.cell_h = 60;
    const char *p = tmp_path(name);
    if (attn_heatmap_png(p, &t, &o) != 0) return none;
    attn_viz_layout L;
    image img;
    if (attn_heatmap_layout(&L, 1, 1, 1, 1, 0, &o) != 0 || !read_png(p, &img)) return none;
    ink_stats s = ink_in(&img, 0, 0, L.plot_x, img.h);
    free(img.px);
    return s;
}

static void test_colormap(void) {
    unsigned char c[3];
    /* ends and middle anchors as documented */
    attn_colormap_rgb(ATTN_CMAP_VIRIDIS, 0.0f, c);
    CHECK(c[0] == 0x44 && c[1] == 0x01 && c[2] == 0x54, "viridis(0) = #440154");
    attn_colormap_rgb(ATTN_CMAP_VIRIDIS, 1.0f, c);
    CHECK(c[0] == 0xfd && c[1] == 0xe7 && c[2] == 0x25, "viridis(1) = #fde725");
    attn_colormap_rgb(ATTN_CMAP_VIRIDIS, 0.5f, c);
    CHECK(c[0] == 0x21 && c[1] == 0x91 && c[2] == 0x8c, "viridis(0.5) = #21918c");
    /* halfway between the first two anchors #440154 and #472d7b: (69.5, 23, 103.5) rounded
     * half away from zero */
    attn_colormap_rgb(ATTN_CMAP_VIRIDIS, 1.0f / 16, c);
    CHECK(c[0] == 70 && c[1] == 23 && c[2] == 104, "viridis(1/16) = (%d,%d,%d)", c[0], c[1], c[2]);
    attn_colormap_rgb(ATTN_CMAP_VIRIDIS, -3.0f, c);
    CHECK(c[0] == 0x44 && c[2] == 0x54, "clamped below");
    attn_colormap_rgb(ATTN_CMAP_VIRIDIS, NAN, c);
    CHECK(c[0] == 0x80 && c[1] == 0x80 && c[2] == 0x80, "NaN is grey");
    attn_colormap_rgb(ATTN_CMAP_DIVERGING, 0.5f, c);
    CHECK(c[0] == 0xf7 && c[1] == 0xf7 && c[2] == 0xf7, "diverging(0.5) is white-ish #f7f7f7");
    attn_colormap_rgb(ATTN_CMAP_DIVERGING, 0.0f, c);
    CHECK(c[0] == 0x21 && c[1] == 0x66 && c[2] == 0xac, "diverging(0) blue");
    attn_colormap_rgb(ATTN_CMAP_DIVERGING, 1.0f, c);
    CHECK(c[0] == 0xb2 && c[1] == 0x18 && c[2] == 0x2b, "diverging(1) red");
    attn_colormap_rgb(ATTN_CMAP_GRAY, 0.25f, c);
    CHECK(c[0] == 64 && c[1] == 64 && c[2] == 64, "gray(0.25) = 64 (63.75 rounded)");
    /* monotone luminance for viridis (perceptual ordering) */
    double prev = -1;
    int mono = 1;
    for (int i = 0; i <= 100; i++) {
        attn_colormap_rgb(ATTN_CMAP_VIRIDIS, i / 100.0f, c);
        double lum = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
        if (lum < prev - 0.5) mono = 0;
        prev = lum;
    }
    CHECK(mono, "viridis luminance increases");
}

static void test_png_single(void) {
    /* 3 x 4, min -2 at (0,0), max 6 at (2,3), 2 (= middle) at (1,1), NaN at (1,2) */
    float m[12] = {-2, 0, 1, 3, 4, 2, NAN, 5, 0.5f, 1.5f, 2.5f, 6};
    attn_tensor t = attn_tensor_f32_2d(m, 3, 4);
    const char *rows[3] = {"The", "cät", "<s>"};
    const char *cols[4] = {"a", "b", "c & d", "\"e\""};
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.title = "Weights";
    o.row_labels = rows;
    o.col_labels = cols;
    o.x_label = "keys";
    o.y_label = "queries";
    o.cell_w = o.cell_h = 20;
    o.has_range = 1, o.vmin = -2, o.vmax = 6; /* = the data range, so the layout is exact */
    const char *p = tmp_path("single.png");
    CHECK_OK(attn_heatmap_png(p, &t, &o));

    attn_viz_layout L;
    CHECK_OK(attn_heatmap_layout(&L, 3, 4, 1, 1, 0, &o));
    CHECK(L.plot_w == 80 && L.plot_h == 60, "plot is 4x3 cells of 20 px: %dx%d", L.plot_w, L.plot_h);
    CHECK(L.grid_rows == 1 && L.grid_cols == 1, "single panel");
    image img;
    CHECK(read_png(p, &img), "PNG reads back with libpng");
    if (!img.px) return;
    CHECK(img.w == L.width && img.h == L.height, "size %dx%d = layout %dx%d", img.w, img.h, L.width,
          L.height);
    CHECK(cell_px(&img, &L, 3, 4, 0, 0, 0, 0) == 0x440154, "min cell is #440154 (got %06x)",
          cell_px(&img, &L, 3, 4, 0, 0, 0, 0));
    CHECK(cell_px(&img, &L, 3, 4, 0, 0, 2, 3) == 0xfde725, "max cell is #fde725 (got %06x)",
          cell_px(&img, &L, 3, 4, 0, 0, 2, 3));
    CHECK(cell_px(&img, &L, 3, 4, 0, 0, 1, 1) == 0x21918c, "middle cell is #21918c (got %06x)",
          cell_px(&img, &L, 3, 4, 0, 0, 1, 1));
    CHECK(cell_px(&img, &L, 3, 4, 0, 0, 1, 2) == 0x808080, "NaN cell is grey");
    /* cell edges: every pixel of cell (0,0) has the min colour, (0,1) starts at x + 20 */
    int all = 1;
    for (int y = 0; y < 20; y++)
        for (int x = 0; x < 20; x++)
            if (px_at(&img, L.plot_x + x, L.plot_y + y) != 0x440154) all = 0;
    CHECK(all, "whole 20x20 cell (0,0) is the min colour");
    CHECK(px_at(&img, L.plot_x + 20, L.plot_y) != 0x440154, "cell (0,1) starts 20 px right");
    /* colour bar: top row is the max colour, bottom row the min colour */
    CHECK(L.bar_w > 0 && L.bar_h >= 48, "colour bar present");
    /* the gradient is sampled at pixel centres, half a pixel inside the ends: within 3 levels */
    CHECK(rgb_close(px_at(&img, L.bar_x + L.bar_w / 2, L.bar_y), 0xfde725, 3), "bar top = max colour (%06x)",
          px_at(&img, L.bar_x + L.bar_w / 2, L.bar_y));
    CHECK(rgb_close(px_at(&img, L.bar_x + L.bar_w / 2, L.bar_y + L.bar_h - 1), 0x440154, 3), "bar bottom = min colour");
    {
        CHECK(dark_pixels(&img, 0, 0, L.bar_x - 1, L.plot_y) > 20, "title text is drawn");
        CHECK(dark_pixels(&img, 0, L.plot_y, L.plot_x, L.plot_y + L.plot_h) > 20, "row labels drawn");
        CHECK(dark_pixels(&img, L.plot_x, L.plot_y + L.plot_h + 2, L.plot_x + L.plot_w, img.h) > 20,
              "column labels drawn");
        CHECK(dark_pixels(&img, L.bar_x + L.bar_w + 2, 0, img.w, img.h) > 10, "tick labels drawn");
    }
    free(img.px);
}

static void test_png_diverging_auto(void) {
    /* automatic symmetric range [-3, 3]: -3 blue end, 0 white, 1.5 = t 0.75, 3 red end */
    float m[4] = {-3, 0, 1.5f, 3};
    attn_tensor t = attn_tensor_f32_2d(m, 2, 2);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.cmap = ATTN_CMAP_DIVERGING;
    o.colorbar = 0;
    const char *p = tmp_path("div.png");
    CHECK_OK(attn_heatmap_png(p, &t, &o));
    attn_viz_layout L;
    CHECK_OK(attn_heatmap_layout(&L, 2, 2, 1, 1, 0, &o));
    CHECK(L.plot_w == 2 * 48 && L.plot_h == 2 * 48, "automatic cells are 48 px for 2x2 (got %d)", L.plot_w);
    CHECK(L.bar_w == 0, "no colour bar when disabled");
    image img;
    CHECK(read_png(p, &img), "diverging PNG reads back");
    if (!img.px) return;
    CHECK(img.w == L.width && img.h == L.height, "diverging size");
    CHECK(cell_px(&img, &L, 2, 2, 0, 0, 0, 0) == 0x2166ac, "-3 -> #2166ac");
    CHECK(cell_px(&img, &L, 2, 2, 0, 0, 0, 1) == 0xf7f7f7, "0 -> #f7f7f7");
    CHECK(cell_px(&img, &L, 2, 2, 0, 0, 1, 0) == 0xef8a62, "1.5 -> #ef8a62");
    CHECK(cell_px(&img, &L, 2, 2, 0, 0, 1, 1) == 0xb2182b, "3 -> #b2182b");
    free(img.px);

    /* constant matrix and all-NaN matrix draw without error */
    float c[3] = {7, 7, 7}, n[2] = {NAN, NAN};
    attn_tensor tc = attn_tensor_f32_2d(c, 1, 3), tn = attn_tensor_f32_2d(n, 2, 1);
    CHECK_OK(attn_heatmap_png(tmp_path("const.png"), &tc, NULL));
    CHECK_OK(attn_heatmap_png(tmp_path("nan.png"), &tn, NULL));
    CHECK(read_png(tmp_path("const.png"), &img), "constant PNG reads back");
    if (img.px) {
        CHECK_OK(attn_heatmap_layout(&L, 1, 3, 1, 1, 0, NULL));
        CHECK(cell_px(&img, &L, 1, 3, 0, 0, 0, 1) == 0x21918c, "constant -> middle colour");
        free(img.px);
    }
}

static void test_png_strided_and_big(void) {
    /* a transposed view draws the same as the transposed copy */
    float m[6] = {1, 2, 3, 4, 5, 6}, mt[6] = {1, 4, 2, 5, 3, 6};
    attn_tensor t = attn_tensor_f32_2d(m, 2, 3), tt, c = attn_tensor_f32_2d(mt, 3, 2);
    CHECK_OK(attn_tensor_transpose(&tt, &t, 0, 1));
    CHECK_OK(attn_heatmap_png(tmp_path("view.png"), &tt, NULL));
    CHECK_OK(attn_heatmap_png(tmp_path("copy.png"), &c, NULL));
    image a, b;
    CHECK(read_png(tmp_path("view.png"), &a) && read_png(tmp_path("copy.png"), &b), "read both");
    if (a.px && b.px)
        CHECK(a.w == b.w && a.h == b.h && memcmp(a.px, b.px, (size_t)a.w * a.h * 3) == 0,
              "strided view == contiguous copy");
    free(a.px);
    free(b.px);

    /* 2 x 5000: columns are sub-sampled into ATTN_VIZ_MAX_PLOT pixels */
    float *w = malloc(sizeof(float) * 10000);
    for (int i = 0; i < 10000; i++) w[i] = (float)(i % 5000);
    attn_tensor tw = attn_tensor_f32_2d(w, 2, 5000);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.colorbar = 0;
    CHECK_OK(attn_heatmap_png(tmp_path("wide.png"), &tw, &o));
    attn_viz_layout L;
    CHECK_OK(attn_heatmap_layout(&L, 2, 5000, 1, 1, 0, &o));
    CHECK(L.plot_w == ATTN_VIZ_MAX_PLOT && L.plot_h == 2, "wide plot %dx%d", L.plot_w, L.plot_h);
    CHECK(read_png(tmp_path("wide.png"), &a), "wide PNG reads back");
    if (a.px) {
        CHECK(px_at(&a, L.plot_x, L.plot_y) == 0x440154, "first column min colour");
        /* the last pixel column shows column floor(2047 * 5000 / 2048) = 4997 */
        unsigned char want[3];
        attn_colormap_rgb(ATTN_CMAP_VIRIDIS, 4997.0f / 4999.0f, want);
        unsigned wc = ((unsigned)want[0] << 16) | ((unsigned)want[1] << 8) | want[2];
        CHECK(px_at(&a, L.plot_x + L.plot_w - 1, L.plot_y) == wc, "last pixel column = column 4997");
        free(a.px);
    }
    free(w);
}

static void test_grid(void) {
    /* [2 layers, 3 heads, 4, 5]: panel (l, h) is constant 10*l + h except cell (0,0) = -1 */
    static float g[2 * 3 * 4 * 5];
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 3; h++)
            for (int i = 0; i < 20; i++) g[((l * 3 + h) * 20) + i] = (float)(10 * l + h);
    g[0] = -1;                  /* global min */
    g[(1 * 3 + 2) * 20 + 19] = 30; /* global max: layer 1, head 2, cell (3, 4) */
    attn_tensor t = attn_tensor_f32_4d(g, 2, 3, 4, 5);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.has_range = 1, o.vmin = -1, o.vmax = 30;
    o.title = "all layers x heads";
    const char *p = tmp_path("grid.png");
    CHECK_OK(attn_heatmap_grid_png(p, &t, 0, NULL, &o));
    attn_viz_layout L;
    CHECK_OK(attn_heatmap_layout(&L, 4, 5, 6, 3, 1, &o));
    CHECK(L.grid_rows == 2 && L.grid_cols == 3, "grid 2x3");
    image img;
    CHECK(read_png(p, &img), "grid PNG reads back");
    if (img.px) {
        CHECK(img.w == L.width && img.h == L.height, "grid size %dx%d vs %dx%d", img.w, img.h, L.width,
              L.height);
        CHECK(cell_px(&img, &L, 4, 5, 0, 0, 0, 0) == 0x440154, "grid min cell (L0 H0, 0,0)");
        CHECK(cell_px(&img, &L, 4, 5, 1, 2, 3, 4) == 0xfde725, "grid max cell (L1 H2, 3,4)");
        /* panel (0, 1) value 1 and (1, 0) value 10 have different colours */
        CHECK(cell_px(&img, &L, 4, 5, 0, 1, 1, 1) != cell_px(&img, &L, 4, 5, 1, 0, 1, 1),
              "panels differ");
        if (L.has_text)
            CHECK(dark_pixels(&img, L.plot_x + L.panel_dx, L.plot_y + L.panel_dy - 16,
                              L.plot_x + L.panel_dx + L.plot_w, L.plot_y + L.panel_dy) > 5,
                  "caption above panel (1, 1)");
        free(img.px);
    }

    /* [5, 2, 2] with automatic columns: 3 x 2 grid, the 6th slot stays white */
    static float q[5 * 4];
    for (int i = 0; i < 20; i++) q[i] = (float)i;
    attn_tensor t3 = attn_tensor_f32_3d(q, 5, 2, 2);
    const char *caps[5] = {"one", "two", "three", "four", "f\xc3\xbcnf"};
    attn_heatmap_opts o3 = attn_heatmap_opts_default();
    o3.has_range = 1, o3.vmin = 0, o3.vmax = 19;
    CHECK_OK(attn_heatmap_grid_png(tmp_path("grid3.png"), &t3, 0, caps, &o3));
    CHECK_OK(attn_heatmap_layout(&L, 2, 2, 5, 0, 1, &o3));
    CHECK(L.grid_rows == 2 && L.grid_cols == 3, "5 panels -> 2x3 (got %dx%d)", L.grid_rows, L.grid_cols);
    CHECK(read_png(tmp_path("grid3.png"), &img), "grid3 reads back");
    if (img.px) {
        CHECK(cell_px(&img, &L, 2, 2, 0, 0, 0, 0) == 0x440154, "panel 0 first cell min");
        CHECK(cell_px(&img, &L, 2, 2, 1, 1, 1, 1) == 0xfde725, "panel 4 last cell max");
        CHECK(cell_px(&img, &L, 2, 2, 1, 2, 0, 0) == 0xffffff, "empty slot is white");
        free(img.px);
    }
    /* the PDF grid carries the default captions as text */
    CHECK_OK(attn_heatmap_grid_pdf(tmp_path("grid.pdf"), &t, 0, NULL, &o));
    char *s = pdf_text(tmp_path("grid.pdf"));
    CHECK(s && strstr(s, "L1 H2") && strstr(s, "L0 H0"), "grid PDF has the default captions");
    free(s);
}

static void test_svg(void) {
    float m[6] = {-1, 0, 1, 2, 3, 4};
    attn_tensor t = attn_tensor_f32_2d(m, 2, 3);
    const char *rows[2] = {"<b>", "x\xffy"};      /* invalid UTF-8 byte */
    const char *cols[3] = {"Tom & Jerry", "\"q\"", "it's\x01"}; /* control char dropped */
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.title = "caf\xc3\xa9 <attention>";
    o.row_labels = rows;
    o.col_labels = cols;
    const char *p = tmp_path("h.svg");
    CHECK_OK(attn_heatmap_write(p, &t, &o));
    char *s = read_text(p);
    CHECK(s != NULL, "SVG written");
    if (!s) return;
    attn_viz_layout L;
    o.has_range = 1, o.vmin = -1, o.vmax = 4; /* the data range: exact layout */
    CHECK_OK(attn_heatmap_layout(&L, 2, 3, 1, 1, 0, &o));
    CHECK(strncmp(s, "<?xml", 5) == 0 && strstr(s, "<svg") && strstr(s, "</svg>"), "SVG envelope");
    char dims[64];
    snprintf(dims, sizeof dims, "viewBox=\"0 0 %d %d\"", L.width, L.height);
    CHECK(strstr(s, dims) != NULL, "SVG size matches the layout (%s)", dims);
    /* cairo writes colours as rgb percentages: the min and max cells' colours appear */
    CHECK(strstr(s, "rgb(26.666667%,0.392157%,32.941176%)") != NULL, "min cell colour #440154 in the SVG");
    CHECK(strstr(s, "rgb(99.215686%,90.588235%,14.509804%)") != NULL, "max cell colour #fde725 in the SVG");
    CHECK(strstr(s, "<b>") == NULL && strstr(s, "Tom & J") == NULL, "no raw markup leaks");
    free(s);
    /* the same picture as PDF: the sanitised labels are real text */
    p = tmp_path("h.pdf");
    o.has_range = 0;
    CHECK_OK(attn_heatmap_write(p, &t, &o));
    s = pdf_text(p);
    CHECK(s != NULL, "pdftotext reads the PDF");
    if (s) {
        CHECK(strstr(s, "<b>") != NULL, "row label '<b>' drawn as text");
        CHECK(strstr(s, "Tom & Jerry") != NULL, "'Tom & Jerry' drawn");
        CHECK(strstr(s, "x\xef\xbf\xbdy") != NULL, "invalid UTF-8 drawn as U+FFFD");
        CHECK(strstr(s, "it's") != NULL && strstr(s, "\x01") == NULL, "control character dropped");
        CHECK(strstr(s, "caf\xc3\xa9 <attention>") != NULL, "UTF-8 title");
        free(s);
    }
    char head[8] = {0};
    attn_test_read_file(p, head, sizeof head);
    CHECK(memcmp(head, "%PDF-", 5) == 0, "PDF signature");
}

static void test_errors(void) {
    float m[4] = {0, 1, 2, 3};
    attn_tensor t = attn_tensor_f32_2d(m, 2, 2);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    CHECK_ERR(attn_heatmap_png(NULL, &t, &o), ATTN_E_INVALID);
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), NULL, &o), ATTN_E_INVALID);
    CHECK_ERR(attn_heatmap_png(tmp_path("no/such/dir/e.png"), &t, &o), ATTN_E_IO);
    CHECK(strstr(attn_last_error(), "e.png") != NULL, "IO message names the file: %s", attn_last_error());
    CHECK_ERR(attn_heatmap_svg(tmp_path("no/such/dir/e.svg"), &t, &o), ATTN_E_IO);
    CHECK_ERR(attn_heatmap_write(tmp_path("no/such/dir/e.pdf"), &t, &o), ATTN_E_IO);
    CHECK_ERR(attn_heatmap_write(tmp_path("e.jpg"), &t, &o), ATTN_E_INVALID);
    CHECK(strstr(attn_last_error(), ".png, .svg or .pdf") != NULL, "unknown extension explained: %s", attn_last_error());
    CHECK(access(tmp_path("e.jpg"), F_OK) != 0, "nothing written for an unknown extension");
    o.alpha = 1.5f;
    CHECK_ERR(attn_heatmap_write(tmp_path("e.png"), &t, &o), ATTN_E_INVALID);
    o = attn_heatmap_opts_default();
    o.format = (attn_viz_format)9;
    CHECK_ERR(attn_heatmap_write(tmp_path("e.png"), &t, &o), ATTN_E_INVALID);
    o = attn_heatmap_opts_default();
    attn_tensor zero_d = {0}; /* float32, 0 dims */
    zero_d.data = m;
    CHECK_ERR(attn_heatmap_grid_png(tmp_path("g.png"), &zero_d, 0, NULL, &o), ATTN_E_SHAPE);
    attn_tensor e = attn_tensor_f32_2d(m, 0, 2);
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), &e, &o), ATTN_E_INVALID);
    e = attn_tensor_f32_2d(m, 2, 0);
    CHECK_ERR(attn_heatmap_svg(tmp_path("e.svg"), &e, &o), ATTN_E_INVALID);
    attn_tensor t3 = attn_tensor_f32_3d(m, 1, 2, 2);
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), &t3, &o), ATTN_E_SHAPE);
    CHECK_ERR(attn_heatmap_grid_png(tmp_path("e.png"), &t, 0, NULL, &o), ATTN_E_SHAPE);
    attn_tensor z3 = attn_tensor_f32_3d(m, 0, 2, 2);
    CHECK_ERR(attn_heatmap_grid_png(tmp_path("e.png"), &z3, 0, NULL, &o), ATTN_E_INVALID);
    attn_tensor d = t;
    d.dtype = ATTN_F64;
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), &d, &o), ATTN_E_DTYPE);
    o.has_range = 1, o.vmin = 1, o.vmax = 1;
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), &t, &o), ATTN_E_INVALID);
    o.vmax = NAN;
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), &t, &o), ATTN_E_INVALID);
    o = attn_heatmap_opts_default();
    o.cell_w = -1;
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), &t, &o), ATTN_E_INVALID);
    o.cell_w = 20000;
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), &t, &o), ATTN_E_INVALID);
    o = attn_heatmap_opts_default();
    o.cmap = (attn_colormap)42;
    CHECK_ERR(attn_heatmap_png(tmp_path("e.png"), &t, &o), ATTN_E_INVALID);
    CHECK_ERR(attn_heatmap_layout(NULL, 2, 2, 1, 1, 0, NULL), ATTN_E_INVALID);
    attn_viz_layout L;
    CHECK_ERR(attn_heatmap_layout(&L, 0, 2, 1, 1, 0, NULL), ATTN_E_INVALID);
    CHECK(access(tmp_path("e.png"), F_OK) != 0, "no file is written on argument errors");
}


/* attn_viz_ticks: nice steps, exact zero, signs that match the values */
static void test_ticks(void) {
    double tk[16];
    char lb[16][32];
    int n = attn_viz_ticks(tk, lb, 6, 4.93e-21, 0.507);
    CHECK(n == 6, "[4.93e-21, 0.507]: 6 ticks (got %d)", n);
    if (n == 6) {
        CHECK(strcmp(lb[0], "0.0") == 0 && tk[0] == 0 && !signbit(tk[0]), "first tick is +0 printed '0.0' (got '%s')", lb[0]);
        CHECK(strcmp(lb[5], "0.5") == 0, "last tick '0.5' (got '%s')", lb[5]);
    }
    n = attn_viz_ticks(tk, lb, 11, -0.507, 0.507);
    CHECK(n == 11 && strcmp(lb[0], "-0.5") == 0 && strcmp(lb[5], "0.0") == 0 && strcmp(lb[10], "0.5") == 0,
          "[-0.507, 0.507]: -0.5 .. 0.0 .. 0.5 (n %d, '%s' '%s')", n, lb[0], n > 5 ? lb[5] : "");
    n = attn_viz_ticks(tk, lb, 6, 0, 1);
    CHECK(n == 6 && strcmp(lb[1], "0.2") == 0 && strcmp(lb[5], "1.0") == 0, "[0, 1]: step 0.2 (n %d)", n);
    n = attn_viz_ticks(tk, lb, 5, 0, 37);
    CHECK(n == 4 && strcmp(lb[3], "30") == 0, "[0, 37]: 0 10 20 30 (n %d, last '%s')", n, n > 0 ? lb[n - 1] : "");
    n = attn_viz_ticks(tk, lb, 5, 1e-7, 3e-7);
    CHECK(n == 5 && strcmp(lb[0], "1.0e-07") == 0 && strcmp(lb[1], "1.5e-07") == 0,
          "[1e-7, 3e-7]: scientific with the step's digits (n %d, '%s' '%s')", n, lb[0], lb[1]);
    n = attn_viz_ticks(tk, lb, 4, -3e6, 5e6);
    CHECK(n >= 2 && lb[0][0] == '-' && strchr(lb[0], 'e'), "[-3e6, 5e6]: negative scientific first label '%s'", lb[0]);
    CHECK_ERR(attn_viz_ticks(tk, lb, 5, 1, 1), ATTN_E_INVALID);
    CHECK_ERR(attn_viz_ticks(tk, lb, 5, 0, INFINITY), ATTN_E_INVALID);
    CHECK_ERR(attn_viz_ticks(tk, lb, 1, 0, 1), ATTN_E_INVALID);
    /* property: over many ranges, every label parses back to its tick within a thousandth of
     * a step, carries a minus sign exactly when the tick is negative, and ticks lie in range */
    uint64_t seed = 12345;
    int bad = 0, runs = 0;
    for (int it = 0; it < 3000; it++) {
        float r[3];
        attn_test_fill_uniform(r, 3, 0, 1, &seed);
        double scale = pow(10.0, (int)(r[0] * 24) - 12);
        double lo = (r[1] - 0.5) * 4 * scale, hi = lo + (0.001 + r[2]) * scale;
        if (it % 3 == 0) lo = scale * 1e-15 * r[1]; /* tiny positive minimum, as in softmax weights */
        if (!(lo < hi)) continue;
        int mt = 2 + it % 10;
        n = attn_viz_ticks(tk, lb, mt, lo, hi);
        runs++;
        if (n < 2 || n > mt + 3) {
            bad++;
            continue;
        }
        double step = tk[1] - tk[0];
        for (int i = 0; i < n; i++) {
            double back = strtod(lb[i], NULL);
            if ((lb[i][0] == '-') != (tk[i] < 0) || fabs(back - tk[i]) > 1e-3 * step ||
                tk[i] < lo - 1e-6 * step || tk[i] > hi + 1e-6 * step)
                bad++;
            if (i && strcmp(lb[i], lb[i - 1]) == 0) bad++;
        }
    }
    CHECK(bad == 0 && runs > 2500, "tick labels parse back, signs right, in range, distinct (%d bad of %d)", bad, runs);
}

/* Tick labels in real output: right signs (pdftotext) and a gap between tick and label (PNG). */
static void test_tick_output(void) {
    float m[4] = {4.93e-21f, 0.507f, 0.25f, 0.1f};
    attn_tensor t = attn_tensor_f32_2d(m, 2, 2);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    attn_viz_layout L;
    o.layout_out = &L;
    o.cell_w = o.cell_h = 60;
    CHECK_OK(attn_heatmap_write(tmp_path("ticks.pdf"), &t, &o));
    char *s = pdf_text(tmp_path("ticks.pdf"));
    CHECK(s != NULL, "ticks PDF text");
    if (s) {
        int minus = 0, nums = 0;
        for (char *q = strtok(s, " \n\f"); q; q = strtok(NULL, " \n\f")) {
            char *end;
            strtod(q, &end);
            if (*end == '\0' && end != q) nums++, minus += q[0] == '-';
        }
        CHECK(nums >= 3 && minus == 0, "positive data: %d tick labels, %d with a minus sign", nums, minus);
        free(s);
    }
    float d[4] = {-0.507f, 0.507f, 0.0f, 0.2f};
    attn_tensor td = attn_tensor_f32_2d(d, 2, 2);
    o.cmap = ATTN_CMAP_DIVERGING;
    CHECK_OK(attn_heatmap_write(tmp_path("ticks2.pdf"), &td, &o));
    s = pdf_text(tmp_path("ticks2.pdf"));
    if (s) {
        /* symmetric range: every negative label has its positive twin, zero is unsigned */
        char toks[32][32];
        int nt = 0, neg = 0, twins = 0, negzero = 0;
        for (char *q = strtok(s, " \n\f"); q && nt < 32; q = strtok(NULL, " \n\f")) {
            char *end;
            double v = strtod(q, &end);
            if (*end || end == q || strlen(q) >= 32) continue;
            strcpy(toks[nt++], q);
            if (q[0] == '-' && v == 0) negzero++;
        }
        for (int i = 0; i < nt; i++)
            if (toks[i][0] == '-') {
                neg++;
                for (int j = 0; j < nt; j++)
                    if (strcmp(toks[j], toks[i] + 1) == 0) twins++;
            }
        CHECK(neg >= 1 && twins == neg && negzero == 0, "diverging ticks: %d negative, %d with a positive twin, %d '-0'",
              neg, twins, negzero);
        free(s);
    }
    /* PNG: the columns between the tick marks' end and the labels are blank; tick marks exist */
    CHECK_OK(attn_heatmap_write(tmp_path("ticks.png"), &td, &o));
    image img;
    CHECK(read_png(tmp_path("ticks.png"), &img), "ticks PNG");
    if (img.px) {
        int x_end = L.bar_x + L.bar_w + L.tick_len;
        CHECK(L.tick_label_x - x_end >= 3, "label starts %d px after the tick", L.tick_label_x - x_end);
        ink_stats gap = ink_in(&img, x_end, L.bar_y - 10, L.tick_label_x - 1, L.bar_y + L.bar_h + 10);
        CHECK(gap.n == 0, "no ink between ticks and labels (%d pixels)", gap.n);
        ink_stats marks = ink_in(&img, L.bar_x + L.bar_w + 1, L.bar_y, x_end, L.bar_y + L.bar_h);
        CHECK(marks.n >= 3 * (L.tick_len - 1), "tick marks drawn (%d pixels)", marks.n);
        ink_stats labels = ink_in(&img, L.tick_label_x - 1, 0, img.w, img.h);
        CHECK(labels.n > 50, "tick labels drawn (%d pixels)", labels.n);
        free(img.px);
    }
}

/* Chinese, Japanese and Arabic labels: real glyphs (text in the PDF; in the PNG not tofu
 * boxes), Arabic shaped (joined letters). */
static void test_scripts(void) {
    const char *zh = "\xe6\xb3\xa8\xe6\x84\x8f\xe5\x8a\x9b\xe6\x9c\xba\xe5\x88\xb6";       /* 注意力机制 */
    const char *ja = "\xe3\x81\x93\xe3\x82\x93\xe3\x81\xab\xe3\x81\xa1\xe3\x81\xaf\xe4\xb8\x96\xe7\x95\x8c"; /* こんにちは世界 */
    const char *ar = "\xd8\xa8\xd9\x8a\xd8\xaa";                                          /* بيت */
    const char *ar_zwnj = "\xd8\xa8\xe2\x80\x8c\xd9\x8a\xe2\x80\x8c\xd8\xaa";             /* ب‌ي‌ت (not joined) */
    const char *tofu = "\xf3\xbf\xbf\xbd";                                                  /* U+FFFFD: no font */
    float m[3] = {0.1f, 0.5f, 0.9f};
    attn_tensor t = attn_tensor_f32_2d(m, 3, 1);
    const char *rl[3] = {zh, ja, ar};
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.row_labels = rl;
    o.title = "\xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 attention \xe6\xb3\xa8\xe6\x84\x8f"; /* مرحبا attention 注意 */
    o.font_px = 20;
    CHECK_OK(attn_heatmap_write(tmp_path("scripts.pdf"), &t, &o));
    char *s = pdf_text(tmp_path("scripts.pdf"));
    CHECK(s != NULL, "scripts PDF text");
    if (s) {
        CHECK(strstr(s, zh) != NULL, "pdftotext finds the Chinese label 注意力机制");
        CHECK(strstr(s, ja) != NULL, "pdftotext finds the Japanese label こんにちは世界");
        CHECK(strstr(s, ar) != NULL, "pdftotext finds the Arabic label بيت");
        free(s);
    }
    /* PNG: a tofu box is a hollow rectangle, ink all round its outline (the control) */
    ink_stats k = label_ink("tofu.png", tofu);
    CHECK(k.n > 0 && k.frame > 0.8, "control: a character no font has is a box (outline %.2f inked)", k.frame);
    ink_stats a = label_ink("zh.png", zh), b = label_ink("ja.png", ja);
    CHECK(a.n > 100 && a.frame < 0.6, "Chinese label has glyphs, not boxes (outline %.2f inked, %d px)", a.frame, a.n);
    CHECK(b.n > 100 && b.frame < 0.6, "Japanese label has glyphs, not boxes (outline %.2f inked, %d px)", b.frame, b.n);
    /* 一 (U+4E00) and ー (U+30FC) are single horizontal strokes: wide, flat ink; a box is tall */
    ink_stats one = label_ink("one.png", "\xe4\xb8\x80"), bar = label_ink("bar.png", "\xe3\x83\xbc");
    CHECK(one.n > 0 && (one.y1 - one.y0) * 3 < (one.x1 - one.x0), "一 is a flat stroke (%dx%d ink)", one.x1 - one.x0,
          one.y1 - one.y0);
    CHECK(bar.n > 0 && (bar.y1 - bar.y0) * 3 < (bar.x1 - bar.x0), "ー is a flat stroke (%dx%d ink)", bar.x1 - bar.x0,
          bar.y1 - bar.y0);
    /* Arabic: shaped بيت is one joined stroke (no blank column inside); with zero-width
     * non-joiners the same letters stand apart */
    ink_stats j = label_ink("ar.png", ar), sep = label_ink("ar_zwnj.png", ar_zwnj);
    CHECK(j.n > 50 && j.frame < 0.6, "Arabic label has glyphs (outline %.2f)", j.frame);
    CHECK(j.gaps == 0, "shaped Arabic letters join (%d gaps)", j.gaps);
    CHECK(sep.gaps >= 2, "control: unjoined letters leave gaps (%d)", sep.gaps);
}

/* Every cell centre has exactly the colour map's colour of its value: rectangles (small
 * matrices) and bitmaps (large grids). */
static void test_cell_colours(void) {
    enum { R = 7, C = 9 };
    float m[R * C];
    uint64_t seed = 99;
    attn_test_fill_uniform(m, R * C, -2, 3, &seed);
    attn_tensor t = attn_tensor_f32_2d(m, R, C);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    attn_viz_layout L;
    o.layout_out = &L;
    o.has_range = 1, o.vmin = -1.5f, o.vmax = 2.5f; /* values outside clamp to the ends */
    o.cell_w = 13, o.cell_h = 11;
    for (int cm = 0; cm < 3; cm++) {
        o.cmap = (attn_colormap)cm;
        CHECK_OK(attn_heatmap_png(tmp_path("cells.png"), &t, &o));
        image img;
        if (!read_png(tmp_path("cells.png"), &img)) {
            CHECK(0, "cells PNG reads back");
            continue;
        }
        int bad = 0;
        for (int r = 0; r < R; r++)
            for (int c = 0; c < C; c++) {
                double tt = ((double)m[r * C + c] - o.vmin) / ((double)o.vmax - o.vmin);
                if (cell_px(&img, &L, R, C, 0, 0, r, c) != cmap_hex(o.cmap, tt)) bad++;
            }
        CHECK(bad == 0, "colour map %d: %d of %d cell centres differ from the map", cm, bad, R * C);
        free(img.px);
    }
    /* a grid with more than 65536 cells is drawn as bitmaps: same rule */
    enum { P = 3, GR = 200, GC = 120 };
    float *g = malloc(sizeof(float) * P * GR * GC);
    attn_test_fill_uniform(g, P * GR * GC, 0, 1, &seed);
    attn_tensor tg = attn_tensor_f32_3d(g, P, GR, GC);
    attn_heatmap_opts og = attn_heatmap_opts_default();
    og.layout_out = &L;
    og.has_range = 1, og.vmin = 0, og.vmax = 1;
    CHECK_OK(attn_heatmap_grid_write(tmp_path("big.png"), &tg, 3, NULL, &og));
    image img;
    if (read_png(tmp_path("big.png"), &img)) {
        int bad = 0;
        for (int p = 0; p < P; p++)
            for (int r = 0; r < GR; r++)
                for (int c = 0; c < GC; c++)
                    if (cell_px(&img, &L, GR, GC, 0, p, r, c) != cmap_hex(ATTN_CMAP_VIRIDIS, g[(p * GR + r) * GC + c])) bad++;
        CHECK(bad == 0 && L.plot_w >= GC, "bitmap grid: %d of %d cell centres differ", bad, P * GR * GC);
        free(img.px);
    } else {
        CHECK(0, "big grid PNG reads back");
    }
    free(g);
}

static void test_formats(void) {
    attn_viz_format f;
    CHECK(attn_viz_format_from_path(&f, "a/b.PNG") == 0 && f == ATTN_VIZ_PNG, ".PNG");
    CHECK(attn_viz_format_from_path(&f, "x.svg") == 0 && f == ATTN_VIZ_SVG, ".svg");
    CHECK(attn_viz_format_from_path(&f, "x.Pdf") == 0 && f == ATTN_VIZ_PDF, ".Pdf");
    CHECK_ERR(attn_viz_format_from_path(&f, "x.pdf/png"), ATTN_E_INVALID);
    CHECK_ERR(attn_viz_format_from_path(&f, "noext"), ATTN_E_INVALID);
    /* o->format overrides the extension */
    float m[4] = {0, 1, 2, 3};
    attn_tensor t = attn_tensor_f32_2d(m, 2, 2);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    o.format = ATTN_VIZ_PDF;
    CHECK_OK(attn_heatmap_write(tmp_path("forced.png"), &t, &o));
    char head[8] = {0};
    attn_test_read_file(tmp_path("forced.png"), head, sizeof head);
    CHECK(memcmp(head, "%PDF-", 5) == 0, "format option wins over the extension");
}

/* one token across layers: row l = weights[l, :, token, :] averaged over heads */
static void test_token_view(void) {
    enum { NL = 3, H = 2, T = 4 };
    float w[NL * H * T * T];
    uint64_t seed = 7;
    attn_test_fill_uniform(w, NL * H * T * T, 0, 1, &seed);
    attn_tensor t = attn_tensor_f32_4d(w, NL, H, T, T);
    const char *tok[T] = {"[CLS]", "gato", "\xe7\x8c\xab", "[SEP]"}; /* 猫 */
    attn_heatmap_opts o = attn_heatmap_opts_default();
    attn_viz_layout L;
    o.layout_out = &L;
    o.has_range = 1, o.vmin = 0, o.vmax = 1;
    for (int head = -1; head < H; head++) {
        CHECK_OK(attn_token_attention_write(tmp_path("tok.png"), &t, tok, 2, head, &o));
        CHECK(L.plot_h > 0 && L.plot_w * NL == L.plot_h * T, "token view: %d layers x %d keys of square cells", NL, T);
        image img;
        if (!read_png(tmp_path("tok.png"), &img)) {
            CHECK(0, "token view PNG");
            continue;
        }
        int bad = 0;
        for (int l = 0; l < NL; l++)
            for (int j = 0; j < T; j++) {
                double v = 0;
                if (head >= 0) v = w[((l * H + head) * T + 2) * T + j];
                else {
                    for (int h = 0; h < H; h++) v += w[((l * H + h) * T + 2) * T + j];
                    v /= H;
                }
                if (cell_px(&img, &L, NL, T, 0, 0, l, j) != cmap_hex(ATTN_CMAP_VIRIDIS, (float)v)) bad++;
            }
        CHECK(bad == 0, "token view head %d: %d of %d cells differ", head, bad, NL * T);
        free(img.px);
    }
    CHECK_OK(attn_token_attention_write(tmp_path("tok.pdf"), &t, tok, 2, -1, NULL));
    char *s = pdf_text(tmp_path("tok.pdf"));
    if (s) {
        CHECK(strstr(s, "layer 2") && strstr(s, "gato") && strstr(s, "\xe2\x96\xb8") && strstr(s, "\xe7\x8c\xab") &&
                  strstr(s, "mean of 2 heads"),
              "token view labels: layers, tokens, the marked query and the title");
        free(s);
    }
    CHECK_ERR(attn_token_attention_write(tmp_path("e.png"), &t, tok, 4, -1, NULL), ATTN_E_RANGE);
    CHECK_ERR(attn_token_attention_write(tmp_path("e.png"), &t, tok, 0, 2, NULL), ATTN_E_RANGE);
    CHECK_ERR(attn_token_attention_write(tmp_path("e.png"), &t, NULL, 0, 0, NULL), ATTN_E_INVALID);
    attn_tensor t3 = attn_tensor_f32_3d(w, NL * H, T, T);
    CHECK_ERR(attn_token_attention_write(tmp_path("e.png"), &t3, tok, 0, 0, NULL), ATTN_E_SHAPE);
}

/* cross-attention: [T, S], [H, T, S] (mean) and [NL, H, T, S] (grid) */
static void test_cross_view(void) {
    enum { NL = 2, H = 3, T = 3, S = 5 };
    float w[NL * H * T * S];
    uint64_t seed = 11;
    attn_test_fill_uniform(w, NL * H * T * S, 0, 1, &seed);
    const char *src[S] = {"Der", "Hund", "bellt", ".", "</s>"};
    const char *tgt[T] = {"The", "dog", "barks"};
    attn_heatmap_opts o = attn_heatmap_opts_default();
    attn_viz_layout L;
    o.layout_out = &L;
    o.has_range = 1, o.vmin = 0, o.vmax = 1;
    attn_tensor t2 = attn_tensor_f32_2d(w, T, S), t3 = attn_tensor_f32_3d(w, H, T, S),
                t4 = attn_tensor_f32_4d(w, NL, H, T, S);
    image img;
    CHECK_OK(attn_cross_attention_write(tmp_path("x2.png"), &t2, src, tgt, &o));
    if (read_png(tmp_path("x2.png"), &img)) {
        int bad = 0;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < S; j++)
                if (cell_px(&img, &L, T, S, 0, 0, i, j) != cmap_hex(ATTN_CMAP_VIRIDIS, w[i * S + j])) bad++;
        CHECK(bad == 0 && L.grid_rows == 1, "cross [T, S]: %d cells differ", bad);
        free(img.px);
    }
    CHECK_OK(attn_cross_attention_write(tmp_path("x3.png"), &t3, src, tgt, &o));
    if (read_png(tmp_path("x3.png"), &img)) {
        int bad = 0;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < S; j++) {
                double v = 0;
                for (int h = 0; h < H; h++) v += w[(h * T + i) * S + j];
                if (cell_px(&img, &L, T, S, 0, 0, i, j) != cmap_hex(ATTN_CMAP_VIRIDIS, (float)(v / H))) bad++;
            }
        CHECK(bad == 0, "cross [H, T, S] is the mean over heads: %d cells differ", bad);
        free(img.px);
    }
    CHECK_OK(attn_cross_attention_write(tmp_path("x4.png"), &t4, src, tgt, &o));
    CHECK(L.grid_rows == NL && L.grid_cols == H, "cross [NL, H, T, S]: %dx%d grid", L.grid_rows, L.grid_cols);
    if (read_png(tmp_path("x4.png"), &img)) {
        int bad = 0;
        for (int l = 0; l < NL; l++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < T; i++)
                    for (int j = 0; j < S; j++)
                        if (cell_px(&img, &L, T, S, l, h, i, j) != cmap_hex(ATTN_CMAP_VIRIDIS, w[((l * H + h) * T + i) * S + j]))
                            bad++;
        CHECK(bad == 0, "cross grid: %d cells differ", bad);
        free(img.px);
    }
    CHECK_OK(attn_cross_attention_write(tmp_path("x.pdf"), &t2, src, tgt, NULL));
    char *s = pdf_text(tmp_path("x.pdf"));
    if (s) {
        CHECK(strstr(s, "Hund") && strstr(s, "barks") && strstr(s, "source") && strstr(s, "target") &&
                  strstr(s, "Cross-attention"),
              "cross view: tokens, axis captions and title in the PDF");
        free(s);
    }
    attn_tensor t1 = attn_tensor_f32_1d(w, 4);
    CHECK_ERR(attn_cross_attention_write(tmp_path("e.png"), &t1, src, tgt, NULL), ATTN_E_SHAPE);
    CHECK_ERR(attn_cross_attention_write(NULL, &t2, src, tgt, NULL), ATTN_E_INVALID);
}

/* image overlay: panel 0 is the image, panel 1 the blend with the patch colours */
static void test_overlay(void) {
    enum { W = 12, Hh = 8, STRIDE = W * 3 + 5, GH = 2, GW = 3 };
    unsigned char px[Hh * STRIDE];
    for (int y = 0; y < Hh; y++)
        for (int x = 0; x < W; x++) {
            unsigned char *p = px + y * STRIDE + x * 3;
            p[0] = (unsigned char)(20 * x), p[1] = (unsigned char)(30 * y), p[2] = (unsigned char)(255 - 10 * (x + y));
        }
    float a[GH * GW] = {0.0f, 0.2f, 0.4f, 0.6f, 0.8f, 1.0f};
    attn_tensor at = attn_tensor_f32_2d(a, GH, GW);
    attn_heatmap_opts o = attn_heatmap_opts_default();
    attn_viz_layout L;
    o.layout_out = &L;
    o.title = "patch attention";
    CHECK_OK(attn_image_overlay_write(tmp_path("ov.png"), px, &at, &o, W, Hh, 3, STRIDE));
    /* 12 px wide: enlarged by 384 / 12 = 32 */
    CHECK(L.plot_w == W * 32 && L.plot_h == Hh * 32 && L.grid_cols == 2, "shown at 32x: %dx%d", L.plot_w, L.plot_h);
    image img;
    if (read_png(tmp_path("ov.png"), &img)) {
        int bad_img = 0, bad_ovl = 0;
        for (int y = 0; y < L.plot_h; y += 3)
            for (int x = 0; x < L.plot_w; x += 3) {
                const unsigned char *p = px + (y / 32) * STRIDE + (x / 32) * 3;
                unsigned want = ((unsigned)p[0] << 16) | ((unsigned)p[1] << 8) | p[2];
                if (px_at(&img, L.plot_x + x, L.plot_y + y) != want) bad_img++;
                unsigned char cm[3];
                attn_colormap_rgb(ATTN_CMAP_VIRIDIS, a[(y * GH / L.plot_h) * GW + x * GW / L.plot_w], cm);
                unsigned bl = 0;
                for (int c = 0; c < 3; c++) bl = (bl << 8) | (unsigned)lround(0.4 * p[c] + 0.6 * cm[c]);
                if (px_at(&img, L.plot_x + L.panel_dx + x, L.plot_y + y) != bl) bad_ovl++;
            }
        CHECK(bad_img == 0, "image panel = the image, nearest pixel (%d differ)", bad_img);
        CHECK(bad_ovl == 0, "overlay = 0.4 image + 0.6 colour of the patch (%d differ)", bad_ovl);
        free(img.px);
    }
    /* smooth: at patch centres the value is the patch's own (within the half-pixel offset) */
    o.smooth = 1;
    o.alpha = 1;
    CHECK_OK(attn_image_overlay_write(tmp_path("ovs.png"), px, &at, &o, W, Hh, 3, STRIDE));
    if (read_png(tmp_path("ovs.png"), &img)) {
        int bad = 0;
        for (int r = 0; r < GH; r++)
            for (int c = 0; c < GW; c++) {
                int x = (2 * c + 1) * L.plot_w / (2 * GW), y = (2 * r + 1) * L.plot_h / (2 * GH);
                if (!rgb_close(px_at(&img, L.plot_x + L.panel_dx + x, L.plot_y + y), cmap_hex(ATTN_CMAP_VIRIDIS, a[r * GW + c]), 3))
                    bad++;
            }
        CHECK(bad == 0, "smooth overlay: patch centres carry the patch colour within 3 levels (%d differ)", bad);
        free(img.px);
    }
    /* gray input, shrunk: a 1000 x 500 gray image is shown 640 x 320 */
    unsigned char *gray = malloc(1000 * 500);
    memset(gray, 77, 1000 * 500);
    o = attn_heatmap_opts_default();
    o.layout_out = &L;
    o.alpha = 0;
    CHECK_OK(attn_image_overlay_write(tmp_path("ovg.pdf"), gray, &at, &o, 1000, 500, 1, 1000));
    CHECK(L.plot_w == 640 && L.plot_h == 320, "large image shrunk to 640 (got %dx%d)", L.plot_w, L.plot_h);
    CHECK_OK(attn_image_overlay_write(tmp_path("ovg.png"), gray, &at, &o, 1000, 500, 1, 1000));
    if (read_png(tmp_path("ovg.png"), &img)) {
        CHECK(px_at(&img, L.plot_x + L.panel_dx + 100, L.plot_y + 100) == 0x4d4d4d, "alpha 0 shows the gray image");
        free(img.px);
    }
    char *s = pdf_text(tmp_path("ovg.pdf"));
    if (s) {
        CHECK(strstr(s, "image") && strstr(s, "attention"), "overlay captions in the PDF");
        free(s);
    }
    free(gray);
    CHECK_ERR(attn_image_overlay_write(tmp_path("e.png"), px, &at, NULL, W, Hh, 2, STRIDE), ATTN_E_INVALID);
    CHECK_ERR(attn_image_overlay_write(tmp_path("e.png"), px, &at, NULL, W, Hh, 3, W * 3 - 1), ATTN_E_INVALID);
    CHECK_ERR(attn_image_overlay_write(tmp_path("e.png"), NULL, &at, NULL, W, Hh, 3, STRIDE), ATTN_E_INVALID);
    CHECK_ERR(attn_image_overlay_write(tmp_path("e.png"), px, &at, NULL, 0, Hh, 3, STRIDE), ATTN_E_INVALID);
    attn_tensor a3 = attn_tensor_f32_3d(a, 1, GH, GW);
    CHECK_ERR(attn_image_overlay_write(tmp_path("e.png"), px, &a3, NULL, W, Hh, 3, STRIDE), ATTN_E_SHAPE);
    CHECK(access(tmp_path("e.png"), F_OK) != 0, "no file written on overlay argument errors");
}

/* interactive attention page: data, escaping, initial selection, errors */
static void test_html(void) {
    float w[2 * 3 * 2 * 2];
    for (int i = 0; i < 24; i++) w[i] = (float)(i % 4) / 4.0f;
    attn_tensor t = attn_tensor_f32_4d(w, 2, 3, 2, 2);
    const char *tok[2] = {"a</script>", "\"b\" & c"};
    const char *p = tmp_path("a.html");
    CHECK_OK(attn_attention_html(p, &t, tok, "t<1>", 1, 2));
    static char buf[65536];
    attn_test_read_file(p, buf, sizeof buf);
    CHECK(strstr(buf, "const IL=1,IH=2;") != NULL, "html: initial layer 1, head 2");
    CHECK(strstr(buf, "a\\u003c/script\\u003e") != NULL, "html: '</script>' in a token is escaped");
    CHECK(strstr(buf, "</script>\n</body>") != NULL && strstr(buf, "t&lt;1&gt;") != NULL, "html: title escaped");
    CHECK(strstr(buf, "[[[[0,0.25],[0.5,0.75]]") != NULL, "html: weights [layer][head][query][key]");
    CHECK_OK(attn_attention_html(p, &t, tok, NULL, -1, -1));
    attn_test_read_file(p, buf, sizeof buf);
    CHECK(strstr(buf, "const IL=-1,IH=-1;") != NULL, "html: defaults (last layer, mean of heads)");
    CHECK_ERR(attn_attention_html(tmp_path("no/such/dir/a.html"), &t, tok, NULL, 0, 0), ATTN_E_IO);
    w[5] = NAN;
    CHECK_ERR(attn_attention_html(p, &t, tok, NULL, 0, 0), ATTN_E_RANGE);
    attn_tensor t3 = attn_tensor_f32_3d(w, 2, 3, 4);
    CHECK_ERR(attn_attention_html(p, &t3, tok, NULL, 0, 0), ATTN_E_SHAPE);
}

int main(void) {
    attn_test_name = "viz";
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_viz_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return attn_test_finish();
    }
    test_colormap();
    test_png_single();
    test_png_diverging_auto();
    test_png_strided_and_big();
    test_grid();
    test_svg();
    test_errors();
    test_ticks();
    test_tick_output();
    test_scripts();
    test_cell_colours();
    test_formats();
    test_token_view();
    test_cross_view();
    test_overlay();
    test_html();
    char cmd[600];
    if (getenv("ATTN_TEST_KEEP")) return attn_test_finish();
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return attn_test_finish();
}
