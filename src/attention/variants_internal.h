/* Private to the attention variants (src/attention/variants_*.c): the per-call context
 * (sizes, key validity, real spans, user mask), the pattern's key ranges per query row,
 * deterministic RNGs, and row gathers. */
#ifndef ATTN_VARIANTS_INTERNAL_H
#define ATTN_VARIANTS_INTERNAL_H

#include "attn_sampling.h"
#include "attn_variants.h"
#include "attention/sdpa_internal.h"
#include "attention/fused_internal.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* A half-open range [lo, hi) of key indices. */
typedef struct {
    int64_t lo, hi;
} attn__krange;

typedef struct {
    const attn_variant_params *p;
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    unsigned char *valid; /* [B, Lk]: 1 = real key (key_lengths and key_padding_mask) */
    int64_t *span_lo;     /* [B]: first real key (0 when none) */
    int64_t *span_hi;     /* [B]: one past the last real key (span_lo when none) */
    attn__mask_view mv;   /* user mask (present = 0 when none) */
    unsigned char *simple; /* [B]: 1 when no user mask and no padding hole inside the real span */
    int64_t range_cap;    /* capacity needed by attn__row_ranges' output */
    int64_t block_cap;    /* capacity needed by its block scratch */
} attn__vctx;

/* Build the context (validity, spans, mask view). Sizes must already be checked. */
int attn__vctx_init(attn__vctx *c, const attn_variant_params *p, int64_t B, int64_t H, int64_t Hkv, int64_t Lq,
                    int64_t Lk, int64_t D, int64_t Dv);
void attn__vctx_free(attn__vctx *c);

/* Keys of the pattern (with the causal bound, clipped to the real span) of query row i of
 * batch row b and query head h, as sorted disjoint ranges of global key indices. r must hold
 * c->range_cap entries, blk c->block_cap. Returns the number of ranges. Per-key validity
 * (holes in key_padding_mask) and the user mask are NOT applied here. */
int64_t attn__row_ranges(const attn__vctx *c, int64_t b, int64_t h, int64_t i, attn__krange *r, int64_t *blk);

/* Clip ranges to [0, lim), drop empty ones, sort by start and merge overlapping or
 * touching ones (in place). Returns the new count. */
int64_t attn__ranges_normalise(attn__krange *r, int64_t n, int64_t lim);

/* Rows i1 and i2 of batch row b may share a tile (same kind of row: global or not, same
 * bigbird query block). */
int64_t attn__row_class(const attn__vctx *c, int64_t b, int64_t i);

/* 1 if query row i of batch row b is a global row (longformer / bigbird: sees all keys). */
int attn__row_is_global(const attn__vctx *c, int64_t b, int64_t i);

/* A worker thread's failure (out of memory) recorded in the shared flag of a parallel region:
 * an atomic write, as any thread may set it while others read it. */
static inline void attn__set_failed(int *failed) {
#pragma omp atomic write
    *failed = 1;
}

/* Key j (of batch row b) visible to query (b, h, i) as far as validity and user mask go;
 * *bias receives the additive float-mask value (0 otherwise). */
static inline int attn__key_ok(const attn__vctx *c, int64_t b, int64_t h, int64_t i, int64_t j, float *bias) {
    *bias = 0.0f;
    if (!c->valid[b * c->Lk + j]) return 0;
    if (c->mv.present) {
        int64_t mo = b * c->mv.stride[0] + h * c->mv.stride[1] + i * c->mv.stride[2] + j * c->mv.stride[3];
        if (c->mv.is_bool) return ((const unsigned char *)c->mv.data)[mo] != 0;
        float m = ((const float *)c->mv.data)[mo];
        if (attn__mask_value_is_masked(m)) return 0;
        *bias = m;
    }
    return 1;
}

/* The implementations (arguments already checked by attn_variant_check). */
int attn__variant_sparse(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *v, const attn__vctx *c);
int attn__variant_linear(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *v, const attn__vctx *c);
int attn__variant_performer(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                            const attn_tensor *v, const attn__vctx *c);

/* Thread count for a call. */
static inline int attn__variant_threads(const attn_variant_params *p, int64_t work) {
    int nt = (p && p->n_threads > 0) ? p->n_threads : attn_get_num_threads();
    if (work < nt) nt = (int)(work > 0 ? work : 1);
    return nt < 1 ? 1 : nt;
}

/* Copy rows r0 .. r0+n-1 of t[b, h] (a 4-D float32 view, any strides) into dst [n, cols]. */
static inline void attn__gather_rows(float *dst, const attn_tensor *t, int64_t b, int64_t h, int64_t r0, int64_t n,
                                     int64_t cols) {
    const float *base = (const float *)t->data + b * t->stride[0] + h * t->stride[1];
    for (int64_t r = 0; r < n; r++) {
        const float *src = base + (r0 + r) * t->stride[2];
        if (t->stride[3] == 1) {
            if (cols > 0) memcpy(dst + r * cols, src, sizeof(float) * (size_t)cols);
        } else {
            for (int64_t d = 0; d < cols; d++) dst[r * cols + d] = src[d * t->stride[3]];
        }
    }
}

/* ---- deterministic random numbers: splitmix64 (seeding) and xoshiro256** (Blackman &
 * Vigna 2018). */
static inline uint64_t attn__splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* the generator itself is the library's attn_rng (xoshiro256**, seeded by splitmix64; decoding/sampling.c) */

/* Uniform integer in [0, n), n >= 1. */
static inline int64_t attn__rng_below(attn_rng *r, int64_t n) {
    int64_t x = (int64_t)(attn_rng_uniform(r) * (double)n);
    return x >= n ? n - 1 : x;
}

/* floor(a / b) for b > 0 and any sign of a. */
static inline int64_t attn__floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && (a < 0)) q--;
    return q;
}

/* Hot loops are compiled for AVX-512, AVX2 and the baseline, picked at load time (GCC
 * target_clones, x86-64 only); the arithmetic is the same IEEE float / double operations in
 * every clone (no FMA contraction in ISO C mode), only the vector width differs. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define ATTN__VCLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ATTN__VCLONES
#endif

/* exp(x) in float, vectorisable: the fused attention kernel's scalar exp (Cody-Waite reduction,
 * our own fitted degree-6 polynomial; relative error <= ATTN__FUSED_EXP_MAX_REL_ERR on [-87, 0];
 * 0 below -87 and for -inf). Arguments here are always <= 0 (x - row max, or elu's x <= 0). */
static inline float attn__expf(float x) { return attn__exp_scalar(x); }

/* elu(x) + 1 in float (Katharopoulos et al. 2020, eq. 7). */
static inline float attn__elu1f(float x) { return x > 0.0f ? x + 1.0f : attn__expf(x); }

/* Vector helpers (variants_common.c), cloned per ISA:
 *   attn__vmax:      max of x[0..n) (-inf for n = 0)
 *   attn__vexp_sum:  x[i] = exp(x[i] - sub) in place, returns the float64 sum
 *   attn__vscale:    x[i] *= a
 *   attn__velu1:     x[i] = elu(x[i]) + 1 */
float attn__vmax(const float *x, int64_t n);
double attn__vexp_sum(float *x, int64_t n, float sub);
void attn__vscale(float *x, int64_t n, float a);
void attn__velu1(float *x, int64_t n);

#endif
