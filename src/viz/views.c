/* The attention views of attn_viz.h: heatmap, layers x heads grid, one token across layers,
 * cross-attention alignment and image overlay. Each builds a scene and hands it to the one
 * drawing path in draw.c. */
#include "viz_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int heatmap(const char *path, attn_viz_format fmt, const attn_tensor *m, const attn_heatmap_opts *o) {
    attn_heatmap_opts def = attn_heatmap_opts_default();
    if (!o) o = &def;
    attn__viz_scene S;
    int rc = attn__viz_check_tensor(&S, m, 0, path);
    if (rc < 0) return rc;
    attn__viz_data_range(&S, o, &S.vmin, &S.vmax);
    return attn__viz_render(path, fmt, &S, o);
}

static int grid(const char *path, attn_viz_format fmt, const attn_tensor *m, int grid_cols, const char *const *captions,
                const attn_heatmap_opts *o) {
    attn_heatmap_opts def = attn_heatmap_opts_default();
    if (!o) o = &def;
    attn__viz_scene S;
    int rc = attn__viz_check_tensor(&S, m, 1, path);
    if (rc < 0) return rc;
    S.grid_cols = grid_cols;
    S.captions = captions;
    attn__viz_data_range(&S, o, &S.vmin, &S.vmax);
    return attn__viz_render(path, fmt, &S, o);
}

int attn_heatmap_write(const char *path, const attn_tensor *m, const attn_heatmap_opts *o) {
    return heatmap(path, ATTN_VIZ_AUTO, m, o);
}
int attn_heatmap_png(const char *path, const attn_tensor *m, const attn_heatmap_opts *o) {
    return heatmap(path, ATTN_VIZ_PNG, m, o);
}
int attn_heatmap_svg(const char *path, const attn_tensor *m, const attn_heatmap_opts *o) {
    return heatmap(path, ATTN_VIZ_SVG, m, o);
}
int attn_heatmap_pdf(const char *path, const attn_tensor *m, const attn_heatmap_opts *o) {
    return heatmap(path, ATTN_VIZ_PDF, m, o);
}

int attn_heatmap_grid_write(const char *path, const attn_tensor *m, int grid_cols, const char *const *captions,
                            const attn_heatmap_opts *o) {
    return grid(path, ATTN_VIZ_AUTO, m, grid_cols, captions, o);
}
int attn_heatmap_grid_png(const char *path, const attn_tensor *m, int grid_cols, const char *const *captions,
                          const attn_heatmap_opts *o) {
    return grid(path, ATTN_VIZ_PNG, m, grid_cols, captions, o);
}
int attn_heatmap_grid_svg(const char *path, const attn_tensor *m, int grid_cols, const char *const *captions,
                          const attn_heatmap_opts *o) {
    return grid(path, ATTN_VIZ_SVG, m, grid_cols, captions, o);
}
int attn_heatmap_grid_pdf(const char *path, const attn_tensor *m, int grid_cols, const char *const *captions,
                          const attn_heatmap_opts *o) {
    return grid(path, ATTN_VIZ_PDF, m, grid_cols, captions, o);
}

/* ------------------------------------------------------------------ one token across layers */

