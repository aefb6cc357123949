#!/bin/sh
# bench/contention: each main verb at its default thread count against --threads 1, on a quiet
# machine and with 1 and 2 competing CPU-bound processes (busy loops this script starts and
# kills), all in one run. Prints a markdown table: wall seconds (best of REPEAT) per verb,
# competitors and threads, the verb's own rate line, the default/1-thread speed ratio, and what
# attn's thread pool did (ATTN_POOL_STATS=1: parallel jobs, serial jobs, fallbacks to one thread).
# The target (issue 24): with competitors, default >= 0.9x of --threads 1; quiet, unchanged or better.
#
#   sh bench/contention/run.sh                 full run (run it alone on the machine)
#   SMALL=1 REPEAT=1 sh bench/contention/run.sh   a few seconds per cell: checks the script end to end
#   VERBS="generate transcribe" COMPETE="0 2" sh bench/contention/run.sh   a subset
#
# Needs: make; the models of scripts/setup.sh (models/, ../shared/models); the Fashion-MNIST
# test set in /usr/share/datasets/fashion-mnist for classify; alsa-utils' Front_Center.wav.
set -eu
cd "$(dirname "$0")/../.."
REPEAT=${REPEAT:-3}
SMALL=${SMALL:-0}
VERBS=${VERBS:-"generate chat embed classify translate transcribe"}
COMPETE=${COMPETE:-"0 1 2"}
case $REPEAT in '' | *[!0-9]*) REPEAT_OK=0 ;; *) [ "$REPEAT" -ge 1 ] && REPEAT_OK=1 || REPEAT_OK=0 ;; esac
[ "$REPEAT_OK" = 1 ] || { echo "REPEAT must be a positive integer, got '$REPEAT'" >&2; exit 2; }
for v in $VERBS; do
  case $v in generate | chat | embed | classify | translate | transcribe) ;; *) echo "unknown verb '$v' (generate chat embed classify translate transcribe)" >&2; exit 2 ;; esac
done
for c in $COMPETE; do
  case $c in '' | *[!0-9]*) echo "COMPETE takes counts of busy loops (0 1 2), got '$c'" >&2; exit 2 ;; esac
  # more busy loops than 4 a CPU measure nothing new and can leave the machine unusable
  [ "${#c}" -le 4 ] && [ "$c" -le $((4 * $(nproc))) ] || { echo "COMPETE: at most $((4 * $(nproc))) busy loops (4 a CPU), got $c" >&2; exit 2; }
done
A=${ATTN:-./build/attn}  # ATTN=PATH: another build of attn (an A/B)
OUT=${OUT:-build/contention}
make -s -j2 build/attn >/dev/null
mkdir -p "$OUT"

LLM=models/SmolLM2-135M-Instruct.Q4_1.gguf
. bench/contention/lib.sh

run_verb() { # $1 verb, $2 thread option ("" = default)
  case $1 in
    generate) $A generate --model $LLM -n $NTOK --temp 0 $2 < "$OUT/prompt.txt" ;;
    chat) $A chat --model $LLM -n $NTOK $2 "Write a short story about a robot who learns to paint." ;;
    embed) $A embed --model models/all-MiniLM-L6-v2 --batch 32 -o "$OUT/emb.npy" $2 < "$OUT/sentences.txt" ;;
    classify) $A classify --model models/vit-fashion-mnist --eval $FM/t10k-images-idx3-ubyte.gz $FM/t10k-labels-idx1-ubyte.gz \
                --limit $NIMG --batch 64 --no-progress $2 ;;
    translate) $A translate --model ../shared/models/aren-transliteration --batch 32 --no-progress $2 < "$OUT/words_n.txt" ;;
    transcribe) $A transcribe --model models/whisper-tiny.en --beam 5 $2 /usr/share/sounds/alsa/Front_Center.wav ;;
    *) echo "unknown verb $1" >&2; return 2 ;;
  esac
}

# the verb's own rate line (tokens/s, images/s, ...), if it prints one on stderr
rate_of() { grep -E 'tokens/s|images/s|sentences/s|words/s|real-time|/s' "$1" | tail -n 1 | tr '|' '/' | cut -c1-90; }

now() { date +%s.%N; }

