/* ViT trainer checkpoints (include/attn_train.h): a Hugging Face ViTForImageClassification
 * directory (config.json, model.safetensors, preprocessor_config.json — what attn_vit_load and
 * transformers read) plus optimizer.safetensors, trainer_state.json and curve.png. */
#include "attn_io.h"
#include "attn_safetensors.h"
#include "attn_train.h"
#include "core/internal.h"
#include "formats/hf_config.h"
#include "train/train_internal.h"

#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>

void attn_vit_train_labels_free(char **labels, int64_t n) {
    if (!labels) return;
    for (int64_t i = 0; i < n; i++) free(labels[i]);
    free(labels);
}

void attn_vit_train_state_free(attn_vit_train_state *s) {
    if (!s) return;
    attn_vit_train_labels_free(s->labels, s->n_labels);
    free(s->history);
    s->labels = NULL;
    s->history = NULL;
}

/* the shortest decimal that reads back as f (0.286f is written 0.286, not 0.28600001335144043) */
static double attn__f32_json(float f) {
    char b[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(b, sizeof b, "%.*g", p, (double)f);
        if ((float)strtod(b, NULL) == f) return strtod(b, NULL);
    }
    return (double)f;
}

static const char *attn__act_name(attn_activation a) {
    return a == ATTN_ACT_GELU_TANH ? "gelu_pytorch_tanh" : a == ATTN_ACT_RELU ? "relu" : "gelu";
}

/* ---------------------------------------------------------------- save */

static char *attn__config_json(const attn_vit_trainer *t, const attn_vit_train_state *s) {
    const attn_vit_train_config *c = &t->cfg;
    cJSON *r = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(r, "architectures");
    cJSON_AddItemToArray(a, cJSON_CreateString("ViTForImageClassification"));
    cJSON_AddNumberToObject(r, "attention_probs_dropout_prob", 0.0);
    cJSON_AddStringToObject(r, "dtype", "float32");
    cJSON_AddNumberToObject(r, "encoder_stride", (double)c->patch);
    cJSON_AddStringToObject(r, "hidden_act", attn__act_name(c->act));
    cJSON_AddNumberToObject(r, "hidden_dropout_prob", 0.0);
    cJSON_AddNumberToObject(r, "hidden_size", (double)c->d_model);
    cJSON *id = cJSON_AddObjectToObject(r, "id2label");
    cJSON_AddNumberToObject(r, "image_size", (double)c->image_size);
    cJSON_AddNumberToObject(r, "initializer_range", 0.02);
    cJSON_AddNumberToObject(r, "intermediate_size", (double)c->d_ff);
    cJSON *l2 = cJSON_AddObjectToObject(r, "label2id");
    cJSON_AddNumberToObject(r, "layer_norm_eps", attn__f32_json(c->eps));
    cJSON_AddStringToObject(r, "model_type", "vit");
    cJSON_AddNumberToObject(r, "num_attention_heads", (double)c->n_heads);
    cJSON_AddNumberToObject(r, "num_channels", (double)c->channels);
    cJSON_AddNumberToObject(r, "num_hidden_layers", (double)c->n_layers);
    cJSON_AddNumberToObject(r, "patch_size", (double)c->patch);
    cJSON_AddStringToObject(r, "problem_type", "single_label_classification");
    cJSON_AddTrueToObject(r, "qkv_bias");
    for (int64_t i = 0; i < c->n_labels; i++) {
        char k[32];
        snprintf(k, sizeof k, "%lld", (long long)i);
        cJSON_AddStringToObject(id, k, s->labels[i]);
        if (!cJSON_GetObjectItemCaseSensitive(l2, s->labels[i])) cJSON_AddNumberToObject(l2, s->labels[i], (double)i);
    }
    char *js = cJSON_Print(r);
    cJSON_Delete(r);
    return js;
}

