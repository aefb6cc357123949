/* Private building blocks shared by the CTranslate2 model families (translation Transformer,
 * Whisper): weights read from an attn_ct2_file into aligned float32, linear layers in float32
 * or int8 + per-row scale, LayerNorm. Not installed. */
#ifndef ATTN_CT2_LAYERS_H
#define ATTN_CT2_LAYERS_H

#include "attn_ct2.h"
#include "attn_ops.h"

typedef struct {
    int64_t out, in;
    float *w;     /* [out, in]; for int8 weights the integer values as floats */
    float *scale; /* [out] int8 scales (NULL for float weights) */
    float *b;     /* [out] or NULL */
    int8_t *q;    /* [out, in] int8 weights */
    int32_t *comp;/* [out] sum of each int8 weight row (removes the +128 input shift) */
    int sat16;    /* 1 for int8 weights (see attn__ct2_lin_apply) */
} attn__ct2_lin;

typedef struct {
    float *g, *b;
    int64_t n;
} attn__ct2_ln;

/* Read variable `name` (any float dtype; int8 only with scale handling by the caller) into a new
 * aligned float32 buffer, checking its shape (dims[0..rank)); shape -1 entries are free. */
int attn__ct2_read(float **out, const attn_ct2_file *f, const char *name, int rank, const int64_t *dims);
/* Scalar attribute (any integer / float dtype) or `def` when absent. */
double attn__ct2_attr(const attn_ct2_file *f, const char *name, double def);

int attn__ct2_lin_load(attn__ct2_lin *l, const attn_ct2_file *f, const char *scope, int64_t out, int64_t in, int need_bias);
void attn__ct2_lin_free(attn__ct2_lin *l);
/* y[M, out] = act(x[M, in] · Wᵀ + b); act RELU / GELU / IDENTITY. scratch: M*in floats (int8). */
int attn__ct2_lin_apply(float *y, const float *x, int64_t M, const attn__ct2_lin *l, float *scratch, attn_activation act);

int attn__ct2_ln_load(attn__ct2_ln *ln, const attn_ct2_file *f, const char *scope, int64_t n);
void attn__ct2_ln_free(attn__ct2_ln *ln);
/* y[M, n] = LayerNorm(x) (y may alias x). */
void attn__ct2_ln_apply(float *y, const float *x, int64_t M, const attn__ct2_ln *ln, float eps);

/* Multi-head attention of one batch item with CTranslate2's CPU arithmetic (the int8 models'
 * path, where every layer re-quantises its input and a one-ulp difference can move an int8
 * value): scores = scale * q·kᵀ and context = softmax(scores)·v as its oneDNN sgemm computes
 * them on an AVX2 machine, each dot product's summation order depending on the GEMM shape and
 * the element's place in it, and its softmax with its vectorised exp (see ct2_layers.c).
 * q rows [Lq] (stride qr, head h at column h*D), k / v rows [Lk] (stride kr); out rows
 * [Lq, H*D] (stride os); w NULL or [H, Lq, Lk] softmax weights. m_pad / n_pad: the rows and
 * columns of CTranslate2's score GEMM (its padded query and key lengths, >= Lq and Lk);
 * row0: the first query's row in it. scratch: n_pad floats. */
void attn__ct2_mha_exact(float *out, int64_t os, float *w, const float *q, int64_t qr, const float *k, const float *v, int64_t kr,
                         int64_t H, int64_t D, int64_t Lq, int64_t Lk, int64_t m_pad, int64_t n_pad, int64_t row0, float scale,
                         float *scratch);

/* Open DIR/model.bin, run body(ctx, file) (which reads the variables it needs), close the file;
 * an error from body is prefixed with the file's path. */
int attn__ct2_load_model(const char *dir, int (*body)(void *ctx, const attn_ct2_file *f), void *ctx);

/* Embedding table [V, E] as float32 (int8 rows dequantised as q * (1 / scale)). */
int attn__ct2_embedding(float **out, int64_t *V, const attn_ct2_file *f, const char *scope, int64_t E);

#endif
