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
 * M·nb quantized blocks (row m at xq + m·nb); W rows are rb bytes apart; t is Q8_0/Q4_0/Q4_1/Q5_0/Q5_1. */
typedef void (*attn__qdot_fn)(float *y, int64_t ldy, const attn__q8blk *xq, int64_t nb, int64_t M, const uint8_t *W,
                              size_t rb, int64_t r0, int64_t r1, attn_qtype t);

attn__qdot_fn attn__qdot_avx2(void);
/* decode tiles' software prefetch: how far beyond the next tile the L2 prefetch runs (bytes;
 * tuned on Zen 4 under load: 1 thread streamed 22 GB/s, the plain read's speed, with 4-8 KiB) */
#ifndef ATTN__PF_FAR
#define ATTN__PF_FAR 6144
#endif
/* x[nb·32] -> nb quantized blocks (d = max|x|/127, q = roundf(x/d), s = d·Σq) */
typedef void (*attn__quantize_fn)(attn__q8blk *q, const float *x, int64_t nb);
void attn__quantize_row_portable(attn__q8blk *q, const float *x, int64_t nb);
/* the same with AVX-512 (F, BW, VL: quant_avx512.c), for the AVX512VNNI kernel; NULL off x86 */
attn__quantize_fn attn__quantize_avx512(void);
attn__quantize_fn attn__quantize_avx2(void); /* bit-identical to the portable one; NULL off x86 */       /* NULL when not compiled for x86 */
attn__qdot_fn attn__qdot_avx512vnni(void); /* NULL when not compiled for x86 */

/* ---- packed strips: Q8_0 / Q4_0 / Q4_1 rows in the AVX-512 VNNI kernel's own order ---- */

/* 1 when W [rows, cols] of type t can be packed (attn__qpack_strips): Q8_0, Q4_0 or Q4_1, rows a
 * positive multiple of 16, cols a positive multiple of 32 and at most 4096 blocks a row */
int attn__qpack_strips_ok(attn_qtype t, int64_t rows, int64_t cols);
/* dst = W repacked in strips of 16 rows, rows · attn_qtype_row_bytes(t, cols) bytes as W (strip s
 * at the byte offset of row 16s). Per strip and block b one record: the 16 rows' float16 d
 * (32 bytes), Q4_1's float16 m (32 bytes), then the 16 rows' quantized bytes as 64-byte vectors
 * (Q4: 4, the packed nibble bytes; Q8_0: 8, each byte q + 128), byte 4i + k of vector c being
 * byte 4c + k of row i's values. t, rows and cols as attn__qpack_strips_ok accepts. */
void attn__qpack_strips(uint8_t *dst, const uint8_t *W, attn_qtype t, int64_t rows, int64_t cols);
/* the AVX-512 VNNI products from packed strips: as attn__qdot_fn with W the packed copy, r0 a
 * multiple of 16 and r1 one or the last row (quant_avx512.c); NULL when not compiled for x86 */
attn__qdot_fn attn__pdot_avx512vnni(void);
/* 1 when the kernel in use (attn_qmatmul's AUTO choice) reads packed strips */
int attn__qpack_strips_used(void);
/* y[i] = x[M, K] · w[i]ᵀ for count (1..8) matrices with the same cols, where P[i] is w[i]'s packed
 * copy (attn__qpack_strips) or NULL. When every P[i] is set and attn__qpack_strips_used(), the
 * products read the packed copies (the same bits as from w); else attn_qmatmul / attn_qmatmul_n.
 * Errors as attn_qmatmul_n. */
int attn__qmatmul_packed(float *const *y, const float *x, const attn_qmatrix *w, const void *const *P, int count, int64_t M, int n_threads);

/* ---- Q5_0 / Q5_1 and the K-quants (quant_kq.c, quant_kq_avx2.c) ---- */

/* One 256-value activation block as ggml's block_q8_K: x[j] ~ d·q[j]; bsums[g] = Σ q[16g .. 16g+15]. */
typedef struct {
    float d;
    int8_t q[256];
    int16_t bsums[16];
} attn__q8k;

/* One K-quant super-block in a common form: 256 unsigned values q (0..63), and per 16-value group g
 * an integer scale sc[g] and offset coefficient mn[g], such that the block's dot product with a
 * Q8_K block is  d·d_x·Σ_g sc[g]·Σ_{i in g} q[i]·x[i]  +  dm·d_x·Σ_g mn[g]·bsums[g]. */
typedef struct {
    uint8_t q[256];
    int16_t sc[16];
    int16_t mn[16];
    float d, dm;
} attn__kblk;

/* 1 for the types quant_kq.c handles (Q5_0, Q5_1, Q2_K .. Q6_K). */
int attn__qtype_ext(attn_qtype t);
/* bytes of one block of t (0 for an unknown type) */
size_t attn__qtype_block_bytes(attn_qtype t);
/* row of `cols` values of an ext type -> float32 (exact, ggml / gguf.quants order of operations) */
void attn__dequant_row_ext(float *out, const uint8_t *row, attn_qtype t, int64_t cols);
/* one super-block of a K-quant type -> attn__kblk (portable C) */
void attn__kunpack(attn__kblk *u, const uint8_t *blk, attn_qtype t);
/* only sc, mn, d, dm of attn__kunpack */
void attn__kscales(attn__kblk *u, const uint8_t *blk, attn_qtype t);
/* x[nb·256] -> nb Q8_K blocks (ggml's quantize_row_q8_K: d = max/-127 of the largest |x|, nearest-even) */
void attn__quantize_q8k(attn__q8k *q, const float *x, int64_t nb);
/* the same with AVX2 (bit for bit; NULL when not compiled for x86), and the one kernel k uses */
typedef void (*attn__quantize_q8k_fn)(attn__q8k *q, const float *x, int64_t nb);
attn__quantize_q8k_fn attn__quantize_q8k_avx2(void);
attn__quantize_q8k_fn attn__quantize_q8k_for(attn_qkernel k);
/* products for the ext types: as attn_qmatmul_kernel (validated arguments, K > 0, x finite) */
int attn__qmatmul_ext(float *y, const float *x, const attn_qmatrix *w, int64_t M, int nt, attn_qkernel k);
/* the rows [r0, r1) of an ext-type W times M activation rows; xq is attn__q8blk (Q5_0/Q5_1, nb
 * 32-value blocks per row) or attn__q8k (K-quants, nb super-blocks per row) */
