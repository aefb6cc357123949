/* Backward passes of linear, LayerNorm, the activations and softmax, and the cross-entropy loss
 * (include/attn_train.h). Each is the chain rule of the matching forward in src/ops/ops.c,
 * checked against torch.autograd fixtures and float64 finite differences
 * (tests/test_train_ops.c). GEMMs go to OpenBLAS in single-thread mode, split over attn's
 * threads (core/pool.h, the library-wide policy of core/threads.c); row reductions are in double. */
#include "attn_train.h"
#include "core/internal.h"
#include "core/pool.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* a contiguous float32 tensor of rank >= 1 */
static int attn__tr_f32(const attn_tensor *t, const char *op, const char *name) {
    if (!t) return attn_set_error(ATTN_E_INVALID, "%s: %s must not be NULL", op, name);
    if (t->dtype != ATTN_F32)
        return attn_set_error(ATTN_E_DTYPE, "%s: %s must be float32, got %s", op, name, attn_dtype_name(t->dtype));
    if (t->ndim < 1) return attn_set_error(ATTN_E_SHAPE, "%s: %s must have at least 1 dim", op, name);
    if (!attn_tensor_is_contiguous(t)) return attn_set_error(ATTN_E_INVALID, "%s: %s must be contiguous", op, name);
    if (!t->data && attn_tensor_numel(t) > 0) return attn_set_error(ATTN_E_INVALID, "%s: %s has no data", op, name);
    return ATTN_OK;
}

static int attn__tr_same(const attn_tensor *a, const char *an, const attn_tensor *b, const char *bn, const char *op) {
    int same = a->ndim == b->ndim;
    for (int i = 0; same && i < a->ndim; i++) same = a->shape[i] == b->shape[i];
    if (!same) return attn_set_error(ATTN_E_SHAPE, "%s: %s must have the shape of %s", op, an, bn);
    return ATTN_OK;
}

/* a [n] float32 vector (or NULL when allowed) */
static int attn__tr_vec(const attn_tensor *t, int64_t n, const char *op, const char *name) {
    if (!t) return ATTN_OK;
    ATTN_TRY(attn__tr_f32(t, op, name));
    if (t->ndim != 1 || t->shape[0] != n)
        return attn_set_error(ATTN_E_SHAPE, "%s: %s must be [%lld]", op, name, (long long)n);
    return ATTN_OK;
}

static int64_t attn__tr_last(const attn_tensor *t) { return t->shape[t->ndim - 1]; }
static int64_t attn__tr_rows(const attn_tensor *t) {
    const int64_t n = attn__tr_last(t);
    return n > 0 ? attn_tensor_numel(t) / n : 0;
}

typedef struct {
    const float *g, *xp, *wp;
    float *dx, *dw, *db;
    int64_t M, N, K;
    int accumulate, nx, nw, pad;
} attn__lb_job;

