/* Attention of short sequences (short_internal.h): unmasked float32 attention with Lq, Lk <= 64 as small
 * register-blocked products per (batch, head) item — q·kᵀ into a [Lq, Lk rounded up to 8] score
 * block, a float32 softmax, P·v — instead of the fused kernel's 64 x 64 tiles, most of which are
 * padding at such lengths (a ViT's 17 tokens: the fused kernel's packing, tiles and output pass were
 * ~14% of a ViT forward). The ViT trainer's forward and backward (src/train/) are the same kernels.
 * Kernels: sdpa_short_tmpl.h, AVX2 + FMA or portable by ATTN_SIMD as the fused attention; scratch per
 * thread from the heap. Checked by tests/test_sdpa_short.c against a float64 oracle (and the fused
 * kernel's error codes), and by tests/test_train_ops.c (forward and backward against float64). */
#include "attention/fused_internal.h"
#include "attention/sdpa_internal.h"
#include "attention/short_internal.h"
#include "core/internal.h"
#include "core/pool.h"
#include "core/simd_math.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#ifdef _OPENMP
#define SA_SIMD _Pragma("omp simd")
#define SA_PRAGMA(x) _Pragma(#x)
#define SA_SIMD_RED(a) SA_PRAGMA(omp simd reduction(+ : a))
#define SA_SIMD_MAX(a) SA_PRAGMA(omp simd reduction(max : a))
#else
#define SA_SIMD
#define SA_SIMD_RED(a)
#define SA_SIMD_MAX(a)
#endif

/* 8 floats (GCC / clang vector extension: AVX registers in the AVX2 build, SSE pairs in the
 * portable one); loads and stores unaligned */
typedef float attn__sa_v8 __attribute__((vector_size(32)));
typedef float attn__sa_v8u __attribute__((vector_size(32), aligned(4)));
#define attn__sa_ld(p) (*(const attn__sa_v8u *)(p))
#define attn__sa_st(p, v) (*(attn__sa_v8u *)(p) = (v))
#define attn__sa_splat(x) ((attn__sa_v8){(x), (x), (x), (x), (x), (x), (x), (x)})
typedef int32_t attn__sa_i8 __attribute__((vector_size(32)));

/* the portable template's helpers take and return 8-float vectors; they are static and called only
 * from code of the same compilation, so GCC's note that such a return "changes the ABI" without AVX
 * concerns no caller (the AVX2 copies are compiled, and called, inside the AVX2 target region);
 * GCC 12 prints that note despite the pragma, so the Makefile adds -Wno-psabi for this file */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

/* exp of 8 lanes, portable: core/simd_math.h's scalar exp a lane (the AVX2 build uses attn__exp256) */
static inline attn__sa_v8 attn__sa_exp8_portable(attn__sa_v8 x) {
    attn__sa_v8 y;
    for (int i = 0; i < 8; i++) y[i] = attn__exp_scalar(x[i]);
    return y;
}

#define SA_FN(x) x##_portable
#define SA_EXP8(x) attn__sa_exp8_portable(x)
#define SA_FMA(a, b, c) ((a) * (b) + (c))
#define SA_VFMA(a, b, c) ((a) * (b) + (c))
#include "attention/sdpa_short_tmpl.h"
#undef SA_FN

#if defined(__x86_64__) || defined(__i386__)
#define ATTN__SA_HAVE_AVX2 1
#include "core/target_avx2_begin.h"
#define SA_FN(x) x##_avx2
#define SA_AVX2 1
#include <immintrin.h>
#undef SA_FMA
#undef SA_VFMA
#undef SA_EXP8
#define SA_EXP8(x) ((attn__sa_v8)attn__exp256((__m256)(x)))
#define SA_FMA(a, b, c) fmaf(a, b, c) /* one vfmadd (the build's -std=c11 contracts nothing) */
#define SA_VFMA(a, b, c) ((attn__sa_v8)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#include "attention/sdpa_short_tmpl.h"
#undef SA_FN
#undef SA_AVX2
#include "core/target_avx2_end.h"
#endif

/* the AVX2 compilation for the AVX2 and AVX-512 paths of ATTN_SIMD / the CPU, else portable */
static int attn__sa_avx2(int path) {
#ifdef ATTN__SA_HAVE_AVX2
    return attn__path_has_avx2(path);
#else
    (void)path;
    return 0;
#endif
}

#ifdef ATTN__SA_HAVE_AVX2
#define SA_CALL(avx2, fn, ...) ((avx2) ? fn##_avx2(__VA_ARGS__) : fn##_portable(__VA_ARGS__))
#else
#define SA_CALL(avx2, fn, ...) fn##_portable(__VA_ARGS__)
#endif

