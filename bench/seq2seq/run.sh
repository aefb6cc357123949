#!/bin/sh
# seq2seq benchmark: attn vs CTranslate2 4.8.5 (and faster-whisper) in one run, same inputs,
# 1 and 2 threads, best of 3. aren-transliteration: 1100 words (tests/fixtures/aren/words.txt
# four times), float32 and int8 models, batch 32, greedy and beam 4 -> words/s. Whisper tiny.en float32: seconds per
# file for features + encoder + beam-5 decoding (audio decoding excluded), real-time factor.
# Needs: make, the models (scripts/setup.sh), /work/venv with ctranslate2 and faster-whisper.
set -eu
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/work/venv/bin/python}
make -s -j2 lib
cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iinclude bench/seq2seq/bench_seq2seq.c build/libattn.a \
   $(pkg-config --libs libcjson libutf8proc libpng freetype2 sndfile samplerate fftw3f libpcre2-8 zlib) -lopenblas -lm -fopenmp -lpthread \
   -o build/bench_seq2seq
W=build/bench_words.txt
for i in 1 2 3 4; do cat tests/fixtures/aren/words.txt; done > $W
WAVS="/usr/share/sounds/alsa/Front_Center.wav tests/fixtures/whisper/espeak_3.wav"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs, $(grep -o -w -m1 'avx512f\|avx2' /proc/cpuinfo | head -n1) path; load $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +'%F %H:%M UTC')"
for t in 1 2; do
  OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell} build/bench_seq2seq $t 3 $W $WAVS > build/bench_attn_$t.txt
  OMP_NUM_THREADS=$t $PY bench/seq2seq/ct2_bench.py $t 3 $W $WAVS 2>/dev/null > build/bench_ct2_$t.txt
done
$PY - <<'PYEOF'
rows = {}
for t in (1, 2):
    a = [l.split() for l in open(f"build/bench_attn_{t}.txt")]
    c = [l.split() for l in open(f"build/bench_ct2_{t}.txt")]
    for x, y in zip(a, c):
        if x[0] == "aren":
            print(f"| aren {x[1]} {x[2]} words/s | {t} | {float(x[3]):.0f} | {float(y[3]):.0f} | {float(x[3]) / float(y[3]):.2f}x |")
        else:
            d = float(x[2])
            print(f"| whisper {x[1].split('/')[-1]} ({d:.2f} s) s/file | {t} | {float(x[3]):.2f} (RTF {float(x[3]) / d:.2f}) | {float(y[3]):.2f} / fw {float(y[4]):.2f} | {float(y[3]) / float(x[3]):.2f}x |")
PYEOF
