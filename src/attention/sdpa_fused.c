/* Fused scaled dot-product attention: tiled online softmax (FlashAttention, Dao et al. 2022,
 * and its "FlashAttention-2" loop order: query blocks outer, key blocks inner), multi-threaded
 * with OpenMP and vectorised with AVX-512 / AVX2+FMA kernels picked at run time, plus plain C.
 *
 * Semantics are those of attn_sdpa_reference (include/attn_attention.h): masks with broadcasting,
 * -inf or <= -FLT_MAX = masked, bottom-right causal, sliding window, key_lengths, GQA, Dv != D,
 * empty rows -> 0, arbitrary strides. Memory is O(L): per-thread scratch of a few tiles; the
 * Lq x Lk score matrix only exists when the caller asks for the weights (then it *is* the output).
 *
 * ---- Tile path (Lq > row_max_lq) -------------------------------------------------------------
 * Work item = (batch b, head h, query block of BQ = 64 rows, key split s). For an item:
 *   QT[d][i] = q[b,h,i0+i,d]·scale           packed transposed (SIMD 16x16 / 8x8 transposes when
 *                                            q's last dim is unit-stride), padded to 16 rows
 *   for each key block [j0, j0+BK) (BK = 96 for AVX-512, 64 otherwise) inside the union of the
 *   rows' visible key ranges:
 *     ST[j][i] = sum_d K[j][d]·QT[d][i]      (s_block; K read in place through broadcasts; for a
 *                                            block that needs no masking it also returns the
 *                                            column max from its registers)
 *     mask: float mask added / bool or <= -FLT_MAX -> -inf; causal / window / key_lengths: -inf
 *           written into exactly the cells outside each row's [lo, hi) (blocks wholly inside
 *           every row's range skip this)
 *     online softmax per query column i (softmax_block):
 *       m' = max(m, max_j ST[j][i]);  alpha = exp(m - m');  P = exp(ST - m');  l = l·alpha + sum P
 *     OT[e][i] = OT[e][i]·alpha[i] + sum_j V[j][e]·P[j][i]   (pv_block; V read in place)
 *   out[i][e] = OT[e][i] / l[i]  (0 when l = 0: a row that saw no key; transposed back by SIMD
 *                                 when out's last dim is unit-stride).
 * Key blocks wholly outside the causal / window / key_lengths region of every row of the query
 * block are never visited. The transposed layout puts query rows in the SIMD lanes, so the row
 * max, exp, row sum and the alpha rescale are all element-wise — no horizontal reductions — and
 * K and V never have to be packed, whatever their strides.
 *
 * ---- Row (decode) path (Lq <= row_max_lq, e.g. Lq = 1 against a long KV cache) -------------
 * One query row at a time, vectorised along D / Dv; keys in chunks of 256 with the same online
 * softmax (scalar m, l). K / V chunks are copied to unit stride when their last dim is strided.
 *
 * ---- Split-K (both paths) --------------------------------------------------------------------
 * When there are fewer work items than 2 x threads (decode with few heads, short Lq), the visible
 * key range of each row is split into `nsplit` pieces processed by different threads; each piece
 * leaves (m_s, l_s, O_s = unnormalised output) and a merge pass computes
 *   M = max_s m_s,  L = sum_s l_s·exp(m_s - M),  out = sum_s O_s·exp(m_s - M) / L.
 * Not used when the weights are requested.
 *
 * ---- Weights ---------------------------------------------------------------------------------
 * When weights are requested the masked scores of every visited block are stored into the
 * weights tensor as they are produced; after the last block the row is finalised in place as
 * exp(s - m_final) / l_final, and entries of skipped blocks are set to 0.
 *
 * ---- Vectorised exp --------------------------------------------------------------------------
 * exp(x) = 2^n · p(r), n = round(x·log2 e), r = x - n·ln2 with ln2 split in two constants
 * (0.693359375 - 2.12194440e-4; Cody & Waite), |r| <= ln2/2, p = a degree-6 polynomial fitted for
 * minimum maximum relative error (2e-9 in exact arithmetic; coefficients and code in core/simd_math.h).
 * x < -87 gives 0 (results stay normal floats: no denormal slow-downs), exp(0) = 1 exactly,
 * exp(-inf) = 0; arguments above 88 are outside the contract (the kernel only uses x <= 0). The maximum
 * relative error over [-87, 0] — the range used: arguments are always score - running max — is
 * measured by tests/test_fused.c against exp() in double for every path (2^21 points) and asserted
 * to be below ATTN__FUSED_EXP_MAX_REL_ERR = 1.5e-7 (1.26 ulp); measured: 8.5e-8 for the AVX-512
 * and AVX2 paths (FMA), 1.1e-7 for the portable path (no FMA).
 *
 * ---- Threads and OpenBLAS ---------------------------------------------------------------------
 * One job of attn's thread pool (core/pool.h) per call with p->n_threads threads (<= 0:
 * attn_get_num_threads()), capped at the number of work items; items are taken one at a time,
 * heaviest (last causal query block) first. Scratch is allocated once per call, one slice per
 * thread, before the job (so allocation failures are reported on the calling thread).
 * Oversubscription policy: this kernel never calls BLAS. The tile products are done by
 * register-blocked kernels: measured on a 64 x 96 x 64 tile on one core, cblas_sgemm (OpenBLAS
 * 0.3.21, one thread) ran at 27-30 GFLOP/s for Q·K^T and P·V while the two kernels here run at ~170
 * GFLOP/s together (at this size the per-call operand packing and dispatch dominate), and they also
 * fuse the column max and the alpha rescale.
 * Should a BLAS call ever be added inside the job, OpenBLAS runs it on the calling thread (the
 * library keeps OpenBLAS on one thread, core/threads.c): attn threads x OpenBLAS threads never
 * exceed the thread count.
 */
