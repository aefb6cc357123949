/* Private helpers shared across src/ (not installed). Names use the attn__ prefix. */
#ifndef ATTN_INTERNAL_H
#define ATTN_INTERNAL_H

#include "attn_core.h"
#include <stdint.h>

/* Propagate a failing status: ATTN_TRY(expr) returns expr's status when negative. */
#define ATTN_TRY(expr)            \
    do {                          \
        int attn__rc = (expr);    \
        if (attn__rc < 0) return attn__rc; \
    } while (0)

/* attn__blas_init: put OpenBLAS in single-thread mode once (see core/threads.c); called by
 * attn_get_num_threads / attn_set_num_threads, so any path that asks for a thread count is covered. */
void attn__blas_init(void);

/* IEEE binary16 / bfloat16 <-> binary32 (exact for f16->f32 and bf16->f32; f32->bf16
 * rounds to nearest even, NaN stays NaN). */
float attn__f16_to_f32(uint16_t h);
float attn__bf16_to_f32(uint16_t b);
uint16_t attn__f32_to_bf16(float f);

/* Element i of a float32 view of any rank given a flat row-major index over its shape. */
static inline float *attn__f32_at4(const attn_tensor *t, int64_t a, int64_t b, int64_t c, int64_t d) {
    return (float *)t->data + a * t->stride[0] + b * t->stride[1] + c * t->stride[2] + d * t->stride[3];
}

#endif
