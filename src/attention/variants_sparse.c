/* Sparse exact-softmax variants: sliding window, Longformer (Beltagy et al. 2020) and
 * BigBird (Zaheer et al. 2020). Query rows are processed in tiles of up to ATTN__SP_TILE
 * consecutive rows of the same kind; the keys of a tile are the union of its rows' pattern
 * ranges, gathered into contiguous buffers, so scores and the weighted sum are two SGEMMs
 * of size tile x (union) x D. Memory is O(tile x union) per thread, never Lq x Lk. */
#include "attention/variants_internal.h"
#include "core/internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define ATTN__SP_TILE 32
#define ATTN__SP_TILE_GLOBAL 8
#define ATTN__SP_CHUNK 128 /* rows per parallel work item (a multiple of the tile) */

typedef struct {
    float *q, *k, *v, *s, *o;
    size_t cq, ck, cv, cs, co;
    attn__krange *rr; /* [tile][range_cap] per-row ranges */
    int64_t *rn;      /* [tile] counts */
    attn__krange *u;  /* union ranges [tile * range_cap] */
    int64_t *uoff;    /* [tile * range_cap + 1] */
    int64_t *blk;     /* bigbird scratch */
} attn__sp_ws;

static int attn__grow(float **p, size_t *cap, size_t n) {
    if (n <= *cap) return 1;
    size_t want = n + n / 4 + 64;
    float *np = (float *)realloc(*p, sizeof(float) * want);
    if (!np) return 0;
    *p = np;
    *cap = want;
    return 1;
}

/* The rows of t (keys or values, width D) of the union ranges w->u[0..nu) for (b, hk), nk rows in
 * all: used in place when the union is one range of unit-stride rows (a sliding window, a global
 * row; *ld = t's row stride), else gathered into *buf (grown to nk x D; *ld unchanged).
 * NULL when *buf cannot grow (out of memory). */
static const float *attn__sp_rows(float **buf, size_t *cap, const attn_tensor *t, const attn__sp_ws *w, int64_t b,
                                  int64_t hk, int64_t nu, int64_t nk, int64_t D, int64_t *ld) {
    if (nu == 1 && t->stride[3] == 1 && t->stride[2] >= D && t->stride[2] <= INT32_MAX) {
        *ld = t->stride[2];
        return (const float *)t->data + b * t->stride[0] + hk * t->stride[1] + w->u[0].lo * t->stride[2];
    }
    if (!attn__grow(buf, cap, (size_t)(nk * D) + 1)) return NULL;
    for (int64_t a = 0; a < nu; a++)
        attn__gather_rows(*buf + w->uoff[a] * D, t, b, hk, w->u[a].lo, w->u[a].hi - w->u[a].lo, D);
    return *buf;
}

static void attn__sp_ws_free(attn__sp_ws *w) {
    ATTN_FREE_ALL(w->q, w->k, w->v, w->s, w->o, w->rr, w->rn, w->u, w->uoff, w->blk);
    memset(w, 0, sizeof *w);
}

static int attn__sp_ws_init(attn__sp_ws *w, const attn__vctx *c) {
    memset(w, 0, sizeof *w);
    size_t rc = (size_t)c->range_cap;
    w->rr = (attn__krange *)malloc(sizeof(attn__krange) * rc * ATTN__SP_TILE);
    w->rn = (int64_t *)malloc(sizeof(int64_t) * ATTN__SP_TILE);
    w->u = (attn__krange *)malloc(sizeof(attn__krange) * rc * ATTN__SP_TILE);
    w->uoff = (int64_t *)malloc(sizeof(int64_t) * (rc * ATTN__SP_TILE + 1));
    w->blk = (int64_t *)malloc(sizeof(int64_t) * (size_t)c->block_cap);
    return w->rr && w->rn && w->u && w->uoff && w->blk;
}

