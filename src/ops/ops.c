/* Linear, norms, activations, softmax, embedding and feed-forward (see attn_ops.h). */
#include "attn_ops.h"
#include "core/internal.h"
#include "core/pool.h"
#include "core/simd_math.h"
#include "ops/quant_internal.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

/* ---------------------------------------------------------------- helpers */

static int attn__need_f32(const attn_tensor *t, const char *op, const char *name) {
    if (!t) return attn_set_error(ATTN_E_INVALID, "%s: %s is NULL", op, name);
    if (t->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "%s: %s must be float32, got %s", op, name, attn_dtype_name(t->dtype));
    if (t->ndim < 1) return attn_set_error(ATTN_E_SHAPE, "%s: %s must have at least 1 dim", op, name);
    if (!t->data && attn_tensor_numel(t) > 0) return attn_set_error(ATTN_E_INVALID, "%s: %s has no data", op, name);
    return ATTN_OK;
}

static int attn__same_shape(const attn_tensor *a, const attn_tensor *b, const char *op) {
    if (a->ndim != b->ndim) return attn_set_error(ATTN_E_SHAPE, "%s: out has %d dims, x has %d", op, a->ndim, b->ndim);
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i])
            return attn_set_error(ATTN_E_SHAPE, "%s: out extent %lld != x extent %lld at dim %d", op,
                                  (long long)a->shape[i], (long long)b->shape[i], i);
    return ATTN_OK;
}

/* Number of rows (product of all but the last extent). */
static int64_t attn__rows(const attn_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim - 1; i++) n *= t->shape[i];
    return n;
}

/* Pointer to the start of row r of a tensor (rows enumerated in row-major order of the
 * leading dims) — works for any strides. */
static float *attn__row(const attn_tensor *t, int64_t r) {
    int64_t off = 0;
    for (int i = t->ndim - 2; i >= 0; i--) {
        int64_t e = t->shape[i];
        off += (r % e) * t->stride[i];
        r /= e;
    }
    return (float *)t->data + off;
}

static int attn__vec_param(const attn_tensor *p, int64_t n, const char *op, const char *name) {
    if (!p) return ATTN_OK;
    ATTN_TRY(attn__need_f32(p, op, name));
    if (p->ndim != 1 || p->shape[0] != n)
        return attn_set_error(ATTN_E_SHAPE, "%s: %s must be [%lld]", op, name, (long long)n);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- linear */

/* y = x · Wᵀ cut into `pieces` balanced pieces (rows of x, or 16-wide units of W's rows) */
typedef struct {
    float *o;
    const float *x, *w, *bias;
    int64_t M, N, K;
    int by_rows, bias_acc;
    int64_t pieces;
    float beta;
} attn__linear_job;

/* y[r, c] = bias[c] (or += with acc) for rows [r0, r1), columns [c0, c1) of y [.., N] */
static void attn__bias_fill(float *y, const float *bias, int64_t N, int64_t r0, int64_t r1, int64_t c0, int64_t c1, int acc) {
    for (int64_t r = r0; r < r1; r++) {
        float *restrict yr = y + r * N;
        if (acc) {
#pragma omp simd
            for (int64_t c = c0; c < c1; c++) yr[c] += bias[c];
        } else {
#pragma omp simd
            for (int64_t c = c0; c < c1; c++) yr[c] = bias[c];
        }
    }
}

static void attn__linear_piece(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__linear_job *j = (const attn__linear_job *)p;
    const int64_t units = j->by_rows ? j->M : (j->N + 15) / 16;
    for (int64_t i = lo; i < hi; i++) {
        int64_t a = units * i / j->pieces, b = units * (i + 1) / j->pieces;
        if (!j->by_rows) {
            a *= 16;
            b = b * 16 < j->N ? b * 16 : j->N;
        }
        if (a >= b) continue;
        if (j->bias) /* the piece's own block, just before its product (in cache; on every thread) */
            attn__bias_fill(j->o, j->bias, j->N, j->by_rows ? a : 0, j->by_rows ? b : j->M, j->by_rows ? 0 : a, j->by_rows ? j->N : b,
                            j->bias_acc);
        if (j->by_rows)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(b - a), (int)j->N, (int)j->K, 1.0f, j->x + a * j->K, (int)j->K,
                        j->w, (int)j->K, j->beta, j->o + a * j->N, (int)j->N);
        else
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)j->M, (int)(b - a), (int)j->K, 1.0f, j->x, (int)j->K, j->w + a * j->K,
                        (int)j->K, j->beta, j->o + a, (int)j->N);
    }
}

