/*
 * attn_train.h — backward passes of the Transformer's non-attention building blocks (the
 * attention backward is attn_sdpa_backward in attn_attention.h) and the classification loss.
 *
 * Conventions: float32 tensors, contiguous (row-major); a "row" is the last dimension and the
 * leading dimensions are flattened into M rows. Every gradient output is written (overwritten),
 * or, where a function takes `accumulate` != 0, added to (parameter gradients summed over
 * several calls, e.g. micro-batches). Gradients may not alias the forward's inputs unless
 * stated. Each function matches torch.autograd of the torch function named in its comment.
 */
#ifndef ATTN_TRAIN_H
#define ATTN_TRAIN_H

#include "attn_core.h"
#include "attn_ops.h"
#include "attn_sampling.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* attn_linear_backward: gradients of y = x · Wᵀ + b (torch.nn.functional.linear).
 *   dy [..., N], x [..., K], w [N, K] (nn.Linear.weight layout)
 *   dx [..., K] (NULL = not wanted) = dy · W
 *   dw [N, K]   (NULL = not wanted) = dyᵀ · x   (over all M rows)
 *   db [N]      (NULL = not wanted) = sum of dy's rows
 * accumulate != 0: dw and db are added to (dx is always overwritten).
 * GEMMs by OpenBLAS cblas_sgemm (float32 accumulation); db sums in double.
 * Errors: ATTN_E_INVALID (NULL dy / x / w, non-contiguous), ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_linear_backward(attn_tensor *dx, attn_tensor *dw, attn_tensor *db, const attn_tensor *dy,
                         const attn_tensor *x, const attn_tensor *w, int accumulate);

/* attn_layernorm_backward: gradients of attn_layernorm (torch.nn.LayerNorm, biased variance)
 * over the last dim E, with x̂ = (x - mean)·rstd, rstd = 1/sqrt(var + eps) recomputed per row
 * in float64 and g = dy·gamma:
 *   dx = rstd · (g - mean(g) - x̂ · mean(g·x̂))       [..., E] (NULL = not wanted)
 *   dgamma = Σ_rows dy·x̂ [E], dbeta = Σ_rows dy [E]  (NULL = not wanted; accumulate as above)
 * gamma [E] or NULL (= 1). eps >= 0 (a constant row with eps = 0 gives dx = 0, never NaN).
 * Errors: ATTN_E_INVALID, ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_layernorm_backward(attn_tensor *dx, attn_tensor *dgamma, attn_tensor *dbeta, const attn_tensor *dy,
                            const attn_tensor *x, const attn_tensor *gamma, float eps, int accumulate);

/* attn_rmsnorm_backward: gradients of attn_rmsnorm (y = x·r·w, r = 1/sqrt(mean(x²) + eps) over
 * the last dim E; torch.nn.functional.rms_norm), r recomputed per row in float64, g = dy·w:
 *   dx = r·(g - x·r²·mean(g·x))  [..., E] (NULL = not wanted)
 *   dweight = Σ_rows dy·x·r      [E] (NULL = not wanted; accumulate as above)
 * weight [E] or NULL (= 1). Errors as attn_layernorm_backward. */
int attn_rmsnorm_backward(attn_tensor *dx, attn_tensor *dweight, const attn_tensor *dy, const attn_tensor *x,
                          const attn_tensor *weight, float eps, int accumulate);

/* attn_embedding_backward: gradient of attn_embedding (torch.nn.functional.embedding): for each
 * position n, dtable[ids[n], :] += dy[n, :] (rows of repeated ids summed, in id order of
 * appearance; float32). ids [...] int32 / int64, dy [..., E], dtable [V, E]; accumulate == 0
 * zeroes dtable first. Errors: ATTN_E_RANGE (an id outside 0..V-1, naming it; dtable is then
 * unchanged), ATTN_E_DTYPE, ATTN_E_SHAPE, ATTN_E_INVALID. */
int attn_embedding_backward(attn_tensor *dtable, const attn_tensor *dy, const attn_tensor *ids, int accumulate);

/* attn_activation_backward: dx = dy · act'(x), element-wise, for every attn_activation:
 * RELU (derivative 0 at x = 0, as torch), GELU (exact: Φ(x) + x·φ(x)), GELU_TANH (derivative of
 * the tanh form, as torch's gelu(approximate="tanh")), SILU (σ(x)(1 + x(1 - σ(x)))), IDENTITY.
 * Computed in double per element. dx may alias dy. dx, dy, x the same shape.
 * Errors: ATTN_E_INVALID (unknown act), ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_activation_backward(attn_tensor *dx, const attn_tensor *dy, const attn_tensor *x, attn_activation act);

/* attn_softmax_backward: gradient of y = softmax(x) over the last dim given y (the forward's
 * output): dx = y · (dy - Σ_j dy_j·y_j) (row sum in double). dx may alias dy.
 * Errors: ATTN_E_INVALID, ATTN_E_DTYPE, ATTN_E_SHAPE. */