#include "attention/fused_internal.h"
#include "attention/sdpa_internal.h"
#include "core/cpu.h"
#include "core/internal.h"
#include "core/pool.h"

#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define FUSED_BQ 64          /* default query rows per tile */
#define FUSED_ROW_CHUNK 256  /* keys per chunk in the row (decode) path */
#define FUSED_ROW_MAX_LQ ATTN_SDPA_ROW_PATH_MAX_LQ /* default: Lq <= 4 uses the row path (attn_attention.h) */
#define FUSED_SPLIT_MIN_ROW 512
#define FUSED_ALIGN 64
#define FUSED_MAX_GROUPS 64 /* boundary blocks are split per 16 query rows up to block_q = 1024 */

/* Lanes of a fixed-width loop are independent: let the vectoriser have them (ATTN__PSIMD,
 * fused_internal.h). The portable kernels are in sdpa_fused_portable.c. */
#define PSIMD ATTN__PSIMD
#if defined(__clang__) /* at -O0/-O1 (e.g. `make fuzz`) clang cannot vectorise and would warn on each loop */
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

/* ================================================================== path selection */

int attn__fused_path_supported(int path) {
    switch (path) {
    case ATTN__SIMD_PORTABLE:
        return 1;
#if defined(__x86_64__) || defined(__i386__)
    case ATTN__SIMD_AVX2:
        return attn__fused_kernels_avx2() != NULL && attn__cpu_has(ATTN__CPU_AVX2 | ATTN__CPU_FMA);
    case ATTN__SIMD_AVX512:
        return attn__fused_kernels_avx512() != NULL && attn__cpu_has(ATTN__CPU_AVX512F);
#endif
    default:
        return 0;
    }
}

int attn__fused_best_path(void) {
    if (attn__fused_path_supported(ATTN__SIMD_AVX512)) return ATTN__SIMD_AVX512;
    if (attn__fused_path_supported(ATTN__SIMD_AVX2)) return ATTN__SIMD_AVX2;
    return ATTN__SIMD_PORTABLE;
}

static const char *attn__path_name(int path) {
    return path == ATTN__SIMD_AVX512 ? "avx512" : path == ATTN__SIMD_AVX2 ? "avx2" : "portable";
}

int attn__fused_resolve_path(int path) {
    if (path == ATTN__SIMD_AUTO) {
        const char *env = getenv("ATTN_SIMD");
        if (!env || !*env || strcmp(env, "auto") == 0) return attn__fused_best_path();
        if (strcmp(env, "avx512") == 0) path = ATTN__SIMD_AVX512;
        else if (strcmp(env, "avx2") == 0) path = ATTN__SIMD_AVX2;
        else if (strcmp(env, "portable") == 0) path = ATTN__SIMD_PORTABLE;
        else
            return attn_set_error(ATTN_E_INVALID, "sdpa: ATTN_SIMD='%s' is not one of avx512, avx2, portable, auto",
                                  env);
    }
    if (path != ATTN__SIMD_PORTABLE && path != ATTN__SIMD_AVX2 && path != ATTN__SIMD_AVX512)
        return attn_set_error(ATTN_E_INVALID, "sdpa: unknown SIMD path %d", path);
    if (!attn__fused_path_supported(path))
        return attn_set_error(ATTN_E_UNSUPPORTED, "sdpa: the %s kernel is not available on this CPU/build",
                              attn__path_name(path));
    return path;
}

static const attn__fused_kernels *attn__kernels_for(int path) {
    switch (path) {
    case ATTN__SIMD_AVX512:
        return attn__fused_kernels_avx512();
    case ATTN__SIMD_AVX2:
        return attn__fused_kernels_avx2();
    default:
        return attn__fused_kernels_portable();
    }
}

attn__fused_opts attn__fused_opts_default(void) {
    attn__fused_opts o;
    memset(&o, 0, sizeof o);
    o.path = ATTN__SIMD_AUTO;
    return o;
}

/* ================================================================== driver */

typedef struct {
    const attn_tensor *q, *k, *v;
    attn_tensor *out, *w;
    const attn_sdpa_params *p;
    attn__mask_view mv;
    const attn__fused_kernels *kern;
    int64_t B, H, Hkv, Lq, Lk, D, Dv, group;
    float scale;
    int bq, bk, nsplit, row_path;
    int64_t nqb;        /* query blocks per (b, h) in the tile path */
    float *partial;     /* split-K partials: [B*H*Lq][nsplit][Dv + 2] = (m, l, O[Dv]) */
    int *bad_scores;    /* set to 1 when a computed score is NaN or inf (see attn__sdpa_fused_ex) */
    attn_dtype in_dt;   /* dtype of q, k and v (float32, bfloat16 or float16) */
    attn_dtype out_dt;  /* dtype of out */
} attn__fctx;

static inline size_t attn__round16(size_t n) { return (n + 15) & ~(size_t)15; }

/* carve n floats (64-byte aligned) from *cur */
static inline float *attn__carve(float **cur, size_t n) {
    float *r = *cur;
    *cur += attn__round16(n ? n : 1);
    return r;
}