int attn_token_attention_write(const char *path, const attn_tensor *w, const char *const *tokens, int64_t token,
                               int64_t head, const attn_heatmap_opts *o) {
    if (!path || !w || !tokens) return attn_set_error(ATTN_E_INVALID, "token attention: NULL argument");
    if (w->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "token attention: weights must be float32");
    if (w->ndim != 4 || w->shape[2] != w->shape[3])
        return attn_set_error(ATTN_E_SHAPE, "token attention: weights must be [n_layers, H, L, L]");
    int64_t NL = w->shape[0], H = w->shape[1], L = w->shape[2];
    if (NL < 1 || H < 1 || L < 1 || !w->data) return attn_set_error(ATTN_E_INVALID, "token attention: empty weights");
    if (token < 0 || token >= L)
        return attn_set_error(ATTN_E_RANGE, "token attention: token %lld not in [0, %lld)", (long long)token, (long long)L);
    if (head < -1 || head >= H)
        return attn_set_error(ATTN_E_RANGE, "token attention: head %lld not in [0, %lld) or -1 (mean)", (long long)head,
                              (long long)H);
    if (NL > 65536 || L > (int64_t)1 << 24) return attn_set_error(ATTN_E_INVALID, "token attention: too large");
    attn_heatmap_opts def = attn_heatmap_opts_default();
    attn_heatmap_opts oo = o ? *o : def;
    float *rows = (float *)malloc(sizeof(float) * (size_t)(NL * L));
    char *text = (char *)malloc((size_t)NL * 24 + strlen(tokens[token] ? tokens[token] : "") + 8);
    const char **rl = (const char **)malloc(sizeof(char *) * (size_t)NL);
    const char **cl = (const char **)malloc(sizeof(char *) * (size_t)L);
    char title[512];
    int rc;
    if (!rows || !text || !rl || !cl) {
        rc = attn_set_error(ATTN_E_NOMEM, "token attention: out of memory");
        goto done;
    }
    const float *d = (const float *)w->data;
    for (int64_t l = 0; l < NL; l++)
        for (int64_t j = 0; j < L; j++) {
            double s = 0;
            int64_t base = l * w->stride[0] + token * w->stride[2] + j * w->stride[3];
            if (head >= 0) {
                s = d[base + head * w->stride[1]];
            } else {
                for (int64_t h = 0; h < H; h++) s += d[base + h * w->stride[1]];
                s /= (double)H;
            }
            rows[l * L + j] = (float)s;
        }
    char *p = text;
    for (int64_t l = 0; l < NL; l++) {
        rl[l] = p;
        p += snprintf(p, 24, "layer %lld", (long long)l) + 1;
    }
    for (int64_t j = 0; j < L; j++) cl[j] = tokens[j];
    /* mark the query token's own column */
    sprintf(p, "\xe2\x96\xb8 %s", tokens[token] ? tokens[token] : "");
    cl[token] = p;
    if (!oo.title) {
        char hs[48];
        if (head >= 0) snprintf(hs, sizeof hs, "head %lld", (long long)head);
        else snprintf(hs, sizeof hs, "mean of %lld heads", (long long)H);
        snprintf(title, sizeof title, "Attention of token %lld \xe2\x80\x9c%.200s\xe2\x80\x9d across layers (%s)",
                 (long long)token, tokens[token] ? tokens[token] : "", hs);
        oo.title = title;
    }
    if (!oo.x_label) oo.x_label = "key";
    if (!oo.y_label) oo.y_label = "layer";
    oo.row_labels = rl;
    oo.col_labels = cl;
    attn_tensor t = attn_tensor_f32_2d(rows, NL, L);
    rc = attn_heatmap_write(path, &t, &oo);
done:
    free(rows);
    free(text);
    free(rl);
    free(cl);
    return rc;
}

/* ------------------------------------------------------------------ cross-attention */

int attn_cross_attention_write(const char *path, const attn_tensor *w, const char *const *src_tokens,
                               const char *const *tgt_tokens, const attn_heatmap_opts *o) {
    if (!path || !w) return attn_set_error(ATTN_E_INVALID, "cross attention: NULL argument");
    if (w->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "cross attention: weights must be float32");
    if (w->ndim < 2 || w->ndim > 4)
        return attn_set_error(ATTN_E_SHAPE, "cross attention: weights have %d dims; need [T, S], [H, T, S] or "
                                            "[n_layers, H, T, S]", w->ndim);
    for (int i = 0; i < w->ndim; i++)
        if (w->shape[i] < 1) return attn_set_error(ATTN_E_INVALID, "cross attention: empty weights");
    if (!w->data) return attn_set_error(ATTN_E_INVALID, "cross attention: NULL data");
    attn_heatmap_opts def = attn_heatmap_opts_default();
    attn_heatmap_opts oo = o ? *o : def;
    if (!oo.title) oo.title = "Cross-attention (target x source)";
    if (!oo.x_label) oo.x_label = "source";
    if (!oo.y_label) oo.y_label = "target";
    oo.row_labels = tgt_tokens;
    oo.col_labels = src_tokens;
    if (w->ndim == 2) return attn_heatmap_write(path, w, &oo);
    if (w->ndim == 4) return attn_heatmap_grid_write(path, w, 0, NULL, &oo);
    int64_t H = w->shape[0], T = w->shape[1], S = w->shape[2];
    if (T > (int64_t)1 << 24 || S > (int64_t)1 << 24 || T * S > (int64_t)1 << 28)
        return attn_set_error(ATTN_E_INVALID, "cross attention: %lldx%lld is too large", (long long)T, (long long)S);
    float *mean = (float *)malloc(sizeof(float) * (size_t)(T * S));
    if (!mean) return attn_set_error(ATTN_E_NOMEM, "cross attention: out of memory");
    const float *d = (const float *)w->data;
    for (int64_t t = 0; t < T; t++)
        for (int64_t s = 0; s < S; s++) {
            double acc = 0;
            for (int64_t h = 0; h < H; h++) acc += d[h * w->stride[0] + t * w->stride[1] + s * w->stride[2]];
            mean[t * S + s] = (float)(acc / (double)H);
        }
    attn_tensor m = attn_tensor_f32_2d(mean, T, S);
    int rc = attn_heatmap_write(path, &m, &oo);
    free(mean);
    return rc;
}

