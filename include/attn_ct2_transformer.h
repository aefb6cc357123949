/*
 * attn_ct2_transformer.h — CTranslate2 Transformer encoder-decoders (OpenNMT / Marian / Fairseq
 * conversions: spec "TransformerBase", "TransformerBig", "TransformerSpec") and translation
 * with greedy or beam search (attn_beam.h).
 *
 * A model directory holds model.bin (attn_ct2.h) and the vocabularies
 * source_vocabulary.txt + target_vocabulary.txt (or shared_vocabulary.txt), one token per
 * line; "<unk>" is appended when missing (as CTranslate2 does), and each vocabulary must have
 * as many entries as its embedding has rows. Decoding starts from "<s>" and stops at "</s>".
 *
 * Architecture (Vaswani et al. 2017; pre-norm as in CTranslate2's TransformerBase):
 *   source ids [B, Ls] -> embeddings * sqrt(d_model) + positions -> N encoder layers
 *   (self-attention with fused QKV [3E, E], FFN) -> final LayerNorm (pre-norm);
 *   decoder: embeddings * sqrt(d_model) + positions -> N layers (causal self-attention with a
 *   KV cache, cross-attention whose keys/values [2E, E] are projected once per source,
 *   FFN) -> LayerNorm -> projection to target logits.
 *   Sinusoidal positions are CTranslate2's: [sin | cos] halves, timescale
 *   10000^(-i / (E/2 - 1)), position p (0-based) encoded as p + 1. LayerNorm epsilon 1e-5.
 * Weights: float32, float16, bfloat16 (converted to float32 at load) or int8 with a per-row
 * scale. An int8 linear layer computes as CTranslate2 does on x86: each input row is
 * quantised with scale 127 / max|x| (values truncated after a +128 shift, i.e. floored),
 * multiplied exactly in integers, and rescaled: y = acc / (scale_x * scale_w) + bias.
 * With int8 weights the attention itself also follows CTranslate2 4.8.5's CPU arithmetic (the
 * summation order oneDNN's sgemm uses for each shape, its vectorised exp and softmax), so that
 * outputs and scores equal CTranslate2's on an x86 AVX2 machine for sources of up to 144
 * tokens (tests/test_translate.c: 275 words, greedy and beam search, scores within 1e-5;
 * scripts/probe_ct2_attention.c); float models use attn's SDPA kernel.
 */
#ifndef ATTN_CT2_TRANSFORMER_H
#define ATTN_CT2_TRANSFORMER_H

#include "attn_beam.h"
#include "attn_ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_translator attn_translator;

typedef struct {
    int64_t d_model, n_heads, d_ff;
    int64_t n_encoder_layers, n_decoder_layers;
    int64_t source_vocab, target_vocab;
    int pre_norm;              /* 1 pre-norm, 0 post-norm */
    attn_activation act;       /* FFN activation */
    int learned_positions;     /* 0: sinusoidal */
    int int8;                  /* 1 when the linear weights are int8 */
    char spec[64];
} attn_translator_config;

/* attn_translator_load: load a model directory (see above). *out is NULL on failure.
 * Errors: ATTN_E_IO (missing files), ATTN_E_FORMAT (bad model.bin, unknown spec, missing or
 * mis-shaped variable, vocabulary size different from the embedding rows), ATTN_E_NOMEM. */
int attn_translator_load(attn_translator **out, const char *dir);
/* attn_translator_free: release everything (NULL-safe). */
void attn_translator_free(attn_translator *m);
/* attn_translator_get_config: the model's hyper-parameters. */
const attn_translator_config *attn_translator_get_config(const attn_translator *m);

/* attn_translator_target_id / _source_id: the id of a vocabulary token, -1 when absent. */
int32_t attn_translator_target_id(const attn_translator *m, const char *token);
/* attn_translator_source_id: the source-vocabulary id of token, -1 when absent. */
int32_t attn_translator_source_id(const attn_translator *m, const char *token);
/* attn_translator_target_token: the token of a target id ("" out of range). */
const char *attn_translator_target_token(const attn_translator *m, int32_t id);

