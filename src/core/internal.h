/* Private helpers shared across src/ (not installed). Names use the attn__ prefix. */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include "attn_core.h"
#include "core/cpu.h" /* attn__cpu_has: every SIMD dispatcher asks the CPU through it */
#include <stddef.h>
#include <stdint.h>

/* Propagate a failing status: ATTN_TRY(expr) returns expr's status when negative. */
#define ATTN_TRY(expr)            \
    do {                          \
        int attn__rc = (expr);    \
        if (attn__rc < 0) return attn__rc; \
    } while (0)

/* Release every pointer of a list with free() (NULL entries are fine, as for free()): one call for
 * the release functions of structs that own several malloc'ed buffers, e.g.
 * ATTN_FREE_ALL(c->k, c->v, c->len). Pointers to const need a cast to void *. */
void attn__free_each(void *const *ptrs, size_t n);
#define ATTN_FREE_ALL(...) \
    attn__free_each((void *const[]){__VA_ARGS__}, sizeof((void *const[]){__VA_ARGS__}) / sizeof(void *))

/* attn__blas_init: put OpenBLAS in single-thread mode once (see core/threads.c); called by
 * attn_get_num_threads / attn_set_num_threads, so any path that asks for a thread count is covered. */
void attn__blas_init(void);

/* IEEE binary16 / bfloat16 <-> binary32 (exact for f16->f32 and bf16->f32; f32->bf16
 * rounds to nearest even, NaN stays NaN). */
float attn__f16_to_f32(uint16_t h);
float attn__bf16_to_f32(uint16_t b);
uint16_t attn__f32_to_bf16(float f);

/* Bulk conversion with the SIMD path allowed (simd = 1: AVX2 + F16C when the CPU has them) or
 * forced off (simd = 0: portable C); results are bit-identical. Same contract as attn_convert. */
int attn__convert_path(void *dst, attn_dtype dst_dtype, const void *src, attn_dtype src_dtype, size_t n, int simd);
/* 1 if attn__convert_path's SIMD path can run on this CPU. */
int attn__convert_simd_supported(void);
/* 1 for ATTN_F32, ATTN_BF16 and ATTN_F16. */
int attn__is_float_dtype(attn_dtype dt);
/* Convert nrows x ncols elements between float dtypes; strides in elements (row stride, column
 * stride) for each side. Contiguous rows go through attn_convert. */
void attn__convert_rows(void *dst, attn_dtype ddt, int64_t drs, int64_t dcs, const void *src, attn_dtype sdt,
                        int64_t srs, int64_t scs, int64_t nrows, int64_t ncols);

/* attn__check_same_shape: ATTN_OK when dst and src have the same rank and extents, else
 * ATTN_E_SHAPE "WHO: 2-D vs 3-D" / "WHO: extent I differs (A vs B)" (who: the public function). */
int attn__check_same_shape(const attn_tensor *dst, const attn_tensor *src, const char *who);

/* One element of a float tensor (F32, BF16 or F16) as float32, and the reverse (RNE). */
/* the calling thread's number in an OpenMP parallel region (0 outside one, or without OpenMP) */
#ifdef _OPENMP
#include <omp.h>
static inline int attn__omp_tid(void) { return omp_get_thread_num(); }
#else
static inline int attn__omp_tid(void) { return 0; }
#endif

static inline float attn__load_f32(const void *p, attn_dtype dt) {
    if (dt == ATTN_F32) return *(const float *)p;
    if (dt == ATTN_BF16) return attn_bf16_to_f32(*(const uint16_t *)p);
    return attn_f16_to_f32(*(const uint16_t *)p);
}
static inline void attn__store_f32(void *p, attn_dtype dt, float x) {
    if (dt == ATTN_F32) *(float *)p = x;
    else if (dt == ATTN_BF16) *(uint16_t *)p = attn_f32_to_bf16(x);
    else *(uint16_t *)p = attn_f32_to_f16(x);
}

/* attn__map_readonly: map the regular file at path read-only (mmap, MAP_PRIVATE) for a weight
 * reader. *map = NULL for an empty file (nothing mapped), else release with munmap(*map, *size).
 * Errors: ATTN_E_IO "cannot open PATH: ...", "PATH is not a regular file", "cannot map PATH: ...". */
int attn__map_readonly(const char *path, void **map, size_t *size);
/* attn__map_release: give back the pages wholly inside [p, p + n) of such a mapping
 * (madvise MADV_DONTNEED: the process no longer holds them; a later read maps the file's bytes in
 * again). Only for read-only file mappings (attn__map_readonly's), where nothing can be lost. */
void attn__map_release(const void *p, size_t n);

/* attn__read_file: the whole file at path (at most max_bytes) into a malloc'ed buffer *data with a
 * NUL after the last byte (*len excludes it; free with free()). Errors: ATTN_E_IO "cannot open PATH:
 * ..." / "cannot read PATH: ..." (also for a directory), the status too_large (ATTN_E_RANGE or
 * ATTN_E_FORMAT, as the caller documents it) "PATH is larger than N bytes", ATTN_E_NOMEM. */
int attn__read_file(const char *path, size_t max_bytes, int too_large, char **data, size_t *len);

/* attn__decode_file: attn__read_file(path, max_bytes, ATTN_E_RANGE) and then decode(out, bytes,
 * size) on them (the buffer is freed after); a failure of either gets the "PATH: " prefix. For the
 * loaders whose in-memory decoder does the work (attn_image_load, attn_idx_load). */
int attn__decode_file(const char *path, size_t max_bytes, int (*decode)(void *out, const void *data, size_t size),
                      void *out);

/* attn__error_prefix: the current message becomes "PREFIX: message" (e.g. the path of the file a
 * parser failed on); returns status. */
int attn__error_prefix(int status, const char *prefix);

/* attn__printable: s for an error message: printable ASCII kept, every other byte written as
 * \xNN (and a backslash as \\); cut with "..." to fit dst[cap] (cap >= 8). Returns dst. */
const char *attn__printable(char *dst, size_t cap, const char *s);

/* Element i of a float32 view of any rank given a flat row-major index over its shape. */
static inline float *attn__f32_at4(const attn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return (float *)t->data + a * t->stride[0] + b * t->stride[1] + c * t->stride[2] + d * t->stride[3];
}

/* attn__out_resolve (core/io.c): where output `path` goes, for attn_out_open and the CLI.
 *   ATTN__OUT_STDOUT  "-" (*fd = 1);
 *   ATTN__OUT_FD      path, or a symbolic link on the way to its file, names one of this
 *                     process's descriptors: /dev/stdout, /dev/fd/N, /proc/self/fd/N, bash's
 *                     >(cmd). *fd = N: written through to it, never replaced;
 *   ATTN__OUT_DEVICE  an existing file that is not a regular file (a device, a FIFO, a socket):
 *                     written through by opening *target (malloc'ed);
 *   ATTN__OUT_RENAME  a regular file, a new path or a dangling link: *target (malloc'ed) is the
 *                     file to rename a complete temporary over (a link's file; the link is kept).
 * Errors (negative status, message set): a directory, an unreadable path, out of memory. */
enum { ATTN__OUT_RENAME = 0, ATTN__OUT_STDOUT = 1, ATTN__OUT_DEVICE = 2, ATTN__OUT_FD = 3 };
int attn__out_resolve(const char *path, char **target, int *fd);

/* attn__out_remove_temps: unlink every temporary output file of attn_out that exists now (the
 * library's ".NAME.XXXXXX.tmp" files). Async-signal-safe: for a SIGINT / SIGTERM handler,
 * which then re-raises the signal. */
void attn__out_remove_temps(void);

#endif
