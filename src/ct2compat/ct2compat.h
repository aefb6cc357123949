/* CTranslate2-compatibility arithmetic (private, not installed).
 *
 * CTranslate2 4.8.5 computes on an x86 CPU without Intel MKL with oneDNN GEMMs, its own AVX2
 * kernels and libstdc++. Its int8 models re-quantise every layer's input, so a one-ulp
 * difference anywhere can move an int8 value and change a translation: to give its outputs
 * bit for bit, attn repeats its arithmetic here, read from its kernels and checked against its
 * exported functions (scripts/probe_ct2_int8.c, scripts/probe_ct2_attention.c):
 *   gemm.c        its u8s8 int8 GEMM and float32 products (attn_weight kernel ATTN_WKERNEL_CT2)
 *   layernorm.c   its 8-lane LayerNorm
 *   attention.c   oneDNN's per-shape summation orders for Q·Kᵀ and P·V, its exp and softmax
 *   sincos.c      its Cephes single-precision sin / cos (sinusoidal positions)
 *   batch_order.c its rebatching order (an emulation of libstdc++'s introsort)
 * Floor: ops (below attention and layers); used by src/ops/weight.c, src/layers and the CT2
 * model families. */
#ifndef ATTN_CT2COMPAT_H
#define ATTN_CT2COMPAT_H

#include "attn_weight.h"

/* 1 when the AVX2 + FMA kernels run here (ATTN_QUANT_KERNEL=portable forces the C paths). */
int attn__ct2_have_avx2(void);

/* y[M, rows] = act(x[M, cols] · Wᵀ + b) as CTranslate2 computes it; w F32 or ATTN_QT_I8.
 * act RELU / GELU / GELU_TANH / IDENTITY. Errors: ATTN_E_INVALID, ATTN_E_NOMEM. */
int attn__ct2_gemm(float *y, const float *x, int64_t M, const attn_weight *w, attn_activation act);

/* y[M, n] = LayerNorm(x) with gamma g [n], beta b [n] (y may alias x), rounded as
 * CTranslate2's CPU LayerNorm on an 8-float-wide machine. */
void attn__ct2_layernorm(float *y, const float *x, int64_t M, const float *g, const float *b, int64_t n, float eps);

/* Multi-head attention of one batch item with CTranslate2's CPU arithmetic: scores =
 * scale * q·kᵀ and context = softmax(scores)·v as its oneDNN sgemm computes them on an AVX2
 * machine, each dot product's summation order depending on the GEMM shape and the element's
 * place in it, and its softmax with its vectorised exp (see attention.c).
 * q rows [Lq] (stride qr, head h at column h*D), k / v rows [Lk] (stride kr, head h at h*kh); out rows
 * [Lq, H*D] (stride os); w NULL or [H, Lq, Lk] softmax weights. m_pad / n_pad: the rows and
 * columns of CTranslate2's score GEMM (its padded query and key lengths, >= Lq and Lk);
 * row0: the first query's row in it. scratch: n_pad floats. */
void attn__ct2_mha_exact(float *out, int64_t os, float *w, const float *q, int64_t qr, const float *k, const float *v, int64_t kr,
                         int64_t kh, int64_t H, int64_t D, int64_t Lq, int64_t Lk, int64_t m_pad, int64_t n_pad, int64_t row0, float scale,
                         float *scratch);

/* sin(x) (want_cos 0) or cos(x) (want_cos 1) as CTranslate2's CPU kernels round them. */
float attn__ct2_sincos(float x, int want_cos);

/* idx[0..n) = 0..n-1 sorted longest first (len[i] tokens) in the order CTranslate2's
 * rebatching (libstdc++ std::sort, unstable) leaves them. */
void attn__ct2_batch_order(int64_t *idx, int64_t n, const int64_t *len);

#endif
