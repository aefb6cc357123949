/*
 * attn_core.h — status codes, error messages, tensor views and the arena.
 *
 * Conventions used by every attn_ function:
 *   - Return value: 0 (ATTN_OK) on success, a negative attn_status on failure. On failure
 *     a readable message is stored per thread; read it with attn_last_error(). The library
 *     never calls exit() or abort().
 *   - Argument order: outputs first, then const inputs, then sizes (llm.c style).
 *   - Shapes are given in PyTorch order, e.g. [B, H, L, D] = batch, heads, sequence, head_dim.
 *   - Strides are in ELEMENTS, not bytes (like torch.Tensor.stride()).
 */
#ifndef ATTN_CORE_H
#define ATTN_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- status */

typedef enum {
    ATTN_OK = 0,
    ATTN_E_INVALID = -1,   /* invalid argument (NULL pointer, bad option value) */
    ATTN_E_SHAPE = -2,     /* tensor shapes do not fit together */
    ATTN_E_DTYPE = -3,     /* unsupported or mismatched dtype */
    ATTN_E_NOMEM = -4,     /* allocation failed */
    ATTN_E_IO = -5,        /* file could not be opened / read / written */
    ATTN_E_FORMAT = -6,    /* malformed file contents (npy, safetensors, json, ...) */
    ATTN_E_RANGE = -7,     /* index or value out of range (token id, position, NaN in a mask) */
    ATTN_E_UNSUPPORTED = -8 /* valid request this build or CPU cannot serve */
} attn_status;

/* attn_status_str: a constant English string for a status code ("ok", "invalid argument",
 * ...). Unknown codes give "unknown status". Never returns NULL. */
const char *attn_status_str(int status);

/* attn_last_error: the message set by the last failing attn_ call on this thread
 * (thread-local storage), or "" if none. The pointer stays valid until the next attn_ call
 * on the same thread. */
const char *attn_last_error(void);

/* attn_clear_error: reset this thread's last-error message to "". */
void attn_clear_error(void);

/* attn_set_error: store a printf-style message for this thread and return `status`, so a
 * failing path can write `return attn_set_error(ATTN_E_SHAPE, "q has %d dims", n);`.
 * Messages longer than 511 bytes are truncated. */
