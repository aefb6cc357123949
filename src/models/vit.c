/* Vision Transformer (ViT) image classifier, Hugging Face format (see attn_vit.h).
 * One file per model family. */
#include "attn_vit.h"
#include "attn_layers.h"
#include "attn_ops.h"
#include "attn_safetensors.h"
#include "core/internal.h"
#include "formats/hf_config.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct attn_vit {
    attn_vit_config cfg;
    attn_safetensors *st;
    attn_arena warena; /* converted (non-F32) weights */
    attn_tensor cls, pos, patch_w, patch_b, ln_g, ln_b, cls_w, cls_b;
    attn_encoder_weights *layers;
    attn_layer_config lcfg;
    char **labels; /* n_labels strings */
    const char *prefix; /* "vit." or "" */
};

/* ---------------------------------------------------------------- config */

/* image_size / patch_size: an integer or a [height, width] pair */
static int attn__vit_get_pair(const attn__hf_json *j, const char *key, int64_t *h, int64_t *w, int64_t lo, int64_t hi) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j->root, key);
    if (!it) return attn_set_error(ATTN_E_FORMAT, "vit: config.json lacks \"%s\"", key);
    if (cJSON_IsArray(it)) {
        if (cJSON_GetArraySize(it) != 2)
            return attn_set_error(ATTN_E_FORMAT, "vit: config.json \"%s\" must be an integer or [height, width]", key);
        ATTN_TRY(attn__hf_int_value(j, cJSON_GetArrayItem(it, 0), key, h, lo, hi));
        return attn__hf_int_value(j, cJSON_GetArrayItem(it, 1), key, w, lo, hi);
    }
    ATTN_TRY(attn__hf_int_value(j, it, key, h, lo, hi));
    *w = *h;
    return ATTN_OK;
}

/* image_mean / image_std: a number or a list of 1 or C numbers */
static int attn__vit_get_channels(const attn__hf_json *j, const char *key, float *v, int64_t C, int positive) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j->root, key);
    if (!it || cJSON_IsNull(it)) return ATTN_OK;
    double vals[3];
    int n = 0;
    if (cJSON_IsNumber(it)) {
        vals[n++] = it->valuedouble;
    } else if (cJSON_IsArray(it)) {
        int sz = cJSON_GetArraySize(it);
        if (sz != 1 && sz != C)
            return attn_set_error(ATTN_E_FORMAT, "vit: preprocessor_config.json \"%s\" has %d values for a %lld-channel model",
                                  key, sz, (long long)C);
        const cJSON *e;
        cJSON_ArrayForEach(e, it) {
            if (!cJSON_IsNumber(e)) return attn_set_error(ATTN_E_FORMAT, "vit: preprocessor_config.json \"%s\" must hold numbers", key);
            vals[n++] = e->valuedouble;
        }
    } else {
        return attn_set_error(ATTN_E_FORMAT, "vit: preprocessor_config.json \"%s\" must be a number or a list", key);
    }
    for (int i = 0; i < n; i++)
        if (!isfinite(vals[i]) || (positive && !(vals[i] > 0)))
            return attn_set_error(ATTN_E_FORMAT, "vit: preprocessor_config.json \"%s\" must hold finite%s numbers", key,
                                  positive ? " positive" : "");
    for (int64_t c = 0; c < C; c++) v[c] = (float)vals[n == 1 ? 0 : c];
    return ATTN_OK;
}

