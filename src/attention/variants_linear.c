/* Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs: Fast Autoregressive
 * Transformers with Linear Attention"): φ(x) = elu(x) + 1,
 *   out_i = φ(q_i)ᵀ S / φ(q_i)ᵀ z,   S = Σ_j φ(k_j) v_jᵀ,   z = Σ_j φ(k_j)
 * over the visible keys j. Non-causal: S and z once per (batch, kv head), by SGEMM over key
 * chunks summed in float64. Causal: S and z as a float64 running state updated per key
 * position (eq. 18-20), read out at each query position; attn_linear_state_step uses the
 * same update and read-out functions, so generation equals the batch form bit for bit. */
#include "attention/variants_internal.h"
#include "core/internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define ATTN__LIN_CHUNK 1024

/* φ(x) = elu(x) + 1 as a float64 that does not underflow: for x < -80 the float exp would lose
 * precision (denormals) and flush to 0 below -87, so those use exp() in float64 (exact down to
 * -745, far below any float32 input that matters); above, the float kernel (relative error
 * <= 1.5e-7). Both paths of linear attention and the step API use it, so that they agree to
 * 1e-5 for components down to -100 and beyond (issue 11). */
static inline double attn__elu1d(float x) { return x > -80.0f ? (double)attn__elu1f(x) : exp((double)x); }
/* elu(x) + 1 for x = -80 (1.8e-35): the float kernel's results at or above it are accurate */
#define ATTN__LIN_TINY 1.8e-35f

/* S += φ(k) vᵀ, z += φ(k) for one key k [D] (stride ks) and value v [Dv] (stride vs).
 * tk [D], tv [Dv] are scratch. noinline: the batch form and the step API must run the same
 * machine code so that they agree bit for bit. */
ATTN__VCLONES __attribute__((noinline)) static void attn__lin_update(double *S, double *z, const float *k, int64_t ks, const float *v,
                                                       int64_t vs, int64_t D, int64_t Dv, double *tk, double *tv) {
    for (int64_t d = 0; d < D; d++) tk[d] = attn__elu1d(k[d * ks]);
    for (int64_t e = 0; e < Dv; e++) tv[e] = (double)v[e * vs];
    for (int64_t d = 0; d < D; d++) {
        double a = tk[d];
        double *Sr = S + d * Dv;
#pragma omp simd
        for (int64_t e = 0; e < Dv; e++) Sr[e] += a * tv[e];
        z[d] += a;
    }
}

/* out [Dv] (stride os) = φ(q)ᵀS / φ(q)ᵀz, or 0 when z is zero (no key consumed). */
ATTN__VCLONES __attribute__((noinline)) static void attn__lin_readout(float *out, int64_t os, const double *S, const double *z,
                                                        const float *q, int64_t qs, int64_t D, int64_t Dv, double *tq,
                                                        double *num) {
    double den = 0.0;
    for (int64_t d = 0; d < D; d++) {
        tq[d] = attn__elu1d(q[d * qs]);
        den += tq[d] * z[d];
    }
    for (int64_t e = 0; e < Dv; e++) num[e] = 0.0;
    for (int64_t d = 0; d < D; d++) {
        double a = tq[d];
        const double *Sr = S + d * Dv;
#pragma omp simd
        for (int64_t e = 0; e < Dv; e++) num[e] += a * Sr[e];
    }
    double inv = den > 0.0 ? 1.0 / den : 0.0;
    for (int64_t e = 0; e < Dv; e++) out[e * os] = (float)(num[e] * inv);
}

static inline const float *attn__row_ptr(const attn_tensor *t, int64_t b, int64_t h, int64_t i) {
    return (const float *)t->data + b * t->stride[0] + h * t->stride[1] + i * t->stride[2];
}

static inline float *attn__row_ptr_w(attn_tensor *t, int64_t b, int64_t h, int64_t i) {
    return (float *)t->data + b * t->stride[0] + h * t->stride[1] + i * t->stride[2];
}

