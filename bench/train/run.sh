#!/bin/sh
# bench/train: training throughput (images/s) of `attn train vit` against PyTorch + transformers
# (scripts/train_vit.py) on the same model and data, side by side in one run: the Fashion-MNIST
# ViT (patch 7, hidden 96, 4 layers, 3 heads, MLP 192, 306,826 parameters), batch 128, one epoch
# over the first LIMIT training images, AdamW + warm-up/cosine + clipping at 1.0 on both sides, no
# augmentation (attn: --pad 0 --no-flip; train_vit.py without --flip), with 1 and 2 threads.
# attn's number is its summary line's images/s (training steps only, evaluation excluded);
# PyTorch's is LIMIT / the epoch's seconds in training.json (training only; its final test-set
# evaluation is not timed). Needs the venv with torch + transformers (never in CI); run it on a
# quiet machine:
#   PY=/work/venv-peers/bin/python LIMIT=12800 sh bench/train/run.sh
set -eu
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
D=/usr/share/datasets/fashion-mnist
LIMIT=${LIMIT:-12800}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 1 2; do
  out=$(./build/attn train vit --train $D/train-images-idx3-ubyte.gz $D/train-labels-idx1-ubyte.gz \
        --limit "$LIMIT" --patch 7 --hidden 96 --layers 4 --heads 3 --mlp 192 --batch 128 --epochs 1 \
        --pad 0 --no-flip --seed 0 --threads $t --no-progress -o "$TMP/attn$t" 2>&1)
  a=$(printf '%s\n' "$out" | sed -n 's/.*, \([0-9.]*\) images\/s.*/\1/p')
  echo "attn:    $a images/s, $t threads, batch 128, $LIMIT images"
  $PY scripts/train_vit.py --epochs 1 --limit "$LIMIT" --threads $t --batch 128 --out "$TMP/torch$t" >/dev/null 2>&1
  p=$($PY -c "import json,sys; j=json.load(open('$TMP/torch$t/training.json')); print('%.1f' % ($LIMIT / j['epochs'][0]['seconds']))")
  echo "PyTorch: $p images/s, $t threads, batch 128, $LIMIT images"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
