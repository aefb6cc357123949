#!/bin/sh
# Benchmark attn_sdpa (fused kernel, and the reference path on small L) against PyTorch's
# torch.nn.functional.scaled_dot_product_attention on the CPU, and measure the peak resident
# memory of `attn sdpa` on L = 32768. Prints a markdown table (also saved, with the raw lines,
# under $BUILD/bench/).
#
#   sh bench/run_bench.sh            full run: 3 sweeps, about 4 minutes on 2 cores
#   sh bench/run_bench.sh --quick    L <= 1024 only, shorter timings, one sweep
#
# Environment: BUILD (default build), CC (default cc), MIN_TIME (seconds per measurement,
# default 1.0), REPEAT (sweeps over all shapes, default 3; each table entry is the best sweep,
# and attn and torch are interleaved per sweep so both see the same machine conditions). bench_sdpa is compiled here against $BUILD/libattn.a (made first if needed), so no
# Makefile rule is required:
#   cc -O2 -std=c11 -fopenmp -Iinclude -Isrc bench/bench_sdpa.c build/libattn.a -lopenblas -lm
# Every number is the best of several repetitions (the machine may be shared; see README.md).
# The machine and compiler are printed first.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CC=${CC:-cc}
MIN_TIME=${MIN_TIME:-1.0}
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1

make "$BUILD/libattn.a" "$BUILD/attn" >/dev/null 2>&1 || echo "warning: 'make $BUILD/libattn.a $BUILD/attn' failed; using the existing build" >&2
mkdir -p "$BUILD/bench"
BIN="$BUILD/bench/bench_sdpa"
# shellcheck disable=SC2046
$CC -O2 -std=c11 -D_GNU_SOURCE -fopenmp -Iinclude -Isrc -I/usr/include/x86_64-linux-gnu/openblas-pthread \
    bench/bench_sdpa.c "$BUILD/libattn.a" $(pkg-config --libs libcjson libutf8proc libpng pangocairo cairo 2>/dev/null) \
    -lopenblas -lm -o "$BIN"

echo "# $(lscpu | grep 'Model name' | sed 's/  */ /g'); $(nproc) CPUs; $($CC --version | head -n 1); torch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)" >&2
RAW="$BUILD/bench/results.txt"
: > "$RAW"
H=8
B=1
if [ $QUICK = 1 ]; then LS="128 512 1024"; MIN_TIME=0.3; REPEAT=${REPEAT:-1}; else LS="128 512 1024 4096"; REPEAT=${REPEAT:-3}; fi

rep=0
while [ $rep -lt "$REPEAT" ]; do
rep=$((rep + 1))
echo "# sweep $rep of $REPEAT" >&2
TORCH_SHAPES=""
for L in $LS; do
  for D in 64 128; do
    for C in 0 1; do
      for T in 1 2; do
        flag=""; [ $C = 1 ] && flag="--causal"
        "$BIN" $flag --threads $T --min-time "$MIN_TIME" "$L" "$D" $H $B | tee -a "$RAW"
        if [ "$L" -le 512 ]; then
          "$BIN" --impl reference $flag --threads $T --min-time 0.5 --max-reps 3 "$L" "$D" $H $B | tee -a "$RAW"
        fi
        TORCH_SHAPES="$TORCH_SHAPES $L:$D:$H:$B:$C:$T"
      done
    done
  done
done
if [ $QUICK = 0 ]; then # L = 16384: one head, 2 threads
  for D in 64 128; do
    for C in 0 1; do
      flag=""; [ $C = 1 ] && flag="--causal"
      "$BIN" $flag --threads 2 --min-time "$MIN_TIME" --max-reps 3 16384 "$D" 1 1 | tee -a "$RAW"
      TORCH_SHAPES="$TORCH_SHAPES 16384:$D:1:1:$C:2"
    done
  done
fi
# shellcheck disable=SC2086
python3 bench/torch_sdpa.py --min-time "$MIN_TIME" --max-reps 10 $TORCH_SHAPES | tee -a "$RAW" || echo "warning: torch benchmark failed" >&2
done

# peak resident memory of the CLI on L = 32768, D = 64, one head, causal
MEM=""
if [ $QUICK = 0 ] && [ -x "$BUILD/attn" ] && [ -x /usr/bin/time ]; then
  TMP=$(mktemp -d)
  python3 -c "
import numpy as np, sys
rng = np.random.default_rng(0)
for n in 'qkv': np.save(sys.argv[1] + '/' + n + '.npy', rng.standard_normal((32768, 64), dtype=np.float32))
" "$TMP"
  /usr/bin/time -v "$BUILD/attn" sdpa -q "$TMP/q.npy" -k "$TMP/k.npy" -v "$TMP/v.npy" -o "$TMP/o.npy" --causal \
      --impl fused 2> "$TMP/time.txt" >/dev/null || true
  MEM=$(grep "Maximum resident" "$TMP/time.txt" | awk '{print $NF}')
  WALL=$(grep "Elapsed (wall" "$TMP/time.txt" | awk '{print $NF}')
  echo "cli_mem L=32768 D=64 H=1 causal max_rss_kib=$MEM wall=$WALL" | tee -a "$RAW"
  rm -rf "$TMP"
fi

python3 - "$RAW" <<'EOF' | tee "$BUILD/bench/results.md"
import sys
rows = {}
mem = None
for line in open(sys.argv[1]):
    f = line.split()
    if not f:
        continue
    if f[0] == "cli_mem":
        mem = line.strip()
        continue
    impl = f[0]
    B, H, Lq, Lk, D, causal, thr = (int(x) for x in f[2:9])
    gf = float(f[11])
    r = rows.setdefault((Lk, D, H, causal, thr), {})
    r[impl] = max(gf, r.get(impl, 0.0))  # best over the repeated sweeps
print("| L | D | H | causal | threads | attn fused GFLOP/s | torch SDPA GFLOP/s | fused / torch | causal / non-causal (fused) | attn reference GFLOP/s |")
print("|---:|---:|---:|:---:|---:|---:|---:|---:|---:|---:|")
for key in sorted(rows, key=lambda k: (k[0], k[1], k[4], k[3])):
    L, D, H, c, t = key
    r = rows[key]
    fu, to, rf = r.get("fused"), r.get("torch"), r.get("reference")
    nc = rows.get((L, D, H, 0, t), {}).get("fused")
    ratio = f"{fu / to:.2f}" if fu and to else "-"
    cr = f"{fu / nc:.2f}" if c and fu and nc else ""
    fmt = lambda x: f"{x:.1f}" if x else "-"
    print(f"| {L} | {D} | {H} | {'yes' if c else 'no'} | {t} | {fmt(fu)} | {fmt(to)} | {ratio} | {cr} | {fmt(rf)} |")
if mem:
    print()
    print("`attn sdpa` peak memory: " + mem)
EOF