static int attn__vit_parse_config(attn_vit_config *c, const char *dir) {
    attn__hf_json j;
    int rc = attn__hf_json_load(&j, "vit", dir, "config.json", 0, " (is the model directory complete?)");
    if (rc < 0) {
        attn__hf_json_free(&j);
        return rc;
    }
    memset(c, 0, sizeof *c);
    c->channels = 3;
    c->act = ATTN_ACT_GELU;
    c->eps = 1e-12f;
    c->qkv_bias = 1;
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(j.root, "model_type");
    if (mt && !(cJSON_IsString(mt) && !strcmp(mt->valuestring, "vit")))
        rc = attn_set_error(ATTN_E_UNSUPPORTED, "vit: config.json model_type \"%s\" is not \"vit\"",
                            cJSON_IsString(mt) ? mt->valuestring : "?");
    if (rc == 0) rc = attn__vit_get_pair(&j, "image_size", &c->image_h, &c->image_w, 1, 16384);
    if (rc == 0) rc = attn__vit_get_pair(&j, "patch_size", &c->patch_h, &c->patch_w, 1, 4096);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_channels", &c->channels, 1, 3, 0);
    if (rc == 0 && c->channels == 2) rc = attn_set_error(ATTN_E_UNSUPPORTED, "vit: num_channels must be 1 or 3");
    if (rc == 0) rc = attn__hf_int(&j, NULL, "hidden_size", &c->d_model, 1, 1 << 16, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_hidden_layers", &c->n_layers, 1, 1024, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_attention_heads", &c->n_heads, 1, 1024, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "intermediate_size", &c->d_ff, 1, 1 << 20, 1);
    if (rc == 0 && c->d_model % c->n_heads != 0)
        rc = attn_set_error(ATTN_E_FORMAT, "vit: hidden_size %lld is not a multiple of num_attention_heads %lld",
                            (long long)c->d_model, (long long)c->n_heads);
    if (rc == 0 && (c->patch_h > c->image_h || c->patch_w > c->image_w))
        rc = attn_set_error(ATTN_E_FORMAT, "vit: patch_size %lld x %lld is larger than image_size %lld x %lld",
                            (long long)c->patch_h, (long long)c->patch_w, (long long)c->image_h, (long long)c->image_w);
    if (rc == 0 && (c->image_h / c->patch_h) * (c->image_w / c->patch_w) > 65536)
        rc = attn_set_error(ATTN_E_FORMAT, "vit: more than 65536 patches");
    if (rc == 0) rc = attn__hf_float(&j, NULL, "layer_norm_eps", &c->eps, 0, 1);
    if (rc == 0) rc = attn__hf_bool(&j, NULL, "qkv_bias", &c->qkv_bias);
    if (rc == 0) rc = attn__hf_activation(&j, NULL, "hidden_act", &c->act);
    attn__hf_json_free(&j);
    ATTN_TRY(rc);

    /* preprocessing: ViTImageProcessor's defaults, then preprocessor_config.json */
    c->do_resize = 1;
    c->resize_h = c->image_h;
    c->resize_w = c->image_w;
    c->do_rescale = 1;
    c->rescale_factor = 1.0f / 255.0f;
    c->do_normalize = 1;
    for (int i = 0; i < 3; i++) c->mean[i] = c->std[i] = 0.5f;
    rc = attn__hf_json_load(&j, "vit", dir, "preprocessor_config.json", ATTN__HF_OPTIONAL, NULL);
    if (rc < 0 || !j.root) {
        attn__hf_json_free(&j);
        return rc;
    }
    rc = attn__hf_bool(&j, NULL, "do_resize", &c->do_resize);
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(j.root, "size");
    if (rc == 0 && size && !cJSON_IsNull(size)) {
        if (cJSON_IsObject(size)) {
            rc = attn__hf_int(&j, size, "height", &c->resize_h, 1, 16384, 1);
            if (rc == 0) rc = attn__hf_int(&j, size, "width", &c->resize_w, 1, 16384, 1);
        } else {
            rc = attn__hf_int_value(&j, size, "size", &c->resize_h, 1, 16384);
            c->resize_w = c->resize_h;
        }
    }
    /* resizing is bilinear (PIL's BILINEAR = 2, ViTImageProcessor's default); another filter would
     * silently change every pixel, so it is refused */
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(j.root, "resample");
    if (rc == 0 && rs && !cJSON_IsNull(rs) && !(cJSON_IsNumber(rs) && rs->valuedouble == 2))
        rc = attn_set_error(ATTN_E_UNSUPPORTED,
                            "vit: preprocessor_config.json \"resample\" is %s; only 2 (bilinear, ViTImageProcessor's default) is supported",
                            cJSON_IsNumber(rs) ? (rs->valuedouble == 3 ? "3 (bicubic)" : rs->valuedouble == 0 ? "0 (nearest)" : "not 2")
                                               : "not a number");
    if (rc == 0) rc = attn__hf_bool(&j, NULL, "do_rescale", &c->do_rescale);
    if (rc == 0) rc = attn__hf_float(&j, NULL, "rescale_factor", &c->rescale_factor, -1e6, 1e6);
    if (rc == 0) rc = attn__hf_bool(&j, NULL, "do_normalize", &c->do_normalize);
    if (rc == 0) rc = attn__vit_get_channels(&j, "image_mean", c->mean, c->channels, 0);
    if (rc == 0) rc = attn__vit_get_channels(&j, "image_std", c->std, c->channels, 1);
    attn__hf_json_free(&j);
    return rc;
}

