/* Attention variants: parameters, validation, the sparse patterns (key ranges per query
 * row and the dense bool mask), dispatch, and the encoder layer (see attn_variants.h). */
#include "attention/variants_internal.h"
#include "core/internal.h"

#include <cblas.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

attn_variant_params attn_variant_params_default(attn_variant_kind kind) {
    return (attn_variant_params){.kind = kind,
                                 .window = kind == ATTN_VARIANT_LONGFORMER ? 128 : 256,
                                 .n_global = 1,
                                 .block = 64,
                                 .global_blocks = 1,
                                 .random_blocks = 3,
                                 .features = 256};
}

static const char *const attn__variant_names[] = {"exact", "linear", "performer", "sliding", "longformer", "bigbird"};
#define ATTN__N_VARIANTS ((int)(sizeof attn__variant_names / sizeof attn__variant_names[0]))

const char *attn_variant_name(attn_variant_kind kind) {
    if ((int)kind < 0 || (int)kind >= ATTN__N_VARIANTS) return "unknown";
    return attn__variant_names[kind];
}

static int attn__streq_ci(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (tolower((unsigned char)*a) != tolower((unsigned char)*b)) return 0;
    return *a == *b;
}

int attn_variant_from_name(const char *name, attn_variant_kind *kind) {
    if (!name || !kind) return attn_set_error(ATTN_E_INVALID, "variant: NULL name");
    for (int i = 0; i < ATTN__N_VARIANTS; i++)
        if (attn__streq_ci(name, attn__variant_names[i])) {
            *kind = (attn_variant_kind)i;
            return ATTN_OK;
        }
    return attn_set_error(ATTN_E_INVALID,
                          "unknown attention variant '%s' (expected exact, linear, performer, sliding, longformer or bigbird)",
                          name);
}

int attn_variant_validate(const attn_variant_params *p) {
    if (!p) return attn_set_error(ATTN_E_INVALID, "variant: params must not be NULL");
    const char *nm = attn_variant_name(p->kind);
    switch (p->kind) {
    case ATTN_VARIANT_EXACT:
        break;
    case ATTN_VARIANT_LINEAR:
        if (p->has_scale)
            return attn_set_error(ATTN_E_INVALID, "linear: linear attention has no softmax scale (phi = elu + 1 is applied to the raw q and k); do not set a scale");
        if (p->mask)
            return attn_set_error(ATTN_E_UNSUPPORTED, "linear: a general [.., Lq, Lk] mask is not supported; use is_causal, key_lengths or key_padding_mask");
        break;
    case ATTN_VARIANT_PERFORMER:
        if (p->features <= 0)
            return attn_set_error(ATTN_E_INVALID, "performer: features must be >= 1, got %lld", (long long)p->features);
        if (p->features > (1 << 20))
            return attn_set_error(ATTN_E_INVALID, "performer: features must be <= 1048576, got %lld", (long long)p->features);
        if (p->mask)
            return attn_set_error(ATTN_E_UNSUPPORTED, "performer: a general [.., Lq, Lk] mask is not supported; use is_causal, key_lengths or key_padding_mask");
        if (p->has_scale && !(isfinite(p->scale) && p->scale > 0.0f))
            return attn_set_error(ATTN_E_INVALID, "performer: scale must be finite and > 0, got %g", (double)p->scale);
        break;
    case ATTN_VARIANT_SLIDING:
    case ATTN_VARIANT_LONGFORMER:
        if (p->window <= 0)
            return attn_set_error(ATTN_E_INVALID, "%s: window must be >= 1, got %lld", nm, (long long)p->window);
        if (p->kind == ATTN_VARIANT_LONGFORMER && p->n_global < 0)
            return attn_set_error(ATTN_E_INVALID, "longformer: the number of global tokens must be >= 0, got %lld",
                                  (long long)p->n_global);
        break;
    case ATTN_VARIANT_BIGBIRD:
        if (p->block <= 0) return attn_set_error(ATTN_E_INVALID, "bigbird: block size must be >= 1, got %lld", (long long)p->block);
        if (p->global_blocks < 0)
            return attn_set_error(ATTN_E_INVALID, "bigbird: global blocks must be >= 0, got %lld", (long long)p->global_blocks);
        if (p->random_blocks < 0)
            return attn_set_error(ATTN_E_INVALID, "bigbird: random blocks must be >= 0, got %lld", (long long)p->random_blocks);
        break;
    default:
        return attn_set_error(ATTN_E_INVALID, "variant: unknown kind %d", (int)p->kind);
    }
    if (p->kind != ATTN_VARIANT_LINEAR && p->has_scale && !isfinite(p->scale))
        return attn_set_error(ATTN_E_INVALID, "%s: scale must be finite", nm);
    return ATTN_OK;
}