/* db[a..b) (+)= Σ_m dy[m, a..b) of dy [M, N]: float sums of 32 rows, added in double. Every column is
 * summed on its own in row order, so the AVX-512 / AVX2 / baseline clones give the same bits (the
 * baseline build ran these sums 4 lanes wide: ~3% of a 1-thread ViT training step). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void attn__col_sums(float *db, const float *g, int64_t M, int64_t N, int64_t a, int64_t b, int accumulate) {
    double s[64] = {0};
    for (int64_t m0 = 0; m0 < M; m0 += 32) {
        float f[64] = {0};
        for (int64_t m = m0; m < M && m < m0 + 32; m++) {
            const float *restrict gr = g + m * N + a;
#pragma omp simd
            for (int64_t n = 0; n < b - a; n++) f[n] += gr[n];
        }
#pragma omp simd
        for (int64_t n = 0; n < b - a; n++) s[n] += f[n];
    }
    for (int64_t n = a; n < b; n++) db[n] = (float)(accumulate ? db[n] + s[n - a] : s[n - a]);
}

/* piece it of attn_linear_backward's job: dx rows, dw rows, or 64 columns of db */
static void attn__lb_piece(void *p, int64_t lo, int64_t hi, int tid) {
    const attn__lb_job *j = (const attn__lb_job *)p;
    const int64_t M = j->M, N = j->N, K = j->K;
    (void)tid;
    for (int64_t it = lo; it < hi; it++) {
        if (it < j->nx) { /* dx[M, K] = dy[M, N] · W[N, K], rows [a, b) */
            const int64_t chunk = (M + j->nx - 1) / j->nx, a = it * chunk, b = a + chunk < M ? a + chunk : M;
            if (a >= b) continue;
            if (N == 0) memset(j->dx + a * K, 0, sizeof(float) * (size_t)((b - a) * K));
            else
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)(b - a), (int)K, (int)N, 1.0f, j->g + a * N, (int)N,
                            j->wp, (int)K, 0.0f, j->dx + a * K, (int)K);
        } else if (it < j->nx + j->nw) { /* dw[N, K] (+)= dyᵀ[N, M] · x[M, K], rows [a, b) of dw */
            const int64_t chunk = (N + j->nw - 1) / j->nw, a = (it - j->nx) * chunk, b = a + chunk < N ? a + chunk : N;
            if (a >= b) continue;
            if (M == 0) {
                if (!j->accumulate) memset(j->dw + a * K, 0, sizeof(float) * (size_t)((b - a) * K));
            } else {
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)(b - a), (int)K, (int)M, 1.0f, j->g + a, (int)N, j->xp,
                            (int)K, j->accumulate ? 1.0f : 0.0f, j->dw + a * K, (int)K);
            }
        } else { /* db[n] (+)= sum_m dy[m, n] for 64 columns */
            const int64_t a = (it - j->nx - j->nw) * 64;
            attn__col_sums(j->db, j->g, M, N, a, a + 64 < N ? a + 64 : N, j->accumulate);
        }
    }
}

int attn_linear_backward(attn_tensor *dx, attn_tensor *dw, attn_tensor *db, const attn_tensor *dy,
                         const attn_tensor *x, const attn_tensor *w, int accumulate) {
    const char *op = "linear backward";
    ATTN_TRY(attn__tr_f32(dy, op, "dy"));
    ATTN_TRY(attn__tr_f32(x, op, "x"));
    ATTN_TRY(attn__tr_f32(w, op, "weight"));
    if (w->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "%s: weight must be [out_features, in_features]", op);
    const int64_t N = w->shape[0], K = w->shape[1], M = attn__tr_rows(x);
    if (attn__tr_last(x) != K || attn__tr_last(dy) != N || dy->ndim != x->ndim)
        return attn_set_error(ATTN_E_SHAPE, "%s: x must be [..., %lld] and dy [..., %lld] with the same leading dims", op,
                              (long long)K, (long long)N);
    for (int i = 0; i < x->ndim - 1; i++)
        if (dy->shape[i] != x->shape[i]) return attn_set_error(ATTN_E_SHAPE, "%s: dy and x differ at dim %d", op, i);
    if (dx) {
        ATTN_TRY(attn__tr_f32(dx, op, "dx"));
        ATTN_TRY(attn__tr_same(dx, "dx", x, "x", op));
    }
    if (dw) {
        ATTN_TRY(attn__tr_f32(dw, op, "dw"));
        ATTN_TRY(attn__tr_same(dw, "dw", w, "weight", op));
    }
    ATTN_TRY(attn__tr_vec(db, N, op, "db"));
    attn__lb_job j = {(const float *)dy->data, (const float *)x->data, (const float *)w->data, dx ? (float *)dx->data : NULL,
                      dw ? (float *)dw->data : NULL, db ? (float *)db->data : NULL, M, N, K, accumulate, 0, 0, 0};
    const int nt = attn_get_num_threads(); /* also puts OpenBLAS in single-thread mode */
    /* one job: nt row pieces of dx, nt row pieces of dw (the split of the thread count, as the
     * products always were), then db in 64-column pieces (each column summed over m in order:
     * the same bits for any split) */
    j.nx = dx && M > 0 && K > 0 ? nt : 0;
    j.nw = dw && N > 0 && K > 0 ? nt : 0;
    const int64_t nb = db ? (N + 63) / 64 : 0;
    const double cost = (double)M * N * ((dx ? K : 0) + (dw ? K : 0) + 1);
    attn__pool_for(j.nx + j.nw + nb, 1, cost >= 1e6 ? nt : 1, attn__lb_piece, &j);
    return ATTN_OK;
}