/* id2label: {"0": "T-shirt/top", ...}; absent entries become "LABEL_i" */
static int attn__vit_labels(attn_vit *m, const char *dir) {
    int64_t n = m->cfg.n_labels;
    if (n <= 0) return ATTN_OK;
    m->labels = (char **)calloc((size_t)n, sizeof(char *));
    if (!m->labels) return attn_set_error(ATTN_E_NOMEM, "vit: out of memory");
    attn__hf_json j;
    int rc = attn__hf_json_load(&j, "vit", dir, "config.json", 0, " (is the model directory complete?)");
    const cJSON *map = j.root ? cJSON_GetObjectItemCaseSensitive(j.root, "id2label") : NULL;
    if (map && !cJSON_IsObject(map)) rc = attn_set_error(ATTN_E_FORMAT, "vit: config.json \"id2label\" must be an object");
    /* as transformers: id2label, when given, names every class: keys "0" .. "n-1", one per output */
    if (rc == 0 && map) {
        int64_t cnt = 0;
        for (const cJSON *e = map->child; e && rc == 0; e = e->next, cnt++) {
            char *end = NULL;
            long long k = e->string ? strtoll(e->string, &end, 10) : -1;
            if (!e->string || !*e->string || *end || k < 0 || k >= n || !cJSON_IsString(e))
                rc = attn_set_error(ATTN_E_FORMAT,
                                    "vit: config.json \"id2label\" key \"%s\" is not a class index 0..%lld with a string label",
                                    e->string ? e->string : "", (long long)n - 1);
        }
        if (rc == 0 && cnt != n)
            rc = attn_set_error(ATTN_E_FORMAT, "vit: config.json \"id2label\" has %lld labels but the classifier has %lld outputs",
                                (long long)cnt, (long long)n);
    }
    for (int64_t i = 0; i < n && rc == 0; i++) {
        char key[32];
        snprintf(key, sizeof key, "%lld", (long long)i);
        const cJSON *it = map ? cJSON_GetObjectItemCaseSensitive(map, key) : NULL;
        char buf[64];
        const char *s = buf;
        if (it && cJSON_IsString(it)) s = it->valuestring;
        else snprintf(buf, sizeof buf, "LABEL_%lld", (long long)i);
        m->labels[i] = strdup(s);
        if (!m->labels[i]) rc = attn_set_error(ATTN_E_NOMEM, "vit: out of memory");
    }
    attn__hf_json_free(&j);
    return rc;
}

/* ---------------------------------------------------------------- weights */

/* Find the first of the candidate names (each tried with the model's prefix) and read it
 * with a shape check. `alt` may be NULL. */
static int attn__vit_w(attn_vit *m, attn_tensor *out, const char *name, const char *alt, int ndim, const int64_t *shape) {
    char full[320];
    const char *cands[2] = {name, alt};
    for (int i = 0; i < 2; i++) {
        if (!cands[i]) continue;
        snprintf(full, sizeof full, "%s%s", m->prefix, cands[i]);
        if (attn_safetensors_find(m->st, full) >= 0)
            return attn_safetensors_get_f32_shape(m->st, full, out, &m->warena, ndim, shape);
    }
    snprintf(full, sizeof full, "%s%s", m->prefix, name);
    return attn_set_error(ATTN_E_INVALID, "vit: weight \"%s\" not found in model.safetensors", full);
}

void attn_vit_free(attn_vit *m) {
    if (!m) return;
    if (m->labels)
        for (int64_t i = 0; i < m->cfg.n_labels; i++) free(m->labels[i]);
    free(m->labels);
    free(m->layers);
    attn_arena_free(&m->warena);
    attn_safetensors_close(m->st);
    free(m);
}