/* Shape-dependent rules and the key-padding mask. */
static int attn__variant_check_shapes(const attn_variant_params *p, int64_t B, int64_t Lk) {
    const attn_tensor *m = p->key_padding_mask;
    if (m) {
        if (m->dtype != ATTN_BOOL)
            return attn_set_error(ATTN_E_DTYPE, "%s: key_padding_mask must be bool [B, Lk], got %s", attn_variant_name(p->kind),
                                  attn_dtype_name(m->dtype));
        if (m->ndim != 2 || m->shape[0] != B || m->shape[1] != Lk)
            return attn_set_error(ATTN_E_SHAPE, "%s: key_padding_mask must be [B, Lk] = [%lld, %lld]", attn_variant_name(p->kind),
                                  (long long)B, (long long)Lk);
        if (!m->data && B * Lk > 0) return attn_set_error(ATTN_E_INVALID, "%s: key_padding_mask has no data", attn_variant_name(p->kind));
    }
    if (p->key_lengths)
        for (int64_t b = 0; b < B; b++)
            if (p->key_lengths[b] < 0 || p->key_lengths[b] > Lk)
                return attn_set_error(ATTN_E_INVALID, "%s: key_lengths[%lld] = %lld not in 0..Lk=%lld", attn_variant_name(p->kind),
                                      (long long)b, (long long)p->key_lengths[b], (long long)Lk);
    if (p->kind == ATTN_VARIANT_LONGFORMER && p->n_global > Lk)
        return attn_set_error(ATTN_E_INVALID, "longformer: %lld global tokens but the sequence has only Lk = %lld tokens",
                              (long long)p->n_global, (long long)Lk);
    if (p->kind == ATTN_VARIANT_BIGBIRD) {
        if (Lk % p->block != 0)
            return attn_set_error(ATTN_E_INVALID,
                                  "bigbird: block size %lld does not divide the (padded) key length Lk = %lld; pad the sequence to a multiple of the block size",
                                  (long long)p->block, (long long)Lk);
        if (p->global_blocks > Lk / p->block)
            return attn_set_error(ATTN_E_INVALID, "bigbird: %lld global blocks but Lk / block = %lld / %lld = %lld blocks",
                                  (long long)p->global_blocks, (long long)Lk, (long long)p->block, (long long)(Lk / p->block));
    }
    if (p->kind == ATTN_VARIANT_EXACT && p->mask && p->key_padding_mask)
        return attn_set_error(ATTN_E_UNSUPPORTED, "exact: key_padding_mask cannot be combined with mask; fold it into the mask");
    return ATTN_OK;
}

static attn_sdpa_params attn__to_sdpa(const attn_variant_params *p) {
    attn_sdpa_params s = attn_sdpa_params_default();
    s.mask = p->mask;
    s.is_causal = p->is_causal;
    s.key_lengths = p->key_lengths;
    s.has_scale = p->has_scale;
    s.scale = p->scale;
    s.n_threads = p->n_threads;
    return s;
}

int attn_variant_check(const attn_tensor *out, const attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                       const attn_tensor *v, const attn_variant_params *p, int64_t *pB, int64_t *pH, int64_t *pHkv,
                       int64_t *pLq, int64_t *pLk, int64_t *pD, int64_t *pDv) {
    ATTN_TRY(attn_variant_validate(p));
    attn_sdpa_params s = attn__to_sdpa(p);
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    int rc = attn_sdpa_check(out, weights, q, k, v, &s, &B, &H, &Hkv, &Lq, &Lk, &D, &Dv);
    if (rc < 0) {
        /* name the variant in shape / dtype messages */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", attn_last_error());
        const char *body = strncmp(msg, "sdpa: ", 6) == 0 ? msg + 6 : msg;
        return attn_set_error(rc, "%s: %s", attn_variant_name(p->kind), body);
    }
    {
        const attn_tensor *ts[4] = {q, k, v, out};
        const char *nm[4] = {"q", "k", "v", "out"};
        for (int t = 0; t < 4; t++)
            if (ts[t]->dtype != ATTN_F32)
                return attn_set_error(ATTN_E_DTYPE, "%s: %s must be float32, got %s (bfloat16 / float16 are exact attention only)",
                                      attn_variant_name(p->kind), nm[t], attn_dtype_name(ts[t]->dtype));
    }
    ATTN_TRY(attn__variant_check_shapes(p, B, Lk));
    if (pB) *pB = B;
    if (pH) *pH = H;
    if (pHkv) *pHkv = Hkv;
    if (pLq) *pLq = Lq;
    if (pLk) *pLk = Lk;
    if (pD) *pD = D;
    if (pDv) *pDv = Dv;
    return ATTN_OK;
}