# the busy loops end with the script, and a signal ends the script (a trap that only stopped the
# loops let a killed run go on, measuring "1 competitor" rows with none)
trap 'stop_busy' EXIT
trap 'stop_busy; exit 130' INT
trap 'stop_busy; exit 143' TERM
trap 'stop_busy; exit 129' HUP

flags=$(grep -m1 '^flags' /proc/cpuinfo | grep -o -w 'avx512f\|avx512_vnni\|avx512bw\|avx2\|fma\|f16c\|amx_tile' | sort -u | tr '\n' ' ')
case " $flags " in
  *" avx512_vnni "*) qpath=avx512vnni ;; *" avx2 "*) qpath=avx2 ;; *) qpath=portable ;;
esac
blas=$(python3 -c "import ctypes; l=ctypes.CDLL('libopenblas.so.0'); l.openblas_get_corename.restype=ctypes.c_char_p; print(l.openblas_get_corename().decode())" 2>/dev/null || echo "?")
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) vCPUs; flags: $flags"
echo "kernel paths: quantised products $qpath, f32/f16 skinny products $(case " $flags " in *" avx2 "*) echo avx2+fma+f16c ;; *) echo portable ;; esac), OpenBLAS core $blas"
echo "$(date -u '+%F %H:%M UTC'); load before: $(cut -d' ' -f1-3 /proc/loadavg); REPEAT=$REPEAT SMALL=$SMALL"
echo
echo "| verb | competitors | threads | wall s (best of $REPEAT) | verb's rate | default / 1 thread | median of the $REPEAT pairs | pool (parallel/serial/fallbacks) |"
echo "|---|---:|---|---:|---|---:|---:|---|"
for c in $COMPETE; do
  start_busy "$c"
  sleep 0.5
  for v in $VERBS; do
    # the two rows' runs alternate (1 thread, default, 1 thread, ...): the host's speed drifts
    # +-20% within a minute, and runs taken in turn see the same drift (REPEAT runs of one row
    # and then of the other measured the drift as much as the threads)
    best1=""; bestd=""; pairs=""
    r=0
    while [ $r -lt "$REPEAT" ]; do
      # and which goes first alternates too (with the same options in both places, the first run
      # of a round came out ~1% faster than the second: medians of 12 rounds, chat, 1 competitor)
      if [ $((r % 2)) = 0 ]; then order="1 default"; else order="default 1"; fi
      for o in $order; do
        if [ "$o" = 1 ]; then th="--threads 1"; else th=""; fi
        s=$(now)
        ATTN_POOL_STATS=1 run_verb "$v" "$th" > "$OUT/out.txt" 2> "$OUT/err.txt" || { echo "$v failed:" >&2; tail -n 3 "$OUT/err.txt" >&2; exit 1; }
        e=$(now)
        w=$(echo "$e - $s" | bc -l)
        if [ -n "$th" ]; then best=$best1; w1=$w; else best=$bestd; wd=$w; fi
        if [ -z "$best" ] || [ "$(echo "$w < $best" | bc -l)" = 1 ]; then
          rate=$(rate_of "$OUT/err.txt")
          pool=$(sed -n 's/^attn pool: \([0-9]*\) parallel jobs, \([0-9]*\) serial, \([0-9]*\) fallbacks.*/\1\/\2\/\3/p' "$OUT/err.txt")
          if [ -n "$th" ]; then best1=$w; rate1=$rate; pool1=$pool; else bestd=$w; rated=$rate; poold=$pool; fi
        fi
      done
      pairs="$pairs $(echo "$w1 / $wd" | bc -l)"
      r=$((r + 1))
    done
    # the median of the rounds' own ratios (a round: one run of each, taken one after the other)
    med=$(echo $pairs | tr ' ' '\n' | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}')
    printf '| %s | %s | %s | %.3f | %s | %s | %s | %s |\n' "$v" "$c" 1 "$best1" "${rate1:-}" "" "" "${pool1:-}"
    printf '| %s | %s | %s | %.3f | %s | %s | %s | %s |\n' "$v" "$c" default "$bestd" "${rated:-}" "$(printf '%.2fx' "$(echo "$best1 / $bestd" | bc -l)")" \
      "$(printf '%.2fx' "$med")" "${poold:-}"
  done
  stop_busy
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
