#!/bin/sh
# Runs the Python package's tests (python/tests, pytest) against a built libattn.so and prints
# pytest's "RESULT passed=N failed=N" line for tests/run_tests.sh. Called by `make test` (and
# `make pytest`) with ATTN_LIBRARY set to $(BUILD)/libattn.so. Needs a python3 with numpy,
# pytest and cffi (Debian: python3-numpy python3-pytest python3-cffi; scripts/setup.sh
# installs them). A library built with SAN=1 is run under AddressSanitizer (preloaded).
cd "$(dirname "$0")/.." || exit 1
: "${ATTN_LIBRARY:=build/libattn.so}"
case "$ATTN_LIBRARY" in /*) ;; *) ATTN_LIBRARY="$PWD/$ATTN_LIBRARY" ;; esac
export ATTN_LIBRARY
if [ ! -f "$ATTN_LIBRARY" ]; then
  echo "python tests: $ATTN_LIBRARY not built (make lib)"; echo "RESULT passed=0 failed=1"; exit 1
fi
py=""
# .venv (scripts/setup.sh: --system-site-packages, with the openai package for test_serve) first
for c in "${PYTHON:-}" "$PWD/.venv/bin/python" /usr/bin/python3 python3; do
  [ -n "$c" ] || continue
  if "$c" -c "import numpy, pytest, cffi" >/dev/null 2>&1; then py=$c; break; fi
done
if [ -z "$py" ]; then
  echo "python tests: no python3 with numpy, pytest and cffi (run scripts/setup.sh)"
  echo "RESULT passed=0 failed=1"; exit 1
fi
if ldd "$ATTN_LIBRARY" 2>/dev/null | grep -q libasan; then
  asan=$(ldd "$ATTN_LIBRARY" | sed -n 's/.*libasan[^ ]* => \([^ ]*\).*/\1/p' | head -n 1)
  export LD_PRELOAD="$asan"
  export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
  export ATTN_SANITIZED=1  # the slowest model tests check fewer cases
fi
export PYTHONDONTWRITEBYTECODE=1
exec "$py" -m pytest -q -p no:cacheprovider python/tests
