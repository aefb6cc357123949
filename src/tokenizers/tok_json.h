/* Private helpers for Hugging Face tokenizer.json files, shared by the tokenizers in
 * src/tokenizers/ (not installed): parsing with a located syntax error, typed field access, the
 * model's {token: id} vocabulary and the added_tokens list. What a tokenizer accepts of them
 * (which model, normalizer, flags) stays with that tokenizer. Format: the serialization of
 * Hugging Face `tokenizers` (Tokenizer::to_file). */
#ifndef ATTN_TOK_JSON_H
#define ATTN_TOK_JSON_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* One vocabulary entry; s points into the cJSON tree (or other caller-owned storage). */
typedef struct {
    const char *s;
    size_t len;
    int32_t id;
} attn__tok_json_entry;

/* One added_tokens[] item; content points into the cJSON tree. */
typedef struct {
    const char *content;
    int special, normalized, lstrip, rstrip, single_word;
} attn__tok_json_added;

/* Parse json[0..len). Errors: ATTN_E_FORMAT "tokenizer.json: JSON syntax error near byte N". */
int attn__tok_json_parse(cJSON **root, const char *json, size_t len);
/* obj.name as a boolean (dflt when absent or null). Errors: ATTN_E_FORMAT (not a boolean; `where`
 * names obj in the message). */
int attn__tok_json_bool(const cJSON *obj, const char *name, int dflt, int *out, const char *where);
/* A whole number in [0, INT32_MAX]: 1 and *out set, else 0. */
int attn__tok_json_id(const cJSON *v, int32_t *out);
/* obj.type when it is a string, else NULL. */
const char *attn__tok_json_type(const cJSON *obj);
/* The entries of a {token: id} object into e[0..*n) (e holds at least cJSON_GetArraySize(vocab)
 * entries). Errors: ATTN_E_FORMAT (an entry without a valid id). */
int attn__tok_json_vocab(const cJSON *vocab, attn__tok_json_entry *e, int *n);
/* Every entry's token is valid UTF-8. Errors: ATTN_E_FORMAT naming the first bad entry. */
int attn__tok_json_vocab_utf8(const attn__tok_json_entry *e, int n);
/* One added_tokens[] item (index for messages): content (a string) and a whole-number id (which
 * `tokenizers` reassigns itself) are required; special defaults to 0, normalized to !special,
 * lstrip / rstrip / single_word to 0. Errors: ATTN_E_FORMAT. */
int attn__tok_json_added_item(const cJSON *item, int index, attn__tok_json_added *x);

#endif
