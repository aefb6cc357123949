/* SDPA backward (include/attn_attention.h, attn_sdpa_backward): FlashAttention-2's backward
 * (Dao 2023, Algorithm 2) in two race-free passes over tiles of 64 queries x 64 keys.
 *
 *   Δ_i = sum_e dout[i][e]·out[i][e]                     (first, one parallel pass over rows)
 *   per tile: S = q·kᵀ, P = exp(scale·S + mask - lse_i) (0 outside the visible keys and for a row
 *   with lse = -inf), dP = dout·vᵀ, dS = P ⊙ (dP - Δ)
 *   pass 1, item = (b, kv head, key block): dv += Pᵀ·dout, dk += dSᵀ·q over the group's query
 *           heads and the query blocks that see the block; the item owns those rows of dk / dv.
 *   pass 2, item = (b, head, query block): dq += dS·k over the key blocks its rows see.
 * FlashAttention-2 computes dq in pass 1 with atomic adds; recomputing S, P and dS in pass 2
 * instead costs 3 more tile products (7 instead of 5 per tile pair) but needs no atomics and no
 * per-thread dq copies, and gives the same bits for any thread count.
 * Tiles wholly outside every row's causal / window / key_lengths range are skipped.
 * Memory: Δ (4·B·H·Lq bytes) and one scratch slice per thread (attn__bw_scratch_floats), both
 * allocated before the parallel region (attn__sdpa_backward_workspace_bytes states the total).
 * Kernels: sdpa_backward_tmpl.h, compiled for AVX2 + FMA and as portable C; the path follows
 * ATTN_SIMD like the forward (avx512 selects the AVX2 kernels: there is no AVX-512 backward). */
#include "attention/fused_internal.h"
#include "attention/sdpa_backward_internal.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define BW_ALIGN 64

static inline size_t attn__bw_round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* carve n floats (64-byte aligned) from *cur */
static inline float *attn__bw_carve(float **cur, size_t n) {
    float *r = *cur;
    *cur += attn__bw_round16(n ? n : 1);
    return r;
}

/* T[d*ld + j] = t[b, hh, j0 + j, d] for j < nk, d < n; 0 for nk <= j < ld. */
static void attn__bw_pack_t(float *T, int ld, const attn_tensor *t, int64_t b, int64_t hh, int64_t j0, int nk,
                            int64_t n) {
    const int64_t s2 = t->stride[2], s3 = t->stride[3];
    const float *base = attn__f32_at4(t, b, hh, j0, 0);
    for (int64_t d = 0; d < n; d++) {
        float *row = T + d * ld;
        for (int j = 0; j < nk; j++) row[j] = base[j * s2 + d * s3];
        for (int j = nk; j < ld; j++) row[j] = 0.0f;
    }
}

/* R[i*n + d] = t[b, hh, i0 + i, d] for i < nq, d < n (unit rows). */
static void attn__bw_pack_rows(float *R, const attn_tensor *t, int64_t b, int64_t hh, int64_t i0, int nq, int64_t n) {
    const int64_t s2 = t->stride[2], s3 = t->stride[3];
    const float *base = attn__f32_at4(t, b, hh, i0, 0);
    for (int i = 0; i < nq; i++) {
        if (s3 == 1) memcpy(R + (int64_t)i * n, base + i * s2, sizeof(float) * (size_t)n);
        else
            for (int64_t d = 0; d < n; d++) R[(int64_t)i * n + d] = base[i * s2 + d * s3];
    }
}

/* Kb[j*ld + d] = k[b, hk, j0 + j, d] for j < nk, d < D; 0 for D <= d < ld. */
static void attn__bw_pack_kb(float *Kb, int ld, const attn_tensor *k, int64_t b, int64_t hk, int64_t j0, int nk,
                             int64_t D) {
    for (int j = 0; j < nk; j++) {
        float *row = Kb + (int64_t)j * ld;
        attn__bw_pack_rows(row, k, b, hk, j0 + j, 1, D);
        for (int64_t d = D; d < ld; d++) row[d] = 0.0f;
    }
}

/* Row data of a query tile: visible ranges, lse and Δ. Returns 1 if some row (with lse > -inf)
 * sees a key of [ja, jb). */
static int attn__bw_rows(const attn__bwctx *c, int64_t b, int64_t h, int64_t i0, int nq, int64_t ja, int64_t jb,
                         int64_t *lo, int64_t *hi, float *lsev, float *dlv) {
    int any = 0;
    for (int i = 0; i < nq; i++) {
        attn__key_range(c->p, b, i0 + i, c->Lq, c->Lk, &lo[i], &hi[i]);
        lsev[i] = *attn__lse_at(c->lse, b, h, i0 + i);
        dlv[i] = c->delta[(b * c->H + h) * c->Lq + i0 + i];
        if (lsev[i] != -INFINITY && lo[i] < jb && hi[i] > ja && lo[i] < hi[i]) any = 1;
    }
    return any;
}

