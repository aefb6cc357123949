/* Fast paths of the ViT trainer (train_internal.h): GELU backward, LayerNorm forward and backward and the
 * bias-preloaded linear, in float32, split over attn's threads (core/pool.h). They replace, inside
 * attn_vit_trainer_*, the general ops (attn_activation_backward, attn_layernorm_backward in double)
 * where those cost more than the arithmetic. The attention of the trainer's short sequences is
 * attention/sdpa_short.c's. Same formulas; checked by tests/test_train_vit.c against the float64
 * torch fixture.
 * Determinism: every item (row block, element chunk) is computed on its own
 * and the LayerNorm parameter sums add fixed 32-row blocks in order, so the bits do not depend
 * on the thread count. Kernels: vit_kernels_tmpl.h, AVX2 + FMA or portable by ATTN_SIMD like the
 * fused attention. */
#include "attention/fused_internal.h"
#include "core/internal.h"
#include "core/pool.h"
#include "core/simd_math.h"
#include "train/train_internal.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#ifdef _OPENMP
#define VK_SIMD _Pragma("omp simd")
#define VK_PRAGMA(x) _Pragma(#x)
#define VK_SIMD_RED(a) VK_PRAGMA(omp simd reduction(+ : a))
#define VK_SIMD_RED2(a, b) VK_PRAGMA(omp simd reduction(+ : a, b))
#else
#define VK_SIMD
#define VK_SIMD_RED(a)
#define VK_SIMD_RED2(a, b)
#endif

#define VK_FN(x) x##_portable
#include "train/vit_kernels_tmpl.h"
#undef VK_FN

#if defined(__x86_64__) || defined(__i386__)
#define ATTN__VK_HAVE_AVX2 1
#include "core/target_avx2_begin.h"
#define VK_FN(x) x##_avx2
#include "train/vit_kernels_tmpl.h"
#undef VK_FN
#include "core/target_avx2_end.h"
#endif

static int attn__vk_avx2(void) {
#ifdef ATTN__VK_HAVE_AVX2
    return attn__path_has_avx2(attn__fused_resolve_path(ATTN__SIMD_AUTO));
#else
    return 0;
#endif
}

#ifdef ATTN__VK_HAVE_AVX2
#define VK_CALL(avx2, fn, ...) ((avx2) ? fn##_avx2(__VA_ARGS__) : fn##_portable(__VA_ARGS__))
#else
#define VK_CALL(avx2, fn, ...) fn##_portable(__VA_ARGS__)
#endif

/* ---- GELU backward */

typedef struct {
    float *dx;
    const float *dy, *x;
    int64_t n;
    int avx2;
} attn__vk_gelu_job;

#define VK_GELU_CHUNK 4096

static void attn__vk_gelu_piece(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__vk_gelu_job *j = (const attn__vk_gelu_job *)p;
    const int64_t a = lo * VK_GELU_CHUNK, b = hi * VK_GELU_CHUNK < j->n ? hi * VK_GELU_CHUNK : j->n;
    (void)tid;
    VK_CALL(j->avx2, attn__vk_gelu_bwd, j->dx + a, j->dy + a, j->x + a, b - a);
}

void attn__vk_gelu_backward(float *dx, const float *dy, const float *x, int64_t n) {
    attn__vk_gelu_job j = {dx, dy, x, n, attn__vk_avx2()};
    const int64_t pieces = (n + VK_GELU_CHUNK - 1) / VK_GELU_CHUNK;
    attn__pool_for(pieces, 2, attn__pool_threads(20.0 * (double)n, 0), attn__vk_gelu_piece, &j);
}

/* ---- linear with bias and residual */

#define VK_LIN_ROWS 256 /* rows a piece: fixed, so the bits do not depend on the thread count */

typedef struct {
    float *y;
    const float *x, *w, *b, *res;
    int64_t M, N, K;
} attn__vk_lin_job;

