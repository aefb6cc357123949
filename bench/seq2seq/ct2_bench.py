"""CTranslate2 / faster-whisper side of bench/seq2seq (same inputs and repetitions as
bench_seq2seq.c). Usage: ct2_bench.py THREADS REPEATS WORDS_FILE WAV..."""
import sys
import time

import ctranslate2
import numpy as np
from faster_whisper import WhisperModel
from faster_whisper.audio import decode_audio, pad_or_trim
from faster_whisper.feature_extractor import FeatureExtractor

threads, reps, words_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
words = [l.rstrip("\n").split() for l in open(words_file, encoding="utf-8")]
for tag, path in (("f32", "../shared/models/aren-transliteration"), ("int8", "../shared/models/aren-transliteration-int8")):
    t = ctranslate2.Translator(path, device="cpu", inter_threads=1, intra_threads=threads)
    for beam in (1, 4):
        best = 1e30
        for _ in range(reps):
            t0 = time.perf_counter()
            for i in range(0, len(words), 32):
                t.translate_batch(words[i:i + 32], beam_size=beam, max_batch_size=32)
            best = min(best, time.perf_counter() - t0)
        print(f"aren {tag} beam{beam} {len(words) / best:.1f}")
    del t
model = ctranslate2.models.Whisper("models/whisper-tiny.en", device="cpu", inter_threads=1, intra_threads=threads)
fw = WhisperModel("models/whisper-tiny.en", device="cpu", cpu_threads=threads, compute_type="float32")
fe = FeatureExtractor()
for path in sys.argv[4:]:
    audio = decode_audio(path)
    best = best_fw = 1e30
    for _ in range(reps):
        t0 = time.perf_counter()
        feats = fe(audio)
        window = pad_or_trim(feats[:, : feats.shape[-1] - 1][:, :3000])
        model.generate(ctranslate2.StorageView.from_array(np.ascontiguousarray(window[None])), [[50257, 50362]], beam_size=5)
        best = min(best, time.perf_counter() - t0)
        t0 = time.perf_counter()
        segs, _ = fw.transcribe(audio, beam_size=5, without_timestamps=True, temperature=0.0, vad_filter=False)
        list(segs)
        best_fw = min(best_fw, time.perf_counter() - t0)
    print(f"whisper {path} {len(audio) / 16000:.3f} {best:.3f} {best_fw:.3f}")
