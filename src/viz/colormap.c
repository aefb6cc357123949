/* Scales of the pictures: colour maps, the value -> colour mapping, the default options, the
 * format from a file name, and axis ticks (see attn_viz.h). */
#include "viz_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------------ colour maps */

/* Anchor colours, equally spaced on [0, 1]; see attn_viz.h. */
static const rgb8 cmap_viridis[] = {{0x44, 0x01, 0x54}, {0x47, 0x2d, 0x7b}, {0x3b, 0x52, 0x8b},
                                   {0x2c, 0x72, 0x8e}, {0x21, 0x91, 0x8c}, {0x28, 0xae, 0x80},
                                   {0x5e, 0xc9, 0x62}, {0xad, 0xdc, 0x30}, {0xfd, 0xe7, 0x25}};
static const rgb8 cmap_diverging[] = {{0x21, 0x66, 0xac}, {0x67, 0xa9, 0xcf}, {0xf7, 0xf7, 0xf7},
                                      {0xef, 0x8a, 0x62}, {0xb2, 0x18, 0x2b}};
static const rgb8 cmap_gray[] = {{0, 0, 0}, {255, 255, 255}};
static const rgb8 nan_grey = {0x80, 0x80, 0x80};

const rgb8 *attn__cmap_table(attn_colormap cmap, int *n) {
    switch (cmap) {
    case ATTN_CMAP_VIRIDIS: *n = 9; return cmap_viridis;
    case ATTN_CMAP_DIVERGING: *n = 5; return cmap_diverging;
    case ATTN_CMAP_GRAY: *n = 2; return cmap_gray;
    default: *n = 0; return NULL;
    }
}

rgb8 attn__cmap_eval(attn_colormap cmap, float t) {
    int n;
    const rgb8 *tab = attn__cmap_table(cmap, &n);
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
    rgb8 c = attn__cmap_eval(cmap, t);
    rgb[0] = c.r;
    rgb[1] = c.g;
    rgb[2] = c.b;
}

float attn__viz_norm(float v, float vmin, float vmax) {
    if (v != v) return v;
    double t = ((double)v - vmin) / ((double)vmax - vmin);
    return (float)(t < 0 ? 0 : t > 1 ? 1 : t);
}

void attn__viz_color(const attn_heatmap_opts *o, float v, float vmin, float vmax, unsigned char rgb[3]) {
    attn_colormap_rgb(o->cmap, attn__viz_norm(v, vmin, vmax), rgb);
}

attn_heatmap_opts attn_heatmap_opts_default(void) {
    attn_heatmap_opts o;
    memset(&o, 0, sizeof o);
    o.cmap = ATTN_CMAP_VIRIDIS;
    o.colorbar = 1;
    o.font_px = 12;
    o.format = ATTN_VIZ_AUTO;
    o.alpha = 0.6f;
    return o;
}

int attn_viz_format_from_path(attn_viz_format *out, const char *path) {
    if (!out || !path) return attn_set_error(ATTN_E_INVALID, "viz: NULL format or path");
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (dot && (!slash || dot > slash)) {
        if (!strcasecmp(dot, ".png")) return *out = ATTN_VIZ_PNG, ATTN_OK;
        if (!strcasecmp(dot, ".svg")) return *out = ATTN_VIZ_SVG, ATTN_OK;
        if (!strcasecmp(dot, ".pdf")) return *out = ATTN_VIZ_PDF, ATTN_OK;
    }
    return attn_set_error(ATTN_E_INVALID, "%s: cannot tell the picture format (use .png, .svg or .pdf)", path);
}

/* ------------------------------------------------------------------ ticks */

int attn_viz_ticks(double *ticks, char (*labels)[32], int max_ticks, double vmin, double vmax) {
    if (!(isfinite(vmin) && isfinite(vmax) && vmin < vmax) || max_ticks < 2)
        return attn_set_error(ATTN_E_INVALID, "viz ticks: bad range [%g, %g] or max_ticks %d", vmin, vmax,
                              max_ticks);
    static const int mant[3] = {1, 2, 5};
    double range = vmax - vmin;
    /* steps m * 10^e from fine to coarse; start well below range / max_ticks */
    int e0 = (int)floor(log10(range / max_ticks)) - 1;
    int best_e = 0, best_m = 0;
    int64_t best_lo = 0, best_n = -1;
    int64_t prev_lo = 0, prev_n = -1;
    int prev_e = 0, prev_m = 0;
    for (int e = e0; e <= e0 + 4 && best_n < 0; e++)
        for (int i = 0; i < 3; i++) {
            double step = mant[i] * pow(10.0, e);
            double a = vmin / step, b = vmax / step;
            if (fabs(a) > 9e15 || fabs(b) > 9e15) continue; /* step too fine for the magnitude */
            int64_t lo = (int64_t)ceil(a - 1e-9), hi = (int64_t)floor(b + 1e-9);
            int64_t n = hi - lo + 1;
            if (n <= max_ticks) {
                if (n >= 2) {
                    best_e = e, best_m = mant[i], best_lo = lo, best_n = n;
                } else if (prev_n >= 2) { /* too coarse already: take the previous step */
                    best_e = prev_e, best_m = prev_m, best_lo = prev_lo, best_n = prev_n;
                }
                if (best_n < 0) {
                    /* nothing finer had >= 2 ticks (cannot happen since e0 is fine enough) */
                    best_e = e, best_m = mant[i], best_lo = lo, best_n = n;
                }
                break;
            }
            prev_e = e, prev_m = mant[i], prev_lo = lo, prev_n = n;
        }
    if (best_n < 2) return attn_set_error(ATTN_E_INVALID, "viz ticks: no ticks for [%g, %g]", vmin, vmax);
    double maxabs = 0;
    for (int64_t k = 0; k < best_n; k++) {
        int64_t q = (best_lo + k) * best_m;
        double v = best_e >= 0 ? (double)q * pow(10.0, best_e) : (double)q / pow(10.0, -best_e);
        if (ticks) ticks[k] = v;
        if (fabs(v) > maxabs) maxabs = fabs(v);
    }
    int sci = maxabs >= 1e6 || best_e < -4;
    for (int64_t k = 0; labels && k < best_n; k++) {
        int64_t q = (best_lo + k) * best_m;
        double v = best_e >= 0 ? (double)q * pow(10.0, best_e) : (double)q / pow(10.0, -best_e);
        if (q == 0 && sci) {
            snprintf(labels[k], 32, "0");
        } else if (q == 0) { /* +0.0 exactly: "0", "0.0", "0.00" ... never "-0" */
            snprintf(labels[k], 32, "%.*f", best_e < 0 ? -best_e : 0, 0.0);
        } else if (sci) {
            int et = (int)floor(log10(fabs(v)) + 1e-9);
            int prec = et - best_e;
            if (prec < 0) prec = 0;
            if (prec > 15) prec = 15;
            snprintf(labels[k], 32, "%.*e", prec, v);
        } else {
            snprintf(labels[k], 32, "%.*f", best_e < 0 ? -best_e : 0, v);
        }
    }
    return (int)best_n;
}
