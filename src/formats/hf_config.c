/* Hugging Face model-directory JSON files (see formats/hf_config.h). */
#include "formats/hf_config.h"
#include "core/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* "who: " or "" */
#define WHO(c) ((c)->who ? (c)->who : ""), ((c)->who ? ": " : "")

cJSON *attn__json_parse(const char *json, size_t len, size_t *err_off) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    if (!root && err_off) *err_off = (end && end >= json && end <= json + len) ? (size_t)(end - json) : 0;
    return root;
}

int attn__hf_json_load(attn__hf_json *c, const char *who, const char *dir, const char *file, int flags, const char *hint) {
    memset(c, 0, sizeof *c);
    c->who = who;
    c->file = file;
    if ((size_t)snprintf(c->path, sizeof c->path, "%s/%s", dir, file) >= sizeof c->path)
        return attn_set_error(ATTN_E_INVALID, "%s%sthe path %s/%s is too long", WHO(c), dir, file);
    struct stat st;
    if (stat(c->path, &st) != 0) {
        int e = errno;
        if ((flags & ATTN__HF_OPTIONAL) && e == ENOENT) return ATTN_OK; /* absent is fine; unreadable is an error */
        if (e == ENOTDIR) /* a file given where the model's directory belongs (a .gguf to embed) */
            return attn_set_error(ATTN_E_INVALID, "%s%s%s is not a directory: the model is a directory holding %s", WHO(c), dir, file);
        return attn_set_error(ATTN_E_IO, "%s%scannot read %s: %s%s", WHO(c), c->path, strerror(e),
                              e == ENOENT && hint ? hint : "");
    }
    char *txt = NULL;
    size_t len = 0;
    int rc = attn__read_file(c->path, ATTN__HF_JSON_MAX, ATTN_E_RANGE, &txt, &len);
    if (rc < 0) return c->who ? attn__error_prefix(rc, c->who) : rc;
    size_t off = 0;
    c->root = attn__json_parse(txt, len, &off);
    free(txt);
    if (!c->root) return attn_set_error(ATTN_E_FORMAT, "%s%s%s is not valid JSON (syntax error near byte %zu)", WHO(c), c->path, off);
    if (!(flags & ATTN__HF_ANY) && !cJSON_IsObject(c->root)) {
        attn__hf_json_free(c);
        return attn_set_error(ATTN_E_FORMAT, "%s%s%s is not a JSON object", WHO(c), c->path);
    }
    return ATTN_OK;
}

void attn__hf_json_free(attn__hf_json *c) {
    cJSON_Delete(c->root);
    c->root = NULL;
}

static const cJSON *attn__hf_get(const attn__hf_json *c, const cJSON *o, const char *key) {
    return cJSON_GetObjectItemCaseSensitive(o ? o : c->root, key);
}

int attn__hf_int_value(const attn__hf_json *c, const cJSON *it, const char *key, int64_t *v, int64_t lo, int64_t hi) {
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < (double)lo ||
        it->valuedouble > (double)hi)
        return attn_set_error(ATTN_E_FORMAT, "%s%s%s \"%s\" must be an integer in [%lld, %lld]", WHO(c), c->file, key,
                              (long long)lo, (long long)hi);
    *v = (int64_t)it->valuedouble;
    return ATTN_OK;
}

int attn__hf_int(const attn__hf_json *c, const cJSON *o, const char *key, int64_t *v, int64_t lo, int64_t hi, int required) {
    const cJSON *it = attn__hf_get(c, o, key);
    if (!it) return required ? attn_set_error(ATTN_E_FORMAT, "%s%s%s lacks \"%s\"", WHO(c), c->file, key) : ATTN_OK;
    return attn__hf_int_value(c, it, key, v, lo, hi);
}

int attn__hf_float(const attn__hf_json *c, const cJSON *o, const char *key, float *v, double lo, double hi) {
    const cJSON *it = attn__hf_get(c, o, key);
    if (!it || cJSON_IsNull(it)) return ATTN_OK;
    if (!cJSON_IsNumber(it) || !(it->valuedouble >= lo && it->valuedouble <= hi))
        return attn_set_error(ATTN_E_FORMAT, "%s%s%s \"%s\" must be a number in [%g, %g]", WHO(c), c->file, key, lo, hi);
    *v = (float)it->valuedouble;
    return ATTN_OK;
}

int attn__hf_bool(const attn__hf_json *c, const cJSON *o, const char *key, int *v) {
    const cJSON *it = attn__hf_get(c, o, key);
    if (!it || cJSON_IsNull(it)) return ATTN_OK;
    if (!cJSON_IsBool(it)) return attn_set_error(ATTN_E_FORMAT, "%s%s%s \"%s\" must be true or false", WHO(c), c->file, key);
    *v = cJSON_IsTrue(it);
    return ATTN_OK;
}

int attn__hf_string(const attn__hf_json *c, const cJSON *o, const char *key, const char **v) {
    const cJSON *it = attn__hf_get(c, o, key);
    if (!it || cJSON_IsNull(it)) return ATTN_OK;
    if (!cJSON_IsString(it)) return attn_set_error(ATTN_E_FORMAT, "%s%s%s \"%s\" must be a string", WHO(c), c->file, key);
    *v = it->valuestring;
    return ATTN_OK;
}

int attn__hf_activation(const attn__hf_json *c, const cJSON *o, const char *key, attn_activation *act) {
    const cJSON *it = attn__hf_get(c, o, key);
    if (!it) return ATTN_OK;
    const char *a = cJSON_IsString(it) ? it->valuestring : "";
    if (!strcmp(a, "gelu")) *act = ATTN_ACT_GELU;
    else if (!strcmp(a, "gelu_new") || !strcmp(a, "gelu_pytorch_tanh")) *act = ATTN_ACT_GELU_TANH;
    else if (!strcmp(a, "relu")) *act = ATTN_ACT_RELU;
    else return attn_set_error(ATTN_E_UNSUPPORTED, "%s%s%s \"%s\" is not supported", WHO(c), key, a);
    return ATTN_OK;
}