static char *attn__preproc_json(const attn_vit_trainer *t, const attn_vit_train_state *s) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddTrueToObject(r, "do_normalize");
    cJSON_AddTrueToObject(r, "do_rescale");
    cJSON_AddTrueToObject(r, "do_resize");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "image_mean"), cJSON_CreateNumber(attn__f32_json(s->mean)));
    cJSON_AddStringToObject(r, "image_processor_type", "ViTImageProcessor");
    cJSON_AddItemToArray(cJSON_AddArrayToObject(r, "image_std"), cJSON_CreateNumber(attn__f32_json(s->std)));
    cJSON_AddNumberToObject(r, "resample", 2);
    cJSON_AddNumberToObject(r, "rescale_factor", 1.0 / 255.0);
    cJSON *sz = cJSON_AddObjectToObject(r, "size");
    cJSON_AddNumberToObject(sz, "height", (double)t->cfg.image_size);
    cJSON_AddNumberToObject(sz, "width", (double)t->cfg.image_size);
    char *js = cJSON_Print(r);
    cJSON_Delete(r);
    return js;
}

/* a double as JSON: NaN / inf as null */
static void attn__num(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static char *attn__state_json(const attn_vit_train_state *s) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "epoch", (double)s->epoch);
    cJSON_AddNumberToObject(r, "epochs", (double)s->epochs);
    cJSON_AddNumberToObject(r, "steps_per_epoch", (double)s->steps_per_epoch);
    cJSON_AddNumberToObject(r, "warmup_steps", (double)s->warmup_steps);
    cJSON_AddNumberToObject(r, "batch", (double)s->batch);
    char seed[32];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->seed);
    cJSON_AddStringToObject(r, "seed", seed); /* a string: JSON numbers lose bits above 2^53 */
    char buf[40];
    snprintf(buf, sizeof buf, "%.17g", s->lr);
    cJSON_AddStringToObject(r, "lr", buf);
    snprintf(buf, sizeof buf, "%.17g", s->weight_decay);
    cJSON_AddStringToObject(r, "weight_decay", buf);
    snprintf(buf, sizeof buf, "%.17g", s->max_norm);
    cJSON_AddStringToObject(r, "max_norm", buf);
    snprintf(buf, sizeof buf, "%.17g", s->label_smoothing);
    cJSON_AddStringToObject(r, "label_smoothing", buf);
    cJSON_AddNumberToObject(r, "pad", s->pad);
    cJSON_AddBoolToObject(r, "flip", s->flip);
    if (s->train_images > 0) cJSON_AddNumberToObject(r, "train_images", (double)s->train_images);
    if (s->train_hash) {
        snprintf(buf, sizeof buf, "%016llx", (unsigned long long)s->train_hash);
        cJSON_AddStringToObject(r, "train_data_fnv1a64", buf);
    }
    cJSON *h = cJSON_AddArrayToObject(r, "history");
    for (int64_t i = 0; i < s->epoch && s->history; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "epoch", (double)(i + 1));
        attn__num(e, "train_loss", s->history[i].train_loss);
        attn__num(e, "eval_loss", s->history[i].eval_loss);
        attn__num(e, "eval_accuracy", s->history[i].eval_accuracy);
        attn__num(e, "seconds", s->history[i].seconds);
        cJSON_AddItemToArray(h, e);
    }
    char *js = cJSON_Print(r);
    cJSON_Delete(r);
    return js;
}

enum { CK_CONFIG, CK_MODEL, CK_PRE, CK_OPT, CK_STATE, CK_CURVE, CK_N };
static const char *const attn__ck_files[CK_N] = {"config.json", "model.safetensors", "preprocessor_config.json",
                                                 "optimizer.safetensors", "trainer_state.json", "curve.png"};

