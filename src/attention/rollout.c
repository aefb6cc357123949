/* Attention rollout (Abnar & Zuidema 2020); see attn_rollout.h. */
#include "attn_rollout.h"
#include "core/internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int attn_attention_rollout(float *out, const float *attentions, int64_t L, int64_t B, int64_t H, int64_t T) {
    if (!out || !attentions) return attn_set_error(ATTN_E_INVALID, "attention_rollout: NULL argument");
    if (L < 1 || B < 1 || H < 1 || T < 1 || T > 65536)
        return attn_set_error(ATTN_E_INVALID, "attention_rollout: need L, B, H >= 1 and 1 <= T <= 65536 (got %lld, %lld, %lld, %lld)",
                              (long long)L, (long long)B, (long long)H, (long long)T);
    size_t TT = (size_t)T * (size_t)T;
    double *R = (double *)malloc(sizeof(double) * TT);
    double *A = (double *)malloc(sizeof(double) * TT);
    double *N = (double *)malloc(sizeof(double) * TT);
    if (!R || !A || !N) {
        free(R);
        free(A);
        free(N);
        return attn_set_error(ATTN_E_NOMEM, "attention_rollout: out of memory for T = %lld", (long long)T);
    }
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
                        rc = attn_set_error(ATTN_E_RANGE, "attention_rollout: weight %g at layer %lld, item %lld, head %lld is not a probability",
                                            (double)v, (long long)l, (long long)b, (long long)h);
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
            /* R <- A · R */
            for (int64_t i = 0; i < T; i++) {
                double *ni = N + i * T;
                memset(ni, 0, sizeof(double) * (size_t)T);
                for (int64_t k = 0; k < T; k++) {
                    double a = A[i * T + k];
                    if (a == 0) continue;
                    const double *rk = R + k * T;
                    for (int64_t j = 0; j < T; j++) ni[j] += a * rk[j];
                }
            }
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
