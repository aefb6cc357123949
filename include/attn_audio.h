/*
 * attn_audio.h — audio input for speech models: decoding (WAV, FLAC, OGG/Vorbis, ... through
 * libsndfile), downmix to mono, resampling (libsamplerate, SRC_SINC_BEST_QUALITY), and the
 * log-mel spectrogram of OpenAI Whisper (Radford et al. 2022) as faster-whisper's
 * FeatureExtractor computes it (FFT by FFTW).
 */
#ifndef ATTN_AUDIO_H
#define ATTN_AUDIO_H

#include "attn_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* attn_audio_load: decode `path`, average the channels to mono and resample to `rate` Hz.
 *   *samples: malloc'ed float32 [*n] in [-1, 1] (free with free()); *n may be 0 (empty file).
 * `path` "-" is standard input (descriptor 0 stays open).
 * Errors: ATTN_E_IO (a directory; an empty file; standard input closed, a directory or empty; cannot
 * open, or not an audio file libsndfile knows — the message says which), ATTN_E_FORMAT (zero channels / sample rate, read error, non-finite samples, a truncated WAV:
 * its header announces more audio than the file or stream holds — both durations named; a WAV file
 * whose data chunk announces less than the file holds, more bytes that are not WAV chunks following
 * it than the announced audio — the sizes named),
 * ATTN_E_INVALID (rate <= 0, NULL), ATTN_E_NOMEM. */
int attn_audio_load(float **samples, int64_t *n, const char *path, int rate);

/* attn_audio_resample: out = in resampled from rate_in to rate_out (libsamplerate
 * SRC_SINC_BEST_QUALITY); *out malloc'ed with *n_out samples. rate_in == rate_out copies.
 * Errors: ATTN_E_INVALID, ATTN_E_NOMEM, ATTN_E_FORMAT (libsamplerate failure). */
int attn_audio_resample(float **out, int64_t *n_out, const float *in, int64_t n, int rate_in, int rate_out);

/* Whisper front end constants: 16 kHz, n_fft 400, hop 160, 80 mel bins, 3000 frames per 30 s. */
#define ATTN_WHISPER_RATE 16000
#define ATTN_WHISPER_N_FFT 400
#define ATTN_WHISPER_HOP 160
#define ATTN_WHISPER_N_MELS 80
#define ATTN_WHISPER_FRAMES 3000

/* attn_whisper_log_mel: the log-mel spectrogram of 16 kHz mono audio, as faster-whisper's
 * FeatureExtractor(waveform, padding=160): 160 zero samples appended, STFT with a periodic Hann
 * window of 400, hop 160, centred with reflect padding (the last frame dropped), power spectrum,
 * 80 Slaney-scale mel filters (librosa's mel_filters with norm="slaney"), log10(max(x, 1e-10)),
 * clamped to max - 8, then (x + 4) / 4.
 *   out: malloc'ed float32 [80, *n_frames] (row-major: mel bin, frame), *n_frames = (n + 160) / 160.
 * Computed in float64 from float32 input. Errors: ATTN_E_INVALID (NULL, n < 0, a NaN or infinite sample),
 * ATTN_E_RANGE (samples so large, ~1e19, that the float32 power spectrum overflows), ATTN_E_NOMEM. */
int attn_whisper_log_mel(float **out, int64_t *n_frames, const float *samples, int64_t n);

#ifdef __cplusplus
}
#endif
#endif /* ATTN_AUDIO_H */