static int attn__write_tensors(FILE *f, const attn_vit_trainer *t, int which, const char *step) {
    const int n = which == 0 ? t->np : 2 * t->np;
    const char **names = (const char **)calloc((size_t)n, sizeof(char *));
    char *nbuf = (char *)calloc((size_t)n, 128);
    attn_tensor *ts = (attn_tensor *)calloc((size_t)n, sizeof(attn_tensor));
    const attn_tensor **tp = (const attn_tensor **)calloc((size_t)n, sizeof(attn_tensor *));
    int rc = names && nbuf && ts && tp ? ATTN_OK : attn_set_error(ATTN_E_NOMEM, "vit train: out of memory");
    for (int k = 0; k < n && rc == 0; k++) {
        const int i = k % t->np, w = which == 0 ? 0 : 2 + k / t->np;
        snprintf(nbuf + 128 * k, 128, "%s%s", which == 0 ? "" : w == 2 ? "exp_avg." : "exp_avg_sq.", t->par[i].name);
        names[k] = nbuf + 128 * k;
        rc = attn_vit_trainer_tensor(&ts[k], t, i, w);
        tp[k] = &ts[k];
    }
    const char *mk[1] = {which == 0 ? "format" : "step"}, *mv[1] = {which == 0 ? "pt" : step};
    if (rc == 0) rc = attn_safetensors_write(f, n, names, tp, 1, mk, mv);
    free(names), free(nbuf), free(ts), free(tp);
    return rc;
}

int attn_vit_trainer_save(const attn_vit_trainer *t, const char *dir, const attn_vit_train_state *s) {
    if (!t || !dir || !s || !s->labels || s->n_labels != t->cfg.n_labels)
        return attn_set_error(ATTN_E_INVALID, "vit train save: NULL argument or labels that do not match the model");
    attn_out *o[CK_N] = {0};
    char path[4096], step[32];
    snprintf(step, sizeof step, "%lld", (long long)t->step);
    int rc = ATTN_OK;
    const int nfiles = s->epoch > 0 && s->history ? CK_N : CK_N - 1;
    for (int k = 0; k < nfiles && rc == 0; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, attn__ck_files[k]);
        rc = attn_out_open(&o[k], path, k == CK_MODEL || k == CK_OPT || k == CK_CURVE ? ATTN_OUT_BINARY : ATTN_OUT_TEXT);
    }
    for (int k = 0; k < nfiles && rc == 0; k++) {
        FILE *f = attn_out_file(o[k]);
        char *js = NULL;
        switch (k) {
        case CK_MODEL: rc = attn__write_tensors(f, t, 0, NULL); break;
        case CK_OPT: rc = attn__write_tensors(f, t, 1, step); break;
        case CK_CURVE: rc = attn_train_curve_png(f, s->history, s->epoch); break;
        default:
            js = k == CK_CONFIG ? attn__config_json(t, s) : k == CK_PRE ? attn__preproc_json(t, s) : attn__state_json(s);
            if (!js) rc = attn_set_error(ATTN_E_NOMEM, "vit train save: out of memory");
            else if (fputs(js, f) < 0 || fputc('\n', f) == EOF) rc = ATTN_E_IO;
            free(js);
        }
        /* everything reaches the disk (or fails) before any target is replaced */
        if (rc == 0 && (fflush(f) != 0 || ferror(f))) rc = ATTN_E_IO;
        if (rc == ATTN_E_IO)
            rc = attn_set_error(ATTN_E_IO, "vit train save: %s/%s: write failed (the previous checkpoint is kept)", dir,
                                attn__ck_files[k]);
    }
    for (int k = 0; k < nfiles; k++) {
        if (!o[k]) continue;
        if (rc < 0) attn_out_abort(o[k]);
        else rc = attn_out_commit(o[k]);
        o[k] = NULL;
    }
    return rc;
}

/* ---------------------------------------------------------------- load */