int attn_set_error(int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ---------------------------------------------------------------- dtypes */

typedef enum {
    ATTN_F32 = 0,  /* IEEE-754 binary32 */
    ATTN_F16 = 1,  /* IEEE-754 binary16 ("half"; attn_sdpa inputs/outputs, computed in float32) */
    ATTN_BF16 = 2, /* bfloat16 = the top 16 bits of a binary32 (attn_sdpa inputs/outputs) */
    ATTN_BOOL = 3, /* one byte per element, 0 = false, non-zero = true */
    ATTN_I32 = 4,
    ATTN_I64 = 5,
    ATTN_F64 = 6
} attn_dtype;

/* attn_dtype_size: element size in bytes (F32 4, F16 2, BF16 2, BOOL 1, I32 4, I64 8,
 * F64 8); 0 for an unknown dtype. */
size_t attn_dtype_size(attn_dtype dt);

/* attn_dtype_name: "float32", "float16", "bfloat16", "bool", "int32", "int64", "float64",
 * or "unknown". */
const char *attn_dtype_name(attn_dtype dt);

/* ---------------------------------------------------------------- bfloat16 / float16 */

/* Scalar conversions between float32 and the 16-bit formats, stored as uint16_t bit patterns.
 * float32 -> half rounds to nearest, ties to even (IEEE 754 default; what VCVTPS2PH and
 * VCVTNEPS2BF16 do); overflow gives +-inf (float16: |x| >= 65520), +-inf stays +-inf, a NaN stays
 * a NaN of the same sign, made quiet (payload truncated), float16 subnormals are exact-rounded.
 * half -> float32 is exact. Sources: IEEE 754-2008 binary16; Intel "BFLOAT16 - Hardware Numerics
 * Definition" (2018) for bfloat16. No error cases. */
uint16_t attn_f32_to_bf16(float x);
/* attn_bf16_to_f32: exact (the bits shifted into the top half of a binary32). */
float attn_bf16_to_f32(uint16_t h);
/* attn_f32_to_f16: see above (round to nearest even, overflow to inf, NaN kept quiet). */
uint16_t attn_f32_to_f16(float x);
/* attn_f16_to_f32: exact, including subnormals, inf and NaN. */
float attn_f16_to_f32(uint16_t h);

/* attn_convert: dst[i] = src[i] for i < n, converting between ATTN_F32, ATTN_BF16 and ATTN_F16
 * with the rounding above (same dtype: a copy; float16 <-> bfloat16 goes through float32, which
 * holds both exactly, so it rounds once). Vectorised with AVX2 + F16C when the CPU has them
 * (bit-identical to the scalar functions). Errors: ATTN_E_INVALID (NULL buffer with n > 0),
 * ATTN_E_DTYPE (any other pair of dtypes). */
int attn_convert(void *dst, attn_dtype dst_dtype, const void *src, attn_dtype src_dtype, size_t n);

/* ---------------------------------------------------------------- tensor view */

#define ATTN_MAX_DIMS 8

/* A non-owning view: data pointer, dtype, shape and element strides. Head splits,
 * head merges and transposes are new views of the same memory (no copy). Shapes
 * with a 0 extent are allowed (empty tensors). */
typedef struct {
    void *data;
    attn_dtype dtype;
    int ndim;
    int64_t shape[ATTN_MAX_DIMS];
    int64_t stride[ATTN_MAX_DIMS]; /* in elements */
} attn_tensor;

/* attn_tensor_make: a contiguous (row-major, C order) view of `data` with the given
 * dtype and shape[0..ndim). ndim must be in 0..ATTN_MAX_DIMS and every extent >= 0.
 * Errors: ATTN_E_INVALID (bad ndim / negative extent / NULL out). */
int attn_tensor_make(attn_tensor *out, void *data, attn_dtype dtype, int ndim,
                     const int64_t *shape);

/* Convenience constructors for contiguous float32 views (no error: shapes are trusted;
 * use attn_tensor_make to validate user input). */
attn_tensor attn_tensor_f32_1d(float *data, int64_t d0);
/* [d0, d1] */
attn_tensor attn_tensor_f32_2d(float *data, int64_t d0, int64_t d1);
/* [d0, d1, d2], e.g. [B, L, E] */
attn_tensor attn_tensor_f32_3d(float *data, int64_t d0, int64_t d1, int64_t d2);
/* [d0, d1, d2, d3], e.g. [B, H, L, D] */
attn_tensor attn_tensor_f32_4d(float *data, int64_t d0, int64_t d1, int64_t d2, int64_t d3);

/* attn_tensor_numel: product of the extents (1 for a 0-dim tensor). */
int64_t attn_tensor_numel(const attn_tensor *t);

/* attn_tensor_is_contiguous: 1 if the strides are the row-major strides of the shape
 * (extents of 1 may have any stride), else 0. */
int attn_tensor_is_contiguous(const attn_tensor *t);

/* attn_tensor_transpose: out = t with dims d0 and d1 swapped (a view; torch.transpose).
 * Negative dims count from the end. Errors: ATTN_E_INVALID for a dim out of range. */
int attn_tensor_transpose(attn_tensor *out, const attn_tensor *t, int d0, int d1);

/* attn_tensor_split_heads: view [B, L, H*D] (last dim contiguous, stride 1) as
 * [B, H, L, D] without copying: out.stride = {sB, D, sL, 1}. This is
 * x.view(B, L, H, D).transpose(1, 2) in PyTorch. Errors: ATTN_E_SHAPE if t is not 3-D
 * or its last extent is not a multiple of n_heads, ATTN_E_INVALID if n_heads <= 0 or the
 * last dim is not unit-stride. */
int attn_tensor_split_heads(attn_tensor *out, const attn_tensor *t, int64_t n_heads);

/* attn_tensor_merge_heads: the inverse view: [B, H, L, D] whose memory is laid out as
 * [B, L, H, D] (as produced by split_heads, or by writing into such a view) is returned
 * as [B, L, H*D]. Errors: ATTN_E_SHAPE if t is not 4-D or its strides do not allow a
 * merge without copying (use attn_tensor_copy into a split view first). */
int attn_tensor_merge_heads(attn_tensor *out, const attn_tensor *t);

/* attn_tensor_copy: element-wise copy dst <- src for views of equal shape and dtype,
 * any strides. Errors: ATTN_E_SHAPE, ATTN_E_DTYPE. */
int attn_tensor_copy(attn_tensor *dst, const attn_tensor *src);

/* attn_tensor_convert: element-wise dst <- src for views of equal shape, any strides, between
 * float32, bfloat16 and float16 (rounding as attn_convert; equal dtypes: attn_tensor_copy).
 * Errors: ATTN_E_INVALID (NULL), ATTN_E_SHAPE, ATTN_E_DTYPE (a non-float dtype). */
int attn_tensor_convert(attn_tensor *dst, const attn_tensor *src);

/* attn_tensor_offset: element offset of index idx[0..ndim) (no bounds check). */
int64_t attn_tensor_offset(const attn_tensor *t, const int64_t *idx);

/* ---------------------------------------------------------------- arena */

/* A bump allocator made of a chain of blocks. Allocation is O(1); memory is released
 * all at once (attn_arena_reset) or back to a mark (attn_arena_release). When the
 * current block is full a new one of at least `block_bytes` is chained, so an arena
 * only fails when the system is out of memory. Not thread-safe: use one per thread. */
typedef struct attn_arena_block attn_arena_block;
typedef struct {
    attn_arena_block *head;  /* current block (most recent) */
    size_t block_bytes;      /* default size of a new block */
    size_t used_bytes;       /* bytes handed out and not released (statistics) */
    size_t peak_bytes;       /* high-water mark of used_bytes */
} attn_arena;

typedef struct {
    attn_arena_block *block;
    size_t offset;
    size_t used_bytes;
} attn_arena_mark;

/* attn_arena_init: an empty arena whose blocks are at least block_bytes (0 -> 1 MiB).
 * Nothing is allocated until the first attn_arena_alloc. Errors: ATTN_E_INVALID. */
int attn_arena_init(attn_arena *a, size_t block_bytes);

/* attn_arena_alloc: `bytes` bytes aligned to 64 bytes, uninitialised; NULL (and
 * attn_last_error set, ATTN_E_NOMEM) on allocation failure or size overflow. A request of
 * 0 bytes returns a valid unique pointer. */
void *attn_arena_alloc(attn_arena *a, size_t bytes);

/* attn_arena_alloc_f32: n floats, zero-initialised. NULL on failure. */
float *attn_arena_alloc_f32(attn_arena *a, size_t n);

/* attn_arena_alloc_f32_uninit: n floats, NOT initialised (for buffers that are fully
 * overwritten, e.g. GEMM outputs). NULL on failure (size overflow / out of memory). */
float *attn_arena_alloc_f32_uninit(attn_arena *a, size_t n);

/* attn_arena_mark / attn_arena_release: remember the current top and later free
 * everything allocated after the mark (blocks chained after it are freed). */
attn_arena_mark attn_arena_get_mark(const attn_arena *a);
/* attn_arena_release: free everything allocated after mark m (see above). */
void attn_arena_release(attn_arena *a, attn_arena_mark m);

/* attn_arena_reset: free every block (the arena stays usable). */
void attn_arena_reset(attn_arena *a);

/* attn_arena_free: same as reset; the arena may be re-initialised. */
void attn_arena_free(attn_arena *a);

/* ---------------------------------------------------------------- threads */

/* ATTN_MAX_THREADS: the largest thread count attn accepts (as the CLI's --threads). */
#define ATTN_MAX_THREADS 4096

/* attn_set_num_threads: the OpenMP thread count used by attn kernels (n <= 0 -> number of
 * cores). attn keeps OpenBLAS single-threaded and splits large GEMMs across its own threads,
 * so only one thread pool is ever busy (no oversubscription). Returns the count in effect.
 * Errors: ATTN_E_RANGE for n > ATTN_MAX_THREADS (the count in effect is unchanged). */
int attn_set_num_threads(int n);
/* attn_get_num_threads: the count in effect (number of cores until set). */
int attn_get_num_threads(void);

/* attn_version: "MAJOR.MINOR.PATCH". */
const char *attn_version(void);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_CORE_H */
