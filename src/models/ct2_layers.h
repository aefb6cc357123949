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

/* Open DIR/model.bin, run body(ctx, file) (which reads the variables it needs), close the file;
 * an error from body is prefixed with the file's path. */
int attn__ct2_load_model(const char *dir, int (*body)(void *ctx, const attn_ct2_file *f), void *ctx);

/* Embedding table [V, E] as float32 (int8 rows dequantised as q * (1 / scale)). */
int attn__ct2_embedding(float **out, int64_t *V, const attn_ct2_file *f, const char *scope, int64_t E);

#endif