/* attn__sgemm_split with y first set to (bias_acc: increased by) bias [N] row by row, beta then 1 */
static void attn__sgemm_split_bias(float *y, const float *x, const float *w, const float *bias, int bias_acc, int64_t M, int64_t N,
                                   int64_t K, int nt, int allow_rows, float beta) {
    if (bias) beta = 1.0f;
    if (nt <= 1) {
        if (bias) attn__bias_fill(y, bias, N, 0, M, 0, N, bias_acc);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)K, w, (int)K, beta, y, (int)N);
        return;
    }
    /* pieces taken by attn's threads (core/pool.h), about 2 a thread (a thread that loses its
     * core holds back one piece, and the pool falls back to one thread when helpers keep coming
     * late); by rows, pieces of >= 32 rows, since each piece packs all of W: with 4 a thread the
     * packing of W was ~5% of a 2-thread ViT forward (8 copies a product) against ~2% on one thread */
    attn__linear_job j = {y, x, w, bias, M, N, K, allow_rows && M >= 8 * nt, bias_acc, 0, beta};
    const int64_t units = j.by_rows ? M : (N + 15) / 16;
    int64_t pieces = 2 * (int64_t)nt;
    if (j.by_rows && pieces > M / 32) pieces = M / 32 > nt ? M / 32 : nt;
    /* every piece at least 1e6 multiply-adds: OpenBLAS takes another kernel for small products
     * (measured on its Zen builds: products under ~5e5 multiply-adds sum in another order), and
     * a row's result must not depend on the rows beside it (a sentence embedded alone equals
     * the same sentence in a batch; test_serve — with OpenBLAS's SkylakeX kernels: its
     * Haswell / Zen ones round a row by its place in a 12-row tile whatever attn does) */
    const double work = (double)M * (double)N * (double)K;
    if ((double)pieces > work / 1e6) pieces = work >= 2e6 ? (int64_t)(work / 1e6) : 1;
    j.pieces = pieces < units ? pieces : units;
    if (j.pieces <= 1) {
        if (bias) attn__bias_fill(y, bias, N, 0, M, 0, N, bias_acc);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)K, w, (int)K, beta, y, (int)N);
        return;
    }
    attn__pool_for(j.pieces, 1, nt, attn__linear_piece, &j);
}

void attn__sgemm_split(float *y, const float *x, const float *w, int64_t M, int64_t N, int64_t K, int nt, int allow_rows, float beta) {
    attn__sgemm_split_bias(y, x, w, NULL, 0, M, N, K, nt, allow_rows, beta);
}

void attn__linear_f32(float *y, const float *x, const float *w, const float *bias, int64_t M, int64_t N, int64_t K, int nt, int accumulate) {
    if (M <= 0 || N <= 0) return;
    if (K == 0) {
        if (bias) attn__bias_fill(y, bias, N, 0, M, 0, N, accumulate);
        else if (!accumulate) memset(y, 0, sizeof(float) * (size_t)(M * N));
        return;
    }
    attn__sgemm_split_bias(y, x, w, bias, accumulate, M, N, K, (double)M * (double)N * (double)K >= 1e6 ? nt : 1, 1,
                           accumulate ? 1.0f : 0.0f);
}