#ifdef _OPENMP
#define BW_SIMD _Pragma("omp simd")
#else
#define BW_SIMD
#endif
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* ---- portable kernels */
#define BW_FN(x) x##_portable
#include "attention/sdpa_backward_tmpl.h"
#undef BW_FN

/* ---- AVX2 + FMA kernels (the same source compiled for avx2,fma; used only after the CPU check) */
#if defined(__x86_64__) || defined(__i386__)
#define ATTN__BW_HAVE_AVX2 1
#include <immintrin.h>
#include "core/target_avx2_begin.h"
#define BW_FN(x) x##_avx2
#define BW_AVX2 1
#include "attention/sdpa_backward_tmpl.h"
#undef BW_AVX2
#undef BW_FN
#include "core/target_avx2_end.h"
#endif

/* ---- validation */

static int attn__bw_f32_4d(const attn_tensor *t, const char *name) {
    if (!t) return attn_set_error(ATTN_E_INVALID, "sdpa backward: %s must not be NULL", name);
    if (t->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "sdpa backward: %s must be float32, got %s", name, attn_dtype_name(t->dtype));
    if (t->ndim != 4)
        return attn_set_error(ATTN_E_SHAPE, "sdpa backward: %s must be 4-D, got %d-D", name, t->ndim);
    if (!t->data && attn_tensor_numel(t) > 0) return attn_set_error(ATTN_E_INVALID, "sdpa backward: %s has no data", name);
    return ATTN_OK;
}

static int attn__bw_same_shape(const attn_tensor *t, const char *name, const attn_tensor *ref, const char *rname) {
    for (int i = 0; i < 4; i++)
        if (t->shape[i] != ref->shape[i])
            return attn_set_error(ATTN_E_SHAPE,
                                  "sdpa backward: %s must have the shape of %s [%lld, %lld, %lld, %lld], got [%lld, %lld, %lld, %lld]",
                                  name, rname, (long long)ref->shape[0], (long long)ref->shape[1], (long long)ref->shape[2],
                                  (long long)ref->shape[3], (long long)t->shape[0], (long long)t->shape[1],
                                  (long long)t->shape[2], (long long)t->shape[3]);
    return ATTN_OK;
}

/* first non-finite element of a float32 4-D view, as an error naming it */
static int attn__bw_scan(const attn_tensor *t, const char *name) {
    if (attn_tensor_numel(t) == 0) return ATTN_OK;
    for (int64_t a = 0; a < t->shape[0]; a++)
        for (int64_t b = 0; b < t->shape[1]; b++)
            for (int64_t c = 0; c < t->shape[2]; c++) {
                const float *row = attn__f32_at4(t, a, b, c, 0);
                if (!attn__any_nonfinite(row, t->shape[3], t->stride[3])) continue;
                for (int64_t d = 0; d < t->shape[3]; d++)
                    if (!isfinite(row[d * t->stride[3]]))
                        return attn_set_error(ATTN_E_RANGE, "sdpa backward: %s[%lld, %lld, %lld, %lld] is %s", name,
                                              (long long)a, (long long)b, (long long)c, (long long)d,
                                              isnan(row[d * t->stride[3]]) ? "NaN" : "infinite");
            }
    return ATTN_OK;
}

