/* Performer / FAVOR+ (Choromanski et al. 2021, "Rethinking Attention with Performers"):
 * softmax attention exp(s·qᵀk) approximated with positive orthogonal random features
 *   φ(x) = exp(ω_mᵀx' - |x'|²/2 - c) (m = 1..M),   x' = sqrt(s)·x,
 * so that E[φ(q)ᵀφ(k)] ∝ exp(s·qᵀk) (Lemma 1). The 1/sqrt(M) factor and the stabilising
 * constants c (a max per query row; one max over all real keys of a batch row and kv head)
 * cancel between numerator and normaliser. Non-causal: S = Σ φ(k_j)v_jᵀ, z = Σ φ(k_j) by SGEMM
 * over key chunks summed in float64. Causal: float64 prefix sums updated per key position. */
#include "attention/variants_internal.h"
#include "core/internal.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- projection */

typedef struct {
    attn_rng rng;
    int has_spare;
    double spare;
} attn__gauss;

/* Standard normal by Box-Muller (both values of a pair are used). */
static double attn__gauss_next(attn__gauss *g) {
    if (g->has_spare) {
        g->has_spare = 0;
        return g->spare;
    }
    double u1 = 1.0 - attn_rng_uniform(&g->rng); /* (0, 1] so log is finite */
    double u2 = attn_rng_uniform(&g->rng);
    double r = sqrt(-2.0 * log(u1));
    double a = 6.283185307179586476925 * u2;
    g->spare = r * sin(a);
    g->has_spare = 1;
    return r * cos(a);
}

int attn_performer_projection(float *omega, int64_t M, int64_t D, uint64_t seed) {
    if (!omega) return attn_set_error(ATTN_E_INVALID, "performer_projection: omega must not be NULL");
    if (M <= 0) return attn_set_error(ATTN_E_INVALID, "performer: features must be >= 1, got %lld", (long long)M);
    if (D <= 0) return attn_set_error(ATTN_E_INVALID, "performer: head_dim must be >= 1, got %lld", (long long)D);
    double *G = (double *)malloc(sizeof(double) * (size_t)(D * D));
    if (!G) return attn_set_error(ATTN_E_NOMEM, "performer_projection: out of memory");
    attn__gauss g;
    memset(&g, 0, sizeof g);
    attn_rng_seed(&g.rng, seed ^ 0x5EEDFA70ULL);
    for (int64_t r0 = 0; r0 < M; r0 += D) {
        int64_t rows = M - r0 < D ? M - r0 : D;
        /* a D x D Gaussian block, orthonormalised row by row (modified Gram-Schmidt) */
        for (int64_t r = 0; r < D; r++) {
            for (int tries = 0;; tries++) {
                double *x = G + r * D;
                for (int64_t d = 0; d < D; d++) x[d] = attn__gauss_next(&g);
                for (int pass = 0; pass < 2; pass++) /* re-orthogonalise once for accuracy */
                    for (int64_t p = 0; p < r; p++) {
                        const double *y = G + p * D;
                        double dot = 0.0;
                        for (int64_t d = 0; d < D; d++) dot += x[d] * y[d];
                        for (int64_t d = 0; d < D; d++) x[d] -= dot * y[d];
                    }
                double nrm = 0.0;
                for (int64_t d = 0; d < D; d++) nrm += x[d] * x[d];
                nrm = sqrt(nrm);
                if (nrm > 1e-6 || tries >= 8) {
                    for (int64_t d = 0; d < D; d++) x[d] /= nrm > 0 ? nrm : 1.0;
                    break;
                }
            }
        }
        /* rescale rows by chi(D)-distributed norms (the norm of a fresh Gaussian vector) */
        for (int64_t r = 0; r < rows; r++) {
            double n2 = 0.0;
            for (int64_t d = 0; d < D; d++) {
                double t = attn__gauss_next(&g);
                n2 += t * t;
            }
            double len = sqrt(n2);
            for (int64_t d = 0; d < D; d++) omega[(r0 + r) * D + d] = (float)(G[r * D + d] * len);
        }
    }
    free(G);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- attention */

typedef struct {
    float *x;    /* [CK, D] inputs, scaled by sqrt(s) */
    float *proj; /* [CK, M] x·ωᵀ, then the features */
    double *hn;  /* [CK] |x|²/2 */
} attn__pf_buf;

/* proj[r, m] = a·x_r · ω_m and hn[r] = a²|x_r|²/2 for rows r0 .. r0+n-1 of t[b, h]. */
static void attn__pf_project(attn__pf_buf *f, const attn_tensor *t, int64_t b, int64_t h, int64_t r0, int64_t n,
                             const float *omega, int64_t M, int64_t D, float a) {
    attn__gather_rows(f->x, t, b, h, r0, n, D);
    for (int64_t r = 0; r < n; r++) {
        double s2 = 0.0;
        for (int64_t d = 0; d < D; d++) {
            float xv = f->x[r * D + d] * a;
            f->x[r * D + d] = xv;
            s2 += (double)xv * xv;
        }
        f->hn[r] = 0.5 * s2;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)M, (int)D, 1.0f, f->x, (int)D, omega, (int)D, 0.0f,
                f->proj, (int)M);
}

