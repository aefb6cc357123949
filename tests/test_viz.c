/* Heatmap writers: PNGs are read back with libpng and checked for size (against
 * attn_heatmap_layout) and for the exact colours of known cells (the anchor colours
 * documented in attn_viz.h); SVGs are checked for escaped labels and cell colours. */
#include "attn_viz.h"
#include "attn_viz_html.h"
#include "testutil.h"

#include <math.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static int count_str(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
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
    CHECK(px_at(&img, L.bar_x + L.bar_w / 2, L.bar_y) == 0xfde725, "bar top = max colour (%06x)",
          px_at(&img, L.bar_x + L.bar_w / 2, L.bar_y));
    CHECK(px_at(&img, L.bar_x + L.bar_w / 2, L.bar_y + L.bar_h - 1) == 0x440154, "bar bottom = min colour");
    if (L.has_text) {
        CHECK(dark_pixels(&img, 0, 0, L.bar_x - 1, L.plot_y) > 20, "title text is drawn");
        CHECK(dark_pixels(&img, 0, L.plot_y, L.plot_x, L.plot_y + L.plot_h) > 20, "row labels drawn");
        CHECK(dark_pixels(&img, L.plot_x, L.plot_y + L.plot_h + 2, L.plot_x + L.plot_w, img.h) > 20,
              "column labels drawn");
        CHECK(dark_pixels(&img, L.bar_x + L.bar_w + 2, 0, img.w, img.h) > 10, "tick labels drawn");
    } else {
        fprintf(stderr, "note: font not found, text checks skipped\n");
    }
    free(img.px);

    /* the same picture without a font: no text, no error, plot at the top-left margin */
    o.font_path = "/nonexistent/font.ttf";
    p = tmp_path("nofont.png");
    CHECK_OK(attn_heatmap_png(p, &t, &o));
    CHECK_OK(attn_heatmap_layout(&L, 3, 4, 1, 1, 0, &o));
    CHECK(L.has_text == 0, "layout reports no text");
    CHECK(read_png(p, &img), "no-font PNG reads back");
    if (img.px) {
        CHECK(img.w == L.width && img.h == L.height, "no-font size matches layout");
        CHECK(dark_pixels(&img, 0, 0, L.bar_x - 1, L.plot_y) == 0, "no text above the plot");
        CHECK(dark_pixels(&img, 0, 0, L.plot_x, img.h) == 0, "no text left of the plot");
        CHECK(cell_px(&img, &L, 3, 4, 0, 0, 2, 3) == 0xfde725, "no-font max cell colour");
        free(img.px);
    }
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
    /* the SVG grid has 6*20 cells and the default captions */
    CHECK_OK(attn_heatmap_grid_svg(tmp_path("grid.svg"), &t, 0, NULL, &o));
    char *s = read_text(tmp_path("grid.svg"));
    CHECK(s != NULL, "grid SVG written");
    if (s) {
        CHECK(count_str(s, "<rect x=") == 120 + 1, "120 cell rects + colour bar (got %d)",
              count_str(s, "<rect x="));
        if (L.has_text) CHECK(strstr(s, ">L1 H2</text>") != NULL, "default caption L1 H2");
        free(s);
    }
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
    CHECK_OK(attn_heatmap_svg(p, &t, &o));
    char *s = read_text(p);
    CHECK(s != NULL, "SVG written");
    if (!s) return;
    attn_viz_layout L;
    CHECK_OK(attn_heatmap_layout(&L, 2, 3, 1, 1, 0, &o));
    CHECK(strncmp(s, "<?xml", 5) == 0 && strstr(s, "<svg") && strstr(s, "</svg>"), "SVG envelope");
    char dims[64];
    snprintf(dims, sizeof dims, "width=\"%d\" height=\"%d\"", L.width, L.height);
    CHECK(strstr(s, dims) != NULL, "SVG size matches the layout (%s)", dims);
    CHECK(count_str(s, "<rect x=") == 6 + 1, "6 cells + colour bar");
    CHECK(strstr(s, "fill=\"#440154\"") && strstr(s, "fill=\"#fde725\""), "min and max cell colours");
    if (L.has_text) {
        CHECK(strstr(s, ">&lt;b&gt;</text>") != NULL, "row label escaped");
        CHECK(strstr(s, ">Tom &amp; Jerry</text>") != NULL, "ampersand escaped");
        CHECK(strstr(s, ">&quot;q&quot;</text>") != NULL, "quotes escaped");
        CHECK(strstr(s, ">it&apos;s</text>") != NULL, "apostrophe escaped, control char dropped");
        CHECK(strstr(s, ">x\xef\xbf\xbdy</text>") != NULL, "invalid UTF-8 -> U+FFFD");
        CHECK(strstr(s, ">caf\xc3\xa9 &lt;attention&gt;</text>") != NULL, "UTF-8 title kept, escaped");
        CHECK(strstr(s, "rotate(-90)") != NULL, "column labels rotated");
        CHECK(strstr(s, "<b>") == NULL && strstr(s, "Tom & J") == NULL, "no raw markup leaks");
    }
    free(s);
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
    test_html();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    return attn_test_finish();
}
