#!/bin/sh
# SmolLM2-135M-Instruct Q4_1: attn vs llama.cpp (llama-cpp-python) on the same GGUF, same prompt
# ids (256, from bench/llama/prompt.txt tokenized by attn), prefill 256 tokens and decode 128
# tokens, 1 and 2 threads, best of 3, interleaved in one run. Prints a markdown table.
# Needs: make; scripts/fetch_smollm2.sh; a python with llama-cpp-python (PY, default /work/venv/bin/python).
set -eu
cd "$(dirname "$0")/../.."
PY=${PY:-/work/venv/bin/python}
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
make build/libattn.a build/attn >/dev/null
mkdir -p build/bench
cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iinclude -Isrc bench/llama/bench_llama.c build/libattn.a \
   $(pkg-config --libs libcjson libutf8proc libpng freetype2 libpcre2-8) -lopenblas -lm -o build/bench/bench_llama
# 256 prompt ids: the prompt text tokenized by attn (same ids for both)
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude -x c - build/libattn.a $(pkg-config --libs libcjson libutf8proc libpng freetype2 libpcre2-8) \
   -lopenblas -lm -fopenmp -o build/bench/tok_ids <<'C'
#include "attn_llama.h"
#include <stdio.h>
#include <stdlib.h>
int main(int c, char **v) { attn_llama *m; if (attn_llama_load_gguf(&m, v[1])) return 1; static char t[1 << 16];
  size_t n = fread(t, 1, sizeof t - 1, stdin); int32_t ids[8192]; int64_t k;
  if (attn_bpe_encode(attn_llama_tokenizer(m), t, n, 0, ids, 8192, &k)) return 1;
  for (int64_t i = 0; i < k; i++) printf("%d\n", ids[i]); return 0; }
C
build/bench/tok_ids $MODEL < bench/llama/prompt.txt > build/bench/prompt_ids.txt
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs, flags: $(grep -o -w 'avx512f\|avx512_vnni\|avx2\|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' '); $(date -u '+%F %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 1 2; do
  build/bench/bench_llama $MODEL build/bench/prompt_ids.txt $t 256 128 3
  $PY bench/llama/llamacpp_bench.py $MODEL build/bench/prompt_ids.txt $t 256 128 3
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