/* scratch floats of one item (the kernels' W), each part rounded up to 16 floats: the forward kᵀ padded
 * to Lkp = Lk rounded up to 8 columns (D·Lkp) and the scores (Lq·Lkp); the backward kᵀ and vᵀ (2·D·Tp),
 * P and dS (2·T·Tp) */
static size_t attn__sa_fwd_floats(int64_t Lq, int64_t Lk, int64_t D) {
    const int64_t Tp = (Lk + 7) & ~(int64_t)7;
    return (size_t)(((D * Tp + 15) & ~(int64_t)15) + Lq * Tp);
}
static size_t attn__sa_bwd_floats(int64_t T, int64_t D) {
    const int64_t Tp = (T + 7) & ~(int64_t)7;
    return (size_t)(2 * D * Tp + 2 * T * Tp);
}

/* ---------------------------------------------------------------- attn_sdpa's short path */

typedef struct {
    const attn_tensor *q, *k, *v;
    attn_tensor *out, *lse, *w;
    int64_t H, group, Lq, Lk, D, Dv;
    float scale;
    int avx2;
    float *scratch; /* per floats for each thread id */
    size_t per;
    _Atomic int bad;
} attn__sa_job;

static void attn__sa_sdpa_piece(void *p, int64_t lo, int64_t hi, int tid) {
    attn__sa_job *j = (attn__sa_job *)p;
    float *W = j->scratch + (size_t)tid * j->per;
    const attn_tensor *q = j->q, *k = j->k, *v = j->v, *o = j->out, *l = j->lse, *w = j->w;
    for (int64_t it = lo; it < hi; it++) {
        const int64_t b = it / j->H, h = it % j->H, hk = h / j->group;
        const float *qp = (const float *)q->data + b * q->stride[0] + h * q->stride[1];
        const float *kp = (const float *)k->data + b * k->stride[0] + hk * k->stride[1];
        const float *vp = (const float *)v->data + b * v->stride[0] + hk * v->stride[1];
        float *op = (float *)o->data + b * o->stride[0] + h * o->stride[1];
        float *lp = l ? (float *)l->data + b * l->stride[0] + h * l->stride[1] : NULL;
        float *wp = w ? (float *)w->data + b * w->stride[0] + h * w->stride[1] : NULL;
        if (SA_CALL(j->avx2, attn__sa_attn_fwd, op, o->stride[2], lp, l ? l->stride[2] : 0, wp, w ? w->stride[2] : 0, w ? w->stride[3] : 0, qp,
                    q->stride[2], kp, k->stride[2], vp, v->stride[2], W, j->Lq, j->Lk, j->D, j->Dv, j->scale))
            atomic_store(&j->bad, 1);
    }
}

static int attn__sa_plain_f32(const attn_tensor *t) { return t && t->dtype == ATTN_F32 && t->ndim == 4 && t->stride[3] == 1; }

int attn__sdpa_short(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k, const attn_tensor *v,
                     const attn_sdpa_params *p) {
    if ((weights && (weights->dtype != ATTN_F32 || weights->ndim != 4)) || !attn__sa_plain_f32(q) || !attn__sa_plain_f32(k) || !attn__sa_plain_f32(v) || !attn__sa_plain_f32(out))
        return ATTN__SHORT_DECLINED;
    if (p && (p->mask || p->is_causal || p->window || p->key_lengths || p->impl != ATTN_IMPL_DEFAULT)) return ATTN__SHORT_DECLINED;
    const int64_t lq = q->shape[2], lk = k->shape[2], d = q->shape[3], dv = v->shape[3];
    if (lq < 1 || lq > ATTN__SHORT_MAX_L || lk < 1 || lk > ATTN__SHORT_MAX_L || d < 1 || d > ATTN__SHORT_MAX_D || dv < 1 ||
        dv > ATTN__SHORT_MAX_D)
        return ATTN__SHORT_DECLINED;
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    ATTN_TRY(attn__sdpa_check_ex(out, weights, q, k, v, p, 3, NULL, &B, &H, &Hkv, &Lq, &Lk, &D, &Dv));
    const int path = attn__fused_resolve_path(ATTN__SIMD_AUTO);
    if (path < 0) return path;
    if (B * H == 0) return ATTN_OK;
    attn__sa_job j = {q, k, v, out, p ? p->lse : NULL, weights, H, Hkv > 0 ? H / Hkv : 1, Lq, Lk, D, Dv,
                      (p && p->has_scale) ? p->scale : (float)(1.0 / sqrt((double)D)), attn__sa_avx2(path), NULL, 0, 0};
    const int nt = attn__pool_threads((double)B * H * Lq * Lk * (D + Dv), p && p->n_threads > 0 ? p->n_threads : 0);
    j.per = (attn__sa_fwd_floats(Lq, Lk, D) + 15) & ~(size_t)15;
    j.scratch = (float *)aligned_alloc(64, sizeof(float) * j.per * (size_t)nt);
    if (!j.scratch) return attn_set_error(ATTN_E_NOMEM, "sdpa: out of memory for %d x %zu bytes of scratch", nt, sizeof(float) * j.per);
    attn__pool_for(B * H, 1, nt, attn__sa_sdpa_piece, &j);
    free(j.scratch);
    return attn__sdpa_post_check(out, weights, q, k, v, atomic_load(&j.bad));
}

