/* Private to src/attention and the tests: the fused (FlashAttention-style) SDPA kernel.
 *
 * Layout used by every SIMD path (see sdpa_fused.c for the full description):
 *   a block of up to BQ query rows is packed TRANSPOSED and pre-scaled, QT[d][i] = q[i][d]·scale,
 *   so that the score block is computed as ST[j][i] = sum_d K[j][d]·QT[d][i] with SIMD lanes
 *   running over query rows i. The online-softmax statistics (running max m, running sum l,
 *   rescale factor alpha) are then plain element-wise vector operations over i, and the output
 *   accumulator is also kept transposed, OT[e][i] += V[j][e]·PT[j][i]. K and V are only ever
 *   read through scalar broadcasts, so they are used in place with any strides (no packing).
 */
#ifndef ATTN_FUSED_INTERNAL_H
#define ATTN_FUSED_INTERNAL_H

#include "attn_attention.h"
#include "core/simd_math.h"
#include <stdint.h>

/* SIMD paths. */
enum {
    ATTN__SIMD_AUTO = -1,    /* ATTN_SIMD env var, else the best the CPU supports */
    ATTN__SIMD_PORTABLE = 0, /* plain C */
    ATTN__SIMD_AVX2 = 1,     /* AVX2 + FMA, 8 lanes */
    ATTN__SIMD_AVX512 = 2    /* AVX-512F, 16 lanes */
};

/* 1 when a resolved path runs code compiled for AVX2 + FMA (the AVX2 path, and the AVX-512
 * path's machines: kernels with no AVX-512 version of their own, sdpa_short.c and
 * train/vit_kernels.c, take their AVX2 build there) */
static inline int attn__path_has_avx2(int path) { return path == ATTN__SIMD_AVX2 || path == ATTN__SIMD_AVX512; }

/* Kernel table of one SIMD path. All float buffers handed to the block kernels are 64-byte
 * aligned and `ld` (the row stride of the transposed blocks, in floats) is a multiple of 16;
 * nqp (padded number of query rows of the block) is a multiple of 16 and <= ld. */
typedef struct {
    int path;
    const char *name;
    /* ST[j*ld + i] = sum_d K[j*ksj + d*ksd] * QT[d*ld + i], j < nk, i < nqp; when colmax is not
     * NULL also colmax[i] = max(colmax[i], max_j ST[j][i]) (computed from the registers). */
    void (*s_block)(float *ST, int ld, int nqp, const float *QT, const float *K, int64_t ksj, int64_t ksd, int nk,
                    int64_t D, float *colmax);
    /* Online softmax over a score block, per query column i < nqp (bmax = colmax[i] when colmax is
     * not NULL — it must then be max_j ST[j][i] — else computed here):
     *   mnew = max(m[i], bmax); alpha[i] = exp(m[i] - mnew) (0 when m[i] = -inf);
     *   ST[j][i] = exp(ST[j][i] - mnew) (0 for -inf scores); l[i] = l[i]·alpha[i] + sum_j ST[j][i];
     *   m[i] = mnew. A column whose scores are all -inf keeps m = -inf and gets P = 0. */
    void (*softmax_block)(float *ST, int ld, int nqp, int nk, const float *colmax, float *m, float *l, float *alpha);
    /* OT[e*ld + i] = OT[e*ld + i]·alpha[i] + sum_{j<nk} V[j*vsj + e*vsd]·PT[j*ld + i], e < Dv, i < nqp. */
    void (*pv_block)(float *OT, int ld, int nqp, const float *PT, const float *alpha, const float *V, int64_t vsj,
                     int64_t vsd, int nk, int64_t Dv);
    /* Row (decode) kernels; K and V rows must be unit-stride. s[j] = q · K[j*ksj + 0..D). */
    void (*row_dots)(float *s, const float *q, const float *K, int64_t ksj, int nk, int64_t D);
    float (*row_max)(const float *s, int n);
    /* s[j] = exp(s[j] - msub) in place; returns the sum. */
    float (*row_exp_sum)(float *s, int n, float msub);
    /* acc[e] = sum_j p[j]·V[j*vsj + e], e < Dv (acc is overwritten). */
    void (*row_pv)(float *acc, const float *p, const float *V, int64_t vsj, int nk, int64_t Dv);
    /* x[j] = exp(x[j] - msub)·mul in place (final normalisation of attention weights). */
    void (*exp_scale)(float *x, int64_t n, float msub, float mul);
    /* QT[d*ld + i] = q[i*qsi + d]·scale for i < nq, d < D; 0 for nq <= i < nqp (q rows unit-stride). */
    void (*pack_qt)(float *QT, int ld, int nq, int nqp, const float *q, int64_t qsi, int64_t D, float scale);
    /* o[i*osi + e] = OT[e*ld + i] / l[i] (0 when l[i] == 0) for i < nq, e < Dv (o rows unit-stride). */
    void (*store_out)(float *o, int64_t osi, const float *OT, int ld, int nq, const float *l, int64_t Dv);
    /* y[j] = exp(x[j]) — the path's vectorised exp, exposed for the accuracy test. */
    void (*exp_n)(float *y, const float *x, int64_t n);
} attn__fused_kernels;

