/* tokenizer.json loading for the WordPiece tokenizer (Hugging Face tokenizers' Tokenizer::from_file
 * for a WordPiece model with BertNormalizer, BertPreTokenizer and a TemplateProcessing or
 * BertProcessing post-processor; see include/attn_wordpiece.h). */
#include "core/internal.h"
#include "tokenizers/tok_common.h"
#include "tokenizers/wordpiece_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ids of one TemplateProcessing special token (special_tokens[name].ids). */
static int template_special(const cJSON *pp, const char *name, int32_t *ids, int *n) {
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(pp, "special_tokens");
    const cJSON *tk = cJSON_IsObject(st) ? cJSON_GetObjectItemCaseSensitive(st, name) : NULL;
    const cJSON *arr = cJSON_IsObject(tk) ? cJSON_GetObjectItemCaseSensitive(tk, "ids") : NULL;
    if (!cJSON_IsArray(arr))
        return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: post_processor.special_tokens has no ids for \"%s\"", name);
    const cJSON *it;
    cJSON_ArrayForEach(it, arr) {
        if (*n >= TOK_MAX_AFFIX)
            return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: more than %d special ids around the sequence",
                                  TOK_MAX_AFFIX);
        if (!attn__tok_json_id(it, &ids[*n])) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: bad id for \"%s\"", name);
        (*n)++;
    }
    return ATTN_OK;
}

static int parse_post_processor(attn_tokenizer *t, const cJSON *pp) {
    t->template_ok = 1;
    if (!pp || cJSON_IsNull(pp)) return ATTN_OK; /* no post-processor: nothing is added */
    const char *ty = attn__tok_json_type(pp);
    if (ty && strcmp(ty, "TemplateProcessing") == 0) {
        const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
        if (!cJSON_IsArray(single))
            return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: post_processor.single is not an array");
        int seen_seq = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, single) {
            const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "SpecialToken");
            const cJSON *sq = cJSON_GetObjectItemCaseSensitive(it, "Sequence");
            if (cJSON_IsObject(sp)) {
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp, "id");
                if (!cJSON_IsString(id)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: SpecialToken without id");
                int rc = seen_seq ? template_special(pp, id->valuestring, t->post_ids, &t->n_post)
                                  : template_special(pp, id->valuestring, t->pre_ids, &t->n_pre);
                if (rc < 0) return rc;
            } else if (cJSON_IsObject(sq)) {
                const cJSON *id = cJSON_GetObjectItemCaseSensitive(sq, "id");
                if (seen_seq || !cJSON_IsString(id) || strcmp(id->valuestring, "A") != 0)
                    return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: single template must hold sequence A once");
                seen_seq = 1;
            } else {
                return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: bad item in post_processor.single");
            }
        }
        if (!seen_seq) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: single template without $A");
    } else if (ty && strcmp(ty, "BertProcessing") == 0) {
        const cJSON *cls = cJSON_GetObjectItemCaseSensitive(pp, "cls");
        const cJSON *sep = cJSON_GetObjectItemCaseSensitive(pp, "sep");
        if (!cJSON_IsArray(cls) || !cJSON_IsArray(sep) || cJSON_GetArraySize(cls) != 2 || cJSON_GetArraySize(sep) != 2 ||
            !attn__tok_json_id(cJSON_GetArrayItem(cls, 1), &t->pre_ids[0]) || !attn__tok_json_id(cJSON_GetArrayItem(sep, 1), &t->post_ids[0]))
            return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: BertProcessing needs cls/sep as [token, id]");
        t->n_pre = t->n_post = 1;
    } else {
        return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: post_processor type %s is not supported",
                              ty ? ty : "(missing)");
    }
    for (int i = 0; i < t->n_pre; i++)
        if (t->pre_ids[i] >= t->vocab_size) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: special id out of range");
    for (int i = 0; i < t->n_post; i++)
        if (t->post_ids[i] >= t->vocab_size) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: special id out of range");
    return ATTN_OK;
}