/* Implied weights w_ij = φ(q_i)ᵀφ(k_j) / Σ_j' φ(q_i)ᵀφ(k_j') over visible keys. */
static void attn__lin_weights(attn_tensor *weights, const attn_tensor *q, const attn_tensor *k, const attn__vctx *c,
                              int64_t b, int64_t h, double *phik /* [Lk, D] */, double *tq) {
    const int64_t D = c->D, Lk = c->Lk, Lq = c->Lq, off = c->Lk - c->Lq;
    const int causal = c->p->is_causal;
    for (int64_t i = 0; i < Lq; i++) {
        const float *qr = attn__row_ptr(q, b, h, i);
        for (int64_t d = 0; d < D; d++) tq[d] = attn__elu1d(qr[d * q->stride[3]]);
        float *wr = attn__row_ptr_w(weights, b, h, i);
        int64_t ws = weights->stride[3];
        int64_t hi = causal ? (i + off + 1 < Lk ? i + off + 1 : Lk) : Lk;
        double den = 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            double s = 0.0;
            if (j < hi && c->valid[b * Lk + j]) {
                for (int64_t d = 0; d < D; d++) s += tq[d] * phik[j * D + d];
            }
            den += s;
            wr[j * ws] = (float)s; /* temporarily the unnormalised value */
        }
        double inv = den > 0.0 ? 1.0 / den : 0.0;
        for (int64_t j = 0; j < Lk; j++) {
            double s = 0.0;
            if (j < hi && c->valid[b * Lk + j])
                for (int64_t d = 0; d < D; d++) s += tq[d] * phik[j * D + d];
            wr[j * ws] = (float)(s * inv);
        }
    }
}

