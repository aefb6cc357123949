#!/bin/sh
# SmolLM2-135M-Instruct Q4_1: attn vs llama.cpp (llama-cpp-python) on the same GGUF, same prompt
# ids (256, from bench/llama/prompt.txt tokenized by attn), prefill 256 tokens and decode 128
# tokens (greedy), 1 and 2 threads, best of R runs (default 3), interleaved in one run; attn's
# peak RSS (getrusage) beside the file size and its KV cache.
# Run it alone:  flock -x /work/bench.lock sh bench/llama/run.sh
# Needs: make; scripts/fetch_smollm2.sh; a python with llama-cpp-python (PY, default /work/venv/bin/python).
set -eu
cd "$(dirname "$0")/../.."
PY=${PY:-/work/venv/bin/python}
R=${R:-3}
MODEL=${MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
make -s build/libattn.a >/dev/null
mkdir -p build/bench
LIBS="$(pkg-config --libs libcjson libutf8proc libpng pangocairo cairo sndfile samplerate fftw3f libjpeg zlib pixman-1 libpcre2-8) -lopenblas -lm"
cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iinclude -Isrc bench/llama/bench_llama.c build/libattn.a $LIBS -o build/bench/bench_llama
# 256 prompt ids: the prompt text tokenized by attn (the same ids go to both)
cc -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iinclude bench/llama/tok_ids.c build/libattn.a $LIBS -o build/bench/tok_ids
build/bench/tok_ids $MODEL < bench/llama/prompt.txt > build/bench/prompt_ids.txt
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs, flags: $(grep -o -w 'avx512f\|avx512_vnni\|avx2\|fma\|f16c\|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "$(date -u '+%F %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in 1 2; do
  OMP_NUM_THREADS=$t build/bench/bench_llama $MODEL build/bench/prompt_ids.txt $t 256 128 $R
  $PY bench/llama/llamacpp_bench.py $MODEL build/bench/prompt_ids.txt $t 256 128 $R
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
