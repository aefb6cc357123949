#!/usr/bin/env python3
"""Reference token ids of CTranslate2 4.8.5 for Whisper tiny.en on low-level noise, where its
timestamp rules decide the output (a timestamp after text must be later than the last one),
used by tests/test_whisper.c (test_timestamp_rule). The audio is made here and in the test from
the same generator, so no audio file is stored: NOISE_SECONDS s at 16 kHz of 16-bit samples
(x >> 11) % 197 - 98 of the xorshift64 sequence x ^= x << 13, x ^= x >> 7, x ^= x << 17 from
x = 88172645463325252 (about -50 dBFS), as float samples / 32768.
Features: faster-whisper's FeatureExtractor (the last frame dropped, zero-padded to 3000 frames
as transcribe() does). Writes tests/fixtures/whisper/noise_ts.txt: "noise MODE id ..." for
MODE greedy_ts and beam5_ts (prompt [50257], suppress_tokens [-1], suppress_blank, max_length 448).
Run: /work/venv/bin/python scripts/gen_whisper_ts_rule.py [model_dir]
"""
import os
import sys

import ctranslate2
import numpy as np
from faster_whisper.feature_extractor import FeatureExtractor

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "whisper-tiny.en")
OUT = os.path.join(ROOT, "tests", "fixtures", "whisper", "noise_ts.txt")
NOISE_SECONDS = 10
M64 = (1 << 64) - 1


def noise(n):
    x = 88172645463325252
    out = np.empty(n, dtype=np.float32)
    for i in range(n):
        x ^= (x << 13) & M64
        x ^= x >> 7
        x ^= (x << 17) & M64
        out[i] = np.float32(((x >> 11) % 197) - 98) / np.float32(32768.0)
    return out


def main():
    x = noise(16000 * NOISE_SECONDS)
    feats = FeatureExtractor()(x)[:, :-1]
    feats = np.pad(feats, ((0, 0), (0, 3000 - feats.shape[1]))).astype(np.float32)
    model = ctranslate2.models.Whisper(MODEL, device="cpu", intra_threads=1)
    lines = []
    for mode, beam in (("greedy_ts", 1), ("beam5_ts", 5)):
        r = model.generate(ctranslate2.StorageView.from_array(feats[None]), [[50257]], beam_size=beam, suppress_tokens=[-1],
                           suppress_blank=True, max_length=448)
        lines.append(f"noise {mode} " + " ".join(str(i) for i in r[0].sequences_ids[0]))
    with open(OUT, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