int attn_vit_load(attn_vit **out, const char *model_dir) {
    if (!out || !model_dir) return attn_set_error(ATTN_E_INVALID, "vit_load: NULL argument");
    *out = NULL;
    attn_vit *m = (attn_vit *)calloc(1, sizeof *m);
    if (!m) return attn_set_error(ATTN_E_NOMEM, "vit_load: out of memory");
    attn_arena_init(&m->warena, 1 << 20);
    m->prefix = "";
    int rc = attn__vit_parse_config(&m->cfg, model_dir);
    char path[4096];
    if (rc == 0) {
        snprintf(path, sizeof path, "%s/model.safetensors", model_dir);
        rc = attn_safetensors_open(&m->st, path);
    }
    attn_vit_config *c = &m->cfg;
    if (rc == 0 && attn_safetensors_find(m->st, "vit.embeddings.cls_token") >= 0) m->prefix = "vit.";
    int64_t E = c->d_model, F = c->d_ff, C = c->channels;
    int64_t T0 = rc == 0 ? 1 + (c->image_h / c->patch_h) * (c->image_w / c->patch_w) : 0;
    {
        int64_t s3[3] = {1, 1, E}, sp[3] = {1, T0, E}, sw[4] = {E, C, c->patch_h, c->patch_w}, s1[1] = {E};
        if (rc == 0) rc = attn__vit_w(m, &m->cls, "embeddings.cls_token", NULL, 3, s3);
        if (rc == 0) rc = attn__vit_w(m, &m->pos, "embeddings.position_embeddings", NULL, 3, sp);
        if (rc == 0) rc = attn__vit_w(m, &m->patch_w, "embeddings.patch_embeddings.projection.weight", NULL, 4, sw);
        if (rc == 0) rc = attn__vit_w(m, &m->patch_b, "embeddings.patch_embeddings.projection.bias", NULL, 1, s1);
        if (rc == 0) rc = attn__vit_w(m, &m->ln_g, "layernorm.weight", NULL, 1, s1);
        if (rc == 0) rc = attn__vit_w(m, &m->ln_b, "layernorm.bias", NULL, 1, s1);
    }
    /* classifier (ViTForImageClassification): its rows give the label count */
    if (rc == 0 && attn_safetensors_find(m->st, "classifier.weight") >= 0) {
        attn_safetensors_info info;
        rc = attn_safetensors_info_at(&info, m->st, attn_safetensors_find(m->st, "classifier.weight"));
        if (rc == 0 && (info.ndim != 2 || info.shape[0] < 1 || info.shape[1] != E))
            rc = attn_set_error(ATTN_E_SHAPE, "vit: classifier.weight must be [n_labels, %lld]", (long long)E);
        if (rc == 0) {
            c->n_labels = info.shape[0];
            int64_t sc[2] = {c->n_labels, E}, sb[1] = {c->n_labels};
            rc = attn_safetensors_get_f32_shape(m->st, "classifier.weight", &m->cls_w, &m->warena, 2, sc);
            if (rc == 0) rc = attn_safetensors_get_f32_shape(m->st, "classifier.bias", &m->cls_b, &m->warena, 1, sb);
        }
    }
    if (rc == 0) rc = attn__vit_labels(m, model_dir);
    if (rc == 0) {
        m->layers = (attn_encoder_weights *)calloc((size_t)c->n_layers, sizeof *m->layers);
        if (!m->layers) rc = attn_set_error(ATTN_E_NOMEM, "vit_load: out of memory");
    }
    for (int64_t l = 0; rc == 0 && l < c->n_layers; l++) {
        attn_encoder_weights *w = &m->layers[l];
        char n1[160], n2[160];
        int64_t sEE[2] = {E, E}, sFE[2] = {F, E}, sEF[2] = {E, F}, sE[1] = {E}, sF[1] = {F};
#define W(field, legacy, v5, nd, shape)                                               \
    if (rc == 0) {                                                                    \
        snprintf(n1, sizeof n1, "encoder.layer.%lld.%s", (long long)l, legacy);      \
        snprintf(n2, sizeof n2, "layers.%lld.%s", (long long)l, v5);                 \
        rc = attn__vit_w(m, &w->field, n1, n2, nd, shape);                            \
    }
        W(attn.wq, "attention.attention.query.weight", "attention.q_proj.weight", 2, sEE)
        W(attn.wk, "attention.attention.key.weight", "attention.k_proj.weight", 2, sEE)
        W(attn.wv, "attention.attention.value.weight", "attention.v_proj.weight", 2, sEE)
        if (c->qkv_bias) {
            W(attn.bq, "attention.attention.query.bias", "attention.q_proj.bias", 1, sE)
            W(attn.bk, "attention.attention.key.bias", "attention.k_proj.bias", 1, sE)
            W(attn.bv, "attention.attention.value.bias", "attention.v_proj.bias", 1, sE)
        }
        W(attn.wo, "attention.output.dense.weight", "attention.o_proj.weight", 2, sEE)
        W(attn.bo, "attention.output.dense.bias", "attention.o_proj.bias", 1, sE)
        W(ln1_g, "layernorm_before.weight", "layernorm_before.weight", 1, sE)
        W(ln1_b, "layernorm_before.bias", "layernorm_before.bias", 1, sE)
        W(ff_w1, "intermediate.dense.weight", "mlp.fc1.weight", 2, sFE)
        W(ff_b1, "intermediate.dense.bias", "mlp.fc1.bias", 1, sF)
        W(ff_w2, "output.dense.weight", "mlp.fc2.weight", 2, sEF)
        W(ff_b2, "output.dense.bias", "mlp.fc2.bias", 1, sE)
        W(ln2_g, "layernorm_after.weight", "layernorm_after.weight", 1, sE)
        W(ln2_b, "layernorm_after.bias", "layernorm_after.bias", 1, sE)
#undef W
    }
    if (rc < 0) {
        attn_vit_free(m);
        return rc;
    }
    m->lcfg = (attn_layer_config){.attn = {.d_model = E, .n_heads = c->n_heads}, .d_ff = F, .act = c->act, .norm_first = 1 /* ViT is pre-LN */, .eps = c->eps};
    *out = m;
    return ATTN_OK;
}