/* ------------------------------------------------------------------ image overlay */

/* Shown size of a width x height image (see attn_viz.h, image_side). */
static void shown_size(int width, int height, int side, int *dw, int *dh) {
    int big = width > height ? width : height;
    double s;
    if (side > 0) s = (double)side / big;
    else if (big <= 384) s = (double)(384 / big);
    else if (big > 640) s = 640.0 / big;
    else s = 1;
    *dw = (int)lround(width * s);
    *dh = (int)lround(height * s);
    if (*dw < 1) *dw = 1;
    if (*dh < 1) *dh = 1;
}

static int check_image(const unsigned char *pixels, int width, int height, int channels, int64_t row_stride) {
    if (!pixels) return attn_set_error(ATTN_E_INVALID, "image overlay: NULL pixels");
    if (width < 1 || height < 1 || width > ATTN_VIZ_MAX_SIDE || height > ATTN_VIZ_MAX_SIDE)
        return attn_set_error(ATTN_E_INVALID, "image overlay: image is %dx%d (need 1..%d a side)", width, height,
                              ATTN_VIZ_MAX_SIDE);
    if (channels != 1 && channels != 3 && channels != 4)
        return attn_set_error(ATTN_E_INVALID, "image overlay: %d channels (need 1, 3 or 4)", channels);
    if (row_stride < (int64_t)width * channels)
        return attn_set_error(ATTN_E_INVALID, "image overlay: row stride %lld < width x channels %lld",
                              (long long)row_stride, (long long)width * channels);
    return ATTN_OK;
}

/* Source sample of the image at shown pixel (x, y) into rgb. */
static void sample_image(const unsigned char *px, int width, int height, int channels, int64_t stride, int dw, int dh,
                         int x, int y, double out[3]) {
    double u = (x + 0.5) * width / dw - 0.5, v = (y + 0.5) * height / dh - 0.5;
    if (dw >= width && dh >= height) { /* enlarged: nearest pixel */
        int sx = (int)((int64_t)x * width / dw), sy = (int)((int64_t)y * height / dh);
        const unsigned char *p = px + sy * stride + (int64_t)sx * channels;
        for (int c = 0; c < 3; c++) out[c] = p[channels == 1 ? 0 : c];
        return;
    }
    if (u < 0) u = 0;
    if (v < 0) v = 0;
    if (u > width - 1) u = width - 1;
    if (v > height - 1) v = height - 1;
    int x0 = (int)u, y0 = (int)v;
    int x1 = x0 + 1 < width ? x0 + 1 : x0, y1 = y0 + 1 < height ? y0 + 1 : y0;
    double fx = u - x0, fy = v - y0;
    for (int c = 0; c < 3; c++) {
        int ch = channels == 1 ? 0 : c;
        double a = px[y0 * stride + (int64_t)x0 * channels + ch], b = px[y0 * stride + (int64_t)x1 * channels + ch];
        double e = px[y1 * stride + (int64_t)x0 * channels + ch], f = px[y1 * stride + (int64_t)x1 * channels + ch];
        out[c] = (a * (1 - fx) + b * fx) * (1 - fy) + (e * (1 - fx) + f * fx) * fy;
    }
}

