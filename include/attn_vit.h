/*
 * attn_vit.h — Vision Transformer image classifiers (Dosovitskiy et al. 2021, "An Image is
 * Worth 16x16 Words"), as Hugging Face transformers' ViTForImageClassification / ViTModel
 * computes them.
 *
 * A model directory holds:
 *   config.json               ViTConfig: image_size, patch_size, num_channels, hidden_size,
 *                             num_hidden_layers, num_attention_heads, intermediate_size,
 *                             hidden_act (gelu, gelu_new / gelu_pytorch_tanh, relu),
 *                             layer_norm_eps, qkv_bias, id2label; image_size and patch_size
 *                             may be an integer or a [height, width] pair
 *   model.safetensors         weights (F32, F16 or BF16), names as transformers saves them:
 *                             "vit."-prefixed (ViTForImageClassification, with
 *                             classifier.weight / .bias) or unprefixed (ViTModel); the
 *                             layer names of transformers 4 (encoder.layer.N.attention.
 *                             attention.query ...) and of transformers 5's modules
 *                             (layers.N.attention.q_proj ...) are both read
 *   preprocessor_config.json  optional ViTImageProcessor settings: do_resize, size
 *                             {height, width}, do_rescale, rescale_factor, do_normalize,
 *                             image_mean, image_std (defaults: transformers' ViTImageProcessor
 *                             defaults with the model's image_size)
 *
 * The forward pass: the image [C, H, W] is cut into P x P patches (row-major), each
 * flattened in (channel, row, column) order and projected by the patch-embedding
 * convolution's weight as one GEMM ([B·N, C·P·P] x [C·P·P, E]); the CLS token is put in
 * front; learned position embeddings are added (bicubic-interpolated when the input is not
 * the model's image size, see attn_vit_forward); then num_hidden_layers pre-LN encoder
 * layers (attn_encoder_layer: h = x + MHA(LN1(x)); out = h + MLP(LN2(h))), the final
 * LayerNorm, and the classifier on the CLS token.
 */
#ifndef ATTN_VIT_H
#define ATTN_VIT_H

#include "attn_core.h"
#include "attn_image.h"
#include "attn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_vit attn_vit;

typedef struct {
    int64_t image_h, image_w;   /* image_size */
    int64_t patch_h, patch_w;   /* patch_size */
    int64_t channels;           /* num_channels C */
    int64_t d_model;            /* hidden_size E */
    int64_t n_layers;           /* num_hidden_layers */
    int64_t n_heads;            /* num_attention_heads H (head_dim = E / H) */
    int64_t d_ff;               /* intermediate_size */
    float eps;                  /* layer_norm_eps */
    attn_activation act;        /* hidden_act */
    int qkv_bias;               /* 1: query/key/value projections have biases */
    int64_t n_labels;           /* classifier outputs (0: a ViTModel without classifier) */
    /* preprocessing (preprocessor_config.json) */
    int do_resize;
    int64_t resize_h, resize_w; /* size.height, size.width */
    int do_rescale;
    float rescale_factor;
    int do_normalize;
    float mean[3], std[3];      /* per channel (a single value is repeated) */
} attn_vit_config;

/* attn_vit_load: open a model directory (see above); weights are mmap'ed read-only and
 * used in place when stored as float32.
 * Errors: ATTN_E_IO (missing file, message names it), ATTN_E_FORMAT (bad JSON or config
 * value, e.g. hidden_size not a multiple of num_attention_heads, an image_mean of the wrong
 * length), ATTN_E_SHAPE (a weight's shape disagrees with config.json: the message names
 * the weight, e.g. "vit.embeddings.position_embeddings: expected [1, 17, 96], got
 * [1, 50, 96]"), ATTN_E_INVALID (missing weight), ATTN_E_UNSUPPORTED (another model_type,
 * an unknown hidden_act). */
int attn_vit_load(attn_vit **out, const char *model_dir);

/* attn_vit_free: release the model (NULL-safe). */
void attn_vit_free(attn_vit *m);

/* attn_vit_get_config: borrowed, valid until attn_vit_free (NULL for NULL). */
const attn_vit_config *attn_vit_get_config(const attn_vit *m);

/* attn_vit_label: id2label[i] of config.json, or "LABEL_i" when absent; NULL when i is
 * outside 0..n_labels-1. Borrowed. */
const char *attn_vit_label(const attn_vit *m, int64_t i);

/* attn_vit_preprocess: the model's input for one image, as ViTImageProcessor prepares it:
 * convert to the model's channel count (attn_image_convert: grey -> RGB by repeating,
 * RGB -> grey by BT.601 luma), resize to size.height x size.width when do_resize and
 * `keep_size` is 0 (attn_image_resize; pixman bilinear — see attn_image.h for how it
 * differs from PIL), then x = (p · rescale_factor − mean[c]) / std[c] in float32.
 *   pixels  [C, H, W] float32 output, capacity `cap` floats; *height and *width receive H, W
 *           (the resize size, or the image's own size with keep_size)
 * Errors: ATTN_E_INVALID (NULL, empty image), ATTN_E_RANGE (cap too small: the message gives
 * the size needed), ATTN_E_NOMEM. */
int attn_vit_preprocess(const attn_vit *m, float *pixels, int64_t cap, int64_t *height, int64_t *width,
                        const attn_image *img, int keep_size);

/* Optional outputs of attn_vit_forward (any pointer may be NULL). T = 1 + gh·gw tokens. */
typedef struct {
    float *last_hidden;   /* [B, T, E] after the final LayerNorm (last_hidden_state) */
    float *hidden_states; /* [n_layers + 1, B, T, E]: embeddings, then each layer's output
                             (before the final LayerNorm), as output_hidden_states=True */
    float *attentions;    /* [n_layers, B, H, T, T] softmax weights (output_attentions=True) */
} attn_vit_extra;

/* attn_vit_forward: the model on a batch of preprocessed images.
 *   logits  [B, n_labels] float32, or NULL (required NULL-or-not: NULL is allowed for any model)
 *   pixels  [B, C, height, width] float32 (attn_vit_preprocess's output)
 * height and width need not be the model's image size: the patch grid is gh = height / P_h,
 * gw = width / P_w (a remainder of pixels at the bottom / right is ignored, as the strided
 * convolution does), and when it differs from the model's grid the position embeddings of
 * the patches are resampled to gh x gw by bicubic convolution (Keys 1981, a = -0.75, input
 * sample positions (i + 0.5)·in/out − 0.5, edges clamped), which is what transformers does
 * with interpolate_pos_encoding=True (torch.nn.functional.interpolate, mode "bicubic",
 * align_corners=False); the CLS position is kept.
 * Matches ViTForImageClassification(pixel_values, interpolate_pos_encoding=...).logits.
 * Errors: ATTN_E_INVALID (NULL pixels or arena, B < 1), ATTN_E_RANGE (an image smaller
 * than one patch: "image of 3 x 3 pixels is smaller than a 7 x 7 patch"; a grid of more
 * than 65536 patches), ATTN_E_NOMEM, errors of the layers. */
int attn_vit_forward(const attn_vit *m, float *logits, attn_vit_extra *extra, const float *pixels, int64_t B,
                     int64_t height, int64_t width, attn_arena *arena);

/* attn_vit_tokens: T = 1 + (height / P_h) · (width / P_w) for an input of that size (0 when
 * smaller than a patch or m is NULL). */
int64_t attn_vit_tokens(const attn_vit *m, int64_t height, int64_t width);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_VIT_H */
