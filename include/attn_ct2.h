/*
 * attn_ct2.h — reader for CTranslate2 model files (model.bin, binary versions 2 to 6).
 *
 * Layout (little-endian, no padding), as written by CTranslate2's Python converters
 * (ctranslate2/specs/model_spec.py, ModelSpec._serialize) and read by its C++ loader
 * (src/models/model.cc):
 *   u32 binary_version (2..6)
 *   string spec_name, u32 spec_revision, u32 n_variables
 *   n_variables x { string name; u8 rank; u32 dims[rank];
 *                   version >= 4: u8 dtype (0 f32, 1 int8, 2 int16, 3 int32, 4 f16, 5 bf16),
 *                                 u32 n_bytes;
 *                   version 2-3: u8 item_size (4 f32, 2 int16, 1 int8), u32 n_elements;
 *                   raw data }
 *   version >= 3: u32 n_aliases, n_aliases x { string alias; string target }
 * A string is a u16 length (the terminating NUL included), the bytes, the NUL.
 * An int8 / int16 weight "X/weight" has "X/weight_scale" beside it: one float32 per output
 * row (or a scalar); the real value is q / scale.
 *
 * The file is mmap'ed read-only and every count, rank, size, dtype and alias target is
 * checked before use; variable data may be unaligned (the format has no padding), so read
 * it with attn_ct2_read_f32 / memcpy rather than through a cast pointer.
 */
#ifndef ATTN_CT2_H
#define ATTN_CT2_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_CT2_F32 = 0,
    ATTN_CT2_I8 = 1,
    ATTN_CT2_I16 = 2,
    ATTN_CT2_I32 = 3,
    ATTN_CT2_F16 = 4,
    ATTN_CT2_BF16 = 5
} attn_ct2_dtype;

/* One stored variable. `data` points into the mapping (possibly unaligned); `name` is
 * NUL-terminated and owned by the file handle. rank 0 is a scalar (numel 1). */
typedef struct {
    const char *name;
    attn_ct2_dtype dtype;
    int rank;
    int64_t shape[ATTN_MAX_DIMS];
    int64_t numel;
    size_t nbytes;
    const void *data;
} attn_ct2_var;

typedef struct attn_ct2_file attn_ct2_file;

/* attn_ct2_open: mmap `path` read-only and parse it. *out is NULL on failure.
 * Errors: ATTN_E_IO (cannot open / map), ATTN_E_FORMAT (truncated, bad version, rank > 8,
 * size mismatch, unknown dtype, duplicate name, alias to a missing variable, trailing bytes),
 * ATTN_E_NOMEM. Messages name the variable and byte offset. */
int attn_ct2_open(attn_ct2_file **out, const char *path);

/* attn_ct2_parse: parse a model.bin already in memory (not copied: `data` must outlive the
 * handle). Same checks and errors as attn_ct2_open (used by the fuzzer). */
int attn_ct2_parse(attn_ct2_file **out, const void *data, size_t size);

/* attn_ct2_close: unmap and free (NULL-safe). */
void attn_ct2_close(attn_ct2_file *f);

/* Header fields. */
uint32_t attn_ct2_binary_version(const attn_ct2_file *f);
/* attn_ct2_spec_name: e.g. "TransformerBase", "WhisperSpec". */
const char *attn_ct2_spec_name(const attn_ct2_file *f);
/* attn_ct2_spec_revision: the spec's revision number. */
uint32_t attn_ct2_spec_revision(const attn_ct2_file *f);
/* attn_ct2_num_variables: stored variables (aliases not counted). */
int64_t attn_ct2_num_variables(const attn_ct2_file *f);
/* attn_ct2_variable: the i-th stored variable, NULL when i is out of range. */
const attn_ct2_var *attn_ct2_variable(const attn_ct2_file *f, int64_t i);
/* attn_ct2_num_aliases / attn_ct2_alias: alias i's name and target (NULL out of range). */
int64_t attn_ct2_num_aliases(const attn_ct2_file *f);
/* attn_ct2_alias: alias i's name (returned) and its target variable's name (*target); NULL out of range. */
const char *attn_ct2_alias(const attn_ct2_file *f, int64_t i, const char **target);

/* attn_ct2_find: the variable called `name`, following an alias; NULL when absent (no
 * error is set: absence is a normal answer for optional variables). */
const attn_ct2_var *attn_ct2_find(const attn_ct2_file *f, const char *name);

/* attn_ct2_read_f32: convert v to float32 into dst[v->numel] (f32 copied, f16 / bf16
 * widened exactly, int8 / int16 / int32 converted as plain integers — apply the scale
 * separately). Errors: ATTN_E_INVALID (NULL). */
int attn_ct2_read_f32(float *dst, const attn_ct2_var *v);

/* attn_ct2_dtype_name: "float32", "int8", "int16", "int32", "float16", "bfloat16", "unknown". */
const char *attn_ct2_dtype_name(int dtype);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_CT2_H */
