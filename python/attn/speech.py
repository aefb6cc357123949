"""Speech recognition with OpenAI Whisper (CTranslate2 WhisperSpec models), shaped like
faster-whisper's WhisperModel."""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any, List, Tuple, Union

import numpy as np

from ._core import check_float, check_int, raise_for
from ._ffi import ffi, lib

_libc = ffi.dlopen(None)  # free() for the buffers libattn malloc's

Audio = Union[str, "os.PathLike[str]", np.ndarray]
SAMPLE_RATE = 16000


@dataclass
class Segment:
    """A piece of the transcript: start and end in seconds, and its text; the statistics of
    its 30 s window's decoding, as faster-whisper's Segment has them (avg_logprob,
    no_speech_prob, compression_ratio, temperature)."""

    start: float
    end: float
    text: str
    avg_logprob: float = 0.0
    no_speech_prob: float = 0.0
    compression_ratio: float = 0.0
    temperature: float = 0.0


@dataclass
class Transcription:
    """The result of Whisper.transcribe: the whole text, its segments (one per 30 s window,
    or one per timestamp pair with timestamps=True) and every generated token id."""

    text: str
    segments: List[Segment] = field(default_factory=list)
    tokens: List[int] = field(default_factory=list)


def _floats(ptr: Any, n: int) -> np.ndarray:
    """A NumPy copy of n floats malloc'ed by libattn, then freed."""
    try:
        return np.frombuffer(ffi.buffer(ptr, 4 * n), dtype=np.float32).copy() if n else np.zeros(0, np.float32)
    finally:
        _libc.free(ptr)


