/* Private building blocks shared by the CTranslate2 model families (translation Transformer,
 * Whisper): weights read from an attn_ct2_file into aligned float32, linear layers in float32
 * or int8 + per-row scale, LayerNorm. Not installed. */
#ifndef ATTN_CT2_LAYERS_H
#define ATTN_CT2_LAYERS_H

#include "attn_ct2.h"
#include "attn_ops.h"
#include "attn_weight.h"
#include "attn_layers.h"
#include "ct2compat/ct2compat.h"

typedef struct {
    attn_weight w; /* the view layers use: F32 or ATTN_QT_I8, kernel ATTN_WKERNEL_CT2 */
    float *wf;     /* [out, in] float32 weights (NULL for int8) */
    float *scale;  /* [out] int8 scales (NULL for float weights) */
    float *b;      /* [out] or NULL */
    int8_t *q;     /* [out, in] int8 weights */
    int32_t *comp; /* [out] sum of each int8 weight row (removes the +128 input shift) */
    uint16_t *wh;  /* [out, in] the weights as the file stores them when that is float16 or bfloat16
                    * (the values of wf: the widening is exact), or NULL; see attn__ct2_lin_keep16 */
    attn_qtype wh_type; /* ATTN_QT_F16 or ATTN_QT_BF16 with wh */
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
/* a float32 linear layer over buffers it takes ownership of: w [out, in], b [out] or NULL */
static inline void attn__ct2_lin_own(attn__ct2_lin *l, float *w, float *b, int64_t out, int64_t in) {
    *l = (attn__ct2_lin){{ATTN_QT_F32, out, in, w, b, NULL, NULL, ATTN_WKERNEL_CT2, NULL, ATTN_QT_F32, NULL}, w, NULL, b, NULL, NULL, NULL, ATTN_QT_F32};
}
void attn__ct2_lin_free(attn__ct2_lin *l);
/* Keep a copy of variable v's 16-bit values in l->wh when v (shape [out, in] of l) is stored as
 * float16 or bfloat16 (nothing otherwise): the skinny products of a few rows read half the bytes
 * for the same results (attn__ct2_dec_step's projection). Errors: ATTN_E_NOMEM. */
int attn__ct2_lin_keep16(attn__ct2_lin *l, const attn_ct2_var *v);
/* y[M, out] = act(x[M, in] · Wᵀ + b) with CTranslate2's arithmetic (attn__ct2_gemm). */
static inline int attn__ct2_lin_apply(float *y, const float *x, int64_t M, const attn__ct2_lin *l, attn_activation act) {
    return attn__ct2_gemm(y, x, M, &l->w, act);
}

int attn__ct2_ln_load(attn__ct2_ln *ln, const attn_ct2_file *f, const char *scope, int64_t n);
void attn__ct2_ln_free(attn__ct2_ln *ln);
/* y[M, n] = LayerNorm(x) (y may alias x), CTranslate2's rounding (attn__ct2_layernorm). */
static inline void attn__ct2_ln_apply(float *y, const float *x, int64_t M, const attn__ct2_ln *ln, float eps) {
    attn__ct2_layernorm(y, x, M, ln->g, ln->b, ln->n, eps);
}

/* Open DIR/model.bin, run body(ctx, file) (which reads the variables it needs), close the file;
 * an error from body is prefixed with the file's path. */
int attn__ct2_load_model(const char *dir, int (*body)(void *ctx, const attn_ct2_file *f), void *ctx);

/* Embedding table [V, E] as float32 (int8 rows dequantised as q * (1 / scale)). */
int attn__ct2_embedding(float **out, int64_t *V, const attn_ct2_file *f, const char *scope, int64_t E);

/* ---------------------------------------------------------------- layers and the decoder loop
 * shared by the CTranslate2 Transformer and Whisper (both run on attn_encoder_block /
 * attn_decoder_block; only embeddings, positions and decoding rules differ). */

/* One layer's variables ("<side>/layer_<i>/..."): self-attention (fused QKV), cross-attention
 * (decoder only), FFN, their LayerNorms; bw: the views the layer floor runs on. */
typedef struct {
    attn__ct2_ln ln_sa, ln_ca, ln_ff;
    attn__ct2_lin qkv, out_sa, q_ca, kv_ca, out_ca, ff1, ff2;
    attn_block_weights bw;
} attn__ct2_layer;

int attn__ct2_layer_load(attn__ct2_layer *l, const attn_ct2_file *f, const char *side, int64_t i, int64_t E, int64_t F, int cross);
void attn__ct2_layer_free(attn__ct2_layer *l);
/* the encoder's n_enc and the decoder's n_dec layers (calloc'ed arrays; on error what was
 * allocated stays for attn__ct2_stacks_free) */
int attn__ct2_stacks_load(attn__ct2_layer **enc, attn__ct2_layer **dec, const attn_ct2_file *f, int64_t n_enc, int64_t n_dec, int64_t E,
                          int64_t F);
void attn__ct2_stacks_free(attn__ct2_layer *enc, attn__ct2_layer *dec, int64_t n_enc, int64_t n_dec);
/* the block config of a CTranslate2 stack: LayerNorm (eps 1e-5) with its rounding, fused QKV */
attn_block_config attn__ct2_block_config(int64_t E, int64_t H, int64_t F, int pre_norm, attn_activation act, int cross, int int8,
                                         float query_scale);

/* run n encoder layers on x [B·L, E] in place (key_lengths: [B] or NULL) */
int attn__ct2_encode(float *x, const attn__ct2_layer *layers, int64_t n, const attn_block_config *c, int64_t B, int64_t L,
                     const int64_t *key_lengths, attn_arena *arena);

/* Decoding state of a decoder stack: one KV cache slot per row (beam / sample), the source's
 * cross-attention keys and values per layer, and the rows' source items. */
typedef struct {
    const attn__ct2_layer *layers;
    int64_t n_layers;
    attn_block_config cfg;
    const attn__ct2_ln *final_ln; /* NULL: none */
    const attn__ct2_lin *proj;
    attn_kv *kv;
    attn_arena arena;
    int64_t B, Ls, cap_rows, rows;
    float *cross_kv;    /* [n_layers][B·Ls, 2E] */
    int64_t *src_len;   /* [B] valid source positions, or NULL (every item Ls) */
    int64_t *row_item;  /* [cap_rows] */
    float *x;           /* [cap_rows, E]: the step's input, filled by the model */
    float *w_last;      /* [cap_rows, H, Ls] cross-attention weights of the last layer */
} attn__ct2_dec;

/* a state for B items of Ls source positions, up to T target positions and cap_rows rows;
 * with_src_len: allocate src_len (padded batches). Errors: ATTN_E_NOMEM. */
int attn__ct2_dec_init(attn__ct2_dec *d, const attn__ct2_layer *layers, int64_t n_layers, const attn_block_config *c,
                       const attn__ct2_ln *final_ln, const attn__ct2_lin *proj, int64_t B, int64_t Ls, int64_t T, int64_t cap_rows,
                       int with_src_len);
void attn__ct2_dec_free(attn__ct2_dec *d);
/* project the encoder output enc [B·Ls, E] to every layer's cross keys / values */
int attn__ct2_dec_cross(attn__ct2_dec *d, const float *enc);
/* one position for N rows whose inputs are in d->x: layers, cache commit, final norm and
 * projection to logits [N, V] (logits NULL: cache only); attn_out NULL or [N, Ls]: head 0 of
 * the last layer's cross-attention, zeros past the source length */
int attn__ct2_dec_step(attn__ct2_dec *d, float *logits, float *attn_out, int64_t N);
/* beam reorder: row i takes old row src[i]; row_item: the new rows' items (NULL: unchanged) */
int attn__ct2_dec_reorder(attn__ct2_dec *d, const int64_t *src, int64_t n_new, const int64_t *row_item);

#endif
