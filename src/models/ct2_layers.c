/* Loading helpers shared by the CTranslate2 model families (see ct2_layers.h). */
#include "models/ct2_layers.h"
#include "core/internal.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static float *attn__alloc_f32(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, 64, sizeof(float) * (n ? n : 1)) != 0) return NULL;
    return (float *)p;
}

static int attn__shape_ok(const attn_ct2_var *v, int rank, const int64_t *dims) {
    if (v->rank != rank) return 0;
    for (int i = 0; i < rank; i++)
        if (dims[i] >= 0 && v->shape[i] != dims[i]) return 0;
    return 1;
}

static void attn__shape_str(char *buf, size_t n, int rank, const int64_t *dims) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, n - o, "[");
    for (int i = 0; i < rank && o < n; i++) o += (size_t)snprintf(buf + o, n - o, i ? ", %lld" : "%lld", (long long)dims[i]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

int attn__ct2_read(float **out, const attn_ct2_file *f, const char *name, int rank, const int64_t *dims) {
    *out = NULL;
    const attn_ct2_var *v = attn_ct2_find(f, name);
    if (!v) return attn_set_error(ATTN_E_FORMAT, "model.bin has no variable '%s'", name);
    if (!attn__shape_ok(v, rank, dims)) {
        char want[128], got[128];
        attn__shape_str(want, sizeof want, rank, dims);
        attn__shape_str(got, sizeof got, v->rank, v->shape);
        return attn_set_error(ATTN_E_FORMAT, "model.bin variable '%s' has shape %s, expected %s", name, got, want);
    }
    float *p = attn__alloc_f32((size_t)v->numel);
    if (!p) return attn_set_error(ATTN_E_NOMEM, "out of memory reading '%s'", name);
    attn_ct2_read_f32(p, v);
    for (int64_t i = 0; i < v->numel; i++)
        if (!isfinite(p[i])) {
            free(p);
            return attn_set_error(ATTN_E_FORMAT, "model.bin variable '%s' holds a non-finite value at index %lld", name, (long long)i);
        }
    *out = p;
    return ATTN_OK;
}

double attn__ct2_attr(const attn_ct2_file *f, const char *name, double def) {
    const attn_ct2_var *v = attn_ct2_find(f, name);
    if (!v || v->numel != 1) return def;
    float x;
    attn_ct2_read_f32(&x, v);
    return x;
}

void attn__ct2_lin_free(attn__ct2_lin *l) {
    if (!l) return;
    ATTN_FREE_ALL(l->wf, l->scale, l->b, l->q, l->comp, l->wh);
    memset(l, 0, sizeof *l);
}

int attn__ct2_lin_keep16(attn__ct2_lin *l, const attn_ct2_var *v) {
    if (!v || (v->dtype != ATTN_CT2_F16 && v->dtype != ATTN_CT2_BF16) || v->numel != l->w.rows * l->w.cols) return ATTN_OK;
    void *p = NULL;
    if (posix_memalign(&p, 64, sizeof(uint16_t) * (size_t)(v->numel ? v->numel : 1)) != 0) return attn_set_error(ATTN_E_NOMEM, "out of memory");
    memcpy(p, v->data, sizeof(uint16_t) * (size_t)v->numel); /* the mapping may be unaligned */
    free(l->wh);
    l->wh = (uint16_t *)p;
    l->wh_type = v->dtype == ATTN_CT2_F16 ? ATTN_QT_F16 : ATTN_QT_BF16;
    l->w.half = l->wh, l->w.half_type = l->wh_type; /* attn_weight_matmul streams it for 1..16 rows */
    return ATTN_OK;
}


int attn__ct2_lin_load(attn__ct2_lin *l, const attn_ct2_file *f, const char *scope, int64_t out, int64_t in, int need_bias) {
    memset(l, 0, sizeof *l);
    char name[256];
    l->w.rows = out;
    l->w.cols = in;
    snprintf(name, sizeof name, "%s/weight", scope);
    const attn_ct2_var *w = attn_ct2_find(f, name);
    if (!w) return attn_set_error(ATTN_E_FORMAT, "model.bin has no variable '%s'", name);
    int64_t dims[2] = {out, in};
    int rc = attn__ct2_read(&l->wf, f, name, 2, dims);
    if (rc < 0) return rc;
    if (w->dtype == ATTN_CT2_I8 || w->dtype == ATTN_CT2_I16) {
        snprintf(name, sizeof name, "%s/weight_scale", scope);
        const attn_ct2_var *s = attn_ct2_find(f, name);
        if (!s) {
            attn__ct2_lin_free(l);
            return attn_set_error(ATTN_E_FORMAT, "model.bin: quantized '%s/weight' has no weight_scale", scope);
        }
        l->scale = attn__alloc_f32((size_t)out);
        if (!l->scale) {
            attn__ct2_lin_free(l);
            return attn_set_error(ATTN_E_NOMEM, "out of memory");
        }
        if (s->numel == 1) {
            float x;
            attn_ct2_read_f32(&x, s);
            for (int64_t i = 0; i < out; i++) l->scale[i] = x;
        } else if (s->numel == out && s->dtype == ATTN_CT2_F32) {
            attn_ct2_read_f32(l->scale, s);
        } else {
            attn__ct2_lin_free(l);
            return attn_set_error(ATTN_E_FORMAT, "model.bin: '%s' must hold 1 or %lld float32 values", name, (long long)out);
        }
        for (int64_t i = 0; i < out; i++)
            if (!(l->scale[i] > 0) || !isfinite(l->scale[i])) {
                attn__ct2_lin_free(l);
                return attn_set_error(ATTN_E_FORMAT, "model.bin: '%s' has a non-positive or non-finite scale at row %lld", name, (long long)i);
            }
        if (w->dtype == ATTN_CT2_I16) {
            /* int16: dequantise once (CTranslate2 computes int16 GEMMs in integers too, but no
             * int16 model is exercised here; float weights keep the result within rounding) */
            for (int64_t o = 0; o < out; o++)
                for (int64_t i = 0; i < in; i++) l->wf[o * in + i] /= l->scale[o];
            free(l->scale);
            l->scale = NULL;
        } else {
            l->comp = (int32_t *)calloc((size_t)out, sizeof(int32_t));
            if (!l->comp) {
                attn__ct2_lin_free(l);
                return attn_set_error(ATTN_E_NOMEM, "out of memory");
            }
            for (int64_t o = 0; o < out; o++)
                for (int64_t i = 0; i < in; i++) l->comp[o] += (int32_t)l->wf[o * in + i];
        }
        if (l->scale) {
            l->q = (int8_t *)malloc((size_t)(out * in));
            if (!l->q) {
                attn__ct2_lin_free(l);
                return attn_set_error(ATTN_E_NOMEM, "out of memory");
            }
            for (int64_t i = 0; i < out * in; i++) l->q[i] = (int8_t)l->wf[i];
            free(l->wf); /* the integers live on in q */
            l->wf = NULL;
        }
    }
    snprintf(name, sizeof name, "%s/bias", scope);
    if (attn_ct2_find(f, name) || need_bias) {
        int64_t bd[1] = {out};
        rc = attn__ct2_read(&l->b, f, name, 1, bd);
        if (rc < 0) {
            attn__ct2_lin_free(l);
            return rc;
        }
    }
    l->w.type = l->q ? ATTN_QT_I8 : ATTN_QT_F32;
    l->w.rows = out;
    l->w.cols = in;
    l->w.data = l->q ? (const void *)l->q : (const void *)l->wf;
    l->w.bias = l->b;
    l->w.scale = l->scale;
    l->w.row_sum = l->comp;
    l->w.kernel = ATTN_WKERNEL_CT2;
    return ATTN_OK;
}

int attn__ct2_ln_load(attn__ct2_ln *ln, const attn_ct2_file *f, const char *scope, int64_t n) {
    memset(ln, 0, sizeof *ln);
    char name[256];
    int64_t d[1] = {n};
    ln->n = n;
    snprintf(name, sizeof name, "%s/gamma", scope);
    ATTN_TRY(attn__ct2_read(&ln->g, f, name, 1, d));
    snprintf(name, sizeof name, "%s/beta", scope);
    int rc = attn__ct2_read(&ln->b, f, name, 1, d);
    if (rc < 0) attn__ct2_ln_free(ln);
    return rc;
}

void attn__ct2_ln_free(attn__ct2_ln *ln) {
    if (!ln) return;
    ATTN_FREE_ALL(ln->g, ln->b);
    *ln = (attn__ct2_ln){NULL, NULL, 0};
}


int attn__ct2_load_model(const char *dir, int (*body)(void *ctx, const attn_ct2_file *f), void *ctx) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.bin", dir);
    struct stat st;
    if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode))
        return attn_set_error(ATTN_E_INVALID, "%s is not a directory: a CTranslate2 model is a directory holding model.bin", dir);
    attn_ct2_file *f = NULL;
    int rc = attn_ct2_open(&f, path);
    if (rc == 0) {
        rc = body(ctx, f);
        if (rc < 0) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", attn_last_error());
            rc = attn_set_error(rc, "%s: %s", path, msg);
        }
    }
    attn_ct2_close(f);
    return rc;
}