int attn_linear(attn_tensor *out, const attn_tensor *x, const attn_tensor *w, const attn_tensor *b) {
    const char *op = "linear";
    ATTN_TRY(attn__need_f32(out, op, "out"));
    ATTN_TRY(attn__need_f32(x, op, "x"));
    ATTN_TRY(attn__need_f32(w, op, "weight"));
    if (w->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "linear: weight must be [out_features, in_features], got %d-D", w->ndim);
    int64_t in = x->shape[x->ndim - 1], of = w->shape[0];
    if (w->shape[1] != in)
        return attn_set_error(ATTN_E_SHAPE, "linear: x has %lld input features but weight is [%lld, %lld]", (long long)in,
                              (long long)w->shape[0], (long long)w->shape[1]);
    if (out->ndim != x->ndim || out->shape[out->ndim - 1] != of)
        return attn_set_error(ATTN_E_SHAPE, "linear: out must be [..., %lld] with x's leading dims", (long long)of);
    for (int i = 0; i < x->ndim - 1; i++)
        if (out->shape[i] != x->shape[i])
            return attn_set_error(ATTN_E_SHAPE, "linear: out leading extent %lld != x's %lld at dim %d",
                                  (long long)out->shape[i], (long long)x->shape[i], i);
    ATTN_TRY(attn__vec_param(b, of, op, "bias"));
    if (!attn_tensor_is_contiguous(x) || !attn_tensor_is_contiguous(w) || !attn_tensor_is_contiguous(out))
        return attn_set_error(ATTN_E_INVALID, "linear: x, weight and out must be contiguous");
    if (out->data == x->data && attn_tensor_numel(out) > 0)
        return attn_set_error(ATTN_E_INVALID, "linear: out must not alias x");
    int64_t M = attn__rows(x);
    if (M == 0 || of == 0) return ATTN_OK;
    float *o = (float *)out->data;
    const float *xp = (const float *)x->data, *wp = (const float *)w->data;
    int nt = attn_get_num_threads(); /* also puts OpenBLAS in single-thread mode */
    if (b && b->stride[0] != 1) {
        attn__linear_f32(o, xp, wp, NULL, M, of, in, nt, 0);
        const float *bb = (const float *)b->data;
        for (int64_t r = 0; r < M; r++)
            for (int64_t c = 0; c < of; c++) o[r * of + c] += bb[c * b->stride[0]];
        return ATTN_OK;
    }
    attn__linear_f32(o, xp, wp, b ? (const float *)b->data : NULL, M, of, in, nt, 0);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- norms */

typedef struct {
    attn_tensor *out;
    const attn_tensor *x, *gamma, *beta;
    float eps;
    int rms;
    int64_t E, xs, os;
} attn__norm_job;

/* rows [lo, hi) of a LayerNorm / RMSNorm (each row on its own: any split gives the same bits).
 * Cloned for AVX-512 / AVX2: the float64 passes ran 2 lanes wide in the baseline build (~9% of a
 * ViT forward); the sums' lanes differ with the width, so the last bit of a float64 sum may
 * differ between machines, not between runs or thread counts on one. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void attn__norm_rows(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__norm_job *j = (const attn__norm_job *)p;
    attn_tensor *out = j->out;
    const attn_tensor *x = j->x, *gamma = j->gamma, *beta = j->beta;
    const float eps = j->eps;
    const int rms = j->rms;
    const int64_t E = j->E, xs = j->xs, os = j->os;
    for (int64_t r = lo; r < hi; r++) {
        const float *xr = attn__row(x, r);
        float *orow = attn__row(out, r);
        double mean = 0.0, var = 0.0;
        if (xs == 1 && os == 1 && (!gamma || gamma->stride[0] == 1) && (!beta || beta->stride[0] == 1)) {
            /* contiguous rows (the usual case): the same two passes in float64, vectorised
             * (partial sums per SIMD lane, so the last bit of a sum may differ from the loop below) */
            const float *g = gamma ? (const float *)gamma->data : NULL, *bt = beta ? (const float *)beta->data : NULL;
            if (!rms) {
#pragma omp simd reduction(+ : mean)
                for (int64_t e = 0; e < E; e++) mean += xr[e];
                mean /= (double)(E > 0 ? E : 1);
            }
#pragma omp simd reduction(+ : var)
            for (int64_t e = 0; e < E; e++) var += ((double)xr[e] - mean) * ((double)xr[e] - mean);
            var /= (double)(E > 0 ? E : 1);
            double denom = sqrt(var + (double)eps);
            double inv = denom > 0.0 ? 1.0 / denom : 0.0;
            if (g && bt) {
#pragma omp simd
                for (int64_t e = 0; e < E; e++) orow[e] = (float)(((double)xr[e] - mean) * inv * g[e] + bt[e]);
            } else {
                for (int64_t e = 0; e < E; e++) {
                    double y = ((double)xr[e] - mean) * inv;
                    if (g) y *= g[e];
                    if (bt) y += bt[e];
                    orow[e] = (float)y;
                }
            }
            continue;
        }
        if (!rms) {
            for (int64_t e = 0; e < E; e++) mean += xr[e * xs];
            mean /= (double)(E > 0 ? E : 1);
        }
        for (int64_t e = 0; e < E; e++) {
            double d = xr[e * xs] - mean;
            var += d * d;
        }
        var /= (double)(E > 0 ? E : 1);
        double denom = sqrt(var + (double)eps);
        double inv = denom > 0.0 ? 1.0 / denom : 0.0; /* constant row with eps = 0: output beta */
        for (int64_t e = 0; e < E; e++) {
            double y = (xr[e * xs] - mean) * inv;
            if (gamma) y *= ((const float *)gamma->data)[e * gamma->stride[0]];
            if (beta) y += ((const float *)beta->data)[e * beta->stride[0]];
            orow[e * os] = (float)y;
        }
    }
}