/* Query features exp(proj - hn - c) with c the row max of proj - hn: that is
 * exp(proj - max_m proj) (|x|²/2 is constant over a row and cancels). */
static void attn__pf_query_features(attn__pf_buf *f, int64_t n, int64_t M) {
    for (int64_t r = 0; r < n; r++) {
        float *p = f->proj + r * M;
        attn__vexp_sum(p, M, attn__vmax(p, M));
    }
}

/* Query features of rows r0 .. r0+n-1 of q[b, h] into f->proj: attn__pf_project, then
 * attn__pf_query_features. */
static void attn__pf_queries(attn__pf_buf *f, const attn_tensor *q, int64_t b, int64_t h, int64_t r0, int64_t n,
                             const float *omega, int64_t M, int64_t D, float a) {
    attn__pf_project(f, q, b, h, r0, n, omega, M, D, a);
    attn__pf_query_features(f, n, M);
}

/* Key features exp(proj - hn - kmax) for real keys, 0 for padding. */
static void attn__pf_key_features(attn__pf_buf *f, int64_t n, int64_t M, double kmax, const unsigned char *valid) {
    for (int64_t r = 0; r < n; r++) {
        float *p = f->proj + r * M;
        if (!valid[r]) {
            memset(p, 0, sizeof(float) * (size_t)M);
            continue;
        }
        attn__vexp_sum(p, M, (float)(f->hn[r] + kmax));
    }
}

/* S += φ(k) vᵀ (S [M, Dv] float64), z += φ(k). */
ATTN__VCLONES static void attn__pf_update(double *S, double *z, const float *phik, const float *v, int64_t M, int64_t Dv) {
    for (int64_t m = 0; m < M; m++) {
        double a = phik[m];
        if (a == 0.0) continue;
        double *Sr = S + m * Dv;
#pragma omp simd
        for (int64_t e = 0; e < Dv; e++) Sr[e] += a * (double)v[e];
        z[m] += a;
    }
}

ATTN__VCLONES static void attn__pf_readout(float *out, int64_t os, const double *S, const double *z, const float *phiq, int64_t M,
                             int64_t Dv, double *num) {
    double den = 0.0;
    for (int64_t e = 0; e < Dv; e++) num[e] = 0.0;
    for (int64_t m = 0; m < M; m++) {
        double a = phiq[m];
        den += a * z[m];
        const double *Sr = S + m * Dv;
#pragma omp simd
        for (int64_t e = 0; e < Dv; e++) num[e] += a * Sr[e];
    }
    double inv = den > 0.0 ? 1.0 / den : 0.0;
    for (int64_t e = 0; e < Dv; e++) out[e * os] = (float)(num[e] * inv);
}

static inline float *attn__prow(attn_tensor *t, int64_t b, int64_t h, int64_t i) {
    return (float *)t->data + b * t->stride[0] + h * t->stride[1] + i * t->stride[2];
}