/* ---------------------------------------------------------------- vector helpers */

ATTN__VCLONES float attn__vmax(const float *x, int64_t n) {
    float m = -INFINITY;
#if !defined(__clang__) /* clang cannot vectorise this form and warns; GCC does */
#pragma omp simd reduction(max : m)
#endif
    for (int64_t i = 0; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* Two loops: GCC 12 vectorises each (the exp loop with AVX-512 masking) but not the fused
 * float-exp / float64-sum loop. */
ATTN__VCLONES double attn__vexp_sum(float *x, int64_t n, float sub) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) x[i] = attn__expf(x[i] - sub);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += (double)x[i];
    return s;
}

ATTN__VCLONES void attn__vscale(float *x, int64_t n, float a) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) x[i] *= a;
}

ATTN__VCLONES void attn__velu1(float *x, int64_t n) {
#pragma omp simd
    for (int64_t i = 0; i < n; i++) x[i] = attn__elu1f(x[i]);
}

/* ---------------------------------------------------------------- context */

void attn__vctx_free(attn__vctx *c) {
    ATTN_FREE_ALL(c->simple, c->valid, c->span_lo, c->span_hi);
    memset(c, 0, sizeof *c);
}

int attn__vctx_init(attn__vctx *c, const attn_variant_params *p, int64_t B, int64_t H, int64_t Hkv, int64_t Lq,
                    int64_t Lk, int64_t D, int64_t Dv) {
    memset(c, 0, sizeof *c);
    c->p = p;
    c->B = B, c->H = H, c->Hkv = Hkv, c->Lq = Lq, c->Lk = Lk, c->D = D, c->Dv = Dv;
    c->valid = (unsigned char *)malloc((size_t)(B * Lk) + 1);
    c->span_lo = (int64_t *)malloc(sizeof(int64_t) * (size_t)(B + 1));
    c->span_hi = (int64_t *)malloc(sizeof(int64_t) * (size_t)(B + 1));
    c->simple = (unsigned char *)malloc((size_t)(B + 1));
    if (!c->valid || !c->span_lo || !c->span_hi || !c->simple) {
        attn__vctx_free(c);
        return attn_set_error(ATTN_E_NOMEM, "%s: out of memory", attn_variant_name(p->kind));
    }
    const attn_tensor *km = p->key_padding_mask;
    for (int64_t b = 0; b < B; b++) {
        int64_t lo = -1, hi = -1;
        for (int64_t j = 0; j < Lk; j++) {
            int ok = 1;
            if (p->key_lengths && j >= p->key_lengths[b]) ok = 0;
            if (ok && km && !((const unsigned char *)km->data)[b * km->stride[0] + j * km->stride[1]]) ok = 0;
            c->valid[b * Lk + j] = (unsigned char)ok;
            if (ok) {
                if (lo < 0) lo = j;
                hi = j + 1;
            }
        }
        c->span_lo[b] = lo < 0 ? 0 : lo;
        c->span_hi[b] = lo < 0 ? 0 : hi;
        int holes = 0;
        for (int64_t j = c->span_lo[b]; j < c->span_hi[b] && !holes; j++) holes = !c->valid[b * Lk + j];
        c->simple[b] = (unsigned char)(!holes && !p->mask);
    }
    int rc = attn__sdpa_mask_view(&c->mv, p->mask, B, H, Lq, Lk);
    if (rc < 0) {
        attn__vctx_free(c);
        return rc;
    }
    int64_t r = 0;
    if (p->kind == ATTN_VARIANT_BIGBIRD) {
        int64_t nbmax = (Lk + p->block - 1) / p->block;
        r = p->random_blocks < nbmax ? p->random_blocks : nbmax;
    }
    c->range_cap = 4 + r;
    c->block_cap = 4 * r + 8;
    return ATTN_OK;
}

/* ---------------------------------------------------------------- patterns */

/* r random key blocks of bigbird query block row qb (g <= qb < nb): distinct blocks kb in
 * [g, nb) with |kb - qb| > 1, drawn with xoshiro256** seeded by (seed, head, qb, nb).
 * Writes them sorted to out (capacity 4r + 8) and returns how many. */
