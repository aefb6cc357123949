#!/bin/sh
# MiniLM embedding throughput: `attn embed` vs sentence-transformers (PyTorch) in one run,
# 1000 sentences of 20-60 word pieces, batch 32, 1 and 2 threads, best of 3.
# Needs: make, scripts/fetch_minilm.sh, pip install sentence-transformers tokenizers.
set -eu
cd "$(dirname "$0")/../.."
[ -f bench/minilm/sentences.txt ] || python3 bench/minilm/make_sentences.py
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $(date -u +%F)"
echo "| threads | attn embed (sentences/s) | sentence-transformers $(python3 -c 'import sentence_transformers,torch;print(sentence_transformers.__version__+", torch "+torch.__version__)') (sentences/s) | ratio |"
echo "| --- | --- | --- | --- |"
for t in 1 2; do
  best=0
  for r in 1 2 3; do
    s=$(date +%s.%N)
    build/attn embed --model models/all-MiniLM-L6-v2 --batch 32 --threads $t -o /tmp/attn_bench_emb.npy < bench/minilm/sentences.txt
    e=$(date +%s.%N)
    best=$(python3 -c "print(max($best, 1000/($e-$s)))")
  done
  st=$(OMP_NUM_THREADS=$t python3 bench/minilm/st_embed.py $t 3 2>/dev/null | tail -n 1)
  python3 -c "print(f'| $t | {$best:.1f} | {$st:.1f} | {$best/$st:.2f}x |')"
done