int attn__variant_performer(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
                            const attn_tensor *v, const attn__vctx *c) {
    const attn_variant_params *p = c->p;
    const int64_t B = c->B, H = c->H, Hkv = c->Hkv, Lq = c->Lq, Lk = c->Lk, D = c->D, Dv = c->Dv, M = p->features;
    const int64_t group = H / Hkv, off = Lk - Lq;
    const int causal = p->is_causal;
    if (D == 0) { /* no features can be formed: every key scores alike; fall back to the mean */
        return attn_set_error(ATTN_E_SHAPE, "performer: head_dim D must be >= 1");
    }
    const double s = p->has_scale ? (double)p->scale : 1.0 / sqrt((double)D);
    const float a = (float)sqrt(s);
    float *omega = (float *)malloc(sizeof(float) * (size_t)(M * D));
    if (!omega) return attn_set_error(ATTN_E_NOMEM, "performer: out of memory for %lld x %lld features", (long long)M, (long long)D);
    int rc = attn_performer_projection(omega, M, D, p->seed);
    if (rc < 0) {
        free(omega);
        return rc;
    }
    int64_t CK = (int64_t)(1 << 18) / M; /* rows per chunk: CK x M floats stay ~1 MiB */
    if (CK > 256) CK = 256;
    if (CK < 8) CK = 8;
    const int64_t items = B * Hkv;
    int nt = attn__variant_threads(p, items);
    int failed = 0;
    attn__blas_init(); /* OpenBLAS single-threaded inside our regions (core/threads.c) */
#pragma omp parallel num_threads(nt)
    {
        attn__pf_buf fk, fq;
        fk.x = (float *)malloc(sizeof(float) * (size_t)(CK * D));
        fk.proj = (float *)malloc(sizeof(float) * (size_t)(CK * M));
        fk.hn = (double *)malloc(sizeof(double) * (size_t)CK);
        fq.x = (float *)malloc(sizeof(float) * (size_t)(CK * D));
        fq.proj = (float *)malloc(sizeof(float) * (size_t)(group * CK * M)); /* causal: one block per head of the group */
        fq.hn = (double *)malloc(sizeof(double) * (size_t)CK);
        float *vb = (float *)malloc(sizeof(float) * (size_t)(CK * Dv + 1));
        float *ob = (float *)malloc(sizeof(float) * (size_t)(CK * Dv + 1));
        float *Sc = (float *)malloc(sizeof(float) * (size_t)(M * Dv + 1));
        double *S = (double *)malloc(sizeof(double) * (size_t)(M * Dv + 1));
        double *z = (double *)malloc(sizeof(double) * (size_t)M);
        double *num = (double *)malloc(sizeof(double) * (size_t)(Dv + 1));
        float *phik_all = weights ? (float *)malloc(sizeof(float) * (size_t)(Lk * M + 1)) : NULL;
        float *wrow = weights ? (float *)malloc(sizeof(float) * (size_t)(CK * Lk + 1)) : NULL;
        int ok = fk.x && fk.proj && fk.hn && fq.x && fq.proj && fq.hn && vb && ob && Sc && S && z && num &&
                 (!weights || (phik_all && wrow));
        if (!ok) attn__set_failed(&failed);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            if (!ok) continue;
            int64_t b = it / Hkv, hk = it % Hkv;
            const unsigned char *valid = c->valid + b * Lk;
            /* pass 1: the key stabiliser (max exponent over all real keys and features) */
            double kmax = -INFINITY;
            for (int64_t j0 = 0; j0 < Lk; j0 += CK) {
                int64_t n = Lk - j0 < CK ? Lk - j0 : CK;
                attn__pf_project(&fk, k, b, hk, j0, n, omega, M, D, a);
                for (int64_t r = 0; r < n; r++) {
                    if (!valid[j0 + r]) continue;
                    double e = (double)attn__vmax(fk.proj + r * M, M) - fk.hn[r];
                    if (e > kmax) kmax = e;
                }
            }
            memset(S, 0, sizeof(double) * (size_t)(M * Dv));
            memset(z, 0, sizeof(double) * (size_t)M);
            if (kmax == -INFINITY) { /* no real key: zeros */
                for (int64_t g = 0; g < group; g++)
                    for (int64_t i = 0; i < Lq; i++) {
                        float *o = attn__prow(out, b, hk * group + g, i);
                        for (int64_t e = 0; e < Dv; e++) o[e * out->stride[3]] = 0.0f;
                        if (weights) {
                            float *wr = attn__prow(weights, b, hk * group + g, i);
                            for (int64_t j = 0; j < Lk; j++) wr[j * weights->stride[3]] = 0.0f;
                        }
                    }
                continue;
            }
            if (causal)
                for (int64_t i = 0; i < Lq && i + off < 0; i++)
                    for (int64_t g = 0; g < group; g++) {
                        float *o = attn__prow(out, b, hk * group + g, i);
                        for (int64_t e = 0; e < Dv; e++) o[e * out->stride[3]] = 0.0f;
                    }
            for (int64_t j0 = 0; j0 < Lk; j0 += CK) {
                int64_t n = Lk - j0 < CK ? Lk - j0 : CK;
                attn__pf_project(&fk, k, b, hk, j0, n, omega, M, D, a);
                attn__pf_key_features(&fk, n, M, kmax, valid + j0);
                if (weights) memcpy(phik_all + j0 * M, fk.proj, sizeof(float) * (size_t)(n * M));
                attn__gather_rows(vb, v, b, hk, j0, n, Dv);
                if (causal) {
                    /* queries whose position falls in this chunk */
                    int64_t qi0 = j0 - off, qi1 = j0 + n - off;
                    if (qi0 < 0) qi0 = 0;
                    if (qi1 > Lq) qi1 = Lq;
                    float *save = fq.proj;
                    if (qi1 > qi0)
                        for (int64_t g = 0; g < group; g++) {
                            fq.proj = save + g * CK * M;
                            attn__pf_queries(&fq, q, b, hk * group + g, qi0, qi1 - qi0, omega, M, D, a);
                        }
                    fq.proj = save;
                    for (int64_t r = 0; r < n; r++) {
                        int64_t j = j0 + r;
                        if (valid[j]) attn__pf_update(S, z, fk.proj + r * M, vb + r * Dv, M, Dv);
                        int64_t i = j - off;
                        if (i < qi0 || i >= qi1) continue;
                        for (int64_t g = 0; g < group; g++)
                            attn__pf_readout(attn__prow(out, b, hk * group + g, i), out->stride[3], S, z,
                                             fq.proj + g * CK * M + (i - qi0) * M, M, Dv, num);
                    }
                } else {
                    for (int64_t r = 0; r < n; r++)
                        for (int64_t m = 0; m < M; m++) z[m] += fk.proj[r * M + m];
                    if (Dv > 0) {
                        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)M, (int)Dv, (int)n, 1.0f, fk.proj, (int)M, vb,
                                    (int)Dv, 0.0f, Sc, (int)Dv);
                        for (int64_t x = 0; x < M * Dv; x++) S[x] += Sc[x];
                    }
                }
            }
            if (!causal) {
                for (int64_t x = 0; x < M * Dv; x++) Sc[x] = (float)S[x];
                for (int64_t g = 0; g < group; g++) {
                    int64_t h = hk * group + g;
                    for (int64_t i0 = 0; i0 < Lq; i0 += CK) {
                        int64_t n = Lq - i0 < CK ? Lq - i0 : CK;
                        attn__pf_queries(&fq, q, b, h, i0, n, omega, M, D, a);
                        if (Dv > 0)
                            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)Dv, (int)M, 1.0f, fq.proj, (int)M,
                                        Sc, (int)Dv, 0.0f, ob, (int)Dv);
                        for (int64_t r = 0; r < n; r++) {
                            double den = 0.0;
                            for (int64_t m = 0; m < M; m++) den += (double)fq.proj[r * M + m] * z[m];
                            double inv = den > 0.0 ? 1.0 / den : 0.0;
                            float *o = attn__prow(out, b, h, i0 + r);
                            for (int64_t e = 0; e < Dv; e++) o[e * out->stride[3]] = (float)((double)ob[r * Dv + e] * inv);
                        }
                    }
                }
            }
            if (weights) { /* implied weights φ(q_i)ᵀφ(k_j) / Σ_j' φ(q_i)ᵀφ(k_j') */
                for (int64_t g = 0; g < group; g++) {
                    int64_t h = hk * group + g;
                    for (int64_t i0 = 0; i0 < Lq; i0 += CK) {
                        int64_t n = Lq - i0 < CK ? Lq - i0 : CK;
                        attn__pf_queries(&fq, q, b, h, i0, n, omega, M, D, a);
                        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)Lk, (int)M, 1.0f, fq.proj, (int)M,
                                    phik_all, (int)M, 0.0f, wrow, (int)Lk);
                        for (int64_t r = 0; r < n; r++) {
                            int64_t i = i0 + r, hi = causal ? i + off + 1 : Lk;
                            float *wr = wrow + r * Lk;
                            double sum = 0.0;
                            for (int64_t j = 0; j < Lk; j++) {
                                if (j >= hi || !valid[j]) wr[j] = 0.0f;
                                sum += wr[j];
                            }
                            double inv = sum > 0.0 ? 1.0 / sum : 0.0;
                            float *dst = attn__prow(weights, b, h, i);
                            for (int64_t j = 0; j < Lk; j++) dst[j * weights->stride[3]] = (float)(wr[j] * inv);
                        }
                    }
                }
            }
        }
        ATTN_FREE_ALL(fk.x, fk.proj, fk.hn, fq.x, fq.proj, fq.hn, vb, ob, Sc, S, z, num, phik_all, wrow);
    }
    free(omega);
    if (failed) return attn_set_error(ATTN_E_NOMEM, "performer: out of memory");
    return ATTN_OK;
}