static int64_t attn__bigbird_random(uint64_t seed, int64_t h, int64_t qb, int64_t nb, int64_t g, int64_t r, int64_t *out) {
    if (r <= 0) return 0;
    int64_t lo = g > 0 ? g : 0;
    int64_t nc = nb - lo;
    for (int64_t d = -1; d <= 1; d++)
        if (qb + d >= lo && qb + d < nb) nc--;
    if (nc <= 0) return 0;
    int64_t n = 0;
    if (nc <= 4 * r) { /* enumerate the candidates (at most 4r of them) */
        for (int64_t kb = lo; kb < nb; kb++)
            if (kb < qb - 1 || kb > qb + 1) out[n++] = kb;
        if (n <= r) return n; /* all of them, already sorted */
    }
    uint64_t x = seed ^ 0x42B1B1D0ULL;
    uint64_t s = attn__splitmix64(&x);
    x = s ^ (uint64_t)h;
    s = attn__splitmix64(&x);
    x = s ^ (uint64_t)qb;
    s = attn__splitmix64(&x);
    x = s ^ (uint64_t)nb;
    s = attn__splitmix64(&x);
    attn_rng rng;
    attn_rng_seed(&rng, s);
    if (n > 0) { /* partial Fisher-Yates over the enumerated candidates */
        for (int64_t t = 0; t < r; t++) {
            int64_t u = t + attn__rng_below(&rng, n - t);
            int64_t tmp = out[t];
            out[t] = out[u];
            out[u] = tmp;
        }
        n = r;
    } else { /* many candidates: rejection sampling */
        while (n < r) {
            int64_t kb = lo + attn__rng_below(&rng, nb - lo);
            if (kb >= qb - 1 && kb <= qb + 1) continue;
            int dup = 0;
            for (int64_t t = 0; t < n && !dup; t++) dup = out[t] == kb;
            if (!dup) out[n++] = kb;
        }
    }
    /* sort (insertion; r is small) */
    for (int64_t a = 1; a < n; a++) {
        int64_t key = out[a], bpos = a - 1;
        while (bpos >= 0 && out[bpos] > key) {
            out[bpos + 1] = out[bpos];
            bpos--;
        }
        out[bpos + 1] = key;
    }
    return n;
}

