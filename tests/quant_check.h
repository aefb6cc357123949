/* Checks shared by the quantised product tests (test_quant_kq_kernels.c for the K-quants,
 * test_quant_legacy.c for the 32-value block types): the portable kernel against the float64
 * product, and a kernel's batched rows against the rows multiplied alone. Static inline helpers. */
#ifndef ATTN_TEST_QUANT_CHECK_H
#define ATTN_TEST_QUANT_CHECK_H

#include "attn_quant.h"
#include "testutil.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* y [M, N] (a kernel's x [M, K] times the weights) against the float64 product of the dequantized
 * weights wd [N, K] with the unquantized x: each activation moves by at most d_x/2 on its 8-bit
 * grid (d_x = max|x|/127 of its blk-value block), so |y - exact| <= Σ_b Σ|w|·d_x/2 (times 1.0001);
 * the float32 block sums add ~2^-24·(nb + 4)·Σ|w·x| (1e-6·Σ|w·x| allowed, + 1e-9). Returns 1 when
 * every output is within; *worst: the largest err/bound seen (kept when larger). */
static inline int quant_within_bound(const float *y, const float *x, const float *wd, int64_t M, int64_t N, int64_t K, int blk,
                                     double *worst) {
    int ok = 1;
    for (int64_t i = 0; i < M; i++)
        for (int64_t r = 0; r < N; r++) {
            double exact = 0, bound = 0, sabs = 0;
            for (int64_t b = 0; b < K / blk; b++) {
                double amax = 0, sw = 0;
                for (int j = 0; j < blk; j++) amax = fmax(amax, fabs(x[i * K + b * blk + j]));
                for (int j = 0; j < blk; j++) sw += fabs(wd[r * K + b * blk + j]);
                bound += sw * (amax / 127.0) / 2.0;
            }
            for (int64_t k = 0; k < K; k++) {
                exact += (double)wd[r * K + k] * x[i * K + k];
                sabs += fabs((double)wd[r * K + k] * x[i * K + k]);
            }
            const double err = fabs(y[i * N + r] - exact), lim = bound * 1.0001 + 1e-6 * sabs + 1e-9;
            if (!(err <= lim)) ok = 0;
            if (bound > 0) *worst = fmax(*worst, err / bound);
        }
    return ok;
}

/* Each row m of the batched result y [M, N] of kernel k with nt threads against row m of x [M, K]
 * multiplied alone (M = 1, into one [N]; one CHECK_OK per row): equal bit for bit when tol < 0,
 * else max |diff| <= tol. Returns the first row that differs, or -1. */
static inline int64_t quant_rows_alone(float *one, const float *y, const float *x, const attn_qmatrix *W, int64_t M, int nt,
                                       attn_qkernel k, double tol) {
    const int64_t N = W->rows, K = W->cols;
    int64_t bad = -1;
    for (int64_t m = 0; m < M; m++) {
        CHECK_OK(attn_qmatmul_kernel(one, x + m * K, W, 1, nt, k));
        const int same = tol < 0 ? memcmp(one, y + m * N, sizeof(float) * (size_t)N) == 0
                                 : attn_test_max_abs_diff(one, y + m * N, (size_t)N) <= tol;
        if (!same && bad < 0) bad = m;
    }
    return bad;
}

#endif