static int load_json_root(attn_tokenizer *t, const cJSON *root) {
    if (!cJSON_IsObject(root)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: top level is not an object");
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: no \"model\" object");
    const char *ty = attn__tok_json_type(model);
    if (ty && strcmp(ty, "WordPiece") != 0)
        return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: model type %s is not supported (WordPiece only)", ty);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    if (!cJSON_IsObject(vocab)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: model.vocab is not an object");

    const char *unk = "[UNK]", *prefix = "##";
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, "unk_token");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v)) return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: model.unk_token is not a string");
        unk = v->valuestring;
    }
    v = cJSON_GetObjectItemCaseSensitive(model, "continuing_subword_prefix");
    if (v && !cJSON_IsNull(v)) {
        if (!cJSON_IsString(v))
            return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: model.continuing_subword_prefix is not a string");
        prefix = v->valuestring;
    }
    v = cJSON_GetObjectItemCaseSensitive(model, "max_input_chars_per_word");
    if (v && !cJSON_IsNull(v)) {
        int32_t m;
        if (!attn__tok_json_id(v, &m) || m < 1 || m > TOK_MAX_WORD_CHARS)
            return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: max_input_chars_per_word must be 1..%d",
                                  TOK_MAX_WORD_CHARS);
        t->max_chars = m;
    }

    /* normalizer */
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (!norm || cJSON_IsNull(norm)) {
        t->clean_text = t->chinese = t->strip_accents = t->lowercase = 0;
    } else {
        const char *nt = attn__tok_json_type(norm);
        if (!nt || strcmp(nt, "BertNormalizer") != 0)
            return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: normalizer %s is not supported (BertNormalizer only)",
                                  nt ? nt : "(no type)");
        ATTN_TRY(attn__tok_json_bool(norm, "clean_text", 1, &t->clean_text, "normalizer"));
        ATTN_TRY(attn__tok_json_bool(norm, "handle_chinese_chars", 1, &t->chinese, "normalizer"));
        ATTN_TRY(attn__tok_json_bool(norm, "lowercase", 1, &t->lowercase, "normalizer"));
        ATTN_TRY(attn__tok_json_bool(norm, "strip_accents", t->lowercase, &t->strip_accents, "normalizer"));
    }
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const char *pt = cJSON_IsObject(pre) ? attn__tok_json_type(pre) : NULL;
    if (!pt || strcmp(pt, "BertPreTokenizer") != 0)
        return attn_set_error(ATTN_E_UNSUPPORTED, "tokenizer.json: pre_tokenizer %s is not supported (BertPreTokenizer only)",
                              pt ? pt : "(missing)");

    /* vocabulary entries */
    int nv = cJSON_GetArraySize(vocab);
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsNull(added) && !cJSON_IsArray(added))
        return attn_set_error(ATTN_E_FORMAT, "tokenizer.json: added_tokens is not an array");
    int na = cJSON_IsArray(added) ? cJSON_GetArraySize(added) : 0;
    tok_entry *e = malloc(((size_t)nv + 1) * sizeof *e);
    tok_added_spec *add = malloc(((size_t)na + 1) * sizeof *add);
    if (!e || !add) {
        free(e);
        free(add);
        return attn_set_error(ATTN_E_NOMEM, "tokenizer.json: out of memory");
    }
    int k = 0, ka = 0;
    int rc = attn__tok_json_vocab(vocab, e, &k);
    if (rc == ATTN_OK && na) {
        const cJSON *it;
        cJSON_ArrayForEach(it, added) {
            if (ka >= na) break;
            attn__tok_json_added x;
            if ((rc = attn__tok_json_added_item(it, ka, &x)) < 0) break;
            if (x.normalized || x.lstrip || x.rstrip || x.single_word) {
                rc = attn_set_error(ATTN_E_UNSUPPORTED,
                                    "tokenizer.json: added token \"%s\" uses normalized/lstrip/rstrip/single_word",
                                    x.content);
                break;
            }
            if (!x.content[0]) {
                rc = attn_set_error(ATTN_E_FORMAT, "tokenizer.json: empty added token");
                break;
            }
            add[ka].content = x.content;
            ka++;
        }
    }
    if (rc == ATTN_OK) rc = attn__tok_json_vocab_utf8(e, k);
    if (rc == ATTN_OK) rc = attn__wp_build(t, e, (size_t)k, add, ka, unk, prefix);
    free(e);
    free(add);
    if (rc < 0) return rc;
    return parse_post_processor(t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"));
}

int attn_tokenizer_load_json_buffer(attn_tokenizer **out, const char *json, size_t len) {
    if (!out) return attn_set_error(ATTN_E_INVALID, "tokenizer_load_json_buffer: NULL out");
    *out = NULL;
    if (!json) return attn_set_error(ATTN_E_INVALID, "tokenizer_load_json_buffer: NULL json");
    cJSON *root = NULL;
    ATTN_TRY(attn__tok_json_parse(&root, json, len));
    attn_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        cJSON_Delete(root);
        return attn_set_error(ATTN_E_NOMEM, "tokenizer.json: out of memory");
    }
    attn__wp_init_defaults(t);
    int rc = load_json_root(t, root);
    cJSON_Delete(root);
    if (rc < 0) {
        attn_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return ATTN_OK;
}

int attn_tokenizer_load_json(attn_tokenizer **out, const char *path) {
    char *data;
    size_t len;
    int rc = attn__wp_read("tokenizer_load_json", out, path, &data, &len);
    if (rc < 0) return rc;
    rc = attn_tokenizer_load_json_buffer(out, data, len);
    free(data);
    if (rc < 0 && rc != ATTN_E_NOMEM) attn__error_prefix(rc, path);
    return rc;
}