int attn_softmax_backward(attn_tensor *dx, const attn_tensor *dy, const attn_tensor *y);

/* attn_cross_entropy: mean cross-entropy of logits [N, C] against class labels [N] (int32 or
 * int64), with label smoothing s in [0, 1) (torch.nn.functional.cross_entropy(logits, labels,
 * label_smoothing=s), reduction "mean": the target is (1 - s)·onehot + s/C):
 *   *loss = (1/N) Σ_n [ logsumexp(z_n) - (1 - s)·z_n[y_n] - (s/C)·Σ_c z_n[c] ]   (double)
 *   dlogits [N, C] (NULL = not wanted) = (softmax(z_n) - target_n) / N
 * N = 0 gives loss 0. Errors: ATTN_E_INVALID (NULL, s outside [0, 1)), ATTN_E_DTYPE,
 * ATTN_E_SHAPE, ATTN_E_RANGE (a label outside 0..C-1, naming it; NaN / inf in the logits). */
int attn_cross_entropy(double *loss, attn_tensor *dlogits, const attn_tensor *logits, const attn_tensor *labels,
                       double label_smoothing);


/* ================================================================ ViT training
 *
 * A trainer holds one pre-LN ViT (Hugging Face ViTForImageClassification's computation: patch
 * embedding as a strided convolution, CLS token, learned positions, n_layers encoder layers
 * h = x + MHA(LN1(x)), out = h + MLP(LN2(h)), final LayerNorm, classifier on the CLS token),
 * its gradients and AdamW moments, all float32, each in one contiguous block in the order of
 * attn_vit_trainer_param_name, except that within a layer the query, key and value weights, then
 * their biases, sit side by side (one [3E, E] and one [3E] block for the fused projection). The forward keeps every activation the backward needs in one
 * arena sized up front for max_batch images (attn_vit_train_arena_bytes); nothing is allocated
 * per step. The trainer has no dropout layers: HF's ViT defaults (hidden and attention dropout
 * probability 0) are what it trains. */

/* The model: a ViTConfig restricted to square, 1- or 3-channel images. */
typedef struct {
    int64_t image_size;   /* square images, pixels (28 for Fashion-MNIST) */
    int64_t channels;     /* num_channels C (1 or 3) */
    int64_t patch;        /* patch_size P (image_size % P == 0) */
    int64_t d_model;      /* hidden_size E */
    int64_t n_layers;     /* num_hidden_layers */
    int64_t n_heads;      /* num_attention_heads (divides E) */
    int64_t d_ff;         /* intermediate_size F */
    int64_t n_labels;     /* classes */
    float eps;            /* layer_norm_eps (HF ViT: 1e-12) */
    attn_activation act;  /* hidden_act: GELU (erf), GELU_TANH or RELU (what attn_vit_load reads) */
} attn_vit_train_config;
/* A trainer (opaque): parameters, gradients, AdamW moments, activation arena. */
typedef struct attn_vit_trainer attn_vit_trainer;

/* attn_vit_train_config_check: ATTN_OK, or ATTN_E_INVALID naming the bad field (e.g. "hidden
 * size 30 is not a multiple of 4 heads", a patch that does not divide the image). */
int attn_vit_train_config_check(const attn_vit_train_config *c);

/* attn_vit_train_arena_bytes: bytes of the activation arena for a batch of B images: with
 * N = (S/P)², T = N + 1, K = C·P², L layers, H heads, n labels, 4 bytes per float32 value of
 *   B·N·K (patches) + (L+1)·B·T·E (layer inputs and the output)
 *   + L·(8·B·T·E + 2·B·T·F + B·H·T) (LN1, q, k, v, attention out, h, LN2; fc1, act; lse)
 *   + 4·B·E + 2·B·n (CLS rows, their LN, its gradient twice; logits and their gradient)
 *   + 9·B·T·E + 2·B·T·F (backward scratch, reused by every layer).
 * E.g. the Fashion-MNIST model (S 28, P 7, E 96, 4 layers, 3 heads, F 192, 10 labels) at
 * B = 128: 55,861,248 bytes (55.9 MB). 0 for an invalid config or B < 1. */
size_t attn_vit_train_arena_bytes(const attn_vit_train_config *c, int64_t B);

