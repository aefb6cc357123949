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
 *   Q5_0: f16 d, uint8 qh[4], uint8 qs[16]      q[j] = (qs[j] & 15) | bit j of qh << 4, q[j+16] =
 *                                              (qs[j] >> 4) | bit j+16 of qh << 4; x = d·(q - 16)  (22 bytes)
 *   Q5_1: f16 d, f16 m, uint8 qh[4], qs[16]    the same 5-bit q; x = d·q + m                        (24 bytes)
 * K-quants: 256-value super-blocks (ggml-common.h block_q*_K; QK_K = 256):
 *   Q2_K: uint8 scales[16], qs[64], f16 d, f16 dmin  16 groups of 16: x = d·(sc & 15)·q - dmin·(sc >> 4),
 *         q 2-bit: value 128h + 32s + l is (qs[32h + l] >> 2s) & 3                              (84 bytes)
 *   Q3_K: uint8 hmask[32], qs[64], scales[12], f16 d  x = d·(sc - 32)·(q - 4·!hbit), sc 6-bit packed
 *         (low nibbles in bytes 0-7, high 2 bits in bytes 8-11), hbit of value 32b + l: hmask[l] bit b (110 bytes)
 *   Q4_K: f16 d, f16 dmin, uint8 scales[12], qs[128]  8 groups of 32: x = d·sc·q - dmin·m, sc/m 6-bit
 *         packed (get_scale_min_k4); value 64c + 32s + l is (qs[32c + l] >> 4s) & 15          (144 bytes)
 *   Q5_K: f16 d, f16 dmin, scales[12], qh[32], qs[128]  as Q4_K plus bit b of qh[l] as bit 4 of value 32b + l (176 bytes)
 *   Q6_K: uint8 ql[128], qh[64], int8 scales[16], f16 d  x = d·sc·(q - 32), q = 4 low bits from ql, 2 high
 *         from qh (value 128h + 32s + l: ql[64h + l + 32(s&1)] >> 4(s>>1), qh[32h + l] >> 2s)  (210 bytes)
 * plus unquantized F32, F16 and BF16 rows. A matrix is [rows, cols] row-major (PyTorch
 * nn.Linear weight [out_features, in_features]); each row is cols/32 (cols/256 for K-quants)
 * consecutive blocks.
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
 *   - Q5_0 / Q5_1 W: the same 8-bit 32-value activation blocks (llama.cpp: Q8_0 / Q8_1), same bound.
 *   - K-quant W: each 256-value block of x is quantized as ggml's Q8_K (d_x = max|x|/127 with the
 *     sign of the largest value, q = nearest-even(x/d_x), plus the 16 sums of 16 q's), the
 *     super-block dot product is an exact integer sum Σ_g sc_g·Σ q_w q_x (+ the min / offset term
 *     through the 16 sums), scaled in float32 once per super-block. Bound per value: |w|·d_x/2.
 *   - F32 W: OpenBLAS sgemm; F16 / BF16 W: rows converted to float32 on the fly. For M <= 16
 *     rows (decoding) F32 / F16 / BF16 go through the skinny kernel instead (each weight row read
 *     once for all rows, 8 interleaved float32 partial sums per output; src/ops/skinny.c).
 * Kernels: AVX-512 VNNI (+BW, VL; vpdpbusd, tested on Zen 4), AVX2 (+FMA, F16C) or portable C,
 * picked at run time from the CPU (attn_quant_kernel_name says which);
 * ATTN_QUANT_KERNEL=portable|avx2|avx512vnni in the environment forces one (if the CPU has it).
 * Every type has all three (the K-quants' AVX-512 VNNI kernel: vpdpwssd for decode, 16-row
 * strips with vpdpbusd for prefill from 24 rows of x; attn_quant_type_kernel_name says which runs
 * for a type). tests/test_quant_legacy.c checks the 32-value types on every kernel against
 * portable; tests/test_quant_kq_kernels.c the K-quants (prefill bit for bit portable, decode
 * within 1e-5, float64 product bound); tests/test_quant_k.c K-quant dequantization equal to
 * gguf.quants bit for bit and products within the 8-bit activation bound.
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
    ATTN_QT_Q4_1 = 5,
    ATTN_QT_Q5_0 = 6,
    ATTN_QT_Q5_1 = 7,
    ATTN_QT_Q2_K = 8,
    ATTN_QT_Q3_K = 9,
    ATTN_QT_Q4_K = 10,
    ATTN_QT_Q5_K = 11,
    ATTN_QT_Q6_K = 12
} attn_qtype;