int attn_vit_train_config_load(attn_vit_train_config *c, char ***labels, const char *dir, const char *file) {
    if (!c || !dir) return attn_set_error(ATTN_E_INVALID, "vit train: NULL argument");
    if (labels) *labels = NULL;
    attn__hf_json j;
    int rc = attn__hf_json_load(&j, "vit", dir, file ? file : "config.json", 0, NULL);
    memset(c, 0, sizeof *c);
    c->channels = 3, c->eps = 1e-12f, c->act = ATTN_ACT_GELU;
    const cJSON *mt = rc == 0 ? cJSON_GetObjectItemCaseSensitive(j.root, "model_type") : NULL;
    if (mt && !(cJSON_IsString(mt) && !strcmp(mt->valuestring, "vit")))
        rc = attn_set_error(ATTN_E_UNSUPPORTED, "vit: %s: model_type is not \"vit\"", j.path);
    int64_t nl = 0;
    if (rc == 0) rc = attn__hf_int(&j, NULL, "image_size", &c->image_size, 1, 4096, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "patch_size", &c->patch, 1, 4096, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_channels", &c->channels, 1, 3, 0);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "hidden_size", &c->d_model, 1, 65536, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_hidden_layers", &c->n_layers, 1, 1024, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_attention_heads", &c->n_heads, 1, 1024, 1);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "intermediate_size", &c->d_ff, 1, 1 << 20, 1);
    if (rc == 0) rc = attn__hf_float(&j, NULL, "layer_norm_eps", &c->eps, 0, 1);
    if (rc == 0) rc = attn__hf_activation(&j, NULL, "hidden_act", &c->act);
    if (rc == 0) rc = attn__hf_int(&j, NULL, "num_labels", &nl, 2, 1 << 20, 0);
    const cJSON *map = rc == 0 ? cJSON_GetObjectItemCaseSensitive(j.root, "id2label") : NULL;
    if (map && !cJSON_IsObject(map)) rc = attn_set_error(ATTN_E_FORMAT, "vit: %s: \"id2label\" must be an object", j.path);
    if (rc == 0 && map) nl = cJSON_GetArraySize(map);
    c->n_labels = nl ? nl : 2;
    if (rc == 0 && labels) {
        *labels = (char **)calloc((size_t)c->n_labels, sizeof(char *));
        if (!*labels) rc = attn_set_error(ATTN_E_NOMEM, "vit: out of memory");
        for (int64_t i = 0; rc == 0 && i < c->n_labels; i++) {
            char k[32];
            snprintf(k, sizeof k, "%lld", (long long)i);
            const cJSON *it = map ? cJSON_GetObjectItemCaseSensitive(map, k) : NULL;
            if (map && !cJSON_IsString(it))
                rc = attn_set_error(ATTN_E_FORMAT, "vit: %s: \"id2label\" has no string label for class %s", j.path, k);
            (*labels)[i] = rc == 0 ? strdup(it ? it->valuestring : (snprintf(k, sizeof k, "LABEL_%lld", (long long)i), k)) : NULL;
            if (rc == 0 && !(*labels)[i]) rc = attn_set_error(ATTN_E_NOMEM, "vit: out of memory");
        }
    }
    if (rc == 0 && attn_vit_train_config_check(c) < 0) rc = attn_set_error(ATTN_E_FORMAT, "%s: %s", j.path, attn_last_error());
    attn__hf_json_free(&j);
    if (rc < 0 && labels) {
        attn_vit_train_labels_free(*labels, c->n_labels);
        *labels = NULL;
    }
    return rc;
}

static int attn__read_tensors(attn_vit_trainer *t, const char *dir, int which) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, which == 0 ? "model.safetensors" : "optimizer.safetensors");
    struct stat sb;
    if (which == 1 && stat(path, &sb) != 0 && errno == ENOENT) /* a released model (models/vit-fashion-mnist, say) */
        return attn_set_error(ATTN_E_IO, "vit train: %s has no optimizer.safetensors (the AdamW state): it holds a model, not a "
                                         "run to resume; train a new one with -o (--config %s/config.json for its architecture)",
                              dir, dir);
    attn_safetensors *st = NULL;
    ATTN_TRY(attn_safetensors_open(&st, path));
    attn_arena ar;
    attn_arena_init(&ar, 0);
    int rc = ATTN_OK;
    for (int k = 0; k < (which == 0 ? 1 : 2) && rc == 0; k++)
        for (int i = 0; i < t->np && rc == 0; i++) {
            char nm[160];
            snprintf(nm, sizeof nm, "%s%s", which == 0 ? "" : k == 0 ? "exp_avg." : "exp_avg_sq.", t->par[i].name);
            attn_tensor src, dst;
            attn_vit_trainer_tensor(&dst, t, i, which == 0 ? 0 : 2 + k);
            rc = attn_safetensors_get_f32_shape(st, nm, &src, &ar, dst.ndim, dst.shape);
            if (rc == 0) memcpy(dst.data, src.data, sizeof(float) * (size_t)attn_tensor_numel(&dst));
            attn_arena_reset(&ar);
        }
    if (rc == 0 && which == 1) {
        const char *s = attn_safetensors_metadata(st, "step");
        char *end = NULL;
        long long v = s ? strtoll(s, &end, 10) : -1;
        if (!s || *end || v < 0) rc = attn_set_error(ATTN_E_FORMAT, "vit train: %s lacks a \"step\" in its metadata", path);
        else t->step = v;
    }
    if (rc < 0 && !strstr(attn_last_error(), path)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        rc = attn_set_error(rc, "%s: %s", path, msg);
    }
    attn_arena_free(&ar);
    attn_safetensors_close(st);
    return rc;
}

