#!/bin/sh
# Runs each test binary given as an argument, prints its output, and ends with the
# summary line "N passed, N failed" (assertions). Exits non-zero if any assertion
# failed or any binary crashed / exited non-zero.
passed=0; failed=0; bad=0
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  printf '%s\n' "$out"
  line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
  if [ -z "$line" ]; then
    echo "CRASH $t exited $rc without a RESULT line"; bad=$((bad + 1)); failed=$((failed + 1)); continue
  fi
  p=$(echo "$line" | sed 's/.*passed=\([0-9]*\).*/\1/'); f=$(echo "$line" | sed 's/.*failed=\([0-9]*\).*/\1/')
  passed=$((passed + p)); failed=$((failed + f))
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then echo "ERROR $t exited $rc"; bad=$((bad + 1)); failed=$((failed + 1)); fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$bad" -eq 0 ]