static size_t attn__tile_scratch_floats(const attn__fctx *c) {
    size_t ld = (size_t)c->bq;
    size_t n = attn__round16(ld * (size_t)c->D + 1) + attn__round16(ld * (size_t)c->bk + 1) +
               attn__round16(ld * (size_t)c->Dv + 1) + 4 * attn__round16(ld) + 2 * attn__round16(2 * ld) + 16;
    if (c->in_dt != ATTN_F32) /* the widened query rows, key block and value block */
        n += attn__round16(ld * (size_t)c->D + 1) + attn__round16((size_t)c->bk * (size_t)c->D + 1) +
             attn__round16((size_t)c->bk * (size_t)c->Dv + 1);
    if (c->out_dt != ATTN_F32) n += attn__round16(ld * (size_t)c->Dv + 1); /* output rows before narrowing */
    return n;
}

static size_t attn__row_scratch_floats(const attn__fctx *c) {
    size_t dp = attn__round16((size_t)c->D), dvp = attn__round16((size_t)c->Dv);
    size_t n = attn__round16(dp + 1) + attn__round16(FUSED_ROW_CHUNK) + 2 * attn__round16(dvp + 1) + 16;
    if (c->k->stride[3] != 1 || c->in_dt != ATTN_F32) n += attn__round16(FUSED_ROW_CHUNK * (size_t)(c->D ? c->D : 1));
    if (c->v->stride[3] != 1 || c->in_dt != ATTN_F32) n += attn__round16(FUSED_ROW_CHUNK * (size_t)(c->Dv ? c->Dv : 1));
    return n;
}

/* mask value for (b, h, i, j): apply to a score */
static inline float attn__apply_mask(const attn__mask_view *mv, int64_t off, float s) {
    if (mv->is_bool) return ((const unsigned char *)mv->data)[off] ? s : -INFINITY;
    const float m = ((const float *)mv->data)[off];
    return attn__mask_value_is_masked(m) ? -INFINITY : s + m;
}

/* A non-finite raw score is an error only where it can matter: at a visible key (the mask, causal,
 * window and key_lengths all let it through), or where the key row itself is not finite (an invalid
 * input, rejected as the reference rejects it). The q.k of a masked key may overflow: it is replaced
 * by -inf like every masked score and changes nothing. Runs only when a block held a non-finite
 * score. rows: nq rows from query i0 with visible ranges [lo[i], hi[i]); S[j * sj + i * si]. */
static int attn__bad_scores(const attn__fctx *c, const float *S, int64_t sj, int64_t si, int nq, int nk, int64_t b,
                            int64_t h, int64_t i0, int64_t j0, const int64_t *lo, const int64_t *hi, const char *kraw) {
    const attn__mask_view *mv = &c->mv;
    const int64_t ks2 = c->k->stride[2], ks3 = c->k->stride[3];
    for (int i = 0; i < nq; i++) {
        const int64_t mo = mv->present ? b * mv->stride[0] + h * mv->stride[1] + (i0 + i) * mv->stride[2] : 0;
        for (int j = 0; j < nk; j++) {
            if (isfinite(S[j * sj + i * si])) continue;
            const int64_t jj = j0 + j;
            int visible = jj >= lo[i] && jj < hi[i];
            if (visible && mv->present) {
                const int64_t off = mo + jj * mv->stride[3];
                visible = mv->is_bool ? ((const unsigned char *)mv->data)[off] != 0
                                      : !attn__mask_value_is_masked(((const float *)mv->data)[off]);
            }
            if (visible || attn__any_nonfinite_dt(kraw + (size_t)(jj * ks2) * attn_dtype_size(c->in_dt), c->in_dt, c->D, ks3))
                return 1;
        }
    }
    return 0;
}

/* 1 if any of the kk x nc floats at ST (row stride ld) is NaN or inf (exponent bits all ones). */
static inline int attn__rect_nonfinite(const float *ST, int ld, int kk, int nc) {
    uint32_t bad = 0;
    for (int j = 0; j < kk; j++) {
        const uint32_t *row = (const uint32_t *)(const void *)(ST + (int64_t)j * ld);
        PSIMD
        for (int i = 0; i < nc; i++) bad |= (uint32_t)((row[i] & 0x7f800000u) == 0x7f800000u);
    }
    return bad != 0;
}

/* Final weights of one row: W[j] = exp(W[j] - m)·inv for j in [jlo, jhi), 0 elsewhere. */
static void attn__finish_weights_row(const attn__fctx *c, float *wrow, int64_t ws, int64_t jlo, int64_t jhi, float m,
                                     float inv, int have) {
    const int64_t Lk = c->Lk;
    if (!have) jlo = jhi = 0;
    if (ws == 1) {
        if (jlo > 0) memset(wrow, 0, sizeof(float) * (size_t)jlo);
        if (jhi > jlo) c->kern->exp_scale(wrow + jlo, jhi - jlo, m, inv);
        if (jhi < Lk) memset(wrow + jhi, 0, sizeof(float) * (size_t)(Lk - jhi));
    } else {
        for (int64_t j = 0; j < Lk; j++) {
            float *x = wrow + j * ws;
            *x = (j >= jlo && j < jhi) ? attn__exp_scalar(*x - m) * inv : 0.0f;
        }
    }
}

