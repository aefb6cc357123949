/* safetensors writer (attn_safetensors.h): the header as one JSON object (cJSON, so names and
 * metadata are escaped), padded with spaces to a multiple of 8 bytes, then each tensor's bytes
 * in the order given, C order, little-endian (this library targets little-endian hosts, as the
 * reader). Files it writes open with attn_safetensors_open and with huggingface/safetensors. */
#include "attn_safetensors.h"
#include "attn_io.h"
#include "core/internal.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

static const char *attn__st_dtype(attn_dtype d) {
    switch (d) {
    case ATTN_F32: return "F32";
    case ATTN_F16: return "F16";
    case ATTN_BF16: return "BF16";
    case ATTN_I32: return "I32";
    case ATTN_I64: return "I64";
    default: return NULL;
    }
}

int attn_safetensors_write(FILE *f, int n, const char *const *names, const attn_tensor *const *tensors, int n_meta,
                           const char *const *meta_keys, const char *const *meta_values) {
    const char *op = "safetensors write";
    if (!f || n < 0 || n_meta < 0 || (n > 0 && (!names || !tensors)) || (n_meta > 0 && (!meta_keys || !meta_values)))
        return attn_set_error(ATTN_E_INVALID, "%s: NULL or negative argument", op);
    cJSON *root = cJSON_CreateObject();
    if (!root) return attn_set_error(ATTN_E_NOMEM, "%s: out of memory", op);
    int rc = ATTN_OK;
    if (n_meta > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; m && i < n_meta && rc == 0; i++) {
            if (!meta_keys[i] || !meta_values[i]) rc = attn_set_error(ATTN_E_INVALID, "%s: NULL metadata entry %d", op, i);
            else if (cJSON_GetObjectItemCaseSensitive(m, meta_keys[i]))
                rc = attn_set_error(ATTN_E_INVALID, "%s: metadata key \"%s\" given twice", op, meta_keys[i]);
            else if (!cJSON_AddStringToObject(m, meta_keys[i], meta_values[i])) rc = ATTN_E_NOMEM;
        }
        if (!m) rc = ATTN_E_NOMEM;
    }
    uint64_t off = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const attn_tensor *t = tensors[i];
        const char *dt = t ? attn__st_dtype(t->dtype) : NULL;
        if (!names[i] || !*names[i] || !t) rc = attn_set_error(ATTN_E_INVALID, "%s: tensor %d has no name or no data", op, i);
        else if (!strcmp(names[i], "__metadata__") || cJSON_GetObjectItemCaseSensitive(root, names[i]))
            rc = attn_set_error(ATTN_E_INVALID, "%s: tensor name \"%s\" is reserved or given twice", op, names[i]);
        else if (!dt) rc = attn_set_error(ATTN_E_DTYPE, "%s: %s: dtype %s not supported", op, names[i], attn_dtype_name(t->dtype));
        else if (!attn_tensor_is_contiguous(t)) rc = attn_set_error(ATTN_E_INVALID, "%s: %s is not contiguous", op, names[i]);
        if (rc < 0) break;
        const uint64_t nb = (uint64_t)attn_tensor_numel(t) * attn_dtype_size(t->dtype);
        cJSON *e = cJSON_AddObjectToObject(root, names[i]), *sh = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *of = e ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
        if (!e || !sh || !of || !cJSON_AddStringToObject(e, "dtype", dt)) {
            rc = attn_set_error(ATTN_E_NOMEM, "%s: out of memory", op);
            break;
        }
        for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->shape[d]));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(off + nb)));
        off += nb;
    }
    char *js = rc == 0 ? cJSON_PrintUnformatted(root) : NULL;
    if (rc == 0 && !js) rc = attn_set_error(ATTN_E_NOMEM, "%s: out of memory", op);
    if (rc == 0) {
        const size_t len = strlen(js), padded = (len + 7) / 8 * 8;
        unsigned char hdr[8];
        for (int b = 0; b < 8; b++) hdr[b] = (unsigned char)((uint64_t)padded >> (8 * b));
        int ok = fwrite(hdr, 1, 8, f) == 8 && fwrite(js, 1, len, f) == len;
        for (size_t p = len; ok && p < padded; p++) ok = fputc(' ', f) != EOF;
        for (int i = 0; ok && i < n; i++) {
            const size_t nb = (size_t)attn_tensor_numel(tensors[i]) * attn_dtype_size(tensors[i]->dtype);
            ok = nb == 0 || fwrite(tensors[i]->data, 1, nb, f) == nb;
        }
        if (!ok) rc = attn_set_error(ATTN_E_IO, "%s: write failed", op);
    }
    free(js);
    cJSON_Delete(root);
    return rc;
}

int attn_safetensors_save(const char *path, int n, const char *const *names, const attn_tensor *const *tensors, int n_meta,
                          const char *const *meta_keys, const char *const *meta_values) {
    attn_out *o = NULL;
    ATTN_TRY(attn_out_open(&o, path, ATTN_OUT_BINARY));
    int rc = attn_safetensors_write(attn_out_file(o), n, names, tensors, n_meta, meta_keys, meta_values);
    if (rc < 0) {
        attn_out_abort(o);
        return rc;
    }
    return attn_out_commit(o);
}
