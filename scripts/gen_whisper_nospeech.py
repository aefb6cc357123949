#!/usr/bin/env python3
"""Reference no-speech probabilities, scores and average log-probabilities of CTranslate2 4.8.5 /
faster-whisper 1.2.1 for Whisper tiny.en, used by tests/test_whisper.c (faster-whisper's
no-speech skip and temperature fallback, attn_whisper_decode). Writes tests/fixtures/whisper/:

  silence_1s.wav   1 s of digital silence (16 kHz mono 16-bit zeros)
  noise_1s.wav     1 s of low-level white noise (16-bit samples uniform in [-32, 32], about
                   -60 dBFS; numpy default_rng(0))
  nospeech.txt     "NAME PROMPT no_speech_prob score n_tokens avg_logprob" per input and prompt:
                   ctranslate2.models.Whisper.generate(beam_size=5, return_scores=True,
                   return_no_speech_prob=True, suppress_tokens=[-1], suppress_blank=True) on the
                   features zero-padded to 3000 frames; PROMPT "nots" = [50257, 50362], "ts" =
                   [50257]; avg_logprob as faster-whisper's generate_with_fallback recovers it:
                   score * n_tokens ** length_penalty(1) / (n_tokens + 1). Features: the
                   NAME.mel.npy fixtures (scripts/gen_whisper_fixtures.py) for the alsa / espeak
                   files; FeatureExtractor()(decode_audio(wav)) minus the last frame for the two
                   WAVs above.
                   Lines "fw NAME MODE n_segments": faster-whisper WhisperModel.transcribe with
                   its defaults (beam 5, temperatures 0.0..1.0, thresholds 0.6 / -1.0 / 2.4),
                   MODE "nots" (without_timestamps=True) or "ts".
Run: /work/venv/bin/python scripts/gen_whisper_nospeech.py [model_dir]
"""
import os
import sys
import wave

import ctranslate2
import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.audio import decode_audio, pad_or_trim
from faster_whisper.feature_extractor import FeatureExtractor

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "whisper-tiny.en")
OUT = os.path.join(ROOT, "tests", "fixtures", "whisper")
MELS = ["Front_Center", "Noise", "espeak_1", "espeak_3"]


def write_wav(path, samples):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(samples.astype("<i2").tobytes())


def main():
    os.makedirs(OUT, exist_ok=True)
    wavs = {"silence_1s": np.zeros(16000, np.int16),
            "noise_1s": np.random.default_rng(0).integers(-32, 33, 16000).astype(np.int16)}
    for name, s in wavs.items():
        write_wav(os.path.join(OUT, name + ".wav"), s)
    fe = FeatureExtractor()
    feats = {}
    for name in MELS:
        feats[name] = np.load(os.path.join(OUT, name + ".mel.npy"))
    for name in wavs:
        f = fe(decode_audio(os.path.join(OUT, name + ".wav")))
        feats[name] = f[:, : f.shape[-1] - 1].astype(np.float32)
    model = ctranslate2.models.Whisper(MODEL, device="cpu", inter_threads=1, intra_threads=2)
    lines = []
    for name, content in feats.items():
        window = pad_or_trim(content[:, :3000])
        sv = ctranslate2.StorageView.from_array(np.ascontiguousarray(window[None].astype(np.float32)))
        for pname, prompt in (("nots", [50257, 50362]), ("ts", [50257])):
            r = model.generate(sv, [prompt], beam_size=5, return_scores=True, return_no_speech_prob=True,
                               suppress_tokens=[-1], suppress_blank=True)[0]
            n = len(r.sequences_ids[0])
            avg = r.scores[0] * (n ** 1.0) / (n + 1)
            lines.append(f"{name} {pname} {r.no_speech_prob:.9g} {r.scores[0]:.9g} {n} {avg:.9g}")
    del model
    fw = WhisperModel(MODEL, device="cpu", compute_type="float32", cpu_threads=2)
    for name in wavs:
        for mode in ("nots", "ts"):
            segs, _ = fw.transcribe(os.path.join(OUT, name + ".wav"), without_timestamps=(mode == "nots"))
            lines.append(f"fw {name} {mode} {len(list(segs))}")
    with open(os.path.join(OUT, "nospeech.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
