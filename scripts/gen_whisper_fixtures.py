#!/usr/bin/env python3
"""Reference outputs of CTranslate2 4.8.5 / faster-whisper for Whisper tiny.en, used by
tests/test_whisper.c. Writes tests/fixtures/whisper/:

  espeak_{1,2,3}.wav     three sentences spoken by espeak-ng (made by this script if missing:
                         espeak-ng -w FILE "TEXT"; 22050 Hz mono)
  NAME.mel.npy           faster-whisper's features of the file's content frames: audio decoded
                         and resampled to 16 kHz by faster_whisper.decode_audio, FeatureExtractor()
                         (padding 160), the last frame dropped as transcribe() does -> [80, T]
  tokens.txt             per file and mode: "NAME MODE id id ..." — ctranslate2.models.Whisper
                         .generate on NAME.mel.npy zero-padded to 3000 frames (faster-whisper's
                         pad_or_trim), prompt [50257, 50362] (modes greedy, beam5) or [50257]
                         (mode beam5_ts, timestamp rules), suppress_tokens [-1], suppress_blank
  text.txt               "NAME<TAB>text" of the beam5 tokens (tokenizer.json decode)
  mel_in.npy, mel_ref.npy  the first 16000 samples of Front_Center (decode_audio) and
                         FeatureExtractor()(those samples) [80, 100]
Run: /work/venv/bin/python scripts/gen_whisper_fixtures.py [model_dir]
"""
import os
import subprocess
import sys

import ctranslate2
import numpy as np
import tokenizers
from faster_whisper.audio import decode_audio, pad_or_trim
from faster_whisper.feature_extractor import FeatureExtractor

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "models", "whisper-tiny.en")
OUT = os.path.join(ROOT, "tests", "fixtures", "whisper")
ALSA = ["Front_Center", "Front_Left", "Front_Right", "Noise", "Rear_Center", "Rear_Left", "Rear_Right", "Side_Left", "Side_Right"]
ESPEAK = {
    "espeak_1": "The quick brown fox jumps over the lazy dog.",
    "espeak_2": "Attention is all you need.",
    "espeak_3": "Please call Stella and ask her to bring these things with her from the store.",
}


def main():
    os.makedirs(OUT, exist_ok=True)
    files = [(n, f"/usr/share/sounds/alsa/{n}.wav") for n in ALSA]
    for n, text in ESPEAK.items():
        p = os.path.join(OUT, n + ".wav")
        if not os.path.exists(p):
            subprocess.run(["espeak-ng", "-w", p, text], check=True)
        files.append((n, p))
    fe = FeatureExtractor()
    model = ctranslate2.models.Whisper(MODEL, device="cpu", inter_threads=1, intra_threads=2)
    tok = tokenizers.Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    modes = {"greedy": ([50257, 50362], 1), "beam5": ([50257, 50362], 5), "beam5_ts": ([50257], 5)}
    with open(os.path.join(OUT, "tokens.txt"), "w") as ft, open(os.path.join(OUT, "text.txt"), "w") as fx:
        for name, path in files:
            audio = decode_audio(path)
            feats = fe(audio)
            content = feats[:, : feats.shape[-1] - 1].astype(np.float32)
            np.save(os.path.join(OUT, name + ".mel.npy"), content)
            window = pad_or_trim(content[:, :3000])
            sv = ctranslate2.StorageView.from_array(np.ascontiguousarray(window[None]))
            for mode, (prompt, beam) in modes.items():
                r = model.generate(sv, [prompt], beam_size=beam, suppress_tokens=[-1], suppress_blank=True)[0]
                ids = r.sequences_ids[0]
                ft.write(f"{name} {mode} " + " ".join(map(str, ids)) + "\n")
                if mode == "beam5":
                    fx.write(name + "\t" + tok.decode([i for i in ids if i < 50257]).strip() + "\n")
    audio = decode_audio(files[0][1])[:16000].astype(np.float32)
    np.save(os.path.join(OUT, "mel_in.npy"), audio)
    np.save(os.path.join(OUT, "mel_ref.npy"), fe(audio).astype(np.float32))
    print("wrote", OUT)


if __name__ == "__main__":
    main()
