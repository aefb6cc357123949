"""cffi ABI-mode declarations of libattn and the loader that finds libattn.so.

The declarations below are copied by hand from include/*.h (only the functions the Python
package calls). ABI mode: nothing is compiled; the shared library is opened with dlopen.
cffi releases the GIL for the duration of every C call made through `lib`, so attn's
kernels run while other Python threads keep going.

Where libattn.so is looked for, in order:
  1. the path in the environment variable ATTN_LIBRARY (an error if it cannot be opened);
  2. next to this file (a wheel built by `pip install ./python` ships it there);
  3. the repository's build/libattn.so when the package is used from a source checkout;
  4. the system's library path (`make install`), as "libattn.so".
"""
from __future__ import annotations

import os
from typing import List

from cffi import FFI

CDEF = r"""
typedef enum {
    ATTN_OK = 0, ATTN_E_INVALID = -1, ATTN_E_SHAPE = -2, ATTN_E_DTYPE = -3, ATTN_E_NOMEM = -4,
    ATTN_E_IO = -5, ATTN_E_FORMAT = -6, ATTN_E_RANGE = -7, ATTN_E_UNSUPPORTED = -8
} attn_status;
const char *attn_status_str(int status);
const char *attn_last_error(void);
void attn_clear_error(void);

typedef enum {
    ATTN_F32 = 0, ATTN_F16 = 1, ATTN_BF16 = 2, ATTN_BOOL = 3, ATTN_I32 = 4, ATTN_I64 = 5, ATTN_F64 = 6
} attn_dtype;

typedef struct {
    void *data;
    attn_dtype dtype;
    int ndim;
    int64_t shape[8];
    int64_t stride[8];
} attn_tensor;

int attn_set_num_threads(int n);
int attn_get_num_threads(void);
const char *attn_version(void);

typedef enum { ATTN_IMPL_DEFAULT = 0, ATTN_IMPL_REFERENCE = 1, ATTN_IMPL_FUSED = 2 } attn_impl;
typedef struct {
    const attn_tensor *mask;
    int is_causal;
    int64_t window;
    const int64_t *key_lengths;
    int has_scale;
    float scale;
    int n_threads;
    attn_impl impl;
    attn_tensor *lse;
} attn_sdpa_params;
int attn_sdpa(attn_tensor *out, attn_tensor *weights, const attn_tensor *q, const attn_tensor *k,
              const attn_tensor *v, const attn_sdpa_params *p);
int attn_sdpa_backward(attn_tensor *dq, attn_tensor *dk, attn_tensor *dv, const attn_tensor *q,
                       const attn_tensor *k, const attn_tensor *v, const attn_tensor *out,
                       const attn_tensor *lse, const attn_tensor *dout, const attn_sdpa_params *p);

typedef enum {
    ATTN_VARIANT_EXACT = 0, ATTN_VARIANT_LINEAR = 1, ATTN_VARIANT_PERFORMER = 2,
    ATTN_VARIANT_SLIDING = 3, ATTN_VARIANT_LONGFORMER = 4, ATTN_VARIANT_BIGBIRD = 5
} attn_variant_kind;
typedef struct {
    attn_variant_kind kind;
    int is_causal;
    int64_t window;
    int64_t n_global;
    int64_t block;
    int64_t global_blocks;
    int64_t random_blocks;
    int64_t features;
    uint64_t seed;
    const attn_tensor *mask;
    const attn_tensor *key_padding_mask;
    const int64_t *key_lengths;
    int has_scale;
    float scale;
    int n_threads;
} attn_variant_params;
attn_variant_params attn_variant_params_default(attn_variant_kind kind);
const char *attn_variant_name(attn_variant_kind kind);
int attn_variant_from_name(const char *name, attn_variant_kind *kind);
int attn_variant_attention(attn_tensor *out, attn_tensor *weights, const attn_tensor *q,
                           const attn_tensor *k, const attn_tensor *v, const attn_variant_params *p);

int attn_layernorm(attn_tensor *out, const attn_tensor *x, const attn_tensor *gamma,
                   const attn_tensor *beta, float eps);
int attn_rmsnorm(attn_tensor *out, const attn_tensor *x, const attn_tensor *weight, float eps);
int attn_softmax(attn_tensor *out, const attn_tensor *x);
int attn_pe_sinusoidal(attn_tensor *out, int64_t offset);
typedef enum { ATTN_ROPE_HALF = 0, ATTN_ROPE_INTERLEAVED = 1 } attn_rope_layout;
int attn_rope(attn_tensor *x, int64_t offset, float theta, int64_t rotary_dim, attn_rope_layout layout);

typedef struct attn_tokenizer attn_tokenizer;
int attn_tokenizer_encode(const attn_tokenizer *tok, const char *text, size_t text_len,
                          int add_special, int64_t max_len, int32_t *ids, int64_t *n_ids,
                          int64_t cap, int64_t *offsets);
const char *attn_tokenizer_id_to_token(const attn_tokenizer *tok, int64_t id);

typedef struct attn_bert attn_bert;
typedef enum { ATTN_POOL_MEAN = 0, ATTN_POOL_CLS = 1, ATTN_POOL_MAX = 2 } attn_pooling;
typedef enum {
    ATTN_ACT_RELU = 0, ATTN_ACT_GELU = 1, ATTN_ACT_GELU_TANH = 2, ATTN_ACT_SILU = 3, ATTN_ACT_IDENTITY = 4
} attn_activation;
typedef struct {
    int64_t d_model;
    int64_t n_layers;
    int64_t n_heads;
    int64_t d_ff;
    int64_t vocab_size;
    int64_t max_positions;
    int64_t type_vocab_size;
    float eps;
    int64_t max_seq_len;
    attn_pooling pooling;
    int normalize;
    attn_activation act;
} attn_bert_config;
typedef struct {
    float *hidden_states;
    float *attentions;
} attn_bert_extra;
typedef struct attn_arena_block attn_arena_block;
typedef struct {
    attn_arena_block *head;
    size_t block_bytes;
    size_t used_bytes;
    size_t peak_bytes;
} attn_arena;
int attn_arena_init(attn_arena *a, size_t block_bytes);
void attn_arena_free(attn_arena *a);

int attn_bert_load(attn_bert **out, const char *model_dir);
void attn_bert_free(attn_bert *m);
const attn_bert_config *attn_bert_get_config(const attn_bert *m);
const attn_tokenizer *attn_bert_tokenizer(const attn_bert *m);
int attn_bert_forward(const attn_bert *m, float *last_hidden, attn_bert_extra *extra, const int32_t *ids,
                      const int64_t *lengths, int64_t B, int64_t L, attn_arena *arena);
int attn_bert_embed(const attn_bert *m, float *out, const char *const *texts, int64_t n, int64_t batch_size,
                    void (*progress)(int64_t done, int64_t total, void *user), void *user);
int attn_bert_embed_n(const attn_bert *m, float *out, const char *const *texts, const int64_t *lengths, int64_t n,
                      int64_t batch_size, void (*progress)(int64_t done, int64_t total, void *user), void *user);

typedef enum { ATTN_LP_POWER = 0, ATTN_LP_GNMT = 1 } attn_length_penalty_form;
typedef int (*attn_logits_hook)(void *ctx, float *logits, int64_t n_rows, int64_t vocab, int64_t step,
                                const int32_t *const *seqs, int64_t seq_len, const int64_t *row_item);
typedef struct {
    int64_t beam_size;
    int64_t n_best;
    float length_penalty;
    attn_length_penalty_form length_penalty_form;
    int64_t max_length;
    int64_t min_length;
    const int32_t *prefix;
    int64_t prefix_len;
    int return_prefix;
    const int32_t *end_ids;
    int64_t n_end;
    int include_end;
    const int32_t *suppress;
    int64_t n_suppress;
    const int32_t *suppress_begin;
    int64_t n_suppress_begin;
    const int32_t *const *suppress_seqs;
    const int64_t *suppress_seq_lens;
    int64_t n_suppress_seqs;
    float repetition_penalty;
    int return_attention;
    attn_logits_hook hook;
    void *hook_ctx;
    int length_excludes_end;
} attn_decode_opts;
attn_decode_opts attn_decode_opts_default(void);

typedef struct attn_translator attn_translator;
typedef struct {
    int64_t d_model, n_heads, d_ff;
    int64_t n_encoder_layers, n_decoder_layers;
    int64_t source_vocab, target_vocab;
    int pre_norm;
    attn_activation act;
    int learned_positions;
    int int8;
    char spec[64];
} attn_translator_config;
int attn_translator_load(attn_translator **out, const char *dir);
void attn_translator_free(attn_translator *m);
const attn_translator_config *attn_translator_get_config(const attn_translator *m);
int32_t attn_translator_target_id(const attn_translator *m, const char *token);
int32_t attn_translator_source_id(const attn_translator *m, const char *token);
const char *attn_translator_target_token(const attn_translator *m, int32_t id);
typedef struct {
    char **tokens;
    int64_t len;
    float score;
    float *attention;
} attn_translation_hyp;
typedef struct {
    attn_translation_hyp *hyps;
    int64_t n;
    char **src_tokens;
    int64_t src_len;
} attn_translation;
typedef struct {
    attn_decode_opts decode;
    int64_t max_input_length;
    int64_t max_batch_size;
    int replace_unknowns;
} attn_translate_opts;
attn_translate_opts attn_translate_opts_default(void);
int attn_translate(attn_translator *m, attn_translation *out, const char *const *sources, int64_t n,
                   const attn_translate_opts *o);
void attn_translations_free(attn_translation *t, int64_t n);

void free(void *p);
int attn_audio_load(float **samples, int64_t *n, const char *path, int rate);
int attn_audio_resample(float **out, int64_t *n_out, const float *in, int64_t n, int rate_in, int rate_out);
int attn_whisper_log_mel(float **out, int64_t *n_frames, const float *samples, int64_t n);
typedef struct attn_whisper attn_whisper;
typedef struct {
    int64_t d_model, n_heads, n_encoder_layers, n_decoder_layers, d_ff, vocab_size;
    int64_t n_audio_ctx, n_text_ctx;
    int32_t sot, eot, no_timestamps, timestamp_begin;
    int32_t no_speech;
} attn_whisper_config;
int attn_whisper_load(attn_whisper **out, const char *dir);
void attn_whisper_free(attn_whisper *m);
const attn_whisper_config *attn_whisper_get_config(const attn_whisper *m);
typedef struct {
    int64_t beam_size;
    int timestamps;
    const float *temperatures;
    int64_t n_temperatures;
    int64_t best_of;
    float no_speech_threshold;
    float log_prob_threshold;
    float compression_ratio_threshold;
    uint64_t seed;
    int condition_on_previous_text;
} attn_whisper_opts;
attn_whisper_opts attn_whisper_opts_default(void);
int attn_whisper_generate(attn_whisper *m, int32_t **ids, int64_t *n, float *score, const float *mel,
                          const attn_whisper_opts *o);
typedef struct {
    int32_t *ids;
    int64_t n;
    float score;
    float avg_logprob;
    float no_speech_prob;
    float compression_ratio;
    float temperature;
    int no_speech;
} attn_whisper_decoding;
int attn_whisper_decode(attn_whisper *m, attn_whisper_decoding *out, const float *mel, const attn_whisper_opts *o);
void attn_whisper_decoding_free(attn_whisper_decoding *d);
char *attn_whisper_text(const attn_whisper *m, const int32_t *ids, int64_t n);
typedef struct {
    double start, end;
    char *text;
    float avg_logprob, no_speech_prob, compression_ratio, temperature;
} attn_whisper_segment;
typedef struct {
    attn_whisper_segment *segments;
    int64_t n_segments;
    int32_t *ids;
    int64_t n_ids;
    char *text;
} attn_whisper_result;
int attn_whisper_transcribe(attn_whisper *m, attn_whisper_result *out, const float *samples, int64_t n,
                            const attn_whisper_opts *o);
void attn_whisper_result_free(attn_whisper_result *r);

typedef enum { ATTN_BPE_BYTE_LEVEL = 0, ATTN_BPE_SENTENCEPIECE = 1 } attn_bpe_kind;
typedef struct attn_bpe attn_bpe;
int attn_bpe_load_llama2c(attn_bpe **out, const char *path, int64_t vocab_size);
void attn_bpe_free(attn_bpe *t);
int attn_bpe_encode(const attn_bpe *t, const char *text, size_t len, int parse_special, int32_t *ids, int64_t cap,
                    int64_t *n_ids);
int64_t attn_bpe_vocab_size(const attn_bpe *t);
int32_t attn_bpe_bos_id(const attn_bpe *t);
int32_t attn_bpe_eos_id(const attn_bpe *t);
int32_t attn_bpe_token_to_id(const attn_bpe *t, const char *token);
const char *attn_bpe_id_to_token(const attn_bpe *t, int32_t id, size_t *len);
typedef struct {
    unsigned char pend[8];
    int n_pend;
    int32_t prev_id;
    int render_special;
} attn_bpe_stream;
void attn_bpe_stream_init(attn_bpe_stream *s, int render_special);
int attn_bpe_stream_push(const attn_bpe *t, attn_bpe_stream *s, int32_t id, char *out, size_t cap, size_t *len);
int attn_bpe_stream_flush(attn_bpe_stream *s, char *out, size_t cap, size_t *len);
size_t attn_bpe_max_token_bytes(const attn_bpe *t);
int attn_bpe_decode(const attn_bpe *t, const int32_t *ids, int64_t n, int render_special, char *out, size_t cap,
                    size_t *len);

typedef struct {
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
    float repetition_penalty;
    int64_t repeat_last_n;
    uint64_t seed;
} attn_sampler_params;
attn_sampler_params attn_sampler_params_default(void);
typedef struct attn_sampler attn_sampler;
int attn_sampler_create(attn_sampler **out, const attn_sampler_params *p, int64_t V);
void attn_sampler_free(attn_sampler *s);
int attn_sampler_sample(attn_sampler *s, int32_t *token, float *logits, const int32_t *history, int64_t n_history);

typedef struct {
    int64_t dim;
    int64_t hidden_dim;
    int64_t n_layers;
    int64_t n_heads;
    int64_t n_kv_heads;
    int64_t head_dim;
    int64_t vocab_size;
    int64_t context;
    float rope_theta;
    float norm_eps;
    int tied_output;
    int32_t bos_id, eos_id, eot_id;
    int add_bos;
    const char *arch;
    const char *weight_type;
} attn_llama_config;
typedef struct attn_llama attn_llama;
int attn_llama_load_llama2c(attn_llama **out, const char *path);
int attn_llama_load_gguf(attn_llama **out, const char *path);
void attn_llama_free(attn_llama *m);
const attn_llama_config *attn_llama_get_config(const attn_llama *m);
const attn_bpe *attn_llama_tokenizer(const attn_llama *m);
const char *attn_llama_chat_template(const attn_llama *m);
typedef struct attn_llama_state attn_llama_state;
int attn_llama_state_create(attn_llama_state **out, const attn_llama *m, int64_t max_len);
void attn_llama_state_free(attn_llama_state *s);
void attn_llama_state_reset(attn_llama_state *s);
int64_t attn_llama_state_len(const attn_llama_state *s);
int64_t attn_llama_state_max_len(const attn_llama_state *s);
int attn_llama_forward(attn_llama_state *s, float *logits, const int32_t *tokens, int64_t n, int all_logits, int n_threads);
typedef struct {
    attn_sampler_params sampling;
    int64_t max_tokens;
    const char *const *stop;
    int64_t n_stop;
    int n_threads;
    void (*progress)(int64_t done, int64_t total, void *user);
    void *progress_user;
} attn_generate_opts;
attn_generate_opts attn_generate_opts_default(void);
typedef struct {
    int64_t n_prompt, n_gen;
    double t_prompt, t_gen;
    int finish;
    int32_t pending_token;
} attn_generate_stats;
typedef struct {
    int32_t *ids;
    int64_t n, cap;
} attn_token_list;
void attn_token_list_free(attn_token_list *t);
typedef struct attn_generation attn_generation;
int attn_generation_start(attn_generation **out, attn_llama_state *st, const attn_bpe *tok, const int32_t *prompt, int64_t n_prompt,
                          const attn_generate_opts *o, attn_token_list *history);
int attn_generation_next(attn_generation *g, const char **text, size_t *len, int32_t *token);
const attn_generate_stats *attn_generation_stats(const attn_generation *g);
void attn_generation_free(attn_generation *g);
typedef struct {
    const char *role;
    const char *content;
} attn_chat_message;
int attn_chat_template_system(char **out, const char *tmpl, int force_chatml);
int attn_chat_format(char **out, const attn_chat_message *messages, int64_t n, const char *default_system);

typedef struct {
    uint8_t *data;
    int64_t width;
    int64_t height;
    int channels;
} attn_image;
int attn_image_load(attn_image *out, const char *path);
void attn_image_free(attn_image *img);
typedef struct attn_vit attn_vit;
typedef struct {
    int64_t image_h, image_w;
    int64_t patch_h, patch_w;
    int64_t channels;
    int64_t d_model;
    int64_t n_layers;
    int64_t n_heads;
    int64_t d_ff;
    float eps;
    attn_activation act;
    int qkv_bias;
    int64_t n_labels;
    int do_resize;
    int64_t resize_h, resize_w;
    int do_rescale;
    float rescale_factor;
    int do_normalize;
    float mean[3], std[3];
} attn_vit_config;
int attn_vit_load(attn_vit **out, const char *model_dir);
void attn_vit_free(attn_vit *m);
const attn_vit_config *attn_vit_get_config(const attn_vit *m);
const char *attn_vit_label(const attn_vit *m, int64_t i);
int attn_vit_preprocess(const attn_vit *m, float *pixels, int64_t cap, int64_t *height, int64_t *width,
                        const attn_image *img, int keep_size);
typedef struct {
    float *last_hidden;
    float *hidden_states;
    float *attentions;
} attn_vit_extra;
int attn_vit_forward(const attn_vit *m, float *logits, attn_vit_extra *extra, const float *pixels, int64_t B,
                     int64_t height, int64_t width, attn_arena *arena);
int64_t attn_vit_tokens(const attn_vit *m, int64_t height, int64_t width);
int attn_attention_rollout(float *out, const float *attentions, int64_t L, int64_t B, int64_t H, int64_t T);
"""

ffi = FFI()
ffi.cdef(CDEF)

_HERE = os.path.dirname(os.path.abspath(__file__))


def candidate_paths() -> List[str]:
    """The paths tried, in order, when ATTN_LIBRARY is not set."""
    return [
        os.path.join(_HERE, "libattn.so"),
        os.path.normpath(os.path.join(_HERE, "..", "..", "build", "libattn.so")),
        "libattn.so",
    ]


def _load():
    env = os.environ.get("ATTN_LIBRARY")
    if env:
        try:
            return ffi.dlopen(os.path.abspath(env) if os.sep in env else env), env
        except OSError as e:
            raise ImportError(f"attn: cannot load libattn from ATTN_LIBRARY={env!r}: {e}") from e
    errors = []
    for path in candidate_paths():
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path}: not found")
            continue
        try:
            return ffi.dlopen(path), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError(
        "attn: libattn.so not found. Install the package with `pip install ./python` from the attn "
        "repository, or run `make lib` there, or set ATTN_LIBRARY to the library's path. Tried:\n  "
        + "\n  ".join(errors))


lib, library_path = _load()