int attn_layernorm_backward(attn_tensor *dx, attn_tensor *dgamma, attn_tensor *dbeta, const attn_tensor *dy,
                            const attn_tensor *x, const attn_tensor *gamma, float eps, int accumulate) {
    const char *op = "layernorm backward";
    ATTN_TRY(attn__tr_f32(dy, op, "dy"));
    ATTN_TRY(attn__tr_f32(x, op, "x"));
    ATTN_TRY(attn__tr_same(dy, "dy", x, "x", op));
    const int64_t E = attn__tr_last(x), M = attn__tr_rows(x);
    ATTN_TRY(attn__tr_vec(gamma, E, op, "gamma"));
    ATTN_TRY(attn__tr_vec(dgamma, E, op, "dgamma"));
    ATTN_TRY(attn__tr_vec(dbeta, E, op, "dbeta"));
    if (dx) {
        ATTN_TRY(attn__tr_f32(dx, op, "dx"));
        ATTN_TRY(attn__tr_same(dx, "dx", x, "x", op));
    }
    if (!(eps >= 0.0f) || !isfinite(eps)) return attn_set_error(ATTN_E_INVALID, "%s: eps must be finite and >= 0", op);
    const float *g = (const float *)dy->data, *xp = (const float *)x->data, *gm = gamma ? (const float *)gamma->data : NULL;
    double *acc = NULL; /* [2][E] dgamma, dbeta sums in double */
    if ((dgamma || dbeta) && E > 0) {
        acc = (double *)calloc(2 * (size_t)E, sizeof(double));
        if (!acc) return attn_set_error(ATTN_E_NOMEM, "%s: out of memory", op);
    }
    for (int64_t m = 0; m < M; m++) { /* rows in order: the parameter sums are deterministic */
        const float *xr = xp + m * E, *gr = g + m * E;
        double mean = 0.0, var = 0.0;
        for (int64_t e = 0; e < E; e++) mean += xr[e];
        mean /= (double)E;
        for (int64_t e = 0; e < E; e++) var += (xr[e] - mean) * (xr[e] - mean);
        var /= (double)E;
        const double rstd = var + eps > 0.0 ? 1.0 / sqrt(var + eps) : 0.0;
        double mg = 0.0, mgx = 0.0;
        for (int64_t e = 0; e < E; e++) {
            const double xh = (xr[e] - mean) * rstd, gg = gr[e] * (gm ? (double)gm[e] : 1.0);
            mg += gg, mgx += gg * xh;
            if (acc) acc[e] += gr[e] * xh, acc[E + e] += gr[e];
        }
        mg /= (double)E, mgx /= (double)E;
        if (dx) {
            float *o = (float *)dx->data + m * E;
            for (int64_t e = 0; e < E; e++) {
                const double xh = (xr[e] - mean) * rstd, gg = gr[e] * (gm ? (double)gm[e] : 1.0);
                o[e] = (float)(rstd * (gg - mg - xh * mgx));
            }
        }
    }
    for (int r = 0; r < 2 && acc; r++) {
        attn_tensor *t = r ? dbeta : dgamma;
        if (!t) continue;
        float *o = (float *)t->data;
        for (int64_t e = 0; e < E; e++) o[e] = (float)(accumulate ? o[e] + acc[r * E + e] : acc[r * E + e]);
    }
    if (!acc)
        for (int r = 0; r < 2; r++) {
            attn_tensor *t = r ? dbeta : dgamma;
            if (t && !accumulate && E > 0) memset(t->data, 0, sizeof(float) * (size_t)E);
        }
    free(acc);
    return ATTN_OK;
}