/* attn_vit_trainer_new: a trainer for batches of up to max_batch images, weights initialised as
 * transformers' ViTPreTrainedModel._init_weights (initializer_range 0.02): linear and patch
 * weights, the CLS token and the positions from a normal(0, 0.02) truncated to [-2, 2] (a
 * seeded xoshiro256** stream from init_seed, not torch's), biases 0, LayerNorm weights 1 /
 * biases 0; gradients and AdamW moments 0, step 0.
 * Errors: ATTN_E_INVALID (config, max_batch < 1), ATTN_E_NOMEM (the message gives the bytes). */
int attn_vit_trainer_new(attn_vit_trainer **out, const attn_vit_train_config *c, int64_t max_batch, uint64_t init_seed);

/* attn_vit_trainer_free: NULL-safe. */
void attn_vit_trainer_free(attn_vit_trainer *t);

/* attn_vit_trainer_config: borrowed. */
const attn_vit_train_config *attn_vit_trainer_config(const attn_vit_trainer *t);

/* Parameters: index 0 .. attn_vit_trainer_param_count - 1 in this order: vit.embeddings.
 * cls_token [1, 1, E], .position_embeddings [1, T, E], .patch_embeddings.projection.weight
 * [E, C, P, P], .bias [E]; per layer l "vit.encoder.layer.l." attention.attention.{query, key,
 * value}.{weight [E, E], bias [E]}, attention.output.dense.{weight, bias}, intermediate.dense.
 * {weight [F, E], bias [F]}, output.dense.{weight [E, F], bias [E]}, layernorm_before.{weight,
 * bias}, layernorm_after.{weight, bias}; vit.layernorm.{weight, bias}; classifier.{weight [n, E],
 * bias [n]} — the names and shapes transformers saves. */
int attn_vit_trainer_param_count(const attn_vit_trainer *t);
/* attn_vit_trainer_param_name: the name above, NULL outside the range. */
const char *attn_vit_trainer_param_name(const attn_vit_trainer *t, int i);
/* attn_vit_trainer_tensor: a view of parameter i (which = 0), its gradient (1), AdamW's first
 * (2) or second moment (3), in the shape above. Errors: ATTN_E_INVALID (i or which out of range). */
int attn_vit_trainer_tensor(attn_tensor *out, const attn_vit_trainer *t, int i, int which);
/* attn_vit_trainer_numel: the total parameter count. */
int64_t attn_vit_trainer_numel(const attn_vit_trainer *t);
/* attn_vit_trainer_step_count / _set_step_count: AdamW's step t (bias corrections use t). */
int64_t attn_vit_trainer_step_count(const attn_vit_trainer *t);
/* attn_vit_trainer_set_step_count: set AdamW's t (NULL-safe). */
void attn_vit_trainer_set_step_count(attn_vit_trainer *t, int64_t step);

/* attn_vit_trainer_forward: logits [B, n_labels] of pixels [B, C, S, S] (float32, preprocessed),
 * 1 <= B <= max_batch; the activations stay in the arena for attn_vit_trainer_backward.
 * logits may be NULL (they are kept inside too). Matches ViTForImageClassification(pixels).logits.
 * Errors: ATTN_E_INVALID (NULL, B out of range), errors of the layers (NaN in a score). */
int attn_vit_trainer_forward(attn_vit_trainer *t, float *logits, const float *pixels, int64_t B);

/* attn_vit_trainer_loss_backward: forward, mean cross-entropy against labels [B] (int32, each in
 * 0..n_labels-1) with label smoothing s (attn_cross_entropy), and the backward: every parameter's
 * gradient is overwritten with d loss / d parameter (torch.autograd's .grad after loss.backward()).
 * *loss gets the loss (double). logits [B, n] may be NULL.
 * Errors: as attn_vit_trainer_forward; ATTN_E_RANGE (a label out of range, naming it; a NaN or
 * infinite logit — the gradients are then undefined). */
int attn_vit_trainer_loss_backward(attn_vit_trainer *t, double *loss, float *logits, const float *pixels,
                                   const int32_t *labels, int64_t B, double label_smoothing);

/* attn_vit_grad_hook: called by attn_vit_trainer_loss_backward, on the calling thread, each time
 * the gradients of parameters first .. first + count - 1 (the indices of attn_vit_trainer_param_name)
 * are final for this backward — in the backward's order: the final LayerNorm and classifier, then
 * the encoder layers from the last to the first, then the embeddings — so that a data-parallel
 * caller can start reducing them while the backward goes on (tools/mpi_train.c: MPI_Iallreduce).
 * The hook may read and modify those gradients (attn_vit_trainer_tensor(.., 1)) but must not call
 * the trainer. A backward that fails stops calling it. */
