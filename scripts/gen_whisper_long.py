#!/usr/bin/env python3
"""faster-whisper 1.2.1's transcripts of 34 s of speech (two 30 s windows) with and without
condition_on_previous_text, and of audio shorter than one hop, used by tests/test_whisper.c
(test_long_audio, test_short_audio) and python/tests/test_speech.py.

The audio: espeak_1, espeak_2, espeak_3 (tests/fixtures/whisper), the nine alsa WAVs
(/usr/share/sounds/alsa, Debian alsa-utils), espeak_1, espeak_2, espeak_3 again, each loaded
by attn's own attn_audio_load (libsndfile, libsamplerate to 16 kHz, through the Python package:
the test loads them the same way, so both sides decode identical samples) and followed by
4800 zero samples (0.3 s): 544726 samples, 34.05 s. faster-whisper's WhisperModel.transcribe
gets these samples as an array (beam_size 5, every other option at its default: temperature
fallback, no-speech skip, VAD off, word_timestamps off) on the CTranslate2 model
models/whisper-tiny.en, compute_type float32.
Writes tests/fixtures/whisper/long_prev.txt, one line per segment:
  MODE<TAB>START<TAB>END<TAB>TEXT<TAB>id id ...   (the segment's tokens, timestamps included)
MODE is ts0_cond1, ts0_cond0, ts1_cond1, ts1_cond0 (ts1: without_timestamps=False, cond1:
condition_on_previous_text=True); and lines "short<TAB>N<TAB>SEGMENTS" for N zero-ish samples
(a 440 Hz tone) of audio shorter than one hop and of one hop.
Run: ATTN_LIBRARY=build/libattn.so /path/to/venv/bin/python scripts/gen_whisper_long.py
(a venv with faster-whisper 1.2.1, ctranslate2 4.8.5, cffi, numpy).
"""
import os
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("ATTN_LIBRARY", os.path.join(ROOT, "build", "libattn.so"))
import attn  # noqa: E402
from faster_whisper import WhisperModel  # noqa: E402

MODEL = os.path.join(ROOT, "models", "whisper-tiny.en")
FIX = os.path.join(ROOT, "tests", "fixtures", "whisper")
ALSA = ["Front_Center", "Front_Left", "Front_Right", "Noise", "Rear_Center", "Rear_Left", "Rear_Right", "Side_Left", "Side_Right"]
ESPEAK = ["espeak_1", "espeak_2", "espeak_3"]
GAP = 4800


def long_audio():
    files = [os.path.join(FIX, n + ".wav") for n in ESPEAK] + [f"/usr/share/sounds/alsa/{n}.wav" for n in ALSA] + \
            [os.path.join(FIX, n + ".wav") for n in ESPEAK]
    parts = []
    for f in files:
        parts += [attn.Whisper.load_audio(f), np.zeros(GAP, np.float32)]
    return np.concatenate(parts).astype(np.float32)


def main():
    x = long_audio()
    print("audio:", x.size, "samples")
    m = WhisperModel(MODEL, device="cpu", compute_type="float32")
    with open(os.path.join(FIX, "long_prev.txt"), "w") as f:
        for ts in (0, 1):
            for cond in (1, 0):
                segs, _ = m.transcribe(x, beam_size=5, without_timestamps=not ts, condition_on_previous_text=bool(cond))
                for s in segs:
                    f.write(f"ts{ts}_cond{cond}\t{s.start:.2f}\t{s.end:.2f}\t{s.text}\t" + " ".join(map(str, s.tokens)) + "\n")
        t = np.arange(200, dtype=np.float32) / 16000
        for n in (0, 1, 96, 159, 160):
            a = (0.5 * np.sin(2 * np.pi * 440 * t[:n])).astype(np.float32)
            try:
                segs = list(m.transcribe(a, beam_size=5)[0])
                f.write(f"short\t{n}\t{len(segs)}\n")
            except Exception as e:  # noqa: BLE001 (recorded: faster-whisper's answer)
                f.write(f"short\t{n}\terror {type(e).__name__}\n")
    print("wrote", os.path.join(FIX, "long_prev.txt"))


if __name__ == "__main__":
    main()
