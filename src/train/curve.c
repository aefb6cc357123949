/* curve.png of a training run (attn_train_curve_png): two panels side by side — loss per epoch
 * (training solid, evaluation dashed) and evaluation accuracy per epoch — drawn with cairo
 * (its "toy" text API: the labels are short ASCII). */
#include "attn_train.h"
#include "core/internal.h"

#include <cairo.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static cairo_status_t attn__curve_sink(void *closure, const unsigned char *data, unsigned int len) {
    return fwrite(data, 1, len, (FILE *)closure) == len ? CAIRO_STATUS_SUCCESS : CAIRO_STATUS_WRITE_ERROR;
}

/* one panel at (x0, y0) of size w x h: series a (solid) and b (dashed, may be NULL) of n values */
static void attn__panel(cairo_t *cr, double x0, double y0, double w, double h, const char *title, const double *a,
                        const double *b, int64_t n, int percent) {
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        for (int s = 0; s < 2; s++) {
            const double v = s ? (b ? b[i] : NAN) : a[i];
            if (isfinite(v)) lo = fmin(lo, v), hi = fmax(hi, v);
        }
    if (!isfinite(lo)) lo = 0, hi = 1;
    if (hi - lo < 1e-9) lo -= 0.5 * fmax(fabs(lo), 1e-3), hi += 0.5 * fmax(fabs(hi), 1e-3);
    const double pad = 0.05 * (hi - lo);
    lo -= pad, hi += pad;
    const double L = x0 + 60, R = x0 + w - 15, T = y0 + 30, B = y0 + h - 40;
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, L, T, R - L, B - T);
    cairo_stroke(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(cr, 13);
    cairo_move_to(cr, L, y0 + 20);
    cairo_show_text(cr, title);
    cairo_set_font_size(cr, 10);
    char buf[32];
    for (int k = 0; k <= 4; k++) { /* y ticks */
        const double v = lo + (hi - lo) * k / 4, y = B - (B - T) * k / 4;
        snprintf(buf, sizeof buf, percent ? "%.2f%%" : "%.3f", percent ? 100 * v : v);
        cairo_move_to(cr, x0 + 4, y + 3);
        cairo_show_text(cr, buf);
        cairo_move_to(cr, L - 4, y);
        cairo_line_to(cr, L, y);
        cairo_stroke(cr);
    }
    const double dx = n > 1 ? (R - L) / (double)(n - 1) : 0;
    for (int64_t i = 0; i < n; i++) { /* x ticks: epochs */
        if (n > 12 && (i + 1) % ((n + 11) / 12)) continue;
        const double x = n > 1 ? L + dx * i : (L + R) / 2;
        snprintf(buf, sizeof buf, "%lld", (long long)(i + 1));
        cairo_move_to(cr, x - 3, B + 14);
        cairo_show_text(cr, buf);
    }
    cairo_move_to(cr, (L + R) / 2 - 15, B + 30);
    cairo_show_text(cr, "epoch");
    for (int s = 0; s < 2; s++) {
        const double *v = s ? b : a;
        if (!v) continue;
        const double dash = 5;
        cairo_set_dash(cr, &dash, s ? 1 : 0, 0);
        cairo_set_source_rgb(cr, s ? 0.85 : 0.12, s ? 0.37 : 0.47, s ? 0.01 : 0.71);
        cairo_set_line_width(cr, 2);
        int pen = 0;
        for (int64_t i = 0; i < n; i++) {
            if (!isfinite(v[i])) {
                pen = 0;
                continue;
            }
            const double x = n > 1 ? L + dx * i : (L + R) / 2, y = B - (B - T) * (v[i] - lo) / (hi - lo);
            if (pen) cairo_line_to(cr, x, y);
            else cairo_move_to(cr, x, y);
            pen = 1;
            cairo_arc(cr, x, y, 2.5, 0, 2 * M_PI);
            cairo_move_to(cr, x, y);
        }
        cairo_stroke(cr);
    }
    cairo_set_dash(cr, NULL, 0, 0);
}

int attn_train_curve_png(FILE *f, const attn_train_epoch *h, int64_t n) {
    if (!f || !h || n < 1) return attn_set_error(ATTN_E_INVALID, "training curve: no epochs to plot");
    double *v = (double *)malloc(sizeof(double) * 3 * (size_t)n);
    if (!v) return attn_set_error(ATTN_E_NOMEM, "training curve: out of memory");
    int has_eval = 0;
    for (int64_t i = 0; i < n; i++) {
        v[i] = h[i].train_loss, v[n + i] = h[i].eval_loss, v[2 * n + i] = h[i].eval_accuracy;
        has_eval |= isfinite(h[i].eval_loss);
    }
    const int W = 900, H = 360;
    cairo_surface_t *s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H);
    cairo_t *cr = cairo_create(s);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    attn__panel(cr, 0, 0, W / 2.0, H, has_eval ? "loss (train solid, eval dashed)" : "training loss", v, has_eval ? v + n : NULL,
                n, 0);
    attn__panel(cr, W / 2.0, 0, W / 2.0, H, "evaluation accuracy", v + 2 * n, NULL, n, 1);
    int rc = cairo_status(cr) == CAIRO_STATUS_SUCCESS ? ATTN_OK
                                                       : attn_set_error(ATTN_E_NOMEM, "training curve: %s", cairo_status_to_string(cairo_status(cr)));
    cairo_destroy(cr);
    if (rc == 0 && cairo_surface_write_to_png_stream(s, attn__curve_sink, f) != CAIRO_STATUS_SUCCESS)
        rc = attn_set_error(ATTN_E_IO, "training curve: cannot write the PNG");
    cairo_surface_destroy(s);
    free(v);
    return rc;
}