int attn__sdpa_backward_check(attn__bwctx *c, attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                              const attn_tensor *k, const attn_tensor *v, const attn_tensor *out,
                              const attn_tensor *lse, const attn_tensor *dout, const attn_sdpa_params *p) {
    memset(c, 0, sizeof *c);
    ATTN_TRY(attn__bw_f32_4d(q, "q"));
    ATTN_TRY(attn__bw_f32_4d(k, "k"));
    ATTN_TRY(attn__bw_f32_4d(v, "v"));
    ATTN_TRY(attn__bw_f32_4d(out, "out"));
    ATTN_TRY(attn__bw_f32_4d(dout, "dout"));
    ATTN_TRY(attn__bw_f32_4d(dq, "dq"));
    ATTN_TRY(attn__bw_f32_4d(dk, "dk"));
    ATTN_TRY(attn__bw_f32_4d(dv, "dv"));
    attn_sdpa_params pp = p ? *p : attn_sdpa_params_default();
    pp.lse = NULL; /* lse is an input here, checked below */
    /* shapes, GQA, mask, parameters; q, k and v scanned for NaN / inf */
    ATTN_TRY(attn__sdpa_check_ex(out, NULL, q, k, v, &pp, 1, &c->mv, &c->B, &c->H, &c->Hkv, &c->Lq, &c->Lk, &c->D,
                                 &c->Dv));
    ATTN_TRY(attn__bw_same_shape(dout, "dout", out, "out"));
    ATTN_TRY(attn__bw_same_shape(dq, "dq", q, "q"));
    ATTN_TRY(attn__bw_same_shape(dk, "dk", k, "k"));
    ATTN_TRY(attn__bw_same_shape(dv, "dv", v, "v"));
    if (!lse) return attn_set_error(ATTN_E_INVALID, "sdpa backward: lse must not be NULL");
    if (lse->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "sdpa backward: lse must be float32, got %s", attn_dtype_name(lse->dtype));
    if (lse->ndim != 3 || lse->shape[0] != c->B || lse->shape[1] != c->H || lse->shape[2] != c->Lq)
        return attn_set_error(ATTN_E_SHAPE, "sdpa backward: lse must be [%lld, %lld, %lld] ([B, H, Lq])", (long long)c->B,
                              (long long)c->H, (long long)c->Lq);
    if (!lse->data && attn_tensor_numel(lse) > 0) return attn_set_error(ATTN_E_INVALID, "sdpa backward: lse has no data");
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->H; h++)
            for (int64_t i = 0; i < c->Lq; i++) {
                const float x = *attn__lse_at(lse, b, h, i);
                if (isnan(x) || x == INFINITY)
                    return attn_set_error(ATTN_E_RANGE, "sdpa backward: lse[%lld, %lld, %lld] is %s", (long long)b,
                                          (long long)h, (long long)i, isnan(x) ? "NaN" : "+inf");
            }
    ATTN_TRY(attn__bw_scan(out, "out"));
    ATTN_TRY(attn__bw_scan(dout, "dout"));
    c->q = q, c->k = k, c->v = v, c->out = out, c->lse = lse, c->dout = dout;
    c->dq = dq, c->dk = dk, c->dv = dv;
    c->p = p;
    c->group = c->Hkv > 0 ? c->H / c->Hkv : 1;
    c->scale = (p && p->has_scale) ? p->scale : (float)(1.0 / sqrt((double)(c->D > 0 ? c->D : 1)));
    return ATTN_OK;
}

int attn__sdpa_backward_post_check(const attn_tensor *dq, const attn_tensor *dk, const attn_tensor *dv) {
    const attn_tensor *g[3] = {dq, dk, dv};
    const char *names[3] = {"dq", "dk", "dv"};
    for (int r = 0; r < 3; r++)
        if (attn__bw_scan(g[r], names[r]) != ATTN_OK)
            return attn_set_error(ATTN_E_RANGE, "sdpa backward: %s overflowed float32 (inputs too large); the gradients are undefined",
                                  names[r]);
    return ATTN_OK;
}

/* ---- driver */

static size_t attn__bw_scratch_floats(int64_t D, int64_t Dv, int bq, int bk) {
    const size_t bkp = attn__bw_round16((size_t)bk), Dp = attn__bw_round16((size_t)D), q = (size_t)bq;
    /* the union of both passes' tiles: KT, VT, dKT, dVT, Kb, dQ, Qb, dOb, SP, dPS, lo, hi, lse, Δ */
    size_t n = 2 * attn__bw_round16((size_t)D * bkp + 1) + 2 * attn__bw_round16((size_t)Dv * bkp + 1) +
               attn__bw_round16((size_t)bk * Dp + 1) + attn__bw_round16(q * Dp + 1) + attn__bw_round16(q * (size_t)D + 1) +
               attn__bw_round16(q * (size_t)Dv + 1) + 2 * attn__bw_round16(q * bkp + 1) + 2 * attn__bw_round16(2 * q) +
               2 * attn__bw_round16(q) + 16;
    return n;
}

static void attn__bw_sizes(const attn__bw_opts *o, int *bq, int *bk) {
    *bq = o && o->bq > 0 ? o->bq : ATTN__BW_BQ;
    *bk = o && o->bk > 0 ? (int)attn__bw_round16((size_t)o->bk) : ATTN__BW_BK;
}

size_t attn__sdpa_backward_workspace_bytes(int64_t B, int64_t H, int64_t Lq, int64_t D, int64_t Dv, int bq, int bk,
                                           int nt) {
    attn__bw_opts o = {0, bq, bk};
    attn__bw_sizes(&o, &bq, &bk);
    return sizeof(float) * ((size_t)(B * H * Lq > 0 ? B * H * Lq : 1) + attn__bw_scratch_floats(D, Dv, bq, bk) * (size_t)nt);
}