typedef void (*attn_vit_grad_hook)(void *user, int first, int count);

/* attn_vit_trainer_set_grad_hook: install fn (NULL: none) for the following backwards (NULL-safe). */
void attn_vit_trainer_set_grad_hook(attn_vit_trainer *t, attn_vit_grad_hook fn, void *user);

/* attn_vit_trainer_clip_grad_norm: total = sqrt(Σ g²) over all gradients (in double); when
 * total > max_norm, every gradient is scaled by max_norm / (total + 1e-6) (torch.nn.utils.
 * clip_grad_norm_). max_norm <= 0 or infinite: no clipping. Returns the total norm before
 * clipping (NaN when a gradient is NaN; nothing is scaled then). */
double attn_vit_trainer_clip_grad_norm(attn_vit_trainer *t, double max_norm);

/* AdamW hyper-parameters (torch.optim.AdamW's defaults except weight_decay). */
typedef struct {
    double beta1, beta2, eps, weight_decay;
} attn_adamw_config;

/* attn_adamw_update: one AdamW step on n values at step t >= 1 with learning rate lr
 * (Loshchilov & Hutter 2019; torch.optim.AdamW, amsgrad off):
 *   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²;
 *   p ← p − (lr / (1 − β1ᵗ)) · m / (sqrt(v) / sqrt(1 − β2ᵗ) + eps)
 * computed in double per element and stored as float32. wd = weight_decay (or 0 with decay 0). */
void attn_adamw_update(float *p, const float *g, float *m, float *v, int64_t n, int64_t t, double lr,
                       const attn_adamw_config *c, int decay);

/* attn_vit_trainer_adamw_step: step ← step + 1, then attn_adamw_update on every parameter;
 * weight decay applies to the tensors of 2 or more dims except the position embeddings (the
 * grouping of scripts/train_vit.py), the rest get none.
 * Errors: ATTN_E_INVALID (lr NaN / negative / infinite, bad betas or eps). */
int attn_vit_trainer_adamw_step(attn_vit_trainer *t, double lr, const attn_adamw_config *c);

/* attn_lr_warmup_cosine: the learning rate at optimizer step s (0-based) of `total`: linear
 * warm-up base·(s + 1)/warmup for s < warmup, then base·0.5·(1 + cos(π·(s − warmup)/max(1,
 * total − warmup))) (scripts/train_vit.py's LambdaLR). warmup <= 0: no warm-up. */
double attn_lr_warmup_cosine(int64_t s, int64_t warmup, int64_t total, double base);

/* ---- data: seeded shuffling and augmentation (attn_rng of attn_sampling.h: xoshiro256**) */
/* attn_train_rng_seed: attn_rng_seed with a seed mixed from (seed, stream) by splitmix64 — e.g.
 * (user seed, epoch) — so that any epoch's stream can be regenerated without replaying the
 * ones before (resume). */
void attn_train_rng_seed(attn_rng *r, uint64_t seed, uint64_t stream);
/* attn_rng_below: uniform in 0..n-1 (n >= 1; Lemire's unbiased multiply-shift). */
uint64_t attn_rng_below(attn_rng *r, uint64_t n);
/* attn_shuffle: perm[0..n) = a Fisher–Yates permutation of 0..n-1. */
void attn_shuffle(int64_t *perm, int64_t n, attn_rng *r);

/* attn_train_make_batch: pixels [B, 1, S, S] float32 of the 8-bit images [.., S, S] whose indices
 * are idx[0..B) (each in 0..N-1 of the caller's N images; not checked), each (p/255 − mean)/std
 * in float32 (attn_vit_preprocess's arithmetic);
 * with rng non-NULL each image is augmented: padded by `pad` pixels of value 0 on every side and
 * cropped back to S x S at a uniform random offset in [0, 2·pad]², then flipped left–right with
 * probability 1/2 (in that order: 2 draws for the offset when pad > 0, 1 for the flip). rng NULL: no augmentation. */
void attn_train_make_batch(float *pixels, const uint8_t *images, int64_t S, const int64_t *idx, int64_t B,
                           float mean, float std, int pad, attn_rng *rng);

/* ---- checkpoints: a Hugging Face ViTForImageClassification directory plus the training state */

/* One epoch's record. */
typedef struct {
    double train_loss;    /* mean loss over the epoch's batches */
    double eval_loss;     /* mean loss on the evaluation set (NaN: none) */
    double eval_accuracy; /* fraction correct on the evaluation set (NaN: none) */
    double seconds;       /* wall time of the epoch (training and evaluation) */
} attn_train_epoch;

