/*
 * attn_safetensors.h — read-only access to .safetensors files.
 *
 * Source: the safetensors format as specified by Hugging Face (huggingface/safetensors,
 * README "Format"): an 8-byte little-endian unsigned header length N, then N bytes of
 * UTF-8 JSON (possibly padded at the end with spaces), then the data section. The JSON is
 * an object mapping each tensor name to {"dtype": "F32", "shape": [d0, d1, ...],
 * "data_offsets": [begin, end]}, with begin/end in bytes relative to the start of the data
 * section, tensors in C (row-major) order and little-endian. An optional "__metadata__"
 * key maps to an object of string -> string.
 *
 * Everything in the header is checked when the file is opened (see attn_safetensors_open),
 * so a file that opens can be read without further bounds checks. Tensor shapes are in
 * PyTorch order, exactly as written in the file.
 *
 * dtypes: the names BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, F8_E4M3FNUZ, F8_E5M2FNUZ,
 * I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64 and C64 are understood (their sizes
 * are used to validate the file; attn_safetensors_info_at reports them). Float32 reading
 * (attn_safetensors_get_f32) supports F32, F16 and BF16 only; every other dtype gives
 * ATTN_E_DTYPE there, and its raw little-endian bytes are available through
 * attn_safetensors_data. Any other dtype name (including the sub-byte F4, F6_E2M3 and
 * F6_E3M2) makes attn_safetensors_open fail with ATTN_E_DTYPE.
 *
 * Deliberate differences from the reference implementation: gaps between tensors and
 * bytes after the last tensor are accepted (the reference rejects them); integers in the
 * header are read as JSON numbers, so 1.0 is accepted as 1, and values of 2^53 or more are
 * rejected; a header with more than 4194304 JSON values is rejected (bounds the memory
 * needed to parse a hostile header).
 */
#ifndef ATTN_SAFETENSORS_H
#define ATTN_SAFETENSORS_H

#include "attn_core.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An open safetensors file (opaque). Not thread-safe for close, but any number of threads
 * may read from one handle at once, each with its own arena (reads do not modify it). */
typedef struct attn_safetensors attn_safetensors;

/* Largest header length accepted, in bytes (100 MB, the limit the format itself sets). */
#define ATTN_SAFETENSORS_MAX_HEADER ((uint64_t)100000000)

/* Description of one tensor of an open file. Pointers stay valid until
 * attn_safetensors_close. */
typedef struct {
    const char *name;       /* tensor name as in the header */
    const char *dtype_name; /* dtype as in the header: "F32", "BF16", "I8", ... */
    int dtype;              /* the matching attn_dtype (F32, F16, BF16, BOOL, I32, I64, F64),
                               or -1 when attn has no such dtype (I8, U8, I16, ...) */
    size_t elem_size;       /* bytes per element of the file dtype */
    int ndim;               /* number of dims (0 for a scalar; may exceed ATTN_MAX_DIMS) */
    const int64_t *shape;   /* ndim extents, PyTorch order */
    int64_t numel;          /* product of the extents (1 for a scalar) */
    uint64_t data_offset;   /* begin, in bytes from the start of the data section */
    uint64_t nbytes;        /* end - begin == numel * elem_size */
} attn_safetensors_info;

/* attn_safetensors_open: open the safetensors file at `path` by mapping it read-only
 * (mmap) and validate its header. On success *out is a new handle; close it with
 * attn_safetensors_close. On failure *out is NULL.
 * Validation, each failure ATTN_E_FORMAT with a message naming the tensor concerned:
 * file shorter than 8 bytes; header length larger than the file minus 8 or than
 * ATTN_SAFETENSORS_MAX_HEADER (checked before anything is allocated); header not JSON or
 * not an object, or followed by anything other than whitespace; an entry that is not an
 * object or lacks "dtype" (string), "shape" (array of integers >= 0) or "data_offsets"
 * (array of two integers >= 0); begin > end; end beyond the data section; end - begin not
 * equal to product(shape) x dtype size; the product of the non-zero extents not fitting
 * in int64 (checked even when another extent is 0); two tensors whose
 * byte ranges overlap (zero-size tensors never overlap); a repeated tensor name;
 * "__metadata__" not an object of strings (null is accepted as "no metadata").
 * Other errors: ATTN_E_DTYPE for an unknown dtype name, ATTN_E_IO when the file cannot be
 * opened, is not a regular file or cannot be mapped, ATTN_E_NOMEM, ATTN_E_INVALID for
 * NULL arguments. The file must not be truncated while it is open (the mapping would
 * fault). */
int attn_safetensors_open(attn_safetensors **out, const char *path);

/* attn_safetensors_open_memory: the same as attn_safetensors_open for a file image of
 * `size` bytes held in memory. The bytes are not copied: the caller keeps `data` alive and
 * unchanged until attn_safetensors_close. Errors as for attn_safetensors_open (no
 * ATTN_E_IO). */
int attn_safetensors_open_memory(attn_safetensors **out, const void *data, size_t size);

/* attn_safetensors_close: unmap / release everything. NULL-safe. Views returned by
 * attn_safetensors_get_f32 that point into the file become invalid. */
void attn_safetensors_close(attn_safetensors *st);

