/* Private entries of the weight handle (ops/weight.c) for the layers floor. */
#ifndef ATTN_OPS_WEIGHT_INTERNAL_H
#define ATTN_OPS_WEIGHT_INTERNAL_H

#include "attn_weight.h"

/* 1 when attn_weight_matmul runs w on OpenBLAS (float32 weights, the AUTO kernel) */
int attn__weight_on_blas(const attn_weight *w);

/* y[M, rows] += x[M, cols] · wᵀ + bias, for a w that attn__weight_on_blas accepts: the bias
 * added to y, then the product accumulated into y by OpenBLAS (beta 1), with no temporary and no
 * add pass (a residual connection). Equals attn_weight_matmul into a temporary then y += it up
 * to the order of the three additions (one rounding each). Errors as attn_weight_matmul;
 * ATTN_E_INVALID for other weights. */
int attn__weight_matmul_acc(float *y, const float *x, int64_t M, const attn_weight *w);

#endif