/* Everything besides the weights and moments that a run needs to continue bit for bit. */
typedef struct {
    int64_t epoch;            /* epochs completed */
    int64_t epochs;           /* epochs planned (the schedule's length) */
    int64_t steps_per_epoch, warmup_steps, batch;
    uint64_t seed;
    double lr, weight_decay, max_norm, label_smoothing;
    int pad;                  /* random-crop padding (0: none) */
    int flip;                 /* random horizontal flips */
    float mean, std;          /* preprocessing: (p/255 - mean)/std */
    char **labels;            /* n_labels class names (malloc'ed; attn_vit_train_state_free) */
    int64_t n_labels;
    attn_train_epoch *history; /* [epoch] (malloc'ed) */
    int64_t train_images;     /* training images used (after --limit); with seed they define the data
                                 order. 0: unknown (a checkpoint written before it was recorded) */
    uint64_t train_hash;      /* FNV-1a 64 of those images' pixels and labels (the caller's; 0: unknown) */
} attn_vit_train_state;

/* attn_vit_train_state_free: the names and the history (NULL-safe); zeroes nothing else. */
void attn_vit_train_state_free(attn_vit_train_state *s);

/* attn_vit_trainer_save: write the checkpoint into the existing directory dir:
 *   config.json               ViTConfig (model_type "vit", ViTForImageClassification, id2label /
 *                             label2id from s->labels, dropout 0, qkv_bias true)
 *   model.safetensors         the parameters (F32, the names of attn_vit_trainer_param_name)
 *   preprocessor_config.json  ViTImageProcessor: size = image size, bilinear, rescale 1/255,
 *                             image_mean [s->mean], image_std [s->std]
 *   optimizer.safetensors     AdamW's moments "exp_avg.NAME", "exp_avg_sq.NAME"; metadata "step"
 *   trainer_state.json        *s (the run's settings and the per-epoch history)
 *   curve.png                 training loss and evaluation accuracy per epoch (cairo; when the
 *                             history is not empty)
 * Every file is staged beside its target and all are flushed and checked before the first is
 * renamed over its target, so a failed write (a full disk) leaves the previous checkpoint intact.
 * Errors: ATTN_E_INVALID (NULL, labels missing), ATTN_E_IO (naming the file), ATTN_E_NOMEM. */
int attn_vit_trainer_save(const attn_vit_trainer *t, const char *dir, const attn_vit_train_state *s);

/* attn_vit_train_config_load: the model config of dir/file (file NULL: "config.json"; a transformers ViTConfig:
 * square image_size and patch_size, num_channels, hidden_size, num_hidden_layers,
 * num_attention_heads, intermediate_size, hidden_act, layer_norm_eps, id2label or num_labels) and,
 * when labels is not NULL, the class names (malloc'ed array of n_labels strings; "LABEL_i" for a
 * config without id2label; free with attn_vit_train_labels_free).
 * Errors: ATTN_E_IO (missing file), ATTN_E_FORMAT (bad JSON, a non-square size, heads not dividing
 * hidden, ...), ATTN_E_UNSUPPORTED (model_type not "vit", an unknown hidden_act), ATTN_E_NOMEM. */
int attn_vit_train_config_load(attn_vit_train_config *c, char ***labels, const char *dir, const char *file);
/* attn_vit_train_labels_free: free n names and the array (NULL-safe). */
void attn_vit_train_labels_free(char **labels, int64_t n);

/* attn_vit_trainer_load: the parameters from dir/model.safetensors (every name, shapes checked
 * against t's config) and, when s is not NULL, the moments and step from optimizer.safetensors and
 * *s from trainer_state.json (to resume). On error t's contents are unspecified.
 * Errors: ATTN_E_IO (a missing file), ATTN_E_SHAPE (a tensor of another shape: "another model"),
 * ATTN_E_INVALID (a missing tensor), ATTN_E_FORMAT (a bad trainer_state.json), ATTN_E_NOMEM. */
int attn_vit_trainer_load(attn_vit_trainer *t, const char *dir, attn_vit_train_state *s);

/* attn_train_curve_png: a PNG (cairo) of two panels — training loss (and evaluation loss where
 * known) and evaluation accuracy — against the epoch, written to f.
 * Errors: ATTN_E_INVALID (NULL, n < 1), ATTN_E_IO (cairo or the write failed). */
int attn_train_curve_png(FILE *f, const attn_train_epoch *h, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_TRAIN_H */
