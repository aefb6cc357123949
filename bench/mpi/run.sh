#!/bin/sh
# bench/mpi/run.sh [counts|timing] — attn_sdpa_ring at P = 1, 2, 4 (bench/mpi/README.md).
#   counts (default): bytes moved, scratch and peak memory per rank, scored pairs (the causal
#           balance) and the float64 check of sampled rows; quick, and the counts do not depend
#           on the machine's load (compute_s / wait_s printed alongside do).
#   timing: the same at larger L with 3 repetitions, for compute / exposed-wait (overlap) on a
#           QUIET machine with at least P free cores (take the lock: flock -x /work/bench.lock).
# Then the memory-cap case: L = 32768 that one process cannot hold in 48 MiB, computed by 4 ranks.
set -eu
cd "$(dirname "$0")/../.."
make -s bench-mpi
B=${BUILD:-build}/bench/bench_ring
M="timeout 600 mpirun --oversubscribe --allow-run-as-root -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1"
mode=${1:-counts}
if [ "$mode" = counts ]; then L=4096; R=1; else L=16384; R=3; fi
for P in 1 2 4; do
  for lay in striped contiguous; do
    r=0; while [ $r -lt $R ]; do $M -np $P "$B" $L 8 64 1 0 $lay; r=$((r + 1)); done
  done
  $M -np $P "$B" $L 8 64 0 0 striped
done
echo "--- memory cap: 48 MiB per rank"
$M -np 1 "$B" 32768 2 64 1 48 || true
$M -np 4 "$B" 32768 2 64 1 48