int attn__variant_linear(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                         const attn_tensor *v, const attn__vctx *c) {
    const int64_t B = c->B, H = c->H, Hkv = c->Hkv, Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv;
    const int64_t group = H / Hkv, off = Lk - Lq;
    const int causal = c->p->is_causal;
    const int64_t items = B * Hkv;
    int nt = attn__variant_threads(c->p, items);
    int failed = 0;
    attn__blas_init(); /* OpenBLAS single-threaded inside our regions (core/threads.c) */
#pragma omp parallel num_threads(nt)
    {
        size_t CK = ATTN__LIN_CHUNK;
        double *S = (double *)malloc(sizeof(double) * (size_t)(D * Dv + 1));
        double *z = (double *)malloc(sizeof(double) * (size_t)(D + 1));
        double *t1 = (double *)malloc(sizeof(double) * (size_t)(D + Dv + 1));
        double *t2 = (double *)malloc(sizeof(double) * (size_t)(D + Dv + 1));
        /* chunk buffers: the non-causal form only (the causal one keeps just S and z) */
        float *kb = causal ? NULL : (float *)malloc(sizeof(float) * (CK * (size_t)D + 1));
        float *vb = causal ? NULL : (float *)malloc(sizeof(float) * (CK * (size_t)Dv + 1));
        float *Sc = causal ? NULL : (float *)malloc(sizeof(float) * (size_t)(D * Dv + 1));
        float *ob = causal ? NULL : (float *)malloc(sizeof(float) * (CK * (size_t)Dv + 1));
        float *icdb = causal ? NULL : (float *)malloc(sizeof(float) * (size_t)(D + 1));
        double *phik = weights ? (double *)malloc(sizeof(double) * (size_t)(Lk * D + 1)) : NULL;
        int ok = S && z && t1 && t2 && (causal || (kb && vb && Sc && ob && icdb)) && (!weights || phik);
        if (!ok) attn__set_failed(&failed);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            if (!ok) continue;
            int64_t b = it / Hkv, hk = it % Hkv;
            memset(S, 0, sizeof(double) * (size_t)(D * Dv));
            memset(z, 0, sizeof(double) * (size_t)D);
            if (causal) {
                for (int64_t i = 0; i < Lq && i + off < 0; i++)
                    for (int64_t g = 0; g < group; g++) {
                        float *o = attn__row_ptr_w(out, b, hk * group + g, i);
                        for (int64_t e = 0; e < Dv; e++) o[e * out->stride[3]] = 0.0f;
                    }
                for (int64_t j = 0; j < Lk; j++) {
                    if (c->valid[b * Lk + j])
                        attn__lin_update(S, z, attn__row_ptr(k, b, hk, j), k->stride[3], attn__row_ptr(v, b, hk, j),
                                         v->stride[3], D, Dv, t1, t2);
                    int64_t i = j - off;
                    if (i < 0 || i >= Lq) continue;
                    for (int64_t g = 0; g < group; g++) {
                        int64_t h = hk * group + g;
                        attn__lin_readout(attn__row_ptr_w(out, b, h, i), out->stride[3], S, z, attn__row_ptr(q, b, h, i),
                                          q->stride[3], D, Dv, t1, t2);
                    }
                }
            } else {
                /* Float32 GEMMs on features scaled per dimension so that nothing underflows:
                 * φ(k_jd) / c_d with c_d = max_j φ(k_jd) = φ(max_j k_jd) (<= 1, the largest 1), and
                 * φ(q_id)·c_d divided by its row maximum. The factors cancel in
                 * φ(q)ᵀS / φ(q)ᵀz (c_d between the two sides of each product, the row factor
                 * between numerator and denominator); terms that still underflow are below
                 * 1e-38 of the largest one. */
                double *cd = t2; /* [D] */
                for (int64_t d = 0; d < D; d++) cd[d] = -INFINITY;
                for (int64_t j = 0; j < Lk; j++) {
                    if (!c->valid[b * Lk + j]) continue;
                    const float *kr = attn__row_ptr(k, b, hk, j);
                    for (int64_t d = 0; d < D; d++)
                        if (kr[d * k->stride[3]] > cd[d]) cd[d] = kr[d * k->stride[3]];
                }
                float *icd = icdb; /* [D] float 1/c_d where c_d is a normal float (else unused) */
                for (int64_t d = 0; d < D; d++) {
                    cd[d] = cd[d] == -INFINITY ? 1.0 : attn__elu1d((float)cd[d]);
                    icd[d] = cd[d] >= ATTN__LIN_TINY ? (float)(1.0 / cd[d]) : 0.0f;
                }
                for (int64_t j0 = 0; j0 < Lk; j0 += (int64_t)CK) {
                    int64_t n = Lk - j0 < (int64_t)CK ? Lk - j0 : (int64_t)CK;
                    attn__gather_rows(kb, k, b, hk, j0, n, D);
                    attn__gather_rows(vb, v, b, hk, j0, n, Dv);
                    attn__velu1(kb, n * D); /* vectorised; features below ATTN__LIN_TINY are redone in float64 */
                    for (int64_t r = 0; r < n; r++) {
                        float *kr = kb + r * D;
                        for (int64_t d = 0; d < D; d++)
                            kr[d] = kr[d] >= ATTN__LIN_TINY
                                        ? kr[d] * icd[d]
                                        : (float)(attn__elu1d(attn__row_ptr(k, b, hk, j0 + r)[d * k->stride[3]]) / cd[d]);
                    }
                    for (int64_t r = 0; r < n; r++) {
                        float *kr = kb + r * D;
                        if (!c->valid[b * Lk + j0 + r]) { /* padding: out of S and z */
                            memset(kr, 0, sizeof(float) * (size_t)D);
                            continue;
                        }
                        for (int64_t d = 0; d < D; d++) z[d] += (double)kr[d];
                    }
                    if (D > 0 && Dv > 0) {
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, (int)Dv, (int)n, 1.0f, kb, (int)D, vb,
                                    (int)Dv, 0.0f, Sc, (int)Dv);
                        for (int64_t x = 0; x < D * Dv; x++) S[x] += Sc[x];
                    }
                }
                for (int64_t x = 0; x < D * Dv; x++) Sc[x] = (float)S[x];
                for (int64_t g = 0; g < group; g++) {
                    int64_t h = hk * group + g;
                    for (int64_t i0 = 0; i0 < Lq; i0 += (int64_t)CK) {
                        int64_t n = Lq - i0 < (int64_t)CK ? Lq - i0 : (int64_t)CK;
                        attn__gather_rows(kb, q, b, h, i0, n, D);
                        attn__velu1(kb, n * D);
                        for (int64_t r = 0; r < n; r++) {
                            float *qr = kb + r * D;
                            double mx = 0.0;
                            for (int64_t d = 0; d < D; d++) {
                                t1[d] = (qr[d] >= ATTN__LIN_TINY ? (double)qr[d]
                                                                 : attn__elu1d(attn__row_ptr(q, b, h, i0 + r)[d * q->stride[3]])) *
                                        cd[d];
                                if (t1[d] > mx) mx = t1[d];
                            }
                            const double inv = mx > 0.0 ? 1.0 / mx : 0.0;
                            for (int64_t d = 0; d < D; d++) qr[d] = (float)(t1[d] * inv);
                        }
                        if (D > 0 && Dv > 0)
                            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)Dv, (int)D, 1.0f, kb, (int)D,
                                        Sc, (int)Dv, 0.0f, ob, (int)Dv);
                        for (int64_t r = 0; r < n; r++) {
                            double den = 0.0;
                            for (int64_t d = 0; d < D; d++) den += (double)kb[r * D + d] * z[d];
                            double inv = den > 0.0 ? 1.0 / den : 0.0;
                            float *o = attn__row_ptr_w(out, b, h, i0 + r);
                            for (int64_t e = 0; e < Dv; e++)
                                o[e * out->stride[3]] = (D > 0) ? (float)((double)ob[r * Dv + e] * inv) : 0.0f;
                        }
                    }
                }
            }
            if (weights) {
                for (int64_t j = 0; j < Lk; j++) {
                    const float *kr = attn__row_ptr(k, b, hk, j);
                    for (int64_t d = 0; d < D; d++) phik[j * D + d] = attn__elu1d(kr[d * k->stride[3]]);
                }
                for (int64_t g = 0; g < group; g++) attn__lin_weights(weights, q, k, c, b, hk * group + g, phik, t1);
            }
        }
        ATTN_FREE_ALL(S, z, t1, t2, kb, vb, Sc, ob, icdb, phik);
    }
    if (failed) return attn_set_error(ATTN_E_NOMEM, "linear: out of memory");
    return ATTN_OK;
}

