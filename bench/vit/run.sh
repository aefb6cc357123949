#!/bin/sh
# bench/vit: images/s of `attn classify --eval` against transformers (PyTorch) on the 10,000
# Fashion-MNIST test images, batch 64, with 1 and 2 threads, side by side in one run.
# Both sides time preprocessing (uint8 -> normalised float32) + forward; best of REPEAT passes.
# Needs the Python venv with torch + transformers (never in CI):
#   PY=/work/venv/bin/python REPEAT=3 sh bench/vit/run.sh
set -eu
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
M=${M:-models/vit-fashion-mnist}
D=/usr/share/datasets/fashion-mnist
REPEAT=${REPEAT:-1}
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 1 2; do
  best=""
  for r in $(seq "$REPEAT"); do
    out=$(./build/attn classify --model $M --eval $D/t10k-images-idx3-ubyte.gz $D/t10k-labels-idx1-ubyte.gz \
          --batch 64 --threads $t 2>&1)
    s=$(printf '%s\n' "$out" | sed -n 's/.*(\([0-9]*\) images\/s.*/\1/p')
    acc=$(printf '%s\n' "$out" | grep '^accuracy:')
    if [ -z "$best" ] || [ "$s" -gt "$best" ]; then best=$s; fi
  done
  echo "attn: $best images/s (best of $REPEAT), $t threads, batch 64, $acc"
  $PY bench/vit/torch_vit.py --model "$M" --threads $t --batch 64 --repeat "$REPEAT" 2>/dev/null
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