static int attn__bw_use_avx2(int path) {
#ifdef ATTN__BW_HAVE_AVX2
    return path == ATTN__SIMD_AVX2 || path == ATTN__SIMD_AVX512;
#else
    (void)path;
    return 0;
#endif
}

const char *attn__sdpa_backward_path_name(int path) {
    path = attn__fused_resolve_path(path);
    if (path < 0) return NULL;
    return attn__bw_use_avx2(path) ? "avx2" : "portable";
}

int attn__sdpa_backward_ex(attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                           const attn_tensor *k, const attn_tensor *v, const attn_tensor *out, const attn_tensor *lse,
                           const attn_tensor *dout, const attn_sdpa_params *p, const attn__bw_opts *opts) {
    attn__bwctx c;
    ATTN_TRY(attn__sdpa_backward_check(&c, dq, dk, dv, q, k, v, out, lse, dout, p));
    const int path = attn__fused_resolve_path(opts ? opts->path : ATTN__SIMD_AUTO);
    if (path < 0) return path;
    const int avx2 = attn__bw_use_avx2(path);
    attn__bw_sizes(opts, &c.bq, &c.bk);
    c.nqb = (c.Lq + c.bq - 1) / c.bq;
    c.nkb = (c.Lk + c.bk - 1) / c.bk;
    const int64_t rows = c.B * c.H * c.Lq;
    const int64_t items1 = c.B * c.Hkv * c.nkb, items2 = c.B * c.H * c.nqb;
    int nt = (p && p->n_threads > 0) ? p->n_threads : attn_get_num_threads();
    if (nt < 1) nt = 1;
    const int64_t most = items1 > items2 ? items1 : items2;
    if (nt > most) nt = most > 0 ? (int)most : 1;

    const size_t per = attn__bw_scratch_floats(c.D, c.Dv, c.bq, c.bk);
    float *delta = (float *)malloc(sizeof(float) * (size_t)(rows > 0 ? rows : 1));
    float *scratch = (float *)aligned_alloc(BW_ALIGN, sizeof(float) * per * (size_t)nt);
    if (!delta || !scratch) {
        free(delta);
        free(scratch);
        return attn_set_error(ATTN_E_NOMEM, "sdpa backward: out of memory for %zu bytes of workspace",
                              attn__sdpa_backward_workspace_bytes(c.B, c.H, c.Lq, c.D, c.Dv, c.bq, c.bk, nt));
    }
    c.delta = delta;

#pragma omp parallel num_threads(nt) if (nt > 1)
    {
        const int tid = attn__omp_tid();
        float *scr = scratch + per * (size_t)tid;
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) { /* Δ_i in double: it is subtracted from dP */
            const int64_t b = r / (c.H * c.Lq), h = (r / c.Lq) % c.H, i = r % c.Lq;
            const float *o = attn__f32_at4(out, b, h, i, 0), *g = attn__f32_at4(dout, b, h, i, 0);
            const int64_t os = out->stride[3], gs = dout->stride[3];
            double s = 0.0;
            for (int64_t e = 0; e < c.Dv; e++) s += (double)o[e * os] * (double)g[e * gs];
            delta[r] = (float)s;
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items1; it++) {
            const int64_t kb = it % c.nkb, bh = it / c.nkb;
#ifdef ATTN__BW_HAVE_AVX2
            if (avx2) attn__bw_kv_item_avx2(&c, scr, bh / c.Hkv, bh % c.Hkv, kb);
            else
#endif
                attn__bw_kv_item_portable(&c, scr, bh / c.Hkv, bh % c.Hkv, kb);
        }
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items2; it++) {
            const int64_t qb = c.nqb - 1 - it % c.nqb, bh = it / c.nqb; /* heaviest causal block first */
#ifdef ATTN__BW_HAVE_AVX2
            if (avx2) attn__bw_q_item_avx2(&c, scr, bh / c.H, bh % c.H, qb);
            else
#endif
                attn__bw_q_item_portable(&c, scr, bh / c.H, bh % c.H, qb);
        }
    }
    (void)avx2;
    free(scratch);
    free(delta);
    return attn__sdpa_backward_post_check(dq, dk, dv);
}

int attn_sdpa_backward(attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q, const attn_tensor *k,
                       const attn_tensor *v, const attn_tensor *out, const attn_tensor *lse, const attn_tensor *dout,
                       const attn_sdpa_params *p) {
    if (p && p->impl == ATTN_IMPL_REFERENCE) return attn_sdpa_backward_reference(dq, dk, dv, q, k, v, out, lse, dout, p);
    return attn__sdpa_backward_ex(dq, dk, dv, q, k, v, out, lse, dout, p, NULL);
}
