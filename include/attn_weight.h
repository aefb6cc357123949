/*
 * attn_weight.h — a weight matrix of any storage type behind one handle, and its product.
 *
 * An attn_weight is a view (it owns nothing) of a matrix W [rows, cols] = [out_features,
 * in_features] (PyTorch nn.Linear layout) with an optional bias [rows], stored as
 *   - float32, float16 or bfloat16 rows (ATTN_QT_F32 / F16 / BF16),
 *   - GGML blocks (ATTN_QT_Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 of 32 values, the K-quants Q2_K ..
 *     Q6_K of 256; see attn_quant.h), mmap'ed and never expanded,
 *   - CTranslate2 int8 (ATTN_QT_I8): int8 q [rows, cols] with a per-row scale, W = q / scale
 *     (CTranslate2's "weight" and "weight_scale" variables).
 * Its product y[M, rows] = act(x[M, cols] · Wᵀ + b) runs the kernel the type and `kernel` pick:
 *   ATTN_WKERNEL_AUTO    F32: attn_linear (OpenBLAS sgemm, split across attn's threads) at
 *                        every M (a row's result does not depend on the rows beside it);
 *                        block types: attn_qmatmul (activations quantized as llama.cpp does).
 *   ATTN_WKERNEL_BLOCKS  attn_qmatmul for every type, F32 included (the llama.cpp-style path of
 *                        the decoder LLMs).
 *   ATTN_WKERNEL_CT2     CTranslate2 4.8.5's CPU arithmetic (src/ct2compat): F32 for M <= 16
 *                        rows (decoding steps, beams) the skinny kernel (each weight row read
 *                        once for all rows, ops/skinny.c), else one OpenBLAS call for small
 *                        products, attn_linear otherwise; I8 as its u8s8 GEMM
 *                        (rows quantized with 127 / max|x|, shifted by 128, byte pairs summed
 *                        with int16 saturation, rescaled) — bit-identical to CTranslate2 on an
 *                        AVX2 machine (scripts/probe_ct2_int8.c).
 * A model picks a weight's type when it loads it and a layer never needs to know it: the same
 * encoder / decoder layer (attn_layers.h) runs float32 BERT, Q4_1 Llama and int8 CTranslate2.
 */
#ifndef ATTN_WEIGHT_H
#define ATTN_WEIGHT_H

#include "attn_ops.h"
#include "attn_quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* CTranslate2 int8 + per-row scale (outside the GGML type numbers). */
#define ATTN_QT_I8 ((attn_qtype)64)

typedef enum {
    ATTN_WKERNEL_AUTO = 0,
    ATTN_WKERNEL_BLOCKS = 1,
    ATTN_WKERNEL_CT2 = 2
} attn_wkernel;

typedef struct {
    attn_qtype type;        /* storage type (see above) */
    int64_t rows, cols;     /* [out_features, in_features] */
    const void *data;       /* rows · attn_qtype_row_bytes(type, cols) bytes; I8: int8 [rows, cols] */
    const float *bias;      /* [rows] or NULL */
    const float *scale;     /* I8 only: [rows], W = q / scale */
    const int32_t *row_sum; /* I8 only: [rows], Σ_k q[r, k] (removes the u8 input shift) */
    attn_wkernel kernel;
    /* optional: the same float32 values as float16 / bfloat16 (half_type ATTN_QT_F16 / ATTN_QT_BF16),
     * [rows, cols], e.g. as a CTranslate2 file stores them (their widening to float32 is exact).
     * With it, products of 1..16 rows (decoding, beams) stream these half-size rows through
     * attn's skinny kernel, each weight row read once for all rows; NULL: not used. */
    const uint16_t *half;
    attn_qtype half_type;
    /* optional: the same Q8_0 / Q4_0 / Q4_1 blocks packed in 16-row strips for the AVX-512 VNNI
     * kernel (attn_weight_pack_strips), read instead of data while that kernel is in use: a
     * batch of decode rows then reads each weight byte once with no unpacking. NULL: not used. */
    const void *strips;
} attn_weight;

/* attn_weight_f32: a float32 [rows, cols] view with an optional bias [rows] (kernel AUTO). */
attn_weight attn_weight_f32(const float *w, const float *bias, int64_t rows, int64_t cols);

/* attn_weight_from_qmatrix: a view of a block-quantized (or f32/f16/bf16) attn_qmatrix with an
 * optional bias; kernel as given. */
attn_weight attn_weight_from_qmatrix(const attn_qmatrix *q, const float *bias, attn_wkernel kernel);

/* attn_weight_present: 1 when the handle holds a matrix (data != NULL). */
int attn_weight_present(const attn_weight *w);

/* attn_weight_matmul: y[M, rows] = act(x[M, cols] · Wᵀ + bias), float32, row-major,
 * contiguous; y must not alias x. act: ATTN_ACT_IDENTITY for none (RELU / GELU / GELU_TANH /
 * SILU otherwise, applied after the bias). n_threads <= 0: attn_get_num_threads() (the CT2
 * kernel's small products always run on one thread, as CTranslate2's do). With w->half and
 * 1 <= M <= 16 the product streams the 16-bit copy (attn's skinny kernel: each output a float32
 * dot of the widened values, then + bias), whatever the kernel.
 * Errors: ATTN_E_INVALID (NULL, M < 0, no data, an unknown type, a kernel the type has not, a
 * half_type other than F16 / BF16 with half),
 * ATTN_E_RANGE (non-finite activations for block types), ATTN_E_NOMEM. */
int attn_weight_matmul(float *y, const float *x, int64_t M, const attn_weight *w, attn_activation act, int n_threads);

/* attn_weight_strips_bytes: the bytes attn_weight_pack_strips writes for w (rows · row bytes,
 * the size of w's data), or 0 when this CPU's kernel would not read them: w a block weight
 * (kernel AUTO or BLOCKS) of type Q8_0, Q4_0 or Q4_1, rows a multiple of 16, cols a multiple of
 * 32 and at most 131072, and attn_qmatmul's kernel AVX-512 VNNI (attn_quant_kernel_name). */
size_t attn_weight_strips_bytes(const attn_weight *w);

/* attn_weight_pack_strips: writes w's blocks into dst (attn_weight_strips_bytes(w) bytes,
 * 64-byte aligned, owned by the caller and kept while w is used) in the VNNI kernel's strip
 * order — per 16 rows and 32-column block: the 16 float16 scales (and Q4_1's 16 minimums), then
 * the 16 rows' quantized bytes interleaved 4 at a time — and sets w->strips = dst. Products with
 * w then give the same bits as without (tests/test_quant_strips.c). The layout follows the
 * repacking llama.cpp's CPU back end does at load time for its AVX-512 / NEON kernels.
 * Errors: ATTN_E_INVALID (NULL, dst not 64-byte aligned, attn_weight_strips_bytes(w) == 0). */
int attn_weight_pack_strips(attn_weight *w, void *dst);

/* attn_weight_matmul_n: y[i] = x · w[i]ᵀ (+ bias) for `count` (<= 8) weights with the same cols
 * (e.g. the query, key and value projections): block types share one quantization of x and one
 * parallel region (attn_qmatmul_n); results equal count calls of attn_weight_matmul. */
int attn_weight_matmul_n(float *const *y, const float *x, const attn_weight *const *w, int count, int64_t M, int n_threads);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_WEIGHT_H */
