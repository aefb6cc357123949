/*
 * attn_quant.h — block-quantized weight matrices (the GGML / GGUF block formats) and their
 * matrix products, computed on the blocks: the weights are never expanded to float32.
 *
 * Block formats (32 weights per block, GGUF spec / ggml-common.h layouts):
 *   Q8_0: f16 d, int8 q[32]                    x[j] = d·q[j]                         (34 bytes)
 *   Q4_0: f16 d, uint8 qs[16]                  x[j] = d·((qs[j] & 15) - 8),
 *                                              x[j+16] = d·((qs[j] >> 4) - 8)       (18 bytes)
 *   Q4_1: f16 d, f16 m, uint8 qs[16]           x[j] = d·(qs[j] & 15) + m,
 *                                              x[j+16] = d·(qs[j] >> 4) + m         (20 bytes)
 * plus unquantized F32, F16 and BF16 rows. A matrix is [rows, cols] row-major (PyTorch
 * nn.Linear weight [out_features, in_features]); each row is cols/32 consecutive blocks.
 *
 * Products y[M, rows] = x[M, cols] · Wᵀ:
 *   - quantized W: each 32-value block of a row of x is quantized to 8 bits first (d_x =
 *     max|x|/127, q = round(x/d_x), as ggml's Q8_0 / Q8_1 activations), the block dot product is
 *     an exact integer sum, scaled in float32: per block d_w·d_x·Σ q_w q_x (+ m·d_x·Σ q_x for
 *     Q4_1, - 8·d_w·d_x·Σ q_x for Q4_0). attn quantizes activations like llama.cpp does: the
 *     integer dot products (AVX-512 VNNI vpdpbusd, AVX2 vpmaddubsw) are 3-4x faster than
 *     float FMAs on dequantized weights. The error this adds against the float64 product of the
 *     dequantized weights with the unquantized x is bounded per block by
 *     |d_w|·Σ|q_w|·d_x/2 (+ |m|·32·d_x/2): rounding x to the 8-bit grid moves each x[j] by at
 *     most d_x/2. tests/test_quant.c checks every kernel against that bound and the SIMD
 *     kernels against the portable one (same integer sums; float sums in another order).
 *   - F32 W: OpenBLAS sgemm; F16 / BF16 W: rows converted to float32 on the fly.
 * Kernels: AVX2 (+FMA, F16C) or portable C, picked at run time from the CPU
 * (attn_quant_kernel_name says which); ATTN_QUANT_KERNEL=portable|avx2|avx512vnni in the
 * environment forces one (if the CPU has it). The AVX-512 VNNI kernel is compiled but has not
 * been run on hardware yet, so it is used only when forced that way (or attn_quant_set_kernel).
 */
#ifndef ATTN_QUANT_H
#define ATTN_QUANT_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ATTN_QT_F32 = 0,
    ATTN_QT_F16 = 1,
    ATTN_QT_BF16 = 2,
    ATTN_QT_Q8_0 = 3,
    ATTN_QT_Q4_0 = 4,
    ATTN_QT_Q4_1 = 5
} attn_qtype;

typedef struct {
    attn_qtype type;
    const void *data; /* rows · attn_qtype_row_bytes(type, cols) bytes (any alignment) */
    int64_t rows, cols;
} attn_qmatrix;

/* attn_qtype_name: "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1" ("unknown" otherwise). */
const char *attn_qtype_name(attn_qtype t);
/* attn_qtype_block: values per block (32 for Q types, 1 otherwise); 0 for an unknown type. */
int64_t attn_qtype_block(attn_qtype t);
/* attn_qtype_row_bytes: bytes of one row of `cols` values; 0 when cols is not a multiple of the
 * block size, negative, or the type is unknown. */
size_t attn_qtype_row_bytes(attn_qtype t, int64_t cols);

/* attn_qmatrix_dequantize_rows: out[n, cols] float32 = rows r0 .. r0+n-1 of w, exactly
 * (d·q + m computed in float32 as ggml does). Errors: ATTN_E_INVALID, ATTN_E_RANGE (rows
 * outside the matrix). */
int attn_qmatrix_dequantize_rows(float *out, const attn_qmatrix *w, int64_t r0, int64_t n);

/* attn_qmatmul: y[M, rows] = x[M, cols] · Wᵀ (row-major, contiguous float32), with
 * n_threads OpenMP threads (<= 0: attn_get_num_threads()).  y must not alias x.
 * Errors: ATTN_E_INVALID (NULL, M < 0, cols not a multiple of the block), ATTN_E_RANGE (a
 * non-finite value in x), ATTN_E_NOMEM. */
int attn_qmatmul(float *y, const float *x, const attn_qmatrix *w, int64_t M, int n_threads);

/* attn_qmatmul_n: y[i] = x · w[i]ᵀ for `count` (<= 8) matrices with the same number of columns,
 * in one parallel region with x quantized once (e.g. the query, key and value projections).
 * Same results and errors as count calls of attn_qmatmul. */
int attn_qmatmul_n(float *const *y, const float *x, const attn_qmatrix *w, int count, int64_t M, int n_threads);

/* Kernels. ATTN_QK_REFERENCE is the plain reference: each weight row dequantized to float32 and
 * multiplied with the UNQUANTIZED activations, summed in float64 (slow; for tests). */
typedef enum { ATTN_QK_AUTO = 0, ATTN_QK_PORTABLE = 1, ATTN_QK_AVX2 = 2, ATTN_QK_AVX512VNNI = 3, ATTN_QK_REFERENCE = 4 } attn_qkernel;
/* attn_qmatmul_kernel: as attn_qmatmul with a chosen kernel. ATTN_E_UNSUPPORTED when the CPU
 * (or this build) lacks it. */
int attn_qmatmul_kernel(float *y, const float *x, const attn_qmatrix *w, int64_t M, int n_threads, attn_qkernel k);
/* attn_qkernel_available: 1 when kernel k can run on this CPU. */
int attn_qkernel_available(attn_qkernel k);
/* attn_quant_set_kernel: the kernel attn_qmatmul / attn_qmatmul_n use from now on (process-wide;
 * ATTN_QK_AUTO = the best this CPU has). Errors: ATTN_E_UNSUPPORTED (not available). */
int attn_quant_set_kernel(attn_qkernel k);
/* attn_quant_kernel_name: the kernel attn_qmatmul uses here ("avx512vnni", "avx2", "portable"). */
const char *attn_quant_kernel_name(void);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_QUANT_H */