int attn__ct2_embedding(float **out, int64_t *V, const attn_ct2_file *f, const char *scope, int64_t E) {
    char name[256];
    *out = NULL;
    snprintf(name, sizeof name, "%s/weight", scope);
    const attn_ct2_var *w = attn_ct2_find(f, name);
    if (!w) return attn_set_error(ATTN_E_FORMAT, "model.bin has no variable '%s'", name);
    int64_t dims[2] = {-1, E};
    ATTN_TRY(attn__ct2_read(out, f, name, 2, dims));
    *V = w->shape[0];
    if (w->dtype == ATTN_CT2_I8 || w->dtype == ATTN_CT2_I16) {
        snprintf(name, sizeof name, "%s/weight_scale", scope);
        const attn_ct2_var *s = attn_ct2_find(f, name);
        if (!s || s->dtype != ATTN_CT2_F32 || (s->numel != 1 && s->numel != *V)) {
            free(*out);
            *out = NULL;
            return attn_set_error(ATTN_E_FORMAT, "model.bin: quantized '%s/weight' needs a float32 weight_scale of 1 or %lld values",
                                  scope, (long long)*V);
        }
        float *sc = (float *)malloc(sizeof(float) * (size_t)s->numel);
        if (!sc) {
            free(*out);
            *out = NULL;
            return attn_set_error(ATTN_E_NOMEM, "out of memory");
        }
        attn_ct2_read_f32(sc, s);
        for (int64_t v = 0; v < *V; v++) {
            float r = 1.0f / (s->numel == 1 ? sc[0] : sc[v]);
            for (int64_t e = 0; e < E; e++) (*out)[v * E + e] = (*out)[v * E + e] * r;
        }
        free(sc);
    }
    return ATTN_OK;
}
