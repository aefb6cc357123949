#!/bin/sh
# bench/contention/peers.sh: the peers' table of bench/contention — the same work as run.sh's
# verbs done by llama.cpp (llama-cpp-python), PyTorch (transformers), CTranslate2 and
# faster-whisper (bench/contention/peers.py), at 2 threads (this box's vCPUs, attn's default)
# and 1 thread, quiet and with 1 and 2 competing busy loops (lib.sh), in one run. Prints a
# markdown table: in-process seconds of the work (model loading excluded, best of REPEAT) and
# the 2-thread / 1-thread speed ratio in the same conditions.
#
#   LLAMA_PY=/work/venv-llama/bin/python TORCH_PY=/work/venv-peers/bin/python CT2_PY=/work/venv-reliab/bin/python \
#     sh bench/contention/peers.sh
#   SMALL=1 REPEAT=1 ... sh bench/contention/peers.sh     checks the script end to end
# Needs: the three pythons (peers never run in CI); the inputs of run.sh. Run it alone.
set -eu
cd "$(dirname "$0")/../.."
REPEAT=${REPEAT:-3}
SMALL=${SMALL:-0}
WORK=${WORK:-"generate chat embed classify translate transcribe"}
COMPETE=${COMPETE:-"0 1 2"}
OUT=${OUT:-build/contention}
LLAMA_PY=${LLAMA_PY:-/work/venv-llama/bin/python}
TORCH_PY=${TORCH_PY:-/work/venv-peers/bin/python}
CT2_PY=${CT2_PY:-/work/venv-reliab/bin/python}
mkdir -p "$OUT"
. bench/contention/lib.sh
trap 'stop_busy' EXIT INT TERM

py_of() {
  case $1 in
    generate | chat) echo "$LLAMA_PY" ;;
    embed | classify) echo "$TORCH_PY" ;;
    *) echo "$CT2_PY" ;;
  esac
}

echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs"
echo "$(date -u '+%F %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg); REPEAT=$REPEAT SMALL=$SMALL"
echo
echo "| work (peer) | competitors | threads | seconds (best of $REPEAT) | what | 2 threads / 1 thread |"
echo "|---|---:|---|---:|---|---:|"
for c in $COMPETE; do
  start_busy "$c"
  sleep 0.5
  for w in $WORK; do
    t1=""
    for th in 1 2; do
      best=""
      r=0
      while [ $r -lt "$REPEAT" ]; do
        NIMG=$NIMG "$(py_of "$w")" bench/contention/peers.py "$w" "$th" "$OUT" > "$OUT/peer.txt" 2> "$OUT/peer_err.txt" ||
          { echo "$w failed:" >&2; tail -n 3 "$OUT/peer_err.txt" >&2; exit 1; }
        s=$(sed -n 's/.* seconds=\([0-9.]*\).*/\1/p' "$OUT/peer.txt")
        what=$(sed -n 's/.* rate=//p' "$OUT/peer.txt")
        if [ -z "$best" ] || [ "$(echo "$s < $best" | bc -l)" = 1 ]; then best=$s; fi
        r=$((r + 1))
      done
      if [ "$th" = 1 ]; then t1=$best; ratio=""; else ratio=$(printf '%.2fx' "$(echo "$t1 / $best" | bc -l)"); fi
      printf '| %s | %s | %s | %.3f | %s | %s |\n' "$w" "$c" "$th" "$best" "$what" "$ratio"
    done
  done
  stop_busy
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