static int attn__state_number(const attn__hf_json *j, const char *key, double *v, int as_string) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(j->root, key);
    char *end = NULL;
    if (as_string && cJSON_IsString(it)) *v = strtod(it->valuestring, &end);
    else if (!as_string && cJSON_IsNumber(it)) *v = it->valuedouble;
    if (!it || (as_string && (!cJSON_IsString(it) || !end || *end)) || (!as_string && !cJSON_IsNumber(it)))
        return attn_set_error(ATTN_E_FORMAT, "vit train: %s: \"%s\" is missing or malformed", j->path, key);
    return ATTN_OK;
}

static int attn__read_state(attn_vit_train_state *s, const char *dir) {
    attn__hf_json j;
    int rc = attn__hf_json_load(&j, "vit train", dir, "trainer_state.json", 0, " (not a directory written by attn train)");
    double ep = 0, eps = 0, spe = 0, wu = 0, b = 0, pad = 0;
    if (rc == 0) rc = attn__state_number(&j, "epoch", &ep, 0);
    if (rc == 0) rc = attn__state_number(&j, "epochs", &eps, 0);
    if (rc == 0) rc = attn__state_number(&j, "steps_per_epoch", &spe, 0);
    if (rc == 0) rc = attn__state_number(&j, "warmup_steps", &wu, 0);
    if (rc == 0) rc = attn__state_number(&j, "batch", &b, 0);
    if (rc == 0) rc = attn__state_number(&j, "pad", &pad, 0);
    if (rc == 0) rc = attn__state_number(&j, "lr", &s->lr, 1);
    if (rc == 0) rc = attn__state_number(&j, "weight_decay", &s->weight_decay, 1);
    if (rc == 0) rc = attn__state_number(&j, "max_norm", &s->max_norm, 1);
    if (rc == 0) rc = attn__state_number(&j, "label_smoothing", &s->label_smoothing, 1);
    const cJSON *sd = rc == 0 ? cJSON_GetObjectItemCaseSensitive(j.root, "seed") : NULL;
    const cJSON *fl = rc == 0 ? cJSON_GetObjectItemCaseSensitive(j.root, "flip") : NULL;
    const cJSON *h = rc == 0 ? cJSON_GetObjectItemCaseSensitive(j.root, "history") : NULL;
    if (rc == 0 && (!cJSON_IsString(sd) || !cJSON_IsBool(fl) || !cJSON_IsArray(h) || ep < 0 || ep > 1e6 ||
                    cJSON_GetArraySize(h) != (int)ep || b < 1 || spe < 1))
        rc = attn_set_error(ATTN_E_FORMAT, "vit train: %s: seed, flip, history or epoch malformed", j.path);
    if (rc == 0) {
        s->epoch = (int64_t)ep, s->epochs = (int64_t)eps, s->steps_per_epoch = (int64_t)spe, s->warmup_steps = (int64_t)wu;
        s->batch = (int64_t)b, s->pad = (int)pad, s->flip = cJSON_IsTrue(fl);
        s->seed = strtoull(sd->valuestring, NULL, 10);
        /* optional (absent in checkpoints written before they were recorded: 0, unknown) */
        const cJSON *ni = cJSON_GetObjectItemCaseSensitive(j.root, "train_images");
        const cJSON *nh = cJSON_GetObjectItemCaseSensitive(j.root, "train_data_fnv1a64");
        s->train_images = cJSON_IsNumber(ni) && ni->valuedouble >= 1 && ni->valuedouble < 9e15 ? (int64_t)ni->valuedouble : 0;
        s->train_hash = cJSON_IsString(nh) ? strtoull(nh->valuestring, NULL, 16) : 0;
        s->history = (attn_train_epoch *)calloc((size_t)(s->epoch + 1), sizeof *s->history);
        if (!s->history) rc = attn_set_error(ATTN_E_NOMEM, "vit train: out of memory");
        for (int64_t i = 0; rc == 0 && i < s->epoch; i++) {
            const cJSON *e = cJSON_GetArrayItem(h, (int)i);
            const char *keys[4] = {"train_loss", "eval_loss", "eval_accuracy", "seconds"};
            double *dst[4] = {&s->history[i].train_loss, &s->history[i].eval_loss, &s->history[i].eval_accuracy,
                              &s->history[i].seconds};
            for (int k = 0; k < 4; k++) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, keys[k]);
                *dst[k] = cJSON_IsNumber(v) ? v->valuedouble : NAN;
            }
        }
    }
    attn__hf_json_free(&j);
    return rc;
}

