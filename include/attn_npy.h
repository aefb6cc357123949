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

/* attn_npy_save: write t (any strides; F32, F64, BOOL, I32, I64, F16) as a version 1.0
 * .npy file in C order. Errors: ATTN_E_IO, ATTN_E_DTYPE. */
int attn_npy_save(const char *path, const attn_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