int attn_rmsnorm_backward(attn_tensor *dx, attn_tensor *dweight, const attn_tensor *dy, const attn_tensor *x,
                          const attn_tensor *weight, float eps, int accumulate) {
    const char *op = "rmsnorm backward";
    ATTN_TRY(attn__tr_f32(dy, op, "dy"));
    ATTN_TRY(attn__tr_f32(x, op, "x"));
    ATTN_TRY(attn__tr_same(dy, "dy", x, "x", op));
    const int64_t E = attn__tr_last(x), M = attn__tr_rows(x);
    ATTN_TRY(attn__tr_vec(weight, E, op, "weight"));
    ATTN_TRY(attn__tr_vec(dweight, E, op, "dweight"));
    if (dx) {
        ATTN_TRY(attn__tr_f32(dx, op, "dx"));
        ATTN_TRY(attn__tr_same(dx, "dx", x, "x", op));
    }
    if (!(eps >= 0.0f) || !isfinite(eps)) return attn_set_error(ATTN_E_INVALID, "%s: eps must be finite and >= 0", op);
    const float *g = (const float *)dy->data, *xp = (const float *)x->data, *wt = weight ? (const float *)weight->data : NULL;
    double *acc = NULL;
    if (dweight && E > 0) {
        acc = (double *)calloc((size_t)E, sizeof(double));
        if (!acc) return attn_set_error(ATTN_E_NOMEM, "%s: out of memory", op);
    }
    for (int64_t m = 0; m < M; m++) {
        const float *xr = xp + m * E, *gr = g + m * E;
        double ms = 0.0;
        for (int64_t e = 0; e < E; e++) ms += (double)xr[e] * xr[e];
        ms /= (double)E;
        const double r = ms + eps > 0.0 ? 1.0 / sqrt(ms + eps) : 0.0;
        double mgx = 0.0;
        for (int64_t e = 0; e < E; e++) {
            mgx += gr[e] * (wt ? (double)wt[e] : 1.0) * xr[e];
            if (acc) acc[e] += (double)gr[e] * xr[e] * r;
        }
        mgx /= (double)E;
        if (dx) {
            float *o = (float *)dx->data + m * E;
            for (int64_t e = 0; e < E; e++) o[e] = (float)(r * (gr[e] * (wt ? (double)wt[e] : 1.0) - xr[e] * r * r * mgx));
        }
    }
    if (dweight) {
        float *o = (float *)dweight->data;
        for (int64_t e = 0; e < E; e++) o[e] = (float)(accumulate ? o[e] + acc[e] : acc[e]);
    }
    free(acc);
    return ATTN_OK;
}