/* Lanes of a fixed-width loop are independent: let the vectoriser have them (-fopenmp is part of
 * the build; without OpenMP the pragma is simply absent and the loops stay scalar). */
#ifdef _OPENMP
#define ATTN__PSIMD _Pragma("omp simd")
#else
#define ATTN__PSIMD
#endif

/* Kernel tables. The SIMD ones return NULL when not compiled in (non-x86 builds); they do not
 * check the CPU: use attn__fused_path_supported first. */
const attn__fused_kernels *attn__fused_kernels_portable(void);
const attn__fused_kernels *attn__fused_kernels_avx2(void);
const attn__fused_kernels *attn__fused_kernels_avx512(void);

/* 1 if the path is compiled in and this CPU (and OS) can run it. */
int attn__fused_path_supported(int path);
/* The best supported path (ignores ATTN_SIMD). */
int attn__fused_best_path(void);
/* Resolve ATTN__SIMD_AUTO: reads ATTN_SIMD (avx512 | avx2 | portable | auto, re-read on every
 * call) and returns the path, or a negative status (attn_set_error) for an unknown value or a
 * path this CPU cannot run. An explicit path is checked the same way. */
int attn__fused_resolve_path(int path);

/* The vectorised exp of every path is the shared one (core/simd_math.h); its accuracy bound on
 * [-87, 0], max |exp_n(x) - exp(x)| / exp(x), measured by tests/test_fused.c. */
#define ATTN__FUSED_EXP_MAX_REL_ERR ATTN__EXP_MAX_REL_ERR

/* Knobs for tests and benchmarks; zero-initialise and set what you need. */
typedef struct {
    int path;       /* ATTN__SIMD_* (0 = portable!); use ATTN__SIMD_AUTO for the default */
    int block_q;    /* query rows per tile, multiple of 16 (0 = default 64) */
    int block_k;    /* keys per tile (0 = default for the path) */
    int split;      /* key-range splits per query row / tile (0 = automatic, >= 1 forced; ignored
                       when weights are requested) */
    int row_max_lq; /* Lq <= this uses the one-row (decode) kernel (0 = default 4, -1 = never) */
} attn__fused_opts;

/* attn__fused_opts with path = ATTN__SIMD_AUTO and everything else default. */
attn__fused_opts attn__fused_opts_default(void);

/* The fused kernel with explicit options (opts NULL = defaults). Same contract as attn_sdpa. */
int attn__sdpa_fused_ex(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                        const attn_tensor *v, const attn_sdpa_params *p, const attn__fused_opts *opts);

/* The fused kernel as attn_sdpa uses it (ATTN_SIMD honoured). */
int attn__sdpa_fused(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                     const attn_tensor *v, const attn_sdpa_params *p);

#endif