static int attn__krange_cmp(const void *a, const void *b) {
    const attn__krange *x = (const attn__krange *)a, *y = (const attn__krange *)b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Clip to [0, lim), drop empties, sort, merge overlapping or touching ranges. */
int64_t attn__ranges_normalise(attn__krange *r, int64_t n, int64_t lim) {
    int64_t m = 0;
    for (int64_t t = 0; t < n; t++) {
        int64_t lo = r[t].lo < 0 ? 0 : r[t].lo, hi = r[t].hi > lim ? lim : r[t].hi;
        if (hi > lo) r[m].lo = lo, r[m].hi = hi, m++;
    }
    if (m > 16) {
        qsort(r, (size_t)m, sizeof *r, attn__krange_cmp);
    } else {
        for (int64_t a = 1; a < m; a++) {
            attn__krange key = r[a];
            int64_t bpos = a - 1;
            while (bpos >= 0 && r[bpos].lo > key.lo) {
                r[bpos + 1] = r[bpos];
                bpos--;
            }
            r[bpos + 1] = key;
        }
    }
    int64_t w = 0;
    for (int64_t t = 0; t < m; t++) {
        if (w > 0 && r[t].lo <= r[w - 1].hi) {
            if (r[t].hi > r[w - 1].hi) r[w - 1].hi = r[t].hi;
        } else {
            r[w++] = r[t];
        }
    }
    return w;
}

int64_t attn__row_ranges(const attn__vctx *c, int64_t b, int64_t h, int64_t i, attn__krange *r, int64_t *blk) {
    const attn_variant_params *p = c->p;
    int64_t s = c->span_lo[b], n = c->span_hi[b] - s;
    if (n <= 0) return 0;
    int64_t ip = i + c->Lk - c->Lq - s; /* local query position */
    int64_t lim = n;
    if (p->is_causal || p->kind == ATTN_VARIANT_SLIDING) {
        if (ip + 1 < lim) lim = ip + 1;
    }
    if (lim <= 0) return 0;
    int64_t cnt = 0;
    switch (p->kind) {
    case ATTN_VARIANT_SLIDING:
        r[cnt].lo = ip - p->window + 1, r[cnt].hi = ip + 1, cnt++;
        break;
    case ATTN_VARIANT_LONGFORMER:
        if (ip >= 0 && ip < p->n_global) {
            r[cnt].lo = 0, r[cnt].hi = n, cnt++;
        } else {
            r[cnt].lo = 0, r[cnt].hi = p->n_global, cnt++;
            r[cnt].lo = ip - p->window, r[cnt].hi = ip + p->window + 1, cnt++;
        }
        break;
    case ATTN_VARIANT_BIGBIRD: {
        int64_t bs = p->block, nb = (n + bs - 1) / bs, g = p->global_blocks;
        int64_t qb = attn__floor_div(ip, bs);
        if (qb >= 0 && qb < g && qb < nb) {
            r[cnt].lo = 0, r[cnt].hi = n, cnt++;
        } else {
            r[cnt].lo = (qb - 1) * bs, r[cnt].hi = (qb + 2) * bs, cnt++;
            r[cnt].lo = 0, r[cnt].hi = g * bs, cnt++;
            if (qb >= 0 && qb < nb) {
                int64_t nr = attn__bigbird_random(p->seed, h, qb, nb, g, p->random_blocks, blk);
                for (int64_t t = 0; t < nr; t++) r[cnt].lo = blk[t] * bs, r[cnt].hi = (blk[t] + 1) * bs, cnt++;
            }
        }
        break;
    }
    default: /* dense: exact, linear, performer */
        r[cnt].lo = 0, r[cnt].hi = n, cnt++;
        break;
    }
    cnt = attn__ranges_normalise(r, cnt, lim);
    for (int64_t t = 0; t < cnt; t++) r[t].lo += s, r[t].hi += s;
    return cnt;
}

int64_t attn__row_class(const attn__vctx *c, int64_t b, int64_t i) {
    const attn_variant_params *p = c->p;
    int64_t ip = i + c->Lk - c->Lq - c->span_lo[b];
    if (p->kind == ATTN_VARIANT_LONGFORMER) return (ip >= 0 && ip < p->n_global) ? 1 : 0;
    if (p->kind == ATTN_VARIANT_BIGBIRD) return attn__floor_div(ip, p->block);
    return 0;
}

int attn__row_is_global(const attn__vctx *c, int64_t b, int64_t i) {
    const attn_variant_params *p = c->p;
    int64_t ip = i + c->Lk - c->Lq - c->span_lo[b];
    if (p->kind == ATTN_VARIANT_LONGFORMER) return ip >= 0 && ip < p->n_global;
    if (p->kind == ATTN_VARIANT_BIGBIRD) return ip >= 0 && ip / p->block < p->global_blocks;
    return 0;
}

int attn_variant_mask(attn_tensor *mask, const attn_variant_params *p, int64_t B, int64_t H, int64_t Lq, int64_t Lk) {
    if (!mask) return attn_set_error(ATTN_E_INVALID, "variant_mask: mask must not be NULL");
    ATTN_TRY(attn_variant_validate(p));
    if (mask->dtype != ATTN_BOOL)
        return attn_set_error(ATTN_E_DTYPE, "variant_mask: mask must be bool, got %s", attn_dtype_name(mask->dtype));
    if (B < 1 || H < 1 || Lq < 0 || Lk < 0)
        return attn_set_error(ATTN_E_INVALID, "variant_mask: need B >= 1, H >= 1, Lq >= 0, Lk >= 0");
    int full = mask->ndim == 4;
    if (full) {
        if (mask->shape[0] != B || mask->shape[1] != H || mask->shape[2] != Lq || mask->shape[3] != Lk)
            return attn_set_error(ATTN_E_SHAPE, "variant_mask: mask must be [%lld, %lld, %lld, %lld]", (long long)B, (long long)H,
                                  (long long)Lq, (long long)Lk);
    } else if (mask->ndim != 2 || mask->shape[0] != Lq || mask->shape[1] != Lk) {
        return attn_set_error(ATTN_E_SHAPE, "variant_mask: mask must be [B, H, Lq, Lk] or [Lq, Lk] = [%lld, %lld]", (long long)Lq,
                              (long long)Lk);
    }
    if (!mask->data && attn_tensor_numel(mask) > 0) return attn_set_error(ATTN_E_INVALID, "variant_mask: mask has no data");
    ATTN_TRY(attn__variant_check_shapes(p, B, Lk));
    attn__vctx c;
    ATTN_TRY(attn__vctx_init(&c, p, B, H, H, Lq, Lk, 0, 0));
    attn__krange *r = (attn__krange *)malloc(sizeof(attn__krange) * (size_t)c.range_cap);
    int64_t *blk = (int64_t *)malloc(sizeof(int64_t) * (size_t)c.block_cap);
    if (!r || !blk) {
        free(r);
        free(blk);
        attn__vctx_free(&c);
        return attn_set_error(ATTN_E_NOMEM, "variant_mask: out of memory");
    }
    int64_t nb = full ? B : 1, nh = full ? H : 1;
    unsigned char *m = (unsigned char *)mask->data;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t h = 0; h < nh; h++)
            for (int64_t i = 0; i < Lq; i++) {
                unsigned char *row = full ? m + b * mask->stride[0] + h * mask->stride[1] + i * mask->stride[2]
                                          : m + i * mask->stride[0];
                int64_t js = full ? mask->stride[3] : mask->stride[1];
                for (int64_t j = 0; j < Lk; j++) row[j * js] = 0;
                int64_t nr = attn__row_ranges(&c, b, h, i, r, blk);
                for (int64_t t = 0; t < nr; t++)
                    for (int64_t j = r[t].lo; j < r[t].hi; j++) {
                        float bias;
                        row[j * js] = (unsigned char)attn__key_ok(&c, b, h, i, j, &bias);
                    }
            }
    free(r);
    free(blk);
    attn__vctx_free(&c);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- dispatch */


static int attn__variant_exact(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                               const attn_tensor *v, const attn_variant_params *p) {
    attn_sdpa_params s = attn__to_sdpa(p);
    attn_tensor km;
    if (p->key_padding_mask) { /* [B, Lk] -> [B, 1, 1, Lk] view */
        const attn_tensor *m = p->key_padding_mask;
        memset(&km, 0, sizeof km);
        km.data = m->data;
        km.dtype = ATTN_BOOL;
        km.ndim = 4;
        km.shape[0] = m->shape[0], km.shape[1] = 1, km.shape[2] = 1, km.shape[3] = m->shape[1];
        km.stride[0] = m->stride[0], km.stride[1] = 0, km.stride[2] = 0, km.stride[3] = m->stride[1];
        s.mask = &km;
    }
    return attn_sdpa(out, weights, q, k, v, &s);
}

int attn_variant_attention(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                           const attn_tensor *v, const attn_variant_params *p) {
    int64_t B, H, Hkv, Lq, Lk, D, Dv;
    ATTN_TRY(attn_variant_check(out, weights, q, k, v, p, &B, &H, &Hkv, &Lq, &Lk, &D, &Dv));
    if (p->kind == ATTN_VARIANT_EXACT) return attn__variant_exact(out, weights, q, k, v, p);
    if (B * H * Lq == 0 || (Dv == 0 && !weights)) return ATTN_OK; /* nothing to write */
    attn__vctx c;
    ATTN_TRY(attn__vctx_init(&c, p, B, H, Hkv, Lq, Lk, D, Dv));
    int rc;
    if (p->kind == ATTN_VARIANT_LINEAR) rc = attn__variant_linear(out, weights, q, k, v, &c);
    else if (p->kind == ATTN_VARIANT_PERFORMER) rc = attn__variant_performer(out, weights, q, k, v, &c);
    else rc = attn__variant_sparse(out, weights, q, k, v, &c);
    attn__vctx_free(&c);
    return rc;
}

/* ---------------------------------------------------------------- encoder layer */

static const attn_tensor *attn__opt_t(const attn_tensor *t) { return t->data ? t : NULL; }

/* y = merge_heads(variant(q, k, v)) · Woᵀ + bo for x [B, L, E] (self-attention). */
static int attn__variant_self_attn(attn_tensor *y, attn_tensor *weights, const attn_tensor *x, const attn_mha_config *cfg,
                                   const attn_mha_weights *w, const attn_variant_params *p, attn_arena *arena) {
    int64_t B = x->shape[0], L = x->shape[1], H = cfg->n_heads;
    int64_t Hkv = cfg->n_kv_heads > 0 ? cfg->n_kv_heads : H;
    int64_t D = cfg->head_dim > 0 ? cfg->head_dim : cfg->d_model / H;
    int64_t Lp = L;
    if (p->kind == ATTN_VARIANT_BIGBIRD && L % p->block != 0) Lp = (L / p->block + 1) * p->block;
    attn_arena_mark mk = attn_arena_get_mark(arena);
    float *qb = attn_arena_alloc_f32(arena, (size_t)(B * L * H * D) + 1);
    float *kb = attn_arena_alloc_f32(arena, (size_t)(B * L * Hkv * D) + 1);
    float *vb = attn_arena_alloc_f32(arena, (size_t)(B * L * Hkv * D) + 1);
    float *ob = attn_arena_alloc_f32(arena, (size_t)(B * L * H * D) + 1);
    if (!qb || !kb || !vb || !ob) {
        attn_arena_release(arena, mk);
        return ATTN_E_NOMEM;
    }
    attn_tensor qt = attn_tensor_f32_3d(qb, B, L, H * D), kt = attn_tensor_f32_3d(kb, B, L, Hkv * D);
    attn_tensor vt = attn_tensor_f32_3d(vb, B, L, Hkv * D), ot = attn_tensor_f32_3d(ob, B, L, H * D);
    attn_tensor qh, kh, vh, oh, om;
    int rc = attn_linear(&qt, x, &w->wq, attn__opt_t(&w->bq));
    if (rc == 0) rc = attn_linear(&kt, x, &w->wk, attn__opt_t(&w->bk));
    if (rc == 0) rc = attn_linear(&vt, x, &w->wv, attn__opt_t(&w->bv));
    if (rc == 0) rc = attn_tensor_split_heads(&qh, &qt, H);
    if (rc == 0) rc = attn_tensor_split_heads(&kh, &kt, Hkv);
    if (rc == 0) rc = attn_tensor_split_heads(&vh, &vt, Hkv);
    if (rc == 0) rc = attn_tensor_split_heads(&oh, &ot, H);
    if (rc == 0 && cfg->rope_theta > 0.0f) {
        rc = attn_rope(&qh, 0, cfg->rope_theta, cfg->rope_dim, cfg->rope_layout);
        if (rc == 0) rc = attn_rope(&kh, 0, cfg->rope_theta, cfg->rope_dim, cfg->rope_layout);
    }
    attn_variant_params vp = *p;
    if (rc == 0 && Lp == L) {
        rc = attn_variant_attention(&oh, weights, &qh, &kh, &vh, &vp);
    } else if (rc == 0) {
        /* bigbird: pad to a multiple of the block with masked keys */
        float *qp = attn_arena_alloc_f32(arena, (size_t)(B * H * Lp * D));
        float *kp = attn_arena_alloc_f32(arena, (size_t)(B * Hkv * Lp * D));
        float *vpb = attn_arena_alloc_f32(arena, (size_t)(B * Hkv * Lp * D));
        float *op = attn_arena_alloc_f32(arena, (size_t)(B * H * Lp * D));
        float *wpd = weights ? attn_arena_alloc_f32(arena, (size_t)(B * H * Lp * Lp)) : NULL;
        int64_t *kl = (int64_t *)attn_arena_alloc(arena, sizeof(int64_t) * (size_t)B);
        unsigned char *kpm = NULL;
        if (p->key_padding_mask) kpm = (unsigned char *)attn_arena_alloc(arena, (size_t)(B * Lp));
        if (!qp || !kp || !vpb || !op || (weights && !wpd) || !kl || (p->key_padding_mask && !kpm)) {
            attn_arena_release(arena, mk);
            return ATTN_E_NOMEM;
        }
        attn_tensor qP = attn_tensor_f32_4d(qp, B, H, Lp, D), kP = attn_tensor_f32_4d(kp, B, Hkv, Lp, D);
        attn_tensor vP = attn_tensor_f32_4d(vpb, B, Hkv, Lp, D), oP = attn_tensor_f32_4d(op, B, H, Lp, D);
        attn_tensor wP = attn_tensor_f32_4d(wpd, B, H, Lp, Lp), kmT;
        attn_tensor sq = qP, sk = kP, sv = vP; /* the first L rows */
        sq.shape[2] = sk.shape[2] = sv.shape[2] = L;
        rc = attn_tensor_copy(&sq, &qh);
        if (rc == 0) rc = attn_tensor_copy(&sk, &kh);
        if (rc == 0) rc = attn_tensor_copy(&sv, &vh);
        for (int64_t b = 0; b < B; b++) kl[b] = p->key_lengths ? p->key_lengths[b] : L;
        vp.key_lengths = kl;
        if (kpm) {
            const attn_tensor *m = p->key_padding_mask;
            for (int64_t b = 0; b < B; b++)
                for (int64_t j = 0; j < Lp; j++)
                    kpm[b * Lp + j] = j < L ? ((const unsigned char *)m->data)[b * m->stride[0] + j * m->stride[1]] != 0 : 0;
            int64_t ks[2] = {B, Lp};
            attn_tensor_make(&kmT, kpm, ATTN_BOOL, 2, ks);
            vp.key_padding_mask = &kmT;
        }
        if (rc == 0) rc = attn_variant_attention(&oP, weights ? &wP : NULL, &qP, &kP, &vP, &vp);
        if (rc == 0) {
            attn_tensor so = oP;
            so.shape[2] = L;
            rc = attn_tensor_copy(&oh, &so);
        }
        if (rc == 0 && weights) {
            attn_tensor sw = wP;
            sw.shape[2] = sw.shape[3] = L;
            rc = attn_tensor_copy(weights, &sw);
        }
    }
    if (rc == 0) rc = attn_tensor_merge_heads(&om, &oh);
    if (rc == 0) rc = attn_linear(y, &om, &w->wo, attn__opt_t(&w->bo));
    attn_arena_release(arena, mk);
    return rc;
}

static int attn__lnorm(attn_tensor *out, const attn_tensor *x, const attn_tensor *g, const attn_tensor *b, float eps) {
    return attn_layernorm(out, x, attn__opt_t(g), attn__opt_t(b), eps);
}

static void attn__addto(attn_tensor *dst, const attn_tensor *a) {
    float *d = (float *)dst->data;
    const float *s = (const float *)a->data;
    int64_t n = attn_tensor_numel(dst);
    for (int64_t i = 0; i < n; i++) d[i] += s[i];
}

int attn_variant_encoder_layer(attn_tensor *out, attn_tensor *attn_weights, const attn_tensor *x,
                               const attn_layer_config *cfg, const attn_encoder_weights *w, const attn_variant_params *p,
                               attn_arena *arena) {
    if (!out || !x || !cfg || !w || !p || !arena)
        return attn_set_error(ATTN_E_INVALID, "variant_encoder_layer: out, x, cfg, weights, params and arena are required");
    if (p->mask)
        return attn_set_error(ATTN_E_INVALID, "variant_encoder_layer: a general mask is not supported; use key_lengths or key_padding_mask");
    ATTN_TRY(attn_variant_validate(p));
    ATTN_TRY(attn_mha_check(&cfg->attn, &w->attn));
    int64_t E = cfg->attn.d_model;
    if (x->dtype != ATTN_F32 || out->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "variant_encoder_layer: x and out must be float32");
    if (x->ndim != 3 || x->shape[2] != E || out->ndim != 3 || out->shape[0] != x->shape[0] || out->shape[1] != x->shape[1] ||
        out->shape[2] != E)
        return attn_set_error(ATTN_E_SHAPE, "variant_encoder_layer: x and out must be [B, L, %lld]", (long long)E);
    if (!attn_tensor_is_contiguous(x) || !attn_tensor_is_contiguous(out))
        return attn_set_error(ATTN_E_INVALID, "variant_encoder_layer: x and out must be contiguous");
    if (out->data == x->data && attn_tensor_numel(x) > 0)
        return attn_set_error(ATTN_E_INVALID, "variant_encoder_layer: out must not alias x");
    if (cfg->attn.kv_d_model > 0 && cfg->attn.kv_d_model != E)
        return attn_set_error(ATTN_E_INVALID, "variant_encoder_layer: self-attention needs kv_d_model == d_model");
    attn_arena_mark mk = attn_arena_get_mark(arena);
    size_t n = (size_t)attn_tensor_numel(x) + 1;
    float *hb = attn_arena_alloc_f32(arena, n), *tb = attn_arena_alloc_f32(arena, n);
    if (!hb || !tb) {
        attn_arena_release(arena, mk);
        return ATTN_E_NOMEM;
    }
    attn_tensor h = *x, t = *x;
    h.data = hb;
    t.data = tb;
    int rc;
    if (cfg->norm_first) { /* h = x + attn(LN1(x)); out = h + FFN(LN2(h)) */
        rc = attn__lnorm(&t, x, &w->ln1_g, &w->ln1_b, cfg->eps);
        if (rc == 0) rc = attn__variant_self_attn(&h, attn_weights, &t, &cfg->attn, &w->attn, p, arena);
        if (rc == 0) attn__addto(&h, x);
        if (rc == 0) rc = attn__lnorm(&t, &h, &w->ln2_g, &w->ln2_b, cfg->eps);
        if (rc == 0)
            rc = attn_ffn(out, &t, &w->ff_w1, attn__opt_t(&w->ff_b1), &w->ff_w2, attn__opt_t(&w->ff_b2), cfg->act, arena);
        if (rc == 0) attn__addto(out, &h);
    } else { /* h = LN1(x + attn(x)); out = LN2(h + FFN(h)) */
        rc = attn__variant_self_attn(&t, attn_weights, x, &cfg->attn, &w->attn, p, arena);
        if (rc == 0) attn__addto(&t, x);
        if (rc == 0) rc = attn__lnorm(&h, &t, &w->ln1_g, &w->ln1_b, cfg->eps);
        if (rc == 0)
            rc = attn_ffn(&t, &h, &w->ff_w1, attn__opt_t(&w->ff_b1), &w->ff_w2, attn__opt_t(&w->ff_b2), cfg->act, arena);
        if (rc == 0) attn__addto(&t, &h);
        if (rc == 0) rc = attn__lnorm(out, &t, &w->ln2_g, &w->ln2_b, cfg->eps);
    }
    attn_arena_release(arena, mk);
    return rc;
}
