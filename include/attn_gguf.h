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

/* attn_gguf_kv_raw: the encoded value of metadata entry i as it is in the file (a string: uint64
 * length + bytes; an array: uint32 element type + uint64 count + elements) and its value type,
 * for copying it into another file. Errors: ATTN_E_RANGE. */
int attn_gguf_kv_raw(const attn_gguf *g, int64_t i, int *type, const void **data, size_t *len);
/* attn_gguf_alignment: the data alignment (general.alignment, default 32). */
uint32_t attn_gguf_alignment(const attn_gguf *g);
/* attn_ggml_type_of: ggml's type number of an attn_qtype (-1 for an unknown one). */
int attn_ggml_type_of(attn_qtype t);

/* ------------------------------------------------------------------ writer
 * A GGUF v3 file written in one pass: declare the metadata and the tensors (name, type, shape),
 * then give each tensor's data in declaration order; the header goes out before the first
 * tensor's data (offsets follow from the types and shapes), each tensor is padded to the
 * alignment. The output is a temporary file in the target's directory, renamed over the target
 * by attn_gguf_writer_commit (attn_out_open): the target is complete or untouched. */
typedef struct attn_gguf_writer attn_gguf_writer;
/* attn_gguf_writer_open: alignment 0 = 32 (else a power of two up to 2^20, written as the first
 * metadata entry general.alignment). Errors: ATTN_E_IO, ATTN_E_INVALID, ATTN_E_NOMEM. */
int attn_gguf_writer_open(attn_gguf_writer **w, const char *path, uint32_t alignment);
/* attn_gguf_writer_kv: metadata entry `key` with value type `type` and its encoded value (as
 * attn_gguf_kv_raw gives it); a key given twice keeps its first place and takes the new value.
 * Errors: ATTN_E_INVALID (after the data began, bad type, a general.alignment other than the
 * writer's), ATTN_E_NOMEM. */
int attn_gguf_writer_kv(attn_gguf_writer *w, const char *key, int type, const void *data, size_t len);
/* attn_gguf_writer_kv_u32: a UINT32 entry. */
int attn_gguf_writer_kv_u32(attn_gguf_writer *w, const char *key, uint32_t v);
/* attn_gguf_writer_tensor: declare tensor `name`, type t, n_dims (1..4) extents ne[] (ne[0] =
 * columns, a multiple of t's block). Errors: ATTN_E_INVALID, ATTN_E_NOMEM. */
int attn_gguf_writer_tensor(attn_gguf_writer *w, const char *name, attn_qtype t, int n_dims, const int64_t *ne);
/* attn_gguf_writer_data: the next bytes of the current tensor's data (in one or more calls, in
 * declaration order; a tensor is complete after its byte count). Errors: ATTN_E_INVALID (more
 * bytes than declared), ATTN_E_IO. */
int attn_gguf_writer_data(attn_gguf_writer *w, const void *data, size_t n);
/* attn_gguf_writer_commit: check that every tensor got all its data, write, rename over the
 * target; frees w. Errors: ATTN_E_INVALID, ATTN_E_IO (target untouched). */
int attn_gguf_writer_commit(attn_gguf_writer *w);
/* attn_gguf_writer_abort: drop the output (target untouched); frees w; NULL-safe. */
void attn_gguf_writer_abort(attn_gguf_writer *w);

/* ------------------------------------------------------------------ quantize (llama-quantize)
 * attn_gguf_quantize: write the GGUF file `in` to `out` with its weights in the file type
 * `ftype` (case-insensitive): F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K_S, Q3_K_M (Q3_K),
 * Q3_K_L, Q4_K_S, Q4_K_M (Q4_K), Q5_K_S, Q5_K_M (Q5_K), Q6_K. As llama.cpp's llama-quantize
 * without an importance matrix (llama_model_quantize, llama_tensor_get_type):
 *   - tensors quantized: names ending in "weight" of 2+ dimensions, except *_norm.weight,
 *     ffn_gate_inp, position/token-type embeddings and rope_freqs (copied as they are);
 *   - the mix: output.weight (token_embd.weight when there is no output.weight) Q6_K, or Q8_0
 *     when its rows are not a multiple of 256 (kept for Q8_0 files); attn_v.weight: Q2_K -> Q3_K
 *     (Q4_K with >= 4 query heads per KV head), Q3_K_M -> Q5_K for the first 2 then Q4_K,
 *     Q3_K_L -> Q5_K, Q4_K_M / Q5_K_M -> Q6_K on "more bits" layers (the first and last eighth
 *     and every third between), Q4_K_S -> Q5_K for the first 4; ffn_down: Q2_K -> Q3_K, Q3_K_M ->
 *     Q5_K for the first sixteenth then Q4_K, Q3_K_L -> Q5_K, Q4_K_M / Q5_K_M -> Q6_K on more-bits
 *     layers, Q4_K_S -> Q5_K for the first eighth; attn_output.weight: Q2_K -> Q3_K, Q3_K_M ->
 *     Q4_K, Q3_K_L -> Q5_K; attn_qkv: Q3_K_M/L -> Q4_K, Q4_K_M -> Q5_K, Q5_K_M -> Q6_K;
 *   - rows not a multiple of the type's block fall back: Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K ->
 *     Q8_0, Q2_K / Q3_K -> Q4_0 (llama.cpp now takes IQ4_NL, a type attn does not have), then F16;
 *   - a tensor already of its target type is copied unchanged; any other is read as float32
 *     (F32 / F16 / BF16, or dequantized: requantizing loses accuracy) and quantized with
 *     attn_quantize_rows (ggml's reference quantizers);
 *   - tensors in llama.cpp's order (by layer number, non-layer tensors first, then by name),
 *     which is also the order of its "first / last layers" counters;
 *   - metadata copied in order, general.file_type set to llama.cpp's number for ftype and
 *     general.quantization_version to 2.
 * `out` is written atomically (attn_gguf_writer); out naming the same file as in (also through
 * links) is refused. counts (may be NULL) receives per attn_qtype the number of tensors written
 * in that type (an array of ATTN_QT_COUNT). n_threads <= 0: attn_get_num_threads().
 * Errors: ATTN_E_INVALID (unknown ftype, out == in), errors of attn_gguf_open, ATTN_E_IO,
 * ATTN_E_NOMEM, ATTN_E_RANGE (a non-finite weight). */
#define ATTN_QT_COUNT 13 /* entries of attn_gguf_quantize's counts */
/* (attn_gguf_quantize: documented above) */
int attn_gguf_quantize(const char *in, const char *out, const char *ftype, int n_threads, int64_t *counts);
/* attn_gguf_ftype_default: the main attn_qtype of a file type name (Q4_K_M -> q4_k, ...), -1 for
 * an unknown name. */
int attn_gguf_ftype_default(const char *ftype);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_GGUF_H */
