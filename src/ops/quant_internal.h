/* Private interface between src/ops/quant.c and its SIMD kernels (quant_avx2.c, quant_avx512.c). */
#ifndef ATTN_QUANT_INTERNAL_H
#define ATTN_QUANT_INTERNAL_H

#include "attn_quant.h"

#include <stddef.h>
#include <stdint.h>

/* One 32-value block of an activation row quantized to 8 bits: x[j] ~ d·q[j]; s = d·Σq. */
typedef struct {
    int8_t q[32];
    float d;
    float s;
} attn__q8blk;

/* y[m·ldy + r] = row r of W · row m of x for r in [r0, r1), m in [0, M); x is given as
 * M·nb quantized blocks (row m at xq + m·nb); W rows are rb bytes apart; t is Q8_0/Q4_0/Q4_1. */
typedef void (*attn__qdot_fn)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W,
                              size_t rb, int64_t r0, int64_t r1, attn_qtype t);

attn__qdot_fn attn__qdot_avx2(void);
/* x[nb·32] -> nb quantized blocks (d = max|x|/127, q = roundf(x/d), s = d·Σq) */
typedef void (*attn__quantize_fn)(attn__q8blk *q, const float *x, int64_t nb);
void attn__quantize_row_portable(attn__q8blk *q, const float *x, int64_t nb);
attn__quantize_fn attn__quantize_avx2(void); /* bit-identical to the portable one; NULL off x86 */       /* NULL when not compiled for x86 */
attn__qdot_fn attn__qdot_avx512vnni(void); /* NULL when not compiled for x86 */

#endif
