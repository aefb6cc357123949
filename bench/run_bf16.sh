#!/bin/sh
# Issue #13 benchmark: attn (`attn bench sdpa`, in-process) in float32 and bfloat16 against
# torch.nn.functional.scaled_dot_product_attention in float32 and bfloat16, interleaved per
# configuration in one run, 2 threads, H = 8, B = 1; plus `attn sdpa` end to end (whole process,
# .npy in and out) against the in-process kernel. Prints the machine, the load before and after,
# which kernel path each attn number used, and a markdown table (raw lines under build/bench/).
#
#   sh bench/run_bf16.sh              (MIN_TIME=1 s per measurement, REPEAT=2 sweeps, best kept)
# Needs: make, /work/venv (or PYTHON) with torch and numpy. Never run by CI.
set -eu
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/work/venv/bin/python}
MIN_TIME=${MIN_TIME:-1}
REPEAT=${REPEAT:-2}
T=${THREADS:-2}
make "$BUILD/attn" >/dev/null
mkdir -p "$BUILD/bench"
RAW="$BUILD/bench/bf16_raw.txt"
: > "$RAW"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) vCPUs; flags: $(grep -o -w 'avx2\|fma\|f16c\|avx512f\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "torch: $($PYTHON -c 'import torch; print(torch.__version__, "CPU capability", torch.backends.cpu.get_cpu_capability())')"
echo "date: $(date -u '+%F %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Lq Lk D causal
CONFIGS=${CONFIGS:-"128:128:64:0 128:128:64:1 4096:4096:64:0 4096:4096:64:1 4096:4096:128:0 4096:4096:128:1 1:4096:128:0"}
for r in $(seq "$REPEAT"); do
  for c in $CONFIGS; do
    Lq=${c%%:*}; rest=${c#*:}; Lk=${rest%%:*}; rest=${rest#*:}; D=${rest%%:*}; causal=${rest#*:}
    cf=""; [ "$causal" = 1 ] && cf="--causal"
    for dt in fp32 bf16; do
      "$BUILD/attn" bench sdpa --Lq "$Lq" --L "$Lk" --D "$D" --H 8 --threads "$T" --dtype "$dt" $cf --min-time "$MIN_TIME" \
        | grep '^sdpa ' >> "$RAW"
      $PYTHON bench/torch_sdpa_dtype.py --min-time "$MIN_TIME" "$Lq:$Lk:$D:8:$causal:$T:$dt" >> "$RAW"
    done
  done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

# end to end: attn sdpa on .npy files (L = 4096, D = 64) vs the in-process kernel
E2E="$BUILD/bench/e2e"
mkdir -p "$E2E"
$PYTHON -c "
import numpy as np
r = np.random.default_rng(1)
for n in 'qkv': np.save('$E2E/' + n + '.npy', (r.random((1, 8, ${E2E_L:-4096}, 64), dtype=np.float32) * 2 - 1))
"
best_e2e=1e9
for r in 1 2 3; do
  s=$(date +%s.%N)
  "$BUILD/attn" sdpa -q "$E2E/q.npy" -k "$E2E/k.npy" -v "$E2E/v.npy" -o "$E2E/o.npy" --threads "$T"
  e=$(date +%s.%N)
  best_e2e=$(awk -v a="$best_e2e" -v s="$s" -v e="$e" 'BEGIN { d = e - s; print (d < a ? d : a) }')
done
kern=$("$BUILD/attn" bench sdpa --L ${E2E_L:-4096} --D 64 --H 8 --threads "$T" --min-time "$MIN_TIME" | grep '^sdpa ' | sed 's/.*best_ms=\([0-9.]*\).*/\1/')
echo "e2e: attn sdpa L=${E2E_L:-4096} D=64 H=8, whole process best of 3: ${best_e2e} s; kernel best ${kern} ms; ratio kernel/e2e = $(awk -v a="$kern" -v b="$best_e2e" 'BEGIN { printf "%.2f", a / 1000 / b }')"

echo
echo "| Lq | Lk | D | causal | attn fp32 GFLOP/s | torch fp32 GFLOP/s | attn bf16 GFLOP/s | torch bf16 GFLOP/s | attn bf16 / torch bf16 | attn fp32 / torch fp32 | attn kernel path (bf16) |"
echo "|---:|---:|---:|:---:|---:|---:|---:|---:|---:|---:|---|"
for c in $CONFIGS; do
  Lq=${c%%:*}; rest=${c#*:}; Lk=${rest%%:*}; rest=${rest#*:}; D=${rest%%:*}; causal=${rest#*:}
  best() { # $1 = attn|torch, $2 = dtype: best GFLOP/s over the sweeps
    if [ "$1" = attn ]; then
      grep "^sdpa B=1 H=8 Hkv=8 Lq=$Lq Lk=$Lk D=$D causal=$causal dtype=$2 " "$RAW" | sed 's/.*GFLOP\/s=//' | sort -g | tail -n 1
    else
      awk -v lq="$Lq" -v lk="$Lk" -v d="$D" -v c="$causal" -v dt="$2" '$1 == "torch" && $3 == lq && $4 == lk && $5 == d && $7 == c && $9 == dt { print $12 }' "$RAW" | sort -g | tail -n 1
    fi
  }
  af=$(best attn fp32); tf=$(best torch fp32); ab=$(best attn bf16); tb=$(best torch bf16)
  path=$(grep "^sdpa B=1 H=8 Hkv=8 Lq=$Lq Lk=$Lk D=$D causal=$causal dtype=bf16 " "$RAW" | head -n 1 | sed 's/.*kernel="\([^"]*\)".*/\1/')
  ms=""
  [ "$Lq" = 1 ] && ms=" (ms: attn fp32 $(grep "^sdpa B=1 H=8 Hkv=8 Lq=1 Lk=$Lk D=$D causal=$causal dtype=fp32 " "$RAW" | sed 's/.*best_ms=\([0-9.]*\).*/\1/' | sort -g | head -n 1), bf16 $(grep "^sdpa B=1 H=8 Hkv=8 Lq=1 Lk=$Lk D=$D causal=$causal dtype=bf16 " "$RAW" | sed 's/.*best_ms=\([0-9.]*\).*/\1/' | sort -g | head -n 1); torch fp32 $(awk -v lk="$Lk" -v d="$D" '$1 == "torch" && $3 == 1 && $4 == lk && $5 == d && $9 == "fp32" { print $10 }' "$RAW" | sort -g | head -n 1), bf16 $(awk -v lk="$Lk" -v d="$D" '$1 == "torch" && $3 == 1 && $4 == lk && $5 == d && $9 == "bf16" { print $10 }' "$RAW" | sort -g | head -n 1))"
  echo "| $Lq | $Lk | $D | $causal | $af | $tf | $ab | $tb | $(awk -v a="$ab" -v b="$tb" 'BEGIN { printf "%.2f", a / b }') | $(awk -v a="$af" -v b="$tf" 'BEGIN { printf "%.2f", a / b }') | $path$ms |"
done
