/* Hugging Face tokenizer.json reading shared by the tokenizers (see tok_json.h). */
#include "attn_core.h"
#include "attn_utf8.h"
#include "core/internal.h"
#include "tokenizers/tok_json.h"

#include <limits.h>
#include <string.h>

int attn__tok_json_parse(cJSON **root, const char *json, size_t len) {
    *root = cJSON_ParseWithLength(json, len);
    if (!*root) {
        const char *ep = cJSON_GetErrorPtr();
        size_t off = (ep && ep >= json && ep <= json + len) ? (size_t)(ep - json) : 0;
        return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: JSON syntax error near byte %zu", off);
    }
    return ATTN_OK;
}

int attn__tok_json_bool(const cJSON *obj, const char *name, int dflt, int *out, const char *where) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v || cJSON_IsNull(v)) {
        *out = dflt;
        return ATTN_OK;
    }
    if (!cJSON_IsBool(v)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: %s.%s is not a boolean", where, name);
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return ATTN_OK;
}

int attn__tok_json_id(const cJSON *v, int32_t *out) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0 && d <= (double)INT32_MAX) || d != (double)(int64_t)d) return 0;
    *out = (int32_t)d;
    return 1;
}

const char *attn__tok_json_type(const cJSON *obj) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(obj, "type");
    return cJSON_IsString(ty) ? ty->valuestring : NULL;
}

int attn__tok_json_vocab(const cJSON *vocab, attn__tok_json_entry *e, int *n) {
    int nv = cJSON_GetArraySize(vocab), k = 0;
    const cJSON *it;
    *n = 0;
    cJSON_ArrayForEach(it, vocab) {
        if (k >= nv) break;
        if (!it->string || !attn__tok_json_id(it, &e[k].id))
            return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: vocab entry \"%s\" has no valid id", it->string ? it->string : "?");
        e[k].s = it->string;
        e[k].len = strlen(it->string);
        *n = ++k;
    }
    return ATTN_OK;
}

int attn__tok_json_vocab_utf8(const attn__tok_json_entry *e, int n) {
    for (int i = 0; i < n; i++) {
        size_t bad;
        if (attn_tokenizer_validate_utf8(e[i].s, e[i].len, &bad) < 0)
            return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: vocab token %d is not valid UTF-8", i);
    }
    return ATTN_OK;
}

int attn__tok_json_added_item(const cJSON *it, int index, attn__tok_json_added *x) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(it, "content");
    const cJSON *idv = cJSON_GetObjectItemCaseSensitive(it, "id");
    int32_t unused_id; /* required by the format, but tokenizers assigns the id itself */
    if (!cJSON_IsString(content) || !attn__tok_json_id(idv, &unused_id))
        return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: added_tokens[%d] needs content and id", index);
    ATTN_TRY(attn__tok_json_bool(it, "special", 0, &x->special, "added_tokens[]"));
    ATTN_TRY(attn__tok_json_bool(it, "normalized", !x->special, &x->normalized, "added_tokens[]"));
    ATTN_TRY(attn__tok_json_bool(it, "lstrip", 0, &x->lstrip, "added_tokens[]"));
    ATTN_TRY(attn__tok_json_bool(it, "rstrip", 0, &x->rstrip, "added_tokens[]"));
    ATTN_TRY(attn__tok_json_bool(it, "single_word", 0, &x->single_word, "added_tokens[]"));
    x->content = content->valuestring;
    return ATTN_OK;
}