int attn_embedding_backward(attn_tensor *dtable, const attn_tensor *dy, const attn_tensor *ids, int accumulate) {
    const char *op = "embedding backward";
    ATTN_TRY(attn__tr_f32(dtable, op, "dtable"));
    ATTN_TRY(attn__tr_f32(dy, op, "dy"));
    if (!ids) return attn_set_error(ATTN_E_INVALID, "%s: ids must not be NULL", op);
    if (ids->dtype != ATTN_I32 && ids->dtype != ATTN_I64)
        return attn_set_error(ATTN_E_DTYPE, "%s: ids must be int32 or int64, got %s", op, attn_dtype_name(ids->dtype));
    if (!attn_tensor_is_contiguous(ids)) return attn_set_error(ATTN_E_INVALID, "%s: ids must be contiguous", op);
    if (dtable->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "%s: dtable must be [V, E]", op);
    const int64_t V = dtable->shape[0], E = dtable->shape[1], n = attn_tensor_numel(ids);
    int ok = dy->ndim == ids->ndim + 1 && attn__tr_last(dy) == E;
    for (int i = 0; ok && i < ids->ndim; i++) ok = dy->shape[i] == ids->shape[i];
    if (!ok) return attn_set_error(ATTN_E_SHAPE, "%s: dy must have ids' shape plus [%lld]", op, (long long)E);
    for (int64_t i = 0; i < n; i++) { /* check every id before writing: dtable unchanged on error */
        const int64_t id = ids->dtype == ATTN_I32 ? ((const int32_t *)ids->data)[i] : ((const int64_t *)ids->data)[i];
        if (id < 0 || id >= V)
            return attn_set_error(ATTN_E_RANGE, "%s: id %lld at position %lld is not in 0..%lld", op, (long long)id,
                                  (long long)i, (long long)(V - 1));
    }
    float *t = (float *)dtable->data;
    if (!accumulate && V * E > 0) memset(t, 0, sizeof(float) * (size_t)(V * E));
    const float *g = (const float *)dy->data;
    for (int64_t i = 0; i < n; i++) {
        const int64_t id = ids->dtype == ATTN_I32 ? ((const int32_t *)ids->data)[i] : ((const int64_t *)ids->data)[i];
        for (int64_t e = 0; e < E; e++) t[id * E + e] += g[i * E + e];
    }
    return ATTN_OK;
}

/* act'(x) in double */
static double attn__act_grad(double x, attn_activation act) {
    switch (act) {
    case ATTN_ACT_RELU:
        return x > 0.0 ? 1.0 : 0.0;
    case ATTN_ACT_GELU: /* d/dx x·Φ(x) = Φ(x) + x·φ(x) */
        return 0.5 * (1.0 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2.0 * M_PI);
    case ATTN_ACT_GELU_TANH: {
        const double c = sqrt(2.0 / M_PI), u = c * (x + 0.044715 * x * x * x), t = tanh(u);
        return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * c * (1.0 + 3.0 * 0.044715 * x * x);
    }
    case ATTN_ACT_SILU: {
        const double s = 1.0 / (1.0 + exp(-x));
        return s * (1.0 + x * (1.0 - s));
    }
    default:
        return 1.0;
    }
}

int attn_activation_backward(attn_tensor *dx, const attn_tensor *dy, const attn_tensor *x, attn_activation act) {
    const char *op = "activation backward";
    if (act < ATTN_ACT_RELU || act > ATTN_ACT_IDENTITY) return attn_set_error(ATTN_E_INVALID, "%s: unknown activation %d", op, (int)act);
    ATTN_TRY(attn__tr_f32(dx, op, "dx"));
    ATTN_TRY(attn__tr_f32(dy, op, "dy"));
    ATTN_TRY(attn__tr_f32(x, op, "x"));
    ATTN_TRY(attn__tr_same(dy, "dy", x, "x", op));
    ATTN_TRY(attn__tr_same(dx, "dx", x, "x", op));
    const int64_t n = attn_tensor_numel(x);
    const float *g = (const float *)dy->data, *xp = (const float *)x->data;
    float *o = (float *)dx->data;
    const int nt = attn_get_num_threads();
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1 && n >= 65536)
    for (int64_t i = 0; i < n; i++) o[i] = (float)(g[i] * attn__act_grad(xp[i], act));
    return ATTN_OK;
}

