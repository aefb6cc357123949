#!/bin/sh
# bench/gemm: OpenBLAS against BLIS on attn's encoder GEMM shapes, one thread each, side by side
# in one run (gemm_shapes.c). Needs libopenblas-dev (attn's set-up) and libblis-serial-dev
# (apt-get install libblis-serial-dev; not needed by attn itself). Run on a quiet machine:
#   sh bench/gemm/run.sh
set -eu
cd "$(dirname "$0")"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cc -O2 -I/usr/include/x86_64-linux-gnu/openblas-pthread gemm_shapes.c -o "$T/openblas" -lopenblas
cc -O2 -I/usr/include/x86_64-linux-gnu/blis-serial gemm_shapes.c -o "$T/blis" -L/usr/lib/x86_64-linux-gnu/blis-serial \
  -Wl,-rpath,/usr/lib/x86_64-linux-gnu/blis-serial -lblis
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') (family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ') model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')), $(nproc) vCPUs"
echo "OpenBLAS $(dpkg-query -W -f '${Version}' libopenblas0-pthread 2>/dev/null || echo '?') core $(OPENBLAS_VERBOSE=2 OPENBLAS_NUM_THREADS=1 "$T/openblas" x 2>&1 | sed -n 's/^Core: //p' | head -1), BLIS $(dpkg-query -W -f '${Version}' libblis4-serial 2>/dev/null || echo '?')"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
OPENBLAS_NUM_THREADS=1 "$T/openblas" openblas
"$T/blis" blis
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