static int attn__norm(attn_tensor *out, const attn_tensor *x, const attn_tensor *gamma, const attn_tensor *beta,
                      float eps, int rms) {
    const char *op = rms ? "rmsnorm" : "layernorm";
    ATTN_TRY(attn__need_f32(out, op, "out"));
    ATTN_TRY(attn__need_f32(x, op, "x"));
    ATTN_TRY(attn__same_shape(out, x, op));
    int64_t E = x->shape[x->ndim - 1];
    ATTN_TRY(attn__vec_param(gamma, E, op, rms ? "weight" : "gamma"));
    ATTN_TRY(attn__vec_param(beta, E, op, "beta"));
    if (!(eps >= 0.0f) || !isfinite(eps)) return attn_set_error(ATTN_E_INVALID, "%s: eps must be finite and >= 0", op);
    int64_t R = attn__rows(x);
    int64_t xs = x->stride[x->ndim - 1], os = out->stride[out->ndim - 1];
    attn__norm_job j = {out, x, gamma, beta, eps, rms, E, xs, os};
    attn__pool_for(R, R * E >= (1 << 16) ? (16384 + E - 1) / (E > 0 ? E : 1) : R, 0, attn__norm_rows, &j);
    return ATTN_OK;
}

int attn_layernorm(attn_tensor *out, const attn_tensor *x, const attn_tensor *gamma, const attn_tensor *beta,
                   float eps) {
    return attn__norm(out, x, gamma, beta, eps, 0);
}

int attn_rmsnorm(attn_tensor *out, const attn_tensor *x, const attn_tensor *weight, float eps) {
    return attn__norm(out, x, weight, NULL, eps, 1);
}

/* ---------------------------------------------------------------- activations */

/* float erff (glibc: within 1 ulp) keeps GELU at float32 accuracy, like PyTorch's CPU GELU */
float attn_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

float attn_gelu_tanh(float x) {
    double d = x;
    return (float)(0.5 * d * (1.0 + tanh(sqrt(2.0 / M_PI) * (d + 0.044715 * d * d * d))));
}

float attn_silu(float x) {
    double d = x;
    return (float)(d / (1.0 + exp(-d)));
}

static float attn__act(float x, attn_activation act) {
    switch (act) {
    case ATTN_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ATTN_ACT_GELU: return attn_gelu(x);
    case ATTN_ACT_GELU_TANH: return attn_gelu_tanh(x);
    case ATTN_ACT_SILU: return attn_silu(x);
    default: return x;
    }
}

/* GELU over a contiguous run, vectorised: erf by Abramowitz & Stegun 7.1.26,
 *   erf(a) = 1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) e^(-a^2),  t = 1 / (1 + p a),  a >= 0,
 * |error| <= 1.5e-7, with e^(-a^2) from the shared vectorised exp (core/simd_math.h, relative error
 * <= ATTN__EXP_MAX_REL_ERR). For x < 0, 1 + erf(x / sqrt 2) is the product itself, so there
 * is no cancellation. |gelu - exact| <= 1e-7 |x| + float rounding (tests/test_ops.c). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void attn__gelu_run(float *y, const float *x, int64_t n, attn__exp_n_fn exp_n) {
    enum { CH = 256 };
    float u[CH], e[CH];
    for (int64_t s = 0; s < n; s += CH) {
        int64_t m = n - s < CH ? n - s : CH;
#pragma omp simd
        for (int64_t i = 0; i < m; i++) {
            float z = x[s + i] * 0.70710678118654752f;
            u[i] = z * z > 87.0f ? -87.0f : -z * z; /* e^-87 ~ 1.6e-38: erf is +-1 to float precision */
        }
        exp_n(e, u, m);
#pragma omp simd
        for (int64_t i = 0; i < m; i++) {
            float xv = x[s + i], a = fabsf(xv) * 0.70710678118654752f;
            float t = 1.0f / (1.0f + 0.3275911f * a);
            float pe = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f)))) * e[i];
            /* x >= 0: 2 - pe; x < 0: pe (as 1 - (1 - pe): abs error <= 6e-8, branch-free) */
            y[s + i] = 0.5f * xv * (1.0f + copysignf(1.0f - pe, xv));
        }
    }
}

typedef struct {
    attn_tensor *out;
    const attn_tensor *x;
    attn_activation act;
    attn__exp_n_fn K;
    int64_t E, xs, os;
} attn__act_job;