int attn_softmax_backward(attn_tensor *dx, const attn_tensor *dy, const attn_tensor *y) {
    const char *op = "softmax backward";
    ATTN_TRY(attn__tr_f32(dx, op, "dx"));
    ATTN_TRY(attn__tr_f32(dy, op, "dy"));
    ATTN_TRY(attn__tr_f32(y, op, "y"));
    ATTN_TRY(attn__tr_same(dy, "dy", y, "y", op));
    ATTN_TRY(attn__tr_same(dx, "dx", y, "y", op));
    const int64_t N = attn__tr_last(y), M = attn__tr_rows(y);
    const float *g = (const float *)dy->data, *yp = (const float *)y->data;
    float *o = (float *)dx->data;
    for (int64_t m = 0; m < M; m++) {
        double s = 0.0;
        for (int64_t j = 0; j < N; j++) s += (double)g[m * N + j] * yp[m * N + j];
        for (int64_t j = 0; j < N; j++) o[m * N + j] = (float)(yp[m * N + j] * (g[m * N + j] - s));
    }
    return ATTN_OK;
}

int attn_cross_entropy(double *loss, attn_tensor *dlogits, const attn_tensor *logits, const attn_tensor *labels,
                       double label_smoothing) {
    const char *op = "cross entropy";
    if (!loss || !labels) return attn_set_error(ATTN_E_INVALID, "%s: loss and labels must not be NULL", op);
    ATTN_TRY(attn__tr_f32(logits, op, "logits"));
    if (logits->ndim != 2) return attn_set_error(ATTN_E_SHAPE, "%s: logits must be [N, C]", op);
    const int64_t N = logits->shape[0], C = logits->shape[1];
    if (labels->dtype != ATTN_I32 && labels->dtype != ATTN_I64)
        return attn_set_error(ATTN_E_DTYPE, "%s: labels must be int32 or int64, got %s", op, attn_dtype_name(labels->dtype));
    if (labels->ndim != 1 || labels->shape[0] != N || !attn_tensor_is_contiguous(labels))
        return attn_set_error(ATTN_E_SHAPE, "%s: labels must be a contiguous [%lld]", op, (long long)N);
    if (dlogits) {
        ATTN_TRY(attn__tr_f32(dlogits, op, "dlogits"));
        ATTN_TRY(attn__tr_same(dlogits, "dlogits", logits, "logits", op));
    }
    if (!(label_smoothing >= 0.0 && label_smoothing < 1.0))
        return attn_set_error(ATTN_E_INVALID, "%s: label_smoothing must be in [0, 1), got %g", op, label_smoothing);
    if (N > 0 && C == 0) return attn_set_error(ATTN_E_SHAPE, "%s: no classes", op);
    const float *z = (const float *)logits->data;
    const double s = label_smoothing;
    double total = 0.0;
    for (int64_t n = 0; n < N; n++) {
        const int64_t y = labels->dtype == ATTN_I32 ? ((const int32_t *)labels->data)[n] : ((const int64_t *)labels->data)[n];
        if (y < 0 || y >= C)
            return attn_set_error(ATTN_E_RANGE, "%s: labels[%lld] = %lld is not a class in 0..%lld", op, (long long)n,
                                  (long long)y, (long long)(C - 1));
        const float *zr = z + n * C;
        double mx = -INFINITY, sum = 0.0, zsum = 0.0;
        for (int64_t c = 0; c < C; c++) {
            if (!isfinite(zr[c]))
                return attn_set_error(ATTN_E_RANGE, "%s: logits[%lld, %lld] is %s", op, (long long)n, (long long)c,
                                      isnan(zr[c]) ? "NaN" : "infinite");
            mx = zr[c] > mx ? zr[c] : mx;
        }
        for (int64_t c = 0; c < C; c++) sum += exp(zr[c] - mx), zsum += zr[c];
        const double lse = mx + log(sum);
        total += lse - (1.0 - s) * zr[y] - s / (double)C * zsum;
        if (dlogits) {
            float *o = (float *)dlogits->data + n * C;
            for (int64_t c = 0; c < C; c++)
                o[c] = (float)((exp(zr[c] - lse) - (c == y ? 1.0 - s : 0.0) - s / (double)C) / (double)N);
        }
    }
    *loss = N > 0 ? total / (double)N : 0.0;
    return ATTN_OK;
}