typedef void (*attn__kdot_fn)(float *y, int64_t ldy, const void *xq, int64_t nb, int64_t M, const uint8_t *W, size_t rb,
                              int64_t r0, int64_t r1, attn_qtype t);
attn__kdot_fn attn__kdot_avx2(void); /* NULL when not compiled for x86 */
/* K-quants with AVX-512 VNNI (Q5_0 / Q5_1 passed to the AVX2 kernel); NULL when not compiled for x86 */
attn__kdot_fn attn__kdot_avx512vnni(void);
/* 1 when kernel ATTN_QK_AVX512VNNI has its own code for t (the K-quants), 0: it runs the AVX2 one */
int attn__kq_vnni(attn_qtype t);
/* the products of kernel k (AUTO: the chosen one) for the ext types */
attn__kdot_fn attn__kdot_for(attn_qkernel k);
/* y[M, N] = x[M, K] · w[N, K]ᵀ with OpenBLAS (single-threaded calls), cut into pieces run on
 * attn's thread pool when nt > 1: by rows of x when allow_rows and M >= 8·nt, else by 16-row
 * units of w; nt == 1: one call (ops.c). beta 0: y is overwritten; 1: y += the product */
void attn__sgemm_split(float *y, const float *x, const float *w, int64_t M, int64_t N, int64_t K, int nt, int allow_rows, float beta);
/* y[M, N] (+)= x[M, K] · w[N, K]ᵀ + bias[N] (bias may be NULL) on OpenBLAS split over nt threads
 * as attn_linear does (which calls it): with accumulate 0 y's rows start from the bias (no
 * zero-fill and no bias pass after the product), with 1 the bias is added to y first and the
 * product accumulated into it (a residual connection: no temporary, no add pass). Each output is
 * OpenBLAS's dot of its row plus what y held (one rounding per K block, as beta = 1 does), so
 * a row's result never depends on the rows beside it. */
void attn__linear_f32(float *y, const float *x, const float *w, const float *bias, int64_t M, int64_t N, int64_t K, int nt, int accumulate);
/* Skinny products (skinny.c): y[M, N] = x[M, K] · W[N, K]ᵀ for M <= ATTN__SKINNY_MAX_M rows and
 * float32 / float16 / bfloat16 weights (t), each weight row read once for all M rows; threads
 * on the pool (nt <= 0: attn_get_num_threads()). _path: simd 1 = AVX2 + FMA + F16C (error when
 * this CPU has none), 0 = portable C. Errors: ATTN_E_INVALID (type, M > the limit, negative). */
#define ATTN__SKINNY_MAX_M 16
int attn__skinny_matmul(float *y, const float *x, const void *W, attn_qtype t, int64_t M, int64_t N, int64_t K, int nt);
int attn__skinny_matmul_path(float *y, const float *x, const void *W, attn_qtype t, int64_t M, int64_t N, int64_t K, int nt, int simd);
int attn__skinny_simd_available(void);
/* Row products of `count` (1..8) matrices sharing one quantized activation xq (M rows of nb
 * blocks), run on attn's thread pool: the rows of the matrices' concatenation are cut into
 * 16-row units (chunks start on a multiple of 16, as the kernels' row tiles do, so any split
 * gives the same bits as one call); ext types go through kfn, the others through fn. Below
 * ATTN__POOL_MIN_COST multiply-adds (or nt == 1) it runs on the calling thread. */
typedef struct {
    int count;
    float *const *y;
    const attn_qmatrix *w;
    const void *xq;
    int64_t nb, M;
    attn__qdot_fn fn;
    attn__kdot_fn kfn;
    const void *const *packed; /* NULL, or each matrix's packed strips (attn__qpack_strips), read by fn */
} attn__rows_job;
void attn__rows_run(const attn__rows_job *j, int nt);
/* attn_qmatmul_n for K-quant matrices (validated; x finite): x quantized to Q8_K once */
int attn__qmatmul_n_k(float *const *y, const float *x, const attn_qmatrix *w, int count, int64_t M, int nt);
/* 1 when kernel k resolves to the AVX2 code for the ext types */
attn_qkernel attn__resolve_kernel(attn_qkernel k);
void attn__quantize_row_q8(attn__q8blk *q, const float *x, int64_t nb, attn_qkernel k);
/* xq = the M activation rows x[M, K] quantized for kernel k: Q8_K super-blocks (q8k, K % 256 == 0)
 * or 32-value Q8 blocks; each row whole on one thread (the same bytes for any thread count),
 * rows spread over the pool (nt threads, <= 0: attn_get_num_threads()) from 8192 values up.
 * Errors: ATTN_E_RANGE "x[i] is not finite" naming the first such index (xq then partly written). */
int attn__quantize_acts(void *xq, const float *x, int64_t M, int64_t K, attn_qkernel k, int q8k, int nt);

#endif