int attn_vit_trainer_load(attn_vit_trainer *t, const char *dir, attn_vit_train_state *s) {
    if (!t || !dir) return attn_set_error(ATTN_E_INVALID, "vit train load: NULL argument");
    ATTN_TRY(attn__read_tensors(t, dir, 0));
    if (!s) return ATTN_OK;
    ATTN_TRY(attn__read_tensors(t, dir, 1));
    attn_vit_train_config c;
    char **labels = NULL;
    ATTN_TRY(attn_vit_train_config_load(&c, &labels, dir, NULL));
    s->labels = labels, s->n_labels = c.n_labels;
    attn__hf_json j;
    int rc = attn__hf_json_load(&j, "vit train", dir, "preprocessor_config.json", 0, NULL);
    float mean = NAN, sd = NAN;
    const cJSON *m = rc == 0 ? cJSON_GetObjectItemCaseSensitive(j.root, "image_mean") : NULL;
    const cJSON *d = rc == 0 ? cJSON_GetObjectItemCaseSensitive(j.root, "image_std") : NULL;
    if (cJSON_IsArray(m) && cJSON_IsNumber(cJSON_GetArrayItem(m, 0))) mean = (float)cJSON_GetArrayItem(m, 0)->valuedouble;
    if (cJSON_IsArray(d) && cJSON_IsNumber(cJSON_GetArrayItem(d, 0))) sd = (float)cJSON_GetArrayItem(d, 0)->valuedouble;
    if (rc == 0 && !(isfinite(mean) && sd > 0 && isfinite(sd)))
        rc = attn_set_error(ATTN_E_FORMAT, "vit train: %s: image_mean / image_std must be [number]", j.path);
    attn__hf_json_free(&j);
    s->mean = mean, s->std = sd;
    if (rc == 0) rc = attn__read_state(s, dir);
    return rc;
}
