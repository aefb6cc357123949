#!/bin/sh
# bench/serve/soak.sh: attn serve under DURATION seconds (default 600) of mixed requests from
# WORKERS clients (bench/serve/soak.py: streamed chat, completions, embeddings, tokenize,
# transcriptions, bad JSON, unknown models, clients that leave mid-stream), then SIGTERM. Passes
# when every request got its expected status, RSS grew less than 10% after the warm-up, no slot
# or queue entry was left busy, and the server exited 0.
#   DURATION=30 sh bench/serve/soak.sh      # a short check
set -eu
cd "$(dirname "$0")/../.."
PY=${PY:-python3}
DURATION=${DURATION:-600}
WORKERS=${WORKERS:-4}
THREADS=${THREADS:-2}
OUT=${OUT:-build/bench/serve}
mkdir -p "$OUT"
[ -x build/attn ] || make -j2 >/dev/null
W=""
if [ -d models/whisper-tiny.en ] && [ -f /usr/share/sounds/alsa/Front_Center.wav ]; then
  W="--model models/whisper-tiny.en"
fi
P=$($PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# shellcheck disable=SC2086
./build/attn serve --model models/SmolLM2-135M-Instruct.Q4_1.gguf --model ../shared/models/stories260K \
  --model models/all-MiniLM-L6-v2 $W --port "$P" --threads "$THREADS" --parallel 4 --queue 64 2> "$OUT/soak_serve.log" &
SPID=$!
trap 'kill $SPID 2>/dev/null || true' EXIT
i=0
until $PY -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$P/health', timeout=2)" 2>/dev/null; do
  i=$((i + 1)); [ "$i" -le 240 ] || { echo "attn serve did not come up"; cat "$OUT/soak_serve.log"; exit 1; }; sleep 0.5
done
rc=0
$PY bench/serve/soak.py --base "http://127.0.0.1:$P" --pid "$SPID" --duration "$DURATION" --workers "$WORKERS" \
  ${W:+--whisper whisper-tiny.en --wav /usr/share/sounds/alsa/Front_Center.wav} || rc=1
kill -TERM $SPID
if wait $SPID; then echo "soak: attn serve exited 0 on SIGTERM"; else echo "soak: attn serve exited $? on SIGTERM"; rc=1; fi
trap - EXIT
exit $rc