class Whisper:
    """OpenAI Whisper (Radford et al. 2022) from a CTranslate2 WhisperSpec model directory
    (model.bin, vocabulary.txt, config.json; e.g. tiny.en), run by libattn
    (include/attn_whisper.h), decoding as CTranslate2 / faster-whisper do: greedy or beam
    search, config.json's suppressed tokens, optional timestamps.

    ``Whisper(model_dir).transcribe("speech.wav")`` returns a Transcription (text and
    segments). Audio: a file libsndfile reads (WAV, FLAC, OGG, ...; mixed to mono and
    resampled to 16 kHz) or a float32 array of mono samples (sample_rate= gives its rate).
    Calls on one model are serialised by a lock; the GIL is released while it runs.

    Raises (constructor): OSError (missing files), ValueError (not a WhisperSpec model).
    """

    def __init__(self, model_dir: Union[str, "os.PathLike[str]"]):
        path = os.fsencode(os.fspath(model_dir))
        if b"\x00" in path:
            raise ValueError("Whisper: model_dir contains a NUL character")
        pp = ffi.new("attn_whisper **")
        raise_for(lib.attn_whisper_load(pp, path))
        self._m = ffi.gc(pp[0], lib.attn_whisper_free)
        c = lib.attn_whisper_get_config(self._m)
        self.model_dir = os.fspath(model_dir)
        self.config = {k: int(getattr(c, k)) for k in (
            "d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "vocab_size", "n_audio_ctx",
            "n_text_ctx", "sot", "eot", "no_timestamps", "timestamp_begin")}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        c = self.config
        return (f"Whisper({self.model_dir!r}: {c['n_encoder_layers']}+{c['n_decoder_layers']} layers, "
                f"E={c['d_model']}, vocab {c['vocab_size']})")

    # ------------------------------------------------------------ audio

    @staticmethod
    def load_audio(audio: Audio, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
        """16 kHz mono float32 samples of a file (decoded by libsndfile, channels averaged,
        resampled with libsamplerate's best sinc) or of an array of mono samples at
        sample_rate. Raises OSError (unreadable / not audio), TypeError, ValueError."""
        n = ffi.new("int64_t *")
        out = ffi.new("float **")
        if isinstance(audio, (str, os.PathLike)):
            p = os.fsencode(os.fspath(audio))
            if b"\x00" in p:
                raise ValueError("load_audio: path contains a NUL character")
            raise_for(lib.attn_audio_load(out, n, p, SAMPLE_RATE))
            return _floats(out[0], int(n[0]))
        a = np.asarray(audio)
        if a.dtype != np.float32:
            raise TypeError(f"load_audio: samples must be float32, got {a.dtype}")
        if a.ndim != 1:
            raise ValueError(f"load_audio: samples must be mono [n], got shape {a.shape}")
        sr = check_int(sample_rate, "sample_rate", "load_audio", minimum=1)
        if not np.all(np.isfinite(a)):
            raise ValueError("load_audio: samples hold NaN or inf")
        if sr == SAMPLE_RATE:
            return np.ascontiguousarray(a)
        a = np.ascontiguousarray(a)
        raise_for(lib.attn_audio_resample(out, n, ffi.cast("float *", a.ctypes.data), a.size, sr, SAMPLE_RATE))
        return _floats(out[0], int(n[0]))

    @staticmethod
    def log_mel(samples: np.ndarray) -> np.ndarray:
        """Whisper's log-mel spectrogram float32 ``[80, frames]`` of 16 kHz mono samples, as
        faster-whisper's FeatureExtractor computes it (frames = (n + 160) // 160)."""
        a = np.ascontiguousarray(samples)
        if a.dtype != np.float32 or a.ndim != 1:
            raise TypeError(f"log_mel: samples must be float32 [n], got {a.dtype} {a.shape}")
        out, frames = ffi.new("float **"), ffi.new("int64_t *")
        raise_for(lib.attn_whisper_log_mel(out, frames, ffi.cast("float *", a.ctypes.data), a.size))
        return _floats(out[0], 80 * int(frames[0])).reshape(80, int(frames[0]))

    # ------------------------------------------------------------ decoding

    def _opts(self, beam_size: int, timestamps: bool, fn: str) -> Any:
        o = ffi.new("attn_whisper_opts *")
        o.beam_size = check_int(beam_size, "beam_size", fn, minimum=1)
        o.timestamps = 1 if timestamps else 0
        return o

    def generate(self, mel: np.ndarray, beam_size: int = 5, timestamps: bool = False) -> Tuple[List[int], float]:
        """Decode one 30 s window of features (float32 ``[80, 3000]``; shorter inputs are
        zero-padded, as faster-whisper pads them). Returns (token ids without the prompt and
        end token, length-normalised log-probability)."""
        m = np.asarray(mel)
        if m.dtype != np.float32 or m.ndim != 2 or m.shape[0] != 80 or m.shape[1] > 3000:
            raise ValueError(f"generate: mel must be float32 [80, <= 3000], got {m.dtype} {m.shape}")
        win = np.zeros((80, 3000), np.float32)
        win[:, : m.shape[1]] = m
        o = self._opts(beam_size, timestamps, "generate")
        ids, n, score = ffi.new("int32_t **"), ffi.new("int64_t *"), ffi.new("float *")
        with self._lock:
            raise_for(lib.attn_whisper_generate(self._m, ids, n, score, ffi.cast("float *", win.ctypes.data), o))
        try:
            return [int(ids[0][i]) for i in range(n[0])], float(score[0])
        finally:
            _libc.free(ids[0])

    def decode(self, ids: List[int]) -> str:
        """The text of token ids (special and timestamp tokens skipped)."""
        arr = ffi.new("int32_t[]", [check_int(i, "token id", "decode") for i in ids] or [0])
        p = lib.attn_whisper_text(self._m, arr, len(ids))
        if p == ffi.NULL:
            raise MemoryError("decode: out of memory")
        try:
            return ffi.string(p).decode("utf-8", "replace")
        finally:
            _libc.free(p)

    def transcribe(self, audio: Audio, beam_size: int = 5, timestamps: bool = False,
                   sample_rate: int = SAMPLE_RATE,
                   temperature: Union[float, Tuple[float, ...], List[float]] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
                   best_of: int = 5, no_speech_threshold: Union[float, None] = 0.6,
                   log_prob_threshold: Union[float, None] = -1.0,
                   compression_ratio_threshold: Union[float, None] = 2.4, seed: int = 0,
                   condition_on_previous_text: bool = True) -> Transcription:
        """Transcribe audio in successive 30 s windows with faster-whisper 1.2.1's defaults
        (beam 5, temperature fallback, no-speech skip; include/attn_whisper.h): a window is
        decoded again at the next temperature (best_of samples) while its compression ratio
        > compression_ratio_threshold or its avg_logprob < log_prob_threshold; a window whose
        no-speech probability > no_speech_threshold and avg_logprob <= log_prob_threshold gives
        no text, so silence gives text "" and no segments, as in faster-whisper.

        Args:
            audio: a path (WAV, FLAC, OGG, ... through libsndfile) or float32 mono samples.
            beam_size: >= 1 (1 = greedy).
            timestamps: segment the text at Whisper's timestamp tokens (OpenAI's rules).
            sample_rate: the rate of an array of samples (resampled to 16 kHz).
            temperature: a temperature or the temperatures tried in order (each >= 0).
            best_of: samples per temperature > 0 (1..64).
            no_speech_threshold, log_prob_threshold, compression_ratio_threshold: as
                faster-whisper's; None turns a rule off.
            seed: the sampler's seed at temperatures > 0.
            condition_on_previous_text: prompt each 30 s window with the previous windows'
                text (faster-whisper's default; reset after a window decoded at a
                temperature > 0.5).
        Returns: Transcription(text, segments, tokens).
        Audio of 1 to 159 samples (under 10 ms) gives text "" and no segments, as
        faster-whisper; empty audio is a ValueError.
        Raises: OSError (unreadable / not audio), ValueError (empty audio, bad options),
        TypeError (samples not float32, condition_on_previous_text not a bool)."""
        samples = self.load_audio(audio, sample_rate)
        o = self._opts(beam_size, timestamps, "transcribe")
        if isinstance(temperature, (str, bytes)) or not isinstance(temperature, (int, float, np.integer, np.floating, list, tuple)):
            raise TypeError(f"transcribe: temperature must be a number or a list / tuple of numbers, got {type(temperature).__name__}")
        items = temperature if isinstance(temperature, (list, tuple)) else [temperature]
        temps = [check_float(t, "temperature", "transcribe") for t in items]
        if not temps:
            raise ValueError("transcribe: temperature must hold at least one value")
        t_arr = ffi.new("float[]", temps)
        o.temperatures = t_arr
        o.n_temperatures = len(temps)
        o.best_of = check_int(best_of, "best_of", "transcribe", minimum=1)
        o.no_speech_threshold = 1.0 if no_speech_threshold is None else check_float(no_speech_threshold, "no_speech_threshold", "transcribe")
        o.log_prob_threshold = float("-inf") if log_prob_threshold is None else check_float(log_prob_threshold, "log_prob_threshold", "transcribe")
        o.compression_ratio_threshold = (float("inf") if compression_ratio_threshold is None else
                                         check_float(compression_ratio_threshold, "compression_ratio_threshold", "transcribe"))
        o.seed = check_int(seed, "seed", "transcribe", minimum=0)
        if not isinstance(condition_on_previous_text, (bool, np.bool_)):
            raise TypeError("transcribe: condition_on_previous_text must be a bool, got "
                            f"{type(condition_on_previous_text).__name__}")
        o.condition_on_previous_text = 1 if condition_on_previous_text else 0
        res = ffi.new("attn_whisper_result *")
        with self._lock:
            raise_for(lib.attn_whisper_transcribe(self._m, res, ffi.cast("float *", samples.ctypes.data),
                                                  samples.size, o))
        try:
            s = lambda p: ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""
            segs = [Segment(float(g.start), float(g.end), s(g.text), float(g.avg_logprob), float(g.no_speech_prob),
                            float(g.compression_ratio), float(g.temperature)) for g in res.segments[0:res.n_segments]]
            return Transcription(s(res.text), segs, [int(res.ids[i]) for i in range(res.n_ids)])
        finally:
            lib.attn_whisper_result_free(res)