typedef struct {
    attn_qtype type;
    const void *data; /* rows · attn_qtype_row_bytes(type, cols) bytes (any alignment) */
    int64_t rows, cols;
} attn_qmatrix;

/* attn_qtype_name: "f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k",
 * "q4_k", "q5_k", "q6_k" ("unknown" otherwise). */
const char *attn_qtype_name(attn_qtype t);
/* attn_qtype_block: values per block (32 for Q4/Q5/Q8 types, 256 for K-quants, 1 otherwise); 0 for
 * an unknown type. */
int64_t attn_qtype_block(attn_qtype t);
/* attn_qtype_row_bytes: bytes of one row of `cols` values; 0 when cols is not a multiple of the
 * block size, negative, or the type is unknown. */
size_t attn_qtype_row_bytes(attn_qtype t, int64_t cols);

/* attn_qmatrix_dequantize_rows: out[n, cols] float32 = rows r0 .. r0+n-1 of w, exactly
 * (d·q + m computed in float32 as ggml does, bit for bit equal to gguf.quants.dequantize).
 * Errors: ATTN_E_INVALID, ATTN_E_RANGE (rows outside the matrix). */
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
/* attn_quant_type_kernel_name: the kernel attn_qmatmul uses for matrices of type t
 * ("avx512vnni", "avx2", "portable", "openblas" for F32, "f32-convert" for F16/BF16). */
const char *attn_quant_type_kernel_name(attn_qtype t);

/* attn_quantize_rows: dst = the n rows of x [n, cols] (float32, row-major) in type t:
 * n · attn_qtype_row_bytes(t, cols) bytes. Quantized types use ggml's reference quantizers
 * (ggml-quants.c quantize_row_*_ref, what llama.cpp's llama-quantize runs without an importance
 * matrix): Q8_0 d = max|x|/127, q = roundf(x/d); Q4_0 / Q5_0 d = max/-8 (-16) of the largest |x|;
 * Q4_1 / Q5_1 d = (max - min)/15 (31), m = min; Q2_K make_qkx2_quants (16-value groups, absolute
 * error, 4-bit scales and mins); Q3_K make_q3_quants (coordinate descent, 6-bit scales); Q4_K /
 * Q5_K make_qkx2_quants (32-value groups weighted by rms + |x|, 6-bit scales and mins); Q6_K
 * make_qx_quants (19 trial scales, 8-bit scales). Float32 operations in ggml's order without FMA
 * contraction, so that the bytes can equal llama.cpp's (Q8_0 .. Q5_1 are checked against
 * gguf.quants byte for byte). F32 copies, F16 / BF16 round to nearest even. n_threads <= 0:
 * attn_get_num_threads(). Errors: ATTN_E_INVALID (unknown type, cols not a multiple of the
 * block, NULL), ATTN_E_RANGE (a non-finite value in x, named). */
int attn_quantize_rows(void *dst, const float *x, int64_t n, int64_t cols, attn_qtype t, int n_threads);

/* attn_qmatrix_check: every block scale (d, and m / dmin where the type has one) of w is
 * finite. Errors: ATTN_E_INVALID (bad matrix), ATTN_E_FORMAT (the first non-finite scale: row
 * and block named). Costs one read of each block header. */
int attn_qmatrix_check(const attn_qmatrix *w);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_QUANT_H */