static void attn__act_rows(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__act_job *j = (const attn__act_job *)p;
    for (int64_t r = lo; r < hi; r++) {
        const float *xr = attn__row(j->x, r);
        float *orow = attn__row(j->out, r);
        if (j->K) attn__gelu_run(orow, xr, j->E, j->K);
        else
            for (int64_t e = 0; e < j->E; e++) orow[e * j->os] = attn__act(xr[e * j->xs], j->act);
    }
}

int attn_activate(attn_tensor *out, const attn_tensor *x, attn_activation act) {
    const char *op = "activate";
    if (act < ATTN_ACT_RELU || act > ATTN_ACT_IDENTITY)
        return attn_set_error(ATTN_E_INVALID, "activate: unknown activation %d", (int)act);
    ATTN_TRY(attn__need_f32(out, op, "out"));
    ATTN_TRY(attn__need_f32(x, op, "x"));
    ATTN_TRY(attn__same_shape(out, x, op));
    int64_t R = attn__rows(x), E = x->shape[x->ndim - 1];
    int64_t xs = x->stride[x->ndim - 1], os = out->stride[out->ndim - 1];
    const attn__exp_n_fn K = act == ATTN_ACT_GELU && (xs == 1 || E == 1) && (os == 1 || E == 1) ? attn__exp_n_best() : NULL;
    attn__act_job j = {out, x, act, K, E, xs, os};
    attn__pool_for(R, R * E >= (1 << 16) ? (16384 + E - 1) / (E > 0 ? E : 1) : R, 0, attn__act_rows, &j);
    return ATTN_OK;
}

/* ---------------------------------------------------------------- softmax */

int attn_softmax(attn_tensor *out, const attn_tensor *x) {
    const char *op = "softmax";
    ATTN_TRY(attn__need_f32(out, op, "out"));
    ATTN_TRY(attn__need_f32(x, op, "x"));
    ATTN_TRY(attn__same_shape(out, x, op));
    int64_t R = attn__rows(x), N = x->shape[x->ndim - 1];
    int64_t xs = x->stride[x->ndim - 1], os = out->stride[out->ndim - 1];
    for (int64_t r = 0; r < R; r++) {
        const float *xr = attn__row(x, r);
        for (int64_t j = 0; j < N; j++)
            if (isnan(xr[j * xs]) || xr[j * xs] == INFINITY)
                return attn_set_error(ATTN_E_RANGE, "softmax: row %lld holds %s at %lld", (long long)r,
                                      isnan(xr[j * xs]) ? "NaN" : "+inf", (long long)j);
    }
    for (int64_t r = 0; r < R; r++) {
        const float *xr = attn__row(x, r);
        float *orow = attn__row(out, r);
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j < N; j++)
            if (xr[j * xs] > mx) mx = xr[j * xs];
        if (mx == -INFINITY) { /* every entry masked */
            for (int64_t j = 0; j < N; j++) orow[j * os] = 0.0f;
            continue;
        }
        for (int64_t j = 0; j < N; j++) sum += exp((double)xr[j * xs] - mx);
        for (int64_t j = 0; j < N; j++) orow[j * os] = (float)(exp((double)xr[j * xs] - mx) / sum);
    }
    return ATTN_OK;
}

/* ---------------------------------------------------------------- embedding */

int attn_embedding(attn_tensor *out, const attn_tensor *ids, const attn_tensor *table) {
    const char *op = "embedding";
    if (!ids) return attn_set_error(ATTN_E_INVALID, "embedding: ids is NULL");
    if (ids->dtype != ATTN_I32 && ids->dtype != ATTN_I64)
        return attn_set_error(ATTN_E_DTYPE, "embedding: ids must be int32 or int64, got %s", attn_dtype_name(ids->dtype));
    ATTN_TRY(attn__need_f32(out, op, "out"));
    ATTN_TRY(attn__need_f32(table, op, "table"));
    if (table->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "embedding: table must be [V, E]");
    int64_t V = table->shape[0], E = table->shape[1];
    if (out->ndim != ids->ndim + 1 || out->shape[out->ndim - 1] != E)
        return attn_set_error(ATTN_E_SHAPE, "embedding: out must be ids' shape + [%lld]", (long long)E);
    for (int i = 0; i < ids->ndim; i++)
        if (out->shape[i] != ids->shape[i])
            return attn_set_error(ATTN_E_SHAPE, "embedding: out extent %lld != ids extent %lld at dim %d",
                                  (long long)out->shape[i], (long long)ids->shape[i], i);
    int64_t n = attn_tensor_numel(ids);
    int64_t idx[ATTN_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++) {
        int64_t off = attn_tensor_offset(ids, idx);
        int64_t id = ids->dtype == ATTN_I32 ? ((const int32_t *)ids->data)[off] : ((const int64_t *)ids->data)[off];
        if (id < 0 || id >= V)
            return attn_set_error(ATTN_E_RANGE, "embedding: id %lld at position %lld is outside the vocabulary [0, %lld)",
                                  (long long)id, (long long)e, (long long)V);
        float *orow = attn__row(out, e);
        const float *trow = (const float *)table->data + id * table->stride[0];
        for (int64_t c = 0; c < E; c++) orow[c * out->stride[out->ndim - 1]] = trow[c * table->stride[1]];
        for (int i = ids->ndim - 1; i >= 0; i--) {
            if (++idx[i] < ids->shape[i]) break;
            idx[i] = 0;
        }
    }
    return ATTN_OK;
}