static void attn__tile_item(const attn__fctx *c, float *scr, int64_t b, int64_t h, int64_t qb, int s) {
    const int64_t Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    const int64_t i0 = qb * c->bq;
    const int nq = (int)(Lq - i0 < c->bq ? Lq - i0 : c->bq);
    const int nqp = (int)attn__round16((size_t)nq), ld = nqp;
    float *cur = scr;
    float *QT = attn__carve(&cur, (size_t)ld * (size_t)D);
    float *ST = attn__carve(&cur, (size_t)ld * (size_t)c->bk);
    float *OT = attn__carve(&cur, (size_t)ld * (size_t)Dv);
    float *m = attn__carve(&cur, (size_t)ld), *l = attn__carve(&cur, (size_t)ld), *al = attn__carve(&cur, (size_t)ld);
    float *cmax = attn__carve(&cur, (size_t)ld);
    int64_t *lo = (int64_t *)attn__carve(&cur, 2 * (size_t)ld), *hi = (int64_t *)attn__carve(&cur, 2 * (size_t)ld);
    const int wide = c->in_dt != ATTN_F32; /* bfloat16 / float16 inputs: widen each block to float32 */
    float *qw = wide ? attn__carve(&cur, (size_t)ld * (size_t)D) : NULL;
    float *kw = wide ? attn__carve(&cur, (size_t)c->bk * (size_t)D) : NULL;
    float *vw = wide ? attn__carve(&cur, (size_t)c->bk * (size_t)Dv) : NULL;
    float *ow = c->out_dt != ATTN_F32 ? attn__carve(&cur, (size_t)ld * (size_t)Dv) : NULL;
    const int64_t hk = h / c->group;
    const size_t ies = attn_dtype_size(c->in_dt);

    /* visible key ranges of the rows, their union [jlo, jhi) and intersection [maxlo, minhi) */
    int64_t jlo = Lk, jhi = 0, maxlo = 0, minhi = Lk;
    for (int i = 0; i < nq; i++) {
        attn__key_range(c->p, b, i0 + i, Lq, Lk, &lo[i], &hi[i]);
        if (lo[i] < hi[i]) {
            if (lo[i] < jlo) jlo = lo[i];
            if (hi[i] > jhi) jhi = hi[i];
        }
        if (lo[i] > maxlo) maxlo = lo[i];
        if (hi[i] < minhi) minhi = hi[i];
    }
    if (jlo >= jhi) jlo = jhi = 0;
    const int64_t a = jlo + (jhi - jlo) * s / c->nsplit, e = jlo + (jhi - jlo) * (s + 1) / c->nsplit;

    /* pack the query block transposed and scaled; padded rows are 0 */
    const float *qbase = (const float *)c->q->data + b * c->q->stride[0] + h * c->q->stride[1];
    const int64_t qs2 = c->q->stride[2], qs3 = c->q->stride[3];
    if (wide) {
        attn__convert_rows(qw, ATTN_F32, D, 1, (const char *)c->q->data + (size_t)(b * c->q->stride[0] + h * c->q->stride[1] + i0 * qs2) * ies,
                           c->in_dt, qs2, qs3, nq, D);
        c->kern->pack_qt(QT, ld, nq, nqp, qw, D, D, c->scale);
    } else if (qs3 == 1) {
        c->kern->pack_qt(QT, ld, nq, nqp, qbase + i0 * qs2, qs2, D, c->scale);
    } else {
        for (int i = 0; i < nq; i++) {
            const float *qr = qbase + (i0 + i) * qs2;
            for (int64_t d = 0; d < D; d++) QT[d * ld + i] = qr[d * qs3] * c->scale;
        }
        for (int64_t d = 0; d < D; d++)
            for (int i = nq; i < nqp; i++) QT[d * ld + i] = 0.0f;
    }
    for (int i = 0; i < nqp; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    memset(OT, 0, sizeof(float) * (size_t)ld * (size_t)Dv);

    const float *kbase = (const float *)c->k->data + b * c->k->stride[0] + hk * c->k->stride[1];
    const float *vbase = (const float *)c->v->data + b * c->v->stride[0] + hk * c->v->stride[1];
    const int64_t ks2 = c->k->stride[2], ks3 = c->k->stride[3], vs2 = c->v->stride[2], vs3 = c->v->stride[3];
    const char *kraw = (const char *)c->k->data + (size_t)(b * c->k->stride[0] + hk * c->k->stride[1]) * ies;
    const char *vraw = (const char *)c->v->data + (size_t)(b * c->v->stride[0] + hk * c->v->stride[1]) * ies;
    const attn__mask_view *mv = &c->mv;
    float *wbase = c->w ? (float *)c->w->data + b * c->w->stride[0] + h * c->w->stride[1] : NULL;
    const int64_t ws2 = c->w ? c->w->stride[2] : 0, ws3 = c->w ? c->w->stride[3] : 0;

    for (int64_t j0 = a; j0 < e; j0 += c->bk) {
        const int nk = (int)(e - j0 < c->bk ? e - j0 : c->bk);
        const int inside = j0 >= maxlo && j0 + nk <= minhi; /* every row sees every key of the block */
        /* a block that needs no masking: the score kernel also gives the column max */
        const int clean = !mv->present && inside;
        const float *kp = kbase + j0 * ks2, *vp = vbase + j0 * vs2;
        int64_t ksj = ks2, ksd = ks3, vsj = vs2, vsd = vs3;
        if (wide) {
            attn__convert_rows(kw, ATTN_F32, D, 1, kraw + (size_t)(j0 * ks2) * ies, c->in_dt, ks2, ks3, nk, D);
            attn__convert_rows(vw, ATTN_F32, Dv, 1, vraw + (size_t)(j0 * vs2) * ies, c->in_dt, vs2, vs3, nk, Dv);
            kp = kw, ksj = D, ksd = 1, vp = vw, vsj = Dv, vsd = 1;
        }
        /* Column runs: a boundary block (causal diagonal, window edge, key_lengths end) is done per
         * group of 16 query rows, each over only the keys [ga, gb) that some row of the group can see
         * (adjacent groups with the same range are merged); so the masked half of a causal diagonal
         * tile is not computed. Otherwise (and when the weights are written) one run: all rows, all keys. */
        int run_c[FUSED_MAX_GROUPS], run_n[FUSED_MAX_GROUPS], run_a[FUSED_MAX_GROUPS], run_b[FUSED_MAX_GROUPS];
        int nrun = 0;
        const int ng = nqp / 16;
        if (!inside && !wbase && ng <= FUSED_MAX_GROUPS) {
            for (int g = 0; g < ng; g++) {
                int ga = nk, gb = 0;
                for (int i = 16 * g; i < 16 * g + 16 && i < nq; i++) {
                    if (lo[i] >= hi[i]) continue;
                    int64_t a1 = lo[i] - j0, b1 = hi[i] - j0;
                    a1 = a1 < 0 ? 0 : a1 > nk ? nk : a1;
                    b1 = b1 < 0 ? 0 : b1 > nk ? nk : b1;
                    if (a1 < ga) ga = (int)a1;
                    if (b1 > gb) gb = (int)b1;
                }
                if (ga >= gb) continue; /* the group sees no key here: m, l and OT stay as they are */
                if (nrun && run_c[nrun - 1] + run_n[nrun - 1] == 16 * g && run_a[nrun - 1] == ga && run_b[nrun - 1] == gb) {
                    run_n[nrun - 1] += 16;
                } else {
                    run_c[nrun] = 16 * g, run_n[nrun] = 16, run_a[nrun] = ga, run_b[nrun] = gb;
                    nrun++;
                }
            }
        } else {
            run_c[0] = 0, run_n[0] = nqp, run_a[0] = 0, run_b[0] = nk;
            nrun = 1;
        }
        for (int r = 0; r < nrun; r++) {
            const int c0 = run_c[r], nc = run_n[r], ja = run_a[r], kk = run_b[r] - run_a[r];
            const int ilast = c0 + nc < nq ? c0 + nc : nq; /* real rows of the run: [c0, ilast) */
            float *STr = ST + (int64_t)ja * ld + c0;
            if (clean)
                for (int i = 0; i < nc; i++) cmax[c0 + i] = -INFINITY;
            c->kern->s_block(STr, ld, nc, QT + c0, kp + ja * ksj, ksj, ksd, kk, D, clean ? cmax + c0 : NULL);
            /* raw scores (padded query rows are 0): NaN / inf means a bad key or an overflow — an error
             * unless every such score is masked (attn__bad_scores) */
            if ((nc == ld ? attn__any_nonfinite(STr, (int64_t)kk * ld, 1) : attn__rect_nonfinite(STr, ld, kk, nc)) &&
                attn__bad_scores(c, STr, ld, 1, ilast - c0, kk, b, h, i0 + c0, j0 + ja, lo + c0, hi + c0, kraw)) {
#pragma omp atomic write
                *c->bad_scores = 1;
            }
            if (mv->present) {
                for (int i = c0; i < ilast; i++) {
                    const int64_t mo = b * mv->stride[0] + h * mv->stride[1] + (i0 + i) * mv->stride[2];
                    for (int j = ja; j < ja + kk; j++) {
                        float *x = ST + (int64_t)j * ld + i;
                        *x = attn__apply_mask(mv, mo + (j0 + j) * mv->stride[3], *x);
                    }
                }
            }
            if (!inside) { /* a boundary block of causal / window / key_lengths: -inf into exactly the
                              computed cells outside each row's [lo, hi) (few, once the runs are split) */
                for (int i = c0; i < ilast; i++) {
                    int64_t a1 = lo[i] - j0, b1 = hi[i] - j0;
                    a1 = a1 < ja ? ja : a1 > ja + kk ? ja + kk : a1;
                    b1 = b1 < a1 ? a1 : b1 > ja + kk ? ja + kk : b1;
                    float *x = ST + i;
                    for (int64_t j = ja; j < a1; j++) x[j * ld] = -INFINITY;
                    for (int64_t j = b1; j < ja + kk; j++) x[j * ld] = -INFINITY;
                }
            }
            if (wbase) { /* (one run: all rows, all keys of the block) */
                for (int i = 0; i < nq; i++) {
                    float *wr = wbase + (i0 + i) * ws2 + j0 * ws3;
                    for (int j = 0; j < nk; j++) wr[j * ws3] = ST[(int64_t)j * ld + i];
                }
            }
            c->kern->softmax_block(STr, ld, nc, kk, clean ? cmax + c0 : NULL, m + c0, l + c0, al + c0);
            c->kern->pv_block(OT + c0, ld, nc, STr, al + c0, vp + ja * vsj, vsj, vsd, kk, Dv);
        }
    }

    if (c->nsplit > 1) {
        for (int i = 0; i < nq; i++) {
            float *rec = c->partial + (((b * c->H + h) * Lq + i0 + i) * c->nsplit + s) * (Dv + 2);
            rec[0] = m[i];
            rec[1] = l[i];
            for (int64_t x = 0; x < Dv; x++) rec[2 + x] = OT[x * ld + i];
        }
        return;
    }
    if (c->p && c->p->lse) /* the rows' final m and l: log-sum-exp = m + log l */
        for (int i = 0; i < nq; i++) *attn__lse_at(c->p->lse, b, h, i0 + i) = l[i] > 0.0f ? m[i] + logf(l[i]) : -INFINITY;
    float *obase = (float *)c->out->data + b * c->out->stride[0] + h * c->out->stride[1];
    const int64_t os2 = c->out->stride[2], os3 = c->out->stride[3];
    if (ow) { /* bfloat16 / float16 out: float32 rows, then one rounding each */
        c->kern->store_out(ow, Dv, OT, ld, nq, l, Dv);
        const size_t oes = attn_dtype_size(c->out_dt);
        attn__convert_rows((char *)c->out->data + (size_t)(b * c->out->stride[0] + h * c->out->stride[1] + i0 * os2) * oes,
                           c->out_dt, os2, os3, ow, ATTN_F32, Dv, 1, nq, Dv);
    } else if (os3 == 1) {
        c->kern->store_out(obase + i0 * os2, os2, OT, ld, nq, l, Dv);
    } else {
        for (int i = 0; i < nq; i++) {
            const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
            float *orow = obase + (i0 + i) * os2;
            for (int64_t x = 0; x < Dv; x++) orow[x * os3] = OT[x * ld + i] * inv;
        }
    }
    if (wbase)
        for (int i = 0; i < nq; i++)
            attn__finish_weights_row(c, wbase + (i0 + i) * ws2, ws3, jlo, jhi, m[i], l[i] > 0.0f ? 1.0f / l[i] : 0.0f,
                                     l[i] > 0.0f);
}

static void attn__row_item(const attn__fctx *c, float *scr, int64_t b, int64_t h, int64_t i, int s) {
    const int64_t Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    const size_t dp = attn__round16((size_t)D), dvp = attn__round16((size_t)Dv);
    float *cur = scr;
    float *qs = attn__carve(&cur, dp + 1), *sc = attn__carve(&cur, FUSED_ROW_CHUNK);
    float *acc = attn__carve(&cur, dvp + 1), *O = attn__carve(&cur, dvp + 1);
    const int64_t ks2 = c->k->stride[2], ks3 = c->k->stride[3], vs2 = c->v->stride[2], vs3 = c->v->stride[3];
    const int wide = c->in_dt != ATTN_F32;
    float *kbuf = ks3 != 1 || wide ? attn__carve(&cur, FUSED_ROW_CHUNK * (size_t)(D ? D : 1)) : NULL;
    float *vbuf = vs3 != 1 || wide ? attn__carve(&cur, FUSED_ROW_CHUNK * (size_t)(Dv ? Dv : 1)) : NULL;
    const int64_t hk = h / c->group;
    const size_t ies = attn_dtype_size(c->in_dt);

    int64_t lo, hi;
    attn__key_range(c->p, b, i, Lq, Lk, &lo, &hi);
    const int64_t a = lo + (hi - lo) * s / c->nsplit, e = lo + (hi - lo) * (s + 1) / c->nsplit;

    const char *qr = (const char *)c->q->data + (size_t)(b * c->q->stride[0] + h * c->q->stride[1] + i * c->q->stride[2]) * ies;
    for (int64_t d = 0; d < D; d++) qs[d] = attn__load_f32(qr + (size_t)(d * c->q->stride[3]) * ies, c->in_dt) * c->scale;
    for (size_t d = (size_t)D; d < dp; d++) qs[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    for (int64_t x = 0; x < Dv; x++) O[x] = 0.0f;

    const char *kraw = (const char *)c->k->data + (size_t)(b * c->k->stride[0] + hk * c->k->stride[1]) * ies;
    const char *vraw = (const char *)c->v->data + (size_t)(b * c->v->stride[0] + hk * c->v->stride[1]) * ies;
    const float *kbase = (const float *)kraw, *vbase = (const float *)vraw;
    const attn__mask_view *mv = &c->mv;
    const int64_t mo = mv->present ? b * mv->stride[0] + h * mv->stride[1] + i * mv->stride[2] : 0;
    float *wrow = c->w ? (float *)c->w->data + b * c->w->stride[0] + h * c->w->stride[1] + i * c->w->stride[2] : NULL;
    const int64_t ws3 = c->w ? c->w->stride[3] : 0;

    for (int64_t j0 = a; j0 < e; j0 += FUSED_ROW_CHUNK) {
        const int nk = (int)(e - j0 < FUSED_ROW_CHUNK ? e - j0 : FUSED_ROW_CHUNK);
        const float *kp = kbase + j0 * ks2;
        int64_t ksj = ks2;
        if (kbuf) {
            attn__convert_rows(kbuf, ATTN_F32, D, 1, kraw + (size_t)(j0 * ks2) * ies, c->in_dt, ks2, ks3, nk, D);
            kp = kbuf;
            ksj = D;
        }
        c->kern->row_dots(sc, qs, kp, ksj, nk, D);
        if (attn__any_nonfinite(sc, nk, 1) && attn__bad_scores(c, sc, 1, 0, 1, nk, b, h, i, j0, &lo, &hi, kraw)) {
#pragma omp atomic write
            *c->bad_scores = 1;
        }
        if (mv->present)
            for (int j = 0; j < nk; j++) sc[j] = attn__apply_mask(mv, mo + (j0 + j) * mv->stride[3], sc[j]);
        if (wrow)
            for (int j = 0; j < nk; j++) wrow[(j0 + j) * ws3] = sc[j];
        const float bm = c->kern->row_max(sc, nk);
        if (bm == -INFINITY) continue; /* nothing visible in this chunk */
        const float mnew = bm > m ? bm : m;
        const float alpha = m == -INFINITY ? 0.0f : attn__exp_scalar(m - mnew);
        const float sum = c->kern->row_exp_sum(sc, nk, mnew);
        const float *vp = vbase + j0 * vs2;
        int64_t vsj = vs2;
        if (vbuf) {
            attn__convert_rows(vbuf, ATTN_F32, Dv, 1, vraw + (size_t)(j0 * vs2) * ies, c->in_dt, vs2, vs3, nk, Dv);
            vp = vbuf;
            vsj = Dv;
        }
        c->kern->row_pv(acc, sc, vp, vsj, nk, Dv);
        for (int64_t x = 0; x < Dv; x++) O[x] = O[x] * alpha + acc[x];
        l = l * alpha + sum;
        m = mnew;
    }

    if (c->nsplit > 1) {
        float *rec = c->partial + (((b * c->H + h) * Lq + i) * c->nsplit + s) * (Dv + 2);
        rec[0] = m;
        rec[1] = l;
        for (int64_t x = 0; x < Dv; x++) rec[2 + x] = O[x];
        return;
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    if (c->p && c->p->lse) *attn__lse_at(c->p->lse, b, h, i) = l > 0.0f ? m + logf(l) : -INFINITY;
    const size_t oes = attn_dtype_size(c->out_dt);
    char *orow = (char *)c->out->data + (size_t)(b * c->out->stride[0] + h * c->out->stride[1] + i * c->out->stride[2]) * oes;
    for (int64_t x = 0; x < Dv; x++) attn__store_f32(orow + (size_t)(x * c->out->stride[3]) * oes, c->out_dt, O[x] * inv);
    if (wrow) attn__finish_weights_row(c, wrow, ws3, lo, hi, m, inv, l > 0.0f);
}

/* Merge split-K partials of one output row. */
static void attn__merge_row(const attn__fctx *c, int64_t r) {
    const int64_t Dv = c->Dv, Lq = c->Lq, H = c->H;
    const int64_t b = r / (H * Lq), h = (r / Lq) % H, i = r % Lq;
    float *recs = c->partial + r * c->nsplit * (Dv + 2);
    float M = -INFINITY;
    for (int s = 0; s < c->nsplit; s++)
        if (recs[s * (Dv + 2)] > M) M = recs[s * (Dv + 2)];
    const size_t oes = attn_dtype_size(c->out_dt);
    char *orow = (char *)c->out->data + (size_t)(b * c->out->stride[0] + h * c->out->stride[1] + i * c->out->stride[2]) * oes;
    const int64_t os3 = c->out->stride[3];
    float L = 0.0f;
    float *acc = recs; /* the first record is consumed first, so its O[] can hold the sum */
    const float f0 = M == -INFINITY || recs[0] == -INFINITY ? 0.0f : attn__exp_scalar(recs[0] - M);
    L = recs[1] * f0;
    for (int64_t x = 0; x < Dv; x++) acc[2 + x] = recs[2 + x] * f0;
    for (int s = 1; s < c->nsplit && M != -INFINITY; s++) {
        const float *rec = recs + s * (Dv + 2);
        if (rec[0] == -INFINITY) continue;
        const float f = attn__exp_scalar(rec[0] - M);
        L += rec[1] * f;
        for (int64_t x = 0; x < Dv; x++) acc[2 + x] += rec[2 + x] * f;
    }
    const float inv = L > 0.0f ? 1.0f / L : 0.0f;
    if (c->p && c->p->lse) *attn__lse_at(c->p->lse, b, h, i) = L > 0.0f ? M + logf(L) : -INFINITY;
    for (int64_t x = 0; x < Dv; x++) attn__store_f32(orow + (size_t)(x * os3) * oes, c->out_dt, acc[2 + x] * inv);
}

/* the parallel steps of attn__sdpa_fused_ex on the pool: tid picks the thread's scratch */
typedef struct {
    attn__fctx *c;
    float *scratch;
    size_t per;
    int64_t rows;
    _Atomic int *left; /* split keys: splits still running per row / query tile; NULL: merge apart */
} attn__fjob;

/* the rows of a query row (row path) or query tile: group = item / nsplit */
static void attn__merge_group(const attn__fctx *c, int64_t g) {
    if (c->row_path) {
        attn__merge_row(c, g);
        return;
    }
    const int64_t qb = c->nqb - 1 - g % c->nqb, bh = g / c->nqb;
    const int64_t i1 = (qb + 1) * c->bq < c->Lq ? (qb + 1) * c->bq : c->Lq;
    for (int64_t i = qb * c->bq; i < i1; i++) attn__merge_row(c, bh * c->Lq + i);
}

static void attn__fused_items(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__fjob *j = (const attn__fjob *)p;
    attn__fctx *c = j->c;
    float *scr = j->scratch + j->per * (size_t)tid;
    for (int64_t it = lo; it < hi; it++) {
        const int s = (int)(it % c->nsplit);
        if (c->row_path) {
            const int64_t r = it / c->nsplit;
            attn__row_item(c, scr, r / (c->H * c->Lq), (r / c->Lq) % c->H, r % c->Lq, s);
        } else {
            const int64_t rest = it / c->nsplit;
            const int64_t qb = c->nqb - 1 - rest % c->nqb; /* heaviest causal block first */
            const int64_t bh = rest / c->nqb;
            attn__tile_item(c, scr, bh / c->H, bh % c->H, qb, s);
        }
        /* the last split of a row or tile to finish merges it (the same merge, in the same
         * order of splits, as a pass of its own after every item: one synchronisation fewer) */
        if (j->left && atomic_fetch_sub(&j->left[it / c->nsplit], 1) == 1) attn__merge_group(c, it / c->nsplit);
    }
}

static void attn__fused_merge(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__fjob *j = (const attn__fjob *)p;
    for (int64_t r = lo; r < hi; r++) attn__merge_row(j->c, r);
}

int attn__sdpa_fused_ex(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                        const attn_tensor *v, const attn_sdpa_params *p, const attn__fused_opts *opts) {
    attn__fctx c;
    memset(&c, 0, sizeof c);
    int bad_scores = 0;
    c.bad_scores = &bad_scores;
    ATTN_TRY(attn__sdpa_check_ex(out, weights, q, k, v, p, 3, &c.mv, &c.B, &c.H, &c.Hkv, &c.Lq, &c.Lk, &c.D, &c.Dv));
    attn__fused_opts o = opts ? *opts : attn__fused_opts_default();
    const int path = attn__fused_resolve_path(o.path);
    if (path < 0) return path;
    c.kern = attn__kernels_for(path);
    c.q = q;
    c.k = k;
    c.v = v;
    c.out = out;
    c.w = weights;
    c.p = p;
    c.group = c.Hkv > 0 ? c.H / c.Hkv : 1;
    c.in_dt = q->dtype;
    c.out_dt = out->dtype;
    c.scale = (p && p->has_scale) ? p->scale : (float)(1.0 / sqrt((double)(c.D > 0 ? c.D : 1)));
    const int64_t rows = c.B * c.H * c.Lq;
    if (rows == 0) return ATTN_OK;
    if (c.Dv == 0 && !weights && !(p && p->lse)) return ATTN_OK;

    c.bq = o.block_q > 0 ? (int)attn__round16((size_t)o.block_q) : FUSED_BQ;
    c.bk = o.block_k > 0 ? o.block_k : (path == ATTN__SIMD_AVX512 ? 96 : 64);
    const int row_max = o.row_max_lq == 0 ? FUSED_ROW_MAX_LQ : o.row_max_lq;
    c.row_path = c.Lq <= row_max;
    c.nqb = (c.Lq + c.bq - 1) / c.bq;

    int nt = (p && p->n_threads > 0) ? p->n_threads : attn_get_num_threads();
    if (nt < 1) nt = 1;
    const int64_t base = c.row_path ? rows : c.B * c.H * c.nqb;
    int64_t nsplit = 1;
    if (o.split > 0) nsplit = o.split;
    else if (base < 2 * (int64_t)nt) {
        int64_t want = (2 * nt + base - 1) / base;
        int64_t cap = c.Lk / (c.row_path ? FUSED_SPLIT_MIN_ROW : 4 * c.bk);
        nsplit = want < cap ? want : cap;
        if (nsplit < 1) nsplit = 1;
    }
    if (weights || nsplit > 4096) nsplit = weights ? 1 : 4096;
    c.nsplit = (int)nsplit;
    const int64_t items = base * nsplit;
    if (nt > items) nt = (int)items;

    const size_t per = c.row_path ? attn__row_scratch_floats(&c) : attn__tile_scratch_floats(&c);
    float *scratch = (float *)aligned_alloc(FUSED_ALIGN, sizeof(float) * per * (size_t)nt);
    if (!scratch)
        return attn_set_error(ATTN_E_NOMEM, "sdpa fused: out of memory for %d x %zu bytes of scratch", nt,
                              sizeof(float) * per);
    if (c.nsplit > 1) {
        size_t np = (size_t)rows * (size_t)c.nsplit * (size_t)(c.Dv + 2);
        c.partial = (float *)malloc(sizeof(float) * np);
        if (!c.partial) {
            free(scratch);
            return attn_set_error(ATTN_E_NOMEM, "sdpa fused: out of memory for split-K partials");
        }
    }

    /* items (a row or a query tile, times a key split) taken one at a time by attn's threads
     * (core/pool.h); then, with split keys, the merge of each row's partial results */
    attn__fjob job = {&c, scratch, per, rows, NULL};
    const int64_t groups = items / c.nsplit;
    if (c.nsplit > 1 && (job.left = (_Atomic int *)malloc(sizeof(_Atomic int) * (size_t)groups)) != NULL)
        for (int64_t g = 0; g < groups; g++) atomic_init(&job.left[g], c.nsplit);
    attn__pool_for(items, 1, nt, attn__fused_items, &job);
    if (c.nsplit > 1 && !job.left) {
        int64_t chunk = rows / (4 * (int64_t)nt);
        attn__pool_for(rows, chunk < 1 ? 1 : chunk, nt, attn__fused_merge, &job);
    }
    free((void *)job.left);
    free(c.partial);
    free(scratch);
    return attn__sdpa_post_check(out, weights, q, k, v, bad_scores);
}

int attn__sdpa_fused(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                     const attn_tensor *v, const attn_sdpa_params *p) {
    return attn__sdpa_fused_ex(out, weights, q, k, v, p, NULL);
}