static void attn__vk_lin_piece(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__vk_lin_job *j = (const attn__vk_lin_job *)p;
    const int64_t N = j->N, K = j->K;
    (void)tid;
    for (int64_t it = lo; it < hi; it++) {
        const int64_t a = it * VK_LIN_ROWS, e = a + VK_LIN_ROWS < j->M ? a + VK_LIN_ROWS : j->M;
        for (int64_t m = a; m < e; m++) { /* C = res + b, then C += x·wᵀ (no zeroing pass, no bias pass) */
            float *restrict o = j->y + m * N;
            const float *restrict bb = j->b;
            if (j->res) {
                const float *restrict r = j->res + m * N;
                VK_SIMD
                for (int64_t n = 0; n < N; n++) o[n] = r[n] + bb[n];
            } else {
                memcpy(o, bb, sizeof(float) * (size_t)N);
            }
        }
        if (K > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(e - a), (int)N, (int)K, 1.0f, j->x + a * K, (int)K, j->w,
                        (int)K, 1.0f, j->y + a * N, (int)N);
    }
}

void attn__vk_linear(float *y, const float *x, const float *w, const float *b, const float *res, int64_t M, int64_t N, int64_t K) {
    attn__vk_lin_job j = {y, x, w, b, res, M, N, K};
    const int nt = attn_get_num_threads(); /* also puts OpenBLAS in single-thread mode */
    attn__pool_for((M + VK_LIN_ROWS - 1) / VK_LIN_ROWS, 1, attn__pool_threads((double)M * N * K, nt), attn__vk_lin_piece, &j);
}

/* ---- LayerNorm forward */

typedef struct {
    float *y;
    const float *x, *gamma, *beta;
    float eps;
    int64_t E;
    int avx2;
} attn__vk_lnf_job;

static void attn__vk_lnf_piece(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__vk_lnf_job *j = (const attn__vk_lnf_job *)p;
    (void)tid;
    VK_CALL(j->avx2, attn__vk_ln_fwd_rows, j->y, j->x, j->gamma, j->beta, j->eps, j->E, lo, hi);
}

void attn__vk_layernorm_forward(float *y, const float *x, const float *gamma, const float *beta, float eps, int64_t M, int64_t E) {
    attn__vk_lnf_job j = {y, x, gamma, beta, eps, E, attn__vk_avx2()};
    attn__pool_for(M, 64, attn__pool_threads(6.0 * (double)M * (double)E, 0), attn__vk_lnf_piece, &j);
}

/* ---- LayerNorm backward */

#define VK_LN_BLOCK 32

size_t attn__vk_ln_part_floats(int64_t M, int64_t E) { return (size_t)((M + VK_LN_BLOCK - 1) / VK_LN_BLOCK) * 2 * (size_t)E; }

typedef struct {
    float *dx, *part;
    const float *dy, *x, *gamma, *res;
    float eps;
    int64_t M, E;
    int avx2;
} attn__vk_ln_job;

static void attn__vk_ln_piece(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__vk_ln_job *j = (const attn__vk_ln_job *)p;
    (void)tid;
    for (int64_t blk = lo; blk < hi; blk++) {
        const int64_t r0 = blk * VK_LN_BLOCK, r1 = r0 + VK_LN_BLOCK < j->M ? r0 + VK_LN_BLOCK : j->M;
        float *pg = j->part + blk * 2 * j->E;
        VK_CALL(j->avx2, attn__vk_ln_bwd_rows, j->dx, pg, pg + j->E, j->dy, j->x, j->gamma, j->res, j->eps, j->E, r0, r1);
    }
}

void attn__vk_layernorm_backward(float *dx, float *dgamma, float *dbeta, const float *dy, const float *x, const float *gamma,
                                 const float *res, float eps, int64_t M, int64_t E, float *part) {
    attn__vk_ln_job j = {dx, part, dy, x, gamma, res, eps, M, E, attn__vk_avx2()};
    const int64_t nb = (M + VK_LN_BLOCK - 1) / VK_LN_BLOCK;
    attn__pool_for(nb, 2, attn__pool_threads(12.0 * (double)M * (double)E, 0), attn__vk_ln_piece, &j);
    for (int64_t e = 0; e < E; e++) { /* the blocks' sums in order, in double */
        double sg = 0.0, sb = 0.0;
        for (int64_t blk = 0; blk < nb; blk++) sg += part[blk * 2 * E + e], sb += part[blk * 2 * E + E + e];
        dgamma[e] = (float)sg, dbeta[e] = (float)sb;
    }
}