const attn_vit_config *attn_vit_get_config(const attn_vit *m) { return m ? &m->cfg : NULL; }

const char *attn_vit_label(const attn_vit *m, int64_t i) {
    if (!m || i < 0 || i >= m->cfg.n_labels || !m->labels) return NULL;
    return m->labels[i];
}

int64_t attn_vit_tokens(const attn_vit *m, int64_t height, int64_t width) {
    if (!m || height < m->cfg.patch_h || width < m->cfg.patch_w) return 0;
    return 1 + (height / m->cfg.patch_h) * (width / m->cfg.patch_w);
}

/* ---------------------------------------------------------------- preprocessing */

int attn_vit_preprocess(const attn_vit *m, float *pixels, int64_t cap, int64_t *height, int64_t *width,
                        const attn_image *img, int keep_size) {
    if (!m || !pixels || !height || !width || !img || !img->data)
        return attn_set_error(ATTN_E_INVALID, "vit_preprocess: NULL argument");
    if (img->width < 1 || img->height < 1 || (img->channels != 1 && img->channels != 3))
        return attn_set_error(ATTN_E_INVALID, "vit_preprocess: the image must have pixels and 1 or 3 channels");
    const attn_vit_config *c = &m->cfg;
    int64_t C = c->channels;
    int64_t H = img->height, W = img->width;
    if (c->do_resize && !keep_size) {
        H = c->resize_h;
        W = c->resize_w;
    }
    if (C * H * W > cap)
        return attn_set_error(ATTN_E_RANGE, "vit_preprocess: the output needs %lld floats, the buffer holds %lld",
                              (long long)(C * H * W), (long long)cap);
    attn_image conv = {0}, sized = {0};
    const attn_image *src = img;
    if (img->channels != C) {
        ATTN_TRY(attn_image_convert(&conv, img, (int)C));
        src = &conv;
    }
    if (H != src->height || W != src->width) {
        int rc = attn_image_resize(&sized, src, W, H);
        attn_image_free(&conv);
        ATTN_TRY(rc);
        src = &sized;
    }
    float scale = c->do_rescale ? c->rescale_factor : 1.0f;
    for (int64_t ch = 0; ch < C; ch++) {
        float mean = c->do_normalize ? c->mean[ch] : 0.0f, sd = c->do_normalize ? c->std[ch] : 1.0f;
        float *dst = pixels + ch * H * W;
        for (int64_t i = 0; i < H * W; i++) {
            float v = (float)src->data[i * C + ch] * scale;
            dst[i] = c->do_normalize ? (v - mean) / sd : v;
        }
    }
    *height = H;
    *width = W;
    attn_image_free(&conv);
    attn_image_free(&sized);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- forward */

/* Keys' cubic convolution kernel with a = -0.75 (the value PyTorch's bicubic uses). */
static void attn__cubic_weights(double t, double w[4]) {
    const double a = -0.75;
    double x;
    x = t + 1; /* 1 <= x < 2 */
    w[0] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    x = t; /* 0 <= x < 1 */
    w[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 1 - t;
    w[2] = ((a + 2) * x - (a + 3)) * x * x + 1;
    x = 2 - t;
    w[3] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

/* out [gh * gw, E] = bicubic resampling of the grid in [h0 * w0, E] (row-major positions),
 * align_corners=False: source coordinate (i + 0.5) * in / out - 0.5, taps clamped. */
static void attn__bicubic_grid(float *out, const float *in, int64_t h0, int64_t w0, int64_t gh, int64_t gw, int64_t E) {
    for (int64_t y = 0; y < gh; y++) {
        double sy = ((double)y + 0.5) * ((double)h0 / (double)gh) - 0.5;
        double fy = floor(sy), wy[4];
        attn__cubic_weights(sy - fy, wy);
        for (int64_t x = 0; x < gw; x++) {
            double sx = ((double)x + 0.5) * ((double)w0 / (double)gw) - 0.5;
            double fx = floor(sx), wx[4];
            attn__cubic_weights(sx - fx, wx);
            float *dst = out + (y * gw + x) * E;
            for (int64_t e = 0; e < E; e++) {
                double acc = 0;
                for (int i = 0; i < 4; i++) {
                    int64_t yy = (int64_t)fy - 1 + i;
                    yy = yy < 0 ? 0 : yy >= h0 ? h0 - 1 : yy;
                    double row = 0;
                    for (int k = 0; k < 4; k++) {
                        int64_t xx = (int64_t)fx - 1 + k;
                        xx = xx < 0 ? 0 : xx >= w0 ? w0 - 1 : xx;
                        row += wx[k] * in[(yy * w0 + xx) * E + e];
                    }
                    acc += wy[i] * row;
                }
                dst[e] = (float)acc;
            }
        }
    }
}

int attn_vit_forward(const attn_vit *m, float *logits, attn_vit_extra *extra, const float *pixels, int64_t B,
                     int64_t height, int64_t width, attn_arena *arena) {
    if (!m || !pixels || !arena) return attn_set_error(ATTN_E_INVALID, "vit_forward: NULL argument");
    if (B < 1) return attn_set_error(ATTN_E_INVALID, "vit_forward: batch size %lld < 1", (long long)B);
    const attn_vit_config *c = &m->cfg;
    int64_t Ph = c->patch_h, Pw = c->patch_w, C = c->channels, E = c->d_model, H = c->n_heads;
    if (height < Ph || width < Pw)
        return attn_set_error(ATTN_E_RANGE, "vit_forward: image of %lld x %lld pixels is smaller than a %lld x %lld patch",
                              (long long)width, (long long)height, (long long)Pw, (long long)Ph);
    if (height > 16384 || width > 16384)
        return attn_set_error(ATTN_E_RANGE, "vit_forward: image of %lld x %lld pixels is larger than 16384 per side",
                              (long long)width, (long long)height);
    int64_t gh = height / Ph, gw = width / Pw, N = gh * gw, T = N + 1, K = C * Ph * Pw;
    if (N > 65536) return attn_set_error(ATTN_E_RANGE, "vit_forward: %lld patches (more than 65536)", (long long)N);
    int64_t gh0 = c->image_h / Ph, gw0 = c->image_w / Pw;
    attn_arena_mark mk = attn_arena_get_mark(arena);
    float *cols = attn_arena_alloc_f32_uninit(arena, (size_t)(B * N * K));
    float *pe = attn_arena_alloc_f32_uninit(arena, (size_t)(B * N * E));
    float *x = attn_arena_alloc_f32_uninit(arena, (size_t)(B * T * E));
    float *y = attn_arena_alloc_f32_uninit(arena, (size_t)(B * T * E));
    float *posbuf = NULL;
    if (!cols || !pe || !x || !y) {
        attn_arena_release(arena, mk);
        return ATTN_E_NOMEM;
    }
    /* im2col: row (b, py, px) holds the patch's pixels in (channel, row, column) order, the
     * order of the convolution weight [E, C, Ph, Pw] */
    for (int64_t b = 0; b < B; b++)
        for (int64_t py = 0; py < gh; py++)
            for (int64_t px = 0; px < gw; px++) {
                float *dst = cols + ((b * gh + py) * gw + px) * K;
                for (int64_t ch = 0; ch < C; ch++)
                    for (int64_t ky = 0; ky < Ph; ky++) {
                        const float *src = pixels + ((b * C + ch) * height + py * Ph + ky) * width + px * Pw;
                        memcpy(dst + (ch * Ph + ky) * Pw, src, sizeof(float) * (size_t)Pw);
                    }
            }
    attn_tensor tcols = attn_tensor_f32_2d(cols, B * N, K), tpe = attn_tensor_f32_2d(pe, B * N, E);
    attn_tensor tw = attn_tensor_f32_2d((float *)m->patch_w.data, E, K);
    int rc = attn_linear(&tpe, &tcols, &tw, &m->patch_b);
    /* position embeddings for this grid */
    const float *pos = (const float *)m->pos.data;
    if (rc == 0 && (gh != gh0 || gw != gw0)) {
        posbuf = attn_arena_alloc_f32_uninit(arena, (size_t)(T * E));
        if (!posbuf) rc = ATTN_E_NOMEM;
        if (rc == 0) {
            memcpy(posbuf, pos, sizeof(float) * (size_t)E); /* CLS position unchanged */
            attn__bicubic_grid(posbuf + E, pos + E, gh0, gw0, gh, gw, E);
            pos = posbuf;
        }
    }
    if (rc == 0) {
        const float *cls = (const float *)m->cls.data;
        for (int64_t b = 0; b < B; b++) {
            float *xb = x + b * T * E;
            for (int64_t e = 0; e < E; e++) xb[e] = cls[e] + pos[e];
            for (int64_t n = 0; n < N; n++) {
                const float *p = pe + (b * N + n) * E, *q = pos + (1 + n) * E;
                float *d = xb + (1 + n) * E;
                for (int64_t e = 0; e < E; e++) d[e] = p[e] + q[e];
            }
        }
    }
    if (rc == 0 && extra && extra->hidden_states) memcpy(extra->hidden_states, x, sizeof(float) * (size_t)(B * T * E));
    attn_tensor tx = attn_tensor_f32_3d(x, B, T, E), ty = attn_tensor_f32_3d(y, B, T, E);
    for (int64_t l = 0; l < c->n_layers && rc == 0; l++) {
        attn_tensor wt, *wp = NULL;
        if (extra && extra->attentions) {
            wt = attn_tensor_f32_4d(extra->attentions + l * B * H * T * T, B, H, T, T);
            wp = &wt;
        }
        rc = attn_encoder_layer(&ty, wp, &tx, &m->lcfg, &m->layers[l], NULL, arena);
        attn_tensor t = tx;
        tx = ty;
        ty = t;
        if (rc == 0 && extra && extra->hidden_states)
            memcpy(extra->hidden_states + (l + 1) * B * T * E, tx.data, sizeof(float) * (size_t)(B * T * E));
    }
    if (rc == 0 && extra && extra->last_hidden) {
        attn_tensor tl = attn_tensor_f32_3d(extra->last_hidden, B, T, E);
        rc = attn_layernorm(&tl, &tx, &m->ln_g, &m->ln_b, c->eps);
    }
    if (rc == 0 && logits) {
        if (c->n_labels < 1) {
            rc = attn_set_error(ATTN_E_INVALID, "vit_forward: the model has no classifier (a ViTModel checkpoint); pass logits NULL");
        } else {
            /* final LayerNorm of the CLS rows only, then the classifier */
            float *cls = (float *)ty.data; /* free buffer: B * E <= B * T * E */
            for (int64_t b = 0; b < B; b++) memcpy(cls + b * E, (float *)tx.data + b * T * E, sizeof(float) * (size_t)E);
            attn_tensor tc = attn_tensor_f32_2d(cls, B, E), tlg = attn_tensor_f32_2d(logits, B, c->n_labels);
            rc = attn_layernorm(&tc, &tc, &m->ln_g, &m->ln_b, c->eps);
            if (rc == 0) rc = attn_linear(&tlg, &tc, &m->cls_w, &m->cls_b);
        }
    }
    attn_arena_release(arena, mk);
    return rc;
}