/* ---------------------------------------------------------------- recurrent API */

int attn_linear_state_init(attn_linear_state *s, int64_t B, int64_t H, int64_t Hkv, int64_t D, int64_t Dv) {
    if (!s) return attn_set_error(ATTN_E_INVALID, "linear_state_init: state must not be NULL");
    memset(s, 0, sizeof *s);
    if (B <= 0 || H <= 0 || Hkv <= 0 || D <= 0 || Dv <= 0)
        return attn_set_error(ATTN_E_INVALID, "linear_state_init: B, H, Hkv, D and Dv must be >= 1 (got %lld, %lld, %lld, %lld, %lld)",
                              (long long)B, (long long)H, (long long)Hkv, (long long)D, (long long)Dv);
    if (H % Hkv != 0)
        return attn_set_error(ATTN_E_INVALID, "linear_state_init: n_heads (%lld) is not a multiple of n_kv_heads (%lld)",
                              (long long)H, (long long)Hkv);
    if (B > (INT64_MAX / 8) / Hkv / D / Dv) return attn_set_error(ATTN_E_INVALID, "linear_state_init: state too large");
    s->S = (double *)calloc((size_t)(B * Hkv * D * Dv), sizeof(double));
    s->z = (double *)calloc((size_t)(B * Hkv * D), sizeof(double));
    if (!s->S || !s->z) {
        attn_linear_state_free(s);
        return attn_set_error(ATTN_E_NOMEM, "linear_state_init: out of memory for the [%lld, %lld, %lld, %lld] state",
                              (long long)B, (long long)Hkv, (long long)D, (long long)Dv);
    }
    s->batch = B, s->n_heads = H, s->n_kv_heads = Hkv, s->head_dim = D, s->value_dim = Dv;
    return ATTN_OK;
}