/* ---------------------------------------------------------------- the ViT trainer's entry points */

typedef struct {
    float *out, *lse, *dq, *dk, *dv;
    const float *q, *k, *v, *o, *l, *dout;
    int64_t ldq, B, T, H, D;
    float scale;
    int avx2;
    float *scratch; /* per floats for each thread id */
    size_t per;
    _Atomic int bad; /* a forward score was NaN or inf */
} attn__sa_train_job;

/* items [lo, hi) of (image, head) pairs: the forward, or with j->dq the backward */
static void attn__sa_train_piece(void *p, int64_t lo, int64_t hi, int tid) {
    attn__sa_train_job *j = (attn__sa_train_job *)p;
    float *W = j->scratch + (size_t)tid * j->per;
    const int64_t E = j->H * j->D;
    for (int64_t it = lo; it < hi; it++) {
        const int64_t b = it / j->H, h = it % j->H, off = b * j->T * E + h * j->D, oq = b * j->T * j->ldq + h * j->D;
        if (j->dq)
            SA_CALL(j->avx2, attn__sa_attn_bwd, j->dq + oq, j->dk + oq, j->dv + oq, j->q + oq, j->k + oq, j->v + oq, j->o + off,
                    j->l + it * j->T, j->dout + off, W, j->T, j->D, j->ldq, E, j->scale);
        else if (SA_CALL(j->avx2, attn__sa_attn_fwd, j->out + off, E, j->lse + it * j->T, 1, NULL, 0, 0, j->q + oq, j->ldq, j->k + oq,
                         j->ldq, j->v + oq, j->ldq, W, j->T, j->T, j->D, j->D, j->scale))
            atomic_store(&j->bad, 1);
    }
}

static int attn__sa_default_avx2(void) { return attn__sa_avx2(attn__fused_resolve_path(ATTN__SIMD_AUTO)); }

/* the items of j on the pool with per-thread scratch from the heap (user threads may have small stacks) */
static int attn__sa_train_run(attn__sa_train_job *j, double cost) {
    const int nt = attn__pool_threads(cost, 0);
    j->per = ((j->dq ? attn__sa_bwd_floats(j->T, j->D) : attn__sa_fwd_floats(j->T, j->T, j->D)) + 15) & ~(size_t)15;
    j->scratch = (float *)aligned_alloc(64, sizeof(float) * j->per * (size_t)nt);
    if (!j->scratch) return attn_set_error(ATTN_E_NOMEM, "vit train: out of memory for the attention's scratch");
    attn__pool_for(j->B * j->H, 4, nt, attn__sa_train_piece, j);
    free(j->scratch);
    if (atomic_load(&j->bad)) /* the weights diverged (a learning rate far too large, say) */
        return attn_set_error(ATTN_E_RANGE, "vit train: an attention score q.k overflowed float32 (the weights diverged)");
    return ATTN_OK;
}

int attn__short_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v, int64_t ldq, int64_t B,
                                  int64_t T, int64_t H, int64_t D) {
    attn__sa_train_job j = {out, lse, NULL, NULL, NULL, q, k, v, NULL, NULL, NULL, ldq, B, T, H, D,
                            (float)(1.0 / sqrt((double)D)), attn__sa_default_avx2(), NULL, 0, 0};
    return attn__sa_train_run(&j, 2.0 * (double)B * H * T * T * D);
}

int attn__short_attention_backward(float *dq, float *dk, float *dv, const float *q, const float *k, const float *v,
                                   const float *out, const float *lse, const float *dout, int64_t ldq, int64_t B, int64_t T,
                                   int64_t H, int64_t D) {
    attn__sa_train_job j = {NULL, NULL, dq, dk, dv, q, k, v, out, lse, dout, ldq, B, T, H, D,
                            (float)(1.0 / sqrt((double)D)), attn__sa_default_avx2(), NULL, 0, 0};
    return attn__sa_train_run(&j, 5.0 * (double)B * H * T * T * D);
}
