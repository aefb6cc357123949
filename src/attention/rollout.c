/* Attention rollout (Abnar & Zuidema 2020); see attn_rollout.h. */
#include "attn_rollout.h"
#include "core/internal.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int rollout_args(const float *out, const float *attentions, int64_t L, int64_t B, int64_t H, int64_t T,
                        const char *fn) {
    if (!out || !attentions) return attn_set_error(ATTN_E_INVALID, "%s: NULL argument", fn);
    if (L < 1 || B < 1 || H < 1 || T < 1 || T > 65536)
        return attn_set_error(ATTN_E_INVALID, "%s: need L, B, H >= 1 and 1 <= T <= 65536 (got %lld, %lld, %lld, %lld)", fn,
                              (long long)L, (long long)B, (long long)H, (long long)T);
    return ATTN_OK;
}

static int not_probability(float v, int64_t l, int64_t b, int64_t h, const char *fn) {
    return attn_set_error(ATTN_E_RANGE, "%s: weight %g at layer %lld, item %lld, head %lld is not a probability", fn,
                          (double)v, (long long)l, (long long)b, (long long)h);
}

int attn_attention_rollout(float *out, const float *attentions, int64_t L, int64_t B, int64_t H, int64_t T) {
    ATTN_TRY(rollout_args(out, attentions, L, B, H, T, "attention_rollout"));
    size_t TT = (size_t)T * (size_t)T;
    double *R = (double *)malloc(sizeof(double) * TT);
    double *A = (double *)malloc(sizeof(double) * TT);
    double *N = (double *)malloc(sizeof(double) * TT);
    if (!R || !A || !N) {
        free(R);
        free(A);
        free(N);
        return attn_set_error(ATTN_E_NOMEM, "attention_rollout: out of memory for 3 x %lld x %lld doubles", (long long)T,
                              (long long)T);
    }
    attn__blas_init();
    int rc = ATTN_OK;
    for (int64_t b = 0; b < B && rc == 0; b++) {
        for (int64_t l = 0; l < L && rc == 0; l++) {
            /* A = 0.5 * mean_h W + 0.5 * I, rows renormalised */
            memset(A, 0, sizeof(double) * TT);
            for (int64_t h = 0; h < H && rc == 0; h++) {
                const float *w = attentions + (((l * B + b) * H + h) * (int64_t)TT);
                for (size_t i = 0; i < TT; i++) {
                    float v = w[i];
                    if (!(v >= 0) || isinf(v)) {
                        rc = not_probability(v, l, b, h, "attention_rollout");
                        break;
                    }
                    A[i] += v;
                }
            }
            if (rc < 0) break;
            for (int64_t i = 0; i < T; i++) {
                double s = 0;
                for (int64_t j = 0; j < T; j++) {
                    A[i * T + j] = 0.5 * A[i * T + j] / (double)H + (i == j ? 0.5 : 0.0);
                    s += A[i * T + j];
                }
                for (int64_t j = 0; j < T; j++) A[i * T + j] /= s; /* s >= 0.5 */
            }
            if (l == 0) {
                memcpy(R, A, sizeof(double) * TT);
                continue;
            }
            /* R <- A · R (OpenBLAS; the triple loop it replaces took minutes at T = 1850) */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)T, (int)T, (int)T, 1.0, A, (int)T, R, (int)T, 0.0, N,
                        (int)T);
            double *t = R;
            R = N;
            N = t;
        }
        if (rc == 0)
            for (size_t i = 0; i < TT; i++) out[(size_t)b * TT + i] = (float)R[i];
    }
    free(R);
    free(A);
    free(N);
    return rc;
}

int attn_attention_rollout_row(float *out, const float *attentions, int64_t L, int64_t B, int64_t H, int64_t T,
                               int64_t row) {
    ATTN_TRY(rollout_args(out, attentions, L, B, H, T, "attention_rollout_row"));
    if (row < 0 || row >= T)
        return attn_set_error(ATTN_E_RANGE, "attention_rollout_row: row %lld is outside 0..%lld", (long long)row,
                              (long long)T - 1);
    size_t TT = (size_t)T * (size_t)T;
    /* inv[l][i] = 1 / (row sum of 0.5 * mean_h W_l + 0.5 * I), so A_l[i, j] = inv[l][i] * (...) */
    double *inv = (double *)malloc(sizeof(double) * (size_t)(L * T));
    double *v = (double *)malloc(sizeof(double) * (size_t)T);
    double *u = (double *)malloc(sizeof(double) * (size_t)T);
    if (!inv || !v || !u) {
        free(inv);
        free(v);
        free(u);
        return attn_set_error(ATTN_E_NOMEM, "attention_rollout_row: out of memory for T = %lld", (long long)T);
    }
    int rc = ATTN_OK;
    for (int64_t b = 0; b < B && rc == 0; b++) {
        /* pass 1, layers in order (so the first bad weight is the one reported, as in
         * attn_attention_rollout): check every weight and take the row sums */
        for (int64_t l = 0; l < L && rc == 0; l++) {
            double *s = inv + l * T;
            memset(s, 0, sizeof(double) * (size_t)T);
            for (int64_t h = 0; h < H && rc == 0; h++) {
                const float *w = attentions + (((l * B + b) * H + h) * (int64_t)TT);
                for (int64_t i = 0; i < T && rc == 0; i++) {
                    double acc = 0;
                    for (int64_t j = 0; j < T; j++) {
                        float x = w[i * T + j];
                        if (!(x >= 0) || isinf(x)) {
                            rc = not_probability(x, l, b, h, "attention_rollout_row");
                            break;
                        }
                        acc += x;
                    }
                    s[i] += acc;
                }
            }
            for (int64_t i = 0; i < T && rc == 0; i++) s[i] = 1.0 / (0.5 * s[i] / (double)H + 0.5); /* >= 0.5 */
        }
        if (rc < 0) break;
        /* pass 2: v = e_row · A_{L-1} · ... · A_0, one row-vector-times-matrix per layer,
         * O(L · H · T^2) instead of the O(L · T^3) of the full product */
        memset(v, 0, sizeof(double) * (size_t)T);
        v[row] = 1.0;
        for (int64_t l = L - 1; l >= 0; l--) {
            const double *il = inv + l * T;
            for (int64_t j = 0; j < T; j++) u[j] = 0.5 * v[j] * il[j]; /* the 0.5 * I part */
            for (int64_t h = 0; h < H; h++) {
                const float *w = attentions + (((l * B + b) * H + h) * (int64_t)TT);
                for (int64_t i = 0; i < T; i++) {
                    double c = v[i] * il[i] * 0.5 / (double)H;
                    if (c == 0) continue;
                    const float *wi = w + i * T;
                    for (int64_t j = 0; j < T; j++) u[j] += c * (double)wi[j];
                }
            }
            double *t = v;
            v = u;
            u = t;
        }
        for (int64_t j = 0; j < T; j++) out[b * T + j] = (float)v[j];
    }
    free(inv);
    free(v);
    free(u);
    return rc;
}
