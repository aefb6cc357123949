/*
 * attn_npy.h — NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 * Source: the NumPy format specification (numpy/lib/format.py, "NEP 1").
 */
#ifndef ATTN_NPY_H
#define ATTN_NPY_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* attn_npy_load: read a .npy file into a new contiguous tensor. out->data is allocated
 * with malloc and must be released with attn_npy_free(out).
 * Accepted: little-endian (or byte-order-free) dtypes '<f4' (ATTN_F32), '|b1' (ATTN_BOOL),
 * '<f8' (ATTN_F64), '<i4' (ATTN_I32), '<i8' (ATTN_I64), '<f2' (ATTN_F16); C order only;
 * 0 to ATTN_MAX_DIMS dims.
 * Errors: ATTN_E_IO (missing / unreadable file), ATTN_E_FORMAT (bad magic, bad version,
 * malformed header dict, fortran_order True, data shorter than the shape says, trailing
 * garbage is ignored), ATTN_E_DTYPE (big-endian or other dtype, e.g. '>f4', '<c8', '|O').
 * Never crashes on a truncated or hostile file. */
int attn_npy_load(attn_tensor *out, const char *path);

/* attn_npy_free: free out->data from attn_npy_load and zero the view. NULL-safe. */
void attn_npy_free(attn_tensor *t);

/* attn_npy_map: the .npy file at path as a read-only tensor m->t, without a copy where it can:
 * a regular file whose data is in this machine's byte order, aligned to its element size and
 * not empty is mapped (mmap, MAP_PRIVATE, pages populated up front); anything else (a pipe, a
 * big-endian or unaligned file, no elements) is read as attn_npy_load does. The same checks and
 * errors as attn_npy_load. m->t.data must not be written to, and the file must not be shortened
 * while mapped (reading a truncated page raises SIGBUS, as for any mapping). Release with
 * attn_npy_unmap (NULL-safe; it zeroes m). */
typedef struct {
    attn_tensor t;  /* the tensor, contiguous, in the file's shape and dtype */
    void *map;      /* the mapping (NULL when the data was read into malloc'ed memory) */
    size_t map_len;
} attn_npy_mapped;
/* Map (or read) the .npy at path into *m: m->t any shape, float32 / float16 / int / bool as
 * stored, little-endian. Returns ATTN_OK, or ATTN_E_IO / ATTN_E_FORMAT / ATTN_E_NOMEM with the
 * message attn_npy_load gives (NumPy's format spec, v1-3). */
int attn_npy_map(attn_npy_mapped *m, const char *path);
/* Release what attn_npy_map made (unmap or free); NULL-safe, zeroes *m; no error. */
void attn_npy_unmap(attn_npy_mapped *m);

/* attn_npy_save: write t (any strides; F32, F64, BOOL, I32, I64, F16) as a version 1.0
 * .npy file in C order. Errors: ATTN_E_IO, ATTN_E_DTYPE. */
int attn_npy_save(const char *path, const attn_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
