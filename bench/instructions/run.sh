#!/bin/sh
# Instruction counts (valgrind callgrind) of two attn binaries on the same verbs, one thread:
# a refactoring's "speed not worse" check that holds on a busy machine (counts do not depend
# on load; they do not see memory stalls, so wall-clock runs in bench/llama, bench/seq2seq,
# bench/minilm stay the real measure on a quiet machine).
#   sh bench/instructions/run.sh OLD_ATTN NEW_ATTN [whisper]
# OpenBLAS is pinned to its Haswell kernels (valgrind runs no AVX-512) and to one thread, so
# the CLI does not re-execute itself under valgrind. Needs ../shared/models and models/ (setup).
set -eu
cd "$(dirname "$0")/../.."
old=$1 new=$2
S=../shared/models
count() { # bin args...
  b=$1; shift
  OPENBLAS_NUM_THREADS=1 OPENBLAS_CORETYPE=Haswell OMP_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null \
    "$b" "$@" 2>&1 >/dev/null | sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
row() { # name args...
  n=$1; shift
  a=$(count "$old" "$@"); b=$(count "$new" "$@")
  awk -v n="$n" -v a="$a" -v b="$b" 'BEGIN { printf "| %s | %d | %d | %+.2f%% |\n", n, a, b, 100 * (b - a) / a }'
}
echo "| verb | old instructions | new instructions | change |"
echo "|---|---:|---:|---:|"
row "generate stories260K, 64 tokens" generate --model $S/stories260K/stories260K.bin --tokenizer $S/stories260K/tok512.bin -p "Once upon a time" -n 64 --temp 0 --threads 1
row "generate SmolLM2 Q4_1, 8 tokens" generate --model models/SmolLM2-135M-Instruct.Q4_1.gguf -p "The capital of France is" -n 8 --temp 0 --threads 1
row "translate aren int8, beam 4, 2 lines" translate --model $S/aren-transliteration-int8 --beam 4 --threads 1 "ا ل ق ا ه ر ة" "م ر ح ب ا"
row "translate aren float32, beam 4, 2 lines" translate --model $S/aren-transliteration --beam 4 --threads 1 "ا ل ق ا ه ر ة" "م ر ح ب ا"
row "embed MiniLM, 2 sentences" embed --model models/all-MiniLM-L6-v2 --threads 1 "A man is playing a guitar." "Someone plays an instrument."
row "classify ViT, 1 image" classify --model models/vit-fashion-mnist --threads 1 tests/fixtures/vit/test_0_ankle_boot.png
if [ "${3:-}" = whisper ]; then
  row "transcribe Whisper tiny.en, Front_Center.wav, beam 5" transcribe --model models/whisper-tiny.en --threads 1 /usr/share/sounds/alsa/Front_Center.wav
fi
