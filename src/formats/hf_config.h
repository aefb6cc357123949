/* Private to the library: Hugging Face model-directory JSON files (config.json,
 * preprocessor_config.json, sentence-transformers' modules.json, CTranslate2's config.json, ...):
 * reading and parsing with a located syntax error, and typed, range-checked getters whose
 * messages name the model family, the file and the key. What a model accepts of a file stays
 * with that model. Format: JSON (RFC 8259) as written by transformers' PretrainedConfig.to_json_file. */
#ifndef ATTN_FORMATS_HF_CONFIG_H
#define ATTN_FORMATS_HF_CONFIG_H

#include "attn_ops.h"
#include <cJSON.h>
#include <stdint.h>

/* Largest model-directory JSON file read into memory. */
#define ATTN__HF_JSON_MAX ((size_t)64 << 20)

/* One parsed file. who and file are only used in messages. */
typedef struct {
    cJSON *root;      /* NULL when an optional file is absent */
    const char *who;  /* message prefix ("bert", "vit"); NULL: none */
    const char *file; /* the file as messages name it ("config.json") */
    char path[4096];  /* dir/file */
} attn__hf_json;

enum {
    ATTN__HF_OPTIONAL = 1, /* an absent file (ENOENT) is not an error: root = NULL, ATTN_OK */
    ATTN__HF_ANY = 2       /* any JSON value (default: the file must hold an object) */
};

/* Read and parse dir/file (at most ATTN__HF_JSON_MAX bytes). hint is appended to the message of a
 * missing required file (NULL: nothing). Free with attn__hf_json_free (also after an error).
 * Errors (each message starts "WHO: "): ATTN_E_IO "cannot read PATH: REASON[HINT]", ATTN_E_RANGE
 * (too large), ATTN_E_FORMAT "PATH is not valid JSON (syntax error near byte N)" / "PATH is not a
 * JSON object", ATTN_E_NOMEM. */
int attn__hf_json_load(attn__hf_json *c, const char *who, const char *dir, const char *file, int flags, const char *hint);
void attn__hf_json_free(attn__hf_json *c);

/* Parse json[0..len) (any value). Returns the tree, or NULL with *err_off = the byte offset of the
 * syntax error (0 when unknown). Thread-safe (does not use cJSON's global error pointer). */
cJSON *attn__json_parse(const char *json, size_t len, size_t *err_off);

/* The getters read key of object o (NULL: the file's root). */

/* An integer in [lo, hi]. Absent: ATTN_FORMAT "FILE lacks \"KEY\"" when required, else *v kept.
 * Errors: ATTN_E_FORMAT "FILE \"KEY\" must be an integer in [LO, HI]" (also for null). */
int attn__hf_int(const attn__hf_json *c, const cJSON *o, const char *key, int64_t *v, int64_t lo, int64_t hi, int required);
/* The same check for a value already looked up (it may be NULL: an error); key names it. */
int attn__hf_int_value(const attn__hf_json *c, const cJSON *it, const char *key, int64_t *v, int64_t lo, int64_t hi);
/* A number in [lo, hi] (absent or null: *v kept). Errors: ATTN_E_FORMAT "FILE \"KEY\" must be a
 * number in [LO, HI]". */
int attn__hf_float(const attn__hf_json *c, const cJSON *o, const char *key, float *v, double lo, double hi);
/* true / false (absent or null: *v kept). Errors: ATTN_E_FORMAT "FILE \"KEY\" must be true or false". */
int attn__hf_bool(const attn__hf_json *c, const cJSON *o, const char *key, int *v);
/* A string (absent or null: *v kept; it points into the tree). Errors: ATTN_E_FORMAT "FILE \"KEY\"
 * must be a string". */
int attn__hf_string(const attn__hf_json *c, const cJSON *o, const char *key, const char **v);
/* transformers' hidden_act names: "gelu" (erf), "gelu_new" / "gelu_pytorch_tanh" (tanh form),
 * "relu" (absent: *act kept). Errors: ATTN_E_UNSUPPORTED "KEY \"NAME\" is not supported" (also for
 * a value that is not a string, named ""). */
int attn__hf_activation(const attn__hf_json *c, const cJSON *o, const char *key, attn_activation *act);

#endif