/* ---------------------------------------------------------------- feed-forward */

static int attn__hidden(attn_tensor *h, const attn_tensor *x, int64_t F, attn_arena *arena, const char *op) {
    if (!arena) return attn_set_error(ATTN_E_INVALID, "%s: arena is NULL", op);
    int64_t shape[ATTN_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) shape[i] = x->shape[i];
    shape[x->ndim - 1] = F;
    int64_t n = attn__rows(x) * F;
    float *buf = attn_arena_alloc_f32_uninit(arena, (size_t)(n > 0 ? n : 1));
    if (!buf) return ATTN_E_NOMEM;
    return attn_tensor_make(h, buf, ATTN_F32, x->ndim, shape);
}

int attn_ffn(attn_tensor *out, const attn_tensor *x, const attn_tensor *w1, const attn_tensor *b1,
             const attn_tensor *w2, const attn_tensor *b2, attn_activation act, attn_arena *arena) {
    ATTN_TRY(attn__need_f32(x, "ffn", "x"));
    ATTN_TRY(attn__need_f32(w1, "ffn", "w1"));
    if (w1->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "ffn: w1 must be [F, E]");
    if (!arena) return attn_set_error(ATTN_E_INVALID, "ffn: arena is NULL");
    attn_arena_mark m = attn_arena_get_mark(arena);
    attn_tensor h;
    ATTN_TRY(attn__hidden(&h, x, w1->shape[0], arena, "ffn"));
    int rc = attn_linear(&h, x, w1, b1);
    if (rc == 0) rc = attn_activate(&h, &h, act);
    if (rc == 0) rc = attn_linear(out, &h, w2, b2);
    attn_arena_release(arena, m);
    return rc;
}

int attn_ffn_gated(attn_tensor *out, const attn_tensor *x, const attn_tensor *w_gate, const attn_tensor *w_up,
                   const attn_tensor *w_down, attn_activation act, attn_arena *arena) {
    ATTN_TRY(attn__need_f32(x, "ffn_gated", "x"));
    ATTN_TRY(attn__need_f32(w_gate, "ffn_gated", "w_gate"));
    ATTN_TRY(attn__need_f32(w_up, "ffn_gated", "w_up"));
    if (w_gate->ndim != 2 || w_up->ndim != 2 || w_gate->shape[0] != w_up->shape[0] || w_gate->shape[1] != w_up->shape[1])
        return attn_set_error(ATTN_E_SHAPE, "ffn_gated: w_gate and w_up must both be [F, E]");
    if (!arena) return attn_set_error(ATTN_E_INVALID, "ffn_gated: arena is NULL");
    attn_arena_mark m = attn_arena_get_mark(arena);
    attn_tensor g, u;
    int rc = attn__hidden(&g, x, w_gate->shape[0], arena, "ffn_gated");
    if (rc == 0) rc = attn__hidden(&u, x, w_up->shape[0], arena, "ffn_gated");
    if (rc == 0) rc = attn_linear(&g, x, w_gate, NULL);
    if (rc == 0) rc = attn_linear(&u, x, w_up, NULL);
    if (rc == 0) rc = attn_activate(&g, &g, act);
    if (rc == 0) {
        float *gp = (float *)g.data;
        const float *up = (const float *)u.data;
        int64_t n = attn_tensor_numel(&g);
        for (int64_t i = 0; i < n; i++) gp[i] *= up[i];
        rc = attn_linear(out, &g, w_down, NULL);
    }
    attn_arena_release(arena, m);
    return rc;
}