/* One tile: rows i0 .. i0+nt-1 of (b, h). Returns 0, or -1 when out of memory. */
static int attn__sp_tile(attn__sp_ws *w, attn_tensor *out, attn_tensor *weights, const attn_tensor *q,
                         const attn_tensor *k, const attn_tensor *v, const attn__vctx *c, int64_t b, int64_t h,
                         int64_t i0, int64_t nt, float scale) {
    const int64_t D = c->D, Dv = c->Dv, Lk = c->Lk, rc = c->range_cap;
    const int64_t hk = h / (c->H / c->Hkv);
    int64_t total = 0;
    for (int64_t t = 0; t < nt; t++) {
        w->rn[t] = attn__row_ranges(c, b, h, i0 + t, w->rr + t * rc, w->blk);
        for (int64_t a = 0; a < w->rn[t]; a++) w->u[total++] = w->rr[t * rc + a];
    }
    int64_t nu = attn__ranges_normalise(w->u, total, Lk);
    int64_t nk = 0;
    for (int64_t a = 0; a < nu; a++) {
        w->uoff[a] = nk;
        nk += w->u[a].hi - w->u[a].lo;
    }
    w->uoff[nu] = nk;
    if (!attn__grow(&w->q, &w->cq, (size_t)(nt * D) + 1) || !attn__grow(&w->s, &w->cs, (size_t)(nt * nk) + 1) ||
        !attn__grow(&w->o, &w->co, (size_t)(nt * Dv) + 1))
        return -1;
    float *S = w->s, *O = w->o;
    /* keys and values: used in place when the union is one range of unit-stride rows (a
     * sliding window, a global row), else gathered into contiguous buffers */
    const float *kp = NULL, *vp = NULL;
    int64_t ldk = D, ldv = Dv;
    if (nk > 0) {
        attn__gather_rows(w->q, q, b, h, i0, nt, D);
        attn__vscale(w->q, nt * D, scale); /* scores come out scaled */
        kp = attn__sp_rows(&w->k, &w->ck, k, w, b, hk, nu, nk, D, &ldk);
        vp = attn__sp_rows(&w->v, &w->cv, v, w, b, hk, nu, nk, Dv, &ldv);
        if (!kp || !vp) return -1;
        if (D > 0)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nt, (int)nk, (int)D, 1.0f, w->q, (int)D, kp,
                        (int)(ldk > 0 ? ldk : 1), 0.0f, S, (int)nk);
        else
            memset(S, 0, sizeof(float) * (size_t)(nt * nk));
    }
    /* per row: keep the visible scores (others -inf), then a stable softmax in place */
    const int simple = c->simple[b];
    for (int64_t t = 0; t < nt; t++) {
        float *row = S + t * nk;
        int64_t i = i0 + t;
        /* walk the row's ranges against the union (both sorted) */
        int64_t ua = 0, prev = 0; /* prev: first column not yet decided */
        for (int64_t a = 0; a < w->rn[t]; a++) {
            attn__krange r = w->rr[t * rc + a];
            while (w->u[ua].hi <= r.lo) ua++;
            int64_t col0 = w->uoff[ua] + (r.lo - w->u[ua].lo);
            for (int64_t cc = prev; cc < col0; cc++) row[cc] = -INFINITY;
            if (!simple) /* holes in the key padding, or a user mask */
                for (int64_t j = r.lo; j < r.hi; j++) {
                    float bias;
                    int64_t cc = col0 + (j - r.lo);
                    row[cc] = attn__key_ok(c, b, h, i, j, &bias) ? row[cc] + bias : -INFINITY;
                }
            prev = col0 + (r.hi - r.lo);
        }
        for (int64_t cc = prev; cc < nk; cc++) row[cc] = -INFINITY;
        float mx = attn__vmax(row, nk);
        if (mx == -INFINITY) { /* no visible key */
            for (int64_t cc = 0; cc < nk; cc++) row[cc] = 0.0f;
            continue;
        }
        double sum = attn__vexp_sum(row, nk, mx); /* exp(-inf) = 0 for the invisible columns */
        attn__vscale(row, nk, (float)(1.0 / sum));
    }
    if (nk > 0 && Dv > 0)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nt, (int)Dv, (int)nk, 1.0f, S, (int)nk, vp, (int)ldv,
                    0.0f, O, (int)Dv);
    else
        memset(O, 0, sizeof(float) * (size_t)(nt * Dv));
    for (int64_t t = 0; t < nt; t++) {
        float *dst = (float *)out->data + b * out->stride[0] + h * out->stride[1] + (i0 + t) * out->stride[2];
        for (int64_t e = 0; e < Dv; e++) dst[e * out->stride[3]] = O[t * Dv + e];
        if (weights) {
            float *wr = (float *)weights->data + b * weights->stride[0] + h * weights->stride[1] + (i0 + t) * weights->stride[2];
            int64_t ws = weights->stride[3];
            for (int64_t j = 0; j < Lk; j++) wr[j * ws] = 0.0f;
            for (int64_t a = 0; a < nu; a++)
                for (int64_t j = w->u[a].lo; j < w->u[a].hi; j++) wr[j * ws] = S[t * nk + w->uoff[a] + (j - w->u[a].lo)];
        }
    }
    return 0;
}

int attn__variant_sparse(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *v, const attn__vctx *c) {
    const attn_variant_params *p = c->p;
    const int64_t B = c->B, H = c->H, Lq = c->Lq, D = c->D;
    const float scale = p->has_scale ? p->scale : (float)(1.0 / sqrt((double)(D > 0 ? D : 1)));
    const int64_t nchunk = (Lq + ATTN__SP_CHUNK - 1) / ATTN__SP_CHUNK;
    const int64_t items = B * H * nchunk;
    int nt = attn__variant_threads(p, items);
    int failed = 0;
    attn__blas_init(); /* OpenBLAS single-threaded inside our regions (core/threads.c) */
#pragma omp parallel num_threads(nt)
    {
        attn__sp_ws ws;
        int ok = attn__sp_ws_init(&ws, c);
        if (!ok) attn__set_failed(&failed);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            if (!ok) continue;
            int64_t b = it / (H * nchunk), h = (it / nchunk) % H, ch = it % nchunk;
            int64_t r0 = ch * ATTN__SP_CHUNK, r1 = r0 + ATTN__SP_CHUNK < Lq ? r0 + ATTN__SP_CHUNK : Lq;
            int64_t i = r0;
            while (i < r1 && ok) {
                int64_t cls = attn__row_class(c, b, i), n = 1;
                /* rows that see every key (global rows) go in small tiles: scores are tile x Lk */
                int64_t tmax = attn__row_is_global(c, b, i) ? ATTN__SP_TILE_GLOBAL : ATTN__SP_TILE;
                while (n < tmax && i + n < r1 && attn__row_class(c, b, i + n) == cls) n++;
                if (attn__sp_tile(&ws, out, weights, q, k, v, c, b, h, i, n, scale) < 0) {
                    ok = 0;
                    attn__set_failed(&failed);
                }
                i += n;
            }
        }
        attn__sp_ws_free(&ws);
    }
    if (failed)
        return attn_set_error(ATTN_E_NOMEM, "%s: out of memory for the score tiles (Lk = %lld)", attn_variant_name(p->kind),
                              (long long)c->Lk);
    return ATTN_OK;
}
