# bench/contention/lib.sh: what run.sh (attn) and peers.sh (its peers) share — the inputs (in
# $OUT, sized by SMALL) and the competing busy loops. Sourced from the repository root.
if [ "$SMALL" = 1 ]; then NTOK=8; NSENT=16; NIMG=128; NWORD=20; else NTOK=128; NSENT=1000; NIMG=3000; NWORD=4400; fi
# inputs
head -c 2000 bench/llama/prompt.txt > "$OUT/prompt.txt"
NP=$(grep -c "" tests/fixtures/parity_sentences.txt); i=0; : > "$OUT/sentences.txt"
while [ $i -lt "$NSENT" ]; do
  sed -n "$(( i % NP + 1 ))p" tests/fixtures/parity_sentences.txt >> "$OUT/sentences.txt"; i=$((i + 1))
done
: > "$OUT/words.txt"
while [ "$(wc -l < "$OUT/words.txt")" -lt "$NWORD" ]; do cat tests/fixtures/aren/words.txt >> "$OUT/words.txt"; done
head -n "$NWORD" "$OUT/words.txt" > "$OUT/words_n.txt"
FM=/usr/share/datasets/fashion-mnist

BUSY=""
start_busy() { # $1 = how many busy loops
  n=0
  while [ $n -lt "$1" ]; do
    sh -c 'while :; do :; done' & BUSY="$BUSY $!"
    n=$((n + 1))
  done
}
stop_busy() {
  for p in $BUSY; do kill "$p" 2>/dev/null || true; done
  for p in $BUSY; do wait "$p" 2>/dev/null || true; done
  BUSY=""
}