int attn_image_overlay_write(const char *path, const unsigned char *pixels, const attn_tensor *attn,
                             const attn_heatmap_opts *o, int width, int height, int channels, int64_t row_stride) {
    if (!path || !attn) return attn_set_error(ATTN_E_INVALID, "image overlay: NULL argument");
    int rc = check_image(pixels, width, height, channels, row_stride);
    if (rc < 0) return rc;
    if (attn->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "image overlay: attention must be float32");
    if (attn->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "image overlay: attention must be [gh, gw], has %d dims", attn->ndim);
    int64_t gh = attn->shape[0], gw = attn->shape[1];
    if (gh < 1 || gw < 1 || !attn->data) return attn_set_error(ATTN_E_INVALID, "image overlay: empty attention grid");
    attn_heatmap_opts def = attn_heatmap_opts_default();
    if (!o) o = &def;
    if ((rc = attn__viz_check_opts(o)) < 0) return rc;
    attn__viz_scene S;
    /* colour range from the attention grid, as for a heatmap */
    rc = attn__viz_check_tensor(&S, attn, 0, path);
    if (rc < 0) return rc;
    attn__viz_data_range(&S, o, &S.vmin, &S.vmax);
    float vmin = S.vmin, vmax = S.vmax;
    memset(&S, 0, sizeof S);
    S.vmin = vmin, S.vmax = vmax;
    shown_size(width, height, o->image_side, &S.img_w, &S.img_h);
    int dw = S.img_w, dh = S.img_h;
    unsigned char *img = (unsigned char *)malloc((size_t)dw * dh * 3);
    unsigned char *ovl = (unsigned char *)malloc((size_t)dw * dh * 3);
    if (!img || !ovl) {
        free(img);
        free(ovl);
        return attn_set_error(ATTN_E_NOMEM, "image overlay: out of memory");
    }
    const float *a = (const float *)attn->data;
    int64_t s0 = attn->stride[0], s1 = attn->stride[1];
    double al = o->alpha;
    for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++) {
            double src[3];
            sample_image(pixels, width, height, channels, row_stride, dw, dh, x, y, src);
            float v;
            if (!o->smooth) {
                int64_t r = (int64_t)y * gh / dh, c = (int64_t)x * gw / dw;
                v = a[r * s0 + c * s1];
            } else {
                double u = (x + 0.5) * gw / dw - 0.5, w = (y + 0.5) * gh / dh - 0.5;
                if (u < 0) u = 0;
                if (w < 0) w = 0;
                if (u > gw - 1) u = (double)(gw - 1);
                if (w > gh - 1) w = (double)(gh - 1);
                int64_t c0 = (int64_t)u, r0 = (int64_t)w;
                int64_t c1 = c0 + 1 < gw ? c0 + 1 : c0, r1 = r0 + 1 < gh ? r0 + 1 : r0;
                double fx = u - c0, fy = w - r0;
                v = (float)((a[r0 * s0 + c0 * s1] * (1 - fx) + a[r0 * s0 + c1 * s1] * fx) * (1 - fy) +
                            (a[r1 * s0 + c0 * s1] * (1 - fx) + a[r1 * s0 + c1 * s1] * fx) * fy);
            }
            unsigned char cm[3];
            attn__viz_color(o, v, vmin, vmax, cm);
            size_t k = ((size_t)y * dw + x) * 3;
            for (int c = 0; c < 3; c++) {
                img[k + c] = (unsigned char)lround(src[c]);
                ovl[k + c] = (unsigned char)lround((1 - al) * src[c] + al * cm[c]);
            }
        }
    const unsigned char *panels[2] = {img, ovl};
    static const char *const caps[2] = {"image", "attention"};
    S.images = panels;
    S.n_panels = 2, S.grid_cols = 2, S.grid = 1;
    S.captions = caps;
    rc = attn__viz_render(path, ATTN_VIZ_AUTO, &S, o);
    free(img);
    free(ovl);
    return rc;
}
