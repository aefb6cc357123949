/*
 * attn_gguf.h — reader for GGUF files (the llama.cpp model format, spec: ggml docs/gguf.md),
 * versions 2 and 3, little-endian.
 *
 * Layout: magic "GGUF", uint32 version, uint64 tensor_count, uint64 kv_count; kv_count
 * (key string, uint32 value type, value) pairs; tensor_count tensor infos (name string, uint32
 * n_dims <= 4, uint64 ne[n_dims] (ne[0] = fastest-varying = columns), uint32 ggml type, uint64
 * offset); padding to general.alignment (default 32); tensor data. A string is uint64 length +
 * bytes (no NUL); an array is uint32 element type + uint64 count + elements.
 *
 * The file is mmap'ed read-only and everything is validated when it is opened: every count,
 * string length, array length (nested arrays too, depth <= 4), value type, alignment (a power of
 * two), tensor rank, extent (> 0, product < 2^62), type, offset (aligned, inside the data
 * section) and size (the tensor ends inside the file), duplicate keys and tensor names, the
 * row length (a multiple of the type's block: 32, or 256 for K-quants), and every block scale
 * of the quantized tensors (finite; one read of each block header). Tensor types F32, F16,
 * BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K are accepted; any other
 * type is refused with its ggml name. After a successful open no accessor can read outside
 * the file.
 */
#ifndef ATTN_GGUF_H
#define ATTN_GGUF_H

#include "attn_core.h"
#include "attn_quant.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_GGUF_UINT8 = 0, ATTN_GGUF_INT8 = 1, ATTN_GGUF_UINT16 = 2, ATTN_GGUF_INT16 = 3,
    ATTN_GGUF_UINT32 = 4, ATTN_GGUF_INT32 = 5, ATTN_GGUF_FLOAT32 = 6, ATTN_GGUF_BOOL = 7,
    ATTN_GGUF_STRING = 8, ATTN_GGUF_ARRAY = 9, ATTN_GGUF_UINT64 = 10, ATTN_GGUF_INT64 = 11,
    ATTN_GGUF_FLOAT64 = 12
} attn_gguf_type;

typedef struct attn_gguf attn_gguf;

typedef struct {
    const char *name;    /* NUL-terminated copy */
    attn_qtype type;
    int n_dims;
    int64_t ne[4];       /* ne[0] = columns (fastest), missing dims = 1 */
    const void *data;    /* inside the mapping */
    size_t nbytes;
} attn_gguf_tensor;

/* attn_gguf_open: mmap and validate `path`. Errors: ATTN_E_IO, ATTN_E_FORMAT (bad magic, a
 * version other than 2 or 3, anything out of bounds — the message says what and where),
 * ATTN_E_UNSUPPORTED (a tensor type attn cannot use, named), ATTN_E_NOMEM. */
int attn_gguf_open(attn_gguf **out, const char *path);
/* attn_gguf_open_buffer: the same over len bytes in memory (not copied: the buffer must outlive
 * the handle). Used by the fuzzer. */
int attn_gguf_open_buffer(attn_gguf **out, const void *data, size_t len);
/* attn_gguf_close: NULL-safe. */
void attn_gguf_close(attn_gguf *g);

/* attn_gguf_version: 2 or 3. */
uint32_t attn_gguf_version(const attn_gguf *g);
/* attn_gguf_n_kv / attn_gguf_n_tensors: counts. */
int64_t attn_gguf_n_kv(const attn_gguf *g);
/* attn_gguf_n_tensors: number of tensors. */
int64_t attn_gguf_n_tensors(const attn_gguf *g);
/* attn_gguf_kv_key: key i (NUL-terminated), NULL when out of range. */
const char *attn_gguf_kv_key(const attn_gguf *g, int64_t i);
/* attn_gguf_kv_type: value type of key i (-1 when out of range). */
int attn_gguf_kv_type(const attn_gguf *g, int64_t i);
/* attn_gguf_find_kv: index of key, -1 when absent. */
int64_t attn_gguf_find_kv(const attn_gguf *g, const char *key);

/* Typed getters by key. Integers of any width and sign convert when the value fits (else
 * ATTN_E_RANGE); float getters take FLOAT32/FLOAT64. Errors: ATTN_E_FORMAT (key absent — the
 * message names it — or of another type). */
int attn_gguf_get_int(const attn_gguf *g, const char *key, int64_t *v);
/* attn_gguf_get_float: FLOAT32 / FLOAT64 value. */
int attn_gguf_get_float(const attn_gguf *g, const char *key, double *v);
/* attn_gguf_get_bool: BOOL value (0/1). */
int attn_gguf_get_bool(const attn_gguf *g, const char *key, int *v);
/* attn_gguf_get_str: STRING value: *s points into the mapping (NOT NUL-terminated), *len bytes. */
int attn_gguf_get_str(const attn_gguf *g, const char *key, const char **s, size_t *len);
/* attn_gguf_get_arr: ARRAY value: element type and count. */
int attn_gguf_get_arr(const attn_gguf *g, const char *key, int *elem_type, int64_t *n);
/* attn_gguf_arr_str: element i of a string array (not NUL-terminated). */
int attn_gguf_arr_str(const attn_gguf *g, const char *key, int64_t i, const char **s, size_t *len);
/* attn_gguf_arr_num: element i of a numeric array as double (bool as 0/1). */
int attn_gguf_arr_num(const attn_gguf *g, const char *key, int64_t i, double *v);

/* attn_gguf_tensor_at: info of tensor i. Errors: ATTN_E_RANGE. */
int attn_gguf_tensor_at(const attn_gguf *g, int64_t i, attn_gguf_tensor *t);
/* attn_gguf_find_tensor: info of the tensor named `name`; ATTN_E_FORMAT when absent. */
int attn_gguf_find_tensor(const attn_gguf *g, const char *name, attn_gguf_tensor *t);
/* attn_ggml_type_name: ggml's name of a type number ("q4_1", "q5_k", ...), "unknown" otherwise. */
const char *attn_ggml_type_name(uint32_t ggml_type);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_GGUF_H */