/* attn_safetensors_count: number of tensors (not counting "__metadata__"); 0 for NULL. */
int attn_safetensors_count(const attn_safetensors *st);

/* attn_safetensors_name: name of tensor `index` (0 <= index < count, in header order), or
 * NULL when index is out of range or st is NULL. */
const char *attn_safetensors_name(const attn_safetensors *st, int index);

/* attn_safetensors_find: index of the tensor called `name`, or -1 when there is none (or
 * an argument is NULL). O(log n). */
int attn_safetensors_find(const attn_safetensors *st, const char *name);

/* attn_safetensors_info_at: describe tensor `index` (see attn_safetensors_info).
 * Errors: ATTN_E_INVALID for NULL arguments, ATTN_E_RANGE for an index out of range. */
int attn_safetensors_info_at(attn_safetensors_info *out, const attn_safetensors *st, int index);

/* attn_safetensors_data: raw little-endian bytes of tensor `index` inside the file image
 * (read-only; nbytes == numel * elem_size; no alignment guarantee). For dtypes that
 * attn_safetensors_get_f32 does not read (I64 token ids, BOOL masks, ...).
 * Errors: ATTN_E_INVALID for NULL arguments, ATTN_E_RANGE for an index out of range. */
int attn_safetensors_data(const void **data, uint64_t *nbytes, const attn_safetensors *st,
                          int index);

/* attn_safetensors_get_f32: a contiguous float32 view (dtype ATTN_F32, shape as in the
 * file, PyTorch order) of the tensor called `name`.
 *   - F32 whose data is 4-byte aligned in memory (on a little-endian host): zero-copy, the
 *     view points into the file image, which is READ-ONLY (never write through out->data;
 *     a mapped file faults) and valid until attn_safetensors_close. `arena` may be NULL.
 *   - F32 unaligned, F16 and BF16: converted exactly into numel floats allocated from
 *     `arena` (which must then be non-NULL), valid until the arena is reset/released.
 * Errors: ATTN_E_INVALID for NULL st/name/out, a NULL arena when a copy is needed, or a
 * missing tensor ("tensor 'x' not found"); ATTN_E_DTYPE for any other dtype ("tensor 'x':
 * dtype I8 not supported"); ATTN_E_UNSUPPORTED when the tensor has more than ATTN_MAX_DIMS
 * dims; ATTN_E_NOMEM when the arena cannot allocate. *out is unchanged on error. */
int attn_safetensors_get_f32(const attn_safetensors *st, const char *name, attn_tensor *out,
                             attn_arena *arena);

/* attn_safetensors_get_f32_shape: attn_safetensors_get_f32 after checking that the tensor
 * has exactly the expected shape shape[0..ndim) (PyTorch order). A mismatch is ATTN_E_SHAPE
 * with a message like "bert.pooler.dense.weight: expected [384, 384], got [384, 385]" and
 * is reported before any conversion. ATTN_E_INVALID when ndim is outside 0..ATTN_MAX_DIMS
 * or shape is NULL with ndim > 0. Other errors as for attn_safetensors_get_f32. */
int attn_safetensors_get_f32_shape(const attn_safetensors *st, const char *name,
                                   attn_tensor *out, attn_arena *arena, int ndim,
                                   const int64_t *shape);

/* attn_safetensors_metadata: value of "__metadata__"[key], or NULL when the file has no
 * such key (or an argument is NULL). Valid until attn_safetensors_close. */
const char *attn_safetensors_metadata(const attn_safetensors *st, const char *key);

/* attn_safetensors_metadata_count: number of "__metadata__" entries (0 when absent). */
int attn_safetensors_metadata_count(const attn_safetensors *st);

/* attn_safetensors_metadata_at: key and value of metadata entry `index` (header order).
 * Either output may be NULL when not wanted. Errors: ATTN_E_INVALID for a NULL st,
 * ATTN_E_RANGE for an index out of range. */
int attn_safetensors_metadata_at(const char **key, const char **value,
                                 const attn_safetensors *st, int index);

/* attn_safetensors_write: write a safetensors file to f: the tensors (F32, F16, BF16, I32 or I64,
 * contiguous; shapes in PyTorch order) named names[0..n) in that order, and optional string
 * metadata ("__metadata__"). The header is padded with spaces to a multiple of 8 bytes.
 * Errors: ATTN_E_INVALID (NULL, an empty / duplicate / "__metadata__" name, a duplicate metadata
 * key, a non-contiguous tensor), ATTN_E_DTYPE (another dtype), ATTN_E_IO (a write failed),
 * ATTN_E_NOMEM. Source: huggingface/safetensors README "Format" (src/formats/safetensors_write.c). */
int attn_safetensors_write(FILE *f, int n, const char *const *names, const attn_tensor *const *tensors, int n_meta,
                           const char *const *meta_keys, const char *const *meta_values);

/* attn_safetensors_save: attn_safetensors_write to `path` atomically (attn_io.h: complete or
 * untouched). Errors: as attn_safetensors_write and attn_out_open / attn_out_commit. */
int attn_safetensors_save(const char *path, int n, const char *const *names, const attn_tensor *const *tensors, int n_meta,
                          const char *const *meta_keys, const char *const *meta_values);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_SAFETENSORS_H */
