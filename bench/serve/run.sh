#!/bin/sh
# bench/serve: attn serve against llama-cpp-python's OpenAI server on the same GGUF
# (models/SmolLM2-135M-Instruct.Q4_1.gguf) with the same threads, one run: streamed greedy chat
# at 1, 4, 8 and 16 concurrent clients (aggregate generated tokens/s, time to first token and
# request latency p50 / p99, failed requests; bench/serve/load.py), and embeddings/s of attn
# serve (all-MiniLM-L6-v2). Then the ratios the issue targets: attn at 8 clients / at 1 client
# (>= 3x) and attn / llama-cpp-python at 8 clients (>= 1.5x).
#   THREADS=2 PARALLEL=16 REQUESTS=4 MAX_TOKENS=128 sh bench/serve/run.sh
#   ROUNDS=6 CONC=1,8 LLAMA_PY=/nonexistent sh bench/serve/run.sh   (8/1 of six rounds in turn)
# llama-cpp-python's server is taken from LLAMA_PY (a python with `llama-cpp-python[server]`;
# `python3 -m venv /work/llama-venv && /work/llama-venv/bin/pip install 'llama-cpp-python[server]'`
# builds llama.cpp, about 10 minutes); without it only attn is measured. Its server runs with
# --interrupt_requests False: by default a new request cancels the stream in progress (which then
# ends early with [DONE] and no finish_reason), so concurrent clients got a few chunks each. Run it on a quiet
# machine (no other builds or tests): the numbers are meaningless otherwise.
set -eu
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
LLAMA_PY=${LLAMA_PY:-/work/llama-venv/bin/python}
THREADS=${THREADS:-2}
PARALLEL=${PARALLEL:-16}
REQUESTS=${REQUESTS:-4}
MAX_TOKENS=${MAX_TOKENS:-128}
CONC=${CONC:-1,4,8,16}
ROUNDS=${ROUNDS:-1} # attn's chat phases this many times in turn, each round's 8/1 and their median
GGUF=models/SmolLM2-135M-Instruct.Q4_1.gguf
NAME=SmolLM2-135M-Instruct.Q4_1
OUT=${OUT:-build/bench/serve}
mkdir -p "$OUT"
[ -x build/attn ] || make -j2 >/dev/null
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs; threads $THREADS"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# a free loopback port
port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# wait (at most $2 s) until $1 answers 200
wait_up() {
  i=0
  until $PY -c "import sys, urllib.request; urllib.request.urlopen('$1', timeout=2)" 2>/dev/null; do
    i=$((i + 1)); [ "$i" -le $(($2 * 2)) ] || { echo "server at $1 did not come up"; return 1; }; sleep 0.5
  done
}

P=$(port)
./build/attn serve --model "$GGUF" --model models/all-MiniLM-L6-v2 --port "$P" --threads "$THREADS" --parallel "$PARALLEL" \
  --ctx 2048 --queue 256 2> "$OUT/attn_serve.log" &
SPID=$!
trap 'kill $SPID 2>/dev/null || true; [ -n "${LPID:-}" ] && kill $LPID 2>/dev/null || true' EXIT
wait_up "http://127.0.0.1:$P/health" 120
$PY bench/serve/load.py --base "http://127.0.0.1:$P" --model "$NAME" --embed-model all-MiniLM-L6-v2 --concurrency "$CONC" \
  --requests "$REQUESTS" --max-tokens "$MAX_TOKENS" --rounds "$ROUNDS" --label attn --json "$OUT/attn.json" --server-pid $SPID || echo "attn: some requests failed"
echo "attn serve peak RSS: $(sed -n 's/^VmHWM:[[:space:]]*//p' /proc/$SPID/status)"
kill -TERM $SPID; wait $SPID || true

if "$LLAMA_PY" -c "import llama_cpp.server" 2>/dev/null; then
  L=$(port)
  "$LLAMA_PY" -m llama_cpp.server --model "$GGUF" --model_alias "$NAME" --host 127.0.0.1 --port "$L" \
    --n_threads "$THREADS" --n_threads_batch "$THREADS" --n_ctx 2048 --interrupt_requests False > "$OUT/llama_server.log" 2>&1 &
  LPID=$!
  wait_up "http://127.0.0.1:$L/v1/models" 300
  $PY bench/serve/load.py --base "http://127.0.0.1:$L" --model "$NAME" --concurrency "$CONC" --requests "$REQUESTS" \
    --max-tokens "$MAX_TOKENS" --label llama-cpp-python --json "$OUT/llama.json" --server-pid $LPID || echo "llama-cpp-python: some requests failed"
  kill -TERM $LPID; wait $LPID || true
  LPID=
  $PY bench/serve/load.py --compare "$OUT/attn.json" "$OUT/llama.json"
else
  echo "llama-cpp-python's server is not installed at LLAMA_PY=$LLAMA_PY: attn only"
  $PY bench/serve/load.py --compare "$OUT/attn.json"
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