typedef struct {
    char **tokens;     /* [len] target tokens (owned) */
    int64_t len;
    float score;       /* log-probability normalised by the length penalty */
    float *attention;  /* [len, src_len] cross-attention (rows sum to 1) or NULL */
} attn_translation_hyp;

typedef struct {
    attn_translation_hyp *hyps; /* best first, n <= n_best */
    int64_t n;
    char **src_tokens;          /* [src_len] the source as tokenised */
    int64_t src_len;
} attn_translation;

/* Options of attn_translate: the decoding options and those of the translation itself. */
typedef struct {
    attn_decode_opts decode;  /* decoding (end_ids NULL -> "</s>"); ids refer to the target vocabulary */
    int64_t max_input_length; /* >= 0: sources longer than this are truncated to their first
                                 max_input_length tokens before encoding (0 = no limit;
                                 CTranslate2's max_input_length, default 1024) */
    int64_t max_batch_size;   /* >= 0: the sources are sorted from the longest to the shortest and
                                 translated in batches of this many (0 = one batch), as
                                 CTranslate2's translate_batch does with max_batch_size; results
                                 stay in input order (default 0) */
    int replace_unknowns;     /* 1: an output <unk> is replaced by the source token with the
                                 highest cross-attention (CTranslate2's replace_unknowns; default 0) */
} attn_translate_opts;

/* attn_translate_opts_default: attn_decode_opts_default() decoding, max_input_length 1024,
 * max_batch_size 0, replace_unknowns 0. */
attn_translate_opts attn_translate_opts_default(void);

/* attn_translate: translate n sources (each a string of space-separated tokens; unknown
 * tokens become <unk>; an empty source gives n_best empty hypotheses with score 0, as
 * CTranslate2 does; a source must be valid UTF-8). With
 * o->max_batch_size > 0 the sources are sorted from the longest to the shortest (ties in the
 * order CTranslate2's sort leaves them) and translated in batches of that many, as
 * CTranslate2's translate_batch(max_batch_size=N) does; 0 = one batch. Results are in input
 * order either way; results can depend on the batching in their last bits (scores; rarely a
 * token), float32 and int8 alike, as CTranslate2's do: an item's padded length is part of the
 * attention arithmetic and the products' summation order depends on the batch's row count
 * (aren float32 words.txt: --batch 1 vs 32 differ in the 6th decimal of 79 of 550 scores).
 * o->decode: decoding options (end_ids NULL -> "</s>"); ids refer to the target vocabulary.
 * o->replace_unknowns: an output <unk> is replaced by the source token with the highest
 * cross-attention (CTranslate2's replace_unknowns). The returned cross-attention is that of
 * the last decoder layer's first head (CTranslate2's default alignment). A source longer than
 * o->max_input_length tokens (> 0) is truncated to its first max_input_length tokens, as
 * CTranslate2's translate_batch does (checked with CTranslate2 4.8.5: the result, attention
 * width included, equals that of the truncated source); src_tokens / src_len are then the
 * truncated source. out[n] is written; free it with attn_translations_free.
 * Errors: those of attn_decode (bad options), ATTN_E_INVALID (NULL, max_input_length < 0,
 * max_batch_size < 0, a source that is not UTF-8), ATTN_E_NOMEM. */
int attn_translate(attn_translator *m, attn_translation *out, const char *const *sources, int64_t n,
                   const attn_translate_opts *o);

/* attn_translate_progress: attn_translate, calling progress(done, total = n, user) after each
 * batch (o->max_batch_size sources; one call at the end when there is one batch), as
 * attn_bert_embed does; progress may be NULL. Same results and errors. */
int attn_translate_progress(attn_translator *m, attn_translation *out, const char *const *sources, int64_t n, const attn_translate_opts *o,
                            void (*progress)(int64_t done, int64_t total, void *user), void *user);

/* attn_translations_free: free n results (NULL-safe). */
void attn_translations_free(attn_translation *t, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_CT2_TRANSFORMER_H */