void attn_linear_state_reset(attn_linear_state *s) {
    if (!s || !s->S) return;
    memset(s->S, 0, sizeof(double) * (size_t)(s->batch * s->n_kv_heads * s->head_dim * s->value_dim));
    memset(s->z, 0, sizeof(double) * (size_t)(s->batch * s->n_kv_heads * s->head_dim));
    s->steps = 0;
}

void attn_linear_state_free(attn_linear_state *s) {
    if (!s) return;
    free(s->S);
    free(s->z);
    memset(s, 0, sizeof *s);
}

static int attn__step_tensor(const attn_tensor *t, const char *name, int64_t B, int64_t H, int64_t D, int check_finite) {
    if (!t) return attn_set_error(ATTN_E_INVALID, "linear_state_step: %s must not be NULL", name);
    if (t->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "linear_state_step: %s must be float32, got %s", name, attn_dtype_name(t->dtype));
    if (t->ndim != 4 || t->shape[0] != B || t->shape[1] != H || t->shape[2] != 1 || t->shape[3] != D)
        return attn_set_error(ATTN_E_SHAPE, "linear_state_step: %s must be [%lld, %lld, 1, %lld]", name, (long long)B, (long long)H,
                              (long long)D);
    if (!t->data) return attn_set_error(ATTN_E_INVALID, "linear_state_step: %s has no data", name);
    if (check_finite)
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++)
                    if (!isfinite(*attn__f32_at4(t, b, h, 0, d)))
                        return attn_set_error(ATTN_E_RANGE, "linear_state_step: %s[%lld, %lld, 0, %lld] is not finite", name,
                                              (long long)b, (long long)h, (long long)d);
    return ATTN_OK;
}

int attn_linear_state_step(attn_linear_state *s, attn_tensor *out, const attn_tensor *q, const attn_tensor *k,
                           const attn_tensor *v, const unsigned char *key_valid) {
    if (!s || !s->S || !s->z) return attn_set_error(ATTN_E_INVALID, "linear_state_step: state is not initialised");
    int64_t B = s->batch, H = s->n_heads, Hkv = s->n_kv_heads, D = s->head_dim, Dv = s->value_dim;
    ATTN_TRY(attn__step_tensor(q, "q", B, H, D, 1));
    ATTN_TRY(attn__step_tensor(k, "k", B, Hkv, D, 1));
    ATTN_TRY(attn__step_tensor(v, "v", B, Hkv, Dv, 1));
    ATTN_TRY(attn__step_tensor(out, "out", B, H, Dv, 0));
    double *t1 = (double *)malloc(sizeof(double) * (size_t)(D + Dv + 1));
    double *t2 = (double *)malloc(sizeof(double) * (size_t)(D + Dv + 1));
    if (!t1 || !t2) {
        free(t1);
        free(t2);
        return attn_set_error(ATTN_E_NOMEM, "linear_state_step: out of memory");
    }
    int64_t group = H / Hkv;
    for (int64_t b = 0; b < B; b++)
        for (int64_t hk = 0; hk < Hkv; hk++) {
            double *S = s->S + (b * Hkv + hk) * D * Dv, *z = s->z + (b * Hkv + hk) * D;
            if (!key_valid || key_valid[b])
                attn__lin_update(S, z, attn__row_ptr(k, b, hk, 0), k->stride[3], attn__row_ptr(v, b, hk, 0), v->stride[3], D,
                                 Dv, t1, t2);
            for (int64_t g = 0; g < group; g++) {
                int64_t h = hk * group + g;
                attn__lin_readout(attn__row_ptr_w(out, b, h, 0), out->stride[3], S, z, attn__row_ptr(q, b, h, 0), q->stride[3],
                                  D, Dv, t1, t2);
            }
        }
    free(t1);
    free(t2);
    s->steps++;
    return ATTN_OK;
}
