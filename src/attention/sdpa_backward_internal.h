/* Private to src/attention and the tests: the SDPA backward (sdpa_backward.c, its tile kernels in
 * sdpa_backward_tmpl.h, and the float64 reference sdpa_backward_ref.c). */
#ifndef ATTN_SDPA_BACKWARD_INTERNAL_H
#define ATTN_SDPA_BACKWARD_INTERNAL_H

#include "attention/sdpa_internal.h"

#include <stddef.h>
#include <stdint.h>

#define ATTN__BW_BQ 64 /* default query rows per tile */
#define ATTN__BW_BK 64 /* default keys per tile */

typedef struct {
    const attn_tensor *q, *k, *v, *out, *lse, *dout;
    attn_tensor *dq, *dk, *dv;
    const attn_sdpa_params *p;
    attn__mask_view mv;
    int64_t B, H, Hkv, Lq, Lk, D, Dv, group;
    float scale;
    int bq, bk;          /* tile sizes (bk a multiple of 16) */
    int64_t nqb, nkb;    /* query / key blocks per head */
    const float *delta;  /* [B*H*Lq] Δ_i = sum_e dout·out */
} attn__bwctx;

/* Validation shared by both implementations (everything attn_sdpa_backward's doc lists, inputs
 * scanned for NaN / inf); fills the sizes, mask view, scale and group of c. */
int attn__sdpa_backward_check(attn__bwctx *c, attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *v, const attn_tensor *out,
                              const attn_tensor *lse, const attn_tensor *dout, const attn_sdpa_params *p);

/* ATTN_E_RANGE when dq, dk or dv holds a non-finite value (an overflow), else ATTN_OK. */
int attn__sdpa_backward_post_check(const attn_tensor *dq, const attn_tensor *dk, const attn_tensor *dv);

/* Knobs for tests: path ATTN__SIMD_* (AUTO = ATTN_SIMD / best; AVX-512 runs the AVX2 kernels),
 * bq / bk tile sizes (0 = defaults; bk is rounded up to a multiple of 16). */
typedef struct {
    int path;
    int bq, bk;
} attn__bw_opts;

int attn__sdpa_backward_ex(attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                           const attn_tensor *k, const attn_tensor *v, const attn_tensor *out, const attn_tensor *lse,
                           const attn_tensor *dout, const attn_sdpa_params *p, const attn__bw_opts *opts);

/* Bytes the tiled backward allocates for a problem (Δ plus nt per-thread scratch slices); the
 * implementation allocates exactly this, so tests can state its memory. bq / bk as in opts. */
size_t attn__sdpa_backward_workspace_bytes(int64_t B, int64_t H, int64_t Lq, int64_t D, int64_t Dv, int bq, int bk,
                                           int nt);

/* Name of the SIMD path the backward runs for opts->path ("avx2" or "portable"), or NULL. */
const char *attn__sdpa_backward_path_name(int path);

#endif
